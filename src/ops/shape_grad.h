/* The shape family's forward computations without autograd recording (src/ops/shape.c). The
 * public functions in src/ops/shape_grad.c call them and record the backward nodes. */
#ifndef PT_OPS_SHAPE_GRAD_H
#define PT_OPS_SHAPE_GRAD_H

#include "../core/internal.h"

pt_tensor *pti_fwd_reshape(const pt_tensor *t, int ndim, const int64_t *shape);
pt_tensor *pti_fwd_view(const pt_tensor *t, int ndim, const int64_t *shape);
pt_tensor *pti_fwd_flatten(const pt_tensor *t, int64_t start_dim, int64_t end_dim);
pt_tensor *pti_fwd_unflatten(const pt_tensor *t, int64_t dim, int nsizes, const int64_t *sizes);
pt_tensor *pti_fwd_squeeze(const pt_tensor *t);
pt_tensor *pti_fwd_squeeze_dims(const pt_tensor *t, int ndims, const int64_t *dims);
pt_tensor *pti_fwd_unsqueeze(const pt_tensor *t, int64_t dim);
pt_tensor *pti_fwd_transpose(const pt_tensor *t, int64_t dim0, int64_t dim1);
pt_tensor *pti_fwd_permute(const pt_tensor *t, int ndims, const int64_t *dims);
pt_tensor *pti_fwd_expand(const pt_tensor *t, int ndim, const int64_t *shape);
pt_tensor *pti_fwd_narrow(const pt_tensor *t, int64_t dim, int64_t start, int64_t length);
pt_tensor *pti_fwd_select(const pt_tensor *t, int64_t dim, int64_t index);
pt_tensor *pti_fwd_slice(const pt_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step);
pt_tensor *pti_fwd_diagonal(const pt_tensor *t, int64_t offset, int64_t dim1, int64_t dim2);
pt_tensor *pti_fwd_cat(int n, const pt_tensor *const *ts, int64_t dim);
pt_tensor *pti_fwd_repeat(const pt_tensor *t, int nreps, const int64_t *reps);
pt_tensor *pti_fwd_flip(const pt_tensor *t, int ndims, const int64_t *dims);
pt_tensor *pti_fwd_roll(const pt_tensor *t, int nshifts, const int64_t *shifts, int ndims,
                        const int64_t *dims);
pt_tensor *pti_fwd_tril(const pt_tensor *t, int64_t diagonal);
pt_tensor *pti_fwd_triu(const pt_tensor *t, int64_t diagonal);

/* True when n was recorded by a view op (its output shares its input's storage): reshape as a
 * view, view, flatten, squeeze, unsqueeze, transpose, permute, expand, narrow, select, slice,
 * diagonal, or an alias. In-place ops refuse to record on such outputs (the base tensor's
 * history could not be updated; PyTorch rebases it with CopySlices, which this engine lacks). */
struct pti_node;
bool pti_shape_is_view_node(const struct pti_node *n);

#endif
