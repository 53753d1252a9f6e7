/* Autograd tests of the nn family: gradcheck (float64 central differences) of batch_norm
 * (training through the batch statistics, eval with running stats, affine or not, 2-D/3-D/4-D),
 * layer_norm, group_norm, rms_norm (with/without weight, default eps), dropout (reseeded so the
 * mask repeats; p = 0, 1, eval) and scaled_dot_product_attention (float/bool masks, causal,
 * scale, dropout); the fused pt_{batch,group,layer,rms}_norm_backward ops against PyTorch and
 * against the composed formulas; gradgradcheck of the norms and attention, whose formulas are
 * composed of public elementwise/reduce/linalg ops (skipped while those ops do not record yet,
 * i.e. before the other autograd branches are merged). */
#include "grad_local.h"

#include <string.h>

/* True when the public ops the nn formulas are composed of record autograd nodes. */
static bool composed_ops_record(void)
{
    int64_t s[2] = {2, 2}, d1 = 1;
    pt_tensor *a = gc_leaf(2, s, 1);
    pt_tensor *t[8] = {pt_mul(a, a),
                       pt_mean_dim(a, 1, &d1, true),
                       pt_rsqrt(a),
                       pt_reshape(a, 1, (int64_t[]){4}),
                       pt_softmax(a, -1),
                       pt_matmul(a, a),
                       pt_sum_dim(a, 1, &d1, false),
                       pt_sub(a, a)};
    bool all = true;
    for (int i = 0; i < 8; i++) {
        all = all && t[i] && pt_requires_grad(t[i]);
        pt_release(t[i]);
    }
    pt_release(a);
    return all;
}

/* ---- batch_norm ------------------------------------------------------------------------------ */

typedef struct bn_case {
    bool training;
    pt_tensor *rm, *rv;
} bn_case;

/* in = {x, weight, bias} */
static int bn_fn(pt_tensor *const *in, void *ctx, pt_tensor **outs)
{
    bn_case *c = ctx;
    outs[0] = pt_batch_norm(in[0], c->rm, c->rv, in[1], in[2], c->training, 0.1, 1e-5);
    return outs[0] ? 1 : 0;
}

static void check_bn(const char *what, bool training, bool affine, bool stats, int nd,
                     const int64_t *xs, bool gradgrad)
{
    int64_t c = xs[1];
    pt_tensor *x = gc_leaf(nd, xs, 3);
    pt_tensor *w = affine ? gc_leaf(1, &c, 4) : NULL, *b = affine ? gc_leaf(1, &c, 5) : NULL;
    bn_case bc = {.training = training};
    if (stats) {
        bc.rm = gc_values(1, &c, 6);
        pt_tensor *r = gc_values(1, &c, 7), *r2 = pt_mul(r, r);
        bc.rv = pt_add_scalar(r2, 0.5);
        pt_release(r);
        pt_release(r2);
    }
    pt_tensor *in[3] = {x, w, b};
    gc_check(what, bn_fn, &bc, 3, in);
    if (gradgrad)
        gc_gradgrad(what, bn_fn, &bc, 3, in);
    /* the running stats never get gradients */
    if (stats)
        assert_false(pt_requires_grad(bc.rm) || pt_requires_grad(bc.rv));
    pt_release(bc.rm);
    pt_release(bc.rv);
    pt_release(x);
    pt_release(w);
    pt_release(b);
}

static void test_batch_norm_grad(void **state)
{
    (void)state;
    int64_t x4[4] = {3, 2, 2, 3}, x2[2] = {5, 3}, x3[3] = {2, 3, 4};
    check_bn("batch_norm train affine 4-D", true, true, true, 4, x4, false);
    check_bn("batch_norm train no affine no stats", true, false, false, 4, x4, false);
    check_bn("batch_norm train 2-D", true, true, false, 2, x2, false);
    check_bn("batch_norm train 3-D", true, true, true, 3, x3, false);
    check_bn("batch_norm eval affine", false, true, true, 4, x4, false);
    check_bn("batch_norm eval no affine", false, false, true, 3, x3, false);
}

static void test_batch_norm_gradgrad(void **state)
{
    (void)state;
    if (!composed_ops_record())
        skip();
    int64_t x4[4] = {3, 2, 2, 2}, x3[3] = {2, 3, 4};
    check_bn("batch_norm train gradgrad", true, true, true, 4, x4, true);
    check_bn("batch_norm eval gradgrad", false, true, true, 3, x3, true);
}

/* ---- layer_norm / rms_norm / group_norm ------------------------------------------------------ */

typedef struct row_case {
    int kind; /* 0 layer, 1 rms, 2 group */
    int n;
    int64_t nshape[2];
    int64_t groups;
    double eps;
} row_case;

static int row_fn(pt_tensor *const *in, void *ctx, pt_tensor **outs)
{
    row_case *c = ctx;
    if (c->kind == 0)
        outs[0] = pt_layer_norm(in[0], c->n, c->nshape, in[1], in[2], c->eps);
    else if (c->kind == 1)
        outs[0] = pt_rms_norm(in[0], c->n, c->nshape, in[1], c->eps);
    else
        outs[0] = pt_group_norm(in[0], c->groups, in[1], in[2], c->eps);
    return outs[0] ? 1 : 0;
}

static void check_row(const char *what, row_case *c, int nd, const int64_t *xs, bool affine,
                      bool noncontig, bool gradgrad)
{
    pt_tensor *x = gc_values(nd, xs, 8);
    if (noncontig) {
        pt_tensor *nc = pt_test_noncontig(x);
        pt_release(x);
        x = nc;
    }
    assert_int_equal(pt_requires_grad_(x, true), PT_OK);
    int pn = c->kind == 2 ? 1 : c->n;
    const int64_t *ps = c->kind == 2 ? xs + 1 : c->nshape;
    pt_tensor *w = affine ? gc_leaf(pn, ps, 9) : NULL;
    pt_tensor *b = affine && c->kind != 1 ? gc_leaf(pn, ps, 10) : NULL;
    pt_tensor *in[3] = {x, w, b};
    if (gradgrad)
        gc_gradgrad(what, row_fn, c, 3, in);
    else
        gc_check(what, row_fn, c, 3, in);
    pt_release(x);
    pt_release(w);
    pt_release(b);
}

static void run_row_cases(bool gradgrad)
{
    int64_t x3[3] = {2, 3, 4}, x4[4] = {2, 6, 3, 2};
    row_case ln1 = {.kind = 0, .n = 1, .nshape = {4}, .eps = 1e-5};
    row_case ln2 = {.kind = 0, .n = 2, .nshape = {3, 4}, .eps = 1e-3};
    check_row("layer_norm last dim affine", &ln1, 3, x3, true, false, gradgrad);
    check_row("layer_norm last 2 dims", &ln2, 3, x3, false, true, gradgrad);
    check_row("layer_norm last 2 dims affine", &ln2, 3, x3, true, false, gradgrad);
    row_case rn1 = {.kind = 1, .n = 1, .nshape = {4}, .eps = -1};
    row_case rn2 = {.kind = 1, .n = 2, .nshape = {3, 4}, .eps = 1e-5};
    check_row("rms_norm default eps weight", &rn1, 3, x3, true, false, gradgrad);
    check_row("rms_norm 2 dims no weight", &rn2, 3, x3, false, true, gradgrad);
    check_row("rms_norm 2 dims weight", &rn2, 3, x3, true, false, gradgrad);
    row_case gn3 = {.kind = 2, .groups = 3, .eps = 1e-5},
             gn1 = {.kind = 2, .groups = 1, .eps = 1e-5};
    row_case gn6 = {.kind = 2, .groups = 6, .eps = 1e-5};
    check_row("group_norm 3 groups affine", &gn3, 4, x4, true, false, gradgrad);
    check_row("group_norm 1 group", &gn1, 4, x4, false, true, gradgrad);
    check_row("group_norm 6 groups affine", &gn6, 4, x4, true, false, gradgrad);
    int64_t x3g[3] = {2, 4, 5};
    row_case gn2 = {.kind = 2, .groups = 2, .eps = 1e-5};
    check_row("group_norm 3-D", &gn2, 3, x3g, true, false, gradgrad);
}

static void test_norm_grad(void **state)
{
    (void)state;
    run_row_cases(false);
}

static void test_norm_gradgrad(void **state)
{
    (void)state;
    if (!composed_ops_record())
        skip();
    run_row_cases(true);
}

/* ---- dropout --------------------------------------------------------------------------------- */

typedef struct drop_case {
    double p;
    bool training;
} drop_case;

static int drop_fn(pt_tensor *const *in, void *ctx, pt_tensor **outs)
{
    drop_case *c = ctx;
    pt_manual_seed(1234); /* the same mask on every evaluation */
    outs[0] = pt_dropout(in[0], c->p, c->training);
    return outs[0] ? 1 : 0;
}

static void test_dropout_grad(void **state)
{
    (void)state;
    int64_t xs[3] = {3, 4, 5};
    drop_case cases[] = {{0.3, true}, {0.7, true}, {0.0, true}, {1.0, true}, {0.5, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_tensor *x = gc_leaf(3, xs, 12);
        char what[64];
        snprintf(what, sizeof what, "dropout case %zu", i);
        gc_check(what, drop_fn, &cases[i], 1, &x);
        pt_release(x);
    }
    /* the gradient is grad * mask / (1 - p) with the forward's mask */
    pt_tensor *x = gc_leaf(3, xs, 13), *mask = NULL;
    pt_tensor *y = pt_dropout_mask(x, 0.4, true, &mask);
    assert_non_null(y);
    assert_non_null(mask);
    assert_string_equal(pt_grad_fn_name(y), "dropout");
    pt_tensor *g = gc_values(3, xs, 14), *gx = NULL;
    assert_int_equal(pt_autograd_grad(1, &y, &g, 1, &x, false, false, false, &gx), PT_OK);
    for (int64_t i = 0; i < pt_numel(x); i++) {
        double want = pt_test_get(mask, i) != 0 ? pt_test_get(g, i) / 0.6 : 0.0;
        assert_true(fabs(pt_test_get(gx, i) - want) <= 1e-12);
    }
    pt_release(gx);
    pt_release(g);
    pt_release(mask);
    pt_release(y);
    pt_release(x);
}

/* ---- scaled_dot_product_attention --------------------------------------------------------------
 */

typedef struct sdpa_case {
    double dropout_p, scale;
    bool causal;
    pt_tensor *bool_mask;
} sdpa_case;

/* in = {q, k, v, float mask or NULL} */
static int sdpa_fn(pt_tensor *const *in, void *ctx, pt_tensor **outs)
{
    sdpa_case *c = ctx;
    pt_manual_seed(99);
    outs[0] =
        pt_scaled_dot_product_attention(in[0], in[1], in[2], c->bool_mask ? c->bool_mask : in[3],
                                        c->dropout_p, c->causal, c->scale);
    return outs[0] ? 1 : 0;
}

static void run_sdpa_cases(bool gradgrad)
{
    int64_t qs[3] = {2, 3, 4}, ks[3] = {2, 5, 4}, vs[3] = {2, 5, 3}, ms[2] = {3, 5};
    int64_t q4[4] = {2, 2, 4, 3}, k4[4] = {2, 2, 4, 3}, v4[4] = {2, 2, 4, 2};
    bool keep[15] = {1, 0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1};
    pt_tensor *bm = pt_from_data(keep, 2, ms, PT_BOOL, (pt_device){PT_DEVICE_CPU, 0});
    int64_t m4[3] = {2, 1, 4}; /* broadcasts over heads and over L */
    struct {
        sdpa_case c;
        bool four_d, float_mask, noncontig;
    } cases[] = {
        {{0}, false, false, false},
        {{.scale = 0.7}, false, true, true},
        {{.bool_mask = bm}, false, false, false},
        {{.causal = true}, true, false, true},
        {{.causal = true}, false, true, false},
        {{.scale = 0.5}, true, true, false},
        {{.dropout_p = 0.3}, false, false, false},
        {{.dropout_p = 0.25, .causal = true}, true, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool f4 = cases[i].four_d;
        pt_tensor *q = gc_values(f4 ? 4 : 3, f4 ? q4 : qs, 20);
        if (cases[i].noncontig) {
            pt_tensor *nc = pt_test_noncontig(q);
            pt_release(q);
            q = nc;
        }
        assert_int_equal(pt_requires_grad_(q, true), PT_OK);
        pt_tensor *k = gc_leaf(f4 ? 4 : 3, f4 ? k4 : ks, 21);
        pt_tensor *v = gc_leaf(f4 ? 4 : 3, f4 ? v4 : vs, 22);
        pt_tensor *m = !cases[i].float_mask ? NULL : f4 ? gc_leaf(3, m4, 23) : gc_leaf(2, ms, 23);
        pt_tensor *in[4] = {q, k, v, m};
        char what[64];
        snprintf(what, sizeof what, "sdpa case %zu", i);
        if (gradgrad)
            gc_gradgrad(what, sdpa_fn, &cases[i].c, 4, in);
        else
            gc_check(what, sdpa_fn, &cases[i].c, 4, in);
        for (int j = 0; j < 4; j++)
            pt_release(in[j]);
    }
    pt_release(bm);
}

static void test_sdpa_grad(void **state)
{
    (void)state;
    run_sdpa_cases(false);
}

static void test_sdpa_gradgrad(void **state)
{
    (void)state;
    if (!composed_ops_record())
        skip();
    run_sdpa_cases(true);
}

/* ---- recording rules ----------------------------------------------------------------------------
 */

static void test_nn_recording(void **state)
{
    (void)state;
    int64_t xs[2] = {4, 3}, c = 3;
    pt_tensor *x = gc_values(2, xs, 1), *w = gc_leaf(1, &c, 2);
    pt_tensor *y = pt_layer_norm(x, 1, &c, w, NULL, 1e-5);
    assert_string_equal(pt_grad_fn_name(y), "layer_norm");
    pt_no_grad_begin();
    pt_tensor *z = pt_layer_norm(x, 1, &c, w, NULL, 1e-5);
    pt_no_grad_end();
    assert_false(pt_requires_grad(z));
    /* nothing requires grad: nothing recorded */
    pt_tensor *u = pt_group_norm(x, 1, NULL, NULL, 1e-5);
    assert_false(pt_requires_grad(u));
    /* a NULL input still propagates the error */
    assert_pt_error(pt_batch_norm(NULL, NULL, NULL, w, NULL, true, 0.1, 1e-5), PT_ERR_NULL, "");
    pt_release(u);
    pt_release(z);
    pt_release(y);
    pt_release(x);
    pt_release(w);
}

/* Gradients have their input's dtype: float32/float16 inputs, a float64 weight. */
static void test_nn_grad_dtypes(void **state)
{
    (void)state;
    pt_device cpu = {PT_DEVICE_CPU, 0};
    int64_t xs[4] = {2, 3, 2, 2}, c = 3;
    pt_dtype dts[2] = {PT_FLOAT32, PT_FLOAT16};
    for (int i = 0; i < 2; i++) {
        pt_tensor *x64 = gc_values(4, xs, 1), *x = pt_to_dtype(x64, dts[i]);
        pt_tensor *w = gc_leaf(1, &c, 2), *b = pt_zeros(1, &c, PT_FLOAT32, cpu);
        assert_int_equal(pt_requires_grad_(x, true), PT_OK);
        assert_int_equal(pt_requires_grad_(b, true), PT_OK);
        pt_tensor *ins[3] = {x, w, b};
        pt_tensor *ys[3] = {pt_batch_norm(x, NULL, NULL, w, b, true, 0.1, 1e-5),
                            pt_group_norm(x, 3, w, b, 1e-5),
                            pt_layer_norm(x, 1, xs + 3, NULL, NULL, 1e-5)};
        for (int k = 0; k < 3; k++) {
            assert_non_null(ys[k]);
            assert_int_equal(pt_dtype_of(ys[k]), dts[i]);
            pt_tensor *g = pt_ones_like(ys[k]), *grads[3] = {0};
            assert_int_equal(pt_autograd_grad(1, &ys[k], &g, 3, ins, false, false, true, grads),
                             PT_OK);
            for (int j = 0; j < 3; j++) {
                if (grads[j])
                    assert_int_equal(pt_dtype_of(grads[j]), pt_dtype_of(ins[j]));
                pt_release(grads[j]);
            }
            pt_release(g);
            pt_release(ys[k]);
        }
        pt_release(x64);
        pt_release(x);
        pt_release(w);
        pt_release(b);
    }
}

/* ---- the fused layer_norm / rms_norm gradient ops against PyTorch ------------------------------
 */

static pt_fixture *fx;

static pt_tensor *F(const char *tag, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "%s.%s", tag, name);
    pt_tensor *t = fx_get(fx, key);
    assert_non_null(t);
    return t;
}

static void test_row_norm_backward_ops(void **state)
{
    (void)state;
    const char *tags[2] = {"f32", "f64"};
    int64_t n8[1] = {8}, n68[2] = {6, 8};
    for (int i = 0; i < 2; i++) {
        const char *tag = tags[i];
        /* float32: PyTorch reduces in float32 in another order; the kernel accumulates in
         * double, so the results differ by a few float32 ulps of the row sums */
        double rtol = i == 0 ? 1e-4 : 1e-10, atol = i == 0 ? 1e-5 : 1e-12;
        pt_tensor *x = F(tag, "x"), *g = F(tag, "g"), *gw = NULL, *gb = NULL;
        pt_tensor *gx = pt_layer_norm_backward(g, x, 1, n8, F(tag, "w8"), 1e-5, &gw, &gb);
        assert_tensor_close(gx, F(tag, "ln8.gx"), rtol, atol);
        assert_tensor_close(gw, F(tag, "ln8.gw"), rtol, atol);
        assert_tensor_close(gb, F(tag, "ln8.gb"), rtol, atol);
        pt_tensor *gnc = pt_test_noncontig(g);
        gx = pt_layer_norm_backward(gnc, x, 2, n68, NULL, 1e-3, NULL, NULL);
        assert_tensor_close(gx, F(tag, "ln68plain.gx"), rtol, atol);
        gx = pt_rms_norm_backward(g, x, 2, n68, F(tag, "w68"), 1e-5, &gw);
        assert_tensor_close(gx, F(tag, "rms68.gx"), rtol, atol);
        assert_tensor_close(gw, F(tag, "rms68.gw"), rtol, atol);
        gx = pt_rms_norm_backward(g, pt_test_noncontig(x), 1, n8, NULL, -1, NULL);
        assert_tensor_close(gx, F(tag, "rms8plain.gx"), rtol, atol);
    }
    /* errors */
    pt_tensor *x = F("f64", "x"), *w8 = F("f64", "w8"), *gw = w8;
    int64_t n8b[1] = {8}, bad[1] = {5};
    assert_pt_error(pt_layer_norm_backward(w8, x, 1, n8b, NULL, 1e-5, &gw, NULL), PT_ERR_SHAPE,
                    "does not match x");
    assert_null(gw);
    assert_pt_error(pt_layer_norm_backward(x, x, 1, bad, NULL, 1e-5, NULL, NULL), PT_ERR_SHAPE,
                    "pt_layer_norm_backward");
    assert_pt_error(pt_rms_norm_backward(NULL, x, 1, n8b, NULL, 1e-5, NULL), PT_ERR_NULL,
                    "grad_output");
}

static void test_batch_norm_backward_op(void **state)
{
    (void)state;
    const char *tags[2] = {"f32", "f64"};
    for (int i = 0; i < 2; i++) {
        const char *tag = tags[i];
        double rtol = i == 0 ? 1e-4 : 1e-10, atol = i == 0 ? 1e-5 : 1e-12; /* as above */
        pt_tensor *x = F(tag, "bn.x"), *g = F(tag, "bn.g"), *w = F(tag, "bn.w");
        pt_tensor *rm = F(tag, "bn.rm"), *rv = F(tag, "bn.rv"), *gw = NULL, *gb = NULL;
        pt_tensor *gx = pt_batch_norm_backward(g, x, NULL, NULL, w, true, 1e-5, &gw, &gb);
        assert_tensor_close(gx, F(tag, "bn.train.gx"), rtol, atol);
        assert_tensor_close(gw, F(tag, "bn.train.gw"), rtol, atol);
        assert_tensor_close(gb, F(tag, "bn.train.gb"), rtol, atol);
        gx = pt_batch_norm_backward(pt_test_noncontig(g), x, rm, rv, w, false, 1e-5, &gw, &gb);
        assert_tensor_close(gx, F(tag, "bn.eval.gx"), rtol, atol);
        assert_tensor_close(gw, F(tag, "bn.eval.gw"), rtol, atol);
        assert_tensor_close(gb, F(tag, "bn.eval.gb"), rtol, atol);
        gx = pt_batch_norm_backward(F(tag, "bn.g2"), pt_test_noncontig(F(tag, "bn.x2")), NULL, NULL,
                                    NULL, true, 1e-3, NULL, NULL);
        assert_tensor_close(gx, F(tag, "bn.plain2d.gx"), rtol, atol);
    }
    pt_tensor *x = F("f64", "bn.x"), *w = F("f64", "bn.w"), *gw = w;
    assert_pt_error(pt_batch_norm_backward(x, x, NULL, NULL, w, false, 1e-5, &gw, NULL),
                    PT_ERR_INVALID_ARG, "running_mean and running_var are required");
    assert_null(gw);
    assert_pt_error(pt_batch_norm_backward(w, x, NULL, NULL, NULL, true, 1e-5, NULL, NULL),
                    PT_ERR_SHAPE, "does not match x");
}

/* The composed formulas (used under create_graph) agree with the fused kernels. */
static void test_row_norm_composed_matches_fused(void **state)
{
    (void)state;
    int64_t xs[3] = {3, 4, 5}, n45[2] = {4, 5};
    for (int rms = 0; rms < 2; rms++) {
        pt_tensor *x = gc_leaf(3, xs, 40), *w = gc_leaf(2, n45, 41), *b = gc_leaf(2, n45, 42);
        pt_tensor *y = rms ? pt_rms_norm(x, 2, n45, w, 1e-5) : pt_layer_norm(x, 2, n45, w, b, 1e-5);
        pt_tensor *g = gc_values(3, xs, 43), *ins[3] = {x, w, b};
        pt_tensor *fused[3] = {0}, *composed[3] = {0};
        int nin = rms ? 2 : 3;
        assert_int_equal(pt_autograd_grad(1, &y, &g, nin, ins, true, false, false, fused), PT_OK);
        assert_int_equal(pt_autograd_grad(1, &y, &g, nin, ins, false, true, false, composed),
                         PT_OK);
        for (int j = 0; j < nin; j++) {
            assert_tensor_close(composed[j], fused[j], 1e-10, 1e-12);
            pt_release(fused[j]);
            pt_release(composed[j]);
        }
        pt_release(g);
        pt_release(y);
        pt_release(x);
        pt_release(w);
        pt_release(b);
    }
}

static void test_group_norm_backward_op(void **state)
{
    (void)state;
    const char *tags[2] = {"f32", "f64"};
    for (int i = 0; i < 2; i++) {
        const char *tag = tags[i];
        double rtol = i == 0 ? 1e-4 : 1e-10, atol = i == 0 ? 1e-5 : 1e-12; /* as above */
        pt_tensor *x = F(tag, "gn.x"), *g = F(tag, "gn.g"), *gw = NULL, *gb = NULL;
        pt_tensor *gx = pt_group_norm_backward(g, x, 3, F(tag, "gn.w"), 1e-5, &gw, &gb);
        assert_tensor_close(gx, F(tag, "gn.g3.gx"), rtol, atol);
        assert_tensor_close(gw, F(tag, "gn.g3.gw"), rtol, atol);
        assert_tensor_close(gb, F(tag, "gn.g3.gb"), rtol, atol);
        gx = pt_group_norm_backward(pt_test_noncontig(g), pt_test_noncontig(x), 2, NULL, 1e-3, NULL,
                                    NULL);
        assert_tensor_close(gx, F(tag, "gn.g2plain.gx"), rtol, atol);
    }
    pt_tensor *x = F("f64", "gn.x");
    assert_pt_error(pt_group_norm_backward(x, x, 4, NULL, 1e-5, NULL, NULL), PT_ERR_INVALID_ARG,
                    "divisible by num_groups");
}

static void test_group_norm_composed_matches_fused(void **state)
{
    (void)state;
    int64_t xs[4] = {2, 4, 3, 2}, c = 4;
    pt_tensor *x = gc_leaf(4, xs, 60), *w = gc_leaf(1, &c, 61), *b = gc_leaf(1, &c, 62);
    pt_tensor *y = pt_group_norm(x, 2, w, b, 1e-5);
    pt_tensor *g = gc_values(4, xs, 63), *ins[3] = {x, w, b};
    pt_tensor *fused[3] = {0}, *composed[3] = {0};
    assert_int_equal(pt_autograd_grad(1, &y, &g, 3, ins, true, false, false, fused), PT_OK);
    assert_int_equal(pt_autograd_grad(1, &y, &g, 3, ins, false, true, false, composed), PT_OK);
    for (int j = 0; j < 3; j++) {
        assert_tensor_close(composed[j], fused[j], 1e-10, 1e-12);
        pt_release(fused[j]);
        pt_release(composed[j]);
    }
    pt_release(g);
    pt_release(y);
    pt_release(x);
    pt_release(w);
    pt_release(b);
}

static void test_batch_norm_composed_matches_fused(void **state)
{
    (void)state;
    int64_t xs[4] = {3, 2, 2, 3}, c = 2;
    for (int training = 0; training < 2; training++) {
        pt_tensor *x = gc_leaf(4, xs, 50), *w = gc_leaf(1, &c, 51), *b = gc_leaf(1, &c, 52);
        pt_tensor *rm = gc_values(1, &c, 53),
                  *rv = pt_full(1, &c, 0.7, PT_FLOAT64, (pt_device){PT_DEVICE_CPU, 0});
        pt_tensor *y = pt_batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
        pt_tensor *g = gc_values(4, xs, 54), *ins[3] = {x, w, b};
        pt_tensor *fused[3] = {0}, *composed[3] = {0};
        assert_int_equal(pt_autograd_grad(1, &y, &g, 3, ins, true, false, false, fused), PT_OK);
        assert_int_equal(pt_autograd_grad(1, &y, &g, 3, ins, false, true, false, composed), PT_OK);
        for (int j = 0; j < 3; j++) {
            assert_tensor_close(composed[j], fused[j], 1e-10, 1e-12);
            pt_release(fused[j]);
            pt_release(composed[j]);
        }
        pt_release(g);
        pt_release(y);
        pt_release(rm);
        pt_release(rv);
        pt_release(x);
        pt_release(w);
        pt_release(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_batch_norm_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_gradgrad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_norm_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_norm_gradgrad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dropout_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_sdpa_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_sdpa_gradgrad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_nn_recording, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_nn_grad_dtypes, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_row_norm_backward_ops, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_row_norm_composed_matches_fused, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_backward_op, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_composed_matches_fused, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_group_norm_backward_op, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_group_norm_composed_matches_fused, pt_test_setup,
                                        pt_test_teardown),
    };
    fx = fx_open("grad_nn");
    if (!fx)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
