/* Quantized matmul tests: pt_linear and pt_matmul with GGUF block-dtype weights (Q4_0 ... Q8_K)
 * and float16/bfloat16 weights next to float32 inputs, against fixtures computed in Python
 * (tests/fixtures/gen/quant_matmul.py): the llama.cpp-style result (8-bit activations, integer
 * block dot products; matched up to float summation order) and the float64 product with
 * gguf-py's dequantized weights (matched within the bound 8-bit activations allow). Run on
 * 1 and 2 threads; ctest runs the file a second time with PT_DISABLE_AVX2=1 for the scalar
 * kernels. Also pt_linear's float path against torch's F.linear, and the error paths. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <prometorch/ops_linalg.h>
#include <prometorch/ops_quant.h>
#include <prometorch/ops_shape.h>

static pt_fixture *fx;

typedef struct wtype {
    const char *name;
    pt_dtype dt;
} wtype;

static const wtype BLOCK_TYPES[] = {
    {"q4_0", PT_Q4_0}, {"q4_1", PT_Q4_1}, {"q5_0", PT_Q5_0}, {"q5_1", PT_Q5_1},
    {"q8_0", PT_Q8_0}, {"q2_k", PT_Q2_K}, {"q3_k", PT_Q3_K}, {"q4_k", PT_Q4_K},
    {"q5_k", PT_Q5_K}, {"q6_k", PT_Q6_K}, {"q8_k", PT_Q8_K},
};
#define N_BLOCK_TYPES (sizeof BLOCK_TYPES / sizeof BLOCK_TYPES[0])

static pt_tensor *get(const char *fmt, const char *a)
{
    char name[96];
    snprintf(name, sizeof name, fmt, a);
    return fx_get(fx, name);
}

/* The fixture's raw block bytes (uint8 [N, bytes per row]) as a [N, K] tensor of dt. */
static pt_tensor *block_weight(const char *name, pt_dtype dt)
{
    pt_tensor *raw = get("%s", name);
    int64_t n = pt_shape(raw)[0], row = pt_shape(raw)[1];
    int64_t k = row / (int64_t)pt_dtype_size(dt) * pt_dtype_block_size(dt);
    pt_tensor *w = pt_from_data(pt_data_ptr(raw), PT_SHAPE(n, k), dt, pt_cpu());
    assert_non_null(w);
    return w;
}

/* |y - expected| <= tol elementwise (tol a tensor of the same shape). */
static void assert_within(const pt_tensor *y, const pt_tensor *expected, const pt_tensor *tol,
                          const char *what)
{
    assert_non_null(y);
    assert_int_equal(pt_dtype_of(y), PT_FLOAT32);
    assert_int_equal(pt_ndim(y), pt_ndim(expected));
    assert_memory_equal(pt_shape(y), pt_shape(expected), (size_t)pt_ndim(y) * sizeof(int64_t));
    for (int64_t i = 0; i < pt_numel(y); i++) {
        double a = pt_test_get(y, i), e = pt_test_get(expected, i), t = pt_test_get(tol, i);
        if (!(fabs(a - e) <= t))
            fail_msg("%s: element %lld is %.9g, expected %.9g (|diff| %.3g > tol %.3g)", what,
                     (long long)i, a, e, fabs(a - e), t);
    }
}

/* y against both expectations of fixture case `c` (e.g. "q4_0.x3"). */
static void check_case(const pt_tensor *y, const char *c)
{
    char what[96];
    snprintf(what, sizeof what, "%s (llama.cpp-style)", c);
    assert_within(y, get("%s.exact", c), get("%s.exact_tol", c), what);
    snprintf(what, sizeof what, "%s (float64 with dequantized weights)", c);
    assert_within(y, get("%s.float", c), get("%s.float_tol", c), what);
}

static const int THREADS[] = {1, 2};

/* Every block type: [3, K] and [1, K] inputs, with and without bias, through pt_linear and
 * pt_matmul(x, pt_t(w)), on one and two threads. */
static void test_block_types(void **state)
{
    (void)state;
    int saved = pt_get_num_threads();
    for (size_t ti = 0; ti < 2; ti++) {
        pt_set_num_threads(THREADS[ti]);
        for (size_t i = 0; i < N_BLOCK_TYPES; i++) {
            const char *t = BLOCK_TYPES[i].name;
            char name[64], c[64];
            snprintf(name, sizeof name, "%s.w", t);
            pt_tensor *w = block_weight(name, BLOCK_TYPES[i].dt);
            snprintf(c, sizeof c, "%s.x3", t);
            check_case(pt_linear(get("%s", "x3"), w, NULL), c);
            pt_tensor *wt = pt_t(w);
            check_case(pt_matmul(get("%s", "x3"), wt), c);
            snprintf(c, sizeof c, "%s.x1", t);
            check_case(pt_linear(get("%s", "x1"), w, NULL), c);
            snprintf(c, sizeof c, "%s.x3b", t);
            check_case(pt_linear(get("%s", "x3"), w, get("%s", "bias")), c);
        }
    }
    pt_set_num_threads(saved);
}

/* A 1-D input gives a 1-D result; batch dims are kept; strided inputs are copied. */
static void test_shapes_and_strides(void **state)
{
    (void)state;
    const wtype ts[] = {{"q4_0", PT_Q4_0}, {"q4_k", PT_Q4_K}, {"q6_k", PT_Q6_K}};
    for (size_t i = 0; i < 3; i++) {
        char name[64], c[64];
        snprintf(name, sizeof name, "%s.w", ts[i].name);
        pt_tensor *w = block_weight(name, ts[i].dt);
        /* x [2, 3, K] -> [2, 3, N] */
        snprintf(c, sizeof c, "%s.x6", ts[i].name);
        pt_tensor *y6 = pt_linear(get("%s", "x6"), w, NULL);
        assert_shape(y6, 2, 3, 40);
        check_case(y6, c);
        check_case(pt_matmul(get("%s", "x6"), pt_t(w)), c);
        /* x [K] -> [N]: compared with the [1, K] case through a view */
        pt_tensor *x1 = pt_reshape(get("%s", "x1"), PT_SHAPE(512));
        pt_tensor *y1 = pt_linear(x1, w, NULL);
        assert_shape(y1, 40);
        snprintf(c, sizeof c, "%s.x1", ts[i].name);
        check_case(pt_reshape(y1, PT_SHAPE(1, 40)), c);
        assert_shape(pt_matmul(x1, pt_t(w)), 40);
        /* a non-contiguous input */
        pt_tensor *nc = pt_test_noncontig(get("%s", "x3"));
        assert_false(pt_is_contiguous(nc));
        snprintf(c, sizeof c, "%s.x3", ts[i].name);
        check_case(pt_linear(nc, w, NULL), c);
        /* a row slice of the weight is still a contiguous weight */
        pt_tensor *rows = pt_narrow(w, 0, 8, 16);
        pt_tensor *ys = pt_linear(get("%s", "x3"), rows, NULL);
        pt_tensor *yfull = pt_linear(get("%s", "x3"), w, NULL);
        assert_tensor_equal(ys, pt_narrow(yfull, 1, 8, 16));
    }
}

/* Weights wide enough that the row split gives every thread work, also for one input row;
 * the result must not depend on the thread count (each dot product is computed whole by one
 * thread). */
static void test_wide_threads(void **state)
{
    (void)state;
    const wtype ts[] = {{"q4_0", PT_Q4_0},
                        {"q8_0", PT_Q8_0},
                        {"q4_k", PT_Q4_K},
                        {"q5_k", PT_Q5_K},
                        {"q6_k", PT_Q6_K}};
    int saved = pt_get_num_threads();
    for (size_t i = 0; i < 5; i++) {
        char name[64], c1[64], c3[64];
        snprintf(name, sizeof name, "%s.wide.w", ts[i].name);
        snprintf(c1, sizeof c1, "%s.wide.x1", ts[i].name);
        snprintf(c3, sizeof c3, "%s.wide.x3", ts[i].name);
        pt_tensor *w = block_weight(name, ts[i].dt);
        pt_set_num_threads(1);
        pt_tensor *y1 = pt_linear(get("%s", "x1"), w, NULL);
        pt_tensor *y3 = pt_linear(get("%s", "x3"), w, NULL);
        check_case(y1, c1);
        check_case(y3, c3);
        pt_set_num_threads(2);
        assert_tensor_equal(pt_linear(get("%s", "x1"), w, NULL), y1);
        assert_tensor_equal(pt_linear(get("%s", "x3"), w, NULL), y3);
    }
    pt_set_num_threads(saved);
}

/* M = 7 input rows (x3, x1, x3 stacked): rows 0-3 and 4-7 take the multi-row kernels where a
 * dtype has them, row 6 the row kernel; each output row must be the same bits as the M = 3 and
 * M = 1 results, which test_block_types checks against the references. */
static void test_prefill_rows(void **state)
{
    (void)state;
    static float buf[7 * 512];
    pt_tensor *x1 = get("%s", "x1"), *x3 = get("%s", "x3");
    assert_int_equal(pt_shape(x1)[1], 512);
    const float *p1 = pt_data_ptr(x1), *p3 = pt_data_ptr(x3);
    memcpy(buf, p3, 3 * 512 * sizeof(float));
    memcpy(buf + 3 * 512, p1, 512 * sizeof(float));
    memcpy(buf + 4 * 512, p3, 3 * 512 * sizeof(float));
    pt_tensor *x7 = pt_from_data(buf, PT_SHAPE(7, 512), PT_FLOAT32, pt_cpu());
    assert_non_null(x7);
    for (size_t i = 0; i < N_BLOCK_TYPES; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.w", BLOCK_TYPES[i].name);
        pt_tensor *w = block_weight(name, BLOCK_TYPES[i].dt);
        pt_tensor *y7 = pt_linear(x7, w, NULL), *y1 = pt_linear(x1, w, NULL);
        pt_tensor *y3 = pt_linear(x3, w, NULL);
        assert_non_null(y7);
        assert_non_null(y1);
        assert_non_null(y3);
        int64_t n = pt_shape(y1)[1];
        const float *r7 = pt_data_ptr(y7), *r1 = pt_data_ptr(y1), *r3 = pt_data_ptr(y3);
        assert_memory_equal(r7, r3, (size_t)(3 * n) * sizeof(float));
        assert_memory_equal(r7 + 3 * n, r1, (size_t)n * sizeof(float));
        assert_memory_equal(r7 + 4 * n, r3, (size_t)(3 * n) * sizeof(float));
    }
}

/* Deterministic inputs in [-2, 2) with a few larger values (so the per-block activation scales
 * differ), m rows of k. */
static pt_tensor *make_input(int64_t m, int64_t k, uint32_t seed)
{
    float *v = malloc((size_t)(m * k) * sizeof(float));
    assert_non_null(v);
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < m * k; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = (float)((s >> 8) & 0xFFFF) / 16384.0f - 2.0f;
        if ((s >> 28) == 0)
            v[i] *= 6.0f;
    }
    pt_tensor *x = pt_from_data(v, PT_SHAPE(m, k), PT_FLOAT32, pt_cpu());
    free(v);
    assert_non_null(x);
    return x;
}

/* y [m, n] against the float64 product with the dequantized weight wd [n, k]: the only error
 * allowed is the activations' 8-bit rounding (|x - x_q| <= 0.57 * amax / 127 per element of
 * a block of `ablock` values: half a step, plus the step's own f16 rounding for Q8_0) times
 * |w|, plus float32 summation (1e-5 of sum |x w|). */
static void check_against_dequantized(const pt_tensor *y, const pt_tensor *x, const pt_tensor *wd,
                                      int64_t ablock, const char *what)
{
    int64_t m = pt_shape(x)[0], k = pt_shape(x)[1], n = pt_shape(wd)[0];
    const float *xv = pt_data_ptr(x), *wv = pt_data_ptr(wd), *yv = pt_data_ptr(y);
    for (int64_t i = 0; i < m; i++) {
        const float *xr = xv + i * k;
        for (int64_t j = 0; j < n; j++) {
            const float *wr = wv + j * k;
            double ref = 0, tol = 1e-6, mag = 0;
            for (int64_t b = 0; b < k; b += ablock) {
                double amax = 0;
                for (int64_t e = b; e < b + ablock; e++)
                    amax = fmax(amax, fabs(xr[e]));
                double step = 0.57 * amax / 127.0;
                for (int64_t e = b; e < b + ablock; e++) {
                    ref += (double)xr[e] * wr[e];
                    mag += fabs((double)xr[e] * wr[e]);
                    tol += fabs(wr[e]) * step;
                }
            }
            tol += 1e-5 * mag;
            double got = yv[i * n + j];
            if (!(fabs(got - ref) <= tol))
                fail_msg("%s: y[%lld, %lld] = %.9g, dequantized reference %.9g (|diff| %.3g > "
                         "tol %.3g)",
                         what, (long long)i, (long long)j, got, ref, fabs(got - ref), tol);
        }
    }
}

/* Prefill shapes: M in {1, 2, 3, 4, 5, 8, 17, 33, 64, 512} input rows for every block dtype, with a
 * weight of N = 37 rows (not a multiple of the kernels' weight tiles). Each result against the
 * float64 product with the dequantized weight; every row the same bits as that row alone
 * (M = 1), as on one thread, and with a bias exactly y + bias. */
static void test_gemm_shapes(void **state)
{
    (void)state;
    static const int64_t MS[] = {1, 2, 3, 4, 5, 8, 17, 33, 64, 512};
    int saved = pt_get_num_threads();
    for (size_t ti = 0; ti < N_BLOCK_TYPES; ti++) {
        char name[64];
        snprintf(name, sizeof name, "%s.w", BLOCK_TYPES[ti].name);
        pt_tensor *w = pt_narrow(block_weight(name, BLOCK_TYPES[ti].dt), 0, 0, 37);
        assert_non_null(w);
        pt_tensor *wd = pt_contiguous(pt_dequantize(w));
        assert_non_null(wd);
        int64_t k = pt_shape(w)[1], n = 37;
        int64_t ablock = pt_dtype_block_size(BLOCK_TYPES[ti].dt) == 256 ? 256 : 32;
        pt_tensor *bias = pt_narrow(get("%s", "bias"), 0, 0, n);
        for (size_t mi = 0; mi < sizeof MS / sizeof MS[0]; mi++) {
            int64_t m = MS[mi];
            char what[64];
            snprintf(what, sizeof what, "%s, M = %lld", BLOCK_TYPES[ti].name, (long long)m);
            pt_tensor *x = make_input(m, k, (uint32_t)(mi + 7 * ti));
            pt_set_num_threads(2);
            pt_tensor *y = pt_linear(x, w, NULL);
            assert_non_null(y);
            check_against_dequantized(y, x, wd, ablock, what);
            pt_set_num_threads(1);
            assert_tensor_equal(pt_linear(x, w, NULL), y);
            const float *yv = pt_data_ptr(y);
            /* every row alone (all of them up to M = 64, a sample of M = 512) */
            for (int64_t i = 0; i<m; i += m> 64 ? 29 : 1) {
                pt_tensor *yi = pt_linear(pt_narrow(x, 0, i, 1), w, NULL);
                assert_non_null(yi);
                if (memcmp(pt_data_ptr(yi), yv + i * n, (size_t)n * sizeof(float)) != 0)
                    fail_msg("%s: row %lld differs from the same row computed alone", what,
                             (long long)i);
            }
            pt_set_num_threads(2);
            pt_tensor *yb = pt_linear(x, w, bias);
            assert_non_null(yb);
            const float *ybv = pt_data_ptr(yb), *bv = pt_data_ptr(bias);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++)
                    if (ybv[i * n + j] != yv[i * n + j] + bv[j])
                        fail_msg("%s: y + bias at [%lld, %lld]", what, (long long)i, (long long)j);
            pt_release(x);
            pt_release(y);
            pt_release(yb);
        }
    }
    pt_set_num_threads(saved);
}

/* The tiled K-quant kernel (Q6_K on an AVX-512 VNNI CPU; the ctest twins run the per-row
 * kernels it stands in for): M in {1, 2, 3, 4, 5, 8, 17, 33} rows cycling through the fixture's
 * four input rows (x3's, then x1), against weights of an odd number of rows (37 of 40, 123 of
 * 128: not a multiple of the 16-row tile). Every output row within the llama.cpp-style
 * reference's tolerance, and the same bits as that input row alone, on 1 and 2 threads. */
static void test_kquant_tiled_rows(void **state)
{
    (void)state;
    static const int64_t MS[] = {1, 2, 3, 4, 5, 8, 17, 33};
    static const struct {
        const char *name;
        int64_t n;
    } WS[] = {{"q6_k", 37}, {"q6_k.wide", 123}};
    static float buf[33 * 512];
    pt_tensor *x1 = get("%s", "x1"), *x3 = get("%s", "x3");
    int64_t k = pt_shape(x1)[1];
    assert_int_equal(k, 512);
    const float *src[4] = {pt_data_ptr(x3), (const float *)pt_data_ptr(x3) + k,
                           (const float *)pt_data_ptr(x3) + 2 * k, pt_data_ptr(x1)};
    int saved = pt_get_num_threads();
    for (size_t wi = 0; wi < sizeof WS / sizeof WS[0]; wi++) {
        char name[64];
        snprintf(name, sizeof name, "%s.w", WS[wi].name);
        pt_tensor *full = block_weight(name, PT_Q6_K);
        int64_t nfull = pt_shape(full)[0], n = WS[wi].n;
        pt_tensor *w = pt_narrow(full, 0, 0, n);
        assert_non_null(w);
        snprintf(name, sizeof name, "%s.x3", WS[wi].name);
        pt_tensor *e3 = get("%s.exact", name), *t3 = get("%s.exact_tol", name);
        snprintf(name, sizeof name, "%s.x1", WS[wi].name);
        pt_tensor *e1 = get("%s.exact", name), *t1 = get("%s.exact_tol", name);
        /* each source row alone */
        pt_tensor *alone[4];
        for (int s = 0; s < 4; s++) {
            pt_tensor *xs = pt_from_data(src[s], PT_SHAPE(1, k), PT_FLOAT32, pt_cpu());
            alone[s] = pt_linear(xs, w, NULL);
            assert_non_null(alone[s]);
        }
        for (size_t mi = 0; mi < sizeof MS / sizeof MS[0]; mi++) {
            int64_t m = MS[mi];
            for (int64_t i = 0; i < m; i++)
                memcpy(buf + i * k, src[i % 4], (size_t)k * sizeof(float));
            pt_tensor *x = pt_from_data(buf, PT_SHAPE(m, k), PT_FLOAT32, pt_cpu());
            assert_non_null(x);
            for (size_t ti = 0; ti < 2; ti++) {
                pt_set_num_threads(THREADS[ti]);
                pt_tensor *y = pt_linear(x, w, NULL);
                assert_non_null(y);
                const float *yv = pt_data_ptr(y);
                for (int64_t i = 0; i < m; i++) {
                    int s = (int)(i % 4);
                    if (memcmp(yv + i * n, pt_data_ptr(alone[s]), (size_t)n * sizeof(float)))
                        fail_msg("%s, M = %lld, %d threads: row %lld differs from the row alone",
                                 WS[wi].name, (long long)m, THREADS[ti], (long long)i);
                    const pt_tensor *e = s < 3 ? e3 : e1, *t = s < 3 ? t3 : t1;
                    int64_t r = s < 3 ? s : 0;
                    for (int64_t j = 0; j < n; j++) {
                        double ev = pt_test_get(e, r * nfull + j),
                               tv = pt_test_get(t, r * nfull + j);
                        if (!(fabs(yv[i * n + j] - ev) <= tv))
                            fail_msg("%s, M = %lld: y[%lld, %lld] = %.9g, llama.cpp-style %.9g "
                                     "(tol %.3g)",
                                     WS[wi].name, (long long)m, (long long)i, (long long)j,
                                     yv[i * n + j], ev, tv);
                    }
                }
                pt_release(y);
            }
            pt_release(x);
        }
    }
    pt_set_num_threads(saved);
}

/* float16 / bfloat16 weights with a float32 input: unquantized activations. */
static void test_half_weights(void **state)
{
    (void)state;
    const char *names[] = {"f16", "bf16"};
    for (int i = 0; i < 2; i++) {
        pt_tensor *w = get("%s.w", names[i]);
        char c[64];
        snprintf(c, sizeof c, "%s.x3", names[i]);
        check_case(pt_linear(get("%s", "x3"), w, NULL), c);
        snprintf(c, sizeof c, "%s.x1", names[i]);
        check_case(pt_linear(get("%s", "x1"), w, NULL), c);
        snprintf(c, sizeof c, "%s.x3b", names[i]);
        check_case(pt_linear(get("%s", "x3"), w, get("%s", "bias")), c);
        /* a transposed (non-contiguous) half weight is copied, not refused */
        pt_tensor *wnc = pt_t(pt_contiguous(pt_t(w)));
        assert_false(pt_is_contiguous(wnc));
        snprintf(c, sizeof c, "%s.x3", names[i]);
        check_case(pt_linear(get("%s", "x3"), wnc, NULL), c);
    }
}

/* Empty inputs and outputs. */
static void test_empty(void **state)
{
    (void)state;
    pt_tensor *w = block_weight("q4_0.w", PT_Q4_0);
    pt_tensor *x0 = pt_empty(PT_SHAPE(0, 512), PT_FLOAT32, pt_cpu());
    assert_shape(pt_linear(x0, w, NULL), 0, 40);
    pt_tensor *w0 = pt_narrow(w, 0, 0, 0);
    assert_shape(pt_linear(get("%s", "x3"), w0, NULL), 3, 0);
    /* K == 0: zeros plus the bias */
    pt_tensor *wk0 = pt_empty(PT_SHAPE(4, 0), PT_Q4_0, pt_cpu());
    pt_tensor *xk0 = pt_empty(PT_SHAPE(2, 0), PT_FLOAT32, pt_cpu());
    pt_tensor *b = pt_full(PT_SHAPE(4), 1.5, PT_FLOAT32, pt_cpu());
    assert_tensor_equal(pt_linear(xk0, wk0, b), pt_full(PT_SHAPE(2, 4), 1.5, PT_FLOAT32, pt_cpu()));
}

/* pt_linear with float weights: F.linear's values and gradients. */
static void test_float_linear(void **state)
{
    (void)state;
    const char *tags[] = {"f32", "f64"};
    for (int i = 0; i < 2; i++) {
        const char *t = tags[i];
        double tol = i == 0 ? 1e-5 : 1e-12;
        pt_tensor *x = get("lin.%s.x", t), *w = get("lin.%s.w", t), *b = get("lin.%s.b", t);
        pt_tensor *x3d = get("lin.%s.x3d", t), *w1 = get("lin.%s.w1", t);
        assert_tensor_close(pt_linear(x, w, b), get("lin.%s.y_xwb", t), tol, tol);
        assert_tensor_close(pt_linear(x, w, NULL), get("lin.%s.y_xw", t), tol, tol);
        assert_tensor_close(pt_linear(x3d, w, b), get("lin.%s.y_x3d", t), tol, tol);
        assert_tensor_close(pt_linear(x3d, w1, NULL), get("lin.%s.y_w1", t), tol, tol);
        /* gradients of sum(linear(x, w, b) * g) */
        pt_tensor *xg = pt_clone(x), *wg = pt_clone(w), *bg = pt_clone(b);
        pt_set_requires_grad(xg, true);
        pt_set_requires_grad(wg, true);
        pt_set_requires_grad(bg, true);
        pt_tensor *y = pt_linear(xg, wg, bg);
        assert_int_equal(pt_backward(y, get("lin.%s.g", t), false, false), PT_OK);
        assert_tensor_close(pt_grad(xg), get("lin.%s.dx", t), tol, tol);
        assert_tensor_close(pt_grad(wg), get("lin.%s.dw", t), tol, tol);
        assert_tensor_close(pt_grad(bg), get("lin.%s.db", t), tol, tol);
    }
}

static void test_errors(void **state)
{
    (void)state;
    pt_tensor *w = block_weight("q4_0.w", PT_Q4_0); /* [40, 512] */
    pt_tensor *x3 = get("%s", "x3");
    /* in_features mismatch */
    pt_tensor *x500 = pt_narrow(x3, 1, 0, 500);
    assert_pt_error(pt_linear(x500, w, NULL), PT_ERR_SHAPE, "in_features 500 != 512");
    assert_pt_error(pt_matmul(x500, pt_t(w)), PT_ERR_SHAPE, "cannot be multiplied (500 != 512)");
    /* K not a multiple of the block size (a 1-row weight narrowed along K stays contiguous) */
    pt_tensor *w1 = pt_narrow(pt_narrow(w, 0, 0, 1), 1, 0, 500);
    assert_pt_error(pt_linear(x500, w1, NULL), PT_ERR_SHAPE, "not a multiple of its block size 32");
    /* a block weight that does not start on a block boundary */
    pt_tensor *woff = pt_narrow(pt_narrow(w, 0, 0, 1), 1, 16, 32);
    pt_tensor *x32 = pt_narrow(x3, 1, 0, 32);
    assert_pt_error(pt_linear(x32, woff, NULL), PT_ERR_SHAPE, "whole blocks");
    /* non-contiguous block weight (and pt_matmul with an untransposed block weight) */
    pt_tensor *wnc = pt_narrow(w, 1, 0, 256);
    pt_tensor *x256 = pt_narrow(x3, 1, 0, 256);
    assert_pt_error(pt_linear(x256, wnc, NULL), PT_ERR_UNSUPPORTED, "must be contiguous");
    pt_tensor *x40 = pt_narrow(x3, 1, 0, 40);
    assert_pt_error(pt_matmul(x40, w), PT_ERR_UNSUPPORTED, "transpose of a contiguous");
    /* dtypes: input, bias, block first argument, float weights that disagree */
    pt_tensor *x64 = pt_to_dtype(x3, PT_FLOAT64);
    assert_pt_error(pt_linear(x64, w, NULL), PT_ERR_DTYPE, "needs a float32 input");
    assert_pt_error(pt_matmul(x64, pt_t(w)), PT_ERR_DTYPE, "needs a float32 input");
    pt_tensor *b64 = pt_to_dtype(get("%s", "bias"), PT_FLOAT64);
    assert_pt_error(pt_linear(x3, w, b64), PT_ERR_DTYPE, "bias must be float32");
    assert_pt_error(pt_linear(w, w, NULL), PT_ERR_DTYPE, "only the weight may have a block");
    assert_pt_error(pt_matmul(w, pt_t(w)), PT_ERR_DTYPE, "only the second argument");
    pt_tensor *wf32 = get("lin.%s.w", "f32"), *xf64 = get("lin.%s.x", "f64");
    assert_pt_error(pt_linear(xf64, wf32, NULL), PT_ERR_DTYPE, "same dtype");
    pt_tensor *wq81 = pt_empty(PT_SHAPE(2, 32), PT_Q8_1, pt_cpu());
    assert_pt_error(pt_linear(x32, wq81, NULL), PT_ERR_UNSUPPORTED, "no CPU kernel");
    /* shapes: bias, weight rank */
    pt_tensor *b39 = pt_narrow(get("%s", "bias"), 0, 0, 39);
    assert_pt_error(pt_linear(x3, w, b39), PT_ERR_SHAPE, "bias must have shape [40]");
    pt_tensor *w3d = pt_reshape(get("%s", "x3"), PT_SHAPE(3, 1, 512));
    assert_pt_error(pt_linear(x3, w3d, NULL), PT_ERR_SHAPE, "weight must be 1-D or 2-D");
    pt_tensor *s = pt_scalar_tensor(1.0, PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_linear(s, w, NULL), PT_ERR_SHAPE, "cannot be multiplied");
    /* no gradient through a quantized weight */
    pt_tensor *xg = pt_clone(x3);
    pt_set_requires_grad(xg, true);
    assert_pt_error(pt_linear(xg, w, NULL), PT_ERR_UNSUPPORTED, "inference only");
    pt_no_grad_begin();
    assert_non_null(pt_linear(xg, w, NULL));
    pt_no_grad_end();
    /* NULL arguments */
    assert_pt_error(pt_linear(NULL, w, NULL), PT_ERR_NULL, "input");
    assert_pt_error(pt_linear(x3, NULL, NULL), PT_ERR_NULL, "weight");
}

int main(void)
{
    fx = fx_open("quant_matmul");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_block_types, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_shapes_and_strides, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_wide_threads, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_prefill_rows, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gemm_shapes, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_kquant_tiled_rows, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_half_weights, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_empty, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_float_linear, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_errors, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
