/* Helpers shared by the nn layer files (src/nn/linear.c, conv.c, norm.c, pool.c, ...):
 * PyTorch-style repr formatting and parameter creation. */
#ifndef PT_NN_LAYERS_INTERNAL_H
#define PT_NN_LAYERS_INTERNAL_H

#include <stddef.h>

#include "prometorch/nn.h"

/* Appends printf-formatted text to buf (capacity cap, always NUL-terminated). */
void pti_nn_catf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Appends v as Python's repr(float) writes it: "0.1", "1e-05", "2.0", "1e+16". */
void pti_nn_cat_float(char *buf, size_t cap, double v);
/* Appends a Python tuple of ints: "(3,)", "(3, 5)". */
void pti_nn_cat_tuple(char *buf, size_t cap, int n, const int64_t *v);
/* "True" / "False". */
const char *pti_nn_bool(bool b);

/* Registers a new float32 parameter of the given shape filled by U(-bound, bound) (or with the
 * constant `fill` when bound < 0). Returns the borrowed tensor, NULL on error. */
pt_tensor *pti_nn_new_param(pt_module *m, const char *name, int ndim, const int64_t *shape,
                            double bound, double fill);
/* Registers "weight" (w_ndim dims, w_shape) and, when with_bias, "bias" ([out]), both
 * U(-bound, bound) (Linear/Conv's kaiming_uniform(a=sqrt(5)) and bias init), storing the borrowed
 * tensors in *weight / *bias (untouched without bias). Returns m, or NULL after freeing m on
 * error. */
pt_module *pti_nn_add_weight_bias(pt_module *m, int w_ndim, const int64_t *w_shape, int64_t out,
                                  bool with_bias, double bound, pt_tensor **weight,
                                  pt_tensor **bias);
/* Registers a new buffer (zeros/ones/...) filled with `fill` of dtype dt. Borrowed result. */
pt_tensor *pti_nn_new_buffer(pt_module *m, const char *name, int ndim, const int64_t *shape,
                             pt_dtype dt, double fill);

#endif
