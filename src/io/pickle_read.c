/* The restricted pickle VM (pickle_read.h): runs the opcodes of a Python pickle (protocols
 * 0-5) over a pt_value stack, never importing or calling anything. GLOBAL pushes an inert
 * PTI_VALUE_GLOBAL node naming "module.name"; REDUCE / NEWOBJ / BUILD hand such nodes to
 * pickle_read_globals.c, which knows the few callables a checkpoint may use (the allowlist of
 * PyTorch's weights_only loader) and refuses or stubs everything else.
 *
 * Safety design: every operand length is checked against the bytes left before anything is
 * allocated, so memory stays proportional to the input; memo keys above the input length are
 * refused (a sane writer numbers them 0, 1, ...), which bounds the dense memo array. Every
 * container the VM makes is registered in a tracker that holds its own reference. Pickles can
 * build reference cycles (EMPTY_LIST PUT GET APPEND) and exponentially shared trees ("billion
 * laughs"); nothing here recurses on the C stack, and at STOP one linear pass over the tracked
 * containers (Kahn's topological sort) finds cycles, and a second computes, for the part
 * reachable from the result, its nesting depth and its size counted as if unshared, both
 * checked against PTI_PICKLE_MAX_DEPTH / PTI_PICKLE_MAX_EXPANDED. On any failure every
 * tracked container is emptied first, which breaks all cycles, and then released: no leaks.
 * The same final pass turns the internal forms into public kinds: sets (dicts {item: None}
 * while the VM runs, for Python's dedup and hashability) become lists in place, globals left
 * in the result become their name as a str, or are refused. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_read_internal.h"

/* Largest tuple (nodes through nested tuples) used as a dict key: hashing walks it whole. */
#define PK_MAX_KEY_NODES 100000

/* ---- opcodes ----------------------------------------------------------------------------- */

enum {
    OP_MARK = '(', OP_STOP = '.', OP_POP = '0', OP_POP_MARK = '1', OP_DUP = '2',
    OP_FLOAT = 'F', OP_INT = 'I', OP_BININT = 'J', OP_BININT1 = 'K', OP_LONG = 'L',
    OP_BININT2 = 'M', OP_NONE = 'N', OP_PERSID = 'P', OP_BINPERSID = 'Q', OP_REDUCE = 'R',
    OP_STRING = 'S', OP_BINSTRING = 'T', OP_SHORT_BINSTRING = 'U', OP_UNICODE = 'V',
    OP_BINUNICODE = 'X', OP_APPEND = 'a', OP_BUILD = 'b', OP_GLOBAL = 'c', OP_DICT = 'd',
    OP_EMPTY_DICT = '}', OP_APPENDS = 'e', OP_GET = 'g', OP_BINGET = 'h', OP_INST = 'i',
    OP_LONG_BINGET = 'j', OP_LIST = 'l', OP_EMPTY_LIST = ']', OP_OBJ = 'o', OP_PUT = 'p',
    OP_BINPUT = 'q', OP_LONG_BINPUT = 'r', OP_SETITEM = 's', OP_TUPLE = 't',
    OP_EMPTY_TUPLE = ')', OP_SETITEMS = 'u', OP_BINFLOAT = 'G',
    OP_PROTO = 0x80, OP_NEWOBJ = 0x81, OP_EXT1 = 0x82, OP_EXT2 = 0x83, OP_EXT4 = 0x84,
    OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a, OP_LONG4 = 0x8b,
    OP_BINBYTES = 'B', OP_SHORT_BINBYTES = 'C',
    OP_SHORT_BINUNICODE = 0x8c, OP_BINUNICODE8 = 0x8d, OP_BINBYTES8 = 0x8e, OP_EMPTY_SET = 0x8f,
    OP_ADDITEMS = 0x90, OP_FROZENSET = 0x91, OP_NEWOBJ_EX = 0x92, OP_STACK_GLOBAL = 0x93,
    OP_MEMOIZE = 0x94, OP_FRAME = 0x95,
    OP_BYTEARRAY8 = 0x96, OP_NEXT_BUFFER = 0x97, OP_READONLY_BUFFER = 0x98,
};

const char *pk_op_name(uint8_t op)
{
    switch (op) {
    case OP_MARK: return "MARK";
    case OP_STOP: return "STOP";
    case OP_POP: return "POP";
    case OP_POP_MARK: return "POP_MARK";
    case OP_DUP: return "DUP";
    case OP_FLOAT: return "FLOAT";
    case OP_INT: return "INT";
    case OP_BININT: return "BININT";
    case OP_BININT1: return "BININT1";
    case OP_LONG: return "LONG";
    case OP_BININT2: return "BININT2";
    case OP_NONE: return "NONE";
    case OP_PERSID: return "PERSID";
    case OP_BINPERSID: return "BINPERSID";
    case OP_REDUCE: return "REDUCE";
    case OP_STRING: return "STRING";
    case OP_BINSTRING: return "BINSTRING";
    case OP_SHORT_BINSTRING: return "SHORT_BINSTRING";
    case OP_UNICODE: return "UNICODE";
    case OP_BINUNICODE: return "BINUNICODE";
    case OP_APPEND: return "APPEND";
    case OP_BUILD: return "BUILD";
    case OP_GLOBAL: return "GLOBAL";
    case OP_DICT: return "DICT";
    case OP_EMPTY_DICT: return "EMPTY_DICT";
    case OP_APPENDS: return "APPENDS";
    case OP_GET: return "GET";
    case OP_BINGET: return "BINGET";
    case OP_INST: return "INST";
    case OP_LONG_BINGET: return "LONG_BINGET";
    case OP_LIST: return "LIST";
    case OP_EMPTY_LIST: return "EMPTY_LIST";
    case OP_OBJ: return "OBJ";
    case OP_PUT: return "PUT";
    case OP_BINPUT: return "BINPUT";
    case OP_LONG_BINPUT: return "LONG_BINPUT";
    case OP_SETITEM: return "SETITEM";
    case OP_TUPLE: return "TUPLE";
    case OP_EMPTY_TUPLE: return "EMPTY_TUPLE";
    case OP_SETITEMS: return "SETITEMS";
    case OP_BINFLOAT: return "BINFLOAT";
    case OP_PROTO: return "PROTO";
    case OP_NEWOBJ: return "NEWOBJ";
    case OP_EXT1: return "EXT1";
    case OP_EXT2: return "EXT2";
    case OP_EXT4: return "EXT4";
    case OP_TUPLE1: return "TUPLE1";
    case OP_TUPLE2: return "TUPLE2";
    case OP_TUPLE3: return "TUPLE3";
    case OP_NEWTRUE: return "NEWTRUE";
    case OP_NEWFALSE: return "NEWFALSE";
    case OP_LONG1: return "LONG1";
    case OP_LONG4: return "LONG4";
    case OP_BINBYTES: return "BINBYTES";
    case OP_SHORT_BINBYTES: return "SHORT_BINBYTES";
    case OP_SHORT_BINUNICODE: return "SHORT_BINUNICODE";
    case OP_BINUNICODE8: return "BINUNICODE8";
    case OP_BINBYTES8: return "BINBYTES8";
    case OP_EMPTY_SET: return "EMPTY_SET";
    case OP_ADDITEMS: return "ADDITEMS";
    case OP_FROZENSET: return "FROZENSET";
    case OP_NEWOBJ_EX: return "NEWOBJ_EX";
    case OP_STACK_GLOBAL: return "STACK_GLOBAL";
    case OP_MEMOIZE: return "MEMOIZE";
    case OP_FRAME: return "FRAME";
    case OP_BYTEARRAY8: return "BYTEARRAY8";
    case OP_NEXT_BUFFER: return "NEXT_BUFFER";
    case OP_READONLY_BUFFER: return "READONLY_BUFFER";
    default: return "opcode";
    }
}

/* ---- errors ------------------------------------------------------------------------------ */

bool pk_fail(pk_vm *vm, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pti_error(PT_ERR_FORMAT, "%s: pickle: %s: %s at byte %zu", vm->what, pk_op_name(vm->op), msg,
              vm->op_pos);
    return false;
}

bool pk_unsupported(pk_vm *vm, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pti_error(PT_ERR_UNSUPPORTED, "%s: pickle: %s", vm->what, msg);
    return false;
}

/* What a value is, for messages: sets, stubs and globals by their role. */
static const char *describe(pk_vm *vm, const pt_value *v)
{
    pk_track *t = pk_tracked(vm, v);
    if (t && (t->flags & PK_SET))
        return "set";
    if (t && (t->flags & PK_FROZENSET))
        return "frozenset";
    if (t && (t->flags & PK_STUB))
        return "object";
    return pt_value_kind_name(v->kind);
}

/* ---- container tracking -------------------------------------------------------------------- */

static size_t ptr_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static void map_insert(pk_vm *vm, const pt_value *v, size_t idx1)
{
    size_t mask = vm->map_cap - 1;
    size_t s = ptr_hash(v) & mask;
    while (vm->map[s])
        s = (s + 1) & mask;
    vm->map[s] = (uint32_t)idx1;
}

static bool map_grow(pk_vm *vm)
{
    size_t cap = vm->map_cap ? vm->map_cap * 2 : 64;
    uint32_t *m = pti_calloc(cap, sizeof *m);
    if (!m)
        return false;
    free(vm->map);
    vm->map = m;
    vm->map_cap = cap;
    for (size_t i = 0; i < vm->ntr; i++)
        map_insert(vm, vm->tr[i].v, i + 1);
    return true;
}

pk_track *pk_tracked(pk_vm *vm, const pt_value *v)
{
    if (!vm->map_cap || !v)
        return NULL;
    size_t mask = vm->map_cap - 1;
    for (size_t s = ptr_hash(v) & mask; vm->map[s]; s = (s + 1) & mask)
        if (vm->tr[vm->map[s] - 1].v == v)
            return &vm->tr[vm->map[s] - 1];
    return NULL;
}

/* Registers v (the tracker takes its own reference); false on OOM (v untouched). */
static bool track(pk_vm *vm, pt_value *v, uint32_t flags, uint32_t tuple_size)
{
    if (vm->ntr >= UINT32_MAX - 1)
        return pk_fail(vm, "more than %u containers", (unsigned)(UINT32_MAX - 1));
    if ((vm->ntr + 1) * 2 > vm->map_cap && !map_grow(vm))
        return false;
    if (vm->ntr == vm->tr_cap) {
        size_t cap = vm->tr_cap ? vm->tr_cap * 2 : 64;
        pk_track *t = realloc(vm->tr, cap * sizeof *t);
        if (!t)
            return pti_error(PT_ERR_OOM, "%s: pickle: out of memory", vm->what), false;
        vm->tr = t;
        vm->tr_cap = cap;
    }
    vm->tr[vm->ntr] = (pk_track){pt_value_retain(v), flags, tuple_size};
    vm->ntr++;
    map_insert(vm, v, vm->ntr);
    return true;
}

pt_value *pk_new_container(pk_vm *vm, pt_value_kind kind, uint32_t flags)
{
    pt_value *v = pti_value_node_new(kind, 0);
    if (v && !track(vm, v, flags, 1)) {
        pt_value_free(v);
        v = NULL;
    }
    return v;
}

/* Drops every item of a tracked container (breaks cycles before the final release). */
static void empty_container(pt_value *v)
{
    if (v->kind == PT_VALUE_LIST || v->kind == PT_VALUE_TUPLE) {
        pt_value **items = v->u.seq.items;
        int64_t n = v->u.seq.len;
        v->u.seq.items = NULL;
        v->u.seq.len = v->u.seq.cap = 0;
        for (int64_t k = 0; k < n; k++)
            pt_value_free(items[k]);
        free(items);
    } else if (v->kind == PT_VALUE_DICT) {
        pti_dict_entry *e = v->u.dict.entries;
        int64_t n = v->u.dict.len;
        free(v->u.dict.index);
        v->u.dict.entries = NULL;
        v->u.dict.index = NULL;
        v->u.dict.len = v->u.dict.cap = v->u.dict.index_cap = 0;
        for (int64_t k = 0; k < n; k++) {
            pt_value_free(e[k].key);
            pt_value_free(e[k].val);
        }
        free(e);
    }
}

/* ---- container helpers -------------------------------------------------------------------- */

bool pk_list_append(pk_vm *vm, pt_value *list, pt_value *item)
{
    if (item == list) {
        pt_value_free(item);
        return pk_fail(vm, "reference cycle: a list cannot contain itself");
    }
    if (pt_value_append(list, item) != PT_OK)
        return false; /* OOM only: kinds were checked by the caller */
    return true;
}

static bool key_hashable(pk_vm *vm, const pt_value *key)
{
    switch (key->kind) {
    case PT_VALUE_NONE:
    case PT_VALUE_BOOL:
    case PT_VALUE_INT:
    case PT_VALUE_FLOAT:
    case PT_VALUE_STR:
    case PT_VALUE_BYTES: return true;
    case PT_VALUE_TUPLE: {
        pk_track *t = pk_tracked(vm, key);
        if (t && t->tuple_size > PK_MAX_KEY_NODES)
            return pk_fail(vm, "a dict key or set item is a tuple of more than %d nested items",
                           PK_MAX_KEY_NODES);
        return true;
    }
    default:
        return pk_fail(vm, "unhashable dict key or set item (a %s)", describe(vm, key));
    }
}

bool pk_dict_set(pk_vm *vm, pt_value *dict, pt_value *key, pt_value *val)
{
    bool ok = true;
    if (val == dict || key == dict)
        ok = pk_fail(vm, "reference cycle: a dict cannot contain itself");
    else
        ok = key_hashable(vm, key);
    if (!ok) {
        pt_value_free(key);
        pt_value_free(val);
        return false;
    }
    pt_status st = pt_value_dict_set(dict, key, val);
    if (st == PT_OK || st == PT_ERR_OOM)
        return st == PT_OK;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", pt_last_error());
    return pk_fail(vm, "bad dict key (%s)", msg);
}

bool pk_dict_set_str(pk_vm *vm, pt_value *dict, const char *key, pt_value *val)
{
    pt_value *k = pt_value_str(key);
    if (!k) {
        pt_value_free(val);
        return false;
    }
    return pk_dict_set(vm, dict, k, val);
}

/* The list or dict `key` of a stub (created on first use): where APPEND/SETITEM on an object
 * of a list or dict subclass put their items. Borrowed. */
static pt_value *stub_items(pk_vm *vm, pt_value *stub, pt_value_kind kind)
{
    pt_value *probe_holder = pt_value_str("__items__");
    if (!probe_holder)
        return NULL;
    uint64_t h;
    pti_value_hash(probe_holder, &h, 0);
    int64_t e = pti_dict_find(stub, probe_holder, h);
    if (e >= 0) {
        pt_value_free(probe_holder);
        pt_value *it = stub->u.dict.entries[e].val;
        if (it->kind != kind)
            return pk_fail(vm, "an object gets both list and dict items"), NULL;
        return it;
    }
    pt_value *c = pk_new_container(vm, kind, 0);
    if (!c) {
        pt_value_free(probe_holder);
        return NULL;
    }
    if (!pk_dict_set(vm, stub, probe_holder, pt_value_retain(c))) {
        pt_value_free(c);
        return NULL;
    }
    pt_value_free(c); /* the stub holds it now */
    return c;
}

/* ---- stack and memo ------------------------------------------------------------------------ */

static bool push(pk_vm *vm, pt_value *v)
{
    if (!v)
        return false;
    if (vm->sp == vm->stack_cap) {
        size_t cap = vm->stack_cap ? vm->stack_cap * 2 : 64;
        pt_value **s = realloc(vm->stack, cap * sizeof *s);
        if (!s) {
            pt_value_free(v);
            return pti_error(PT_ERR_OOM, "%s: pickle: out of memory", vm->what), false;
        }
        vm->stack = s;
        vm->stack_cap = cap;
    }
    vm->stack[vm->sp++] = v;
    return true;
}

/* Items above the innermost MARK (what pops may take). */
static size_t avail(const pk_vm *vm)
{
    return vm->sp - (vm->nmarks ? vm->marks[vm->nmarks - 1] : 0);
}

static bool need_items(pk_vm *vm, size_t n)
{
    if (avail(vm) >= n)
        return true;
    return pk_fail(vm, "stack underflow (needs %zu item%s, %zu above the last MARK)", n,
                   n == 1 ? "" : "s", avail(vm));
}

/* Pops one value (owned); NULL with the error set on underflow. */
static pt_value *pop(pk_vm *vm)
{
    return need_items(vm, 1) ? vm->stack[--vm->sp] : NULL;
}

/* Pops the innermost MARK; *base gets the stack height it recorded. */
static bool pop_mark(pk_vm *vm, size_t *base)
{
    if (!vm->nmarks)
        return pk_fail(vm, "no MARK on the stack");
    *base = vm->marks[--vm->nmarks];
    return true;
}

static void release_range(pk_vm *vm, size_t from)
{
    while (vm->sp > from)
        pt_value_free(vm->stack[--vm->sp]);
}

static bool memo_put(pk_vm *vm, uint64_t idx)
{
    if (!vm->sp || avail(vm) == 0)
        return pk_fail(vm, "nothing on the stack to memoize");
    if (idx > vm->len)
        return pk_fail(vm, "memo index %llu is impossible in a %zu-byte pickle",
                       (unsigned long long)idx, vm->len);
    if (idx >= vm->memo_cap) {
        size_t cap = vm->memo_cap ? vm->memo_cap : 64;
        while (cap <= idx)
            cap *= 2;
        if (cap > vm->len + 1)
            cap = vm->len + 1;
        pt_value **m = realloc(vm->memo, cap * sizeof *m);
        if (!m)
            return pti_error(PT_ERR_OOM, "%s: pickle: out of memory", vm->what), false;
        memset(m + vm->memo_cap, 0, (cap - vm->memo_cap) * sizeof *m);
        vm->memo = m;
        vm->memo_cap = cap;
    }
    if (vm->memo[idx])
        pt_value_free(vm->memo[idx]);
    else
        vm->memo_count++;
    vm->memo[idx] = pt_value_retain(vm->stack[vm->sp - 1]);
    return true;
}

static bool memo_get(pk_vm *vm, uint64_t idx)
{
    if (idx >= vm->memo_cap || !vm->memo[idx])
        return pk_fail(vm, "memo index %llu was never stored", (unsigned long long)idx);
    return push(vm, pt_value_retain(vm->memo[idx]));
}

/* ---- reading operands ----------------------------------------------------------------------- */

static bool need_bytes(pk_vm *vm, uint64_t n)
{
    size_t left = vm->len - vm->pos;
    if (n <= left)
        return true;
    return pk_fail(vm, "truncated: needs %llu byte%s, %zu left", (unsigned long long)n,
                   n == 1 ? "" : "s", left);
}

static uint64_t rd_le(pk_vm *vm, int n)
{
    uint64_t v = 0;
    for (int k = 0; k < n; k++)
        v |= (uint64_t)vm->data[vm->pos + (size_t)k] << (8 * k);
    vm->pos += (size_t)n;
    return v;
}

/* A little-endian unsigned operand of n bytes; false when truncated. */
static bool rd_uint(pk_vm *vm, int n, uint64_t *out)
{
    if (!need_bytes(vm, (uint64_t)n))
        return false;
    *out = rd_le(vm, n);
    return true;
}

/* A text line (without its '\n'); false when no newline follows. */
static bool rd_line(pk_vm *vm, const char **s, size_t *n)
{
    const uint8_t *start = vm->data + vm->pos;
    const uint8_t *nl = memchr(start, '\n', vm->len - vm->pos);
    if (!nl)
        return pk_fail(vm, "truncated: a text operand without its newline");
    *s = (const char *)start;
    *n = (size_t)(nl - start);
    vm->pos += *n + 1;
    return true;
}

/* Parses a decimal integer (optional sign, surrounding blanks, a trailing 'L' if allow_l):
 * 0 ok, 1 malformed, 2 too large for int64. */
static int parse_decimal(const char *s, size_t n, bool allow_l, int64_t *out)
{
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\t'))
        n--;
    if (allow_l && n && s[n - 1] == 'L')
        n--;
    while (n && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    bool neg = false;
    if (n && (*s == '-' || *s == '+')) {
        neg = *s == '-';
        s++;
        n--;
    }
    if (!n)
        return 1;
    uint64_t mag = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    bool big = false;
    for (size_t k = 0; k < n; k++) {
        if (s[k] < '0' || s[k] > '9')
            return 1;
        unsigned d = (unsigned)(s[k] - '0');
        if (big || mag > (limit - d) / 10)
            big = true;
        else
            mag = mag * 10 + d;
    }
    if (big)
        return 2;
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return 0;
}

static bool text_int(pk_vm *vm, bool allow_l, int64_t *out)
{
    const char *s;
    size_t n;
    if (!rd_line(vm, &s, &n))
        return false;
    int r = parse_decimal(s, n, allow_l, out);
    if (r == 2)
        return pk_fail(vm, "integer too large (beyond int64)");
    if (r == 1)
        return pk_fail(vm, "malformed integer '%.*s'", (int)(n < 40 ? n : 40), s);
    return true;
}

/* Two's-complement little-endian integer of n bytes (LONG1 / LONG4). */
static bool push_long_bytes(pk_vm *vm, uint64_t n)
{
    if (!need_bytes(vm, n))
        return false;
    const uint8_t *b = vm->data + vm->pos;
    vm->pos += (size_t)n;
    if (n == 0)
        return push(vm, pt_value_int(0));
    bool neg = b[n - 1] & 0x80;
    if (n > 8) {
        for (uint64_t k = 8; k < n; k++)
            if (b[k] != (neg ? 0xff : 0x00))
                return pk_fail(vm, "integer too large (beyond int64)");
        if (((b[7] & 0x80) != 0) != neg)
            return pk_fail(vm, "integer too large (beyond int64)");
    }
    uint64_t v = neg ? ~(uint64_t)0 : 0;
    size_t m = n < 8 ? (size_t)n : 8;
    for (size_t k = 0; k < m; k++) {
        v &= ~((uint64_t)0xff << (8 * k));
        v |= (uint64_t)b[k] << (8 * k);
    }
    int64_t i;
    memcpy(&i, &v, sizeof i);
    return push(vm, pt_value_int(i));
}

/* UTF-8 as Python's 'utf-8' codec with 'surrogatepass' accepts it (the pickler's encoding). */
static bool valid_utf8(const uint8_t *s, size_t n)
{
    size_t k = 0;
    while (k < n) {
        uint8_t c = s[k];
        if (c < 0x80) {
            k++;
            continue;
        }
        int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                                              : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!len || n - k < (size_t)len)
            return false;
        for (int j = 1; j < len; j++)
            if ((s[k + (size_t)j] & 0xc0) != 0x80)
                return false;
        if ((c == 0xe0 && s[k + 1] < 0xa0) || (c == 0xf0 && s[k + 1] < 0x90) ||
            (c == 0xf4 && s[k + 1] > 0x8f))
            return false; /* overlong or beyond U+10FFFF */
        k += (size_t)len;
    }
    return true;
}

/* A counted str operand of n bytes (BINUNICODE and friends). */
static bool push_utf8(pk_vm *vm, uint64_t n)
{
    if (!need_bytes(vm, n))
        return false;
    const uint8_t *s = vm->data + vm->pos;
    vm->pos += (size_t)n;
    if (!valid_utf8(s, (size_t)n))
        return pk_fail(vm, "invalid UTF-8 in a %llu-byte string", (unsigned long long)n);
    return push(vm, pt_value_strn((const char *)s, (size_t)n));
}

static bool push_bytes(pk_vm *vm, uint64_t n)
{
    if (!need_bytes(vm, n))
        return false;
    const uint8_t *s = vm->data + vm->pos;
    vm->pos += (size_t)n;
    return push(vm, pt_value_bytes(s, (size_t)n));
}

/* A Python 2 str: a str when it is valid UTF-8 (ASCII names, keys), else bytes. */
static bool push_py2_str(pk_vm *vm, const uint8_t *s, size_t n)
{
    if (valid_utf8(s, n))
        return push(vm, pt_value_strn((const char *)s, n));
    return push(vm, pt_value_bytes(s, n));
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* STRING: the repr of a Python 2 str, 'abc' or "abc" with backslash escapes. */
static bool op_string(pk_vm *vm)
{
    const char *s;
    size_t n;
    if (!rd_line(vm, &s, &n))
        return false;
    while (n && s[n - 1] == '\r')
        n--;
    if (n < 2 || (s[0] != '\'' && s[0] != '"') || s[n - 1] != s[0])
        return pk_fail(vm, "the STRING argument must be quoted");
    uint8_t *out = pti_malloc(n);
    if (!out)
        return false;
    size_t o = 0;
    for (size_t k = 1; k + 1 < n; k++) {
        char c = s[k];
        if (c != '\\' || k + 2 >= n) {
            out[o++] = (uint8_t)c;
            continue;
        }
        char e = s[++k];
        const char *simple = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
        const char *hit = NULL;
        for (const char *p = simple; *p; p += 2)
            if (*p == e)
                hit = p;
        if (hit) {
            out[o++] = (uint8_t)hit[1];
        } else if (e == 'x' && k + 2 < n - 1 && hexval(s[k + 1]) >= 0 && hexval(s[k + 2]) >= 0) {
            out[o++] = (uint8_t)(hexval(s[k + 1]) * 16 + hexval(s[k + 2]));
            k += 2;
        } else if (e >= '0' && e <= '7') {
            unsigned v = (unsigned)(e - '0');
            for (int d = 0; d < 2 && k + 1 < n - 1 && s[k + 1] >= '0' && s[k + 1] <= '7'; d++)
                v = v * 8 + (unsigned)(s[++k] - '0');
            out[o++] = (uint8_t)v;
        } else if (e == 'x') {
            free(out);
            return pk_fail(vm, "bad \\x escape in a STRING");
        } else {
            out[o++] = '\\';
            out[o++] = (uint8_t)e;
        }
    }
    bool ok = push_py2_str(vm, out, o);
    free(out);
    return ok;
}

static size_t put_utf8(uint8_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xc0 | cp >> 6);
        o[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xe0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (uint8_t)(0xf0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

/* UNICODE: raw-unicode-escape text (bytes are Latin-1 characters; \uXXXX, \UXXXXXXXX). */
static bool op_unicode(pk_vm *vm)
{
    const char *s;
    size_t n;
    if (!rd_line(vm, &s, &n))
        return false;
    if (n > SIZE_MAX / 3)
        return pk_fail(vm, "string too long");
    uint8_t *out = pti_malloc(n * 3 + 1); /* a byte gives at most 2; \uXXXX (6) at most 3 */
    if (!out)
        return false;
    size_t o = 0;
    for (size_t k = 0; k < n;) {
        int digits = 0;
        if (s[k] == '\\' && k + 1 < n && (s[k + 1] == 'u' || s[k + 1] == 'U'))
            digits = s[k + 1] == 'u' ? 4 : 8;
        if (digits) {
            uint32_t cp = 0;
            bool ok = n - k >= (size_t)digits + 2;
            for (int d = 0; ok && d < digits; d++) {
                int h = hexval(s[k + 2 + (size_t)d]);
                ok = h >= 0;
                cp = cp * 16 + (uint32_t)(h < 0 ? 0 : h);
            }
            if (!ok || cp > 0x10ffff) {
                free(out);
                return pk_fail(vm, "bad \\%c escape in a UNICODE string", s[k + 1]);
            }
            o += put_utf8(out + o, cp);
            k += (size_t)digits + 2;
        } else {
            o += put_utf8(out + o, (uint8_t)s[k]);
            k++;
        }
    }
    bool ok = push(vm, pt_value_strn((const char *)out, o));
    free(out);
    return ok;
}

static bool op_float_text(pk_vm *vm)
{
    const char *s;
    size_t n;
    if (!rd_line(vm, &s, &n))
        return false;
    char buf[128];
    if (n >= sizeof buf)
        return pk_fail(vm, "malformed float (%zu characters)", n);
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    double f = strtod(buf, &end);
    while (*end == ' ' || *end == '\r' || *end == '\t')
        end++;
    if (end == buf || *end)
        return pk_fail(vm, "malformed float '%s'", buf);
    return push(vm, pt_value_float(f));
}

static bool op_binfloat(pk_vm *vm)
{
    if (!need_bytes(vm, 8))
        return false;
    uint64_t bits = 0;
    for (int k = 0; k < 8; k++)
        bits = bits << 8 | vm->data[vm->pos + (size_t)k];
    vm->pos += 8;
    double f;
    memcpy(&f, &bits, sizeof f);
    return push(vm, pt_value_float(f));
}

/* ---- containers -------------------------------------------------------------------------------- */

/* A tuple of the n values at the top of the stack (moved into it). */
static bool make_tuple(pk_vm *vm, size_t n)
{
    pt_value *t = pk_new_container(vm, PT_VALUE_TUPLE, 0);
    if (!t)
        return false;
    if (n && !pti_value_grow((void **)&t->u.seq.items, &t->u.seq.cap, (int64_t)n,
                             sizeof(pt_value *))) {
        pt_value_free(t);
        return false;
    }
    uint64_t size = 1;
    for (size_t k = 0; k < n; k++) {
        pt_value *item = vm->stack[vm->sp - n + k];
        pk_track *it = item->kind == PT_VALUE_TUPLE ? pk_tracked(vm, item) : NULL;
        size += it ? it->tuple_size : 1;
        t->u.seq.items[k] = item;
    }
    t->u.seq.len = (int64_t)n;
    vm->sp -= n;
    pk_tracked(vm, t)->tuple_size = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
    return push(vm, t);
}

static bool op_tuple_mark(pk_vm *vm)
{
    size_t base = 0;
    if (!pop_mark(vm, &base))
        return false;
    return make_tuple(vm, vm->sp - base);
}

static bool op_list_mark(pk_vm *vm)
{
    size_t base = 0;
    if (!pop_mark(vm, &base))
        return false;
    pt_value *l = pk_new_container(vm, PT_VALUE_LIST, 0);
    size_t n = vm->sp - base;
    if (!l || (n && !pti_value_grow((void **)&l->u.seq.items, &l->u.seq.cap, (int64_t)n,
                                    sizeof(pt_value *)))) {
        pt_value_free(l);
        return false;
    }
    if (n)
        memcpy(l->u.seq.items, vm->stack + base, n * sizeof(pt_value *));
    l->u.seq.len = (int64_t)n;
    vm->sp = base;
    return push(vm, l);
}

/* Appends stack[from..sp) to the list-like target (moved); the target stays on the stack. */
static bool append_items(pk_vm *vm, pt_value *target, size_t from)
{
    pk_track *t = pk_tracked(vm, target);
    pt_value *list = target;
    bool ok = true;
    if (t && (t->flags & PK_STUB))
        list = stub_items(vm, target, PT_VALUE_LIST);
    else if (target->kind != PT_VALUE_LIST)
        ok = pk_fail(vm, "appends to a %s, not a list", describe(vm, target));
    ok = ok && list;
    size_t k = from;
    for (; ok && k < vm->sp; k++) {
        ok = pk_list_append(vm, list, vm->stack[k]);
        vm->stack[k] = NULL;
    }
    for (; k < vm->sp; k++)
        pt_value_free(vm->stack[k]);
    vm->sp = from;
    return ok;
}

/* dict-like target: stack[from..sp) holds key, value pairs (moved). */
static bool setitems(pk_vm *vm, pt_value *target, size_t from)
{
    pk_track *t = pk_tracked(vm, target);
    pt_value *dict = target;
    bool ok = true;
    if ((vm->sp - from) % 2)
        ok = pk_fail(vm, "odd number of items (%zu) for key/value pairs", vm->sp - from);
    else if (t && (t->flags & PK_STUB))
        dict = stub_items(vm, target, PT_VALUE_DICT);
    else if (target->kind != PT_VALUE_DICT || (t && (t->flags & (PK_SET | PK_FROZENSET))))
        ok = pk_fail(vm, "sets items of a %s, not a dict", describe(vm, target));
    ok = ok && dict;
    size_t k = from;
    for (; ok && k < vm->sp; k += 2) {
        ok = pk_dict_set(vm, dict, vm->stack[k], vm->stack[k + 1]);
        vm->stack[k] = vm->stack[k + 1] = NULL;
    }
    for (; k < vm->sp; k++)
        pt_value_free(vm->stack[k]);
    vm->sp = from;
    return ok;
}

static bool set_add_items(pk_vm *vm, pt_value *set, size_t from)
{
    bool ok = true;
    size_t k = from;
    for (; ok && k < vm->sp; k++) {
        pt_value *none = pt_value_none();
        ok = none && pk_dict_set(vm, set, vm->stack[k], none);
        if (!none)
            pt_value_free(vm->stack[k]);
        vm->stack[k] = NULL;
    }
    for (; k < vm->sp; k++)
        pt_value_free(vm->stack[k]);
    vm->sp = from;
    return ok;
}

static bool op_appends(pk_vm *vm, bool single)
{
    size_t base = 0;
    if (single) {
        if (!need_items(vm, 2))
            return false;
        base = vm->sp - 1;
    } else if (!pop_mark(vm, &base)) {
        return false;
    }
    if (base == 0 || (vm->nmarks && vm->marks[vm->nmarks - 1] >= base)) {
        release_range(vm, base);
        return pk_fail(vm, "no list below the items");
    }
    return append_items(vm, vm->stack[base - 1], base);
}

static bool op_setitems(pk_vm *vm, bool single)
{
    size_t base = 0;
    if (single) {
        if (!need_items(vm, 3))
            return false;
        base = vm->sp - 2;
    } else if (!pop_mark(vm, &base)) {
        return false;
    }
    if (base == 0 || (vm->nmarks && vm->marks[vm->nmarks - 1] >= base)) {
        release_range(vm, base);
        return pk_fail(vm, "no dict below the items");
    }
    return setitems(vm, vm->stack[base - 1], base);
}

static bool op_dict_mark(pk_vm *vm)
{
    size_t base = 0;
    if (!pop_mark(vm, &base))
        return false;
    pt_value *d = pk_new_container(vm, PT_VALUE_DICT, 0);
    if (!d) {
        release_range(vm, base);
        return false;
    }
    /* the new dict goes below its items so setitems can take them from the stack */
    if (!push(vm, d))
        return false;
    memmove(vm->stack + base + 1, vm->stack + base, (vm->sp - 1 - base) * sizeof(pt_value *));
    vm->stack[base] = d;
    return setitems(vm, d, base + 1);
}

static bool op_additems(pk_vm *vm)
{
    size_t base = 0;
    if (!pop_mark(vm, &base))
        return false;
    pt_value *set = base > 0 && !(vm->nmarks && vm->marks[vm->nmarks - 1] >= base)
                        ? vm->stack[base - 1]
                        : NULL;
    pk_track *t = pk_tracked(vm, set);
    if (!set || !t || !(t->flags & PK_SET)) {
        release_range(vm, base);
        return set ? pk_fail(vm, "adds items to a %s, not a set", describe(vm, set))
                   : pk_fail(vm, "no set below the items");
    }
    return set_add_items(vm, set, base);
}

static bool op_frozenset(pk_vm *vm)
{
    size_t base = 0;
    if (!pop_mark(vm, &base))
        return false;
    pt_value *s = pk_new_container(vm, PT_VALUE_DICT, PK_FROZENSET);
    if (!s) {
        release_range(vm, base);
        return false;
    }
    if (!push(vm, s))
        return false;
    memmove(vm->stack + base + 1, vm->stack + base, (vm->sp - 1 - base) * sizeof(pt_value *));
    vm->stack[base] = s;
    return set_add_items(vm, s, base + 1);
}

/* ---- globals, calls, persistent ids ----------------------------------------------------------- */

static bool push_global(pk_vm *vm, const char *mod, size_t mlen, const char *name, size_t nlen)
{
    if (memchr(mod, '\0', mlen) || memchr(name, '\0', nlen) || !mlen || !nlen)
        return pk_fail(vm, "malformed global name");
    pt_value *g = pti_value_node_new(PTI_VALUE_GLOBAL, mlen + nlen + 2);
    if (!g)
        return false;
    g->u.s.data = (char *)(g + 1);
    memcpy(g->u.s.data, mod, mlen);
    g->u.s.data[mlen] = '.';
    memcpy(g->u.s.data + mlen + 1, name, nlen);
    g->u.s.len = mlen + nlen + 1;
    g->u.s.data[g->u.s.len] = '\0';
    if (!pk_global_check(vm, g->u.s.data)) {
        pt_value_free(g);
        return false;
    }
    return push(vm, g);
}

static bool op_global(pk_vm *vm)
{
    const char *mod, *name;
    size_t ml, nl;
    if (!rd_line(vm, &mod, &ml) || !rd_line(vm, &name, &nl))
        return false;
    return push_global(vm, mod, ml, name, nl);
}

static bool op_stack_global(pk_vm *vm)
{
    if (!need_items(vm, 2))
        return false;
    pt_value *name = vm->stack[vm->sp - 1], *mod = vm->stack[vm->sp - 2];
    if (mod->kind != PT_VALUE_STR || name->kind != PT_VALUE_STR)
        return pk_fail(vm, "module and name must be str, got %s and %s", describe(vm, mod),
                       describe(vm, name));
    bool ok = push_global(vm, mod->u.s.data, mod->u.s.len, name->u.s.data, name->u.s.len);
    if (ok) { /* drop name and module below the new global */
        pt_value *g = vm->stack[--vm->sp];
        release_range(vm, vm->sp - 2);
        vm->stack[vm->sp++] = g;
    }
    return ok;
}

static bool op_reduce(pk_vm *vm)
{
    if (!need_items(vm, 2))
        return false;
    pt_value *args = vm->stack[vm->sp - 1], *func = vm->stack[vm->sp - 2], *out = NULL;
    if (args->kind != PT_VALUE_TUPLE)
        return pk_fail(vm, "the arguments are a %s, not a tuple", describe(vm, args));
    if (func->kind != PTI_VALUE_GLOBAL)
        return pk_fail(vm, "calls a %s, not a global", describe(vm, func));
    if (!pk_call(vm, func, args, &out))
        return false;
    release_range(vm, vm->sp - 2);
    return push(vm, out);
}

static bool op_newobj(pk_vm *vm, bool ex)
{
    size_t n = ex ? 3 : 2;
    if (!need_items(vm, n))
        return false;
    pt_value *cls = vm->stack[vm->sp - n], *args = vm->stack[vm->sp - n + 1];
    pt_value *kwargs = ex ? vm->stack[vm->sp - 1] : NULL, *out = NULL;
    if (args->kind != PT_VALUE_TUPLE)
        return pk_fail(vm, "the arguments are a %s, not a tuple", describe(vm, args));
    if (kwargs && kwargs->kind != PT_VALUE_DICT)
        return pk_fail(vm, "the keyword arguments are a %s, not a dict", describe(vm, kwargs));
    if (cls->kind != PTI_VALUE_GLOBAL)
        return pk_fail(vm, "instantiates a %s, not a class", describe(vm, cls));
    if (!pk_newobj(vm, cls, args, kwargs, &out))
        return false;
    release_range(vm, vm->sp - n);
    return push(vm, out);
}

static bool op_build(pk_vm *vm)
{
    if (!need_items(vm, 2))
        return false;
    pt_value *state = vm->stack[vm->sp - 1], *inst = vm->stack[vm->sp - 2];
    if (!pk_build(vm, inst, state))
        return false;
    release_range(vm, vm->sp - 1);
    return true;
}

static bool persistent_load(pk_vm *vm, pt_value *pid)
{
    if (!vm->o->persistent_load) {
        pt_value_free(pid);
        return pk_unsupported(vm, "%s: persistent ids (tensor storages) are not supported here",
                              pk_op_name(vm->op));
    }
    pt_value *v = vm->o->persistent_load(vm->o->ctx, pid);
    pt_value_free(pid);
    if (!v && pt_last_status() == PT_OK)
        pk_fail(vm, "persistent_load failed");
    return push(vm, v);
}

/* ---- the loop ------------------------------------------------------------------------------ */

static bool step(pk_vm *vm, bool *stop)
{
    uint64_t u;
    int64_t i;
    const char *s;
    size_t n;
    switch (vm->op) {
    case OP_PROTO:
        if (!rd_uint(vm, 1, &u))
            return false;
        return u <= 5 || pk_fail(vm, "protocol %llu is newer than 5", (unsigned long long)u);
    case OP_FRAME: return rd_uint(vm, 8, &u) && need_bytes(vm, u);
    case OP_STOP: *stop = true; return need_items(vm, 1);
    case OP_MARK:
        if (vm->nmarks == vm->marks_cap) {
            size_t cap = vm->marks_cap ? vm->marks_cap * 2 : 32;
            size_t *m = realloc(vm->marks, cap * sizeof *m);
            if (!m)
                return pti_error(PT_ERR_OOM, "%s: pickle: out of memory", vm->what), false;
            vm->marks = m;
            vm->marks_cap = cap;
        }
        vm->marks[vm->nmarks++] = vm->sp;
        return true;
    case OP_POP:
        if (avail(vm) == 0 && vm->nmarks) { /* POP of a MARK */
            vm->nmarks--;
            return true;
        }
        return need_items(vm, 1) && (release_range(vm, vm->sp - 1), true);
    case OP_POP_MARK: {
        size_t base = 0;
        return pop_mark(vm, &base) && (release_range(vm, base), true);
    }
    case OP_DUP: return need_items(vm, 1) && push(vm, pt_value_retain(vm->stack[vm->sp - 1]));
    case OP_NONE: return push(vm, pt_value_none());
    case OP_NEWTRUE: return push(vm, pt_value_bool(true));
    case OP_NEWFALSE: return push(vm, pt_value_bool(false));
    case OP_INT:
        if (vm->len - vm->pos >= 3 && vm->data[vm->pos] == '0' && vm->data[vm->pos + 2] == '\n' &&
            (vm->data[vm->pos + 1] == '0' || vm->data[vm->pos + 1] == '1')) {
            bool b = vm->data[vm->pos + 1] == '1'; /* protocol 0's I01 / I00 booleans */
            vm->pos += 3;
            return push(vm, pt_value_bool(b));
        }
        return text_int(vm, false, &i) && push(vm, pt_value_int(i));
    case OP_LONG: return text_int(vm, true, &i) && push(vm, pt_value_int(i));
    case OP_BININT:
        if (!rd_uint(vm, 4, &u))
            return false;
        return push(vm, pt_value_int((int32_t)(uint32_t)u));
    case OP_BININT1: return rd_uint(vm, 1, &u) && push(vm, pt_value_int((int64_t)u));
    case OP_BININT2: return rd_uint(vm, 2, &u) && push(vm, pt_value_int((int64_t)u));
    case OP_LONG1: return rd_uint(vm, 1, &u) && push_long_bytes(vm, u);
    case OP_LONG4:
        if (!rd_uint(vm, 4, &u))
            return false;
        if ((int32_t)(uint32_t)u < 0)
            return pk_fail(vm, "negative length %d", (int32_t)(uint32_t)u);
        return push_long_bytes(vm, u);
    case OP_FLOAT: return op_float_text(vm);
    case OP_BINFLOAT: return op_binfloat(vm);
    case OP_STRING: return op_string(vm);
    case OP_BINSTRING:
    case OP_SHORT_BINSTRING:
        if (!rd_uint(vm, vm->op == OP_BINSTRING ? 4 : 1, &u))
            return false;
        if (vm->op == OP_BINSTRING && (int32_t)(uint32_t)u < 0)
            return pk_fail(vm, "negative length %d", (int32_t)(uint32_t)u);
        if (!need_bytes(vm, u))
            return false;
        vm->pos += (size_t)u;
        return push_py2_str(vm, vm->data + vm->pos - (size_t)u, (size_t)u);
    case OP_UNICODE: return op_unicode(vm);
    case OP_BINUNICODE: return rd_uint(vm, 4, &u) && push_utf8(vm, u);
    case OP_SHORT_BINUNICODE: return rd_uint(vm, 1, &u) && push_utf8(vm, u);
    case OP_BINUNICODE8: return rd_uint(vm, 8, &u) && push_utf8(vm, u);
    case OP_BINBYTES: return rd_uint(vm, 4, &u) && push_bytes(vm, u);
    case OP_SHORT_BINBYTES: return rd_uint(vm, 1, &u) && push_bytes(vm, u);
    case OP_BINBYTES8:
    case OP_BYTEARRAY8: return rd_uint(vm, 8, &u) && push_bytes(vm, u);
    case OP_EMPTY_LIST: return push(vm, pk_new_container(vm, PT_VALUE_LIST, 0));
    case OP_EMPTY_TUPLE: return make_tuple(vm, 0);
    case OP_EMPTY_DICT: return push(vm, pk_new_container(vm, PT_VALUE_DICT, 0));
    case OP_EMPTY_SET: return push(vm, pk_new_container(vm, PT_VALUE_DICT, PK_SET));
    case OP_APPEND: return op_appends(vm, true);
    case OP_APPENDS: return op_appends(vm, false);
    case OP_LIST: return op_list_mark(vm);
    case OP_TUPLE: return op_tuple_mark(vm);
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3: {
        size_t k = (size_t)(vm->op - OP_TUPLE1 + 1);
        return need_items(vm, k) && make_tuple(vm, k);
    }
    case OP_DICT: return op_dict_mark(vm);
    case OP_SETITEM: return op_setitems(vm, true);
    case OP_SETITEMS: return op_setitems(vm, false);
    case OP_ADDITEMS: return op_additems(vm);
    case OP_FROZENSET: return op_frozenset(vm);
    case OP_GET:
        if (!text_int(vm, false, &i))
            return false;
        if (i < 0)
            return pk_fail(vm, "negative memo index %lld", (long long)i);
        return memo_get(vm, (uint64_t)i);
    case OP_BINGET: return rd_uint(vm, 1, &u) && memo_get(vm, u);
    case OP_LONG_BINGET: return rd_uint(vm, 4, &u) && memo_get(vm, u);
    case OP_PUT:
        if (!text_int(vm, false, &i))
            return false;
        if (i < 0)
            return pk_fail(vm, "negative memo index %lld", (long long)i);
        return memo_put(vm, (uint64_t)i);
    case OP_BINPUT: return rd_uint(vm, 1, &u) && memo_put(vm, u);
    case OP_LONG_BINPUT: return rd_uint(vm, 4, &u) && memo_put(vm, u);
    case OP_MEMOIZE: return memo_put(vm, vm->memo_count);
    case OP_GLOBAL: return op_global(vm);
    case OP_STACK_GLOBAL: return op_stack_global(vm);
    case OP_REDUCE: return op_reduce(vm);
    case OP_NEWOBJ: return op_newobj(vm, false);
    case OP_NEWOBJ_EX: return op_newobj(vm, true);
    case OP_BUILD: return op_build(vm);
    case OP_PERSID:
        if (!rd_line(vm, &s, &n))
            return false;
        if (!valid_utf8((const uint8_t *)s, n))
            return pk_fail(vm, "the persistent id is not text");
        {
            pt_value *pid = pt_value_strn(s, n);
            return pid && persistent_load(vm, pid);
        }
    case OP_BINPERSID: {
        pt_value *pid = pop(vm);
        return pid && persistent_load(vm, pid);
    }
    case OP_EXT1:
    case OP_EXT2:
    case OP_EXT4:
        return pk_unsupported(vm, "%s (the copyreg extension registry) at byte %zu is not "
                                  "supported; nothing was executed",
                              pk_op_name(vm->op), vm->op_pos);
    case OP_INST:
    case OP_OBJ:
        return pk_unsupported(vm, "%s (protocol 0/1 object construction) at byte %zu is not "
                                  "supported: the pickle holds a whole Python object; nothing "
                                  "was executed",
                              pk_op_name(vm->op), vm->op_pos);
    case OP_NEXT_BUFFER:
    case OP_READONLY_BUFFER:
        return pk_unsupported(vm, "%s (protocol 5 out-of-band buffers) at byte %zu is not "
                                  "supported",
                              pk_op_name(vm->op), vm->op_pos);
    default: return pk_fail(vm, "unknown opcode 0x%02x", vm->op);
    }
}

/* ---- the final pass: cycles, limits, public kinds ------------------------------------------- */

static int64_t child_count(const pt_value *v)
{
    if (v->kind == PT_VALUE_LIST || v->kind == PT_VALUE_TUPLE)
        return v->u.seq.len;
    if (v->kind == PT_VALUE_DICT)
        return 2 * v->u.dict.len;
    return 0;
}

static pt_value *child_at(const pt_value *v, int64_t k)
{
    if (v->kind == PT_VALUE_DICT)
        return k % 2 ? v->u.dict.entries[k / 2].val : v->u.dict.entries[k / 2].key;
    return v->u.seq.items[k];
}

static size_t track_index(pk_vm *vm, const pt_value *v)
{
    pk_track *t = pk_tracked(vm, v);
    return t ? (size_t)(t - vm->tr) : SIZE_MAX;
}

/* A set (dict {item: None}) becomes a list of its items, in place. */
static bool set_to_list(pt_value *v)
{
    int64_t n = v->u.dict.len;
    pt_value **items = n ? pti_malloc((size_t)n * sizeof *items) : NULL;
    if (n && !items)
        return false;
    pti_dict_entry *e = v->u.dict.entries;
    for (int64_t k = 0; k < n; k++) {
        items[k] = e[k].key;
        pt_value_free(e[k].val);
    }
    free(e);
    free(v->u.dict.index);
    memset(&v->u, 0, sizeof v->u);
    v->kind = PT_VALUE_LIST;
    v->u.seq.items = items;
    v->u.seq.len = v->u.seq.cap = n;
    return true;
}

/* Topological order of the tracked containers (parents first); false on a cycle. */
static bool topo_order(pk_vm *vm, size_t *order)
{
    size_t n = vm->ntr, head = 0, tail = 0;
    size_t *indeg = pti_calloc(n ? n : 1, sizeof *indeg);
    if (!indeg)
        return false;
    for (size_t i = 0; i < n; i++)
        for (int64_t k = 0, c = child_count(vm->tr[i].v); k < c; k++) {
            size_t j = track_index(vm, child_at(vm->tr[i].v, k));
            if (j != SIZE_MAX)
                indeg[j]++;
        }
    for (size_t i = 0; i < n; i++)
        if (!indeg[i])
            order[tail++] = i;
    while (head < tail) {
        const pt_value *v = vm->tr[order[head++]].v;
        for (int64_t k = 0, c = child_count(v); k < c; k++) {
            size_t j = track_index(vm, child_at(v, k));
            if (j != SIZE_MAX && --indeg[j] == 0)
                order[tail++] = j;
        }
    }
    free(indeg);
    if (tail < n)
        return pk_fail(vm, "reference cycle: a container contains itself (directly or "
                           "through others), which a value tree cannot hold");
    return true;
}

/* Depth and unshared size of what the result reaches, then the conversion to public kinds. */
static bool check_and_convert(pk_vm *vm, pt_value *result, const size_t *order)
{
    size_t n = vm->ntr;
    uint64_t *size = pti_calloc(n ? n : 1, sizeof *size);
    uint32_t *depth = pti_calloc(n ? n : 1, sizeof *depth);
    bool ok = size && depth;
    size_t r = track_index(vm, result);
    if (ok && r != SIZE_MAX)
        vm->tr[r].flags |= PK_REACHED;
    for (size_t q = 0; ok && q < n; q++) { /* parents first: mark what the result reaches */
        pk_track *t = &vm->tr[order[q]];
        if (!(t->flags & PK_REACHED))
            continue;
        for (int64_t k = 0, c = child_count(t->v); k < c; k++) {
            size_t j = track_index(vm, child_at(t->v, k));
            if (j != SIZE_MAX)
                vm->tr[j].flags |= PK_REACHED;
        }
    }
    const uint64_t cap = PTI_PICKLE_MAX_EXPANDED;
    for (size_t q = n; ok && q-- > 0;) { /* children first: sizes and depths */
        size_t i = order[q];
        if (!(vm->tr[i].flags & PK_REACHED))
            continue;
        uint64_t s = 1;
        uint32_t d = 0;
        for (int64_t k = 0, c = child_count(vm->tr[i].v); k < c; k++) {
            size_t j = track_index(vm, child_at(vm->tr[i].v, k));
            s += j == SIZE_MAX ? 1 : size[j];
            if (j != SIZE_MAX && depth[j] > d)
                d = depth[j];
            if (s > cap)
                s = cap + 1;
        }
        size[i] = s;
        depth[i] = d + 1;
        if (depth[i] > PTI_PICKLE_MAX_DEPTH)
            ok = pk_fail(vm, "containers nested deeper than %d levels", PTI_PICKLE_MAX_DEPTH);
        else if (s > cap)
            ok = pk_fail(vm, "the result holds more than %d nodes (counting shared ones each "
                             "time they appear)",
                         PTI_PICKLE_MAX_EXPANDED);
    }
    free(size);
    free(depth);
    if (!ok)
        return false;
    if (result->kind == PTI_VALUE_GLOBAL && !pk_global_final(vm, result))
        return false;
    for (size_t i = 0; i < n; i++) {
        pk_track *t = &vm->tr[i];
        if (!(t->flags & PK_REACHED))
            continue;
        for (int64_t k = 0, c = child_count(t->v); k < c; k++) {
            pt_value *ch = child_at(t->v, k);
            if (ch->kind == PTI_VALUE_GLOBAL && !pk_global_final(vm, ch))
                return false;
        }
    }
    for (size_t i = 0; i < n; i++) /* after the walks above: lists change child counts */
        if ((vm->tr[i].flags & PK_REACHED) && (vm->tr[i].flags & (PK_SET | PK_FROZENSET)) &&
            !set_to_list(vm->tr[i].v))
            return false;
    return true;
}

static bool finish(pk_vm *vm, pt_value *result)
{
    size_t *order = pti_malloc((vm->ntr ? vm->ntr : 1) * sizeof *order);
    bool ok = order && topo_order(vm, order) && check_and_convert(vm, result, order);
    free(order);
    return ok;
}

static void vm_release(pk_vm *vm, bool failed)
{
    if (failed)
        for (size_t i = 0; i < vm->ntr; i++)
            empty_container(vm->tr[i].v);
    release_range(vm, 0);
    for (size_t i = 0; i < vm->memo_cap; i++)
        pt_value_free(vm->memo[i]);
    for (size_t i = 0; i < vm->ntr; i++)
        pt_value_free(vm->tr[i].v);
    free(vm->stack);
    free(vm->marks);
    free(vm->memo);
    free(vm->tr);
    free(vm->map);
}

pt_value *pti_unpickle(const uint8_t *data, size_t len, const pti_unpickle_opts *o,
                       size_t *consumed)
{
    static const pti_unpickle_opts defaults = {0};
    if (!o)
        o = &defaults;
    pk_vm vm = {.data = data, .len = len, .o = o, .what = o->what ? o->what : "pickle"};
    if (!data && len)
        return (pti_null_arg("pti_unpickle", "data"), NULL);
    pt_value *result = NULL;
    bool ok = true, stop = false;
    while (ok && !stop) {
        vm.op_pos = vm.pos;
        if (vm.pos >= len) {
            vm.op = OP_STOP;
            ok = pk_fail(&vm, "truncated: the pickle ends without a STOP opcode");
            break;
        }
        vm.op = data[vm.pos++];
        ok = step(&vm, &stop);
    }
    if (ok) {
        result = vm.stack[--vm.sp];
        ok = finish(&vm, result);
        if (!ok) {
            pt_value_free(result);
            result = NULL;
        }
    }
    vm_release(&vm, !ok);
    if (ok && consumed)
        *consumed = vm.pos;
    return result;
}

const char *pti_pickle_global_name(const pt_value *v)
{
    return v && v->kind == PTI_VALUE_GLOBAL ? v->u.s.data : NULL;
}
