/* Decode-GEMV micro-benchmark of the quantized matmul: y[1, 4096] = x[1, 4096] @ W^T with W a
 * [4096, 4096] GGUF weight (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K) through pt_linear. Prints ms
 * per call and the weight bytes read per second, next to memcpy bandwidth on the same number of
 * threads.
 *
 * Two settings: "hot" repeats one weight (it fits in a large L3, so this is cache bandwidth),
 * "cold" cycles through enough copies (>= 256 MB) that every call streams from DRAM, which is
 * what a real model's decode step does.
 *
 * A last column times a product of M rows, x[M, K] (default M = 32, hot weight), to show how the
 * M > 1 loop scales (ideally far below 32 GEMVs).
 *
 * Times are the fastest call of each measurement (see time_calls).
 *
 * The shape defaults to 4096 x 4096; N and K give another (a decode model's short rows, K = 1024,
 * or its output matrix, N = the vocabulary).
 *
 *   bench_qgemv [threads (default 2)] [seconds per measurement (default 1)] [N K] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <prometorch/prometorch.h>

#include "bench_copy.h"

#define DEFAULT_DIM 4096
#define COLD_BYTES (256u << 20)
#define MAX_COPIES 64
#define DEFAULT_M 32

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* xorshift bytes, then sane f16 scales (0x1400 ~ 0.001) where each format keeps them */
static void fill_blocks(unsigned char *p, size_t nblocks, size_t bsize, const int *d_off, int nd)
{
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < nblocks * bsize; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        p[i] = (unsigned char)s;
    }
    for (size_t b = 0; b < nblocks; b++)
        for (int j = 0; j < nd; j++) {
            p[b * bsize + (size_t)d_off[j]] = 0x00;
            p[b * bsize + (size_t)d_off[j] + 1] = 0x14;
        }
}

typedef struct {
    const char *name;
    pt_dtype dt;
    int d_off[2], nd;
} qtype;

/* Times fn(arg, i) for about `secs` seconds (after 3 warm-up calls); seconds per call: the
 * fastest call, which on a machine shared with other jobs is the figure least disturbed by
 * them (the mean swings 2x there from run to run). */
static double time_calls(void (*fn)(void *, int), void *arg, double secs)
{
    for (int i = 0; i < 3; i++)
        fn(arg, i);
    int calls = 0;
    double t0 = now(), t = t0, best = 1e30;
    do {
        double c0 = now();
        fn(arg, calls++);
        t = now();
        if (t - c0 < best)
            best = t - c0;
    } while (t - t0 < secs);
    return best;
}

typedef struct {
    pt_tensor *x, *w[MAX_COPIES];
    int copies;
} gemv_arg;

static void gemv_call(void *a, int i)
{
    gemv_arg *g = a;
    pt_tensor *y = pt_linear(g->x, g->w[i % g->copies], NULL);
    if (!y) {
        fprintf(stderr, "pt_linear: %s\n", pt_last_error());
        exit(1);
    }
    pt_release(y);
}

typedef struct {
    char *dst, *src;
    size_t bytes;
    int threads;
} copy_arg;

static void memcpy_call(void *a, int i)
{
    (void)i;
    copy_arg *c = a;
    bench_parallel_copy(c->dst, c->src, c->bytes, c->threads);
}

static double memcpy_gbs(size_t bytes, int threads, double secs)
{
    copy_arg c = {malloc(bytes), malloc(bytes), bytes, threads};
    if (!c.dst || !c.src)
        return 0.0;
    memset(c.src, 1, bytes);
    memset(c.dst, 0, bytes);
    double s = time_calls(memcpy_call, &c, secs);
    free(c.dst);
    free(c.src);
    return (double)bytes / s / 1e9;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    double secs = argc > 2 ? atof(argv[2]) : 1.0;
    if (threads < 1 || threads > 64)
        threads = 2;
    int64_t n = argc > 4 ? atoll(argv[3]) : DEFAULT_DIM,
            k = argc > 4 ? atoll(argv[4]) : DEFAULT_DIM;
    int64_t pm = argc > 5 ? atoll(argv[5]) : DEFAULT_M;
    if (n < 1 || k < 256 || k % 256 != 0 || n > (1 << 20) || k > (1 << 16) || pm < 1 || pm > 512) {
        fprintf(stderr,
                "bench_qgemv: N must be 1 .. 2^20 K a multiple of 256 up to 2^16, M 1 .. 512\n");
        return 2;
    }
    pt_set_num_threads(threads);
    const qtype types[] = {
        {"Q4_0", PT_Q4_0, {0, 0}, 1}, {"Q4_1", PT_Q4_1, {0, 2}, 2}, {"Q5_0", PT_Q5_0, {0, 0}, 1},
        {"Q8_0", PT_Q8_0, {0, 0}, 1}, {"Q4_K", PT_Q4_K, {0, 2}, 2}, {"Q6_K", PT_Q6_K, {208, 0}, 1},
    };
    printf("bench_qgemv: x[1, %lld] @ W[%lld, %lld]^T, %d thread(s); GB/s = weight bytes / time\n",
           (long long)k, (long long)n, (long long)k, threads);
    float *xs = malloc((size_t)k * sizeof(float));
    for (int64_t i = 0; i < k; i++)
        xs[i] = (float)((i * 37 % 101) - 50) / 25.0f;
    pt_tensor *x = pt_from_data(xs, 2, (const int64_t[]){1, k}, PT_FLOAT32, pt_cpu());
    free(xs);
    float *xps = malloc((size_t)pm * (size_t)k * sizeof(float));
    for (int64_t i = 0; i < pm * k; i++)
        xps[i] = (float)((i * 53 % 97) - 48) / 24.0f;
    pt_tensor *xp = pt_from_data(xps, 2, (const int64_t[]){pm, k}, PT_FLOAT32, pt_cpu());
    free(xps);
    printf("%-6s %8s %9s %9s %10s %10s %14s\n", "type", "MB", "hot ms", "hot GB/s", "cold ms",
           "cold GB/s", "M rows ms");
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const qtype *q = &types[t];
        size_t bsize = pt_dtype_size(q->dt),
               nblocks = (size_t)n * (size_t)k / (size_t)pt_dtype_block_size(q->dt);
        size_t bytes = nblocks * bsize;
        unsigned char *raw = malloc(bytes);
        fill_blocks(raw, nblocks, bsize, q->d_off, q->nd);
        gemv_arg g = {.x = x, .copies = (int)((COLD_BYTES + bytes - 1) / bytes)};
        if (g.copies > MAX_COPIES)
            g.copies = MAX_COPIES;
        for (int c = 0; c < g.copies; c++)
            g.w[c] = pt_from_data(raw, 2, (const int64_t[]){n, k}, q->dt, pt_cpu());
        free(raw);
        int copies = g.copies;
        g.copies = 1;
        double hot = time_calls(gemv_call, &g, secs);
        g.copies = copies;
        double cold = time_calls(gemv_call, &g, secs);
        gemv_arg gp = {.x = xp, .w = {g.w[0]}, .copies = 1};
        double pre = time_calls(gemv_call, &gp, secs);
        printf("%-6s %8.2f %9.3f %9.2f %10.3f %10.2f %8.2f (%.1fx GEMV)\n", q->name, bytes / 1e6,
               hot * 1e3, bytes / hot / 1e9, cold * 1e3, bytes / cold / 1e9, pre * 1e3, pre / hot);
        for (int c = 0; c < copies; c++)
            pt_release(g.w[c]);
    }
    pt_release(x);
    pt_release(xp);
    printf("memcpy (%d thread(s), bytes copied / time): 8 MB (cache) %.2f GB/s, 256 MB (DRAM) "
           "%.2f GB/s\n",
           threads, memcpy_gbs(8u << 20, threads, secs), memcpy_gbs(COLD_BYTES, threads, secs));
    return 0;
}
