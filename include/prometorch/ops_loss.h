/* PromeTorch ops: the loss family, with torch.nn.functional semantics. Every function
 * returning pt_tensor * returns a new reference, or NULL with the error set (see core.h); a
 * NULL required tensor argument propagates the earlier error.
 *
 * Reductions: PT_REDUCTION_MEAN (the default, 0) returns a 0-dim tensor with the mean (NaN
 * over zero elements, as PyTorch), PT_REDUCTION_SUM the sum, PT_REDUCTION_NONE the
 * per-element (or per-sample) losses. Sums are accumulated in double in fixed blocks, so the
 * result does not depend on the thread count.
 * Dtypes: the result has the promoted floating dtype of input and target; float16/bfloat16
 * are computed in float32 and rounded back. Inputs may be non-contiguous. */
#ifndef PROMETORCH_OPS_LOSS_H
#define PROMETORCH_OPS_LOSS_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pt_reduction {
    PT_REDUCTION_MEAN = 0, /* 'mean' (default) */
    PT_REDUCTION_SUM,      /* 'sum' */
    PT_REDUCTION_NONE,     /* 'none' */
    PT_REDUCTION_BATCHMEAN /* 'batchmean': sum / input.size(0); pt_kl_div only */
} pt_reduction;

/* ---- classification ------------------------------------------------------------------------ */

/* Options of pt_cross_entropy_ex / pt_nll_loss_ex; the zero value is PyTorch's defaults.
 * ignore_index: PyTorch's default is -100, which a zero-initialized int cannot express, so it
 * only applies when has_ignore_index is true; otherwise targets equal to -100 are ignored
 * (torch's default). Set {.has_ignore_index = true, .ignore_index = 0} to ignore class 0. */
typedef struct pt_cross_entropy_opts {
    const pt_tensor *weight; /* [C] per-class rescaling, nullable */
    bool has_ignore_index;
    int64_t ignore_index;   /* used when has_ignore_index (default -100) */
    double label_smoothing; /* in [0, 1] */
    pt_reduction reduction;
} pt_cross_entropy_opts;

typedef struct pt_nll_loss_opts {
    const pt_tensor *weight; /* [C], nullable */
    bool has_ignore_index;
    int64_t ignore_index; /* used when has_ignore_index (default -100) */
    pt_reduction reduction;
} pt_nll_loss_opts;

/* F.cross_entropy(logits, target) with the defaults (mean, ignore_index -100). */
PT_API pt_tensor *pt_cross_entropy(const pt_tensor *logits, const pt_tensor *target);
/* F.cross_entropy(logits, target, weight, ignore_index=, reduction=, label_smoothing=);
 * opts may be NULL (defaults). logits is [C], [N, C] or [N, C, d1, ...] (class dim 1).
 * Class-index targets: an integer tensor of shape [], [N] or [N, d1, ...]; values in [0, C)
 * or ignore_index (PT_ERR_INDEX naming the value otherwise). 'mean' divides by the sum of
 * the targets' class weights (count of non-ignored targets without weight); NONE gives
 * [N, d1, ...]. Label smoothing follows PyTorch 1.13+: (1-eps) * nll + eps/C * smooth term.
 * Class-probability targets: a floating tensor of logits' shape; loss per sample is
 * -sum_c weight_c * target_c * log_softmax_c (target smoothed first); 'mean' divides by the
 * number of samples (N * d1 * ...). ignore_index does not apply there.
 * Errors: PT_ERR_SHAPE, PT_ERR_DTYPE, PT_ERR_INDEX, PT_ERR_INVALID_ARG (smoothing out of
 * [0, 1], batchmean). */
PT_API pt_tensor *pt_cross_entropy_ex(const pt_tensor *logits, const pt_tensor *target,
                                      const pt_cross_entropy_opts *opts);

/* F.nll_loss(log_probs, target) with the defaults. */
PT_API pt_tensor *pt_nll_loss(const pt_tensor *input, const pt_tensor *target);
/* F.nll_loss(input, target, weight, ignore_index=, reduction=): -weight[t] * input[n, t, ...]
 * with the shapes and mean rule of class-index cross entropy; opts may be NULL. */
PT_API pt_tensor *pt_nll_loss_ex(const pt_tensor *input, const pt_tensor *target,
                                 const pt_nll_loss_opts *opts);

/* The gradient of pt_cross_entropy_ex with respect to the logits, given grad_output (the
 * loss's gradient: the loss's shape, so 0-dim unless reduction is NONE), in one fused kernel
 * (what PyTorch's autograd computes for F.cross_entropy). Same options and checks as the loss;
 * returns a new reference with logits' shape and dtype. The autograd formula uses it for
 * first-order backward; it is not itself differentiable (create_graph composes public ops). */
PT_API pt_tensor *pt_cross_entropy_backward(const pt_tensor *grad_output, const pt_tensor *logits,
                                            const pt_tensor *target,
                                            const pt_cross_entropy_opts *opts);
/* The gradient of pt_nll_loss_ex with respect to its input, as pt_cross_entropy_backward. */
PT_API pt_tensor *pt_nll_loss_backward(const pt_tensor *grad_output, const pt_tensor *input,
                                       const pt_tensor *target, const pt_nll_loss_opts *opts);

/* ---- regression ---------------------------------------------------------------------------- */

/* F.mse_loss(input, target, reduction): (input - target)^2. input and target broadcast (as
 * PyTorch, which warns). */
PT_API pt_tensor *pt_mse_loss(const pt_tensor *input, const pt_tensor *target,
                              pt_reduction reduction);
/* F.l1_loss(input, target, reduction): |input - target|; broadcasting as pt_mse_loss. */
PT_API pt_tensor *pt_l1_loss(const pt_tensor *input, const pt_tensor *target,
                             pt_reduction reduction);
/* F.smooth_l1_loss(input, target, reduction, beta) (PyTorch's default beta is 1.0):
 * 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta; beta == 0 is l1.
 * PT_ERR_INVALID_ARG for beta < 0. */
PT_API pt_tensor *pt_smooth_l1_loss(const pt_tensor *input, const pt_tensor *target,
                                    pt_reduction reduction, double beta);
/* F.huber_loss(input, target, reduction, delta) (default delta 1.0): 0.5 d^2 where
 * |d| <= delta, else delta (|d| - 0.5 delta). PT_ERR_INVALID_ARG unless delta > 0. */
PT_API pt_tensor *pt_huber_loss(const pt_tensor *input, const pt_tensor *target,
                                pt_reduction reduction, double delta);

/* ---- binary and distribution losses -------------------------------------------------------- */

/* F.binary_cross_entropy(input, target, weight, reduction):
 * -weight * (t log(x) + (1 - t) log(1 - x)), each log clamped at -100 (PyTorch). input and
 * target have the same shape; weight (nullable) broadcasts to it. PT_ERR_INVALID_ARG when an
 * input element is outside [0, 1]. */
PT_API pt_tensor *pt_binary_cross_entropy(const pt_tensor *input, const pt_tensor *target,
                                          const pt_tensor *weight, pt_reduction reduction);
/* F.binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight), computed
 * in the stable form (1 - t) x + (1 + (pw - 1) t) softplus(-x). weight and pos_weight
 * (nullable) broadcast to input's shape (pos_weight usually [C], the last dim). */
PT_API pt_tensor *pt_binary_cross_entropy_with_logits(const pt_tensor *input,
                                                      const pt_tensor *target,
                                                      const pt_tensor *weight,
                                                      pt_reduction reduction,
                                                      const pt_tensor *pos_weight);
/* F.kl_div(input, target, reduction, log_target): input holds log-probabilities;
 * target * (log target - input) (0 where target == 0), or exp(t) * (t - input) when
 * log_target. PT_REDUCTION_BATCHMEAN divides the sum by input.size(0) (by 1 for a 0-dim
 * input); MEAN is PyTorch's element mean. input and target broadcast. */
PT_API pt_tensor *pt_kl_div(const pt_tensor *input, const pt_tensor *target, pt_reduction reduction,
                            bool log_target);

#ifdef __cplusplus
}
#endif
#endif
