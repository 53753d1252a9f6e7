/* Executor of the Go text/template subset (go_template.h): walks the parse tree of
 * go_template_impl.h over cJSON data with Go's semantics — truthiness, variables and their
 * scopes, range over arrays/maps/integers, the builtin functions (and/or short-circuit, eq
 * and friends on basic kinds, index, slice, len, print/printf) and Ollama's json,
 * currentDate, yesterdayDate and toTypeScriptType — printing values as Go's fmt %v does.
 * Strings made during execution live in an arena freed when execution ends. */
#include "go_template_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/internal.h"
#include "../../core/strbuf.h"

#define GT_MAX_OUTPUT ((size_t)64 << 20)
/* Bounds on one execution, so that a template from a request cannot exhaust memory or spin:
 * bytes of strings made during execution, and nodes walked plus range iterations. */
#define GT_MAX_SCRATCH ((size_t)64 << 20)
#define GT_MAX_STEPS 20000000L

typedef enum vkind { V_MISSING, V_NIL, V_BOOL, V_INT, V_FLOAT, V_STR, V_ARR, V_OBJ } vkind;

/* A value: scalars inline, strings as (s, n) views, arrays as views (j, off, n) of a cJSON
 * array, objects as a cJSON object. Nothing is owned: views point into the data, the
 * template or the execution arena. */
typedef struct val {
    vkind k;
    bool b;
    long long i;
    double f;
    const char *s;
    size_t n, off;
    const cJSON *j;
} val;

typedef struct var {
    const char *name;
    val v;
} var;

typedef enum walk_st { W_OK, W_BREAK, W_CONTINUE, W_ERR } walk_st;

typedef struct ex {
    int cut;
    gt_arena tmp;
    size_t scratch; /* bytes taken from tmp */
    long steps;
    pti_strbuf out; /* bounded by GT_MAX_OUTPUT like every buffer here */
    var *vars;
    int nvars, capvars;
    int line;
    bool failed;
} ex;

/* ---- errors and buffers --------------------------------------------------------------------- */

static bool exfail(ex *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool exfail(ex *e, const char *fmt, ...)
{
    if (e->failed)
        return false;
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    e->failed = true;
    pti_error(PT_ERR_INVALID_ARG, "template: line %d: %s", e->line, msg);
    return false;
}

static bool oom(ex *e)
{
    if (!e->failed) {
        e->failed = true;
        pti_error(PT_ERR_OOM, "template: out of memory");
    }
    return false;
}

/* Scratch memory for this execution, within GT_MAX_SCRATCH. */
static void *ex_alloc(ex *e, size_t n)
{
    if (n > GT_MAX_SCRATCH - e->scratch) {
        exfail(e, "template execution needs more than %zu MiB", GT_MAX_SCRATCH >> 20);
        return NULL;
    }
    e->scratch += n;
    void *p = gt_arena_alloc(&e->tmp, n);
    if (!p)
        oom(e);
    return p;
}

static char *ex_strndup(ex *e, const char *s, size_t n)
{
    char *d = ex_alloc(e, n + 1);
    if (d && n)
        memcpy(d, s, n);
    return d;
}

/* Counts one step; false (with an error) past GT_MAX_STEPS. */
static bool ex_step(ex *e)
{
    if (++e->steps > GT_MAX_STEPS)
        return exfail(e, "template execution exceeds %ld steps", GT_MAX_STEPS);
    return true;
}

static bool buf_ok(ex *e, pti_strbuf *b)
{
    if (b->oom)
        return oom(e);
    if (b->too_big)
        return exfail(e, "output exceeds %zu MiB", GT_MAX_OUTPUT >> 20);
    return true;
}

/* Moves a scratch buffer into the arena as a string value. */
static bool buf_to_val(ex *e, pti_strbuf *b, val *out)
{
    if (!buf_ok(e, b)) {
        pti_strbuf_free(b);
        return false;
    }
    char *s = ex_strndup(e, b->data ? b->data : "", b->len);
    size_t n = b->len;
    pti_strbuf_free(b);
    if (!s)
        return false;
    *out = (val){.k = V_STR, .s = s, .n = n};
    return true;
}

/* ---- values --------------------------------------------------------------------------------- */

static val from_json(const cJSON *j)
{
    if (!j || cJSON_IsNull(j) || cJSON_IsInvalid(j))
        return (val){.k = V_NIL};
    if (cJSON_IsBool(j))
        return (val){.k = V_BOOL, .b = cJSON_IsTrue(j)};
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9.0e18)
            return (val){.k = V_INT, .i = (long long)d, .f = d};
        return (val){.k = V_FLOAT, .f = d};
    }
    if (cJSON_IsString(j))
        return (val){.k = V_STR,
                     .s = j->valuestring ? j->valuestring : "",
                     .n = j->valuestring ? strlen(j->valuestring) : 0};
    if (cJSON_IsArray(j))
        return (val){.k = V_ARR, .j = j, .n = (size_t)cJSON_GetArraySize(j)};
    return (val){.k = V_OBJ, .j = j};
}

static const cJSON *arr_item(val a, size_t i)
{
    size_t k = a.off + i;
    const cJSON *c = a.j->child;
    while (c && k--)
        c = c->next;
    return c;
}

static bool truth(val v)
{
    switch (v.k) {
    case V_BOOL: return v.b;
    case V_INT: return v.i != 0;
    case V_FLOAT: return v.f != 0;
    case V_STR: return v.n > 0;
    case V_ARR: return v.n > 0;
    case V_OBJ: return v.j->child != NULL;
    default: return false;
    }
}

static const char *type_name(val v)
{
    static const char *const names[] = {
        "<nil>",   "<nil>",  "bool",           "int",
        "float64", "string", "[]interface {}", "map[string]interface {}"};
    return names[v.k];
}

/* Object members sorted by key (Go ranges over and prints maps in key order). */
static int cmp_member(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string ? x->string : "", y->string ? y->string : "");
}

static const cJSON **sorted_members(ex *e, const cJSON *obj, size_t *n)
{
    size_t k = 0;
    for (const cJSON *c = obj->child; c; c = c->next)
        k++;
    const cJSON **m = ex_alloc(e, sizeof *m * (k ? k : 1));
    if (!m)
        return NULL;
    k = 0;
    for (const cJSON *c = obj->child; c; c = c->next)
        m[k++] = c;
    qsort(m, k, sizeof *m, cmp_member);
    *n = k;
    return m;
}

/* ---- number formatting as Go's strconv ------------------------------------------------------ */

/* Shortest decimal digits of |d| that read back as d, and the decimal point position. */
static void shortest_digits(double d, char *digits, int *nd, int *dp)
{
    char tmp[40];
    d = fabs(d);
    if (d == 0) {
        strcpy(digits, "0");
        *nd = 1;
        *dp = 1;
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d || prec == 17)
            break;
    }
    int n = 0;
    const char *c = tmp;
    for (; *c && *c != 'e'; c++)
        if (*c >= '0' && *c <= '9')
            digits[n++] = *c;
    while (n > 1 && digits[n - 1] == '0')
        n--;
    digits[n] = '\0';
    *nd = n;
    *dp = atoi(c + 1) + 1;
}

static void put_e(pti_strbuf *b, const char *dg, int nd, int dp)
{
    pti_strbuf_put(b, dg, 1);
    if (nd > 1) {
        pti_strbuf_put(b, ".", 1);
        pti_strbuf_put(b, dg + 1, (size_t)nd - 1);
    }
    int exp = dp - 1;
    pti_strbuf_printf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
}

static void put_f(pti_strbuf *b, const char *dg, int nd, int dp)
{
    if (dp <= 0) {
        pti_strbuf_puts(b, "0.");
        for (int i = 0; i < -dp; i++)
            pti_strbuf_put(b, "0", 1);
        pti_strbuf_put(b, dg, (size_t)nd);
        return;
    }
    for (int i = 0; i < dp; i++)
        pti_strbuf_put(b, i < nd ? dg + i : "0", 1);
    if (nd > dp) {
        pti_strbuf_put(b, ".", 1);
        pti_strbuf_put(b, dg + dp, (size_t)(nd - dp));
    }
}

/* fmt's %v of a float64: strconv 'g' with the shortest precision. */
static void put_go_float(pti_strbuf *b, double d)
{
    if (isnan(d)) {
        pti_strbuf_puts(b, "NaN");
        return;
    }
    if (isinf(d)) {
        pti_strbuf_puts(b, d > 0 ? "+Inf" : "-Inf");
        return;
    }
    char dg[40];
    int nd, dp;
    shortest_digits(d, dg, &nd, &dp);
    if (signbit(d))
        pti_strbuf_put(b, "-", 1);
    int exp = dp - 1;
    if (exp < -4 || exp >= 6)
        put_e(b, dg, nd, dp);
    else
        put_f(b, dg, nd, dp);
}

/* encoding/json's float64: 'f' shortest unless |d| < 1e-6 or >= 1e21, "e-07" as "e-7". */
static void put_json_float(pti_strbuf *b, double d)
{
    if (!isfinite(d)) {
        pti_strbuf_puts(b, "null");
        return;
    }
    char dg[40];
    int nd, dp;
    shortest_digits(d, dg, &nd, &dp);
    if (signbit(d) && d != 0)
        pti_strbuf_put(b, "-", 1);
    double a = fabs(d);
    if (a != 0 && (a < 1e-6 || a >= 1e21)) {
        pti_strbuf b2 = {.limit = GT_MAX_OUTPUT};
        put_e(&b2, dg, nd, dp);
        if (b2.data) {
            size_t n = b2.len;
            if (n >= 4 && b2.data[n - 4] == 'e' && b2.data[n - 3] == '-' && b2.data[n - 2] == '0') {
                b2.data[n - 2] = b2.data[n - 1];
                n--;
            }
            pti_strbuf_put(b, b2.data, n);
        }
        b->oom |= b2.oom;
        pti_strbuf_free(&b2);
        return;
    }
    put_f(b, dg, nd, dp);
}

/* ---- printing ------------------------------------------------------------------------------- */

static void put_json(pti_strbuf *b, val v);

static void put_json_string(pti_strbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    pti_strbuf_put(b, "\"", 1);
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        size_t len = 1;
        if (c == '"')
            esc = "\\\"";
        else if (c == '\\')
            esc = "\\\\";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\r')
            esc = "\\r";
        else if (c == '\t')
            esc = "\\t";
        else if (c == '\b')
            esc = "\\b";
        else if (c == '\f')
            esc = "\\f";
        else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
            snprintf(u, sizeof u, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
            esc = u;
        } else if (c >= 0x80) {
            /* validate one UTF-8 sequence; invalid bytes become U+FFFD, U+2028/9 escaped */
            size_t need = c >= 0xF0 && c <= 0xF4  ? 4
                          : c >= 0xE0             ? 3
                          : c >= 0xC2 && c < 0xE0 ? 2
                                                  : 0;
            if (c >= 0xF5)
                need = 0;
            bool valid = need && i + need <= n;
            unsigned long cp = valid ? c & (0xFF >> (need + 1)) : 0;
            for (size_t k = 1; valid && k < need; k++) {
                unsigned char cc = (unsigned char)s[i + k];
                valid = (cc & 0xC0) == 0x80;
                cp = (cp << 6) | (cc & 0x3F);
            }
            if (valid && ((need == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
                          (need == 4 && (cp < 0x10000 || cp > 0x10FFFF))))
                valid = false;
            if (!valid)
                esc = "\\ufffd";
            else if (cp == 0x2028 || cp == 0x2029)
                esc = cp == 0x2028 ? "\\u2028" : "\\u2029";
            else
                len = need;
            if (esc)
                len = 1;
            if (!esc) {
                i += len;
                continue;
            }
        }
        if (esc) {
            pti_strbuf_put(b, s + start, i - start);
            pti_strbuf_puts(b, esc);
            i += len;
            start = i;
            continue;
        }
        i++;
    }
    pti_strbuf_put(b, s + start, n - start);
    pti_strbuf_put(b, "\"", 1);
}

static void put_json_array(pti_strbuf *b, val v)
{
    pti_strbuf_put(b, "[", 1);
    size_t i = 0;
    for (const cJSON *c = arr_item(v, 0); c && i < v.n; c = c->next, i++) {
        if (i)
            pti_strbuf_put(b, ",", 1);
        put_json(b, from_json(c));
    }
    pti_strbuf_put(b, "]", 1);
}

static int cmp_member_ptr(const void *a, const void *b)
{
    return cmp_member(a, b);
}

static void put_json_object(pti_strbuf *b, const cJSON *obj)
{
    size_t k = 0;
    for (const cJSON *c = obj->child; c; c = c->next)
        k++;
    const cJSON **m = pti_malloc(sizeof *m * (k ? k : 1));
    if (!m) {
        b->oom = true;
        return;
    }
    k = 0;
    for (const cJSON *c = obj->child; c; c = c->next)
        m[k++] = c;
    qsort(m, k, sizeof *m, cmp_member_ptr);
    pti_strbuf_put(b, "{", 1);
    for (size_t i = 0; i < k; i++) {
        if (i)
            pti_strbuf_put(b, ",", 1);
        const char *key = m[i]->string ? m[i]->string : "";
        put_json_string(b, key, strlen(key));
        pti_strbuf_put(b, ":", 1);
        put_json(b, from_json(m[i]));
    }
    pti_strbuf_put(b, "}", 1);
    free(m);
}

/* Go's json.Marshal; objects and arrays carrying a valuestring print as that text. */
static void put_json(pti_strbuf *b, val v)
{
    switch (v.k) {
    case V_MISSING:
    case V_NIL: pti_strbuf_puts(b, "null"); break;
    case V_BOOL: pti_strbuf_puts(b, v.b ? "true" : "false"); break;
    case V_INT: pti_strbuf_printf(b, "%lld", v.i); break;
    case V_FLOAT: put_json_float(b, v.f); break;
    case V_STR: put_json_string(b, v.s, v.n); break;
    case V_ARR:
        if (v.j->valuestring && v.off == 0 && v.n == (size_t)cJSON_GetArraySize(v.j))
            pti_strbuf_puts(b, v.j->valuestring);
        else
            put_json_array(b, v);
        break;
    case V_OBJ:
        if (v.j->valuestring)
            pti_strbuf_puts(b, v.j->valuestring);
        else
            put_json_object(b, v.j);
        break;
    }
}

/* fmt's %v. top: a missing or nil value at the top of an action prints "<no value>", inside
 * print and containers "<nil>". */
static void put_value(pti_strbuf *b, val v, bool top)
{
    switch (v.k) {
    case V_MISSING:
    case V_NIL: pti_strbuf_puts(b, top ? "<no value>" : "<nil>"); break;
    case V_BOOL: pti_strbuf_puts(b, v.b ? "true" : "false"); break;
    case V_INT: pti_strbuf_printf(b, "%lld", v.i); break;
    case V_FLOAT: put_go_float(b, v.f); break;
    case V_STR: pti_strbuf_put(b, v.s, v.n); break;
    case V_ARR: {
        if (v.j->valuestring) {
            put_json(b, v);
            break;
        }
        pti_strbuf_put(b, "[", 1);
        size_t i = 0;
        for (const cJSON *c = arr_item(v, 0); c && i < v.n; c = c->next, i++) {
            if (i)
                pti_strbuf_put(b, " ", 1);
            put_value(b, from_json(c), false);
        }
        pti_strbuf_put(b, "]", 1);
        break;
    }
    case V_OBJ: {
        if (v.j->valuestring) {
            pti_strbuf_puts(b, v.j->valuestring);
            break;
        }
        size_t k = 0;
        for (const cJSON *c = v.j->child; c; c = c->next)
            k++;
        const cJSON **m = pti_malloc(sizeof *m * (k ? k : 1));
        if (!m) {
            b->oom = true;
            break;
        }
        k = 0;
        for (const cJSON *c = v.j->child; c; c = c->next)
            m[k++] = c;
        qsort(m, k, sizeof *m, cmp_member_ptr);
        pti_strbuf_puts(b, "map[");
        for (size_t i = 0; i < k; i++) {
            if (i)
                pti_strbuf_put(b, " ", 1);
            pti_strbuf_puts(b, m[i]->string ? m[i]->string : "");
            pti_strbuf_put(b, ":", 1);
            put_value(b, from_json(m[i]), false);
        }
        pti_strbuf_put(b, "]", 1);
        free(m);
        break;
    }
    }
}

/* strconv.Quote of a string (printable UTF-8 kept, the rest escaped). */
static void put_go_quoted(pti_strbuf *b, const char *s, size_t n)
{
    pti_strbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': pti_strbuf_puts(b, "\\\""); continue;
        case '\\': pti_strbuf_puts(b, "\\\\"); continue;
        case '\a': pti_strbuf_puts(b, "\\a"); continue;
        case '\b': pti_strbuf_puts(b, "\\b"); continue;
        case '\f': pti_strbuf_puts(b, "\\f"); continue;
        case '\n': pti_strbuf_puts(b, "\\n"); continue;
        case '\r': pti_strbuf_puts(b, "\\r"); continue;
        case '\t': pti_strbuf_puts(b, "\\t"); continue;
        case '\v': pti_strbuf_puts(b, "\\v"); continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7f)
            pti_strbuf_printf(b, "\\x%02x", c);
        else if (c < 0x80)
            pti_strbuf_put(b, s + i, 1);
        else {
            size_t need = c >= 0xF0 && c <= 0xF4  ? 4
                          : c >= 0xE0 && c < 0xF0 ? 3
                          : c >= 0xC2 && c < 0xE0 ? 2
                                                  : 0;
            bool valid = need && i + need <= n;
            for (size_t k = 1; valid && k < need; k++)
                valid = ((unsigned char)s[i + k] & 0xC0) == 0x80;
            if (valid) {
                pti_strbuf_put(b, s + i, need);
                i += need - 1;
            } else {
                pti_strbuf_printf(b, "\\x%02x", c);
            }
        }
    }
    pti_strbuf_put(b, "\"", 1);
}

/* ---- variables ------------------------------------------------------------------------------ */

static bool push_var(ex *e, const char *name, val v)
{
    if (e->nvars == e->capvars) {
        int cap = e->capvars ? e->capvars * 2 : 16;
        var *nv = pti_realloc(e->vars, sizeof *nv * (size_t)cap);
        if (!nv)
            return oom(e);
        e->vars = nv;
        e->capvars = cap;
    }
    e->vars[e->nvars++] = (var){name, v};
    return true;
}

static var *find_var(ex *e, const char *name)
{
    for (int i = e->nvars; i-- > 0;)
        if (strcmp(e->vars[i].name, name) == 0)
            return &e->vars[i];
    return NULL;
}

/* ---- evaluation ----------------------------------------------------------------------------- */

static bool eval_pipe(ex *e, val dot, const gt_pipe *pp, val *out);
static bool eval_arg(ex *e, val dot, const gt_arg *a, val *out);

static bool is_cut(const ex *e, int seq)
{
    return e->cut > 0 && seq > e->cut;
}

/* Follows .A.B from recv; has_args: the last field is given arguments (an error for data). */
static bool eval_fields(ex *e, val recv, const char *const *ids, int n, bool has_args, val *out)
{
    for (int i = 0; i < n; i++) {
        if (recv.k == V_OBJ) {
            if (has_args && i == n - 1)
                return exfail(e, "%s is not a method but has arguments", ids[i]);
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(recv.j, ids[i]);
            recv = c ? from_json(c) : (val){.k = V_MISSING};
        } else if (recv.k == V_MISSING) {
            /* Go: a field of a missing map entry is missing too, silently */
        } else if (recv.k == V_NIL) {
            return exfail(e, "nil pointer evaluating interface {}.%s", ids[i]);
        } else {
            return exfail(e, "can't evaluate field %s in type %s", ids[i], type_name(recv));
        }
    }
    *out = recv;
    return true;
}

static const char *arg_desc(const gt_arg *a)
{
    switch (a->kind) {
    case GA_DOT: return ".";
    case GA_NIL: return "nil";
    case GA_BOOL: return a->b ? "true" : "false";
    case GA_NUM: return "number";
    case GA_STR: return "string";
    default: return "operand";
    }
}

/* ---- builtin functions ---------------------------------------------------------------------- */

typedef struct fargs {
    val *v;
    int n;
} fargs;

static bool want_args(ex *e, const char *name, fargs a, int want)
{
    if (a.n != want)
        return exfail(e, "wrong number of args for %s: want %d got %d", name, want, a.n);
    return true;
}

typedef enum basic { B_INVALID, B_BOOL, B_INT, B_FLOAT, B_STRING, B_OTHER } basic;

static basic basic_kind(val v)
{
    switch (v.k) {
    case V_BOOL: return B_BOOL;
    case V_INT: return B_INT;
    case V_FLOAT: return B_FLOAT;
    case V_STR: return B_STRING;
    case V_MISSING:
    case V_NIL: return B_INVALID;
    default: return B_OTHER;
    }
}

static int cmp_str(val a, val b)
{
    size_t n = a.n < b.n ? a.n : b.n;
    int c = memcmp(a.s, b.s, n);
    return c ? c : (a.n < b.n ? -1 : a.n > b.n);
}

/* Go's eq: arg0 equal to any of the others. */
static bool fn_eq(ex *e, fargs a, bool *res)
{
    if (a.n < 2)
        return exfail(e, "missing argument for comparison");
    basic k1 = basic_kind(a.v[0]);
    *res = false;
    for (int i = 1; i < a.n && !*res; i++) {
        basic k2 = basic_kind(a.v[i]);
        if (k1 != k2) {
            if (k1 != B_INVALID && k2 != B_INVALID)
                return exfail(e, "incompatible types for comparison");
            continue;
        }
        switch (k1) {
        case B_BOOL: *res = a.v[0].b == a.v[i].b; break;
        case B_INT: *res = a.v[0].i == a.v[i].i; break;
        case B_FLOAT: *res = a.v[0].f == a.v[i].f; break;
        case B_STRING: *res = cmp_str(a.v[0], a.v[i]) == 0; break;
        case B_INVALID: *res = true; break;
        default: return exfail(e, "non-comparable type %s", type_name(a.v[0]));
        }
    }
    return true;
}

/* Go's lt; le/gt/ge are built from lt and eq as in text/template. */
static bool fn_lt(ex *e, val x, val y, bool *res)
{
    basic k1 = basic_kind(x), k2 = basic_kind(y);
    if (k1 == B_INVALID || k1 == B_OTHER || k1 == B_BOOL || k2 == B_INVALID || k2 == B_OTHER ||
        k2 == B_BOOL)
        return exfail(e, "invalid type for comparison");
    if (k1 != k2)
        return exfail(e, "incompatible types for comparison");
    *res = k1 == B_INT ? x.i < y.i : k1 == B_FLOAT ? x.f < y.f : cmp_str(x, y) < 0;
    return true;
}

static bool fn_compare(ex *e, const char *name, fargs a, val *out)
{
    bool r = false, eq = false;
    if (strcmp(name, "eq") == 0) {
        if (!fn_eq(e, a, &r))
            return false;
    } else {
        if (!want_args(e, name, a, 2))
            return false;
        fargs pair = {a.v, 2};
        if (strcmp(name, "ne") == 0) {
            if (!fn_eq(e, pair, &eq))
                return false;
            r = !eq;
        } else {
            bool lt = false;
            if (!fn_lt(e, a.v[0], a.v[1], &lt))
                return false;
            if (strcmp(name, "lt") == 0)
                r = lt;
            else if (strcmp(name, "ge") == 0)
                r = !lt;
            else {
                if (!fn_eq(e, pair, &eq))
                    return false;
                r = strcmp(name, "le") == 0 ? lt || eq : !lt && !eq;
            }
        }
    }
    *out = (val){.k = V_BOOL, .b = r};
    return true;
}

static bool to_index(ex *e, val v, long long *i)
{
    if (v.k != V_INT)
        return exfail(e, "cannot index slice/array with type %s", type_name(v));
    *i = v.i;
    return true;
}

static bool fn_index(ex *e, fargs a, val *out)
{
    if (a.n < 1)
        return exfail(e, "wrong number of args for index: want at least 1 got 0");
    val item = a.v[0];
    for (int k = 1; k < a.n; k++) {
        long long i = 0;
        switch (item.k) {
        case V_ARR:
        case V_STR:
            if (!to_index(e, a.v[k], &i))
                return false;
            if (i < 0 || (size_t)i >= item.n)
                return exfail(e, "error calling index: index out of range: %lld", i);
            if (item.k == V_STR)
                item =
                    (val){.k = V_INT, .i = (unsigned char)item.s[i], .f = (unsigned char)item.s[i]};
            else
                item = from_json(arr_item(item, (size_t)i));
            break;
        case V_OBJ: {
            if (a.v[k].k != V_STR)
                return exfail(e, "error calling index: value has type %s; should be string",
                              type_name(a.v[k]));
            char *key = ex_strndup(e, a.v[k].s, a.v[k].n);
            if (!key)
                return false;
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(item.j, key);
            item = c ? from_json(c) : (val){.k = V_MISSING};
            break;
        }
        case V_MISSING:
        case V_NIL: return exfail(e, "error calling index: index of untyped nil");
        default:
            return exfail(e, "error calling index: can't index item of type %s", type_name(item));
        }
    }
    *out = item;
    return true;
}

static bool fn_slice(ex *e, fargs a, val *out)
{
    if (a.n < 1)
        return exfail(e, "wrong number of args for slice: want at least 1 got 0");
    val item = a.v[0];
    if (item.k != V_STR && item.k != V_ARR)
        return exfail(e, "error calling slice: can't slice item of type %s", type_name(item));
    if (a.n > 4 || (item.k == V_STR && a.n > 3))
        return exfail(e, "error calling slice: too many slice indexes: %d", a.n - 1);
    long long idx[3] = {0, (long long)item.n, (long long)item.n};
    for (int k = 1; k < a.n; k++) {
        if (!to_index(e, a.v[k], &idx[k - 1]))
            return false;
        if (idx[k - 1] < 0 || idx[k - 1] > (long long)item.n)
            return exfail(e, "error calling slice: index out of range: %lld", idx[k - 1]);
    }
    if (a.n == 2)
        idx[1] = (long long)item.n;
    if (idx[0] > idx[1])
        return exfail(e, "error calling slice: invalid slice index: %lld > %lld", idx[0], idx[1]);
    if (a.n == 4 && idx[1] > idx[2])
        return exfail(e, "error calling slice: invalid slice index: %lld > %lld", idx[1], idx[2]);
    *out = item;
    if (item.k == V_STR)
        out->s += idx[0];
    else
        out->off += (size_t)idx[0];
    out->n = (size_t)(idx[1] - idx[0]);
    return true;
}

static bool fn_len(ex *e, fargs a, val *out)
{
    if (!want_args(e, "len", a, 1))
        return false;
    val v = a.v[0];
    long long n;
    if (v.k == V_STR || v.k == V_ARR)
        n = (long long)v.n;
    else if (v.k == V_OBJ) {
        n = 0;
        for (const cJSON *c = v.j->child; c; c = c->next)
            n++;
    } else
        return exfail(e, "error calling len: len of type %s", type_name(v));
    *out = (val){.k = V_INT, .i = n, .f = (double)n};
    return true;
}

static bool is_str(val v)
{
    return v.k == V_STR;
}

/* fmt.Sprint / Sprintln. */
static void sprint(pti_strbuf *b, fargs a, bool ln)
{
    for (int i = 0; i < a.n; i++) {
        if (i > 0 && (ln || (!is_str(a.v[i - 1]) && !is_str(a.v[i]))))
            pti_strbuf_put(b, " ", 1);
        put_value(b, a.v[i], false);
    }
    if (ln)
        pti_strbuf_put(b, "\n", 1);
}

static void put_bad_verb(pti_strbuf *b, char verb, val v)
{
    pti_strbuf_printf(b, "%%!%c(", verb);
    if (v.k == V_MISSING || v.k == V_NIL)
        pti_strbuf_puts(b, "<nil>");
    else {
        pti_strbuf_puts(b, type_name(v));
        pti_strbuf_put(b, "=", 1);
        put_value(b, v, false);
    }
    pti_strbuf_put(b, ")", 1);
}

typedef struct spec {
    bool minus, plus, zero, space, sharp;
    int width, prec;
} spec;

/* One verb of printf applied to v into b (unpadded). */
static void format_verb(pti_strbuf *b, char verb, const spec *sp, val v)
{
    char cfmt[32];
    switch (verb) {
    case 'v': put_value(b, v, false); return;
    case 's':
        if (v.k == V_STR)
            pti_strbuf_put(b, v.s,
                           sp->prec >= 0 && (size_t)sp->prec < v.n ? (size_t)sp->prec : v.n);
        else if (v.k == V_ARR || v.k == V_OBJ)
            put_value(b, v, false);
        else
            put_bad_verb(b, verb, v);
        return;
    case 'q':
        if (v.k == V_STR)
            put_go_quoted(b, v.s, v.n);
        else
            put_bad_verb(b, verb, v);
        return;
    case 'd':
        if (v.k == V_INT)
            pti_strbuf_printf(b, sp->plus ? "%+lld" : "%lld", v.i);
        else
            put_bad_verb(b, verb, v);
        return;
    case 'x':
    case 'X':
        if (v.k == V_INT) {
            snprintf(cfmt, sizeof cfmt, "%%s%%ll%c", verb);
            pti_strbuf_printf(b, cfmt, v.i < 0 ? "-" : "", (unsigned long long)llabs(v.i));
        } else if (v.k == V_STR) {
            for (size_t i = 0; i < v.n; i++)
                pti_strbuf_printf(b, verb == 'x' ? "%02x" : "%02X", (unsigned char)v.s[i]);
        } else
            put_bad_verb(b, verb, v);
        return;
    case 't':
        if (v.k == V_BOOL)
            pti_strbuf_puts(b, v.b ? "true" : "false");
        else
            put_bad_verb(b, verb, v);
        return;
    case 'f':
    case 'e':
    case 'g':
        if (v.k != V_FLOAT) {
            put_bad_verb(b, verb, v);
            return;
        }
        if (verb == 'g' && sp->prec < 0) {
            put_go_float(b, v.f);
            return;
        }
        snprintf(cfmt, sizeof cfmt, "%%%s.%d%c", sp->plus ? "+" : "", sp->prec < 0 ? 6 : sp->prec,
                 verb);
        pti_strbuf_printf(b, cfmt, v.f);
        return;
    default:
        pti_strbuf_printf(b, "%%!%c(", verb);
        pti_strbuf_puts(b, type_name(v));
        pti_strbuf_put(b, "=", 1);
        put_value(b, v, false);
        pti_strbuf_put(b, ")", 1);
    }
}

static void pad_into(pti_strbuf *b, const spec *sp, const char *s, size_t n, bool numeric)
{
    size_t w = sp->width > 0 ? (size_t)sp->width : 0;
    size_t pad = w > n ? w - n : 0;
    if (!sp->minus) {
        bool zero = sp->zero && numeric;
        if (zero && n && (s[0] == '-' || s[0] == '+')) {
            pti_strbuf_put(b, s, 1);
            s++, n--;
        }
        for (size_t i = 0; i < pad; i++)
            pti_strbuf_put(b, zero ? "0" : " ", 1);
    }
    pti_strbuf_put(b, s, n);
    if (sp->minus)
        for (size_t i = 0; i < pad; i++)
            pti_strbuf_put(b, " ", 1);
}

/* fmt.Sprintf with the verbs templates use. */
static bool fn_printf(ex *e, fargs a, val *out)
{
    if (a.n < 1 || a.v[0].k != V_STR)
        return exfail(e, "wrong type for value; expected string; got %s",
                      a.n < 1 ? "nothing" : type_name(a.v[0]));
    const char *f = a.v[0].s;
    size_t fn = a.v[0].n;
    pti_strbuf b = {.limit = GT_MAX_OUTPUT};
    int argi = 1;
    for (size_t i = 0; i < fn; i++) {
        if (f[i] != '%') {
            pti_strbuf_put(&b, f + i, 1);
            continue;
        }
        spec sp = {.prec = -1};
        for (i++; i < fn && strchr("-+0 #", f[i]); i++) {
            sp.minus |= f[i] == '-';
            sp.plus |= f[i] == '+';
            sp.zero |= f[i] == '0';
            sp.space |= f[i] == ' ';
            sp.sharp |= f[i] == '#';
        }
        for (; i < fn && f[i] >= '0' && f[i] <= '9' && sp.width < 10000; i++)
            sp.width = sp.width * 10 + (f[i] - '0');
        if (i < fn && f[i] == '.') {
            sp.prec = 0;
            for (i++; i < fn && f[i] >= '0' && f[i] <= '9' && sp.prec < 10000; i++)
                sp.prec = sp.prec * 10 + (f[i] - '0');
        }
        if (i >= fn) {
            pti_strbuf_puts(&b, "%!(NOVERB)");
            break;
        }
        char verb = f[i];
        if (verb == '%') {
            pti_strbuf_put(&b, "%", 1);
            continue;
        }
        if (argi >= a.n) {
            pti_strbuf_printf(&b, "%%!%c(MISSING)", verb);
            continue;
        }
        val v = a.v[argi++];
        pti_strbuf tmp = {.limit = GT_MAX_OUTPUT};
        format_verb(&tmp, verb, &sp, v);
        pad_into(&b, &sp, tmp.data ? tmp.data : "", tmp.len, v.k == V_INT || v.k == V_FLOAT);
        b.oom |= tmp.oom;
        pti_strbuf_free(&tmp);
    }
    if (argi < a.n) {
        pti_strbuf_puts(&b, "%!(EXTRA ");
        for (int k = argi; k < a.n; k++) {
            if (k > argi)
                pti_strbuf_puts(&b, ", ");
            pti_strbuf_puts(&b, type_name(a.v[k]));
            pti_strbuf_put(&b, "=", 1);
            put_value(&b, a.v[k], false);
        }
        pti_strbuf_put(&b, ")", 1);
    }
    return buf_to_val(e, &b, out);
}

static bool fn_date(ex *e, int days_back, val *out)
{
    time_t now = time(NULL) - (time_t)days_back * 86400;
    struct tm tm;
    localtime_r(&now, &tm);
    char d[32];
    strftime(d, sizeof d, "%Y-%m-%d", &tm);
    char *s = ex_strndup(e, d, strlen(d));
    if (!s)
        return false;
    *out = (val){.k = V_STR, .s = s, .n = strlen(s)};
    return true;
}

static const char *ts_type(const char *json_type)
{
    if (strcmp(json_type, "string") == 0)
        return "string";
    if (strcmp(json_type, "number") == 0 || strcmp(json_type, "integer") == 0)
        return "number";
    if (strcmp(json_type, "boolean") == 0)
        return "boolean";
    if (strcmp(json_type, "array") == 0)
        return "any[]";
    if (strcmp(json_type, "object") == 0)
        return "Record<string, any>";
    if (strcmp(json_type, "null") == 0)
        return "null";
    return "any";
}

/* Ollama's toTypeScriptType of a tool property: its JSON type(s) mapped to TypeScript names,
 * several joined with " | "; "any" for anything else. */
static bool fn_ts_type(ex *e, fargs a, val *out)
{
    if (!want_args(e, "toTypeScriptType", a, 1))
        return false;
    pti_strbuf b = {.limit = GT_MAX_OUTPUT};
    const cJSON *type = NULL;
    if (a.v[0].k == V_OBJ) {
        type = cJSON_GetObjectItemCaseSensitive(a.v[0].j, "Type");
        if (!type)
            type = cJSON_GetObjectItemCaseSensitive(a.v[0].j, "type");
    }
    if (cJSON_IsString(type))
        pti_strbuf_puts(&b, ts_type(type->valuestring));
    else if (cJSON_IsArray(type) && cJSON_GetArraySize(type) > 0) {
        const cJSON *c;
        int i = 0;
        cJSON_ArrayForEach(c, type)
        {
            if (i++)
                pti_strbuf_puts(&b, " | ");
            pti_strbuf_puts(&b, cJSON_IsString(c) ? ts_type(c->valuestring) : "any");
        }
    } else
        pti_strbuf_puts(&b, "any");
    return buf_to_val(e, &b, out);
}

static const char *const builtins[] = {"and",
                                       "or",
                                       "not",
                                       "len",
                                       "index",
                                       "slice",
                                       "eq",
                                       "ne",
                                       "lt",
                                       "le",
                                       "gt",
                                       "ge",
                                       "print",
                                       "printf",
                                       "println",
                                       "json",
                                       "currentDate",
                                       "yesterdayDate",
                                       "toTypeScriptType"};

bool gt_is_builtin(const char *name)
{
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
        if (strcmp(builtins[i], name) == 0)
            return true;
    return false;
}

/* and/or evaluate their arguments lazily and return the deciding one, as Go 1.18+. */
static bool call_andor(ex *e, val dot, bool is_and, gt_arg *const *args, int nargs,
                       const val *final, val *out)
{
    int total = nargs + (final != NULL);
    if (total < 1)
        return exfail(e, "wrong number of args for %s: want at least 1 got 0",
                      is_and ? "and" : "or");
    for (int i = 0; i < total; i++) {
        val v;
        if (i < nargs) {
            if (!eval_arg(e, dot, args[i], &v))
                return false;
        } else {
            v = *final;
        }
        *out = v;
        if (truth(v) != is_and)
            return true;
    }
    return true;
}

static bool call_func(ex *e, val dot, const char *name, gt_arg *const *args, int nargs,
                      const val *final, val *out)
{
    if (strcmp(name, "and") == 0 || strcmp(name, "or") == 0)
        return call_andor(e, dot, name[0] == 'a', args, nargs, final, out);
    int n = nargs + (final != NULL);
    val stack_v[16];
    val *v = n <= 16 ? stack_v : ex_alloc(e, sizeof *v * (size_t)n);
    if (!v)
        return false;
    for (int i = 0; i < nargs; i++)
        if (!eval_arg(e, dot, args[i], &v[i]))
            return false;
    if (final)
        v[nargs] = *final;
    fargs a = {v, n};
    if (strcmp(name, "not") == 0) {
        if (!want_args(e, name, a, 1))
            return false;
        *out = (val){.k = V_BOOL, .b = !truth(v[0])};
        return true;
    }
    if (strcmp(name, "len") == 0)
        return fn_len(e, a, out);
    if (strcmp(name, "index") == 0)
        return fn_index(e, a, out);
    if (strcmp(name, "slice") == 0)
        return fn_slice(e, a, out);
    if (strcmp(name, "printf") == 0)
        return fn_printf(e, a, out);
    if (strcmp(name, "print") == 0 || strcmp(name, "println") == 0) {
        pti_strbuf b = {.limit = GT_MAX_OUTPUT};
        sprint(&b, a, name[5] == 'l');
        return buf_to_val(e, &b, out);
    }
    if (strcmp(name, "json") == 0) {
        if (!want_args(e, name, a, 1))
            return false;
        pti_strbuf b = {.limit = GT_MAX_OUTPUT};
        put_json(&b, v[0]);
        return buf_to_val(e, &b, out);
    }
    if (strcmp(name, "currentDate") == 0 || strcmp(name, "yesterdayDate") == 0)
        return want_args(e, name, a, 0) && fn_date(e, name[0] == 'y', out);
    if (strcmp(name, "toTypeScriptType") == 0)
        return fn_ts_type(e, a, out);
    return fn_compare(e, name, a, out);
}

static bool not_a_function(ex *e, const gt_arg *first, int nargs, const val *final)
{
    if (nargs > 1 || final)
        return exfail(e, "can't give argument to non-function %s", arg_desc(first));
    return true;
}

static bool eval_arg(ex *e, val dot, const gt_arg *a, val *out)
{
    e->line = a->line;
    switch (a->kind) {
    case GA_FIELD: return eval_fields(e, dot, a->idents, a->nidents, false, out);
    case GA_VAR: {
        var *v = find_var(e, a->name);
        if (!v)
            return exfail(e, "undefined variable: %s", a->name);
        return eval_fields(e, v->v, a->idents, a->nidents, false, out);
    }
    case GA_DOT: *out = dot; return true;
    case GA_NIL: *out = (val){.k = V_NIL}; return true;
    case GA_BOOL: *out = (val){.k = V_BOOL, .b = a->b}; return true;
    case GA_NUM:
        *out = a->is_int ? (val){.k = V_INT, .i = a->i, .f = a->f} : (val){.k = V_FLOAT, .f = a->f};
        return true;
    case GA_STR: *out = (val){.k = V_STR, .s = a->s, .n = a->slen}; return true;
    case GA_FUNC: return call_func(e, dot, a->name, NULL, 0, NULL, out);
    case GA_PIPE: {
        val v;
        if (!eval_pipe(e, dot, a->pipe, &v))
            return false;
        return eval_fields(e, v, a->idents, a->nidents, false, out);
    }
    }
    return exfail(e, "bad operand");
}

/* The arguments of cmd that survive the cut (all of them when there is no cut). */
static int live_args(const ex *e, const gt_cmd *cmd, gt_arg **live)
{
    int n = 0;
    for (int i = 0; i < cmd->nargs; i++)
        if (!is_cut(e, cmd->args[i]->seq))
            live[n++] = cmd->args[i];
    return n;
}

static bool eval_cmd(ex *e, val dot, gt_arg *const *args, int nargs, const val *final, val *out)
{
    const gt_arg *first = args[0];
    e->line = first->line;
    bool has_args = nargs > 1 || final;
    switch (first->kind) {
    case GA_FIELD: return eval_fields(e, dot, first->idents, first->nidents, has_args, out);
    case GA_VAR: {
        var *v = find_var(e, first->name);
        if (!v)
            return exfail(e, "undefined variable: %s", first->name);
        if (first->nidents == 0)
            return not_a_function(e, first, nargs, final) && (*out = v->v, true);
        return eval_fields(e, v->v, first->idents, first->nidents, has_args, out);
    }
    case GA_FUNC: return call_func(e, dot, first->name, args + 1, nargs - 1, final, out);
    case GA_PIPE:
        if (first->nidents) {
            val v;
            return eval_pipe(e, dot, first->pipe, &v) &&
                   eval_fields(e, v, first->idents, first->nidents, has_args, out);
        }
        return not_a_function(e, first, nargs, final) && eval_pipe(e, dot, first->pipe, out);
    case GA_NIL: return exfail(e, "nil is not a command");
    default: return not_a_function(e, first, nargs, final) && eval_arg(e, dot, first, out);
    }
}

static bool eval_pipe(ex *e, val dot, const gt_pipe *pp, val *out)
{
    val v = {.k = V_MISSING};
    bool have = false;
    for (int c = 0; c < pp->ncmds; c++) {
        const gt_cmd *cmd = pp->cmds[c];
        gt_arg *const *live = cmd->args;
        int n = cmd->nargs;
        if (e->cut > 0) {
            gt_arg **kept = ex_alloc(e, sizeof *kept * (size_t)cmd->nargs);
            if (!kept)
                return false;
            n = live_args(e, cmd, kept);
            live = kept;
        }
        if (n == 0)
            continue;
        val r;
        if (!eval_cmd(e, dot, live, n, have ? &v : NULL, &r))
            return false;
        v = r;
        have = true;
    }
    for (int d = 0; d < pp->ndecl; d++) {
        if (pp->is_assign) {
            var *x = find_var(e, pp->decl[d]);
            if (!x)
                return exfail(e, "undefined variable: %s", pp->decl[d]);
            x->v = v;
        } else if (!push_var(e, pp->decl[d], v)) {
            return false;
        }
    }
    *out = v;
    return true;
}

/* Whether every argument of an action's pipeline is cut (Ollama deletes such an action). */
static bool action_cut(const ex *e, const gt_node *n)
{
    if (is_cut(e, n->seq))
        return true;
    if (e->cut <= 0)
        return false;
    for (int c = 0; c < n->pipe->ncmds; c++)
        for (int i = 0; i < n->pipe->cmds[c]->nargs; i++)
            if (!is_cut(e, n->pipe->cmds[c]->args[i]->seq))
                return false;
    return true;
}

static walk_st walk(ex *e, val dot, const gt_node *n);

static walk_st walk_list(ex *e, val dot, const gt_node *list)
{
    if (!list || is_cut(e, list->seq))
        return W_OK;
    for (int i = 0; i < list->nkids; i++) {
        if (is_cut(e, list->kids[i]->seq))
            continue;
        walk_st st = walk(e, dot, list->kids[i]);
        if (st != W_OK)
            return st;
        if (e->out.oom || e->out.too_big)
            return buf_ok(e, &e->out) ? W_OK : W_ERR;
    }
    return W_OK;
}

static walk_st range_one(ex *e, const gt_node *n, int mark, val key, val elem)
{
    const gt_pipe *pp = n->pipe;
    if (!ex_step(e))
        return W_ERR;
    if (pp->ndecl > 0) {
        if (pp->is_assign) {
            var *x0 = find_var(e, pp->decl[0]);
            var *x1 = pp->ndecl > 1 ? find_var(e, pp->decl[1]) : NULL;
            if (pp->ndecl > 1) {
                if (x0)
                    x0->v = key;
                if (x1)
                    x1->v = elem;
            } else if (x0) {
                x0->v = elem;
            }
        } else {
            e->vars[mark - 1].v = elem;
            if (pp->ndecl > 1)
                e->vars[mark - 2].v = key;
        }
    }
    walk_st st = walk_list(e, elem, n->list);
    e->nvars = mark;
    return st;
}

static walk_st walk_range(ex *e, val dot, const gt_node *n)
{
    val v;
    if (!eval_pipe(e, dot, n->pipe, &v))
        return W_ERR;
    int mark = e->nvars;
    size_t count = 0;
    walk_st st = W_OK;
    if (v.k == V_ARR) {
        size_t i = 0;
        for (const cJSON *c = arr_item(v, 0); c && i < v.n && st != W_ERR; c = c->next, i++) {
            st = range_one(e, n, mark, (val){.k = V_INT, .i = (long long)i, .f = (double)i},
                           from_json(c));
            count++;
            if (st == W_BREAK)
                break;
        }
    } else if (v.k == V_OBJ) {
        size_t k;
        const cJSON **m = sorted_members(e, v.j, &k);
        if (!m)
            return W_ERR;
        for (size_t i = 0; i < k && st != W_ERR; i++) {
            const char *key = m[i]->string ? m[i]->string : "";
            st = range_one(e, n, mark, (val){.k = V_STR, .s = key, .n = strlen(key)},
                           from_json(m[i]));
            count++;
            if (st == W_BREAK)
                break;
        }
    } else if (v.k == V_INT) {
        if (n->pipe->ndecl > 1)
            return exfail(e, "can't use %lld to iterate over more than one variable", v.i), W_ERR;
        for (long long i = 0; i < v.i && st != W_ERR; i++) {
            st = range_one(e, n, mark, (val){.k = V_INT, .i = i, .f = (double)i},
                           (val){.k = V_INT, .i = i, .f = (double)i});
            count++;
            if (st == W_BREAK)
                break;
        }
    } else if (v.k != V_MISSING && v.k != V_NIL) {
        return exfail(e, "range can't iterate over %s", type_name(v)), W_ERR;
    }
    if (st == W_ERR)
        return W_ERR;
    if (count == 0 && n->else_list)
        return walk_list(e, dot, n->else_list);
    return W_OK;
}

static walk_st walk(ex *e, val dot, const gt_node *n)
{
    e->line = n->line;
    if (!ex_step(e))
        return W_ERR;
    switch (n->kind) {
    case GN_LIST: return walk_list(e, dot, n);
    case GN_TEXT: pti_strbuf_put(&e->out, n->text, n->tlen); return W_OK;
    case GN_BREAK: return W_BREAK;
    case GN_CONTINUE: return W_CONTINUE;
    case GN_ACTION: {
        if (action_cut(e, n))
            return W_OK;
        val v;
        if (!eval_pipe(e, dot, n->pipe, &v))
            return W_ERR;
        if (n->pipe->ndecl == 0)
            put_value(&e->out, v, true);
        return W_OK;
    }
    case GN_IF:
    case GN_WITH: {
        int mark = e->nvars;
        val v;
        if (!eval_pipe(e, dot, n->pipe, &v))
            return W_ERR;
        walk_st st;
        if (truth(v))
            st = walk_list(e, n->kind == GN_WITH ? v : dot, n->list);
        else
            st = walk_list(e, dot, n->else_list);
        e->nvars = mark;
        return st;
    }
    case GN_RANGE: {
        int mark = e->nvars;
        walk_st st = walk_range(e, dot, n);
        e->nvars = mark;
        return st == W_ERR ? W_ERR : W_OK;
    }
    }
    return W_OK;
}

char *gt_execute(const pti_gotmpl *t, const cJSON *data, int cut_seq, size_t *out_len)
{
    ex e = {.cut = cut_seq, .out = {.limit = GT_MAX_OUTPUT}};
    val dot = data ? from_json(data) : (val){.k = V_NIL};
    char *result = NULL;
    if (push_var(&e, "$", dot)) {
        walk_st st = walk(&e, dot, t->root);
        if (st != W_ERR && !e.failed && buf_ok(&e, &e.out)) {
            size_t len = e.out.len;
            result = pti_strbuf_take(&e.out);
            if (!result)
                oom(&e);
            else if (out_len)
                *out_len = len;
        }
    }
    pti_strbuf_free(&e.out);
    free(e.vars);
    gt_arena_free(&e.tmp);
    return result;
}

char *pti_gotmpl_json(const cJSON *v, size_t *out_len)
{
    pti_strbuf b = {.limit = GT_MAX_OUTPUT};
    put_json(&b, v ? from_json(v) : (val){.k = V_NIL});
    size_t len = b.len;
    bool too_big = b.too_big;
    char *json = pti_strbuf_take(&b);
    if (!json)
        return too_big
                   ? pti_error_null(PT_ERR_INVALID_ARG, "pti_gotmpl_json: output exceeds %zu MiB",
                                    GT_MAX_OUTPUT >> 20)
                   : pti_error_null(PT_ERR_OOM, "pti_gotmpl_json: out of memory");
    if (out_len)
        *out_len = len;
    return json;
}
