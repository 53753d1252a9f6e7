/* OpenAI-compatible endpoints (ollama-api.md section 2): POST /v1/chat/completions,
 * /v1/completions, /v1/embeddings, GET /v1/models and /v1/models/{id}, mapped onto the same
 * generation plumbing as the native API (api_common.c), as Ollama's openai middleware maps
 * them onto /api/chat and /api/generate: temperature and top_p default to 1.0, max_tokens is
 * num_predict, response_format is the format, tool-call arguments travel as JSON strings.
 * Streams are SSE: `data: {chunk}` events, the finish chunk, an optional usage chunk, then
 * `data: [DONE]`. Errors use OpenAI's shape; one after a stream started is a `data:` event
 * holding {"error": {...}}. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "api_common.h"
#include "../llm/chat_template.h"
#include "store_ops.h"

/* ---- reply objects ------------------------------------------------------------------------- */

static cJSON *base(const ps_gen *g, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", g->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)g->created);
    cJSON_AddStringToObject(o, "model", g->model);
    cJSON_AddStringToObject(o, "system_fingerprint", "fp_ollama");
    return o;
}

static cJSON *usage(const ps_gen *g)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", g->stats.prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", g->stats.gen_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", g->stats.prompt_tokens + g->stats.gen_tokens);
    return u;
}

static const char *finish_reason(const ps_gen *g)
{
    if (cJSON_GetArraySize(g->calls) > 0)
        return "tool_calls";
    return strcmp(g->done_reason, "length") == 0 ? "length" : "stop";
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

static cJSON *chat_delta_chunk(ps_gen *g, cJSON *delta, const char *reason)
{
    cJSON *o = base(g, "chat.completion.chunk");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (!g->sent_first) {
        cJSON_AddStringToObject(delta, "role", "assistant");
        g->sent_first = true;
    }
    cJSON_AddItemToObject(c, "delta", delta);
    if (reason)
        cJSON_AddStringToObject(c, "finish_reason", reason);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(choices, c);
    return o;
}

static cJSON *chat_chunk(ps_gen *g, const char *text, size_t len, const char *thinking,
                         size_t n_thinking, const cJSON *calls)
{
    cJSON *d = cJSON_CreateObject();
    if (len || !n_thinking)
        add_text(d, "content", text, len);
    if (n_thinking)
        add_text(d, "reasoning", thinking, n_thinking);
    if (cJSON_GetArraySize(calls) > 0) {
        /* indexes continue over the whole stream */
        cJSON *tc = ps_api_openai_tool_calls(calls, true);
        int base_index = cJSON_GetArraySize(g->calls);
        cJSON *e;
        cJSON_ArrayForEach(e, tc)
            cJSON_SetNumberValue(cJSON_GetObjectItem(e, "index"),
                                 base_index + cJSON_GetObjectItem(e, "index")->valuedouble);
        cJSON_AddItemToObject(d, "tool_calls", tc);
    }
    return chat_delta_chunk(g, d, NULL);
}

static void finish_usage_done(ps_gen *g)
{
    if (g->include_usage) {
        cJSON *u =
            base(g, strncmp(g->id, "cmpl", 4) == 0 ? "text_completion" : "chat.completion.chunk");
        cJSON_AddArrayToObject(u, "choices");
        cJSON_AddItemToObject(u, "usage", usage(g));
        ps_gen_write(g, u);
    }
    ps_gen_write(g, NULL);
}

static void chat_finish(ps_gen *g)
{
    ps_gen_write(g, chat_delta_chunk(g, cJSON_CreateObject(), finish_reason(g)));
    finish_usage_done(g);
}

static cJSON *chat_whole(ps_gen *g)
{
    cJSON *o = base(g, "chat.completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON *m = cJSON_AddObjectToObject(c, "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    add_text(m, "content", g->text, g->n_text);
    if (g->n_thinking)
        add_text(m, "reasoning", g->thinking, g->n_thinking);
    if (cJSON_GetArraySize(g->calls) > 0)
        cJSON_AddItemToObject(m, "tool_calls", ps_api_openai_tool_calls(g->calls, false));
    cJSON_AddStringToObject(c, "finish_reason", finish_reason(g));
    cJSON_AddItemToArray(choices, c);
    cJSON_AddItemToObject(o, "usage", usage(g));
    return o;
}

static cJSON *completion_choice(const char *text, size_t len, const char *reason)
{
    cJSON *c = cJSON_CreateObject();
    add_text(c, "text", text, len);
    cJSON_AddNumberToObject(c, "index", 0);
    if (reason)
        cJSON_AddStringToObject(c, "finish_reason", reason);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    return c;
}

static cJSON *completion_chunk(ps_gen *g, const char *text, size_t len, const char *thinking,
                               size_t n_thinking, const cJSON *calls)
{
    (void)thinking, (void)n_thinking, (void)calls;
    if (!len)
        return NULL;
    cJSON *o = base(g, "text_completion");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), completion_choice(text, len, NULL));
    return o;
}

static void completion_finish(ps_gen *g)
{
    cJSON *o = base(g, "text_completion");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"),
                         completion_choice("", 0, finish_reason(g)));
    ps_gen_write(g, o);
    finish_usage_done(g);
}

static cJSON *completion_whole(ps_gen *g)
{
    cJSON *o = base(g, "text_completion");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"),
                         completion_choice(g->text, g->n_text, finish_reason(g)));
    cJSON_AddItemToObject(o, "usage", usage(g));
    return o;
}

static const ps_gen_style chat_style = {true, chat_chunk, chat_finish, chat_whole};
static const ps_gen_style completion_style = {true, completion_chunk, completion_finish,
                                              completion_whole};

/* ---- shared fields -------------------------------------------------------------------------- */

typedef struct v1_fields {
    const char *model;
    bool stream, include_usage;
    pti_api_format_kind format;
    const cJSON *schema;
    cJSON *options;        /* Ollama form */
    bool think_set, think; /* reasoning_effort / reasoning.effort, as Ollama maps them */
} v1_fields;

/* reasoning_effort ("low" | "medium" | "high" | "max" | "none") or reasoning.effort: think
 * on, or off for "none". */
static bool read_reasoning(ps_request *r, v1_fields *f)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, "reasoning_effort");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(r->json, "reasoning");
    if (rs && !cJSON_IsNull(rs) && !cJSON_IsObject(rs)) {
        ps_reply_openai_error(r, 400, "invalid_request_error", "reasoning must be an object");
        return false;
    }
    if ((!v || cJSON_IsNull(v)) && cJSON_IsObject(rs))
        v = cJSON_GetObjectItemCaseSensitive(rs, "effort");
    if (!v || cJSON_IsNull(v))
        return true;
    static const char *const levels[] = {"low", "medium", "high", "max", "none"};
    for (size_t i = 0; cJSON_IsString(v) && i < sizeof levels / sizeof levels[0]; i++)
        if (!strcmp(v->valuestring, levels[i])) {
            f->think_set = true;
            f->think = strcmp(v->valuestring, "none") != 0;
            return true;
        }
    ps_reply_openai_error(r, 400, "invalid_request_error",
                          "invalid reasoning value: must be "
                          "\"low\", \"medium\", \"high\", \"max\" or \"none\"");
    return false;
}

static bool read_v1(ps_request *r, v1_fields *f)
{
    memset(f, 0, sizeof *f);
    f->model = ps_api_model_name(r, true);
    if (!f->model)
        return false;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(r->json, "stream_options");
    if (so && !cJSON_IsNull(so) && !cJSON_IsObject(so)) {
        ps_reply_openai_error(r, 400, "invalid_request_error", "stream_options must be an object");
        return false;
    }
    if (pti_api_bool(r->json, "stream", false, &f->stream) != PT_OK ||
        (so && !cJSON_IsNull(so) &&
         pti_api_bool(so, "include_usage", false, &f->include_usage) != PT_OK) ||
        pti_api_openai_format(cJSON_GetObjectItemCaseSensitive(r->json, "response_format"),
                              &f->format, &f->schema) != PT_OK ||
        !(f->options = pti_api_openai_options(r->json))) {
        ps_reply_openai_error(r, 400, "invalid_request_error", "%s", pt_last_error());
        return false;
    }
    if (!read_reasoning(r, f)) {
        cJSON_Delete(f->options);
        return false;
    }
    ps_model_ref ref;
    if (!ps_model_resolve(r->srv, f->model, &ref)) {
        ps_reply_openai_error(r, 404, "not_found_error",
                              "model \"%s\" not found, try pulling it first", f->model);
        cJSON_Delete(f->options);
        return false;
    }
    return true;
}

static void make_id(char *buf, size_t cap, const char *prefix)
{
    snprintf(buf, cap, "%s%d", prefix, rand() % 1000);
}

static void run_v1(ps_request *r, ps_gen *g, ps_model *m, pti_api_opts *opts, const char *prompt,
                   const v1_fields *f)
{
    char err[512];
    int32_t n = 0;
    int32_t *ids = ps_api_tokenize(m, prompt, &n, err, sizeof err);
    if (!ids) {
        ps_reply_openai_error(r, 400, "invalid_request_error", "%s", err);
        ps_gen_free(g);
        return;
    }
    pti_engine_request req = {0};
    req.ids = ids;
    req.n_ids = n;
    req.gen = opts->gen;
    size_t n_extra = 0;
    req.extra_stop = pti_chat_stop_strings(ps_api_family(m), &n_extra);
    req.n_extra_stop = (int32_t)n_extra;
    if (!ps_api_constraint(f->format, f->schema, &req.constraint, err, sizeof err)) {
        ps_reply_openai_error(r, 400, "invalid_request_error", "%s", err);
        free(ids);
        ps_gen_free(g);
        return;
    }
    g->include_usage = f->include_usage;
    ps_gen_run(r, g, &req, f->stream);
    free(ids);
}

/* ---- /v1/chat/completions ------------------------------------------------------------------- */

void ps_api_v1_chat(ps_request *r)
{
    v1_fields f;
    if (!read_v1(r, &f))
        return;
    bool images = false;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(r->json, "tools");
    int n_tools = 0;
    cJSON *messages =
        pti_api_openai_messages(cJSON_GetObjectItemCaseSensitive(r->json, "messages"), &images);
    if (!messages || pti_api_tools(tools, &n_tools) != PT_OK) {
        ps_reply_openai_error(r, 400, "invalid_request_error", "%s", pt_last_error());
        goto out;
    }
    if (images) {
        ps_reply_openai_error(r, 400, "invalid_request_error",
                              "this model is missing data required for image input");
        goto out;
    }
    if (cJSON_GetArraySize(messages) == 0) {
        ps_reply_openai_error(r, 400, "invalid_request_error", "messages must not be empty");
        goto out;
    }
    pti_api_opts opts;
    ps_model *m = ps_api_load(r, true, f.model, f.options, PTI_API_KEEP_DEFAULT, &opts);
    if (!m)
        goto out;
    int status = 400;
    char err[512] = "";
    char *prompt = ps_api_chat_prompt(m, f.model, messages, n_tools ? tools : NULL, f.think_set,
                                      f.think, &status, err, sizeof err);
    ps_gen *g = prompt ? ps_gen_new(r, &chat_style, f.model, m) : NULL;
    if (g)
        pti_think_split_init(&g->think, f.think_set && f.think);
    if (!g) {
        ps_api_fail(r, true, prompt ? 500 : status, "%s", prompt ? "out of memory" : err);
        ps_model_release(r->srv, m);
    } else {
        make_id(g->id, sizeof g->id, "chatcmpl-");
        if (n_tools) {
            char open_tag[64], close_tag[64];
            ps_api_tool_tags(m, open_tag, close_tag, sizeof open_tag);
            g->tools = pti_tool_parser_new(open_tag, close_tag);
        }
        run_v1(r, g, m, &opts, prompt, &f);
    }
    free(prompt);
    pti_api_opts_free(&opts);
out:
    cJSON_Delete(messages);
    cJSON_Delete(f.options);
}

/* ---- /v1/completions ------------------------------------------------------------------------ */

void ps_api_v1_completions(ps_request *r)
{
    v1_fields f;
    if (!read_v1(r, &f))
        return;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(r->json, "prompt");
    const char *suffix = NULL;
    if (!cJSON_IsString(p) || pti_api_string(r->json, "suffix", &suffix) != PT_OK) {
        ps_reply_openai_error(r, 400, "invalid_request_error", "%s",
                              cJSON_IsString(p) ? pt_last_error() : "prompt must be a string");
        cJSON_Delete(f.options);
        return;
    }
    pti_api_opts opts;
    ps_model *m = ps_api_load(r, true, f.model, f.options, PTI_API_KEEP_DEFAULT, &opts);
    cJSON_Delete(f.options);
    f.options = NULL;
    if (!m)
        return;
    int status = 400;
    char err[512] = "";
    char *prompt = ps_api_generate_prompt(m, f.model, p->valuestring, suffix, NULL, NULL, false,
                                          false, false, &status, err, sizeof err);
    ps_gen *g = prompt ? ps_gen_new(r, &completion_style, f.model, m) : NULL;
    if (!g) {
        ps_api_fail(r, true, prompt ? 500 : status, "%s", prompt ? "out of memory" : err);
        ps_model_release(r->srv, m);
    } else {
        make_id(g->id, sizeof g->id, "cmpl-");
        run_v1(r, g, m, &opts, prompt, &f);
    }
    free(prompt);
    pti_api_opts_free(&opts);
}

/* ---- /v1/embeddings ------------------------------------------------------------------------- */

void ps_api_v1_embeddings(ps_request *r)
{
    const char *name = ps_api_model_name(r, true);
    if (!name)
        return;
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(r->json, "input");
    bool ok = cJSON_IsString(input) || (cJSON_IsArray(input) && cJSON_GetArraySize(input) > 0);
    const cJSON *e;
    if (cJSON_IsArray(input))
        cJSON_ArrayForEach(e, input) ok = ok && cJSON_IsString(e);
    if (!ok) {
        ps_reply_openai_error(r, 400, "invalid_request_error",
                              "invalid input: expected a string or a non-empty array of "
                              "strings");
        return;
    }
    int dims = 0;
    if (!ps_api_dimensions(r, true, &dims))
        return;
    const cJSON *enc = cJSON_GetObjectItemCaseSensitive(r->json, "encoding_format");
    bool b64 = cJSON_IsString(enc) && !strcmp(enc->valuestring, "base64");
    if (enc && !cJSON_IsNull(enc) && !b64 &&
        !(cJSON_IsString(enc) && !strcmp(enc->valuestring, "float"))) {
        ps_reply_openai_error(r, 400, "invalid_request_error",
                              "encoding_format must be \"float\" or \"base64\"");
        return;
    }
    pti_api_opts opts;
    ps_model *m = ps_api_load(r, true, name, NULL, PTI_API_KEEP_DEFAULT, &opts);
    if (!m)
        return;
    pti_api_opts_free(&opts);
    int64_t tokens = 0;
    ps_embed_vecs vecs;
    if (ps_api_embed_inputs(r, true, m, input, true, dims, &tokens, &vecs)) {
        cJSON *before = cJSON_CreateObject();
        cJSON_AddStringToObject(before, "object", "list");
        cJSON *after = cJSON_CreateObject();
        cJSON_AddStringToObject(after, "model", name);
        cJSON *u = cJSON_AddObjectToObject(after, "usage");
        cJSON_AddNumberToObject(u, "prompt_tokens", (double)tokens);
        cJSON_AddNumberToObject(u, "total_tokens", (double)tokens);
        r->tokens_in = tokens;
        ps_api_reply_embeddings(r, &vecs, b64 ? PS_EMBED_OPENAI_BASE64 : PS_EMBED_OPENAI_FLOAT,
                                before, "data", after);
    }
    ps_model_release(r->srv, m);
}

/* ---- /v1/models ----------------------------------------------------------------------------- */

/* Unix seconds of an RFC 3339 time ("2025-05-17T07:59:32.39-07:00"); 0 when malformed. */
static int64_t rfc3339_seconds(const char *s)
{
    struct tm tm = {0};
    const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!p)
        return 0;
    int64_t t = (int64_t)timegm(&tm);
    while (*p == '.' || (*p >= '0' && *p <= '9'))
        p++;
    int sign = *p == '-' ? -1 : *p == '+' ? 1 : 0, hh = 0, mm = 0;
    if (sign && sscanf(p + 1, "%2d:%2d", &hh, &mm) == 2)
        t -= sign * (hh * 3600 + mm * 60);
    return t;
}

/* The namespace part of a model name ("me/m:v1" -> "me"), "library" by default. */
static void owner_of(const char *name, char *buf, size_t cap)
{
    const char *slash = strrchr(name, '/');
    if (!slash) {
        snprintf(buf, cap, "library");
        return;
    }
    const char *start = slash;
    while (start > name && start[-1] != '/')
        start--;
    snprintf(buf, cap, "%.*s", (int)(slash - start), start);
}

static cJSON *model_object(const cJSON *entry)
{
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(entry, "name"));
    cJSON *o = cJSON_CreateObject();
    char owner[128];
    owner_of(name ? name : "", owner, sizeof owner);
    cJSON_AddStringToObject(o, "id", name ? name : "");
    cJSON_AddStringToObject(o, "object", "model");
    cJSON_AddNumberToObject(
        o, "created",
        (double)rfc3339_seconds(cJSON_GetStringValue(cJSON_GetObjectItem(entry, "modified_at"))));
    cJSON_AddStringToObject(o, "owned_by", owner);
    return o;
}

static cJSON *list_models(ps_request *r)
{
    const ps_config *cfg = ps_server_config(r->srv);
    return pti_store_list(cfg->models_store, cfg->models_dir, cfg->model_paths, cfg->n_model_paths);
}

void ps_api_v1_models(ps_request *r)
{
    cJSON *list = list_models(r);
    if (!list) {
        ps_reply_openai_error(r, 500, "api_error", "out of memory");
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    const cJSON *e;
    cJSON_ArrayForEach(e, list) cJSON_AddItemToArray(data, model_object(e));
    cJSON_Delete(list);
    ps_reply_json(r, 200, o);
}

void ps_api_v1_model(ps_request *r)
{
    const char *id = r->param ? r->param : "";
    snprintf(r->model, sizeof r->model, "%s", id);
    ps_model_ref ref;
    if (!id[0] || !ps_model_resolve(r->srv, id, &ref)) {
        ps_reply_openai_error(r, 404, "not_found_error", "model \"%s\" not found", id);
        return;
    }
    cJSON *list = list_models(r);
    const cJSON *e, *found = NULL;
    cJSON_ArrayForEach(e, list)
    {
        ps_model_ref other;
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
        if (name && ps_model_resolve(r->srv, name, &other) && !strcmp(other.gguf, ref.gguf) &&
            !strcmp(other.name, ref.name)) {
            found = e;
            break;
        }
    }
    cJSON *o;
    if (found) {
        o = model_object(found);
        cJSON_SetValuestring(cJSON_GetObjectItem(o, "id"), id);
    } else {
        struct stat st;
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", id);
        cJSON_AddStringToObject(o, "object", "model");
        cJSON_AddNumberToObject(o, "created", stat(ref.gguf, &st) == 0 ? (double)st.st_mtime : 0);
        char owner[128];
        owner_of(id, owner, sizeof owner);
        cJSON_AddStringToObject(o, "owned_by", owner);
    }
    cJSON_Delete(list);
    ps_reply_json(r, 200, o);
}
