/* nn layer tests: every layer module against PyTorch (tests/fixtures/gen/nn_layers.py):
 * parameter/buffer names, shapes, dtypes and deterministic initial values, repr, forward over
 * several train/eval steps with torch's weights copied in, gradients of the inputs and
 * parameters, running statistics; random initialization by its bounds; constructor and input
 * errors. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

/* Forward results of composite layers go through several float32 ops (reductions, matmul):
 * rtol 1e-4 / atol 1e-5 covers their summation-order differences from torch. */
#define RTOL 1e-4
#define ATOL 1e-5

static pt_tensor *getf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static pt_tensor *getf(const char *fmt, ...)
{
    char key[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(key, sizeof key, fmt, ap);
    va_end(ap);
    return fx_get(fx, key);
}

static bool hasf(const char *fmt, const char *c, int j)
{
    char key[160];
    snprintf(key, sizeof key, fmt, c, j);
    return fx_has(fx, key);
}

/* A uint8 fixture tensor as a C string (malloc'd). */
static char *fx_text(const char *c, const char *what)
{
    pt_tensor *t = getf("%s.%s", c, what);
    int64_t n = pt_numel(t);
    char *s = malloc((size_t)n + 1);
    for (int64_t i = 0; i < n; i++)
        s[i] = (char)pt_test_get(t, i);
    s[n] = '\0';
    return s;
}

/* Names joined by commas, as the fixture stores them. */
static char *join(int n, const char **names)
{
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(names[i]) + 1;
    char *s = calloc(1, len);
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(s, ",");
        strcat(s, names[i]);
    }
    return s;
}

static void copy_in(pt_tensor *dst, const pt_tensor *src)
{
    pt_no_grad_begin();
    assert_int_equal(pt_copy_(dst, src), PT_OK);
    pt_no_grad_end();
}

/* Checks names, shapes, dtypes and deterministic init of the parameters and buffers, then
 * copies torch's parameter values in. Returns the parameter count. */
static int check_members(const char *c, pt_module *m, pt_tensor ***params_out)
{
    const char **names;
    pt_tensor **params;
    int np = pt_nn_named_parameters(m, &names, &params);
    assert_true(np >= 0);
    char *got = join(np, names), *want = fx_text(c, "pnames");
    if (strcmp(got, want) != 0)
        fail_msg("%s: parameters '%s', torch has '%s'", c, got, want);
    free(got);
    free(want);
    free(names);
    for (int i = 0; i < np; i++) {
        pt_tensor *init = getf("%s.p%d.init", c, i);
        if (pt_item(getf("%s.p%d.det", c, i)) != 0)
            assert_tensor_equal(params[i], init);
        else
            pt_test_assert_shape(params[i], pt_ndim(init), pt_shape(init), __FILE__, __LINE__);
        assert_true(pt_requires_grad(params[i]));
        copy_in(params[i], getf("%s.p%d", c, i));
    }
    pt_tensor **bufs;
    int nb = pt_nn_named_buffers(m, &names, &bufs);
    got = join(nb, names);
    want = fx_text(c, "bnames");
    if (strcmp(got, want) != 0)
        fail_msg("%s: buffers '%s', torch has '%s'", c, got, want);
    free(got);
    free(want);
    free(names);
    for (int i = 0; i < nb; i++)
        assert_tensor_equal(bufs[i], getf("%s.b%d.init", c, i));
    free(bufs);
    *params_out = params;
    return np;
}

static void check_repr(const char *c, const pt_module *m)
{
    char *got = pt_nn_to_string(m), *want = fx_text(c, "repr");
    if (strcmp(got, want) != 0)
        fail_msg("%s: repr '%s', torch prints '%s'", c, got, want);
    free(got);
    free(want);
}

/* For stateless modules (no buffers): the first step's output again from non-contiguous copies
 * of the inputs (in the first step's mode). */
static void check_noncontig(const char *c, pt_module *m)
{
    if (pt_nn_named_buffers(m, NULL, NULL) != 0)
        return;
    pt_nn_train(m, pt_test_get(getf("%s.train", c), 0) != 0);
    int nin = (int)pt_item(getf("%s.nin", c));
    pt_tensor *in[2] = {NULL, NULL};
    for (int j = 0; j < nin; j++)
        in[j] = pt_test_noncontig(getf("%s.x0.%d", c, j));
    pt_tensor *y = NULL;
    pt_no_grad_begin();
    if (nin == 1)
        y = pt_nn_forward(m, in[0]);
    else
        pt_nn_forward_n(m, nin, (const pt_tensor *const *)in, 1, &y);
    pt_no_grad_end();
    if (!y)
        fail_msg("%s: forward on non-contiguous input failed: %s", c, pt_last_error());
    assert_tensor_close(y, getf("%s.y0", c), RTOL, ATOL);
}

/* Runs every step of case c on m and compares outputs, gradients and final buffers. Frees m. */
static void run_case(const char *c, pt_module *m)
{
    if (!m)
        fail_msg("%s: constructor failed: %s", c, pt_last_error());
    check_repr(c, m);
    pt_tensor **params;
    int np = check_members(c, m, &params);
    check_noncontig(c, m);
    pt_tensor *train = getf("%s.train", c);
    int64_t steps = pt_numel(train);
    int nin = (int)pt_item(getf("%s.nin", c));
    for (int64_t s = 0; s < steps; s++) {
        bool last = s == steps - 1;
        pt_nn_train(m, pt_test_get(train, s) != 0);
        pt_tensor *in[2] = {NULL, NULL};
        for (int j = 0; j < nin; j++) {
            in[j] = getf("%s.x%d.%d", c, (int)s, j);
            if (last && pt_dtype_is_floating(pt_dtype_of(in[j])))
                pt_requires_grad_(in[j], true);
        }
        pt_tensor *y = NULL;
        if (nin == 1) {
            y = pt_nn_forward(m, in[0]);
        } else {
            assert_int_equal(pt_nn_forward_n(m, nin, (const pt_tensor *const *)in, 1, &y), PT_OK);
        }
        if (!y)
            fail_msg("%s step %d: forward failed: %s", c, (int)s, pt_last_error());
        assert_tensor_close(y, getf("%s.y%d", c, (int)s), RTOL, ATOL);
        if (!last)
            continue;
        pt_tensor *loss = pt_sum(pt_mul(y, getf("%s.gy", c)));
        assert_int_equal(pt_backward(loss, NULL, false, false), PT_OK);
        for (int j = 0; j < nin; j++)
            if (hasf("%s.gx.%d", c, j))
                assert_tensor_close(pt_grad(in[j]), getf("%s.gx.%d", c, j), RTOL, ATOL);
        for (int i = 0; i < np; i++)
            assert_tensor_close(pt_grad(params[i]), getf("%s.g%d", c, i), RTOL, ATOL);
    }
    pt_tensor **bufs;
    int nb = pt_nn_named_buffers(m, NULL, &bufs);
    for (int i = 0; i < nb; i++)
        assert_tensor_close(bufs[i], getf("%s.b%d", c, i), RTOL, ATOL);
    free(bufs);
    free(params);
    pt_nn_free(m);
}

/* ---- forward / backward / repr vs torch ------------------------------------------------------ */

static void test_linear_and_shape_layers(void **state)
{
    (void)state;
    run_case("linear", pt_nn_linear(5, 3, true));
    run_case("linear_nobias_nd", pt_nn_linear(5, 3, false));
    run_case("linear_nd", pt_nn_linear(4, 6, true));
    run_case("linear_1d", pt_nn_linear(4, 2, true));
    run_case("bilinear", pt_nn_bilinear(3, 4, 2, true));
    run_case("bilinear_nd", pt_nn_bilinear(2, 3, 4, false));
    run_case("identity", pt_nn_identity());
    run_case("flatten", pt_nn_flatten(1, -1));
    run_case("flatten_01", pt_nn_flatten(0, 1));
    run_case("unflatten", pt_nn_unflatten(1, 2, (const int64_t[]){2, 3}));
    run_case("dropout_eval", pt_nn_dropout(0.3));
}

static void test_conv_layers(void **state)
{
    (void)state;
    run_case("conv2d", pt_nn_conv2d(3, 4, 3, 1, 1, true));
    pt_nn_conv_opts ex = {
        .stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2, .no_bias = true};
    run_case("conv2d_ex", pt_nn_conv2d_ex(4, 6, (const int64_t[]){3, 2}, &ex));
    pt_nn_conv_opts same = {.padding_type = PT_CONV_PADDING_SAME};
    run_case("conv2d_same", pt_nn_conv2d_ex(2, 3, (const int64_t[]){3, 4}, &same));
    pt_nn_conv_opts valid = {.padding_type = PT_CONV_PADDING_VALID};
    run_case("conv2d_valid", pt_nn_conv2d_ex(2, 3, (const int64_t[]){3, 3}, &valid));
    pt_nn_conv_opts refl = {.padding = {1, 2}, .padding_mode = "reflect"};
    run_case("conv2d_reflect", pt_nn_conv2d_ex(2, 3, (const int64_t[]){3, 3}, &refl));
    pt_nn_conv_opts repl = {.stride = {2, 2}, .padding = {1, 1}, .padding_mode = "replicate"};
    run_case("conv2d_replicate", pt_nn_conv2d_ex(2, 2, (const int64_t[]){3, 3}, &repl));
    pt_nn_conv_opts sr = {.padding_type = PT_CONV_PADDING_SAME, .padding_mode = "reflect"};
    run_case("conv2d_same_reflect", pt_nn_conv2d_ex(2, 2, (const int64_t[]){3, 4}, &sr));
    pt_nn_conv_opts r1 = {.padding = {2}, .padding_mode = "replicate"};
    run_case("conv1d_replicate", pt_nn_conv1d_ex(2, 3, 3, &r1));
    run_case("conv1d", pt_nn_conv1d(3, 4, 3, 2, 1, true));
    pt_nn_conv_opts c1 = {.dilation = {2}, .groups = 2, .no_bias = true};
    run_case("conv1d_ex", pt_nn_conv1d_ex(4, 2, 2, &c1));
    run_case("convt", pt_nn_conv_transpose2d(3, 2, 2, 2, 0, true));
    pt_nn_conv_transpose_opts t = {
        .stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}, .groups = 2};
    run_case("convt_ex", pt_nn_conv_transpose2d_ex(4, 6, (const int64_t[]){3, 3}, &t));
}

static void test_batch_norm_layers(void **state)
{
    (void)state;
    run_case("bn1d", pt_nn_batch_norm1d(3));
    pt_nn_batch_norm_opts cma = {.momentum_none = true};
    run_case("bn1d_3d_cma", pt_nn_batch_norm1d_ex(3, &cma));
    run_case("bn2d", pt_nn_batch_norm2d(3));
    pt_nn_batch_norm_opts o = {.eps = 1e-3, .has_momentum = true, .momentum = 0.3};
    run_case("bn2d_opts", pt_nn_batch_norm2d_ex(2, &o));
    pt_nn_batch_norm_opts plain = {.no_affine = true, .no_track_running_stats = true};
    run_case("bn2d_plain", pt_nn_batch_norm2d_ex(3, &plain));
}

static void test_other_norm_layers(void **state)
{
    (void)state;
    run_case("layernorm", pt_nn_layer_norm(1, (const int64_t[]){5}));
    pt_nn_layer_norm_opts ln = {.eps = 1e-6, .no_elementwise_affine = true};
    run_case("layernorm_2", pt_nn_layer_norm_ex(2, (const int64_t[]){3, 4}, &ln));
    run_case("groupnorm", pt_nn_group_norm(2, 4));
    pt_nn_group_norm_opts gn = {.eps = 1e-3, .no_affine = true};
    run_case("groupnorm_2", pt_nn_group_norm_ex(3, 6, &gn));
    run_case("rmsnorm", pt_nn_rms_norm(1, (const int64_t[]){4}));
    pt_nn_rms_norm_opts rn = {.has_eps = true, .eps = 1e-5};
    run_case("rmsnorm_2", pt_nn_rms_norm_ex(2, (const int64_t[]){2, 3}, &rn));
    pt_nn_rms_norm_opts rn2 = {.has_eps = true, .eps = 0.01, .no_elementwise_affine = true};
    run_case("rmsnorm_noaffine", pt_nn_rms_norm_ex(1, (const int64_t[]){3}, &rn2));
    run_case("instnorm", pt_nn_instance_norm2d(3));
    pt_nn_instance_norm_opts in = {.affine = true, .track_running_stats = true};
    run_case("instnorm_track", pt_nn_instance_norm2d_ex(3, &in));
    pt_nn_instance_norm_opts in3 = {.affine = true};
    run_case("instnorm_3d", pt_nn_instance_norm2d_ex(2, &in3));
}

static void test_embedding_layers(void **state)
{
    (void)state;
    run_case("embedding", pt_nn_embedding(10, 4));
    pt_nn_embedding_opts pad = {.has_padding_idx = true, .padding_idx = -2};
    pt_module *m = pt_nn_embedding_ex(6, 3, &pad);
    /* the padding row (index 4) starts as zeros, the others are N(0, 1) draws */
    pt_tensor *w = pt_nn_param_ref(m, "weight");
    assert_tensor_equal(pt_select(w, 0, 4), pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu()));
    assert_true(pt_item(pt_sum(pt_abs(pt_select(w, 0, 3)))) > 0);
    run_case("embedding_pad", m); /* torch's gradient has a zero padding row */
}

static void test_pool_layers(void **state)
{
    (void)state;
    run_case("maxpool", pt_nn_max_pool2d(2, 0, 0));
    pt_max_pool2d_opts mp = {.stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true};
    run_case("maxpool_ex", pt_nn_max_pool2d_ex((const int64_t[]){3, 3}, &mp));
    pt_max_pool2d_opts mr = {.stride = {1, 2}, .dilation = {2, 1}};
    run_case("maxpool_rect", pt_nn_max_pool2d_ex((const int64_t[]){2, 3}, &mr));
    run_case("avgpool", pt_nn_avg_pool2d(2, 0, 0));
    pt_avg_pool2d_opts ap = {
        .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true, .exclude_pad = true};
    run_case("avgpool_ex", pt_nn_avg_pool2d_ex((const int64_t[]){3, 3}, &ap));
    run_case("adaptive", pt_nn_adaptive_avg_pool2d_hw((const int64_t[]){2, 3}));
    run_case("adaptive_1", pt_nn_adaptive_avg_pool2d(1));
    pt_interpolate_opts up = {.scale_factor = {2, 2}};
    run_case("upsample", pt_nn_upsample(&up));
    pt_interpolate_opts us = {.size = {5, 7}, .mode = PT_INTERP_BILINEAR, .align_corners = true};
    run_case("upsample_size", pt_nn_upsample(&us));
    pt_interpolate_opts ur = {.scale_factor = {2, 1.5}, .mode = PT_INTERP_BILINEAR};
    run_case("upsample_rect", pt_nn_upsample(&ur));
}

/* ---- initialization -------------------------------------------------------------------------- */

/* Every element in [-bound, bound], and the values spread over most of it. */
static void assert_uniform_bound(const pt_tensor *t, double bound)
{
    double mx = pt_item(pt_max(t)), mn = pt_item(pt_min(t));
    assert_true(mx <= bound && mn >= -bound);
    assert_true(mx > 0.5 * bound && mn < -0.5 * bound);
}

static void test_default_init(void **state)
{
    (void)state;
    pt_manual_seed(7);
    pt_module *lin = pt_nn_linear(64, 300, true);
    assert_uniform_bound(pt_nn_param_ref(lin, "weight"), 1.0 / 8.0);
    assert_uniform_bound(pt_nn_param_ref(lin, "bias"), 1.0 / 8.0);
    pt_module *conv = pt_nn_conv2d(8, 16, 3, 1, 0, true); /* fan_in 72 */
    assert_uniform_bound(pt_nn_param_ref(conv, "weight"), 1.0 / sqrt(72.0));
    pt_nn_conv_opts g = {.groups = 4};
    pt_module *convg = pt_nn_conv2d_ex(8, 16, (const int64_t[]){3, 3}, &g); /* fan_in 18 */
    assert_uniform_bound(pt_nn_param_ref(convg, "weight"), 1.0 / sqrt(18.0));
    assert_uniform_bound(pt_nn_param_ref(convg, "bias"), 1.0 / sqrt(18.0));
    pt_module *ct = pt_nn_conv_transpose2d(8, 16, 3, 2, 0, true); /* weight [8,16,3,3]: 144 */
    assert_shape(pt_nn_param_ref(ct, "weight"), 8, 16, 3, 3);
    assert_uniform_bound(pt_nn_param_ref(ct, "weight"), 1.0 / 12.0);
    pt_module *bil = pt_nn_bilinear(16, 4, 20, true);
    assert_uniform_bound(pt_nn_param_ref(bil, "weight"), 0.25);
    pt_module *emb = pt_nn_embedding(200, 50);
    pt_tensor *ew = pt_nn_param_ref(emb, "weight");
    assert_true(fabs(pt_item(pt_mean(ew))) < 0.03);
    assert_true(fabs(pt_item(pt_std(ew, 0, NULL, 1, false)) - 1.0) < 0.03);
    /* same seed, same weights */
    pt_manual_seed(7);
    pt_module *lin2 = pt_nn_linear(64, 300, true);
    assert_tensor_equal(pt_nn_param_ref(lin2, "weight"), pt_nn_param_ref(lin, "weight"));
    assert_tensor_equal(pt_nn_param_ref(lin2, "bias"), pt_nn_param_ref(lin, "bias"));
    pt_nn_free(lin);
    pt_nn_free(lin2);
    pt_nn_free(conv);
    pt_nn_free(convg);
    pt_nn_free(ct);
    pt_nn_free(bil);
    pt_nn_free(emb);
}

/* ---- modes, dropout, module behaviour -------------------------------------------------------- */

static void test_dropout_modes(void **state)
{
    (void)state;
    pt_module *d = pt_nn_dropout(0.25);
    pt_tensor *x = pt_ones(PT_SHAPE(100, 100), PT_FLOAT32, pt_cpu());
    pt_tensor *y = pt_nn_forward(d, x);
    /* training: every element is 0 or 1/(1-p), about a quarter zeros */
    int64_t zeros = 0;
    for (int64_t i = 0; i < 10000; i++) {
        double v = pt_test_get(y, i);
        assert_true(v == 0.0 || fabs(v - 1.0 / 0.75) < 1e-6);
        zeros += v == 0.0;
    }
    assert_true(zeros > 2300 && zeros < 2700);
    pt_nn_eval(d);
    /* eval: the input's values, no mask drawn */
    assert_tensor_equal(pt_nn_forward(d, x), x);
    pt_nn_free(d);
    pt_module *id = pt_nn_identity();
    assert_tensor_equal(pt_nn_forward(id, x), x);
    pt_nn_free(id);
}

static void test_batch_norm_counts_and_eval(void **state)
{
    (void)state;
    pt_module *bn = pt_nn_batch_norm2d(2);
    pt_tensor *nbt = pt_nn_buffer_ref(bn, "num_batches_tracked");
    assert_int_equal(pt_ndim(nbt), 0);
    assert_int_equal(pt_dtype_of(nbt), PT_INT64);
    pt_tensor *x = pt_randn(PT_SHAPE(4, 2, 3, 3), PT_FLOAT32, pt_cpu());
    for (int i = 0; i < 3; i++)
        pt_release(pt_nn_forward(bn, x));
    assert_int_equal((int)pt_item(nbt), 3);
    pt_nn_eval(bn);
    pt_release(pt_nn_forward(bn, x));
    assert_int_equal((int)pt_item(nbt), 3); /* eval does not count */
    /* state dict keys in PyTorch's order */
    pt_tensor **t;
    const char **names;
    int n = pt_nn_named_buffers(bn, &names, &t);
    assert_int_equal(n, 3);
    assert_string_equal(names[2], "num_batches_tracked");
    free(names);
    free(t);
    pt_nn_free(bn);
}

/* module.to(float64) converts parameters and running stats (not num_batches_tracked); the
 * layers then run in float64 and agree with the float32 results. */
static void test_layers_in_float64(void **state)
{
    (void)state;
    pt_manual_seed(5);
    pt_module *bn = pt_nn_batch_norm2d(3), *lin = pt_nn_linear(12, 4, true);
    pt_module *conv = pt_nn_conv2d(3, 3, 3, 1, 1, true);
    pt_module *seq = pt_nn_sequential(3, (pt_module *[]){conv, bn, pt_nn_flatten(2, -1)});
    pt_tensor *x = pt_randn(PT_SHAPE(2, 3, 2, 2), PT_FLOAT32, pt_cpu());
    pt_tensor *y32 = pt_nn_forward(seq, x);
    pt_tensor *rm32 = pt_clone(pt_nn_buffer_ref(bn, "running_mean"));
    pt_tensor *z32 = pt_nn_forward(lin, pt_reshape(y32, PT_SHAPE(2, 12)));
    assert_int_equal(pt_nn_to_dtype(seq, PT_FLOAT64), PT_OK);
    assert_int_equal(pt_nn_to_dtype(lin, PT_FLOAT64), PT_OK);
    /* undo the first step's running-stat update and count so both runs start alike */
    pt_no_grad_begin();
    pt_fill_(pt_nn_buffer_ref(bn, "running_mean"), 0.0);
    pt_fill_(pt_nn_buffer_ref(bn, "running_var"), 1.0);
    pt_fill_(pt_nn_buffer_ref(bn, "num_batches_tracked"), 0.0);
    pt_no_grad_end();
    assert_int_equal(pt_dtype_of(pt_nn_buffer_ref(bn, "num_batches_tracked")), PT_INT64);
    assert_int_equal(pt_dtype_of(pt_nn_buffer_ref(bn, "running_var")), PT_FLOAT64);
    pt_tensor *y64 = pt_nn_forward(seq, pt_to_dtype(x, PT_FLOAT64));
    assert_int_equal(pt_dtype_of(y64), PT_FLOAT64);
    assert_tensor_close_any_dtype(y64, y32, 1e-4, 1e-5);
    assert_tensor_close_any_dtype(pt_nn_buffer_ref(bn, "running_mean"), rm32, 1e-4, 1e-6);
    pt_tensor *z64 = pt_nn_forward(lin, pt_reshape(y64, PT_SHAPE(2, 12)));
    assert_tensor_close_any_dtype(z64, z32, 1e-4, 1e-5);
    pt_nn_free(seq);
    pt_nn_free(lin);
}

static void test_repr_strings(void **state)
{
    (void)state;
    /* strings checked against torch 1.13 / 2.4 by hand where the fixture has no such module */
    struct {
        pt_module *m;
        const char *want;
    } cases[] = {
        {pt_nn_layer_norm_ex(1, (const int64_t[]){4}, &(pt_nn_layer_norm_opts){.no_bias = true}),
         "LayerNorm((4,), eps=1e-05, elementwise_affine=True)"},
        {pt_nn_batch_norm2d_ex(3, &(pt_nn_batch_norm_opts){.momentum_none = true}),
         "BatchNorm2d(3, eps=1e-05, momentum=None, affine=True, track_running_stats=True)"},
        {pt_nn_embedding_ex(10, 3,
                            &(pt_nn_embedding_opts){.has_padding_idx = true, .padding_idx = -1}),
         "Embedding(10, 3, padding_idx=9)"},
        {pt_nn_max_pool2d(3, 1, 1),
         "MaxPool2d(kernel_size=3, stride=1, padding=1, dilation=1, ceil_mode=False)"},
        {pt_nn_linear(784, 512, true), "Linear(in_features=784, out_features=512, bias=True)"},
        {pt_nn_dropout(0.5), "Dropout(p=0.5, inplace=False)"},
        {pt_nn_group_norm_ex(2, 4, &(pt_nn_group_norm_opts){.eps = 1e-6}),
         "GroupNorm(2, 4, eps=1e-06, affine=True)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *s = pt_nn_to_string(cases[i].m);
        assert_string_equal(s, cases[i].want);
        free(s);
        pt_nn_free(cases[i].m);
    }
    /* LayerNorm(bias=False) registers only the weight */
    pt_module *ln =
        pt_nn_layer_norm_ex(1, (const int64_t[]){4}, &(pt_nn_layer_norm_opts){.no_bias = true});
    assert_int_equal(pt_nn_num_direct_params(ln), 1);
    assert_null(pt_nn_param_ref(ln, "bias"));
    pt_clear_error();
    pt_nn_free(ln);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void test_constructor_errors(void **state)
{
    (void)state;
    assert_pt_error(pt_nn_linear(0, 3, true), PT_ERR_INVALID_ARG, "in_features");
    assert_pt_error(pt_nn_linear(3, -1, true), PT_ERR_INVALID_ARG, "out_features");
    assert_pt_error(pt_nn_bilinear(3, 0, 2, true), PT_ERR_INVALID_ARG, "in2_features");
    assert_pt_error(pt_nn_conv2d(3, 4, 0, 1, 0, true), PT_ERR_INVALID_ARG, "kernel_size");
    assert_pt_error(pt_nn_conv2d(3, 4, 3, 0, 0, true), PT_ERR_INVALID_ARG, "stride");
    assert_pt_error(pt_nn_conv2d(3, 4, 3, 1, -1, true), PT_ERR_INVALID_ARG, "padding");
    pt_nn_conv_opts g = {.groups = 2};
    assert_pt_error(pt_nn_conv2d_ex(3, 4, (const int64_t[]){3, 3}, &g), PT_ERR_INVALID_ARG,
                    "in_channels (3) must be divisible by groups (2)");
    assert_pt_error(pt_nn_conv2d_ex(4, 3, (const int64_t[]){3, 3}, &g), PT_ERR_INVALID_ARG,
                    "out_channels (3) must be divisible by groups");
    pt_nn_conv_opts same = {.padding_type = PT_CONV_PADDING_SAME, .stride = {2, 2}};
    assert_pt_error(pt_nn_conv2d_ex(3, 4, (const int64_t[]){3, 3}, &same), PT_ERR_INVALID_ARG,
                    "strided");
    pt_nn_conv_opts circ = {.padding_mode = "circular"};
    assert_pt_error(pt_nn_conv2d_ex(3, 4, (const int64_t[]){3, 3}, &circ), PT_ERR_UNSUPPORTED,
                    "circular");
    pt_nn_conv_opts bad = {.padding_mode = "mirror"};
    assert_pt_error(pt_nn_conv2d_ex(3, 4, (const int64_t[]){3, 3}, &bad), PT_ERR_INVALID_ARG,
                    "padding_mode");
    pt_nn_conv_transpose_opts op = {.output_padding = {1, 1}};
    assert_pt_error(pt_nn_conv_transpose2d_ex(3, 4, (const int64_t[]){3, 3}, &op),
                    PT_ERR_INVALID_ARG, "output_padding");
    assert_pt_error(pt_nn_batch_norm2d(0), PT_ERR_INVALID_ARG, "num_features");
    assert_pt_error(pt_nn_layer_norm(0, NULL), PT_ERR_INVALID_ARG, "normalized_shape");
    assert_pt_error(pt_nn_layer_norm(1, (const int64_t[]){0}), PT_ERR_INVALID_ARG,
                    "normalized_shape");
    assert_pt_error(pt_nn_group_norm(3, 4), PT_ERR_INVALID_ARG, "divisible by num_groups");
    assert_pt_error(pt_nn_embedding(0, 3), PT_ERR_INVALID_ARG, "num_embeddings");
    assert_pt_error(
        pt_nn_embedding_ex(5, 3, &(pt_nn_embedding_opts){.has_max_norm = true, .max_norm = 1.0}),
        PT_ERR_UNSUPPORTED, "max_norm");
    assert_pt_error(pt_nn_embedding_ex(
                        5, 3, &(pt_nn_embedding_opts){.has_padding_idx = true, .padding_idx = 5}),
                    PT_ERR_INVALID_ARG, "padding_idx");
    assert_pt_error(pt_nn_dropout(1.5), PT_ERR_INVALID_ARG, "between 0 and 1");
    assert_pt_error(pt_nn_max_pool2d(2, 0, 2), PT_ERR_INVALID_ARG, "half");
    assert_pt_error(pt_nn_max_pool2d(0, 0, 0), PT_ERR_INVALID_ARG, "kernel_size");
    assert_pt_error(pt_nn_avg_pool2d(2, -1, 0), PT_ERR_INVALID_ARG, "stride");
    assert_pt_error(pt_nn_adaptive_avg_pool2d(0), PT_ERR_INVALID_ARG, "output_size");
    assert_pt_error(pt_nn_upsample(&(pt_interpolate_opts){0}), PT_ERR_INVALID_ARG,
                    "exactly one of size or scale_factor");
    assert_pt_error(
        pt_nn_upsample(&(pt_interpolate_opts){.scale_factor = {2, 2}, .align_corners = true}),
        PT_ERR_INVALID_ARG, "align_corners");
    assert_pt_error(pt_nn_unflatten(1, 2, (const int64_t[]){-1, -1}), PT_ERR_INVALID_ARG,
                    "only one");
}

static void test_forward_errors(void **state)
{
    (void)state;
    pt_module *lin = pt_nn_linear(4, 2, true);
    pt_tensor *x = pt_zeros(PT_SHAPE(3, 5), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_nn_forward(lin, x), PT_ERR_SHAPE, "in_features=4");
    assert_pt_error(pt_nn_forward(lin, NULL), PT_ERR_NULL, "pt_nn_forward");
    pt_module *bn2 = pt_nn_batch_norm2d(5);
    assert_pt_error(pt_nn_forward(bn2, x), PT_ERR_SHAPE, "expected 4D input (got 2D input)");
    pt_module *bn1 = pt_nn_batch_norm1d(5);
    pt_tensor *x4 = pt_zeros(PT_SHAPE(2, 5, 2, 2), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_nn_forward(bn1, x4), PT_ERR_SHAPE, "expected 2D or 3D input (got 4D");
    pt_module *conv = pt_nn_conv2d(3, 4, 3, 1, 0, true);
    assert_pt_error(pt_nn_forward(conv, x4), PT_ERR_SHAPE, "");
    pt_module *in = pt_nn_instance_norm2d(3);
    assert_pt_error(pt_nn_forward(in, x), PT_ERR_SHAPE, "expected 3D or 4D input");
    pt_module *bil = pt_nn_bilinear(2, 3, 4, true);
    const pt_tensor *ins[2] = {x, x};
    pt_tensor *out = NULL;
    assert_pt_status_error(pt_nn_forward_n(bil, 2, ins, 1, &out), PT_ERR_SHAPE, "Bilinear");
    pt_nn_free(lin);
    pt_nn_free(bn2);
    pt_nn_free(bn1);
    pt_nn_free(conv);
    pt_nn_free(in);
    pt_nn_free(bil);
}

int main(void)
{
    fx = fx_open("nn_layers");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_linear_and_shape_layers, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_conv_layers, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_layers, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_other_norm_layers, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_embedding_layers, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_pool_layers, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_default_init, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dropout_modes, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_counts_and_eval, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_layers_in_float64, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_repr_strings, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_constructor_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_forward_errors, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
