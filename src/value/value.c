/* The value tree (include/prometorch/value.h): refcounted Python-like nodes for state dicts,
 * optimizer state and checkpoints. This file: node construction, the iterative free, scalar
 * getters, lists and tuples; value_dict.c has hashing, equality, dicts and copy.
 *
 * Design: every node is one malloc (a str/bytes node carries its bytes in the same block).
 * Lists and tuples are growable arrays. A dict keeps its entries in insertion order in an
 * array without holes, plus an open-addressing index (linear probing, load <= 1/2) of entry
 * numbers, so lookups stay O(1) on state dicts with 10^5 keys. Keys hash and compare with
 * Python semantics: 1, 1.0 and True are the same key, str and bytes differ, tuples hash
 * their items. Deleting a key shifts the later entries and rebuilds the index (O(n)).
 * pt_value_free tears trees down with an intrusive worklist (no recursion, no allocation), so
 * arbitrarily deep chains free safely; the other recursive walks stop at
 * PTI_VALUE_MAX_DEPTH with an error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "value_internal.h"

/* ---- nodes ---------------------------------------------------------------------------------- */

pt_value *pti_value_node_new(pt_value_kind kind, size_t extra)
{
    if (extra > SIZE_MAX - sizeof(pt_value))
        return pti_error_null(PT_ERR_OOM, "pt_value: out of memory (%zu bytes)", extra);
    pt_value *v = pti_malloc(sizeof(pt_value) + extra);
    if (!v)
        return NULL;
    memset(v, 0, sizeof *v);
    atomic_init(&v->refcount, 1);
    v->kind = kind;
    return v;
}

pt_value *pt_value_none(void)
{
    return pti_value_node_new(PT_VALUE_NONE, 0);
}

pt_value *pt_value_bool(bool b)
{
    pt_value *v = pti_value_node_new(PT_VALUE_BOOL, 0);
    if (v)
        v->u.b = b;
    return v;
}

pt_value *pt_value_int(int64_t i)
{
    pt_value *v = pti_value_node_new(PT_VALUE_INT, 0);
    if (v)
        v->u.i = i;
    return v;
}

pt_value *pt_value_float(double f)
{
    pt_value *v = pti_value_node_new(PT_VALUE_FLOAT, 0);
    if (v)
        v->u.f = f;
    return v;
}

static pt_value *bytes_node(pt_value_kind kind, const void *data, size_t len)
{
    if (len == SIZE_MAX)
        return pti_error_null(PT_ERR_OOM, "pt_value: out of memory (%zu bytes)", len);
    pt_value *v = pti_value_node_new(kind, len + 1);
    if (!v)
        return NULL;
    v->u.s.data = (char *)(v + 1);
    v->u.s.len = len;
    if (len)
        memcpy(v->u.s.data, data, len);
    v->u.s.data[len] = '\0';
    return v;
}

pt_value *pt_value_str(const char *s)
{
    if (!s)
        return (pti_null_arg("pt_value_str", "s"), NULL);
    return bytes_node(PT_VALUE_STR, s, strlen(s));
}

pt_value *pt_value_strn(const char *s, size_t len)
{
    if (!s && len)
        return (pti_null_arg("pt_value_strn", "s"), NULL);
    return bytes_node(PT_VALUE_STR, s, len);
}

pt_value *pt_value_bytes(const void *data, size_t len)
{
    if (!data && len)
        return (pti_null_arg("pt_value_bytes", "data"), NULL);
    return bytes_node(PT_VALUE_BYTES, data, len);
}

pt_value *pt_value_tensor(pt_tensor *t)
{
    if (!t)
        return (pti_null_arg("pt_value_tensor", "t"), NULL);
    pt_value *v = pti_value_node_new(PT_VALUE_TENSOR, 0);
    if (v)
        v->u.t = pt_retain(t);
    return v;
}

pt_value *pt_value_list(void)
{
    return pti_value_node_new(PT_VALUE_LIST, 0);
}
pt_value *pt_value_tuple(void)
{
    return pti_value_node_new(PT_VALUE_TUPLE, 0);
}
pt_value *pt_value_dict(void)
{
    return pti_value_node_new(PT_VALUE_DICT, 0);
}

pt_value *pt_value_tuple_of(int n, pt_value *const *items)
{
    bool ok = true;
    if (n < 0) {
        pti_error(PT_ERR_INVALID_ARG, "pt_value_tuple_of: n = %d is negative", n);
        return NULL;
    }
    if (n > 0 && !items)
        return (pti_null_arg("pt_value_tuple_of", "items"), NULL);
    for (int i = 0; i < n && ok; i++)
        if (!items[i]) {
            char arg[32];
            snprintf(arg, sizeof arg, "items[%d]", i);
            pti_null_arg("pt_value_tuple_of", arg);
            ok = false;
        }
    pt_value *t = ok ? pt_value_tuple() : NULL;
    if (t && n > 0) {
        t->u.seq.items = pti_malloc((size_t)n * sizeof(pt_value *));
        if (t->u.seq.items) {
            memcpy(t->u.seq.items, items, (size_t)n * sizeof(pt_value *));
            t->u.seq.len = t->u.seq.cap = n;
            return t;
        }
        pt_value_free(t);
        t = NULL;
    }
    if (!t)
        for (int i = 0; i < n; i++)
            pt_value_free(items[i]);
    return t;
}

pt_value *pt_value_retain(pt_value *v)
{
    if (v)
        atomic_fetch_add_explicit(&v->refcount, 1, memory_order_relaxed);
    return v;
}

/* Drops one reference of a child; a child that dies is pushed on the worklist. */
static void release_child(pt_value *c, pt_value **worklist)
{
    if (c && atomic_fetch_sub_explicit(&c->refcount, 1, memory_order_acq_rel) == 1) {
        c->next_dead = *worklist;
        *worklist = c;
    }
}

static void destroy_node(pt_value *n, pt_value **worklist)
{
    switch (n->kind) {
    case PT_VALUE_TENSOR: pti_unref(n->u.t); break;
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE:
        for (int64_t i = 0; i < n->u.seq.len; i++)
            release_child(n->u.seq.items[i], worklist);
        free(n->u.seq.items);
        break;
    case PT_VALUE_DICT:
        for (int64_t i = 0; i < n->u.dict.len; i++) {
            release_child(n->u.dict.entries[i].key, worklist);
            release_child(n->u.dict.entries[i].val, worklist);
        }
        free(n->u.dict.entries);
        free(n->u.dict.index);
        release_child(n->u.dict.meta, worklist);
        break;
    default: break;
    }
    free(n);
}

void pt_value_free(pt_value *v)
{
    if (!v || atomic_fetch_sub_explicit(&v->refcount, 1, memory_order_acq_rel) != 1)
        return;
    v->next_dead = NULL;
    pt_value *worklist = v;
    while (worklist) {
        pt_value *n = worklist;
        worklist = n->next_dead;
        destroy_node(n, &worklist);
    }
}

/* ---- inspection ------------------------------------------------------------------------------ */

pt_value_kind pt_value_kind_of(const pt_value *v)
{
    return v ? v->kind : PT_VALUE_NONE;
}

const char *pt_value_kind_name(pt_value_kind k)
{
    if (k == PTI_VALUE_GLOBAL)
        return "global";
    switch (k) {
    case PT_VALUE_NONE: return "None";
    case PT_VALUE_BOOL: return "bool";
    case PT_VALUE_INT: return "int";
    case PT_VALUE_FLOAT: return "float";
    case PT_VALUE_STR: return "str";
    case PT_VALUE_BYTES: return "bytes";
    case PT_VALUE_TENSOR: return "tensor";
    case PT_VALUE_LIST: return "list";
    case PT_VALUE_TUPLE: return "tuple";
    case PT_VALUE_DICT: return "dict";
    }
    return "unknown";
}

bool pt_value_is(const pt_value *v, pt_value_kind k)
{
    return v && v->kind == k;
}

pt_status pti_value_kind_error(const char *fn, const char *expected, const pt_value *v)
{
    return pti_error(PT_ERR_DTYPE, "%s: expected %s, got %s", fn, expected,
                     pt_value_kind_name(v->kind));
}

pt_status pt_value_as_bool(const pt_value *v, bool *out)
{
    if (!v || !out)
        return pti_null_arg("pt_value_as_bool", v ? "out" : "v");
    if (v->kind != PT_VALUE_BOOL)
        return pti_value_kind_error("pt_value_as_bool", "bool", v);
    *out = v->u.b;
    return PT_OK;
}

pt_status pt_value_as_int(const pt_value *v, int64_t *out)
{
    if (!v || !out)
        return pti_null_arg("pt_value_as_int", v ? "out" : "v");
    if (v->kind == PT_VALUE_BOOL)
        *out = v->u.b;
    else if (v->kind == PT_VALUE_INT)
        *out = v->u.i;
    else
        return pti_value_kind_error("pt_value_as_int", "int or bool", v);
    return PT_OK;
}

pt_status pt_value_as_float(const pt_value *v, double *out)
{
    if (!v || !out)
        return pti_null_arg("pt_value_as_float", v ? "out" : "v");
    if (v->kind == PT_VALUE_BOOL)
        *out = v->u.b;
    else if (v->kind == PT_VALUE_INT)
        *out = (double)v->u.i;
    else if (v->kind == PT_VALUE_FLOAT)
        *out = v->u.f;
    else
        return pti_value_kind_error("pt_value_as_float", "float, int or bool", v);
    return PT_OK;
}

static const char *as_bytes(const char *fn, const pt_value *v, pt_value_kind k, size_t *len)
{
    if (!v)
        return (pti_null_arg(fn, "v"), NULL);
    if (v->kind != k)
        return (pti_value_kind_error(fn, pt_value_kind_name(k), v), NULL);
    if (len)
        *len = v->u.s.len;
    return v->u.s.data;
}

const char *pt_value_as_str(const pt_value *v, size_t *len)
{
    return as_bytes("pt_value_as_str", v, PT_VALUE_STR, len);
}

const void *pt_value_as_bytes(const pt_value *v, size_t *len)
{
    return as_bytes("pt_value_as_bytes", v, PT_VALUE_BYTES, len);
}

pt_tensor *pt_value_tensor_ref(const pt_value *v)
{
    if (!v)
        return (pti_null_arg("pt_value_tensor_ref", "v"), NULL);
    if (v->kind != PT_VALUE_TENSOR)
        return (pti_value_kind_error("pt_value_tensor_ref", "tensor", v), NULL);
    return v->u.t;
}

int64_t pt_value_len(const pt_value *v)
{
    switch (pt_value_kind_of(v)) {
    case PT_VALUE_STR:
    case PT_VALUE_BYTES: return (int64_t)v->u.s.len;
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE: return v->u.seq.len;
    case PT_VALUE_DICT: return v->u.dict.len;
    default: return -1;
    }
}

/* Wraps a negative index; false (with PT_ERR_INDEX) when out of range. */
static bool wrap_index(const char *fn, const pt_value *v, int64_t len, int64_t *i)
{
    int64_t j = *i < 0 ? *i + len : *i;
    if (j < 0 || j >= len) {
        pti_error(PT_ERR_INDEX, "%s: index %lld out of range for %s of length %lld", fn,
                  (long long)*i, pt_value_kind_name(v->kind), (long long)len);
        return false;
    }
    *i = j;
    return true;
}

pt_value *pt_value_item_ref(const pt_value *v, int64_t i)
{
    if (!v)
        return (pti_null_arg("pt_value_item_ref", "v"), NULL);
    if (v->kind == PT_VALUE_LIST || v->kind == PT_VALUE_TUPLE)
        return wrap_index("pt_value_item_ref", v, v->u.seq.len, &i) ? v->u.seq.items[i] : NULL;
    if (v->kind == PT_VALUE_DICT)
        return wrap_index("pt_value_item_ref", v, v->u.dict.len, &i) ? v->u.dict.entries[i].val
                                                                     : NULL;
    return (pti_value_kind_error("pt_value_item_ref", "list, tuple or dict", v), NULL);
}

pt_value *pt_value_key_ref(const pt_value *dict, int64_t i)
{
    if (!dict)
        return (pti_null_arg("pt_value_key_ref", "dict"), NULL);
    if (dict->kind != PT_VALUE_DICT)
        return (pti_value_kind_error("pt_value_key_ref", "dict", dict), NULL);
    return wrap_index("pt_value_key_ref", dict, dict->u.dict.len, &i) ? dict->u.dict.entries[i].key
                                                                      : NULL;
}

/* ---- lists and tuples --------------------------------------------------------------------------
 */

/* Grows an array of `elem`-byte items to hold at least `need`; false with PT_ERR_OOM. */
bool pti_value_grow(void **arr, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    int64_t ncap = *cap ? *cap : 4;
    while (ncap < need)
        ncap *= 2;
    if ((uint64_t)ncap > SIZE_MAX / elem) {
        pti_error(PT_ERR_OOM, "pt_value: out of memory growing a container to %lld items",
                  (long long)ncap);
        return false;
    }
    void *p = pti_realloc(*arr, (size_t)ncap * elem);
    if (!p) {
        pti_error(PT_ERR_OOM, "pt_value: out of memory growing a container to %lld items",
                  (long long)ncap);
        return false;
    }
    *arr = p;
    *cap = ncap;
    return true;
}

pt_status pt_value_append(pt_value *seq, pt_value *item)
{
    pt_status st = PT_OK;
    if (!seq || !item)
        st = pti_null_arg("pt_value_append", seq ? "item" : "seq");
    else if (seq->kind != PT_VALUE_LIST && seq->kind != PT_VALUE_TUPLE)
        st = pti_value_kind_error("pt_value_append", "list or tuple", seq);
    else if (item == seq)
        st = pti_error(PT_ERR_INVALID_ARG, "pt_value_append: a %s cannot contain itself",
                       pt_value_kind_name(seq->kind));
    else if (!pti_value_grow((void **)&seq->u.seq.items, &seq->u.seq.cap, seq->u.seq.len + 1,
                             sizeof(pt_value *)))
        st = PT_ERR_OOM;
    if (st != PT_OK) {
        pt_value_free(item);
        return st;
    }
    seq->u.seq.items[seq->u.seq.len++] = item;
    return PT_OK;
}
