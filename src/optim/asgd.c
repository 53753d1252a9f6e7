/* torch.optim.ASGD (averaged SGD, 1.13 single-tensor math), fused kernel (optim_asgd) + generic
 * fallback:
 *
 *   t += 1;  g = maximize ? -g : g;  g += weight_decay * p
 *   p *= 1 - lambd * eta;  p -= eta * g
 *   ax = mu == 1 ? p : ax + (p - ax) * mu
 *   eta = lr / (1 + lambd * lr * t)^alpha;  mu = 1 / max(1, t - t0)
 * (eta and mu are float32 scalar tensors in torch: rounded to float here too) */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_AX };
enum { SCALAR_ETA, SCALAR_MU };

static const pti_hparam asgd_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_asgd_opts, lr)},
    {"lambd", PTI_HP_FLOAT, offsetof(pt_asgd_opts, lambd)},
    {"alpha", PTI_HP_FLOAT, offsetof(pt_asgd_opts, alpha)},
    {"t0", PTI_HP_FLOAT, offsetof(pt_asgd_opts, t0)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_asgd_opts, weight_decay)},
    {"foreach", PTI_HP_NONE, 0},
    {"maximize", PTI_HP_BOOL, offsetof(pt_asgd_opts, maximize)},
};

static const pti_state_entry asgd_state[] = {
    {"step", PTI_ST_STEP_TENSOR, 0},
    {"eta", PTI_ST_SCALAR, SCALAR_ETA},
    {"mu", PTI_ST_SCALAR, SCALAR_MU},
    {"ax", PTI_ST_BUF, BUF_AX},
};

static pt_status asgd_check(const char *op, const void *opts)
{
    const pt_asgd_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    return st;
}

static pt_status asgd_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o;
    s->step = 0.0;
    s->scalar[SCALAR_ETA] = (float)((const pt_asgd_opts *)opts)->lr;
    s->scalar[SCALAR_MU] = 1.0;
    s->buf[BUF_AX] = pti_optim_state_zeros(p);
    return s->buf[BUF_AX] ? PT_OK : pt_last_status();
}

/* ---- generic path --------------------------------------------------------------------------- */

static pt_status asgd_generic(const pt_asgd_opts *o, pt_tensor *p, const pt_tensor *g,
                              pt_tensor *ax, double eta, double mu)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_status st = pt_mul_scalar_(p, 1.0 - o->lambd * eta);
    if (st == PT_OK)
        st = pt_add_alpha_(p, d, -eta);
    pt_release(d);
    if (st != PT_OK)
        return st;
    if (mu == 1.0)
        return pt_copy_(ax, p);
    pt_tensor *diff = pt_sub(p, ax);
    st = diff ? pt_mul_scalar_(diff, mu) : pt_last_status();
    if (st == PT_OK)
        st = pt_add_(ax, diff);
    pt_release(diff);
    return st;
}

static pt_status asgd_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                             pti_param_state *s)
{
    (void)opt;
    const pt_asgd_opts *o = opts;
    s->step += 1.0;
    double eta = s->scalar[SCALAR_ETA], mu = s->scalar[SCALAR_MU];
    pt_status st = PT_OK;
    if (!pti_optim_kernel_applies(PTI_OP_optim_asgd, p, g, 1, s->buf)) {
        st = asgd_generic(o, p, g, s->buf[BUF_AX], eta, mu);
    } else {
        pti_optim_asgd_params hp = {
            .wd = (float)o->weight_decay,
            .decay = (float)(1.0 - o->lambd * eta),
            .neg_eta = (float)-eta,
            .mu = (float)mu,
            .maximize = o->maximize,
            .has_wd = o->weight_decay != 0.0,
            .average = mu != 1.0,
        };
        st = pti_optim_kernel(PTI_OP_optim_asgd, p, g, 1, s->buf, &hp);
    }
    if (st != PT_OK)
        return st;
    double t = s->step;
    s->scalar[SCALAR_ETA] = (float)(o->lr / pow(1.0 + o->lambd * o->lr * t, o->alpha));
    s->scalar[SCALAR_MU] = (float)(1.0 / fmax(1.0, t - o->t0));
    return PT_OK;
}

static const pti_optim_def asgd_def = {
    .name = "ASGD",
    .opts_size = sizeof(pt_asgd_opts),
    .n_hparams = (int)(sizeof(asgd_hparams) / sizeof(asgd_hparams[0])),
    .hparams = asgd_hparams,
    .n_state = (int)(sizeof(asgd_state) / sizeof(asgd_state[0])),
    .state = asgd_state,
    .check_opts = asgd_check,
    .init_state = asgd_init,
    .update = asgd_update,
};

pt_optim *pt_optim_asgd(pt_module *m, pt_asgd_opts o)
{
    return pti_optim_new_module(&asgd_def, "pt_optim_asgd", m, &o);
}

pt_optim *pt_optim_asgd_params(int n, pt_tensor *const *params, pt_asgd_opts o)
{
    return pti_optim_new(&asgd_def, "pt_optim_asgd", n, params, &o);
}
