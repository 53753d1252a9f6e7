/* promeserve run: a GGUF model in the terminal, as `ollama run` does it.
 *
 *   promeserve run MODEL.gguf [PROMPT...] [options]
 *
 * With a prompt (the words joined by spaces; text piped on stdin is put in front of them, and
 * is the whole prompt when no words are given) the model answers it once: the prompt is one
 * user message rendered with the model's chat template (pt_llm_chat), the answer streams to
 * stdout as it is generated, and the program exits. Without a prompt on a terminal (or with
 * --interactive on any stdin) it is a chat: `>>> ` reads a message, the answer streams back,
 * and every turn is kept so the next prompt repeats the history -- the engine's prefix cache
 * then only processes the new turn. Slash commands (/?, /bye, /clear, /set, /show) change the
 * session; a line starting with """ begins a multi-line message ended by """.
 *
 * On a terminal, answers wrap at word boundaries to its width (--nowordwrap turns that off).
 * Ctrl-C stops the answer being generated (a SIGINT handler raises a flag that the token
 * callback reads: no token after it is printed) and returns to the prompt. At the prompt the
 * terminal is in raw mode (a small line editor: the grey hint on an empty line, backspace,
 * Ctrl-U), where Ctrl-C discards the line and, on an empty one, says how to leave, as
 * `ollama run` does; Ctrl-D on an empty line or /bye ends the chat. An answer cut off because
 * the context is full says so. Errors print "Error: <message>" on stderr and exit with
 * status 1. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <prometorch/prometorch.h>

#include "promeserve.h"

#define MAX_STOP 8

/* Everything a run needs between turns: the model, how to load and sample it, the history. */
typedef struct session {
    const char *model_path;
    pt_llm_opts load_opts;
    pt_llm *llm;
    int64_t load_ns; /* time of the last load, reported once with --verbose */
    bool load_reported;
    pt_gen_opts gen; /* sampling options; stop strings point into `stop` */
    char *stop[MAX_STOP];
    char *system;      /* system message, NULL when none */
    pt_chat_msg *msgs; /* user/assistant turns (owned strings) */
    int32_t n_msgs, cap_msgs;
    bool verbose;
    bool interactive;
    bool nowordwrap;
} session;

/* A growing byte buffer (an answer being streamed, a line being read). */
typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf;

static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

static void error_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void error_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("Error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool sb_append(strbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p)
            return false;
        b->s = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
    return true;
}

/* ---- option values ------------------------------------------------------------------------- */

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || v != v)
        return false;
    *out = v;
    return true;
}

/* Sets one sampling or context parameter by its Ollama name. Returns 0 on success, 1 for an
 * unknown name, 2 for a bad value. num_ctx only changes s->load_opts (the caller reloads). */
static int set_parameter(session *s, const char *name, const char *value)
{
    pt_gen_opts *g = &s->gen;
    int64_t i;
    float f;
    if (!strcmp(name, "temperature") || !strcmp(name, "top_p") || !strcmp(name, "min_p") ||
        !strcmp(name, "repeat_penalty") || !strcmp(name, "typical_p") ||
        !strcmp(name, "presence_penalty") || !strcmp(name, "frequency_penalty")) {
        if (!parse_float(value, &f))
            return 2;
        float *dst = !strcmp(name, "temperature")        ? &g->temperature
                     : !strcmp(name, "top_p")            ? &g->top_p
                     : !strcmp(name, "min_p")            ? &g->min_p
                     : !strcmp(name, "repeat_penalty")   ? &g->repeat_penalty
                     : !strcmp(name, "typical_p")        ? &g->typical_p
                     : !strcmp(name, "presence_penalty") ? &g->presence_penalty
                                                         : &g->frequency_penalty;
        *dst = f;
        return 0;
    }
    if (!strcmp(name, "top_k")) {
        if (!parse_i64(value, INT32_MIN, INT32_MAX, &i))
            return 2;
        g->top_k = (int32_t)i;
    } else if (!strcmp(name, "num_predict")) {
        if (!parse_i64(value, INT32_MIN, INT32_MAX, &i))
            return 2;
        g->num_predict = (int32_t)i;
    } else if (!strcmp(name, "repeat_last_n")) {
        if (!parse_i64(value, -1, INT32_MAX, &i))
            return 2;
        g->repeat_last_n = (int32_t)i;
    } else if (!strcmp(name, "seed")) {
        if (!parse_i64(value, INT64_MIN, INT64_MAX, &i))
            return 2;
        g->seed = i;
    } else if (!strcmp(name, "num_ctx")) {
        if (!parse_i64(value, 1, INT32_MAX, &i))
            return 2;
        s->load_opts.num_ctx = (int32_t)i;
    } else if (!strcmp(name, "num_thread")) {
        if (!parse_i64(value, 1, 4096, &i))
            return 2;
        s->load_opts.n_threads = (int32_t)i;
        pt_set_num_threads((int)i);
    } else if (!strcmp(name, "stop")) {
        if (g->n_stop >= MAX_STOP)
            return 2;
        char *dup = strdup(value);
        if (!dup)
            return 2;
        s->stop[g->n_stop++] = dup;
        g->stop = (const char *const *)s->stop;
    } else {
        return 1;
    }
    return 0;
}

/* ---- model and history ----------------------------------------------------------------------- */

/* Loads (or reloads, after num_ctx changed) the model; on failure the old one stays. */
static bool load_model(session *s)
{
    int64_t t0 = now_ns();
    pt_llm *llm = pt_llm_load(s->model_path, &s->load_opts);
    if (!llm) {
        const char *e = pt_last_error();
        error_msg("%s", e && *e ? e : "could not load the model");
        return false;
    }
    pt_llm_free(s->llm);
    s->llm = llm;
    s->load_ns = now_ns() - t0;
    s->load_reported = false;
    return true;
}

static bool push_msg(session *s, const char *role, const char *content, size_t len)
{
    if (s->n_msgs == s->cap_msgs) {
        int32_t cap = s->cap_msgs ? s->cap_msgs * 2 : 16;
        pt_chat_msg *m = realloc(s->msgs, (size_t)cap * sizeof *m);
        if (!m)
            return false;
        s->msgs = m;
        s->cap_msgs = cap;
    }
    char *c = malloc(len + 1);
    if (!c)
        return false;
    memcpy(c, content, len);
    c[len] = '\0';
    s->msgs[s->n_msgs].role = role; /* a static string */
    s->msgs[s->n_msgs].content = c;
    s->n_msgs++;
    return true;
}

static void pop_msgs(session *s, int32_t keep)
{
    while (s->n_msgs > keep)
        free((char *)s->msgs[--s->n_msgs].content);
}

/* Drops the first n turns (oldest first). */
static void drop_front(session *s, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        free((char *)s->msgs[i].content);
    memmove(s->msgs, s->msgs + n, (size_t)(s->n_msgs - n) * sizeof *s->msgs);
    s->n_msgs -= n;
}

/* The conversation as the engine sees it: the system message, then the turns. Returns a new
 * array (free()) of *n messages borrowing the session's strings. */
static pt_chat_msg *conversation(const session *s, int32_t *n)
{
    pt_chat_msg *all = malloc(((size_t)s->n_msgs + 1) * sizeof *all);
    if (!all)
        return NULL;
    int32_t k = 0;
    if (s->system)
        all[k++] = (pt_chat_msg){"system", s->system};
    memcpy(all + k, s->msgs, (size_t)s->n_msgs * sizeof *all);
    *n = k + s->n_msgs;
    return all;
}

/* Tokens of the rendered conversation, or -1 when it cannot be rendered. */
static int64_t prompt_tokens(session *s)
{
    int32_t n;
    pt_chat_msg *all = conversation(s, &n);
    if (!all)
        return -1;
    char *p = pt_llm_chat_prompt(s->llm, all, n);
    free(all);
    if (!p)
        return -1;
    int32_t first; /* only the count is wanted; a 1-id buffer avoids relying on out == NULL */
    int64_t k = pt_llm_tokenize(s->llm, p, strlen(p), true, true, &first, 1);
    free(p);
    return k;
}

/* Like Ollama, a chat longer than the context loses its oldest turns (the system message and
 * the newest user message stay): the prompt must leave room for an answer. */
static void fit_history(session *s)
{
    const pt_llm_info *info = pt_llm_get_info(s->llm);
    if (!info || info->num_ctx <= 0)
        return;
    int64_t room = info->num_ctx / 4 < 512 ? info->num_ctx / 4 : 512;
    while (s->n_msgs > 1) {
        int64_t k = prompt_tokens(s);
        if (k < 0 || k <= info->num_ctx - room)
            return;
        /* drop the oldest user turn and the assistant answer after it */
        int32_t n = s->n_msgs >= 3 && !strcmp(s->msgs[1].role, "assistant") ? 2 : 1;
        drop_front(s, n);
    }
}

/* ---- generation ------------------------------------------------------------------------------ */

/* An answer being streamed. With word wrap (stdout a terminal, no --nowordwrap) the bytes of
 * the current word are held in `word` until a space or newline ends it, so a word that does
 * not fit on the line starts the next one, as `ollama run` wraps. */
typedef struct stream {
    strbuf answer;
    bool oom;
    int width; /* wrap at this many columns; 0: no wrapping */
    int col;   /* column of the cursor */
    strbuf word;
    int word_cols;
} stream;

/* Prints the held word, on a new line when it does not fit on this one. */
static void flush_word(stream *st)
{
    if (!st->word.len)
        return;
    if (st->col > 0 && st->col + st->word_cols > st->width) {
        fputc('\n', stdout);
        st->col = 0;
    }
    fwrite(st->word.s, 1, st->word.len, stdout);
    st->col += st->word_cols;
    st->word.len = 0;
    st->word_cols = 0;
}

static void put_wrapped(stream *st, const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n' || c == ' ') {
            flush_word(st);
            if (c == ' ' && st->col >= st->width) { /* a space at the margin breaks the line */
                c = '\n';
            }
            fputc(c, stdout);
            st->col = c == '\n' ? 0 : st->col + 1;
            continue;
        }
        sb_append(&st->word, (const char *)&c, 1);
        if ((c & 0xC0) != 0x80) /* count characters, not UTF-8 continuation bytes */
            st->word_cols++;
        if (st->word_cols >= st->width) /* a word longer than a line: break it */
            flush_word(st);
    }
}

static bool on_token(int32_t token, const char *text, size_t len, void *user)
{
    (void)token;
    stream *st = user;
    /* A token sampled after Ctrl-C is not printed: the answer stops where the user saw it
     * when the key was pressed (the engine then stops with done_reason "cancel"). */
    if (g_interrupted)
        return false;
    if (len && text) {
        if (st->width > 0)
            put_wrapped(st, text, len);
        else
            fwrite(text, 1, len, stdout);
        fflush(stdout);
        if (!sb_append(&st->answer, text, len))
            st->oom = true;
    }
    return !g_interrupted;
}

/* The terminal's width when answers should be wrapped, else 0. */
static int wrap_width(const session *s)
{
    struct winsize ws;
    if (s->nowordwrap || !isatty(STDOUT_FILENO) || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0)
        return 0;
    return ws.ws_col > 10 ? ws.ws_col - 1 : 0;
}

/* Go's time.Duration formatting, as Ollama prints its timings: "1.234567s", "12.3ms". */
static void fmt_duration(char *buf, size_t cap, int64_t ns)
{
    if (ns < 1000) {
        snprintf(buf, cap, "%" PRId64 "ns", ns);
        return;
    }
    const char *unit;
    double v;
    int64_t min = 0;
    if (ns < 1000000) {
        unit = "µs";
        v = (double)ns / 1e3;
    } else if (ns < 1000000000) {
        unit = "ms";
        v = (double)ns / 1e6;
    } else {
        unit = "s";
        min = ns / 60000000000LL;
        v = (double)(ns - min * 60000000000LL) / 1e9;
    }
    char num[64];
    snprintf(num, sizeof num, "%.9f", v);
    char *end = num + strlen(num) - 1;
    while (*end == '0')
        *end-- = '\0';
    if (*end == '.')
        *end = '\0';
    if (min)
        snprintf(buf, cap, "%" PRId64 "m%s%s", min, num, unit);
    else
        snprintf(buf, cap, "%s%s", num, unit);
}

static void print_stats(const pt_gen_stats *st, int64_t total_ns, int64_t load_ns)
{
    char d[64];
    fmt_duration(d, sizeof d, total_ns);
    fprintf(stderr, "total duration:       %s\n", d);
    fmt_duration(d, sizeof d, load_ns);
    fprintf(stderr, "load duration:        %s\n", d);
    fprintf(stderr, "prompt eval count:    %d token(s)\n", st->prompt_evaluated);
    fmt_duration(d, sizeof d, st->prompt_ns);
    fprintf(stderr, "prompt eval duration: %s\n", d);
    double pr = st->prompt_ns > 0 ? st->prompt_evaluated / (st->prompt_ns / 1e9) : 0;
    fprintf(stderr, "prompt eval rate:     %.2f tokens/s\n", pr);
    fprintf(stderr, "eval count:           %d token(s)\n", st->gen_tokens);
    fmt_duration(d, sizeof d, st->gen_ns);
    fprintf(stderr, "eval duration:        %s\n", d);
    double gr = st->gen_ns > 0 ? st->gen_tokens / (st->gen_ns / 1e9) : 0;
    fprintf(stderr, "eval rate:            %.2f tokens/s\n", gr);
}

/* Whether generation stopped because the context has no room for another token, rather than
 * at num_predict ("length" stands for both). */
static bool context_full(const session *s, const pt_gen_opts *g, const pt_gen_stats *st)
{
    if (!st->done_reason || strcmp(st->done_reason, "length") != 0)
        return false;
    if (g->num_predict >= 0 && st->gen_tokens >= g->num_predict)
        return false;
    const pt_llm_info *info = pt_llm_get_info(s->llm);
    return info && st->prompt_tokens + st->gen_tokens > info->num_ctx - 1;
}

/* The answer was cut off mid-sentence: say why and what to do, instead of stopping silently. */
static void report_context_full(const session *s)
{
    const pt_llm_info *info = pt_llm_get_info(s->llm);
    fprintf(stderr, "[the answer was cut off: the context of %d tokens is full; %s]\n",
            info ? info->num_ctx : 0,
            s->interactive ? "/clear starts over, /set parameter num_ctx N makes it longer"
                           : "--ctx N makes it longer");
    if (s->interactive)
        fputc('\n', stderr);
}

/* Answers the last user message of the history, streaming to stdout. The answer is added to
 * the history when it is kept (interactive). Returns 0, 1 on an error (printed), or 2 when
 * Ctrl-C cancelled it. */
static int answer(session *s)
{
    int32_t n;
    pt_chat_msg *all = conversation(s, &n);
    if (!all) {
        error_msg("out of memory");
        return 1;
    }
    pt_gen_stats stats = {0};
    pt_gen_opts g = s->gen;
    g.stats = &stats;
    stream st = {.width = wrap_width(s)};
    g_interrupted = 0;
    int64_t t0 = now_ns();
    pt_status rc = pt_llm_chat(s->llm, all, n, &g, on_token, &st);
    if (st.width > 0)
        flush_word(&st);
    free(st.word.s);
    int64_t total = now_ns() - t0;
    free(all);
    /* Ctrl-C after the last token does not count: the engine says whether it stopped for it */
    bool cancelled = rc == PT_OK && (stats.done_reason ? !strcmp(stats.done_reason, "cancel")
                                                       : g_interrupted != 0);
    if (rc != PT_OK) {
        if (st.answer.len)
            fputc('\n', stdout);
        fflush(stdout);
        const char *e = pt_last_error();
        error_msg("%s", e && *e ? e : "generation failed");
        free(st.answer.s);
        return 1;
    }
    fputs(s->interactive && !cancelled ? "\n\n" : "\n", stdout);
    fflush(stdout);
    if (context_full(s, &g, &stats))
        report_context_full(s);
    if (s->verbose) {
        int64_t load = s->load_reported ? 0 : s->load_ns;
        s->load_reported = true;
        print_stats(&stats, total + load, load);
        if (s->interactive)
            fputc('\n', stderr);
    }
    if (s->interactive && st.answer.len && !st.oom)
        push_msg(s, "assistant", st.answer.s, st.answer.len);
    free(st.answer.s);
    return cancelled ? 2 : 0;
}

/* ---- interactive chat ------------------------------------------------------------------------ */

static void help_text(void)
{
    puts("Available Commands:\n"
         "  /set            Set session variables\n"
         "  /show           Show model information\n"
         "  /clear          Clear session context\n"
         "  /bye            Exit\n"
         "  /?, /help       Help for a command\n"
         "\n"
         "Use \"\"\" to begin a multi-line message.\n");
}

static void set_help(void)
{
    puts("Available Commands:\n"
         "  /set parameter ...     Set a parameter\n"
         "  /set system <string>   Set system message\n"
         "  /set verbose           Show LLM stats\n"
         "  /set quiet             Disable LLM stats\n");
}

static void parameter_help(void)
{
    puts("Available Parameters:\n"
         "  /set parameter seed <int>             Random number seed\n"
         "  /set parameter num_predict <int>      Max number of tokens to predict\n"
         "  /set parameter top_k <int>            Pick from top k num of tokens\n"
         "  /set parameter top_p <float>          Pick token based on sum of probabilities\n"
         "  /set parameter min_p <float>          Pick token based on top token probability "
         "* min_p\n"
         "  /set parameter num_ctx <int>          Set the context size (reloads the model)\n"
         "  /set parameter temperature <float>    Set creativity level\n"
         "  /set parameter repeat_penalty <float> How strongly to penalize repetitions\n"
         "  /set parameter repeat_last_n <int>    Set how far back to look for repetitions\n"
         "  /set parameter num_thread <int>       Threads to compute with\n"
         "  /set parameter stop <string> ...      Set the stop strings\n");
}

static void show_help(void)
{
    puts("Available Commands:\n"
         "  /show info         Show details for this model\n"
         "  /show parameters   Show parameters for this session\n"
         "  /show system       Show system message\n");
}

/* A parameter count as Ollama shows it: "134.52M", "1.24B". */
static void fmt_params(char *buf, size_t cap, int64_t n)
{
    if (n >= 1000000000)
        snprintf(buf, cap, "%.2fB", n / 1e9);
    else if (n >= 1000000)
        snprintf(buf, cap, "%.2fM", n / 1e6);
    else if (n >= 1000)
        snprintf(buf, cap, "%.2fK", n / 1e3);
    else
        snprintf(buf, cap, "%" PRId64, n);
}

static void show_info(const session *s)
{
    const pt_llm_info *i = pt_llm_get_info(s->llm);
    if (!i) {
        error_msg("%s", pt_last_error());
        return;
    }
    char p[32];
    fmt_params(p, sizeof p, i->n_params);
    printf("  Model\n");
    printf("    %-20s%s\n", "name", i->name ? i->name : "");
    printf("    %-20s%s\n", "architecture", i->architecture ? i->architecture : "");
    printf("    %-20s%s\n", "parameters", p);
    printf("    %-20s%d\n", "context length", i->context_length);
    printf("    %-20s%d\n", "embedding length", i->n_embd);
    printf("    %-20s%s\n", "quantization", i->quantization ? i->quantization : "");
    printf("\n  Details\n");
    printf("    %-20s%s\n", "chat template", i->chat_template ? i->chat_template : "");
    printf("    %-20s%d\n", "num_ctx", i->num_ctx);
    printf("    %-20s%d\n", "vocabulary", i->n_vocab);
    printf("    %-20s%d\n", "layers", i->n_layer);
    printf("    %-20s%d (%d key/value)\n", "heads", i->n_head, i->n_head_kv);
    printf("    %-20s%d\n", "head dimension", i->head_dim);
    printf("    %-20s%d\n", "feed forward length", i->n_ff);
    printf("    %-20s%.2f MB\n\n", "file size", i->file_size / 1e6);
}

static void show_parameters(const session *s)
{
    const pt_gen_opts *g = &s->gen;
    printf("User defined parameters:\n");
    printf("%-16s%d\n", "num_predict", g->num_predict);
    printf("%-16s%g\n", "temperature", g->temperature);
    printf("%-16s%d\n", "top_k", g->top_k);
    printf("%-16s%g\n", "top_p", g->top_p);
    printf("%-16s%g\n", "min_p", g->min_p);
    printf("%-16s%g\n", "repeat_penalty", g->repeat_penalty);
    printf("%-16s%d\n", "repeat_last_n", g->repeat_last_n);
    printf("%-16s%" PRId64 "\n", "seed", g->seed);
    const pt_llm_info *i = pt_llm_get_info(s->llm);
    printf("%-16s%d\n", "num_ctx", i ? i->num_ctx : s->load_opts.num_ctx);
    for (int32_t k = 0; k < g->n_stop; k++)
        printf("%-16s\"%s\"\n", "stop", g->stop[k]);
    putchar('\n');
}

/* Splits off the next space-separated word of *p (advancing *p); NULL when none is left. */
static char *next_word(char **p)
{
    char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s)
        return NULL;
    char *w = s;
    while (*s && *s != ' ' && *s != '\t')
        s++;
    if (*s)
        *s++ = '\0';
    *p = s;
    return w;
}

static void cmd_set(session *s, char *rest)
{
    char *what = next_word(&rest);
    if (!what) {
        set_help();
        return;
    }
    if (!strcmp(what, "verbose")) {
        s->verbose = true;
        puts("Set 'verbose' mode.");
    } else if (!strcmp(what, "quiet")) {
        s->verbose = false;
        puts("Set 'quiet' mode.");
    } else if (!strcmp(what, "system")) {
        while (*rest == ' ' || *rest == '\t')
            rest++;
        size_t n = strlen(rest);
        if (n >= 2 && rest[0] == '"' && rest[n - 1] == '"') { /* /set system "..." */
            rest[n - 1] = '\0';
            rest++;
        }
        char *sys = *rest ? strdup(rest) : NULL;
        free(s->system);
        s->system = sys;
        puts(sys ? "Set system message." : "Cleared system message.");
    } else if (!strcmp(what, "parameter")) {
        char *name = next_word(&rest);
        while (*rest == ' ' || *rest == '\t')
            rest++;
        if (!name || !*rest) {
            parameter_help();
            return;
        }
        if (!strcmp(name, "stop")) { /* each word is one stop string, replacing the old ones */
            for (int32_t k = 0; k < s->gen.n_stop; k++)
                free(s->stop[k]);
            s->gen.n_stop = 0;
            for (char *w; (w = next_word(&rest));) {
                if (set_parameter(s, "stop", w) != 0) {
                    printf("Couldn't set parameter: at most %d stop strings\n", MAX_STOP);
                    break;
                }
            }
            printf("Set parameter 'stop' to '%d string(s)'\n", s->gen.n_stop);
            return;
        }
        int32_t old_ctx = s->load_opts.num_ctx;
        int rc = set_parameter(s, name, rest);
        if (rc == 1) {
            printf("Couldn't set parameter: unknown parameter '%s'\n", name);
        } else if (rc == 2) {
            printf("Couldn't set parameter: invalid value '%s' for '%s'\n", rest, name);
        } else if (!strcmp(name, "num_ctx")) {
            if (load_model(s)) {
                printf("Set parameter 'num_ctx' to '%s'\n", rest);
            } else {
                s->load_opts.num_ctx = old_ctx;
            }
        } else {
            printf("Set parameter '%s' to '%s'\n", name, rest);
        }
    } else {
        printf("Unknown command '/set %s'. Type /? for help\n", what);
    }
}

static void cmd_show(session *s, char *rest)
{
    char *what = next_word(&rest);
    if (!what)
        show_help();
    else if (!strcmp(what, "info"))
        show_info(s);
    else if (!strcmp(what, "parameters"))
        show_parameters(s);
    else if (!strcmp(what, "system"))
        puts(s->system ? s->system : "No system message was specified for this model.");
    else
        printf("Unknown command '/show %s'. Type /? for help\n", what);
}

/* Reads one line (without its newline) into b. Returns false on EOF, a read error or Ctrl-C. */
static bool read_line(strbuf *b)
{
    b->len = 0;
    sb_append(b, "", 0);
    char chunk[4096];
    for (;;) {
        if (!fgets(chunk, sizeof chunk, stdin))
            return b->len > 0 && !g_interrupted; /* a last line without a newline counts */
        size_t n = strlen(chunk);
        bool eol = n && chunk[n - 1] == '\n';
        if (eol)
            n--;
        if (!sb_append(b, chunk, n))
            return false;
        if (eol) {
            if (b->len && b->s[b->len - 1] == '\r')
                b->s[--b->len] = '\0';
            return true;
        }
    }
}

/* ---- the line editor of a terminal --------------------------------------------------------- */

typedef enum read_result { READ_LINE, READ_EOF, READ_INTERRUPT } read_result;

/* ollama's readline colours: the hint is grey, the cursor stays at its start. */
#define HINT_COLOR "\033[38;5;245m"
#define COLOR_RESET "\033[0m"

static void show_hint(const char *hint)
{
    if (hint && *hint)
        printf(HINT_COLOR "%s" COLOR_RESET "\033[%dD", hint, (int)strlen(hint));
}

/* A line being edited: its bytes and where they sit on the screen. The editor wraps the line
 * itself (a line end when a row is full) so that it always knows the cursor's row: the first
 * row holds width - prompt_cols characters (the prompt, ">>> " or the continuation prompt
 * "... ", counts), the next rows width each. */
typedef struct editor {
    strbuf *b;
    int prompt_cols; /* width of the prompt before the text */
    int width;       /* the terminal's columns; 0: unknown, no wrapping */
    int cols;        /* characters of the text (UTF-8 lead bytes; one column each) */
} editor;

/* Echoes byte c, appended to the text; a full row continues on the next one. */
static bool put_char(editor *e, unsigned char c)
{
    if (!sb_append(e->b, (const char *)&c, 1))
        return false;
    fputc(c == '\t' ? ' ' : c, stdout); /* a tab would jump columns: shown as one space */
    if ((c & 0xC0) == 0x80)
        return true; /* a continuation byte: the same column */
    e->cols++;
    if (e->width > 0 && (e->prompt_cols + e->cols) % e->width == 0)
        fputs("\r\n", stdout);
    return true;
}

/* Removes the last (UTF-8) character from the text and the screen. */
static void erase_char(editor *e)
{
    strbuf *b = e->b;
    if (!b->len)
        return;
    do
        b->len--;
    while (b->len && ((unsigned char)b->s[b->len] & 0xC0) == 0x80);
    b->s[b->len] = '\0';
    if (e->width > 0 && (e->prompt_cols + e->cols) % e->width == 0) {
        /* the cursor is at the start of a row: the character is the last of the row above */
        printf("\033[A\r\033[%dC\033[K", e->width - 1);
    } else {
        fputs("\b \b", stdout);
    }
    e->cols--;
}

static int terminal_width(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col < 10)
        return 0;
    return ws.ws_col;
}

/* Skips the rest of an escape sequence (arrow keys and the like, which this editor ignores). */
static void skip_escape(void)
{
    unsigned char c;
    if (read(STDIN_FILENO, &c, 1) != 1 || (c != '[' && c != 'O'))
        return;
    while (read(STDIN_FILENO, &c, 1) == 1 && !(c >= 0x40 && c <= 0x7E))
        ;
}

/* Reads one line on a terminal in raw mode, echoing it after `prompt` (printed here), with
 * `hint` in grey while the line is empty. Ctrl-C is a key here, not a signal (ISIG off): it
 * gives READ_INTERRUPT; Ctrl-D on an empty line READ_EOF. */
static read_result edit_line(strbuf *b, const char *prompt, const char *hint)
{
    struct termios old, raw;
    if (tcgetattr(STDIN_FILENO, &old) != 0)
        return READ_EOF;
    raw = old;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
    raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    /* raw before the prompt shows: keys typed as soon as it appears are not echoed twice */
    tcsetattr(STDIN_FILENO, TCSADRAIN, &raw);
    b->len = 0;
    sb_append(b, "", 0);
    editor e = {.b = b, .prompt_cols = (int)strlen(prompt), .width = terminal_width()};
    fputs(prompt, stdout);
    show_hint(hint);
    fflush(stdout);
    read_result res;
    for (;;) {
        unsigned char c;
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            res = READ_EOF;
            break;
        }
        if (c == '\r' || c == '\n') {
            res = READ_LINE;
            break;
        }
        if (c == 3) { /* Ctrl-C */
            res = READ_INTERRUPT;
            break;
        }
        if (c == 4) { /* Ctrl-D: ends the chat on an empty line, else ignored */
            if (!b->len) {
                res = READ_EOF;
                break;
            }
            continue;
        }
        if (c == 127 || c == 8) {
            erase_char(&e);
            if (!b->len)
                show_hint(hint);
        } else if (c == 21) { /* Ctrl-U: the whole line */
            while (b->len)
                erase_char(&e);
            show_hint(hint);
        } else if (c == 27) {
            skip_escape();
        } else if (c >= 32 || c == '\t') {
            if (!b->len)
                fputs("\033[K", stdout); /* the hint goes when typing starts */
            if (!put_char(&e, c)) {
                res = READ_EOF;
                break;
            }
        }
        fflush(stdout);
    }
    if (!b->len)
        fputs("\033[K", stdout);
    if (!(e.width > 0 && e.cols > 0 && (e.prompt_cols + e.cols) % e.width == 0))
        fputc('\n', stdout); /* (after a full row the cursor is on a new line already) */
    fflush(stdout);
    tcsetattr(STDIN_FILENO, TCSADRAIN, &old);
    return res;
}

/* Reads the lines of a """ message after its first line (whose text after the opening quotes
 * is already in msg) up to the line that ends with """. */
static read_result read_multiline(strbuf *msg, strbuf *line, bool tty)
{
    for (;;) {
        if (tty) {
            read_result r = edit_line(line, "... ", "Use \"\"\" to end multi-line input");
            if (r != READ_LINE)
                return r;
        } else if (!read_line(line)) {
            return READ_EOF;
        }
        size_t n = line->len;
        bool end = n >= 3 && !strcmp(line->s + n - 3, "\"\"\"");
        if (!sb_append(msg, "\n", 1) || !sb_append(msg, line->s, end ? n - 3 : n))
            return READ_EOF;
        if (end)
            return READ_LINE;
    }
}

/* Handles a slash command. Returns false when the chat should end. */
static bool slash_command(session *s, char *line)
{
    char *rest = line;
    char *cmd = next_word(&rest);
    if (!strcmp(cmd, "/bye") || !strcmp(cmd, "/exit"))
        return false;
    if (!strcmp(cmd, "/?") || !strcmp(cmd, "/help")) {
        char *what = next_word(&rest);
        if (what && !strcmp(what, "set"))
            set_help();
        else if (what && !strcmp(what, "show"))
            show_help();
        else
            help_text();
    } else if (!strcmp(cmd, "/clear")) {
        pop_msgs(s, 0);
        puts("Cleared session context");
    } else if (!strcmp(cmd, "/set")) {
        cmd_set(s, rest);
    } else if (!strcmp(cmd, "/show")) {
        cmd_show(s, rest);
    } else {
        printf("Unknown command '%s'. Type /? for help\n", cmd);
    }
    return true;
}

static int chat_loop(session *s)
{
    bool tty = isatty(STDIN_FILENO);
    strbuf line = {0}, msg = {0};
    int status = 0;
    for (;;) {
        g_interrupted = 0;
        read_result r;
        if (tty) {
            r = edit_line(&line, ">>> ", "Send a message (/? for help)");
        } else {
            fputs(">>> ", stdout);
            fflush(stdout);
            r = read_line(&line) ? READ_LINE : READ_EOF;
            if (r == READ_EOF)
                fputc('\n', stdout);
        }
        if (r == READ_INTERRUPT) {
            /* as ollama: Ctrl-C drops the line being typed and keeps the chat */
            if (!line.len)
                puts("Use Ctrl + d or /bye to exit.");
            continue;
        }
        if (r == READ_EOF)
            break; /* EOF or Ctrl-D */
        msg.len = 0;
        if (!strncmp(line.s, "\"\"\"", 3)) {
            size_t n = line.len;
            bool closed = n >= 6 && !strcmp(line.s + n - 3, "\"\"\"");
            sb_append(&msg, line.s + 3, closed ? n - 6 : n - 3);
            r = closed ? READ_LINE : read_multiline(&msg, &line, tty);
            if (r == READ_INTERRUPT)
                continue; /* the multi-line message is dropped */
            if (r == READ_EOF) {
                if (!tty)
                    fputc('\n', stdout);
                break;
            }
        } else {
            sb_append(&msg, line.s, line.len);
        }
        if (!msg.s || !msg.len)
            continue;
        if (msg.s[0] == '/') {
            if (!slash_command(s, msg.s))
                break;
            continue;
        }
        int32_t before = s->n_msgs;
        if (!push_msg(s, "user", msg.s, msg.len)) {
            error_msg("out of memory");
            status = 1;
            break;
        }
        fit_history(s);
        int rc = answer(s);
        if (rc == 1 || (rc == 2 && s->n_msgs == before + 1))
            pop_msgs(s, s->n_msgs - 1); /* an error or a cancel before any text: forget it */
        if (rc == 2)
            fputc('\n', stdout);
    }
    free(line.s);
    free(msg.s);
    return status;
}

/* ---- command line ---------------------------------------------------------------------------- */

static void run_usage(FILE *f)
{
    fputs("Run a model: answer PROMPT once, or chat when no prompt is given on a terminal\n"
          "\n"
          "Usage:\n"
          "  promeserve run MODEL.gguf [PROMPT] [flags]\n"
          "\n"
          "Flags:\n"
          "      --verbose             Show timings for the response\n"
          "      --threads N           Threads to compute with (default: all cores)\n"
          "      --ctx N               Context length in tokens, num_ctx (default 4096)\n"
          "      --temperature F       Sampling temperature (default 0.8; 0 is greedy)\n"
          "      --seed N              Random seed (default: random)\n"
          "      --num-predict N       Tokens to generate at most (default -1: no limit)\n"
          "      --system TEXT         System message\n"
          "  -i, --interactive         Chat even when stdin is not a terminal\n"
          "      --nowordwrap          Don't wrap words to the next line automatically\n"
          "  -h, --help                help for run\n"
          "\n"
          "Text piped on stdin is the prompt (put before PROMPT when both are given).\n"
          "In a chat, /? lists the commands; /bye or Ctrl-D quits.\n",
          f);
}

typedef struct cli {
    const char *model;
    char **words; /* the prompt's words */
    int n_words;
    bool help;
} cli;

/* Options that take a value; "--name value" or "--name=value". */
static const char *const VALUE_OPTS[] = {
    "--threads", "--ctx", "--temperature", "--seed", "--num-predict", "--system", NULL};

static bool apply_option(session *s, const char *name, const char *value)
{
    int64_t i;
    static const struct {
        const char *opt, *param;
    } to_param[] = {{"--temperature", "temperature"},
                    {"--seed", "seed"},
                    {"--num-predict", "num_predict"},
                    {"--ctx", "num_ctx"}};
    if (!strcmp(name, "--threads")) {
        if (!parse_i64(value, 1, 4096, &i)) {
            error_msg("invalid value \"%s\" for --threads: expected a positive integer", value);
            return false;
        }
        s->load_opts.n_threads = (int32_t)i;
        return true;
    }
    if (!strcmp(name, "--system")) {
        free(s->system);
        s->system = *value ? strdup(value) : NULL;
        return true;
    }
    for (size_t k = 0; k < sizeof to_param / sizeof *to_param; k++) {
        if (!strcmp(name, to_param[k].opt)) {
            if (set_parameter(s, to_param[k].param, value) != 0) {
                error_msg("invalid value \"%s\" for %s", value, name);
                return false;
            }
            return true;
        }
    }
    error_msg("unknown flag: %s", name);
    return false;
}

/* Parses argv (argv[0] is "run"); flags may come anywhere, "--" ends them. */
static bool parse_cli(session *s, cli *c, int argc, char **argv)
{
    bool flags = true;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (flags && !strcmp(a, "--")) {
            flags = false;
        } else if (flags && a[0] == '-' && a[1]) {
            if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
                c->help = true;
            } else if (!strcmp(a, "--verbose")) {
                s->verbose = true;
            } else if (!strcmp(a, "-i") || !strcmp(a, "--interactive")) {
                s->interactive = true;
            } else if (!strcmp(a, "--nowordwrap")) {
                s->nowordwrap = true;
            } else {
                char name[64];
                const char *eq = strchr(a, '=');
                size_t n = eq ? (size_t)(eq - a) : strlen(a);
                snprintf(name, sizeof name, "%.*s", (int)n, a);
                bool takes = false;
                for (int k = 0; VALUE_OPTS[k]; k++)
                    takes |= !strcmp(name, VALUE_OPTS[k]);
                if (!takes) {
                    error_msg("unknown flag: %s", name);
                    return false;
                }
                const char *value = eq ? eq + 1 : NULL;
                if (!value) {
                    if (i + 1 >= argc) {
                        error_msg("flag needs an argument: %s", name);
                        return false;
                    }
                    value = argv[++i];
                }
                if (!apply_option(s, name, value))
                    return false;
            }
        } else if (!c->model) {
            c->model = a;
        } else {
            c->words[c->n_words++] = a;
        }
    }
    return true;
}

/* The one-shot prompt: stdin (when it is not a terminal) followed by the words. *have is set
 * when there is a prompt at all. Returns a new string, NULL on a read error. */
static char *one_shot_prompt(const cli *c, bool stdin_tty, bool *have)
{
    strbuf p = {0};
    sb_append(&p, "", 0);
    *have = c->n_words > 0;
    if (!stdin_tty) {
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
            sb_append(&p, buf, n);
        if (ferror(stdin)) {
            free(p.s);
            return NULL;
        }
        *have = true;
    }
    for (int i = 0; i < c->n_words; i++) {
        if (p.len)
            sb_append(&p, " ", 1);
        sb_append(&p, c->words[i], strlen(c->words[i]));
    }
    return p.s;
}

static void session_free(session *s)
{
    pop_msgs(s, 0);
    free(s->msgs);
    free(s->system);
    for (int32_t k = 0; k < s->gen.n_stop; k++)
        free(s->stop[k]);
    pt_llm_free(s->llm);
}

int ps_cmd_run(int argc, char **argv)
{
    session s = {0};
    s.gen = pt_gen_opts_default();
    cli c = {0};
    c.words = calloc((size_t)argc, sizeof *c.words);
    if (!c.words) {
        error_msg("out of memory");
        return 1;
    }
    int status = 1;
    if (!parse_cli(&s, &c, argc, argv))
        goto done;
    if (c.help) {
        run_usage(stdout);
        status = 0;
        goto done;
    }
    if (!c.model) {
        error_msg("requires at least 1 arg(s), only received 0 (promeserve run MODEL.gguf "
                  "[PROMPT])");
        goto done;
    }
    s.model_path = c.model;
    if (s.load_opts.n_threads > 0)
        pt_set_num_threads(s.load_opts.n_threads);

    bool stdin_tty = isatty(STDIN_FILENO);
    bool have_prompt = false;
    char *prompt = NULL;
    if (!s.interactive) {
        prompt = one_shot_prompt(&c, stdin_tty, &have_prompt);
        if (!prompt) {
            error_msg("reading the prompt from stdin: %s", strerror(errno));
            goto done;
        }
        s.interactive = !have_prompt;
    }
    if (!load_model(&s)) {
        free(prompt);
        goto done;
    }

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, NULL);

    if (s.interactive) {
        free(prompt);
        status = chat_loop(&s);
    } else {
        if (!push_msg(&s, "user", prompt, strlen(prompt))) {
            free(prompt);
            error_msg("out of memory");
            goto done;
        }
        free(prompt);
        /* an empty prompt only loads the model, as `ollama run` does with empty input */
        int rc = s.msgs[0].content[0] ? answer(&s) : 0;
        status = rc == 0 ? 0 : rc == 2 ? 130 : 1;
    }
done:
    session_free(&s);
    free(c.words);
    return status;
}
