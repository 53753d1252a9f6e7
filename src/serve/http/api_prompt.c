/* promeserve's prompt building for the generation endpoints (api_common.h): the model's
 * Ollama Go template layer (parsed once, cached by text) or its GGUF chat family, tools,
 * system layers and overrides, Python-style JSON for the families' tool-call arguments,
 * tokenizing against the context, and the JSON constraint of a format. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "json_constraint.h"
#include "../llm/llm_gen.h"
#include "ollama_prompt.h"

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
    char *copy = gotmpl_n < GOTMPL_CACHE ? pti_strdup(text) : NULL;
    pti_gotmpl *t = copy ? pti_gotmpl_parse(text, strlen(text)) : NULL;
    if (!copy)
        ps_log(ps_model_server(m), PT_LOG_WARN,
               "warning: %s: too many distinct template layers to keep; "
               "using the GGUF chat template",
               ps_model_get_ref(m)->name);
    else if (!t)
        ps_log(ps_model_server(m), PT_LOG_WARN,
               "warning: %s: the template layer does not parse (%s); using "
               "the GGUF chat template",
               ps_model_get_ref(m)->name, pt_last_error());
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
        char *q = pti_realloc(b->p, want);
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
    cJSON_ArrayForEach(m, messages) total_calls +=
        (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(m, "tool_calls"));
    pti_chat_message *cm = pti_calloc(n ? n : 1, sizeof *cm);
    pti_chat_tool_call *calls = pti_calloc(total_calls ? total_calls : 1, sizeof *calls);
    char **args = pti_calloc(total_calls ? total_calls : 1, sizeof *args);
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
    cJSON_ArrayForEach(e, msgs) has_system |=
        strcmp(cJSON_GetObjectItem(e, "role")->valuestring, "system") == 0;
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
    if (think_set && think && !(t ? pti_gotmpl_references(t, "Think") : f == PTI_CHAT_QWEN3)) {
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
        char *text =
            pti_ollama_chat_prompt(t, messages, tools, ps_model_system(m), think_set, think, NULL);
        if (text)
            return text;
        ps_log(ps_model_server(m), PT_LOG_WARN,
               "warning: %s: the template layer failed (%s); using the "
               "GGUF chat template",
               model_name, pt_last_error());
    }
    return family_chat_prompt(m, model_name, messages, tools, think_set, think, status, err,
                              err_cap);
}

char *ps_api_generate_prompt(ps_model *m, const char *model_name, const char *prompt,
                             const char *suffix, const char *system, const char *template_override,
                             bool raw, bool think_set, bool think, int *status, char *err,
                             size_t err_cap)
{
    *status = 400;
    if (raw)
        return pti_strdup(prompt ? prompt : "");
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
        ps_log(ps_model_server(m), PT_LOG_WARN,
               "warning: %s: the template layer failed (%s); using the "
               "GGUF chat template",
               model_name, pt_last_error());
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

int32_t ps_api_context_limit(pti_engine *e)
{
    int32_t n = pti_engine_get_opts(e)->num_ctx;
    if (n <= 0)
        n = 4096;
    const pt_llm_info *info = pt_llm_get_info(pti_engine_llm(e));
    if (info && info->context_length > 0 && n > info->context_length)
        n = info->context_length;
    return n;
}

int32_t *ps_api_tokenize_all(pti_engine *e, const char *text, int64_t *n)
{
    const pt_llm *llm = pti_engine_llm(e);
    size_t len = strlen(text);
    int64_t need = pt_llm_tokenize(llm, text, len, true, true, NULL, 0);
    if (need < 0)
        return NULL;
    int32_t *ids = pti_malloc((size_t)(need > 0 ? need : 1) * sizeof *ids);
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
    int32_t *ids = ps_api_tokenize_all(e, text, &count);
    if (!ids) {
        snprintf(err, err_cap, "cannot tokenize the prompt: %s", pt_last_error());
        return NULL;
    }
    int32_t limit = ps_api_context_limit(e);
    if (count < 1 || count > limit) {
        snprintf(err, err_cap,
                 count < 1 ? "the prompt is empty after tokenization"
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
    /* format "json" (and OpenAI's json_object) is an object, as Ollama's grammar
     * (root ::= object) makes it */
    cJSON *object_schema = NULL;
    if (kind != PTI_FORMAT_SCHEMA) {
        object_schema = cJSON_CreateObject();
        if (!object_schema || !cJSON_AddStringToObject(object_schema, "type", "object")) {
            cJSON_Delete(object_schema);
            snprintf(err, err_cap, "out of memory");
            return false;
        }
        schema = object_schema;
    }
    pti_json_matcher *jm = pti_json_matcher_new(schema);
    cJSON_Delete(object_schema);
    if (!jm) {
        snprintf(err, err_cap, "invalid format: %s", pt_last_error());
        return false;
    }
    *out = pti_json_constraint(jm);
    return true;
}
