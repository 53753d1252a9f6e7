/* Parser of the Go text/template subset (go_template.h): a lexer over the actions between
 * {{ and }}, and a recursive-descent parser that builds the tree of go_template_impl.h in an
 * arena, following Go's text/template/parse: the trim markers "{{- " and " -}}", comments,
 * pipelines with declarations, if/else if/range/with/else/end, variable scopes checked at
 * parse time ("undefined variable"), and the numbering of nodes in the order Ollama's
 * deleteNode walks them (used to cut a legacy template after {{ .Response }}). */
#include "go_template_impl.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"

#define GT_MAX_DEPTH 200

/* ---- arena ---------------------------------------------------------------------------------- */

struct gt_arena_blk {
    gt_arena_blk *next;
    size_t used, cap;
    max_align_t data[];
};

void *gt_arena_alloc(gt_arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n == 0)
        n = sizeof(max_align_t);
    gt_arena_blk *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        b = pti_calloc(1, sizeof *b + cap);
        if (!b)
            return NULL;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

char *gt_arena_strndup(gt_arena *a, const char *s, size_t n)
{
    char *d = gt_arena_alloc(a, n + 1);
    if (d && n)
        memcpy(d, s, n);
    return d;
}

void gt_arena_free(gt_arena *a)
{
    gt_arena_blk *b = a->head;
    while (b) {
        gt_arena_blk *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

/* ---- lexer ---------------------------------------------------------------------------------- */

typedef enum tok_kind {
    T_CLOSE, /* }} or -}} */
    T_FIELD, /* .Name */
    T_VAR,   /* $ or $name */
    T_IDENT,
    T_STRING,
    T_NUMBER,
    T_CHAR,
    T_DOT,
    T_LPAREN,
    T_RPAREN,
    T_PIPE,
    T_DECLARE,
    T_ASSIGN,
    T_COMMA
} tok_kind;

typedef struct tok {
    tok_kind kind;
    bool space_before;
    const char *p; /* source text of the token */
    size_t n;
} tok;

typedef struct parser {
    const char *src;
    size_t len, pos;
    int line;       /* line at pos */
    bool trim_next; /* the last action ended with " -}}" */
    bool have_peek;
    tok peek;
    pti_gotmpl *t;
    const char **vars; /* variable names in scope, for "undefined variable" */
    int nvars, capvars;
    int range_depth, depth;
    bool failed;
} parser;

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_alnum_(char c)
{
    return isalnum((unsigned char)c) || c == '_' || (unsigned char)c >= 0x80;
}

static bool fail(parser *p, pt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(parser *p, pt_status st, const char *fmt, ...)
{
    if (p->failed)
        return false;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->failed = true;
    pti_error(st, "template: line %d: %s", p->line, msg);
    return false;
}

static void advance(parser *p, size_t n)
{
    for (size_t i = 0; i < n && p->pos < p->len; i++)
        if (p->src[p->pos++] == '\n')
            p->line++;
}

static bool at(const parser *p, const char *s)
{
    size_t k = strlen(s);
    return p->len - p->pos >= k && memcmp(p->src + p->pos, s, k) == 0;
}

/* " -}}" with any white space character before the '-', as Go's hasRightTrimMarker. */
static bool at_trim_close(const parser *p)
{
    return p->len - p->pos >= 4 && is_space(p->src[p->pos]) && p->src[p->pos + 1] == '-' &&
           p->src[p->pos + 2] == '}' && p->src[p->pos + 3] == '}';
}

static bool lex_quoted(parser *p, tok *t, char q)
{
    size_t start = p->pos;
    advance(p, 1);
    while (p->pos < p->len && p->src[p->pos] != q) {
        char c = p->src[p->pos];
        if (q != '`' && c == '\n')
            return fail(p, PT_ERR_FORMAT, "unterminated quoted string");
        if (q != '`' && c == '\\' && p->pos + 1 < p->len)
            advance(p, 1);
        advance(p, 1);
    }
    if (p->pos >= p->len)
        return fail(p, PT_ERR_FORMAT,
                    q == '`' ? "unterminated raw quoted string" : "unterminated quoted string");
    advance(p, 1);
    t->kind = q == '\'' ? T_CHAR : T_STRING;
    t->p = p->src + start;
    t->n = p->pos - start;
    return true;
}

static bool lex_number(parser *p, tok *t)
{
    size_t start = p->pos;
    if (p->src[p->pos] == '+' || p->src[p->pos] == '-')
        advance(p, 1);
    while (p->pos < p->len) {
        char c = p->src[p->pos];
        bool exp_sign =
            (c == '+' || c == '-') && p->pos > start && strchr("eEpP", p->src[p->pos - 1]) &&
            !(p->pos - start >= 2 && (p->src[start + 1] == 'x' || p->src[start + 1] == 'X') &&
              strchr("eE", p->src[p->pos - 1]));
        if (!(isalnum((unsigned char)c) || c == '.' || c == '_' || exp_sign))
            break;
        advance(p, 1);
    }
    t->kind = T_NUMBER;
    t->p = p->src + start;
    t->n = p->pos - start;
    return true;
}

/* The next token of the current action. */
static bool lex(parser *p, tok *t)
{
    if (p->have_peek) {
        *t = p->peek;
        p->have_peek = false;
        return true;
    }
    memset(t, 0, sizeof *t);
    while (p->pos < p->len && is_space(p->src[p->pos])) {
        if (at_trim_close(p))
            break;
        t->space_before = true;
        advance(p, 1);
    }
    if (p->pos >= p->len)
        return fail(p, PT_ERR_FORMAT, "unclosed action");
    if (at_trim_close(p)) {
        advance(p, 4);
        p->trim_next = true;
        t->kind = T_CLOSE;
        return true;
    }
    if (at(p, "}}")) {
        advance(p, 2);
        t->kind = T_CLOSE;
        return true;
    }
    const char *s = p->src + p->pos;
    char c = *s;
    t->p = s;
    if (c == '"' || c == '`' || c == '\'')
        return lex_quoted(p, t, c);
    if (isdigit((unsigned char)c) ||
        ((c == '-' || c == '+' || c == '.') && p->pos + 1 < p->len && isdigit((unsigned char)s[1])))
        return lex_number(p, t);
    if (c == '.' || c == '$') {
        size_t n = 1;
        while (p->pos + n < p->len && is_alnum_(s[n]))
            n++;
        t->kind = c == '$' ? T_VAR : (n == 1 ? T_DOT : T_FIELD);
        t->n = n;
        advance(p, n);
        return true;
    }
    if (is_alnum_(c)) {
        size_t n = 0;
        while (p->pos + n < p->len && is_alnum_(s[n]))
            n++;
        t->kind = T_IDENT;
        t->n = n;
        advance(p, n);
        return true;
    }
    t->n = 1;
    switch (c) {
    case '(': t->kind = T_LPAREN; break;
    case ')': t->kind = T_RPAREN; break;
    case '|': t->kind = T_PIPE; break;
    case ',': t->kind = T_COMMA; break;
    case '=': t->kind = T_ASSIGN; break;
    case ':':
        if (p->pos + 1 < p->len && s[1] == '=') {
            t->kind = T_DECLARE;
            t->n = 2;
            break;
        }
        return fail(p, PT_ERR_FORMAT, "expected :=");
    default:
        return fail(p, PT_ERR_FORMAT, "unexpected character '%c' in command",
                    isprint((unsigned char)c) ? c : '?');
    }
    advance(p, t->n);
    return true;
}

static bool peek(parser *p, tok *t)
{
    if (!p->have_peek) {
        if (!lex(p, &p->peek))
            return false;
        p->have_peek = true;
    }
    *t = p->peek;
    return true;
}

static bool tok_is(const tok *t, const char *word)
{
    return t->kind == T_IDENT && t->n == strlen(word) && memcmp(t->p, word, t->n) == 0;
}

/* ---- allocation helpers --------------------------------------------------------------------- */

static void *alloc(parser *p, size_t n)
{
    void *m = gt_arena_alloc(&p->t->arena, n);
    if (!m)
        fail(p, PT_ERR_OOM, "out of memory");
    return m;
}

/* Appends item to an arena array *arr of *n elements (capacity doubles in the arena). */
static bool push_ptr(parser *p, void ***arr, int *n, void *item)
{
    int cap = 4;
    while (cap < *n)
        cap *= 2;
    if (*n == 0 || *n == cap) {
        void **grown = alloc(p, sizeof(void *) * (size_t)(*n == 0 ? 4 : cap * 2));
        if (!grown)
            return false;
        if (*n)
            memcpy(grown, *arr, sizeof(void *) * (size_t)*n);
        *arr = grown;
    }
    (*arr)[(*n)++] = item;
    return true;
}

static gt_node *new_node(parser *p, gt_node_kind k)
{
    gt_node *n = alloc(p, sizeof *n);
    if (n) {
        n->kind = k;
        n->line = p->line;
    }
    return n;
}

/* ---- literals ------------------------------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *d, unsigned long cp)
{
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        cp = 0xFFFD;
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xC0 | (cp >> 6));
        d[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | (cp >> 12));
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | (cp >> 18));
    d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes a Go interpreted string literal body s[0..n) (without quotes) into out (n+1 bytes
 * suffice: every escape is at least as long as what it makes). */
static bool unquote(parser *p, const char *s, size_t n, char *out, size_t *out_n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            out[o++] = s[i];
            continue;
        }
        if (++i >= n)
            return fail(p, PT_ERR_FORMAT, "invalid syntax in quoted string");
        char c = s[i];
        const char *simple = strchr("abfnrtv\\\"'", c);
        if (simple && c) {
            static const char map[] = "\a\b\f\n\r\t\v\\\"'";
            out[o++] = map[simple - "abfnrtv\\\"'"];
            continue;
        }
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (digits) {
            unsigned long v = 0;
            for (int k = 0; k < digits; k++) {
                int h = i + 1 + (size_t)k < n ? hexval(s[i + 1 + k]) : -1;
                if (h < 0)
                    return fail(p, PT_ERR_FORMAT, "invalid escape in quoted string");
                v = v * 16 + (unsigned long)h;
            }
            i += (size_t)digits;
            if (c == 'x')
                out[o++] = (char)v;
            else
                o += put_utf8(out + o, v);
            continue;
        }
        if (c >= '0' && c <= '7' && i + 2 < n) {
            int v = 0;
            for (int k = 0; k < 3; k++) {
                if (s[i + k] < '0' || s[i + k] > '7')
                    return fail(p, PT_ERR_FORMAT, "invalid escape in quoted string");
                v = v * 8 + (s[i + k] - '0');
            }
            if (v > 255)
                return fail(p, PT_ERR_FORMAT, "invalid escape in quoted string");
            out[o++] = (char)v;
            i += 2;
            continue;
        }
        return fail(p, PT_ERR_FORMAT, "invalid escape \\%c in quoted string",
                    isprint((unsigned char)c) ? c : '?');
    }
    *out_n = o;
    return true;
}

static bool parse_string(parser *p, const tok *t, gt_arg *a)
{
    a->kind = GA_STR;
    size_t body = t->n - 2;
    char *d = alloc(p, body + 1);
    if (!d)
        return false;
    if (t->p[0] == '`') {
        /* raw strings drop carriage returns, as Go's lexer */
        size_t o = 0;
        for (size_t i = 0; i < body; i++)
            if (t->p[1 + i] != '\r')
                d[o++] = t->p[1 + i];
        a->s = d;
        a->slen = o;
        return true;
    }
    if (!unquote(p, t->p + 1, body, d, &a->slen))
        return false;
    a->s = d;
    return true;
}

static bool parse_char(parser *p, const tok *t, gt_arg *a)
{
    char buf[16];
    size_t n = 0;
    if (t->n < 3 || t->n > 12 || !unquote(p, t->p + 1, t->n - 2, buf, &n) || n == 0)
        return fail(p, PT_ERR_FORMAT, "malformed character constant: %.*s", (int)t->n, t->p);
    /* decode the single UTF-8 character */
    unsigned char c0 = (unsigned char)buf[0];
    long long v = c0;
    size_t need = c0 < 0x80 ? 1 : c0 >= 0xF0 ? 4 : c0 >= 0xE0 ? 3 : 2;
    if (need != n)
        return fail(p, PT_ERR_FORMAT, "malformed character constant: %.*s", (int)t->n, t->p);
    if (need > 1) {
        v = c0 & (0x3F >> (need - 1));
        for (size_t k = 1; k < need; k++)
            v = (v << 6) | ((unsigned char)buf[k] & 0x3F);
    }
    a->kind = GA_NUM;
    a->is_int = true;
    a->i = v;
    a->f = (double)v;
    return true;
}

static bool parse_number(parser *p, const tok *t, gt_arg *a)
{
    char buf[128];
    size_t o = 0;
    for (size_t i = 0; i < t->n && o + 1 < sizeof buf; i++)
        if (t->p[i] != '_')
            buf[o++] = t->p[i];
    buf[o] = '\0';
    if (t->n >= sizeof buf)
        return fail(p, PT_ERR_FORMAT, "number too long");
    a->kind = GA_NUM;
    char *end;
    errno = 0;
    const char *digits = buf + (buf[0] == '+' || buf[0] == '-');
    bool octal = digits[0] == '0' && (digits[1] == 'o' || digits[1] == 'O');
    bool binary = digits[0] == '0' && (digits[1] == 'b' || digits[1] == 'B');
    if (octal || binary) {
        long long v = strtoll(digits + 2, &end, octal ? 8 : 2);
        if (*end || errno || end == digits + 2)
            return fail(p, PT_ERR_FORMAT, "illegal number syntax: %s", buf);
        a->is_int = true;
        a->i = buf[0] == '-' ? -v : v;
        a->f = (double)a->i;
        return true;
    }
    long long v = strtoll(buf, &end, 0);
    if (*end == '\0' && errno == 0 && end != buf) {
        a->is_int = true;
        a->i = v;
        a->f = (double)v;
        return true;
    }
    errno = 0;
    double f = strtod(buf, &end);
    if (*end || end == buf)
        return fail(p, PT_ERR_FORMAT, "illegal number syntax: %s", buf);
    /* Go's idealConstant: a literal written with '.', an exponent or 'p' is a float64 */
    a->f = f;
    return true;
}

/* ---- variables in scope --------------------------------------------------------------------- */

static bool declare_var(parser *p, const char *name)
{
    if (p->nvars == p->capvars) {
        int cap = p->capvars ? p->capvars * 2 : 16;
        const char **v = pti_realloc(p->vars, sizeof *v * (size_t)cap);
        if (!v)
            return fail(p, PT_ERR_OOM, "out of memory");
        p->vars = v;
        p->capvars = cap;
    }
    p->vars[p->nvars++] = name;
    return true;
}

static bool var_defined(const parser *p, const char *name)
{
    for (int i = p->nvars; i-- > 0;)
        if (strcmp(p->vars[i], name) == 0)
            return true;
    return false;
}

/* ---- pipelines ------------------------------------------------------------------------------ */

static gt_pipe *parse_pipeline(parser *p, bool in_range, bool in_parens);

/* Field identifiers that follow a term without a space (.A.B after $x or a parenthesis). */
static bool parse_field_chain(parser *p, gt_arg *a)
{
    tok t;
    while (peek(p, &t) && t.kind == T_FIELD && !t.space_before) {
        lex(p, &t);
        const char *id = gt_arena_strndup(&p->t->arena, t.p + 1, t.n - 1);
        if (!id || !push_ptr(p, (void ***)&a->idents, &a->nidents, (void *)id))
            return fail(p, PT_ERR_OOM, "out of memory");
    }
    return !p->failed;
}

static gt_arg *parse_operand(parser *p, const tok *t)
{
    gt_arg *a = alloc(p, sizeof *a);
    if (!a)
        return NULL;
    a->line = p->line;
    switch (t->kind) {
    case T_FIELD: {
        a->kind = GA_FIELD;
        const char *id = gt_arena_strndup(&p->t->arena, t->p + 1, t->n - 1);
        if (!id || !push_ptr(p, (void ***)&a->idents, &a->nidents, (void *)id))
            return NULL;
        return parse_field_chain(p, a) ? a : NULL;
    }
    case T_VAR:
        a->kind = GA_VAR;
        a->name = gt_arena_strndup(&p->t->arena, t->p, t->n);
        if (!a->name)
            return fail(p, PT_ERR_OOM, "out of memory"), NULL;
        if (!var_defined(p, a->name))
            return fail(p, PT_ERR_FORMAT, "undefined variable \"%s\"", a->name), NULL;
        return parse_field_chain(p, a) ? a : NULL;
    case T_DOT: {
        tok n;
        if (peek(p, &n) && n.kind == T_FIELD && !n.space_before)
            return fail(p, PT_ERR_FORMAT, "unexpected . after term \".\""), NULL;
        a->kind = GA_DOT;
        return p->failed ? NULL : a;
    }
    case T_STRING: return parse_string(p, t, a) ? a : NULL;
    case T_CHAR: return parse_char(p, t, a) ? a : NULL;
    case T_NUMBER: return parse_number(p, t, a) ? a : NULL;
    case T_LPAREN:
        a->kind = GA_PIPE;
        if (++p->depth > GT_MAX_DEPTH)
            return fail(p, PT_ERR_FORMAT, "nesting deeper than %d levels", GT_MAX_DEPTH), NULL;
        a->pipe = parse_pipeline(p, false, true);
        p->depth--;
        if (!a->pipe)
            return NULL;
        return parse_field_chain(p, a) ? a : NULL;
    case T_IDENT:
        if (tok_is(t, "true") || tok_is(t, "false")) {
            a->kind = GA_BOOL;
            a->b = tok_is(t, "true");
            return a;
        }
        if (tok_is(t, "nil")) {
            a->kind = GA_NIL;
            return a;
        }
        a->kind = GA_FUNC;
        a->name = gt_arena_strndup(&p->t->arena, t->p, t->n);
        if (!a->name)
            return fail(p, PT_ERR_OOM, "out of memory"), NULL;
        if (strcmp(a->name, "call") == 0 || strcmp(a->name, "html") == 0 ||
            strcmp(a->name, "js") == 0 || strcmp(a->name, "urlquery") == 0)
            return fail(p, PT_ERR_UNSUPPORTED, "function \"%s\" is not supported", a->name), NULL;
        if (!gt_is_builtin(a->name))
            return fail(p, PT_ERR_FORMAT, "function \"%s\" not defined", a->name), NULL;
        return a;
    default: return fail(p, PT_ERR_FORMAT, "unexpected \"%.*s\" in operand", (int)t->n, t->p), NULL;
    }
}

/* Optional declaration "$x :=", "$x =", "$i, $e :=" at the start of a pipeline. */
static bool parse_decl(parser *p, gt_pipe *pp, bool in_range)
{
    tok t, t2;
    if (!peek(p, &t) || t.kind != T_VAR)
        return !p->failed;
    /* two tokens of look-ahead: lex the one after t, and rewind when it is no declaration */
    size_t save_pos = p->pos;
    int save_line = p->line;
    bool save_trim = p->trim_next;
    p->have_peek = false;
    bool ok = lex(p, &t2);
    bool is_decl =
        ok && (t2.kind == T_DECLARE || t2.kind == T_ASSIGN || (t2.kind == T_COMMA && in_range));
    if (!is_decl) {
        p->failed = false; /* a lexing error here recurs when the tokens are read for real */
        p->pos = save_pos, p->line = save_line, p->trim_next = save_trim;
        p->have_peek = true;
        p->peek = t;
        return true;
    }
    const char *names[2];
    int n = 0;
    names[n++] = gt_arena_strndup(&p->t->arena, t.p, t.n);
    if (t2.kind == T_COMMA) {
        tok v;
        if (!lex(p, &v) || v.kind != T_VAR)
            return fail(p, PT_ERR_FORMAT, "range can only initialize variables");
        names[n++] = gt_arena_strndup(&p->t->arena, v.p, v.n);
        if (!lex(p, &t2) || (t2.kind != T_DECLARE && t2.kind != T_ASSIGN))
            return fail(p, PT_ERR_FORMAT, "expected := or = after range variables");
    }
    if (!names[0] || (n == 2 && !names[1]))
        return fail(p, PT_ERR_OOM, "out of memory");
    pp->is_assign = t2.kind == T_ASSIGN;
    pp->ndecl = n;
    for (int i = 0; i < n; i++) {
        pp->decl[i] = names[i];
        if (pp->is_assign) {
            if (!var_defined(p, names[i]))
                return fail(p, PT_ERR_FORMAT, "undefined variable \"%s\"", names[i]);
        } else if (!declare_var(p, names[i])) {
            return false;
        }
    }
    return true;
}

static gt_pipe *parse_pipeline(parser *p, bool in_range, bool in_parens)
{
    gt_pipe *pp = alloc(p, sizeof *pp);
    if (!pp)
        return NULL;
    pp->line = p->line;
    if (!in_parens && !parse_decl(p, pp, in_range))
        return NULL;
    gt_cmd *cmd = NULL;
    for (;;) {
        tok t;
        if (!lex(p, &t))
            return NULL;
        bool end = in_parens ? t.kind == T_RPAREN : t.kind == T_CLOSE;
        if (end || t.kind == T_PIPE) {
            if (!cmd)
                return fail(p, PT_ERR_FORMAT,
                            end && pp->ncmds == 0 ? "missing value for command"
                                                  : "missing command"),
                       NULL;
            if (!push_ptr(p, (void ***)&pp->cmds, &pp->ncmds, cmd))
                return NULL;
            cmd = NULL;
            if (end)
                return pp;
            continue;
        }
        if (t.kind == T_CLOSE || t.kind == T_RPAREN)
            return fail(p, PT_ERR_FORMAT,
                        t.kind == T_CLOSE ? "unclosed left paren" : "unexpected right paren"),
                   NULL;
        if (cmd && !t.space_before && t.kind != T_LPAREN)
            return fail(p, PT_ERR_FORMAT, "missing space before \"%.*s\"", (int)t.n, t.p), NULL;
        gt_arg *a = parse_operand(p, &t);
        if (!a)
            return NULL;
        if (!cmd && !(cmd = alloc(p, sizeof *cmd)))
            return NULL;
        if (!push_ptr(p, (void ***)&cmd->args, &cmd->nargs, a))
            return NULL;
    }
}

/* ---- lists and control structures ----------------------------------------------------------- */

typedef enum list_end { END_EOF, END_END, END_ELSE } list_end;

static gt_node *parse_list(parser *p, list_end *how);

/* if/range/with after its keyword; `chained` is true for "else if"/"else with" whose single
 * {{end}} closes the outer structure too. */
static gt_node *parse_control(parser *p, gt_node_kind kind)
{
    if (++p->depth > GT_MAX_DEPTH)
        return fail(p, PT_ERR_FORMAT, "nesting deeper than %d levels", GT_MAX_DEPTH), NULL;
    gt_node *n = new_node(p, kind);
    if (!n)
        return NULL;
    int mark = p->nvars;
    n->pipe = parse_pipeline(p, kind == GN_RANGE, false);
    if (!n->pipe)
        return NULL;
    if (kind == GN_RANGE)
        p->range_depth++;
    list_end how;
    n->list = parse_list(p, &how);
    if (kind == GN_RANGE)
        p->range_depth--;
    if (!n->list)
        return NULL;
    if (how == END_EOF)
        return fail(p, PT_ERR_FORMAT, "unexpected EOF"), NULL;
    if (how == END_ELSE) {
        tok t;
        if (!peek(p, &t))
            return NULL;
        if ((kind == GN_IF && tok_is(&t, "if")) || (kind == GN_WITH && tok_is(&t, "with"))) {
            lex(p, &t);
            /* else if: a nested structure whose {{end}} ends this one too */
            gt_node *inner = parse_control(p, kind);
            if (!inner)
                return NULL;
            n->else_list = new_node(p, GN_LIST);
            if (!n->else_list ||
                !push_ptr(p, (void ***)&n->else_list->kids, &n->else_list->nkids, inner))
                return NULL;
        } else {
            if (!lex(p, &t))
                return NULL;
            if (t.kind != T_CLOSE)
                return fail(p, PT_ERR_FORMAT, "unexpected \"%.*s\" in else", (int)t.n, t.p), NULL;
            n->else_list = parse_list(p, &how);
            if (!n->else_list)
                return NULL;
            if (how != END_END)
                return fail(p, PT_ERR_FORMAT,
                            how == END_EOF ? "unexpected EOF" : "expected end; found {{else}}"),
                       NULL;
        }
    }
    p->nvars = mark;
    p->depth--;
    return n;
}

static bool expect_close(parser *p, const char *what)
{
    tok t;
    if (!lex(p, &t))
        return false;
    if (t.kind != T_CLOSE)
        return fail(p, PT_ERR_FORMAT, "unexpected \"%.*s\" in %s", (int)t.n, t.p, what);
    return true;
}

/* One action after its {{ (and trim marker). Sets *how when it ends the current list. */
static bool parse_action(parser *p, gt_node *list, list_end *how, bool *ended)
{
    tok t;
    if (!peek(p, &t))
        return false;
    if (t.kind == T_IDENT) {
        static const char *const unsupported[] = {"define", "template", "block"};
        for (size_t i = 0; i < 3; i++)
            if (tok_is(&t, unsupported[i]))
                return fail(p, PT_ERR_UNSUPPORTED, "{{%s}} is not supported", unsupported[i]);
        if (tok_is(&t, "end") || tok_is(&t, "else")) {
            lex(p, &t);
            *how = tok_is(&t, "end") ? END_END : END_ELSE;
            *ended = true;
            return *how == END_END ? expect_close(p, "end") : true;
        }
        gt_node_kind kind = tok_is(&t, "if")         ? GN_IF
                            : tok_is(&t, "range")    ? GN_RANGE
                            : tok_is(&t, "with")     ? GN_WITH
                            : tok_is(&t, "break")    ? GN_BREAK
                            : tok_is(&t, "continue") ? GN_CONTINUE
                                                     : GN_ACTION;
        if (kind == GN_BREAK || kind == GN_CONTINUE) {
            lex(p, &t);
            if (p->range_depth == 0)
                return fail(p, PT_ERR_FORMAT, "{{%s}} outside {{range}}",
                            kind == GN_BREAK ? "break" : "continue");
            gt_node *n = new_node(p, kind);
            return n && expect_close(p, kind == GN_BREAK ? "break" : "continue") &&
                   push_ptr(p, (void ***)&list->kids, &list->nkids, n);
        }
        if (kind != GN_ACTION) {
            lex(p, &t);
            gt_node *n = parse_control(p, kind);
            return n && push_ptr(p, (void ***)&list->kids, &list->nkids, n);
        }
    }
    gt_node *n = new_node(p, GN_ACTION);
    if (!n || !(n->pipe = parse_pipeline(p, false, false)))
        return false;
    return push_ptr(p, (void ***)&list->kids, &list->nkids, n);
}

/* A comment action body after "{{" / "{{- ": "/ *...* /" then "}}" or " -}}". */
static bool skip_comment(parser *p)
{
    advance(p, 2);
    while (p->pos < p->len && !at(p, "*/"))
        advance(p, 1);
    if (p->pos >= p->len)
        return fail(p, PT_ERR_FORMAT, "unclosed comment");
    advance(p, 2);
    if (at_trim_close(p)) {
        advance(p, 4);
        p->trim_next = true;
        return true;
    }
    if (at(p, "}}")) {
        advance(p, 2);
        return true;
    }
    return fail(p, PT_ERR_FORMAT, "comment ends before closing delimiter");
}

static bool add_text(parser *p, gt_node *list, const char *s, size_t n, int line)
{
    if (n == 0)
        return true;
    gt_node *t = new_node(p, GN_TEXT);
    if (!t)
        return false;
    t->line = line;
    t->text = s;
    t->tlen = n;
    return push_ptr(p, (void ***)&list->kids, &list->nkids, t);
}

static gt_node *parse_list(parser *p, list_end *how)
{
    gt_node *list = new_node(p, GN_LIST);
    if (!list)
        return NULL;
    for (;;) {
        const char *s = p->src + p->pos;
        const char *open = NULL;
        for (size_t i = p->pos; i + 1 < p->len; i++)
            if (p->src[i] == '{' && p->src[i + 1] == '{') {
                open = p->src + i;
                break;
            }
        size_t n = open ? (size_t)(open - s) : p->len - p->pos;
        int line = p->line;
        bool trim_left = p->trim_next;
        p->trim_next = false;
        /* "{{- " trims the text before it: a '-' followed by a white space character */
        bool trim_right =
            open && (size_t)(open - p->src) + 3 < p->len && open[2] == '-' && is_space(open[3]);
        const char *ts = s;
        size_t tn = n;
        if (trim_left)
            while (tn && is_space(*ts))
                ts++, tn--;
        if (trim_right)
            while (tn && is_space(ts[tn - 1]))
                tn--;
        for (const char *c = s; c < ts; c++)
            if (*c == '\n')
                line++;
        advance(p, n);
        if (!add_text(p, list, ts, tn, line))
            return NULL;
        if (!open) {
            *how = END_EOF;
            return list;
        }
        advance(p, trim_right ? 4 : 2);
        if (at(p, "/*")) {
            if (!skip_comment(p))
                return NULL;
            continue;
        }
        bool ended = false;
        if (!parse_action(p, list, how, &ended))
            return NULL;
        if (ended)
            return list;
    }
}

/* ---- Ollama's walk order -------------------------------------------------------------------- */

static bool ident_is(const gt_arg *a, const char *field)
{
    for (int i = 0; i < a->nidents; i++)
        if (strcmp(a->idents[i], field) == 0)
            return true;
    return false;
}

typedef struct walk {
    int seq;
    int response_seq;
} walk;

static void number_pipe(walk *w, gt_pipe *pp);

static void number_arg(walk *w, gt_arg *a)
{
    a->seq = ++w->seq;
    if (a->kind == GA_FIELD && !w->response_seq && ident_is(a, "Response"))
        w->response_seq = a->seq;
    if (a->kind == GA_PIPE && a->nidents == 0) /* Go: a PipeNode; a chain is not walked into */
        number_pipe(w, a->pipe);
}

static void number_pipe(walk *w, gt_pipe *pp)
{
    pp->seq = ++w->seq;
    for (int c = 0; c < pp->ncmds; c++)
        for (int i = 0; i < pp->cmds[c]->nargs; i++)
            number_arg(w, pp->cmds[c]->args[i]);
}

/* Numbers nodes in the order of Ollama's deleteNode walk: lists, then the branches of
 * if/range/with (not their conditions), then the arguments of actions. */
static void number_node(walk *w, gt_node *n)
{
    n->seq = ++w->seq;
    switch (n->kind) {
    case GN_LIST:
        for (int i = 0; i < n->nkids; i++)
            number_node(w, n->kids[i]);
        break;
    case GN_IF:
    case GN_RANGE:
    case GN_WITH:
        n->branch_seq = ++w->seq;
        number_node(w, n->list);
        if (n->else_list)
            number_node(w, n->else_list);
        break;
    case GN_ACTION: number_pipe(w, n->pipe); break;
    default: break;
    }
}

/* ---- public --------------------------------------------------------------------------------- */

pti_gotmpl *pti_gotmpl_parse(const char *text, size_t len)
{
    if (!text && len)
        return pti_error_null(PT_ERR_NULL, "pti_gotmpl_parse: text is NULL");
    pti_gotmpl *t = pti_calloc(1, sizeof *t);
    if (!t)
        return pti_error_null(PT_ERR_OOM, "template: out of memory");
    /* text nodes point into the source: keep a copy with the tree */
    char *src = gt_arena_strndup(&t->arena, text ? text : "", len);
    if (!src) {
        pti_gotmpl_free(t);
        return pti_error_null(PT_ERR_OOM, "template: out of memory");
    }
    parser p = {.src = src, .len = len, .line = 1, .t = t};
    if (!declare_var(&p, "$")) {
        pti_gotmpl_free(t);
        return NULL;
    }
    list_end how = END_EOF;
    t->root = parse_list(&p, &how);
    if (t->root && how != END_EOF)
        fail(&p, PT_ERR_FORMAT, "unexpected {{%s}}", how == END_END ? "end" : "else");
    free(p.vars);
    if (p.failed || !t->root) {
        pti_gotmpl_free(t);
        return NULL;
    }
    walk w = {0, 0};
    number_node(&w, t->root);
    t->response_cut_seq = w.response_seq;
    return t;
}

void pti_gotmpl_free(pti_gotmpl *t)
{
    if (!t)
        return;
    gt_arena_free(&t->arena);
    free(t);
}

char *pti_gotmpl_execute(const pti_gotmpl *t, const cJSON *data, size_t *out_len)
{
    if (!t)
        return pti_error_null(PT_ERR_NULL, "pti_gotmpl_execute: template is NULL");
    return gt_execute(t, data, 0, out_len);
}

static bool pipe_refs(const gt_pipe *pp, const char *field);

static bool arg_refs(const gt_arg *a, const char *field)
{
    if ((a->kind == GA_FIELD || a->kind == GA_VAR || a->kind == GA_PIPE) && ident_is(a, field))
        return true;
    return a->kind == GA_PIPE && pipe_refs(a->pipe, field);
}

static bool pipe_refs(const gt_pipe *pp, const char *field)
{
    for (int c = 0; pp && c < pp->ncmds; c++)
        for (int i = 0; i < pp->cmds[c]->nargs; i++)
            if (arg_refs(pp->cmds[c]->args[i], field))
                return true;
    return false;
}

static bool node_refs(const gt_node *n, const char *field)
{
    if (!n)
        return false;
    if (n->kind == GN_LIST) {
        for (int i = 0; i < n->nkids; i++)
            if (node_refs(n->kids[i], field))
                return true;
        return false;
    }
    return pipe_refs(n->pipe, field) || node_refs(n->list, field) || node_refs(n->else_list, field);
}

bool pti_gotmpl_references(const pti_gotmpl *t, const char *field)
{
    return t && field && node_refs(t->root, field);
}

static const gt_node *find_if(const gt_node *n, const char *field)
{
    if (!n)
        return NULL;
    if (n->kind == GN_IF && pipe_refs(n->pipe, field))
        return n;
    if (n->kind == GN_LIST) {
        for (int i = 0; i < n->nkids; i++) {
            const gt_node *f = find_if(n->kids[i], field);
            if (f)
                return f;
        }
        return NULL;
    }
    const gt_node *f = find_if(n->list, field);
    return f ? f : find_if(n->else_list, field);
}

static const gt_node *first_text(const gt_node *n)
{
    if (!n)
        return NULL;
    if (n->kind == GN_TEXT)
        return n;
    if (n->kind == GN_LIST) {
        for (int i = 0; i < n->nkids; i++) {
            const gt_node *f = first_text(n->kids[i]);
            if (f)
                return f;
        }
        return NULL;
    }
    const gt_node *f = first_text(n->list);
    return f ? f : first_text(n->else_list);
}

bool pti_gotmpl_first_text_in_if(const pti_gotmpl *t, const char *field, char *out, size_t cap)
{
    if (!t || !field || !out || cap == 0)
        return false;
    const gt_node *n = first_text(find_if(t->root, field) ? find_if(t->root, field)->list : NULL);
    if (!n)
        return false;
    size_t k = n->tlen < cap - 1 ? n->tlen : cap - 1;
    memcpy(out, n->text, k);
    out[k] = '\0';
    return true;
}
