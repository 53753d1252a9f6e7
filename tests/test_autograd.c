/* Autograd engine tests: graph execution (accumulation, diamonds, retain_graph, errors), grad
 * mode, pt_autograd_grad, create_graph, hooks, retain_grad, anomaly mode, version counters,
 * memory behaviour, custom functions, pt_gradcheck / pt_gradgradcheck, checkpointing and the
 * differentiable conversions (clone, contiguous, to_dtype, to, copy_).
 *
 * No op family has backward formulas on this branch, so the graphs are built from small custom
 * functions defined here (mul, scale, square, add, sum, expand, a two-output op, dropout).
 * Their backwards are written with these same custom functions, so they are differentiable
 * and create_graph gives correct higher derivatives. Expected values are closed-form
 * derivatives (d/dx x^3 = 3x^2, ...) evaluated on the test inputs. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- small custom ops ------------------------------------------------------------------------ */

static pt_tensor *t_mul(pt_tensor *a, pt_tensor *b);
static pt_tensor *t_scale(pt_tensor *x, double c);
static pt_tensor *t_sum(pt_tensor *x);
static pt_tensor *t_expand(pt_tensor *s, const pt_tensor *like);

static pt_tensor *apply1(const pt_function *fn, void *user, int n, pt_tensor *const *in)
{
    pt_tensor *out = NULL;
    if (pt_function_apply(fn, user, n, in, &out) != PT_OK)
        return NULL;
    return out;
}

/* mul: a * b (same shapes). */
static pt_status mul_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)n;
    out[0] = pt_mul(in[0], in[1]);
    return out[0] ? pt_ctx_save_for_backward(ctx, 2, in) : pt_last_status();
}

static pt_status mul_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                         pt_tensor **gi)
{
    (void)n_out;
    (void)n_in;
    pt_tensor *a = pt_ctx_saved(ctx, 0), *b = pt_ctx_saved(ctx, 1);
    if (!a || !b) {
        pt_release(a);
        pt_release(b);
        return pt_last_status();
    }
    if (pt_ctx_needs_input_grad(ctx, 0))
        gi[0] = t_mul(g[0], b);
    if (pt_ctx_needs_input_grad(ctx, 1))
        gi[1] = t_mul(g[0], a);
    pt_release(a);
    pt_release(b);
    return PT_OK;
}

static const pt_function MUL = {"test_mul", 1, mul_fwd, mul_bwd};

static pt_tensor *t_mul(pt_tensor *a, pt_tensor *b)
{
    pt_tensor *in[2] = {a, b};
    return apply1(&MUL, NULL, 2, in);
}

/* scale: x * c, c through the user pointer. */
static pt_status scale_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)n;
    out[0] = pt_mul_scalar(in[0], *(const double *)pt_ctx_user(ctx));
    return out[0] ? PT_OK : pt_last_status();
}

static pt_status scale_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                           pt_tensor **gi)
{
    (void)n_out;
    (void)n_in;
    gi[0] = t_scale(g[0], *(const double *)pt_ctx_user(ctx));
    return gi[0] ? PT_OK : pt_last_status();
}

static const pt_function SCALE = {"test_scale", 1, scale_fwd, scale_bwd};

/* The user pointer must outlive the graph: keep scale factors in static storage. */
static double scale_values[8];
static int scale_count;

static pt_tensor *t_scale(pt_tensor *x, double c)
{
    double *slot = NULL;
    for (int i = 0; i < scale_count; i++)
        if (scale_values[i] == c)
            slot = &scale_values[i];
    if (!slot) {
        assert_true(scale_count < 8);
        slot = &scale_values[scale_count++];
        *slot = c;
    }
    return apply1(&SCALE, slot, 1, &x);
}

/* square: x^2, backward 2 x g. */
static pt_status square_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)n;
    out[0] = pt_mul(in[0], in[0]);
    return out[0] ? pt_ctx_save_for_backward(ctx, 1, in) : pt_last_status();
}

static pt_status square_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                            pt_tensor **gi)
{
    (void)n_out;
    (void)n_in;
    pt_tensor *x = pt_ctx_saved(ctx, 0);
    if (!x)
        return pt_last_status();
    pt_tensor *gx = t_mul(g[0], x);
    gi[0] = gx ? t_scale(gx, 2.0) : NULL;
    pt_release(gx);
    pt_release(x);
    return gi[0] ? PT_OK : pt_last_status();
}

static const pt_function SQUARE = {"test_square", 1, square_fwd, square_bwd};

static pt_tensor *t_square(pt_tensor *x)
{
    return apply1(&SQUARE, NULL, 1, &x);
}

/* add: a + b (same shapes), the gradient passes to both. */
static pt_status add_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)ctx;
    (void)n;
    out[0] = pt_add(in[0], in[1]);
    return out[0] ? PT_OK : pt_last_status();
}

static pt_status add_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                         pt_tensor **gi)
{
    (void)ctx;
    (void)n_out;
    (void)n_in;
    gi[0] = pt_retain(g[0]);
    gi[1] = pt_retain(g[0]);
    return PT_OK;
}

static const pt_function ADD = {"test_add", 1, add_fwd, add_bwd};

static pt_tensor *t_add(pt_tensor *a, pt_tensor *b)
{
    pt_tensor *in[2] = {a, b};
    return apply1(&ADD, NULL, 2, in);
}

/* sum: all elements to a 0-d tensor; backward expands g back (t_expand). */
static pt_status sum_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)n;
    out[0] = pt_sum(in[0]);
    return out[0] ? pt_ctx_save_for_backward(ctx, 1, in) : pt_last_status();
}

static pt_status sum_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                         pt_tensor **gi)
{
    (void)n_out;
    (void)n_in;
    pt_tensor *x = pt_ctx_saved(ctx, 0);
    gi[0] = x ? t_expand(g[0], x) : NULL;
    pt_release(x);
    return gi[0] ? PT_OK : pt_last_status();
}

static const pt_function SUM = {"test_sum", 1, sum_fwd, sum_bwd};

static pt_tensor *t_sum(pt_tensor *x)
{
    return apply1(&SUM, NULL, 1, &x);
}

/* expand: a 0-d tensor broadcast (copied) to the shape of `like`; backward sums. */
static pt_status expand_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)n;
    const pt_tensor *like = pt_ctx_user(ctx);
    pt_tensor *e = pt_expand(in[0], pt_ndim(like), pt_shape(like));
    out[0] = e ? pt_contiguous(e) : NULL;
    pt_release(e);
    return out[0] ? PT_OK : pt_last_status();
}

static pt_status expand_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                            pt_tensor **gi)
{
    (void)ctx;
    (void)n_out;
    (void)n_in;
    gi[0] = t_sum(g[0]);
    return gi[0] ? PT_OK : pt_last_status();
}

static const pt_function EXPAND = {"test_expand", 1, expand_fwd, expand_bwd};

static pt_tensor *t_expand(pt_tensor *s, const pt_tensor *like)
{
    /* only the shape of `like` is read, during forward */
    return apply1(&EXPAND, (void *)like, 1, &s);
}

/* split2: (2x, 3x) and an int64 copy of x (not differentiable). */
static int split2_backward_calls;
static pt_status split2_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)ctx;
    (void)n;
    out[0] = pt_mul_scalar(in[0], 2.0);
    out[1] = pt_mul_scalar(in[0], 3.0);
    out[2] = pt_to_dtype(in[0], PT_INT64);
    return out[0] && out[1] && out[2] ? PT_OK : pt_last_status();
}

static pt_status split2_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                            pt_tensor **gi)
{
    (void)ctx;
    (void)n_in;
    split2_backward_calls++;
    assert_int_equal(n_out, 3);
    assert_non_null(g[0]);
    assert_non_null(g[1]);
    assert_null(g[2]); /* the integer output has no gradient */
    pt_tensor *a = t_scale(g[0], 2.0), *b = t_scale(g[1], 3.0);
    gi[0] = t_add(a, b);
    pt_release(a);
    pt_release(b);
    return gi[0] ? PT_OK : pt_last_status();
}

static const pt_function SPLIT2 = {"test_split2", 3, split2_fwd, split2_bwd};

/* bad: identity forward, NaN gradient (for anomaly mode). */
static pt_status bad_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)ctx;
    (void)n;
    out[0] = pt_clone(in[0]);
    return out[0] ? PT_OK : pt_last_status();
}

static pt_status bad_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                         pt_tensor **gi)
{
    (void)ctx;
    (void)n_out;
    (void)n_in;
    gi[0] = pt_full_like(g[0], NAN);
    return gi[0] ? PT_OK : pt_last_status();
}

static const pt_function BAD = {"test_bad_op", 1, bad_fwd, bad_bwd};

/* ---- helpers --------------------------------------------------------------------------------- */

static pt_tensor *vec(int64_t n, const double *v, bool requires_grad)
{
    pt_tensor *t = pt_from_data(v, PT_SHAPE(n), PT_FLOAT64, pt_cpu());
    assert_non_null(t);
    if (requires_grad)
        assert_int_equal(pt_requires_grad_(t, true), PT_OK);
    return t;
}

static void assert_values(const pt_tensor *t, int64_t n, const double *expected, double tol)
{
    assert_non_null(t);
    assert_int_equal(pt_numel(t), n);
    for (int64_t i = 0; i < n; i++) {
        double v = pt_test_get(t, i);
        if (fabs(v - expected[i]) > tol)
            fail_msg("element %lld: got %.12g, expected %.12g", (long long)i, v, expected[i]);
    }
}

static void assert_grad(const pt_tensor *t, int64_t n, const double *expected)
{
    pt_tensor *g = pt_grad(t);
    assert_non_null(g);
    assert_values(g, n, expected, 1e-12);
    pt_release(g);
}

/* ---- engine ---------------------------------------------------------------------------------- */

static void test_accumulation_when_tensor_feeds_several_ops(void **state)
{
    (void)state;
    const double xv[3] = {1, -2, 3};
    pt_tensor *x = vec(3, xv, true);
    /* y = sum(x*x + 3x + x) -> dy/dx = 2x + 4 */
    pt_tensor *a = t_square(x), *b = t_scale(x, 3.0);
    pt_tensor *c = t_add(a, b), *d = t_add(c, x), *y = t_sum(d);
    assert_string_equal(pt_grad_fn_name(y), "test_sum");
    assert_true(pt_requires_grad(y) && !pt_is_leaf(y) && pt_is_leaf(x));
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    const double expect[3] = {6, 0, 10};
    assert_grad(x, 3, expect);
}

static void test_diamond_graph(void **state)
{
    (void)state;
    const double xv[2] = {0.5, -1.5};
    pt_tensor *x = vec(2, xv, true);
    /* h = 2x; y = sum(h*h + 5h) -> dy/dx = 2 * (2h + 5) = 8x + 10 */
    pt_tensor *h = t_scale(x, 2.0);
    pt_tensor *l = t_square(h), *r = t_scale(h, 5.0);
    pt_tensor *y = t_sum(t_add(l, r));
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    const double expect[2] = {14, -2};
    assert_grad(x, 2, expect);
}

static void test_retain_graph_and_second_backward_error(void **state)
{
    (void)state;
    const double xv[2] = {1, 2};
    pt_tensor *x = vec(2, xv, true);
    pt_tensor *y = t_sum(t_square(x));
    assert_int_equal(pt_backward(y, NULL, true, false), PT_OK);
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    const double twice[2] = {4, 8}; /* 2 * 2x, accumulated */
    assert_grad(x, 2, twice);
    /* the graph is freed now */
    assert_pt_status_error(pt_backward(y, NULL, false, false), PT_ERR_RUNTIME, "second time");
    /* .grad is unchanged by the failed call */
    assert_grad(x, 2, twice);
    /* clearing grad */
    assert_int_equal(pt_set_grad(x, NULL), PT_OK);
    assert_null(pt_grad(x));
}

static void test_backward_errors(void **state)
{
    (void)state;
    const double xv[2] = {1, 2};
    pt_tensor *c = vec(2, xv, false);
    assert_pt_status_error(pt_backward(c, NULL, false, false), PT_ERR_INVALID_ARG,
                           "does not require grad");
    pt_tensor *x = vec(2, xv, true);
    pt_tensor *y = t_square(x);
    assert_pt_status_error(pt_backward(y, NULL, false, false), PT_ERR_SHAPE,
                           "implicitly created only for scalar outputs");
    /* with an explicit gradient of the right shape it works */
    const double gv[2] = {1, 10};
    pt_tensor *g = vec(2, gv, false);
    pt_tensor *bad = pt_ones(PT_SHAPE(3), PT_FLOAT64, pt_cpu());
    assert_pt_status_error(pt_backward(y, bad, true, false), PT_ERR_SHAPE, "does not match");
    assert_int_equal(pt_backward(y, g, false, false), PT_OK);
    const double expect[2] = {2, 40};
    assert_grad(x, 2, expect);
    assert_pt_status_error(pt_backward(NULL, NULL, false, false), PT_ERR_NULL, "pt_backward");
    /* requires_grad rules */
    pt_tensor *i = pt_zeros(PT_SHAPE(2), PT_INT64, pt_cpu());
    assert_pt_status_error(pt_requires_grad_(i, true), PT_ERR_DTYPE, "floating point");
    assert_pt_status_error(pt_requires_grad_(y, false), PT_ERR_INVALID_ARG, "leaf");
}

static void test_grad_mode(void **state)
{
    (void)state;
    const double xv[2] = {1, 2};
    pt_tensor *x = vec(2, xv, true);
    assert_true(pt_grad_enabled());
    pt_no_grad_begin();
    pt_no_grad_begin();
    assert_false(pt_grad_enabled());
    pt_tensor *y = t_square(x);
    assert_false(pt_requires_grad(y));
    assert_null(pt_grad_fn_name(y));
    assert_true(pt_is_leaf(y));
    pt_no_grad_end();
    assert_false(pt_grad_enabled()); /* still inside the outer no_grad */
    pt_tensor *z = pt_clone(x);
    assert_false(pt_requires_grad(z));
    pt_no_grad_end();
    assert_true(pt_grad_enabled());
    pt_tensor *w = t_square(x);
    assert_true(pt_requires_grad(w));
    assert_string_equal(pt_grad_fn_name(w), "test_square");
    /* set_grad_enabled returns the previous mode */
    assert_true(pt_set_grad_enabled(false));
    assert_false(pt_set_grad_enabled(true));
    /* no input requires grad: nothing recorded */
    pt_tensor *c = vec(2, xv, false);
    pt_tensor *cc = t_square(c);
    assert_false(pt_requires_grad(cc));
    assert_null(pt_grad_fn_name(cc));
}

typedef struct hook_log {
    int calls;
    double factor;
    double first;
} hook_log;

static pt_tensor *observe_hook(const pt_tensor *g, void *user)
{
    hook_log *log = user;
    log->calls++;
    log->first = pt_test_get(g, 0);
    return NULL;
}

static pt_tensor *scale_hook(const pt_tensor *g, void *user)
{
    hook_log *log = user;
    log->calls++;
    return pt_mul_scalar(g, log->factor);
}

static void test_autograd_grad_allow_unused(void **state)
{
    (void)state;
    const double xv[2] = {1, 3}, zv[2] = {5, 6};
    pt_tensor *x = vec(2, xv, true), *z = vec(2, zv, true);
    pt_tensor *y = t_sum(t_square(x));
    pt_tensor *ins[2] = {x, z}, *grads[2] = {NULL, NULL};
    assert_pt_status_error(pt_autograd_grad(1, &y, NULL, 2, ins, true, false, false, grads),
                           PT_ERR_INVALID_ARG, "allow_unused");
    assert_null(grads[0]);
    assert_int_equal(pt_autograd_grad(1, &y, NULL, 2, ins, true, false, true, grads), PT_OK);
    const double expect[2] = {2, 6};
    assert_values(grads[0], 2, expect, 1e-12);
    assert_null(grads[1]);
    /* .grad untouched */
    assert_null(pt_grad(x));
    pt_release(grads[0]);
    /* gradient with respect to an intermediate */
    pt_tensor *h = t_scale(x, 4.0);
    pt_tensor *y2 = t_sum(t_square(h));
    pt_tensor *gh = NULL;
    assert_int_equal(pt_autograd_grad(1, &y2, NULL, 1, &h, false, false, false, &gh), PT_OK);
    const double expect_h[2] = {8, 24};
    assert_values(gh, 2, expect_h, 1e-12);
    pt_tensor *c = vec(2, xv, false);
    assert_pt_status_error(pt_autograd_grad(1, &y, NULL, 1, &c, false, false, false, grads),
                           PT_ERR_INVALID_ARG, "does not require grad");
    /* several outputs with their grad_outputs: d/dx (v1 . x^2 + v2 . 3x) */
    const double v1v[2] = {1, 10}, v2v[2] = {100, 1000};
    pt_tensor *o1 = t_square(x), *o2 = t_scale(x, 3.0);
    pt_tensor *outs[2] = {o1, o2}, *gos[2] = {vec(2, v1v, false), vec(2, v2v, false)};
    pt_tensor *gx = NULL;
    assert_int_equal(pt_autograd_grad(2, outs, gos, 1, &x, false, false, false, &gx), PT_OK);
    const double expect_m[2] = {2 * 1 * 1 + 300, 2 * 3 * 10 + 3000};
    assert_values(gx, 2, expect_m, 1e-12);
    /* only the part of the graph leading to the inputs runs: nodes below h keep their saved
     * tensors and hooks of other leaves do not fire */
    hook_log seen = {0, 0, 0};
    pt_tensor *x2 = vec(2, xv, true);
    assert_int_equal(pt_register_hook(x2, observe_hook, &seen), PT_OK);
    pt_tensor *hs = t_square(x2);
    pt_tensor *ya = t_sum(t_scale(hs, 2.0)), *gha = NULL;
    assert_int_equal(pt_autograd_grad(1, &ya, NULL, 1, &hs, false, false, false, &gha), PT_OK);
    const double twos[2] = {2, 2};
    assert_values(gha, 2, twos, 0);
    assert_int_equal(seen.calls, 0);
    pt_tensor *yb = t_sum(hs);
    assert_int_equal(pt_backward(yb, NULL, false, false), PT_OK);
    assert_int_equal(seen.calls, 1);
    const double gx2[2] = {2, 6};
    assert_grad(x2, 2, gx2);
    /* set_grad checks */
    pt_tensor *f32 = pt_zeros(PT_SHAPE(2), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_set_grad(x, f32), PT_ERR_DTYPE, "dtype");
    pt_tensor *wrong = pt_zeros(PT_SHAPE(3), PT_FLOAT64, pt_cpu());
    assert_pt_status_error(pt_set_grad(x, wrong), PT_ERR_SHAPE, "does not match");
}

static void test_create_graph_second_derivative(void **state)
{
    (void)state;
    const double xv[3] = {1, -2, 0.5};
    pt_tensor *x = vec(3, xv, true);
    pt_tensor *y = t_sum(t_mul(t_mul(x, x), x)); /* sum x^3 */
    pt_tensor *g = NULL;
    assert_int_equal(pt_autograd_grad(1, &y, NULL, 1, &x, false, true, false, &g), PT_OK);
    const double d1[3] = {3, 12, 0.75};
    assert_values(g, 3, d1, 1e-12);
    assert_true(pt_requires_grad(g));
    pt_tensor *s = t_sum(g), *g2 = NULL;
    assert_int_equal(pt_autograd_grad(1, &s, NULL, 1, &x, false, true, false, &g2), PT_OK);
    const double d2[3] = {6, -12, 3}; /* 6x */
    assert_values(g2, 3, d2, 1e-12);
    /* and a third: d/dx sum(6x) = 6 */
    pt_tensor *s2 = t_sum(g2), *g3 = NULL;
    assert_int_equal(pt_autograd_grad(1, &s2, NULL, 1, &x, false, false, false, &g3), PT_OK);
    const double d3[3] = {6, 6, 6};
    assert_values(g3, 3, d3, 1e-12);
    /* pt_backward with create_graph: x.grad carries history */
    pt_tensor *y4 = t_sum(t_mul(t_mul(x, x), x));
    assert_int_equal(pt_backward(y4, NULL, false, true), PT_OK);
    pt_tensor *xg = pt_grad(x);
    assert_values(xg, 3, d1, 1e-12);
    assert_true(pt_requires_grad(xg));
    pt_tensor *s3 = t_sum(xg), *h = NULL;
    assert_int_equal(pt_autograd_grad(1, &s3, NULL, 1, &x, false, false, false, &h), PT_OK);
    assert_values(h, 3, d2, 1e-12);
    pt_release(xg);
    pt_set_grad(x, NULL); /* break the x -> grad -> graph -> x cycle */
}

static void test_hooks_on_leaves_and_non_leaves(void **state)
{
    (void)state;
    const double xv[2] = {1, 2};
    pt_tensor *x = vec(2, xv, true);
    hook_log obs = {0, 0, 0}, leaf_scale = {0, 10, 0}, mid_scale = {0, 3, 0}, mid_obs = {0, 0, 0};
    pt_tensor *h = t_square(x);
    assert_int_equal(pt_register_hook(h, scale_hook, &mid_scale), PT_OK);
    assert_int_equal(pt_register_hook(h, observe_hook, &mid_obs), PT_OK);
    assert_int_equal(pt_register_hook(x, observe_hook, &obs), PT_OK);
    assert_int_equal(pt_register_hook(x, scale_hook, &leaf_scale), PT_OK);
    pt_tensor *y = t_sum(h);
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    assert_int_equal(mid_scale.calls, 1);
    assert_int_equal(mid_obs.calls, 1);
    assert_true(mid_obs.first == 3.0); /* hooks run in order: sees the replaced gradient */
    assert_int_equal(obs.calls, 1);
    assert_true(obs.first == 6.0);      /* 3 * 2x at x = 1 */
    const double expect[2] = {60, 120}; /* 10 * 3 * 2x */
    assert_grad(x, 2, expect);
    pt_tensor *c = vec(2, xv, false);
    assert_pt_status_error(pt_register_hook(c, observe_hook, &obs), PT_ERR_INVALID_ARG,
                           "doesn't require gradient");
}

static void test_retain_grad(void **state)
{
    (void)state;
    const double xv[2] = {1, -1};
    pt_tensor *x = vec(2, xv, true);
    pt_tensor *h = t_scale(x, 3.0), *h2 = t_scale(x, 5.0);
    assert_int_equal(pt_retain_grad(h), PT_OK);
    pt_tensor *y = t_sum(t_add(t_square(h), h2));
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    const double gh[2] = {6, -6}; /* 2h */
    assert_grad(h, 2, gh);
    assert_null(pt_grad(h2));       /* not retained */
    const double gx[2] = {23, -13}; /* 18x + 5 */
    assert_grad(x, 2, gx);
    /* the retained tensor can die before its node */
    pt_tensor *h3 = t_scale(x, 2.0);
    pt_retain_grad(h3);
    pt_tensor *y3 = t_sum(h3);
    pt_release(h3);
    assert_int_equal(pt_backward(y3, NULL, false, false), PT_OK);
}

static void test_anomaly_mode_names_the_op(void **state)
{
    (void)state;
    const double xv[2] = {1, 2};
    pt_tensor *x = vec(2, xv, true);
    pt_tensor *y = t_sum(t_square(apply1(&BAD, NULL, 1, &x)));
    pt_set_detect_anomaly(true);
    assert_true(pt_is_anomaly_enabled());
    assert_pt_status_error(pt_backward(y, NULL, true, false), PT_ERR_RUNTIME, "test_bad_op");
    pt_set_detect_anomaly(false);
    assert_null(pt_grad(x));
    /* without anomaly mode the NaN goes through */
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    pt_tensor *g = pt_grad(x);
    assert_true(isnan(pt_test_get(g, 0)));
    pt_release(g);
}

static void test_inplace_errors(void **state)
{
    (void)state;
    const double xv[2] = {1, 2}, ov[2] = {7, 8};
    pt_tensor *x = vec(2, xv, true), *o = vec(2, ov, false);
    /* a saved tensor modified in place */
    pt_tensor *h = pt_clone(x);
    pt_tensor *y = t_sum(t_square(h));
    assert_int_equal(pt_copy_(h, o), PT_OK);
    assert_pt_status_error(pt_backward(y, NULL, false, false), PT_ERR_RUNTIME,
                           "modified by an in-place operation");
    /* in-place on a leaf that requires grad */
    assert_pt_status_error(pt_copy_(x, o), PT_ERR_INVALID_ARG, "leaf tensor that requires grad");
    /* fine under no_grad (what optimizers do) */
    pt_no_grad_begin();
    assert_int_equal(pt_copy_(x, o), PT_OK);
    pt_no_grad_end();
    assert_values(x, 2, ov, 0);
}

static void test_detach(void **state)
{
    (void)state;
    const double xv[2] = {1, 2};
    pt_tensor *x = vec(2, xv, true);
    pt_tensor *h = t_square(x);
    pt_tensor *d = pt_detach(h);
    assert_true(pt_shares_storage(d, h));
    assert_false(pt_requires_grad(d));
    assert_true(pt_is_leaf(d));
    assert_null(pt_grad_fn_name(d));
    assert_null(pt_grad(d));
    pt_tensor *y = t_sum(t_mul(d, x)); /* gradient stops at d: dy/dx = x^2 */
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    const double expect[2] = {1, 4};
    assert_grad(x, 2, expect);
}

static void one_step(pt_tensor *x, pt_tensor *w)
{
    pt_scope_begin();
    pt_tensor *y = t_sum(t_mul(t_square(x), w));
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    pt_scope_end();
}

static void test_training_loop_memory_is_steady(void **state)
{
    (void)state;
    pt_tensor *x = pt_randn(PT_SHAPE(64, 64), PT_FLOAT32, pt_cpu());
    pt_tensor *w = pt_randn(PT_SHAPE(64, 64), PT_FLOAT32, pt_cpu());
    pt_requires_grad_(x, true);
    pt_requires_grad_(w, true);
    one_step(x, w);
    one_step(x, w);
    size_t live = pt_memory_allocated();
    uint64_t sys = pt_memory_system_allocs();
    for (int i = 0; i < 20; i++)
        one_step(x, w);
    assert_int_equal(pt_memory_allocated(), live);
    assert_int_equal(pt_memory_system_allocs(), sys);
    /* the graph is gone after each step: only x, w and their grads remain */
    size_t four = 4 * 64 * 64 * sizeof(float);
    assert_true(live >= four && live <= four + 4096);
}

static void test_long_chain_frees_without_recursion(void **state)
{
    (void)state;
    const double xv[1] = {1};
    pt_tensor *x = vec(1, xv, true);
    /* (pt_release on x itself would also take it out of the test's scope) */
    pt_tensor *h = x;
    for (int i = 0; i < 100000; i++) {
        pt_tensor *next = t_scale(h, 1.0);
        assert_non_null(next);
        if (h != x)
            pt_release(h);
        h = next;
    }
    pt_release(h); /* frees 100,000 nodes */
    h = x;
    for (int i = 0; i < 100000; i++) {
        pt_tensor *next = t_scale(h, 1.0);
        if (h != x)
            pt_release(h);
        h = next;
    }
    assert_int_equal(pt_backward(h, NULL, false, false), PT_OK);
    const double one[1] = {1};
    assert_grad(x, 1, one);
    pt_release(h);
}

/* ---- custom functions ------------------------------------------------------------------------ */

static void test_custom_multi_output(void **state)
{
    (void)state;
    const double xv[2] = {1, 2};
    pt_tensor *x = vec(2, xv, true);
    pt_tensor *outs[3];
    split2_backward_calls = 0;
    assert_int_equal(pt_function_apply(&SPLIT2, NULL, 1, &x, outs), PT_OK);
    assert_true(pt_requires_grad(outs[0]) && pt_requires_grad(outs[1]));
    assert_false(pt_requires_grad(outs[2])); /* integer output */
    assert_string_equal(pt_grad_fn_name(outs[1]), "test_split2");
    /* only the second output is used: the first gets zeros */
    pt_tensor *y = t_sum(outs[1]);
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    assert_int_equal(split2_backward_calls, 1);
    const double expect[2] = {3, 3};
    assert_grad(x, 2, expect);
    /* both outputs used: one backward call with both gradients */
    pt_set_grad(x, NULL);
    pt_tensor *y2 = t_add(t_sum(outs[0]), t_sum(outs[1]));
    assert_int_equal(pt_backward(y2, NULL, false, false), PT_OK);
    assert_int_equal(split2_backward_calls, 2);
    const double expect2[2] = {5, 5};
    assert_grad(x, 2, expect2);
    for (int k = 0; k < 3; k++)
        pt_release(outs[k]);
}

typedef struct ctx_probe {
    bool needs[2];
    int frees;
} ctx_probe;

static void probe_free(void *p)
{
    ((ctx_probe *)p)->frees++;
}

static pt_status probe_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)n;
    ctx_probe *p = pt_ctx_user(ctx);
    pt_ctx_set_data(ctx, p, probe_free);
    out[0] = pt_mul(in[0], in[1]);
    pt_tensor *save[2] = {in[0], out[0]};
    return out[0] ? pt_ctx_save_for_backward(ctx, 2, save) : pt_last_status();
}

static pt_status probe_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                           pt_tensor **gi)
{
    (void)n_out;
    (void)n_in;
    ctx_probe *p = pt_ctx_data(ctx);
    p->needs[0] = pt_ctx_needs_input_grad(ctx, 0);
    p->needs[1] = pt_ctx_needs_input_grad(ctx, 1);
    assert_int_equal(pt_ctx_n_saved(ctx), 2);
    /* d(a*b)/db = a = out / b; use the saved input a */
    pt_tensor *a = pt_ctx_saved(ctx, 0), *out = pt_ctx_saved(ctx, 1);
    if (!a || !out) { /* the version-counter error */
        pt_release(a);
        return pt_last_status();
    }
    gi[1] = pt_mul(g[0], a);
    gi[0] = pt_ones(PT_SHAPE(5), PT_FLOAT64, pt_cpu()); /* not needed: dropped */
    pt_release(a);
    pt_release(out);
    return PT_OK;
}

static const pt_function PROBE = {"test_probe", 1, probe_fwd, probe_bwd};

static pt_status wrong_shape_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                                 pt_tensor **gi)
{
    (void)ctx;
    (void)n_out;
    (void)n_in;
    (void)g;
    gi[0] = pt_ones(PT_SHAPE(5), PT_FLOAT64, pt_cpu());
    return PT_OK;
}

static const pt_function WRONG = {"test_wrong_shape", 1, bad_fwd, wrong_shape_bwd};

static void test_custom_context(void **state)
{
    (void)state;
    const double av[2] = {2, 3}, bv[2] = {4, 5};
    pt_tensor *a = vec(2, av, false), *b = vec(2, bv, true);
    ctx_probe probe = {{true, false}, 0};
    pt_tensor *in[2] = {a, b}, *out = NULL;
    assert_int_equal(pt_function_apply(&PROBE, &probe, 2, in, &out), PT_OK);
    pt_tensor *y = t_sum(out);
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    assert_false(probe.needs[0]);
    assert_true(probe.needs[1]);
    assert_grad(b, 2, av);
    assert_null(pt_grad(a));
    pt_release(y);
    pt_release(out); /* the graph dies: the ctx data is freed once */
    assert_int_equal(probe.frees, 1);
    /* not recording: data freed right away */
    ctx_probe p2 = {{false, false}, 0};
    pt_no_grad_begin();
    assert_int_equal(pt_function_apply(&PROBE, &p2, 2, in, &out), PT_OK);
    pt_no_grad_end();
    assert_int_equal(p2.frees, 1);
    assert_false(pt_requires_grad(out));
    pt_release(out);
    /* a saved output modified in place */
    static ctx_probe p3; /* outlives the test body: the graph dies at teardown */
    assert_int_equal(pt_function_apply(&PROBE, &p3, 2, in, &out), PT_OK);
    pt_tensor *y3 = t_sum(t_scale(out, 2.0));
    pt_tensor *o3 = pt_ones(PT_SHAPE(2), PT_FLOAT64, pt_cpu());
    pt_no_grad_begin();
    assert_int_equal(pt_copy_(out, o3), PT_OK);
    pt_no_grad_end();
    assert_pt_status_error(pt_backward(y3, NULL, false, false), PT_ERR_RUNTIME,
                           "modified by an in-place operation");
    /* wrong gradient shape from a user backward */
    pt_tensor *w = apply1(&WRONG, NULL, 1, &b);
    pt_tensor *yw = t_sum(w);
    assert_pt_status_error(pt_backward(yw, NULL, false, false), PT_ERR_SHAPE, "test_wrong_shape");
    /* argument errors */
    assert_pt_status_error(pt_function_apply(NULL, NULL, 1, &b, &out), PT_ERR_NULL,
                           "pt_function_apply");
    pt_tensor *none[1] = {NULL};
    assert_pt_status_error(pt_function_apply(&SQUARE, NULL, 1, none, &out), PT_ERR_NULL,
                           "pt_function_apply");
}

static pt_status identity_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)ctx;
    (void)n;
    out[0] = pt_retain(in[0]); /* returns its input itself */
    return PT_OK;
}

static const pt_function IDENTITY = {"test_identity", 1, identity_fwd, add_bwd};

static void test_custom_returning_its_input(void **state)
{
    (void)state;
    const double xv[2] = {1, 2};
    pt_tensor *x = vec(2, xv, true);
    pt_tensor *y = apply1(&IDENTITY, NULL, 1, &x);
    assert_true(y != x);
    assert_true(pt_is_leaf(x)); /* the input was not given history */
    assert_string_equal(pt_grad_fn_name(y), "test_identity");
    assert_true(pt_shares_storage(x, y));
}

/* ---- gradcheck ------------------------------------------------------------------------------- */

static pt_tensor *f_poly(int n, pt_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    /* x^2 * w + 3 x */
    pt_tensor *sq = t_square(in[0]);
    pt_tensor *m = t_mul(sq, in[1]);
    pt_tensor *s = t_scale(in[0], 3.0);
    pt_tensor *r = t_add(m, s);
    pt_release(sq);
    pt_release(m);
    pt_release(s);
    return r;
}

static pt_status square_wrong_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                                  pt_tensor **gi)
{
    (void)n_out;
    (void)n_in;
    pt_tensor *x = pt_ctx_saved(ctx, 0);
    pt_tensor *gx = t_mul(g[0], x);
    gi[0] = t_scale(gx, 2.01); /* 0.5% off */
    pt_release(gx);
    pt_release(x);
    return PT_OK;
}

static const pt_function SQUARE_WRONG = {"test_square_wrong", 1, square_fwd, square_wrong_bwd};

static pt_tensor *f_square_wrong(int n, pt_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return apply1(&SQUARE_WRONG, NULL, 1, in);
}

/* square whose backward is correct but not differentiable (computed on detached values) */
static pt_status square_flat_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                                 pt_tensor **gi)
{
    (void)n_out;
    (void)n_in;
    pt_tensor *x = pt_ctx_saved(ctx, 0);
    pt_tensor *xd = pt_detach(x);
    pt_tensor *gx = pt_mul(g[0], xd);
    gi[0] = pt_mul_scalar(gx, 2.0);
    pt_release(gx);
    pt_release(xd);
    pt_release(x);
    return PT_OK;
}

static const pt_function SQUARE_FLAT = {"test_square_flat", 1, square_fwd, square_flat_bwd};

static pt_tensor *f_square_flat(int n, pt_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    return apply1(&SQUARE_FLAT, NULL, 1, in);
}

static pt_tensor *f_cube_sum(int n, pt_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    pt_tensor *sq = t_square(in[0]);
    pt_tensor *c = t_mul(sq, in[0]);
    pt_tensor *s = t_sum(c);
    pt_release(sq);
    pt_release(c);
    return s;
}

static void test_gradcheck_passes_and_detects(void **state)
{
    (void)state;
    pt_manual_seed(1);
    pt_tensor *x = pt_randn(PT_SHAPE(3, 2), PT_FLOAT64, pt_cpu());
    pt_tensor *w = pt_randn(PT_SHAPE(3, 2), PT_FLOAT64, pt_cpu());
    pt_requires_grad_(x, true);
    pt_requires_grad_(w, true);
    pt_tensor *in[2] = {x, w};
    assert_true(pt_gradcheck(f_poly, NULL, 2, in, NULL));
    assert_true(pt_gradgradcheck(f_poly, NULL, 2, in, NULL));
    assert_true(pt_gradgradcheck(f_cube_sum, NULL, 1, in, NULL));
    /* a fixed (non-requiring) input */
    pt_tensor *wc = pt_detach(w);
    pt_tensor *in2[2] = {x, wc};
    assert_true(pt_gradcheck(f_poly, NULL, 2, in2, NULL));
    /* non-contiguous input */
    pt_tensor *xt = pt_test_noncontig(x);
    pt_requires_grad_(xt, true);
    assert_false(pt_is_contiguous(xt));
    pt_tensor *in3[2] = {xt, w};
    assert_true(pt_gradcheck(f_poly, NULL, 2, in3, NULL));
    /* .grad untouched, inputs restored */
    assert_null(pt_grad(x));
    pt_tensor *x0 = pt_detach(x);
    /* a wrong backward */
    assert_false(pt_gradcheck(f_square_wrong, NULL, 1, in, NULL));
    assert_int_equal(pt_last_status(), PT_ERR_RUNTIME);
    assert_non_null(strstr(pt_last_error(), "with respect to input 0 element ["));
    assert_non_null(strstr(pt_last_error(), "analytical"));
    assert_non_null(strstr(pt_last_error(), "numerical"));
    pt_clear_error();
    /* a correct first derivative with a non-differentiable backward */
    assert_true(pt_gradcheck(f_square_flat, NULL, 1, in, NULL));
    assert_false(pt_gradgradcheck(f_square_flat, NULL, 1, in, NULL));
    assert_int_equal(pt_last_status(), PT_ERR_RUNTIME);
    pt_clear_error();
    /* inputs are restored exactly */
    pt_tensor *x1 = pt_detach(x);
    assert_tensor_equal(x1, x0);
    /* argument errors */
    pt_tensor *f = pt_randn(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_requires_grad_(f, true);
    assert_false(pt_gradcheck(f_square_flat, NULL, 1, &f, NULL));
    assert_int_equal(pt_last_status(), PT_ERR_DTYPE);
    pt_clear_error();
    pt_tensor *c = pt_detach(x);
    assert_false(pt_gradcheck(f_square_flat, NULL, 1, &c, NULL));
    assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
    pt_clear_error();
    /* custom tolerances */
    pt_gradcheck_opts loose = {.atol = 1e-2, .rtol = 1e-2};
    assert_true(pt_gradcheck(f_square_wrong, NULL, 1, in, &loose));
}

/* ---- checkpointing --------------------------------------------------------------------------- */

static double drop_p = 0.5;

/* dropout as a custom op: saves the keep mask */
static pt_status drop_fwd(pt_autograd_ctx *ctx, int n, pt_tensor *const *in, pt_tensor **out)
{
    (void)n;
    pt_tensor *mask = NULL;
    out[0] = pt_dropout_mask(in[0], drop_p, true, &mask);
    pt_tensor *fmask = mask ? pt_to_dtype(mask, pt_dtype_of(in[0])) : NULL;
    pt_release(mask);
    pt_status st = out[0] && fmask ? pt_ctx_save_for_backward(ctx, 1, &fmask) : pt_last_status();
    pt_release(fmask);
    return st;
}

static pt_status drop_bwd(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *g, int n_in,
                          pt_tensor **gi)
{
    (void)n_out;
    (void)n_in;
    pt_tensor *m = pt_ctx_saved(ctx, 0);
    pt_tensor *gm = t_mul(g[0], m);
    gi[0] = t_scale(gm, 1.0 / (1.0 - drop_p));
    pt_release(gm);
    pt_release(m);
    return gi[0] ? PT_OK : pt_last_status();
}

static const pt_function DROP = {"test_dropout", 1, drop_fwd, drop_bwd};

/* h = dropout(x^2) * w, repeated `layers` times (w shared) */
static pt_tensor *block(int n, pt_tensor *const *in, void *user)
{
    (void)n;
    int layers = *(const int *)user;
    pt_tensor *h = in[0];
    for (int i = 0; i < layers; i++) {
        pt_tensor *sq = t_square(h);
        pt_tensor *d = apply1(&DROP, NULL, 1, &sq);
        pt_tensor *next = t_mul(d, in[1]);
        pt_release(sq);
        pt_release(d);
        if (h != in[0])
            pt_release(h);
        h = next;
    }
    return h;
}

typedef struct ckpt_of {
    pt_grad_fn fn;
    void *user;
} ckpt_of;

/* the same fixed seed for every evaluation, so the dropout mask is a constant of the function */
static pt_tensor *f_checkpointed(int n, pt_tensor *const *in, void *user)
{
    const ckpt_of *c = user;
    pt_manual_seed(11);
    return pt_checkpoint(c->fn, c->user, n, in);
}

static void test_checkpoint_matches_plain_graph(void **state)
{
    (void)state;
    int layers = 3;
    pt_manual_seed(7);
    pt_tensor *x = pt_rand(PT_SHAPE(4, 5), PT_FLOAT64, pt_cpu());
    pt_tensor *w = pt_rand(PT_SHAPE(4, 5), PT_FLOAT64, pt_cpu());
    pt_requires_grad_(x, true);
    pt_requires_grad_(w, true);
    pt_tensor *in[2] = {x, w};

    pt_manual_seed(42);
    pt_tensor *y = t_sum(block(2, in, &layers));
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    pt_tensor *gx = pt_grad(x), *gw = pt_grad(w);
    pt_set_grad(x, NULL);
    pt_set_grad(w, NULL);

    pt_manual_seed(42);
    pt_tensor *c = pt_checkpoint(block, &layers, 2, in);
    assert_non_null(c);
    assert_string_equal(pt_grad_fn_name(c), "checkpoint");
    pt_tensor *yc = t_sum(c);
    assert_tensor_equal(yc, y); /* same forward, same dropout masks */
    /* draw more random numbers before backward: the recomputation must not see them */
    pt_tensor *noise = pt_rand(PT_SHAPE(100), PT_FLOAT64, pt_cpu());
    pt_release(noise);
    assert_int_equal(pt_backward(yc, NULL, false, false), PT_OK);
    pt_tensor *cx = pt_grad(x), *cw = pt_grad(w);
    assert_tensor_close(cx, gx, 1e-12, 1e-12);
    assert_tensor_close(cw, gw, 1e-12, 1e-12);
    pt_release(gx);
    pt_release(gw);
    pt_release(cx);
    pt_release(cw);
    /* gradcheck through the checkpoint (dropout masks replayed for every evaluation) */
    int one_layer = 1;
    ckpt_of ck = {block, &one_layer};
    assert_true(pt_gradcheck(f_checkpointed, &ck, 2, in, NULL));
}

typedef struct ckpt_mem {
    int layers;
} ckpt_mem;

static pt_tensor *mul_chain(int n, pt_tensor *const *in, void *user)
{
    (void)n;
    int layers = ((const ckpt_mem *)user)->layers;
    pt_tensor *h = in[0];
    for (int i = 0; i < layers; i++) {
        pt_tensor *next = t_mul(h, in[1]);
        if (h != in[0])
            pt_release(h);
        h = next;
    }
    return h;
}

static void test_checkpoint_saves_memory(void **state)
{
    (void)state;
    ckpt_mem m = {6};
    pt_tensor *x = pt_rand(PT_SHAPE(128, 128), PT_FLOAT64, pt_cpu());
    pt_tensor *w = pt_rand(PT_SHAPE(128, 128), PT_FLOAT64, pt_cpu());
    pt_requires_grad_(x, true);
    pt_requires_grad_(w, true);
    pt_tensor *in[2] = {x, w};
    size_t one = 128 * 128 * sizeof(double);
    size_t base = pt_memory_allocated();
    pt_tensor *plain = mul_chain(2, in, &m);
    size_t plain_bytes = pt_memory_allocated() - base;
    pt_tensor *yp = t_sum(plain);
    assert_int_equal(pt_backward(yp, NULL, false, false), PT_OK);
    pt_tensor *gx = pt_grad(x), *gw = pt_grad(w);
    pt_set_grad(x, NULL);
    pt_set_grad(w, NULL);
    pt_release(yp);
    pt_release(plain);

    base = pt_memory_allocated();
    pt_tensor *ck = pt_checkpoint(mul_chain, &m, 2, in);
    size_t ck_bytes = pt_memory_allocated() - base;
    /* plain keeps the 5 intermediate products saved by the next mul, plus the output */
    assert_true(plain_bytes >= 6 * one);
    assert_true(ck_bytes <= one + 1024); /* only the output */
    pt_tensor *yc = t_sum(ck);
    assert_int_equal(pt_backward(yc, NULL, false, false), PT_OK);
    pt_tensor *cx = pt_grad(x), *cw = pt_grad(w);
    assert_tensor_close(cx, gx, 1e-12, 0);
    assert_tensor_close(cw, gw, 1e-12, 0);
    pt_release(gx);
    pt_release(gw);
    pt_release(cx);
    pt_release(cw);
    /* errors */
    assert_pt_error(pt_checkpoint(NULL, NULL, 2, in), PT_ERR_NULL, "pt_checkpoint");
}

/* ---- differentiable conversions ----------------------------------------------------------------
 */

static pt_tensor *f_clone_sq(int n, pt_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    pt_tensor *c = pt_clone(in[0]);
    pt_tensor *r = t_square(c);
    pt_release(c);
    return r;
}

static pt_tensor *f_contig_sq(int n, pt_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    pt_tensor *c = pt_contiguous(in[0]);
    pt_tensor *r = t_square(c);
    pt_release(c);
    return r;
}

static pt_tensor *f_to_sq(int n, pt_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    pt_tensor *c = pt_to(in[0], pt_cpu());
    pt_tensor *d = pt_to_dtype(c, PT_FLOAT64);
    pt_tensor *r = t_square(d);
    pt_release(c);
    pt_release(d);
    return r;
}

/* dst[2,3] (float64) <- src[3] broadcast, then dst^2 */
static pt_tensor *f_copy_sq(int n, pt_tensor *const *in, void *user)
{
    (void)n;
    (void)user;
    pt_tensor *dst = pt_zeros(PT_SHAPE(2, 3), PT_FLOAT64, pt_cpu());
    if (pt_copy_(dst, in[0]) != PT_OK) {
        pt_release(dst);
        return NULL;
    }
    pt_tensor *r = t_square(dst);
    pt_release(dst);
    return r;
}

static void test_conversions_are_differentiable(void **state)
{
    (void)state;
    pt_manual_seed(3);
    pt_tensor *x = pt_randn(PT_SHAPE(3, 4), PT_FLOAT64, pt_cpu());
    pt_requires_grad_(x, true);
    pt_tensor *c = pt_clone(x);
    assert_string_equal(pt_grad_fn_name(c), "clone");
    assert_true(pt_gradcheck(f_clone_sq, NULL, 1, &x, NULL));
    assert_true(pt_gradgradcheck(f_clone_sq, NULL, 1, &x, NULL));
    pt_tensor *xt = pt_test_noncontig(x);
    pt_requires_grad_(xt, true);
    assert_true(pt_gradcheck(f_contig_sq, NULL, 1, &xt, NULL)); /* copies */
    assert_true(pt_gradcheck(f_contig_sq, NULL, 1, &x, NULL));  /* aliases */
    pt_tensor *a = pt_contiguous(x);
    assert_true(pt_shares_storage(a, x));
    assert_true(pt_requires_grad(a));
    assert_true(pt_gradcheck(f_to_sq, NULL, 1, &x, NULL));
    /* copy_: broadcast src of another dtype into dst */
    pt_tensor *s = pt_randn(PT_SHAPE(3), PT_FLOAT64, pt_cpu());
    pt_requires_grad_(s, true);
    assert_true(pt_gradcheck(f_copy_sq, NULL, 1, &s, NULL));
    /* to_dtype float64 -> float32: grad cast back to float64 */
    pt_tensor *f = pt_to_dtype(x, PT_FLOAT32);
    assert_string_equal(pt_grad_fn_name(f), "to_dtype");
    pt_tensor *y = t_sum(t_scale(f, 2.0));
    assert_int_equal(pt_backward(y, NULL, false, false), PT_OK);
    pt_tensor *g = pt_grad(x);
    assert_int_equal(pt_dtype_of(g), PT_FLOAT64);
    pt_tensor *twos = pt_full(PT_SHAPE(3, 4), 2.0, PT_FLOAT64, pt_cpu());
    assert_tensor_equal(g, twos);
    pt_release(g);
    /* copy_ with a float32 src into a float64 dst: src's grad is float32 and summed */
    pt_tensor *s32 = pt_ones(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_requires_grad_(s32, true);
    pt_tensor *dst = pt_zeros(PT_SHAPE(2, 3), PT_FLOAT64, pt_cpu());
    assert_int_equal(pt_copy_(dst, s32), PT_OK);
    assert_string_equal(pt_grad_fn_name(dst), "copy_");
    pt_tensor *yd = t_sum(t_scale(dst, 1.5));
    assert_int_equal(pt_backward(yd, NULL, false, false), PT_OK);
    pt_tensor *gs = pt_grad(s32);
    pt_tensor *threes = pt_full(PT_SHAPE(3), 3.0, PT_FLOAT32, pt_cpu());
    assert_tensor_equal(gs, threes);
    pt_release(gs);
    /* to an integer dtype: not differentiable */
    pt_tensor *i = pt_to_dtype(x, PT_INT32);
    assert_false(pt_requires_grad(i));
    /* as_strided refuses to record */
    assert_pt_error(pt_as_strided(x, PT_SHAPE(2), (const int64_t[]){1}, 0), PT_ERR_UNSUPPORTED,
                    "not differentiable");
    pt_no_grad_begin();
    pt_tensor *v = pt_as_strided(x, PT_SHAPE(2), (const int64_t[]){1}, 0);
    pt_no_grad_end();
    assert_non_null(v);
}

/* ---- the example program of docs/autograd.md ------------------------------------------------ */

#define main autograd_doc_example_main
#include "../docs/examples/autograd_custom_op.c"
#undef main

static char *read_text(const char *rel)
{
    /* rel is relative to the source tree: PT_FIXTURES_DIR (tests/fixtures, the absolute path
     * CMake passes) is two levels below it */
    char path[4096];
    snprintf(path, sizeof path, "%s/../../%s", PT_FIXTURES_DIR, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[2][1 << 16];
    static int which;
    char *b = buf[which++ & 1];
    size_t n = fread(b, 1, sizeof buf[0] - 1, f);
    fclose(f);
    b[n] = 0;
    return b;
}

/* Writing in place through a view while recording would leave the base's history stale
 * (no CopySlices): it must be a clear error, and fine under no-grad or on a clone. */
static void test_inplace_on_view_is_refused(void **state)
{
    (void)state;
    pt_tensor *x = pt_ones(PT_SHAPE(2, 3), PT_FLOAT64, pt_cpu());
    pt_requires_grad_(x, true);
    pt_tensor *y = pt_mul_scalar(x, 2.0);
    pt_tensor *row = pt_select(y, 0, 0);
    assert_pt_status_error(pt_mul_scalar_(row, 3.0), PT_ERR_UNSUPPORTED, "view");
    pt_tensor *ycopy = pt_clone(row);
    assert_int_equal(pt_mul_scalar_(ycopy, 3.0), PT_OK);
    pt_no_grad_begin();
    assert_int_equal(pt_mul_scalar_(row, 3.0), PT_OK);
    pt_no_grad_end();
    assert_true(pt_test_get(y, 0) == 6.0 && pt_test_get(y, 3) == 2.0);
}

static void test_doc_example_runs_and_is_in_the_doc(void **state)
{
    (void)state;
    assert_int_equal(autograd_doc_example_main(), 0);
    const char *code = read_text("docs/examples/autograd_custom_op.c");
    const char *doc = read_text("docs/autograd.md");
    assert_non_null(code);
    assert_non_null(doc);
    assert_non_null(strstr(doc, code));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_accumulation_when_tensor_feeds_several_ops,
                                        pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_diamond_graph, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_retain_graph_and_second_backward_error, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_backward_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_grad_mode, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_autograd_grad_allow_unused, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_create_graph_second_derivative, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_hooks_on_leaves_and_non_leaves, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_retain_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_anomaly_mode_names_the_op, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_inplace_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_detach, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_training_loop_memory_is_steady, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_long_chain_frees_without_recursion, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_custom_multi_output, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_custom_context, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_custom_returning_its_input, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gradcheck_passes_and_detects, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_matches_plain_graph, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_saves_memory, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_conversions_are_differentiable, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_inplace_on_view_is_refused, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_doc_example_runs_and_is_in_the_doc, pt_test_setup,
                                        pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
