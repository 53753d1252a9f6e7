/* Shared between the CPU elementwise kernel files: the AVX2+FMA float32 loops (elementwise_avx2.c),
 * the AVX-512 unary loops (elementwise_avx512.c) and the registration of the binary/ternary kernels
 * (elementwise_binary.c). */
#ifndef PT_CPU_ELEMENTWISE_H
#define PT_CPU_ELEMENTWISE_H

#include "cpu.h"

/* True when op has an AVX2 contiguous float32 unary loop. */
bool pti_ew_avx2_has_unary(pti_op op);
/* out[i] = op(in[i]) for n contiguous floats; p holds the op's float parameters. */
void pti_ew_avx2_unary(pti_op op, float *out, const float *in, int64_t n, const float *p);
/* The same for the AVX-512 loops (elementwise_avx512.c). */
bool pti_ew_avx512_has_unary(pti_op op);
void pti_ew_avx512_unary(pti_op op, float *out, const float *in, int64_t n, const float *p);
/* True when op has an AVX2 float32 binary loop. */
bool pti_ew_avx2_has_binary(pti_op op);
/* out[i] = a[i*sa] op b[i*sb] for n floats, sa and sb each 0 (broadcast) or 1; alpha for add. */
void pti_ew_avx2_binary(pti_op op, float *out, const float *a, int64_t sa, const float *b,
                        int64_t sb, int64_t n, float alpha);

/* The same over rows of a 2-D iteration: row r starts row_strides[0..2] * r bytes after out, a
 * and b. */
void pti_ew_avx2_binary_2d(pti_op op, float *out, const float *a, int64_t sa, const float *b,
                           int64_t sb, int64_t n, float alpha, int64_t rows,
                           const int64_t *row_strides);
/* The AVX-512 form of pti_ew_avx2_binary_2d (elementwise_avx512.c), for the same ops and with
 * the same results bit for bit. */
bool pti_ew_avx512_has_binary(pti_op op);
void pti_ew_avx512_binary_2d(pti_op op, float *out, const float *a, int64_t sa, const float *b,
                             int64_t sb, int64_t n, float alpha, int64_t rows,
                             const int64_t *row_strides);
/* True for the comparisons eq, ne, lt, le, gt, ge. */
bool pti_ew_avx2_has_compare(pti_op op);
/* out[i] = a[i*sa] op b[i*sb] as bool bytes, sa and sb each 0 or 1 (not both 0). */
void pti_ew_avx2_compare(pti_op op, uint8_t *out, const float *a, int64_t sa, const float *b,
                         int64_t sb, int64_t n);
/* out[i] = cond[i] ? a[i] : b[i] for n contiguous 4-byte elements. */
void pti_ew_avx2_where32(uint32_t *out, const uint8_t *cond, const uint32_t *a, const uint32_t *b,
                         int64_t n);

/* True for the fused activation backwards (threshold/tanh/sigmoid/silu/gelu_backward). */
bool pti_ew_avx2_has_act_backward(pti_op op);
/* out[i] = the op's gradient from g[i] and the saved x[i] (contiguous); p0 = threshold or
 * gelu's approximate flag. */
void pti_ew_avx2_act_backward(pti_op op, float *out, const float *g, const float *x, int64_t n,
                              float p0);

void pti_cpu_register_elementwise_binary(pti_kernel *table);

#endif
