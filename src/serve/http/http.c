/* promeserve's HTTP layer on libmicrohttpd: one thread per connection, request bodies collected
 * up to a limit (blob uploads go to a temporary file instead), the Ollama routing table, CORS,
 * the Host check against DNS rebinding, the optional API key, replies, streamed replies and
 * the access log.
 *
 * A request goes through the access handler in three steps: the first call (headers only)
 * finds the route and applies the checks that need no body (CORS, Host, key, method, declared
 * size), answering at once when one fails; the next calls hand over the body in pieces; the
 * last one (no more data) parses the JSON and runs the handler. The access log line is written
 * when MHD reports the request complete, so a stream's line carries its final size.
 *
 * Streams: a ps_stream is a byte buffer with two owners, the MHD response (its content reader
 * runs on the connection thread and waits on a condition variable for bytes) and the writer
 * (a handler or an engine callback). When the client goes away MHD frees the response; the
 * stream is then dead and every later write returns false, which is how a disconnect cancels
 * a generation. Whoever drops the last reference frees it.
 *
 * Slow clients: MHD's idle timeout does not cut a client that sends one byte a second, so a
 * watchdog thread shuts down connections that have not finished their headers within
 * cfg.header_timeout_ns. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../core/utf8.h"
#include "serve_internal.h"
#include "store_ops.h"

#ifdef PS_HAVE_CHAT_PAGE
#include "chat_page.h"
#endif

#define STREAM_POLL_MS 200
#define STREAM_TIMEOUT_GRACE_NS (5 * 1000000000LL)
#define WATCHDOG_PERIOD_MS 500
#define PULL_FIRST 16384 /* ps_reply_pull: a body shorter than this gets a Content-Length */

/* ---- connections and the watchdog ----------------------------------------------------------- */

enum conn_phase { PHASE_HEADERS, PHASE_BODY, PHASE_REQUEST };
#define BODY_TIMEOUT_FACTOR 6 /* a JSON body must arrive within 6 header timeouts */

/* Connections still sending their request (headers, or a JSON body) or idle between
 * keep-alive requests: at most this many per client address and in all. A new connection past
 * either bound cuts the oldest such connection of that client (of anyone for the total), so
 * connections that trickle bytes cannot hold every place of --parallel/--max-queue's
 * connection limit (thread per connection) while the watchdog waits out their timeout. */
#define PENDING_PER_CLIENT 64
#define PENDING_MAX 256

typedef struct conn_rec {
    int fd;
    int phase;
    int64_t since;
    bool cut;
    uint8_t addr[17]; /* the client's address: family byte, then 4 or 16 bytes */
    struct conn_rec *prev, *next;
} conn_rec;

typedef struct ps_stream_list {
    ps_stream *head;
} ps_stream_list;

struct ps_http {
    ps_server *srv;
    struct MHD_Daemon *mhd;
    pthread_mutex_t lock; /* conns, streams, active */
    conn_rec *conns;
    ps_stream *streams;
    int active;
    bool streams_closed;
    pthread_t watchdog;
    pthread_cond_t watchdog_cv;
    bool watchdog_run, watchdog_stop;
    bool loopback; /* bound to a loopback address: the Host check applies */
};

static void *watchdog_main(void *arg)
{
    ps_http *h = arg;
    int64_t limit = h->srv->cfg.header_timeout_ns;
    pthread_mutex_lock(&h->lock);
    while (!h->watchdog_stop) {
        int64_t now = ps_now_ns();
        for (conn_rec *c = h->conns; c; c = c->next) {
            int64_t lim = c->phase == PHASE_BODY ? limit * BODY_TIMEOUT_FACTOR : limit;
            bool timed = c->phase == PHASE_HEADERS || c->phase == PHASE_BODY;
            if (limit > 0 && timed && !c->cut && now - c->since > lim) {
                shutdown(c->fd, SHUT_RDWR); /* the connection's thread sees EOF and ends */
                c->cut = true;
            }
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCHDOG_PERIOD_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&h->watchdog_cv, &h->lock, &ts);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static bool conn_pending(const conn_rec *c)
{
    return !c->cut && (c->phase == PHASE_HEADERS || c->phase == PHASE_BODY);
}

static void conn_addr(struct MHD_Connection *connection, uint8_t addr[17])
{
    memset(addr, 0, 17);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET) {
        addr[0] = 4;
        memcpy(addr + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        addr[0] = 6;
        memcpy(addr + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
}

/* Under h->lock, c just added: applies PENDING_PER_CLIENT and PENDING_MAX. */
static void cut_oldest_pending(ps_http *h, const conn_rec *c)
{
    int same = 0, all = 0;
    conn_rec *oldest_same = NULL, *oldest = NULL;
    for (conn_rec *o = h->conns; o; o = o->next) {
        if (!conn_pending(o))
            continue;
        all++;
        if (o != c && (!oldest || o->since < oldest->since))
            oldest = o;
        if (!memcmp(o->addr, c->addr, sizeof c->addr)) {
            same++;
            if (o != c && (!oldest_same || o->since < oldest_same->since))
                oldest_same = o;
        }
    }
    conn_rec *victim = same > PENDING_PER_CLIENT ? oldest_same : all > PENDING_MAX ? oldest : NULL;
    if (victim && victim->fd >= 0) {
        shutdown(victim->fd, SHUT_RDWR); /* its thread sees EOF and ends */
        victim->cut = true;
    }
}

static void notify_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe)
{
    ps_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_rec *c = pti_calloc(1, sizeof *c);
        *socket_context = c;
        if (!c)
            return;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        c->fd = ci ? ci->connect_fd : -1;
        c->phase = PHASE_HEADERS;
        c->since = ps_now_ns();
        conn_addr(connection, c->addr);
        pthread_mutex_lock(&h->lock);
        c->next = h->conns;
        if (h->conns)
            h->conns->prev = c;
        h->conns = c;
        cut_oldest_pending(h, c);
        pthread_mutex_unlock(&h->lock);
    } else {
        conn_rec *c = *socket_context;
        if (!c)
            return;
        pthread_mutex_lock(&h->lock);
        if (c->prev)
            c->prev->next = c->next;
        else
            h->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        pthread_mutex_unlock(&h->lock);
        free(c);
        *socket_context = NULL;
    }
}

static conn_rec *conn_rec_of(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void conn_set_phase(ps_http *h, struct MHD_Connection *connection, int phase)
{
    conn_rec *c = conn_rec_of(connection);
    if (!c)
        return;
    pthread_mutex_lock(&h->lock);
    c->phase = phase;
    c->since = ps_now_ns();
    pthread_mutex_unlock(&h->lock);
}

/* ---- per-request state ---------------------------------------------------------------------- */

enum {
    M_GET = 1,
    M_HEAD = 2,
    M_POST = 4,
    M_DELETE = 8,
    M_PUT = 16,
    M_PATCH = 32,
    M_OPTIONS = 64,
};

enum body_kind { BODY_NONE, BODY_JSON, BODY_FILE };

typedef void (*route_fn)(ps_request *r);

typedef struct route {
    const char *path; /* exact path, or a prefix when it ends with '/' and prefix is set */
    bool prefix;
    int methods;
    enum body_kind body;
    bool openai;       /* errors in OpenAI's shape */
    const char *label; /* the route in metrics */
    route_fn fn;
} route;

static void handle_root(ps_request *r);
static void handle_health(ps_request *r);
static void handle_metrics(ps_request *r);

static const route ROUTES[] = {
    {"/", false, M_GET | M_HEAD, BODY_NONE, false, "/", handle_root},
    {"/health", false, M_GET | M_HEAD, BODY_NONE, false, "/health", handle_health},
    {"/metrics", false, M_GET, BODY_NONE, false, "/metrics", handle_metrics},
    {"/api/generate", false, M_POST, BODY_JSON, false, "/api/generate", ps_api_generate},
    {"/api/chat", false, M_POST, BODY_JSON, false, "/api/chat", ps_api_chat},
    {"/api/embed", false, M_POST, BODY_JSON, false, "/api/embed", ps_api_embed},
    {"/api/embeddings", false, M_POST, BODY_JSON, false, "/api/embeddings", ps_api_embeddings},
    {"/api/tags", false, M_GET | M_HEAD, BODY_NONE, false, "/api/tags", ps_api_tags},
    {"/api/show", false, M_POST, BODY_JSON, false, "/api/show", ps_api_show},
    {"/api/ps", false, M_GET, BODY_NONE, false, "/api/ps", ps_api_ps},
    {"/api/version", false, M_GET | M_HEAD, BODY_NONE, false, "/api/version", ps_api_version},
    {"/api/copy", false, M_POST, BODY_JSON, false, "/api/copy", ps_api_copy},
    {"/api/delete", false, M_DELETE, BODY_JSON, false, "/api/delete", ps_api_delete},
    {"/api/create", false, M_POST, BODY_JSON, false, "/api/create", ps_api_create},
    {"/api/pull", false, M_POST, BODY_JSON, false, "/api/pull", ps_api_pull},
    {"/api/push", false, M_POST, BODY_JSON, false, "/api/push", ps_api_push},
    {"/api/blobs/", true, M_HEAD, BODY_NONE, false, "/api/blobs/:digest", ps_api_blob_head},
    {"/api/blobs/", true, M_POST, BODY_FILE, false, "/api/blobs/:digest", ps_api_blob_post},
    {"/v1/chat/completions", false, M_POST, BODY_JSON, true, "/v1/chat/completions",
     ps_api_v1_chat},
    {"/v1/completions", false, M_POST, BODY_JSON, true, "/v1/completions", ps_api_v1_completions},
    {"/v1/embeddings", false, M_POST, BODY_JSON, true, "/v1/embeddings", ps_api_v1_embeddings},
    {"/v1/models", false, M_GET, BODY_NONE, true, "/v1/models", ps_api_v1_models},
    {"/v1/models/", true, M_GET, BODY_NONE, true, "/v1/models/:id", ps_api_v1_model},
};
#define N_ROUTES (sizeof ROUTES / sizeof ROUTES[0])

typedef struct conn_state {
    ps_request req;
    ps_http *h;
    struct MHD_Connection *connection;
    const route *rt;
    const char *route_label;
    char method[16];
    char *path; /* copy of the URL without query */
    int64_t start_ns;
    /* body */
    char *body;
    size_t body_len, body_cap;
    bool body_too_large;
    size_t discarded;
    int body_fd;
    char body_path[4232];
    /* reply */
    bool answered;
    bool handler_ran;
    int status;
    atomic_llong bytes;
    bool counted_active;
    /* CORS headers to add to every reply */
    char allow_origin[512];
    ps_stream *stream; /* a streamed reply (one reference) */
} conn_state;

static int method_bit(const char *m)
{
    static const struct {
        const char *name;
        int bit;
    } ms[] = {{"GET", M_GET}, {"HEAD", M_HEAD},   {"POST", M_POST},      {"DELETE", M_DELETE},
              {"PUT", M_PUT}, {"PATCH", M_PATCH}, {"OPTIONS", M_OPTIONS}};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        if (!strcmp(m, ms[i].name))
            return ms[i].bit;
    return 0;
}

/* Finds the route of path and method. *path_known: some route has this path (then a miss is
 * 405, else 404). */
static const route *find_route(const char *path, int mbit, bool *path_known, const char **param)
{
    *path_known = false;
    for (size_t i = 0; i < N_ROUTES; i++) {
        const route *rt = &ROUTES[i];
        size_t n = strlen(rt->path);
        bool match =
            rt->prefix ? !strncmp(path, rt->path, n) && path[n] != 0 : !strcmp(path, rt->path);
        if (!match)
            continue;
        *path_known = true;
        if (rt->methods & mbit) {
            *param = rt->prefix ? path + n : "";
            return rt;
        }
    }
    return NULL;
}

/* ---- replies --------------------------------------------------------------------------------- */

static void add_common_headers(conn_state *cs, struct MHD_Response *resp)
{
    if (cs->allow_origin[0]) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", cs->allow_origin);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
}

/* Queues resp (taking it over) as the one answer of the request. */
static void queue_reply(ps_request *r, int status, struct MHD_Response *resp, size_t len)
{
    conn_state *cs = r->internal;
    if (!resp) {
        ps_log(cs->h->srv, PT_LOG_ERROR, "out of memory building a reply to %s", cs->path);
        return;
    }
    if (cs->answered) {
        ps_log(cs->h->srv, PT_LOG_ERROR, "%s %s answered twice (second answer %d dropped)",
               cs->method, cs->path, status);
        MHD_destroy_response(resp);
        return;
    }
    add_common_headers(cs, resp);
    cs->answered = true;
    cs->status = status;
    if (strcmp(cs->method, "HEAD") && len != (size_t)-1)
        atomic_fetch_add(&cs->bytes, (long long)len);
    if (MHD_queue_response(cs->connection, (unsigned)status, resp) != MHD_YES)
        ps_log(cs->h->srv, PT_LOG_ERROR, "could not queue the reply to %s %s", cs->method,
               cs->path);
    MHD_destroy_response(resp);
}

void ps_reply_text(ps_request *r, int status, const char *content_type, const char *text,
                   size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)(text ? text : ""), MHD_RESPMEM_MUST_COPY);
    if (resp && content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    queue_reply(r, status, resp, len);
}

void ps_reply_status(ps_request *r, int status)
{
    ps_reply_text(r, status, NULL, "", 0);
}

/* cJSON_PrintUnformatted with every byte that is not UTF-8 made U+FFFD, as Go's encoder does:
 * every JSON reply is valid UTF-8 whatever a model file, a stored prompt or a generated token
 * held (cJSON escapes only control characters, so a bad byte can only be in a string). */
static char *print_json_utf8(const cJSON *obj)
{
    char *text = cJSON_PrintUnformatted(obj);
    size_t n = 0;
    char *fixed = text ? pti_utf8_repair(text, strlen(text), &n) : NULL;
    if (!fixed)
        return text;
    free(text);
    return fixed;
}

void ps_reply_json(ps_request *r, int status, cJSON *body)
{
    if (!body) {
        ps_reply_text(r, status, "application/json; charset=utf-8", "", 0);
        return;
    }
    char *text = print_json_utf8(body);
    cJSON_Delete(body);
    if (!text) {
        ps_reply_text(r, 500, "application/json; charset=utf-8", "{\"error\":\"out of memory\"}",
                      25);
        return;
    }
    size_t len = strlen(text);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
    } else {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                "application/json; charset=utf-8");
    }
    queue_reply(r, status, resp, len);
}

/* ps_reply_pull: the generator and the first bytes it wrote (sent before asking for more). */
typedef struct pull_reply {
    ps_pull_fn fill;
    void *user;
    void (*release)(void *user);
    char first[PULL_FIRST];
    size_t first_len, first_off;
    atomic_llong *bytes; /* the request's byte counter, valid while MHD reads */
} pull_reply;

static ssize_t pull_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    pull_reply *p = cls;
    size_t n = 0;
    if (p->first_off < p->first_len) {
        n = p->first_len - p->first_off < max ? p->first_len - p->first_off : max;
        memcpy(out, p->first + p->first_off, n);
        p->first_off += n;
    } else {
        n = p->fill(p->user, out, max);
    }
    if (n == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    atomic_fetch_add(p->bytes, (long long)n);
    return (ssize_t)n;
}

static void pull_free(void *cls)
{
    pull_reply *p = cls;
    p->release(p->user);
    free(p);
}

void ps_reply_pull(ps_request *r, int status, const char *content_type, ps_pull_fn fill, void *user,
                   void (*release)(void *user))
{
    conn_state *cs = r->internal;
    pull_reply *p = pti_calloc(1, sizeof *p);
    if (!p) {
        release(user);
        ps_reply_error(r, 500, "out of memory");
        return;
    }
    p->fill = fill;
    p->user = user;
    p->release = release;
    p->bytes = &cs->bytes;
    /* a short body goes out whole, with its length */
    size_t got;
    while (p->first_len < PULL_FIRST &&
           (got = fill(user, p->first + p->first_len, PULL_FIRST - p->first_len)) > 0)
        p->first_len += got;
    if (p->first_len < PULL_FIRST) {
        ps_reply_text(r, status, content_type, p->first, p->first_len);
        pull_free(p);
        return;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, pull_read, p, pull_free);
    if (!resp) {
        pull_free(p);
        ps_reply_error(r, 500, "out of memory");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    queue_reply(r, status, resp, (size_t)-1); /* pull_read counts the bytes */
}

static void reply_error_v(ps_request *r, int status, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    cJSON *o = cJSON_CreateObject();
    if (o)
        cJSON_AddStringToObject(o, "error", msg);
    ps_reply_json(r, status, o);
}

void ps_reply_error(ps_request *r, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(r, status, fmt, ap);
    va_end(ap);
}

void ps_reply_openai_error(ps_request *r, int status, const char *type, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    if (e) {
        cJSON_AddStringToObject(e, "message", msg);
        cJSON_AddStringToObject(e, "type", type ? type : "api_error");
        cJSON_AddNullToObject(e, "param");
        cJSON_AddNullToObject(e, "code");
    }
    ps_reply_json(r, status, o);
}

/* ---- streams --------------------------------------------------------------------------------- */

struct ps_stream {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int refs;      /* the response and the writer */
    bool closed;   /* the writer is done */
    bool dead;     /* the client is gone or the server stops: writes are refused */
    bool shutdown; /* the server stops: end once the buffer is sent */
    bool sse;      /* text/event-stream (OpenAI) rather than NDJSON: the shape of the last line */
    char *buf;
    size_t len, cap, off;
    int fd;                        /* the connection's socket, to notice a client that hung up */
    atomic_llong *bytes;           /* the request's byte counter (valid while the response lives) */
    int64_t deadline_ns;           /* --timeout: writes are refused after it (0 none) */
    int64_t tokens_in, tokens_out; /* ps_stream_set_tokens, for the access log */
    ps_http *h;
    ps_stream *prev, *next; /* h->streams, under h->lock */
};

static void stream_unref(ps_stream *s)
{
    pthread_mutex_lock(&s->lock);
    int left = --s->refs;
    pthread_mutex_unlock(&s->lock);
    if (left > 0)
        return;
    ps_http *h = s->h;
    pthread_mutex_lock(&h->lock);
    if (s->prev)
        s->prev->next = s->next;
    else if (h->streams == s)
        h->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&h->lock);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cv);
    free(s->buf);
    free(s);
}

static bool client_hung_up(int fd)
{
    if (fd < 0)
        return false;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    ps_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        if (s->len > s->off) {
            size_t n = s->len - s->off;
            if (n > max)
                n = max;
            memcpy(out, s->buf + s->off, n);
            s->off += n;
            if (s->off == s->len)
                s->off = s->len = 0;
            pthread_mutex_unlock(&s->lock);
            atomic_fetch_add(s->bytes, (long long)n);
            return (ssize_t)n;
        }
        if (s->closed || s->shutdown) {
            pthread_mutex_unlock(&s->lock);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (client_hung_up(s->fd)) {
            s->dead = true; /* writes fail from now on; the (failing) end closes the socket */
            pthread_mutex_unlock(&s->lock);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += STREAM_POLL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->cv, &s->lock, &ts);
    }
}

static void stream_response_freed(void *cls)
{
    ps_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    s->dead = true;
    s->bytes = NULL;
    pthread_mutex_unlock(&s->lock);
    stream_unref(s);
}

bool ps_request_client_gone(ps_request *r)
{
    conn_state *cs = r->internal;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(cs->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci && client_hung_up(ci->connect_fd);
}

ps_stream *ps_reply_stream(ps_request *r, const char *content_type)
{
    conn_state *cs = r->internal;
    ps_stream *s = pti_calloc(1, sizeof *s);
    if (!s) {
        ps_reply_error(r, 500, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->refs = 3; /* the response, the writer, the connection (for the access log) */
    s->h = cs->h;
    int64_t timeout = cs->h->srv->cfg.request_timeout_ns;
    /* a backstop: handlers end their generation at --timeout themselves, with a last line */
    s->deadline_ns = timeout > 0 ? cs->start_ns + timeout + STREAM_TIMEOUT_GRACE_NS : 0;
    cs->stream = s;
    s->bytes = &cs->bytes;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(cs->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = ci ? ci->connect_fd : -1;
    pthread_mutex_lock(&cs->h->lock);
    s->shutdown = s->dead = cs->h->streams_closed;
    s->next = cs->h->streams;
    if (s->next)
        s->next->prev = s;
    cs->h->streams = s;
    pthread_mutex_unlock(&cs->h->lock);
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 16384, stream_read, s, stream_response_freed);
    if (!resp) {
        s->dead = true;
        s->refs = 2; /* no response */
        ps_reply_error(r, 500, "out of memory");
        return s;
    }
    s->sse = strstr(content_type, "event-stream") != NULL;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    queue_reply(r, 200, resp, (size_t)-1);
    return s;
}

bool ps_stream_write(ps_stream *s, const char *data, size_t len)
{
    if (!s)
        return false;
    pthread_mutex_lock(&s->lock);
    if (!s->dead && s->deadline_ns && ps_now_ns() > s->deadline_ns) {
        s->dead = s->shutdown = true; /* past --timeout: the generation stops, the stream ends */
        pthread_cond_signal(&s->cv);
    }
    if (s->dead || s->closed) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    if (s->len + len > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + len)
            cap *= 2;
        char *nb = pti_realloc(s->buf, cap);
        if (!nb) {
            s->dead = true;
            pthread_mutex_unlock(&s->lock);
            return false;
        }
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, len);
    s->len += len;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->lock);
    return true;
}

bool ps_stream_write_ndjson(ps_stream *s, cJSON *obj)
{
    char *text = obj ? print_json_utf8(obj) : NULL;
    cJSON_Delete(obj);
    if (!text)
        return false;
    size_t n = strlen(text);
    text[n] = 0;
    char *line = pti_realloc(text, n + 2);
    if (!line) {
        free(text);
        return false;
    }
    line[n] = '\n';
    line[n + 1] = 0;
    bool ok = ps_stream_write(s, line, n + 1);
    free(line);
    return ok;
}

bool ps_stream_write_sse(ps_stream *s, cJSON *obj)
{
    if (!obj)
        return ps_stream_write(s, "data: [DONE]\n\n", 14);
    char *text = print_json_utf8(obj);
    cJSON_Delete(obj);
    if (!text)
        return false;
    size_t n = strlen(text);
    char *ev = pti_malloc(n + 9);
    if (!ev) {
        free(text);
        return false;
    }
    memcpy(ev, "data: ", 6);
    memcpy(ev + 6, text, n);
    memcpy(ev + 6 + n, "\n\n", 3);
    free(text);
    bool ok = ps_stream_write(s, ev, n + 8);
    free(ev);
    return ok;
}

bool ps_stream_alive(const ps_stream *s)
{
    if (!s)
        return false;
    ps_stream *m = (ps_stream *)s;
    pthread_mutex_lock(&m->lock);
    bool alive = !m->dead && !m->closed;
    pthread_mutex_unlock(&m->lock);
    return alive;
}

void ps_stream_set_tokens(ps_stream *s, int64_t tokens_in, int64_t tokens_out)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->tokens_in = tokens_in;
    s->tokens_out = tokens_out;
    pthread_mutex_unlock(&s->lock);
}

void ps_stream_close(ps_stream *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->closed = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->lock);
    stream_unref(s);
}

/* The last line of a stream the server ends (under s->lock): the client learns why it ended
 * rather than seeing the connection close after a partial answer. Every write is a whole
 * NDJSON line or SSE event, so the line starts on a boundary. */
static void stream_append_shutdown_line(ps_stream *s)
{
    static const char ndjson[] = "{\"error\":\"server is shutting down\"}\n";
    static const char sse[] = "data: {\"error\":{\"message\":\"server is shutting down\","
                              "\"type\":\"api_error\",\"param\":null,\"code\":null}}\n\n";
    const char *line = s->sse ? sse : ndjson;
    size_t len = s->sse ? sizeof sse - 1 : sizeof ndjson - 1;
    if (s->len + len > s->cap) {
        char *nb = pti_realloc(s->buf, s->len + len);
        if (!nb)
            return;
        s->buf = nb;
        s->cap = s->len + len;
    }
    memcpy(s->buf + s->len, line, len);
    s->len += len;
}

void ps_http_close_streams(ps_server *srv)
{
    ps_http *h = srv->http;
    if (!h)
        return;
    pthread_mutex_lock(&h->lock);
    h->streams_closed = true;
    for (ps_stream *s = h->streams; s; s = s->next) {
        pthread_mutex_lock(&s->lock);
        if (!s->dead && !s->closed)
            stream_append_shutdown_line(s);
        s->dead = s->shutdown = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&h->lock);
}

/* ---- the built-in routes --------------------------------------------------------------------- */

static bool accepts_html(ps_request *r)
{
    conn_state *cs = r->internal;
    const char *accept =
        MHD_lookup_connection_value(cs->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    return accept && strstr(accept, "text/html");
}

static void handle_root(ps_request *r)
{
#ifdef PS_HAVE_CHAT_PAGE
    if (accepts_html(r)) {
        ps_reply_text(r, 200, "text/html; charset=utf-8", (const char *)ps_chat_page_html,
                      ps_chat_page_html_len);
        return;
    }
#else
    (void)accepts_html;
#endif
    ps_reply_text(r, 200, "text/plain; charset=utf-8", "Ollama is running", 17);
}

static void handle_health(ps_request *r)
{
    bool loading = ps_registry_loading(r->srv);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", loading ? "loading" : "ok");
    ps_reply_json(r, loading ? 503 : 200, o);
}

static void handle_metrics(ps_request *r)
{
    size_t len = 0;
    char *text = ps_metrics_render(r->srv, &len);
    if (!text) {
        ps_reply_error(r, 500, "out of memory");
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp)
        free(text);
    else
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                "text/plain; version=0.0.4; charset=utf-8");
    queue_reply(r, 200, resp, len);
}

/* ---- CORS, Host check, API key --------------------------------------------------------------- */

/* Glob match where '*' matches any run of characters (OLLAMA_ORIGINS wildcards). */
static bool glob_match(const char *pat, size_t pn, const char *s)
{
    if (pn == 0)
        return *s == 0;
    if (*pat == '*') {
        for (const char *t = s;; t++) {
            if (glob_match(pat + 1, pn - 1, t))
                return true;
            if (!*t)
                return false;
        }
    }
    return *s && tolower((unsigned char)*pat) == tolower((unsigned char)*s) &&
           glob_match(pat + 1, pn - 1, s + 1);
}

static const char *const DEFAULT_ORIGINS[] = {"http://localhost",
                                              "https://localhost",
                                              "http://localhost:*",
                                              "https://localhost:*",
                                              "http://127.0.0.1",
                                              "https://127.0.0.1",
                                              "http://127.0.0.1:*",
                                              "https://127.0.0.1:*",
                                              "http://0.0.0.0",
                                              "https://0.0.0.0",
                                              "http://0.0.0.0:*",
                                              "https://0.0.0.0:*",
                                              "app://*",
                                              "file://*",
                                              "tauri://*",
                                              "vscode-webview://*",
                                              "vscode-file://*",
                                              NULL};

static bool origin_allowed(const ps_config *cfg, const char *origin)
{
    for (int i = 0; DEFAULT_ORIGINS[i]; i++)
        if (glob_match(DEFAULT_ORIGINS[i], strlen(DEFAULT_ORIGINS[i]), origin))
            return true;
    /* browser extensions (chrome-extension://..) only when OLLAMA_ORIGINS lists them: Ollama's
     * AllowBrowserExtensions only lets such entries be listed, it allows none by itself */
    const char *p = cfg->origins;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *end = p;
        while (*end && *end != ',')
            end++;
        size_t n = (size_t)(end - p);
        while (n && p[n - 1] == ' ')
            n--;
        if (n && glob_match(p, n, origin))
            return true;
        p = end;
    }
    return false;
}

/* The host part of a Host header: "[::1]:80" -> "::1", "a.b:80" -> "a.b". */
static void host_without_port(const char *host, char *out, size_t cap)
{
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        size_t n = end ? (size_t)(end - host - 1) : strlen(host + 1);
        snprintf(out, cap, "%.*s", (int)n, host + 1);
        return;
    }
    const char *colon = strchr(host, ':');
    if (colon && !strchr(colon + 1, ':'))
        snprintf(out, cap, "%.*s", (int)(colon - host), host);
    else
        snprintf(out, cap, "%s", host);
}

static bool has_suffix_ci(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcasecmp(s + n - m, suffix);
}

static bool ip_is_local(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) {
        uint32_t a = ntohl(a4.s_addr);
        return (a >> 24) == 127 || (a >> 24) == 10 || (a >> 20) == (172u << 4 | 1) ||
               (a >> 16) == (192u << 8 | 168) || a == 0;
    }
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6) || IN6_IS_ADDR_UNSPECIFIED(&a6))
            return true;
        if ((a6.s6_addr[0] & 0xfe) == 0xfc) /* fc00::/7 unique local */
            return true;
        if (IN6_IS_ADDR_V4MAPPED(&a6)) {
            char v4[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, a6.s6_addr + 12, v4, sizeof v4);
            return ip_is_local(v4);
        }
    }
    return false;
}

/* Ollama's allowedHostsMiddleware: which Host headers a loopback-bound server answers. */
static bool host_allowed(const char *host_header)
{
    if (!host_header || !*host_header)
        return true;
    char host[300];
    host_without_port(host_header, host, sizeof host);
    if (!*host || !strcasecmp(host, "localhost"))
        return true;
    char hostname[256];
    if (!gethostname(hostname, sizeof hostname)) {
        hostname[sizeof hostname - 1] = 0;
        if (!strcasecmp(host, hostname))
            return true;
    }
    if (has_suffix_ci(host, ".localhost") || has_suffix_ci(host, ".local") ||
        has_suffix_ci(host, ".internal"))
        return true;
    return ip_is_local(host);
}

static bool const_time_equal(const char *a, size_t an, const char *b, size_t bn)
{
    unsigned char diff = an != bn;
    for (size_t i = 0; i < bn; i++)
        diff |= (unsigned char)(a[i < an ? i : 0] ^ b[i]);
    return an ? diff == 0 : diff == 0 && bn == 0;
}

static bool key_ok(conn_state *cs)
{
    const char *key = cs->h->srv->cfg.api_key;
    if (!key[0])
        return true;
    const char *auth =
        MHD_lookup_connection_value(cs->connection, MHD_HEADER_KIND, "Authorization");
    if (!auth || strncasecmp(auth, "Bearer ", 7))
        return false;
    auth += 7;
    while (*auth == ' ')
        auth++;
    return const_time_equal(auth, strlen(auth), key, strlen(key));
}

#define CORS_ALLOW_HEADERS                                                                         \
    "Authorization,Content-Type,User-Agent,Accept,X-Requested-With,OpenAI-Beta,"                   \
    "x-stainless-arch,x-stainless-async,x-stainless-custom-poll-interval,"                         \
    "x-stainless-helper-method,x-stainless-lang,x-stainless-os,x-stainless-package-version,"       \
    "x-stainless-poll-helper,x-stainless-retry-count,x-stainless-runtime,"                         \
    "x-stainless-runtime-version,x-stainless-timeout"

/* Applies CORS. Returns false when it answered the request (a preflight or a refusal). */
static bool apply_cors(conn_state *cs)
{
    const char *origin = MHD_lookup_connection_value(cs->connection, MHD_HEADER_KIND, "Origin");
    if (!origin || !*origin)
        return true;
    const char *host = MHD_lookup_connection_value(cs->connection, MHD_HEADER_KIND, "Host");
    if (host && ((!strncmp(origin, "http://", 7) && !strcmp(origin + 7, host)) ||
                 (!strncmp(origin, "https://", 8) && !strcmp(origin + 8, host))))
        return true; /* same origin */
    if (!origin_allowed(&cs->h->srv->cfg, origin)) {
        ps_reply_status(&cs->req, 403);
        return false;
    }
    snprintf(cs->allow_origin, sizeof cs->allow_origin, "%s", origin);
    if (strcmp(cs->method, "OPTIONS"))
        return true;
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (resp) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods",
                                "GET,POST,PUT,PATCH,DELETE,HEAD,OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", CORS_ALLOW_HEADERS);
        MHD_add_response_header(resp, "Access-Control-Max-Age", "43200");
    }
    queue_reply(&cs->req, 204, resp, 0);
    return false;
}

/* ---- the access handler ---------------------------------------------------------------------- */

static void reply_bad_request(conn_state *cs, int status, const char *msg)
{
    if (cs->rt && cs->rt->openai)
        ps_reply_openai_error(&cs->req, status,
                              status == 400 ? "invalid_request_error" : "api_error", "%s", msg);
    else
        ps_reply_error(&cs->req, status, "%s", msg);
}

static const char *json_type_name(const cJSON *j)
{
    if (cJSON_IsArray(j))
        return "array";
    if (cJSON_IsString(j))
        return "string";
    if (cJSON_IsNumber(j))
        return "number";
    if (cJSON_IsBool(j))
        return "bool";
    return "null";
}

/* Parses the body as a JSON object into cs->req.json; answers 400 and returns false if not. */
static bool parse_json_body(conn_state *cs)
{
    const char *b = cs->body ? cs->body : "";
    size_t n = cs->body_len;
    size_t i = 0;
    while (i < n && isspace((unsigned char)b[i]))
        i++;
    if (i == n) {
        reply_bad_request(cs, 400, "missing request body");
        return false;
    }
    char msg[256];
    if (!ps_json_syntax_ok(b, n, msg, sizeof msg)) {
        reply_bad_request(cs, 400, msg);
        return false;
    }
    size_t fixed_n = 0;
    char *fixed = ps_json_normalize(b, n, &fixed_n); /* strings as Go reads them */
    cJSON *j = cJSON_ParseWithLength(fixed ? fixed : b, fixed ? fixed_n : n);
    free(fixed);
    ps_json_fold_keys(j); /* {"Model": ...} is model, as Go decodes it */
    ps_json_last_key_wins(j);
    if (!j) {
        reply_bad_request(cs, 400, "invalid JSON (nested too deeply or too large)");
        return false;
    }
    if (!cJSON_IsObject(j)) {
        snprintf(msg, sizeof msg, "json: cannot unmarshal %s into Go value of type object",
                 json_type_name(j));
        cJSON_Delete(j);
        reply_bad_request(cs, 400, msg);
        return false;
    }
    const char *bad_key = NULL;
    if (!ps_json_names_ok(j, &bad_key)) {
        /* "victim\u0000 x" must not reach the store as "victim" */
        snprintf(msg, sizeof msg,
                 "invalid model name in \"%s\": it holds a NUL or control character or bytes "
                 "that are not UTF-8",
                 bad_key);
        cJSON_Delete(j);
        reply_bad_request(cs, 400, msg);
        return false;
    }
    cs->req.json = j;
    return true;
}

/* Opens the temporary file a blob upload goes to: <store>/blobs/.upload-XXXXXX. */
static bool open_blob_file(conn_state *cs)
{
    const char *root = cs->h->srv->cfg.models_store;
    char dir[4200];
    if (!root[0] || strlen(root) + 32 > sizeof dir) {
        errno = ENAMETOOLONG;
        return false;
    }
    snprintf(dir, sizeof dir, "%s/blobs", root);
    if (mkdir(root, 0755) && errno != EEXIST) {
        /* the parent may be missing too: make ~/.ollama first */
        char parent[4200];
        snprintf(parent, sizeof parent, "%s", root);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) {
            *slash = 0;
            mkdir(parent, 0755);
        }
        mkdir(root, 0755);
    }
    mkdir(dir, 0755);
    memcpy(cs->body_path, dir, strlen(dir));
    memcpy(cs->body_path + strlen(dir), "/.upload-XXXXXX", 16);
    cs->body_fd = mkstemp(cs->body_path);
    if (cs->body_fd < 0) {
        cs->body_path[0] = 0;
        return false;
    }
    return true;
}

static bool write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Once a body is past its limit nothing more of it is kept: what was buffered is freed (a
 * blob's temporary file removed) and the rest read and dropped, however long it is, so that
 * the client gets the 413 (a chunked body has no Content-Length to refuse up front, and MHD
 * cannot queue an answer in the middle of a body). Dropping costs no memory; the time it can
 * take is bounded by the watchdog's body timeout, as a JSON body's whole is (a blob upload's
 * from the moment it passed --max-blob). */
static void drop_body(conn_state *cs)
{
    cs->body_too_large = true;
    free(cs->body);
    cs->body = NULL;
    cs->body_len = cs->body_cap = 0;
    if (cs->body_fd >= 0) {
        close(cs->body_fd);
        cs->body_fd = -1;
    }
    if (cs->body_path[0]) {
        unlink(cs->body_path);
        cs->body_path[0] = '\0';
    }
    if (cs->rt && cs->rt->body == BODY_FILE)
        conn_set_phase(cs->h, cs->connection, PHASE_BODY);
}

/* Takes one piece of the body. False when the connection should be dropped. */
static bool take_body(conn_state *cs, const char *data, size_t n)
{
    const ps_config *cfg = &cs->h->srv->cfg;
    size_t limit = cs->rt && cs->rt->body == BODY_FILE ? cfg->max_blob : cfg->max_body;
    if (cs->body_too_large || cs->body_len + n > limit) {
        if (!cs->body_too_large)
            drop_body(cs);
        cs->discarded += n;
        return true;
    }
    if (cs->rt && cs->rt->body == BODY_FILE) {
        if (cs->body_fd < 0)
            return false;
        if (!write_all(cs->body_fd, data, n)) {
            close(cs->body_fd);
            cs->body_fd = -1;
            return false;
        }
        cs->body_len += n;
        return true;
    }
    if (cs->body_len + n + 1 > cs->body_cap) {
        size_t cap = cs->body_cap ? cs->body_cap : 4096;
        while (cap < cs->body_len + n + 1)
            cap *= 2;
        char *nb = pti_realloc(cs->body, cap);
        if (!nb)
            return false;
        cs->body = nb;
        cs->body_cap = cap;
    }
    memcpy(cs->body + cs->body_len, data, n);
    cs->body_len += n;
    cs->body[cs->body_len] = 0;
    return true;
}

static conn_state *new_conn_state(ps_http *h, struct MHD_Connection *connection, const char *url,
                                  const char *method)
{
    conn_state *cs = pti_calloc(1, sizeof *cs);
    if (!cs)
        return NULL;
    cs->h = h;
    cs->connection = connection;
    cs->start_ns = ps_now_ns();
    cs->body_fd = -1;
    snprintf(cs->method, sizeof cs->method, "%s", method);
    size_t n = strcspn(url, "?");
    cs->path = pti_strndup(url, n);
    if (!cs->path) {
        free(cs);
        return NULL;
    }
    cs->route_label = "unmatched";
    cs->req.srv = h->srv;
    cs->req.method = cs->method;
    cs->req.path = cs->path;
    cs->req.param = "";
    cs->req.body = "";
    cs->req.body_file = NULL;
    cs->req.internal = cs;
    atomic_init(&cs->bytes, 0);
    return cs;
}

/* Go's net/http answers an HTTP/1.1 request without a Host header (RFC 9112 3.2) before any
 * handler runs: 400, this text, and the connection closed. */
static bool host_header_present(conn_state *cs, const char *version)
{
    if (!version || strcmp(version, MHD_HTTP_VERSION_1_1) != 0 ||
        MHD_lookup_connection_value(cs->connection, MHD_HEADER_KIND, "Host"))
        return true;
    static const char text[] = "400 Bad Request: missing required Host header";
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(sizeof text - 1, (void *)text, MHD_RESPMEM_PERSISTENT);
    if (resp) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    }
    queue_reply(&cs->req, 400, resp, sizeof text - 1);
    return false;
}

static bool is_openai_path(const char *path)
{
    return !strncmp(path, "/v1/", 4) || !strcmp(path, "/v1");
}

/* The checks of the first call. Returns false when the request was answered already. */
static bool first_call_checks(conn_state *cs, const char *version)
{
    ps_http *h = cs->h;
    if (!host_header_present(cs, version))
        return false;
    if (!apply_cors(cs))
        return false;
    if (h->loopback) {
        const char *host = MHD_lookup_connection_value(cs->connection, MHD_HEADER_KIND, "Host");
        if (!host_allowed(host)) {
            ps_reply_status(&cs->req, 403);
            return false;
        }
    }
    bool path_known = false;
    const char *param = "";
    int mbit = method_bit(cs->method);
    cs->rt = find_route(cs->path, mbit, &path_known, &param);
    if (cs->rt) {
        cs->route_label = cs->rt->label;
        cs->req.param = param;
    }
    bool open_route = cs->rt && (cs->rt->fn == handle_root || cs->rt->fn == handle_health);
    bool v1 = is_openai_path(cs->path);
    if (!open_route && !key_ok(cs)) {
        if (v1)
            ps_reply_openai_error(&cs->req, 401, "invalid_request_error", "unauthorized");
        else
            ps_reply_error(&cs->req, 401, "unauthorized");
        return false;
    }
    if (!cs->rt && v1) { /* OpenAI's clients parse an error object on every /v1 failure */
        ps_reply_openai_error(&cs->req, path_known ? 405 : 404, "invalid_request_error",
                              path_known ? "Invalid method for URL (%s %s)" : "Invalid URL (%s %s)",
                              cs->method, cs->path);
        return false;
    }
    if (!cs->rt) {
        if (path_known)
            ps_reply_text(&cs->req, 405, "text/plain", "405 method not allowed", 22);
        else
            ps_reply_text(&cs->req, 404, "text/plain", "404 page not found", 18);
        return false;
    }
    const char *cl = MHD_lookup_connection_value(cs->connection, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    size_t limit = cs->rt->body == BODY_FILE ? h->srv->cfg.max_blob : h->srv->cfg.max_body;
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (errno || *end || v > limit) {
            reply_bad_request(cs, 413, "request body too large");
            return false;
        }
    }
    if (cs->rt->body == BODY_FILE && !open_blob_file(cs)) {
        ps_reply_error(&cs->req, 500, "cannot create a temporary file in %s/blobs: %s",
                       h->srv->cfg.models_store, strerror(errno));
        return false;
    }
    return true;
}

static void run_handler(conn_state *cs)
{
    ps_request *r = &cs->req;
    if (cs->body_too_large) {
        reply_bad_request(cs, 413, "request body too large");
        return;
    }
    if (cs->rt->body == BODY_JSON && !parse_json_body(cs))
        return;
    if (cs->rt->body == BODY_JSON) {
        r->body = cs->body;
        r->body_len = cs->body_len;
    } else if (cs->rt->body == BODY_FILE) {
        if (cs->body_fd >= 0) {
            close(cs->body_fd);
            cs->body_fd = -1;
        }
        r->body_file = cs->body_path;
        r->body_len = cs->body_len;
    }
    pthread_mutex_lock(&cs->h->lock);
    cs->h->active++;
    cs->counted_active = true;
    pthread_mutex_unlock(&cs->h->lock);
    cs->handler_ran = true;
    pti_store_set_warn(ps_store_warn_to_log, cs->h->srv); /* store warnings into the log */
    cs->rt->fn(r);
    pti_store_set_warn(NULL, NULL);
    if (!cs->answered) {
        ps_log(cs->h->srv, PT_LOG_ERROR, "the handler of %s %s did not answer", cs->method,
               cs->path);
        ps_reply_error(r, 500, "internal error: no reply");
    }
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *connection, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
    ps_http *h = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        conn_set_phase(h, connection, PHASE_REQUEST);
        cs = new_conn_state(h, connection, url, method);
        if (!cs)
            return MHD_NO;
        *con_cls = cs;
        if (atomic_load(&h->srv->stopping)) {
            if (is_openai_path(cs->path))
                ps_reply_openai_error(&cs->req, 503, "api_error", "server is shutting down");
            else
                ps_reply_error(&cs->req, 503, "server is shutting down");
            return MHD_YES;
        }
        if (first_call_checks(cs, version) && cs->rt->body == BODY_JSON)
            conn_set_phase(h, connection, PHASE_BODY);
        return MHD_YES;
    }
    if (cs->answered) { /* answered early: ignore the rest */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        bool keep = take_body(cs, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return keep ? MHD_YES : MHD_NO;
    }
    conn_set_phase(h, connection, PHASE_REQUEST);
    run_handler(cs);
    return MHD_YES;
}

static void log_request(conn_state *cs)
{
    if (cs->h->srv->cfg.quiet)
        return;
    char when[64];
    ps_format_time(ps_wall_ns(), when, sizeof when);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(cs->connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char remote[INET6_ADDRSTRLEN + 8] = "-";
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, remote, sizeof remote);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, remote,
                      sizeof remote);
    }
    /* the path is quoted when it holds characters that would break the line's fields */
    bool quote = strpbrk(cs->path, " \"=\t") != NULL;
    char path[512];
    size_t j = 0;
    for (size_t i = 0; cs->path[i] && j + 3 < sizeof path; i++) {
        unsigned char c = (unsigned char)cs->path[i];
        if (c == '"' || c == '\\')
            path[j++] = '\\';
        path[j++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    path[j] = 0;
    char model[140] = "";
    for (size_t i = 0, k = 0; cs->req.model[i] && k + 1 < sizeof model; i++) {
        unsigned char c = (unsigned char)cs->req.model[i];
        model[k++] = c <= 0x20 || c == '"' || c == '=' ? '_' : (char)c;
        model[k] = 0;
    }
    ps_log(cs->h->srv, PT_LOG_INFO,
           "time=%s method=%s path=%s%s%s status=%d duration_ms=%.3f bytes=%lld model=%s "
           "tokens_in=%lld tokens_out=%lld remote=%s",
           when, cs->method, quote ? "\"" : "", path, quote ? "\"" : "", cs->status,
           (double)(ps_now_ns() - cs->start_ns) / 1e6, (long long)atomic_load(&cs->bytes),
           model[0] ? model : "-", (long long)cs->req.tokens_in, (long long)cs->req.tokens_out,
           remote);
}

static void request_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    ps_http *h = cls;
    conn_state *cs = *con_cls;
    conn_set_phase(h, connection, PHASE_HEADERS);
    if (!cs)
        return;
    *con_cls = NULL;
    if (cs->status == 0)
        cs->status = 499; /* the client went away before an answer */
    if (cs->stream) {
        pthread_mutex_lock(&cs->stream->lock);
        if (cs->stream->tokens_in)
            cs->req.tokens_in = cs->stream->tokens_in;
        if (cs->stream->tokens_out)
            cs->req.tokens_out = cs->stream->tokens_out;
        pthread_mutex_unlock(&cs->stream->lock);
        stream_unref(cs->stream);
    }
    ps_metrics_request(h->srv, cs->route_label, cs->status, ps_now_ns() - cs->start_ns);
    log_request(cs);
    if (cs->counted_active) {
        pthread_mutex_lock(&h->lock);
        h->active--;
        pthread_mutex_unlock(&h->lock);
    }
    if (cs->body_fd >= 0)
        close(cs->body_fd);
    if (cs->body_path[0])
        unlink(cs->body_path); /* a handler that kept the blob renamed it already */
    cJSON_Delete(cs->req.json);
    free(cs->body);
    free(cs->path);
    free(cs);
}

/* ---- start and stop -------------------------------------------------------------------------- */

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    ps_http *h = cls;
    if (h->srv->cfg.quiet)
        return;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = 0;
    /* a client that hung up mid-stream is normal (the access log has the request) */
    if (strstr(msg, "no longer available for sending") ||
        strstr(msg, "application error generating response"))
        return;
    ps_log(h->srv, PT_LOG_WARN, "libmicrohttpd: %s", msg);
}

static bool resolve_bind(const ps_config *cfg, struct sockaddr_storage *ss, socklen_t *len,
                         char *err, size_t cap)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    const char *host = cfg->host[0] ? cfg->host : NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc || !res) {
        snprintf(err, cap, "cannot resolve the address %s: %s", cfg->host, gai_strerror(rc));
        return false;
    }
    const struct addrinfo *pick = res; /* IPv4 first, as Go listens on "localhost" */
    for (const struct addrinfo *a = res; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    }
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *len = pick->ai_addrlen;
    freeaddrinfo(res);
    return true;
}

static bool addr_is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        uint32_t a = ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr);
        return (a >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return false;
}

static int connection_limit(const ps_config *cfg)
{
    long n = (long)cfg->max_queue + (long)cfg->n_parallel * (cfg->max_loaded_models + 1) + 64;
    if (n < 64)
        n = 64;
    if (n > 4096)
        n = 4096;
    return (int)n;
}

bool ps_http_start(ps_server *srv, char *err, size_t err_cap)
{
    ps_http *h = pti_calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, err_cap, "out of memory");
        return false;
    }
    h->srv = srv;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->watchdog_cv, NULL);
    srv->http = h;
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    if (!resolve_bind(&srv->cfg, &ss, &sl, err, err_cap))
        return false;
    (void)sl;
    h->loopback = addr_is_loopback(&ss);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_DUAL_STACK;
    unsigned timeout_s = 30;
    /* clang-format off */
    h->mhd = MHD_start_daemon(flags, (uint16_t)srv->cfg.port, NULL, NULL, access_handler, h,
                              MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, /* first, as MHD asks */
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)connection_limit(&srv->cfg),
                              MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
                              MHD_OPTION_NOTIFY_COMPLETED, request_completed, h,
                              MHD_OPTION_NOTIFY_CONNECTION, notify_connection, h,
                              MHD_OPTION_END);
    /* clang-format on */
    if (!h->mhd) {
        snprintf(err, err_cap, "listen tcp %s:%d: bind: %s", srv->cfg.host, srv->cfg.port,
                 errno ? strerror(errno) : "cannot bind");
        return false;
    }
    if (srv->cfg.port == 0) { /* the port the system picked, for pt_server_port */
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
        if (info)
            srv->cfg.port = info->port;
    }
    h->watchdog_run = pthread_create(&h->watchdog, NULL, watchdog_main, h) == 0;
    return true;
}

void ps_http_quiesce(ps_server *srv)
{
    ps_http *h = srv->http;
    if (!h || !h->mhd)
        return;
    MHD_socket fd = MHD_quiesce_daemon(h->mhd);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

int ps_http_active(ps_server *srv)
{
    ps_http *h = srv->http;
    if (!h)
        return 0;
    pthread_mutex_lock(&h->lock);
    int n = h->active;
    pthread_mutex_unlock(&h->lock);
    return n;
}

void ps_http_stop(ps_server *srv)
{
    ps_http *h = srv->http;
    if (!h)
        return;
    if (h->watchdog_run) {
        h->watchdog_run = false;
        pthread_mutex_lock(&h->lock);
        h->watchdog_stop = true;
        pthread_cond_signal(&h->watchdog_cv);
        pthread_mutex_unlock(&h->lock);
        pthread_join(h->watchdog, NULL);
    }
    if (h->mhd)
        MHD_stop_daemon(h->mhd);
    h->mhd = NULL;
}

void ps_http_free(ps_server *srv)
{
    ps_http *h = srv->http;
    if (!h)
        return;
    ps_http_stop(srv);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->watchdog_cv);
    free(h);
    srv->http = NULL;
}

const ps_config *ps_server_config(const ps_server *s)
{
    return &s->cfg;
}

bool ps_server_stopping(const ps_server *s)
{
    return atomic_load(&((ps_server *)s)->stopping);
}
