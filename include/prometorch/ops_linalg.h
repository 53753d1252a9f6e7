/* PromeTorch ops: the linalg family (matrix products through OpenBLAS on the CPU). Every
 * function returning pt_tensor * returns a new reference, or NULL with the error set (see
 * core.h).
 *
 * Dtypes: the inputs of one call must share a dtype (as in PyTorch; PT_ERR_DTYPE otherwise,
 * except pt_outer, which promotes). float32/float64 run on BLAS, float16/bfloat16 compute in
 * float32 and round back, integer dtypes use an exact loop (wrapping like PyTorch); bool is
 * rejected. Shape errors are PT_ERR_SHAPE and name both shapes:
 * "pt_matmul: shapes [3, 4] and [5, 6] cannot be multiplied (4 != 5)".
 *
 * Autograd: every op is differentiable (floating point inputs), twice as well; gradients have
 * their input's shape and dtype (matmul's broadcast batch dims and addmm/baddbmm's broadcast
 * input are summed back; outer's gradients are cast back to each input's dtype). */
#ifndef PROMETORCH_OPS_LINALG_H
#define PROMETORCH_OPS_LINALG_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Matrix product of two 2-D tensors: [n, m] @ [m, p] -> [n, p] (torch.mm). Transposed inputs
 * are read in place (no copy). */
PT_API pt_tensor *pt_mm(const pt_tensor *a, const pt_tensor *b);

/* Batched matrix product of two 3-D tensors with the same batch size:
 * [B, n, m] @ [B, m, p] -> [B, n, p] (torch.bmm; no broadcasting). */
PT_API pt_tensor *pt_bmm(const pt_tensor *a, const pt_tensor *b);

/* torch.matmul: 1-D @ 1-D is the dot product (0-dim result); 2-D @ 2-D is pt_mm; a 1-D first
 * argument is treated as [1, m] and a 1-D second argument as [m, 1], the added dim removed
 * from the result; with more dims the leading (batch) dims broadcast:
 * [j, 1, n, m] @ [k, m, p] -> [j, k, n, p]. 0-dim inputs are an error. */
PT_API pt_tensor *pt_matmul(const pt_tensor *a, const pt_tensor *b);

/* Block-dtype second argument (a GGUF weight): pt_matmul(x, pt_t(w)) with w a contiguous
 * [N, K] block tensor (the transpose view of a weight as loaded) equals pt_linear(x, w): x is
 * float32 [..., K] (or [K]) and the result float32 [..., N] (or [N]), computed by the
 * quantized kernel described at pt_linear. Any other block-dtype b (not 2-D, or not such a
 * transpose) is PT_ERR_UNSUPPORTED / PT_ERR_SHAPE, and a block-dtype first argument
 * PT_ERR_DTYPE. */

/* Matrix-vector product: [n, m] @ [m] -> [n] (torch.mv). */
PT_API pt_tensor *pt_mv(const pt_tensor *mat, const pt_tensor *vec);

/* Dot product of two 1-D tensors with the same number of elements; 0-dim result (torch.dot). */
PT_API pt_tensor *pt_dot(const pt_tensor *a, const pt_tensor *b);

/* Outer product of two 1-D tensors: [n] x [m] -> [n, m] (torch.outer). The dtypes promote
 * (pt_promote_types) as in PyTorch. */
PT_API pt_tensor *pt_outer(const pt_tensor *a, const pt_tensor *b);

/* Options of pt_addmm_ex / pt_baddbmm_ex. A zero beta or alpha cannot mean PyTorch's default
 * of 1, so start from PT_ADDMM_DEFAULTS (or pass NULL for the defaults). For integer tensors
 * beta and alpha must be whole numbers. */
typedef struct pt_addmm_opts {
    double beta;  /* multiplies input; 0 ignores input entirely (NaN/inf in it do not appear) */
    double alpha; /* multiplies the product */
} pt_addmm_opts;
typedef pt_addmm_opts pt_baddbmm_opts;
#define PT_ADDMM_DEFAULTS ((pt_addmm_opts){.beta = 1.0, .alpha = 1.0})

/* beta * input + alpha * (m1 @ m2) with m1 [n, m], m2 [m, p] and input broadcastable to
 * [n, p] (torch.addmm). The short form uses beta = alpha = 1. */
PT_API pt_tensor *pt_addmm(const pt_tensor *input, const pt_tensor *m1, const pt_tensor *m2);
PT_API pt_tensor *pt_addmm_ex(const pt_tensor *input, const pt_tensor *m1, const pt_tensor *m2,
                              const pt_addmm_opts *opts);

/* beta * input + alpha * bmm(batch1, batch2) with batch1 [B, n, m], batch2 [B, m, p] and
 * input broadcastable to [B, n, p] (torch.baddbmm). The short form uses beta = alpha = 1. */
PT_API pt_tensor *pt_baddbmm(const pt_tensor *input, const pt_tensor *batch1,
                             const pt_tensor *batch2);
PT_API pt_tensor *pt_baddbmm_ex(const pt_tensor *input, const pt_tensor *batch1,
                                const pt_tensor *batch2, const pt_baddbmm_opts *opts);

/* F.linear(x, weight, bias): y = x @ weight^T + bias over the last dim of x.
 * x [..., in] (at least 1-D), weight [out, in] (or [in], giving [...]), bias [out] or NULL
 * (broadcastable to the output, as in PyTorch). With float weights all three share a dtype and
 * the result is differentiable (addmm for a 2-D x with bias, else matmul + add, as PyTorch).
 *
 * Weight-only quantized path (beyond PyTorch, for GGUF models): when weight has a block dtype
 * (PT_Q4_0 ... PT_Q8_K), or is float16/bfloat16 while x is float32, the weight is read in
 * place: it must be 2-D [out, in] as stored in the file, contiguous (a row slice of one is
 * fine), in a multiple of its block size (32 or 256); x must be float32 (any strides) and
 * bias float32 [out] or NULL; the result is float32 [..., out]. As in llama.cpp, each row of x
 * is quantized per block to 8 bits (Q8_0 for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0, Q8_K for the
 * K-quants; float16/bfloat16 weights use x unquantized) and the products are integer dot
 * products per block, so results differ from the float product x @ dequant(weight)^T by the
 * activation rounding (about 0.4% of a block's largest |x| per element). CPU only; inference
 * only: PT_ERR_UNSUPPORTED when grad mode is on and x or bias requires grad.
 *
 * Errors: PT_ERR_SHAPE (in_features mismatch, bias shape, weight not 2-D or not on whole
 * blocks), PT_ERR_DTYPE (mixed float dtypes, a non-float32 x or bias next to a quantized
 * weight, a block-dtype x or bias), PT_ERR_UNSUPPORTED (non-contiguous block weight, grad). */
PT_API pt_tensor *pt_linear(const pt_tensor *x, const pt_tensor *weight, const pt_tensor *bias);

#ifdef __cplusplus
}
#endif
#endif
