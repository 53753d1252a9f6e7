/* The index family's forward computations without autograd recording (src/ops/index.c,
 * index_adv.c). The public functions in src/ops/index_grad.c call them and record nodes. */
#ifndef PT_OPS_INDEX_GRAD_H
#define PT_OPS_INDEX_GRAD_H

#include "../core/internal.h"
#include "prometorch/ops_index.h"

pt_tensor *pti_fwd_index_select(const pt_tensor *t, int64_t dim, const pt_tensor *index);
pt_tensor *pti_fwd_embedding_ex(const pt_tensor *weight, const pt_tensor *indices,
                                const pt_embedding_opts *opts);
pt_tensor *pti_fwd_gather(const pt_tensor *t, int64_t dim, const pt_tensor *index);
pt_status pti_fwd_scatter_(pt_tensor *t, int64_t dim, const pt_tensor *index, const pt_tensor *src);
pt_tensor *pti_fwd_scatter(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                           const pt_tensor *src);
pt_status pti_fwd_scatter_scalar_(pt_tensor *t, int64_t dim, const pt_tensor *index, double value);
pt_tensor *pti_fwd_scatter_scalar(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                                  double value);
pt_status pti_fwd_scatter_add_(pt_tensor *t, int64_t dim, const pt_tensor *index,
                               const pt_tensor *src);
pt_tensor *pti_fwd_scatter_add(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                               const pt_tensor *src);
pt_status pti_fwd_index_add_(pt_tensor *t, int64_t dim, const pt_tensor *index,
                             const pt_tensor *source, double alpha);
pt_tensor *pti_fwd_index_add(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                             const pt_tensor *source, double alpha);
pt_tensor *pti_fwd_masked_fill(const pt_tensor *t, const pt_tensor *mask, double value);
pt_status pti_fwd_masked_fill_(pt_tensor *t, const pt_tensor *mask, double value);
pt_tensor *pti_fwd_masked_fill_tensor(const pt_tensor *t, const pt_tensor *mask,
                                      const pt_tensor *value);
pt_status pti_fwd_masked_fill_tensor_(pt_tensor *t, const pt_tensor *mask, const pt_tensor *value);
pt_tensor *pti_fwd_masked_select(const pt_tensor *t, const pt_tensor *mask);
pt_tensor *pti_fwd_index(const pt_tensor *t, int n, const pt_tensor *const *indices);
pt_status pti_fwd_index_put_(pt_tensor *t, int n, const pt_tensor *const *indices,
                             const pt_tensor *values, bool accumulate);
pt_tensor *pti_fwd_index_put(const pt_tensor *t, int n, const pt_tensor *const *indices,
                             const pt_tensor *values, bool accumulate);
pt_tensor *pti_fwd_sort(const pt_tensor *t, int64_t dim, bool descending, bool stable,
                        pt_tensor **indices);
pt_tensor *pti_fwd_topk(const pt_tensor *t, int64_t k, int64_t dim, bool largest, bool sorted,
                        pt_tensor **indices);

#endif
