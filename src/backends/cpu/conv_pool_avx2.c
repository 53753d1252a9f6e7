/* AVX2 kernel of float32 max pooling over the common 2x2 / stride 2 window without padding (the
 * pooling of most CNNs): eight outputs at a time, the even and odd input columns split with
 * shuffles, the same scan order (top-left, top-right, bottom-left, bottom-right) and the same
 * rule as the portable loop in conv_pool.c (a value replaces the running maximum when it is
 * greater or NaN), so values and indices match it bit for bit. Chosen at run time by
 * conv_pool.c (pti_cpu_has_avx2, off with PT_DISABLE_AVX2=1). */
#include "conv_pool_simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX2_ATTR __attribute__((target("avx2,fma")))

/* Even and odd elements of the 16 floats at p, in order. */
AVX2_ATTR static inline void split_even_odd(const float *p, __m256 *even, __m256 *odd)
{
    __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
    __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); /* a0 a2 b0 b2 | a4 a6 b4 b6 */
    __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* m, best <- v, cand where v > m or v is NaN. */
AVX2_ATTR static inline void take_max(__m256 *m, __m256i *best, __m256 v, __m256i cand)
{
    __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, *m, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    *m = _mm256_blendv_ps(*m, v, take);
    *best = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(*best), _mm256_castsi256_ps(cand), take));
}

/* One output (oh, ow) the portable way. */
static void max_2x2_one(const float *x, int64_t W, int64_t OW, int64_t oh, int64_t ow, float *y,
                        int64_t *ind)
{
    int64_t k = 2 * oh * W + 2 * ow, best = k;
    const int64_t cand[4] = {k, k + 1, k + W, k + W + 1};
    float m = x[k];
    for (int i = 1; i < 4; i++) {
        float v = x[cand[i]];
        if (v > m || v != v) {
            m = v;
            best = cand[i];
        }
    }
    y[oh * OW + ow] = m;
    if (ind)
        ind[oh * OW + ow] = best;
}

AVX2_ATTR void pti_cpu_max_pool_2x2_f32_avx2(const float *x, int64_t W, int64_t OH, int64_t OW,
                                             float *y, int64_t *ind)
{
    const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i one = _mm256_set1_epi32(1), wv = _mm256_set1_epi32((int)W);
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *r0 = x + 2 * oh * W, *r1 = r0 + W;
        int64_t ow = 0;
        for (; ow + 8 <= OW; ow += 8) {
            __m256 e0, o0, e1, o1;
            split_even_odd(r0 + 2 * ow, &e0, &o0);
            split_even_odd(r1 + 2 * ow, &e1, &o1);
            __m256i k = _mm256_add_epi32(_mm256_set1_epi32((int)(2 * oh * W + 2 * ow)), lane2);
            __m256 m = e0;
            __m256i best = k;
            take_max(&m, &best, o0, _mm256_add_epi32(k, one));
            __m256i kw = _mm256_add_epi32(k, wv);
            take_max(&m, &best, e1, kw);
            take_max(&m, &best, o1, _mm256_add_epi32(kw, one));
            _mm256_storeu_ps(y + oh * OW + ow, m);
            if (ind) {
                int64_t *d = ind + oh * OW + ow;
                _mm256_storeu_si256((__m256i *)d,
                                    _mm256_cvtepi32_epi64(_mm256_castsi256_si128(best)));
                _mm256_storeu_si256((__m256i *)(d + 4),
                                    _mm256_cvtepi32_epi64(_mm256_extracti128_si256(best, 1)));
            }
        }
        for (; ow < OW; ow++)
            max_2x2_one(x, W, OW, oh, ow, y, ind);
    }
}
#endif
