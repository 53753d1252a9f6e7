/* Autograd recording of the loss family (formulas in src/ops/loss_grad.c), called by the
 * front-ends in src/ops/loss.c once the loss has been computed. */
#ifndef PT_OPS_LOSS_GRAD_H
#define PT_OPS_LOSS_GRAD_H

#include "../core/internal.h"
#include "loss_params.h"

typedef enum pti_pointwise_loss_kind {
    PTI_LOSS_MSE,
    PTI_LOSS_L1,
    PTI_LOSS_SMOOTH_L1,
    PTI_LOSS_HUBER,
    PTI_LOSS_BCE,
    PTI_LOSS_BCE_LOGITS,
    PTI_LOSS_KL_DIV
} pti_pointwise_loss_kind;

/* Records the node of an elementwise loss on `out` when input or target requires grad.
 * weight and pos_weight are constants (PyTorch gives them no gradient). On failure releases
 * out and returns NULL; otherwise returns out. */
pt_tensor *pti_loss_record_pointwise(pti_pointwise_loss_kind kind, const pt_tensor *input,
                                     const pt_tensor *target, const pt_tensor *weight,
                                     const pt_tensor *pos_weight,
                                     const pti_pointwise_loss_params *p, pt_tensor *out);

/* Same for cross_entropy (log_softmax = true) and nll_loss. */
pt_tensor *pti_loss_record_class(bool cross_entropy, const pt_tensor *input,
                                 const pt_tensor *target, const pt_tensor *weight,
                                 const pti_class_loss_params *p, pt_tensor *out);

#endif
