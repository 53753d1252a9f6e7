/* PromeTorch's Ollama-compatible HTTP server, embeddable in a host program (DESIGN.md §5,
 * docs/promeserve.md). `promeserve serve` is a thin command line over these functions.
 *
 * pt_server_start binds the address, starts the server's threads (one per connection, one
 * engine worker per loaded model, a reaper for idle models) and returns at once; the server
 * answers Ollama's API (/api/generate, /api/chat, /api/embed, /api/tags, ...), OpenAI's /v1/
 * endpoints, /metrics, /health and a chat page at / until pt_server_stop. Models are loaded on
 * first use from the Ollama store, a folder of .gguf files and the paths given in the options.
 *
 * The server installs no signal handler: a host that wants Ctrl-C to stop it calls
 * pt_server_stop from its own handling (promeserve does on SIGINT/SIGTERM). SIGPIPE should be
 * ignored by the host (a client hanging up mid-reply would otherwise kill the process);
 * pt_server_start does not change it.
 *
 * Errors: pt_server_start gives NULL with pt_last_status()/pt_last_error() set: PT_ERR_IO when
 * the address cannot be bound, PT_ERR_INVALID_ARG for a bad option, PT_ERR_UNSUPPORTED when the
 * library was built without the server (CMake option PT_WITH_SERVER, which needs
 * libmicrohttpd; pt_server_available() says which). */
#ifndef PROMETORCH_SERVER_H
#define PROMETORCH_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pt_server pt_server;

/* Severity of a line the server logs. */
typedef enum pt_log_level {
    PT_LOG_ERROR = 0, /* something failed (a reply could not be queued, ...) */
    PT_LOG_WARN = 1,  /* something odd that the server survived */
    PT_LOG_INFO = 2,  /* the access log (one line per request), the "Listening on" line */
} pt_log_level;

/* Receives one log line (no trailing newline) from any of the server's threads, so it must be
 * thread-safe; it must not call pt_server_stop. */
typedef void (*pt_server_log_fn)(void *user, pt_log_level level, const char *msg);

/* The keep_alive value that unloads a model as soon as no request uses it (Ollama's
 * OLLAMA_KEEP_ALIVE=0). */
#define PT_SERVER_UNLOAD_IDLE INT64_MIN

/* Server options. The zero value (or a NULL pointer) is the default shown for each field. */
typedef struct pt_server_opts {
    const char *host; /* address to listen on; NULL: "127.0.0.1" ("0.0.0.0": every interface) */
    int port;         /* 0: a free port the system picks (pt_server_port tells which);
                       * Ollama's usual port is 11434 */
    const char *models_store;       /* the Ollama store root; NULL: $OLLAMA_MODELS, else
                                     * ~/.ollama/models */
    const char *models_dir;         /* a folder of .gguf files served by file name; NULL: none */
    const char *const *model_paths; /* .gguf files served by file name (n_model_paths of them) */
    int n_model_paths;
    int n_parallel;             /* sequences decoded together per model; 0: 4 */
    int max_queue;              /* requests waiting per model before 503; 0: 512 */
    int max_loaded_models;      /* models kept loaded; 0: 3 */
    int num_ctx;                /* default context length; 0: 4096 */
    int n_threads;              /* compute threads; 0: all cores */
    int64_t keep_alive_ns;      /* how long an idle model stays loaded; 0: 5 minutes; < 0 (but
                                 * not PT_SERVER_UNLOAD_IDLE): forever */
    size_t max_body;            /* largest JSON request body in bytes (413 past it); 0: 16 MiB */
    size_t max_blob;            /* largest uploaded blob (POST /api/blobs); 0: 64 GiB */
    int64_t request_timeout_ns; /* per-request time limit; 0: 10 minutes; < 0: none */
    int64_t header_timeout_ns;  /* time a connection has to send its request headers (slow
                                 * clients are cut); 0: 10 s; < 0: none */
    const char *api_key;        /* NULL or "": none; else every request but the preflight needs
                                 * "Authorization: Bearer KEY" */
    const char *origins;        /* extra allowed CORS origins, comma-separated, '*' wildcards
                                 * (OLLAMA_ORIGINS' form); NULL: only the loopback ones */
    bool quiet;                 /* no access log */
    bool no_prune;              /* keep unused blobs and leftovers of interrupted uploads (by
                                 * default they are removed at start, as Ollama does) */
    pt_server_log_fn log;       /* NULL: lines go to stderr, prefixed "promeserve: " */
    void *log_user;             /* passed to log */
} pt_server_opts;

/* Whether this build of the library has the server (PT_WITH_SERVER). */
PT_API bool pt_server_available(void);

/* Starts a server with opts (NULL: all defaults). Environment variables are not read here
 * (promeserve maps OLLAMA_* onto these options), except $OLLAMA_MODELS / $HOME for the default
 * store. Returns once it accepts connections; NULL on an error (see the top of this file). */
PT_API pt_server *pt_server_start(const pt_server_opts *opts);

/* Stops s and frees it: stops accepting connections, makes open streams refuse writes (their
 * generations cancel at the next token and the streams end), waits up to 10 s for requests in
 * flight, closes the connections and unloads the models. NULL does nothing. */
PT_API void pt_server_stop(pt_server *s);

/* The port s listens on (the one the system picked when opts.port was 0); -1 for NULL. */
PT_API int pt_server_port(const pt_server *s);
/* The address s listens on, as given ("127.0.0.1" by default); NULL for NULL. */
PT_API const char *pt_server_host(const pt_server *s);

/* Parses a duration as OLLAMA_KEEP_ALIVE and Ollama's keep_alive take it: Go durations ("5m",
 * "1h30m", "1.5s", "-1m") or a plain number of seconds ("-1"). False (PT_ERR_INVALID_ARG)
 * when malformed. Works without the server too. */
PT_API bool pt_server_parse_duration(const char *s, int64_t *ns);

#ifdef __cplusplus
}
#endif

#endif
