/* Row primitives shared by the nn and loss CPU kernels (src/backends/cpu/nn*.c, loss*.c):
 * sums, squared deviations, affine maps and log-sum-exp over contiguous float32 runs, each
 * with a portable scalar path and an AVX2+FMA path chosen at run time (pti_cpu_has_avx2()).
 * Sums accumulate in double, so results hardly depend on the path. */
#ifndef PT_CPU_NN_SIMD_H
#define PT_CPU_NN_SIMD_H

#include "cpu.h"

/* sum x[i] */
double pti_nn_sum_f32(const float *x, int64_t n);
/* sum (x[i] - mean)^2 */
double pti_nn_sqdev_f32(const float *x, int64_t n, double mean);
/* layer_norm of `rows` contiguous rows of d floats: y = (x - mean) * rstd * w + b per row,
 * rstd = 1 / sqrt(var + eps) from one-pass moments; w and b may be NULL (1 and 0). */
void pti_nn_layer_norm_rows_f32(float *y, const float *x, int64_t rows, int64_t d, double eps,
                                const float *w, const float *b);
/* y[i] = x[i] * a + b (y may equal x) */
void pti_nn_affine_f32(float *y, const float *x, int64_t n, float a, float b);
/* y[i] = (x[i] - mean) * rstd * w[i] + b[i]; w and b may be NULL (1 and 0). */
void pti_nn_norm_affine_f32(float *y, const float *x, int64_t n, float mean, float rstd,
                            const float *w, const float *b);
/* *sg += sum g[i]; *sgd += sum g[i] * (x[i] - mean) (batch-norm backward's sums) */
void pti_nn_dev_dot_f32(const float *g, const float *x, int64_t n, double mean, double *sg,
                        double *sgd);
/* gx[i] = s * (g[i] - a) - (x[i] - mean) * t (batch-norm backward's input gradient) */
void pti_nn_bn_input_grad_f32(float *gx, const float *g, const float *x, int64_t n, float s,
                              float a, float mean, float t);
/* log(sum exp x[i]) with the max subtracted; -inf for n == 0. */
double pti_nn_logsumexp_f32(const float *x, int64_t n);

/* x[i] = exp(x[i] - m) in place (m is the row max, or NaN/inf propagate); returns the sum. */
double pti_nn_exp_sum_f32(float *x, int64_t n, float m);

#endif
