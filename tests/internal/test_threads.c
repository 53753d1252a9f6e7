/* The op thread pool (src/core/threads.c): every item of a job runs exactly once and the caller
 * returns only after all of them, across many back-to-back jobs of different chunk counts on
 * an oversubscribed pool (more threads than cores, so workers are preempted between loading the
 * claim word and claiming). A plain job (one chunk per thread) followed by a balanced one (eight
 * per thread) once let a late worker take a chunk of the next job with the previous job's word:
 * that chunk ran twice and the caller waited forever for a count it had passed. A watchdog turns
 * such a hang into a failure. */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/internal.h"
#include "testutil.h"

#define MAX_ITEMS 4096

typedef struct hits {
    atomic_int count[MAX_ITEMS];
} hits;

static void count_range(void *ctx, int64_t begin, int64_t end)
{
    hits *h = ctx;
    for (int64_t i = begin; i < end; i++)
        atomic_fetch_add_explicit(&h->count[i], 1, memory_order_relaxed);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_threads: a parallel job did not finish within 120 s\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

/* Runs a job of n items on the pool (balanced or plain) and checks that each ran once. */
static void run_and_check(hits *h, int64_t n, bool balanced)
{
    for (int64_t i = 0; i < n; i++)
        atomic_store_explicit(&h->count[i], 0, memory_order_relaxed);
    if (balanced)
        pti_parallel_for_balanced(n, 1, count_range, h);
    else
        pti_parallel_for(n, 1, count_range, h);
    for (int64_t i = 0; i < n; i++)
        if (atomic_load_explicit(&h->count[i], memory_order_relaxed) != 1)
            fail_msg("item %lld of a %s job of %lld ran %d times", (long long)i,
                     balanced ? "balanced" : "plain", (long long)n,
                     atomic_load_explicit(&h->count[i], memory_order_relaxed));
}

static void test_alternating_chunk_counts(void **state)
{
    (void)state;
    int old = pt_get_num_threads();
    pt_set_num_threads(6);
    hits *h = calloc(1, sizeof *h);
    assert_non_null(h);
    signal(SIGALRM, on_alarm);
    alarm(120);
    for (int round = 0; round < 20000; round++) {
        run_and_check(h, 6 + round % 5, false);    /* 6..10 items: at most 6 chunks */
        run_and_check(h, 100 + round % 900, true); /* 48 chunks */
    }
    alarm(0);
    free(h);
    pt_set_num_threads(old);
}

static void test_job_sizes(void **state)
{
    (void)state;
    int old = pt_get_num_threads();
    hits *h = calloc(1, sizeof *h);
    assert_non_null(h);
    for (int threads = 1; threads <= 5; threads++) {
        pt_set_num_threads(threads);
        for (int64_t n = 1; n <= MAX_ITEMS; n = n * 3 + 1) {
            run_and_check(h, n, false);
            run_and_check(h, n, true);
        }
    }
    free(h);
    pt_set_num_threads(old);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alternating_chunk_counts),
        cmocka_unit_test(test_job_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
