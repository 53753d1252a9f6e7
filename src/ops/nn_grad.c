/* Autograd for the nn family: recording and backward formulas of batch_norm, layer_norm,
 * group_norm, rms_norm, dropout and scaled_dot_product_attention. The formulas are composed of
 * public ops (statistics are recomputed from the saved input), so with create_graph they record
 * their own graph and give second derivatives. The front-ends (nn.c) run their kernels under
 * no-grad when recording and hand the result to the pti_nn_record_* calls (nn_grad.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/node.h"
#include "nn_grad.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static pt_tensor *rec_fail(pti_node *n, pt_tensor *out)
{
    pti_node_release(n);
    pt_release(out);
    return NULL;
}

/* Releases up to 8 tensors (NULLs allowed). */
static void release_all(int n, pt_tensor **ts)
{
    for (int i = 0; i < n; i++) {
        pt_release(ts[i]);
        ts[i] = NULL;
    }
}

/* r converted to `like`'s dtype (consumes r). */
static pt_tensor *as_dtype_of(pt_tensor *r, const pt_tensor *like)
{
    if (!r || r->dtype == like->dtype)
        return r;
    pt_tensor *c = pt_to_dtype(r, like->dtype);
    pt_release(r);
    return c;
}

/* Stores the gradient of input i; returns false when it is needed and r is NULL. */
static bool put(pt_tensor **grad_in, int i, pt_tensor *r, const pt_tensor *input)
{
    grad_in[i] = as_dtype_of(r, input);
    return grad_in[i] != NULL;
}

/* The same for an input known by its dtype (the bias, which is not saved). */
static bool put_dt(pt_tensor **grad_in, int i, pt_tensor *r, pt_dtype dt)
{
    if (r && r->dtype != dt) {
        pt_tensor *c = pt_to_dtype(r, dt);
        pt_release(r);
        r = c;
    }
    grad_in[i] = r;
    return r != NULL;
}

/* On failure, frees the gradients written so far and returns the error. */
static pt_status grads_done(bool ok, int n, pt_tensor **grad_in)
{
    if (ok)
        return PT_OK;
    release_all(n, grad_in);
    return pt_last_status() != PT_OK ? pt_last_status() : PT_ERR_RUNTIME;
}

/* invstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) over dims (keepdim stats): the
 * input gradient of a normalization y = (x - mean) * invstd whose output gradient is gxhat. */
static pt_tensor *normalize_grad(const pt_tensor *gxhat, const pt_tensor *xhat,
                                 const pt_tensor *invstd, int nd, const int64_t *dims)
{
    pt_tensor *t[6] = {0};
    t[0] = pt_mean_dim(gxhat, nd, dims, true);
    t[1] = pt_mul(gxhat, xhat);
    t[2] = pt_mean_dim(t[1], nd, dims, true);
    t[3] = pt_mul(xhat, t[2]);
    t[4] = pt_sub(gxhat, t[0]);
    t[5] = pt_sub(t[4], t[3]);
    pt_tensor *r = pt_mul(t[5], invstd);
    release_all(6, t);
    return r;
}

/* xhat = (x - mean) * invstd and invstd = rsqrt(var + eps), biased statistics over dims. */
static bool norm_stats(const pt_tensor *x, int nd, const int64_t *dims, double eps,
                       pt_tensor **xhat, pt_tensor **invstd)
{
    pt_tensor *t[4] = {0};
    t[0] = pt_mean_dim(x, nd, dims, true);
    t[1] = pt_sub(x, t[0]);
    t[2] = pt_mul(t[1], t[1]);
    t[3] = pt_mean_dim(t[2], nd, dims, true);
    pt_release(t[0]);
    t[0] = pt_add_scalar(t[3], eps);
    *invstd = pt_rsqrt(t[0]);
    *xhat = pt_mul(t[1], *invstd);
    release_all(4, t);
    if (*xhat && *invstd)
        return true;
    pt_release(*xhat);
    pt_release(*invstd);
    *xhat = *invstd = NULL;
    return false;
}

/* [C] viewed as [1, C, 1, ...] to broadcast against an [N, C, *] tensor of ndim dims. */
static pt_tensor *channel_view(const pt_tensor *p, int ndim)
{
    int64_t shape[PT_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        shape[d] = 1;
    shape[1] = p->shape[0];
    return pt_reshape(p, ndim, shape);
}

/* Dims 0, 2, 3, ... of an [N, C, *] tensor. */
static int non_channel_dims(int ndim, int64_t *dims)
{
    int nd = 0;
    for (int d = 0; d < ndim; d++)
        if (d != 1)
            dims[nd++] = d;
    return nd;
}

/* g * w (w broadcast by `wb`, which may be NULL meaning 1): a new reference. */
static pt_tensor *times_weight(const pt_tensor *g, const pt_tensor *wb)
{
    return wb ? pt_mul(g, wb) : pt_retain((pt_tensor *)g);
}

/* ---- batch_norm -------------------------------------------------------------------------------
 * inputs {x, weight, bias}; saved {x, weight, eval: running_mean, running_var (copies)};
 * i[0] = training, d[0] = eps; i[5] is the bias dtype in every norm node. */

static pt_status batch_norm_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    const pt_tensor *g = grad_out[0];
    bool training = n->i[0] != 0;
    double eps = n->d[0];
    pt_tensor *x = pti_node_saved(n, 0), *w = pti_node_saved(n, 1);
    pt_tensor *t[8] = {0}; /* wb, xhat, invstd, gxhat, rm, rv, tmp, tmp2 */
    int64_t dims[PT_MAX_DIMS];
    bool ok = x && (w || !n->saved[1]);
    if (ok && !pt_grad_enabled()) {
        /* no graph of this backward is being built: the fused kernel */
        pt_tensor *rm = training ? NULL : pti_node_saved(n, 2);
        pt_tensor *rv = training ? NULL : pti_node_saved(n, 3);
        pt_tensor *gw = NULL, *gb = NULL;
        bool nw = pti_node_needs_grad(n, 1), nb = pti_node_needs_grad(n, 2);
        pt_tensor *gx = (training || (rm && rv))
                            ? pt_batch_norm_backward(g, x, rm, rv, w, training, eps,
                                                     nw ? &gw : NULL, nb ? &gb : NULL)
                            : NULL;
        ok = gx != NULL;
        if (ok && pti_node_needs_grad(n, 0))
            grad_in[0] = gx;
        else
            pt_release(gx);
        if (ok && nw)
            ok = put(grad_in, 1, gw, w);
        else
            pt_release(gw);
        if (ok && nb)
            ok = put_dt(grad_in, 2, gb, (pt_dtype)n->i[5]);
        else
            pt_release(gb);
        pt_release(rm);
        pt_release(rv);
        pt_release(x);
        pt_release(w);
        return grads_done(ok, 3, grad_in);
    }
    int nd = ok ? non_channel_dims(x->ndim, dims) : 0;
    if (ok && w)
        ok = (t[0] = channel_view(w, x->ndim)) != NULL;
    if (ok && training) {
        ok = norm_stats(x, nd, dims, eps, &t[1], &t[2]);
    } else if (ok) {
        t[4] = pti_node_saved(n, 2);
        t[5] = pti_node_saved(n, 3);
        pt_tensor *rmb = t[4] ? channel_view(t[4], x->ndim) : NULL;
        pt_tensor *rvb = t[5] ? channel_view(t[5], x->ndim) : NULL;
        t[6] = rvb ? pt_add_scalar(rvb, eps) : NULL;
        t[2] = t[6] ? pt_rsqrt(t[6]) : NULL;
        t[7] = rmb ? pt_sub(x, rmb) : NULL;
        t[1] = t[7] && t[2] ? pt_mul(t[7], t[2]) : NULL;
        pt_release(rmb);
        pt_release(rvb);
        ok = t[1] && t[2];
    }
    if (ok && pti_node_needs_grad(n, 0)) {
        t[3] = times_weight(g, t[0]);
        pt_tensor *gx = !t[3]      ? NULL
                        : training ? normalize_grad(t[3], t[1], t[2], nd, dims)
                                   : pt_mul(t[3], t[2]);
        ok = put(grad_in, 0, gx, x);
    }
    if (ok && pti_node_needs_grad(n, 1)) {
        pt_tensor *gxh = pt_mul(g, t[1]);
        ok = put(grad_in, 1, gxh ? pt_sum_dim(gxh, nd, dims, false) : NULL, w);
        pt_release(gxh);
    }
    if (ok && pti_node_needs_grad(n, 2)) {
        ok = put_dt(grad_in, 2, pt_sum_dim(g, nd, dims, false), (pt_dtype)n->i[5]);
    }
    pt_release(x);
    pt_release(w);
    release_all(8, t);
    return grads_done(ok, 3, grad_in);
}

pt_tensor *pti_nn_record_batch_norm(pt_tensor *out, const pt_tensor *x, const pt_tensor *rm,
                                    const pt_tensor *rv, const pt_tensor *weight,
                                    const pt_tensor *bias, bool training, double eps)
{
    if (!out)
        return NULL;
    const pt_tensor *ins[3] = {x, weight, bias};
    pti_node *n = pti_node_new("batch_norm", batch_norm_backward, 3, ins);
    if (!n)
        return rec_fail(NULL, out);
    n->i[5] = bias ? bias->dtype : PT_FLOAT32;
    n->i[0] = training;
    n->d[0] = eps;
    if (pti_node_save(n, x) < 0 || pti_node_save(n, weight) < 0)
        return rec_fail(n, out);
    if (!training) {
        /* copies: later training steps update the running stats in place */
        bool prev = pt_set_grad_enabled(false);
        pt_tensor *a = pt_clone(rm), *b = pt_clone(rv);
        pt_set_grad_enabled(prev);
        bool ok = a && b && pti_node_save(n, a) >= 0 && pti_node_save(n, b) >= 0;
        pt_release(a);
        pt_release(b);
        if (!ok)
            return rec_fail(n, out);
    }
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}

/* ---- layer_norm / rms_norm ----------------------------------------------------------------------
 * inputs {x, weight, bias}; saved {x, weight}; i[0] = number of normalized dims, d[0] = eps,
 * i[1] = rms (1) or layer (0). */

static pt_status row_norm_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    const pt_tensor *g = grad_out[0];
    int nn = (int)n->i[0];
    bool rms = n->i[1] != 0;
    double eps = n->d[0];
    pt_tensor *x = pti_node_saved(n, 0), *w = pti_node_saved(n, 1);
    pt_tensor *t[8] = {0};
    bool ok = x && (w || !n->saved[1]);
    int64_t dims[PT_MAX_DIMS];
    int nd = 0;
    if (ok)
        for (int d = x->ndim - nn; d < x->ndim; d++)
            dims[nd++] = d;
    const int64_t *nshape = ok ? x->shape + x->ndim - nn : NULL;
    if (ok && !pt_grad_enabled()) {
        /* no graph of this backward is being built: the fused kernel */
        pt_tensor *gw = NULL, *gb = NULL;
        bool nw = pti_node_needs_grad(n, 1), nb = pti_node_needs_grad(n, 2);
        pt_tensor *gx = rms ? pt_rms_norm_backward(g, x, nn, nshape, w, eps, nw ? &gw : NULL)
                            : pt_layer_norm_backward(g, x, nn, nshape, w, eps, nw ? &gw : NULL,
                                                     nb ? &gb : NULL);
        ok = gx != NULL;
        if (ok && pti_node_needs_grad(n, 0))
            grad_in[0] = gx;
        else
            pt_release(gx);
        if (ok && nw)
            ok = put(grad_in, 1, gw, w ? w : x);
        if (ok && nb)
            ok = put_dt(grad_in, 2, gb, (pt_dtype)n->i[5]);
        pt_release(x);
        pt_release(w);
        return grads_done(ok, 3, grad_in);
    }
    if (ok && !rms) {
        ok = norm_stats(x, nd, dims, eps, &t[0], &t[1]); /* xhat, invstd */
    } else if (ok) {
        /* r = rsqrt(mean(x^2) + eps); y = x * r * w; t[0] = x * r plays the role of xhat */
        t[2] = pt_mul(x, x);
        t[3] = t[2] ? pt_mean_dim(t[2], nd, dims, true) : NULL;
        t[4] = t[3] ? pt_add_scalar(t[3], eps) : NULL;
        t[1] = t[4] ? pt_rsqrt(t[4]) : NULL;
        t[0] = t[1] ? pt_mul(x, t[1]) : NULL;
        release_all(3, t + 2);
        ok = t[0] && t[1];
    }
    if (ok && pti_node_needs_grad(n, 0)) {
        t[2] = times_weight(g, w);
        pt_tensor *gx = NULL;
        if (t[2] && !rms) {
            gx = normalize_grad(t[2], t[0], t[1], nd, dims);
        } else if (t[2]) {
            /* gx = r * (gw - xhat * mean(gw * xhat)) with xhat = x * r */
            t[3] = pt_mul(t[2], t[0]);
            t[4] = t[3] ? pt_mean_dim(t[3], nd, dims, true) : NULL;
            t[5] = t[4] ? pt_mul(t[0], t[4]) : NULL;
            t[6] = t[5] ? pt_sub(t[2], t[5]) : NULL;
            gx = t[6] ? pt_mul(t[6], t[1]) : NULL;
        }
        ok = put(grad_in, 0, gx, x);
    }
    if (ok && pti_node_needs_grad(n, 1)) {
        pt_tensor *gxh = pt_mul(g, t[0]);
        ok = put(grad_in, 1, gxh ? pti_sum_to(gxh, nn, nshape) : NULL, w);
        pt_release(gxh);
    }
    if (ok && pti_node_needs_grad(n, 2))
        ok = put_dt(grad_in, 2, pti_sum_to(g, nn, nshape), (pt_dtype)n->i[5]);
    pt_release(x);
    pt_release(w);
    release_all(8, t);
    return grads_done(ok, 3, grad_in);
}

pt_tensor *pti_nn_record_row_norm(pt_tensor *out, bool rms, const pt_tensor *x, int n_dims,
                                  const pt_tensor *weight, const pt_tensor *bias, double eps)
{
    if (!out)
        return NULL;
    const pt_tensor *ins[3] = {x, weight, bias};
    pti_node *n = pti_node_new(rms ? "rms_norm" : "layer_norm", row_norm_backward, 3, ins);
    if (!n)
        return rec_fail(NULL, out);
    n->i[5] = bias ? bias->dtype : PT_FLOAT32;
    n->i[0] = n_dims;
    n->i[1] = rms;
    n->d[0] = eps;
    if (pti_node_save(n, x) < 0 || pti_node_save(n, weight) < 0)
        return rec_fail(n, out);
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}

/* ---- group_norm ---------------------------------------------------------------------------------
 * inputs {x, weight, bias}; saved {x, weight}; i[0] = groups, d[0] = eps. */

static pt_status group_norm_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    const pt_tensor *g = grad_out[0];
    int64_t groups = n->i[0];
    double eps = n->d[0];
    pt_tensor *x = pti_node_saved(n, 0), *w = pti_node_saved(n, 1);
    pt_tensor *t[8] = {0}; /* xg, xhat_g, invstd, wb, gw_full, gw_g, gx_g, xhat */
    bool ok = x && (w || !n->saved[1]);
    if (ok && !pt_grad_enabled()) {
        /* no graph of this backward is being built: the fused kernel */
        pt_tensor *gw = NULL, *gb = NULL;
        bool nw = pti_node_needs_grad(n, 1), nb = pti_node_needs_grad(n, 2);
        pt_tensor *gx =
            pt_group_norm_backward(g, x, groups, w, eps, nw ? &gw : NULL, nb ? &gb : NULL);
        ok = gx != NULL;
        if (ok && pti_node_needs_grad(n, 0))
            grad_in[0] = gx;
        else
            pt_release(gx);
        if (ok && nw)
            ok = put(grad_in, 1, gw, w);
        else
            pt_release(gw);
        if (ok && nb)
            ok = put_dt(grad_in, 2, gb, (pt_dtype)n->i[5]);
        else
            pt_release(gb);
        pt_release(x);
        pt_release(w);
        return grads_done(ok, 3, grad_in);
    }
    int64_t dims[PT_MAX_DIMS], two = 2;
    int nd = ok ? non_channel_dims(x->ndim, dims) : 0;
    if (ok) {
        int64_t gs[3] = {x->shape[0], groups, x->numel / (x->shape[0] * groups)};
        if (x->numel == 0)
            gs[2] = 0;
        t[0] = pt_reshape(x, 3, gs);
        ok = t[0] && norm_stats(t[0], 1, &two, eps, &t[1], &t[2]);
        t[7] = ok ? pt_reshape(t[1], x->ndim, x->shape) : NULL;
        ok = ok && t[7] && (!w || (t[3] = channel_view(w, x->ndim)) != NULL);
        if (ok && pti_node_needs_grad(n, 0)) {
            t[4] = times_weight(g, t[3]);
            t[5] = t[4] ? pt_reshape(t[4], 3, gs) : NULL;
            t[6] = t[5] ? normalize_grad(t[5], t[1], t[2], 1, &two) : NULL;
            ok = put(grad_in, 0, t[6] ? pt_reshape(t[6], x->ndim, x->shape) : NULL, x);
        }
    }
    if (ok && pti_node_needs_grad(n, 1)) {
        pt_tensor *gxh = pt_mul(g, t[7]);
        ok = put(grad_in, 1, gxh ? pt_sum_dim(gxh, nd, dims, false) : NULL, w);
        pt_release(gxh);
    }
    if (ok && pti_node_needs_grad(n, 2))
        ok = put_dt(grad_in, 2, pt_sum_dim(g, nd, dims, false), (pt_dtype)n->i[5]);
    pt_release(x);
    pt_release(w);
    release_all(8, t);
    return grads_done(ok, 3, grad_in);
}

pt_tensor *pti_nn_record_group_norm(pt_tensor *out, const pt_tensor *x, int64_t groups,
                                    const pt_tensor *weight, const pt_tensor *bias, double eps)
{
    if (!out)
        return NULL;
    const pt_tensor *ins[3] = {x, weight, bias};
    pti_node *n = pti_node_new("group_norm", group_norm_backward, 3, ins);
    if (!n)
        return rec_fail(NULL, out);
    n->i[5] = bias ? bias->dtype : PT_FLOAT32;
    n->i[0] = groups;
    n->d[0] = eps;
    if (pti_node_save(n, x) < 0 || pti_node_save(n, weight) < 0)
        return rec_fail(n, out);
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}

/* ---- dropout
 * ------------------------------------------------------------------------------------- saved
 * {mask}; d[0] = p. */

static pt_tensor *apply_mask(const pt_tensor *g, const pt_tensor *mask, double p)
{
    if (p >= 1)
        return pt_mul_scalar(g, 0.0);
    pt_tensor *m = pt_mul(g, mask);
    pt_tensor *r = m ? pt_mul_scalar(m, 1.0 / (1.0 - p)) : NULL;
    pt_release(m);
    return r;
}

static pt_status dropout_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *mask = pti_node_saved(n, 0);
    bool ok = mask && put(grad_in, 0, apply_mask(grad_out[0], mask, n->d[0]), grad_out[0]);
    pt_release(mask);
    return grads_done(ok, 1, grad_in);
}

pt_tensor *pti_nn_record_dropout(pt_tensor *out, const pt_tensor *x, const pt_tensor *mask,
                                 double p)
{
    if (!out)
        return NULL;
    pti_node *n = pti_node_new("dropout", dropout_backward, 1, &x);
    if (!n)
        return rec_fail(NULL, out);
    n->d[0] = p;
    if (pti_node_save(n, mask) < 0)
        return rec_fail(n, out);
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}

/* ---- scaled_dot_product_attention
 * ---------------------------------------------------------------- inputs {q, k, v, attn_mask};
 * saved {q, k, v, attn_mask, dropout mask}; d[0] = scale, d[1] = dropout_p, i[0] = is_causal. */

pt_tensor *pti_sdpa_probs(const pt_tensor *q, const pt_tensor *k, const pt_tensor *mask,
                          bool is_causal, double scale)
{
    pt_tensor *t[8] = {0};
    pt_tensor *s = NULL;
    t[0] = pt_transpose(k, -2, -1);
    t[1] = t[0] ? pt_matmul(q, t[0]) : NULL;
    s = t[1] ? pt_mul_scalar(t[1], scale) : NULL;
    if (s && (mask || is_causal))
        t[2] = pt_scalar_tensor(-INFINITY, s->dtype, s->storage->device);
    if (s && mask) {
        pt_tensor *m;
        if (mask->dtype == PT_BOOL) {
            m = t[2] ? pt_where(mask, s, t[2]) : NULL;
        } else {
            t[3] = as_dtype_of(pt_retain((pt_tensor *)mask), s);
            m = t[3] ? pt_add(s, t[3]) : NULL;
        }
        pt_release(s);
        s = m;
    }
    if (s && is_causal) {
        int64_t ls[2] = {s->shape[s->ndim - 2], s->shape[s->ndim - 1]};
        t[4] = pt_ones(2, ls, PT_BOOL, s->storage->device);
        t[5] = t[4] ? pt_tril(t[4], 0) : NULL;
        pt_tensor *m = t[5] && t[2] ? pt_where(t[5], s, t[2]) : NULL;
        pt_release(s);
        s = m;
    }
    pt_tensor *p = s ? pt_softmax(s, -1) : NULL;
    pt_release(s);
    release_all(8, t);
    return p;
}

static pt_status sdpa_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    const pt_tensor *g = grad_out[0];
    double scale = n->d[0], dp = n->d[1];
    bool causal = n->i[0] != 0;
    pt_tensor *q = pti_node_saved(n, 0), *k = pti_node_saved(n, 1), *v = pti_node_saved(n, 2);
    pt_tensor *am = n->saved[3] ? pti_node_saved(n, 3) : NULL;
    pt_tensor *dm = n->saved[4] ? pti_node_saved(n, 4) : NULL;
    pt_tensor *t[12] = {0};
    bool ok = q && k && v && (am || !n->saved[3]) && (dm || !n->saved[4]);
    if (ok) {
        t[0] = pti_sdpa_probs(q, k, am, causal, scale);      /* P */
        t[1] = t[0] && dm ? apply_mask(t[0], dm, dp) : NULL; /* dropped P */
        const pt_tensor *pd = dm ? t[1] : t[0];
        ok = pd != NULL;
        if (ok && pti_node_needs_grad(n, 2)) {
            t[2] = pt_transpose(pd, -2, -1);
            ok = put(grad_in, 2, t[2] ? pt_matmul(t[2], g) : NULL, v);
        }
    }
    bool need_s =
        pti_node_needs_grad(n, 0) || pti_node_needs_grad(n, 1) || pti_node_needs_grad(n, 3);
    if (ok && need_s) {
        t[3] = pt_transpose(v, -2, -1);
        t[4] = t[3] ? pt_matmul(g, t[3]) : NULL;             /* dL/d(dropped P) */
        t[5] = t[4] && dm ? apply_mask(t[4], dm, dp) : NULL; /* dL/dP */
        const pt_tensor *gp = dm ? t[5] : t[4];
        t[6] = gp ? pt_mul(gp, t[0]) : NULL;
        int64_t last = -1;
        t[7] = t[6] ? pt_sum_dim(t[6], 1, &last, true) : NULL;
        t[8] = t[7] ? pt_sub(gp, t[7]) : NULL;
        t[9] = t[8] ? pt_mul(t[0], t[8]) : NULL; /* dL/dS (scaled scores) */
        ok = t[9] != NULL;
    }
    if (ok && pti_node_needs_grad(n, 0)) {
        pt_tensor *a = pt_matmul(t[9], k);
        ok = put(grad_in, 0, a ? pt_mul_scalar(a, scale) : NULL, q);
        pt_release(a);
    }
    if (ok && pti_node_needs_grad(n, 1)) {
        t[10] = pt_transpose(t[9], -2, -1);
        pt_tensor *a = t[10] ? pt_matmul(t[10], q) : NULL;
        ok = put(grad_in, 1, a ? pt_mul_scalar(a, scale) : NULL, k);
        pt_release(a);
    }
    if (ok && pti_node_needs_grad(n, 3))
        ok = put(grad_in, 3, pti_sum_to_like(t[9], am), am);
    pt_release(q);
    pt_release(k);
    pt_release(v);
    pt_release(am);
    pt_release(dm);
    release_all(12, t);
    return grads_done(ok, 4, grad_in);
}

pt_tensor *pti_nn_record_sdpa(pt_tensor *out, const pt_tensor *q, const pt_tensor *k,
                              const pt_tensor *v, const pt_tensor *attn_mask,
                              const pt_tensor *drop_mask, double dropout_p, bool is_causal,
                              double scale)
{
    if (!out)
        return NULL;
    const pt_tensor *ins[4] = {q, k, v, attn_mask};
    pti_node *n = pti_node_new("scaled_dot_product_attention", sdpa_backward, 4, ins);
    if (!n)
        return rec_fail(NULL, out);
    n->d[0] = scale;
    n->d[1] = dropout_p;
    n->i[0] = is_causal;
    if (pti_node_save(n, q) < 0 || pti_node_save(n, k) < 0 || pti_node_save(n, v) < 0 ||
        pti_node_save(n, attn_mask) < 0 || pti_node_save(n, drop_mask) < 0)
        return rec_fail(n, out);
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}
