/* The CUDA backend: the pt_backend vtable for PT_DEVICE_CUDA, registered at library load.
 *
 * Design: nothing touches the CUDA runtime until a CUDA device is asked for, so a build with
 * CUDA runs unchanged on machines without a driver or GPU (device_count is then 0 and every
 * "cuda:N" allocation fails with PT_ERR_DEVICE in the core). Device memory comes from a
 * caching allocator (per device, size classes as in src/core/alloc.c, free lists kept on the
 * host since device memory is never dereferenced here); a miss calls cudaMalloc, and a
 * failed cudaMalloc releases that device's cache and retries once. All work runs on the
 * legacy default stream, so kernels, cuBLAS calls and cudaMemcpy are ordered and a block
 * returned to the cache can be reused at once. CUDA errors become PT_ERR_RUNTIME / PT_ERR_OOM
 * messages naming the failing call and cudaGetErrorString's text.
 *
 * The elementwise kernel slots (copy, fill, add, mul) are here: they coalesce the operands'
 * geometry and call the launchers in kernels.cu; mm/bmm are in blas.c. */
#include <pthread.h>
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
    return pti_error(e == cudaErrorMemoryAllocation ? PT_ERR_OOM : PT_ERR_RUNTIME,
                     "cuda: %s failed: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
}

pt_status pti_cuda_set_device(int index)
{
    return pti_cuda_check(cudaSetDevice(index), "cudaSetDevice");
}

/* ---- device count --------------------------------------------------------------------------- */

static pthread_once_t count_once = PTHREAD_ONCE_INIT;
static int n_devices;

static void count_devices(void)
{
    int n = 0;
    /* No driver or no GPU: an error here just means zero devices. */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
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

/* ---- caching allocator ---------------------------------------------------------------------- */

#define MIN_BLOCK 512 /* cudaMalloc aligns to 256; small tensors share classes of 512 bytes */
#define SUBCLASSES 8  /* classes per power of two above MIN_BLOCK */
#define N_CLASSES (1 + 64 * SUBCLASSES)

/* One class's cached blocks: a host-side stack of device pointers. */
typedef struct block_stack {
    void **ptrs;
    int count, cap;
} block_stack;

typedef struct device_cache {
    pthread_mutex_t lock;
    block_stack classes[N_CLASSES];
    size_t cached_bytes, live_bytes;
} device_cache;

static device_cache caches[PTI_CUDA_MAX_DEVICES];

__attribute__((constructor)) static void caches_init(void)
{
    for (int d = 0; d < PTI_CUDA_MAX_DEVICES; d++)
        pthread_mutex_init(&caches[d].lock, NULL);
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
static void release_cache_locked(device_cache *dc)
{
    for (int c = 0; c < N_CLASSES; c++) {
        block_stack *s = &dc->classes[c];
        for (int i = 0; i < s->count; i++)
            cudaFree(s->ptrs[i]);
        s->count = 0;
    }
    dc->cached_bytes = 0;
}

static void *cuda_alloc(int index, size_t nbytes)
{
    size_t rounded;
    int cls = size_class(nbytes, &rounded);
    if (index < 0 || index >= cuda_device_count() || cls < 0) {
        pti_error(PT_ERR_OOM, "cuda: cannot allocate %zu bytes on cuda:%d", nbytes, index);
        return NULL;
    }
    if (pti_cuda_set_device(index) != PT_OK)
        return NULL;
    device_cache *dc = &caches[index];
    void *p = NULL;
    pthread_mutex_lock(&dc->lock);
    block_stack *s = &dc->classes[cls];
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

static void cuda_free(int index, void *p, size_t nbytes)
{
    if (!p || index < 0 || index >= PTI_CUDA_MAX_DEVICES)
        return;
    size_t rounded;
    int cls = size_class(nbytes, &rounded);
    device_cache *dc = &caches[index];
    pthread_mutex_lock(&dc->lock);
    dc->live_bytes -= rounded;
    block_stack *s = &dc->classes[cls];
    if (s->count == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        void **grown = pti_realloc(s->ptrs, (size_t)cap * sizeof *grown);
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
    if (p && cudaSetDevice(index) == cudaSuccess) /* no room to cache it: give it back */
        cudaFree(p);
}

/* ---- transfers ------------------------------------------------------------------------------ */

static pt_status memcpy_on(int index, void *dst, const void *src, size_t n,
                           enum cudaMemcpyKind kind, const char *what)
{
    if (n == 0)
        return PT_OK;
    pt_status st = pti_cuda_set_device(index);
    if (st != PT_OK)
        return st;
    return pti_cuda_check(cudaMemcpy(dst, src, n, kind), what);
}

static pt_status cuda_copy_h2d(int index, void *dst, const void *src, size_t n)
{
    return memcpy_on(index, dst, src, n, cudaMemcpyHostToDevice, "cudaMemcpy (host to device)");
}

static pt_status cuda_copy_d2h(int index, void *dst, const void *src, size_t n)
{
    return memcpy_on(index, dst, src, n, cudaMemcpyDeviceToHost, "cudaMemcpy (device to host)");
}

static pt_status cuda_copy_d2d(int index, void *dst, const void *src, size_t n)
{
    return memcpy_on(index, dst, src, n, cudaMemcpyDeviceToDevice, "cudaMemcpy (device to device)");
}

static pt_status cuda_synchronize(int index)
{
    pt_status st = pti_cuda_set_device(index);
    if (st != PT_OK)
        return st;
    return pti_cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

/* ---- geometry ------------------------------------------------------------------------------- */

void *pti_cuda_ptr(const pt_tensor *t)
{
    /* pointer arithmetic on a device address: never dereferenced on the host */
    return (char *)t->storage->data + t->offset * (int64_t)pti_dtypes[t->dtype].size;
}

void pti_cuda_geom_init(pti_cuda_geom *g, int n_ops, const pt_tensor *const *ops)
{
    const pt_tensor *o = ops[0];
    memset(g, 0, sizeof *g);
    g->n_ops = n_ops;
    g->numel = o->numel;
    /* drop size-1 dims, then merge each dim into the next inner one where every operand is
     * contiguous across the pair */
    int nd = 0;
    for (int d = 0; d < o->ndim; d++) {
        if (o->shape[d] == 1)
            continue;
        if (nd > 0) {
            bool merge = true;
            for (int k = 0; k < n_ops; k++)
                merge = merge && g->stride[k][nd - 1] == ops[k]->stride[d] * o->shape[d];
            if (merge) {
                g->shape[nd - 1] *= o->shape[d];
                for (int k = 0; k < n_ops; k++)
                    g->stride[k][nd - 1] = ops[k]->stride[d];
                continue;
            }
        }
        g->shape[nd] = o->shape[d];
        for (int k = 0; k < n_ops; k++)
            g->stride[k][nd] = ops[k]->stride[d];
        nd++;
    }
    if (nd == 0) { /* a single element */
        g->shape[0] = 1;
        nd = 1;
    }
    g->ndim = nd;
}

/* Every kernel entry selects the output's device first (the thread may have used another). */
static pt_status kernel_prologue(const pti_call *c)
{
    return pti_cuda_set_device(c->out[0]->storage->device.index);
}

/* ---- copy / fill / add / mul ---------------------------------------------------------------- */

static pt_status cuda_copy(const pti_call *c)
{
    pt_tensor *dst = c->out[0];
    const pt_tensor *src = c->in[0];
    if (dst->numel == 0)
        return PT_OK;
    if (pti_dtypes[dst->dtype].is_block || pti_dtypes[src->dtype].is_block)
        return pti_error(PT_ERR_UNSUPPORTED, "copy: block dtypes %s -> %s on cuda",
                         pt_dtype_name(src->dtype), pt_dtype_name(dst->dtype));
    if (src->ndim != dst->ndim)
        return pti_error(PT_ERR_SHAPE, "copy: cuda kernel needs the source expanded to %s",
                         pti_shape_str(dst->ndim, dst->shape));
    pt_status st = kernel_prologue(c);
    if (st != PT_OK)
        return st;
    const pt_tensor *ops[2] = {dst, src};
    pti_cuda_geom g;
    pti_cuda_geom_init(&g, 2, ops);
    return pti_cuda_check(
        pti_cuda_launch_copy(&g, pti_cuda_ptr(dst), dst->dtype, pti_cuda_ptr(src), src->dtype),
        "copy kernel launch");
}

static pt_status cuda_fill(const pti_call *c)
{
    pt_tensor *t = c->out[0];
    if (t->numel == 0)
        return PT_OK;
    if (pti_dtypes[t->dtype].is_block)
        return pti_error(PT_ERR_UNSUPPORTED, "fill: block dtype %s on cuda",
                         pt_dtype_name(t->dtype));
    pt_status st = kernel_prologue(c);
    if (st != PT_OK)
        return st;
    uint64_t bits = 0; /* the value encoded once on the host, exactly as the CPU kernel does */
    pti_store_f64(&bits, t->dtype, c->scalar[0]);
    const pt_tensor *ops[1] = {t};
    pti_cuda_geom g;
    pti_cuda_geom_init(&g, 1, ops);
    int err = pti_cuda_launch_fill(&g, pti_cuda_ptr(t), pti_dtypes[t->dtype].size, bits);
    return pti_cuda_check(err, "fill kernel launch");
}

static pt_status binary(const pti_call *c, pti_cuda_binop op, const char *name)
{
    pt_tensor *out = c->out[0];
    const pt_tensor *a = c->in[0], *b = c->in[1];
    if (a->dtype != out->dtype || b->dtype != out->dtype)
        return pti_error(PT_ERR_DTYPE, "%s: cuda kernel needs one dtype, got %s, %s -> %s", name,
                         pt_dtype_name(a->dtype), pt_dtype_name(b->dtype),
                         pt_dtype_name(out->dtype));
    if (!pti_cuda_binary_supports(out->dtype))
        return pti_error(PT_ERR_UNSUPPORTED, "%s: dtype %s is not supported on cuda", name,
                         pt_dtype_name(out->dtype));
    if (a->ndim != out->ndim || b->ndim != out->ndim)
        return pti_error(PT_ERR_SHAPE,
                         "%s: cuda kernel needs inputs expanded to the output's "
                         "shape %s",
                         name, pti_shape_str(out->ndim, out->shape));
    if (out->numel == 0)
        return PT_OK;
    pt_status st = kernel_prologue(c);
    if (st != PT_OK)
        return st;
    const pt_tensor *ops[3] = {out, a, b};
    pti_cuda_geom g;
    pti_cuda_geom_init(&g, 3, ops);
    return pti_cuda_check(pti_cuda_launch_binary(op, &g, out->dtype, pti_cuda_ptr(out),
                                                 pti_cuda_ptr(a), pti_cuda_ptr(b), c->scalar[0]),
                          op == PTI_CUDA_ADD ? "add kernel launch" : "mul kernel launch");
}

static pt_status cuda_add(const pti_call *c)
{
    return binary(c, PTI_CUDA_ADD, "add");
}
static pt_status cuda_mul(const pti_call *c)
{
    return binary(c, PTI_CUDA_MUL, "mul");
}

/* ---- registration --------------------------------------------------------------------------- */

static pt_backend cuda_backend = {
    .name = "cuda",
    .type = PT_DEVICE_CUDA,
    .device_count = cuda_device_count,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy_h2d = cuda_copy_h2d,
    .copy_d2h = cuda_copy_d2h,
    .copy_d2d = cuda_copy_d2d,
    .synchronize = cuda_synchronize,
};

__attribute__((constructor)) static void cuda_backend_init(void)
{
    pti_kernel *k = cuda_backend.kernels;
    k[PTI_OP_copy] = cuda_copy;
    k[PTI_OP_fill] = cuda_fill;
    k[PTI_OP_add] = cuda_add;
    k[PTI_OP_mul] = cuda_mul;
    pti_cuda_register_blas(k);
    pti_backend_register(&cuda_backend);
}
