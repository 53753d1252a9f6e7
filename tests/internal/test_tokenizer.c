/* Tests of the GGUF tokenizers (src/serve/llm/tokenizer*.c) against llama.cpp's own token ids.
 *
 * The ids come from llama.cpp (llama-cpp-python) through tests/fixtures/gen_llamacpp.py, stored
 * in tests/fixtures/llm/<model>.ref as `tokenize <hex> : ids` lines (no BOS, special tokens
 * parsed) and `prompt <hex> : ids` lines (BOS as the model's metadata says). The vocabularies
 * come from tests/fixtures/llm/<model>.vocab.gguf.gz (tests/fixtures/gen_vocab.py: the models'
 * tokenizer.* keys in a tensor-less GGUF), so the tests need no model. The real models in
 * $PT_MODELS_DIR (`make models`; a missing one fails) check the tokenizer built from each full
 * model file too. Also: round trips through pieces and the streaming detokenizer, buffer sizing,
 * error paths, and tokenizing 100 KB of English in well under 100 ms. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "testutil.h"

#include "prometorch/core.h"
#include "prometorch/gguf.h"
#include "serve/llm/tokenizer.h"

#define SMOL "SmolLM2-135M-Instruct.Q4_1"
#define GEMMA "gemma-3-270m-q4_k_m"

static void fixture_path(char *out, size_t cap, const char *fname)
{
    /* PT_FIXTURES_DIR: CMake passes tests/fixtures as an absolute path (__FILE__ may be
     * relative to the build folder, which is not where ctest runs the test) */
    snprintf(out, cap, "%s/llm/%s", PT_FIXTURES_DIR, fname);
}

/* The gunzipped bytes of tests/fixtures/llm/<stem>.vocab.gguf.gz (malloc'd). */
static uint8_t *load_vocab_bytes(const char *stem, size_t *len)
{
    char path[4096], fname[512];
    snprintf(fname, sizeof fname, "%s.vocab.gguf.gz", stem);
    fixture_path(path, sizeof path, fname);
    gzFile z = gzopen(path, "rb");
    assert_non_null(z);
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        int r = gzread(z, buf + n, (unsigned)(cap - n));
        assert_true(r >= 0);
        if (r == 0) {
            break;
        }
        n += (size_t)r;
    }
    gzclose(z);
    *len = n;
    return buf;
}

typedef struct vocab {
    uint8_t *bytes;
    size_t len;
    pt_gguf *g;
    pti_tokenizer *tok;
} vocab;

static vocab open_vocab(const char *stem)
{
    vocab v = {0};
    v.bytes = load_vocab_bytes(stem, &v.len);
    v.g = pt_gguf_open_buffer(v.bytes, v.len, stem);
    assert_non_null(v.g);
    v.tok = pti_tokenizer_from_gguf(v.g);
    if (!v.tok) {
        fail_msg("%s: %s", stem, pt_last_error());
    }
    return v;
}

static void close_vocab(vocab *v)
{
    pti_tokenizer_free(v->tok);
    pt_gguf_close(v->g);
    free(v->bytes);
}

/* ---- .ref files --------------------------------------------------------------------------------
 */

typedef struct ref_case {
    bool prompt; /* prompt line: add_special */
    char *text;
    size_t text_len;
    int32_t ids[512];
    int n_ids;
} ref_case;

static int hexdig(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Reads the tokenize/prompt lines of <stem>.ref; returns the count (cases malloc'd). */
static int load_ref(const char *stem, ref_case **out)
{
    char path[4096], fname[512];
    snprintf(fname, sizeof fname, "%s.ref", stem);
    fixture_path(path, sizeof path, fname);
    FILE *f = fopen(path, "r");
    if (!f) {
        fail_msg("cannot open %s (run tests/fixtures/gen_llamacpp.py)", path);
    }
    ref_case *cases = calloc(256, sizeof(ref_case));
    int n = 0;
    static char line[1 << 16];
    while (fgets(line, sizeof line, f) && n < 256) {
        bool prompt = strncmp(line, "prompt ", 7) == 0;
        if (!prompt && strncmp(line, "tokenize ", 9) != 0) {
            continue;
        }
        char *p = line + (prompt ? 7 : 9);
        char *colon = strstr(p, " : ");
        if (!colon) {
            colon = strstr(p, ":");
        }
        assert_non_null(colon);
        ref_case *c = &cases[n++];
        c->prompt = prompt;
        size_t hex_len = (size_t)(colon - p);
        while (hex_len > 0 && p[hex_len - 1] == ' ') {
            hex_len--;
        }
        c->text = malloc(hex_len / 2 + 1);
        for (size_t i = 0; i + 1 < hex_len + 1 && i < hex_len; i += 2) {
            c->text[i / 2] = (char)(hexdig(p[i]) * 16 + hexdig(p[i + 1]));
        }
        c->text_len = hex_len / 2;
        c->text[c->text_len] = 0;
        char *q = colon + 1;
        while (*q == ' ' || *q == ':') {
            q++;
        }
        for (;;) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) {
                break;
            }
            assert_true(c->n_ids < 512);
            c->ids[c->n_ids++] = (int32_t)v;
            q = end;
        }
    }
    fclose(f);
    *out = cases;
    return n;
}

static void free_ref(ref_case *cases, int n)
{
    for (int i = 0; i < n; i++) {
        free(cases[i].text);
    }
    free(cases);
}

static void check_against_ref(const pti_tokenizer *tok, const char *stem)
{
    ref_case *cases;
    int n = load_ref(stem, &cases);
    assert_true(n >= 20);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        ref_case *c = &cases[i];
        int32_t got[1024];
        int64_t m = pti_tokenize(tok, c->text, c->text_len, c->prompt, true, got, 1024);
        assert_true(m >= 0);
        bool same = m == c->n_ids && memcmp(got, c->ids, sizeof(int32_t) * (size_t)m) == 0;
        if (!same) {
            bad++;
            fprintf(stderr, "%s: %s '%s'\n  llama.cpp:", stem, c->prompt ? "prompt" : "tokenize",
                    c->text);
            for (int k = 0; k < c->n_ids; k++) {
                fprintf(stderr, " %d", c->ids[k]);
            }
            fprintf(stderr, "\n  ours:     ");
            for (int64_t k = 0; k < m && k < 1024; k++) {
                fprintf(stderr, " %d", got[k]);
            }
            fprintf(stderr, "\n");
        }
    }
    free_ref(cases, n);
    assert_int_equal(bad, 0);
}

/* The machine-made corpus of tests/fixtures/gen_tokenize.py: `tok A P <hex> : ids`. */
/* Returns the number of piece lines checked. */
static int check_against_tokens_ref(const pti_tokenizer *tok, const char *stem)
{
    char path[4096], fname[512];
    snprintf(fname, sizeof fname, "%s.tokens.ref", stem);
    fixture_path(path, sizeof path, fname);
    FILE *f = fopen(path, "r");
    if (!f) {
        fail_msg("cannot open %s (run tests/fixtures/gen_tokenize.py)", path);
    }
    static char line[1 << 16];
    int n = 0, bad = 0, n_pieces = 0;
    while (fgets(line, sizeof line, f)) {
        int add = 0, parse = 0, off = 0;
        if (strncmp(line, "piece ", 6) == 0) {
            int id = 0, sp = 0;
            assert_true(sscanf(line, "piece %d %d %n", &id, &sp, &off) == 2 && off > 0);
            char want[512], got[512];
            size_t nw = 0;
            for (const char *h = line + off; hexdig(h[0]) >= 0 && hexdig(h[1]) >= 0; h += 2) {
                want[nw++] = (char)(hexdig(h[0]) * 16 + hexdig(h[1]));
            }
            int32_t m = pti_token_to_piece(tok, id, sp, got, sizeof got);
            n_pieces++;
            if (m != (int32_t)nw || memcmp(got, want, nw) != 0) {
                if (bad++ < 10) {
                    fprintf(stderr,
                            "%s: piece %d special %d: llama.cpp %zu bytes '%.*s', ours %d '%.*s'\n",
                            stem, id, sp, nw, (int)nw, want, m, m < 0 ? 0 : m, got);
                }
            }
            continue;
        }
        if (sscanf(line, "tok %d %d %n", &add, &parse, &off) < 2 || off == 0) {
            continue;
        }
        char *p = line + off, *colon = strchr(p, ':');
        assert_non_null(colon);
        size_t hex_len = (size_t)(colon - p);
        while (hex_len > 0 && p[hex_len - 1] == ' ') {
            hex_len--;
        }
        char text[4096];
        assert_true(hex_len / 2 < sizeof text);
        for (size_t i = 0; i + 1 < hex_len + 1 && i < hex_len; i += 2) {
            text[i / 2] = (char)(hexdig(p[i]) * 16 + hexdig(p[i + 1]));
        }
        int32_t want[1024], got[1024];
        int nw = 0;
        char *q = colon + 1, *end;
        for (long v = strtol(q, &end, 10); end != q; v = strtol(q, &end, 10)) {
            assert_true(nw < 1024);
            want[nw++] = (int32_t)v;
            q = end;
        }
        int64_t m = pti_tokenize(tok, text, hex_len / 2, add, parse, got, 1024);
        n++;
        if (m != nw || memcmp(got, want, sizeof(int32_t) * (size_t)nw) != 0) {
            if (bad++ < 10) {
                fprintf(stderr, "%s: add %d parse %d hex %.*s\n  llama.cpp:", stem, add, parse,
                        (int)hex_len, p);
                for (int k = 0; k < nw; k++) {
                    fprintf(stderr, " %d", want[k]);
                }
                fprintf(stderr, "\n  ours:     ");
                for (int64_t k = 0; k < m && k < 1024; k++) {
                    fprintf(stderr, " %d", got[k]);
                }
                fprintf(stderr, "\n");
            }
        }
    }
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: %d of %d cases and %d pieces differ\n", stem, bad, n, n_pieces);
    }
    assert_true(n > 500);
    assert_int_equal(bad, 0);
    return n_pieces;
}

/* The end-of-generation ids are exactly `want` (sorted). */
static void check_eog(const pti_tokenizer *tok, const int32_t *want, int n)
{
    int k = 0;
    for (int32_t id = 0; id < pti_tokenizer_vocab_size(tok); id++) {
        if (pti_tokenizer_is_eog(tok, id)) {
            assert_true(k < n);
            assert_int_equal(id, want[k]);
            k++;
        }
    }
    assert_int_equal(k, n);
}

/* ---- tests -------------------------------------------------------------------------------------
 */

static void test_smollm_matches_llamacpp(void **state)
{
    (void)state;
    vocab v = open_vocab(SMOL);
    assert_int_equal(pti_tokenizer_kind(v.tok), PTI_TOK_BPE);
    assert_string_equal(pti_tokenizer_pre(v.tok), "smollm");
    assert_int_equal(pti_tokenizer_vocab_size(v.tok), 49152);
    assert_int_equal(pti_tokenizer_bos(v.tok), 1);
    assert_int_equal(pti_tokenizer_eos(v.tok), 2);
    assert_int_equal(pti_tokenizer_pad(v.tok), 2);
    assert_false(pti_tokenizer_add_bos(v.tok));
    /* llama.cpp (llama_vocab_eot / llama_vocab_is_eog over every id): eot 0, eog {0, 2, 4} --
     * <|endoftext|>, <|im_end|> and <reponame> (taken as the FIM repo token) */
    assert_int_equal(pti_tokenizer_eot(v.tok), 0);
    check_eog(v.tok, (const int32_t[]){0, 2, 4}, 3);
    check_against_ref(v.tok, SMOL);
    assert_true(check_against_tokens_ref(v.tok, SMOL) > 2000);
    close_vocab(&v);
}

static void test_gemma_matches_llamacpp(void **state)
{
    (void)state;
    vocab v = open_vocab(GEMMA);
    assert_int_equal(pti_tokenizer_kind(v.tok), PTI_TOK_SPM);
    assert_int_equal(pti_tokenizer_vocab_size(v.tok), 262144);
    assert_int_equal(pti_tokenizer_bos(v.tok), 2);
    assert_int_equal(pti_tokenizer_eos(v.tok), 1);
    assert_int_equal(pti_tokenizer_unk(v.tok), 3);
    assert_int_equal(pti_tokenizer_pad(v.tok), 0);
    assert_true(pti_tokenizer_add_bos(v.tok));
    assert_true(pti_tokenizer_max_piece(v.tok) >= 31 && pti_tokenizer_max_piece(v.tok) < 512);
    /* llama.cpp: eot 106 <end_of_turn>; eog {1 <eos>, 106, 212 </s>} */
    assert_int_equal(pti_tokenizer_eot(v.tok), 106);
    check_eog(v.tok, (const int32_t[]){1, 106, 212}, 3);
    check_against_ref(v.tok, GEMMA);
    assert_true(check_against_tokens_ref(v.tok, GEMMA) > 20000);
    close_vocab(&v);
}

/* The tokenizer built from the full model file gives the same ids (skipped without models). */
static void test_full_models(void **state)
{
    (void)state;
    const char *stems[] = {SMOL, GEMMA};
    int found = 0;
    for (int i = 0; i < 2; i++) {
        char file[256], path[4096];
        snprintf(file, sizeof file, "%s.gguf", stems[i]);
        snprintf(path, sizeof path, "%s", pt_test_model_path(file)); /* fails when missing */
        found++;
        pt_gguf *g = pt_gguf_open(path);
        assert_non_null(g);
        pti_tokenizer *tok = pti_tokenizer_from_gguf(g);
        pt_gguf_close(g); /* the tokenizer keeps copies */
        assert_non_null(tok);
        check_against_ref(tok, stems[i]);
        pti_tokenizer_free(tok);
    }
    if (found == 0) {
        skip();
    }
}

static const char *k_texts[] = {
    "Hello, world! The quick brown fox.",
    "tabs\tand\nnewlines\n\n\nand   spaces   ",
    "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82, \xd0\xbc\xd0\xb8\xd1\x80",
    "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c",
    "emoji \xf0\x9f\x98\x80\xf0\x9f\x8e\x89\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x87\xab",
    "def f(x):\n    return x * 2  # 1234567",
};

/* Pieces of the ids concatenate back to the text, and the streaming detokenizer gives the same
 * bytes without ever ending a chunk inside a UTF-8 character. */
static void roundtrip(const pti_tokenizer *tok)
{
    for (size_t i = 0; i < sizeof k_texts / sizeof k_texts[0]; i++) {
        const char *text = k_texts[i];
        size_t len = strlen(text);
        int32_t ids[256];
        int64_t n = pti_tokenize(tok, text, len, false, false, ids, 256);
        assert_true(n > 0 && n <= 256);
        char joined[1024], streamed[1024];
        size_t nj = 0, nsd = 0;
        pti_detok d;
        pti_detok_init(&d, tok, false);
        for (int64_t k = 0; k < n; k++) {
            int32_t m = pti_token_to_piece(tok, ids[k], false, joined + nj, 64);
            assert_true(m >= 0 && m <= 64);
            nj += (size_t)m;
            char chunk[512];
            int32_t c = pti_detok_push(&d, ids[k], chunk, sizeof chunk);
            assert_true(c >= 0);
            if (c > 0) {
                /* the chunk ends on a character boundary */
                size_t back = 0;
                int32_t p = c - 1;
                while (p >= 0 && ((uint8_t)chunk[p] & 0xC0) == 0x80) {
                    p--;
                    back++;
                }
                assert_true(p >= 0);
                uint8_t lead = (uint8_t)chunk[p];
                size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
                assert_int_equal(back + 1, need);
            }
            memcpy(streamed + nsd, chunk, (size_t)c);
            nsd += (size_t)c;
        }
        char rest[8];
        int32_t r = pti_detok_flush(&d, rest, sizeof rest);
        assert_int_equal(r, 0);
        assert_int_equal(nj, len);
        assert_memory_equal(joined, text, len);
        assert_int_equal(nsd, len);
        assert_memory_equal(streamed, text, len);
    }
}

static void test_roundtrip_smollm(void **state)
{
    (void)state;
    vocab v = open_vocab(SMOL);
    roundtrip(v.tok);
    close_vocab(&v);
}

static void test_roundtrip_gemma(void **state)
{
    (void)state;
    vocab v = open_vocab(GEMMA);
    roundtrip(v.tok);
    close_vocab(&v);
}

/* Pieces of special tokens, byte tokens and the streaming hold of split characters. */
static void test_pieces(void **state)
{
    (void)state;
    vocab v = open_vocab(GEMMA);
    char buf[64];
    /* control token: its text only when special */
    assert_int_equal(pti_token_to_piece(v.tok, 106, false, buf, 64), 0);
    int32_t n = pti_token_to_piece(v.tok, 106, true, buf, 64);
    assert_int_equal(n, 13);
    assert_memory_equal(buf, "<end_of_turn>", 13);
    /* byte tokens <0xE2> <0x82> <0xAC> = the euro sign, emitted only when complete */
    int32_t e2 = pti_token_find(v.tok, "<0xE2>", 6), x82 = pti_token_find(v.tok, "<0x82>", 6),
            xac = pti_token_find(v.tok, "<0xAC>", 6);
    assert_true(e2 >= 0 && x82 >= 0 && xac >= 0);
    assert_int_equal(pti_token_attr(v.tok, e2), PTI_ATTR_BYTE);
    assert_int_equal(pti_token_to_piece(v.tok, e2, false, buf, 64), 1);
    assert_int_equal((uint8_t)buf[0], 0xE2);
    pti_detok d;
    pti_detok_init(&d, v.tok, false);
    assert_int_equal(pti_detok_push(&d, e2, buf, 64), 0);
    assert_int_equal(pti_detok_push(&d, x82, buf, 64), 0);
    assert_int_equal(pti_detok_push(&d, xac, buf, 64), 3);
    assert_memory_equal(buf, "\xe2\x82\xac", 3);
    /* an unfinished character is given up by flush */
    assert_int_equal(pti_detok_push(&d, e2, buf, 64), 0);
    assert_int_equal(pti_detok_flush(&d, buf, 64), 1);
    assert_int_equal((uint8_t)buf[0], 0xE2);
    /* out of range */
    assert_int_equal(pti_token_to_piece(v.tok, -1, true, buf, 64), -1);
    assert_int_equal(pti_token_to_piece(v.tok, 262144, true, buf, 64), -1);
    assert_int_equal(pti_detok_push(&d, 262144, buf, 64), -1);
    close_vocab(&v);
}

/* cap too small: the needed count is returned; NULL/negative arguments are errors. */
static void test_buffer_and_errors(void **state)
{
    (void)state;
    vocab v = open_vocab(SMOL);
    const char *text = "The quick brown fox jumps over the lazy dog.";
    int32_t ids[64];
    int64_t n = pti_tokenize(v.tok, text, strlen(text), false, false, ids, 64);
    assert_true(n > 3);
    int32_t few[2] = {-7, -7};
    assert_int_equal(pti_tokenize(v.tok, text, strlen(text), false, false, few, 2), n);
    assert_int_equal(few[0], ids[0]);
    assert_int_equal(pti_tokenize(v.tok, text, strlen(text), false, false, NULL, 0), n);
    assert_int_equal(pti_tokenize(v.tok, "", 0, false, false, ids, 64), 0);
    assert_true(pti_tokenize(NULL, text, 3, false, false, ids, 64) < 0);
    assert_true(pti_tokenize(v.tok, NULL, 3, false, false, ids, 64) < 0);
    assert_true(pti_tokenize(v.tok, text, 3, false, false, ids, -1) < 0);
    /* special tokens are only parsed when asked */
    const char *chat = "<|im_start|>user";
    int64_t a = pti_tokenize(v.tok, chat, strlen(chat), false, true, ids, 64);
    assert_true(a >= 2);
    assert_int_equal(ids[0], 1);
    int64_t b = pti_tokenize(v.tok, chat, strlen(chat), false, false, ids, 64);
    assert_true(b > a);
    assert_int_not_equal(ids[0], 1);
    /* invalid UTF-8 does not fail */
    const char bad[] = "a\xff\xc3(b\xe2\x82";
    assert_true(pti_tokenize(v.tok, bad, sizeof bad - 1, false, false, ids, 64) > 0);
    close_vocab(&v);
    pti_tokenizer_free(NULL);
    assert_pt_error(pti_tokenizer_from_gguf(NULL), PT_ERR_NULL, "NULL");
}

/* Patches a string value of the SmolLM extract in place (same length) and expects refusal. */
static void expect_refused(const char *from, const char *to, size_t fl, pt_status st,
                           const char *msg)
{
    size_t len;
    uint8_t *bytes = load_vocab_bytes(SMOL, &len);
    uint8_t *p = memmem(bytes, len, from, fl);
    assert_non_null(p);
    memcpy(p, to, fl);
    pt_gguf *g = pt_gguf_open_buffer(bytes, len, "patched");
    assert_non_null(g);
    assert_pt_error(pti_tokenizer_from_gguf(g), st, msg);
    pt_gguf_close(g);
    free(bytes);
}

static void test_unsupported(void **state)
{
    (void)state;
    /* the value "smollm" follows its key and length; patch the value, not the key */
    expect_refused("\x06\x00\x00\x00\x00\x00\x00\x00smollm",
                   "\x06\x00\x00\x00\x00\x00\x00\x00smolxx", 14, PT_ERR_UNSUPPORTED,
                   "pre-tokenizer 'smolxx'");
    expect_refused("\x04\x00\x00\x00\x00\x00\x00\x00gpt2", "\x04\x00\x00\x00\x00\x00\x00\x00gpt9",
                   12, PT_ERR_UNSUPPORTED, "'gpt9' is not supported");
    expect_refused("tokenizer.ggml.tokens", "tokenizer.ggml.tokenz", 21, PT_ERR_FORMAT,
                   "tokenizer.ggml.tokens");
    expect_refused("tokenizer.ggml.merges", "tokenizer.ggml.mergez", 21, PT_ERR_FORMAT,
                   "tokenizer.ggml.merges");
}

/* Every pre-tokenizer name llama.cpp knows that we support compiles with PCRE2. */
static void test_pre_tokenizers_compile(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int n_regex;
    } pres[] = {
        {"llama3", 1},      {"llama-bpe", 1},
        {"llama-v3", 1},    {"falcon3", 1},
        {"dbrx", 1},        {"smaug-bpe", 1},
        {"chatglm-bpe", 1}, {"glm4", 1},
        {"qwen2", 1},       {"deepseek-r1-qwen", 1},
        {"stablelm2", 1},   {"grok-2", 1},
        {"gpt-2", 1},       {"phi-2", 1},
        {"olmo", 1},        {"mpt", 1},
        {"smollm", 2},      {"starcoder", 2},
        {"command-r", 2},   {"default", 4},
        {"falcon", 3},      {"deepseek-coder", 5},
        {"deepseek-v3", 3}, {"poro-chat", 1},
        {"bloom", 1},       {"viking", 2},
        {"tekken", 1},      {"gpt-4o", 1},
        {"llama4", 1},      {"qwen35", 1},
        {"seed-coder", 1},  {"bailingmoe", 1},
        {"ufakzeka", 1},    {"laguna", 2},
        {"exaone-moe", 1},  {"minicpm5", 2},
        {"chameleon", 6},
    };
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++) {
        int n = pti_bpe_check_pre(pres[i].name);
        if (n != pres[i].n_regex) {
            fail_msg("pre-tokenizer %s: %d regexes compiled, expected %d", pres[i].name, n,
                     pres[i].n_regex);
        }
    }
    assert_int_equal(pti_bpe_check_pre("kimi-k2"), 0);
    assert_int_equal(pti_bpe_check_pre(""), 0);
    assert_int_equal(pti_bpe_check_pre("llama"), 0);
}

/* The SmolLM extract with tokenizer.ggml.pre's value replaced by `pre` (the string is spliced:
 * a GGUF without tensors has no offsets to fix). */
static vocab open_smollm_with_pre(const char *pre)
{
    vocab v = {0};
    size_t len;
    uint8_t *bytes = load_vocab_bytes(SMOL, &len);
    static const char key[] = "tokenizer.ggml.pre";
    uint8_t *k = memmem(bytes, len, key, sizeof key - 1);
    assert_non_null(k);
    /* key, value type (u32 = 8, string), u64 length 6, "smollm" */
    uint8_t *val = k + sizeof key - 1 + 4;
    assert_memory_equal(val + 8, "smollm", 6);
    size_t head = (size_t)(val - bytes), tail = len - head - 14, pl = strlen(pre);
    v.len = head + 8 + pl + tail;
    v.bytes = malloc(v.len);
    memcpy(v.bytes, bytes, head);
    uint64_t pl64 = pl;
    memcpy(v.bytes + head, &pl64, 8);
    memcpy(v.bytes + head + 8, pre, pl);
    memcpy(v.bytes + head + 8 + pl, val + 14, tail);
    free(bytes);
    v.g = pt_gguf_open_buffer(v.bytes, v.len, pre);
    assert_non_null(v.g);
    v.tok = pti_tokenizer_from_gguf(v.g);
    if (!v.tok) {
        fail_msg("%s: %s", pre, pt_last_error());
    }
    return v;
}

/* Other families' pre-tokenizers on SmolLM's vocabulary, against llama.cpp given the same
 * metadata (tests/fixtures/gen_tokenize.py's smollm-pre-*.tokens.ref). */
static void test_pre_tokenizers_match_llamacpp(void **state)
{
    (void)state;
    static const char *pres[] = {"llama-bpe",   "qwen2",  "gpt-2",  "default",
                                 "deepseek-v3", "tekken", "gpt-4o", "falcon"};
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++) {
        vocab v = open_smollm_with_pre(pres[i]);
        assert_string_equal(pti_tokenizer_pre(v.tok), pres[i]);
        char stem[128];
        snprintf(stem, sizeof stem, "smollm-pre-%s", pres[i]);
        check_against_tokens_ref(v.tok, stem);
        close_vocab(&v);
    }
}

/* Runs of one character, 256 KB long, are single pieces for the regexes and single words for
 * the merge loops: no stack or quadratic blow-up. */
static void test_long_runs(void **state)
{
    (void)state;
    size_t len = 256 * 1024;
    char *text = malloc(len);
    int32_t *ids = malloc(sizeof(int32_t) * len);
    const char fills[] = {'a', ' ', '\n', '7', '!'};
    vocab vs[3] = {open_vocab(SMOL), open_vocab(GEMMA), open_smollm_with_pre("llama-bpe")};
    for (int k = 0; k < 3; k++) {
        for (size_t f = 0; f < sizeof fills; f++) {
            memset(text, fills[f], len);
            int64_t n = pti_tokenize(vs[k].tok, text, len, false, false, ids, (int64_t)len);
            if (n <= 0 || n > (int64_t)len) {
                fail_msg("vocab %d fill %d: %lld (%s)", k, fills[f], (long long)n, pt_last_error());
            }
        }
        close_vocab(&vs[k]);
    }
    free(ids);
    free(text);
}

/* Random byte strings (fixed seed) made of fragments that stress the splitters: every flag
 * combination must succeed, the needed count must not depend on cap, and -- with special tokens
 * left unparsed -- the pieces of valid UTF-8 must give the text back (not for ill-formed text:
 * byte-level BPE turns a bad byte into U+FFFD, and SPM's character split can swallow the
 * first byte of a U+2581 space marker after a truncated character, as in llama.cpp). */
static void test_random_strings(void **state)
{
    (void)state;
    static const char *frags[] = {"a",
                                  "Z",
                                  "the",
                                  " ",
                                  "  ",
                                  "   ",
                                  "\t",
                                  "\n",
                                  "\r\n",
                                  "0",
                                  "42",
                                  "'s",
                                  "'LL",
                                  ".",
                                  "!!",
                                  "\xc3\xa9",
                                  "\xe4\xbd\xa0",
                                  "\xf0\x9f\x98\x80",
                                  "\xe2\x96\x81",
                                  "\xc2\xa0",
                                  "<",
                                  ">",
                                  "<|im_start|>",
                                  "<|im_end|>",
                                  "<end_of_turn>",
                                  "<start_of_turn>",
                                  "</s>",
                                  "<td>",
                                  "\xff",
                                  "\x80",
                                  "\xe4\xbd",
                                  "\xc0\xaf",
                                  "\xed\xa0\x80",
                                  "\x00"};
    static const size_t frag_len[] = {1, 1, 3, 1, 2, 3,  1,  1,  2,  1, 2, 2, 3, 1, 2, 2, 3,
                                      4, 3, 2, 1, 1, 12, 10, 13, 15, 4, 4, 1, 1, 2, 2, 3, 1};
    const size_t n_frags = sizeof frags / sizeof frags[0];
    assert_int_equal(n_frags, sizeof frag_len / sizeof frag_len[0]);
    vocab vs[2] = {open_vocab(SMOL), open_vocab(GEMMA)};
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (int iter = 0; iter < 3000; iter++) {
        char text[256];
        size_t len = 0;
        bool valid = true, has_marker = false;
        int parts = 1 + (int)(rng % 12);
        for (int k = 0; k < parts; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t f = (size_t)(rng >> 33) % n_frags;
            memcpy(text + len, frags[f], frag_len[f]);
            len += frag_len[f];
            valid = valid && f < 28;
            has_marker = has_marker || f == 18;
        }
        for (int v = 0; v < 2; v++) {
            const pti_tokenizer *tok = vs[v].tok;
            for (int flags = 0; flags < 4; flags++) {
                int32_t ids[512], few[1];
                int64_t n = pti_tokenize(tok, text, len, flags & 1, flags & 2, ids, 512);
                assert_true(n >= 0 && n <= 512);
                assert_int_equal(pti_tokenize(tok, text, len, flags & 1, flags & 2, few, 1), n);
                /* U+2581 in the input reads back as a space from SPM pieces, as in llama.cpp */
                if (flags != 0 || !valid || (v == 1 && has_marker)) {
                    continue;
                }
                char back[2048];
                size_t nb = 0;
                for (int64_t i = 0; i < n; i++) {
                    int32_t m = pti_token_to_piece(tok, ids[i], false, back + nb, 512);
                    assert_true(m >= 0 && m <= 512);
                    nb += (size_t)m;
                }
                if (nb != len || memcmp(back, text, len) != 0) {
                    fail_msg("vocab %d: round trip of %zu bytes gave %zu", v, len, nb);
                }
            }
        }
    }
    close_vocab(&vs[0]);
    close_vocab(&vs[1]);
}

typedef struct thread_job {
    const pti_tokenizer *tok;
    const char *text;
    size_t len;
    int32_t ids[4096];
    int64_t n;
} thread_job;

static void *tokenize_job(void *arg)
{
    thread_job *j = arg;
    for (int rep = 0; rep < 20; rep++) {
        j->n = pti_tokenize(j->tok, j->text, j->len, true, true, j->ids, 4096);
    }
    return NULL;
}

/* One tokenizer used from four threads at once gives the single-thread ids. */
static void test_threads(void **state)
{
    (void)state;
    vocab vs[2] = {open_vocab(SMOL), open_vocab(GEMMA)};
    char text[4096];
    size_t len = 0;
    for (int r = 0; len + 200 < sizeof text; r++) {
        const char *t = k_texts[r % (sizeof k_texts / sizeof k_texts[0])];
        memcpy(text + len, t, strlen(t));
        len += strlen(t);
        memcpy(text + len, "<|im_start|><end_of_turn>", 25);
        len += 25;
    }
    for (int k = 0; k < 2; k++) {
        static thread_job jobs[5];
        for (int i = 0; i < 5; i++) {
            jobs[i] = (thread_job){.tok = vs[k].tok, .text = text, .len = len};
        }
        tokenize_job(&jobs[4]);
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            assert_int_equal(pthread_create(&th[i], NULL, tokenize_job, &jobs[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            assert_true(jobs[i].n > 0 && jobs[i].n <= 4096);
            assert_int_equal(jobs[i].n, jobs[4].n);
            assert_memory_equal(jobs[i].ids, jobs[4].ids, sizeof(int32_t) * (size_t)jobs[4].n);
        }
        close_vocab(&vs[k]);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* 100 KB of English: tokenizing takes well under 100 ms (the bound checked is loose so that
 * sanitizer builds pass; the time is printed). */
static void test_speed(void **state)
{
    (void)state;
    static const char para[] =
        "It was the best of times, it was the worst of times, it was the age of wisdom, it was "
        "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity, "
        "it was the season of Light, it was the season of Darkness. In 1859, 42 people said: "
        "\"We had everything before us, we had nothing before us!\"\n\n";
    size_t len = 100 * 1024;
    char *text = malloc(len);
    for (size_t i = 0; i < len; i++) {
        text[i] = para[i % (sizeof para - 1)];
    }
    int32_t *ids = malloc(sizeof(int32_t) * len);
    const char *stems[] = {SMOL, GEMMA};
    for (int s = 0; s < 2; s++) {
        double tc = now_s();
        vocab v = open_vocab(stems[s]);
        printf("%s: tokenizer built (gunzip + parse + tables) in %.1f ms\n", stems[s],
               (now_s() - tc) * 1e3);
        double t0 = now_s();
        int64_t n = pti_tokenize(v.tok, text, len, false, true, ids, (int64_t)len);
        double dt = now_s() - t0;
        printf("%s: 100 KB -> %lld tokens in %.1f ms\n", stems[s], (long long)n, dt * 1e3);
        assert_true(n > 10000 && n < (int64_t)len);
        assert_true(dt < 1.0);
        close_vocab(&v);
    }
    free(ids);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_smollm_matches_llamacpp, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gemma_matches_llamacpp, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_full_models, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_smollm, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_gemma, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_pieces, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_buffer_and_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_unsupported, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_pre_tokenizers_compile, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_pre_tokenizers_match_llamacpp, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_long_runs, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_random_strings, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_threads, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_speed, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
