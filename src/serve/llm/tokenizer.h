/* Tokenizers built from a GGUF file's vocabulary (tokenizer.ggml.* keys), giving the same token
 * ids as llama.cpp's llama_tokenize (src/llama-vocab.cpp is the reference for the behaviour;
 * the code here is our own).
 *
 * Two vocabulary kinds are supported, chosen by tokenizer.ggml.model:
 *   "llama" -- SentencePiece-style (SPM): spaces become U+2581, the text is split into UTF-8
 *              characters, and the adjacent pair forming the vocabulary token with the highest
 *              score is merged until none is left; characters that are no token become byte
 *              tokens <0xHH>. tokenizer.ggml.add_space_prefix (default true) prepends a space
 *              to text that follows BOS or a special token.
 *   "gpt2"  -- byte-level BPE: the pre-tokenizer named by tokenizer.ggml.pre (regexes run with
 *              PCRE2, Unicode properties) splits the text into words, each word's bytes are
 *              mapped through GPT-2's byte-to-unicode table and merged by merge rank (lowest
 *              first). A missing pre means "default" (as llama.cpp); an unknown pre is refused
 *              with PT_ERR_UNSUPPORTED naming it.
 * Control, unknown and user-defined tokens (token types 3, 2, 4) are matched in the text before
 * splitting, longest first; control and unknown ones only when parse_special is set.
 *
 * A tokenizer is immutable after creation and may be used from several threads at once. It
 * copies what it needs: the pt_gguf may be closed afterwards. Errors are reported through
 * pt_last_status()/pt_last_error(). Token ids are int32_t; -1 means "none". */
#ifndef PT_SERVE_TOKENIZER_H
#define PT_SERVE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prometorch/gguf.h"

typedef struct pti_tokenizer pti_tokenizer;

typedef enum pti_tok_kind {
    PTI_TOK_SPM = 1, /* tokenizer.ggml.model "llama" */
    PTI_TOK_BPE = 2, /* tokenizer.ggml.model "gpt2" */
} pti_tok_kind;

/* For tests: the number of regexes of pre-tokenizer `pre` after compiling each (0: unknown
 * name, -1: a regex does not compile). */
int pti_bpe_check_pre(const char *pre);

/* Token attributes (llama.cpp's llama_token_attr bits), from tokenizer.ggml.token_type plus
 * llama.cpp's by-name fixes (EOT/EOG-looking texts become control, "unused" controls unused). */
enum {
    PTI_ATTR_UNDEFINED = 0,
    PTI_ATTR_UNKNOWN = 1 << 0,
    PTI_ATTR_UNUSED = 1 << 1,
    PTI_ATTR_NORMAL = 1 << 2,
    PTI_ATTR_CONTROL = 1 << 3,
    PTI_ATTR_USER_DEFINED = 1 << 4,
    PTI_ATTR_BYTE = 1 << 5,
};

/* Builds the tokenizer from g's metadata. Returns a new tokenizer (free with
 * pti_tokenizer_free), or NULL with PT_ERR_FORMAT (missing or ill-typed keys, array lengths that
 * disagree, bad merges), PT_ERR_UNSUPPORTED (an unknown tokenizer.ggml.model or .pre) or
 * PT_ERR_OOM. */
pti_tokenizer *pti_tokenizer_from_gguf(const pt_gguf *g);
/* NULL is a no-op. */
void pti_tokenizer_free(pti_tokenizer *t);

/* Tokenizes len bytes of text (need not be NUL-terminated; invalid UTF-8 is accepted as
 * llama.cpp does: for BPE each bad byte becomes U+FFFD). add_special adds BOS/EOS as the
 * vocabulary's add_bos/add_eos flags say; parse_special matches control tokens written in the
 * text. Writes up to cap ids to out (out may be NULL when cap is 0) and returns the number of
 * ids the text needs -- when that is more than cap, nothing useful is in out and the caller
 * retries with a bigger buffer. Negative on error (NULL tokenizer/text, cap < 0, OOM). */
int64_t pti_tokenize(const pti_tokenizer *t, const char *text, size_t len, bool add_special,
                     bool parse_special, int32_t *out, int64_t cap);

/* The text of token id as llama_token_to_piece(special=...) gives it: ▁ turned back into
 * spaces (SPM), GPT-2 byte characters turned back into bytes (BPE), byte tokens as their byte;
 * control/unknown tokens give their text when special is set and nothing otherwise. Copies up
 * to cap bytes (no NUL added) and returns the piece's length (more than cap: truncated copy),
 * or -1 for an id out of range. */
int32_t pti_token_to_piece(const pti_tokenizer *t, int32_t id, bool special, char *buf,
                           int32_t cap);
/* The attribute bits of id (PTI_ATTR_*), 0 when out of range. */
int pti_token_attr(const pti_tokenizer *t, int32_t id);
/* The id of a vocabulary string, or -1. */
int32_t pti_token_find(const pti_tokenizer *t, const char *text, size_t len);

pti_tok_kind pti_tokenizer_kind(const pti_tokenizer *t);
int32_t pti_tokenizer_vocab_size(const pti_tokenizer *t);
int32_t pti_tokenizer_bos(const pti_tokenizer *t); /* -1 when none */
int32_t pti_tokenizer_eos(const pti_tokenizer *t);
int32_t pti_tokenizer_eot(const pti_tokenizer *t);
int32_t pti_tokenizer_pad(const pti_tokenizer *t);
int32_t pti_tokenizer_unk(const pti_tokenizer *t);
bool pti_tokenizer_add_bos(const pti_tokenizer *t);
/* tokenizer.ggml.add_space_prefix (SPM: a space was put before the text when tokenizing). */
bool pti_tokenizer_add_space_prefix(const pti_tokenizer *t);
/* True when id ends generation (EOS, EOT, EOM and the end-of-turn-looking tokens llama.cpp
 * lists: <|im_end|>, <|endoftext|>, <end_of_turn>, ...). */
bool pti_tokenizer_is_eog(const pti_tokenizer *t, int32_t id);
/* The longest piece of any token, in bytes (to size pti_detok_push's buffer). */
int32_t pti_tokenizer_max_piece(const pti_tokenizer *t);
/* The pre-tokenizer name in use ("default" for SPM). Borrowed. */
const char *pti_tokenizer_pre(const pti_tokenizer *t);

/* ---- streaming detokenizer -------------------------------------------------------------------
 * Turns generated ids into text without ever emitting part of a UTF-8 character: bytes of an
 * incomplete character are held until a later token completes them (or pti_detok_flush gives
 * them up). Not thread-safe; one per stream. */
typedef struct pti_detok {
    const pti_tokenizer *tok;
    bool special;          /* render control tokens' text */
    unsigned char held[8]; /* bytes of an unfinished UTF-8 character */
    int n_held;
} pti_detok;

/* Starts a stream over tokenizer t (borrowed; must outlive the stream). */
void pti_detok_init(pti_detok *d, const pti_tokenizer *t, bool special);
/* Appends token id's text: writes the complete characters available now to buf (at most cap
 * bytes; pti_tokenizer_max_piece(t) + 8 is always enough) and returns how many bytes were
 * written; -1 for a bad id or a buffer too small (nothing is consumed then). */
int32_t pti_detok_push(pti_detok *d, int32_t id, char *buf, int32_t cap);
/* Emits whatever is still held (an incomplete character at the end of the stream) as is;
 * returns the byte count (at most 8), -1 if cap is too small. */
int32_t pti_detok_flush(pti_detok *d, char *buf, int32_t cap);

#endif

/* ---- private to src/serve/tokenizer*.c ----------------------------------------------------------
 */
#ifdef PTI_TOKENIZER_PRIVATE
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define PTI_TOK_MAX_REGEX 8

/* One string table with a hash index: strings live in one pool, the index is open addressing
 * over (id + 1), 0 = empty slot. */
typedef struct pti_strtab {
    char *pool;      /* every string, each followed by a NUL */
    uint64_t *off;   /* [n] offset of string i in pool */
    uint32_t *len;   /* [n] its length */
    uint32_t *slots; /* [mask + 1] */
    uint64_t mask;
    int64_t n;
} pti_strtab;

struct pti_tokenizer {
    pti_tok_kind kind;
    char pre[64];
    int32_t n_vocab;
    pti_strtab vocab;    /* token texts; lookup gives the id (a later duplicate wins) */
    float *scores;       /* [n_vocab] SPM merge priority (0 when absent) */
    uint8_t *attr;       /* [n_vocab] PTI_ATTR_* */
    char *pieces;        /* pieces (special form) of every token, concatenated */
    uint64_t *piece_off; /* [n_vocab + 1] */
    int32_t max_piece;

    /* BPE */
    pti_strtab merges;    /* "left right" strings; lookup gives the rank */
    uint32_t *merge_left; /* [n_merges] byte length of the left part (UINT32_MAX: none) */
    pcre2_code *re[PTI_TOK_MAX_REGEX];
    int n_re;
    bool ignore_merges;
    char byte_enc[256][3]; /* GPT-2 byte -> unicode character (UTF-8, NUL-terminated) */
    uint8_t byte_enc_len[256];

    /* special-token matching: the control/user-defined/unknown tokens, longest first, and a
     * byte trie over their texts (node 0 = root) */
    int32_t *special; /* [n_special] ids */
    int32_t n_special;
    int32_t *special_rank; /* [n_vocab] position in `special`, -1 when not special */
    struct pti_trie_node {
        int32_t child, sibling, token; /* token: id ending here, or -1 */
        uint8_t byte;
    } * trie;
    int32_t n_trie;

    int32_t bos, eos, eot, eom, unk, pad, sep;
    int32_t *eog;
    int32_t n_eog;
    bool add_bos, add_eos, add_space_prefix;
};

/* The output being filled by pti_tokenize: ids past cap are counted, not stored. */
typedef struct pti_tok_out {
    int32_t *out;
    int64_t cap;
    int64_t n;
} pti_tok_out;

static inline void pti_tok_emit(pti_tok_out *o, int32_t id)
{
    if (o->n < o->cap) {
        o->out[o->n] = id;
    }
    o->n++;
}

int32_t pti_strtab_find(const pti_strtab *st, const char *s, size_t len);
/* Builds st from string array `key` of g; a duplicate string keeps its first index. */
bool pti_strtab_build_keep_first(pti_strtab *st, const pt_gguf *g, int64_t key);
/* The merge queue both tokenizers use: candidate merges of adjacent symbols `left`, `right`
 * (`size` bytes together, to detect stale entries), popped highest `priority` first, then
 * leftmost -- SentencePiece merges by score, BPE by rank (priority = -rank). A binary heap. */
typedef struct pti_merge {
    int32_t left, right;
    double priority;
    uint32_t size;
} pti_merge;
void pti_merge_push(pti_merge *heap, size_t *n, pti_merge m);
pti_merge pti_merge_pop(pti_merge *heap, size_t *n);
/* tokenizer_bpe.c */
bool pti_bpe_setup(pti_tokenizer *t, const pt_gguf *g, const char *pre);
void pti_bpe_release(pti_tokenizer *t);
bool pti_bpe_tokenize(const pti_tokenizer *t, const char *text, size_t len, pti_tok_out *o);
#endif /* PTI_TOKENIZER_PRIVATE */
