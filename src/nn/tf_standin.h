/* TEMPORARY stand-ins for nn_layers.h (Linear, LayerNorm, Dropout) until it lands on main;
 * same signatures, removed at the merge. */
#ifndef PT_NN_TF_STANDIN_H
#define PT_NN_TF_STANDIN_H
#include "prometorch/nn.h"
typedef struct pt_nn_layer_norm_opts {
    double eps;
    bool no_elementwise_affine;
    bool no_bias;
} pt_nn_layer_norm_opts;
pt_module *pt_nn_linear(int64_t in, int64_t out, bool bias);
pt_module *pt_nn_dropout(double p);
pt_module *pt_nn_layer_norm_ex(int n, const int64_t *normalized_shape,
                               const pt_nn_layer_norm_opts *opts);
#endif
