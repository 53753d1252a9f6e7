/* Backward formulas of the loss family and the code that records them (called from the
 * front-ends in src/ops/loss.c). Every formula is composed of public ops, so it runs on any
 * backend and records its own graph under create_graph (double backward). The gradients follow
 * PyTorch 1.13's derivatives: the input always, the target where PyTorch differentiates it
 * (mse, l1, smooth_l1, huber, binary_cross_entropy[_with_logits], kl_div, class-probability
 * cross_entropy); class weights and pos_weight are constants. */
#include <math.h>
#include <string.h>

#include "../graph/node.h"
#include "common.h"
#include "loss_grad.h"
#include "prometorch/autograd.h"
#include "prometorch/ops_elementwise.h"
#include "prometorch/ops_index.h"
#include "prometorch/ops_reduce.h"
#include "prometorch/ops_shape.h"

/* Temporaries of one formula, released together at the end. Public ops propagate a NULL
 * argument as the earlier error, so a chain of calls needs one check at its end. */
typedef struct tmp_list {
    pt_tensor *t[64]; /* the longest formula keeps about 30 */
    int n;
} tmp_list;

static pt_tensor *keep(tmp_list *l, pt_tensor *t)
{
    if (t && l->n < (int)(sizeof(l->t) / sizeof(l->t[0])))
        l->t[l->n++] = t;
    return t;
}

static void release_all(tmp_list *l)
{
    for (int i = 0; i < l->n; i++)
        pt_release(l->t[i]);
    l->n = 0;
}

/* g (kept in l) brought to like's shape -- expanded where g is a factor that does not cover
 * all of like's dims, summed over the dims that like broadcasts -- and cast to its dtype: a new
 * reference, not kept. */
static pt_tensor *shape_like(tmp_list *l, pt_tensor *g, const pt_tensor *like)
{
    if (!g)
        return NULL;
    int nd;
    int64_t shape[PT_MAX_DIMS];
    if (!pti_broadcast_shapes("loss backward", g->ndim, g->shape, like->ndim, like->shape, &nd,
                              shape))
        return NULL;
    if (nd != g->ndim || memcmp(shape, g->shape, sizeof(int64_t) * (size_t)nd) != 0)
        g = keep(l, pt_expand(g, nd, shape));
    pt_tensor *s = keep(l, pti_sum_to_like(g, like));
    if (s && !pt_is_contiguous(s))
        s = keep(l, pt_contiguous(s));
    if (!s)
        return NULL;
    if (s->dtype != like->dtype)
        return pt_to_dtype(s, like->dtype);
    pt_retain(s);
    return s;
}

/* ---- elementwise losses ---------------------------------------------------------------------- */

enum { PW_KIND, PW_RED, PW_LOG_TARGET, PW_HAS_W, PW_HAS_PW };
enum { PW_DIV, PW_BETA };
enum { PW_S_IN, PW_S_TG };

/* d(loss_elem)/d(input) and, when need_t, d(loss_elem)/d(target), before the weight and the
 * reduction scale. */
static void pointwise_grads(tmp_list *l, const pti_node *n, const pt_tensor *x, const pt_tensor *t,
                            const pt_tensor *pw, bool need_t, pt_tensor **gx, pt_tensor **gt)
{
    double beta = n->d[PW_BETA];
    pt_tensor *d, *e;
    switch ((pti_pointwise_loss_kind)n->i[PW_KIND]) {
    case PTI_LOSS_MSE:
        *gx = keep(l, pt_mul_scalar(keep(l, pt_sub(x, t)), 2.0));
        *gt = keep(l, pt_neg(*gx));
        break;
    case PTI_LOSS_L1:
        *gx = keep(l, pt_sign(keep(l, pt_sub(x, t))));
        *gt = keep(l, pt_neg(*gx));
        break;
    case PTI_LOSS_SMOOTH_L1:
        d = keep(l, pt_sub(x, t));
        *gx = beta == 0 ? keep(l, pt_sign(d))
                        : keep(l, pt_clamp(keep(l, pt_div_scalar(d, beta)), true, -1, true, 1));
        *gt = keep(l, pt_neg(*gx));
        break;
    case PTI_LOSS_HUBER:
        *gx = keep(l, pt_clamp(keep(l, pt_sub(x, t)), true, -beta, true, beta));
        *gt = keep(l, pt_neg(*gx));
        break;
    case PTI_LOSS_BCE:
        /* (x - t) / max(x (1 - x), 1e-12) and -logit(x), as PyTorch */
        e = keep(l, pt_rsub_scalar(x, 1.0));
        *gx = keep(
            l, pt_div(keep(l, pt_sub(x, t)), keep(l, pt_clamp_min(keep(l, pt_mul(x, e)), 1e-12))));
        if (need_t)
            *gt = keep(l, pt_sub(keep(l, pt_log(e)), keep(l, pt_log(x))));
        break;
    case PTI_LOSS_BCE_LOGITS:
        e = keep(l, pt_sigmoid(x));
        if (pw) {
            /* ((pw t + 1 - t) sigmoid(x) - pw t) and -softplus(x) + pw softplus(-x) */
            pt_tensor *pt = keep(l, pt_mul(pw, t));
            pt_tensor *c = keep(l, pt_sub(keep(l, pt_add_scalar(pt, 1.0)), t));
            *gx = keep(l, pt_sub(keep(l, pt_mul(c, e)), pt));
            if (need_t) {
                pt_tensor *spn = keep(l, pt_softplus(keep(l, pt_neg(x)), 1.0, 20.0));
                *gt = keep(l, pt_sub(keep(l, pt_mul(pw, spn)), keep(l, pt_softplus(x, 1.0, 20.0))));
            }
        } else {
            *gx = keep(l, pt_sub(e, t));
            if (need_t)
                *gt = keep(l, pt_neg(x));
        }
        break;
    case PTI_LOSS_KL_DIV:
        if (n->i[PW_LOG_TARGET]) {
            /* loss = exp(t) (t - x) */
            e = keep(l, pt_exp(t));
            *gx = keep(l, pt_neg(e));
            if (need_t)
                *gt = keep(l, pt_mul(e, keep(l, pt_add_scalar(keep(l, pt_sub(t, x)), 1.0))));
        } else {
            /* loss = xlogy(t, t) - t x: d/dt = log t + 1 - x where t > 0 (0 at t == 0) */
            *gx = keep(l, pt_neg(t));
            if (!need_t)
                break;
            pt_tensor *lg = keep(l, pt_sub(keep(l, pt_add_scalar(keep(l, pt_log(t)), 1.0)), x));
            pt_tensor *z =
                keep(l, pt_scalar_tensor(0.0, lg ? lg->dtype : PT_FLOAT32, x->storage->device));
            *gt = keep(l, pt_where(keep(l, pt_gt_scalar(t, 0.0)), lg, z));
        }
        break;
    }
}

static pt_status pointwise_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    tmp_list l = {.n = 0};
    pt_tensor *x = keep(&l, pti_node_saved(n, PW_S_IN));
    pt_tensor *t = keep(&l, pti_node_saved(n, PW_S_TG));
    int slot = PW_S_TG + 1;
    pt_tensor *w = n->i[PW_HAS_W] ? keep(&l, pti_node_saved(n, slot++)) : NULL;
    pt_tensor *pw = n->i[PW_HAS_PW] ? keep(&l, pti_node_saved(n, slot++)) : NULL;
    if (!x || !t || (n->i[PW_HAS_W] && !w) || (n->i[PW_HAS_PW] && !pw)) {
        release_all(&l);
        return pt_last_status();
    }
    pt_tensor *g = grad_out[0];
    pt_reduction red = (pt_reduction)n->i[PW_RED];
    if (red == PT_REDUCTION_MEAN || red == PT_REDUCTION_BATCHMEAN)
        g = keep(&l, pt_div_scalar(g, n->d[PW_DIV]));
    if (w)
        g = keep(&l, pt_mul(g, w));
    pt_tensor *gx = NULL, *gt = NULL;
    pointwise_grads(&l, n, x, t, pw, pti_node_needs_grad(n, 1), &gx, &gt);
    pt_status st = PT_OK;
    if (pti_node_needs_grad(n, 0)) {
        grad_in[0] = shape_like(&l, keep(&l, pt_mul(gx, g)), x);
        if (!grad_in[0])
            st = pt_last_status();
    }
    if (st == PT_OK && pti_node_needs_grad(n, 1)) {
        grad_in[1] = shape_like(&l, keep(&l, pt_mul(gt, g)), t);
        if (!grad_in[1])
            st = pt_last_status();
    }
    release_all(&l);
    return st;
}

static const char *pointwise_name(pti_pointwise_loss_kind kind)
{
    switch (kind) {
    case PTI_LOSS_MSE: return "mse_loss";
    case PTI_LOSS_L1: return "l1_loss";
    case PTI_LOSS_SMOOTH_L1: return "smooth_l1_loss";
    case PTI_LOSS_HUBER: return "huber_loss";
    case PTI_LOSS_BCE: return "binary_cross_entropy";
    case PTI_LOSS_BCE_LOGITS: return "binary_cross_entropy_with_logits";
    case PTI_LOSS_KL_DIV: return "kl_div";
    }
    return "loss";
}

/* PyTorch has no derivative for class weights / pos_weight either; refuse instead of
 * silently returning none. Releases out on failure. */
static pt_tensor *refuse_weight_grad(const char *op, const pt_tensor *weight,
                                     const pt_tensor *pos_weight, pt_tensor *out)
{
    bool recording = pt_grad_enabled() && ((weight && weight->requires_grad) ||
                                           (pos_weight && pos_weight->requires_grad));
    if (!recording)
        return out;
    pt_release(out);
    return pti_error_null(PT_ERR_UNSUPPORTED,
                          "%s: the derivative with respect to the %s is not implemented (it is a "
                          "constant; detach it)",
                          op, weight && weight->requires_grad ? "class weight" : "pos_weight");
}

pt_tensor *pti_loss_record_pointwise(pti_pointwise_loss_kind kind, const pt_tensor *input,
                                     const pt_tensor *target, const pt_tensor *weight,
                                     const pt_tensor *pos_weight,
                                     const pti_pointwise_loss_params *p, pt_tensor *out)
{
    const pt_tensor *ins[2] = {input, target};
    if (out)
        out = refuse_weight_grad(pointwise_name(kind), weight, pos_weight, out);
    if (!out || !pti_grad_recording(2, ins))
        return out;
    pti_node *n = pti_node_new(pointwise_name(kind), pointwise_backward, 2, ins);
    if (!n) {
        pt_release(out);
        return NULL;
    }
    n->i[PW_KIND] = kind;
    n->i[PW_RED] = p->reduction;
    n->i[PW_LOG_TARGET] = p->log_target;
    n->i[PW_HAS_W] = weight != NULL;
    n->i[PW_HAS_PW] = pos_weight != NULL;
    n->d[PW_DIV] = p->divisor;
    n->d[PW_BETA] = p->beta;
    bool ok = pti_node_save(n, input) >= 0 && pti_node_save(n, target) >= 0 &&
              (!weight || pti_node_save(n, weight) >= 0) &&
              (!pos_weight || pti_node_save(n, pos_weight) >= 0);
    if (!ok) {
        pti_node_release(n);
        pt_release(out);
        return NULL;
    }
    if (pti_node_finish(n, 1, &out) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

/* ---- cross_entropy and nll_loss ----------------------------------------------------------------
 */

enum { CL_CE, CL_RED, CL_PROB, CL_IGNORE, CL_HAS_W };
enum { CL_SMOOTH };

/* weight [C] viewed to broadcast along x's class dim. */
static pt_tensor *class_view(tmp_list *l, const pt_tensor *w, const pt_tensor *x, int cdim)
{
    int64_t shape[PT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = d == cdim ? x->shape[d] : 1;
    return keep(l, pt_reshape(w, x->ndim, shape));
}

/* Q, the (unscaled) weight each class's log-probability carries in the loss, so that
 * d(loss)/d(log_softmax) = -Q * scale; *denom gets the 'mean' divisor (class-index targets:
 * the summed weight of the non-ignored targets, as the forward). */
static pt_tensor *class_coeffs(tmp_list *l, const pti_node *n, const pt_tensor *x,
                               const pt_tensor *tg, const pt_tensor *wv, int cdim,
                               pt_tensor **denom)
{
    double eps = n->d[CL_SMOOTH], c = (double)x->shape[cdim];
    if (n->i[CL_PROB]) {
        pt_tensor *q = eps > 0
                           ? keep(l, pt_add_scalar(keep(l, pt_mul_scalar(tg, 1 - eps)), eps / c))
                           : (pt_tensor *)tg;
        return wv ? keep(l, pt_mul(q, wv)) : q;
    }
    pt_tensor *valid = keep(l, pt_ne_scalar(tg, (double)n->i[CL_IGNORE]));
    pt_tensor *idx = keep(l, pt_unsqueeze(keep(l, pt_mul(tg, valid)), cdim));
    pt_tensor *vu = keep(l, pt_unsqueeze(valid, cdim));
    pt_tensor *vf = vu ? keep(l, pt_to_dtype(vu, x->dtype)) : NULL;
    pt_tensor *hot = keep(l, pt_scatter_scalar(keep(l, pt_zeros_like(x)), cdim, idx, 1.0));
    pt_tensor *m = keep(l, pt_mul(hot, vf));
    if (wv)
        m = keep(l, pt_mul(m, wv));
    *denom = keep(l, pt_sum(m));
    if (eps <= 0)
        return m;
    pt_tensor *sm = wv ? keep(l, pt_mul(vf, wv)) : vf;
    return keep(l, pt_add(keep(l, pt_mul_scalar(m, 1 - eps)), keep(l, pt_mul_scalar(sm, eps / c))));
}

/* First-order backward (no create_graph) in one kernel: pt_cross_entropy_backward /
 * pt_nll_loss_backward for the input; class-probability targets' gradient is composed. */
static pt_status class_backward_fused(pti_node *n, const pt_tensor *g, const pt_tensor *x,
                                      const pt_tensor *tg, const pt_tensor *w, pt_tensor **grad_in)
{
    pt_cross_entropy_opts o = {.weight = w,
                               .has_ignore_index = true,
                               .ignore_index = n->i[CL_IGNORE],
                               .label_smoothing = n->d[CL_SMOOTH],
                               .reduction = (pt_reduction)n->i[CL_RED]};
    if (pti_node_needs_grad(n, 0)) {
        if (n->i[CL_CE]) {
            grad_in[0] = pt_cross_entropy_backward(g, x, tg, &o);
        } else {
            pt_nll_loss_opts no = {w, true, o.ignore_index, o.reduction};
            grad_in[0] = pt_nll_loss_backward(g, x, tg, &no);
        }
        if (!grad_in[0])
            return pt_last_status();
    }
    return PT_OK;
}

static pt_status class_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    tmp_list l = {.n = 0};
    pt_tensor *x = keep(&l, pti_node_saved(n, 0));
    pt_tensor *tg = keep(&l, pti_node_saved(n, 1));
    pt_tensor *w = n->i[CL_HAS_W] ? keep(&l, pti_node_saved(n, 2)) : NULL;
    if (!x || !tg || (n->i[CL_HAS_W] && !w)) {
        release_all(&l);
        return pt_last_status();
    }
    pt_status st = PT_OK;
    if (!pt_grad_enabled() && x->storage->device.type == PT_DEVICE_CPU) {
        st = class_backward_fused(n, grad_out[0], x, tg, w, grad_in);
        if (st != PT_OK || !pti_node_needs_grad(n, 1) || !n->i[CL_PROB]) {
            release_all(&l);
            return st;
        }
    }
    int cdim = x->ndim == 1 ? 0 : 1;
    pt_tensor *wv = w ? class_view(&l, w, x, cdim) : NULL;
    pt_tensor *denom = NULL;
    pt_tensor *q = class_coeffs(&l, n, x, tg, wv, cdim, &denom);
    /* the scale of each sample's loss: grad_out, over the 'mean' divisor */
    pt_tensor *g = grad_out[0];
    pt_reduction red = (pt_reduction)n->i[CL_RED];
    if (red == PT_REDUCTION_NONE && x->ndim >= 2)
        g = keep(&l, pt_unsqueeze(g, cdim));
    else if (red == PT_REDUCTION_MEAN && n->i[CL_PROB])
        g = keep(&l, pt_div_scalar(g, (double)(x->numel / x->shape[cdim])));
    else if (red == PT_REDUCTION_MEAN)
        g = keep(&l, pt_div(g, denom));
    if (pti_node_needs_grad(n, 0) && !grad_in[0]) {
        pt_tensor *gx;
        if (n->i[CL_CE]) {
            /* d/dx of -sum_c Q_c log_softmax_c = softmax * sum_c Q_c - Q */
            pt_tensor *sm = keep(&l, pt_softmax(x, cdim));
            int64_t dims[1] = {cdim};
            pt_tensor *qs = keep(&l, pt_sum_dim(q, 1, dims, true));
            gx = keep(&l, pt_sub(keep(&l, pt_mul(sm, qs)), q));
        } else {
            gx = keep(&l, pt_neg(q));
        }
        grad_in[0] = shape_like(&l, keep(&l, pt_mul(gx, g)), x);
        if (!grad_in[0])
            st = pt_last_status();
    }
    if (st == PT_OK && pti_node_needs_grad(n, 1) && n->i[CL_PROB]) {
        /* -(1 - eps) * weight * log_softmax */
        pt_tensor *ls = keep(&l, pt_log_softmax(x, cdim));
        pt_tensor *gt = keep(&l, pt_mul_scalar(ls, -(1 - n->d[CL_SMOOTH])));
        if (wv)
            gt = keep(&l, pt_mul(gt, wv));
        grad_in[1] = shape_like(&l, keep(&l, pt_mul(gt, g)), tg);
        if (!grad_in[1])
            st = pt_last_status();
    }
    release_all(&l);
    return st;
}

pt_tensor *pti_loss_record_class(bool cross_entropy, const pt_tensor *input,
                                 const pt_tensor *target, const pt_tensor *weight,
                                 const pti_class_loss_params *p, pt_tensor *out)
{
    const pt_tensor *ins[2] = {input, target};
    if (out)
        out = refuse_weight_grad(cross_entropy ? "cross_entropy" : "nll_loss", weight, NULL, out);
    if (!out || !pti_grad_recording(2, ins))
        return out;
    pti_node *n =
        pti_node_new(cross_entropy ? "cross_entropy" : "nll_loss", class_backward, 2, ins);
    if (!n) {
        pt_release(out);
        return NULL;
    }
    n->i[CL_CE] = cross_entropy;
    n->i[CL_RED] = p->reduction;
    n->i[CL_PROB] = p->prob_target;
    n->i[CL_IGNORE] = p->ignore_index;
    n->i[CL_HAS_W] = weight != NULL;
    n->d[CL_SMOOTH] = p->label_smoothing;
    bool ok = pti_node_save(n, input) >= 0 && pti_node_save(n, target) >= 0 &&
              (!weight || pti_node_save(n, weight) >= 0);
    if (!ok) {
        pti_node_release(n);
        pt_release(out);
        return NULL;
    }
    if (pti_node_finish(n, 1, &out) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}
