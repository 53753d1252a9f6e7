/* TEMPORARY (the integrator deletes this file at merge): stand-ins so the srv-http branch links
 * and its HTTP layer can be tested before the other helpers' branches are merged.
 *
 *   - the endpoint handlers of api_ollama.c, api_openai.c and api_store.c answer
 *     501 {"error":"not implemented yet"}, except /api/generate, which streams a minimal
 *     NDJSON completion (model, prompt, options.num_predict, keep_alive seconds) so the
 *     stream, disconnect and shutdown paths can be tested;
 *   - a minimal engine (src/serve/engine.h) that runs pt_llm_generate_tokens one request at
 *     a time on a worker thread (no batching, no embeddings, no constraints) until the
 *     "engine" helper's engine.c is merged. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/internal.h"
#include "serve_internal.h"

/* (the temporary engine was removed on srv-clients: src/serve/engine.c is merged) */

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
        cJSON_AddStringToObject(o, "done_reason",
                                stats->done_reason ? stats->done_reason : "stop");
        cJSON_AddNumberToObject(o, "prompt_eval_count", stats->prompt_tokens);
        cJSON_AddNumberToObject(o, "eval_count", stats->gen_tokens);
        ps_metrics_tokens(g->srv, stats->prompt_tokens, stats->gen_tokens, stats->gen_ns);
    }
    ps_stream_write_ndjson(g->s, o);
    ps_stream_close(g->s);
    ps_model_release(g->srv, g->m);
    free(g);
}

void ps_api_generate(ps_request *r)
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
    int64_t keep = cJSON_IsNumber(ka) ? (int64_t)(ka->valuedouble * 1e9) : INT64_MIN;
    int status = 500;
    char err[512];
    ps_model *m = ps_model_acquire(r->srv, model->valuestring, 0, keep, &status, err, sizeof err);
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

/* ---- the other handlers: not implemented in this branch --------------------------------------- */

static void pending(ps_request *r)
{
    ps_reply_error(r, 501, "not implemented yet");
}

void ps_api_chat(ps_request *r) { pending(r); }
void ps_api_embed(ps_request *r) { pending(r); }
void ps_api_embeddings(ps_request *r) { pending(r); }
void ps_api_v1_chat(ps_request *r) { pending(r); }
void ps_api_v1_completions(ps_request *r) { pending(r); }
void ps_api_v1_embeddings(ps_request *r) { pending(r); }
void ps_api_v1_models(ps_request *r) { pending(r); }
void ps_api_v1_model(ps_request *r) { pending(r); }
void ps_api_tags(ps_request *r) { pending(r); }
void ps_api_show(ps_request *r) { pending(r); }
void ps_api_version(ps_request *r) { pending(r); }
void ps_api_copy(ps_request *r) { pending(r); }
void ps_api_delete(ps_request *r) { pending(r); }
void ps_api_create(ps_request *r) { pending(r); }
void ps_api_blob_head(ps_request *r) { pending(r); }
void ps_api_blob_post(ps_request *r) { pending(r); }
void ps_api_pull(ps_request *r) { pending(r); }
void ps_api_push(ps_request *r) { pending(r); }

/* /api/ps is simple enough to answer for real from the registry. */
void ps_api_ps(ps_request *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *models = ps_registry_ps_json(r->srv);
    if (models)
        cJSON_AddItemToObject(o, "models", models);
    ps_reply_json(r, 200, o);
}
