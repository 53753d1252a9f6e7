/* Tool calls (tool_calls.h): the tags that mark a call in a model's output, the streaming
 * parser that takes calls out of generated text, and the `tools` branch of the Hugging Face
 * templates of the C-coded chat families.
 *
 * Rendering builds on pti_chat_render: with tools, each family's template changes only a
 * known part of what it renders without them (Qwen: the system turn; Llama 3.1+: the system
 * header and the first user turn; Mistral: a block before the last user turn), so we render
 * without tools and replace or insert that part, writing the tool definitions as the
 * templates' tojson does (Python json.dumps, keys in the given order). */
#include "tool_calls.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "go_template.h"

/* ---- Python's json.dumps (ensure_ascii=False), as the templates' tojson -------------------- */

static bool py_json_string(pti_tool_text *b, const char *s)
{
    bool ok = pti_strbuf_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c && ok; c++) {
        char esc[8];
        switch (*c) {
        case '"': ok = pti_strbuf_puts(b, "\\\""); break;
        case '\\': ok = pti_strbuf_puts(b, "\\\\"); break;
        case '\n': ok = pti_strbuf_puts(b, "\\n"); break;
        case '\r': ok = pti_strbuf_puts(b, "\\r"); break;
        case '\t': ok = pti_strbuf_puts(b, "\\t"); break;
        case '\b': ok = pti_strbuf_puts(b, "\\b"); break;
        case '\f': ok = pti_strbuf_puts(b, "\\f"); break;
        default:
            if (*c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *c);
                ok = pti_strbuf_puts(b, esc);
            } else {
                ok = pti_strbuf_put(b, (const char *)c, 1);
            }
        }
    }
    return ok && pti_strbuf_put(b, "\"", 1);
}

/* Python's repr of a float: shortest round-trip digits, exponent form outside 1e-4..1e16. */
static bool py_json_number(pti_tool_text *b, double d)
{
    char out[48];
    if (!isfinite(d))
        return pti_strbuf_puts(b, isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
    if (d == floor(d) && fabs(d) < 1e18) {
        snprintf(out, sizeof out, "%lld", (long long)d);
        return pti_strbuf_puts(b, out);
    }
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, d);
        if (strtod(e, NULL) == d)
            break;
    }
    /* e = [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    digits[nd] = '\0';
    int exp = atoi(p + 1);
    int decpt = exp + 1;
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            o += (size_t)snprintf(out + o, sizeof out - o, "0.");
            for (int i = 0; i < -decpt; i++)
                out[o++] = '0';
            o += (size_t)snprintf(out + o, sizeof out - o, "%s", digits);
        } else {
            for (int i = 0; i < decpt || i < nd; i++) {
                if (i == decpt)
                    out[o++] = '.';
                out[o++] = i < nd ? digits[i] : '0';
            }
            if (nd <= decpt)
                o += (size_t)snprintf(out + o, sizeof out - o, ".0");
        }
        out[o] = '\0';
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, (size_t)nd - 1);
            o += (size_t)nd - 1;
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    return pti_strbuf_puts(b, out);
}

static bool py_json(pti_tool_text *b, const cJSON *v, int indent, int level);

static bool py_newline(pti_tool_text *b, int indent, int level)
{
    bool ok = pti_strbuf_put(b, "\n", 1);
    for (int i = 0; i < indent * level && ok; i++)
        ok = pti_strbuf_put(b, " ", 1);
    return ok;
}

static bool py_json(pti_tool_text *b, const cJSON *v, int indent, int level)
{
    if (cJSON_IsString(v))
        return py_json_string(b, v->valuestring);
    if (cJSON_IsNumber(v))
        return py_json_number(b, v->valuedouble);
    if (cJSON_IsBool(v))
        return pti_strbuf_puts(b, cJSON_IsTrue(v) ? "true" : "false");
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
        return pti_strbuf_puts(b, "null");
    bool obj = cJSON_IsObject(v);
    if (!v->child)
        return pti_strbuf_puts(b, obj ? "{}" : "[]");
    bool ok = pti_strbuf_put(b, obj ? "{" : "[", 1);
    for (const cJSON *c = v->child; c && ok; c = c->next) {
        if (indent > 0)
            ok = py_newline(b, indent, level + 1);
        if (ok && obj)
            ok = py_json_string(b, c->string ? c->string : "") && pti_strbuf_puts(b, ": ");
        ok = ok && py_json(b, c, indent, level + 1);
        if (ok && c->next)
            ok = pti_strbuf_puts(b, indent > 0 ? "," : ", ");
    }
    if (ok && indent > 0)
        ok = py_newline(b, indent, level);
    return ok && pti_strbuf_put(b, obj ? "}" : "]", 1);
}

/* ---- rendering tools for the C-coded families ----------------------------------------------- */

bool pti_chat_family_supports_tools(pti_chat_family f)
{
    return f == PTI_CHAT_QWEN25 || f == PTI_CHAT_QWEN3 || f == PTI_CHAT_LLAMA3 ||
           f == PTI_CHAT_MISTRAL;
}

static bool starts_with(const char *s, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    return n >= k && memcmp(s, prefix, k) == 0;
}

static const char *find_n(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; k <= n && i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0)
            return s + i;
    return NULL;
}

static bool role_is(const pti_chat_message *m, const char *role)
{
    return m->role && strcmp(m->role, role) == 0;
}

/* Qwen2.5 / Qwen3: the system turn becomes the "# Tools" block. */
static bool render_qwen_tools(const pti_chat_template *t, const pti_chat_message *msgs, size_t n,
                              const cJSON *tools, const char *base, size_t base_len,
                              pti_tool_text *out)
{
    bool qwen3 = pti_chat_template_family(t) == PTI_CHAT_QWEN3;
    bool sys_first = n > 0 && role_is(&msgs[0], "system");
    const char *sys = "";
    size_t sys_len = 0, prefix_len = 0;
    static const char head[] = "<|im_start|>system\n";
    if (sys_first || !qwen3) {
        /* the turn the template renders without tools: "<|im_start|>system\n" S "<|im_end|>\n",
         * S the first message or Qwen2.5's default system */
        const char *end = NULL;
        if (starts_with(base, base_len, head)) {
            if (sys_first) {
                size_t c = strlen(msgs[0].content ? msgs[0].content : "");
                if (base_len >= sizeof head - 1 + c + 11 &&
                    memcmp(base + sizeof head - 1 + c, "<|im_end|>\n", 11) == 0)
                    end = base + sizeof head - 1 + c;
            } else {
                end = find_n(base, base_len, "<|im_end|>\n");
            }
        }
        if (!end)
            return pti_error(PT_ERR_INVALID_ARG, "tools: unexpected Qwen system turn"), false;
        sys = base + sizeof head - 1;
        sys_len = (size_t)(end - sys);
        prefix_len = (size_t)(end - base) + 11;
    }
    bool ok = pti_strbuf_puts(out, head);
    if (qwen3) {
        if (sys_first)
            ok = ok && pti_strbuf_put(out, sys, sys_len) && pti_strbuf_puts(out, "\n\n");
    } else {
        ok = ok && pti_strbuf_put(out, sys, sys_len) && pti_strbuf_puts(out, "\n\n");
    }
    ok = ok &&
         pti_strbuf_puts(out, "# Tools\n\nYou may call one or more functions to assist with the "
                              "user query.\n\nYou are provided with function signatures within "
                              "<tools></tools> XML tags:\n<tools>");
    for (const cJSON *tool = tools->child; tool && ok; tool = tool->next)
        ok = pti_strbuf_puts(out, "\n") && py_json(out, tool, 0, 0);
    ok = ok &&
         pti_strbuf_puts(out, "\n</tools>\n\nFor each function call, return a json object with "
                              "function name and arguments within <tool_call></tool_call> XML "
                              "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                              "<args-json-object>}\n</tool_call><|im_end|>\n");
    return ok && pti_strbuf_put(out, base + prefix_len, base_len - prefix_len);
}

/* Llama 3.1+: "Environment: ipython" in the system header, the first message after the system
 * message replaced by a user turn listing the tools (tools_in_user_message, the default). */
static bool render_llama3_tools(const pti_chat_template *t, const pti_chat_message *msgs, size_t n,
                                const cJSON *tools, bool gen, const pti_chat_opts *opts,
                                const char *base, size_t base_len, pti_tool_text *out)
{
    size_t first = n > 0 && role_is(&msgs[0], "system") ? 1 : 0;
    if (first >= n)
        return pti_error(PT_ERR_INVALID_ARG, "pti_chat_render: llama3 template: Cannot put tools "
                                             "in the first user message when there's no first "
                                             "user message!"),
               false;
    const pti_chat_message *fm = &msgs[first];
    if (fm->n_tool_calls > 0 || role_is(fm, "tool") || role_is(fm, "ipython"))
        return pti_error(PT_ERR_INVALID_ARG, "tools: the first message after the system message "
                                             "must be a plain message to carry the tools"),
               false;
    /* the same conversation without that message: the difference is its turn */
    pti_chat_message *rest = pti_malloc(sizeof *rest * n);
    if (!rest)
        return pti_error(PT_ERR_OOM, "tools: out of memory"), false;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (i != first)
            rest[k++] = msgs[i];
    size_t rest_len = 0;
    char *without = pti_chat_render(t, rest, k, gen, opts, &rest_len);
    free(rest);
    if (!without)
        return false;
    static const char hdr[] = "<|start_header_id|>system<|end_header_id|>\n\n";
    const char *h = find_n(base, base_len, hdr);
    const char *eot = h ? find_n(h, base_len - (size_t)(h - base), "<|eot_id|>") : NULL;
    size_t turn_len = base_len - rest_len;
    size_t sys_end = eot ? (size_t)(eot - base) + 10 : 0;
    char role_hdr[256];
    snprintf(role_hdr, sizeof role_hdr, "<|start_header_id|>%s<|end_header_id|>\n\n", fm->role);
    bool shape_ok = eot && rest_len < base_len && sys_end + turn_len <= base_len &&
                    memcmp(base + sys_end + turn_len, without + sys_end, rest_len - sys_end) == 0 &&
                    starts_with(base + sys_end, turn_len, role_hdr);
    if (!shape_ok) {
        free(without);
        return pti_error(PT_ERR_INVALID_ARG, "tools: unexpected Llama 3 rendering"), false;
    }
    /* the first message's content, trimmed as the template's |trim did it */
    size_t rh = strlen(role_hdr);
    const char *content = base + sys_end + rh;
    size_t content_len = turn_len - rh - 10;
    size_t after_hdr = (size_t)(h - base) + sizeof hdr - 1;
    bool ok =
        pti_strbuf_put(out, base, after_hdr) && pti_strbuf_puts(out, "Environment: ipython\n") &&
        pti_strbuf_put(out, base + after_hdr, sys_end - after_hdr) &&
        pti_strbuf_puts(out, "<|start_header_id|>user<|end_header_id|>\n\nGiven the following "
                             "functions, please respond with a JSON for a function call with "
                             "its proper arguments that best answers the given prompt.\n\n"
                             "Respond in the format {\"name\": function name, \"parameters\": "
                             "dictionary of argument name and its value}.Do not use "
                             "variables.\n\n");
    for (const cJSON *tool = tools->child; tool && ok; tool = tool->next)
        ok = py_json(out, tool, 4, 0) && pti_strbuf_puts(out, "\n\n");
    ok = ok && pti_strbuf_put(out, content, content_len) && pti_strbuf_puts(out, "<|eot_id|>") &&
         pti_strbuf_put(out, base + sys_end + turn_len, base_len - sys_end - turn_len);
    free(without);
    return ok;
}

static bool same_message(const pti_chat_message *a, const pti_chat_message *b)
{
    const char *ca = a->content ? a->content : "", *cb = b->content ? b->content : "";
    return role_is(a, b->role) && strcmp(ca, cb) == 0 && a->n_tool_calls == b->n_tool_calls &&
           !a->reasoning_content == !b->reasoning_content &&
           (!a->reasoning_content || strcmp(a->reasoning_content, b->reasoning_content) == 0) &&
           !a->tool_call_id == !b->tool_call_id &&
           (!a->tool_call_id || strcmp(a->tool_call_id, b->tool_call_id) == 0);
}

static bool mistral_tools_block(pti_tool_text *out, const cJSON *tools)
{
    bool ok = pti_strbuf_puts(out, "[AVAILABLE_TOOLS] [");
    const cJSON *tool;
    cJSON_ArrayForEach(tool, tools)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        ok = ok && pti_strbuf_puts(out, "{\"type\": \"function\", \"function\": {");
        bool first = true;
        for (const cJSON *kv = fn ? fn->child : NULL; kv && ok; kv = kv->next) {
            if (kv->string && strcmp(kv->string, "return") == 0)
                continue;
            if (!first)
                ok = pti_strbuf_puts(out, ", ");
            first = false;
            /* a string value goes in raw, unescaped, as the template concatenates it */
            ok = ok && pti_strbuf_puts(out, "\"") &&
                 pti_strbuf_puts(out, kv->string ? kv->string : "") && pti_strbuf_puts(out, "\": ");
            if (cJSON_IsString(kv))
                ok = ok && pti_strbuf_puts(out, "\"") && pti_strbuf_puts(out, kv->valuestring) &&
                     pti_strbuf_puts(out, "\"");
            else
                ok = ok && py_json(out, kv, 0, 0);
        }
        ok = ok && pti_strbuf_puts(out, "}}") && pti_strbuf_puts(out, tool->next ? ", " : "]");
    }
    return ok && pti_strbuf_puts(out, "[/AVAILABLE_TOOLS]");
}

/* Mistral v0.3: [AVAILABLE_TOOLS] before the [INST] of the last user message (and of every
 * earlier user message equal to it: the template compares dicts). */
static bool render_mistral_tools(const pti_chat_message *msgs, size_t n, const cJSON *tools,
                                 const char *base, size_t base_len, pti_tool_text *out)
{
    const pti_chat_message *last = NULL;
    size_t first = n > 0 && role_is(&msgs[0], "system") ? 1 : 0;
    for (size_t i = first; i < n; i++)
        if (role_is(&msgs[i], "user"))
            last = &msgs[i];
    for (const cJSON *tool = tools->child; tool; tool = tool->next)
        if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(tool, "function")))
            return pti_error(PT_ERR_INVALID_ARG,
                             "tools: mistral template needs {\"function\": {...}} tools"),
                   false;
    size_t pos = 0;
    bool ok = true;
    for (size_t i = first; i < n && ok; i++) {
        if (!role_is(&msgs[i], "user"))
            continue;
        const char *inst = find_n(base + pos, base_len - pos, "[INST] ");
        if (!inst)
            return pti_error(PT_ERR_INVALID_ARG, "tools: unexpected Mistral rendering"), false;
        size_t at = (size_t)(inst - base);
        ok = pti_strbuf_put(out, base + pos, at - pos);
        if (ok && same_message(&msgs[i], last))
            ok = mistral_tools_block(out, tools);
        ok = ok && pti_strbuf_puts(out, "[INST] ");
        pos = at + 7;
    }
    return ok && pti_strbuf_put(out, base + pos, base_len - pos);
}

char *pti_chat_render_tools(const pti_chat_template *t, const pti_chat_message *msgs, size_t n,
                            const char *tools_json, bool add_generation_prompt,
                            const pti_chat_opts *opts, size_t *out_len)
{
    cJSON *tools = NULL;
    if (tools_json) {
        tools = cJSON_Parse(tools_json);
        if (!cJSON_IsArray(tools)) {
            cJSON_Delete(tools);
            return pti_error_null(PT_ERR_INVALID_ARG, "tools: not a JSON array");
        }
        for (const cJSON *tool = tools->child; tool; tool = tool->next) {
            if (!cJSON_IsObject(tool)) {
                cJSON_Delete(tools);
                return pti_error_null(PT_ERR_INVALID_ARG, "tools: a tool is not a JSON object");
            }
        }
    }
    if (!tools || !tools->child) {
        cJSON_Delete(tools);
        return pti_chat_render(t, msgs, n, add_generation_prompt, opts, out_len);
    }
    pti_chat_family f = t ? pti_chat_template_family(t) : PTI_CHAT_PLAIN;
    if (!t || !pti_chat_family_supports_tools(f)) {
        cJSON_Delete(tools);
        return t ? pti_error_null(PT_ERR_UNSUPPORTED, "%s chat template does not support tools",
                                  pti_chat_family_name(f))
                 : pti_error_null(PT_ERR_NULL, "pti_chat_render_tools: template is NULL");
    }
    pti_chat_opts o = opts ? *opts : (pti_chat_opts){0};
    size_t base_len = 0;
    char *base = pti_chat_render(t, msgs, n, add_generation_prompt, &o, &base_len);
    if (!base) {
        cJSON_Delete(tools);
        return NULL;
    }
    pti_tool_text out = {0};
    bool ok;
    if (f == PTI_CHAT_QWEN25 || f == PTI_CHAT_QWEN3)
        ok = render_qwen_tools(t, msgs, n, tools, base, base_len, &out);
    else if (f == PTI_CHAT_LLAMA3)
        ok =
            render_llama3_tools(t, msgs, n, tools, add_generation_prompt, &o, base, base_len, &out);
    else
        ok = render_mistral_tools(msgs, n, tools, base, base_len, &out);
    free(base);
    cJSON_Delete(tools);
    size_t len = out.len;
    char *text = ok ? pti_strbuf_take(&out) : NULL;
    if (!text) {
        if (pt_last_status() == PT_OK)
            pti_error(PT_ERR_OOM, "tools: out of memory");
        pti_strbuf_free(&out);
        return NULL;
    }
    if (out_len)
        *out_len = len;
    return text;
}

/* ---- tags ----------------------------------------------------------------------------------- */

static bool set_tags(char *open_tag, char *close_tag, size_t cap, const char *o, const char *c)
{
    if (!open_tag || !close_tag || cap < 2)
        return false;
    bool fits = strlen(o) < cap && strlen(c) < cap;
    snprintf(open_tag, cap, "%s", fits ? o : "{");
    snprintf(close_tag, cap, "%s", fits ? c : "");
    return fits;
}

bool pti_tool_tags_for_family(pti_chat_family f, char *open_tag, char *close_tag, size_t cap)
{
    switch (f) {
    case PTI_CHAT_QWEN25:
    case PTI_CHAT_QWEN3: return set_tags(open_tag, close_tag, cap, "<tool_call>", "</tool_call>");
    case PTI_CHAT_MISTRAL: return set_tags(open_tag, close_tag, cap, "[TOOL_CALLS]", "");
    case PTI_CHAT_LLAMA3: return set_tags(open_tag, close_tag, cap, "{", "");
    default: set_tags(open_tag, close_tag, cap, "{", ""); return false;
    }
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool pti_tool_tags_from_template(const char *go_template, size_t len, char *open_tag,
                                 char *close_tag, size_t cap)
{
    if (!open_tag || !close_tag || cap < 2)
        return false;
    set_tags(open_tag, close_tag, cap, "{", "");
    pti_gotmpl *t = go_template ? pti_gotmpl_parse(go_template, len) : NULL;
    if (!t)
        return false;
    char text[512];
    bool found = pti_gotmpl_first_text_in_if(t, "ToolCalls", text, sizeof text);
    pti_gotmpl_free(t);
    if (!found)
        return true;
    /* Ollama: \r\n as \n, cut at the first '{', trim white space; empty means "{" */
    char tag[512];
    size_t k = 0;
    for (size_t i = 0; text[i] && text[i] != '{'; i++)
        if (!(text[i] == '\r' && text[i + 1] == '\n'))
            tag[k++] = text[i];
    tag[k] = '\0';
    char *s = tag;
    while (*s && is_ws(*s))
        s++;
    size_t n = strlen(s);
    while (n && is_ws(s[n - 1]))
        s[--n] = '\0';
    if (n == 0)
        return true;
    char close[520] = "";
    if (s[0] == '<' && s[n - 1] == '>' && n > 2) {
        snprintf(close, sizeof close, "</%s", s + 1);
        if (!find_n(go_template, len, close))
            close[0] = '\0';
    }
    return set_tags(open_tag, close_tag, cap, s, close);
}

/* ---- the streaming parser ------------------------------------------------------------------- */

#define MAX_CALL_TEXT ((size_t)16 << 20)

/* Progress of the bracket scan over a JSON value being received. */
typedef struct json_scan {
    bool active, in_str, esc;
    size_t start, pos;
    long depth;
} json_scan;

struct pti_tool_parser {
    char *open, *close;
    size_t open_n, close_n;
    bool json_tag;      /* the open tag is "{": the JSON itself marks a call */
    pti_tool_text held; /* text not yet released */
    bool in_calls;      /* after an open tag */
    size_t block_calls; /* calls parsed since the open tag */
    size_t ncalls;
    json_scan scan;
};

pti_tool_parser *pti_tool_parser_new(const char *open_tag, const char *close_tag)
{
    if (!open_tag || !open_tag[0])
        return pti_error_null(PT_ERR_INVALID_ARG, "tool parser: the open tag is empty");
    pti_tool_parser *p = pti_calloc(1, sizeof *p);
    if (!p)
        return pti_error_null(PT_ERR_OOM, "tool parser: out of memory");
    p->open = pti_strdup(open_tag);
    p->close = pti_strdup(close_tag ? close_tag : "");
    if (!p->open || !p->close) {
        pti_tool_parser_free(p);
        return pti_error_null(PT_ERR_OOM, "tool parser: out of memory");
    }
    p->open_n = strlen(p->open);
    p->close_n = strlen(p->close);
    p->json_tag = strcmp(p->open, "{") == 0;
    return p;
}

void pti_tool_parser_free(pti_tool_parser *p)
{
    if (!p)
        return;
    free(p->open);
    free(p->close);
    pti_strbuf_free(&p->held);
    free(p);
}

bool pti_tool_parser_holding(const pti_tool_parser *p)
{
    return p && (p->in_calls || p->held.len > 0);
}

size_t pti_tool_parser_ncalls(const pti_tool_parser *p)
{
    return p ? p->ncalls : 0;
}

/* Drops the first n held bytes. */
static void held_consume(pti_tool_parser *p, size_t n)
{
    p->scan.active = false; /* offsets into held change */
    memmove(p->held.data, p->held.data + n, p->held.len - n);
    p->held.len -= n;
    if (p->held.data)
        p->held.data[p->held.len] = '\0';
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_tag_suffix(const char *s, size_t n, const char *tag, size_t tag_n)
{
    size_t max = n < tag_n - 1 ? n : tag_n - 1;
    for (size_t k = max; k > 0; k--)
        if (memcmp(s + n - k, tag, k) == 0)
            return k;
    return 0;
}

/* End (exclusive, an offset in held) of the JSON object or array starting at held[at],
 * string- and escape-aware; 0 while it is incomplete. The scan resumes where the previous
 * push left it, so a long call streamed in small pieces is scanned once. */
static size_t json_value_end(pti_tool_parser *p, size_t at)
{
    json_scan *sc = &p->scan;
    if (!sc->active || sc->start != at)
        *sc = (json_scan){.active = true, .start = at, .pos = at};
    const char *s = p->held.data;
    for (; sc->pos < p->held.len; sc->pos++) {
        char c = s[sc->pos];
        if (sc->in_str) {
            if (sc->esc)
                sc->esc = false;
            else if (c == '\\')
                sc->esc = true;
            else if (c == '"')
                sc->in_str = false;
            continue;
        }
        if (c == '"')
            sc->in_str = true;
        else if (c == '{' || c == '[')
            sc->depth++;
        else if ((c == '}' || c == ']') && --sc->depth <= 0) {
            sc->active = false;
            return sc->pos + 1;
        }
    }
    return 0;
}

/* The arguments of a call as an object: an object as is, a string holding an object's JSON
 * parsed; NULL otherwise. */
static cJSON *arguments_object(const cJSON *call, bool required)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(call, "arguments");
    if (!a)
        a = cJSON_GetObjectItemCaseSensitive(call, "parameters");
    if (!a)
        return required ? NULL : cJSON_CreateObject();
    if (cJSON_IsObject(a))
        return cJSON_Duplicate(a, true);
    if (cJSON_IsString(a)) {
        cJSON *parsed = cJSON_Parse(a->valuestring);
        if (cJSON_IsObject(parsed))
            return parsed;
        cJSON_Delete(parsed);
    }
    return NULL;
}

/* Whether v is a call ({"name", "arguments"|"parameters"}, or wrapped in "function"). */
static bool is_call(const cJSON *v, bool args_required)
{
    if (!cJSON_IsObject(v))
        return false;
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(v, "function");
    if (cJSON_IsObject(fn))
        v = fn;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(v, "name");
    if (!cJSON_IsString(name) || !name->valuestring[0])
        return false;
    cJSON *args = arguments_object(v, args_required);
    bool ok = args != NULL;
    cJSON_Delete(args);
    return ok;
}

static bool add_call(pti_tool_parser *p, const cJSON *v, cJSON *calls)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(v, "function");
    if (cJSON_IsObject(fn))
        v = fn;
    cJSON *args = arguments_object(v, false);
    cJSON *call = cJSON_CreateObject();
    cJSON *f = cJSON_CreateObject();
    if (!args || !call || !f || !cJSON_AddNumberToObject(f, "index", (double)p->ncalls) ||
        !cJSON_AddStringToObject(f, "name",
                                 cJSON_GetObjectItemCaseSensitive(v, "name")->valuestring)) {
        cJSON_Delete(args);
        cJSON_Delete(call);
        cJSON_Delete(f);
        return false;
    }
    cJSON_AddItemToObject(f, "arguments", args);
    cJSON_AddItemToObject(call, "function", f);
    cJSON_AddItemToArray(calls, call);
    p->ncalls++;
    p->block_calls++;
    return true;
}

/* Parses text as one call or an array of calls; adds them and returns 1, 0 when it is not
 * calls, -1 on OOM. */
static int take_calls(pti_tool_parser *p, const char *text, size_t n, cJSON *calls)
{
    cJSON *v = cJSON_ParseWithLength(text, n);
    if (!v)
        return 0;
    bool args_required = p->json_tag;
    bool ok = false;
    if (cJSON_IsArray(v) && v->child) {
        ok = true;
        for (const cJSON *c = v->child; c && ok; c = c->next)
            ok = is_call(c, args_required);
    } else {
        ok = is_call(v, args_required);
    }
    if (!ok) {
        cJSON_Delete(v);
        return 0;
    }
    int rc = 1;
    if (cJSON_IsArray(v)) {
        for (const cJSON *c = v->child; c && rc > 0; c = c->next)
            if (!add_call(p, c, calls))
                rc = -1;
    } else if (!add_call(p, v, calls)) {
        rc = -1;
    }
    cJSON_Delete(v);
    return rc;
}

/* Processes held text as far as it can; final: the end of generation. */
static bool process(pti_tool_parser *p, pti_tool_text *content, cJSON *calls, bool final)
{
    for (;;) {
        char *h = p->held.data;
        size_t n = p->held.len;
        if (!p->in_calls) {
            const char *at = n ? find_n(h, n, p->open) : NULL;
            if (at) {
                size_t i = (size_t)(at - h);
                if (!pti_strbuf_put(content, h, i))
                    return false;
                held_consume(p, p->json_tag ? i : i + p->open_n);
                p->in_calls = true;
                p->block_calls = 0;
                continue;
            }
            size_t keep = final ? 0 : partial_tag_suffix(h, n, p->open, p->open_n);
            if (!pti_strbuf_put(content, h, n - keep))
                return false;
            held_consume(p, n - keep);
            return true;
        }
        /* inside a call block: separators, the close tag, JSON values */
        size_t i = 0;
        while (i < n && (is_ws(h[i]) || h[i] == ',' || (h[i] == ']' && p->block_calls > 0)))
            i++;
        if (i == n) {
            if (!final)
                return true;
            /* only separators left: dropped after calls; with no call, the tag was text */
            if (p->block_calls == 0 && !p->json_tag &&
                (!pti_strbuf_put(content, p->open, p->open_n) || !pti_strbuf_put(content, h, n)))
                return false;
            held_consume(p, n);
            p->in_calls = false;
            p->block_calls = 0;
            return true;
        }
        if (p->close_n && n - i >= p->close_n && memcmp(h + i, p->close, p->close_n) == 0) {
            if (p->block_calls == 0 && !pti_strbuf_put(content, p->open, p->open_n))
                return false;
            if (p->block_calls == 0 && !pti_strbuf_put(content, h, i + p->close_n))
                return false;
            held_consume(p, i + p->close_n);
            p->in_calls = false;
            p->block_calls = 0;
            continue;
        }
        if (p->close_n && !final && n - i < p->close_n && memcmp(h + i, p->close, n - i) == 0)
            return true;
        if (h[i] == '{' || h[i] == '[') {
            size_t end = json_value_end(p, i);
            end = end ? end - i : 0;
            if (end == 0 && !final && n < MAX_CALL_TEXT)
                return true;
            int rc = end ? take_calls(p, h + i, end, calls) : 0;
            if (rc < 0)
                return false;
            if (rc > 0) {
                held_consume(p, i + end);
                continue;
            }
            /* malformed: the tag (when nothing came of it) and the text are content */
            size_t upto = end ? i + end : n;
            if (p->block_calls == 0 && !p->json_tag && !pti_strbuf_put(content, p->open, p->open_n))
                return false;
            if (!pti_strbuf_put(content, h, upto))
                return false;
            held_consume(p, upto);
            p->in_calls = false;
            p->block_calls = 0;
            continue;
        }
        /* other text: the block is over */
        if (p->block_calls == 0 && !p->json_tag && !pti_strbuf_put(content, p->open, p->open_n))
            return false;
        if (p->block_calls == 0 && !pti_strbuf_put(content, h, i))
            return false;
        held_consume(p, i);
        p->in_calls = false;
        p->block_calls = 0;
    }
}

bool pti_tool_parser_push(pti_tool_parser *p, const char *text, size_t len, pti_tool_text *content,
                          cJSON *calls)
{
    if (!p || !content || !calls || (!text && len))
        return pti_error(PT_ERR_NULL, "pti_tool_parser_push: NULL argument"), false;
    if (!pti_strbuf_put(&p->held, text, len) || !process(p, content, calls, false))
        return pti_error(PT_ERR_OOM, "tool parser: out of memory"), false;
    return true;
}

bool pti_tool_parser_finish(pti_tool_parser *p, pti_tool_text *content, cJSON *calls)
{
    if (!p || !content || !calls)
        return pti_error(PT_ERR_NULL, "pti_tool_parser_finish: NULL argument"), false;
    bool ok = process(p, content, calls, true);
    p->in_calls = false;
    p->block_calls = 0;
    if (!ok)
        return pti_error(PT_ERR_OOM, "tool parser: out of memory"), false;
    return true;
}
