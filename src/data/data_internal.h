/* Definitions shared by the files of src/data: the dataset struct and a Philox helper. */
#ifndef PT_DATA_INTERNAL_H
#define PT_DATA_INTERNAL_H

#include "../core/internal.h"

struct pt_dataset {
    atomic_long refcount;
    int nfields;
    pt_dataset_len_fn len;
    pt_dataset_get_fn get;
    void (*free_ctx)(void *ctx);
    void *ctx;
};

/* 64 random bits for (key, counter). */
static inline uint64_t pti_data_rand64(uint64_t key, uint64_t ctr)
{
    uint32_t w[4];
    pti_philox(key, ctr, w);
    return (uint64_t)w[0] << 32 | w[1];
}

/* Fisher-Yates permutation of 0..n-1 drawn from key (counters 0..n-1). */
void pti_data_permutation(int64_t n, uint64_t key, int64_t *out);

#endif
