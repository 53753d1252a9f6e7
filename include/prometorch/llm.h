/* PromeTorch LLM inference: GGUF language models (llama, qwen2, qwen3, gemma3, phi3) loaded
 * from a file and run with the library's ops and quantized kernels (DESIGN.md §8, docs/llm.md).
 *
 * A pt_llm owns the mapped model file, its tokenizer, chat template and a key/value cache of
 * num_ctx positions. Generation reuses the cache for the longest common prefix of the previous
 * prompt + output (so a chat that grows turn by turn only processes the new turn). A pt_llm
 * is used by one thread at a time; ops inside run on the library's thread pool
 * (pt_set_num_threads, or opts.n_threads).
 *
 * Errors: functions returning a pointer give NULL, the others a pt_status; pt_last_error()
 * names the problem (a broken file is PT_ERR_FORMAT, an architecture or quant type we do not
 * run is PT_ERR_UNSUPPORTED, a prompt longer than the context is PT_ERR_INVALID_ARG: prompts
 * are never truncated silently). */
#ifndef PROMETORCH_LLM_H
#define PROMETORCH_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pt_llm pt_llm;

/* Load options. Zero values mean the default shown. */
typedef struct pt_llm_opts {
    int32_t n_threads; /* 0: keep pt_get_num_threads() */
    int32_t num_ctx;   /* context (KV cache) length in tokens; 0: 4096, capped at the model's */
    int32_t n_batch;   /* prompt tokens per forward pass; 0: 512 */
    bool kv_f32;       /* KV cache in float32 instead of float16 */
    pt_device device;  /* where weights, KV cache and compute live; zero value: the CPU. Its
                        * backend needs the kernels the engine dispatches (docs/llm.md) */
} pt_llm_opts;

/* Generation statistics (durations in nanoseconds, as Ollama reports them). */
typedef struct pt_gen_stats {
    int32_t prompt_tokens;    /* tokens of the prompt (the whole prompt, cached or not) */
    int32_t prompt_evaluated; /* of these, processed by a forward pass (the rest was cached) */
    int64_t prompt_ns;        /* time processing them */
    int32_t gen_tokens;       /* tokens generated */
    int64_t gen_ns;           /* time generating them (first sampled token to last) */
    const char *done_reason;  /* "stop" (end-of-generation token or stop string), "length"
                               * (num_predict or the context is full), "cancel" (the callback
                               * returned false); static string */
} pt_gen_stats;

/* Generation options. Start from pt_gen_opts_default() (Ollama's defaults) and change fields. */
typedef struct pt_gen_opts {
    int32_t num_predict;   /* tokens to generate at most; < 0: until the context is full */
    float temperature;     /* <= 0: greedy (argmax) */
    int32_t top_k;         /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float typical_p;       /* >= 1: off */
    float repeat_penalty;  /* 1: off */
    int32_t repeat_last_n; /* window of the penalties; -1: the whole context; 0: off */
    float presence_penalty;
    float frequency_penalty;
    int64_t seed;            /* < 0: random */
    const char *const *stop; /* stop strings (not included in the output); may be NULL */
    int32_t n_stop;
    const int32_t *stop_tokens; /* extra token ids that end generation (EOG tokens always do) */
    int32_t n_stop_tokens;
    bool raw;            /* pt_llm_generate: do not add BOS (the prompt is used as is) */
    bool special_output; /* render control tokens' text in the output */
    pt_gen_stats *stats; /* filled on return when not NULL */
} pt_gen_opts;

/* Called for each generated token with the text it adds: len may be 0 (bytes of an unfinished
 * UTF-8 character, or text held back while it may be the start of a stop string, are passed on
 * with a later call). Returning false stops generation (done_reason "cancel"). */
typedef bool (*pt_token_cb)(int32_t token, const char *text, size_t len, void *user);

/* One chat message. role: "system", "user", "assistant" or "tool". */
typedef struct pt_chat_msg {
    const char *role;
    const char *content;
} pt_chat_msg;

/* What a loaded model is. Strings are owned by the pt_llm. */
typedef struct pt_llm_info {
    const char *architecture;  /* general.architecture: "llama", "gemma3", ... */
    const char *name;          /* general.name, or the file name */
    const char *quantization;  /* "Q4_K_M", "Q8_0", "F16", ... (general.file_type) */
    const char *chat_template; /* the template family in use: "chatml", "llama3", ... */
    int64_t n_params;          /* parameters (elements of all tensors) */
    int64_t file_size;         /* bytes */
    int32_t context_length;    /* trained context (<arch>.context_length) */
    int32_t num_ctx;           /* the KV cache length in use */
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
} pt_llm_info;

/* Ollama's generation defaults: num_predict -1, temperature 0.8, top_k 40, top_p 0.9, min_p 0,
 * typical_p 1, repeat_penalty 1.1, repeat_last_n 64, penalties 0, seed -1. */
PT_API pt_gen_opts pt_gen_opts_default(void);

/* Loads a .gguf file (opts may be NULL). */
PT_API pt_llm *pt_llm_load(const char *model, const pt_llm_opts *opts);
PT_API void pt_llm_free(pt_llm *llm);
PT_API const pt_llm_info *pt_llm_get_info(const pt_llm *llm);

/* Completes `prompt` (tokenized with BOS unless opts->raw, control tokens written in the text
 * are parsed), streaming each token to cb (may be NULL). opts NULL: the defaults. */
PT_API pt_status pt_llm_generate(pt_llm *llm, const char *prompt, const pt_gen_opts *opts,
                                 pt_token_cb cb, void *user);
/* Same from token ids (no BOS is added). */
PT_API pt_status pt_llm_generate_tokens(pt_llm *llm, const int32_t *ids, int32_t n,
                                        const pt_gen_opts *opts, pt_token_cb cb, void *user);
/* Renders msgs with the model's chat template (generation prompt added), adds the family's
 * end-of-turn strings to the stop strings, and generates. */
PT_API pt_status pt_llm_chat(pt_llm *llm, const pt_chat_msg *msgs, int32_t n_msgs,
                             const pt_gen_opts *opts, pt_token_cb cb, void *user);
/* The chat prompt pt_llm_chat would use, as a new string (free()); NULL on error. */
PT_API char *pt_llm_chat_prompt(pt_llm *llm, const pt_chat_msg *msgs, int32_t n_msgs);

/* Tokenizes len bytes of text; writes up to cap ids and returns how many the text needs (more
 * than cap: call again with a bigger buffer), negative on error. */
PT_API int64_t pt_llm_tokenize(const pt_llm *llm, const char *text, size_t len, bool add_bos,
                               bool parse_special, int32_t *out, int64_t cap);
/* The text of n ids, as a new NUL-terminated string (free()); NULL on error. A token that
 * stands for byte 0 (byte fallback <0x00>, byte-level BPE) ends the C string there: use
 * pt_llm_detokenize_bytes when the text may contain NUL bytes. */
PT_API char *pt_llm_detokenize(const pt_llm *llm, const int32_t *ids, int64_t n, bool special);
/* Same, with the text's length in bytes in *len (NUL bytes included; the buffer has one more,
 * a terminating NUL). NULL on error, *len then 0. */
PT_API char *pt_llm_detokenize_bytes(const pt_llm *llm, const int32_t *ids, int64_t n, bool special,
                                     size_t *len);

/* The logits of the last position evaluated (n_vocab floats, valid until the next call), or
 * NULL before any evaluation. */
PT_API const float *pt_llm_logits(const pt_llm *llm);
/* Evaluates ids after the cached positions [0, n_past) (the cache keeps its first n_past
 * positions; the rest is dropped) and leaves the last position's logits in pt_llm_logits. */
PT_API pt_status pt_llm_eval(pt_llm *llm, const int32_t *ids, int32_t n, int32_t n_past);

#ifdef __cplusplus
}
#endif
#endif
