/* SophiaG (Liu et al. 2023, "Sophia: A Scalable Stochastic Second-order Optimizer for Language
 * Model Pre-training") as the reference implementation Liuhong99/Sophia (not in torch.optim),
 * fused kernel (optim_sophia) + generic fallback:
 *
 *   step:            t += 1;  g = maximize ? -g : g;  p *= 1 - lr * weight_decay
 *                    m = beta1 m + (1 - beta1) g
 *                    p -= lr * sign(m) * min(|m| / (rho * bs * h + 1e-15), 1)
 *   update_hessian:  h = beta2 h + (1 - beta2) g g   (g: the current gradient) */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "optim_internal.h"

enum { BUF_EXP_AVG, BUF_HESSIAN };

static const pti_hparam sophia_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_sophia_opts, lr)},
    {"betas", PTI_HP_PAIR, offsetof(pt_sophia_opts, betas)},
    {"rho", PTI_HP_FLOAT, offsetof(pt_sophia_opts, rho)},
    {"weight_decay", PTI_HP_FLOAT, offsetof(pt_sophia_opts, weight_decay)},
    {"maximize", PTI_HP_BOOL, offsetof(pt_sophia_opts, maximize)},
    {"capturable", PTI_HP_FALSE, 0},
};

static const pti_state_entry sophia_state[] = {
    {"step", PTI_ST_STEP_TENSOR, 0},
    {"exp_avg", PTI_ST_BUF, BUF_EXP_AVG},
    {"hessian", PTI_ST_BUF, BUF_HESSIAN},
};

static pt_status sophia_check(const char *op, const void *opts)
{
    const pt_sophia_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK)
        st = pti_optim_check_betas(op, o->betas);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "rho", o->rho);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    if (st == PT_OK && !(o->bs > 0.0))
        st = pti_error(PT_ERR_INVALID_ARG, "%s: Invalid bs: %g (must be > 0)", op, o->bs);
    return st;
}

static pt_status sophia_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o, (void)opts;
    return pti_optim_init_zero_bufs(p, 2, s);
}

static pt_status sophia_generic(const pt_sophia_opts *o, pt_tensor *p, const pt_tensor *g,
                                pt_tensor *m, pt_tensor *h)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, 0.0);
    pt_tensor *ratio = NULL, *den = NULL, *sg = NULL;
    pt_status st = d ? pt_mul_scalar_(p, 1.0 - o->lr * o->weight_decay) : pt_last_status();
    if (st == PT_OK)
        st = pti_optim_ema_(m, d, o->betas[0]);
    if (st == PT_OK && !(den = pt_mul_scalar(h, o->rho * o->bs)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_add_scalar_(den, 1e-15);
    if (st == PT_OK && !(ratio = pt_abs(m)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_div_(ratio, den);
    if (st == PT_OK)
        st = pt_clamp_(ratio, false, 0.0, true, 1.0);
    if (st == PT_OK && !(sg = pt_sign(m)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pti_optim_assign(p, pt_addcmul(p, sg, ratio, -o->lr));
    pt_release(sg);
    pt_release(ratio);
    pt_release(den);
    pt_release(d);
    return st;
}

static pt_status sophia_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                               pti_param_state *s)
{
    (void)opt;
    const pt_sophia_opts *o = opts;
    s->step += 1.0;
    if (!pti_optim_kernel_applies(PTI_OP_optim_sophia, p, g, 2, s->buf))
        return sophia_generic(o, p, g, s->buf[BUF_EXP_AVG], s->buf[BUF_HESSIAN]);
    pti_optim_sophia_params hp = {
        .decay = (float)(1.0 - o->lr * o->weight_decay),
        .b1 = (float)o->betas[0],
        .one_b1 = (float)(1.0 - o->betas[0]),
        .rho_bs = (float)(o->rho * o->bs),
        .neg_lr = (float)-o->lr,
        .maximize = o->maximize,
    };
    return pti_optim_kernel(PTI_OP_optim_sophia, p, g, 2, s->buf, &hp);
}

static const pti_optim_def sophia_def = {
    .name = "SophiaG",
    .opts_size = sizeof(pt_sophia_opts),
    .n_hparams = (int)(sizeof(sophia_hparams) / sizeof(sophia_hparams[0])),
    .hparams = sophia_hparams,
    .n_state = (int)(sizeof(sophia_state) / sizeof(sophia_state[0])),
    .state = sophia_state,
    .check_opts = sophia_check,
    .init_state = sophia_init,
    .update = sophia_update,
};

pt_optim *pt_optim_sophia(pt_module *m, pt_sophia_opts o)
{
    return pti_optim_new_module(&sophia_def, "pt_optim_sophia", m, &o);
}

pt_optim *pt_optim_sophia_params(int n, pt_tensor *const *params, pt_sophia_opts o)
{
    return pti_optim_new(&sophia_def, "pt_optim_sophia", n, params, &o);
}

/* h = beta2 h + (1 - beta2) g g for one parameter (any dtype/layout: public ops). */
static pt_status hessian_one(const pt_sophia_opts *o, pt_tensor *h, const pt_tensor *g)
{
    pt_status st = pti_optim_ema_sq_(h, g, o->betas[1]);
    return st;
}

pt_status pt_optim_sophia_update_hessian(pt_optim *o)
{
    const char *op = "pt_optim_sophia_update_hessian";
    if (!o)
        return pti_error(PT_ERR_NULL, "%s: optimizer is NULL", op);
    if (o->def != &sophia_def)
        return pti_error(PT_ERR_INVALID_ARG, "%s: the optimizer is %s, not SophiaG", op,
                         o->def->name);
    pt_no_grad_begin();
    pt_status st = PT_OK;
    for (int gi = 0; gi < o->n_groups && st == PT_OK; gi++) {
        pti_optim_group *g = &o->groups[gi];
        for (int i = 0; i < g->n && st == PT_OK; i++) {
            pti_param_state *s = &g->state[i];
            if (!g->params[i]->grad)
                continue;
            if (!s->initialized) {
                st = sophia_init(o, g->opts, g->params[i], s);
                if (st != PT_OK)
                    break;
                s->initialized = true;
            }
            st = hessian_one(g->opts, s->buf[BUF_HESSIAN], g->params[i]->grad);
        }
    }
    pt_no_grad_end();
    return st;
}
