/* Ollama's generation endpoints (ollama-api.md 1.1, 1.2, 1.4): POST /api/generate, /api/chat,
 * /api/embed and /api/embeddings, on the shared plumbing of api_common.c.
 *
 * Decisions where Ollama has no equivalent: a request cut by the server's --timeout ends
 * normally with done_reason "length" (a limit cut the answer, as num_predict would); the
 * `context` of a reply is the previous context's text + the prompt + the answer tokenized
 * again, as Ollama computes it; /api/embeddings returns the engine's L2-normalised vector
 * (Ollama's legacy endpoint does not normalise; the engine gives no unnormalised one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "../llm/chat_template.h"
#include "../llm/llm_gen.h"

/* ---- reply objects ------------------------------------------------------------------------- */

static cJSON *base_object(const ps_gen *g)
{
    cJSON *o = cJSON_CreateObject();
    char t[64];
    ps_api_time(t, sizeof t);
    cJSON_AddStringToObject(o, "model", g->model);
    cJSON_AddStringToObject(o, "created_at", t);
    return o;
}

static void add_metrics(cJSON *o, const ps_gen *g)
{
    cJSON_AddStringToObject(o, "done_reason", g->done_reason);
    if (g->want_context) {
        size_t n_prompt = strlen(g->prompt_text ? g->prompt_text : "");
        char *all = pti_malloc(n_prompt + g->n_text + 1);
        if (all) {
            memcpy(all, g->prompt_text ? g->prompt_text : "", n_prompt);
            memcpy(all + n_prompt, g->text ? g->text : "", g->n_text);
            all[n_prompt + g->n_text] = '\0';
            const pt_llm *llm = pti_engine_llm(g->eng);
            int64_t n = pt_llm_tokenize(llm, all, strlen(all), true, true, NULL, 0);
            int32_t *ids = n > 0 ? pti_malloc((size_t)n * sizeof *ids) : NULL;
            if (ids && pt_llm_tokenize(llm, all, strlen(all), true, true, ids, n) == n)
                cJSON_AddItemToObject(o, "context", cJSON_CreateIntArray(ids, (int)n));
            free(ids);
            free(all);
        }
    }
    int64_t total = 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* t0 is taken after the model was acquired: a load this request caused comes on top */
    total = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - g->t0_ns + g->load_ns;
    cJSON_AddNumberToObject(o, "total_duration", (double)total);
    cJSON_AddNumberToObject(o, "load_duration", (double)g->load_ns);
    cJSON_AddNumberToObject(o, "prompt_eval_count", g->stats.prompt_tokens);
    cJSON_AddNumberToObject(o, "prompt_eval_duration", (double)g->stats.prompt_ns);
    cJSON_AddNumberToObject(o, "eval_count", g->stats.gen_tokens);
    cJSON_AddNumberToObject(o, "eval_duration", (double)g->stats.gen_ns);
}

static void add_text(cJSON *o, const char *key, const char *text, size_t len)
{
    char *s = pti_malloc(len + 1);
    if (!s)
        return;
    memcpy(s, text ? text : "", len);
    s[len] = '\0';
    cJSON_AddStringToObject(o, key, s);
    free(s);
}

static cJSON *generate_chunk(ps_gen *g, const char *text, size_t len, const char *thinking,
                             size_t n_thinking, const cJSON *calls)
{
    (void)calls;
    cJSON *o = base_object(g);
    add_text(o, "response", text, len);
    if (n_thinking)
        add_text(o, "thinking", thinking, n_thinking);
    cJSON_AddFalseToObject(o, "done");
    return o;
}

static void generate_finish(ps_gen *g)
{
    cJSON *o = base_object(g);
    cJSON_AddStringToObject(o, "response", "");
    cJSON_AddTrueToObject(o, "done");
    add_metrics(o, g);
    ps_gen_write(g, o);
}

static cJSON *generate_whole(ps_gen *g)
{
    cJSON *o = base_object(g);
    add_text(o, "response", g->text, g->n_text);
    if (g->n_thinking)
        add_text(o, "thinking", g->thinking, g->n_thinking);
    cJSON_AddTrueToObject(o, "done");
    add_metrics(o, g);
    return o;
}

static cJSON *chat_message(const char *text, size_t len, const char *thinking, size_t n_thinking,
                           const cJSON *calls)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    add_text(m, "content", text, len);
    if (n_thinking)
        add_text(m, "thinking", thinking, n_thinking);
    if (cJSON_GetArraySize(calls) > 0)
        cJSON_AddItemToObject(m, "tool_calls", cJSON_Duplicate(calls, true));
    return m;
}

static cJSON *chat_chunk(ps_gen *g, const char *text, size_t len, const char *thinking,
                         size_t n_thinking, const cJSON *calls)
{
    cJSON *o = base_object(g);
    cJSON_AddItemToObject(o, "message", chat_message(text, len, thinking, n_thinking, calls));
    cJSON_AddFalseToObject(o, "done");
    return o;
}

static void chat_finish(ps_gen *g)
{
    cJSON *o = base_object(g);
    cJSON_AddItemToObject(o, "message", chat_message("", 0, NULL, 0, NULL));
    cJSON_AddTrueToObject(o, "done");
    add_metrics(o, g);
    ps_gen_write(g, o);
}

static cJSON *chat_whole(ps_gen *g)
{
    cJSON *o = base_object(g);
    cJSON_AddItemToObject(o, "message",
                          chat_message(g->text, g->n_text, g->thinking, g->n_thinking, g->calls));
    cJSON_AddTrueToObject(o, "done");
    add_metrics(o, g);
    return o;
}

static const ps_gen_style generate_style = {false, generate_chunk, generate_finish, generate_whole};
static const ps_gen_style chat_style = {false, chat_chunk, chat_finish, chat_whole};

/* ---- shared request fields ------------------------------------------------------------------ */

typedef struct common_fields {
    const char *model;
    bool stream;
    int64_t keep_alive;
    pti_api_format_kind format;
    const cJSON *schema;
    bool think_set, think;
} common_fields;

static bool read_think(ps_request *r, common_fields *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, "think");
    if (!v || cJSON_IsNull(v))
        return true;
    c->think_set = true;
    if (cJSON_IsBool(v)) {
        c->think = cJSON_IsTrue(v);
        return true;
    }
    if (cJSON_IsString(v) && (!strcmp(v->valuestring, "low") || !strcmp(v->valuestring, "medium") ||
                              !strcmp(v->valuestring, "high"))) {
        c->think = true;
        return true;
    }
    ps_reply_error(r, 400,
                   "invalid think value: must be a boolean or \"low\", \"medium\", "
                   "\"high\"");
    return false;
}

/* model, stream, keep_alive, format, think; answers 400/404 and returns false on error. */
static bool read_common(ps_request *r, common_fields *c)
{
    memset(c, 0, sizeof *c);
    c->model = ps_api_model_name(r, false);
    if (!c->model)
        return false;
    if (pti_api_bool(r->json, "stream", true, &c->stream) != PT_OK ||
        pti_api_keep_alive(cJSON_GetObjectItemCaseSensitive(r->json, "keep_alive"),
                           &c->keep_alive) != PT_OK ||
        pti_api_format(cJSON_GetObjectItemCaseSensitive(r->json, "format"), &c->format,
                       &c->schema) != PT_OK) {
        ps_reply_error(r, 400, "%s", pt_last_error());
        return false;
    }
    if (!read_think(r, c))
        return false;
    ps_model_ref ref;
    if (!ps_model_resolve(r->srv, c->model, &ref)) {
        ps_reply_error(r, 404, "model '%s' not found", c->model);
        return false;
    }
    return true;
}

/* An empty prompt or message list: load the model (or, with keep_alive 0, unload it). */
static void load_only(ps_request *r, const common_fields *c, bool chat)
{
    const char *reason = "load";
    if (c->keep_alive == 0) {
        ps_model_unload(r->srv, c->model);
        reason = "unload";
    } else {
        int status = 500;
        char err[512] = "";
        ps_model *m =
            ps_model_acquire(r->srv, c->model, 0, c->keep_alive, &status, err, sizeof err);
        if (!m) {
            ps_reply_error(r, status, "%s", err);
            return;
        }
        ps_model_release(r->srv, m);
    }
    cJSON *o = cJSON_CreateObject();
    char t[64];
    ps_api_time(t, sizeof t);
    cJSON_AddStringToObject(o, "model", c->model);
    cJSON_AddStringToObject(o, "created_at", t);
    if (chat)
        cJSON_AddItemToObject(o, "message", chat_message("", 0, NULL, 0, NULL));
    else
        cJSON_AddStringToObject(o, "response", "");
    cJSON_AddTrueToObject(o, "done");
    cJSON_AddStringToObject(o, "done_reason", reason);
    ps_reply_json(r, 200, o);
}

/* Tokenizes the prompt, builds the constraint and runs the generation (takes over g). */
static void submit(ps_request *r, ps_gen *g, ps_model *m, pti_api_opts *opts, const char *prompt,
                   const common_fields *c, bool family_stops)
{
    char err[512];
    int32_t n = 0;
    int32_t *ids = ps_api_tokenize(m, prompt, &n, err, sizeof err);
    if (!ids) {
        ps_reply_error(r, 400, "%s", err);
        ps_gen_free(g);
        return;
    }
    pti_engine_request req = {0};
    req.ids = ids;
    req.n_ids = n;
    req.gen = opts->gen;
    size_t n_extra = 0;
    req.extra_stop = family_stops ? pti_chat_stop_strings(ps_api_family(m), &n_extra) : NULL;
    req.n_extra_stop = (int32_t)n_extra;
    if (!ps_api_constraint(c->format, c->schema, &req.constraint, err, sizeof err)) {
        ps_reply_error(r, 400, "%s", err);
        free(ids);
        ps_gen_free(g);
        return;
    }
    ps_gen_run(r, g, &req, c->stream);
    free(ids);
}

/* ---- /api/generate -------------------------------------------------------------------------- */

/* Text of the deprecated context ids, which Ollama puts before the new prompt. */
static char *context_text(ps_request *r, ps_model *m)
{
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(r->json, "context");
    pt_llm *llm = pti_engine_llm(ps_model_engine(m));
    int32_t n = 0;
    int32_t *ids = pti_api_context_ids(ctx, pt_llm_get_info(llm)->n_vocab, &n);
    if (n < 0)
        return NULL;
    char *text = n > 0 ? pt_llm_detokenize(llm, ids, n, true) : pti_strdup("");
    free(ids);
    return text;
}

/* The request's string fields of /api/generate. */
typedef struct generate_fields {
    const char *prompt, *suffix, *system, *tmpl;
    bool raw;
} generate_fields;

/* The whole prompt text: the previous context's text, then the rendered prompt. NULL with
 * *status / err on failure. */
static char *generate_prompt_text(ps_request *r, ps_model *m, const common_fields *c,
                                  const generate_fields *f, int *status, char *err, size_t err_cap)
{
    char *before = context_text(r, m);
    if (!before) {
        *status = 400;
        snprintf(err, err_cap, "%s", pt_last_error());
        return NULL;
    }
    char *text = ps_api_generate_prompt(m, c->model, f->prompt, f->suffix, f->system, f->tmpl,
                                        f->raw, c->think_set, c->think, status, err, err_cap);
    char *full = NULL;
    if (text) {
        size_t nb = strlen(before), nt = strlen(text);
        full = pti_malloc(nb + nt + 1);
        if (full) {
            memcpy(full, before, nb);
            memcpy(full + nb, text, nt + 1);
        } else {
            *status = 500;
            snprintf(err, err_cap, "out of memory");
        }
    }
    free(before);
    free(text);
    return full;
}

void ps_api_generate(ps_request *r)
{
    common_fields c;
    if (!read_common(r, &c))
        return;
    generate_fields f;
    if (pti_api_string(r->json, "prompt", &f.prompt) != PT_OK ||
        pti_api_string(r->json, "suffix", &f.suffix) != PT_OK ||
        pti_api_string(r->json, "system", &f.system) != PT_OK ||
        pti_api_string(r->json, "template", &f.tmpl) != PT_OK ||
        pti_api_bool(r->json, "raw", false, &f.raw) != PT_OK) {
        ps_reply_error(r, 400, "%s", pt_last_error());
        return;
    }
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(r->json, "context");
    if (f.raw &&
        ((f.tmpl && f.tmpl[0]) || (f.system && f.system[0]) || cJSON_GetArraySize(ctx) > 0)) {
        ps_reply_error(r, 400, "raw mode does not support template, system, or context");
        return;
    }
    bool images = false;
    if (pti_api_images(cJSON_GetObjectItemCaseSensitive(r->json, "images"), "images", &images) !=
        PT_OK) {
        ps_reply_error(r, 400, "%s", pt_last_error());
        return;
    }
    if (images) {
        ps_reply_error(r, 400, "this model is missing data required for image input");
        return;
    }
    if (!f.prompt || !f.prompt[0]) {
        load_only(r, &c, false);
        return;
    }
    pti_api_opts opts;
    ps_model *m =
        ps_api_load(r, false, c.model, cJSON_GetObjectItemCaseSensitive(r->json, "options"),
                    c.keep_alive, &opts);
    if (!m)
        return;
    int status = 500;
    char err[512] = "out of memory";
    char *full = generate_prompt_text(r, m, &c, &f, &status, err, sizeof err);
    ps_gen *g = full ? ps_gen_new(r, &generate_style, c.model, m) : NULL;
    if (!g) {
        ps_reply_error(r, full ? 500 : status, "%s", full ? "out of memory" : err);
        free(full);
        pti_api_opts_free(&opts);
        ps_model_release(r->srv, m);
        return;
    }
    g->prompt_text = full;
    g->want_context = !f.raw;
    pti_think_split_init(&g->think, c.think_set && c.think);
    submit(r, g, m, &opts, full, &c, !f.raw);
    pti_api_opts_free(&opts);
}

/* ---- /api/chat ------------------------------------------------------------------------------ */

void ps_api_chat(ps_request *r)
{
    common_fields c;
    if (!read_common(r, &c))
        return;
    bool images = false;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(r->json, "messages");
    cJSON *messages =
        in && !cJSON_IsNull(in) ? pti_api_chat_messages(in, &images) : cJSON_CreateArray();
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(r->json, "tools");
    int n_tools = 0;
    if (!messages || pti_api_tools(tools, &n_tools) != PT_OK) {
        ps_reply_error(r, 400, "%s", pt_last_error());
        cJSON_Delete(messages);
        return;
    }
    if (images) {
        ps_reply_error(r, 400, "this model is missing data required for image input");
        cJSON_Delete(messages);
        return;
    }
    if (cJSON_GetArraySize(messages) == 0) {
        cJSON_Delete(messages);
        load_only(r, &c, true);
        return;
    }
    pti_api_opts opts;
    ps_model *m =
        ps_api_load(r, false, c.model, cJSON_GetObjectItemCaseSensitive(r->json, "options"),
                    c.keep_alive, &opts);
    if (!m) {
        cJSON_Delete(messages);
        return;
    }
    int status = 400;
    char err[512] = "";
    char *prompt = ps_api_chat_prompt(m, c.model, messages, n_tools ? tools : NULL, c.think_set,
                                      c.think, &status, err, sizeof err);
    cJSON_Delete(messages);
    ps_gen *g = prompt ? ps_gen_new(r, &chat_style, c.model, m) : NULL;
    if (!g) {
        ps_reply_error(r, prompt ? 500 : status, "%s", prompt ? "out of memory" : err);
        free(prompt);
        pti_api_opts_free(&opts);
        ps_model_release(r->srv, m);
        return;
    }
    if (n_tools) {
        char open_tag[64], close_tag[64];
        ps_api_tool_tags(m, open_tag, close_tag, sizeof open_tag);
        g->tools = pti_tool_parser_new(open_tag, close_tag);
    }
    pti_think_split_init(&g->think, c.think_set && c.think);
    submit(r, g, m, &opts, prompt, &c, true);
    free(prompt);
    pti_api_opts_free(&opts);
}

/* ---- embeddings ----------------------------------------------------------------------------- */

static bool string_list(const cJSON *v)
{
    if (cJSON_IsString(v))
        return true;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
        return false;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) if (!cJSON_IsString(e)) return false;
    return true;
}

void ps_api_embed(ps_request *r)
{
    const char *name = ps_api_model_name(r, false);
    if (!name)
        return;
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(r->json, "input");
    bool truncate = true;
    int64_t keep = 0;
    if (pti_api_bool(r->json, "truncate", true, &truncate) != PT_OK ||
        pti_api_keep_alive(cJSON_GetObjectItemCaseSensitive(r->json, "keep_alive"), &keep) !=
            PT_OK) {
        ps_reply_error(r, 400, "%s", pt_last_error());
        return;
    }
    int dims = 0;
    if (!ps_api_dimensions(r, false, &dims))
        return;
    if (input && !cJSON_IsNull(input) && !string_list(input)) {
        ps_reply_error(r, 400,
                       "invalid input type: input must be a string or a non-empty "
                       "array of strings");
        return;
    }
    pti_api_opts opts;
    ps_model *m = ps_api_load(r, false, name, cJSON_GetObjectItemCaseSensitive(r->json, "options"),
                              keep, &opts);
    if (!m)
        return;
    pti_api_opts_free(&opts);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t t0 = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    int64_t tokens = 0;
    ps_embed_vecs vecs = {0}; /* no input: load only, as Ollama (an empty list) */
    if (!input || cJSON_IsNull(input) ||
        ps_api_embed_inputs(r, false, m, input, truncate, dims, &tokens, &vecs)) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        cJSON *before = cJSON_CreateObject();
        cJSON_AddStringToObject(before, "model", name);
        cJSON *after = cJSON_CreateObject();
        cJSON_AddNumberToObject(
            after, "total_duration",
            (double)((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - t0 + ps_model_load_ns(m)));
        cJSON_AddNumberToObject(after, "load_duration", (double)ps_model_load_ns(m));
        cJSON_AddNumberToObject(after, "prompt_eval_count", (double)tokens);
        r->tokens_in = tokens;
        ps_api_reply_embeddings(r, &vecs, PS_EMBED_OLLAMA, before, "embeddings", after);
    }
    ps_model_release(r->srv, m);
}

void ps_api_embeddings(ps_request *r)
{
    const char *name = ps_api_model_name(r, false);
    if (!name)
        return;
    const char *prompt = NULL;
    int64_t keep = 0;
    if (pti_api_string(r->json, "prompt", &prompt) != PT_OK ||
        pti_api_keep_alive(cJSON_GetObjectItemCaseSensitive(r->json, "keep_alive"), &keep) !=
            PT_OK) {
        ps_reply_error(r, 400, "%s", pt_last_error());
        return;
    }
    pti_api_opts opts;
    ps_model *m = ps_api_load(r, false, name, cJSON_GetObjectItemCaseSensitive(r->json, "options"),
                              keep, &opts);
    if (!m)
        return;
    pti_api_opts_free(&opts);
    cJSON *vec = NULL;
    if (!prompt || !prompt[0]) {
        vec = cJSON_CreateArray(); /* Ollama answers an empty embedding for an empty prompt */
    } else {
        int64_t tokens = 0;
        cJSON *one = cJSON_CreateString(prompt);
        ps_embed_vecs vecs;
        if (one && ps_api_embed_inputs(r, false, m, one, true, 0, &tokens, &vecs)) {
            vec = ps_api_embed_vector_json(vecs.v, vecs.dim);
            free(vecs.v);
            r->tokens_in = tokens;
            if (!vec)
                ps_reply_error(r, 500, "out of memory");
        } else if (!one) {
            ps_reply_error(r, 500, "out of memory");
        }
        cJSON_Delete(one);
    }
    if (vec) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "embedding", vec);
        ps_reply_json(r, 200, o);
    }
    ps_model_release(r->srv, m);
}
