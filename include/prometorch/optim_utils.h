/* PromeTorch training utilities around the optimizers: gradient clipping
 * (torch.nn.utils.clip_grad_norm_ / clip_grad_value_), an exponential moving average of a
 * module's weights (torch.optim.swa_utils.AveragedModel with an EMA avg_fn, timm's ModelEmaV2),
 * and a loss scaler for float16 training (torch.cuda.amp.GradScaler, on any device).
 *
 * Ownership: modules, optimizers and parameters are borrowed. pt_ema_new / pt_grad_scaler_new
 * return objects freed with pt_ema_free / pt_grad_scaler_free (NULL is a no-op). Errors: a
 * status (or NULL / NAN) with the message in pt_last_error(). Not thread-safe. */
#ifndef PROMETORCH_OPTIM_UTILS_H
#define PROMETORCH_OPTIM_UTILS_H

#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- gradient clipping ----------------------------------------------------------------------- */

/* torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite) of torch
 * 1.13: the norm_type-norm of the norms of every existing .grad (parameters without a grad
 * are skipped; norm_type INFINITY is the max |g|, any other p works), then each grad is
 * multiplied in place by min(1, max_norm / (total + 1e-6)), computed in the grads' dtype as
 * torch does. *total_norm (may be NULL) receives the total norm (0 with no grads). Errors:
 * n < 0, a NULL parameter, a non-finite total with error_if_nonfinite ("The total norm of
 * order 2 for gradients from `parameters` is non-finite, so it cannot be clipped..."; the
 * grads are left unchanged). */
PT_API pt_status pt_clip_grad_norm_(int n, pt_tensor *const *params, double max_norm,
                                    double norm_type, bool error_if_nonfinite, double *total_norm);
/* Same over a module's parameters (clip_grad_norm_(module.parameters(), ...)). */
PT_API pt_status pt_nn_clip_grad_norm_(pt_module *m, double max_norm, double norm_type,
                                       bool error_if_nonfinite, double *total_norm);
/* torch.nn.utils.clip_grad_value_: clamps every existing grad to [-clip_value, clip_value]
 * in place. Errors: n < 0, a NULL parameter, clip_value < 0 or NaN. */
PT_API pt_status pt_clip_grad_value_(int n, pt_tensor *const *params, double clip_value);
/* Same over a module's parameters. */
PT_API pt_status pt_nn_clip_grad_value_(pt_module *m, double clip_value);

/* ---- EMA of weights -------------------------------------------------------------------------- */

typedef struct pt_ema pt_ema;

/* EMA options. decay: weight of the running average (timm default 0.9999).
 * averaged_model: AveragedModel semantics, where the first pt_ema_update copies the weights
 * (n_averaged == 0) and later ones average; false: timm ModelEmaV2, where the average starts
 * from the weights at pt_ema_new and every update averages. Buffers (BatchNorm running stats)
 * are copied from the module at every update, not averaged. */
typedef struct pt_ema_opts {
    double decay;
    bool averaged_model;
} pt_ema_opts;
#define PT_EMA_DEFAULTS ((pt_ema_opts){.decay = 0.9999})

/* A shadow copy of m's parameters and buffers (pt_nn_named_parameters / _buffers order), not
 * requiring grad. Returns a new object, or NULL on error (decay outside [0, 1], NULL m). */
PT_API pt_ema *pt_ema_new(pt_module *m, pt_ema_opts opts);
/* One update after an optimizer step: avg = decay * avg + (1 - decay) * param for every
 * parameter (a copy on AveragedModel's first update), buffers copied. m must have the same
 * parameter/buffer shapes as at pt_ema_new (else an error, nothing changed). */
PT_API pt_status pt_ema_update(pt_ema *e, pt_module *m);
/* Copies the averaged weights (and buffers) into m's tensors, for evaluation or export. */
PT_API pt_status pt_ema_copy_to(const pt_ema *e, pt_module *m);
/* Exchanges the values of m's parameters/buffers and the averages: call once to evaluate with
 * the EMA weights, once more to go back to training. */
PT_API pt_status pt_ema_swap(pt_ema *e, pt_module *m);
/* Number of pt_ema_update calls (AveragedModel's n_averaged). */
PT_API int64_t pt_ema_num_updates(const pt_ema *e);
/* Number of averaged parameters and shadow tensor i, borrowed (NULL out of range). */
PT_API int pt_ema_num_params(const pt_ema *e);
PT_API pt_tensor *pt_ema_param_ref(const pt_ema *e, int i);
/* Frees the shadow copy. NULL is a no-op. */
PT_API void pt_ema_free(pt_ema *e);

/* ---- GradScaler ------------------------------------------------------------------------------ */

typedef struct pt_grad_scaler pt_grad_scaler;

/* torch.cuda.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval,
 * enabled); PT_GRAD_SCALER_DEFAULTS holds torch's defaults (65536, 2, 0.5, 2000). disabled:
 * scale() returns the loss, step() just steps. */
typedef struct pt_grad_scaler_opts {
    double init_scale;
    double growth_factor;
    double backoff_factor;
    int64_t growth_interval;
    bool disabled;
} pt_grad_scaler_opts;
#define PT_GRAD_SCALER_DEFAULTS                                                                    \
    ((pt_grad_scaler_opts){.init_scale = 65536.0,                                                  \
                           .growth_factor = 2.0,                                                   \
                           .backoff_factor = 0.5,                                                  \
                           .growth_interval = 2000})

/* Returns a new scaler, or NULL on error (growth_factor <= 1, backoff_factor outside (0, 1),
 * growth_interval <= 0, init_scale <= 0). */
PT_API pt_grad_scaler *pt_grad_scaler_new(pt_grad_scaler_opts opts);
/* scaler.scale(loss): loss * scale, recorded by autograd (new reference). The result keeps the
 * loss's dtype and shape (torch multiplies by a float32 [1] tensor, which promotes a float16
 * loss to float32 [1]). */
PT_API pt_tensor *pt_grad_scaler_scale(pt_grad_scaler *gs, const pt_tensor *loss);
/* scaler.unscale_(optimizer): multiplies every grad of o by 1/scale (the reciprocal taken in
 * float64 and rounded to float32, as torch) and records whether any grad held inf/NaN.
 * Errors: called twice for o since the last update ("unscale_() has already been called on
 * this optimizer since the last update()"), or after step. */
PT_API pt_status pt_grad_scaler_unscale_(pt_grad_scaler *gs, pt_optim *o);
/* scaler.step(optimizer): unscales o if not done yet, then runs pt_optim_step unless an
 * inf/NaN was found. *skipped (may be NULL) tells which. Errors: step twice before update,
 * an optimizer without any grad ("No inf checks were recorded for this optimizer."). */
PT_API pt_status pt_grad_scaler_step(pt_grad_scaler *gs, pt_optim *o, bool *skipped);
/* scaler.update(): scale *= backoff_factor if any stepped optimizer found inf/NaN (growth
 * tracker reset), else after growth_interval consecutive clean steps scale *= growth_factor.
 * Scale arithmetic is in float32 like torch's scale tensor. Errors: no unscale/step since the
 * last update ("No inf checks were recorded prior to update."). */
PT_API pt_status pt_grad_scaler_update(pt_grad_scaler *gs);
/* scaler.update(new_scale): sets the scale (rounded to float32) and forgets the step state. */
PT_API pt_status pt_grad_scaler_update_to(pt_grad_scaler *gs, double new_scale);
/* scaler.get_scale() (1.0 when disabled). */
PT_API double pt_grad_scaler_get_scale(const pt_grad_scaler *gs);
/* The growth tracker: consecutive unskipped steps since the last change of scale. */
PT_API int64_t pt_grad_scaler_growth_tracker(const pt_grad_scaler *gs);
/* scaler.state_dict(): {"scale", "growth_factor", "backoff_factor", "growth_interval",
 * "_growth_tracker"} ({} when disabled). New reference. */
PT_API pt_value *pt_grad_scaler_state_dict(const pt_grad_scaler *gs);
/* scaler.load_state_dict(sd). Errors: missing keys or wrong types (scaler unchanged). */
PT_API pt_status pt_grad_scaler_load_state_dict(pt_grad_scaler *gs, const pt_value *sd);
/* NULL is a no-op. */
PT_API void pt_grad_scaler_free(pt_grad_scaler *gs);

#ifdef __cplusplus
}
#endif
#endif
