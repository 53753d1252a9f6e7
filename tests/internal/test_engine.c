/* The serving engine (src/serve/llm/engine.h): batched greedy generation gives the same text as
 * pt_llm_generate_tokens on a separately loaded model, prompt prefix reuse, the bounded queue
 * (full -> Ollama's busy message), cancelling queued and running requests, on_text stopping a
 * request, prompts longer than the context refused, two engines at once, freeing with
 * requests in flight, a constraint (digits only), embeddings against a token-by-token
 * reference, and the statistics. Uses the committed tiny models, and SmolLM2-135M when
 * $PT_MODELS_DIR has it (`make models`; the test fails without it).
 *
 * PT_ENGINE_BENCH=1 also prints the aggregate decode speed of SmolLM2 with 1 and 4 concurrent
 * greedy requests of 128 tokens. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "serve/llm/engine.h"
#include "serve/llm/llm_gen.h"
#include "serve/llm/llm_model.h"

#define TINY_LLAMA PT_FIXTURES_DIR "/llm/tiny/llama-q8_0.gguf"
#define TINY_QWEN3 PT_FIXTURES_DIR "/llm/tiny/qwen3-q4_k_m.gguf"
#define SMOL_NAME "SmolLM2-135M-Instruct.Q4_1.gguf"
#define WAIT_S 120
#define MAX_EMBD 4096

/* ---- collecting a request's events ------------------------------------------------------------
 */

typedef struct coll {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char text[16384];
    size_t len;
    int n_text, n_done;
    int stop_after; /* > 0: on_text returns false at that call */
    bool gated;     /* on_text blocks until the gate opens */
    bool gate_open;
    pt_status st;
    char msg[512];
    pt_gen_stats stats;
    float emb[MAX_EMBD];
    int32_t n_emb;
} coll;

static void coll_init(coll *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
}

static void coll_destroy(coll *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static bool on_text(void *user, const char *text, size_t len)
{
    coll *c = user;
    pthread_mutex_lock(&c->mu);
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
        c->text[c->len] = '\0';
    }
    c->n_text++;
    pthread_cond_broadcast(&c->cv);
    while (c->gated && !c->gate_open)
        pthread_cond_wait(&c->cv, &c->mu);
    bool go_on = c->stop_after <= 0 || c->n_text < c->stop_after;
    pthread_mutex_unlock(&c->mu);
    return go_on;
}

static void on_done(void *user, pt_status st, const char *msg, const pt_gen_stats *stats,
                    const float *embedding, int32_t n_embd)
{
    coll *c = user;
    pthread_mutex_lock(&c->mu);
    c->n_done++;
    c->st = st;
    snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "");
    c->stats = *stats;
    c->n_emb = embedding && n_embd <= MAX_EMBD ? n_embd : 0;
    if (c->n_emb)
        memcpy(c->emb, embedding, (size_t)n_embd * sizeof *embedding);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Waits until *counter reaches want or the request ended (fails the test after WAIT_S
 * seconds). */
static void wait_count(coll *c, const int *counter, int want)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += WAIT_S;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    while (*counter < want && c->n_done == 0 && rc == 0)
        rc = pthread_cond_timedwait(&c->cv, &c->mu, &dl);
    bool ok = *counter >= want || c->n_done > 0;
    pthread_mutex_unlock(&c->mu);
    assert_true(ok);
}

static void wait_done(coll *c)
{
    wait_count(c, &c->n_done, 1);
}

static void open_gate(coll *c)
{
    pthread_mutex_lock(&c->mu);
    c->gate_open = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static pti_engine_request gen_request(const int32_t *ids, int32_t n, int32_t num_predict, coll *c)
{
    pti_engine_request q = {.ids = ids, .n_ids = n, .gen = pt_gen_opts_default()};
    q.gen.temperature = 0.0f;
    q.gen.num_predict = num_predict;
    q.ev = (pti_engine_events){.on_text = on_text, .on_done = on_done, .user = c};
    return q;
}

/* ---- models and prompts ------------------------------------------------------------------------
 */

/* $PT_MODELS_DIR/SmolLM2 (see pt_test_model_path); the running test fails without it. */
static const char *smol_path(void)
{
    return pt_test_model_path(SMOL_NAME);
}

/* Prompt k of a set: for a real model the tokens of a sentence, else pseudo-random ids. */
static int32_t make_prompt(const pt_llm *llm, int k, int32_t *ids, int32_t cap)
{
    static const char *texts[] = {
        "The capital of France is",
        "Write a short poem about the sea.\nThe waves",
        "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
        "List three colours: red,",
        "Once upon a time, in a land far away, there lived a dragon who",
        "Q: What is 12 times 12?\nA:",
    };
    const pt_llm_info *in = pt_llm_get_info(llm);
    if (in->n_vocab > 1000) {
        const char *t = texts[k % 6];
        int64_t n = pt_llm_tokenize(llm, t, strlen(t), true, false, ids, cap);
        assert_true(n > 0 && n <= cap);
        return (int32_t)n;
    }
    int32_t n = 5 + 7 * k % 29;
    uint32_t x = 12345u + 977u * (uint32_t)k;
    for (int32_t i = 0; i < n && i < cap; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = (int32_t)(x >> 8) % (in->n_vocab - 1) + 1;
    }
    return n;
}

typedef struct ref_out {
    char text[16384];
    size_t len;
    int32_t ids[1024];
    int32_t n_ids;
} ref_out;

static bool ref_cb(int32_t token, const char *text, size_t len, void *user)
{
    ref_out *r = user;
    if (token >= 0 && r->n_ids < 1024)
        r->ids[r->n_ids++] = token;
    if (r->len + len < sizeof r->text) {
        memcpy(r->text + r->len, text, len);
        r->len += len;
        r->text[r->len] = '\0';
    }
    return true;
}

/* What the plain API gives for the same request. */
static void reference(pt_llm *llm, const int32_t *ids, int32_t n, const pt_gen_opts *o,
                      ref_out *out, pt_gen_stats *st)
{
    memset(out, 0, sizeof *out);
    pt_gen_opts go = *o;
    go.stats = st;
    assert_int_equal(pt_llm_generate_tokens(llm, ids, n, &go, ref_cb, out), PT_OK);
}

/* ---- batched greedy == sequential ----------------------------------------------------------- */

/* temperature > 0: sampled with seed 100 + k for prompt k (the default top_k, top_p and
 * repeat penalty), which the engine draws for several slots at once on the thread pool. */
static pti_engine_request batch_request(const int32_t *ids, int32_t n, int32_t num_predict, coll *c,
                                        float temperature, int k)
{
    pti_engine_request q = gen_request(ids, n, num_predict, c);
    if (temperature > 0.0f) {
        q.gen.temperature = temperature;
        q.gen.seed = 100 + k;
    }
    return q;
}

static void check_batched_equals_sequential(const char *path, int32_t num_ctx, int32_t n_batch,
                                            int n_prompts, int32_t num_predict, float temperature)
{
    pti_engine_opts eo = {.n_parallel = 4, .num_ctx = num_ctx, .n_batch = n_batch};
    pti_engine *e = pti_engine_load(path, &eo);
    assert_non_null(e);
    pt_llm *llm = pti_engine_llm(e);
    enum { MAXP = 6 };
    int32_t ids[MAXP][256], n[MAXP];
    coll c[MAXP];
    for (int k = 0; k < n_prompts; k++) {
        n[k] = make_prompt(llm, k, ids[k], 256);
        coll_init(&c[k]);
        pti_engine_request q = batch_request(ids[k], n[k], num_predict, &c[k], temperature, k);
        assert_true(pti_engine_submit(e, &q) > 0);
    }
    for (int k = 0; k < n_prompts; k++)
        wait_done(&c[k]);
    pti_engine_stats es;
    pti_engine_get_stats(e, &es);
    assert_int_equal(es.requests_done, (uint64_t)n_prompts);
    assert_int_equal(es.busy_slots, 0);
    assert_int_equal(es.queued, 0);
    assert_true(es.kv_bytes > 0 && es.steps > 0);
    pti_engine_free(e);

    pt_llm_opts lo = {.num_ctx = num_ctx};
    pt_llm *ref = pt_llm_load(path, &lo);
    assert_non_null(ref);
    uint64_t gen_total = 0;
    for (int k = 0; k < n_prompts; k++) {
        pt_gen_opts o = batch_request(ids[k], n[k], num_predict, &c[k], temperature, k).gen;
        ref_out r;
        pt_gen_stats rs;
        reference(ref, ids[k], n[k], &o, &r, &rs);
        assert_int_equal(c[k].n_done, 1);
        assert_int_equal(c[k].st, PT_OK);
        assert_string_equal(c[k].text, r.text);
        assert_int_equal(c[k].stats.gen_tokens, rs.gen_tokens);
        assert_string_equal(c[k].stats.done_reason, rs.done_reason);
        assert_int_equal(c[k].stats.prompt_tokens, n[k]);
        assert_true(c[k].stats.prompt_ns > 0);
        gen_total += (uint64_t)c[k].stats.gen_tokens;
        coll_destroy(&c[k]);
    }
    assert_int_equal(es.gen_tokens, gen_total);
    pt_llm_free(ref);
}

static void test_batched_equals_sequential_tiny(void **state)
{
    (void)state;
    /* n_batch 16: the longer prompts are read over several steps while others decode */
    check_batched_equals_sequential(TINY_LLAMA, 256, 16, 6, 24, 0.0f);
    check_batched_equals_sequential(TINY_QWEN3, 256, 512, 5, 24, 0.0f);
    check_batched_equals_sequential(PT_FIXTURES_DIR "/llm/tiny/gemma3-q6_k.gguf", 256, 16, 5, 24,
                                    0.0f);
    check_batched_equals_sequential(PT_FIXTURES_DIR "/llm/tiny/phi3-q4_k_m.gguf", 256, 16, 5, 24,
                                    0.0f);
}

/* Seeded sampling in a batch draws what each request draws alone. */
static void test_batched_sampled_equals_sequential_tiny(void **state)
{
    (void)state;
    check_batched_equals_sequential(TINY_LLAMA, 256, 16, 6, 24, 0.9f);
    check_batched_equals_sequential(PT_FIXTURES_DIR "/llm/tiny/gemma3-q6_k.gguf", 256, 512, 5, 24,
                                    1.2f);
}

/* A long prompt is read in n_batch chunks over several steps while another request keeps
 * decoding one token per step: the steps of both together are about those of the longer. */
static void test_prompt_chunks_interleave(void **state)
{
    (void)state;
    pti_engine *e = pti_engine_load(
        TINY_QWEN3, &(pti_engine_opts){.n_parallel = 2, .num_ctx = 256, .n_batch = 8});
    assert_non_null(e);
    int32_t pa[256], na = make_prompt(pti_engine_llm(e), 1, pa, 256), pb[100];
    for (int i = 0; i < 100; i++)
        pb[i] = pa[i % na];
    coll a, b;
    coll_init(&a);
    coll_init(&b);
    pti_engine_request q = gen_request(pa, na, 40, &a);
    q.gen.stop_tokens = (int32_t[]){-5};
    q.gen.n_stop_tokens = 1;
    assert_true(pti_engine_submit(e, &q) > 0);
    q = gen_request(pb, 100, 1, &b);
    assert_true(pti_engine_submit(e, &q) > 0);
    wait_done(&a);
    wait_done(&b);
    pti_engine_stats es;
    pti_engine_get_stats(e, &es);
    assert_int_equal(b.stats.prompt_evaluated, 100);
    if (a.stats.gen_tokens == 40) { /* a did not end early on an end-of-generation token */
        /* a: 40 steps; b alone: 100 / 7 > 14 more if its chunks had waited */
        assert_true(es.steps <= 46);
        assert_true(es.steps >= 40);
    }
    pti_engine_free(e);
    pt_llm *ref = pt_llm_load(TINY_QWEN3, &(pt_llm_opts){.num_ctx = 256});
    assert_non_null(ref);
    ref_out r;
    pt_gen_stats rs;
    reference(ref, pb, 100, &q.gen, &r, &rs);
    assert_string_equal(b.text, r.text);
    q = gen_request(pa, na, 40, &a);
    q.gen.stop_tokens = (int32_t[]){-5};
    q.gen.n_stop_tokens = 1;
    reference(ref, pa, na, &q.gen, &r, &rs);
    assert_string_equal(a.text, r.text);
    pt_llm_free(ref);
    coll_destroy(&a);
    coll_destroy(&b);
}

static void test_batched_equals_sequential_smol(void **state)
{
    (void)state;
    const char *path = smol_path();
    check_batched_equals_sequential(path, 512, 8, 6, 24, 0.0f);
    check_batched_equals_sequential(path, 512, 512, 4, 24, 0.8f);
}

/* ---- prefix reuse ------------------------------------------------------------------------------
 */

static void test_prefix_reuse(void **state)
{
    (void)state;
    pti_engine_opts eo = {.n_parallel = 2, .num_ctx = 256};
    pti_engine *e = pti_engine_load(TINY_LLAMA, &eo);
    assert_non_null(e);
    int32_t p1[256], n1 = make_prompt(pti_engine_llm(e), 3, p1, 256);
    coll a;
    coll_init(&a);
    pti_engine_request q = gen_request(p1, n1, 10, &a);
    assert_true(pti_engine_submit(e, &q) > 0);
    wait_done(&a);
    assert_int_equal(a.stats.prompt_evaluated, n1);

    /* the answer's ids from the plain API (the same text, checked above) */
    pt_llm_opts lo = {.num_ctx = 256};
    pt_llm *ref = pt_llm_load(TINY_LLAMA, &lo);
    assert_non_null(ref);
    ref_out r;
    pt_gen_stats rs;
    reference(ref, p1, n1, &q.gen, &r, &rs);
    assert_string_equal(a.text, r.text);
    assert_string_equal(rs.done_reason, "length");
    int32_t p2[256], n2 = 0;
    memcpy(p2, p1, (size_t)n1 * sizeof *p1);
    memcpy(p2 + n1, r.ids, (size_t)r.n_ids * sizeof *p1);
    n2 = n1 + r.n_ids;
    for (int i = 0; i < 5; i++)
        p2[n2++] = 100 + i;
    coll b;
    coll_init(&b);
    q = gen_request(p2, n2, 10, &b);
    assert_true(pti_engine_submit(e, &q) > 0);
    wait_done(&b);
    /* the cache holds the prompt and all generated tokens but the last (never evaluated) */
    assert_int_equal(b.stats.prompt_tokens, n2);
    assert_int_equal(b.stats.prompt_evaluated, n2 - (n1 + r.n_ids - 1));
    reference(ref, p2, n2, &q.gen, &r, &rs);
    assert_string_equal(b.text, r.text);

    /* the same prompt again: everything cached but the last token */
    coll c;
    coll_init(&c);
    q = gen_request(p2, n2, 10, &c);
    assert_true(pti_engine_submit(e, &q) > 0);
    wait_done(&c);
    assert_int_equal(c.stats.prompt_evaluated, 1);
    assert_string_equal(c.text, b.text);
    pti_engine_free(e);
    pt_llm_free(ref);
    coll_destroy(&a);
    coll_destroy(&b);
    coll_destroy(&c);
}

/* ---- stop strings ------------------------------------------------------------------------------
 */

/* A stop string taken from the middle of the unstopped output, and the chat family's extra
 * stop strings, end generation as pti_llm_generate_ids ends it (the text before it). */
static void test_stop_strings(void **state)
{
    (void)state;
    const char *path = smol_path();
    pti_engine *e = pti_engine_load(path, &(pti_engine_opts){.n_parallel = 2, .num_ctx = 256});
    assert_non_null(e);
    pt_llm *ref = pt_llm_load(path, &(pt_llm_opts){.num_ctx = 256});
    assert_non_null(ref);
    int checked = 0;
    for (int k = 0; k < 3; k++) {
        int32_t ids[256], n = make_prompt(pti_engine_llm(e), k, ids, 256);
        coll c;
        coll_init(&c);
        pti_engine_request q = gen_request(ids, n, 30, &c);
        ref_out r;
        pt_gen_stats rs;
        reference(ref, ids, n, &q.gen, &r, &rs);
        if (r.len < 12) {
            coll_destroy(&c);
            continue;
        }
        char stop[4] = {r.text[8], r.text[9], r.text[10], '\0'};
        const char *stops[] = {stop}, *extra[] = {"never-in-the-output-7q"};
        q.gen.stop = stops;
        q.gen.n_stop = 1;
        q.extra_stop = extra;
        q.n_extra_stop = 1;
        assert_true(pti_engine_submit(e, &q) > 0);
        wait_done(&c);
        memset(&r, 0, sizeof r);
        pt_gen_opts go = q.gen;
        go.stats = &rs;
        assert_int_equal(pti_llm_generate_ids(ref, ids, n, &go, extra, 1, ref_cb, &r), PT_OK);
        assert_string_equal(c.text, r.text);
        assert_string_equal(c.stats.done_reason, "stop");
        assert_string_equal(rs.done_reason, "stop");
        assert_true(c.len <= 8);
        checked++;
        coll_destroy(&c);
    }
    assert_true(checked > 0);
    pti_engine_free(e);
    pt_llm_free(ref);
}

/* ---- the queue, cancelling ---------------------------------------------------------------------
 */

static void test_queue_full_and_cancel(void **state)
{
    (void)state;
    pti_engine_opts eo = {.n_parallel = 1, .num_ctx = 256, .max_queue = 2};
    pti_engine *e = pti_engine_load(TINY_LLAMA, &eo);
    assert_non_null(e);
    int32_t ids[256], n = make_prompt(pti_engine_llm(e), 1, ids, 256);
    coll a, b, c, d, f;
    coll_init(&a);
    coll_init(&b);
    coll_init(&c);
    coll_init(&d);
    coll_init(&f);
    a.gated = true; /* a holds the only slot while we fill the queue */
    pti_engine_request q = gen_request(ids, n, -1, &a);
    uint64_t ida = pti_engine_submit(e, &q);
    assert_true(ida > 0);
    wait_count(&a, &a.n_text, 1);
    q = gen_request(ids, n, 4, &b);
    uint64_t idb = pti_engine_submit(e, &q);
    q = gen_request(ids, n, 4, &c);
    uint64_t idc = pti_engine_submit(e, &q);
    assert_true(idb > 0 && idc > 0 && idb != idc);
    pti_engine_stats es;
    pti_engine_get_stats(e, &es);
    assert_int_equal(es.busy_slots, 1);
    assert_int_equal(es.queued, 2);
    q = gen_request(ids, n, 4, &d);
    assert_int_equal(pti_engine_submit(e, &q), 0);
    assert_int_equal(pt_last_status(), PT_ERR_RUNTIME);
    assert_string_equal(pt_last_error(),
                        "server busy, please try again.  maximum pending requests exceeded");
    assert_true(pti_engine_queue_full_error());
    q = gen_request(ids, 0, 4, &d); /* another kind of failure clears the flag */
    assert_int_equal(pti_engine_submit(e, &q), 0);
    assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
    assert_false(pti_engine_queue_full_error());

    pti_engine_cancel(e, idb);      /* queued: removed */
    pti_engine_cancel(e, 999999);   /* unknown: ignored */
    q = gen_request(ids, n, 4, &f); /* b's place in the queue is free again */
    uint64_t idf = pti_engine_submit(e, &q);
    assert_true(idf > 0);
    pti_engine_cancel(e, ida); /* running: ended before its next step */
    open_gate(&a);
    wait_done(&a);
    wait_done(&b);
    wait_done(&c);
    wait_done(&f);
    assert_string_equal(a.stats.done_reason, "cancel");
    assert_string_equal(b.stats.done_reason, "cancel");
    assert_int_equal(b.n_text, 0);
    assert_int_equal(b.stats.gen_tokens, 0);
    /* the slot was reused: c and f ran to their end */
    assert_string_equal(c.stats.done_reason, "length");
    assert_int_equal(c.stats.gen_tokens, 4);
    assert_string_equal(f.stats.done_reason, "length");
    assert_string_equal(f.text, c.text);
    assert_int_equal(d.n_done, 0);
    pti_engine_cancel(e, idc); /* finished: ignored */
    pti_engine_free(e);
    assert_int_equal(a.n_done + b.n_done + c.n_done + f.n_done, 4);
    coll_destroy(&a);
    coll_destroy(&b);
    coll_destroy(&c);
    coll_destroy(&d);
    coll_destroy(&f);
}

static void test_on_text_false_cancels(void **state)
{
    (void)state;
    pti_engine *e = pti_engine_load(TINY_LLAMA, &(pti_engine_opts){.num_ctx = 256});
    assert_non_null(e);
    int32_t ids[256], n = make_prompt(pti_engine_llm(e), 2, ids, 256);
    coll a;
    coll_init(&a);
    a.stop_after = 3;
    pti_engine_request q = gen_request(ids, n, 100, &a);
    q.gen.stop_tokens = (int32_t[]){-5}; /* an id that never comes (copied, not checked) */
    q.gen.n_stop_tokens = 1;
    assert_true(pti_engine_submit(e, &q) > 0);
    wait_done(&a);
    if (a.n_text == 3) { /* the model did not stop on its own first */
        assert_string_equal(a.stats.done_reason, "cancel");
        assert_true(a.stats.gen_tokens >= 3 && a.stats.gen_tokens < 100);
    }
    assert_int_equal(a.st, PT_OK);
    pti_engine_free(e);
    coll_destroy(&a);
}

static void test_bad_requests(void **state)
{
    (void)state;
    assert_pt_error(pti_engine_load(TINY_LLAMA, &(pti_engine_opts){.n_parallel = 8, .n_batch = 4}),
                    PT_ERR_INVALID_ARG, "n_batch");
    assert_pt_error(pti_engine_load(TINY_LLAMA, &(pti_engine_opts){.num_ctx = -1}),
                    PT_ERR_INVALID_ARG, "negative");
    assert_pt_error(pti_engine_load("/nonexistent/model.gguf", NULL), PT_ERR_IO, "");
    pti_engine *e = pti_engine_load(TINY_LLAMA, &(pti_engine_opts){.num_ctx = 64});
    assert_non_null(e);
    assert_int_equal(pti_engine_get_opts(e)->num_ctx, 64);
    assert_int_equal(pti_engine_get_opts(e)->n_parallel, 4);
    int32_t ids[65];
    for (int i = 0; i < 65; i++)
        ids[i] = 10 + i;
    coll a;
    coll_init(&a);
    pti_engine_request q = gen_request(ids, 65, 4, &a);
    assert_int_equal(pti_engine_submit(e, &q), 0);
    assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
    assert_non_null(strstr(pt_last_error(), "more than the context of 64"));
    pt_clear_error();
    ids[3] = 1 << 30;
    q = gen_request(ids, 10, 4, &a);
    assert_int_equal(pti_engine_submit(e, &q), 0);
    assert_non_null(strstr(pt_last_error(), "outside the vocabulary"));
    ids[3] = 13;
    q = gen_request(ids, 10, 4, &a);
    q.gen.repeat_penalty = NAN;
    assert_int_equal(pti_engine_submit(e, &q), 0);
    assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
    pt_clear_error();
    /* the context fills up: "length" exactly at num_ctx */
    q = gen_request(ids, 60, -1, &a);
    q.gen.stop_tokens = (int32_t[]){-5};
    q.gen.n_stop_tokens = 1;
    assert_true(pti_engine_submit(e, &q) > 0);
    wait_done(&a);
    if (strcmp(a.stats.done_reason, "length") == 0)
        assert_int_equal(a.stats.gen_tokens, 64 - 60 + 1);
    assert_int_equal(a.n_done, 1);
    pti_engine_free(e);
    coll_destroy(&a);
}

/* ---- several engines, freeing in flight --------------------------------------------------------
 */

static void test_two_engines_at_once(void **state)
{
    (void)state;
    const char *paths[2] = {TINY_LLAMA, TINY_QWEN3};
    pti_engine *e[2];
    coll c[2][3];
    int32_t ids[2][3][256], n[2][3];
    for (int m = 0; m < 2; m++) {
        e[m] = pti_engine_load(paths[m], &(pti_engine_opts){.n_parallel = 2, .num_ctx = 256});
        assert_non_null(e[m]);
    }
    for (int k = 0; k < 3; k++)
        for (int m = 0; m < 2; m++) {
            n[m][k] = make_prompt(pti_engine_llm(e[m]), k + 2, ids[m][k], 256);
            coll_init(&c[m][k]);
            pti_engine_request q = gen_request(ids[m][k], n[m][k], 30, &c[m][k]);
            assert_true(pti_engine_submit(e[m], &q) > 0);
        }
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 3; k++)
            wait_done(&c[m][k]);
    for (int m = 0; m < 2; m++) {
        pti_engine_free(e[m]);
        pt_llm *ref = pt_llm_load(paths[m], &(pt_llm_opts){.num_ctx = 256});
        assert_non_null(ref);
        for (int k = 0; k < 3; k++) {
            ref_out r;
            pt_gen_stats rs;
            pt_gen_opts o = gen_request(ids[m][k], n[m][k], 30, &c[m][k]).gen;
            reference(ref, ids[m][k], n[m][k], &o, &r, &rs);
            assert_string_equal(c[m][k].text, r.text);
            assert_int_equal(c[m][k].n_done, 1);
            coll_destroy(&c[m][k]);
        }
        pt_llm_free(ref);
    }
}

static void test_free_in_flight(void **state)
{
    (void)state;
    pti_engine *e =
        pti_engine_load(TINY_QWEN3, &(pti_engine_opts){.n_parallel = 2, .num_ctx = 256});
    assert_non_null(e);
    enum { N = 6 };
    coll c[N];
    int32_t ids[N][256];
    for (int k = 0; k < N; k++) {
        coll_init(&c[k]);
        int32_t n = make_prompt(pti_engine_llm(e), k, ids[k], 256);
        pti_engine_request q = gen_request(ids[k], n, -1, &c[k]);
        q.gen.stop_tokens = (int32_t[]){-5};
        q.gen.n_stop_tokens = 1;
        assert_true(pti_engine_submit(e, &q) > 0);
    }
    wait_count(&c[0], &c[0].n_text, 2);
    pti_engine_free(e);
    int cancelled = 0;
    for (int k = 0; k < N; k++) {
        assert_int_equal(c[k].n_done, 1);
        cancelled += strcmp(c[k].stats.done_reason, "cancel") == 0;
        coll_destroy(&c[k]);
    }
    assert_true(cancelled >= N - 2); /* at most the two running ones could have ended */
}

/* ---- constraint --------------------------------------------------------------------------------
 */

typedef struct digits {
    int count;
} digits;

static int digit_frees;

static bool digits_allows(const void *st, const char *b, size_t n)
{
    const digits *d = st;
    if (n == 0 || d->count + (int)n > 5)
        return false;
    for (size_t i = 0; i < n; i++)
        if (b[i] < '0' || b[i] > '9')
            return false;
    return true;
}

static void digits_advance(void *st, const char *b, size_t n)
{
    (void)b;
    ((digits *)st)->count += (int)n;
}

static bool digits_complete(const void *st)
{
    return ((const digits *)st)->count == 5;
}
static bool digits_done(const void *st)
{
    return ((const digits *)st)->count == 5;
}

static void digits_free(void *st)
{
    digit_frees++;
    free(st);
}

static pti_constraint digits_constraint(void)
{
    return (pti_constraint){.allows = digits_allows,
                            .advance = digits_advance,
                            .complete = digits_complete,
                            .done = digits_done,
                            .free = digits_free,
                            .state = calloc(1, sizeof(digits))};
}

static void check_digits(const char *path, int32_t num_ctx, float temperature)
{
    pti_engine *e = pti_engine_load(path, &(pti_engine_opts){.n_parallel = 2, .num_ctx = num_ctx});
    assert_non_null(e);
    int32_t ids[256], n = make_prompt(pti_engine_llm(e), 0, ids, 256);
    coll a, b;
    coll_init(&a);
    coll_init(&b);
    digit_frees = 0;
    pti_engine_request q = gen_request(ids, n, 50, &a);
    q.gen.temperature = temperature;
    q.gen.seed = 7;
    q.constraint = digits_constraint();
    assert_true(pti_engine_submit(e, &q) > 0);
    q = gen_request(ids, n, 8, &b); /* unconstrained, alongside */
    assert_true(pti_engine_submit(e, &q) > 0);
    wait_done(&a);
    wait_done(&b);
    assert_int_equal(a.st, PT_OK);
    assert_string_equal(a.stats.done_reason, "stop");
    assert_int_equal(strlen(a.text), 5);
    for (int i = 0; i < 5; i++)
        assert_true(a.text[i] >= '0' && a.text[i] <= '9');
    assert_int_equal(b.stats.gen_tokens, 8);
    /* a refused submission frees the constraint too */
    q = gen_request(ids, 0, 4, &b);
    q.constraint = digits_constraint();
    assert_int_equal(pti_engine_submit(e, &q), 0);
    pti_engine_free(e);
    assert_int_equal(digit_frees, 2);
    coll_destroy(&a);
    coll_destroy(&b);
}

static bool refuse_all(const void *st, const char *b, size_t n)
{
    (void)st;
    (void)b;
    (void)n;
    return false;
}

static bool never(const void *st)
{
    (void)st;
    return false;
}

/* A constraint that allows nothing ends its own request with an error, not its neighbour. */
static void check_constraint_error(void)
{
    pti_engine *e =
        pti_engine_load(TINY_LLAMA, &(pti_engine_opts){.n_parallel = 2, .num_ctx = 256});
    assert_non_null(e);
    int32_t ids[256], n = make_prompt(pti_engine_llm(e), 2, ids, 256);
    coll a, b;
    coll_init(&a);
    coll_init(&b);
    digit_frees = 0;
    pti_engine_request q = gen_request(ids, n, 10, &b);
    assert_true(pti_engine_submit(e, &q) > 0);
    q = gen_request(ids, n, 10, &a);
    q.constraint = digits_constraint();
    q.constraint.allows = refuse_all;
    q.constraint.complete = never;
    assert_true(pti_engine_submit(e, &q) > 0);
    wait_done(&a);
    wait_done(&b);
    assert_int_equal(a.st, PT_ERR_RUNTIME);
    assert_non_null(strstr(a.msg, "allows no token"));
    assert_null(a.stats.done_reason);
    assert_int_equal(a.n_text, 0);
    assert_int_equal(b.st, PT_OK);
    assert_int_equal(b.stats.gen_tokens, 10);
    pti_engine_free(e);
    assert_int_equal(digit_frees, 1);
    coll_destroy(&a);
    coll_destroy(&b);
}

static void test_constraint_digits(void **state)
{
    (void)state;
    check_constraint_error();
    check_digits(TINY_LLAMA, 256, 0.0f);
    check_digits(TINY_LLAMA, 256, 0.9f);
    const char *path = smol_path();
    if (path)
        check_digits(path, 512, 0.0f);
}

/* ---- embeddings --------------------------------------------------------------------------------
 */

static void embed_request(pti_engine *e, const int32_t *ids, int32_t n, coll *c)
{
    coll_init(c);
    pti_engine_request q = {.ids = ids,
                            .n_ids = n,
                            .embed = true,
                            .ev = {.on_text = on_text, .on_done = on_done, .user = c}};
    assert_true(pti_engine_submit(e, &q) > 0);
}

/* The normalised mean of the final hidden states, one token per forward pass. */
static void slow_embedding(const char *path, const int32_t *ids, int32_t n, float *out,
                           int32_t n_embd)
{
    pt_llm *llm = pti_llm_load_slots(path, &(pt_llm_opts){.num_ctx = 256}, 1);
    assert_non_null(llm);
    double sum[MAX_EMBD] = {0};
    for (int32_t t = 0; t < n; t++) {
        pti_llm_run run = {.slot = 0, .pos0 = t, .t0 = 0, .n = 1, .want_hidden = true};
        pt_tensor *logits, *hidden;
        assert_int_equal(pti_llm_forward_ex(pti_llm_model_of(llm), pti_llm_cache_of(llm), ids + t,
                                            1, &run, 1, &logits, &hidden),
                         PT_OK);
        assert_shape(hidden, 1, n_embd);
        const float *h = pt_data_ptr(hidden);
        for (int32_t i = 0; i < n_embd; i++)
            sum[i] += h[i];
        pt_release(logits);
        pt_release(hidden);
    }
    double norm = 0;
    for (int32_t i = 0; i < n_embd; i++)
        norm += (sum[i] / n) * (sum[i] / n);
    norm = sqrt(norm);
    for (int32_t i = 0; i < n_embd; i++)
        out[i] = (float)(sum[i] / n / norm);
    pt_llm_free(llm);
}

static void check_embeddings(const char *path)
{
    /* n_batch 8: prompts are read in chunks, next to a generating request */
    pti_engine *e =
        pti_engine_load(path, &(pti_engine_opts){.n_parallel = 3, .num_ctx = 256, .n_batch = 8});
    assert_non_null(e);
    int32_t n_embd = pt_llm_get_info(pti_engine_llm(e))->n_embd;
    assert_true(n_embd <= MAX_EMBD);
    int32_t p1[256], p2[256];
    int32_t n1 = make_prompt(pti_engine_llm(e), 4, p1, 256);
    int32_t n2 = make_prompt(pti_engine_llm(e), 5, p2, 256);
    coll a, b, c, g;
    coll_init(&g);
    pti_engine_request q = gen_request(p2, n2, 20, &g);
    assert_true(pti_engine_submit(e, &q) > 0);
    embed_request(e, p1, n1, &a);
    embed_request(e, p1, n1, &b);
    embed_request(e, p2, n2, &c);
    wait_done(&a);
    wait_done(&b);
    wait_done(&c);
    wait_done(&g);
    assert_int_equal(a.st, PT_OK);
    assert_int_equal(a.n_emb, n_embd);
    assert_int_equal(a.stats.prompt_tokens, n1);
    assert_int_equal(a.stats.prompt_evaluated, n1);
    assert_int_equal(a.n_text, 0);
    double norm = 0, diff = 0;
    for (int32_t i = 0; i < n_embd; i++) {
        norm += (double)a.emb[i] * a.emb[i];
        diff += fabs((double)a.emb[i] - c.emb[i]);
    }
    assert_true(fabs(norm - 1.0) < 1e-5);
    assert_memory_equal(a.emb, b.emb, (size_t)n_embd * sizeof(float));
    assert_true(diff > 1e-3);
    static float slow[MAX_EMBD];
    slow_embedding(path, p1, n1, slow, n_embd);
    for (int32_t i = 0; i < n_embd; i++)
        assert_float_equal(a.emb[i], slow[i], 1e-4);
    pti_engine_free(e);
    coll_destroy(&a);
    coll_destroy(&b);
    coll_destroy(&c);
    coll_destroy(&g);
}

static void test_embeddings(void **state)
{
    (void)state;
    check_embeddings(TINY_LLAMA);
    check_embeddings(PT_FIXTURES_DIR "/llm/tiny/gemma3-q4_k_m.gguf");
    const char *path = smol_path();
    if (path)
        check_embeddings(path);
}

/* ---- optional: decode speed --------------------------------------------------------------------
 */

static double run_concurrent(pti_engine *e, int n_req, int32_t num_predict)
{
    coll c[8];
    int32_t ids[8][256];
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (int k = 0; k < n_req; k++) {
        coll_init(&c[k]);
        int32_t n = make_prompt(pti_engine_llm(e), k, ids[k], 256);
        pti_engine_request q = gen_request(ids[k], n, num_predict, &c[k]);
        q.gen.stop_tokens = (int32_t[]){-5};
        q.gen.n_stop_tokens = 1;
        assert_true(pti_engine_submit(e, &q) > 0);
    }
    int64_t gen = 0, gen_ns = 0;
    for (int k = 0; k < n_req; k++) {
        wait_done(&c[k]);
        gen += c[k].stats.gen_tokens;
        gen_ns = c[k].stats.gen_ns > gen_ns ? c[k].stats.gen_ns : gen_ns;
        coll_destroy(&c[k]);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    printf("engine bench: %d concurrent x %d tokens: %lld generated in %.2f s wall = %.1f "
           "tokens/s aggregate (%.1f tokens/s over the longest gen_ns; %.1f tokens per CPU "
           "second)\n",
           n_req, (int)num_predict, (long long)gen, wall, (double)gen / wall,
           (double)gen / (1e-9 * (double)gen_ns), (double)gen / cpu);
    return (double)gen / wall;
}

static void test_bench(void **state)
{
    (void)state;
    const char *path = smol_path();
    if (!getenv("PT_ENGINE_BENCH") || !path)
        skip();
    pti_engine *e = pti_engine_load(path, &(pti_engine_opts){.n_parallel = 4, .num_ctx = 512});
    assert_non_null(e);
    run_concurrent(e, 1, 16); /* warm-up */
    run_concurrent(e, 1, 128);
    run_concurrent(e, 4, 128);
    pti_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_requests, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batched_equals_sequential_tiny, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batched_sampled_equals_sequential_tiny, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batched_equals_sequential_smol, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_prompt_chunks_interleave, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_prefix_reuse, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_stop_strings, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_queue_full_and_cancel, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_on_text_false_cancels, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_two_engines_at_once, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_free_in_flight, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_constraint_digits, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_embeddings, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bench, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
