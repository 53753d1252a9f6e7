/* The persistent thread pool behind pti_parallel_for. Workers are started once, spin briefly
 * after each job (so back-to-back small ops do not pay a wake-up) and then sleep on a
 * condition variable. A job is cut into fixed chunks (the same boundaries for a given thread
 * count, so results are deterministic); the caller and the workers claim chunks from a shared
 * counter, so a worker that is asleep or descheduled never makes the caller wait for work it
 * has not started: the caller runs it instead. OpenBLAS is kept at one thread: the CPU
 * backend splits a large product across this pool itself (src/backends/cpu/gemm_blas.c says
 * why), so no second set of spinning threads competes for the cores. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

void openblas_set_num_threads(int num_threads);

/* How long a worker spins for the next job before sleeping. Long enough to bridge the gap
 * between back-to-back ops, short enough not to hold a core another process wants (a `pause` costs
 * 10-150 cycles depending on the CPU, so this is timed). */
#define SPIN_NS 50000

/* Chunks per thread of pti_parallel_for_balanced: enough that a thread that runs late (another
 * process on its core, a slower memory channel) costs an eighth of its share, not all of it:
 * measured on 2-thread decode of a 1B Q4_K_M model, 1 / 4 / 8 / 16 chunks per thread gave
 * 26.9 / 29.6 / 30.1 / 30.3 tokens/s (means of 5 alternated runs). */
#define BALANCED_CHUNKS_PER_THREAD 8

typedef struct pool {
    int nthreads; /* including the caller */
    int nworkers;
    pthread_t *workers;
    atomic_uint_fast64_t generation;
    /* The claim word: generation (bits 63..32), the job's chunk count (31..16) and the next
     * chunk to run (15..0). A claim succeeds only for the current generation and below that
     * generation's own count, read from the same word: a late worker that loaded the word of a
     * finished job can never take a chunk of the next one, whose count may be larger (a
     * balanced job after a plain one), and count it twice toward the next job's chunks_done. */
    atomic_uint_fast64_t claim;
    atomic_int chunks_done;
    atomic_int sleepers_waiting_done; /* the caller sleeps on done_cv */
    atomic_bool shutdown;
    pti_range_fn fn;
    void *ctx;
    int64_t n;
    int chunks; /* of the running job; read by its caller only (job_done) */
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
} pool;

static pool the_pool = {.mu = PTHREAD_MUTEX_INITIALIZER,
                        .work_cv = PTHREAD_COND_INITIALIZER,
                        .done_cv = PTHREAD_COND_INITIALIZER};
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER; /* one parallel job at a time */
static int configured_threads;                               /* 0 until first use */
static _Thread_local bool in_worker;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until cond(arg) holds or SPIN_NS pass; returns whether it held. */
static bool spin_until(bool (*cond)(const void *), const void *arg)
{
    int64_t deadline = monotonic_ns() + SPIN_NS;
    for (int i = 1;; i++) {
        if (cond(arg))
            return true;
        cpu_relax();
        if ((i & 31) == 0 && monotonic_ns() > deadline)
            return false;
    }
}

#define CLAIM_MAX_CHUNKS 0xffff

static uint64_t claim_word(uint32_t gen, int chunks, int next)
{
    return (uint64_t)gen << 32 | (uint64_t)chunks << 16 | (uint64_t)next;
}

static void run_chunk(int chunk, int chunks)
{
    int64_t n = the_pool.n;
    int64_t begin = n * chunk / chunks, end = n * (chunk + 1) / chunks;
    if (begin < end)
        the_pool.fn(the_pool.ctx, begin, end);
}

static bool generation_moved(const void *arg)
{
    uint64_t seen = *(const uint64_t *)arg;
    return atomic_load_explicit(&the_pool.generation, memory_order_acquire) != seen ||
           atomic_load(&the_pool.shutdown);
}

static bool job_done(const void *arg)
{
    (void)arg;
    /* seq_cst on chunks_done: see run_claimed_chunks */
    return atomic_load(&the_pool.chunks_done) == the_pool.chunks;
}

static uint64_t wait_for_generation(uint64_t seen)
{
    if (spin_until(generation_moved, &seen))
        return atomic_load_explicit(&the_pool.generation, memory_order_acquire);
    pthread_mutex_lock(&the_pool.mu);
    uint64_t g;
    while ((g = atomic_load(&the_pool.generation)) == seen && !atomic_load(&the_pool.shutdown))
        pthread_cond_wait(&the_pool.work_cv, &the_pool.mu);
    pthread_mutex_unlock(&the_pool.mu);
    return g;
}

/* Claims the next chunk of generation gen and stores the job's chunk count in *chunks; -1 when
 * none is left (or the job moved on). */
static int claim_chunk(uint32_t gen, int *chunks)
{
    uint64_t w = atomic_load_explicit(&the_pool.claim, memory_order_acquire);
    for (;;) {
        int count = (int)(w >> 16 & 0xffff), next = (int)(w & 0xffff);
        if ((uint32_t)(w >> 32) != gen || next >= count)
            return -1;
        if (atomic_compare_exchange_weak_explicit(&the_pool.claim, &w, w + 1, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *chunks = count;
            return next;
        }
    }
}

/* Runs chunks of generation gen until none is left. The finishing thread wakes a sleeping
 * caller; both sides use sequentially consistent operations on chunks_done and
 * sleepers_waiting_done, so either the worker sees the flag or the caller sees the count. */
static void run_claimed_chunks(uint32_t gen)
{
    int c, chunks;
    while ((c = claim_chunk(gen, &chunks)) >= 0) {
        run_chunk(c, chunks);
        if (atomic_fetch_add(&the_pool.chunks_done, 1) + 1 == chunks &&
            atomic_load(&the_pool.sleepers_waiting_done)) {
            pthread_mutex_lock(&the_pool.mu);
            pthread_cond_signal(&the_pool.done_cv);
            pthread_mutex_unlock(&the_pool.mu);
        }
    }
}

static void *worker_main(void *arg)
{
    (void)arg;
    in_worker = true;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_generation(seen);
        if (atomic_load(&the_pool.shutdown))
            break;
        run_claimed_chunks((uint32_t)seen);
    }
    return NULL;
}

static void stop_workers(void)
{
    if (!the_pool.workers)
        return;
    pthread_mutex_lock(&the_pool.mu);
    atomic_store(&the_pool.shutdown, true);
    pthread_cond_broadcast(&the_pool.work_cv);
    pthread_mutex_unlock(&the_pool.mu);
    for (int i = 0; i < the_pool.nworkers; i++)
        pthread_join(the_pool.workers[i], NULL);
    free(the_pool.workers);
    the_pool.workers = NULL;
    the_pool.nworkers = 0;
    atomic_store(&the_pool.shutdown, false);
}

static void start_workers(int nthreads)
{
    the_pool.nthreads = nthreads;
    the_pool.nworkers = 0;
    atomic_store(&the_pool.generation, 0);
    atomic_store(&the_pool.claim, 0);
    if (nthreads <= 1)
        return;
    the_pool.workers = pti_calloc((size_t)nthreads - 1, sizeof(pthread_t));
    if (!the_pool.workers) {
        the_pool.nthreads = 1;
        return;
    }
    for (int i = 1; i < nthreads; i++) {
        if (pthread_create(&the_pool.workers[i - 1], NULL, worker_main, NULL) != 0)
            break;
        the_pool.nworkers++;
    }
    the_pool.nthreads = the_pool.nworkers + 1;
}

static int default_threads(void)
{
    const char *env = getenv("PT_NUM_THREADS");
    if (env && atoi(env) > 0)
        return atoi(env) > 1024 ? 1024 : atoi(env);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void ensure_configured(void)
{
    if (__atomic_load_n(&configured_threads, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&config_lock);
    if (!configured_threads) {
        int n = default_threads();
        openblas_set_num_threads(1);
        start_workers(n);
        __atomic_store_n(&configured_threads, n, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&config_lock);
}

void pt_set_num_threads(int n)
{
    if (n < 1)
        n = 1;
    if (n > 1024)
        n = 1024;
    pthread_mutex_lock(&config_lock);
    pthread_mutex_lock(&run_lock);
    stop_workers();
    start_workers(n);
    openblas_set_num_threads(1);
    __atomic_store_n(&configured_threads, n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&run_lock);
    pthread_mutex_unlock(&config_lock);
}

int pt_get_num_threads(void)
{
    ensure_configured();
    return the_pool.nthreads;
}

/* The job of pti_parallel_for: at most per_thread chunks per pool thread, each of >= grain items.
 */
static void parallel_run(int64_t n, int64_t grain, int64_t per_thread, pti_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    ensure_configured();
    if (n <= grain || in_worker || the_pool.nworkers == 0 ||
        pthread_mutex_trylock(&run_lock) != 0) {
        fn(ctx, 0, n); /* small, nested, single-threaded, or the pool is busy elsewhere */
        return;
    }
    int64_t chunks = (n + grain - 1) / grain;
    if (chunks > per_thread * the_pool.nthreads)
        chunks = per_thread * the_pool.nthreads;
    if (chunks > CLAIM_MAX_CHUNKS)
        chunks = CLAIM_MAX_CHUNKS;
    uint64_t gen = atomic_load(&the_pool.generation) + 1;
    the_pool.fn = fn;
    the_pool.ctx = ctx;
    the_pool.n = n;
    the_pool.chunks = (int)chunks;
    atomic_store(&the_pool.chunks_done, 0);
    atomic_store_explicit(&the_pool.claim, claim_word((uint32_t)gen, (int)chunks, 0),
                          memory_order_release);
    pthread_mutex_lock(&the_pool.mu);
    atomic_store_explicit(&the_pool.generation, gen, memory_order_release);
    pthread_cond_broadcast(&the_pool.work_cv);
    pthread_mutex_unlock(&the_pool.mu);

    in_worker = true;
    run_claimed_chunks((uint32_t)gen);
    in_worker = false;

    if (!spin_until(job_done, NULL)) {
        pthread_mutex_lock(&the_pool.mu);
        atomic_store(&the_pool.sleepers_waiting_done, 1);
        while (!job_done(NULL))
            pthread_cond_wait(&the_pool.done_cv, &the_pool.mu);
        atomic_store(&the_pool.sleepers_waiting_done, 0);
        pthread_mutex_unlock(&the_pool.mu);
    }
    pthread_mutex_unlock(&run_lock);
}

void pti_parallel_for(int64_t n, int64_t grain, pti_range_fn fn, void *ctx)
{
    parallel_run(n, grain, 1, fn, ctx);
}

void pti_parallel_for_balanced(int64_t n, int64_t grain, pti_range_fn fn, void *ctx)
{
    parallel_run(n, grain, BALANCED_CHUNKS_PER_THREAD, fn, ctx);
}
