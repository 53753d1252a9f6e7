/* Autograd for the nn family (nn_grad.c): each pti_nn_record_* takes the forward result `out`
 * (computed under no-grad; NULL passes through), records a node with the op's backward formula
 * and returns out, or releases out and returns NULL with the error set. */
#ifndef PT_OPS_NN_GRAD_H
#define PT_OPS_NN_GRAD_H

#include "common.h"

pt_tensor *pti_nn_record_batch_norm(pt_tensor *out, const pt_tensor *x, const pt_tensor *rm,
                                    const pt_tensor *rv, const pt_tensor *weight,
                                    const pt_tensor *bias, bool training, double eps);
/* layer_norm (rms false) or rms_norm (rms true; bias NULL) over the last n_dims dims. */
pt_tensor *pti_nn_record_row_norm(pt_tensor *out, bool rms, const pt_tensor *x, int n_dims,
                                  const pt_tensor *weight, const pt_tensor *bias, double eps);
pt_tensor *pti_nn_record_group_norm(pt_tensor *out, const pt_tensor *x, int64_t groups,
                                    const pt_tensor *weight, const pt_tensor *bias, double eps);
pt_tensor *pti_nn_record_dropout(pt_tensor *out, const pt_tensor *x, const pt_tensor *mask,
                                 double p);
pt_tensor *pti_nn_record_sdpa(pt_tensor *out, const pt_tensor *q, const pt_tensor *k,
                              const pt_tensor *v, const pt_tensor *attn_mask,
                              const pt_tensor *drop_mask, double dropout_p, bool is_causal,
                              double scale);
/* softmax(q @ k^T * scale + mask (bool: false -> -inf), causal -> -inf) with public ops. */
pt_tensor *pti_sdpa_probs(const pt_tensor *q, const pt_tensor *k, const pt_tensor *mask,
                          bool is_causal, double scale);

#endif
