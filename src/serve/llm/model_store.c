/* Ollama model names and the on-disk model store: name parsing with Ollama's defaults and
 * character rules, and manifest -> blob resolution (see model_store.h). */
#include "model_store.h"

#include <cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../../core/internal.h"

#define DEFAULT_HOST "registry.ollama.ai"
#define DEFAULT_NAMESPACE "library"
#define DEFAULT_TAG "latest"
#define PART_MAX 80
#define MANIFEST_MAX (1 << 20)

/* ---- names -------------------------------------------------------------------------------------
 */

typedef enum part_kind { PART_HOST, PART_NAMESPACE, PART_MODEL, PART_TAG } part_kind;

/* Ollama's rule (types/model/name.go isValidPart): the first character is a letter, digit or
 * '_'; then also '-', '.' (not in a namespace) and ':' (host only). */
static bool name_char(char c, bool first, part_kind kind)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
        return true;
    if (first)
        return false;
    return c == '-' || (c == '.' && kind != PART_NAMESPACE) || (c == ':' && kind == PART_HOST);
}

/* Copies [s, s + len) into dst after checking it is a valid part. */
static bool take_part(const char *what, const char *s, size_t len, part_kind kind, char *dst)
{
    size_t max = kind == PART_HOST ? PTI_NAME_PART_MAX : PART_MAX;
    if (len == 0 || len > max) {
        pti_error(PT_ERR_INVALID_ARG, "model name: the %s is %s", what,
                  len == 0 ? "empty" : "too long");
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!name_char(s[i], i == 0, kind)) {
            pti_error(PT_ERR_INVALID_ARG, "model name: invalid character '%c' in the %s", s[i],
                      what);
            return false;
        }
    }
    memcpy(dst, s, len);
    dst[len] = '\0';
    return true;
}

bool pti_model_name_parse(const char *s, pti_model_name *out)
{
    if (!s || !out) {
        pti_error(PT_ERR_INVALID_ARG, "model name: NULL");
        return false;
    }
    size_t len = strlen(s);
    const char *at = memchr(s, '@', len);
    if (at)
        len = (size_t)(at - s); /* a digest pins a version; the manifest in the store decides */
    snprintf(out->host, sizeof out->host, "%s", DEFAULT_HOST);
    snprintf(out->ns, sizeof out->ns, "%s", DEFAULT_NAMESPACE);
    snprintf(out->tag, sizeof out->tag, "%s", DEFAULT_TAG);
    const char *last_slash = NULL;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '/')
            last_slash = s + i;
    const char *model = last_slash ? last_slash + 1 : s;
    const char *colon = memchr(model, ':', len - (size_t)(model - s));
    size_t model_len = colon ? (size_t)(colon - model) : len - (size_t)(model - s);
    if (colon && !take_part("tag", colon + 1, len - (size_t)(colon + 1 - s), PART_TAG, out->tag))
        return false;
    if (!take_part("model", model, model_len, PART_MODEL, out->model))
        return false;
    if (!last_slash)
        return true;
    /* what precedes the model: "namespace" or "host/namespace" */
    const char *ns_end = last_slash, *ns = s;
    for (const char *p = s; p < ns_end; p++)
        if (*p == '/')
            ns = p + 1;
    if (!take_part("namespace", ns, (size_t)(ns_end - ns), PART_NAMESPACE, out->ns))
        return false;
    if (ns == s)
        return true;
    return take_part("host", s, (size_t)(ns - 1 - s), PART_HOST, out->host);
}

size_t pti_model_name_format(const pti_model_name *n, char *buf, size_t cap)
{
    bool dflt_host = strcasecmp(n->host, DEFAULT_HOST) == 0;
    bool dflt_ns = dflt_host && strcasecmp(n->ns, DEFAULT_NAMESPACE) == 0;
    int k;
    if (dflt_ns)
        k = snprintf(buf, cap, "%s:%s", n->model, n->tag);
    else if (dflt_host)
        k = snprintf(buf, cap, "%s/%s:%s", n->ns, n->model, n->tag);
    else
        k = snprintf(buf, cap, "%s/%s/%s:%s", n->host, n->ns, n->model, n->tag);
    return k < 0 ? 0 : (size_t)k;
}

bool pti_model_store_root(char *buf, size_t cap)
{
    const char *env = getenv("OLLAMA_MODELS"), *home = getenv("HOME");
    int k = env && *env     ? snprintf(buf, cap, "%s", env)
            : home && *home ? snprintf(buf, cap, "%s/.ollama/models", home)
                            : -1;
    return k > 0 && (size_t)k < cap;
}

/* ---- the store ---------------------------------------------------------------------------------
 */

/* Appends component `part` to the directory path (size cap), matching an existing entry
 * case-insensitively when the exact name does not exist. */
static bool join_fold(char *path, size_t cap, const char *part)
{
    size_t used = strlen(path);
    if (snprintf(path + used, cap - used, "/%s", part) >= (int)(cap - used))
        return false;
    struct stat st;
    if (stat(path, &st) == 0)
        return true;
    path[used] = '\0';
    DIR *d = opendir(path);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        if (strcasecmp(e->d_name, part) == 0) {
            snprintf(path + used, cap - used, "/%s", e->d_name);
            found = true;
        }
    }
    if (d)
        closedir(d);
    if (!found)
        snprintf(path + used, cap - used, "/%s", part);
    return found;
}

static char *read_small_file(const char *path, const char *what)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        pti_error(PT_ERR_IO, "%s: cannot open %s", what, path);
        return NULL;
    }
    char *buf = pti_malloc(MANIFEST_MAX + 1);
    size_t n = buf ? fread(buf, 1, MANIFEST_MAX + 1, f) : 0;
    fclose(f);
    if (buf && n > MANIFEST_MAX) {
        pti_error(PT_ERR_FORMAT, "%s: %s is larger than %d bytes", what, path, MANIFEST_MAX);
        free(buf);
        return NULL;
    }
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* "sha256:<64 hex>" -> <root>/blobs/sha256-<hex>, which must exist. */
static bool blob_path(const char *root, const char *digest, char *out, size_t cap)
{
    if (!digest || strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != 7 + 64 ||
        strspn(digest + 7, "0123456789abcdef") != 64) {
        pti_error(PT_ERR_FORMAT, "model store: bad layer digest '%.80s'", digest ? digest : "");
        return false;
    }
    if (snprintf(out, cap, "%s/blobs/sha256-%s", root, digest + 7) >= (int)cap) {
        pti_error(PT_ERR_INVALID_ARG, "model store: path too long");
        return false;
    }
    struct stat st;
    if (stat(out, &st) != 0 || !S_ISREG(st.st_mode)) {
        pti_error(PT_ERR_IO, "model store: blob %s is missing", out);
        return false;
    }
    return true;
}

/* Fills the layer paths from a parsed manifest. */
static bool read_layers(const char *root, const cJSON *man, pti_model_files *out)
{
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(man, "schemaVersion");
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(man, "layers");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 2 || !cJSON_IsArray(layers)) {
        pti_error(PT_ERR_FORMAT, "model store: %s is not a version 2 manifest with layers",
                  out->manifest);
        return false;
    }
    static const struct {
        const char *type;
        size_t offset;
    } kinds[] = {
        {"application/vnd.ollama.image.model", offsetof(pti_model_files, model)},
        {"application/vnd.ollama.image.template", offsetof(pti_model_files, template_)},
        {"application/vnd.ollama.image.system", offsetof(pti_model_files, system)},
        {"application/vnd.ollama.image.params", offsetof(pti_model_files, params)},
    };
    const cJSON *layer;
    cJSON_ArrayForEach(layer, layers)
    {
        const char *type =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(layer, "mediaType"));
        const char *digest =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(layer, "digest"));
        for (size_t k = 0; type && k < sizeof kinds / sizeof kinds[0]; k++) {
            char *dst = (char *)out + kinds[k].offset;
            if (strcmp(type, kinds[k].type) == 0 && !blob_path(root, digest, dst, 4096))
                return false;
        }
    }
    if (!out->model[0]) {
        pti_error(PT_ERR_FORMAT, "model store: %s has no model layer", out->manifest);
        return false;
    }
    return true;
}

bool pti_model_store_manifest_path(const char *root, const pti_model_name *n, char *path,
                                   size_t cap)
{
    bool ok = snprintf(path, cap, "%s/manifests", root) < (int)cap;
    const char *parts[] = {n->host, n->ns, n->model, n->tag};
    int i = 0;
    for (; ok && i < 4; i++)
        ok = join_fold(path, cap, parts[i]);
    for (; !ok && i < 4; i++) { /* the rest as named, for a caller that creates it */
        size_t used = strlen(path);
        snprintf(path + used, cap - used, "/%s", parts[i]);
    }
    if (!ok) {
        char shown[1500];
        pti_model_name_format(n, shown, sizeof shown);
        pti_error(PT_ERR_IO, "model '%s' not found", shown);
    }
    return ok;
}

bool pti_model_store_resolve(const char *root, const pti_model_name *n, pti_model_files *out)
{
    memset(out, 0, sizeof *out);
    char *path = out->manifest;
    if (!pti_model_store_manifest_path(root, n, path, sizeof out->manifest))
        return false;
    char *text = read_small_file(path, "model store");
    if (!text)
        return false;
    cJSON *man = cJSON_Parse(text);
    free(text);
    if (!man) {
        pti_error(PT_ERR_FORMAT, "model store: %s is not JSON", path);
        return false;
    }
    bool ok = read_layers(root, man, out);
    cJSON_Delete(man);
    return ok;
}
