/* Elementwise tests: every unary, binary and ternary op against PyTorch fixtures
 * (tests/fixtures/gen/elementwise.py) on float32, float64 and integer inputs, broadcasting,
 * non-contiguous inputs, scalar forms, in-place forms, type promotion and error paths. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static pt_fixture *fx;

#define F32_RTOL 1e-5
#define F32_ATOL 1e-6
#define F64_RTOL 1e-12
#define F64_ATOL 1e-12

typedef pt_tensor *(*unary_fn)(const pt_tensor *);
typedef pt_status (*unary_ip_fn)(pt_tensor *);

static pt_tensor *hardtanh_m2_3(const pt_tensor *t)
{
    return pt_hardtanh(t, -2.0, 3.0);
}
static pt_tensor *leaky_02(const pt_tensor *t)
{
    return pt_leaky_relu(t, 0.2);
}
static pt_tensor *elu_15(const pt_tensor *t)
{
    return pt_elu(t, 1.5);
}
static pt_tensor *gelu_tanh(const pt_tensor *t)
{
    return pt_gelu_ex(t, &(pt_gelu_opts){.approximate = PT_GELU_TANH});
}
static pt_tensor *softplus_2_5(const pt_tensor *t)
{
    return pt_softplus(t, 2.0, 5.0);
}
static pt_status hardtanh_m2_3_(pt_tensor *t)
{
    return pt_hardtanh_(t, -2.0, 3.0);
}
static pt_status leaky_02_(pt_tensor *t)
{
    return pt_leaky_relu_(t, 0.2);
}
static pt_status elu_15_(pt_tensor *t)
{
    return pt_elu_(t, 1.5);
}
static pt_status gelu_(pt_tensor *t)
{
    return pt_gelu_(t, NULL);
}
static pt_status gelu_tanh_(pt_tensor *t)
{
    return pt_gelu_(t, &(pt_gelu_opts){.approximate = PT_GELU_TANH});
}
static pt_status softplus_2_5_(pt_tensor *t)
{
    return pt_softplus_(t, 2.0, 5.0);
}

typedef struct unary_case {
    const char *name;
    unary_fn fn;
    unary_ip_fn ip;
} unary_case;

static const unary_case unary_float[] = {
    {"exp", pt_exp, pt_exp_},       {"expm1", pt_expm1, pt_expm1_},
    {"log", pt_log, pt_log_},       {"log1p", pt_log1p, pt_log1p_},
    {"log2", pt_log2, pt_log2_},    {"sqrt", pt_sqrt, pt_sqrt_},
    {"rsqrt", pt_rsqrt, pt_rsqrt_}, {"sin", pt_sin, pt_sin_},
    {"cos", pt_cos, pt_cos_},       {"tan", pt_tan, pt_tan_},
    {"tanh", pt_tanh, pt_tanh_},    {"sigmoid", pt_sigmoid, pt_sigmoid_},
    {"erf", pt_erf, pt_erf_},       {"reciprocal", pt_reciprocal, pt_reciprocal_},
};
static const unary_case unary_keep[] = {
    {"neg", pt_neg, pt_neg_},
    {"abs", pt_abs, pt_abs_},
    {"sign", pt_sign, pt_sign_},
    {"square", pt_square, pt_square_},
    {"relu", pt_relu, pt_relu_},
    {"relu6", pt_relu6, pt_relu6_},
    {"floor", pt_floor, pt_floor_},
    {"ceil", pt_ceil, pt_ceil_},
    {"round", pt_round, pt_round_},
    {"trunc", pt_trunc, pt_trunc_},
    {"hardtanh", hardtanh_m2_3, hardtanh_m2_3_},
};
static const unary_case unary_float_only[] = {
    {"leaky_relu", leaky_02, leaky_02_},
    {"elu", elu_15, elu_15_},
    {"selu", pt_selu, pt_selu_},
    {"gelu", pt_gelu, gelu_},
    {"gelu_tanh", gelu_tanh, gelu_tanh_},
    {"silu", pt_silu, pt_silu_},
    {"mish", pt_mish, pt_mish_},
    {"softplus", softplus_2_5, softplus_2_5_},
    {"hardsigmoid", pt_hardsigmoid, pt_hardsigmoid_},
    {"hardswish", pt_hardswish, pt_hardswish_},
};
static const unary_case unary_bool[] = {
    {"logical_not", pt_logical_not, NULL},
    {"isnan", pt_isnan, NULL},
    {"isinf", pt_isinf, NULL},
};

#define NCASES(a) (sizeof(a) / sizeof((a)[0]))

static pt_tensor *fxf(const char *fmt, const char *a, const char *b)
{
    char key[96];
    snprintf(key, sizeof key, fmt, a, b);
    return fx_get(fx, key);
}

static void tol_for(pt_dtype dt, double *rtol, double *atol)
{
    *rtol = dt == PT_FLOAT64 ? F64_RTOL : F32_RTOL;
    *atol = dt == PT_FLOAT64 ? F64_ATOL : F32_ATOL;
}

/* Out of place, non-contiguous, and (when the dtype stays) in place. */
static void check_unary(const unary_case *c, const char *dts, bool inplace)
{
    pt_tensor *x = fxf("u.%s%s", dts, "");
    pt_tensor *e = fxf("u.%s.%s", c->name, dts);
    double rtol, atol;
    tol_for(pt_dtype_of(e), &rtol, &atol);
    print_message("  %s.%s\n", c->name, dts);
    assert_tensor_close(c->fn(x), e, rtol, atol);
    pt_tensor *nc = pt_test_noncontig(x);
    assert_false(pt_is_contiguous(nc));
    assert_tensor_close(c->fn(nc), e, rtol, atol);
    if (inplace && c->ip) {
        pt_tensor *y = pt_clone(x);
        assert_int_equal(c->ip(y), PT_OK);
        assert_tensor_close(y, e, rtol, atol);
        pt_tensor *z = pt_test_noncontig(x);
        assert_int_equal(c->ip(z), PT_OK);
        assert_tensor_close(z, e, rtol, atol);
    }
}

static void test_unary_float_math(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(unary_float); i++) {
        check_unary(&unary_float[i], "f32", true);
        check_unary(&unary_float[i], "f64", true);
        check_unary(&unary_float[i], "i64", false); /* int -> float32 */
        /* in place on an integer tensor cannot hold the float result */
        pt_tensor *xi = pt_clone(fx_get(fx, "u.i64"));
        assert_pt_status_error(unary_float[i].ip(xi), PT_ERR_DTYPE, "can't be cast");
    }
}

static void test_unary_keep_dtype(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(unary_keep); i++) {
        check_unary(&unary_keep[i], "f32", true);
        check_unary(&unary_keep[i], "f64", true);
        check_unary(&unary_keep[i], "i64", true);
        check_unary(&unary_keep[i], "i32", true);
    }
}

static void test_unary_activations(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(unary_float_only); i++) {
        check_unary(&unary_float_only[i], "f32", true);
        check_unary(&unary_float_only[i], "f64", true);
        assert_pt_error(unary_float_only[i].fn(fx_get(fx, "u.i64")), PT_ERR_DTYPE, "int64");
    }
}

static void test_unary_bool_results(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(unary_bool); i++) {
        check_unary(&unary_bool[i], "f32", false);
        check_unary(&unary_bool[i], "i64", false);
    }
}

static void test_unary_half_and_large(void **state)
{
    (void)state;
    /* float16 is computed in float32 and rounded back */
    pt_tensor *h = fx_get(fx, "u.f16");
    assert_tensor_close(pt_exp(h), fx_get(fx, "u.exp.f16"), 1e-3, 1e-3);
    assert_tensor_close(pt_sigmoid(h), fx_get(fx, "u.sigmoid.f16"), 1e-3, 1e-3);
    /* large inputs: vector paths over many chunks and threads */
    pt_tensor *x = fx_get(fx, "big.x");
    assert_tensor_close(pt_exp(x), fx_get(fx, "big.exp"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_tanh(x), fx_get(fx, "big.tanh"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_sigmoid(x), fx_get(fx, "big.sigmoid"), F32_RTOL, F32_ATOL);
    pt_tensor *ax = pt_abs(x);
    assert_tensor_close(pt_log(ax), fx_get(fx, "big.log"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_silu(x), fx_get(fx, "big.silu"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_gelu(x), fx_get(fx, "big.gelu"), F32_RTOL, F32_ATOL);
    assert_tensor_close(gelu_tanh(x), fx_get(fx, "big.gelu_tanh"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_add_scalar(x, 1.5), fx_get(fx, "big.add_s"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_mul(x, x), fx_get(fx, "big.mul"), F32_RTOL, F32_ATOL);
    pt_tensor *y = pt_clone(x);
    assert_int_equal(pt_exp_(y), PT_OK);
    assert_tensor_close(y, fx_get(fx, "big.exp"), F32_RTOL, F32_ATOL);
}

/* A view of big.x: shape (ndim, shape) with contiguous strides, starting at element offset. */
static pt_tensor *big_view(int ndim, const int64_t *shape, int64_t offset)
{
    int64_t stride[2] = {ndim == 2 ? shape[1] : 1, 1};
    return pt_as_strided(fx_get(fx, "big.x"), ndim, shape, ndim == 2 ? stride : stride + 1, offset);
}

/* The AVX2 comparison, where and row-broadcast loops on inputs longer than their vector blocks. */
static void test_binary_vector_paths(void **state)
{
    (void)state;
    pt_tensor *a = big_view(PT_SHAPE(4000), 1), *b = big_view(PT_SHAPE(4000), 0);
    pt_tensor *row = big_view(PT_SHAPE(100), 0), *m = big_view(PT_SHAPE(40, 100), 1);
    assert_tensor_equal(pt_gt(a, b), fx_get(fx, "big.gt"));
    assert_tensor_equal(pt_lt_scalar(a, 0.5), fx_get(fx, "big.lt_s"));
    assert_tensor_equal(pt_where(pt_gt(a, b), a, b), fx_get(fx, "big.where"));
    assert_tensor_equal(pt_ge(m, row), fx_get(fx, "big.ge_row"));
    assert_tensor_close(pt_sub(m, row), fx_get(fx, "big.sub_row"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_mul(row, m), fx_get(fx, "big.row_mul"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_div(m, pt_add_scalar(pt_abs(row), 0.5)), fx_get(fx, "big.div_row"),
                        F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_maximum(m, row), fx_get(fx, "big.max_row"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_add_alpha(m, row, 2.5), fx_get(fx, "big.add_row_alpha"), F32_RTOL,
                        F32_ATOL);
    pt_tensor *y = pt_clone(m);
    assert_int_equal(pt_sub_(y, row), PT_OK);
    assert_tensor_close(y, fx_get(fx, "big.sub_row"), F32_RTOL, F32_ATOL);
}

/* x_i = i * (2 lim / (n - 1)) - lim in float64, rounded to float32 (as the fixture generator). */
static pt_tensor *grid(int64_t n, double lim)
{
    pt_tensor *x = pt_empty(1, &n, PT_FLOAT32, pt_cpu());
    float *p = pt_data_ptr(x);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)((double)i * (2 * lim / (double)(n - 1)) - lim);
    return x;
}

/* The vectorized tanh, erf and gelu (rational approximations) against PyTorch on dense grids
 * (100K points for gelu); the scalar path is checked by the PT_DISABLE_AVX2=1 run. */
static void test_unary_accuracy_grid(void **state)
{
    (void)state;
    assert_tensor_close(pt_gelu(grid(100001, 10.0)), fx_get(fx, "grid.gelu"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_tanh(grid(25001, 10.0)), fx_get(fx, "grid.tanh"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_erf(grid(25001, 5.0)), fx_get(fx, "grid.erf"), F32_RTOL, F32_ATOL);
}

/* Inputs far outside the polynomial ranges (where the vector loops clamp before reducing) give
 * the limits every float32 implementation rounds to: sigmoid 0 / 1, silu and gelu -0 / x, tanh
 * +-1, exp 0 (or its subnormal value) / inf / 1, and log of a subnormal its exact value. 40
 * elements, so the vector loops run full vectors and a masked or padded tail. */
static void test_unary_extremes(void **state)
{
    (void)state;
    static const float vals[10] = {-3e38f, -1e30f, -1e5f, -200.0f, -89.5f,
                                   89.5f,  200.0f, 1e5f,  1e30f,   3e38f};
    float buf[40];
    for (int i = 0; i < 40; i++)
        buf[i] = vals[i % 10];
    pt_tensor *x = pt_from_data(buf, 1, (int64_t[]){40}, PT_FLOAT32, pt_cpu());
    pt_tensor *sg = pt_sigmoid(x), *si = pt_silu(x), *ge = pt_gelu(x), *th = pt_tanh(x);
    pt_tensor *ex = pt_exp(x);
    for (int i = 0; i < 40; i++) {
        double v = buf[i];
        bool neg = v < 0;
        assert_true(neg ? fabs(pt_test_get(sg, i)) < 1e-37 : pt_test_get(sg, i) == 1.0);
        assert_true(neg ? fabs(pt_test_get(si, i)) < 1e-30 : pt_test_get(si, i) == v);
        assert_true(neg ? fabs(pt_test_get(ge, i)) < 1e-30 : pt_test_get(ge, i) == v);
        assert_true(pt_test_get(th, i) == (neg ? -1.0 : 1.0));
        /* e^-89.5 = 1.2e-39 is subnormal: within a subnormal step of libm's double value */
        assert_true(neg ? fabs(pt_test_get(ex, i) - exp(v)) <= 1.5e-45 : isinf(pt_test_get(ex, i)));
    }
    /* subnormals: e^x = 1, log x exact */
    float sub[20];
    for (int i = 0; i < 20; i++)
        sub[i] = (float)(1e-45 * (i + 1)) * (i % 2 ? 1.0f : 1e6f);
    pt_tensor *xs = pt_from_data(sub, 1, (int64_t[]){20}, PT_FLOAT32, pt_cpu());
    pt_tensor *es = pt_exp(xs), *ls = pt_log(xs);
    for (int i = 0; i < 20; i++) {
        assert_true(pt_test_get(es, i) == 1.0);
        assert_true(fabs(pt_test_get(ls, i) - log((double)sub[i])) <
                    1e-5 * fabs(log((double)sub[i])));
    }
}

static void test_unary_errors(void **state)
{
    (void)state;
    pt_tensor *b = fx_get(fx, "b.bool_a");
    assert_pt_error(pt_neg(b), PT_ERR_DTYPE, "bool tensor is not supported");
    assert_pt_error(pt_abs(b), PT_ERR_DTYPE, "pt_abs");
    assert_pt_error(pt_relu(b), PT_ERR_DTYPE, "Boolean inputs");
    assert_pt_error(pt_floor(b), PT_ERR_DTYPE, "pt_floor");
    assert_pt_error(pt_exp(NULL), PT_ERR_NULL, "pt_exp");
    assert_pt_status_error(pt_exp_(NULL), PT_ERR_NULL, "pt_exp_");
    assert_pt_error(pt_gelu_ex(fx_get(fx, "u.f32"), &(pt_gelu_opts){.approximate = 7}),
                    PT_ERR_INVALID_ARG, "approximate");
    /* bool works where PyTorch allows it */
    assert_tensor_equal(pt_sign(b), b);
    pt_tensor *sq = pt_square(b);
    assert_int_equal(pt_dtype_of(sq), PT_INT64);
    pt_tensor *e = pt_exp(b);
    assert_int_equal(pt_dtype_of(e), PT_FLOAT32);
    assert_true(fabs(pt_test_get(e, 0) - M_E) < 1e-6);
    /* infinite bounds on an integer tensor saturate */
    pt_tensor *ht = pt_hardtanh(fx_get(fx, "u.i64"), -INFINITY, 3);
    assert_true(pt_test_get(ht, 0) == -10 && pt_test_get(ht, 20) == 3);
    /* empty tensors */
    pt_tensor *z = pt_empty(PT_SHAPE(0, 3), PT_FLOAT32, pt_cpu());
    pt_tensor *ez = pt_exp(z);
    assert_shape(ez, 0, 3);
    /* 0-dim */
    pt_tensor *s = pt_scalar_tensor(2.0, PT_FLOAT64, pt_cpu());
    assert_true(fabs(pt_item(pt_sqrt(s)) - sqrt(2.0)) < 1e-15);
}

/* ---- binary -----------------------------------------------------------------------------------
 */

typedef pt_tensor *(*binary_fn)(const pt_tensor *, const pt_tensor *);
static pt_tensor *add_alpha3(const pt_tensor *a, const pt_tensor *b)
{
    return pt_add_alpha(a, b, 3);
}
static pt_tensor *sub_alpha2(const pt_tensor *a, const pt_tensor *b)
{
    return pt_sub_alpha(a, b, 2);
}
static pt_tensor *div_trunc(const pt_tensor *a, const pt_tensor *b)
{
    return pt_div_rounding(a, b, PT_ROUND_TRUNC);
}
static pt_tensor *div_floor(const pt_tensor *a, const pt_tensor *b)
{
    return pt_div_rounding(a, b, PT_ROUND_FLOOR);
}

typedef struct binary_case {
    const char *name;
    binary_fn fn;
    bool ints;
} binary_case;

static const binary_case binary_cases[] = {
    {"add", pt_add, true},
    {"add_alpha", add_alpha3, true},
    {"sub", pt_sub, true},
    {"sub_alpha", sub_alpha2, true},
    {"mul", pt_mul, true},
    {"div", pt_div, true},
    {"div_trunc", div_trunc, true},
    {"div_floor", div_floor, true},
    {"pow", pt_pow, true},
    {"remainder", pt_remainder, true},
    {"fmod", pt_fmod, true},
    {"maximum", pt_maximum, true},
    {"minimum", pt_minimum, true},
    {"atan2", pt_atan2, true},
    {"hypot", pt_hypot, false},
    {"eq", pt_eq, true},
    {"ne", pt_ne, true},
    {"lt", pt_lt, true},
    {"le", pt_le, true},
    {"gt", pt_gt, true},
    {"ge", pt_ge, true},
    {"logical_and", pt_logical_and, true},
    {"logical_or", pt_logical_or, true},
    {"logical_xor", pt_logical_xor, true},
};

static void check_binary(const binary_case *c, const char *dts)
{
    pt_tensor *a = fxf("b.a.%s%s", dts, "");
    pt_tensor *b = fxf("b.b.%s%s", dts, "");
    if (strcmp(c->name, "pow") == 0 && dts[0] == 'i')
        b = pt_abs(b);
    pt_tensor *e = fxf("b.%s.%s", c->name, dts);
    double rtol, atol;
    tol_for(pt_dtype_of(e), &rtol, &atol);
    print_message("  %s.%s\n", c->name, dts);
    assert_tensor_close(c->fn(a, b), e, rtol, atol);
    assert_tensor_close(c->fn(pt_test_noncontig(a), pt_test_noncontig(b)), e, rtol, atol);
}

static void test_binary_ops(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES(binary_cases); i++) {
        check_binary(&binary_cases[i], "f32");
        check_binary(&binary_cases[i], "f64");
        if (binary_cases[i].ints) {
            check_binary(&binary_cases[i], "i64");
            check_binary(&binary_cases[i], "i32");
        }
    }
}

static void test_binary_promotion_and_broadcast(void **state)
{
    (void)state;
    pt_tensor *a64 = fx_get(fx, "b.a.f64"), *b64 = fx_get(fx, "b.b.f64");
    pt_tensor *a32 = fx_get(fx, "b.a.f32"), *b32 = fx_get(fx, "b.b.f32");
    pt_tensor *ai = fx_get(fx, "b.a.i64"), *bi = fx_get(fx, "b.b.i64");
    pt_tensor *ai32 = fx_get(fx, "b.a.i32");
    (void)a64;
    assert_tensor_equal(pt_pow(ai, bi), fx_get(fx, "b.pow.ineg"));
    assert_tensor_close(pt_add(ai32, b32), fx_get(fx, "b.add.i32_f32"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_add(ai, b64), fx_get(fx, "b.add.i64_f64"), F64_RTOL, F64_ATOL);
    assert_tensor_close(pt_mul(a32, b64), fx_get(fx, "b.mul.f32_f64"), F64_RTOL, F64_ATOL);
    /* a 0-dim float64 tensor does not raise a float32 tensor, but does raise an int64 one */
    pt_tensor *z = fx_get(fx, "b.zero_f64");
    assert_tensor_close(pt_add(a32, z), fx_get(fx, "b.add.f32_0dim_f64"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_add(ai, z), fx_get(fx, "b.add.i64_0dim_f64"), F64_RTOL, F64_ATOL);
    assert_tensor_equal(pt_add(fx_get(fx, "b.bool_a"), fx_get(fx, "b.bool_b")),
                        fx_get(fx, "b.add.bool"));
    assert_tensor_close(pt_add(fx_get(fx, "b.a.f16"), fx_get(fx, "b.b.f16")),
                        fx_get(fx, "b.add.f16"), 1e-3, 1e-3);
    /* column and outer broadcasts through views */
    pt_tensor *col = pt_as_strided(a32, PT_SHAPE(3, 1), (int64_t[]){4, 1}, 0);
    assert_tensor_close(pt_add(a32, col), fx_get(fx, "b.add.col"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_mul(col, b32), fx_get(fx, "b.mul.outer"), F32_RTOL, F32_ATOL);
    /* special values */
    pt_tensor *sa = fx_get(fx, "s.a"), *sb = fx_get(fx, "s.b");
    assert_tensor_equal(pt_maximum(sa, sb), fx_get(fx, "s.maximum"));
    assert_tensor_equal(pt_minimum(sa, sb), fx_get(fx, "s.minimum"));
    assert_tensor_equal(pt_remainder(sa, sb), fx_get(fx, "s.remainder"));
    assert_tensor_equal(pt_fmod(sa, sb), fx_get(fx, "s.fmod"));
    assert_tensor_equal(pt_div_rounding(sa, sb, PT_ROUND_FLOOR), fx_get(fx, "s.div_floor"));
    assert_tensor_equal(pt_div_rounding(sa, sb, PT_ROUND_TRUNC), fx_get(fx, "s.div_trunc"));
    assert_tensor_equal(pt_div(sa, sb), fx_get(fx, "s.div"));
    assert_tensor_close(pt_atan2(sa, sb), fx_get(fx, "s.atan2"), F32_RTOL, F32_ATOL);
}

typedef pt_tensor *(*scalar_fn)(const pt_tensor *, double);
static pt_tensor *div_floor_s(const pt_tensor *a, double s)
{
    return pt_div_scalar_rounding(a, s, PT_ROUND_FLOOR);
}
static pt_tensor *rpow_s(const pt_tensor *a, double s)
{
    return pt_scalar_pow(s, a);
}

static const struct {
    const char *name;
    scalar_fn fn;
} scalar_cases[] = {
    {"add", pt_add_scalar},   {"sub", pt_sub_scalar}, {"rsub", pt_rsub_scalar},
    {"mul", pt_mul_scalar},   {"div", pt_div_scalar}, {"div_floor", div_floor_s},
    {"pow", pt_pow_scalar},   {"rpow", rpow_s},       {"remainder", pt_remainder_scalar},
    {"fmod", pt_fmod_scalar}, {"eq", pt_eq_scalar},   {"ne", pt_ne_scalar},
    {"lt", pt_lt_scalar},     {"le", pt_le_scalar},   {"gt", pt_gt_scalar},
    {"ge", pt_ge_scalar},
};

static void test_scalar_forms(void **state)
{
    (void)state;
    pt_tensor *a32 = fx_get(fx, "b.a.f32"), *ai = fx_get(fx, "b.a.i64");
    char key[64];
    for (size_t i = 0; i < NCASES(scalar_cases); i++) {
        print_message("  %s\n", scalar_cases[i].name);
        snprintf(key, sizeof key, "sc.%s.f32_2.5", scalar_cases[i].name);
        assert_tensor_close(scalar_cases[i].fn(a32, 2.5), fx_get(fx, key), F32_RTOL, F32_ATOL);
        snprintf(key, sizeof key, "sc.%s.f32_2", scalar_cases[i].name);
        assert_tensor_close(scalar_cases[i].fn(a32, 2), fx_get(fx, key), F32_RTOL, F32_ATOL);
        snprintf(key, sizeof key, "sc.%s.i64_2.5", scalar_cases[i].name);
        assert_tensor_close(scalar_cases[i].fn(ai, 2.5), fx_get(fx, key), F32_RTOL, F32_ATOL);
        snprintf(key, sizeof key, "sc.%s.i64_2", scalar_cases[i].name);
        assert_tensor_close(scalar_cases[i].fn(ai, 2), fx_get(fx, key), F32_RTOL, F32_ATOL);
        snprintf(key, sizeof key, "sc.%s.f32_2.5", scalar_cases[i].name);
        assert_tensor_close(scalar_cases[i].fn(pt_test_noncontig(a32), 2.5), fx_get(fx, key),
                            F32_RTOL, F32_ATOL);
    }
}

static void test_inplace_binary(void **state)
{
    (void)state;
    pt_tensor *a32 = fx_get(fx, "b.a.f32"), *b32 = fx_get(fx, "b.b.f32");
    pt_tensor *ai = fx_get(fx, "b.a.i64"), *bi = fx_get(fx, "b.b.i64");
    pt_tensor *b64 = fx_get(fx, "b.b.f64");
    pt_tensor *x = pt_clone(a32);
    assert_int_equal(pt_add_(x, b32), PT_OK);
    assert_tensor_close(x, fx_get(fx, "b.add.f32"), F32_RTOL, F32_ATOL);
    x = pt_clone(a32);
    assert_int_equal(pt_add_alpha_(x, b32, 3), PT_OK);
    assert_tensor_close(x, fx_get(fx, "b.add_alpha.f32"), F32_RTOL, F32_ATOL);
    x = pt_clone(a32);
    assert_int_equal(pt_sub_alpha_(x, b32, 2), PT_OK);
    assert_tensor_close(x, fx_get(fx, "b.sub_alpha.f32"), F32_RTOL, F32_ATOL);
    x = pt_test_noncontig(a32);
    assert_int_equal(pt_mul_(x, b32), PT_OK);
    assert_tensor_close(x, fx_get(fx, "b.mul.f32"), F32_RTOL, F32_ATOL);
    x = pt_clone(a32);
    assert_int_equal(pt_div_(x, b32), PT_OK);
    assert_tensor_close(x, fx_get(fx, "b.div.f32"), F32_RTOL, F32_ATOL);
    x = pt_clone(ai);
    assert_int_equal(pt_div_rounding_(x, bi, PT_ROUND_FLOOR), PT_OK);
    assert_tensor_equal(x, fx_get(fx, "b.div_floor.i64"));
    /* float32 self with a float64 other: computed in float64, stored as float32 */
    x = pt_clone(a32);
    assert_int_equal(pt_mul_(x, b64), PT_OK);
    assert_tensor_close(x, pt_to_dtype(fx_get(fx, "b.mul.f32_f64"), PT_FLOAT32), F32_RTOL,
                        F32_ATOL);
    /* scalar in-place */
    x = pt_clone(a32);
    assert_int_equal(pt_add_scalar_(x, 2.5), PT_OK);
    assert_tensor_close(x, fx_get(fx, "sc.add.f32_2.5"), F32_RTOL, F32_ATOL);
    x = pt_clone(a32);
    assert_int_equal(pt_sub_scalar_(x, 2), PT_OK);
    assert_tensor_close(x, fx_get(fx, "sc.sub.f32_2"), F32_RTOL, F32_ATOL);
    x = pt_clone(a32);
    assert_int_equal(pt_mul_scalar_(x, 2.5), PT_OK);
    assert_tensor_close(x, fx_get(fx, "sc.mul.f32_2.5"), F32_RTOL, F32_ATOL);
    x = pt_clone(a32);
    assert_int_equal(pt_div_scalar_(x, 2.5), PT_OK);
    assert_tensor_close(x, fx_get(fx, "sc.div.f32_2.5"), F32_RTOL, F32_ATOL);
    x = pt_clone(ai);
    assert_int_equal(pt_add_scalar_(x, 2), PT_OK);
    assert_tensor_equal(x, fx_get(fx, "sc.add.i64_2"));
    x = pt_clone(ai);
    assert_int_equal(pt_pow_scalar_(x, 2), PT_OK);
    assert_tensor_equal(x, fx_get(fx, "sc.pow.i64_2"));
    x = pt_clone(a32);
    assert_int_equal(pt_pow_(x, pt_abs(b32)), PT_OK);
    /* errors: float result into an int tensor, broadcast shape != self's shape */
    x = pt_clone(ai);
    assert_pt_status_error(pt_add_scalar_(x, 1.5), PT_ERR_DTYPE, "can't be cast");
    assert_pt_status_error(pt_div_(x, bi), PT_ERR_DTYPE,
                           "float32 can't be cast to the desired "
                           "output type int64");
    assert_pt_status_error(pt_add_(x, a32), PT_ERR_DTYPE, "can't be cast");
    pt_tensor *small = pt_clone(b32);
    assert_pt_status_error(pt_add_(small, a32), PT_ERR_SHAPE, "doesn't match the broadcast shape");
    assert_pt_status_error(pt_add_(NULL, a32), PT_ERR_NULL, "pt_add_");
    pt_tensor *bb = pt_clone(fx_get(fx, "b.bool_a"));
    pt_tensor *i3 = pt_full(PT_SHAPE(3), 2, PT_INT64, pt_cpu());
    assert_pt_status_error(pt_mul_(bb, i3), PT_ERR_DTYPE, "int64 can't be cast");
}

static void test_binary_errors(void **state)
{
    (void)state;
    pt_tensor *a32 = fx_get(fx, "b.a.f32");
    pt_tensor *ai = fx_get(fx, "b.a.i64");
    pt_tensor *bad = pt_zeros(PT_SHAPE(5), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_add(a32, bad), PT_ERR_SHAPE, "not broadcastable");
    assert_pt_error(pt_mul(a32, NULL), PT_ERR_NULL, "pt_mul");
    pt_tensor *ba = fx_get(fx, "b.bool_a");
    assert_pt_error(pt_sub(ba, ba), PT_ERR_DTYPE, "bool tensor is not supported");
    assert_pt_error(pt_sub_scalar(ba, 1), PT_ERR_DTYPE, "bool");
    assert_pt_error(pt_pow(ba, ba), PT_ERR_DTYPE, "bool");
    assert_pt_error(pt_div_rounding(ba, ba, PT_ROUND_FLOOR), PT_ERR_DTYPE, "bool");
    assert_pt_error(pt_hypot(ai, ai), PT_ERR_DTYPE, "int64");
    assert_pt_error(pt_add_alpha(ai, ai, 1.5), PT_ERR_INVALID_ARG, "alpha");
    assert_pt_error(pt_div_rounding(a32, a32, (pt_rounding_mode)9), PT_ERR_INVALID_ARG, "rounding");
    assert_pt_error(pt_pow_scalar(ai, -1), PT_ERR_INVALID_ARG, "negative integer powers");
    pt_tensor *zero = pt_zeros(PT_SHAPE(4), PT_INT64, pt_cpu());
    assert_pt_error(pt_div_rounding(ai, zero, PT_ROUND_FLOOR), PT_ERR_INVALID_ARG,
                    "division by zero");
    assert_pt_error(pt_remainder(ai, zero), PT_ERR_INVALID_ARG, "division by zero");
    assert_pt_error(pt_remainder_scalar(ai, 0), PT_ERR_INVALID_ARG, "division by zero");
    /* true division of ints by zero is float: inf/nan */
    pt_tensor *q = pt_div(ai, zero);
    assert_int_equal(pt_dtype_of(q), PT_FLOAT32);
    assert_true(isinf(pt_test_get(q, 0)));
    /* a NULL argument keeps the earlier error */
    pt_tensor *fail = pt_add(a32, bad);
    assert_null(fail);
    assert_pt_error(pt_exp(pt_mul(fail, a32)), PT_ERR_SHAPE, "not broadcastable");
    /* empty broadcast */
    pt_tensor *e0 = pt_empty(PT_SHAPE(0, 4), PT_FLOAT32, pt_cpu());
    assert_shape(pt_add(e0, fx_get(fx, "b.b.f32")), 0, 4);
}

/* ---- ternary ----------------------------------------------------------------------------------
 */

static void test_where(void **state)
{
    (void)state;
    pt_tensor *cond = fx_get(fx, "t.cond");
    pt_tensor *a32 = fx_get(fx, "b.a.f32"), *b32 = fx_get(fx, "b.b.f32");
    assert_tensor_equal(pt_where(cond, a32, b32), fx_get(fx, "t.where.f32"));
    assert_tensor_equal(pt_where(pt_test_noncontig(cond), pt_test_noncontig(a32), b32),
                        fx_get(fx, "t.where.f32"));
    pt_tensor *col = pt_as_strided(cond, PT_SHAPE(3, 1), (int64_t[]){4, 1}, 0);
    assert_tensor_equal(pt_where(col, fx_get(fx, "b.a.i64"), fx_get(fx, "b.b.f64")),
                        pt_to_dtype(fx_get(fx, "t.where.mix"), PT_FLOAT64));
    assert_pt_error(pt_where(a32, a32, b32), PT_ERR_DTYPE, "bool");
    assert_pt_error(pt_where(cond, a32, pt_zeros(PT_SHAPE(5), PT_FLOAT32, pt_cpu())), PT_ERR_SHAPE,
                    "broadcast");
    assert_pt_error(pt_where(NULL, a32, b32), PT_ERR_NULL, "pt_where");
}

static void test_clamp(void **state)
{
    (void)state;
    pt_tensor *a32 = fx_get(fx, "b.a.f32"), *a64 = fx_get(fx, "b.a.f64");
    pt_tensor *ai = fx_get(fx, "b.a.i64");
    assert_tensor_equal(pt_clamp(a32, true, -1.5, true, 2.0), fx_get(fx, "t.clamp.f32"));
    assert_tensor_equal(pt_clamp_min(a32, -1.5), fx_get(fx, "t.clamp_min.f32"));
    assert_tensor_equal(pt_clamp_max(a64, 0.5), fx_get(fx, "t.clamp_max.f64"));
    assert_tensor_equal(pt_clamp(ai, true, -2, true, 3), fx_get(fx, "t.clamp.i64"));
    assert_tensor_equal(pt_clamp(ai, true, -2.5, true, 3), fx_get(fx, "t.clamp.i64_f"));
    assert_tensor_equal(pt_clamp(a32, true, 2.0, true, -1.0), fx_get(fx, "t.clamp.rev"));
    assert_tensor_equal(pt_clamp(fx_get(fx, "s.a"), true, -1, true, 1), fx_get(fx, "t.clamp.nan"));
    pt_tensor *x = pt_test_noncontig(a32);
    assert_int_equal(pt_clamp_(x, true, -1.5, true, 2.0), PT_OK);
    assert_tensor_equal(x, fx_get(fx, "t.clamp.f32"));
    pt_tensor *lo = fx_get(fx, "t.lo"), *hi = fx_get(fx, "t.hi");
    assert_tensor_equal(pt_clamp_tensor(a32, lo, hi), fx_get(fx, "t.clamp_tensor"));
    assert_tensor_equal(pt_clamp_tensor(a32, lo, NULL), fx_get(fx, "t.clamp_tensor_min"));
    assert_pt_error(pt_clamp(a32, false, 0, false, 0), PT_ERR_INVALID_ARG, "at least one");
    assert_pt_error(pt_clamp_tensor(a32, NULL, NULL), PT_ERR_INVALID_ARG, "at least one");
    pt_tensor *xi = pt_clone(ai);
    assert_pt_status_error(pt_clamp_(xi, true, 0.5, false, 0), PT_ERR_DTYPE, "can't be cast");
}

static void test_lerp_addc(void **state)
{
    (void)state;
    pt_tensor *a32 = fx_get(fx, "b.a.f32"), *a64 = fx_get(fx, "b.a.f64");
    pt_tensor *b32 = fx_get(fx, "b.b.f32"), *b64 = fx_get(fx, "b.b.f64");
    pt_tensor *end = fx_get(fx, "t.end"), *w = fx_get(fx, "t.w");
    pt_tensor *ai = fx_get(fx, "b.a.i64"), *bi = fx_get(fx, "b.b.i64");
    assert_tensor_close(pt_lerp(a32, end, w), fx_get(fx, "t.lerp.f32"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_lerp(pt_test_noncontig(a32), end, w), fx_get(fx, "t.lerp.f32"), F32_RTOL,
                        F32_ATOL);
    assert_tensor_close(pt_lerp_scalar(a32, end, 0.3), fx_get(fx, "t.lerp_s.f32"), F32_RTOL,
                        F32_ATOL);
    pt_tensor *end64 = pt_to_dtype(end, PT_FLOAT64);
    assert_tensor_close(pt_lerp_scalar(a64, end64, 0.7), fx_get(fx, "t.lerp_s.f64"), F64_RTOL,
                        F64_ATOL);
    assert_tensor_close(pt_addcmul(a32, end, b32, 0.5), fx_get(fx, "t.addcmul.f32"), F32_RTOL,
                        F32_ATOL);
    assert_tensor_close(pt_addcdiv(a32, end, b32, -2.0), fx_get(fx, "t.addcdiv.f32"), F32_RTOL,
                        F32_ATOL);
    assert_tensor_equal(pt_addcmul(ai, ai, bi, 2), fx_get(fx, "t.addcmul.i64"));
    assert_tensor_close(pt_addcmul(a32, ai, b64, 1), fx_get(fx, "t.addcmul.mix"), F64_RTOL,
                        F64_ATOL);
    assert_tensor_close(pt_addcdiv(a64, end64, b64, 0.25), fx_get(fx, "t.addcdiv.f64"), F64_RTOL,
                        F64_ATOL);
    assert_pt_error(pt_lerp(a32, end64, w), PT_ERR_DTYPE, "expected dtype float32 for `end`");
    assert_pt_error(pt_lerp_scalar(ai, ai, 0.5), PT_ERR_DTYPE, "floating point");
    assert_pt_error(pt_addcdiv(a32, ai, bi, 1), PT_ERR_DTYPE, "integer division");
    assert_pt_error(pt_addcmul(a32, ai, pt_zeros(PT_SHAPE(5), PT_FLOAT32, pt_cpu()), 1),
                    PT_ERR_SHAPE, "broadcast");
}

static void test_small_ints_and_bfloat16(void **state)
{
    (void)state;
    pt_tensor *u8 = fx_get(fx, "n.u8"), *i8 = fx_get(fx, "n.i8");
    assert_tensor_equal(pt_neg(u8), fx_get(fx, "n.neg.u8"));
    assert_tensor_equal(pt_neg(i8), fx_get(fx, "n.neg.i8"));
    assert_tensor_equal(pt_abs(i8), fx_get(fx, "n.abs.i8"));
    assert_tensor_equal(pt_add(u8, u8), fx_get(fx, "n.add.u8"));
    assert_tensor_equal(pt_mul(i8, i8), fx_get(fx, "n.mul.i8"));
    assert_tensor_equal(pt_add(u8, i8), fx_get(fx, "n.add.u8_i8"));
    assert_tensor_equal(pt_div_rounding(i8, fx_get(fx, "n.div_b.i8"), PT_ROUND_FLOOR),
                        fx_get(fx, "n.div_floor.i8"));
    pt_tensor *bf = fx_get(fx, "n.bf");
    /* bfloat16 computes in float32 and rounds once at the end, as PyTorch's CPU kernels */
    assert_tensor_equal(pt_add_alpha(bf, bf, 3), fx_get(fx, "n.add.bf"));
    assert_tensor_equal(pt_mul_scalar(bf, 3), fx_get(fx, "n.mul3.bf"));
    assert_tensor_equal(pt_lt_scalar(bf, 1), fx_get(fx, "n.lt.bf"));
    assert_tensor_equal(pt_exp(bf), fx_get(fx, "n.exp.bf"));
    pt_tensor *x = pt_clone(bf);
    assert_int_equal(pt_mul_scalar_(x, 3), PT_OK);
    assert_tensor_equal(x, fx_get(fx, "n.mul3.bf"));
    /* writing into a broadcast (stride-0) view is refused */
    pt_tensor *one = pt_ones(PT_SHAPE(1), PT_FLOAT32, pt_cpu());
    pt_tensor *ex = pt_as_strided(one, PT_SHAPE(4), (int64_t[]){0}, 0);
    assert_pt_status_error(pt_add_scalar_(ex, 1), PT_ERR_INVALID_ARG, "single memory location");
    assert_pt_status_error(pt_exp_(ex), PT_ERR_INVALID_ARG, "single memory location");
}

/* Refusals PyTorch 2.x makes and we once skipped: F.hardtanh(x, 2, 1) raises "min_val cannot
 * be greater than max_val" (even for an empty x), torch.clamp(bool, min=t, max=t) has no bool
 * kernel (one bound alone works: it is maximum / minimum). */
static void test_hardtanh_clamp_refusals(void **state)
{
    (void)state;
    pt_tensor *x = pt_ones(PT_SHAPE(2, 3), PT_FLOAT32, pt_cpu());
    pt_tensor *e = pt_ones(PT_SHAPE(0), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_hardtanh(x, 2.0, 1.0), PT_ERR_INVALID_ARG,
                    "pt_hardtanh: min_val cannot be greater than max_val");
    assert_pt_error(pt_hardtanh(e, 2.0, 1.0), PT_ERR_INVALID_ARG, "pt_hardtanh: min_val");
    assert_pt_status_error(pt_hardtanh_(x, 2.0, 1.0), PT_ERR_INVALID_ARG,
                           "pt_hardtanh_: min_val cannot be greater than max_val");
    pt_tensor *same = pt_hardtanh(x, 1.0, 1.0); /* equal bounds are fine */
    assert_non_null(same);
    pt_tensor *b = pt_ones(PT_SHAPE(3), PT_BOOL, pt_cpu());
    assert_pt_error(pt_clamp_tensor(b, b, b), PT_ERR_DTYPE,
                    "pt_clamp_tensor: a bool input is not supported");
    pt_tensor *lo = pt_clamp_tensor(b, b, NULL), *hi = pt_clamp_tensor(b, NULL, b);
    assert_non_null(lo);
    assert_non_null(hi);
    assert_int_equal(pt_dtype_of(lo), PT_BOOL);
    pt_tensor *xi = pt_ones(PT_SHAPE(3), PT_INT64, pt_cpu());
    pt_tensor *ib = pt_clamp_tensor(xi, b, b); /* bool bounds on an int64 input: int64 */
    assert_non_null(ib);
    assert_int_equal(pt_dtype_of(ib), PT_INT64);
    pt_release(x);
    pt_release(e);
    pt_release(same);
    pt_release(b);
    pt_release(lo);
    pt_release(hi);
    pt_release(xi);
    pt_release(ib);
}

int main(void)
{
    fx = fx_open("elementwise");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hardtanh_clamp_refusals, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_unary_float_math, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_unary_accuracy_grid, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_binary_vector_paths, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_unary_keep_dtype, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_unary_activations, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_unary_bool_results, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_unary_half_and_large, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_unary_extremes, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_unary_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_binary_ops, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_binary_promotion_and_broadcast, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_scalar_forms, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_inplace_binary, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_binary_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_where, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_clamp, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_lerp_addc, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_small_ints_and_bfloat16, pt_test_setup,
                                        pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
