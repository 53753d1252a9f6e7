/* torch.optim.Adamax (1.13 single-tensor math), fused kernel (optim_adamax) +
 * generic fallback:
 *
 *   t += 1;  g = maximize ? -g : g;  g += weight_decay * p
 *   m = beta1 * m + (1 - beta1) * g
 *   u = max(beta2 * u, |g| + eps)            (NaN propagates, as torch.amax)
 *   p -= lr / (1 - beta1^t) * m / u */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_EXP_AVG, BUF_EXP_INF };

static const pti_hparam adamax_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_adamax_opts, lr)},
    {"betas", PTI_HP_PAIR, offsetof(pt_adamax_opts, betas)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_adamax_opts, eps)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_adamax_opts, weight_decay)},
    {"foreach", PTI_HP_NONE, 0},
    {"maximize", PTI_HP_BOOL, offsetof(pt_adamax_opts, maximize)},
};

static const pti_state_entry adamax_state[] = {
    {"step", PTI_ST_STEP_TENSOR, 0},
    {"exp_avg", PTI_ST_BUF, BUF_EXP_AVG},
    {"exp_inf", PTI_ST_BUF, BUF_EXP_INF},
};

static pt_status adamax_check(const char *op, const void *opts)
{
    const pt_adamax_opts *o = opts;
    return pti_optim_check_adam_like(op, o->lr, o->eps, o->betas, o->weight_decay);
}

static pt_status adamax_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o, (void)opts;
    return pti_optim_init_zero_bufs(p, 2, s);
}

static pt_status adamax_generic(const pt_adamax_opts *o, pt_tensor *p, const pt_tensor *g,
                                pt_tensor *m, pt_tensor *u, double clr)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_tensor *absg = NULL;
    pt_status st = pti_optim_ema_(m, d, o->betas[0]);
    if (st == PT_OK)
        st = pt_mul_scalar_(u, o->betas[1]);
    if (st == PT_OK && !(absg = pt_abs(d)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_add_scalar_(absg, o->eps);
    if (st == PT_OK)
        st = pti_optim_assign(u, pt_maximum(u, absg));
    if (st == PT_OK)
        st = pti_optim_assign(p, pt_addcdiv(p, m, u, -clr));
    pt_release(absg);
    pt_release(d);
    return st;
}

static pt_status adamax_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                               pti_param_state *s)
{
    (void)opt;
    const pt_adamax_opts *o = opts;
    s->step += 1.0;
    double clr = o->lr / (1.0 - pow(o->betas[0], s->step));
    pt_tensor *m = s->buf[BUF_EXP_AVG], *u = s->buf[BUF_EXP_INF];
    if (!pti_optim_kernel_applies(PTI_OP_optim_adamax, p, g, 2, s->buf))
        return adamax_generic(o, p, g, m, u, clr);
    pti_optim_adamax_params hp = {
        .wd = (float)o->weight_decay,
        .b1 = (float)o->betas[0],
        .one_b1 = (float)(1.0 - o->betas[0]),
        .b2 = (float)o->betas[1],
        .eps = (float)o->eps,
        .neg_clr = (float)-clr,
        .maximize = o->maximize,
        .has_wd = o->weight_decay != 0.0,
    };
    return pti_optim_kernel(PTI_OP_optim_adamax, p, g, 2, s->buf, &hp);
}

static const pti_optim_def adamax_def = {
    .name = "Adamax",
    .opts_size = sizeof(pt_adamax_opts),
    .n_hparams = (int)(sizeof(adamax_hparams) / sizeof(adamax_hparams[0])),
    .hparams = adamax_hparams,
    .n_state = (int)(sizeof(adamax_state) / sizeof(adamax_state[0])),
    .state = adamax_state,
    .check_opts = adamax_check,
    .init_state = adamax_init,
    .update = adamax_update,
};

pt_optim *pt_optim_adamax(pt_module *m, pt_adamax_opts o)
{
    return pti_optim_new_module(&adamax_def, "pt_optim_adamax", m, &o);
}

pt_optim *pt_optim_adamax_params(int n, pt_tensor *const *params, pt_adamax_opts o)
{
    return pti_optim_new(&adamax_def, "pt_optim_adamax", n, params, &o);
}
