/* The multi-threaded memcpy the benchmarks measure memory bandwidth with (bench_qgemv,
 * llm_bench): `bytes` split into one contiguous slice per thread. Header-only. */
#ifndef PT_BENCH_COPY_H
#define PT_BENCH_COPY_H

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define BENCH_COPY_MAX_THREADS 64

typedef struct bench_copy_part {
    char *dst;
    const char *src;
    size_t n;
} bench_copy_part;

static void *bench_copy_slice(void *a)
{
    bench_copy_part *c = a;
    memcpy(c->dst, c->src, c->n);
    return NULL;
}

/* Copies bytes from src to dst on `threads` threads (clamped to 1..BENCH_COPY_MAX_THREADS); a
 * slice whose thread cannot be created is copied by the caller. */
static void bench_parallel_copy(char *dst, const char *src, size_t bytes, int threads)
{
    threads = threads < 1 ? 1 : threads > BENCH_COPY_MAX_THREADS ? BENCH_COPY_MAX_THREADS : threads;
    pthread_t th[BENCH_COPY_MAX_THREADS];
    bench_copy_part parts[BENCH_COPY_MAX_THREADS];
    bool started[BENCH_COPY_MAX_THREADS] = {false};
    size_t chunk = bytes / (size_t)threads;
    for (int t = 0; t < threads; t++) {
        size_t n = t == threads - 1 ? bytes - chunk * (size_t)t : chunk; /* last: remainder */
        parts[t] = (bench_copy_part){dst + (size_t)t * chunk, src + (size_t)t * chunk, n};
        if (t > 0) {
            started[t] = pthread_create(&th[t], NULL, bench_copy_slice, &parts[t]) == 0;
            if (!started[t])
                bench_copy_slice(&parts[t]);
        }
    }
    bench_copy_slice(&parts[0]);
    for (int t = 1; t < threads; t++)
        if (started[t])
            pthread_join(th[t], NULL);
}

#endif
