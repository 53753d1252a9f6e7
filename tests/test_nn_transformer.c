/* Tests of nn_transformer.h: MultiheadAttention, the transformer encoder/decoder layers and
 * stacks, and PositionalEncoding, against PyTorch 1.13 (tests/fixtures/gen/nn_transformer.py):
 * torch's parameters are copied into our modules, then outputs, averaged attention weights and
 * the gradients of inputs and parameters are compared; parameter names and shapes must be
 * torch's. Also: initialization by its distribution, the stacks' layer copies, dropout in
 * training mode, and the error paths. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

/* float32 through 3-4 chained matmuls, softmax and layer norms per layer: PyTorch (MKL/its own
 * reductions) and we (OpenBLAS, our kernels) sum in different orders, which moves results by a
 * few float32 ulps of the partial sums (~1e-6 relative each, compounding over the chain). */
#define RTOL 1e-5
#define ATOL 1e-5

static pt_tensor *fxf(const char *tag, const char *fmt, const char *arg)
{
    char key[256], sub[192];
    snprintf(sub, sizeof sub, fmt, arg);
    snprintf(key, sizeof key, "%s.%s", tag, sub);
    return fx_has(fx, key) ? fx_get(fx, key) : NULL;
}

static pt_module *test_layer_norm(int64_t d)
{
    return pt_nn_layer_norm(1, &d);
}

/* ---- the generic case runner ----------------------------------------------------------------- */

/* Names must be torch's, in torch's order; torch's values are loaded with a strict
 * pt_nn_load_state_dict keyed by torch's names (so keys and shapes must match). */
static void load_torch_params(const char *tag, pt_module *m)
{
    pt_tensor *nb = fxf(tag, "%s", "names");
    assert_non_null(nb);
    int64_t len = pt_numel(nb);
    char *want = calloc((size_t)len + 1, 1);
    assert_int_equal(pt_copy_to_host(nb, want, (size_t)len), PT_OK);
    const char **names = NULL;
    int n = pt_nn_named_parameters(m, &names, NULL);
    assert_true(n > 0);
    char *got = calloc(4096, 1);
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(got, "\n");
        strcat(got, names[i]);
    }
    assert_string_equal(got, want);
    pt_value *sd = pt_value_dict();
    for (char *name = strtok(want, "\n"); name; name = strtok(NULL, "\n"))
        assert_int_equal(pt_value_dict_set_str(sd, name, pt_value_tensor(fxf(tag, "p.%s", name))),
                         PT_OK);
    if (pt_nn_load_state_dict(m, sd, true) != PT_OK)
        fail_msg("%s: load_state_dict: %s", tag, pt_last_error());
    pt_value_free(sd);
    free(names);
    free(got);
    free(want);
}

/* Runs case `tag` on m (takes ownership): forward with the fixture's inputs, compares the
 * outputs, then backward of sum_j (out_j * gout_j) and compares every gradient. */
static void run_case(const char *tag, pt_module *m, bool train)
{
    assert_non_null(m);
    load_torch_params(tag, m);
    pt_nn_train(m, train);
    const pt_tensor *in[8] = {NULL};
    pt_tensor *inputs[8] = {NULL};
    int n_in = 0;
    for (int i = 0; i < 8; i++) {
        char key[8];
        snprintf(key, sizeof key, "in%d", i);
        inputs[i] = fxf(tag, "%s", key);
        if (!inputs[i])
            continue;
        if (pt_dtype_is_floating(pt_dtype_of(inputs[i])))
            assert_int_equal(pt_requires_grad_(inputs[i], true), PT_OK);
        in[i] = inputs[i];
        n_in = i + 1;
    }
    int n_out = fxf(tag, "%s", "out1") ? 2 : 1;
    pt_tensor *out[2] = {NULL, NULL};
    pt_status st = pt_nn_forward_n(m, n_in, in, n_out, out);
    if (st != PT_OK)
        fail_msg("%s: forward failed: %s", tag, pt_last_error());
    pt_tensor *loss = NULL;
    for (int j = 0; j < n_out; j++) {
        char key[24];
        snprintf(key, sizeof key, "out%d", j);
        assert_tensor_close(out[j], fxf(tag, "%s", key), RTOL, ATOL);
        snprintf(key, sizeof key, "gout%d", j);
        pt_tensor *term = pt_sum(pt_mul(out[j], fxf(tag, "%s", key)));
        loss = loss ? pt_add(loss, term) : term;
    }
    assert_int_equal(pt_backward(loss, NULL, false, false), PT_OK);
    for (int i = 0; i < n_in; i++) {
        char key[16];
        snprintf(key, sizeof key, "g.in%d", i);
        pt_tensor *want = fxf(tag, "%s", key);
        if (want)
            assert_tensor_close(pt_grad(inputs[i]), want, RTOL, ATOL);
    }
    const char **names = NULL;
    pt_tensor **params = NULL;
    int n = pt_nn_named_parameters(m, &names, &params);
    for (int i = 0; i < n; i++)
        assert_tensor_close(pt_grad(params[i]), fxf(tag, "g.p.%s", names[i]), RTOL, ATOL);
    free(names);
    free(params);
    pt_nn_free(m);
}

/* ---- MultiheadAttention ---------------------------------------------------------------------- */

static pt_module *mha(int64_t e, int64_t h, pt_multihead_attention_opts o)
{
    return pt_nn_multihead_attention(e, h, &o);
}

static void test_mha_matches_torch(void **state)
{
    (void)state;
    const char *plain[] = {"mha_cross",       "mha_self",         "mha_noweights",
                           "mha_bool_masks",  "mha_float_mask3d", "mha_float_mask_kpm",
                           "mha_bool_mask3d", "mha_unbatched"};
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        run_case(plain[i], pt_nn_multihead_attention(8, 2, NULL), false);
    run_case("mha_batch_first", mha(8, 2, (pt_multihead_attention_opts){.batch_first = true}),
             false);
    run_case("mha_kvdim", mha(8, 4, (pt_multihead_attention_opts){.kdim = 5, .vdim = 6}), false);
    run_case("mha_nobias", mha(8, 2, (pt_multihead_attention_opts){.no_bias = true}), false);
    run_case("mha_train", pt_nn_multihead_attention(8, 2, NULL), true);
    run_case("mha_bias_kv", mha(8, 2, (pt_multihead_attention_opts){.add_bias_kv = true}), false);
    run_case("mha_zero_attn", mha(8, 2, (pt_multihead_attention_opts){.add_zero_attn = true}),
             false);
    run_case("mha_bias_kv_zero_attn",
             mha(8, 2,
                 (pt_multihead_attention_opts){
                     .add_bias_kv = true, .add_zero_attn = true, .batch_first = true}),
             false);
}

/* One input = self-attention; pt_nn_forward gives the same output as forward_n(x, x, x). */
static void test_mha_single_input(void **state)
{
    (void)state;
    pt_module *m = pt_nn_multihead_attention(8, 2, NULL);
    pt_tensor *x = pt_randn(PT_SHAPE(3, 2, 8), PT_FLOAT32, pt_cpu());
    pt_tensor *y1 = pt_nn_forward(m, x), *y3[2] = {NULL, NULL};
    assert_int_equal(pt_nn_forward_n(m, 3, (const pt_tensor *[]){x, x, x}, 2, y3), PT_OK);
    assert_tensor_equal(y1, y3[0]);
    assert_shape(y3[1], 2, 3, 3);
    /* averaged softmax rows sum to one */
    assert_tensor_close(pt_sum_dim(y3[1], PT_DIMS(-1), false),
                        pt_ones(PT_SHAPE(2, 3), PT_FLOAT32, pt_cpu()), 1e-6, 1e-6);
    pt_nn_free(m);
}

/* Non-contiguous inputs give the same result; the module converted to float64 agrees with
 * torch's float32 result to float32 precision. */
static void test_mha_noncontig_and_float64(void **state)
{
    (void)state;
    pt_module *m = pt_nn_multihead_attention(8, 2, NULL);
    load_torch_params("mha_bool_masks", m);
    pt_nn_eval(m);
    const pt_tensor *in[5], *nc[5];
    for (int i = 0; i < 5; i++) {
        char key[8];
        snprintf(key, sizeof key, "in%d", i);
        in[i] = fxf("mha_bool_masks", "%s", key);
        nc[i] = pt_test_noncontig(in[i]);
        assert_false(pt_is_contiguous(nc[i]));
    }
    pt_tensor *a[2], *b[2];
    assert_int_equal(pt_nn_forward_n(m, 5, in, 2, a), PT_OK);
    assert_int_equal(pt_nn_forward_n(m, 5, nc, 2, b), PT_OK);
    assert_tensor_equal(b[0], a[0]);
    assert_tensor_equal(b[1], a[1]);
    assert_int_equal(pt_nn_to_dtype(m, PT_FLOAT64), PT_OK);
    const pt_tensor *in64[5];
    for (int i = 0; i < 5; i++)
        in64[i] = i < 3 ? pt_to_dtype(in[i], PT_FLOAT64) : in[i];
    assert_int_equal(pt_nn_forward_n(m, 5, in64, 2, b), PT_OK);
    assert_int_equal(pt_dtype_of(b[0]), PT_FLOAT64);
    assert_tensor_close_any_dtype(b[0], fxf("mha_bool_masks", "%s", "out0"), RTOL, ATOL);
    assert_tensor_close_any_dtype(b[1], fxf("mha_bool_masks", "%s", "out1"), RTOL, ATOL);
    pt_nn_free(m);
}

static void test_mha_init(void **state)
{
    (void)state;
    pt_manual_seed(1);
    const int64_t e = 64;
    pt_module *m = pt_nn_multihead_attention(e, 4, NULL);
    pt_tensor *w = pt_nn_param_ref(m, "in_proj_weight");
    assert_shape(w, 3 * e, e);
    double bound = sqrt(6.0 / (double)(4 * e)); /* xavier_uniform_: fan_in e, fan_out 3e */
    assert_true(pt_item(pt_max(pt_abs(w))) <= bound);
    assert_true(pt_item(pt_max(pt_abs(w))) > 0.98 * bound);
    /* U(-b, b) has std b/sqrt(3); 12288 draws: the sample std is within 1% */
    assert_true(fabs(pt_item(pt_std(w, 0, NULL, 1, false)) / (bound / sqrt(3.0)) - 1.0) < 0.02);
    assert_true(fabs(pt_item(pt_mean(w))) < 0.01 * bound * 3);
    assert_tensor_equal(pt_nn_param_ref(m, "in_proj_bias"),
                        pt_zeros(PT_SHAPE(3 * e), PT_FLOAT32, pt_cpu()));
    assert_tensor_equal(pt_nn_param_ref(m, "out_proj.bias"),
                        pt_zeros(PT_SHAPE(e), PT_FLOAT32, pt_cpu()));
    pt_tensor *ow = pt_nn_param_ref(m, "out_proj.weight");
    assert_true(pt_item(pt_max(pt_abs(ow))) <= 1.0 / sqrt((double)e));
    /* same seed, same parameters */
    pt_manual_seed(1);
    pt_module *m2 = pt_nn_multihead_attention(e, 4, NULL);
    assert_tensor_equal(pt_nn_param_ref(m2, "in_proj_weight"), w);
    assert_tensor_equal(pt_nn_param_ref(m2, "out_proj.weight"), ow);
    /* kdim/vdim: separate weights, each xavier with its own fans */
    pt_module *m3 = mha(e, 4, (pt_multihead_attention_opts){.kdim = 32, .vdim = 16});
    assert_shape(pt_nn_param_ref(m3, "k_proj_weight"), e, 32);
    assert_shape(pt_nn_param_ref(m3, "v_proj_weight"), e, 16);
    assert_true(pt_item(pt_max(pt_abs(pt_nn_param_ref(m3, "v_proj_weight")))) <=
                sqrt(6.0 / (double)(e + 16)));
    assert_null(pt_nn_param_ref(m3, "in_proj_weight"));
    pt_last_error();
    pt_nn_free(m);
    pt_nn_free(m2);
    pt_nn_free(m3);
}

/* Dropout on the weights in training: the returned weights are the dropped, rescaled ones. */
static void test_mha_dropout_training(void **state)
{
    (void)state;
    pt_manual_seed(3);
    pt_module *m = mha(8, 2, (pt_multihead_attention_opts){.dropout = 0.5});
    pt_tensor *x = pt_randn(PT_SHAPE(16, 4, 8), PT_FLOAT32, pt_cpu());
    pt_tensor *out[2];
    pt_nn_eval(m);
    assert_int_equal(pt_nn_forward_n(m, 1, (const pt_tensor *[]){x}, 2, out), PT_OK);
    pt_tensor *w_eval = out[1];
    pt_nn_train(m, true);
    assert_int_equal(pt_nn_forward_n(m, 1, (const pt_tensor *[]){x}, 2, out), PT_OK);
    /* per-head weights are 0 or 2x; the average over 2 heads is then no longer row-normalized */
    double row_sum_dev =
        pt_item(pt_max(pt_abs(pt_sub_scalar(pt_sum_dim(out[1], PT_DIMS(-1), false), 1.0))));
    assert_true(row_sum_dev > 0.1);
    assert_false(pt_item(pt_max(pt_abs(pt_sub(out[1], w_eval)))) < 1e-6);
    pt_nn_free(m);
}

static void test_mha_errors(void **state)
{
    (void)state;
    assert_pt_error(pt_nn_multihead_attention(10, 3, NULL), PT_ERR_INVALID_ARG, "multiple");
    assert_pt_error(mha(8, 2, (pt_multihead_attention_opts){.dropout = 1.5}), PT_ERR_INVALID_ARG,
                    "dropout");
    pt_module *m = pt_nn_multihead_attention(8, 2, NULL);
    pt_tensor *q = pt_randn(PT_SHAPE(3, 2, 8), PT_FLOAT32, pt_cpu());
    pt_tensor *k = pt_randn(PT_SHAPE(4, 2, 8), PT_FLOAT32, pt_cpu());
    pt_tensor *out[3];
    pt_tensor *bad = pt_randn(PT_SHAPE(3, 2, 7), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_nn_forward_n(m, 1, (const pt_tensor *[]){bad}, 1, out), PT_ERR_SHAPE,
                           "feature sizes");
    pt_tensor *k1 = pt_randn(PT_SHAPE(4, 3, 8), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_nn_forward_n(m, 3, (const pt_tensor *[]){q, k1, k1}, 1, out),
                           PT_ERR_SHAPE, "batch size");
    pt_tensor *v5 = pt_randn(PT_SHAPE(5, 2, 8), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_nn_forward_n(m, 3, (const pt_tensor *[]){q, k, v5}, 1, out),
                           PT_ERR_SHAPE, "sequence length");
    pt_tensor *q4 = pt_randn(PT_SHAPE(1, 3, 2, 8), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_nn_forward_n(m, 1, (const pt_tensor *[]){q4}, 1, out), PT_ERR_SHAPE,
                           "3-D");
    pt_tensor *mask = pt_zeros(PT_SHAPE(3, 3), PT_BOOL, pt_cpu());
    assert_pt_status_error(
        pt_nn_forward_n(m, 5, (const pt_tensor *[]){q, k, k, NULL, mask}, 1, out), PT_ERR_SHAPE,
        "attn_mask");
    pt_tensor *kpm = pt_zeros(PT_SHAPE(2, 3), PT_BOOL, pt_cpu());
    assert_pt_status_error(pt_nn_forward_n(m, 4, (const pt_tensor *[]){q, k, k, kpm}, 1, out),
                           PT_ERR_SHAPE, "key_padding_mask");
    pt_tensor *imask = pt_zeros(PT_SHAPE(3, 4), PT_INT64, pt_cpu());
    assert_pt_status_error(
        pt_nn_forward_n(m, 5, (const pt_tensor *[]){q, k, k, NULL, imask}, 1, out), PT_ERR_DTYPE,
        "attn_mask");
    assert_pt_status_error(pt_nn_forward_n(m, 1, (const pt_tensor *[]){NULL}, 1, out), PT_ERR_NULL,
                           "query");
    assert_pt_status_error(pt_nn_forward_n(m, 1, (const pt_tensor *[]){q}, 3, out),
                           PT_ERR_INVALID_ARG, "outputs");
    pt_nn_free(m);
}

/* ---- transformer layers ---------------------------------------------------------------------- */

static pt_transformer_layer_opts layer_opts(void)
{
    pt_transformer_layer_opts o = PT_TRANSFORMER_LAYER_DEFAULTS;
    o.dim_feedforward = 16;
    return o;
}

static void test_encoder_layer_matches_torch(void **state)
{
    (void)state;
    pt_transformer_layer_opts o = layer_opts();
    run_case("enc_relu", pt_nn_transformer_encoder_layer(8, 2, &o), false);
    run_case("enc_unbatched", pt_nn_transformer_encoder_layer(8, 2, &o), false);
    pt_transformer_layer_opts g = o;
    g.activation = PT_TRANSFORMER_GELU;
    g.norm_first = true;
    run_case("enc_gelu_normfirst", pt_nn_transformer_encoder_layer(8, 2, &g), false);
    pt_transformer_layer_opts bf = o;
    bf.batch_first = true;
    bf.layer_norm_eps = 1e-3;
    run_case("enc_batch_first", pt_nn_transformer_encoder_layer(8, 2, &bf), false);
    pt_transformer_layer_opts t = o;
    t.dropout = 0.0;
    run_case("enc_train", pt_nn_transformer_encoder_layer(8, 2, &t), true);
}

static void test_decoder_layer_matches_torch(void **state)
{
    (void)state;
    pt_transformer_layer_opts o = layer_opts();
    run_case("dec_relu", pt_nn_transformer_decoder_layer(8, 2, &o), false);
    pt_transformer_layer_opts g = o;
    g.activation = PT_TRANSFORMER_GELU;
    g.norm_first = true;
    run_case("dec_gelu_normfirst", pt_nn_transformer_decoder_layer(8, 2, &g), false);
    pt_transformer_layer_opts t = o;
    t.dropout = 0.0;
    run_case("dec_train", pt_nn_transformer_decoder_layer(8, 2, &t), true);
}

static void test_stacks_match_torch(void **state)
{
    (void)state;
    pt_transformer_layer_opts o = layer_opts();
    run_case(
        "enc_stack",
        pt_nn_transformer_encoder(pt_nn_transformer_encoder_layer(8, 2, &o), 2, test_layer_norm(8)),
        false);
    pt_transformer_layer_opts nf = o;
    nf.norm_first = true;
    run_case("dec_stack",
             pt_nn_transformer_decoder(pt_nn_transformer_decoder_layer(8, 2, &nf), 2,
                                       test_layer_norm(8)),
             false);
}

static void test_transformer_matches_torch(void **state)
{
    (void)state;
    pt_transformer_layer_opts o = layer_opts();
    o.activation = PT_TRANSFORMER_GELU;
    run_case("transformer", pt_nn_transformer(8, 2, 2, 1, &o), false);
    assert_tensor_equal(pt_nn_transformer_square_subsequent_mask(5), fx_get(fx, "square_mask5"));
    assert_pt_error(pt_nn_transformer_square_subsequent_mask(-1), PT_ERR_INVALID_ARG, "sz");
}

/* nn.Transformer re-draws every matrix with xavier_uniform_ (vectors keep their defaults). */
static void test_transformer_init_and_errors(void **state)
{
    (void)state;
    pt_transformer_layer_opts o = layer_opts();
    o.dim_feedforward = 32;
    pt_module *m = pt_nn_transformer(64, 4, 1, 1, &o);
    assert_non_null(m);
    pt_tensor *w1 = pt_nn_param_ref(m, "encoder.layers.0.linear1.weight"); /* [32, 64] */
    assert_true(pt_item(pt_max(pt_abs(w1))) <= sqrt(6.0 / 96.0));
    assert_true(pt_item(pt_max(pt_abs(w1))) > 0.9 * sqrt(6.0 / 96.0)); /* wider than 1/8 */
    pt_tensor *ow = pt_nn_param_ref(m, "decoder.layers.0.multihead_attn.out_proj.weight");
    assert_true(pt_item(pt_max(pt_abs(ow))) > 1.0 / 8.0); /* not Linear's U(-1/8, 1/8) */
    assert_tensor_equal(pt_nn_param_ref(m, "decoder.norm.weight"),
                        pt_ones(PT_SHAPE(64), PT_FLOAT32, pt_cpu()));
    assert_tensor_equal(pt_nn_param_ref(m, "encoder.layers.0.self_attn.in_proj_bias"),
                        pt_zeros(PT_SHAPE(192), PT_FLOAT32, pt_cpu()));
    pt_tensor *src = pt_randn(PT_SHAPE(5, 2, 64), PT_FLOAT32, pt_cpu());
    pt_tensor *tgt = pt_randn(PT_SHAPE(4, 3, 64), PT_FLOAT32, pt_cpu());
    pt_tensor *out[1];
    assert_pt_status_error(pt_nn_forward_n(m, 2, (const pt_tensor *[]){src, tgt}, 1, out),
                           PT_ERR_SHAPE, "batch");
    pt_tensor *tgt2 = pt_randn(PT_SHAPE(4, 2, 64), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_nn_forward_n(m, 2, (const pt_tensor *[]){src, tgt2}, 1, out), PT_OK);
    assert_shape(out[0], 4, 2, 64);
    assert_pt_error(pt_nn_transformer(64, 5, 1, 1, &o), PT_ERR_INVALID_ARG, "nhead");
    assert_pt_error(pt_nn_transformer(64, 4, 0, 1, &o), PT_ERR_INVALID_ARG, "num_layers");
    pt_nn_free(m);
}

/* Every layer of a stack starts as a copy of the given one (PyTorch's deepcopy): equal values,
 * separate tensors. */
static void test_stack_layers_are_copies(void **state)
{
    (void)state;
    pt_transformer_layer_opts o = layer_opts();
    pt_module *layer = pt_nn_transformer_encoder_layer(8, 2, &o);
    pt_nn_eval(layer);
    pt_module *enc = pt_nn_transformer_encoder(layer, 3, NULL);
    assert_non_null(enc);
    assert_null(pt_nn_child_ref(enc, "norm"));
    pt_last_error();
    const char *keys[] = {"self_attn.in_proj_weight", "linear1.bias", "norm2.weight"};
    for (int i = 0; i < 3; i++) {
        char a[128], b[128];
        snprintf(a, sizeof a, "layers.0.%s", keys[i]);
        snprintf(b, sizeof b, "layers.2.%s", keys[i]);
        assert_tensor_equal(pt_nn_param_ref(enc, b), pt_nn_param_ref(enc, a));
        assert_ptr_not_equal(pt_nn_param_ref(enc, b), pt_nn_param_ref(enc, a));
    }
    assert_false(pt_nn_is_training(pt_nn_child_ref(enc, "layers.1")));
    assert_int_equal(pt_nn_named_parameters(enc, NULL, NULL), 3 * 12);
    pt_nn_free(enc);
}

/* bias = false (PyTorch >= 2.1's bias=False): no bias in the Linears, LayerNorms and attention. */
static void test_layer_without_bias(void **state)
{
    (void)state;
    pt_transformer_layer_opts o = layer_opts();
    o.bias = false;
    pt_module *m = pt_nn_transformer_encoder_layer(8, 2, &o);
    const char **names = NULL;
    int n = pt_nn_named_parameters(m, &names, NULL);
    const char *want[] = {"self_attn.in_proj_weight",
                          "self_attn.out_proj.weight",
                          "linear1.weight",
                          "linear2.weight",
                          "norm1.weight",
                          "norm2.weight"};
    assert_int_equal(n, 6);
    for (int i = 0; i < n; i++)
        assert_string_equal(names[i], want[i]);
    free(names);
    pt_tensor *x = pt_randn(PT_SHAPE(3, 2, 8), PT_FLOAT32, pt_cpu());
    assert_shape(pt_nn_forward(m, x), 3, 2, 8);
    char *repr = pt_nn_to_string(m);
    assert_non_null(strstr(repr, "(linear1): Linear(in_features=8, out_features=16, bias=False)"));
    free(repr);
    pt_nn_free(m);
}

/* Training mode applies the dropouts (default p = 0.1): outputs differ from eval mode and are
 * reproducible from the seed. */
static void test_layer_dropout_training(void **state)
{
    (void)state;
    pt_module *m = pt_nn_transformer_decoder_layer(8, 2, NULL); /* PyTorch's defaults */
    assert_non_null(m);
    assert_shape(pt_nn_param_ref(m, "linear1.weight"), 2048, 8);
    pt_tensor *t = pt_randn(PT_SHAPE(6, 2, 8), PT_FLOAT32, pt_cpu());
    pt_tensor *mem = pt_randn(PT_SHAPE(4, 2, 8), PT_FLOAT32, pt_cpu());
    const pt_tensor *in[2] = {t, mem};
    pt_tensor *a, *b, *e;
    pt_manual_seed(5);
    assert_int_equal(pt_nn_forward_n(m, 2, in, 1, &a), PT_OK);
    pt_manual_seed(5);
    assert_int_equal(pt_nn_forward_n(m, 2, in, 1, &b), PT_OK);
    assert_tensor_equal(b, a);
    pt_nn_eval(m);
    assert_int_equal(pt_nn_forward_n(m, 2, in, 1, &e), PT_OK);
    assert_true(pt_item(pt_max(pt_abs(pt_sub(a, e)))) > 1e-3);
    pt_nn_free(m);
}

static void test_layer_errors(void **state)
{
    (void)state;
    pt_transformer_layer_opts o = layer_opts();
    assert_pt_error(pt_nn_transformer_encoder_layer(9, 2, &o), PT_ERR_INVALID_ARG, "nhead");
    pt_transformer_layer_opts bad = o;
    bad.activation = (pt_transformer_activation)7;
    assert_pt_error(pt_nn_transformer_decoder_layer(8, 2, &bad), PT_ERR_INVALID_ARG, "activation");
    bad = o;
    bad.dim_feedforward = 0;
    assert_pt_error(pt_nn_transformer_encoder_layer(8, 2, &bad), PT_ERR_INVALID_ARG,
                    "dim_feedforward");
    /* the stacks take only their own layer kind (and free what they were given) */
    assert_pt_error(pt_nn_transformer_encoder(pt_nn_transformer_decoder_layer(8, 2, &o), 2, NULL),
                    PT_ERR_INVALID_ARG, "TransformerEncoderLayer");
    assert_pt_error(
        pt_nn_transformer_decoder(pt_nn_transformer_decoder_layer(8, 2, &o), 0, test_layer_norm(8)),
        PT_ERR_INVALID_ARG, "num_layers");
    assert_pt_error(pt_nn_transformer_encoder(NULL, 2, test_layer_norm(8)), PT_ERR_NULL,
                    "encoder_layer");
    pt_module *enc = pt_nn_transformer_encoder_layer(8, 2, &o);
    pt_tensor *out[1];
    pt_tensor *x = pt_randn(PT_SHAPE(3, 2, 6), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_nn_forward_n(enc, 1, (const pt_tensor *[]){x}, 1, out), PT_ERR_SHAPE,
                           "d_model");
    assert_pt_error(pt_nn_forward(enc, x), PT_ERR_SHAPE, "src");
    pt_module *dec = pt_nn_transformer_decoder_layer(8, 2, &o);
    pt_tensor *t = pt_randn(PT_SHAPE(3, 2, 8), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_nn_forward(dec, t), PT_ERR_INVALID_ARG, "inputs");
    assert_pt_status_error(pt_nn_forward_n(dec, 2, (const pt_tensor *[]){t, x}, 1, out),
                           PT_ERR_SHAPE, "memory");
    pt_nn_free(enc);
    pt_nn_free(dec);
}

/* ---- PositionalEncoding ---------------------------------------------------------------------- */

static void test_positional_encoding_matches_torch(void **state)
{
    (void)state;
    const int64_t dims[] = {16, 7}, lens[] = {1000, 50};
    for (int i = 0; i < 2; i++) {
        char tag[8];
        snprintf(tag, sizeof tag, "pe%lld", (long long)dims[i]);
        pt_positional_encoding_opts o = PT_POSITIONAL_ENCODING_DEFAULTS;
        o.max_len = lens[i];
        pt_module *m = pt_nn_positional_encoding(dims[i], &o);
        assert_non_null(m);
        /* sin/cos of the same float32 argument: within a float32 ulp of the result */
        assert_tensor_close(pt_nn_buffer_ref(m, "pe"), fxf(tag, "%s", "pe"), 0.0, 1e-6);
        pt_nn_eval(m);
        pt_tensor *x = fxf(tag, "%s", "x");
        assert_tensor_close(pt_nn_forward(m, x), fxf(tag, "%s", "y"), 1e-6, 1e-6);
        /* batch_first: pe is [1, max_len, d], x [N, L, d] */
        o.batch_first = true;
        pt_module *bf = pt_nn_positional_encoding(dims[i], &o);
        assert_shape(pt_nn_buffer_ref(bf, "pe"), 1, lens[i], dims[i]);
        pt_nn_eval(bf);
        assert_tensor_close(pt_nn_forward(bf, pt_transpose(x, 0, 1)),
                            pt_transpose(fxf(tag, "%s", "y"), 0, 1), 1e-6, 1e-6);
        pt_nn_free(m);
        pt_nn_free(bf);
    }
}

static void test_positional_encoding_default_and_dropout(void **state)
{
    (void)state;
    pt_module *m = pt_nn_positional_encoding(8, NULL); /* max_len 5000, p = 0.1 */
    assert_shape(pt_nn_buffer_ref(m, "pe"), 5000, 1, 8);
    assert_int_equal(pt_nn_named_parameters(m, NULL, NULL), 0);
    pt_positional_encoding_opts o = PT_POSITIONAL_ENCODING_DEFAULTS;
    o.dropout = 0.5;
    pt_module *d = pt_nn_positional_encoding(8, &o);
    pt_tensor *x = pt_randn(PT_SHAPE(20, 10, 8), PT_FLOAT32, pt_cpu());
    pt_nn_eval(d);
    pt_tensor *clean = pt_nn_forward(d, x);
    pt_nn_train(d, true);
    pt_tensor *y = pt_nn_forward(d, x);
    /* each element is dropped (0) or kept and scaled by 1/(1-p) = 2 */
    pt_tensor *kept = pt_ne_scalar(y, 0.0);
    double frac = pt_item(pt_mean(pt_to_dtype(kept, PT_FLOAT32)));
    assert_true(frac > 0.4 && frac < 0.6);
    assert_tensor_close(pt_where(kept, pt_mul_scalar(clean, 2.0), pt_zeros_like(y)), y, 1e-6, 1e-6);
    pt_nn_free(m);
    pt_nn_free(d);
}

/* pe is a persistent buffer by default (the tutorial's register_buffer), in the state dict;
 * persistent = false keeps it out. */
static void test_positional_encoding_state_dict(void **state)
{
    (void)state;
    pt_positional_encoding_opts o = PT_POSITIONAL_ENCODING_DEFAULTS;
    o.max_len = 10;
    pt_module *m = pt_nn_positional_encoding(4, &o);
    pt_value *sd = pt_nn_state_dict(m);
    assert_int_equal(pt_value_len(sd), 1);
    assert_non_null(pt_value_get_str_ref(sd, "pe"));
    pt_value_free(sd);
    o.persistent = false;
    pt_module *np = pt_nn_positional_encoding(4, &o);
    sd = pt_nn_state_dict(np);
    assert_int_equal(pt_value_len(sd), 0);
    pt_value_free(sd);
    assert_int_equal(pt_nn_named_buffers(np, NULL, NULL), 1);
    pt_nn_free(m);
    pt_nn_free(np);
}

static void test_positional_encoding_errors(void **state)
{
    (void)state;
    assert_pt_error(pt_nn_positional_encoding(0, NULL), PT_ERR_INVALID_ARG, "d_model");
    pt_positional_encoding_opts o = PT_POSITIONAL_ENCODING_DEFAULTS;
    o.max_len = 4;
    pt_module *m = pt_nn_positional_encoding(8, &o);
    assert_pt_error(pt_nn_forward(m, pt_randn(PT_SHAPE(5, 1, 8), PT_FLOAT32, pt_cpu())),
                    PT_ERR_SHAPE, "max_len");
    assert_pt_error(pt_nn_forward(m, pt_randn(PT_SHAPE(4, 8), PT_FLOAT32, pt_cpu())), PT_ERR_SHAPE,
                    "d_model");
    pt_nn_free(m);
}

int main(void)
{
    fx = fx_open("nn_transformer");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mha_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mha_single_input, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mha_noncontig_and_float64, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mha_init, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mha_dropout_training, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mha_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_encoder_layer_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_decoder_layer_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_stacks_match_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_transformer_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_transformer_init_and_errors, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_stack_layers_are_copies, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_layer_without_bias, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_layer_dropout_training, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_layer_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_positional_encoding_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_positional_encoding_default_and_dropout, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_positional_encoding_state_dict, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_positional_encoding_errors, pt_test_setup,
                                        pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
