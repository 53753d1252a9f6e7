/* Autograd tests of the elementwise family: pt_gradcheck (float64 central differences) on every
 * differentiable op, with broadcasting, non-contiguous inputs and the `_scalar` and in-place
 * forms; pt_gradgradcheck on the second-order ops; PyTorch's conventions checked directly (ties
 * of maximum/minimum split in half, zero gradients of rounding ops, clamp with tensor bounds,
 * where's condition); mixed dtypes; in-place errors; no recording when nothing requires grad;
 * the fused activation backward ops against the composed formulas. Second order is checked
 * with equal input shapes: undoing broadcasting (pti_sum_to = sum_dim + reshape) becomes
 * differentiable with the reduction/shape families' autograd.
 * Inputs are sampled away from the kinks of each op (|x| >= 0.3 for abs/relu, positive for
 * log/sqrt, ...). */
#include "testutil.h"

#include <math.h>
#include <string.h>

/* ---- inputs ---------------------------------------------------------------------------------- */

static uint64_t lcg = 12345;

static double urand(void)
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg >> 11) / 9007199254740992.0;
}

typedef enum domain {
    D_AWAY, /* +-[0.3, 2] */
    D_POS,  /* [0.5, 2] */
    D_WIDE, /* +-[0.6, 4] */
    D_TAN,  /* +-[0.3, 1.2] */
    D_SIX,  /* +-[0.5, 8]: both kinks of relu6 */
} domain;

static pt_tensor *mk(int ndim, const int64_t *shape, domain d, bool grad)
{
    double buf[64];
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    for (int64_t i = 0; i < n; i++) {
        double u = urand(), s = urand() < 0.5 ? -1.0 : 1.0;
        switch (d) {
        case D_AWAY: buf[i] = s * (0.3 + 1.7 * u); break;
        case D_POS: buf[i] = 0.5 + 1.5 * u; break;
        case D_WIDE: buf[i] = s * (0.6 + 3.4 * u); break;
        case D_TAN: buf[i] = s * (0.3 + 0.9 * u); break;
        case D_SIX: buf[i] = s * (0.5 + 7.5 * u); break;
        }
    }
    pt_tensor *t = pt_from_data(buf, ndim, shape, PT_FLOAT64, pt_cpu());
    if (grad)
        pt_requires_grad_(t, true);
    return t;
}

static const int64_t S34[2] = {3, 4};
static const int64_t S4[1] = {4};

/* ---- the functions under test ---------------------------------------------------------------- */

typedef enum opid {
    /* unary */
    O_NEG,
    O_ABS,
    O_SIGN,
    O_EXP,
    O_EXPM1,
    O_LOG,
    O_LOG1P,
    O_LOG2,
    O_SQRT,
    O_RSQRT,
    O_SQUARE,
    O_SIN,
    O_COS,
    O_TAN,
    O_TANH,
    O_SIGMOID,
    O_ERF,
    O_FLOOR,
    O_CEIL,
    O_ROUND,
    O_TRUNC,
    O_RECIP,
    O_RELU,
    O_RELU6,
    O_LEAKY,
    O_ELU,
    O_SELU,
    O_GELU,
    O_GELU_TANH,
    O_SILU,
    O_MISH,
    O_SOFTPLUS,
    O_SOFTPLUS_B,
    O_HARDTANH,
    O_HARDSIGMOID,
    O_HARDSWISH,
    O_CLAMP,
    O_CLAMP_MIN,
    O_CLAMP_MAX,
    O_ADD_S,
    O_SUB_S,
    O_RSUB_S,
    O_MUL_S,
    O_DIV_S,
    O_POW_S,
    O_SPOW,
    O_REM_S,
    O_FMOD_S,
    /* in place on a non-leaf copy */
    O_I_EXP,
    O_I_RELU,
    O_I_SIGMOID,
    O_I_GELU,
    O_I_CLAMP,
    O_I_POW_S,
    O_I_MUL_S,
    O_UNARY_END,
    /* binary */
    O_ADD,
    O_ADD_EX,
    O_SUB,
    O_SUB_EX,
    O_MUL,
    O_DIV,
    O_DIV_TRUNC,
    O_DIV_FLOOR,
    O_POW,
    O_REM,
    O_FMOD,
    O_MAX,
    O_MIN,
    O_ATAN2,
    O_HYPOT,
    O_I_ADD,
    O_I_SUB,
    O_I_MUL,
    O_I_DIV,
    O_I_POW,
    O_I_MUL_SELF,
    O_BINARY_END,
    /* ternary */
    O_WHERE,
    O_CLAMP_T,
    O_CLAMP_T_MIN,
    O_CLAMP_T_MAX,
    O_LERP,
    O_LERP_S,
    O_ADDCMUL,
    O_ADDCDIV,
} opid;

static pt_tensor *inplace1(const pt_tensor *x, opid op)
{
    pt_tensor *y = pt_mul_scalar(x, 1.0);
    if (!y)
        return NULL;
    pt_status st = PT_OK;
    switch (op) {
    case O_I_EXP: st = pt_exp_(y); break;
    case O_I_RELU: st = pt_relu_(y); break;
    case O_I_SIGMOID: st = pt_sigmoid_(y); break;
    case O_I_GELU: st = pt_gelu_(y, NULL); break;
    case O_I_CLAMP: st = pt_clamp_(y, true, -1.0, true, 1.0); break;
    case O_I_POW_S: st = pt_pow_scalar_(y, 3.0); break;
    case O_I_MUL_S: st = pt_mul_scalar_(y, -2.5); break;
    default: st = PT_ERR_INVALID_ARG; break;
    }
    if (st != PT_OK) {
        pt_release(y);
        return NULL;
    }
    return y;
}

static pt_tensor *unary_fn(const pt_tensor *x, opid op)
{
    pt_gelu_opts tanh_form = {PT_GELU_TANH};
    switch (op) {
    case O_NEG: return pt_neg(x);
    case O_ABS: return pt_abs(x);
    case O_SIGN: return pt_sign(x);
    case O_EXP: return pt_exp(x);
    case O_EXPM1: return pt_expm1(x);
    case O_LOG: return pt_log(x);
    case O_LOG1P: return pt_log1p(x);
    case O_LOG2: return pt_log2(x);
    case O_SQRT: return pt_sqrt(x);
    case O_RSQRT: return pt_rsqrt(x);
    case O_SQUARE: return pt_square(x);
    case O_SIN: return pt_sin(x);
    case O_COS: return pt_cos(x);
    case O_TAN: return pt_tan(x);
    case O_TANH: return pt_tanh(x);
    case O_SIGMOID: return pt_sigmoid(x);
    case O_ERF: return pt_erf(x);
    case O_FLOOR: return pt_floor(x);
    case O_CEIL: return pt_ceil(x);
    case O_ROUND: return pt_round(x);
    case O_TRUNC: return pt_trunc(x);
    case O_RECIP: return pt_reciprocal(x);
    case O_RELU: return pt_relu(x);
    case O_RELU6: return pt_relu6(x);
    case O_LEAKY: return pt_leaky_relu(x, 0.2);
    case O_ELU: return pt_elu(x, 1.3);
    case O_SELU: return pt_selu(x);
    case O_GELU: return pt_gelu(x);
    case O_GELU_TANH: return pt_gelu_ex(x, &tanh_form);
    case O_SILU: return pt_silu(x);
    case O_MISH: return pt_mish(x);
    case O_SOFTPLUS: return pt_softplus(x, 1.0, 20.0);
    case O_SOFTPLUS_B: return pt_softplus(x, 2.0, 1.0);
    case O_HARDTANH: return pt_hardtanh(x, -1.0, 1.5);
    case O_HARDSIGMOID: return pt_hardsigmoid(x);
    case O_HARDSWISH: return pt_hardswish(x);
    case O_CLAMP: return pt_clamp(x, true, -1.0, true, 1.0);
    case O_CLAMP_MIN: return pt_clamp_min(x, -0.5);
    case O_CLAMP_MAX: return pt_clamp_max(x, 0.5);
    case O_ADD_S: return pt_add_scalar(x, 2.5);
    case O_SUB_S: return pt_sub_scalar(x, 2.5);
    case O_RSUB_S: return pt_rsub_scalar(x, 2.5);
    case O_MUL_S: return pt_mul_scalar(x, -1.5);
    case O_DIV_S: return pt_div_scalar(x, 3.0);
    case O_POW_S: return pt_pow_scalar(x, 2.5);
    case O_SPOW: return pt_scalar_pow(1.7, x);
    case O_REM_S: return pt_remainder_scalar(x, 0.7);
    case O_FMOD_S: return pt_fmod_scalar(x, 0.7);
    default: return inplace1(x, op);
    }
}

static pt_tensor *inplace2(const pt_tensor *a, const pt_tensor *b, opid op)
{
    pt_tensor *y = pt_mul_scalar(a, 1.0);
    if (!y)
        return NULL;
    pt_status st;
    switch (op) {
    case O_I_ADD: st = pt_add_alpha_(y, b, 0.5); break;
    case O_I_SUB: st = pt_sub_(y, b); break;
    case O_I_MUL: st = pt_mul_(y, b); break;
    case O_I_DIV: st = pt_div_(y, b); break;
    case O_I_POW: st = pt_pow_(y, b); break;
    case O_I_MUL_SELF: st = pt_mul_(y, y); break;
    default: st = PT_ERR_INVALID_ARG; break;
    }
    if (st != PT_OK) {
        pt_release(y);
        return NULL;
    }
    return y;
}

static pt_tensor *binary_fn(const pt_tensor *a, const pt_tensor *b, opid op)
{
    switch (op) {
    case O_ADD: return pt_add(a, b);
    case O_ADD_EX: return pt_add_alpha(a, b, -2.5);
    case O_SUB: return pt_sub(a, b);
    case O_SUB_EX: return pt_sub_alpha(a, b, 0.5);
    case O_MUL: return pt_mul(a, b);
    case O_DIV: return pt_div(a, b);
    case O_DIV_TRUNC: return pt_div_rounding(a, b, PT_ROUND_TRUNC);
    case O_DIV_FLOOR: return pt_div_rounding(a, b, PT_ROUND_FLOOR);
    case O_POW: return pt_pow(a, b);
    case O_REM: return pt_remainder(a, b);
    case O_FMOD: return pt_fmod(a, b);
    case O_MAX: return pt_maximum(a, b);
    case O_MIN: return pt_minimum(a, b);
    case O_ATAN2: return pt_atan2(a, b);
    case O_HYPOT: return pt_hypot(a, b);
    default: return inplace2(a, b, op);
    }
}

static pt_tensor *ternary_fn(pt_tensor *const *in, opid op)
{
    switch (op) {
    case O_WHERE: {
        pt_tensor *cond = pt_gt_scalar(in[2], 0);
        pt_tensor *r = pt_where(cond, in[0], in[1]);
        pt_release(cond);
        return r;
    }
    case O_CLAMP_T: return pt_clamp_tensor(in[0], in[1], in[2]);
    case O_CLAMP_T_MIN: return pt_clamp_tensor(in[0], in[1], NULL);
    case O_CLAMP_T_MAX: return pt_clamp_tensor(in[0], NULL, in[2]);
    case O_LERP: return pt_lerp(in[0], in[1], in[2]);
    case O_LERP_S: return pt_lerp_scalar(in[0], in[1], 0.3);
    case O_ADDCMUL: return pt_addcmul(in[0], in[1], in[2], 0.7);
    case O_ADDCDIV: return pt_addcdiv(in[0], in[1], in[2], -0.7);
    default: return NULL;
    }
}

static pt_tensor *f_op(int n, pt_tensor *const *in, void *user)
{
    opid op = *(const opid *)user;
    if (op < O_UNARY_END)
        return unary_fn(in[0], op);
    if (op < O_BINARY_END)
        return binary_fn(in[0], in[n >= 2 ? 1 : 0], op);
    return ternary_fn(in, op);
}

/* ---- checks ---------------------------------------------------------------------------------- */

static void check_grad(opid op, int n, pt_tensor *const *in, bool second)
{
    if (!pt_gradcheck(f_op, &op, n, in, NULL))
        fail_msg("gradcheck of op %d: %s", (int)op, pt_last_error());
    if (second && !pt_gradgradcheck(f_op, &op, n, in, NULL))
        fail_msg("gradgradcheck of op %d: %s", (int)op, pt_last_error());
}

static domain unary_domain(opid op)
{
    switch (op) {
    case O_LOG:
    case O_LOG1P:
    case O_LOG2:
    case O_SQRT:
    case O_RSQRT:
    case O_POW_S: return D_POS;
    case O_TAN: return D_TAN;
    case O_HARDSIGMOID:
    case O_HARDSWISH:
    case O_SOFTPLUS_B: return D_WIDE;
    case O_RELU6: return D_SIX;
    default: return D_AWAY;
    }
}

static void test_unary_gradcheck(void **state)
{
    (void)state;
    for (int op = 0; op < O_UNARY_END; op++) {
        pt_tensor *x = mk(2, S34, unary_domain((opid)op), true);
        check_grad((opid)op, 1, &x, true); /* piecewise-linear ops: second derivative 0 */
        /* non-contiguous input */
        pt_tensor *xn = pt_test_noncontig(x);
        pt_requires_grad_(xn, true);
        check_grad((opid)op, 1, &xn, false);
        pt_release(xn);
        pt_release(x);
    }
}

static void test_binary_gradcheck(void **state)
{
    (void)state;
    for (int op = O_UNARY_END + 1; op < O_BINARY_END; op++) {
        domain da = (op == O_POW || op == O_I_POW) ? D_POS : D_AWAY;
        bool self_only = op == O_I_MUL_SELF;
        /* same shapes, then b broadcast over a, then a non-contiguous a */
        pt_tensor *a = mk(2, S34, da, true), *b = mk(2, S34, D_AWAY, true);
        pt_tensor *in[2] = {a, b};
        check_grad((opid)op, self_only ? 1 : 2, in, true);
        pt_tensor *bb = mk(1, S4, D_AWAY, true);
        pt_tensor *in2[2] = {a, bb};
        check_grad((opid)op, 2, in2, false);
        pt_tensor *an = pt_test_noncontig(a);
        pt_requires_grad_(an, true);
        pt_tensor *in3[2] = {an, b};
        check_grad((opid)op, 2, in3, false);
        /* broadcasting of the first operand (not for in place: self keeps its shape) */
        if (op < O_I_ADD) {
            pt_tensor *ab = mk(1, S4, da, true);
            pt_tensor *in4[2] = {ab, b};
            check_grad((opid)op, 2, in4, false);
            pt_release(ab);
        }
        pt_release(an);
        pt_release(bb);
        pt_release(b);
        pt_release(a);
    }
}

static void test_ternary_gradcheck(void **state)
{
    (void)state;
    for (int op = O_WHERE; op <= O_ADDCDIV; op++) {
        pt_tensor *x = mk(2, S34, D_AWAY, true), *y = mk(1, S4, D_AWAY, true);
        pt_tensor *z = mk(2, S34, D_AWAY, true);
        if (op == O_CLAMP_T || op == O_CLAMP_T_MIN || op == O_CLAMP_T_MAX) {
            /* min from [-2, 0.3], max from [0.3, 2]: some inside, some outside */
            pt_release(y);
            pt_release(z);
            y = mk(1, S4, D_POS, false);
            pt_tensor *t = pt_mul_scalar(y, -1.0);
            pt_release(y);
            y = t;
            pt_requires_grad_(y, true);
            z = mk(2, S34, D_POS, true);
        }
        pt_tensor *in[3] = {x, y, z};
        check_grad((opid)op, 3, in, false);
        /* second order with equal shapes (undoing broadcasting is the reductions' autograd) */
        pt_tensor *y2 = mk(2, S34, D_POS, true);
        pt_tensor *in_same[3] = {x, y2, z};
        if (!pt_gradgradcheck(f_op, &op, 3, in_same, NULL))
            fail_msg("gradgradcheck of op %d: %s", op, pt_last_error());
        pt_release(y2);
        pt_tensor *xn = pt_test_noncontig(x);
        pt_requires_grad_(xn, true);
        pt_tensor *in2[3] = {xn, y, z};
        check_grad((opid)op, 3, in2, false);
        pt_release(xn);
        pt_release(x);
        pt_release(y);
        pt_release(z);
    }
}

/* ---- PyTorch conventions checked directly ---------------------------------------------------- */

/* Gradients of sum(y) (grad_output ones: reductions are another family's autograd). */
static void grads(pt_tensor *y, int n, pt_tensor *const *in, pt_tensor **g)
{
    pt_tensor *ones = pt_full_like(y, 1.0);
    pt_status st = pt_autograd_grad(1, &y, &ones, n, in, false, false, false, g);
    if (st != PT_OK)
        fail_msg("autograd_grad: %s", pt_last_error());
    pt_release(ones);
}

static pt_tensor *grad_of(pt_tensor *y, pt_tensor *x)
{
    pt_tensor *g = NULL;
    grads(y, 1, &x, &g);
    return g;
}

static pt_tensor *vec(int n, const double *v, bool grad)
{
    int64_t shape[1] = {n};
    pt_tensor *t = pt_from_data(v, 1, shape, PT_FLOAT64, pt_cpu());
    if (grad)
        pt_requires_grad_(t, true);
    return t;
}

static void test_maximum_minimum_ties_split(void **state)
{
    (void)state;
    pt_tensor *a = vec(3, (double[]){1, 2, 3}, true), *b = vec(3, (double[]){1, 5, 0}, true);
    pt_tensor *y = pt_maximum(a, b);
    pt_tensor *in[2] = {a, b}, *g[2] = {NULL, NULL};
    grads(y, 2, in, g);
    pt_tensor *ea = vec(3, (double[]){0.5, 0, 1}, false),
              *eb = vec(3, (double[]){0.5, 1, 0}, false);
    assert_tensor_equal(g[0], ea);
    assert_tensor_equal(g[1], eb);
    pt_tensor *y2 = pt_minimum(a, b);
    pt_tensor *g2[2] = {NULL, NULL};
    grads(y2, 2, in, g2);
    assert_tensor_equal(g2[0], eb);
    assert_tensor_equal(g2[1], ea);
    pt_release(a);
    pt_release(b);
}

static void test_zero_grads_and_pow_corners(void **state)
{
    (void)state;
    pt_tensor *x = vec(3, (double[]){0.0, 1.5, -2.0}, true);
    pt_tensor *z = vec(3, (double[]){0, 0, 0}, false);
    pt_tensor *ops[4] = {pt_sign(x), pt_floor(x), pt_round(x),
                         pt_div_rounding(x, x, PT_ROUND_FLOOR)};
    for (int k = 0; k < 4; k++) {
        pt_tensor *g = grad_of(ops[k], x);
        assert_tensor_equal(g, z);
    }
    /* 0 ** 2: d/da = 2 * 0 = 0; d/db masked to 0 (PyTorch), not 0 * log 0 = NaN */
    pt_tensor *e = vec(3, (double[]){2, 0, 2}, true);
    pt_tensor *p = pt_pow(x, e);
    pt_tensor *in[2] = {x, e}, *g[2] = {NULL, NULL};
    grads(p, 2, in, g);
    assert_tensor_close(g[0], vec(3, (double[]){0, 0, -4}, false), 1e-12, 1e-12);
    assert_false(isnan(pt_test_get(g[1], 0)));
    assert_true(pt_test_get(g[1], 0) == 0.0);
    /* exponent 0: self gradient 0 even at base 0 */
    assert_true(pt_test_get(g[0], 1) == 0.0);
    /* relu at 0 and clamp at the bounds (PyTorch: relu 0, clamp passes the bound) */
    pt_tensor *r = grad_of(pt_relu(x), x);
    assert_true(pt_test_get(r, 0) == 0.0);
    pt_tensor *c = grad_of(pt_clamp(x, true, -2.0, true, 0.0), x);
    assert_tensor_equal(c, vec(3, (double[]){1, 0, 1}, false));
    pt_release(x);
}

static void test_clamp_tensor_bounds_like_pytorch(void **state)
{
    (void)state;
    /* x at the bound gets the gradient; min > max sends it to max */
    pt_tensor *x = vec(4, (double[]){0.0, -3.0, 3.0, 0.5}, true);
    pt_tensor *lo = vec(4, (double[]){0.0, -1.0, -1.0, 2.0}, true);
    pt_tensor *hi = vec(4, (double[]){1.0, 1.0, 1.0, 1.0}, true);
    pt_tensor *y = pt_clamp_tensor(x, lo, hi);
    pt_tensor *in[3] = {x, lo, hi}, *g[3] = {NULL, NULL, NULL};
    grads(y, 3, in, g);
    assert_tensor_equal(g[0], vec(4, (double[]){1, 0, 0, 0}, false));
    assert_tensor_equal(g[1], vec(4, (double[]){0, 1, 0, 0}, false));
    assert_tensor_equal(g[2], vec(4, (double[]){0, 0, 1, 1}, false));
    pt_release(x);
    pt_release(lo);
    pt_release(hi);
}

static void test_where_condition_and_mixed_dtypes(void **state)
{
    (void)state;
    /* float32 a with float64 b: the result is float64, a's gradient float32 */
    float av[4] = {1, 2, 3, 4};
    int64_t s4[1] = {4};
    pt_tensor *a = pt_from_data(av, 1, s4, PT_FLOAT32, pt_cpu());
    pt_requires_grad_(a, true);
    pt_tensor *b = vec(4, (double[]){0.5, 1, 2, 4}, true);
    pt_tensor *y = pt_mul(a, b);
    assert_int_equal(pt_dtype_of(y), PT_FLOAT64);
    pt_tensor *in[2] = {a, b}, *g[2] = {NULL, NULL};
    grads(y, 2, in, g);
    assert_int_equal(pt_dtype_of(g[0]), PT_FLOAT32);
    assert_int_equal(pt_dtype_of(g[1]), PT_FLOAT64);
    float ev[4] = {0.5f, 1, 2, 4};
    assert_tensor_equal(g[0], pt_from_data(ev, 1, s4, PT_FLOAT32, pt_cpu()));
    /* where: condition is not differentiable; the gradient goes to the chosen side */
    pt_tensor *cond = pt_gt_scalar(b, 1.5);
    assert_false(pt_requires_grad(cond));
    pt_tensor *w = pt_where(cond, a, b);
    pt_tensor *gw[2] = {NULL, NULL};
    grads(w, 2, in, gw);
    float ew[4] = {0, 0, 1, 1};
    assert_tensor_equal(gw[0], pt_from_data(ew, 1, s4, PT_FLOAT32, pt_cpu()));
    assert_tensor_equal(gw[1], vec(4, (double[]){1, 1, 0, 0}, false));
    /* comparisons, logical ops and isnan never record */
    assert_false(pt_requires_grad(pt_isnan(b)));
    assert_false(pt_requires_grad(pt_eq(a, b)));
    assert_false(pt_requires_grad(pt_logical_not(cond)));
    /* float16 input: its gradient stays float16 */
    pt_tensor *h = pt_to_dtype(b, PT_FLOAT16);
    pt_tensor *hl = pt_detach(h);
    pt_requires_grad_(hl, true);
    pt_tensor *gh = grad_of(pt_tanh(hl), hl);
    assert_int_equal(pt_dtype_of(gh), PT_FLOAT16);
}

static void test_inplace_rules(void **state)
{
    (void)state;
    pt_tensor *x = vec(3, (double[]){0.5, -1.0, 2.0}, true);
    /* a leaf that requires grad cannot be modified in place */
    assert_pt_status_error(pt_exp_(x), PT_ERR_INVALID_ARG, "leaf");
    assert_pt_status_error(pt_add_scalar_(x, 1.0), PT_ERR_INVALID_ARG, "leaf");
    /* under no_grad it can */
    pt_tensor *xc = pt_clone(x);
    pt_tensor *x2 = pt_detach(xc);
    pt_requires_grad_(x2, true);
    pt_no_grad_begin();
    assert_int_equal(pt_mul_scalar_(x2, 2.0), PT_OK);
    pt_no_grad_end();
    assert_true(pt_is_leaf(x2));
    /* a non-leaf becomes the result of the in-place op */
    pt_tensor *y = pt_mul_scalar(x, 1.0);
    assert_int_equal(pt_exp_(y), PT_OK);
    assert_string_equal(pt_grad_fn_name(y), "exp_");
    pt_tensor *g = grad_of(y, x);
    pt_tensor *e = pt_exp(pt_detach(x));
    assert_tensor_close(g, e, 1e-12, 1e-12);
    /* in place into a tensor that does not require grad, from one that does */
    pt_tensor *acc = vec(3, (double[]){1, 1, 1}, false);
    assert_int_equal(pt_add_(acc, x), PT_OK);
    assert_true(pt_requires_grad(acc));
    pt_tensor *ga = grad_of(acc, x);
    assert_tensor_equal(ga, vec(3, (double[]){1, 1, 1}, false));
    /* a tensor saved for backward and then modified in place: version error */
    pt_tensor *b = pt_mul_scalar(x, 2.0);
    pt_tensor *p = pt_mul(x, b);
    assert_int_equal(pt_add_scalar_(b, 1.0), PT_OK);
    pt_tensor *ones = pt_full_like(p, 1.0);
    pt_status st = pt_backward(p, ones, false, false);
    assert_int_not_equal(st, PT_OK);
    assert_non_null(strstr(pt_last_error(), "modified by an in-place operation"));
    pt_clear_error();
    /* the in-place shape rule still holds while recording */
    pt_tensor *y2 = pt_mul_scalar(x, 1.0);
    pt_tensor *m =
        pt_from_data((double[]){1, 2, 3, 4, 5, 6}, 2, (int64_t[]){2, 3}, PT_FLOAT64, pt_cpu());
    assert_pt_status_error(pt_add_(y2, m), PT_ERR_SHAPE, "broadcast shape");
    pt_release(x);
}

static void test_no_recording_without_grad(void **state)
{
    (void)state;
    pt_tensor *x = vec(3, (double[]){0.5, -1.0, 2.0}, false);
    pt_tensor *y = pt_add(pt_exp(x), x);
    assert_false(pt_requires_grad(y));
    assert_null(pt_grad_fn_name(y));
    pt_tensor *xr = vec(3, (double[]){0.5, -1.0, 2.0}, true);
    pt_no_grad_begin();
    pt_tensor *z = pt_mul(xr, xr);
    pt_no_grad_end();
    assert_false(pt_requires_grad(z));
    pt_tensor *w = pt_mul(xr, x);
    assert_string_equal(pt_grad_fn_name(w), "mul");
    assert_string_equal(pt_grad_fn_name(pt_sigmoid(xr)), "sigmoid");
}

/* The fused backward ops against the same formula composed from public ops (float64 and
 * float32, contiguous and not), and their argument errors. */
static pt_tensor *composed_backward(int which, const pt_tensor *g, const pt_tensor *x)
{
    pt_tensor *d = NULL;
    switch (which) {
    case 0: { /* gelu, erf form: Phi(x) + x phi(x) */
        pt_tensor *e = pt_erf(pt_mul_scalar(x, M_SQRT1_2));
        pt_tensor *cdf = pt_mul_scalar(pt_add_scalar(e, 1.0), 0.5);
        pt_tensor *pdf =
            pt_mul_scalar(pt_exp(pt_mul_scalar(pt_square(x), -0.5)), 0.3989422804014327);
        d = pt_add(cdf, pt_mul(x, pdf));
        break;
    }
    case 1: { /* gelu, tanh form */
        const double k = 0.7978845608028654, c = 0.044715;
        pt_tensor *x2 = pt_square(x);
        pt_tensor *t = pt_tanh(pt_mul_scalar(pt_mul(x, pt_add_scalar(pt_mul_scalar(x2, c), 1)), k));
        pt_tensor *left = pt_mul_scalar(pt_add_scalar(t, 1), 0.5);
        pt_tensor *right = pt_mul(pt_mul_scalar(pt_mul(x, pt_rsub_scalar(pt_square(t), 1)), 0.5),
                                  pt_mul_scalar(pt_add_scalar(pt_mul_scalar(x2, 3 * c), 1), k));
        d = pt_add(left, right);
        break;
    }
    case 2: { /* silu */
        pt_tensor *sg = pt_sigmoid(x);
        d = pt_mul(sg, pt_add_scalar(pt_mul(x, pt_rsub_scalar(sg, 1)), 1));
        break;
    }
    case 3: d = pt_rsub_scalar(pt_square(x), 1); break;              /* tanh, x = output */
    case 4: d = pt_mul(x, pt_rsub_scalar(x, 1)); break;              /* sigmoid, x = output */
    default: d = pt_to_dtype(pt_gt_scalar(x, 0.25), pt_dtype_of(x)); /* threshold 0.25 */
    }
    return pt_mul(g, d);
}

static pt_tensor *fused_backward(int which, const pt_tensor *g, const pt_tensor *x)
{
    pt_gelu_opts tf = {PT_GELU_TANH};
    switch (which) {
    case 0: return pt_gelu_backward(g, x, NULL);
    case 1: return pt_gelu_backward(g, x, &tf);
    case 2: return pt_silu_backward(g, x);
    case 3: return pt_tanh_backward(g, x);
    case 4: return pt_sigmoid_backward(g, x);
    default: return pt_threshold_backward(g, x, 0.25);
    }
}

static void test_fused_backward_ops(void **state)
{
    (void)state;
    int64_t shape[2] = {5, 7};
    for (int which = 0; which < 6; which++) {
        pt_tensor *x = mk(2, shape, D_WIDE, false), *g = mk(2, shape, D_AWAY, false);
        if (which == 3 || which == 4) { /* outputs of tanh / sigmoid */
            pt_tensor *y = which == 3 ? pt_tanh(x) : pt_sigmoid(x);
            pt_release(x);
            x = y;
        }
        assert_tensor_close(fused_backward(which, g, x), composed_backward(which, g, x), 1e-12,
                            1e-12);
        pt_tensor *xn = pt_test_noncontig(x);
        assert_tensor_close(fused_backward(which, g, xn), composed_backward(which, g, x), 1e-12,
                            1e-12);
        pt_tensor *x32 = pt_to_dtype(x, PT_FLOAT32), *g32 = pt_to_dtype(g, PT_FLOAT32);
        assert_tensor_close(fused_backward(which, g32, x32), composed_backward(which, g32, x32),
                            1e-5, 1e-6);
        pt_tensor *x16 = pt_to_dtype(x, PT_BFLOAT16), *g16 = pt_to_dtype(g, PT_BFLOAT16);
        pt_tensor *r16 = fused_backward(which, g16, x16);
        assert_int_equal(pt_dtype_of(r16), PT_BFLOAT16);
    }
    /* float32 (AVX2 loops where available) over a dense grid against the float64 kernels */
    static double grid[4001];
    for (int i = 0; i < 4001; i++)
        grid[i] = -10.0 + 0.005 * i;
    pt_tensor *gx = pt_from_data(grid, 1, (int64_t[]){4001}, PT_FLOAT64, pt_cpu());
    pt_tensor *gg = pt_full_like(gx, 1.0);
    pt_tensor *gx32 = pt_to_dtype(gx, PT_FLOAT32), *gg32 = pt_to_dtype(gg, PT_FLOAT32);
    pt_tensor *gy = pt_tanh(gx32), *gs = pt_sigmoid(gx32);
    for (int which = 0; which < 6; which++) {
        pt_tensor *in32 = which == 3 ? gy : which == 4 ? gs : gx32;
        pt_tensor *in64 = pt_to_dtype(in32, PT_FLOAT64);
        pt_tensor *r32 = fused_backward(which, gg32, in32);
        pt_tensor *r64 = fused_backward(which, gg, in64);
        /* float32 rounding of the result plus a few ulp of the vector exp/erf/tanh */
        assert_tensor_close_any_dtype(r32, r64, 1e-5, 1e-6);
    }
    pt_tensor *xi = pt_from_data((int32_t[]){1, 2}, 1, (int64_t[]){2}, PT_INT32, pt_cpu());
    assert_pt_error(pt_silu_backward(xi, xi), PT_ERR_DTYPE, "pt_silu_backward");
    assert_pt_error(pt_tanh_backward(NULL, xi), PT_ERR_NULL, "pt_tanh_backward");
    pt_tensor *xf = pt_to_dtype(xi, PT_FLOAT32);
    assert_pt_error(pt_gelu_backward(xf, xf, &(pt_gelu_opts){(pt_gelu_approximate)7}),
                    PT_ERR_INVALID_ARG, "approximate");
    /* they do not record */
    pt_tensor *xr = pt_detach(xf);
    pt_requires_grad_(xr, true);
    assert_false(pt_requires_grad(pt_sigmoid_backward(xr, xr)));
}

static void test_dtypes_empty_and_scalar_base(void **state)
{
    (void)state;
    /* float32 and float16 inputs get gradients of their own dtype and shape */
    const pt_dtype dts[2] = {PT_FLOAT32, PT_FLOAT16};
    for (int k = 0; k < 2; k++) {
        pt_tensor *x64 = mk(2, S34, D_AWAY, false);
        pt_tensor *x = pt_to_dtype(x64, dts[k]);
        pt_requires_grad_(x, true);
        pt_tensor *b = mk(1, S4, D_AWAY, false);
        pt_tensor *y = pt_mul(pt_gelu(x), pt_to_dtype(b, dts[k]));
        pt_tensor *g = grad_of(y, x);
        assert_int_equal(pt_dtype_of(g), dts[k]);
        assert_shape(g, 3, 4);
        /* same values as float64 within the dtype's precision */
        pt_tensor *xr = pt_to_dtype(x, PT_FLOAT64);
        pt_tensor *xd = pt_detach(xr);
        pt_requires_grad_(xd, true);
        pt_tensor *g64 = grad_of(pt_mul(pt_gelu(xd), b), xd);
        assert_tensor_close_any_dtype(g, g64, k == 0 ? 1e-5 : 1e-2, k == 0 ? 1e-6 : 1e-2);
    }
    /* empty tensors */
    int64_t e_shape[2] = {0, 3};
    pt_tensor *e = pt_zeros(2, e_shape, PT_FLOAT64, pt_cpu());
    pt_requires_grad_(e, true);
    pt_tensor *ge = grad_of(pt_exp(pt_mul(e, e)), e);
    assert_shape(ge, 0, 3);
    /* 0 ** x: no gradient for x >= 0 (PyTorch masks 0 * log 0), -inf/NaN stays for x < 0 */
    pt_tensor *x = vec(2, (double[]){2.0, 0.5}, true);
    pt_tensor *gz = grad_of(pt_scalar_pow(0.0, x), x);
    assert_tensor_equal(gz, vec(2, (double[]){0, 0}, false));
    /* base 2: d/dx 2^x = 2^x ln 2 */
    pt_tensor *g2 = grad_of(pt_scalar_pow(2.0, x), x);
    assert_tensor_close(g2, vec(2, (double[]){4 * M_LN2, sqrt(2.0) * M_LN2}, false), 1e-12, 1e-12);
    /* the number side of a _scalar form gets nothing; a bool/int operand needs none */
    pt_tensor *i = pt_from_data((int64_t[]){1, 2}, 1, (int64_t[]){2}, PT_INT64, pt_cpu());
    pt_tensor *gi = grad_of(pt_mul(i, x), x);
    assert_tensor_equal(gi, vec(2, (double[]){1, 2}, false));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unary_gradcheck, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_binary_gradcheck, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_ternary_gradcheck, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_maximum_minimum_ties_split, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_zero_grads_and_pow_corners, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_clamp_tensor_bounds_like_pytorch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_where_condition_and_mixed_dtypes, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_inplace_rules, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_no_recording_without_grad, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_fused_backward_ops, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dtypes_empty_and_scalar_base, pt_test_setup,
                                        pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
