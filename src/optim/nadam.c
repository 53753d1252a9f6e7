/* torch.optim.NAdam (1.13 single-tensor math; 1.13 has no maximize option), fused kernel
 * (optim_nadam) + generic fallback:
 *
 *   t += 1;  g += weight_decay * p
 *   mu = beta1 (1 - 0.5 * 0.96^(t md));  mu' = beta1 (1 - 0.5 * 0.96^((t + 1) md))
 *   mu_product *= mu   (a float32 scalar tensor in torch, rounded as such here)
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g
 *   denom = sqrt(v / (1 - beta2^t)) + eps
 *   p -= lr (1 - mu) / (1 - mu_product) * g / denom
 *   p -= lr mu' / (1 - mu_product mu mu') * m / denom */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_EXP_AVG, BUF_EXP_AVG_SQ };
enum { SCALAR_MU_PRODUCT };

static const pti_hparam nadam_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_nadam_opts, lr)},
    {"betas", PTI_HP_PAIR, offsetof(pt_nadam_opts, betas)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_nadam_opts, eps)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_nadam_opts, weight_decay)},
    {"momentum_decay", PTI_HP_FLOAT, offsetof(pt_nadam_opts, momentum_decay)},
    {"foreach", PTI_HP_NONE, 0},
};

static const pti_state_entry nadam_state[] = {
    {"step", PTI_ST_STEP_TENSOR, 0},
    {"mu_product", PTI_ST_SCALAR, SCALAR_MU_PRODUCT},
    {"exp_avg", PTI_ST_BUF, BUF_EXP_AVG},
    {"exp_avg_sq", PTI_ST_BUF, BUF_EXP_AVG_SQ},
};

static pt_status nadam_check(const char *op, const void *opts)
{
    const pt_nadam_opts *o = opts;
    pt_status st = pti_optim_check_adam_like(op, o->lr, o->eps, o->betas, o->weight_decay);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "momentum_decay value", o->momentum_decay);
    return st;
}

static pt_status nadam_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o, (void)opts;
    s->scalar[SCALAR_MU_PRODUCT] = 1.0;
    return pti_optim_init_zero_bufs(p, 2, s);
}

static pt_status nadam_generic(const pt_nadam_opts *o, pt_tensor *p, const pt_tensor *g,
                               pt_tensor *m, pt_tensor *v, double bc2, double coef_g, double coef_m)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, false, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_tensor *denom = NULL;
    pt_status st = pti_optim_ema_(m, d, o->betas[0]);
    if (st == PT_OK)
        st = pti_optim_ema_sq_(v, d, o->betas[1]);
    if (st == PT_OK && !(denom = pt_div_scalar(v, bc2)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_sqrt_(denom);
    if (st == PT_OK)
        st = pt_add_scalar_(denom, o->eps);
    if (st == PT_OK)
        st = pti_optim_assign(p, pt_addcdiv(p, d, denom, coef_g));
    if (st == PT_OK)
        st = pti_optim_assign(p, pt_addcdiv(p, m, denom, coef_m));
    pt_release(denom);
    pt_release(d);
    return st;
}

static pt_status nadam_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                              pti_param_state *s)
{
    (void)opt;
    const pt_nadam_opts *o = opts;
    s->step += 1.0;
    double t = s->step, b1 = o->betas[0];
    double bc2 = 1.0 - pow(o->betas[1], t);
    double mu = b1 * (1.0 - 0.5 * pow(0.96, t * o->momentum_decay));
    double mu_next = b1 * (1.0 - 0.5 * pow(0.96, (t + 1.0) * o->momentum_decay));
    /* torch keeps mu_product in a float32 tensor: each product rounds to float; the next
     * product is a Python float, mu_product.item() * mu_next (mu enters it once, not twice) */
    float mu_product = (float)s->scalar[SCALAR_MU_PRODUCT] * (float)mu;
    double mu_product_next = (double)mu_product * mu_next;
    s->scalar[SCALAR_MU_PRODUCT] = mu_product;
    double coef_g = -o->lr * (1.0 - mu) / (1.0 - (double)mu_product);
    double coef_m = -o->lr * mu_next / (1.0 - (double)mu_product_next);
    pt_tensor *m = s->buf[BUF_EXP_AVG], *v = s->buf[BUF_EXP_AVG_SQ];
    if (!pti_optim_kernel_applies(PTI_OP_optim_nadam, p, g, 2, s->buf))
        return nadam_generic(o, p, g, m, v, bc2, coef_g, coef_m);
    pti_optim_nadam_params hp = {
        .wd = (float)o->weight_decay,
        .b1 = (float)b1,
        .one_b1 = (float)(1.0 - b1),
        .b2 = (float)o->betas[1],
        .one_b2 = (float)(1.0 - o->betas[1]),
        .bc2 = (float)bc2,
        .eps = (float)o->eps,
        .coef_g = (float)coef_g,
        .coef_m = (float)coef_m,
        .has_wd = o->weight_decay != 0.0,
    };
    return pti_optim_kernel(PTI_OP_optim_nadam, p, g, 2, s->buf, &hp);
}

static const pti_optim_def nadam_def = {
    .name = "NAdam",
    .opts_size = sizeof(pt_nadam_opts),
    .n_hparams = (int)(sizeof(nadam_hparams) / sizeof(nadam_hparams[0])),
    .hparams = nadam_hparams,
    .n_state = (int)(sizeof(nadam_state) / sizeof(nadam_state[0])),
    .state = nadam_state,
    .check_opts = nadam_check,
    .init_state = nadam_init,
    .update = nadam_update,
};

pt_optim *pt_optim_nadam(pt_module *m, pt_nadam_opts o)
{
    return pti_optim_new_module(&nadam_def, "pt_optim_nadam", m, &o);
}

pt_optim *pt_optim_nadam_params(int n, pt_tensor *const *params, pt_nadam_opts o)
{
    return pti_optim_new(&nadam_def, "pt_optim_nadam", n, params, &o);
}
