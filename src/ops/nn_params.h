/* Kernel parameters of the nn family, shared by the front-ends (src/ops/nn.c) and the
 * backends' kernels (src/backends/<device>/nn*.c). Front-ends pass contiguous inputs in the
 * compute dtype (float32 or float64) and contiguous outputs of the same dtype. */
#ifndef PT_OPS_NN_PARAMS_H
#define PT_OPS_NN_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "prometorch/types.h"

/* batch_norm: in = {x [N, C, S], weight [C] or NULL, bias [C] or NULL, running_mean,
 * running_var (any floating dtype and stride, NULL when absent; read in eval)};
 * out = {y, running_mean or NULL, running_var or NULL} (written in training). */
typedef struct pti_batch_norm_params {
    int64_t n, c, s;
    bool training;
    double momentum, eps;
} pti_batch_norm_params;

/* batch_norm_backward (same params): in = {grad [N, C, S], x [N, C, S], weight [C] or NULL,
 * running_mean [C], running_var [C] (eval only, else NULL)}; out = {grad_x, grad_weight [C] or
 * NULL, grad_bias [C] or NULL}. All contiguous in the compute dtype. */

/* layer_norm and rms_norm: in = {x [M, D], weight [D] or NULL, bias [D] or NULL (layer_norm
 * only)}; out = {y [M, D]}. */
typedef struct pti_row_norm_params {
    int64_t rows, cols;
    double eps;
} pti_row_norm_params;

/* row_norm_backward (layer_norm / rms_norm gradients): in = {grad [rows, cols], x [rows, cols],
 * weight [cols] or NULL}; out = {grad_x, grad_weight [cols] or NULL, grad_bias [cols] or NULL}.
 * All contiguous in the compute dtype. rms: no mean subtraction. */
typedef struct pti_row_norm_bw_params {
    int64_t rows, cols;
    double eps;
    bool rms;
} pti_row_norm_bw_params;

/* group_norm: in = {x [N, C, S], weight [C] or NULL, bias [C] or NULL}; out = {y}. */
typedef struct pti_group_norm_params {
    int64_t n, c, s, groups;
    double eps;
} pti_group_norm_params;

/* group_norm_backward (same params): in = {grad [N, C, S], x [N, C, S], weight [C] or NULL};
 * out = {grad_x, grad_weight [C] or NULL, grad_bias [C] or NULL}, contiguous compute dtype. */

/* dropout: in = {x} (contiguous, any floating dtype); out = {y, keep mask (bool) or NULL}.
 * Element i keeps when uniform(word i%4 of philox(key, base + i/4)) < 1 - p. */
typedef struct pti_dropout_params {
    double p;
    uint64_t key, base;
} pti_dropout_params;

/* scaled_dot_product_attention: in = {q [B, L, E], k [B, S, E], v [B, S, Ev], mask or NULL};
 * out = {o [B, L, Ev]}. The mask (bool, or the compute dtype) is read at
 * mask_offset(b) + l * mask_stride_l + s * mask_stride_s elements from pti_data(mask), where
 * mask_offset(b) unravels b over batch_shape[0..batch_ndim) with mask_batch_stride (0 on
 * broadcast dims). */
typedef struct pti_sdpa_params {
    int64_t batch, l, s, e, ev;
    int batch_ndim;
    int64_t batch_shape[PT_MAX_DIMS];
    int64_t mask_batch_stride[PT_MAX_DIMS];
    int64_t mask_stride_l, mask_stride_s;
    bool mask_is_bool, is_causal;
    double scale, dropout_p;
    uint64_t key, base;
} pti_sdpa_params;

/* rope (inference only; src/ops/nn_llm.c): in = {x [T, H, D] float32 (any strides), pos [T]
 * int32 or int64 (contiguous), freq_factors float32 [n_rot/2] (contiguous) or NULL};
 * out = {y [T, H, D] float32, contiguous}. The float fields are ggml's float32 values:
 * theta_scale = base^(-2/n_rot), corr_dims from beta_fast/beta_slow, mscale = attn_factor. */
typedef struct pti_rope_params {
    int64_t t, h, d, n_rot;
    bool neox;
    float theta_scale, freq_scale, ext_factor, mscale;
    float corr_dims[2];
} pti_rope_params;

/* attention_kv (inference only): in = {q [T, Hq, D] float32 contiguous, k [S, Hkv, D],
 * v [S, Hkv, Dv] (both float32 or both float16, any strides on dims 0 and 1, dim 2
 * contiguous)}; out = {o [T, Hq, Dv] float32 contiguous}. Query row t is at position
 * q_pos0 + t; window 0 = no sliding window. */
typedef struct pti_attention_kv_params {
    int64_t t, hq, hkv, d, dv, s;
    int64_t q_pos0, window;
    float scale;
} pti_attention_kv_params;

#endif
