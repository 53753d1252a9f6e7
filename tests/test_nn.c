/* nn family tests: batch/layer/group/RMS norm and scaled dot-product attention against PyTorch
 * fixtures (tests/fixtures/gen/nn.py), dropout by its statistical and reproducibility
 * properties, and the error paths. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static pt_fixture *fx;

#define F32_RTOL 1e-5
#define F32_ATOL 1e-6
#define F64_RTOL 1e-12
#define F64_ATOL 1e-12

static pt_tensor *get(const char *name)
{
    return fx_get(fx, name);
}

static pt_tensor *getf(const char *fmt, const char *a, const char *b)
{
    char key[128];
    snprintf(key, sizeof key, fmt, a, b);
    return fx_get(fx, key);
}

/* ---- batch_norm --------------------------------------------------------------------------------
 */

static void test_batch_norm_matches_torch(void **state)
{
    (void)state;
    const char *names[] = {"2d", "3d", "4d"};
    for (int i = 0; i < 3; i++) {
        const char *n = names[i];
        pt_tensor *x = getf("bn.%s.%s", n, "x"), *w = getf("bn.%s.%s", n, "w");
        pt_tensor *b = getf("bn.%s.%s", n, "b");
        pt_tensor *rm = getf("bn.%s.%s", n, "rm"), *rv = getf("bn.%s.%s", n, "rv");
        pt_tensor *y = pt_batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
        assert_tensor_close(y, getf("bn.%s.%s", n, "train"), F32_RTOL, F32_ATOL);
        assert_tensor_close(rm, getf("bn.%s.%s", n, "train_rm"), F32_RTOL, F32_ATOL);
        assert_tensor_close(rv, getf("bn.%s.%s", n, "train_rv"), F32_RTOL, F32_ATOL);
        /* eval uses the original running stats */
        pt_tensor *rm0 = getf("bn.%s.%s", n, "rm"), *rv0 = getf("bn.%s.%s", n, "rv");
        assert_tensor_close(pt_batch_norm(x, rm0, rv0, w, b, false, 0.1, 1e-5),
                            getf("bn.%s.%s", n, "eval"), F32_RTOL, F32_ATOL);
        assert_tensor_close(pt_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-3),
                            getf("bn.%s.%s", n, "train_plain"), F32_RTOL, F32_ATOL);
        /* non-contiguous input and running stats */
        pt_tensor *rm_nc = pt_test_noncontig(rm0), *rv_nc = pt_test_noncontig(rv0);
        assert_tensor_close(
            pt_batch_norm(pt_test_noncontig(x), rm_nc, rv_nc, w, b, true, 0.1, 1e-5),
            getf("bn.%s.%s", n, "train"), F32_RTOL, F32_ATOL);
        assert_tensor_close(pt_contiguous(rm_nc), getf("bn.%s.%s", n, "train_rm"), F32_RTOL,
                            F32_ATOL);
        assert_tensor_close(pt_contiguous(rv_nc), getf("bn.%s.%s", n, "train_rv"), F32_RTOL,
                            F32_ATOL);
    }
}

static void test_batch_norm_float64(void **state)
{
    (void)state;
    pt_tensor *rm = pt_zeros(PT_SHAPE(2), PT_FLOAT64, pt_cpu());
    pt_tensor *rv = pt_ones(PT_SHAPE(2), PT_FLOAT64, pt_cpu());
    pt_tensor *y =
        pt_batch_norm(get("bn.f64.x"), rm, rv, get("bn.f64.w"), get("bn.f64.b"), true, 0.3, 1e-5);
    assert_tensor_close(y, get("bn.f64.train"), F64_RTOL, F64_ATOL);
    assert_tensor_close(rm, get("bn.f64.train_rm"), F64_RTOL, F64_ATOL);
    assert_tensor_close(rv, get("bn.f64.train_rv"), F64_RTOL, F64_ATOL);
}

static void test_batch_norm_errors(void **state)
{
    (void)state;
    pt_tensor *x = pt_ones(PT_SHAPE(4, 3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5), PT_ERR_INVALID_ARG,
                    "running_mean and running_var are required");
    pt_tensor *one = pt_ones(PT_SHAPE(1, 3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_batch_norm(one, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), PT_ERR_INVALID_ARG,
                    "more than 1 value per channel");
    pt_tensor *w4 = pt_ones(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_batch_norm(x, NULL, NULL, w4, NULL, true, 0.1, 1e-5), PT_ERR_SHAPE,
                    "weight must have shape [3]");
    assert_pt_error(pt_batch_norm(pt_ones(PT_SHAPE(3), PT_FLOAT32, pt_cpu()), NULL, NULL, NULL,
                                  NULL, true, 0.1, 1e-5),
                    PT_ERR_SHAPE, "at least 2 dims");
    assert_pt_error(pt_batch_norm(pt_ones(PT_SHAPE(4, 3), PT_INT64, pt_cpu()), NULL, NULL, NULL,
                                  NULL, true, 0.1, 1e-5),
                    PT_ERR_DTYPE, "pt_batch_norm");
    assert_pt_error(pt_batch_norm(NULL, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), PT_ERR_NULL,
                    "pt_batch_norm");
}

/* ---- layer_norm, group_norm, rms_norm ----------------------------------------------------------
 */

static void test_layer_norm_matches_torch(void **state)
{
    (void)state;
    pt_tensor *x = get("ln.x");
    assert_tensor_close(pt_layer_norm(x, PT_DIMS(8), get("ln.w8"), get("ln.b8"), 1e-5),
                        get("ln.out8"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_layer_norm(x, PT_DIMS(6, 8), get("ln.w68"), get("ln.b68"), 1e-5),
                        get("ln.out68"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_layer_norm(x, PT_DIMS(8), NULL, NULL, 1e-3), get("ln.plain"), F32_RTOL,
                        F32_ATOL);
    assert_tensor_close(pt_layer_norm(pt_test_noncontig(x), PT_DIMS(8),
                                      pt_test_noncontig(get("ln.w8")), get("ln.b8"), 1e-5),
                        get("ln.out8"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_layer_norm(get("ln.f64.x"), PT_DIMS(5), get("ln.f64.w"), NULL, 1e-5),
                        get("ln.f64.out"), F64_RTOL, F64_ATOL);
    assert_tensor_close(pt_layer_norm(get("ln.long.x"), PT_DIMS(1000), NULL, NULL, 1e-5),
                        get("ln.long.out"), F32_RTOL, F32_ATOL);
    /* one-pass moments over 101K points with varied scales and offsets (float64 reference) */
    int64_t acc_cols = 395;
    assert_tensor_close(pt_layer_norm(get("ln.acc.x"), 1, &acc_cols, NULL, NULL, 1e-5),
                        get("ln.acc.out"), F32_RTOL, F32_ATOL);
    /* float16 input: computed in float32, result rounded back to float16 */
    pt_tensor *h = pt_layer_norm(pt_to_dtype(x, PT_FLOAT16), PT_DIMS(8), NULL, NULL, 1e-3);
    assert_int_equal(pt_dtype_of(h), PT_FLOAT16);
    assert_tensor_close_any_dtype(h, get("ln.plain"), 1e-2, 1e-2);
    /* errors */
    assert_pt_error(pt_layer_norm(x, PT_DIMS(7), NULL, NULL, 1e-5), PT_ERR_SHAPE,
                    "does not end with normalized_shape [7]");
    assert_pt_error(pt_layer_norm(x, PT_DIMS(8), get("ln.w68"), NULL, 1e-5), PT_ERR_SHAPE,
                    "weight must have normalized_shape [8]");
    assert_pt_error(pt_layer_norm(x, 0, NULL, NULL, NULL, 1e-5), PT_ERR_SHAPE, "1..3 dims");
    assert_pt_error(pt_layer_norm(NULL, PT_DIMS(8), NULL, NULL, 1e-5), PT_ERR_NULL,
                    "pt_layer_norm");
}

static void test_group_norm_matches_torch(void **state)
{
    (void)state;
    pt_tensor *x = get("gn.x"), *w = get("gn.w"), *b = get("gn.b");
    assert_tensor_close(pt_group_norm(x, 1, w, b, 1e-5), get("gn.g1"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_group_norm(x, 3, w, b, 1e-5), get("gn.g3"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_group_norm(x, 6, w, b, 1e-5), get("gn.g6"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_group_norm(pt_test_noncontig(x), 3, w, b, 1e-5), get("gn.g3"), F32_RTOL,
                        F32_ATOL);
    assert_tensor_close(pt_group_norm(get("gn.x4"), 2, NULL, NULL, 1e-5), get("gn.x4.g2"), F32_RTOL,
                        F32_ATOL);
    assert_tensor_close(pt_group_norm(get("gn.f64.x"), 2, NULL, NULL, 1e-5), get("gn.f64.g2"),
                        F64_RTOL, F64_ATOL);
    assert_pt_error(pt_group_norm(x, 4, NULL, NULL, 1e-5), PT_ERR_INVALID_ARG,
                    "divisible by num_groups (4)");
    assert_pt_error(pt_group_norm(x, 3, get("ln.w8"), NULL, 1e-5), PT_ERR_SHAPE,
                    "weight must have shape [6]");
}

static void test_rms_norm_matches_torch(void **state)
{
    (void)state;
    pt_tensor *x = get("rms.x");
    assert_tensor_close(pt_rms_norm(x, PT_DIMS(8), get("rms.w8"), 1e-6), get("rms.out8"), F32_RTOL,
                        F32_ATOL);
    assert_tensor_close(pt_rms_norm(x, PT_DIMS(6, 8), get("rms.w68"), 1e-5), get("rms.out68"),
                        F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_rms_norm(pt_test_noncontig(x), PT_DIMS(8), get("rms.w8"), 1e-6),
                        get("rms.out8"), F32_RTOL, F32_ATOL);
    /* eps < 0: torch.finfo(float32).eps, which matters for tiny inputs */
    assert_tensor_close(pt_rms_norm(get("rms.small"), PT_DIMS(8), NULL, -1),
                        get("rms.small.default_eps"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_rms_norm(get("rms.f64.x"), PT_DIMS(7), NULL, -1), get("rms.f64.out"),
                        F64_RTOL, F64_ATOL);
    assert_pt_error(pt_rms_norm(x, PT_DIMS(8), get("rms.w68"), 1e-6), PT_ERR_SHAPE,
                    "weight must have normalized_shape");
}

/* Empty batches keep their shape through every norm, as PyTorch. */
static void test_norms_empty(void **state)
{
    (void)state;
    pt_tensor *x = pt_zeros(PT_SHAPE(0, 8), PT_FLOAT32, pt_cpu());
    assert_shape(pt_layer_norm(x, PT_DIMS(8), NULL, NULL, 1e-5), 0, 8);
    assert_shape(pt_rms_norm(x, PT_DIMS(8), NULL, -1), 0, 8);
    assert_shape(
        pt_group_norm(pt_zeros(PT_SHAPE(0, 4, 2), PT_FLOAT32, pt_cpu()), 2, NULL, NULL, 1e-5), 0, 4,
        2);
    pt_tensor *rm = pt_zeros(PT_SHAPE(8), PT_FLOAT32, pt_cpu());
    pt_tensor *rv = pt_ones(PT_SHAPE(8), PT_FLOAT32, pt_cpu());
    assert_shape(pt_batch_norm(x, rm, rv, NULL, NULL, false, 0.1, 1e-5), 0, 8);
}

/* ---- attention ----------------------------------------------------------------------------------
 */

static void test_sdpa_matches_torch(void **state)
{
    (void)state;
    pt_tensor *q = get("sdpa.q"), *k = get("sdpa.k"), *v = get("sdpa.v");
    assert_tensor_close(pt_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0),
                        get("sdpa.plain"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0.5),
                        get("sdpa.scale05"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_scaled_dot_product_attention(q, k, v, get("sdpa.bmask"), 0, false, 0),
                        get("sdpa.bmask.out"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_scaled_dot_product_attention(q, k, v, get("sdpa.fmask"), 0, false, 0),
                        get("sdpa.fmask.out"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_scaled_dot_product_attention(q, k, v, NULL, 0, true, 0),
                        get("sdpa.causal.out"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_scaled_dot_product_attention(q, k, v, get("sdpa.bmask"), 0, true, 0),
                        get("sdpa.causal_bmask.out"), F32_RTOL, F32_ATOL);
    /* non-contiguous q/k/v and mask */
    assert_tensor_close(pt_scaled_dot_product_attention(
                            pt_test_noncontig(q), pt_test_noncontig(k), pt_test_noncontig(v),
                            pt_test_noncontig(get("sdpa.fmask")), 0, false, 0),
                        get("sdpa.fmask.out"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_scaled_dot_product_attention(get("sdpa.q2"), get("sdpa.k2"),
                                                        get("sdpa.v2"), NULL, 0, true, 0),
                        get("sdpa.causal2.out"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_scaled_dot_product_attention(get("sdpa.f64.q"), get("sdpa.f64.k"),
                                                        get("sdpa.f64.v"), NULL, 0, true, 0),
                        get("sdpa.f64.out"), F64_RTOL, F64_ATOL);
    assert_tensor_close(pt_scaled_dot_product_attention(get("sdpa.long.q"), get("sdpa.long.k"),
                                                        get("sdpa.long.v"), NULL, 0, false, 0),
                        get("sdpa.long.out"), F32_RTOL, F32_ATOL);
}

static void test_sdpa_masked_rows_dropout_and_errors(void **state)
{
    (void)state;
    pt_tensor *q = get("sdpa.q"), *k = get("sdpa.k"), *v = get("sdpa.v");
    /* a fully masked row is NaN, as PyTorch's math path */
    pt_tensor *none = pt_zeros(PT_SHAPE(5, 7), PT_BOOL, pt_cpu());
    pt_tensor *o = pt_scaled_dot_product_attention(q, k, v, none, 0, false, 0);
    assert_non_null(o);
    assert_true(isnan(pt_test_get(o, 0)));
    /* dropout: same seed -> same result; p = 1 drops everything */
    pt_manual_seed(7);
    pt_tensor *d1 = pt_scaled_dot_product_attention(q, k, v, NULL, 0.4, false, 0);
    pt_manual_seed(7);
    pt_tensor *d2 = pt_scaled_dot_product_attention(q, k, v, NULL, 0.4, false, 0);
    assert_tensor_equal(d1, d2);
    pt_tensor *d0 = pt_scaled_dot_product_attention(q, k, v, NULL, 1.0, false, 0);
    for (int64_t i = 0; i < pt_numel(d0); i++)
        assert_true(pt_test_get(d0, i) == 0.0);
    /* errors */
    assert_pt_error(pt_scaled_dot_product_attention(q, v, v, NULL, 0, false, 0), PT_ERR_SHAPE,
                    "expected q [..., L, E]");
    assert_pt_error(pt_scaled_dot_product_attention(q, k, v, get("sdpa.v"), 0, false, 0),
                    PT_ERR_SHAPE, "does not broadcast to the scores shape [2, 3, 5, 7]");
    assert_pt_error(
        pt_scaled_dot_product_attention(q, pt_to_dtype(k, PT_FLOAT64), v, NULL, 0, false, 0),
        PT_ERR_DTYPE, "one dtype");
    assert_pt_error(pt_scaled_dot_product_attention(q, k, v, NULL, 1.5, false, 0),
                    PT_ERR_INVALID_ARG, "dropout_p");
    assert_pt_error(pt_scaled_dot_product_attention(q, NULL, v, NULL, 0, false, 0), PT_ERR_NULL,
                    "k");
}

/* ---- dropout -----------------------------------------------------------------------------------
 */

static void test_dropout_properties(void **state)
{
    (void)state;
    const int64_t n = 1 << 20;
    const double p = 0.3;
    pt_tensor *x = pt_arange(1, (double)n + 1, 1, PT_FLOAT32, pt_cpu());
    pt_manual_seed(42);
    pt_tensor *mask = NULL;
    pt_tensor *y = pt_dropout_mask(x, p, true, &mask);
    assert_non_null(y);
    assert_non_null(mask);
    assert_int_equal(pt_dtype_of(mask), PT_BOOL);
    const float *xd = pt_data_ptr(x), *yd = pt_data_ptr(y);
    const bool *md = pt_data_ptr(mask);
    const float scale = 1.0f / (float)(1.0 - p);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        if (md[i]) {
            kept++;
            assert_true(yd[i] == xd[i] * scale); /* exactly PyTorch's x * (1/(1-p)) */
        } else {
            assert_true(yd[i] == 0.0f);
        }
    }
    /* binomial std of the kept fraction is sqrt(p(1-p)/n) = 4.5e-4; 0.005 is > 10 sigma */
    double frac = (double)kept / (double)n;
    assert_true(fabs(frac - (1 - p)) < 0.005);
    /* same seed -> same mask with 1 and 3 threads */
    int nt = pt_get_num_threads();
    pt_set_num_threads(1);
    pt_manual_seed(42);
    pt_tensor *y1 = pt_dropout(x, p, true);
    pt_set_num_threads(3);
    pt_manual_seed(42);
    pt_tensor *y3 = pt_dropout(x, p, true);
    pt_set_num_threads(nt);
    assert_tensor_equal(y1, y);
    assert_tensor_equal(y3, y);
    /* a different draw differs */
    pt_tensor *y4 = pt_dropout(x, p, true);
    assert_memory_not_equal(pt_data_ptr(y4), yd, 4096);
}

static void test_dropout_edge_cases(void **state)
{
    (void)state;
    pt_tensor *x = pt_as_strided(pt_arange(-2.5, 27.5, 1, PT_FLOAT64, pt_cpu()), PT_SHAPE(6, 5),
                                 (const int64_t[]){5, 1}, 0);
    /* eval and p == 0: the input itself (alias) and an all-true mask */
    pt_tensor *mask = NULL;
    pt_tensor *e = pt_dropout_mask(x, 0.5, false, &mask);
    assert_true(pt_shares_storage(e, x));
    for (int i = 0; i < 30; i++)
        assert_true(pt_test_get(mask, i) == 1.0);
    assert_true(pt_shares_storage(pt_dropout(x, 0.0, true), x));
    /* p == 1: zeros, an all-false mask */
    pt_tensor *z = pt_dropout_mask(x, 1.0, true, &mask);
    for (int i = 0; i < 30; i++) {
        assert_true(pt_test_get(z, i) == 0.0);
        assert_true(pt_test_get(mask, i) == 0.0);
    }
    /* float64, non-contiguous: kept values are x / (1 - p) */
    pt_tensor *nc = pt_test_noncontig(x);
    pt_tensor *d = pt_dropout_mask(nc, 0.25, true, &mask);
    assert_true(pt_is_contiguous(d));
    for (int i = 0; i < 30; i++)
        assert_true(pt_test_get(d, i) ==
                    (pt_test_get(mask, i) ? pt_test_get(x, i) * (1.0 / 0.75) : 0.0));
    /* float16 keeps its dtype */
    pt_tensor *h = pt_dropout(pt_to_dtype(x, PT_FLOAT16), 0.5, true);
    assert_int_equal(pt_dtype_of(h), PT_FLOAT16);
    assert_pt_error(pt_dropout(x, 1.5, true), PT_ERR_INVALID_ARG, "between 0 and 1");
    assert_pt_error(pt_dropout(x, -0.1, true), PT_ERR_INVALID_ARG, "-0.1");
    assert_pt_error(pt_dropout(NULL, 0.5, true), PT_ERR_NULL, "pt_dropout");
}

/* F.group_norm refuses empty groups, even when N = 0: "Expected number of channels to be greater
 * than 0, got 0" (checked first) and "Expected HxW to be greater than 0, got 0". */
static void test_group_norm_empty_groups(void **state)
{
    (void)state;
    pt_tensor *c0 = pt_zeros(PT_SHAPE(2, 0, 3, 3), PT_FLOAT32, pt_cpu());
    pt_tensor *c0s0 = pt_zeros(PT_SHAPE(0, 0, 0), PT_FLOAT32, pt_cpu());
    pt_tensor *s0 = pt_zeros(PT_SHAPE(2, 4, 0, 3), PT_FLOAT32, pt_cpu());
    pt_tensor *n0s0 = pt_zeros(PT_SHAPE(0, 4, 0), PT_FLOAT32, pt_cpu());
    pt_tensor *n0 = pt_zeros(PT_SHAPE(0, 4, 3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_group_norm(c0, 1, NULL, NULL, 1e-5), PT_ERR_SHAPE,
                    "pt_group_norm: expected the number of channels to be greater than 0");
    assert_pt_error(pt_group_norm(c0s0, 1, NULL, NULL, 1e-5), PT_ERR_SHAPE, "number of channels");
    assert_pt_error(pt_group_norm(s0, 2, NULL, NULL, 1e-5), PT_ERR_SHAPE,
                    "pt_group_norm: expected HxW");
    assert_pt_error(pt_group_norm(n0s0, 2, NULL, NULL, 1e-5), PT_ERR_SHAPE, "HxW");
    pt_tensor *y = pt_group_norm(n0, 2, NULL, NULL, 1e-5); /* N = 0 alone is fine */
    assert_shape(y, 0, 4, 3);
    pt_release(c0);
    pt_release(c0s0);
    pt_release(s0);
    pt_release(n0s0);
    pt_release(n0);
    pt_release(y);
}

int main(void)
{
    fx = fx_open("nn");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_group_norm_empty_groups, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_float64, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_layer_norm_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_group_norm_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_rms_norm_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_norms_empty, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_sdpa_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_sdpa_masked_rows_dropout_and_errors, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dropout_properties, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dropout_edge_cases, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
