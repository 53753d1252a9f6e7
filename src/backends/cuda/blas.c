/* mm and bmm on CUDA through cuBLAS (contract in src/ops/linalg.def):
 *   out[M,N] = beta * out + alpha * A[M,K] @ B[K,N]   (alpha = scalar[0], beta = scalar[1])
 * per batch for bmm. Our tensors are row-major and cuBLAS is column-major, so we compute
 * C^T = B^T @ A^T: a row-major matrix read as column-major is already its transpose (op N,
 * ld = row stride), and a transposed-contiguous (column-major) input is handled with op T
 * (ld = column stride); no copies. An input with neither layout (not produced by our
 * front-ends) is made contiguous first. float32/float64 use Sgemm/Dgemm, float16/bfloat16
 * use GemmEx with float accumulation; batches use the strided-batched forms (every 3-D
 * tensor has one batch stride, 0 when broadcast). One cuBLAS handle per device, created on
 * first use, on the legacy default stream like the kernels. TF32 is not enabled: float32
 * results are full precision, like PyTorch's default. */
#include <limits.h>
#include <pthread.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend.h"

/* ---- handles and errors --------------------------------------------------------------------- */

static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t handles[PTI_CUDA_MAX_DEVICES];

static pt_status cublas_check(cublasStatus_t s, const char *call)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return PT_OK;
    return pti_error(s == CUBLAS_STATUS_ALLOC_FAILED ? PT_ERR_OOM : PT_ERR_RUNTIME,
                     "cuda: %s failed: %s", call, cublasGetStatusString(s));
}

/* The handle of the current device `index` (cudaSetDevice already done), or NULL + error. */
static cublasHandle_t handle_for(int index)
{
    if (index < 0 || index >= PTI_CUDA_MAX_DEVICES) {
        pti_error(PT_ERR_DEVICE, "cuda: device index %d out of range", index);
        return NULL;
    }
    pthread_mutex_lock(&handle_lock);
    cublasHandle_t h = handles[index];
    if (!h && cublas_check(cublasCreate(&h), "cublasCreate") == PT_OK)
        handles[index] = h;
    else if (!handles[index])
        h = NULL;
    pthread_mutex_unlock(&handle_lock);
    return h;
}

/* ---- operand layout ------------------------------------------------------------------------- */

/* How one input reaches cuBLAS: its device address, the op that gives its transpose in
 * column-major terms, the leading dimension and the batch stride (elements). */
typedef struct gemm_operand {
    const void *ptr;
    cublasOperation_t op;
    int64_t ld;
    int64_t batch_stride;
} gemm_operand;

/* Fills o for matrix t (last two dims rows x cols); false when t is neither row- nor
 * column-major. Strides of size-1 dims do not matter and are ignored. */
static bool operand_layout(const pt_tensor *t, gemm_operand *o)
{
    int nd = t->ndim;
    int64_t r = t->shape[nd - 2], c = t->shape[nd - 1];
    int64_t rs = t->stride[nd - 2], cs = t->stride[nd - 1];
    int64_t rmin = r > 1 ? r : 1, cmin = c > 1 ? c : 1;
    o->ptr = pti_cuda_ptr(t);
    o->batch_stride = nd == 3 ? t->stride[0] : 0;
    if ((c == 1 || cs == 1) && (r == 1 || rs >= cmin)) {
        o->op = CUBLAS_OP_N;
        o->ld = r == 1 ? cmin : rs;
    } else if ((r == 1 || rs == 1) && (c == 1 || cs >= rmin)) {
        o->op = CUBLAS_OP_T;
        o->ld = c == 1 ? rmin : cs;
    } else {
        return false;
    }
    return o->ld <= INT_MAX;
}

/* ---- gemm ------------------------------------------------------------------------------------ */

typedef struct gemm_args {
    int m, n, k, batch; /* cuBLAS's m = our N, n = our M */
    gemm_operand a, b;  /* cuBLAS's first operand is our B, the second our A */
    void *c;
    int64_t ldc, c_stride;
    double alpha, beta;
} gemm_args;

static pt_status gemm_float(cublasHandle_t h, const gemm_args *g)
{
    float alpha = (float)g->alpha, beta = (float)g->beta;
    if (g->batch == 1)
        return cublas_check(cublasSgemm(h, g->a.op, g->b.op, g->m, g->n, g->k, &alpha, g->a.ptr,
                                        (int)g->a.ld, g->b.ptr, (int)g->b.ld, &beta, g->c,
                                        (int)g->ldc),
                            "cublasSgemm");
    return cublas_check(cublasSgemmStridedBatched(h, g->a.op, g->b.op, g->m, g->n, g->k, &alpha,
                                                  g->a.ptr, (int)g->a.ld, g->a.batch_stride,
                                                  g->b.ptr, (int)g->b.ld, g->b.batch_stride, &beta,
                                                  g->c, (int)g->ldc, g->c_stride, g->batch),
                        "cublasSgemmStridedBatched");
}

static pt_status gemm_double(cublasHandle_t h, const gemm_args *g)
{
    double alpha = g->alpha, beta = g->beta;
    if (g->batch == 1)
        return cublas_check(cublasDgemm(h, g->a.op, g->b.op, g->m, g->n, g->k, &alpha, g->a.ptr,
                                        (int)g->a.ld, g->b.ptr, (int)g->b.ld, &beta, g->c,
                                        (int)g->ldc),
                            "cublasDgemm");
    return cublas_check(cublasDgemmStridedBatched(h, g->a.op, g->b.op, g->m, g->n, g->k, &alpha,
                                                  g->a.ptr, (int)g->a.ld, g->a.batch_stride,
                                                  g->b.ptr, (int)g->b.ld, g->b.batch_stride, &beta,
                                                  g->c, (int)g->ldc, g->c_stride, g->batch),
                        "cublasDgemmStridedBatched");
}

/* float16 / bfloat16 storage, float accumulation (alpha/beta are floats then). */
static pt_status gemm_half(cublasHandle_t h, const gemm_args *g, cudaDataType_t type)
{
    float alpha = (float)g->alpha, beta = (float)g->beta;
    if (g->batch == 1)
        return cublas_check(cublasGemmEx(h, g->a.op, g->b.op, g->m, g->n, g->k, &alpha, g->a.ptr,
                                         type, (int)g->a.ld, g->b.ptr, type, (int)g->b.ld, &beta,
                                         g->c, type, (int)g->ldc, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT),
                            "cublasGemmEx");
    return cublas_check(
        cublasGemmStridedBatchedEx(h, g->a.op, g->b.op, g->m, g->n, g->k, &alpha, g->a.ptr, type,
                                   (int)g->a.ld, g->a.batch_stride, g->b.ptr, type, (int)g->b.ld,
                                   g->b.batch_stride, &beta, g->c, type, (int)g->ldc, g->c_stride,
                                   g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

/* K == 0: A @ B is all zeros, so out = beta * out (PyTorch does not call cuBLAS either). */
static pt_status empty_product(pt_tensor *out, double beta)
{
    if (beta == 1.0)
        return PT_OK;
    if (beta == 0.0) /* zero bits are 0.0 in every float dtype; out's old values are ignored */
        return pti_cuda_check(
            cudaMemset(pti_cuda_ptr(out), 0, pti_dtype_nbytes(out->dtype, out->numel)),
            "cudaMemset");
    return pti_cuda_check(pti_cuda_launch_scale(out->dtype, out->numel, pti_cuda_ptr(out), beta),
                          "scale kernel launch");
}

static pt_status run_gemm(const pti_call *c, const pt_tensor *a, const pt_tensor *b,
                          const char *name)
{
    pt_tensor *out = c->out[0];
    int nd = out->ndim;
    int64_t M = out->shape[nd - 2], N = out->shape[nd - 1], K = a->shape[nd - 1];
    int64_t batch = nd == 3 ? out->shape[0] : 1;
    if (M == 0 || N == 0 || batch == 0)
        return PT_OK;
    pt_status st = pti_cuda_set_device(out->storage->device.index);
    if (st != PT_OK)
        return st;
    if (K == 0)
        return empty_product(out, c->scalar[1]);
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || batch > INT_MAX)
        return pti_error(PT_ERR_UNSUPPORTED,
                         "%s: sizes M=%lld N=%lld K=%lld batch=%lld exceed "
                         "cuBLAS's int range",
                         name, (long long)M, (long long)N, (long long)K, (long long)batch);
    gemm_args g = {.m = (int)N,
                   .n = (int)M,
                   .k = (int)K,
                   .batch = (int)batch,
                   .c = pti_cuda_ptr(out),
                   .ldc = N,
                   .c_stride = M * N,
                   .alpha = c->scalar[0],
                   .beta = c->scalar[1]};
    if (!operand_layout(b, &g.a) || !operand_layout(a, &g.b))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: cuda kernel needs row- or column-major "
                         "inputs",
                         name);
    cublasHandle_t h = handle_for(out->storage->device.index);
    if (!h)
        return pt_last_status();
    switch (out->dtype) {
    case PT_FLOAT32: return gemm_float(h, &g);
    case PT_FLOAT64: return gemm_double(h, &g);
    case PT_FLOAT16: return gemm_half(h, &g, CUDA_R_16F);
    case PT_BFLOAT16: return gemm_half(h, &g, CUDA_R_16BF);
    default:
        return pti_error(PT_ERR_UNSUPPORTED, "%s: dtype %s is not supported on cuda", name,
                         pt_dtype_name(out->dtype));
    }
}

/* Checks the pti_call against the contract, makes odd-layout inputs contiguous, runs gemm. */
static pt_status cuda_gemm(const pti_call *c, int nd, const char *name)
{
    pt_tensor *out = c->out[0];
    const pt_tensor *a = c->in[0], *b = c->in[1];
    if (out->ndim != nd || a->ndim != nd || b->ndim != nd)
        return pti_error(PT_ERR_SHAPE, "%s: cuda kernel needs %d-D operands", name, nd);
    if (a->dtype != out->dtype || b->dtype != out->dtype)
        return pti_error(PT_ERR_DTYPE, "%s: cuda kernel needs one dtype, got %s @ %s -> %s", name,
                         pt_dtype_name(a->dtype), pt_dtype_name(b->dtype),
                         pt_dtype_name(out->dtype));
    if (out->dtype != PT_FLOAT32 && out->dtype != PT_FLOAT64 && out->dtype != PT_FLOAT16 &&
        out->dtype != PT_BFLOAT16)
        return pti_error(PT_ERR_UNSUPPORTED, "%s: dtype %s is not supported on cuda", name,
                         pt_dtype_name(out->dtype));
    if (!pti_is_contiguous(out))
        return pti_error(PT_ERR_INVALID_ARG, "%s: cuda kernel needs a contiguous output", name);
    gemm_operand probe;
    pt_tensor *ac = NULL, *bc = NULL;
    bool empty = a->numel == 0 || b->numel == 0; /* run_gemm reads no input then */
    if (!empty && !operand_layout(a, &probe) && !(a = ac = pt_contiguous(a)))
        return pt_last_status();
    if (!empty && !operand_layout(b, &probe) && !(b = bc = pt_contiguous(b))) {
        pt_release(ac);
        return pt_last_status();
    }
    pt_status st = run_gemm(c, a, b, name);
    pt_release(ac);
    pt_release(bc);
    return st;
}

static pt_status cuda_mm(const pti_call *c)
{
    return cuda_gemm(c, 2, "mm");
}
static pt_status cuda_bmm(const pti_call *c)
{
    return cuda_gemm(c, 3, "bmm");
}

void pti_cuda_register_blas(pti_kernel *table)
{
    table[PTI_OP_mm] = cuda_mm;
    table[PTI_OP_bmm] = cuda_bmm;
}
