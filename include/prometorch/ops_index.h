/* PromeTorch ops: the index family (selecting, gathering, scattering, masking, advanced
 * indexing, sorting, unique, one_hot, embedding). Every function returning pt_tensor * returns
 * a new reference, or NULL with the error set (see core.h); in-place functions (`_` suffix)
 * return PT_OK or an error status and leave the error message in pt_last_error().
 *
 * Index tensors: every index value is bounds-checked; an index out of range is PT_ERR_INDEX
 * with a message naming the op, the index value and the size, e.g.
 * `pt_gather: index 7 is out of bounds for dimension 1 with size 4`. Negative index values
 * wrap (i + size) only where PyTorch allows them: pt_index / pt_index_put. Index tensors must
 * be int64 (int32 is also accepted by index_select, index_add, embedding, gather, scatter and
 * scatter_add, as in PyTorch 2.x); another dtype (uint8, int8, int16, bool) is PT_ERR_DTYPE.
 * Data may have any plain (non-block) dtype and any strides. Dims may be negative (counted from
 * the end). */
#ifndef PROMETORCH_OPS_INDEX_H
#define PROMETORCH_OPS_INDEX_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.index_select(t, dim, index): the slices of t at positions `index` (1-D, or 0-dim as
 * one position) along dim. Output shape = t's with dim replaced by numel(index). */
PT_API pt_tensor *pt_index_select(const pt_tensor *t, int64_t dim, const pt_tensor *index);

/* torch.gather(t, dim, index): out[i][j][k] = t[index[i][j][k]][j][k] (dim 0). index (int64
 * or int32) has t's ndim and index.size(d) <= t.size(d) for d != dim; the output has index's
 * shape. */
PT_API pt_tensor *pt_gather(const pt_tensor *t, int64_t dim, const pt_tensor *index);

/* torch.scatter(t, dim, index, src): a copy of t with t[index[i][j]][j] = src[i][j] (dim 0).
 * src has t's dtype and index.size(d) <= src.size(d) for every d, <= t.size(d) for d != dim.
 * Where several positions of index name one element, which value lands is unspecified
 * (PyTorch says the same); this implementation keeps the last in row-major order. */
PT_API pt_tensor *pt_scatter(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                             const pt_tensor *src);
/* In-place t.scatter_(dim, index, src). */
PT_API pt_status pt_scatter_(pt_tensor *t, int64_t dim, const pt_tensor *index,
                             const pt_tensor *src);
/* torch.scatter(t, dim, index, value): the scalar form (value cast to t's dtype). */
PT_API pt_tensor *pt_scatter_scalar(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                                    double value);
PT_API pt_status pt_scatter_scalar_(pt_tensor *t, int64_t dim, const pt_tensor *index,
                                    double value);

/* torch.scatter_add(t, dim, index, src): like pt_scatter but adding; duplicate positions all
 * add up. */
PT_API pt_tensor *pt_scatter_add(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                                 const pt_tensor *src);
PT_API pt_status pt_scatter_add_(pt_tensor *t, int64_t dim, const pt_tensor *index,
                                 const pt_tensor *src);

/* torch.index_add(t, dim, index, source, alpha=alpha): a copy of t with
 * t.select(dim, index[i]) += alpha * source.select(dim, i). index is 1-D (or 0-dim) int64 or
 * int32; source has t's dtype and t's shape with dim replaced by numel(index). Duplicates add
 * up. For integer tensors alpha is truncated to an integer. */
PT_API pt_tensor *pt_index_add(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                               const pt_tensor *source, double alpha);
PT_API pt_status pt_index_add_(pt_tensor *t, int64_t dim, const pt_tensor *index,
                               const pt_tensor *source, double alpha);

/* torch.masked_fill(t, mask, value): value where mask (bool; uint8 is accepted as PyTorch
 * does, deprecated) is true, t elsewhere. The result has the broadcast shape of t and mask
 * and t's dtype (value is cast to it). */
PT_API pt_tensor *pt_masked_fill(const pt_tensor *t, const pt_tensor *mask, double value);
/* In place: mask must broadcast to t's shape. */
PT_API pt_status pt_masked_fill_(pt_tensor *t, const pt_tensor *mask, double value);
/* The same with value given as a 0-dim tensor (any dtype; its value is cast to t's dtype). */
PT_API pt_tensor *pt_masked_fill_tensor(const pt_tensor *t, const pt_tensor *mask,
                                        const pt_tensor *value);
PT_API pt_status pt_masked_fill_tensor_(pt_tensor *t, const pt_tensor *mask,
                                        const pt_tensor *value);

/* torch.masked_select(t, mask): a 1-D tensor of the elements of t (broadcast with mask) where
 * mask is true, in row-major order. */
PT_API pt_tensor *pt_masked_select(const pt_tensor *t, const pt_tensor *mask);

/* Advanced indexing t[indices[0], indices[1], ...] with n <= ndim entries (missing trailing
 * entries are `:`). Each entry is NULL (a full slice `:`), an int64 tensor of positions
 * (negative values wrap), or a bool/uint8 mask that indexes as many dims as it has (its shape
 * must equal those dims of t; it stands for its nonzero() coordinates). The index tensors
 * broadcast to one shape B. When all indexed dims are adjacent, B takes their place in the
 * result (t[:, i, j] on [A, X, Y, C] with B = [2, 3] is [A, 2, 3, C]); when a slice separates
 * them, B comes first followed by the sliced dims (t[i, :, j] is [2, 3, X]). A 0-dim int64
 * index acts like a plain integer (PyTorch selects it first), so it does not separate the
 * others. int32 index tensors are rejected (as PyTorch 1.13 does). Always a copy, as in
 * PyTorch; with no index tensor at all (every entry NULL) the result is a view of t. Errors:
 * PT_ERR_INDEX for an index out of range, too many indices, a mask whose shape does not match
 * the dims it indexes, or index tensors that do not broadcast; PT_ERR_DTYPE for another index
 * dtype. */
PT_API pt_tensor *pt_index(const pt_tensor *t, int n, pt_tensor_list indices);

/* t[indices] = values (accumulate = false) or t[indices] += values (true; duplicates all add
 * up) on a copy of t (torch.index_put). values has t's dtype and broadcasts to the shape
 * pt_index(t, n, indices) would have. Without accumulate, which of several values written to
 * one element lands is unspecified (here: the last in row-major order). */
PT_API pt_tensor *pt_index_put(const pt_tensor *t, int n, pt_tensor_list indices,
                               const pt_tensor *values, bool accumulate);
/* In place (torch.Tensor.index_put_). */
PT_API pt_status pt_index_put_(pt_tensor *t, int n, pt_tensor_list indices, const pt_tensor *values,
                               bool accumulate);

/* torch.nonzero(t): the coordinates of non-zero elements as an int64 tensor [count, ndim], in
 * row-major order (NaN counts as non-zero). */
PT_API pt_tensor *pt_nonzero(const pt_tensor *t);

/* torch.topk(t, k, dim, largest, sorted): the k largest (smallest when !largest) values along
 * dim; *indices (may be NULL) receives their int64 positions (a new reference). The results
 * are always sorted (sorted = false is allowed to give any order in PyTorch). Among equal
 * values the one with the lower index comes first; NaN counts as larger than every number.
 * k must be in [0, size of dim]. A bool t is PT_ERR_DTYPE (as PyTorch on the CPU). */
PT_API pt_tensor *pt_topk(const pt_tensor *t, int64_t k, int64_t dim, bool largest, bool sorted,
                          pt_tensor **indices);

/* torch.sort(t, dim, descending, stable): values sorted along dim, *indices (may be NULL) gets
 * the int64 permutation. The sort is always stable (equal keys keep their order), so stable =
 * false gives the stable answer too. NaN sorts last ascending and first descending (as if
 * larger than +inf), as in PyTorch. */
PT_API pt_tensor *pt_sort(const pt_tensor *t, int64_t dim, bool descending, bool stable,
                          pt_tensor **indices);
/* torch.argsort(t, dim, descending): the int64 indices of pt_sort (stable). */
PT_API pt_tensor *pt_argsort(const pt_tensor *t, int64_t dim, bool descending);

/* torch.unique(t, sorted=True, return_inverse, return_counts) over the flattened tensor: the
 * sorted distinct values (1-D). *inverse (may be NULL) gets, for each element of t, the int64
 * position of its value in the result (t's shape); *counts (may be NULL) gets how often each
 * distinct value occurs. NaN values are each distinct (PyTorch 1.13's CPU result for NaN is
 * not meaningful either). */
PT_API pt_tensor *pt_unique(const pt_tensor *t, pt_tensor **inverse, pt_tensor **counts);

/* torch.nn.functional.one_hot(indices, num_classes): int64 result of indices' shape + [C];
 * num_classes = -1 uses max(indices) + 1. indices must be int64, in [0, C). */
PT_API pt_tensor *pt_one_hot(const pt_tensor *indices, int64_t num_classes);

/* Options of pt_embedding_ex; the zero value is PyTorch's default (no padding_idx). */
typedef struct pt_embedding_opts {
    bool has_padding_idx; /* padding_idx given */
    int64_t padding_idx;  /* in [-V, V) for weight [V, D]; negative counts from the end */
} pt_embedding_opts;

/* torch.nn.functional.embedding(indices, weight): the rows of weight ([V, D]) at indices (any
 * shape, int64 or int32); result shape indices.shape + [D]. weight may also be a contiguous
 * GGUF block tensor (D a multiple of its block size): only the looked-up rows are dequantized
 * and the result is float32 (see ops_quant.h); no gradient flows to such a weight. */
PT_API pt_tensor *pt_embedding(const pt_tensor *weight, const pt_tensor *indices);
/* The same with options. padding_idx does not change the forward result (PyTorch's forward
 * does not either): the row is still read. It is validated here and only matters for the
 * gradient (the padding row gets none), which the autograd layer adds. max_norm is not
 * supported. */
PT_API pt_tensor *pt_embedding_ex(const pt_tensor *weight, const pt_tensor *indices,
                                  const pt_embedding_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
