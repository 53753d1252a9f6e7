/* SIMD kernels of the pooling family (conv_pool_avx2.c), called by conv_pool.c when the CPU has
 * them (x86 only). */
#ifndef PT_CPU_CONV_POOL_SIMD_H
#define PT_CPU_CONV_POOL_SIMD_H

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#define PTI_CPU_HAVE_POOL_AVX2 1
/* One [H, W] plane x through a 2x2 / stride 2 max pool without padding into y [OH, OW] (2*OH <=
 * H, 2*OW <= W, H*W < 2^31) and, when ind is not NULL, the flat input index of each maximum. */
void pti_cpu_max_pool_2x2_f32_avx2(const float *x, int64_t W, int64_t OH, int64_t OW, float *y,
                                   int64_t *ind);
#endif

#endif
