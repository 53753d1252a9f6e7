/* JSON syntax errors in Go's words: cJSON only says where it stopped, while clients of Ollama
 * see encoding/json's messages, so a body cJSON refused is scanned again by this small checker
 * to name the problem and its offset ("invalid character 'x' looking for beginning of value").
 * Declared in serve_internal.h. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "serve_internal.h"

typedef struct jscan {
    const char *p, *end, *start;
    int depth;
    char msg[160];
} jscan;

static bool js_fail(jscan *j, const char *context)
{
    if (j->p >= j->end) {
        snprintf(j->msg, sizeof j->msg, "unexpected end of JSON input");
        return false;
    }
    unsigned char c = (unsigned char)*j->p;
    char shown[8];
    if (c == '\'')
        snprintf(shown, sizeof shown, "'\\''");
    else if (c >= 0x20 && c < 0x7f)
        snprintf(shown, sizeof shown, "'%c'", c);
    else
        snprintf(shown, sizeof shown, "'\\x%02x'", c);
    snprintf(j->msg, sizeof j->msg, "invalid character %s %s (offset %zu)", shown, context,
             (size_t)(j->p - j->start));
    return false;
}

static void js_space(jscan *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static bool js_value(jscan *j);

static bool js_string(jscan *j)
{
    j->p++; /* the opening quote */
    while (j->p < j->end) {
        unsigned char c = (unsigned char)*j->p;
        if (c == '"') {
            j->p++;
            return true;
        }
        if (c < 0x20)
            return js_fail(j, "in string literal");
        if (c == '\\') {
            j->p++;
            if (j->p >= j->end)
                break;
            if (*j->p == 'u') {
                for (int i = 1; i <= 4; i++) {
                    if (j->p + i >= j->end) {
                        j->p = j->end;
                        return js_fail(j, "");
                    }
                    if (!isxdigit((unsigned char)j->p[i])) {
                        j->p += i;
                        return js_fail(j, "in \\u hexadecimal character escape");
                    }
                }
                j->p += 4;
            } else if (!strchr("\"\\/bfnrt", *j->p) || !*j->p) {
                return js_fail(j, "in string escape code");
            }
        }
        j->p++;
    }
    return js_fail(j, "");
}

static bool js_number(jscan *j)
{
    if (*j->p == '-')
        j->p++;
    if (j->p >= j->end || !isdigit((unsigned char)*j->p))
        return js_fail(j, "in numeric literal");
    if (*j->p == '0')
        j->p++;
    else
        while (j->p < j->end && isdigit((unsigned char)*j->p))
            j->p++;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (j->p >= j->end || !isdigit((unsigned char)*j->p))
            return js_fail(j, "after decimal point in numeric literal");
        while (j->p < j->end && isdigit((unsigned char)*j->p))
            j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (j->p >= j->end || !isdigit((unsigned char)*j->p))
            return js_fail(j, "in exponent of numeric literal");
        while (j->p < j->end && isdigit((unsigned char)*j->p))
            j->p++;
    }
    return true;
}

static bool js_literal(jscan *j, const char *word)
{
    for (size_t i = 0; word[i]; i++, j->p++) {
        if (j->p >= j->end || *j->p != word[i]) {
            char ctx[64];
            snprintf(ctx, sizeof ctx, "in literal %s (expecting '%c')", word, word[i]);
            return js_fail(j, ctx);
        }
    }
    return true;
}

static bool js_container(jscan *j, bool object)
{
    if (++j->depth > 1000) {
        snprintf(j->msg, sizeof j->msg, "exceeded max depth (offset %zu)",
                 (size_t)(j->p - j->start));
        return false;
    }
    char close = object ? '}' : ']';
    j->p++;
    js_space(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        j->depth--;
        return true;
    }
    for (;;) {
        js_space(j);
        if (object) {
            if (j->p >= j->end || *j->p != '"')
                return js_fail(j, "looking for beginning of object key string");
            if (!js_string(j))
                return false;
            js_space(j);
            if (j->p >= j->end || *j->p != ':')
                return js_fail(j, "after object key");
            j->p++;
        }
        if (!js_value(j))
            return false;
        js_space(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == close) {
            j->p++;
            j->depth--;
            return true;
        }
        return js_fail(j, object ? "after object key:value pair" : "after array element");
    }
}

static bool js_value(jscan *j)
{
    js_space(j);
    if (j->p >= j->end)
        return js_fail(j, "");
    switch (*j->p) {
    case '{': return js_container(j, true);
    case '[': return js_container(j, false);
    case '"': return js_string(j);
    case 't': return js_literal(j, "true");
    case 'f': return js_literal(j, "false");
    case 'n': return js_literal(j, "null");
    default:
        if (*j->p == '-' || isdigit((unsigned char)*j->p))
            return js_number(j);
        return js_fail(j, "looking for beginning of value");
    }
}

bool ps_json_syntax_ok(const char *b, size_t n, char *msg, size_t cap)
{
    jscan j = {.p = b, .end = b + n, .start = b};
    if (js_value(&j)) {
        js_space(&j);
        if (j.p >= j.end)
            return true;
        js_fail(&j, "after top-level value");
    }
    snprintf(msg, cap, "%s", j.msg);
    return false;
}
