/* Writing the model store: copy, delete (with garbage collection of unreferenced blobs), the
 * prune at start, blob upload, and create from uploaded GGUF blobs and/or an existing model
 * (see store_ops.h). Every file appears under its final name by rename(2) of a fully written
 * temporary file in the same directory; one process-wide lock serialises the writers. */
#include "store_ops.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/internal.h"
#include "../llm/model_store.h"
#include "prometorch/gguf.h"
#include "sha256.h"

#define MANIFEST_MAX (1 << 20)
#define CONFIG_MAX (1 << 20)

static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- files ----------------------------------------------------------------------------------- */

/* mkdir -p of the directory part of path (the last component is a file). */
static bool make_parent_dirs(const char *path)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return false;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            pti_error(PT_ERR_IO, "model store: cannot create directory %s", p);
            return false;
        }
        *s = '/';
    }
    return true;
}

/* Writes len bytes to path through a temporary file in the same directory and rename(2). */
static bool write_file_atomic(const char *path, const void *data, size_t len)
{
    static atomic_uint counter;
    char tmp[4200];
    if (!make_parent_dirs(path))
        return false;
    /* a dot name: the manifest walk and listings skip it while it is being written */
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path) : 0;
    snprintf(tmp, sizeof tmp, "%.*s/.%s.tmp-%d-%u", dir_len, path, slash ? slash + 1 : path,
             (int)getpid(), atomic_fetch_add(&counter, 1));
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(data, 1, len, f) == len;
    ok = f && fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
    if (f && fclose(f) != 0)
        ok = false;
    if (ok && rename(tmp, path) != 0)
        ok = false;
    if (!ok) {
        unlink(tmp);
        pti_error(PT_ERR_IO, "model store: cannot write %s", path);
    }
    return ok;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- names ----------------------------------------------------------------------------------- */

/* A store root must be given: "" would put the store at /manifests and /blobs. */
static bool have_root(const char *root)
{
    if (root && *root)
        return true;
    pti_error(PT_ERR_INVALID_ARG, "no model store: set OLLAMA_MODELS or HOME");
    return false;
}

/* Parses name and finds its manifest. Returns OK, BAD_REQUEST or NOT_FOUND (error set). */
static int find_manifest(const char *root, const char *name, char *path, size_t cap)
{
    pti_model_name n;
    if (!have_root(root))
        return PTI_STORE_FAILED;
    if (!name || !*name) {
        pti_error(PT_ERR_INVALID_ARG, "model is required");
        return PTI_STORE_BAD_REQUEST;
    }
    if (!pti_model_name_parse(name, &n))
        return PTI_STORE_BAD_REQUEST;
    return pti_model_store_manifest_path(root, &n, path, cap) ? PTI_STORE_OK : PTI_STORE_NOT_FOUND;
}

/* The path a new manifest for name gets: an existing one (any case) or the exact-case path. */
static int new_manifest_path(const char *root, const char *name, char *path, size_t cap)
{
    int st = find_manifest(root, name, path, cap);
    if (st == PTI_STORE_NOT_FOUND) {
        pt_clear_error();
        return PTI_STORE_OK;
    }
    return st;
}

/* ---- copy and delete ------------------------------------------------------------------------- */

int pti_store_copy(const char *root, const char *src, const char *dst)
{
    char from[4096], to[4096];
    int st = find_manifest(root, src, from, sizeof from);
    if (st != PTI_STORE_OK)
        return st;
    if ((st = new_manifest_path(root, dst, to, sizeof to)) != PTI_STORE_OK)
        return st;
    size_t len;
    char *text = pti_store_read_file(from, MANIFEST_MAX, &len);
    if (!text)
        return PTI_STORE_FAILED;
    pthread_mutex_lock(&store_lock);
    bool ok = write_file_atomic(to, text, len);
    pthread_mutex_unlock(&store_lock);
    free(text);
    return ok ? PTI_STORE_OK : PTI_STORE_FAILED;
}

/* A list of digests (small: a store holds tens of models). */
typedef struct digest_set {
    char (*d)[72];
    int n, cap;
} digest_set;

static bool set_has(const digest_set *s, const char *d)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->d[i], d))
            return true;
    return false;
}

static void set_add(digest_set *s, const char *d)
{
    if (!d || set_has(s, d))
        return;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        void *grown = pti_realloc(s->d, (size_t)cap * sizeof *s->d);
        if (!grown)
            return;
        s->d = grown;
        s->cap = cap;
    }
    snprintf(s->d[s->n++], sizeof s->d[0], "%s", d);
}

/* Adds the config's and every layer's digest of a parsed manifest. */
static void add_manifest_digests(digest_set *s, const cJSON *man)
{
    const cJSON *layer;
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(man, "config");
    set_add(s, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(config, "digest")));
    cJSON_ArrayForEach(layer, cJSON_GetObjectItemCaseSensitive(man, "layers"))
    {
        set_add(s, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(layer, "digest")));
    }
}

typedef struct gc_state {
    digest_set used;
    bool broken; /* a manifest could not be read: keep every blob rather than guess */
} gc_state;

static bool collect_used(const char *name, const char *path, void *user)
{
    (void)name;
    gc_state *gc = user;
    cJSON *man = pti_store_read_manifest(path, NULL);
    if (!man) {
        pti_store_warn("%s: %s; no blob is removed", path, pt_last_error());
        gc->broken = true;
        return false;
    }
    add_manifest_digests(&gc->used, man);
    cJSON_Delete(man);
    return true;
}

/* Removes the manifest's directories (tag's model, namespace, host) that are now empty. */
static void remove_empty_dirs(const char *root, const char *manifest)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", manifest);
    for (int level = 0; level < 3; level++) {
        char *slash = strrchr(p, '/');
        if (!slash)
            return;
        *slash = '\0';
        if (strlen(p) <= strlen(root) || rmdir(p) != 0)
            return;
    }
}

int pti_store_delete(const char *root, const char *name)
{
    char path[4096];
    int st = find_manifest(root, name, path, sizeof path);
    if (st != PTI_STORE_OK)
        return st;
    pthread_mutex_lock(&store_lock);
    cJSON *man = pti_store_read_manifest(path, NULL); /* NULL: a broken one is still deleted */
    if (unlink(path) != 0) {
        pti_error(PT_ERR_IO, "model store: cannot remove %s", path);
        cJSON_Delete(man);
        pthread_mutex_unlock(&store_lock);
        return PTI_STORE_FAILED;
    }
    remove_empty_dirs(root, path);
    gc_state gc = {0};
    pti_store_walk(root, collect_used, &gc);
    digest_set mine = {0};
    add_manifest_digests(&mine, man);
    for (int i = 0; i < mine.n && !gc.broken; i++) {
        char blob[4096];
        if (!set_has(&gc.used, mine.d[i]) &&
            pti_store_blob_path(root, mine.d[i], blob, sizeof blob))
            unlink(blob);
    }
    pthread_mutex_unlock(&store_lock);
    free(mine.d);
    free(gc.used.d);
    cJSON_Delete(man);
    return PTI_STORE_OK;
}

/* ---- the prune at start ---------------------------------------------------------------------- */

/* Removes the blobs (sha256-<hex> files of blobs/) older than before_s that used lacks. */
static int prune_unused_blobs(const char *root, const digest_set *used, int64_t before_s)
{
    char dir[4200];
    if (snprintf(dir, sizeof dir, "%s/blobs", root) >= (int)sizeof dir)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char digest[80], path[4352];
        if (strncmp(e->d_name, "sha256-", 7) || strlen(e->d_name) != 7 + 64)
            continue;
        snprintf(digest, sizeof digest, "sha256:%s", e->d_name + 7);
        struct stat st;
        if (!pti_store_digest_valid(digest) || set_has(used, digest) ||
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
            lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || (int64_t)st.st_mtime >= before_s)
            continue;
        if (unlink(path) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

/* rmdir of every empty directory under dir (dir itself stays), deepest first. */
static void prune_empty_dirs(const char *dir, int depth)
{
    DIR *d = depth < 8 ? opendir(dir) : NULL; /* manifests/host/namespace/model/tag */
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        char path[4352];
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
            lstat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        prune_empty_dirs(path, depth + 1);
        rmdir(path); /* fails, as it should, when something is left in it */
    }
    closedir(d);
}

int pti_store_prune(const char *root, int64_t now_s)
{
    pthread_mutex_lock(&store_lock);
    gc_state gc = {0};
    pti_store_walk(root, collect_used, &gc);
    int removed = -1;
    if (gc.broken) {
        pti_store_warn("a manifest is corrupt, so nothing is pruned; re-create or delete that "
                       "model to clear it");
    } else {
        int64_t before = now_s - PTI_STORE_PRUNE_GRACE_S;
        removed =
            pti_store_prune_temporaries(root, before) + prune_unused_blobs(root, &gc.used, before);
        char dir[4200];
        if (snprintf(dir, sizeof dir, "%s/manifests", root) < (int)sizeof dir)
            prune_empty_dirs(dir, 0);
    }
    pthread_mutex_unlock(&store_lock);
    free(gc.used.d);
    return removed;
}

/* ---- blobs ----------------------------------------------------------------------------------- */

static int check_digest(const char *digest)
{
    if (pti_store_digest_valid(digest))
        return PTI_STORE_OK;
    pti_error(PT_ERR_INVALID_ARG, "invalid digest '%.80s': expected sha256: and 64 lowercase hex",
              digest ? digest : "");
    return PTI_STORE_BAD_REQUEST;
}

int pti_store_blob_check(const char *root, const char *digest)
{
    int st = have_root(root) ? check_digest(digest) : PTI_STORE_FAILED;
    if (st != PTI_STORE_OK)
        return st;
    char path[4096];
    if (pti_store_blob_path(root, digest, path, sizeof path) && file_exists(path))
        return PTI_STORE_OK;
    pti_error(PT_ERR_IO, "blob %s not found", digest);
    return PTI_STORE_NOT_FOUND;
}

int pti_store_blob_commit(const char *root, const char *tmp_path, const char *digest)
{
    int st = have_root(root) ? check_digest(digest) : PTI_STORE_FAILED;
    char path[4096], hex[65];
    if (st == PTI_STORE_OK && !pti_store_blob_path(root, digest, path, sizeof path)) {
        pti_error(PT_ERR_INVALID_ARG, "model store: path too long");
        st = PTI_STORE_FAILED;
    }
    if (st == PTI_STORE_OK && !pti_sha256_file(tmp_path, hex, NULL))
        st = PTI_STORE_FAILED;
    if (st == PTI_STORE_OK && strcmp(hex, digest + 7) != 0) {
        pti_error(PT_ERR_INVALID_ARG, "digest mismatch, expected %s, got sha256:%s", digest, hex);
        st = PTI_STORE_BAD_REQUEST;
    }
    if (st == PTI_STORE_OK) {
        pthread_mutex_lock(&store_lock);
        /* uploads arrive as private temporary files; blobs are world-readable like Ollama's */
        chmod(tmp_path, 0644);
        if (!make_parent_dirs(path) || rename(tmp_path, path) != 0) {
            pti_error(PT_ERR_IO, "model store: cannot move the upload to %s", path);
            st = PTI_STORE_FAILED;
        }
        pthread_mutex_unlock(&store_lock);
    }
    if (st != PTI_STORE_OK)
        unlink(tmp_path);
    return st;
}

/* ---- create ---------------------------------------------------------------------------------- */

/* A create in progress: the layers so far (manifest layer objects, in Ollama's order) and the
 * config fields. */
typedef struct creation {
    const char *root;
    cJSON *layers;
    cJSON *config;
    pti_store_progress progress;
    void *user;
} creation;

static void report(creation *c, const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    if (c->progress)
        c->progress(msg, c->user);
}

static cJSON *layer_object(const char *kind, const char *digest, double size)
{
    char type[128];
    snprintf(type, sizeof type, PTI_MEDIA_PREFIX "%s", kind);
    cJSON *l = cJSON_CreateObject();
    cJSON_AddStringToObject(l, "mediaType", type);
    cJSON_AddStringToObject(l, "digest", digest);
    cJSON_AddNumberToObject(l, "size", size);
    return l;
}

static const char *layer_kind(const cJSON *layer)
{
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(layer, "mediaType"));
    size_t n = strlen(PTI_MEDIA_PREFIX);
    return t && !strncmp(t, PTI_MEDIA_PREFIX, n) ? t + n : "";
}

/* Replaces the layers of that kind with l (at the first one's place), or appends it. The
 * array is rebuilt: cJSON 1.7.15's InsertItemInArray refuses to insert after a detach. */
static void set_layer(creation *c, const char *kind, cJSON *l)
{
    cJSON *out = cJSON_CreateArray();
    if (!out) {
        cJSON_Delete(l);
        return;
    }
    bool placed = false;
    while (c->layers->child) {
        cJSON *x = cJSON_DetachItemViaPointer(c->layers, c->layers->child);
        if (strcmp(layer_kind(x), kind) != 0) {
            cJSON_AddItemToArray(out, x);
            continue;
        }
        cJSON_Delete(x);
        if (!placed)
            cJSON_AddItemToArray(out, l);
        placed = true;
    }
    if (!placed)
        cJSON_AddItemToArray(out, l);
    cJSON_Delete(c->layers);
    c->layers = out;
}

static void drop_layers(creation *c, const char *kind)
{
    for (cJSON *x = c->layers->child; x;) {
        cJSON *next = x->next;
        if (!strcmp(layer_kind(x), kind))
            cJSON_Delete(cJSON_DetachItemViaPointer(c->layers, x));
        x = next;
    }
}

/* Writes bytes as a content-addressed blob (unless it exists) and returns its digest. */
static bool write_blob(creation *c, const void *data, size_t len, char digest[72], bool quiet)
{
    uint8_t d[32];
    char hex[65], path[4096];
    pti_sha256(data, len, d);
    pti_sha256_hex(d, hex);
    snprintf(digest, 72, "sha256:%s", hex);
    if (!pti_store_blob_path(c->root, digest, path, sizeof path)) {
        pti_error(PT_ERR_INVALID_ARG, "model store: path too long");
        return false;
    }
    if (file_exists(path)) {
        if (!quiet)
            report(c, "using existing layer %s", digest);
        return true;
    }
    if (!quiet)
        report(c, "creating new layer %s", digest);
    return write_file_atomic(path, data, len);
}

static bool add_text_layer(creation *c, const char *kind, const char *text, bool append)
{
    char digest[72];
    if (!write_blob(c, text, strlen(text), digest, false))
        return false;
    cJSON *l = layer_object(kind, digest, (double)strlen(text));
    if (append)
        cJSON_AddItemToArray(c->layers, l);
    else
        set_layer(c, kind, l);
    return true;
}

static void config_set_str(cJSON *cfg, const char *key, const char *value)
{
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, key);
    cJSON_AddStringToObject(cfg, key, value);
}

/* The base model's layers and config (from). */
static int take_from(creation *c, const char *from)
{
    char path[4096];
    int st = find_manifest(c->root, from, path, sizeof path);
    if (st != PTI_STORE_OK)
        return st;
    cJSON *man = pti_store_read_manifest(path, NULL);
    if (!man)
        return PTI_STORE_FAILED;
    cJSON_Delete(c->layers);
    c->layers = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(man, "layers"), true);
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(man, "config");
    const char *digest = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(config, "digest"));
    char cpath[4096];
    char *text = config && pti_store_blob_path(c->root, digest, cpath, sizeof cpath)
                     ? pti_store_read_file(cpath, CONFIG_MAX, NULL)
                     : NULL;
    cJSON *cfg = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (cJSON_IsObject(cfg)) {
        cJSON_Delete(c->config);
        c->config = cfg;
    } else {
        cJSON_Delete(cfg);
    }
    cJSON_Delete(man);
    for (cJSON *l = c->layers ? c->layers->child : NULL; l; l = l->next)
        report(c, "using existing layer %s",
               cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(l, "digest")));
    return c->layers ? PTI_STORE_OK : PTI_STORE_FAILED;
}

/* files: {"name.gguf": "sha256:..."}: exactly one GGUF, already uploaded; its metadata goes
 * into the config. Checked completely before anything is reported. */
static int take_files(creation *c, const cJSON *files)
{
    const cJSON *f, *gguf = NULL;
    cJSON_ArrayForEach(f, files)
    {
        const char *digest = cJSON_GetStringValue(f);
        size_t n = strlen(f->string);
        if (!pti_store_digest_valid(digest)) {
            pti_error(PT_ERR_INVALID_ARG,
                      "files: invalid digest for '%.200s': expected "
                      "\"sha256:\" and 64 lowercase hex digits",
                      f->string);
            return PTI_STORE_BAD_REQUEST;
        }
        if (n < 5 || strcasecmp(f->string + n - 5, ".gguf") != 0) {
            pti_error(PT_ERR_INVALID_ARG,
                      "files: '%.200s' is not a .gguf file: only GGUF models are supported "
                      "(safetensors, adapters and projectors are not)",
                      f->string);
            return PTI_STORE_BAD_REQUEST;
        }
        if (gguf) {
            pti_error(PT_ERR_INVALID_ARG, "files: more than one GGUF file; give exactly one");
            return PTI_STORE_BAD_REQUEST;
        }
        gguf = f;
    }
    if (!gguf) {
        pti_error(PT_ERR_INVALID_ARG, "files: no GGUF file given");
        return PTI_STORE_BAD_REQUEST;
    }
    char path[4096];
    struct stat st;
    if (!pti_store_blob_path(c->root, gguf->valuestring, path, sizeof path) ||
        stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        pti_error(PT_ERR_IO,
                  "blob %s for '%.200s' not found: upload it first with POST "
                  "/api/blobs/%s",
                  gguf->valuestring, gguf->string, gguf->valuestring);
        return PTI_STORE_BAD_REQUEST;
    }
    report(c, "%s", "parsing GGUF");
    pti_gguf_facts facts;
    if (!pti_store_gguf_facts(path, &facts))
        return PTI_STORE_BAD_REQUEST;
    config_set_str(c->config, "model_format", "gguf");
    config_set_str(c->config, "model_family", facts.family);
    cJSON_DeleteItemFromObjectCaseSensitive(c->config, "model_families");
    const char *fam = facts.family;
    cJSON_AddItemToObject(c->config, "model_families", cJSON_CreateStringArray(&fam, 1));
    config_set_str(c->config, "model_type", facts.parameter_size);
    config_set_str(c->config, "file_type", facts.quantization);
    report(c, "using existing layer %s", gguf->valuestring);
    set_layer(c, "model", layer_object("model", gguf->valuestring, (double)st.st_size));
    return PTI_STORE_OK;
}

/* parameters: an object of Ollama options; "stop" becomes a list of strings; values are
 * numbers, booleans, strings or lists of them. Merged over the base model's params layer. */
static cJSON *checked_params(const cJSON *params)
{
    cJSON *out = cJSON_CreateObject();
    const cJSON *p;
    cJSON_ArrayForEach(p, params)
    {
        bool scalar = cJSON_IsNumber(p) || cJSON_IsBool(p) || cJSON_IsString(p);
        bool list = cJSON_IsArray(p);
        const cJSON *e;
        cJSON_ArrayForEach(e, (list ? p : NULL)) list = list && cJSON_IsString(e);
        if (!scalar && !list) {
            pti_error(PT_ERR_INVALID_ARG,
                      "parameters: '%.100s' must be a number, boolean, "
                      "string or list of strings",
                      p->string);
            cJSON_Delete(out);
            return NULL;
        }
        cJSON *v = cJSON_Duplicate(p, true);
        if (!strcmp(p->string, "stop") && cJSON_IsString(p)) {
            cJSON_Delete(v);
            const char *s = p->valuestring;
            v = cJSON_CreateStringArray(&s, 1);
        } else if (!strcmp(p->string, "stop") && !cJSON_IsArray(p)) {
            pti_error(PT_ERR_INVALID_ARG, "parameters: 'stop' must be a string or a list");
            cJSON_Delete(v);
            cJSON_Delete(out);
            return NULL;
        }
        cJSON_AddItemToObject(out, p->string, v);
    }
    return out;
}

static bool messages_valid(const cJSON *messages)
{
    const cJSON *m;
    if (!cJSON_IsArray(messages))
        return false;
    cJSON_ArrayForEach(m, messages)
    {
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "role")) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "content")))
            return false;
    }
    return true;
}

/* The request's fields, checked before anything is written. */
typedef struct create_req {
    const char *name, *from, *template_, *system;
    const cJSON *files, *license, *parameters, *messages;
} create_req;

static const char *opt_string(const cJSON *req, const char *key, bool *bad)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, key);
    if (!v || cJSON_IsNull(v))
        return NULL;
    if (!cJSON_IsString(v)) {
        pti_error(PT_ERR_INVALID_ARG, "%s must be a string", key);
        *bad = true;
        return NULL;
    }
    return v->valuestring;
}

static int parse_create(const cJSON *req, create_req *r)
{
    bool bad = false;
    memset(r, 0, sizeof *r);
    if (!cJSON_IsObject(req)) {
        pti_error(PT_ERR_INVALID_ARG, "missing request body");
        return PTI_STORE_BAD_REQUEST;
    }
    r->name = opt_string(req, "model", &bad);
    if (!r->name && !bad)
        r->name = opt_string(req, "name", &bad);
    r->from = bad ? NULL : opt_string(req, "from", &bad);
    r->template_ = bad ? NULL : opt_string(req, "template", &bad);
    r->system = bad ? NULL : opt_string(req, "system", &bad);
    const char *quantize = bad ? NULL : opt_string(req, "quantize", &bad);
    if (bad)
        return PTI_STORE_BAD_REQUEST;
    if (!r->name || !*r->name) {
        pti_error(PT_ERR_INVALID_ARG, "model is required");
        return PTI_STORE_BAD_REQUEST;
    }
    pti_model_name n;
    if (!pti_model_name_parse(r->name, &n))
        return PTI_STORE_BAD_REQUEST;
    if (quantize && *quantize) {
        pti_error(PT_ERR_UNSUPPORTED, "quantizing is not supported: promeserve stores GGUF files "
                                      "as they are; quantize with llama-quantize first");
        return PTI_STORE_BAD_REQUEST;
    }
    /* LoRA adapters are not applied by the engine: a model made with them would silently run
     * without them, so the request is refused (an empty object or null asks for none) */
    const cJSON *adapters = cJSON_GetObjectItemCaseSensitive(req, "adapters");
    if (adapters && !cJSON_IsNull(adapters) &&
        !(cJSON_IsObject(adapters) && cJSON_GetArraySize(adapters) == 0)) {
        pti_error(PT_ERR_UNSUPPORTED, "adapters are not supported: promeserve cannot apply LoRA "
                                      "adapters; merge the adapter into the GGUF file first");
        return PTI_STORE_BAD_REQUEST;
    }
    r->files = cJSON_GetObjectItemCaseSensitive(req, "files");
    r->license = cJSON_GetObjectItemCaseSensitive(req, "license");
    r->parameters = cJSON_GetObjectItemCaseSensitive(req, "parameters");
    r->messages = cJSON_GetObjectItemCaseSensitive(req, "messages");
    const cJSON *e;
    bool license_ok = !r->license || cJSON_IsNull(r->license) || cJSON_IsString(r->license) ||
                      cJSON_IsArray(r->license);
    cJSON_ArrayForEach(e, (cJSON_IsArray(r->license) ? r->license : NULL)) license_ok =
        license_ok && cJSON_IsString(e);
    if (r->files && !cJSON_IsNull(r->files) && !cJSON_IsObject(r->files)) {
        pti_error(PT_ERR_INVALID_ARG, "files must be an object of file names and digests");
        return PTI_STORE_BAD_REQUEST;
    }
    if (!license_ok) {
        pti_error(PT_ERR_INVALID_ARG, "license must be a string or a list of strings");
        return PTI_STORE_BAD_REQUEST;
    }
    if (r->parameters && !cJSON_IsNull(r->parameters) && !cJSON_IsObject(r->parameters)) {
        pti_error(PT_ERR_INVALID_ARG, "parameters must be an object");
        return PTI_STORE_BAD_REQUEST;
    }
    if (r->messages && !cJSON_IsNull(r->messages) && !messages_valid(r->messages)) {
        pti_error(PT_ERR_INVALID_ARG, "messages must be a list of objects with role and content");
        return PTI_STORE_BAD_REQUEST;
    }
    if (cJSON_IsNull(r->files) || cJSON_GetArraySize(r->files) == 0)
        r->files = NULL;
    if (!r->from && !r->files) {
        pti_error(PT_ERR_INVALID_ARG, "neither 'from' or 'files' was specified");
        return PTI_STORE_BAD_REQUEST;
    }
    return PTI_STORE_OK;
}

/* The base params layer (when from gave one) with the request's parameters over it. */
static cJSON *merged_params(creation *c, const cJSON *params)
{
    cJSON *merged = NULL;
    for (cJSON *l = c->layers->child; l && !merged; l = l->next) {
        char path[4096];
        const char *digest = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(l, "digest"));
        if (strcmp(layer_kind(l), "params") ||
            !pti_store_blob_path(c->root, digest, path, sizeof path))
            continue;
        char *text = pti_store_read_file(path, CONFIG_MAX, NULL);
        merged = text ? cJSON_Parse(text) : NULL;
        free(text);
    }
    if (!cJSON_IsObject(merged)) {
        cJSON_Delete(merged);
        merged = cJSON_CreateObject();
    }
    cJSON *req = checked_params(params);
    if (!req) {
        cJSON_Delete(merged);
        return NULL;
    }
    for (cJSON *p = req->child; p;) {
        cJSON *next = p->next;
        cJSON_DeleteItemFromObjectCaseSensitive(merged, p->string);
        cJSON_AddItemToObject(merged, p->string, cJSON_DetachItemViaPointer(req, p));
        p = next;
    }
    cJSON_Delete(req);
    return merged;
}

static bool add_json_layer(creation *c, const char *kind, const cJSON *value)
{
    char *text = cJSON_PrintUnformatted(value);
    bool ok = text && add_text_layer(c, kind, text, false);
    cJSON_free(text);
    return ok;
}

/* The text layers of the request, each replacing the base model's of its kind. */
static int add_request_layers(creation *c, const create_req *r)
{
    if (r->template_ && !add_text_layer(c, "template", r->template_, false))
        return PTI_STORE_FAILED;
    if (r->system && !add_text_layer(c, "system", r->system, false))
        return PTI_STORE_FAILED;
    if (r->license && !cJSON_IsNull(r->license)) {
        drop_layers(c, "license");
        const cJSON *e;
        if (cJSON_IsString(r->license) &&
            !add_text_layer(c, "license", r->license->valuestring, true))
            return PTI_STORE_FAILED;
        cJSON_ArrayForEach(e, (cJSON_IsArray(r->license) ? r->license : NULL))
        {
            if (!add_text_layer(c, "license", e->valuestring, true))
                return PTI_STORE_FAILED;
        }
    }
    if (r->parameters && !cJSON_IsNull(r->parameters) && cJSON_GetArraySize(r->parameters)) {
        cJSON *params = merged_params(c, r->parameters);
        bool ok = params && add_json_layer(c, "params", params);
        cJSON_Delete(params);
        if (!ok)
            return params ? PTI_STORE_FAILED : PTI_STORE_BAD_REQUEST;
    }
    if (r->messages && !cJSON_IsNull(r->messages) && !add_json_layer(c, "messages", r->messages))
        return PTI_STORE_FAILED;
    return PTI_STORE_OK;
}

/* The config blob (Ollama's ConfigV2 with rootfs.diff_ids of the layers) and the manifest. */
static int write_config_and_manifest(creation *c, const char *manifest_path)
{
    cJSON *cfg = c->config;
    if (!cJSON_GetObjectItemCaseSensitive(cfg, "model_format"))
        cJSON_AddStringToObject(cfg, "model_format", "gguf");
    config_set_str(cfg, "architecture", "amd64");
    config_set_str(cfg, "os", "linux");
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "rootfs");
    cJSON *rootfs = cJSON_AddObjectToObject(cfg, "rootfs");
    cJSON_AddStringToObject(rootfs, "type", "layers");
    cJSON *ids = cJSON_AddArrayToObject(rootfs, "diff_ids");
    for (cJSON *l = c->layers->child; l; l = l->next)
        cJSON_AddItemToArray(ids,
                             cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(l, "digest"), true));
    char *cfg_text = cJSON_PrintUnformatted(cfg);
    char cfg_digest[72];
    bool ok = cfg_text && write_blob(c, cfg_text, strlen(cfg_text), cfg_digest, true);
    size_t cfg_len = cfg_text ? strlen(cfg_text) : 0;
    cJSON_free(cfg_text);
    if (!ok)
        return PTI_STORE_FAILED;
    cJSON *man = cJSON_CreateObject();
    cJSON_AddNumberToObject(man, "schemaVersion", 2);
    cJSON_AddStringToObject(man, "mediaType", PTI_MEDIA_MANIFEST);
    cJSON *config = cJSON_AddObjectToObject(man, "config");
    cJSON_AddStringToObject(config, "mediaType", PTI_MEDIA_CONFIG);
    cJSON_AddStringToObject(config, "digest", cfg_digest);
    cJSON_AddNumberToObject(config, "size", (double)cfg_len);
    cJSON_AddItemToObject(man, "layers", cJSON_Duplicate(c->layers, true));
    char *text = cJSON_PrintUnformatted(man);
    cJSON_Delete(man);
    report(c, "%s", "writing manifest");
    ok = text && write_file_atomic(manifest_path, text, strlen(text));
    cJSON_free(text);
    return ok ? PTI_STORE_OK : PTI_STORE_FAILED;
}

int pti_store_create(const char *root, const cJSON *req, pti_store_progress progress, void *user)
{
    create_req r;
    int st = have_root(root) ? parse_create(req, &r) : PTI_STORE_FAILED;
    char manifest[4096];
    if (st == PTI_STORE_OK)
        st = new_manifest_path(root, r.name, manifest, sizeof manifest);
    if (st != PTI_STORE_OK)
        return st;
    creation c = {root, cJSON_CreateArray(), cJSON_CreateObject(), progress, user};
    if (!c.layers || !c.config) {
        cJSON_Delete(c.layers);
        cJSON_Delete(c.config);
        pti_error(PT_ERR_OOM, "create: out of memory");
        return PTI_STORE_FAILED;
    }
    pthread_mutex_lock(&store_lock);
    if (r.from)
        st = take_from(&c, r.from);
    if (st == PTI_STORE_OK && r.files)
        st = take_files(&c, r.files);
    bool has_model = false;
    for (cJSON *l = c.layers ? c.layers->child : NULL; l; l = l->next)
        has_model = has_model || !strcmp(layer_kind(l), "model");
    if (st == PTI_STORE_OK && !has_model) {
        pti_error(PT_ERR_FORMAT, "model '%s' has no model layer", r.from);
        st = PTI_STORE_BAD_REQUEST;
    }
    if (st == PTI_STORE_OK)
        st = add_request_layers(&c, &r);
    if (st == PTI_STORE_OK)
        st = write_config_and_manifest(&c, manifest);
    pthread_mutex_unlock(&store_lock);
    if (st == PTI_STORE_OK)
        report(&c, "%s", "success");
    cJSON_Delete(c.layers);
    cJSON_Delete(c.config);
    return st;
}
