/* Python-repr-like rendering of value trees (pt_value_to_string): str/bytes quoted and escaped
 * as Python's repr does, floats in Python's shortest round-trip form, True/False/None,
 * one-item tuples with a trailing comma, tensors as their dtype and shape only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/strbuf.h"
#include "value_internal.h"

/* Python's float repr: the shortest digits that round-trip, fixed notation for decimal
 * exponents in [-4, 16), else d.ddde+XX. */
static void put_float(pti_strbuf *b, double f)
{
    if (isnan(f)) {
        pti_strbuf_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        pti_strbuf_puts(b, f > 0 ? "inf" : "-inf");
        return;
    }
    char e_form[40];
    for (int prec = 0; prec <= 16; prec++) {
        snprintf(e_form, sizeof e_form, "%.*e", prec, f);
        if (strtod(e_form, NULL) == f)
            break;
    }
    /* e_form: [-]D[.DDD]e[+-]XX */
    char digits[24] = {0};
    size_t nd = 0;
    const char *s = e_form;
    bool neg = *s == '-';
    if (neg)
        s++;
    for (; *s && *s != 'e'; s++)
        if (*s != '.')
            digits[nd++] = *s;
    int exp = atoi(s + 1);
    char out[64];
    size_t n = 0;
    if (neg)
        out[n++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out[n++] = '0';
            out[n++] = '.';
            for (int z = 0; z < -exp - 1; z++)
                out[n++] = '0';
            memcpy(out + n, digits, nd);
            n += nd;
        } else {
            for (int k = 0; k <= exp; k++)
                out[n++] = k < (int)nd ? digits[k] : '0';
            out[n++] = '.';
            if ((int)nd > exp + 1) {
                memcpy(out + n, digits + exp + 1, nd - (size_t)exp - 1);
                n += nd - (size_t)exp - 1;
            } else {
                out[n++] = '0';
            }
        }
        pti_strbuf_put(b, out, n);
    } else {
        out[n++] = digits[0];
        if (nd > 1) {
            out[n++] = '.';
            memcpy(out + n, digits + 1, nd - 1);
            n += nd - 1;
        }
        n += (size_t)snprintf(out + n, sizeof out - n, "e%c%02d", exp < 0 ? '-' : '+',
                              exp < 0 ? -exp : exp);
        pti_strbuf_put(b, out, n);
    }
}

/* Python picks single quotes unless the text has ' and no ". */
static char pick_quote(const char *s, size_t len)
{
    bool single = memchr(s, '\'', len) != NULL, dbl = memchr(s, '"', len) != NULL;
    return single && !dbl ? '"' : '\'';
}

/* Escapes one byte; str passes bytes >= 0x80 through (UTF-8) except the C1 controls,
 * bytes escape every non-ASCII byte. Returns how many input bytes were consumed. */
static size_t put_escaped(pti_strbuf *b, const unsigned char *s, size_t left, char quote,
                          bool is_str)
{
    char tmp[8];
    unsigned char c = s[0];
    if (c == '\\' || c == (unsigned char)quote) {
        tmp[0] = '\\';
        tmp[1] = (char)c;
        pti_strbuf_put(b, tmp, 2);
    } else if (c == '\n' || c == '\r' || c == '\t') {
        pti_strbuf_puts(b, c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t");
    } else if (c >= 0x20 && c < 0x7f) {
        pti_strbuf_put(b, (const char *)s, 1);
    } else if (is_str && c == 0xc2 && left > 1 && s[1] >= 0x80 && s[1] < 0xa0) {
        snprintf(tmp, sizeof tmp, "\\x%02x", s[1]); /* U+0080..U+009F */
        pti_strbuf_puts(b, tmp);
        return 2;
    } else if (is_str && c >= 0x80) {
        pti_strbuf_put(b, (const char *)s, 1);
    } else {
        snprintf(tmp, sizeof tmp, "\\x%02x", c);
        pti_strbuf_puts(b, tmp);
    }
    return 1;
}

static void put_quoted(pti_strbuf *b, const pt_value *v)
{
    bool is_str = v->kind == PT_VALUE_STR;
    char quote = pick_quote(v->u.s.data, v->u.s.len);
    if (!is_str)
        pti_strbuf_puts(b, "b");
    pti_strbuf_put(b, &quote, 1);
    const unsigned char *s = (const unsigned char *)v->u.s.data;
    for (size_t k = 0; k < v->u.s.len;)
        k += put_escaped(b, s + k, v->u.s.len - k, quote, is_str);
    pti_strbuf_put(b, &quote, 1);
}

static void put_tensor(pti_strbuf *b, const pt_tensor *t)
{
    pti_strbuf_puts(b, "tensor(");
    pti_strbuf_puts(b, pt_dtype_name(t->dtype));
    pti_strbuf_puts(b, ", ");
    pti_strbuf_puts(b, pti_shape_str(t->ndim, t->shape));
    pti_strbuf_puts(b, ")");
}

static void put_value(pti_strbuf *b, const pt_value *v, int max_items, int depth);

static void put_seq(pti_strbuf *b, const pt_value *v, int max_items, int depth)
{
    bool tuple = v->kind == PT_VALUE_TUPLE;
    int64_t n = v->u.seq.len;
    int64_t shown = max_items > 0 && n > max_items ? max_items : n;
    pti_strbuf_puts(b, tuple ? "(" : "[");
    for (int64_t k = 0; k < shown && pti_strbuf_ok(b); k++) {
        if (k)
            pti_strbuf_puts(b, ", ");
        put_value(b, v->u.seq.items[k], max_items, depth + 1);
    }
    if (shown < n)
        pti_strbuf_puts(b, ", ...");
    if (tuple && n == 1)
        pti_strbuf_puts(b, ",");
    pti_strbuf_puts(b, tuple ? ")" : "]");
}

static void put_dict(pti_strbuf *b, const pt_value *v, int max_items, int depth)
{
    int64_t n = v->u.dict.len;
    int64_t shown = max_items > 0 && n > max_items ? max_items : n;
    pti_strbuf_puts(b, "{");
    for (int64_t k = 0; k < shown && pti_strbuf_ok(b); k++) {
        if (k)
            pti_strbuf_puts(b, ", ");
        put_value(b, v->u.dict.entries[k].key, max_items, depth + 1);
        pti_strbuf_puts(b, ": ");
        put_value(b, v->u.dict.entries[k].val, max_items, depth + 1);
    }
    if (shown < n)
        pti_strbuf_puts(b, ", ...");
    pti_strbuf_puts(b, "}");
}

static void put_value(pti_strbuf *b, const pt_value *v, int max_items, int depth)
{
    char num[32];
    if (!pti_strbuf_ok(b))
        return;
    if (depth > PTI_VALUE_MAX_DEPTH) {
        pti_error(PT_ERR_INVALID_ARG, "pt_value_to_string: value nested deeper than %d levels",
                  PTI_VALUE_MAX_DEPTH);
        b->too_big = true; /* stops the output; the error is set */
        return;
    }
    if (v->kind == PTI_VALUE_GLOBAL) { /* only inside the pickle reader (value_internal.h) */
        pti_strbuf_puts(b, "<global ");
        pti_strbuf_put(b, v->u.s.data, v->u.s.len);
        pti_strbuf_puts(b, ">");
        return;
    }
    switch (v->kind) {
    case PT_VALUE_NONE: pti_strbuf_puts(b, "None"); break;
    case PT_VALUE_BOOL: pti_strbuf_puts(b, v->u.b ? "True" : "False"); break;
    case PT_VALUE_INT:
        snprintf(num, sizeof num, "%lld", (long long)v->u.i);
        pti_strbuf_puts(b, num);
        break;
    case PT_VALUE_FLOAT: put_float(b, v->u.f); break;
    case PT_VALUE_STR:
    case PT_VALUE_BYTES: put_quoted(b, v); break;
    case PT_VALUE_TENSOR: put_tensor(b, v->u.t); break;
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE: put_seq(b, v, max_items, depth); break;
    case PT_VALUE_DICT: put_dict(b, v, max_items, depth); break;
    }
}

char *pt_value_to_string(const pt_value *v, int max_items)
{
    if (!v)
        return (pti_null_arg("pt_value_to_string", "v"), NULL);
    pti_strbuf b = {0};
    put_value(&b, v, max_items, 0);
    char *s = pti_strbuf_take(&b); /* "" for nothing written */
    if (!s && b.oom)
        pti_error(PT_ERR_OOM, "pt_value_to_string: out of memory");
    return s;
}

const char *pti_value_key_desc(const pt_value *key)
{
    static _Thread_local char desc[256];
    pt_status st = pt_last_status();
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", pt_last_error());
    char *s = pt_value_to_string(key, 8);
    if (s) {
        size_t n = strlen(s);
        if (n >= sizeof desc)
            snprintf(desc, sizeof desc, "%.*s...", (int)sizeof desc - 4, s);
        else
            memcpy(desc, s, n + 1);
        free(s);
    } else {
        snprintf(desc, sizeof desc, "<%s>", pt_value_kind_name(key->kind));
        pti_error(st, "%s", saved); /* keep the caller's error state */
    }
    return desc;
}
