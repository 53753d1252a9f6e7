/* One step of the serving engine (engine.h): the batch of the active slots (one token of each
 * generating slot first, then prompt chunks in admission order, n_batch tokens at most), the
 * forward pass under the process-wide lock, and what each slot does with its output --
 * sampling with the request's sampler and constraint, detokenizing, stop tokens and strings,
 * num_predict and the context limit, or summing hidden states for an embedding. Also the
 * admission of a request into a slot (prefix reuse) and its end (on_done). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/internal.h"
#include "engine_impl.h"

/* Forward passes of all engines in the process take turns: the op thread pool is shared. */
static pthread_mutex_t forward_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void fail_request(pti_engine *e, eng_slot *s)
{
    pt_status st = pt_last_status();
    pti_eng_finish(e, s, st != PT_OK ? st : PT_ERR_RUNTIME, pt_last_error());
}

/* ---- admission ---------------------------------------------------------------------------------
 */

static int32_t common_prefix(const eng_slot *s, const eng_req *r)
{
    int32_t n = 0, lim = s->n_hist < r->n_ids ? s->n_hist : r->n_ids;
    while (n < lim && s->hist[n] == r->ids[n])
        n++;
    return n;
}

eng_slot *pti_eng_pick_slot(pti_engine *e, const eng_req *r)
{
    eng_slot *best = NULL;
    int32_t best_common = -1;
    for (int32_t i = 0; i < e->o.n_parallel; i++) {
        eng_slot *s = &e->slots[i];
        if (s->r)
            continue;
        /* embeddings re-evaluate everything: take the slot whose cache is worth least */
        int32_t c = r->embed ? -s->n_hist : common_prefix(s, r);
        bool better =
            c > best_common || (c == best_common && !r->embed && best && s->n_hist < best->n_hist);
        if (!best || better) {
            best = s;
            best_common = c;
        }
    }
    return best;
}

static bool setup_generation(pti_engine *e, eng_slot *s, eng_req *r)
{
    s->smp = pti_gen_sampler_new(&r->gen, e->o.num_ctx, e->n_vocab);
    if (!s->smp)
        return false;
    for (int32_t i = 0; i < r->n_ids; i++) /* the prompt counts for the penalties */
        if (pti_sampler_accept(s->smp, r->ids[i]) != PT_OK)
            return false;
    pti_detok_init(&s->detok, e->tok, r->gen.special_output);
    s->stop_ready =
        pti_stopper_init(&s->stop, r->gen.stop, r->gen.n_stop, (const char *const *)r->extra_stop,
                         r->n_extra_stop, (size_t)e->piece_cap);
    return s->stop_ready;
}

bool pti_eng_admit(pti_engine *e, eng_slot *s, eng_req *r)
{
    memset(&s->st, 0, sizeof s->st);
    s->pre_tok = -1;
    s->st.prompt_tokens = r->n_ids;
    s->t_admit = now_ns();
    s->t_gen0 = 0;
    s->gen_counted = 0;
    bool ok;
    if (r->embed) {
        s->n_hist = 0; /* every position's hidden state is needed */
        s->embd_sum = pti_calloc((size_t)e->n_embd, sizeof *s->embd_sum);
        ok = s->embd_sum != NULL;
    } else {
        int32_t common = common_prefix(s, r);
        s->n_hist = common < r->n_ids ? common : r->n_ids - 1; /* one to evaluate for logits */
        ok = setup_generation(e, s, r);
    }
    s->st.prompt_evaluated = r->n_ids - s->n_hist;
    if (!ok)
        fail_request(e, s);
    return ok;
}

/* ---- the end of a request ----------------------------------------------------------------------
 */

/* Passes text to on_text; false when it asked to stop. */
static bool deliver(eng_slot *s, const char *text, size_t len)
{
    if (len == 0 || !s->r->ev.on_text)
        return true;
    return s->r->ev.on_text(s->r->ev.user, text, len);
}

/* The text still held at a normal end (an unfinished character, a partial stop string). */
static void flush_text(pti_engine *e, eng_slot *s)
{
    const char *out;
    size_t n_out;
    int32_t k = pti_detok_flush(&s->detok, s->piece, e->piece_cap);
    if (k > 0 && pti_stopper_push(&s->stop, s->piece, (size_t)k, &out, &n_out)) {
        deliver(s, out, n_out);
        return;
    }
    if (k > 0)
        deliver(s, out, n_out);
    pti_stopper_flush(&s->stop, &out, &n_out);
    deliver(s, out, n_out);
}

void pti_eng_finish(pti_engine *e, eng_slot *s, pt_status st, const char *msg)
{
    eng_req *r = s->r;
    if (s->t_gen0)
        s->st.gen_ns = now_ns() - s->t_gen0;
    bool normal =
        st == PT_OK && s->st.done_reason &&
        (strcmp(s->st.done_reason, "stop") == 0 || strcmp(s->st.done_reason, "length") == 0);
    if (normal && !r->embed && s->stop_ready)
        flush_text(e, s);
    if (st != PT_OK)
        s->st.done_reason = NULL;
    bool embedded = st == PT_OK && r->embed && s->embd_sum && s->n_hist == r->n_ids;
    if (embedded) { /* the mean over the positions, L2-normalised */
        double norm = 0.0;
        for (int32_t i = 0; i < e->n_embd; i++)
            norm += s->embd_sum[i] * s->embd_sum[i];
        norm = norm > 0.0 ? sqrt(norm) : 1.0; /* the mean's norm is this / n_ids */
        for (int32_t i = 0; i < e->n_embd; i++)
            e->embd_out[i] = (float)(s->embd_sum[i] / norm);
    }
    /* the message may live in this thread's error buffer, which on_done may overwrite */
    char copy[1024];
    if (st != PT_OK)
        snprintf(copy, sizeof copy, "%s", msg && *msg ? msg : "the request failed");
    pthread_mutex_lock(&e->mu); /* counted and freed before on_done: a waiter sees it all */
    pti_eng_count_done(e, s);
    s->r = NULL;
    s->state = SLOT_FREE;
    e->busy--;
    pthread_mutex_unlock(&e->mu);
    r->ev.on_done(r->ev.user, st, st != PT_OK ? copy : NULL, &s->st, embedded ? e->embd_out : NULL,
                  embedded ? e->n_embd : 0);
    pti_sampler_free(s->smp);
    s->smp = NULL;
    if (s->stop_ready)
        pti_stopper_free(&s->stop);
    s->stop_ready = false;
    free(s->embd_sum);
    s->embd_sum = NULL;
    pti_eng_req_free(r);
}

/* ---- sampling ----------------------------------------------------------------------------------
 */

static bool is_stop_token(const pti_engine *e, const eng_req *r, int32_t tok)
{
    if (pti_tokenizer_is_eog(e->tok, tok))
        return true;
    for (int32_t i = 0; i < r->gen.n_stop_tokens; i++)
        if (r->gen.stop_tokens[i] == tok)
            return true;
    return false;
}

/* The bytes tok adds to the text as the constraint sees them (control tokens: none). */
static int32_t token_bytes(const pti_engine *e, eng_slot *s, int32_t tok)
{
    int32_t k = pti_token_to_piece(e->tok, tok, false, s->cpiece, e->piece_cap);
    return k < 0 ? 0 : (k > e->piece_cap ? e->piece_cap : k);
}

/* Whether the constraint lets tok come next: an end token (or one with no text) only when
 * the text so far is a complete value. */
static bool constraint_allows(const pti_engine *e, eng_slot *s, int32_t tok)
{
    const pti_constraint *c = &s->r->cons;
    if (is_stop_token(e, s->r, tok))
        return c->complete(c->state);
    int32_t k = token_bytes(e, s, tok);
    if (k == 0)
        return c->complete(c->state);
    return c->allows(c->state, s->cpiece, (size_t)k);
}

/* The next token for these logits: the sampler's choice, or when the constraint refuses it,
 * a new draw among the tokens it allows. -1 with the error set when none is allowed. */
static int32_t sample_token(pti_engine *e, eng_slot *s, const float *logits)
{
    int32_t tok = pti_sample(s->smp, logits, e->n_vocab);
    if (tok < 0 || !s->r->cons.state || constraint_allows(e, s, tok))
        return tok;
    for (int32_t v = 0; v < e->n_vocab; v++)
        s->masked[v] = constraint_allows(e, s, v) ? logits[v] : -INFINITY;
    tok = pti_sample(s->smp, s->masked, e->n_vocab);
    if (tok < 0)
        pti_error(PT_ERR_RUNTIME, "the output format allows no token of the vocabulary here");
    return tok;
}

/* Detokenizes and delivers tok; false when the request ends (done_reason set). */
static bool emit_token(pti_engine *e, eng_slot *s, int32_t tok)
{
    s->st.gen_tokens++;
    if (is_stop_token(e, s->r, tok)) {
        s->st.done_reason = "stop";
        return false;
    }
    int32_t k = pti_detok_push(&s->detok, tok, s->piece, e->piece_cap);
    if (k < 0) {
        pti_error(PT_ERR_FORMAT,
                  "the model produced token %d, which the vocabulary of %d "
                  "tokens has no text for",
                  (int)tok, (int)pti_tokenizer_vocab_size(e->tok));
        return false;
    }
    const char *out;
    size_t n_out;
    bool stopped = pti_stopper_push(&s->stop, s->piece, (size_t)k, &out, &n_out);
    if (!deliver(s, out, n_out)) {
        s->st.done_reason = "cancel";
        return false;
    }
    if (stopped) {
        s->st.done_reason = "stop";
        return false;
    }
    return true;
}

/* A generating slot's logits: samples, emits, and either keeps the token for the next step
 * or ends the request. */
static void on_logits(pti_engine *e, eng_slot *s, const float *logits)
{
    eng_req *r = s->r;
    if (s->state == SLOT_PROMPT) {
        int64_t t = now_ns();
        s->st.prompt_ns = t - s->t_admit;
        s->t_gen0 = t;
        s->state = SLOT_GEN;
    }
    if (r->gen.num_predict >= 0 && s->st.gen_tokens >= r->gen.num_predict) {
        s->st.done_reason = "length";
        pti_eng_finish(e, s, PT_OK, NULL);
        return;
    }
    int32_t tok = s->pre_tok >= 0 ? s->pre_tok : sample_token(e, s, logits);
    s->pre_tok = -1;
    if (tok < 0 || pti_sampler_accept(s->smp, tok) != PT_OK) {
        fail_request(e, s);
        return;
    }
    bool cons_done = false;
    if (r->cons.state && !is_stop_token(e, r, tok)) {
        int32_t k = token_bytes(e, s, tok);
        r->cons.advance(r->cons.state, s->cpiece, (size_t)k);
        cons_done = r->cons.done(r->cons.state);
    }
    s->st.done_reason = NULL;
    if (!emit_token(e, s, tok)) {
        if (s->st.done_reason)
            pti_eng_finish(e, s, PT_OK, NULL);
        else
            fail_request(e, s);
        return;
    }
    if (cons_done)
        s->st.done_reason = "stop";
    else if ((r->gen.num_predict >= 0 && s->st.gen_tokens >= r->gen.num_predict) ||
             s->n_hist >= e->o.num_ctx)
        s->st.done_reason = "length";
    if (s->st.done_reason) {
        pti_eng_finish(e, s, PT_OK, NULL);
        return;
    }
    s->next_tok = tok;
}

/* ---- embeddings --------------------------------------------------------------------------------
 */

static void add_hidden(pti_engine *e, eng_slot *s, const float *rows, int32_t n)
{
    for (int32_t t = 0; t < n; t++)
        for (int32_t i = 0; i < e->n_embd; i++)
            s->embd_sum[i] += rows[(int64_t)t * e->n_embd + i];
}

/* ---- one step ----------------------------------------------------------------------------------
 */

/* The slot still reading its prompt that was admitted first, after `after` in that order. */
static eng_slot *next_prompt_slot(pti_engine *e, uint64_t after, bool first)
{
    eng_slot *best = NULL;
    for (int32_t i = 0; i < e->o.n_parallel; i++) {
        eng_slot *s = &e->slots[i];
        if (s->r && s->state == SLOT_PROMPT && (first || s->admit_seq > after) &&
            (!best || s->admit_seq < best->admit_seq))
            best = s;
    }
    return best;
}

static void add_run(pti_engine *e, int32_t *n_runs, int32_t *n_tok, eng_slot *s, const int32_t *ids,
                    int32_t n, bool logits, bool hidden)
{
    pti_llm_run *run = &e->runs[*n_runs];
    *run = (pti_llm_run){.slot = s->index,
                         .pos0 = s->n_hist,
                         .t0 = *n_tok,
                         .n = n,
                         .want_logits = logits,
                         .want_hidden = hidden};
    memcpy(e->tokens + *n_tok, ids, (size_t)n * sizeof *ids);
    e->run_slot[*n_runs] = s->index;
    *n_tok += n;
    (*n_runs)++;
}

/* Fills e->tokens / e->runs; returns the number of runs. */
static int32_t build_batch(pti_engine *e, int32_t *n_tokens)
{
    int32_t n_runs = 0, n_tok = 0;
    for (int32_t i = 0; i < e->o.n_parallel; i++) {
        eng_slot *s = &e->slots[i];
        if (s->r && s->state == SLOT_GEN)
            add_run(e, &n_runs, &n_tok, s, &s->next_tok, 1, true, false);
    }
    bool first = true;
    for (eng_slot *s = next_prompt_slot(e, 0, true); s && n_tok < e->o.n_batch;
         s = next_prompt_slot(e, s->admit_seq, first)) {
        first = false;
        int32_t left = s->r->n_ids - s->n_hist, room = e->o.n_batch - n_tok;
        int32_t n = left < room ? left : room;
        bool last = n == left;
        add_run(e, &n_runs, &n_tok, s, s->r->ids + s->n_hist, n, last && !s->r->embed, s->r->embed);
    }
    *n_tokens = n_tok;
    return n_runs;
}

/* Every request in the batch failed with the forward pass's error. */
static void fail_batch(pti_engine *e, int32_t n_runs)
{
    char msg[1024];
    pt_status st = pt_last_status();
    snprintf(msg, sizeof msg, "%s", pt_last_error());
    for (int32_t j = 0; j < n_runs; j++) {
        eng_slot *s = &e->slots[e->run_slot[j]];
        s->n_hist = 0; /* what the cache holds is unknown now */
        if (s->r)
            pti_eng_finish(e, s, st != PT_OK ? st : PT_ERR_RUNTIME, msg);
    }
}

/* Records what the pass put into each slot's cache. */
static void commit_runs(pti_engine *e, int32_t n_runs, uint64_t *evaluated)
{
    for (int32_t j = 0; j < n_runs; j++) {
        const pti_llm_run *run = &e->runs[j];
        eng_slot *s = &e->slots[run->slot];
        memcpy(s->hist + s->n_hist, e->tokens + run->t0, (size_t)run->n * sizeof *s->hist);
        s->n_hist += run->n;
        if (s->state == SLOT_PROMPT)
            *evaluated += (uint64_t)run->n;
    }
}

/* ---- sampling ahead ------------------------------------------------------------------------
 *
 * The sequences of a step are sampled on the op thread pool before the serial hand-out
 * below: with a 262k vocabulary one sample is ~0.15 ms, and n_parallel of them one after
 * another leave the other cores idle. Only the sampler runs there (a slot's own state and the
 * step's logits, read-only); the rest -- accepting the token, the constraint, detokenizing, stop
 * strings, delivering the text, the end of a request -- stays on this thread in run order. The
 * tokens are the ones on_logits would have drawn: each slot's sampler sees the same calls in the
 * same order. A constrained slot and a failed draw (whose error message belongs to this
 * thread) are sampled in on_logits as before. */

typedef struct ahead_ctx {
    pti_engine *e;
    const float *logits;
} ahead_ctx;

static void sample_ahead_range(void *vctx, int64_t i0, int64_t i1)
{
    ahead_ctx *c = vctx;
    pti_engine *e = c->e;
    for (int64_t i = i0; i < i1; i++) {
        eng_slot *s = &e->slots[e->ahead[i].slot];
        s->pre_tok =
            pti_sample(s->smp, c->logits + (int64_t)e->ahead[i].row * e->n_vocab, e->n_vocab);
    }
}

/* Whether on_logits will draw this slot's token with its sampler alone. */
static bool samples_plainly(const eng_slot *s)
{
    const eng_req *r = s->r;
    return r && !r->embed && !r->cons.state &&
           !(r->gen.num_predict >= 0 && s->st.gen_tokens >= r->gen.num_predict);
}

static void sample_ahead(pti_engine *e, int32_t n_runs, const float *logits)
{
    int32_t n = 0, row = 0;
    for (int32_t j = 0; j < n_runs; j++) {
        const pti_llm_run *run = &e->runs[j];
        if (!run->want_logits)
            continue;
        if (samples_plainly(&e->slots[run->slot]))
            e->ahead[n++] = (eng_ahead){run->slot, row};
        row++;
    }
    if (n < 2)
        return; /* nothing to overlap: on_logits samples it */
    ahead_ctx c = {e, logits};
    pti_parallel_for(n, 1, sample_ahead_range, &c);
}

/* Hands each run's output to its slot. */
static void dispatch(pti_engine *e, int32_t n_runs, const float *logits, const float *hidden,
                     uint64_t *generated)
{
    int32_t li = 0, hi = 0;
    for (int32_t j = 0; j < n_runs; j++) {
        const pti_llm_run *run = &e->runs[j];
        eng_slot *s = &e->slots[run->slot];
        if (run->want_hidden) {
            add_hidden(e, s, hidden + (int64_t)hi * e->n_embd, run->n);
            hi += run->n;
            if (s->n_hist == s->r->n_ids) {
                s->st.prompt_ns = now_ns() - s->t_admit;
                s->st.done_reason = "stop";
                pti_eng_finish(e, s, PT_OK, NULL);
            }
            continue;
        }
        if (!run->want_logits)
            continue;
        on_logits(e, s, logits + (int64_t)li * e->n_vocab);
        li++;
        if (s->r) { /* still running (a finished request was counted by pti_eng_finish) */
            *generated += (uint64_t)(s->st.gen_tokens - s->gen_counted);
            s->gen_counted = s->st.gen_tokens;
        }
    }
}

void pti_eng_step(pti_engine *e)
{
    int32_t n_tokens = 0;
    int32_t n_runs = build_batch(e, &n_tokens);
    if (n_runs == 0)
        return;
    pt_scope_begin();
    pt_tensor *logits = NULL, *hidden = NULL;
    pthread_mutex_lock(&forward_lock);
    pt_status st =
        pti_llm_forward_ex(e->m, e->cache, e->tokens, n_tokens, e->runs, n_runs, &logits, &hidden);
    pthread_mutex_unlock(&forward_lock);
    uint64_t evaluated = 0, generated = 0;
    if (st != PT_OK) {
        fail_batch(e, n_runs);
    } else {
        commit_runs(e, n_runs, &evaluated);
        pthread_mutex_lock(&e->mu);
        e->stats.prompt_evaluated += evaluated;
        pthread_mutex_unlock(&e->mu);
        sample_ahead(e, n_runs, pt_data_ptr(logits));
        dispatch(e, n_runs, pt_data_ptr(logits), hidden ? pt_data_ptr(hidden) : NULL, &generated);
        pthread_mutex_lock(&e->mu);
        e->stats.gen_tokens += generated;
        pthread_mutex_unlock(&e->mu);
    }
    pt_scope_end(); /* frees logits and hidden */
}
