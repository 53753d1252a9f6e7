/* Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms") as the reference
 * implementation lucidrains/lion-pytorch (not in torch.optim), fused kernel (optim_lion) +
 * generic fallback:
 *
 *   p *= 1 - lr * weight_decay
 *   p -= lr * sign(beta1 * m + (1 - beta1) * g)
 *   m = beta2 * m + (1 - beta2) * g */
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_EXP_AVG };

static const pti_hparam lion_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_lion_opts, lr)},
    {"betas", PTI_HP_PAIR, offsetof(pt_lion_opts, betas)},
    {"weight_decay", PTI_HP_FLOAT, offsetof(pt_lion_opts, weight_decay)},
};

static const pti_state_entry lion_state[] = {
    {"exp_avg", PTI_ST_BUF, BUF_EXP_AVG},
};

static pt_status lion_check(const char *op, const void *opts)
{
    const pt_lion_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK)
        st = pti_optim_check_betas(op, o->betas);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    return st;
}

static pt_status lion_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o, (void)opts;
    return pti_optim_init_zero_bufs(p, 1, s);
}

static pt_status lion_generic(const pt_lion_opts *o, pt_tensor *p, const pt_tensor *g, pt_tensor *m)
{
    pt_status st = pt_mul_scalar_(p, 1.0 - o->lr * o->weight_decay);
    pt_tensor *u = st == PT_OK ? pt_mul_scalar(m, o->betas[0]) : NULL;
    if (st == PT_OK && !u)
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_add_alpha_(u, g, 1.0 - o->betas[0]);
    if (st == PT_OK)
        st = pt_sign_(u);
    if (st == PT_OK)
        st = pt_add_alpha_(p, u, -o->lr);
    if (st == PT_OK)
        st = pt_mul_scalar_(m, o->betas[1]);
    if (st == PT_OK)
        st = pt_add_alpha_(m, g, 1.0 - o->betas[1]);
    pt_release(u);
    return st;
}

static pt_status lion_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                             pti_param_state *s)
{
    (void)opt;
    const pt_lion_opts *o = opts;
    if (!pti_optim_kernel_applies(PTI_OP_optim_lion, p, g, 1, s->buf))
        return lion_generic(o, p, g, s->buf[BUF_EXP_AVG]);
    pti_optim_lion_params hp = {
        .decay = (float)(1.0 - o->lr * o->weight_decay),
        .neg_lr = (float)-o->lr,
        .b1 = (float)o->betas[0],
        .one_b1 = (float)(1.0 - o->betas[0]),
        .b2 = (float)o->betas[1],
        .one_b2 = (float)(1.0 - o->betas[1]),
    };
    return pti_optim_kernel(PTI_OP_optim_lion, p, g, 1, s->buf, &hp);
}

static const pti_optim_def lion_def = {
    .name = "Lion",
    .opts_size = sizeof(pt_lion_opts),
    .n_hparams = (int)(sizeof(lion_hparams) / sizeof(lion_hparams[0])),
    .hparams = lion_hparams,
    .n_state = (int)(sizeof(lion_state) / sizeof(lion_state[0])),
    .state = lion_state,
    .check_opts = lion_check,
    .init_state = lion_init,
    .update = lion_update,
};

pt_optim *pt_optim_lion(pt_module *m, pt_lion_opts o)
{
    return pti_optim_new_module(&lion_def, "pt_optim_lion", m, &o);
}

pt_optim *pt_optim_lion_params(int n, pt_tensor *const *params, pt_lion_opts o)
{
    return pti_optim_new(&lion_def, "pt_optim_lion", n, params, &o);
}
