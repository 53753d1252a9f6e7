/* The optimizer base (torch.optim.Optimizer): construction and validation of parameter
 * groups, hyperparameter access by PyTorch name, the step loop (state allocated on a
 * parameter's first step, updates under no_grad), zero_grad, and helpers the algorithms share
 * (state allocation, fast-path test, parallel split). The state dict lives in optim_state.c;
 * the algorithms in one file each. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "optim_internal.h"

/* ---- groups ---------------------------------------------------------------------------------- */

static void group_clear(pti_optim_group *g)
{
    for (int i = 0; i < g->n; i++) {
        for (int k = 0; k < PTI_OPTIM_MAX_BUFS; k++)
            pti_unref(g->state[i].buf[k]);
        pti_unref(g->params[i]);
    }
    for (int k = 0; k < g->n_extra; k++)
        free(g->extra[k].name);
    free(g->extra);
    free(g->params);
    free(g->state);
    free(g->opts);
    memset(g, 0, sizeof(*g));
}

static bool optim_has_param(const pt_optim *o, const pt_tensor *t)
{
    for (int gi = 0; gi < o->n_groups; gi++)
        for (int i = 0; i < o->groups[gi].n; i++)
            if (o->groups[gi].params[i] == t)
                return true;
    return false;
}

/* Checks a parameter list against the optimizer's existing groups and itself. */
static pt_status check_params(const pt_optim *o, const char *op, int n, pt_tensor *const *params)
{
    if (n <= 0 || !params)
        return pti_error(PT_ERR_INVALID_ARG, "%s: optimizer got an empty parameter list", op);
    for (int i = 0; i < n; i++) {
        const pt_tensor *p = params[i];
        if (!p)
            return pti_error(PT_ERR_NULL, "%s: parameter %d is NULL", op, i);
        if (!p->requires_grad)
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: parameter %d (%s) does not require grad; optimizing it is "
                             "pointless",
                             op, i, pti_tensor_desc(p));
        if (p->grad_fn)
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: can't optimize a non-leaf Tensor "
                             "(parameter %d)",
                             op, i);
        if (!pti_dtypes[p->dtype].is_floating)
            return pti_error(PT_ERR_DTYPE,
                             "%s: parameter %d has dtype %s; optimizers need "
                             "floating-point parameters",
                             op, i, pti_dtypes[p->dtype].name);
        for (int j = 0; j < i; j++)
            if (params[j] == p)
                return pti_error(PT_ERR_INVALID_ARG,
                                 "%s: parameter %d appears twice in the "
                                 "parameter list",
                                 op, i);
        if (o && optim_has_param(o, p))
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: some parameters appear in more than one "
                             "parameter group (parameter %d)",
                             op, i);
    }
    return PT_OK;
}

/* Appends a group (options already validated). */
static pt_status add_group(pt_optim *o, int n, pt_tensor *const *params, const void *opts)
{
    pti_optim_group *gs = pti_realloc(o->groups, sizeof(*gs) * (size_t)(o->n_groups + 1));
    if (!gs)
        return pti_error(PT_ERR_OOM, "pt_optim: out of memory adding a parameter group");
    o->groups = gs;
    pti_optim_group *g = &gs[o->n_groups];
    memset(g, 0, sizeof(*g));
    g->opts = pti_malloc(o->def->opts_size);
    g->params = pti_calloc((size_t)n, sizeof(*g->params));
    g->state = pti_calloc((size_t)n, sizeof(*g->state));
    if (!g->opts || !g->params || !g->state) {
        free(g->opts);
        free(g->params);
        free(g->state);
        return pti_error(PT_ERR_OOM, "pt_optim: out of memory adding a parameter group");
    }
    memcpy(g->opts, opts, o->def->opts_size);
    for (int i = 0; i < n; i++)
        g->params[i] = pt_retain(params[i]);
    g->n = n;
    o->n_groups++;
    for (int i = 0; i < n && o->def->eager_state; i++) {
        pt_status st = o->def->init_state(o, g->opts, g->params[i], &g->state[i]);
        if (st != PT_OK) {
            group_clear(g);
            o->n_groups--;
            return st;
        }
        g->state[i].initialized = true;
    }
    return PT_OK;
}

pt_optim *pti_optim_new(const pti_optim_def *def, const char *op, int n, pt_tensor *const *params,
                        const void *opts)
{
    if (def->check_opts(op, opts) != PT_OK || check_params(NULL, op, n, params) != PT_OK)
        return NULL;
    pt_optim *o = pti_calloc(1, sizeof(*o));
    if (!o)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    o->def = def;
    o->defaults = pti_malloc(def->opts_size);
    if (!o->defaults) {
        free(o);
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    }
    memcpy(o->defaults, opts, def->opts_size);
    if (add_group(o, n, params, opts) != PT_OK) {
        pt_optim_free(o);
        return NULL;
    }
    return o;
}

pt_optim *pti_optim_new_module(const pti_optim_def *def, const char *op, pt_module *m,
                               const void *opts)
{
    if (!m)
        return pti_error_null(PT_ERR_NULL, "%s: module is NULL", op);
    pt_tensor **params = NULL;
    int n = pt_nn_parameters(m, &params);
    if (n < 0)
        return NULL;
    pt_optim *o = pti_optim_new(def, op, n, params, opts);
    free(params);
    return o;
}

void pt_optim_free(pt_optim *o)
{
    if (!o)
        return;
    for (int gi = 0; gi < o->n_groups; gi++)
        group_clear(&o->groups[gi]);
    free(o->groups);
    if (o->impl && o->def->free_impl)
        o->def->free_impl(o->impl);
    free(o->defaults);
    free(o);
}

const char *pt_optim_name(const pt_optim *o)
{
    return o ? o->def->name : NULL;
}

pt_status pt_optim_add_param_group(pt_optim *o, int n, pt_tensor *const *params, const void *opts)
{
    const char *op = "pt_optim_add_param_group";
    if (!o)
        return pti_error(PT_ERR_NULL, "%s: optimizer is NULL", op);
    if (!opts)
        opts = o->defaults;
    pt_status st = o->def->check_opts(op, opts);
    if (st == PT_OK)
        st = check_params(o, op, n, params);
    if (st == PT_OK)
        st = add_group(o, n, params, opts);
    return st;
}

int pt_optim_num_groups(const pt_optim *o)
{
    return o ? o->n_groups : -1;
}

static const pti_optim_group *group_at(const pt_optim *o, int group, const char *op)
{
    if (!o)
        return pti_error_null(PT_ERR_NULL, "%s: optimizer is NULL", op);
    if (group < 0 || group >= o->n_groups)
        return pti_error_null(PT_ERR_INDEX, "%s: group %d out of range (the optimizer has %d)", op,
                              group, o->n_groups);
    return &o->groups[group];
}

int pt_optim_group_size(const pt_optim *o, int group)
{
    const pti_optim_group *g = group_at(o, group, "pt_optim_group_size");
    return g ? g->n : -1;
}

pt_tensor *pt_optim_group_param_ref(const pt_optim *o, int group, int i)
{
    const pti_optim_group *g = group_at(o, group, "pt_optim_group_param_ref");
    if (!g)
        return NULL;
    if (i < 0 || i >= g->n)
        return pti_error_null(PT_ERR_INDEX,
                              "pt_optim_group_param_ref: parameter %d out of "
                              "range (group %d has %d)",
                              i, group, g->n);
    return g->params[i];
}

/* ---- hyperparameters by name ---------------------------------------------------------------- */

static const pti_hparam *find_hparam(const pti_optim_def *def, const char *name)
{
    for (int k = 0; k < def->n_hparams; k++)
        if (strcmp(def->hparams[k].name, name) == 0)
            return &def->hparams[k];
    return NULL;
}

static pti_group_extra *find_extra(const pti_optim_group *g, const char *name)
{
    for (int k = 0; k < g->n_extra; k++)
        if (strcmp(g->extra[k].name, name) == 0)
            return &g->extra[k];
    return NULL;
}

/* index is 0, or 0/1 for a pair option. */
static pt_status hp_check_index(const pti_hparam *h, int index, const char *op)
{
    int max_index = h->kind == PTI_HP_PAIR ? 1 : 0;
    if (index < 0 || index > max_index)
        return pti_error(PT_ERR_INDEX, "%s: index %d out of range for option '%s'", op, index,
                         h->name);
    return PT_OK;
}

static pt_status hp_read(const pti_hparam *h, const void *opts, int index, double *v,
                         const char *op)
{
    const char *field = (const char *)opts + h->offset;
    if (hp_check_index(h, index, op) != PT_OK)
        return PT_ERR_INDEX;
    switch (h->kind) {
    case PTI_HP_FLOAT:
    case PTI_HP_NUMBER:
    case PTI_HP_OPT_FLOAT: *v = *(const double *)field; return PT_OK;
    case PTI_HP_PAIR: *v = ((const double *)field)[index]; return PT_OK;
    case PTI_HP_BOOL: *v = *(const bool *)field ? 1.0 : 0.0; return PT_OK;
    case PTI_HP_INT:
    case PTI_HP_OPT_INT: *v = (double)*(const int64_t *)field; return PT_OK;
    case PTI_HP_FALSE: *v = 0.0; return PT_OK;
    case PTI_HP_STR:
    case PTI_HP_NONE: break;
    }
    return pti_error(PT_ERR_DTYPE, "%s: option '%s' is not a number", op, h->name);
}

static pt_status hp_write(const pti_hparam *h, void *opts, int index, double v, const char *op)
{
    char *field = (char *)opts + h->offset;
    if (hp_check_index(h, index, op) != PT_OK)
        return PT_ERR_INDEX;
    switch (h->kind) {
    case PTI_HP_FLOAT:
    case PTI_HP_NUMBER:
    case PTI_HP_OPT_FLOAT: *(double *)field = v; return PT_OK;
    case PTI_HP_PAIR: ((double *)field)[index] = v; return PT_OK;
    case PTI_HP_BOOL: *(bool *)field = v != 0.0; return PT_OK;
    case PTI_HP_INT:
    case PTI_HP_OPT_INT:
        if (v != floor(v) || fabs(v) > 9e15)
            return pti_error(PT_ERR_INVALID_ARG, "%s: option '%s' needs an integer, got %g", op,
                             h->name, v);
        *(int64_t *)field = (int64_t)v;
        return PT_OK;
    case PTI_HP_STR:
    case PTI_HP_NONE:
    case PTI_HP_FALSE: break;
    }
    return pti_error(PT_ERR_DTYPE, "%s: option '%s' cannot be set to a number", op, h->name);
}

pt_status pt_optim_get_option(const pt_optim *o, int group, const char *name, int index, double *v)
{
    const char *op = "pt_optim_get_option";
    const pti_optim_group *g = group_at(o, group, op);
    if (!g)
        return pt_last_status();
    if (!name || !v)
        return pti_error(PT_ERR_NULL, "%s: name and v must not be NULL", op);
    const pti_hparam *h = find_hparam(o->def, name);
    if (h)
        return hp_read(h, g->opts, index, v, op);
    const pti_group_extra *e = find_extra(g, name);
    if (!e)
        return pti_error(PT_ERR_INDEX, "%s: %s param group has no option '%s'", op, o->def->name,
                         name);
    if (index != 0)
        return pti_error(PT_ERR_INDEX, "%s: index %d out of range for option '%s'", op, index,
                         name);
    *v = e->v;
    return PT_OK;
}

static pt_status add_extra(pti_optim_group *g, const char *name, double v)
{
    pti_group_extra *es = pti_realloc(g->extra, sizeof(*es) * (size_t)(g->n_extra + 1));
    if (!es)
        return pti_error(PT_ERR_OOM, "pt_optim_set_option: out of memory");
    g->extra = es;
    size_t len = strlen(name);
    char *copy = pti_malloc(len + 1);
    if (!copy)
        return pti_error(PT_ERR_OOM, "pt_optim_set_option: out of memory");
    memcpy(copy, name, len + 1);
    es[g->n_extra++] = (pti_group_extra){copy, v, false};
    return PT_OK;
}

pt_status pt_optim_set_option(pt_optim *o, int group, const char *name, int index, double v)
{
    const char *op = "pt_optim_set_option";
    pti_optim_group *g = (pti_optim_group *)group_at(o, group, op);
    if (!g)
        return pt_last_status();
    if (!name)
        return pti_error(PT_ERR_NULL, "%s: name must not be NULL", op);
    const pti_hparam *h = find_hparam(o->def, name);
    if (!h) {
        pti_group_extra *e = find_extra(g, name);
        if (index != 0)
            return pti_error(PT_ERR_INDEX, "%s: index %d out of range for option '%s'", op, index,
                             name);
        if (!e)
            return add_extra(g, name, v);
        e->v = v;
        e->is_int = false;
        return PT_OK;
    }
    /* Validate on a copy so a rejected value leaves the group unchanged. */
    _Alignas(max_align_t) char tmp[512];
    if (o->def->opts_size > sizeof(tmp))
        return pti_error(PT_ERR_RUNTIME, "%s: options struct too large", op);
    memcpy(tmp, g->opts, o->def->opts_size);
    pt_status st = hp_write(h, tmp, index, v, op);
    if (st == PT_OK)
        st = o->def->check_opts(op, tmp);
    if (st == PT_OK)
        memcpy(g->opts, tmp, o->def->opts_size);
    return st;
}

bool pt_optim_has_option(const pt_optim *o, int group, const char *name)
{
    if (!o || group < 0 || group >= o->n_groups || !name)
        return false;
    return find_hparam(o->def, name) || find_extra(&o->groups[group], name);
}

double pt_optim_get_lr(const pt_optim *o, int group)
{
    double v = NAN;
    if (pt_optim_get_option(o, group, "lr", 0, &v) != PT_OK)
        return NAN;
    return v;
}

pt_status pt_optim_set_lr(pt_optim *o, int group, double lr)
{
    return pt_optim_set_option(o, group, "lr", 0, lr);
}

/* ---- stepping -------------------------------------------------------------------------------- */

static pt_status step_group(pt_optim *o, pti_optim_group *g)
{
    for (int i = 0; i < g->n; i++) {
        pt_tensor *p = g->params[i];
        const pt_tensor *grad = p->grad;
        if (!grad)
            continue;
        pti_param_state *s = &g->state[i];
        if (!s->initialized) {
            pt_status st = o->def->init_state(o, g->opts, p, s);
            if (st != PT_OK)
                return st;
            s->initialized = true;
        }
        pt_status st = o->def->update(o, g->opts, p, grad, s);
        if (st != PT_OK)
            return st;
        pti_bump_version(p);
    }
    return PT_OK;
}

pt_status pt_optim_step(pt_optim *o)
{
    if (!o)
        return pti_error(PT_ERR_NULL, "pt_optim_step: optimizer is NULL");
    if (o->def->step)
        return o->def->step(o, NULL, NULL, NULL);
    pt_no_grad_begin();
    pt_status st = PT_OK;
    for (int gi = 0; gi < o->n_groups && st == PT_OK; gi++)
        st = step_group(o, &o->groups[gi]);
    pt_no_grad_end();
    return st;
}

pt_status pt_optim_step_closure(pt_optim *o, double (*closure)(void *user), void *user,
                                double *loss)
{
    if (!o)
        return pti_error(PT_ERR_NULL, "pt_optim_step_closure: optimizer is NULL");
    if (!closure)
        return pti_error(PT_ERR_NULL, "pt_optim_step_closure: closure is NULL");
    if (o->def->step)
        return o->def->step(o, closure, user, loss);
    bool prev = pt_set_grad_enabled(true);
    double l = closure(user);
    pt_set_grad_enabled(prev);
    if (isnan(l)) {
        if (pt_last_status() == PT_OK)
            pti_error(PT_ERR_RUNTIME, "pt_optim_step_closure: the closure reported an error");
        return pt_last_status();
    }
    if (loss)
        *loss = l;
    return pt_optim_step(o);
}

void pt_optim_zero_grad(pt_optim *o)
{
    (void)pt_optim_zero_grad_set_to_none(o, true);
}

pt_status pt_optim_zero_grad_set_to_none(pt_optim *o, bool set_to_none)
{
    if (!o)
        return pti_error(PT_ERR_NULL, "pt_optim_zero_grad: optimizer is NULL");
    for (int gi = 0; gi < o->n_groups; gi++) {
        pti_optim_group *g = &o->groups[gi];
        for (int i = 0; i < g->n; i++) {
            pt_tensor *p = g->params[i];
            if (!p->grad)
                continue;
            pt_status st = set_to_none ? pt_set_grad(p, NULL) : pt_fill_(p->grad, 0.0);
            if (st != PT_OK)
                return st;
        }
    }
    return PT_OK;
}

/* ---- helpers for the algorithms ------------------------------------------------------------- */

/* Turns a scope-tracked new tensor into a plain owned reference. */
static pt_tensor *untrack(pt_tensor *t)
{
    if (t) {
        pt_retain(t);
        pt_release(t);
    }
    return t;
}

pt_tensor *pti_optim_state_zeros(const pt_tensor *p)
{
    return untrack(pt_zeros_like(p));
}

pt_tensor *pti_optim_state_full(const pt_tensor *p, double v)
{
    return untrack(pt_full_like(p, v));
}

pt_tensor *pti_optim_state_clone(const pt_tensor *src)
{
    return untrack(pt_clone(src));
}

pt_status pti_optim_init_zero_bufs(const pt_tensor *p, int n_bufs, pti_param_state *s)
{
    s->step = 0.0;
    for (int k = 0; k < n_bufs; k++)
        if (!(s->buf[k] = pti_optim_state_zeros(p)))
            return pt_last_status();
    return PT_OK;
}

pt_status pti_optim_assign(pt_tensor *dst, pt_tensor *src_owned)
{
    if (!src_owned)
        return pt_last_status();
    pt_status st = pt_copy_(dst, src_owned);
    pt_release(src_owned);
    return st;
}

pt_status pti_optim_ema_(pt_tensor *avg, const pt_tensor *x, double beta)
{
    pt_status st = pt_mul_scalar_(avg, beta);
    return st == PT_OK ? pt_add_alpha_(avg, x, 1.0 - beta) : st;
}

pt_status pti_optim_ema_sq_(pt_tensor *avg, const pt_tensor *x, double beta)
{
    pt_status st = pt_mul_scalar_(avg, beta);
    return st == PT_OK ? pti_optim_assign(avg, pt_addcmul(avg, x, x, 1.0 - beta)) : st;
}

pt_tensor *pti_optim_generic_grad(const pt_tensor *p, const pt_tensor *g, bool maximize,
                                  double weight_decay)
{
    pt_tensor *d = maximize ? pt_neg(g) : pt_retain((pt_tensor *)g);
    if (d && weight_decay != 0.0) {
        pt_tensor *d2 = pt_add_alpha(d, p, weight_decay);
        pt_release(d);
        d = d2;
    }
    return d;
}

pt_status pti_optim_check_nonneg(const char *op, const char *what, double v)
{
    if (!(v >= 0.0))
        return pti_error(PT_ERR_INVALID_ARG, "%s: Invalid %s: %g", op, what, v);
    return PT_OK;
}

pt_status pti_optim_check_beta(const char *op, int index, double v)
{
    if (!(v >= 0.0 && v < 1.0))
        return pti_error(PT_ERR_INVALID_ARG, "%s: Invalid beta parameter at index %d: %g", op,
                         index, v);
    return PT_OK;
}

pt_status pti_optim_check_betas(const char *op, const double betas[2])
{
    pt_status st = pti_optim_check_beta(op, 0, betas[0]);
    return st == PT_OK ? pti_optim_check_beta(op, 1, betas[1]) : st;
}

pt_status pti_optim_check_adam_like(const char *op, double lr, double eps, const double betas[2],
                                    double weight_decay)
{
    pt_status st = pti_optim_check_nonneg(op, "learning rate", lr);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "epsilon value", eps);
    if (st == PT_OK)
        st = pti_optim_check_betas(op, betas);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", weight_decay);
    return st;
}
