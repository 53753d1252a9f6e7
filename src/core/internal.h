/* Internal core definitions shared by every part of the library (never installed): the
 * tensor and storage structs, dtype facts, the backend vtable, the op list, errors,
 * scopes, allocation and the thread pool. Names shared between files start with `pti_`. */
#ifndef PT_CORE_INTERNAL_H
#define PT_CORE_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>

#include "prometorch/prometorch.h"

/* ---- storage and tensor -------------------------------------------------------------------- */

struct pt_backend;

typedef struct pt_storage {
    atomic_long refcount;
    void *data; /* device pointer (host pointer for CPU) */
    size_t nbytes;
    pt_device device;
    const struct pt_backend *backend;
    /* Non-NULL for memory the library does not own (mmap, user buffers): called instead of
     * the backend's free. */
    void (*external_free)(void *ctx, void *data);
    void *external_ctx;
    atomic_uint version; /* bumped by in-place writes; autograd checks it */
} pt_storage;

struct pt_tensor {
    atomic_long refcount;
    pt_storage *storage;
    int64_t offset; /* in elements */
    int ndim;
    pt_dtype dtype;
    int64_t shape[PT_MAX_DIMS];
    int64_t stride[PT_MAX_DIMS]; /* in elements */
    int64_t numel;
    /* autograd (engine in src/autograd): a leaf has requires_grad and no grad_fn; a result of
     * a recorded op has grad_fn (a retained pti_node) and output_nr (which of its outputs). */
    bool requires_grad;
    bool retains_grad; /* a non-leaf whose .grad is kept (pt_retain_grad) */
    bool is_view;      /* made by a view op over another tensor's storage (pti_tensor_view) */
    /* A view's base: the non-view tensor it was made from, through any chain of views (a
     * retained reference, so an in-place write through the view can rebase the base's
     * autograd history, PyTorch's CopySlices); NULL for a tensor that is not a view. */
    pt_tensor *view_base;
    int32_t output_nr;
    pt_tensor *grad;
    void *grad_fn;
    void *hooks; /* pti_hook list (src/autograd/hooks.c), NULL when none */
    /* scope bookkeeping: slot in this thread's scope list, -1 when not tracked */
    int32_t scope_slot;
};

/* ---- dtypes ---------------------------------------------------------------------------------- */

typedef struct pti_dtype_info {
    const char *name;
    size_t size;        /* bytes per element, or per block for block types */
    int64_t block_size; /* 1 for plain types */
    bool is_floating, is_integral, is_block;
} pti_dtype_info;

extern const pti_dtype_info pti_dtypes[PT_DTYPE_COUNT];

static inline bool pti_dtype_valid(pt_dtype dt)
{
    return (unsigned)dt < PT_DTYPE_COUNT;
}

/* Bytes needed for numel elements of dt laid out contiguously (whole blocks for blocks). */
size_t pti_dtype_nbytes(pt_dtype dt, int64_t numel);

/* ---- errors -----------------------------------------------------------------------------------
 */

/* Sets the thread-local error (printf format) and returns st. */
pt_status pti_error(pt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, returning NULL, for functions that return pointers. */
void *pti_error_null(pt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* For a NULL tensor argument: keeps an earlier error if one is set (the usual cause),
 * otherwise records PT_ERR_NULL naming the op and argument. Returns the status now set. */
pt_status pti_null_arg(const char *op, const char *arg);
/* "[2, 3]" for a shape; thread-local rotating buffers, valid for the next 8 calls. */
const char *pti_shape_str(int ndim, const int64_t *shape);
/* "[2, 3] float32 cpu" for a tensor (same buffers). */
const char *pti_tensor_desc(const pt_tensor *t);

/* Argument check for op front-ends: returns false (and sets the error) when t is NULL. */
#define PTI_CHECK_ARG(t, op, argname) ((t) != NULL || (pti_null_arg((op), (argname)), false))

/* ---- devices and backends ---------------------------------------------------------------------
 */

/* The op list: src/ops/ops.def includes one .def per family, each a list of PT_OP(name). */
typedef enum pti_op {
#define PT_OP(name) PTI_OP_##name,
#include "../ops/ops.def"
#undef PT_OP
    PTI_OP_COUNT
} pti_op;

extern const char *const pti_op_names[PTI_OP_COUNT];

/* Arguments of one kernel call. The front-end has checked shapes/dtypes/devices, allocated
 * the outputs and put op-specific settings in `params` (a struct its family defines).
 * pti_dispatch fills `op` and `ctx`. The struct tag is the public pt_kernel_call
 * (prometorch/backend.h), so an out-of-tree kernel and an in-tree one have one type. */
#define PTI_MAX_IN 8
#define PTI_MAX_OUT 4
typedef struct pt_kernel_call {
    pti_op op;
    int n_in, n_out;
    const pt_tensor *in[PTI_MAX_IN];
    pt_tensor *out[PTI_MAX_OUT];
    const void *params;
    double scalar[4]; /* small numeric settings (alpha, a scalar operand, ...) */
    void *ctx;        /* the device's backend context (pt_backend_desc.context_create) */
} pti_call;

typedef pt_status (*pti_kernel)(const pti_call *c);

/* A device backend: memory functions plus one kernel slot per op (NULL = unsupported), with
 * the dtypes each slot accepts (kernel_dtypes[op], a PT_DTYPE_BIT mask; 0 = any, the kernel
 * checks). Memory functions and kernels (through pti_call.ctx) get the per-device context
 * made by context_create on the device's first use. The public form is pt_backend_desc
 * (prometorch/backend.h); pt_backend_register turns one into this. */
typedef struct pt_backend {
    const char *name;
    pt_device_type type;
    uint32_t abi_version; /* PT_BACKEND_ABI_VERSION */
    int (*device_count)(void);
    const char *(*absent_reason)(void);                 /* optional */
    pt_status (*context_create)(int index, void **ctx); /* optional */
    void (*context_destroy)(void *ctx);                 /* optional */
    void *(*alloc)(void *ctx, size_t nbytes);           /* NULL on failure */
    void (*free)(void *ctx, void *p, size_t nbytes);
    pt_status (*copy_h2d)(void *ctx, void *dst, const void *src, size_t n);
    pt_status (*copy_d2h)(void *ctx, void *dst, const void *src, size_t n);
    pt_status (*copy_d2d)(void *ctx, void *dst, const void *src, size_t n);
    pt_status (*synchronize)(void *ctx);
    bool (*supports)(int op, pt_dtype dtype, const pti_call *c); /* optional */
    pti_kernel kernels[PTI_OP_COUNT];
    uint64_t kernel_dtypes[PTI_OP_COUNT];
} pt_backend;

/* Registers an in-tree backend at library load (its type fixed by b->type; b stays owned by
 * the caller). Out-of-tree backends use pt_backend_register. */
void pti_backend_register(const pt_backend *b);
/* The backend of d's type, or NULL for an absent type. Asking for "cuda" loads the CUDA
 * backend's shared object on first use (device.c). */
const pt_backend *pti_backend_for(pt_device d);
/* PT_OK if device d exists (its backend is present and the index below its device count);
 * otherwise PT_ERR_DEVICE saying what is missing (for cuda: the shared object and why). */
pt_status pti_device_check(pt_device d);
/* The context of device d (created on first use), or an error naming the device. */
pt_status pti_device_ctx(pt_device d, void **ctx);

/* Memory of a storage's device through its backend, with the device's context: allocation
 * (NULL + error on failure), release and the three copies. */
void *pti_device_alloc(pt_device d, size_t nbytes);
void pti_device_free(pt_device d, void *p, size_t nbytes);
pt_status pti_copy_h2d(pt_device d, void *dst, const void *src, size_t n);
pt_status pti_copy_d2h(pt_device d, void *dst, const void *src, size_t n);
pt_status pti_copy_d2d(pt_device d, void *dst, const void *src, size_t n);

/* Runs op on the backend of c->out[0] (or c->in[0]). A missing kernel or a dtype the kernel
 * does not accept gives PT_ERR_UNSUPPORTED naming the op, the device and the dtype. Inputs
 * and outputs must share a device (front-ends check with pti_check_same_device). */
pt_status pti_dispatch(pti_op op, pti_call *c);
/* Checks that all non-NULL tensors are on one device; names op on failure. */
bool pti_check_same_device(const char *op, int n, const pt_tensor *const *ts);

/* ---- storage and tensor construction -----------------------------------------------------------
 */

pt_storage *pti_storage_new(pt_device dev, size_t nbytes);
/* A storage over memory owned elsewhere; free_fn(ctx, data) runs when the last ref goes. */
pt_storage *pti_storage_wrap(pt_device dev, void *data, size_t nbytes,
                             void (*free_fn)(void *, void *), void *ctx);
void pti_storage_retain(pt_storage *s);
void pti_storage_release(pt_storage *s);

/* A new contiguous tensor with fresh (uninitialized) storage; tracked by the current scope. */
pt_tensor *pti_tensor_new(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev);
/* A view on `base`'s storage with the given geometry (validated against the storage size);
 * tracked by the current scope. */
pt_tensor *pti_tensor_view(const pt_tensor *base, int ndim, const int64_t *shape,
                           const int64_t *stride, int64_t offset);
/* Same, on a storage directly (takes a new reference to s). */
pt_tensor *pti_tensor_on_storage(pt_storage *s, pt_dtype dt, int ndim, const int64_t *shape,
                                 const int64_t *stride, int64_t offset);
void pti_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
int64_t pti_shape_numel(int ndim, const int64_t *shape);
/* Validates a user shape (ndim in range, dims >= 0, numel fits); names op on failure. */
bool pti_check_shape(const char *op, int ndim, const int64_t *shape);

/* Pointer to element 0 of a CPU tensor (storage base + offset). */
static inline void *pti_data(const pt_tensor *t)
{
    return (char *)t->storage->data + t->offset * (int64_t)pti_dtypes[t->dtype].size;
}
static inline bool pti_is_cpu(const pt_tensor *t)
{
    return t->storage->device.type == PT_DEVICE_CPU;
}
bool pti_is_contiguous(const pt_tensor *t);
/* Marks an in-place write to t's storage (version counter for autograd). */
static inline void pti_bump_version(pt_tensor *t)
{
    atomic_fetch_add_explicit(&t->storage->version, 1, memory_order_relaxed);
}

/* Drops one reference without touching scopes. Library code that holds a reference it took
 * with pt_retain (autograd saved tensors, module parameters) releases it with this; tensors
 * a function created itself are released with pt_release. */
void pti_unref(pt_tensor *t);

/* What pti_unref calls when a tensor with autograd state (grad_fn or hooks) dies: drops its
 * node reference, hooks and retain-grad registration. The graph layer (src/graph/node.c)
 * registers it when the library loads, so core never calls up into autograd. */
typedef void (*pti_tensor_death_fn)(pt_tensor *t);
void pti_set_tensor_death_hook(pti_tensor_death_fn fn);

/* ---- data movement without autograd (src/core/copy.c) -------------------------------------------
 * The differentiable front-ends (pt_copy_, pt_fill_, pt_to, pt_contiguous, ...) are ops
 * (src/ops/convert.c) and record nodes; these only move data, for core and for those ops. */

/* Fills t with v through the fill kernel and bumps its version; a block dtype is an error
 * naming `op`. */
pt_status pti_fill_data(const char *op, pt_tensor *t, double v);
/* Copies src into dst on the same device (src broadcast to dst's shape; dtypes converted by
 * the copy kernel; block dtypes only whole and contiguous). Does not bump dst's version. */
pt_status pti_copy_same_device(pt_tensor *dst, const pt_tensor *src, const char *op);
/* A contiguous tensor with t's values: an alias when t already is, else a copy. */
pt_tensor *pti_contiguous_data(const pt_tensor *t);
/* t's values on dev (an alias when already there, else a contiguous copy). */
pt_tensor *pti_to_device(const pt_tensor *t, pt_device dev);

/* ---- scopes ------------------------------------------------------------------------------------
 */

void pti_scope_track(pt_tensor *t);
/* Removes t from this thread's scope if tracked there; returns true if it was. */
bool pti_scope_untrack(pt_tensor *t);
/* Frees this thread's scope list (call when a thread that used scopes exits, with no scope
 * open; the list is kept between scopes so that steady loops do not allocate). */
void pti_scope_thread_exit(void);

/* ---- CPU memory --------------------------------------------------------------------------------
 */

/* 64-byte aligned, cached by size class; no system call in a steady-state loop. */
void *pti_cpu_alloc(size_t nbytes);
void pti_cpu_free(void *p, size_t nbytes);
/* Zeroed blocks from the same cache whose size is remembered, freed by pti_scratch_free
 * (usable as an autograd node's ctx_free): recording a steady-state training step makes no
 * malloc call. Sets PT_ERR_OOM on failure. */
void *pti_scratch_alloc(size_t nbytes);
void pti_scratch_free(void *p);
/* Every allocation of the library that is not tensor memory: malloc / calloc / realloc /
 * strdup / strndup that set PT_ERR_OOM on failure (the caller may add its own context) and
 * take part in fault injection. Blocks are released with free(); a failed pti_realloc leaves
 * the old block valid, as realloc does. */
void *pti_malloc(size_t n);
void *pti_calloc(size_t n, size_t size);
void *pti_realloc(void *p, size_t n);
char *pti_strdup(const char *s);
char *pti_strndup(const char *s, size_t max);
/* Fault injection for tests: the n-th library allocation from now (pti_cpu_alloc and the
 * functions above, counted across threads) fails as if memory ran out; n <= 0 turns it off.
 * pti_alloc_fault_pending() is the count still to go (0 once the failure happened or when
 * off), so a test can tell whether its scenario reached the n-th allocation. */
void pti_alloc_fail_nth(int64_t n);
int64_t pti_alloc_fault_pending(void);

/* ---- threads -----------------------------------------------------------------------------------
 */

/* fn(ctx, begin, end) over [0, n) split across the pool; runs inline when n < grain or from
 * inside a pool worker. Chunks are contiguous and deterministic for a given thread count. */
typedef void (*pti_range_fn)(void *ctx, int64_t begin, int64_t end);
void pti_parallel_for(int64_t n, int64_t grain, pti_range_fn fn, void *ctx);
/* The same with up to a few chunks per thread, claimed dynamically: for jobs whose chunks write
 * disjoint outputs (a GEMV's rows), where a late thread should not hold up the rest. Chunk
 * boundaries are still fixed by n, grain and the thread count. */
void pti_parallel_for_balanced(int64_t n, int64_t grain, pti_range_fn fn, void *ctx);

/* ---- random ------------------------------------------------------------------------------------
 */

/* Reserves `count` counter values from the default generator: the kernel draws element i
 * from pti_philox(key, base + i). Same seed -> same stream whatever the thread count. */
typedef struct pti_rng_stream {
    uint64_t key;
    uint64_t base;
} pti_rng_stream;
pti_rng_stream pti_rng_reserve(uint64_t count);
/* The default generator's whole state (seed and next counter), for replaying draws
 * (gradient checkpointing reruns a forward with the state it had the first time). */
typedef struct pti_rng_state {
    uint64_t seed, counter;
} pti_rng_state;
pti_rng_state pti_rng_get_state(void);
void pti_rng_set_state(pti_rng_state s);
/* Four 32-bit random words for counter `ctr` under `key` (Philox4x32-10). */
void pti_philox(uint64_t key, uint64_t ctr, uint32_t out[4]);
/* Uniform in [0, 1) from a 32-bit word (float) / two words (double). */
static inline float pti_u32_to_float(uint32_t x)
{
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}
static inline double pti_u64_to_double(uint32_t hi, uint32_t lo)
{
    uint64_t v = ((uint64_t)hi << 32 | lo) >> 11;
    return (double)v * (1.0 / 9007199254740992.0);
}

/* ---- elementwise conversion helpers (every dtype <-> double / int64) --------------------------
 */

double pti_load_f64(const void *p, pt_dtype dt);
void pti_store_f64(void *p, pt_dtype dt, double v);
int64_t pti_load_i64(const void *p, pt_dtype dt);
void pti_store_i64(void *p, pt_dtype dt, int64_t v);

#endif
