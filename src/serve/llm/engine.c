/* The serving engine (engine.h): loading a model with n_parallel KV cache slots, the bounded
 * request queue, cancellation, statistics and the worker thread that admits queued requests
 * into free slots and runs one batched step after another (engine_step.c). */
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "engine_impl.h"

#define DEFAULT_PARALLEL 4
#define DEFAULT_MAX_QUEUE 512
#define MAX_PARALLEL 1024
#define MAX_QUEUE (1 << 24)

static const char busy_message[] =
    "server busy, please try again.  maximum pending requests exceeded";

static _Thread_local bool last_submit_queue_full;

bool pti_engine_queue_full_error(void)
{
    return last_submit_queue_full;
}

/* ---- requests ----------------------------------------------------------------------------------
 */

/* n strings in one block (the pointer array, then the bytes); NULL entries become "". */
static char **copy_strings(const char *const *s, int32_t n)
{
    size_t bytes = (size_t)n * sizeof(char *);
    for (int32_t i = 0; i < n; i++)
        bytes += (s[i] ? strlen(s[i]) : 0) + 1;
    char **out = pti_malloc(bytes > 0 ? bytes : 1);
    if (!out)
        return NULL;
    char *p = (char *)(out + n);
    for (int32_t i = 0; i < n; i++) {
        size_t len = s[i] ? strlen(s[i]) : 0;
        memcpy(p, s[i] ? s[i] : "", len);
        p[len] = '\0';
        out[i] = p;
        p += len + 1;
    }
    return out;
}

void pti_eng_req_free(eng_req *r)
{
    if (!r)
        return;
    if (r->cons.state && r->cons.free)
        r->cons.free(r->cons.state);
    free(r->ids);
    free(r->stop);
    free(r->extra_stop);
    free(r->stop_tokens);
    free(r);
}

/* The sampler options are checked by building a one-token sampler (cheap; the real one, sized
 * by the vocabulary, is made when the request gets a slot). */
static bool check_sampling(const pt_gen_opts *g)
{
    if (g->n_stop < 0 || (g->n_stop > 0 && !g->stop) || g->n_stop_tokens < 0 ||
        (g->n_stop_tokens > 0 && !g->stop_tokens) || g->repeat_last_n < -1) {
        pti_error(PT_ERR_INVALID_ARG, "pti_engine_submit: bad stop list or repeat_last_n");
        return false;
    }
    pti_sampler_opts so = {
        .temperature = g->temperature,
        .top_k = g->top_k,
        .top_p = g->top_p,
        .min_p = g->min_p,
        .typical_p = g->typical_p,
        .repeat_penalty = g->repeat_penalty,
        .repeat_last_n = g->repeat_last_n < 0 ? 0 : g->repeat_last_n,
        .presence_penalty = g->presence_penalty,
        .frequency_penalty = g->frequency_penalty,
        .seed = 0,
    };
    pti_sampler *probe = pti_sampler_new(&so, 1);
    pti_sampler_free(probe);
    return probe != NULL;
}

static bool check_request(const pti_engine *e, const pti_engine_request *q)
{
    if (!q->ids || q->n_ids < 1) {
        pti_error(PT_ERR_INVALID_ARG, "pti_engine_submit: the prompt is empty");
        return false;
    }
    if (q->n_ids > e->o.num_ctx) {
        pti_error(PT_ERR_INVALID_ARG,
                  "pti_engine_submit: the prompt has %d tokens, more than "
                  "the context of %d (raise num_ctx; prompts are not truncated)",
                  (int)q->n_ids, (int)e->o.num_ctx);
        return false;
    }
    for (int32_t i = 0; i < q->n_ids; i++)
        if (q->ids[i] < 0 || q->ids[i] >= e->n_vocab) {
            pti_error(PT_ERR_INVALID_ARG,
                      "pti_engine_submit: token id %d is outside the "
                      "vocabulary of %d",
                      (int)q->ids[i], (int)e->n_vocab);
            return false;
        }
    if (q->n_extra_stop < 0 || (q->n_extra_stop > 0 && !q->extra_stop)) {
        pti_error(PT_ERR_INVALID_ARG, "pti_engine_submit: bad extra stop list");
        return false;
    }
    if (!q->ev.on_done) {
        pti_error(PT_ERR_INVALID_ARG, "pti_engine_submit: on_done is NULL");
        return false;
    }
    return q->embed || check_sampling(&q->gen);
}

static eng_req *copy_request(const pti_engine_request *q)
{
    eng_req *r = pti_calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->gen = q->gen;
    r->gen.stats = NULL;
    r->embed = q->embed;
    r->ev = q->ev;
    r->n_ids = q->n_ids;
    r->ids = pti_malloc((size_t)q->n_ids * sizeof *r->ids);
    r->stop = copy_strings(q->gen.stop, q->gen.stop ? q->gen.n_stop : 0);
    r->extra_stop = copy_strings(q->extra_stop, q->extra_stop ? q->n_extra_stop : 0);
    r->n_extra_stop = q->extra_stop ? q->n_extra_stop : 0;
    int32_t nst = q->gen.stop_tokens ? q->gen.n_stop_tokens : 0;
    r->stop_tokens = pti_malloc((size_t)(nst > 0 ? nst : 1) * sizeof *r->stop_tokens);
    if (!r->ids || !r->stop || !r->extra_stop || !r->stop_tokens) {
        pti_eng_req_free(r);
        return NULL;
    }
    memcpy(r->ids, q->ids, (size_t)q->n_ids * sizeof *r->ids);
    if (nst > 0)
        memcpy(r->stop_tokens, q->gen.stop_tokens, (size_t)nst * sizeof *r->stop_tokens);
    r->gen.stop = (const char *const *)r->stop;
    r->gen.n_stop = q->gen.stop ? q->gen.n_stop : 0;
    r->gen.stop_tokens = r->stop_tokens;
    r->gen.n_stop_tokens = nst;
    return r;
}

uint64_t pti_engine_submit(pti_engine *e, const pti_engine_request *req)
{
    last_submit_queue_full = false;
    if (!e || !req) {
        if (req && req->constraint.state && req->constraint.free)
            req->constraint.free(req->constraint.state);
        pti_error(PT_ERR_INVALID_ARG, "pti_engine_submit: NULL engine or request");
        return 0;
    }
    eng_req *r = check_request(e, req) ? copy_request(req) : NULL;
    if (!r) {
        if (req->constraint.state && req->constraint.free)
            req->constraint.free(req->constraint.state);
        return 0;
    }
    r->cons = req->constraint;
    pthread_mutex_lock(&e->mu);
    if (e->stopping || e->n_queued >= e->o.max_queue) {
        bool full = !e->stopping;
        pthread_mutex_unlock(&e->mu);
        pti_eng_req_free(r);
        last_submit_queue_full = full;
        if (full)
            pti_error(PT_ERR_RUNTIME, "%s", busy_message);
        else
            pti_error(PT_ERR_RUNTIME, "pti_engine_submit: the engine is shutting down");
        return 0;
    }
    r->id = e->next_id++;
    if (e->q_tail)
        e->q_tail->next = r;
    else
        e->q_head = r;
    e->q_tail = r;
    e->n_queued++;
    uint64_t id = r->id;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    return id;
}

void pti_engine_cancel(pti_engine *e, uint64_t id)
{
    if (!e || id == 0)
        return;
    pthread_mutex_lock(&e->mu);
    eng_req *prev = NULL;
    for (eng_req *r = e->q_head; r; prev = r, r = r->next) {
        if (r->id != id)
            continue;
        if (prev)
            prev->next = r->next;
        else
            e->q_head = r->next;
        if (e->q_tail == r)
            e->q_tail = prev;
        e->n_queued--;
        r->next = e->dead;
        e->dead = r;
        pthread_cond_signal(&e->wake);
        pthread_mutex_unlock(&e->mu);
        return;
    }
    for (int32_t i = 0; i < e->o.n_parallel; i++)
        if (e->slots[i].r && e->slots[i].r->id == id) {
            e->slots[i].r->cancelled = true;
            pthread_cond_signal(&e->wake);
        }
    pthread_mutex_unlock(&e->mu);
}

/* ---- statistics --------------------------------------------------------------------------------
 */

void pti_eng_count_done(pti_engine *e, const eng_slot *s)
{
    e->stats.requests_done++;
    e->stats.prompt_tokens += (uint64_t)s->st.prompt_tokens;
    e->stats.gen_tokens += (uint64_t)(s->st.gen_tokens - s->gen_counted);
    e->stats.prompt_ns += s->st.prompt_ns;
    e->stats.gen_ns += s->st.gen_ns;
}

void pti_engine_get_stats(const pti_engine *e, pti_engine_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!e)
        return;
    pthread_mutex_t *mu = (pthread_mutex_t *)&e->mu; /* the lock, not the counters, changes */
    pthread_mutex_lock(mu);
    *out = e->stats;
    out->n_parallel = e->o.n_parallel;
    out->busy_slots = e->busy;
    out->queued = e->n_queued;
    pthread_mutex_unlock(mu);
}

pt_llm *pti_engine_llm(const pti_engine *e)
{
    return e ? e->llm : NULL;
}
const pti_engine_opts *pti_engine_get_opts(const pti_engine *e)
{
    return e ? &e->o : NULL;
}

/* ---- the worker --------------------------------------------------------------------------------
 */

static void end_unstarted(pti_engine *e, eng_req *r, const char *reason)
{
    pt_gen_stats st = {.prompt_tokens = r->n_ids, .done_reason = reason};
    pthread_mutex_lock(&e->mu);
    e->stats.requests_done++;
    pthread_mutex_unlock(&e->mu);
    r->ev.on_done(r->ev.user, PT_OK, NULL, &st, NULL, 0);
    pti_eng_req_free(r);
}

/* Under the lock: moves the next queued request into the best free slot. */
static bool take_queued(pti_engine *e, eng_slot **slot, eng_req **req)
{
    if (!e->q_head || e->busy >= e->o.n_parallel)
        return false;
    eng_req *r = e->q_head;
    e->q_head = r->next;
    if (!e->q_head)
        e->q_tail = NULL;
    r->next = NULL;
    e->n_queued--;
    eng_slot *s = pti_eng_pick_slot(e, r);
    s->r = r;
    s->state = SLOT_PROMPT;
    s->admit_seq = e->next_seq++;
    e->busy++;
    *slot = s;
    *req = r;
    return true;
}

/* Under the lock on entry and exit; calls back without it. Returns false when the worker
 * should exit. */
static bool worker_round(pti_engine *e)
{
    while (e->dead) { /* cancelled while queued */
        eng_req *r = e->dead;
        e->dead = r->next;
        pthread_mutex_unlock(&e->mu);
        end_unstarted(e, r, "cancel");
        pthread_mutex_lock(&e->mu);
    }
    if (e->stopping) {
        while (e->q_head) {
            eng_req *r = e->q_head;
            e->q_head = r->next;
            e->n_queued--;
            pthread_mutex_unlock(&e->mu);
            end_unstarted(e, r, "cancel");
            pthread_mutex_lock(&e->mu);
        }
        e->q_tail = NULL;
    }
    for (int32_t i = 0; i < e->o.n_parallel; i++) {
        eng_slot *s = &e->slots[i];
        if (s->r && (s->r->cancelled || e->stopping)) {
            pthread_mutex_unlock(&e->mu);
            s->st.done_reason = "cancel";
            pti_eng_finish(e, s, PT_OK, NULL);
            pthread_mutex_lock(&e->mu);
        }
    }
    if (e->stopping)
        return false;
    eng_slot *s;
    eng_req *r;
    while (take_queued(e, &s, &r)) {
        pthread_mutex_unlock(&e->mu);
        pti_eng_admit(e, s, r);
        pthread_mutex_lock(&e->mu);
    }
    if (e->busy == 0) {
        if (!e->dead && !e->q_head && !e->stopping)
            pthread_cond_wait(&e->wake, &e->mu);
        return true;
    }
    pthread_mutex_unlock(&e->mu);
    pti_eng_step(e);
    pthread_mutex_lock(&e->mu);
    e->stats.steps++;
    return true;
}

static void *worker_main(void *arg)
{
    pti_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    while (worker_round(e)) {
    }
    pthread_mutex_unlock(&e->mu);
    pti_scope_thread_exit();
    return NULL;
}

/* ---- loading -----------------------------------------------------------------------------------
 */

static bool resolve_opts(const pti_engine_opts *in, pti_engine_opts *o)
{
    *o = in ? *in : (pti_engine_opts){0};
    if (o->n_parallel < 0 || o->num_ctx < 0 || o->n_batch < 0 || o->max_queue < 0 ||
        o->n_threads < 0) {
        pti_error(PT_ERR_INVALID_ARG, "pti_engine_load: negative n_parallel, num_ctx, n_batch, "
                                      "max_queue or n_threads");
        return false;
    }
    o->n_parallel = o->n_parallel ? o->n_parallel : DEFAULT_PARALLEL;
    o->num_ctx = o->num_ctx ? o->num_ctx : PTI_LLM_DEFAULT_NUM_CTX;
    o->n_batch = o->n_batch ? o->n_batch : PTI_LLM_DEFAULT_N_BATCH;
    o->max_queue = o->max_queue ? o->max_queue : DEFAULT_MAX_QUEUE;
    if (o->n_parallel > MAX_PARALLEL || o->max_queue > MAX_QUEUE) {
        pti_error(PT_ERR_INVALID_ARG,
                  "pti_engine_load: n_parallel %d or max_queue %d is too "
                  "large (at most %d and %d)",
                  (int)o->n_parallel, (int)o->max_queue, MAX_PARALLEL, MAX_QUEUE);
        return false;
    }
    if (o->n_batch < o->n_parallel) {
        pti_error(PT_ERR_INVALID_ARG,
                  "pti_engine_load: n_batch %d is smaller than n_parallel %d "
                  "(each step decodes one token of every slot)",
                  (int)o->n_batch, (int)o->n_parallel);
        return false;
    }
    return true;
}

static bool alloc_slots(pti_engine *e)
{
    const int32_t P = e->o.n_parallel;
    e->slots = pti_calloc((size_t)P, sizeof *e->slots);
    e->tokens = pti_malloc((size_t)e->o.n_batch * sizeof *e->tokens);
    e->runs = pti_calloc((size_t)P, sizeof *e->runs);
    e->run_slot = pti_calloc((size_t)P, sizeof *e->run_slot);
    e->ahead = pti_calloc((size_t)P, sizeof *e->ahead);
    e->embd_out = pti_malloc((size_t)e->n_embd * sizeof *e->embd_out);
    if (!e->slots || !e->tokens || !e->runs || !e->run_slot || !e->ahead || !e->embd_out)
        return false;
    for (int32_t i = 0; i < P; i++) {
        eng_slot *s = &e->slots[i];
        s->index = i;
        s->pre_tok = -1;
        s->hist = pti_malloc((size_t)e->o.num_ctx * sizeof *s->hist);
        s->piece = pti_malloc((size_t)e->piece_cap);
        s->cpiece = pti_malloc((size_t)e->piece_cap);
        s->masked = pti_malloc((size_t)e->n_vocab * sizeof *s->masked);
        if (!s->hist || !s->piece || !s->cpiece || !s->masked)
            return false;
    }
    return true;
}

static size_t kv_bytes(const pti_kv_cache *c)
{
    size_t n = 0;
    for (int il = 0; il < c->n_layer; il++)
        n += (size_t)pt_numel(c->k[il]) * pt_dtype_size(c->k[il]->dtype) +
             (size_t)pt_numel(c->v[il]) * pt_dtype_size(c->v[il]->dtype);
    return n;
}

pti_engine *pti_engine_load(const char *gguf_path, const pti_engine_opts *opts)
{
    pti_engine_opts o;
    if (!gguf_path) {
        pti_error(PT_ERR_INVALID_ARG, "pti_engine_load: path is NULL");
        return NULL;
    }
    if (!resolve_opts(opts, &o))
        return NULL;
    pti_engine *e = pti_calloc(1, sizeof *e);
    if (!e)
        return NULL;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->wake, NULL);
    e->next_id = 1;
    pt_llm_opts lo = {
        .n_threads = o.n_threads, .num_ctx = o.num_ctx, .n_batch = o.n_batch, .kv_f32 = o.kv_f32};
    e->llm = pti_llm_load_slots(gguf_path, &lo, o.n_parallel);
    if (!e->llm) {
        pti_engine_free(e);
        return NULL;
    }
    o.num_ctx = pti_llm_num_ctx(e->llm); /* capped at the model's */
    e->o = o;
    e->m = pti_llm_model_of(e->llm);
    e->cache = pti_llm_cache_of(e->llm);
    e->tok = pti_llm_tokenizer(e->llm);
    e->n_vocab = e->m->hp.n_vocab;
    e->n_embd = e->m->hp.n_embd;
    e->piece_cap = pti_tokenizer_max_piece(e->tok) + 8;
    e->stats.kv_bytes = kv_bytes(e->cache);
    if (!alloc_slots(e)) {
        pti_engine_free(e);
        return NULL;
    }
    if (pthread_create(&e->worker, NULL, worker_main, e) != 0) {
        pti_error(PT_ERR_RUNTIME, "pti_engine_load: cannot start the worker thread");
        pti_engine_free(e);
        return NULL;
    }
    e->worker_started = true;
    return e;
}

void pti_engine_free(pti_engine *e)
{
    if (!e)
        return;
    if (e->worker_started) {
        pthread_mutex_lock(&e->mu);
        e->stopping = true;
        pthread_cond_signal(&e->wake);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->worker, NULL);
    }
    for (int32_t i = 0; e->slots && i < e->o.n_parallel; i++) {
        free(e->slots[i].hist);
        free(e->slots[i].piece);
        free(e->slots[i].cpiece);
        free(e->slots[i].masked);
    }
    free(e->slots);
    free(e->tokens);
    free(e->runs);
    free(e->run_slot);
    free(e->ahead);
    free(e->embd_out);
    pt_llm_free(e->llm);
    pthread_cond_destroy(&e->wake);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
