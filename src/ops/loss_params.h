/* Kernel parameters of the loss family, shared by the front-ends (src/ops/loss.c) and the
 * backends' kernels (src/backends/<device>/loss*.c). Front-ends pass contiguous inputs in the
 * compute dtype (float32 or float64) and a contiguous output of the same dtype. */
#ifndef PT_OPS_LOSS_PARAMS_H
#define PT_OPS_LOSS_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "prometorch/backend.h"
#include "prometorch/ops_loss.h"

/* Elementwise losses (mse, l1, smooth_l1, huber, binary_cross_entropy[_with_logits], kl_div):
 * the public pt_pointwise_loss_params of prometorch/backend.h (its comment is the contract),
 * so that an out-of-tree backend can implement them. */
typedef pt_pointwise_loss_params pti_pointwise_loss_params;

/* cross_entropy and nll_loss: in = {input [N, C, S], target, weight [C] or NULL} where target
 * is int64 [N, S] (class indices) or the compute dtype [N, C, S] (probabilities,
 * cross_entropy only); out = {loss}: [N, S] for NONE, 0-dim otherwise.
 * Their backward ops take a fourth input, grad_output ([N, S] for NONE, 0-dim otherwise, in
 * the compute dtype), and write d(loss)/d(input) [N, C, S]. */
typedef struct pti_class_loss_params {
    int64_t n, c, s;
    bool prob_target;
    int64_t ignore_index;
    double label_smoothing;
    pt_reduction reduction;
} pti_class_loss_params;

#endif
