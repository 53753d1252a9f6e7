/* float32 fast paths of the reductions (see the design note in reduce.c):
 *  - rows: the reduced elements of each output are one contiguous run (sum, mean, prod,
 *    amax/amin, max/min with indices, argmax/argmin, norm p = 1/2, all/any, logsumexp,
 *    var/std), or several contiguous runs combined in order (sum-like kinds, amax/amin);
 *  - columns: reduce over an outer dim with the kept innermost dim contiguous (sum, mean,
 *    amax/amin, max/min with indices, argmax/argmin), reading whole rows into accumulators;
 *  - whole contiguous tensors: split into at most SPLIT_MAX fixed blocks across threads and
 *    combined in block order, so the result does not depend on the thread count.
 * Each has an AVX2 path and a portable scalar path (PT_DISABLE_AVX2=1). */
#include <math.h>
#include <string.h>

#include "reduce_impl.h"

#define CWIDE 512       /* outputs per AVX2 column block of sum/mean/amax/amin */
#define COLW 64         /* outputs per column block */
#define SPLIT_MIN 32768 /* smallest block of a split whole reduction */
#define SPLIT_MAX 64    /* most blocks of a split whole reduction */

/* ---- scalar rows ----------------------------------------------------------------------------- */

/* What a sum row adds up: x, |x| (1-norm) or x^2 (2-norm). */
typedef enum smode { SM_X, SM_ABS, SM_SQ } smode;

static inline double smode_apply(float v, smode m)
{
    return m == SM_X ? v : m == SM_ABS ? fabsf(v) : (double)v * v;
}

static double sum_row_scalar(const float *p, int64_t n, smode m)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += smode_apply(p[i], m);
        s1 += smode_apply(p[i + 1], m);
        s2 += smode_apply(p[i + 2], m);
        s3 += smode_apply(p[i + 3], m);
    }
    for (; i < n; i++)
        s0 += smode_apply(p[i], m);
    return (s0 + s1) + (s2 + s3);
}

/* sum((x - mean)^2), the second pass of var/std. */
static double sqdev_row_scalar(const float *p, int64_t n, double mean)
{
    double s0 = 0, s1 = 0;
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        double d0 = p[i] - mean, d1 = p[i + 1] - mean;
        s0 += d0 * d0;
        s1 += d1 * d1;
    }
    if (i < n)
        s0 += (p[i] - mean) * (p[i] - mean);
    return s0 + s1;
}

static double prod_row(const float *p, int64_t n)
{
    double a[4] = {1, 1, 1, 1};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++)
            a[k] *= p[i + k];
    for (; i < n; i++)
        a[0] *= p[i];
    return (a[0] * a[1]) * (a[2] * a[3]);
}

#ifdef __x86_64__
static int64_t count_zeros_avx2(const float *p, int64_t n);
#endif

/* all (want_all) / any: an element is true when non-zero (NaN is). */
static bool allany_row(const float *p, int64_t n, bool want_all, bool avx2)
{
    for (int64_t i = 0; i < n; i += 1024) { /* count per block, exit between blocks */
        int64_t end = i + 1024 < n ? i + 1024 : n, zeros = 0;
#ifdef __x86_64__
        if (avx2)
            zeros = count_zeros_avx2(p + i, end - i);
        else
#endif
            for (int64_t k = i; k < end; k++)
                zeros += p[k] == 0.0f;
        if (want_all && zeros > 0)
            return false;
        if (!want_all && zeros < end - i)
            return true;
    }
    return want_all;
}

/* max (sign 1) / min (sign -1) of a non-empty row; NaN if any element is NaN. */
static float ext_row_scalar(const float *p, int64_t n, int sign)
{
    float m = p[0];
    for (int64_t i = 0; i < n; i++) {
        float v = p[i];
        if (v != v)
            return v;
        if (sign > 0 ? v > m : v < m)
            m = v;
    }
    return m;
}

#ifdef __x86_64__
/* ---- AVX2 rows ------------------------------------------------------------------------------- */

__attribute__((target("avx2,fma"))) static double hsum256_d(__m256 v)
{
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    __m256d s = _mm256_add_pd(lo, hi);
    __m128d t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(t) + _mm_cvtsd_f64(_mm_unpackhi_pd(t, t));
}

__attribute__((target("avx2,fma"))) static inline __m256 smode_vec(__m256 v, smode m)
{
    if (m == SM_ABS)
        return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    if (m == SM_SQ)
        return _mm256_mul_ps(v, v);
    return v;
}

/* Blocks of 256 floats summed in 4x8 float lanes (8 adds per lane), block sums in double. */
__attribute__((target("avx2,fma"))) static double sum_row_avx2(const float *p, int64_t n, smode m)
{
    double total = 0.0;
    int64_t i = 0;
    for (; i + 256 <= n; i += 256) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int k = 0; k < 256; k += 32) {
            a0 = _mm256_add_ps(a0, smode_vec(_mm256_loadu_ps(p + i + k), m));
            a1 = _mm256_add_ps(a1, smode_vec(_mm256_loadu_ps(p + i + k + 8), m));
            a2 = _mm256_add_ps(a2, smode_vec(_mm256_loadu_ps(p + i + k + 16), m));
            a3 = _mm256_add_ps(a3, smode_vec(_mm256_loadu_ps(p + i + k + 24), m));
        }
        total += hsum256_d(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    }
    if (i + 8 <= n) {
        __m256 a = _mm256_setzero_ps();
        for (; i + 8 <= n; i += 8)
            a = _mm256_add_ps(a, smode_vec(_mm256_loadu_ps(p + i), m));
        total += hsum256_d(a);
    }
    for (; i < n; i++)
        total += smode_apply(p[i], m);
    return total;
}

/* sum((x - mean)^2): float lanes per 256-block, block sums in double. */
__attribute__((target("avx2,fma"))) static double sqdev_row_avx2(const float *p, int64_t n,
                                                                 double mean)
{
    __m256 c = _mm256_set1_ps((float)mean);
    double total = 0.0;
    int64_t i = 0;
    while (i + 16 <= n) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        int64_t end = i + 256 < n ? i + 256 : n;
        for (; i + 16 <= end; i += 16) {
            __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(p + i), c);
            __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(p + i + 8), c);
            a0 = _mm256_fmadd_ps(d0, d0, a0);
            a1 = _mm256_fmadd_ps(d1, d1, a1);
        }
        total += hsum256_d(_mm256_add_ps(a0, a1));
    }
    return total + sqdev_row_scalar(p + i, n - i, (float)mean);
}

/* Product in double lanes (16 running products). */
__attribute__((target("avx2,fma"))) static double prod_row_avx2(const float *p, int64_t n)
{
    __m256d a[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        a[k] = _mm256_set1_pd(1.0);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) { /* eight chains hide the multiply latency */
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++)
            a[k] = _mm256_mul_pd(a[k], _mm256_cvtps_pd(_mm_loadu_ps(p + i + 4 * k)));
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
        a[k] = _mm256_mul_pd(a[k], a[k + 4]);
    double l[4];
    _mm256_storeu_pd(l, _mm256_mul_pd(_mm256_mul_pd(a[0], a[1]), _mm256_mul_pd(a[2], a[3])));
    double r = (l[0] * l[1]) * (l[2] * l[3]);
    for (; i < n; i++)
        r *= p[i];
    return r;
}

/* Number of zeros in p[0..n). */
__attribute__((target("avx2,fma"))) static int64_t count_zeros_avx2(const float *p, int64_t n)
{
    __m256 z = _mm256_setzero_ps();
    int64_t zeros = 0, i = 0;
    for (; i + 8 <= n; i += 8)
        zeros += __builtin_popcount(
            (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + i), z, _CMP_EQ_OQ)));
    for (; i < n; i++)
        zeros += p[i] == 0.0f;
    return zeros;
}

/* sum(exp(x - m)) with float lanes per 256-block, block sums in double. */
__attribute__((target("avx2,fma"))) static double sumexp_row_avx2(const float *p, int64_t n,
                                                                  float m)
{
    __m256 mv = _mm256_set1_ps(m);
    double total = 0.0;
    int64_t i = 0;
    while (i + 8 <= n) {
        __m256 a = _mm256_setzero_ps();
        int64_t end = i + 256 < n ? i + 256 : n;
        for (; i + 8 <= end; i += 8)
            a = _mm256_add_ps(a, pti_exp256_sum(_mm256_sub_ps(_mm256_loadu_ps(p + i), mv)));
        total += hsum256_d(a);
    }
    for (; i < n; i++)
        total += expf(p[i] - m);
    return total;
}

__attribute__((target("avx2,fma"))) static float ext_row_avx2(const float *p, int64_t n, int sign)
{
    if (n < 16)
        return ext_row_scalar(p, n, sign);
    __m256 m0 = _mm256_loadu_ps(p), m1 = m0, m2 = m0, m3 = m0;
    __m256 nan = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) { /* four chains; one NaN compare per two vectors */
        __m256 v0 = _mm256_loadu_ps(p + i), v1 = _mm256_loadu_ps(p + i + 8);
        __m256 v2 = _mm256_loadu_ps(p + i + 16), v3 = _mm256_loadu_ps(p + i + 24);
        nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q),
                                             _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q)));
        if (sign > 0) {
            m0 = _mm256_max_ps(m0, v0);
            m1 = _mm256_max_ps(m1, v1);
            m2 = _mm256_max_ps(m2, v2);
            m3 = _mm256_max_ps(m3, v3);
        } else {
            m0 = _mm256_min_ps(m0, v0);
            m1 = _mm256_min_ps(m1, v1);
            m2 = _mm256_min_ps(m2, v2);
            m3 = _mm256_min_ps(m3, v3);
        }
    }
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(p + i), v1 = _mm256_loadu_ps(p + i + 8);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
        if (sign > 0) {
            m0 = _mm256_max_ps(m0, v0);
            m1 = _mm256_max_ps(m1, v1);
        } else {
            m0 = _mm256_min_ps(m0, v0);
            m1 = _mm256_min_ps(m1, v1);
        }
    }
    if (sign > 0) {
        m0 = _mm256_max_ps(m0, m2);
        m1 = _mm256_max_ps(m1, m3);
    } else {
        m0 = _mm256_min_ps(m0, m2);
        m1 = _mm256_min_ps(m1, m3);
    }
    if (!_mm256_testz_ps(nan, nan))
        return NAN;
    float lanes[8];
    _mm256_storeu_ps(lanes, sign > 0 ? _mm256_max_ps(m0, m1) : _mm256_min_ps(m0, m1));
    float m = ext_row_scalar(lanes, 8, sign);
    if (i < n) {
        float t = ext_row_scalar(p + i, n - i, sign);
        if (t != t)
            return t;
        if (sign > 0 ? t > m : t < m)
            m = t;
    }
    return m;
}
#endif

static double sum_row_m(const float *p, int64_t n, smode m, bool avx2)
{
#ifdef __x86_64__
    if (avx2)
        return sum_row_avx2(p, n, m);
#endif
    (void)avx2;
    return sum_row_scalar(p, n, m);
}

static double sum_row(const float *p, int64_t n, bool avx2)
{
    return sum_row_m(p, n, SM_X, avx2);
}

static float ext_row(const float *p, int64_t n, int sign, bool avx2)
{
#ifdef __x86_64__
    if (avx2)
        return ext_row_avx2(p, n, sign);
#endif
    (void)avx2;
    return ext_row_scalar(p, n, sign);
}

/* Index of the first max/min (the first NaN when there is one), value through *v. */
static int64_t arg_row(const float *p, int64_t n, int sign, bool avx2, float *v)
{
    float m = ext_row(p, n, sign, avx2);
    *v = m;
    if (m != m) {
        for (int64_t i = 0; i < n; i++)
            if (p[i] != p[i])
                return i;
    }
    for (int64_t i = 0; i < n; i++) {
        if (p[i] == m) {
            *v = p[i]; /* the element itself: +0 vs -0 as PyTorch reports it */
            return i;
        }
    }
    return 0;
}

/* ---- the op kinds covered here --------------------------------------------------------------- */

typedef enum fkind {
    FK_SUM,
    FK_MEAN,
    FK_EXT,
    FK_EXT_IDX,
    FK_ARG, /* also by columns */
    FK_PROD,
    FK_NORM1,
    FK_NORM2,
    FK_ALL,
    FK_ANY,
    FK_LSE,
    FK_VAR,
    FK_STD
} fkind;

typedef struct fjob {
    const pti_call *c;
    const pti_rgeom *g;
    fkind kind;
    int sign;
    bool avx2;
    double correction; /* var/std */
    bool have_mean;    /* var/std split: second pass around `mean` */
    double mean;
    const float *in;
    void *out; /* float, or bool bytes for all/any */
    int64_t *idx;
    /* split whole reductions */
    int64_t bw; /* column block width */
    int64_t block, nblocks;
    double psum[SPLIT_MAX];
    float pval[SPLIT_MAX];
    int64_t pidx[SPLIT_MAX];
} fjob;

static double lse_row(const float *p, int64_t n, bool avx2)
{
    float m = ext_row(p, n, 1, avx2);
    if (m != m)
        return m;
    if (isinf(m))
        m = 0.0f; /* all -inf: log(0) = -inf; any +inf: +inf */
#ifdef __x86_64__
    if (avx2)
        return log(sumexp_row_avx2(p, n, m)) + m;
#endif
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += expf(p[i] - m);
    return log(s) + m;
}

/* The value of a kind that yields one number per row (not max/min/arg). */
static double row_value(const fjob *j, const float *row, int64_t n)
{
    switch (j->kind) {
    case FK_SUM:
    case FK_MEAN: return sum_row(row, n, j->avx2);
    case FK_PROD:
#ifdef __x86_64__
        if (j->avx2)
            return prod_row_avx2(row, n);
#endif
        return prod_row(row, n);
    case FK_NORM1: return sum_row_m(row, n, SM_ABS, j->avx2);
    case FK_NORM2: return sum_row_m(row, n, SM_SQ, j->avx2);
    case FK_ALL: return allany_row(row, n, true, j->avx2);
    case FK_ANY: return allany_row(row, n, false, j->avx2);
    case FK_LSE: return lse_row(row, n, j->avx2);
    case FK_VAR:
    case FK_STD: {
        double mean = j->have_mean ? j->mean : sum_row(row, n, j->avx2) / (double)n;
#ifdef __x86_64__
        if (j->avx2)
            return sqdev_row_avx2(row, n, mean);
#endif
        return sqdev_row_scalar(row, n, mean);
    }
    default: return 0.0;
    }
}

/* Finishes a row value (or the combined partials) into output o. */
static void store_value(const fjob *j, int64_t o, double v, int64_t n)
{
    if (j->kind == FK_ALL || j->kind == FK_ANY) {
        ((uint8_t *)j->out)[o] = v != 0.0;
        return;
    }
    if (j->kind == FK_MEAN) {
        v /= (double)n;
    } else if (j->kind == FK_NORM2) {
        v = sqrt(v);
    } else if (j->kind == FK_VAR || j->kind == FK_STD) {
        double div = (double)n - j->correction;
        v /= div > 0 ? div : 0.0;
        if (j->kind == FK_STD)
            v = sqrt(v);
    }
    ((float *)j->out)[o] = (float)v;
}

static void store_result(const fjob *j, int64_t o, const float *row, int64_t n)
{
    float *out = j->out;
    float v;
    switch (j->kind) {
    case FK_EXT: out[o] = ext_row(row, n, j->sign, j->avx2); break;
    case FK_EXT_IDX: {
        int64_t i = arg_row(row, n, j->sign, j->avx2, &v);
        out[o] = v;
        if (j->idx)
            j->idx[o] = i;
        break;
    }
    case FK_ARG: j->idx[o] = arg_row(row, n, j->sign, j->avx2, &v); break;
    default: store_value(j, o, row_value(j, row, n), n);
    }
}

static void rows_range(void *arg, int64_t begin, int64_t end)
{
    const fjob *j = arg;
    for (int64_t o = begin; o < end; o++)
        store_result(j, o, j->in + pti_rgeom_out_offset(j->g, o), j->g->run);
}

/* Combines two partial row values of a kind (sum-like, prod, all, any). */
static double combine_value(fkind k, double a, double b)
{
    switch (k) {
    case FK_PROD: return a * b;
    case FK_ALL: return a != 0.0 && b != 0.0;
    case FK_ANY: return a != 0.0 || b != 0.0;
    default: return a + b;
    }
}

/* Several contiguous runs per output (more than one reduced dim left after coalescing, as
 * in a sum over dims (0, 2, 3) of NCHW): each run reduced by the row kernels, then combined
 * in run order. Only kinds whose partials combine (no arg, var, logsumexp). */
static void multi_rows_range(void *arg, int64_t begin, int64_t end)
{
    const fjob *j = arg;
    const pti_rgeom *g = j->g;
    int64_t runs = g->nred / g->run;
    for (int64_t o = begin; o < end; o++) {
        int64_t idx[PT_MAX_DIMS] = {0}, off = pti_rgeom_out_offset(g, o);
        double acc = 0.0;
        float ext = 0.0f;
        for (int64_t r = 0; r < runs; r++) {
            const float *row = j->in + off;
            if (j->kind == FK_EXT) {
                float v = ext_row(row, g->run, j->sign, j->avx2);
                if (r == 0 || v != v || (ext == ext && (j->sign > 0 ? v > ext : v < ext)))
                    ext = v;
            } else {
                double v = row_value(j, row, g->run);
                acc = r == 0 ? v : combine_value(j->kind, acc, v);
            }
            for (int d = 1; d < g->nr; d++) {
                off += g->rst[d];
                if (++idx[d] < g->rs[d])
                    break;
                off -= g->rs[d] * g->rst[d];
                idx[d] = 0;
            }
        }
        if (j->kind == FK_EXT)
            ((float *)j->out)[o] = ext;
        else
            store_value(j, o, acc, g->nred);
    }
}

/* Whole contiguous reductions: block b of the row into the partials. */
static void split_range(void *arg, int64_t begin, int64_t end)
{
    fjob *j = arg;
    for (int64_t b = begin; b < end; b++) {
        int64_t start = b * j->block, n = j->g->run - start;
        if (n > j->block)
            n = j->block;
        const float *row = j->in + pti_rgeom_out_offset(j->g, 0) + start;
        if (j->kind == FK_EXT) {
            j->pval[b] = ext_row(row, n, j->sign, j->avx2);
            j->pidx[b] = 0;
        } else if (j->kind == FK_EXT_IDX || j->kind == FK_ARG) {
            float v;
            j->pidx[b] = start + arg_row(row, n, j->sign, j->avx2, &v);
            j->pval[b] = v;
        } else {
            j->psum[b] = row_value(j, row, n);
        }
    }
}

/* Partials combine in block order: the same result for any thread count. */
static void split_combine(fjob *j)
{
    int64_t n = j->g->run;
    if (j->kind != FK_EXT && j->kind != FK_EXT_IDX && j->kind != FK_ARG) {
        double s = j->psum[0];
        for (int64_t b = 1; b < j->nblocks; b++) {
            if (j->kind == FK_PROD)
                s *= j->psum[b];
            else if (j->kind == FK_ALL)
                s = s != 0.0 && j->psum[b] != 0.0;
            else if (j->kind == FK_ANY)
                s = s != 0.0 || j->psum[b] != 0.0;
            else
                s += j->psum[b];
        }
        store_value(j, 0, s, n);
        return;
    }
    float best = j->pval[0];
    int64_t bi = j->pidx[0];
    for (int64_t b = 1; b < j->nblocks && best == best; b++) {
        float v = j->pval[b];
        if (v != v || (j->sign > 0 ? v > best : v < best)) {
            best = v;
            bi = j->pidx[b];
        }
    }
    if (j->kind != FK_ARG)
        ((float *)j->out)[0] = best;
    if (j->idx)
        j->idx[0] = bi;
}

/* ---- columns: reduce over an outer dim, the kept innermost dim contiguous -------------------- */

static void col_block_scalar(const fjob *j, const float *p, int64_t w, int64_t o)
{
    float *out = j->out;
    const pti_rgeom *g = j->g;
    int64_t R = g->run, rs = g->run_stride;
    if (j->kind == FK_SUM || j->kind == FK_MEAN) {
        double acc[COLW] = {0};
        for (int64_t r = 0; r < R; r++) {
            const float *q = p + r * rs;
            for (int64_t k = 0; k < w; k++)
                acc[k] += q[k];
        }
        for (int64_t k = 0; k < w; k++)
            out[o + k] = (float)(j->kind == FK_MEAN ? acc[k] / (double)R : acc[k]);
        return;
    }
    float best[COLW];
    int64_t bi[COLW];
    for (int64_t k = 0; k < w; k++) {
        best[k] = p[k];
        bi[k] = 0;
    }
    for (int64_t r = 1; r < R; r++) {
        const float *q = p + r * rs;
        for (int64_t k = 0; k < w; k++) {
            float v = q[k], b = best[k];
            if (b == b && (v != v || (j->sign > 0 ? v > b : v < b))) {
                best[k] = v;
                bi[k] = r;
            }
        }
    }
    for (int64_t k = 0; k < w; k++) {
        if (j->kind != FK_ARG)
            out[o + k] = best[k];
        if (j->idx)
            j->idx[o + k] = bi[k];
    }
}

#ifdef __x86_64__
/* Up to CWIDE columns, rows in order: each row is one contiguous read (prefetch-friendly)
 * into accumulators that stay in L1. Sums: float over at most 16 rows, then double. Max/min:
 * false when a NaN is seen (the caller redoes the block with the scalar path). */
__attribute__((target("avx2,fma"))) static bool col_wide_avx2(const fjob *j, const float *p,
                                                              int64_t w, int64_t o)
{
    int64_t R = j->g->run, rs = j->g->run_stride, w8 = w & ~(int64_t)7;
    float *out = (float *)j->out + o;
    float acc[CWIDE];
    if (j->kind == FK_EXT) {
        memcpy(acc, p, sizeof(float) * (size_t)w);
        __m256 nan = _mm256_setzero_ps();
        bool tail_nan = false;
        int64_t r = 0;
        for (; r + 2 <= R; r += 2) { /* two rows per pass over the accumulators */
            const float *q = p + r * rs, *q1 = q + rs;
            if (j->sign > 0) {
                for (int64_t k = 0; k < w8; k += 8) {
                    __m256 v = _mm256_loadu_ps(q + k), v1 = _mm256_loadu_ps(q1 + k);
                    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v1, _CMP_UNORD_Q));
                    __m256 a = _mm256_max_ps(_mm256_loadu_ps(acc + k), v);
                    _mm256_storeu_ps(acc + k, _mm256_max_ps(a, v1));
                }
            } else {
                for (int64_t k = 0; k < w8; k += 8) {
                    __m256 v = _mm256_loadu_ps(q + k), v1 = _mm256_loadu_ps(q1 + k);
                    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v1, _CMP_UNORD_Q));
                    __m256 a = _mm256_min_ps(_mm256_loadu_ps(acc + k), v);
                    _mm256_storeu_ps(acc + k, _mm256_min_ps(a, v1));
                }
            }
            for (int64_t k = w8; k < w; k++) {
                float v = q[k], v1 = q1[k];
                tail_nan |= v != v || v1 != v1;
                if (j->sign > 0 ? v > acc[k] : v < acc[k])
                    acc[k] = v;
                if (j->sign > 0 ? v1 > acc[k] : v1 < acc[k])
                    acc[k] = v1;
            }
        }
        for (; r < R; r++) {
            const float *q = p + r * rs;
            int64_t k = 0;
            for (; k < w8; k += 8) {
                __m256 v = _mm256_loadu_ps(q + k), a = _mm256_loadu_ps(acc + k);
                nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                _mm256_storeu_ps(acc + k, j->sign > 0 ? _mm256_max_ps(a, v) : _mm256_min_ps(a, v));
            }
            for (; k < w; k++) {
                float v = q[k];
                tail_nan |= v != v;
                if (j->sign > 0 ? v > acc[k] : v < acc[k])
                    acc[k] = v;
            }
        }
        if (tail_nan || !_mm256_testz_ps(nan, nan))
            return false;
        memcpy(out, acc, sizeof(float) * (size_t)w);
        return true;
    }
    double dacc[CWIDE];
    for (int64_t k = 0; k < w; k++)
        dacc[k] = 0.0;
    for (int64_t r0 = 0; r0 < R; r0 += 16) {
        int64_t r1 = r0 + 16 < R ? r0 + 16 : R;
        memset(acc, 0, sizeof(float) * (size_t)w);
        int64_t r = r0;
        for (; r + 2 <= r1; r += 2) {
            const float *q = p + r * rs, *q1 = q + rs;
            for (int64_t k = 0; k < w8; k += 8) {
                __m256 v = _mm256_add_ps(_mm256_loadu_ps(q + k), _mm256_loadu_ps(q1 + k));
                _mm256_storeu_ps(acc + k, _mm256_add_ps(_mm256_loadu_ps(acc + k), v));
            }
            for (int64_t k = w8; k < w; k++)
                acc[k] += q[k] + q1[k];
        }
        for (; r < r1; r++) {
            const float *q = p + r * rs;
            int64_t k = 0;
            for (; k < w8; k += 8)
                _mm256_storeu_ps(acc + k,
                                 _mm256_add_ps(_mm256_loadu_ps(acc + k), _mm256_loadu_ps(q + k)));
            for (; k < w; k++)
                acc[k] += q[k];
        }
        for (int64_t k = 0; k < w; k++)
            dacc[k] += acc[k];
    }
    for (int64_t k = 0; k < w; k++)
        out[k] = (float)(j->kind == FK_MEAN ? dacc[k] / (double)R : dacc[k]);
    return true;
}
#endif

static void cols_range(void *arg, int64_t begin, int64_t end)
{
    const fjob *j = arg;
    const pti_rgeom *g = j->g;
    int64_t K = g->ks[0], bw = j->bw, nb = (K + bw - 1) / bw;
    for (int64_t u = begin; u < end; u++) {
        int64_t outer = u / nb, b = u % nb;
        int64_t o = outer * K + b * bw, w = K - b * bw < bw ? K - b * bw : bw;
        const float *p = j->in + pti_rgeom_out_offset(g, outer * K) + b * bw;
#ifdef __x86_64__
        if (bw == CWIDE && col_wide_avx2(j, p, w, o))
            continue;
#endif
        for (int64_t k = 0; k < w; k += COLW) /* scalar, in blocks of COLW */
            col_block_scalar(j, p + k, w - k < COLW ? w - k : COLW, o + k);
    }
}

bool pti_reduce_f32_fast(const pti_call *c, const pti_rgeom *g)
{
    fjob j = {.c = c, .g = g, .sign = 1, .correction = c->scalar[1]};
    switch (c->op) {
    case PTI_OP_sum: j.kind = FK_SUM; break;
    case PTI_OP_mean: j.kind = FK_MEAN; break;
    case PTI_OP_amin: j.sign = -1; /* fall through */
    case PTI_OP_amax: j.kind = FK_EXT; break;
    case PTI_OP_min_dim: j.sign = -1; /* fall through */
    case PTI_OP_max_dim: j.kind = FK_EXT_IDX; break;
    case PTI_OP_argmin: j.sign = -1; /* fall through */
    case PTI_OP_argmax: j.kind = FK_ARG; break;
    case PTI_OP_prod: j.kind = FK_PROD; break;
    case PTI_OP_all: j.kind = FK_ALL; break;
    case PTI_OP_any: j.kind = FK_ANY; break;
    case PTI_OP_logsumexp: j.kind = FK_LSE; break;
    case PTI_OP_var: j.kind = FK_VAR; break;
    case PTI_OP_std: j.kind = FK_STD; break;
    case PTI_OP_norm:
        if (c->scalar[1] == 1.0)
            j.kind = FK_NORM1;
        else if (c->scalar[1] == 2.0)
            j.kind = FK_NORM2;
        else
            return false;
        break;
    default: return false;
    }
    if (g->nr < 1 || g->nred == 0)
        return false;
    j.avx2 = pti_cpu_has_avx2();
    j.in = pti_data(c->in[0]);
    if (j.kind == FK_ARG) {
        j.idx = pti_data(c->out[0]);
    } else {
        j.out = pti_data(c->out[0]);
        j.idx = c->n_out > 1 && c->out[1] ? pti_data(c->out[1]) : NULL;
    }
    int64_t R = g->run;
    if (g->nr > 1) {
        bool combinable = j.kind == FK_SUM || j.kind == FK_MEAN || j.kind == FK_EXT ||
                          j.kind == FK_PROD || j.kind == FK_NORM1 || j.kind == FK_NORM2 ||
                          j.kind == FK_ALL || j.kind == FK_ANY;
        if (g->run_stride != 1 || !combinable || R < 8)
            return false;
        int64_t grain = 32768 / g->nred;
        pti_parallel_for(g->nout, grain > 1 ? grain : 1, multi_rows_range, &j);
        return true;
    }
    if (g->run_stride == 1) {
        if (g->nout == 1 && R >= 2 * SPLIT_MIN && j.kind != FK_LSE) {
            j.block = (R + SPLIT_MAX - 1) / SPLIT_MAX;
            if (j.block < SPLIT_MIN)
                j.block = SPLIT_MIN;
            j.nblocks = (R + j.block - 1) / j.block;
            if (j.kind == FK_VAR || j.kind == FK_STD) { /* first pass: the mean */
                fkind k = j.kind;
                j.kind = FK_SUM;
                pti_parallel_for(j.nblocks, 1, split_range, &j);
                double s = 0.0;
                for (int64_t b = 0; b < j.nblocks; b++)
                    s += j.psum[b];
                j.mean = s / (double)R;
                j.have_mean = true;
                j.kind = k;
            }
            pti_parallel_for(j.nblocks, 1, split_range, &j);
            split_combine(&j);
            return true;
        }
        int64_t grain = (j.kind == FK_LSE ? 8192 : 32768) / R;
        pti_parallel_for(g->nout, grain > 1 ? grain : 1, rows_range, &j);
        return true;
    }
    if (g->nk >= 1 && g->kst[0] == 1 && g->ks[0] >= 8 && j.kind <= FK_ARG) {
        bool wide = j.avx2 && (j.kind == FK_SUM || j.kind == FK_MEAN || j.kind == FK_EXT);
        j.bw = wide ? CWIDE : COLW;
        int64_t K = g->ks[0], nb = (K + j.bw - 1) / j.bw;
        int64_t units = (g->nout / K) * nb;
        int64_t grain = 32768 / (R * j.bw);
        pti_parallel_for(units, grain > 1 ? grain : 1, cols_range, &j);
        return true;
    }
    return false;
}
