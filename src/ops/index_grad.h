/* The index family's forward computations without autograd recording (pti_fwd_*, in
 * src/ops/index.c and index_adv.c, beside the public front-ends that call them) and the
 * recording of their nodes (pti_index_record_*, in src/ops/index_grad.c, beside the backward
 * formulas). */
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

/* Recording: each attaches the op's node to `out`, the forward's result (the caller has
 * checked pti_grad_recording), and returns out, or NULL (out released) when recording fails;
 * a NULL out passes through. */
pt_tensor *pti_index_record_select(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                                   pt_tensor *out);
pt_tensor *pti_index_record_gather(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                                   pt_tensor *out);
/* scatter (src NULL: the scalar form) or scatter_add (add true). */
pt_tensor *pti_index_record_scatter(const char *name, const pt_tensor *t, int64_t dim,
                                    const pt_tensor *index, const pt_tensor *src, bool add,
                                    pt_tensor *out);
pt_tensor *pti_index_record_index_add(const pt_tensor *t, int64_t dim, const pt_tensor *index,
                                      const pt_tensor *source, double alpha, pt_tensor *out);
/* value NULL: the scalar form. */
pt_tensor *pti_index_record_masked_fill(const pt_tensor *t, const pt_tensor *mask,
                                        const pt_tensor *value, pt_tensor *out);
pt_tensor *pti_index_record_masked_select(const pt_tensor *t, const pt_tensor *mask,
                                          pt_tensor *out);
pt_tensor *pti_index_record_index(const pt_tensor *t, int n, const pt_tensor *const *indices,
                                  pt_tensor *out);
pt_tensor *pti_index_record_index_put(const pt_tensor *t, int n, const pt_tensor *const *indices,
                                      const pt_tensor *values, bool accumulate, pt_tensor *out);
/* sort / topk: records vals (sorted along dim) against t; hands idx to *indices or releases
 * it. */
pt_tensor *pti_index_record_sort(const char *name, const pt_tensor *t, int64_t dim, pt_tensor *vals,
                                 pt_tensor *idx, pt_tensor **indices);
pt_tensor *pti_index_record_embedding(const pt_tensor *weight, const pt_tensor *indices,
                                      const pt_embedding_opts *opts, pt_tensor *out);

/* In-place ops that record: pti_inplace_check plus a refusal for views with history (writing
 * through a view would change its base without the base's history knowing). */
pt_status pti_index_inplace_check(const char *op, const pt_tensor *t);
/* Copies the recorded out-of-place result into t and gives t its history; takes result. */
pt_status pti_index_inplace_from(pt_tensor *t, pt_tensor *result);

#endif
