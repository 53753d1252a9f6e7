/* The shape family's forward computations without autograd recording (pti_fwd_*, in
 * src/ops/shape.c, beside the public front-ends that call them) and the recording of their
 * nodes (pti_shape_record_*, in src/ops/shape_grad.c, beside the backward formulas). */
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

/* Recording: each attaches the op's node to `out`, the forward's result for input t (the
 * caller has checked pti_grad_recording), and returns out, or NULL (out released) when
 * recording fails; a NULL out passes through. */
pt_tensor *pti_shape_record_reshape(const char *name, const pt_tensor *t, pt_tensor *out);
pt_tensor *pti_shape_record_transpose(const pt_tensor *t, pt_tensor *out, int64_t dim0,
                                      int64_t dim1);
pt_tensor *pti_shape_record_permute(const pt_tensor *t, pt_tensor *out, int ndims,
                                    const int64_t *dims);
pt_tensor *pti_shape_record_expand(const pt_tensor *t, pt_tensor *out);
/* The slicing views; args are the view's arguments after t (narrow: dim, start, length;
 * select: dim, index; slice: dim, start, end, step; diagonal: offset, dim1, dim2). */
typedef enum pti_view_kind {
    PTI_VIEW_NARROW,
    PTI_VIEW_SELECT,
    PTI_VIEW_SLICE,
    PTI_VIEW_DIAGONAL
} pti_view_kind;
pt_tensor *pti_shape_record_view(pti_view_kind kind, const pt_tensor *t, pt_tensor *out, int nargs,
                                 const int64_t *args);
/* n <= PTI_NODE_MAX_IN inputs. */
pt_tensor *pti_shape_record_cat(int n, const pt_tensor *const *ts, pt_tensor *out, int64_t dim);
pt_tensor *pti_shape_record_repeat(const pt_tensor *t, pt_tensor *out, int nreps,
                                   const int64_t *reps);
pt_tensor *pti_shape_record_flip(const pt_tensor *t, pt_tensor *out, int ndims,
                                 const int64_t *dims);
pt_tensor *pti_shape_record_roll(const pt_tensor *t, pt_tensor *out, int nshifts,
                                 const int64_t *shifts, int ndims, const int64_t *dims);
/* tril (upper false) or triu. */
pt_tensor *pti_shape_record_tri(bool upper, const pt_tensor *t, pt_tensor *out, int64_t diagonal);

/* True when n was recorded by a view op (its output shares its input's storage): reshape as a
 * view, view, flatten, squeeze, unsqueeze, transpose, permute, expand, narrow, select, slice,
 * diagonal, or an alias. In-place ops refuse to record on such outputs (the base tensor's
 * history could not be updated; PyTorch rebases it with CopySlices, which this engine lacks). */
struct pti_node;
bool pti_shape_is_view_node(const struct pti_node *n);

#endif
