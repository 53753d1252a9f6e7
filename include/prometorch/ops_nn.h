/* PromeTorch ops: the nn family -- normalization (batch, layer, group, RMS), dropout and
 * scaled dot-product attention, with torch.nn.functional semantics. Every function returning
 * pt_tensor * returns a new reference, or NULL with the error set (see core.h). A NULL tensor
 * argument (where one is not optional) propagates the earlier error.
 *
 * Dtypes: float32 and float64 are computed natively; float16/bfloat16 inputs are computed in
 * float32 and the result rounded back (as PyTorch's CPU kernels do). Integer inputs are a
 * PT_ERR_DTYPE error. Optional per-channel tensors (weight, bias) are converted to the input's
 * compute dtype. Inputs may be non-contiguous; results are contiguous.
 *
 * Autograd: every op records when an input requires grad. The backward formulas are composed
 * of public ops (the statistics are recomputed from the saved input), so create_graph gives
 * second derivatives. batch_norm's running stats never get gradients (eval mode saves copies of
 * them, so later in-place updates do not invalidate the graph). pt_scaled_dot_product_attention
 * with dropout_p > 0, when recording, runs as public ops (scores, softmax, pt_dropout_mask on the
 * weights, matmul) so backward reuses the forward's mask; its random draws then differ from
 * the unrecorded (fused) call with the same seed. */
#ifndef PROMETORCH_OPS_NN_H
#define PROMETORCH_OPS_NN_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- normalization ------------------------------------------------------------------------ */

/* F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps).
 * x is [N, C], [N, C, L] or [N, C, H, W] (any [N, C, *]); running_mean, running_var, weight
 * and bias are [C] and each may be NULL (a NULL weight/bias is 1/0).
 * training: normalizes with the batch statistics (mean and biased variance over N and the
 * spatial dims) and, when the running stats are given, updates them in place:
 * running = (1 - momentum) * running + momentum * batch, using the UNBIASED batch variance for
 * running_var (PyTorch's rule). Needs more than one value per channel, except an empty batch,
 * which gives an empty output and leaves the running stats as they are. PyTorch's
 * momentum=None (a cumulative average, which needs num_batches_tracked) is the caller's to
 * express: pass momentum = 1 / num_batches_tracked.
 * !training: normalizes with running_mean/running_var, which are then required.
 * The running stats may have any floating dtype and stride; they are written through the
 * const-less pointers passed here. Errors: PT_ERR_SHAPE (ndim < 2, a [C] tensor of the wrong
 * size), PT_ERR_INVALID_ARG (missing running stats in eval, one value per channel in training),
 * PT_ERR_DTYPE. */
PT_API pt_tensor *pt_batch_norm(const pt_tensor *x, pt_tensor *running_mean, pt_tensor *running_var,
                                const pt_tensor *weight, const pt_tensor *bias, bool training,
                                double momentum, double eps);

/* The gradients of pt_batch_norm (same x, running stats, weight, training and eps) with respect
 * to x (returned: x's shape and dtype) and, through the out-pointers when non-NULL, to weight
 * and bias ([C], weight's dtype; computed even for a NULL weight). training: through the batch
 * statistics (PyTorch's formula); eval: with the running stats, which are then required. One
 * fused pass per channel; not itself differentiable (autograd composes public ops instead when
 * create_graph). On failure the out-pointers are NULL. Errors: those of the forward, and
 * PT_ERR_SHAPE when grad_out's shape differs from x's. */
PT_API pt_tensor *pt_batch_norm_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                         const pt_tensor *running_mean,
                                         const pt_tensor *running_var, const pt_tensor *weight,
                                         bool training, double eps, pt_tensor **grad_weight,
                                         pt_tensor **grad_bias);

/* F.layer_norm(x, normalized_shape, weight, bias, eps): normalizes over the last
 * n_normalized_dims dims, which must equal normalized_shape; weight and bias (nullable) have
 * shape normalized_shape. Biased variance. Errors: PT_ERR_SHAPE when the trailing dims or the
 * weight/bias shapes do not match. */
PT_API pt_tensor *pt_layer_norm(const pt_tensor *x, int n_normalized_dims,
                                const int64_t *normalized_shape, const pt_tensor *weight,
                                const pt_tensor *bias, double eps);

/* F.group_norm(x, num_groups, weight, bias, eps): x is [N, C, *]; C must be divisible by
 * num_groups; statistics over each group's C/num_groups channels and the spatial dims;
 * weight and bias (nullable) are [C] per-channel affine parameters. C = 0, or an empty
 * spatial size, is PT_ERR_SHAPE (PyTorch refuses them, even for N = 0). */
PT_API pt_tensor *pt_group_norm(const pt_tensor *x, int64_t num_groups, const pt_tensor *weight,
                                const pt_tensor *bias, double eps);

/* The gradients of pt_group_norm (same x, num_groups, weight, eps): grad_x returned, weight and
 * bias gradients ([C]) through the out-pointers when non-NULL. Fused; not itself
 * differentiable (see pt_batch_norm_backward). */
PT_API pt_tensor *pt_group_norm_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                         int64_t num_groups, const pt_tensor *weight, double eps,
                                         pt_tensor **grad_weight, pt_tensor **grad_bias);

/* F.rms_norm(x, normalized_shape, weight, eps) (PyTorch >= 2.4):
 * y = x * rsqrt(mean(x^2 over the last n dims) + eps) * weight, weight nullable.
 * A negative eps (e.g. -1) means PyTorch's default eps=None: torch.finfo(x.dtype).eps
 * (float16's/bfloat16's own eps for those inputs); eps == 0 is a literal zero. */
PT_API pt_tensor *pt_rms_norm(const pt_tensor *x, int n_normalized_dims,
                              const int64_t *normalized_shape, const pt_tensor *weight, double eps);

/* The gradients of pt_layer_norm / pt_rms_norm (same arguments) with respect to x (returned:
 * x's shape and dtype), and, through the out-pointers when non-NULL, to weight and bias
 * (normalized_shape, weight's dtype; computed even for a NULL weight, as for ones). One fused
 * pass; the statistics are recomputed from x. These are what autograd uses for the norms when
 * no graph of the backward is needed; they are not themselves differentiable (with
 * create_graph the formulas are composed of public ops). On failure the out-pointers are NULL.
 * Errors: those of the forward, PT_ERR_SHAPE when grad_out's shape differs from x's. */
PT_API pt_tensor *pt_layer_norm_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                         int n_normalized_dims, const int64_t *normalized_shape,
                                         const pt_tensor *weight, double eps,
                                         pt_tensor **grad_weight, pt_tensor **grad_bias);
PT_API pt_tensor *pt_rms_norm_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                       int n_normalized_dims, const int64_t *normalized_shape,
                                       const pt_tensor *weight, double eps,
                                       pt_tensor **grad_weight);

/* ---- dropout -------------------------------------------------------------------------------- */

/* F.dropout(x, p, training): zeroes each element with probability p and scales the kept ones
 * by 1/(1-p). Draws from the library generator (pt_manual_seed): element i (row-major) uses
 * Philox counter base + i/4, so a seed gives the same mask whatever the thread count.
 * !training or p == 0 returns an alias of x (no copy, no RNG draw); p == 1 returns zeros.
 * Errors: PT_ERR_INVALID_ARG unless 0 <= p <= 1. */
PT_API pt_tensor *pt_dropout(const pt_tensor *x, double p, bool training);
/* pt_dropout, also returning the keep mask (bool, x's shape; true = kept) through `mask`
 * when it is non-NULL (a new reference; all true when no dropout was applied, all false for
 * p == 1). The gradient of dropout is grad * mask / (1 - p). */
PT_API pt_tensor *pt_dropout_mask(const pt_tensor *x, double p, bool training, pt_tensor **mask);

/* ---- attention ------------------------------------------------------------------------------- */

/* F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale)
 * (PyTorch >= 2.0, math semantics): softmax(q @ k^T * scale + mask) @ v.
 * q is [..., L, E], k [..., S, E], v [..., S, Ev] with identical batch dims (no broadcasting
 * of q/k/v and no grouped-query attention); returns [..., L, Ev].
 * attn_mask (nullable) broadcasts to [..., L, S]: a bool mask keeps the positions that are
 * true (false -> -inf), a floating mask is added to the scores.
 * is_causal masks position s > l (the top-left aligned lower triangle, as torch.tril).
 * Unlike PyTorch (which refuses attn_mask together with is_causal) both may be given; they
 * are then combined. A row with every position masked gives NaN (as PyTorch's math path).
 * dropout_p > 0 drops attention weights with the library generator (scaled by 1/(1-p)).
 * scale == 0 means 1/sqrt(E). The matmuls run on BLAS; the softmax is max-subtracted. */
PT_API pt_tensor *pt_scaled_dot_product_attention(const pt_tensor *q, const pt_tensor *k,
                                                  const pt_tensor *v, const pt_tensor *attn_mask,
                                                  double dropout_p, bool is_causal, double scale);

/* ---- LLM inference: rotary embeddings and attention over a key/value cache ------------------
 * Inference-only ops (no autograd) for decoder-only transformers; the semantics are those of
 * llama.cpp's ggml_rope_ext and of its (non flash-attention) KQ -> soft_max_ext -> KQV path, so
 * GGUF models give llama.cpp's numbers. */

/* How the rotated dims of a head are paired. */
typedef enum pt_rope_mode {
    PT_ROPE_NORM = 0, /* adjacent pairs (x[2i], x[2i+1]): llama, mistral (GGUF permutes q/k) */
    PT_ROPE_NEOX =
        1, /* half-split pairs (x[i], x[i + n_rot/2]): HF rotate_half; qwen, gemma, phi3 */
} pt_rope_mode;

/* Options of pt_rope; the zero value is plain RoPE with base 10000 over the whole head. */
typedef struct pt_rope_opts {
    pt_rope_mode mode;
    int64_t n_rot;     /* leading dims of each head that are rotated (even, <= D); 0: D */
    double freq_base;  /* theta_i = pos * base^(-2i/n_rot); 0: 10000 */
    double freq_scale; /* linear position scaling (1/factor); 0: 1 */
    const pt_tensor *freq_factors; /* NULL, or float32 [n_rot/2]: theta_i is divided by
                                    * factor i (llama 3.1's rope_freqs, phi3's long/short) */
    double ext_factor;             /* YaRN extrapolation mix; 0: off */
    double attn_factor;            /* YaRN magnitude scale; 0: 1 */
    double beta_fast;              /* YaRN ramp; 0: 32 */
    double beta_slow;              /* YaRN ramp; 0: 1 */
    int64_t n_ctx_orig;            /* YaRN: the original training context; 0: 4096 */
} pt_rope_opts;

/* Rotary position embedding of x [T, H, D] (float32; any strides) at positions pos [T]
 * (int32 or int64): a new contiguous float32 [T, H, D]. Pair i of a head at position p is
 * rotated by angle p * freq_scale * freq_base^(-2i/n_rot) / factor_i (YaRN-corrected when
 * ext_factor != 0, as ggml's rope_yarn); dims >= n_rot are copied. opts NULL: defaults.
 * Errors: shapes, dtypes, odd or too large n_rot, a freq_factors of the wrong size. */
PT_API pt_tensor *pt_rope(const pt_tensor *x, const pt_tensor *pos, const pt_rope_opts *opts);

/* Options of pt_attention_kv; the zero value is causal attention with scale 1/sqrt(D). */
typedef struct pt_attention_kv_opts {
    double scale;   /* scores = q.k * scale; 0: 1/sqrt(D) */
    int64_t q_pos0; /* position of q's row 0; row t is at q_pos0 + t */
    int64_t window; /* > 0: a key at position j is visible from position p only when
                     * p - j < window (sliding-window attention); 0: no window */
} pt_attention_kv_opts;

/* Causal multi-head attention of new queries against a key/value cache:
 * q [T, Hq, D] float32; k [S, Hkv, D] and v [S, Hkv, Dv], float32 or float16 (both the same
 * dtype; the row stride may be anything, the last dim contiguous), holding positions 0..S-1.
 * The query at position p = q_pos0 + t attends to keys j <= p (and p - j < window), so
 * S >= q_pos0 + T is required (later rows of k/v are ignored). Grouped-query attention:
 * Hq % Hkv == 0 and query head h reads kv head h / (Hq / Hkv). Returns a new float32
 * [T, Hq, Dv]. With float16 k/v the query and the softmax weights are rounded to float16
 * before being multiplied with them (as ggml's CPU matmul converts its float32 operand to
 * the other's type), so results match llama.cpp's. */
PT_API pt_tensor *pt_attention_kv(const pt_tensor *q, const pt_tensor *k, const pt_tensor *v,
                                  const pt_attention_kv_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
