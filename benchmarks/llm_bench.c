/* LLM speed benchmark, PromeTorch's half of benchmarks/llm_vs_llamacpp.py (which runs
 * llama.cpp on the same model, threads and token ids, and prints the comparison).
 *
 *   llm_bench MODEL.gguf [--threads N] [--ctx N] [--batch N] [--pp N] [--tg N] [--repeat R]
 *                        [--ids-in FILE] [--ids-out FILE] [--ids-only]
 *   llm_bench --membw [--threads N] [--mb MB]
 *
 * Prompt processing (pp): one pt_llm_eval of the --pp (512) prompt ids at n_past 0 (forward
 * passes of up to --batch, 512, tokens), timed after one untimed warm-up of the same call.
 * Generation (tg): --tg (128) pt_llm_eval calls of one token each, continuing after the
 * prompt, each feeding the argmax of the previous logits (greedy decoding, no sampler). Both are
 * repeated R times (default 1); the JSON line printed at the end gives the median tokens/s of each,
 * every measurement, and the generated ids (so the driver can check both engines decode the same
 * tokens).
 *
 * The prompt ids are a fixed English text, repeated, tokenized with BOS and cut to --pp ids;
 * --ids-out writes them (space-separated) and --ids-only stops there; --ids-in reads them
 * instead, so both engines get exactly the same ids.
 *
 * --membw measures copy bandwidth on the same number of threads (bench_qgemv's method: each
 * thread memcpy's its slice of a --mb (512) MB buffer, best of several rounds) and prints
 * {"copy_gbs": bytes copied / s, "traffic_gbs": bytes read + written / s}, and read
 * bandwidth: each thread sums its slice of the same buffer, best of 7 ("read_gbs": bytes read / s;
 * the decode bound, as a GEMV only reads its weights). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <prometorch/prometorch.h>

#include "bench_copy.h"

#define MAX_THREADS 256
#define MAX_REPEAT 100

static const char TEXT[] =
    "The history of computing is a story of people who wanted to calculate faster than they "
    "could by hand. Early mechanical calculators added and multiplied numbers with gears, and "
    "by the middle of the twentieth century electronic machines filled whole rooms, reading "
    "their programs from punched cards. Transistors replaced vacuum tubes, integrated circuits "
    "replaced single transistors, and each step made computers smaller, cheaper and more "
    "reliable. Today a phone in a pocket holds more memory than all the computers of 1970 "
    "together, and language models trained on large collections of text answer questions, "
    "translate between languages and write programs. ";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[MAX_REPEAT];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static int die(const char *what)
{
    const char *e = pt_last_error();
    fprintf(stderr, "llm_bench: %s: %s\n", what, e && *e ? e : "failed");
    return 1;
}

/* ---- copy bandwidth ---------------------------------------------------------------------- */

/* One copy of `bytes` split over `threads` threads; returns the seconds it took. */
static double copy_once(char *dst, const char *src, size_t bytes, int threads)
{
    double t0 = now_s();
    bench_parallel_copy(dst, src, bytes, threads);
    return now_s() - t0;
}

/* ---- read bandwidth ---------------------------------------------------------------------- */

typedef struct read_part {
    const uint64_t *p;
    size_t n; /* 64-byte lines */
    uint64_t sum;
} read_part;

/* Sums a slice 64 bytes at a time into 8 independent lanes (vectorized by the compiler): a pure
 * streaming read, what a GEMV over weights does at best. */
static void *read_slice(void *arg)
{
    read_part *r = arg;
    uint64_t acc[8] = {0};
    for (size_t i = 0; i < r->n; i++)
        for (int k = 0; k < 8; k++)
            acc[k] += r->p[8 * i + k];
    for (int k = 0; k < 8; k++)
        r->sum += acc[k];
    return NULL;
}

/* One read of `bytes` split over `threads` threads; returns the seconds it took. */
static double read_once(const char *src, size_t bytes, int threads, uint64_t *sink)
{
    pthread_t th[MAX_THREADS];
    read_part parts[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    size_t lines = bytes / 64, chunk = lines / (size_t)threads;
    double t0 = now_s();
    for (int t = 0; t < threads; t++) {
        size_t n = t == threads - 1 ? lines - chunk * (size_t)t : chunk;
        parts[t] = (read_part){(const uint64_t *)src + (size_t)t * chunk * 8, n, 0};
        if (t > 0 && !(started[t] = pthread_create(&th[t], NULL, read_slice, &parts[t]) == 0))
            read_slice(&parts[t]);
    }
    read_slice(&parts[0]);
    for (int t = 1; t < threads; t++)
        if (started[t])
            pthread_join(th[t], NULL);
    double s = now_s() - t0;
    for (int t = 0; t < threads; t++)
        *sink += parts[t].sum;
    return s;
}

static int membw(int threads, int64_t mb)
{
    size_t bytes = (size_t)mb << 20;
    char *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst) {
        fprintf(stderr, "llm_bench: out of memory for %" PRId64 " MB buffers\n", mb);
        free(src);
        free(dst);
        return 1;
    }
    memset(src, 1, bytes);
    memset(dst, 0, bytes); /* fault the pages in before timing */
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        double s = copy_once(dst, src, bytes, threads);
        best = s < best ? s : best;
    }
    uint64_t sink = 0;
    double best_read = 1e30;
    for (int r = 0; r < 7; r++) {
        double s = read_once(src, bytes, threads, &sink);
        best_read = s < best_read ? s : best_read;
    }
    free(src);
    free(dst);
    double gbs = (double)bytes / best / 1e9;
    printf("{\"bench\": \"membw\", \"threads\": %d, \"bytes\": %zu, \"copy_gbs\": %.3f, "
           "\"traffic_gbs\": %.3f, \"read_gbs\": %.3f, \"sink\": %" PRIu64 "}\n",
           threads, bytes, gbs, 2 * gbs, (double)bytes / best_read / 1e9, sink);
    return 0;
}

/* ---- prompt ids -------------------------------------------------------------------------- */

/* The benchmark prompt: TEXT repeated until it gives at least n ids, cut to n. */
static int32_t *make_prompt(pt_llm *llm, int32_t n)
{
    size_t len = strlen(TEXT);
    for (size_t reps = 1; reps <= 1u << 16; reps *= 2) {
        char *text = malloc(len * reps + 1);
        if (!text)
            return NULL;
        for (size_t r = 0; r < reps; r++)
            memcpy(text + r * len, TEXT, len);
        text[len * reps] = '\0';
        /* pt_llm_tokenize returns the count the text needs; a bigger one means "call again" */
        int32_t *ids = NULL;
        int64_t cap = n, k = -1;
        for (;;) {
            int32_t *p = realloc(ids, (size_t)cap * sizeof *ids);
            if (!p)
                break;
            ids = p;
            k = pt_llm_tokenize(llm, text, len * reps, true, false, ids, cap);
            if (k <= cap)
                break;
            cap = k;
        }
        free(text);
        if (k >= n)
            return ids; /* the first n ids */
        free(ids);
        if (k < 0)
            return NULL;
    }
    return NULL;
}

static int32_t *read_ids(const char *path, int32_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "llm_bench: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    int32_t k = 0;
    long v;
    while (ids && k < n && fscanf(f, "%ld", &v) == 1)
        ids[k++] = (int32_t)v;
    fclose(f);
    if (ids && k < n) {
        fprintf(stderr, "llm_bench: %s has %d ids, %d needed\n", path, k, n);
        free(ids);
        return NULL;
    }
    return ids;
}

static int write_ids(const char *path, const int32_t *ids, int32_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "llm_bench: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    for (int32_t i = 0; i < n; i++)
        fprintf(f, "%d%c", ids[i], i + 1 < n ? ' ' : '\n');
    return fclose(f) != 0;
}

/* ---- the runs ---------------------------------------------------------------------------- */

static int32_t argmax(const float *v, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

/* Greedy decode of n_gen tokens after the n_past cached positions; writes the fed ids to out.
 * Returns the seconds taken, or a negative value on an error. */
static double decode(pt_llm *llm, int32_t n_past, int32_t n_gen, int32_t n_vocab, int32_t *out)
{
    double t0 = now_s();
    for (int32_t i = 0; i < n_gen; i++) {
        const float *logits = pt_llm_logits(llm);
        if (!logits)
            return -1;
        out[i] = argmax(logits, n_vocab);
        if (pt_llm_eval(llm, &out[i], 1, n_past + i) != PT_OK)
            return -1;
    }
    return now_s() - t0;
}

typedef struct args {
    const char *model, *ids_in, *ids_out;
    int64_t threads, ctx, batch, pp, tg, repeat, mb;
    bool ids_only, membw;
} args;

static int parse_args(int argc, char **argv, args *a)
{
    *a = (args){.threads = 2, .ctx = 0, .batch = 512, .pp = 512, .tg = 128, .repeat = 1, .mb = 512};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int64_t *num = !strcmp(o, "--threads")  ? &a->threads
                       : !strcmp(o, "--ctx")    ? &a->ctx
                       : !strcmp(o, "--batch")  ? &a->batch
                       : !strcmp(o, "--pp")     ? &a->pp
                       : !strcmp(o, "--tg")     ? &a->tg
                       : !strcmp(o, "--repeat") ? &a->repeat
                       : !strcmp(o, "--mb")     ? &a->mb
                                                : NULL;
        const char **str = !strcmp(o, "--ids-in")    ? &a->ids_in
                           : !strcmp(o, "--ids-out") ? &a->ids_out
                                                     : NULL;
        if (num || str) {
            if (i + 1 >= argc) {
                fprintf(stderr, "llm_bench: %s needs a value\n", o);
                return 1;
            }
            if (str) {
                *str = argv[++i];
                continue;
            }
            char *end;
            errno = 0;
            *num = strtoll(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] ||
                *num < (num == &a->ctx || num == &a->tg ? 0 : 1)) {
                fprintf(stderr, "llm_bench: bad value %s for %s\n", argv[i], o);
                return 1;
            }
        } else if (!strcmp(o, "--ids-only")) {
            a->ids_only = true;
        } else if (!strcmp(o, "--membw")) {
            a->membw = true;
        } else if (o[0] == '-' || a->model) {
            fprintf(stderr, "llm_bench: unknown argument %s\n", o);
            return 1;
        } else {
            a->model = o;
        }
    }
    if (a->threads > MAX_THREADS || a->repeat > MAX_REPEAT || a->pp > 1 << 20 || a->tg > 1 << 20) {
        fprintf(stderr, "llm_bench: --threads <= %d, --repeat <= %d, --pp/--tg <= 2^20\n",
                MAX_THREADS, MAX_REPEAT);
        return 1;
    }
    if (!a->membw && !a->model) {
        fprintf(stderr,
                "usage: llm_bench MODEL.gguf [--threads N] [--ctx N] [--batch N] [--pp N] [--tg N] "
                "[--repeat R] [--ids-in F] [--ids-out F] [--ids-only]\n"
                "       llm_bench --membw [--threads N] [--mb MB]\n");
        return 1;
    }
    return 0;
}

/* s as the contents of a JSON string (quotes, backslashes and control bytes escaped). */
static void print_json_str(const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
}

static void print_list(const char *key, const double *v, int n)
{
    printf(", \"%s\": [", key);
    for (int i = 0; i < n; i++)
        printf("%s%.6f", i ? ", " : "", v[i]);
    printf("]");
}

static int bench(const args *a)
{
    int32_t pp = (int32_t)a->pp, tg = (int32_t)a->tg, rep = (int32_t)a->repeat;
    int32_t ctx = a->ctx ? (int32_t)a->ctx : pp + tg + 16;
    pt_llm_opts lo = {
        .n_threads = (int32_t)a->threads, .num_ctx = ctx, .n_batch = (int32_t)a->batch};
    pt_set_num_threads((int)a->threads);
    double t0 = now_s();
    pt_llm *llm = pt_llm_load(a->model, &lo);
    if (!llm)
        return die(a->model);
    double load_s = now_s() - t0;
    const pt_llm_info *info = pt_llm_get_info(llm);
    int32_t *ids = a->ids_in ? read_ids(a->ids_in, pp) : make_prompt(llm, pp);
    int32_t *gen = malloc(((size_t)tg + 1) * sizeof *gen);
    int rc = 1;
    if (!ids || !gen || !info) {
        if (!a->ids_in)
            die("building the prompt");
        goto out;
    }
    if (a->ids_out && write_ids(a->ids_out, ids, pp))
        goto out;
    if (a->ids_only) {
        rc = 0;
        goto out;
    }
    if (pt_llm_eval(llm, ids, pp, 0) != PT_OK) { /* warm-up */
        die("prompt eval");
        goto out;
    }
    double pp_s[MAX_REPEAT], tg_s[MAX_REPEAT], pp_tps[MAX_REPEAT], tg_tps[MAX_REPEAT];
    for (int32_t r = 0; r < rep; r++) {
        double s = now_s();
        if (pt_llm_eval(llm, ids, pp, 0) != PT_OK) {
            die("prompt eval");
            goto out;
        }
        pp_s[r] = now_s() - s;
        tg_s[r] = decode(llm, pp, tg, info->n_vocab, gen);
        if (tg_s[r] < 0) {
            die("decode");
            goto out;
        }
        pp_tps[r] = pp / pp_s[r];
        tg_tps[r] = tg_s[r] > 0 ? tg / tg_s[r] : 0;
    }
    printf("{\"bench\": \"llm\", \"engine\": \"prometorch\", \"model\": \"");
    print_json_str(info->name);
    printf("\", \"threads\": %d, \"num_ctx\": %d, \"n_batch\": %d, \"load_s\": %.6f, "
           "\"pp_tokens\": %d, \"tg_tokens\": %d, \"pp_tok_s\": %.3f, \"tg_tok_s\": %.3f",
           (int)a->threads, info->num_ctx, (int)a->batch, load_s, pp, tg, median(pp_tps, rep),
           median(tg_tps, rep));
    print_list("pp_s", pp_s, rep);
    print_list("tg_s", tg_s, rep);
    printf(", \"tg_ids\": [");
    for (int32_t i = 0; i < tg; i++)
        printf("%s%d", i ? ", " : "", gen[i]);
    printf("]}\n");
    rc = 0;
out:
    free(ids);
    free(gen);
    pt_llm_free(llm);
    return rc;
}

int main(int argc, char **argv)
{
    args a;
    if (parse_args(argc, argv, &a))
        return 1;
    if (a.membw)
        return membw((int)a.threads, a.mb);
    return bench(&a);
}
