/* LR schedulers (include/prometorch/lr_scheduler.h): CyclicLR and OneCycleLR (which also
 * cycle momentum or betas[0] in the optimizer's groups), SequentialLR and ChainedScheduler
 * (which own child schedulers), and ReduceLROnPlateau (stepped with a metric). Formulas and
 * evaluation order follow torch 1.13's lr_scheduler.py so results match bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lr_scheduler_internal.h"

/* Copies a per-group array (or fills with the scalar) into a new malloc'd array. */
static double *group_values(const pt_lr_scheduler *s, const double *arr, double v)
{
    double *out = pti_malloc(sizeof(double) * (size_t)s->ng);
    if (!out)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", s->name);
    for (int g = 0; g < s->ng; g++)
        out[g] = arr ? arr[g] : v;
    return out;
}

/* Name of the momentum key cycled in the optimizer ("momentum" or betas[0]), or NULL. */
static pt_status find_momentum(pt_lr_scheduler *s, const char *op)
{
    if (pt_optim_has_option(s->opt, 0, "betas"))
        s->use_beta1 = true;
    else if (!pt_optim_has_option(s->opt, 0, "momentum"))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: optimizer must support momentum with `cycle_momentum` option "
                         "enabled (%s has neither momentum nor betas)",
                         op, pt_optim_name(s->opt));
    return PT_OK;
}

static pt_status set_momentum(pt_lr_scheduler *s, int g, double m)
{
    return s->use_beta1 ? pt_optim_set_option(s->opt, g, "betas", 0, m)
                        : pt_optim_set_option(s->opt, g, "momentum", 0, m);
}

/* ---- CyclicLR -------------------------------------------------------------------------------- */

static double cyclic_scale(const pt_lr_scheduler *s, double x)
{
    if (s->scale_fn)
        return s->scale_fn(x, s->scale_fn_user);
    switch (s->mode) {
    case PT_CYCLIC_TRIANGULAR2: return 1 / pow(2., x - 1);
    case PT_CYCLIC_EXP_RANGE: return pow(s->gamma, x);
    default: return 1.;
    }
}

pt_status pti_sched_cyclic_get_lr(pt_lr_scheduler *s, double *out)
{
    double e = (double)s->last_epoch;
    double cycle = floor(1 + e / s->total_size);
    double x = 1. + e / s->total_size - cycle;
    double scale_factor = x <= s->step_ratio ? x / s->step_ratio : (x - 1) / (s->step_ratio - 1);
    double sc = cyclic_scale(s, s->scale_mode_iterations ? e : cycle);
    for (int g = 0; g < s->ng; g++) {
        double base_height = (s->max_lrs[g] - s->base_lrs[g]) * scale_factor;
        out[g] = s->base_lrs[g] + base_height * sc;
    }
    if (!s->cycle_momentum)
        return PT_OK;
    for (int g = 0; g < s->ng; g++) {
        double base_height = (s->max_moms[g] - s->base_moms[g]) * scale_factor;
        pt_status st = set_momentum(s, g, s->max_moms[g] - base_height * sc);
        if (st != PT_OK)
            return st;
    }
    return PT_OK;
}

static pt_status cyclic_check(const char *op, const pt_cyclic_lr_opts *p)
{
    /* torch divides by total_size = up + down and by step_ratio = up / total_size
     * (ZeroDivisionError when either is 0); an infinite size makes every lr NaN */
    if (!(p->step_size_up > 0) || !isfinite(p->step_size_up))
        return pti_error(PT_ERR_INVALID_ARG, "%s: step_size_up must be a finite number > 0, got %g",
                         op, p->step_size_up);
    if (!(p->step_size_down >= 0) || !isfinite(p->step_size_down))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: step_size_down must be a finite number >= 0 (0: same as "
                         "step_size_up), got %g",
                         op, p->step_size_down);
    if (!isfinite(p->step_size_up + p->step_size_down))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: step_size_up + step_size_down must be finite, got %g + %g", op,
                         p->step_size_up, p->step_size_down);
    if (!p->scale_fn && (p->mode < PT_CYCLIC_TRIANGULAR || p->mode > PT_CYCLIC_EXP_RANGE))
        return pti_error(PT_ERR_INVALID_ARG, "%s: mode is invalid and scale_fn is None", op);
    return PT_OK;
}

pt_lr_scheduler *pt_lr_cyclic_lr(pt_optim *o, pt_cyclic_lr_opts p)
{
    const char *op = "pt_lr_cyclic_lr";
    if (cyclic_check(op, &p) != PT_OK)
        return NULL;
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_CYCLIC, "CyclicLR", op, o);
    if (!s)
        return NULL;
    double *base = group_values(s, p.base_lrs, p.base_lr);
    s->max_lrs = group_values(s, p.max_lrs, p.max_lr);
    if (!base || !s->max_lrs)
        goto fail;
    for (int g = 0; g < s->ng; g++)
        if (pt_optim_set_lr(o, g, base[g]) != PT_OK)
            goto fail;
    double down = p.step_size_down > 0 ? p.step_size_down : p.step_size_up;
    s->total_size = p.step_size_up + down;
    s->step_ratio = p.step_size_up / s->total_size;
    s->mode = p.mode;
    s->gamma = p.gamma;
    s->scale_fn = p.scale_fn;
    s->scale_fn_user = p.scale_fn_user;
    s->scale_mode_iterations = p.scale_fn ? p.scale_mode_iterations : p.mode == PT_CYCLIC_EXP_RANGE;
    s->cycle_momentum = p.cycle_momentum;
    if (p.cycle_momentum) {
        if (find_momentum(s, op) != PT_OK)
            goto fail;
        s->base_moms = group_values(s, NULL, p.base_momentum);
        s->max_moms = group_values(s, NULL, p.max_momentum);
        if (!s->base_moms || !s->max_moms)
            goto fail;
        for (int g = 0; g < s->ng; g++)
            if (set_momentum(s, g, s->base_moms[g]) != PT_OK)
                goto fail;
    }
    /* torch runs the initial step with base_lrs read from initial_lr, then sets base_lrs */
    s = pti_sched_start(s);
    if (s)
        memcpy(s->base_lrs, base, sizeof(double) * (size_t)s->ng);
    free(base);
    return s;
fail:
    free(base);
    pt_lr_scheduler_free(s);
    return NULL;
}

/* ---- OneCycleLR ------------------------------------------------------------------------------ */

static double anneal(const pt_lr_scheduler *s, double start, double end, double pct)
{
    if (s->anneal_linear)
        return (end - start) * pct + start;
    double cos_out = cos(M_PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

static double group_key(const pt_lr_scheduler *s, int g, const char *key)
{
    double v = NAN;
    pt_optim_get_option(s->opt, g, key, 0, &v);
    return v;
}

pt_status pti_sched_one_cycle_get_lr(pt_lr_scheduler *s, double *out)
{
    int64_t step = s->last_epoch;
    if (step > s->total_steps)
        return pti_error(PT_ERR_INVALID_ARG,
                         "OneCycleLR: Tried to step %lld times. The specified number of total "
                         "steps is %lld",
                         (long long)step, (long long)s->total_steps);
    for (int g = 0; g < s->ng; g++) {
        double start = 0, lr = 0, mom = 0;
        for (int i = 0; i < s->n_phases; i++) {
            const pti_one_cycle_phase *ph = &s->phases[i];
            if ((double)step <= ph->end_step || i == s->n_phases - 1) {
                double pct = ((double)step - start) / (ph->end_step - start);
                lr = anneal(s, group_key(s, g, ph->start_lr), group_key(s, g, ph->end_lr), pct);
                if (s->cycle_momentum)
                    mom = anneal(s, group_key(s, g, ph->start_mom), group_key(s, g, ph->end_mom),
                                 pct);
                break;
            }
            start = ph->end_step;
        }
        out[g] = lr;
        if (s->cycle_momentum) {
            pt_status st = set_momentum(s, g, mom);
            if (st != PT_OK)
                return st;
        }
    }
    return PT_OK;
}

static pt_status one_cycle_check(const char *op, pt_one_cycle_lr_opts *p)
{
    if (p->total_steps == 0 && p->epochs == 0 && p->steps_per_epoch == 0)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: You must define either total_steps OR (epochs AND steps_per_epoch)",
                         op);
    if (p->total_steps < 0)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: Expected positive integer total_steps, but got "
                         "%lld",
                         op, (long long)p->total_steps);
    if (p->total_steps == 0) {
        if (p->epochs <= 0 || p->steps_per_epoch <= 0)
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: Expected positive integer epochs and steps_per_epoch, but got "
                             "%lld and %lld",
                             op, (long long)p->epochs, (long long)p->steps_per_epoch);
        p->total_steps = p->epochs * p->steps_per_epoch;
    }
    if (!(p->pct_start >= 0 && p->pct_start <= 1))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: Expected float between 0 and 1 pct_start, but got %g", op,
                         p->pct_start);
    if (!(p->div_factor > 0) || !(p->final_div_factor > 0))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: div_factor and final_div_factor must be > 0, got %g and %g", op,
                         p->div_factor, p->final_div_factor);
    return PT_OK;
}

static void one_cycle_phases(pt_lr_scheduler *s, double pct_start, bool three_phase)
{
    double T = (double)s->total_steps;
    if (three_phase) {
        s->n_phases = 3;
        s->phases[0] = (pti_one_cycle_phase){pct_start * T - 1, "initial_lr", "max_lr",
                                             "max_momentum", "base_momentum"};
        s->phases[1] = (pti_one_cycle_phase){2 * pct_start * T - 2, "max_lr", "initial_lr",
                                             "base_momentum", "max_momentum"};
        s->phases[2] =
            (pti_one_cycle_phase){T - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"};
    } else {
        s->n_phases = 2;
        s->phases[0] = (pti_one_cycle_phase){pct_start * T - 1, "initial_lr", "max_lr",
                                             "max_momentum", "base_momentum"};
        s->phases[1] =
            (pti_one_cycle_phase){T - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"};
    }
}

pt_lr_scheduler *pt_lr_one_cycle_lr(pt_optim *o, pt_one_cycle_lr_opts p)
{
    const char *op = "pt_lr_one_cycle_lr";
    if (one_cycle_check(op, &p) != PT_OK)
        return NULL;
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_ONE_CYCLE, "OneCycleLR", op, o);
    if (!s)
        return NULL;
    s->total_steps = p.total_steps;
    s->anneal_linear = p.anneal_linear;
    one_cycle_phases(s, p.pct_start, p.three_phase);
    for (int g = 0; g < s->ng; g++) {
        double max_lr = p.max_lrs ? p.max_lrs[g] : p.max_lr;
        double initial = max_lr / p.div_factor;
        if (pt_optim_set_option(o, g, "initial_lr", 0, initial) != PT_OK ||
            pt_optim_set_option(o, g, "max_lr", 0, max_lr) != PT_OK ||
            pt_optim_set_option(o, g, "min_lr", 0, initial / p.final_div_factor) != PT_OK)
            goto fail;
    }
    s->cycle_momentum = p.cycle_momentum;
    if (p.cycle_momentum) {
        if (find_momentum(s, op) != PT_OK)
            goto fail;
        for (int g = 0; g < s->ng; g++)
            if (set_momentum(s, g, p.max_momentum) != PT_OK ||
                pt_optim_set_option(o, g, "max_momentum", 0, p.max_momentum) != PT_OK ||
                pt_optim_set_option(o, g, "base_momentum", 0, p.base_momentum) != PT_OK)
                goto fail;
    }
    return pti_sched_start(s);
fail:
    pt_lr_scheduler_free(s);
    return NULL;
}

/* ---- SequentialLR and ChainedScheduler ------------------------------------------------------- */

void pti_sched_free_children(pt_lr_scheduler *s)
{
    for (int i = 0; i < s->n_children; i++)
        pt_lr_scheduler_free(s->children[i]);
    free(s->children);
    s->children = NULL;
    s->n_children = 0;
}

/* Takes ownership of the n schedulers into s->children (freeing them when that fails). */
static pt_status adopt(pt_lr_scheduler *s, int n, pt_lr_scheduler **scheds)
{
    s->children = pti_malloc(sizeof *s->children * (size_t)n);
    if (!s->children) {
        for (int i = 0; i < n; i++)
            pt_lr_scheduler_free(scheds[i]);
        return pti_error(PT_ERR_OOM, "%s: out of memory", s->name);
    }
    memcpy(s->children, scheds, sizeof *s->children * (size_t)n);
    s->n_children = n;
    return PT_OK;
}

/* Checks the children (non-NULL, distinct, over optimizer o); frees them all on error. */
static pt_status check_children(const char *op, pt_optim *o, int n, pt_lr_scheduler **scheds)
{
    pt_status st = PT_OK;
    if (n < 1 || !scheds)
        st = pti_error(PT_ERR_INVALID_ARG, "%s: expected at least one scheduler, got %d", op, n);
    for (int i = 0; st == PT_OK && i < n; i++) {
        if (!scheds[i]) {
            st = pti_error(PT_ERR_NULL, "%s: scheduler %d is NULL", op, i);
        } else if (scheds[i]->opt != o) {
            st = pti_error(PT_ERR_INVALID_ARG,
                           "%s: expects all schedulers to belong to the same optimizer, but got "
                           "scheduler at index %d to be different",
                           op, i);
        } else if (scheds[i]->kind == PTI_SCHED_PLATEAU) {
            st = pti_error(PT_ERR_INVALID_ARG, "%s: ReduceLROnPlateau cannot be chained", op);
        }
        for (int j = 0; st == PT_OK && j < i; j++)
            if (scheds[j] == scheds[i])
                st = pti_error(PT_ERR_INVALID_ARG, "%s: scheduler %d is listed twice", op, i);
    }
    if (st != PT_OK && scheds) {
        for (int i = 0; i < n; i++) {
            bool dup = false;
            for (int j = 0; j < i; j++)
                dup = dup || scheds[j] == scheds[i];
            if (!dup)
                pt_lr_scheduler_free(scheds[i]);
        }
    }
    return st;
}

static void free_all(int n, pt_lr_scheduler **scheds)
{
    for (int i = 0; i < n; i++)
        pt_lr_scheduler_free(scheds[i]);
}

pt_lr_scheduler *pt_lr_sequential_lr(pt_optim *o, int n, pt_lr_scheduler **scheds,
                                     const int64_t *milestones)
{
    const char *op = "pt_lr_sequential_lr";
    if (check_children(op, o, n, scheds) != PT_OK)
        return NULL;
    pt_status st = PT_OK;
    if (n > 1 && !milestones)
        st = pti_error(PT_ERR_INVALID_ARG, "%s: expects %d milestones, got NULL", op, n - 1);
    for (int i = 1; st == PT_OK && i < n - 1; i++)
        if (milestones[i] <= milestones[i - 1])
            st = pti_error(PT_ERR_INVALID_ARG,
                           "%s: milestones must be increasing, got %lld "
                           "after %lld",
                           op, (long long)milestones[i], (long long)milestones[i - 1]);
    pt_lr_scheduler *s =
        st == PT_OK ? pti_sched_alloc(PTI_SCHED_SEQUENTIAL, "SequentialLR", op, o) : NULL;
    if (s && n > 1)
        s->milestones = pti_malloc(sizeof(int64_t) * (size_t)(n - 1));
    if (!s || (n > 1 && !s->milestones)) {
        if (s && !s->milestones)
            pti_error(PT_ERR_OOM, "%s: out of memory", op);
        pt_lr_scheduler_free(s);
        free_all(n, scheds);
        return NULL;
    }
    if (n > 1)
        memcpy(s->milestones, milestones, sizeof(int64_t) * (size_t)(n - 1));
    s->n_milestones = n - 1;
    if (adopt(s, n, scheds) != PT_OK) {
        pt_lr_scheduler_free(s);
        return NULL;
    }
    s->last_epoch = 0;
    /* torch: reset lrs to initial_lr, undo the children's initial steps, redo the first's */
    for (int g = 0; g < s->ng; g++) {
        double init = 0;
        if (pt_optim_get_option(o, g, "initial_lr", 0, &init) != PT_OK ||
            pt_optim_set_lr(o, g, init) != PT_OK) {
            pt_lr_scheduler_free(s);
            return NULL;
        }
    }
    for (int i = 0; i < n; i++)
        s->children[i]->last_epoch -= 1;
    pt_lr_scheduler *first = s->children[0];
    first->step_count = 0;
    st = pt_lr_scheduler_step(first);
    if (st != PT_OK) {
        pt_lr_scheduler_free(s);
        return NULL;
    }
    memcpy(s->last_lr, first->last_lr, sizeof(double) * (size_t)s->ng);
    return s;
}

pt_status pti_sched_sequential_step(pt_lr_scheduler *s)
{
    s->last_epoch++;
    int lo = 0, hi = s->n_milestones;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->last_epoch < s->milestones[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    pt_lr_scheduler *c = s->children[lo];
    pt_status st;
    if (lo > 0 && s->milestones[lo - 1] == s->last_epoch)
        st = pt_lr_scheduler_step_epoch(c, 0);
    else
        st = pt_lr_scheduler_step(c);
    if (st == PT_OK)
        memcpy(s->last_lr, c->last_lr, sizeof(double) * (size_t)s->ng);
    return st;
}

pt_lr_scheduler *pt_lr_chained_scheduler(int n, pt_lr_scheduler **scheds)
{
    const char *op = "pt_lr_chained_scheduler";
    pt_optim *o = (n >= 1 && scheds && scheds[0]) ? scheds[0]->opt : NULL;
    if (check_children(op, o, n, scheds) != PT_OK)
        return NULL;
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_CHAINED, "ChainedScheduler", op, o);
    if (!s) {
        free_all(n, scheds);
        return NULL;
    }
    if (adopt(s, n, scheds) != PT_OK) {
        pt_lr_scheduler_free(s);
        return NULL;
    }
    s->last_epoch = scheds[n - 1]->last_epoch;
    for (int g = 0; g < s->ng; g++)
        s->last_lr[g] = pt_optim_get_lr(o, g);
    return s;
}

pt_status pti_sched_chained_step(pt_lr_scheduler *s)
{
    for (int i = 0; i < s->n_children; i++) {
        pt_status st = pt_lr_scheduler_step(s->children[i]);
        if (st != PT_OK)
            return st;
    }
    s->last_epoch = s->children[s->n_children - 1]->last_epoch;
    for (int g = 0; g < s->ng; g++)
        s->last_lr[g] = pt_optim_get_lr(s->opt, g);
    return PT_OK;
}

/* ---- ReduceLROnPlateau ----------------------------------------------------------------------- */

pt_lr_scheduler *pt_lr_reduce_on_plateau(pt_optim *o, pt_reduce_on_plateau_opts p)
{
    const char *op = "pt_lr_reduce_on_plateau";
    if (!(p.factor < 1.0) || !(p.factor > 0))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: Factor should be < 1.0 (and > 0), got %g",
                              op, p.factor);
    if (p.patience < 0 || p.cooldown < 0 || !(p.threshold >= 0) || !(p.eps >= 0))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: patience, cooldown, threshold and eps must be >= 0", op);
    pt_lr_scheduler *s = pti_sched_alloc(PTI_SCHED_PLATEAU, "ReduceLROnPlateau", op, o);
    if (!s)
        return NULL;
    s->min_lrs = group_values(s, p.min_lrs, p.min_lr);
    if (!s->min_lrs) {
        pt_lr_scheduler_free(s);
        return NULL;
    }
    for (int g = 0; g < s->ng; g++) {
        if (!(s->min_lrs[g] >= 0)) {
            pt_lr_scheduler_free(s);
            return pti_error_null(PT_ERR_INVALID_ARG, "%s: min_lr must be >= 0", op);
        }
        s->last_lr[g] = pt_optim_get_lr(o, g);
    }
    s->factor = p.factor;
    s->patience = p.patience;
    s->threshold = p.threshold;
    s->threshold_abs = p.threshold_abs;
    s->cooldown = p.cooldown;
    s->eps = p.eps;
    s->mode_max = p.mode_max;
    s->mode_worse = p.mode_max ? -INFINITY : INFINITY;
    s->best = s->mode_worse;
    s->last_epoch = 0;
    return s;
}

static bool plateau_is_better(const pt_lr_scheduler *s, double a, double best)
{
    if (!s->mode_max)
        return s->threshold_abs ? a < best - s->threshold : a < best * (1. - s->threshold);
    return s->threshold_abs ? a > best + s->threshold : a > best * (s->threshold + 1.);
}

pt_status pt_lr_scheduler_step_metric(pt_lr_scheduler *s, double metric)
{
    if (!s)
        return pti_error(PT_ERR_NULL, "pt_lr_scheduler_step_metric: scheduler is NULL");
    if (s->kind != PTI_SCHED_PLATEAU)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_lr_scheduler_step_metric: %s takes no metric: use "
                         "pt_lr_scheduler_step",
                         s->name);
    s->last_epoch++;
    if (plateau_is_better(s, metric, s->best)) {
        s->best = metric;
        s->num_bad_epochs = 0;
    } else {
        s->num_bad_epochs++;
    }
    if (s->cooldown_counter > 0) {
        s->cooldown_counter--;
        s->num_bad_epochs = 0;
    }
    if (s->num_bad_epochs > s->patience) {
        for (int g = 0; g < s->ng; g++) {
            double old_lr = pt_optim_get_lr(s->opt, g);
            double new_lr = old_lr * s->factor;
            if (new_lr < s->min_lrs[g])
                new_lr = s->min_lrs[g];
            if (old_lr - new_lr > s->eps) {
                pt_status st = pt_optim_set_lr(s->opt, g, new_lr);
                if (st != PT_OK)
                    return st;
            }
        }
        s->cooldown_counter = s->cooldown;
        s->num_bad_epochs = 0;
    }
    for (int g = 0; g < s->ng; g++)
        s->last_lr[g] = pt_optim_get_lr(s->opt, g);
    return PT_OK;
}
