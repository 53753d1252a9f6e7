/* GGUF vocabularies as tokenizers: loading tokenizer.ggml.*, matching special tokens, the
 * SentencePiece-style (SPM) merge loop, token pieces and the streaming detokenizer. The
 * byte-level BPE half (pre-tokenizer regexes, merge ranks) is in tokenizer_bpe.c.
 *
 * Behaviour follows llama.cpp's llama-vocab.cpp, which is what the ids are checked against:
 *  - special tokens (control, unknown, user-defined) are cut out of the text first, longest
 *    token first, each token at all its non-overlapping places in the still-raw text;
 *    control/unknown ones only when parse_special;
 *  - SPM: every raw fragment is tokenized on its own, spaces as U+2581, with a space prepended
 *    when add_space_prefix is set and the fragment follows BOS/a special token (or starts the
 *    text); merges pick the highest-scoring adjacent pair, the leftmost on ties;
 *  - token attributes get llama.cpp's by-name fixes, since they decide what is matched.
 *
 * Known differences from llama.cpp (none is reached by the recorded corpora):
 *  - the per-model lstrip/rstrip attributes llama.cpp sets by model name (phi-3, jina, modern-bert)
 *    are not applied, nor its gpt-oss/solar <|end|> and gemma4/plamo </s> fixes;
 *  - special tokens of equal length are tried in id order (llama.cpp: std::sort, unspecified);
 *    when several EOT/FIM-looking texts exist and no metadata key names one, the lowest id is
 *    taken (llama.cpp: the first in its hash map's order);
 *  - SPM: a final symbol that is no token is emitted as byte tokens; llama.cpp first tries to
 *    split it along an earlier merge (rev_merge), which can only matter for ill-formed UTF-8;
 *  - BPE: code points above U+10FFFF (F4 90.. / F5-F7 leads) become U+FFFD; llama.cpp throws;
 *  - Unicode classes are PCRE2's (its Unicode version) where llama.cpp uses its own tables. */
#define PTI_TOKENIZER_PRIVATE
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"

/* ---- string table ------------------------------------------------------------------------------
 */

static uint64_t str_hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

int32_t pti_strtab_find(const pti_strtab *st, const char *s, size_t len)
{
    if (!st->slots) {
        return -1;
    }
    for (uint64_t i = str_hash(s, len) & st->mask;; i = (i + 1) & st->mask) {
        uint32_t v = st->slots[i];
        if (v == 0) {
            return -1;
        }
        uint32_t id = v - 1;
        if (st->len[id] == len && memcmp(st->pool + st->off[id], s, len) == 0) {
            return (int32_t)id;
        }
    }
}

/* Builds the table from string array `key` of g. `keep_first`: a duplicate keeps the earlier
 * index (merge ranks); otherwise the later one wins (llama.cpp's token_to_id[word] = i).
 * Empty strings are stored but not indexed. */
static bool strtab_build(pti_strtab *st, const pt_gguf *g, int64_t key, bool keep_first)
{
    int64_t n = pt_gguf_arr_count(g, key);
    if (n < 0 || n > INT32_MAX - 1) {
        pti_error(PT_ERR_FORMAT, "%s: tokenizer: array '%s' has a bad length", pt_gguf_name(g),
                  pt_gguf_kv_key(g, key, NULL));
        return false;
    }
    st->n = n;
    st->off = pti_malloc(sizeof(uint64_t) * (size_t)(n + 1));
    st->len = pti_malloc(sizeof(uint32_t) * (size_t)(n + 1));
    if (!st->off || !st->len) {
        return false;
    }
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t len = 0;
        if (!pt_gguf_arr_str(g, key, i, &len)) {
            return false;
        }
        if (len > UINT32_MAX / 2) {
            pti_error(PT_ERR_FORMAT, "%s: tokenizer: string %lld too long", pt_gguf_name(g),
                      (long long)i);
            return false;
        }
        st->off[i] = total;
        st->len[i] = (uint32_t)len;
        total += len + 1;
    }
    st->pool = pti_malloc(total + 1);
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) {
        cap <<= 1;
    }
    st->mask = cap - 1;
    st->slots = pti_calloc(cap, sizeof(uint32_t));
    if (!st->pool || !st->slots) {
        if (!st->slots) {
            pti_error(PT_ERR_OOM, "tokenizer: out of memory");
        }
        return false;
    }
    for (int64_t i = 0; i < n; i++) {
        const char *s = pt_gguf_arr_str(g, key, i, NULL);
        memcpy(st->pool + st->off[i], s, st->len[i]);
        st->pool[st->off[i] + st->len[i]] = 0;
        if (st->len[i] == 0) {
            continue;
        }
        uint64_t h = str_hash(s, st->len[i]) & st->mask;
        for (;; h = (h + 1) & st->mask) {
            uint32_t v = st->slots[h];
            if (v == 0) {
                st->slots[h] = (uint32_t)i + 1;
                break;
            }
            uint32_t o = v - 1;
            if (st->len[o] == st->len[i] && memcmp(st->pool + st->off[o], s, st->len[i]) == 0) {
                if (!keep_first) {
                    st->slots[h] = (uint32_t)i + 1;
                }
                break;
            }
        }
    }
    return true;
}

bool pti_strtab_build_keep_first(pti_strtab *st, const pt_gguf *g, int64_t key)
{
    return strtab_build(st, g, key, true);
}

static void strtab_free(pti_strtab *st)
{
    free(st->pool);
    free(st->off);
    free(st->len);
    free(st->slots);
    memset(st, 0, sizeof *st);
}

/* ---- metadata helpers --------------------------------------------------------------------------
 */

static const char *meta_str(const pt_gguf *g, const char *key)
{
    int64_t i = pt_gguf_find_key(g, key);
    if (i < 0 || pt_gguf_kv_type(g, i) != PT_GGUF_STRING) {
        return NULL;
    }
    return pt_gguf_get_str(g, i, NULL);
}

/* Reads an id key into *id when present and inside the vocabulary (else leaves it). */
static void meta_id(const pt_gguf *g, const char *key, int32_t n_vocab, int32_t *id)
{
    int64_t i = pt_gguf_find_key(g, key);
    int64_t v;
    if (i >= 0 && pt_gguf_get_int(g, i, &v) == PT_OK && v >= 0 && v < n_vocab) {
        *id = (int32_t)v;
    }
    pt_clear_error();
}

static void meta_bool(const pt_gguf *g, const char *key, bool *b)
{
    int64_t i = pt_gguf_find_key(g, key);
    bool v;
    if (i >= 0 && pt_gguf_get_bool(g, i, &v) == PT_OK) {
        *b = v;
    }
    pt_clear_error();
}

/* ---- attributes and special tokens
 * --------------------------------------------------------------- */

static int attr_from_type(int64_t type)
{
    switch (type) {
    case 1: return PTI_ATTR_NORMAL;
    case 2: return PTI_ATTR_UNKNOWN;
    case 3: return PTI_ATTR_CONTROL;
    case 4: return PTI_ATTR_USER_DEFINED;
    case 5: return PTI_ATTR_UNUSED;
    case 6: return PTI_ATTR_BYTE;
    default: return PTI_ATTR_UNDEFINED;
    }
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++) {
        if (strcmp(s, *list) == 0) {
            return true;
        }
    }
    return false;
}

/* llama.cpp's by-name fixes: end-of-turn-looking tokens become control and end generation;
 * control tokens named "unused" become unused. */
static const char *const k_eot_names[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "<|end_of_text|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "<\xef\xbd\x9c"
                                          "end\xe2\x96\x81"
                                          "of\xe2\x96\x81"
                                          "sentence\xef\xbd\x9c>",
                                          "<end_of_utterance>",
                                          NULL};
static const char *const k_eog_names[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>",
                                          "<\xef\xbd\x9c"
                                          "end\xe2\x96\x81"
                                          "of\xe2\x96\x81"
                                          "sentence\xef\xbd\x9c>",
                                          "[e~[",
                                          NULL};
/* fill-in-the-middle tokens: the metadata key, else the first text found; pad/rep/sep end
 * generation */
static const struct fim_group {
    const char *key;
    bool eog;
    const char *names[9];
} k_fim[] = {
    {"tokenizer.ggml.fim_pre_token_id",
     false,
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
      "<\xef\xbd\x9c"
      "fim\xe2\x96\x81"
      "begin\xef\xbd\x9c>",
      "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL}},
    {"tokenizer.ggml.fim_suf_token_id",
     false,
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
      "<\xef\xbd\x9c"
      "fim\xe2\x96\x81"
      "hole\xef\xbd\x9c>",
      "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL}},
    {"tokenizer.ggml.fim_mid_token_id",
     false,
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
      "<\xef\xbd\x9c"
      "fim\xe2\x96\x81"
      "end\xef\xbd\x9c>",
      "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL}},
    {"tokenizer.ggml.fim_pad_token_id",
     true,
     {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL}},
    {"tokenizer.ggml.fim_rep_token_id",
     true,
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL}},
    {"tokenizer.ggml.fim_sep_token_id", true, {"<|file_sep|>", NULL}},
};
static const char *const k_fim_deprecated[3] = {"tokenizer.ggml.prefix_token_id",
                                                "tokenizer.ggml.suffix_token_id",
                                                "tokenizer.ggml.middle_token_id"};

static bool add_eog(pti_tokenizer *t, int32_t id)
{
    if (id < 0) {
        return true;
    }
    for (int32_t i = 0; i < t->n_eog; i++) {
        if (t->eog[i] == id) {
            return true;
        }
    }
    int32_t *e = pti_realloc(t->eog, sizeof(int32_t) * (size_t)(t->n_eog + 1));
    if (!e) {
        pti_error(PT_ERR_OOM, "tokenizer: out of memory");
        return false;
    }
    t->eog = e;
    t->eog[t->n_eog++] = id;
    return true;
}

/* The lowest id whose text is in `names` (llama.cpp takes the first in its hash map's order,
 * which no model we know has more than one candidate for), or -1. */
static int32_t find_first(const pti_tokenizer *t, const char *const *names)
{
    int32_t best = -1;
    for (; *names; names++) {
        int32_t id = pti_strtab_find(&t->vocab, *names, strlen(*names));
        if (id >= 0 && (best < 0 || id < best)) {
            best = id;
        }
    }
    return best;
}

static bool fix_attributes(pti_tokenizer *t, const pt_gguf *g)
{
    if (t->eot < 0) {
        t->eot = find_first(t, k_eot_names);
        if (t->eot >= 0) {
            t->attr[t->eot] |= PTI_ATTR_CONTROL;
        }
    }
    if (t->eom < 0) {
        t->eom = pti_strtab_find(&t->vocab, "<|eom_id|>", 10);
        if (t->eom >= 0) {
            t->attr[t->eom] |= PTI_ATTR_CONTROL;
        }
    }
    for (size_t f = 0; f < sizeof k_fim / sizeof k_fim[0]; f++) {
        int32_t id = -1;
        if (f < 3) {
            meta_id(g, k_fim_deprecated[f], t->n_vocab, &id);
        }
        meta_id(g, k_fim[f].key, t->n_vocab, &id);
        if (id < 0) {
            id = find_first(t, k_fim[f].names);
            if (id >= 0) {
                t->attr[id] |= PTI_ATTR_CONTROL;
            }
        }
        if (k_fim[f].eog && !add_eog(t, id)) {
            return false;
        }
    }
    const pti_strtab *v = &t->vocab;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *s = v->pool + v->off[id];
        /* only the id the text lookup gives counts (llama.cpp walks token_to_id) */
        if (v->len[id] == 0 || pti_strtab_find(v, s, v->len[id]) != id) {
            continue;
        }
        if ((t->attr[id] & PTI_ATTR_CONTROL) && strstr(s, "unused")) {
            t->attr[id] |= PTI_ATTR_UNUSED;
        }
        if (in_list(s, k_eog_names)) {
            t->attr[id] |= PTI_ATTR_CONTROL;
            if (!add_eog(t, id)) {
                return false;
            }
        }
        if (strcmp(s, "<|channel|>") == 0 || strcmp(s, "<|message|>") == 0 ||
            strcmp(s, "<|start|>") == 0 || strcmp(s, "<|constrain|>") == 0) {
            t->attr[id] = PTI_ATTR_USER_DEFINED;
        }
    }
    return add_eog(t, t->eos) && add_eog(t, t->eot) && add_eog(t, t->eom);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool build_specials(pti_tokenizer *t)
{
    int32_t n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if ((t->attr[id] & (PTI_ATTR_CONTROL | PTI_ATTR_USER_DEFINED | PTI_ATTR_UNKNOWN)) &&
            t->vocab.len[id] > 0) {
            n++;
        }
    }
    t->special = pti_malloc(sizeof(int32_t) * (size_t)(n + 1));
    t->special_rank = pti_malloc(sizeof(int32_t) * (size_t)t->n_vocab);
    if (!t->special || !t->special_rank) {
        return false;
    }
    n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->special_rank[id] = -1;
        if ((t->attr[id] & (PTI_ATTR_CONTROL | PTI_ATTR_USER_DEFINED | PTI_ATTR_UNKNOWN)) &&
            t->vocab.len[id] > 0) {
            t->special[n++] = id;
        }
    }
    t->n_special = n;
    /* longest first, then by id (llama.cpp's std::sort leaves ties unordered) */
    uint64_t *keys = pti_malloc(sizeof(uint64_t) * (size_t)(n + 1));
    if (!keys) {
        return false;
    }
    for (int32_t i = 0; i < n; i++) {
        keys[i] =
            ((uint64_t)(UINT32_MAX - t->vocab.len[t->special[i]]) << 32) | (uint32_t)t->special[i];
    }
    qsort(keys, (size_t)n, sizeof(uint64_t), cmp_u64);
    for (int32_t i = 0; i < n; i++) {
        t->special[i] = (int32_t)(keys[i] & 0xFFFFFFFFu);
    }
    free(keys);
    uint64_t bytes = 1;
    for (int32_t i = 0; i < n; i++) {
        t->special_rank[t->special[i]] = i;
        bytes += t->vocab.len[t->special[i]];
    }
    t->trie = pti_malloc(sizeof(*t->trie) * (size_t)bytes);
    if (!t->trie) {
        return false;
    }
    t->trie[0] = (struct pti_trie_node){.child = -1, .sibling = -1, .token = -1, .byte = 0};
    t->n_trie = 1;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = t->special[i];
        const uint8_t *s = (const uint8_t *)t->vocab.pool + t->vocab.off[id];
        int32_t node = 0;
        for (uint32_t k = 0; k < t->vocab.len[id]; k++) {
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != s[k]) {
                c = t->trie[c].sibling;
            }
            if (c < 0) {
                c = t->n_trie++;
                t->trie[c] = (struct pti_trie_node){
                    .child = -1, .sibling = t->trie[node].child, .token = -1, .byte = s[k]};
                t->trie[node].child = c;
            }
            node = c;
        }
        if (t->trie[node].token < 0) {
            t->trie[node].token = id;
        }
    }
    return true;
}

/* ---- pieces ------------------------------------------------------------------------------------
 */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Byte of a "<0xHH>" token (strtol of the two characters after "<0x", as llama.cpp). */
static int byte_of_token(const char *s, uint32_t len)
{
    if (len < 5) {
        return 0;
    }
    int hi = hexval(s[3]), lo = hexval(s[4]);
    if (hi < 0)
        return 0;
    if (lo < 0)
        return hi;
    return hi * 16 + lo;
}

static uint32_t utf8_decode(const uint8_t *s, size_t n, size_t *used)
{
    uint8_t c = s[0];
    if (c < 0x80) {
        *used = 1;
        return c;
    }
    if ((c & 0xE0) == 0xC0 && n >= 2) {
        *used = 2;
        return ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if ((c & 0xF0) == 0xE0 && n >= 3) {
        *used = 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    if ((c & 0xF8) == 0xF0 && n >= 4) {
        *used = 4;
        return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
               ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    }
    *used = 1;
    return 0xFFFD;
}

/* Appends piece of token id to buf (cap ~ 4 * len + 64 is always enough); returns its length. */
static size_t make_piece(const pti_tokenizer *t, int32_t id, const int16_t *byte_dec, char *buf)
{
    const char *s = t->vocab.pool + t->vocab.off[id];
    uint32_t len = t->vocab.len[id];
    int a = t->attr[id];
    if (a & (PTI_ATTR_UNKNOWN | PTI_ATTR_CONTROL | PTI_ATTR_USER_DEFINED)) {
        memcpy(buf, s, len);
        return len;
    }
    if (a & PTI_ATTR_NORMAL) {
        size_t n = 0;
        if (t->kind == PTI_TOK_SPM) {
            for (uint32_t i = 0; i < len; i++) {
                if (i + 2 < len && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                    buf[n++] = ' ';
                    i += 2;
                } else {
                    buf[n++] = s[i];
                }
            }
            return n;
        }
        for (size_t i = 0; i < len;) {
            size_t used;
            uint32_t cp = utf8_decode((const uint8_t *)s + i, len - i, &used);
            if (cp < 324 && byte_dec[cp] >= 0) {
                buf[n++] = (char)byte_dec[cp];
            } else {
                n += (size_t)sprintf(buf + n, "[UNK_BYTE_0x");
                for (size_t k = 0; k < used; k++) {
                    n += (size_t)sprintf(buf + n, "%02x", (uint8_t)s[i + k]);
                }
                memcpy(buf + n, s, len);
                n += len;
                buf[n++] = ']';
            }
            i += used;
        }
        return n;
    }
    if (a & PTI_ATTR_BYTE) {
        buf[0] = (char)byte_of_token(s, len);
        return 1;
    }
    return 0;
}

static bool build_pieces(pti_tokenizer *t)
{
    int16_t byte_dec[324];
    for (int i = 0; i < 324; i++) {
        byte_dec[i] = -1;
    }
    if (t->kind == PTI_TOK_BPE) {
        for (int b = 0; b < 256; b++) {
            size_t used;
            uint32_t cp = utf8_decode((const uint8_t *)t->byte_enc[b], t->byte_enc_len[b], &used);
            byte_dec[cp] = (int16_t)b;
        }
    }
    t->piece_off = pti_malloc(sizeof(uint64_t) * ((size_t)t->n_vocab + 1));
    if (!t->piece_off) {
        return false;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = pti_malloc(cap);
    for (int32_t id = 0; buf && id < t->n_vocab; id++) {
        size_t len = t->vocab.len[id];
        size_t need = n + len * (len + 24) + 16; /* worst case: every char an unknown byte */
        if (need > cap) {
            while (cap < need) {
                cap *= 2;
            }
            char *nb = pti_realloc(buf, cap);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        t->piece_off[id] = n;
        size_t m = make_piece(t, id, byte_dec, buf + n);
        if (m > (size_t)t->max_piece) {
            t->max_piece = m > INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)m;
        }
        n += m;
    }
    if (!buf) {
        pti_error(PT_ERR_OOM, "tokenizer: out of memory");
        return false;
    }
    t->piece_off[t->n_vocab] = n;
    t->pieces = buf;
    char *shrunk = pti_realloc(t->pieces, n + 1); /* a failed shrink keeps the larger block */
    if (shrunk)
        t->pieces = shrunk;
    return true;
}

/* ---- creation ----------------------------------------------------------------------------------
 */

pti_tokenizer *pti_tokenizer_from_gguf(const pt_gguf *g)
{
    if (!g) {
        return pti_error_null(PT_ERR_NULL, "pti_tokenizer_from_gguf: gguf is NULL");
    }
    const char *name = pt_gguf_name(g);
    const char *model = meta_str(g, "tokenizer.ggml.model");
    if (!model) {
        return pti_error_null(PT_ERR_FORMAT, "%s: tokenizer: no string tokenizer.ggml.model", name);
    }
    pti_tokenizer *t = pti_calloc(1, sizeof *t);
    if (!t) {
        return pti_error_null(PT_ERR_OOM, "tokenizer: out of memory");
    }
    t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = t->sep = -1;
    const char *pre = meta_str(g, "tokenizer.ggml.pre");
    if (strcmp(model, "llama") == 0) {
        t->kind = PTI_TOK_SPM;
        t->bos = 1;
        t->eos = 2;
        t->unk = 0;
        t->add_space_prefix = true;
        t->add_bos = true;
        snprintf(t->pre, sizeof t->pre, "default");
    } else if (strcmp(model, "gpt2") == 0) {
        t->kind = PTI_TOK_BPE;
        t->bos = 11;
        t->eos = 11;
        snprintf(t->pre, sizeof t->pre, "%s", pre && *pre ? pre : "default");
    } else {
        pti_tokenizer_free(t);
        return pti_error_null(PT_ERR_UNSUPPORTED,
                              "%s: tokenizer: tokenizer.ggml.model '%s' is not supported "
                              "(supported: 'llama' (SentencePiece), 'gpt2' (byte-level BPE))",
                              name, model);
    }

    int64_t ktok = pt_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (ktok < 0 || pt_gguf_kv_type(g, ktok) != PT_GGUF_ARRAY ||
        pt_gguf_arr_type(g, ktok) != PT_GGUF_STRING) {
        pti_tokenizer_free(t);
        pt_clear_error();
        return pti_error_null(PT_ERR_FORMAT, "%s: tokenizer: no string array tokenizer.ggml.tokens",
                              name);
    }
    if (!strtab_build(&t->vocab, g, ktok, false)) {
        pti_tokenizer_free(t);
        return NULL;
    }
    t->n_vocab = (int32_t)t->vocab.n;
    t->scores = pti_calloc((size_t)t->n_vocab + 1, sizeof(float));
    t->attr = pti_calloc((size_t)t->n_vocab + 1, 1);
    if (!t->scores || !t->attr) {
        pti_tokenizer_free(t);
        return pti_error_null(PT_ERR_OOM, "tokenizer: out of memory");
    }
    int64_t ksc = pt_gguf_find_key(g, "tokenizer.ggml.scores");
    if (ksc >= 0) {
        pt_gguf_type at = pt_gguf_arr_type(g, ksc);
        if ((at != PT_GGUF_FLOAT32 && at != PT_GGUF_INT32) ||
            pt_gguf_arr_count(g, ksc) < t->n_vocab) {
            pti_tokenizer_free(t);
            pt_clear_error();
            return pti_error_null(PT_ERR_FORMAT,
                                  "%s: tokenizer: tokenizer.ggml.scores must be an f32/i32 array "
                                  "of at least %d entries",
                                  name, t->n_vocab);
        }
        const uint8_t *d = pt_gguf_arr_data(g, ksc);
        for (int32_t i = 0; i < t->n_vocab; i++) {
            if (at == PT_GGUF_FLOAT32) {
                memcpy(&t->scores[i], d + 4 * (size_t)i, 4);
            } else {
                int32_t v;
                memcpy(&v, d + 4 * (size_t)i, 4);
                t->scores[i] = (float)v;
            }
        }
    }
    int64_t kty = pt_gguf_find_key(g, "tokenizer.ggml.token_type");
    if (kty >= 0) {
        if (pt_gguf_arr_type(g, kty) != PT_GGUF_INT32 || pt_gguf_arr_count(g, kty) < t->n_vocab) {
            pti_tokenizer_free(t);
            pt_clear_error();
            return pti_error_null(PT_ERR_FORMAT,
                                  "%s: tokenizer: tokenizer.ggml.token_type must be an i32 array "
                                  "of at least %d entries",
                                  name, t->n_vocab);
        }
        const uint8_t *d = pt_gguf_arr_data(g, kty);
        for (int32_t i = 0; i < t->n_vocab; i++) {
            int32_t v;
            memcpy(&v, d + 4 * (size_t)i, 4);
            t->attr[i] = (uint8_t)attr_from_type(v);
        }
    } else {
        memset(t->attr, PTI_ATTR_NORMAL, (size_t)t->n_vocab);
    }

    if (t->kind == PTI_TOK_BPE && !pti_bpe_setup(t, g, t->pre)) {
        pti_tokenizer_free(t);
        return NULL;
    }
    meta_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);

    /* defaults out of range are disabled, as llama.cpp does */
    int32_t *ids[] = {&t->bos, &t->eos, &t->unk};
    for (int i = 0; i < 3; i++) {
        if (*ids[i] >= t->n_vocab) {
            *ids[i] = -1;
        }
    }
    meta_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos);
    meta_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos);
    meta_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot);
    meta_id(g, "tokenizer.ggml.eom_token_id", t->n_vocab, &t->eom);
    meta_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk);
    meta_id(g, "tokenizer.ggml.seperator_token_id", t->n_vocab, &t->sep);
    meta_id(g, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad);
    meta_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    meta_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos);

    if (!fix_attributes(t, g) || !build_specials(t) || !build_pieces(t)) {
        pti_tokenizer_free(t);
        return NULL;
    }
    return t;
}

void pti_tokenizer_free(pti_tokenizer *t)
{
    if (!t) {
        return;
    }
    pti_bpe_release(t);
    strtab_free(&t->vocab);
    strtab_free(&t->merges);
    free(t->merge_left);
    free(t->scores);
    free(t->attr);
    free(t->pieces);
    free(t->piece_off);
    free(t->special);
    free(t->special_rank);
    free(t->trie);
    free(t->eog);
    free(t);
}

/* ---- special-token partition
 * --------------------------------------------------------------------- */

typedef struct occ {
    int32_t rank; /* position of the token in t->special */
    int32_t pos;
} occ;

static int cmp_occ(const void *a, const void *b)
{
    const occ *x = a, *y = b;
    if (x->rank != y->rank) {
        return x->rank < y->rank ? -1 : 1;
    }
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Marks in claim[] (len entries, -1 = raw text) the special tokens cut out of the text: claim[p]
 * = id at a token's first byte, -2 on its other bytes. Same result as llama.cpp's
 * tokenizer_st_partition: tokens in `special` order, each at its leftmost non-overlapping
 * places within the still-raw text. */
static bool partition(const pti_tokenizer *t, const char *text, size_t len, bool parse_special,
                      int32_t *claim)
{
    for (size_t i = 0; i < len; i++) {
        claim[i] = -1;
    }
    if (t->n_special == 0) {
        return true;
    }
    occ *occs = NULL;
    size_t n_occ = 0, cap_occ = 0;
    for (size_t p = 0; p < len; p++) {
        int32_t node = t->trie[0].child;
        size_t k = p;
        while (node >= 0 && k < len) {
            while (node >= 0 && t->trie[node].byte != (uint8_t)text[k]) {
                node = t->trie[node].sibling;
            }
            if (node < 0) {
                break;
            }
            int32_t id = t->trie[node].token;
            if (id >= 0 &&
                (parse_special || !(t->attr[id] & (PTI_ATTR_CONTROL | PTI_ATTR_UNKNOWN)))) {
                if (n_occ == cap_occ) {
                    cap_occ = cap_occ ? cap_occ * 2 : 64;
                    occ *o = pti_realloc(occs, cap_occ * sizeof(occ));
                    if (!o) {
                        free(occs);
                        pti_error(PT_ERR_OOM, "pti_tokenize: out of memory");
                        return false;
                    }
                    occs = o;
                }
                occs[n_occ++] = (occ){t->special_rank[id], (int32_t)p};
            }
            node = t->trie[node].child;
            k++;
        }
    }
    if (n_occ > 1) {
        qsort(occs, n_occ, sizeof(occ), cmp_occ);
    }
    for (size_t i = 0; i < n_occ; i++) {
        int32_t id = t->special[occs[i].rank];
        size_t p = (size_t)occs[i].pos, n = t->vocab.len[id];
        bool free_run = true;
        for (size_t k = p; k < p + n; k++) {
            if (claim[k] != -1) {
                free_run = false;
                break;
            }
        }
        if (free_run) {
            claim[p] = id;
            for (size_t k = p + 1; k < p + n; k++) {
                claim[k] = -2;
            }
        }
    }
    free(occs);
    return true;
}

/* ---- SPM
 * ----------------------------------------------------------------------------------------- */

typedef struct spm_sym {
    int32_t prev, next;
    uint32_t off, n;
} spm_sym;

/* a before b in the queue: higher priority, then smaller left */
static bool merge_before(const pti_merge *a, const pti_merge *b)
{
    return a->priority > b->priority || (a->priority == b->priority && a->left < b->left);
}

void pti_merge_push(pti_merge *h, size_t *n, pti_merge b)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!merge_before(&b, &h[p])) {
            break;
        }
        h[i] = h[p];
        i = p;
    }
    h[i] = b;
}

pti_merge pti_merge_pop(pti_merge *h, size_t *n)
{
    pti_merge top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) {
            break;
        }
        if (c + 1 < *n && merge_before(&h[c + 1], &h[c])) {
            c++;
        }
        if (!merge_before(&h[c], &last)) {
            break;
        }
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) {
        h[i] = last;
    }
    return top;
}

static void spm_try(const pti_tokenizer *t, const char *s, spm_sym *sym, int32_t l, int32_t r,
                    pti_merge *heap, size_t *nh)
{
    if (l < 0 || r < 0) {
        return;
    }
    uint32_t size = sym[l].n + sym[r].n;
    int32_t id = pti_strtab_find(&t->vocab, s + sym[l].off, size);
    if (id < 0) {
        return;
    }
    pti_merge_push(heap, nh, (pti_merge){l, r, (double)t->scores[id], size});
}

static int32_t spm_byte_token(const pti_tokenizer *t, uint8_t c)
{
    static const char hex[] = "0123456789ABCDEF";
    char b[7] = {'<', '0', 'x', hex[c >> 4], hex[c & 15], '>', 0};
    int32_t id = pti_strtab_find(&t->vocab, b, 6);
    if (id < 0) {
        char one = (char)c;
        id = pti_strtab_find(&t->vocab, &one, 1);
    }
    return id >= 0 ? id : t->unk;
}

static size_t utf8_len(uint8_t c)
{
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

/* s: the escaped fragment (n bytes); sym/heap scratch of n and 3n + 4 entries. */
static void spm_tokenize(const pti_tokenizer *t, const char *s, size_t n, spm_sym *sym,
                         pti_merge *heap, pti_tok_out *o)
{
    int32_t ns = 0;
    for (size_t off = 0; off < n;) {
        size_t l = utf8_len((uint8_t)s[off]);
        if (l > n - off) {
            l = n - off;
        }
        sym[ns] = (spm_sym){ns - 1, off + l == n ? -1 : ns + 1, (uint32_t)off, (uint32_t)l};
        ns++;
        off += l;
    }
    size_t nh = 0;
    for (int32_t i = 1; i < ns; i++) {
        spm_try(t, s, sym, i - 1, i, heap, &nh);
    }
    while (nh > 0) {
        pti_merge b = pti_merge_pop(heap, &nh);
        spm_sym *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) {
            continue;
        }
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) {
            sym[r->next].prev = b.left;
        }
        spm_try(t, s, sym, l->prev, b.left, heap, &nh);
        spm_try(t, s, sym, b.left, l->next, heap, &nh);
    }
    for (int32_t i = ns > 0 ? 0 : -1; i >= 0; i = sym[i].next) {
        int32_t id = pti_strtab_find(&t->vocab, s + sym[i].off, sym[i].n);
        if (id >= 0) {
            pti_tok_emit(o, id);
            continue;
        }
        for (uint32_t k = 0; k < sym[i].n; k++) {
            int32_t b = spm_byte_token(t, (uint8_t)s[sym[i].off + k]);
            if (b >= 0) {
                pti_tok_emit(o, b);
            }
        }
    }
}

/* ---- tokenize
 * ------------------------------------------------------------------------------------ */

int64_t pti_tokenize(const pti_tokenizer *t, const char *text, size_t len, bool add_special,
                     bool parse_special, int32_t *out, int64_t cap)
{
    if (!t || (!text && len > 0) || cap < 0 || (!out && cap > 0)) {
        pti_error(PT_ERR_INVALID_ARG, "pti_tokenize: NULL tokenizer/text/out or negative cap");
        return -1;
    }
    if (len > (size_t)INT32_MAX / 8) {
        pti_error(PT_ERR_INVALID_ARG, "pti_tokenize: text of %zu bytes is too long", len);
        return -1;
    }
    pti_tok_out o = {out, cap, 0};
    int32_t *claim = pti_malloc(sizeof(int32_t) * (len + 1));
    if (!claim) {
        pti_error(PT_ERR_OOM, "pti_tokenize: out of memory");
        return -1;
    }
    if (!partition(t, text, len, parse_special, claim)) {
        free(claim);
        return -1;
    }
    bool ok = true;
    char *esc = NULL;
    spm_sym *sym = NULL;
    pti_merge *heap = NULL;
    if (t->kind == PTI_TOK_SPM) {
        /* worst case: every byte a space (3 bytes as U+2581) plus the prefix */
        esc = pti_malloc(3 * len + 4);
        sym = pti_malloc(sizeof(spm_sym) * (3 * len + 4));
        heap = pti_malloc(sizeof(pti_merge) * (9 * len + 12));
        if (!esc || !sym || !heap) {
            pti_error(PT_ERR_OOM, "pti_tokenize: out of memory");
            ok = false;
        }
    }
    if (ok && add_special && t->add_bos && t->bos >= 0) {
        pti_tok_emit(&o, t->bos);
    }
    bool prev_special = true;
    for (size_t p = 0; ok && p < len;) {
        if (claim[p] >= 0) {
            pti_tok_emit(&o, claim[p]);
            p += t->vocab.len[claim[p]];
            prev_special = true;
            continue;
        }
        size_t e = p;
        while (e < len && claim[e] == -1) {
            e++;
        }
        if (t->kind == PTI_TOK_SPM) {
            size_t n = 0;
            if (t->add_space_prefix && prev_special) {
                memcpy(esc, "\xe2\x96\x81", 3);
                n = 3;
            }
            for (size_t k = p; k < e; k++) {
                if (text[k] == ' ') {
                    memcpy(esc + n, "\xe2\x96\x81", 3);
                    n += 3;
                } else {
                    esc[n++] = text[k];
                }
            }
            spm_tokenize(t, esc, n, sym, heap, &o);
        } else {
            ok = pti_bpe_tokenize(t, text + p, e - p, &o);
        }
        prev_special = false;
        p = e;
    }
    if (ok && add_special && t->add_eos && t->eos >= 0) {
        pti_tok_emit(&o, t->eos);
    }
    free(esc);
    free(sym);
    free(heap);
    free(claim);
    return ok ? o.n : -1;
}

/* ---- pieces and getters
 * -------------------------------------------------------------------------- */

int32_t pti_token_to_piece(const pti_tokenizer *t, int32_t id, bool special, char *buf, int32_t cap)
{
    if (!t || id < 0 || id >= t->n_vocab || cap < 0 || (!buf && cap > 0)) {
        return -1;
    }
    if (!special && (t->attr[id] & (PTI_ATTR_UNKNOWN | PTI_ATTR_CONTROL))) {
        return 0;
    }
    uint64_t n = t->piece_off[id + 1] - t->piece_off[id];
    memcpy(buf, t->pieces + t->piece_off[id], n < (uint64_t)cap ? n : (size_t)cap);
    return (int32_t)n;
}

int pti_token_attr(const pti_tokenizer *t, int32_t id)
{
    return (!t || id < 0 || id >= t->n_vocab) ? 0 : t->attr[id];
}

int32_t pti_token_find(const pti_tokenizer *t, const char *text, size_t len)
{
    return (t && text) ? pti_strtab_find(&t->vocab, text, len) : -1;
}

pti_tok_kind pti_tokenizer_kind(const pti_tokenizer *t)
{
    return t ? t->kind : 0;
}
int32_t pti_tokenizer_vocab_size(const pti_tokenizer *t)
{
    return t ? t->n_vocab : 0;
}
int32_t pti_tokenizer_bos(const pti_tokenizer *t)
{
    return t ? t->bos : -1;
}
int32_t pti_tokenizer_eos(const pti_tokenizer *t)
{
    return t ? t->eos : -1;
}
int32_t pti_tokenizer_eot(const pti_tokenizer *t)
{
    return t ? t->eot : -1;
}
int32_t pti_tokenizer_pad(const pti_tokenizer *t)
{
    return t ? t->pad : -1;
}
int32_t pti_tokenizer_unk(const pti_tokenizer *t)
{
    return t ? t->unk : -1;
}
bool pti_tokenizer_add_bos(const pti_tokenizer *t)
{
    return t && t->add_bos;
}

bool pti_tokenizer_add_space_prefix(const pti_tokenizer *t)
{
    return t->kind == PTI_TOK_SPM && t->add_space_prefix;
}
int32_t pti_tokenizer_max_piece(const pti_tokenizer *t)
{
    return t ? t->max_piece : 0;
}
const char *pti_tokenizer_pre(const pti_tokenizer *t)
{
    return t ? t->pre : NULL;
}

bool pti_tokenizer_is_eog(const pti_tokenizer *t, int32_t id)
{
    if (!t || id < 0) {
        return false;
    }
    for (int32_t i = 0; i < t->n_eog; i++) {
        if (t->eog[i] == id) {
            return true;
        }
    }
    return false;
}

/* ---- streaming detokenizer
 * ----------------------------------------------------------------------- */

void pti_detok_init(pti_detok *d, const pti_tokenizer *t, bool special)
{
    memset(d, 0, sizeof *d);
    d->tok = t;
    d->special = special;
}

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8 character that the
 * next bytes could still complete. */
static size_t complete_prefix(const unsigned char *s, size_t n)
{
    size_t back = 0;
    /* look at most 3 bytes back for the lead byte of the last character */
    for (size_t i = n; i > 0 && back < 4; i--, back++) {
        unsigned char c = s[i - 1];
        if ((c & 0xC0) == 0x80) {
            continue; /* continuation byte */
        }
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (c >= 0xF8) {
            need = 1; /* not a lead byte: emit as is */
        }
        return (back + 1 < need) ? i - 1 : n;
    }
    return n;
}

int32_t pti_detok_push(pti_detok *d, int32_t id, char *buf, int32_t cap)
{
    if (!d || !d->tok || id < 0 || id >= d->tok->n_vocab || cap < 0) {
        return -1;
    }
    const pti_tokenizer *t = d->tok;
    int32_t n = 0;
    if (d->special || !(t->attr[id] & (PTI_ATTR_UNKNOWN | PTI_ATTR_CONTROL))) {
        n = (int32_t)(t->piece_off[id + 1] - t->piece_off[id]);
    }
    int64_t total = d->n_held + n;
    if (total > cap) {
        return -1;
    }
    memcpy(buf, d->held, (size_t)d->n_held);
    memcpy(buf + d->n_held, t->pieces + t->piece_off[id], (size_t)n);
    size_t keep = complete_prefix((const unsigned char *)buf, (size_t)total);
    d->n_held = (int)((size_t)total - keep);
    memcpy(d->held, buf + keep, (size_t)d->n_held);
    return (int32_t)keep;
}

int32_t pti_detok_flush(pti_detok *d, char *buf, int32_t cap)
{
    if (!d || cap < d->n_held) {
        return -1;
    }
    int32_t n = d->n_held;
    memcpy(buf, d->held, (size_t)n);
    d->n_held = 0;
    return n;
}
