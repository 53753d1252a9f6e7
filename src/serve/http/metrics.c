/* promeserve's counters and the /metrics page (Prometheus text format 0.0.4).
 *
 * Request counters are kept per (route, status): routes are the routing table's labels (plus
 * "unmatched"), so the label set stays small whatever clients send. Token counters come from
 * handlers (ps_metrics_tokens, once per finished generation); the recent tokens/s is measured
 * over the generations that finished in the last RECENT_WINDOW seconds. Queue depth, busy
 * slots and per-model numbers are read from the engines when the page is rendered. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_internal.h"

#define MAX_SERIES 256
#define RECENT_WINDOW_S 60
#define RECENT_SLOTS 256
#define MAX_MODELS_SHOWN 64

typedef struct req_series {
    const char *route; /* a static label */
    int status;
    uint64_t count;
} req_series;

typedef struct dur_series {
    const char *route;
    double sum_s;
    uint64_t count;
} dur_series;

typedef struct recent_gen {
    int64_t at_ns, tokens, ns;
} recent_gen;

struct ps_metrics {
    pthread_mutex_t lock;
    req_series reqs[MAX_SERIES];
    int n_reqs;
    dur_series durs[MAX_SERIES];
    int n_durs;
    uint64_t prompt_tokens, gen_tokens;
    recent_gen recent[RECENT_SLOTS];
    int recent_next;
};

bool ps_metrics_init(ps_server *s)
{
    ps_metrics *m = pti_calloc(1, sizeof *m);
    if (!m)
        return false;
    pthread_mutex_init(&m->lock, NULL);
    s->metrics = m;
    return true;
}

void ps_metrics_free(ps_server *s)
{
    if (!s->metrics)
        return;
    pthread_mutex_destroy(&s->metrics->lock);
    free(s->metrics);
    s->metrics = NULL;
}

void ps_metrics_request(ps_server *s, const char *route, int status, int64_t ns)
{
    ps_metrics *m = s->metrics;
    if (!m || !route)
        return;
    pthread_mutex_lock(&m->lock);
    int i;
    for (i = 0; i < m->n_reqs; i++)
        if (m->reqs[i].status == status && !strcmp(m->reqs[i].route, route))
            break;
    if (i == m->n_reqs && m->n_reqs < MAX_SERIES)
        m->reqs[m->n_reqs++] = (req_series){route, status, 0};
    if (i < m->n_reqs)
        m->reqs[i].count++;
    for (i = 0; i < m->n_durs; i++)
        if (!strcmp(m->durs[i].route, route))
            break;
    if (i == m->n_durs && m->n_durs < MAX_SERIES)
        m->durs[m->n_durs++] = (dur_series){route, 0, 0};
    if (i < m->n_durs) {
        m->durs[i].sum_s += (double)ns / 1e9;
        m->durs[i].count++;
    }
    pthread_mutex_unlock(&m->lock);
}

void ps_metrics_tokens(ps_server *s, int64_t prompt_tokens, int64_t gen_tokens, int64_t gen_ns)
{
    ps_metrics *m = s->metrics;
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    if (prompt_tokens > 0)
        m->prompt_tokens += (uint64_t)prompt_tokens;
    if (gen_tokens > 0) {
        m->gen_tokens += (uint64_t)gen_tokens;
        m->recent[m->recent_next] = (recent_gen){ps_now_ns(), gen_tokens, gen_ns > 0 ? gen_ns : 0};
        m->recent_next = (m->recent_next + 1) % RECENT_SLOTS;
    }
    pthread_mutex_unlock(&m->lock);
}

/* A growing text buffer; a failed allocation makes the whole page fail. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 8192;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *np = pti_realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

static void sb_header(sbuf *b, const char *name, const char *type, const char *help)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with Prometheus escapes (backslash, quote, newline). */
static void escape_label(const char *in, char *out, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; in[i] && j + 3 < cap; i++) {
        char c = in[i];
        if (c == '\\' || c == '"') {
            out[j++] = '\\';
            out[j++] = c;
        } else if (c == '\n') {
            out[j++] = '\\';
            out[j++] = 'n';
        } else {
            out[j++] = c;
        }
    }
    out[j] = 0;
}

/* Over the generations that finished in the last RECENT_WINDOW_S: the aggregate rate (tokens
 * over the wall time from the earliest one's first token to now; batched sequences overlap)
 * and the mean speed of one sequence (tokens over the summed generation times). */
static void recent_rates(ps_metrics *m, double *aggregate, double *per_sequence)
{
    int64_t now = ps_now_ns(), window = (int64_t)RECENT_WINDOW_S * 1000000000;
    int64_t tokens = 0, ns = 0, earliest = now;
    for (int i = 0; i < RECENT_SLOTS; i++) {
        const recent_gen *g = &m->recent[i];
        if (g->at_ns && now - g->at_ns <= window) {
            tokens += g->tokens;
            ns += g->ns;
            if (g->at_ns - g->ns < earliest)
                earliest = g->at_ns - g->ns;
        }
    }
    if (now - earliest > window)
        earliest = now - window;
    *aggregate = now > earliest ? (double)tokens * 1e9 / (double)(now - earliest) : 0.0;
    *per_sequence = ns > 0 ? (double)tokens * 1e9 / (double)ns : 0.0;
}

static void render_requests(sbuf *b, ps_metrics *m)
{
    sb_header(b, "promeserve_requests_total", "counter", "HTTP requests answered.");
    for (int i = 0; i < m->n_reqs; i++)
        sb_printf(b, "promeserve_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                  m->reqs[i].route, m->reqs[i].status, (unsigned long long)m->reqs[i].count);
    sb_header(b, "promeserve_request_duration_seconds", "summary",
              "Time from a request's headers to the end of its reply.");
    for (int i = 0; i < m->n_durs; i++) {
        sb_printf(b, "promeserve_request_duration_seconds_sum{route=\"%s\"} %.6f\n",
                  m->durs[i].route, m->durs[i].sum_s);
        sb_printf(b, "promeserve_request_duration_seconds_count{route=\"%s\"} %llu\n",
                  m->durs[i].route, (unsigned long long)m->durs[i].count);
    }
    sb_header(b, "promeserve_prompt_tokens_total", "counter", "Prompt tokens of generations.");
    sb_printf(b, "promeserve_prompt_tokens_total %llu\n", (unsigned long long)m->prompt_tokens);
    sb_header(b, "promeserve_generated_tokens_total", "counter", "Tokens generated.");
    sb_printf(b, "promeserve_generated_tokens_total %llu\n", (unsigned long long)m->gen_tokens);
    double aggregate, per_sequence;
    recent_rates(m, &aggregate, &per_sequence);
    sb_header(b, "promeserve_generated_tokens_per_second", "gauge",
              "Tokens generated per second, all sequences together, over the last minute.");
    sb_printf(b, "promeserve_generated_tokens_per_second %.3f\n", aggregate);
    sb_header(b, "promeserve_sequence_tokens_per_second", "gauge",
              "Mean generation speed of one sequence over the last minute.");
    sb_printf(b, "promeserve_sequence_tokens_per_second %.3f\n", per_sequence);
}

static void render_models(sbuf *b, const ps_model_stat *st, int n)
{
    int32_t queued = 0, busy = 0;
    for (int i = 0; i < n; i++) {
        queued += st[i].st.queued;
        busy += st[i].st.busy_slots;
    }
    sb_header(b, "promeserve_queue_depth", "gauge", "Requests waiting for a slot.");
    sb_printf(b, "promeserve_queue_depth %d\n", queued);
    sb_header(b, "promeserve_busy_slots", "gauge", "Slots decoding a sequence.");
    sb_printf(b, "promeserve_busy_slots %d\n", busy);
    sb_header(b, "promeserve_loaded_models", "gauge", "Models loaded or loading.");
    sb_printf(b, "promeserve_loaded_models %d\n", n);
    static const struct {
        const char *name, *type, *help;
    } per_model[] = {
        {"promeserve_model_queue_depth", "gauge", "Requests waiting for a slot, per model."},
        {"promeserve_model_busy_slots", "gauge", "Slots decoding, per model."},
        {"promeserve_model_slots", "gauge", "Slots (--parallel), per model."},
        {"promeserve_model_requests_total", "counter", "Requests finished by the engine."},
        {"promeserve_model_prompt_tokens_total", "counter", "Prompt tokens, per model."},
        {"promeserve_model_generated_tokens_total", "counter", "Tokens generated, per model."},
        {"promeserve_model_kv_cache_bytes", "gauge", "Memory of the KV cache, per model."},
    };
    for (size_t k = 0; k < sizeof per_model / sizeof per_model[0]; k++) {
        sb_header(b, per_model[k].name, per_model[k].type, per_model[k].help);
        for (int i = 0; i < n; i++) {
            char label[1100];
            escape_label(st[i].name, label, sizeof label);
            const pti_engine_stats *e = &st[i].st;
            unsigned long long v = 0;
            switch (k) {
            case 0: v = (unsigned long long)e->queued; break;
            case 1: v = (unsigned long long)e->busy_slots; break;
            case 2: v = (unsigned long long)e->n_parallel; break;
            case 3: v = e->requests_done; break;
            case 4: v = e->prompt_tokens; break;
            case 5: v = e->gen_tokens; break;
            default: v = (unsigned long long)e->kv_bytes; break;
            }
            sb_printf(b, "%s{model=\"%s\"} %llu\n", per_model[k].name, label, v);
        }
    }
}

char *ps_metrics_render(ps_server *s, size_t *len)
{
    ps_metrics *m = s->metrics;
    ps_model_stat *st = pti_calloc(MAX_MODELS_SHOWN, sizeof *st);
    if (!m || !st) {
        free(st);
        return NULL;
    }
    int n = ps_registry_stats(s, st, MAX_MODELS_SHOWN);
    if (n > MAX_MODELS_SHOWN)
        n = MAX_MODELS_SHOWN;
    sbuf b = {0};
    pthread_mutex_lock(&m->lock);
    render_requests(&b, m);
    pthread_mutex_unlock(&m->lock);
    render_models(&b, st, n);
    free(st);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
