/* The library's allocation functions. Tensor memory comes from the CPU caching allocator:
 * 64-byte aligned blocks rounded to size classes (eight per power of two), kept on per-class
 * free lists when released, so a steady-state loop of ops that allocates the same sizes every
 * iteration never reaches malloc. Every other allocation of the library goes through
 * pti_malloc / pti_calloc / pti_realloc / pti_strdup (released with free()), so that one
 * place sets PT_ERR_OOM and one switch, pti_alloc_fail_nth, can make the n-th allocation fail
 * for the fault-injection tests. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define ALIGNMENT 64
#define SMALL_LIMIT 512 /* up to here classes are multiples of 64 */
#define SUBCLASSES 8    /* classes per power of two above SMALL_LIMIT */
#define N_CLASSES (8 + 64 * SUBCLASSES)
#define CACHE_LIMIT ((size_t)4 << 30) /* bytes kept cached before releasing to the system */

typedef struct free_block {
    struct free_block *next;
} free_block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static free_block *free_lists[N_CLASSES];
static size_t cached_bytes;
static atomic_size_t live_bytes;
static atomic_uint_fast64_t system_allocs;
/* > 0: the allocation that brings it to 0 fails (fault injection); 0: off. */
static atomic_int_fast64_t fault_countdown;

void pti_alloc_fail_nth(int64_t n)
{
    atomic_store(&fault_countdown, n > 0 ? n : 0);
}

int64_t pti_alloc_fault_pending(void)
{
    return atomic_load(&fault_countdown);
}

/* True when fault injection is armed and this allocation is the one to fail. */
static bool injected_failure(void)
{
    if (atomic_load_explicit(&fault_countdown, memory_order_relaxed) <= 0)
        return false;
    return atomic_fetch_sub(&fault_countdown, 1) == 1;
}

static int floor_log2(size_t v)
{
    return 63 - __builtin_clzll((unsigned long long)v);
}

/* Class index and the rounded size of that class. */
static int size_class(size_t n, size_t *rounded)
{
    if (n <= SMALL_LIMIT) {
        size_t k = (n + ALIGNMENT - 1) / ALIGNMENT;
        if (k == 0)
            k = 1;
        *rounded = k * ALIGNMENT;
        return (int)k - 1;
    }
    int p = floor_log2(n - 1); /* n-1 in [2^p, 2^(p+1)) */
    size_t step = ((size_t)1 << p) / SUBCLASSES;
    size_t sub = ((n - 1) - ((size_t)1 << p)) / step; /* 0..7 */
    *rounded = ((size_t)1 << p) + (sub + 1) * step;
    int cls = 8 + (p - 9) * SUBCLASSES + (int)sub;
    return cls < N_CLASSES ? cls : -1;
}

void *pti_cpu_alloc(size_t nbytes)
{
    size_t rounded;
    int cls = size_class(nbytes, &rounded);
    if (cls < 0 || injected_failure())
        return NULL;
    pthread_mutex_lock(&lock);
    free_block *b = free_lists[cls];
    if (b) {
        free_lists[cls] = b->next;
        cached_bytes -= rounded;
    }
    pthread_mutex_unlock(&lock);
    if (!b) {
        b = aligned_alloc(ALIGNMENT, rounded);
        if (!b) {
            pt_empty_cache();
            b = aligned_alloc(ALIGNMENT, rounded);
            if (!b)
                return NULL;
        }
        atomic_fetch_add(&system_allocs, 1);
    }
    atomic_fetch_add(&live_bytes, rounded);
    return b;
}

void pti_cpu_free(void *p, size_t nbytes)
{
    if (!p)
        return;
    size_t rounded;
    int cls = size_class(nbytes, &rounded);
    atomic_fetch_sub(&live_bytes, rounded);
    pthread_mutex_lock(&lock);
    if (cached_bytes + rounded <= CACHE_LIMIT) {
        free_block *b = p;
        b->next = free_lists[cls];
        free_lists[cls] = b;
        cached_bytes += rounded;
        p = NULL;
    }
    pthread_mutex_unlock(&lock);
    free(p);
}

/* Zeroed scratch blocks for autograd node state and small temporary arrays: the size sits in
 * a 64-byte header (keeping the payload aligned), so the block can be freed through a plain
 * `void (*)(void *)` callback. They are not tensor memory, so pt_memory_allocated() does not
 * count them. */
#define SCRATCH_HEADER 64

void *pti_scratch_alloc(size_t nbytes)
{
    if (nbytes > SIZE_MAX - SCRATCH_HEADER)
        return pti_error_null(PT_ERR_OOM, "out of memory (scratch block of %zu bytes)", nbytes);
    char *b = pti_cpu_alloc(nbytes + SCRATCH_HEADER);
    if (!b)
        return pti_error_null(PT_ERR_OOM, "out of memory (scratch block of %zu bytes)", nbytes);
    size_t rounded;
    size_class(nbytes + SCRATCH_HEADER, &rounded);
    atomic_fetch_sub(&live_bytes, rounded);
    memcpy(b, &nbytes, sizeof nbytes);
    memset(b + SCRATCH_HEADER, 0, nbytes);
    return b + SCRATCH_HEADER;
}

void pti_scratch_free(void *p)
{
    if (!p)
        return;
    char *b = (char *)p - SCRATCH_HEADER;
    size_t nbytes;
    memcpy(&nbytes, b, sizeof nbytes);
    size_t rounded;
    size_class(nbytes + SCRATCH_HEADER, &rounded);
    atomic_fetch_add(&live_bytes, rounded);
    pti_cpu_free(b, nbytes + SCRATCH_HEADER);
}

void pt_empty_cache(void)
{
    pthread_mutex_lock(&lock);
    for (int c = 0; c < N_CLASSES; c++) {
        free_block *b = free_lists[c];
        while (b) {
            free_block *next = b->next;
            free(b);
            b = next;
        }
        free_lists[c] = NULL;
    }
    cached_bytes = 0;
    pthread_mutex_unlock(&lock);
}

size_t pt_memory_allocated(void)
{
    return atomic_load(&live_bytes);
}
uint64_t pt_memory_system_allocs(void)
{
    return atomic_load(&system_allocs);
}

void *pti_malloc(size_t n)
{
    void *p = injected_failure() ? NULL : malloc(n ? n : 1);
    if (!p)
        pti_error(PT_ERR_OOM, "out of memory allocating %zu bytes", n);
    return p;
}

void *pti_calloc(size_t n, size_t size)
{
    void *p = injected_failure() ? NULL : calloc(n ? n : 1, size ? size : 1);
    if (!p)
        pti_error(PT_ERR_OOM, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *pti_realloc(void *p, size_t n)
{
    void *q = injected_failure() ? NULL : realloc(p, n ? n : 1);
    if (!q)
        pti_error(PT_ERR_OOM, "out of memory growing a block to %zu bytes", n);
    return q;
}

char *pti_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = pti_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

char *pti_strndup(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    char *d = pti_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}
