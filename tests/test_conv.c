/* Conv family tests against PyTorch (tests/fixtures/gen/conv.py): conv2d (stride, padding incl.
 * same/valid, dilation, groups incl. depthwise, 1x1, several im2col chunks, unbatched, float64),
 * conv1d, conv_transpose2d, max/avg/adaptive pooling, pad modes and interpolation, each also on
 * non-contiguous inputs; then the error paths. Each fixture case carries a "cfg" record with the
 * call's parameters, so the loops below read the cases instead of repeating them. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

/* Tolerances. float32 convolutions sum up to a few hundred products in another order than
 * PyTorch (oneDNN / its own GEMM blocking), so they get atol 1e-5 on outputs of magnitude ~10;
 * float64 keeps 1e-10. Pooling/interpolation do the same arithmetic in the same order except
 * average-pool sums. */
#define CONV_RTOL 1e-5
#define CONV_ATOL 2e-5

static char name_buf[8][64];
static int name_slot;

/* "<op>.<i>.<field>" in a small rotating buffer. */
static const char *key(const char *op, int i, const char *field)
{
    char *b = name_buf[name_slot++ % 8];
    snprintf(b, 64, "%s.%d.%s", op, i, field);
    return b;
}

static int64_t cfg_i(const pt_tensor *cfg, int k)
{
    return (int64_t)pt_test_get(cfg, k);
}

/* The fixture generator's pattern input: x[i] = ((7i + 3) % 23 - 11) / 8. */
static pt_tensor *pattern_of(int nd, const int64_t *shape, pt_dtype dt)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    double *v = malloc(sizeof(double) * (size_t)n);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)((7 * i + 3) % 23 - 11) / 8.0;
    pt_tensor *t64 = pt_from_data(v, nd, shape, PT_FLOAT64, pt_cpu());
    free(v);
    pt_tensor *t = pt_to_dtype(t64, dt);
    pt_release(t64);
    return t;
}

static pt_tensor *pattern(const pt_tensor *shape_rec, pt_dtype dt)
{
    int nd = (int)pt_numel(shape_rec);
    int64_t shape[PT_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = cfg_i(shape_rec, d);
    return pattern_of(nd, shape, dt);
}

static void check_close(const pt_tensor *got, const pt_tensor *want)
{
    if (pt_dtype_of(want) == PT_FLOAT64)
        assert_tensor_close(got, want, 1e-10, 1e-10);
    else
        assert_tensor_close(got, want, CONV_RTOL, CONV_ATOL);
}

/* ---- convolutions ------------------------------------------------------------------------------
 */

static pt_tensor *run_conv2d(const pt_tensor *cfg, const pt_tensor *x, const pt_tensor *w,
                             const pt_tensor *b)
{
    int64_t s[2] = {cfg_i(cfg, 0), cfg_i(cfg, 1)}, p[2] = {cfg_i(cfg, 2), cfg_i(cfg, 3)},
            d[2] = {cfg_i(cfg, 4), cfg_i(cfg, 5)}, g = cfg_i(cfg, 6);
    int mode = (int)cfg_i(cfg, 8);
    if (mode == 0)
        return pt_conv2d(x, w, b, s, p, d, g);
    pt_conv_opts o = {.stride = {s[0], s[1]},
                      .dilation = {d[0], d[1]},
                      .groups = g,
                      .padding_mode = mode == 1 ? PT_CONV_PADDING_SAME : PT_CONV_PADDING_VALID};
    return pt_conv2d_ex(x, w, b, &o);
}

static void test_conv2d_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("c2d", i, "cfg")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("c2d", i, "cfg"));
        bool f64 = cfg_i(cfg, 9), gen_x = cfg_i(cfg, 10);
        pt_tensor *x =
            gen_x ? pattern(fx_get(fx, key("c2d", i, "xshape")), f64 ? PT_FLOAT64 : PT_FLOAT32)
                  : fx_get(fx, key("c2d", i, "x"));
        pt_tensor *w = fx_get(fx, key("c2d", i, "w"));
        pt_tensor *b = cfg_i(cfg, 7) ? fx_get(fx, key("c2d", i, "b")) : NULL;
        pt_tensor *want = fx_get(fx, key("c2d", i, "out"));
        pt_tensor *got = run_conv2d(cfg, x, w, b);
        if (!got)
            fail_msg("c2d case %d: %s", i, pt_last_error());
        check_close(got, want);
        /* strided (non-contiguous) input and weight give the same result */
        pt_tensor *got_nc = run_conv2d(cfg, pt_test_noncontig(x), pt_test_noncontig(w), b);
        check_close(got_nc, want);
        /* the options form with explicit padding is the same op */
        if (cfg_i(cfg, 8) == 0) {
            pt_conv_opts o = {.stride = {cfg_i(cfg, 0), cfg_i(cfg, 1)},
                              .padding = {cfg_i(cfg, 2), cfg_i(cfg, 3)},
                              .dilation = {cfg_i(cfg, 4), cfg_i(cfg, 5)},
                              .groups = cfg_i(cfg, 6)};
            check_close(pt_conv2d_ex(x, w, b, &o), want);
        }
        pt_scope_end();
    }
    assert_true(n >= 20);
}

/* Options of case cfg as pt_conv_opts (explicit, same or valid padding). */
static pt_conv_opts case_opts(const pt_tensor *cfg)
{
    int mode = (int)cfg_i(cfg, 8);
    return (pt_conv_opts){.stride = {cfg_i(cfg, 0), cfg_i(cfg, 1)},
                          .padding = {mode ? 0 : cfg_i(cfg, 2), mode ? 0 : cfg_i(cfg, 3)},
                          .dilation = {cfg_i(cfg, 4), cfg_i(cfg, 5)},
                          .groups = cfg_i(cfg, 6),
                          .padding_mode = (pt_conv_padding_mode)mode};
}

static void test_conv2d_grads_match_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("c2d", i, "cfg")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("c2d", i, "cfg"));
        bool f64 = cfg_i(cfg, 9), gen_x = cfg_i(cfg, 10);
        pt_dtype dt = f64 ? PT_FLOAT64 : PT_FLOAT32;
        pt_tensor *x = gen_x ? pattern(fx_get(fx, key("c2d", i, "xshape")), dt)
                             : fx_get(fx, key("c2d", i, "x"));
        pt_tensor *w = fx_get(fx, key("c2d", i, "w"));
        pt_tensor *out = fx_get(fx, key("c2d", i, "out"));
        pt_tensor *gout =
            gen_x ? pattern_of(pt_ndim(out), pt_shape(out), dt) : fx_get(fx, key("c2d", i, "gout"));
        pt_conv_opts o = case_opts(cfg);
        if (fx_has(fx, key("c2d", i, "gx"))) {
            pt_tensor *gx = pt_conv2d_input_grad(pt_ndim(x), pt_shape(x), w, gout, &o);
            if (!gx)
                fail_msg("c2d grad case %d: %s", i, pt_last_error());
            check_close(gx, fx_get(fx, key("c2d", i, "gx")));
            check_close(pt_conv2d_input_grad(pt_ndim(x), pt_shape(x), pt_test_noncontig(w),
                                             pt_test_noncontig(gout), &o),
                        fx_get(fx, key("c2d", i, "gx")));
        }
        pt_tensor *gb = NULL;
        pt_tensor *gw =
            pt_conv2d_weight_grad(x, pt_ndim(w), pt_shape(w), gout, &o, cfg_i(cfg, 7) ? &gb : NULL);
        if (!gw)
            fail_msg("c2d grad case %d: %s", i, pt_last_error());
        /* the weight gradient sums N*oH*oW products per entry (up to 13824 here), in another
         * order than PyTorch: float32 gets rtol 1e-4 */
        if (f64)
            assert_tensor_close(gw, fx_get(fx, key("c2d", i, "gw")), 1e-10, 1e-10);
        else
            assert_tensor_close(gw, fx_get(fx, key("c2d", i, "gw")), 1e-4, 1e-5);
        if (cfg_i(cfg, 7))
            assert_tensor_close(gb, fx_get(fx, key("c2d", i, "gb")), 1e-5, 1e-4);
        pt_scope_end();
    }
    assert_true(n >= 20);
}

static void test_conv2d_single_thread_and_defaults(void **state)
{
    (void)state;
    /* one thread: same numbers (the chunked im2col path with case 18) */
    int old = pt_get_num_threads();
    pt_set_num_threads(1);
    for (int i = 17; i <= 19; i++) {
        pt_tensor *cfg = fx_get(fx, key("c2d", i, "cfg"));
        pt_tensor *x = cfg_i(cfg, 10) ? pattern(fx_get(fx, key("c2d", i, "xshape")),
                                                cfg_i(cfg, 9) ? PT_FLOAT64 : PT_FLOAT32)
                                      : fx_get(fx, key("c2d", i, "x"));
        pt_tensor *b = cfg_i(cfg, 7) ? fx_get(fx, key("c2d", i, "b")) : NULL;
        check_close(run_conv2d(cfg, x, fx_get(fx, key("c2d", i, "w")), b),
                    fx_get(fx, key("c2d", i, "out")));
    }
    pt_set_num_threads(old);
    /* NULL window arguments are the defaults: case 0 is stride 1, padding 0, dilation 1 */
    pt_tensor *x = fx_get(fx, "c2d.0.x"), *w = fx_get(fx, "c2d.0.w"), *b = fx_get(fx, "c2d.0.b");
    check_close(pt_conv2d(x, w, b, NULL, NULL, NULL, 1), fx_get(fx, "c2d.0.out"));
    check_close(pt_conv2d_ex(x, w, b, NULL), fx_get(fx, "c2d.0.out"));
    /* empty batch */
    pt_tensor *e = pt_zeros(PT_SHAPE(0, 3, 8, 8), PT_FLOAT32, pt_cpu());
    assert_shape(pt_conv2d(e, w, b, NULL, NULL, NULL, 1), 0, 4, 6, 6);
    /* float16 / bfloat16 compute in float32 and round back */
    pt_tensor *want = fx_get(fx, "c2d.0.out");
    pt_tensor *h = pt_conv2d(pt_to_dtype(x, PT_FLOAT16), pt_to_dtype(w, PT_FLOAT16),
                             pt_to_dtype(b, PT_FLOAT16), NULL, NULL, NULL, 1);
    assert_non_null(h);
    assert_int_equal(pt_dtype_of(h), PT_FLOAT16);
    /* half inputs carry ~1e-3 relative rounding; 27-term sums of N(0,1) products stay < 0.1 */
    assert_tensor_close_any_dtype(h, want, 1e-2, 0.1);
    pt_tensor *bf = pt_conv2d(pt_to_dtype(x, PT_BFLOAT16), pt_to_dtype(w, PT_BFLOAT16), NULL, NULL,
                              NULL, NULL, 1);
    assert_non_null(bf);
    assert_int_equal(pt_dtype_of(bf), PT_BFLOAT16);
}

static void test_conv1d_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("c1d", i, "cfg")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("c1d", i, "cfg"));
        pt_tensor *x = fx_get(fx, key("c1d", i, "x")), *w = fx_get(fx, key("c1d", i, "w"));
        pt_tensor *b = cfg_i(cfg, 4) ? fx_get(fx, key("c1d", i, "b")) : NULL;
        pt_tensor *want = fx_get(fx, key("c1d", i, "out"));
        int mode = (int)cfg_i(cfg, 5);
        pt_conv_opts o = {.stride = {cfg_i(cfg, 0)},
                          .padding = {cfg_i(cfg, 1)},
                          .dilation = {cfg_i(cfg, 2)},
                          .groups = cfg_i(cfg, 3),
                          .padding_mode = (pt_conv_padding_mode)mode};
        if (mode == 0)
            check_close(
                pt_conv1d(x, w, b, cfg_i(cfg, 0), cfg_i(cfg, 1), cfg_i(cfg, 2), cfg_i(cfg, 3)),
                want);
        check_close(pt_conv1d_ex(x, w, b, &o), want);
        check_close(pt_conv1d_ex(pt_test_noncontig(x), pt_test_noncontig(w), b, &o), want);
        pt_tensor *gout = fx_get(fx, key("c1d", i, "gout"));
        check_close(pt_conv1d_input_grad(pt_ndim(x), pt_shape(x), w, gout, &o),
                    fx_get(fx, key("c1d", i, "gx")));
        pt_tensor *gb = NULL;
        pt_tensor *gw =
            pt_conv1d_weight_grad(x, pt_ndim(w), pt_shape(w), gout, &o, cfg_i(cfg, 4) ? &gb : NULL);
        if (!gw)
            fail_msg("c1d grad case %d: %s", i, pt_last_error());
        check_close(gw, fx_get(fx, key("c1d", i, "gw")));
        if (cfg_i(cfg, 4))
            check_close(gb, fx_get(fx, key("c1d", i, "gb")));
        pt_scope_end();
    }
    assert_true(n >= 5);
}

static void test_conv_transpose2d_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("ct", i, "cfg")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("ct", i, "cfg"));
        pt_tensor *x = fx_get(fx, key("ct", i, "x")), *w = fx_get(fx, key("ct", i, "w"));
        pt_tensor *b = cfg_i(cfg, 9) ? fx_get(fx, key("ct", i, "b")) : NULL;
        int64_t s[2] = {cfg_i(cfg, 0), cfg_i(cfg, 1)}, p[2] = {cfg_i(cfg, 2), cfg_i(cfg, 3)},
                op[2] = {cfg_i(cfg, 4), cfg_i(cfg, 5)}, d[2] = {cfg_i(cfg, 7), cfg_i(cfg, 8)};
        pt_tensor *want = fx_get(fx, key("ct", i, "out"));
        pt_tensor *got = pt_conv_transpose2d(x, w, b, s, p, op, cfg_i(cfg, 6), d);
        if (!got)
            fail_msg("ct case %d: %s", i, pt_last_error());
        check_close(got, want);
        check_close(pt_conv_transpose2d(pt_test_noncontig(x), pt_test_noncontig(w), b, s, p, op,
                                        cfg_i(cfg, 6), d),
                    want);
        /* its gradients, composed as the header documents: d/dx is the forward convolution of
         * grad_out with w (cropped to x's size), d/dw the weight gradient of that convolution
         * with x (zero-extended to the convolution's output size) as its grad_output */
        pt_tensor *gout = fx_get(fx, key("ct", i, "gout"));
        pt_conv_opts co = {.stride = {s[0], s[1]},
                           .padding = {p[0], p[1]},
                           .dilation = {d[0], d[1]},
                           .groups = cfg_i(cfg, 6)};
        pt_tensor *full = pt_conv2d_ex(gout, w, NULL, &co);
        assert_non_null(full);
        int nd = pt_ndim(x);
        int64_t eh = pt_shape(full)[nd - 2] - pt_shape(x)[nd - 2];
        int64_t ew = pt_shape(full)[nd - 1] - pt_shape(x)[nd - 1];
        const int64_t crop[4] = {0, -ew, 0, -eh}, grow[4] = {0, ew, 0, eh};
        pt_tensor *gx = pt_pad(full, 4, crop, PT_PAD_CONSTANT, 0);
        check_close(gx, fx_get(fx, key("ct", i, "gx")));
        pt_tensor *gw = pt_conv2d_weight_grad(gout, pt_ndim(w), pt_shape(w),
                                              pt_pad(x, 4, grow, PT_PAD_CONSTANT, 0), &co, NULL);
        if (!gw)
            fail_msg("ct grad case %d: %s", i, pt_last_error());
        check_close(gw, fx_get(fx, key("ct", i, "gw")));
        pt_scope_end();
    }
    assert_true(n >= 6);
}

/* Small column budgets force the row-block paths (one image's output rows a few at a time, as
 * for large images) and single-image steps; results must still match PyTorch. The budget is
 * read once, so ctest runs this file once per budget (test_conv_col_budget_*) with
 * PT_CONV_COL_BUDGET set, and main runs only this then. */
static void test_conv_row_blocks_match_torch(void **state)
{
    assert_non_null(getenv("PT_CONV_COL_BUDGET"));
    test_conv2d_matches_torch(state);
    test_conv2d_grads_match_torch(state);
    test_conv1d_matches_torch(state);
    test_conv_transpose2d_matches_torch(state);
}

/* ---- pooling -----------------------------------------------------------------------------------
 */

static void test_max_pool2d_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("mp", i, "cfg")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("mp", i, "cfg"));
        pt_tensor *x = fx_get(fx, key("mp", i, "x"));
        int64_t k[2] = {cfg_i(cfg, 0), cfg_i(cfg, 1)};
        pt_max_pool2d_opts o = {.stride = {cfg_i(cfg, 2), cfg_i(cfg, 3)},
                                .padding = {cfg_i(cfg, 4), cfg_i(cfg, 5)},
                                .dilation = {cfg_i(cfg, 6), cfg_i(cfg, 7)},
                                .ceil_mode = cfg_i(cfg, 8) != 0};
        pt_tensor *idx = NULL;
        pt_tensor *got = pt_max_pool2d_ex(x, k, &o, &idx);
        if (!got)
            fail_msg("mp case %d: %s", i, pt_last_error());
        assert_tensor_equal(got, fx_get(fx, key("mp", i, "out")));
        assert_tensor_equal(idx, fx_get(fx, key("mp", i, "idx")));
        pt_tensor *idx2 = NULL;
        assert_tensor_equal(pt_max_pool2d_ex(pt_test_noncontig(x), k, &o, &idx2),
                            fx_get(fx, key("mp", i, "out")));
        assert_tensor_equal(idx2, fx_get(fx, key("mp", i, "idx")));
        /* backward: each grad goes to its max; sums of at most a few terms */
        pt_tensor *gout = fx_get(fx, key("mp", i, "gout"));
        check_close(pt_max_pool2d_backward(gout, x, idx), fx_get(fx, key("mp", i, "gx")));
        check_close(pt_max_pool2d_backward(pt_test_noncontig(gout), x, pt_test_noncontig(idx)),
                    fx_get(fx, key("mp", i, "gx")));
        if (!o.ceil_mode && o.dilation[0] == 1 && o.dilation[1] == 1)
            assert_tensor_equal(pt_max_pool2d(x, k, o.stride, o.padding),
                                fx_get(fx, key("mp", i, "out")));
        pt_scope_end();
    }
    assert_true(n >= 13);
}

static void test_avg_pool2d_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("ap", i, "cfg")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("ap", i, "cfg"));
        pt_tensor *x = fx_get(fx, key("ap", i, "x"));
        int64_t k[2] = {cfg_i(cfg, 0), cfg_i(cfg, 1)};
        pt_avg_pool2d_opts o = {.stride = {cfg_i(cfg, 2), cfg_i(cfg, 3)},
                                .padding = {cfg_i(cfg, 4), cfg_i(cfg, 5)},
                                .ceil_mode = cfg_i(cfg, 6) != 0,
                                .exclude_pad = cfg_i(cfg, 7) == 0,
                                .divisor_override = cfg_i(cfg, 8)};
        pt_tensor *want = fx_get(fx, key("ap", i, "out"));
        pt_tensor *got = pt_avg_pool2d_ex(x, k, &o);
        if (!got)
            fail_msg("ap case %d: %s", i, pt_last_error());
        check_close(got, want);
        check_close(pt_avg_pool2d_ex(pt_test_noncontig(x), k, &o), want);
        pt_tensor *gout = fx_get(fx, key("ap", i, "gout"));
        check_close(pt_avg_pool2d_backward(gout, x, k, &o), fx_get(fx, key("ap", i, "gx")));
        check_close(pt_avg_pool2d_backward(pt_test_noncontig(gout), x, k, &o),
                    fx_get(fx, key("ap", i, "gx")));
        if (!o.ceil_mode && !o.exclude_pad && !o.divisor_override)
            check_close(pt_avg_pool2d(x, k, o.stride, o.padding), want);
        pt_scope_end();
    }
    assert_true(n >= 8);
}

static void test_adaptive_avg_pool2d_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("aap", i, "cfg")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("aap", i, "cfg"));
        pt_tensor *x = fx_get(fx, key("aap", i, "x"));
        int64_t os[2] = {cfg_i(cfg, 0), cfg_i(cfg, 1)};
        pt_tensor *want = fx_get(fx, key("aap", i, "out"));
        check_close(pt_adaptive_avg_pool2d(x, os), want);
        check_close(pt_adaptive_avg_pool2d(pt_test_noncontig(x), os), want);
        pt_tensor *gout = fx_get(fx, key("aap", i, "gout"));
        check_close(pt_adaptive_avg_pool2d_backward(gout, x), fx_get(fx, key("aap", i, "gx")));
        pt_scope_end();
    }
    assert_true(n >= 6);
}

/* ---- pad and interpolate -----------------------------------------------------------------------
 */

static void test_pad_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("pad", i, "cfg")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("pad", i, "cfg"));
        pt_tensor *x = fx_get(fx, key("pad", i, "x"));
        double value = pt_item(fx_get(fx, key("pad", i, "value")));
        int n_pad = (int)pt_numel(cfg) - 1;
        int64_t pad[8];
        for (int k = 0; k < n_pad; k++)
            pad[k] = cfg_i(cfg, k + 1);
        pt_pad_mode mode = (pt_pad_mode)cfg_i(cfg, 0);
        pt_tensor *want = fx_get(fx, key("pad", i, "out"));
        pt_tensor *got = pt_pad(x, n_pad, pad, mode, value);
        if (!got)
            fail_msg("pad case %d: %s", i, pt_last_error());
        assert_tensor_equal(got, want);
        assert_tensor_equal(pt_pad(pt_test_noncontig(x), n_pad, pad, mode, value), want);
        if (fx_has(fx, key("pad", i, "gx"))) {
            /* backward: reflect/replicate add a few gradients into one cell */
            pt_tensor *gout = fx_get(fx, key("pad", i, "gout"));
            pt_tensor *gx = pt_pad_backward(gout, pt_ndim(x), pt_shape(x), n_pad, pad, mode);
            if (!gx)
                fail_msg("pad backward case %d: %s", i, pt_last_error());
            check_close(gx, fx_get(fx, key("pad", i, "gx")));
            check_close(
                pt_pad_backward(pt_test_noncontig(gout), pt_ndim(x), pt_shape(x), n_pad, pad, mode),
                fx_get(fx, key("pad", i, "gx")));
        }
        pt_scope_end();
    }
    assert_true(n >= 14);
    /* no padding is a copy */
    pt_tensor *x = fx_get(fx, "pad.0.x");
    pt_tensor *same = pt_pad(x, 0, NULL, PT_PAD_CONSTANT, 0);
    assert_tensor_equal(same, x);
    assert_false(pt_shares_storage(same, x));
    /* 0-dim input with no padding, forward and backward */
    pt_tensor *s0 = pt_scalar_tensor(2.5, PT_FLOAT32, pt_cpu());
    assert_tensor_equal(pt_pad(s0, 0, NULL, PT_PAD_CONSTANT, 0), s0);
    assert_tensor_equal(pt_pad_backward(s0, 0, NULL, 0, NULL, PT_PAD_CONSTANT), s0);
}

static void test_interpolate_matches_torch(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("interp", i, "cfg")); i++, n++) {
        pt_scope_begin();
        pt_tensor *cfg = fx_get(fx, key("interp", i, "cfg"));
        pt_tensor *x = fx_get(fx, key("interp", i, "x"));
        pt_interpolate_opts o = {
            .mode = pt_test_get(cfg, 0) != 0 ? PT_INTERP_BILINEAR : PT_INTERP_NEAREST,
            .align_corners = pt_test_get(cfg, 1) != 0,
            .size = {cfg_i(cfg, 2), cfg_i(cfg, 3)},
            .scale_factor = {pt_test_get(cfg, 4), pt_test_get(cfg, 5)},
        };
        pt_tensor *want = fx_get(fx, key("interp", i, "out"));
        pt_tensor *got = pt_interpolate(x, &o);
        if (!got)
            fail_msg("interp case %d: %s", i, pt_last_error());
        if (o.mode == PT_INTERP_NEAREST)
            assert_tensor_equal(got, want);
        else
            check_close(got, want);
        check_close(pt_interpolate(pt_test_noncontig(x), &o), want);
        pt_tensor *gout = fx_get(fx, key("interp", i, "gout"));
        pt_tensor *gx = pt_interpolate_backward(gout, pt_ndim(x), pt_shape(x), &o);
        if (!gx)
            fail_msg("interp backward case %d: %s", i, pt_last_error());
        check_close(gx, fx_get(fx, key("interp", i, "gx")));
        pt_scope_end();
    }
    assert_true(n >= 13);
}

/* ---- errors ------------------------------------------------------------------------------------
 */

static void test_conv_errors(void **state)
{
    (void)state;
    pt_tensor *x = fx_get(fx, "c2d.0.x"); /* [2, 3, 8, 8] */
    pt_tensor *w = fx_get(fx, "c2d.0.w"); /* [4, 3, 3, 3] */
    pt_tensor *b = fx_get(fx, "c2d.0.b");
    pt_tensor *w4 = pt_zeros(PT_SHAPE(4, 4, 3, 3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_conv2d(x, w4, NULL, NULL, NULL, NULL, 1), PT_ERR_SHAPE,
                    "weight of size [4, 4, 3, 3], expected input[2, 3, 8, 8] to have 4 channels, "
                    "but got 3 channels");
    pt_tensor *big = pt_zeros(PT_SHAPE(4, 3, 9, 3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_conv2d(x, big, NULL, NULL, NULL, NULL, 1), PT_ERR_SHAPE,
                    "Kernel size can't be greater than actual input size");
    assert_pt_error(pt_conv2d(x, w, NULL, NULL, NULL, NULL, 3), PT_ERR_INVALID_ARG,
                    "divisible by 3");
    assert_pt_error(pt_conv2d(x, w, NULL, NULL, NULL, NULL, 2), PT_ERR_SHAPE,
                    "expected input[2, 3, 8, 8] to have 6 channels");
    assert_pt_error(pt_conv2d(x, w, NULL, NULL, NULL, NULL, 0), PT_ERR_INVALID_ARG, "groups");
    assert_pt_error(pt_conv2d(NULL, w, NULL, NULL, NULL, NULL, 1), PT_ERR_NULL, "pt_conv2d");
    assert_pt_error(pt_conv2d(x, NULL, NULL, NULL, NULL, NULL, 1), PT_ERR_NULL, "weight");
    assert_pt_error(pt_conv2d(x, w, NULL, (const int64_t[]){0, 1}, NULL, NULL, 1),
                    PT_ERR_INVALID_ARG, "stride");
    assert_pt_error(pt_conv2d(x, w, NULL, NULL, (const int64_t[]){-1, 0}, NULL, 1),
                    PT_ERR_INVALID_ARG, "padding");
    assert_pt_error(
        pt_conv2d(x, w, pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu()), NULL, NULL, NULL, 1),
        PT_ERR_SHAPE, "expected bias to be 1-dimensional with 4 elements");
    assert_pt_error(pt_conv2d(x, pt_to_dtype(w, PT_FLOAT64), b, NULL, NULL, NULL, 1), PT_ERR_DTYPE,
                    "same dtype");
    /* integer convolutions run (tests/test_conv_int.c); bool ones are refused as in PyTorch */
    assert_pt_error(
        pt_conv2d(pt_to_dtype(x, PT_BOOL), pt_to_dtype(w, PT_BOOL), NULL, NULL, NULL, NULL, 1),
        PT_ERR_DTYPE, "floating");
    assert_pt_error(
        pt_conv2d(pt_zeros(PT_SHAPE(8, 8), PT_FLOAT32, pt_cpu()), w, NULL, NULL, NULL, NULL, 1),
        PT_ERR_SHAPE, "expected 3-D (unbatched) or 4-D (batched) input");
    pt_conv_opts same_strided = {.stride = {2, 2}, .padding_mode = PT_CONV_PADDING_SAME};
    assert_pt_error(pt_conv2d_ex(x, w, NULL, &same_strided), PT_ERR_INVALID_ARG,
                    "padding='same' is not supported for strided");
    assert_pt_error(pt_conv1d(x, w, NULL, 1, 0, 1, 1), PT_ERR_SHAPE, "pt_conv1d");
    /* gradients */
    pt_tensor *gy = fx_get(fx, "c2d.0.out"); /* [2, 4, 6, 6] */
    assert_pt_error(pt_conv2d_input_grad(4, pt_shape(x), w, x, NULL), PT_ERR_SHAPE,
                    "grad_output of size [2, 3, 8, 8], expected [2, 4, 6, 6]");
    assert_pt_error(pt_conv2d_input_grad(4, NULL, w, gy, NULL), PT_ERR_NULL, "input_shape");
    assert_pt_error(
        pt_conv2d_weight_grad(x, 4, pt_shape(w), pt_to_dtype(gy, PT_FLOAT64), NULL, NULL),
        PT_ERR_DTYPE, "same dtype");
    pt_tensor *gb = (pt_tensor *)1;
    assert_pt_error(pt_conv2d_weight_grad(x, 4, (const int64_t[]){4, 2, 3, 3}, gy, NULL, &gb),
                    PT_ERR_SHAPE, "to have 2 channels");
    assert_null(gb);
    assert_pt_error(pt_conv1d_weight_grad(x, 4, pt_shape(w), gy, NULL, NULL), PT_ERR_SHAPE,
                    "pt_conv1d_weight_grad");
    /* transposed */
    assert_pt_error(pt_conv_transpose2d(x, w4, NULL, NULL, NULL, NULL, 1, NULL), PT_ERR_SHAPE,
                    "expected input[2, 3, 8, 8] to have 4 channels");
    pt_tensor *wt = pt_zeros(PT_SHAPE(3, 2, 3, 3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_conv_transpose2d(x, wt, NULL, (const int64_t[]){2, 2}, NULL,
                                        (const int64_t[]){2, 0}, 1, NULL),
                    PT_ERR_INVALID_ARG, "output padding must be smaller than either stride");
    assert_pt_error(pt_conv_transpose2d(x, wt, NULL, NULL, NULL, NULL, 2, NULL), PT_ERR_INVALID_ARG,
                    "divisible by 2");
    assert_pt_error(pt_conv_transpose2d(x, wt, NULL, NULL, NULL, NULL, 0, NULL), PT_ERR_INVALID_ARG,
                    "groups");
}

static void test_pool_pad_interp_errors(void **state)
{
    (void)state;
    pt_tensor *x = fx_get(fx, "mp.0.x"); /* [2, 3, 8, 8] */
    pt_tensor *idx = (pt_tensor *)1;
    assert_pt_error(pt_max_pool2d_ex(x, (const int64_t[]){3, 3},
                                     &(pt_max_pool2d_opts){.padding = {2, 2}}, &idx),
                    PT_ERR_INVALID_ARG, "pad should be at most half of kernel size");
    assert_null(idx);
    assert_pt_error(pt_max_pool2d(x, (const int64_t[]){9, 9}, NULL, NULL), PT_ERR_SHAPE,
                    "too small");
    assert_pt_error(pt_max_pool2d(x, (const int64_t[]){0, 2}, NULL, NULL), PT_ERR_INVALID_ARG,
                    "greater than zero");
    assert_pt_error(pt_max_pool2d(x, NULL, NULL, NULL), PT_ERR_NULL, "kernel_size");
    assert_pt_error(pt_max_pool2d(NULL, (const int64_t[]){2, 2}, NULL, NULL), PT_ERR_NULL,
                    "pt_max_pool2d");
    assert_pt_error(pt_max_pool2d(pt_to_dtype(x, PT_BOOL), (const int64_t[]){2, 2}, NULL, NULL),
                    PT_ERR_DTYPE, "floating");
    assert_pt_error(pt_avg_pool2d(pt_zeros(PT_SHAPE(8, 8), PT_FLOAT32, pt_cpu()),
                                  (const int64_t[]){2, 2}, NULL, NULL),
                    PT_ERR_SHAPE, "[8, 8]");
    assert_pt_error(pt_adaptive_avg_pool2d(x, (const int64_t[]){-1, 2}), PT_ERR_INVALID_ARG,
                    "output_size");
    /* pooling gradients */
    pt_tensor *out = pt_max_pool2d_ex(x, (const int64_t[]){2, 2}, NULL, &idx);
    assert_non_null(out);
    pt_tensor *bad_idx = pt_full(4, pt_shape(idx), 64, PT_INT64, pt_cpu());
    assert_pt_error(pt_max_pool2d_backward(out, x, bad_idx), PT_ERR_INDEX, "outside");
    assert_pt_error(pt_max_pool2d_backward(x, x, idx), PT_ERR_SHAPE, "indices of size");
    assert_pt_error(pt_max_pool2d_backward(out, x, pt_to_dtype(idx, PT_INT32)), PT_ERR_DTYPE,
                    "int64");
    assert_pt_error(pt_avg_pool2d_backward(x, x, (const int64_t[]){2, 2}, NULL), PT_ERR_SHAPE,
                    "does not match");
    /* pad */
    assert_pt_error(pt_pad(x, 3, (const int64_t[]){1, 1, 1}, PT_PAD_CONSTANT, 0),
                    PT_ERR_INVALID_ARG, "divisible by 2");
    assert_pt_error(
        pt_pad(x, 10, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, PT_PAD_CONSTANT, 0),
        PT_ERR_INVALID_ARG, "too large");
    assert_pt_error(pt_pad(x, 4, (const int64_t[]){8, 0, 0, 0}, PT_PAD_REFLECT, 0),
                    PT_ERR_INVALID_ARG, "should be less than the corresponding input dimension");
    assert_pt_error(pt_pad(x, 2, (const int64_t[]){-5, -4}, PT_PAD_CONSTANT, 0), PT_ERR_SHAPE,
                    "negative output size");
    assert_pt_error(pt_pad(pt_zeros(PT_SHAPE(8), PT_FLOAT32, pt_cpu()), 2, (const int64_t[]){1, 1},
                           PT_PAD_REPLICATE, 0),
                    PT_ERR_SHAPE, "needs a 2-D or 3-D input");
    assert_pt_error(pt_pad(NULL, 2, (const int64_t[]){1, 1}, PT_PAD_CONSTANT, 0), PT_ERR_NULL,
                    "pt_pad");
    assert_pt_error(pt_pad_backward(x, 4, pt_shape(x), 2, (const int64_t[]){1, 1}, PT_PAD_CONSTANT),
                    PT_ERR_SHAPE, "grad_output of size [2, 3, 8, 8], expected [2, 3, 8, 10]");
    assert_pt_error(pt_pad_backward(x, 4, NULL, 2, (const int64_t[]){1, 1}, PT_PAD_CONSTANT),
                    PT_ERR_NULL, "input_shape");
    /* interpolate */
    assert_pt_error(
        pt_interpolate_backward(x, 4, pt_shape(x), &(pt_interpolate_opts){.size = {4, 4}}),
        PT_ERR_SHAPE, "expected [2, 3, 4, 4]");
    assert_pt_error(
        pt_interpolate(x, &(pt_interpolate_opts){.size = {4, 4}, .scale_factor = {2, 2}}),
        PT_ERR_INVALID_ARG, "only one of size or scale_factor");
    assert_pt_error(pt_interpolate(x, &(pt_interpolate_opts){0}), PT_ERR_INVALID_ARG,
                    "either size or scale_factor");
    assert_pt_error(
        pt_interpolate(x, &(pt_interpolate_opts){.size = {4, 4}, .align_corners = true}),
        PT_ERR_INVALID_ARG, "align_corners");
    assert_pt_error(pt_interpolate(x, &(pt_interpolate_opts){.scale_factor = {-1, 2}}),
                    PT_ERR_INVALID_ARG, "scale_factor");
    assert_pt_error(pt_interpolate(pt_zeros(PT_SHAPE(3, 8, 8), PT_FLOAT32, pt_cpu()),
                                   &(pt_interpolate_opts){.size = {4, 4}}),
                    PT_ERR_SHAPE, "4-D");
}

int main(void)
{
    fx = fx_open("conv");
    if (getenv("PT_CONV_COL_BUDGET")) {
        const struct CMUnitTest budget[] = {
            cmocka_unit_test_setup_teardown(test_conv_row_blocks_match_torch, pt_test_setup,
                                            pt_test_teardown),
        };
        int rc = cmocka_run_group_tests(budget, NULL, NULL);
        fx_close(fx);
        return rc;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_conv2d_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_conv2d_grads_match_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_conv2d_single_thread_and_defaults, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_conv1d_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_conv_transpose2d_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_max_pool2d_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_avg_pool2d_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_adaptive_avg_pool2d_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_pad_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_interpolate_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_conv_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_pool_pad_interp_errors, pt_test_setup,
                                        pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
