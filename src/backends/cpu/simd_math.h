/* Vector math shared by the CPU kernel families: AVX2+FMA exp for float lanes, used by the
 * softmax/log_softmax/logsumexp reductions and the fused norm/attention/loss kernels. The
 * elementwise family's exp (src/backends/cpu/elementwise_avx2.c) is separate because the
 * public pt_exp needs full overflow-to-inf handling these max-subtracted uses never hit. */
#ifndef PT_CPU_SIMD_MATH_H
#define PT_CPU_SIMD_MATH_H

#ifdef __x86_64__
#include <immintrin.h>

/* The constants of that exp, shared by the AVX2 versions here and the AVX-512 softmax rows
 * (reduce_dim_avx512.c), so every width rounds the same: x = n ln2 + r with ln2 split in two,
 * then e^r = 1 + r + r^2 (C1 + C2 r + ... + C6 r^5). */
#define PTI_EXP_MIN (-87.33654f) /* below: 2^n would leave the normal floats */
#define PTI_EXP_LOG2E 1.44269504088896341f
#define PTI_EXP_LN2_HI 0.693359375f
#define PTI_EXP_LN2_LO (-2.12194440e-4f)
#define PTI_EXP_C1 5.0000001201e-1f
#define PTI_EXP_C2 1.6666665459e-1f
#define PTI_EXP_C3 4.1665795894e-2f
#define PTI_EXP_C4 8.3334519073e-3f
#define PTI_EXP_C5 1.3981999507e-3f
#define PTI_EXP_C6 1.9875691500e-4f

/* exp for float lanes: range reduction by ln 2 and a degree-6 polynomial (about 1 ulp);
 * NaN propagates, inputs below -87.3 give exactly 0 (as expf's underflow would). */
__attribute__((target("avx2,fma"))) static inline __m256 pti_exp256(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(PTI_EXP_MIN), hi = _mm256_set1_ps(88.3762626f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x)); /* NaN stays NaN (second operand) */
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(PTI_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(PTI_EXP_LN2_HI), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(PTI_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(PTI_EXP_C6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PTI_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PTI_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PTI_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PTI_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PTI_EXP_C1));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(under, y);
}

/* exp for sums only (log_softmax, logsumexp): no upper clamp (inputs are x - max <= 0) and
 * inputs below -87.3 give about 1e-38 instead of 0, which no sum can see. NaN propagates. */
__attribute__((target("avx2,fma"))) static inline __m256 pti_exp256_sum(__m256 x)
{
    __m256 xc = _mm256_max_ps(_mm256_set1_ps(PTI_EXP_MIN), x);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(PTI_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(PTI_EXP_LN2_HI), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(PTI_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(PTI_EXP_C6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PTI_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PTI_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PTI_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PTI_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PTI_EXP_C1));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

#endif
