/* The generation plumbing shared by promeserve's Ollama and OpenAI handlers (api_common.h). */
#include "api_common.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/go_template.h"
#include "serve/json_constraint.h"
#include "serve/llm_gen.h"
#include "serve/ollama_prompt.h"

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
    return status == 400 ? "invalid_request_error" : status == 404 ? "not_found_error"
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
    return st == PT_ERR_INVALID_ARG || st == PT_ERR_UNSUPPORTED || st == PT_ERR_FORMAT ? 400
                                                                                       : 500;
}

const char *ps_api_model_name(ps_request *r, bool openai)
{
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
        fprintf(stderr, "promeserve: warning: invalid option provided: %s (ignored)\n",
                opts->unknown);
    int num_ctx = opts->num_ctx;
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
        fprintf(stderr, "promeserve: warning: %s: params layer: %s (ignored)\n", name,
                pt_last_error());
        pti_api_opts_free(opts);
        pti_api_opts_init(opts);
    }
    opts->unknown[0] = '\0';
    pti_api_apply_options(opts, req_options); /* checked above */
    return m;
}

pti_chat_family ps_api_family(ps_model *m)
{
    return pti_chat_template_family(pti_llm_template(pti_engine_llm(ps_model_engine(m))));
}

/* Parsed template layers, by text. Templates are immutable and shared by requests; entries
 * live as long as the process (a server sees a handful of distinct templates). */
#define GOTMPL_CACHE 256
static struct {
    char *text;
    pti_gotmpl *t; /* NULL: it does not parse */
} gotmpl_cache[GOTMPL_CACHE];
static int gotmpl_n;
static pthread_mutex_t gotmpl_mu = PTHREAD_MUTEX_INITIALIZER;

const pti_gotmpl *ps_api_model_gotmpl(ps_model *m)
{
    const char *text = ps_model_template(m);
    if (!text)
        return NULL;
    pthread_mutex_lock(&gotmpl_mu);
    for (int i = 0; i < gotmpl_n; i++)
        if (strcmp(gotmpl_cache[i].text, text) == 0) {
            const pti_gotmpl *t = gotmpl_cache[i].t;
            pthread_mutex_unlock(&gotmpl_mu);
            return t;
        }
    char *copy = gotmpl_n < GOTMPL_CACHE ? strdup(text) : NULL;
    pti_gotmpl *t = copy ? pti_gotmpl_parse(text, strlen(text)) : NULL;
    if (!copy)
        fprintf(stderr, "promeserve: warning: %s: too many distinct template layers to keep; "
                "using the GGUF chat template\n", ps_model_get_ref(m)->name);
    else if (!t)
        fprintf(stderr, "promeserve: warning: %s: the template layer does not parse (%s); using "
                "the GGUF chat template\n", ps_model_get_ref(m)->name, pt_last_error());
    if (copy) {
        gotmpl_cache[gotmpl_n].text = copy;
        gotmpl_cache[gotmpl_n].t = t;
        gotmpl_n++;
    }
    pthread_mutex_unlock(&gotmpl_mu);
    return t;
}

/* ---- prompts ------------------------------------------------------------------------------- */

/* A growing string. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t want = (b->n + n + 1) * 2;
        char *q = realloc(b->p, want);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = want;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* JSON text as Python's json.dumps prints it (", " and ": "), which the Jinja templates of
 * the C-coded families insert for tool-call arguments. */
static void py_json(sbuf *b, const cJSON *v)
{
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        bool obj = cJSON_IsObject(v);
        sb_str(b, obj ? "{" : "[");
        const cJSON *e;
        bool first = true;
        cJSON_ArrayForEach(e, v)
        {
            if (!first)
                sb_str(b, ", ");
            first = false;
            if (obj) {
                cJSON *k = cJSON_CreateString(e->string ? e->string : "");
                char *ks = k ? cJSON_PrintUnformatted(k) : NULL;
                sb_str(b, ks ? ks : "\"\"");
                sb_str(b, ": ");
                free(ks);
                cJSON_Delete(k);
            }
            py_json(b, e);
        }
        sb_str(b, obj ? "}" : "]");
        return;
    }
    char *s = cJSON_PrintUnformatted(v);
    sb_str(b, s ? s : "null");
    free(s);
}

/* Normalised Ollama messages -> pti_chat_message (strings borrowed from messages, argument
 * texts owned by *args). */
static pti_chat_message *family_messages(const cJSON *messages, size_t *n_out, char ***args_out,
                                         size_t *n_args, pti_chat_tool_call **calls_out)
{
    size_t n = (size_t)cJSON_GetArraySize(messages), total_calls = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages)
        total_calls += (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(m, "tool_calls"));
    pti_chat_message *cm = calloc(n ? n : 1, sizeof *cm);
    pti_chat_tool_call *calls = calloc(total_calls ? total_calls : 1, sizeof *calls);
    char **args = calloc(total_calls ? total_calls : 1, sizeof *args);
    if (!cm || !calls || !args) {
        free(cm);
        free(calls);
        free(args);
        return NULL;
    }
    size_t i = 0, k = 0;
    cJSON_ArrayForEach(m, messages)
    {
        cm[i].role = cJSON_GetObjectItem(m, "role")->valuestring;
        cm[i].content = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
        cm[i].reasoning_content = cJSON_GetStringValue(cJSON_GetObjectItem(m, "thinking"));
        cm[i].tool_call_id = cJSON_GetStringValue(cJSON_GetObjectItem(m, "tool_call_id"));
        const cJSON *c;
        size_t first = k;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(m, "tool_calls"))
        {
            const cJSON *fn = cJSON_GetObjectItem(c, "function");
            sbuf b = {0};
            py_json(&b, cJSON_GetObjectItem(fn, "arguments"));
            args[k] = b.p;
            calls[k].id = cJSON_GetStringValue(cJSON_GetObjectItem(c, "id"));
            calls[k].name = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"));
            calls[k].arguments = b.p ? b.p : "{}";
            k++;
        }
        if (k > first) {
            cm[i].tool_calls = calls + first;
            cm[i].n_tool_calls = k - first;
        }
        i++;
    }
    *n_out = n;
    *args_out = args;
    *n_args = k;
    *calls_out = calls;
    return cm;
}

static char *family_chat_prompt(ps_model *m, const char *model_name, const cJSON *messages,
                                const cJSON *tools, bool think_set, bool think, int *status,
                                char *err, size_t err_cap)
{
    const pti_chat_template *t = pti_llm_template(pti_engine_llm(ps_model_engine(m)));
    pti_chat_family f = pti_chat_template_family(t);
    int n_tools = cJSON_GetArraySize(tools);
    if (n_tools > 0 && !pti_chat_family_supports_tools(f)) {
        *status = 400;
        snprintf(err, err_cap, "\"%s\" does not support tools", model_name);
        return NULL;
    }
    /* the model's system layer is the default system prompt, as with a Go template */
    cJSON *msgs = cJSON_Duplicate(messages, true);
    const char *sys = ps_model_system(m);
    bool has_system = false;
    const cJSON *e;
    cJSON_ArrayForEach(e, msgs)
        has_system |= strcmp(cJSON_GetObjectItem(e, "role")->valuestring, "system") == 0;
    if (sys && sys[0] && !has_system) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "role", "system");
        cJSON_AddStringToObject(s, "content", sys);
        cJSON_InsertItemInArray(msgs, 0, s);
    }
    size_t n = 0, n_args = 0;
    char **args = NULL;
    pti_chat_tool_call *calls = NULL;
    pti_chat_message *cm = msgs ? family_messages(msgs, &n, &args, &n_args, &calls) : NULL;
    char *text = NULL;
    if (cm) {
        pti_chat_opts o = {0};
        o.disable_thinking = f == PTI_CHAT_QWEN3 && think_set && !think;
        char *tools_json = n_tools > 0 ? cJSON_PrintUnformatted(tools) : NULL;
        text = n_tools > 0 ? pti_chat_render_tools(t, cm, n, tools_json, true, &o, NULL)
                           : pti_chat_render(t, cm, n, true, &o, NULL);
        free(tools_json);
        if (!text) {
            *status = ps_api_status_of(pt_last_status());
            snprintf(err, err_cap, "%s", pt_last_error());
        }
    } else {
        *status = 500;
        snprintf(err, err_cap, "out of memory");
    }
    for (size_t i = 0; i < n_args; i++)
        free(args[i]);
    free(args);
    free(calls);
    free(cm);
    cJSON_Delete(msgs);
    return text;
}

char *ps_api_chat_prompt(ps_model *m, const char *model_name, const cJSON *messages,
                         const cJSON *tools, bool think_set, bool think, int *status, char *err,
                         size_t err_cap)
{
    const pti_gotmpl *t = ps_api_model_gotmpl(m);
    pti_chat_family f = ps_api_family(m);
    if (think_set && think &&
        !(t ? pti_gotmpl_references(t, "Think") : f == PTI_CHAT_QWEN3)) {
        *status = 400;
        snprintf(err, err_cap, "\"%s\" does not support thinking", model_name);
        return NULL;
    }
    if (t) {
        if (cJSON_GetArraySize(tools) > 0 && !pti_gotmpl_references(t, "Tools")) {
            *status = 400;
            snprintf(err, err_cap, "\"%s\" does not support tools", model_name);
            return NULL;
        }
        char *text = pti_ollama_chat_prompt(t, messages, tools, ps_model_system(m), think_set,
                                            think, NULL);
        if (text)
            return text;
        fprintf(stderr, "promeserve: warning: %s: the template layer failed (%s); using the "
                "GGUF chat template\n", model_name, pt_last_error());
    }
    return family_chat_prompt(m, model_name, messages, tools, think_set, think, status, err,
                              err_cap);
}

char *ps_api_generate_prompt(ps_model *m, const char *model_name, const char *prompt,
                             const char *suffix, const char *system,
                             const char *template_override, bool raw, bool think_set,
                             bool think, int *status, char *err, size_t err_cap)
{
    *status = 400;
    if (raw)
        return strdup(prompt ? prompt : "");
    pti_chat_family f = ps_api_family(m);
    pti_gotmpl *own = NULL;
    const pti_gotmpl *t = NULL;
    if (template_override && template_override[0]) {
        own = pti_gotmpl_parse(template_override, strlen(template_override));
        if (!own) {
            snprintf(err, err_cap, "%s", pt_last_error());
            return NULL;
        }
        t = own;
    } else {
        t = ps_api_model_gotmpl(m);
    }
    bool has_suffix = suffix && suffix[0];
    const char *sys = system && system[0] ? system : ps_model_system(m);
    if (think_set && think && !(t ? pti_gotmpl_references(t, "Think") : f == PTI_CHAT_QWEN3)) {
        pti_gotmpl_free(own);
        snprintf(err, err_cap, "\"%s\" does not support thinking", model_name);
        return NULL;
    }
    if (t) {
        if (has_suffix && !pti_gotmpl_references(t, "Suffix")) {
            pti_gotmpl_free(own);
            snprintf(err, err_cap, "\"%s\" does not support insert", model_name);
            return NULL;
        }
        char *text = pti_ollama_generate_prompt(t, sys, prompt, suffix, NULL);
        if (!text && own)
            snprintf(err, err_cap, "%s", pt_last_error());
        pti_gotmpl_free(own);
        if (text || own)
            return text;
        fprintf(stderr, "promeserve: warning: %s: the template layer failed (%s); using the "
                "GGUF chat template\n", model_name, pt_last_error());
    }
    if (has_suffix) {
        snprintf(err, err_cap, "\"%s\" does not support insert", model_name);
        return NULL;
    }
    pti_chat_message msgs[2] = {{0}, {0}};
    size_t n = 0;
    if (sys && sys[0]) {
        msgs[n].role = "system";
        msgs[n++].content = sys;
    }
    msgs[n].role = "user";
    msgs[n++].content = prompt ? prompt : "";
    pti_chat_opts o = {0};
    o.disable_thinking = f == PTI_CHAT_QWEN3 && think_set && !think;
    char *text = pti_chat_render(pti_llm_template(pti_engine_llm(ps_model_engine(m))), msgs, n,
                                 true, &o, NULL);
    if (!text) {
        *status = ps_api_status_of(pt_last_status());
        snprintf(err, err_cap, "%s", pt_last_error());
    }
    return text;
}

void ps_api_tool_tags(ps_model *m, char *open_tag, char *close_tag, size_t cap)
{
    const char *tl = ps_model_template(m);
    if (tl && ps_api_model_gotmpl(m))
        pti_tool_tags_from_template(tl, strlen(tl), open_tag, close_tag, cap);
    else
        pti_tool_tags_for_family(ps_api_family(m), open_tag, close_tag, cap);
}

static int32_t context_limit(pti_engine *e)
{
    int32_t n = pti_engine_get_opts(e)->num_ctx;
    if (n <= 0)
        n = 4096;
    const pt_llm_info *info = pt_llm_get_info(pti_engine_llm(e));
    if (info && info->context_length > 0 && n > info->context_length)
        n = info->context_length;
    return n;
}

static int32_t *tokenize_text(pti_engine *e, const char *text, int64_t *n)
{
    const pt_llm *llm = pti_engine_llm(e);
    size_t len = strlen(text);
    int64_t need = pt_llm_tokenize(llm, text, len, true, true, NULL, 0);
    if (need < 0)
        return NULL;
    int32_t *ids = malloc((size_t)(need > 0 ? need : 1) * sizeof *ids);
    if (!ids || pt_llm_tokenize(llm, text, len, true, true, ids, need) != need) {
        free(ids);
        return NULL;
    }
    *n = need;
    return ids;
}

int32_t *ps_api_tokenize(ps_model *m, const char *text, int32_t *n, char *err, size_t err_cap)
{
    pti_engine *e = ps_model_engine(m);
    int64_t count = 0;
    int32_t *ids = tokenize_text(e, text, &count);
    if (!ids) {
        snprintf(err, err_cap, "cannot tokenize the prompt: %s", pt_last_error());
        return NULL;
    }
    int32_t limit = context_limit(e);
    if (count < 1 || count > limit) {
        snprintf(err, err_cap, count < 1 ? "the prompt is empty after tokenization"
                 : "the prompt has %lld tokens, more than the context length %d",
                 (long long)count, (int)limit);
        free(ids);
        return NULL;
    }
    *n = (int32_t)count;
    return ids;
}

bool ps_api_constraint(pti_api_format_kind kind, const cJSON *schema, pti_constraint *out,
                       char *err, size_t err_cap)
{
    memset(out, 0, sizeof *out);
    if (kind == PTI_FORMAT_NONE)
        return true;
    pti_json_matcher *jm = pti_json_matcher_new(kind == PTI_FORMAT_SCHEMA ? schema : NULL);
    if (!jm) {
        snprintf(err, err_cap, "invalid format: %s", pt_last_error());
        return false;
    }
    *out = pti_json_constraint(jm);
    return true;
}

/* ---- running a generation ------------------------------------------------------------------- */

ps_gen *ps_gen_new(ps_request *r, const ps_gen_style *style, const char *model, ps_model *m)
{
    ps_gen *g = calloc(1, sizeof *g);
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
        char *q = realloc(*buf, want);
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

/* The longest tail of s[0..n) that is a proper prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    for (size_t k = tl - 1; k > 0; k--)
        if (k <= n && memcmp(s + n - k, tag, k) == 0)
            return k;
    return 0;
}

/* With think requested: text up to </think> is the thinking, after it the content. */
static bool split_thinking(ps_gen *g, const char *text, size_t len, bool finish)
{
    if (g->think_state != 1)
        return emit_content(g, text, len, finish);
    char *buf = malloc(g->n_think_hold + len + 1);
    if (!buf)
        return false;
    memcpy(buf, g->think_hold, g->n_think_hold);
    memcpy(buf + g->n_think_hold, text, len);
    size_t n = g->n_think_hold + len;
    buf[n] = '\0';
    g->n_think_hold = 0;
    char *start = buf;
    if (g->n_thinking == 0 && strncmp(start, "<think>", n < 7 ? n : 7) == 0) {
        if (n < 7 && !finish) { /* maybe the start of the open tag */
            memcpy(g->think_hold, buf, n);
            g->n_think_hold = n;
            free(buf);
            return true;
        }
        if (n >= 7)
            start += 7;
    }
    size_t rest = n - (size_t)(start - buf);
    char *end = strstr(start, "</think>");
    bool ok;
    if (end) {
        g->think_state = 2;
        const char *after = end + 8;
        while (*after == '\n')
            after++;
        ok = emit(g, NULL, 0, start, (size_t)(end - start), NULL) &&
             emit_content(g, after, strlen(after), finish);
    } else {
        size_t hold = finish ? 0 : partial_tag(start, rest, "</think>");
        memcpy(g->think_hold, start + rest - hold, hold);
        g->n_think_hold = hold;
        ok = emit(g, NULL, 0, start, rest - hold, NULL);
        if (finish)
            ok = ok && emit_content(g, "", 0, true);
    }
    free(buf);
    return ok;
}

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlong forms, no surrogates, at
 * most U+10FFFF), 0 when the bytes there are not one. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
                 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] > 0x9F) ||
        (s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] > 0x8F))
        return 0;
    return len;
}

/* Generated text with every byte that is not valid UTF-8 replaced by U+FFFD, as Go's JSON
 * encoder does (a model may sample byte tokens that never form a character); NULL when the
 * text is valid already (the common case). */
static char *valid_utf8(const char *text, size_t len, size_t *out_len)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0, k;
    while (i < len && (k = utf8_seq(s + i, len - i)) > 0)
        i += k;
    if (i == len)
        return NULL;
    char *out = malloc(len * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (i = 0; i < len;) {
        k = utf8_seq(s + i, len - i);
        if (k) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    *out_len = o;
    return out;
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
        char *fixed = valid_utf8(text, len, &n_fixed);
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
        g->embedding = malloc((size_t)n_embd * sizeof *g->embedding);
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
        g->stream = ps_reply_stream(r, g->style->openai ? "text/event-stream"
                                                        : "application/x-ndjson");
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
    wait_done(g);
    r->tokens_out = g->stats.gen_tokens;
    if (g->st != PT_OK)
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
    uint64_t x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
                 (++counter * 0x9E3779B97F4A7C15ull);
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
        cJSON_AddStringToObject(f, "name", cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"))
                                               ? cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"))
                                               : "");
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

/* One input's embedding as a cJSON array, or NULL with *status / err. */
static cJSON *embed_one(ps_request *r, ps_model *m, const char *text, bool truncate, int dims,
                        int64_t *tokens, int *status, char *err, size_t err_cap)
{
    pti_engine *e = ps_model_engine(m);
    int64_t n = 0;
    int32_t *ids = tokenize_text(e, text, &n);
    if (!ids) {
        *status = 500;
        snprintf(err, err_cap, "cannot tokenize the input: %s", pt_last_error());
        return NULL;
    }
    int32_t limit = context_limit(e);
    if (n > limit) {
        if (!truncate) {
            free(ids);
            *status = 400;
            snprintf(err, err_cap, "input length exceeds maximum context length");
            return NULL;
        }
        n = limit;
    }
    if (n < 1) {
        free(ids);
        *status = 400;
        snprintf(err, err_cap, "the input is empty after tokenization");
        return NULL;
    }
    ps_gen *g = ps_gen_new(r, &embed_style, "", m);
    if (!g) {
        free(ids);
        *status = 500;
        snprintf(err, err_cap, "out of memory");
        return NULL;
    }
    g->m = NULL; /* the caller holds the model */
    pti_engine_request req = {0};
    req.ids = ids;
    req.n_ids = (int32_t)n;
    req.gen = pt_gen_opts_default();
    req.embed = true;
    req.ev.on_text = on_text;
    req.ev.on_done = on_done;
    req.ev.user = g;
    g->req_id = pti_engine_submit(e, &req);
    free(ids);
    cJSON *vec = NULL;
    if (!g->req_id) {
        *status = pti_engine_queue_full_error() ? 503 : ps_api_status_of(pt_last_status());
        snprintf(err, err_cap, "%s", pt_last_error());
    } else {
        wait_done(g);
        if (g->st != PT_OK || !g->embedding) {
            *status = 500;
            snprintf(err, err_cap, "%s", g->st != PT_OK ? g->msg : "no embedding was computed");
        } else {
            int n_out = g->n_embd;
            if (dims > 0 && dims < n_out) { /* Ollama: truncate, then normalise again */
                double ss = 0;
                for (int i = 0; i < dims; i++)
                    ss += (double)g->embedding[i] * g->embedding[i];
                float scale = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
                for (int i = 0; i < dims; i++)
                    g->embedding[i] *= scale;
                n_out = dims;
            }
            vec = cJSON_CreateFloatArray(g->embedding, n_out);
            *tokens += n;
        }
    }
    ps_gen_free(g);
    return vec;
}

cJSON *ps_api_embed_inputs(ps_request *r, bool openai, ps_model *m, const cJSON *inputs,
                           bool truncate, int dims, int64_t *prompt_tokens)
{
    cJSON *list = cJSON_CreateArray();
    *prompt_tokens = 0;
    const cJSON *in;
    int status = 500;
    char err[512];
    bool single = cJSON_IsString(inputs);
    for (in = single ? inputs : inputs->child; in; in = single ? NULL : in->next) {
        cJSON *v = embed_one(r, m, in->valuestring, truncate, dims, prompt_tokens, &status, err,
                             sizeof err);
        if (!v) {
            cJSON_Delete(list);
            ps_api_fail(r, openai, status, "%s", err);
            return NULL;
        }
        cJSON_AddItemToArray(list, v);
    }
    return list;
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
