/* The safetensors reader (io.h: pt_load_safetensors; safetensors_read.h for pt_load's entry).
 *
 * Layout: u64 little-endian N, N bytes of UTF-8 JSON {"name": {"dtype", "shape",
 * "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}, then the data section, to
 * which the offsets are relative. The file comes from a stranger, so everything is checked
 * before use, as the reference (Rust) reader does: the header length against the file size
 * and a 100 MB cap, the JSON (parsed by cJSON; only whitespace may follow it), each entry's
 * fields, element and byte counts (overflow-checked), and the offsets: sorted by offset, the
 * tensors must tile the data section exactly (no overlap, no gap, nothing after the last),
 * which is what safetensors' Metadata::validate plus its "file not fully covered" check
 * enforce. We are stricter than the reference in two places: a key repeated in the header
 * and an unknown field in an entry are refused (the Rust reader silently takes the last
 * duplicate and ignores unknown fields).
 *
 * Order: the result dict is in data-offset order (header order for ties between empty
 * tensors), which is also what safetensors.torch.load_file returns (safetensors 0.8 iterates
 * safe_open's offset_keys(); safe_open.keys() is sorted by name instead). */
#include "safetensors_read.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "../core/utf8.h"
#include "prometorch/io.h"

/* The reference reader's MAX_HEADER_SIZE. */
#define ST_MAX_HEADER 100000000ull
/* JSON numbers are doubles in cJSON: integers above 2^53 cannot be told apart, so refuse them
 * (9 PB, far above any real offset). */
#define ST_MAX_INT 9007199254740992.0

typedef struct st_entry {
    const char *name; /* borrowed from the cJSON tree */
    pt_dtype dtype;
    int ndim;
    int64_t shape[PT_MAX_DIMS];
    uint64_t begin, end;
    size_t order; /* position in the header, for a stable sort */
} st_entry;

static uint64_t read_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* 0: a dtype we have; 1: a safetensors dtype PromeTorch has no equivalent for; -1: not a
 * safetensors dtype at all. */
static int parse_dtype(const char *s, pt_dtype *out)
{
    static const struct {
        const char *name;
        pt_dtype dt;
    } known[] = {
        {"F64", PT_FLOAT64}, {"F32", PT_FLOAT32}, {"F16", PT_FLOAT16}, {"BF16", PT_BFLOAT16},
        {"I64", PT_INT64},   {"I32", PT_INT32},   {"I16", PT_INT16},   {"I8", PT_INT8},
        {"U8", PT_UINT8},    {"BOOL", PT_BOOL},
    };
    static const char *const unsupported[] = {
        "U16", "U32", "U64", "C64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(s, known[i].name) == 0) {
            *out = known[i].dt;
            return 0;
        }
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (strcmp(s, unsupported[i]) == 0)
            return 1;
    return -1;
}

/* A JSON number that is a non-negative integer no larger than 2^53. */
static bool json_uint(const cJSON *n, uint64_t *out)
{
    if (!cJSON_IsNumber(n))
        return false;
    double d = n->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_INT) || d != (double)(uint64_t)d)
        return false;
    *out = (uint64_t)d;
    return true;
}

static pt_status parse_shape(const char *file, const char *name, const cJSON *shape, st_entry *e)
{
    if (!cJSON_IsArray(shape))
        return pti_error(PT_ERR_FORMAT, "%s: safetensors: tensor '%s': \"shape\" is not a list",
                         file, name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > PT_MAX_DIMS)
        return pti_error(PT_ERR_UNSUPPORTED,
                         "%s: safetensors: tensor '%s' has %d dimensions, more than %d", file, name,
                         ndim, PT_MAX_DIMS);
    e->ndim = 0;
    uint64_t nonzero = 1; /* product of the non-zero dims: bounds the strides of empty tensors */
    const cJSON *d;
    cJSON_ArrayForEach(d, shape)
    {
        uint64_t v;
        if (!json_uint(d, &v))
            return pti_error(PT_ERR_FORMAT,
                             "%s: safetensors: tensor '%s': shape entry %d is not a "
                             "non-negative integer",
                             file, name, e->ndim);
        if (v > 0 && __builtin_mul_overflow(nonzero, v, &nonzero))
            nonzero = UINT64_MAX;
        if (nonzero > (UINT64_C(1) << 62))
            return pti_error(PT_ERR_FORMAT,
                             "%s: safetensors: tensor '%s': shape has too many elements "
                             "(overflows)",
                             file, name);
        e->shape[e->ndim++] = (int64_t)v;
    }
    return PT_OK;
}

/* One tensor entry {"dtype", "shape", "data_offsets"}, checked against the data size. */
static pt_status parse_entry(const char *file, const cJSON *obj, uint64_t data_size, st_entry *e)
{
    const char *name = obj->string;
    if (!cJSON_IsObject(obj))
        return pti_error(PT_ERR_FORMAT, "%s: safetensors: entry '%s' is not an object", file, name);
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL, *f;
    cJSON_ArrayForEach(f, obj)
    {
        const cJSON **slot = strcmp(f->string, "dtype") == 0          ? &dtype
                             : strcmp(f->string, "shape") == 0        ? &shape
                             : strcmp(f->string, "data_offsets") == 0 ? &offsets
                                                                      : NULL;
        if (!slot)
            return pti_error(PT_ERR_FORMAT,
                             "%s: safetensors: tensor '%s' has an unknown field '%s'", file, name,
                             f->string);
        if (*slot)
            return pti_error(PT_ERR_FORMAT, "%s: safetensors: tensor '%s' repeats field '%s'", file,
                             name, f->string);
        *slot = f;
    }
    if (!dtype || !shape || !offsets)
        return pti_error(PT_ERR_FORMAT, "%s: safetensors: tensor '%s' lacks \"%s\"", file, name,
                         !dtype   ? "dtype"
                         : !shape ? "shape"
                                  : "data_offsets");
    if (!cJSON_IsString(dtype))
        return pti_error(PT_ERR_FORMAT, "%s: safetensors: tensor '%s': \"dtype\" is not a string",
                         file, name);
    int kind = parse_dtype(dtype->valuestring, &e->dtype);
    if (kind == 1)
        return pti_error(PT_ERR_DTYPE,
                         "%s: safetensors: tensor '%s' has dtype %s, which PromeTorch does not "
                         "support",
                         file, name, dtype->valuestring);
    if (kind < 0)
        return pti_error(PT_ERR_FORMAT, "%s: safetensors: tensor '%s' has an unknown dtype '%.40s'",
                         file, name, dtype->valuestring);
    pt_status st = parse_shape(file, name, shape, e);
    if (st != PT_OK)
        return st;
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        !json_uint(offsets->child, &e->begin) || !json_uint(offsets->child->next, &e->end))
        return pti_error(PT_ERR_FORMAT,
                         "%s: safetensors: tensor '%s': \"data_offsets\" is not a list of two "
                         "non-negative integers",
                         file, name);
    if (e->begin > e->end)
        return pti_error(PT_ERR_FORMAT,
                         "%s: safetensors: tensor '%s': data_offsets [%llu, %llu] end before they "
                         "begin",
                         file, name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > data_size)
        return pti_error(PT_ERR_FORMAT,
                         "%s: safetensors: tensor '%s': data_offsets [%llu, %llu] run past the end "
                         "of the data section (%llu bytes)",
                         file, name, (unsigned long long)e->begin, (unsigned long long)e->end,
                         (unsigned long long)data_size);
    uint64_t numel = 1, nbytes;
    for (int i = 0; i < e->ndim; i++)
        numel *= (uint64_t)e->shape[i]; /* cannot overflow: checked in parse_shape */
    if (__builtin_mul_overflow(numel, (uint64_t)pt_dtype_size(e->dtype), &nbytes) ||
        nbytes != e->end - e->begin)
        return pti_error(PT_ERR_FORMAT,
                         "%s: safetensors: tensor '%s': shape %s of %s needs %llu x %zu bytes, but "
                         "data_offsets [%llu, %llu] hold %llu",
                         file, name, pti_shape_str(e->ndim, e->shape), dtype->valuestring,
                         (unsigned long long)numel, pt_dtype_size(e->dtype),
                         (unsigned long long)e->begin, (unsigned long long)e->end,
                         (unsigned long long)(e->end - e->begin));
    e->name = name;
    return PT_OK;
}

/* "__metadata__": an object of str -> str (null is taken as empty, as the reference does). */
static pt_value *parse_metadata(const char *file, const cJSON *obj)
{
    pt_value *d = pt_value_dict();
    if (!d || !obj || cJSON_IsNull(obj))
        return d;
    if (!cJSON_IsObject(obj)) {
        pt_value_free(d);
        return pti_error_null(PT_ERR_FORMAT, "%s: safetensors: \"__metadata__\" is not an object",
                              file);
    }
    const cJSON *f;
    cJSON_ArrayForEach(f, obj)
    {
        if (!cJSON_IsString(f)) {
            pt_value_free(d);
            return pti_error_null(PT_ERR_FORMAT,
                                  "%s: safetensors: \"__metadata__\" value of '%s' is not a string",
                                  file, f->string);
        }
        int64_t before = pt_value_len(d);
        if (pt_value_dict_set_str(d, f->string, pt_value_str(f->valuestring)) != PT_OK) {
            pt_value_free(d);
            return NULL;
        }
        if (pt_value_len(d) == before) {
            pt_value_free(d);
            return pti_error_null(PT_ERR_FORMAT,
                                  "%s: safetensors: \"__metadata__\" repeats the key '%s'", file,
                                  f->string);
        }
    }
    return d;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_offsets(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Keys of the header object must be unique (including "__metadata__"). */
static pt_status check_unique_keys(const char *file, const cJSON *root, size_t n)
{
    const char **names = pti_malloc((n ? n : 1) * sizeof *names);
    if (!names)
        return pti_error(PT_ERR_OOM, "%s: safetensors: out of memory", file);
    size_t k = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, root) names[k++] = f->string;
    qsort(names, k, sizeof *names, cmp_names);
    pt_status st = PT_OK;
    for (size_t i = 1; i < k && st == PT_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            st = pti_error(PT_ERR_FORMAT, "%s: safetensors: the header repeats the key '%s'", file,
                           names[i]);
    free(names);
    return st;
}

/* Sorted by offset, the tensors must tile [0, data_size) exactly. */
static pt_status check_tiling(const char *file, const st_entry *e, size_t n, uint64_t data_size)
{
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].begin < pos)
            return pti_error(PT_ERR_FORMAT,
                             "%s: safetensors: tensor '%s' (data_offsets [%llu, %llu]) overlaps "
                             "'%s' ([%llu, %llu])",
                             file, e[i].name, (unsigned long long)e[i].begin,
                             (unsigned long long)e[i].end, e[i - 1].name,
                             (unsigned long long)e[i - 1].begin, (unsigned long long)e[i - 1].end);
        if (e[i].begin > pos)
            return pti_error(PT_ERR_FORMAT,
                             "%s: safetensors: bytes [%llu, %llu) of the data section belong to no "
                             "tensor (next is '%s')",
                             file, (unsigned long long)pos, (unsigned long long)e[i].begin,
                             e[i].name);
        pos = e[i].end;
    }
    if (pos != data_size)
        return pti_error(PT_ERR_FORMAT,
                         "%s: safetensors: the data section has %llu bytes but the tensors cover "
                         "only %llu",
                         file, (unsigned long long)data_size, (unsigned long long)pos);
    return PT_OK;
}

/* The tensors, in offset order, as a dict over (or copied from) the map. */
static pt_value *build_dict(pti_file_map *m, const st_entry *e, size_t n, uint64_t data_start,
                            bool copy)
{
    pt_value *d = pt_value_dict();
    bool force_copy = copy || !pti_file_map_is_owned(m);
    for (size_t i = 0; d && i < n; i++) {
        uint64_t nbytes = e[i].end - e[i].begin;
        pt_storage *s = pti_file_map_storage(m, data_start + e[i].begin, nbytes,
                                             pt_dtype_size(e[i].dtype), force_copy);
        if (!s) {
            pt_value_free(d);
            return NULL;
        }
        int64_t stride[PT_MAX_DIMS];
        pti_contiguous_strides(e[i].ndim, e[i].shape, stride);
        pt_tensor *t = pti_tensor_on_storage(s, e[i].dtype, e[i].ndim, e[i].shape, stride, 0);
        pti_storage_release(s);
        pt_value *v = pt_value_tensor(t);
        pt_release(t);
        if (!v || pt_value_dict_set_str(d, e[i].name, v) != PT_OK) { /* set frees v */
            pt_value_free(d);
            return NULL;
        }
    }
    return d;
}

/* Reads the 8-byte length and checks it; *json / *json_len get the header text. */
static pt_status header_span(const pti_file_map *m, const char **json, uint64_t *json_len)
{
    const char *file = pti_file_map_name(m);
    size_t size = pti_file_map_size(m);
    if (size < 8)
        return pti_error(PT_ERR_FORMAT,
                         "%s: safetensors: the file has %zu bytes, too short for the 8-byte "
                         "header length",
                         file, size);
    const uint8_t *p = pti_file_map_data(m);
    uint64_t n = read_u64le(p);
    if (n > ST_MAX_HEADER)
        return pti_error(PT_ERR_FORMAT,
                         "%s: safetensors: header length %llu exceeds the %llu-byte limit", file,
                         (unsigned long long)n, ST_MAX_HEADER);
    if (n > size - 8)
        return pti_error(PT_ERR_FORMAT,
                         "%s: safetensors: header length %llu runs past the end of the file (8 + "
                         "%llu > %zu)",
                         file, (unsigned long long)n, (unsigned long long)n, size);
    if (n < 2)
        return pti_error(PT_ERR_FORMAT, "%s: safetensors: header length %llu is too short", file,
                         (unsigned long long)n);
    size_t bad = pti_utf8_invalid_at(p + 8, (size_t)n);
    if (bad < n)
        return pti_error(PT_ERR_FORMAT, "%s: safetensors: the header is not valid UTF-8 (byte %zu)",
                         file, bad);
    *json = (const char *)p + 8;
    *json_len = n;
    return PT_OK;
}

/* cJSON spends about 64 bytes per value: a header of 100 MB of "0,0,0,..." would take several
 * GB. Values are counted (commas and openings outside strings) before parsing, and a header
 * with more than this many is refused (a real one has about ten per tensor). */
#define ST_MAX_JSON_VALUES (UINT64_C(1) << 22)

static uint64_t count_json_values(const char *s, uint64_t len)
{
    uint64_t n = 1;
    bool in_string = false;
    for (uint64_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == ',' || c == '[' || c == '{') {
            n++;
        }
    }
    return n;
}

static cJSON *parse_json(const char *file, const char *json, uint64_t len)
{
    uint64_t values = count_json_values(json, len);
    if (values > ST_MAX_JSON_VALUES)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: safetensors: the header holds about %llu JSON values, more than "
                              "the %llu allowed",
                              file, (unsigned long long)values,
                              (unsigned long long)ST_MAX_JSON_VALUES);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, (size_t)len, &end, false);
    if (!root) {
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: safetensors: the header is not valid JSON (near byte %zu of "
                              "%llu)",
                              file, at, (unsigned long long)len);
    }
    for (const char *c = end; c < json + len; c++)
        if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r') {
            cJSON_Delete(root);
            return pti_error_null(PT_ERR_FORMAT,
                                  "%s: safetensors: unexpected bytes after the JSON header (at "
                                  "byte %zu of %llu)",
                                  file, (size_t)(c - json), (unsigned long long)len);
        }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return pti_error_null(PT_ERR_FORMAT, "%s: safetensors: the header is not a JSON object",
                              file);
    }
    return root;
}

pt_value *pti_safetensors_load_map(pti_file_map *m, pt_value **metadata, bool copy)
{
    if (metadata)
        *metadata = NULL;
    const char *file = pti_file_map_name(m);
    const char *json = NULL;
    uint64_t json_len = 0;
    if (header_span(m, &json, &json_len) != PT_OK)
        return NULL;
    cJSON *root = parse_json(file, json, json_len);
    if (!root)
        return NULL;
    uint64_t data_start = 8 + json_len;
    uint64_t data_size = pti_file_map_size(m) - data_start;
    size_t nkeys = (size_t)cJSON_GetArraySize(root);
    st_entry *entries = pti_malloc((nkeys ? nkeys : 1) * sizeof *entries);
    pt_value *result = NULL, *meta = NULL;
    const cJSON *meta_json = NULL;
    if (!entries) {
        pti_error(PT_ERR_OOM, "%s: safetensors: out of memory for %zu entries", file, nkeys);
        goto done;
    }
    if (check_unique_keys(file, root, nkeys) != PT_OK)
        goto done;
    size_t n = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, root)
    {
        if (strcmp(f->string, "__metadata__") == 0) {
            meta_json = f;
            continue;
        }
        entries[n].order = n;
        if (parse_entry(file, f, data_size, &entries[n]) != PT_OK)
            goto done;
        n++;
    }
    qsort(entries, n, sizeof *entries, cmp_offsets);
    if (check_tiling(file, entries, n, data_size) != PT_OK)
        goto done;
    meta = parse_metadata(file, meta_json);
    if (!meta)
        goto done;
    result = build_dict(m, entries, n, data_start, copy);
done:
    free(entries);
    cJSON_Delete(root);
    if (result && metadata)
        *metadata = meta;
    else
        pt_value_free(meta);
    return result;
}

pt_value *pt_load_safetensors(const char *path, pt_value **metadata)
{
    if (metadata)
        *metadata = NULL;
    if (!path)
        return pti_error_null(PT_ERR_NULL, "pt_load_safetensors: path is NULL");
    pti_file_map *m = pti_file_map_open(path);
    if (!m)
        return NULL;
    pt_value *v = pti_safetensors_load_map(m, metadata, false);
    pti_file_map_release(m);
    return v;
}
