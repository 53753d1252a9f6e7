/* AVX2+FMA(+F16C) quantized dot products: the same results as the scalar ones in quant_dot.c
 * (identical integer block sums; only the float summation order differs), for the weight
 * formats real models use most -- Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q8_K -- and
 * F16/BF16/F32 weights. Q2_K and Q3_K stay scalar.
 *
 * The int8 x int8 products use _mm256_maddubs_epi16 (unsigned x signed byte pairs summed to
 * int16): unsigned weight codes (0..63) go in directly; signed ones go in as |w| with the sign
 * moved onto the activation (_mm256_sign_epi8). The pair sums stay below 2^15 because
 * activations are in [-127, 127] and |w| <= 128. */
#include <stdatomic.h>
#include <stdbool.h>

#include "cpu.h"
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

bool pti_quant_avx2_ok(void)
{
    static atomic_int ok = -1; /* every thread that races here stores the same value */
    int v = atomic_load_explicit(&ok, memory_order_relaxed);
    if (v < 0) {
        /* F16C is CPUID leaf 1, ECX bit 29 (every AVX2 CPU has it; checked all the same) */
        unsigned eax, ebx, ecx = 0, edx;
        bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1u);
        v = pti_cpu_has_avx2() && f16c;
        atomic_store_explicit(&ok, v, memory_order_relaxed);
    }
    return v;
}

AVX2 static inline float h2f(pti_half h) { return _cvtsh_ss(h); }

AVX2 static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static inline int hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* 8 int32 lanes of pairwise sums of u[i] * s[i] (u unsigned bytes, s signed). */
AVX2 static inline __m256i dot_us(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* Same for two signed byte vectors. */
AVX2 static inline __m256i dot_ss(__m256i w, __m256i a)
{
    return dot_us(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

/* 16 packed bytes -> 32 values 0..15: the low nibbles (elements 0..15) in the low half, the
 * high nibbles (elements 16..31) in the high half. */
AVX2 static inline __m256i nibbles32(const uint8_t *p)
{
    __m128i raw = _mm_loadu_si128((const __m128i *)p);
    __m256i v = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF where bit j of the 32-bit h is set, else 0. */
AVX2 static inline __m256i bits32(const uint8_t qh[4])
{
    uint32_t h;
    memcpy(&h, qh, sizeof h);
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), pick);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* Sum of the 32 activation bytes of a block, in 8 int32 lanes. */
AVX2 static inline __m256i sum_s8(__m256i a) { return dot_us(_mm256_set1_epi8(1), a); }

/* ---- 32-value formats x Q8_0 ------------------------------------------------------------------- */

AVX2 static float dot_q4_0(const void *wv, const void *av, int64_t n)
{
    const pti_block_q4_0 *w = wv;
    const pti_block_q8_0 *a = av;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t nb = n / PTI_QK, b = 0;
    for (; b + 1 < nb; b += 2) {
        __m256i q0 = _mm256_sub_epi8(nibbles32(w[b].qs), _mm256_set1_epi8(8));
        __m256i q1 = _mm256_sub_epi8(nibbles32(w[b + 1].qs), _mm256_set1_epi8(8));
        __m256i p0 = dot_ss(q0, _mm256_loadu_si256((const __m256i *)a[b].qs));
        __m256i p1 = dot_ss(q1, _mm256_loadu_si256((const __m256i *)a[b + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(a[b].d)), _mm256_cvtepi32_ps(p0),
                               acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b + 1].d) * h2f(a[b + 1].d)),
                               _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; b < nb; b++) {
        __m256i q = _mm256_sub_epi8(nibbles32(w[b].qs), _mm256_set1_epi8(8));
        __m256i p = dot_ss(q, _mm256_loadu_si256((const __m256i *)a[b].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(a[b].d)), _mm256_cvtepi32_ps(p),
                               acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

AVX2 static float dot_q8_0(const void *wv, const void *av, int64_t n)
{
    const pti_block_q8_0 *w = wv;
    const pti_block_q8_0 *a = av;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t nb = n / PTI_QK, b = 0;
    for (; b + 1 < nb; b += 2) {
        __m256i p0 = dot_ss(_mm256_loadu_si256((const __m256i *)w[b].qs),
                            _mm256_loadu_si256((const __m256i *)a[b].qs));
        __m256i p1 = dot_ss(_mm256_loadu_si256((const __m256i *)w[b + 1].qs),
                            _mm256_loadu_si256((const __m256i *)a[b + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(a[b].d)), _mm256_cvtepi32_ps(p0),
                               acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b + 1].d) * h2f(a[b + 1].d)),
                               _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; b < nb; b++) {
        __m256i p = dot_ss(_mm256_loadu_si256((const __m256i *)w[b].qs),
                           _mm256_loadu_si256((const __m256i *)a[b].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(a[b].d)), _mm256_cvtepi32_ps(p),
                               acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* Q4_1 / Q5_1: unsigned codes q, y = d * q + m, so a block adds
 * d_w * d_a * sum(q * a) + m * d_a * sum(a). */
AVX2 static inline void affine_block(__m256i q, const pti_block_q8_0 *a, float dw, float m,
                                     __m256 *acc, __m256 *accm)
{
    __m256i av = _mm256_loadu_si256((const __m256i *)a->qs);
    float da = h2f(a->d);
    *acc = _mm256_fmadd_ps(_mm256_set1_ps(dw * da), _mm256_cvtepi32_ps(dot_us(q, av)), *acc);
    *accm = _mm256_fmadd_ps(_mm256_set1_ps(m * da), _mm256_cvtepi32_ps(sum_s8(av)), *accm);
}

AVX2 static float dot_q4_1(const void *wv, const void *av, int64_t n)
{
    const pti_block_q4_1 *w = wv;
    const pti_block_q8_0 *a = av;
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / PTI_QK; b++)
        affine_block(nibbles32(w[b].qs), &a[b], h2f(w[b].d), h2f(w[b].m), &acc, &accm);
    return hsum_ps(_mm256_add_ps(acc, accm));
}

AVX2 static float dot_q5_0(const void *wv, const void *av, int64_t n)
{
    const pti_block_q5_0 *w = wv;
    const pti_block_q8_0 *a = av;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / PTI_QK; b++) {
        /* code - 16 as int8: the nibble with 0xF0 or'ed in where the 5th bit is clear */
        __m256i hi = _mm256_andnot_si256(bits32(w[b].qh), _mm256_set1_epi8((char)0xF0));
        __m256i q = _mm256_or_si256(nibbles32(w[b].qs), hi);
        __m256i p = dot_ss(q, _mm256_loadu_si256((const __m256i *)a[b].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(a[b].d)), _mm256_cvtepi32_ps(p),
                              acc);
    }
    return hsum_ps(acc);
}

AVX2 static float dot_q5_1(const void *wv, const void *av, int64_t n)
{
    const pti_block_q5_1 *w = wv;
    const pti_block_q8_0 *a = av;
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / PTI_QK; b++) {
        __m256i hi = _mm256_and_si256(bits32(w[b].qh), _mm256_set1_epi8(0x10));
        __m256i q = _mm256_or_si256(nibbles32(w[b].qs), hi);
        affine_block(q, &a[b], h2f(w[b].d), h2f(w[b].m), &acc, &accm);
    }
    return hsum_ps(_mm256_add_ps(acc, accm));
}

/* ---- K-quants x Q8_K ------------------------------------------------------------------------------ */

/* sum over the 8 sub-blocks of mn[i] * (sum of the 32 activations of sub-block i) */
static inline int kquant_min_sum(const uint8_t mn[8], const int16_t bsums[16])
{
    int s = 0;
    for (int i = 0; i < 8; i++)
        s += mn[i] * (bsums[2 * i] + bsums[2 * i + 1]);
    return s;
}

/* Q4_K / Q5_K chunk c (64 values): codes lo (sub-block 2c) and hi (2c+1), 0..31. */
AVX2 static inline __m256i kquant_chunk(__m256i lo, __m256i hi, const int8_t *act,
                                        const uint8_t sc[8], int c)
{
    __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)act));
    __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(act + 32)));
    p0 = _mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * c]));
    p1 = _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * c + 1]));
    return _mm256_add_epi32(p0, p1);
}

/* The 6-bit scales (16-bit lanes 0..7) and mins (lanes 8..15) of a Q4_K / Q5_K super-block,
 * unpacked with 32-bit word arithmetic (the same layout as pti_kquant_scales). */
AVX2 static inline __m256i kquant_scales16(const uint8_t s[12])
{
    uint32_t u0, u1, u2;
    memcpy(&u0, s, 4);
    memcpy(&u1, s + 4, 4);
    memcpy(&u2, s + 8, 4);
    uint32_t sc_lo = u0 & 0x3f3f3f3fu, mn_lo = u1 & 0x3f3f3f3fu;
    uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    __m128i b = _mm_set_epi32((int)mn_hi, (int)mn_lo, (int)sc_hi, (int)sc_lo);
    return _mm256_cvtepu8_epi16(b);
}

/* Shuffle pattern that broadcasts 16-bit lane j of each 128-bit half over that half. */
AVX2 static inline __m256i bcast16_pattern(int lo, int hi)
{
    return _mm256_setr_epi8(
        (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo),
        (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
        (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo),
        (char)(2 * lo + 1), (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
        (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi),
        (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
        (char)(2 * hi), (char)(2 * hi + 1));
}

/* mins * (sums of the 32 activations of each sub-block), in 4 int32 lanes (exact: the mins are
 * < 64 and each pair sum of bsums fits int16). */
AVX2 static inline __m128i kquant_min_dot(__m256i sm16, const int16_t bsums[16])
{
    __m256i bs = _mm256_loadu_si256((const __m256i *)bsums);
    __m128i pair = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    return _mm_madd_epi16(_mm256_extracti128_si256(sm16, 1), pair);
}

AVX2 static float dot_q4_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q4_k *w = wv;
    const pti_block_q8_k *a = av;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        __m256i sm16 = kquant_scales16(w[b].scales);
        /* both halves: the 8 scales */
        __m256i sc = _mm256_permute4x64_epi64(sm16, 0x44);
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * c));
            __m256i lo = _mm256_and_si256(raw, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            const int8_t *act = a[b].qs + 64 * c;
            __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)act));
            __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(act + 32)));
            __m256i c0 = _mm256_shuffle_epi8(sc, bcast16_pattern(2 * c, 2 * c));
            __m256i c1 = _mm256_shuffle_epi8(sc, bcast16_pattern(2 * c + 1, 2 * c + 1));
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, c0));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, c1));
        }
        float da = a[b].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(da * h2f(w[b].d)),
                              _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc);
        accm = _mm_fmadd_ps(_mm_set1_ps(da * h2f(w[b].dmin)),
                            _mm_cvtepi32_ps(kquant_min_dot(sm16, a[b].bsums)), accm);
    }
    __m128 m = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return hsum_ps(acc) - _mm_cvtss_f32(m);
}

AVX2 static float dot_q5_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q5_k *w = wv;
    const pti_block_q8_k *a = av;
    const __m256i m4 = _mm256_set1_epi8(0x0F), b16 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        uint8_t sc[8], mn[8];
        pti_kquant_scales(w[b].scales, sc, mn);
        __m256i qh = _mm256_loadu_si256((const __m256i *)w[b].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * c));
            __m256i bl = _mm256_set1_epi8((char)(1 << (2 * c)));
            __m256i bh = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
            __m256i hl = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), b16);
            __m256i hh = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), b16);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, m4), hl);
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), hh);
            sumi = _mm256_add_epi32(sumi, kquant_chunk(lo, hi, a[b].qs + 64 * c, sc, c));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[b].d * h2f(w[b].d)), _mm256_cvtepi32_ps(sumi), acc);
        mins += a[b].d * h2f(w[b].dmin) * (float)kquant_min_sum(mn, a[b].bsums);
    }
    return hsum_ps(acc) - mins;
}

/* Q6_K: codes q in 0..63 with y = d * s * (q - 32); sum(s * (q - 32) * a) is computed as
 * sum(s * q * a) - 32 * sum_g(s_g * bsum_g), exactly, in int32 (subtracting it in float would
 * cancel away precision: sum(s * q * a) is ~32 times larger than the result). */
AVX2 static float dot_q6_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q6_k *w = wv;
    const pti_block_q8_k *a = av;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        __m128i s8 = _mm_loadu_si128((const __m128i *)w[b].scales);
        __m256i s16 = _mm256_cvtepi8_epi16(s8); /* the 16 group scales */
        __m256i bs = _mm256_loadu_si256((const __m256i *)a[b].bsums);
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(),
                                        _mm256_slli_epi32(_mm256_madd_epi16(s16, bs), 5));
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(w[b].ql + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(w[b].ql + 64 * h + 32));
            __m256i hb = _mm256_loadu_si256((const __m256i *)(w[b].qh + 32 * h));
            /* scales 8h..8h+7 in both halves */
            __m256i sc = h ? _mm256_permute4x64_epi64(s16, 0xEE) : _mm256_permute4x64_epi64(s16, 0x44);
            __m256i q[4];
            /* 16-bit shifts: the masks drop the bits that cross from the neighbouring byte */
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_and_si256(hb, m2));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
            __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
            for (int t = 0; t < 4; t += 2) {
                const int8_t *act = a[b].qs + 128 * h + 32 * t;
                /* the two 16-value groups of q[t] are scales 2t and 2t + 1 (of this half) */
                __m256i c0 = _mm256_shuffle_epi8(sc, bcast16_pattern(2 * t, 2 * t + 1));
                __m256i c1 = _mm256_shuffle_epi8(sc, bcast16_pattern(2 * t + 2, 2 * t + 3));
                __m256i p0 = _mm256_maddubs_epi16(q[t], _mm256_loadu_si256((const __m256i *)act));
                __m256i p1 = _mm256_maddubs_epi16(q[t + 1],
                                                  _mm256_loadu_si256((const __m256i *)(act + 32)));
                s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, c0));
                s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, c1));
            }
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(s0, s1));
        }
        /* summed across lanes in int32 first: single lanes still carry the offset */
        sum += a[b].d * h2f(w[b].d) * (float)hsum_i32(sumi);
    }
    return sum;
}

AVX2 static float dot_q8_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q8_k *w = wv;
    const pti_block_q8_k *a = av;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < PTI_QK_K; j += 32)
            sumi = _mm256_add_epi32(sumi,
                                    dot_ss(_mm256_loadu_si256((const __m256i *)(w[b].qs + j)),
                                           _mm256_loadu_si256((const __m256i *)(a[b].qs + j))));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(w[b].d * a[b].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

/* ---- float weights x float32 activations ---------------------------------------------------------- */

AVX2 static inline __m256 load_f16x8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

AVX2 static inline __m256 load_bf16x8(const uint16_t *p)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

AVX2 static float dot_f32(const void *wv, const void *av, int64_t n)
{
    const float *w = wv, *a = av;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(a + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(a + i + 8), acc1);
    }
    float sum = hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        sum += w[i] * a[i];
    return sum;
}

AVX2 static float dot_f16(const void *wv, const void *av, int64_t n)
{
    const uint16_t *w = wv;
    const float *a = av;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(load_f16x8(w + i), _mm256_loadu_ps(a + i), acc0);
        acc1 = _mm256_fmadd_ps(load_f16x8(w + i + 8), _mm256_loadu_ps(a + i + 8), acc1);
    }
    float sum = hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        sum += h2f(w[i]) * a[i];
    return sum;
}

AVX2 static float dot_bf16(const void *wv, const void *av, int64_t n)
{
    const uint16_t *w = wv;
    const float *a = av;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(load_bf16x8(w + i), _mm256_loadu_ps(a + i), acc0);
        acc1 = _mm256_fmadd_ps(load_bf16x8(w + i + 8), _mm256_loadu_ps(a + i + 8), acc1);
    }
    float sum = hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) {
        uint32_t bits = (uint32_t)w[i] << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        sum += f * a[i];
    }
    return sum;
}

pti_qdot_fn pti_quant_dot_avx2_fn(pt_dtype dt)
{
    switch (dt) {
    case PT_Q4_0: return dot_q4_0;
    case PT_Q4_1: return dot_q4_1;
    case PT_Q5_0: return dot_q5_0;
    case PT_Q5_1: return dot_q5_1;
    case PT_Q8_0: return dot_q8_0;
    case PT_Q4_K: return dot_q4_k;
    case PT_Q5_K: return dot_q5_k;
    case PT_Q6_K: return dot_q6_k;
    case PT_Q8_K: return dot_q8_k;
    case PT_FLOAT32: return dot_f32;
    case PT_FLOAT16: return dot_f16;
    case PT_BFLOAT16: return dot_bf16;
    default: return NULL;
    }
}

#else /* not x86: scalar only */

bool pti_quant_avx2_ok(void) { return false; }
pti_qdot_fn pti_quant_dot_avx2_fn(pt_dtype dt)
{
    (void)dt;
    return NULL;
}

#endif
