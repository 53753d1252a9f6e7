/* Adafactor (Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with Sublinear Memory
 * Cost") as HF transformers' / fairseq's `Adafactor` (not in torch 1.13). Per parameter, with
 * t the step and RMS(x) = |x| / sqrt(numel):
 *
 *   lr_t = relative_step ? min(warmup_init ? 1e-6 t : 1e-2, 1 / sqrt(t)) : lr
 *   scale_parameter: lr_t *= max(eps2, RMS(p))
 *   b2 = 1 - t^decay_rate;  q = g^2 + eps1
 *   >= 2 dims: row = b2 row + (1 - b2) mean(q, -1);  col = b2 col + (1 - b2) mean(q, -2)
 *              u = rsqrt(row / mean(row, -1))[..., None] * rsqrt(col)[..., None, :] * g
 *   else:      v = b2 v + (1 - b2) q;  u = rsqrt(v) * g
 *   u /= max(RMS(u) / clip_threshold, 1);  u *= lr_t
 *   beta1: m = beta1 m + (1 - beta1) u;  u = m
 *   p -= weight_decay * lr_t * p;  p -= u
 * Built from public ops only (every step needs several reductions). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "optim_internal.h"

enum { BUF_EXP_AVG, BUF_ROW, BUF_COL, BUF_SQ };
enum { SCALAR_RMS };

static const pti_hparam adafactor_hparams[] = {
    {"lr", PTI_HP_OPT_FLOAT, offsetof(pt_adafactor_opts, lr)},
    {"eps", PTI_HP_PAIR, offsetof(pt_adafactor_opts, eps)},
    {"clip_threshold", PTI_HP_FLOAT, offsetof(pt_adafactor_opts, clip_threshold)},
    {"decay_rate", PTI_HP_FLOAT, offsetof(pt_adafactor_opts, decay_rate)},
    {"beta1", PTI_HP_OPT_FLOAT, offsetof(pt_adafactor_opts, beta1)},
    {"weight_decay", PTI_HP_FLOAT, offsetof(pt_adafactor_opts, weight_decay)},
    {"scale_parameter", PTI_HP_BOOL, offsetof(pt_adafactor_opts, scale_parameter)},
    {"relative_step", PTI_HP_BOOL, offsetof(pt_adafactor_opts, relative_step)},
    {"warmup_init", PTI_HP_BOOL, offsetof(pt_adafactor_opts, warmup_init)},
};

static const pti_state_entry adafactor_state[] = {
    {"step", PTI_ST_STEP_INT, 0},
    {"exp_avg", PTI_ST_BUF, BUF_EXP_AVG},
    {"exp_avg_sq_row", PTI_ST_BUF, BUF_ROW},
    {"exp_avg_sq_col", PTI_ST_BUF, BUF_COL},
    {"exp_avg_sq", PTI_ST_BUF, BUF_SQ},
    {"RMS", PTI_ST_SCALAR, SCALAR_RMS},
};

static pt_status adafactor_check(const char *op, const void *opts)
{
    const pt_adafactor_opts *o = opts;
    if (!isnan(o->lr) && o->relative_step)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: Cannot combine manual `lr` and "
                         "`relative_step=True` options",
                         op);
    if (o->warmup_init && !o->relative_step)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: `warmup_init=True` requires "
                         "`relative_step=True`",
                         op);
    if (isnan(o->lr) && !o->relative_step)
        return pti_error(PT_ERR_INVALID_ARG, "%s: lr=None requires `relative_step=True`", op);
    pt_status st = isnan(o->lr) ? PT_OK : pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    if (st == PT_OK && !(o->clip_threshold > 0.0))
        st = pti_error(PT_ERR_INVALID_ARG, "%s: Invalid clip_threshold: %g", op, o->clip_threshold);
    return st;
}

/* The factored statistics' shapes: p.shape[:-1] (row) and p.shape[:-2] + p.shape[-1:] (col). */
static void factored_shapes(const pt_tensor *p, int64_t *row, int64_t *col)
{
    int nd = pt_ndim(p);
    const int64_t *sh = pt_shape(p);
    memcpy(row, sh, sizeof(int64_t) * (size_t)(nd - 1));
    memcpy(col, sh, sizeof(int64_t) * (size_t)(nd - 2));
    col[nd - 2] = sh[nd - 1];
}

static pt_tensor *zeros_shaped(const pt_tensor *p, int ndim, const int64_t *shape)
{
    pt_tensor *t = pt_zeros(ndim, shape, pt_dtype_of(p), pt_device_of(p));
    if (t) { /* a plain owned reference, not tracked by a scope */
        pt_retain(t);
        pt_release(t);
    }
    return t;
}

static pt_status adafactor_init(pt_optim *o, const void *opts, const pt_tensor *p,
                                pti_param_state *s)
{
    (void)o;
    const pt_adafactor_opts *op = opts;
    s->step = 0.0;
    s->scalar[SCALAR_RMS] = 0.0;
    if (!isnan(op->beta1) && !(s->buf[BUF_EXP_AVG] = pti_optim_state_zeros(p)))
        return pt_last_status();
    int nd = pt_ndim(p);
    if (nd >= 2) {
        int64_t row[PT_MAX_DIMS], col[PT_MAX_DIMS];
        factored_shapes(p, row, col);
        s->buf[BUF_ROW] = zeros_shaped(p, nd - 1, row);
        s->buf[BUF_COL] = zeros_shaped(p, nd - 1, col);
        return s->buf[BUF_ROW] && s->buf[BUF_COL] ? PT_OK : pt_last_status();
    }
    s->buf[BUF_SQ] = pti_optim_state_zeros(p);
    return s->buf[BUF_SQ] ? PT_OK : pt_last_status();
}

static pt_status rms_of(const pt_tensor *t, double *out)
{
    pt_tensor *n = pt_norm(t, 2.0, 0, NULL, false);
    if (!n)
        return pt_last_status();
    *out = pt_item(n) / sqrt((double)pt_numel(t));
    pt_release(n);
    return PT_OK;
}

/* x = b2 * x + (1 - b2) * mean(q, dim) */
static pt_status ema_mean(pt_tensor *x, const pt_tensor *q, int64_t dim, double b2)
{
    pt_tensor *mean = pt_mean_dim(q, 1, &dim, false);
    pt_status st = mean ? pt_mul_scalar_(x, b2) : pt_last_status();
    if (st == PT_OK)
        st = pt_add_alpha_(x, mean, 1.0 - b2);
    pt_release(mean);
    return st;
}

/* The preconditioned update u for a factored parameter (new reference). */
static pt_tensor *factored_update(pt_tensor *row, pt_tensor *col, const pt_tensor *q,
                                  const pt_tensor *g, double b2)
{
    if (ema_mean(row, q, -1, b2) != PT_OK || ema_mean(col, q, -2, b2) != PT_OK)
        return NULL;
    pt_scope_begin();
    int64_t last = -1;
    pt_tensor *r = pt_unsqueeze(pt_rsqrt(pt_div(row, pt_mean_dim(row, 1, &last, true))), -1);
    pt_tensor *c = pt_unsqueeze(pt_rsqrt(col), -2);
    pt_tensor *u = pt_mul(pt_mul(r, c), g);
    pt_retain(u); /* survives the scope as a plain reference the caller releases */
    pt_scope_end();
    return u;
}

static pt_tensor *precondition(const pt_adafactor_opts *o, pti_param_state *s, const pt_tensor *g,
                               double b2)
{
    pt_tensor *q = pt_square(g);
    if (!q || pt_add_scalar_(q, o->eps[0]) != PT_OK) {
        pt_release(q);
        return NULL;
    }
    pt_tensor *u = NULL;
    if (s->buf[BUF_ROW]) {
        u = factored_update(s->buf[BUF_ROW], s->buf[BUF_COL], q, g, b2);
    } else {
        pt_tensor *v = s->buf[BUF_SQ];
        if (pt_mul_scalar_(v, b2) == PT_OK && pt_add_alpha_(v, q, 1.0 - b2) == PT_OK &&
            (u = pt_rsqrt(v)) && pt_mul_(u, g) != PT_OK) {
            pt_release(u);
            u = NULL;
        }
    }
    pt_release(q);
    return u;
}

static double step_lr(const pt_adafactor_opts *o, double t, double rms)
{
    double lr = o->lr;
    if (o->relative_step) {
        double min_step = o->warmup_init ? 1e-6 * t : 1e-2;
        lr = fmin(min_step, 1.0 / sqrt(t));
    }
    if (o->scale_parameter)
        lr *= fmax(o->eps[1], rms);
    return lr;
}

static pt_status adafactor_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                                  pti_param_state *s)
{
    (void)opt;
    const pt_adafactor_opts *o = opts;
    if (!isnan(o->beta1) && !s->buf[BUF_EXP_AVG])
        return pti_error(PT_ERR_INVALID_ARG, "pt_optim_step: Adafactor beta1 was set after the "
                                             "first step; the state has no exp_avg");
    s->step += 1.0;
    double t = s->step, rms = 0.0, urms = 0.0;
    pt_status st = rms_of(p, &rms);
    if (st != PT_OK)
        return st;
    s->scalar[SCALAR_RMS] = rms;
    double lr = step_lr(o, t, rms);
    pt_tensor *u = precondition(o, s, g, 1.0 - pow(t, o->decay_rate));
    if (!u)
        return pt_last_status();
    st = rms_of(u, &urms);
    if (st == PT_OK)
        st = pt_div_scalar_(u, fmax(urms / o->clip_threshold, 1.0));
    if (st == PT_OK)
        st = pt_mul_scalar_(u, lr);
    const pt_tensor *upd = u;
    if (st == PT_OK && !isnan(o->beta1)) {
        pt_tensor *m = s->buf[BUF_EXP_AVG];
        st = pt_mul_scalar_(m, o->beta1);
        if (st == PT_OK)
            st = pt_add_alpha_(m, u, 1.0 - o->beta1);
        upd = m;
    }
    if (st == PT_OK && o->weight_decay != 0.0)
        st = pt_mul_scalar_(p, 1.0 - o->weight_decay * lr);
    if (st == PT_OK)
        st = pt_sub_(p, upd);
    pt_release(u);
    return st;
}

/* ---- loading: the factored statistics are not shaped like the parameter ------------------- */

static pt_status load_tensor(const pt_value *v, const char *key, int nd, const int64_t *shape,
                             const pt_tensor *p, pt_tensor **out)
{
    pt_tensor *t = pt_value_tensor_ref(v);
    if (!t)
        return pti_error(PT_ERR_FORMAT,
                         "pt_optim_load_state_dict: Adafactor state '%s' must "
                         "be a tensor",
                         key);
    if (pt_ndim(t) != nd || memcmp(pt_shape(t), shape, sizeof(int64_t) * (size_t)nd) != 0)
        return pti_error(PT_ERR_SHAPE,
                         "pt_optim_load_state_dict: Adafactor state '%s' has "
                         "shape %s, expected %s",
                         key, pti_shape_str(pt_ndim(t), pt_shape(t)), pti_shape_str(nd, shape));
    pt_tensor *dst = zeros_shaped(p, nd, shape);
    if (!dst)
        return pt_last_status();
    if (pt_copy_(dst, t) != PT_OK) {
        pti_unref(dst);
        return pt_last_status();
    }
    *out = dst;
    return PT_OK;
}

static pt_status read_num(const pt_value *v, double *out)
{
    if (pt_value_is(v, PT_VALUE_TENSOR)) {
        *out = pt_item(pt_value_tensor_ref(v));
        return PT_OK;
    }
    if (pt_value_as_float(v, out) != PT_OK)
        return pti_error(PT_ERR_FORMAT, "pt_optim_load_state_dict: Adafactor step and RMS must "
                                        "be numbers");
    return PT_OK;
}

static const pt_value *dict_get(const pt_value *d, const char *key)
{
    for (int64_t k = 0; k < pt_value_len(d); k++) {
        const char *s = pt_value_as_str(pt_value_key_ref(d, k), NULL);
        if (s && strcmp(s, key) == 0)
            return pt_value_item_ref(d, k);
    }
    return NULL;
}

static pt_status adafactor_load(pt_optim *o, int group, int i, const pt_value *sv)
{
    const pt_tensor *p = o->groups[group].params[i];
    const pt_adafactor_opts *go = o->groups[group].opts;
    pti_param_state ns = {0};
    pt_status st = PT_OK;
    if (sv && !pt_value_is(sv, PT_VALUE_DICT))
        return pti_error(PT_ERR_FORMAT, "pt_optim_load_state_dict: state must be a dict");
    if (sv) {
        int nd = pt_ndim(p);
        int64_t row[PT_MAX_DIMS], col[PT_MAX_DIMS];
        if (nd >= 2)
            factored_shapes(p, row, col);
        ns.initialized = true;
        for (int k = 0; k < (int)(sizeof(adafactor_state) / sizeof(adafactor_state[0])); k++) {
            const pti_state_entry *e = &adafactor_state[k];
            const pt_value *v = dict_get(sv, e->name);
            /* the step reads these: a missing one would be a NULL buffer there (exp_avg only
             * with beta1; the group's options as they are, the saved ones are not in yet) */
            bool needed = e->kind != PTI_ST_BUF;
            if (e->index == BUF_EXP_AVG)
                needed = needed || !isnan(go->beta1);
            else
                needed = needed || (nd >= 2 ? e->index == BUF_ROW || e->index == BUF_COL
                                            : e->index == BUF_SQ);
            if (!v && needed && st == PT_OK)
                st = pti_error(PT_ERR_FORMAT,
                               "pt_optim_load_state_dict: Adafactor state has no '%s' (the "
                               "algorithm needs it)",
                               e->name);
            if (!v || st != PT_OK)
                continue;
            if (e->kind == PTI_ST_STEP_INT)
                st = read_num(v, &ns.step);
            else if (e->kind == PTI_ST_SCALAR)
                st = read_num(v, &ns.scalar[e->index]);
            else if (e->index == BUF_ROW || e->index == BUF_COL)
                st = nd < 2 ? pti_error(PT_ERR_SHAPE,
                                        "pt_optim_load_state_dict: Adafactor "
                                        "state '%s' for a parameter with < 2 dims",
                                        e->name)
                            : load_tensor(v, e->name, nd - 1, e->index == BUF_ROW ? row : col, p,
                                          &ns.buf[e->index]);
            else
                st = load_tensor(v, e->name, nd, pt_shape(p), p, &ns.buf[e->index]);
        }
    }
    pti_param_state *s = &o->groups[group].state[i];
    pti_param_state *drop = st == PT_OK ? s : &ns;
    for (int k = 0; k < PTI_OPTIM_MAX_BUFS; k++)
        pti_unref(drop->buf[k]);
    if (st == PT_OK)
        *s = ns;
    return st;
}

static const pti_optim_def adafactor_def = {
    .name = "Adafactor",
    .opts_size = sizeof(pt_adafactor_opts),
    .n_hparams = (int)(sizeof(adafactor_hparams) / sizeof(adafactor_hparams[0])),
    .hparams = adafactor_hparams,
    .n_state = (int)(sizeof(adafactor_state) / sizeof(adafactor_state[0])),
    .state = adafactor_state,
    .check_opts = adafactor_check,
    .init_state = adafactor_init,
    .update = adafactor_update,
    .load_param_state = adafactor_load,
};

pt_optim *pt_optim_adafactor(pt_module *m, pt_adafactor_opts o)
{
    return pti_optim_new_module(&adafactor_def, "pt_optim_adafactor", m, &o);
}

pt_optim *pt_optim_adafactor_params(int n, pt_tensor *const *params, pt_adafactor_opts o)
{
    return pti_optim_new(&adafactor_def, "pt_optim_adafactor", n, params, &o);
}
