/* Helpers shared by the index family's front-end files (src/ops/index.c, index_adv.c). */
#ifndef PT_OPS_INDEX_UTIL_H
#define PT_OPS_INDEX_UTIL_H

#include "../core/internal.h"

/* idx (int64, or int32 when allow_i32) as a contiguous int64 tensor; PT_ERR_DTYPE naming
 * op and arg otherwise. Returns a new reference. */
pt_tensor *pti_index_as_i64(const char *op, const char *arg, const pt_tensor *idx, bool allow_i32);
/* Checks t has a plain dtype and the n tensors (NULLs skipped) share a device. */
bool pti_index_check_data(const char *op, const pt_tensor *t, int n, const pt_tensor *const *ts);
/* A view of t broadcast to shape (stride 0 on stretched dims), new reference or NULL. */
pt_tensor *pti_index_expand(const char *op, const pt_tensor *t, int ndim, const int64_t *shape);
/* Number of non-zero elements of t (through the count_nonzero kernel), -1 on error. */
int64_t pti_index_count_nonzero(const pt_tensor *t);

#endif
