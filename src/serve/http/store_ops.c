/* Reading the model store: listing (/api/tags, `promeserve list`), showing one model
 * (/api/show, `promeserve show`), what a GGUF says about itself, and the formatting Ollama
 * uses for numbers, sizes and times (see store_ops.h). */
#include "store_ops.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../core/internal.h"
#include "../llm/llm_model.h"
#include "../llm/model_store.h"
#include "prometorch/gguf.h"
#include "sha256.h"

#define MANIFEST_MAX (1 << 20)
#define CONFIG_MAX (1 << 20)
#define TEXT_LAYER_MAX (16 << 20)

/* A growing text buffer; on allocation failure it keeps what it had (the answer is then
 * shorter, never invalid). */
typedef struct strbuf {
    char *data;
    size_t len, cap;
} strbuf;

static void strbuf_printf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void strbuf_printf(strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0)
        return;
    if (sb->len + (size_t)need + 1 > sb->cap) {
        size_t cap = (sb->len + (size_t)need + 1) * 2;
        char *grown = pti_realloc(sb->data, cap);
        if (!grown)
            return;
        sb->data = grown;
        sb->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, sb->cap - sb->len, fmt, ap);
    va_end(ap);
    sb->len += (size_t)need;
}

static void strbuf_free(strbuf *sb)
{
    free(sb->data);
    *sb = (strbuf){0};
}

/* ---- warnings ----------------------------------------------------------------------------- */

static _Thread_local pti_store_warn_fn warn_fn;
static _Thread_local void *warn_user;

void pti_store_set_warn(pti_store_warn_fn fn, void *user)
{
    warn_fn = fn;
    warn_user = user;
}

void pti_store_warn(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (warn_fn)
        warn_fn(warn_user, line);
    else
        fprintf(stderr, "model store: warning: %s\n", line);
}

/* ---- formatting ---------------------------------------------------------------------------- */

void pti_store_human_number(uint64_t n, char *buf, size_t cap)
{
    double v = (double)n;
    if (n >= 1000000000ull) {
        v /= 1e9;
        snprintf(buf, cap, v == floor(v) ? "%.0fB" : "%.1fB", v);
    } else if (n >= 1000000ull) {
        v /= 1e6;
        snprintf(buf, cap, v == floor(v) ? "%.0fM" : "%.2fM", v);
    } else if (n >= 1000ull) {
        snprintf(buf, cap, "%.0fK", v / 1e3);
    } else {
        snprintf(buf, cap, "%llu", (unsigned long long)n);
    }
}

void pti_store_human_bytes(int64_t n, char *buf, size_t cap)
{
    static const struct {
        double scale;
        const char *unit;
    } units[] = {{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "KB"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if ((double)n < units[i].scale)
            continue;
        double v = (double)n / units[i].scale;
        if (v >= 10 || v == trunc(v))
            snprintf(buf, cap, "%d %s", (int)v, units[i].unit);
        else
            snprintf(buf, cap, "%.1f %s", v, units[i].unit);
        return;
    }
    snprintf(buf, cap, "%lld B", (long long)n);
}

/* Ollama's humanDuration of a positive number of seconds. */
static void human_duration(int64_t s, char *buf, size_t cap)
{
    if (s < 1) {
        snprintf(buf, cap, "Less than a second");
    } else if (s < 60) {
        snprintf(buf, cap, s == 1 ? "1 second" : "%lld seconds", (long long)s);
    } else if (s / 60 < 60) {
        int64_t m = s / 60;
        snprintf(buf, cap, m == 1 ? "About a minute" : "%lld minutes", (long long)m);
    } else {
        int64_t h = (int64_t)llround((double)s / 3600.0);
        if (h == 1)
            snprintf(buf, cap, "About an hour");
        else if (h < 48)
            snprintf(buf, cap, "%lld hours", (long long)h);
        else if (h < 24 * 7 * 2)
            snprintf(buf, cap, "%lld days", (long long)(h / 24));
        else if (h < 24 * 30 * 2)
            snprintf(buf, cap, "%lld weeks", (long long)(h / 24 / 7));
        else if (h < 24 * 365 * 2)
            snprintf(buf, cap, "%lld months", (long long)(h / 24 / 30));
        else
            snprintf(buf, cap, "%lld years", (long long)(s / 3600 / 24 / 365));
    }
}

void pti_store_human_time(int64_t t_s, int64_t now_s, char *buf, size_t cap)
{
    char d[64];
    if (t_s > now_s) {
        human_duration(t_s - now_s, d, sizeof d);
        snprintf(buf, cap, "%s from now", d);
    } else {
        human_duration(now_s - t_s, d, sizeof d);
        snprintf(buf, cap, "%s ago", d);
    }
}

void pti_store_rfc3339(int64_t sec, long nsec, char *buf, size_t cap)
{
    time_t t = (time_t)sec;
    struct tm tm;
    localtime_r(&t, &tm);
    char date[40], frac[16] = "", zone[16];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    if (nsec > 0 && nsec < 1000000000L) {
        snprintf(frac, sizeof frac, ".%09ld", nsec);
        size_t n = strlen(frac);
        while (n > 1 && frac[n - 1] == '0') /* frac[0] is the '.'; keeps gcc's bounds in view */
            frac[--n] = '\0';
    }
    int off = (int)(tm.tm_gmtoff % 86400);
    if (off == 0)
        snprintf(zone, sizeof zone, "Z");
    else
        snprintf(zone, sizeof zone, "%c%02d:%02d", off < 0 ? '-' : '+', abs(off) / 3600,
                 abs(off) % 3600 / 60);
    snprintf(buf, cap, "%s%s%s", date, frac, zone);
}

bool pti_store_digest_valid(const char *d)
{
    return d && strncmp(d, "sha256:", 7) == 0 && strlen(d) == 7 + 64 &&
           strspn(d + 7, "0123456789abcdef") == 64;
}

/* ---- files ----------------------------------------------------------------------------------- */

char *pti_store_read_file(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        pti_error(PT_ERR_IO, "model store: cannot open %s", path);
        return NULL;
    }
    char *buf = pti_malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
    bool err = ferror(f);
    fclose(f);
    if (!buf)
        return NULL;
    if (err || n > max) {
        if (err)
            pti_error(PT_ERR_IO, "model store: cannot read %s", path);
        else
            pti_error(PT_ERR_FORMAT, "model store: %s is larger than %zu bytes", path, max);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

bool pti_store_blob_path(const char *root, const char *digest, char *buf, size_t cap)
{
    int k = snprintf(buf, cap, "%s/blobs/sha256-%s", root, digest + 7);
    return k > 0 && (size_t)k < cap;
}

/* A layer or config descriptor: mediaType (a string), a valid digest, a size >= 0. */
static bool descriptor_valid(const cJSON *d)
{
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(d, "size");
    return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(d, "mediaType")) &&
           pti_store_digest_valid(
               cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "digest"))) &&
           (!size || (cJSON_IsNumber(size) && size->valuedouble >= 0));
}

cJSON *pti_store_read_manifest(const char *path, char hex[65])
{
    size_t len;
    char *text = pti_store_read_file(path, MANIFEST_MAX, &len);
    if (!text)
        return NULL;
    if (hex) {
        uint8_t d[32];
        pti_sha256(text, len, d);
        pti_sha256_hex(d, hex);
    }
    cJSON *man = cJSON_ParseWithLength(text, len);
    free(text);
    if (!man) {
        pti_error(PT_ERR_FORMAT, "model store: %s is not JSON", path);
        return NULL;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(man, "schemaVersion");
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(man, "layers");
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(man, "config");
    bool ok = cJSON_IsNumber(ver) && ver->valuedouble == 2 && cJSON_IsArray(layers) &&
              (!config || descriptor_valid(config));
    const cJSON *layer;
    cJSON_ArrayForEach(layer, layers) ok = ok && descriptor_valid(layer);
    if (!ok) {
        pti_error(PT_ERR_FORMAT, "model store: %s is not a version 2 manifest with valid layers",
                  path);
        cJSON_Delete(man);
        return NULL;
    }
    return man;
}

/* Reads a text layer (template, system, license) into a new string; NULL on error. */
static char *read_layer_text(const char *root, const cJSON *layer)
{
    char path[4096];
    const char *digest = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(layer, "digest"));
    if (!pti_store_blob_path(root, digest, path, sizeof path)) {
        pti_error(PT_ERR_INVALID_ARG, "model store: path too long");
        return NULL;
    }
    return pti_store_read_file(path, TEXT_LAYER_MAX, NULL);
}

static const char *layer_type(const cJSON *layer)
{
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(layer, "mediaType"));
    size_t n = strlen(PTI_MEDIA_PREFIX);
    return t && strncmp(t, PTI_MEDIA_PREFIX, n) == 0 ? t + n : "";
}

static const cJSON *find_layer(const cJSON *man, const char *kind)
{
    const cJSON *layer;
    cJSON_ArrayForEach(layer, cJSON_GetObjectItemCaseSensitive(man, "layers"))
    {
        if (strcmp(layer_type(layer), kind) == 0)
            return layer;
    }
    return NULL;
}

/* ---- walking the manifests ----------------------------------------------------------------- */

/* The entries of dir that are directories (want_dir) or regular files, without dot files. */
static int list_dir(const char *dir, bool want_dir, char ***out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        struct stat st;
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p || stat(p, &st) != 0)
            continue;
        if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = pti_realloc(*out, (size_t)cap * sizeof **out);
            if (!grown)
                break;
            *out = grown;
        }
        (*out)[n] = pti_strdup(e->d_name);
        if ((*out)[n])
            n++;
    }
    closedir(d);
    return n;
}

static void free_list(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Visits the directories (or, at the last level, files) `depth` levels below dir, with the
 * parts of the path so far. */
static bool walk_level(const char *dir, int level, const char *parts[4], pti_store_visit visit,
                       void *user)
{
    char **names;
    int n = list_dir(dir, level < 3, &names);
    bool go_on = true;
    for (int i = 0; i < n && go_on; i++) {
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", dir, names[i]) >= (int)sizeof p)
            continue;
        parts[level] = names[i];
        if (level < 3) {
            go_on = walk_level(p, level + 1, parts, visit, user);
            continue;
        }
        char full[1500], shown[1500];
        pti_model_name name;
        snprintf(full, sizeof full, "%s/%s/%s:%s", parts[0], parts[1], parts[2], parts[3]);
        if (!pti_model_name_parse(full, &name)) {
            pti_store_warn("skipping %s: %s", p, pt_last_error());
            continue;
        }
        pti_model_name_format(&name, shown, sizeof shown);
        go_on = visit(shown, p, user);
    }
    free_list(names, n);
    return go_on;
}

void pti_store_walk(const char *root, pti_store_visit visit, void *user)
{
    char dir[4096];
    const char *parts[4];
    if (root && *root && snprintf(dir, sizeof dir, "%s/manifests", root) < (int)sizeof dir)
        walk_level(dir, 0, parts, visit, user);
}

/* ---- GGUF facts ------------------------------------------------------------------------------ */

static int64_t gguf_int(const pt_gguf *g, const char *key, int64_t dflt)
{
    int64_t i = pt_gguf_find_key(g, key), v;
    return i >= 0 && pt_gguf_get_int(g, i, &v) == PT_OK ? v : dflt;
}

static const char *gguf_str(const pt_gguf *g, const char *key)
{
    int64_t i = pt_gguf_find_key(g, key);
    if (i < 0 || pt_gguf_kv_type(g, i) != PT_GGUF_STRING)
        return NULL;
    return pt_gguf_get_str(g, i, NULL);
}

static void facts_from_gguf(const pt_gguf *g, pti_gguf_facts *out)
{
    memset(out, 0, sizeof *out);
    const char *arch = gguf_str(g, "general.architecture");
    snprintf(out->family, sizeof out->family, "%s", arch ? arch : "");
    int64_t count = gguf_int(g, "general.parameter_count", -1);
    if (count < 0) {
        count = 0;
        for (int64_t t = 0; t < pt_gguf_tensor_count(g); t++)
            count += pt_gguf_tensor_numel(g, t);
    }
    out->parameter_count = (uint64_t)count;
    pti_store_human_number(out->parameter_count, out->parameter_size, sizeof out->parameter_size);
    snprintf(out->quantization, sizeof out->quantization, "%s",
             pti_llm_file_type_name(gguf_int(g, "general.file_type", -1)));
    char key[160];
    snprintf(key, sizeof key, "%s.context_length", out->family);
    out->context_length = gguf_int(g, key, 0);
    snprintf(key, sizeof key, "%s.embedding_length", out->family);
    out->embedding_length = gguf_int(g, key, 0);
}

bool pti_store_gguf_facts(const char *path, pti_gguf_facts *out)
{
    pt_gguf *g = pt_gguf_open(path);
    if (!g)
        return false;
    facts_from_gguf(g, out);
    pt_gguf_close(g);
    return true;
}

/* A float32 as the double whose shortest decimal form is the float's (1e-06, not
 * 9.9999999747524271e-07), as Go marshals a float32. */
static double float32_as_double(float f)
{
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if ((float)strtod(buf, NULL) == f)
            break;
    }
    return strtod(buf, NULL);
}

static cJSON *gguf_array_json(const pt_gguf *g, int64_t i)
{
    cJSON *arr = cJSON_CreateArray();
    pt_gguf_type t = pt_gguf_arr_type(g, i);
    int64_t n = pt_gguf_arr_count(g, i);
    for (int64_t j = 0; arr && j < n; j++) {
        cJSON *item = NULL;
        int64_t iv;
        double dv;
        if (t == PT_GGUF_STRING) {
            const char *s = pt_gguf_arr_str(g, i, j, NULL);
            item = cJSON_CreateString(s ? s : "");
        } else if (t == PT_GGUF_BOOL) {
            item = cJSON_CreateBool(pt_gguf_arr_int(g, i, j, &iv) == PT_OK && iv);
        } else if (t == PT_GGUF_FLOAT32 || t == PT_GGUF_FLOAT64) {
            pt_gguf_arr_float(g, i, j, &dv);
            item = cJSON_CreateNumber(t == PT_GGUF_FLOAT32 ? float32_as_double((float)dv) : dv);
        } else {
            item = cJSON_CreateNumber(pt_gguf_arr_int(g, i, j, &iv) == PT_OK ? (double)iv : 0);
        }
        cJSON_AddItemToArray(arr, item);
    }
    return arr;
}

static cJSON *gguf_value_json(const pt_gguf *g, int64_t i, bool verbose)
{
    pt_gguf_type t = pt_gguf_kv_type(g, i);
    int64_t iv;
    double dv;
    bool bv;
    switch (t) {
    case PT_GGUF_STRING: {
        const char *s = pt_gguf_get_str(g, i, NULL);
        return cJSON_CreateString(s ? s : "");
    }
    case PT_GGUF_BOOL: return cJSON_CreateBool(pt_gguf_get_bool(g, i, &bv) == PT_OK && bv);
    case PT_GGUF_FLOAT32:
        pt_gguf_get_float(g, i, &dv);
        return cJSON_CreateNumber(float32_as_double((float)dv));
    case PT_GGUF_FLOAT64: pt_gguf_get_float(g, i, &dv); return cJSON_CreateNumber(dv);
    case PT_GGUF_ARRAY:
        /* Ollama reads arrays only when verbose; otherwise a non-empty one marshals as null */
        if (!verbose && pt_gguf_arr_count(g, i) > 0)
            return cJSON_CreateNull();
        return gguf_array_json(g, i);
    default: return cJSON_CreateNumber(pt_gguf_get_int(g, i, &iv) == PT_OK ? (double)iv : 0);
    }
}

static const pt_gguf *sort_gguf;
static int compare_keys(const void *a, const void *b)
{
    return strcmp(pt_gguf_kv_key(sort_gguf, *(const int64_t *)a, NULL),
                  pt_gguf_kv_key(sort_gguf, *(const int64_t *)b, NULL));
}

/* model_info: every key but general.name and tokenizer.chat_template (as Ollama), sorted as
 * Go marshals a map, plus general.parameter_count when the file lacks it. */
static cJSON *gguf_model_info(const pt_gguf *g, const pti_gguf_facts *facts, bool verbose)
{
    int64_t n = pt_gguf_kv_count(g);
    int64_t *order = pti_malloc((size_t)(n + 1) * sizeof *order);
    cJSON *info = cJSON_CreateObject();
    if (!order || !info) {
        free(order);
        cJSON_Delete(info);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&sort_lock); /* qsort has no context pointer */
    sort_gguf = g;
    qsort(order, (size_t)n, sizeof *order, compare_keys);
    pthread_mutex_unlock(&sort_lock);
    bool has_count = pt_gguf_find_key(g, "general.parameter_count") >= 0;
    for (int64_t k = 0; k < n; k++) {
        const char *key = pt_gguf_kv_key(g, order[k], NULL);
        if (!strcmp(key, "general.name") || !strcmp(key, "tokenizer.chat_template"))
            continue;
        if (!has_count && strcmp(key, "general.parameter_count") > 0) {
            cJSON_AddNumberToObject(info, "general.parameter_count",
                                    (double)facts->parameter_count);
            has_count = true;
        }
        cJSON_AddItemToObject(info, key, gguf_value_json(g, order[k], verbose));
    }
    if (!has_count)
        cJSON_AddNumberToObject(info, "general.parameter_count", (double)facts->parameter_count);
    free(order);
    return info;
}

static cJSON *gguf_tensors(const pt_gguf *g)
{
    cJSON *arr = cJSON_CreateArray();
    for (int64_t t = 0; arr && t < pt_gguf_tensor_count(g); t++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", pt_gguf_tensor_name(g, t, NULL));
        cJSON_AddStringToObject(o, "type", pt_gguf_ggml_type_name(pt_gguf_tensor_ggml_type(g, t)));
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        const int64_t *ne = pt_gguf_tensor_ne(g, t);
        for (int d = 0; d < pt_gguf_tensor_ndim(g, t); d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)ne[d]));
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

/* ---- details --------------------------------------------------------------------------------- */

static cJSON *details_json(const char *format, const char *family, const cJSON *families,
                           const char *parameter_size, const char *quantization)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "parent_model", "");
    cJSON_AddStringToObject(d, "format", format ? format : "");
    cJSON_AddStringToObject(d, "family", family ? family : "");
    if (families && cJSON_IsArray(families))
        cJSON_AddItemToObject(d, "families", cJSON_Duplicate(families, true));
    else if (family && *family)
        cJSON_AddItemToObject(d, "families", cJSON_CreateStringArray(&family, 1));
    else
        cJSON_AddNullToObject(d, "families");
    cJSON_AddStringToObject(d, "parameter_size", parameter_size ? parameter_size : "");
    cJSON_AddStringToObject(d, "quantization_level", quantization ? quantization : "");
    return d;
}

static cJSON *details_from_facts(const pti_gguf_facts *f)
{
    return details_json("gguf", f->family, NULL, f->parameter_size, f->quantization);
}

/* The details a manifest's config blob gives (Ollama's ConfigV2); when the config is missing
 * or unreadable, what the model layer's GGUF says. */
static cJSON *manifest_details(const char *root, const cJSON *man)
{
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(man, "config");
    char path[4096];
    cJSON *cfg = NULL;
    if (config) {
        const char *digest =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(config, "digest"));
        char *text = pti_store_blob_path(root, digest, path, sizeof path)
                         ? pti_store_read_file(path, CONFIG_MAX, NULL)
                         : NULL;
        cfg = text ? cJSON_Parse(text) : NULL;
        free(text);
    }
#define CFG_STR(k) cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, k))
    if (cfg && CFG_STR("model_family")) {
        cJSON *d = details_json(CFG_STR("model_format"), CFG_STR("model_family"),
                                cJSON_GetObjectItemCaseSensitive(cfg, "model_families"),
                                CFG_STR("model_type"), CFG_STR("file_type"));
        cJSON_Delete(cfg);
        return d;
    }
#undef CFG_STR
    cJSON_Delete(cfg);
    pti_gguf_facts f;
    const cJSON *model = find_layer(man, "model");
    const char *digest = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(model, "digest"));
    if (model && pti_store_blob_path(root, digest, path, sizeof path) &&
        pti_store_gguf_facts(path, &f))
        return details_from_facts(&f);
    return details_json("", "", NULL, "", "");
}

/* ---- listing --------------------------------------------------------------------------------- */

static cJSON *list_entry(const char *name, const struct stat *st, int64_t size, const char *hex,
                         cJSON *details)
{
    char when[64];
    pti_store_rfc3339(st->st_mtim.tv_sec, st->st_mtim.tv_nsec, when, sizeof when);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddStringToObject(e, "model", name);
    cJSON_AddStringToObject(e, "modified_at", when);
    cJSON_AddNumberToObject(e, "size", (double)size);
    cJSON_AddStringToObject(e, "digest", hex);
    cJSON_AddItemToObject(e, "details", details);
    /* kept for sorting, removed before the list is returned */
    cJSON_AddNumberToObject(e, "_mtime", (double)st->st_mtim.tv_sec);
    return e;
}

typedef struct list_state {
    const char *root;
    cJSON *out;
} list_state;

static bool list_manifest(const char *name, const char *path, void *user)
{
    list_state *ls = user;
    char hex[65];
    struct stat st;
    cJSON *man = stat(path, &st) == 0 ? pti_store_read_manifest(path, hex) : NULL;
    if (!man) {
        pti_store_warn("skipping %s: %s", path, pt_last_error());
        return true;
    }
    double size = 0;
    const cJSON *layer, *config = cJSON_GetObjectItemCaseSensitive(man, "config");
    cJSON_ArrayForEach(layer, cJSON_GetObjectItemCaseSensitive(man, "layers"))
    {
        size += cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(layer, "size"));
    }
    if (config)
        size += cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(config, "size"));
    cJSON_AddItemToArray(
        ls->out, list_entry(name, &st, (int64_t)size, hex, manifest_details(ls->root, man)));
    cJSON_Delete(man);
    return true;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void list_gguf_file(cJSON *out, const char *path)
{
    struct stat st;
    pti_gguf_facts f;
    if (stat(path, &st) != 0 || !pti_store_gguf_facts(path, &f)) {
        pti_store_warn("skipping %s: %s", path, pt_last_error() ? pt_last_error() : "cannot stat");
        return;
    }
    uint8_t d[32];
    char hex[65];
    pti_sha256(path, strlen(path), d);
    pti_sha256_hex(d, hex);
    cJSON_AddItemToArray(
        out, list_entry(base_name(path), &st, (int64_t)st.st_size, hex, details_from_facts(&f)));
}

static bool has_gguf_suffix(const char *s)
{
    size_t n = strlen(s);
    return n > 5 && strcasecmp(s + n - 5, ".gguf") == 0;
}

static int compare_mtime_desc(const void *a, const void *b)
{
    double x = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(*(cJSON *const *)a, "_mtime"));
    double y = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(*(cJSON *const *)b, "_mtime"));
    return (x < y) - (x > y);
}

/* Newest first (Ollama sorts by modification time in seconds); equal times keep their order. */
static cJSON *sorted_by_mtime(cJSON *arr)
{
    int n = cJSON_GetArraySize(arr);
    cJSON **items = pti_malloc((size_t)(n ? n : 1) * sizeof *items);
    if (!items)
        return arr;
    for (int i = n - 1; i >= 0; i--) {
        items[i] = cJSON_DetachItemFromArray(arr, i);
    }
    /* a stable sort: insertion, n is small */
    for (int i = 1; i < n; i++) {
        cJSON *x = items[i];
        int j = i;
        for (; j > 0 && compare_mtime_desc(&items[j - 1], &x) > 0; j--)
            items[j] = items[j - 1];
        items[j] = x;
    }
    for (int i = 0; i < n; i++) {
        cJSON_DeleteItemFromObjectCaseSensitive(items[i], "_mtime");
        cJSON_AddItemToArray(arr, items[i]);
    }
    free(items);
    return arr;
}

cJSON *pti_store_list(const char *root, const char *models_dir, const char *const *paths,
                      int n_paths)
{
    list_state ls = {root, cJSON_CreateArray()};
    if (!ls.out)
        return NULL;
    pti_store_walk(root, list_manifest, &ls);
    if (models_dir && *models_dir) {
        char **names;
        int n = list_dir(models_dir, false, &names);
        for (int i = 0; i < n; i++) {
            char p[4096];
            if (has_gguf_suffix(names[i]) &&
                snprintf(p, sizeof p, "%s/%s", models_dir, names[i]) < (int)sizeof p)
                list_gguf_file(ls.out, p);
        }
        free_list(names, n);
    }
    for (int i = 0; i < n_paths; i++)
        if (paths[i])
            list_gguf_file(ls.out, paths[i]);
    return sorted_by_mtime(ls.out);
}

/* ---- show ------------------------------------------------------------------------------------ */

/* Ollama's quote() for Modelfile arguments. */
static void append_quoted(strbuf *sb, const char *s)
{
    size_t n = strlen(s);
    bool needs = strchr(s, '\n') || (n && (s[0] == ' ' || s[n - 1] == ' '));
    const char *q = !needs ? "" : strchr(s, '"') ? "\"\"\"" : "\"";
    strbuf_printf(sb, "%s%s%s", q, s, q);
}

/* A float64 as Go's %v prints it (strconv 'g' with the shortest precision): the fewest digits
 * that read back the same, in %e form when the exponent is < -4 or >= 6 ("40", "0.5",
 * "123456", "1e+06", "1e-05"). C's %g with that precision decides by the precision instead
 * ("4e+01"). */
static void go_format_float(double x, char *buf, size_t cap)
{
    if (!isfinite(x)) {
        snprintf(buf, cap, "%s", isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf");
        return;
    }
    int digits = 1;
    char e[40];
    for (; digits <= 17; digits++) {
        snprintf(e, sizeof e, "%.*e", digits - 1, x);
        if (strtod(e, NULL) == x)
            break;
    }
    int exp = x == 0 ? 0 : atoi(strchr(e, 'e') + 1);
    if (exp < -4 || exp >= 6)
        snprintf(buf, cap, "%s", e); /* C's two-digit exponent is Go's too: 1e+06 */
    else
        snprintf(buf, cap, "%.*f", digits - 1 - exp > 0 ? digits - 1 - exp : 0, x);
}

/* Go's %v of a JSON value from a params layer: numbers in shortest form, strings bare. */
static void format_go_value(const cJSON *v, bool go_quoted, char *buf, size_t cap)
{
    if (cJSON_IsString(v)) {
        if (!go_quoted) {
            snprintf(buf, cap, "%s", v->valuestring);
            return;
        }
        /* Go's %#v of a string: strconv.Quote */
        size_t k = 0;
        buf[k++] = '"';
        for (const unsigned char *p = (const unsigned char *)v->valuestring; *p && k + 6 < cap;
             p++) {
            const char *esc = *p == '"'    ? "\\\""
                              : *p == '\\' ? "\\\\"
                              : *p == '\n' ? "\\n"
                              : *p == '\t' ? "\\t"
                              : *p == '\r' ? "\\r"
                                           : NULL;
            if (esc)
                k += (size_t)snprintf(buf + k, cap - k, "%s", esc);
            else if (*p < 0x20 || *p == 0x7f)
                k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", *p);
            else
                buf[k++] = (char)*p;
        }
        snprintf(buf + k, cap - k, "\"");
    } else if (cJSON_IsNumber(v)) {
        go_format_float(v->valuedouble, buf, cap);
    } else if (cJSON_IsBool(v)) {
        snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : "false");
    } else {
        char *s = cJSON_PrintUnformatted(v);
        snprintf(buf, cap, "%s", s ? s : "");
        cJSON_free(s);
    }
}

/* The show "parameters" text (Go's "%-30s %#v" per value, a line per list element) and the
 * Modelfile's PARAMETER lines. */
static void format_params(const cJSON *params, strbuf *text, strbuf *modelfile)
{
    const cJSON *p;
    char val[8192];
    cJSON_ArrayForEach(p, params)
    {
        const cJSON *v = p, *elems = cJSON_IsArray(p) ? p->child : NULL;
        for (v = cJSON_IsArray(p) ? elems : p; v; v = cJSON_IsArray(p) ? v->next : NULL) {
            format_go_value(v, true, val, sizeof val);
            strbuf_printf(text, "%s%-30s %s", text->len ? "\n" : "", p->string, val);
            format_go_value(v, false, val, sizeof val);
            strbuf_printf(modelfile, "PARAMETER %s ", p->string);
            append_quoted(modelfile, val);
            strbuf_printf(modelfile, "\n");
        }
    }
}

/* Ollama's capabilities: completion (or embedding for a pooling model), tools / insert /
 * thinking from what the template uses. Never vision: promeserve runs text models only. */
static cJSON *capabilities(const pt_gguf *g, const char *family, const char *tmpl, bool jinja)
{
    char key[160];
    snprintf(key, sizeof key, "%s.pooling_type", family);
    cJSON *caps = cJSON_CreateArray();
    bool embedding = g && pt_gguf_find_key(g, key) >= 0;
    cJSON_AddItemToArray(caps, cJSON_CreateString(embedding ? "embedding" : "completion"));
    tmpl = tmpl ? tmpl : "";
    bool tools = jinja ? strstr(tmpl, "tools") != NULL : strstr(tmpl, ".Tools") != NULL;
    bool insert = jinja ? strstr(tmpl, "suffix") != NULL : strstr(tmpl, ".Suffix") != NULL;
    bool think = jinja ? strstr(tmpl, "<think>") || strstr(tmpl, "enable_thinking")
                       : strstr(tmpl, ".Think") || strstr(tmpl, "<think>");
    if (!embedding && tools)
        cJSON_AddItemToArray(caps, cJSON_CreateString("tools"));
    if (!embedding && insert)
        cJSON_AddItemToArray(caps, cJSON_CreateString("insert"));
    if (!embedding && think)
        cJSON_AddItemToArray(caps, cJSON_CreateString("thinking"));
    return caps;
}

/* What show collects before it builds its answer. */
typedef struct show_parts {
    char *template_, *system, *license, *params_text;
    cJSON *params, *messages;
    strbuf modelfile;
} show_parts;

static void free_parts(show_parts *p)
{
    free(p->template_);
    free(p->system);
    free(p->license);
    cJSON_Delete(p->params);
    cJSON_Delete(p->messages);
    strbuf_free(&p->modelfile);
}

/* The answer common to store models and plain files. Takes nothing over. */
static cJSON *show_json(const show_parts *p, const pt_gguf *g, const pti_gguf_facts *facts,
                        cJSON *details, const struct stat *st, bool jinja, bool verbose)
{
    cJSON *r = cJSON_CreateObject();
    strbuf params_text = {0}, unused = {0};
    if (p->params)
        format_params(p->params, &params_text, &unused);
    cJSON_AddStringToObject(r, "modelfile", p->modelfile.data ? p->modelfile.data : "");
    if (params_text.len)
        cJSON_AddStringToObject(r, "parameters", params_text.data);
    cJSON_AddStringToObject(r, "template", p->template_ ? p->template_ : "");
    if (p->system)
        cJSON_AddStringToObject(r, "system", p->system);
    if (p->license)
        cJSON_AddStringToObject(r, "license", p->license);
    cJSON_AddItemToObject(r, "details", details);
    cJSON_AddItemToObject(r, "model_info", gguf_model_info(g, facts, verbose));
    cJSON_AddItemToObject(r, "tensors", gguf_tensors(g));
    cJSON_AddItemToObject(r, "capabilities", capabilities(g, facts->family, p->template_, jinja));
    if (p->messages)
        cJSON_AddItemToObject(r, "messages", cJSON_Duplicate(p->messages, true));
    char when[64];
    pti_store_rfc3339(st->st_mtim.tv_sec, st->st_mtim.tv_nsec, when, sizeof when);
    cJSON_AddStringToObject(r, "modified_at", when);
    strbuf_free(&params_text);
    strbuf_free(&unused);
    return r;
}

static void modelfile_header(strbuf *mf, const char *shown, const char *gguf_path)
{
    strbuf_printf(mf,
                  "# Modelfile generated by \"ollama show\"\n"
                  "# To build a new Modelfile based on this, replace FROM with:\n"
                  "# FROM %s\n\nFROM %s\n",
                  shown, gguf_path);
}

/* A messages layer: an array of objects. */
static bool messages_array(const cJSON *j)
{
    const cJSON *m;
    bool ok = cJSON_IsArray(j);
    cJSON_ArrayForEach(m, j) ok = ok && cJSON_IsObject(m);
    return ok;
}

/* Reads the text layers of a manifest into p and writes the Modelfile after FROM. */
static bool read_show_layers(const char *root, const cJSON *man, show_parts *p)
{
    const cJSON *layer;
    strbuf license = {0};
    bool ok = true;
    cJSON_ArrayForEach(layer, cJSON_GetObjectItemCaseSensitive(man, "layers"))
    {
        const char *kind = layer_type(layer);
        bool text_kind = !strcmp(kind, "template") || !strcmp(kind, "prompt") ||
                         !strcmp(kind, "system") || !strcmp(kind, "license") ||
                         !strcmp(kind, "params") || !strcmp(kind, "messages");
        if (!text_kind)
            continue;
        char *text = read_layer_text(root, layer);
        if (!text) {
            ok = false;
            break;
        }
        if (!strcmp(kind, "template") || !strcmp(kind, "prompt")) {
            free(p->template_);
            p->template_ = text;
        } else if (!strcmp(kind, "system")) {
            free(p->system);
            p->system = text;
        } else if (!strcmp(kind, "license")) {
            strbuf_printf(&license, "%s%s", license.len ? "\n" : "", text);
            free(text);
        } else {
            cJSON *j = cJSON_Parse(text);
            free(text);
            bool params = !strcmp(kind, "params");
            if (params ? !cJSON_IsObject(j) : !messages_array(j)) { /* ignored, as if absent */
                cJSON_Delete(j);
                continue;
            }
            cJSON **dst = params ? &p->params : &p->messages;
            cJSON_Delete(*dst);
            *dst = j;
        }
    }
    if (license.len)
        p->license = pti_strdup(license.data);
    strbuf_free(&license);
    return ok;
}

static void modelfile_body(strbuf *mf, const show_parts *p)
{
    if (p->template_) {
        strbuf_printf(mf, "TEMPLATE ");
        append_quoted(mf, p->template_);
        strbuf_printf(mf, "\n");
    }
    if (p->system) {
        strbuf_printf(mf, "SYSTEM ");
        append_quoted(mf, p->system);
        strbuf_printf(mf, "\n");
    }
    strbuf unused = {0};
    if (p->params)
        format_params(p->params, &unused, mf);
    strbuf_free(&unused);
    if (p->license) {
        strbuf_printf(mf, "LICENSE ");
        append_quoted(mf, p->license);
        strbuf_printf(mf, "\n");
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, p->messages)
    {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
        const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "content"));
        if (role && content) {
            strbuf_printf(mf, "MESSAGE %s ", role);
            append_quoted(mf, content);
            strbuf_printf(mf, "\n");
        }
    }
}

cJSON *pti_store_show(const char *root, const char *name, bool verbose, int *status)
{
    pti_model_name n;
    if (!root || !*root) {
        pti_error(PT_ERR_INVALID_ARG, "no model store: set OLLAMA_MODELS or HOME");
        *status = PTI_STORE_FAILED;
        return NULL;
    }
    if (!pti_model_name_parse(name, &n)) {
        *status = PTI_STORE_BAD_REQUEST;
        return NULL;
    }
    char path[4096], shown[1500], gguf_path[4096] = "";
    pti_model_name_format(&n, shown, sizeof shown);
    if (!pti_model_store_manifest_path(root, &n, path, sizeof path)) {
        *status = PTI_STORE_NOT_FOUND;
        return NULL;
    }
    *status = PTI_STORE_FAILED;
    struct stat st;
    cJSON *man = stat(path, &st) == 0 ? pti_store_read_manifest(path, NULL) : NULL;
    if (!man)
        return NULL;
    const cJSON *model = find_layer(man, "model");
    const char *digest = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(model, "digest"));
    if (!model || !pti_store_blob_path(root, digest, gguf_path, sizeof gguf_path)) {
        pti_error(PT_ERR_FORMAT, "model store: %s has no model layer", path);
        cJSON_Delete(man);
        return NULL;
    }
    show_parts p = {0};
    pt_gguf *g = NULL;
    cJSON *r = NULL;
    if (read_show_layers(root, man, &p) && (g = pt_gguf_open(gguf_path))) {
        pti_gguf_facts facts;
        facts_from_gguf(g, &facts);
        modelfile_header(&p.modelfile, shown, gguf_path);
        modelfile_body(&p.modelfile, &p);
        /* Without a template layer the server renders with the GGUF's own chat template (as
         * Ollama detects one at create time): show that text, as for a plain file, and no
         * TEMPLATE line (it is Jinja, not a Go template). Ollama's default otherwise. */
        bool jinja = false;
        if (!p.template_) {
            const char *tmpl = gguf_str(g, "tokenizer.chat_template");
            jinja = tmpl != NULL;
            p.template_ = pti_strdup(tmpl ? tmpl : "{{ .Prompt }}");
        }
        r = show_json(&p, g, &facts, manifest_details(root, man), &st, jinja, verbose);
        *status = PTI_STORE_OK;
    }
    pt_gguf_close(g);
    free_parts(&p);
    cJSON_Delete(man);
    return r;
}

cJSON *pti_store_show_file(const char *path, const char *shown, bool verbose, int *status)
{
    *status = PTI_STORE_FAILED;
    struct stat st;
    pt_gguf *g = stat(path, &st) == 0 ? pt_gguf_open(path) : NULL;
    if (!g) {
        if (!pt_last_error())
            pti_error(PT_ERR_IO, "model store: cannot open %s", path);
        return NULL;
    }
    pti_gguf_facts facts;
    facts_from_gguf(g, &facts);
    show_parts p = {0};
    const char *tmpl = gguf_str(g, "tokenizer.chat_template");
    p.template_ = tmpl ? pti_strdup(tmpl) : NULL;
    /* no TEMPLATE line: the chat template is Jinja, not a Go template a Modelfile could hold */
    char *abs = realpath(path, NULL);
    modelfile_header(&p.modelfile, shown, abs ? abs : path);
    free(abs);
    cJSON *r = show_json(&p, g, &facts, details_from_facts(&facts), &st, true, verbose);
    *status = PTI_STORE_OK;
    free_parts(&p);
    pt_gguf_close(g);
    return r;
}

/* ---- leftovers of interrupted writes ------------------------------------------------------ */

static bool is_blob_name(const char *name)
{
    if (strncmp(name, "sha256-", 7) || strlen(name) != 7 + 64)
        return false;
    for (const char *p = name + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* ".latest.tmp-123-4": write_file_atomic's temporary name */
static bool is_atomic_tmp(const char *name)
{
    return name[0] == '.' && strstr(name, ".tmp-") != NULL;
}

static int prune_dir(const char *dir, bool blobs, int depth, int64_t before_s)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[4352];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
            continue;
        struct stat st;
        if (lstat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (!blobs && depth < 8) /* manifests/host/namespace/model/tag */
                removed += prune_dir(path, false, depth + 1, before_s);
            continue;
        }
        if (!S_ISREG(st.st_mode) || (int64_t)st.st_mtime >= before_s)
            continue; /* a recent file may be another process's write in progress */
        bool junk = blobs ? !is_blob_name(e->d_name) : is_atomic_tmp(e->d_name);
        if (junk && unlink(path) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

int pti_store_prune_temporaries(const char *root, int64_t before_s)
{
    char dir[4200];
    int removed = 0;
    if (snprintf(dir, sizeof dir, "%s/blobs", root) < (int)sizeof dir)
        removed += prune_dir(dir, true, 0, before_s);
    if (snprintf(dir, sizeof dir, "%s/manifests", root) < (int)sizeof dir)
        removed += prune_dir(dir, false, 0, before_s);
    return removed;
}
