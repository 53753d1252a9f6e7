/* Byte-level BPE (tokenizer.ggml.model "gpt2"): the pre-tokenizer regexes chosen by
 * tokenizer.ggml.pre, GPT-2's byte-to-unicode mapping and the merge loop over ranks.
 *
 * Pre-tokenizing follows llama.cpp's unicode_regex_split: the text is decoded to code points
 * (each invalid UTF-8 byte becomes U+FFFD) and re-encoded; then each regex of the list refines
 * the current pieces -- within one piece, every match is a piece and so is every stretch of text
 * between matches. The regexes run with PCRE2 (PCRE2_UTF | PCRE2_UCP, compiled and JIT-compiled
 * once per tokenizer), each on one piece at a time, so a lookahead never sees past the piece --
 * as in llama.cpp, whose hand-written splitters for the gpt2/llama3/qwen2 patterns behave like
 * these regexes. Each piece's bytes are then mapped to GPT-2's printable characters and merged:
 * the adjacent pair with the lowest merge rank first (leftmost on ties), through a binary heap
 * over a linked list of symbols, so a word of n characters costs O(n log n). */
#define PTI_TOKENIZER_PRIVATE
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"

/* ---- pre-tokenizers
 * ------------------------------------------------------------------------------ */

#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define R_LLAMA3                                                                                   \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"      \
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_QWEN2                                                                                    \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"           \
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define R_PORO                                                                                     \
    " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+"
#define R_CASED_LETTERS "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
#define R_CASED_LETTERS2 "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"

enum { PRE_IGNORE_MERGES = 1, PRE_ADD_BOS = 2, PRE_NO_BOS = 4 };

typedef struct pre_def {
    const char *names; /* space-separated tokenizer.ggml.pre values */
    int flags;
    const char *re[PTI_TOK_MAX_REGEX];
} pre_def;

/* The pre-tokenizers of llama.cpp (llm_tokenizer_bpe), by family. */
static const pre_def k_pre[] = {
    {"llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano",
     PRE_IGNORE_MERGES | PRE_ADD_BOS,
     {R_LLAMA3}},
    {"dbrx smaug-bpe", 0, {R_LLAMA3}},
    {"chatglm-bpe", PRE_NO_BOS, {R_LLAMA3}},
    {"glm4 glm5", PRE_NO_BOS | PRE_IGNORE_MERGES, {R_LLAMA3}},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open grok-2",
     0,
     {R_QWEN2}},
    {"gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert "
     "jina-v1-en jina-v2-code roberta-bpe mpt olmo jais trillion granite-docling exaone4",
     0,
     {R_GPT2}},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b mellum2",
     0,
     {"\\p{N}", R_GPT2}},
    {"default", 0, {"[\\p{P}\\$\\+<=>\\^~\\|]+", R_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"falcon", 0, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", R_GPT2, "[0-9][0-9][0-9]"}},
    {"deepseek-coder",
     0,
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
      "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+", "\\p{N}"}},
    {"deepseek-v3 hunyuan-dense joyai-llm hy_v4",
     0,
     {"\\p{N}{1,3}",
      "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
      "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    {"poro-chat bloom gpt3-finnish", 0, {R_PORO}},
    {"viking", 0, {R_PORO, "\\p{N}"}},
    {"tekken",
     PRE_IGNORE_MERGES | PRE_ADD_BOS,
     {R_CASED_LETTERS "|" R_CASED_LETTERS2 "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
                      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"qwen35",
     0,
     {CONTRACTIONS
      "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"seed-coder",
     0,
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"
                   "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"bailingmoe bailingmoe2 llada-moe",
     0,
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
      " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"ufakzeka",
     0,
     {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
      "\\s+(?!\\S)|\\s+"}},
    {"laguna", 0, {"[^\\n]+|[\\n]+", R_QWEN2}},
    {"exaone-moe",
     0,
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}|"
                   " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"minicpm5",
     PRE_IGNORE_MERGES,
     {"\\p{N}{1,3}",
      CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                   "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"chameleon",
     PRE_ADD_BOS,
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", R_GPT2}},
    {"gpt-4o llama4 kanana2 talkie minimax-m2",
     0,
     {R_CASED_LETTERS CONTRACTIONS
      "?|" R_CASED_LETTERS2 CONTRACTIONS
      "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
};

static bool name_in(const char *names, const char *pre)
{
    size_t n = strlen(pre);
    for (const char *p = names; *p;) {
        const char *e = strchr(p, ' ');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && memcmp(p, pre, n) == 0) {
            return true;
        }
        if (!e) {
            break;
        }
        p = e + 1;
    }
    return false;
}

/* GPT-2's table: printable bytes map to themselves, the others to U+0100 + k in byte order. */
static void build_byte_table(pti_tokenizer *t)
{
    int k = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        uint32_t cp = printable ? (uint32_t)b : 256u + (uint32_t)k++;
        if (cp < 0x80) {
            t->byte_enc[b][0] = (char)cp;
            t->byte_enc[b][1] = 0;
            t->byte_enc_len[b] = 1;
        } else {
            t->byte_enc[b][0] = (char)(0xC0 | (cp >> 6));
            t->byte_enc[b][1] = (char)(0x80 | (cp & 0x3F));
            t->byte_enc[b][2] = 0;
            t->byte_enc_len[b] = 2;
        }
    }
}

bool pti_bpe_setup(pti_tokenizer *t, const pt_gguf *g, const char *pre)
{
    const char *name = pt_gguf_name(g);
    const pre_def *def = NULL;
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++) {
        if (name_in(k_pre[i].names, pre)) {
            def = &k_pre[i];
            break;
        }
    }
    if (!def) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "%s: tokenizer: pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported; "
                  "known: llama3/llama-bpe, qwen2/deepseek-r1-qwen, smollm/starcoder, gpt-2, "
                  "default, falcon, deepseek-coder, deepseek-v3, tekken, gpt-4o and their aliases",
                  name, pre);
        return false;
    }
    t->ignore_merges = def->flags & PRE_IGNORE_MERGES;
    if (def->flags & PRE_ADD_BOS) {
        t->add_bos = true;
    }
    if (def->flags & PRE_NO_BOS) {
        t->bos = -1;
    }
    for (int i = 0; i < PTI_TOK_MAX_REGEX && def->re[i]; i++) {
        int err;
        PCRE2_SIZE at;
        t->re[i] = pcre2_compile((PCRE2_SPTR)def->re[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &at, NULL);
        if (!t->re[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            pti_error(PT_ERR_RUNTIME, "tokenizer: pre-tokenizer '%s' regex %d: %s at %zu", pre, i,
                      (const char *)msg, (size_t)at);
            return false;
        }
        (void)pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE); /* interpreter if JIT fails */
        t->n_re = i + 1;
    }
    build_byte_table(t);

    int64_t km = pt_gguf_find_key(g, "tokenizer.ggml.merges");
    if (km < 0 || pt_gguf_kv_type(g, km) != PT_GGUF_ARRAY ||
        pt_gguf_arr_type(g, km) != PT_GGUF_STRING) {
        pt_clear_error();
        pti_error(PT_ERR_FORMAT, "%s: tokenizer: no string array tokenizer.ggml.merges", name);
        return false;
    }
    if (!pti_strtab_build_keep_first(&t->merges, g, km)) {
        return false;
    }
    t->merge_left = pti_malloc(sizeof(uint32_t) * (size_t)(t->merges.n + 1));
    if (!t->merge_left) {
        return false;
    }
    for (int64_t i = 0; i < t->merges.n; i++) {
        const char *s = t->merges.pool + t->merges.off[i];
        uint32_t len = t->merges.len[i];
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        t->merge_left[i] = sp ? (uint32_t)(sp - s) : UINT32_MAX;
    }
    return true;
}

int pti_bpe_check_pre(const char *pre)
{
    const pre_def *def = NULL;
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++) {
        if (name_in(k_pre[i].names, pre)) {
            def = &k_pre[i];
        }
    }
    if (!def) {
        return 0;
    }
    int n = 0;
    for (int i = 0; i < PTI_TOK_MAX_REGEX && def->re[i]; i++, n++) {
        int err;
        PCRE2_SIZE at;
        pcre2_code *re =
            pcre2_compile((PCRE2_SPTR)def->re[i], PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &at, NULL);
        if (!re) {
            return -1;
        }
        pcre2_code_free(re);
    }
    return n;
}

void pti_bpe_release(pti_tokenizer *t)
{
    for (int i = 0; i < t->n_re; i++) {
        pcre2_code_free(t->re[i]);
        t->re[i] = NULL;
    }
    t->n_re = 0;
}

/* ---- text normalisation (llama.cpp's unicode_cpts_from_utf8 + unicode_cpt_to_utf8) ---------- */

/* Decodes one code point as llama.cpp does (overlong forms and surrogates accepted, any other
 * malformed byte = U+FFFD consuming one byte). */
static uint32_t decode_llama(const uint8_t *s, size_t n, size_t *used)
{
    uint8_t c = s[0];
    *used = 1;
    if (c < 0x80) {
        return c;
    }
    if (!(c & 0x40)) {
        return 0xFFFD;
    }
    if (!(c & 0x20)) {
        if (n < 2 || (s[1] & 0xC0) != 0x80)
            return 0xFFFD;
        *used = 2;
        return ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (!(c & 0x10)) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 0xFFFD;
        *used = 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    if (!(c & 0x08)) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0xFFFD;
        *used = 4;
        uint32_t cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                      ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return cp > 0x10FFFF ? 0xFFFD : cp; /* llama.cpp throws here; we substitute */
    }
    return 0xFFFD;
}

static size_t encode_utf8(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- merges
 * -------------------------------------------------------------------------------------- */

typedef struct bpe_sym {
    int32_t prev, next;
    uint32_t off, n;
} bpe_sym;

typedef struct bpe_scratch {
    char *word; /* the byte-encoded piece */
    char *key;  /* "left right" being looked up */
    bpe_sym *sym;
    pti_merge *heap;
} bpe_scratch;

static void try_pair(const pti_tokenizer *t, bpe_scratch *sc, int32_t l, int32_t r, size_t *nh)
{
    if (l < 0 || r < 0) {
        return;
    }
    const bpe_sym *a = &sc->sym[l], *b = &sc->sym[r];
    memcpy(sc->key, sc->word + a->off, a->n);
    sc->key[a->n] = ' ';
    memcpy(sc->key + a->n + 1, sc->word + b->off, b->n);
    int32_t rank = pti_strtab_find(&t->merges, sc->key, a->n + 1 + b->n);
    if (rank < 0 || t->merge_left[rank] != a->n) {
        return;
    }
    pti_merge_push(sc->heap, nh, (pti_merge){l, r, -(double)rank, a->n + b->n});
}

/* Merges one byte-encoded word of n bytes (in sc->word) and emits its tokens. */
static void bpe_word(const pti_tokenizer *t, bpe_scratch *sc, size_t n, pti_tok_out *o)
{
    const char *w = sc->word;
    if (t->ignore_merges) {
        int32_t id = pti_strtab_find(&t->vocab, w, n);
        if (id >= 0) {
            pti_tok_emit(o, id);
            return;
        }
    }
    int32_t ns = 0;
    for (size_t off = 0; off < n;) {
        uint8_t c = (uint8_t)w[off];
        size_t l = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (l > n - off) {
            l = n - off;
        }
        sc->sym[ns] = (bpe_sym){ns - 1, off + l == n ? -1 : ns + 1, (uint32_t)off, (uint32_t)l};
        ns++;
        off += l;
    }
    size_t nh = 0;
    for (int32_t i = 1; i < ns; i++) {
        try_pair(t, sc, i - 1, i, &nh);
    }
    while (nh > 0) {
        pti_merge b = pti_merge_pop(sc->heap, &nh);
        bpe_sym *l = &sc->sym[b.left], *r = &sc->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) {
            continue; /* stale: one side was merged since */
        }
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) {
            sc->sym[r->next].prev = b.left;
        }
        try_pair(t, sc, l->prev, b.left, &nh);
        try_pair(t, sc, b.left, l->next, &nh);
    }
    for (int32_t i = ns > 0 ? 0 : -1; i >= 0; i = sc->sym[i].next) {
        const bpe_sym *s = &sc->sym[i];
        int32_t id = pti_strtab_find(&t->vocab, w + s->off, s->n);
        if (id >= 0) {
            pti_tok_emit(o, id);
            continue;
        }
        /* llama.cpp's fallback: each byte of the encoded text as a one-byte token, if any */
        for (uint32_t k = 0; k < s->n; k++) {
            int32_t b = pti_strtab_find(&t->vocab, w + s->off + k, 1);
            if (b >= 0) {
                pti_tok_emit(o, b);
            }
        }
    }
}

/* ---- splitting
 * ----------------------------------------------------------------------------------- */

typedef struct span {
    uint32_t b, e;
} span;

static size_t utf8_char_len(const char *s, size_t n)
{
    uint8_t c = (uint8_t)s[0];
    size_t l = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    return l > n ? n : l;
}

/* Refines pieces `in` by regex re into `out`; returns the new count, -1 on a PCRE2 error. */
static int64_t split_by(const pcre2_code *re, const char *rx, const span *in, int64_t n_in,
                        span *out, pcre2_match_data *md)
{
    int64_t n = 0;
    for (int64_t i = 0; i < n_in; i++) {
        const char *subj = rx + in[i].b;
        size_t len = in[i].e - in[i].b, pos = 0, last = 0;
        while (pos < len) {
            int rc = pcre2_match(re, (PCRE2_SPTR)subj, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) {
                break;
            }
            if (rc < 0 && rc != 0) {
                return -1;
            }
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = ov[0], me = ov[1];
            if (me <= ms) { /* empty match: step over one character */
                pos = ms + utf8_char_len(subj + ms, len - ms);
                continue;
            }
            if (ms > last) {
                out[n++] = (span){in[i].b + (uint32_t)last, in[i].b + (uint32_t)ms};
            }
            out[n++] = (span){in[i].b + (uint32_t)ms, in[i].b + (uint32_t)me};
            last = pos = me;
        }
        if (last < len) {
            out[n++] = (span){in[i].b + (uint32_t)last, in[i].e};
        }
    }
    return n;
}

bool pti_bpe_tokenize(const pti_tokenizer *t, const char *text, size_t len, pti_tok_out *o)
{
    if (len == 0) {
        return true;
    }
    /* re-encoded text: each input byte gives at most 3 bytes (a bad byte becomes U+FFFD) */
    size_t cap = 3 * len + 4;
    char *norm = pti_malloc(cap), *rx = pti_malloc(cap);
    span *a = pti_malloc(sizeof(span) * cap), *b = pti_malloc(sizeof(span) * cap);
    bpe_scratch sc = {pti_malloc(2 * cap + 8), pti_malloc(4 * cap + 16),
                      pti_malloc(sizeof(bpe_sym) * cap),
                      pti_malloc(sizeof(pti_merge) * (3 * cap + 8))};
    pcre2_match_data *md = pcre2_match_data_create(16, NULL);
    bool ok = norm && rx && a && b && sc.word && sc.key && sc.sym && sc.heap && md;
    if (!ok) {
        pti_error(PT_ERR_OOM, "pti_tokenize: out of memory");
        goto done;
    }
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t used;
        uint32_t cp = decode_llama((const uint8_t *)text + i, len - i, &used);
        size_t k = encode_utf8(cp, norm + n);
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            encode_utf8(0xFFFD, rx + n); /* PCRE2 refuses surrogates; same length */
        } else {
            memcpy(rx + n, norm + n, k);
        }
        n += k;
        i += used;
    }
    int64_t np = 1;
    a[0] = (span){0, (uint32_t)n};
    for (int r = 0; r < t->n_re; r++) {
        np = split_by(t->re[r], rx, a, np, b, md);
        if (np < 0) {
            pti_error(PT_ERR_RUNTIME, "pti_tokenize: pre-tokenizer regex failed");
            ok = false;
            goto done;
        }
        span *tmp = a;
        a = b;
        b = tmp;
    }
    for (int64_t i = 0; i < np; i++) {
        size_t wn = 0;
        for (uint32_t k = a[i].b; k < a[i].e; k++) {
            uint8_t c = (uint8_t)norm[k];
            memcpy(sc.word + wn, t->byte_enc[c], t->byte_enc_len[c]);
            wn += t->byte_enc_len[c];
        }
        bpe_word(t, &sc, wn, o);
    }
done:
    pcre2_match_data_free(md);
    free(norm);
    free(rx);
    free(a);
    free(b);
    free(sc.word);
    free(sc.key);
    free(sc.sym);
    free(sc.heap);
    return ok;
}
