/* torch.optim.Rprop (1.13 single-tensor math), fused kernel (optim_rprop) +
 * generic fallback:
 *
 *   g = maximize ? -g : g;  s = sign(g * prev)
 *   step_size = clamp(step_size * (s > 0 ? etaplus : s < 0 ? etaminus : 1), min, max)
 *   g = s < 0 ? 0 : g;  p -= sign(g) * step_size;  prev = g */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_PREV, BUF_STEP_SIZE };

static const pti_hparam rprop_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_rprop_opts, lr)},
    {"etas", PTI_HP_PAIR, offsetof(pt_rprop_opts, etas)},
    {"step_sizes", PTI_HP_PAIR, offsetof(pt_rprop_opts, step_sizes)},
    {"foreach", PTI_HP_NONE, 0},
    {"maximize", PTI_HP_BOOL, offsetof(pt_rprop_opts, maximize)},
};

static const pti_state_entry rprop_state[] = {
    {"step", PTI_ST_STEP_INT, 0},
    {"prev", PTI_ST_BUF, BUF_PREV},
    {"step_size", PTI_ST_BUF, BUF_STEP_SIZE},
};

static pt_status rprop_check(const char *op, const void *opts)
{
    const pt_rprop_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK && !(0.0 < o->etas[0] && o->etas[0] < 1.0 && 1.0 < o->etas[1]))
        st = pti_error(PT_ERR_INVALID_ARG, "%s: Invalid eta values: %g, %g", op, o->etas[0],
                       o->etas[1]);
    return st;
}

static pt_status rprop_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o;
    s->step = 0.0;
    s->buf[BUF_PREV] = pti_optim_state_zeros(p);
    s->buf[BUF_STEP_SIZE] = pti_optim_state_full(p, ((const pt_rprop_opts *)opts)->lr);
    return s->buf[BUF_PREV] && s->buf[BUF_STEP_SIZE] ? PT_OK : pt_last_status();
}

/* ---- generic path --------------------------------------------------------------------------- */

static pt_status rprop_generic(const pt_rprop_opts *o, pt_tensor *p, const pt_tensor *g,
                               pt_tensor *prev, pt_tensor *size)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, 0.0);
    pt_tensor *sign = d ? pt_mul(d, prev) : NULL;
    pt_tensor *pos = sign ? pt_gt_scalar(sign, 0.0) : NULL;
    pt_tensor *neg = pos ? pt_lt_scalar(sign, 0.0) : NULL;
    pt_tensor *dz = NULL, *sd = NULL;
    pt_status st = neg ? pt_fill_(sign, 1.0) : pt_last_status();
    if (st == PT_OK)
        st = pt_masked_fill_(sign, pos, o->etas[1]);
    if (st == PT_OK)
        st = pt_masked_fill_(sign, neg, o->etas[0]);
    if (st == PT_OK)
        st = pt_mul_(size, sign);
    if (st == PT_OK)
        st = pt_clamp_(size, true, o->step_sizes[0], true, o->step_sizes[1]);
    if (st == PT_OK && !(dz = pt_masked_fill(d, neg, 0.0)))
        st = pt_last_status();
    if (st == PT_OK && !(sd = pt_sign(dz)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pti_optim_assign(p, pt_addcmul(p, sd, size, -1.0));
    if (st == PT_OK)
        st = pt_copy_(prev, dz);
    pt_release(sd);
    pt_release(dz);
    pt_release(neg);
    pt_release(pos);
    pt_release(sign);
    pt_release(d);
    return st;
}

static pt_status rprop_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                              pti_param_state *s)
{
    (void)opt;
    const pt_rprop_opts *o = opts;
    s->step += 1.0;
    if (!pti_optim_kernel_applies(PTI_OP_optim_rprop, p, g, 2, s->buf))
        return rprop_generic(o, p, g, s->buf[BUF_PREV], s->buf[BUF_STEP_SIZE]);
    pti_optim_rprop_params hp = {
        .etaminus = (float)o->etas[0],
        .etaplus = (float)o->etas[1],
        .smin = (float)o->step_sizes[0],
        .smax = (float)o->step_sizes[1],
        .maximize = o->maximize,
    };
    return pti_optim_kernel(PTI_OP_optim_rprop, p, g, 2, s->buf, &hp);
}

static const pti_optim_def rprop_def = {
    .name = "Rprop",
    .opts_size = sizeof(pt_rprop_opts),
    .n_hparams = (int)(sizeof(rprop_hparams) / sizeof(rprop_hparams[0])),
    .hparams = rprop_hparams,
    .n_state = (int)(sizeof(rprop_state) / sizeof(rprop_state[0])),
    .state = rprop_state,
    .check_opts = rprop_check,
    .init_state = rprop_init,
    .update = rprop_update,
};

pt_optim *pt_optim_rprop(pt_module *m, pt_rprop_opts o)
{
    return pti_optim_new_module(&rprop_def, "pt_optim_rprop", m, &o);
}

pt_optim *pt_optim_rprop_params(int n, pt_tensor *const *params, pt_rprop_opts o)
{
    return pti_optim_new(&rprop_def, "pt_optim_rprop", n, params, &o);
}
