/* PromeTorch ops: the shape family -- views (reshape, view, transpose, slicing, ...) and the
 * copying shape ops (cat, stack, repeat, flip, roll, tril/triu). Every function returning
 * pt_tensor * returns a new reference, or NULL with the error set (see core.h).
 *
 * Views: where PyTorch returns a view, so do these functions: the result shares the input's
 * storage (pt_shares_storage is true), writes through it are seen by the input, and no data
 * is copied. Functions documented as "copy" always return fresh storage. Dims may be negative
 * (counted from the end). Bad dims are PT_ERR_INDEX, incompatible sizes PT_ERR_SHAPE.
 *
 * Functions returning several tensors (pt_split, pt_split_sizes, pt_chunk, pt_unbind) store a
 * malloc'd array of new references in *out and return its length; the caller releases each
 * tensor (pt_release, or the enclosing scope does) and free()s the array. On failure they
 * return -1 and set *out to NULL. */
#ifndef PROMETORCH_OPS_SHAPE_H
#define PROMETORCH_OPS_SHAPE_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* End value meaning "to the end of the dim" for pt_slice (Python's `t[a:]`). */
#define PT_SLICE_END INT64_MAX

/* ---- reshaping views ------------------------------------------------------------------------- */

/* t with a new shape of the same numel (torch.reshape). One entry may be -1 (inferred). A
 * view when the strides allow it (always for contiguous t), else a contiguous copy. */
PT_API pt_tensor *pt_reshape(const pt_tensor *t, int ndim, const int64_t *shape);
/* Like pt_reshape but always a view (torch.Tensor.view); fails with PT_ERR_SHAPE when t's
 * strides cannot express the new shape ("use pt_reshape instead"). */
PT_API pt_tensor *pt_view(const pt_tensor *t, int ndim, const int64_t *shape);
/* Dims start_dim..end_dim merged into one (torch.flatten); a view when possible, else a
 * copy (as pt_reshape). A 0-dim t gives shape [1]. */
PT_API pt_tensor *pt_flatten(const pt_tensor *t, int64_t start_dim, int64_t end_dim);
/* Dim `dim` split into `sizes` (one may be -1) (torch.unflatten); a view. */
PT_API pt_tensor *pt_unflatten(const pt_tensor *t, int64_t dim, int nsizes, const int64_t *sizes);
/* Every size-1 dim removed (torch.squeeze); a view. */
PT_API pt_tensor *pt_squeeze(const pt_tensor *t);
/* Dim `dim` removed if its size is 1, else t unchanged (torch.squeeze(t, dim)); a view. */
PT_API pt_tensor *pt_squeeze_dim(const pt_tensor *t, int64_t dim);
/* The listed dims removed where their size is 1 (torch.squeeze(t, dims)); a view. */
PT_API pt_tensor *pt_squeeze_dims(const pt_tensor *t, int ndims, const int64_t *dims);
/* A size-1 dim inserted at `dim`, in [-ndim-1, ndim] (torch.unsqueeze); a view. */
PT_API pt_tensor *pt_unsqueeze(const pt_tensor *t, int64_t dim);

/* ---- reordering views ------------------------------------------------------------------------ */

/* Dims dim0 and dim1 swapped (torch.transpose); a view. */
PT_API pt_tensor *pt_transpose(const pt_tensor *t, int64_t dim0, int64_t dim1);
/* Transpose of a tensor with at most 2 dims (torch.t); a view. */
PT_API pt_tensor *pt_t(const pt_tensor *t);
/* Dims reordered: result dim i is t's dim dims[i] (torch.permute); a view. */
PT_API pt_tensor *pt_permute(const pt_tensor *t, int ndims, const int64_t *dims);
/* t broadcast to `shape` (torch.expand): size-1 dims stretch with stride 0, new leading dims
 * are added, -1 keeps a dim's size. A view (its elements alias each other: do not write). */
PT_API pt_tensor *pt_expand(const pt_tensor *t, int ndim, const int64_t *shape);
/* pt_expand(t, other's shape). */
PT_API pt_tensor *pt_expand_as(const pt_tensor *t, const pt_tensor *other);

/* ---- slicing views --------------------------------------------------------------------------- */

/* Elements start..start+length-1 along dim (torch.narrow); start may be negative. A view. */
PT_API pt_tensor *pt_narrow(const pt_tensor *t, int64_t dim, int64_t start, int64_t length);
/* The slice at `index` along dim, removing the dim (torch.select, t[..., index]); index may be
 * negative. A view. */
PT_API pt_tensor *pt_select(const pt_tensor *t, int64_t dim, int64_t index);
/* Python's t[start:end:step] along dim: negative start/end count from the end, both are
 * clamped to [0, size] (PT_SLICE_END = to the end), step must be positive. A view. */
PT_API pt_tensor *pt_slice(const pt_tensor *t, int64_t dim, int64_t start, int64_t end,
                           int64_t step);
/* The diagonal of the (dim1, dim2) planes, offset > 0 above the main diagonal (torch.diagonal):
 * dim1 and dim2 are removed and the diagonal becomes the last dim. A view. */
PT_API pt_tensor *pt_diagonal(const pt_tensor *t, int64_t offset, int64_t dim1, int64_t dim2);

/* ---- splitting (views; see the array convention at the top) ---------------------------------- */

/* Pieces of split_size along dim, the last one smaller if needed (torch.split(t, int)). */
PT_API int pt_split(const pt_tensor *t, int64_t split_size, int64_t dim, pt_tensor ***out);
/* Pieces of the given sizes, which must sum to the size of dim (torch.split(t, list)). */
PT_API int pt_split_sizes(const pt_tensor *t, int nsizes, const int64_t *sizes, int64_t dim,
                          pt_tensor ***out);
/* At most `chunks` pieces of equal size ceil(size / chunks) (torch.chunk). */
PT_API int pt_chunk(const pt_tensor *t, int64_t chunks, int64_t dim, pt_tensor ***out);
/* Every slice along dim, each without the dim (torch.unbind). */
PT_API int pt_unbind(const pt_tensor *t, int64_t dim, pt_tensor ***out);

/* ---- copying ops ----------------------------------------------------------------------------- */

/* The n tensors joined along dim (torch.cat); their dtypes promote, sizes must match except
 * in dim; 1-D empty tensors (shape [0]) are skipped as in PyTorch. Copy. */
PT_API pt_tensor *pt_cat(int n, pt_tensor_list ts, int64_t dim);
/* The n same-shaped tensors joined along a new dim (torch.stack), dim in [-ndim-1, ndim]. Copy. */
PT_API pt_tensor *pt_stack(int n, pt_tensor_list ts, int64_t dim);
/* t repeated reps[i] times along each dim (torch.Tensor.repeat); nreps >= ndim, extra leading
 * reps add dims. Copy. */
PT_API pt_tensor *pt_repeat(const pt_tensor *t, int nreps, const int64_t *reps);
/* torch.tile: like pt_repeat, but fewer reps than dims are padded with leading 1s. Copy. */
PT_API pt_tensor *pt_tile(const pt_tensor *t, int nreps, const int64_t *reps);
/* The order of elements reversed along each listed dim (torch.flip). Copy. */
PT_API pt_tensor *pt_flip(const pt_tensor *t, int ndims, const int64_t *dims);
/* Elements shifted by shifts[i] along dims[i], wrapping around (torch.roll). With ndims == 0,
 * t is rolled as a flat array by the single shift and keeps its shape. Copy. */
PT_API pt_tensor *pt_roll(const pt_tensor *t, int nshifts, const int64_t *shifts, int ndims,
                          const int64_t *dims);
/* The lower triangle of the last two dims: elements with col - row <= diagonal kept, the rest
 * zero (torch.tril). Copy. */
PT_API pt_tensor *pt_tril(const pt_tensor *t, int64_t diagonal);
/* The upper triangle: col - row >= diagonal kept (torch.triu). Copy. */
PT_API pt_tensor *pt_triu(const pt_tensor *t, int64_t diagonal);

#ifdef __cplusplus
}
#endif
#endif
