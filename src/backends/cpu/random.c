/* CPU kernels of the random family (front-ends in src/ops/random.c). Element i of a call
 * draws its four Philox words from counter base + i, so every kernel can split its range
 * across the thread pool and still give the same numbers for any thread count. Rejection
 * samplers that run out of words retry on the next key (pti_random_retry_key). Values are
 * computed in double and rounded to the output dtype (float16/bfloat16 through float). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/random.h"
#include "cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RANDOM_HAVE_AVX2 1
#endif

#define RANDOM_GRAIN 8192

/* ---- Philox4x32-10 --------------------------------------------------------------------------- */

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* The same function as the core's pti_philox, inlined into the kernel loops (a call per
 * element costs as much as the rounds themselves). */
static inline void philox(uint64_t key, uint64_t ctr, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* ---- uniform numbers from Philox words
 * ----------------------------------------------------------- */

/* Uniform in [0, 1) with `digits` random bits (53 at most): exact in a dtype with that many
 * mantissa digits, so rounding never reaches 1. */
static inline double uniform_bits(const uint32_t w[2], int digits)
{
    uint64_t v = ((uint64_t)w[0] << 32 | w[1]) >> (64 - digits);
    return (double)v / (double)(UINT64_C(1) << digits); /* exact: a power of two */
}

static int mantissa_digits(pt_dtype dt)
{
    switch (dt) {
    case PT_FLOAT64: return 53;
    case PT_FLOAT16: return 11;
    case PT_BFLOAT16: return 8;
    default: return 24;
    }
}

/* Stores v into element i of a contiguous buffer of dtype dt. */
static inline void store_value(char *data, pt_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case PT_FLOAT32: ((float *)data)[i] = (float)v; break;
    case PT_FLOAT64: ((double *)data)[i] = v; break;
    case PT_FLOAT16: ((uint16_t *)data)[i] = pt_float_to_half((float)v); break;
    case PT_BFLOAT16: ((uint16_t *)data)[i] = pt_float_to_bfloat16((float)v); break;
    default: pti_store_f64(data + i * (int64_t)pti_dtypes[dt].size, dt, v); break;
    }
}

static inline void store_int(char *data, pt_dtype dt, int64_t i, int64_t v)
{
    switch (dt) {
    case PT_INT64: ((int64_t *)data)[i] = v; break;
    case PT_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
    case PT_FLOAT32:
    case PT_FLOAT64:
    case PT_FLOAT16:
    case PT_BFLOAT16: store_value(data, dt, i, (double)v); break;
    default: pti_store_i64(data + i * (int64_t)pti_dtypes[dt].size, dt, v); break;
    }
}

/* An unbiased integer in [0, range) for counter ctr (Lemire's multiply-and-reject). range is
 * at least 1; 0 stands for 2^64. */
static uint64_t draw_below(uint64_t key, uint64_t ctr, uint64_t range)
{
    for (uint64_t attempt = 0;; attempt++) {
        uint32_t w[4];
        philox(pti_random_retry_key(key, attempt), ctr, w);
        if (range != 0 && range <= UINT32_MAX) {
            uint32_t r = (uint32_t)range, threshold = (uint32_t)(-r) % r;
            for (int k = 0; k < 4; k++) {
                uint64_t m = (uint64_t)w[k] * r;
                if ((uint32_t)m >= threshold)
                    return m >> 32;
            }
        } else {
            for (int k = 0; k < 4; k += 2) {
                uint64_t x = (uint64_t)w[k] << 32 | w[k + 1];
                if (range == 0)
                    return x;
                unsigned __int128 m = (unsigned __int128)x * range;
                if ((uint64_t)m >= (-range) % range)
                    return (uint64_t)(m >> 64);
            }
        }
    }
}

/* ---- uniform / normal / randint / bernoulli: one parallel loop each -------------------------- */

typedef struct fill_job {
    const pti_random_params *p;
    char *out;
    pt_dtype dt;
    const char *prob; /* bernoulli probabilities (contiguous) or NULL */
    pt_dtype prob_dt;
} fill_job;

#ifdef RANDOM_HAVE_AVX2
/* 32x32 -> 64-bit products of 8 lanes by m: the high and low halves, lane by lane. */
__attribute__((target("avx2,fma"))) static inline void mul_hilo(__m256i a, __m256i m, __m256i *hi,
                                                                __m256i *lo)
{
    __m256i even = _mm256_mul_epu32(a, m);
    __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

/* Word 0 of Philox for the 8 counters ctr .. ctr+7 (the only word [0, 1) float32 uses). */
__attribute__((target("avx2,fma"))) static inline __m256i philox8_word0(uint64_t key, uint64_t ctr)
{
    uint32_t lo[8], hi[8];
    for (int k = 0; k < 8; k++) {
        lo[k] = (uint32_t)(ctr + (uint64_t)k);
        hi[k] = (uint32_t)((ctr + (uint64_t)k) >> 32);
    }
    __m256i c0 = _mm256_loadu_si256((const __m256i *)lo);
    __m256i c1 = _mm256_loadu_si256((const __m256i *)hi);
    __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
    const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        __m256i hi0, lo0, hi1, lo1;
        mul_hilo(c0, m0, &hi0, &lo0);
        mul_hilo(c2, m1, &hi1, &lo1);
        c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
        c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
        c1 = lo1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    return c0;
}

/* pt_rand's float32 [0, 1): (word0 >> 8) * 2^-24, eight elements at a time; the same values
 * as the scalar loop. */
__attribute__((target("avx2,fma"))) static void
rand01_f32_avx2(const pti_random_params *p, float *out, int64_t begin, int64_t end)
{
    const __m256 scale = _mm256_set1_ps(1.0f / 16777216.0f);
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256i w = philox8_word0(p->key, p->base + (uint64_t)i);
        __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(w, 8)), scale);
        _mm256_storeu_ps(out + i, u);
    }
    for (; i < end; i++) {
        uint32_t w[4];
        philox(p->key, p->base + (uint64_t)i, w);
        out[i] = (float)(w[0] >> 8) * (1.0f / 16777216.0f);
    }
}
#endif

static void uniform_range(void *arg, int64_t begin, int64_t end)
{
    const fill_job *job = arg;
    const pti_random_params *p = job->p;
#ifdef RANDOM_HAVE_AVX2
    if (job->dt == PT_FLOAT32 && p->a == 0.0 && p->b == 1.0 && pti_cpu_has_avx2()) {
        rand01_f32_avx2(p, (float *)job->out, begin, end);
        return;
    }
#endif
    int digits = mantissa_digits(job->dt);
    double from = p->a, span = p->b - p->a, scale = 1.0 / (double)(UINT64_C(1) << digits);
    for (int64_t i = begin; i < end; i++) {
        uint32_t w[4];
        philox(p->key, p->base + (uint64_t)i, w);
        uint64_t bits = ((uint64_t)w[0] << 32 | w[1]) >> (64 - digits);
        double v = from + span * ((double)bits * scale);
        if (job->dt == PT_FLOAT32) {
            float f = (float)v;
            if (f >= (float)p->b && p->b > p->a) /* rounding must not reach `to` */
                f = fmaxf(nextafterf((float)p->b, -INFINITY), (float)p->a);
            ((float *)job->out)[i] = f;
        } else {
            if (v >= p->b && p->b > p->a)
                v = nextafter(p->b, -INFINITY);
            store_value(job->out, job->dt, i, v);
        }
    }
}

/* Box-Muller on two 53-bit uniforms: u1 in (0, 1], so the log is finite. */
static void normal_range(void *arg, int64_t begin, int64_t end)
{
    const fill_job *job = arg;
    const pti_random_params *p = job->p;
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t i = begin; i < end; i++) {
        uint32_t w[4];
        philox(p->key, p->base + (uint64_t)i, w);
        double u1 = 1.0 - uniform_bits(w, 53), u2 = uniform_bits(w + 2, 53);
        double z = sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
        store_value(job->out, job->dt, i, p->a + p->b * z);
    }
}

static void randint_range(void *arg, int64_t begin, int64_t end)
{
    const fill_job *job = arg;
    const pti_random_params *p = job->p;
    uint64_t range = (uint64_t)p->hi - (uint64_t)p->lo;
    for (int64_t i = begin; i < end; i++) {
        uint64_t x = draw_below(p->key, p->base + (uint64_t)i, range);
        store_int(job->out, job->dt, i, (int64_t)((uint64_t)p->lo + x));
    }
}

static void bernoulli_range(void *arg, int64_t begin, int64_t end)
{
    const fill_job *job = arg;
    const pti_random_params *p = job->p;
    size_t ps = job->prob ? pti_dtypes[job->prob_dt].size : 0;
    for (int64_t i = begin; i < end; i++) {
        uint32_t w[4];
        philox(p->key, p->base + (uint64_t)i, w);
        double prob = job->prob ? pti_load_f64(job->prob + i * (int64_t)ps, job->prob_dt) : p->a;
        store_int(job->out, job->dt, i, uniform_bits(w, 53) < prob);
    }
}

static pt_status run_fill(const pti_call *c, pti_range_fn fn)
{
    pt_tensor *out = c->out[0];
    fill_job job = {.p = c->params, .out = pti_data(out), .dt = out->dtype};
    if (c->n_in > 0) {
        job.prob = pti_data(c->in[0]);
        job.prob_dt = c->in[0]->dtype;
    }
    pti_parallel_for(out->numel, RANDOM_GRAIN, fn, &job);
    return PT_OK;
}

static pt_status cpu_uniform(const pti_call *c)
{
    return run_fill(c, uniform_range);
}
static pt_status cpu_normal(const pti_call *c)
{
    return run_fill(c, normal_range);
}
static pt_status cpu_randint(const pti_call *c)
{
    return run_fill(c, randint_range);
}

static pt_status cpu_bernoulli(const pti_call *c)
{
    if (c->n_in > 0) { /* every probability must be in [0, 1] before anything is drawn */
        const pt_tensor *pr = c->in[0];
        const char *data = pti_data(pr);
        size_t ps = pti_dtypes[pr->dtype].size;
        for (int64_t i = 0; i < pr->numel; i++) {
            double v = pti_load_f64(data + i * (int64_t)ps, pr->dtype);
            if (!(v >= 0.0 && v <= 1.0))
                return pti_error(PT_ERR_INVALID_ARG,
                                 "pt_bernoulli: probabilities must be in [0, 1], got %g at index "
                                 "%lld",
                                 v, (long long)i);
        }
    }
    return run_fill(c, bernoulli_range);
}

/* ---- randperm -------------------------------------------------------------------------------- */

/* Step i of the inside-out Fisher-Yates shuffle swaps with j[i] uniform in [0, i]; the j are
 * independent of each other, so they are drawn in parallel and the cheap swaps run after. */
typedef struct perm_job {
    const pti_random_params *p;
    int64_t *j;
} perm_job;

static void perm_draw_range(void *arg, int64_t begin, int64_t end)
{
    const perm_job *job = arg;
    for (int64_t i = begin; i < end; i++)
        job->j[i] = (int64_t)draw_below(job->p->key, job->p->base + (uint64_t)i, (uint64_t)i + 1);
}

typedef struct perm_store_job {
    const int64_t *perm;
    char *out;
    pt_dtype dt;
} perm_store_job;

static void perm_store_range(void *arg, int64_t begin, int64_t end)
{
    const perm_store_job *job = arg;
    for (int64_t i = begin; i < end; i++)
        store_int(job->out, job->dt, i, job->perm[i]);
}

static pt_status cpu_randperm(const pti_call *c)
{
    pt_tensor *out = c->out[0];
    int64_t n = out->numel;
    bool direct = out->dtype == PT_INT64;
    size_t bytes = (size_t)n * sizeof(int64_t);
    int64_t *scratch = pti_cpu_alloc(bytes * (direct ? 1 : 2));
    if (!scratch)
        return pti_error(PT_ERR_OOM, "pt_randperm: out of memory for %lld elements", (long long)n);
    int64_t *j = scratch;
    int64_t *perm = direct ? (int64_t *)pti_data(out) : scratch + n;
    perm_job pj = {c->params, j};
    pti_parallel_for(n, RANDOM_GRAIN, perm_draw_range, &pj);
    for (int64_t i = 0; i < n; i++) {
        perm[i] = perm[j[i]];
        perm[j[i]] = i;
    }
    if (!direct) {
        perm_store_job sj = {perm, pti_data(out), out->dtype};
        pti_parallel_for(n, RANDOM_GRAIN * 4, perm_store_range, &sj);
    }
    pti_cpu_free(scratch, bytes * (direct ? 1 : 2));
    return PT_OK;
}

/* ---- multinomial ----------------------------------------------------------------------------- */

typedef struct multinomial_job {
    const pti_random_params *p;
    const char *probs; /* [rows, n] contiguous */
    pt_dtype dt;
    int64_t n, k;
    const double *cdf; /* with replacement: running sums per row */
    int64_t *out;      /* [rows, k] */
    bool oom;
} multinomial_job;

static inline double prob_at(const multinomial_job *job, int64_t row, int64_t i)
{
    size_t es = pti_dtypes[job->dt].size;
    return pti_load_f64(job->probs + (row * job->n + i) * (int64_t)es, job->dt);
}

/* Sample s (of all rows * k) picks the first category whose running sum exceeds u * total. */
static void multinomial_repl_range(void *arg, int64_t begin, int64_t end)
{
    const multinomial_job *job = arg;
    for (int64_t s = begin; s < end; s++) {
        int64_t row = s / job->k;
        const double *cdf = job->cdf + row * job->n;
        uint32_t w[4];
        philox(job->p->key, job->p->base + (uint64_t)s, w);
        double x = uniform_bits(w, 53) * cdf[job->n - 1];
        int64_t lo = 0, hi = job->n; /* first index with cdf > x */
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (cdf[mid] > x)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (lo == job->n) /* x rounded up to the total: the last category with weight */
            for (lo = job->n - 1; lo > 0 && cdf[lo] == cdf[lo - 1]; lo--)
                ;
        job->out[s] = lo;
    }
}

typedef struct keyed {
    double key;
    int64_t index;
} keyed;

static int keyed_desc(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* Without replacement: category i gets key p_i / E_i with E_i ~ Exp(1); the k largest keys,
 * in decreasing order, are distributed as k draws without replacement (Efraimidis-Spirakis). */
static void multinomial_norepl_range(void *arg, int64_t begin, int64_t end)
{
    multinomial_job *job = arg;
    size_t bytes = (size_t)job->n * sizeof(keyed);
    keyed *keys = pti_cpu_alloc(bytes);
    if (!keys) {
        job->oom = true; /* benign race: every writer stores true */
        return;
    }
    for (int64_t row = begin; row < end; row++) {
        for (int64_t i = 0; i < job->n; i++) {
            uint32_t w[4];
            philox(job->p->key, job->p->base + (uint64_t)(row * job->n + i), w);
            double e = -log(1.0 - uniform_bits(w, 53));
            keys[i].key = prob_at(job, row, i) / e;
            keys[i].index = i;
        }
        qsort(keys, (size_t)job->n, sizeof(keyed), keyed_desc);
        for (int64_t s = 0; s < job->k; s++)
            job->out[row * job->k + s] = keys[s].index;
    }
    pti_cpu_free(keys, bytes);
}

/* Checks every row (PyTorch's messages) and fills cdf when given. */
static pt_status multinomial_check(const multinomial_job *job, int64_t rows, double *cdf)
{
    for (int64_t row = 0; row < rows; row++) {
        double sum = 0.0;
        int64_t nonzero = 0;
        for (int64_t i = 0; i < job->n; i++) {
            double v = prob_at(job, row, i);
            if (!isfinite(v) || v < 0.0)
                return pti_error(PT_ERR_INVALID_ARG,
                                 "pt_multinomial: probability tensor contains either `inf`, "
                                 "`nan` or element < 0 (row %lld, index %lld: %g)",
                                 (long long)row, (long long)i, v);
            sum += v;
            nonzero += v > 0.0;
            if (cdf)
                cdf[row * job->n + i] = sum;
        }
        if (!(sum > 0.0))
            return pti_error(PT_ERR_INVALID_ARG,
                             "pt_multinomial: invalid multinomial distribution (sum of "
                             "probabilities <= 0) in row %lld",
                             (long long)row);
        if (!job->p->replacement && nonzero < job->k)
            return pti_error(PT_ERR_INVALID_ARG,
                             "pt_multinomial: invalid multinomial distribution (with "
                             "replacement=False, not enough non-negative category to sample): "
                             "row %lld has %lld non-zero weights for %lld samples",
                             (long long)row, (long long)nonzero, (long long)job->k);
    }
    return PT_OK;
}

static pt_status cpu_multinomial(const pti_call *c)
{
    const pt_tensor *probs = c->in[0];
    const pti_random_params *p = c->params;
    int64_t rows = probs->shape[0];
    multinomial_job job = {.p = p,
                           .probs = pti_data(probs),
                           .dt = probs->dtype,
                           .n = probs->shape[1],
                           .k = p->lo,
                           .out = pti_data(c->out[0])};
    if (!p->replacement) {
        pt_status st = multinomial_check(&job, rows, NULL);
        if (st != PT_OK)
            return st;
        int64_t grain = job.n >= RANDOM_GRAIN ? 1 : RANDOM_GRAIN / job.n;
        pti_parallel_for(rows, grain, multinomial_norepl_range, &job);
        return job.oom ? pti_error(PT_ERR_OOM, "pt_multinomial: out of memory") : PT_OK;
    }
    size_t bytes = (size_t)(rows * job.n) * sizeof(double);
    double *cdf = pti_cpu_alloc(bytes);
    if (!cdf)
        return pti_error(PT_ERR_OOM, "pt_multinomial: out of memory for %zu bytes", bytes);
    pt_status st = multinomial_check(&job, rows, cdf);
    if (st == PT_OK) {
        job.cdf = cdf;
        pti_parallel_for(rows * job.k, RANDOM_GRAIN, multinomial_repl_range, &job);
    }
    pti_cpu_free(cdf, bytes);
    return st;
}

void pti_cpu_register_random(pti_kernel *table)
{
    table[PTI_OP_uniform] = cpu_uniform;
    table[PTI_OP_normal] = cpu_normal;
    table[PTI_OP_randint] = cpu_randint;
    table[PTI_OP_bernoulli] = cpu_bernoulli;
    table[PTI_OP_randperm] = cpu_randperm;
    table[PTI_OP_multinomial] = cpu_multinomial;
}
