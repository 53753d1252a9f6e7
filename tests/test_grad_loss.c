/* Gradient tests of the loss family: a central-difference gradcheck (float64, PyTorch's
 * tolerances) of every loss with every reduction -- class weights, ignore_index, label
 * smoothing, probability targets, K-dim and unbatched cross entropy, broadcasting,
 * non-contiguous inputs, target gradients -- a gradgradcheck of mse, cross_entropy and
 * binary_cross_entropy_with_logits, and the autograd error paths around losses.
 * The checker is private until the engine's pt_gradcheck lands. */
#include "testutil.h"

#include <math.h>
#include <string.h>

#define GC_EPS 1e-6
#define GC_ATOL 1e-5
#define GC_RTOL 1e-3
#define MAX_IN 4

typedef pt_tensor *(*loss_fn)(pt_tensor *const *in, const void *ctx);

/* ---- the checker --------------------------------------------------------------------------- */

/* A deterministic, kink-free float64 tensor: scale * sin(1.3 k + phase) + shift. */
static pt_tensor *wave(int nd, const int64_t *shape, double scale, double phase, double shift)
{
    pt_tensor *t = pt_empty(nd, shape, PT_FLOAT64, pt_cpu());
    double *p = pt_data_ptr(t);
    for (int64_t k = 0; k < pt_numel(t); k++)
        p[k] = scale * sin(1.3 * (double)k + phase) + shift;
    return t;
}

/* Weights of the output: the directional derivative sum(out * v) is what gets checked. */
static pt_tensor *out_weights(const pt_tensor *out)
{
    pt_tensor *v = pt_empty(pt_ndim(out), pt_shape(out), PT_FLOAT64, pt_cpu());
    double *p = pt_data_ptr(v);
    for (int64_t k = 0; k < pt_numel(v); k++)
        p[k] = 0.7 + 0.3 * cos(0.9 * (double)k);
    return v;
}

static double weighted_sum(const pt_tensor *out, const pt_tensor *v)
{
    pt_tensor *o = pt_to_dtype(out, PT_FLOAT64);
    pt_tensor *oc = pt_contiguous(o);
    const double *a = pt_data_ptr(oc), *b = pt_data_ptr(v);
    double s = 0;
    for (int64_t k = 0; k < pt_numel(oc); k++)
        s += a[k] * b[k];
    pt_release(oc);
    pt_release(o);
    return s;
}

/* Address of element k (row-major) of a strided CPU float64 tensor. */
static double *elem(pt_tensor *t, int64_t k)
{
    int64_t off = 0;
    for (int d = pt_ndim(t) - 1; d >= 0; d--) {
        off += (k % pt_shape(t)[d]) * pt_stride(t)[d];
        k /= pt_shape(t)[d];
    }
    return (double *)pt_data_ptr(t) + off;
}

/* Compares the gradient of sum(fn(in) * v) with respect to every input that requires grad
 * with central differences. */
static void gradcheck(loss_fn fn, const void *ctx, int n, pt_tensor *const *in)
{
    pt_tensor *out = fn(in, ctx);
    if (!out)
        fail_msg("forward failed: %s", pt_last_error());
    pt_tensor *v = out_weights(out);
    pt_tensor *leaves[MAX_IN], *grads[MAX_IN] = {0};
    int nl = 0;
    for (int i = 0; i < n; i++)
        if (in[i] && pt_requires_grad(in[i]))
            leaves[nl++] = in[i];
    assert_true(nl > 0);
    pt_tensor *vo = pt_to_dtype(v, pt_dtype_of(out));
    pt_status st = pt_autograd_grad(1, &out, &vo, nl, leaves, false, false, false, grads);
    pt_release(vo);
    pt_release(out);
    if (st != PT_OK)
        fail_msg("backward failed: %s", pt_last_error());
    for (int i = 0; i < nl; i++) {
        assert_non_null(grads[i]);
        assert_int_equal(pt_ndim(grads[i]), pt_ndim(leaves[i]));
        assert_memory_equal(pt_shape(grads[i]), pt_shape(leaves[i]),
                            sizeof(int64_t) * (size_t)pt_ndim(leaves[i]));
        assert_int_equal(pt_dtype_of(grads[i]), pt_dtype_of(leaves[i]));
        pt_tensor *gc = pt_contiguous(grads[i]);
        const double *ga = pt_data_ptr(gc);
        for (int64_t k = 0; k < pt_numel(leaves[i]); k++) {
            double *x = elem(leaves[i], k), x0 = *x;
            *x = x0 + GC_EPS;
            pt_tensor *o1 = fn(in, ctx);
            *x = x0 - GC_EPS;
            pt_tensor *o2 = fn(in, ctx);
            *x = x0;
            assert_non_null(o1);
            assert_non_null(o2);
            double num = (weighted_sum(o1, v) - weighted_sum(o2, v)) / (2 * GC_EPS);
            pt_release(o1);
            pt_release(o2);
            if (!(fabs(ga[k] - num) <= GC_ATOL + GC_RTOL * fabs(num)))
                fail_msg("input %d element %lld: analytic %.10g, numeric %.10g", i, (long long)k,
                         ga[k], num);
        }
        pt_release(gc);
        pt_release(grads[i]);
    }
    pt_release(v);
}

/* gradgradcheck: checks the gradient of sum_i <d sum(fn * v)/d in_i, u_i> (the first
 * derivatives computed with create_graph) the same way. */
typedef struct gg_ctx {
    loss_fn fn;
    const void *ctx;
    int n;
} gg_ctx;

static pt_tensor *first_grads_dot(pt_tensor *const *in, const void *vctx)
{
    const gg_ctx *g = vctx;
    pt_tensor *out = g->fn(in, g->ctx);
    if (!out)
        return NULL;
    pt_tensor *v = out_weights(out);
    pt_tensor *leaves[MAX_IN], *grads[MAX_IN] = {0};
    int nl = 0;
    for (int i = 0; i < g->n; i++)
        if (in[i] && pt_requires_grad(in[i]))
            leaves[nl++] = in[i];
    pt_status st = pt_autograd_grad(1, &out, &v, nl, leaves, true, true, false, grads);
    pt_release(out);
    pt_release(v);
    if (st != PT_OK)
        return NULL;
    pt_tensor *s = NULL;
    for (int i = 0; i < nl; i++) {
        pt_tensor *u = wave(pt_ndim(grads[i]), pt_shape(grads[i]), 0.5, 0.3 * i + 0.1, 0.2);
        pt_tensor *p = pt_mul(grads[i], u);
        pt_tensor *ps = pt_sum(p);
        pt_tensor *ns = s ? pt_add(s, ps) : pt_retain(ps);
        pt_release(s);
        s = ns;
        pt_release(ps);
        pt_release(p);
        pt_release(u);
        pt_release(grads[i]);
    }
    return s;
}

static void gradgradcheck(loss_fn fn, const void *ctx, int n, pt_tensor *const *in)
{
    gg_ctx g = {fn, ctx, n};
    gradcheck(first_grads_dot, &g, n, in);
}

static pt_tensor *leaf(pt_tensor *t)
{
    pt_requires_grad_(t, true);
    return t;
}

/* A non-contiguous leaf with t's values (every other column of a wider tensor). */
static pt_tensor *noncontig_leaf(pt_tensor *t)
{
    pt_tensor *nc = pt_test_noncontig(t);
    assert_false(pt_is_contiguous(nc));
    pt_release(t);
    return leaf(nc);
}

static const pt_reduction reds[3] = {PT_REDUCTION_MEAN, PT_REDUCTION_SUM, PT_REDUCTION_NONE};

/* ---- elementwise losses ---------------------------------------------------------------------- */

typedef enum { MSE, L1, SMOOTH_L1, HUBER, BCE, BCE_LOGITS, KL_DIV } pw_kind;

typedef struct pw_ctx {
    pw_kind kind;
    pt_reduction red;
    double beta;
    bool log_target;
} pw_ctx;

/* in = {input, target, weight, pos_weight} */
static pt_tensor *pw_loss(pt_tensor *const *in, const void *vctx)
{
    const pw_ctx *c = vctx;
    switch (c->kind) {
    case MSE: return pt_mse_loss(in[0], in[1], c->red);
    case L1: return pt_l1_loss(in[0], in[1], c->red);
    case SMOOTH_L1: return pt_smooth_l1_loss(in[0], in[1], c->red, c->beta);
    case HUBER: return pt_huber_loss(in[0], in[1], c->red, c->beta);
    case BCE: return pt_binary_cross_entropy(in[0], in[1], in[2], c->red);
    case BCE_LOGITS: return pt_binary_cross_entropy_with_logits(in[0], in[1], in[2], c->red, in[3]);
    case KL_DIV: return pt_kl_div(in[0], in[1], c->red, c->log_target);
    }
    return NULL;
}

static void check_pw_all_reds(pw_ctx c, pt_tensor *const *in, bool batchmean)
{
    for (int r = 0; r < 3 + (batchmean ? 1 : 0); r++) {
        c.red = r < 3 ? reds[r] : PT_REDUCTION_BATCHMEAN;
        gradcheck(pw_loss, &c, 4, in);
    }
}

static void release4(pt_tensor **in)
{
    for (int i = 0; i < 4; i++)
        pt_release(in[i]);
}

static void test_regression_grads(void **state)
{
    (void)state;
    int64_t s34[2] = {3, 4}, s4[1] = {4};
    pw_ctx cases[] = {{MSE, 0, 0, false},         {L1, 0, 0, false},
                      {SMOOTH_L1, 0, 1.0, false}, {SMOOTH_L1, 0, 0.5, false},
                      {SMOOTH_L1, 0, 0.0, false}, {HUBER, 0, 1.0, false},
                      {HUBER, 0, 0.7, false}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        /* same shapes, both require grad */
        pt_tensor *in[4] = {leaf(wave(2, s34, 1.5, 0.0, 0.1)), leaf(wave(2, s34, 1.2, 1.0, -0.2)),
                            NULL, NULL};
        check_pw_all_reds(cases[k], in, false);
        release4(in);
        /* broadcast target, non-contiguous input */
        pt_tensor *in2[4] = {noncontig_leaf(wave(2, s34, 1.5, 0.4, 0.0)),
                             leaf(wave(1, s4, 1.0, 2.0, 0.3)), NULL, NULL};
        check_pw_all_reds(cases[k], in2, false);
        release4(in2);
        /* broadcast input (the gradient is summed back to [4]), constant target */
        pt_tensor *in3[4] = {leaf(wave(1, s4, 1.0, 0.7, 0.0)), wave(2, s34, 1.4, 2.5, 0.1), NULL,
                             NULL};
        check_pw_all_reds(cases[k], in3, false);
        release4(in3);
    }
}

static void test_bce_grads(void **state)
{
    (void)state;
    int64_t s34[2] = {3, 4}, s4[1] = {4};
    pw_ctx c = {BCE, 0, 0, false};
    /* probabilities in (0.1, 0.9), soft targets in (0, 1) that require grad, weight [4] */
    pt_tensor *in[4] = {leaf(wave(2, s34, 0.4, 0.0, 0.5)), leaf(wave(2, s34, 0.45, 1.1, 0.5)),
                        wave(1, s4, 0.5, 0.3, 1.0), NULL};
    check_pw_all_reds(c, in, false);
    pt_release(in[2]);
    in[2] = NULL;
    check_pw_all_reds(c, in, false);
    release4(in);
    pt_tensor *in2[4] = {noncontig_leaf(wave(2, s34, 0.4, 0.2, 0.5)), wave(2, s34, 0.5, 0.9, 0.5),
                         NULL, NULL};
    check_pw_all_reds(c, in2, false);
    release4(in2);

    c.kind = BCE_LOGITS;
    pt_tensor *in3[4] = {leaf(wave(2, s34, 3.0, 0.0, 0.0)), leaf(wave(2, s34, 0.45, 1.1, 0.5)),
                         wave(2, s34, 0.5, 0.3, 1.0), wave(1, s4, 0.8, 0.5, 1.5)};
    check_pw_all_reds(c, in3, false); /* weight and pos_weight */
    pt_release(in3[3]);
    in3[3] = NULL;
    check_pw_all_reds(c, in3, false); /* weight only */
    in3[3] = in3[2];                  /* pos_weight [3, 4] */
    in3[2] = NULL;
    check_pw_all_reds(c, in3, false); /* pos_weight only */
    release4(in3);
    pt_tensor *in4[4] = {noncontig_leaf(wave(2, s34, 2.0, 0.6, 0.0)), wave(2, s34, 0.5, 0.9, 0.5),
                         NULL, NULL};
    check_pw_all_reds(c, in4, false);
    release4(in4);
}

static void test_kl_div_grads(void **state)
{
    (void)state;
    int64_t s34[2] = {3, 4}, s4[1] = {4};
    pw_ctx c = {KL_DIV, 0, 0, false};
    /* log-probability inputs, positive targets */
    pt_tensor *in[4] = {leaf(wave(2, s34, 0.8, 0.0, -1.5)), leaf(wave(2, s34, 0.2, 1.1, 0.3)), NULL,
                        NULL};
    check_pw_all_reds(c, in, true);
    c.log_target = true;
    pt_release(in[1]);
    in[1] = leaf(wave(2, s34, 0.6, 1.1, -1.2));
    check_pw_all_reds(c, in, true);
    release4(in);
    /* broadcast target, non-contiguous input */
    pt_tensor *in2[4] = {noncontig_leaf(wave(2, s34, 0.8, 0.4, -1.5)),
                         leaf(wave(1, s4, 0.2, 2.0, 0.4)), NULL, NULL};
    c.log_target = false;
    check_pw_all_reds(c, in2, true);
    c.log_target = true;
    check_pw_all_reds(c, in2, true);
    release4(in2);
}

/* ---- cross_entropy and nll_loss -------------------------------------------------------------- */

typedef struct cls_ctx {
    bool nll;
    pt_cross_entropy_opts o;
} cls_ctx;

/* in = {input, target, weight} */
static pt_tensor *cls_loss(pt_tensor *const *in, const void *vctx)
{
    const cls_ctx *c = vctx;
    pt_cross_entropy_opts o = c->o;
    o.weight = in[2];
    if (c->nll) {
        pt_nll_loss_opts no = {o.weight, o.has_ignore_index, o.ignore_index, o.reduction};
        return pt_nll_loss_ex(in[0], in[1], &no);
    }
    return pt_cross_entropy_ex(in[0], in[1], &o);
}

static pt_tensor *int_target(int nd, const int64_t *shape, const int64_t *vals)
{
    return pt_from_data(vals, nd, shape, PT_INT64, pt_cpu());
}

/* The input gradient of the fused first-order kernel (pt_cross_entropy_backward /
 * pt_nll_loss_backward, used without create_graph) equals the composed formula (used with
 * create_graph). */
static void fused_vs_composed(loss_fn fn, const void *ctx, int n, pt_tensor *const *in)
{
    (void)n;
    pt_tensor *g[2][MAX_IN] = {{0}};
    for (int cg = 0; cg < 2; cg++) {
        pt_tensor *out = fn(in, ctx);
        assert_non_null(out);
        pt_tensor *v = out_weights(out);
        assert_int_equal(pt_autograd_grad(1, &out, &v, 1, in, false, cg == 1, false, g[cg]), PT_OK);
        pt_release(v);
        pt_release(out);
    }
    assert_tensor_close(g[0][0], g[1][0], 1e-12, 1e-12);
    pt_release(g[0][0]);
    pt_release(g[1][0]);
}

static void (*cls_checker)(loss_fn, const void *, int, pt_tensor *const *) = gradcheck;

static void check_cls_all_reds(cls_ctx c, pt_tensor *const *in)
{
    for (int r = 0; r < 3; r++) {
        c.o.reduction = reds[r];
        cls_checker(cls_loss, &c, 3, in);
    }
}

/* Every option combination on one input and its targets: in_nw = {input, target (default
 * ignore_index -100), target for ignore_index 1 (no -100 in it)}. */
static void check_cls_options(bool nll, pt_tensor *const *in_nw, const pt_tensor *weight)
{
    pt_tensor *in[3] = {in_nw[0], in_nw[1], NULL};
    for (int w = 0; w < 2; w++) {
        in[2] = w ? (pt_tensor *)weight : NULL;
        cls_ctx c = {.nll = nll};
        in[1] = in_nw[1];
        check_cls_all_reds(c, in);
        if (!nll) {
            c.o.label_smoothing = 0.2;
            check_cls_all_reds(c, in);
            c.o.label_smoothing = 0;
        }
        c.o.has_ignore_index = true;
        c.o.ignore_index = 1;
        in[1] = in_nw[2];
        check_cls_all_reds(c, in);
        if (!nll) {
            c.o.label_smoothing = 0.2;
            check_cls_all_reds(c, in);
        }
    }
}

static void cross_entropy_cases(void)
{
    int64_t s45[2] = {4, 5}, s4[1] = {4}, s5[1] = {5};
    int64_t t4[4] = {2, -100, 1, 4}, t4b[4] = {2, 0, 1, 4};
    pt_tensor *w = wave(1, s5, 0.5, 0.2, 1.0);
    /* [N, C] with an ignored target */
    pt_tensor *in[3] = {leaf(wave(2, s45, 1.5, 0.0, 0.0)), int_target(1, s4, t4),
                        int_target(1, s4, t4b)};
    check_cls_options(false, in, w);
    check_cls_options(true, in, w);
    pt_release(in[0]);
    /* non-contiguous logits */
    in[0] = noncontig_leaf(wave(2, s45, 1.5, 0.3, 0.0));
    check_cls_options(false, in, w);
    pt_release(in[0]);
    pt_release(in[1]);
    pt_release(in[2]);
    /* K-dim: [N, C, d1, d2] = [2, 5, 2, 3] */
    int64_t sk[4] = {2, 5, 2, 3}, tk[3] = {2, 2, 3};
    int64_t tkv[12] = {0, 4, 1, 3, 2, 1, 1, 0, 4, 4, 3, 2};
    pt_tensor *tgk = int_target(3, tk, tkv);
    pt_tensor *ink[3] = {leaf(wave(4, sk, 1.5, 0.5, 0.0)), tgk, tgk};
    check_cls_options(false, ink, w);
    check_cls_options(true, ink, w);
    pt_release(ink[0]);
    pt_release(ink[1]);
    /* unbatched [C] with a 0-dim target */
    int64_t t0 = 3;
    pt_tensor *tgu = int_target(0, NULL, &t0);
    pt_tensor *inu[3] = {leaf(wave(1, s5, 1.5, 0.9, 0.0)), tgu, tgu};
    check_cls_options(false, inu, w);
    check_cls_options(true, inu, w);
    pt_release(inu[0]);
    pt_release(inu[1]);
    pt_release(w);
}

/* Softmax-normalized float64 probabilities of the given shape along dim 1 (or 0 for 1-D). */
static pt_tensor *prob_target(int nd, const int64_t *shape, double phase)
{
    pt_tensor *r = wave(nd, shape, 1.0, phase, 0.0);
    pt_tensor *p = pt_softmax(r, nd == 1 ? 0 : 1);
    pt_release(r);
    return p;
}

static void cross_entropy_prob_cases(void)
{
    int64_t s45[2] = {4, 5}, s5[1] = {5}, sk[3] = {2, 5, 3};
    pt_tensor *w = wave(1, s5, 0.5, 0.2, 1.0);
    pt_tensor *cases[4][2] = {
        {leaf(wave(2, s45, 1.5, 0.0, 0.0)), leaf(prob_target(2, s45, 0.7))},
        {leaf(wave(3, sk, 1.5, 0.5, 0.0)), leaf(prob_target(3, sk, 0.1))},
        {noncontig_leaf(wave(2, s45, 1.5, 0.3, 0.0)), leaf(prob_target(2, s45, 1.7))},
        {leaf(wave(1, s5, 1.5, 0.8, 0.0)), leaf(prob_target(1, s5, 0.4))}}; /* unbatched */
    for (int k = 0; k < 4; k++) {
        for (int wi = 0; wi < 2; wi++) {
            pt_tensor *in[3] = {cases[k][0], cases[k][1], wi ? w : NULL};
            cls_ctx c = {.nll = false};
            check_cls_all_reds(c, in);
            c.o.label_smoothing = 0.3;
            check_cls_all_reds(c, in);
        }
        pt_release(cases[k][0]);
        pt_release(cases[k][1]);
    }
    pt_release(w);
}

static void test_cross_entropy_grads(void **state)
{
    (void)state;
    cls_checker = gradcheck;
    cross_entropy_cases();
}

static void test_cross_entropy_prob_grads(void **state)
{
    (void)state;
    cls_checker = gradcheck;
    cross_entropy_prob_cases();
}

static void test_fused_class_backward(void **state)
{
    (void)state;
    cls_checker = fused_vs_composed;
    cross_entropy_cases();
    cross_entropy_prob_cases();
    cls_checker = gradcheck;
    /* the public backward ops check their arguments */
    int64_t s45[2] = {4, 5}, s4[1] = {4}, t4[4] = {0, 1, 2, 7};
    pt_tensor *x = wave(2, s45, 1.0, 0.0, 0.0), *y = int_target(1, s4, t4);
    pt_tensor *g0 = pt_scalar_tensor(1.0, PT_FLOAT64, pt_cpu()), *g1 = wave(1, s4, 1, 0, 0);
    assert_pt_error(pt_cross_entropy_backward(g0, x, y, NULL), PT_ERR_INDEX,
                    "target 7 is out of bounds for 5 classes");
    assert_pt_error(pt_cross_entropy_backward(g1, x, y, NULL), PT_ERR_SHAPE,
                    "grad_output [4] must have the loss's shape []");
    pt_nll_loss_opts no = {.reduction = PT_REDUCTION_NONE};
    assert_pt_error(pt_nll_loss_backward(g0, x, y, &no), PT_ERR_SHAPE,
                    "grad_output [] must have the loss's shape [4]");
    assert_pt_error(pt_nll_loss_backward(NULL, x, y, NULL), PT_ERR_NULL, "grad_output");
    pt_release(x);
    pt_release(y);
    pt_release(g0);
    pt_release(g1);
}

/* ---- double backward ------------------------------------------------------------------------- */

static void test_gradgrad(void **state)
{
    (void)state;
    int64_t s34[2] = {3, 4}, s4[1] = {4}, s45[2] = {4, 5}, s5[1] = {5};
    pt_tensor *in[4] = {leaf(wave(2, s34, 1.5, 0.0, 0.1)), leaf(wave(1, s4, 1.2, 1.0, -0.2)), NULL,
                        NULL};
    for (int r = 0; r < 3; r++) {
        pw_ctx c = {MSE, reds[r], 0, false};
        gradgradcheck(pw_loss, &c, 4, in);
    }
    release4(in);
    pt_tensor *inb[4] = {leaf(wave(2, s34, 2.0, 0.0, 0.0)), leaf(wave(2, s34, 0.45, 1.1, 0.5)),
                         wave(2, s34, 0.5, 0.3, 1.0), wave(1, s4, 0.8, 0.5, 1.5)};
    for (int r = 0; r < 3; r++) {
        pw_ctx c = {BCE_LOGITS, reds[r], 0, false};
        gradgradcheck(pw_loss, &c, 4, inb);
    }
    release4(inb);
    int64_t t4[4] = {2, -100, 1, 4};
    pt_tensor *w = wave(1, s5, 0.5, 0.2, 1.0);
    pt_tensor *inc[3] = {leaf(wave(2, s45, 1.5, 0.0, 0.0)), int_target(1, s4, t4), w};
    pt_tensor *inp[3] = {leaf(wave(2, s45, 1.5, 0.4, 0.0)), leaf(prob_target(2, s45, 0.7)), w};
    for (int r = 0; r < 3; r++) {
        cls_ctx c = {.nll = false, .o = {.reduction = reds[r], .label_smoothing = 0.1}};
        gradgradcheck(cls_loss, &c, 3, inc);
        gradgradcheck(cls_loss, &c, 3, inp);
    }
    pt_release(inc[0]);
    pt_release(inc[1]);
    pt_release(inp[0]);
    pt_release(inp[1]);
    pt_release(w);
}

/* Empty batches: empty gradients of the input's shape. */
static void test_empty_grads(void **state)
{
    (void)state;
    int64_t s04[2] = {0, 4}, s0[1] = {0};
    pt_tensor *in[4] = {leaf(wave(2, s04, 1, 0, 0)), leaf(wave(2, s04, 1, 1, 0)), NULL, NULL};
    pt_tensor *inc[3] = {in[0], int_target(1, s0, NULL), NULL};
    for (int r = 1; r < 3; r++) {
        pw_ctx c = {MSE, reds[r], 0, false};
        gradcheck(pw_loss, &c, 4, in);
        c.kind = BCE_LOGITS;
        gradcheck(pw_loss, &c, 4, in);
        cls_ctx cc = {.nll = false, .o = {.reduction = reds[r]}};
        gradcheck(cls_loss, &cc, 3, inc);
    }
    pt_release(inc[1]);
    release4(in);
}

/* ---- recording rules and error paths --------------------------------------------------------- */

static void test_recording(void **state)
{
    (void)state;
    int64_t s34[2] = {3, 4}, s3[1] = {3};
    int64_t t3[3] = {0, 3, 1};
    pt_tensor *x = leaf(wave(2, s34, 1.0, 0.0, 0.0));
    pt_tensor *t = wave(2, s34, 1.0, 1.0, 0.0);
    pt_tensor *y = int_target(1, s3, t3);
    /* recorded: named nodes */
    pt_tensor *l = pt_mse_loss(x, t, PT_REDUCTION_MEAN);
    assert_true(pt_requires_grad(l));
    assert_string_equal(pt_grad_fn_name(l), "mse_loss");
    pt_release(l);
    l = pt_cross_entropy(x, y);
    assert_string_equal(pt_grad_fn_name(l), "cross_entropy");
    /* backward accumulates into .grad: the mean of softmax - one_hot */
    assert_int_equal(pt_backward(l, NULL, false, false), PT_OK);
    pt_tensor *g = pt_grad(x);
    assert_non_null(g);
    assert_shape(g, 3, 4);
    pt_release(g);
    pt_release(l);
    /* no grad mode and inputs without grad record nothing */
    pt_no_grad_begin();
    l = pt_cross_entropy(x, y);
    assert_false(pt_requires_grad(l));
    assert_null(pt_grad_fn_name(l));
    pt_release(l);
    pt_no_grad_end();
    l = pt_mse_loss(t, t, PT_REDUCTION_SUM);
    assert_false(pt_requires_grad(l));
    pt_release(l);
    /* a saved target modified in place: the version check names the problem */
    l = pt_mse_loss(x, t, PT_REDUCTION_SUM);
    pt_tensor *other = pt_zeros_like(t);
    assert_int_equal(pt_copy_(t, other), PT_OK);
    assert_pt_status_error(pt_backward(l, NULL, false, false), PT_ERR_RUNTIME,
                           "modified by an in-place operation");
    pt_release(l);
    /* backward twice without retain_graph */
    l = pt_l1_loss(x, other, PT_REDUCTION_SUM);
    assert_int_equal(pt_backward(l, NULL, false, false), PT_OK);
    assert_int_not_equal(pt_backward(l, NULL, false, false), PT_OK);
    pt_release(l);
    pt_release(other);
    /* mixed dtypes: a float32 input against a float64 target gets a float32 gradient */
    pt_no_grad_begin(); /* a float32 leaf */
    pt_tensor *x32 = pt_to_dtype(x, PT_FLOAT32);
    pt_no_grad_end();
    pt_requires_grad_(x32, true);
    l = pt_huber_loss(x32, t, PT_REDUCTION_MEAN, 1.0);
    assert_int_equal(pt_dtype_of(l), PT_FLOAT64);
    assert_int_equal(pt_backward(l, NULL, false, false), PT_OK);
    g = pt_grad(x32);
    assert_non_null(g);
    assert_int_equal(pt_dtype_of(g), PT_FLOAT32);
    pt_release(g);
    pt_release(l);
    pt_release(x32);
    /* class weights have no derivative (as in PyTorch): a weight that requires grad is a
     * clear error while recording, and fine once detached */
    int64_t s4[1] = {4};
    pt_tensor *w = leaf(wave(1, s4, 0.3, 0.0, 1.0));
    pt_cross_entropy_opts o = {.weight = w};
    assert_pt_error(pt_cross_entropy_ex(x, y, &o), PT_ERR_UNSUPPORTED, "class weight");
    pt_tensor *wd = pt_detach(w);
    o.weight = wd;
    l = pt_cross_entropy_ex(x, y, &o);
    assert_int_equal(pt_backward(l, NULL, false, false), PT_OK);
    assert_null(pt_grad(w));
    pt_release(l);
    pt_release(wd);
    pt_release(w);
    pt_release(x);
    pt_release(t);
    pt_release(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_regression_grads, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bce_grads, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_kl_div_grads, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cross_entropy_grads, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cross_entropy_prob_grads, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_fused_class_backward, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_empty_grads, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_recording, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gradgrad, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests_name("grad_loss", tests, NULL, NULL);
}
