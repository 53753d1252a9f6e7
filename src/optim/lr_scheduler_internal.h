/* Internal layout of pt_lr_scheduler shared by src/optim/lr_scheduler*.c: one struct for every
 * scheduler kind (a kind tag plus the fields each kind uses), and the helpers the files share.
 * lr_scheduler.c holds the base (initial step, step loop, simple get_lr/closed forms, state
 * dicts); lr_scheduler_cyclic.c the CyclicLR, OneCycleLR, SequentialLR, ChainedScheduler and
 * ReduceLROnPlateau kinds. */
#ifndef PT_LR_SCHEDULER_INTERNAL_H
#define PT_LR_SCHEDULER_INTERNAL_H

#include "../core/internal.h"
#include "prometorch/lr_scheduler.h"

typedef enum pti_sched_kind {
    PTI_SCHED_STEP,
    PTI_SCHED_MULTISTEP,
    PTI_SCHED_EXPONENTIAL,
    PTI_SCHED_COSINE,
    PTI_SCHED_WARM_RESTARTS,
    PTI_SCHED_LINEAR,
    PTI_SCHED_CONSTANT,
    PTI_SCHED_POLYNOMIAL,
    PTI_SCHED_LAMBDA,
    PTI_SCHED_MULTIPLICATIVE,
    PTI_SCHED_CYCLIC,
    PTI_SCHED_ONE_CYCLE,
    PTI_SCHED_SEQUENTIAL,
    PTI_SCHED_CHAINED,
    PTI_SCHED_PLATEAU,
} pti_sched_kind;

/* One OneCycleLR phase: end step and the group keys it anneals between. */
typedef struct pti_one_cycle_phase {
    double end_step;
    const char *start_lr, *end_lr, *start_mom, *end_mom;
} pti_one_cycle_phase;

struct pt_lr_scheduler {
    pti_sched_kind kind;
    const char *name; /* torch class name */
    pt_optim *opt;    /* borrowed */
    int ng;           /* parameter groups at construction */
    double *base_lrs; /* ng */
    double *last_lr;  /* ng */
    double *tmp;      /* ng scratch for new lrs */
    int64_t last_epoch;
    int64_t step_count;

    /* StepLR, MultiStepLR, ExponentialLR, CosineAnnealing*, LinearLR, ConstantLR, PolynomialLR */
    int64_t step_size, T_max, T_0, T_i, T_mult, total_iters;
    double T_cur;
    double gamma, eta_min, start_factor, end_factor, factor, power;
    int n_milestones;
    int64_t *milestones;

    /* LambdaLR, MultiplicativeLR (and the warmup-cosine lambda, whose settings follow) */
    pt_lr_lambda_fn fn;
    void *user;
    int64_t warmup_steps, total_steps;
    double num_cycles, min_lr_ratio;

    /* CyclicLR */
    double *max_lrs, *base_moms, *max_moms; /* ng each */
    double total_size, step_ratio;
    pt_cyclic_mode mode;
    double (*scale_fn)(double x, void *user);
    void *scale_fn_user;
    bool scale_mode_iterations;
    bool cycle_momentum;
    bool use_beta1;

    /* OneCycleLR (total_steps above) */
    int n_phases;
    pti_one_cycle_phase phases[3];
    bool anneal_linear;

    /* SequentialLR, ChainedScheduler (owned children) */
    int n_children;
    pt_lr_scheduler **children;

    /* ReduceLROnPlateau (factor, eps above) */
    bool mode_max, threshold_abs;
    double threshold, best, mode_worse, eps;
    int64_t patience, cooldown, cooldown_counter, num_bad_epochs;
    double *min_lrs; /* ng */
};

/* A zeroed scheduler of the given kind over o with the per-group arrays allocated (NULL with
 * the error set: o NULL, no groups, OOM). */
pt_lr_scheduler *pti_sched_alloc(pti_sched_kind kind, const char *name, const char *op,
                                 pt_optim *o);
/* Sets initial_lr in each group where absent, reads base_lrs from it, and performs torch's
 * initial step. Frees s and returns NULL on error. */
pt_lr_scheduler *pti_sched_start(pt_lr_scheduler *s);
/* Writes lrs[ng] into the groups and into last_lr. */
pt_status pti_sched_apply(pt_lr_scheduler *s, const double *lrs);
/* step() for the kinds whose step is the base one: step_count++, last_epoch++, get_lr. */
pt_status pti_sched_base_step(pt_lr_scheduler *s);

/* lr_scheduler_cyclic.c: get_lr of CyclicLR / OneCycleLR (may update momentum in groups),
 * the composite steps and ReduceLROnPlateau. */
pt_status pti_sched_cyclic_get_lr(pt_lr_scheduler *s, double *out);
pt_status pti_sched_one_cycle_get_lr(pt_lr_scheduler *s, double *out);
pt_status pti_sched_sequential_step(pt_lr_scheduler *s);
pt_status pti_sched_chained_step(pt_lr_scheduler *s);
void pti_sched_free_children(pt_lr_scheduler *s);

#endif
