/* PromeTorch nn: attention and transformer modules -- nn.MultiheadAttention,
 * nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.TransformerEncoder,
 * nn.TransformerDecoder, nn.Transformer, and the sinusoidal PositionalEncoding of "Attention is
 * all you need" (the module of PyTorch's transformer tutorial).
 *
 * Parameter names, shapes, registration order (so named_parameters and state-dict keys) and
 * default initializations are PyTorch's: a state dict saved from the same PyTorch module loads
 * into these. All of them run through pt_nn_forward_n (several inputs; optional ones NULL);
 * the single-input pt_nn_forward works too (self-attention, no masks). Layouts are
 * sequence-first [L, N, E] unless batch_first ([N, L, E]); unbatched [L, E] inputs are
 * accepted by MultiheadAttention and the layers, as in PyTorch.
 *
 * Masks, as PyTorch's modules take them (note: the OPPOSITE of a bool mask for
 * pt_scaled_dot_product_attention): a bool attn_mask / key_padding_mask marks with true the
 * positions NOT allowed to attend; a floating mask is added to the attention scores. A row
 * with every position masked gives NaN, as in PyTorch.
 *
 * Ownership: constructors return a new module (pt_nn_free) or NULL with the error set;
 * forward outputs are new references. */
#ifndef PROMETORCH_NN_TRANSFORMER_H
#define PROMETORCH_NN_TRANSFORMER_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- MultiheadAttention ---------------------------------------------------------------------- */

/* Options of pt_nn_multihead_attention; the zero value is PyTorch's default. */
typedef struct pt_multihead_attention_opts {
    double dropout;     /* dropout on the attention weights in training (PyTorch: 0.0) */
    bool no_bias;       /* bias=False: no in_proj_bias and no out_proj.bias */
    int64_t kdim;       /* key feature size; 0 = embed_dim */
    int64_t vdim;       /* value feature size; 0 = embed_dim */
    bool batch_first;   /* inputs and output are [N, L, E] instead of [L, N, E] */
    bool add_bias_kv;   /* learned bias_k, bias_v [1, 1, E] appended to the keys/values */
    bool add_zero_attn; /* a zero key/value appended (after bias_k/bias_v) */
} pt_multihead_attention_opts;

/* nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, kdim=, vdim=, batch_first=).
 * Parameters, in PyTorch's order: in_proj_weight [3E, E] (or q_proj_weight [E, E],
 * k_proj_weight [E, kdim], v_proj_weight [E, vdim] when kdim or vdim differs from E),
 * in_proj_bias [3E], bias_k and bias_v [1, 1, E] (add_bias_kv), then the child out_proj (a
 * Linear E -> E: out_proj.weight, out_proj.bias). Init as PyTorch: xavier_uniform_ on the
 * projection weights, xavier_normal_ on bias_k/bias_v, zero biases, out_proj.weight Linear's
 * default U(-1/sqrt(E), 1/sqrt(E)).
 * forward_n: in = {query [L, N, E], key [S, N, kdim], value [S, N, vdim], key_padding_mask
 * [N, S] (nullable, bool or float), attn_mask [L, S] or [N*num_heads, L, S] (nullable, bool or
 * float)}, n_in 1..5 (a NULL or missing key is query, a NULL or missing value is key);
 * out = {attn_output [L, N, E], attn_weights [N, L, S'] averaged over the heads} where S' is S
 * plus one for each of add_bias_kv and add_zero_attn (the masks are padded with "attend"
 * there, as PyTorch pads them). With n_out == 1 the weights are not returned
 * (need_weights=False). In training mode dropout acts on the attention weights, as PyTorch's
 * (the returned weights are the dropped ones, as PyTorch's). Not supported:
 * average_attn_weights=False, static_k/static_v, is_causal.
 * Errors: PT_ERR_INVALID_ARG (num_heads not dividing embed_dim, sizes <= 0, dropout outside
 * [0, 1]), and at forward PT_ERR_SHAPE naming the mismatching input, PT_ERR_DTYPE for an
 * integer mask, PT_ERR_NULL for a NULL query. */
PT_API pt_module *pt_nn_multihead_attention(int64_t embed_dim, int64_t num_heads,
                                            const pt_multihead_attention_opts *opts);

/* ---- transformer layers ---------------------------------------------------------------------- */

/* The feed-forward activation of the transformer layers. */
typedef enum pt_transformer_activation {
    PT_TRANSFORMER_RELU = 0, /* activation="relu" (PyTorch's default) */
    PT_TRANSFORMER_GELU,     /* activation="gelu" (the exact erf form) */
} pt_transformer_activation;

/* Options of the encoder/decoder layers. PyTorch's defaults are not all zero: start from
 * PT_TRANSFORMER_LAYER_DEFAULTS (or pass NULL for the defaults). */
typedef struct pt_transformer_layer_opts {
    int64_t dim_feedforward;              /* 2048 */
    double dropout;                       /* 0.1: attention weights and every residual branch */
    pt_transformer_activation activation; /* relu */
    double layer_norm_eps;                /* 1e-5 */
    bool batch_first;                     /* false: [L, N, E] */
    bool norm_first;                      /* false: post-norm (norm(x + sublayer(x))) */
    bool bias;                            /* true: biases in the Linears, the LayerNorms and
                                             the attentions (bias=False is PyTorch >= 2.1) */
} pt_transformer_layer_opts;
#define PT_TRANSFORMER_LAYER_DEFAULTS                                                              \
    ((pt_transformer_layer_opts){.dim_feedforward = 2048,                                          \
                                 .dropout = 0.1,                                                   \
                                 .activation = PT_TRANSFORMER_RELU,                                \
                                 .layer_norm_eps = 1e-5,                                           \
                                 .bias = true})

/* nn.TransformerEncoderLayer(d_model, nhead, ...). Children, in PyTorch's order: self_attn
 * (MultiheadAttention), linear1 (d_model -> dim_feedforward), dropout, linear2, norm1, norm2
 * (LayerNorm(d_model)), dropout1, dropout2.
 * forward: post-norm x = norm1(x + sa(x)); x = norm2(x + ff(x)); norm_first:
 * x = x + sa(norm1(x)); x = x + ff(norm2(x)); sa = dropout1(self_attn(x, x, x)),
 * ff = dropout2(linear2(dropout(act(linear1(x))))).
 * forward_n: in = {src, src_mask (nullable), src_key_padding_mask (nullable)} (masks as
 * MultiheadAttention's attn_mask / key_padding_mask), out = {output} (src's shape).
 * Errors: PT_ERR_INVALID_ARG for bad sizes or options; forward errors as MultiheadAttention. */
PT_API pt_module *pt_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead,
                                                  const pt_transformer_layer_opts *opts);

/* nn.TransformerDecoderLayer(d_model, nhead, ...). Children, in PyTorch's order: self_attn,
 * multihead_attn, linear1, dropout, linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3.
 * forward: post-norm x = norm1(x + sa(x)); x = norm2(x + mha(x, memory)); x = norm3(x + ff(x));
 * norm_first puts each norm on the sublayer's input instead (x = x + sa(norm1(x)), ...).
 * forward_n: in = {tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
 * memory_key_padding_mask} (n_in 2..6, the masks nullable), out = {output} (tgt's shape). */
PT_API pt_module *pt_nn_transformer_decoder_layer(int64_t d_model, int64_t nhead,
                                                  const pt_transformer_layer_opts *opts);

/* nn.TransformerEncoder(encoder_layer, num_layers, norm): children layers (a ModuleList of
 * num_layers layers: "layers.0.self_attn.in_proj_weight", ...) and norm (when given).
 * As PyTorch deep-copies encoder_layer num_layers times, every layer starts with
 * encoder_layer's configuration and parameter values. Takes ownership of encoder_layer (it
 * becomes layers.0, the others are copies of it) and of norm (nullable; any module, usually a
 * LayerNorm), also on failure. forward_n: in = {src, mask, src_key_padding_mask} (masks
 * nullable), out = {output}: each layer in turn, then norm. Errors: PT_ERR_INVALID_ARG when
 * encoder_layer is not a pt_nn_transformer_encoder_layer or num_layers < 1. */
PT_API pt_module *pt_nn_transformer_encoder(pt_module *encoder_layer, int num_layers,
                                            pt_module *norm);

/* nn.TransformerDecoder(decoder_layer, num_layers, norm): as pt_nn_transformer_encoder, with
 * decoder layers. forward_n: in = {tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
 * memory_key_padding_mask}, out = {output}. */
PT_API pt_module *pt_nn_transformer_decoder(pt_module *decoder_layer, int num_layers,
                                            pt_module *norm);

/* nn.Transformer(d_model, nhead, num_encoder_layers, num_decoder_layers, ...): children encoder
 * (a TransformerEncoder of num_encoder_layers layers with a final LayerNorm(d_model,
 * layer_norm_eps)) and decoder (likewise), so keys are "encoder.layers.0.linear1.weight",
 * "decoder.norm.bias"... Every parameter with more than one dim is re-drawn with
 * xavier_uniform_ (PyTorch's _reset_parameters); the others keep their layer defaults.
 * PyTorch's defaults are d_model 512, nhead 8, 6 and 6 layers, PT_TRANSFORMER_LAYER_DEFAULTS.
 * forward_n: in = {src, tgt, src_mask, tgt_mask, memory_mask, src_key_padding_mask,
 * tgt_key_padding_mask, memory_key_padding_mask} (n_in 2..8, masks nullable), out = {output}
 * (tgt's shape): decoder(tgt, encoder(src, src_mask, src_key_padding_mask), tgt_mask,
 * memory_mask, tgt_key_padding_mask, memory_key_padding_mask).
 * Errors: those of the layers; PT_ERR_SHAPE when src and tgt differ in batch size or
 * feature size. */
PT_API pt_module *pt_nn_transformer(int64_t d_model, int64_t nhead, int num_encoder_layers,
                                    int num_decoder_layers, const pt_transformer_layer_opts *opts);

/* nn.Transformer.generate_square_subsequent_mask(sz): a float32 [sz, sz] causal mask, 0 on
 * and below the diagonal and -inf above it. Returns a new reference; PT_ERR_INVALID_ARG when
 * sz < 0. */
PT_API pt_tensor *pt_nn_transformer_square_subsequent_mask(int64_t sz);

/* ---- PositionalEncoding ---------------------------------------------------------------------- */

/* Options of pt_nn_positional_encoding (the tutorial's defaults are not all zero: start from
 * PT_POSITIONAL_ENCODING_DEFAULTS, or pass NULL). */
typedef struct pt_positional_encoding_opts {
    int64_t max_len;  /* 5000: the longest sequence accepted */
    double dropout;   /* 0.1, applied after the addition in training mode */
    bool batch_first; /* false: pe is [max_len, 1, d_model] and x [L, N, d_model];
                         true: pe is [1, max_len, d_model] and x [N, L, d_model] */
    bool persistent;  /* true (the tutorial's register_buffer): pe is in the state dict;
                         false: a non-persistent buffer (recomputed, not saved) */
} pt_positional_encoding_opts;
#define PT_POSITIONAL_ENCODING_DEFAULTS                                                            \
    ((pt_positional_encoding_opts){.max_len = 5000, .dropout = 0.1, .persistent = true})

/* PositionalEncoding(d_model, dropout, max_len) of PyTorch's "Language modeling with
 * nn.Transformer" tutorial: buffer pe (float32) with
 * pe[pos, 2i] = sin(pos * exp(2i * -ln(10000) / d_model)), pe[pos, 2i+1] = cos(same), computed
 * in float32 as the tutorial does; odd d_model is allowed (the last cos column is dropped).
 * forward(x): dropout(x + pe[:L]) where L is x's sequence dim (0, or 1 when batch_first).
 * Errors: PT_ERR_INVALID_ARG (d_model or max_len <= 0, dropout outside [0, 1]); at forward
 * PT_ERR_SHAPE when x is not 3-D, its last dim is not d_model or L > max_len. */
PT_API pt_module *pt_nn_positional_encoding(int64_t d_model,
                                            const pt_positional_encoding_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
