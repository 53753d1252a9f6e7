/* Internal parts of the LLM API shared by llm.c (loading, evaluation, entry points) and
 * llm_gen.c (the generation loop), and later by the server. */
#ifndef PT_SERVE_LLM_GEN_H
#define PT_SERVE_LLM_GEN_H

#include "chat_template.h"
#include "sampler.h"
#include "prometorch/prometorch.h"
#include "tokenizer.h"

struct pti_llm_model;
struct pti_kv_cache;

/* What a num_ctx / n_batch of 0 means, for pt_llm_load and the batching engine alike. */
#define PTI_LLM_DEFAULT_NUM_CTX 4096
#define PTI_LLM_DEFAULT_N_BATCH 512

/* pt_llm_load with a KV cache of n_slots slots of num_ctx positions each (the server's
 * parallel sequences); the pt_llm_* functions use slot 0. path is a .gguf file or a name. */
pt_llm *pti_llm_load_slots(const char *path, const pt_llm_opts *opts, int32_t n_slots);
/* The model and the KV cache, for driving pti_llm_forward directly (src/serve/engine.c). */
const struct pti_llm_model *pti_llm_model_of(const pt_llm *llm);
struct pti_kv_cache *pti_llm_cache_of(pt_llm *llm);

const pti_tokenizer *pti_llm_tokenizer(const pt_llm *llm);
const pti_chat_template *pti_llm_template(const pt_llm *llm);
int32_t pti_llm_num_ctx(const pt_llm *llm);
int32_t pti_llm_n_vocab(const pt_llm *llm);
/* How many leading ids of ids[0..n) are already in the KV cache. */
int32_t pti_llm_cached(const pt_llm *llm, const int32_t *ids, int32_t n);

/* Generates after the prompt ids (reusing the cached prefix), with the stop strings of opts
 * plus extra_stop (a chat family's end-of-turn texts). */
pt_status pti_llm_generate_ids(pt_llm *llm, const int32_t *ids, int32_t n, const pt_gen_opts *opts,
                               const char *const *extra_stop, int32_t n_extra_stop, pt_token_cb cb,
                               void *user);

/* A sampler for generation options o (Ollama's repeat_last_n -1 is the whole context,
 * num_ctx); NULL with the error set (pti_sampler_new). */
pti_sampler *pti_gen_sampler_new(const pt_gen_opts *o, int32_t num_ctx, int32_t n_vocab);

/* ---- stop strings over a text stream ----------------------------------------------------------
 */

/* Holds back generated text while it may be the start of a stop string. */
typedef struct pti_stopper {
    const char *const *stops[2]; /* two lists: the caller's and the template's */
    int32_t n_stops[2];
    char *pend; /* text not yet passed on (from `passed` on) */
    size_t n_pend, cap;
    size_t passed; /* leading bytes of pend already handed out by the last call */
} pti_stopper;

/* cap_hint: the longest text one push may add. Returns false on OOM. */
bool pti_stopper_init(pti_stopper *s, const char *const *a, int32_t na, const char *const *b,
                      int32_t nb, size_t cap_hint);
void pti_stopper_free(pti_stopper *s);
/* Appends text; sets *emit and *n_emit to the text that can be passed on now (pointing into the
 * stopper, valid until the next call) and returns true when a stop string was found (the text
 * from it on is dropped). */
bool pti_stopper_push(pti_stopper *s, const char *text, size_t len, const char **emit,
                      size_t *n_emit);
/* Everything still held (at the end of generation). */
void pti_stopper_flush(pti_stopper *s, const char **emit, size_t *n_emit);

#endif
