/* Loss family tests: every loss with every reduction against PyTorch fixtures
 * (tests/fixtures/gen/loss.py) -- class weights, ignore_index, label smoothing, probability
 * targets, K-dim cross entropy, broadcasting, float64, non-contiguous inputs -- and the error
 * paths (shapes, out-of-range targets, bad options, NULL). */
#include "testutil.h"

#include <math.h>
#include <string.h>

static pt_fixture *fx;

#define F32_RTOL 1e-5
#define F32_ATOL 1e-6
#define F64_RTOL 1e-12
#define F64_ATOL 1e-12

static const char *const red_names[3] = {"mean", "sum", "none"};
static const pt_reduction reds[3] = {PT_REDUCTION_MEAN, PT_REDUCTION_SUM, PT_REDUCTION_NONE};

static pt_tensor *get(const char *name)
{
    return fx_get(fx, name);
}

static pt_tensor *get_red(const char *prefix, int r)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", prefix, red_names[r]);
    return fx_get(fx, key);
}

/* ---- cross_entropy and nll_loss -----------------------------------------------------------------
 */

/* cross_entropy with opts (reduction replaced) for every reduction against <prefix>.<red>. */
static void check_ce(const char *prefix, const pt_tensor *x, const pt_tensor *t,
                     pt_cross_entropy_opts o, double rtol, double atol)
{
    for (int r = 0; r < 3; r++) {
        o.reduction = reds[r];
        assert_tensor_close(pt_cross_entropy_ex(x, t, &o), get_red(prefix, r), rtol, atol);
    }
}

static void test_cross_entropy_class_indices(void **state)
{
    (void)state;
    pt_tensor *x = get("ce.x"), *t = get("ce.t"), *w = get("ce.w");
    assert_tensor_close(pt_cross_entropy(x, t), get("ce.plain.mean"), F32_RTOL, F32_ATOL);
    check_ce("ce.plain", x, t, (pt_cross_entropy_opts){0}, F32_RTOL, F32_ATOL);
    check_ce("ce.w", x, t, (pt_cross_entropy_opts){.weight = w}, F32_RTOL, F32_ATOL);
    check_ce("ce.ls", x, t, (pt_cross_entropy_opts){.label_smoothing = 0.1}, F32_RTOL, F32_ATOL);
    check_ce("ce.wls", x, t, (pt_cross_entropy_opts){.weight = w, .label_smoothing = 0.2}, F32_RTOL,
             F32_ATOL);
    check_ce("ce.ig3", x, get("ce.t3"),
             (pt_cross_entropy_opts){.weight = w, .has_ignore_index = true, .ignore_index = 3},
             F32_RTOL, F32_ATOL);
    /* every target ignored: mean is 0/0 = NaN, as PyTorch */
    pt_tensor *ign = pt_full(PT_SHAPE(6), -100, PT_INT64, pt_cpu());
    assert_tensor_close(pt_cross_entropy(x, ign), get("ce.all_ignored"), 0, 0);
    /* non-contiguous logits, int32 targets */
    check_ce("ce.w", pt_test_noncontig(x), pt_to_dtype(t, PT_INT32),
             (pt_cross_entropy_opts){.weight = pt_test_noncontig(w)}, F32_RTOL, F32_ATOL);
    /* K-dim: [N, C, d1, d2] logits, [N, d1, d2] targets */
    check_ce("ce.k", get("ce.kx"), get("ce.kt"),
             (pt_cross_entropy_opts){.weight = w, .label_smoothing = 0.05}, F32_RTOL, F32_ATOL);
    check_ce("ce.k", pt_test_noncontig(get("ce.kx")), pt_test_noncontig(get("ce.kt")),
             (pt_cross_entropy_opts){.weight = w, .label_smoothing = 0.05}, F32_RTOL, F32_ATOL);
    /* unbatched [C] logits with a 0-dim target */
    pt_tensor *t0 = pt_scalar_tensor(2, PT_INT64, pt_cpu());
    assert_tensor_close(pt_cross_entropy(get("ce.u.x"), t0), get("ce.u.out"), F32_RTOL, F32_ATOL);
    pt_tensor *u = pt_cross_entropy_ex(get("ce.u.x"), t0,
                                       &(pt_cross_entropy_opts){.reduction = PT_REDUCTION_NONE});
    assert_int_equal(pt_ndim(u), 0);
    /* a row of 37 classes (vector path plus tail) and float64 */
    assert_tensor_close(
        pt_cross_entropy_ex(get("ce.wide.x"), get("ce.wide.t"),
                            &(pt_cross_entropy_opts){.reduction = PT_REDUCTION_NONE}),
        get("ce.wide.none"), F32_RTOL, F32_ATOL);
    check_ce("ce.f64", get("ce.f64.x"), get("ce.f64.t"),
             (pt_cross_entropy_opts){.label_smoothing = 0.1}, F64_RTOL, F64_ATOL);
}

/* A NaN logit makes its sample's loss NaN on both the vector and the scalar path; float16
 * logits are computed in float32 and the result rounded back to float16. */
static void test_cross_entropy_nan_and_half(void **state)
{
    (void)state;
    float logits[2 * 20];
    for (int i = 0; i < 40; i++)
        logits[i] = (float)(i % 7) * 0.5f;
    logits[13] = NAN;
    pt_tensor *x = pt_from_data(logits, PT_SHAPE(2, 20), PT_FLOAT32, pt_cpu());
    pt_tensor *t = pt_zeros(PT_SHAPE(2), PT_INT64, pt_cpu());
    pt_tensor *l =
        pt_cross_entropy_ex(x, t, &(pt_cross_entropy_opts){.reduction = PT_REDUCTION_NONE});
    assert_non_null(l);
    assert_true(isnan(pt_test_get(l, 0)));
    assert_false(isnan(pt_test_get(l, 1)));
    pt_tensor *h = pt_cross_entropy(pt_to_dtype(get("ce.x"), PT_FLOAT16), get("ce.t"));
    assert_int_equal(pt_dtype_of(h), PT_FLOAT16);
    /* float16 logits lose ~3 decimal digits before the loss is computed */
    assert_tensor_close_any_dtype(h, get("ce.plain.mean"), 1e-2, 1e-2);
}

/* Empty batches: mean is 0/0 = NaN, sum is 0, as PyTorch. */
static void test_cross_entropy_empty(void **state)
{
    (void)state;
    pt_tensor *x = pt_zeros(PT_SHAPE(0, 4), PT_FLOAT32, pt_cpu());
    pt_tensor *t = pt_zeros(PT_SHAPE(0), PT_INT64, pt_cpu());
    assert_true(isnan(pt_item(pt_cross_entropy(x, t))));
    assert_true(isnan(pt_item(pt_cross_entropy(x, x))));
    pt_tensor *s =
        pt_cross_entropy_ex(x, t, &(pt_cross_entropy_opts){.reduction = PT_REDUCTION_SUM});
    assert_true(pt_item(s) == 0.0);
    pt_tensor *n = pt_nll_loss_ex(x, t, &(pt_nll_loss_opts){.reduction = PT_REDUCTION_NONE});
    assert_shape(n, 0);
}

static void test_cross_entropy_probability_targets(void **state)
{
    (void)state;
    pt_tensor *x = get("ce.x"), *w = get("ce.w");
    check_ce("ce.p", x, get("ce.tp"), (pt_cross_entropy_opts){0}, F32_RTOL, F32_ATOL);
    check_ce("ce.pwls", x, get("ce.tp"),
             (pt_cross_entropy_opts){.weight = w, .label_smoothing = 0.1}, F32_RTOL, F32_ATOL);
    check_ce("ce.kp", get("ce.kx"), get("ce.ktp"), (pt_cross_entropy_opts){0}, F32_RTOL, F32_ATOL);
    check_ce("ce.kp", pt_test_noncontig(get("ce.kx")), pt_test_noncontig(get("ce.ktp")),
             (pt_cross_entropy_opts){0}, F32_RTOL, F32_ATOL);
}

static void test_cross_entropy_errors(void **state)
{
    (void)state;
    pt_tensor *x = get("ce.x");
    const int64_t bad[6] = {0, 1, 7, 2, 1, 0};
    pt_tensor *tb = pt_from_data(bad, PT_SHAPE(6), PT_INT64, pt_cpu());
    assert_pt_error(pt_cross_entropy(x, tb), PT_ERR_INDEX, "target 7 is out of bounds");
    const int64_t neg[6] = {0, -3, 1, 2, 1, 0};
    pt_tensor *tn = pt_from_data(neg, PT_SHAPE(6), PT_INT64, pt_cpu());
    assert_pt_error(pt_nll_loss(x, tn), PT_ERR_INDEX, "target -3 is out of bounds");
    /* -100 is only ignored by default: with another ignore_index it is out of range */
    assert_pt_error(
        pt_cross_entropy_ex(x, get("ce.t"), &(pt_cross_entropy_opts){.has_ignore_index = true}),
        PT_ERR_INDEX, "target -100");
    pt_tensor *t5 = pt_zeros(PT_SHAPE(5), PT_INT64, pt_cpu());
    assert_pt_error(pt_cross_entropy(x, t5), PT_ERR_SHAPE,
                    "target [5] does not match input [6, 4]");
    assert_pt_error(pt_cross_entropy(x, pt_zeros(PT_SHAPE(6, 3), PT_FLOAT32, pt_cpu())),
                    PT_ERR_SHAPE, "must have the input's shape [6, 4]");
    assert_pt_error(
        pt_cross_entropy_ex(x, get("ce.t"), &(pt_cross_entropy_opts){.weight = get("bce.w")}),
        PT_ERR_SHAPE, "weight must have shape [4]");
    assert_pt_error(
        pt_cross_entropy_ex(x, get("ce.t"), &(pt_cross_entropy_opts){.label_smoothing = 1.5}),
        PT_ERR_INVALID_ARG, "label_smoothing");
    assert_pt_error(
        pt_cross_entropy_ex(x, get("ce.t"),
                            &(pt_cross_entropy_opts){.reduction = PT_REDUCTION_BATCHMEAN}),
        PT_ERR_INVALID_ARG, "invalid reduction");
    assert_pt_error(pt_cross_entropy(x, pt_zeros(PT_SHAPE(6), PT_BOOL, pt_cpu())), PT_ERR_DTYPE,
                    "class indices");
    assert_pt_error(pt_nll_loss(x, pt_zeros(PT_SHAPE(6, 4), PT_FLOAT32, pt_cpu())), PT_ERR_DTYPE,
                    "int64 class indices");
    assert_pt_error(pt_cross_entropy(NULL, get("ce.t")), PT_ERR_NULL, "pt_cross_entropy");
    assert_pt_error(pt_cross_entropy(x, NULL), PT_ERR_NULL, "target");
}

static void check_nll(const char *prefix, const pt_tensor *x, const pt_tensor *t,
                      pt_nll_loss_opts o)
{
    for (int r = 0; r < 3; r++) {
        o.reduction = reds[r];
        assert_tensor_close(pt_nll_loss_ex(x, t, &o), get_red(prefix, r), F32_RTOL, F32_ATOL);
    }
}

static void test_nll_loss(void **state)
{
    (void)state;
    pt_tensor *x = get("nll.x"), *t = get("nll.t"), *w = get("nll.w");
    assert_tensor_close(pt_nll_loss(x, t), get("nll.plain.mean"), F32_RTOL, F32_ATOL);
    check_nll("nll.plain", x, t, (pt_nll_loss_opts){0});
    check_nll("nll.w", x, t, (pt_nll_loss_opts){.weight = w});
    check_nll("nll.ig0", pt_test_noncontig(x), get("nll.t0"),
              (pt_nll_loss_opts){.weight = w, .has_ignore_index = true, .ignore_index = 0});
    check_nll("nll.k", get("nll.kx"), get("nll.kt"), (pt_nll_loss_opts){0});
}

/* ---- regression losses
 * ---------------------------------------------------------------------------- */

static void test_regression_losses(void **state)
{
    (void)state;
    pt_tensor *x = get("reg.x"), *t = get("reg.t");
    pt_tensor *xn = pt_test_noncontig(x);
    for (int r = 0; r < 3; r++) {
        assert_tensor_close(pt_mse_loss(x, t, reds[r]), get_red("mse", r), F32_RTOL, F32_ATOL);
        assert_tensor_close(pt_mse_loss(xn, t, reds[r]), get_red("mse", r), F32_RTOL, F32_ATOL);
        assert_tensor_close(pt_l1_loss(x, t, reds[r]), get_red("l1", r), F32_RTOL, F32_ATOL);
        assert_tensor_close(pt_smooth_l1_loss(x, t, reds[r], 1.0), get_red("sl1.1", r), F32_RTOL,
                            F32_ATOL);
        assert_tensor_close(pt_smooth_l1_loss(xn, t, reds[r], 0.5), get_red("sl1.05", r), F32_RTOL,
                            F32_ATOL);
        assert_tensor_close(pt_smooth_l1_loss(x, t, reds[r], 0.0), get_red("sl1.0", r), F32_RTOL,
                            F32_ATOL);
        assert_tensor_close(pt_huber_loss(x, t, reds[r], 1.0), get_red("huber.1", r), F32_RTOL,
                            F32_ATOL);
        assert_tensor_close(pt_huber_loss(x, pt_test_noncontig(t), reds[r], 2.5),
                            get_red("huber.25", r), F32_RTOL, F32_ATOL);
        assert_tensor_close(pt_mse_loss(get("reg.f64.x"), get("reg.f64.t"), reds[r]),
                            get_red("mse.f64", r), F64_RTOL, F64_ATOL);
    }
    /* target broadcast over rows */
    assert_tensor_close(pt_mse_loss(x, get("reg.tb"), PT_REDUCTION_NONE), get("mse.bcast"),
                        F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_huber_loss(get("reg.f64.x"), get("reg.f64.t"), PT_REDUCTION_SUM, 0.7),
                        get("huber.f64.sum"), F64_RTOL, F64_ATOL);
    /* float64 target promotes a float32 input */
    pt_tensor *p = pt_mse_loss(x, pt_to_dtype(t, PT_FLOAT64), PT_REDUCTION_SUM);
    assert_int_equal(pt_dtype_of(p), PT_FLOAT64);
    /* mean over no elements is NaN */
    pt_tensor *e = pt_zeros(PT_SHAPE(0), PT_FLOAT32, pt_cpu());
    assert_tensor_close(pt_mse_loss(e, e, PT_REDUCTION_MEAN), get("mse.empty"), 0, 0);
    assert_true(pt_item(pt_mse_loss(e, e, PT_REDUCTION_SUM)) == 0.0);
    assert_int_equal(pt_numel(pt_mse_loss(e, e, PT_REDUCTION_NONE)), 0);
    /* errors */
    pt_tensor *t3 = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_mse_loss(x, t3, PT_REDUCTION_MEAN), PT_ERR_SHAPE, "pt_mse_loss");
    assert_pt_error(pt_smooth_l1_loss(x, t, PT_REDUCTION_MEAN, -1), PT_ERR_INVALID_ARG,
                    "beta must be non-negative");
    assert_pt_error(pt_huber_loss(x, t, PT_REDUCTION_MEAN, 0), PT_ERR_INVALID_ARG,
                    "delta must be positive");
    assert_pt_error(pt_l1_loss(x, t, (pt_reduction)9), PT_ERR_INVALID_ARG, "invalid reduction");
    assert_pt_error(pt_l1_loss(x, t, PT_REDUCTION_BATCHMEAN), PT_ERR_INVALID_ARG,
                    "invalid reduction");
    assert_pt_error(pt_mse_loss(pt_zeros(PT_SHAPE(3), PT_INT64, pt_cpu()), t3, PT_REDUCTION_MEAN),
                    PT_ERR_DTYPE, "pt_mse_loss");
    assert_pt_error(pt_l1_loss(NULL, t, PT_REDUCTION_MEAN), PT_ERR_NULL, "pt_l1_loss");
}

/* ---- binary and distribution losses
 * ---------------------------------------------------------------- */

static void test_binary_cross_entropy(void **state)
{
    (void)state;
    pt_tensor *x = get("bce.x"), *t = get("bce.t"), *w = get("bce.w");
    pt_tensor *z = get("bcel.z"), *pw = get("bcel.pw");
    for (int r = 0; r < 3; r++) {
        assert_tensor_close(pt_binary_cross_entropy(x, t, NULL, reds[r]), get_red("bce.plain", r),
                            F32_RTOL, F32_ATOL);
        assert_tensor_close(pt_binary_cross_entropy(pt_test_noncontig(x), t, w, reds[r]),
                            get_red("bce.w", r), F32_RTOL, F32_ATOL);
        assert_tensor_close(pt_binary_cross_entropy_with_logits(z, t, NULL, reds[r], NULL),
                            get_red("bcel.plain", r), F32_RTOL, F32_ATOL);
        assert_tensor_close(
            pt_binary_cross_entropy_with_logits(z, pt_test_noncontig(t), w, reds[r], pw),
            get_red("bcel.wpw", r), F32_RTOL, F32_ATOL);
    }
    assert_tensor_close(pt_binary_cross_entropy_with_logits(get("bcel.f64.z"), get("bcel.f64.t"),
                                                            NULL, PT_REDUCTION_NONE, NULL),
                        get("bcel.f64.none"), F64_RTOL, F64_ATOL);
    /* errors */
    const float out_of_range[2] = {0.5f, 1.5f};
    pt_tensor *xb = pt_from_data(out_of_range, PT_SHAPE(2), PT_FLOAT32, pt_cpu());
    pt_tensor *t2 = pt_zeros(PT_SHAPE(2), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_binary_cross_entropy(xb, t2, NULL, PT_REDUCTION_MEAN), PT_ERR_INVALID_ARG,
                    "between 0 and 1");
    assert_pt_error(pt_binary_cross_entropy(x, pt_zeros(PT_SHAPE(5), PT_FLOAT32, pt_cpu()), NULL,
                                            PT_REDUCTION_MEAN),
                    PT_ERR_SHAPE, "target size [5] must be the same as the input size [4, 5]");
    assert_pt_error(pt_binary_cross_entropy_with_logits(
                        z, t, NULL, PT_REDUCTION_MEAN, pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu())),
                    PT_ERR_SHAPE, "pt_binary_cross_entropy_with_logits");
}

static void test_kl_div(void **state)
{
    (void)state;
    pt_tensor *in = get("kl.in"), *t = get("kl.t");
    for (int r = 0; r < 3; r++)
        assert_tensor_close(pt_kl_div(in, t, reds[r], false), get_red("kl", r), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_kl_div(pt_test_noncontig(in), t, PT_REDUCTION_BATCHMEAN, false),
                        get("kl.batchmean"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_kl_div(in, get("kl.lt"), PT_REDUCTION_BATCHMEAN, true),
                        get("kl.logt.batchmean"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_kl_div(in, get("kl.lt"), PT_REDUCTION_NONE, true), get("kl.logt.none"),
                        F32_RTOL, F32_ATOL);
}

/* Reductions sum fixed blocks, so the result is the same whatever the thread count. */
static void test_reduction_independent_of_threads(void **state)
{
    (void)state;
    pt_tensor *x = pt_arange(0, 300000, 1, PT_FLOAT32, pt_cpu());
    pt_tensor *t = pt_arange(0.5, 300000.5, 1, PT_FLOAT32, pt_cpu());
    int nt = pt_get_num_threads();
    pt_set_num_threads(1);
    double a = pt_item(pt_huber_loss(x, t, PT_REDUCTION_SUM, 0.1));
    pt_set_num_threads(3);
    double b = pt_item(pt_huber_loss(x, t, PT_REDUCTION_SUM, 0.1));
    pt_set_num_threads(nt);
    assert_true(a == b);
    assert_true(fabs(a - 300000 * 0.1 * (0.5 - 0.05)) < 1e-2);
}

int main(void)
{
    fx = fx_open("loss");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cross_entropy_class_indices, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cross_entropy_nan_and_half, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cross_entropy_empty, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cross_entropy_probability_targets, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cross_entropy_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_nll_loss, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_regression_losses, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_binary_cross_entropy, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_kl_div, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_reduction_independent_of_threads, pt_test_setup,
                                        pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
