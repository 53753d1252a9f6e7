/* The CUDA backend: libprometorch_cuda.so, loaded by the library on the first use of a "cuda"
 * device (src/core/device.c) and registered through the public backend interface
 * (prometorch/backend.h) by pt_cuda_backend_init, like any out-of-tree backend. It uses public
 * functions only, so libprometorch.so itself links no CUDA library.
 *
 * Design: nothing touches the CUDA runtime until a CUDA device is asked for, so the backend
 * loads unchanged on machines without a driver or GPU (device_count is then 0 and every
 * "cuda:N" allocation fails with PT_ERR_DEVICE in the core). Each device's context (made on
 * its first use) holds a caching allocator (size classes as in src/core/alloc.c, free lists
 * kept on the host since device memory is never dereferenced here) and its cuBLAS handle; a
 * miss calls cudaMalloc, and a failed cudaMalloc releases that device's cache and retries
 * once. All work runs on the legacy default stream, so kernels, cuBLAS calls and cudaMemcpy
 * are ordered and a block returned to the cache can be reused at once. CUDA errors become
 * PT_ERR_RUNTIME / PT_ERR_OOM messages naming the failing call and cudaGetErrorString's text.
 *
 * The elementwise kernels (copy, fill, add, mul) are here: they coalesce the operands'
 * geometry and call the launchers in kernels.cu; mm/bmm are in blas.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend.h"

/* ---- errors --------------------------------------------------------------------------------- */

pt_status pti_cuda_check(int err, const char *call)
{
    if (err == cudaSuccess)
        return PT_OK;
    cudaError_t e = (cudaError_t)err;
    cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */
    return pt_backend_error(e == cudaErrorMemoryAllocation ? PT_ERR_OOM : PT_ERR_RUNTIME,
                            "cuda: %s failed: %s (%s)", call, cudaGetErrorString(e),
                            cudaGetErrorName(e));
}

pt_status pti_cuda_set_device(int index)
{
    return pti_cuda_check(cudaSetDevice(index), "cudaSetDevice");
}

/* ---- device count --------------------------------------------------------------------------- */

static pthread_once_t count_once = PTHREAD_ONCE_INIT;
static int n_devices;
static char absent[200]; /* why cudaGetDeviceCount found none ("" when it did not fail) */

static void count_devices(void)
{
    int n = 0;
    /* No driver or no GPU: an error here just means zero devices (and is kept as the reason). */
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(absent, sizeof absent, "cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e),
                 cudaGetErrorName(e));
        cudaGetLastError();
        n = 0;
    }
    n_devices = n < PTI_CUDA_MAX_DEVICES ? n : PTI_CUDA_MAX_DEVICES;
}

static int cuda_device_count(void)
{
    pthread_once(&count_once, count_devices);
    return n_devices;
}

static const char *cuda_absent_reason(void)
{
    pthread_once(&count_once, count_devices);
    return absent;
}

/* ---- caching allocator ---------------------------------------------------------------------- */

#define MIN_BLOCK 512 /* cudaMalloc aligns to 256; small tensors share classes of 512 bytes */
#define SUBCLASSES 8  /* classes per power of two above MIN_BLOCK */
#define N_CLASSES PTI_CUDA_N_CLASSES

bool pti_cuda_exiting;

__attribute__((destructor)) static void mark_exiting(void)
{
    pti_cuda_exiting = true;
}

/* Class index and its rounded size; -1 when the size is beyond every class. */
static int size_class(size_t n, size_t *rounded)
{
    if (n <= MIN_BLOCK) {
        *rounded = MIN_BLOCK;
        return 0;
    }
    int p = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* n-1 in [2^p, 2^(p+1)) */
    size_t step = ((size_t)1 << p) / SUBCLASSES;
    size_t sub = ((n - 1) - ((size_t)1 << p)) / step;
    *rounded = ((size_t)1 << p) + (sub + 1) * step;
    int cls = 1 + (p - 9) * SUBCLASSES + (int)sub;
    return cls < N_CLASSES ? cls : -1;
}

/* Frees every cached block of one device (the caller holds its lock and has set the device). */
static void release_cache_locked(pti_cuda_ctx *dc)
{
    for (int c = 0; c < N_CLASSES; c++) {
        pti_cuda_block_stack *s = &dc->classes[c];
        for (int i = 0; i < s->count; i++)
            cudaFree(s->ptrs[i]);
        s->count = 0;
    }
    dc->cached_bytes = 0;
}

/* ---- contexts ------------------------------------------------------------------------------- */

static pt_status cuda_context_create(int index, void **out)
{
    if (index < 0 || index >= cuda_device_count())
        return pt_backend_error(PT_ERR_DEVICE, "cuda: no device cuda:%d (%d found)", index,
                                cuda_device_count());
    pti_cuda_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return pt_backend_error(PT_ERR_OOM, "cuda: no host memory for the context of cuda:%d",
                                index);
    ctx->index = index;
    pthread_mutex_init(&ctx->lock, NULL);
    *out = ctx;
    return PT_OK;
}

/* Gives the cache and the cuBLAS handle back to the driver, unless the process is exiting
 * (the runtime may be gone; the driver reclaims everything then). */
static void cuda_context_destroy(void *p)
{
    pti_cuda_ctx *ctx = p;
    if (!ctx)
        return;
    pthread_mutex_lock(&ctx->lock);
    if (!pti_cuda_exiting && cudaSetDevice(ctx->index) == cudaSuccess) {
        release_cache_locked(ctx);
        pti_cuda_blas_release(ctx);
    }
    for (int c = 0; c < N_CLASSES; c++)
        free(ctx->classes[c].ptrs);
    pthread_mutex_unlock(&ctx->lock);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* ---- caching allocator ---------------------------------------------------------------------- */

static void *cuda_alloc(void *p_ctx, size_t nbytes)
{
    pti_cuda_ctx *dc = p_ctx;
    size_t rounded;
    int cls = size_class(nbytes, &rounded);
    if (cls < 0) {
        pt_backend_error(PT_ERR_OOM, "cuda: cannot allocate %zu bytes on cuda:%d", nbytes,
                         dc->index);
        return NULL;
    }
    if (pti_cuda_set_device(dc->index) != PT_OK)
        return NULL;
    void *p = NULL;
    pthread_mutex_lock(&dc->lock);
    pti_cuda_block_stack *s = &dc->classes[cls];
    if (s->count > 0) {
        p = s->ptrs[--s->count];
        dc->cached_bytes -= rounded;
    } else {
        cudaError_t e = cudaMalloc(&p, rounded);
        if (e == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            release_cache_locked(dc);
            e = cudaMalloc(&p, rounded);
        }
        if (e != cudaSuccess) {
            pti_cuda_check(e, "cudaMalloc");
            p = NULL;
        }
    }
    if (p)
        dc->live_bytes += rounded;
    pthread_mutex_unlock(&dc->lock);
    return p;
}

static void cuda_free(void *p_ctx, void *p, size_t nbytes)
{
    pti_cuda_ctx *dc = p_ctx;
    if (!p || !dc)
        return;
    size_t rounded;
    int cls = size_class(nbytes, &rounded);
    pthread_mutex_lock(&dc->lock);
    dc->live_bytes -= rounded;
    pti_cuda_block_stack *s = &dc->classes[cls];
    if (s->count == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        void **grown = realloc(s->ptrs, (size_t)cap * sizeof *grown);
        if (grown) {
            s->ptrs = grown;
            s->cap = cap;
        }
    }
    if (s->count < s->cap) {
        s->ptrs[s->count++] = p;
        dc->cached_bytes += rounded;
        p = NULL;
    }
    pthread_mutex_unlock(&dc->lock);
    if (p && cudaSetDevice(dc->index) == cudaSuccess) /* no room to cache it: give it back */
        cudaFree(p);
}

/* ---- transfers ------------------------------------------------------------------------------ */

static pt_status memcpy_on(const pti_cuda_ctx *ctx, void *dst, const void *src, size_t n,
                           enum cudaMemcpyKind kind, const char *what)
{
    if (n == 0)
        return PT_OK;
    pt_status st = pti_cuda_set_device(ctx->index);
    if (st != PT_OK)
        return st;
    return pti_cuda_check(cudaMemcpy(dst, src, n, kind), what);
}

static pt_status cuda_copy_h2d(void *ctx, void *dst, const void *src, size_t n)
{
    return memcpy_on(ctx, dst, src, n, cudaMemcpyHostToDevice, "cudaMemcpy (host to device)");
}

static pt_status cuda_copy_d2h(void *ctx, void *dst, const void *src, size_t n)
{
    return memcpy_on(ctx, dst, src, n, cudaMemcpyDeviceToHost, "cudaMemcpy (device to host)");
}

static pt_status cuda_copy_d2d(void *ctx, void *dst, const void *src, size_t n)
{
    return memcpy_on(ctx, dst, src, n, cudaMemcpyDeviceToDevice, "cudaMemcpy (device to device)");
}

static pt_status cuda_synchronize(void *ctx)
{
    pt_status st = pti_cuda_set_device(((pti_cuda_ctx *)ctx)->index);
    if (st != PT_OK)
        return st;
    return pti_cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

/* ---- geometry ------------------------------------------------------------------------------- */

void pti_cuda_geom_init(pti_cuda_geom *g, int n_ops, const pt_tensor *const *ops)
{
    const pt_tensor *o = ops[0];
    const int64_t *shape = pt_shape(o);
    const int64_t *stride[PTI_CUDA_MAX_OPS];
    for (int k = 0; k < n_ops; k++)
        stride[k] = pt_stride(ops[k]);
    memset(g, 0, sizeof *g);
    g->n_ops = n_ops;
    g->numel = pt_numel(o);
    /* drop size-1 dims, then merge each dim into the next inner one where every operand is
     * contiguous across the pair */
    int nd = 0;
    for (int d = 0; d < pt_ndim(o); d++) {
        if (shape[d] == 1)
            continue;
        if (nd > 0) {
            bool merge = true;
            for (int k = 0; k < n_ops; k++)
                merge = merge && g->stride[k][nd - 1] == stride[k][d] * shape[d];
            if (merge) {
                g->shape[nd - 1] *= shape[d];
                for (int k = 0; k < n_ops; k++)
                    g->stride[k][nd - 1] = stride[k][d];
                continue;
            }
        }
        g->shape[nd] = shape[d];
        for (int k = 0; k < n_ops; k++)
            g->stride[k][nd] = stride[k][d];
        nd++;
    }
    if (nd == 0) { /* a single element */
        g->shape[0] = 1;
        nd = 1;
    }
    g->ndim = nd;
}

/* Every kernel entry selects the output's device first (the thread may have used another). */
static pt_status kernel_prologue(const pt_kernel_call *c)
{
    return pti_cuda_set_device(pt_call_device(c).index);
}

/* "[2, 3]" for an error message. */
static const char *shape_str(const pt_tensor *t, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < pt_ndim(t) && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? ", " : "",
                                (long long)pt_shape(t)[d]);
    if (len < n)
        snprintf(buf + len, n - len, "]");
    return buf;
}

/* ---- copy / fill / add / mul ---------------------------------------------------------------- */

static pt_status cuda_copy(const pt_kernel_call *c)
{
    pt_tensor *dst = pt_call_output(c, 0);
    const pt_tensor *src = pt_call_input(c, 0);
    pt_dtype to = pt_dtype_of(dst), from = pt_dtype_of(src);
    if (pt_numel(dst) == 0)
        return PT_OK;
    if (pt_dtype_is_block(to) || pt_dtype_is_block(from))
        return pt_backend_error(PT_ERR_UNSUPPORTED, "copy: block dtypes %s -> %s on cuda",
                                pt_dtype_name(from), pt_dtype_name(to));
    if (pt_ndim(src) != pt_ndim(dst)) {
        char sh[160];
        return pt_backend_error(PT_ERR_SHAPE, "copy: cuda kernel needs the source expanded to %s",
                                shape_str(dst, sh, sizeof sh));
    }
    pt_status st = kernel_prologue(c);
    if (st != PT_OK)
        return st;
    const pt_tensor *ops[2] = {dst, src};
    pti_cuda_geom g;
    pti_cuda_geom_init(&g, 2, ops);
    return pti_cuda_check(
        pti_cuda_launch_copy(&g, pt_device_data_ptr(dst), to, pt_device_data_ptr(src), from),
        "copy kernel launch");
}

static pt_status cuda_fill(const pt_kernel_call *c)
{
    pt_tensor *t = pt_call_output(c, 0);
    pt_dtype dt = pt_dtype_of(t);
    if (pt_numel(t) == 0)
        return PT_OK;
    if (pt_dtype_is_block(dt))
        return pt_backend_error(PT_ERR_UNSUPPORTED, "fill: block dtype %s on cuda",
                                pt_dtype_name(dt));
    pt_status st = kernel_prologue(c);
    if (st != PT_OK)
        return st;
    uint64_t bits = 0; /* the value encoded once on the host, exactly as the CPU kernel does */
    pt_dtype_store(&bits, dt, pt_call_scalar(c, 0));
    const pt_tensor *ops[1] = {t};
    pti_cuda_geom g;
    pti_cuda_geom_init(&g, 1, ops);
    int err = pti_cuda_launch_fill(&g, pt_device_data_ptr(t), pt_dtype_size(dt), bits);
    return pti_cuda_check(err, "fill kernel launch");
}

static pt_status binary(const pt_kernel_call *c, pti_cuda_binop op, const char *name)
{
    pt_tensor *out = pt_call_output(c, 0);
    const pt_tensor *a = pt_call_input(c, 0), *b = pt_call_input(c, 1);
    pt_dtype dt = pt_dtype_of(out);
    if (pt_dtype_of(a) != dt || pt_dtype_of(b) != dt)
        return pt_backend_error(PT_ERR_DTYPE, "%s: cuda kernel needs one dtype, got %s, %s -> %s",
                                name, pt_dtype_name(pt_dtype_of(a)), pt_dtype_name(pt_dtype_of(b)),
                                pt_dtype_name(dt));
    if (!pti_cuda_binary_supports(dt))
        return pt_backend_error(PT_ERR_UNSUPPORTED, "%s: dtype %s is not supported on cuda", name,
                                pt_dtype_name(dt));
    if (pt_ndim(a) != pt_ndim(out) || pt_ndim(b) != pt_ndim(out)) {
        char sh[160];
        return pt_backend_error(PT_ERR_SHAPE,
                                "%s: cuda kernel needs inputs expanded to the output's shape %s",
                                name, shape_str(out, sh, sizeof sh));
    }
    if (pt_numel(out) == 0)
        return PT_OK;
    pt_status st = kernel_prologue(c);
    if (st != PT_OK)
        return st;
    const pt_tensor *ops[3] = {out, a, b};
    pti_cuda_geom g;
    pti_cuda_geom_init(&g, 3, ops);
    return pti_cuda_check(pti_cuda_launch_binary(op, &g, dt, pt_device_data_ptr(out),
                                                 pt_device_data_ptr(a), pt_device_data_ptr(b),
                                                 pt_call_scalar(c, 0)),
                          op == PTI_CUDA_ADD ? "add kernel launch" : "mul kernel launch");
}

static pt_status cuda_add(const pt_kernel_call *c)
{
    return binary(c, PTI_CUDA_ADD, "add");
}
static pt_status cuda_mul(const pt_kernel_call *c)
{
    return binary(c, PTI_CUDA_MUL, "mul");
}

/* ---- registration --------------------------------------------------------------------------- */

/* The ten plain dtypes (copy and fill take every one), and those of add/mul and mm/bmm. */
#define PLAIN_DTYPES                                                                               \
    (PT_DTYPE_BIT(PT_FLOAT32) | PT_DTYPE_BIT(PT_FLOAT64) | PT_DTYPE_BIT(PT_FLOAT16) |              \
     PT_DTYPE_BIT(PT_BFLOAT16) | PT_DTYPE_BIT(PT_INT64) | PT_DTYPE_BIT(PT_INT32) |                 \
     PT_DTYPE_BIT(PT_INT16) | PT_DTYPE_BIT(PT_INT8) | PT_DTYPE_BIT(PT_UINT8) |                     \
     PT_DTYPE_BIT(PT_BOOL))
#define BINARY_DTYPES (PLAIN_DTYPES & ~PT_DTYPE_BIT(PT_BOOL))
#define GEMM_DTYPES                                                                                \
    (PT_DTYPE_BIT(PT_FLOAT32) | PT_DTYPE_BIT(PT_FLOAT64) | PT_DTYPE_BIT(PT_FLOAT16) |              \
     PT_DTYPE_BIT(PT_BFLOAT16))

static const pt_backend_kernel cuda_kernels[] = {
    {"copy", cuda_copy, PLAIN_DTYPES}, {"fill", cuda_fill, PLAIN_DTYPES},
    {"add", cuda_add, BINARY_DTYPES},  {"mul", cuda_mul, BINARY_DTYPES},
    {"mm", pti_cuda_mm, GEMM_DTYPES},  {"bmm", pti_cuda_bmm, GEMM_DTYPES},
};

static const pt_backend_desc cuda_desc = {
    .abi_version = PT_BACKEND_ABI_VERSION,
    .name = "cuda",
    .device_count = cuda_device_count,
    .absent_reason = cuda_absent_reason,
    .context_create = cuda_context_create,
    .context_destroy = cuda_context_destroy,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy_h2d = cuda_copy_h2d,
    .copy_d2h = cuda_copy_d2h,
    .copy_d2d = cuda_copy_d2d,
    .synchronize = cuda_synchronize,
    .kernels = cuda_kernels,
    .n_kernels = (int)(sizeof cuda_kernels / sizeof cuda_kernels[0]),
};

/* Called by libprometorch.so right after loading this object (src/core/device.c). */
__attribute__((visibility("default"))) pt_status pt_cuda_backend_init(void)
{
    return pt_backend_register(&cuda_desc) == PT_DEVICE_CUDA ? PT_OK : pt_last_status();
}
