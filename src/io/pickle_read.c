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
 * checked against PTI_PICKLE_MAX_DEPTH / PTI_PICKLE_MAX_EXPANDED. Depth is also checked as
 * containers are filled (pk_track.depth, a lower bound), so that a file of nested containers
 * fails at the level past the limit instead of building millions of them first. On any failure
 * every tracked container is emptied first, which breaks all cycles, and then released: no leaks.
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
    if (!vm->map_cap || !v ||
        (v->kind != PT_VALUE_LIST && v->kind != PT_VALUE_TUPLE && v->kind != PT_VALUE_DICT))
        return NULL; /* only containers are tracked */
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
        pk_track *t = pti_realloc(vm->tr, cap * sizeof *t);
        if (!t)
            return pti_error(PT_ERR_OOM, "%s: pickle: out of memory", vm->what), false;
        vm->tr = t;
        vm->tr_cap = cap;
    }
    vm->tr[vm->ntr] = (pk_track){pt_value_retain(v), flags, tuple_size, 1};
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

/* The message the final pass gives too, so both checks read the same to a user. */
static bool too_deep(pk_vm *vm)
{
    return pk_fail(vm, "containers nested deeper than %d levels", PTI_PICKLE_MAX_DEPTH);
}

/* Recorded depth of a value: 0 for anything the VM did not make as a container. */
static uint32_t depth_of(pk_vm *vm, const pt_value *v)
{
    pk_track *t = pk_tracked(vm, v);
    return t ? t->depth : 0;
}

/* Raises the recorded depth of parent for a child going into it; false (the final pass's
 * error) when that passes the limit. Nothing is taken. */
static bool pk_nest(pk_vm *vm, const pt_value *parent, const pt_value *child)
{
    pk_track *p = pk_tracked(vm, parent);
    uint32_t d = depth_of(vm, child) + 1;
    if (!p || d <= p->depth)
        return true;
    p->depth = d;
    return d <= PTI_PICKLE_MAX_DEPTH || too_deep(vm);
}

bool pk_list_append(pk_vm *vm, pt_value *list, pt_value *item)
{
    if (item == list) {
        pt_value_free(item);
        return pk_fail(vm, "reference cycle: a list cannot contain itself");
    }
    if (!pk_nest(vm, list, item)) {
        pt_value_free(item);
        return false;
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
    default: return pk_fail(vm, "unhashable dict key or set item (a %s)", describe(vm, key));
    }
}

bool pk_dict_set(pk_vm *vm, pt_value *dict, pt_value *key, pt_value *val)
{
    bool ok = true;
    if (val == dict || key == dict)
        ok = pk_fail(vm, "reference cycle: a dict cannot contain itself");
    else
        ok = key_hashable(vm, key) && pk_nest(vm, dict, key) && pk_nest(vm, dict, val);
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

bool pk_charge(pk_vm *vm, uint64_t units)
{
    uint64_t budget = (uint64_t)vm->len * 4 + (1u << 20);
    vm->work += units;
    if (vm->work <= budget)
        return true;
    return pk_fail(vm, "values copied more than the pickle's size allows (%llu items and bytes)",
                   (unsigned long long)vm->work);
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

bool pk_push(pk_vm *vm, pt_value *v)
{
    if (!v)
        return false;
    if (vm->sp == vm->stack_cap) {
        size_t cap = vm->stack_cap ? vm->stack_cap * 2 : 64;
        pt_value **s = pti_realloc(vm->stack, cap * sizeof *s);
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
        pt_value **m = pti_realloc(vm->memo, cap * sizeof *m);
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
    return pk_push(vm, pt_value_retain(vm->memo[idx]));
}

/* ---- containers --------------------------------------------------------------------------------
 */

/* *depth: the recorded depth of a container made of stack[from..sp); false when that is
 * beyond the limit (the stack is left as it was). */
static bool items_depth(pk_vm *vm, size_t from, uint32_t *depth)
{
    uint32_t d = 0;
    for (size_t k = from; k < vm->sp; k++) {
        uint32_t c = depth_of(vm, vm->stack[k]);
        if (c > d)
            d = c;
    }
    *depth = d + 1;
    return *depth <= PTI_PICKLE_MAX_DEPTH || too_deep(vm);
}

/* A tuple of the n values at the top of the stack (moved into it). */
static bool make_tuple(pk_vm *vm, size_t n)
{
    uint32_t depth = 0;
    if (!items_depth(vm, vm->sp - n, &depth))
        return false;
    pt_value *t = pk_new_container(vm, PT_VALUE_TUPLE, 0);
    if (!t)
        return false;
    if (n &&
        !pti_value_grow((void **)&t->u.seq.items, &t->u.seq.cap, (int64_t)n, sizeof(pt_value *))) {
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
    pk_track *tt = pk_tracked(vm, t);
    tt->tuple_size = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
    tt->depth = depth;
    return pk_push(vm, t);
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
    uint32_t depth = 0;
    if (!pop_mark(vm, &base) || !items_depth(vm, base, &depth))
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
    pk_tracked(vm, l)->depth = depth;
    vm->sp = base;
    return pk_push(vm, l);
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
    if (!pk_push(vm, d))
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
    pt_value *set =
        base > 0 && !(vm->nmarks && vm->marks[vm->nmarks - 1] >= base) ? vm->stack[base - 1] : NULL;
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
    if (!pk_push(vm, s))
        return false;
    memmove(vm->stack + base + 1, vm->stack + base, (vm->sp - 1 - base) * sizeof(pt_value *));
    vm->stack[base] = s;
    return set_add_items(vm, s, base + 1);
}

/* ---- globals, calls, persistent ids -----------------------------------------------------------
 */

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
    return pk_push(vm, g);
}

static bool op_global(pk_vm *vm)
{
    const char *mod, *name;
    size_t ml, nl;
    if (!pk_rd_line(vm, &mod, &ml) || !pk_rd_line(vm, &name, &nl))
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
    return pk_push(vm, out);
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
    return pk_push(vm, out);
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
    return pk_push(vm, v);
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
        if (!pk_rd_uint(vm, 1, &u))
            return false;
        return u <= 5 || pk_fail(vm, "protocol %llu is newer than 5", (unsigned long long)u);
    case OP_FRAME: return pk_rd_uint(vm, 8, &u) && pk_need_bytes(vm, u);
    case OP_STOP: *stop = true; return need_items(vm, 1);
    case OP_MARK:
        if (vm->nmarks == vm->marks_cap) {
            size_t cap = vm->marks_cap ? vm->marks_cap * 2 : 32;
            size_t *m = pti_realloc(vm->marks, cap * sizeof *m);
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
    case OP_DUP: return need_items(vm, 1) && pk_push(vm, pt_value_retain(vm->stack[vm->sp - 1]));
    case OP_NONE: return pk_push(vm, pt_value_none());
    case OP_NEWTRUE: return pk_push(vm, pt_value_bool(true));
    case OP_NEWFALSE: return pk_push(vm, pt_value_bool(false));
    case OP_INT:
        if (vm->len - vm->pos >= 3 && vm->data[vm->pos] == '0' && vm->data[vm->pos + 2] == '\n' &&
            (vm->data[vm->pos + 1] == '0' || vm->data[vm->pos + 1] == '1')) {
            bool b = vm->data[vm->pos + 1] == '1'; /* protocol 0's I01 / I00 booleans */
            vm->pos += 3;
            return pk_push(vm, pt_value_bool(b));
        }
        return pk_text_int(vm, false, &i) && pk_push(vm, pt_value_int(i));
    case OP_LONG: return pk_text_int(vm, true, &i) && pk_push(vm, pt_value_int(i));
    case OP_BININT:
        if (!pk_rd_uint(vm, 4, &u))
            return false;
        return pk_push(vm, pt_value_int((int32_t)(uint32_t)u));
    case OP_BININT1: return pk_rd_uint(vm, 1, &u) && pk_push(vm, pt_value_int((int64_t)u));
    case OP_BININT2: return pk_rd_uint(vm, 2, &u) && pk_push(vm, pt_value_int((int64_t)u));
    case OP_LONG1: return pk_rd_uint(vm, 1, &u) && pk_push_long_bytes(vm, u);
    case OP_LONG4:
        if (!pk_rd_uint(vm, 4, &u))
            return false;
        if ((int32_t)(uint32_t)u < 0)
            return pk_fail(vm, "negative length %d", (int32_t)(uint32_t)u);
        return pk_push_long_bytes(vm, u);
    case OP_FLOAT: return pk_op_float_text(vm);
    case OP_BINFLOAT: return pk_op_binfloat(vm);
    case OP_STRING: return pk_op_string(vm);
    case OP_BINSTRING:
    case OP_SHORT_BINSTRING:
        if (!pk_rd_uint(vm, vm->op == OP_BINSTRING ? 4 : 1, &u))
            return false;
        if (vm->op == OP_BINSTRING && (int32_t)(uint32_t)u < 0)
            return pk_fail(vm, "negative length %d", (int32_t)(uint32_t)u);
        if (!pk_need_bytes(vm, u))
            return false;
        vm->pos += (size_t)u;
        return pk_push_py2_str(vm, vm->data + vm->pos - (size_t)u, (size_t)u);
    case OP_UNICODE: return pk_op_unicode(vm);
    case OP_BINUNICODE: return pk_rd_uint(vm, 4, &u) && pk_push_utf8(vm, u);
    case OP_SHORT_BINUNICODE: return pk_rd_uint(vm, 1, &u) && pk_push_utf8(vm, u);
    case OP_BINUNICODE8: return pk_rd_uint(vm, 8, &u) && pk_push_utf8(vm, u);
    case OP_BINBYTES: return pk_rd_uint(vm, 4, &u) && pk_push_bytes(vm, u);
    case OP_SHORT_BINBYTES: return pk_rd_uint(vm, 1, &u) && pk_push_bytes(vm, u);
    case OP_BINBYTES8:
    case OP_BYTEARRAY8: return pk_rd_uint(vm, 8, &u) && pk_push_bytes(vm, u);
    case OP_EMPTY_LIST: return pk_push(vm, pk_new_container(vm, PT_VALUE_LIST, 0));
    case OP_EMPTY_TUPLE: return make_tuple(vm, 0);
    case OP_EMPTY_DICT: return pk_push(vm, pk_new_container(vm, PT_VALUE_DICT, 0));
    case OP_EMPTY_SET: return pk_push(vm, pk_new_container(vm, PT_VALUE_DICT, PK_SET));
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
        if (!pk_text_int(vm, false, &i))
            return false;
        if (i < 0)
            return pk_fail(vm, "negative memo index %lld", (long long)i);
        return memo_get(vm, (uint64_t)i);
    case OP_BINGET: return pk_rd_uint(vm, 1, &u) && memo_get(vm, u);
    case OP_LONG_BINGET: return pk_rd_uint(vm, 4, &u) && memo_get(vm, u);
    case OP_PUT:
        if (!pk_text_int(vm, false, &i))
            return false;
        if (i < 0)
            return pk_fail(vm, "negative memo index %lld", (long long)i);
        return memo_put(vm, (uint64_t)i);
    case OP_BINPUT: return pk_rd_uint(vm, 1, &u) && memo_put(vm, u);
    case OP_LONG_BINPUT: return pk_rd_uint(vm, 4, &u) && memo_put(vm, u);
    case OP_MEMOIZE: return memo_put(vm, vm->memo_count);
    case OP_GLOBAL: return op_global(vm);
    case OP_STACK_GLOBAL: return op_stack_global(vm);
    case OP_REDUCE: return op_reduce(vm);
    case OP_NEWOBJ: return op_newobj(vm, false);
    case OP_NEWOBJ_EX: return op_newobj(vm, true);
    case OP_BUILD: return op_build(vm);
    case OP_PERSID:
        if (!pk_rd_line(vm, &s, &n))
            return false;
        if (!pk_valid_utf8((const uint8_t *)s, n))
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
        return pk_unsupported(vm,
                              "%s (the copyreg extension registry) at byte %zu is not "
                              "supported; nothing was executed",
                              pk_op_name(vm->op), vm->op_pos);
    case OP_INST:
    case OP_OBJ:
        return pk_unsupported(vm,
                              "%s (protocol 0/1 object construction) at byte %zu is not "
                              "supported: the pickle holds a whole Python object; nothing "
                              "was executed",
                              pk_op_name(vm->op), vm->op_pos);
    case OP_NEXT_BUFFER:
    case OP_READONLY_BUFFER:
        return pk_unsupported(vm,
                              "%s (protocol 5 out-of-band buffers) at byte %zu is not "
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
    /* Walking the result (repr, flattening, saving) costs its expanded size, so it may only
     * grow linearly with the input: sharing is for the odd tied weight, not for exponents. */
    uint64_t cap = (uint64_t)PTI_PICKLE_EXPANDED_PER_BYTE * vm->len + PTI_PICKLE_EXPANDED_BASE;
    if (cap > PTI_PICKLE_MAX_EXPANDED)
        cap = PTI_PICKLE_MAX_EXPANDED;
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
            ok = too_deep(vm);
        else if (s > cap)
            ok = pk_fail(vm,
                         "the result holds more than %llu nodes (counting shared ones each "
                         "time they appear) for %zu bytes of pickle",
                         (unsigned long long)cap, vm->len);
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
