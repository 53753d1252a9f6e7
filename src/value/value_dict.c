/* Dicts of the value tree, with Python's key semantics: hashing (1, 1.0 and True hash alike,
 * tuples hash their items), Python equality (pt_value_equal), the insertion-ordered entry
 * array with its open-addressing index, lookups, deletion, and the deep copy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "value_internal.h"

/* ---- hashing and equality (Python semantics) ----------------------------------------------------
 */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* A per-process random key mixed into every hash, so a file cannot be crafted to make all of
 * its dict keys collide (which would make loading it quadratic). */
static uint64_t hash_secret(void)
{
    static atomic_uint_fast64_t secret;
    uint64_t s = atomic_load_explicit(&secret, memory_order_relaxed);
    if (s)
        return s;
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = mix64((uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&r);
    uint_fast64_t expected = 0;
    atomic_compare_exchange_strong(&secret, &expected, r | 1);
    return atomic_load(&secret);
}

static uint64_t int_hash(uint64_t i)
{
    return mix64(i ^ hash_secret());
}

/* True when f is an integer that int64 holds exactly; *i gets it. */
static bool float_as_int(double f, int64_t *i)
{
    if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0) || floor(f) != f)
        return false;
    *i = (int64_t)f;
    return true;
}

static uint64_t bytes_hash(const char *s, size_t len, uint64_t seed)
{
    uint64_t h = 1469598103934665603ULL ^ seed ^ hash_secret();
    for (size_t k = 0; k < len; k++)
        h = (h ^ (unsigned char)s[k]) * 1099511628211ULL;
    return mix64(h ^ len);
}

bool pti_value_hash(const pt_value *v, uint64_t *out, int depth)
{
    int64_t i;
    if (depth > PTI_VALUE_MAX_DEPTH) {
        pti_error(PT_ERR_INVALID_ARG, "pt_value: key nested deeper than %d levels",
                  PTI_VALUE_MAX_DEPTH);
        return false;
    }
    switch (v->kind) {
    case PT_VALUE_NONE: *out = 0x6e6f6e65ULL; return true;
    case PT_VALUE_BOOL: *out = int_hash((uint64_t)v->u.b); return true;
    case PT_VALUE_INT: *out = int_hash((uint64_t)v->u.i); return true;
    case PT_VALUE_FLOAT:
        if (float_as_int(v->u.f, &i)) {
            *out = int_hash((uint64_t)i);
        } else {
            uint64_t bits;
            memcpy(&bits, &v->u.f, sizeof bits);
            *out = int_hash(bits ^ 0x9e3779b97f4a7c15ULL);
        }
        return true;
    case PT_VALUE_STR: *out = bytes_hash(v->u.s.data, v->u.s.len, 1); return true;
    case PT_VALUE_BYTES: *out = bytes_hash(v->u.s.data, v->u.s.len, 2); return true;
    case PT_VALUE_TUPLE: {
        uint64_t h = 0x7475706cULL ^ (uint64_t)v->u.seq.len;
        for (int64_t k = 0; k < v->u.seq.len; k++) {
            uint64_t hk;
            if (!pti_value_hash(v->u.seq.items[k], &hk, depth + 1))
                return false;
            h = mix64(h * 1000003ULL ^ hk);
        }
        *out = h;
        return true;
    }
    default:
        pti_error(PT_ERR_INVALID_ARG, "pt_value: unhashable dict key of kind %s",
                  pt_value_kind_name(v->kind));
        return false;
    }
}

static bool is_numeric(pt_value_kind k)
{
    return k == PT_VALUE_BOOL || k == PT_VALUE_INT || k == PT_VALUE_FLOAT;
}

/* Python's == across bool, int and float: exact, with no rounding of large ints. */
static bool numeric_equal(const pt_value *a, const pt_value *b)
{
    if (a->kind == PT_VALUE_FLOAT && b->kind == PT_VALUE_FLOAT)
        return a->u.f == b->u.f;
    if (b->kind == PT_VALUE_FLOAT)
        return numeric_equal(b, a);
    int64_t ib = b->kind == PT_VALUE_BOOL ? b->u.b : b->u.i;
    if (a->kind != PT_VALUE_FLOAT)
        return (a->kind == PT_VALUE_BOOL ? a->u.b : a->u.i) == ib;
    int64_t ia;
    return float_as_int(a->u.f, &ia) && ia == ib;
}

static bool tensor_equal(const pt_tensor *x, const pt_tensor *y)
{
    if (x == y)
        return true;
    if (x->storage != y->storage || x->offset != y->offset || x->ndim != y->ndim ||
        x->dtype != y->dtype)
        return false;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != y->shape[d] || x->stride[d] != y->stride[d])
            return false;
    return true;
}

static bool value_equal(const pt_value *a, const pt_value *b, int depth, bool *ok);

static bool dict_equal(const pt_value *a, const pt_value *b, int depth, bool *ok)
{
    if (a->u.dict.len != b->u.dict.len)
        return false;
    for (int64_t k = 0; k < a->u.dict.len && *ok; k++) {
        const pti_dict_entry *e = &a->u.dict.entries[k];
        int64_t j = pti_dict_find(b, e->key, e->hash);
        if (j < 0 || !value_equal(e->val, b->u.dict.entries[j].val, depth + 1, ok))
            return false;
    }
    return *ok;
}

/* Structural equality; *ok turns false (error set) when the depth limit is hit. */
static bool value_equal(const pt_value *a, const pt_value *b, int depth, bool *ok)
{
    if (a == b) /* identity first, as Python's containers and dict lookups do */
        return true;
    if (depth > PTI_VALUE_MAX_DEPTH) {
        pti_error(PT_ERR_INVALID_ARG, "pt_value_equal: values nested deeper than %d levels",
                  PTI_VALUE_MAX_DEPTH);
        *ok = false;
        return false;
    }
    if (is_numeric(a->kind) && is_numeric(b->kind))
        return numeric_equal(a, b);
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case PT_VALUE_NONE: return true;
    case PT_VALUE_STR:
    case PT_VALUE_BYTES:
        return a->u.s.len == b->u.s.len && memcmp(a->u.s.data, b->u.s.data, a->u.s.len) == 0;
    case PT_VALUE_TENSOR: return tensor_equal(a->u.t, b->u.t);
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE:
        if (a->u.seq.len != b->u.seq.len)
            return false;
        for (int64_t k = 0; k < a->u.seq.len; k++)
            if (!value_equal(a->u.seq.items[k], b->u.seq.items[k], depth + 1, ok))
                return false;
        return true;
    case PT_VALUE_DICT: return dict_equal(a, b, depth, ok);
    default: return false;
    }
}

bool pt_value_equal(const pt_value *a, const pt_value *b)
{
    if (!a || !b)
        return a == b;
    if (a == b && a->kind == PT_VALUE_FLOAT) /* nan == nan is False at the top level */
        return a->u.f == a->u.f;
    bool ok = true;
    return value_equal(a, b, 0, &ok) && ok;
}

/* ---- dicts ----------------------------------------------------------------------------------- */

int64_t pti_dict_find(const pt_value *dict, const pt_value *key, uint64_t hash)
{
    if (!dict->u.dict.index_cap)
        return -1;
    uint64_t mask = (uint64_t)dict->u.dict.index_cap - 1;
    for (uint64_t slot = hash & mask;; slot = (slot + 1) & mask) {
        int64_t e = dict->u.dict.index[slot];
        if (e < 0)
            return -1;
        const pti_dict_entry *en = &dict->u.dict.entries[e];
        bool ok = true;
        if (en->hash == hash && (en->key == key || value_equal(en->key, key, 0, &ok)))
            return e;
    }
}

static void index_insert(pt_value *dict, int64_t e)
{
    uint64_t mask = (uint64_t)dict->u.dict.index_cap - 1;
    uint64_t slot = dict->u.dict.entries[e].hash & mask;
    while (dict->u.dict.index[slot] >= 0)
        slot = (slot + 1) & mask;
    dict->u.dict.index[slot] = e;
}

/* Rebuilds the index with room for `need` entries at load <= 1/2. */
static bool reindex(pt_value *dict, int64_t need)
{
    int64_t cap = dict->u.dict.index_cap ? dict->u.dict.index_cap : 8;
    while (cap < 2 * need)
        cap *= 2;
    if (cap != dict->u.dict.index_cap) {
        int64_t *idx = (uint64_t)cap <= SIZE_MAX / sizeof(int64_t)
                           ? pti_malloc((size_t)cap * sizeof(int64_t))
                           : NULL;
        if (!idx) {
            pti_error(PT_ERR_OOM, "pt_value: out of memory for a dict index of %lld slots",
                      (long long)cap);
            return false;
        }
        free(dict->u.dict.index);
        dict->u.dict.index = idx;
        dict->u.dict.index_cap = cap;
    }
    memset(dict->u.dict.index, 0xff, (size_t)cap * sizeof(int64_t));
    for (int64_t e = 0; e < dict->u.dict.len; e++)
        index_insert(dict, e);
    return true;
}

static pt_status dict_check(const char *fn, const pt_value *dict)
{
    if (!dict)
        return pti_null_arg(fn, "dict");
    if (dict->kind != PT_VALUE_DICT)
        return pti_value_kind_error(fn, "dict", dict);
    return PT_OK;
}

static pt_status dict_put(pt_value *dict, pt_value *key, pt_value *val)
{
    uint64_t h;
    if (!pti_value_hash(key, &h, 0))
        return pt_last_status();
    int64_t e = pti_dict_find(dict, key, h);
    if (e >= 0) { /* Python keeps the first key object and its position */
        pt_value *old = dict->u.dict.entries[e].val;
        dict->u.dict.entries[e].val = val;
        pt_value_free(old);
        pt_value_free(key);
        return PT_OK;
    }
    int64_t n = dict->u.dict.len;
    if (!pti_value_grow((void **)&dict->u.dict.entries, &dict->u.dict.cap, n + 1,
                        sizeof(pti_dict_entry)))
        return PT_ERR_OOM;
    if (2 * (n + 1) > dict->u.dict.index_cap && !reindex(dict, n + 1))
        return PT_ERR_OOM;
    dict->u.dict.entries[n] = (pti_dict_entry){key, val, h};
    dict->u.dict.len = n + 1;
    index_insert(dict, n);
    return PT_OK;
}

pt_status pt_value_dict_set(pt_value *dict, pt_value *key, pt_value *val)
{
    pt_status st = dict_check("pt_value_dict_set", dict);
    if (st == PT_OK && (!key || !val))
        st = pti_null_arg("pt_value_dict_set", key ? "val" : "key");
    if (st == PT_OK && (val == dict || key == dict))
        st = pti_error(PT_ERR_INVALID_ARG, "pt_value_dict_set: a dict cannot contain itself");
    if (st == PT_OK)
        st = dict_put(dict, key, val);
    if (st != PT_OK) {
        pt_value_free(key);
        pt_value_free(val);
    }
    return st;
}

pt_status pt_value_dict_set_str(pt_value *dict, const char *key, pt_value *val)
{
    if (!key) {
        pt_value_free(val);
        return pti_null_arg("pt_value_dict_set_str", "key");
    }
    pt_value *k = pt_value_str(key);
    if (!k) {
        pt_value_free(val);
        return pt_last_status();
    }
    return pt_value_dict_set(dict, k, val);
}

pt_status pt_value_dict_set_int(pt_value *dict, int64_t key, pt_value *val)
{
    pt_value *k = pt_value_int(key);
    if (!k) {
        pt_value_free(val);
        return pt_last_status();
    }
    return pt_value_dict_set(dict, k, val);
}

pt_status pt_value_dict_del_str(pt_value *dict, const char *key)
{
    pt_status st = dict_check("pt_value_dict_del_str", dict);
    if (st != PT_OK)
        return st;
    if (!key)
        return pti_null_arg("pt_value_dict_del_str", "key");
    pt_value probe = pti_value_probe_str(key, strlen(key));
    uint64_t h;
    pti_value_hash(&probe, &h, 0);
    int64_t e = pti_dict_find(dict, &probe, h);
    if (e < 0)
        return pti_error(PT_ERR_INDEX, "pt_value_dict_del_str: key %s not found",
                         pti_value_key_desc(&probe));
    pti_dict_entry gone = dict->u.dict.entries[e];
    int64_t n = --dict->u.dict.len;
    memmove(&dict->u.dict.entries[e], &dict->u.dict.entries[e + 1],
            (size_t)(n - e) * sizeof(pti_dict_entry));
    reindex(dict, n); /* same capacity: cannot fail */
    pt_value_free(gone.key);
    pt_value_free(gone.val);
    return PT_OK;
}

pt_value pti_value_probe_str(const char *s, size_t len)
{
    pt_value p;
    memset(&p, 0, sizeof p);
    atomic_init(&p.refcount, 1);
    p.kind = PT_VALUE_STR;
    p.u.s.data = (char *)s;
    p.u.s.len = len;
    return p;
}

pt_value pti_value_probe_int(int64_t i)
{
    pt_value p;
    memset(&p, 0, sizeof p);
    atomic_init(&p.refcount, 1);
    p.kind = PT_VALUE_INT;
    p.u.i = i;
    return p;
}

static pt_value *dict_get(const char *fn, const pt_value *dict, const pt_value *key)
{
    if (dict_check(fn, dict) != PT_OK)
        return NULL;
    if (!key)
        return (pti_null_arg(fn, "key"), NULL);
    uint64_t h;
    if (!pti_value_hash(key, &h, 0))
        return NULL;
    int64_t e = pti_dict_find(dict, key, h);
    if (e < 0)
        return pti_error_null(PT_ERR_INDEX, "%s: key %s not found", fn, pti_value_key_desc(key));
    return dict->u.dict.entries[e].val;
}

pt_value *pt_value_get_ref(const pt_value *dict, const pt_value *key)
{
    return dict_get("pt_value_get_ref", dict, key);
}

pt_value *pt_value_get_str_ref(const pt_value *dict, const char *key)
{
    if (!key)
        return (pti_null_arg("pt_value_get_str_ref", "key"), NULL);
    pt_value probe = pti_value_probe_str(key, strlen(key));
    return dict_get("pt_value_get_str_ref", dict, &probe);
}

pt_value *pt_value_get_int_ref(const pt_value *dict, int64_t key)
{
    pt_value probe = pti_value_probe_int(key);
    return dict_get("pt_value_get_int_ref", dict, &probe);
}

/* ---- copy ------------------------------------------------------------------------------------ */

static pt_value *value_copy(const pt_value *v, int depth);

static pt_value *seq_copy(const pt_value *v, int depth)
{
    pt_value *c = pti_value_node_new(v->kind, 0);
    if (!c || !pti_value_grow((void **)&c->u.seq.items, &c->u.seq.cap, v->u.seq.len,
                              sizeof(pt_value *))) {
        pt_value_free(c);
        return NULL;
    }
    for (int64_t k = 0; k < v->u.seq.len; k++) {
        pt_value *item = value_copy(v->u.seq.items[k], depth + 1);
        if (!item) {
            pt_value_free(c);
            return NULL;
        }
        c->u.seq.items[c->u.seq.len++] = item;
    }
    return c;
}

void pti_value_dict_set_meta(pt_value *d, pt_value *meta)
{
    pt_value *old = d->u.dict.meta;
    d->u.dict.meta = meta;
    pt_value_free(old);
}

bool pti_value_dict_meta_version(const pt_value *d, const char *prefix, int64_t *version)
{
    if (!d || d->kind != PT_VALUE_DICT || !d->u.dict.meta)
        return false;
    const pt_value *v = pt_value_get_str_ref(d->u.dict.meta, prefix);
    if (pt_value_kind_of(v) != PT_VALUE_INT)
        return false;
    *version = v->u.i;
    return true;
}

/* Keys are shared (they are immutable once hashed); values are copied. */
static pt_value *dict_copy(const pt_value *v, int depth)
{
    pt_value *c = pti_value_node_new(PT_VALUE_DICT, 0);
    if (!c)
        return NULL;
    c->u.dict.meta = pt_value_retain(v->u.dict.meta);
    int64_t n = v->u.dict.len;
    if (n > 0 &&
        (!pti_value_grow((void **)&c->u.dict.entries, &c->u.dict.cap, n, sizeof(pti_dict_entry)) ||
         !reindex(c, n))) {
        pt_value_free(c);
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        const pti_dict_entry *e = &v->u.dict.entries[k];
        pt_value *val = value_copy(e->val, depth + 1);
        if (!val) {
            pt_value_free(c);
            return NULL;
        }
        c->u.dict.entries[k] = (pti_dict_entry){pt_value_retain(e->key), val, e->hash};
        c->u.dict.len = k + 1;
        index_insert(c, k);
    }
    return c;
}

static pt_value *value_copy(const pt_value *v, int depth)
{
    if (depth > PTI_VALUE_MAX_DEPTH)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_value_copy: value nested deeper than %d levels",
                              PTI_VALUE_MAX_DEPTH);
    switch (v->kind) {
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE: return seq_copy(v, depth);
    case PT_VALUE_DICT: return dict_copy(v, depth);
    default: return pt_value_retain((pt_value *)v);
    }
}

pt_value *pt_value_copy(const pt_value *v)
{
    if (!v)
        return (pti_null_arg("pt_value_copy", "v"), NULL);
    return value_copy(v, 0);
}
