/* LR scheduler state dicts (pt_lr_scheduler_state_dict / _load_state_dict): each scheduler
 * kind lists its attributes as fields with torch's __dict__ key names and order; one table
 * drives both saving and loading. Loading checks every named key first and applies only
 * when all are valid, so a bad dict leaves the scheduler unchanged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lr_scheduler_internal.h"

typedef enum field_kind {
    F_INT,     /* int64_t *  */
    F_POS,     /* int64_t *, a period or a count that is divided by: must be >= 1 */
    F_NONNEG,  /* int64_t *, a count: must be >= 0 */
    F_FLOAT,   /* double *   */
    F_POSF,    /* double *, a size that is divided by (CyclicLR total_size): finite and > 0 */
    F_RATIO,   /* double *, a fraction that is divided by (CyclicLR step_ratio): in (0, 1] */
    F_BOOL,    /* bool *     */
    F_LIST,    /* double[ng] */
    F_INTLIST, /* int64_t[n] (saved only) */
    F_COUNTER, /* MultiStepLR milestones: {milestone: count} (saved only) */
    F_STR,     /* constant string (saved only) */
    F_NONE,    /* None */
    F_FALSE,   /* False */
    F_NONES,   /* [None] * ng (lr_lambdas) */
    F_CHILDREN /* list of the children's state dicts (saved only) */
} field_kind;

typedef struct field {
    const char *name;
    field_kind kind;
    void *ptr;
    const char *str;
    int n;
} field;

#define MAX_FIELDS 24

static int add(field *f, int n, const char *name, field_kind k, void *ptr)
{
    f[n] = (field){name, k, ptr, NULL, 0};
    return n + 1;
}

static int add_str(field *f, int n, const char *name, const char *str)
{
    f[n] = (field){name, F_STR, NULL, str, 0};
    return n + 1;
}

static int kind_fields(pt_lr_scheduler *s, field *f)
{
    int n = 0;
    switch (s->kind) {
    case PTI_SCHED_STEP:
        n = add(f, n, "step_size", F_POS, &s->step_size);
        n = add(f, n, "gamma", F_FLOAT, &s->gamma);
        break;
    case PTI_SCHED_MULTISTEP:
        n = add(f, n, "milestones", F_COUNTER, s->milestones);
        f[n - 1].n = s->n_milestones;
        n = add(f, n, "gamma", F_FLOAT, &s->gamma);
        break;
    case PTI_SCHED_EXPONENTIAL: n = add(f, n, "gamma", F_FLOAT, &s->gamma); break;
    case PTI_SCHED_COSINE:
        n = add(f, n, "T_max", F_POS, &s->T_max);
        n = add(f, n, "eta_min", F_FLOAT, &s->eta_min);
        break;
    case PTI_SCHED_WARM_RESTARTS:
        n = add(f, n, "T_0", F_POS, &s->T_0);
        n = add(f, n, "T_i", F_POS, &s->T_i);
        n = add(f, n, "T_mult", F_POS, &s->T_mult);
        n = add(f, n, "eta_min", F_FLOAT, &s->eta_min);
        n = add(f, n, "T_cur", F_FLOAT, &s->T_cur);
        break;
    case PTI_SCHED_LINEAR:
        n = add(f, n, "start_factor", F_FLOAT, &s->start_factor);
        n = add(f, n, "end_factor", F_FLOAT, &s->end_factor);
        n = add(f, n, "total_iters", F_POS, &s->total_iters);
        break;
    case PTI_SCHED_CONSTANT:
        n = add(f, n, "factor", F_FLOAT, &s->factor);
        n = add(f, n, "total_iters", F_NONNEG, &s->total_iters);
        break;
    case PTI_SCHED_POLYNOMIAL:
        n = add(f, n, "total_iters", F_POS, &s->total_iters);
        n = add(f, n, "power", F_FLOAT, &s->power);
        break;
    case PTI_SCHED_CYCLIC:
        n = add(f, n, "max_lrs", F_LIST, s->max_lrs);
        n = add(f, n, "total_size", F_POSF, &s->total_size);
        n = add(f, n, "step_ratio", F_RATIO, &s->step_ratio);
        n = add_str(f, n, "mode",
                    s->scale_fn                        ? "custom"
                    : s->mode == PT_CYCLIC_TRIANGULAR2 ? "triangular2"
                    : s->mode == PT_CYCLIC_EXP_RANGE   ? "exp_range"
                                                       : "triangular");
        n = add(f, n, "gamma", F_FLOAT, &s->gamma);
        n = add(f, n, "_scale_fn_custom", F_NONE, NULL);
        n = add_str(f, n, "scale_mode", s->scale_mode_iterations ? "iterations" : "cycle");
        n = add(f, n, "cycle_momentum", F_BOOL, &s->cycle_momentum);
        if (s->cycle_momentum) {
            n = add(f, n, "base_momentums", F_LIST, s->base_moms);
            n = add(f, n, "max_momentums", F_LIST, s->max_moms);
        }
        break;
    case PTI_SCHED_ONE_CYCLE:
        n = add(f, n, "total_steps", F_POS, &s->total_steps);
        n = add(f, n, "cycle_momentum", F_BOOL, &s->cycle_momentum);
        n = add(f, n, "use_beta1", F_BOOL, &s->use_beta1);
        break;
    default: break;
    }
    return n;
}

/* All fields of s in torch's key order. */
static int sched_fields(pt_lr_scheduler *s, field *f)
{
    int n = 0;
    switch (s->kind) {
    case PTI_SCHED_PLATEAU:
        n = add(f, n, "factor", F_FLOAT, &s->factor);
        n = add(f, n, "min_lrs", F_LIST, s->min_lrs);
        n = add(f, n, "patience", F_NONNEG, &s->patience);
        n = add(f, n, "verbose", F_FALSE, NULL);
        n = add(f, n, "cooldown", F_NONNEG, &s->cooldown);
        n = add(f, n, "cooldown_counter", F_NONNEG, &s->cooldown_counter);
        n = add_str(f, n, "mode", s->mode_max ? "max" : "min");
        n = add(f, n, "threshold", F_FLOAT, &s->threshold);
        n = add_str(f, n, "threshold_mode", s->threshold_abs ? "abs" : "rel");
        n = add(f, n, "best", F_FLOAT, &s->best);
        n = add(f, n, "num_bad_epochs", F_NONNEG, &s->num_bad_epochs);
        n = add(f, n, "mode_worse", F_FLOAT, &s->mode_worse);
        n = add(f, n, "eps", F_FLOAT, &s->eps);
        n = add(f, n, "last_epoch", F_INT, &s->last_epoch);
        n = add(f, n, "_last_lr", F_LIST, s->last_lr);
        return n;
    case PTI_SCHED_SEQUENTIAL:
        n = add(f, n, "_milestones", F_INTLIST, s->milestones);
        f[n - 1].n = s->n_milestones;
        n = add(f, n, "last_epoch", F_INT, &s->last_epoch);
        n = add(f, n, "_last_lr", F_LIST, s->last_lr);
        n = add(f, n, "_schedulers", F_CHILDREN, NULL);
        return n;
    case PTI_SCHED_CHAINED:
        n = add(f, n, "_last_lr", F_LIST, s->last_lr);
        n = add(f, n, "_schedulers", F_CHILDREN, NULL);
        return n;
    default: break;
    }
    n = kind_fields(s, f);
    n = add(f, n, "base_lrs", F_LIST, s->base_lrs);
    n = add(f, n, "last_epoch", F_INT, &s->last_epoch);
    n = add(f, n, "verbose", F_FALSE, NULL);
    n = add(f, n, "_step_count", F_INT, &s->step_count);
    n = add(f, n, "_get_lr_called_within_step", F_FALSE, NULL);
    n = add(f, n, "_last_lr", F_LIST, s->last_lr);
    if (s->kind == PTI_SCHED_LAMBDA || s->kind == PTI_SCHED_MULTIPLICATIVE)
        n = add(f, n, "lr_lambdas", F_NONES, NULL);
    return n;
}

/* ---- saving ---------------------------------------------------------------------------------- */

static pt_value *float_list(const double *v, int n)
{
    pt_value *l = pt_value_list();
    for (int i = 0; l && i < n; i++)
        if (pt_value_append(l, pt_value_float(v[i])) != PT_OK) {
            pt_value_free(l);
            return NULL;
        }
    return l;
}

static pt_value *save_field(const pt_lr_scheduler *s, const field *f)
{
    switch (f->kind) {
    case F_INT:
    case F_POS:
    case F_NONNEG: return pt_value_int(*(const int64_t *)f->ptr);
    case F_FLOAT:
    case F_POSF:
    case F_RATIO: return pt_value_float(*(const double *)f->ptr);
    case F_BOOL: return pt_value_bool(*(const bool *)f->ptr);
    case F_LIST: return float_list(f->ptr, s->ng);
    case F_STR: return pt_value_str(f->str);
    case F_NONE: return pt_value_none();
    case F_FALSE: return pt_value_bool(false);
    default: break;
    }
    pt_value *out = f->kind == F_COUNTER ? pt_value_dict() : pt_value_list();
    const int64_t *ms = f->ptr;
    int n = f->kind == F_NONES ? s->ng : f->kind == F_CHILDREN ? s->n_children : f->n;
    for (int i = 0; out && i < n; i++) {
        pt_status st;
        if (f->kind == F_COUNTER) {
            int64_t count = 0;
            for (int j = 0; j < n; j++)
                count += ms[j] == ms[i];
            st = pt_value_dict_set_int(out, ms[i], pt_value_int(count));
        } else if (f->kind == F_INTLIST) {
            st = pt_value_append(out, pt_value_int(ms[i]));
        } else if (f->kind == F_NONES) {
            st = pt_value_append(out, pt_value_none());
        } else {
            st = pt_value_append(out, pt_lr_scheduler_state_dict(s->children[i]));
        }
        if (st != PT_OK) {
            pt_value_free(out);
            return NULL;
        }
    }
    return out;
}

pt_value *pt_lr_scheduler_state_dict(const pt_lr_scheduler *s)
{
    if (!s)
        return pti_error_null(PT_ERR_NULL, "pt_lr_scheduler_state_dict: scheduler is NULL");
    field f[MAX_FIELDS];
    int n = sched_fields((pt_lr_scheduler *)s, f);
    pt_value *d = pt_value_dict();
    for (int i = 0; d && i < n; i++) {
        if (pt_value_dict_set_str(d, f[i].name, save_field(s, &f[i])) != PT_OK) {
            pt_value_free(d);
            return NULL;
        }
    }
    return d;
}

/* ---- loading --------------------------------------------------------------------------------- */

/* Checks (apply false) or stores (apply true) one saved value into field f. */
static pt_status load_field(pt_lr_scheduler *s, const field *f, const pt_value *v, bool apply)
{
    const char *op = "pt_lr_scheduler_load_state_dict";
    switch (f->kind) {
    case F_INT:
    case F_POS:
    case F_NONNEG: {
        int64_t x;
        if (pt_value_as_int(v, &x) != PT_OK)
            return pti_error(PT_ERR_DTYPE, "%s: %s must be an int", op, f->name);
        /* a period of 0 would divide by zero at the next step (SIGFPE in StepLR) */
        if (f->kind == F_POS && x < 1)
            return pti_error(PT_ERR_INVALID_ARG, "%s: %s must be a positive int, got %lld", op,
                             f->name, (long long)x);
        if (f->kind == F_NONNEG && x < 0)
            return pti_error(PT_ERR_INVALID_ARG, "%s: %s must be >= 0, got %lld", op, f->name,
                             (long long)x);
        if (apply)
            *(int64_t *)f->ptr = x;
        return PT_OK;
    }
    case F_FLOAT:
    case F_POSF:
    case F_RATIO: {
        double x;
        if (pt_value_as_float(v, &x) != PT_OK)
            return pti_error(PT_ERR_DTYPE, "%s: %s must be a number", op, f->name);
        /* torch divides by both (ZeroDivisionError at the next step); CyclicLR itself only
         * makes total_size = up + down > 0 and step_ratio = up / total_size in (0, 1] */
        if (f->kind == F_POSF && !(x > 0 && isfinite(x)))
            return pti_error(PT_ERR_INVALID_ARG, "%s: %s must be a finite number > 0, got %g", op,
                             f->name, x);
        if (f->kind == F_RATIO && !(x > 0 && x <= 1))
            return pti_error(PT_ERR_INVALID_ARG, "%s: %s must be in (0, 1], got %g", op, f->name,
                             x);
        if (apply)
            *(double *)f->ptr = x;
        return PT_OK;
    }
    case F_BOOL: {
        bool x;
        if (pt_value_as_bool(v, &x) != PT_OK)
            return pti_error(PT_ERR_DTYPE, "%s: %s must be a bool", op, f->name);
        if (apply)
            *(bool *)f->ptr = x;
        return PT_OK;
    }
    case F_LIST: {
        if (!pt_value_is(v, PT_VALUE_LIST) || pt_value_len(v) != s->ng)
            return pti_error(PT_ERR_INVALID_ARG, "%s: %s must be a list of %d numbers", op, f->name,
                             s->ng);
        for (int g = 0; g < s->ng; g++) {
            double x;
            if (pt_value_as_float(pt_value_item_ref(v, g), &x) != PT_OK)
                return pti_error(PT_ERR_DTYPE, "%s: %s[%d] must be a number", op, f->name, g);
            if (apply)
                ((double *)f->ptr)[g] = x;
        }
        return PT_OK;
    }
    case F_CHILDREN: {
        if (!pt_value_is(v, PT_VALUE_LIST) || pt_value_len(v) != s->n_children)
            return pti_error(PT_ERR_INVALID_ARG, "%s: _schedulers must be a list of %d dicts", op,
                             s->n_children);
        for (int i = 0; i < s->n_children; i++)
            if (!pt_value_is(pt_value_item_ref(v, i), PT_VALUE_DICT))
                return pti_error(PT_ERR_INVALID_ARG, "%s: _schedulers[%d] must be a dict", op, i);
        return PT_OK;
    }
    default: return PT_OK; /* constants and structure are not loaded */
    }
}

pt_status pt_lr_scheduler_load_state_dict(pt_lr_scheduler *s, const pt_value *sd)
{
    const char *op = "pt_lr_scheduler_load_state_dict";
    if (!s || !sd)
        return pti_error(PT_ERR_NULL, "%s: scheduler or state dict is NULL", op);
    if (!pt_value_is(sd, PT_VALUE_DICT))
        return pti_error(PT_ERR_INVALID_ARG, "%s: expected a dict, got %s", op,
                         pt_value_kind_name(pt_value_kind_of(sd)));
    field f[MAX_FIELDS];
    int n = sched_fields(s, f);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            pt_value *v = pt_value_get_str_ref(sd, f[i].name);
            if (!v) {
                pt_clear_error();
                continue;
            }
            pt_status st = load_field(s, &f[i], v, pass == 1);
            if (st != PT_OK)
                return st;
            if (pass == 1 && f[i].kind == F_CHILDREN) {
                for (int c = 0; c < s->n_children; c++) {
                    st = pt_lr_scheduler_load_state_dict(s->children[c], pt_value_item_ref(v, c));
                    if (st != PT_OK)
                        return st;
                }
            }
        }
    }
    return PT_OK;
}
