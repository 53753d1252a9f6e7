/* LR schedulers (include/prometorch/lr_scheduler.h), the base and the simple kinds.
 *
 * Design: one pt_lr_scheduler struct with a kind tag. Every step follows torch 1.13's
 * _LRScheduler.step: step_count += 1, then either last_epoch += 1 and the recursive get_lr()
 * (which reads the groups' current lr, so the floating-point sequence is torch's), or with an
 * explicit epoch last_epoch = epoch and the closed form where torch defines one. The new lrs
 * go into the optimizer's groups and into last_lr. The cyclic, composite and plateau kinds are
 * in lr_scheduler_cyclic.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lr_scheduler_internal.h"
#include "optim_internal.h"

/* Python's a % b for b > 0 (the result has b's sign). */
static int64_t py_mod(int64_t a, int64_t b)
{
    int64_t r = a % b;
    return r < 0 ? r + b : r;
}

/* Python's a // b for b > 0. */
static int64_t py_floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* bisect_right(milestones, x) over a sorted array. */
static int bisect_right(int n, const int64_t *ms, int64_t x)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (x < ms[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* ---- allocation and the initial step --------------------------------------------------------- */

pt_lr_scheduler *pti_sched_alloc(pti_sched_kind kind, const char *name, const char *op, pt_optim *o)
{
    if (!o)
        return pti_error_null(PT_ERR_NULL, "%s: optimizer is NULL", op);
    int ng = pt_optim_num_groups(o);
    if (ng < 1)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: the optimizer has no parameter groups", op);
    pt_lr_scheduler *s = pti_calloc(1, sizeof *s);
    if (!s)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    s->kind = kind;
    s->name = name;
    s->opt = o;
    s->ng = ng;
    s->last_epoch = -1;
    s->base_lrs = pti_calloc((size_t)ng, sizeof(double));
    s->last_lr = pti_calloc((size_t)ng, sizeof(double));
    s->tmp = pti_calloc((size_t)ng, sizeof(double));
    if (!s->base_lrs || !s->last_lr || !s->tmp) {
        pt_lr_scheduler_free(s);
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    }
    return s;
}

/* group['lr'] = lr without pt_optim_set_lr's check: torch's schedulers assign any value (a
 * linear OneCycleLR stepped total_steps times ends slightly below zero). */
static void write_lr(pt_optim *o, int g, double lr)
{
    const pti_optim_def *def = o->def;
    for (int k = 0; k < def->n_hparams; k++) {
        if (strcmp(def->hparams[k].name, "lr") == 0) {
            *(double *)((char *)o->groups[g].opts + def->hparams[k].offset) = lr;
            return;
        }
    }
}

pt_status pti_sched_apply(pt_lr_scheduler *s, const double *lrs)
{
    if (pt_optim_num_groups(s->opt) != s->ng)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: the optimizer has %d parameter groups, the scheduler was built "
                         "for %d",
                         s->name, pt_optim_num_groups(s->opt), s->ng);
    for (int g = 0; g < s->ng; g++)
        write_lr(s->opt, g, lrs[g]);
    for (int g = 0; g < s->ng; g++)
        s->last_lr[g] = pt_optim_get_lr(s->opt, g);
    return PT_OK;
}

static pt_status wr_step(pt_lr_scheduler *s, bool has_epoch, double epoch);

pt_lr_scheduler *pti_sched_start(pt_lr_scheduler *s)
{
    if (!s)
        return NULL;
    for (int g = 0; g < s->ng; g++) {
        if (!pt_optim_has_option(s->opt, g, "initial_lr") &&
            pt_optim_set_option(s->opt, g, "initial_lr", 0, pt_optim_get_lr(s->opt, g)) != PT_OK)
            goto fail;
        if (pt_optim_get_option(s->opt, g, "initial_lr", 0, &s->base_lrs[g]) != PT_OK)
            goto fail;
    }
    s->step_count = 0;
    pt_status st =
        s->kind == PTI_SCHED_WARM_RESTARTS ? wr_step(s, false, 0) : pti_sched_base_step(s);
    if (st == PT_OK)
        return s;
fail:
    pt_lr_scheduler_free(s);
    return NULL;
}

/* ---- get_lr (recursive) and closed forms ----------------------------------------------------- */

static double group_lr(const pt_lr_scheduler *s, int g)
{
    return pt_optim_get_lr(s->opt, g);
}

static void cosine_get_lr(const pt_lr_scheduler *s, double *out)
{
    int64_t e = s->last_epoch, T = s->T_max;
    for (int g = 0; g < s->ng; g++) {
        double lr = group_lr(s, g), base = s->base_lrs[g];
        if (e == 0)
            out[g] = lr;
        else if (s->step_count == 1 && e > 0)
            out[g] = s->eta_min + (base - s->eta_min) * (1 + cos((double)e * M_PI / (double)T)) / 2;
        else if (py_mod(e - 1 - T, 2 * T) == 0)
            out[g] = lr + (base - s->eta_min) * (1 - cos(M_PI / (double)T)) / 2;
        else
            out[g] = (1 + cos(M_PI * (double)e / (double)T)) /
                         (1 + cos(M_PI * (double)(e - 1) / (double)T)) * (lr - s->eta_min) +
                     s->eta_min;
    }
}

static void linear_get_lr(const pt_lr_scheduler *s, double *out)
{
    int64_t e = s->last_epoch;
    for (int g = 0; g < s->ng; g++) {
        double lr = group_lr(s, g);
        if (e == 0)
            out[g] = lr * s->start_factor;
        else if (e > s->total_iters)
            out[g] = lr;
        else
            out[g] = lr * (1. + (s->end_factor - s->start_factor) /
                                    ((double)s->total_iters * s->start_factor +
                                     (double)(e - 1) * (s->end_factor - s->start_factor)));
    }
}

static double warmup_cosine_lambda(int64_t step, void *user)
{
    const pt_lr_scheduler *s = user;
    if (step < s->warmup_steps)
        return (double)step / (double)(s->warmup_steps > 1 ? s->warmup_steps : 1);
    int64_t span = s->total_steps - s->warmup_steps;
    double progress = (double)(step - s->warmup_steps) / (double)(span > 1 ? span : 1);
    double f = 0.5 * (1.0 + cos(M_PI * s->num_cycles * 2.0 * progress));
    f = f * (1 - s->min_lr_ratio) + s->min_lr_ratio;
    return f > 0.0 ? f : 0.0;
}

/* torch's get_lr() for the simple kinds (the others are in lr_scheduler_cyclic.c). */
static pt_status simple_get_lr(pt_lr_scheduler *s, double *out)
{
    int64_t e = s->last_epoch;
    for (int g = 0; g < s->ng; g++) {
        double lr = group_lr(s, g);
        switch (s->kind) {
        case PTI_SCHED_STEP:
            out[g] = (e == 0 || py_mod(e, s->step_size) != 0) ? lr : lr * s->gamma;
            break;
        case PTI_SCHED_MULTISTEP: {
            int k = 0;
            for (int i = 0; i < s->n_milestones; i++)
                k += s->milestones[i] == e;
            out[g] = k == 0 ? lr : lr * pow(s->gamma, (double)k);
            break;
        }
        case PTI_SCHED_EXPONENTIAL: out[g] = e == 0 ? lr : lr * s->gamma; break;
        case PTI_SCHED_CONSTANT:
            if (e == 0)
                out[g] = lr * s->factor;
            else if (e != s->total_iters)
                out[g] = lr;
            else
                out[g] = lr * (1.0 / s->factor);
            break;
        case PTI_SCHED_POLYNOMIAL:
            if (e == 0 || e > s->total_iters) {
                out[g] = lr;
            } else {
                double T = (double)s->total_iters;
                double d = pow((1.0 - (double)e / T) / (1.0 - (double)(e - 1) / T), s->power);
                out[g] = lr * d;
            }
            break;
        case PTI_SCHED_LAMBDA: out[g] = s->base_lrs[g] * s->fn(e, s->user); break;
        case PTI_SCHED_MULTIPLICATIVE: out[g] = e > 0 ? lr * s->fn(e, s->user) : lr; break;
        default: return pti_error(PT_ERR_RUNTIME, "%s: no get_lr", s->name);
        }
    }
    return PT_OK;
}

static pt_status get_lr(pt_lr_scheduler *s, double *out)
{
    switch (s->kind) {
    case PTI_SCHED_COSINE: cosine_get_lr(s, out); return PT_OK;
    case PTI_SCHED_LINEAR: linear_get_lr(s, out); return PT_OK;
    case PTI_SCHED_WARM_RESTARTS:
        for (int g = 0; g < s->ng; g++)
            out[g] = s->eta_min + (s->base_lrs[g] - s->eta_min) *
                                      (1 + cos(M_PI * s->T_cur / (double)s->T_i)) / 2;
        return PT_OK;
    case PTI_SCHED_CYCLIC: return pti_sched_cyclic_get_lr(s, out);
    case PTI_SCHED_ONE_CYCLE: return pti_sched_one_cycle_get_lr(s, out);
    default: return simple_get_lr(s, out);
    }
}

/* torch's _get_closed_form_lr; false for kinds without one. */
static bool closed_form_lr(const pt_lr_scheduler *s, double *out)
{
    int64_t e = s->last_epoch;
    for (int g = 0; g < s->ng; g++) {
        double b = s->base_lrs[g];
        switch (s->kind) {
        case PTI_SCHED_STEP:
            out[g] = b * pow(s->gamma, (double)py_floordiv(e, s->step_size));
            break;
        case PTI_SCHED_MULTISTEP:
            out[g] = b * pow(s->gamma, (double)bisect_right(s->n_milestones, s->milestones, e));
            break;
        case PTI_SCHED_EXPONENTIAL: out[g] = b * pow(s->gamma, (double)e); break;
        case PTI_SCHED_COSINE:
            out[g] =
                s->eta_min + (b - s->eta_min) * (1 + cos(M_PI * (double)e / (double)s->T_max)) / 2;
            break;
        case PTI_SCHED_LINEAR: {
            int64_t m = e < s->total_iters ? e : s->total_iters;
            out[g] = b * (s->start_factor +
                          (s->end_factor - s->start_factor) * (double)m / (double)s->total_iters);
            break;
        }
        case PTI_SCHED_CONSTANT:
            out[g] = b * (s->factor + (e >= s->total_iters ? 1.0 - s->factor : 0.0));
            break;
        case PTI_SCHED_POLYNOMIAL: {
            int64_t m = e < s->total_iters ? e : s->total_iters;
            out[g] = b * pow(1.0 - (double)m / (double)s->total_iters, s->power);
            break;
        }
        default: return false;
        }
    }
    return true;
}

/* ---- stepping -------------------------------------------------------------------------------- */

pt_status pti_sched_base_step(pt_lr_scheduler *s)
{
    s->step_count++;
    s->last_epoch++;
    pt_status st = get_lr(s, s->tmp);
    return st == PT_OK ? pti_sched_apply(s, s->tmp) : st;
}

/* step(epoch) of the base class: closed form where defined, else get_lr at that epoch. */
static pt_status base_step_epoch(pt_lr_scheduler *s, int64_t epoch)
{
    s->step_count++;
    s->last_epoch = epoch;
    if (!closed_form_lr(s, s->tmp)) {
        pt_status st = get_lr(s, s->tmp);
        if (st != PT_OK)
            return st;
    }
    return pti_sched_apply(s, s->tmp);
}

/* CosineAnnealingWarmRestarts.step(epoch); its step does not count _step_count (as torch). */
static pt_status wr_step(pt_lr_scheduler *s, bool has_epoch, double epoch)
{
    if (!has_epoch && s->last_epoch < 0) {
        has_epoch = true;
        epoch = 0;
    }
    if (!has_epoch) {
        epoch = (double)(s->last_epoch + 1);
        s->T_cur = s->T_cur + 1;
        if (s->T_cur >= (double)s->T_i) {
            s->T_cur = s->T_cur - (double)s->T_i;
            s->T_i = s->T_i * s->T_mult;
        }
    } else {
        if (epoch < 0)
            return pti_error(PT_ERR_INVALID_ARG, "%s: Expected non-negative epoch, but got %g",
                             s->name, epoch);
        double T0 = (double)s->T_0;
        if (epoch >= T0) {
            if (s->T_mult == 1) {
                s->T_cur = fmod(epoch, T0);
            } else {
                double tm = (double)s->T_mult;
                int64_t n = (int64_t)(log(epoch / T0 * (tm - 1) + 1) / log(tm));
                double p = 1;
                for (int64_t i = 0; i < n; i++)
                    p *= tm;
                s->T_cur = epoch - (double)(s->T_0 * ((int64_t)p - 1)) / (tm - 1);
                s->T_i = s->T_0 * (int64_t)p;
            }
        } else {
            s->T_i = s->T_0;
            s->T_cur = epoch;
        }
    }
    s->last_epoch = (int64_t)floor(epoch);
    get_lr(s, s->tmp);
    return pti_sched_apply(s, s->tmp);
}

pt_status pt_lr_scheduler_step(pt_lr_scheduler *s)
{
    if (!s)
        return pti_error(PT_ERR_NULL, "pt_lr_scheduler_step: scheduler is NULL");
    switch (s->kind) {
    case PTI_SCHED_WARM_RESTARTS: return wr_step(s, false, 0);
    case PTI_SCHED_SEQUENTIAL: return pti_sched_sequential_step(s);
    case PTI_SCHED_CHAINED: return pti_sched_chained_step(s);
    case PTI_SCHED_PLATEAU:
        return pti_error(PT_ERR_INVALID_ARG, "pt_lr_scheduler_step: ReduceLROnPlateau needs a "
                                             "metric: use pt_lr_scheduler_step_metric");
    default: return pti_sched_base_step(s);
    }
}

pt_status pt_lr_scheduler_step_epoch(pt_lr_scheduler *s, double epoch)
{
    if (!s)
        return pti_error(PT_ERR_NULL, "pt_lr_scheduler_step_epoch: scheduler is NULL");
    switch (s->kind) {
    case PTI_SCHED_WARM_RESTARTS: return wr_step(s, true, epoch);
    case PTI_SCHED_SEQUENTIAL:
    case PTI_SCHED_CHAINED:
    case PTI_SCHED_PLATEAU:
        return pti_error(PT_ERR_INVALID_ARG, "pt_lr_scheduler_step_epoch: %s has no step(epoch)",
                         s->name);
    default:
        if (!isfinite(epoch) || epoch != floor(epoch) || fabs(epoch) > 1e15)
            return pti_error(PT_ERR_INVALID_ARG,
                             "pt_lr_scheduler_step_epoch: %s needs an integral epoch, got %g",
                             s->name, epoch);
        return base_step_epoch(s, (int64_t)epoch);
    }
}

double pt_lr_scheduler_get_last_lr(const pt_lr_scheduler *s, int group)
{
    if (!s) {
        pti_error(PT_ERR_NULL, "pt_lr_scheduler_get_last_lr: scheduler is NULL");
        return NAN;
    }
    if (group < 0 || group >= s->ng) {
        pti_error(PT_ERR_INDEX, "pt_lr_scheduler_get_last_lr: group %d out of range [0, %d)", group,
                  s->ng);
        return NAN;
    }
    return s->last_lr[group];
}

int64_t pt_lr_scheduler_last_epoch(const pt_lr_scheduler *s)
{
    return s ? s->last_epoch : -1;
}

const char *pt_lr_scheduler_name(const pt_lr_scheduler *s)
{
    return s ? s->name : NULL;
}

pt_optim *pt_lr_scheduler_optimizer(const pt_lr_scheduler *s)
{
    return s ? s->opt : NULL;
}

void pt_lr_scheduler_free(pt_lr_scheduler *s)
{
    if (!s)
        return;
    pti_sched_free_children(s);
    free(s->base_lrs);
    free(s->last_lr);
    free(s->tmp);
    free(s->milestones);
    free(s->max_lrs);
    free(s->base_moms);
    free(s->max_moms);
    free(s->min_lrs);
    free(s);
}

/* ---- constructors ---------------------------------------------------------------------------- */

pt_lr_scheduler *pt_lr_step_lr(pt_optim *o, int64_t step_size, double gamma)
{
    const char *op = "pt_lr_step_lr";
    if (step_size <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: step_size must be > 0, got %lld", op,
                              (long long)step_size);
    if (!(gamma > 0))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: gamma must be > 0, got %g", op, gamma);
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_STEP, "StepLR", op, o);
    if (!s)
        return NULL;
    s->step_size = step_size;
    s->gamma = gamma;
    return pti_sched_start(s);
}

pt_lr_scheduler *pt_lr_multistep_lr(pt_optim *o, int n, const int64_t *milestones, double gamma)
{
    const char *op = "pt_lr_multistep_lr";
    if (n < 0 || (n > 0 && !milestones))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: bad milestone list (n = %d)", op, n);
    for (int i = 1; i < n; i++)
        if (milestones[i] < milestones[i - 1])
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  "%s: milestones must be sorted, got %lld after %lld", op,
                                  (long long)milestones[i], (long long)milestones[i - 1]);
    if (!(gamma > 0))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: gamma must be > 0, got %g", op, gamma);
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_MULTISTEP, "MultiStepLR", op, o);
    if (!s)
        return NULL;
    s->milestones = pti_malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!s->milestones) {
        pt_lr_scheduler_free(s);
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    }
    if (n > 0)
        memcpy(s->milestones, milestones, sizeof(int64_t) * (size_t)n);
    s->n_milestones = n;
    s->gamma = gamma;
    return pti_sched_start(s);
}

pt_lr_scheduler *pt_lr_exponential_lr(pt_optim *o, double gamma)
{
    const char *op = "pt_lr_exponential_lr";
    if (!(gamma > 0))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: gamma must be > 0, got %g", op, gamma);
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_EXPONENTIAL, "ExponentialLR", op, o);
    if (!s)
        return NULL;
    s->gamma = gamma;
    return pti_sched_start(s);
}

pt_lr_scheduler *pt_lr_cosine_annealing_lr(pt_optim *o, int64_t T_max, double eta_min)
{
    const char *op = "pt_lr_cosine_annealing_lr";
    if (T_max <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: T_max must be > 0, got %lld", op,
                              (long long)T_max);
    if (!isfinite(eta_min))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: eta_min must be finite", op);
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_COSINE, "CosineAnnealingLR", op, o);
    if (!s)
        return NULL;
    s->T_max = T_max;
    s->eta_min = eta_min;
    return pti_sched_start(s);
}

pt_lr_scheduler *pt_lr_cosine_annealing_warm_restarts(pt_optim *o, int64_t T_0, int64_t T_mult,
                                                      double eta_min)
{
    const char *op = "pt_lr_cosine_annealing_warm_restarts";
    if (T_0 <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: Expected positive integer T_0, but got %lld",
                              op, (long long)T_0);
    if (T_mult < 1)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: Expected integer T_mult >= 1, but got %lld",
                              op, (long long)T_mult);
    pt_lr_scheduler *s =
        pti_sched_alloc(PTI_SCHED_WARM_RESTARTS, "CosineAnnealingWarmRestarts", op, o);
    if (!s)
        return NULL;
    s->T_0 = T_0;
    s->T_i = T_0;
    s->T_mult = T_mult;
    s->eta_min = eta_min;
    s->T_cur = -1; /* torch: T_cur = last_epoch */
    return pti_sched_start(s);
}

pt_lr_scheduler *pt_lr_linear_lr(pt_optim *o, double start_factor, double end_factor,
                                 int64_t total_iters)
{
    const char *op = "pt_lr_linear_lr";
    if (!(start_factor > 0 && start_factor <= 1))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: Starting multiplicative factor expected to be greater than 0 "
                              "and less or equal to 1, got %g",
                              op, start_factor);
    if (!(end_factor >= 0 && end_factor <= 1))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: Ending multiplicative factor expected to be between 0 and 1, "
                              "got %g",
                              op, end_factor);
    if (total_iters <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: total_iters must be > 0, got %lld", op,
                              (long long)total_iters);
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_LINEAR, "LinearLR", op, o);
    if (!s)
        return NULL;
    s->start_factor = start_factor;
    s->end_factor = end_factor;
    s->total_iters = total_iters;
    return pti_sched_start(s);
}

pt_lr_scheduler *pt_lr_constant_lr(pt_optim *o, double factor, int64_t total_iters)
{
    const char *op = "pt_lr_constant_lr";
    if (!(factor > 0 && factor <= 1))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: Constant multiplicative factor expected to be between 0 and 1, "
                              "got %g",
                              op, factor);
    if (total_iters < 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: total_iters must be >= 0, got %lld", op,
                              (long long)total_iters);
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_CONSTANT, "ConstantLR", op, o);
    if (!s)
        return NULL;
    s->factor = factor;
    s->total_iters = total_iters;
    return pti_sched_start(s);
}

pt_lr_scheduler *pt_lr_polynomial_lr(pt_optim *o, int64_t total_iters, double power)
{
    const char *op = "pt_lr_polynomial_lr";
    if (total_iters <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: total_iters must be > 0, got %lld", op,
                              (long long)total_iters);
    if (!isfinite(power))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: power must be finite", op);
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_POLYNOMIAL, "PolynomialLR", op, o);
    if (!s)
        return NULL;
    s->total_iters = total_iters;
    s->power = power;
    return pti_sched_start(s);
}

static pt_lr_scheduler *lambda_new(pti_sched_kind kind, const char *name, const char *op,
                                   pt_optim *o, pt_lr_lambda_fn fn, void *user)
{
    if (!fn)
        return pti_error_null(PT_ERR_NULL, "%s: lr_lambda is NULL", op);
    pt_lr_scheduler *s = pti_sched_alloc(kind, name, op, o);
    if (!s)
        return NULL;
    s->fn = fn;
    s->user = user;
    return s;
}

pt_lr_scheduler *pt_lr_lambda_lr(pt_optim *o, pt_lr_lambda_fn fn, void *user)
{
    return pti_sched_start(
        lambda_new(PTI_SCHED_LAMBDA, "LambdaLR", "pt_lr_lambda_lr", o, fn, user));
}

pt_lr_scheduler *pt_lr_multiplicative_lr(pt_optim *o, pt_lr_lambda_fn fn, void *user)
{
    return pti_sched_start(lambda_new(PTI_SCHED_MULTIPLICATIVE, "MultiplicativeLR",
                                      "pt_lr_multiplicative_lr", o, fn, user));
}

pt_lr_scheduler *pt_lr_cosine_with_warmup(pt_optim *o, int64_t warmup_steps, int64_t total_steps,
                                          double num_cycles, double min_lr_ratio)
{
    const char *op = "pt_lr_cosine_with_warmup";
    if (warmup_steps < 0 || total_steps < warmup_steps)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: need 0 <= warmup_steps <= total_steps, got %lld and %lld", op,
                              (long long)warmup_steps, (long long)total_steps);
    if (!(min_lr_ratio >= 0 && min_lr_ratio <= 1) || !isfinite(num_cycles))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: min_lr_ratio must be in [0, 1] and num_cycles finite, got %g "
                              "and %g",
                              op, min_lr_ratio, num_cycles);
    pt_lr_scheduler *s =
        lambda_new(PTI_SCHED_LAMBDA, "LambdaLR", op, o, warmup_cosine_lambda, NULL);
    if (!s)
        return NULL;
    s->user = s;
    s->warmup_steps = warmup_steps;
    s->total_steps = total_steps;
    s->num_cycles = num_cycles;
    s->min_lr_ratio = min_lr_ratio;
    return pti_sched_start(s);
}
