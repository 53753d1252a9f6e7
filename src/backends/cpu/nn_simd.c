/* Row primitives of the nn and loss CPU kernels (declared in nn_simd.h): a scalar path for
 * every function and an AVX2+FMA path for float32, chosen per call with pti_cpu_has_avx2(). */
#include <math.h>

#include "nn_simd.h"
#include "simd_math.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define NN_HAVE_X86 1
#else
#define NN_HAVE_X86 0
#endif

/* ---- scalar paths --------------------------------------------------------------------------- */

static double sum_scalar(const float *x, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i];
        s1 += x[i + 1];
        s2 += x[i + 2];
        s3 += x[i + 3];
    }
    for (; i < n; i++)
        s0 += x[i];
    return (s0 + s1) + (s2 + s3);
}

static double sqdev_scalar(const float *x, int64_t n, double mean)
{
    double s0 = 0, s1 = 0;
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        double d0 = x[i] - mean, d1 = x[i + 1] - mean;
        s0 += d0 * d0;
        s1 += d1 * d1;
    }
    for (; i < n; i++) {
        double d = x[i] - mean;
        s0 += d * d;
    }
    return s0 + s1;
}

/* Mean and variance in one pass: sums of x - x[0] and of its square in double. Shifting by
 * an element of the row keeps the cancellation in Q/n - (S/n)^2 to a few bits of double's 53,
 * far below float32 rounding, whatever the row's offset. */
static void finish_moments(float x0, double s, double q, int64_t n, double *mean, double *var)
{
    double ms = s / (double)n, v = q / (double)n - ms * ms;
    *mean = (double)x0 + ms;
    *var = v > 0 ? v : (v == v ? 0.0 : v); /* NaN stays NaN */
}

static void moments_scalar(const float *x, int64_t n, double *mean, double *var)
{
    double p = x[0], s0 = 0, s1 = 0, q0 = 0, q1 = 0;
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        double d0 = x[i] - p, d1 = x[i + 1] - p;
        s0 += d0;
        s1 += d1;
        q0 += d0 * d0;
        q1 += d1 * d1;
    }
    for (; i < n; i++) {
        double d = x[i] - p;
        s0 += d;
        q0 += d * d;
    }
    finish_moments(x[0], s0 + s1, q0 + q1, n, mean, var);
}

static void affine_scalar(float *y, const float *x, int64_t n, float a, float b)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * a + b;
}

static void norm_affine_scalar(float *y, const float *x, int64_t n, float mean, float rstd,
                               const float *w, const float *b)
{
    for (int64_t i = 0; i < n; i++) {
        float v = (x[i] - mean) * rstd;
        if (w)
            v *= w[i];
        if (b)
            v += b[i];
        y[i] = v;
    }
}

static void dev_dot_scalar(const float *g, const float *x, int64_t n, double mean, double *sg,
                           double *sgd)
{
    double a0 = 0, a1 = 0, d0 = 0, d1 = 0;
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        a0 += g[i];
        a1 += g[i + 1];
        d0 += g[i] * (x[i] - mean);
        d1 += g[i + 1] * (x[i + 1] - mean);
    }
    for (; i < n; i++) {
        a0 += g[i];
        d0 += g[i] * (x[i] - mean);
    }
    *sg += a0 + a1;
    *sgd += d0 + d1;
}

static void bn_input_grad_scalar(float *gx, const float *g, const float *x, int64_t n, float s,
                                 float a, float mean, float t)
{
    for (int64_t i = 0; i < n; i++)
        gx[i] = s * (g[i] - a) - (x[i] - mean) * t;
}

static double logsumexp_scalar(const float *x, int64_t n)
{
    if (n == 0)
        return -INFINITY;
    float m = x[0];
    for (int64_t i = 1; i < n; i++)
        if (x[i] > m || isnan(x[i]))
            m = x[i];
    if (isnan(m))
        return NAN;
    if (isinf(m))
        return m; /* +inf dominates; all -inf gives -inf */
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += exp((double)x[i] - m);
    return m + log(s);
}

/* ---- AVX2 paths ----------------------------------------------------------------------------- */

#if NN_HAVE_X86
#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline double hsum_pd(__m256d v)
{
    __m128d lo = _mm256_castpd256_pd128(v), hi = _mm256_extractf128_pd(v, 1);
    lo = _mm_add_pd(lo, hi);
    return _mm_cvtsd_f64(lo) + _mm_cvtsd_f64(_mm_unpackhi_pd(lo, lo));
}

AVX2 static inline float hsum_ps(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

AVX2 static inline float hmax_ps(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_max_ps(lo, hi);
    lo = _mm_max_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_max_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

AVX2 static double sum_avx2(const float *x, int64_t n)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double s = hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; i++)
        s += x[i];
    return s;
}

AVX2 static double sqdev_avx2(const float *x, int64_t n, double mean)
{
    __m256d m = _mm256_set1_pd(mean);
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), m);
        __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), m);
        a0 = _mm256_fmadd_pd(d0, d0, a0);
        a1 = _mm256_fmadd_pd(d1, d1, a1);
    }
    double s = hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; i++) {
        double d = x[i] - mean;
        s += d * d;
    }
    return s;
}

/* Adds the shifted sum and square sum of 8 floats into (s, q) */
#define NN_MOM8(v, s0, s1, q0, q1)                                                                 \
    do {                                                                                           \
        __m256d lo_ = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), p);                \
        __m256d hi_ = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), p);              \
        s0 = _mm256_add_pd(s0, lo_);                                                               \
        s1 = _mm256_add_pd(s1, hi_);                                                               \
        q0 = _mm256_fmadd_pd(lo_, lo_, q0);                                                        \
        q1 = _mm256_fmadd_pd(hi_, hi_, q1);                                                        \
    } while (0)

AVX2 static inline void moments_avx2(const float *x, int64_t n, double *mean, double *var)
{
    __m256d p = _mm256_set1_pd(x[0]), z = _mm256_setzero_pd();
    __m256d s0 = z, s1 = z, q0 = z, q1 = z, s2 = z, s3 = z, q2 = z, q3 = z;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) { /* two independent sets of chains */
        __m256 v = _mm256_loadu_ps(x + i), w = _mm256_loadu_ps(x + i + 8);
        NN_MOM8(v, s0, s1, q0, q1);
        NN_MOM8(w, s2, s3, q2, q3);
    }
    if (i + 8 <= n) {
        __m256 v = _mm256_loadu_ps(x + i);
        NN_MOM8(v, s0, s1, q0, q1);
        i += 8;
    }
    s0 = _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3));
    q0 = _mm256_add_pd(_mm256_add_pd(q0, q1), _mm256_add_pd(q2, q3));
    double s = hsum_pd(s0), q = hsum_pd(q0), pv = x[0];
    for (; i < n; i++) {
        double d = x[i] - pv;
        s += d;
        q += d * d;
    }
    finish_moments(x[0], s, q, n, mean, var);
}
#undef NN_MOM8

AVX2 static void affine_avx2(float *y, const float *x, int64_t n, float a, float b)
{
    __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, vb));
    for (; i < n; i++)
        y[i] = x[i] * a + b;
}

AVX2 static void norm_affine_avx2(float *y, const float *x, int64_t n, float mean, float rstd,
                                  const float *w, const float *b)
{
    __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vr);
        if (w)
            v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        if (b)
            v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(y + i, v);
    }
    norm_affine_scalar(y + i, x + i, n - i, mean, rstd, w ? w + i : NULL, b ? b + i : NULL);
}

/* layer_norm of rows [0, rows) of d columns; the weight-and-bias case has its own loop. */
AVX2 static void layer_norm_rows_avx2(float *y, const float *x, int64_t rows, int64_t d, double eps,
                                      const float *w, const float *b)
{
    for (int64_t r = 0; r < rows; r++, x += d, y += d) {
        double mean, var;
        moments_avx2(x, d, &mean, &var);
        float fm = (float)mean, fr = (float)(1.0 / sqrt(var + eps));
        if (!w || !b) {
            norm_affine_avx2(y, x, d, fm, fr, w, b);
            continue;
        }
        __m256 vm = _mm256_set1_ps(fm), vr = _mm256_set1_ps(fr);
        int64_t i = 0;
        for (; i + 8 <= d; i += 8) {
            __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vr);
            _mm256_storeu_ps(y + i,
                             _mm256_fmadd_ps(v, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i)));
        }
        for (; i < d; i++)
            y[i] = (x[i] - fm) * fr * w[i] + b[i];
    }
}

/* 8 floats of g and x: sums of g and of g * (x - mean), in double */
#define NN_DEVDOT8(gv, xv, a0, a1, d0, d1)                                                         \
    do {                                                                                           \
        __m256d glo_ = _mm256_cvtps_pd(_mm256_castps256_ps128(gv));                                \
        __m256d ghi_ = _mm256_cvtps_pd(_mm256_extractf128_ps(gv, 1));                              \
        __m256d xlo_ = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xv)), m);              \
        __m256d xhi_ = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), m);            \
        a0 = _mm256_add_pd(a0, glo_);                                                              \
        a1 = _mm256_add_pd(a1, ghi_);                                                              \
        d0 = _mm256_fmadd_pd(glo_, xlo_, d0);                                                      \
        d1 = _mm256_fmadd_pd(ghi_, xhi_, d1);                                                      \
    } while (0)

AVX2 static void dev_dot_avx2(const float *g, const float *x, int64_t n, double mean, double *sg,
                              double *sgd)
{
    __m256d m = _mm256_set1_pd(mean), z = _mm256_setzero_pd();
    __m256d a0 = z, a1 = z, d0 = z, d1 = z;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i), xv = _mm256_loadu_ps(x + i);
        NN_DEVDOT8(gv, xv, a0, a1, d0, d1);
    }
    double a = hsum_pd(_mm256_add_pd(a0, a1)), d = hsum_pd(_mm256_add_pd(d0, d1));
    for (; i < n; i++) {
        a += g[i];
        d += g[i] * (x[i] - mean);
    }
    *sg += a;
    *sgd += d;
}
#undef NN_DEVDOT8

AVX2 static void bn_input_grad_avx2(float *gx, const float *g, const float *x, int64_t n, float s,
                                    float a, float mean, float t)
{
    __m256 vs = _mm256_set1_ps(s), va = _mm256_set1_ps(a), vm = _mm256_set1_ps(mean);
    __m256 vt = _mm256_set1_ps(t);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_sub_ps(_mm256_loadu_ps(g + i), va);
        __m256 xv = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vt);
        _mm256_storeu_ps(gx + i, _mm256_sub_ps(_mm256_mul_ps(vs, gv), xv));
    }
    bn_input_grad_scalar(gx + i, g + i, x + i, n - i, s, a, mean, t);
}

AVX2 static double logsumexp_avx2(const float *x, int64_t n)
{
    if (n < 8)
        return logsumexp_scalar(x, n);
    __m256 vm = _mm256_loadu_ps(x);
    int64_t i = 8;
    for (; i + 8 <= n; i += 8)
        vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    float m = hmax_ps(vm);
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    if (!isfinite(m))
        return logsumexp_scalar(x, n); /* NaN/inf inputs: exact special-value handling */
    __m256 vmax = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8)
        acc = _mm256_add_ps(acc, pti_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax)));
    double s = hsum_ps(acc);
    for (; i < n; i++)
        s += exp((double)x[i] - m);
    return m + log(s);
}

AVX2 static double exp_sum_avx2(float *x, int64_t n, float m)
{
    __m256 vmax = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = pti_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    double s = hsum_ps(acc);
    for (; i < n; i++) {
        x[i] = expf(x[i] - m);
        s += x[i];
    }
    return s;
}
#endif

static double exp_sum_scalar(float *x, int64_t n, float m)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        s += x[i];
    }
    return s;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

double pti_nn_sum_f32(const float *x, int64_t n)
{
#if NN_HAVE_X86
    if (pti_cpu_has_avx2())
        return sum_avx2(x, n);
#endif
    return sum_scalar(x, n);
}

double pti_nn_sqdev_f32(const float *x, int64_t n, double mean)
{
#if NN_HAVE_X86
    if (pti_cpu_has_avx2())
        return sqdev_avx2(x, n, mean);
#endif
    return sqdev_scalar(x, n, mean);
}

void pti_nn_layer_norm_rows_f32(float *y, const float *x, int64_t rows, int64_t d, double eps,
                                const float *w, const float *b)
{
    if (d <= 0)
        return;
#if NN_HAVE_X86
    if (pti_cpu_has_avx2()) {
        layer_norm_rows_avx2(y, x, rows, d, eps, w, b);
        return;
    }
#endif
    for (int64_t r = 0; r < rows; r++, x += d, y += d) {
        double mean, var;
        moments_scalar(x, d, &mean, &var);
        norm_affine_scalar(y, x, d, (float)mean, (float)(1.0 / sqrt(var + eps)), w, b);
    }
}

void pti_nn_affine_f32(float *y, const float *x, int64_t n, float a, float b)
{
#if NN_HAVE_X86
    if (pti_cpu_has_avx2()) {
        affine_avx2(y, x, n, a, b);
        return;
    }
#endif
    affine_scalar(y, x, n, a, b);
}

void pti_nn_norm_affine_f32(float *y, const float *x, int64_t n, float mean, float rstd,
                            const float *w, const float *b)
{
#if NN_HAVE_X86
    if (pti_cpu_has_avx2()) {
        norm_affine_avx2(y, x, n, mean, rstd, w, b);
        return;
    }
#endif
    norm_affine_scalar(y, x, n, mean, rstd, w, b);
}

double pti_nn_logsumexp_f32(const float *x, int64_t n)
{
#if NN_HAVE_X86
    if (pti_cpu_has_avx2())
        return logsumexp_avx2(x, n);
#endif
    return logsumexp_scalar(x, n);
}

double pti_nn_exp_sum_f32(float *x, int64_t n, float m)
{
#if NN_HAVE_X86
    if (pti_cpu_has_avx2())
        return exp_sum_avx2(x, n, m);
#endif
    return exp_sum_scalar(x, n, m);
}

void pti_nn_dev_dot_f32(const float *g, const float *x, int64_t n, double mean, double *sg,
                        double *sgd)
{
#if NN_HAVE_X86
    if (pti_cpu_has_avx2()) {
        dev_dot_avx2(g, x, n, mean, sg, sgd);
        return;
    }
#endif
    dev_dot_scalar(g, x, n, mean, sg, sgd);
}

void pti_nn_bn_input_grad_f32(float *gx, const float *g, const float *x, int64_t n, float s,
                              float a, float mean, float t)
{
#if NN_HAVE_X86
    if (pti_cpu_has_avx2()) {
        bn_input_grad_avx2(gx, g, x, n, s, a, mean, t);
        return;
    }
#endif
    bn_input_grad_scalar(gx, g, x, n, s, a, mean, t);
}
