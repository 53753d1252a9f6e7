/* torch.optim.SGD (1.13 single-tensor math): weight decay, momentum with dampening, Nesterov,
 * maximize. A fused kernel per parameter (optim_sgd), and a generic fallback from public ops.
 *
 *   d = maximize ? -g : g;   d += weight_decay * p
 *   momentum: buf = first step ? d : momentum * buf + (1 - dampening) * d
 *             d = nesterov ? d + momentum * buf : buf
 *   p -= lr * d */
#include <stddef.h>

#include "optim_internal.h"

static const pti_hparam sgd_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_sgd_opts, lr)},
    {"momentum", PTI_HP_NUMBER, offsetof(pt_sgd_opts, momentum)},
    {"dampening", PTI_HP_NUMBER, offsetof(pt_sgd_opts, dampening)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_sgd_opts, weight_decay)},
    {"nesterov", PTI_HP_BOOL, offsetof(pt_sgd_opts, nesterov)},
    {"maximize", PTI_HP_BOOL, offsetof(pt_sgd_opts, maximize)},
    {"foreach", PTI_HP_NONE, 0},
    {"differentiable", PTI_HP_FALSE, 0},
};

static const pti_state_entry sgd_state[] = {
    {"momentum_buffer", PTI_ST_BUF_OR_NONE, 0},
};

static pt_status sgd_check(const char *op, const void *opts)
{
    const pt_sgd_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "momentum value", o->momentum);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    if (st == PT_OK && o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
        st = pti_error(PT_ERR_INVALID_ARG,
                       "%s: Nesterov momentum requires a momentum and zero dampening", op);
    return st;
}

/* The momentum buffer is created lazily by the first update (torch clones d into it). */
static pt_status sgd_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o, (void)opts, (void)p, (void)s;
    return PT_OK;
}

/* ---- generic path --------------------------------------------------------------------------- */

static pt_status sgd_generic(const pt_sgd_opts *o, pt_tensor *p, const pt_tensor *g, pt_tensor *buf,
                             bool first)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_status st = PT_OK;
    if (buf) {
        if (first) {
            st = pt_copy_(buf, d);
        } else {
            st = pt_mul_scalar_(buf, o->momentum);
            if (st == PT_OK)
                st = pt_add_alpha_(buf, d, 1.0 - o->dampening);
        }
        if (st == PT_OK && o->nesterov)
            st = pt_add_alpha_(d, buf, o->momentum);
    }
    if (st == PT_OK)
        st = pt_add_alpha_(p, buf && !o->nesterov ? buf : d, -o->lr);
    pt_release(d);
    return st;
}

static pt_status sgd_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                            pti_param_state *s)
{
    (void)opt;
    const pt_sgd_opts *o = opts;
    bool first = false;
    if (o->momentum != 0.0 && !s->buf[0]) {
        s->buf[0] = pti_optim_state_zeros(p);
        if (!s->buf[0])
            return pt_last_status();
        first = true;
    }
    pt_tensor *buf = o->momentum != 0.0 ? s->buf[0] : NULL;
    if (!pti_optim_kernel_applies(PTI_OP_optim_sgd, p, g, 1, &buf))
        return sgd_generic(o, p, g, buf, first);
    pti_optim_sgd_params hp = {
        .neg_lr = (float)-o->lr,
        .wd = (float)o->weight_decay,
        .mom = (float)o->momentum,
        .damp1 = (float)(1.0 - o->dampening),
        .maximize = o->maximize,
        .nesterov = o->nesterov,
        .has_wd = o->weight_decay != 0.0,
        .first = first,
    };
    return pti_optim_kernel(PTI_OP_optim_sgd, p, g, 1, &buf, &hp);
}

static const pti_optim_def sgd_def = {
    .name = "SGD",
    .opts_size = sizeof(pt_sgd_opts),
    .n_hparams = (int)(sizeof(sgd_hparams) / sizeof(sgd_hparams[0])),
    .hparams = sgd_hparams,
    .n_state = 1,
    .state = sgd_state,
    .check_opts = sgd_check,
    .init_state = sgd_init,
    .update = sgd_update,
};

pt_optim *pt_optim_sgd(pt_module *m, pt_sgd_opts o)
{
    return pti_optim_new_module(&sgd_def, "pt_optim_sgd", m, &o);
}

pt_optim *pt_optim_sgd_params(int n, pt_tensor *const *params, pt_sgd_opts o)
{
    return pti_optim_new(&sgd_def, "pt_optim_sgd", n, params, &o);
}
