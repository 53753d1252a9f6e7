/* One BLAS matrix product for the whole CPU backend (pti_cpu_gemm, declared in cpu.h): the
 * float32/float64 GEMMs of mm/bmm (linalg.c), the im2col convolutions (conv.c) and attention
 * (nn_attention.c) all come here.
 *
 * Why the product is split here and not by OpenBLAS: OpenBLAS runs single-threaded
 * (threads.c keeps it at one thread). Its own worker threads spin (sched_yield) for a long
 * time after each call, and on a machine whose cores are all busy -- our pool's workers
 * between ops, or any other process -- they take cores the next op needs and make the caller
 * wait on descheduled workers: ResNet-20 training on 2 threads of a loaded 2-core machine ran
 * 4-7x slower with OpenBLAS threads than without. So a large product is cut here into one
 * block of output rows (or columns, whichever dimension is longer) per pool thread, each
 * block an ordinary single-threaded BLAS call on its own sub-matrices: every output element
 * is still one BLAS dot product over all of K, and the same blocks come out for a given
 * thread count. */
#include <cblas.h>

#include "cpu.h"

/* multiply-adds below which one thread does the whole product (a split costs a pool wake-up,
 * a few microseconds) */
#define PARALLEL_MNK ((double)(1 << 18))
/* block boundaries fall on multiples of this, the BLAS kernels' register-tile width */
#define BLOCK_ALIGN 16

typedef struct gemm_split {
    pti_gemm_args g;
    bool split_rows; /* blocks of output rows (else of output columns) */
    int64_t block;   /* rows or columns per block */
    int64_t extent;  /* M or N */
} gemm_split;

static void blas_call(const pti_gemm_args *g)
{
    enum CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = g->trans_b ? CblasTrans : CblasNoTrans;
    if (g->f64)
        cblas_dgemm(CblasRowMajor, ta, tb, (blasint)g->M, (blasint)g->N, (blasint)g->K, g->alpha,
                    g->A, (blasint)g->lda, g->B, (blasint)g->ldb, g->beta, g->C, (blasint)g->ldc);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, (blasint)g->M, (blasint)g->N, (blasint)g->K,
                    (float)g->alpha, g->A, (blasint)g->lda, g->B, (blasint)g->ldb, (float)g->beta,
                    g->C, (blasint)g->ldc);
}

/* The sub-product of rows (or columns) [r0, r1) of C: op(A) row r starts at A + r*lda
 * elements when A is stored row-major, A + r when stored transposed; op(B) column c at B + c
 * or B + c*ldb likewise. */
static pti_gemm_args sub_product(const gemm_split *s, int64_t r0, int64_t r1)
{
    pti_gemm_args p = s->g;
    size_t es = p.f64 ? sizeof(double) : sizeof(float);
    if (s->split_rows) {
        p.M = r1 - r0;
        p.A = (const char *)p.A + (size_t)(p.trans_a ? r0 : r0 * p.lda) * es;
        p.C = (char *)p.C + (size_t)(r0 * p.ldc) * es;
    } else {
        p.N = r1 - r0;
        p.B = (const char *)p.B + (size_t)(p.trans_b ? r0 * p.ldb : r0) * es;
        p.C = (char *)p.C + (size_t)r0 * es;
    }
    return p;
}

static void gemm_blocks(void *ctx, int64_t b0, int64_t b1)
{
    const gemm_split *s = ctx;
    for (int64_t b = b0; b < b1; b++) {
        int64_t r0 = b * s->block, r1 = r0 + s->block < s->extent ? r0 + s->block : s->extent;
        pti_gemm_args p = sub_product(s, r0, r1);
        blas_call(&p);
    }
}

void pti_cpu_gemm(const pti_gemm_args *g)
{
    int threads = pt_get_num_threads();
    double mnk = (double)g->M * (double)g->N * (double)g->K;
    if (threads < 2 || mnk < PARALLEL_MNK || g->K == 0) {
        blas_call(g);
        return;
    }
    gemm_split s = {.g = *g, .split_rows = g->M >= g->N};
    s.extent = s.split_rows ? g->M : g->N;
    int64_t per = (s.extent + threads - 1) / threads;
    s.block = (per + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
    int64_t blocks = (s.extent + s.block - 1) / s.block;
    if (blocks < 2) {
        blas_call(g);
        return;
    }
    pti_parallel_for(blocks, 1, gemm_blocks, &s);
}
