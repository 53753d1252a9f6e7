/* JSON syntax errors in Go's words: cJSON only says where it stopped, while clients of Ollama
 * see encoding/json's messages, so a body cJSON refused is scanned again by this small checker
 * to name the problem and its offset ("invalid character 'x' looking for beginning of value").
 * Declared in serve_internal.h. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/utf8.h"

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

/* ---- reading strings as Go does ---------------------------------------------------------------
 * cJSON differs from encoding/json on three points that hostile clients can use: it keeps bytes
 * that are not UTF-8 (and echoes them back), it ends a string at an escaped NUL ("victim\u0000
 * x" reads as "victim"), and it handles lone surrogate escapes its own way. The body is
 * rewritten before cJSON sees it. */

static unsigned hex4(const char *p)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v = v * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
}

static bool needs_normalize(const char *b, size_t n)
{
    return pti_utf8_invalid_at(b, n) != n || memmem(b, n, "\\u", 2) != NULL;
}

/* One escape at b[i] ('\\') inside a string, written to out; returns the bytes consumed. The
 * body passed the syntax check, so an escape is complete. */
static size_t normalize_escape(const char *b, size_t i, size_t n, char *out, size_t *o)
{
    static const char fffd[] = "\\ufffd";
    if (b[i + 1] != 'u') {
        memcpy(out + *o, b + i, 2);
        *o += 2;
        return 2;
    }
    unsigned cp = hex4(b + i + 2);
    if (cp >= 0xD800 && cp <= 0xDBFF && i + 12 <= n && b[i + 6] == '\\' && b[i + 7] == 'u') {
        unsigned lo = hex4(b + i + 8);
        if (lo >= 0xDC00 && lo <= 0xDFFF) { /* a pair: cJSON decodes it right */
            memcpy(out + *o, b + i, 12);
            *o += 12;
            return 12;
        }
    }
    bool bad = cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF);
    memcpy(out + *o, bad ? fffd : b + i, 6);
    *o += 6;
    return 6;
}

char *ps_json_normalize(const char *b, size_t n, size_t *out_n)
{
    if (!needs_normalize(b, n) || n > (SIZE_MAX - 1) / 3)
        return NULL;
    char *out = pti_malloc(n * 3 + 1); /* a bad byte grows to 3; escapes keep their length */
    if (!out)
        return NULL;
    size_t o = 0;
    bool in_string = false;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)b[i];
        if (in_string && c == '\\') {
            i += normalize_escape(b, i, n, out, &o);
            continue;
        }
        if (c == '"')
            in_string = !in_string;
        size_t k = c < 0x80 ? 1 : pti_utf8_char_len((const uint8_t *)b + i, n - i);
        if (k == 0) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, b + i, k);
            o += k;
            i += k;
        }
    }
    out[o] = '\0';
    *out_n = o;
    return out;
}

typedef struct keyed {
    cJSON *item;
    size_t index;
} keyed;

static int keyed_cmp(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->item->string, y->item->string);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Removes the members of object o that a later one of the same name overrides: sorted by
 * (name, position), all but the last of each run go (n log n: a hostile body may hold
 * hundreds of thousands of keys). */
static void dedupe_object(cJSON *o)
{
    size_t n = 0;
    for (cJSON *c = o->child; c; c = c->next)
        n++;
    if (n < 2)
        return;
    keyed *v = pti_malloc(n * sizeof *v);
    if (!v)
        return; /* out of memory: the first stays the one found */
    size_t i = 0;
    for (cJSON *c = o->child; c; c = c->next, i++)
        v[i] = (keyed){c, i};
    qsort(v, n, sizeof *v, keyed_cmp);
    for (i = 0; i + 1 < n; i++)
        if (!strcmp(v[i].item->string, v[i + 1].item->string))
            cJSON_Delete(cJSON_DetachItemViaPointer(o, v[i].item));
    free(v);
}

void ps_json_last_key_wins(cJSON *j)
{
    if (!j)
        return;
    if (cJSON_IsObject(j))
        dedupe_object(j);
    for (cJSON *c = j->child; c; c = c->next)
        if (cJSON_IsObject(c) || cJSON_IsArray(c))
            ps_json_last_key_wins(c);
}

static bool name_text_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xEF && p[1] == 0xBF && p[2] == 0xBD))
            return false;
    return true;
}

bool ps_json_names_ok(const cJSON *j, const char **bad_key)
{
    static const char *const keys[] = {"model", "name", "source", "destination", "from"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, keys[i]);
        if (cJSON_IsString(v) && !name_text_ok(v->valuestring)) {
            *bad_key = keys[i];
            return false;
        }
    }
    return true;
}
