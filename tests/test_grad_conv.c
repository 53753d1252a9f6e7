/* Autograd tests of the conv family: gradcheck (float64 central differences) of conv2d, conv1d
 * and conv_transpose2d across stride/padding (incl. same/valid)/dilation/groups, unbatched and
 * non-contiguous inputs; max/avg/adaptive pooling (ceil_mode, dilation, exclude_pad, divisor),
 * pad (all modes) and interpolate; gradgradcheck of all of them (their formulas are ops of this
 * family, which record in turn; max pooling's second derivative gathers at the max indices);
 * recording rules and the version-counter error. */
#include "grad_local.h"

#include <string.h>

/* ---- convolution ----------------------------------------------------------------------------- */

typedef struct conv_case {
    int kind; /* 0 conv2d, 1 conv1d, 2 conv_transpose2d */
    pt_conv_opts o;
    int64_t out_pad[2];
} conv_case;

static int conv_fn(pt_tensor *const *in, void *ctx, pt_tensor **outs)
{
    const conv_case *c = ctx;
    int64_t st[2] = {c->o.stride[0] ? c->o.stride[0] : 1, c->o.stride[1] ? c->o.stride[1] : 1};
    int64_t dl[2] = {c->o.dilation[0] ? c->o.dilation[0] : 1,
                     c->o.dilation[1] ? c->o.dilation[1] : 1};
    if (c->kind == 0)
        outs[0] = pt_conv2d_ex(in[0], in[1], in[2], &c->o);
    else if (c->kind == 1)
        outs[0] = pt_conv1d_ex(in[0], in[1], in[2], &c->o);
    else
        outs[0] = pt_conv_transpose2d(in[0], in[1], in[2], st, c->o.padding, c->out_pad,
                                      c->o.groups ? c->o.groups : 1, dl);
    return outs[0] ? 1 : 0;
}

/* gradcheck with bias, then gradgradcheck without it (the bias formula is a sum, recorded by
 * the reduce family). */
static void check_conv(const char *what, const conv_case *c, int xnd, const int64_t *xs,
                       const int64_t *ws, int64_t c_out, bool noncontig)
{
    int wnd = c->kind == 1 ? 3 : 4;
    pt_tensor *x = gc_values(xnd, xs, 1);
    if (noncontig) {
        pt_tensor *nc = pt_test_noncontig(x);
        pt_release(x);
        x = nc;
        assert_false(pt_is_contiguous(x));
    }
    assert_int_equal(pt_requires_grad_(x, true), PT_OK);
    pt_tensor *w = gc_leaf(wnd, ws, 2), *b = gc_leaf(1, &c_out, 3);
    pt_tensor *in[3] = {x, w, b};
    gc_check(what, conv_fn, (void *)c, 3, in);
    in[2] = NULL;
    gc_gradgrad(what, conv_fn, (void *)c, 3, in);
    pt_release(x);
    pt_release(w);
    pt_release(b);
}

static void test_conv2d_grad(void **state)
{
    (void)state;
    int64_t xs[4] = {2, 3, 6, 5}, ws[4] = {4, 3, 3, 3};
    conv_case c = {.kind = 0};
    check_conv("conv2d default", &c, 4, xs, ws, 4, false);
    c.o = (pt_conv_opts){.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}};
    int64_t ws2[4] = {4, 3, 3, 2};
    check_conv("conv2d stride/pad/dilation", &c, 4, xs, ws2, 4, false);
    check_conv("conv2d non-contiguous x", &c, 4, xs, ws2, 4, true);
    c.o = (pt_conv_opts){.stride = {2, 2}, .padding = {1, 1}, .groups = 2};
    int64_t xg[4] = {1, 4, 5, 5}, wg[4] = {6, 2, 3, 3};
    check_conv("conv2d groups=2 stride 2", &c, 4, xg, wg, 6, false);
    c.o = (pt_conv_opts){.groups = 4, .padding = {1, 0}};
    int64_t wd[4] = {4, 1, 3, 2};
    check_conv("conv2d depthwise", &c, 4, xg, wd, 4, false);
    c.o = (pt_conv_opts){.padding_mode = PT_CONV_PADDING_SAME, .dilation = {1, 2}};
    int64_t xsm[4] = {1, 2, 5, 6}, wsm[4] = {3, 2, 2, 4};
    check_conv("conv2d same (odd total padding)", &c, 4, xsm, wsm, 3, false);
    c.o = (pt_conv_opts){.padding_mode = PT_CONV_PADDING_VALID};
    check_conv("conv2d valid", &c, 4, xsm, wsm, 3, false);
    c.o = (pt_conv_opts){.stride = {2, 2}, .padding = {1, 1}};
    int64_t xu[3] = {3, 5, 6};
    check_conv("conv2d unbatched", &c, 3, xu, ws, 4, false);
}

static void test_conv1d_grad(void **state)
{
    (void)state;
    int64_t xs[3] = {2, 3, 9}, ws[3] = {4, 3, 3};
    conv_case c = {.kind = 1, .o = {.stride = {2}, .padding = {1}, .dilation = {2}}};
    check_conv("conv1d stride/pad/dilation", &c, 3, xs, ws, 4, false);
    check_conv("conv1d non-contiguous", &c, 3, xs, ws, 4, true);
    int64_t xg[3] = {2, 4, 7}, wg[3] = {6, 2, 2};
    c.o = (pt_conv_opts){.groups = 2, .padding_mode = PT_CONV_PADDING_SAME};
    check_conv("conv1d groups + same", &c, 3, xg, wg, 6, false);
    int64_t xu[2] = {3, 8};
    c.o = (pt_conv_opts){.padding = {2}};
    check_conv("conv1d unbatched", &c, 2, xu, ws, 4, false);
}

static void test_conv_transpose2d_grad(void **state)
{
    (void)state;
    int64_t xs[4] = {2, 4, 3, 4}, ws[4] = {4, 3, 3, 3};
    conv_case c = {.kind = 2, .o = {.stride = {2, 2}, .padding = {1, 0}}, .out_pad = {1, 1}};
    check_conv("conv_transpose2d stride 2 output_padding 1", &c, 4, xs, ws, 3, false);
    check_conv("conv_transpose2d non-contiguous", &c, 4, xs, ws, 3, true);
    int64_t wg[4] = {4, 2, 2, 3};
    c = (conv_case){.kind = 2, .o = {.stride = {1, 2}, .groups = 2, .dilation = {2, 1}}};
    check_conv("conv_transpose2d groups/dilation", &c, 4, xs, wg, 4, false);
    /* output_padding >= stride (allowed since < dilation): the gradient convs are larger */
    c = (conv_case){.kind = 2, .o = {.stride = {1, 1}, .dilation = {2, 3}}, .out_pad = {1, 2}};
    check_conv("conv_transpose2d output_padding >= stride", &c, 4, xs, ws, 3, false);
    int64_t xu[3] = {4, 3, 3};
    c = (conv_case){.kind = 2, .o = {.stride = {2, 2}, .padding = {1, 1}}};
    check_conv("conv_transpose2d unbatched", &c, 3, xu, ws, 3, false);
}

/* ---- pooling -----------------------------------------------------------------------------------
 */

typedef struct pool_case {
    int kind; /* 0 max, 1 avg, 2 adaptive */
    int64_t kernel[2];
    pt_max_pool2d_opts mo;
    pt_avg_pool2d_opts ao;
} pool_case;

static int pool_fn(pt_tensor *const *in, void *ctx, pt_tensor **outs)
{
    const pool_case *c = ctx;
    if (c->kind == 0)
        outs[0] = pt_max_pool2d_ex(in[0], c->kernel, &c->mo, NULL);
    else if (c->kind == 1)
        outs[0] = pt_avg_pool2d_ex(in[0], c->kernel, &c->ao);
    else
        outs[0] = pt_adaptive_avg_pool2d(in[0], c->kernel);
    return outs[0] ? 1 : 0;
}

static void check_pool(const char *what, const pool_case *c, int nd, const int64_t *xs,
                       bool noncontig)
{
    pt_tensor *x = gc_values(nd, xs, 5);
    if (noncontig) {
        pt_tensor *nc = pt_test_noncontig(x);
        pt_release(x);
        x = nc;
    }
    assert_int_equal(pt_requires_grad_(x, true), PT_OK);
    gc_check(what, pool_fn, (void *)c, 1, &x);
    gc_gradgrad(what, pool_fn, (void *)c, 1, &x);
    pt_release(x);
}

static void test_pool_grad(void **state)
{
    (void)state;
    int64_t xs[4] = {2, 2, 6, 7}, xu[3] = {2, 7, 5};
    pool_case c = {.kind = 0, .kernel = {3, 3}, .mo = {.stride = {2, 2}, .padding = {1, 1}}};
    check_pool("max_pool2d k3 s2 p1", &c, 4, xs, false);
    check_pool("max_pool2d non-contiguous", &c, 4, xs, true);
    c.mo = (pt_max_pool2d_opts){.stride = {2, 1}, .dilation = {2, 1}, .ceil_mode = true};
    check_pool("max_pool2d dilation ceil_mode", &c, 4, xs, false);
    c = (pool_case){.kind = 0, .kernel = {2, 2}};
    check_pool("max_pool2d unbatched", &c, 3, xu, false);

    c = (pool_case){.kind = 1, .kernel = {3, 2}, .ao = {.stride = {2, 2}, .padding = {1, 1}}};
    check_pool("avg_pool2d pad", &c, 4, xs, false);
    c.ao.ceil_mode = true;
    c.ao.exclude_pad = true;
    check_pool("avg_pool2d ceil exclude_pad", &c, 4, xs, false);
    c.ao.divisor_override = 5;
    check_pool("avg_pool2d divisor_override", &c, 4, xs, true);
    c = (pool_case){.kind = 2, .kernel = {4, 3}};
    check_pool("adaptive_avg_pool2d", &c, 4, xs, false);
    check_pool("adaptive_avg_pool2d unbatched", &c, 3, xu, true);
}

/* ---- pad and interpolate ----------------------------------------------------------------------
 */

typedef struct pad_case {
    int n_pad;
    int64_t pad[6];
    pt_pad_mode mode;
} pad_case;

static int pad_fn(pt_tensor *const *in, void *ctx, pt_tensor **outs)
{
    const pad_case *c = ctx;
    outs[0] = pt_pad(in[0], c->n_pad, c->pad, c->mode, 0.5);
    return outs[0] ? 1 : 0;
}

static void test_pad_grad(void **state)
{
    (void)state;
    int64_t xs[4] = {2, 2, 4, 5}, x3[3] = {2, 3, 4};
    pad_case cases[] = {
        {4, {1, 2, -1, 3}, PT_PAD_CONSTANT}, {6, {0, 1, 2, 0, 1, 1}, PT_PAD_CONSTANT},
        {4, {2, 1, 3, 1}, PT_PAD_REFLECT},   {4, {2, 3, 0, 4}, PT_PAD_REPLICATE},
        {2, {3, 1}, PT_PAD_REFLECT},         {2, {2, 3}, PT_PAD_REPLICATE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_tensor *x = gc_leaf(i < 4 ? 4 : 3, i < 4 ? xs : x3, 7 + (unsigned)i);
        char what[64];
        snprintf(what, sizeof what, "pad case %zu", i);
        gc_check(what, pad_fn, &cases[i], 1, &x);
        gc_gradgrad(what, pad_fn, &cases[i], 1, &x);
        pt_release(x);
    }
}

static int interp_fn(pt_tensor *const *in, void *ctx, pt_tensor **outs)
{
    outs[0] = pt_interpolate(in[0], ctx);
    return outs[0] ? 1 : 0;
}

static void test_interpolate_grad(void **state)
{
    (void)state;
    int64_t xs[4] = {2, 2, 3, 4};
    pt_interpolate_opts cases[] = {
        {.size = {5, 7}, .mode = PT_INTERP_NEAREST},
        {.size = {2, 3}, .mode = PT_INTERP_NEAREST},
        {.size = {5, 7}, .mode = PT_INTERP_BILINEAR},
        {.size = {5, 3}, .mode = PT_INTERP_BILINEAR, .align_corners = true},
        {.scale_factor = {2.5, 1.5}, .mode = PT_INTERP_BILINEAR},
        {.scale_factor = {2.0, 0.5}, .mode = PT_INTERP_NEAREST},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_tensor *x = gc_leaf(4, xs, 11 + (unsigned)i);
        char what[64];
        snprintf(what, sizeof what, "interpolate case %zu", i);
        gc_check(what, interp_fn, &cases[i], 1, &x);
        gc_gradgrad(what, interp_fn, &cases[i], 1, &x);
        pt_release(x);
    }
}

/* ---- recording rules ----------------------------------------------------------------------------
 */

static void test_recording(void **state)
{
    (void)state;
    int64_t xs[4] = {1, 2, 5, 5}, ws[4] = {3, 2, 3, 3}, k[2] = {2, 2};
    pt_tensor *x = gc_values(4, xs, 1), *w = gc_leaf(4, ws, 2);
    /* only w requires grad: recorded, and x gets no gradient */
    pt_tensor *y = pt_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    assert_true(pt_requires_grad(y));
    assert_string_equal(pt_grad_fn_name(y), "conv2d");
    /* no-grad: nothing recorded */
    pt_no_grad_begin();
    pt_tensor *z = pt_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    pt_no_grad_end();
    assert_false(pt_requires_grad(z));
    assert_null(pt_grad_fn_name(z));
    /* max_pool2d with indices: the indices are not attached */
    pt_tensor *idx = NULL;
    pt_tensor *p = pt_max_pool2d_ex(y, k, NULL, &idx);
    assert_non_null(p);
    assert_non_null(idx);
    assert_string_equal(pt_grad_fn_name(p), "max_pool2d");
    assert_false(pt_requires_grad(idx));
    /* the root gradient is released explicitly: the engine's retain/release of it currently
     * makes the scope forget the caller's reference */
    pt_tensor *g = pt_ones_like(p);
    assert_int_equal(pt_backward(p, g, false, false), PT_OK);
    pt_release(g);
    pt_tensor *gw = pt_grad(w);
    assert_non_null(gw);
    assert_null(pt_grad(x));
    pt_release(gw);
    pt_release(idx);
    pt_release(p);
    pt_release(z);
    pt_release(y);
    pt_release(x);
    pt_release(w);
}

static void test_version_error(void **state)
{
    (void)state;
    int64_t xs[4] = {1, 2, 5, 5}, ws[4] = {3, 2, 3, 3};
    pt_tensor *x = gc_values(4, xs, 1), *w = gc_leaf(4, ws, 2);
    pt_tensor *y = pt_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    /* x is saved for the weight gradient: changing it in place must be caught */
    pt_tensor *zero = pt_zeros_like(x), *g = pt_ones_like(y);
    assert_int_equal(pt_copy_(x, zero), PT_OK);
    pt_status st = pt_backward(y, g, false, false);
    assert_pt_status_error(st, PT_ERR_RUNTIME, "modified by an in-place operation");
    pt_release(g);
    pt_release(zero);
    pt_release(y);
    pt_release(x);
    pt_release(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_conv2d_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_conv1d_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_conv_transpose2d_grad, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_pool_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_pad_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_interpolate_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_recording, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_version_error, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
