/* Private parts of the serving engine shared by engine.c (the API, the queue, the worker
 * thread) and engine_step.c (one batched step: building the batch, sampling, stop rules,
 * constraints, embeddings). Nothing outside these two files includes it. */
#ifndef PT_SERVE_ENGINE_IMPL_H
#define PT_SERVE_ENGINE_IMPL_H

#include <pthread.h>

#include "engine.h"
#include "llm_gen.h"
#include "llm_model.h"
#include "sampler.h"
#include "tokenizer.h"

/* A request as copied at submission. */
typedef struct eng_req {
    uint64_t id;
    int32_t *ids, n_ids;
    pt_gen_opts gen;   /* stop and stop_tokens point into the copies below */
    char **stop;       /* one block: the pointers, then the strings */
    char **extra_stop; /* same */
    int32_t n_extra_stop;
    int32_t *stop_tokens;
    pti_constraint cons;
    bool embed;
    bool cancelled; /* set under the engine's lock; the worker ends it before the next step */
    pti_engine_events ev;
    struct eng_req *next;
} eng_req;

typedef enum { SLOT_FREE = 0, SLOT_PROMPT, SLOT_GEN } eng_slot_state;

/* A slot whose token is sampled ahead, in parallel with the others', and its row of logits. */
typedef struct eng_ahead {
    int32_t slot, row;
} eng_ahead;

/* One KV cache slot and the request using it. */
typedef struct eng_slot {
    int32_t index;
    eng_slot_state state;
    eng_req *r;    /* the request (set and cleared under the engine's lock) */
    int32_t *hist; /* [num_ctx] token ids whose keys/values are in the slot */
    int32_t n_hist;
    uint64_t admit_seq; /* admission order: prompt chunks are scheduled in it */
    int32_t next_tok;   /* SLOT_GEN: the sampled token the next step evaluates */
    int32_t pre_tok;    /* this step's token, sampled ahead with the others' (-1: none) */
    pti_sampler *smp;
    pti_detok detok;
    pti_stopper stop;
    bool stop_ready;
    char *piece, *cpiece; /* [piece_cap] detokenizer output, constraint check bytes */
    float *masked;        /* [n_vocab] logits with the constraint's refusals masked */
    double *embd_sum;     /* [n_embd] embedding requests: the sum of the hidden states */
    pt_gen_stats st;
    int32_t gen_counted; /* of st.gen_tokens, already in the engine's counters */
    int64_t t_admit, t_gen0;
} eng_slot;

struct pti_engine {
    pt_llm *llm;
    const pti_llm_model *m;
    pti_kv_cache *cache;
    const pti_tokenizer *tok;
    pti_engine_opts o;
    int32_t n_vocab, n_embd, piece_cap;
    eng_slot *slots;
    /* the batch of one step, sized at load */
    int32_t *tokens;
    pti_llm_run *runs;
    int32_t *run_slot; /* [n_parallel] the slot of each run */
    eng_ahead *ahead;  /* [n_parallel] the slots sampled ahead in a step (engine_step.c) */
    float *embd_out;   /* [n_embd] */

    pthread_t worker;
    bool worker_started;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stopping;
    eng_req *q_head, *q_tail; /* waiting for a slot */
    eng_req *dead;            /* cancelled while queued: on_done still to come */
    int32_t n_queued, busy;
    uint64_t next_id, next_seq;
    pti_engine_stats stats; /* the counters; n_parallel/busy/queued filled on read */
};

/* engine.c */
void pti_eng_req_free(eng_req *r);
/* Adds a finished request to the counters (under the lock). */
void pti_eng_count_done(pti_engine *e, const eng_slot *s);

/* engine_step.c */
/* Prepares a free slot for r (sampler, stop strings, prefix reuse). False on error: the
 * request is ended with on_done(error) and the slot stays free. */
bool pti_eng_admit(pti_engine *e, eng_slot *s, eng_req *r);
/* Ends the slot's request: flushes held text (stop/length), on_done, frees it, frees the
 * slot. st != PT_OK: an error with msg. */
void pti_eng_finish(pti_engine *e, eng_slot *s, pt_status st, const char *msg);
/* Runs one batched forward pass over the active slots and handles its outputs. */
void pti_eng_step(pti_engine *e);
/* The free slot that suits r best (longest common prefix; shortest history for embeddings). */
eng_slot *pti_eng_pick_slot(pti_engine *e, const eng_req *r);

#endif
