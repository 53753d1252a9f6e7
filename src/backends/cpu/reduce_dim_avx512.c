/* AVX-512 float32 softmax / log_softmax over contiguous rows (reduce_dim.c's K == 1 case),
 * taken instead of its AVX2 rows when pti_cpu_has_avx512() (PT_DISABLE_AVX512=1 caps it at
 * AVX2). Same three passes and the same exp semantics as the AVX2 rows (simd_math.h): row max
 * (NaN anywhere gives a NaN row), then e^(x - max) stored and summed (for softmax inputs below
 * -87.3 give exactly 0; log_softmax only sums, so they may give ~1e-38), then the scale by
 * 1 / sum, or x - max - log(sum). On CPUs that split zmm work over 256-bit units the gain is in
 * e^x: 2^n comes from an exponent-field shift and the polynomial runs 16 lanes per
 * instruction; tails run under a lane mask. */
#include <immintrin.h>
#include <math.h>

#include "reduce_impl.h"

#define AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")))

/* e^x for x <= 0 (x - max) or NaN: range reduction by ln 2 and simd_math.h's degree-6
 * polynomial (its constants). Inputs below -87.3 are clamped there (2^n stays normal); with
 * zero_under they give exactly 0, as pti_exp256 does. NaN propagates (the clamp returns a NaN
 * operand). */
AVX512 static inline __m512 sm_exp(__m512 x, bool zero_under)
{
    const __m512 lo = _mm512_set1_ps(PTI_EXP_MIN);
    __m512 xc = _mm512_max_ps(lo, x);
    /* 1.5 * 2^23 + 127: adding it rounds to an integer n and leaves n + 127 in the low bits */
    const __m512 magic = _mm512_set1_ps(12583039.0f);
    __m512 k = _mm512_fmadd_ps(xc, _mm512_set1_ps(PTI_EXP_LOG2E), magic);
    __m512 n = _mm512_sub_ps(k, magic);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(PTI_EXP_LN2_HI), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(PTI_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(PTI_EXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PTI_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PTI_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PTI_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PTI_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PTI_EXP_C1));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(k), 23));
    __m512 y = _mm512_mul_ps(p, scale);
    if (zero_under)
        y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y);
    return y;
}

/* Lanes i .. i+15 of a row of n that exist. */
AVX512 static inline __mmask16 sm_mask(int64_t i, int64_t n)
{
    return n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
}

AVX512 static void softmax_row_avx512(const float *x, float *y, int64_t n, bool lg)
{
    /* max, with any NaN lane remembered (max_ps would drop it) */
    __m512 vm = _mm512_set1_ps(-INFINITY), vm2 = vm;
    __mmask16 nan = 0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 v = _mm512_loadu_ps(x + i), v2 = _mm512_loadu_ps(x + i + 16);
        nan |= _mm512_cmp_ps_mask(v, v2, _CMP_UNORD_Q);
        vm = _mm512_max_ps(vm, v);
        vm2 = _mm512_max_ps(vm2, v2);
    }
    for (; i < n; i += 16) {
        __mmask16 k = sm_mask(i, n);
        __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, x + i);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        vm = _mm512_max_ps(vm, v);
    }
    float m = nan ? NAN : _mm512_reduce_max_ps(_mm512_max_ps(vm, vm2));
    __m512 mv = _mm512_set1_ps(m), acc = _mm512_setzero_ps(), acc2 = acc;
    /* e^(x - m): two chains so the exp latencies overlap */
    for (i = 0; i + 32 <= n; i += 32) {
        __m512 e = sm_exp(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv), !lg);
        __m512 e2 = sm_exp(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), mv), !lg);
        if (!lg) {
            _mm512_storeu_ps(y + i, e);
            _mm512_storeu_ps(y + i + 16, e2);
        }
        acc = _mm512_add_ps(acc, e);
        acc2 = _mm512_add_ps(acc2, e2);
    }
    for (; i < n; i += 16) {
        __mmask16 k = sm_mask(i, n);
        __m512 e = sm_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv), !lg);
        if (!lg)
            _mm512_mask_storeu_ps(y + i, k, e);
        acc = _mm512_mask_add_ps(acc, k, acc, e);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(acc, acc2));
    if (lg) {
        __m512 cv = _mm512_set1_ps(logf(s));
        for (i = 0; i < n; i += 16) {
            __mmask16 k = sm_mask(i, n);
            __m512 v = _mm512_maskz_loadu_ps(k, x + i);
            _mm512_mask_storeu_ps(y + i, k, _mm512_sub_ps(_mm512_sub_ps(v, mv), cv));
        }
        return;
    }
    __m512 inv = _mm512_set1_ps(1.0f / s);
    for (i = 0; i < n; i += 16) {
        __mmask16 k = sm_mask(i, n);
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), inv));
    }
}

void pti_softmax_rows_avx512(const float *x, float *y, int64_t n, int64_t begin, int64_t end,
                             bool lg)
{
    for (int64_t o = begin; o < end; o++)
        softmax_row_avx512(x + o * n, y + o * n, n, lg);
}
