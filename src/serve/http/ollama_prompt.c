/* Ollama's prompt assembly (ollama_prompt.h): the template Values built from request messages
 * and tools, Ollama's collation of messages, and the legacy turn-by-turn rendering with the
 * cut after {{ .Response }}.
 *
 * Ollama's Values hold Go structs (api.Message, api.Tool, ...): templates reach their fields
 * by Go name, while `json` and printing of types with a String method give the JSON form. We
 * build cJSON objects keyed by Go field names, with every field present (a Go struct has no
 * missing fields), and set valuestring on struct-typed nodes to the JSON Go's encoding/json
 * makes of them, in struct field order with Ollama's omitempty rules. */
#include "ollama_prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "../../core/strbuf.h"
#include "go_template_impl.h"

/* ---- a small JSON text builder (Go struct field order) -------------------------------------- */

/* Appends Go's JSON of v (NULL = null). */
static void jb_json(pti_strbuf *b, const cJSON *v)
{
    size_t n;
    char *s = pti_gotmpl_json(v, &n);
    if (!s) {
        b->oom = true;
        return;
    }
    pti_strbuf_put(b, s, n);
    free(s);
}

static void jb_string(pti_strbuf *b, const char *s)
{
    cJSON tmp = {.type = cJSON_String, .valuestring = (char *)(s ? s : "")};
    jb_json(b, &tmp);
}

/* "," when not first, then "key": */
static void jb_key(pti_strbuf *b, const char *key, bool *first)
{
    if (!*first)
        pti_strbuf_put(b, ",", 1);
    *first = false;
    jb_string(b, key);
    pti_strbuf_put(b, ":", 1);
}

/* Sets node's valuestring to the built text (cJSON frees it with the node). */
static bool jb_attach(pti_strbuf *b, cJSON *node)
{
    char *text = pti_strbuf_take(b);
    if (!text)
        return false;
    node->valuestring = text;
    return true;
}

/* ---- values --------------------------------------------------------------------------------- */

static const char *str_or_empty(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static bool is_empty_json(const cJSON *v)
{
    return !v || cJSON_IsNull(v) || (cJSON_IsString(v) && !v->valuestring[0]) ||
           ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !v->child);
}

/* A copy of v, or JSON null for NULL. */
static cJSON *dup_or_null(const cJSON *v)
{
    return v ? cJSON_Duplicate(v, true) : cJSON_CreateNull();
}

/* Arguments of a tool call as an object (a string holding JSON is parsed; anything else is
 * an empty object), printed as Go marshals the map. */
static cJSON *call_arguments(const cJSON *args)
{
    cJSON *obj = NULL;
    if (cJSON_IsObject(args))
        obj = cJSON_Duplicate(args, true);
    else if (cJSON_IsString(args)) {
        obj = cJSON_Parse(args->valuestring);
        if (obj && !cJSON_IsObject(obj)) {
            cJSON_Delete(obj);
            obj = NULL;
        }
    }
    if (!obj)
        obj = cJSON_CreateObject();
    if (!obj)
        return NULL;
    size_t n;
    char *s = pti_gotmpl_json(obj, &n);
    if (!s) {
        cJSON_Delete(obj);
        return NULL;
    }
    obj->valuestring = s;
    return obj;
}

/* {Function: {Index, Name, Arguments}} from {function: {index?, name, arguments}}. */
static cJSON *tool_call_value(const cJSON *tc, int index_default)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(fn, "index");
    int index = cJSON_IsNumber(idx) ? idx->valueint : index_default;
    cJSON *call = cJSON_CreateObject(), *f = cJSON_CreateObject();
    cJSON *args = call_arguments(cJSON_GetObjectItemCaseSensitive(fn, "arguments"));
    if (!call || !f || !args) {
        cJSON_Delete(call);
        cJSON_Delete(f);
        cJSON_Delete(args);
        return NULL;
    }
    cJSON_AddItemToObject(call, "Function", f);
    const char *name = str_or_empty(fn, "name");
    const char *id = str_or_empty(tc, "id");
    cJSON_AddNumberToObject(f, "Index", index);
    cJSON_AddStringToObject(f, "Name", name);
    cJSON_AddItemToObject(f, "Arguments", args);
    cJSON_AddStringToObject(call, "ID", id);
    /* api.ToolCallFunction: index (omitempty), name, arguments; api.ToolCall: id (omitempty),
     * function */
    pti_strbuf fj = {0};
    bool first = true;
    pti_strbuf_put(&fj, "{", 1);
    if (index) {
        char num[24];
        snprintf(num, sizeof num, "%d", index);
        jb_key(&fj, "index", &first);
        pti_strbuf_puts(&fj, num);
    }
    jb_key(&fj, "name", &first);
    jb_string(&fj, name);
    jb_key(&fj, "arguments", &first);
    pti_strbuf_puts(&fj, args->valuestring);
    pti_strbuf_put(&fj, "}", 1);
    pti_strbuf cj = {0};
    first = true;
    pti_strbuf_put(&cj, "{", 1);
    if (id[0]) {
        jb_key(&cj, "id", &first);
        jb_string(&cj, id);
    }
    jb_key(&cj, "function", &first);
    pti_strbuf_put(&cj, fj.data, fj.len);
    pti_strbuf_put(&cj, "}", 1);
    cj.oom |= fj.oom;
    if (!jb_attach(&fj, f)) {
        pti_strbuf_free(&cj);
        cJSON_Delete(call);
        return NULL;
    }
    if (!jb_attach(&cj, call)) {
        cJSON_Delete(call);
        return NULL;
    }
    return call;
}

static bool add_str(cJSON *o, const char *k, const char *v)
{
    return cJSON_AddStringToObject(o, k, v ? v : "") != NULL;
}

/* api.Message as the template sees it. */
static cJSON *message_value(const cJSON *m, const char *content)
{
    cJSON *v = cJSON_CreateObject();
    if (!v)
        return NULL;
    bool ok = add_str(v, "Role", str_or_empty(m, "role")) && add_str(v, "Content", content) &&
              add_str(v, "Thinking", str_or_empty(m, "thinking")) &&
              cJSON_AddNullToObject(v, "Images") &&
              add_str(v, "ToolName", str_or_empty(m, "tool_name")) &&
              add_str(v, "ToolCallID", str_or_empty(m, "tool_call_id"));
    const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (ok && cJSON_IsArray(tcs) && tcs->child) {
        cJSON *arr = cJSON_AddArrayToObject(v, "ToolCalls");
        int i = 0;
        const cJSON *tc;
        cJSON_ArrayForEach(tc, tcs)
        {
            cJSON *c = arr && cJSON_IsObject(tc) ? tool_call_value(tc, i) : NULL;
            if (!c || !cJSON_AddItemToArray(arr, c)) {
                cJSON_Delete(c);
                ok = false;
                break;
            }
            i++;
        }
        if (ok && arr) {
            size_t n;
            arr->valuestring = pti_gotmpl_json(arr, &n);
            ok = arr->valuestring != NULL;
        }
    } else if (ok) {
        ok = cJSON_AddNullToObject(v, "ToolCalls") != NULL;
    }
    if (!ok) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

/* api.ToolProperty: {Type, Items, Description, Enum}; JSON type, items?, description, enum? */
static cJSON *property_value(const cJSON *p)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(p, "items");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(p, "enum");
    const char *desc = str_or_empty(p, "description");
    cJSON *v = cJSON_CreateObject();
    if (!v)
        return NULL;
    /* PropertyType: a string, or an array of strings marshalled as a string when it has one */
    cJSON *t = NULL;
    if (cJSON_IsArray(type) && cJSON_GetArraySize(type) == 1 && cJSON_IsString(type->child))
        t = cJSON_CreateString(type->child->valuestring);
    else if (cJSON_IsArray(type) && type->child)
        t = cJSON_Duplicate(type, true);
    else if (cJSON_IsString(type))
        t = cJSON_CreateString(type->valuestring);
    else
        t = cJSON_CreateNull();
    cJSON_AddItemToObject(v, "Type", t);
    cJSON_AddItemToObject(v, "Items", dup_or_null(items));
    add_str(v, "Description", desc);
    cJSON_AddItemToObject(v, "Enum", dup_or_null(cJSON_IsArray(en) ? en : NULL));
    pti_strbuf b = {0};
    bool first = true;
    pti_strbuf_put(&b, "{", 1);
    jb_key(&b, "type", &first);
    jb_json(&b, cJSON_IsNull(t) ? NULL : t);
    if (!is_empty_json(items)) {
        jb_key(&b, "items", &first);
        jb_json(&b, items);
    }
    jb_key(&b, "description", &first);
    jb_string(&b, desc);
    if (cJSON_IsArray(en) && en->child) {
        jb_key(&b, "enum", &first);
        jb_json(&b, en);
    }
    pti_strbuf_put(&b, "}", 1);
    if (!jb_attach(&b, v)) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

/* The parameters struct of api.ToolFunction: type, $defs?, items?, required, properties. */
static cJSON *parameters_value(const cJSON *p)
{
    cJSON *v = cJSON_CreateObject(), *props = cJSON_CreateObject();
    if (!v || !props) {
        cJSON_Delete(v);
        cJSON_Delete(props);
        return NULL;
    }
    const cJSON *defs = cJSON_GetObjectItemCaseSensitive(p, "$defs");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(p, "items");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(p, "required");
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(p, "properties");
    add_str(v, "Type", str_or_empty(p, "type"));
    cJSON_AddItemToObject(v, "Defs", dup_or_null(defs));
    cJSON_AddItemToObject(v, "Items", dup_or_null(items));
    cJSON_AddItemToObject(v, "Required", dup_or_null(cJSON_IsArray(req) ? req : NULL));
    cJSON_AddItemToObject(v, "Properties", props);
    const cJSON *e;
    const cJSON *prs = cJSON_IsObject(pr) ? pr : NULL;
    cJSON_ArrayForEach(e, prs)
    {
        cJSON *pv = property_value(e);
        if (!pv) {
            cJSON_Delete(v);
            return NULL;
        }
        cJSON_AddItemToObject(props, e->string, pv);
    }
    pti_strbuf b = {0};
    bool first = true;
    pti_strbuf_put(&b, "{", 1);
    jb_key(&b, "type", &first);
    jb_string(&b, str_or_empty(p, "type"));
    if (!is_empty_json(defs)) {
        jb_key(&b, "$defs", &first);
        jb_json(&b, defs);
    }
    if (!is_empty_json(items)) {
        jb_key(&b, "items", &first);
        jb_json(&b, items);
    }
    jb_key(&b, "required", &first);
    jb_json(&b, cJSON_IsArray(req) ? req : NULL);
    jb_key(&b, "properties", &first);
    jb_json(&b, cJSON_IsObject(pr) ? props : NULL);
    pti_strbuf_put(&b, "}", 1);
    if (!jb_attach(&b, v)) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

/* api.Tool: {Type, Items, Function: {Name, Description, Parameters}}. A bare function object
 * (no "function" member) is taken as the function. */
static cJSON *tool_value(const cJSON *tool)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
    if (!cJSON_IsObject(fn))
        fn = tool;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(tool, "items");
    const char *type = cJSON_GetObjectItemCaseSensitive(tool, "function")
                           ? str_or_empty(tool, "type")
                           : "function";
    cJSON *v = cJSON_CreateObject(), *f = cJSON_CreateObject();
    cJSON *params = parameters_value(cJSON_GetObjectItemCaseSensitive(fn, "parameters"));
    if (!v || !f || !params) {
        cJSON_Delete(v);
        cJSON_Delete(f);
        cJSON_Delete(params);
        return NULL;
    }
    add_str(v, "Type", type);
    cJSON_AddItemToObject(v, "Items", dup_or_null(items));
    cJSON_AddItemToObject(v, "Function", f);
    add_str(f, "Name", str_or_empty(fn, "name"));
    add_str(f, "Description", str_or_empty(fn, "description"));
    cJSON_AddItemToObject(f, "Parameters", params);
    pti_strbuf fb = {0};
    bool first = true;
    pti_strbuf_put(&fb, "{", 1);
    jb_key(&fb, "name", &first);
    jb_string(&fb, str_or_empty(fn, "name"));
    jb_key(&fb, "description", &first);
    jb_string(&fb, str_or_empty(fn, "description"));
    jb_key(&fb, "parameters", &first);
    pti_strbuf_puts(&fb, params->valuestring);
    pti_strbuf_put(&fb, "}", 1);
    pti_strbuf tb = {0};
    first = true;
    pti_strbuf_put(&tb, "{", 1);
    jb_key(&tb, "type", &first);
    jb_string(&tb, type);
    if (!is_empty_json(items)) {
        jb_key(&tb, "items", &first);
        jb_json(&tb, items);
    }
    jb_key(&tb, "function", &first);
    pti_strbuf_put(&tb, fb.data, fb.len);
    tb.oom |= fb.oom;
    pti_strbuf_put(&tb, "}", 1);
    bool ok = jb_attach(&fb, f);
    if (!ok)
        pti_strbuf_free(&tb);
    if (!ok || !jb_attach(&tb, v)) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

static cJSON *tools_value(const cJSON *tools)
{
    if (!tools || cJSON_IsNull(tools) || (cJSON_IsArray(tools) && !tools->child))
        return cJSON_CreateNull();
    cJSON *arr = cJSON_CreateArray();
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        cJSON *v = arr ? tool_value(t) : NULL;
        if (!v) {
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToArray(arr, v);
    }
    size_t n;
    arr->valuestring = pti_gotmpl_json(arr, &n);
    if (!arr->valuestring) {
        cJSON_Delete(arr);
        return NULL;
    }
    return arr;
}

/* ---- validation and collation --------------------------------------------------------------- */

static bool check_messages(const cJSON *messages, const cJSON *tools)
{
    if (messages && !cJSON_IsArray(messages) && !cJSON_IsNull(messages))
        return pti_error(PT_ERR_INVALID_ARG, "invalid message format: messages is not an array"),
               false;
    const cJSON *m;
    int i = 0;
    const cJSON *arr = cJSON_IsArray(messages) ? messages : NULL;
    cJSON_ArrayForEach(m, arr)
    {
        if (!cJSON_IsObject(m) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "role")))
            return pti_error(PT_ERR_INVALID_ARG,
                             "invalid message format: message %d has no string role", i),
                   false;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (c && !cJSON_IsString(c) && !cJSON_IsNull(c))
            return pti_error(PT_ERR_INVALID_ARG,
                             "invalid message format: content of message %d is not a string", i),
                   false;
        i++;
    }
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools))
            return pti_error(PT_ERR_INVALID_ARG, "invalid tools: not an array"), false;
        for (const cJSON *t = tools->child; t; t = t->next)
            if (!cJSON_IsObject(t))
                return pti_error(PT_ERR_INVALID_ARG, "invalid tools: a tool is not an object"),
                       false;
    }
    return true;
}

typedef struct collated {
    cJSON *messages; /* array of message values */
    char *system;    /* all system contents joined by "\n\n" */
} collated;

static bool append_text(char **dst, const char *sep, const char *s)
{
    size_t a = *dst ? strlen(*dst) : 0, b = strlen(sep), c = strlen(s);
    char *n = pti_realloc(*dst, a + b + c + 1);
    if (!n)
        return false;
    memcpy(n + a, sep, b);
    memcpy(n + a + b, s, c + 1);
    *dst = n;
    return true;
}

/* Ollama's template.collate: system contents gathered; consecutive messages of one role
 * (tool results excepted) merged with "\n\n". The default system comes first when the first
 * message is not a system message. */
static bool collate(const cJSON *messages, const char *default_system, collated *out)
{
    out->messages = cJSON_CreateArray();
    out->system = pti_calloc(1, 1);
    if (!out->messages || !out->system)
        return false;
    const cJSON *first = cJSON_IsArray(messages) ? messages->child : NULL;
    bool sys_first = first && strcmp(str_or_empty(first, "role"), "system") == 0;
    cJSON *def = NULL;
    if (default_system && default_system[0] && !sys_first) {
        def = cJSON_CreateObject();
        if (!def || !cJSON_AddStringToObject(def, "role", "system") ||
            !cJSON_AddStringToObject(def, "content", default_system)) {
            cJSON_Delete(def);
            return false;
        }
    }
    bool ok = true, have_sys = false;
    cJSON *last = NULL;
    const cJSON *m = def ? def : first;
    while (m && ok) {
        const char *role = str_or_empty(m, "role");
        const char *content = str_or_empty(m, "content");
        if (strcmp(role, "system") == 0) {
            ok = append_text(&out->system, have_sys ? "\n\n" : "", content);
            have_sys = true;
        }
        const cJSON *lr = last ? cJSON_GetObjectItemCaseSensitive(last, "Role") : NULL;
        if (ok && lr && strcmp(lr->valuestring, role) == 0 && strcmp(role, "tool") != 0) {
            cJSON *lc = cJSON_GetObjectItemCaseSensitive(last, "Content");
            char *merged = NULL;
            ok = append_text(&merged, "", lc->valuestring) && append_text(&merged, "\n\n", content);
            if (ok) {
                cJSON *nc = cJSON_CreateString(merged);
                ok = nc && cJSON_ReplaceItemInObjectCaseSensitive(last, "Content", nc);
            }
            free(merged);
        } else if (ok) {
            last = message_value(m, content);
            ok = last && cJSON_AddItemToArray(out->messages, last);
        }
        m = m == def ? first : m->next;
    }
    cJSON_Delete(def);
    return ok;
}

/* ---- execution ------------------------------------------------------------------------------ */

static cJSON *legacy_values(const char *system, const char *prompt, const char *response,
                            bool think_set, bool think)
{
    cJSON *v = cJSON_CreateObject();
    if (!v || !add_str(v, "System", system) || !add_str(v, "Prompt", prompt) ||
        !add_str(v, "Response", response) || !cJSON_AddBoolToObject(v, "Think", think) ||
        !add_str(v, "ThinkLevel", "") || !cJSON_AddBoolToObject(v, "IsThinkSet", think_set)) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

static bool exec_into(const pti_gotmpl *t, const cJSON *values, int cut, pti_strbuf *out)
{
    size_t n;
    char *s = gt_execute(t, values, cut, &n);
    if (!s)
        return false;
    pti_strbuf_put(out, s, n);
    free(s);
    return !out->oom || (pti_error(PT_ERR_OOM, "template: out of memory"), false);
}

/* Ollama's legacy path: one execution per (System, Prompt, Response) turn, then the last one
 * cut after {{ .Response }}. */
static bool render_legacy(const pti_gotmpl *t, const cJSON *msgs, bool think_set, bool think,
                          pti_strbuf *out)
{
    const char *system = "", *prompt = "", *response = "";
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs)
    {
        const char *role = str_or_empty(m, "Role");
        const char *content = str_or_empty(m, "Content");
        bool flush = (strcmp(role, "system") == 0 && (prompt[0] || response[0])) ||
                     (strcmp(role, "user") == 0 && response[0]);
        if (flush) {
            cJSON *v = legacy_values(system, prompt, response, think_set, think);
            bool ok = v && exec_into(t, v, 0, out);
            cJSON_Delete(v);
            if (!ok)
                return v ? false : (pti_error(PT_ERR_OOM, "template: out of memory"), false);
            system = prompt = response = "";
        }
        if (strcmp(role, "system") == 0)
            system = content;
        else if (strcmp(role, "user") == 0)
            prompt = content;
        else if (strcmp(role, "assistant") == 0)
            response = content;
    }
    cJSON *v = legacy_values(system, prompt, response, think_set, think);
    bool ok = v && exec_into(t, v, t->response_cut_seq, out);
    cJSON_Delete(v);
    if (!v)
        pti_error(PT_ERR_OOM, "template: out of memory");
    return ok;
}

static char *finish(pti_strbuf *out, bool ok, size_t *out_len)
{
    if (!ok) {
        pti_strbuf_free(out);
        return NULL;
    }
    size_t len = out->len;
    char *text = pti_strbuf_take(out);
    if (!text)
        return pti_error_null(PT_ERR_OOM, "template: out of memory");
    if (out_len)
        *out_len = len;
    return text;
}

char *pti_ollama_chat_prompt(const pti_gotmpl *t, const cJSON *messages, const cJSON *tools,
                             const char *default_system, bool think_set, bool think,
                             size_t *out_len)
{
    if (!t)
        return pti_error_null(PT_ERR_NULL, "pti_ollama_chat_prompt: template is NULL");
    if (!check_messages(messages, tools))
        return NULL;
    collated c = {0};
    pti_strbuf out = {0};
    bool ok = collate(messages, default_system, &c);
    if (!ok)
        pti_error(PT_ERR_OOM, "template: out of memory");
    else if (pti_gotmpl_references(t, "Messages")) {
        cJSON *v = cJSON_CreateObject();
        cJSON *tv = tools_value(tools);
        ok = v && tv && add_str(v, "System", c.system) &&
             cJSON_AddItemToObject(v, "Messages", c.messages) &&
             (c.messages = NULL, cJSON_AddItemToObject(v, "Tools", tv)) &&
             (tv = NULL, add_str(v, "Response", "")) && cJSON_AddBoolToObject(v, "Think", think) &&
             add_str(v, "ThinkLevel", "") && cJSON_AddBoolToObject(v, "IsThinkSet", think_set);
        cJSON_Delete(tv);
        if (!ok)
            pti_error(PT_ERR_OOM, "template: out of memory");
        else
            ok = exec_into(t, v, 0, &out);
        cJSON_Delete(v);
    } else {
        ok = render_legacy(t, c.messages, think_set, think, &out);
    }
    cJSON_Delete(c.messages);
    free(c.system);
    return finish(&out, ok, out_len);
}

char *pti_ollama_generate_prompt(const pti_gotmpl *t, const char *system, const char *prompt,
                                 const char *suffix, size_t *out_len)
{
    if (!t)
        return pti_error_null(PT_ERR_NULL, "pti_ollama_generate_prompt: template is NULL");
    if (suffix && suffix[0] && !(prompt && prompt[0])) {
        /* Ollama: a suffix request passes no messages; with an empty prompt Execute falls
         * through to rendering no messages at all */
        cJSON *none = cJSON_CreateArray();
        char *s = none ? pti_ollama_chat_prompt(t, none, NULL, NULL, false, false, out_len)
                       : pti_error_null(PT_ERR_OOM, "template: out of memory");
        cJSON_Delete(none);
        return s;
    }
    if (suffix && suffix[0]) {
        /* Ollama executes {Prompt, Suffix, Response} alone for fill-in-the-middle */
        cJSON *v = cJSON_CreateObject();
        if (!v || !add_str(v, "Prompt", prompt) || !add_str(v, "Suffix", suffix) ||
            !add_str(v, "Response", "")) {
            cJSON_Delete(v);
            return pti_error_null(PT_ERR_OOM, "template: out of memory");
        }
        char *s = gt_execute(t, v, 0, out_len);
        cJSON_Delete(v);
        return s;
    }
    cJSON *msgs = cJSON_CreateArray();
    cJSON *sm = system && system[0] ? cJSON_CreateObject() : NULL;
    cJSON *um = cJSON_CreateObject();
    bool ok = msgs && um && (!(system && system[0]) || sm);
    if (ok && sm) {
        ok = cJSON_AddStringToObject(sm, "role", "system") &&
             cJSON_AddStringToObject(sm, "content", system) && cJSON_AddItemToArray(msgs, sm);
        if (ok)
            sm = NULL;
    }
    ok = ok && cJSON_AddStringToObject(um, "role", "user") &&
         cJSON_AddStringToObject(um, "content", prompt ? prompt : "") &&
         cJSON_AddItemToArray(msgs, um);
    if (ok)
        um = NULL;
    char *s = ok ? pti_ollama_chat_prompt(t, msgs, NULL, NULL, false, false, out_len)
                 : pti_error_null(PT_ERR_OOM, "template: out of memory");
    cJSON_Delete(sm);
    cJSON_Delete(um);
    cJSON_Delete(msgs);
    return s;
}
