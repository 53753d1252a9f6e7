/* Chat templates (chat_template.h): family detection from the Jinja source and one renderer
 * per family that reproduces what jinja2 makes of the official template, byte for byte.
 *
 * Each renderer follows its template statement by statement; the comments quote the Jinja
 * constructs whose Python semantics matter (str.strip() strips Unicode whitespace, `trim` is
 * str.strip(), Qwen3's split('</think>') picks, `tojson` on a string quotes it). The output
 * is built in a growable buffer; an allocation failure is remembered and reported once at the
 * end, so the renderers stay straight-line code. */
#include "chat_template.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/internal.h"
#include "../../core/strbuf.h"

struct pti_chat_template {
    pti_chat_family family;
    bool phi3_keep_empty_system; /* Phi-3-mini: prints a system turn even when it is empty */
    bool ds_newlines;            /* DeepSeek-R1 (early template): newlines between its tags */
    bool llama3_today;           /* Llama 3.2/3.3: date_string from strftime_now, i.e. today */
    bool ds_think_prompt;        /* DeepSeek-R1 (2025 template): the prompt opens <think> */
    char *default_system;        /* ChatML/Qwen2.5: the system prompt used when none is given */
    char *warning;
};

/* ---- string views and Python's string methods ----------------------------------------------- */

typedef struct sv {
    const char *p;
    size_t n;
} sv;

static sv sv_of(const char *s)
{
    return (sv){s ? s : "", s ? strlen(s) : 0};
}

static const char *sv_find(sv h, const char *needle)
{
    size_t k = strlen(needle);
    if (k == 0 || h.n < k)
        return k == 0 ? h.p : NULL;
    for (size_t i = 0; i + k <= h.n; i++)
        if (h.p[i] == needle[0] && memcmp(h.p + i, needle, k) == 0)
            return h.p + i;
    return NULL;
}

static const char *sv_rfind(sv h, const char *needle)
{
    size_t k = strlen(needle);
    if (h.n < k)
        return NULL;
    for (size_t i = h.n - k + 1; i-- > 0;)
        if (memcmp(h.p + i, needle, k) == 0)
            return h.p + i;
    return NULL;
}

static bool sv_starts(sv s, const char *pre)
{
    size_t k = strlen(pre);
    return s.n >= k && memcmp(s.p, pre, k) == 0;
}

static bool sv_ends(sv s, const char *suf)
{
    size_t k = strlen(suf);
    return s.n >= k && memcmp(s.p + s.n - k, suf, k) == 0;
}

/* Length of a Python-whitespace character (str.isspace) starting at p (at most n bytes), or 0. */
static size_t space_len_at(const unsigned char *p, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = p[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f))
        return 1;
    if (c == 0xc2 && n >= 2 && (p[1] == 0x85 || p[1] == 0xa0))
        return 2;
    if (n >= 3 && c == 0xe1 && p[1] == 0x9a && p[2] == 0x80) /* U+1680 */
        return 3;
    if (n >= 3 && c == 0xe2 && p[1] == 0x80 && p[2] >= 0x80 &&
        (p[2] <= 0x8a || p[2] == 0xa8 || p[2] == 0xa9 ||
         p[2] == 0xaf)) /* U+2000-200A, 2028, 2029, 202F */
        return 3;
    if (n >= 3 && c == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) /* U+205F */
        return 3;
    if (n >= 3 && c == 0xe3 && p[1] == 0x80 && p[2] == 0x80) /* U+3000 */
        return 3;
    return 0;
}

/* Length of a whitespace character ending at p + n, or 0. */
static size_t space_len_before(const unsigned char *p, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        /* a multi-byte character starts at a non-continuation byte */
        if (k > 1 && (p[n - k] & 0xc0) == 0x80)
            continue;
        if (space_len_at(p + n - k, k) == k)
            return k;
        if ((p[n - k] & 0xc0) != 0x80)
            return 0;
    }
    return 0;
}

/* str.strip() with no argument, which is also Jinja's `trim` filter. */
static sv py_strip(sv s)
{
    const unsigned char *p = (const unsigned char *)s.p;
    size_t a = 0, b = s.n, k;
    while (a < b && (k = space_len_at(p + a, b - a)) > 0)
        a += k;
    while (b > a && (k = space_len_before(p + a, b - a)) > 0)
        b -= k;
    return (sv){s.p + a, b - a};
}

static sv lstrip_nl(sv s)
{
    while (s.n > 0 && s.p[0] == '\n')
        s.p++, s.n--;
    return s;
}

static sv rstrip_nl(sv s)
{
    while (s.n > 0 && s.p[s.n - 1] == '\n')
        s.n--;
    return s;
}

/* ---- output buffer --------------------------------------------------------------------------- */

typedef struct sbuf {
    pti_strbuf s;
    const char *error; /* the template's raise_exception message, when it raised */
} sbuf;

static void put_n(sbuf *b, const char *s, size_t n)
{
    pti_strbuf_put(&b->s, s, n);
}

static void put(sbuf *b, const char *s)
{
    put_n(b, s, s ? strlen(s) : 0);
}
static void put_sv(sbuf *b, sv s)
{
    put_n(b, s.p, s.n);
}

/* Python's json.dumps(s, ensure_ascii=False) of a string: quotes and escapes only. */
static void put_json_str(sbuf *b, sv s)
{
    put(b, "\"");
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        char esc[8];
        switch (c) {
        case '"': put(b, "\\\""); break;
        case '\\': put(b, "\\\\"); break;
        case '\n': put(b, "\\n"); break;
        case '\r': put(b, "\\r"); break;
        case '\t': put(b, "\\t"); break;
        case '\b': put(b, "\\b"); break;
        case '\f': put(b, "\\f"); break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                put(b, esc);
            } else {
                put_n(b, (const char *)&s.p[i], 1);
            }
        }
    }
    put(b, "\"");
}

static void tmpl_raise(sbuf *b, const char *msg)
{
    if (!b->error)
        b->error = msg;
}

/* ---- message accessors ----------------------------------------------------------------------- */

static bool role_is(const pti_chat_message *m, const char *r)
{
    return strcmp(m->role, r) == 0;
}
static sv content(const pti_chat_message *m)
{
    return sv_of(m->content);
}

/* ---- renderers: one per family --------------------------------------------------------------- */

/* Plain fallback: "role: content\n" per message, then "assistant: ". */
static void render_plain(sbuf *b, const pti_chat_message *m, size_t n, bool gen)
{
    for (size_t i = 0; i < n; i++) {
        put(b, m[i].role);
        put(b, ": ");
        put_sv(b, content(&m[i]));
        put(b, "\n");
    }
    if (gen)
        put(b, "assistant: ");
}

static void chatml_turn(sbuf *b, const char *role, sv text)
{
    put(b, "<|im_start|>");
    put(b, role);
    put(b, "\n");
    put_sv(b, text);
    put(b, "<|im_end|>\n");
}

/* {% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}
 * {{ default system }}{% endif %}{{'<|im_start|>' + role + '\n' + content + '<|im_end|>\n'}} */
static void render_chatml(sbuf *b, const pti_chat_template *t, const pti_chat_message *m, size_t n,
                          bool gen)
{
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && t->default_system && !role_is(&m[0], "system"))
            chatml_turn(b, "system", sv_of(t->default_system));
        chatml_turn(b, m[i].role, content(&m[i]));
    }
    if (gen)
        put(b, "<|im_start|>assistant\n");
}

/* Qwen2.5 and Qwen3 share the tool-response grouping: consecutive tool messages form one
 * user turn of <tool_response> blocks. */
static void qwen_tool(sbuf *b, const pti_chat_message *m, size_t n, size_t i)
{
    if (i == 0 || !role_is(&m[i - 1], "tool"))
        put(b, "<|im_start|>user");
    put(b, "\n<tool_response>\n");
    put_sv(b, content(&m[i]));
    put(b, "\n</tool_response>");
    if (i + 1 == n || !role_is(&m[i + 1], "tool"))
        put(b, "<|im_end|>\n");
}

static void qwen_tool_call(sbuf *b, const pti_chat_tool_call *tc)
{
    put(b, "<tool_call>\n{\"name\": \"");
    put(b, tc->name);
    put(b, "\", \"arguments\": ");
    put(b, tc->arguments);
    put(b, "}\n</tool_call>");
}

static void render_qwen25(sbuf *b, const pti_chat_template *t, const pti_chat_message *m, size_t n,
                          bool gen)
{
    const char *def = t->default_system
                          ? t->default_system
                          : "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
    if (n > 0 && role_is(&m[0], "system"))
        chatml_turn(b, "system", content(&m[0]));
    else
        chatml_turn(b, "system", sv_of(def));
    for (size_t i = 0; i < n; i++) {
        bool asst = role_is(&m[i], "assistant");
        if (role_is(&m[i], "user") || (role_is(&m[i], "system") && i > 0) ||
            (asst && m[i].n_tool_calls == 0)) {
            chatml_turn(b, m[i].role, content(&m[i]));
        } else if (asst) {
            put(b, "<|im_start|>assistant");
            if (content(&m[i]).n > 0) {
                put(b, "\n");
                put_sv(b, content(&m[i]));
            }
            for (size_t j = 0; j < m[i].n_tool_calls; j++) {
                put(b, "\n");
                qwen_tool_call(b, &m[i].tool_calls[j]);
            }
            put(b, "<|im_end|>\n");
        } else if (role_is(&m[i], "tool")) {
            qwen_tool(b, m, n, i);
        }
    }
    if (gen)
        put(b, "<|im_start|>assistant\n");
}

/* Qwen3: the reasoning of assistant turns before the last real user query is dropped; turns
 * after it keep (or, for the last one, always get) a <think> block. */
static void render_qwen3(sbuf *b, const pti_chat_message *m, size_t n, bool gen,
                         const pti_chat_opts *o)
{
    if (n > 0 && role_is(&m[0], "system"))
        chatml_turn(b, "system", content(&m[0]));
    /* ns.last_query_index: the last user message that is not a wrapped tool response */
    size_t last_query = n > 0 ? n - 1 : 0;
    for (size_t k = n; k-- > 0;) {
        sv c = content(&m[k]);
        if (role_is(&m[k], "user") &&
            !(sv_starts(c, "<tool_response>") && sv_ends(c, "</tool_response>"))) {
            last_query = k;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (role_is(&m[i], "user") || (role_is(&m[i], "system") && i > 0)) {
            chatml_turn(b, m[i].role, content(&m[i]));
        } else if (role_is(&m[i], "assistant")) {
            sv c = content(&m[i]), reasoning = {"", 0};
            if (m[i].reasoning_content) {
                reasoning = sv_of(m[i].reasoning_content);
            } else if (sv_find(c, "</think>")) {
                /* content.split('</think>')[-1].lstrip('\n') */
                const char *last = sv_rfind(c, "</think>") + strlen("</think>");
                sv after = lstrip_nl((sv){last, (size_t)(c.p + c.n - last)});
                /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
                sv before = rstrip_nl((sv){c.p, (size_t)(sv_find(c, "</think>") - c.p)});
                const char *open = sv_rfind(before, "<think>");
                if (open) {
                    open += strlen("<think>");
                    before = (sv){open, (size_t)(before.p + before.n - open)};
                }
                reasoning = lstrip_nl(before);
                c = after;
            }
            if (i > last_query && (i + 1 == n || reasoning.n > 0)) {
                put(b, "<|im_start|>assistant\n<think>\n");
                put_sv(b, rstrip_nl(lstrip_nl(reasoning)));
                put(b, "\n</think>\n\n");
                put_sv(b, lstrip_nl(c));
            } else {
                put(b, "<|im_start|>assistant\n");
                put_sv(b, c);
            }
            for (size_t j = 0; j < m[i].n_tool_calls; j++) {
                if (j > 0 || c.n > 0)
                    put(b, "\n");
                qwen_tool_call(b, &m[i].tool_calls[j]);
            }
            put(b, "<|im_end|>\n");
        } else if (role_is(&m[i], "tool")) {
            qwen_tool(b, m, n, i);
        }
    }
    if (gen) {
        put(b, "<|im_start|>assistant\n");
        if (o->disable_thinking)
            put(b, "<think>\n\n</think>\n\n");
    }
}

static void llama3_header(sbuf *b, const char *role)
{
    put(b, "<|start_header_id|>");
    put(b, role);
    put(b, "<|end_header_id|>\n\n");
}

/* strftime_now("%d %b %Y") in the C locale's month names, local time. */
static void today_string(char out[16])
{
    static const char *const mon[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !localtime_r(&now, &tm) || tm.tm_mon < 0 || tm.tm_mon > 11) {
        snprintf(out, 16, "26 Jul 2024");
        return;
    }
    snprintf(out, 16, "%02d %s %04d", tm.tm_mday % 100, mon[tm.tm_mon],
             (tm.tm_year + 1900) % 10000);
}

/* Llama 3.1/3.2/3.3 without tools: a system turn always (dates, then the trimmed system
 * message), trimmed turns, tool results as ipython turns holding content|tojson. The date is
 * opts->date_string, else today for templates that call strftime_now (3.2, 3.3; as
 * transformers and llama.cpp render them), else the templates' "26 Jul 2024". */
static void render_llama3(sbuf *b, const pti_chat_template *t, const pti_chat_message *m, size_t n,
                          bool gen, const pti_chat_opts *o)
{
    char today[16];
    const char *date = o->date_string;
    if (!date && t->llama3_today) {
        today_string(today);
        date = today;
    }
    put(b, o->bos_token);
    sv system = {"", 0};
    size_t first = 0;
    if (n > 0 && role_is(&m[0], "system")) {
        system = py_strip(content(&m[0]));
        first = 1;
    }
    llama3_header(b, "system");
    put(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
    put(b, date ? date : "26 Jul 2024");
    put(b, "\n\n");
    put_sv(b, system);
    put(b, "<|eot_id|>");
    for (size_t i = first; i < n; i++) {
        bool tool = role_is(&m[i], "tool") || role_is(&m[i], "ipython");
        if (!tool && m[i].n_tool_calls == 0) {
            llama3_header(b, m[i].role);
            put_sv(b, py_strip(content(&m[i])));
            put(b, "<|eot_id|>");
        } else if (m[i].n_tool_calls > 0) {
            if (m[i].n_tool_calls != 1) {
                tmpl_raise(b, "This model only supports single tool-calls at once!");
                return;
            }
            llama3_header(b, "assistant");
            put(b, "{\"name\": \"");
            put(b, m[i].tool_calls[0].name);
            put(b, "\", \"parameters\": ");
            put(b, m[i].tool_calls[0].arguments);
            put(b, "}<|eot_id|>");
        } else {
            llama3_header(b, "ipython");
            put_json_str(b, content(&m[i])); /* a string "is iterable": tojson quotes it */
            put(b, "<|eot_id|>");
        }
    }
    if (gen)
        llama3_header(b, "assistant");
}

/* Llama 3.0: bos_token before the first turn, every turn trimmed, no system header. */
static void render_llama30(sbuf *b, const pti_chat_message *m, size_t n, bool gen,
                           const pti_chat_opts *o)
{
    for (size_t i = 0; i < n; i++) {
        if (i == 0)
            put(b, o->bos_token);
        llama3_header(b, m[i].role);
        put_sv(b, py_strip(content(&m[i])));
        put(b, "<|eot_id|>");
    }
    if (gen)
        llama3_header(b, "assistant");
}

/* Mistral v0.3: the system message goes into the last user turn (only if the conversation
 * ends with one); user turns are not trimmed, assistant turns are. */
static void render_mistral(sbuf *b, const pti_chat_message *m, size_t n, const pti_chat_opts *o)
{
    const pti_chat_message *system = NULL;
    size_t first = 0;
    if (n > 0 && role_is(&m[0], "system")) {
        system = &m[0];
        first = 1;
    }
    size_t idx = 0;
    for (size_t i = first; i < n; i++) {
        if (role_is(&m[i], "tool") || role_is(&m[i], "tool_results") || m[i].n_tool_calls > 0)
            continue;
        if (role_is(&m[i], "user") != (idx % 2 == 0)) {
            tmpl_raise(b, "After the optional system message, conversation roles must alternate "
                          "user/assistant/user/assistant/...");
            return;
        }
        idx++;
    }
    put(b, o->bos_token);
    for (size_t i = first; i < n; i++) {
        if (role_is(&m[i], "user")) {
            put(b, "[INST] ");
            if (i + 1 == n && system) {
                put_sv(b, content(system));
                put(b, "\n\n");
            }
            put_sv(b, content(&m[i]));
            put(b, "[/INST]");
        } else if (m[i].n_tool_calls > 0) {
            put(b, "[TOOL_CALLS] [");
            for (size_t j = 0; j < m[i].n_tool_calls; j++) {
                const pti_chat_tool_call *tc = &m[i].tool_calls[j];
                if (!tc->id || strlen(tc->id) != 9) {
                    tmpl_raise(b, "Tool call IDs should be alphanumeric strings with length 9!");
                    return;
                }
                put(b, "{\"name\": ");
                put_json_str(b, sv_of(tc->name));
                put(b, ", \"arguments\": ");
                put(b, tc->arguments);
                put(b, ", \"id\": \"");
                put(b, tc->id);
                put(b, "\"}");
                put(b, j + 1 < m[i].n_tool_calls ? ", " : "]");
            }
            put(b, o->eos_token);
        } else if (role_is(&m[i], "assistant")) {
            put(b, " ");
            put_sv(b, py_strip(content(&m[i])));
            put(b, o->eos_token);
        } else if (role_is(&m[i], "tool") || role_is(&m[i], "tool_results")) {
            put(b, "[TOOL_RESULTS] {\"content\": ");
            put_sv(b, content(&m[i]));
            put(b, ", ");
            if (!m[i].tool_call_id || strlen(m[i].tool_call_id) != 9) {
                tmpl_raise(b, "Tool call IDs should be alphanumeric strings with length 9!");
                return;
            }
            put(b, "\"call_id\": \"");
            put(b, m[i].tool_call_id);
            put(b, "\"}[/TOOL_RESULTS]");
        } else {
            tmpl_raise(b, "Only user and assistant roles are supported, with the exception of an "
                          "initial optional system message!");
            return;
        }
    }
}

/* Gemma 2/3: the system message (untrimmed, + "\n\n") opens the first turn; 'assistant' is
 * 'model'; turns are trimmed; roles must alternate. */
static void render_gemma(sbuf *b, const pti_chat_message *m, size_t n, bool gen,
                         const pti_chat_opts *o)
{
    put(b, o->bos_token);
    sv prefix = {"", 0};
    size_t first = 0;
    if (n > 0 && role_is(&m[0], "system")) {
        prefix = content(&m[0]);
        first = 1;
    }
    for (size_t i = first; i < n; i++) {
        size_t k = i - first;
        if (role_is(&m[i], "user") != (k % 2 == 0)) {
            tmpl_raise(b, "Conversation roles must alternate user/assistant/user/assistant/...");
            return;
        }
        put(b, "<start_of_turn>");
        put(b, role_is(&m[i], "assistant") ? "model" : m[i].role);
        put(b, "\n");
        if (k == 0 && first == 1) {
            put_sv(b, prefix);
            put(b, "\n\n");
        }
        put_sv(b, py_strip(content(&m[i])));
        put(b, "<end_of_turn>\n");
    }
    if (gen)
        put(b, "<start_of_turn>model\n");
}

/* Phi-3/3.5: untrimmed turns; tool and other roles are dropped; eos_token ends a
 * conversation rendered without a generation prompt. */
static void render_phi3(sbuf *b, const pti_chat_template *t, const pti_chat_message *m, size_t n,
                        bool gen, const pti_chat_opts *o)
{
    for (size_t i = 0; i < n; i++) {
        const char *tag = NULL;
        if (role_is(&m[i], "system") && (content(&m[i]).n > 0 || t->phi3_keep_empty_system))
            tag = "<|system|>\n";
        else if (role_is(&m[i], "user"))
            tag = "<|user|>\n";
        else if (role_is(&m[i], "assistant"))
            tag = "<|assistant|>\n";
        if (!tag)
            continue;
        put(b, tag);
        put_sv(b, content(&m[i]));
        put(b, "<|end|>\n");
    }
    put(b, gen ? "<|assistant|>\n" : o->eos_token);
}

#define DS_EOS                                                                                     \
    "<\xef\xbd\x9c"                                                                                \
    "end\xe2\x96\x81"                                                                              \
    "of\xe2\x96\x81"                                                                               \
    "sentence\xef\xbd\x9c>"
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT                                                                               \
    "<\xef\xbd\x9c"                                                                                \
    "Assistant\xef\xbd\x9c>"
#define DS_FW "\xef\xbd\x9c" /* U+FF5C FULLWIDTH VERTICAL LINE */
#define DS_SP "\xe2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK */

/* DeepSeek-R1 distills: bos, the (last) system prompt, then User/Assistant turns; an
 * assistant turn keeps only the text after its last </think>. The early template was written
 * on several lines, and the newlines after its {{bos_token}}, the tool outputs' end and the
 * generation prompt are output; the 2025 one is a single line whose prompt opens <think>. */
static void render_deepseek_r1(sbuf *b, const pti_chat_template *t, const pti_chat_message *m,
                               size_t n, bool gen, const pti_chat_opts *o)
{
    const char *nl = t->ds_newlines ? "\n" : "";
    sv system = {"", 0};
    for (size_t i = 0; i < n; i++)
        if (role_is(&m[i], "system"))
            system = content(&m[i]);
    put(b, o->bos_token);
    put(b, nl);
    put_sv(b, system);
    bool is_tool = false, is_first = false, output_first = true;
    for (size_t i = 0; i < n; i++) {
        if (role_is(&m[i], "user")) {
            is_tool = false;
            put(b, DS_USER);
            put_sv(b, content(&m[i]));
        }
        if (role_is(&m[i], "assistant") && !m[i].content) {
            is_tool = false;
            for (size_t j = 0; j < m[i].n_tool_calls; j++) {
                const pti_chat_tool_call *tc = &m[i].tool_calls[j];
                if (!is_first)
                    put(b, DS_ASSISTANT "<" DS_FW "tool" DS_SP "calls" DS_SP "begin" DS_FW ">");
                else
                    put(b, "\n");
                put(b, "<" DS_FW "tool" DS_SP "call" DS_SP "begin" DS_FW ">function<" DS_FW
                       "tool" DS_SP "sep" DS_FW ">");
                put(b, tc->name);
                put(b, "\n```json\n");
                put(b, tc->arguments);
                put(b, "\n```<" DS_FW "tool" DS_SP "call" DS_SP "end" DS_FW ">");
                if (is_first)
                    put(b, "\n<" DS_FW "tool" DS_SP "calls" DS_SP "end" DS_FW ">" DS_EOS);
                is_first = true;
            }
        }
        if (role_is(&m[i], "assistant") && m[i].content) {
            if (is_tool) {
                put(b, "<" DS_FW "tool" DS_SP "outputs" DS_SP "end" DS_FW ">");
                put_sv(b, content(&m[i]));
                put(b, DS_EOS);
                is_tool = false;
            } else {
                sv c = content(&m[i]);
                const char *last = sv_rfind(c, "</think>");
                if (last) {
                    last += strlen("</think>");
                    c = (sv){last, (size_t)(c.p + c.n - last)};
                }
                put(b, DS_ASSISTANT);
                put_sv(b, c);
                put(b, DS_EOS);
            }
        }
        if (role_is(&m[i], "tool")) {
            is_tool = true;
            if (output_first)
                put(b, "<" DS_FW "tool" DS_SP "outputs" DS_SP "begin" DS_FW ">");
            else
                put(b, "\n");
            put(b, "<" DS_FW "tool" DS_SP "output" DS_SP "begin" DS_FW ">");
            put_sv(b, content(&m[i]));
            put(b, "<" DS_FW "tool" DS_SP "output" DS_SP "end" DS_FW ">");
            output_first = false;
        }
    }
    if (is_tool) {
        put(b, "<" DS_FW "tool" DS_SP "outputs" DS_SP "end" DS_FW ">");
        put(b, nl);
    }
    if (gen && !is_tool) {
        put(b, DS_ASSISTANT);
        put(b, t->ds_think_prompt ? "<think>\n" : "");
        put(b, nl);
    }
}

/* ---- rendering entry point ------------------------------------------------------------------- */

char *pti_chat_render(const pti_chat_template *t, const pti_chat_message *msgs, size_t n,
                      bool add_generation_prompt, const pti_chat_opts *opts, size_t *out_len)
{
    if (out_len)
        *out_len = 0;
    if (!t)
        return pti_error_null(PT_ERR_NULL, "pti_chat_render: template is NULL");
    if (n > 0 && !msgs)
        return pti_error_null(PT_ERR_NULL, "pti_chat_render: messages is NULL (n = %zu)", n);
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role)
            return pti_error_null(PT_ERR_NULL, "pti_chat_render: message %zu has no role", i);
        for (size_t j = 0; j < msgs[i].n_tool_calls; j++)
            if (!msgs[i].tool_calls || !msgs[i].tool_calls[j].name ||
                !msgs[i].tool_calls[j].arguments)
                return pti_error_null(PT_ERR_NULL,
                                      "pti_chat_render: message %zu: tool call %zu needs a name "
                                      "and arguments",
                                      i, j);
    }
    pti_chat_opts o = opts ? *opts : (pti_chat_opts){0};
    if (!o.bos_token)
        o.bos_token = "";
    if (!o.eos_token)
        o.eos_token = "";
    bool gen = add_generation_prompt;
    sbuf b = {0};
    switch (t->family) {
    case PTI_CHAT_CHATML: render_chatml(&b, t, msgs, n, gen); break;
    case PTI_CHAT_QWEN25: render_qwen25(&b, t, msgs, n, gen); break;
    case PTI_CHAT_QWEN3: render_qwen3(&b, msgs, n, gen, &o); break;
    case PTI_CHAT_LLAMA3: render_llama3(&b, t, msgs, n, gen, &o); break;
    case PTI_CHAT_LLAMA30: render_llama30(&b, msgs, n, gen, &o); break;
    case PTI_CHAT_MISTRAL: render_mistral(&b, msgs, n, &o); break;
    case PTI_CHAT_GEMMA: render_gemma(&b, msgs, n, gen, &o); break;
    case PTI_CHAT_PHI3: render_phi3(&b, t, msgs, n, gen, &o); break;
    case PTI_CHAT_DEEPSEEK_R1: render_deepseek_r1(&b, t, msgs, n, gen, &o); break;
    case PTI_CHAT_PLAIN:
    default: render_plain(&b, msgs, n, gen); break;
    }
    if (b.error) {
        pti_strbuf_free(&b.s);
        return pti_error_null(PT_ERR_INVALID_ARG, "pti_chat_render: %s template: %s",
                              pti_chat_family_name(t->family), b.error);
    }
    size_t len = b.s.len;
    char *text = pti_strbuf_take(&b.s);
    if (!text)
        return pti_error_null(PT_ERR_OOM, "pti_chat_render: out of memory");
    if (out_len)
        *out_len = len;
    return text;
}

/* ---- detection ------------------------------------------------------------------------------- */

static char *dup_n(const char *s, size_t n)
{
    char *d = pti_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* The default system prompt a ChatML template writes as a literal
 * '<|im_start|>system\n<text><|im_end|>' (a real newline or the escape \n), or NULL. */
static char *chatml_default_system(sv tpl)
{
    const char *marker = "<|im_start|>system";
    sv rest = tpl;
    const char *p;
    while ((p = sv_find(rest, marker)) != NULL) {
        p += strlen(marker);
        sv after = {p, (size_t)(rest.p + rest.n - p)};
        rest = after;
        size_t skip = sv_starts(after, "\\n") ? 2 : sv_starts(after, "\n") ? 1 : 0;
        if (skip == 0)
            continue;
        sv text = {after.p + skip, after.n - skip};
        const char *end = sv_find(text, "<|im_end|>");
        if (!end || end == text.p)
            continue;
        size_t len = (size_t)(end - text.p);
        bool literal = true;
        for (size_t i = 0; i < len; i++)
            if (strchr("'\"+{}\\", text.p[i]) || text.p[i] == '\n')
                literal = false;
        if (literal)
            return dup_n(text.p, len);
    }
    return NULL;
}

static pti_chat_template *tmpl_alloc(pti_chat_family f)
{
    pti_chat_template *t = pti_calloc(1, sizeof *t);
    if (!t)
        return pti_error_null(PT_ERR_OOM, "pti_chat_template: out of memory");
    t->family = f;
    return t;
}

static pti_chat_template *tmpl_warn(pti_chat_template *t, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    t->warning = dup_n(msg, strlen(msg));
    if (!t->warning) {
        pti_chat_template_free(t);
        return pti_error_null(PT_ERR_OOM, "pti_chat_template: out of memory");
    }
    return t;
}

pti_chat_template *pti_chat_template_new(pti_chat_family family)
{
    if ((unsigned)family > PTI_CHAT_DEEPSEEK_R1)
        return pti_error_null(PT_ERR_INVALID_ARG, "pti_chat_template_new: unknown family %d",
                              (int)family);
    return tmpl_alloc(family);
}

/* No template in the file: the family of the architecture, when it has only one. */
static pti_chat_template *detect_by_arch(const char *arch)
{
    static const struct {
        const char *arch;
        pti_chat_family family;
    } map[] = {
        {"qwen2", PTI_CHAT_QWEN25}, {"qwen3", PTI_CHAT_QWEN3},  {"gemma", PTI_CHAT_GEMMA},
        {"gemma2", PTI_CHAT_GEMMA}, {"gemma3", PTI_CHAT_GEMMA}, {"phi3", PTI_CHAT_PHI3},
    };
    for (size_t i = 0; arch && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(arch, map[i].arch) == 0)
            return tmpl_alloc(map[i].family);
    pti_chat_template *t =
        tmpl_alloc(arch && strcmp(arch, "llama") == 0 ? PTI_CHAT_CHATML : PTI_CHAT_PLAIN);
    if (!t)
        return NULL;
    return tmpl_warn(t,
                     "no chat template in the file and architecture '%s' has no single "
                     "format; using %s",
                     arch ? arch : "(none)", pti_chat_family_name(t->family));
}

pti_chat_template *pti_chat_template_detect(const char *jinja, size_t len, const char *arch)
{
    if (!jinja || len == 0)
        return detect_by_arch(arch);
    sv s = {jinja, len};
    pti_chat_template *t;
    if (sv_find(s, DS_USER) && sv_find(s, DS_ASSISTANT)) {
        if (!(t = tmpl_alloc(PTI_CHAT_DEEPSEEK_R1)))
            return NULL;
        t->ds_newlines = sv_find(s, "{{bos_token}}\n") != NULL;
        t->ds_think_prompt = sv_find(s, DS_ASSISTANT "<think>") != NULL;
        return t;
    }
    if (sv_find(s, "<|im_start|>")) {
        /* Qwen3 (and other ChatML templates that handle reasoning) */
        if (sv_find(s, "</think>"))
            return tmpl_alloc(PTI_CHAT_QWEN3);
        bool qwen25 = sv_find(s, "<tool_response>") && sv_find(s, "tool_call.arguments");
        if (!(t = tmpl_alloc(qwen25 ? PTI_CHAT_QWEN25 : PTI_CHAT_CHATML)))
            return NULL;
        t->default_system = chatml_default_system(s);
        return t;
    }
    if (sv_find(s, "<|start_header_id|>")) {
        if (!sv_find(s, "Cutting Knowledge Date"))
            return tmpl_alloc(PTI_CHAT_LLAMA30);
        if (!(t = tmpl_alloc(PTI_CHAT_LLAMA3)))
            return NULL;
        t->llama3_today = sv_find(s, "strftime_now") != NULL;
        return t;
    }
    if (sv_find(s, "<start_of_turn>"))
        return tmpl_alloc(PTI_CHAT_GEMMA);
    if (sv_find(s, "<|user|>") && sv_find(s, "<|assistant|>") && sv_find(s, "<|end|>")) {
        if (!(t = tmpl_alloc(PTI_CHAT_PHI3)))
            return NULL;
        t->phi3_keep_empty_system = !sv_find(s, "'system' and message['content']");
        return t;
    }
    if (sv_find(s, "[INST]") && !sv_find(s, "<<SYS>>"))
        return tmpl_alloc(PTI_CHAT_MISTRAL);
    if (!(t = tmpl_alloc(PTI_CHAT_PLAIN)))
        return NULL;
    return tmpl_warn(t,
                     "unrecognized chat template (%zu bytes); using a plain 'role: content' "
                     "format",
                     len);
}

pti_chat_template *pti_chat_template_from_gguf(const pt_gguf *g)
{
    if (!g)
        return pti_error_null(PT_ERR_NULL, "pti_chat_template_from_gguf: file is NULL");
    const char *tpl = NULL, *arch = NULL;
    size_t tpl_len = 0;
    int64_t k = pt_gguf_find_key(g, "tokenizer.chat_template");
    if (k >= 0 && pt_gguf_kv_type(g, k) == PT_GGUF_STRING)
        tpl = pt_gguf_get_str(g, k, &tpl_len);
    k = pt_gguf_find_key(g, "general.architecture");
    char arch_buf[64] = "";
    if (k >= 0 && pt_gguf_kv_type(g, k) == PT_GGUF_STRING) {
        size_t n = 0;
        const char *a = pt_gguf_get_str(g, k, &n);
        if (a && n < sizeof arch_buf) {
            memcpy(arch_buf, a, n);
            arch_buf[n] = '\0';
            arch = arch_buf;
        }
    }
    return pti_chat_template_detect(tpl, tpl ? tpl_len : 0, arch);
}

void pti_chat_template_free(pti_chat_template *t)
{
    if (!t)
        return;
    free(t->default_system);
    free(t->warning);
    free(t);
}

pti_chat_family pti_chat_template_family(const pti_chat_template *t)
{
    return t ? t->family : PTI_CHAT_PLAIN;
}

const char *pti_chat_template_warning(const pti_chat_template *t)
{
    return t ? t->warning : NULL;
}

const char *pti_chat_family_name(pti_chat_family f)
{
    switch (f) {
    case PTI_CHAT_CHATML: return "chatml";
    case PTI_CHAT_QWEN25: return "qwen2.5";
    case PTI_CHAT_QWEN3: return "qwen3";
    case PTI_CHAT_LLAMA3: return "llama3";
    case PTI_CHAT_LLAMA30: return "llama3.0";
    case PTI_CHAT_MISTRAL: return "mistral";
    case PTI_CHAT_GEMMA: return "gemma";
    case PTI_CHAT_PHI3: return "phi3";
    case PTI_CHAT_DEEPSEEK_R1: return "deepseek-r1";
    case PTI_CHAT_PLAIN: return "plain";
    }
    return "plain";
}

/* ---- stop strings ---------------------------------------------------------------------------- */

static const char *const STOP_CHATML[] = {"<|im_end|>", "<|im_start|>", "<|endoftext|>", NULL};
static const char *const STOP_LLAMA3[] = {"<|eot_id|>", "<|start_header_id|>", "<|eom_id|>",
                                          "<|end_of_text|>", NULL};
static const char *const STOP_MISTRAL[] = {"</s>", "[INST]", NULL};
static const char *const STOP_GEMMA[] = {"<end_of_turn>", "<start_of_turn>", "<eos>", NULL};
static const char *const STOP_PHI3[] = {"<|end|>", "<|user|>", "<|system|>", "<|endoftext|>", NULL};
static const char *const STOP_DEEPSEEK[] = {DS_EOS, DS_USER, NULL};
static const char *const STOP_PLAIN[] = {"\nuser:", "\nsystem:", NULL};

const char *const *pti_chat_stop_strings(pti_chat_family f, size_t *n)
{
    const char *const *s;
    switch (f) {
    case PTI_CHAT_CHATML:
    case PTI_CHAT_QWEN25:
    case PTI_CHAT_QWEN3: s = STOP_CHATML; break;
    case PTI_CHAT_LLAMA3:
    case PTI_CHAT_LLAMA30: s = STOP_LLAMA3; break;
    case PTI_CHAT_MISTRAL: s = STOP_MISTRAL; break;
    case PTI_CHAT_GEMMA: s = STOP_GEMMA; break;
    case PTI_CHAT_PHI3: s = STOP_PHI3; break;
    case PTI_CHAT_DEEPSEEK_R1: s = STOP_DEEPSEEK; break;
    case PTI_CHAT_PLAIN:
    default: s = STOP_PLAIN; break;
    }
    if (n) {
        size_t k = 0;
        while (s[k])
            k++;
        *n = k;
    }
    return s;
}

const char *pti_chat_end_of_turn(pti_chat_family f)
{
    return f == PTI_CHAT_PLAIN ? NULL : pti_chat_stop_strings(f, NULL)[0];
}
