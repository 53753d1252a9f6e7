/* Front-ends of the index family's advanced ops: advanced indexing (pt_index, pt_index_put),
 * sort, argsort, topk and unique. The index tensors of t[i0, :, i2] are turned into a plan
 * (which source dims are indexed, where the broadcast index shape goes in the result) and an
 * int64 table of the broadcast index values, which the kernels bounds-check and wrap.
 * Differentiable ops are defined here as pti_fwd_<op>; their public pt_<op> (autograd
 * recording) is in index_grad.c. */
#include <string.h>

#include "../graph/node.h"
#include "common.h"
#include "index.h"
#include "index_grad.h"
#include "index_util.h"

/* For bool-returning checks: the error is already set by pti_error. */
static bool fail(pt_status st)
{
    (void)st;
    return false;
}

/* The plan, the index table and the result shape of t[indices]. */
typedef struct adv_index {
    pti_index_plan plan;
    pt_tensor *table; /* [k, nb] int64, NULL when k == 0 */
    int out_ndim;
    int64_t out_shape[PT_MAX_DIMS];
} adv_index;

/* Splits the indices into per-dim int64 tensors (bool masks become their nonzero columns).
 * Fills dim_idx[d] with a new reference for each indexed dim d (NULL for slices). */
static bool split_indices(const char *op, const pt_tensor *t, int n,
                          const pt_tensor *const *indices, pt_tensor *dim_idx[PT_MAX_DIMS])
{
    if (n < 0 || (n > 0 && !indices))
        return fail(pti_error(PT_ERR_INVALID_ARG, "%s: bad index list (n = %d)", op, n));
    int pos = 0;
    for (int i = 0; i < n; i++) {
        const pt_tensor *ix = indices[i];
        bool is_mask = ix && (ix->dtype == PT_BOOL || ix->dtype == PT_UINT8);
        int consumed = is_mask ? ix->ndim : 1;
        if (ix && !pti_check_same_device(op, 2, (const pt_tensor *const[]){t, ix}))
            return false;
        if (ix && !is_mask && ix->dtype != PT_INT64)
            return fail(
                pti_error(PT_ERR_DTYPE,
                          "%s: tensors used as indices must be int64, bool or uint8, got %s "
                          "at position %d",
                          op, pti_tensor_desc(ix), i));
        if (is_mask && ix->ndim == 0)
            return fail(
                pti_error(PT_ERR_UNSUPPORTED, "%s: a 0-dim bool index is not supported", op));
        if (pos + consumed > t->ndim)
            return fail(pti_error(PT_ERR_INDEX,
                                  "%s: too many indices for tensor of dimension %d (shape %s)", op,
                                  t->ndim, pti_shape_str(t->ndim, t->shape)));
        if (!ix) {
            pos++;
            continue;
        }
        if (!is_mask) {
            dim_idx[pos++] = pti_alias(ix);
            continue;
        }
        for (int j = 0; j < ix->ndim; j++)
            if (ix->shape[j] != t->shape[pos + j])
                return fail(pti_error(PT_ERR_INDEX,
                                      "%s: the shape of the mask %s at index %d does not match the "
                                      "shape of the indexed tensor %s at index %d",
                                      op, pti_shape_str(ix->ndim, ix->shape), j,
                                      pti_shape_str(t->ndim, t->shape), pos + j));
        pt_tensor *nz = pt_nonzero(ix); /* [cnt, m] */
        if (!nz)
            return false;
        for (int j = 0; j < ix->ndim; j++) {
            int64_t st = ix->ndim;
            dim_idx[pos + j] =
                pti_tensor_on_storage(nz->storage, PT_INT64, 1, &nz->shape[0], &st, nz->offset + j);
            if (!dim_idx[pos + j]) {
                pt_release(nz);
                return false;
            }
        }
        pt_release(nz);
        pos += ix->ndim;
    }
    return true;
}

static void adv_free(adv_index *a)
{
    pt_release(a->table);
}

/* Builds the plan, table and result shape for t[indices]. */
static bool adv_build(const char *op, const pt_tensor *t, int n, const pt_tensor *const *indices,
                      adv_index *a)
{
    memset(a, 0, sizeof *a);
    if (!pti_check_plain_dtype(op, t))
        return false;
    pt_tensor *dim_idx[PT_MAX_DIMS] = {0};
    bool ok = split_indices(op, t, n, indices, dim_idx);
    int bnd = 0;
    int64_t bshape[PT_MAX_DIMS];
    pti_index_plan *p = &a->plan;
    int first = -1, last = -1;
    for (int d = 0; ok && d < t->ndim; d++) {
        if (!dim_idx[d])
            continue;
        /* a 0-dim index acts like an integer (PyTorch selects it first), so it does not
         * decide where the broadcast index dims go */
        if (dim_idx[d]->ndim > 0) {
            if (first < 0)
                first = d;
            last = d;
        }
        p->dims[p->k++] = d;
        if (p->k == 1) {
            bnd = dim_idx[d]->ndim;
            memcpy(bshape, dim_idx[d]->shape, sizeof(int64_t) * (size_t)bnd);
        } else {
            const char *prev = pti_shape_str(bnd, bshape);
            ok = pti_broadcast_shapes(op, bnd, bshape, dim_idx[d]->ndim, dim_idx[d]->shape, &bnd,
                                      bshape);
            if (!ok)
                pti_error(PT_ERR_INDEX,
                          "%s: shape mismatch: indexing tensors could not be broadcast together "
                          "(%s and %s)",
                          op, prev, pti_shape_str(dim_idx[d]->ndim, dim_idx[d]->shape));
        }
    }
    if (ok) {
        p->nb = pti_shape_numel(bnd, bshape);
        bool adjacent = true; /* every dim from first to last is indexed */
        for (int d = first; first >= 0 && d <= last; d++)
            adjacent = adjacent && dim_idx[d] != NULL;
        for (int d = 0; d < t->ndim; d++) {
            if (dim_idx[d])
                continue;
            if (adjacent && d < first)
                p->pre[p->npre++] = d;
            else
                p->post[p->npost++] = d;
        }
        int nd = p->npre + bnd + p->npost;
        if (nd > PT_MAX_DIMS) {
            ok = fail(pti_error(PT_ERR_SHAPE, "%s: the result would have %d dims (max %d)", op, nd,
                                PT_MAX_DIMS));
        } else {
            a->out_ndim = 0;
            for (int i = 0; i < p->npre; i++)
                a->out_shape[a->out_ndim++] = t->shape[p->pre[i]];
            for (int i = 0; i < bnd; i++)
                a->out_shape[a->out_ndim++] = bshape[i];
            for (int i = 0; i < p->npost; i++)
                a->out_shape[a->out_ndim++] = t->shape[p->post[i]];
        }
    }
    if (ok && p->k > 0) { /* the table: row j = index j broadcast to B */
        int64_t ts[2] = {p->k, p->nb};
        a->table = pti_tensor_new(2, ts, PT_INT64, t->storage->device);
        ok = a->table != NULL;
        int64_t bstride[PT_MAX_DIMS];
        pti_contiguous_strides(bnd, bshape, bstride);
        for (int j = 0; ok && j < p->k; j++) {
            pt_tensor *row = pti_tensor_on_storage(a->table->storage, PT_INT64, bnd, bshape,
                                                   bstride, (int64_t)j * p->nb);
            pt_tensor *src = pti_index_expand(op, dim_idx[p->dims[j]], bnd, bshape);
            ok = row && src && (p->nb == 0 || pt_copy_(row, src) == PT_OK);
            pt_release(row);
            pt_release(src);
        }
    }
    for (int d = 0; d < PT_MAX_DIMS; d++)
        pt_release(dim_idx[d]);
    if (!ok)
        adv_free(a);
    return ok;
}

pt_tensor *pti_fwd_index(const pt_tensor *t, int n, const pt_tensor *const *indices)
{
    const char *op = "pt_index";
    if (!PTI_CHECK_ARG(t, op, "t"))
        return NULL;
    adv_index a;
    if (!adv_build(op, t, n, indices, &a))
        return NULL;
    if (a.plan.k == 0)
        return pti_alias(t);
    pt_tensor *out = pti_tensor_new(a.out_ndim, a.out_shape, t->dtype, t->storage->device);
    pti_call c = {.n_in = 2, .n_out = 1, .in = {t, a.table}, .out = {out}, .params = &a.plan};
    if (out && out->numel > 0 && pti_dispatch(PTI_OP_index, &c) != PT_OK) {
        pt_release(out);
        out = NULL;
    }
    adv_free(&a);
    return out;
}

pt_status pti_fwd_index_put_(pt_tensor *t, int n, const pt_tensor *const *indices,
                             const pt_tensor *values, bool accumulate)
{
    const char *op = "pt_index_put_";
    if (!PTI_CHECK_ARG(t, op, "t") || !PTI_CHECK_ARG(values, op, "values"))
        return pt_last_status();
    if (!pti_check_same_device(op, 2, (const pt_tensor *const[]){t, values}))
        return pt_last_status();
    if (values->dtype != t->dtype)
        return pti_error(PT_ERR_DTYPE,
                         "%s: index put requires the source and destination dtypes to match, "
                         "got %s for the destination and %s for the source",
                         op, pt_dtype_name(t->dtype), pt_dtype_name(values->dtype));
    adv_index a;
    if (!adv_build(op, t, n, indices, &a))
        return pt_last_status();
    a.plan.accumulate = accumulate;
    if (a.plan.k == 0)
        a.plan.nb = 1;
    pt_tensor *ve = pti_index_expand(op, values, a.out_ndim, a.out_shape);
    pt_tensor *vc = ve ? pt_contiguous(ve) : NULL;
    pt_status st = pt_last_status();
    if (vc) {
        pti_bump_version(t);
        pti_call c = {.n_in = 2, .n_out = 1, .in = {vc, a.table}, .out = {t}, .params = &a.plan};
        st = vc->numel > 0 ? pti_dispatch(PTI_OP_index_put, &c) : PT_OK;
    }
    pt_release(ve);
    pt_release(vc);
    adv_free(&a);
    return st;
}

pt_tensor *pti_fwd_index_put(const pt_tensor *t, int n, const pt_tensor *const *indices,
                             const pt_tensor *values, bool accumulate)
{
    if (!PTI_CHECK_ARG(t, "pt_index_put", "t"))
        return NULL;
    pt_tensor *r = pt_clone(t);
    if (r && pti_fwd_index_put_(r, n, indices, values, accumulate) != PT_OK) {
        pt_release(r);
        return NULL;
    }
    return r;
}

/* ---- sort / argsort / topk ------------------------------------------------------------------- */

/* Sorts along dim keeping the first k; values and/or indices (either may be unwanted). */
static pt_tensor *sort_impl(const char *op, const pt_tensor *t, int64_t dim, bool descending,
                            int64_t k, bool k_given, pt_tensor **indices)
{
    if (indices)
        *indices = NULL;
    if (!PTI_CHECK_ARG(t, op, "t") || !pti_check_plain_dtype(op, t))
        return NULL;
    int d;
    if (!pti_wrap_dim(op, dim, t->ndim, &d))
        return NULL;
    int64_t size = t->ndim ? t->shape[d] : 1;
    if (!k_given)
        k = size;
    if (k < 0 || k > size)
        return pti_error_null(PT_ERR_INDEX,
                              "%s: k (%lld) is out of range for dimension %d of size %lld", op,
                              (long long)k, d, (long long)size);
    pt_tensor *src = pt_contiguous(t);
    if (!src)
        return NULL;
    int64_t shape[PT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    if (t->ndim)
        shape[d] = k;
    pt_tensor *vals = pti_tensor_new(t->ndim, shape, t->dtype, t->storage->device);
    pt_tensor *idx = pti_tensor_new(t->ndim, shape, PT_INT64, t->storage->device);
    pti_call c = {.n_in = 1,
                  .n_out = 2,
                  .in = {src},
                  .out = {vals, idx},
                  .scalar = {d, descending, (double)k}};
    if (!vals || !idx || (vals->numel > 0 && pti_dispatch(PTI_OP_sort, &c) != PT_OK)) {
        pt_release(vals);
        pt_release(idx);
        vals = idx = NULL;
    }
    pt_release(src);
    if (indices)
        *indices = idx;
    else
        pt_release(idx);
    return vals;
}

pt_tensor *pti_fwd_sort(const pt_tensor *t, int64_t dim, bool descending, bool stable,
                        pt_tensor **indices)
{
    (void)stable; /* always stable */
    return sort_impl("pt_sort", t, dim, descending, 0, false, indices);
}

pt_tensor *pt_argsort(const pt_tensor *t, int64_t dim, bool descending)
{
    pt_tensor *idx = NULL;
    pt_tensor *v = sort_impl("pt_argsort", t, dim, descending, 0, false, &idx);
    pt_release(v);
    return v ? idx : NULL;
}

pt_tensor *pti_fwd_topk(const pt_tensor *t, int64_t k, int64_t dim, bool largest, bool sorted,
                        pt_tensor **indices)
{
    (void)sorted; /* always sorted */
    return sort_impl("pt_topk", t, dim, largest, k, true, indices);
}

/* ---- unique ---------------------------------------------------------------------------------- */

/* The first n elements of a 1-D tensor as a compact copy. */
static pt_tensor *narrow_copy(const pt_tensor *t, int64_t n)
{
    int64_t st = 1;
    pt_tensor *v = pti_tensor_on_storage(t->storage, t->dtype, 1, &n, &st, t->offset);
    pt_tensor *c = v ? pt_clone(v) : NULL;
    pt_release(v);
    return c;
}

pt_tensor *pt_unique(const pt_tensor *t, pt_tensor **inverse, pt_tensor **counts)
{
    const char *op = "pt_unique";
    if (inverse)
        *inverse = NULL;
    if (counts)
        *counts = NULL;
    if (!PTI_CHECK_ARG(t, op, "t") || !pti_check_plain_dtype(op, t))
        return NULL;
    pt_tensor *src = pt_contiguous(t);
    if (!src)
        return NULL;
    int64_t n = t->numel, st1 = 1;
    pt_tensor *flat = pti_tensor_on_storage(src->storage, t->dtype, 1, &n, &st1, src->offset);
    pt_release(src);
    pt_device dev = t->storage->device;
    pt_tensor *vals = pti_tensor_new(1, &n, t->dtype, dev);
    pt_tensor *inv = pti_tensor_new(1, &n, PT_INT64, dev);
    pt_tensor *cnt = pti_tensor_new(1, &n, PT_INT64, dev);
    pt_tensor *nu = pti_tensor_new(0, NULL, PT_INT64, dev);
    pt_tensor *res = NULL, *inv_out = NULL, *cnt_out = NULL;
    if (flat && vals && inv && cnt && nu) {
        pti_call c = {.n_in = 1, .n_out = 4, .in = {flat}, .out = {vals, inv, cnt, nu}};
        int64_t m = 0;
        bool ok = n == 0 || pti_dispatch(PTI_OP_unique, &c) == PT_OK;
        if (ok && n > 0)
            m = (int64_t)pt_item(nu);
        if (ok) {
            res = narrow_copy(vals, m);
            if (inverse) {
                int64_t stride[PT_MAX_DIMS];
                pti_contiguous_strides(t->ndim, t->shape, stride);
                inv_out =
                    pti_tensor_on_storage(inv->storage, PT_INT64, t->ndim, t->shape, stride, 0);
            }
            if (counts)
                cnt_out = narrow_copy(cnt, m);
            if (!res || (inverse && !inv_out) || (counts && !cnt_out)) {
                pt_release(res);
                pt_release(inv_out);
                pt_release(cnt_out);
                res = inv_out = cnt_out = NULL;
            }
        }
    }
    pt_release(flat);
    pt_release(vals);
    pt_release(inv);
    pt_release(cnt);
    pt_release(nu);
    if (inverse)
        *inverse = inv_out;
    if (counts)
        *counts = cnt_out;
    return res;
}

/* ---- differentiable front-ends ------------------------------------------------------------ */

/* Each runs its pti_fwd_* above (with grad mode off when recording: a forward may be built from
 * recorded public ops) and records its node through index_grad.c's pti_index_record_*. An
 * in-place op that records computes the recorded out-of-place op and takes its result. */

pt_tensor *pt_index(const pt_tensor *t, int n, pt_tensor_list indices_in)
{
    const pt_tensor *const *indices = PT_TENSOR_LIST_PTR(indices_in);
    if (!pti_grad_recording(1, &t))
        return pti_fwd_index(t, n, indices);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_index(t, n, indices);
    pt_no_grad_end();
    return pti_index_record_index(t, n, indices, out);
}

pt_tensor *pt_index_put(const pt_tensor *t, int n, pt_tensor_list indices_in,
                        const pt_tensor *values, bool accumulate)
{
    const pt_tensor *const *indices = PT_TENSOR_LIST_PTR(indices_in);
    const pt_tensor *ins[2] = {t, values};
    if (!pti_grad_recording(2, ins))
        return pti_fwd_index_put(t, n, indices, values, accumulate);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_index_put(t, n, indices, values, accumulate);
    pt_no_grad_end();
    return pti_index_record_index_put(t, n, indices, values, accumulate, out);
}

pt_status pt_index_put_(pt_tensor *t, int n, pt_tensor_list indices_in, const pt_tensor *values,
                        bool accumulate)
{
    const pt_tensor *const *indices = PT_TENSOR_LIST_PTR(indices_in);
    const pt_tensor *ins[2] = {t, values};
    if (!t || !pti_grad_recording(2, ins))
        return pti_fwd_index_put_(t, n, indices, values, accumulate);
    if (pti_index_inplace_check("pt_index_put_", t) != PT_OK)
        return pt_last_status();
    return pti_index_inplace_from(t, pt_index_put(t, n, indices, values, accumulate));
}

pt_tensor *pt_sort(const pt_tensor *t, int64_t dim, bool descending, bool stable,
                   pt_tensor **indices)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_sort(t, dim, descending, stable, indices);
    pt_tensor *idx = NULL;
    pt_no_grad_begin();
    pt_tensor *vals = pti_fwd_sort(t, dim, descending, stable, &idx);
    pt_no_grad_end();
    return pti_index_record_sort("sort", t, dim, vals, idx, indices);
}

pt_tensor *pt_topk(const pt_tensor *t, int64_t k, int64_t dim, bool largest, bool sorted,
                   pt_tensor **indices)
{
    if (!PTI_CHECK_ARG(t, "pt_topk", "t"))
        return NULL;
    if (t->dtype == PT_BOOL) /* as PyTorch on the CPU, even for k = 0 */
        return pti_error_null(PT_ERR_DTYPE, "pt_topk: topk does not support bool inputs");
    if (!pti_grad_recording(1, &t))
        return pti_fwd_topk(t, k, dim, largest, sorted, indices);
    pt_tensor *idx = NULL;
    pt_no_grad_begin();
    pt_tensor *vals = pti_fwd_topk(t, k, dim, largest, sorted, &idx);
    pt_no_grad_end();
    return pti_index_record_sort("topk", t, dim, vals, idx, indices);
}
