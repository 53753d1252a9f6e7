/* Shared between the CPU elementwise kernel files: the AVX2+FMA float32 loops (elementwise_avx2.c)
 * and the registration of the binary/ternary kernels (elementwise_binary.c). */
#ifndef PT_CPU_ELEMENTWISE_H
#define PT_CPU_ELEMENTWISE_H

#include "cpu.h"

/* True when op has an AVX2 contiguous float32 unary loop. */
bool pti_ew_avx2_has_unary(pti_op op);
/* out[i] = op(in[i]) for n contiguous floats; p holds the op's float parameters. */
void pti_ew_avx2_unary(pti_op op, float *out, const float *in, int64_t n, const float *p);
/* True when op has an AVX2 float32 binary loop. */
bool pti_ew_avx2_has_binary(pti_op op);
/* out[i] = a[i*sa] op b[i*sb] for n floats, sa and sb each 0 (broadcast) or 1; alpha for add. */
void pti_ew_avx2_binary(pti_op op, float *out, const float *a, int64_t sa, const float *b,
                        int64_t sb, int64_t n, float alpha);

void pti_cpu_register_elementwise_binary(pti_kernel *table);

#endif
