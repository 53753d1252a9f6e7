/* PromeTorch ops: the reduce family -- reductions over all elements or over given dims (sum,
 * mean, prod, max/min, amax/amin, argmax/argmin, var/std, norm, logsumexp, all/any) and the
 * dim-wise ops built on them (cumsum, cumprod, softmax, log_softmax). Semantics are PyTorch's:
 * negative dims wrap, `keepdim` keeps reduced dims with size 1, a dim list with ndims == 0
 * (or dims == NULL) means every dim, repeated dims are an error.
 *
 * Dtypes: sum/prod/cumsum/cumprod of integer or bool tensors give int64; mean, var, std,
 * norm, softmax and log_softmax need a floating point input (PT_ERR_DTYPE otherwise, as in
 * PyTorch); logsumexp of an integer tensor gives float32. float16/bfloat16 inputs are
 * computed in higher precision (double) and rounded back to their dtype. float32 sums add
 * blocks of at most 256 values in float and the block sums in double, so large sums match
 * PyTorch's to ~1e-7 relative; results are the same for any thread count.
 *
 * Extensions over PyTorch 1.13 (which has no CPU kernel for them): prod/cumsum/cumprod/
 * softmax of float16, argmax/argmin of bool.
 *
 * Autograd: every op with a floating point result is differentiable (PyTorch's formulas,
 * double backward included) except argmax/argmin/all/any, which never record. Where a
 * reduction is not differentiable PyTorch's subgradient is used: ties of max/min (all elements)
 * and amax/amin share the gradient evenly, max_dim/min_dim send it to the returned index, a
 * zero norm or zero std gets a zero gradient, the p = 0 norm has a zero gradient; zeros
 * in prod/cumprod inputs are handled exactly.
 *
 * Every function returning pt_tensor * returns a new reference, or NULL with the error set
 * (see core.h); a NULL tensor argument propagates the earlier error. */
#ifndef PROMETORCH_OPS_REDUCE_H
#define PROMETORCH_OPS_REDUCE_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sum of every element, a 0-dim tensor (torch.sum(t)). Empty input gives 0. */
PT_API pt_tensor *pt_sum(const pt_tensor *t);
/* Sum over dims (torch.sum(t, dims, keepdim)). */
PT_API pt_tensor *pt_sum_dim(const pt_tensor *t, int ndims, const int64_t *dims, bool keepdim);
/* Mean of every element (torch.mean(t)); floating point only. Empty input gives NaN. */
PT_API pt_tensor *pt_mean(const pt_tensor *t);
/* Mean over dims (torch.mean(t, dims, keepdim)). */
PT_API pt_tensor *pt_mean_dim(const pt_tensor *t, int ndims, const int64_t *dims, bool keepdim);
/* Product of every element (torch.prod(t)). Empty input gives 1. */
PT_API pt_tensor *pt_prod(const pt_tensor *t);
/* Product over one dim (torch.prod(t, dim, keepdim)). */
PT_API pt_tensor *pt_prod_dim(const pt_tensor *t, int64_t dim, bool keepdim);

/* Largest / smallest element, a 0-dim tensor of t's dtype (torch.max(t)). NaN propagates.
 * An empty input is PT_ERR_INVALID_ARG. */
PT_API pt_tensor *pt_max(const pt_tensor *t);
PT_API pt_tensor *pt_min(const pt_tensor *t);
/* Largest / smallest values along dim (torch.max(t, dim, keepdim)); *indices (if non-NULL)
 * receives a new int64 tensor with the index of the first occurrence (of the first NaN when
 * there is one, since NaN propagates). A zero-size reduced dim is PT_ERR_INVALID_ARG. */
PT_API pt_tensor *pt_max_dim(const pt_tensor *t, int64_t dim, bool keepdim, pt_tensor **indices);
PT_API pt_tensor *pt_min_dim(const pt_tensor *t, int64_t dim, bool keepdim, pt_tensor **indices);
/* Max / min over dims, values only (torch.amax / torch.amin). */
PT_API pt_tensor *pt_amax(const pt_tensor *t, int ndims, const int64_t *dims, bool keepdim);
PT_API pt_tensor *pt_amin(const pt_tensor *t, int ndims, const int64_t *dims, bool keepdim);
/* Index (int64) of the first max / min along dim (torch.argmax(t, dim, keepdim)). */
PT_API pt_tensor *pt_argmax(const pt_tensor *t, int64_t dim, bool keepdim);
PT_API pt_tensor *pt_argmin(const pt_tensor *t, int64_t dim, bool keepdim);
/* Index into the flattened tensor of the first max / min (torch.argmax(t)), 0-dim int64. */
PT_API pt_tensor *pt_argmax_all(const pt_tensor *t);
PT_API pt_tensor *pt_argmin_all(const pt_tensor *t);

/* Variance / standard deviation over dims (torch.var(t, dims, correction=c, keepdim)):
 * sum((x - mean)^2) / max(N - correction, 0). PyTorch's default correction is 1 (Bessel).
 * Floating point only. */
PT_API pt_tensor *pt_var(const pt_tensor *t, int ndims, const int64_t *dims, int64_t correction,
                         bool keepdim);
PT_API pt_tensor *pt_std(const pt_tensor *t, int ndims, const int64_t *dims, int64_t correction,
                         bool keepdim);

/* Vector p-norm over dims (torch.linalg.vector_norm(t, p, dims, keepdim)): p = 2 (Euclidean),
 * 1, INFINITY (max |x|), -INFINITY (min |x|), 0 (count of non-zeros) or any other p
 * ((sum |x|^p)^(1/p)). Floating point only. */
PT_API pt_tensor *pt_norm(const pt_tensor *t, double p, int ndims, const int64_t *dims,
                          bool keepdim);

/* log(sum(exp(x))) over dims, computed stably (torch.logsumexp). Integer input gives float32. */
PT_API pt_tensor *pt_logsumexp(const pt_tensor *t, int ndims, const int64_t *dims, bool keepdim);

/* True when every / any element is non-zero (torch.all / torch.any): a bool tensor (uint8 for
 * a uint8 input, as PyTorch). The _dim forms reduce one dim. */
PT_API pt_tensor *pt_all(const pt_tensor *t);
PT_API pt_tensor *pt_all_dim(const pt_tensor *t, int64_t dim, bool keepdim);
PT_API pt_tensor *pt_any(const pt_tensor *t);
PT_API pt_tensor *pt_any_dim(const pt_tensor *t, int64_t dim, bool keepdim);

/* Running sum / product along dim (torch.cumsum / torch.cumprod), same shape as t; integer and
 * bool inputs give int64. */
PT_API pt_tensor *pt_cumsum(const pt_tensor *t, int64_t dim);
PT_API pt_tensor *pt_cumprod(const pt_tensor *t, int64_t dim);

/* softmax / log_softmax along dim (torch.softmax / torch.log_softmax), computed stably
 * (max-subtracted). Floating point only; same dtype and shape as t. */
PT_API pt_tensor *pt_softmax(const pt_tensor *t, int64_t dim);
PT_API pt_tensor *pt_log_softmax(const pt_tensor *t, int64_t dim);

#ifdef __cplusplus
}
#endif
#endif
