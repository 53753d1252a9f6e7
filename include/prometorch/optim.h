/* PromeTorch optimizers (torch.optim): one opaque pt_optim handle for every algorithm, built
 * from a module's parameters (pt_optim_<name>) or an explicit parameter list
 * (pt_optim_<name>_params), stepped with pt_optim_step after pt_backward, inspected and
 * changed through parameter groups and PyTorch's hyperparameter names, and saved/restored
 * with a state dict in torch's exact layout.
 *
 * Update math is torch.optim's single-tensor (foreach=False) implementation of PyTorch 1.13.
 *
 * Options: every optimizer takes a pt_<name>_opts struct by value. Start from the
 * PT_<NAME>_DEFAULTS macro (PyTorch's defaults; a zero field cannot mean "default" for
 * values such as betas or eps) and change fields:
 *     pt_adam_opts o = PT_ADAM_DEFAULTS; o.lr = 3e-4; o.weight_decay = 0.01;
 *     pt_optim *opt = pt_optim_adam(model, o);
 *
 * Ownership: constructors return an optimizer freed with pt_optim_free (NULL is a no-op). The
 * optimizer holds its own reference to every parameter and state tensor, so the module may be
 * freed first. Steps update parameters in place (outside autograd recording).
 *
 * Errors: constructors return NULL and other calls return a status, with the message in
 * pt_last_error() ("pt_optim_adam: Invalid beta parameter at index 0: 1.5"). Not thread-safe:
 * use one optimizer from one thread at a time. */
#ifndef PROMETORCH_OPTIM_H
#define PROMETORCH_OPTIM_H

#include <math.h> /* NAN in PT_ADAFACTOR_DEFAULTS */

#include "types.h"
#include "nn.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An optimizer instance (any algorithm). */
typedef struct pt_optim pt_optim;

/* ---- options --------------------------------------------------------------------------------- */

/* torch.optim.SGD(lr, momentum, dampening, weight_decay, nesterov, maximize). torch 1.13 has no
 * default lr; PT_SGD_DEFAULTS uses torch 2.x's 1e-3. nesterov needs momentum > 0 and
 * dampening == 0. */
typedef struct pt_sgd_opts {
    double lr;
    double momentum;
    double dampening;
    double weight_decay;
    bool nesterov;
    bool maximize;
} pt_sgd_opts;
#define PT_SGD_DEFAULTS ((pt_sgd_opts){.lr = 1e-3})

/* torch.optim.Adam(lr, betas, eps, weight_decay, amsgrad, maximize). */
typedef struct pt_adam_opts {
    double lr;
    double betas[2];
    double eps;
    double weight_decay;
    bool amsgrad;
    bool maximize;
} pt_adam_opts;
#define PT_ADAM_DEFAULTS ((pt_adam_opts){.lr = 1e-3, .betas = {0.9, 0.999}, .eps = 1e-8})

/* torch.optim.AdamW: Adam with decoupled weight decay (p *= 1 - lr * weight_decay before the
 * update), default weight_decay 0.01. */
typedef struct pt_adamw_opts {
    double lr;
    double betas[2];
    double eps;
    double weight_decay;
    bool amsgrad;
    bool maximize;
} pt_adamw_opts;
#define PT_ADAMW_DEFAULTS                                                                          \
    ((pt_adamw_opts){.lr = 1e-3, .betas = {0.9, 0.999}, .eps = 1e-8, .weight_decay = 1e-2})

/* torch.optim.RMSprop(lr, alpha, eps, weight_decay, momentum, centered, maximize). */
typedef struct pt_rmsprop_opts {
    double lr;
    double alpha;
    double eps;
    double weight_decay;
    double momentum;
    bool centered;
    bool maximize;
} pt_rmsprop_opts;
#define PT_RMSPROP_DEFAULTS ((pt_rmsprop_opts){.lr = 1e-2, .alpha = 0.99, .eps = 1e-8})

/* torch.optim.Adagrad(lr, lr_decay, weight_decay, initial_accumulator_value, eps, maximize).
 * Its state exists from construction (torch fills it in __init__). */
typedef struct pt_adagrad_opts {
    double lr;
    double lr_decay;
    double weight_decay;
    double initial_accumulator_value;
    double eps;
    bool maximize;
} pt_adagrad_opts;
#define PT_ADAGRAD_DEFAULTS ((pt_adagrad_opts){.lr = 1e-2, .eps = 1e-10})

/* torch.optim.Adadelta(lr, rho, eps, weight_decay, maximize). */
typedef struct pt_adadelta_opts {
    double lr;
    double rho;
    double eps;
    double weight_decay;
    bool maximize;
} pt_adadelta_opts;
#define PT_ADADELTA_DEFAULTS ((pt_adadelta_opts){.lr = 1.0, .rho = 0.9, .eps = 1e-6})

/* torch.optim.Adamax(lr, betas, eps, weight_decay, maximize). */
typedef struct pt_adamax_opts {
    double lr;
    double betas[2];
    double eps;
    double weight_decay;
    bool maximize;
} pt_adamax_opts;
#define PT_ADAMAX_DEFAULTS ((pt_adamax_opts){.lr = 2e-3, .betas = {0.9, 0.999}, .eps = 1e-8})

/* torch.optim.NAdam(lr, betas, eps, weight_decay, momentum_decay) as in 1.13 (which has no
 * maximize option). */
typedef struct pt_nadam_opts {
    double lr;
    double betas[2];
    double eps;
    double weight_decay;
    double momentum_decay;
} pt_nadam_opts;
#define PT_NADAM_DEFAULTS                                                                          \
    ((pt_nadam_opts){.lr = 2e-3, .betas = {0.9, 0.999}, .eps = 1e-8, .momentum_decay = 4e-3})

/* ---- construction ---------------------------------------------------------------------------- */

/* torch.optim.SGD(module.parameters(), ...): one parameter group with all of m's parameters
 * (pt_nn_parameters order). Returns a new optimizer, or NULL on error: bad options (lr < 0,
 * momentum < 0, weight_decay < 0, nesterov without momentum or with dampening), a module with
 * no parameters, a parameter that does not require grad or is not a leaf. */
PT_API pt_optim *pt_optim_sgd(pt_module *m, pt_sgd_opts o);
/* Same over an explicit list of n parameters (borrowed; the optimizer retains them). A tensor
 * listed twice is an error. */
PT_API pt_optim *pt_optim_sgd_params(int n, pt_tensor *const *params, pt_sgd_opts o);

/* torch.optim.Adam over m's parameters. Errors as for SGD, plus eps < 0 and betas outside
 * [0, 1). */
PT_API pt_optim *pt_optim_adam(pt_module *m, pt_adam_opts o);
PT_API pt_optim *pt_optim_adam_params(int n, pt_tensor *const *params, pt_adam_opts o);

/* torch.optim.AdamW over m's parameters / a list. Errors as for Adam. */
PT_API pt_optim *pt_optim_adamw(pt_module *m, pt_adamw_opts o);
PT_API pt_optim *pt_optim_adamw_params(int n, pt_tensor *const *params, pt_adamw_opts o);

/* torch.optim.RMSprop. Errors: lr, eps, momentum, weight_decay or alpha < 0. */
PT_API pt_optim *pt_optim_rmsprop(pt_module *m, pt_rmsprop_opts o);
PT_API pt_optim *pt_optim_rmsprop_params(int n, pt_tensor *const *params, pt_rmsprop_opts o);

/* torch.optim.Adagrad. Errors: lr, lr_decay, weight_decay, initial_accumulator_value or
 * eps < 0. */
PT_API pt_optim *pt_optim_adagrad(pt_module *m, pt_adagrad_opts o);
PT_API pt_optim *pt_optim_adagrad_params(int n, pt_tensor *const *params, pt_adagrad_opts o);

/* torch.optim.Adadelta. Errors: lr, eps or weight_decay < 0, rho outside [0, 1]. */
PT_API pt_optim *pt_optim_adadelta(pt_module *m, pt_adadelta_opts o);
PT_API pt_optim *pt_optim_adadelta_params(int n, pt_tensor *const *params, pt_adadelta_opts o);

/* torch.optim.Adamax. Errors as for Adam. */
PT_API pt_optim *pt_optim_adamax(pt_module *m, pt_adamax_opts o);
PT_API pt_optim *pt_optim_adamax_params(int n, pt_tensor *const *params, pt_adamax_opts o);

/* torch.optim.NAdam. Errors as for Adam, plus momentum_decay < 0. */
PT_API pt_optim *pt_optim_nadam(pt_module *m, pt_nadam_opts o);
PT_API pt_optim *pt_optim_nadam_params(int n, pt_tensor *const *params, pt_nadam_opts o);

/* Frees the optimizer, its state and its parameter references. NULL is a no-op. */
PT_API void pt_optim_free(pt_optim *o);

/* The algorithm's PyTorch class name ("SGD", "Adam", ...). Borrowed, static. */
PT_API const char *pt_optim_name(const pt_optim *o);

/* ---- parameter groups ------------------------------------------------------------------------ */

/* optimizer.add_param_group({'params': params, **opts}). `opts` points to the optimizer's own
 * options struct type (pt_adam_opts for an Adam optimizer) or is NULL for the options the
 * optimizer was constructed with. Errors: a tensor already in a group, a parameter that does
 * not require grad, bad options. */
PT_API pt_status pt_optim_add_param_group(pt_optim *o, int n, pt_tensor *const *params,
                                          const void *opts);
/* len(optimizer.param_groups); -1 for NULL. */
PT_API int pt_optim_num_groups(const pt_optim *o);
/* Number of parameters in group g; -1 when out of range. */
PT_API int pt_optim_group_size(const pt_optim *o, int group);
/* Parameter i of group g, borrowed; NULL when out of range. */
PT_API pt_tensor *pt_optim_group_param_ref(const pt_optim *o, int group, int i);

/* param_groups[group]['lr'] (NAN with the error set when the group is out of range). */
PT_API double pt_optim_get_lr(const pt_optim *o, int group);
/* param_groups[group]['lr'] = lr. lr < 0 is an error. */
PT_API pt_status pt_optim_set_lr(pt_optim *o, int group, double lr);

/* param_groups[group][name] as a number, with PyTorch's key names: "lr", "momentum",
 * "weight_decay", "eps", "betas" (index 0 or 1), "amsgrad" (bools read as 0/1), ... and any
 * extra key stored with pt_optim_set_option ("initial_lr", set by the LR schedulers). `index`
 * selects the item of a tuple option and must be 0 for scalar ones. A key the group does not
 * have is PT_ERR_INDEX; a non-numeric one (foreach = None) is PT_ERR_DTYPE. */
PT_API pt_status pt_optim_get_option(const pt_optim *o, int group, const char *name, int index,
                                     double *v);
/* param_groups[group][name] = v (or [name][index] for a tuple). Known options are validated
 * as the constructor does (set "lr" to -1 fails and changes nothing); an unknown name adds an
 * extra numeric key to the group, saved in the state dict (as PyTorch allows any key). */
PT_API pt_status pt_optim_set_option(pt_optim *o, int group, const char *name, int index, double v);
/* True when the group has the key (an option or an extra key). */
PT_API bool pt_optim_has_option(const pt_optim *o, int group, const char *name);

/* ---- stepping -------------------------------------------------------------------------------- */

/* optimizer.step(): updates every parameter that has a gradient (parameters whose .grad is
 * None are skipped, as in PyTorch). State tensors are allocated on a parameter's first step;
 * later steps allocate nothing on the fast path (float32 contiguous CPU). Sparse gradients
 * are not supported. */
PT_API pt_status pt_optim_step(pt_optim *o);
/* optimizer.step(closure): `closure` zeroes/recomputes the loss, calls backward and returns
 * the loss (NAN to report an error, which aborts the step). LBFGS calls it several times;
 * the others call it once, then step. The loss from the first call goes to *loss (may be
 * NULL). The closure runs with grad mode enabled. */
PT_API pt_status pt_optim_step_closure(pt_optim *o, double (*closure)(void *user), void *user,
                                       double *loss);
/* optimizer.zero_grad() (set_to_none=True, PyTorch 2.x's default): every parameter's .grad
 * becomes None. */
PT_API void pt_optim_zero_grad(pt_optim *o);
/* optimizer.zero_grad(set_to_none): with set_to_none false, existing gradients are filled with
 * zeros in place instead. */
PT_API pt_status pt_optim_zero_grad_set_to_none(pt_optim *o, bool set_to_none);

/* ---- state dict ------------------------------------------------------------------------------ */

/* optimizer.state_dict() in torch's layout:
 *   {"state": {0: {"step": tensor(float32 scalar), "exp_avg": tensor, ...}, 1: {...}},
 *    "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), ..., "params": [0, 1]}]}
 * Parameters are numbered across groups in order; a parameter never stepped has no entry in
 * "state". Group keys, their order and value types (int defaults such as weight_decay 0,
 * foreach None, ...) are the ones torch 1.13 writes. State tensors are shared with the
 * optimizer (copy them before changing). Returns a new reference, or NULL on error. */
PT_API pt_value *pt_optim_state_dict(pt_optim *o);
/* optimizer.load_state_dict(sd): the same number of groups with the same sizes (else an
 * error naming the counts), state tensors with their parameter's shape (cast to its
 * dtype/device, copied), hyperparameters replaced by the saved ones (extra keys such as
 * "initial_lr" kept). On error the optimizer is unchanged. */
PT_API pt_status pt_optim_load_state_dict(pt_optim *o, const pt_value *sd);

/* ==== more optimizers: RAdam, ASGD, Rprop, LBFGS, Lion, LAMB, Adafactor, SophiaG ============ */

/* torch.optim.RAdam(lr, betas, eps, weight_decay, decoupled_weight_decay): 1.13's math, plus
 * torch 2.x's decoupled_weight_decay (p *= 1 - lr * weight_decay instead of adding
 * weight_decay * p to the gradient; the param group key torch 2.x adds, absent in 1.13). */
typedef struct pt_radam_opts {
    double lr;
    double betas[2];
    double eps;
    double weight_decay;
    bool decoupled_weight_decay;
} pt_radam_opts;
#define PT_RADAM_DEFAULTS ((pt_radam_opts){.lr = 1e-3, .betas = {0.9, 0.999}, .eps = 1e-8})

/* torch.optim.ASGD(lr, lambd, alpha, t0, weight_decay, maximize). State per parameter: step,
 * eta, mu (float32 scalars) and ax (the averaged parameter). */
typedef struct pt_asgd_opts {
    double lr;
    double lambd;
    double alpha;
    double t0;
    double weight_decay;
    bool maximize;
} pt_asgd_opts;
#define PT_ASGD_DEFAULTS ((pt_asgd_opts){.lr = 1e-2, .lambd = 1e-4, .alpha = 0.75, .t0 = 1e6})

/* torch.optim.Rprop(lr, etas, step_sizes, maximize): etas = (etaminus, etaplus) with
 * 0 < etaminus < 1 < etaplus; step_sizes = (min, max). */
typedef struct pt_rprop_opts {
    double lr;
    double etas[2];
    double step_sizes[2];
    bool maximize;
} pt_rprop_opts;
#define PT_RPROP_DEFAULTS                                                                          \
    ((pt_rprop_opts){.lr = 1e-2, .etas = {0.5, 1.2}, .step_sizes = {1e-6, 50.0}})

/* torch.optim.LBFGS(lr, max_iter, max_eval, tolerance_grad, tolerance_change, history_size,
 * line_search_fn). max_eval < 0 means None (max_iter * 5 / 4, as torch computes it at
 * construction); line_search_fn is NULL or "strong_wolfe". */
typedef struct pt_lbfgs_opts {
    double lr;
    int64_t max_iter;
    int64_t max_eval;
    double tolerance_grad;
    double tolerance_change;
    int64_t history_size;
    const char *line_search_fn;
} pt_lbfgs_opts;
#define PT_LBFGS_DEFAULTS                                                                          \
    ((pt_lbfgs_opts){.lr = 1.0,                                                                    \
                     .max_iter = 20,                                                               \
                     .max_eval = -1,                                                               \
                     .tolerance_grad = 1e-7,                                                       \
                     .tolerance_change = 1e-9,                                                     \
                     .history_size = 100})

/* Lion (Chen et al. 2023), as the reference implementation lucidrains/lion-pytorch:
 *   p *= 1 - lr * weight_decay;  p -= lr * sign(beta1 * m + (1 - beta1) * g)
 *   m = beta2 * m + (1 - beta2) * g
 * State: exp_avg. Not in torch.optim. */
typedef struct pt_lion_opts {
    double lr;
    double betas[2];
    double weight_decay;
} pt_lion_opts;
#define PT_LION_DEFAULTS ((pt_lion_opts){.lr = 1e-4, .betas = {0.9, 0.99}})

/* LAMB (You et al. 2019) as timm's timm.optim.Lamb: gradients are first divided in place by
 * max(1, global grad norm / max_grad_norm) (max_grad_norm NAN = None: no clipping); Adam
 * moments (grad_averaging: m uses 1 - beta1, else 1), bias correction optional; the update
 * m_hat / (sqrt(v_hat) + eps) + weight_decay * p is scaled by the trust ratio
 * |p| / |update| (1 when either norm is 0; clamped to <= 1 with trust_clip) when weight_decay
 * != 0 or always_adapt. The step counter is the param group key "step", as in timm. Not in
 * torch.optim. */
typedef struct pt_lamb_opts {
    double lr;
    bool bias_correction;
    double betas[2];
    double eps;
    double weight_decay;
    bool grad_averaging;
    double max_grad_norm;
    bool trust_clip;
    bool always_adapt;
} pt_lamb_opts;
#define PT_LAMB_DEFAULTS                                                                           \
    ((pt_lamb_opts){.lr = 1e-3,                                                                    \
                    .bias_correction = true,                                                       \
                    .betas = {0.9, 0.999},                                                         \
                    .eps = 1e-6,                                                                   \
                    .weight_decay = 0.01,                                                          \
                    .grad_averaging = true,                                                        \
                    .max_grad_norm = 1.0})

/* Adafactor (Shazeer & Stern 2018) as HF transformers' / fairseq's Adafactor: lr NAN = None
 * (needs relative_step), eps = (eps1 added to g^2, eps2 floor of the parameter RMS scale),
 * beta1 NAN = None (no first moment), second moment factored into row/column averages for
 * parameters with >= 2 dims. torch 1.13 has no Adafactor (torch 2.5's differs in details). */
typedef struct pt_adafactor_opts {
    double lr;
    double eps[2];
    double clip_threshold;
    double decay_rate;
    double beta1;
    double weight_decay;
    bool scale_parameter;
    bool relative_step;
    bool warmup_init;
} pt_adafactor_opts;
#define PT_ADAFACTOR_DEFAULTS                                                                      \
    ((pt_adafactor_opts){.lr = NAN,                                                                \
                         .eps = {1e-30, 1e-3},                                                     \
                         .clip_threshold = 1.0,                                                    \
                         .decay_rate = -0.8,                                                       \
                         .beta1 = NAN,                                                             \
                         .scale_parameter = true,                                                  \
                         .relative_step = true})

/* SophiaG (Liu et al. 2023) as the reference implementation Liuhong99/Sophia:
 *   p *= 1 - lr * weight_decay;  m = beta1 * m + (1 - beta1) * g
 *   p -= lr * sign(m) * min(|m| / (rho * bs * h + 1e-15), 1)
 * where h (state "hessian") is updated only by pt_optim_sophia_update_hessian. bs is the
 * reference step()'s batch-size argument (default 5120), kept here as an option that is not
 * a param group key. Not in torch.optim. */
typedef struct pt_sophia_opts {
    double lr;
    double betas[2];
    double rho;
    double weight_decay;
    bool maximize;
    double bs;
} pt_sophia_opts;
#define PT_SOPHIA_DEFAULTS                                                                         \
    ((pt_sophia_opts){                                                                             \
        .lr = 1e-4, .betas = {0.965, 0.99}, .rho = 0.04, .weight_decay = 1e-1, .bs = 5120})

/* torch.optim.RAdam over m's parameters / an explicit list (as pt_optim_adam; errors as Adam's). */
PT_API pt_optim *pt_optim_radam(pt_module *m, pt_radam_opts o);
PT_API pt_optim *pt_optim_radam_params(int n, pt_tensor *const *params, pt_radam_opts o);

/* torch.optim.ASGD. Errors: lr or weight_decay < 0. */
PT_API pt_optim *pt_optim_asgd(pt_module *m, pt_asgd_opts o);
PT_API pt_optim *pt_optim_asgd_params(int n, pt_tensor *const *params, pt_asgd_opts o);

/* torch.optim.Rprop. Errors: lr < 0, etas not 0 < etaminus < 1 < etaplus. */
PT_API pt_optim *pt_optim_rprop(pt_module *m, pt_rprop_opts o);
PT_API pt_optim *pt_optim_rprop_params(int n, pt_tensor *const *params, pt_rprop_opts o);

/* torch.optim.LBFGS. Step it with pt_optim_step_closure (pt_optim_step without a closure is an
 * error, as torch requires one). One parameter group only (a step after add_param_group is an
 * error, as torch's); CPU parameters. The flat vectors and scalars are computed in double
 * precision (rounded to float32 where torch holds float32 tensors, for float32 parameters);
 * LBFGS amplifies rounding, so float32 trajectories follow torch's closely but not to 1e-5 over
 * many iterations (torch's own float32 and float64 runs differ by ~1e-4). The whole state is
 * kept as state of the first parameter (index 0), with torch's keys: func_evals, n_iter, al,
 * d, t, old_dirs, old_stps, ro, H_diag, prev_flat_grad, prev_loss. Errors: lr < 0,
 * max_iter < 1, history_size < 1, line_search_fn other than NULL / "strong_wolfe". */
PT_API pt_optim *pt_optim_lbfgs(pt_module *m, pt_lbfgs_opts o);
PT_API pt_optim *pt_optim_lbfgs_params(int n, pt_tensor *const *params, pt_lbfgs_opts o);

/* Lion. Errors: lr or weight_decay < 0, betas outside [0, 1). */
PT_API pt_optim *pt_optim_lion(pt_module *m, pt_lion_opts o);
PT_API pt_optim *pt_optim_lion_params(int n, pt_tensor *const *params, pt_lion_opts o);

/* LAMB (timm's Lamb). Errors: lr, eps, weight_decay < 0, betas outside [0, 1),
 * max_grad_norm <= 0. The global clip uses the constructor's max_grad_norm (as timm's
 * self.defaults). Modifies the gradients in place (divides them by the clip factor). */
PT_API pt_optim *pt_optim_lamb(pt_module *m, pt_lamb_opts o);
PT_API pt_optim *pt_optim_lamb_params(int n, pt_tensor *const *params, pt_lamb_opts o);

/* Adafactor. Errors: a manual lr together with relative_step ("Cannot combine manual `lr` and
 * `relative_step=True` options"), warmup_init without relative_step, lr NAN without
 * relative_step, lr / weight_decay < 0, clip_threshold <= 0. */
PT_API pt_optim *pt_optim_adafactor(pt_module *m, pt_adafactor_opts o);
PT_API pt_optim *pt_optim_adafactor_params(int n, pt_tensor *const *params, pt_adafactor_opts o);

/* SophiaG. Errors: lr, rho, weight_decay < 0, betas outside [0, 1), bs <= 0. */
PT_API pt_optim *pt_optim_sophia(pt_module *m, pt_sophia_opts o);
PT_API pt_optim *pt_optim_sophia_params(int n, pt_tensor *const *params, pt_sophia_opts o);
/* SophiaG.update_hessian(): for every parameter with a gradient, h = beta2 * h +
 * (1 - beta2) * g * g, taking the current gradients as the Gauss-Newton-Bartlett estimate
 * (compute them from a loss on labels sampled from the model, as the paper does). Creates
 * the state on first use. Errors: o is not a SophiaG optimizer. */
PT_API pt_status pt_optim_sophia_update_hessian(pt_optim *o);

#ifdef __cplusplus
}
#endif
#endif
