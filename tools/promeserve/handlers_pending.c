/* TEMPORARY (the integrator deletes this file at merge): stand-ins so the srv-http branch links
 * and its HTTP layer can be tested before the other helpers' branches are merged.
 *
 *   - the endpoint handlers of api_ollama.c, api_openai.c and api_store.c answer
 *     501 {"error":"not implemented yet"}, except /api/generate, which streams a minimal
 *     NDJSON completion (model, prompt, options.num_predict/num_ctx, keep_alive) so the
 *     stream, disconnect and shutdown paths can be tested;
 *   - a minimal engine (src/serve/engine.h) that runs pt_llm_generate_tokens one request at
 *     a time on a worker thread (no batching, no embeddings, no constraints) until the
 *     "engine" helper's engine.c is merged.
 * Every definition here is weak (PENDING), so a branch holding the real one links without
 * touching this file: the real definition wins. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/internal.h"
#include "serve_internal.h"

#define PENDING __attribute__((weak))

/* ---- the temporary engine ------------------------------------------------------------------- */

typedef struct tmp_job {
    uint64_t id;
    int32_t *ids;
    int32_t n_ids;
    pt_gen_opts gen;
    char **stop;
    int32_t n_stop;
    pti_constraint constraint;
    bool embed;
    pti_engine_events ev;
    bool cancel;
    struct tmp_job *next;
} tmp_job;

struct pti_engine {
    pt_llm *llm;
    pti_engine_opts opts;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    pthread_t worker;
    tmp_job *head, *tail, *running;
    int queued;
    uint64_t next_id;
    bool stop;
    pti_engine_stats st;
};

static _Thread_local bool tmp_queue_full;

static void tmp_job_free(tmp_job *j)
{
    if (!j)
        return;
    if (j->constraint.state && j->constraint.free)
        j->constraint.free(j->constraint.state);
    for (int32_t i = 0; i < j->n_stop; i++)
        free(j->stop[i]);
    free(j->stop);
    free(j->ids);
    free(j);
}

static bool tmp_token_cb(int32_t token, const char *text, size_t len, void *user)
{
    (void)token;
    tmp_job *j = user;
    if (j->cancel)
        return false;
    return !j->ev.on_text || j->ev.on_text(j->ev.user, text, len);
}

static void *tmp_worker(void *arg)
{
    pti_engine *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (!e->stop && !e->head)
            pthread_cond_wait(&e->cv, &e->lock);
        if (!e->head)
            break;
        tmp_job *j = e->head;
        e->head = j->next;
        if (!e->head)
            e->tail = NULL;
        e->queued--;
        e->running = j;
        e->st.busy_slots = 1;
        bool cancelled = j->cancel || e->stop;
        pthread_mutex_unlock(&e->lock);
        pt_gen_stats stats = {0};
        pt_status st = PT_OK;
        if (cancelled) {
            stats.done_reason = "cancel";
        } else if (j->embed) {
            st = PT_ERR_UNSUPPORTED;
        } else {
            j->gen.stats = &stats;
            st = pt_llm_generate_tokens(e->llm, j->ids, j->n_ids, &j->gen, tmp_token_cb, j);
            if (j->cancel)
                stats.done_reason = "cancel", st = PT_OK;
        }
        if (j->ev.on_done)
            j->ev.on_done(j->ev.user, st,
                          st == PT_ERR_UNSUPPORTED ? "the temporary engine has no embeddings"
                                                   : pt_last_error(),
                          &stats, NULL, 0);
        pthread_mutex_lock(&e->lock);
        e->running = NULL;
        e->st.busy_slots = 0;
        e->st.requests_done++;
        e->st.prompt_tokens += (uint64_t)stats.prompt_tokens;
        e->st.prompt_evaluated += (uint64_t)stats.prompt_evaluated;
        e->st.gen_tokens += (uint64_t)stats.gen_tokens;
        e->st.prompt_ns += stats.prompt_ns;
        e->st.gen_ns += stats.gen_ns;
        tmp_job_free(j);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

PENDING pti_engine *pti_engine_load(const char *gguf_path, const pti_engine_opts *opts)
{
    pti_engine *e = calloc(1, sizeof *e);
    if (!e)
        return pti_error_null(PT_ERR_OOM, "out of memory");
    if (opts)
        e->opts = *opts;
    pt_llm_opts lo = {0};
    lo.num_ctx = e->opts.num_ctx;
    lo.n_threads = e->opts.n_threads;
    lo.n_batch = e->opts.n_batch;
    lo.kv_f32 = e->opts.kv_f32;
    e->llm = pt_llm_load(gguf_path, &lo);
    if (!e->llm) {
        free(e);
        return NULL;
    }
    e->opts.n_parallel = 1;
    e->opts.num_ctx = pt_llm_get_info(e->llm)->num_ctx;
    if (e->opts.max_queue <= 0)
        e->opts.max_queue = 512;
    e->st.n_parallel = 1;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (pthread_create(&e->worker, NULL, tmp_worker, e)) {
        pt_llm_free(e->llm);
        free(e);
        return pti_error_null(PT_ERR_RUNTIME, "cannot start the engine thread");
    }
    return e;
}

PENDING void pti_engine_free(pti_engine *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->stop = true;
    for (tmp_job *j = e->head; j; j = j->next)
        j->cancel = true;
    if (e->running)
        e->running->cancel = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->worker, NULL);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cv);
    pt_llm_free(e->llm);
    free(e);
}

PENDING pt_llm *pti_engine_llm(const pti_engine *e)
{
    return e->llm;
}

PENDING const pti_engine_opts *pti_engine_get_opts(const pti_engine *e)
{
    return &e->opts;
}

PENDING bool pti_engine_queue_full_error(void)
{
    return tmp_queue_full;
}

PENDING uint64_t pti_engine_submit(pti_engine *e, const pti_engine_request *req)
{
    tmp_queue_full = false;
    tmp_job *j = calloc(1, sizeof *j);
    if (!j) {
        if (req->constraint.state && req->constraint.free)
            req->constraint.free(req->constraint.state);
        pti_error(PT_ERR_OOM, "out of memory");
        return 0;
    }
    j->constraint = req->constraint;
    if (req->n_ids < 1 || req->n_ids > e->opts.num_ctx) {
        tmp_job_free(j);
        pti_error(PT_ERR_INVALID_ARG, "the prompt has %d tokens; it must have 1 to %d", req->n_ids,
                  e->opts.num_ctx);
        return 0;
    }
    j->ids = malloc((size_t)req->n_ids * sizeof *j->ids);
    int32_t n_stop = req->gen.n_stop + req->n_extra_stop;
    j->stop = calloc((size_t)n_stop + 1, sizeof *j->stop);
    if (!j->ids || !j->stop) {
        tmp_job_free(j);
        pti_error(PT_ERR_OOM, "out of memory");
        return 0;
    }
    memcpy(j->ids, req->ids, (size_t)req->n_ids * sizeof *j->ids);
    j->n_ids = req->n_ids;
    for (int32_t i = 0; i < req->gen.n_stop; i++)
        j->stop[j->n_stop++] = strdup(req->gen.stop[i]);
    for (int32_t i = 0; i < req->n_extra_stop; i++)
        j->stop[j->n_stop++] = strdup(req->extra_stop[i]);
    j->gen = req->gen;
    j->gen.stop = (const char *const *)j->stop;
    j->gen.n_stop = j->n_stop;
    j->gen.stop_tokens = NULL;
    j->gen.n_stop_tokens = 0;
    j->gen.raw = true;
    j->embed = req->embed;
    j->ev = req->ev;
    pthread_mutex_lock(&e->lock);
    if (e->queued >= e->opts.max_queue) {
        pthread_mutex_unlock(&e->lock);
        tmp_job_free(j);
        tmp_queue_full = true;
        pti_error(PT_ERR_RUNTIME,
                  "server busy, please try again.  maximum pending requests exceeded");
        return 0;
    }
    j->id = ++e->next_id;
    if (e->tail)
        e->tail->next = j;
    else
        e->head = j;
    e->tail = j;
    e->queued++;
    uint64_t id = j->id;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->lock);
    return id;
}

PENDING void pti_engine_cancel(pti_engine *e, uint64_t id)
{
    pthread_mutex_lock(&e->lock);
    for (tmp_job *j = e->head; j; j = j->next)
        if (j->id == id)
            j->cancel = true;
    if (e->running && e->running->id == id)
        e->running->cancel = true;
    pthread_mutex_unlock(&e->lock);
}

PENDING void pti_engine_get_stats(const pti_engine *e, pti_engine_stats *out)
{
    pti_engine *m = (pti_engine *)e;
    pthread_mutex_lock(&m->lock);
    *out = m->st;
    out->queued = m->queued;
    pthread_mutex_unlock(&m->lock);
}

/* ---- a minimal streaming /api/generate ------------------------------------------------------ */

typedef struct tmp_gen {
    ps_server *srv;
    ps_model *m;
    ps_stream *s;
    char model[128];
} tmp_gen;

static bool tmp_gen_text(void *user, const char *text, size_t len)
{
    tmp_gen *g = user;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", g->model);
    char *piece = strndup(text, len);
    cJSON_AddStringToObject(o, "response", piece ? piece : "");
    free(piece);
    cJSON_AddBoolToObject(o, "done", false);
    return ps_stream_write_ndjson(g->s, o) && !ps_server_stopping(g->srv);
}

static void tmp_gen_done(void *user, pt_status st, const char *msg, const pt_gen_stats *stats,
                         const float *embedding, int32_t n_embd)
{
    (void)embedding;
    (void)n_embd;
    tmp_gen *g = user;
    cJSON *o = cJSON_CreateObject();
    if (st != PT_OK) {
        cJSON_AddStringToObject(o, "error", msg ? msg : "generation failed");
    } else {
        cJSON_AddStringToObject(o, "model", g->model);
        cJSON_AddStringToObject(o, "response", "");
        cJSON_AddBoolToObject(o, "done", true);
        cJSON_AddStringToObject(o, "done_reason", stats->done_reason ? stats->done_reason : "stop");
        cJSON_AddNumberToObject(o, "prompt_eval_count", stats->prompt_tokens);
        cJSON_AddNumberToObject(o, "eval_count", stats->gen_tokens);
        ps_metrics_tokens(g->srv, stats->prompt_tokens, stats->gen_tokens, stats->gen_ns);
        ps_stream_set_tokens(g->s, stats->prompt_tokens, stats->gen_tokens);
    }
    ps_stream_write_ndjson(g->s, o);
    ps_stream_close(g->s);
    ps_model_release(g->srv, g->m);
    free(g);
}

PENDING void ps_api_generate(ps_request *r)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(r->json, "model");
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(r->json, "prompt");
    if (!cJSON_IsString(model) || !model->valuestring[0]) {
        ps_reply_error(r, 400, "model is required");
        return;
    }
    snprintf(r->model, sizeof r->model, "%s", model->valuestring);
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(r->json, "options");
    const cJSON *np = cJSON_GetObjectItemCaseSensitive(opts, "num_predict");
    const cJSON *ka = cJSON_GetObjectItemCaseSensitive(r->json, "keep_alive");
    const cJSON *nc = cJSON_GetObjectItemCaseSensitive(opts, "num_ctx");
    int64_t keep = cJSON_IsNumber(ka) ? (int64_t)(ka->valuedouble * 1e9) : INT64_MIN;
    if (cJSON_IsString(ka) && !ps_parse_duration(ka->valuestring, &keep)) {
        ps_reply_error(r, 400, "invalid keep_alive");
        return;
    }
    int status = 500;
    char err[512];
    ps_model *m =
        ps_model_acquire(r->srv, model->valuestring, cJSON_IsNumber(nc) ? (int)nc->valuedouble : 0,
                         keep, &status, err, sizeof err);
    if (!m) {
        ps_reply_error(r, status, "%s", err);
        return;
    }
    const char *text = cJSON_IsString(prompt) ? prompt->valuestring : "";
    pt_llm *llm = pti_engine_llm(ps_model_engine(m));
    int32_t ids[256];
    int64_t n = pt_llm_tokenize(llm, text, strlen(text), true, false, ids, 256);
    tmp_gen *g = calloc(1, sizeof *g);
    if (n < 1 || n > 256 || !g) {
        free(g);
        ps_model_release(r->srv, m);
        ps_reply_error(r, 400, "the temporary generate takes prompts of 1 to 256 tokens");
        return;
    }
    g->srv = r->srv;
    g->m = m;
    snprintf(g->model, sizeof g->model, "%s", model->valuestring);
    g->s = ps_reply_stream(r, "application/x-ndjson");
    pti_engine_request req = {0};
    req.ids = ids;
    req.n_ids = (int32_t)n;
    req.gen = pt_gen_opts_default();
    req.gen.num_predict = cJSON_IsNumber(np) ? (int32_t)np->valuedouble : 32;
    req.ev.on_text = tmp_gen_text;
    req.ev.on_done = tmp_gen_done;
    req.ev.user = g;
    r->tokens_in = n;
    if (!pti_engine_submit(ps_model_engine(m), &req)) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "error", pt_last_error());
        ps_stream_write_ndjson(g->s, o);
        ps_stream_close(g->s);
        ps_model_release(r->srv, m);
        free(g);
    }
}

/* ---- the other handlers: not implemented in this branch -------------------------------------- */

static void pending(ps_request *r)
{
    ps_reply_error(r, 501, "not implemented yet");
}

PENDING void ps_api_chat(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_embed(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_embeddings(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_v1_chat(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_v1_completions(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_v1_embeddings(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_v1_models(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_v1_model(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_tags(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_show(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_version(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_copy(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_delete(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_create(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_blob_head(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_blob_post(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_pull(ps_request *r)
{
    pending(r);
}
PENDING void ps_api_push(ps_request *r)
{
    pending(r);
}

/* /api/ps is simple enough to answer for real from the registry. */
PENDING void ps_api_ps(ps_request *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *models = ps_registry_ps_json(r->srv);
    if (models)
        cJSON_AddItemToObject(o, "models", models);
    ps_reply_json(r, 200, o);
}
