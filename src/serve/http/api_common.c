/* The generation plumbing shared by promeserve's Ollama and OpenAI handlers (api_common.h):
 * request helpers and errors, loading with the options layers, running a generation through
 * the engine's callbacks (streamed or whole), tool calls in OpenAI's form, embeddings. */
#include "api_common.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/utf8.h"
#include "../llm/llm_gen.h"

/* ---- small helpers -------------------------------------------------------------------------- */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void ps_api_time(char *buf, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char date[32], frac[16] = "";
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    if (ts.tv_nsec) {
        snprintf(frac, sizeof frac, ".%09ld", ts.tv_nsec);
        size_t n = strlen(frac);
        while (n > 1 && frac[n - 1] == '0')
            frac[--n] = '\0'; /* Go's RFC3339Nano drops trailing zeros */
    }
    snprintf(buf, cap, "%s%sZ", date, frac);
}

static const char *openai_type(int status)
{
    return status == 400   ? "invalid_request_error"
           : status == 404 ? "not_found_error"
                           : "api_error";
}

void ps_api_fail(ps_request *r, bool openai, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (openai)
        ps_reply_openai_error(r, status, openai_type(status), "%s", msg);
    else
        ps_reply_error(r, status, "%s", msg);
}

int ps_api_status_of(pt_status st)
{
    return st == PT_ERR_INVALID_ARG || st == PT_ERR_UNSUPPORTED || st == PT_ERR_FORMAT ? 400 : 500;
}

const char *ps_api_model_name(ps_request *r, bool openai)
{
    static const char *const keys[] = {"model", "name"};
    for (int i = 0; i < 2; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(r->json, keys[i]);
        if (f && !cJSON_IsNull(f) && !cJSON_IsString(f)) {
            ps_api_fail(r, openai, 400, "\"%s\" must be a string", keys[i]);
            return NULL;
        }
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, "model");
    if (!cJSON_IsString(v) || !v->valuestring[0])
        v = cJSON_GetObjectItemCaseSensitive(r->json, "name");
    if (!cJSON_IsString(v) || !v->valuestring[0]) {
        ps_api_fail(r, openai, 400, "model is required");
        return NULL;
    }
    snprintf(r->model, sizeof r->model, "%s", v->valuestring);
    return v->valuestring;
}

/* ---- model and options --------------------------------------------------------------------- */

/* num_ctx of a store model's params layer (0 when none): a load-time option, so it is read
 * from the layer file before the model is acquired. */
static int params_num_ctx(ps_server *srv, const char *name)
{
    ps_model_ref ref;
    if (!ps_model_resolve(srv, name, &ref) || !ref.params[0])
        return 0;
    FILE *f = fopen(ref.params, "rb");
    if (!f)
        return 0;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *j = cJSON_Parse(buf);
    pti_api_opts o;
    pti_api_opts_init(&o);
    int num_ctx = 0;
    if (cJSON_IsObject(j) && pti_api_apply_options(&o, j) == PT_OK)
        num_ctx = o.num_ctx;
    pti_api_opts_free(&o);
    cJSON_Delete(j);
    return num_ctx;
}

ps_model *ps_api_load(ps_request *r, bool openai, const char *name, const cJSON *req_options,
                      int64_t keep_alive_ns, pti_api_opts *opts)
{
    pti_api_opts_init(opts);
    if (pti_api_apply_options(opts, req_options) != PT_OK) {
        ps_api_fail(r, openai, 400, "%s", pt_last_error());
        pti_api_opts_free(opts);
        return NULL;
    }
    if (opts->unknown[0])
        ps_log(r->srv, PT_LOG_WARN, "warning: invalid option provided: %s (ignored)",
               opts->unknown);
    int num_ctx = opts->num_ctx ? opts->num_ctx : params_num_ctx(r->srv, name);
    pti_api_opts_free(opts);
    int status = 500;
    char err[512] = "";
    ps_model *m = ps_model_acquire(r->srv, name, num_ctx, keep_alive_ns, &status, err, sizeof err);
    if (!m) {
        if (status == 404 && openai)
            ps_api_fail(r, true, 404, "model \"%s\" not found, try pulling it first", name);
        else
            ps_api_fail(r, openai, status, "%s", err[0] ? err : "cannot load the model");
        return NULL;
    }
    pti_api_opts_init(opts);
    if (pti_api_apply_options(opts, ps_model_params(m)) != PT_OK) {
        ps_log(r->srv, PT_LOG_WARN, "warning: %s: params layer: %s (ignored)", name,
               pt_last_error());
        pti_api_opts_free(opts);
        pti_api_opts_init(opts);
    }
    opts->unknown[0] = '\0';
    pti_api_apply_options(opts, req_options); /* checked above */
    return m;
}

/* ---- running a generation ------------------------------------------------------------------- */

ps_gen *ps_gen_new(ps_request *r, const ps_gen_style *style, const char *model, ps_model *m)
{
    ps_gen *g = pti_calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->style = style;
    g->srv = r->srv;
    g->m = m;
    g->eng = ps_model_engine(m);
    snprintf(g->model, sizeof g->model, "%s", model);
    g->created = (int64_t)time(NULL);
    g->t0_ns = mono_ns();
    g->load_ns = ps_model_load_ns(m);
    int64_t to = ps_server_config(r->srv)->request_timeout_ns;
    g->deadline_ns = to > 0 ? g->t0_ns + to : 0;
    g->calls = cJSON_CreateArray();
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    snprintf(g->done_reason, sizeof g->done_reason, "stop");
    return g;
}

void ps_gen_free(ps_gen *g)
{
    if (!g)
        return;
    ps_model_release(g->srv, g->m);
    pti_tool_parser_free(g->tools);
    cJSON_Delete(g->calls);
    free(g->text);
    free(g->thinking);
    free(g->prompt_text);
    free(g->embedding);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

static bool append(char **buf, size_t *n, size_t *cap, const char *s, size_t len)
{
    if (*n + len + 1 > *cap) {
        size_t want = (*n + len + 1) * 2;
        char *q = pti_realloc(*buf, want);
        if (!q)
            return false;
        *buf = q;
        *cap = want;
    }
    memcpy(*buf + *n, s, len);
    *n += len;
    (*buf)[*n] = '\0';
    return true;
}

bool ps_gen_write(ps_gen *g, cJSON *obj)
{
    if (!g->stream || g->client_gone) {
        cJSON_Delete(obj);
        return !g->client_gone;
    }
    if (!obj && !g->style->openai)
        return true;
    bool ok = g->style->openai ? ps_stream_write_sse(g->stream, obj)
                               : ps_stream_write_ndjson(g->stream, obj);
    if (!ok)
        g->client_gone = true;
    return ok;
}

static bool ps_gen_write_chunk(ps_gen *g, cJSON *obj)
{
    return obj ? ps_gen_write(g, obj) : true;
}

/* Content released after the tool parser (or directly): collected and streamed. */
static bool emit(ps_gen *g, const char *text, size_t len, const char *thinking, size_t n_think,
                 const cJSON *new_calls)
{
    if (len)
        append(&g->text, &g->n_text, &g->cap_text, text, len);
    if (n_think)
        append(&g->thinking, &g->n_thinking, &g->cap_thinking, thinking, n_think);
    if (!g->stream || (!len && !n_think && cJSON_GetArraySize(new_calls) == 0))
        return true;
    return ps_gen_write_chunk(g, g->style->chunk(g, text, len, thinking, n_think, new_calls));
}

/* Passes content through the tool parser when there is one. */
static bool emit_content(ps_gen *g, const char *text, size_t len, bool finish)
{
    if (!g->tools)
        return emit(g, text, len, NULL, 0, NULL);
    pti_tool_text out = {0};
    cJSON *calls = cJSON_CreateArray();
    bool ok = finish ? pti_tool_parser_finish(g->tools, &out, calls)
                     : pti_tool_parser_push(g->tools, text, len, &out, calls);
    ok = ok && emit(g, out.data ? out.data : "", out.len, NULL, 0, calls);
    cJSON *c;
    while ((c = cJSON_DetachItemFromArray(calls, 0)) != NULL)
        cJSON_AddItemToArray(g->calls, c);
    cJSON_Delete(calls);
    free(out.data);
    return ok;
}

static bool think_part(void *user, bool thinking, const char *text, size_t len)
{
    ps_gen *g = user;
    return thinking ? emit(g, NULL, 0, text, len, NULL) : emit_content(g, text, len, false);
}

/* Generated text through the thinking splitter, then (content) the tool parser. */
static bool split_thinking(ps_gen *g, const char *text, size_t len, bool finish)
{
    bool ok = pti_think_split_push(&g->think, text, len, finish, think_part, g);
    if (finish)
        ok = emit_content(g, "", 0, true) && ok; /* flush the tool parser */
    return ok;
}

static bool on_text(void *user, const char *text, size_t len)
{
    ps_gen *g = user;
    pthread_mutex_lock(&g->mu);
    bool ok = true;
    if (g->deadline_ns && mono_ns() > g->deadline_ns) {
        snprintf(g->done_reason, sizeof g->done_reason, "length"); /* the time limit cut it */
        ok = false;
    } else {
        size_t n_fixed = 0;
        /* bytes that are not valid UTF-8 become U+FFFD, as Go's JSON encoder does (a model may
         * sample byte tokens that never form a character); NULL when already valid */
        char *fixed = pti_utf8_repair(text, len, &n_fixed);
        ok = split_thinking(g, fixed ? fixed : text, fixed ? n_fixed : len, false) &&
             !g->client_gone;
        free(fixed);
    }
    pthread_mutex_unlock(&g->mu);
    return ok;
}

static void finish_stream(ps_gen *g)
{
    if (g->st != PT_OK) {
        if (g->style->openai) {
            cJSON *e = cJSON_CreateObject(), *in = cJSON_AddObjectToObject(e, "error");
            cJSON_AddStringToObject(in, "message", g->msg);
            cJSON_AddStringToObject(in, "type", "api_error");
            cJSON_AddNullToObject(in, "param");
            cJSON_AddNullToObject(in, "code");
            ps_gen_write(g, e);
        } else {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "error", g->msg);
            ps_gen_write(g, e);
        }
        return;
    }
    g->style->finish(g);
}

static void on_done(void *user, pt_status st, const char *msg, const pt_gen_stats *stats,
                    const float *embedding, int32_t n_embd)
{
    ps_gen *g = user;
    pthread_mutex_lock(&g->mu);
    if (stats && st == PT_OK && !g->done) {
        split_thinking(g, "", 0, true);
        g->stats = *stats;
        if (stats->done_reason && strcmp(g->done_reason, "length") != 0)
            snprintf(g->done_reason, sizeof g->done_reason, "%s",
                     strcmp(stats->done_reason, "cancel") == 0 ? "stop" : stats->done_reason);
    }
    g->st = st;
    if (st != PT_OK)
        snprintf(g->msg, sizeof g->msg, "%s", msg ? msg : "generation failed");
    if (embedding && n_embd > 0) {
        g->embedding = pti_malloc((size_t)n_embd * sizeof *g->embedding);
        if (g->embedding) {
            memcpy(g->embedding, embedding, (size_t)n_embd * sizeof *embedding);
            g->n_embd = n_embd;
        }
    }
    ps_metrics_tokens(g->srv, g->stats.prompt_tokens, g->stats.gen_tokens, g->stats.gen_ns);
    if (g->stream) {
        finish_stream(g);
        ps_stream_set_tokens(g->stream, g->n_prompt_ids, g->stats.gen_tokens);
        ps_stream_close(g->stream);
        g->stream = NULL;
        pthread_mutex_unlock(&g->mu);
        ps_gen_free(g); /* the handler has returned: nothing else refers to g */
        return;
    }
    g->done = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Waits for on_done; past the deadline the request is cancelled (its on_done still comes). */
static void wait_done(ps_gen *g)
{
    pthread_mutex_lock(&g->mu);
    bool cancelled = false;
    while (!g->done) {
        if (g->deadline_ns && !cancelled) {
            int64_t left = g->deadline_ns - mono_ns();
            if (left < 0)
                left = 0;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += left / 1000000000;
            ts.tv_nsec += left % 1000000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) == ETIMEDOUT && !g->done) {
                snprintf(g->done_reason, sizeof g->done_reason, "length");
                cancelled = true;
                pthread_mutex_unlock(&g->mu);
                pti_engine_cancel(g->eng, g->req_id);
                pthread_mutex_lock(&g->mu);
            }
        } else {
            pthread_cond_wait(&g->cv, &g->mu);
        }
    }
    pthread_mutex_unlock(&g->mu);
}

/* wait_done for a reply that is not streamed, watching its connection meanwhile: a client that
 * hung up, or a server that is shutting down, cancels the generation (nobody would read the
 * answer, and shutdown must not wait for a long generation past its grace period). True when
 * the shutdown cancelled it. */
static bool wait_done_watching(ps_request *r, ps_gen *g)
{
    bool stopped = false;
    pthread_mutex_lock(&g->mu);
    while (!g->done && !g->client_gone && !stopped) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000; /* how often the connection is looked at */
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) != ETIMEDOUT || g->done)
            continue;
        if (g->deadline_ns && mono_ns() > g->deadline_ns)
            break; /* wait_done cancels it with done_reason "length" */
        pthread_mutex_unlock(&g->mu);
        stopped = ps_server_stopping(r->srv);
        bool gone = !stopped && ps_request_client_gone(r);
        if (stopped || gone)
            pti_engine_cancel(g->eng, g->req_id);
        pthread_mutex_lock(&g->mu);
        g->client_gone = g->client_gone || gone;
    }
    pthread_mutex_unlock(&g->mu);
    wait_done(g);
    return stopped;
}

void ps_gen_run(ps_request *r, ps_gen *g, pti_engine_request *req, bool stream)
{
    req->ev.on_text = on_text;
    req->ev.on_done = on_done;
    req->ev.user = g;
    r->tokens_in = req->n_ids;
    g->n_prompt_ids = req->n_ids;
    pthread_mutex_lock(&g->mu);
    g->req_id = pti_engine_submit(g->eng, req);
    if (!g->req_id) {
        pthread_mutex_unlock(&g->mu);
        bool full = pti_engine_queue_full_error();
        int status = full ? 503 : ps_api_status_of(pt_last_status());
        ps_api_fail(r, g->style->openai, status, "%s", pt_last_error());
        ps_gen_free(g);
        return;
    }
    if (stream) {
        g->stream =
            ps_reply_stream(r, g->style->openai ? "text/event-stream" : "application/x-ndjson");
        if (!g->stream) {
            g->client_gone = true;
            pthread_mutex_unlock(&g->mu);
            pti_engine_cancel(g->eng, g->req_id); /* g->stream is NULL: on_done signals */
            wait_done(g);
            ps_gen_free(g);
            return;
        }
        pthread_mutex_unlock(&g->mu);
        return; /* the callbacks write, close and free */
    }
    pthread_mutex_unlock(&g->mu);
    bool stopped = wait_done_watching(r, g);
    r->tokens_out = g->stats.gen_tokens;
    if (stopped)
        ps_api_fail(r, g->style->openai, 503, "server is shutting down");
    else if (g->st != PT_OK)
        ps_api_fail(r, g->style->openai, ps_api_status_of(g->st), "%s", g->msg);
    else
        ps_reply_json(r, 200, g->style->whole(g));
    ps_gen_free(g);
}

/* ---- tool calls in OpenAI's form ------------------------------------------------------------ */

/* "call_" + 8 random lowercase letters and digits (OpenAI's ids are opaque strings). */
static void random_call_id(char *buf, size_t cap)
{
    static _Atomic uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x =
        ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (++counter * 0x9E3779B97F4A7C15ull);
    char s[9];
    for (int i = 0; i < 8; i++) {
        x ^= x >> 29;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 32;
        s[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[x % 36];
    }
    s[8] = '\0';
    snprintf(buf, cap, "call_%s", s);
}

cJSON *ps_api_openai_tool_calls(const cJSON *calls, bool with_index)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *c;
    int i = 0;
    cJSON_ArrayForEach(c, calls)
    {
        const cJSON *fn = cJSON_GetObjectItem(c, "function");
        cJSON *o = cJSON_CreateObject();
        char id[32];
        random_call_id(id, sizeof id);
        if (with_index)
            cJSON_AddNumberToObject(o, "index", i);
        cJSON_AddStringToObject(o, "id", id);
        cJSON_AddStringToObject(o, "type", "function");
        cJSON *f = cJSON_AddObjectToObject(o, "function");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"));
        cJSON_AddStringToObject(f, "name", name ? name : "");
        char *args = cJSON_PrintUnformatted(cJSON_GetObjectItem(fn, "arguments"));
        cJSON_AddStringToObject(f, "arguments", args ? args : "{}");
        free(args);
        cJSON_AddItemToArray(out, o);
        i++;
    }
    return out;
}

/* ---- embeddings ----------------------------------------------------------------------------- */

static cJSON *no_chunk(ps_gen *g, const char *t, size_t n, const char *th, size_t nth,
                       const cJSON *c)
{
    (void)g, (void)t, (void)n, (void)th, (void)nth, (void)c;
    return NULL;
}

static cJSON *no_obj(ps_gen *g)
{
    (void)g;
    return NULL;
}

static void no_finish(ps_gen *g)
{
    (void)g;
}

static const ps_gen_style embed_style = {false, no_chunk, no_finish, no_obj};

/* Tokenizes one input for embedding (cut to the context when truncate). NULL with *status /
 * err when it is empty or, without truncate, too long. */
static int32_t *embed_ids(pti_engine *e, const char *text, bool truncate, int32_t *n_out,
                          int *status, char *err, size_t err_cap)
{
    int64_t n = 0;
    int32_t *ids = ps_api_tokenize_all(e, text, &n);
    if (!ids) {
        *status = 500;
        snprintf(err, err_cap, "cannot tokenize the input: %s", pt_last_error());
        return NULL;
    }
    int32_t limit = ps_api_context_limit(e);
    if (n > limit && !truncate) {
        free(ids);
        *status = 400;
        snprintf(err, err_cap, "input length exceeds maximum context length");
        return NULL;
    }
    if (n < 1) {
        free(ids);
        *status = 400;
        snprintf(err, err_cap, "the input is empty after tokenization");
        return NULL;
    }
    *n_out = (int32_t)(n > limit ? limit : n);
    return ids;
}

/* Stores the vector of a finished embedding request in row (cut to dims and normalised again
 * when 0 < dims < its length; *dim the stored length, which every row of a batch shares).
 * False with *status / err. */
static bool embed_result(ps_gen *g, int dims, float *row, int dim, int *status, char *err,
                         size_t err_cap)
{
    if (g->st != PT_OK || !g->embedding) {
        *status = 500;
        snprintf(err, err_cap, "%s", g->st != PT_OK ? g->msg : "no embedding was computed");
        return false;
    }
    int n_out = dims > 0 && dims < g->n_embd ? dims : g->n_embd;
    if (n_out != dim) {
        *status = 500;
        snprintf(err, err_cap, "an embedding of %d values where %d were expected", n_out, dim);
        return false;
    }
    float scale = 1.0f;
    if (n_out < g->n_embd) { /* Ollama: truncate, then normalise again */
        double ss = 0;
        for (int i = 0; i < n_out; i++)
            ss += (double)g->embedding[i] * g->embedding[i];
        scale = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
    }
    for (int i = 0; i < n_out; i++) {
        float v = n_out < g->n_embd ? g->embedding[i] * scale : g->embedding[i];
        row[i] = isfinite(v) ? v : 0.0f; /* JSON has no NaN or infinity */
    }
    return true;
}

/* The batch's buffer of count x dim floats, made when the first vector tells dim. One request
 * may hold at most PS_EMBED_BODY_FACTOR times the body limit in vectors (413 beyond): without
 * a bound, a 16 MiB list of one-letter inputs would ask for tens of gigabytes. */
#define PS_EMBED_BODY_FACTOR 64
static bool embed_alloc(const ps_request *r, ps_embed_vecs *out, int count, int dim, int *status,
                        char *err, size_t err_cap)
{
    size_t n = (size_t)count * (size_t)dim;
    size_t body = ps_server_max_body(r->srv);
    size_t cap = body > SIZE_MAX / PS_EMBED_BODY_FACTOR ? SIZE_MAX : body * PS_EMBED_BODY_FACTOR;
    bool fits = dim > 0 && n / (size_t)dim == (size_t)count && n <= cap / sizeof(float);
    if (!fits && dim > 0) {
        *status = 413;
        snprintf(err, err_cap,
                 "the embeddings of %d inputs (%d values each) would take %.0f MB, over this "
                 "server's limit of %zu MB (%d times its request body limit); send fewer inputs "
                 "per request",
                 count, dim, (double)count * dim * sizeof(float) / 1e6, cap / 1000000,
                 PS_EMBED_BODY_FACTOR);
        return false;
    }
    out->v = dim > 0 ? pti_malloc((n ? n : 1) * sizeof(float)) : NULL;
    out->count = count;
    out->dim = dim;
    if (out->v)
        return true;
    *status = 500;
    snprintf(err, err_cap, "out of memory: %d embeddings of %d values", count, dim);
    return false;
}

/* Submits an embedding request for ids; false with *status / err when it is refused. */
static bool embed_submit(ps_gen *g, const int32_t *ids, int32_t n, int *status, char *err,
                         size_t err_cap)
{
    pti_engine_request req = {0};
    req.ids = ids;
    req.n_ids = n;
    req.gen = pt_gen_opts_default();
    req.embed = true;
    req.ev.on_text = on_text;
    req.ev.on_done = on_done;
    req.ev.user = g;
    g->req_id = pti_engine_submit(g->eng, &req);
    if (g->req_id)
        return true;
    *status = pti_engine_queue_full_error() ? 503 : ps_api_status_of(pt_last_status());
    snprintf(err, err_cap, "%s", pt_last_error());
    return false;
}

/* How many inputs of one request are in the engine at once: its fair share, the slots
 * (--parallel). Submitting every input at once filled the queue, so concurrent chats got 503
 * until the whole batch was done; with a window, a chat queued meanwhile is admitted as soon
 * as a slot frees (the queue is FIFO), between two of the batch's inputs. */
static int embed_window(const ps_request *r, int count)
{
    int w = ps_server_config(r->srv)->n_parallel > 0 ? ps_server_config(r->srv)->n_parallel : 1;
    return w < count ? w : count;
}

/* The batch stops when the client has gone or the server stops. */
static bool embed_cancelled(ps_request *r, int *status, char *err, size_t err_cap)
{
    if (ps_server_stopping(r->srv)) {
        *status = 503;
        snprintf(err, err_cap, "server is shutting down");
        return true;
    }
    if (ps_request_client_gone(r)) {
        *status = 499;
        snprintf(err, err_cap, "the client closed the connection");
        return true;
    }
    return false;
}

/* Tokenizes and checks every input before any work (a bad input is a 400 at once). */
static bool embed_tokenize_all(pti_engine *e, const cJSON *inputs, int count, bool truncate,
                               int32_t **ids, int32_t *n_ids, int64_t *prompt_tokens, int *status,
                               char *err, size_t err_cap)
{
    bool single = cJSON_IsString(inputs);
    const cJSON *in = single ? inputs : inputs->child;
    for (int i = 0; i < count; i++, in = single ? NULL : in->next) {
        ids[i] = embed_ids(e, in->valuestring, truncate, &n_ids[i], status, err, err_cap);
        if (!ids[i])
            return false;
        *prompt_tokens += n_ids[i];
    }
    return true;
}

bool ps_api_embed_inputs(ps_request *r, bool openai, ps_model *m, const cJSON *inputs,
                         bool truncate, int dims, int64_t *prompt_tokens, ps_embed_vecs *out)
{
    pti_engine *e = ps_model_engine(m);
    int count = cJSON_IsString(inputs) ? 1 : cJSON_GetArraySize(inputs);
    int win = embed_window(r, count > 0 ? count : 1);
    int32_t **ids = pti_calloc((size_t)(count > 0 ? count : 1), sizeof *ids);
    int32_t *n_ids = pti_calloc((size_t)(count > 0 ? count : 1), sizeof *n_ids);
    ps_gen **ring = pti_calloc((size_t)win, sizeof *ring); /* input i lives in ring[i % win] */
    int status = 500, submitted = 0, finished = 0;
    char err[512] = "out of memory";
    *prompt_tokens = 0;
    *out = (ps_embed_vecs){0};
    bool ok = ids && n_ids && ring &&
              embed_tokenize_all(e, inputs, count, truncate, ids, n_ids, prompt_tokens, &status,
                                 err, sizeof err);
    while (ok && finished < count) {
        /* keep the window full, then take the oldest result in input order */
        while (ok && submitted < count && submitted - finished < win) {
            ps_gen *g = ps_gen_new(r, &embed_style, "", m);
            ok = g != NULL;
            if (!ok)
                break;
            g->m = NULL; /* the caller holds the model */
            ring[submitted % win] = g;
            ok = embed_submit(g, ids[submitted], n_ids[submitted], &status, err, sizeof err);
            if (!ok) {
                ps_gen_free(g);
                ring[submitted % win] = NULL;
                break;
            }
            free(ids[submitted]);
            ids[submitted++] = NULL;
        }
        if (!ok || embed_cancelled(r, &status, err, sizeof err)) {
            ok = false;
            break;
        }
        ps_gen *g = ring[finished % win];
        wait_done(g);
        if (!out->v && g->st == PT_OK && g->embedding)
            ok = embed_alloc(r, out, count, dims > 0 && dims < g->n_embd ? dims : g->n_embd,
                             &status, err, sizeof err);
        ok = ok &&
             embed_result(g, dims, out->v ? out->v + (size_t)finished * (size_t)out->dim : NULL,
                          out->dim, &status, err, sizeof err);
        ps_gen_free(g);
        ring[finished++ % win] = NULL;
    }
    for (int i = finished; ring && i < submitted; i++) { /* a failed or cancelled batch */
        pti_engine_cancel(e, ring[i % win]->req_id);
        wait_done(ring[i % win]);
        ps_gen_free(ring[i % win]);
    }
    for (int i = 0; ids && i < count; i++)
        free(ids[i]);
    free(ids);
    free(n_ids);
    free(ring);
    if (!ok) {
        free(out->v);
        *out = (ps_embed_vecs){0};
        ps_api_fail(r, openai, status, "%s", err);
    }
    return ok;
}

bool ps_api_dimensions(ps_request *r, bool openai, int *dims)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, "dimensions");
    *dims = 0;
    if (!v || cJSON_IsNull(v))
        return true;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 ||
        v->valuedouble > 1 << 20) {
        ps_api_fail(r, openai, 400, "dimensions must be a positive integer");
        return false;
    }
    *dims = (int)v->valuedouble;
    return true;
}
