/* torch.optim.Adadelta (1.13 single-tensor math), fused kernel (optim_adadelta) +
 * generic fallback:
 *
 *   g = maximize ? -g : g;  g += weight_decay * p
 *   sq = rho * sq + (1 - rho) * g * g
 *   delta = sqrt(acc + eps) / sqrt(sq + eps) * g
 *   acc = rho * acc + (1 - rho) * delta * delta;  p -= lr * delta
 * state['step'] is a Python int in 1.13. */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_SQUARE_AVG, BUF_ACC_DELTA };

static const pti_hparam adadelta_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_adadelta_opts, lr)},
    {"rho", PTI_HP_FLOAT, offsetof(pt_adadelta_opts, rho)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_adadelta_opts, eps)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_adadelta_opts, weight_decay)},
    {"maximize", PTI_HP_BOOL, offsetof(pt_adadelta_opts, maximize)},
    {"foreach", PTI_HP_NONE, 0},
};

static const pti_state_entry adadelta_state[] = {
    {"step", PTI_ST_STEP_INT, 0},
    {"square_avg", PTI_ST_BUF, BUF_SQUARE_AVG},
    {"acc_delta", PTI_ST_BUF, BUF_ACC_DELTA},
};

static pt_status adadelta_check(const char *op, const void *opts)
{
    const pt_adadelta_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK && !(o->rho >= 0.0 && o->rho <= 1.0))
        st = pti_error(PT_ERR_INVALID_ARG, "%s: Invalid rho value: %g", op, o->rho);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "epsilon value", o->eps);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    return st;
}

static pt_status adadelta_init(pt_optim *o, const void *opts, const pt_tensor *p,
                               pti_param_state *s)
{
    (void)o, (void)opts;
    return pti_optim_init_zero_bufs(p, 2, s);
}

static pt_status adadelta_generic(const pt_adadelta_opts *o, pt_tensor *p, const pt_tensor *g,
                                  pt_tensor *sq, pt_tensor *acc)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_tensor *std = NULL, *delta = NULL;
    pt_status st = pti_optim_ema_sq_(sq, d, o->rho);
    if (st == PT_OK && !(std = pt_add_scalar(sq, o->eps)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_sqrt_(std);
    if (st == PT_OK && !(delta = pt_add_scalar(acc, o->eps)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_sqrt_(delta);
    if (st == PT_OK)
        st = pt_div_(delta, std);
    if (st == PT_OK)
        st = pt_mul_(delta, d);
    if (st == PT_OK)
        st = pti_optim_ema_sq_(acc, delta, o->rho);
    if (st == PT_OK)
        st = pt_add_alpha_(p, delta, -o->lr);
    pt_release(delta);
    pt_release(std);
    pt_release(d);
    return st;
}

static pt_status adadelta_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                                 pti_param_state *s)
{
    (void)opt;
    const pt_adadelta_opts *o = opts;
    s->step += 1.0;
    pt_tensor *sq = s->buf[BUF_SQUARE_AVG], *acc = s->buf[BUF_ACC_DELTA];
    if (!pti_optim_kernel_applies(PTI_OP_optim_adadelta, p, g, 2, s->buf))
        return adadelta_generic(o, p, g, sq, acc);
    pti_optim_adadelta_params hp = {
        .wd = (float)o->weight_decay,
        .rho = (float)o->rho,
        .one_rho = (float)(1.0 - o->rho),
        .eps = (float)o->eps,
        .neg_lr = (float)-o->lr,
        .maximize = o->maximize,
        .has_wd = o->weight_decay != 0.0,
    };
    return pti_optim_kernel(PTI_OP_optim_adadelta, p, g, 2, s->buf, &hp);
}

static const pti_optim_def adadelta_def = {
    .name = "Adadelta",
    .opts_size = sizeof(pt_adadelta_opts),
    .n_hparams = (int)(sizeof(adadelta_hparams) / sizeof(adadelta_hparams[0])),
    .hparams = adadelta_hparams,
    .n_state = (int)(sizeof(adadelta_state) / sizeof(adadelta_state[0])),
    .state = adadelta_state,
    .check_opts = adadelta_check,
    .init_state = adadelta_init,
    .update = adadelta_update,
};

pt_optim *pt_optim_adadelta(pt_module *m, pt_adadelta_opts o)
{
    return pti_optim_new_module(&adadelta_def, "pt_optim_adadelta", m, &o);
}

pt_optim *pt_optim_adadelta_params(int n, pt_tensor *const *params, pt_adadelta_opts o)
{
    return pti_optim_new(&adadelta_def, "pt_optim_adadelta", n, params, &o);
}
