/* Autograd for the index family: recording the nodes of the differentiable ops
 * (pti_index_record_*, called by their front-ends in src/ops/index.c / index_adv.c after the
 * forward) and their backward formulas, written with public ops so create_graph works. Index
 * tensors, masks and sort indices are never differentiable; nonzero, argsort, unique and one_hot
 * record nothing. In-place variants, when recording, compute the recorded out-of-place op, copy it
 * into self and take its history (pti_inplace_rebase). */
#include <stdlib.h>
#include <string.h>

#include "../graph/node.h"
#include "common.h"
#include "index_grad.h"
#include "shape_grad.h"
#include "prometorch/ops_elementwise.h"
#include "prometorch/ops_reduce.h"
#include "prometorch/ops_shape.h"

/* Every node of this file keeps its self input's shape in i[SHAPE_AT..] and ndim in d[7];
 * i[0] is the dim where the op has one. */
#define SHAPE_AT PT_MAX_DIMS

static pt_status done(pt_tensor *g)
{
    return g ? PT_OK : pt_last_status();
}

/* A node over the n inputs with self's shape recorded; NULL (error set) on failure. */
static pti_node *node_for(const char *name, pti_backward_fn fn, int n, const pt_tensor *const *ins,
                          const pt_tensor *self, int64_t dim)
{
    pti_node *node = pti_node_new(name, fn, n, ins);
    if (!node)
        return NULL;
    node->i[0] = dim;
    memcpy(node->i + SHAPE_AT, self->shape, sizeof(int64_t) * (size_t)self->ndim);
    node->d[7] = self->ndim;
    return node;
}

/* Attaches node to out; releases out on failure. */
static pt_tensor *finish(pti_node *node, pt_tensor *out)
{
    if (!node || pti_node_finish(node, 1, &out) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

/* Zeros of the self input's shape in g's dtype and device. */
static pt_tensor *zeros_self(const pti_node *n, const pt_tensor *g)
{
    return pt_zeros((int)n->d[7], n->i + SHAPE_AT, g->dtype, pt_device_of(g));
}

static pt_tensor *sum_to_self(const pti_node *n, pt_tensor *g)
{
    pt_tensor *r = g ? pti_sum_to(g, (int)n->d[7], n->i + SHAPE_AT) : NULL;
    pt_release(g);
    return r;
}

/* Saved tensor slot 0 (the index or mask), or NULL with the error set. */
static pt_tensor *saved0(pti_node *n)
{
    return pti_node_saved(n, 0);
}

/* x padded with zeros at the end of each dim up to `shape` (differentiable: cat). Takes
 * ownership of x. Used where a gradient covers only index's extent of a larger src. */
static pt_tensor *pad_to(pt_tensor *x, int ndim, const int64_t *to)
{
    for (int k = 0; x && k < x->ndim && k < ndim; k++) {
        if (x->shape[k] == to[k])
            continue;
        int64_t shape[PT_MAX_DIMS];
        memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        shape[k] = to[k] - x->shape[k];
        pt_tensor *z = pt_zeros(x->ndim, shape, x->dtype, pt_device_of(x));
        const pt_tensor *parts[2] = {x, z};
        pt_tensor *c = z ? pt_cat(2, parts, k) : NULL;
        pt_release(z);
        pt_release(x);
        x = c;
    }
    return x;
}

/* pti_inplace_check, and a refusal for views with history: writing through a view would
 * change its base without the base's history knowing (PyTorch's CopySlices is missing), so
 * gradients would be silently wrong; PyTorch itself refuses views of leaves. */
pt_status pti_index_inplace_check(const char *op, const pt_tensor *t)
{
    if (pti_inplace_check(op, t) != PT_OK)
        return pt_last_status();
    if (pti_shape_is_view_node(t->grad_fn))
        return pti_error(PT_ERR_UNSUPPORTED,
                         "%s: %s is a view (made by %s) of a tensor that requires grad; an "
                         "in-place operation on it is not supported by autograd (clone it "
                         "first)",
                         op, pti_tensor_desc(t), ((const pti_node *)t->grad_fn)->name);
    return PT_OK;
}

/* In-place op through its recorded out-of-place result: copy into t, take its history. */
pt_status pti_index_inplace_from(pt_tensor *t, pt_tensor *result)
{
    if (!result)
        return pt_last_status();
    pt_status st = PT_OK;
    if (result->ndim != t->ndim ||
        memcmp(result->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim) != 0)
        st = pti_error(
            PT_ERR_SHAPE, "in-place index op: result shape %s does not match the tensor's shape %s",
            pti_shape_str(result->ndim, result->shape), pti_shape_str(t->ndim, t->shape));
    if (st == PT_OK) {
        pt_no_grad_begin();
        st = pt_copy_(t, result);
        pt_no_grad_end();
    }
    if (st == PT_OK)
        st = pti_inplace_rebase(t, result);
    pt_release(result);
    return st;
}

/* ---- index_select, gather ------------------------------------------------------------------- */

static pt_status index_select_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    pt_tensor *idx = saved0(n), *z = idx ? zeros_self(n, go[0]) : NULL;
    gi[0] = z ? pt_index_add(z, n->i[0], idx, go[0], 1.0) : NULL;
    pt_release(idx);
    pt_release(z);
    return done(gi[0]);
}

pt_tensor *pti_index_record_select(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                                   pt_tensor *out)
{
    if (!out)
        return NULL;
    pti_node *n = node_for("index_select", index_select_backward, 1, &t, t, dim);
    if (n && pti_node_save(n, index) < 0) {
        pti_node_release(n);
        n = NULL;
    }
    return finish(n, out);
}

static pt_status gather_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    pt_tensor *idx = saved0(n), *z = idx ? zeros_self(n, go[0]) : NULL;
    gi[0] = z ? pt_scatter_add(z, n->i[0], idx, go[0]) : NULL;
    pt_release(idx);
    pt_release(z);
    return done(gi[0]);
}

pt_tensor *pti_index_record_gather(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                                   pt_tensor *out)
{
    if (!out)
        return NULL;
    pti_node *n = node_for("gather", gather_backward, 1, &t, t, dim);
    if (n && pti_node_save(n, index) < 0) {
        pti_node_release(n);
        n = NULL;
    }
    return finish(n, out);
}

/* ---- scatter, scatter_add -------------------------------------------------------------------- */

/* Inputs {self, src}; saved: index. d[0] = 1 for scatter_add (self gets the whole gradient),
 * 0 for scatter (scattered positions get none); src's shape (only its shape is needed, as in
 * PyTorch) in i[1..] with its ndim in d[1]. */
static pt_status scatter_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    pt_tensor *idx = saved0(n);
    if (!idx)
        return pt_last_status();
    pt_status st = PT_OK;
    if (pti_node_needs_grad(n, 0)) {
        gi[0] = n->d[0] != 0 ? pt_retain(go[0]) : pt_scatter_scalar(go[0], n->i[0], idx, 0.0);
        st = done(gi[0]);
    }
    if (st == PT_OK && pti_node_needs_grad(n, 1)) {
        gi[1] = pad_to(pt_gather(go[0], n->i[0], idx), (int)n->d[1], n->i + 1);
        st = done(gi[1]);
    }
    pt_release(idx);
    return st;
}

pt_tensor *pti_index_record_scatter(const char *name, const pt_tensor *t, int64_t dim,
                                    const pt_tensor *index, const pt_tensor *src, bool add,
                                    pt_tensor *out)
{
    if (!out)
        return NULL;
    const pt_tensor *ins[2] = {t, src};
    pti_node *n = node_for(name, scatter_backward, src ? 2 : 1, ins, t, dim);
    if (n) {
        n->d[0] = add;
        if (src) { /* src has t's ndim (checked by the forward), at most SHAPE_AT - 1 here */
            n->d[1] = src->ndim;
            memcpy(n->i + 1, src->shape, sizeof(int64_t) * (size_t)src->ndim);
        }
        if ((src && src->ndim + 1 > SHAPE_AT) || pti_node_save(n, index) < 0) {
            if (src && src->ndim + 1 > SHAPE_AT)
                pti_error(PT_ERR_SHAPE, "%s: src has too many dims to record", name);
            pti_node_release(n);
            n = NULL;
        }
    }
    return finish(n, out);
}

/* ---- index_add ------------------------------------------------------------------------------- */

/* Inputs {self, source}; saved: index; d[0] = alpha. */
static pt_status index_add_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    if (pti_node_needs_grad(n, 0))
        gi[0] = pt_retain(go[0]);
    if (!pti_node_needs_grad(n, 1))
        return PT_OK;
    pt_tensor *idx = saved0(n);
    pt_tensor *sel = idx ? pt_index_select(go[0], n->i[0], idx) : NULL;
    pt_tensor *scaled = sel && n->d[0] != 1.0 ? pt_mul_scalar(sel, n->d[0]) : pt_retain(sel);
    /* source has self's shape with dim resized to numel(index), except for a 0-dim self */
    gi[1] = scaled && n->d[7] == 0 ? pt_reshape(scaled, 0, NULL) : pt_retain(scaled);
    pt_release(idx);
    pt_release(sel);
    pt_release(scaled);
    return done(gi[1]);
}

pt_tensor *pti_index_record_index_add(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                                      const pt_tensor *source, double alpha, pt_tensor *out)
{
    if (!out)
        return NULL;
    const pt_tensor *ins[2] = {t, source};
    pti_node *n = node_for("index_add", index_add_backward, 2, ins, t, dim);
    if (n) {
        n->d[0] = alpha;
        if (pti_node_save(n, index) < 0) {
            pti_node_release(n);
            n = NULL;
        }
    }
    return finish(n, out);
}

/* ---- masked_fill, masked_select ------------------------------------------------------------ */

/* Inputs {self, value (tensor form only)}; saved: mask. */
static pt_status masked_fill_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    pt_tensor *mask = saved0(n);
    if (!mask)
        return pt_last_status();
    pt_status st = PT_OK;
    if (pti_node_needs_grad(n, 0)) {
        gi[0] = sum_to_self(n, pt_masked_fill(go[0], mask, 0.0));
        st = done(gi[0]);
    }
    if (st == PT_OK && pti_node_needs_grad(n, 1)) {
        pt_tensor *sel = pt_masked_select(go[0], mask);
        pt_tensor *s = sel ? pt_sum(sel) : NULL;
        pt_dtype vdt = (pt_dtype)n->i[1];
        gi[1] = s && s->dtype != vdt ? pt_to_dtype(s, vdt) : pt_retain(s);
        pt_release(sel);
        pt_release(s);
        st = done(gi[1]);
    }
    pt_release(mask);
    return st;
}

pt_tensor *pti_index_record_masked_fill(const pt_tensor *t, const pt_tensor *mask,
                                        const pt_tensor *value, pt_tensor *out)
{
    if (!out)
        return NULL;
    const pt_tensor *ins[2] = {t, value};
    pti_node *n = node_for("masked_fill", masked_fill_backward, value ? 2 : 1, ins, t, 0);
    if (n) {
        n->i[1] = value ? value->dtype : 0;
        if (pti_node_save(n, mask) < 0) {
            pti_node_release(n);
            n = NULL;
        }
    }
    return finish(n, out);
}

/* The selected elements go back to their positions in zeros of the broadcast shape
 * (index_put with the mask, which walks it in the same row-major order), then are summed to
 * self's shape. */
static pt_status masked_select_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    pt_tensor *mask = saved0(n);
    if (!mask)
        return pt_last_status();
    int nd;
    int64_t shape[PT_MAX_DIMS];
    gi[0] = NULL;
    if (pti_broadcast_shapes("masked_select_backward", (int)n->d[7], n->i + SHAPE_AT, mask->ndim,
                             mask->shape, &nd, shape)) {
        /* index_put refuses a 0-dim bool index: a 0-dim self and mask scatter through [1]
         * (summed back to 0 dims below) */
        if (nd == 0)
            shape[nd++] = 1;
        pt_tensor *me = pt_expand(mask, nd, shape);
        pt_tensor *z = me ? pt_zeros(nd, shape, go[0]->dtype, pt_device_of(go[0])) : NULL;
        const pt_tensor *idx[1] = {me};
        pt_tensor *put = z ? pt_index_put(z, 1, idx, go[0], false) : NULL;
        gi[0] = sum_to_self(n, put);
        pt_release(me);
        pt_release(z);
    }
    pt_release(mask);
    return done(gi[0]);
}

pt_tensor *pti_index_record_masked_select(const pt_tensor *t, const pt_tensor *mask, pt_tensor *out)
{
    if (!out)
        return NULL;
    pti_node *n = node_for("masked_select", masked_select_backward, 1, &t, t, 0);
    if (n && pti_node_save(n, mask) < 0) {
        pti_node_release(n);
        n = NULL;
    }
    return finish(n, out);
}

/* ---- advanced indexing ----------------------------------------------------------------------- */

/* The index list of pt_index / pt_index_put, kept by the node (index tensors are not
 * differentiable, so no version check is needed beyond PyTorch's). */
typedef struct index_list {
    int n;
    pt_tensor *idx[PT_MAX_DIMS];
} index_list;

static void index_list_free(void *p)
{
    index_list *l = p;
    for (int k = 0; k < l->n; k++)
        pti_unref(l->idx[k]);
    pti_scratch_free(l);
}

static bool keep_indices(pti_node *node, int n, const pt_tensor *const *indices)
{
    index_list *l = pti_scratch_alloc(sizeof *l);
    if (!l)
        return false;
    l->n = n;
    for (int k = 0; k < n; k++)
        l->idx[k] = pt_retain((pt_tensor *)indices[k]);
    node->ctx = l;
    node->ctx_free = index_list_free;
    return true;
}

static pt_status index_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    const index_list *l = n->ctx;
    pt_tensor *z = zeros_self(n, go[0]);
    gi[0] = z ? pt_index_put(z, l->n, (const pt_tensor *const *)l->idx, go[0], true) : NULL;
    pt_release(z);
    return done(gi[0]);
}

pt_tensor *pti_index_record_index(const pt_tensor *t, int n, const pt_tensor *const *indices,
                                  pt_tensor *out)
{
    if (!out)
        return NULL;
    if (pt_shares_storage(out, t)) { /* no index tensor: a view of t */
        if (pti_record_alias(out, t) != PT_OK) {
            pt_release(out);
            return NULL;
        }
        return out;
    }
    pti_node *node = node_for("index", index_backward, 1, &t, t, 0);
    if (node && !keep_indices(node, n, indices)) {
        pti_node_release(node);
        node = NULL;
    }
    return finish(node, out);
}

/* Inputs {self, values}; d[0] = accumulate. */
static pt_status index_put_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    const index_list *l = n->ctx;
    const pt_tensor *const *idx = (const pt_tensor *const *)l->idx;
    if (pti_node_needs_grad(n, 0)) {
        if (n->d[0] != 0) {
            gi[0] = pt_retain(go[0]);
        } else {
            pt_tensor *z = pt_zeros(0, NULL, go[0]->dtype, pt_device_of(go[0]));
            gi[0] = z ? pt_index_put(go[0], l->n, idx, z, false) : NULL;
            pt_release(z);
        }
        if (!gi[0])
            return pt_last_status();
    }
    if (pti_node_needs_grad(n, 1)) {
        pt_tensor *sel = pt_index(go[0], l->n, idx);
        gi[1] = sel ? pti_sum_to(sel, (int)n->d[1], n->i + 1) : NULL;
        pt_release(sel);
        return done(gi[1]);
    }
    return PT_OK;
}

pt_tensor *pti_index_record_index_put(const pt_tensor *t, int n, const pt_tensor *const *indices,
                                      const pt_tensor *values, bool accumulate, pt_tensor *out)
{
    if (!out)
        return NULL;
    const pt_tensor *ins[2] = {t, values};
    pti_node *node = node_for("index_put", index_put_backward, 2, ins, t, 0);
    if (node) {
        /* values' shape in i[1..], ndim in d[1] (i[SHAPE_AT..] holds self's) */
        node->d[0] = accumulate;
        node->d[1] = values->ndim;
        memcpy(node->i + 1, values->shape, sizeof(int64_t) * (size_t)values->ndim);
        if (values->ndim + 1 > SHAPE_AT || !keep_indices(node, n, indices)) {
            if (values->ndim + 1 > SHAPE_AT)
                pti_error(PT_ERR_SHAPE, "pt_index_put: values have too many dims to record");
            pti_node_release(node);
            node = NULL;
        }
    }
    return finish(node, out);
}

/* ---- sort, topk: values go back to their positions through the indices ----------------------- */

static pt_status sort_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    pt_tensor *idx = saved0(n), *z = idx ? zeros_self(n, go[0]) : NULL;
    gi[0] = z ? pt_scatter(z, n->i[0], idx, go[0]) : NULL;
    pt_release(idx);
    pt_release(z);
    return done(gi[0]);
}

/* Records vals (sorted along dim) against t; hands idx to *indices or releases it. */
pt_tensor *pti_index_record_sort(const char *name, const pt_tensor *t, int64_t dim, pt_tensor *vals,
                                 pt_tensor *idx, pt_tensor **indices)
{
    if (vals && t->ndim > 0) {
        pti_node *n = node_for(name, sort_backward, 1, &t, t, dim);
        if (n && pti_node_save(n, idx) < 0) {
            pti_node_release(n);
            n = NULL;
        }
        vals = finish(n, vals);
    } else if (vals) { /* 0-dim: the value is the input */
        if (pti_record_alias(vals, t) != PT_OK) {
            pt_release(vals);
            vals = NULL;
        }
    }
    if (indices && vals)
        *indices = idx;
    else
        pt_release(idx);
    return vals;
}

/* ---- embedding ------------------------------------------------------------------------------ */

/* Inputs {weight}; saved: indices; d[0] = 1 with a padding row, i[1] = its (wrapped) index.
 * Rows of the gradient are summed into their weight rows with index_add. */
static pt_status embedding_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    pt_tensor *idx = saved0(n);
    if (!idx)
        return pt_last_status();
    int64_t dim = n->i[SHAPE_AT + 1], rows = idx->numel;
    int64_t s2[2] = {rows, dim};
    pt_tensor *flat = pt_reshape(idx, 1, &rows);
    pt_tensor *g2 = flat ? pt_reshape(go[0], 2, s2) : NULL;
    if (g2 && n->d[0] != 0) { /* the padding row gets no gradient */
        pt_tensor *is_pad = pt_eq_scalar(flat, (double)n->i[1]);
        pt_tensor *m = is_pad ? pt_unsqueeze(is_pad, 1) : NULL;
        pt_tensor *masked = m ? pt_masked_fill(g2, m, 0.0) : NULL;
        pt_release(is_pad);
        pt_release(m);
        pt_release(g2);
        g2 = masked;
    }
    pt_tensor *z = g2 ? zeros_self(n, go[0]) : NULL;
    gi[0] = z ? pt_index_add(z, 0, flat, g2, 1.0) : NULL;
    pt_release(z);
    pt_release(g2);
    pt_release(flat);
    pt_release(idx);
    return done(gi[0]);
}

pt_tensor *pti_index_record_embedding(const pt_tensor *weight, const pt_tensor *indices,
                                      const pt_embedding_opts *opts, pt_tensor *out)
{
    if (!out)
        return NULL;
    pti_node *n = node_for("embedding", embedding_backward, 1, &weight, weight, 0);
    if (n) {
        bool pad = opts && opts->has_padding_idx;
        n->d[0] = pad;
        n->i[1] =
            pad ? (opts->padding_idx < 0 ? opts->padding_idx + weight->shape[0] : opts->padding_idx)
                : 0;
        if (pti_node_save(n, indices) < 0) {
            pti_node_release(n);
            n = NULL;
        }
    }
    return finish(n, out);
}
