/* The .pt writer (io.h: pt_save): a pt_value tree pickled as torch.save pickles the equivalent
 * Python object (protocol 2, tensors through torch._utils._rebuild_tensor_v2 and persistent-id
 * storages), inside the zip layout of pt_zip_write.c:
 *
 *   <archive>/data.pkl   the pickle
 *   <archive>/byteorder  "little"
 *   <archive>/data/<k>   the bytes of storage k (keys 0, 1, ... by first use in the pickle)
 *   <archive>/version    "3\n"
 *
 * The memo follows CPython's pickler, so a state dict pickles to the same bytes as torch.save
 * of it (tests/python/check_torch_load.py checks this): every tuple and REDUCE result gets a
 * BINPUT; a tensor or container reached twice is written once and fetched with BINGET the
 * second time, so shared objects stay shared; globals and strings are memoized by content. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "../core/strbuf.h"
#include "prometorch/io.h"
#include "pt_zip_write.h"

#define OP "pt_save"
#define MAX_DEPTH 1000

/* ---- the output buffer ----------------------------------------------------------------------- */

static void bb_byte(pti_strbuf *b, unsigned char c)
{
    pti_strbuf_putc(b, (char)c);
}

static void bb_u32(pti_strbuf *b, uint32_t v)
{
    unsigned char p[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    pti_strbuf_put(b, p, 4);
}

/* ---- pickle opcodes (protocol 2) ------------------------------------------------------------ */

enum {
    OP_PROTO = 0x80,
    OP_GLOBAL = 'c',
    OP_BINPUT = 'q',
    OP_LONG_BINPUT = 'r',
    OP_BINGET = 'h',
    OP_LONG_BINGET = 'j',
    OP_MARK = '(',
    OP_TUPLE = 't',
    OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86,
    OP_TUPLE3 = 0x87,
    OP_EMPTY_TUPLE = ')',
    OP_REDUCE = 'R',
    OP_BINPERSID = 'Q',
    OP_EMPTY_DICT = '}',
    OP_SETITEM = 's',
    OP_SETITEMS = 'u',
    OP_EMPTY_LIST = ']',
    OP_APPEND = 'a',
    OP_APPENDS = 'e',
    OP_BINUNICODE = 'X',
    OP_BININT1 = 'K',
    OP_BININT2 = 'M',
    OP_BININT = 'J',
    OP_LONG1 = 0x8a,
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_NONE = 'N',
    OP_BINFLOAT = 'G',
    OP_STOP = '.',
};

#define BATCH 1000 /* CPython's APPENDS / SETITEMS batch size */

/* ---- memo: (kind, pointer) for objects, (kind, bytes) for globals and strings -------------- */

enum { MEMO_STR, MEMO_GLOBAL, MEMO_TENSOR, MEMO_VALUE };

typedef struct memo_slot {
    const void *ptr; /* NULL = empty slot */
    size_t len;
    uint64_t hash;
    uint32_t idx;
    int kind;
} memo_slot;

typedef struct storage_rec {
    const pt_storage *s;
    pt_dtype dtype;
} storage_rec;

typedef struct pickler {
    pti_strbuf out;
    memo_slot *slots;
    size_t nslots, used;
    uint32_t next_idx;
    storage_rec *storages; /* key k = index k */
    size_t nstorages, cap_storages;
} pickler;

static uint64_t memo_hash(int kind, const void *ptr, size_t len, bool by_content)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)kind;
    if (by_content) {
        const unsigned char *p = ptr;
        for (size_t i = 0; i < len; i++)
            h = (h ^ p[i]) * 1099511628211ull;
    } else {
        h = (h ^ (uint64_t)(uintptr_t)ptr) * 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

static bool by_content(int kind)
{
    return kind == MEMO_STR || kind == MEMO_GLOBAL;
}

/* The slot for a key: the matching one, or the empty one where it would go. */
static memo_slot *memo_find(pickler *pk, int kind, const void *ptr, size_t len, uint64_t h)
{
    size_t mask = pk->nslots - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        memo_slot *s = &pk->slots[i];
        if (!s->ptr)
            return s;
        if (s->hash == h && s->kind == kind && s->len == len &&
            (by_content(kind) ? memcmp(s->ptr, ptr, len) == 0 : s->ptr == ptr))
            return s;
    }
}

static pt_status memo_grow(pickler *pk)
{
    size_t n = pk->nslots ? pk->nslots * 2 : 256;
    memo_slot *old = pk->slots;
    size_t old_n = pk->nslots;
    pk->slots = pti_calloc(n, sizeof(*pk->slots));
    if (!pk->slots) {
        pk->slots = old;
        return pti_error(PT_ERR_OOM, OP ": out of memory");
    }
    pk->nslots = n;
    for (size_t i = 0; i < old_n; i++)
        if (old[i].ptr)
            *memo_find(pk, old[i].kind, old[i].ptr, old[i].len, old[i].hash) = old[i];
    free(old);
    return PT_OK;
}

/* Emits BINGET and returns true when the key is memoized. */
static bool memo_get(pickler *pk, int kind, const void *ptr, size_t len)
{
    if (!pk->nslots)
        return false;
    memo_slot *s = memo_find(pk, kind, ptr, len, memo_hash(kind, ptr, len, by_content(kind)));
    if (!s->ptr)
        return false;
    if (s->idx < 256) {
        bb_byte(&pk->out, OP_BINGET);
        bb_byte(&pk->out, (unsigned char)s->idx);
    } else {
        bb_byte(&pk->out, OP_LONG_BINGET);
        bb_u32(&pk->out, s->idx);
    }
    return true;
}

/* Records the object just written under the next memo index and emits BINPUT. `ptr` must
 * outlive the pickler (it points into the value tree or at a static string). */
static pt_status memo_put(pickler *pk, int kind, const void *ptr, size_t len)
{
    if ((pk->used + 1) * 2 > pk->nslots) {
        pt_status st = memo_grow(pk);
        if (st != PT_OK)
            return st;
    }
    uint64_t h = memo_hash(kind, ptr, len, by_content(kind));
    memo_slot *s = memo_find(pk, kind, ptr, len, h);
    uint32_t idx = pk->next_idx++;
    if (!s->ptr) {
        *s = (memo_slot){ptr, len, h, idx, kind};
        pk->used++;
    }
    if (idx < 256) {
        bb_byte(&pk->out, OP_BINPUT);
        bb_byte(&pk->out, (unsigned char)idx);
    } else {
        bb_byte(&pk->out, OP_LONG_BINPUT);
        bb_u32(&pk->out, idx);
    }
    return PT_OK;
}

/* BINPUT for an object nothing refers to again (CPython memoizes every tuple and every
 * REDUCE result; doing the same keeps the byte stream identical to torch.save's). */
static void memo_anon(pickler *pk)
{
    uint32_t idx = pk->next_idx++;
    if (idx < 256) {
        bb_byte(&pk->out, OP_BINPUT);
        bb_byte(&pk->out, (unsigned char)idx);
    } else {
        bb_byte(&pk->out, OP_LONG_BINPUT);
        bb_u32(&pk->out, idx);
    }
}

/* ---- scalars ------------------------------------------------------------------------------- */

static void write_int(pickler *pk, int64_t v)
{
    pti_strbuf *b = &pk->out;
    if (v >= 0 && v <= 0xFF) {
        bb_byte(b, OP_BININT1);
        bb_byte(b, (unsigned char)v);
    } else if (v >= 0 && v <= 0xFFFF) {
        unsigned char p[3] = {OP_BININT2, (unsigned char)v, (unsigned char)(v >> 8)};
        pti_strbuf_put(b, p, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        bb_byte(b, OP_BININT);
        bb_u32(b, (uint32_t)v);
    } else {
        /* LONG1: the shortest little-endian two's-complement encoding */
        unsigned char p[8];
        for (int i = 0; i < 8; i++)
            p[i] = (unsigned char)((uint64_t)v >> (8 * i));
        int n = 8;
        while (n > 1 && ((p[n - 1] == 0x00 && !(p[n - 2] & 0x80)) ||
                         (p[n - 1] == 0xFF && (p[n - 2] & 0x80))))
            n--;
        bb_byte(b, OP_LONG1);
        bb_byte(b, (unsigned char)n);
        pti_strbuf_put(b, p, (size_t)n);
    }
}

static void write_float(pickler *pk, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    unsigned char p[9] = {OP_BINFLOAT};
    for (int i = 0; i < 8; i++)
        p[1 + i] = (unsigned char)(u >> (56 - 8 * i)); /* big-endian */
    pti_strbuf_put(&pk->out, p, 9);
}

/* Strict UTF-8 as Python's decoder wants it: no overlong forms, nothing past U+10FFFF (lone
 * surrogates are let through: the unpickler decodes with 'surrogatepass'). */
static bool valid_utf8(const unsigned char *s, size_t n)
{
    static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k;
        if (c < 0x80)
            k = 0;
        else if ((c & 0xE0) == 0xC0)
            k = 1;
        else if ((c & 0xF0) == 0xE0)
            k = 2;
        else if ((c & 0xF8) == 0xF0)
            k = 3;
        else
            return false;
        if (n - i <= k)
            return false;
        uint32_t cp = k == 0 ? c : (uint32_t)(c & (0x3F >> k));
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min_cp[k] || cp > 0x10FFFF)
            return false;
        i += k + 1;
    }
    return true;
}

/* BINUNICODE, memoized by content. `s` must outlive the pickler. */
static pt_status write_str(pickler *pk, const char *s, size_t n)
{
    if (memo_get(pk, MEMO_STR, s, n))
        return PT_OK;
    if (n > UINT32_MAX)
        return pti_error(PT_ERR_UNSUPPORTED, OP ": a str of %zu bytes is too long to pickle", n);
    if (!valid_utf8((const unsigned char *)s, n))
        return pti_error(PT_ERR_INVALID_ARG, OP ": a str is not valid UTF-8 (Python cannot "
                                                "load it)");
    bb_byte(&pk->out, OP_BINUNICODE);
    bb_u32(&pk->out, (uint32_t)n);
    pti_strbuf_put(&pk->out, s, n);
    return memo_put(pk, MEMO_STR, s, n);
}

static pt_status write_cstr(pickler *pk, const char *s)
{
    return write_str(pk, s, strlen(s));
}

/* GLOBAL "module\nname\n" (a static string), memoized. */
static pt_status write_global(pickler *pk, const char *module_nl_name_nl)
{
    size_t n = strlen(module_nl_name_nl);
    if (memo_get(pk, MEMO_GLOBAL, module_nl_name_nl, n))
        return PT_OK;
    bb_byte(&pk->out, OP_GLOBAL);
    pti_strbuf_put(&pk->out, module_nl_name_nl, n);
    return memo_put(pk, MEMO_GLOBAL, module_nl_name_nl, n);
}

/* collections.OrderedDict() : GLOBAL + EMPTY_TUPLE + REDUCE, as Python pickles one (the
 * caller memoizes the result). */
static pt_status write_ordered_dict_new(pickler *pk)
{
    pt_status st = write_global(pk, "collections\nOrderedDict\n");
    bb_byte(&pk->out, OP_EMPTY_TUPLE);
    bb_byte(&pk->out, OP_REDUCE);
    return st;
}

/* ---- tensors ------------------------------------------------------------------------------ */

static const char *storage_global(pt_dtype dt)
{
    switch (dt) {
    case PT_FLOAT32: return "torch\nFloatStorage\n";
    case PT_FLOAT64: return "torch\nDoubleStorage\n";
    case PT_FLOAT16: return "torch\nHalfStorage\n";
    case PT_BFLOAT16: return "torch\nBFloat16Storage\n";
    case PT_INT64: return "torch\nLongStorage\n";
    case PT_INT32: return "torch\nIntStorage\n";
    case PT_INT16: return "torch\nShortStorage\n";
    case PT_INT8: return "torch\nCharStorage\n";
    case PT_UINT8: return "torch\nByteStorage\n";
    case PT_BOOL: return "torch\nBoolStorage\n";
    default: return NULL;
    }
}

/* The key of t's storage (assigned on first use). */
static pt_status storage_key(pickler *pk, const pt_tensor *t, size_t *key)
{
    for (size_t i = 0; i < pk->nstorages; i++) {
        if (pk->storages[i].s != t->storage)
            continue;
        if (pk->storages[i].dtype != t->dtype)
            return pti_error(PT_ERR_UNSUPPORTED,
                             OP ": two tensors view one storage as %s and %s; torch.save "
                                "cannot store that either",
                             pt_dtype_name(pk->storages[i].dtype), pt_dtype_name(t->dtype));
        *key = i;
        return PT_OK;
    }
    if (t->storage->nbytes % pti_dtypes[t->dtype].size != 0)
        return pti_error(PT_ERR_UNSUPPORTED,
                         OP ": a %s tensor's storage holds %zu bytes, not a whole number of "
                            "elements",
                         pt_dtype_name(t->dtype), t->storage->nbytes);
    if (pk->nstorages == pk->cap_storages) {
        size_t cap = pk->cap_storages ? 2 * pk->cap_storages : 16;
        storage_rec *r = pti_realloc(pk->storages, cap * sizeof(*r));
        if (!r)
            return pti_error(PT_ERR_OOM, OP ": out of memory");
        pk->storages = r;
        pk->cap_storages = cap;
    }
    pk->storages[pk->nstorages] = (storage_rec){t->storage, t->dtype};
    *key = pk->nstorages++;
    return PT_OK;
}

/* The decimal storage keys live here so the memo can point at them. */
typedef struct key_names {
    char (*names)[24];
    size_t n;
} key_names;

static void write_int_tuple(pickler *pk, int n, const int64_t *v)
{
    if (n == 0) {
        bb_byte(&pk->out, OP_EMPTY_TUPLE);
        return;
    }
    if (n > 3)
        bb_byte(&pk->out, OP_MARK);
    for (int i = 0; i < n; i++)
        write_int(pk, v[i]);
    static const unsigned char ops[4] = {0, OP_TUPLE1, OP_TUPLE2, OP_TUPLE3};
    bb_byte(&pk->out, n > 3 ? OP_TUPLE : ops[n]);
    memo_anon(pk);
}

/* _rebuild_tensor_v2(BINPERSID(('storage', torch.XStorage, key, 'cpu', numel)), offset, size,
 * stride, requires_grad, OrderedDict()) */
static pt_status write_tensor(pickler *pk, const pt_tensor *t, const char *key_name)
{
    const char *sg = storage_global(t->dtype);
    size_t esize = pti_dtypes[t->dtype].size;
    pt_status st = write_global(pk, "torch._utils\n_rebuild_tensor_v2\n");
    bb_byte(&pk->out, OP_MARK);
    bb_byte(&pk->out, OP_MARK);
    if (st == PT_OK)
        st = write_cstr(pk, "storage");
    if (st == PT_OK)
        st = write_global(pk, sg);
    if (st == PT_OK)
        st = write_cstr(pk, key_name);
    if (st == PT_OK)
        st = write_cstr(pk, "cpu");
    write_int(pk, (int64_t)(t->storage->nbytes / esize));
    bb_byte(&pk->out, OP_TUPLE);
    memo_anon(pk);
    bb_byte(&pk->out, OP_BINPERSID);
    write_int(pk, t->offset);
    write_int_tuple(pk, t->ndim, t->shape);
    write_int_tuple(pk, t->ndim, t->stride);
    bb_byte(&pk->out, t->requires_grad ? OP_NEWTRUE : OP_NEWFALSE);
    if (st == PT_OK)
        st = write_ordered_dict_new(pk);
    memo_anon(pk);
    bb_byte(&pk->out, OP_TUPLE);
    memo_anon(pk);
    bb_byte(&pk->out, OP_REDUCE);
    if (st == PT_OK)
        st = memo_put(pk, MEMO_TENSOR, t, 0);
    return st;
}

/* ---- the value tree ------------------------------------------------------------------------ */

typedef struct pickle_ctx {
    pickler *pk;
    key_names *keys;
} pickle_ctx;

static pt_status write_value(pickle_ctx *c, const pt_value *v, int depth);

static pt_status write_tensor_value(pickle_ctx *c, const pt_tensor *t)
{
    pickler *pk = c->pk;
    if (memo_get(pk, MEMO_TENSOR, t, 0))
        return PT_OK;
    if (!storage_global(t->dtype))
        return pti_error(PT_ERR_DTYPE, OP ": a tensor has dtype %s, which .pt files cannot store",
                         pt_dtype_name(t->dtype));
    size_t key = 0;
    pt_status st = storage_key(pk, t, &key);
    if (st != PT_OK)
        return st;
    return write_tensor(pk, t, c->keys->names[key]);
}

static pt_status write_items(pickle_ctx *c, const pt_value *v, bool dict, int depth)
{
    pickler *pk = c->pk;
    int64_t n = pt_value_len(v);
    for (int64_t start = 0; start < n; start += BATCH) {
        int64_t end = start + BATCH < n ? start + BATCH : n;
        if (end - start > 1)
            bb_byte(&pk->out, OP_MARK);
        for (int64_t i = start; i < end; i++) {
            pt_status st = PT_OK;
            if (dict)
                st = write_value(c, pt_value_key_ref(v, i), depth + 1);
            if (st == PT_OK)
                st = write_value(c, pt_value_item_ref(v, i), depth + 1);
            if (st != PT_OK)
                return st;
        }
        if (end - start > 1)
            bb_byte(&pk->out, dict ? OP_SETITEMS : OP_APPENDS);
        else
            bb_byte(&pk->out, dict ? OP_SETITEM : OP_APPEND);
    }
    return PT_OK;
}

/* A non-empty dict of str keys -> tensors is what state_dict() returns: an OrderedDict. */
static bool is_state_dict(const pt_value *v)
{
    int64_t n = pt_value_len(v);
    for (int64_t i = 0; i < n; i++)
        if (!pt_value_is(pt_value_key_ref(v, i), PT_VALUE_STR) ||
            !pt_value_is(pt_value_item_ref(v, i), PT_VALUE_TENSOR))
            return false;
    return n > 0;
}

static pt_status write_tuple(pickle_ctx *c, const pt_value *v, int depth)
{
    pickler *pk = c->pk;
    int64_t n = pt_value_len(v);
    if (n == 0) {
        bb_byte(&pk->out, OP_EMPTY_TUPLE);
        return PT_OK;
    }
    if (memo_get(pk, MEMO_VALUE, v, 0))
        return PT_OK;
    if (n > 3)
        bb_byte(&pk->out, OP_MARK);
    for (int64_t i = 0; i < n; i++) {
        pt_status st = write_value(c, pt_value_item_ref(v, i), depth + 1);
        if (st != PT_OK)
            return st;
    }
    static const unsigned char ops[4] = {0, OP_TUPLE1, OP_TUPLE2, OP_TUPLE3};
    bb_byte(&pk->out, n > 3 ? OP_TUPLE : ops[n]);
    return memo_put(pk, MEMO_VALUE, v, 0);
}

/* bytes as CPython pickles non-empty bytes at protocol 2: _codecs.encode(latin-1 str,
 * 'latin1'). CPython writes b'' as bytes(), a global torch 2.x's weights_only loader refuses,
 * so empty bytes take the same _codecs.encode('', 'latin1') form. */
static pt_status write_bytes(pickle_ctx *c, const pt_value *v)
{
    pickler *pk = c->pk;
    size_t n = 0;
    const unsigned char *p = pt_value_as_bytes(v, &n);
    if (n > UINT32_MAX / 2)
        return pti_error(PT_ERR_UNSUPPORTED, OP ": bytes of %zu bytes are too long to pickle", n);
    pt_status st = write_global(pk, "_codecs\nencode\n");
    pti_strbuf latin = {0};
    for (size_t i = 0; i < n; i++) {
        unsigned char u[2] = {(unsigned char)(0xC0 | (p[i] >> 6)),
                              (unsigned char)(0x80 | (p[i] & 0x3F))};
        pti_strbuf_put(&latin, p[i] < 0x80 ? &p[i] : u, p[i] < 0x80 ? 1 : 2);
    }
    if (latin.oom) {
        pti_strbuf_free(&latin);
        return pti_error(PT_ERR_OOM, OP ": out of memory");
    }
    bb_byte(&pk->out, OP_BINUNICODE); /* the buffer is temporary: not looked up again */
    bb_u32(&pk->out, (uint32_t)latin.len);
    pti_strbuf_put(&pk->out, latin.data, latin.len);
    pti_strbuf_free(&latin);
    memo_anon(pk);
    if (st == PT_OK)
        st = write_cstr(pk, "latin1");
    bb_byte(&pk->out, OP_TUPLE2);
    memo_anon(pk);
    bb_byte(&pk->out, OP_REDUCE);
    memo_anon(pk);
    return st;
}

static pt_status write_value(pickle_ctx *c, const pt_value *v, int depth)
{
    pickler *pk = c->pk;
    if (depth > MAX_DEPTH)
        return pti_error(PT_ERR_UNSUPPORTED, OP ": values nested deeper than %d levels", MAX_DEPTH);
    switch (pt_value_kind_of(v)) {
    case PT_VALUE_NONE: bb_byte(&pk->out, OP_NONE); return PT_OK;
    case PT_VALUE_BOOL: {
        bool b = false;
        pt_value_as_bool(v, &b);
        bb_byte(&pk->out, b ? OP_NEWTRUE : OP_NEWFALSE);
        return PT_OK;
    }
    case PT_VALUE_INT: {
        int64_t i = 0;
        pt_value_as_int(v, &i);
        write_int(pk, i);
        return PT_OK;
    }
    case PT_VALUE_FLOAT: {
        double d = 0;
        pt_value_as_float(v, &d);
        write_float(pk, d);
        return PT_OK;
    }
    case PT_VALUE_STR: {
        size_t n = 0;
        const char *s = pt_value_as_str(v, &n);
        return write_str(pk, s, n);
    }
    case PT_VALUE_BYTES: return write_bytes(c, v);
    case PT_VALUE_TENSOR: return write_tensor_value(c, pt_value_tensor_ref(v));
    case PT_VALUE_TUPLE: return write_tuple(c, v, depth);
    case PT_VALUE_LIST:
    case PT_VALUE_DICT: {
        if (memo_get(pk, MEMO_VALUE, v, 0))
            return PT_OK;
        bool dict = pt_value_is(v, PT_VALUE_DICT);
        pt_status st = PT_OK;
        if (dict && is_state_dict(v))
            st = write_ordered_dict_new(pk);
        else
            bb_byte(&pk->out, dict ? OP_EMPTY_DICT : OP_EMPTY_LIST);
        if (st == PT_OK)
            st = memo_put(pk, MEMO_VALUE, v, 0);
        return st == PT_OK ? write_items(c, v, dict, depth) : st;
    }
    }
    return pti_error(PT_ERR_INVALID_ARG, OP ": unknown value kind %d", (int)pt_value_kind_of(v));
}

/* Counts tensors in the tree (an upper bound on the storage keys). */
static size_t count_tensors(const pt_value *v, int depth)
{
    pt_value_kind k = pt_value_kind_of(v);
    if (k == PT_VALUE_TENSOR)
        return 1;
    if ((k != PT_VALUE_LIST && k != PT_VALUE_TUPLE && k != PT_VALUE_DICT) || depth > MAX_DEPTH)
        return 0;
    size_t n = 0;
    for (int64_t i = 0; i < pt_value_len(v); i++) {
        n += count_tensors(pt_value_item_ref(v, i), depth + 1);
        if (k == PT_VALUE_DICT)
            n += count_tensors(pt_value_key_ref(v, i), depth + 1);
    }
    return n;
}

static void pickler_free(pickler *pk)
{
    pti_strbuf_free(&pk->out);
    free(pk->slots);
    free(pk->storages);
}

/* Pickles v into pk->out, collecting its storages. */
static pt_status pickle_value(pickler *pk, key_names *keys, const pt_value *v)
{
    keys->n = count_tensors(v, 0);
    keys->names = pti_calloc(keys->n ? keys->n : 1, sizeof(*keys->names));
    if (!keys->names)
        return pti_error(PT_ERR_OOM, OP ": out of memory");
    for (size_t i = 0; i < keys->n; i++)
        snprintf(keys->names[i], sizeof(keys->names[i]), "%zu", i);
    bb_byte(&pk->out, OP_PROTO);
    bb_byte(&pk->out, 2);
    pickle_ctx c = {pk, keys};
    pt_status st = write_value(&c, v, 0);
    bb_byte(&pk->out, OP_STOP);
    if (st == PT_OK && pk->out.oom)
        st = pti_error(PT_ERR_OOM, OP ": out of memory for the pickle");
    return st;
}

/* ---- the archive ---------------------------------------------------------------------------- */

/* torch's archive folder name: the path's base name (after the last '/' or '\') up to its last
 * '.'; "archive" when that is empty (torch would write an empty folder name). */
static char *archive_name(const char *path)
{
    const char *base = path;
    for (const char *p = path; *p; p++)
        if (*p == '/' || *p == '\\')
            base = p + 1;
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot)
        n = (size_t)(dot - base);
    if (n == 0) {
        base = "archive";
        n = 7;
    }
    char *s = pti_malloc(n + 1);
    if (s) {
        memcpy(s, base, n);
        s[n] = '\0';
    }
    return s;
}

/* Adds "<archive>/<name>". */
static pt_status add_record(pti_zip_writer *z, const char *archive, const char *name,
                            const void *data, uint64_t size)
{
    size_t n = strlen(archive) + strlen(name) + 2;
    char *full = pti_malloc(n);
    if (!full)
        return pti_error(PT_ERR_OOM, OP ": out of memory");
    snprintf(full, n, "%s/%s", archive, name);
    pt_status st = pti_zip_add(z, full, data, size);
    free(full);
    return st;
}

/* data/<key>: the whole storage, copied to the host first when it lives on a device. */
static pt_status add_storage(pti_zip_writer *z, const char *archive, size_t key,
                             const storage_rec *r)
{
    pt_storage *s = (pt_storage *)r->s;
    char name[40];
    snprintf(name, sizeof(name), "data/%zu", key);
    if (s->nbytes == 0 || s->device.type == PT_DEVICE_CPU)
        return add_record(z, archive, name, s->nbytes ? s->data : NULL, s->nbytes);
    void *buf = pti_malloc(s->nbytes);
    if (!buf)
        return pti_error(PT_ERR_OOM, OP ": out of memory (%zu bytes)", s->nbytes);
    int64_t numel = (int64_t)s->nbytes, one = 1;
    pt_tensor *bytes = pti_tensor_on_storage(s, PT_UINT8, 1, &numel, &one, 0);
    pt_status st = bytes ? pt_copy_to_host(bytes, buf, s->nbytes) : pt_last_status();
    pt_release(bytes);
    if (st == PT_OK)
        st = add_record(z, archive, name, buf, s->nbytes);
    free(buf);
    return st;
}

/* Test hook PT_SAVE_ZIP64_LIMIT (docs/architecture.md): sizes and offsets from this many bytes
 * on get zip64 records, so the tests exercise them on small files. Read once, at the first
 * pt_save. */
static pthread_once_t zip64_limit_once = PTHREAD_ONCE_INIT;
static bool zip64_limit_set;
static uint64_t zip64_limit;

static void read_zip64_limit(void)
{
    const char *lim = getenv("PT_SAVE_ZIP64_LIMIT");
    if (lim && *lim) {
        zip64_limit_set = true;
        zip64_limit = strtoull(lim, NULL, 10);
    }
}

static pt_status write_archive(FILE *f, const char *path, const pickler *pk)
{
    char *archive = archive_name(path);
    if (!archive)
        return pti_error(PT_ERR_OOM, OP ": out of memory");
    pti_zip_writer z;
    pti_zip_init(&z, f, path, OP);
    pthread_once(&zip64_limit_once, read_zip64_limit);
    if (zip64_limit_set)
        z.zip64_limit = zip64_limit;
    pt_status st = add_record(&z, archive, "data.pkl", pk->out.data, pk->out.len);
    if (st == PT_OK)
        st = add_record(&z, archive, "byteorder", "little", 6);
    for (size_t i = 0; st == PT_OK && i < pk->nstorages; i++)
        st = add_storage(&z, archive, i, &pk->storages[i]);
    if (st == PT_OK)
        st = add_record(&z, archive, "version", "3\n", 2);
    if (st == PT_OK)
        st = pti_zip_finish(&z);
    pti_zip_free(&z);
    free(archive);
    return st;
}

pt_status pt_save(const char *path, const pt_value *v)
{
    if (!path)
        return pti_error(PT_ERR_INVALID_ARG, OP ": path is NULL");
    if (!v)
        return pti_error(PT_ERR_INVALID_ARG, OP ": value is NULL");
    pickler pk = {0};
    key_names keys = {0};
    pt_status st = pickle_value(&pk, &keys, v);
    size_t plen = strlen(path);
    char *tmp = st == PT_OK ? pti_malloc(plen + 5) : NULL;
    if (st == PT_OK && !tmp)
        st = pti_error(PT_ERR_OOM, OP ": out of memory");
    if (st == PT_OK) {
        memcpy(tmp, path, plen);
        memcpy(tmp + plen, ".tmp", 5);
        FILE *f = fopen(tmp, "wb");
        if (!f) {
            st = pti_error(PT_ERR_IO, OP ": cannot write '%s': %s", path, strerror(errno));
        } else {
            st = write_archive(f, path, &pk);
            if (fclose(f) != 0 && st == PT_OK)
                st = pti_error(PT_ERR_IO, OP ": cannot write '%s': %s", path, strerror(errno));
            if (st == PT_OK && rename(tmp, path) != 0)
                st = pti_error(PT_ERR_IO, OP ": cannot rename '%s' to '%s': %s", tmp, path,
                               strerror(errno));
            if (st != PT_OK)
                remove(tmp);
        }
    }
    free(tmp);
    free(keys.names);
    pickler_free(&pk);
    return st;
}
