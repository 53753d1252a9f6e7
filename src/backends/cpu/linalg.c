/* CPU kernels of the linalg family (front-ends in src/ops/linalg.c): mm and bmm.
 *
 * Contract (src/ops/linalg.def): out = beta * out + alpha * A @ B; each input matrix is
 * row-major or column-major (a transposed contiguous matrix), batch strides are arbitrary, out
 * is contiguous. float32/float64 go to OpenBLAS with the transpose flags taken from the
 * strides (no copies). Integer dtypes (the CPU accepts them beyond the float-only contract)
 * use an exact loop that wraps like PyTorch's integer matmul.
 *
 * Batches: large matrices run one product per batch, split across the pool inside it
 * (pti_cpu_gemm). Small matrices (at most SMALL_MNK multiply-adds) run in parallel over the
 * batch on the pool instead, one whole product per task. */
#include <string.h>

#include "cpu.h"
#include "quant.h"

/* multiply-adds of a product small enough to give each pool task whole products */
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

/* C = beta * C for a float product with K == 0 (nothing to multiply; BLAS is not asked). */
static void scale_only(const gemm_job *j, char *c)
{
    int64_t n = j->M * j->N;
    if (j->dt == PT_FLOAT32) {
        float *p = (float *)c, beta = (float)j->beta;
        for (int64_t i = 0; i < n; i++)
            p[i] = beta == 0 ? 0.0f : beta * p[i];
    } else {
        double *p = (double *)c;
        for (int64_t i = 0; i < n; i++)
            p[i] = j->beta == 0 ? 0.0 : j->beta * p[i];
    }
}

/* ---- integer path ---------------------------------------------------------------------------- */

/* Cache blocks of the integer loop: a KB x NB tile of B is reused by every row of a task. */
#define INT_KB 128
#define INT_NB 1024

/* C rows [i0, i1) of one batch = beta * C + alpha * A @ B, accumulated in C itself with
 * unsigned arithmetic of the element's width (MT: at least unsigned int, so narrow types
 * never promote to a signed int that could overflow). Wrapping modulo 2^bits gives exactly
 * PyTorch's wrapped integer result, whatever the order of the sums. */
#define INT_GEMM_ROWS(T, UT, MT, NAME)                                                             \
    static void NAME(const gemm_job *j, int64_t batch, int64_t i0, int64_t i1)                     \
    {                                                                                              \
        const T *A = (const T *)(j->a.data + batch * j->a.bstride);                                \
        const T *B = (const T *)(j->b.data + batch * j->b.bstride);                                \
        UT *C = (UT *)j->c + batch * j->M * j->N;                                                  \
        MT alpha = (MT)(uint64_t)(int64_t)j->alpha, beta = (MT)(uint64_t)(int64_t)j->beta;         \
        int64_t N = j->N, K = j->K, bcs = j->b.cs;                                                 \
        for (int64_t i = i0; i < i1; i++) {                                                        \
            UT *crow = C + i * N;                                                                  \
            if (beta == 0)                                                                         \
                memset(crow, 0, sizeof(UT) * (size_t)N);                                           \
            else                                                                                   \
                for (int64_t n = 0; n < N; n++)                                                    \
                    crow[n] = (UT)(beta * (MT)crow[n]);                                            \
        }                                                                                          \
        for (int64_t k0 = 0; k0 < K; k0 += INT_KB) {                                               \
            int64_t k1 = k0 + INT_KB < K ? k0 + INT_KB : K;                                        \
            for (int64_t n0 = 0; n0 < N; n0 += INT_NB) {                                           \
                int64_t n1 = n0 + INT_NB < N ? n0 + INT_NB : N;                                    \
                for (int64_t i = i0; i < i1; i++) {                                                \
                    UT *crow = C + i * N;                                                          \
                    for (int64_t k = k0; k < k1; k++) {                                            \
                        MT av = (MT)(UT)A[i * j->a.rs + k * j->a.cs] * alpha;                      \
                        if ((UT)av == 0)                                                           \
                            continue;                                                              \
                        const T *brow = B + k * j->b.rs;                                           \
                        if (bcs == 1)                                                              \
                            for (int64_t n = n0; n < n1; n++)                                      \
                                crow[n] = (UT)((MT)crow[n] + av * (MT)(UT)brow[n]);                \
                        else                                                                       \
                            for (int64_t n = n0; n < n1; n++)                                      \
                                crow[n] = (UT)((MT)crow[n] + av * (MT)(UT)brow[n * bcs]);          \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
INT_GEMM_ROWS(int64_t, uint64_t, uint64_t, int_rows_i64)
INT_GEMM_ROWS(int32_t, uint32_t, uint32_t, int_rows_i32)
INT_GEMM_ROWS(int16_t, uint16_t, uint32_t, int_rows_i16)
INT_GEMM_ROWS(int8_t, uint8_t, uint32_t, int_rows_i8)
INT_GEMM_ROWS(uint8_t, uint8_t, uint32_t, int_rows_u8)
#undef INT_GEMM_ROWS

/* Rows of all batches flattened: task r is row r % M of batch r / M. */
static void int_gemm_range(void *ctx, int64_t begin, int64_t end)
{
    const gemm_job *j = ctx;
    for (int64_t r = begin; r < end;) {
        int64_t batch = r / j->M, i0 = r % j->M;
        int64_t i1 = i0 + (end - r) < j->M ? i0 + (end - r) : j->M;
        switch (j->dt) {
        case PT_INT64: int_rows_i64(j, batch, i0, i1); break;
        case PT_INT32: int_rows_i32(j, batch, i0, i1); break;
        case PT_INT16: int_rows_i16(j, batch, i0, i1); break;
        case PT_INT8: int_rows_i8(j, batch, i0, i1); break;
        default: int_rows_u8(j, batch, i0, i1); break;
        }
        r += i1 - i0;
    }
}

/* ---- float path ------------------------------------------------------------------------------ */

static void blas_one(const gemm_job *j, int64_t batch)
{
    char *c = j->c + batch * j->M * j->N * (int64_t)pti_dtypes[j->dt].size;
    if (j->K == 0) {
        scale_only(j, c);
        return;
    }
    pti_gemm_args g = {.f64 = j->dt == PT_FLOAT64,
                       .trans_a = j->a.trans,
                       .trans_b = j->b.trans,
                       .M = j->M,
                       .N = j->N,
                       .K = j->K,
                       .alpha = j->alpha,
                       .beta = j->beta,
                       .A = j->a.data + batch * j->a.bstride,
                       .B = j->b.data + batch * j->b.bstride,
                       .C = c,
                       .lda = j->a.ld,
                       .ldb = j->b.ld,
                       .ldc = j->N};
    pti_cpu_gemm(&g);
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
    pti_cpu_register_quant_linear(table);
}
