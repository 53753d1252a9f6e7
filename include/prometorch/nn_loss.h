/* PromeTorch nn: loss modules (torch.nn.CrossEntropyLoss, MSELoss, ...), one per loss op of
 * ops_loss.h.
 *
 * A loss module takes two inputs, (input, target), and gives one output, the loss, through
 * pt_nn_forward_n(loss, 2, in, 1, out) or the shorthand pt_nn_loss(loss, input, target).
 * Any other input/output count (including pt_nn_forward with one input) is a
 * PT_ERR_INVALID_ARG error. The computation, shapes, dtypes, reductions and errors are the
 * ops' (see ops_loss.h); autograd records through the ops.
 *
 * Class weights (CrossEntropyLoss, NLLLoss, BCELoss, BCEWithLogitsLoss) and pos_weight are
 * registered as persistent buffers named "weight" and "pos_weight" (in that order), as
 * PyTorch does, so they appear in named_buffers and the state dict, move with pt_nn_to and
 * load with pt_nn_load_state_dict. A NULL weight registers nothing (PyTorch's None). The
 * module holds its own reference to the tensor it is given (the caller keeps its own).
 *
 * Reprs are PyTorch's: "CrossEntropyLoss()", "MSELoss()", ... (PyTorch shows no options).
 *
 * Constructors return a new module (pt_nn_free), or NULL with PT_ERR_INVALID_ARG for a bad
 * option: a reduction outside the enum, PT_REDUCTION_BATCHMEAN anywhere but KLDivLoss, label
 * smoothing outside [0, 1], beta < 0, delta <= 0, a weight that is not floating-point. */
#ifndef PROMETORCH_NN_LOSS_H
#define PROMETORCH_NN_LOSS_H

#include "types.h"
#include "nn.h"
#include "ops_loss.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs a loss module: pt_nn_forward_n(loss, 2, {input, target}, 1, &out). Returns a new
 * reference (0-dim unless the reduction is PT_REDUCTION_NONE), or NULL with the error set. */
PT_API pt_tensor *pt_nn_loss(pt_module *loss, const pt_tensor *input, const pt_tensor *target);

/* Options of pt_nn_cross_entropy_loss / pt_nn_nll_loss; the zero value is PyTorch's defaults
 * (no weight, ignore_index -100, no smoothing, 'mean'). ignore_index applies only when
 * has_ignore_index (as in pt_cross_entropy_opts). weight is borrowed: the module registers
 * it as its buffer "weight" (its own reference; the same tensor object, as PyTorch). */
typedef struct pt_cross_entropy_loss_opts {
    pt_tensor *weight; /* [C], nullable */
    bool has_ignore_index;
    int64_t ignore_index;
    double label_smoothing; /* in [0, 1] */
    pt_reduction reduction;
} pt_cross_entropy_loss_opts;

typedef struct pt_nll_loss_module_opts {
    pt_tensor *weight; /* [C], nullable */
    bool has_ignore_index;
    int64_t ignore_index;
    pt_reduction reduction;
} pt_nll_loss_module_opts;

/* nn.CrossEntropyLoss(weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0):
 * pt_cross_entropy_ex(input, target, opts). opts may be NULL (defaults). */
PT_API pt_module *pt_nn_cross_entropy_loss(const pt_cross_entropy_loss_opts *opts);
/* nn.NLLLoss(weight=None, ignore_index=-100, reduction='mean'): pt_nll_loss_ex. opts may be
 * NULL. */
PT_API pt_module *pt_nn_nll_loss(const pt_nll_loss_module_opts *opts);

/* nn.MSELoss(reduction='mean') (PT_REDUCTION_MEAN is 0): pt_mse_loss. */
PT_API pt_module *pt_nn_mse_loss(pt_reduction reduction);
/* nn.L1Loss(reduction='mean'): pt_l1_loss. */
PT_API pt_module *pt_nn_l1_loss(pt_reduction reduction);
/* nn.SmoothL1Loss(reduction='mean', beta=1.0): pt_smooth_l1_loss. beta >= 0. */
PT_API pt_module *pt_nn_smooth_l1_loss(pt_reduction reduction, double beta);
/* nn.HuberLoss(reduction='mean', delta=1.0): pt_huber_loss. delta > 0. */
PT_API pt_module *pt_nn_huber_loss(pt_reduction reduction, double delta);

/* nn.BCELoss(weight=None, reduction='mean'): pt_binary_cross_entropy. weight (nullable,
 * borrowed) broadcasts to the input and becomes the buffer "weight". */
PT_API pt_module *pt_nn_bce_loss(pt_tensor *weight, pt_reduction reduction);
/* nn.BCEWithLogitsLoss(weight=None, reduction='mean', pos_weight=None):
 * pt_binary_cross_entropy_with_logits. weight and pos_weight (nullable, borrowed) become the
 * buffers "weight" and "pos_weight". */
PT_API pt_module *pt_nn_bce_with_logits_loss(pt_tensor *weight, pt_reduction reduction,
                                             pt_tensor *pos_weight);
/* nn.KLDivLoss(reduction='mean', log_target=False): pt_kl_div(input, target, ...); the only
 * loss that accepts PT_REDUCTION_BATCHMEAN. */
PT_API pt_module *pt_nn_kl_div_loss(pt_reduction reduction, bool log_target);

#ifdef __cplusplus
}
#endif
#endif
