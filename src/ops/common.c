/* Front-end helpers shared by every op family (see common.h). */
#include "common.h"

bool pti_broadcast_shapes(const char *op, int na, const int64_t *sa, int nb, const int64_t *sb,
                          int *nout, int64_t *out)
{
    int n = na > nb ? na : nb;
    int64_t tmp[PT_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t a = ia >= 0 ? sa[ia] : 1, b = ib >= 0 ? sb[ib] : 1;
        if (a != b && a != 1 && b != 1) {
            pti_error(PT_ERR_SHAPE,
                      "%s: shapes %s and %s are not broadcastable (dim %d: %lld vs %lld)", op,
                      pti_shape_str(na, sa), pti_shape_str(nb, sb), i, (long long)a, (long long)b);
            return false;
        }
        tmp[i] = a == 1 ? b : a;
    }
    for (int i = 0; i < n; i++)
        out[i] = tmp[i];
    *nout = n;
    return true;
}

bool pti_wrap_dim(const char *op, int64_t dim, int ndim, int *out)
{
    int64_t n = ndim > 0 ? ndim : 1;
    if (dim < -n || dim >= n) {
        pti_error(PT_ERR_INDEX,
                  "%s: dimension out of range (expected to be in range of [%lld, %lld], but got "
                  "%lld)",
                  op, (long long)-n, (long long)(n - 1), (long long)dim);
        return false;
    }
    *out = (int)(dim < 0 ? dim + n : dim);
    return true;
}

bool pti_dims_mask(const char *op, int ndims, const int64_t *dims, int ndim, bool mask[PT_MAX_DIMS])
{
    bool all = ndims == 0 || dims == NULL;
    for (int d = 0; d < PT_MAX_DIMS; d++)
        mask[d] = all && d < ndim;
    if (all)
        return true;
    for (int i = 0; i < ndims; i++) {
        int d;
        if (!pti_wrap_dim(op, dims[i], ndim, &d))
            return false;
        if (ndim == 0)
            continue;
        if (mask[d]) {
            pti_error(PT_ERR_INVALID_ARG, "%s: dim %d appears multiple times in the list of dims",
                      op, d);
            return false;
        }
        mask[d] = true;
    }
    return true;
}

bool pti_check_plain_dtype(const char *op, const pt_tensor *t)
{
    if (pti_dtypes[t->dtype].is_block) {
        pti_error(PT_ERR_DTYPE, "%s: block dtype %s is not supported here (dequantize first)", op,
                  pt_dtype_name(t->dtype));
        return false;
    }
    return true;
}

bool pti_check_floating(const char *op, const char *arg, const pt_tensor *t)
{
    if (!pti_dtypes[t->dtype].is_floating) {
        pti_error(PT_ERR_DTYPE, "%s: expected a floating point tensor for '%s', got %s", op, arg,
                  pt_dtype_name(t->dtype));
        return false;
    }
    return true;
}

pt_tensor *pti_as_dtype(const pt_tensor *t, pt_dtype dt)
{
    return pt_to_dtype(t, dt);
}

pt_tensor *pti_alias(const pt_tensor *t)
{
    return pti_tensor_on_storage(t->storage, t->dtype, t->ndim, t->shape, t->stride, t->offset);
}

/* ---- shared backward helpers (in the ops layer: they reduce with pt_sum_dim) ----------------- */

pt_tensor *pti_sum_to(const pt_tensor *g, int ndim, const int64_t *shape)
{
    if (!g)
        return NULL;
    int lead = g->ndim - ndim;
    bool same = lead == 0;
    for (int d = 0; same && d < ndim; d++)
        same = g->shape[d] == shape[d];
    if (same)
        return pt_retain((pt_tensor *)g);
    if (lead < 0)
        return pti_error_null(PT_ERR_SHAPE, "autograd: gradient %s cannot be reduced to %s",
                              pti_tensor_desc(g), pti_shape_str(ndim, shape));
    int64_t dims[PT_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < g->ndim; d++) {
        int j = d - lead;
        if (j < 0 || (shape[j] == 1 && g->shape[d] != 1))
            dims[nd++] = d;
    }
    pt_tensor *summed = nd ? pt_sum_dim(g, nd, dims, true) : pt_retain((pt_tensor *)g);
    pt_tensor *r = pt_reshape(summed, ndim, shape);
    pt_release(summed);
    return r;
}

pt_tensor *pti_sum_to_like(const pt_tensor *g, const pt_tensor *t)
{
    return pti_sum_to(g, t->ndim, t->shape);
}
