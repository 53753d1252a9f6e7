/* The public face of the HTTP server (include/prometorch/server.h): pt_server_opts into the
 * server's configuration, the start of its parts (metrics, model registry, libmicrohttpd) and
 * the graceful stop, plus the log sink every part writes through (ps_log).
 *
 * Built only with PT_WITH_SERVER; server_off.c gives the same functions otherwise (pt_server_start:
 * PT_ERR_UNSUPPORTED). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/internal.h"
#include "../llm/model_store.h"
#include "prometorch/server.h"
#include "serve_internal.h"
#include "store_ops.h"

#define SHUTDOWN_GRACE_S 10

struct pt_server {
    ps_server srv;
    char **paths; /* copies of opts->model_paths (srv.cfg.model_paths points here) */
    int n_paths;
};

bool pt_server_available(void)
{
    return true;
}

void ps_log(const ps_server *s, pt_log_level level, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (s && s->cfg.log) {
        s->cfg.log(s->cfg.log_user, level, line);
        return;
    }
    /* stderr as promeserve always wrote it: the access log bare, other lines prefixed */
    if (level == PT_LOG_INFO)
        fprintf(stderr, "%s\n", line);
    else
        fprintf(stderr, "promeserve: %s\n", line);
}

size_t ps_server_max_body(const ps_server *s)
{
    return s->cfg.max_body;
}

void ps_store_warn_to_log(void *server, const char *msg)
{
    ps_log(server, PT_LOG_WARN, "model store: %s", msg);
}

/* Copies a string option into a fixed field; false (PT_ERR_INVALID_ARG) when it does not fit. */
static bool copy_opt(char *dst, size_t cap, const char *src, const char *what)
{
    if (!src)
        return true;
    if (strlen(src) >= cap) {
        pti_error(PT_ERR_INVALID_ARG, "pt_server_start: opts.%s is too long (%zu bytes at most)",
                  what, cap - 1);
        return false;
    }
    snprintf(dst, cap, "%s", src);
    return true;
}

static bool check_count(int v, int hi, const char *what)
{
    if (v < 0 || v > hi) {
        pti_error(PT_ERR_INVALID_ARG,
                  "pt_server_start: opts.%s is %d, expected 0 (the default) "
                  "to %d",
                  what, v, hi);
        return false;
    }
    return true;
}

/* opts (zero values: the defaults of server.h) into the configuration the parts read. */
static bool config_from_opts(const pt_server_opts *o, ps_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    if (!check_count(o->port, 65535, "port") || !check_count(o->n_parallel, 1024, "n_parallel") ||
        !check_count(o->max_queue, 1000000, "max_queue") ||
        !check_count(o->max_loaded_models, 1024, "max_loaded_models") ||
        !check_count(o->num_ctx, 1 << 24, "num_ctx") ||
        !check_count(o->n_threads, 4096, "n_threads") ||
        !check_count(o->n_model_paths, 1 << 20, "n_model_paths"))
        return false;
    if (o->n_model_paths > 0 && !o->model_paths) {
        pti_error(PT_ERR_NULL, "pt_server_start: opts.model_paths is NULL but n_model_paths is %d",
                  o->n_model_paths);
        return false;
    }
    snprintf(cfg->host, sizeof cfg->host, "127.0.0.1");
    if (!copy_opt(cfg->host, sizeof cfg->host, o->host && *o->host ? o->host : NULL, "host") ||
        !copy_opt(cfg->models_dir, sizeof cfg->models_dir, o->models_dir, "models_dir") ||
        !copy_opt(cfg->api_key, sizeof cfg->api_key, o->api_key, "api_key") ||
        !copy_opt(cfg->origins, sizeof cfg->origins, o->origins, "origins"))
        return false;
    if (o->models_store) {
        if (!copy_opt(cfg->models_store, sizeof cfg->models_store, o->models_store, "models_store"))
            return false;
    } else if (!pti_model_store_root(cfg->models_store, sizeof cfg->models_store)) {
        cfg->models_store[0] = 0; /* neither $OLLAMA_MODELS nor $HOME: no store */
    }
    cfg->port = o->port;
    cfg->n_parallel = o->n_parallel ? o->n_parallel : 4;
    cfg->max_queue = o->max_queue ? o->max_queue : 512;
    cfg->max_loaded_models = o->max_loaded_models ? o->max_loaded_models : 3;
    cfg->num_ctx = o->num_ctx ? o->num_ctx : 4096;
    cfg->n_threads = o->n_threads;
    if (o->keep_alive_ns == PT_SERVER_UNLOAD_IDLE)
        cfg->keep_alive_ns = 0;
    else
        cfg->keep_alive_ns = o->keep_alive_ns ? o->keep_alive_ns : 5LL * 60 * 1000000000;
    cfg->max_body = o->max_body ? o->max_body : (size_t)16 << 20;
    cfg->max_blob = o->max_blob ? o->max_blob : (size_t)64 << 30;
    if (o->request_timeout_ns < 0)
        cfg->request_timeout_ns = 0; /* the parts read 0 as "no limit" */
    else
        cfg->request_timeout_ns =
            o->request_timeout_ns ? o->request_timeout_ns : 10LL * 60 * 1000000000;
    if (o->header_timeout_ns < 0)
        cfg->header_timeout_ns = 0; /* none */
    else
        cfg->header_timeout_ns = o->header_timeout_ns ? o->header_timeout_ns : 10LL * 1000000000;
    cfg->quiet = o->quiet;
    cfg->no_prune = o->no_prune;
    cfg->log = o->log;
    cfg->log_user = o->log_user;
    return true;
}

static bool copy_paths(pt_server *s, const pt_server_opts *o)
{
    if (o->n_model_paths == 0)
        return true;
    s->paths = pti_calloc((size_t)o->n_model_paths, sizeof *s->paths);
    if (!s->paths) {
        pti_error(PT_ERR_OOM, "pt_server_start: out of memory");
        return false;
    }
    for (int i = 0; i < o->n_model_paths; i++) {
        if (!o->model_paths[i]) {
            pti_error(PT_ERR_NULL, "pt_server_start: opts.model_paths[%d] is NULL", i);
            return false;
        }
        if (!(s->paths[i] = pti_strdup(o->model_paths[i]))) {
            pti_error(PT_ERR_OOM, "pt_server_start: out of memory");
            return false;
        }
        s->n_paths = i + 1;
    }
    s->srv.cfg.model_paths = (const char *const *)s->paths;
    s->srv.cfg.n_model_paths = s->n_paths;
    return true;
}

static void server_free(pt_server *s)
{
    for (int i = 0; i < s->n_paths; i++)
        free(s->paths[i]);
    free(s->paths);
    free(s);
}

pt_server *pt_server_start(const pt_server_opts *opts)
{
    static const pt_server_opts defaults;
    const pt_server_opts *o = opts ? opts : &defaults;
    pt_server *s = pti_calloc(1, sizeof *s);
    if (!s) {
        pti_error(PT_ERR_OOM, "pt_server_start: out of memory");
        return NULL;
    }
    ps_server *srv = &s->srv;
    atomic_init(&srv->stopping, false);
    if (!config_from_opts(o, &srv->cfg) || !copy_paths(s, o)) {
        server_free(s);
        return NULL;
    }
    /* what interrupted uploads and creates left behind, and the blobs no model uses, as
     * Ollama's PruneLayers removes them */
    if (srv->cfg.models_store[0] && !srv->cfg.no_prune) {
        pti_store_set_warn(ps_store_warn_to_log, srv);
        pti_store_prune(srv->cfg.models_store, ps_wall_ns() / 1000000000);
        pti_store_set_warn(NULL, NULL);
    }
    char err[512] = "";
    if (!ps_metrics_init(srv) || !ps_registry_init(srv, err, sizeof err) ||
        !ps_http_start(srv, err, sizeof err)) {
        pti_error(err[0] ? PT_ERR_IO : PT_ERR_OOM, "pt_server_start: %s",
                  err[0] ? err : "out of memory");
        ps_http_free(srv);
        ps_registry_free(srv);
        ps_metrics_free(srv);
        server_free(s);
        return NULL;
    }
    bool v6 = strchr(srv->cfg.host, ':') != NULL;
    ps_log(srv, PT_LOG_INFO, "Listening on %s%s%s:%d (version %s)", v6 ? "[" : "", srv->cfg.host,
           v6 ? "]" : "", srv->cfg.port, PS_VERSION);
    return s;
}

void pt_server_stop(pt_server *s)
{
    if (!s)
        return;
    ps_server *srv = &s->srv;
    atomic_store(&srv->stopping, true);
    ps_http_quiesce(srv);
    ps_http_close_streams(srv);
    int64_t deadline = ps_now_ns() + (int64_t)SHUTDOWN_GRACE_S * 1000000000;
    while (ps_http_active(srv) > 0 && ps_now_ns() < deadline) {
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    if (ps_http_active(srv) > 0)
        ps_log(srv, PT_LOG_WARN, "%d request(s) still running; waiting for them",
               ps_http_active(srv));
    ps_http_stop(srv);
    ps_registry_free(srv);
    ps_http_free(srv);
    ps_metrics_free(srv);
    server_free(s);
}

int pt_server_port(const pt_server *s)
{
    return s ? s->srv.cfg.port : -1;
}

const char *pt_server_host(const pt_server *s)
{
    return s ? s->srv.cfg.host : NULL;
}
