/* The serving engine (issue 7): one loaded model decoding several generation streams at once
 * with continuous batching, for promeserve.
 *
 * An engine owns a pt_llm loaded with n_parallel KV cache slots and one worker thread. Requests
 * (prompt token ids + sampling options) wait in a bounded FIFO queue until a slot is free;
 * every step the worker builds ONE batch for pti_llm_forward holding the next token of each
 * generating slot plus a prompt chunk of slots still reading their prompt (the chunks share the
 * n_batch budget), runs it, and samples each slot's next token with that slot's own sampler,
 * stop strings and optional constraint. New requests join between steps; a finished or
 * cancelled request frees its slot at once. Each slot keeps the token ids of its cache, so a
 * request whose prompt extends what a free slot holds (a chat growing turn by turn) only
 * evaluates the new part: the worker picks the free slot with the longest common prefix.
 *
 * Threads: every function here may be called from any thread. Callbacks (pti_engine_events)
 * run on the worker thread; they must be quick (copy the text, signal a waiter) and must not
 * call back into the engine except pti_engine_cancel. Forward passes of all engines in the
 * process are serialized by one process-wide lock (the op thread pool is shared), so several
 * loaded models take turns step by step.
 *
 * Memory: prompt ids, stop strings and options are copied at submission; the KV cache,
 * samplers and scratch are allocated at load, so a steady decode step does not allocate. */
#ifndef PT_SERVE_ENGINE_H
#define PT_SERVE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prometorch/prometorch.h"

typedef struct pti_engine pti_engine;

typedef struct pti_engine_opts {
    int32_t n_parallel; /* KV cache slots = sequences decoded together; 0: 4 */
    int32_t num_ctx;    /* context per slot in tokens; 0: 4096, capped at the model's */
    int32_t n_batch;    /* tokens per forward pass at most; 0: 512 */
    int32_t max_queue;  /* requests waiting for a slot at most; 0: 512 */
    int32_t n_threads;  /* 0: keep pt_get_num_threads() */
    bool kv_f32;        /* float32 KV cache instead of float16 */
} pti_engine_opts;

/* A constraint on generated text (JSON format, JSON schema): the worker asks it whether a
 * token's bytes may come next, and tells it the bytes of each token taken. The sampled token
 * is checked first; only when it is refused are all tokens checked and the refused ones
 * masked before sampling again. End-of-generation tokens are allowed only when complete()
 * says the text is a complete value; once complete() is true and nothing but whitespace could
 * follow (done() true), generation ends with done_reason "stop". The engine owns `state` after
 * submission and calls free(state) once when the request ends. */
typedef struct pti_constraint {
    bool (*allows)(const void *state, const char *bytes, size_t n);
    void (*advance)(void *state, const char *bytes, size_t n);
    bool (*complete)(const void *state); /* a complete value: an end token may come */
    bool (*done)(const void *state);     /* nothing but whitespace may follow: stop now */
    void (*free)(void *state);
    void *state; /* NULL: no constraint */
} pti_constraint;

/* What the engine tells the submitter. Called on the worker thread. */
typedef struct pti_engine_events {
    /* Generated text (whole UTF-8 characters; stop strings held back and removed). Return
     * false to cancel the request (done_reason "cancel"). May be NULL. */
    bool (*on_text)(void *user, const char *text, size_t len);
    /* Exactly once per accepted request, last: st is PT_OK (stats->done_reason says why it
     * ended: "stop", "length", "cancel") or the error, with msg naming it. After it returns the
     * engine never touches user again. embedding (n_embd floats, L2-normalised mean of the
     * final hidden states, valid during the call) is non-NULL only for embedding requests. */
    void (*on_done)(void *user, pt_status st, const char *msg, const pt_gen_stats *stats,
                    const float *embedding, int32_t n_embd);
    void *user;
} pti_engine_events;

typedef struct pti_engine_request {
    const int32_t *ids; /* prompt token ids (copied); at least 1, at most num_ctx */
    int32_t n_ids;
    pt_gen_opts gen; /* sampling, num_predict, stop strings (copied); gen.stats ignored */
    const char *const *extra_stop; /* the chat family's end-of-turn strings (copied) */
    int32_t n_extra_stop;
    pti_constraint constraint; /* optional; taken over even when submission fails */
    bool embed;                /* an embedding request: evaluate the prompt, no generation */
    pti_engine_events ev;
} pti_engine_request;

/* Loads a .gguf file (a path; names are resolved by the caller) and starts the worker. NULL
 * with the error set on failure. */
pti_engine *pti_engine_load(const char *gguf_path, const pti_engine_opts *opts);
/* Cancels every queued and running request (each gets on_done with "cancel"), joins the
 * worker, frees everything. NULL is a no-op. */
void pti_engine_free(pti_engine *e);

/* The model (tokenizer, chat template, info). Use only its thread-safe read-only functions:
 * pt_llm_get_info, pt_llm_tokenize, pt_llm_detokenize, pt_llm_chat_prompt,
 * pti_llm_tokenizer, pti_llm_template. */
pt_llm *pti_engine_llm(const pti_engine *e);
const pti_engine_opts *pti_engine_get_opts(const pti_engine *e);

/* Queues a request. Returns its id (> 0), or 0 with the error set: PT_ERR_INVALID_ARG (bad
 * options, an empty prompt, a prompt longer than num_ctx: never truncated), PT_ERR_RUNTIME
 * with the message "server busy, please try again.  maximum pending requests exceeded" when
 * max_queue requests already wait (the server answers 503), PT_ERR_OOM. on_done is not called
 * for a request that was not accepted. */
uint64_t pti_engine_submit(pti_engine *e, const pti_engine_request *req);
/* True when the last failed submit failed because the queue was full. */
bool pti_engine_queue_full_error(void);

/* Cancels a request (queued: removed; running: its slot is freed before the next step). Its
 * on_done still comes, with done_reason "cancel". Unknown or finished ids are ignored. */
void pti_engine_cancel(pti_engine *e, uint64_t id);

/* Counters for /metrics and /api/ps (a consistent snapshot). */
typedef struct pti_engine_stats {
    int32_t n_parallel, busy_slots, queued;
    uint64_t requests_done, prompt_tokens, prompt_evaluated, gen_tokens, steps;
    int64_t prompt_ns, gen_ns; /* summed over requests */
    size_t kv_bytes;           /* memory of the KV cache */
} pti_engine_stats;
void pti_engine_get_stats(const pti_engine *e, pti_engine_stats *out);

#endif
