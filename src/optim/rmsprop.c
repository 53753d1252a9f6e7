/* torch.optim.RMSprop (1.13 single-tensor math), fused kernel (optim_rmsprop) +
 * generic fallback:
 *
 *   g = maximize ? -g : g;  g += weight_decay * p
 *   sq = alpha * sq + (1 - alpha) * g * g
 *   centered: ga = alpha * ga + (1 - alpha) * g;  avg = sqrt(sq - ga * ga) + eps
 *   else:     avg = sqrt(sq) + eps
 *   momentum > 0: buf = momentum * buf + g / avg;  p -= lr * buf
 *   else:         p -= lr * g / avg
 * state['step'] is a Python int in 1.13. */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_SQUARE_AVG, BUF_MOMENTUM, BUF_GRAD_AVG };

static const pti_hparam rmsprop_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_rmsprop_opts, lr)},
    {"momentum", PTI_HP_NUMBER, offsetof(pt_rmsprop_opts, momentum)},
    {"alpha", PTI_HP_FLOAT, offsetof(pt_rmsprop_opts, alpha)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_rmsprop_opts, eps)},
    {"centered", PTI_HP_BOOL, offsetof(pt_rmsprop_opts, centered)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_rmsprop_opts, weight_decay)},
    {"foreach", PTI_HP_NONE, 0},
    {"maximize", PTI_HP_BOOL, offsetof(pt_rmsprop_opts, maximize)},
    {"differentiable", PTI_HP_FALSE, 0},
};

static const pti_state_entry rmsprop_state[] = {
    {"step", PTI_ST_STEP_INT, 0},
    {"square_avg", PTI_ST_BUF, BUF_SQUARE_AVG},
    {"momentum_buffer", PTI_ST_BUF, BUF_MOMENTUM},
    {"grad_avg", PTI_ST_BUF, BUF_GRAD_AVG},
};

static pt_status rmsprop_check(const char *op, const void *opts)
{
    const pt_rmsprop_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "epsilon value", o->eps);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "momentum value", o->momentum);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "alpha value", o->alpha);
    return st;
}

/* Creates the buffers the options need that are missing (torch creates momentum_buffer and
 * grad_avg at the first step only when momentum > 0 / centered then). */
static pt_status rmsprop_ensure(const pt_rmsprop_opts *o, const pt_tensor *p, pti_param_state *s)
{
    bool need[3] = {true, o->momentum > 0.0, o->centered};
    for (int k = 0; k < 3; k++) {
        if (need[k] && !s->buf[k]) {
            s->buf[k] = pti_optim_state_zeros(p);
            if (!s->buf[k])
                return pt_last_status();
        }
    }
    return PT_OK;
}

static pt_status rmsprop_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o;
    s->step = 0.0;
    return rmsprop_ensure(opts, p, s);
}

/* ---- generic path --------------------------------------------------------------------------- */

static pt_status rmsprop_generic(const pt_rmsprop_opts *o, pt_tensor *p, const pt_tensor *g,
                                 pt_tensor *sq, pt_tensor *buf, pt_tensor *ga)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_tensor *avg = NULL;
    pt_status st = pti_optim_ema_sq_(sq, d, o->alpha);
    if (st == PT_OK && ga) {
        st = pti_optim_ema_(ga, d, o->alpha);
        if (st == PT_OK && !(avg = pt_addcmul(sq, ga, ga, -1.0)))
            st = pt_last_status();
        if (st == PT_OK)
            st = pt_sqrt_(avg);
    } else if (st == PT_OK && !(avg = pt_sqrt(sq))) {
        st = pt_last_status();
    }
    if (st == PT_OK)
        st = pt_add_scalar_(avg, o->eps);
    if (st == PT_OK && buf) {
        st = pt_mul_scalar_(buf, o->momentum);
        if (st == PT_OK)
            st = pti_optim_assign(buf, pt_addcdiv(buf, d, avg, 1.0));
        if (st == PT_OK)
            st = pt_add_alpha_(p, buf, -o->lr);
    } else if (st == PT_OK) {
        st = pti_optim_assign(p, pt_addcdiv(p, d, avg, -o->lr));
    }
    pt_release(avg);
    pt_release(d);
    return st;
}

static pt_status rmsprop_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                                pti_param_state *s)
{
    (void)opt;
    const pt_rmsprop_opts *o = opts;
    pt_status st = rmsprop_ensure(o, p, s);
    if (st != PT_OK)
        return st;
    s->step += 1.0;
    pt_tensor *bufs[3] = {s->buf[BUF_SQUARE_AVG], o->momentum > 0.0 ? s->buf[BUF_MOMENTUM] : NULL,
                          o->centered ? s->buf[BUF_GRAD_AVG] : NULL};
    if (!pti_optim_kernel_applies(PTI_OP_optim_rmsprop, p, g, 3, bufs))
        return rmsprop_generic(o, p, g, bufs[0], bufs[1], bufs[2]);
    pti_optim_rmsprop_params hp = {
        .wd = (float)o->weight_decay,
        .alpha = (float)o->alpha,
        .one_alpha = (float)(1.0 - o->alpha),
        .eps = (float)o->eps,
        .mom = (float)o->momentum,
        .neg_lr = (float)-o->lr,
        .maximize = o->maximize,
        .has_wd = o->weight_decay != 0.0,
    };
    return pti_optim_kernel(PTI_OP_optim_rmsprop, p, g, 3, bufs, &hp);
}

/* torch's state has momentum_buffer only with momentum > 0 and grad_avg only when centered */
static bool rmsprop_buf_needed(const void *opts, int index)
{
    const pt_rmsprop_opts *o = opts;
    bool need[3] = {true, o->momentum > 0.0, o->centered};
    return need[index];
}

static const pti_optim_def rmsprop_def = {
    .name = "RMSprop",
    .opts_size = sizeof(pt_rmsprop_opts),
    .n_hparams = (int)(sizeof(rmsprop_hparams) / sizeof(rmsprop_hparams[0])),
    .hparams = rmsprop_hparams,
    .n_state = (int)(sizeof(rmsprop_state) / sizeof(rmsprop_state[0])),
    .state = rmsprop_state,
    .check_opts = rmsprop_check,
    .init_state = rmsprop_init,
    .buf_needed = rmsprop_buf_needed,
    .update = rmsprop_update,
};

pt_optim *pt_optim_rmsprop(pt_module *m, pt_rmsprop_opts o)
{
    return pti_optim_new_module(&rmsprop_def, "pt_optim_rmsprop", m, &o);
}

pt_optim *pt_optim_rmsprop_params(int n, pt_tensor *const *params, pt_rmsprop_opts o)
{
    return pti_optim_new(&rmsprop_def, "pt_optim_rmsprop", n, params, &o);
}
