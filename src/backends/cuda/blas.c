/* mm and bmm on CUDA through cuBLAS (contract in src/ops/linalg.def):
 *   out[M,N] = beta * out + alpha * A[M,K] @ B[K,N]   (alpha = scalar[0], beta = scalar[1])
 * per batch for bmm. Our tensors are row-major and cuBLAS is column-major, so we compute
 * C^T = B^T @ A^T: a row-major matrix read as column-major is already its transpose (op N,
 * ld = row stride), and a transposed-contiguous (column-major) input is handled with op T
 * (ld = column stride); no copies. An input with neither layout (not produced by our
 * front-ends) is made contiguous first. float32/float64 use Sgemm/Dgemm, float16/bfloat16
 * use GemmEx with float accumulation; batches use the strided-batched forms (every 3-D
 * tensor has one batch stride, 0 when broadcast). One cuBLAS handle per device, in its context
 * (created on the first GEMM), on the legacy default stream like the kernels. TF32 is not enabled:
 * float32 results are full precision, like PyTorch's default. */
#include <limits.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend.h"

/* ---- handles and errors --------------------------------------------------------------------- */

static pt_status cublas_check(cublasStatus_t s, const char *call)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return PT_OK;
    return pt_backend_error(s == CUBLAS_STATUS_ALLOC_FAILED ? PT_ERR_OOM : PT_ERR_RUNTIME,
                            "cuda: %s failed: %s", call, cublasGetStatusString(s));
}

/* The handle of ctx's device (cudaSetDevice already done), or NULL + error. */
static cublasHandle_t handle_for(pti_cuda_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    cublasHandle_t h = ctx->blas;
    if (!h && cublas_check(cublasCreate(&h), "cublasCreate") == PT_OK)
        ctx->blas = h;
    else if (!ctx->blas)
        h = NULL;
    pthread_mutex_unlock(&ctx->lock);
    return h;
}

void pti_cuda_blas_release(pti_cuda_ctx *ctx)
{
    if (ctx->blas)
        cublasDestroy(ctx->blas);
    ctx->blas = NULL;
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
    int nd = pt_ndim(t);
    const int64_t *shape = pt_shape(t), *stride = pt_stride(t);
    int64_t r = shape[nd - 2], c = shape[nd - 1];
    int64_t rs = stride[nd - 2], cs = stride[nd - 1];
    int64_t rmin = r > 1 ? r : 1, cmin = c > 1 ? c : 1;
    o->ptr = pt_device_data_ptr(t);
    o->batch_stride = nd == 3 ? stride[0] : 0;
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
        return pti_cuda_check(cudaMemset(pt_device_data_ptr(out), 0,
                                         pt_dtype_size(pt_dtype_of(out)) * (size_t)pt_numel(out)),
                              "cudaMemset");
    return pti_cuda_check(
        pti_cuda_launch_scale(pt_dtype_of(out), pt_numel(out), pt_device_data_ptr(out), beta),
        "scale kernel launch");
}

static pt_status run_gemm(const pt_kernel_call *c, const pt_tensor *a, const pt_tensor *b,
                          const char *name)
{
    pt_tensor *out = pt_call_output(c, 0);
    int nd = pt_ndim(out);
    const int64_t *os = pt_shape(out);
    int64_t M = os[nd - 2], N = os[nd - 1], K = pt_shape(a)[nd - 1];
    int64_t batch = nd == 3 ? os[0] : 1;
    if (M == 0 || N == 0 || batch == 0)
        return PT_OK;
    pti_cuda_ctx *ctx = pt_call_context(c);
    pt_status st = pti_cuda_set_device(ctx->index);
    if (st != PT_OK)
        return st;
    if (K == 0)
        return empty_product(out, pt_call_scalar(c, 1));
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || batch > INT_MAX)
        return pt_backend_error(PT_ERR_UNSUPPORTED,
                                "%s: sizes M=%lld N=%lld K=%lld batch=%lld exceed "
                                "cuBLAS's int range",
                                name, (long long)M, (long long)N, (long long)K, (long long)batch);
    gemm_args g = {.m = (int)N,
                   .n = (int)M,
                   .k = (int)K,
                   .batch = (int)batch,
                   .c = pt_device_data_ptr(out),
                   .ldc = N,
                   .c_stride = M * N,
                   .alpha = pt_call_scalar(c, 0),
                   .beta = pt_call_scalar(c, 1)};
    if (!operand_layout(b, &g.a) || !operand_layout(a, &g.b))
        return pt_backend_error(PT_ERR_INVALID_ARG,
                                "%s: cuda kernel needs row- or column-major "
                                "inputs",
                                name);
    cublasHandle_t h = handle_for(ctx);
    if (!h)
        return pt_last_status();
    switch (pt_dtype_of(out)) {
    case PT_FLOAT32: return gemm_float(h, &g);
    case PT_FLOAT64: return gemm_double(h, &g);
    case PT_FLOAT16: return gemm_half(h, &g, CUDA_R_16F);
    case PT_BFLOAT16: return gemm_half(h, &g, CUDA_R_16BF);
    default:
        return pt_backend_error(PT_ERR_UNSUPPORTED, "%s: dtype %s is not supported on cuda", name,
                                pt_dtype_name(pt_dtype_of(out)));
    }
}

/* Checks the call against the contract, makes odd-layout inputs contiguous, runs gemm. */
static pt_status cuda_gemm(const pt_kernel_call *c, int nd, const char *name)
{
    pt_tensor *out = pt_call_output(c, 0);
    const pt_tensor *a = pt_call_input(c, 0), *b = pt_call_input(c, 1);
    pt_dtype dt = pt_dtype_of(out);
    if (pt_ndim(out) != nd || pt_ndim(a) != nd || pt_ndim(b) != nd)
        return pt_backend_error(PT_ERR_SHAPE, "%s: cuda kernel needs %d-D operands", name, nd);
    if (pt_dtype_of(a) != dt || pt_dtype_of(b) != dt)
        return pt_backend_error(PT_ERR_DTYPE, "%s: cuda kernel needs one dtype, got %s @ %s -> %s",
                                name, pt_dtype_name(pt_dtype_of(a)), pt_dtype_name(pt_dtype_of(b)),
                                pt_dtype_name(dt));
    if (dt != PT_FLOAT32 && dt != PT_FLOAT64 && dt != PT_FLOAT16 && dt != PT_BFLOAT16)
        return pt_backend_error(PT_ERR_UNSUPPORTED, "%s: dtype %s is not supported on cuda", name,
                                pt_dtype_name(dt));
    if (!pt_is_contiguous(out))
        return pt_backend_error(PT_ERR_INVALID_ARG, "%s: cuda kernel needs a contiguous output",
                                name);
    gemm_operand probe;
    pt_tensor *ac = NULL, *bc = NULL;
    bool empty = pt_numel(a) == 0 || pt_numel(b) == 0; /* run_gemm reads no input then */
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

pt_status pti_cuda_mm(const pt_kernel_call *c)
{
    return cuda_gemm(c, 2, "mm");
}
pt_status pti_cuda_bmm(const pt_kernel_call *c)
{
    return cuda_gemm(c, 3, "bmm");
}
