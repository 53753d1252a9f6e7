/* Front-ends of the index family: index_select, gather, scatter, scatter_add, index_add,
 * masked_fill, masked_select, nonzero, one_hot, embedding (advanced indexing, sort, topk and
 * unique are in index_adv.c). Each checks its arguments, converts index tensors to contiguous
 * int64, allocates the result and dispatches; the kernels bounds-check every index value.
 * Differentiable ops are defined here as pti_fwd_<op>; their public pt_<op> (autograd
 * recording) is in index_grad.c. */
#include <math.h>
#include <string.h>

#include "../graph/node.h"
#include "common.h"
#include "index.h"
#include "index_grad.h"
#include "index_util.h"
#include "quant.h"

/* For bool-returning checks: the error is already set by pti_error. */
static bool fail(pt_status st)
{
    (void)st;
    return false;
}

pt_tensor *pti_index_as_i64(const char *op, const char *arg, const pt_tensor *idx, bool allow_i32)
{
    if (idx->dtype != PT_INT64 && !(allow_i32 && idx->dtype == PT_INT32))
        return pti_error_null(PT_ERR_DTYPE, "%s: expected %s for '%s', got %s", op,
                              allow_i32 ? "an int64 or int32 tensor" : "an int64 tensor", arg,
                              pti_tensor_desc(idx));
    pt_tensor *i64 = pt_to_dtype(idx, PT_INT64);
    if (!i64)
        return NULL;
    pt_tensor *c = pt_contiguous(i64);
    pt_release(i64);
    return c;
}

bool pti_index_check_data(const char *op, const pt_tensor *t, int n, const pt_tensor *const *ts)
{
    if (!pti_check_plain_dtype(op, t))
        return false;
    return pti_check_same_device(op, n, ts);
}

/* Wraps dim for t, treating a 0-dim tensor as having one dim. */
static bool wrap_dim(const char *op, int64_t dim, const pt_tensor *t, int *d)
{
    return pti_wrap_dim(op, dim, t->ndim, d);
}

/* A 1-D view of a 0-dim tensor (shape [1]); a new reference to t otherwise. */
static pt_tensor *at_least_1d(const pt_tensor *t)
{
    if (t->ndim > 0)
        return pti_alias(t);
    int64_t one = 1, st = 1;
    return pti_tensor_on_storage(t->storage, t->dtype, 1, &one, &st, t->offset);
}

/* ---- index_select / embedding ---------------------------------------------------------------- */

pt_tensor *pti_fwd_index_select(const pt_tensor *t, int64_t dim, const pt_tensor *index)
{
    const char *op = "pt_index_select";
    if (!PTI_CHECK_ARG(t, op, "t") || !PTI_CHECK_ARG(index, op, "index"))
        return NULL;
    const pt_tensor *ts[2] = {t, index};
    if (!pti_index_check_data(op, t, 2, ts))
        return NULL;
    int d;
    if (!wrap_dim(op, dim, t, &d))
        return NULL;
    if (index->ndim > 1)
        return pti_error_null(PT_ERR_SHAPE, "%s: index must be 1-D or 0-dim, got shape %s", op,
                              pti_shape_str(index->ndim, index->shape));
    pt_tensor *idx = pti_index_as_i64(op, "index", index, true);
    pt_tensor *csrc = at_least_1d(t); /* any strides: the kernel walks them */
    pt_tensor *out = NULL;
    if (idx && csrc) {
        int64_t shape[PT_MAX_DIMS];
        memcpy(shape, csrc->shape, sizeof(int64_t) * (size_t)csrc->ndim);
        shape[d] = idx->numel;
        out = pti_tensor_new(csrc->ndim, shape, t->dtype, t->storage->device);
        pti_call c = {.n_in = 2, .n_out = 1, .in = {csrc, idx}, .out = {out}, .scalar = {d}};
        if (out && pti_dispatch(PTI_OP_index_select, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
        if (out && t->ndim == 0) { /* back to 0-dim */
            pt_tensor *v = pti_tensor_on_storage(out->storage, out->dtype, 0, NULL, NULL, 0);
            pt_release(out);
            out = v;
        }
    }
    pt_release(idx);
    pt_release(csrc);
    return out;
}

pt_tensor *pti_fwd_embedding_ex(const pt_tensor *weight, const pt_tensor *indices,
                                const pt_embedding_opts *opts)
{
    const char *op = "pt_embedding";
    if (!PTI_CHECK_ARG(weight, op, "weight") || !PTI_CHECK_ARG(indices, op, "indices"))
        return NULL;
    const pt_tensor *ts[2] = {weight, indices};
    bool block = pti_dtypes[weight->dtype].is_block; /* GGUF table: src/ops/quant.c */
    if (!block && !pti_index_check_data(op, weight, 2, ts))
        return NULL;
    if (weight->ndim != 2)
        return pti_error_null(PT_ERR_SHAPE, "%s: weight must be 2-D [num_embeddings, dim], got %s",
                              op, pti_shape_str(weight->ndim, weight->shape));
    if (indices->ndim + 1 > PT_MAX_DIMS)
        return pti_error_null(PT_ERR_SHAPE, "%s: indices have too many dims (%d)", op,
                              indices->ndim);
    if (opts && opts->has_padding_idx &&
        (opts->padding_idx < -weight->shape[0] || opts->padding_idx >= weight->shape[0]))
        return pti_error_null(PT_ERR_INDEX,
                              "%s: padding_idx %lld must be within num_embeddings (%lld)", op,
                              (long long)opts->padding_idx, (long long)weight->shape[0]);
    if (block)
        return pti_fwd_embedding_quant(weight, indices);
    pt_tensor *idx = pti_index_as_i64(op, "indices", indices, true);
    pt_tensor *w = pti_alias(weight); /* any strides: the kernel walks them */
    pt_tensor *out = NULL;
    if (idx && w) {
        int64_t shape[PT_MAX_DIMS];
        memcpy(shape, indices->shape, sizeof(int64_t) * (size_t)indices->ndim);
        shape[indices->ndim] = weight->shape[1];
        out = pti_tensor_new(indices->ndim + 1, shape, weight->dtype, weight->storage->device);
        int64_t s2[2] = {idx->numel, weight->shape[1]}, st2[2] = {weight->shape[1], 1};
        int64_t n1 = idx->numel, st1 = 1;
        pt_tensor *out2 =
            out ? pti_tensor_on_storage(out->storage, out->dtype, 2, s2, st2, 0) : NULL;
        pt_tensor *idx1 =
            pti_tensor_on_storage(idx->storage, idx->dtype, 1, &n1, &st1, idx->offset);
        pti_call c = {.n_in = 2, .n_out = 1, .in = {w, idx1}, .out = {out2}};
        if (!out2 || !idx1 || pti_dispatch(PTI_OP_embedding, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
        pt_release(out2);
        pt_release(idx1);
    }
    pt_release(idx);
    pt_release(w);
    return out;
}

pt_tensor *pt_embedding(const pt_tensor *weight, const pt_tensor *indices)
{
    return pt_embedding_ex(weight, indices, NULL);
}

/* ---- gather / scatter ------------------------------------------------------------------------ */

/* index must have t's ndim and fit inside `other` (t for gather, src for scatter) on every
 * dim, and inside t on every dim but d. */
static bool check_gather_shapes(const char *op, const pt_tensor *t, int d, const pt_tensor *index,
                                const pt_tensor *src)
{
    int tnd = t->ndim > 0 ? t->ndim : 1, ind = index->ndim > 0 ? index->ndim : 1;
    if (tnd != ind)
        return fail(pti_error(PT_ERR_SHAPE, "%s: index %s must have as many dims as the tensor %s",
                              op, pti_shape_str(index->ndim, index->shape),
                              pti_shape_str(t->ndim, t->shape)));
    for (int i = 0; i < index->ndim; i++) {
        int64_t ts = t->ndim ? t->shape[i] : 1;
        if (i != d && index->shape[i] > ts)
            return fail(pti_error(
                PT_ERR_SHAPE, "%s: index %s is larger than the tensor %s at dim %d (%lld > %lld)",
                op, pti_shape_str(index->ndim, index->shape), pti_shape_str(t->ndim, t->shape), i,
                (long long)index->shape[i], (long long)ts));
        if (src && index->shape[i] > (src->ndim ? src->shape[i] : 1))
            return fail(pti_error(PT_ERR_SHAPE, "%s: index %s is larger than src %s at dim %d", op,
                                  pti_shape_str(index->ndim, index->shape),
                                  pti_shape_str(src->ndim, src->shape), i));
    }
    if (src && (src->ndim > 0 ? src->ndim : 1) != tnd)
        return fail(pti_error(PT_ERR_SHAPE, "%s: src %s must have as many dims as the tensor %s",
                              op, pti_shape_str(src->ndim, src->shape),
                              pti_shape_str(t->ndim, t->shape)));
    return true;
}

pt_tensor *pti_fwd_gather(const pt_tensor *t, int64_t dim, const pt_tensor *index)
{
    const char *op = "pt_gather";
    if (!PTI_CHECK_ARG(t, op, "t") || !PTI_CHECK_ARG(index, op, "index"))
        return NULL;
    const pt_tensor *ts[2] = {t, index};
    int d;
    if (!pti_index_check_data(op, t, 2, ts) || !wrap_dim(op, dim, t, &d) ||
        !check_gather_shapes(op, t, d, index, NULL))
        return NULL;
    pt_tensor *idx = pti_index_as_i64(op, "index", index, true);
    pt_tensor *src = at_least_1d(t);
    pt_tensor *idx1 = idx ? at_least_1d(idx) : NULL;
    pt_tensor *out = NULL;
    if (idx1 && src) {
        out = pti_tensor_new(index->ndim, index->shape, t->dtype, t->storage->device);
        pt_tensor *out1 = out ? at_least_1d(out) : NULL;
        pti_call c = {.n_in = 2, .n_out = 1, .in = {src, idx1}, .out = {out1}, .scalar = {d}};
        if (!out1 || pti_dispatch(PTI_OP_gather, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
        pt_release(out1);
    }
    pt_release(idx);
    pt_release(idx1);
    pt_release(src);
    return out;
}

/* The shared in-place scatter: src NULL means the scalar `value`. */
static pt_status scatter_inplace(const char *op, pti_op kop, pt_tensor *t, int64_t dim,
                                 const pt_tensor *index, const pt_tensor *src, double value)
{
    if (!PTI_CHECK_ARG(t, op, "t") || !PTI_CHECK_ARG(index, op, "index"))
        return pt_last_status();
    const pt_tensor *ts[3] = {t, index, src};
    int d;
    if (!pti_index_check_data(op, t, 3, ts) || !wrap_dim(op, dim, t, &d))
        return pt_last_status();
    if (src && src->dtype != t->dtype)
        return pti_error(PT_ERR_DTYPE, "%s: src dtype %s must equal the tensor's dtype %s", op,
                         pt_dtype_name(src->dtype), pt_dtype_name(t->dtype));
    if (!check_gather_shapes(op, t, d, index, src))
        return pt_last_status();
    pt_tensor *idx = pti_index_as_i64(op, "index", index, true);
    pt_tensor *idx1 = idx ? at_least_1d(idx) : NULL;
    pt_tensor *self1 = at_least_1d(t);
    pt_tensor *src1 = src ? at_least_1d(src) : NULL;
    pt_status st = pt_last_status();
    if (idx1 && self1 && (!src || src1)) {
        pti_bump_version(t);
        pti_call c = {
            .n_in = 2, .n_out = 1, .in = {idx1, src1}, .out = {self1}, .scalar = {d, value}};
        st = pti_dispatch(kop, &c);
    }
    pt_release(idx);
    pt_release(idx1);
    pt_release(self1);
    pt_release(src1);
    return st;
}

/* Runs an in-place function on a fresh copy of t and returns the copy. */
#define OUT_OF_PLACE(t, call_on_r)                                                                 \
    do {                                                                                           \
        pt_tensor *r = pt_clone(t);                                                                \
        if (!r)                                                                                    \
            return NULL;                                                                           \
        if ((call_on_r) != PT_OK) {                                                                \
            pt_release(r);                                                                         \
            return NULL;                                                                           \
        }                                                                                          \
        return r;                                                                                  \
    } while (0)

pt_status pti_fwd_scatter_(pt_tensor *t, int64_t dim, const pt_tensor *index, const pt_tensor *src)
{
    if (!PTI_CHECK_ARG(src, "pt_scatter_", "src"))
        return pt_last_status();
    return scatter_inplace("pt_scatter_", PTI_OP_scatter, t, dim, index, src, 0);
}

pt_tensor *pti_fwd_scatter(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                           const pt_tensor *src)
{
    if (!PTI_CHECK_ARG(t, "pt_scatter", "t") || !PTI_CHECK_ARG(src, "pt_scatter", "src"))
        return NULL;
    OUT_OF_PLACE(t, scatter_inplace("pt_scatter", PTI_OP_scatter, r, dim, index, src, 0));
}

pt_status pti_fwd_scatter_scalar_(pt_tensor *t, int64_t dim, const pt_tensor *index, double value)
{
    return scatter_inplace("pt_scatter_scalar_", PTI_OP_scatter, t, dim, index, NULL, value);
}

pt_tensor *pti_fwd_scatter_scalar(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                                  double value)
{
    if (!PTI_CHECK_ARG(t, "pt_scatter_scalar", "t"))
        return NULL;
    OUT_OF_PLACE(t,
                 scatter_inplace("pt_scatter_scalar", PTI_OP_scatter, r, dim, index, NULL, value));
}

pt_status pti_fwd_scatter_add_(pt_tensor *t, int64_t dim, const pt_tensor *index,
                               const pt_tensor *src)
{
    if (!PTI_CHECK_ARG(src, "pt_scatter_add_", "src"))
        return pt_last_status();
    return scatter_inplace("pt_scatter_add_", PTI_OP_scatter_add, t, dim, index, src, 0);
}

pt_tensor *pti_fwd_scatter_add(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                               const pt_tensor *src)
{
    if (!PTI_CHECK_ARG(t, "pt_scatter_add", "t") || !PTI_CHECK_ARG(src, "pt_scatter_add", "src"))
        return NULL;
    OUT_OF_PLACE(t, scatter_inplace("pt_scatter_add", PTI_OP_scatter_add, r, dim, index, src, 0));
}

/* ---- index_add ------------------------------------------------------------------------------- */

static pt_status index_add_impl(const char *op, pt_tensor *t, int64_t dim, const pt_tensor *index,
                                const pt_tensor *source, double alpha)
{
    if (!PTI_CHECK_ARG(t, op, "t") || !PTI_CHECK_ARG(index, op, "index") ||
        !PTI_CHECK_ARG(source, op, "source"))
        return pt_last_status();
    const pt_tensor *ts[3] = {t, index, source};
    int d;
    if (!pti_index_check_data(op, t, 3, ts) || !wrap_dim(op, dim, t, &d))
        return pt_last_status();
    if (index->ndim > 1)
        return pti_error(PT_ERR_SHAPE, "%s: index must be 1-D or 0-dim, got shape %s", op,
                         pti_shape_str(index->ndim, index->shape));
    if (!pti_dtypes[t->dtype].is_floating && (alpha != trunc(alpha) || fabs(alpha) >= 9.2e18))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: for integral tensors alpha must be an integer, got %g", op, alpha);
    if (source->dtype != t->dtype)
        return pti_error(PT_ERR_DTYPE, "%s: source dtype %s must equal the tensor's dtype %s", op,
                         pt_dtype_name(source->dtype), pt_dtype_name(t->dtype));
    int tnd = t->ndim ? t->ndim : 1;
    bool ok = (source->ndim ? source->ndim : 1) == tnd;
    for (int i = 0; ok && i < t->ndim && i < source->ndim; i++)
        ok = i == d ? source->shape[i] == index->numel : source->shape[i] == t->shape[i];
    if (ok && source->ndim == 0)
        ok = index->numel == 1;
    if (ok && t->ndim == 0 && source->ndim == 1)
        ok = source->shape[0] == index->numel;
    if (!ok)
        return pti_error(PT_ERR_SHAPE,
                         "%s: source %s must have the tensor's shape %s with dim %d of size %lld "
                         "(the number of indices)",
                         op, pti_shape_str(source->ndim, source->shape),
                         pti_shape_str(t->ndim, t->shape), d, (long long)index->numel);
    pt_tensor *idx = pti_index_as_i64(op, "index", index, true);
    pt_tensor *self1 = at_least_1d(t);
    pt_tensor *src1 = at_least_1d(source);
    pt_status st = pt_last_status();
    if (idx && self1 && src1) {
        int64_t n1 = idx->numel, s1 = 1;
        pt_tensor *idx1 = pti_tensor_on_storage(idx->storage, idx->dtype, 1, &n1, &s1, idx->offset);
        pti_bump_version(t);
        pti_call c = {
            .n_in = 2, .n_out = 1, .in = {idx1, src1}, .out = {self1}, .scalar = {d, alpha}};
        st = idx1 ? pti_dispatch(PTI_OP_index_add, &c) : pt_last_status();
        pt_release(idx1);
    }
    pt_release(idx);
    pt_release(self1);
    pt_release(src1);
    return st;
}

pt_status pti_fwd_index_add_(pt_tensor *t, int64_t dim, const pt_tensor *index,
                             const pt_tensor *source, double alpha)
{
    return index_add_impl("pt_index_add_", t, dim, index, source, alpha);
}

pt_tensor *pti_fwd_index_add(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                             const pt_tensor *source, double alpha)
{
    if (!PTI_CHECK_ARG(t, "pt_index_add", "t"))
        return NULL;
    OUT_OF_PLACE(t, index_add_impl("pt_index_add", r, dim, index, source, alpha));
}

/* ---- masked_fill / masked_select ------------------------------------------------------------- */

static bool check_mask(const char *op, const pt_tensor *mask)
{
    if (mask->dtype != PT_BOOL && mask->dtype != PT_UINT8) {
        pti_error(PT_ERR_DTYPE, "%s: mask must be a bool tensor, got %s", op,
                  pti_tensor_desc(mask));
        return false;
    }
    return true;
}

pt_tensor *pti_index_expand(const char *op, const pt_tensor *t, int ndim, const int64_t *shape)
{
    int64_t stride[PT_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        if (j < 0) {
            stride[i] = 0;
        } else if (t->shape[j] == shape[i]) {
            stride[i] = t->shape[j] == 1 ? 0 : t->stride[j];
        } else if (t->shape[j] == 1) {
            stride[i] = 0;
        } else {
            return pti_error_null(PT_ERR_SHAPE, "%s: shape %s cannot be broadcast to %s", op,
                                  pti_shape_str(t->ndim, t->shape), pti_shape_str(ndim, shape));
        }
    }
    if (lead < 0)
        return pti_error_null(PT_ERR_SHAPE, "%s: shape %s cannot be broadcast to %s", op,
                              pti_shape_str(t->ndim, t->shape), pti_shape_str(ndim, shape));
    return pti_tensor_on_storage(t->storage, t->dtype, ndim, shape, stride, t->offset);
}

static pt_status masked_fill_into(const char *op, pt_tensor *out, const pt_tensor *t,
                                  const pt_tensor *mask, double value)
{
    pt_tensor *te = pti_index_expand(op, t, out->ndim, out->shape);
    pt_tensor *me = te ? pti_index_expand(op, mask, out->ndim, out->shape) : NULL;
    pt_status st = pt_last_status();
    if (te && me) {
        pti_call c = {.n_in = 2, .n_out = 1, .in = {te, me}, .out = {out}, .scalar = {value}};
        st = out->numel ? pti_dispatch(PTI_OP_masked_fill, &c) : PT_OK;
    }
    pt_release(te);
    pt_release(me);
    return st;
}

pt_tensor *pti_fwd_masked_fill(const pt_tensor *t, const pt_tensor *mask, double value)
{
    const char *op = "pt_masked_fill";
    if (!PTI_CHECK_ARG(t, op, "t") || !PTI_CHECK_ARG(mask, op, "mask"))
        return NULL;
    const pt_tensor *ts[2] = {t, mask};
    if (!pti_index_check_data(op, t, 2, ts) || !check_mask(op, mask))
        return NULL;
    int nd;
    int64_t shape[PT_MAX_DIMS];
    if (!pti_broadcast_shapes(op, t->ndim, t->shape, mask->ndim, mask->shape, &nd, shape))
        return NULL;
    pt_tensor *out = pti_tensor_new(nd, shape, t->dtype, t->storage->device);
    if (out && masked_fill_into(op, out, t, mask, value) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

pt_status pti_fwd_masked_fill_(pt_tensor *t, const pt_tensor *mask, double value)
{
    const char *op = "pt_masked_fill_";
    if (!PTI_CHECK_ARG(t, op, "t") || !PTI_CHECK_ARG(mask, op, "mask"))
        return pt_last_status();
    const pt_tensor *ts[2] = {t, mask};
    if (!pti_index_check_data(op, t, 2, ts) || !check_mask(op, mask))
        return pt_last_status();
    pti_bump_version(t);
    return masked_fill_into(op, t, t, mask, value);
}

/* The value of a 0-dim tensor as a double (PyTorch requires 0 dims). */
static bool value_of(const char *op, const pt_tensor *value, double *v)
{
    if (!PTI_CHECK_ARG(value, op, "value"))
        return false;
    if (value->ndim != 0) {
        pti_error(PT_ERR_SHAPE, "%s: value must be a 0-dim tensor, got one with %d dims (shape %s)",
                  op, value->ndim, pti_shape_str(value->ndim, value->shape));
        return false;
    }
    if (!pti_check_plain_dtype(op, value))
        return false;
    pt_tensor *d = pt_to_dtype(value, PT_FLOAT64);
    pt_status st = d ? pt_copy_to_host(d, v, sizeof *v) : pt_last_status();
    pt_release(d);
    return st == PT_OK;
}

pt_tensor *pti_fwd_masked_fill_tensor(const pt_tensor *t, const pt_tensor *mask,
                                      const pt_tensor *value)
{
    double v;
    if (!value_of("pt_masked_fill_tensor", value, &v))
        return NULL;
    return pti_fwd_masked_fill(t, mask, v);
}

pt_status pti_fwd_masked_fill_tensor_(pt_tensor *t, const pt_tensor *mask, const pt_tensor *value)
{
    double v;
    if (!value_of("pt_masked_fill_tensor_", value, &v))
        return pt_last_status();
    return pti_fwd_masked_fill_(t, mask, v);
}

int64_t pti_index_count_nonzero(const pt_tensor *t)
{
    pt_tensor *cnt = pti_tensor_new(0, NULL, PT_INT64, t->storage->device);
    if (!cnt)
        return -1;
    pti_call c = {.n_in = 1, .n_out = 1, .in = {t}, .out = {cnt}};
    int64_t n = -1;
    if (pti_dispatch(PTI_OP_count_nonzero, &c) == PT_OK)
        n = (int64_t)pt_item(cnt);
    pt_release(cnt);
    return n;
}

pt_tensor *pti_fwd_masked_select(const pt_tensor *t, const pt_tensor *mask)
{
    const char *op = "pt_masked_select";
    if (!PTI_CHECK_ARG(t, op, "t") || !PTI_CHECK_ARG(mask, op, "mask"))
        return NULL;
    const pt_tensor *ts[2] = {t, mask};
    if (!pti_index_check_data(op, t, 2, ts) || !check_mask(op, mask))
        return NULL;
    int nd;
    int64_t shape[PT_MAX_DIMS];
    if (!pti_broadcast_shapes(op, t->ndim, t->shape, mask->ndim, mask->shape, &nd, shape))
        return NULL;
    pt_tensor *te = pti_index_expand(op, t, nd, shape);
    pt_tensor *me = te ? pti_index_expand(op, mask, nd, shape) : NULL;
    pt_tensor *out = NULL;
    int64_t n = me ? pti_index_count_nonzero(me) : -1;
    if (n >= 0) {
        out = pti_tensor_new(1, &n, t->dtype, t->storage->device);
        pti_call c = {.n_in = 2, .n_out = 1, .in = {te, me}, .out = {out}};
        if (out && n > 0 && pti_dispatch(PTI_OP_masked_select, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
    }
    pt_release(te);
    pt_release(me);
    return out;
}

/* ---- nonzero / one_hot ----------------------------------------------------------------------- */

pt_tensor *pt_nonzero(const pt_tensor *t)
{
    const char *op = "pt_nonzero";
    if (!PTI_CHECK_ARG(t, op, "t") || !pti_check_plain_dtype(op, t))
        return NULL;
    int64_t n = pti_index_count_nonzero(t);
    if (n < 0)
        return NULL;
    int64_t shape[2] = {n, t->ndim};
    pt_tensor *out = pti_tensor_new(2, shape, PT_INT64, t->storage->device);
    pti_call c = {.n_in = 1, .n_out = 1, .in = {t}, .out = {out}};
    if (out && n > 0 && t->ndim > 0 && pti_dispatch(PTI_OP_nonzero, &c) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

pt_tensor *pt_one_hot(const pt_tensor *indices, int64_t num_classes)
{
    const char *op = "pt_one_hot";
    if (!PTI_CHECK_ARG(indices, op, "indices"))
        return NULL;
    if (indices->dtype != PT_INT64)
        return pti_error_null(PT_ERR_DTYPE, "%s: indices must be an int64 tensor, got %s", op,
                              pti_tensor_desc(indices));
    if (num_classes < -1)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: num_classes must be >= -1, got %lld", op,
                              (long long)num_classes);
    if (indices->ndim + 1 > PT_MAX_DIMS)
        return pti_error_null(PT_ERR_SHAPE, "%s: indices have too many dims", op);
    pt_tensor *idx = pt_contiguous(indices);
    if (!idx)
        return NULL;
    int64_t n1 = idx->numel, s1 = 1;
    pt_tensor *flat = pti_tensor_on_storage(idx->storage, PT_INT64, 1, &n1, &s1, idx->offset);
    pt_release(idx);
    if (!flat)
        return NULL;
    if (num_classes == -1) {
        if (flat->numel == 0) {
            pt_release(flat);
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  "%s: cannot infer the number of classes from an empty tensor",
                                  op);
        }
        pt_tensor *mx = pti_tensor_new(0, NULL, PT_INT64, indices->storage->device);
        pti_call c = {.n_in = 1, .n_out = 1, .in = {flat}, .out = {mx}};
        if (!mx || pti_dispatch(PTI_OP_index_max, &c) != PT_OK) {
            pt_release(mx);
            pt_release(flat);
            return NULL;
        }
        double top = pt_item(mx);
        pt_release(mx);
        if (top >= 9.2e18) {
            pt_release(flat);
            return pti_error_null(PT_ERR_INDEX, "%s: class value %.0f is too large", op, top);
        }
        /* all values negative: the kernel reports the first one */
        num_classes = top < 0 ? 1 : (int64_t)top + 1;
    }
    int64_t shape[PT_MAX_DIMS];
    memcpy(shape, indices->shape, sizeof(int64_t) * (size_t)indices->ndim);
    shape[indices->ndim] = num_classes;
    pt_tensor *out = pti_tensor_new(indices->ndim + 1, shape, PT_INT64, indices->storage->device);
    int64_t s2[2] = {flat->numel, num_classes}, st2[2] = {num_classes, 1};
    pt_tensor *out2 = out ? pti_tensor_on_storage(out->storage, PT_INT64, 2, s2, st2, 0) : NULL;
    pti_call c = {.n_in = 1, .n_out = 1, .in = {flat}, .out = {out2}};
    if (!out2 || pti_dispatch(PTI_OP_one_hot, &c) != PT_OK) {
        pt_release(out);
        out = NULL;
    }
    pt_release(out2);
    pt_release(flat);
    return out;
}

/* ---- differentiable front-ends ------------------------------------------------------------ */

/* Each runs its pti_fwd_* above (with grad mode off when recording: a forward may be built from
 * recorded public ops) and records its node through index_grad.c's pti_index_record_*. An
 * in-place op that records computes the recorded out-of-place op and takes its result. */

pt_tensor *pt_index_select(const pt_tensor *t, int64_t dim, const pt_tensor *index)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_index_select(t, dim, index);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_index_select(t, dim, index);
    pt_no_grad_end();
    return pti_index_record_select(t, dim, index, out);
}

pt_tensor *pt_gather(const pt_tensor *t, int64_t dim, const pt_tensor *index)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_gather(t, dim, index);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_gather(t, dim, index);
    pt_no_grad_end();
    return pti_index_record_gather(t, dim, index, out);
}

pt_tensor *pt_scatter(const pt_tensor *t, int64_t dim, const pt_tensor *index, const pt_tensor *src)
{
    const pt_tensor *ins[2] = {t, src};
    if (!pti_grad_recording(2, ins))
        return pti_fwd_scatter(t, dim, index, src);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_scatter(t, dim, index, src);
    pt_no_grad_end();
    return pti_index_record_scatter("scatter", t, dim, index, src, false, out);
}

pt_tensor *pt_scatter_scalar(const pt_tensor *t, int64_t dim, const pt_tensor *index, double value)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_scatter_scalar(t, dim, index, value);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_scatter_scalar(t, dim, index, value);
    pt_no_grad_end();
    return pti_index_record_scatter("scatter", t, dim, index, NULL, false, out);
}

pt_tensor *pt_scatter_add(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                          const pt_tensor *src)
{
    const pt_tensor *ins[2] = {t, src};
    if (!pti_grad_recording(2, ins))
        return pti_fwd_scatter_add(t, dim, index, src);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_scatter_add(t, dim, index, src);
    pt_no_grad_end();
    return pti_index_record_scatter("scatter_add", t, dim, index, src, true, out);
}

pt_status pt_scatter_(pt_tensor *t, int64_t dim, const pt_tensor *index, const pt_tensor *src)
{
    const pt_tensor *ins[2] = {t, src};
    if (!t || !pti_grad_recording(2, ins))
        return pti_fwd_scatter_(t, dim, index, src);
    if (pti_index_inplace_check("pt_scatter_", t) != PT_OK)
        return pt_last_status();
    return pti_index_inplace_from(t, pt_scatter(t, dim, index, src));
}

pt_status pt_scatter_scalar_(pt_tensor *t, int64_t dim, const pt_tensor *index, double value)
{
    if (!t || !pti_grad_recording(1, (const pt_tensor *const[]){t}))
        return pti_fwd_scatter_scalar_(t, dim, index, value);
    if (pti_index_inplace_check("pt_scatter_scalar_", t) != PT_OK)
        return pt_last_status();
    return pti_index_inplace_from(t, pt_scatter_scalar(t, dim, index, value));
}

pt_status pt_scatter_add_(pt_tensor *t, int64_t dim, const pt_tensor *index, const pt_tensor *src)
{
    const pt_tensor *ins[2] = {t, src};
    if (!t || !pti_grad_recording(2, ins))
        return pti_fwd_scatter_add_(t, dim, index, src);
    if (pti_index_inplace_check("pt_scatter_add_", t) != PT_OK)
        return pt_last_status();
    return pti_index_inplace_from(t, pt_scatter_add(t, dim, index, src));
}

pt_tensor *pt_index_add(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                        const pt_tensor *source, double alpha)
{
    const pt_tensor *ins[2] = {t, source};
    if (!pti_grad_recording(2, ins))
        return pti_fwd_index_add(t, dim, index, source, alpha);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_index_add(t, dim, index, source, alpha);
    pt_no_grad_end();
    return pti_index_record_index_add(t, dim, index, source, alpha, out);
}

pt_status pt_index_add_(pt_tensor *t, int64_t dim, const pt_tensor *index, const pt_tensor *source,
                        double alpha)
{
    const pt_tensor *ins[2] = {t, source};
    if (!t || !pti_grad_recording(2, ins))
        return pti_fwd_index_add_(t, dim, index, source, alpha);
    if (pti_index_inplace_check("pt_index_add_", t) != PT_OK)
        return pt_last_status();
    return pti_index_inplace_from(t, pt_index_add(t, dim, index, source, alpha));
}

pt_tensor *pt_masked_fill(const pt_tensor *t, const pt_tensor *mask, double value)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_masked_fill(t, mask, value);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_masked_fill(t, mask, value);
    pt_no_grad_end();
    return pti_index_record_masked_fill(t, mask, NULL, out);
}

pt_tensor *pt_masked_fill_tensor(const pt_tensor *t, const pt_tensor *mask, const pt_tensor *value)
{
    const pt_tensor *ins[2] = {t, value};
    if (!pti_grad_recording(2, ins))
        return pti_fwd_masked_fill_tensor(t, mask, value);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_masked_fill_tensor(t, mask, value);
    pt_no_grad_end();
    return pti_index_record_masked_fill(t, mask, value, out);
}

pt_status pt_masked_fill_(pt_tensor *t, const pt_tensor *mask, double value)
{
    if (!t || !pti_grad_recording(1, (const pt_tensor *const[]){t}))
        return pti_fwd_masked_fill_(t, mask, value);
    if (pti_index_inplace_check("pt_masked_fill_", t) != PT_OK)
        return pt_last_status();
    return pti_index_inplace_from(t, pt_masked_fill(t, mask, value));
}

pt_status pt_masked_fill_tensor_(pt_tensor *t, const pt_tensor *mask, const pt_tensor *value)
{
    const pt_tensor *ins[2] = {t, value};
    if (!t || !pti_grad_recording(2, ins))
        return pti_fwd_masked_fill_tensor_(t, mask, value);
    if (pti_index_inplace_check("pt_masked_fill_tensor_", t) != PT_OK)
        return pt_last_status();
    return pti_index_inplace_from(t, pt_masked_fill_tensor(t, mask, value));
}

pt_tensor *pt_masked_select(const pt_tensor *t, const pt_tensor *mask)
{
    if (!pti_grad_recording(1, &t))
        return pti_fwd_masked_select(t, mask);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_masked_select(t, mask);
    pt_no_grad_end();
    return pti_index_record_masked_select(t, mask, out);
}

pt_tensor *pt_embedding_ex(const pt_tensor *weight, const pt_tensor *indices,
                           const pt_embedding_opts *opts)
{
    if (!pti_grad_recording(1, &weight))
        return pti_fwd_embedding_ex(weight, indices, opts);
    pt_no_grad_begin();
    pt_tensor *out = pti_fwd_embedding_ex(weight, indices, opts);
    pt_no_grad_end();
    return pti_index_record_embedding(weight, indices, opts, out);
}
