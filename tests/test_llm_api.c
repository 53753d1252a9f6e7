/* The LLM API's behaviour on the committed tiny GGUF models (tests/fixtures/llm/tiny): model
 * info from the metadata, streaming and statistics, stop strings and stop tokens, seeds,
 * prefix reuse of the KV cache, chat rendering, tokenize/detokenize round trips, and the
 * errors for bad arguments and prompts that do not fit. Agreement of the numbers with
 * llama.cpp is test_llm_models' job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/testutil.h"

#define TINY PT_FIXTURES_DIR "/llm/tiny/"

typedef struct collected {
    char text[8192];
    size_t len;
    int calls, tokens;
    int stop_after; /* > 0: the callback returns false at this call */
} collected;

static bool collect(int32_t token, const char *text, size_t len, void *user)
{
    collected *c = user;
    c->calls++;
    c->tokens += token >= 0;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
        c->text[c->len] = '\0';
    }
    return c->stop_after <= 0 || c->calls < c->stop_after;
}

static pt_llm *load(const char *file, int32_t num_ctx)
{
    pt_llm_opts o = {.num_ctx = num_ctx};
    pt_llm *llm = pt_llm_load(file, &o);
    if (!llm)
        fail_msg("pt_llm_load(%s): %s", file, pt_last_error());
    return llm;
}

static pt_gen_opts greedy(int32_t n)
{
    pt_gen_opts o = pt_gen_opts_default();
    o.temperature = 0;
    o.repeat_penalty = 1;
    o.num_predict = n;
    return o;
}

static void test_info(void **state)
{
    (void)state;
    pt_llm *llm = load(TINY "gemma3-q4_k_m.gguf", 0);
    const pt_llm_info *in = pt_llm_get_info(llm);
    assert_string_equal(in->architecture, "gemma3");
    assert_string_equal(in->quantization, "Q4_K_M");
    assert_string_equal(in->chat_template, "gemma");
    assert_int_equal(in->n_embd, 256);
    assert_int_equal(in->n_layer, 2);
    assert_int_equal(in->n_head, 4);
    assert_int_equal(in->n_head_kv, 2);
    assert_int_equal(in->context_length, 256);
    assert_int_equal(in->num_ctx, 256); /* 4096 asked by default, capped at the model's */
    assert_true(in->n_params > 256 * 256 && in->file_size > 100000);
    pt_llm_free(llm);
}

/* Greedy generation streams each token once, the stats add up, and the same prompt twice
 * gives the same text (the second time from the cache). */
static void test_generate_and_cache(void **state)
{
    (void)state;
    pt_llm *llm = load(TINY "llama-q8_0.gguf", 128);
    int32_t ids[6] = {1, 30, 40, 50, 60, 70};
    pt_gen_stats st;
    pt_gen_opts o = greedy(20);
    o.stats = &st;
    o.stop_tokens = (const int32_t[]){-5}; /* never produced */
    o.n_stop_tokens = 1;
    collected a = {0}, b = {0};
    assert_int_equal(pt_llm_generate_tokens(llm, ids, 6, &o, collect, &a), PT_OK);
    assert_int_equal(st.prompt_tokens, 6);
    assert_int_equal(st.prompt_evaluated, 6);
    assert_true(st.gen_tokens >= 1 && st.gen_tokens <= 20);
    assert_int_equal(a.tokens, st.gen_tokens - (strcmp(st.done_reason, "stop") == 0));
    assert_true(strcmp(st.done_reason, "length") == 0 || strcmp(st.done_reason, "stop") == 0);
    assert_int_equal(pt_llm_generate_tokens(llm, ids, 6, &o, collect, &b), PT_OK);
    assert_int_equal(st.prompt_evaluated, 1); /* only the last position, for its logits */
    assert_string_equal(a.text, b.text);
    pt_llm_free(llm);
}

/* A stop string cuts the output just before it and is never streamed, even split over tokens. */
static void test_stop_strings(void **state)
{
    (void)state;
    pt_llm *llm = load(TINY "llama-q8_0.gguf", 128);
    int32_t ids[3] = {1, 100, 200};
    collected full = {0};
    pt_gen_opts o = greedy(40);
    assert_int_equal(pt_llm_generate_tokens(llm, ids, 3, &o, collect, &full), PT_OK);
    assert_true(full.len >= 6);
    char stop[4];
    memcpy(stop, full.text + full.len / 2, 3); /* three bytes from the middle */
    stop[3] = '\0';
    const char *first = strstr(full.text, stop);
    assert_non_null(first);
    collected cut = {0};
    pt_gen_stats st;
    const char *stops[] = {"never-appears-here", stop};
    o.stop = stops;
    o.n_stop = 2;
    o.stats = &st;
    assert_int_equal(pt_llm_generate_tokens(llm, ids, 3, &o, collect, &cut), PT_OK);
    assert_string_equal(st.done_reason, "stop");
    assert_int_equal(cut.len, (size_t)(first - full.text));
    assert_memory_equal(cut.text, full.text, cut.len);
    pt_llm_free(llm);
}

/* Sampling: the same seed gives the same text; the callback can cancel. */
static void test_seed_and_cancel(void **state)
{
    (void)state;
    pt_llm *llm = load(TINY "qwen2-q8_0.gguf", 128);
    int32_t ids[4] = {10, 20, 30, 40};
    pt_gen_opts o = pt_gen_opts_default();
    o.num_predict = 24;
    o.temperature = 1.5f;
    o.top_k = 0;
    o.top_p = 1;
    o.seed = 1234;
    collected a = {0}, b = {0}, c = {.stop_after = 3};
    assert_int_equal(pt_llm_generate_tokens(llm, ids, 4, &o, collect, &a), PT_OK);
    assert_int_equal(pt_llm_generate_tokens(llm, ids, 4, &o, collect, &b), PT_OK);
    assert_string_equal(a.text, b.text);
    pt_gen_stats st;
    o.stats = &st;
    assert_int_equal(pt_llm_generate_tokens(llm, ids, 4, &o, collect, &c), PT_OK);
    assert_string_equal(st.done_reason, "cancel");
    assert_int_equal(c.calls, 3);
    pt_llm_free(llm);
}

/* Chat: the template of the family is applied; a second turn reuses the first's cache. */
static void test_chat(void **state)
{
    (void)state;
    pt_llm *llm = load(TINY "qwen3-q8_0.gguf", 256);
    pt_chat_msg turn1[] = {{"system", "Be brief."}, {"user", "hi"}};
    char *prompt = pt_llm_chat_prompt(llm, turn1, 2);
    assert_non_null(prompt);
    assert_non_null(strstr(prompt, "<|im_start|>system\nBe brief.<|im_end|>\n"));
    assert_non_null(strstr(prompt, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"));
    free(prompt);
    pt_gen_stats st;
    pt_gen_opts o = greedy(8);
    o.stats = &st;
    collected a = {0};
    assert_int_equal(pt_llm_chat(llm, turn1, 2, &o, collect, &a), PT_OK);
    int32_t first_prompt = st.prompt_tokens;
    pt_chat_msg turn2[] = {
        {"system", "Be brief."}, {"user", "hi"}, {"assistant", a.text}, {"user", "again"}};
    collected b = {0};
    assert_int_equal(pt_llm_chat(llm, turn2, 4, &o, collect, &b), PT_OK);
    assert_true(st.prompt_tokens > first_prompt);
    assert_true(st.prompt_evaluated < st.prompt_tokens - first_prompt + 4);
    pt_llm_free(llm);
}

static void test_tokenize_roundtrip(void **state)
{
    (void)state;
    pt_llm *llm = load(TINY "phi3-q8_0.gguf", 64);
    const char *text = "hello world, привет";
    int32_t ids[256];
    int64_t n = pt_llm_tokenize(llm, text, strlen(text), false, false, ids, 256);
    assert_true(n > 0 && n <= 256);
    assert_int_equal(pt_llm_tokenize(llm, text, strlen(text), false, false, NULL, 0), n);
    char *back = pt_llm_detokenize(llm, ids, n, false);
    assert_non_null(back);
    assert_string_equal(back, text);
    free(back);
    int32_t bad = 1 << 30;
    assert_pt_error(pt_llm_detokenize(llm, &bad, 1, false), PT_ERR_INVALID_ARG, "out of range");
    size_t len = 99;
    assert_pt_error(pt_llm_detokenize_bytes(llm, &bad, 1, false, &len), PT_ERR_INVALID_ARG,
                    "pt_llm_detokenize_bytes: token id 1073741824 is out of range");
    assert_int_equal(len, 0);
    assert_pt_error(pt_llm_detokenize_bytes(llm, ids, n, false, NULL), PT_ERR_INVALID_ARG,
                    "NULL len");
    pt_llm_free(llm);
}

/* A NUL byte inside the text survives the round trip through pt_llm_detokenize_bytes: byte
 * fallback (<0x00>, SentencePiece: phi3) and byte-level BPE (the piece for byte 0: qwen2). */
static void test_detokenize_nul_bytes(void **state)
{
    (void)state;
    static const char text[] = "a\0b c\0"; /* 6 bytes, two of them NUL */
    const size_t text_len = sizeof text - 1;
    const char *models[] = {TINY "phi3-q8_0.gguf", TINY "qwen2-q8_0.gguf"};
    for (int m = 0; m < 2; m++) {
        pt_llm *llm = load(models[m], 64);
        int32_t ids[64];
        int64_t n = pt_llm_tokenize(llm, text, text_len, false, false, ids, 64);
        assert_true(n > 0 && n <= 64);
        size_t len = 0;
        char *back = pt_llm_detokenize_bytes(llm, ids, n, false, &len);
        assert_non_null(back);
        assert_int_equal(len, text_len);
        assert_memory_equal(back, text, text_len);
        assert_int_equal(back[len], '\0');
        free(back);
        /* the C-string variant stops at the first NUL, as documented */
        char *cut = pt_llm_detokenize(llm, ids, n, false);
        assert_non_null(cut);
        assert_string_equal(cut, "a");
        free(cut);
        pt_llm_free(llm);
    }
}

/* ---- batch invariance ------------------------------------------------------------------------
 * docs/llm.md promises that a position's logits depend only on the tokens up to it: not on
 * n_batch, on how the prompt is split over pt_llm_eval calls, or on a cached prefix being
 * reused. Checked bitwise on the tiny model of each architecture and on SmolLM2 when present. */

#define INV_N 40

static float *last_logits(const pt_llm *llm)
{
    int32_t nv = pt_llm_get_info(llm)->n_vocab;
    const float *l = pt_llm_logits(llm);
    assert_non_null(l);
    float *copy = malloc((size_t)nv * sizeof *copy);
    assert_non_null(copy);
    memcpy(copy, l, (size_t)nv * sizeof *copy);
    return copy;
}

static void assert_same_logits(const pt_llm *llm, const float *want, const char *file,
                               const char *how)
{
    int32_t nv = pt_llm_get_info(llm)->n_vocab;
    const float *got = pt_llm_logits(llm);
    assert_non_null(got);
    for (int32_t i = 0; i < nv; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s: logit %d is %.9g %s, %.9g in one batch", file, (int)i, got[i], how,
                     want[i]);
}

static pt_llm *load_batch(const char *file, int32_t n_batch)
{
    pt_llm_opts o = {.num_ctx = 128, .n_batch = n_batch};
    pt_llm *llm = pt_llm_load(file, &o);
    if (!llm)
        fail_msg("pt_llm_load(%s): %s", file, pt_last_error());
    return llm;
}

static void check_batch_invariance(const char *file)
{
    pt_llm *one = load_batch(file, 512);
    int32_t nv = pt_llm_get_info(one)->n_vocab;
    int32_t ids[INV_N];
    uint32_t x = 12345;
    for (int i = 0; i < INV_N; i++) { /* pseudo-random ids of the vocabulary */
        x = x * 1664525u + 1013904223u;
        ids[i] = (int32_t)((x >> 8) % (uint32_t)nv);
    }
    assert_int_equal(pt_llm_eval(one, ids, INV_N, 0), PT_OK);
    float *want = last_logits(one);

    /* n_batch 7: the one call is processed in chunks of 7, 7, ..., 5 */
    pt_llm *chunked = load_batch(file, 7);
    assert_int_equal(pt_llm_eval(chunked, ids, INV_N, 0), PT_OK);
    assert_same_logits(chunked, want, file, "with n_batch 7");
    /* token by token, as decoding does */
    for (int32_t i = 0; i < INV_N; i++)
        assert_int_equal(pt_llm_eval(chunked, ids + i, 1, i), PT_OK);
    assert_same_logits(chunked, want, file, "one token at a time");
    pt_llm_free(chunked);

    /* the cached prefix reused: 25 tokens, then the other 15 after them */
    assert_int_equal(pt_llm_eval(one, ids, 25, 0), PT_OK);
    assert_int_equal(pt_llm_eval(one, ids + 25, INV_N - 25, 25), PT_OK);
    assert_same_logits(one, want, file, "after a cached prefix of 25");
    /* the whole prompt cached but its last position, evaluated again (as generation does) */
    assert_int_equal(pt_llm_eval(one, ids + INV_N - 1, 1, INV_N - 1), PT_OK);
    assert_same_logits(one, want, file, "re-evaluating the last position");
    /* a different cached tail is dropped: the logits are those of the new tokens alone */
    int32_t other[10];
    for (int i = 0; i < 10; i++)
        other[i] = (ids[i] + 1) % nv;
    assert_int_equal(pt_llm_eval(one, other, 10, 30), PT_OK);
    assert_int_equal(pt_llm_eval(one, ids + 30, INV_N - 30, 30), PT_OK);
    assert_same_logits(one, want, file, "after another tail was cached and dropped");
    free(want);
    pt_llm_free(one);
}

static void test_batch_invariance(void **state)
{
    (void)state;
    const char *tiny[] = {"llama-q8_0", "llama-q4_k_m",  "qwen2-q6_k",
                          "qwen3-q8_0", "gemma3-q4_k_m", "phi3-q6_k"};
    char path[1024];
    for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++) {
        snprintf(path, sizeof path, "%s%s.gguf", TINY, tiny[i]);
        check_batch_invariance(path);
    }
    const char *dirs[] = {getenv("PT_MODELS_DIR"), PT_FIXTURES_DIR "/../../data/models"};
    for (int i = 0; i < 2; i++) {
        if (!dirs[i])
            continue;
        snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dirs[i]);
        if (access(path, R_OK) == 0) {
            check_batch_invariance(path);
            return;
        }
    }
    print_message("SmolLM2-135M-Instruct.Q4_1.gguf not found: only the tiny models checked\n");
}

static void test_errors(void **state)
{
    (void)state;
    assert_pt_error(pt_llm_load(NULL, NULL), PT_ERR_INVALID_ARG, "NULL");
    assert_pt_error(pt_llm_load(TINY "no-such-model.gguf", NULL), PT_ERR_IO, "no-such-model");
    assert_pt_error(pt_llm_load(TINY "llama-q8_0.ref", NULL), PT_ERR_FORMAT, "");
    pt_llm_opts neg = {.num_ctx = -1};
    assert_pt_error(pt_llm_load(TINY "llama-q8_0.gguf", &neg), PT_ERR_INVALID_ARG, "negative");
    pt_llm_opts cuda = {.device = {.type = PT_DEVICE_CUDA}};
    /* refused either way: no GPU (or no CUDA build), or a CUDA backend without the LLM ops */
    assert_null(pt_llm_load(TINY "llama-q8_0.gguf", &cuda));
    if (pt_last_status() == PT_ERR_DEVICE) {
        assert_non_null(strstr(pt_last_error(), "cuda"));
    } else {
        assert_int_equal(pt_last_status(), PT_ERR_UNSUPPORTED);
        assert_non_null(strstr(pt_last_error(), "quant_linear"));
    }

    pt_llm *llm = load(TINY "llama-q8_0.gguf", 16);
    int32_t ids[20] = {1};
    for (int i = 1; i < 20; i++)
        ids[i] = 10 + i;
    pt_gen_opts o = greedy(4);
    assert_pt_status_error(pt_llm_generate_tokens(llm, ids, 20, &o, NULL, NULL), PT_ERR_INVALID_ARG,
                           "not truncated");
    assert_pt_status_error(pt_llm_generate_tokens(llm, ids, 0, &o, NULL, NULL), PT_ERR_INVALID_ARG,
                           "empty");
    int32_t out_of_vocab[2] = {1, 1 << 20};
    assert_pt_status_error(pt_llm_generate_tokens(llm, out_of_vocab, 2, &o, NULL, NULL),
                           PT_ERR_INVALID_ARG, "vocabulary");
    assert_pt_status_error(pt_llm_eval(llm, ids, 4, 5), PT_ERR_INVALID_ARG, "n_past");
    o.n_stop = -1;
    assert_pt_status_error(pt_llm_generate_tokens(llm, ids, 4, &o, NULL, NULL), PT_ERR_INVALID_ARG,
                           "stop");
    o = greedy(4);
    o.temperature = 0.0f / 0.0f;
    assert_pt_status_error(pt_llm_generate_tokens(llm, ids, 4, &o, NULL, NULL), PT_ERR_INVALID_ARG,
                           "");
    /* a generation that reaches the end of the context stops with "length" */
    pt_gen_stats st;
    o = greedy(-1);
    o.stats = &st;
    o.stop_tokens = NULL;
    assert_int_equal(pt_llm_generate_tokens(llm, ids, 10, &o, NULL, NULL), PT_OK);
    assert_true(strcmp(st.done_reason, "length") == 0 || strcmp(st.done_reason, "stop") == 0);
    assert_true(st.gen_tokens <= 16 - 10 + 1);
    assert_pt_error(pt_llm_chat_prompt(llm, NULL, 0), PT_ERR_INVALID_ARG, "no messages");
    pt_llm_free(llm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_info, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_generate_and_cache, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_stop_strings, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_seed_and_cancel, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_chat, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_tokenize_roundtrip, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_detokenize_nul_bytes, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batch_invariance, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_errors, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
