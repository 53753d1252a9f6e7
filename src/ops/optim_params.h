/* Kernel parameters of the optimizer family (src/ops/optim.def): the per-step constants of
 * each fused update, as the algorithms in src/optim/<x>.c derive them from their options and
 * the step count (each file's header comment gives the update they implement). Shared by the
 * optimizer front-end (src/ops/optim.c, called by src/optim) and the backends' kernels
 * (src/backends/<device>/optim*.c).
 *
 * Call contract of every optim_<x> kernel: out[0] = the parameter p, updated in place;
 * in[0] = its gradient g; out[1..] = the algorithm's state buffers in the order listed with
 * its parameters (NULL for an absent optional one); params = its pti_optim_<x>_params. All
 * tensors are contiguous float32 of p's numel on one device. Most constants are float32 so
 * the kernels compute in float32 as torch's single-tensor code does. */
#ifndef PT_OPS_OPTIM_PARAMS_H
#define PT_OPS_OPTIM_PARAMS_H

#include <stdbool.h>

/* SGD; state: momentum_buffer or NULL. */
typedef struct pti_optim_sgd_params {
    float neg_lr, wd, mom, damp1;
    bool maximize, nesterov, has_wd, first;
} pti_optim_sgd_params;

/* Adam and AdamW (AdamW: decay_mul = 1 - lr * weight_decay, has_wd false); state: exp_avg,
 * exp_avg_sq, max_exp_avg_sq or NULL. */
typedef struct pti_optim_adam_params {
    float wd, decay_mul, b1, one_b1, b2, one_b2, bc2_sqrt, eps, neg_step_size;
    bool maximize, has_wd;
} pti_optim_adam_params;

/* Adagrad; state: sum. */
typedef struct pti_optim_adagrad_params {
    float wd, eps, neg_clr;
    bool maximize, has_wd;
} pti_optim_adagrad_params;

/* Adadelta; state: square_avg, acc_delta. */
typedef struct pti_optim_adadelta_params {
    float wd, rho, one_rho, eps, neg_lr;
    bool maximize, has_wd;
} pti_optim_adadelta_params;

/* Adamax; state: exp_avg, exp_inf. */
typedef struct pti_optim_adamax_params {
    float wd, b1, one_b1, b2, eps, neg_clr;
    bool maximize, has_wd;
} pti_optim_adamax_params;

/* NAdam; state: exp_avg, exp_avg_sq. */
typedef struct pti_optim_nadam_params {
    float wd, b1, one_b1, b2, one_b2, bc2, eps, coef_g, coef_m;
    bool has_wd;
} pti_optim_nadam_params;

/* RMSprop; state: square_avg, momentum_buffer or NULL, grad_avg or NULL. */
typedef struct pti_optim_rmsprop_params {
    float wd, alpha, one_alpha, eps, mom, neg_lr;
    bool maximize, has_wd;
} pti_optim_rmsprop_params;

/* RAdam; state: exp_avg, exp_avg_sq. */
typedef struct pti_optim_radam_params {
    float wd, decay, b1, one_b1, b2, one_b2, bc1, lr, bc2_sqrt, eps, rect;
    bool has_wd, rectify;
} pti_optim_radam_params;

/* ASGD; state: ax. */
typedef struct pti_optim_asgd_params {
    float wd, decay, neg_eta, mu;
    bool maximize, has_wd, average;
} pti_optim_asgd_params;

/* Lion; state: exp_avg. */
typedef struct pti_optim_lion_params {
    float decay, neg_lr, b1, one_b1, b2, one_b2;
} pti_optim_lion_params;

/* Rprop; state: prev, step_size. */
typedef struct pti_optim_rprop_params {
    float etaminus, etaplus, smin, smax;
    bool maximize;
} pti_optim_rprop_params;

/* SophiaG; state: exp_avg, hessian (read only). */
typedef struct pti_optim_sophia_params {
    float decay, b1, one_b1, rho_bs, neg_lr;
    bool maximize;
} pti_optim_sophia_params;

/* LAMB (timm's Lamb, two passes with the norms of p and of the update in double); state:
 * exp_avg, exp_avg_sq. The constants of one group's step, in double. */
typedef struct pti_optim_lamb_params {
    double lr, b1, b2, b3, bc1, bc2_sqrt, eps, wd;
    bool adapt, trust_clip;
} pti_optim_lamb_params;

/* optim_sum_sq (no params): out[0] = a float64 0-dim tensor, the sum of in[0]'s squared
 * elements accumulated in double in index order (LAMB's global gradient norm). */

#endif
