/* Tests of the LLM inference ops pt_rope and pt_attention_kv against PyTorch references
 * (tests/fixtures/gen/nn_llm.py): RoPE NORM/NEOX, partial n_rot, freq_factors and YaRN; causal
 * attention over float16/float32 key/value caches with GQA, q_pos0 offsets, sliding windows,
 * Dv != D and strided cache views, under 1, 2 and 3 threads (single-pass and split-key
 * schedules); and the error paths. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static pt_fixture *fx;

/* An int64_t array literal (shapes and strides of views). */
#define ARR(...) ((const int64_t[]){__VA_ARGS__})

static pt_tensor *getf(const char *fmt, const char *a, const char *b)
{
    char key[128];
    snprintf(key, sizeof key, fmt, a, b);
    return fx_get(fx, key);
}

/* ---- rope ------------------------------------------------------------------------------------ */

typedef struct rope_case {
    const char *name;
    pt_rope_mode mode;
    int64_t n_rot;
    double base, freq_scale;
    bool ff;
    double ext, attn, beta_fast, beta_slow;
    int64_t n_ctx;
} rope_case;

/* The cases of gen/nn_llm.py's ROPE_CASES. */
static const rope_case ROPE_CASES[] = {
    {"norm", PT_ROPE_NORM, 64, 10000.0, 1.0, false, 0.0, 1.0, 32, 1, 4096},
    {"neox", PT_ROPE_NEOX, 64, 1000000.0, 1.0, false, 0.0, 1.0, 32, 1, 4096},
    {"partial", PT_ROPE_NEOX, 32, 10000.0, 0.5, false, 0.0, 1.0, 32, 1, 4096},
    {"partial_norm", PT_ROPE_NORM, 24, 500000.0, 0.25, false, 0.0, 1.0, 32, 1, 4096},
    {"ff", PT_ROPE_NORM, 32, 500000.0, 1.0, true, 0.0, 1.0, 32, 1, 4096},
    {"yarn", PT_ROPE_NEOX, 64, 10000.0, 0.25, false, 1.0, 1.0, 32, 1, 4096},
    {"yarn_norm", PT_ROPE_NORM, 32, 10000.0, 0.125, true, 0.5, 0.9, 24, 2, 2048},
};

/* Against ggml's float32 computation (same angle rounding): float32 noise only. Against the
 * float64 definition: ggml advances the angle by repeated float32 multiplications, so at
 * position p the angle of pair i is off by up to about p * i * 2^-24 * base^(-2i/n_rot)
 * (the fixtures reach 7e-5 in the outputs, at p = 1000). */
#define ROPE_GGML_RTOL 1e-5
#define ROPE_GGML_ATOL 1e-5
#define ROPE_DEF_ATOL 1e-4

static void test_rope_matches_torch(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ROPE_CASES / sizeof ROPE_CASES[0]; i++) {
        const rope_case *rc = &ROPE_CASES[i];
        const char *n = rc->name;
        pt_tensor *x = getf("rope.%s.%s", n, "x"), *pos = getf("rope.%s.%s", n, "pos");
        pt_rope_opts o = {.mode = rc->mode,
                          .n_rot = rc->n_rot,
                          .freq_base = rc->base,
                          .freq_scale = rc->freq_scale,
                          .freq_factors = rc->ff ? getf("rope.%s.%s", n, "ff") : NULL,
                          .ext_factor = rc->ext,
                          .attn_factor = rc->attn,
                          .beta_fast = rc->beta_fast,
                          .beta_slow = rc->beta_slow,
                          .n_ctx_orig = rc->n_ctx};
        pt_tensor *ggml = getf("rope.%s.%s", n, "ggml"), *ref = getf("rope.%s.%s", n, "ref");
        pt_tensor *y = pt_rope(x, pos, &o);
        assert_tensor_close(y, ggml, ROPE_GGML_RTOL, ROPE_GGML_ATOL);
        assert_tensor_close(y, ref, 0, ROPE_DEF_ATOL);
        assert_true(pt_is_contiguous(y));
        /* strided x (every other element of a wider buffer) and strided pos */
        assert_tensor_close(pt_rope(pt_test_noncontig(x), pt_test_noncontig(pos), &o), ggml,
                            ROPE_GGML_RTOL, ROPE_GGML_ATOL);
    }
    /* opts NULL and zero opts are the defaults (NORM, base 10000, whole head) */
    pt_tensor *x = fx_get(fx, "rope.norm.x"), *pos = fx_get(fx, "rope.norm.pos");
    pt_rope_opts zero = {0};
    assert_tensor_close(pt_rope(x, pos, NULL), fx_get(fx, "rope.norm.ggml"), ROPE_GGML_RTOL,
                        ROPE_GGML_ATOL);
    assert_tensor_close(pt_rope(x, pos, &zero), fx_get(fx, "rope.norm.ggml"), ROPE_GGML_RTOL,
                        ROPE_GGML_ATOL);
}

static void test_rope_large_and_empty(void **state)
{
    (void)state;
    /* many tokens (the parallel path) give the same rows as one token at a time */
    int64_t T = 300, H = 4, D = 64;
    pt_tensor *x = pt_randn(PT_SHAPE(T, H, D), PT_FLOAT32, pt_cpu());
    pt_tensor *pos = pt_arange(0, (double)T, 1, PT_INT64, pt_cpu());
    pt_rope_opts o = {.mode = PT_ROPE_NEOX, .freq_base = 1e6};
    pt_tensor *y = pt_rope(x, pos, &o);
    assert_shape(y, T, H, D);
    const float *yd = pt_data_ptr(y);
    for (int64_t t = 0; t < T; t += 37) {
        pt_tensor *xt = pt_as_strided(x, 3, ARR(1, H, D), pt_stride(x), t * H * D);
        pt_tensor *pt = pt_as_strided(pos, 1, ARR(1), pt_stride(pos), t);
        pt_tensor *yt = pt_rope(xt, pt, &o);
        assert_memory_equal(pt_data_ptr(yt), yd + t * H * D, (size_t)(H * D) * sizeof(float));
    }
    /* T = 0 and n_rot = 0 on an empty head */
    pt_tensor *e = pt_rope(pt_zeros(PT_SHAPE(0, 2, 8), PT_FLOAT32, pt_cpu()),
                           pt_zeros(PT_SHAPE(0), PT_INT32, pt_cpu()), NULL);
    assert_shape(e, 0, 2, 8);
}

static void test_rope_errors(void **state)
{
    (void)state;
    pt_tensor *x = pt_ones(PT_SHAPE(3, 2, 8), PT_FLOAT32, pt_cpu());
    pt_tensor *pos = pt_zeros(PT_SHAPE(3), PT_INT32, pt_cpu());
    assert_pt_error(pt_rope(NULL, pos, NULL), PT_ERR_NULL, "pt_rope");
    assert_pt_error(pt_rope(x, NULL, NULL), PT_ERR_NULL, "pos");
    assert_pt_error(pt_rope(pt_ones(PT_SHAPE(3, 2, 8), PT_FLOAT64, pt_cpu()), pos, NULL),
                    PT_ERR_INVALID_ARG, "pt_rope: x must be a float32 [T, H, D]");
    assert_pt_error(pt_rope(pt_ones(PT_SHAPE(3, 16), PT_FLOAT32, pt_cpu()), pos, NULL),
                    PT_ERR_INVALID_ARG, "x must be");
    assert_pt_error(pt_rope(x, pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu()), NULL),
                    PT_ERR_INVALID_ARG, "pos must be an int32 or int64 [T]");
    assert_pt_error(pt_rope(x, pt_zeros(PT_SHAPE(4), PT_INT64, pt_cpu()), NULL), PT_ERR_INVALID_ARG,
                    "T = 3");
    pt_rope_opts o = {.n_rot = 5};
    assert_pt_error(pt_rope(x, pos, &o), PT_ERR_INVALID_ARG, "n_rot must be even");
    o.n_rot = 10;
    assert_pt_error(pt_rope(x, pos, &o), PT_ERR_INVALID_ARG, "D = 8");
    o = (pt_rope_opts){.mode = (pt_rope_mode)7};
    assert_pt_error(pt_rope(x, pos, &o), PT_ERR_INVALID_ARG, "opts->mode");
    o = (pt_rope_opts){.freq_base = -2};
    assert_pt_error(pt_rope(x, pos, &o), PT_ERR_INVALID_ARG, "freq_base");
    o = (pt_rope_opts){.n_rot = 4, .freq_factors = pt_ones(PT_SHAPE(4), PT_FLOAT32, pt_cpu())};
    assert_pt_error(pt_rope(x, pos, &o), PT_ERR_INVALID_ARG,
                    "freq_factors must be a float32 [n_rot/2 = 2]");
    /* inference only: no gradient is recorded, so a grad-requiring input is refused */
    pt_tensor *xg = pt_ones(PT_SHAPE(3, 2, 8), PT_FLOAT32, pt_cpu());
    pt_requires_grad_(xg, true);
    assert_pt_error(pt_rope(xg, pos, NULL), PT_ERR_UNSUPPORTED, "inference-only");
    pt_no_grad_begin();
    pt_tensor *y = pt_rope(xg, pos, NULL);
    pt_no_grad_end();
    assert_non_null(y);
    assert_false(pt_requires_grad(y));
}

/* ---- attention_kv ---------------------------------------------------------------------------- */

typedef struct akv_case {
    const char *name, *inputs; /* fixture prefix of q/k/v */
    int64_t t, hq, hkv, d, dv, n_ctx, s, q_pos0, window;
    double scale;
} akv_case;

/* The cases of gen/nn_llm.py's ATTN_CASES. */
static const akv_case AKV_CASES[] = {
    {"dec37", "dec37", 1, 4, 1, 64, 64, 48, 37, 36, 0, 0.0},
    {"dec300", "dec300", 1, 8, 2, 64, 64, 320, 300, 299, 0, 0.0},
    {"dec300_mqa", "dec300_mqa", 1, 4, 1, 64, 64, 300, 300, 299, 0, 0.0625},
    {"dec300_win", "dec300", 1, 8, 2, 64, 64, 320, 300, 299, 64, 0.0},
    {"prefill", "prefill", 20, 4, 4, 64, 64, 24, 20, 0, 0, 0.0},
    {"prefill_d128", "prefill_d128", 16, 4, 2, 128, 128, 16, 16, 0, 0, 0.0},
    {"prefill_gemma", "prefill_gemma", 8, 4, 1, 256, 256, 8, 8, 0, 0, 0.0625},
    {"chunk_d256", "chunk_d256", 7, 4, 2, 256, 256, 40, 37, 30, 0, 0.0},
    {"window", "window", 9, 2, 1, 64, 64, 70, 65, 56, 16, 0.0},
    {"dv", "dv", 3, 6, 3, 64, 32, 24, 20, 10, 0, 0.0},
    {"group3", "group3", 5, 6, 2, 32, 40, 16, 14, 9, 6, 0.2},
    {"mha_dec", "mha_dec", 1, 3, 3, 64, 64, 64, 61, 60, 0, 0.0},
    {"gqa2_dec", "gqa2_dec", 1, 4, 2, 128, 128, 40, 37, 36, 0, 0.0},
    {"odd_dims", "odd_dims", 5, 2, 2, 20, 12, 12, 9, 4, 0, 0.0},
};

/* float32 cache: the same math in another summation order (dot products of up to 256 terms,
 * softmax sums over up to 300 keys). */
#define AKV_F32_RTOL 1e-5
#define AKV_F32_ATOL 2e-6
/* float16 cache: the same, plus the float16 rounding of the weights, which is discontinuous:
 * a weight whose float32 value differs from torch's in the last bit (another exp, another
 * summation order) can round to the neighbouring float16, one step of 2^-11 relative. Such a
 * flip moves every output of its row by up to 2^-11 * |v|, and flips are rare. So: every
 * element within AKV_F16_RTOL/ATOL, except at most 5% of them (a few rows hit by a flip), and
 * those within one float16 step of the largest weight (2^-11 * max |v|). */
#define AKV_F16_RTOL 1e-5
#define AKV_F16_ATOL 1e-5

/* The float16-cache comparison described above. */
static void assert_f16_close(const pt_tensor *got, const pt_tensor *want, const pt_tensor *v,
                             const char *name)
{
    assert_non_null(got);
    assert_int_equal(pt_numel(got), pt_numel(want));
    double vmax = 0;
    for (int64_t i = 0; i < pt_numel(v); i++)
        vmax = fmax(vmax, fabs(pt_test_get(v, i)));
    double flip = ldexp(vmax, -11);
    int64_t n = pt_numel(want), off = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = pt_test_get(got, i), w = pt_test_get(want, i), e = fabs(g - w);
        if (e <= AKV_F16_ATOL + AKV_F16_RTOL * fabs(w))
            continue;
        off++;
        if (!(e <= flip + AKV_F16_ATOL))
            fail_msg("%s: element %lld: got %.9g, expected %.9g (more than one float16 step of "
                     "the largest weight, %.3g)",
                     name, (long long)i, g, w, flip);
    }
    if (off * 20 > n)
        fail_msg("%s: %lld of %lld elements off by more than the float32 tolerance", name,
                 (long long)off, (long long)n);
}

/* The first s rows of a [n_ctx, H, dim] cache, as a view. */
static pt_tensor *narrow_rows(pt_tensor *cache, int64_t s)
{
    const int64_t *sh = pt_shape(cache);
    return pt_as_strided(cache, 3, ARR(s, sh[1], sh[2]), pt_stride(cache), 0);
}

/* The cache [n_ctx, H, dim] copied into a head-major buffer with padded rows
 * ([H, n_ctx, dim + 8] storage) and viewed back as [n_ctx, H, dim]: row stride dim + 8, head
 * stride n_ctx * (dim + 8). */
static pt_tensor *head_major(pt_tensor *cache)
{
    const int64_t *sh = pt_shape(cache);
    int64_t n = sh[0], h = sh[1], d = sh[2];
    pt_tensor *big = pt_zeros(PT_SHAPE(h, n, d + 8), pt_dtype_of(cache), pt_cpu());
    pt_tensor *view = pt_as_strided(big, 3, ARR(n, h, d), ARR(d + 8, n * (d + 8), 1), 0);
    assert_int_equal(pt_copy_(view, cache), PT_OK);
    return view;
}

static void check_case(const akv_case *c, pt_dtype cache_dt)
{
    pt_tensor *q = getf("akv.%s.%s", c->inputs, "q");
    pt_tensor *k = pt_to_dtype(getf("akv.%s.%s", c->inputs, "k"), cache_dt);
    pt_tensor *v = pt_to_dtype(getf("akv.%s.%s", c->inputs, "v"), cache_dt);
    bool f16 = cache_dt == PT_FLOAT16;
    pt_tensor *want = getf("akv.%s.%s", c->name, f16 ? "f16" : "f32");
    pt_attention_kv_opts o = {.scale = c->scale, .q_pos0 = c->q_pos0, .window = c->window};
    /* a narrow view of the bigger cache (rows past q_pos0 + T are ignored) */
    pt_tensor *got[3];
    got[0] = pt_attention_kv(q, narrow_rows(k, c->s), narrow_rows(v, c->s), &o);
    /* head-major padded layout, strided q */
    pt_tensor *kh = narrow_rows(head_major(k), c->s), *vh = narrow_rows(head_major(v), c->s);
    got[1] = pt_attention_kv(pt_test_noncontig(q), kh, vh, &o);
    /* a cache whose last dim is strided is copied by the front-end */
    got[2] = pt_attention_kv(q, pt_test_noncontig(narrow_rows(k, c->s)), narrow_rows(v, c->s), &o);
    for (int i = 0; i < 3; i++) {
        if (f16)
            assert_f16_close(got[i], want, v, c->name);
        else
            assert_tensor_close(got[i], want, AKV_F32_RTOL, AKV_F32_ATOL);
    }
}

static void test_attention_kv_matches_torch(void **state)
{
    (void)state;
    int saved = pt_get_num_threads();
    for (int threads = 1; threads <= 3; threads++) {
        pt_set_num_threads(threads);
        for (size_t i = 0; i < sizeof AKV_CASES / sizeof AKV_CASES[0]; i++) {
            check_case(&AKV_CASES[i], PT_FLOAT32);
            check_case(&AKV_CASES[i], PT_FLOAT16);
        }
    }
    pt_set_num_threads(saved);
}

/* Chunked prefill: the rows of one call over T queries equal the rows of calls over pieces
 * of them with the matching q_pos0, and the thread count does not change the result beyond
 * summation order. */
static void test_attention_kv_chunked_prefill(void **state)
{
    (void)state;
    const akv_case *c = &AKV_CASES[4]; /* prefill: T = S = 20 */
    pt_tensor *q = getf("akv.%s.%s", c->name, "q");
    pt_tensor *k = narrow_rows(getf("akv.%s.%s", c->name, "k"), c->s);
    pt_tensor *v = narrow_rows(getf("akv.%s.%s", c->name, "v"), c->s);
    pt_tensor *want = getf("akv.%s.%s", c->name, "f16");
    int64_t cuts[] = {0, 7, 8, 20};
    for (int i = 0; i < 3; i++) {
        int64_t t0 = cuts[i], nt = cuts[i + 1] - cuts[i];
        pt_tensor *qi = pt_as_strided(q, 3, ARR(nt, c->hq, c->d), pt_stride(q), t0 * c->hq * c->d);
        pt_tensor *wi =
            pt_as_strided(want, 3, ARR(nt, c->hq, c->dv), pt_stride(want), t0 * c->hq * c->dv);
        pt_attention_kv_opts o = {.q_pos0 = t0};
        /* the cache holds exactly the positions up to this chunk's last query */
        pt_tensor *ki = narrow_rows(k, t0 + nt), *vi = narrow_rows(v, t0 + nt);
        assert_f16_close(pt_attention_kv(qi, ki, vi, &o), wi, v, "chunked prefill");
    }
}

static void test_attention_kv_empty(void **state)
{
    (void)state;
    pt_tensor *k = pt_zeros(PT_SHAPE(5, 2, 16), PT_FLOAT16, pt_cpu());
    pt_tensor *v = pt_zeros(PT_SHAPE(5, 2, 8), PT_FLOAT16, pt_cpu());
    pt_tensor *o = pt_attention_kv(pt_zeros(PT_SHAPE(0, 4, 16), PT_FLOAT32, pt_cpu()), k, v, NULL);
    assert_shape(o, 0, 4, 8);
    /* one query against one key: the output is that value row */
    pt_tensor *k1 = pt_ones(PT_SHAPE(1, 1, 16), PT_FLOAT32, pt_cpu());
    pt_tensor *v1 = pt_full(PT_SHAPE(1, 1, 3), 2.5, PT_FLOAT32, pt_cpu());
    pt_tensor *o1 =
        pt_attention_kv(pt_ones(PT_SHAPE(1, 2, 16), PT_FLOAT32, pt_cpu()), k1, v1, NULL);
    assert_tensor_equal(o1, pt_full(PT_SHAPE(1, 2, 3), 2.5, PT_FLOAT32, pt_cpu()));
}

static void test_attention_kv_errors(void **state)
{
    (void)state;
    pt_tensor *q = pt_ones(PT_SHAPE(2, 4, 16), PT_FLOAT32, pt_cpu());
    pt_tensor *k = pt_ones(PT_SHAPE(6, 2, 16), PT_FLOAT16, pt_cpu());
    pt_tensor *v = pt_ones(PT_SHAPE(6, 2, 8), PT_FLOAT16, pt_cpu());
    assert_pt_error(pt_attention_kv(NULL, k, v, NULL), PT_ERR_NULL, "pt_attention_kv");
    assert_pt_error(pt_attention_kv(q, NULL, v, NULL), PT_ERR_NULL, "k");
    assert_pt_error(pt_attention_kv(q, k, NULL, NULL), PT_ERR_NULL, "v");
    /* S < q_pos0 + T */
    pt_attention_kv_opts o = {.q_pos0 = 5};
    assert_pt_error(pt_attention_kv(q, k, v, &o), PT_ERR_SHAPE, "S >= q_pos0 + T is required");
    o.q_pos0 = -1;
    assert_pt_error(pt_attention_kv(q, k, v, &o), PT_ERR_INVALID_ARG, "q_pos0 (-1)");
    o = (pt_attention_kv_opts){.window = -3};
    assert_pt_error(pt_attention_kv(q, k, v, &o), PT_ERR_INVALID_ARG, "window (-3)");
    /* Hq % Hkv */
    pt_tensor *k3 = pt_ones(PT_SHAPE(6, 3, 16), PT_FLOAT16, pt_cpu());
    pt_tensor *v3 = pt_ones(PT_SHAPE(6, 3, 8), PT_FLOAT16, pt_cpu());
    assert_pt_error(pt_attention_kv(q, k3, v3, NULL), PT_ERR_SHAPE,
                    "Hq = 4 must be a multiple of the key/value heads Hkv = 3");
    /* dtypes */
    pt_tensor *v32 = pt_ones(PT_SHAPE(6, 2, 8), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_attention_kv(q, k, v32, NULL), PT_ERR_INVALID_ARG,
                    "k and v must have the same dtype");
    assert_pt_error(pt_attention_kv(pt_ones(PT_SHAPE(2, 4, 16), PT_FLOAT16, pt_cpu()), k, v, NULL),
                    PT_ERR_INVALID_ARG, "q must be a float32 [T, Hq, D]");
    assert_pt_error(pt_attention_kv(q, pt_ones(PT_SHAPE(6, 2, 16), PT_INT32, pt_cpu()), v, NULL),
                    PT_ERR_INVALID_ARG, "k must be a float16 or float32 [S, Hkv, dim]");
    assert_pt_error(pt_attention_kv(q, pt_ones(PT_SHAPE(6, 32), PT_FLOAT16, pt_cpu()), v, NULL),
                    PT_ERR_INVALID_ARG, "k must be");
    /* shapes */
    pt_tensor *k8 = pt_ones(PT_SHAPE(6, 2, 8), PT_FLOAT16, pt_cpu());
    assert_pt_error(pt_attention_kv(q, k8, v, NULL), PT_ERR_SHAPE, "k [6, 2, 8]");
    pt_tensor *v5 = pt_ones(PT_SHAPE(5, 2, 8), PT_FLOAT16, pt_cpu());
    assert_pt_error(pt_attention_kv(q, k, v5, NULL), PT_ERR_SHAPE, "v [5, 2, 8]");
    o = (pt_attention_kv_opts){.scale = INFINITY};
    assert_pt_error(pt_attention_kv(q, k, v, &o), PT_ERR_INVALID_ARG, "scale must be finite");
    /* inference only */
    pt_tensor *qg = pt_ones(PT_SHAPE(2, 4, 16), PT_FLOAT32, pt_cpu());
    pt_requires_grad_(qg, true);
    assert_pt_error(pt_attention_kv(qg, k, v, NULL), PT_ERR_UNSUPPORTED, "inference-only");
    pt_no_grad_begin();
    assert_non_null(pt_attention_kv(qg, k, v, NULL));
    pt_no_grad_end();
}

int main(void)
{
    fx = fx_open("nn_llm");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rope_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_rope_large_and_empty, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_rope_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_attention_kv_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_attention_kv_chunked_prefill, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_attention_kv_empty, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_attention_kv_errors, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
