/* The GGUF reader (include/prometorch/gguf.h).
 *
 * Layout (GGUF v2/v3, little-endian): "GGUF", u32 version, u64 tensor count, u64 KV count, the
 * KVs (gguf_string key, u32 type, value; arrays are u32 element type + u64 count + packed
 * elements; a gguf_string is a u64 length + bytes), the tensor infos (name, u32 n_dims, u64
 * ne[n_dims], u32 ggml type, u64 offset), zero padding to general.alignment (default 32), then
 * the data section that the offsets are relative to.
 *
 * Everything is checked once, at open, before anything is allocated or read: counts are
 * bounded by the bytes left (a KV needs at least 13, a tensor info at least 32), every length
 * and element count by the bytes that must hold it, with overflow-safe arithmetic
 * (a + b > size is tested as b > size - a), and the tables grow as entries are actually read.
 * Strings are copied, NUL-terminated, into one arena (no larger than the metadata); KVs keep the
 * file offset of their value, and the getters decode it from the mapping. We are as strict as
 * ggml's gguf.cpp (nested arrays, duplicate keys and tensor names, unknown types, unaligned offsets
 * are refused) except that tensor data need only be aligned, inside the file and non-overlapping,
 * not packed in tensor-info order. */
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "file_map.h"
#include "prometorch/gguf.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
/* Minimal encoded sizes: a KV (empty key, type, a one-byte value) and a 1-dim tensor info. */
#define GGUF_MIN_KV_BYTES 13
#define GGUF_MIN_TENSOR_BYTES 32

/* ggml's types: name, elements per block, bytes per block, the pt_dtype (COUNT: none). */
typedef struct ggml_type_info {
    const char *name;
    int64_t blck;
    uint64_t size;
    pt_dtype dtype;
} ggml_type_info;

#define NO_DTYPE PT_DTYPE_COUNT
static const ggml_type_info ggml_types[] = {
    [0] = {"F32", 1, 4, PT_FLOAT32},       [1] = {"F16", 1, 2, PT_FLOAT16},
    [2] = {"Q4_0", 32, 18, PT_Q4_0},       [3] = {"Q4_1", 32, 20, PT_Q4_1},
    [6] = {"Q5_0", 32, 22, PT_Q5_0},       [7] = {"Q5_1", 32, 24, PT_Q5_1},
    [8] = {"Q8_0", 32, 34, PT_Q8_0},       [9] = {"Q8_1", 32, 36, PT_Q8_1},
    [10] = {"Q2_K", 256, 84, PT_Q2_K},     [11] = {"Q3_K", 256, 110, PT_Q3_K},
    [12] = {"Q4_K", 256, 144, PT_Q4_K},    [13] = {"Q5_K", 256, 176, PT_Q5_K},
    [14] = {"Q6_K", 256, 210, PT_Q6_K},    [15] = {"Q8_K", 256, 292, PT_Q8_K},
    [16] = {"IQ2_XXS", 256, 66, NO_DTYPE}, [17] = {"IQ2_XS", 256, 74, NO_DTYPE},
    [18] = {"IQ3_XXS", 256, 98, NO_DTYPE}, [19] = {"IQ1_S", 256, 50, NO_DTYPE},
    [20] = {"IQ4_NL", 32, 18, NO_DTYPE},   [21] = {"IQ3_S", 256, 110, NO_DTYPE},
    [22] = {"IQ2_S", 256, 82, NO_DTYPE},   [23] = {"IQ4_XS", 256, 136, NO_DTYPE},
    [24] = {"I8", 1, 1, PT_INT8},          [25] = {"I16", 1, 2, PT_INT16},
    [26] = {"I32", 1, 4, PT_INT32},        [27] = {"I64", 1, 8, PT_INT64},
    [28] = {"F64", 1, 8, PT_FLOAT64},      [29] = {"IQ1_M", 256, 56, NO_DTYPE},
    [30] = {"BF16", 1, 2, PT_BFLOAT16},    [34] = {"TQ1_0", 256, 54, NO_DTYPE},
    [35] = {"TQ2_0", 256, 66, NO_DTYPE},   [39] = {"MXFP4", 32, 17, NO_DTYPE},
    [40] = {"NVFP4", 64, 36, NO_DTYPE},    [41] = {"Q1_0", 128, 18, NO_DTYPE},
};
#define GGML_TYPE_TABLE_LEN ((int)(sizeof ggml_types / sizeof ggml_types[0]))

static const ggml_type_info *ggml_type(uint32_t id)
{
    return id < (uint32_t)GGML_TYPE_TABLE_LEN && ggml_types[id].name ? &ggml_types[id] : NULL;
}

/* Encoded sizes of the scalar value types (0: string / array, variable). */
static const uint8_t value_size[PT_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct gguf_str {
    uint64_t off, len; /* in the arena */
} gguf_str;

typedef struct gguf_kv {
    gguf_str key;
    pt_gguf_type type;
    pt_gguf_type arr_type; /* arrays */
    uint64_t count;        /* arrays: element count */
    uint64_t pos;          /* file offset of a scalar value or of an array's first element */
    gguf_str str;          /* a string value */
    uint64_t strs;         /* a string array: index of its first element in g->strs */
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t ggml_type;
    int ndim;
    int64_t ne[GGUF_MAX_DIMS], shape[GGUF_MAX_DIMS];
    int64_t numel;
    uint64_t nbytes, offset;
} gguf_tensor;

struct pt_gguf {
    pti_file_map *map;
    uint32_t version, alignment;
    uint64_t data_offset;
    int64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    char *arena;
    uint64_t arena_len, arena_cap;
    gguf_str *strs;
    uint64_t n_strs, strs_cap;
};

/* ---- parsing --------------------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p;
    uint64_t size, pos;
    const char *file;
    pt_gguf *g;
} reader;

static uint64_t load_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Checks that n more bytes exist for `what`. */
static bool need(reader *r, uint64_t n, const char *what)
{
    if (n > r->size - r->pos) {
        pti_error(PT_ERR_FORMAT,
                  "%s: gguf: %s runs past the end of the file (offset %llu + %llu > %llu)", r->file,
                  what, (unsigned long long)r->pos, (unsigned long long)n,
                  (unsigned long long)r->size);
        return false;
    }
    return true;
}

static bool read_uint(reader *r, int n, uint64_t *out, const char *what)
{
    if (!need(r, (uint64_t)n, what))
        return false;
    *out = load_le(r->p + r->pos, n);
    r->pos += (uint64_t)n;
    return true;
}

static bool grow(void **arr, uint64_t *cap, uint64_t need_items, size_t elem, const char *file)
{
    if (need_items <= *cap)
        return true;
    uint64_t c = *cap ? *cap : 64;
    while (c < need_items)
        c *= 2;
    void *p = pti_realloc(*arr, (size_t)c * elem);
    if (!p) {
        pti_error(PT_ERR_OOM, "%s: gguf: out of memory (%llu bytes)", file,
                  (unsigned long long)(c * elem));
        return false;
    }
    *arr = p;
    *cap = c;
    return true;
}

/* A gguf_string, copied NUL-terminated into the arena. */
static bool read_str(reader *r, gguf_str *out, const char *what)
{
    uint64_t len;
    if (!read_uint(r, 8, &len, what) || !need(r, len, what))
        return false;
    pt_gguf *g = r->g;
    if (!grow((void **)&g->arena, &g->arena_cap, g->arena_len + len + 1, 1, r->file))
        return false;
    memcpy(g->arena + g->arena_len, r->p + r->pos, (size_t)len);
    g->arena[g->arena_len + len] = '\0';
    out->off = g->arena_len;
    out->len = len;
    g->arena_len += len + 1;
    r->pos += len;
    return true;
}

static const char *str_of(const pt_gguf *g, gguf_str s)
{
    return g->arena + s.off;
}

static bool read_array(reader *r, gguf_kv *kv)
{
    const char *key = str_of(r->g, kv->key);
    uint64_t type, count;
    if (!read_uint(r, 4, &type, "an array type") || !read_uint(r, 8, &count, "an array length"))
        return false;
    if (type == PT_GGUF_ARRAY) {
        pti_error(PT_ERR_FORMAT, "%s: gguf: key '%s' is an array of arrays (not supported)",
                  r->file, key);
        return false;
    }
    if (type >= PT_GGUF_TYPE_COUNT) {
        pti_error(PT_ERR_FORMAT, "%s: gguf: key '%s' is an array of unknown type %llu", r->file,
                  key, (unsigned long long)type);
        return false;
    }
    kv->arr_type = (pt_gguf_type)type;
    kv->count = count;
    kv->pos = r->pos;
    uint64_t elem = type == PT_GGUF_STRING ? 8 : value_size[type]; /* strings: at least 8 */
    if (count > (r->size - r->pos) / elem) {
        pti_error(PT_ERR_FORMAT,
                  "%s: gguf: array '%s' of %llu %s elements runs past the end of the file "
                  "(offset %llu, %llu bytes left)",
                  r->file, key, (unsigned long long)count, pt_gguf_type_name(kv->arr_type),
                  (unsigned long long)r->pos, (unsigned long long)(r->size - r->pos));
        return false;
    }
    if (type != PT_GGUF_STRING) {
        r->pos += count * elem;
        return true;
    }
    pt_gguf *g = r->g;
    kv->strs = g->n_strs;
    for (uint64_t j = 0; j < count; j++) {
        if (!grow((void **)&g->strs, &g->strs_cap, g->n_strs + 1, sizeof(gguf_str), r->file) ||
            !read_str(r, &g->strs[g->n_strs], "a string array element"))
            return false;
        g->n_strs++;
    }
    return true;
}

static bool read_kv(reader *r, gguf_kv *kv)
{
    uint64_t type;
    if (!read_str(r, &kv->key, "a metadata key") || !read_uint(r, 4, &type, "a value type"))
        return false;
    if (type >= PT_GGUF_TYPE_COUNT) {
        pti_error(PT_ERR_FORMAT, "%s: gguf: key '%s' has unknown value type %llu", r->file,
                  str_of(r->g, kv->key), (unsigned long long)type);
        return false;
    }
    kv->type = (pt_gguf_type)type;
    kv->arr_type = PT_GGUF_TYPE_COUNT;
    kv->pos = r->pos;
    if (type == PT_GGUF_STRING)
        return read_str(r, &kv->str, "a string value");
    if (type == PT_GGUF_ARRAY)
        return read_array(r, kv);
    if (!need(r, value_size[type], "a metadata value"))
        return false;
    r->pos += value_size[type];
    return true;
}

static bool read_tensor_info(reader *r, gguf_tensor *t, uint32_t alignment)
{
    uint64_t ndim, v;
    if (!read_str(r, &t->name, "a tensor name") || !read_uint(r, 4, &ndim, "a tensor's n_dims"))
        return false;
    const char *name = str_of(r->g, t->name);
    if (ndim < 1 || ndim > GGUF_MAX_DIMS) {
        pti_error(PT_ERR_FORMAT, "%s: gguf: tensor '%s' has %llu dims (expected 1 to 4)", r->file,
                  name, (unsigned long long)ndim);
        return false;
    }
    t->ndim = (int)ndim;
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (!read_uint(r, 8, &v, "a tensor's dims"))
            return false;
        if (v == 0 || v > (UINT64_C(1) << 62) || __builtin_mul_overflow(numel, v, &numel) ||
            numel > (UINT64_C(1) << 62)) {
            pti_error(PT_ERR_FORMAT, "%s: gguf: tensor '%s' has dim %d = %llu (%s)", r->file, name,
                      i, (unsigned long long)v, v == 0 ? "must be positive" : "too large");
            return false;
        }
        t->ne[i] = (int64_t)v;
        t->shape[t->ndim - 1 - i] = (int64_t)v;
    }
    t->numel = (int64_t)numel;
    if (!read_uint(r, 4, &v, "a tensor's type"))
        return false;
    const ggml_type_info *ti = ggml_type((uint32_t)v);
    if (v > UINT32_MAX || !ti) {
        /* Unsupported, not a format error: ggml keeps adding types (a file written by a newer
         * llama.cpp is well-formed), and the known types we cannot compute with are
         * PT_ERR_UNSUPPORTED too. Without a block size the rest of the file cannot be laid out,
         * so the whole file is refused here. */
        pti_error(PT_ERR_UNSUPPORTED,
                  "%s: gguf: tensor '%s' has unknown ggml type %llu (not one this reader knows: "
                  "a newer or retired type)",
                  r->file, name, (unsigned long long)v);
        return false;
    }
    t->ggml_type = (uint32_t)v;
    if (t->ne[0] % ti->blck != 0) {
        pti_error(PT_ERR_FORMAT,
                  "%s: gguf: tensor '%s' of type %s has ne[0] = %lld, not a multiple of its "
                  "block size %lld",
                  r->file, name, ti->name, (long long)t->ne[0], (long long)ti->blck);
        return false;
    }
    /* numel / blck blocks of ti->size bytes; numel <= 2^62 so only the product can overflow */
    if (__builtin_mul_overflow(numel / (uint64_t)ti->blck, ti->size, &t->nbytes)) {
        pti_error(PT_ERR_FORMAT, "%s: gguf: tensor '%s' is too large", r->file, name);
        return false;
    }
    if (!read_uint(r, 8, &t->offset, "a tensor's offset"))
        return false;
    if (t->offset % alignment != 0) {
        pti_error(PT_ERR_FORMAT,
                  "%s: gguf: tensor '%s' has offset %llu, not a multiple of the alignment %u",
                  r->file, name, (unsigned long long)t->offset, alignment);
        return false;
    }
    return true;
}

/* ---- checks over the parsed tables -------------------------------------------------------------
 */

static _Thread_local const pt_gguf *sort_g;

static int cmp_gstr(const pt_gguf *g, gguf_str a, gguf_str b)
{
    uint64_t n = a.len < b.len ? a.len : b.len;
    int c = memcmp(str_of(g, a), str_of(g, b), (size_t)n);
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

static int cmp_kv_keys(const void *a, const void *b)
{
    return cmp_gstr(sort_g, sort_g->kv[*(const int64_t *)a].key,
                    sort_g->kv[*(const int64_t *)b].key);
}

static int cmp_tensor_names(const void *a, const void *b)
{
    return cmp_gstr(sort_g, sort_g->tensors[*(const int64_t *)a].name,
                    sort_g->tensors[*(const int64_t *)b].name);
}

static int cmp_tensor_offsets(const void *a, const void *b)
{
    const gguf_tensor *x = &sort_g->tensors[*(const int64_t *)a];
    const gguf_tensor *y = &sort_g->tensors[*(const int64_t *)b];
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Sorts 0..n-1 by `cmp` (indices into g's tables); NULL with PT_ERR_OOM. */
static int64_t *sorted_indices(const pt_gguf *g, int64_t n, int (*cmp)(const void *, const void *))
{
    int64_t *idx = pti_malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!idx)
        return pti_error_null(PT_ERR_OOM, "%s: gguf: out of memory", pti_file_map_name(g->map));
    for (int64_t i = 0; i < n; i++)
        idx[i] = i;
    sort_g = g;
    qsort(idx, (size_t)n, sizeof *idx, cmp);
    return idx;
}

static bool check_unique(const pt_gguf *g)
{
    const char *file = pti_file_map_name(g->map);
    int64_t *idx = sorted_indices(g, g->n_kv, cmp_kv_keys);
    if (!idx)
        return false;
    for (int64_t i = 1; i < g->n_kv; i++)
        if (cmp_gstr(g, g->kv[idx[i - 1]].key, g->kv[idx[i]].key) == 0) {
            pti_error(PT_ERR_FORMAT, "%s: gguf: duplicate key '%s'", file,
                      str_of(g, g->kv[idx[i]].key));
            free(idx);
            return false;
        }
    free(idx);
    idx = sorted_indices(g, g->n_tensors, cmp_tensor_names);
    if (!idx)
        return false;
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (cmp_gstr(g, g->tensors[idx[i - 1]].name, g->tensors[idx[i]].name) == 0) {
            pti_error(PT_ERR_FORMAT, "%s: gguf: duplicate tensor name '%s'", file,
                      str_of(g, g->tensors[idx[i]].name));
            free(idx);
            return false;
        }
    free(idx);
    return true;
}

/* general.alignment: a u32 power of two when present. */
static bool read_alignment(pt_gguf *g)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = pt_gguf_find_key(g, "general.alignment");
    if (i < 0)
        return true;
    const char *file = pti_file_map_name(g->map);
    if (g->kv[i].type != PT_GGUF_UINT32) {
        pti_error(PT_ERR_FORMAT, "%s: gguf: general.alignment has type %s (expected u32)", file,
                  pt_gguf_type_name(g->kv[i].type));
        return false;
    }
    uint32_t a = (uint32_t)load_le(pti_file_map_data(g->map) + g->kv[i].pos, 4);
    if (a == 0 || (a & (a - 1)) != 0) {
        pti_error(PT_ERR_FORMAT, "%s: gguf: general.alignment %u is not a power of two", file, a);
        return false;
    }
    g->alignment = a;
    return true;
}

/* Every tensor's bytes inside the data section, no two overlapping. */
static bool check_tensor_data(pt_gguf *g)
{
    const char *file = pti_file_map_name(g->map);
    uint64_t size = pti_file_map_size(g->map);
    if (g->n_tensors > 0 && g->data_offset > size) {
        pti_error(PT_ERR_FORMAT,
                  "%s: gguf: the data section would start at %llu, past the end of the file "
                  "(%llu bytes)",
                  file, (unsigned long long)g->data_offset, (unsigned long long)size);
        return false;
    }
    uint64_t avail = g->data_offset <= size ? size - g->data_offset : 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (t->offset > avail || t->nbytes > avail - t->offset) {
            pti_error(PT_ERR_FORMAT,
                      "%s: gguf: tensor '%s' (offset %llu, %llu bytes) runs past the end of the "
                      "data section (%llu bytes)",
                      file, str_of(g, t->name), (unsigned long long)t->offset,
                      (unsigned long long)t->nbytes, (unsigned long long)avail);
            return false;
        }
    }
    int64_t *idx = sorted_indices(g, g->n_tensors, cmp_tensor_offsets);
    if (!idx)
        return false;
    bool ok = true;
    for (int64_t k = 1; k < g->n_tensors && ok; k++) {
        const gguf_tensor *a = &g->tensors[idx[k - 1]], *b = &g->tensors[idx[k]];
        if (b->offset < a->offset + a->nbytes) {
            pti_error(PT_ERR_FORMAT,
                      "%s: gguf: tensor '%s' (offset %llu) overlaps '%s' (offset %llu, %llu "
                      "bytes)",
                      file, str_of(g, b->name), (unsigned long long)b->offset, str_of(g, a->name),
                      (unsigned long long)a->offset, (unsigned long long)a->nbytes);
            ok = false;
        }
    }
    free(idx);
    return ok;
}

static bool parse(pt_gguf *g)
{
    reader r = {pti_file_map_data(g->map), pti_file_map_size(g->map), 0, pti_file_map_name(g->map),
                g};
    uint64_t magic, version, n_tensors, n_kv;
    if (r.size < 4 || memcmp(r.p, "GGUF", 4) != 0) {
        pti_error(PT_ERR_FORMAT, "%s: gguf: not a GGUF file (no \"GGUF\" magic)", r.file);
        return false;
    }
    if (!read_uint(&r, 4, &magic, "the header") || !read_uint(&r, 4, &version, "the header"))
        return false;
    if (version == 1 || ((version & 0xFFFF) == 0 && version != 0)) {
        pti_error(PT_ERR_FORMAT, "%s: gguf: version %llu is not supported (%s)", r.file,
                  (unsigned long long)version,
                  version == 1 ? "GGUF v1 used 32-bit counts; convert the file to v3"
                               : "a big-endian file?");
        return false;
    }
    if (version != 2 && version != 3) {
        pti_error(PT_ERR_FORMAT, "%s: gguf: unknown version %llu (expected 2 or 3)", r.file,
                  (unsigned long long)version);
        return false;
    }
    g->version = (uint32_t)version;
    if (!read_uint(&r, 8, &n_tensors, "the header") || !read_uint(&r, 8, &n_kv, "the header"))
        return false;
    uint64_t left = r.size - r.pos;
    if (n_kv > left / GGUF_MIN_KV_BYTES ||
        n_tensors > (left - n_kv * GGUF_MIN_KV_BYTES) / GGUF_MIN_TENSOR_BYTES) {
        pti_error(PT_ERR_FORMAT,
                  "%s: gguf: %llu metadata entries and %llu tensors cannot fit in the %llu bytes "
                  "left",
                  r.file, (unsigned long long)n_kv, (unsigned long long)n_tensors,
                  (unsigned long long)left);
        return false;
    }
    /* the tables grow as entries are read, so memory follows what the file really holds */
    uint64_t kv_cap = 0, tensors_cap = 0;
    for (g->n_kv = 0; g->n_kv < (int64_t)n_kv; g->n_kv++) {
        if (!grow((void **)&g->kv, &kv_cap, (uint64_t)g->n_kv + 1, sizeof *g->kv, r.file))
            return false;
        memset(&g->kv[g->n_kv], 0, sizeof *g->kv);
        if (!read_kv(&r, &g->kv[g->n_kv]))
            return false;
    }
    if (!read_alignment(g))
        return false;
    for (g->n_tensors = 0; g->n_tensors < (int64_t)n_tensors; g->n_tensors++) {
        if (!grow((void **)&g->tensors, &tensors_cap, (uint64_t)g->n_tensors + 1,
                  sizeof *g->tensors, r.file))
            return false;
        memset(&g->tensors[g->n_tensors], 0, sizeof *g->tensors);
        if (!read_tensor_info(&r, &g->tensors[g->n_tensors], g->alignment))
            return false;
    }
    uint64_t pad = (g->alignment - r.pos % g->alignment) % g->alignment;
    g->data_offset = r.pos + pad;
    return check_unique(g) && check_tensor_data(g);
}

static pt_gguf *open_map(pti_file_map *m)
{
    if (!m)
        return NULL;
    pt_gguf *g = pti_calloc(1, sizeof *g);
    if (!g) {
        pti_error(PT_ERR_OOM, "%s: gguf: out of memory", pti_file_map_name(m));
        pti_file_map_release(m); /* after the message: it owns the name */
        return NULL;
    }
    g->map = m;
    if (!parse(g)) {
        pt_gguf_close(g);
        return NULL;
    }
    return g;
}

/* ---- public API ------------------------------------------------------------------------------ */

pt_gguf *pt_gguf_open(const char *path)
{
    if (!path)
        return pti_error_null(PT_ERR_NULL, "pt_gguf_open: path is NULL");
    return open_map(pti_file_map_open(path));
}

pt_gguf *pt_gguf_open_buffer(const void *data, size_t len, const char *name)
{
    return open_map(pti_file_map_borrow(data, len, name));
}

void pt_gguf_close(pt_gguf *g)
{
    if (!g)
        return;
    pti_file_map_release(g->map);
    free(g->kv);
    free(g->tensors);
    free(g->arena);
    free(g->strs);
    free(g);
}

const char *pt_gguf_type_name(pt_gguf_type t)
{
    static const char *const names[PT_GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "array", "u64", "i64", "f64"};
    return (unsigned)t < PT_GGUF_TYPE_COUNT ? names[t] : "?";
}

const char *pt_gguf_ggml_type_name(int ggml_type_id)
{
    const ggml_type_info *ti = ggml_type_id >= 0 ? ggml_type((uint32_t)ggml_type_id) : NULL;
    return ti ? ti->name : "unknown";
}

uint32_t pt_gguf_version(const pt_gguf *g)
{
    return g ? g->version : 0;
}
uint32_t pt_gguf_alignment(const pt_gguf *g)
{
    return g ? g->alignment : 0;
}
uint64_t pt_gguf_data_offset(const pt_gguf *g)
{
    return g ? g->data_offset : 0;
}
const char *pt_gguf_name(const pt_gguf *g)
{
    return g ? pti_file_map_name(g->map) : NULL;
}
int64_t pt_gguf_kv_count(const pt_gguf *g)
{
    return g ? g->n_kv : 0;
}
int64_t pt_gguf_tensor_count(const pt_gguf *g)
{
    return g ? g->n_tensors : 0;
}

/* KV i, or NULL with PT_ERR_INDEX / PT_ERR_NULL. */
static const gguf_kv *kv_at(const pt_gguf *g, int64_t i, const char *fn)
{
    if (!g)
        return pti_error_null(PT_ERR_NULL, "%s: handle is NULL", fn);
    if (i < 0 || i >= g->n_kv)
        return pti_error_null(PT_ERR_INDEX, "%s: %s: key index %lld out of range [0, %lld)", fn,
                              pti_file_map_name(g->map), (long long)i, (long long)g->n_kv);
    return &g->kv[i];
}

static const gguf_tensor *tensor_at(const pt_gguf *g, int64_t t, const char *fn)
{
    if (!g)
        return pti_error_null(PT_ERR_NULL, "%s: handle is NULL", fn);
    if (t < 0 || t >= g->n_tensors)
        return pti_error_null(PT_ERR_INDEX, "%s: %s: tensor index %lld out of range [0, %lld)", fn,
                              pti_file_map_name(g->map), (long long)t, (long long)g->n_tensors);
    return &g->tensors[t];
}

int64_t pt_gguf_find_key(const pt_gguf *g, const char *key)
{
    if (!g || !key)
        return -1;
    size_t n = strlen(key);
    for (int64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key.len == n && memcmp(str_of(g, g->kv[i].key), key, n) == 0)
            return i;
    return -1;
}

const char *pt_gguf_kv_key(const pt_gguf *g, int64_t i, size_t *len)
{
    const gguf_kv *kv = kv_at(g, i, "pt_gguf_kv_key");
    if (!kv)
        return NULL;
    if (len)
        *len = (size_t)kv->key.len;
    return str_of(g, kv->key);
}

pt_gguf_type pt_gguf_kv_type(const pt_gguf *g, int64_t i)
{
    const gguf_kv *kv = kv_at(g, i, "pt_gguf_kv_type");
    return kv ? kv->type : PT_GGUF_TYPE_COUNT;
}

/* The raw little-endian bits of scalar KV i when it has type `want`. */
static pt_status get_scalar(const pt_gguf *g, int64_t i, pt_gguf_type want, const char *fn,
                            uint64_t *bits)
{
    const gguf_kv *kv = kv_at(g, i, fn);
    if (!kv)
        return pt_last_status();
    if (kv->type != want)
        return pti_error(PT_ERR_DTYPE, "%s: %s: key '%s' has type %s, not %s", fn,
                         pti_file_map_name(g->map), str_of(g, kv->key), pt_gguf_type_name(kv->type),
                         pt_gguf_type_name(want));
    *bits = load_le(pti_file_map_data(g->map) + kv->pos, value_size[want]);
    return PT_OK;
}

pt_status pt_gguf_get_u8(const pt_gguf *g, int64_t i, uint8_t *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_UINT8, "pt_gguf_get_u8", &b);
    if (st == PT_OK)
        *out = (uint8_t)b;
    return st;
}

pt_status pt_gguf_get_i8(const pt_gguf *g, int64_t i, int8_t *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_INT8, "pt_gguf_get_i8", &b);
    if (st == PT_OK)
        *out = (int8_t)(uint8_t)b;
    return st;
}

pt_status pt_gguf_get_u16(const pt_gguf *g, int64_t i, uint16_t *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_UINT16, "pt_gguf_get_u16", &b);
    if (st == PT_OK)
        *out = (uint16_t)b;
    return st;
}

pt_status pt_gguf_get_i16(const pt_gguf *g, int64_t i, int16_t *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_INT16, "pt_gguf_get_i16", &b);
    if (st == PT_OK)
        *out = (int16_t)(uint16_t)b;
    return st;
}

pt_status pt_gguf_get_u32(const pt_gguf *g, int64_t i, uint32_t *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_UINT32, "pt_gguf_get_u32", &b);
    if (st == PT_OK)
        *out = (uint32_t)b;
    return st;
}

pt_status pt_gguf_get_i32(const pt_gguf *g, int64_t i, int32_t *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_INT32, "pt_gguf_get_i32", &b);
    if (st == PT_OK)
        *out = (int32_t)(uint32_t)b;
    return st;
}

pt_status pt_gguf_get_u64(const pt_gguf *g, int64_t i, uint64_t *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_UINT64, "pt_gguf_get_u64", &b);
    if (st == PT_OK)
        *out = b;
    return st;
}

pt_status pt_gguf_get_i64(const pt_gguf *g, int64_t i, int64_t *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_INT64, "pt_gguf_get_i64", &b);
    if (st == PT_OK)
        *out = (int64_t)b;
    return st;
}

pt_status pt_gguf_get_f32(const pt_gguf *g, int64_t i, float *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_FLOAT32, "pt_gguf_get_f32", &b);
    if (st == PT_OK) {
        uint32_t u = (uint32_t)b;
        memcpy(out, &u, 4);
    }
    return st;
}

pt_status pt_gguf_get_f64(const pt_gguf *g, int64_t i, double *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_FLOAT64, "pt_gguf_get_f64", &b);
    if (st == PT_OK)
        memcpy(out, &b, 8);
    return st;
}

pt_status pt_gguf_get_bool(const pt_gguf *g, int64_t i, bool *out)
{
    uint64_t b = 0;
    pt_status st = get_scalar(g, i, PT_GGUF_BOOL, "pt_gguf_get_bool", &b);
    if (st == PT_OK)
        *out = b != 0;
    return st;
}

const char *pt_gguf_get_str(const pt_gguf *g, int64_t i, size_t *len)
{
    const gguf_kv *kv = kv_at(g, i, "pt_gguf_get_str");
    if (!kv)
        return NULL;
    if (kv->type != PT_GGUF_STRING)
        return pti_error_null(PT_ERR_DTYPE, "pt_gguf_get_str: %s: key '%s' has type %s, not str",
                              pti_file_map_name(g->map), str_of(g, kv->key),
                              pt_gguf_type_name(kv->type));
    if (len)
        *len = (size_t)kv->str.len;
    return str_of(g, kv->str);
}

/* Decodes one encoded number of type t at p as int64 (integers and bool) or double. */
static pt_status decode_int(pt_gguf_type t, const uint8_t *p, int64_t *out, const char *fn,
                            const char *file, const char *key)
{
    uint64_t b = value_size[t] ? load_le(p, value_size[t]) : 0;
    switch (t) {
    case PT_GGUF_UINT8:
    case PT_GGUF_UINT16:
    case PT_GGUF_UINT32:
    case PT_GGUF_BOOL: *out = (int64_t)b; return PT_OK;
    case PT_GGUF_INT8: *out = (int8_t)(uint8_t)b; return PT_OK;
    case PT_GGUF_INT16: *out = (int16_t)(uint16_t)b; return PT_OK;
    case PT_GGUF_INT32: *out = (int32_t)(uint32_t)b; return PT_OK;
    case PT_GGUF_INT64: *out = (int64_t)b; return PT_OK;
    case PT_GGUF_UINT64:
        if (b > (uint64_t)INT64_MAX)
            return pti_error(PT_ERR_FORMAT, "%s: %s: value of '%s' (%llu) does not fit in int64",
                             fn, file, key, (unsigned long long)b);
        *out = (int64_t)b;
        return PT_OK;
    default:
        return pti_error(PT_ERR_DTYPE, "%s: %s: '%s' holds %s, not an integer", fn, file, key,
                         pt_gguf_type_name(t));
    }
}

static pt_status decode_float(pt_gguf_type t, const uint8_t *p, double *out, const char *fn,
                              const char *file, const char *key)
{
    if (t == PT_GGUF_FLOAT32) {
        uint32_t u = (uint32_t)load_le(p, 4);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
        return PT_OK;
    }
    if (t == PT_GGUF_FLOAT64) {
        uint64_t u = load_le(p, 8);
        memcpy(out, &u, 8);
        return PT_OK;
    }
    if (t == PT_GGUF_UINT64) { /* exact conversion where it can be, no range error */
        *out = (double)load_le(p, 8);
        return PT_OK;
    }
    int64_t v;
    if (t == PT_GGUF_BOOL || decode_int(t, p, &v, fn, file, key) != PT_OK)
        return pti_error(PT_ERR_DTYPE, "%s: %s: '%s' holds %s, not a number", fn, file, key,
                         pt_gguf_type_name(t));
    *out = (double)v;
    return PT_OK;
}

pt_status pt_gguf_get_int(const pt_gguf *g, int64_t i, int64_t *out)
{
    const gguf_kv *kv = kv_at(g, i, "pt_gguf_get_int");
    if (!kv)
        return pt_last_status();
    return decode_int(kv->type, pti_file_map_data(g->map) + kv->pos, out, "pt_gguf_get_int",
                      pti_file_map_name(g->map), str_of(g, kv->key));
}

pt_status pt_gguf_get_float(const pt_gguf *g, int64_t i, double *out)
{
    const gguf_kv *kv = kv_at(g, i, "pt_gguf_get_float");
    if (!kv)
        return pt_last_status();
    return decode_float(kv->type, pti_file_map_data(g->map) + kv->pos, out, "pt_gguf_get_float",
                        pti_file_map_name(g->map), str_of(g, kv->key));
}

/* KV i when it is an array, else NULL with PT_ERR_DTYPE. */
static const gguf_kv *array_at(const pt_gguf *g, int64_t i, const char *fn)
{
    const gguf_kv *kv = kv_at(g, i, fn);
    if (kv && kv->type != PT_GGUF_ARRAY)
        return pti_error_null(PT_ERR_DTYPE, "%s: %s: key '%s' has type %s, not array", fn,
                              pti_file_map_name(g->map), str_of(g, kv->key),
                              pt_gguf_type_name(kv->type));
    return kv;
}

/* Element j of array KV i, or NULL with PT_ERR_INDEX. */
static const gguf_kv *array_elem(const pt_gguf *g, int64_t i, int64_t j, const char *fn)
{
    const gguf_kv *kv = array_at(g, i, fn);
    if (kv && (j < 0 || (uint64_t)j >= kv->count))
        return pti_error_null(PT_ERR_INDEX,
                              "%s: %s: index %lld out of range for array '%s' of %llu", fn,
                              pti_file_map_name(g->map), (long long)j, str_of(g, kv->key),
                              (unsigned long long)kv->count);
    return kv;
}

int64_t pt_gguf_arr_count(const pt_gguf *g, int64_t i)
{
    const gguf_kv *kv = array_at(g, i, "pt_gguf_arr_count");
    return kv ? (int64_t)kv->count : -1;
}

pt_gguf_type pt_gguf_arr_type(const pt_gguf *g, int64_t i)
{
    const gguf_kv *kv = array_at(g, i, "pt_gguf_arr_type");
    return kv ? kv->arr_type : PT_GGUF_TYPE_COUNT;
}

const void *pt_gguf_arr_data(const pt_gguf *g, int64_t i)
{
    const gguf_kv *kv = array_at(g, i, "pt_gguf_arr_data");
    if (!kv)
        return NULL;
    if (kv->arr_type == PT_GGUF_STRING)
        return pti_error_null(PT_ERR_DTYPE, "pt_gguf_arr_data: %s: '%s' is an array of strings",
                              pti_file_map_name(g->map), str_of(g, kv->key));
    return pti_file_map_data(g->map) + kv->pos;
}

pt_status pt_gguf_arr_int(const pt_gguf *g, int64_t i, int64_t j, int64_t *out)
{
    const gguf_kv *kv = array_elem(g, i, j, "pt_gguf_arr_int");
    if (!kv)
        return pt_last_status();
    const uint8_t *p = pti_file_map_data(g->map) + kv->pos + (uint64_t)j * value_size[kv->arr_type];
    return decode_int(kv->arr_type, p, out, "pt_gguf_arr_int", pti_file_map_name(g->map),
                      str_of(g, kv->key));
}

pt_status pt_gguf_arr_float(const pt_gguf *g, int64_t i, int64_t j, double *out)
{
    const gguf_kv *kv = array_elem(g, i, j, "pt_gguf_arr_float");
    if (!kv)
        return pt_last_status();
    const uint8_t *p = pti_file_map_data(g->map) + kv->pos + (uint64_t)j * value_size[kv->arr_type];
    return decode_float(kv->arr_type, p, out, "pt_gguf_arr_float", pti_file_map_name(g->map),
                        str_of(g, kv->key));
}

const char *pt_gguf_arr_str(const pt_gguf *g, int64_t i, int64_t j, size_t *len)
{
    const gguf_kv *kv = array_elem(g, i, j, "pt_gguf_arr_str");
    if (!kv)
        return NULL;
    if (kv->arr_type != PT_GGUF_STRING)
        return pti_error_null(PT_ERR_DTYPE, "pt_gguf_arr_str: %s: '%s' is an array of %s",
                              pti_file_map_name(g->map), str_of(g, kv->key),
                              pt_gguf_type_name(kv->arr_type));
    gguf_str s = g->strs[kv->strs + (uint64_t)j];
    if (len)
        *len = (size_t)s.len;
    return str_of(g, s);
}

int64_t pt_gguf_find_tensor(const pt_gguf *g, const char *name)
{
    if (!g || !name)
        return -1;
    size_t n = strlen(name);
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].name.len == n && memcmp(str_of(g, g->tensors[i].name), name, n) == 0)
            return i;
    return -1;
}

const char *pt_gguf_tensor_name(const pt_gguf *g, int64_t t, size_t *len)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor_name");
    if (!ti)
        return NULL;
    if (len)
        *len = (size_t)ti->name.len;
    return str_of(g, ti->name);
}

int pt_gguf_tensor_ggml_type(const pt_gguf *g, int64_t t)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor_ggml_type");
    return ti ? (int)ti->ggml_type : -1;
}

pt_dtype pt_gguf_tensor_dtype(const pt_gguf *g, int64_t t)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor_dtype");
    return ti ? ggml_types[ti->ggml_type].dtype : PT_DTYPE_COUNT;
}

int pt_gguf_tensor_ndim(const pt_gguf *g, int64_t t)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor_ndim");
    return ti ? ti->ndim : -1;
}

const int64_t *pt_gguf_tensor_ne(const pt_gguf *g, int64_t t)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor_ne");
    return ti ? ti->ne : NULL;
}

const int64_t *pt_gguf_tensor_shape(const pt_gguf *g, int64_t t)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor_shape");
    return ti ? ti->shape : NULL;
}

int64_t pt_gguf_tensor_numel(const pt_gguf *g, int64_t t)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor_numel");
    return ti ? ti->numel : -1;
}

uint64_t pt_gguf_tensor_nbytes(const pt_gguf *g, int64_t t)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor_nbytes");
    return ti ? ti->nbytes : 0;
}

uint64_t pt_gguf_tensor_offset(const pt_gguf *g, int64_t t)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor_offset");
    return ti ? ti->offset : 0;
}

const void *pt_gguf_tensor_data(const pt_gguf *g, int64_t t)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor_data");
    return ti ? pti_file_map_data(g->map) + g->data_offset + ti->offset : NULL;
}

pt_tensor *pt_gguf_tensor(pt_gguf *g, int64_t t)
{
    const gguf_tensor *ti = tensor_at(g, t, "pt_gguf_tensor");
    if (!ti)
        return NULL;
    const ggml_type_info *info = &ggml_types[ti->ggml_type];
    if (info->dtype == NO_DTYPE)
        return pti_error_null(PT_ERR_DTYPE,
                              "pt_gguf_tensor: %s: tensor '%s' has ggml type %s, which PromeTorch "
                              "has no dtype for",
                              pti_file_map_name(g->map), str_of(g, ti->name), info->name);
    /* blocks start with an f16 scale (Q8_K: an f32); plain types need their own size */
    size_t align = info->blck == 1 ? (size_t)info->size : ti->ggml_type == 15 ? 4 : 2;
    pt_storage *s = pti_file_map_storage(g->map, g->data_offset + ti->offset, ti->nbytes, align,
                                         !pti_file_map_is_owned(g->map));
    if (!s)
        return NULL;
    int64_t stride[GGUF_MAX_DIMS];
    pti_contiguous_strides(ti->ndim, ti->shape, stride);
    pt_tensor *out = pti_tensor_on_storage(s, info->dtype, ti->ndim, ti->shape, stride, 0);
    pti_storage_release(s);
    return out;
}
