/* Autograd of the linalg family: central-difference gradchecks (float64) of mm, bmm, matmul
 * (every 1-D/2-D/batched combination and broadcast batch dims, gradients reduced back to the
 * input shapes), mv, dot, outer (with dtype promotion), addmm and baddbmm (alpha/beta, input
 * broadcasting), on contiguous, transposed and strided inputs; gradgradchecks of matmul, mm
 * and bmm; which inputs get gradients; the saved-tensor version check; a linear layer's
 * weight gradient in the weight's layout. */
#include <math.h>

#include "grad_reduce_check.h"

typedef enum lop { L_MM, L_BMM, L_MATMUL, L_MV, L_DOT, L_OUTER, L_ADDMM, L_BADDBMM } lop;

typedef struct lcall {
    lop op;
    double alpha, beta; /* addmm/baddbmm; 0/0 means the short form */
} lcall;

static pt_tensor *apply(pt_tensor *const *x, const void *c)
{
    const lcall *o = c;
    pt_addmm_opts opts = {.alpha = o->alpha, .beta = o->beta};
    bool short_form = o->alpha == 0 && o->beta == 0;
    switch (o->op) {
    case L_MM: return pt_mm(x[0], x[1]);
    case L_BMM: return pt_bmm(x[0], x[1]);
    case L_MATMUL: return pt_matmul(x[0], x[1]);
    case L_MV: return pt_mv(x[0], x[1]);
    case L_DOT: return pt_dot(x[0], x[1]);
    case L_OUTER: return pt_outer(x[0], x[1]);
    case L_ADDMM:
        return short_form ? pt_addmm(x[0], x[1], x[2]) : pt_addmm_ex(x[0], x[1], x[2], &opts);
    case L_BADDBMM:
        return short_form ? pt_baddbmm(x[0], x[1], x[2]) : pt_baddbmm_ex(x[0], x[1], x[2], &opts);
    }
    return NULL;
}

/* Input layouts: 0 contiguous, 1 strided (every other element of a wider buffer), 2 the
 * transpose of a contiguous tensor of the swapped shape (a column-major matrix). */
static pt_tensor *make_leaf(int ndim, const int64_t *shape, uint64_t seed, int layout)
{
    if (layout == 2 && ndim >= 2) {
        int64_t sw[PT_MAX_DIMS];
        memcpy(sw, shape, sizeof(int64_t) * (size_t)ndim);
        sw[ndim - 1] = shape[ndim - 2];
        sw[ndim - 2] = shape[ndim - 1];
        pt_tensor *base = gc_rand(ndim, sw, seed, 0.0);
        int64_t st[PT_MAX_DIMS];
        memcpy(st, pt_stride(base), sizeof(int64_t) * (size_t)ndim);
        int64_t tmp = st[ndim - 1];
        st[ndim - 1] = st[ndim - 2];
        st[ndim - 2] = tmp;
        pt_tensor *t = pt_as_strided(base, ndim, shape, st, 0);
        pt_release(base);
        assert_int_equal(pt_requires_grad_(t, true), PT_OK);
        return t;
    }
    pt_tensor *v = gc_rand(ndim, shape, seed, 0.0);
    pt_tensor *t = gc_leaf(v, layout == 1);
    pt_release(v);
    return t;
}

/* A shape list entry: ndim then up to 5 sizes. */
typedef struct shp {
    int nd;
    int64_t s[5];
} shp;

/* gradcheck of op on inputs of the given shapes in every layout (all inputs share one). */
static void check_shapes(const char *what, const lcall *o, int n, const shp *shapes)
{
    for (int layout = 0; layout < 3; layout++) {
        pt_tensor *x[GC_MAX_IN];
        for (int i = 0; i < n; i++)
            x[i] = make_leaf(shapes[i].nd, shapes[i].s, (uint64_t)(31 * i + 7), layout);
        char name[128];
        snprintf(name, sizeof name, "%s layout %d", what, layout);
        gc_check(name, apply, o, n, x);
        for (int i = 0; i < n; i++)
            pt_release(x[i]);
    }
}

static void test_mm_bmm(void **state)
{
    (void)state;
    check_shapes("mm", &(lcall){.op = L_MM}, 2, (const shp[]){{2, {3, 4}}, {2, {4, 5}}});
    check_shapes("mm 1x1", &(lcall){.op = L_MM}, 2, (const shp[]){{2, {1, 3}}, {2, {3, 1}}});
    check_shapes("bmm", &(lcall){.op = L_BMM}, 2, (const shp[]){{3, {2, 3, 4}}, {3, {2, 4, 2}}});
    /* grad_fn names; one input requiring grad */
    pt_tensor *a = make_leaf(2, (const int64_t[]){3, 4}, 1, 0);
    pt_tensor *bv = gc_rand(2, (const int64_t[]){4, 2}, 2, 0.0);
    pt_tensor *y = pt_mm(a, bv);
    assert_string_equal(pt_grad_fn_name(y), "mm");
    pt_tensor *x[2] = {a, bv};
    gc_check("mm a only", apply, &(lcall){.op = L_MM}, 2, x);
    pt_tensor *bt = pt_t(bv);
    pt_tensor *a2 = make_leaf(2, (const int64_t[]){4, 3}, 3, 2);
    x[0] = bt;
    x[1] = a2;
    gc_check("mm b only", apply, &(lcall){.op = L_MM}, 2, x);
    pt_release(a2);
    pt_release(bt);
    pt_release(y);
    pt_release(bv);
    pt_release(a);
}

static void test_matmul(void **state)
{
    (void)state;
    const struct {
        const char *name;
        shp a, b;
    } cases[] = {
        {"1d@1d", {1, {4}}, {1, {4}}},
        {"1d@2d", {1, {4}}, {2, {4, 3}}},
        {"2d@1d", {2, {3, 4}}, {1, {4}}},
        {"2d@2d", {2, {3, 4}}, {2, {4, 2}}},
        {"1d@3d", {1, {4}}, {3, {2, 4, 3}}},
        {"3d@1d", {3, {2, 3, 4}}, {1, {4}}},
        {"3d@2d", {3, {2, 3, 4}}, {2, {4, 2}}},
        {"2d@3d", {2, {3, 4}}, {3, {2, 4, 2}}},
        {"3d@3d", {3, {2, 3, 4}}, {3, {2, 4, 2}}},
        {"bcast 4d@3d", {4, {2, 1, 3, 4}}, {3, {3, 4, 2}}},
        {"bcast 3d@4d", {3, {1, 2, 3}}, {4, {2, 3, 3, 2}}},
        {"bcast 1 vs n", {3, {1, 3, 4}}, {3, {2, 4, 2}}},
        {"4d@1d", {4, {2, 2, 3, 4}}, {1, {4}}},
        {"1d@4d", {1, {3}}, {4, {2, 1, 3, 2}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        shp s[2] = {cases[i].a, cases[i].b};
        check_shapes(cases[i].name, &(lcall){.op = L_MATMUL}, 2, s);
    }
    pt_tensor *a = make_leaf(3, (const int64_t[]){2, 3, 4}, 1, 0);
    pt_tensor *b = make_leaf(2, (const int64_t[]){4, 2}, 2, 0);
    pt_tensor *y = pt_matmul(a, b);
    assert_string_equal(pt_grad_fn_name(y), "matmul");
    pt_release(y);
    pt_release(a);
    pt_release(b);
}

static void test_mv_dot_outer(void **state)
{
    (void)state;
    check_shapes("mv", &(lcall){.op = L_MV}, 2, (const shp[]){{2, {3, 4}}, {1, {4}}});
    check_shapes("dot", &(lcall){.op = L_DOT}, 2, (const shp[]){{1, {5}}, {1, {5}}});
    check_shapes("outer", &(lcall){.op = L_OUTER}, 2, (const shp[]){{1, {3}}, {1, {4}}});
    /* outer promotes: a float32 input gets a float32 gradient */
    pt_tensor *a32 = pt_ones(1, (const int64_t[]){3}, PT_FLOAT32, pt_cpu());
    pt_requires_grad_(a32, true);
    pt_tensor *b64 = make_leaf(1, (const int64_t[]){2}, 4, 0);
    pt_tensor *o = pt_outer(a32, b64);
    assert_int_equal(pt_dtype_of(o), PT_FLOAT64);
    pt_tensor *w = pt_ones_like(o), *g[2] = {0};
    pt_tensor *in[2] = {a32, b64};
    assert_int_equal(pt_autograd_grad(1, &o, &w, 2, in, false, false, false, g), PT_OK);
    assert_int_equal(pt_dtype_of(g[0]), PT_FLOAT32);
    assert_int_equal(pt_dtype_of(g[1]), PT_FLOAT64);
    /* d/da = sum(b), d/db = sum(a) = 3 */
    double sb = pt_test_get(b64, 0) + pt_test_get(b64, 1);
    for (int i = 0; i < 3; i++)
        assert_true(fabs(pt_test_get(g[0], i) - sb) < 1e-6);
    for (int i = 0; i < 2; i++)
        assert_true(fabs(pt_test_get(g[1], i) - 3.0) < 1e-12);
    pt_release(g[0]);
    pt_release(g[1]);
    pt_release(w);
    pt_release(o);
    pt_release(b64);
    pt_release(a32);
}

static void test_addmm_baddbmm(void **state)
{
    (void)state;
    const lcall calls[] = {{L_ADDMM, 0, 0}, {L_ADDMM, 0.5, 2.0}, {L_ADDMM, -1.5, 0.0}};
    const shp inputs[] = {{2, {3, 5}}, {1, {5}}, {2, {3, 1}}, {0, {0}}, {2, {1, 5}}};
    for (size_t c = 0; c < sizeof calls / sizeof *calls; c++)
        for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
            shp s[3] = {inputs[i], {2, {3, 4}}, {2, {4, 5}}};
            check_shapes("addmm", &calls[c], 3, s);
        }
    const lcall bcalls[] = {{L_BADDBMM, 0, 0}, {L_BADDBMM, 2.0, 0.25}, {L_BADDBMM, 1.0, 0.0}};
    const shp binputs[] = {{3, {2, 3, 2}}, {2, {3, 2}}, {3, {1, 3, 1}}, {1, {2}}};
    for (size_t c = 0; c < sizeof bcalls / sizeof *bcalls; c++)
        for (size_t i = 0; i < sizeof binputs / sizeof *binputs; i++) {
            shp s[3] = {binputs[i], {3, {2, 3, 4}}, {3, {2, 4, 2}}};
            check_shapes("baddbmm", &bcalls[c], 3, s);
        }
}

/* Integer products and no-grad mode record nothing; a saved operand changed in place makes
 * backward fail. */
static void test_recording_rules(void **state)
{
    (void)state;
    pt_tensor *a = make_leaf(2, (const int64_t[]){2, 3}, 1, 0);
    pt_tensor *b = make_leaf(2, (const int64_t[]){3, 2}, 2, 0);
    pt_no_grad_begin();
    pt_tensor *y0 = pt_mm(a, b);
    pt_no_grad_end();
    assert_false(pt_requires_grad(y0));
    pt_release(y0);
    pt_tensor *ai = pt_ones(2, (const int64_t[]){2, 2}, PT_INT64, pt_cpu());
    pt_tensor *yi = pt_matmul(ai, ai);
    assert_false(pt_requires_grad(yi));
    pt_release(yi);
    pt_release(ai);

    pt_tensor *y = pt_mm(a, b);
    pt_tensor *bd = pt_detach(b);
    assert_int_equal(pt_fill_(bd, 2.0), PT_OK);
    pt_tensor *w = pt_ones_like(y), *g = NULL;
    pt_status st = pt_autograd_grad(1, &y, &w, 1, &a, false, false, false, &g);
    assert_pt_status_error(st, PT_ERR_RUNTIME, "modified by an in-place operation");
    pt_release(w);
    pt_release(bd);
    pt_release(y);
    pt_release(a);
    pt_release(b);
}

/* float32 inputs get float32 gradients; empty operands get empty gradients (an empty inner
 * dim gives zero gradients for nothing, and zeros for a non-empty input of addmm). */
static void test_dtypes_and_empty(void **state)
{
    (void)state;
    pt_tensor *a = pt_ones(3, (const int64_t[]){2, 3, 4}, PT_FLOAT32, pt_cpu());
    pt_tensor *b = pt_ones(2, (const int64_t[]){4, 2}, PT_FLOAT32, pt_cpu());
    pt_requires_grad_(a, true);
    pt_requires_grad_(b, true);
    pt_tensor *y = pt_matmul(a, b);
    pt_tensor *w = pt_ones_like(y), *g[2] = {0}, *in[2] = {a, b};
    assert_int_equal(pt_autograd_grad(1, &y, &w, 2, in, false, false, false, g), PT_OK);
    assert_int_equal(pt_dtype_of(g[0]), PT_FLOAT32);
    assert_int_equal(pt_dtype_of(g[1]), PT_FLOAT32);
    pt_tensor *e0 = pt_full(3, (const int64_t[]){2, 3, 4}, 2.0, PT_FLOAT32, pt_cpu());
    pt_tensor *e1 = pt_full(2, (const int64_t[]){4, 2}, 6.0, PT_FLOAT32, pt_cpu());
    assert_tensor_close(g[0], e0, 0, 0); /* sum over the 2 columns of b */
    assert_tensor_close(g[1], e1, 0, 0); /* 2 batches x 3 rows */
    pt_tensor *rel[] = {a, b, y, w, g[0], g[1], e0, e1};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++)
        pt_release(rel[i]);

    pt_tensor *m1 = pt_zeros(2, (const int64_t[]){2, 0}, PT_FLOAT64, pt_cpu());
    pt_tensor *m2 = pt_zeros(2, (const int64_t[]){0, 3}, PT_FLOAT64, pt_cpu());
    pt_tensor *inp = pt_ones(1, (const int64_t[]){3}, PT_FLOAT64, pt_cpu());
    pt_tensor *xs[3] = {inp, m1, m2};
    for (int i = 0; i < 3; i++)
        pt_requires_grad_(xs[i], true);
    pt_tensor *z = pt_addmm(inp, m1, m2), *wz = pt_ones_like(z), *gz[3] = {0};
    assert_int_equal(pt_autograd_grad(1, &z, &wz, 3, xs, false, false, false, gz), PT_OK);
    assert_shape(gz[0], 3);
    assert_shape(gz[1], 2, 0);
    assert_shape(gz[2], 0, 3);
    assert_true(pt_test_get(gz[0], 0) == 2.0);
    for (int i = 0; i < 3; i++) {
        pt_release(gz[i]);
        pt_release(xs[i]);
    }
    pt_release(z);
    pt_release(wz);
}

static void test_gradgrad(void **state)
{
    (void)state;
    GG_REQUIRE();
    const struct {
        lcall c;
        int n;
        shp s[3];
    } cases[] = {
        {{.op = L_MM}, 2, {{2, {3, 4}}, {2, {4, 2}}}},
        {{.op = L_BMM}, 2, {{3, {2, 3, 4}}, {3, {2, 4, 2}}}},
        {{.op = L_MATMUL}, 2, {{1, {4}}, {1, {4}}}},
        {{.op = L_MATMUL}, 2, {{1, {4}}, {2, {4, 3}}}},
        {{.op = L_MATMUL}, 2, {{3, {2, 3, 4}}, {2, {4, 2}}}},
        {{.op = L_MATMUL}, 2, {{4, {2, 1, 3, 4}}, {3, {3, 4, 2}}}},
        {{.op = L_MATMUL}, 2, {{2, {3, 4}}, {3, {2, 4, 2}}}},
        {{.op = L_MV}, 2, {{2, {3, 4}}, {1, {4}}}},
        {{L_ADDMM, 0.5, 2.0}, 3, {{1, {2}}, {2, {3, 4}}, {2, {4, 2}}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int layout = 0; layout < 3; layout += 2) {
            pt_tensor *x[3];
            for (int k = 0; k < cases[i].n; k++)
                x[k] = make_leaf(cases[i].s[k].nd, cases[i].s[k].s, (uint64_t)(k + 5), layout);
            char name[64];
            snprintf(name, sizeof name, "case %zu layout %d", i, layout);
            gg_check(name, apply, &cases[i].c, cases[i].n, x);
            for (int k = 0; k < cases[i].n; k++)
                pt_release(x[k]);
        }
    }
}

/* A linear layer's weight w [out, in] enters the product as the view w^T. Its gradient must
 * come out in w's own layout (contiguous) and be stored without a transposing copy, for the
 * three forms a layer uses: addmm with a bias, mm, and matmul of a 3-D input; the values are
 * g^T x summed over the rows, computed here in float64 by hand. */
static void test_weight_grad_layout(void **state)
{
    (void)state;
    const int64_t out = 3, in = 5, rows = 4;
    for (int form = 0; form < 3; form++) {
        pt_tensor *w = make_leaf(2, (const int64_t[]){out, in}, 11, 0);
        pt_tensor *b = make_leaf(1, (const int64_t[]){out}, 12, 0);
        pt_tensor *x = make_leaf(2, (const int64_t[]){rows, in}, 13, 0);
        pt_tensor *wt = pt_t(w);
        pt_tensor *x3 = pt_reshape(x, 3, (const int64_t[]){2, rows / 2, in});
        pt_tensor *z = form == 0   ? pt_addmm(b, x, wt)
                       : form == 1 ? pt_mm(x, wt)
                                   : pt_matmul(x3, wt);
        /* weights g[r, o] = r + 2 o + 1 of the output make every entry of dw distinct */
        pt_tensor *g = pt_empty_like(z);
        for (int64_t i = 0; i < rows * out; i++)
            ((double *)pt_data_ptr(g))[i] = (double)(i / out) + 2.0 * (double)(i % out) + 1.0;
        assert_int_equal(pt_backward(z, g, false, false), PT_OK);
        pt_tensor *dw = pt_grad(w);
        assert_non_null(dw);
        pt_release(dw); /* w still holds it */
        assert_true(pt_is_contiguous(dw));
        assert_shape(dw, out, in);
        const double *xd = pt_data_ptr(x), *gd = pt_data_ptr(g), *dd = pt_data_ptr(dw);
        for (int64_t o = 0; o < out; o++)
            for (int64_t k = 0; k < in; k++) {
                double want = 0;
                for (int64_t r = 0; r < rows; r++)
                    want += gd[r * out + o] * xd[r * in + k];
                assert_float_equal(dd[o * in + k], want, 1e-12 * (1 + fabs(want)));
            }
        /* the stored gradient is w's alone: the next backward accumulates into it */
        pt_release(z);
        z = form == 0 ? pt_addmm(b, x, wt) : form == 1 ? pt_mm(x, wt) : pt_matmul(x3, wt);
        assert_int_equal(pt_backward(z, g, false, false), PT_OK);
        dw = pt_grad(w);
        pt_release(dw);
        dd = pt_data_ptr(dw);
        double want00 = 0;
        for (int64_t r = 0; r < rows; r++)
            want00 += 2 * gd[r * out] * xd[r * in];
        assert_float_equal(dd[0], want00, 1e-12 * (1 + fabs(want00)));
        pt_release(g);
        pt_release(z);
        pt_release(x3);
        pt_release(wt);
        pt_release(x);
        pt_release(b);
        pt_release(w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mm_bmm, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_matmul, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mv_dot_outer, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_addmm_baddbmm, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_recording_rules, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dtypes_and_empty, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gradgrad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_weight_grad_layout, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
