/* pt-inspect: prints what a checkpoint or model file holds, without running anything from it.
 *
 *   pt-inspect FILE [--json] [--all]
 *
 * The format is detected from the bytes: a zip ("PK\3\4", torch.save since 1.6) or a pickle
 * (0x80, the legacy torch.save format) is read with pt_load_ex; a file whose first 8 bytes are
 * a little-endian length followed by '{' is safetensors (pt_load_safetensors); "GGUF" is a
 * llama.cpp model (pt_gguf_open). The output is the value tree (nested keys; tensors with
 * dtype, shape and bytes; scalars with their values) or, for GGUF, the version, metadata and
 * tensor table, then a totals line: tensors, parameters (the sum of element counts) and bytes.
 * Long strings and arrays are shortened unless --all is given. --json prints one JSON document
 * with the same information. Errors go to stderr with exit status 1. */
#include <cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <prometorch/prometorch.h>

#define SHORT_STR 60 /* bytes of a string shown without --all */
#define SHORT_LIST 8 /* items of an array or list shown without --all */

/* Totals count each tensor once, however often the tree refers to it (tied weights, a module
 * pickled whole listing its parameters twice): `seen` is an open-addressing set of them. */
/* A set of pointers (open addressing): the tensors seen, or their data. */
typedef struct ptr_set {
    const void **seen;
    size_t seen_cap, seen_len;
} ptr_set;

/* tensors: every distinct tensor; params and bytes: each distinct data (a storage shared by
 * two keys, as tied weights, counts once), outside optimizer state (in_optimizer > 0 while
 * inside an "optimizer" / "optimizer_state_dict" entry). */
typedef struct totals {
    int64_t tensors, params, bytes;
    ptr_set tensor_set, data_set;
    int in_optimizer;
} totals;

typedef struct options {
    const char *path;
    bool json, all;
} options;

/* ---- shared helpers ------------------------------------------------------------------------ */

/* A printable, quoted rendering of a string, shortened to SHORT_STR bytes unless `all`.
 * Returns a malloc'd string. */
static char *quote(const char *s, size_t len, bool all)
{
    size_t shown = !all && len > SHORT_STR ? SHORT_STR : len;
    char *out = malloc(shown * 4 + 64);
    if (!out)
        return NULL;
    size_t n = 0;
    out[n++] = '\'';
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\'' || c == '\\')
            n += (size_t)sprintf(out + n, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            n += (size_t)sprintf(out + n, "\\x%02x", c);
        else
            out[n++] = (char)c;
    }
    out[n++] = '\'';
    if (shown < len)
        n += (size_t)sprintf(out + n, "... (%zu bytes)", len);
    out[n] = '\0';
    return out;
}

/* The shortest decimal text that reads back as the same float32 / double. */
static void fmt_real(char *buf, size_t cap, double d, bool f32)
{
    for (int prec = f32 ? 6 : 15; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, d);
        double back = strtod(buf, NULL);
        if (f32 ? (float)back == (float)d : back == d)
            return;
    }
}

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

static cJSON *json_shape(int ndim, const int64_t *shape)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < ndim; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)shape[i]));
    return a;
}

static void print_totals(const totals *t)
{
    printf("total: %" PRId64 " tensors, %" PRId64 " parameters, %" PRId64 " bytes\n", t->tensors,
           t->params, t->bytes);
}

static cJSON *json_totals(const totals *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tensors", (double)t->tensors);
    cJSON_AddNumberToObject(o, "parameters", (double)t->params);
    cJSON_AddNumberToObject(o, "bytes", (double)t->bytes);
    return o;
}

static void emit_json(cJSON *doc)
{
    char *s = cJSON_Print(doc);
    if (s)
        printf("%s\n", s);
    free(s);
    cJSON_Delete(doc);
}

/* ---- value trees (.pt, safetensors) -----------------------------------------------------------
 */

static int64_t tensor_bytes(const pt_tensor *t)
{
    pt_dtype dt = pt_dtype_of(t);
    int64_t blk = pt_dtype_block_size(dt);
    return (pt_numel(t) + blk - 1) / blk * (int64_t)pt_dtype_size(dt);
}

/* Adds t to the set; false if it was there already (or memory ran out: then it is counted). */
static bool first_sight(ptr_set *tot, const void *t)
{
    if (2 * (tot->seen_len + 1) > tot->seen_cap) {
        size_t cap = tot->seen_cap ? 2 * tot->seen_cap : 1024;
        const void **grown = calloc(cap, sizeof *grown);
        if (!grown)
            return true;
        for (size_t i = 0; i < tot->seen_cap; i++) {
            if (!tot->seen[i])
                continue;
            size_t h = ((uintptr_t)tot->seen[i] >> 4) & (cap - 1);
            while (grown[h])
                h = (h + 1) & (cap - 1);
            grown[h] = tot->seen[i];
        }
        free(tot->seen);
        tot->seen = grown;
        tot->seen_cap = cap;
    }
    size_t h = ((uintptr_t)t >> 4) & (tot->seen_cap - 1);
    for (; tot->seen[h]; h = (h + 1) & (tot->seen_cap - 1))
        if (tot->seen[h] == t)
            return false;
    tot->seen[h] = t;
    tot->seen_len++;
    return true;
}

static void count_tensor(const pt_tensor *t, totals *tot)
{
    if (!first_sight(&tot->tensor_set, t))
        return;
    tot->tensors++;
    const void *data = pt_numel(t) > 0 ? pt_data_ptr(t) : NULL;
    if (data && !first_sight(&tot->data_set, data))
        return; /* another key's tensor over the same data */
    tot->bytes += tensor_bytes(t);
    if (tot->in_optimizer == 0)
        tot->params += pt_numel(t);
}

/* Whether a dict key names a checkpoint's optimizer state (not parameters). */
static bool is_optimizer_key(const pt_value *k)
{
    const char *s = pt_value_as_str(k, NULL);
    return s && (strcmp(s, "optimizer") == 0 || strcmp(s, "optimizer_state_dict") == 0);
}

/* The one-line description of a value: "tensor float32 [2, 3] 24 bytes", "int 3", "dict (2)". */
static char *describe(const pt_value *v, bool all)
{
    char buf[512];
    switch (pt_value_kind_of(v)) {
    case PT_VALUE_NONE: return strdup("None");
    case PT_VALUE_BOOL: {
        bool b = false;
        pt_value_as_bool(v, &b);
        return strdup(b ? "bool True" : "bool False");
    }
    case PT_VALUE_INT: {
        int64_t i = 0;
        pt_value_as_int(v, &i);
        snprintf(buf, sizeof buf, "int %" PRId64, i);
        return strdup(buf);
    }
    case PT_VALUE_FLOAT: {
        double f = 0;
        pt_value_as_float(v, &f);
        char num[40];
        fmt_real(num, sizeof num, f, false);
        snprintf(buf, sizeof buf, "float %s", num);
        return strdup(buf);
    }
    case PT_VALUE_STR: {
        size_t len = 0;
        const char *s = pt_value_as_str(v, &len);
        char *q = quote(s, len, all);
        if (!q)
            return NULL;
        snprintf(buf, sizeof buf, "str %s", q);
        free(q);
        return strdup(buf);
    }
    case PT_VALUE_BYTES:
        snprintf(buf, sizeof buf, "bytes (%" PRId64 ")", pt_value_len(v));
        return strdup(buf);
    case PT_VALUE_TENSOR: {
        const pt_tensor *t = pt_value_tensor_ref(v);
        char shape[256];
        shape_text(shape, sizeof shape, pt_ndim(t), pt_shape(t));
        snprintf(buf, sizeof buf, "tensor %s %s %" PRId64 " bytes", pt_dtype_name(pt_dtype_of(t)),
                 shape, tensor_bytes(t));
        return strdup(buf);
    }
    default:
        snprintf(buf, sizeof buf, "%s (%" PRId64 ")", pt_value_kind_name(pt_value_kind_of(v)),
                 pt_value_len(v));
        return strdup(buf);
    }
}

/* A dict key as text: a str as is, anything else as its repr. */
/* A name (dict key, metadata key, tensor name) as printed in text mode: control characters
 * and backslashes as \xNN / \\ escapes, so a name cannot move the cursor, clear the screen or
 * forge lines. Returns a malloc'd string (NULL when s is NULL or out of memory). */
static char *escape_name(const char *s)
{
    if (!s)
        return NULL;
    size_t len = strlen(s);
    char *out = malloc(len * 4 + 1);
    if (!out)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\')
            n += (size_t)sprintf(out + n, "\\\\");
        else if (c < 0x20 || c == 0x7F)
            n += (size_t)sprintf(out + n, "\\x%02x", c);
        else
            out[n++] = (char)c;
    }
    out[n] = '\0';
    return out;
}

static char *key_text(const pt_value *k)
{
    if (pt_value_kind_of(k) == PT_VALUE_STR)
        return escape_name(pt_value_as_str(k, NULL));
    return pt_value_to_string(k, 8);
}

static void print_tree(const pt_value *v, int indent, bool all, totals *tot)
{
    pt_value_kind kind = pt_value_kind_of(v);
    bool is_dict = kind == PT_VALUE_DICT;
    if (!is_dict && kind != PT_VALUE_LIST && kind != PT_VALUE_TUPLE)
        return;
    int64_t n = pt_value_len(v);
    for (int64_t i = 0; i < n; i++) {
        const pt_value *item = pt_value_item_ref(v, i);
        if (!is_dict && !all && i >= SHORT_LIST) {
            /* still count the tensors that are not shown */
            if (pt_value_kind_of(item) == PT_VALUE_TENSOR)
                count_tensor(pt_value_tensor_ref(item), tot);
            else
                print_tree(item, -1, all, tot);
            if (i == n - 1 && indent >= 0)
                printf("%*s... (%" PRId64 " more)\n", indent, "", n - SHORT_LIST);
            continue;
        }
        bool opt = is_dict && is_optimizer_key(pt_value_key_ref(v, i));
        tot->in_optimizer += opt;
        if (pt_value_kind_of(item) == PT_VALUE_TENSOR)
            count_tensor(pt_value_tensor_ref(item), tot);
        if (indent >= 0) {
            char *k = is_dict ? key_text(pt_value_key_ref(v, i)) : NULL;
            char *d = describe(item, all);
            if (is_dict)
                printf("%*s%s: %s\n", indent, "", k ? k : "?", d ? d : "?");
            else
                printf("%*s[%" PRId64 "]: %s\n", indent, "", i, d ? d : "?");
            free(k);
            free(d);
        }
        print_tree(item, indent >= 0 ? indent + 2 : -1, all, tot);
        tot->in_optimizer -= opt;
    }
}

static cJSON *json_tree(const pt_value *v, bool all, totals *tot)
{
    switch (pt_value_kind_of(v)) {
    case PT_VALUE_NONE: return cJSON_CreateNull();
    case PT_VALUE_BOOL: {
        bool b = false;
        pt_value_as_bool(v, &b);
        return cJSON_CreateBool(b);
    }
    case PT_VALUE_INT: {
        int64_t i = 0;
        pt_value_as_int(v, &i);
        return cJSON_CreateNumber((double)i);
    }
    case PT_VALUE_FLOAT: {
        double f = 0;
        pt_value_as_float(v, &f);
        return cJSON_CreateNumber(f);
    }
    case PT_VALUE_STR: {
        size_t len = 0;
        const char *s = pt_value_as_str(v, &len);
        if (!all && len > SHORT_STR) {
            char *cut = strndup(s, SHORT_STR);
            cJSON *o = cJSON_CreateString(cut ? cut : "");
            free(cut);
            return o;
        }
        return cJSON_CreateString(s);
    }
    case PT_VALUE_BYTES: {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "bytes");
        cJSON_AddNumberToObject(o, "length", (double)pt_value_len(v));
        return o;
    }
    case PT_VALUE_TENSOR: {
        const pt_tensor *t = pt_value_tensor_ref(v);
        count_tensor(t, tot);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "tensor");
        cJSON_AddStringToObject(o, "dtype", pt_dtype_name(pt_dtype_of(t)));
        cJSON_AddItemToObject(o, "shape", json_shape(pt_ndim(t), pt_shape(t)));
        cJSON_AddNumberToObject(o, "numel", (double)pt_numel(t));
        cJSON_AddNumberToObject(o, "bytes", (double)tensor_bytes(t));
        return o;
    }
    case PT_VALUE_DICT: {
        cJSON *o = cJSON_CreateObject();
        for (int64_t i = 0; i < pt_value_len(v); i++) {
            char *k = key_text(pt_value_key_ref(v, i));
            bool opt = is_optimizer_key(pt_value_key_ref(v, i));
            tot->in_optimizer += opt;
            cJSON_AddItemToObject(o, k ? k : "?", json_tree(pt_value_item_ref(v, i), all, tot));
            tot->in_optimizer -= opt;
            free(k);
        }
        return o;
    }
    default: { /* list, tuple */
        cJSON *a = cJSON_CreateArray();
        for (int64_t i = 0; i < pt_value_len(v); i++) {
            cJSON *item = json_tree(pt_value_item_ref(v, i), all, tot);
            if (all || i < SHORT_LIST)
                cJSON_AddItemToArray(a, item);
            else
                cJSON_Delete(item); /* counted, not shown */
        }
        return a;
    }
    }
}

static int inspect_value(const options *o, const char *format, pt_value *v, pt_value *meta)
{
    totals tot = {0};
    if (o->json) {
        cJSON *doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "file", o->path);
        cJSON_AddStringToObject(doc, "format", format);
        if (meta)
            cJSON_AddItemToObject(doc, "metadata", json_tree(meta, true, &tot));
        cJSON_AddItemToObject(doc, "value", json_tree(v, o->all, &tot));
        cJSON_AddItemToObject(doc, "totals", json_totals(&tot));
        free(tot.tensor_set.seen);
        free(tot.data_set.seen);
        emit_json(doc);
        return 0;
    }
    printf("file: %s\nformat: %s\n", o->path, format);
    if (meta) {
        printf("metadata (%" PRId64 "):\n", pt_value_len(meta));
        for (int64_t i = 0; i < pt_value_len(meta); i++) {
            size_t len = 0;
            const char *s = pt_value_as_str(pt_value_item_ref(meta, i), &len);
            char *q = s ? quote(s, len, o->all) : NULL;
            char *k = escape_name(pt_value_as_str(pt_value_key_ref(meta, i), NULL));
            printf("  %s: %s\n", k ? k : "?", q ? q : "?");
            free(k);
            free(q);
        }
    }
    char *d = describe(v, o->all);
    printf("value: %s\n", d ? d : "?");
    free(d);
    if (pt_value_kind_of(v) == PT_VALUE_TENSOR)
        count_tensor(pt_value_tensor_ref(v), &tot);
    print_tree(v, 2, o->all, &tot);
    print_totals(&tot);
    free(tot.tensor_set.seen);
    free(tot.data_set.seen);
    return 0;
}

/* ---- GGUF ----------------------------------------------------------------------------------- */

/* Element j of array i as text. */
static char *gguf_elem_text(pt_gguf *g, int64_t i, int64_t j, pt_gguf_type et, bool all)
{
    char buf[64];
    if (et == PT_GGUF_STRING) {
        size_t len = 0;
        const char *s = pt_gguf_arr_str(g, i, j, &len);
        return s ? quote(s, len, all) : NULL;
    }
    if (et == PT_GGUF_FLOAT32 || et == PT_GGUF_FLOAT64) {
        double d = 0;
        pt_gguf_arr_float(g, i, j, &d);
        fmt_real(buf, sizeof buf, d, et == PT_GGUF_FLOAT32);
    } else if (et == PT_GGUF_UINT64) {
        uint64_t u;
        memcpy(&u, (const uint8_t *)pt_gguf_arr_data(g, i) + 8 * j, 8);
        snprintf(buf, sizeof buf, "%" PRIu64, u);
    } else if (et == PT_GGUF_BOOL) {
        int64_t v = 0;
        pt_gguf_arr_int(g, i, j, &v);
        snprintf(buf, sizeof buf, "%s", v ? "true" : "false");
    } else {
        int64_t v = 0;
        pt_gguf_arr_int(g, i, j, &v);
        snprintf(buf, sizeof buf, "%" PRId64, v);
    }
    return strdup(buf);
}

/* A scalar value as text ("200", "true", "'llama'", "0.100000001"). */
static char *gguf_scalar_text(pt_gguf *g, int64_t i, bool all)
{
    char buf[64];
    pt_gguf_type t = pt_gguf_kv_type(g, i);
    if (t == PT_GGUF_STRING) {
        size_t len = 0;
        const char *s = pt_gguf_get_str(g, i, &len);
        return s ? quote(s, len, all) : NULL;
    }
    if (t == PT_GGUF_FLOAT32 || t == PT_GGUF_FLOAT64) {
        double d = 0;
        pt_gguf_get_float(g, i, &d);
        fmt_real(buf, sizeof buf, d, t == PT_GGUF_FLOAT32);
    } else if (t == PT_GGUF_UINT64) {
        uint64_t u = 0;
        pt_gguf_get_u64(g, i, &u);
        snprintf(buf, sizeof buf, "%" PRIu64, u);
    } else if (t == PT_GGUF_BOOL) {
        bool b = false;
        pt_gguf_get_bool(g, i, &b);
        snprintf(buf, sizeof buf, "%s", b ? "true" : "false");
    } else {
        int64_t v = 0;
        pt_gguf_get_int(g, i, &v);
        snprintf(buf, sizeof buf, "%" PRId64, v);
    }
    return strdup(buf);
}

static void gguf_totals(pt_gguf *g, totals *tot)
{
    for (int64_t t = 0; t < pt_gguf_tensor_count(g); t++) {
        tot->tensors++;
        tot->params += pt_gguf_tensor_numel(g, t);
        tot->bytes += (int64_t)pt_gguf_tensor_nbytes(g, t);
    }
}

static void gguf_print(const options *o, pt_gguf *g)
{
    printf("file: %s\n", o->path);
    printf("format: gguf v%u, alignment %u, %" PRId64 " metadata entries, %" PRId64 " tensors\n",
           pt_gguf_version(g), pt_gguf_alignment(g), pt_gguf_kv_count(g), pt_gguf_tensor_count(g));
    printf("metadata:\n");
    for (int64_t i = 0; i < pt_gguf_kv_count(g); i++) {
        char *key = escape_name(pt_gguf_kv_key(g, i, NULL));
        pt_gguf_type t = pt_gguf_kv_type(g, i);
        if (t != PT_GGUF_ARRAY) {
            char *v = gguf_scalar_text(g, i, o->all);
            printf("  %s: %s %s\n", key ? key : "?", pt_gguf_type_name(t), v ? v : "?");
            free(v);
            free(key);
            continue;
        }
        pt_gguf_type et = pt_gguf_arr_type(g, i);
        int64_t n = pt_gguf_arr_count(g, i);
        printf("  %s: array[%s] (%" PRId64 ")", key ? key : "?", pt_gguf_type_name(et), n);
        free(key);
        int64_t shown = o->all || n <= SHORT_LIST ? n : SHORT_LIST;
        for (int64_t j = 0; j < shown; j++) {
            char *e = gguf_elem_text(g, i, j, et, o->all);
            printf("%s%s", j ? ", " : ": ", e ? e : "?");
            free(e);
        }
        printf("%s\n", shown < n ? ", ..." : "");
    }
    printf("tensors:\n");
    for (int64_t t = 0; t < pt_gguf_tensor_count(g); t++) {
        char shape[256];
        shape_text(shape, sizeof shape, pt_gguf_tensor_ndim(g, t), pt_gguf_tensor_shape(g, t));
        char *name = escape_name(pt_gguf_tensor_name(g, t, NULL));
        printf("  %s: %s %s %" PRIu64 " bytes at offset %" PRIu64 "\n", name ? name : "?",
               pt_gguf_ggml_type_name(pt_gguf_tensor_ggml_type(g, t)), shape,
               pt_gguf_tensor_nbytes(g, t), pt_gguf_tensor_offset(g, t));
        free(name);
    }
    totals tot = {0};
    gguf_totals(g, &tot);
    print_totals(&tot);
}

static cJSON *gguf_json_value(pt_gguf *g, int64_t i, bool all)
{
    pt_gguf_type t = pt_gguf_kv_type(g, i);
    if (t == PT_GGUF_STRING) {
        size_t len = 0;
        const char *s = pt_gguf_get_str(g, i, &len);
        char *cut = strndup(s, !all && len > SHORT_STR ? SHORT_STR : len);
        cJSON *o = cJSON_CreateString(cut ? cut : "");
        free(cut);
        return o;
    }
    if (t == PT_GGUF_BOOL) {
        bool b = false;
        pt_gguf_get_bool(g, i, &b);
        return cJSON_CreateBool(b);
    }
    double d = 0;
    pt_gguf_get_float(g, i, &d);
    return cJSON_CreateNumber(d);
}

static void gguf_json(const options *o, pt_gguf *g)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "file", o->path);
    cJSON_AddStringToObject(doc, "format", "gguf");
    cJSON_AddNumberToObject(doc, "version", pt_gguf_version(g));
    cJSON_AddNumberToObject(doc, "alignment", pt_gguf_alignment(g));
    cJSON *meta = cJSON_AddArrayToObject(doc, "metadata");
    for (int64_t i = 0; i < pt_gguf_kv_count(g); i++) {
        cJSON *kv = cJSON_CreateObject();
        pt_gguf_type t = pt_gguf_kv_type(g, i);
        cJSON_AddStringToObject(kv, "key", pt_gguf_kv_key(g, i, NULL));
        cJSON_AddStringToObject(kv, "type", pt_gguf_type_name(t));
        if (t == PT_GGUF_ARRAY) {
            pt_gguf_type et = pt_gguf_arr_type(g, i);
            int64_t n = pt_gguf_arr_count(g, i);
            cJSON_AddStringToObject(kv, "element_type", pt_gguf_type_name(et));
            cJSON_AddNumberToObject(kv, "count", (double)n);
            cJSON *items = cJSON_AddArrayToObject(kv, "items");
            for (int64_t j = 0; j < (o->all || n <= SHORT_LIST ? n : SHORT_LIST); j++) {
                if (et == PT_GGUF_STRING) {
                    size_t len = 0;
                    const char *s = pt_gguf_arr_str(g, i, j, &len);
                    char *cut = strndup(s, !o->all && len > SHORT_STR ? SHORT_STR : len);
                    cJSON_AddItemToArray(items, cJSON_CreateString(cut ? cut : ""));
                    free(cut);
                } else if (et == PT_GGUF_BOOL) {
                    int64_t b = 0;
                    pt_gguf_arr_int(g, i, j, &b);
                    cJSON_AddItemToArray(items, cJSON_CreateBool(b != 0));
                } else {
                    double d = 0;
                    pt_gguf_arr_float(g, i, j, &d);
                    cJSON_AddItemToArray(items, cJSON_CreateNumber(d));
                }
            }
        } else {
            cJSON_AddItemToObject(kv, "value", gguf_json_value(g, i, o->all));
        }
        cJSON_AddItemToArray(meta, kv);
    }
    cJSON *tensors = cJSON_AddArrayToObject(doc, "tensors");
    for (int64_t t = 0; t < pt_gguf_tensor_count(g); t++) {
        cJSON *ti = cJSON_CreateObject();
        int ndim = pt_gguf_tensor_ndim(g, t);
        cJSON_AddStringToObject(ti, "name", pt_gguf_tensor_name(g, t, NULL));
        cJSON_AddStringToObject(ti, "type", pt_gguf_ggml_type_name(pt_gguf_tensor_ggml_type(g, t)));
        cJSON_AddNumberToObject(ti, "ggml_type", pt_gguf_tensor_ggml_type(g, t));
        cJSON_AddItemToObject(ti, "shape", json_shape(ndim, pt_gguf_tensor_shape(g, t)));
        cJSON_AddItemToObject(ti, "ne", json_shape(ndim, pt_gguf_tensor_ne(g, t)));
        cJSON_AddNumberToObject(ti, "bytes", (double)pt_gguf_tensor_nbytes(g, t));
        cJSON_AddNumberToObject(ti, "offset", (double)pt_gguf_tensor_offset(g, t));
        cJSON_AddItemToArray(tensors, ti);
    }
    totals tot = {0};
    gguf_totals(g, &tot);
    cJSON_AddItemToObject(doc, "totals", json_totals(&tot));
    emit_json(doc);
}

/* ---- main ----------------------------------------------------------------------------------- */

typedef enum kind { KIND_UNKNOWN, KIND_PT, KIND_SAFETENSORS, KIND_GGUF } kind;

static kind detect(const unsigned char *h, size_t n, const char **format)
{
    if (n >= 4 && memcmp(h, "GGUF", 4) == 0)
        return KIND_GGUF;
    if (n >= 4 && memcmp(h, "PK\3\4", 4) == 0) {
        *format = "pt (zip)";
        return KIND_PT;
    }
    if (n >= 1 && h[0] == 0x80) {
        *format = "pt (legacy)";
        return KIND_PT;
    }
    if (n >= 9) {
        uint64_t len = 0;
        for (int i = 7; i >= 0; i--)
            len = len << 8 | h[i];
        size_t k = 8;
        while (k < n && (h[k] == ' ' || h[k] == '\n' || h[k] == '\t' || h[k] == '\r'))
            k++;
        if (len >= 2 && k < n && h[k] == '{')
            return KIND_SAFETENSORS;
    }
    return KIND_UNKNOWN;
}

static int usage(void)
{
    fprintf(stderr, "usage: pt-inspect FILE [--json] [--all]\n"
                    "  prints the tensors, values and metadata of a .pt (torch.save), "
                    ".safetensors or .gguf file\n");
    return 1;
}

static int fail(const char *what)
{
    fprintf(stderr, "pt-inspect: %s\n", what ? what : "unknown error");
    return 1;
}

int main(int argc, char **argv)
{
    options o = {NULL, false, false};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            o.json = true;
        else if (strcmp(argv[i], "--all") == 0)
            o.all = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 || o.path)
            return usage();
        else
            o.path = argv[i];
    }
    if (!o.path)
        return usage();
    FILE *f = fopen(o.path, "rb");
    if (!f) {
        fprintf(stderr, "pt-inspect: cannot open %s\n", o.path);
        return 1;
    }
    unsigned char head[64];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    const char *format = "safetensors";
    switch (detect(head, n, &format)) {
    case KIND_GGUF: {
        pt_gguf *g = pt_gguf_open(o.path);
        if (!g)
            return fail(pt_last_error());
        if (o.json)
            gguf_json(&o, g);
        else
            gguf_print(&o, g);
        pt_gguf_close(g);
        return 0;
    }
    case KIND_SAFETENSORS: {
        pt_value *meta = NULL;
        pt_value *v = pt_load_safetensors(o.path, &meta);
        if (!v)
            return fail(pt_last_error());
        int rc = inspect_value(&o, format, v, meta);
        pt_value_free(v);
        pt_value_free(meta);
        return rc;
    }
    case KIND_PT: {
        pt_load_opts opts = {.format = PT_FORMAT_AUTO, .allow_objects = true};
        pt_value *v = pt_load_ex(o.path, &opts);
        if (!v)
            return fail(pt_last_error());
        int rc = inspect_value(&o, format, v, NULL);
        pt_value_free(v);
        return rc;
    }
    default:
        fprintf(stderr, "pt-inspect: %s: not a .pt, .safetensors or .gguf file\n", o.path);
        return 1;
    }
}
