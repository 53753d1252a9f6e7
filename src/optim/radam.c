/* torch.optim.RAdam (1.13 single-tensor math), fused kernel (optim_radam) +
 * generic fallback:
 *
 *   t += 1;  g += weight_decay * p  (decoupled_weight_decay: p *= 1 - lr * weight_decay)
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g
 *   rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
 *   rho_t > 5: p -= m / (1 - beta1^t) * lr * sqrt(1 - beta2^t) / (sqrt(v) + eps) * rect
 *              rect = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
 *   else:      p -= m / (1 - beta1^t) * lr */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_EXP_AVG, BUF_EXP_AVG_SQ };

static const pti_hparam radam_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_radam_opts, lr)},
    {"betas", PTI_HP_PAIR, offsetof(pt_radam_opts, betas)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_radam_opts, eps)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_radam_opts, weight_decay)},
    {"foreach", PTI_HP_NONE, 0},
    {"decoupled_weight_decay", PTI_HP_BOOL, offsetof(pt_radam_opts, decoupled_weight_decay)},
};

static const pti_state_entry radam_state[] = {
    {"step", PTI_ST_STEP_TENSOR, 0},
    {"exp_avg", PTI_ST_BUF, BUF_EXP_AVG},
    {"exp_avg_sq", PTI_ST_BUF, BUF_EXP_AVG_SQ},
};

static pt_status radam_check(const char *op, const void *opts)
{
    const pt_radam_opts *o = opts;
    return pti_optim_check_adam_like(op, o->lr, o->eps, o->betas, o->weight_decay);
}

static pt_status radam_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o, (void)opts;
    return pti_optim_init_zero_bufs(p, 2, s);
}

/* ---- generic path --------------------------------------------------------------------------- */

static pt_status radam_generic(const pt_radam_opts *o, pt_tensor *p, const pt_tensor *g,
                               pti_param_state *s, double bc1, double bc2, double rect,
                               bool rectify)
{
    pt_tensor *m = s->buf[BUF_EXP_AVG], *v = s->buf[BUF_EXP_AVG_SQ];
    bool decoupled = o->decoupled_weight_decay && o->weight_decay != 0.0;
    if (decoupled && pt_mul_scalar_(p, 1.0 - o->lr * o->weight_decay) != PT_OK)
        return pt_last_status();
    pt_tensor *d = pti_optim_generic_grad(p, g, false, decoupled ? 0.0 : o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_tensor *u = NULL, *denom = NULL;
    pt_status st = pti_optim_ema_(m, d, o->betas[0]);
    if (st == PT_OK)
        st = pti_optim_ema_sq_(v, d, o->betas[1]);
    if (st == PT_OK && !(u = pt_div_scalar(m, bc1)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_mul_scalar_(u, o->lr);
    if (st == PT_OK && rectify) {
        denom = pt_sqrt(v);
        st = denom ? pt_add_scalar_(denom, o->eps) : pt_last_status();
        if (st == PT_OK)
            st = pti_optim_assign(u, pt_div(u, denom)); /* u * (sqrt(bc2) / denom) */
        if (st == PT_OK)
            st = pt_mul_scalar_(u, sqrt(bc2) * rect);
    }
    if (st == PT_OK)
        st = pt_sub_(p, u);
    pt_release(denom);
    pt_release(u);
    pt_release(d);
    return st;
}

static pt_status radam_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                              pti_param_state *s)
{
    (void)opt;
    const pt_radam_opts *o = opts;
    s->step += 1.0;
    double t = s->step, b1 = o->betas[0], b2 = o->betas[1];
    double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    double rho_inf = 2.0 / (1.0 - b2) - 1.0;
    double rho_t = rho_inf - 2.0 * t * pow(b2, t) / bc2;
    bool rectify = rho_t > 5.0;
    double rect = rectify ? sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf /
                                 ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
                          : 1.0;
    if (!pti_optim_kernel_applies(PTI_OP_optim_radam, p, g, 2, s->buf))
        return radam_generic(o, p, g, s, bc1, bc2, rect, rectify);
    pti_optim_radam_params hp = {
        .wd = (float)o->weight_decay,
        .b1 = (float)b1,
        .one_b1 = (float)(1.0 - b1),
        .b2 = (float)b2,
        .one_b2 = (float)(1.0 - b2),
        .bc1 = (float)bc1,
        .lr = (float)o->lr,
        .bc2_sqrt = (float)sqrt(bc2),
        .eps = (float)o->eps,
        .rect = (float)rect,
        .decay = o->decoupled_weight_decay ? (float)(1.0 - o->lr * o->weight_decay) : 1.0f,
        .has_wd = o->weight_decay != 0.0 && !o->decoupled_weight_decay,
        .rectify = rectify,
    };
    return pti_optim_kernel(PTI_OP_optim_radam, p, g, 2, s->buf, &hp);
}

static const pti_optim_def radam_def = {
    .name = "RAdam",
    .opts_size = sizeof(pt_radam_opts),
    .n_hparams = (int)(sizeof(radam_hparams) / sizeof(radam_hparams[0])),
    .hparams = radam_hparams,
    .n_state = (int)(sizeof(radam_state) / sizeof(radam_state[0])),
    .state = radam_state,
    .check_opts = radam_check,
    .init_state = radam_init,
    .update = radam_update,
};

pt_optim *pt_optim_radam(pt_module *m, pt_radam_opts o)
{
    return pti_optim_new_module(&radam_def, "pt_optim_radam", m, &o);
}

pt_optim *pt_optim_radam_params(int n, pt_tensor *const *params, pt_radam_opts o)
{
    return pti_optim_new(&radam_def, "pt_optim_radam", n, params, &o);
}
