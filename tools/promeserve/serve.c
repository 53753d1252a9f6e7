/* `promeserve serve`: the server's options and OLLAMA_* variables (flags win) mapped onto
 * pt_server_opts, then pt_server_start (include/prometorch/server.h) and signals.
 *
 * Shutdown: SIGINT and SIGTERM handlers write to a pipe the main thread waits on. The first one
 * calls pt_server_stop, which stops accepting connections, makes open streams refuse writes
 * (their generations cancel at the next token and the streams end), waits up to 10 s for
 * requests in flight, closes the connections and unloads the models; then promeserve exits 0.
 * A second signal exits at once (status 130 / 143). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <prometorch/prometorch.h>
#include <prometorch/server.h>

#include "promeserve.h"

/* What the flags and variables set; strings live here until pt_server_start has copied them.
 * Durations and sizes as the command line means them (0 timeout: none; 0 keep-alive: unload
 * when idle), turned into pt_server_opts' conventions by to_opts. */
typedef struct ps_config {
    char host[256];
    int port;
    char models_store[4096];
    char models_dir[4096];
    int n_parallel;
    int max_queue;
    int max_loaded_models;
    int64_t keep_alive_ns;
    int num_ctx;
    int n_threads;
    size_t max_body;
    size_t max_blob;
    int64_t request_timeout_ns;
    char api_key[256];
    char origins[4096];
    bool quiet;
    bool no_prune;
    int64_t header_timeout_ns;
} ps_config;

static void serve_usage(FILE *f)
{
    fputs("Start the server (Ollama's API on 127.0.0.1:11434 by default)\n"
          "\n"
          "Usage:\n"
          "  promeserve serve [flags] [MODEL.gguf ...]\n"
          "\n"
          "Models: names in the Ollama store ($OLLAMA_MODELS, else ~/.ollama/models), files\n"
          "of --models DIR, and the .gguf files given here, by file name with or without\n"
          "\".gguf\".\n"
          "\n"
          "Flags:\n"
          "      --host HOST[:PORT]       address to listen on (OLLAMA_HOST; 127.0.0.1)\n"
          "      --port PORT              port (11434)\n"
          "      --models DIR             a folder of .gguf files to serve by name\n"
          "      --parallel N             sequences decoded together per model\n"
          "                               (OLLAMA_NUM_PARALLEL; 4)\n"
          "      --max-queue N            requests waiting per model before 503\n"
          "                               (OLLAMA_MAX_QUEUE; 512)\n"
          "      --max-loaded-models N    models kept loaded (OLLAMA_MAX_LOADED_MODELS; 3)\n"
          "      --threads N              compute threads (0: all cores)\n"
          "      --ctx N                  default context length (OLLAMA_CONTEXT_LENGTH; 4096)\n"
          "      --keep-alive DUR         how long an idle model stays loaded, \"5m\", \"1h\",\n"
          "                               \"-1\" forever (OLLAMA_KEEP_ALIVE; 5m)\n"
          "      --max-body BYTES         largest JSON request body (16M)\n"
          "      --max-blob BYTES         largest uploaded blob (64G)\n"
          "      --timeout DUR            per-request time limit (10m; 0 none)\n"
          "      --header-timeout DUR     time a client has to send its headers (10s)\n"
          "      --api-key KEY            require \"Authorization: Bearer KEY\"\n"
          "                               (PROMESERVE_API_KEY)\n"
          "      --quiet                  no access log\n"
          "  -h, --help                   this help\n"
          "\n"
          "Environment: OLLAMA_HOST, OLLAMA_MODELS, OLLAMA_NUM_PARALLEL, OLLAMA_MAX_QUEUE,\n"
          "OLLAMA_MAX_LOADED_MODELS, OLLAMA_KEEP_ALIVE, OLLAMA_CONTEXT_LENGTH, OLLAMA_ORIGINS\n"
          "(extra allowed CORS origins, comma-separated, '*' wildcards), OLLAMA_NOPRUNE (no\n"
          "prune of unused blobs and leftovers at start), PROMESERVE_API_KEY.\n",
          f);
}

/* ---- value parsers --------------------------------------------------------------------------- */

static bool parse_int(const char *s, long lo, long hi, int *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

/* Bytes with an optional K/M/G/T suffix (powers of 1024; "KB", "KiB" also accepted). */
static bool parse_bytes(const char *s, size_t *out)
{
    if (!s || !*s || *s == '-')
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return false;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K':
        mult = 1024.0;
        end++;
        break;
    case 'M':
        mult = 1024.0 * 1024;
        end++;
        break;
    case 'G':
        mult = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default: return false;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v * mult > 1e18)
        return false;
    *out = (size_t)(v * mult);
    return true;
}

/* OLLAMA_HOST's forms: "host", "host:port", ":port" (every interface), "[v6]:port",
 * "http://host:port" (scheme http: default port 80, https: 443). A bad port falls back to
 * 127.0.0.1:11434 with a warning, as Ollama does. */
static bool parse_host(const char *in, ps_config *cfg, char *err, size_t err_cap)
{
    char buf[512];
    while (isspace((unsigned char)*in) || *in == '"' || *in == '\'')
        in++;
    snprintf(buf, sizeof buf, "%s", in);
    size_t n = strlen(buf);
    while (n && (isspace((unsigned char)buf[n - 1]) || buf[n - 1] == '"' || buf[n - 1] == '\''))
        buf[--n] = 0;
    int default_port = 11434;
    char *hp = buf;
    char *scheme_end = strstr(buf, "://");
    if (scheme_end) {
        *scheme_end = 0;
        if (!strcasecmp(buf, "http"))
            default_port = 80;
        else if (!strcasecmp(buf, "https"))
            default_port = 443;
        hp = scheme_end + 3;
    }
    char *slash = strchr(hp, '/');
    if (slash)
        *slash = 0;
    char host[300] = "";
    const char *port_s = NULL;
    if (hp[0] == '[') {
        char *close = strchr(hp, ']');
        if (!close) {
            snprintf(err, err_cap, "invalid host \"%s\": missing ']'", in);
            return false;
        }
        *close = 0;
        snprintf(host, sizeof host, "%s", hp + 1);
        if (close[1] == ':')
            port_s = close + 2;
    } else {
        char *colon = strrchr(hp, ':');
        if (colon && strchr(hp, ':') == colon) { /* one colon: host:port */
            *colon = 0;
            port_s = colon + 1;
        }
        snprintf(host, sizeof host, "%s", hp);
    }
    int port = default_port;
    if (port_s && !parse_int(port_s, 0, 65535, &port)) {
        fprintf(stderr, "promeserve: invalid port in \"%s\", using 127.0.0.1:11434\n", in);
        snprintf(cfg->host, sizeof cfg->host, "127.0.0.1");
        cfg->port = 11434;
        return true;
    }
    if (!host[0] && port_s)
        snprintf(host, sizeof host, "0.0.0.0"); /* ":port": every interface, as Go listens */
    else if (!host[0])
        snprintf(host, sizeof host, "127.0.0.1");
    snprintf(cfg->host, sizeof cfg->host, "%s", host);
    cfg->port = port;
    return true;
}

/* ---- configuration --------------------------------------------------------------------------- */

static void config_defaults(ps_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->host, sizeof cfg->host, "127.0.0.1");
    cfg->port = 11434;
    cfg->n_parallel = 4;
    cfg->max_queue = 512;
    cfg->max_loaded_models = 3;
    cfg->keep_alive_ns = 5LL * 60 * 1000000000;
    cfg->num_ctx = 4096;
    cfg->max_body = (size_t)16 << 20;
    cfg->max_blob = (size_t)64 << 30;
    cfg->request_timeout_ns = 10LL * 60 * 1000000000;
    cfg->header_timeout_ns = 10LL * 1000000000;
}

static bool env_int(const char *name, long lo, long hi, int *out, char *err, size_t cap)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return true;
    (void)err;
    (void)cap;
    if (!parse_int(v, lo, hi, out)) /* Ollama warns and keeps the default */
        fprintf(stderr,
                "promeserve: invalid environment variable %s=\"%s\" (a number in [%ld, %ld]), "
                "using the default\n",
                name, v, lo, hi);
    return true;
}

/* A boolean variable as Go's envconfig.Bool reads it: unset or empty (after trimming spaces,
 * then quotes) false; strconv.ParseBool's spellings; anything else true. */
static bool env_bool(const char *name)
{
    const char *v = getenv(name);
    if (!v)
        return false;
    while (*v == ' ' || (*v >= '\t' && *v <= '\r'))
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || (v[n - 1] >= '\t' && v[n - 1] <= '\r')))
        n--;
    while (n && (*v == '"' || *v == '\'')) /* strings.Trim(s, "\"'") */
        v++, n--;
    while (n && (v[n - 1] == '"' || v[n - 1] == '\''))
        n--;
    if (n == 0)
        return false;
    static const char *const no[] = {"0", "f", "F", "false", "FALSE", "False"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (strlen(no[i]) == n && !strncmp(v, no[i], n))
            return false;
    return true; /* "1", "t", "true", ... and, as Go, what ParseBool refuses */
}

static bool config_from_env(ps_config *cfg, char *err, size_t cap)
{
    const char *v = getenv("OLLAMA_HOST");
    if (v && *v && !parse_host(v, cfg, err, cap))
        return false;
    if ((v = getenv("OLLAMA_MODELS")) && *v)
        snprintf(cfg->models_store, sizeof cfg->models_store, "%s", v);
    cfg->no_prune = env_bool("OLLAMA_NOPRUNE");
    if (!env_int("OLLAMA_NUM_PARALLEL", 0, 1024, &cfg->n_parallel, err, cap) ||
        !env_int("OLLAMA_MAX_QUEUE", 0, 1000000, &cfg->max_queue, err, cap) ||
        !env_int("OLLAMA_MAX_LOADED_MODELS", 0, 1024, &cfg->max_loaded_models, err, cap) ||
        !env_int("OLLAMA_CONTEXT_LENGTH", 0, 1 << 24, &cfg->num_ctx, err, cap))
        return false;
    if ((v = getenv("OLLAMA_KEEP_ALIVE")) && *v) {
        if (!pt_server_parse_duration(v, &cfg->keep_alive_ns))
            fprintf(stderr,
                    "promeserve: invalid environment variable OLLAMA_KEEP_ALIVE=\"%s\" (a "
                    "duration such as 5m or -1), using the default\n",
                    v);
    }
    if ((v = getenv("OLLAMA_ORIGINS"))) {
        if (strlen(v) >= sizeof cfg->origins) {
            snprintf(err, cap, "OLLAMA_ORIGINS is too long (%zu bytes at most)",
                     sizeof cfg->origins - 1);
            return false;
        }
        snprintf(cfg->origins, sizeof cfg->origins, "%s", v);
    }
    if ((v = getenv("PROMESERVE_API_KEY"))) {
        if (strlen(v) >= sizeof cfg->api_key) {
            snprintf(err, cap, "PROMESERVE_API_KEY is too long (%zu bytes at most)",
                     sizeof cfg->api_key - 1);
            return false;
        }
        snprintf(cfg->api_key, sizeof cfg->api_key, "%s", v);
    }
    /* 0 means "the default" in Ollama's variables */
    if (cfg->n_parallel == 0)
        cfg->n_parallel = 4;
    if (cfg->max_queue == 0)
        cfg->max_queue = 512;
    if (cfg->max_loaded_models == 0)
        cfg->max_loaded_models = 3;
    if (cfg->num_ctx == 0)
        cfg->num_ctx = 4096;
    return true;
}

/* --flag VALUE or --flag=VALUE; advances *i past what it used. NULL when argv[*i] is not flag. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag, bool *missing)
{
    size_t n = strlen(flag);
    const char *a = argv[*i];
    if (strncmp(a, flag, n))
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n])
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

typedef enum { OPT_INT, OPT_BYTES, OPT_DUR, OPT_STR } opt_kind;

typedef struct opt_def {
    const char *flag;
    opt_kind kind;
    size_t off;
    long lo, hi;
} opt_def;

#define OFF(f) offsetof(ps_config, f)
static const opt_def OPTS[] = {
    {"--port", OPT_INT, OFF(port), 0, 65535},
    {"--parallel", OPT_INT, OFF(n_parallel), 1, 1024},
    {"--max-queue", OPT_INT, OFF(max_queue), 1, 1000000},
    {"--max-loaded-models", OPT_INT, OFF(max_loaded_models), 1, 1024},
    {"--threads", OPT_INT, OFF(n_threads), 0, 4096},
    {"--ctx", OPT_INT, OFF(num_ctx), 1, 1 << 24},
    {"--keep-alive", OPT_DUR, OFF(keep_alive_ns), 0, 0},
    {"--timeout", OPT_DUR, OFF(request_timeout_ns), 0, 0},
    {"--header-timeout", OPT_DUR, OFF(header_timeout_ns), 0, 0},
    {"--max-body", OPT_BYTES, OFF(max_body), 0, 0},
    {"--max-blob", OPT_BYTES, OFF(max_blob), 0, 0},
    {"--models", OPT_STR, OFF(models_dir), 0, 0},
    {"--api-key", OPT_STR, OFF(api_key), 0, 0},
};

static bool apply_opt(ps_config *cfg, const opt_def *o, const char *v, char *err, size_t cap)
{
    char *field = (char *)cfg + o->off;
    bool ok = true;
    switch (o->kind) {
    case OPT_INT: ok = parse_int(v, o->lo, o->hi, (int *)(void *)field); break;
    case OPT_BYTES:
        ok = parse_bytes(v, (size_t *)(void *)field) && *(size_t *)(void *)field > 0;
        break;
    case OPT_DUR: ok = pt_server_parse_duration(v, (int64_t *)(void *)field); break;
    case OPT_STR: {
        size_t fcap = o->off == OFF(models_dir) ? sizeof cfg->models_dir : sizeof cfg->api_key;
        ok = strlen(v) < fcap;
        if (ok)
            snprintf(field, fcap, "%s", v);
        break;
    }
    }
    if (!ok)
        snprintf(err, cap, "invalid value \"%s\" for %s", v, o->flag);
    return ok;
}

/* Parses the command line over cfg. Returns 0 to run, 1 on an error, 2 after --help. */
static int config_from_args(int argc, char **argv, ps_config *cfg, const char **paths, int *n_paths,
                            char *err, size_t cap)
{
    *n_paths = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 2;
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            cfg->quiet = true;
            continue;
        }
        bool missing = false, done = false;
        const char *v = flag_value(argc, argv, &i, "--host", &missing);
        if (v) {
            if (!parse_host(v, cfg, err, cap))
                return 1;
            continue;
        }
        for (size_t k = 0; !missing && k < sizeof OPTS / sizeof OPTS[0]; k++) {
            v = flag_value(argc, argv, &i, OPTS[k].flag, &missing);
            if (v) {
                if (!apply_opt(cfg, &OPTS[k], v, err, cap))
                    return 1;
                done = true;
                break;
            }
        }
        if (missing) {
            snprintf(err, cap, "flag needs an argument: %s", a);
            return 1;
        }
        if (done)
            continue;
        if (a[0] == '-') {
            snprintf(err, cap, "unknown flag: %s", a);
            return 1;
        }
        if (access(a, R_OK)) {
            snprintf(err, cap, "cannot read %s: %s", a, strerror(errno));
            return 1;
        }
        paths[(*n_paths)++] = a;
    }
    return 0;
}

/* ---- signals and the life of the server ------------------------------------------------------ */

/* Signals go through a pipe: the handler only writes to it (or exits at the second one), so
 * it works whichever thread the kernel picks; worker threads of libraries may have signals
 * unblocked. */
static int signal_pipe[2] = {-1, -1};
static volatile sig_atomic_t signals_seen;

static void on_signal(int sig)
{
    if (signals_seen++) {
        static const char msg[] = "promeserve: second signal, exiting now\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(signal_pipe[1], &b, 1);
    (void)w;
}

static bool install_signals(void)
{
    if (pipe(signal_pipe))
        return false;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return true;
}

static int wait_for_signal(void)
{
    unsigned char b = 0;
    for (;;) {
        ssize_t n = read(signal_pipe[0], &b, 1);
        if (n == 1)
            return b;
        if (n < 0 && errno != EINTR)
            return SIGTERM;
    }
}

/* The command line's meanings onto pt_server_opts' (whose zero values are defaults). */
static pt_server_opts to_opts(const ps_config *cfg, const char *const *paths, int n_paths)
{
    pt_server_opts o = {0};
    o.host = cfg->host;
    o.port = cfg->port;
    o.models_store = cfg->models_store[0] ? cfg->models_store : NULL;
    o.models_dir = cfg->models_dir[0] ? cfg->models_dir : NULL;
    o.model_paths = paths;
    o.n_model_paths = n_paths;
    o.n_parallel = cfg->n_parallel;
    o.max_queue = cfg->max_queue;
    o.max_loaded_models = cfg->max_loaded_models;
    o.num_ctx = cfg->num_ctx;
    o.n_threads = cfg->n_threads;
    o.keep_alive_ns = cfg->keep_alive_ns == 0 ? PT_SERVER_UNLOAD_IDLE : cfg->keep_alive_ns;
    o.max_body = cfg->max_body;
    o.max_blob = cfg->max_blob;
    o.request_timeout_ns = cfg->request_timeout_ns == 0 ? -1 : cfg->request_timeout_ns;
    o.header_timeout_ns = cfg->header_timeout_ns == 0 ? -1 : cfg->header_timeout_ns;
    o.api_key = cfg->api_key;
    o.origins = cfg->origins;
    o.quiet = cfg->quiet;
    o.no_prune = cfg->no_prune;
    return o;
}

static int serve_run(const ps_config *cfg, const char *const *paths, int n_paths)
{
    if (!install_signals()) {
        fprintf(stderr, "Error: cannot create the signal pipe: %s\n", strerror(errno));
        return 1;
    }
    pt_server_opts opts = to_opts(cfg, paths, n_paths);
    pt_server *srv = pt_server_start(&opts);
    if (!srv) {
        /* the message without the function name, as promeserve always printed it */
        const char *msg = pt_last_error();
        const char *prefix = "pt_server_start: ";
        if (!strncmp(msg, prefix, strlen(prefix)))
            msg += strlen(prefix);
        fprintf(stderr, "Error: %s\n", msg);
        return 1;
    }
    int sig = wait_for_signal();
    fprintf(stderr, "promeserve: %s received, shutting down\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    pt_server_stop(srv);
    return 0;
}

int ps_cmd_serve(int argc, char **argv)
{
    ps_config *cfg = calloc(1, sizeof *cfg);
    const char **paths = calloc((size_t)argc + 1, sizeof *paths);
    if (!cfg || !paths) {
        fprintf(stderr, "Error: out of memory\n");
        free(cfg);
        free(paths);
        return 1;
    }
    char err[1024] = "";
    config_defaults(cfg);
    int n_paths = 0;
    int rc = config_from_env(cfg, err, sizeof err)
                 ? config_from_args(argc, argv, cfg, paths, &n_paths, err, sizeof err)
                 : 1;
    if (rc == 2) {
        serve_usage(stdout);
        rc = 0;
    } else if (rc == 1) {
        fprintf(stderr, "Error: %s\n", err);
    } else {
        rc = serve_run(cfg, paths, n_paths);
    }
    free(paths);
    free(cfg);
    return rc;
}
