/* torch.optim.Adagrad (1.13 single-tensor math, dense gradients), fused kernel (optim_adagrad) +
 * generic fallback. State (step 0, sum = initial_accumulator_value) exists from construction:
 *
 *   t += 1;  g = maximize ? -g : g;  g += weight_decay * p
 *   clr = lr / (1 + (t - 1) * lr_decay)
 *   sum += g * g;  p -= clr * g / (sqrt(sum) + eps) */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

static const pti_hparam adagrad_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_adagrad_opts, lr)},
    {"lr_decay", PTI_HP_NUMBER, offsetof(pt_adagrad_opts, lr_decay)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_adagrad_opts, eps)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_adagrad_opts, weight_decay)},
    {"initial_accumulator_value", PTI_HP_NUMBER,
     offsetof(pt_adagrad_opts, initial_accumulator_value)},
    {"foreach", PTI_HP_NONE, 0},
    {"maximize", PTI_HP_BOOL, offsetof(pt_adagrad_opts, maximize)},
};

static const pti_state_entry adagrad_state[] = {
    {"step", PTI_ST_STEP_TENSOR, 0},
    {"sum", PTI_ST_BUF, 0},
};

static pt_status adagrad_check(const char *op, const void *opts)
{
    const pt_adagrad_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "lr_decay value", o->lr_decay);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "initial_accumulator_value value",
                                    o->initial_accumulator_value);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "epsilon value", o->eps);
    return st;
}

static pt_status adagrad_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o;
    s->step = 0.0;
    s->buf[0] = pti_optim_state_full(p, ((const pt_adagrad_opts *)opts)->initial_accumulator_value);
    return s->buf[0] ? PT_OK : pt_last_status();
}

static pt_status adagrad_generic(const pt_adagrad_opts *o, pt_tensor *p, const pt_tensor *g,
                                 pt_tensor *sum, double clr)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_tensor *std = NULL;
    pt_status st = pti_optim_assign(sum, pt_addcmul(sum, d, d, 1.0));
    if (st == PT_OK && !(std = pt_sqrt(sum)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_add_scalar_(std, o->eps);
    if (st == PT_OK)
        st = pti_optim_assign(p, pt_addcdiv(p, d, std, -clr));
    pt_release(std);
    pt_release(d);
    return st;
}

static pt_status adagrad_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                                pti_param_state *s)
{
    (void)opt;
    const pt_adagrad_opts *o = opts;
    s->step += 1.0;
    double clr = o->lr / (1.0 + (s->step - 1.0) * o->lr_decay);
    if (!pti_optim_kernel_applies(PTI_OP_optim_adagrad, p, g, 1, &s->buf[0]))
        return adagrad_generic(o, p, g, s->buf[0], clr);
    pti_optim_adagrad_params hp = {
        .wd = (float)o->weight_decay,
        .eps = (float)o->eps,
        .neg_clr = (float)-clr,
        .maximize = o->maximize,
        .has_wd = o->weight_decay != 0.0,
    };
    return pti_optim_kernel(PTI_OP_optim_adagrad, p, g, 1, &s->buf[0], &hp);
}

static const pti_optim_def adagrad_def = {
    .name = "Adagrad",
    .opts_size = sizeof(pt_adagrad_opts),
    .n_hparams = (int)(sizeof(adagrad_hparams) / sizeof(adagrad_hparams[0])),
    .hparams = adagrad_hparams,
    .n_state = (int)(sizeof(adagrad_state) / sizeof(adagrad_state[0])),
    .state = adagrad_state,
    .check_opts = adagrad_check,
    .eager_state = true,
    .init_state = adagrad_init,
    .update = adagrad_update,
};

pt_optim *pt_optim_adagrad(pt_module *m, pt_adagrad_opts o)
{
    return pti_optim_new_module(&adagrad_def, "pt_optim_adagrad", m, &o);
}

pt_optim *pt_optim_adagrad_params(int n, pt_tensor *const *params, pt_adagrad_opts o)
{
    return pti_optim_new(&adagrad_def, "pt_optim_adagrad", n, params, &o);
}
