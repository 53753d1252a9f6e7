/* Autograd recording of the reduce family: the front-ends in reduce.c call
 * pti_reduce_record() after computing a result; the backward formulas live in reduce_grad.c. */
#ifndef PT_OPS_REDUCE_GRAD_H
#define PT_OPS_REDUCE_GRAD_H

#include "../graph/node.h"

/* Which backward formula a recorded reduction uses. */
typedef enum pti_reduce_grad {
    PTI_RG_SUM,
    PTI_RG_MEAN,
    PTI_RG_PROD,
    PTI_RG_EXTREME_ALL, /* max()/min(): ties share evenly; NaN positions take the gradient */
    PTI_RG_AMAX,        /* amax/amin: ties share evenly */
    PTI_RG_EXTREME_DIM, /* max_dim/min_dim: the gradient goes to the returned index */
    PTI_RG_VAR,
    PTI_RG_STD,
    PTI_RG_NORM,
    PTI_RG_LOGSUMEXP,
    PTI_RG_CUMSUM,
    PTI_RG_CUMPROD,
    PTI_RG_SOFTMAX,
    PTI_RG_LOG_SOFTMAX,
} pti_reduce_grad;

/* When grad mode is on and t requires grad, attaches a node named `name` to `out` (the result
 * of reducing t over the dims in `bits`, or for the dim-wise ops, along the one dim in `bits`).
 * `idx` is max_dim/min_dim's index tensor (else NULL); `arg` is the correction (var/std) or p
 * (norm). Returns out, or NULL (out released) when recording fails; NULL out passes through. */
pt_tensor *pti_reduce_record(const char *name, pti_reduce_grad kind, const pt_tensor *t,
                             pt_tensor *out, const pt_tensor *idx, uint32_t bits, bool keepdim,
                             double arg);

#endif
