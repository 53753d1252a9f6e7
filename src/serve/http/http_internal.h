/* promeserve's HTTP server: the pieces the endpoint handlers share.
 *
 *   http.c       libmicrohttpd glue: one thread per connection, request bodies collected up
 *                to a limit, routing, CORS, Host check, API key, access log, streaming replies
 *   registry.c   loaded models: load on first use, keep_alive expiry, least-recently-used
 *                unloading past --max-loaded-models, per-model engines (src/serve/engine.h)
 *   metrics.c    counters and /metrics, /health
 *   serve.c      `promeserve serve`: options, OLLAMA_* variables, signals, graceful shutdown
 *   api_ollama.c /api/generate, /api/chat, /api/embed, /api/embeddings
 *   api_openai.c /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models
 *   api_store.c  /api/tags, /api/show, /api/ps, /api/copy, /api/delete, /api/create,
 *                /api/blobs, /api/pull, /api/push, /api/version
 *
 * A handler runs on its connection's thread and must answer exactly once, before returning,
 * with one ps_reply_* call or by opening a stream (ps_reply_stream) that it, or an engine
 * callback, writes and closes later. Handlers may block (a non-streamed generation waits for
 * its end on the connection thread). */
#ifndef PROMESERVE_SERVER_H
#define PROMESERVE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "../../core/internal.h"
#include "../llm/engine.h"
#include "prometorch/server.h"

#define PS_VERSION "0.12.0" /* the Ollama API version we answer /api/version with */

/* ---- configuration (serve.c fills it from flags and OLLAMA_* variables) ------------------- */

typedef struct ps_config {
    char host[256];                 /* bind address, default 127.0.0.1 */
    int port;                       /* default 11434 */
    char models_store[4096];        /* Ollama store root ($OLLAMA_MODELS or ~/.ollama/models) */
    char models_dir[4096];          /* --models DIR of .gguf files ("" none) */
    const char *const *model_paths; /* .gguf paths given on the command line */
    int n_model_paths;
    int n_parallel;             /* --parallel, OLLAMA_NUM_PARALLEL; default 4 */
    int max_queue;              /* --max-queue, OLLAMA_MAX_QUEUE; default 512 */
    int max_loaded_models;      /* --max-loaded-models, OLLAMA_MAX_LOADED_MODELS; default 3 */
    int64_t keep_alive_ns;      /* OLLAMA_KEEP_ALIVE; default 5 min; < 0 forever */
    int num_ctx;                /* OLLAMA_CONTEXT_LENGTH; default 4096 */
    int n_threads;              /* --threads; 0: all cores */
    size_t max_body;            /* --max-body, bytes of a JSON request body; default 16 MiB */
    size_t max_blob;            /* bytes of an uploaded blob; default 64 GiB */
    int64_t request_timeout_ns; /* --timeout; default 10 min; 0 none. Handlers enforce it;
                                 * stream writes fail 5 s past it as a backstop */
    char api_key[256];          /* --api-key / PROMESERVE_API_KEY; "" none */
    char origins[4096];         /* OLLAMA_ORIGINS, comma-separated extra CORS origins */
    bool quiet;                 /* no access log */
    bool no_prune;              /* OLLAMA_NOPRUNE: no prune of the store at start */
    int64_t header_timeout_ns;  /* --header-timeout: a connection must send its request
                                 * headers within this (slow clients are cut); default 10 s */
    pt_server_log_fn log;       /* NULL: stderr (ps_log) */
    void *log_user;
} ps_config;

/* ---- requests and replies (http.c) --------------------------------------------------------- */

typedef struct ps_server ps_server;
typedef struct ps_request ps_request;
typedef struct ps_stream ps_stream;

/* A log line (printf-style, no trailing newline) to the configured sink: opts.log, else
 * stderr (PT_LOG_INFO lines, the access log, bare; others prefixed "promeserve: "). s may be
 * NULL (stderr). */
void ps_log(const ps_server *s, pt_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A pti_store_warn_fn (store_ops.h): the warning as a PT_LOG_WARN line of the server
 * (a ps_server *), "model store: <msg>". */
void ps_store_warn_to_log(void *server, const char *msg);
/* The server's largest JSON request body in bytes (--max-body). */
size_t ps_server_max_body(const ps_server *s);

struct ps_request {
    ps_server *srv;
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* without the query string */
    const char *param;  /* the rest of the path after a prefix route (/api/blobs/X: "X") */
    const char *body;   /* NUL-terminated copy of the body ("" when none) */
    size_t body_len;
    const char *body_file; /* POST /api/blobs/..: the body was written to this temporary file
                            * in <store>/blobs instead (body is ""); the handler renames or
                            * removes it; http.c removes it if it still exists afterwards */
    cJSON *json;           /* the parsed body for routes that take JSON (owned by http.c) */
    void *internal;        /* http.c's connection state */
    /* filled by handlers for the access log (optional) */
    char model[128];
    int64_t tokens_in, tokens_out;
};

/* Answers with a JSON body (taken over, may be NULL for an empty body). */
void ps_reply_json(ps_request *r, int status, cJSON *body);
/* Ollama's error shape {"error": "..."}. */
void ps_reply_error(ps_request *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* OpenAI's error shape {"error": {"message", "type", "param": null, "code": null}}; type is
 * "invalid_request_error" (400), "not_found_error" (404) or "api_error" (other). */
void ps_reply_openai_error(ps_request *r, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void ps_reply_text(ps_request *r, int status, const char *content_type, const char *text,
                   size_t len);
/* Status with an empty body. */
void ps_reply_status(ps_request *r, int status);
/* A reply whose body a generator writes while it is sent, so a big body (an embedding batch)
 * never sits in memory as a whole: fill(user, out, max) writes at most max bytes (max >= 1)
 * and returns how many, 0 at the end; it must not fail (allocate up front).
 * release(user) runs once the body is sent or the client is gone (and when queuing failed).
 * A body that ends within the first 16 KiB is sent with a Content-Length, a longer one
 * chunked, as Go's net/http does. */
typedef size_t (*ps_pull_fn)(void *user, char *out, size_t max);
void ps_reply_pull(ps_request *r, int status, const char *content_type, ps_pull_fn fill, void *user,
                   void (*release)(void *user));

/* A streamed 200 reply (chunked) of content_type ("application/x-ndjson",
 * "text/event-stream"). The returned stream has two owners: the HTTP side and the writer;
 * the writer calls ps_stream_close exactly once when it is done writing (from any thread),
 * after which it must not touch the stream. NULL only when out of memory (a 500 was answered);
 * the ps_stream_* functions accept NULL (writes return false, close does nothing).
 * The bytes reach the client only once the handler has returned (the connection's thread
 * sends them), so a streaming handler submits its work and returns, and the engine's
 * callbacks write and close; a handler that writes everything before returning still works
 * but the client sees it all at the end. Writes are buffered without limit: stop writing when
 * ps_stream_write returns false (client gone, server stopping). */
ps_stream *ps_reply_stream(ps_request *r, const char *content_type);
/* Queues bytes for the client (copied; never blocks on the network). False once the client
 * has gone away, the server is shutting down or the request ran 5 s past --timeout (a
 * backstop; the stream then ends after what was queued): stop generating then. Thread-safe. */
bool ps_stream_write(ps_stream *s, const char *data, size_t len);
/* Writes cJSON_PrintUnformatted(obj) + "\n" (NDJSON) and deletes obj. */
bool ps_stream_write_ndjson(ps_stream *s, cJSON *obj);
/* Writes "data: " + JSON + "\n\n" (SSE) and deletes obj (NULL: "data: [DONE]\n\n"). */
bool ps_stream_write_sse(ps_stream *s, cJSON *obj);
bool ps_stream_alive(const ps_stream *s);
/* Token counts for the access log line of a streamed request (call before ps_stream_close).
 * Once the handler has returned, the writer must not touch the ps_request any more: it is
 * freed when the client hangs up, so r->tokens_* are for replies made before returning. */
void ps_stream_set_tokens(ps_stream *s, int64_t tokens_in, int64_t tokens_out);
void ps_stream_close(ps_stream *s);

/* ---- the server ------------------------------------------------------------------------------ */

const ps_config *ps_server_config(const ps_server *s);
/* True once SIGINT/SIGTERM asked the server to stop. A handler waiting for a non-streamed
 * generation should cancel it then (its on_text returning false when this is true): shutdown
 * waits 10 s for requests in flight before it closes connections and unloads models. */
bool ps_server_stopping(const ps_server *s);
/* The client of r closed its connection (a long non-streamed handler checks this between
 * pieces of work). */
bool ps_request_client_gone(ps_request *r);

/* ---- loaded models (registry.c) ------------------------------------------------------------ */

/* What a model name resolves to (store, --models DIR, command-line path), before loading. */
typedef struct ps_model_ref {
    char name[512];       /* the short name clients use ("qwen3:4b", "smollm2.gguf") */
    char gguf[4096];      /* the weights */
    char template_[4096]; /* store layers ("" none) */
    char system[4096];
    char params[4096];
    char manifest[4096]; /* "" for plain files */
    char digest[72];     /* sha256 hex of the manifest file, or of the path for plain files */
} ps_model_ref;

/* Resolves a request's model name. False when unknown (the caller answers 404
 * "model 'x' not found"). Never loads paths from requests: only names in the store, files in
 * --models DIR and paths given on the command line. Command-line paths and --models DIR files
 * match by file name with or without ".gguf" (and a ":latest" suffix); their short name is
 * the file name with ".gguf". Then the Ollama store (short name as Ollama prints it). */
bool ps_model_resolve(ps_server *s, const char *name, ps_model_ref *out);

typedef struct ps_model ps_model; /* a loaded model */

/* Loads (or finds loaded) the model named `name` with context num_ctx (0: the default; a
 * different value reloads it, as Ollama does), marks it used and holds it until
 * ps_model_release. keep_alive_ns: the new expiry after release (< 0 forever, 0 unload at
 * release, INT64_MIN: the server default). On failure NULL and *status/err say why (404 not
 * found, 500 load error, 503 busy). */
ps_model *ps_model_acquire(ps_server *s, const char *name, int num_ctx, int64_t keep_alive_ns,
                           int *status, char *err, size_t err_cap);
/* (Busy: when --max-loaded-models models are loaded and all are in use, the request waits up
 * to 30 s for one to become idle, then gets 503 "server busy, please try again. ...".) */
/* Ends the use (frees the handle). May be called from any thread, including the model's
 * engine worker in an on_done callback: unloading is left to the registry's reaper thread. */
void ps_model_release(ps_server *s, ps_model *m);
/* Unloads a model now if loaded and not in use (an empty generate with keep_alive 0).
 * Returns whether it was loaded. */
bool ps_model_unload(ps_server *s, const char *name);

pti_engine *ps_model_engine(ps_model *m);
const ps_model_ref *ps_model_get_ref(const ps_model *m);
/* The server m was acquired from. */
ps_server *ps_model_server(const ps_model *m);
/* The params layer (a JSON object of Ollama options, applied under the request's options)
 * and the system layer text; NULL when the model has none; owned by the model. */
const cJSON *ps_model_params(const ps_model *m);
const char *ps_model_system(const ps_model *m);
/* The template layer text (Ollama Go template; NULL none), owned by the model. */
const char *ps_model_template(const ps_model *m);
/* load_duration of the request that loaded it (0 when it was already loaded). */
int64_t ps_model_load_ns(const ps_model *m);

/* /api/ps: the loaded models, as a cJSON array of Ollama's objects. */
cJSON *ps_registry_ps_json(ps_server *s);
/* Whether any model is being loaded right now (/health answers 503 then). */
bool ps_registry_loading(ps_server *s);

/* ---- metrics (metrics.c) --------------------------------------------------------------------- */

/* http.c counts every request itself. */
void ps_metrics_request(ps_server *s, const char *route, int status, int64_t ns);
/* Handlers call this once per finished generation (prompt tokens, generated tokens, the time
 * generating them): /metrics' token counters and tokens/s come from it. */
void ps_metrics_tokens(ps_server *s, int64_t prompt_tokens, int64_t gen_tokens, int64_t gen_ns);

/* ---- handlers -------------------------------------------------------------------------------- */

/* api_ollama.c */
void ps_api_generate(ps_request *r);
void ps_api_chat(ps_request *r);
void ps_api_embed(ps_request *r);
void ps_api_embeddings(ps_request *r);
/* api_openai.c */
void ps_api_v1_chat(ps_request *r);
void ps_api_v1_completions(ps_request *r);
void ps_api_v1_embeddings(ps_request *r);
void ps_api_v1_models(ps_request *r);
void ps_api_v1_model(ps_request *r); /* /v1/models/{id}: id in r->param */
/* api_store.c */
void ps_api_tags(ps_request *r);
void ps_api_show(ps_request *r);
void ps_api_ps(ps_request *r);
void ps_api_version(ps_request *r);
void ps_api_copy(ps_request *r);
void ps_api_delete(ps_request *r);
void ps_api_create(ps_request *r);
void ps_api_blob_head(ps_request *r); /* digest in r->param */
void ps_api_blob_post(ps_request *r); /* raw body: r->body, r->body_len */
void ps_api_pull(ps_request *r);
void ps_api_push(ps_request *r);

#endif
