/* The CPU backend's direct float32 convolution (conv_direct.c): stride 1, no dilation, one group,
 * output channels a multiple of 8, on CPUs with AVX-512F (run-time check; conv.c's im2col + GEMM
 * path serves every other case, and every CPU without AVX-512). */
#ifndef PT_CPU_CONV_DIRECT_H
#define PT_CPU_CONV_DIRECT_H

#include "cpu.h"

/* One stride-1 convolution: x [N, C, H, W] -> y [N, Co, OH, OW] with OH = H + 2*ph - kh + 1 and
 * OW = W + 2*pw - kw + 1. */
typedef struct pti_direct_geom {
    int64_t N, C, H, W, Co, kh, kw, ph, pw, OH, OW;
} pti_direct_geom;

/* True when the CPU has the kernel and g is a shape it takes. */
bool pti_cpu_conv_direct_ok(const pti_direct_geom *g);

/* y = conv2d(x, w) + bias (bias may be NULL). w is [Co, C, kh, kw] or, when transposed, the
 * weight of a stride-1 conv_transpose2d [C, Co, kh, kw] flipped in space (the input gradient of a
 * convolution). Fails only for memory (PT_ERR_OOM, error set). */
pt_status pti_cpu_conv_direct_f32(const pti_direct_geom *g, const float *x, const float *w,
                                  bool transposed, const float *bias, float *y);

/* gw [Co, C, kh, kw] = the weight gradient of that convolution for output gradient go
 * [N, Co, OH, OW] (overwritten). Fails only for memory (PT_ERR_OOM, error set). */
pt_status pti_cpu_conv_direct_weight_grad_f32(const pti_direct_geom *g, const float *x,
                                              const float *go, float *gw);

#endif
