/* Integer convolutions and pooling against PyTorch 2.x on the CPU (tests/fixtures/gen/
 * conv_int.py): conv1d / conv2d and max_pool2d for int64, int32, int16, int8 and uint8,
 * conv_transpose2d and avg_pool2d for int64, with strides, padding, dilation (int64 only, as
 * PyTorch), groups, padding="same", biases and values spanning each dtype's range so that sums and
 * products wrap; results compared bit for bit. Then the dtypes PyTorch refuses: bool everywhere,
 * the narrower integers for conv_transpose2d, avg_pool2d and dilated convolutions. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

static char name_buf[4][64];
static int name_slot;

/* "<op>.<i>.<field>" in a small rotating buffer. */
static const char *key(const char *op, int i, const char *field)
{
    char *b = name_buf[name_slot++ % 4];
    snprintf(b, 64, "%s.%d.%s", op, i, field);
    return b;
}

static int64_t cfg_i(const pt_tensor *cfg, int k)
{
    return (int64_t)pt_test_get(cfg, k);
}

/* Exact equality of dtype, shape and every element: int64 values near 2^62 are not exact as
 * doubles, so the elements are compared as raw bytes rather than through assert_tensor_equal. */
static void assert_int_exact(const pt_tensor *got, const pt_tensor *want, const char *what)
{
    if (!got)
        fail_msg("%s: failed: %s", what, pt_last_error());
    assert_int_equal(pt_dtype_of(got), pt_dtype_of(want));
    assert_int_equal(pt_ndim(got), pt_ndim(want));
    assert_memory_equal(pt_shape(got), pt_shape(want), sizeof(int64_t) * (size_t)pt_ndim(want));
    size_t nbytes = (size_t)pt_numel(want) * pt_dtype_size(pt_dtype_of(want));
    char *a = malloc(nbytes + 1), *b = malloc(nbytes + 1);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(pt_copy_to_host(got, a, nbytes), PT_OK);
    assert_int_equal(pt_copy_to_host(want, b, nbytes), PT_OK);
    int diff = memcmp(a, b, nbytes);
    free(a);
    free(b);
    if (diff != 0)
        fail_msg("%s: values differ from PyTorch's", what);
}

static const pt_tensor *opt_bias(const char *op, int i)
{
    const char *k = key(op, i, "b");
    return fx_has(fx, k) ? fx_get(fx, k) : NULL;
}

static void test_conv2d_int(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("conv2d", i, "cfg")); i++, n++) {
        const pt_tensor *cfg = fx_get(fx, key("conv2d", i, "cfg"));
        const pt_tensor *x = fx_get(fx, key("conv2d", i, "x")),
                        *w = fx_get(fx, key("conv2d", i, "w"));
        const pt_tensor *y = fx_get(fx, key("conv2d", i, "y")), *b = opt_bias("conv2d", i);
        int64_t s[2] = {cfg_i(cfg, 0), cfg_i(cfg, 1)}, p[2] = {cfg_i(cfg, 2), cfg_i(cfg, 3)},
                d[2] = {cfg_i(cfg, 4), cfg_i(cfg, 5)};
        assert_int_exact(pt_conv2d(x, w, b, s, p, d, cfg_i(cfg, 6)), y, key("conv2d", i, "y"));
        /* a strided input takes the same path after the front-end's copy */
        assert_int_exact(pt_conv2d(pt_test_noncontig(x), w, b, s, p, d, cfg_i(cfg, 6)), y,
                         key("conv2d", i, "noncontig"));
    }
    assert_int_equal(n, 10); /* two cases for each of the five integer dtypes */
}

/* padding="same" with an even kernel: the extra padding cell goes after, as in PyTorch */
static void test_conv2d_same_int(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("conv2d_same", i, "cfg")); i++, n++) {
        const pt_tensor *cfg = fx_get(fx, key("conv2d_same", i, "cfg"));
        pt_conv_opts o = {.dilation = {cfg_i(cfg, 0), cfg_i(cfg, 1)},
                          .padding_mode = PT_CONV_PADDING_SAME};
        assert_int_exact(pt_conv2d_ex(fx_get(fx, key("conv2d_same", i, "x")),
                                      fx_get(fx, key("conv2d_same", i, "w")), NULL, &o),
                         fx_get(fx, key("conv2d_same", i, "y")), key("conv2d_same", i, "y"));
    }
    assert_int_equal(n, 3);
}

static void test_conv1d_int(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("conv1d", i, "cfg")); i++, n++) {
        const pt_tensor *cfg = fx_get(fx, key("conv1d", i, "cfg"));
        const pt_tensor *x = fx_get(fx, key("conv1d", i, "x")),
                        *w = fx_get(fx, key("conv1d", i, "w"));
        const pt_tensor *y = fx_get(fx, key("conv1d", i, "y")), *b = opt_bias("conv1d", i);
        assert_int_exact(
            pt_conv1d(x, w, b, cfg_i(cfg, 0), cfg_i(cfg, 1), cfg_i(cfg, 2), cfg_i(cfg, 3)), y,
            key("conv1d", i, "y"));
    }
    assert_int_equal(n, 10);
}

static void test_conv_transpose2d_int64(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("conv_transpose2d", i, "cfg")); i++, n++) {
        const char *op = "conv_transpose2d";
        const pt_tensor *cfg = fx_get(fx, key(op, i, "cfg"));
        const pt_tensor *x = fx_get(fx, key(op, i, "x")), *w = fx_get(fx, key(op, i, "w"));
        const pt_tensor *y = fx_get(fx, key(op, i, "y")), *b = opt_bias(op, i);
        int64_t s[2] = {cfg_i(cfg, 0), cfg_i(cfg, 1)}, p[2] = {cfg_i(cfg, 2), cfg_i(cfg, 3)},
                op2[2] = {cfg_i(cfg, 4), cfg_i(cfg, 5)}, d[2] = {cfg_i(cfg, 6), cfg_i(cfg, 7)};
        assert_int_exact(pt_conv_transpose2d(x, w, b, s, p, op2, cfg_i(cfg, 8), d), y,
                         key(op, i, "y"));
    }
    assert_int_equal(n, 3);
}

static void test_max_pool2d_int(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("max_pool2d", i, "cfg")); i++, n++) {
        const pt_tensor *cfg = fx_get(fx, key("max_pool2d", i, "cfg"));
        const pt_tensor *x = fx_get(fx, key("max_pool2d", i, "x"));
        int64_t k[2] = {cfg_i(cfg, 0), cfg_i(cfg, 1)};
        pt_max_pool2d_opts o = {.stride = {cfg_i(cfg, 2), cfg_i(cfg, 3)},
                                .padding = {cfg_i(cfg, 4), cfg_i(cfg, 5)},
                                .dilation = {cfg_i(cfg, 6), cfg_i(cfg, 7)},
                                .ceil_mode = cfg_i(cfg, 8) != 0};
        pt_tensor *ind = NULL;
        assert_int_exact(pt_max_pool2d_ex(x, k, &o, &ind), fx_get(fx, key("max_pool2d", i, "y")),
                         key("max_pool2d", i, "y"));
        assert_int_exact(ind, fx_get(fx, key("max_pool2d", i, "ind")), key("max_pool2d", i, "ind"));
    }
    assert_int_equal(n, 10);
}

static void test_avg_pool2d_int64(void **state)
{
    (void)state;
    int n = 0;
    for (int i = 0; fx_has(fx, key("avg_pool2d", i, "cfg")); i++, n++) {
        const pt_tensor *cfg = fx_get(fx, key("avg_pool2d", i, "cfg"));
        const pt_tensor *x = fx_get(fx, key("avg_pool2d", i, "x"));
        int64_t k[2] = {cfg_i(cfg, 0), cfg_i(cfg, 1)};
        pt_avg_pool2d_opts o = {.stride = {cfg_i(cfg, 2), cfg_i(cfg, 3)},
                                .padding = {cfg_i(cfg, 4), cfg_i(cfg, 5)},
                                .ceil_mode = cfg_i(cfg, 6) != 0,
                                .exclude_pad = cfg_i(cfg, 7) == 0,
                                .divisor_override = cfg_i(cfg, 8)};
        assert_int_exact(pt_avg_pool2d_ex(x, k, &o), fx_get(fx, key("avg_pool2d", i, "y")),
                         key("avg_pool2d", i, "y"));
    }
    assert_int_equal(n, 4);
    /* a window summing to -5 over 4 cells: the quotient truncates toward zero, to -1 */
    const pt_tensor *y = fx_get(fx, "avg_pool2d.trunc.y");
    assert_int_equal((int64_t)pt_test_get(y, 0), -1);
    assert_int_exact(
        pt_avg_pool2d(fx_get(fx, "avg_pool2d.trunc.x"), (const int64_t[]){2, 2}, NULL, NULL), y,
        "avg_pool2d.trunc");
}

/* What PyTorch 2.x refuses stays refused, naming the op and the dtype. */
static void test_refused_dtypes(void **state)
{
    (void)state;
    pt_device cpu = pt_cpu();
    pt_tensor *xb = pt_zeros(PT_SHAPE(1, 2, 4, 4), PT_BOOL, cpu);
    pt_tensor *wb = pt_zeros(PT_SHAPE(2, 2, 2, 2), PT_BOOL, cpu);
    int64_t k[2] = {2, 2}, dil2[2] = {1, 2};
    assert_pt_error(pt_conv2d(xb, wb, NULL, NULL, NULL, NULL, 1), PT_ERR_DTYPE,
                    "pt_conv2d: expected a floating point or integer tensor for 'input', got bool");
    assert_pt_error(pt_conv1d(pt_select(xb, 2, 0), pt_select(wb, 2, 0), NULL, 1, 0, 1, 1),
                    PT_ERR_DTYPE, "pt_conv1d: expected a floating point or integer tensor");
    assert_pt_error(pt_conv_transpose2d(xb, wb, NULL, NULL, NULL, NULL, 1, NULL), PT_ERR_DTYPE,
                    "pt_conv_transpose2d: expected a floating point or integer tensor");
    assert_pt_error(pt_max_pool2d(xb, k, NULL, NULL), PT_ERR_DTYPE,
                    "pt_max_pool2d: expected a floating point or integer tensor for 'input', got "
                    "bool");
    assert_pt_error(pt_avg_pool2d(xb, k, NULL, NULL), PT_ERR_DTYPE, "pt_avg_pool2d: expected a");
    const pt_dtype narrow[4] = {PT_INT32, PT_INT16, PT_INT8, PT_UINT8};
    for (int i = 0; i < 4; i++) {
        pt_tensor *x = pt_zeros(PT_SHAPE(1, 2, 4, 4), narrow[i], cpu);
        pt_tensor *w = pt_zeros(PT_SHAPE(2, 2, 2, 2), narrow[i], cpu);
        char want[160];
        snprintf(want, sizeof want,
                 "must be int64 (the only integer dtype this op supports), got %s",
                 pt_dtype_name(narrow[i]));
        assert_pt_error(pt_conv_transpose2d(x, w, NULL, NULL, NULL, NULL, 1, NULL), PT_ERR_DTYPE,
                        "pt_conv_transpose2d: integer 'input'");
        assert_pt_error(pt_conv_transpose2d(x, w, NULL, NULL, NULL, NULL, 1, NULL), PT_ERR_DTYPE,
                        want);
        assert_pt_error(pt_avg_pool2d(x, k, NULL, NULL), PT_ERR_DTYPE, "pt_avg_pool2d: integer");
        assert_pt_error(pt_avg_pool2d(x, k, NULL, NULL), PT_ERR_DTYPE, want);
        /* dilation runs only for int64 in PyTorch ("slow_conv_dilated" has no other kernel) */
        snprintf(want, sizeof want,
                 "pt_conv2d: a dilated convolution (dilation 2) of integer input must be int64, "
                 "got %s",
                 pt_dtype_name(narrow[i]));
        assert_pt_error(pt_conv2d(x, w, NULL, NULL, NULL, dil2, 1), PT_ERR_DTYPE, want);
        assert_pt_error(pt_conv1d(pt_select(x, 2, 0), pt_select(w, 2, 0), NULL, 1, 0, 2, 1),
                        PT_ERR_DTYPE, "pt_conv1d: a dilated convolution");
        /* the same calls without dilation / in int64 run */
        pt_tensor *y = pt_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
        assert_non_null(y);
        assert_int_equal(pt_dtype_of(y), narrow[i]);
        assert_non_null(pt_max_pool2d(x, k, NULL, NULL));
    }
    /* mixed integer dtypes are refused as mixed float dtypes are */
    pt_tensor *x64 = pt_zeros(PT_SHAPE(1, 2, 4, 4), PT_INT64, cpu);
    pt_tensor *w32 = pt_zeros(PT_SHAPE(2, 2, 2, 2), PT_INT32, cpu);
    assert_pt_error(pt_conv2d(x64, w32, NULL, NULL, NULL, NULL, 1), PT_ERR_DTYPE,
                    "pt_conv2d: input (int64), weight (int32) and bias (none) must have the same "
                    "dtype");
    /* integer adaptive pooling and interpolation stay refused (PyTorch has no kernel) */
    assert_pt_error(pt_adaptive_avg_pool2d(x64, k), PT_ERR_DTYPE,
                    "pt_adaptive_avg_pool2d: expected a floating point tensor for 'input', got "
                    "int64");
}

int main(void)
{
    fx = fx_open("conv_int");
    if (!fx) {
        fprintf(stderr, "test_conv_int: fixtures conv_int.ptfx missing\n");
        return 1;
    }
#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)
    const struct CMUnitTest tests[] = {
        T(test_conv2d_int),     T(test_conv2d_same_int),
        T(test_conv1d_int),     T(test_conv_transpose2d_int64),
        T(test_max_pool2d_int), T(test_avg_pool2d_int64),
        T(test_refused_dtypes),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
