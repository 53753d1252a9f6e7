/* The CPU backend's SIMD kernels of the CNN layers against PyTorch
 * (tests/fixtures/gen/conv_simd.py) on shapes wide enough for their vector loops: 2x2 / stride 2
 * max pooling (values, indices and the gradient, with NaN, ties and -inf) and the batch-norm
 * backward (training and eval, planes of 169 and 784 values), and stride-1 convolutions with 8k
 * output channels (the direct AVX-512 kernel: forward, input gradient, conv_transpose2d) and a few
 * that it must leave to im2col. The _scalar twin of this executable (PT_DISABLE_AVX2=1) checks the
 * portable loops and the _avx2 twin the AVX2 ones on the same cases, so every path agrees
 * with PyTorch and so with the others. */
#include "testutil.h"

#include <stdio.h>

static pt_fixture *fx;

static char name_buf[8][64];
static int name_slot;

/* "<op>.<i>.<field>" in a small rotating buffer. */
static const char *key(const char *op, int i, const char *field)
{
    char *b = name_buf[name_slot++ % 8];
    snprintf(b, 64, "%s.%d.%s", op, i, field);
    return b;
}

/* Values and indices exactly (the same comparisons in the same order as PyTorch); the gradient
 * scatters each output gradient to its index, sums of at most a few terms. */
static void test_max_pool2d_2x2_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("mp", i, "x")); i++, n++) {
        pt_scope_begin();
        pt_tensor *x = fx_get(fx, key("mp", i, "x"));
        pt_tensor *idx = NULL;
        pt_tensor *got = pt_max_pool2d_ex(x, (const int64_t[]){2, 2}, NULL, &idx);
        if (!got)
            fail_msg("mp case %d: %s", i, pt_last_error());
        assert_tensor_equal(got, fx_get(fx, key("mp", i, "out")));
        assert_tensor_equal(idx, fx_get(fx, key("mp", i, "idx")));
        /* without indices the values are the same */
        assert_tensor_equal(pt_max_pool2d(x, (const int64_t[]){2, 2}, NULL, NULL),
                            fx_get(fx, key("mp", i, "out")));
        assert_tensor_close(pt_max_pool2d_backward(fx_get(fx, key("mp", i, "gout")), x, idx),
                            fx_get(fx, key("mp", i, "gx")), 1e-6, 1e-6);
        pt_scope_end();
    }
    assert_true(n >= 5);
}

/* The tolerances of test_grad_nn's float32 batch-norm backward. */
static void test_batch_norm_backward_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("bn", i, "x")); i++, n++) {
        pt_scope_begin();
        pt_tensor *x = fx_get(fx, key("bn", i, "x")), *g = fx_get(fx, key("bn", i, "g"));
        pt_tensor *w = fx_get(fx, key("bn", i, "w")), *gw = NULL, *gb = NULL;
        pt_tensor *gx = pt_batch_norm_backward(g, x, NULL, NULL, w, true, 1e-5, &gw, &gb);
        assert_tensor_close(gx, fx_get(fx, key("bn", i, "train.gx")), 1e-4, 1e-5);
        assert_tensor_close(gw, fx_get(fx, key("bn", i, "train.gw")), 1e-4, 1e-5);
        assert_tensor_close(gb, fx_get(fx, key("bn", i, "train.gb")), 1e-4, 1e-5);
        gx = pt_batch_norm_backward(g, x, fx_get(fx, key("bn", i, "rm")),
                                    fx_get(fx, key("bn", i, "rv")), w, false, 1e-5, &gw, &gb);
        assert_tensor_close(gx, fx_get(fx, key("bn", i, "eval.gx")), 1e-4, 1e-5);
        assert_tensor_close(gw, fx_get(fx, key("bn", i, "eval.gw")), 1e-4, 1e-5);
        assert_tensor_close(gb, fx_get(fx, key("bn", i, "eval.gb")), 1e-4, 1e-5);
        pt_scope_end();
    }
    assert_true(n >= 2);
}

/* The tolerances of test_conv (float32 sums in another order than PyTorch); the weight gradient
 * sums N*OH*OW products per entry: rtol 1e-4 as there. */
static void test_conv2d_stride1_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("c2d", i, "x")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("c2d", i, "cfg"));
        pt_tensor *x = fx_get(fx, key("c2d", i, "x")), *w = fx_get(fx, key("c2d", i, "w"));
        bool bias = pt_test_get(cfg, 2) != 0;
        pt_tensor *b = bias ? fx_get(fx, key("c2d", i, "b")) : NULL;
        pt_conv_opts o = {.padding = {(int64_t)pt_test_get(cfg, 0), (int64_t)pt_test_get(cfg, 1)}};
        pt_tensor *out = pt_conv2d_ex(x, w, b, &o);
        if (!out)
            fail_msg("c2d case %d: %s", i, pt_last_error());
        assert_tensor_close(out, fx_get(fx, key("c2d", i, "out")), 1e-5, 2e-5);
        pt_tensor *gout = fx_get(fx, key("c2d", i, "gout"));
        assert_tensor_close(pt_conv2d_input_grad(pt_ndim(x), pt_shape(x), w, gout, &o),
                            fx_get(fx, key("c2d", i, "gx")), 1e-5, 2e-5);
        pt_tensor *gb = NULL;
        pt_tensor *gw =
            pt_conv2d_weight_grad(x, pt_ndim(w), pt_shape(w), gout, &o, bias ? &gb : NULL);
        assert_tensor_close(gw, fx_get(fx, key("c2d", i, "gw")), 1e-4, 1e-5);
        if (bias)
            assert_tensor_close(gb, fx_get(fx, key("c2d", i, "gb")), 1e-5, 1e-4);
        pt_scope_end();
    }
    assert_true(n >= 7);
    for (int i = 0; fx_has(fx, key("ct", i, "x")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("ct", i, "cfg"));
        const int64_t pad[2] = {(int64_t)pt_test_get(cfg, 0), (int64_t)pt_test_get(cfg, 1)};
        pt_tensor *out =
            pt_conv_transpose2d(fx_get(fx, key("ct", i, "x")), fx_get(fx, key("ct", i, "w")),
                                fx_get(fx, key("ct", i, "b")), NULL, pad, NULL, 1, NULL);
        if (!out)
            fail_msg("ct case %d: %s", i, pt_last_error());
        assert_tensor_close(out, fx_get(fx, key("ct", i, "out")), 1e-5, 2e-5);
        pt_scope_end();
    }
    assert_true(n >= 9);
}

int main(void)
{
    fx = fx_open("conv_simd");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_max_pool2d_2x2_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_backward_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_conv2d_stride1_matches_torch, pt_test_setup,
                                        pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
