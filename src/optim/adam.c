/* torch.optim.Adam and AdamW (1.13 single-tensor math), sharing one fused kernel (optim_adam) and
 * one generic fallback from public ops:
 *
 *   g = maximize ? -g : g;  Adam: g += weight_decay * p;  AdamW: p *= 1 - lr * weight_decay
 *   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g * g
 *   amsgrad: vmax = max(vmax, v), used in place of v below
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps) */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_EXP_AVG, BUF_EXP_AVG_SQ, BUF_MAX_EXP_AVG_SQ };

static const pti_hparam adam_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_adam_opts, lr)},
    {"betas", PTI_HP_PAIR, offsetof(pt_adam_opts, betas)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_adam_opts, eps)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_adam_opts, weight_decay)},
    {"amsgrad", PTI_HP_BOOL, offsetof(pt_adam_opts, amsgrad)},
    {"maximize", PTI_HP_BOOL, offsetof(pt_adam_opts, maximize)},
    {"foreach", PTI_HP_NONE, 0},
    {"capturable", PTI_HP_FALSE, 0},
    {"differentiable", PTI_HP_FALSE, 0},
    {"fused", PTI_HP_FALSE, 0},
};

static const pti_state_entry adam_state[] = {
    {"step", PTI_ST_STEP_TENSOR, 0},
    {"exp_avg", PTI_ST_BUF, BUF_EXP_AVG},
    {"exp_avg_sq", PTI_ST_BUF, BUF_EXP_AVG_SQ},
    {"max_exp_avg_sq", PTI_ST_BUF, BUF_MAX_EXP_AVG_SQ},
};

/* The fields Adam and AdamW share (their opts structs have the same layout). */
typedef struct adam_args {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize, decoupled;
} adam_args;

static pt_status adam_check(const char *op, const void *opts)
{
    const pt_adam_opts *o = opts;
    return pti_optim_check_adam_like(op, o->lr, o->eps, o->betas, o->weight_decay);
}

static pt_status adam_init_bufs(const pt_tensor *p, bool amsgrad, pti_param_state *s)
{
    return pti_optim_init_zero_bufs(p, amsgrad ? 3 : 2, s); /* max_exp_avg_sq last */
}

static pt_status adam_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o;
    return adam_init_bufs(p, ((const pt_adam_opts *)opts)->amsgrad, s);
}

/* ---- generic path --------------------------------------------------------------------------- */

static pt_status adam_generic(const adam_args *a, pt_tensor *p, const pt_tensor *g,
                              pti_param_state *s, double bc2_sqrt, double step_size)
{
    pt_tensor *m = s->buf[BUF_EXP_AVG], *v = s->buf[BUF_EXP_AVG_SQ];
    pt_tensor *vmax = a->amsgrad ? s->buf[BUF_MAX_EXP_AVG_SQ] : NULL;
    pt_status st = PT_OK;
    if (a->decoupled && a->weight_decay != 0.0)
        st = pt_mul_scalar_(p, 1.0 - a->lr * a->weight_decay);
    if (st != PT_OK)
        return st;
    pt_tensor *d = pti_optim_generic_grad(p, g, a->maximize, a->decoupled ? 0.0 : a->weight_decay);
    if (!d)
        return pt_last_status();
    st = pti_optim_ema_(m, d, a->beta1);
    if (st == PT_OK)
        st = pti_optim_ema_sq_(v, d, a->beta2);
    pt_release(d);
    if (st == PT_OK && vmax)
        st = pti_optim_assign(vmax, pt_maximum(vmax, v));
    if (st != PT_OK)
        return st;
    pt_tensor *denom = pt_sqrt(vmax ? vmax : v);
    if (!denom)
        return pt_last_status();
    st = pt_div_scalar_(denom, bc2_sqrt);
    if (st == PT_OK)
        st = pt_add_scalar_(denom, a->eps);
    if (st == PT_OK)
        st = pti_optim_assign(p, pt_addcdiv(p, m, denom, -step_size));
    pt_release(denom);
    return st;
}

static pt_status adam_run(const adam_args *a, pt_tensor *p, const pt_tensor *g, pti_param_state *s)
{
    s->step += 1.0;
    double bc1 = 1.0 - pow(a->beta1, s->step);
    double bc2 = 1.0 - pow(a->beta2, s->step);
    double step_size = a->lr / bc1;
    double bc2_sqrt = sqrt(bc2);
    pt_tensor *bufs[3] = {s->buf[0], s->buf[1], a->amsgrad ? s->buf[2] : NULL};
    if (a->amsgrad && !bufs[2])
        return pti_error(PT_ERR_INVALID_ARG, "pt_optim_step: amsgrad was turned on after the "
                                             "first step; the state has no max_exp_avg_sq");
    if (!pti_optim_kernel_applies(PTI_OP_optim_adam, p, g, 3, bufs))
        return adam_generic(a, p, g, s, bc2_sqrt, step_size);
    pti_optim_adam_params hp = {
        .wd = (float)a->weight_decay,
        .decay_mul = 1.0f,
        .b1 = (float)a->beta1,
        .one_b1 = (float)(1.0 - a->beta1),
        .b2 = (float)a->beta2,
        .one_b2 = (float)(1.0 - a->beta2),
        .bc2_sqrt = (float)bc2_sqrt,
        .eps = (float)a->eps,
        .neg_step_size = (float)-step_size,
        .maximize = a->maximize,
        .has_wd = !a->decoupled && a->weight_decay != 0.0,
    };
    if (a->decoupled)
        hp.decay_mul = (float)(1.0 - a->lr * a->weight_decay);
    return pti_optim_kernel(PTI_OP_optim_adam, p, g, 3, bufs, &hp);
}

static pt_status adam_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                             pti_param_state *s)
{
    (void)opt;
    const pt_adam_opts *o = opts;
    adam_args a = {o->lr,           o->betas[0], o->betas[1], o->eps,
                   o->weight_decay, o->amsgrad,  o->maximize, false};
    return adam_run(&a, p, g, s);
}

/* max_exp_avg_sq is in torch's state only with amsgrad */
static bool adam_buf_needed(const void *opts, int index)
{
    return index != BUF_MAX_EXP_AVG_SQ || ((const pt_adam_opts *)opts)->amsgrad;
}

static bool adamw_buf_needed(const void *opts, int index)
{
    return index != BUF_MAX_EXP_AVG_SQ || ((const pt_adamw_opts *)opts)->amsgrad;
}

static const pti_optim_def adam_def = {
    .name = "Adam",
    .opts_size = sizeof(pt_adam_opts),
    .n_hparams = (int)(sizeof(adam_hparams) / sizeof(adam_hparams[0])),
    .hparams = adam_hparams,
    .n_state = (int)(sizeof(adam_state) / sizeof(adam_state[0])),
    .state = adam_state,
    .check_opts = adam_check,
    .init_state = adam_init,
    .buf_needed = adam_buf_needed,
    .update = adam_update,
};

pt_optim *pt_optim_adam(pt_module *m, pt_adam_opts o)
{
    return pti_optim_new_module(&adam_def, "pt_optim_adam", m, &o);
}

pt_optim *pt_optim_adam_params(int n, pt_tensor *const *params, pt_adam_opts o)
{
    return pti_optim_new(&adam_def, "pt_optim_adam", n, params, &o);
}

/* ---- AdamW ---------------------------------------------------------------------------------- */

static const pti_hparam adamw_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_adamw_opts, lr)},
    {"betas", PTI_HP_PAIR, offsetof(pt_adamw_opts, betas)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_adamw_opts, eps)},
    {"weight_decay", PTI_HP_FLOAT, offsetof(pt_adamw_opts, weight_decay)},
    {"amsgrad", PTI_HP_BOOL, offsetof(pt_adamw_opts, amsgrad)},
    {"foreach", PTI_HP_NONE, 0},
    {"maximize", PTI_HP_BOOL, offsetof(pt_adamw_opts, maximize)},
    {"capturable", PTI_HP_FALSE, 0},
};

static pt_status adamw_check(const char *op, const void *opts)
{
    const pt_adamw_opts *o = opts;
    return pti_optim_check_adam_like(op, o->lr, o->eps, o->betas, o->weight_decay);
}

static pt_status adamw_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o;
    return adam_init_bufs(p, ((const pt_adamw_opts *)opts)->amsgrad, s);
}

static pt_status adamw_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                              pti_param_state *s)
{
    (void)opt;
    const pt_adamw_opts *o = opts;
    adam_args a = {o->lr,           o->betas[0], o->betas[1], o->eps,
                   o->weight_decay, o->amsgrad,  o->maximize, true};
    return adam_run(&a, p, g, s);
}

static const pti_optim_def adamw_def = {
    .name = "AdamW",
    .opts_size = sizeof(pt_adamw_opts),
    .n_hparams = (int)(sizeof(adamw_hparams) / sizeof(adamw_hparams[0])),
    .hparams = adamw_hparams,
    .n_state = (int)(sizeof(adam_state) / sizeof(adam_state[0])),
    .state = adam_state,
    .check_opts = adamw_check,
    .init_state = adamw_init,
    .buf_needed = adamw_buf_needed,
    .update = adamw_update,
};

pt_optim *pt_optim_adamw(pt_module *m, pt_adamw_opts o)
{
    return pti_optim_new_module(&adamw_def, "pt_optim_adamw", m, &o);
}

pt_optim *pt_optim_adamw_params(int n, pt_tensor *const *params, pt_adamw_opts o)
{
    return pti_optim_new(&adamw_def, "pt_optim_adamw", n, params, &o);
}
