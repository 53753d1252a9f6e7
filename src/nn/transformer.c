/* Transformer modules built on MultiheadAttention, Linear, LayerNorm and Dropout children:
 * nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, the nn.TransformerEncoder /
 * nn.TransformerDecoder stacks, and the tutorial's sinusoidal PositionalEncoding.
 *
 * The layers hold their configuration in a layer_ctx and their sublayers as children in
 * PyTorch's registration order, so state-dict keys are PyTorch's ("self_attn.in_proj_weight",
 * "linear1.weight", "norm2.bias"); forward fetches the children by index. The stacks copy one
 * layer num_layers times (configuration and parameter values), as PyTorch's deepcopy does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prometorch/prometorch.h"
#include "prometorch/nn_transformer.h"
#include "../core/internal.h"
#include "module_internal.h"
#include "prometorch/nn_layers.h"

/* ---- layer configuration --------------------------------------------------------------------- */

typedef struct {
    int64_t d_model, nhead;
    pt_transformer_layer_opts o;
    bool decoder;
} layer_ctx;

/* Child indices, in registration (PyTorch) order. */
enum {
    ENC_SELF_ATTN,
    ENC_LINEAR1,
    ENC_DROPOUT,
    ENC_LINEAR2,
    ENC_NORM1,
    ENC_NORM2,
    ENC_DROPOUT1,
    ENC_DROPOUT2
};
enum {
    DEC_SELF_ATTN,
    DEC_MHA,
    DEC_LINEAR1,
    DEC_DROPOUT,
    DEC_LINEAR2,
    DEC_NORM1,
    DEC_NORM2,
    DEC_NORM3,
    DEC_DROPOUT1,
    DEC_DROPOUT2,
    DEC_DROPOUT3
};

static pt_status enc_layer_forward_n(pt_module *self, int n_in, const pt_tensor *const *in,
                                     int n_out, pt_tensor **out);
static pt_status dec_layer_forward_n(pt_module *self, int n_in, const pt_tensor *const *in,
                                     int n_out, pt_tensor **out);

static const pt_module_def enc_layer_def = {
    .type_name = "TransformerEncoderLayer",
    .forward_n = enc_layer_forward_n,
    .free_ctx = free,
};
static const pt_module_def dec_layer_def = {
    .type_name = "TransformerDecoderLayer",
    .forward_n = dec_layer_forward_n,
    .free_ctx = free,
};

static pt_status check_layer_opts(const char *op, int64_t d_model, int64_t nhead,
                                  const pt_transformer_layer_opts *o)
{
    if (d_model <= 0 || nhead <= 0 || d_model % nhead != 0)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: d_model %lld must be a positive multiple of "
                         "nhead %lld",
                         op, (long long)d_model, (long long)nhead);
    if (o->dim_feedforward <= 0)
        return pti_error(PT_ERR_INVALID_ARG, "%s: dim_feedforward %lld must be positive", op,
                         (long long)o->dim_feedforward);
    if (!(o->dropout >= 0.0 && o->dropout <= 1.0))
        return pti_error(PT_ERR_INVALID_ARG, "%s: dropout %g is not in [0, 1]", op, o->dropout);
    if (!(o->layer_norm_eps > 0.0))
        return pti_error(PT_ERR_INVALID_ARG, "%s: layer_norm_eps %g must be positive", op,
                         o->layer_norm_eps);
    if (o->activation != PT_TRANSFORMER_RELU && o->activation != PT_TRANSFORMER_GELU)
        return pti_error(PT_ERR_INVALID_ARG, "%s: unknown activation %d", op, (int)o->activation);
    return PT_OK;
}

static pt_module *make_attention(const layer_ctx *c)
{
    pt_multihead_attention_opts ao = {
        .dropout = c->o.dropout, .no_bias = !c->o.bias, .batch_first = c->o.batch_first};
    return pt_nn_multihead_attention(c->d_model, c->nhead, &ao);
}

static pt_module *make_norm(const layer_ctx *c)
{
    pt_nn_layer_norm_opts lo = {.eps = c->o.layer_norm_eps, .no_bias = !c->o.bias};
    return pt_nn_layer_norm_ex(1, &c->d_model, &lo);
}

/* Adds the children in PyTorch's order; stops at the first failure. */
static pt_status add_layer_children(pt_module *m, const layer_ctx *c)
{
    int64_t d = c->d_model, ff = c->o.dim_feedforward;
    double p = c->o.dropout;
    pt_status st = pt_nn_add(m, "self_attn", make_attention(c));
    if (st == PT_OK && c->decoder)
        st = pt_nn_add(m, "multihead_attn", make_attention(c));
    if (st == PT_OK)
        st = pt_nn_add(m, "linear1", pt_nn_linear(d, ff, c->o.bias));
    if (st == PT_OK)
        st = pt_nn_add(m, "dropout", pt_nn_dropout(p));
    if (st == PT_OK)
        st = pt_nn_add(m, "linear2", pt_nn_linear(ff, d, c->o.bias));
    const char *norms[] = {"norm1", "norm2", "norm3"},
               *drops[] = {"dropout1", "dropout2", "dropout3"};
    int n = c->decoder ? 3 : 2;
    for (int i = 0; i < n && st == PT_OK; i++)
        st = pt_nn_add(m, norms[i], make_norm(c));
    for (int i = 0; i < n && st == PT_OK; i++)
        st = pt_nn_add(m, drops[i], pt_nn_dropout(p));
    return st;
}

static pt_module *make_layer(const char *op, int64_t d_model, int64_t nhead,
                             const pt_transformer_layer_opts *opts, bool decoder)
{
    pt_transformer_layer_opts o = opts ? *opts : PT_TRANSFORMER_LAYER_DEFAULTS;
    if (check_layer_opts(op, d_model, nhead, &o) != PT_OK)
        return NULL;
    layer_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    *c = (layer_ctx){.d_model = d_model, .nhead = nhead, .o = o, .decoder = decoder};
    pt_module *m = pt_nn_module_new(decoder ? &dec_layer_def : &enc_layer_def, c);
    if (m && add_layer_children(m, c) != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

pt_module *pt_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead,
                                           const pt_transformer_layer_opts *opts)
{
    return make_layer("pt_nn_transformer_encoder_layer", d_model, nhead, opts, false);
}

pt_module *pt_nn_transformer_decoder_layer(int64_t d_model, int64_t nhead,
                                           const pt_transformer_layer_opts *opts)
{
    return make_layer("pt_nn_transformer_decoder_layer", d_model, nhead, opts, true);
}

/* ---- layer forward --------------------------------------------------------------------------- */

/* Every helper below works inside the forward's scope: temporaries are left to it. */

static pt_tensor *child(pt_module *self, int i, const pt_tensor *x)
{
    return x ? pt_nn_forward(pt_nn_child_at(self, i, NULL), x) : NULL;
}

/* dropout_i(attn(x, kv, kv, key_padding_mask, attn_mask)[0]) */
static pt_tensor *attn_block(pt_module *self, int attn, int drop, const pt_tensor *x,
                             const pt_tensor *kv, const pt_tensor *mask, const pt_tensor *kpm)
{
    if (!x)
        return NULL;
    const pt_tensor *in[5] = {x, kv, kv, kpm, mask};
    pt_tensor *y = NULL;
    if (pt_nn_forward_n(pt_nn_child_at(self, attn, NULL), 5, in, 1, &y) != PT_OK)
        return NULL;
    return child(self, drop, y);
}

/* dropout_i(linear2(dropout(act(linear1(x))))) */
static pt_tensor *ff_block(pt_module *self, int lin1, int drop, int lin2, int drop_out,
                           const pt_tensor *x)
{
    const layer_ctx *c = pt_nn_ctx(self);
    pt_tensor *h = child(self, lin1, x);
    if (h)
        h = c->o.activation == PT_TRANSFORMER_GELU ? pt_gelu(h) : pt_relu(h);
    return child(self, drop_out, child(self, lin2, child(self, drop, h)));
}

/* One residual step: norm_first: x + f(norm(x)); else norm(x + f(x)). `which` selects the
 * sublayer f (0 self-attention, 1 cross-attention, 2 feed-forward). */
typedef struct {
    const pt_tensor *memory, *mask, *kpm;
} block_args;

static pt_tensor *sublayer(pt_module *self, int which, const pt_tensor *x, const block_args *a)
{
    const layer_ctx *c = pt_nn_ctx(self);
    bool dec = c->decoder;
    switch (which) {
    case 0:
        return attn_block(self, ENC_SELF_ATTN, dec ? DEC_DROPOUT1 : ENC_DROPOUT1, x, x, a->mask,
                          a->kpm);
    case 1: return attn_block(self, DEC_MHA, DEC_DROPOUT2, x, a->memory, a->mask, a->kpm);
    default:
        return dec ? ff_block(self, DEC_LINEAR1, DEC_DROPOUT, DEC_LINEAR2, DEC_DROPOUT3, x)
                   : ff_block(self, ENC_LINEAR1, ENC_DROPOUT, ENC_LINEAR2, ENC_DROPOUT2, x);
    }
}

static pt_tensor *residual(pt_module *self, int which, int norm, const pt_tensor *x,
                           const block_args *a)
{
    const layer_ctx *c = pt_nn_ctx(self);
    if (!x)
        return NULL;
    if (c->o.norm_first)
        return pt_add(x, sublayer(self, which, child(self, norm, x), a));
    return child(self, norm, pt_add(x, sublayer(self, which, x, a)));
}

/* Checks the source/target input of a layer: [L, N, E] / [N, L, E] or unbatched [L, E]. */
static pt_status check_layer_input(const pt_module *self, const pt_tensor *x, const char *what)
{
    const layer_ctx *c = pt_nn_ctx(self);
    if (!PTI_CHECK_ARG(x, pt_nn_type_name(self), what))
        return pt_last_status();
    int nd = pt_ndim(x);
    if ((nd != 2 && nd != 3) || pt_shape(x)[nd - 1] != c->d_model)
        return pti_error(PT_ERR_SHAPE,
                         "%s: %s must be %s with E = d_model = %lld (or [L, E] "
                         "unbatched), got %d-D with last dim %lld",
                         pt_nn_type_name(self), what, c->o.batch_first ? "[N, L, E]" : "[L, N, E]",
                         (long long)c->d_model, nd, nd > 0 ? (long long)pt_shape(x)[nd - 1] : 0LL);
    return PT_OK;
}

/* Ends the scope opened by a forward, keeping y (NULL on failure) as out[0]. */
static pt_status finish(pt_tensor *y, pt_tensor **out)
{
    pt_status st = y ? PT_OK : pt_last_status();
    if (y)
        out[0] = pt_keep(y);
    pt_scope_end();
    if (st == PT_OK && !out[0])
        st = PT_ERR_RUNTIME;
    return st;
}

static pt_status check_counts(const pt_module *self, int n_in, int min_in, int max_in, int n_out)
{
    if (n_in < min_in || n_in > max_in || n_out != 1)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: takes %d to %d inputs and gives 1 output (got "
                         "%d and %d)",
                         pt_nn_type_name(self), min_in, max_in, n_in, n_out);
    return PT_OK;
}

/* in = {src, src_mask, src_key_padding_mask} */
static pt_status enc_layer_forward_n(pt_module *self, int n_in, const pt_tensor *const *in,
                                     int n_out, pt_tensor **out)
{
    pt_status st = check_counts(self, n_in, 1, 3, n_out);
    if (st == PT_OK)
        st = check_layer_input(self, in[0], "src");
    if (st != PT_OK)
        return st;
    block_args a = {.mask = n_in > 1 ? in[1] : NULL, .kpm = n_in > 2 ? in[2] : NULL};
    pt_scope_begin();
    pt_tensor *x = residual(self, 0, ENC_NORM1, in[0], &a);
    x = residual(self, 2, ENC_NORM2, x, &a);
    return finish(x, out);
}

/* in = {tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask} */
static pt_status dec_layer_forward_n(pt_module *self, int n_in, const pt_tensor *const *in,
                                     int n_out, pt_tensor **out)
{
    pt_status st = check_counts(self, n_in, 2, 6, n_out);
    if (st == PT_OK)
        st = check_layer_input(self, in[0], "tgt");
    if (st == PT_OK)
        st = check_layer_input(self, in[1], "memory");
    if (st != PT_OK)
        return st;
    const pt_tensor *opt[4] = {NULL, NULL, NULL, NULL};
    for (int i = 2; i < n_in; i++)
        opt[i - 2] = in[i];
    block_args self_args = {.mask = opt[0], .kpm = opt[2]};
    block_args cross_args = {.memory = in[1], .mask = opt[1], .kpm = opt[3]};
    pt_scope_begin();
    pt_tensor *x = residual(self, 0, DEC_NORM1, in[0], &self_args);
    x = residual(self, 1, DEC_NORM2, x, &cross_args);
    x = residual(self, 2, DEC_NORM3, x, &self_args);
    return finish(x, out);
}

/* ---- TransformerEncoder / TransformerDecoder ------------------------------------------------- */

typedef struct {
    bool decoder, has_norm;
} stack_ctx;

static pt_status stack_forward_n(pt_module *self, int n_in, const pt_tensor *const *in, int n_out,
                                 pt_tensor **out);

static const pt_module_def enc_stack_def = {
    .type_name = "TransformerEncoder", .forward_n = stack_forward_n, .free_ctx = free};
static const pt_module_def dec_stack_def = {
    .type_name = "TransformerDecoder", .forward_n = stack_forward_n, .free_ctx = free};

/* Copies every parameter value of src into dst (same configuration, so the same listing). */
static pt_status copy_params(pt_module *dst, pt_module *src)
{
    pt_tensor **pd = NULL, **ps = NULL;
    int nd = pt_nn_parameters(dst, &pd), ns = pt_nn_parameters(src, &ps);
    pt_status st = nd < 0 || ns < 0 ? pt_last_status() : PT_OK;
    if (st == PT_OK && nd != ns)
        st = pti_error(PT_ERR_RUNTIME, "transformer stack: layer copies differ in parameters");
    bool prev = pt_set_grad_enabled(false);
    for (int i = 0; i < nd && st == PT_OK; i++)
        st = pt_copy_(pd[i], ps[i]);
    pt_set_grad_enabled(prev);
    free(pd);
    free(ps);
    return st;
}

/* A new layer with layer's configuration and parameter values (copy.deepcopy). */
static pt_module *clone_layer(pt_module *layer)
{
    const layer_ctx *c = pt_nn_ctx(layer);
    pt_module *m = make_layer("transformer stack", c->d_model, c->nhead, &c->o, c->decoder);
    if (m && copy_params(m, layer) != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    if (m)
        pt_nn_train(m, pt_nn_is_training(layer));
    return m;
}

static pt_module *make_stack(const char *op, pt_module *layer, int num_layers, pt_module *norm,
                             bool decoder)
{
    const pt_module_def *want = decoder ? &dec_layer_def : &enc_layer_def;
    if (!layer) {
        pti_null_arg(op, decoder ? "decoder_layer" : "encoder_layer");
        pt_nn_free(norm);
        return NULL;
    }
    if (layer->def.forward_n != want->forward_n || num_layers < 1) {
        pti_error(PT_ERR_INVALID_ARG,
                  "%s: needs a %s made by pt_nn_%s and num_layers >= 1 "
                  "(got %s, %d)",
                  op, want->type_name,
                  decoder ? "transformer_decoder_layer" : "transformer_encoder_layer",
                  pt_nn_type_name(layer), num_layers);
        pt_nn_free(layer);
        pt_nn_free(norm);
        return NULL;
    }
    pt_module **layers = pti_calloc((size_t)num_layers, sizeof(*layers));
    stack_ctx *c = pti_calloc(1, sizeof(*c));
    pt_module *m =
        c && layers ? pt_nn_module_new(decoder ? &dec_stack_def : &enc_stack_def, c) : NULL;
    if (!m) {
        if (!c || !layers)
            pti_error(PT_ERR_OOM, "%s: out of memory", op);
        if (c && !layers)
            free(c);
        free(layers);
        pt_nn_free(layer);
        pt_nn_free(norm);
        return NULL;
    }
    *c = (stack_ctx){.decoder = decoder, .has_norm = norm != NULL};
    for (int i = 1; i < num_layers; i++)
        layers[i] = clone_layer(layer);
    layers[0] = layer;
    pt_status st = pt_nn_add(m, "layers", pt_nn_module_list(num_layers, layers));
    free(layers);
    if (norm && st == PT_OK)
        st = pt_nn_add(m, "norm", norm);
    else if (norm)
        pt_nn_free(norm);
    if (st != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

pt_module *pt_nn_transformer_encoder(pt_module *encoder_layer, int num_layers, pt_module *norm)
{
    return make_stack("pt_nn_transformer_encoder", encoder_layer, num_layers, norm, false);
}

pt_module *pt_nn_transformer_decoder(pt_module *decoder_layer, int num_layers, pt_module *norm)
{
    return make_stack("pt_nn_transformer_decoder", decoder_layer, num_layers, norm, true);
}

/* Encoder in = {src, mask, src_key_padding_mask}; decoder in = {tgt, memory, tgt_mask,
 * memory_mask, tgt_key_padding_mask, memory_key_padding_mask}. Each layer gets the same
 * masks (and memory); the running input replaces in[0]. */
static pt_status stack_forward_n(pt_module *self, int n_in, const pt_tensor *const *in, int n_out,
                                 pt_tensor **out)
{
    const stack_ctx *c = pt_nn_ctx(self);
    pt_status st = check_counts(self, n_in, c->decoder ? 2 : 1, c->decoder ? 6 : 3, n_out);
    if (st != PT_OK)
        return st;
    const pt_tensor *args[6];
    memcpy(args, in, (size_t)n_in * sizeof(*args));
    pt_module *layers = pt_nn_child_at(self, 0, NULL);
    pt_scope_begin();
    pt_tensor *x = NULL;
    for (int i = 0; i < pt_nn_num_children(layers) && st == PT_OK; i++) {
        pt_tensor *y = NULL;
        st = pt_nn_forward_n(pt_nn_child_at(layers, i, NULL), n_in, args, 1, &y);
        x = y;
        args[0] = x;
    }
    if (st == PT_OK && c->has_norm)
        x = pt_nn_forward(pt_nn_child_at(self, 1, NULL), x);
    return finish(st == PT_OK ? x : NULL, out);
}

/* ---- Transformer ----------------------------------------------------------------------------- */

static pt_status transformer_forward_n(pt_module *self, int n_in, const pt_tensor *const *in,
                                       int n_out, pt_tensor **out);

static const pt_module_def transformer_def = {
    .type_name = "Transformer", .forward_n = transformer_forward_n, .free_ctx = free};

/* xavier_uniform_ on every parameter with more than one dim (Transformer._reset_parameters). */
static pt_status xavier_all(pt_module *m)
{
    pt_tensor **ps = NULL;
    int n = pt_nn_parameters(m, &ps);
    pt_status st = n < 0 ? pt_last_status() : PT_OK;
    for (int i = 0; i < n && st == PT_OK; i++)
        if (pt_ndim(ps[i]) > 1)
            st = pt_nn_init_xavier_uniform_(ps[i], 1.0);
    free(ps);
    return st;
}

pt_module *pt_nn_transformer(int64_t d_model, int64_t nhead, int num_encoder_layers,
                             int num_decoder_layers, const pt_transformer_layer_opts *opts)
{
    static const char op[] = "pt_nn_transformer";
    pt_transformer_layer_opts o = opts ? *opts : PT_TRANSFORMER_LAYER_DEFAULTS;
    if (check_layer_opts(op, d_model, nhead, &o) != PT_OK)
        return NULL;
    layer_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    *c = (layer_ctx){.d_model = d_model, .nhead = nhead, .o = o};
    pt_module *m = pt_nn_module_new(&transformer_def, c);
    if (!m)
        return NULL;
    pt_module *norm = make_norm(c);
    pt_status st = !norm ? pt_last_status()
                         : pt_nn_add(m, "encoder",
                                     make_stack(op, make_layer(op, d_model, nhead, &o, false),
                                                num_encoder_layers, norm, false));
    norm = st == PT_OK ? make_norm(c) : NULL;
    if (st == PT_OK)
        st = !norm ? pt_last_status()
                   : pt_nn_add(m, "decoder",
                               make_stack(op, make_layer(op, d_model, nhead, &o, true),
                                          num_decoder_layers, norm, true));
    if (st == PT_OK)
        st = xavier_all(m);
    if (st != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

/* in = {src, tgt, src_mask, tgt_mask, memory_mask, src_kpm, tgt_kpm, memory_kpm} */
static pt_status transformer_forward_n(pt_module *self, int n_in, const pt_tensor *const *in,
                                       int n_out, pt_tensor **out)
{
    pt_status st = check_counts(self, n_in, 2, 8, n_out);
    if (st != PT_OK)
        return st;
    const pt_tensor *a[8] = {NULL};
    memcpy(a, in, (size_t)n_in * sizeof(*a));
    if (!PTI_CHECK_ARG(a[0], "Transformer", "src") || !PTI_CHECK_ARG(a[1], "Transformer", "tgt"))
        return pt_last_status();
    const layer_ctx *c = pt_nn_ctx(self);
    int ns = pt_ndim(a[0]), nt = pt_ndim(a[1]), bdim = c->o.batch_first ? 0 : 1;
    if (ns != nt || (ns == 3 && pt_shape(a[0])[bdim] != pt_shape(a[1])[bdim]))
        return pti_error(PT_ERR_SHAPE,
                         "Transformer: the batch number of src and tgt must be "
                         "equal (src %d-D, tgt %d-D)",
                         ns, nt);
    if (ns < 1 || pt_shape(a[0])[ns - 1] != c->d_model || pt_shape(a[1])[nt - 1] != c->d_model)
        return pti_error(PT_ERR_SHAPE,
                         "Transformer: the feature number of src and tgt must be "
                         "equal to d_model %lld",
                         (long long)c->d_model);
    pt_tensor *memory = NULL;
    st = pt_nn_forward_n(pt_nn_child_at(self, 0, NULL), 3, (const pt_tensor *[]){a[0], a[2], a[5]},
                         1, &memory);
    if (st != PT_OK)
        return st;
    st = pt_nn_forward_n(pt_nn_child_at(self, 1, NULL), 6,
                         (const pt_tensor *[]){a[1], memory, a[3], a[4], a[6], a[7]}, 1, out);
    pt_release(memory);
    return st;
}

pt_tensor *pt_nn_transformer_square_subsequent_mask(int64_t sz)
{
    if (sz < 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_transformer_square_subsequent_mask: sz %lld < 0",
                              (long long)sz);
    pt_tensor *full = pt_full(PT_SHAPE(sz, sz), -INFINITY, PT_FLOAT32, pt_cpu());
    pt_tensor *m = pt_triu(full, 1);
    pt_release(full);
    return m;
}

/* ---- PositionalEncoding ---------------------------------------------------------------------- */

typedef struct {
    int64_t d_model, max_len;
    double dropout;
    bool batch_first;
} pe_ctx;

static pt_tensor *pe_forward(pt_module *self, const pt_tensor *x);

static void pe_extra_repr(const pt_module *self, char *buf, size_t cap)
{
    const pe_ctx *c = pt_nn_ctx(self);
    snprintf(buf, cap, "d_model=%lld, max_len=%lld, p=%g", (long long)c->d_model,
             (long long)c->max_len, c->dropout);
}

static const pt_module_def pe_def = {
    .type_name = "PositionalEncoding",
    .forward = pe_forward,
    .free_ctx = free,
    .extra_repr = pe_extra_repr,
};

/* pe [max_len, d] computed in float32 as the tutorial's torch code does:
 * div = exp(2i * (-ln(10000) / d)), pe[pos, 2i] = sin(pos * div), pe[pos, 2i+1] = cos(...). */
static pt_tensor *pe_table(int64_t max_len, int64_t d)
{
    float *buf = pti_malloc((size_t)max_len * (size_t)d * sizeof(float));
    if (!buf)
        return pti_error_null(PT_ERR_OOM, "pt_nn_positional_encoding: out of memory");
    float scale = (float)(-log(10000.0) / (double)d);
    for (int64_t j = 0; j < d; j += 2) {
        float div = expf((float)j * scale);
        for (int64_t pos = 0; pos < max_len; pos++) {
            float arg = (float)pos * div;
            buf[pos * d + j] = sinf(arg);
            if (j + 1 < d)
                buf[pos * d + j + 1] = cosf(arg);
        }
    }
    pt_tensor *t = pt_from_data(buf, PT_SHAPE(max_len, d), PT_FLOAT32, pt_cpu());
    free(buf);
    return t;
}

pt_module *pt_nn_positional_encoding(int64_t d_model, const pt_positional_encoding_opts *opts)
{
    pt_positional_encoding_opts o = opts ? *opts : PT_POSITIONAL_ENCODING_DEFAULTS;
    if (d_model <= 0 || o.max_len <= 0 || !(o.dropout >= 0.0 && o.dropout <= 1.0))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_positional_encoding: d_model %lld and "
                              "max_len %lld must be positive and dropout %g in [0, 1]",
                              (long long)d_model, (long long)o.max_len, o.dropout);
    pe_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_positional_encoding: out of memory");
    *c = (pe_ctx){d_model, o.max_len, o.dropout, o.batch_first};
    pt_module *m = pt_nn_module_new(&pe_def, c);
    pt_tensor *table = m ? pe_table(o.max_len, d_model) : NULL;
    pt_tensor *pe = table ? pt_unsqueeze(table, o.batch_first ? 0 : 1) : NULL;
    pt_tensor *pec = pe ? pt_contiguous(pe) : NULL;
    pt_status st = pec ? pt_nn_register_buffer(m, "pe", pec, o.persistent) : pt_last_status();
    pt_release(table);
    pt_release(pe);
    pt_release(pec);
    if (st != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

/* dropout(x + pe[:L]) with L the sequence dim of x. */
static pt_tensor *pe_forward(pt_module *self, const pt_tensor *x)
{
    const pe_ctx *c = pt_nn_ctx(self);
    if (!PTI_CHECK_ARG(x, "PositionalEncoding", "x"))
        return NULL;
    int sdim = c->batch_first ? 1 : 0;
    if (pt_ndim(x) != 3 || pt_shape(x)[2] != c->d_model || pt_shape(x)[sdim] > c->max_len)
        return pti_error_null(PT_ERR_SHAPE,
                              "PositionalEncoding: x must be %s with E = d_model = "
                              "%lld and L <= max_len = %lld",
                              c->batch_first ? "[N, L, E]" : "[L, N, E]", (long long)c->d_model,
                              (long long)c->max_len);
    pt_tensor *pe = pt_narrow(pt_nn_direct_buffer_ref(self, 0, NULL), sdim, 0, pt_shape(x)[sdim]);
    pt_tensor *y = pt_add(x, pe);
    pt_release(pe);
    pt_tensor *r = pt_dropout(y, c->dropout, pt_nn_is_training(self));
    pt_release(y);
    return r;
}
