/* promeserve: what the server's own parts share (http.c, registry.c, metrics.c, serve.c) and
 * handlers do not need: the server object, start/stop of each part, small time helpers. */
#ifndef PROMESERVE_SERVE_INTERNAL_H
#define PROMESERVE_SERVE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http_internal.h"

typedef struct ps_http ps_http;
typedef struct ps_registry ps_registry;
typedef struct ps_metrics ps_metrics;

struct ps_server {
    ps_config cfg;
    atomic_bool stopping;
    ps_http *http;
    ps_registry *reg;
    ps_metrics *metrics;
};

/* ---- http.c ---- */
/* Binds and starts serving. False with err filled when the address cannot be used. */
bool ps_http_start(ps_server *s, char *err, size_t err_cap);
/* Stops accepting new connections (first step of a graceful shutdown). */
void ps_http_quiesce(ps_server *s);
/* Makes every open stream refuse writes and end once its buffered bytes are sent. */
void ps_http_close_streams(ps_server *s);
/* Requests still inside a handler or streaming. */
int ps_http_active(ps_server *s);
/* Closes every connection and joins their threads. */
void ps_http_stop(ps_server *s);
/* Frees the HTTP side (after the registry: engine callbacks may still close streams). */
void ps_http_free(ps_server *s);

/* ---- registry.c ---- */
bool ps_registry_init(ps_server *s, char *err, size_t err_cap);
/* Unloads every model (their engines cancel what still runs) and frees the registry. */
void ps_registry_free(ps_server *s);

/* One loaded model's numbers for /metrics. */
typedef struct ps_model_stat {
    char name[512];
    bool loading;
    int in_use;
    pti_engine_stats st;
} ps_model_stat;
/* Fills at most cap entries; returns how many models are loaded or loading. */
int ps_registry_stats(ps_server *s, ps_model_stat *out, int cap);

/* ---- metrics.c ---- */
bool ps_metrics_init(ps_server *s);
void ps_metrics_free(ps_server *s);
/* The /metrics page (malloc'd, NUL-terminated; *len its length), NULL when out of memory. */
char *ps_metrics_render(ps_server *s, size_t *len);

/* ---- shared helpers (clock.c, json_errors.c) ---- */
int64_t ps_now_ns(void);  /* CLOCK_MONOTONIC */
int64_t ps_wall_ns(void); /* CLOCK_REALTIME */
/* RFC 3339 local time with nanoseconds (trailing zeros trimmed, as Go prints) and the UTC
 * offset ("Z" when it is zero); cap >= 40. */
void ps_format_time(int64_t wall_ns, char *buf, size_t cap);
/* Parses a keep-alive style duration: Go durations ("5m", "1h30m", "1.5s", "-1m"), plain
 * numbers (seconds; "-1"). False when malformed. */
bool ps_parse_duration(const char *s, int64_t *ns);
/* Whether n bytes are exactly one JSON value (whitespace around it allowed; cJSON also
 * accepts trailing text, Go does not); if not, encoding/json's message ("invalid character
 * 'x' looking for beginning of value (offset 10)") is written to msg. */
bool ps_json_syntax_ok(const char *b, size_t n, char *msg, size_t cap);
/* A syntactically valid body (ps_json_syntax_ok) rewritten so that cJSON reads its strings as
 * Go's encoding/json does: each byte that is not valid UTF-8 becomes U+FFFD, so does a lone
 * surrogate escape (\ud800) and an escaped NUL (\u0000: a C string cannot hold it, and cJSON
 * would end the string there). A new buffer (free()) of *out_n bytes, or NULL when the body
 * needs no change (or memory ran out: then it is parsed as it is). */
char *ps_json_normalize(const char *b, size_t n, size_t *out_n);
/* Go's case-insensitive match of keys to struct fields (json_fold.c): in the request and
 * the struct-typed objects under it, a key that is a field's name under Unicode simple
 * folding ("Model", "MODEL", "\u212aeep_alive") is renamed to the field's exact name, so
 * ps_json_last_key_wins then keeps the last of them, as Go's decoder does. Map-typed
 * values (options, format, files, ...) keep their keys. */
void ps_json_fold_keys(cJSON *j);
/* Go's "the last of duplicate keys wins": removes every member of every object of j that a
 * later member of the same name overrides (cJSON's lookups return the first). */
void ps_json_last_key_wins(cJSON *j);
/* The top-level name fields of a request ("model", "name", "source", "destination", "from")
 * that are strings hold no control character and no U+FFFD (what a NUL or bytes that are not
 * UTF-8 became): false with the offending key in *bad_key otherwise. */
bool ps_json_names_ok(const cJSON *j, const char **bad_key);

#endif
