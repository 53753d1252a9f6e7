/* LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning") as timm's
 * timm/optim/lamb.py `Lamb` (not in torch.optim). Whole-step algorithm (it needs the global
 * gradient norm first):
 *
 *   clip = |all grads| > max_grad_norm ? |all grads| / max_grad_norm : 1;  g /= clip (in place)
 *   per group: step += 1 (group key "step");  bc1, bc2 = 1 - beta^step (or 1, 1)
 *   m = beta1 m + beta3 g  (beta3 = grad_averaging ? 1 - beta1 : 1);  v = beta2 v + (1-beta2) g g
 *   u = (m / bc1) / (sqrt(v) / sqrt(bc2) + eps) + weight_decay * p
 *   if weight_decay != 0 or always_adapt: u *= trust = |p| > 0 && |u| > 0 ? |p| / |u| : 1
 *                                          (trust_clip: min(trust, 1))
 *   p -= lr * u
 * The fused float32 kernel (optim_lamb, src/backends/<device>/optim*.c) makes two passes
 * (moments + norms, then the update) and computes the norms in double; the generic path uses
 * public ops. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "optim_internal.h"

enum { BUF_EXP_AVG, BUF_EXP_AVG_SQ };

static const pti_hparam lamb_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_lamb_opts, lr)},
    {"bias_correction", PTI_HP_BOOL, offsetof(pt_lamb_opts, bias_correction)},
    {"betas", PTI_HP_PAIR, offsetof(pt_lamb_opts, betas)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_lamb_opts, eps)},
    {"weight_decay", PTI_HP_FLOAT, offsetof(pt_lamb_opts, weight_decay)},
    {"grad_averaging", PTI_HP_BOOL, offsetof(pt_lamb_opts, grad_averaging)},
    {"max_grad_norm", PTI_HP_OPT_FLOAT, offsetof(pt_lamb_opts, max_grad_norm)},
    {"trust_clip", PTI_HP_BOOL, offsetof(pt_lamb_opts, trust_clip)},
    {"always_adapt", PTI_HP_BOOL, offsetof(pt_lamb_opts, always_adapt)},
};

static const pti_state_entry lamb_state[] = {
    {"exp_avg", PTI_ST_BUF, BUF_EXP_AVG},
    {"exp_avg_sq", PTI_ST_BUF, BUF_EXP_AVG_SQ},
};

static pt_status lamb_check(const char *op, const void *opts)
{
    const pt_lamb_opts *o = opts;
    pt_status st = pti_optim_check_adam_like(op, o->lr, o->eps, o->betas, o->weight_decay);
    if (st == PT_OK && !isnan(o->max_grad_norm) && !(o->max_grad_norm > 0.0))
        st = pti_error(PT_ERR_INVALID_ARG, "%s: Invalid max_grad_norm: %g", op, o->max_grad_norm);
    return st;
}

static pt_status lamb_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o, (void)opts;
    return pti_optim_init_zero_bufs(p, 2, s);
}

/* The per-step constants of one group (also the fused kernel's parameters). */
typedef pti_optim_lamb_params lamb_args;

static double trust_ratio(const lamb_args *a, double w_norm, double u_norm)
{
    double r = w_norm > 0.0 ? (u_norm > 0.0 ? w_norm / u_norm : 1.0) : 1.0;
    return a->trust_clip && r > 1.0 ? 1.0 : r;
}

/* ---- generic path --------------------------------------------------------------------------- */

static pt_status norm_of(const pt_tensor *t, double *out)
{
    pt_tensor *n = pt_norm(t, 2.0, 0, NULL, false);
    if (!n)
        return pt_last_status();
    *out = pt_item(n);
    pt_release(n);
    return PT_OK;
}

static pt_status lamb_generic(const lamb_args *a, pt_tensor *p, const pt_tensor *g,
                              pti_param_state *s)
{
    pt_tensor *m = s->buf[BUF_EXP_AVG], *v = s->buf[BUF_EXP_AVG_SQ];
    pt_tensor *denom = NULL, *u = NULL;
    pt_status st = pt_mul_scalar_(m, a->b1);
    if (st == PT_OK)
        st = pt_add_alpha_(m, g, a->b3);
    if (st == PT_OK)
        st = pti_optim_ema_sq_(v, g, a->b2);
    if (st == PT_OK && !(denom = pt_sqrt(v)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_div_scalar_(denom, a->bc2_sqrt);
    if (st == PT_OK)
        st = pt_add_scalar_(denom, a->eps);
    if (st == PT_OK && !(u = pt_div_scalar(m, a->bc1)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_div_(u, denom);
    if (st == PT_OK && a->wd != 0.0)
        st = pt_add_alpha_(u, p, a->wd);
    if (st == PT_OK && a->adapt) {
        double wn = 0.0, un = 0.0;
        st = norm_of(p, &wn);
        if (st == PT_OK)
            st = norm_of(u, &un);
        if (st == PT_OK)
            st = pt_mul_scalar_(u, trust_ratio(a, wn, un));
    }
    if (st == PT_OK)
        st = pt_add_alpha_(p, u, -a->lr);
    pt_release(u);
    pt_release(denom);
    return st;
}

/* ---- the step ------------------------------------------------------------------------------- */

/* The clip divisor from the global norm of every gradient. */
static pt_status global_clip(pt_optim *o, double *clip)
{
    double max_norm = ((const pt_lamb_opts *)o->defaults)->max_grad_norm;
    *clip = 1.0;
    if (isnan(max_norm))
        return PT_OK;
    double sum = 0.0;
    for (int gi = 0; gi < o->n_groups; gi++)
        for (int i = 0; i < o->groups[gi].n; i++) {
            const pt_tensor *g = o->groups[gi].params[i]->grad;
            if (!g)
                continue;
            double n = 0.0;
            if (pti_optim_kernel_applies(PTI_OP_optim_sum_sq, g, g, 0, NULL)) {
                if (pti_optim_sum_sq(g, &n) != PT_OK)
                    return pt_last_status();
                sum += n;
                continue;
            }
            if (norm_of(g, &n) != PT_OK)
                return pt_last_status();
            sum += n * n;
        }
    double norm = sqrt(sum);
    if (norm > max_norm)
        *clip = norm / max_norm;
    return PT_OK;
}

/* group["step"] += 1, kept as an int extra key of the group (as timm stores it). */
static pt_status bump_group_step(pt_optim *o, int gi, double *step)
{
    pti_optim_group *g = &o->groups[gi];
    double v = 0.0;
    if (pt_optim_has_option(o, gi, "step") && pt_optim_get_option(o, gi, "step", 0, &v) != PT_OK)
        return pt_last_status();
    *step = v + 1.0;
    pt_status st = pt_optim_set_option(o, gi, "step", 0, *step);
    for (int k = 0; k < g->n_extra && st == PT_OK; k++)
        if (strcmp(g->extra[k].name, "step") == 0)
            g->extra[k].is_int = true;
    return st;
}

static pt_status lamb_group(pt_optim *o, int gi, double clip)
{
    pti_optim_group *grp = &o->groups[gi];
    const pt_lamb_opts *op = grp->opts;
    double t = 0.0;
    pt_status st = bump_group_step(o, gi, &t);
    if (st != PT_OK)
        return st;
    lamb_args a = {
        .lr = op->lr,
        .b1 = op->betas[0],
        .b2 = op->betas[1],
        .b3 = op->grad_averaging ? 1.0 - op->betas[0] : 1.0,
        .bc1 = op->bias_correction ? 1.0 - pow(op->betas[0], t) : 1.0,
        .bc2_sqrt = op->bias_correction ? sqrt(1.0 - pow(op->betas[1], t)) : 1.0,
        .eps = op->eps,
        .wd = op->weight_decay,
        .adapt = op->weight_decay != 0.0 || op->always_adapt,
        .trust_clip = op->trust_clip,
    };
    for (int i = 0; i < grp->n && st == PT_OK; i++) {
        pt_tensor *p = grp->params[i];
        pt_tensor *g = p->grad;
        pti_param_state *s = &grp->state[i];
        if (!g)
            continue;
        if (clip != 1.0 && (st = pt_div_scalar_(g, clip)) != PT_OK)
            break;
        if (!s->initialized) {
            if ((st = lamb_init(o, op, p, s)) != PT_OK)
                break;
            s->initialized = true;
        }
        if (pti_optim_kernel_applies(PTI_OP_optim_lamb, p, g, 2, s->buf))
            st = pti_optim_kernel(PTI_OP_optim_lamb, p, g, 2, s->buf, &a);
        else
            st = lamb_generic(&a, p, g, s);
        pti_bump_version(p);
    }
    return st;
}

static pt_status lamb_step(pt_optim *o, double (*closure)(void *user), void *user, double *loss)
{
    if (closure) {
        bool prev = pt_set_grad_enabled(true);
        double l = closure(user);
        pt_set_grad_enabled(prev);
        if (isnan(l))
            return pt_last_status() != PT_OK
                       ? pt_last_status()
                       : pti_error(PT_ERR_RUNTIME, "pt_optim_step_closure: the closure "
                                                   "reported an error");
        if (loss)
            *loss = l;
    }
    pt_no_grad_begin();
    double clip = 1.0;
    pt_status st = global_clip(o, &clip);
    for (int gi = 0; gi < o->n_groups && st == PT_OK; gi++)
        st = lamb_group(o, gi, clip);
    pt_no_grad_end();
    return st;
}

static const pti_optim_def lamb_def = {
    .name = "Lamb",
    .opts_size = sizeof(pt_lamb_opts),
    .n_hparams = (int)(sizeof(lamb_hparams) / sizeof(lamb_hparams[0])),
    .hparams = lamb_hparams,
    .n_state = (int)(sizeof(lamb_state) / sizeof(lamb_state[0])),
    .state = lamb_state,
    .check_opts = lamb_check,
    .init_state = lamb_init,
    .step = lamb_step,
};

pt_optim *pt_optim_lamb(pt_module *m, pt_lamb_opts o)
{
    return pti_optim_new_module(&lamb_def, "pt_optim_lamb", m, &o);
}

pt_optim *pt_optim_lamb_params(int n, pt_tensor *const *params, pt_lamb_opts o)
{
    return pti_optim_new(&lamb_def, "pt_optim_lamb", n, params, &o);
}
