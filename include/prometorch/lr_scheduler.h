/* PromeTorch learning-rate schedulers (torch.optim.lr_scheduler of PyTorch 1.13): one opaque
 * pt_lr_scheduler handle over an optimizer, built by pt_lr_<name>, advanced with
 * pt_lr_scheduler_step after each optimizer step (or epoch), read with
 * pt_lr_scheduler_get_last_lr, saved/restored with a state dict holding torch's keys.
 *
 * Semantics are torch's: constructing a scheduler sets "initial_lr" in every parameter group
 * (when absent) and performs the initial step (last_epoch becomes 0 and the groups' "lr"
 * get the epoch-0 values); each pt_lr_scheduler_step recomputes lrs with torch's recursive
 * get_lr() formulas, so the floating-point sequence is torch's. pt_lr_scheduler_step_epoch
 * is torch's deprecated step(epoch): the closed form where torch has one.
 *
 * Ownership: the optimizer is borrowed and must outlive the scheduler. SequentialLR and
 * ChainedScheduler take ownership of their child schedulers (freed with the parent).
 * pt_lr_scheduler_free(NULL) is a no-op. Errors: constructors return NULL and other calls a
 * status, with the message in pt_last_error() ("pt_lr_step_lr: gamma must be > 0, got 0").
 * Not thread-safe. */
#ifndef PROMETORCH_LR_SCHEDULER_H
#define PROMETORCH_LR_SCHEDULER_H

#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pt_lr_scheduler pt_lr_scheduler;

/* A multiplicative factor of the epoch (LambdaLR, MultiplicativeLR). */
typedef double (*pt_lr_lambda_fn)(int64_t epoch, void *user);

/* ---- simple schedulers ----------------------------------------------------------------------- */

/* StepLR(optimizer, step_size, gamma): lr *= gamma every step_size epochs. Errors:
 * step_size <= 0, gamma <= 0. */
PT_API pt_lr_scheduler *pt_lr_step_lr(pt_optim *o, int64_t step_size, double gamma);
/* MultiStepLR(optimizer, milestones, gamma): lr *= gamma at each milestone (a milestone listed
 * k times multiplies by gamma^k, as torch's Counter). Errors: gamma <= 0, n < 0, milestones
 * not in non-decreasing order (torch accepts any order; we reject it as a likely bug). */
PT_API pt_lr_scheduler *pt_lr_multistep_lr(pt_optim *o, int n, const int64_t *milestones,
                                           double gamma);
/* ExponentialLR(optimizer, gamma): lr *= gamma every epoch. Errors: gamma <= 0. */
PT_API pt_lr_scheduler *pt_lr_exponential_lr(pt_optim *o, double gamma);
/* CosineAnnealingLR(optimizer, T_max, eta_min) with torch's recursive update. Errors:
 * T_max <= 0. */
PT_API pt_lr_scheduler *pt_lr_cosine_annealing_lr(pt_optim *o, int64_t T_max, double eta_min);
/* CosineAnnealingWarmRestarts(optimizer, T_0, T_mult, eta_min). Fractional epochs go through
 * pt_lr_scheduler_step_epoch. Errors: T_0 <= 0, T_mult < 1. */
PT_API pt_lr_scheduler *pt_lr_cosine_annealing_warm_restarts(pt_optim *o, int64_t T_0,
                                                             int64_t T_mult, double eta_min);
/* LinearLR(optimizer, start_factor, end_factor, total_iters); torch defaults 1/3, 1.0, 5.
 * Errors: start_factor outside (0, 1], end_factor outside [0, 1], total_iters <= 0. */
PT_API pt_lr_scheduler *pt_lr_linear_lr(pt_optim *o, double start_factor, double end_factor,
                                        int64_t total_iters);
/* ConstantLR(optimizer, factor, total_iters); torch defaults 1/3, 5. Errors: factor outside
 * [0, 1] (0 is rejected too: torch divides by it), total_iters < 0. */
PT_API pt_lr_scheduler *pt_lr_constant_lr(pt_optim *o, double factor, int64_t total_iters);
/* PolynomialLR(optimizer, total_iters, power); torch defaults 5, 1.0. Errors: total_iters <= 0. */
PT_API pt_lr_scheduler *pt_lr_polynomial_lr(pt_optim *o, int64_t total_iters, double power);
/* LambdaLR(optimizer, lr_lambda): lr = initial_lr * fn(epoch, user), one function for every
 * group. Errors: fn NULL. */
PT_API pt_lr_scheduler *pt_lr_lambda_lr(pt_optim *o, pt_lr_lambda_fn fn, void *user);
/* MultiplicativeLR(optimizer, lr_lambda): lr *= fn(epoch, user) for epoch > 0. */
PT_API pt_lr_scheduler *pt_lr_multiplicative_lr(pt_optim *o, pt_lr_lambda_fn fn, void *user);
/* Linear warmup then cosine decay as a LambdaLR, the formula of HF transformers'
 * get_cosine_schedule_with_warmup (with get_cosine_with_min_lr_schedule_with_warmup's
 * min_lr_rate):
 *   step < warmup: step / max(1, warmup)
 *   else: progress = (step - warmup) / max(1, total - warmup);
 *         f = 0.5 * (1 + cos(pi * num_cycles * 2 * progress));
 *         max(0, f * (1 - min_lr_ratio) + min_lr_ratio)
 * num_cycles 0.5 is HF's default (one half cosine). Errors: warmup_steps < 0,
 * total_steps < warmup_steps, min_lr_ratio outside [0, 1]. */
PT_API pt_lr_scheduler *pt_lr_cosine_with_warmup(pt_optim *o, int64_t warmup_steps,
                                                 int64_t total_steps, double num_cycles,
                                                 double min_lr_ratio);

/* ---- cyclic schedules ------------------------------------------------------------------------ */

typedef enum pt_cyclic_mode {
    PT_CYCLIC_TRIANGULAR = 0,
    PT_CYCLIC_TRIANGULAR2,
    PT_CYCLIC_EXP_RANGE,
} pt_cyclic_mode;

/* CyclicLR options. base_lrs/max_lrs, when non-NULL, hold one value per parameter group (torch's
 * list form) and replace base_lr/max_lr. scale_fn (optional) replaces the mode's scale function,
 * applied to the cycle number (scale_mode_iterations false) or the iteration. cycle_momentum
 * cycles group "momentum" or, for optimizers with betas (Adam...), betas[0] (torch 2.x; 1.13
 * rejects betas optimizers). step_size_down 0 means "same as step_size_up". */
typedef struct pt_cyclic_lr_opts {
    double base_lr;
    double max_lr;
    const double *base_lrs;
    const double *max_lrs;
    double step_size_up;
    double step_size_down;
    pt_cyclic_mode mode;
    double gamma;
    double (*scale_fn)(double x, void *user);
    void *scale_fn_user;
    bool scale_mode_iterations;
    bool cycle_momentum;
    double base_momentum;
    double max_momentum;
} pt_cyclic_lr_opts;
#define PT_CYCLIC_LR_DEFAULTS                                                                      \
    ((pt_cyclic_lr_opts){.step_size_up = 2000,                                                     \
                         .gamma = 1.0,                                                             \
                         .cycle_momentum = true,                                                   \
                         .base_momentum = 0.8,                                                     \
                         .max_momentum = 0.9})

/* CyclicLR(optimizer, ...): sets every group's lr to its base lr (and momentum to
 * base_momentum) before the initial step. Errors: step_size_up <= 0, step_size_down < 0,
 * either not finite or their sum not finite, an unknown mode, cycle_momentum with an
 * optimizer that has neither momentum nor betas. */
PT_API pt_lr_scheduler *pt_lr_cyclic_lr(pt_optim *o, pt_cyclic_lr_opts opts);

/* OneCycleLR options (torch defaults in PT_ONE_CYCLE_LR_DEFAULTS). max_lrs, when non-NULL,
 * has one value per group. total_steps 0 means epochs * steps_per_epoch. anneal_linear picks
 * 'linear' instead of 'cos'. */
typedef struct pt_one_cycle_lr_opts {
    double max_lr;
    const double *max_lrs;
    int64_t total_steps;
    int64_t epochs;
    int64_t steps_per_epoch;
    double pct_start;
    bool anneal_linear;
    bool cycle_momentum;
    double base_momentum;
    double max_momentum;
    double div_factor;
    double final_div_factor;
    bool three_phase;
} pt_one_cycle_lr_opts;
#define PT_ONE_CYCLE_LR_DEFAULTS                                                                   \
    ((pt_one_cycle_lr_opts){.pct_start = 0.3,                                                      \
                            .cycle_momentum = true,                                                \
                            .base_momentum = 0.85,                                                 \
                            .max_momentum = 0.95,                                                  \
                            .div_factor = 25.0,                                                    \
                            .final_div_factor = 1e4})

/* OneCycleLR(optimizer, ...): writes "initial_lr", "max_lr", "min_lr" (and "max_momentum",
 * "base_momentum", momentum or betas[0]) into each group as torch does. Stepping past
 * total_steps is an error ("Tried to step 11 times..."). Errors: no total_steps and no
 * epochs/steps_per_epoch, values <= 0, pct_start outside [0, 1], cycle_momentum without
 * momentum/betas. */
PT_API pt_lr_scheduler *pt_lr_one_cycle_lr(pt_optim *o, pt_one_cycle_lr_opts opts);

/* ---- composite schedulers -------------------------------------------------------------------- */

/* SequentialLR(optimizer, schedulers, milestones): n schedulers (ownership taken, also on
 * error) and n - 1 increasing milestones. Errors: a scheduler over another optimizer, wrong
 * milestone count, milestones not increasing, a scheduler listed twice, a NULL scheduler. */
PT_API pt_lr_scheduler *pt_lr_sequential_lr(pt_optim *o, int n, pt_lr_scheduler **scheds,
                                            const int64_t *milestones);
/* ChainedScheduler(schedulers): steps each of the n schedulers (ownership taken, also on
 * error) in order. Errors: n < 1, a NULL scheduler, schedulers over different optimizers. */
PT_API pt_lr_scheduler *pt_lr_chained_scheduler(int n, pt_lr_scheduler **scheds);

/* ---- ReduceLROnPlateau ----------------------------------------------------------------------- */

/* ReduceLROnPlateau options; PT_REDUCE_ON_PLATEAU_DEFAULTS holds torch's defaults. min_lrs,
 * when non-NULL, has one value per group and replaces min_lr. */
typedef struct pt_reduce_on_plateau_opts {
    bool mode_max;
    double factor;
    int64_t patience;
    double threshold;
    bool threshold_abs;
    int64_t cooldown;
    double min_lr;
    const double *min_lrs;
    double eps;
} pt_reduce_on_plateau_opts;
#define PT_REDUCE_ON_PLATEAU_DEFAULTS                                                              \
    ((pt_reduce_on_plateau_opts){.factor = 0.1, .patience = 10, .threshold = 1e-4, .eps = 1e-8})

/* ReduceLROnPlateau(optimizer, ...). Step it with pt_lr_scheduler_step_metric. Errors:
 * factor >= 1 (or <= 0), patience < 0, cooldown < 0, threshold < 0, min_lr < 0. */
PT_API pt_lr_scheduler *pt_lr_reduce_on_plateau(pt_optim *o, pt_reduce_on_plateau_opts opts);

/* ---- use ------------------------------------------------------------------------------------- */

/* scheduler.step(): advances one epoch and writes the new lrs into the optimizer's groups.
 * ReduceLROnPlateau needs a metric: use pt_lr_scheduler_step_metric (this is an error). */
PT_API pt_status pt_lr_scheduler_step(pt_lr_scheduler *s);
/* scheduler.step(epoch) (deprecated in torch): sets last_epoch = floor(epoch) and uses the
 * closed form where torch has one (else get_lr()). CosineAnnealingWarmRestarts accepts
 * fractional epochs; the others need an integral epoch. Errors: SequentialLR/Chained,
 * ReduceLROnPlateau, negative epoch for warm restarts. */
PT_API pt_status pt_lr_scheduler_step_epoch(pt_lr_scheduler *s, double epoch);
/* ReduceLROnPlateau.step(metric). Other schedulers: an error. A NaN metric counts as "not
 * better" (as in torch). */
PT_API pt_status pt_lr_scheduler_step_metric(pt_lr_scheduler *s, double metric);
/* scheduler.get_last_lr()[group] (NAN with the error set when out of range). */
PT_API double pt_lr_scheduler_get_last_lr(const pt_lr_scheduler *s, int group);
/* scheduler.last_epoch (-1 for NULL). */
PT_API int64_t pt_lr_scheduler_last_epoch(const pt_lr_scheduler *s);
/* The torch class name ("StepLR", "LambdaLR" for pt_lr_cosine_with_warmup, ...). Static. */
PT_API const char *pt_lr_scheduler_name(const pt_lr_scheduler *s);
/* The optimizer, borrowed. */
PT_API pt_optim *pt_lr_scheduler_optimizer(const pt_lr_scheduler *s);

/* scheduler.state_dict(): a dict with torch's keys for the class (e.g. StepLR: step_size,
 * gamma, base_lrs, last_epoch, verbose, _step_count, _get_lr_called_within_step, _last_lr).
 * Callbacks are saved as None (torch saves lr_lambdas [None] for plain functions);
 * SequentialLR/ChainedScheduler save their children's dicts under "_schedulers". Returns a
 * new reference, or NULL on error. */
PT_API pt_value *pt_lr_scheduler_state_dict(const pt_lr_scheduler *s);
/* scheduler.load_state_dict(sd): restores the counters and numeric attributes it names (keys
 * missing from sd keep their value, as torch's __dict__.update). Errors: sd not a dict, a
 * value of the wrong type, a list with the wrong number of groups; the scheduler is
 * unchanged on error. The optimizer's lrs are not touched (as in torch). */
PT_API pt_status pt_lr_scheduler_load_state_dict(pt_lr_scheduler *s, const pt_value *sd);

/* Frees the scheduler (and the children of a SequentialLR/ChainedScheduler). NULL is a
 * no-op. */
PT_API void pt_lr_scheduler_free(pt_lr_scheduler *s);

#ifdef __cplusplus
}
#endif
#endif
