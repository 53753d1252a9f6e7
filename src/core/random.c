/* The default random generator: counter-based Philox4x32-10 keyed by the seed. A kernel
 * reserves a range of counters and element i draws from counter base+i, so results do not
 * depend on how the work is split across threads. */
#include "internal.h"

static atomic_uint_fast64_t seed_value = 67280421310721ULL; /* PyTorch's default_rng_seed_val */
static atomic_uint_fast64_t next_counter;

void pt_manual_seed(uint64_t seed)
{
    atomic_store(&seed_value, seed);
    atomic_store(&next_counter, 0);
}

uint64_t pt_initial_seed(void)
{
    return atomic_load(&seed_value);
}

pti_rng_stream pti_rng_reserve(uint64_t count)
{
    pti_rng_stream s;
    s.key = atomic_load(&seed_value);
    s.base = atomic_fetch_add(&next_counter, count);
    return s;
}

pti_rng_state pti_rng_get_state(void)
{
    pti_rng_state s = {atomic_load(&seed_value), atomic_load(&next_counter)};
    return s;
}

void pti_rng_set_state(pti_rng_state s)
{
    atomic_store(&seed_value, s.seed);
    atomic_store(&next_counter, s.counter);
}

pt_tensor *pt_get_rng_state(void)
{
    pti_rng_state s = pti_rng_get_state();
    uint8_t bytes[16];
    for (int i = 0; i < 8; i++) {
        bytes[i] = (uint8_t)(s.seed >> (8 * i));
        bytes[8 + i] = (uint8_t)(s.counter >> (8 * i));
    }
    int64_t n = 16;
    return pt_from_data(bytes, 1, &n, PT_UINT8, (pt_device){PT_DEVICE_CPU, 0});
}

pt_status pt_set_rng_state(const pt_tensor *state)
{
    if (!PTI_CHECK_ARG(state, "pt_set_rng_state", "state"))
        return pt_last_status();
    if (pt_dtype_of(state) != PT_UINT8 || pt_numel(state) != 16)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_set_rng_state: expected a uint8 tensor of 16 "
                         "elements (from pt_get_rng_state), got %s with %lld elements",
                         pt_dtype_name(pt_dtype_of(state)), (long long)pt_numel(state));
    uint8_t bytes[16];
    pt_status st = pt_copy_to_host(state, bytes, sizeof bytes);
    if (st != PT_OK)
        return st;
    pti_rng_state s = {0, 0};
    for (int i = 7; i >= 0; i--) {
        s.seed = s.seed << 8 | bytes[i];
        s.counter = s.counter << 8 | bytes[8 + i];
    }
    pti_rng_set_state(s);
    return PT_OK;
}

void pti_philox(uint64_t key, uint64_t ctr, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}
