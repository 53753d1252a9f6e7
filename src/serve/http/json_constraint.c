/* The JSON matcher behind constrained sampling (json_constraint.h): a pushdown automaton over
 * bytes that follows a JSON value, optionally guided by a compiled schema
 * (json_constraint_schema.c).
 *
 * State. A "thread" is one way of reading the text so far: a lexer state (what kind of token
 * we are in, and where in it) and a stack of open containers (object or array, its schema
 * node, and a count: items so far, or the next property position). With a schema, a union
 * (anyOf/oneOf) forks the thread into one per alternative when its value starts; threads that
 * cannot take a byte die, and identical threads merge. At most PTI_JSON_MAX_ALTS threads live
 * at once. The whole state is a few hundred bytes per live thread, of which only the lexer
 * and the used part of the stack are copied when allows() tries bytes on a scratch copy.
 *
 * Speed. allows() is called for every token of the vocabulary when the sampled token was
 * refused, so after each advance() the matcher records which first bytes can follow (256 bits)
 * and whether it sits in the plain middle of a string, where any printable ASCII other than
 * '"' and '\' is fine; most tokens are answered from those without running the automaton. */
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "../../core/utf8.h"
#include "json_constraint.h"
#include "json_constraint_internal.h"

/* At most twice the live bound during one byte: forks are added before dead threads go. */
#define CAP_THREADS (2 * PTI_JSON_MAX_ALTS)

enum mode {
    M_VALUE,    /* a value of `node` may start (ws allowed); F_ARR_FIRST: or ']' */
    M_STRING,   /* inside a string (F_KEY: a key of a free-form object) */
    M_LITERAL,  /* matching enum texts of `node` (F_BUILTIN: true/false/null) */
    M_NUMBER,   /* inside a number; sub = number phase */
    M_AFTER,    /* a value ended: ws, ',' or the closing bracket of the container */
    M_OBJ_OPEN, /* after '{': ws, a key or '}' */
    M_OBJ_KEY,  /* after ',' in an object: ws or a key */
    M_KEY,      /* matching the key texts of the object's properties */
    M_COLON,    /* after a key: ws or ':' (then a value of `node`) */
};

enum {
    F_KEY = 1 << 0,
    F_ARR_FIRST = 1 << 1,
    F_BUILTIN = 1 << 2,
    F_INT_ONLY = 1 << 3,
    F_WANT_LOW = 1 << 4, /* the \u escape being read must be a low surrogate */
};

/* Digits of a number's integer part, and of its exponent: llama.cpp's JSON grammars take
 * `[1-9] [0-9]{0,15}` and 16 exponent digits at most, so a model cannot run a number's digits on
 * until num_predict. */
#define JC_MAX_INT_DIGITS 16

/* string sub-states */
enum { S_PLAIN, S_UTF8, S_ESC, S_HEX, S_LOW_BACKSLASH, S_LOW_U };
/* number phases; the ones marked * may end the number */
enum { N_MINUS, N_ZERO /* * */, N_INT /* * */, N_DOT, N_FRAC /* * */, N_E, N_ESIGN, N_EXP /* * */ };

typedef struct frame {
    uint16_t node;
    uint8_t is_array;
    uint8_t pad;
    uint32_t count; /* array: items begun; object: position of the next property */
} frame;

typedef struct thread {
    uint8_t mode, depth, ws, flags;
    /* string: sub-state, UTF-8 bytes still needed and the range of the next one */
    uint8_t sub, need, lo, hi;
    uint16_t node;
    uint16_t pos;  /* literal/key: bytes matched; \u escape: hex digits read; number: integer or
                      exponent digits */
    uint32_t code; /* \u escape: value so far */
    uint32_t pad;
    uint64_t mask; /* literal/key candidates */
    frame stack[PTI_JSON_MAX_DEPTH];
} thread;

#define THREAD_HEAD offsetof(thread, stack)

typedef struct state {
    int32_t n;
    thread th[CAP_THREADS];
} state;

struct pti_json_matcher {
    jc_schema *schema;
    state st;
    uint8_t first[32];       /* bytes that may come next */
    uint8_t after_space[32]; /* bytes that may follow a blank coming next */
    bool plain_string;       /* every thread is in the plain middle of a string */
};

static const jc_lit builtin_lits[3] = {{"true", 4}, {"false", 5}, {"null", 4}};

static bool is_ws(uint8_t b)
{
    return b == ' ' || b == '\t' || b == '\n' || b == '\r';
}

static void copy_thread(thread *dst, const thread *src)
{
    memcpy(dst, src, THREAD_HEAD + (size_t)src->depth * sizeof(frame));
}

static bool same_thread(const thread *a, const thread *b)
{
    return memcmp(a, b, THREAD_HEAD) == 0 &&
           memcmp(a->stack, b->stack, (size_t)a->depth * sizeof(frame)) == 0;
}

static void copy_state(state *dst, const state *src)
{
    dst->n = src->n;
    for (int32_t i = 0; i < src->n; i++) {
        copy_thread(&dst->th[i], &src->th[i]);
    }
}

/* Switches mode, clearing every lexer field so equal states compare equal. */
static void set_mode(thread *t, uint8_t mode, uint16_t node)
{
    t->mode = mode;
    t->flags = 0;
    t->sub = t->need = t->lo = t->hi = 0;
    t->node = node;
    t->pos = 0;
    t->code = 0;
    t->mask = 0;
}

static frame *top(thread *t)
{
    return &t->stack[t->depth - 1];
}

/* A value of `node` comes next; a union forks one thread per alternative (the later ones
 * dropped when no room is left). */
static void enter_value(const jc_schema *s, state *st, thread *t, int32_t node, uint8_t flags)
{
    const jc_node *nd = &s->nodes[node];
    set_mode(t, M_VALUE, (uint16_t)(nd->kind == JN_UNION ? nd->alts[0] : node));
    t->flags = flags;
    for (int32_t k = 1; nd->kind == JN_UNION && k < nd->n_alts; k++) {
        if (st->n < CAP_THREADS) {
            thread *f = &st->th[st->n++];
            copy_thread(f, t);
            f->node = (uint16_t)nd->alts[k];
        }
    }
}

/* One gap between tokens, bounded as llama.cpp's JSON grammars bound it (grammars/json.gbnf
 * and json-schema-to-grammar's SPACE_RULE: `| " " | "\n" [ \t]{0,20}`): nothing, one blank,
 * or one newline followed by at most PTI_JSON_MAX_INDENT blanks or tabs. A looser bound (any
 * 16 of " \t\n\r") let small models fill every gap with "\r\n" until num_predict. t->ws:
 * 0 nothing yet, 1 after the blank, 2 + k after the newline and k indent bytes. */
static bool take_ws(thread *t, uint8_t b)
{
    if (t->ws == 0 && (b == ' ' || b == '\n')) {
        t->ws = b == ' ' ? 1 : 2;
        return true;
    }
    if (t->ws >= 2 && t->ws < 2 + PTI_JSON_MAX_INDENT && (b == ' ' || b == '\t')) {
        t->ws++;
        return true;
    }
    return false;
}

/* The candidates of mask whose text has byte b at pos. */
static uint64_t filter_lits(const jc_lit *lits, uint64_t mask, uint32_t pos, uint8_t b)
{
    uint64_t out = 0;
    for (uint64_t m = mask; m; m &= m - 1) {
        int k = __builtin_ctzll(m);
        if (lits[k].len > pos && (uint8_t)lits[k].text[pos] == b) {
            out |= 1ull << k;
        }
    }
    return out;
}

static bool any_len(const jc_lit *lits, uint64_t mask, uint32_t pos, bool longer)
{
    for (uint64_t m = mask; m; m &= m - 1) {
        int k = __builtin_ctzll(m);
        if (longer ? lits[k].len > pos : lits[k].len == pos) {
            return true;
        }
    }
    return false;
}

static const jc_lit *lits_of(const jc_schema *s, const thread *t)
{
    return t->flags & F_BUILTIN ? builtin_lits : s->nodes[t->node].lits;
}

/* No required property at or after position `from`. */
static bool may_close_object(const jc_node *nd, uint32_t from)
{
    if (nd->any_object) {
        return true;
    }
    for (int32_t k = (int32_t)from; k < nd->n_props; k++) {
        if (nd->props[k].required) {
            return false;
        }
    }
    return true;
}

static void pop_container(thread *t)
{
    t->depth--;
    set_mode(t, M_AFTER, 0);
}

static bool step_thread(const jc_schema *s, state *st, thread *t, uint8_t b);

/* ---- values --------------------------------------------------------------------------------- */

static bool start_literal(thread *t, const jc_lit *lits, uint64_t mask, uint8_t b)
{
    uint64_t m = filter_lits(lits, mask, 0, b);
    if (!m) {
        return false;
    }
    t->mode = M_LITERAL;
    t->mask = m;
    t->pos = 1;
    if (any_len(lits, m, 1, false) && !any_len(lits, m, 1, true)) {
        set_mode(t, M_AFTER, 0);
    }
    return true;
}

static bool open_container(const jc_schema *s, state *st, thread *t, bool is_array)
{
    if (t->depth >= PTI_JSON_MAX_DEPTH) {
        return false;
    }
    uint16_t node = t->node;
    t->stack[t->depth++] = (frame){.node = node, .is_array = is_array};
    if (is_array) {
        enter_value(s, st, t, s->nodes[node].items, F_ARR_FIRST);
    } else {
        set_mode(t, M_OBJ_OPEN, 0);
    }
    return true;
}

static bool step_value(const jc_schema *s, state *st, thread *t, uint8_t b)
{
    if (is_ws(b)) {
        /* none before the root value: llama.cpp's grammars start with it (`root ::= object`) */
        return t->depth > 0 && take_ws(t, b);
    }
    if (t->flags & F_ARR_FIRST) {
        frame *f = top(t);
        const jc_node *arr = &s->nodes[f->node];
        if (b == ']') {
            if (arr->min_items > 0) {
                return false;
            }
            pop_container(t);
            return true;
        }
        if (arr->max_items == 0) {
            return false;
        }
        f->count = 1;
        t->flags &= (uint8_t)~F_ARR_FIRST;
    }
    const jc_node *nd = &s->nodes[t->node];
    if (nd->n_lits > 0) {
        return start_literal(t, nd->lits, nd->n_lits == 64 ? ~0ull : (1ull << nd->n_lits) - 1, b);
    }
    uint8_t ty = nd->types;
    switch (b) {
    case '{': return (ty & JT_OBJECT) && open_container(s, st, t, false);
    case '[': return (ty & JT_ARRAY) && open_container(s, st, t, true);
    case '"':
        if (!(ty & JT_STRING)) {
            return false;
        }
        set_mode(t, M_STRING, t->node);
        return true;
    case 't':
    case 'f':
    case 'n': {
        uint64_t m = (ty & JT_BOOLEAN ? 3u : 0u) | (ty & JT_NULL ? 4u : 0u);
        set_mode(t, M_LITERAL, 0);
        t->flags = F_BUILTIN;
        return start_literal(t, builtin_lits, m, b);
    }
    default:
        if (!(ty & (JT_NUMBER | JT_INTEGER)) || !(b == '-' || (b >= '0' && b <= '9'))) {
            return false;
        }
        set_mode(t, M_NUMBER, t->node);
        t->flags = ty & JT_NUMBER ? 0 : F_INT_ONLY;
        t->sub = b == '-' ? N_MINUS : b == '0' ? N_ZERO : N_INT;
        t->pos = b == '-' ? 0 : 1;
        return true;
    }
}

static bool step_literal(const jc_schema *s, state *st, thread *t, uint8_t b)
{
    const jc_lit *lits = lits_of(s, t);
    uint64_t m = filter_lits(lits, t->mask, t->pos, b);
    if (m) {
        t->mask = m;
        t->pos++;
        if (any_len(lits, m, t->pos, false) && !any_len(lits, m, t->pos, true)) {
            set_mode(t, M_AFTER, 0);
        }
        return true;
    }
    if (!any_len(lits, t->mask, t->pos, false)) {
        return false;
    }
    set_mode(t, M_AFTER, 0); /* a whole value (a number) ended before b */
    return step_thread(s, st, t, b);
}

static bool is_digit(uint8_t b)
{
    return b >= '0' && b <= '9';
}

static bool step_number(const jc_schema *s, state *st, thread *t, uint8_t b)
{
    bool frac_ok = !(t->flags & F_INT_ONLY);
    switch (t->sub) {
    case N_MINUS:
        if (!is_digit(b)) {
            return false;
        }
        t->sub = b == '0' ? N_ZERO : N_INT;
        t->pos = 1;
        return true;
    case N_INT:
        if (is_digit(b) && t->pos < JC_MAX_INT_DIGITS) {
            t->pos++;
            return true;
        }
        /* fall through */
    case N_ZERO:
        if (frac_ok && b == '.') {
            t->sub = N_DOT;
            return true;
        }
        if (frac_ok && (b == 'e' || b == 'E')) {
            t->sub = N_E;
            return true;
        }
        break;
    case N_DOT:
        if (!is_digit(b)) {
            return false;
        }
        t->sub = N_FRAC;
        return true;
    case N_FRAC:
        if (is_digit(b)) {
            return true;
        }
        if (b == 'e' || b == 'E') {
            t->sub = N_E;
            return true;
        }
        break;
    case N_E:
        if (b == '+' || b == '-') {
            t->sub = N_ESIGN;
            return true;
        }
        /* fall through */
    case N_ESIGN:
        if (!is_digit(b)) {
            return false;
        }
        t->sub = N_EXP;
        t->pos = 1;
        return true;
    case N_EXP:
        if (is_digit(b) && t->pos < JC_MAX_INT_DIGITS) {
            t->pos++;
            return true;
        }
        break;
    }
    set_mode(t, M_AFTER, 0); /* the number ended before b */
    return step_thread(s, st, t, b);
}

/* ---- strings -------------------------------------------------------------------------------- */

static int hex_value(uint8_t b)
{
    return b >= '0' && b <= '9'   ? b - '0'
           : b >= 'a' && b <= 'f' ? b - 'a' + 10
           : b >= 'A' && b <= 'F' ? b - 'A' + 10
                                  : -1;
}

/* A hex digit of a \u escape: refuses as soon as every completion would be a lone low surrogate,
 * or (after a high surrogate) anything but a low one. */
static bool string_hex(thread *t, uint8_t b)
{
    int v = hex_value(b);
    if (v < 0) {
        return false;
    }
    t->code = t->code * 16 + (uint32_t)v;
    t->pos++;
    uint32_t shift = 4 * (4 - t->pos);
    uint32_t lo = t->code << shift, hi = lo + (1u << shift) - 1;
    bool want_low = t->flags & F_WANT_LOW;
    if (want_low ? (hi < 0xDC00 || lo > 0xDFFF) : (lo >= 0xDC00 && hi <= 0xDFFF)) {
        return false;
    }
    if (t->pos < 4) {
        return true;
    }
    bool high = !want_low && t->code >= 0xD800 && t->code <= 0xDBFF;
    t->flags &= (uint8_t)~F_WANT_LOW;
    t->sub = high ? S_LOW_BACKSLASH : S_PLAIN;
    t->pos = 0;
    t->code = 0;
    return true;
}

static bool string_lead_byte(thread *t, uint8_t b)
{
    if (b < 0x20 || b == 0x7f) {
        return false; /* raw control characters (and DEL, as llama.cpp's grammars) */
    }
    if (b < 0x80) {
        return true;
    }
    t->lo = 0x80;
    t->hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        t->need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
        t->need = 2;
        t->lo = b == 0xE0 ? 0xA0 : 0x80; /* no overlong forms */
        t->hi = b == 0xED ? 0x9F : 0xBF; /* no UTF-16 surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        t->need = 3;
        t->lo = b == 0xF0 ? 0x90 : 0x80;
        t->hi = b == 0xF4 ? 0x8F : 0xBF; /* nothing above U+10FFFF */
    } else {
        return false;
    }
    t->sub = S_UTF8;
    return true;
}

static bool step_string(thread *t, uint8_t b)
{
    switch (t->sub) {
    case S_PLAIN:
        if (b == '"') {
            if (t->flags & F_KEY) {
                set_mode(t, M_COLON, 0); /* free-form object: any value */
            } else {
                set_mode(t, M_AFTER, 0);
            }
            return true;
        }
        if (b == '\\') {
            t->sub = S_ESC;
            return true;
        }
        return string_lead_byte(t, b);
    case S_UTF8:
        if (b < t->lo || b > t->hi) {
            return false;
        }
        t->lo = 0x80;
        t->hi = 0xBF;
        if (--t->need == 0) {
            t->sub = S_PLAIN;
            t->lo = t->hi = 0;
        }
        return true;
    case S_ESC:
        if (b == 'u') {
            t->sub = S_HEX;
            return true;
        }
        if (!strchr("\"\\bfnrt", b) || b == 0) { /* llama.cpp's escapes: no \\/ */
            return false;
        }
        t->sub = S_PLAIN;
        return true;
    case S_HEX: return string_hex(t, b);
    case S_LOW_BACKSLASH:
        if (b != '\\') {
            return false;
        }
        t->sub = S_LOW_U;
        return true;
    case S_LOW_U:
        if (b != 'u') {
            return false;
        }
        t->sub = S_HEX;
        t->flags |= F_WANT_LOW;
        return true;
    }
    return false;
}

/* ---- containers ----------------------------------------------------------------------------- */

static bool step_after(const jc_schema *s, state *st, thread *t, uint8_t b)
{
    if (is_ws(b)) {
        return take_ws(t, b);
    }
    if (t->depth == 0) {
        return false;
    }
    frame *f = top(t);
    const jc_node *nd = &s->nodes[f->node];
    if (f->is_array) {
        if (b == ',' && f->count < nd->max_items) {
            f->count++;
            enter_value(s, st, t, nd->items, 0);
            return true;
        }
        if (b == ']' && f->count >= nd->min_items) {
            pop_container(t);
            return true;
        }
        return false;
    }
    if (b == ',' && (nd->any_object || f->count < (uint32_t)nd->n_props)) {
        set_mode(t, M_OBJ_KEY, 0);
        return true;
    }
    if (b == '}' && may_close_object(nd, f->count)) {
        pop_container(t);
        return true;
    }
    return false;
}

/* The properties a key may name at position `from`: the next ones up to the first required. */
static uint64_t key_candidates(const jc_node *nd, uint32_t from)
{
    uint64_t m = 0;
    for (int32_t k = (int32_t)from; k < nd->n_props; k++) {
        m |= 1ull << k;
        if (nd->props[k].required) {
            break;
        }
    }
    return m;
}

static bool step_object(const jc_schema *s, thread *t, uint8_t b)
{
    if (is_ws(b)) {
        return take_ws(t, b);
    }
    frame *f = top(t);
    const jc_node *nd = &s->nodes[f->node];
    if (b == '}' && t->mode == M_OBJ_OPEN && may_close_object(nd, 0)) {
        pop_container(t);
        return true;
    }
    if (b != '"') {
        return false;
    }
    if (nd->any_object) {
        set_mode(t, M_STRING, 0);
        t->flags = F_KEY;
        return true;
    }
    uint64_t m = key_candidates(nd, f->count); /* every key text starts with '"' */
    if (!m) {
        return false;
    }
    set_mode(t, M_KEY, 0);
    t->mask = m;
    t->pos = 1;
    return true;
}

static bool step_key(const jc_schema *s, thread *t, uint8_t b)
{
    frame *f = top(t);
    const jc_node *nd = &s->nodes[f->node];
    uint64_t m = 0;
    for (uint64_t c = t->mask; c; c &= c - 1) {
        int k = __builtin_ctzll(c);
        const jc_lit *key = &nd->props[k].key;
        if (key->len > t->pos && (uint8_t)key->text[t->pos] == b) {
            m |= 1ull << k;
        }
    }
    if (!m) {
        return false;
    }
    t->pos++;
    t->mask = m;
    for (uint64_t c = m; c; c &= c - 1) {
        int k = __builtin_ctzll(c);
        if (nd->props[k].key.len == t->pos) { /* the closing quote: exactly one key matched */
            f->count = (uint32_t)k + 1;
            set_mode(t, M_COLON, (uint16_t)nd->props[k].node);
            break;
        }
    }
    return true;
}

static bool step_thread(const jc_schema *s, state *st, thread *t, uint8_t b)
{
    bool ws_run = is_ws(b) && (t->mode == M_VALUE || t->mode == M_AFTER || t->mode == M_OBJ_OPEN ||
                               t->mode == M_OBJ_KEY || t->mode == M_COLON);
    if (!ws_run) {
        t->ws = 0;
    }
    switch (t->mode) {
    case M_VALUE: return step_value(s, st, t, b);
    case M_STRING: return step_string(t, b);
    case M_LITERAL: return step_literal(s, st, t, b);
    case M_NUMBER: return step_number(s, st, t, b);
    case M_AFTER: return step_after(s, st, t, b);
    case M_OBJ_OPEN:
    case M_OBJ_KEY: return step_object(s, t, b);
    case M_KEY: return step_key(s, t, b);
    case M_COLON:
        if (is_ws(b)) {
            return take_ws(t, b);
        }
        if (b != ':') {
            return false;
        }
        enter_value(s, st, t, t->node, 0);
        return true;
    }
    return false;
}

/* Feeds one byte to every thread; false when none survives. */
static bool step(const jc_schema *s, state *st, uint8_t b)
{
    int32_t n0 = st->n;
    bool alive[CAP_THREADS];
    for (int32_t i = 0; i < n0; i++) {
        alive[i] = step_thread(s, st, &st->th[i], b);
    }
    for (int32_t i = n0; i < st->n; i++) {
        alive[i] = true; /* forks made during this byte */
    }
    int32_t w = 0;
    for (int32_t i = 0; i < st->n && w < PTI_JSON_MAX_ALTS; i++) {
        if (!alive[i]) {
            continue;
        }
        bool dup = false;
        for (int32_t k = 0; k < w && !dup; k++) {
            dup = same_thread(&st->th[k], &st->th[i]);
        }
        if (!dup) {
            if (w != i) {
                copy_thread(&st->th[w], &st->th[i]);
            }
            w++;
        }
    }
    st->n = w;
    return w > 0;
}

/* ---- the matcher ---------------------------------------------------------------------------- */

static bool has_bit(const uint8_t *set, uint8_t b)
{
    return set[b >> 3] & (1u << (b & 7));
}

/* The bytes that may follow st, as a 256-bit set. */
static void next_bytes(const jc_schema *s, const state *st, uint8_t *set)
{
    memset(set, 0, 32);
    state scratch;
    for (int b = 0; b < 256; b++) {
        copy_state(&scratch, st);
        if (step(s, &scratch, (uint8_t)b)) {
            set[b >> 3] |= (uint8_t)(1u << (b & 7));
        }
    }
}

/* Records which bytes may come next (and after a blank: most tokens of byte-level BPE
 * vocabularies start with one) and whether the plain-string shortcut applies. */
static void summarise(pti_json_matcher *m)
{
    m->plain_string = m->st.n > 0;
    for (int32_t i = 0; i < m->st.n; i++) {
        const thread *t = &m->st.th[i];
        m->plain_string &= t->mode == M_STRING && t->sub == S_PLAIN;
    }
    next_bytes(m->schema, &m->st, m->first);
    memset(m->after_space, 0, sizeof m->after_space);
    if (has_bit(m->first, ' ')) {
        state after;
        copy_state(&after, &m->st);
        step(m->schema, &after, ' ');
        next_bytes(m->schema, &after, m->after_space);
    }
}

pti_json_matcher *pti_json_matcher_new(const cJSON *schema)
{
    pti_json_matcher *m = pti_calloc(1, sizeof *m);
    if (!m) {
        return pti_error_null(PT_ERR_OOM, "json constraint: out of memory");
    }
    m->schema = jc_schema_compile(schema);
    if (!m->schema) {
        free(m);
        return NULL;
    }
    m->st.n = 1;
    thread *t = &m->st.th[0];
    memset(t, 0, sizeof *t);
    enter_value(m->schema, &m->st, t, m->schema->root, 0);
    summarise(m);
    return m;
}

void pti_json_matcher_free(pti_json_matcher *m)
{
    if (!m) {
        return;
    }
    jc_schema_free(m->schema);
    free(m);
}

/* Whole valid UTF-8 characters with no quote, backslash or control character: what the plain
 * middle of a string takes without changing state. */
static bool plain_string_bytes(const char *bytes, size_t n)
{
    const uint8_t *p = (const uint8_t *)bytes;
    size_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        if (b < 0x80) {
            if (b < 0x20 || b == 0x7f || b == '"' || b == '\\') {
                return false;
            }
            i++;
            continue;
        }
        size_t len = pti_utf8_char_len(p + i, n - i);
        if (len == 0) {
            return false; /* a character split across tokens takes the slow path */
        }
        i += len;
    }
    return true;
}

bool pti_json_matcher_allows(const pti_json_matcher *m, const char *bytes, size_t n)
{
    if (!m || (n > 0 && !bytes)) {
        return false;
    }
    if (n == 0) {
        return m->st.n > 0;
    }
    if (!has_bit(m->first, (uint8_t)bytes[0])) {
        return false;
    }
    if (n == 1 || (m->plain_string && plain_string_bytes(bytes, n))) {
        return true;
    }
    if (bytes[0] == ' ' && !has_bit(m->after_space, (uint8_t)bytes[1])) {
        return false;
    }
    state scratch;
    copy_state(&scratch, &m->st);
    for (size_t i = 0; i < n; i++) {
        if (!step(m->schema, &scratch, (uint8_t)bytes[i])) {
            return false;
        }
    }
    return true;
}

void pti_json_matcher_advance(pti_json_matcher *m, const char *bytes, size_t n)
{
    if (!m || n == 0 || !bytes) {
        return;
    }
    for (size_t i = 0; i < n && m->st.n > 0; i++) {
        step(m->schema, &m->st, (uint8_t)bytes[i]);
    }
    summarise(m);
}

static bool thread_complete(const jc_schema *s, const thread *t)
{
    if (t->depth != 0) {
        return false;
    }
    switch (t->mode) {
    case M_AFTER: return true;
    case M_NUMBER:
        return t->sub == N_ZERO || t->sub == N_INT || t->sub == N_FRAC || t->sub == N_EXP;
    case M_LITERAL: return any_len(lits_of(s, t), t->mask, t->pos, false);
    default: return false;
    }
}

bool pti_json_matcher_complete(const pti_json_matcher *m)
{
    if (!m) {
        return false;
    }
    for (int32_t i = 0; i < m->st.n; i++) {
        if (thread_complete(m->schema, &m->st.th[i])) {
            return true;
        }
    }
    return false;
}

bool pti_json_matcher_done(const pti_json_matcher *m)
{
    if (!m || m->st.n == 0) {
        return false;
    }
    for (int32_t i = 0; i < m->st.n; i++) {
        const thread *t = &m->st.th[i];
        if (t->depth != 0 || t->mode != M_AFTER) {
            return false;
        }
    }
    return true;
}

/* ---- the engine's interface ----------------------------------------------------------------- */

static bool constraint_allows(const void *state, const char *bytes, size_t n)
{
    return pti_json_matcher_allows(state, bytes, n);
}

static void constraint_advance(void *state, const char *bytes, size_t n)
{
    pti_json_matcher_advance(state, bytes, n);
}

static bool constraint_complete(const void *state)
{
    return pti_json_matcher_complete(state);
}

static bool constraint_done(const void *state)
{
    return pti_json_matcher_done(state);
}

static void constraint_free(void *state)
{
    pti_json_matcher_free(state);
}

pti_constraint pti_json_constraint(pti_json_matcher *m)
{
    if (!m) {
        return (pti_constraint){0};
    }
    return (pti_constraint){.allows = constraint_allows,
                            .advance = constraint_advance,
                            .complete = constraint_complete,
                            .done = constraint_done,
                            .free = constraint_free,
                            .state = m};
}
