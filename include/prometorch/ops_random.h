/* PromeTorch ops: the random family. Every function returning pt_tensor * returns a new
 * reference, or NULL with the error set (see core.h).
 *
 * All of them draw from the default generator (pt_manual_seed): a counter-based Philox stream
 * where element i of a call uses counter base + i, so a seed gives the same tensors whatever
 * the thread count. The streams differ from PyTorch's (a different generator); the
 * distributions are the same. float16/bfloat16 values are computed in float and rounded. */
#ifndef PROMETORCH_OPS_RANDOM_H
#define PROMETORCH_OPS_RANDOM_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Uniform values in [0, 1) (torch.rand). dt must be floating. */
PT_API pt_tensor *pt_rand(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev);
/* Standard normal values (torch.randn), Box-Muller. dt must be floating. */
PT_API pt_tensor *pt_randn(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev);
/* Integers uniform in [lo, hi) without modulo bias (torch.randint(lo, hi, shape, dtype=dt)).
 * Any plain dtype, bool included; errors: lo >= hi (PT_ERR_INVALID_ARG), lo or hi - 1 not
 * representable in dt (PT_ERR_INVALID_ARG). */
PT_API pt_tensor *pt_randint(int64_t lo, int64_t hi, int ndim, const int64_t *shape, pt_dtype dt,
                             pt_device dev);
/* pt_rand / pt_randn with t's shape, dtype and device (torch.rand_like / randn_like). */
PT_API pt_tensor *pt_rand_like(const pt_tensor *t);
PT_API pt_tensor *pt_randn_like(const pt_tensor *t);

/* In place: t <- uniform values in [from, to) (Tensor.uniform_). t floating; from <= to, both
 * finite. */
PT_API pt_status pt_uniform_(pt_tensor *t, double from, double to);
/* In place: t <- normal values with the given mean and std (Tensor.normal_). t floating;
 * std >= 0. */
PT_API pt_status pt_normal_(pt_tensor *t, double mean, double std);
/* In place: t <- integers uniform in [from, to) (Tensor.random_(from, to)); rules of
 * pt_randint. */
PT_API pt_status pt_random_(pt_tensor *t, int64_t from, int64_t to);

/* 1 with probability p[i], else 0 (torch.bernoulli(p)): same shape, dtype and device as p,
 * which must be floating with every value in [0, 1] (PT_ERR_INVALID_ARG otherwise). */
PT_API pt_tensor *pt_bernoulli(const pt_tensor *p);
/* A tensor shaped like t (its dtype and device) of 1 with probability p, else 0
 * (torch.bernoulli(t, p)); p in [0, 1]. */
PT_API pt_tensor *pt_bernoulli_scalar(const pt_tensor *t, double p);
/* In place: t <- 1 with probability p, else 0 (Tensor.bernoulli_(p)); any plain dtype. */
PT_API pt_status pt_bernoulli_(pt_tensor *t, double p);

/* A random permutation of 0 .. n-1 (torch.randperm(n, dtype=dt)); dt int64 usually. Errors:
 * n < 0, n - 1 not representable in dt, bool dt. */
PT_API pt_tensor *pt_randperm(int64_t n, pt_dtype dt, pt_device dev);

/* num_samples category indices per row of probs ([n] or [B, n], floating, non-negative
 * finite weights, not necessarily normalized) as int64 [num_samples] or [B, num_samples]
 * (torch.multinomial). Without replacement, the indices of a row are distinct, in the order
 * they were drawn. Errors as PyTorch: a negative, inf or NaN weight, a row summing to 0,
 * num_samples <= 0, num_samples > n (or more than the row's non-zero weights) without
 * replacement, more than 2^24 categories. */
PT_API pt_tensor *pt_multinomial(const pt_tensor *probs, int64_t num_samples, bool replacement);

#ifdef __cplusplus
}
#endif
#endif
