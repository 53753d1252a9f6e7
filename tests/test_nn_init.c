/* nn.init tests: calculate_gain and the fans against torch (fixture tests/fixtures/gen/
 * nn_layers.py), each initializer by its distribution on a large tensor (bounds, mean, std,
 * exact constants, orthogonality), reproducibility under pt_manual_seed, in-place writes into
 * parameters that require grad, and the error paths. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

static pt_fixture *fx;

/* Sample mean/std tolerances: with n = 40000 draws the standard error of the mean is
 * std/200, so 5 standard errors is std/40; the std's relative error is about 1/sqrt(2n). */
#define N_ROWS 200
#define N_COLS 200

static double mean_of(const pt_tensor *t)
{
    return pt_item(pt_mean(t));
}
static double std_of(const pt_tensor *t)
{
    return pt_item(pt_std(t, 0, NULL, 1, false));
}

static pt_tensor *big(void)
{
    return pt_empty(PT_SHAPE(N_ROWS, N_COLS), PT_FLOAT32, pt_cpu());
}

static void assert_near(double got, double want, double tol)
{
    if (fabs(got - want) > tol)
        fail_msg("got %.8g, expected %.8g (tolerance %g)", got, want, tol);
}

static void assert_uniform(const pt_tensor *t, double lo, double hi)
{
    double mx = pt_item(pt_max(t)), mn = pt_item(pt_min(t)), w = hi - lo;
    assert_true(mn >= lo && mx <= hi);
    assert_true(mn < lo + 0.01 * w && mx > hi - 0.01 * w);
    assert_near(mean_of(t), (lo + hi) / 2, w / sqrt(12.0) / 40);
    assert_near(std_of(t), w / sqrt(12.0), 0.02 * w / sqrt(12.0));
}

static void assert_normal(const pt_tensor *t, double mean, double std)
{
    assert_near(mean_of(t), mean, std / 40);
    assert_near(std_of(t), std, 0.02 * std);
}

static void test_gain_and_fans_match_torch(void **state)
{
    (void)state;
    pt_tensor *g = fx_get(fx, "init.gains");
    const char *names[] = {"linear",     "conv2d", "sigmoid",         "tanh", "relu", "leaky_relu",
                           "leaky_relu", "selu",   "conv_transpose2d"};
    double params[] = {0, 0, 0, 0, 0, 0.2, 0.01, 0, 0};
    for (int i = 0; i < 9; i++)
        assert_near(pt_nn_init_calculate_gain(names[i], params[i]), pt_test_get(g, i), 1e-12);
    pt_tensor *fans = fx_get(fx, "init.fans");
    pt_tensor *ts[] = {pt_empty(PT_SHAPE(3, 5), PT_FLOAT32, pt_cpu()),
                       pt_empty(PT_SHAPE(4, 3, 2, 2), PT_FLOAT32, pt_cpu()),
                       pt_empty(PT_SHAPE(6, 2, 5), PT_FLOAT32, pt_cpu()),
                       pt_empty(PT_SHAPE(2, 7, 1, 3, 2), PT_FLOAT32, pt_cpu())};
    for (int i = 0; i < 4; i++) {
        int64_t fi = -1, fo = -1;
        assert_int_equal(pt_nn_init_calculate_fan(ts[i], &fi, &fo), PT_OK);
        assert_int_equal(fi, (int64_t)pt_test_get(fans, 2 * i));
        assert_int_equal(fo, (int64_t)pt_test_get(fans, 2 * i + 1));
    }
}

static void test_uniform_normal_constant(void **state)
{
    (void)state;
    pt_manual_seed(1);
    pt_tensor *t = big();
    assert_int_equal(pt_nn_init_uniform_(t, -0.5, 2.0), PT_OK);
    assert_uniform(t, -0.5, 2.0);
    assert_int_equal(pt_nn_init_normal_(t, 1.5, 0.25), PT_OK);
    assert_normal(t, 1.5, 0.25);
    assert_int_equal(pt_nn_init_constant_(t, 0.75), PT_OK);
    assert_tensor_equal(t, pt_full(PT_SHAPE(N_ROWS, N_COLS), 0.75, PT_FLOAT32, pt_cpu()));
    assert_int_equal(pt_nn_init_zeros_(t), PT_OK);
    assert_tensor_equal(t, pt_zeros(PT_SHAPE(N_ROWS, N_COLS), PT_FLOAT32, pt_cpu()));
    assert_int_equal(pt_nn_init_ones_(t), PT_OK);
    assert_tensor_equal(t, pt_ones(PT_SHAPE(N_ROWS, N_COLS), PT_FLOAT32, pt_cpu()));
    pt_tensor *e = pt_empty(PT_SHAPE(3, 5), PT_FLOAT64, pt_cpu());
    assert_int_equal(pt_nn_init_eye_(e), PT_OK);
    assert_tensor_equal(e, pt_eye(3, 5, PT_FLOAT64, pt_cpu()));
    /* float64 works too */
    pt_tensor *d = pt_empty(PT_SHAPE(N_ROWS, N_COLS), PT_FLOAT64, pt_cpu());
    assert_int_equal(pt_nn_init_uniform_(d, 0, 1), PT_OK);
    assert_uniform(d, 0, 1);
}

static void test_xavier_and_kaiming(void **state)
{
    (void)state;
    pt_manual_seed(2);
    /* [100, 50, 2, 2]: fan_in 200, fan_out 400 */
    pt_tensor *t = pt_empty(PT_SHAPE(100, 50, 2, 2), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_nn_init_xavier_uniform_(t, 2.0), PT_OK);
    double a = 2.0 * sqrt(6.0 / 600.0);
    assert_uniform(t, -a, a);
    assert_int_equal(pt_nn_init_xavier_normal_(t, 1.0), PT_OK);
    assert_normal(t, 0, sqrt(2.0 / 600.0));
    /* default a=0 leaky_relu gain sqrt(2): bound sqrt(6 / fan) */
    assert_int_equal(pt_nn_init_kaiming_uniform_(t, 0, PT_FAN_IN, NULL), PT_OK);
    assert_uniform(t, -sqrt(6.0 / 200.0), sqrt(6.0 / 200.0));
    /* a = sqrt(5), the layers' default: bound 1/sqrt(fan_in) */
    assert_int_equal(pt_nn_init_kaiming_uniform_(t, sqrt(5.0), PT_FAN_IN, "leaky_relu"), PT_OK);
    assert_uniform(t, -1.0 / sqrt(200.0), 1.0 / sqrt(200.0));
    assert_int_equal(pt_nn_init_kaiming_normal_(t, 0, PT_FAN_OUT, "relu"), PT_OK);
    assert_normal(t, 0, sqrt(2.0) / sqrt(400.0));
    assert_int_equal(pt_nn_init_kaiming_normal_(t, 0, PT_FAN_IN, "tanh"), PT_OK);
    assert_normal(t, 0, (5.0 / 3.0) / sqrt(200.0));
    /* a zero-size tensor is left alone (PyTorch warns and returns) */
    pt_tensor *z = pt_empty(PT_SHAPE(0, 4), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_nn_init_kaiming_uniform_(z, 0, PT_FAN_IN, NULL), PT_OK);
}

static void test_trunc_normal(void **state)
{
    (void)state;
    pt_manual_seed(3);
    pt_tensor *t = pt_empty(PT_SHAPE(200000), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_nn_init_trunc_normal_(t, 0.5, 2.0, -1.0, 3.0), PT_OK);
    assert_true(pt_item(pt_min(t)) >= -1.0 && pt_item(pt_max(t)) <= 3.0);
    pt_tensor *mom = fx_get(fx, "init.trunc_moments");
    /* analytic truncated-normal moments; standard error of the mean ~ 1.1/447 */
    assert_near(mean_of(t), pt_test_get(mom, 0), 0.015);
    assert_near(std_of(t), pt_test_get(mom, 1), 0.01);
    /* torch's own sampler agrees with the analytic moments at the same tolerance */
    pt_tensor *tm = fx_get(fx, "init.trunc_torch_moments");
    assert_near(pt_test_get(tm, 0), pt_test_get(mom, 0), 0.015);
}

/* q^T q (cols <= rows) or q q^T (rows < cols) equals gain^2 * I. */
static void assert_orthogonal(const pt_tensor *q2, double gain)
{
    int64_t r = pt_shape(q2)[0], c = pt_shape(q2)[1];
    pt_tensor *qt = pt_t(q2);
    pt_tensor *p = r >= c ? pt_matmul(qt, q2) : pt_matmul(q2, qt);
    int64_t k = r >= c ? c : r;
    pt_tensor *want = pt_mul_scalar(pt_eye(k, k, PT_FLOAT32, pt_cpu()), gain * gain);
    assert_tensor_close(p, want, 0, 1e-5);
}

static void test_orthogonal(void **state)
{
    (void)state;
    pt_manual_seed(4);
    pt_tensor *tall = pt_empty(PT_SHAPE(30, 10), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_nn_init_orthogonal_(tall, 1.0), PT_OK);
    assert_orthogonal(tall, 1.0);
    pt_tensor *wide = pt_empty(PT_SHAPE(8, 20), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_nn_init_orthogonal_(wide, 2.0), PT_OK);
    assert_orthogonal(wide, 2.0);
    pt_tensor *conv = pt_empty(PT_SHAPE(6, 2, 2, 2), PT_FLOAT32, pt_cpu()); /* as [6, 8] */
    assert_int_equal(pt_nn_init_orthogonal_(conv, 1.0), PT_OK);
    assert_orthogonal(pt_reshape(conv, PT_SHAPE(6, 8)), 1.0);
    /* Haar-distributed entries of a 200x200 orthogonal matrix: mean 0, std 1/sqrt(200) */
    pt_tensor *sq = big();
    assert_int_equal(pt_nn_init_orthogonal_(sq, 1.0), PT_OK);
    assert_normal(sq, 0, 1.0 / sqrt(200.0));
}

static void test_reproducible_and_in_place_on_parameters(void **state)
{
    (void)state;
    pt_tensor *a = big(), *b = big();
    pt_manual_seed(99);
    assert_int_equal(pt_nn_init_kaiming_uniform_(a, sqrt(5.0), PT_FAN_IN, NULL), PT_OK);
    assert_int_equal(pt_nn_init_orthogonal_(a, 1.0), PT_OK);
    assert_int_equal(pt_nn_init_trunc_normal_(a, 0, 1, -2, 2), PT_OK);
    pt_manual_seed(99);
    assert_int_equal(pt_nn_init_kaiming_uniform_(b, sqrt(5.0), PT_FAN_IN, NULL), PT_OK);
    assert_int_equal(pt_nn_init_orthogonal_(b, 1.0), PT_OK);
    assert_int_equal(pt_nn_init_trunc_normal_(b, 0, 1, -2, 2), PT_OK);
    assert_tensor_equal(a, b);
    /* a leaf that requires grad is written in place under no-grad and stays a leaf */
    pt_module *lin = pt_nn_linear(8, 4, true);
    pt_tensor *w = pt_nn_param_ref(lin, "weight");
    assert_int_equal(pt_nn_init_xavier_normal_(w, 1.0), PT_OK);
    assert_int_equal(pt_nn_init_zeros_(pt_nn_param_ref(lin, "bias")), PT_OK);
    assert_int_equal(pt_nn_init_orthogonal_(w, 1.0), PT_OK);
    assert_true(pt_requires_grad(w) && pt_is_leaf(w));
    assert_orthogonal(w, 1.0);
    assert_tensor_equal(pt_nn_param_ref(lin, "bias"), pt_zeros(PT_SHAPE(4), PT_FLOAT32, pt_cpu()));
    pt_nn_free(lin);
}

static void test_init_errors(void **state)
{
    (void)state;
    pt_tensor *v = pt_empty(PT_SHAPE(5), PT_FLOAT32, pt_cpu());
    pt_tensor *m = big();
    assert_true(isnan(pt_nn_init_calculate_gain("softplus", 0)));
    assert_pt_error(NULL, PT_ERR_INVALID_ARG, "unsupported nonlinearity 'softplus'");
    assert_pt_status_error(pt_nn_init_calculate_fan(v, NULL, NULL), PT_ERR_SHAPE,
                           "fewer than 2 dimensions");
    assert_pt_status_error(pt_nn_init_xavier_uniform_(v, 1.0), PT_ERR_SHAPE, "fewer than 2");
    assert_pt_status_error(pt_nn_init_kaiming_normal_(m, 0, PT_FAN_IN, "softplus"),
                           PT_ERR_INVALID_ARG, "softplus");
    assert_pt_status_error(pt_nn_init_uniform_(m, 1.0, 0.0), PT_ERR_INVALID_ARG, "a <= b");
    assert_pt_status_error(pt_nn_init_normal_(m, 0, -1), PT_ERR_INVALID_ARG, "std");
    assert_pt_status_error(pt_nn_init_trunc_normal_(m, 0, 1, 2, -2), PT_ERR_INVALID_ARG, "a < b");
    assert_pt_status_error(pt_nn_init_orthogonal_(v, 1.0), PT_ERR_SHAPE, "2 or more");
    assert_pt_status_error(pt_nn_init_eye_(v), PT_ERR_SHAPE, "2-D");
    pt_tensor *i = pt_zeros(PT_SHAPE(3, 3), PT_INT64, pt_cpu());
    assert_pt_status_error(pt_nn_init_normal_(i, 0, 1), PT_ERR_DTYPE, "floating");
    assert_pt_status_error(pt_nn_init_uniform_(NULL, 0, 1), PT_ERR_NULL, "");
}

int main(void)
{
    fx = fx_open("nn_layers");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gain_and_fans_match_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_uniform_normal_constant, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_xavier_and_kaiming, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_trunc_normal, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_orthogonal, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_reproducible_and_in_place_on_parameters, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_init_errors, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
