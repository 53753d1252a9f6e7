/* AVX2+FMA(+F16C) quantized dot products: the same results as the scalar ones in quant_dot.c
 * (identical integer block sums; only the float summation order differs), for the weight
 * formats real models use most -- Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q8_K -- and
 * F16/BF16/F32 weights. Q2_K and Q3_K stay scalar.
 *
 * The int8 x int8 products use _mm256_maddubs_epi16 (unsigned x signed byte pairs summed to
 * int16): unsigned weight codes (0..63) go in directly; signed ones go in as |w| with the sign
 * moved onto the activation (_mm256_sign_epi8). The pair sums stay below 2^15 because
 * activations are in [-127, 127] and |w| <= 128.
 *
 * The K-quants multiply those int16 pair sums by their sub-block scales and add them up in
 * int32: madd + add, or one vpdpwssd where AVX512-VNNI is present (pti_quant_vnni_ok) -- exact
 * integers either way, so the two paths give the same bits. The decode GEMV is a chain of
 * these per super-block; two independent sums per (weight row, activation row) pair hide
 * vpdpwssd's latency where registers allow. The prefill's 8-row K-quant kernels are the same
 * inline bodies compiled with AVX-512 enabled (32 vector registers for 8 rows' accumulators;
 * measured 15-30% faster than 4 rows per weight-block decode on the Zen 4 test machine). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#include "quant_simd.h"

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

AVX2 static inline float h2f(pti_half h)
{
    return _cvtsh_ss(h);
}

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

/* ---- 32-value formats x Q8_0 -------------------------------------------------------------------
 */

/* The R-row kernels below (R = 1 for the row dot products, PTI_QDOT_ROWS for pti_qdot_rows_fn)
 * decode each weight block once and use it for R activation rows; every row sees exactly the
 * operations of the R = 1 kernel, in the same order, so a row's result does not depend on R. */
#define ROWS_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

/* The wide K-quant row kernels (PTI_QDOT_ROWS_WIDE activation rows): the same inline bodies,
 * compiled for AVX-512 so that their 8 rows' accumulators fit in 32 vector registers. */
#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* Signed int8 codes of block b of a Q4_0 (q4 = true) or Q8_0 row. */
ROWS_INLINE __m256i q32_codes(const void *wv, int64_t b, bool q4)
{
    if (q4)
        return _mm256_sub_epi8(pti_nibbles32(((const pti_block_q4_0 *)wv)[b].qs),
                               _mm256_set1_epi8(8));
    return _mm256_loadu_si256((const __m256i *)((const pti_block_q8_0 *)wv)[b].qs);
}

ROWS_INLINE float q32_scale(const void *wv, int64_t b, bool q4)
{
    return h2f(q4 ? ((const pti_block_q4_0 *)wv)[b].d : ((const pti_block_q8_0 *)wv)[b].d);
}

/* Q4_0 / Q8_0 weight row x R Q8_0 activation rows (act_stride bytes apart). */
ROWS_INLINE void q32_rows(const void *wv, const char *act, size_t act_stride, int64_t n, float *out,
                          int R, bool q4)
{
    const pti_block_q8_0 *a[PTI_QDOT_ROWS];
    __m256 acc0[PTI_QDOT_ROWS], acc1[PTI_QDOT_ROWS];
    for (int r = 0; r < R; r++) {
        a[r] = (const pti_block_q8_0 *)(act + (size_t)r * act_stride);
        acc0[r] = acc1[r] = _mm256_setzero_ps();
    }
    int64_t nb = n / PTI_QK, b = 0;
    for (; b + 1 < nb; b += 2) {
        __m256i w0 = q32_codes(wv, b, q4), w1 = q32_codes(wv, b + 1, q4);
        __m256i u0 = _mm256_sign_epi8(w0, w0), u1 = _mm256_sign_epi8(w1, w1);
        float d0 = q32_scale(wv, b, q4), d1 = q32_scale(wv, b + 1, q4);
        for (int r = 0; r < R; r++) {
            __m256i a0 = _mm256_loadu_si256((const __m256i *)a[r][b].qs);
            __m256i a1 = _mm256_loadu_si256((const __m256i *)a[r][b + 1].qs);
            __m256i p0 = dot_us(u0, _mm256_sign_epi8(a0, w0));
            __m256i p1 = dot_us(u1, _mm256_sign_epi8(a1, w1));
            acc0[r] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * h2f(a[r][b].d)), _mm256_cvtepi32_ps(p0),
                                      acc0[r]);
            acc1[r] = _mm256_fmadd_ps(_mm256_set1_ps(d1 * h2f(a[r][b + 1].d)),
                                      _mm256_cvtepi32_ps(p1), acc1[r]);
        }
    }
    for (; b < nb; b++) {
        __m256i w0 = q32_codes(wv, b, q4);
        __m256i u0 = _mm256_sign_epi8(w0, w0);
        float d0 = q32_scale(wv, b, q4);
        for (int r = 0; r < R; r++) {
            __m256i a0 = _mm256_loadu_si256((const __m256i *)a[r][b].qs);
            __m256i p0 = dot_us(u0, _mm256_sign_epi8(a0, w0));
            acc0[r] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * h2f(a[r][b].d)), _mm256_cvtepi32_ps(p0),
                                      acc0[r]);
        }
    }
    for (int r = 0; r < R; r++)
        out[r] = hsum_ps(_mm256_add_ps(acc0[r], acc1[r]));
}

AVX2 static float dot_q4_0(const void *wv, const void *av, int64_t n)
{
    float y;
    q32_rows(wv, av, 0, n, &y, 1, true);
    return y;
}

AVX2 static void rows_q4_0(const void *wv, const void *act, size_t act_stride, int64_t n,
                           float *out)
{
    q32_rows(wv, act, act_stride, n, out, PTI_QDOT_ROWS, true);
}

AVX2 static float dot_q8_0(const void *wv, const void *av, int64_t n)
{
    float y;
    q32_rows(wv, av, 0, n, &y, 1, false);
    return y;
}

AVX2 static void rows_q8_0(const void *wv, const void *act, size_t act_stride, int64_t n,
                           float *out)
{
    q32_rows(wv, act, act_stride, n, out, PTI_QDOT_ROWS, false);
}

AVX2 static float dot_q5_0(const void *wv, const void *av, int64_t n)
{
    const pti_block_q5_0 *w = wv;
    const pti_block_q8_0 *a = av;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / PTI_QK; b++) {
        /* code - 16 as int8: the nibble with 0xF0 or'ed in where the 5th bit is clear */
        __m256i hi = _mm256_andnot_si256(pti_bits32(w[b].qh), _mm256_set1_epi8((char)0xF0));
        __m256i q = _mm256_or_si256(pti_nibbles32(w[b].qs), hi);
        __m256i p = dot_ss(q, _mm256_loadu_si256((const __m256i *)a[b].qs));
        acc =
            _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(a[b].d)), _mm256_cvtepi32_ps(p), acc);
    }
    return hsum_ps(acc);
}

/* ---- K-quants x Q8_K
 * ------------------------------------------------------------------------------ */

/* The 6-bit scales of a Q4_K / Q5_K super-block as 16-bit lanes 0..7 of *sc (lanes 8..15:
 * the mins), and the 8 mins each repeated twice, as 16 16-bit lanes of *mn2, unpacked with
 * 32-bit word arithmetic (the same layout as pti_kquant_scales). */
AVX2 static inline void kquant_scales16(const uint8_t s[12], __m256i *sc, __m256i *mn2)
{
    uint32_t u0, u1, u2;
    memcpy(&u0, s, 4);
    memcpy(&u1, s + 4, 4);
    memcpy(&u2, s + 8, 4);
    uint32_t sc_lo = u0 & 0x3f3f3f3fu, mn_lo = u1 & 0x3f3f3f3fu;
    uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    __m128i b = _mm_set_epi32((int)mn_hi, (int)mn_lo, (int)sc_hi, (int)sc_lo);
    *sc = _mm256_cvtepu8_epi16(b);
    *mn2 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(b, b));
}

/* Shuffle pattern that broadcasts 16-bit lane j of each 128-bit half over that half. */
AVX2 static inline __m256i bcast16_pattern(int lo, int hi)
{
    return _mm256_setr_epi8((char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
                            (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
                            (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
                            (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
                            (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
                            (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
                            (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
                            (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1));
}

/* mins * (sums of the 32 activations of each sub-block), sub-block j in int32 lane j (exact:
 * the mins are < 64 and each 16-value sum of a Q8_K block is at most 2048 in magnitude). */
AVX2 static inline __m256i kquant_min_dot(__m256i mn2, const int16_t bsums[16])
{
    return _mm256_madd_epi16(mn2, _mm256_loadu_si256((const __m256i *)bsums));
}

/* acc + the pair sums of the int16 lanes p * s, in 8 int32 lanes: one vpdpwssd with VNNI
 * (EVEX-encoded 256-bit, AVX512-VNNI + AVX512-VL; inline asm so this file needs no AVX-512
 * target flags), else madd + add. Exact integers either way, so both give the same bits. */
ROWS_INLINE __m256i madd_acc(__m256i acc, __m256i p, __m256i s, bool vnni)
{
    if (vnni) {
        __asm__("%{evex%} vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(p), "v"(s));
        return acc;
    }
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
}

/* (weight row, activation row) pairs a K-quant row kernel holds at most */
#define KQ_MAX_PAIRS PTI_QDOT_ROWS_WIDE

/* Q4_K, or Q5_K (q5: the fifth bit of each code from qh); the two block layouts differ only by
 * qh, so the fields are read through the Q5_K struct or the Q4_K one. W weight rows (w_stride
 * bytes apart) times R activation rows (act_stride bytes apart), W * R <= KQ_MAX_PAIRS,
 * out[w * R + r]; R > 1 decodes each weight block once for R activation rows. W = 2 (a GEMV
 * sharing the activation loads of two weight rows) measured up to 3x slower from DRAM on the
 * 2-core test machine (two interleaved row streams, as quant_gemm_avx2.c found), so every caller
 * uses W = 1 for now; the loop is kept for a machine where it pays. */
ROWS_INLINE void q4_k_rows(const void *wv, size_t w_stride, const char *act, size_t act_stride,
                           int64_t n, float *out, int W, int R, bool q5, bool vnni)
{
    const __m256i b16 = _mm256_set1_epi8(0x10);
    const pti_block_q8_k *a[KQ_MAX_PAIRS];
    const char *wr[2];
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[KQ_MAX_PAIRS];
    __m256 accm[KQ_MAX_PAIRS];
    for (int w = 0; w < W; w++)
        wr[w] = (const char *)wv + (size_t)w * w_stride;
    for (int r = 0; r < R; r++)
        a[r] = (const pti_block_q8_k *)(act + (size_t)r * act_stride);
    for (int p = 0; p < W * R; p++) {
        acc[p] = _mm256_setzero_ps();
        accm[p] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        const uint8_t *scales[2], *qs[2];
        __m256i qh[2], sm16[2], mn2[2], sc[2];
        __m256i sumi[KQ_MAX_PAIRS];
        for (int w = 0; w < W; w++) {
            const pti_block_q4_k *w4 = (const pti_block_q4_k *)wr[w] + b;
            const pti_block_q5_k *w5 = (const pti_block_q5_k *)wr[w] + b;
            scales[w] = q5 ? w5->scales : w4->scales;
            qs[w] = q5 ? w5->qs : w4->qs;
            qh[w] = q5 ? _mm256_loadu_si256((const __m256i *)w5->qh) : _mm256_setzero_si256();
            kquant_scales16(scales[w], &sm16[w], &mn2[w]);
            /* both halves: the 8 scales */
            sc[w] = _mm256_permute4x64_epi64(sm16[w], 0x44);
        }
        /* two independent sums per pair (one for each 32-value half of a chunk) where
         * registers allow: vpdpwssd's latency would otherwise chain all 8 sub-blocks */
        __m256i sumh[KQ_MAX_PAIRS];
        const bool split = W * R <= 2;
        for (int p = 0; p < W * R; p++)
            sumi[p] = sumh[p] = _mm256_setzero_si256();
            /* kept a loop (not unrolled): unrolled, gcc defers the sumi additions and spills */
#pragma GCC unroll 1
        for (int c = 0; c < 4; c++) {
            for (int w = 0; w < W; w++) {
                __m256i raw = _mm256_loadu_si256((const __m256i *)(qs[w] + 32 * c));
                __m256i lo = _mm256_and_si256(raw, m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                if (q5) { /* bits 2c and 2c + 1 of qh[l] are the fifth bits of lo[l] and hi[l] */
                    __m256i bl = _mm256_set1_epi8((char)(1 << (2 * c)));
                    __m256i bh = _mm256_set1_epi8((char)(2 << (2 * c)));
                    lo = _mm256_or_si256(
                        lo,
                        _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh[w], bl), bl), b16));
                    hi = _mm256_or_si256(
                        hi,
                        _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh[w], bh), bh), b16));
                }
                __m256i c0 = _mm256_shuffle_epi8(sc[w], bcast16_pattern(0, 0));
                __m256i c1 = _mm256_shuffle_epi8(sc[w], bcast16_pattern(1, 1));
                sc[w] = _mm256_srli_si256(sc[w], 4); /* scales 2c + 2, 2c + 3 to lanes 0, 1 */
                for (int r = 0; r < R; r++) {
                    const int8_t *q = a[r][b].qs + 64 * c;
                    __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q));
                    __m256i p1 =
                        _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q + 32)));
                    if (split) {
                        sumi[w * R + r] = madd_acc(sumi[w * R + r], p0, c0, vnni);
                        sumh[w * R + r] = madd_acc(sumh[w * R + r], p1, c1, vnni);
                    } else {
                        sumi[w * R + r] =
                            madd_acc(madd_acc(sumi[w * R + r], p0, c0, vnni), p1, c1, vnni);
                    }
                }
            }
        }
        if (split)
            for (int p = 0; p < W * R; p++)
                sumi[p] = _mm256_add_epi32(sumi[p], sumh[p]);
        for (int w = 0; w < W; w++) {
            const pti_block_q4_k *w4 = (const pti_block_q4_k *)wr[w] + b;
            const pti_block_q5_k *w5 = (const pti_block_q5_k *)wr[w] + b;
            float dw = h2f(q5 ? w5->d : w4->d), dmin = h2f(q5 ? w5->dmin : w4->dmin);
            for (int r = 0; r < R; r++) {
                int p = w * R + r;
                float da = a[r][b].d;
                acc[p] =
                    _mm256_fmadd_ps(_mm256_set1_ps(da * dw), _mm256_cvtepi32_ps(sumi[p]), acc[p]);
                accm[p] = _mm256_fmadd_ps(_mm256_set1_ps(da * dmin),
                                          _mm256_cvtepi32_ps(kquant_min_dot(mn2[w], a[r][b].bsums)),
                                          accm[p]);
            }
        }
    }
    for (int p = 0; p < W * R; p++) {
        out[p] = hsum_ps(acc[p]) - hsum_ps(accm[p]);
    }
}

/* One row dot and one PTI_QDOT_ROWS-row kernel per format and instruction set. */
#define KQ_FNS(dot, rows, body_fn, ...)                                                            \
    AVX2 static float dot(const void *wv, const void *av, int64_t n)                               \
    {                                                                                              \
        float y;                                                                                   \
        body_fn(wv, 0, av, 0, n, &y, 1, 1, __VA_ARGS__);                                           \
        return y;                                                                                  \
    }                                                                                              \
    AVX2 static void rows(const void *wv, const void *act, size_t act_stride, int64_t n,           \
                          float *out)                                                              \
    {                                                                                              \
        body_fn(wv, 0, act, act_stride, n, out, 1, PTI_QDOT_ROWS, __VA_ARGS__);                    \
    }
KQ_FNS(dot_q4_k, rows_q4_k, q4_k_rows, false, false)
KQ_FNS(dot_q4_k_vnni, rows_q4_k_vnni, q4_k_rows, false, true)
KQ_FNS(dot_q5_k, rows_q5_k, q4_k_rows, true, false)
KQ_FNS(dot_q5_k_vnni, rows_q5_k_vnni, q4_k_rows, true, true)

/* t[p] = the sum of the 8 int32 lanes of v[p], p < 8, in 9 instructions (hadd tree, then the
 * two 128-bit halves) instead of 8 separate horizontal sums; exact integers, the same values. */
ROWS_INLINE void hsum8_i32(const __m256i v[8], int32_t t[8])
{
    __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
    __m256i g0 = _mm256_hadd_epi32(h01, h23); /* rows 0-3: lanes 0-3 | lanes 4-7 partials */
    __m256i g1 = _mm256_hadd_epi32(h45, h67); /* rows 4-7 */
    __m256i tot = _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20),
                                   _mm256_permute2x128_si256(g0, g1, 0x31));
    _mm256_storeu_si256((__m256i *)t, tot);
}

/* Q6_K: codes q in 0..63 with y = d * s * (q - 32); sum(s * (q - 32) * a) is computed as
 * sum(s * q * a) - 32 * sum_g(s_g * bsum_g), exactly, in int32 (subtracting it in float would
 * cancel away precision: sum(s * q * a) is ~32 times larger than the result). */
ROWS_INLINE void q6_k_rows(const void *wv, size_t w_stride, const char *act, size_t act_stride,
                           int64_t n, float *out, int W, int R, bool vnni)
{
    const pti_block_q6_k *wr[2];
    const pti_block_q8_k *a[KQ_MAX_PAIRS];
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    for (int w = 0; w < W; w++)
        wr[w] = (const pti_block_q6_k *)((const char *)wv + (size_t)w * w_stride);
    for (int r = 0; r < R; r++)
        a[r] = (const pti_block_q8_k *)(act + (size_t)r * act_stride);
    for (int p = 0; p < W * R; p++)
        out[p] = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        __m256i s16[2];
        __m256i sumi[KQ_MAX_PAIRS], sumh[KQ_MAX_PAIRS];
        /* two independent sums per pair (even and odd t) where registers allow: vpdpwssd's
         * latency would otherwise chain all 8 products */
        const bool split = W * R <= 2;
        for (int w = 0; w < W; w++) {
            s16[w] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wr[w][b].scales));
            for (int r = 0; r < R; r++) {
                __m256i bs = _mm256_loadu_si256((const __m256i *)a[r][b].bsums);
                sumi[w * R + r] = _mm256_sub_epi32(
                    _mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(s16[w], bs), 5));
                sumh[w * R + r] = _mm256_setzero_si256();
            }
        }
        for (int h = 0; h < 2; h++) {
            for (int w = 0; w < W; w++) {
                const pti_block_q6_k *wb = &wr[w][b];
                __m256i l0 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h));
                __m256i l1 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h + 32));
                __m256i hb = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
                /* scales 8h .. 8h+7 in both halves */
                __m256i sc = h ? _mm256_permute4x64_epi64(s16[w], 0xEE)
                               : _mm256_permute4x64_epi64(s16[w], 0x44);
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
                for (int t = 0; t < 4; t++) {
                    /* the two 16-value groups of q[t] have scales 2t and 2t + 1 of this half */
                    __m256i st = _mm256_shuffle_epi8(sc, bcast16_pattern(2 * t, 2 * t + 1));
                    for (int r = 0; r < R; r++) {
                        const int8_t *q8 = a[r][b].qs + 128 * h + 32 * t;
                        __m256i p =
                            _mm256_maddubs_epi16(q[t], _mm256_loadu_si256((const __m256i *)q8));
                        __m256i *acc = split && (t & 1) ? &sumh[w * R + r] : &sumi[w * R + r];
                        *acc = madd_acc(*acc, p, st, vnni);
                        /* keeps the additions in order: reassociated, gcc holds every product
                         * live at once and spills (integer sums, so the result is the same) */
                        __asm__("" : "+x"(*acc));
                    }
                }
            }
        }
        /* summed across lanes in int32 first: single lanes still carry the offset, ~32 times
         * the result, which float lanes would cancel away */
        if (split)
            for (int p = 0; p < W * R; p++)
                sumi[p] = _mm256_add_epi32(sumi[p], sumh[p]);
        int32_t tot[KQ_MAX_PAIRS];
        if (W * R == 8) {
            hsum8_i32(sumi, tot);
        } else {
            for (int p = 0; p < W * R; p++)
                tot[p] = hsum_i32(sumi[p]);
        }
        for (int w = 0; w < W; w++) {
            float dw = h2f(wr[w][b].d);
            for (int r = 0; r < R; r++)
                out[w * R + r] += a[r][b].d * dw * (float)tot[w * R + r];
        }
    }
}

KQ_FNS(dot_q6_k, rows_q6_k, q6_k_rows, false)
KQ_FNS(dot_q6_k_vnni, rows_q6_k_vnni, q6_k_rows, true)

/* The decode GEMV's Q6_K dot (one weight row, one activation row) with 512-bit registers, on
 * an AVX-512 VNNI CPU: a block's 256 codes are four zmm of bytes (the nibbles of ql with the
 * two high bits of qh shifted into bits 4-5), each multiplied by 64 activation bytes with one
 * vpdpbusd (int32 lanes of 4 products: lane j of code vector i is in sub-block 4i + j / 4),
 * scaled lane by lane by its sub-block's scale, then summed across lanes once per block. The
 * exact integer block total and acc = fma(d_a * d_w, float(total), acc) over the blocks in
 * order are those of q6_k_rows and of the tiled kernel (quant_gemm_q6k.c), so the bits are the
 * same; measured 1.4x q6_k_rows's speed from cache (bench_qgemv, 4096 x 4096, 2 threads: 96 against
 * 67 GB/s), where the 256-bit kernel spends half of its instructions on unpacking and per-pair
 * scale shuffles. */
AVX512 static float dot_q6_k_avx512(const void *wv, const void *av, int64_t n)
{
    const pti_block_q6_k *w = wv;
    const pti_block_q8_k *a = av;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    /* qh's 32 bytes of a half in both 256-bit halves of a zmm: the upper half shifted by 2,
     * so bits 0-1 and 4-5 of each byte are those of elements l and 64 + l there, and of
     * l + 32 and 96 + l in the upper half */
    const __m512i qh_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    __m512i sc_index[4];
    for (int i = 0; i < 4; i++)
        sc_index[i] = _mm512_set_epi32(4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 2,
                                       4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 1, 4 * i + 1,
                                       4 * i + 1, 4 * i + 1, 4 * i, 4 * i, 4 * i, 4 * i);
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        const pti_block_q6_k *wb = &w[b];
        const pti_block_q8_k *ab = &a[b];
        __m128i sc8 = _mm_loadu_si128((const __m128i *)wb->scales);
        __m512i sc = _mm512_cvtepi8_epi32(sc8);
        /* -32 * sum_s(scale_s * bsum_s): q - 32 is the signed code */
        __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8),
                                        _mm256_loadu_si256((const __m256i *)ab->bsums));
        __m512i tot = _mm512_sub_epi32(_mm512_setzero_si512(),
                                       _mm512_zextsi256_si512(_mm256_slli_epi32(off, 5)));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i l = _mm512_loadu_si512(wb->ql + 64 * h);
            __m512i hb = _mm512_srlv_epi16(
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h))),
                qh_shift);
            /* 16-bit shifts: the masks drop the bits that cross from the neighbouring byte */
            __m512i q_lo = _mm512_or_si512(_mm512_and_si512(l, m4),
                                           _mm512_and_si512(_mm512_slli_epi16(hb, 4), m30));
            __m512i q_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                           _mm512_and_si512(hb, m30));
            const int8_t *q8 = ab->qs + 128 * h;
            __m512i d_lo =
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), q_lo, _mm512_loadu_si512(q8));
            __m512i d_hi =
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), q_hi, _mm512_loadu_si512(q8 + 64));
            tot = _mm512_add_epi32(
                tot, _mm512_mullo_epi32(d_lo, _mm512_permutexvar_epi32(sc_index[2 * h], sc)));
            tot = _mm512_add_epi32(
                tot, _mm512_mullo_epi32(d_hi, _mm512_permutexvar_epi32(sc_index[2 * h + 1], sc)));
        }
        float s = ab->d * h2f(wb->d);
        acc = _mm_fmadd_ss(_mm_set_ss(s), _mm_set_ss((float)_mm512_reduce_add_epi32(tot)), acc);
    }
    return _mm_cvtss_f32(acc);
}

/* PTI_QDOT_ROWS_WIDE activation rows per weight row (AVX-512 CPUs): each row sees the
 * operations of the one-row kernel, so the bits are those of dot_* above. */
#define KQ_WIDE(rows, body_fn, ...)                                                                \
    AVX512 static void rows(const void *wv, const void *act, size_t act_stride, int64_t n,         \
                            float *out)                                                            \
    {                                                                                              \
        body_fn(wv, 0, act, act_stride, n, out, 1, PTI_QDOT_ROWS_WIDE, __VA_ARGS__);               \
    }
KQ_WIDE(wide_q4_k, q4_k_rows, false, true)
KQ_WIDE(wide_q5_k, q4_k_rows, true, true)
KQ_WIDE(wide_q6_k, q6_k_rows, true)

bool pti_quant_avx512_ok(void)
{
    static atomic_int ok = -1; /* every thread that races here stores the same value */
    int v = atomic_load_explicit(&ok, memory_order_relaxed);
    if (v < 0) {
        /* the backend's AVX-512 level (F/DQ/BW/VL, PT_DISABLE_AVX512 read once there) */
        v = pti_quant_vnni_ok() && pti_cpu_has_avx512();
        atomic_store_explicit(&ok, v, memory_order_relaxed);
    }
    return v;
}

pti_qdot_rows_fn pti_quant_dot_rows_wide_fn(pt_dtype dt)
{
    if (!pti_quant_avx512_ok())
        return NULL;
    switch (dt) {
    case PT_Q4_K: return wide_q4_k;
    case PT_Q5_K: return wide_q5_k;
    case PT_Q6_K: return wide_q6_k;
    default: return NULL;
    }
}

AVX2 static float dot_q8_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q8_k *w = wv;
    const pti_block_q8_k *a = av;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < PTI_QK_K; j += 32)
            sumi =
                _mm256_add_epi32(sumi, dot_ss(_mm256_loadu_si256((const __m256i *)(w[b].qs + j)),
                                              _mm256_loadu_si256((const __m256i *)(a[b].qs + j))));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(w[b].d * a[b].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

/* ---- float weights x float32 activations
 * ---------------------------------------------------------- */

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

pti_qdot_rows_fn pti_quant_dot_rows_avx2_fn(pt_dtype dt)
{
    switch (dt) {
    case PT_Q4_0: return rows_q4_0;
    case PT_Q8_0: return rows_q8_0;
    case PT_Q4_K: return pti_quant_vnni_ok() ? rows_q4_k_vnni : rows_q4_k;
    case PT_Q5_K: return pti_quant_vnni_ok() ? rows_q5_k_vnni : rows_q5_k;
    case PT_Q6_K: return pti_quant_vnni_ok() ? rows_q6_k_vnni : rows_q6_k;
    default: return NULL;
    }
}

pti_qdot_fn pti_quant_dot_avx2_fn(pt_dtype dt)
{
    switch (dt) {
    case PT_Q4_0: return dot_q4_0;
    case PT_Q5_0: return dot_q5_0;
    case PT_Q8_0: return dot_q8_0;
    case PT_Q4_K: return pti_quant_vnni_ok() ? dot_q4_k_vnni : dot_q4_k;
    case PT_Q5_K: return pti_quant_vnni_ok() ? dot_q5_k_vnni : dot_q5_k;
    case PT_Q6_K:
        if (pti_quant_avx512_ok())
            return dot_q6_k_avx512;
        return pti_quant_vnni_ok() ? dot_q6_k_vnni : dot_q6_k;
    case PT_Q8_K: return dot_q8_k;
    case PT_FLOAT32: return dot_f32;
    case PT_FLOAT16: return dot_f16;
    case PT_BFLOAT16: return dot_bf16;
    default: return NULL;
    }
}

#else /* not x86: scalar only */

bool pti_quant_avx2_ok(void)
{
    return false;
}
pti_qdot_fn pti_quant_dot_avx2_fn(pt_dtype dt)
{
    (void)dt;
    return NULL;
}

pti_qdot_rows_fn pti_quant_dot_rows_avx2_fn(pt_dtype dt)
{
    (void)dt;
    return NULL;
}

bool pti_quant_avx512_ok(void)
{
    return false;
}

pti_qdot_rows_fn pti_quant_dot_rows_wide_fn(pt_dtype dt)
{
    (void)dt;
    return NULL;
}

#endif
