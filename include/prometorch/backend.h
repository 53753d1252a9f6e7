/* PromeTorch backend interface: how a device backend (memory plus kernels) is added to the
 * library at run time, from outside the source tree, and what its kernels may use.
 *
 * A backend is described by a pt_backend_desc (memory functions, an optional per-device
 * context, an optional supports() query and a list of kernels by op name) and handed to
 * pt_backend_register, which returns the device type its tensors get. From then on
 * pt_device_parse("<name>") / "<name>:<index>" names its devices, tensors are created on them
 * with the ordinary API (pt_empty, pt_to, ...) and every op whose front-end dispatches to a
 * kernel runs the backend's kernel for that op. The CUDA backend (libprometorch_cuda.so) is
 * added through this same interface. docs/backends.md has a complete example.
 *
 * Contract (see the comments of each field for the details):
 *   - ABI: desc.abi_version must be PT_BACKEND_ABI_VERSION of the headers the backend was
 *     compiled with; a different version is refused (PT_ERR_UNSUPPORTED, naming both
 *     versions), since the layout of pt_backend_desc or the kernel contracts may differ.
 *   - Context: context_create(index) runs on the first use of device <name>:<index> (its
 *     first allocation, transfer or kernel), once per index; every memory function and
 *     kernel gets that pointer (kernels through pt_call_context). context_destroy runs at
 *     library unload or from pt_backend_context_destroy.
 *   - Kernels: a kernel is registered per op name (pt_op_lookup gives the op's id) with the
 *     set of dtypes it accepts. Dispatch refuses, with PT_ERR_UNSUPPORTED, an op the backend
 *     has no kernel for ("no kernel for op 'conv2d' on device 'toy'") and a dtype outside the
 *     kernel's set or refused by supports() ("op 'mul' on device 'toy': dtype float64 not
 *     supported"), so a backend can fill any subset of ops and dtypes.
 *   - What a kernel sees: the op front-end has checked shapes, dtypes and devices, made the
 *     inputs fit the op's contract (broadcastable to, or expanded to, the output's shape) and
 *     allocated the outputs on the backend's device; the kernel reads pt_call_input /
 *     pt_call_scalar / pt_call_params and writes pt_call_output. Tensors may be strided
 *     views: a kernel reads pt_shape / pt_stride (in elements) from pt_device_data_ptr (which
 *     already includes pt_storage_offset).
 *
 * Op contracts (what each op's inputs, outputs and scalars mean) are given beside each op in
 * the library's op list and, for the ops a training step uses (copy, fill, add, mul, div, neg,
 * mm, bmm, sum, the elementwise losses), in docs/backends.md. Of those only the elementwise
 * losses take a params struct, pt_pointwise_loss_params below; the others pass everything in
 * pt_call_scalar. The params structs of the remaining ops with settings (convolution and
 * pooling, normalization and attention, cross_entropy / nll_loss, quantized and LLM kernels,
 * advanced indexing, random and some shape ops) are internal and may change, so an out-of-tree
 * backend cannot implement those ops yet: leave their slots empty and the library reports "no
 * kernel for op ..." for them, never a wrong answer.
 *
 * Thread safety: registration and context creation are serialized by the library; kernels
 * may be called from several threads at once on different tensors. */
#ifndef PROMETORCH_BACKEND_H
#define PROMETORCH_BACKEND_H

#include "ops_loss.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this interface. Bumped whenever pt_backend_desc, the kernel signature or an
 * op contract changes incompatibly. */
#define PT_BACKEND_ABI_VERSION 1

/* The arguments of one kernel call (opaque; read with the pt_call_* functions). */
typedef struct pt_kernel_call pt_kernel_call;

/* A kernel: computes the call's outputs from its inputs; returns PT_OK or an error status
 * with the message set by pt_backend_error. */
typedef pt_status (*pt_kernel_fn)(const pt_kernel_call *call);

/* A set of dtypes as a bit mask: PT_DTYPE_BIT(PT_FLOAT32) | PT_DTYPE_BIT(PT_FLOAT64). */
#define PT_DTYPE_BIT(dt) ((uint64_t)1 << (unsigned)(dt))
/* Every dtype: the kernel checks dtypes itself (returning PT_ERR_UNSUPPORTED / PT_ERR_DTYPE). */
#define PT_DTYPES_ANY ((uint64_t)0)

/* One kernel of a backend: the op by name ("add", "mm"; see pt_op_lookup), the function and
 * the dtypes it accepts. The dtype dispatch checks is the call's output dtype (of its first
 * output; of its first input for ops without outputs). */
typedef struct pt_backend_kernel {
    const char *op;
    pt_kernel_fn fn;
    uint64_t dtypes; /* PT_DTYPE_BIT(...) set, or PT_DTYPES_ANY */
} pt_backend_kernel;

/* A backend. Fields marked optional may be NULL. The library copies the struct and the kernel
 * list at registration; the strings and functions must stay valid while the library is
 * loaded. */
typedef struct pt_backend_desc {
    uint32_t abi_version; /* PT_BACKEND_ABI_VERSION */
    /* Device name: 1-15 characters [a-z0-9_], starting with a letter, not a name already
     * registered. A built-in name ("cuda", "e2k", "nmcard") gets that built-in device type when
     * no backend has it yet; any other name gets one of PT_DEVICE_PRIVATE_FIRST..LAST. */
    const char *name;
    /* Number of devices present (indices 0..count-1). Optional: NULL means one device. */
    int (*device_count)(void);
    /* Why there are no (or fewer) devices (optional): a short text the library appends to the
     * error of an operation on an absent device ("no driver: ..."); NULL or "" when unknown. */
    const char *(*absent_reason)(void);
    /* Per-device context (optional): called once, on the first use of device index `index`;
     * sets *ctx (NULL is allowed) and returns PT_OK, or returns an error (set with
     * pt_backend_error), which the operation that needed the device then reports. */
    pt_status (*context_create)(int index, void **ctx);
    /* Frees a context made by context_create (optional). */
    void (*context_destroy)(void *ctx);
    /* Memory of nbytes on the context's device; NULL on failure (the library reports
     * PT_ERR_OOM unless the function set a more precise error). nbytes may be 0. */
    void *(*alloc)(void *ctx, size_t nbytes);
    /* Frees what alloc returned (same nbytes). */
    void (*free)(void *ctx, void *p, size_t nbytes);
    /* Copies n bytes host -> device, device -> host and within the device. Synchronous: the
     * data is in place when the call returns. */
    pt_status (*copy_h2d)(void *ctx, void *dst, const void *src, size_t n);
    pt_status (*copy_d2h)(void *ctx, void *dst, const void *src, size_t n);
    pt_status (*copy_d2d)(void *ctx, void *dst, const void *src, size_t n);
    /* Waits for the device's outstanding work (optional). */
    pt_status (*synchronize)(void *ctx);
    /* Finer support query (optional): called after the dtype mask accepted `dtype` for op,
     * with the call about to run (NULL when asked through pt_backend_supports); false refuses
     * it with PT_ERR_UNSUPPORTED. */
    bool (*supports)(int op, pt_dtype dtype, const pt_kernel_call *call);
    const pt_backend_kernel *kernels; /* n_kernels entries */
    int n_kernels;
} pt_backend_desc;

/* Registers a backend. Returns its device type, or PT_DEVICE_TYPE_COUNT with the error set:
 * PT_ERR_UNSUPPORTED for an ABI version other than PT_BACKEND_ABI_VERSION, PT_ERR_INVALID_ARG
 * for a bad or taken name, a missing memory function or an unknown op name in the kernel list,
 * PT_ERR_RUNTIME when every private device type is taken. A registered backend stays for the
 * life of the process. Thread-safe. */
PT_API pt_device_type pt_backend_register(const pt_backend_desc *desc);

/* The id of an op by its name ("add", "mul", "mm", "sum", ...; the names in the .def files of
 * src/ops), or -1 with PT_ERR_INVALID_ARG. Ids are valid for this process only: look them up at run
 * time, never store them. */
PT_API int pt_op_lookup(const char *name);
/* The name of op id `op` ("?" for an invalid id). */
PT_API const char *pt_op_name(int op);

/* True if device type `type` has a kernel for op that accepts dtype (the kernel's dtype set
 * and the backend's supports(), asked with call NULL). No error is set. */
PT_API bool pt_backend_supports(pt_device_type type, int op, pt_dtype dtype);

/* The context of a device, creating it on first use (*ctx = NULL and an error if it cannot be
 * created or the device does not exist). */
PT_API pt_status pt_backend_context(pt_device dev, void **ctx);
/* Destroys the context of a device now (the next use creates a new one). The caller makes
 * sure no tensor of the device is alive and no kernel runs on it. PT_OK if it had none. */
PT_API pt_status pt_backend_context_destroy(pt_device dev);

/* ---- public params structs --------------------------------------------------------------- */

/* pt_call_params of the elementwise losses (mse_loss, l1_loss, smooth_l1_loss, huber_loss,
 * binary_cross_entropy[_with_logits], kl_div). The call has in = {input, target, weight or
 * NULL, pos_weight or NULL}, contiguous, of the output's dtype (float32 or float64) and one
 * common shape; out = {loss}: that shape for PT_REDUCTION_NONE, 0-dim otherwise holding the
 * sum of the elementwise losses, divided by `divisor` for MEAN and BATCHMEAN. */
typedef struct pt_pointwise_loss_params {
    pt_reduction reduction;
    double divisor;
    double beta;     /* smooth_l1 beta, huber delta */
    bool log_target; /* kl_div */
} pt_pointwise_loss_params;

/* ---- inside a kernel ------------------------------------------------------------------- */

PT_API int pt_call_op(const pt_kernel_call *c); /* the op id (pt_op_name gives its name) */
PT_API int pt_call_num_inputs(const pt_kernel_call *c);
PT_API int pt_call_num_outputs(const pt_kernel_call *c);
/* Input / output i (borrowed); NULL for an index out of range or an absent optional input. */
PT_API const pt_tensor *pt_call_input(const pt_kernel_call *c, int i);
PT_API pt_tensor *pt_call_output(const pt_kernel_call *c, int i);
/* Scalar setting i (0..3) of the call: alpha, a scalar operand, ... (op contracts). */
PT_API double pt_call_scalar(const pt_kernel_call *c, int i);
/* The op's params struct (NULL for ops without one; see the header comment). */
PT_API const void *pt_call_params(const pt_kernel_call *c);
/* The context of the device the call runs on (from context_create). */
PT_API void *pt_call_context(const pt_kernel_call *c);
/* The device the call runs on. */
PT_API pt_device pt_call_device(const pt_kernel_call *c);

/* Address of t's element 0 in its device's memory (storage base + storage offset), for any
 * device; a backend's kernels pass it to their device code. Borrowed. NULL with an error for
 * a NULL tensor. Unlike pt_data_ptr it does not refuse non-CPU tensors: never dereference it
 * on the host unless the backend's memory is host memory. */
PT_API void *pt_device_data_ptr(const pt_tensor *t);

/* Stores v at dst in dtype dt (a plain dtype) exactly as the CPU kernels convert a double: the
 * fill kernel's value, a scalar operand. Float dtypes round to nearest; integers truncate
 * toward zero and wrap like a C cast of the int64 value; bool is v != 0. */
PT_API void pt_dtype_store(void *dst, pt_dtype dt, double v);

/* Sets this thread's error (printf format) and returns st: how a kernel or memory function
 * reports a failure. The message should name the op, the dtypes/shapes and the device. */
PT_API pt_status pt_backend_error(pt_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
