/* Helpers shared by the op front-ends: broadcasting, dim wrapping, dim lists, result types.
 * Each reports failures through the error state, naming the op. */
#ifndef PT_OPS_COMMON_H
#define PT_OPS_COMMON_H

#include "../core/internal.h"

/* The broadcast shape of two shapes (right-aligned, size 1 stretches). */
bool pti_broadcast_shapes(const char *op, int na, const int64_t *sa, int nb, const int64_t *sb,
                          int *nout, int64_t *out);
/* Wraps a possibly negative dim into [0, ndim); a 0-dim tensor accepts -1 and 0 (as PyTorch). */
bool pti_wrap_dim(const char *op, int64_t dim, int ndim, int *out);
/* mask[d] = true for each listed dim; ndims == 0 (or dims == NULL) selects every dim. Repeated
 * dims are an error. */
bool pti_dims_mask(const char *op, int ndims, const int64_t *dims, int ndim,
                   bool mask[PT_MAX_DIMS]);
/* Fails unless t has a plain (non-block) dtype. */
bool pti_check_plain_dtype(const char *op, const pt_tensor *t);
/* Fails unless t is floating point (float32/64/16, bfloat16). */
bool pti_check_floating(const char *op, const char *arg, const pt_tensor *t);
/* t as dtype dt: a new reference to t itself when it already is, else a converted copy. */
pt_tensor *pti_as_dtype(const pt_tensor *t, pt_dtype dt);
/* A new reference viewing the same storage and geometry (an alias). */
pt_tensor *pti_alias(const pt_tensor *t);

/* Backward helpers: g summed over broadcast dims so it has the given shape (new reference; g
 * itself, retained, when already that shape). */
pt_tensor *pti_sum_to(const pt_tensor *g, int ndim, const int64_t *shape);
/* Same, to the shape of t. */
pt_tensor *pti_sum_to_like(const pt_tensor *g, const pt_tensor *t);

#endif
