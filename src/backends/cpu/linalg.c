/* CPU kernels of the linalg family (front-ends in src/ops/linalg.c): mm and bmm.
 *
 * Contract (src/ops/linalg.def): out = beta * out + alpha * A @ B; each input matrix is
 * row-major or column-major (a transposed contiguous matrix), batch strides are arbitrary, out
 * is contiguous. float32/float64 go to OpenBLAS with the transpose flags taken from the
 * strides (no copies). Integer dtypes (the CPU accepts them beyond the float-only contract)
 * use an exact loop that wraps like PyTorch's integer matmul.
 *
 * Batches: large matrices run one BLAS call per batch, with OpenBLAS threading inside the
 * call. Small matrices (at most SMALL_MNK multiply-adds, where OpenBLAS 0.3 runs its
 * single-threaded path anyway) run in parallel over the batch on our pool instead. */
#include <cblas.h>
#include <string.h>

#include "cpu.h"

/* OpenBLAS runs single-threaded when M*N*K <= 65536 * GEMM_MULTITHREAD_THRESHOLD (4). */
#define SMALL_MNK (65536 * 4)

/* One matrix operand: transpose flag and leading dimension as BLAS wants them. */
typedef struct mat_desc {
    const char *data; /* matrix 0 */
    int64_t bstride;  /* bytes between batches */
    int64_t rs, cs;   /* element strides of rows / columns */
    bool trans;
    int64_t ld;
} mat_desc;

/* Reads the layout of the last two dims of t (rows x cols); false if neither row- nor
 * column-major. */
static bool describe(const pt_tensor *t, mat_desc *d)
{
    int nd = t->ndim;
    int64_t rows = t->shape[nd - 2], cols = t->shape[nd - 1];
    int64_t sr = t->stride[nd - 2], sc = t->stride[nd - 1];
    int64_t maxc = cols > 1 ? cols : 1, maxr = rows > 1 ? rows : 1;
    size_t es = pti_dtypes[t->dtype].size;
    d->data = pti_data(t);
    d->bstride = nd == 3 ? t->stride[0] * (int64_t)es : 0;
    d->rs = sr;
    d->cs = sc;
    if ((sc == 1 || cols == 1) && (sr >= maxc || rows == 1)) {
        d->trans = false;
        d->ld = rows == 1 ? maxc : sr;
        return true;
    }
    if ((sr == 1 || rows == 1) && (sc >= maxr || cols == 1)) {
        d->trans = true;
        d->ld = cols == 1 ? maxr : sc;
        return true;
    }
    return false;
}

typedef struct gemm_job {
    pt_dtype dt;
    int64_t M, N, K;
    mat_desc a, b;
    char *c;
    double alpha, beta;
} gemm_job;

/* C = beta * C for K == 0 (nothing to multiply; BLAS is not asked). */
static void scale_only(const gemm_job *j, char *c)
{
    int64_t n = j->M * j->N;
    for (int64_t i = 0; i < n; i++) {
        if (j->dt == PT_FLOAT32) {
            float *p = (float *)c + i;
            *p = j->beta == 0 ? 0.0f : (float)(j->beta * *p);
        } else if (j->dt == PT_FLOAT64) {
            double *p = (double *)c + i;
            *p = j->beta == 0 ? 0.0 : j->beta * *p;
        } else {
            size_t es = pti_dtypes[j->dt].size;
            int64_t v = j->beta == 0 ? 0 : pti_load_i64(c + i * (int64_t)es, j->dt);
            pti_store_i64(c + i * (int64_t)es, j->dt,
                          (int64_t)((uint64_t)v * (uint64_t)(int64_t)j->beta));
        }
    }
}

/* ---- integer path ---------------------------------------------------------------------------- */

/* acc[N] += a * B[k, :] for one k; then C row = alpha * acc + beta * C. Arithmetic in uint64
 * so overflow wraps (the low bits equal the wrapped sum in the narrow type). */
#define INT_GEMM_ROWS(T, NAME)                                                                     \
    static void NAME(const gemm_job *j, int64_t batch, int64_t i0, int64_t i1, uint64_t *acc)      \
    {                                                                                              \
        const T *A = (const T *)(j->a.data + batch * j->a.bstride);                                \
        const T *B = (const T *)(j->b.data + batch * j->b.bstride);                                \
        T *C = (T *)j->c + batch * j->M * j->N;                                                    \
        uint64_t alpha = (uint64_t)(int64_t)j->alpha, beta = (uint64_t)(int64_t)j->beta;           \
        for (int64_t i = i0; i < i1; i++) {                                                        \
            memset(acc, 0, sizeof(uint64_t) * (size_t)j->N);                                       \
            for (int64_t k = 0; k < j->K; k++) {                                                   \
                uint64_t av = (uint64_t)(int64_t)A[i * j->a.rs + k * j->a.cs];                     \
                if (av == 0)                                                                       \
                    continue;                                                                      \
                const T *brow = B + k * j->b.rs;                                                   \
                int64_t bcs = j->b.cs;                                                             \
                if (bcs == 1)                                                                      \
                    for (int64_t n = 0; n < j->N; n++)                                             \
                        acc[n] += av * (uint64_t)(int64_t)brow[n];                                 \
                else                                                                               \
                    for (int64_t n = 0; n < j->N; n++)                                             \
                        acc[n] += av * (uint64_t)(int64_t)brow[n * bcs];                           \
            }                                                                                      \
            T *crow = C + i * j->N;                                                                \
            for (int64_t n = 0; n < j->N; n++) {                                                   \
                uint64_t r = alpha * acc[n];                                                       \
                if (beta != 0)                                                                     \
                    r += beta * (uint64_t)(int64_t)crow[n];                                        \
                crow[n] = (T)r;                                                                    \
            }                                                                                      \
        }                                                                                          \
    }
INT_GEMM_ROWS(int64_t, int_rows_i64)
INT_GEMM_ROWS(int32_t, int_rows_i32)
INT_GEMM_ROWS(int16_t, int_rows_i16)
INT_GEMM_ROWS(int8_t, int_rows_i8)
INT_GEMM_ROWS(uint8_t, int_rows_u8)
#undef INT_GEMM_ROWS

/* Rows of all batches flattened: task r is row r % M of batch r / M. */
static void int_gemm_range(void *ctx, int64_t begin, int64_t end)
{
    const gemm_job *j = ctx;
    uint64_t *acc = pti_cpu_alloc(sizeof(uint64_t) * (size_t)(j->N ? j->N : 1));
    if (!acc)
        return; /* cannot happen short of OOM; the caller checked memory up front */
    for (int64_t r = begin; r < end;) {
        int64_t batch = r / j->M, i0 = r % j->M;
        int64_t i1 = i0 + (end - r) < j->M ? i0 + (end - r) : j->M;
        switch (j->dt) {
        case PT_INT64: int_rows_i64(j, batch, i0, i1, acc); break;
        case PT_INT32: int_rows_i32(j, batch, i0, i1, acc); break;
        case PT_INT16: int_rows_i16(j, batch, i0, i1, acc); break;
        case PT_INT8: int_rows_i8(j, batch, i0, i1, acc); break;
        default: int_rows_u8(j, batch, i0, i1, acc); break;
        }
        r += i1 - i0;
    }
    pti_cpu_free(acc, sizeof(uint64_t) * (size_t)(j->N ? j->N : 1));
}

/* ---- float path ------------------------------------------------------------------------------ */

static void blas_one(const gemm_job *j, int64_t batch)
{
    char *c = j->c + batch * j->M * j->N * (int64_t)pti_dtypes[j->dt].size;
    if (j->K == 0) {
        scale_only(j, c);
        return;
    }
    enum CBLAS_TRANSPOSE ta = j->a.trans ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = j->b.trans ? CblasTrans : CblasNoTrans;
    const char *a = j->a.data + batch * j->a.bstride, *b = j->b.data + batch * j->b.bstride;
    if (j->dt == PT_FLOAT32)
        cblas_sgemm(CblasRowMajor, ta, tb, (blasint)j->M, (blasint)j->N, (blasint)j->K,
                    (float)j->alpha, (const float *)a, (blasint)j->a.ld, (const float *)b,
                    (blasint)j->b.ld, (float)j->beta, (float *)c, (blasint)j->N);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (blasint)j->M, (blasint)j->N, (blasint)j->K, j->alpha,
                    (const double *)a, (blasint)j->a.ld, (const double *)b, (blasint)j->b.ld,
                    j->beta, (double *)c, (blasint)j->N);
}

static void blas_range(void *ctx, int64_t begin, int64_t end)
{
    for (int64_t b = begin; b < end; b++)
        blas_one(ctx, b);
}

/* ---- entry ----------------------------------------------------------------------------------- */

static pt_status cpu_gemm(const pti_call *c)
{
    const pt_tensor *A = c->in[0], *B = c->in[1];
    pt_tensor *C = c->out[0];
    int nd = C->ndim;
    gemm_job j = {.dt = C->dtype, .alpha = c->scalar[0], .beta = c->scalar[1]};
    j.M = C->shape[nd - 2];
    j.N = C->shape[nd - 1];
    j.K = A->shape[nd - 1];
    int64_t batches = nd == 3 ? C->shape[0] : 1;
    if (!describe(A, &j.a) || !describe(B, &j.b) || !pti_is_contiguous(C))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s (cpu): operand layout outside the kernel "
                         "contract (%s, %s)",
                         pti_op_names[c->op], pti_tensor_desc(A), pti_tensor_desc(B));
    if (A->dtype != C->dtype || B->dtype != C->dtype)
        return pti_error(PT_ERR_DTYPE, "%s (cpu): mixed dtypes", pti_op_names[c->op]);
    j.c = pti_data(C);
    if (batches == 0 || j.M == 0 || j.N == 0)
        return PT_OK;
    if (j.K > INT32_MAX || j.M > INT32_MAX || j.N > INT32_MAX || j.a.ld > INT32_MAX ||
        j.b.ld > INT32_MAX)
        return pti_error(PT_ERR_UNSUPPORTED, "%s (cpu): dimension too large for BLAS",
                         pti_op_names[c->op]);
    switch (j.dt) {
    case PT_FLOAT32:
    case PT_FLOAT64: {
        double mnk = (double)j.M * (double)j.N * (double)j.K;
        if (batches > 1 && mnk <= SMALL_MNK) {
            int64_t grain = (int64_t)(65536.0 / (mnk + 1.0)) + 1;
            pti_parallel_for(batches, grain, blas_range, &j);
        } else {
            blas_range(&j, 0, batches);
        }
        return PT_OK;
    }
    case PT_INT64:
    case PT_INT32:
    case PT_INT16:
    case PT_INT8:
    case PT_UINT8: {
        if (j.K == 0) {
            for (int64_t b = 0; b < batches; b++)
                scale_only(&j, j.c + b * j.M * j.N * (int64_t)pti_dtypes[j.dt].size);
            return PT_OK;
        }
        int64_t grain = 16384 / (j.N * j.K + 1) + 1;
        pti_parallel_for(batches * j.M, grain, int_gemm_range, &j);
        return PT_OK;
    }
    default:
        return pti_error(PT_ERR_UNSUPPORTED, "%s (cpu): dtype %s is not supported",
                         pti_op_names[c->op], pt_dtype_name(j.dt));
    }
}

void pti_cpu_register_linalg(pti_kernel *table)
{
    table[PTI_OP_mm] = cpu_gemm;
    table[PTI_OP_bmm] = cpu_gemm;
}
