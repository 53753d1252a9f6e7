/* PromeTorch ops: the quant family -- reading the GGUF block dtypes (PT_Q4_0 ... PT_Q8_K,
 * formats.md 2.2/2.3) as float32. Every function returning pt_tensor * returns a new reference,
 * or NULL with the error set (see core.h).
 *
 * A block tensor's bytes are whole blocks in row-major order, so it must be contiguous, have at
 * least one dim, and have a last dim that is a multiple of the dtype's block size
 * (pt_dtype_block_size: 32 for Q4_0 ... Q8_1, 256 for the K-quants); anything else is
 * PT_ERR_SHAPE. The values are bit-identical to gguf-py's (and ggml's reference)
 * dequantizers. Block tensors never require grad (pt_requires_grad_ refuses them), so no op
 * here records a gradient to one.
 *
 * Other block readers: pt_to_dtype(t, float32/float64/float16/bfloat16) of a block tensor
 * dequantizes (then rounds to the target dtype), and pt_embedding accepts a block weight
 * [V, D], dequantizing only the rows it looks up (see ops_index.h). */
#ifndef PROMETORCH_OPS_QUANT_H
#define PROMETORCH_OPS_QUANT_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A new contiguous float32 tensor of t's shape holding t's values. t may be a block tensor
 * (dequantized; large tensors are split over the thread pool by blocks) or any plain dtype
 * (a converted copy, recorded by autograd like pt_to_dtype for a floating t). Errors: t NULL
 * (the earlier error is kept), a block tensor that is not contiguous or whose last dim is not
 * a multiple of the block size (PT_ERR_SHAPE), a device without the kernel
 * (PT_ERR_UNSUPPORTED). gguf-py: gguf.quants.dequantize(raw, qtype). */
PT_API pt_tensor *pt_dequantize(const pt_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
