/* Edge cases of creation ops, activations, fill_/zero_ under autograd, linear, pooling, batch
 * norm and their backward against PyTorch 2.x (tests/fixtures/gen/ops_hardening.py). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>

static pt_fixture *fx;

static const struct {
    const char *name;
    pt_dtype dt;
} int_dtypes[] = {{"i64", PT_INT64}, {"i32", PT_INT32}, {"i16", PT_INT16}, {"i8", PT_INT8}};
#define N_INT (sizeof int_dtypes / sizeof int_dtypes[0])

static const double aranges[][3] = {{0.5, 5.3, 1.2},  {-0.5, 5.3, 1.2}, {5.3, 0.5, -1.2},
                                    {-2.7, 3, 1},     {0, 2, 0.5},      {0.3, -5, -1.5},
                                    {-3.9, -0.2, 0.7}};
static const double linspaces[][3] = {{-1.7, 3.2, 5}, {3.2, -1.7, 5}, {-3.7, 10, 7},
                                      {0, 10, 4},     {10, 0, 4},     {-7.5, 7.5, 1},
                                      {2.9, 9.9, 1},  {-2.2, 1.8, 9}};

static void test_integer_arange_truncates_bounds(void **state)
{
    (void)state;
    char key[64];
    for (size_t k = 0; k < sizeof aranges / sizeof aranges[0]; k++)
        for (size_t d = 0; d < N_INT; d++) {
            snprintf(key, sizeof key, "arange.%zu.%s", k, int_dtypes[d].name);
            assert_tensor_equal(
                pt_arange(aranges[k][0], aranges[k][1], aranges[k][2], int_dtypes[d].dt, pt_cpu()),
                fx_get(fx, key));
        }
}

static void test_linspace_single_step_and_integer_bounds(void **state)
{
    (void)state;
    char key[64];
    for (size_t k = 0; k < sizeof linspaces / sizeof linspaces[0]; k++) {
        for (size_t d = 0; d < N_INT; d++) {
            snprintf(key, sizeof key, "linspace.%zu.%s", k, int_dtypes[d].name);
            assert_tensor_equal(pt_linspace(linspaces[k][0], linspaces[k][1],
                                            (int64_t)linspaces[k][2], int_dtypes[d].dt, pt_cpu()),
                                fx_get(fx, key));
        }
        snprintf(key, sizeof key, "linspace.%zu.f64", k);
        assert_tensor_close(pt_linspace(linspaces[k][0], linspaces[k][1], (int64_t)linspaces[k][2],
                                        PT_FLOAT64, pt_cpu()),
                            fx_get(fx, key), 1e-15, 1e-15);
        snprintf(key, sizeof key, "linspace.%zu.f32", k);
        assert_tensor_close(pt_linspace(linspaces[k][0], linspaces[k][1], (int64_t)linspaces[k][2],
                                        PT_FLOAT32, pt_cpu()),
                            fx_get(fx, key), 1e-6, 1e-6);
    }
    assert_tensor_equal(pt_linspace(0.9, 5.9, 3, PT_UINT8, pt_cpu()), fx_get(fx, "linspace.u8"));
}

static void test_softshrink_keeps_nan(void **state)
{
    (void)state;
    pt_module *m = pt_nn_softshrink(0.5);
    assert_tensor_equal(pt_nn_forward(m, fx_get(fx, "softshrink.in")),
                        fx_get(fx, "softshrink.out"));
    assert_tensor_equal(pt_nn_forward(m, fx_get(fx, "softshrink.edge")),
                        fx_get(fx, "softshrink.edge.out"));
    pt_nn_free(m);
}

/* y = 2 * x; y.fill_(5) (or zero_()); (y * [1, 2, 3]).sum().backward(): x.grad is zeros */
static void check_fill_rebases(bool zero, const char *prefix)
{
    char key[64];
    pt_tensor *x = pt_from_data((float[]){1, -2, 3}, PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_requires_grad_(x, true);
    pt_tensor *y = pt_mul_scalar(x, 2.0);
    assert_int_equal(zero ? pt_zero_(y) : pt_fill_(y, 5.0), PT_OK);
    snprintf(key, sizeof key, "%s.y", prefix);
    assert_tensor_equal(y, fx_get(fx, key));
    pt_tensor *wts = pt_from_data((float[]){1, 2, 3}, PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_tensor *loss = pt_sum(pt_mul(y, wts));
    assert_int_equal(pt_backward(loss, NULL, false, false), PT_OK);
    snprintf(key, sizeof key, "%s.x_grad", prefix);
    assert_non_null(pt_grad(x));
    assert_tensor_equal(pt_grad(x), fx_get(fx, key));
}

static void test_fill_zero_rebase_history(void **state)
{
    (void)state;
    check_fill_rebases(false, "fill");
    check_fill_rebases(true, "zero");
}

static void test_fill_on_leaf_requiring_grad_fails(void **state)
{
    (void)state;
    pt_tensor *x = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_requires_grad_(x, true);
    assert_pt_status_error(pt_fill_(x, 1.0), PT_ERR_INVALID_ARG, "in-place operation");
    assert_pt_status_error(pt_zero_(x), PT_ERR_INVALID_ARG, "leaf");
    /* allowed under no_grad, as torch.no_grad() */
    pt_no_grad_begin();
    assert_int_equal(pt_fill_(x, 2.0), PT_OK);
    pt_no_grad_end();
    assert_true(pt_item(pt_sum(x)) == 6.0);
}

static void test_low_precision_linear_3d_rounds_once(void **state)
{
    (void)state;
    const char *names[] = {"f16", "bf16"};
    char kx[64], kw[64], kb[64], ko[64];
    for (int i = 0; i < 2; i++) {
        snprintf(kx, sizeof kx, "linear3d.%s.x", names[i]);
        snprintf(kw, sizeof kw, "linear3d.%s.w", names[i]);
        snprintf(kb, sizeof kb, "linear3d.%s.b", names[i]);
        snprintf(ko, sizeof ko, "linear3d.%s.out", names[i]);
        assert_tensor_equal(pt_linear(fx_get(fx, kx), fx_get(fx, kw), fx_get(fx, kb)),
                            fx_get(fx, ko));
    }
}

static void test_avg_pool2d_negative_divisor(void **state)
{
    (void)state;
    pt_tensor *x = pt_clone(fx_get(fx, "avgpool_neg.in"));
    pt_requires_grad_(x, true);
    pt_avg_pool2d_opts o = {.divisor_override = -2};
    pt_tensor *y = pt_avg_pool2d_ex(x, (int64_t[]){2, 2}, &o);
    assert_non_null(y);
    assert_tensor_equal(y, fx_get(fx, "avgpool_neg.out"));
    pt_tensor *g = pt_from_data((float[]){1, 2, 3, 4}, PT_SHAPE(1, 1, 2, 2), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_backward(y, g, false, false), PT_OK);
    assert_tensor_equal(pt_grad(x), fx_get(fx, "avgpool_neg.grad"));
}

/* matmul / linear with inner size 0: the product is zeros, the operands get empty gradients */
static void test_matmul_linear_inner_zero_backward(void **state)
{
    (void)state;
    pt_tensor *a = pt_zeros(PT_SHAPE(2, 3, 0), PT_FLOAT32, pt_cpu());
    pt_tensor *b = pt_zeros(PT_SHAPE(2, 0, 4), PT_FLOAT32, pt_cpu());
    pt_requires_grad_(a, true);
    pt_requires_grad_(b, true);
    pt_tensor *p = pt_matmul(a, b);
    assert_non_null(p);
    assert_shape(p, 2, 3, 4);
    assert_int_equal(pt_backward(pt_sum(p), NULL, false, false), PT_OK);
    assert_shape(pt_grad(a), 2, 3, 0);
    assert_shape(pt_grad(b), 2, 0, 4);

    pt_tensor *x = pt_zeros(PT_SHAPE(2, 3, 0), PT_FLOAT32, pt_cpu());
    pt_tensor *w = pt_zeros(PT_SHAPE(4, 0), PT_FLOAT32, pt_cpu());
    pt_tensor *bias = pt_ones(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    pt_requires_grad_(x, true);
    pt_requires_grad_(w, true);
    pt_requires_grad_(bias, true);
    pt_tensor *y = pt_linear(x, w, bias);
    assert_non_null(y);
    assert_tensor_equal(y, fx_get(fx, "linear_k0.out"));
    assert_int_equal(pt_backward(pt_sum(y), NULL, false, false), PT_OK);
    assert_shape(pt_grad(x), 2, 3, 0);
    assert_shape(pt_grad(w), 4, 0);
    assert_tensor_equal(pt_grad(bias), fx_get(fx, "linear_k0.b_grad"));
}

/* masked_select of a 0-dim input with a 0-dim mask: [x] or [], backward 1 or 0 (PyTorch) */
static void test_masked_select_0dim_backward(void **state)
{
    (void)state;
    for (int on = 0; on < 2; on++) {
        pt_tensor *x = pt_scalar_tensor(3.0, PT_FLOAT32, pt_cpu());
        pt_tensor *m = pt_scalar_tensor(on, PT_BOOL, pt_cpu());
        pt_requires_grad_(x, true);
        pt_tensor *r = pt_masked_select(x, m);
        assert_non_null(r);
        assert_shape(r, (int64_t)on);
        assert_int_equal(pt_backward(pt_sum(r), NULL, false, false), PT_OK);
        assert_non_null(pt_grad(x));
        assert_int_equal(pt_ndim(pt_grad(x)), 0);
        assert_true(pt_item(pt_grad(x)) == (double)on);
    }
}

/* batch_norm on [0, C] and [0, C, H, W], training and eval: an empty output, empty input
 * gradient, zero weight/bias gradients and untouched running stats (PyTorch) */
static void test_batch_norm_empty_input(void **state)
{
    (void)state;
    for (int four = 0; four < 2; four++)
        for (int training = 0; training < 2; training++) {
            pt_tensor *x = four ? pt_zeros(PT_SHAPE(0, 3, 2, 2), PT_FLOAT32, pt_cpu())
                                : pt_zeros(PT_SHAPE(0, 3), PT_FLOAT32, pt_cpu());
            pt_tensor *w = pt_ones(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
            pt_tensor *b = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
            pt_tensor *rm = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
            pt_tensor *rv = pt_ones(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
            pt_requires_grad_(x, true);
            pt_requires_grad_(w, true);
            pt_requires_grad_(b, true);
            pt_tensor *y = pt_batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
            assert_non_null(y);
            assert_int_equal(pt_numel(y), 0);
            assert_int_equal(pt_backward(pt_sum(y), NULL, false, false), PT_OK);
            assert_int_equal(pt_numel(pt_grad(x)), 0);
            assert_true(pt_item(pt_sum(pt_abs(pt_grad(w)))) == 0.0);
            assert_true(pt_item(pt_sum(pt_abs(pt_grad(b)))) == 0.0);
            assert_true(pt_item(pt_sum(rm)) == 0.0);
            assert_true(pt_item(pt_sum(rv)) == 3.0);
        }
}

int main(void)
{
    fx = fx_open("ops_hardening");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_integer_arange_truncates_bounds, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_linspace_single_step_and_integer_bounds, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_softshrink_keeps_nan, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_fill_zero_rebase_history, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_fill_on_leaf_requiring_grad_fails, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_low_precision_linear_3d_rounds_once, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_avg_pool2d_negative_divisor, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_linear_inner_zero_backward, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_masked_select_0dim_backward, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_empty_input, pt_test_setup,
                                        pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
