/* Internal entry of the optimizer family (src/ops/optim.def) for src/optim: whether a fused
 * update kernel applies to a parameter, and running it through dispatch. */
#ifndef PT_OPS_OPTIM_H
#define PT_OPS_OPTIM_H

#include "../core/internal.h"
#include "optim_params.h"

/* True when op's kernel can update p: p, g and every non-NULL bufs[k] are contiguous float32
 * tensors of p's numel on p's device, and that device's backend has a kernel for op. False
 * (no error set) sends the caller to its generic path from public ops. */
bool pti_optim_kernel_applies(pti_op op, const pt_tensor *p, const pt_tensor *g, int n_bufs,
                              pt_tensor *const *bufs);
/* Runs op (after pti_optim_kernel_applies said yes): p updated in place with gradient g, state
 * buffers bufs[0..n_bufs) (NULL entries for absent optional ones, n_bufs <= 3), params the
 * algorithm's pti_optim_<x>_params. */
pt_status pti_optim_kernel(pti_op op, pt_tensor *p, const pt_tensor *g, int n_bufs,
                           pt_tensor *const *bufs, const void *params);
/* *out = the sum of t's squared elements, in double (t: pti_optim_kernel_applies(
 * PTI_OP_optim_sum_sq, t, t, 0, NULL) said yes). */
pt_status pti_optim_sum_sq(const pt_tensor *t, double *out);

#endif
