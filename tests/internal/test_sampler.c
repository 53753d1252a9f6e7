/* Tests of the token sampler (src/serve/llm/sampler.c): each stage's distribution against a NumPy
 * transcription of llama.cpp's chain (tests/fixtures/gen/sampler.py), greedy, seeding, an
 * empirical-frequency check of the draws, edge cases, and the time of one step on a
 * 262,144-token vocabulary. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/llm/sampler.h"
#include "testutil.h"

static pt_fixture *fx;

typedef struct ref_case {
    pt_tensor *logits, *history, *opts, *ids, *probs;
} ref_case;

static pt_tensor *get(const char *name, const char *what)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", name, what);
    pt_tensor *t = fx_get(fx, key);
    assert_non_null(t);
    return t;
}

static ref_case load_case(const char *name)
{
    return (ref_case){get(name, "logits"), get(name, "history"), get(name, "opts"),
                      get(name, "ids"), get(name, "probs")};
}

static void free_case(ref_case *c)
{
    pt_release(c->logits);
    pt_release(c->history);
    pt_release(c->opts);
    pt_release(c->ids);
    pt_release(c->probs);
}

static pti_sampler_opts opts_of(const pt_tensor *t)
{
    const double *v = pt_data_ptr(t);
    return (pti_sampler_opts){.temperature = (float)v[0],
                              .top_k = (int32_t)v[1],
                              .top_p = (float)v[2],
                              .min_p = (float)v[3],
                              .typical_p = (float)v[4],
                              .repeat_penalty = (float)v[5],
                              .repeat_last_n = (int32_t)v[6],
                              .presence_penalty = (float)v[7],
                              .frequency_penalty = (float)v[8],
                              .seed = (int64_t)v[9]};
}

static pti_sampler *sampler_for(const ref_case *c)
{
    pti_sampler_opts o = opts_of(c->opts);
    pti_sampler *s = pti_sampler_new(&o, (int32_t)pt_numel(c->logits));
    assert_non_null(s);
    const int32_t *h = pt_data_ptr(c->history);
    for (int64_t i = 0; i < pt_numel(c->history); i++)
        assert_int_equal(pti_sampler_accept(s, h[i]), PT_OK);
    return s;
}

typedef struct idp {
    int32_t id;
    float p;
} idp;

static int by_id(const void *a, const void *b)
{
    const idp *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static void check_case(const char *name)
{
    ref_case c = load_case(name);
    pti_sampler *s = sampler_for(&c);
    int32_t n = (int32_t)pt_numel(c.logits);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    float *probs = malloc((size_t)n * sizeof *probs);
    idp *got = malloc((size_t)n * sizeof *got);
    int32_t k = pti_sampler_probs(s, pt_data_ptr(c.logits), n, ids, probs, n);
    int64_t ke = pt_numel(c.ids);
    if (k != ke)
        fail_msg("%s: %d candidates, expected %lld", name, (int)k, (long long)ke);
    for (int32_t i = 0; i < k; i++)
        got[i] = (idp){ids[i], probs[i]};
    qsort(got, (size_t)k, sizeof *got, by_id);
    const int32_t *eid = pt_data_ptr(c.ids);
    const float *ep = pt_data_ptr(c.probs);
    double sum = 0.0;
    for (int32_t i = 0; i < k; i++) {
        if (got[i].id != eid[i])
            fail_msg("%s: candidate %d is token %d, expected %d", name, i, got[i].id, eid[i]);
        /* float32 exp and sums in another order than NumPy's: a few ulps */
        if (fabsf(got[i].p - ep[i]) > 1e-7f + 2e-5f * ep[i])
            fail_msg("%s: p(token %d) = %.9g, expected %.9g", name, got[i].id, got[i].p, ep[i]);
        sum += got[i].p;
    }
    assert_true(fabs(sum - 1.0) < 1e-5);
    printf("  %-26s %5d candidates match\n", name, (int)k);
    free(ids);
    free(probs);
    free(got);
    pti_sampler_free(s);
    free_case(&c);
}

static void test_stages(void **state)
{
    (void)state;
    static const char *names[] = {"pen",
                                  "pen_topk",
                                  "pen_topk_topp",
                                  "pen_topk_topp_minp",
                                  "pen_topk_topp_minp_temp",
                                  "ollama",
                                  "repeat_only",
                                  "temp_only",
                                  "topk_only",
                                  "minp_only",
                                  "topp_only",
                                  "topp_flat",
                                  "typical",
                                  "typical_topk",
                                  "topk_big",
                                  "draw"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        check_case(names[i]);
}

/* ---- greedy --------------------------------------------------------------------------------- */

static void test_greedy(void **state)
{
    (void)state;
    pti_sampler_opts o = pti_sampler_default_opts();
    o.temperature = 0.0f;
    o.repeat_penalty = 1.0f;
    float l[6] = {0.5f, 3.0f, -1.0f, 3.0f, NAN, 2.0f};
    pti_sampler *s = pti_sampler_new(&o, 6);
    assert_int_equal(pti_sample(s, l, 6), 1); /* tie 1/3 -> lowest id */
    int32_t id;
    float p;
    assert_int_equal(pti_sampler_probs(s, l, 6, &id, &p, 1), 1);
    assert_int_equal(id, 1);
    assert_true(p == 1.0f);
    pti_sampler_free(s);
    o.temperature = -1.0f; /* negative is greedy too */
    s = pti_sampler_new(&o, 6);
    assert_int_equal(pti_sample(s, l, 6), 1);
    pti_sampler_free(s);

    /* Greedy sees the penalties: the "pen" case's argmax is that of the penalized logits. */
    ref_case c = load_case("pen");
    o = opts_of(c.opts);
    o.temperature = 0.0f;
    s = pti_sampler_new(&o, (int32_t)pt_numel(c.logits));
    const int32_t *h = pt_data_ptr(c.history);
    for (int64_t i = 0; i < pt_numel(c.history); i++)
        pti_sampler_accept(s, h[i]);
    const float *ep = pt_data_ptr(c.probs);
    const int32_t *eid = pt_data_ptr(c.ids);
    int32_t best = 0;
    for (int64_t i = 1; i < pt_numel(c.ids); i++)
        if (ep[i] > ep[best])
            best = (int32_t)i;
    const float *raw = pt_data_ptr(c.logits);
    assert_int_equal(pti_sample(s, raw, (int32_t)pt_numel(c.logits)), eid[best]);
    pti_sampler_free(s);
    free_case(&c);
}

/* ---- seeds ---------------------------------------------------------------------------------- */

static void fill_normal(float *x, int32_t n, uint64_t seed, float scale)
{
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int32_t i = 0; i < n; i++) {
        double u[2];
        for (int j = 0; j < 2; j++) {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            u[j] = ((double)(st >> 11) + 0.5) / 9007199254740992.0;
        }
        x[i] = (float)(sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1])) * scale;
    }
}

static void generate(int64_t seed, const float *l, int32_t n, int32_t steps, int32_t *out)
{
    pti_sampler_opts o = pti_sampler_default_opts();
    o.seed = seed;
    o.temperature = 1.5f; /* a wide distribution, so different seeds diverge quickly */
    o.top_k = 0;
    o.top_p = 1.0f;
    pti_sampler *s = pti_sampler_new(&o, n);
    assert_non_null(s);
    for (int32_t i = 0; i < steps; i++) {
        out[i] = pti_sample(s, l, n);
        assert_true(out[i] >= 0 && out[i] < n);
        assert_int_equal(pti_sampler_accept(s, out[i]), PT_OK);
    }
    pti_sampler_free(s);
}

static void test_seed(void **state)
{
    (void)state;
    enum { N = 500, STEPS = 200 };
    float l[N];
    fill_normal(l, N, 1, 1.0f);
    int32_t a[STEPS], b[STEPS], c[STEPS];
    generate(7, l, N, STEPS, a);
    generate(7, l, N, STEPS, b);
    generate(8, l, N, STEPS, c);
    assert_memory_equal(a, b, sizeof a);
    int same = 0;
    for (int i = 0; i < STEPS; i++)
        same += a[i] == c[i];
    assert_true(same < STEPS / 4);

    /* reset: the stream and the window start over */
    pti_sampler_opts o = pti_sampler_default_opts();
    o.seed = 7;
    o.temperature = 1.5f;
    o.top_k = 0;
    o.top_p = 1.0f;
    pti_sampler *s = pti_sampler_new(&o, N);
    for (int i = 0; i < 50; i++)
        pti_sampler_accept(s, pti_sample(s, l, N));
    pti_sampler_reset(s);
    for (int i = 0; i < STEPS; i++) {
        int32_t t = pti_sample(s, l, N);
        assert_int_equal(t, a[i]);
        pti_sampler_accept(s, t);
    }
    assert_int_equal(pti_sampler_seed(s), 7);
    pti_sampler_free(s);

    /* seed -1: a random seed, reported */
    o.seed = -1;
    pti_sampler *r1 = pti_sampler_new(&o, N), *r2 = pti_sampler_new(&o, N);
    assert_true(pti_sampler_seed(r1) != pti_sampler_seed(r2));
    pti_sampler_free(r1);
    pti_sampler_free(r2);
}

/* ---- empirical frequencies ------------------------------------------------------------------ */

/* Chi-square upper quantile by Wilson-Hilferty. */
static double chi2_quantile(int df, double z)
{
    double a = 2.0 / (9.0 * df);
    double t = 1.0 - a + z * sqrt(a);
    return df * t * t * t;
}

static void test_frequencies(void **state)
{
    (void)state;
    ref_case c = load_case("draw");
    int32_t n = (int32_t)pt_numel(c.logits);
    const int32_t *eid = pt_data_ptr(c.ids);
    const float *ep = pt_data_ptr(c.probs);
    int32_t k = (int32_t)pt_numel(c.ids);
    enum { DRAWS = 20000 };
    static const int64_t seeds[] = {1234, 99, 2026};
    for (size_t si = 0; si < 3; si++) {
        pti_sampler_opts o = opts_of(c.opts);
        o.seed = seeds[si];
        pti_sampler *s = pti_sampler_new(&o, n);
        const int32_t *h = pt_data_ptr(c.history);
        for (int64_t i = 0; i < pt_numel(c.history); i++)
            pti_sampler_accept(s, h[i]);
        int counts[16] = {0};
        const float *logits = pt_data_ptr(c.logits);
        for (int d = 0; d < DRAWS; d++) {
            int32_t t = pti_sample(s, logits, n);
            assert_true(t >= 0 && t < n);
            counts[t]++; /* not accepted: the distribution stays fixed */
        }
        double chi2 = 0.0;
        int in_set = 0;
        for (int32_t i = 0; i < k; i++) {
            double e = ep[i] * DRAWS;
            assert_true(e >= 5.0);
            chi2 += (counts[eid[i]] - e) * (counts[eid[i]] - e) / e;
            in_set += counts[eid[i]];
        }
        assert_int_equal(in_set, DRAWS);          /* nothing outside the final set */
        double crit = chi2_quantile(k - 1, 3.72); /* p = 1e-4 */
        printf("  seed %lld: chi2 %.2f, df %d, bound %.2f\n", (long long)seeds[si], chi2, k - 1,
               crit);
        assert_true(chi2 < crit);
        pti_sampler_free(s);
    }
    free_case(&c);
}

/* ---- edge cases ----------------------------------------------------------------------------- */

static void test_edges(void **state)
{
    (void)state;
    enum { N = 100 };
    float l[N];
    int32_t ids[N];
    float probs[N];
    pti_sampler_opts d = pti_sampler_default_opts();
    d.seed = 3;

    /* all -inf but one, and NaN as -inf: that one, always, with p = 1 */
    for (int i = 0; i < N; i++)
        l[i] = (i % 3) ? -INFINITY : NAN;
    l[57] = -5.0f;
    pti_sampler_opts vars[4] = {d, d, d, d};
    vars[1].top_k = 0;
    vars[1].top_p = 0.5f;
    vars[2].min_p = 0.3f;
    vars[2].typical_p = 0.5f;
    vars[3].temperature = 0.0f;
    for (int v = 0; v < 4; v++) {
        pti_sampler *s = pti_sampler_new(&vars[v], N);
        for (int i = 0; i < 20; i++)
            assert_int_equal(pti_sample(s, l, N), 57);
        pti_sampler_accept(s, 57); /* penalized, still the only one */
        assert_int_equal(pti_sample(s, l, N), 57);
        assert_int_equal(pti_sampler_probs(s, l, N, ids, probs, N), 1);
        assert_int_equal(ids[0], 57);
        assert_true(probs[0] == 1.0f);
        pti_sampler_free(s);
    }

    /* nothing above -inf: refused */
    l[57] = -INFINITY;
    pti_sampler *s = pti_sampler_new(&d, N);
    assert_int_equal(pti_sample(s, l, N), -1);
    assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
    assert_non_null(strstr(pt_last_error(), "no logit above -inf"));
    pti_sampler_free(s);

    /* +inf logits share the mass */
    fill_normal(l, N, 5, 2.0f);
    l[10] = l[20] = INFINITY;
    s = pti_sampler_new(&d, N);
    int32_t k = pti_sampler_probs(s, l, N, ids, probs, N);
    assert_int_equal(k, 2);
    assert_true(probs[0] == 0.5f && probs[1] == 0.5f);
    pti_sampler_free(s);

    /* n_vocab 1 */
    float one = 0.25f;
    s = pti_sampler_new(&d, 1);
    assert_int_equal(pti_sample(s, &one, 1), 0);
    assert_int_equal(pti_sampler_accept(s, 0), PT_OK);
    assert_int_equal(pti_sample(s, &one, 1), 0);
    pti_sampler_free(s);

    /* top_k > vocab, top_p 1, min_p 0: plain softmax of everything */
    fill_normal(l, N, 6, 1.0f);
    pti_sampler_opts o = d;
    o.top_k = 1000;
    o.top_p = 1.0f;
    o.min_p = 0.0f;
    o.temperature = 1.0f;
    s = pti_sampler_new(&o, N);
    k = pti_sampler_probs(s, l, N, ids, probs, N);
    assert_int_equal(k, N);
    double z = 0.0;
    for (int i = 0; i < N; i++)
        z += exp((double)l[i]);
    for (int i = 0; i < N; i++)
        assert_true(fabs(probs[i] - exp((double)l[ids[i]]) / z) < 1e-6);
    assert_true(pti_sample(s, l, N) >= 0);
    /* cap smaller than the set: the count is still the set's size */
    assert_int_equal(pti_sampler_probs(s, l, N, ids, probs, 3), N);
    assert_int_equal(pti_sampler_probs(s, l, N, NULL, NULL, 0), N);
    pti_sampler_free(s);

    /* ties: top_k keeps the lowest ids, and they share the mass equally */
    for (int i = 0; i < N; i++)
        l[i] = 1.0f;
    o = d;
    o.top_k = 3;
    o.top_p = 1.0f;
    o.repeat_penalty = 1.0f;
    s = pti_sampler_new(&o, N);
    assert_int_equal(pti_sampler_probs(s, l, N, ids, probs, N), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ids[i], i);
        assert_true(fabsf(probs[i] - 1.0f / 3.0f) < 1e-7f);
    }
    pti_sampler_free(s);

    /* min_p above 1 keeps the best token alone (llama.cpp's sorted path), with or without
     * top_k's sorting before it */
    fill_normal(l, N, 8, 1.0f);
    int32_t best = 0;
    for (int i = 1; i < N; i++)
        if (l[i] > l[best])
            best = i;
    for (int v = 0; v < 2; v++) {
        o = d;
        o.min_p = 1.5f;
        o.top_p = 1.0f;
        o.top_k = v ? 0 : 10;
        s = pti_sampler_new(&o, N);
        assert_int_equal(pti_sampler_probs(s, l, N, ids, probs, N), 1);
        assert_int_equal(ids[0], best);
        assert_int_equal(pti_sample(s, l, N), best);
        pti_sampler_free(s);
    }
    /* top_p 0 keeps the best token alone too */
    o = d;
    o.top_p = 0.0f;
    s = pti_sampler_new(&o, N);
    assert_int_equal(pti_sampler_probs(s, l, N, ids, probs, N), 1);
    assert_int_equal(ids[0], best);
    pti_sampler_free(s);

    /* errors */
    s = pti_sampler_new(&d, N);
    assert_int_equal(pti_sample(s, l, N + 1), -1);
    assert_non_null(strstr(pt_last_error(), "n_vocab 100"));
    assert_int_equal(pti_sample(s, NULL, N), -1);
    assert_int_equal(pt_last_status(), PT_ERR_NULL);
    assert_int_equal(pti_sample(NULL, l, N), -1);
    assert_int_equal(pti_sampler_accept(s, N), PT_ERR_INVALID_ARG);
    assert_int_equal(pti_sampler_accept(s, -1), PT_ERR_INVALID_ARG);
    assert_int_equal(pti_sampler_accept(NULL, 0), PT_ERR_NULL);
    assert_int_equal(pti_sampler_probs(s, l, N, NULL, NULL, 5), -1);
    pti_sampler_free(s);
    pti_sampler_free(NULL);
    assert_null(pti_sampler_new(&d, 0));
    o = d;
    o.repeat_last_n = -1;
    assert_null(pti_sampler_new(&o, N));
    assert_non_null(strstr(pt_last_error(), "num_ctx"));
    o = d;
    o.temperature = NAN;
    assert_null(pti_sampler_new(&o, N));
    o = d;
    o.repeat_penalty = 0.0f;
    assert_null(pti_sampler_new(&o, N));
    o = d;
    o.temperature = INFINITY;
    assert_null(pti_sampler_new(&o, N));
    s = pti_sampler_new(NULL, N); /* the defaults */
    assert_non_null(s);
    pti_sampler_free(s);
}

/* The penalty window: only the last repeat_last_n accepted tokens count. */
static void test_window(void **state)
{
    (void)state;
    float l[4] = {2.0f, 2.0f, 1.0f, 0.0f};
    pti_sampler_opts o = pti_sampler_default_opts();
    o.temperature = 0.0f;
    o.repeat_penalty = 2.0f;
    o.repeat_last_n = 3;
    pti_sampler *s = pti_sampler_new(&o, 4);
    assert_int_equal(pti_sample(s, l, 4), 0);
    pti_sampler_accept(s, 0); /* 0 -> 1.0: 1 wins */
    assert_int_equal(pti_sample(s, l, 4), 1);
    pti_sampler_accept(s, 1); /* both 1.0: 0 wins the tie */
    assert_int_equal(pti_sample(s, l, 4), 0);
    pti_sampler_accept(s, 3);
    pti_sampler_accept(s, 3); /* window {1, 3, 3}: 0 is free again */
    assert_int_equal(pti_sample(s, l, 4), 0);
    pti_sampler_accept(s, 3); /* window {3, 3, 3}: 0 and 1 free, tie -> 0 */
    assert_int_equal(pti_sample(s, l, 4), 0);
    pti_sampler_accept(s, 0);
    pti_sampler_accept(s, 0); /* {3, 0, 0} */
    assert_int_equal(pti_sample(s, l, 4), 1);
    pti_sampler_free(s);
}

/* ---- penalties without the penalized copy ------------------------------------------------- */

/* The sampler applies the penalties while it selects (top_k) or copies (no top_k), never
 * writing a penalized copy of the vocabulary. Checked against penalizing the logits by hand
 * (the formula of sampler.h, in the same float operations) and sampling them with the
 * penalties off: the candidate lists and the draws must be identical, bit for bit. The logits
 * have ties (including with window tokens), NaN and -inf; penalties that lower and that raise a
 * logit; windows with repeats, shorter than top_k and longer. */
static void penalize_by_hand(const pti_sampler_opts *o, const int32_t *win, int32_t n_win,
                             const float *in, float *out, int32_t n)
{
    memcpy(out, in, (size_t)n * sizeof *out);
    int32_t first = n_win > o->repeat_last_n ? n_win - o->repeat_last_n : 0;
    for (int32_t j = first; j < n_win; j++) {
        int32_t t = win[j], c = 0;
        for (int32_t i = first; i < n_win; i++)
            c += win[i] == t;
        float l = in[t];
        l = l <= 0.0f ? l * o->repeat_penalty : l / o->repeat_penalty;
        out[t] = l - ((float)c * o->frequency_penalty + o->presence_penalty);
    }
}

static void check_penalized_same(const pti_sampler_opts *o, const float *l, const int32_t *win,
                                 int32_t n_win, int32_t n)
{
    float *pl = malloc((size_t)n * sizeof *pl);
    int32_t *ia = malloc((size_t)n * sizeof *ia), *ib = malloc((size_t)n * sizeof *ib);
    float *pa = malloc((size_t)n * sizeof *pa), *pb = malloc((size_t)n * sizeof *pb);
    penalize_by_hand(o, win, n_win, l, pl, n);
    pti_sampler_opts off = *o;
    off.repeat_penalty = 1.0f;
    off.frequency_penalty = 0.0f;
    off.presence_penalty = 0.0f;
    pti_sampler *a = pti_sampler_new(o, n), *b = pti_sampler_new(&off, n);
    assert_non_null(a);
    assert_non_null(b);
    for (int32_t j = 0; j < n_win; j++) {
        assert_int_equal(pti_sampler_accept(a, win[j]), PT_OK);
        assert_int_equal(pti_sampler_accept(b, win[j]), PT_OK);
    }
    int32_t ka = pti_sampler_probs(a, l, n, ia, pa, n);
    int32_t kb = pti_sampler_probs(b, pl, n, ib, pb, n);
    assert_int_equal(ka, kb);
    for (int32_t i = 0; i < ka; i++) {
        if (ia[i] != ib[i] || memcmp(&pa[i], &pb[i], sizeof pa[i]) != 0)
            fail_msg("top_k %d rp %g freq %g pres %g window %d: candidate %d is %d (p %.9g), "
                     "expected %d (p %.9g)",
                     (int)o->top_k, (double)o->repeat_penalty, (double)o->frequency_penalty,
                     (double)o->presence_penalty, (int)n_win, (int)i, (int)ia[i], (double)pa[i],
                     (int)ib[i], (double)pb[i]);
    }
    for (int r = 0; r < 20; r++) /* the same seed, the same draws */
        assert_int_equal(pti_sample(a, l, n), pti_sample(b, pl, n));
    pti_sampler_free(a);
    pti_sampler_free(b);
    free(pl);
    free(ia);
    free(ib);
    free(pa);
    free(pb);
}

static void test_penalties_in_place(void **state)
{
    (void)state;
    enum { N = 3001, W = 80 };
    float *l = malloc(N * sizeof *l);
    fill_normal(l, N, 21, 2.0f);
    for (int32_t i = 0; i < N; i += 97) /* ties: equal logits at many ids */
        l[i] = 3.5f;
    l[5] = NAN;
    l[1200] = NAN;
    l[17] = -INFINITY;
    l[2999] = 3.5f;
    int32_t win[W];
    for (int32_t j = 0; j < W; j++) /* tied, NaN, -inf and ordinary tokens; repeats */
        win[j] = j % 7 == 0 ? 97 * (j % 5) : j % 11 == 0 ? 5 : j % 13 == 0 ? 17 : (j * 389) % N;
    const float rp[] = {1.1f, 0.7f, 1.0f, 2.0f};
    const float fp[] = {0.0f, 0.3f, -0.4f, 0.0f};
    const float pp[] = {0.0f, 0.2f, 0.0f, -1.5f};
    const int32_t top_k[] = {40, 1, 5, 200, 0};
    const int32_t n_win[] = {1, 3, 40, W};
    for (size_t a = 0; a < sizeof rp / sizeof *rp; a++)
        for (size_t k = 0; k < sizeof top_k / sizeof *top_k; k++)
            for (size_t w = 0; w < sizeof n_win / sizeof *n_win; w++) {
                pti_sampler_opts o = pti_sampler_default_opts();
                o.seed = 7;
                o.repeat_penalty = rp[a];
                o.frequency_penalty = fp[a];
                o.presence_penalty = pp[a];
                o.top_k = top_k[k];
                o.repeat_last_n = 64;
                check_penalized_same(&o, l, win, n_win[w], N);
                o.top_p = 1.0f; /* the top_k set itself, whole */
                check_penalized_same(&o, l, win, n_win[w], N);
            }
    free(l);
    /* The boundary tie: token 60 of the window penalized from 2.0 to 1.0 is the 4th best
     * until token 10 (raw 1.0, a lower id) comes along in the scan, and it must replace it. */
    float t[64];
    for (int32_t i = 0; i < 64; i++)
        t[i] = i < 3 ? 5.0f : -5.0f;
    t[10] = t[20] = 1.0f;
    t[60] = 2.0f;
    pti_sampler_opts o = pti_sampler_default_opts();
    o.seed = 3;
    o.top_k = 4;
    o.top_p = 1.0f;
    o.repeat_penalty = 2.0f;
    const int32_t w60[] = {60};
    check_penalized_same(&o, t, w60, 1, 64);
    pti_sampler *s = pti_sampler_new(&o, 64);
    pti_sampler_accept(s, 60);
    int32_t ids[4];
    float probs[4];
    assert_int_equal(pti_sampler_probs(s, t, 64, ids, probs, 4), 4);
    assert_int_equal(ids[3], 10);
    pti_sampler_free(s);
}

/* ---- timing --------------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* How much longer the timing bounds are in an AddressSanitizer build (-DPT_SANITIZE=ON). */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZER_SLOWDOWN 4
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZER_SLOWDOWN 4
#endif
#endif
#ifndef SANITIZER_SLOWDOWN
#define SANITIZER_SLOWDOWN 1
#endif

static double time_step(const pti_sampler_opts *o, const float *l, int32_t n, int reps)
{
    pti_sampler *s = pti_sampler_new(o, n);
    for (int i = 0; i < 64; i++)
        pti_sampler_accept(s, (i * 7919) % n);
    double best = 1e9;
    for (int r = 0; r < 3; r++) {
        double t0 = now_s();
        for (int i = 0; i < reps; i++)
            assert_true(pti_sample(s, l, n) >= 0);
        double t = (now_s() - t0) / reps;
        best = t < best ? t : best;
    }
    pti_sampler_free(s);
    return best;
}

static void test_timing(void **state)
{
    (void)state;
    const int32_t n = 262144;
    float *l = malloc((size_t)n * sizeof *l);
    fill_normal(l, n, 11, 3.0f);
    pti_sampler_opts o = pti_sampler_default_opts(); /* top_k 40, top_p 0.9, penalties on */
    o.seed = 1;
    double t_def = time_step(&o, l, n, 50);
    pti_sampler_opts g = o;
    g.temperature = 0.0f;
    double t_greedy = time_step(&g, l, n, 50);
    pti_sampler_opts np = o;
    np.repeat_penalty = 1.0f;
    double t_nopen = time_step(&np, l, n, 50);
    pti_sampler_opts nk = o;
    nk.top_k = 0; /* top_p over the whole vocabulary */
    double t_nok = time_step(&nk, l, n, 10);
    printf("  n_vocab 262144: top_k 40/top_p 0.9/repeat 1.1: %.1f us; without penalties %.1f us;"
           " greedy %.1f us; top_k off/top_p 0.9: %.1f us\n",
           t_def * 1e6, t_nopen * 1e6, t_greedy * 1e6, t_nok * 1e6);
    free(l); /* before the check: a failed assert would leak it (LeakSanitizer reports it) */
    /* The brief's target is well under 1 ms; the bound is loose for a loaded machine. Under
     * AddressSanitizer every load and store of the passes over the 262k candidates is checked
     * (2-3x slower; 7.2 ms measured in the PT_DISABLE_AVX2 twin on a loaded 2-core machine), so
     * there the bound is 4x; an ordinary build keeps 5 ms. */
    assert_true(t_def < 5e-3 * SANITIZER_SLOWDOWN);
}

/* No allocation per step, in every mode: checked when run under tests/steady's malloc counter
 * (LD_PRELOAD=build/lib/libmalloc_counter.so or wherever the build put it), skipped otherwise. */
static void test_no_malloc(void **state)
{
    (void)state;
    unsigned long (*calls)(void) =
        (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "malloc_counter_calls");
    if (!calls)
        skip();
    enum { N = 5000 };
    float *l = malloc(N * sizeof *l);
    fill_normal(l, N, 12, 1.0f);
    pti_sampler_opts o[6];
    for (int i = 0; i < 6; i++)
        o[i] = pti_sampler_default_opts();
    o[1].temperature = 0.0f;
    o[2].top_k = 0;
    o[3].typical_p = 0.7f;
    o[4].min_p = 0.05f;
    o[4].top_k = 0;
    o[5].frequency_penalty = 0.3f;
    o[5].presence_penalty = 0.2f;
    pti_sampler *s[6];
    for (int i = 0; i < 6; i++)
        s[i] = pti_sampler_new(&o[i], N);
    int32_t ids[8];
    float probs[8];
    unsigned long before = calls();
    for (int step = 0; step < 100; step++)
        for (int i = 0; i < 6; i++) {
            int32_t t = pti_sample(s[i], l, N);
            pti_sampler_accept(s[i], t);
            pti_sampler_probs(s[i], l, N, ids, probs, 8);
        }
    unsigned long after = calls();
    for (int i = 0; i < 6; i++)
        pti_sampler_free(s[i]);
    free(l);
    assert_int_equal(after - before, 0);
}

static int group_setup(void **state)
{
    (void)state;
    fx = fx_open("sampler");
    return fx ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    fx_close(fx);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stages, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_greedy, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_seed, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_frequencies, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_edges, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_window, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_penalties_in_place, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_timing, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_no_malloc, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
