/* promeserve's loaded models: name resolution, loading on first use, keep_alive expiry,
 * least-recently-used unloading past --max-loaded-models, /api/ps.
 *
 * Names resolve, in this order: (1) paths given on the command line, by their file name with
 * or without ".gguf" ("llama-q8_0.gguf", "llama-q8_0", also with ":latest"); (2) files of
 * --models DIR the same way (DIR/<name> or DIR/<name>.gguf; names holding '/' or starting
 * with '.' never match); (3) the Ollama store ("qwen3:4b", "library/qwen3", ...). A plain
 * file's short name is its file name with ".gguf"; a store model's is Ollama's short form.
 *
 * Each loaded model is an entry holding its engine; ps_model_acquire hands out a small
 * per-request handle (so load_duration belongs to the request that loaded it). An entry is in
 * use while handles exist; it is never unloaded then. Loading runs outside the registry lock;
 * others asking for the same model wait for it. When --max-loaded-models are loaded, the least
 * recently used idle one is unloaded first; when all are in use, the request waits up to
 * FULL_WAIT_S for one to become idle and then gets 503. A different num_ctx reloads the model
 * once it is idle (the request waits for that, as Ollama does). A reaper thread unloads idle
 * models whose keep_alive expired.
 *
 * Store layers are read per request, as Ollama does: each acquire re-resolves the name and
 * compares the manifest digest with the loaded one. When only the template/system/params
 * layers changed (same weights blob), a fresh layer set is read and swapped in under the lock;
 * layer sets are reference counted (the entry holds one, each handle one), so requests still
 * using the old strings keep them until they release. When the weights changed the model is
 * reloaded once idle, as for a num_ctx change. A name that no longer resolves (deleted) is 404
 * and its loaded copy unloads when idle. */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "prometorch/core.h"
#include "../llm/model_store.h"
#include "sha256.h"
#include "store_ops.h"
#include "serve_internal.h"

#define FULL_WAIT_S 30
#define LAYER_TEXT_MAX (1 << 20)

/* A model's store layers as read at one manifest digest; shared, reference counted under the
 * registry lock. */
typedef struct layer_set {
    int refs;
    ps_model_ref ref; /* the resolution they were read from (digest, layer paths) */
    cJSON *params;
    char *system, *template_;
} layer_set;

typedef struct entry {
    ps_model_ref ref;  /* as loaded: name and weights never change for an entry */
    layer_set *layers; /* current; NULL until loaded */
    pti_engine *eng;
    int num_ctx;
    int in_use;
    bool loading;
    bool remove_when_idle; /* unload at the last release (keep_alive 0, a num_ctx change) */
    int64_t keep_alive_ns; /* after the last release; < 0 forever */
    int64_t expires_ns;    /* monotonic; INT64_MAX forever; valid while idle */
    int64_t last_used_ns;
    struct entry *next;
} entry;

struct ps_model {
    ps_server *srv; /* the server it was acquired from (its log) */
    entry *e;
    layer_set *layers; /* the set this request started with (one reference) */
    int64_t load_ns;
};

struct ps_registry {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a load finished, a model became idle or was unloaded */
    pthread_cond_t reaper_cv;
    entry *head;
    pthread_t reaper;
    bool reaper_run, reaper_stop;
};

/* ---- name resolution ------------------------------------------------------------------------- */

static bool is_regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* name without a trailing ":latest", and with ".gguf" appended when missing. */
static void file_name_of(const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    if (n > 7 && !strcmp(name + n - 7, ":latest"))
        n -= 7;
    bool has_ext = n >= 5 && !strncmp(name + n - 5, ".gguf", 5);
    snprintf(out, cap, "%.*s%s", (int)n, name, has_ext ? "" : ".gguf");
}

/* false when the path or its file name does not fit the reference (never a truncated path). */
static bool fill_plain_ref(const char *path, ps_model_ref *out)
{
    memset(out, 0, sizeof *out);
    int n = snprintf(out->name, sizeof out->name, "%s", base_name(path));
    int m = snprintf(out->gguf, sizeof out->gguf, "%s", path);
    if (n < 0 || (size_t)n >= sizeof out->name || m < 0 || (size_t)m >= sizeof out->gguf)
        return false;
    uint8_t d[32];
    pti_sha256(path, strlen(path), d);
    pti_sha256_hex(d, out->digest);
    return true;
}

static bool resolve_command_line(const ps_config *cfg, const char *file, ps_model_ref *out)
{
    for (int i = 0; i < cfg->n_model_paths; i++) {
        if (!strcmp(base_name(cfg->model_paths[i]), file))
            return fill_plain_ref(cfg->model_paths[i], out);
    }
    return false;
}

static bool resolve_models_dir(const ps_config *cfg, const char *file, ps_model_ref *out)
{
    if (!cfg->models_dir[0] || file[0] == '.' || strchr(file, '/'))
        return false;
    char path[8400];
    int n = snprintf(path, sizeof path, "%s/%s", cfg->models_dir, file);
    if (n < 0 || (size_t)n >= sizeof out->gguf || !is_regular_file(path))
        return false;
    return fill_plain_ref(path, out);
}

static bool resolve_store(const ps_config *cfg, const char *name, ps_model_ref *out)
{
    pti_model_name mn;
    if (!cfg->models_store[0] || !pti_model_name_parse(name, &mn))
        return false;
    pti_model_files *files = pti_malloc(sizeof *files);
    if (!files)
        return false;
    bool ok = pti_model_store_resolve(cfg->models_store, &mn, files);
    if (ok) {
        memset(out, 0, sizeof *out);
        pti_model_name_format(&mn, out->name, sizeof out->name);
        memcpy(out->gguf, files->model, sizeof out->gguf);
        memcpy(out->template_, files->template_, sizeof out->template_);
        memcpy(out->system, files->system, sizeof out->system);
        memcpy(out->params, files->params, sizeof out->params);
        memcpy(out->manifest, files->manifest, sizeof out->manifest);
        ok = out->gguf[0] && pti_sha256_file(out->manifest, out->digest, NULL);
    }
    free(files);
    return ok;
}

bool ps_model_resolve(ps_server *s, const char *name, ps_model_ref *out)
{
    if (!name || !*name || strlen(name) >= 512)
        return false;
    char file[600];
    file_name_of(name, file, sizeof file);
    const ps_config *cfg = &s->cfg;
    if (resolve_command_line(cfg, file, out) || resolve_models_dir(cfg, file, out))
        return true;
    if (ends_with(name, ".gguf"))
        return false;
    return resolve_store(cfg, name, out);
}

/* ---- layers ---------------------------------------------------------------------------------- */

static char *read_text(const char *path, char *err, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = pti_malloc(LAYER_TEXT_MAX + 1);
    size_t n = buf ? fread(buf, 1, LAYER_TEXT_MAX + 1, f) : 0;
    fclose(f);
    if (!buf || n > LAYER_TEXT_MAX) {
        snprintf(err, cap, "%s is too large for a layer (over %d bytes)", path, LAYER_TEXT_MAX);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

static void layers_free(layer_set *ls)
{
    if (!ls)
        return;
    cJSON_Delete(ls->params);
    free(ls->system);
    free(ls->template_);
    free(ls);
}

static bool read_layer_files(layer_set *ls, char *err, size_t cap)
{
    const ps_model_ref *r = &ls->ref;
    if (r->system[0] && !(ls->system = read_text(r->system, err, cap)))
        return false;
    if (r->template_[0] && !(ls->template_ = read_text(r->template_, err, cap)))
        return false;
    if (r->params[0]) {
        char *text = read_text(r->params, err, cap);
        if (!text)
            return false;
        ls->params = cJSON_Parse(text);
        free(text);
        if (!cJSON_IsObject(ls->params)) {
            snprintf(err, cap, "the params layer %s is not a JSON object", r->params);
            return false;
        }
    }
    return true;
}

/* Reads the layers named by ref into a new set holding one reference; NULL and err on error. */
static layer_set *layers_read(const ps_model_ref *ref, char *err, size_t cap)
{
    layer_set *ls = pti_calloc(1, sizeof *ls);
    if (!ls) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    ls->refs = 1;
    ls->ref = *ref;
    if (!read_layer_files(ls, err, cap)) {
        layers_free(ls);
        return NULL;
    }
    return ls;
}

/* Drops one reference (registry lock held); returns the set when it is to be freed (outside
 * the lock), else NULL. */
static layer_set *layers_unref(layer_set *ls)
{
    return ls && --ls->refs == 0 ? ls : NULL;
}

/* Frees an unlinked entry nobody uses (no handles: their references are gone too). */
static void entry_free(entry *e)
{
    if (!e)
        return;
    pti_engine_free(e->eng);
    layers_free(layers_unref(e->layers));
    free(e);
    /* unloading gives the memory back to the system, as Ollama's (its runner process exits):
     * the caching allocator keeps freed tensor blocks (up to 4 GiB) for reuse, and glibc keeps
     * freed heap pages (blocks below the mmap threshold, the worker threads' arenas). Other
     * loaded models only lose cached free blocks, which they make again on demand. */
    pt_empty_cache();
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

/* ---- the registry ---------------------------------------------------------------------------- */

static int64_t effective_keep_alive(const ps_server *s, int64_t ka)
{
    return ka == INT64_MIN ? s->cfg.keep_alive_ns : ka;
}

/* Removes e from the list (lock held); the caller frees it outside the lock. */
static void unlink_entry(ps_registry *reg, entry *e)
{
    for (entry **pp = &reg->head; *pp; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            e->next = NULL;
            return;
        }
    }
}

static entry *find_entry(ps_registry *reg, const char *name)
{
    for (entry *e = reg->head; e; e = e->next)
        if (!strcmp(e->ref.name, name))
            return e;
    return NULL;
}

static int count_entries(ps_registry *reg)
{
    int n = 0;
    for (entry *e = reg->head; e; e = e->next)
        n++;
    return n;
}

static entry *least_recently_used_idle(ps_registry *reg)
{
    entry *best = NULL;
    for (entry *e = reg->head; e; e = e->next)
        if (!e->loading && e->in_use == 0 && (!best || e->last_used_ns < best->last_used_ns))
            best = e;
    return best;
}

static void *reaper_main(void *arg)
{
    ps_server *s = arg;
    ps_registry *reg = s->reg;
    pthread_mutex_lock(&reg->lock);
    while (!reg->reaper_stop) {
        int64_t now = ps_now_ns();
        entry *expired = NULL;
        for (entry *e = reg->head; e; e = e->next) {
            if (!e->loading && e->in_use == 0 && e->expires_ns <= now) {
                expired = e;
                break;
            }
        }
        if (expired) {
            unlink_entry(reg, expired);
            pthread_cond_broadcast(&reg->changed);
            pthread_mutex_unlock(&reg->lock);
            entry_free(expired);
            pthread_mutex_lock(&reg->lock);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&reg->reaper_cv, &reg->lock, &ts);
    }
    pthread_mutex_unlock(&reg->lock);
    return NULL;
}

bool ps_registry_init(ps_server *s, char *err, size_t err_cap)
{
    ps_registry *reg = pti_calloc(1, sizeof *reg);
    if (!reg) {
        snprintf(err, err_cap, "out of memory");
        return false;
    }
    pthread_mutex_init(&reg->lock, NULL);
    pthread_cond_init(&reg->changed, NULL);
    pthread_cond_init(&reg->reaper_cv, NULL);
    s->reg = reg;
    reg->reaper_run = pthread_create(&reg->reaper, NULL, reaper_main, s) == 0;
    if (!reg->reaper_run) {
        snprintf(err, err_cap, "cannot start the model reaper thread");
        return false;
    }
    return true;
}

void ps_registry_free(ps_server *s)
{
    ps_registry *reg = s->reg;
    if (!reg)
        return;
    if (reg->reaper_run) {
        pthread_mutex_lock(&reg->lock);
        reg->reaper_stop = true;
        pthread_cond_signal(&reg->reaper_cv);
        pthread_mutex_unlock(&reg->lock);
        pthread_join(reg->reaper, NULL);
    }
    entry *e = reg->head;
    while (e) {
        entry *next = e->next;
        if (e->in_use)
            ps_log(s, PT_LOG_WARN, "unloading %s while %d request(s) still hold it", e->ref.name,
                   e->in_use);
        entry_free(e);
        e = next;
    }
    pthread_mutex_destroy(&reg->lock);
    pthread_cond_destroy(&reg->changed);
    pthread_cond_destroy(&reg->reaper_cv);
    free(reg);
    s->reg = NULL;
}

static void deadline_in(struct timespec *ts, int seconds)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += seconds;
}

/* Loads e (marked loading, in the list) outside the lock. Returns with the lock held. */
static bool load_entry(ps_server *s, entry *e, char *err, size_t err_cap)
{
    ps_registry *reg = s->reg;
    pthread_mutex_unlock(&reg->lock);
    pti_engine_opts o = {0};
    o.n_parallel = s->cfg.n_parallel;
    o.num_ctx = e->num_ctx;
    o.max_queue = s->cfg.max_queue;
    o.n_threads = s->cfg.n_threads;
    pti_engine *eng = pti_engine_load(e->ref.gguf, &o);
    layer_set *ls = NULL;
    bool ok = eng != NULL;
    if (!ok)
        snprintf(err, err_cap, "unable to load model %s: %s", e->ref.name, pt_last_error());
    else
        ok = (ls = layers_read(&e->ref, err, err_cap)) != NULL;
    pthread_mutex_lock(&reg->lock);
    e->eng = eng;
    e->layers = ls;
    e->loading = false;
    pthread_cond_broadcast(&reg->changed);
    return ok;
}

/* Makes room for one more model (lock held). False when every loaded model stays busy. */
static bool make_room(ps_server *s, char *err, size_t err_cap)
{
    ps_registry *reg = s->reg;
    int max = s->cfg.max_loaded_models > 0 ? s->cfg.max_loaded_models : 3;
    struct timespec deadline;
    deadline_in(&deadline, FULL_WAIT_S);
    while (count_entries(reg) >= max) {
        entry *victim = least_recently_used_idle(reg);
        if (victim) {
            unlink_entry(reg, victim);
            pthread_mutex_unlock(&reg->lock);
            entry_free(victim);
            pthread_mutex_lock(&reg->lock);
            continue;
        }
        if (ps_server_stopping(s) ||
            pthread_cond_timedwait(&reg->changed, &reg->lock, &deadline) == ETIMEDOUT) {
            snprintf(err, err_cap,
                     "server busy, please try again.  all %d loaded models are in use "
                     "(--max-loaded-models)",
                     max);
            return false;
        }
    }
    return true;
}

static void release_entry(ps_server *s, entry *e, layer_set *held);

/* A handle on e with a reference to its current layers (lock held). */
static ps_model *new_handle(ps_server *s, entry *e, int64_t load_ns)
{
    ps_model *m = pti_malloc(sizeof *m);
    if (m) {
        m->srv = s;
        m->e = e;
        m->layers = e->layers;
        m->layers->refs++;
        m->load_ns = load_ns;
    }
    return m;
}

/* A name that no longer resolves: its loaded copy (by the name's short form) unloads when
 * idle. Returns the entry to free now (unlinked) or NULL. Lock held. */
static entry *forget_loaded(ps_registry *reg, const char *name)
{
    pti_model_name mn;
    char shortname[512];
    if (!name || !pti_model_name_parse(name, &mn))
        return NULL;
    pti_model_name_format(&mn, shortname, sizeof shortname);
    entry *e = find_entry(reg, shortname);
    if (!e || e->ref.manifest[0] == 0)
        return NULL; /* plain files are not in the store */
    if (!e->loading && e->in_use == 0) {
        unlink_entry(reg, e);
        pthread_cond_broadcast(&reg->changed);
        return e;
    }
    e->remove_when_idle = true;
    return NULL;
}

/* Swaps fresh layers (read for the current manifest) into e; the old set is returned to be
 * freed outside the lock when no request holds it any more. Lock held. */
static layer_set *swap_layers(entry *e, layer_set *fresh)
{
    layer_set *old = e->layers;
    e->layers = fresh;
    return layers_unref(old);
}

ps_model *ps_model_acquire(ps_server *s, const char *name, int num_ctx, int64_t keep_alive_ns,
                           int *status, char *err, size_t err_cap)
{
    ps_registry *reg = s->reg;
    ps_model_ref ref;
    if (!ps_model_resolve(s, name, &ref)) {
        pthread_mutex_lock(&reg->lock);
        entry *gone = forget_loaded(reg, name);
        pthread_mutex_unlock(&reg->lock);
        entry_free(gone);
        *status = 404;
        snprintf(err, err_cap, "model '%s' not found", name ? name : "");
        return NULL;
    }
    int want_ctx = num_ctx > 0 ? num_ctx : s->cfg.num_ctx;
    int64_t ka = effective_keep_alive(s, keep_alive_ns);
    layer_set *fresh = NULL; /* layers read for ref when the loaded ones are stale */
    pthread_mutex_lock(&reg->lock);
    for (;;) {
        if (ps_server_stopping(s)) {
            pthread_mutex_unlock(&reg->lock);
            layers_free(fresh);
            *status = 503;
            snprintf(err, err_cap, "server is shutting down");
            return NULL;
        }
        entry *e = find_entry(reg, ref.name);
        /* other context size or other weights (re-created): reload once idle */
        bool reload =
            e && !e->loading && (e->num_ctx != want_ctx || strcmp(e->ref.gguf, ref.gguf) != 0);
        if (e && (e->loading || (reload && e->in_use > 0))) {
            if (!e->loading)
                e->remove_when_idle = true;
            struct timespec ts;
            deadline_in(&ts, 1); /* wake now and then to notice a shutdown */
            pthread_cond_timedwait(&reg->changed, &reg->lock, &ts);
            continue;
        }
        if (reload) { /* idle: unload and load again */
            unlink_entry(reg, e);
            pthread_mutex_unlock(&reg->lock);
            entry_free(e);
            pthread_mutex_lock(&reg->lock);
            continue;
        }
        if (e && strcmp(e->layers->ref.digest, ref.digest) != 0) { /* new layers, same weights */
            if (!fresh || strcmp(fresh->ref.digest, ref.digest) != 0) {
                pthread_mutex_unlock(&reg->lock);
                layers_free(fresh);
                fresh = layers_read(&ref, err, err_cap);
                if (!fresh) {
                    *status = 500;
                    return NULL;
                }
                pthread_mutex_lock(&reg->lock);
                continue; /* e may have gone meanwhile */
            }
            layer_set *old = swap_layers(e, fresh);
            fresh = NULL;
            if (old) {
                pthread_mutex_unlock(&reg->lock);
                layers_free(old);
                pthread_mutex_lock(&reg->lock);
                continue;
            }
        }
        if (e) {
            e->in_use++;
            e->keep_alive_ns = ka;
            e->last_used_ns = ps_now_ns();
            e->remove_when_idle = ka == 0; /* the latest request's keep_alive wins */
            ps_model *m = new_handle(s, e, 0);
            pthread_mutex_unlock(&reg->lock);
            layers_free(fresh);
            if (!m) {
                release_entry(s, e, NULL);
                *status = 500;
                snprintf(err, err_cap, "out of memory");
            }
            return m;
        }
        layers_free(fresh); /* not loaded (any more): the load reads the layers itself */
        fresh = NULL;
        if (!make_room(s, err, err_cap)) {
            pthread_mutex_unlock(&reg->lock);
            *status = 503;
            return NULL;
        }
        if (find_entry(reg, ref.name))
            continue; /* someone else started loading it while we made room */
        e = pti_calloc(1, sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&reg->lock);
            *status = 500;
            snprintf(err, err_cap, "out of memory");
            return NULL;
        }
        e->ref = ref;
        e->num_ctx = want_ctx;
        e->loading = true;
        e->in_use = 1;
        e->keep_alive_ns = ka;
        e->remove_when_idle = ka == 0;
        e->last_used_ns = ps_now_ns();
        e->next = reg->head;
        reg->head = e;
        int64_t t0 = ps_now_ns();
        if (!load_entry(s, e, err, err_cap)) {
            unlink_entry(reg, e);
            pthread_mutex_unlock(&reg->lock);
            entry_free(e);
            *status = 500;
            return NULL;
        }
        ps_model *m = new_handle(s, e, ps_now_ns() - t0);
        pthread_mutex_unlock(&reg->lock);
        if (!m) {
            release_entry(s, e, NULL);
            *status = 500;
            snprintf(err, err_cap, "out of memory");
        }
        return m;
    }
}

/* Ends one use of e. An entry to unload now is left to the reaper thread: the release may come
 * from the model's own engine worker (an on_done callback), which cannot free its engine. */
static void release_entry(ps_server *s, entry *e, layer_set *held)
{
    ps_registry *reg = s->reg;
    pthread_mutex_lock(&reg->lock);
    layer_set *to_free = layers_unref(held);
    e->last_used_ns = ps_now_ns();
    if (--e->in_use == 0) {
        if (e->remove_when_idle || e->keep_alive_ns == 0)
            e->expires_ns = 0; /* the reaper unloads it now */
        else
            e->expires_ns = e->keep_alive_ns < 0 ? INT64_MAX : e->last_used_ns + e->keep_alive_ns;
        pthread_cond_broadcast(&reg->changed);
        pthread_cond_signal(&reg->reaper_cv);
    }
    pthread_mutex_unlock(&reg->lock);
    layers_free(to_free);
}

void ps_model_release(ps_server *s, ps_model *m)
{
    if (!m)
        return;
    release_entry(s, m->e, m->layers);
    free(m);
}

bool ps_model_unload(ps_server *s, const char *name)
{
    ps_model_ref ref;
    ps_registry *reg = s->reg;
    if (!ps_model_resolve(s, name, &ref)) { /* deleted from the store: a loaded copy goes */
        pthread_mutex_lock(&reg->lock);
        entry *gone = forget_loaded(reg, name);
        pthread_mutex_unlock(&reg->lock);
        entry_free(gone);
        return false;
    }
    entry *to_free = NULL;
    pthread_mutex_lock(&reg->lock);
    entry *e = find_entry(reg, ref.name);
    bool was = e != NULL;
    if (e && !e->loading && e->in_use == 0) {
        unlink_entry(reg, e);
        to_free = e;
        pthread_cond_broadcast(&reg->changed);
    } else if (e) {
        e->remove_when_idle = true;
    }
    pthread_mutex_unlock(&reg->lock);
    entry_free(to_free);
    return was;
}

pti_engine *ps_model_engine(ps_model *m)
{
    return m ? m->e->eng : NULL;
}

ps_server *ps_model_server(const ps_model *m)
{
    return m->srv;
}

const ps_model_ref *ps_model_get_ref(const ps_model *m)
{
    return &m->layers->ref;
}

const cJSON *ps_model_params(const ps_model *m)
{
    return m->layers->params;
}

const char *ps_model_system(const ps_model *m)
{
    return m->layers->system;
}

const char *ps_model_template(const ps_model *m)
{
    return m->layers->template_;
}

int64_t ps_model_load_ns(const ps_model *m)
{
    return m->load_ns;
}

/* ---- /api/ps, /health, /metrics -------------------------------------------------------------- */

/* /api/ps's details; parameter_size from the GGUF's facts, the function /api/tags and
 * /api/show use (general.parameter_count, "135M"), so the three agree. */
static cJSON *details_json(const pt_llm_info *info, const char *gguf_path)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "parent_model", "");
    cJSON_AddStringToObject(d, "format", "gguf");
    const char *arch = info && info->architecture ? info->architecture : "";
    cJSON_AddStringToObject(d, "family", arch);
    cJSON *fams = cJSON_AddArrayToObject(d, "families");
    if (fams && arch[0])
        cJSON_AddItemToArray(fams, cJSON_CreateString(arch));
    pti_gguf_facts facts;
    if (!pti_store_gguf_facts(gguf_path, &facts))
        pti_store_human_number(info ? (uint64_t)info->n_params : 0, facts.parameter_size,
                               sizeof facts.parameter_size);
    cJSON_AddStringToObject(d, "parameter_size", facts.parameter_size);
    cJSON_AddStringToObject(d, "quantization_level",
                            info && info->quantization ? info->quantization : "");
    return d;
}

static cJSON *ps_entry_json(const entry *e, int64_t now_mono, int64_t now_wall)
{
    const pt_llm_info *info = pt_llm_get_info(pti_engine_llm(e->eng));
    pti_engine_stats st;
    pti_engine_get_stats(e->eng, &st);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", e->ref.name);
    cJSON_AddStringToObject(o, "model", e->ref.name);
    double size = (double)(info ? info->file_size : 0) + (double)st.kv_bytes;
    cJSON_AddNumberToObject(o, "size", size);
    cJSON_AddStringToObject(o, "digest", e->layers ? e->layers->ref.digest : e->ref.digest);
    cJSON_AddItemToObject(o, "details", details_json(info, e->ref.gguf));
    int64_t left; /* ns from now until it expires */
    if (e->keep_alive_ns < 0)
        left = INT64_MAX - now_wall; /* "forever", as Go's time.Now().Add(MaxInt64) */
    else if (e->in_use > 0)
        left = e->keep_alive_ns;
    else
        left = e->expires_ns - now_mono;
    if (left > INT64_MAX - now_wall)
        left = INT64_MAX - now_wall;
    char when[64];
    ps_format_time(now_wall + left, when, sizeof when);
    cJSON_AddStringToObject(o, "expires_at", when);
    cJSON_AddNumberToObject(o, "size_vram", 0);
    cJSON_AddNumberToObject(o, "context_length", info ? info->num_ctx : e->num_ctx);
    return o;
}

cJSON *ps_registry_ps_json(ps_server *s)
{
    ps_registry *reg = s->reg;
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    int64_t mono = ps_now_ns(), wall = ps_wall_ns();
    pthread_mutex_lock(&reg->lock);
    for (entry *e = reg->head; e; e = e->next) {
        bool unloading = e->in_use == 0 && e->expires_ns <= mono;
        if (!e->loading && e->eng && !unloading)
            cJSON_AddItemToArray(arr, ps_entry_json(e, mono, wall));
    }
    pthread_mutex_unlock(&reg->lock);
    return arr;
}

bool ps_registry_loading(ps_server *s)
{
    ps_registry *reg = s->reg;
    if (!reg)
        return false;
    pthread_mutex_lock(&reg->lock);
    bool loading = false;
    for (entry *e = reg->head; e; e = e->next)
        loading |= e->loading;
    pthread_mutex_unlock(&reg->lock);
    return loading;
}

int ps_registry_stats(ps_server *s, ps_model_stat *out, int cap)
{
    ps_registry *reg = s->reg;
    if (!reg)
        return 0;
    int n = 0;
    pthread_mutex_lock(&reg->lock);
    for (entry *e = reg->head; e; e = e->next, n++) {
        if (n >= cap)
            continue;
        ps_model_stat *st = &out[n];
        memset(st, 0, sizeof *st);
        snprintf(st->name, sizeof st->name, "%s", e->ref.name);
        st->loading = e->loading;
        st->in_use = e->in_use;
        if (e->eng)
            pti_engine_get_stats(e->eng, &st->st);
    }
    pthread_mutex_unlock(&reg->lock);
    return n;
}
