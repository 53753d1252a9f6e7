/* Settings passed from the random family's front-ends (src/ops/random.c) to its kernels
 * through pti_call.params. Shared by every backend, so a backend that implements the same
 * Philox counter scheme produces the same numbers as the CPU. */
#ifndef PT_OPS_RANDOM_H
#define PT_OPS_RANDOM_H

#include "../core/internal.h"

typedef struct pti_random_params {
    uint64_t key;     /* Philox key (the seed) */
    uint64_t base;    /* element i draws counter base + i */
    double a, b;      /* uniform [a, b); normal mean a, std b; bernoulli p = a */
    int64_t lo, hi;   /* randint [lo, hi) */
    bool replacement; /* multinomial */
} pti_random_params;

/* Key of the attempt-th retry stream of a rejection sampler (attempt 0 is the key itself). */
static inline uint64_t pti_random_retry_key(uint64_t key, uint64_t attempt)
{
    return key + attempt * UINT64_C(0x9E3779B97F4A7C15);
}

#endif
