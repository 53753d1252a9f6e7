/* Shared pieces of the CPU backend: the strided N-operand iterator every elementwise-style
 * kernel uses, CPU feature detection, and the per-family kernel registration functions. */
#ifndef PT_CPU_H
#define PT_CPU_H

#include "../../core/internal.h"

/* ---- features ---------------------------------------------------------------------------------
 */

/* True when the CPU has AVX2 and FMA and PT_DISABLE_AVX2 is not set in the environment (the
 * portable scalar paths then run everywhere, which the tests use as the reference). */
bool pti_cpu_has_avx2(void);
/* AVX2 as above and AVX-512 F/DQ/BW/VL, unless PT_DISABLE_AVX512 is set (which caps the unary
 * elementwise and softmax row kernels at AVX2; the *_avx2 tests run so). */
bool pti_cpu_has_avx512(void);
/* AVX2 as above and F16C (vcvtph2ps / vcvtps2ph). */
bool pti_cpu_has_f16c(void);

/* ---- iterator ----------------------------------------------------------------------------------
 */

#define PTI_ITER_MAX_OPS 6

/* Operands over one common shape (the first operand's, usually the output). Inputs are
 * broadcast against it (right-aligned, size-1 dims get stride 0). Dims are reordered
 * innermost-first and merged where every operand is contiguous across them. */
typedef struct pti_iter {
    int n_ops, ndim;
    int64_t numel;
    int64_t shape[PT_MAX_DIMS];                     /* shape[0] is the innermost dim */
    int64_t strides[PT_MAX_DIMS][PTI_ITER_MAX_OPS]; /* bytes */
    char *data[PTI_ITER_MAX_OPS];
} pti_iter;

/* The inner loop: n elements; data[k] is operand k's first element, strides[k] its byte step. */
typedef void (*pti_loop_fn)(void *ctx, char **data, const int64_t *strides, int64_t n);

/* ops[0] defines the shape; ops[1..] must broadcast to it (front-ends have checked). */
void pti_iter_init(pti_iter *it, int n_ops, const pt_tensor *const *ops);
/* Runs fn over every element, split across the thread pool in chunks of >= grain elements. */
void pti_iter_for_each(const pti_iter *it, int64_t grain, pti_loop_fn fn, void *ctx);

/* Default grain for cheap elementwise kernels (elements per task). */
#define PTI_GRAIN_ELEMENTWISE 32768

/* ---- BLAS ------------------------------------------------------------------------------------
 */

/* C[M, N] = alpha * op(A)[M, K] @ op(B)[K, N] + beta * C, row-major, float32 or float64
 * (leading dimensions in elements, op = transpose when trans_*). */
typedef struct pti_gemm_args {
    bool f64, trans_a, trans_b;
    int64_t M, N, K;
    double alpha, beta;
    const void *A, *B;
    void *C;
    int64_t lda, ldb, ldc;
} pti_gemm_args;

/* The product through single-threaded BLAS calls, split across the thread pool when large
 * (gemm_blas.c). K == 0 is passed to BLAS as it is. */
void pti_cpu_gemm(const pti_gemm_args *g);

/* ---- registration -------------------------------------------------------------------------------
 */

/* Each family fills its slots of the CPU kernel table (src/backends/cpu/<family>.c). */
void pti_cpu_register_core(pti_kernel *table);
void pti_cpu_register_elementwise(pti_kernel *table);
void pti_cpu_register_reduce(pti_kernel *table);
void pti_cpu_register_linalg(pti_kernel *table);
void pti_cpu_register_shape(pti_kernel *table);
void pti_cpu_register_index(pti_kernel *table);
void pti_cpu_register_conv(pti_kernel *table);
void pti_cpu_register_nn(pti_kernel *table);
void pti_cpu_register_loss(pti_kernel *table);
void pti_cpu_register_random(pti_kernel *table);
void pti_cpu_register_quant(pti_kernel *table);
void pti_cpu_register_optim(pti_kernel *table);

#endif
