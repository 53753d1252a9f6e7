/* Autograd for the shape family: recording the nodes of the ops that record one (views and
 * copies; pti_shape_record_*, called by their front-ends in src/ops/shape.c), their backward
 * formulas, and the "embed" helper that scatters a slice's gradient back into zeros of the
 * input's shape. Ops composed of other public ops (stack, tile, t, expand_as, squeeze_dim,
 * split, chunk, unbind) are recorded through those ops. */
#include <stdlib.h>
#include <string.h>

#include "../graph/node.h"
#include "common.h"
#include "shape_grad.h"

/* ---- recording helpers ----------------------------------------------------------------------- */

/* Attaches a one-input node to out, storing ni ints and nd doubles of op settings. Releases
 * out and returns NULL on failure. */
static pt_tensor *record1(const char *name, pti_backward_fn fn, const pt_tensor *t, pt_tensor *out,
                          int ni, const int64_t *iv, int nd, const double *dv)
{
    if (!out)
        return NULL;
    pti_node *n = pti_node_new(name, fn, 1, &t);
    if (!n) {
        pt_release(out);
        return NULL;
    }
    for (int k = 0; k < ni; k++)
        n->i[k] = iv[k];
    for (int k = 0; k < nd; k++)
        n->d[k] = dv[k];
    if (pti_node_finish(n, 1, &out) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

static pt_status done(pt_tensor *g)
{
    return g ? PT_OK : pt_last_status();
}

/* ---- reshaping views: the gradient is reshaped back to the input's shape --------------------- */

static pt_status reshape_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    gi[0] = pt_reshape(go[0], (int)n->d[0], n->i);
    return done(gi[0]);
}

/* d[1] = 1 when out is a view of t (reshape copies when the strides do not allow a view). */
pt_tensor *pti_shape_record_reshape(const char *name, const pt_tensor *t, pt_tensor *out)
{
    double dv[2] = {t->ndim, out && pt_shares_storage(out, t)};
    return record1(name, reshape_backward, t, out, t->ndim, t->shape, 2, dv);
}

/* ---- reordering views ------------------------------------------------------------------------ */

static pt_status transpose_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    gi[0] = pt_transpose(go[0], n->i[0], n->i[1]);
    return done(gi[0]);
}

pt_tensor *pti_shape_record_transpose(const pt_tensor *t, pt_tensor *out, int64_t dim0,
                                      int64_t dim1)
{
    int64_t iv[2] = {dim0, dim1};
    return record1("transpose", transpose_backward, t, out, 2, iv, 0, NULL);
}

static pt_status permute_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    gi[0] = pt_permute(go[0], (int)n->d[0], n->i);
    return done(gi[0]);
}

pt_tensor *pti_shape_record_permute(const pt_tensor *t, pt_tensor *out, int ndims,
                                    const int64_t *dims)
{
    if (!out)
        return NULL;
    int64_t inverse[PT_MAX_DIMS];
    for (int k = 0; k < ndims; k++) {
        int d = 0;
        pti_wrap_dim("pt_permute", dims[k], t->ndim, &d); /* valid: the forward succeeded */
        inverse[d] = k;
    }
    double nd = ndims;
    return record1("permute", permute_backward, t, out, ndims, inverse, 1, &nd);
}

static pt_status expand_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    gi[0] = pti_sum_to(go[0], (int)n->d[0], n->i);
    return done(gi[0]);
}

pt_tensor *pti_shape_record_expand(const pt_tensor *t, pt_tensor *out)
{
    double nd = t->ndim;
    return record1("expand", expand_backward, t, out, t->ndim, t->shape, 1, &nd);
}

/* ---- slicing views: the gradient is embedded into zeros of the input's shape ----------------- */

/* Node layout of the slicing views and their embeddings: i[0..ndim) the input's shape,
 * i[PT_MAX_DIMS + k] the view's arguments, d[0] the input's ndim, d[1] the view kind. */
static const char *const view_names[] = {"narrow", "select", "slice", "diagonal"};
static const char *const embed_names[] = {"narrow_backward", "select_backward", "slice_backward",
                                          "diagonal_backward"};

/* The same view of t as the node's forward took of its input. */
static pt_tensor *apply_view(const pti_node *n, const pt_tensor *t)
{
    const int64_t *a = n->i + PT_MAX_DIMS;
    switch ((int)n->d[1]) {
    case PTI_VIEW_NARROW: return pt_narrow(t, a[0], a[1], a[2]);
    case PTI_VIEW_SELECT: return pt_select(t, a[0], a[1]);
    case PTI_VIEW_SLICE: return pt_slice(t, a[0], a[1], a[2], a[3]);
    default: return pt_diagonal(t, a[0], a[1], a[2]);
    }
}

/* The embedding's own backward (for create_graph): the view of the incoming gradient. */
static pt_status embed_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    gi[0] = apply_view(n, go[0]);
    return done(gi[0]);
}

/* Zeros of the view's input shape with g copied into the view's positions. Recorded (its
 * backward is the view itself) when g has history and grad mode is on. */
static pt_tensor *embed_view(const pti_node *src, const pt_tensor *g)
{
    pt_no_grad_begin();
    pt_tensor *z = pt_zeros((int)src->d[0], src->i, g->dtype, pt_device_of(g));
    pt_tensor *v = z ? apply_view(src, z) : NULL;
    pt_status st = v ? pt_copy_(v, g) : pt_last_status();
    pt_release(v);
    pt_no_grad_end();
    if (st != PT_OK) {
        pt_release(z);
        return NULL;
    }
    if (!pti_grad_recording(1, &g))
        return z;
    pti_node *n = pti_node_new(embed_names[(int)src->d[1]], embed_backward, 1, &g);
    if (!n) {
        pt_release(z);
        return NULL;
    }
    memcpy(n->i, src->i, sizeof n->i);
    memcpy(n->d, src->d, sizeof n->d);
    if (pti_node_finish(n, 1, &z) != PT_OK) {
        pt_release(z);
        return NULL;
    }
    return z;
}

static pt_status view_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    gi[0] = embed_view(n, go[0]);
    return done(gi[0]);
}

pt_tensor *pti_shape_record_view(pti_view_kind kind, const pt_tensor *t, pt_tensor *out, int nargs,
                                 const int64_t *args)
{
    int64_t iv[PT_MAX_DIMS + 4] = {0};
    memcpy(iv, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(iv + PT_MAX_DIMS, args, sizeof(int64_t) * (size_t)nargs);
    double dv[2] = {t->ndim, kind};
    /* record1 copies a prefix of iv: pass the whole array so the arguments come along */
    return record1(view_names[kind], view_backward, t, out, PT_MAX_DIMS + nargs, iv, 2, dv);
}

/* ---- cat ------------------------------------------------------------------------------------- */

/* Node layout: d[0] the wrapped dim; i[k] input k's size along it (-1: skipped empty [0]
 * input), i[PTI_NODE_MAX_IN + k] its dtype (the result dtype may be promoted). */
static pt_status cat_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    int d = (int)n->d[0];
    int64_t pos = 0;
    for (int k = 0; k < n->n_in; k++) {
        int64_t len = n->i[k];
        pt_dtype dt = (pt_dtype)n->i[PTI_NODE_MAX_IN + k];
        if (!pti_node_needs_grad(n, k)) {
            pos += len > 0 ? len : 0;
            continue;
        }
        if (len < 0) {
            gi[k] = pt_zeros(1, (const int64_t[]){0}, dt, pt_device_of(go[0]));
        } else {
            pt_tensor *piece = pt_narrow(go[0], d, pos, len);
            gi[k] = piece && piece->dtype != dt ? pt_to_dtype(piece, dt) : pt_retain(piece);
            pt_release(piece);
            pos += len;
        }
        if (!gi[k])
            return pt_last_status();
    }
    return PT_OK;
}

pt_tensor *pti_shape_record_cat(int n, const pt_tensor *const *ts, pt_tensor *out, int64_t dim)
{
    if (!out)
        return NULL;
    int d = 0;
    if (out->ndim > 0)
        pti_wrap_dim("pt_cat", dim, out->ndim, &d);
    pti_node *node = pti_node_new("cat", cat_backward, n, ts);
    if (!node) {
        pt_release(out);
        return NULL;
    }
    node->d[0] = d;
    for (int k = 0; k < n; k++) {
        bool skipped = ts[k]->ndim == 1 && ts[k]->shape[0] == 0;
        node->i[k] = skipped ? -1 : ts[k]->shape[d];
        node->i[PTI_NODE_MAX_IN + k] = ts[k]->dtype;
    }
    if (pti_node_finish(node, 1, &out) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

/* ---- repeat ---------------------------------------------------------------------------------- */

/* Node layout: i[0..nreps) the repeats, i[PT_MAX_DIMS..) the input's shape; d[0] nreps, d[1]
 * the input's ndim. Each repeated dim k is split into [reps, size] and summed over reps. */
static pt_status repeat_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    int nr = (int)n->d[0], tnd = (int)n->d[1], lead = nr - tnd;
    const int64_t *reps = n->i, *tshape = n->i + PT_MAX_DIMS;
    int64_t cur[PT_MAX_DIMS];
    memcpy(cur, go[0]->shape, sizeof(int64_t) * (size_t)nr);
    pt_tensor *acc = pt_retain(go[0]);
    for (int k = 0; k < nr && acc; k++) {
        if (reps[k] == 1)
            continue;
        int64_t in_k = k < lead ? 1 : tshape[k - lead];
        int64_t pre = pti_shape_numel(k, cur), post = pti_shape_numel(nr - k - 1, cur + k + 1);
        int64_t s4[4] = {pre, reps[k], in_k, post}, one = 1;
        pt_tensor *r = pt_reshape(acc, 4, s4);
        pt_tensor *s = r ? pt_sum_dim(r, 1, &one, false) : NULL;
        pt_release(r);
        pt_release(acc);
        cur[k] = in_k;
        acc = s ? pt_reshape(s, nr, cur) : NULL;
        pt_release(s);
    }
    gi[0] = acc ? pt_reshape(acc, tnd, tshape) : NULL;
    pt_release(acc);
    return done(gi[0]);
}

pt_tensor *pti_shape_record_repeat(const pt_tensor *t, pt_tensor *out, int nreps,
                                   const int64_t *reps)
{
    if (!out)
        return NULL;
    int64_t iv[2 * PT_MAX_DIMS] = {0};
    for (int k = 0; k < nreps; k++)
        iv[k] = reps[k];
    memcpy(iv + PT_MAX_DIMS, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    double dv[2] = {nreps, t->ndim};
    return record1("repeat", repeat_backward, t, out, PT_MAX_DIMS + t->ndim, iv, 2, dv);
}

/* ---- flip, roll, tril, triu ------------------------------------------------------------------ */

static pt_status flip_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    gi[0] = pt_flip(go[0], (int)n->d[0], n->i);
    return done(gi[0]);
}

pt_tensor *pti_shape_record_flip(const pt_tensor *t, pt_tensor *out, int ndims, const int64_t *dims)
{
    double nd = ndims;
    return record1("flip", flip_backward, t, out, ndims, dims, 1, &nd);
}

/* Node layout: i[0..nshifts) the negated shifts, i[PT_MAX_DIMS..) the dims. */
static pt_status roll_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    gi[0] = pt_roll(go[0], (int)n->d[0], n->i, (int)n->d[1], n->i + PT_MAX_DIMS);
    return done(gi[0]);
}

pt_tensor *pti_shape_record_roll(const pt_tensor *t, pt_tensor *out, int nshifts,
                                 const int64_t *shifts, int ndims, const int64_t *dims)
{
    if (!out)
        return NULL;
    int64_t iv[2 * PT_MAX_DIMS] = {0};
    for (int k = 0; k < nshifts; k++)
        iv[k] = -shifts[k];
    for (int k = 0; k < ndims; k++)
        iv[PT_MAX_DIMS + k] = dims[k];
    double dv[2] = {nshifts, ndims};
    return record1("roll", roll_backward, t, out, PT_MAX_DIMS + ndims, iv, 2, dv);
}

static pt_status tril_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    gi[0] = pt_tril(go[0], n->i[0]);
    return done(gi[0]);
}

static pt_status triu_backward(pti_node *n, pt_tensor *const *go, pt_tensor **gi)
{
    gi[0] = pt_triu(go[0], n->i[0]);
    return done(gi[0]);
}

pt_tensor *pti_shape_record_tri(bool upper, const pt_tensor *t, pt_tensor *out, int64_t diagonal)
{
    return upper ? record1("triu", triu_backward, t, out, 1, &diagonal, 0, NULL)
                 : record1("tril", tril_backward, t, out, 1, &diagonal, 0, NULL);
}

/* ---- views and in-place ops ------------------------------------------------------------------ */

bool pti_shape_is_view_node(const pti_node *n)
{
    if (!n)
        return false;
    pti_backward_fn f = n->backward;
    return (f == reshape_backward && n->d[1] != 0) || f == transpose_backward ||
           f == permute_backward || f == expand_backward || f == view_backward ||
           strcmp(n->name, "alias") == 0;
}
