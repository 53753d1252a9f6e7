/* promeserve's model-management endpoints: /api/tags, /api/show, /api/ps, /api/version,
 * /api/copy, /api/delete, /api/create, HEAD/POST /api/blobs/:digest, /api/pull, /api/push.
 * Thin handlers: the store work is src/serve/store_ops.h; here are only the request fields,
 * the statuses and texts Ollama answers with (ollama-api.md 1.5) and create's status stream.
 *
 * pull and push: promeserve never talks to a registry (it runs offline by design), so both
 * answer 501 Not Implemented with a message saying so and what to do instead; a pull of a
 * model that is already available answers success, as Ollama's does once it finds every layer
 * present, so clients that "pull before use" keep working. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prometorch/core.h"
#include "api_request.h"
#include "../llm/model_store.h"
#include "store_ops.h"
#include "http_internal.h"

/* A field that must be a string when present (and not null); answers 400 naming it. */
static bool string_typed(ps_request *r, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, key);
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v)) {
        ps_reply_error(r, 400, "\"%s\" must be a string", key);
        return false;
    }
    return true;
}

/* The "model" field, or the legacy "name"; NULL (after answering 400) when neither is a
 * non-empty string or one is not a string. */
static const char *required_model(ps_request *r)
{
    if (!string_typed(r, "model") || !string_typed(r, "name"))
        return NULL;
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r->json, "model"));
    if (!name || !*name)
        name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r->json, "name"));
    if (!name || !*name) {
        ps_reply_error(r, 400, "model is required");
        return NULL;
    }
    snprintf(r->model, sizeof r->model, "%s", name);
    return name;
}

static const char *store_root(ps_request *r)
{
    return ps_server_config(r->srv)->models_store;
}

/* Answers a failed store operation: status from the PTI_STORE_* code, text from the error. */
static void reply_store_error(ps_request *r, int status, const char *name)
{
    const char *msg = pt_last_error();
    if (status == PTI_STORE_NOT_FOUND && name)
        ps_reply_error(r, 404, "model '%s' not found", name);
    else
        ps_reply_error(r, status >= 400 ? status : 500, "%s",
                       msg && *msg ? msg : "model store error");
}

void ps_api_version(ps_request *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", PS_VERSION);
    ps_reply_json(r, 200, o);
}

void ps_api_tags(ps_request *r)
{
    const ps_config *cfg = ps_server_config(r->srv);
    cJSON *list =
        pti_store_list(cfg->models_store, cfg->models_dir, cfg->model_paths, cfg->n_model_paths);
    if (!list) {
        ps_reply_error(r, 500, "out of memory listing models");
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "models", list);
    ps_reply_json(r, 200, o);
}

void ps_api_ps(ps_request *r)
{
    cJSON *models = ps_registry_ps_json(r->srv);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "models", models ? models : cJSON_CreateArray());
    ps_reply_json(r, 200, o);
}

/* Whether name has a manifest in the store. */
static bool in_store(const char *root, const char *name)
{
    pti_model_name n;
    char path[4096];
    bool found = root && *root && pti_model_name_parse(name, &n) &&
                 pti_model_store_manifest_path(root, &n, path, sizeof path);
    pt_clear_error();
    return found;
}

void ps_api_show(ps_request *r)
{
    const char *name = required_model(r);
    if (!name)
        return;
    bool verbose = false;
    if (pti_api_bool(r->json, "verbose", false, &verbose) != PT_OK) {
        ps_reply_error(r, 400, "%s", pt_last_error());
        return;
    }
    int status = PTI_STORE_NOT_FOUND;
    cJSON *show = NULL;
    ps_model_ref ref = {0};
    /* the same resolution as generate (plain files first), then a store model that does not
     * resolve (a missing blob) for its real error */
    if (ps_model_resolve(r->srv, name, &ref) && !ref.manifest[0])
        show = pti_store_show_file(ref.gguf, ref.name, verbose, &status);
    else if (ref.manifest[0] || in_store(store_root(r), name))
        show = pti_store_show(store_root(r), name, verbose, &status);
    if (!show) {
        reply_store_error(r, status, name);
        return;
    }
    ps_reply_json(r, 200, show);
}

/* copy's and delete's request strings. */
static const char *string_field(ps_request *r, const char *key)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r->json, key));
    return s && *s ? s : NULL;
}

void ps_api_copy(ps_request *r)
{
    if (!string_typed(r, "source") || !string_typed(r, "destination"))
        return;
    const char *src = string_field(r, "source"), *dst = string_field(r, "destination");
    if (!src || !dst) {
        ps_reply_error(r, 400, "source and destination are required");
        return;
    }
    snprintf(r->model, sizeof r->model, "%s", src);
    int st = pti_store_copy(store_root(r), src, dst);
    if (st != PTI_STORE_OK) {
        reply_store_error(r, st, src);
        return;
    }
    ps_reply_status(r, 200);
}

void ps_api_delete(ps_request *r)
{
    const char *name = required_model(r);
    if (!name)
        return;
    int st = pti_store_delete(store_root(r), name);
    if (st != PTI_STORE_OK) {
        reply_store_error(r, st, name);
        return;
    }
    ps_model_unload(r->srv, name); /* a loaded copy goes too (if nobody is using it now) */
    ps_reply_status(r, 200);
}

/* ---- create ---------------------------------------------------------------------------------- */

typedef struct create_ctx {
    ps_request *r;
    bool stream_wanted;
    ps_stream *stream; /* opened at the first status, so that request errors get a status */
} create_ctx;

static cJSON *status_object(const char *status)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", status);
    return o;
}

static void create_progress(const char *status, void *user)
{
    create_ctx *c = user;
    if (!c->stream_wanted)
        return;
    if (!c->stream)
        c->stream = ps_reply_stream(c->r, "application/x-ndjson");
    if (c->stream)
        ps_stream_write_ndjson(c->stream, status_object(status));
}

void ps_api_create(ps_request *r)
{
    if (!required_model(r))
        return;
    if (!store_root(r)[0]) {
        ps_reply_error(r, 500, "no model store: set OLLAMA_MODELS or HOME");
        return;
    }
    bool stream = true;
    if (pti_api_bool(r->json, "stream", true, &stream) != PT_OK) {
        ps_reply_error(r, 400, "%s", pt_last_error());
        return;
    }
    create_ctx c = {r, stream, NULL};
    int st = pti_store_create(store_root(r), r->json, create_progress, &c);
    if (c.stream) {
        if (st != PTI_STORE_OK) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "error", pt_last_error() ? pt_last_error() : "failed");
            ps_stream_write_ndjson(c.stream, e);
        }
        ps_stream_close(c.stream);
        return;
    }
    if (st != PTI_STORE_OK) {
        const char *from = string_field(r, "from");
        reply_store_error(r, st, from);
        return;
    }
    if (c.stream_wanted) { /* success without a single status cannot happen, but answer it */
        ps_stream *s = ps_reply_stream(r, "application/x-ndjson");
        if (s) {
            ps_stream_write_ndjson(s, status_object("success"));
            ps_stream_close(s);
        }
        return;
    }
    ps_reply_json(r, 200, status_object("success"));
}

/* ---- blobs ----------------------------------------------------------------------------------- */

void ps_api_blob_head(ps_request *r)
{
    int st = pti_store_blob_check(store_root(r), r->param);
    if (st == PTI_STORE_OK)
        ps_reply_status(r, 200);
    else if (st == PTI_STORE_NOT_FOUND)
        ps_reply_status(r, 404);
    else
        reply_store_error(r, st, NULL);
}

/* When the body came in memory rather than as a file: writes it to a temporary file in the
 * store's blobs directory. False (after answering) on failure. */
static bool body_to_file(ps_request *r, char *path, size_t cap)
{
    int k = snprintf(path, cap, "%s/blobs/upload-XXXXXX", store_root(r));
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/blobs", store_root(r));
    mkdir(store_root(r), 0755);
    mkdir(dir, 0755);
    int fd = k > 0 && (size_t)k < cap ? mkstemp(path) : -1;
    bool ok = fd >= 0;
    for (size_t done = 0; ok && done < r->body_len;) {
        ssize_t n = write(fd, r->body + done, r->body_len - done);
        ok = n > 0;
        done += ok ? (size_t)n : 0;
    }
    if (fd >= 0 && close(fd) != 0)
        ok = false;
    if (!ok) {
        if (fd >= 0)
            unlink(path);
        ps_reply_error(r, 500, "cannot store the upload in %s", dir);
    }
    return ok;
}

void ps_api_blob_post(ps_request *r)
{
    if (!pti_store_digest_valid(r->param)) {
        if (r->body_file && *r->body_file)
            unlink(r->body_file);
        pt_clear_error();
        pti_store_blob_check(store_root(r), r->param); /* sets the message */
        reply_store_error(r, 400, NULL);
        return;
    }
    char tmp[4200];
    const char *file = r->body_file;
    if (!file || !*file) {
        if (!body_to_file(r, tmp, sizeof tmp))
            return;
        file = tmp;
    }
    int st = pti_store_blob_commit(store_root(r), file, r->param);
    if (st != PTI_STORE_OK) {
        reply_store_error(r, st, NULL);
        return;
    }
    ps_reply_status(r, 201);
}

/* ---- pull and push --------------------------------------------------------------------------- */

void ps_api_pull(ps_request *r)
{
    const char *name = required_model(r);
    if (!name)
        return;
    bool stream = true;
    if (pti_api_bool(r->json, "stream", true, &stream) != PT_OK) {
        ps_reply_error(r, 400, "%s", pt_last_error());
        return;
    }
    ps_model_ref ref;
    if (ps_model_resolve(r->srv, name, &ref)) {
        if (!stream) {
            ps_reply_json(r, 200, status_object("success"));
            return;
        }
        ps_stream *s = ps_reply_stream(r, "application/x-ndjson");
        if (s) {
            ps_stream_write_ndjson(s, status_object("success"));
            ps_stream_close(s);
        }
        return;
    }
    ps_reply_error(r, 501,
                   "pulling '%s' is not supported: promeserve has no registry access (it works "
                   "offline); pull it with Ollama into the same store (OLLAMA_MODELS), or upload "
                   "a GGUF with /api/blobs and /api/create",
                   name);
}

void ps_api_push(ps_request *r)
{
    const char *name = required_model(r);
    if (!name)
        return;
    ps_reply_error(r, 501,
                   "pushing '%s' is not supported: promeserve has no registry access (it works "
                   "offline); push with Ollama from the same store (OLLAMA_MODELS)",
                   name);
}
