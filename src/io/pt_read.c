/* The checkpoint reader (io.h: pt_load and friends). It detects the format from the first
 * bytes and assembles the value tree:
 *
 *   zip (torch.save since 1.6)  <root>/data.pkl through the restricted pickle VM; each storage
 *                               named by a persistent id comes from <root>/data/<key>, mapped
 *                               copy-on-write when stored (the usual case), inflated otherwise
 *   legacy (non-zip torch.save) magic, protocol and sys_info pickles, the object pickle, the
 *                               list of storage keys, then each storage's count and bytes
 *   safetensors                 safetensors_read.c
 *   bare pickle                 the VM alone, persistent ids refused
 *
 * Storages are cached by key, so tensors that were views of one storage in the file share one
 * storage here. Nothing in a file is executed: the VM knows only PyTorch's weights_only globals. */
#include <stdlib.h>
#include <string.h>

#include "file_map.h"
#include "pickle_read.h"
#include "prometorch/io.h"
#include "safetensors_read.h"
#include "zip_read.h"

#define MAX_PICKLE_BYTES ((uint64_t)1 << 31)
#define MAX_STORAGE_KEY 256
#define MAX_SMALL_RECORD 64

/* The 80-bit magic number pickled as LONG1 at the start of a legacy file (formats.md 1.5). */
static const uint8_t legacy_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                       0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};

/* ---- storage classes --------------------------------------------------------------------------
 */

typedef struct storage_class {
    const char *name; /* after "torch." or "torch.cuda." */
    int dtype;        /* a pt_dtype, or -1 for types PromeTorch has no dtype for */
} storage_class;

static const storage_class storage_classes[] = {
    {"FloatStorage", PT_FLOAT32}, {"DoubleStorage", PT_FLOAT64},
    {"HalfStorage", PT_FLOAT16},  {"BFloat16Storage", PT_BFLOAT16},
    {"LongStorage", PT_INT64},    {"IntStorage", PT_INT32},
    {"ShortStorage", PT_INT16},   {"CharStorage", PT_INT8},
    {"ByteStorage", PT_UINT8},    {"BoolStorage", PT_BOOL},
    {"UntypedStorage", PT_UINT8}, {"ComplexFloatStorage", -1},
    {"ComplexDoubleStorage", -1}, {"QInt8Storage", -1},
    {"QUInt8Storage", -1},        {"QInt32Storage", -1},
    {"QUInt4x2Storage", -1},      {"QUInt2x4Storage", -1},
};

/* The dtype of a storage class global ("torch.FloatStorage", "torch.cuda.HalfStorage",
 * "torch.storage.UntypedStorage"); false with the error set. */
static bool storage_dtype(const char *what, const char *global, pt_dtype *dt)
{
    const char *base = NULL;
    static const char *const prefixes[] = {"torch.cuda.", "torch.storage.", "torch."};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes && !base; i++)
        if (strncmp(global, prefixes[i], strlen(prefixes[i])) == 0)
            base = global + strlen(prefixes[i]);
    for (size_t i = 0; base && i < sizeof storage_classes / sizeof *storage_classes; i++) {
        if (strcmp(base, storage_classes[i].name) != 0)
            continue;
        if (storage_classes[i].dtype < 0) {
            pti_error(PT_ERR_DTYPE,
                      "%s: storage type %s has no PromeTorch dtype (complex and "
                      "quantized tensors are not supported)",
                      what, global);
            return false;
        }
        *dt = (pt_dtype)storage_classes[i].dtype;
        return true;
    }
    pti_error(PT_ERR_UNSUPPORTED,
              "%s: persistent id names '%s', which is not a storage type "
              "(nothing was executed)",
              what, global);
    return false;
}

/* ---- the load context -------------------------------------------------------------------------
 */

typedef struct cached_storage {
    char *key;
    pt_dtype dtype;
    int64_t numel;
    pt_tensor *t; /* 1-D over the whole storage */
    bool filled;  /* legacy: its bytes have been read */
} cached_storage;

typedef struct load_ctx {
    pti_file_map *map;
    const char *what; /* the file name for messages */
    bool copy;
    pti_zip *zip;
    char root[MAX_STORAGE_KEY + 8]; /* "<folder>/" of a zip archive */
    bool legacy;
    uint64_t legacy_bytes; /* sum of the legacy storages allocated so far */
    cached_storage *cache;
    int64_t ncache, capcache;
    pt_value *index; /* key -> position in cache, so 100k storages do not cost 100k^2 */
} load_ctx;

static void ctx_free(load_ctx *c)
{
    for (int64_t i = 0; i < c->ncache; i++) {
        free(c->cache[i].key);
        pt_release(c->cache[i].t);
    }
    free(c->cache);
    pt_value_free(c->index);
    if (c->zip)
        pti_zip_close(c->zip);
}

static cached_storage *cache_find(load_ctx *c, const char *key)
{
    if (!c->index)
        return NULL;
    pt_value probe = pti_value_probe_str(key, strlen(key));
    uint64_t hash;
    int64_t pos, e;
    if (!pti_value_hash(&probe, &hash, 0) || (e = pti_dict_find(c->index, &probe, hash)) < 0 ||
        pt_value_as_int(c->index->u.dict.entries[e].val, &pos) != PT_OK)
        return NULL;
    return &c->cache[pos];
}

static cached_storage *cache_add(load_ctx *c, const char *key, pt_dtype dt, int64_t numel,
                                 pt_storage *s)
{
    if (c->ncache == c->capcache) {
        int64_t cap = c->capcache ? c->capcache * 2 : 16;
        cached_storage *n = pti_realloc(c->cache, (size_t)cap * sizeof *n);
        if (!n)
            return pti_error_null(PT_ERR_OOM, "%s: out of memory", c->what);
        c->cache = n;
        c->capcache = cap;
    }
    int64_t one = 1;
    pt_tensor *t = pti_tensor_on_storage(s, dt, 1, &numel, &one, 0);
    if (!t)
        return NULL;
    char *k = pti_strdup(key);
    if (!c->index)
        c->index = pt_value_dict();
    if (!k || !c->index || pt_value_dict_set_str(c->index, key, pt_value_int(c->ncache)) != PT_OK) {
        free(k);
        pt_release(t);
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", c->what);
    }
    cached_storage *e = &c->cache[c->ncache++];
    *e = (cached_storage){k, dt, numel, t, !c->legacy};
    return e;
}

/* ---- storages from a zip archive or a legacy file ---------------------------------------------
 */

static void free_buffer(void *ctx, void *data)
{
    (void)ctx;
    free(data);
}

static pt_storage *zip_storage(load_ctx *c, const char *key, uint64_t nbytes, size_t align)
{
    char name[2 * MAX_STORAGE_KEY + 16];
    snprintf(name, sizeof name, "%sdata/%s", c->root, key);
    const pti_zip_entry *e = pti_zip_find(c->zip, name);
    if (!e)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: the pickle refers to storage '%s' but the "
                              "archive has no record %s",
                              c->what, key, name);
    if (e->size != nbytes)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: record %s holds %llu bytes, the pickle "
                              "declares a storage of %llu bytes",
                              c->what, name, (unsigned long long)e->size,
                              (unsigned long long)nbytes);
    if (e->method == 0) {
        if (e->comp_size != e->size)
            return pti_error_null(PT_ERR_FORMAT,
                                  "%s: stored record %s has %llu bytes in the "
                                  "archive but declares %llu",
                                  c->what, name, (unsigned long long)e->comp_size,
                                  (unsigned long long)e->size);
        return pti_file_map_storage(c->map, e->data_offset, nbytes, align, c->copy);
    }
    size_t len = 0;
    uint8_t *buf = pti_zip_read(c->zip, e, nbytes, &len);
    if (!buf)
        return NULL;
    pt_storage *s = pti_storage_wrap((pt_device){PT_DEVICE_CPU, 0}, buf, len, free_buffer, NULL);
    if (!s)
        free(buf);
    return s;
}

static pt_storage *legacy_storage(load_ctx *c, uint64_t nbytes)
{
    /* the bytes come after the pickles, so they cannot outnumber the file's bytes */
    uint64_t size = pti_file_map_size(c->map);
    if (nbytes > size || c->legacy_bytes > size - nbytes)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: storages of %llu bytes declared, more than "
                              "the file's %llu bytes",
                              c->what, (unsigned long long)(c->legacy_bytes + nbytes),
                              (unsigned long long)size);
    c->legacy_bytes += nbytes;
    pt_storage *s = pti_storage_new((pt_device){PT_DEVICE_CPU, 0}, (size_t)nbytes);
    if (s && nbytes)
        memset(s->data, 0, (size_t)nbytes);
    return s;
}

static bool valid_key(const char *key, size_t len)
{
    if (len == 0 || len > MAX_STORAGE_KEY)
        return false;
    for (size_t i = 0; i < len; i++)
        if (key[i] == '/' || key[i] == '\0' || (unsigned char)key[i] < 0x20)
            return false;
    return true;
}

/* A storage for a persistent id's fields, from the cache or made now. New reference. */
static pt_tensor *storage_for(load_ctx *c, const char *key, pt_dtype dt, int64_t numel)
{
    cached_storage *e = cache_find(c, key);
    if (e) {
        if (e->dtype != dt || e->numel != numel)
            return pti_error_null(PT_ERR_FORMAT,
                                  "%s: storage '%s' is declared twice with "
                                  "different types or sizes (%s[%lld] and %s[%lld])",
                                  c->what, key, pt_dtype_name(e->dtype), (long long)e->numel,
                                  pt_dtype_name(dt), (long long)numel);
        return pt_retain(e->t);
    }
    size_t elsize = pti_dtypes[dt].size;
    if (numel < 0 || (uint64_t)numel > UINT64_MAX / elsize)
        return pti_error_null(PT_ERR_FORMAT, "%s: storage '%s' declares %lld elements", c->what,
                              key, (long long)numel);
    uint64_t nbytes = (uint64_t)numel * elsize;
    if (nbytes > (uint64_t)PTRDIFF_MAX)
        return pti_error_null(PT_ERR_FORMAT, "%s: storage '%s' of %llu bytes is too large", c->what,
                              key, (unsigned long long)nbytes);
    pt_storage *s = c->legacy ? legacy_storage(c, nbytes) : zip_storage(c, key, nbytes, elsize);
    if (!s)
        return NULL;
    e = cache_add(c, key, dt, numel, s);
    pti_storage_release(s);
    return e ? pt_retain(e->t) : NULL;
}

/* A legacy view id (view_key, offset, size) over the root storage t. New reference. */
static pt_tensor *legacy_view(load_ctx *c, pt_tensor *root, const pt_value *view)
{
    int64_t off, size;
    const char *vkey = pt_value_as_str(pt_value_item_ref(view, 0), NULL);
    if (pt_value_len(view) != 3 || !vkey ||
        pt_value_as_int(pt_value_item_ref(view, 1), &off) != PT_OK ||
        pt_value_as_int(pt_value_item_ref(view, 2), &size) != PT_OK || off < 0 || size < 0 ||
        off > pt_numel(root) || size > pt_numel(root) - off)
        return pti_error_null(PT_ERR_FORMAT, "%s: malformed storage view in a persistent id",
                              c->what);
    int64_t one = 1;
    return pt_as_strided(root, 1, &size, &one, off);
}

static pt_value *persistent_load(void *ctx, const pt_value *pid)
{
    load_ctx *c = ctx;
    int64_t n = pt_value_len(pid);
    const char *tag = pt_value_as_str(pt_value_item_ref(pid, 0), NULL);
    if (!pt_value_is(pid, PT_VALUE_TUPLE) || n < 1 || !tag)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: persistent id is not a tuple starting with a "
                              "str",
                              c->what);
    if (strcmp(tag, "storage") != 0)
        return pti_error_null(PT_ERR_UNSUPPORTED,
                              "%s: persistent id of kind '%.40s' (only "
                              "tensor storages are loaded; 'module' ids come from a model "
                              "pickled whole)",
                              c->what, tag);
    size_t keylen = 0;
    int64_t numel;
    const char *cls = pti_pickle_global_name(pt_value_item_ref(pid, 1));
    const char *key = pt_value_as_str(pt_value_item_ref(pid, 2), &keylen);
    if (n != (c->legacy ? 6 : 5) || !cls || !key ||
        !pt_value_is(pt_value_item_ref(pid, 3), PT_VALUE_STR) ||
        pt_value_as_int(pt_value_item_ref(pid, 4), &numel) != PT_OK)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: malformed storage id (expected ('storage', "
                              "<storage type>, key, location, numel%s))",
                              c->what, c->legacy ? ", view" : "");
    if (!valid_key(key, keylen))
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: storage key of %zu bytes is not a valid "
                              "record name",
                              c->what, keylen);
    pt_dtype dt;
    if (!storage_dtype(c->what, cls, &dt))
        return NULL;
    pt_tensor *t = storage_for(c, key, dt, numel);
    const pt_value *view = c->legacy ? pt_value_item_ref(pid, 5) : NULL;
    if (t && view && !pt_value_is(view, PT_VALUE_NONE)) {
        pt_tensor *v = legacy_view(c, t, view);
        pt_release(t);
        t = v;
    }
    if (!t)
        return NULL;
    pt_value *out = pt_value_tensor(t);
    pt_release(t);
    return out;
}

/* ---- zip archives ------------------------------------------------------------------------------
 */

/* The bytes of a small text record under the root ("byteorder", "version") into buf; false
 * when absent (no error) or unreadable (error set, *err true). */
static bool small_record(load_ctx *c, const char *name, char *buf, size_t cap, bool *err)
{
    char full[MAX_STORAGE_KEY + 32];
    snprintf(full, sizeof full, "%s%s", c->root, name);
    const pti_zip_entry *e = pti_zip_find(c->zip, full);
    if (!e)
        return false;
    size_t len = 0;
    uint8_t *data = pti_zip_read(c->zip, e, cap - 1, &len);
    if (!data) {
        *err = true;
        return false;
    }
    memcpy(buf, data, len);
    buf[len] = '\0';
    free(data);
    return true;
}

static bool check_zip_records(load_ctx *c)
{
    char buf[MAX_SMALL_RECORD + 1];
    bool err = false;
    if (small_record(c, "byteorder", buf, sizeof buf, &err)) {
        if (strcmp(buf, "big") == 0)
            return pti_error(PT_ERR_UNSUPPORTED,
                             "%s: big-endian checkpoint (byteorder 'big'); "
                             "only little-endian files are read",
                             c->what),
                   false;
        if (strcmp(buf, "little") != 0)
            return pti_error(PT_ERR_FORMAT,
                             "%s: byteorder record holds '%.20s', expected "
                             "'little' or 'big'",
                             c->what, buf),
                   false;
    }
    if (!err && small_record(c, "version", buf, sizeof buf, &err)) {
        char *end;
        long v = strtol(buf, &end, 10);
        if (end == buf || (*end && strcmp(end, "\n") != 0) || v < 1 || v > 10)
            return pti_error(PT_ERR_FORMAT,
                             "%s: version record '%.20s' is not a supported "
                             "format version (1..10)",
                             c->what, buf),
                   false;
    }
    return !err;
}

/* Sets c->root to "<folder>/" from the first entry's name. */
static bool find_root(load_ctx *c)
{
    if (pti_zip_count(c->zip) == 0)
        return pti_error(PT_ERR_FORMAT, "%s: the zip archive is empty (not a torch.save file)",
                         c->what),
               false;
    const char *first = pti_zip_entry_at(c->zip, 0)->name;
    const char *slash = strchr(first, '/');
    if (!slash || slash == first || (size_t)(slash - first) > MAX_STORAGE_KEY)
        return pti_error(PT_ERR_FORMAT,
                         "%s: zip entries are not under one folder (not a "
                         "torch.save archive)",
                         c->what),
               false;
    memcpy(c->root, first, (size_t)(slash - first) + 1);
    c->root[slash - first + 1] = '\0';
    return true;
}

static pt_value *load_zip(load_ctx *c, pti_unpickle_opts *po)
{
    c->zip = pti_zip_open(c->map);
    if (!c->zip || !find_root(c))
        return NULL;
    char name[MAX_STORAGE_KEY + 32];
    snprintf(name, sizeof name, "%sdata.pkl", c->root);
    const pti_zip_entry *pkl = pti_zip_find(c->zip, name);
    if (!pkl) {
        snprintf(name, sizeof name, "%sconstants.pkl", c->root);
        if (pti_zip_find(c->zip, name))
            return pti_error_null(PT_ERR_UNSUPPORTED,
                                  "%s: a TorchScript archive "
                                  "(torch.jit.save); PromeTorch reads torch.save files",
                                  c->what);
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: the archive has no %sdata.pkl record (not a "
                              "torch.save file)",
                              c->what, c->root);
    }
    if (!check_zip_records(c))
        return NULL;
    size_t len = 0;
    uint8_t *bytes = pti_zip_read(c->zip, pkl, MAX_PICKLE_BYTES, &len);
    if (!bytes)
        return NULL;
    pt_value *v = pti_unpickle(bytes, len, po, NULL);
    free(bytes);
    return v;
}

/* ---- legacy files ------------------------------------------------------------------------------
 */

/* One pickle at *pos that must be present; advances *pos. */
static pt_value *next_pickle(load_ctx *c, size_t *pos, const pti_unpickle_opts *po)
{
    const uint8_t *data = pti_file_map_data(c->map);
    size_t size = pti_file_map_size(c->map), used = 0;
    if (*pos >= size)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: legacy file ends after %zu bytes, before "
                              "all its pickles",
                              c->what, size);
    pt_value *v = pti_unpickle(data + *pos, size - *pos, po, &used);
    *pos += used;
    return v;
}

static bool check_legacy_header(load_ctx *c, size_t *pos, const pti_unpickle_opts *plain)
{
    int64_t proto = 0;
    bool little = false;
    pt_value *v = next_pickle(c, pos, plain);
    bool ok = v && pt_value_as_int(v, &proto) == PT_OK && proto == 1001;
    pt_value_free(v);
    if (!ok)
        return v     ? pti_error(PT_ERR_FORMAT, "%s: legacy protocol version is not 1001", c->what),
               false : false;
    v = next_pickle(c, pos, plain);
    if (!v)
        return false;
    pt_value *le = pt_value_is(v, PT_VALUE_DICT) ? pt_value_get_str_ref(v, "little_endian") : NULL;
    ok = le && pt_value_as_bool(le, &little) == PT_OK;
    pt_value_free(v);
    if (!ok)
        return pti_error(PT_ERR_FORMAT, "%s: legacy sys_info has no little_endian flag", c->what),
               false;
    if (!little)
        return pti_error(PT_ERR_UNSUPPORTED, "%s: big-endian legacy checkpoint", c->what), false;
    return true;
}

static bool read_legacy_storage(load_ctx *c, size_t *pos, const char *key)
{
    const uint8_t *data = pti_file_map_data(c->map);
    size_t size = pti_file_map_size(c->map);
    cached_storage *e = cache_find(c, key);
    if (!e)
        return pti_error(PT_ERR_FORMAT, "%s: storage '%.64s' has data but no tensor uses it",
                         c->what, key),
               false;
    if (e->filled)
        return pti_error(PT_ERR_FORMAT, "%s: storage '%.64s' is listed twice", c->what, key), false;
    if (size - *pos < 8)
        return pti_error(PT_ERR_FORMAT, "%s: truncated before the size of storage '%.64s'", c->what,
                         key),
               false;
    uint64_t count = 0;
    for (int i = 7; i >= 0; i--)
        count = count << 8 | data[*pos + (size_t)i];
    *pos += 8;
    if (count != (uint64_t)e->numel)
        return pti_error(PT_ERR_FORMAT,
                         "%s: storage '%.64s' holds %llu elements, the pickle "
                         "declares %lld",
                         c->what, key, (unsigned long long)count, (long long)e->numel),
               false;
    size_t nbytes = (size_t)e->numel * pti_dtypes[e->dtype].size;
    if (size - *pos < nbytes)
        return pti_error(PT_ERR_FORMAT, "%s: storage '%.64s' is truncated (%zu of %zu bytes)",
                         c->what, key, size - *pos, nbytes),
               false;
    memcpy(e->t->storage->data, data + *pos, nbytes);
    *pos += nbytes;
    e->filled = true;
    return true;
}

static bool read_legacy_storages(load_ctx *c, size_t *pos, const pti_unpickle_opts *plain)
{
    pt_value *keys = next_pickle(c, pos, plain);
    if (!keys)
        return false;
    bool ok = pt_value_is(keys, PT_VALUE_LIST);
    if (!ok)
        pti_error(PT_ERR_FORMAT, "%s: the legacy storage key list is a %s", c->what,
                  pt_value_kind_name(pt_value_kind_of(keys)));
    for (int64_t i = 0; ok && i < pt_value_len(keys); i++) {
        const char *key = pt_value_as_str(pt_value_item_ref(keys, i), NULL);
        ok = key ? read_legacy_storage(c, pos, key)
                 : (pti_error(PT_ERR_FORMAT, "%s: a legacy storage key is not a str", c->what),
                    false);
    }
    pt_value_free(keys);
    for (int64_t i = 0; ok && i < c->ncache; i++) {
        if (!c->cache[i].filled) {
            pti_error(PT_ERR_FORMAT, "%s: storage '%.64s' is used but its data is missing", c->what,
                      c->cache[i].key);
            ok = false;
        }
    }
    return ok;
}

static pt_value *load_legacy(load_ctx *c, pti_unpickle_opts *po)
{
    size_t size = pti_file_map_size(c->map), pos = sizeof legacy_magic;
    if (size < sizeof legacy_magic ||
        memcmp(pti_file_map_data(c->map), legacy_magic, sizeof legacy_magic) != 0)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: not a legacy torch.save file (no magic number, "
                              "or a wrong one: corrupt file?)",
                              c->what);
    c->legacy = true;
    pti_unpickle_opts plain = *po;
    plain.persistent_load = NULL;
    if (!check_legacy_header(c, &pos, &plain))
        return NULL;
    pt_value *v = next_pickle(c, &pos, po);
    if (v && !read_legacy_storages(c, &pos, &plain)) {
        pt_value_free(v);
        return NULL;
    }
    return v;
}

/* ---- format detection and the entry points ----------------------------------------------------
 */

static pt_file_format detect_format(const uint8_t *d, size_t n)
{
    if (n >= 4 && memcmp(d, "PK\x03\x04", 4) == 0)
        return PT_FORMAT_PT_ZIP;
    if (n >= sizeof legacy_magic && memcmp(d, legacy_magic, sizeof legacy_magic) == 0)
        return PT_FORMAT_PT_LEGACY;
    /* A pickled 10-byte int followed by more pickles: a legacy file whose magic number is
     * wrong. The legacy loader refuses it, as torch.load does (read as a plain pickle it
     * would load as that int). A lone pickled int ends at its STOP and stays a pickle. */
    if (n > sizeof legacy_magic && memcmp(d, legacy_magic, 4) == 0 &&
        d[sizeof legacy_magic - 1] == legacy_magic[sizeof legacy_magic - 1])
        return PT_FORMAT_PT_LEGACY;
    if (n >= 9 && d[8] == '{')
        return PT_FORMAT_SAFETENSORS;
    if (n >= 2 && d[0] == 0x80 && d[1] >= 2 && d[1] <= 5)
        return PT_FORMAT_PICKLE;
    return PT_FORMAT_AUTO;
}

static pt_value *unknown_format(const char *what, const uint8_t *d, size_t n)
{
    if (n >= 4 && memcmp(d, "GGUF", 4) == 0)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: a GGUF model, not a checkpoint (open it with "
                              "pt_gguf_open or pt_llm_load)",
                              what);
    if (n >= 262 && memcmp(d + 257, "ustar", 5) == 0)
        return pti_error_null(PT_ERR_UNSUPPORTED,
                              "%s: a tar-format checkpoint (PyTorch before "
                              "0.4); re-save it with a current torch.save",
                              what);
    if (n == 0)
        return pti_error_null(PT_ERR_FORMAT, "%s: the file is empty", what);
    return pti_error_null(PT_ERR_FORMAT,
                          "%s: not a PyTorch checkpoint or safetensors file "
                          "(unknown first bytes)",
                          what);
}

static pt_value *load_map(pti_file_map *map, const pt_load_opts *opts)
{
    pt_load_opts o = opts ? *opts : (pt_load_opts){0};
    load_ctx c = {
        .map = map, .what = pti_file_map_name(map), .copy = o.copy || !pti_file_map_is_owned(map)};
    pti_unpickle_opts po = {.what = c.what,
                            .persistent_load = persistent_load,
                            .ctx = &c,
                            .allow_objects = o.allow_objects};
    const uint8_t *d = pti_file_map_data(map);
    size_t n = pti_file_map_size(map);
    pt_file_format fmt = o.format == PT_FORMAT_AUTO ? detect_format(d, n) : o.format;
    pt_value *v = NULL;
    switch (fmt) {
    case PT_FORMAT_PT_ZIP: v = load_zip(&c, &po); break;
    case PT_FORMAT_PT_LEGACY: v = load_legacy(&c, &po); break;
    case PT_FORMAT_SAFETENSORS: v = pti_safetensors_load_map(map, NULL, c.copy); break;
    case PT_FORMAT_PICKLE:
        po.persistent_load = NULL;
        v = n ? pti_unpickle(d, n, &po, NULL) : unknown_format(c.what, d, n);
        break;
    default:
        v = (unsigned)fmt > PT_FORMAT_PICKLE
                ? pti_error_null(PT_ERR_INVALID_ARG, "pt_load: unknown format %d", (int)fmt)
                : unknown_format(c.what, d, n);
    }
    ctx_free(&c);
    return v;
}

pt_value *pt_load_ex(const char *path, const pt_load_opts *opts)
{
    pti_file_map *map = pti_file_map_open(path);
    if (!map)
        return NULL;
    pt_value *v = load_map(map, opts);
    pti_file_map_release(map);
    return v;
}

pt_value *pt_load(const char *path)
{
    return pt_load_ex(path, NULL);
}

pt_value *pt_load_buffer(const void *data, size_t len, const char *name, const pt_load_opts *opts)
{
    pti_file_map *map = pti_file_map_borrow(data, len, name ? name : "<buffer>");
    if (!map)
        return NULL;
    pt_value *v = load_map(map, opts);
    pti_file_map_release(map);
    return v;
}

/* ---- every tensor under its dotted name ---------------------------------------------------------
 */

typedef struct flat_walk {
    pt_value *out;
    char name[4096];
    bool ok;
} flat_walk;

static void flatten(flat_walk *w, const pt_value *v, size_t len, int depth);

/* Appends "<sep><part>" to w->name at len, returning the new length (0 when too long). */
static size_t name_push(flat_walk *w, size_t len, const char *part)
{
    size_t plen = strlen(part), sep = len ? 1 : 0;
    if (len + sep + plen >= sizeof w->name) {
        w->ok = false;
        pti_error(PT_ERR_FORMAT, "pt_load_tensors: a tensor name is longer than %zu bytes",
                  sizeof w->name);
        return 0;
    }
    if (sep)
        w->name[len] = '.';
    memcpy(w->name + len + sep, part, plen + 1);
    return len + sep + plen;
}

static void flatten_dict_entries(flat_walk *w, const pt_value *d, size_t len, int depth)
{
    for (int64_t i = 0; w->ok && i < pt_value_len(d); i++) {
        const pt_value *k = pt_value_key_ref(d, i);
        char num[32];
        const char *part = pt_value_as_str(k, NULL);
        int64_t ik;
        if (!part && pt_value_as_int(k, &ik) == PT_OK) {
            snprintf(num, sizeof num, "%lld", (long long)ik);
            part = num;
        }
        if (!part || strcmp(part, "__class__") == 0)
            continue;
        size_t n = name_push(w, len, part);
        if (w->ok)
            flatten(w, pt_value_item_ref(d, i), n, depth + 1);
        w->name[len] = '\0';
    }
}

/* A module pickled whole, as a stub dict: its state_dict names come from _parameters,
 * persistent _buffers and _modules, in that order. */
static bool flatten_module(flat_walk *w, const pt_value *d, size_t len, int depth)
{
    const pt_value *params = pt_value_get_str_ref(d, "_parameters");
    const pt_value *buffers = pt_value_get_str_ref(d, "_buffers");
    const pt_value *mods = pt_value_get_str_ref(d, "_modules");
    pt_clear_error();
    if (!params || !mods)
        return false;
    const pt_value *skip = pt_value_get_str_ref(d, "_non_persistent_buffers_set");
    pt_clear_error();
    flatten_dict_entries(w, params, len, depth);
    for (int64_t i = 0; buffers && w->ok && i < pt_value_len(buffers); i++) {
        bool transient = false;
        for (int64_t j = 0; skip && j < pt_value_len(skip); j++)
            transient |= pt_value_equal(pt_value_item_ref(skip, j), pt_value_key_ref(buffers, i));
        const char *part = pt_value_as_str(pt_value_key_ref(buffers, i), NULL);
        if (transient || !part)
            continue;
        size_t n = name_push(w, len, part);
        if (w->ok)
            flatten(w, pt_value_item_ref(buffers, i), n, depth + 1);
        w->name[len] = '\0';
    }
    if (w->ok)
        flatten_dict_entries(w, mods, len, depth);
    return true;
}

static void flatten(flat_walk *w, const pt_value *v, size_t len, int depth)
{
    if (depth > PTI_PICKLE_MAX_DEPTH) {
        w->ok = false;
        pti_error(PT_ERR_FORMAT, "pt_load_tensors: nesting deeper than %d", PTI_PICKLE_MAX_DEPTH);
        return;
    }
    switch (pt_value_kind_of(v)) {
    case PT_VALUE_TENSOR:
        if (pt_value_dict_set_str(w->out, w->name, pt_value_retain((pt_value *)v)) != PT_OK)
            w->ok = false;
        return;
    case PT_VALUE_DICT:
        if (!flatten_module(w, v, len, depth))
            flatten_dict_entries(w, v, len, depth);
        return;
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE:
        for (int64_t i = 0; w->ok && i < pt_value_len(v); i++) {
            char num[32];
            snprintf(num, sizeof num, "%lld", (long long)i);
            size_t n = name_push(w, len, num);
            if (w->ok)
                flatten(w, pt_value_item_ref(v, i), n, depth + 1);
            w->name[len] = '\0';
        }
        return;
    default: return;
    }
}

pt_value *pt_load_tensors(const char *path)
{
    pt_load_opts o = {.allow_objects = true};
    pt_value *tree = pt_load_ex(path, &o);
    if (!tree)
        return NULL;
    flat_walk *w = pti_calloc(1, sizeof *w);
    pt_value *out = w ? pt_value_dict() : NULL;
    if (!out) {
        free(w);
        pt_value_free(tree);
        return pti_error_null(PT_ERR_OOM, "pt_load_tensors: out of memory");
    }
    w->out = out;
    w->ok = true;
    flatten(w, tree, 0, 0);
    bool ok = w->ok;
    free(w);
    pt_value_free(tree);
    if (!ok) {
        pt_value_free(out);
        return NULL;
    }
    return out;
}
