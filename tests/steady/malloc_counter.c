/* An LD_PRELOAD shim that counts calls to the C allocator (malloc, calloc, realloc,
 * aligned_alloc, posix_memalign) for the tests/steady/ programs. Not part of the library.
 * Calls made from inside OpenBLAS (its small-matrix sgemm kernels allocate a scratch block
 * per call) are counted separately: they are outside PromeTorch's control. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

static unsigned long calls;
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static int resolving_calloc;
static char bootstrap[4096]; /* dlsym may call calloc before it is resolved */
static size_t bootstrap_used;

__attribute__((visibility("default"))) unsigned long malloc_counter_calls(void)
{
    return __atomic_load_n(&calls, __ATOMIC_RELAXED);
}

static unsigned long blas_calls;

__attribute__((visibility("default"))) unsigned long malloc_counter_blas_calls(void)
{
    return __atomic_load_n(&blas_calls, __ATOMIC_RELAXED);
}

static int in_openblas(void *caller)
{
    Dl_info info;
    if (!caller || !dladdr(caller, &info) || !info.dli_fname)
        return 0;
    for (const char *s = info.dli_fname; *s; s++)
        if (s[0] == 'o' && s[1] == 'p' && s[2] == 'e' && s[3] == 'n' && s[4] == 'b' && s[5] == 'l')
            return 1;
    return 0;
}

#define count() count_from(__builtin_return_address(0))
static void count_from(void *caller)
{
    __atomic_add_fetch(in_openblas(caller) ? &blas_calls : &calls, 1, __ATOMIC_RELAXED);
}

void *malloc(size_t n)
{
    if (!real_malloc)
        real_malloc = dlsym(RTLD_NEXT, "malloc");
    count();
    return real_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    if (!real_calloc) {
        if (resolving_calloc) {
            size_t n = (a * b + 15) & ~(size_t)15;
            if (bootstrap_used + n > sizeof bootstrap)
                return NULL;
            void *p = bootstrap + bootstrap_used;
            bootstrap_used += n;
            return p;
        }
        resolving_calloc = 1;
        real_calloc = dlsym(RTLD_NEXT, "calloc");
        resolving_calloc = 0;
    }
    count();
    return real_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    if (!real_realloc)
        real_realloc = dlsym(RTLD_NEXT, "realloc");
    count();
    return real_realloc(p, n);
}

void *aligned_alloc(size_t a, size_t n)
{
    if (!real_aligned_alloc)
        real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    count();
    return real_aligned_alloc(a, n);
}

int posix_memalign(void **p, size_t a, size_t n)
{
    if (!real_posix_memalign)
        real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    count();
    return real_posix_memalign(p, a, n);
}
