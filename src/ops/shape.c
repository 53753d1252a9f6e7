/* Front-ends of the shape family. Views (reshape when possible, view, flatten, unflatten,
 * squeeze, unsqueeze, transpose, permute, expand, narrow, select, slice, diagonal, split,
 * chunk, unbind) compute a new geometry over the same storage with pti_tensor_view and run no
 * kernel. The copying ops (cat, stack, repeat, tile, flip, roll, tril, triu) allocate a
 * contiguous result and dispatch the kernels listed in shape.def. Differentiable ops have
 * their forward here as pti_fwd_<op> (no recording) and their public pt_<op> at the end of
 * this file, which records the node through shape_grad.c (pti_shape_record_*, beside the
 * backward formulas). Ops built from other public ops (stack, tile, t, expand_as,
 * squeeze_dim, split, chunk, unbind) are recorded through those ops. */
#include <stdlib.h>
#include <string.h>

#include "../graph/node.h"
#include "common.h"
#include "shape_grad.h"

static pt_tensor *view_of(const pt_tensor *t, int nd, const int64_t *shape, const int64_t *stride,
                          int64_t offset)
{
    return pti_tensor_view(t, nd, shape, stride, offset);
}

static bool check_ndims_arg(const char *op, int n, const int64_t *v, const char *what)
{
    if (n < 0 || n > PT_MAX_DIMS) {
        pti_error(PT_ERR_SHAPE, "%s: %s has %d entries (expected 0 to %d)", op, what, n,
                  PT_MAX_DIMS);
        return false;
    }
    if (n > 0 && !v) {
        pti_error(PT_ERR_NULL, "%s: %s is NULL with %d entries", op, what, n);
        return false;
    }
    return true;
}

/* ---- reshape and view ------------------------------------------------------------------------ */

/* Resolves one -1 in shape against numel, checking that the sizes multiply to numel. */
static bool infer_shape(const char *op, int64_t numel, int nd, const int64_t *shape, int64_t *out)
{
    if (!check_ndims_arg(op, nd, shape, "shape"))
        return false;
    int infer = -1;
    int64_t prod = 1;
    for (int i = 0; i < nd; i++) {
        if (shape[i] == -1) {
            if (infer >= 0) {
                pti_error(PT_ERR_SHAPE, "%s: only one dimension can be inferred (shape %s)", op,
                          pti_shape_str(nd, shape));
                return false;
            }
            infer = i;
        } else if (shape[i] < 0) {
            pti_error(PT_ERR_SHAPE, "%s: invalid shape dimension %lld in %s", op,
                      (long long)shape[i], pti_shape_str(nd, shape));
            return false;
        } else {
            prod = shape[i] && prod > INT64_MAX / shape[i] ? -1 : prod * shape[i];
            if (prod < 0)
                break;
        }
        out[i] = shape[i];
    }
    if (infer >= 0 && prod == 0) {
        pti_error(PT_ERR_SHAPE,
                  "%s: cannot reshape tensor of 0 elements into shape %s because "
                  "the unspecified dimension size -1 can be any value and is ambiguous",
                  op, pti_shape_str(nd, shape));
        return false;
    }
    if (prod >= 0 && infer >= 0 && numel % prod == 0) {
        out[infer] = numel / prod;
        return true;
    }
    if (prod >= 0 && infer < 0 && prod == numel)
        return true;
    pti_error(PT_ERR_SHAPE, "%s: shape %s is invalid for input of size %lld", op,
              pti_shape_str(nd, shape), (long long)numel);
    return false;
}

/* The strides that let t's memory be read with `shape` (same numel), if any: PyTorch's
 * rule -- each run of t's dims that is contiguous in memory must be re-split by the new
 * shape without a new dim crossing a run boundary. */
static bool view_strides(const pt_tensor *t, int nd, const int64_t *shape, int64_t *stride)
{
    if (t->ndim == 0 || t->numel == 0) {
        pti_contiguous_strides(nd, shape, stride);
        return true;
    }
    int view_d = nd - 1;
    int64_t chunk_base = t->stride[t->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        tensor_numel *= t->shape[d];
        /* a run ends at dim 0 or where dim d-1 is not laid out right after dim d */
        if (d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                stride[view_d] = view_numel * chunk_base;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel)
                return false;
            if (d > 0) {
                chunk_base = t->stride[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

static pt_tensor *reshape_impl(const char *op, const pt_tensor *t, int nd, const int64_t *shape,
                               bool allow_copy)
{
    if (!PTI_CHECK_ARG(t, op, "t"))
        return NULL;
    int64_t s[PT_MAX_DIMS], st[PT_MAX_DIMS];
    if (!infer_shape(op, t->numel, nd, shape, s))
        return NULL;
    if (view_strides(t, nd, s, st))
        return view_of(t, nd, s, st, t->offset);
    if (!allow_copy)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: view size is not compatible with input tensor's "
                              "size and stride (at least one dimension spans across two "
                              "contiguous subspaces): shape %s with strides %s cannot be viewed "
                              "as %s; use pt_reshape instead",
                              op, pti_shape_str(t->ndim, t->shape),
                              pti_shape_str(t->ndim, t->stride), pti_shape_str(nd, s));
    pt_tensor *c = pt_clone(t);
    if (!c)
        return NULL;
    pti_contiguous_strides(nd, s, st);
    pt_tensor *r = view_of(c, nd, s, st, c->offset);
    pt_release(c);
    return r;
}

pt_tensor *pti_fwd_reshape(const pt_tensor *t, int ndim, const int64_t *shape)
{
    return reshape_impl("pt_reshape", t, ndim, shape, true);
}

pt_tensor *pti_fwd_view(const pt_tensor *t, int ndim, const int64_t *shape)
{
    return reshape_impl("pt_view", t, ndim, shape, false);
}

pt_tensor *pti_fwd_flatten(const pt_tensor *t, int64_t start_dim, int64_t end_dim)
{
    const char *op = "pt_flatten";
    if (!PTI_CHECK_ARG(t, op, "t"))
        return NULL;
    int s, e;
    if (!pti_wrap_dim(op, start_dim, t->ndim, &s) || !pti_wrap_dim(op, end_dim, t->ndim, &e))
        return NULL;
    if (t->ndim == 0)
        return reshape_impl(op, t, 1, (const int64_t[]){1}, true);
    if (s > e)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_flatten: start_dim (%d) cannot come after "
                              "end_dim (%d)",
                              s, e);
    if (s == e)
        return pti_tensor_view(t, t->ndim, t->shape, t->stride, t->offset);
    int64_t shape[PT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < s; i++)
        shape[nd++] = t->shape[i];
    shape[nd++] = pti_shape_numel(e - s + 1, t->shape + s);
    for (int i = e + 1; i < t->ndim; i++)
        shape[nd++] = t->shape[i];
    return reshape_impl(op, t, nd, shape, true);
}

pt_tensor *pti_fwd_unflatten(const pt_tensor *t, int64_t dim, int nsizes, const int64_t *sizes)
{
    const char *op = "pt_unflatten";
    if (!PTI_CHECK_ARG(t, op, "t") || !check_ndims_arg(op, nsizes, sizes, "sizes"))
        return NULL;
    int d;
    if (!pti_wrap_dim(op, dim, t->ndim, &d))
        return NULL;
    if (t->ndim == 0)
        return pti_error_null(PT_ERR_SHAPE, "pt_unflatten: cannot unflatten a 0-dim tensor");
    if (nsizes == 0)
        return pti_error_null(PT_ERR_SHAPE, "pt_unflatten: sizes must be non-empty");
    if (t->ndim - 1 + nsizes > PT_MAX_DIMS)
        return pti_error_null(PT_ERR_SHAPE, "pt_unflatten: result would have more than %d dims",
                              PT_MAX_DIMS);
    int64_t inner[PT_MAX_DIMS];
    if (!infer_shape(op, t->shape[d], nsizes, sizes, inner)) {
        return pti_error_null(PT_ERR_SHAPE,
                              "pt_unflatten: provided sizes %s don't multiply up "
                              "to the size of dim %d (%lld) in the input tensor %s",
                              pti_shape_str(nsizes, sizes), d, (long long)t->shape[d],
                              pti_shape_str(t->ndim, t->shape));
    }
    int64_t shape[PT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d)
            for (int k = 0; k < nsizes; k++)
                shape[nd++] = inner[k];
        else
            shape[nd++] = t->shape[i];
    }
    return reshape_impl(op, t, nd, shape, false);
}

/* ---- squeeze / unsqueeze --------------------------------------------------------------------- */

static pt_tensor *squeeze_mask(const pt_tensor *t, const bool *mask)
{
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (mask[i] && t->shape[i] == 1)
            continue;
        shape[nd] = t->shape[i];
        stride[nd++] = t->stride[i];
    }
    return view_of(t, nd, shape, stride, t->offset);
}

pt_tensor *pti_fwd_squeeze(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_squeeze", "t"))
        return NULL;
    bool mask[PT_MAX_DIMS];
    for (int i = 0; i < PT_MAX_DIMS; i++)
        mask[i] = true;
    return squeeze_mask(t, mask);
}

pt_tensor *pt_squeeze_dim(const pt_tensor *t, int64_t dim)
{
    return pt_squeeze_dims(t, 1, &dim);
}

pt_tensor *pti_fwd_squeeze_dims(const pt_tensor *t, int ndims, const int64_t *dims)
{
    const char *op = "pt_squeeze";
    if (!PTI_CHECK_ARG(t, op, "t") || !check_ndims_arg(op, ndims, dims, "dims"))
        return NULL;
    bool mask[PT_MAX_DIMS];
    if (ndims == 0)
        return pti_tensor_view(t, t->ndim, t->shape, t->stride,
                               t->offset); /* an empty list squeezes nothing */
    if (!pti_dims_mask(op, ndims, dims, t->ndim, mask))
        return NULL;
    return squeeze_mask(t, mask);
}

pt_tensor *pti_fwd_unsqueeze(const pt_tensor *t, int64_t dim)
{
    const char *op = "pt_unsqueeze";
    if (!PTI_CHECK_ARG(t, op, "t"))
        return NULL;
    int d;
    if (!pti_wrap_dim(op, dim, t->ndim + 1, &d))
        return NULL;
    if (t->ndim >= PT_MAX_DIMS)
        return pti_error_null(PT_ERR_SHAPE,
                              "pt_unsqueeze: tensor already has %d dims (the "
                              "maximum)",
                              t->ndim);
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == d) {
            shape[i] = 1;
            stride[i] = d >= t->ndim ? 1 : t->shape[d] * t->stride[d];
        } else {
            shape[i] = t->shape[j];
            stride[i] = t->stride[j++];
        }
    }
    return view_of(t, t->ndim + 1, shape, stride, t->offset);
}

/* ---- transpose, permute, expand -------------------------------------------------------------- */

pt_tensor *pti_fwd_transpose(const pt_tensor *t, int64_t dim0, int64_t dim1)
{
    const char *op = "pt_transpose";
    if (!PTI_CHECK_ARG(t, op, "t"))
        return NULL;
    int a, b;
    if (!pti_wrap_dim(op, dim0, t->ndim, &a) || !pti_wrap_dim(op, dim1, t->ndim, &b))
        return NULL;
    if (t->ndim == 0)
        return pti_tensor_view(t, t->ndim, t->shape, t->stride, t->offset);
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(stride, t->stride, sizeof(int64_t) * (size_t)t->ndim);
    shape[a] = t->shape[b];
    shape[b] = t->shape[a];
    stride[a] = t->stride[b];
    stride[b] = t->stride[a];
    return view_of(t, t->ndim, shape, stride, t->offset);
}

pt_tensor *pt_t(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_t", "t"))
        return NULL;
    if (t->ndim > 2)
        return pti_error_null(PT_ERR_SHAPE,
                              "pt_t: expects a tensor with <= 2 dimensions, but "
                              "got a %d-D tensor of shape %s",
                              t->ndim, pti_shape_str(t->ndim, t->shape));
    if (t->ndim < 2) {
        pt_tensor *r = pti_tensor_view(t, t->ndim, t->shape, t->stride, t->offset);
        if (r && pti_record_alias(r, t) != PT_OK) {
            pt_release(r);
            return NULL;
        }
        return r;
    }
    return pt_transpose(t, 0, 1);
}

pt_tensor *pti_fwd_permute(const pt_tensor *t, int ndims, const int64_t *dims)
{
    const char *op = "pt_permute";
    if (!PTI_CHECK_ARG(t, op, "t") || !check_ndims_arg(op, ndims, dims, "dims"))
        return NULL;
    if (ndims != t->ndim)
        return pti_error_null(PT_ERR_SHAPE,
                              "pt_permute: number of dims don't match: the tensor "
                              "has %d dims (shape %s) but %d were given",
                              t->ndim, pti_shape_str(t->ndim, t->shape), ndims);
    bool seen[PT_MAX_DIMS] = {false};
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    for (int i = 0; i < ndims; i++) {
        int d;
        if (!pti_wrap_dim(op, dims[i], t->ndim, &d))
            return NULL;
        if (seen[d])
            return pti_error_null(PT_ERR_INVALID_ARG, "pt_permute: repeated dim %d in %s", d,
                                  pti_shape_str(ndims, dims));
        seen[d] = true;
        shape[i] = t->shape[d];
        stride[i] = t->stride[d];
    }
    return view_of(t, ndims, shape, stride, t->offset);
}

pt_tensor *pti_fwd_expand(const pt_tensor *t, int ndim, const int64_t *shape)
{
    const char *op = "pt_expand";
    if (!PTI_CHECK_ARG(t, op, "t") || !check_ndims_arg(op, ndim, shape, "shape"))
        return NULL;
    if (ndim < t->ndim)
        return pti_error_null(PT_ERR_SHAPE,
                              "pt_expand: the number of sizes provided (%d) must be "
                              "greater or equal to the number of dimensions in the tensor (%d)",
                              ndim, t->ndim);
    int64_t s[PT_MAX_DIMS], st[PT_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        if (j < 0) {
            if (shape[i] < 0)
                return pti_error_null(PT_ERR_SHAPE,
                                      "pt_expand: the expanded size of the tensor "
                                      "(%lld) isn't allowed in a leading, non-existing dimension "
                                      "%d",
                                      (long long)shape[i], i);
            s[i] = shape[i];
            st[i] = 0;
        } else if (shape[i] == -1 || shape[i] == t->shape[j]) {
            s[i] = t->shape[j];
            st[i] = t->stride[j];
        } else if (t->shape[j] == 1 && shape[i] >= 0) {
            s[i] = shape[i];
            st[i] = 0;
        } else {
            return pti_error_null(PT_ERR_SHAPE,
                                  "pt_expand: the expanded size of the tensor (%lld) "
                                  "must match the existing size (%lld) at non-singleton dimension "
                                  "%d; target sizes: %s, tensor sizes: %s",
                                  (long long)shape[i], (long long)t->shape[j], i,
                                  pti_shape_str(ndim, shape), pti_shape_str(t->ndim, t->shape));
        }
    }
    if (!pti_check_shape(op, ndim, s))
        return NULL;
    return view_of(t, ndim, s, st, t->offset);
}

pt_tensor *pt_expand_as(const pt_tensor *t, const pt_tensor *other)
{
    if (!PTI_CHECK_ARG(t, "pt_expand_as", "t") || !PTI_CHECK_ARG(other, "pt_expand_as", "other"))
        return NULL;
    return pt_expand(t, other->ndim, other->shape);
}

/* ---- slicing --------------------------------------------------------------------------------- */

static bool wrap_nonscalar(const char *op, const pt_tensor *t, int64_t dim, int *d)
{
    if (t->ndim == 0) {
        pti_error(PT_ERR_INDEX, "%s: cannot be applied to a 0-dim tensor", op);
        return false;
    }
    return pti_wrap_dim(op, dim, t->ndim, d);
}

/* t with dim d restricted to `len` elements from `start` with step `step` (a view). */
static pt_tensor *restrict_dim(const pt_tensor *t, int d, int64_t start, int64_t len, int64_t step)
{
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(stride, t->stride, sizeof(int64_t) * (size_t)t->ndim);
    shape[d] = len;
    stride[d] = t->stride[d] * step;
    int64_t offset = t->offset + (len > 0 ? start * t->stride[d] : 0);
    return view_of(t, t->ndim, shape, stride, offset);
}

pt_tensor *pti_fwd_narrow(const pt_tensor *t, int64_t dim, int64_t start, int64_t length)
{
    const char *op = "pt_narrow";
    int d;
    if (!PTI_CHECK_ARG(t, op, "t") || !wrap_nonscalar(op, t, dim, &d))
        return NULL;
    int64_t size = t->shape[d];
    if (start < -size || start > size)
        return pti_error_null(PT_ERR_INDEX,
                              "pt_narrow: start (%lld) out of range for dim %d of "
                              "size %lld",
                              (long long)start, d, (long long)size);
    if (start < 0)
        start += size;
    if (length < 0 || start + length > size)
        return pti_error_null(PT_ERR_INDEX,
                              "pt_narrow: start (%lld) + length (%lld) exceeds "
                              "dimension size (%lld)",
                              (long long)start, (long long)length, (long long)size);
    return restrict_dim(t, d, start, length, 1);
}

pt_tensor *pti_fwd_select(const pt_tensor *t, int64_t dim, int64_t index)
{
    const char *op = "pt_select";
    int d;
    if (!PTI_CHECK_ARG(t, op, "t") || !wrap_nonscalar(op, t, dim, &d))
        return NULL;
    int64_t size = t->shape[d];
    if (index < -size || index >= size)
        return pti_error_null(PT_ERR_INDEX,
                              "pt_select: index %lld out of range for tensor of "
                              "size %s at dimension %d",
                              (long long)index, pti_shape_str(t->ndim, t->shape), d);
    if (index < 0)
        index += size;
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d)
            continue;
        shape[nd] = t->shape[i];
        stride[nd++] = t->stride[i];
    }
    return view_of(t, nd, shape, stride, t->offset + index * t->stride[d]);
}

pt_tensor *pti_fwd_slice(const pt_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step)
{
    const char *op = "pt_slice";
    int d;
    if (!PTI_CHECK_ARG(t, op, "t") || !wrap_nonscalar(op, t, dim, &d))
        return NULL;
    if (step <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_slice: slice step must be positive, got "
                              "%lld",
                              (long long)step);
    int64_t size = t->shape[d];
    if (start < 0)
        start = start < -size ? 0 : start + size;
    if (end < 0)
        end = end < -size ? 0 : end + size;
    if (start > size)
        start = size;
    if (end > size)
        end = size;
    if (end < start)
        end = start;
    int64_t len = (end - start + step - 1) / step;
    return restrict_dim(t, d, start, len, step);
}

pt_tensor *pti_fwd_diagonal(const pt_tensor *t, int64_t offset, int64_t dim1, int64_t dim2)
{
    const char *op = "pt_diagonal";
    if (!PTI_CHECK_ARG(t, op, "t"))
        return NULL;
    if (t->ndim < 2)
        return pti_error_null(PT_ERR_SHAPE,
                              "pt_diagonal: expected a tensor with at least 2 dims, "
                              "got shape %s",
                              pti_shape_str(t->ndim, t->shape));
    int a, b;
    if (!pti_wrap_dim(op, dim1, t->ndim, &a) || !pti_wrap_dim(op, dim2, t->ndim, &b))
        return NULL;
    if (a == b)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_diagonal: diagonal dimensions cannot be "
                              "identical %lld, %lld",
                              (long long)dim1, (long long)dim2);
    int64_t len, start = t->offset;
    if (offset >= 0) {
        len = t->shape[b] - offset < t->shape[a] ? t->shape[b] - offset : t->shape[a];
        if (len > 0)
            start += offset * t->stride[b];
    } else {
        len = t->shape[a] + offset < t->shape[b] ? t->shape[a] + offset : t->shape[b];
        if (len > 0)
            start -= offset * t->stride[a];
    }
    if (len < 0)
        len = 0;
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == a || i == b)
            continue;
        shape[nd] = t->shape[i];
        stride[nd++] = t->stride[i];
    }
    shape[nd] = len;
    stride[nd++] = t->stride[a] + t->stride[b];
    return view_of(t, nd, shape, stride, start);
}

/* ---- split, chunk, unbind -------------------------------------------------------------------- */

/* Views of consecutive pieces of dim d with the given sizes; returns the count. */
static int pieces(const pt_tensor *t, int d, int n, const int64_t *sizes, pt_tensor ***out)
{
    pt_tensor **arr = pti_malloc(sizeof(pt_tensor *) * (size_t)(n ? n : 1));
    if (!arr)
        return -1;
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        arr[i] = pt_narrow(t, d, start, sizes[i]); /* recorded: a node per piece */
        if (!arr[i]) {
            for (int k = 0; k < i; k++)
                pt_release(arr[k]);
            free(arr);
            return -1;
        }
        start += sizes[i];
    }
    *out = arr;
    return n;
}

/* Common checks of the array-returning functions; sets *out to NULL first. */
static bool split_args(const char *op, const pt_tensor *t, int64_t dim, pt_tensor ***out, int *d)
{
    if (!out) {
        pti_error(PT_ERR_NULL, "%s: out is NULL", op);
        return false;
    }
    *out = NULL;
    return PTI_CHECK_ARG(t, op, "t") && wrap_nonscalar(op, t, dim, d);
}

/* Pieces of `split_size` (the last smaller) along d. */
static int split_even(const char *op, const pt_tensor *t, int64_t split_size, int d,
                      pt_tensor ***out)
{
    int64_t size = t->shape[d];
    if (split_size < 0 || (split_size == 0 && size != 0)) {
        pti_error(PT_ERR_INVALID_ARG,
                  "%s: split_size can only be 0 if dimension size is 0, and "
                  "must be non-negative (got split_size %lld for dimension size %lld)",
                  op, (long long)split_size, (long long)size);
        return -1;
    }
    int64_t n = split_size == 0 ? 1 : (size + split_size - 1) / split_size;
    if (n < 1)
        n = 1;
    if (n > (1 << 24)) {
        pti_error(PT_ERR_INVALID_ARG, "%s: too many pieces (%lld)", op, (long long)n);
        return -1;
    }
    int64_t *sizes = pti_malloc(sizeof(int64_t) * (size_t)n);
    if (!sizes)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = size - i * split_size;
        sizes[i] = rest < split_size ? rest : split_size;
    }
    int r = pieces(t, d, (int)n, sizes, out);
    free(sizes);
    return r;
}

int pt_split(const pt_tensor *t, int64_t split_size, int64_t dim, pt_tensor ***out)
{
    int d;
    if (!split_args("pt_split", t, dim, out, &d))
        return -1;
    return split_even("pt_split", t, split_size, d, out);
}

int pt_split_sizes(const pt_tensor *t, int nsizes, const int64_t *sizes, int64_t dim,
                   pt_tensor ***out)
{
    const char *op = "pt_split_sizes";
    int d;
    if (!split_args(op, t, dim, out, &d))
        return -1;
    if (nsizes < 0 || (nsizes > 0 && !sizes)) {
        pti_error(PT_ERR_INVALID_ARG, "pt_split_sizes: invalid sizes list (%d entries)", nsizes);
        return -1;
    }
    int64_t sum = 0;
    bool bad = false;
    for (int i = 0; i < nsizes; i++) {
        bad |= sizes[i] < 0;
        sum += sizes[i] > 0 ? sizes[i] : 0;
    }
    if (bad || sum != t->shape[d]) {
        pti_error(PT_ERR_SHAPE,
                  "pt_split_sizes: split_sizes must be non-negative and sum exactly "
                  "to %lld (the size of dimension %d of %s), but got split_sizes=%s",
                  (long long)t->shape[d], d, pti_shape_str(t->ndim, t->shape),
                  nsizes <= PT_MAX_DIMS ? pti_shape_str(nsizes, sizes) : "[...]");
        return -1;
    }
    return pieces(t, d, nsizes, sizes, out);
}

int pt_chunk(const pt_tensor *t, int64_t chunks, int64_t dim, pt_tensor ***out)
{
    const char *op = "pt_chunk";
    int d;
    if (!split_args(op, t, dim, out, &d))
        return -1;
    if (chunks <= 0) {
        pti_error(PT_ERR_INVALID_ARG, "pt_chunk: chunks must be greater than 0, got %lld",
                  (long long)chunks);
        return -1;
    }
    int64_t size = t->shape[d];
    int64_t split_size = (size + chunks - 1) / chunks;
    if (split_size == 0 && size == 0) { /* PyTorch returns `chunks` empty pieces */
        if (chunks > (1 << 24)) {
            pti_error(PT_ERR_INVALID_ARG, "pt_chunk: too many chunks (%lld)", (long long)chunks);
            return -1;
        }
        int64_t *zeros = pti_calloc((size_t)chunks, sizeof(int64_t));
        if (!zeros)
            return -1;
        int r = pieces(t, d, (int)chunks, zeros, out);
        free(zeros);
        return r;
    }
    return split_even(op, t, split_size, d, out);
}

int pt_unbind(const pt_tensor *t, int64_t dim, pt_tensor ***out)
{
    const char *op = "pt_unbind";
    int d;
    if (!split_args(op, t, dim, out, &d))
        return -1;
    int64_t n = t->shape[d];
    if (n > (1 << 24)) {
        pti_error(PT_ERR_INVALID_ARG, "pt_unbind: too many pieces (%lld)", (long long)n);
        return -1;
    }
    pt_tensor **arr = pti_malloc(sizeof(pt_tensor *) * (size_t)(n ? n : 1));
    if (!arr)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        arr[i] = pt_select(t, d, i);
        if (!arr[i]) {
            for (int64_t k = 0; k < i; k++)
                pt_release(arr[k]);
            free(arr);
            return -1;
        }
    }
    *out = arr;
    return (int)n;
}

/* ---- copying ops ----------------------------------------------------------------------------- */

static bool check_copy_input(const char *op, const pt_tensor *t)
{
    return PTI_CHECK_ARG(t, op, "t") && pti_check_plain_dtype(op, t);
}

static pt_tensor *dispatch_new(pti_op kop, const pt_tensor *in, int nd, const int64_t *shape,
                               double scalar, const void *params)
{
    pt_tensor *out = pti_tensor_new(nd, shape, in->dtype, in->storage->device);
    if (!out || out->numel == 0)
        return out;
    pti_call c = {
        .n_in = 1, .n_out = 1, .in = {in}, .out = {out}, .params = params, .scalar = {scalar}};
    if (pti_dispatch(kop, &c) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

/* PyTorch's legacy rule: a 1-D tensor of shape [0] is skipped by cat whatever the others are. */
static bool cat_skipped(const pt_tensor *t)
{
    return t->ndim == 1 && t->shape[0] == 0;
}

pt_tensor *pti_fwd_cat(int n, const pt_tensor *const *ts, int64_t dim)
{
    const char *op = "pt_cat";
    if (n <= 0 || !ts)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_cat: expected a non-empty list of tensors");
    const pt_tensor *ref = NULL;
    pt_dtype dt = PT_DTYPE_COUNT;
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            pti_null_arg(op, "ts[i]");
            return NULL;
        }
        if (!pti_check_plain_dtype(op, ts[i]))
            return NULL;
        if (ts[i]->ndim == 0)
            return pti_error_null(PT_ERR_SHAPE,
                                  "pt_cat: zero-dimensional tensor (at position %d) "
                                  "cannot be concatenated",
                                  i);
        dt = dt == PT_DTYPE_COUNT ? ts[i]->dtype : pt_promote_types(dt, ts[i]->dtype);
        if (!ref && !cat_skipped(ts[i]))
            ref = ts[i];
    }
    if (!pti_check_same_device(op, n, ts))
        return NULL;
    if (!ref) /* every input is an empty [0] */
        return pti_tensor_new(1, (const int64_t[]){0}, dt, ts[0]->storage->device);
    int d;
    if (!pti_wrap_dim(op, dim, ref->ndim, &d))
        return NULL;
    int64_t shape[PT_MAX_DIMS];
    memcpy(shape, ref->shape, sizeof(int64_t) * (size_t)ref->ndim);
    shape[d] = 0;
    for (int i = 0; i < n; i++) {
        const pt_tensor *t = ts[i];
        if (cat_skipped(t))
            continue;
        if (t->ndim != ref->ndim)
            return pti_error_null(PT_ERR_SHAPE,
                                  "pt_cat: tensors must have the same number of "
                                  "dimensions: got %d and %d (tensor %d)",
                                  ref->ndim, t->ndim, i);
        for (int k = 0; k < t->ndim; k++)
            if (k != d && t->shape[k] != ref->shape[k])
                return pti_error_null(PT_ERR_SHAPE,
                                      "pt_cat: sizes of tensors must match except "
                                      "in dimension %d: expected size %lld but got size %lld for "
                                      "tensor number %d in the list (%s vs %s)",
                                      d, (long long)ref->shape[k], (long long)t->shape[k], i,
                                      pti_shape_str(ref->ndim, ref->shape),
                                      pti_shape_str(t->ndim, t->shape));
        shape[d] += t->shape[d];
    }
    pt_tensor *out = pti_tensor_new(ref->ndim, shape, dt, ref->storage->device);
    if (!out)
        return NULL;
    /* groups of at most PTI_MAX_IN inputs, each copied into a narrow view of out */
    int64_t pos = 0;
    pt_status st = PT_OK;
    for (int i = 0; i < n && st == PT_OK;) {
        pti_call c = {.n_out = 1, .scalar = {(double)d}};
        pt_tensor *owned[PTI_MAX_IN] = {NULL};
        int64_t len = 0;
        for (; i < n && c.n_in < PTI_MAX_IN; i++) {
            const pt_tensor *t = ts[i];
            if (cat_skipped(t) || t->numel == 0)
                continue;
            if (t->dtype != dt) {
                owned[c.n_in] = pti_as_dtype(t, dt);
                if (!owned[c.n_in]) {
                    st = pt_last_status();
                    break;
                }
                t = owned[c.n_in];
            }
            c.in[c.n_in++] = t;
            len += t->shape[d];
        }
        if (st == PT_OK && c.n_in > 0) {
            c.out[0] = restrict_dim(out, d, pos, len, 1);
            st = c.out[0] ? pti_dispatch(PTI_OP_cat, &c) : pt_last_status();
            pt_release(c.out[0]);
        }
        pos += len;
        for (int k = 0; k < PTI_MAX_IN; k++)
            pt_release(owned[k]);
    }
    if (st != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

pt_tensor *pt_stack(int n, pt_tensor_list ts_in, int64_t dim)
{
    const pt_tensor *const *ts = PT_TENSOR_LIST_PTR(ts_in);
    const char *op = "pt_stack";
    if (n <= 0 || !ts)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_stack: expected a non-empty list of "
                                                  "tensors");
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            pti_null_arg(op, "ts[i]");
            return NULL;
        }
        if (ts[i]->ndim != ts[0]->ndim ||
            memcmp(ts[i]->shape, ts[0]->shape, sizeof(int64_t) * (size_t)ts[0]->ndim) != 0)
            return pti_error_null(PT_ERR_SHAPE,
                                  "pt_stack: expects each tensor to be equal size, "
                                  "but got %s at entry 0 and %s at entry %d",
                                  pti_shape_str(ts[0]->ndim, ts[0]->shape),
                                  pti_shape_str(ts[i]->ndim, ts[i]->shape), i);
    }
    int d;
    if (!pti_wrap_dim(op, dim, ts[0]->ndim + 1, &d))
        return NULL;
    pt_tensor *views_stack[64] = {NULL};
    pt_tensor **views = n <= 64 ? views_stack : pti_calloc((size_t)n, sizeof(pt_tensor *));
    if (!views)
        return NULL;
    pt_tensor *out = NULL;
    int i = 0;
    for (; i < n; i++)
        if (!(views[i] = pt_unsqueeze(ts[i], d)))
            break;
    if (i == n)
        out = pt_cat(n, (const pt_tensor *const *)views, d);
    for (int k = 0; k < n; k++)
        pt_release(views[k]);
    if (views != views_stack)
        free(views);
    return out;
}

pt_tensor *pti_fwd_repeat(const pt_tensor *t, int nreps, const int64_t *reps)
{
    const char *op = "pt_repeat";
    if (!check_copy_input(op, t) || !check_ndims_arg(op, nreps, reps, "repeats"))
        return NULL;
    if (nreps < t->ndim)
        return pti_error_null(PT_ERR_SHAPE,
                              "pt_repeat: number of dimensions of repeat dims (%d) "
                              "can not be smaller than number of dimensions of tensor (%d)",
                              nreps, t->ndim);
    int64_t in_shape[PT_MAX_DIMS], in_stride[PT_MAX_DIMS], shape[PT_MAX_DIMS];
    int lead = nreps - t->ndim;
    for (int i = 0; i < nreps; i++) {
        if (reps[i] < 0)
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  "pt_repeat: repeats can not be negative "
                                  "(got %s)",
                                  pti_shape_str(nreps, reps));
        in_shape[i] = i < lead ? 1 : t->shape[i - lead];
        in_stride[i] = i < lead ? 0 : t->stride[i - lead];
        shape[i] = in_shape[i] * reps[i];
    }
    if (!pti_check_shape(op, nreps, shape))
        return NULL;
    pt_tensor *in = view_of(t, nreps, in_shape, in_stride, t->offset);
    if (!in)
        return NULL;
    pt_tensor *out = dispatch_new(PTI_OP_repeat, in, nreps, shape, 0, NULL);
    pt_release(in);
    return out;
}

pt_tensor *pt_tile(const pt_tensor *t, int nreps, const int64_t *reps)
{
    const char *op = "pt_tile";
    if (!check_copy_input(op, t) || !check_ndims_arg(op, nreps, reps, "dims"))
        return NULL;
    if (nreps >= t->ndim)
        return pt_repeat(t, nreps, reps);
    int64_t padded[PT_MAX_DIMS];
    int lead = t->ndim - nreps;
    for (int i = 0; i < t->ndim; i++)
        padded[i] = i < lead ? 1 : reps[i - lead];
    return pt_repeat(t, t->ndim, padded);
}

pt_tensor *pti_fwd_flip(const pt_tensor *t, int ndims, const int64_t *dims)
{
    const char *op = "pt_flip";
    if (!check_copy_input(op, t) || !check_ndims_arg(op, ndims, dims, "dims"))
        return NULL;
    bool mask[PT_MAX_DIMS];
    if (ndims > 0 && !pti_dims_mask(op, ndims, dims, t->ndim, mask))
        return NULL;
    int bits = 0;
    for (int i = 0; ndims > 0 && i < t->ndim; i++)
        bits |= mask[i] ? 1 << i : 0;
    return dispatch_new(PTI_OP_flip, t, t->ndim, t->shape, (double)bits, NULL);
}

pt_tensor *pti_fwd_roll(const pt_tensor *t, int nshifts, const int64_t *shifts, int ndims,
                        const int64_t *dims)
{
    const char *op = "pt_roll";
    if (!check_copy_input(op, t) || !check_ndims_arg(op, nshifts, shifts, "shifts") ||
        !check_ndims_arg(op, ndims, dims, "dims"))
        return NULL;
    if (ndims == 0) { /* flat roll: roll the row-major sequence, keep the shape */
        if (nshifts != 1)
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  "pt_roll: shifts and dimensions must align "
                                  "(shifts: %d, dims: 0; a flat roll takes one shift)",
                                  nshifts);
        pt_tensor *flat = pti_fwd_reshape(t, 1, (const int64_t[]){t->numel});
        pt_tensor *rolled = flat ? pti_fwd_roll(flat, 1, shifts, 1, (const int64_t[]){0}) : NULL;
        pt_tensor *r = rolled ? pti_fwd_view(rolled, t->ndim, t->shape) : NULL;
        pt_release(flat);
        pt_release(rolled);
        return r;
    }
    if (nshifts != ndims)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_roll: shifts and dimensions must align "
                              "(shifts: %d, dims: %d)",
                              nshifts, ndims);
    int64_t per_dim[PT_MAX_DIMS] = {0};
    for (int i = 0; i < ndims; i++) {
        int d;
        if (!wrap_nonscalar(op, t, dims[i], &d))
            return NULL;
        int64_t size = t->shape[d];
        if (size == 0)
            continue;
        int64_t s = shifts[i] % size;
        per_dim[d] = ((per_dim[d] + s) % size + size) % size;
    }
    return dispatch_new(PTI_OP_roll, t, t->ndim, t->shape, 0, per_dim);
}

static pt_tensor *triangle(const char *op, pti_op kop, const pt_tensor *t, int64_t diagonal)
{
    if (!check_copy_input(op, t))
        return NULL;
    if (t->ndim < 2)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: input tensor must have at least 2 dimensions, "
                              "got shape %s",
                              op, pti_shape_str(t->ndim, t->shape));
    /* beyond +-(rows + cols) every diagonal keeps all or nothing: clamp so it fits a double */
    int64_t lim = t->shape[t->ndim - 2] + t->shape[t->ndim - 1] + 1;
    diagonal = diagonal > lim ? lim : diagonal < -lim ? -lim : diagonal;
    return dispatch_new(kop, t, t->ndim, t->shape, (double)diagonal, NULL);
}

pt_tensor *pti_fwd_tril(const pt_tensor *t, int64_t diagonal)
{
    return triangle("pt_tril", PTI_OP_tril, t, diagonal);
}

pt_tensor *pti_fwd_triu(const pt_tensor *t, int64_t diagonal)
{
    return triangle("pt_triu", PTI_OP_triu, t, diagonal);
}

/* ---- differentiable front-ends ------------------------------------------------------------ */

/* Each runs its pti_fwd_* above; when recording, the node goes on through shape_grad.c's
 * pti_shape_record_* (reshape, flatten, cat and roll compute their forward with grad mode off:
 * it may be built from recorded public ops). */

pt_tensor *pt_reshape(const pt_tensor *t, int ndim, const int64_t *shape)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_reshape(t, ndim, shape);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_reshape(t, ndim, shape);
    pt_no_grad_end();
    return pti_shape_record_reshape("reshape", t, out);
}

pt_tensor *pt_view(const pt_tensor *t, int ndim, const int64_t *shape)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_view(t, ndim, shape);
    return pti_shape_record_reshape("view", t, pti_fwd_view(t, ndim, shape));
}

pt_tensor *pt_flatten(const pt_tensor *t, int64_t start_dim, int64_t end_dim)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_flatten(t, start_dim, end_dim);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_flatten(t, start_dim, end_dim);
    pt_no_grad_end();
    return pti_shape_record_reshape("flatten", t, out);
}

pt_tensor *pt_unflatten(const pt_tensor *t, int64_t dim, int nsizes, const int64_t *sizes)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_unflatten(t, dim, nsizes, sizes);
    return pti_shape_record_reshape("unflatten", t, pti_fwd_unflatten(t, dim, nsizes, sizes));
}

pt_tensor *pt_squeeze(const pt_tensor *t)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_squeeze(t);
    return pti_shape_record_reshape("squeeze", t, pti_fwd_squeeze(t));
}

pt_tensor *pt_squeeze_dims(const pt_tensor *t, int ndims, const int64_t *dims)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_squeeze_dims(t, ndims, dims);
    return pti_shape_record_reshape("squeeze", t, pti_fwd_squeeze_dims(t, ndims, dims));
}

pt_tensor *pt_unsqueeze(const pt_tensor *t, int64_t dim)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_unsqueeze(t, dim);
    return pti_shape_record_reshape("unsqueeze", t, pti_fwd_unsqueeze(t, dim));
}

pt_tensor *pt_transpose(const pt_tensor *t, int64_t dim0, int64_t dim1)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_transpose(t, dim0, dim1);
    return pti_shape_record_transpose(t, pti_fwd_transpose(t, dim0, dim1), dim0, dim1);
}

pt_tensor *pt_permute(const pt_tensor *t, int ndims, const int64_t *dims)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_permute(t, ndims, dims);
    return pti_shape_record_permute(t, pti_fwd_permute(t, ndims, dims), ndims, dims);
}

pt_tensor *pt_expand(const pt_tensor *t, int ndim, const int64_t *shape)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_expand(t, ndim, shape);
    return pti_shape_record_expand(t, pti_fwd_expand(t, ndim, shape));
}

pt_tensor *pt_narrow(const pt_tensor *t, int64_t dim, int64_t start, int64_t length)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_narrow(t, dim, start, length);
    int64_t a[3] = {dim, start, length};
    return pti_shape_record_view(PTI_VIEW_NARROW, t, pti_fwd_narrow(t, dim, start, length), 3, a);
}

pt_tensor *pt_select(const pt_tensor *t, int64_t dim, int64_t index)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_select(t, dim, index);
    int64_t a[2] = {dim, index};
    return pti_shape_record_view(PTI_VIEW_SELECT, t, pti_fwd_select(t, dim, index), 2, a);
}

pt_tensor *pt_slice(const pt_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_slice(t, dim, start, end, step);
    int64_t a[4] = {dim, start, end, step};
    return pti_shape_record_view(PTI_VIEW_SLICE, t, pti_fwd_slice(t, dim, start, end, step), 4, a);
}

pt_tensor *pt_diagonal(const pt_tensor *t, int64_t offset, int64_t dim1, int64_t dim2)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_diagonal(t, offset, dim1, dim2);
    int64_t a[3] = {offset, dim1, dim2};
    return pti_shape_record_view(PTI_VIEW_DIAGONAL, t, pti_fwd_diagonal(t, offset, dim1, dim2), 3,
                                 a);
}

/* More inputs than a node holds: cat groups of them, then cat the groups (associative). */
static pt_tensor *cat_grouped(int n, const pt_tensor *const *ts, int64_t dim)
{
    int groups = (n + PTI_NODE_MAX_IN - 1) / PTI_NODE_MAX_IN;
    pt_tensor **parts = pti_calloc((size_t)groups, sizeof *parts);
    if (!parts)
        return NULL;
    pt_tensor *out = NULL;
    int g = 0;
    for (; g < groups; g++) {
        int first = g * PTI_NODE_MAX_IN;
        int cnt = n - first < PTI_NODE_MAX_IN ? n - first : PTI_NODE_MAX_IN;
        if (!(parts[g] = pt_cat(cnt, ts + first, dim)))
            break;
    }
    if (g == groups)
        out = pt_cat(groups, (const pt_tensor *const *)parts, dim);
    for (int k = 0; k < groups; k++)
        pt_release(parts[k]);
    free(parts);
    return out;
}

pt_tensor *pt_cat(int n, pt_tensor_list ts_in, int64_t dim)
{
    const pt_tensor *const *ts = PT_TENSOR_LIST_PTR(ts_in);
    if (n <= 0 || !ts || !pti_grad_recording(n, ts))
        return pti_fwd_cat(n, ts, dim);
    if (n > PTI_NODE_MAX_IN)
        return cat_grouped(n, ts, dim);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_cat(n, ts, dim);
    pt_no_grad_end();
    return pti_shape_record_cat(n, ts, out, dim);
}

pt_tensor *pt_repeat(const pt_tensor *t, int nreps, const int64_t *reps)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_repeat(t, nreps, reps);
    return pti_shape_record_repeat(t, pti_fwd_repeat(t, nreps, reps), nreps, reps);
}

pt_tensor *pt_flip(const pt_tensor *t, int ndims, const int64_t *dims)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_flip(t, ndims, dims);
    return pti_shape_record_flip(t, pti_fwd_flip(t, ndims, dims), ndims, dims);
}

pt_tensor *pt_roll(const pt_tensor *t, int nshifts, const int64_t *shifts, int ndims,
                   const int64_t *dims)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_roll(t, nshifts, shifts, ndims, dims);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_roll(t, nshifts, shifts, ndims, dims);
    pt_no_grad_end();
    return pti_shape_record_roll(t, out, nshifts, shifts, ndims, dims);
}

pt_tensor *pt_tril(const pt_tensor *t, int64_t diagonal)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_tril(t, diagonal);
    return pti_shape_record_tri(false, t, pti_fwd_tril(t, diagonal), diagonal);
}

pt_tensor *pt_triu(const pt_tensor *t, int64_t diagonal)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_triu(t, diagonal);
    return pti_shape_record_tri(true, t, pti_fwd_triu(t, diagonal), diagonal);
}

/* A view with an explicit geometry; not differentiable (no backward formula), so a tensor that
 * records is refused. */
pt_tensor *pt_as_strided(const pt_tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                         int64_t offset)
{
    if (!PTI_CHECK_ARG(t, "pt_as_strided", "t"))
        return NULL;
    if (!pti_check_shape("pt_as_strided", ndim, shape))
        return NULL;
    if (ndim > 0 && !stride)
        return pti_error_null(PT_ERR_NULL, "pt_as_strided: stride is NULL");
    if (pti_dtypes[t->dtype].is_block)
        return pti_error_null(PT_ERR_DTYPE, "pt_as_strided: block dtype %s cannot be viewed",
                              pt_dtype_name(t->dtype));
    if (pti_grad_recording(1, &t))
        return pti_error_null(PT_ERR_UNSUPPORTED,
                              "pt_as_strided: not differentiable; %s requires grad (use pt_detach, "
                              "pt_no_grad_begin, or a view op such as pt_reshape/pt_narrow)",
                              pti_tensor_desc(t));
    return pti_tensor_view(t, ndim, shape, stride, offset);
}
