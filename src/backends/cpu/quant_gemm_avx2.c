/* AVX2 (and AVX512-VNNI where the CPU has it) matrix products of the 32-value block formats --
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 -- with Q8_0-quantized activations: y[M, N] = x[M, K] W[N, K]^T,
 * for every M (M = 1 is the decode GEMV, M = 2 .. 16 the server's batched decode, more the
 * prefill).
 *
 * Design. The activation rows are quantized once (pti_quantize_row_q8_0's int8 values and
 * scales, vectorized) into a kernel-friendly row layout (act_row below): the int8 codes of all
 * blocks back to back, 32-byte aligned, then each block's scale as a float, llama.cpp's Q8_1
 * block sum (for the formats with a min), and the int32 sum of the block's codes.
 *
 * The weight rows are taken 8 at a time (TILE_N, one int32 lane each) and decoded ONCE into an
 * interleaved tile in L1 (wblock): for every block, 8 vectors where vector q holds bytes
 * 4q .. 4q+3 of the block's unsigned codes u (w = u - offset) for all 8 rows -- an 8 x 8 dword
 * transpose of the 8 rows' decoded blocks (Q4_0 / Q4_1 transpose the raw nibble bytes and split
 * them after) -- then the 8 rows' scales and mins as float vectors. Then up to TILE_M (4)
 * activation rows at a time run through the tile: per block, for each q, one vpdpbusd of the
 * weight vector with the activation's 4-byte group q broadcast (AVX2 without VNNI: maddubs +
 * madd, the same integers) accumulates lane j += the 4 products of weight row j; started at
 * -offset * (the activation block's code sum), the 8 lanes end as the exact integer block dot
 * products of the 8 weight rows. Then, per block and activation row, ONE convert and ONE
 * acc = fma(d_w[8] * d_a, float(lanes), acc) -- and for Q4_1 / Q5_1 acc = fma(m_w[8], s_a, acc),
 * the min term (y = d * q + m: m_w times llama.cpp's Q8_1 block sum s_a, float16 of
 * d * sum(a) with d unrounded). Lane j of acc is y of weight row j: no horizontal sum. The
 * float work per block is shared by 8 weight rows, the weight-vector loads by 4 activation rows.
 *
 * M = 1 (decode of one sequence, bound by weight bandwidth) and M up to TILE_M (the server's
 * batched decode of a few sequences) run the same operations, but keep each decoded block of
 * the 8 rows in registers and use it at once for the 1 .. 4 activation rows:
 * streaming the weights from memory, storing the tile measured 2-3x slower than the old
 * per-row GEMV. Every tile decode prefetches the same block of the next tile (the 8 rows that
 * follow, contiguous), without which the 8 interleaved row streams ran at a third of the speed.
 *
 * Every (activation row, weight row) pair sees exactly these operations in this order whatever
 * M, the activation rows it is tiled with, the weight tile's position or the instruction set
 * (VNNI or not), so a row's result is the same bits for any M (the engine's batched decode
 * equals decoding each sequence alone). The non-x86 and no-AVX2 builds take the row kernels of
 * quant_dot.c instead (quant_matmul.c). */
#include <stdatomic.h>
#include <stdbool.h>
#include <float.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "quant_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "quant_simd.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define KERNEL_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

/* weight rows decoded together (a tile's width: one int32 lane each), activation rows per
 * register tile */
#define TILE_N PTI_QGEMM32_TILE_N
#define TILE_M 4

/* How a format's codes enter the integer product. */
typedef enum {
    K_OFFSET, /* Q4_0 (offset 8), Q5_0 (16): u = w + offset in 0..31 */
    K_AFFINE, /* Q4_1, Q5_1: u = q in 0..31, plus the min term */
    K_SIGNED, /* Q8_0: w in -128..127; u = w + 128 for VNNI, the sign trick for AVX2 */
} code_kind;

typedef struct fmt32 {
    pt_dtype dt;
    code_kind kind;
    int offset; /* 8, 16, 128 (Q8_0, VNNI only), 0 for the affine formats */
} fmt32;

bool pti_quant_vnni_ok(void)
{
    static atomic_int ok = -1; /* every thread that races here stores the same value */
    int v = atomic_load_explicit(&ok, memory_order_relaxed);
    if (v < 0) {
        const char *off = getenv("PT_DISABLE_VNNI");
        v = pti_quant_avx2_ok() && __builtin_cpu_supports("avx512vnni") &&
            __builtin_cpu_supports("avx512vl") && !(off && *off && strcmp(off, "0") != 0);
        atomic_store_explicit(&ok, v, memory_order_relaxed);
    }
    return v;
}

/* ---- activation rows ----------------------------------------------------------------------- */

/* blocks of a row rounded up to a multiple of 8 (the min-term dot goes 8 blocks at a time) */
static int64_t padded_blocks(int64_t k)
{
    return (k / PTI_QK + 7) / 8 * 8;
}

size_t pti_qgemm32_act_row_bytes(int64_t k)
{
    /* codes, then float scales, then float scale * code sums, then int32 code sums */
    return (size_t)padded_blocks(k) * (PTI_QK + 2 * sizeof(float) + sizeof(int32_t));
}

/* One block of 32 values: pti_quantize_row_q8_0's codes into qs and its d (as binary16), with
 * the code sum and amax = max |x|. False (nothing written) where x * id could be NaN (a NaN or
 * infinite value, or 127 / amax overflowing): the scalar quantizer's rounding trick turns a NaN
 * into a payload-dependent code, so those rare blocks are left to it. */
AVX2 static bool quantize_block(const float *x, int8_t *qs, pti_half *d, int32_t *sum, float *amax)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v[4], m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        m = _mm256_max_ps(_mm256_and_ps(v[i], abs_mask), m);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q));
    }
    if (_mm256_movemask_ps(nan))
        return false;
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float am = _mm_cvtss_f32(m4);
    float id = am != 0.0f ? 127.0f / am : 0.0f;
    if (!(am <= FLT_MAX) || !(id <= FLT_MAX)) /* x * id could be NaN: inf * 0, 0 * inf */
        return false;
    __m256 idv = _mm256_set1_ps(id);
    __m256i q[4], total = _mm256_setzero_si256();
    for (int i = 0; i < 4; i++) {
        /* x * id rounded to nearest even, as the scalar 1.5 * 2^23 trick; |x * id| <= 127 */
        __m256 r = _mm256_round_ps(_mm256_mul_ps(v[i], idv),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[i] = _mm256_cvtps_epi32(r);
        q[i] = _mm256_max_epi32(_mm256_min_epi32(q[i], _mm256_set1_epi32(127)),
                                _mm256_set1_epi32(-127));
        total = _mm256_add_epi32(total, q[i]);
    }
    /* packs interleave the 128-bit halves: dwords come out as groups 0 2 4 6 | 1 3 5 7 */
    __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, bytes);
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
    *sum = _mm_cvtsi128_si32(t);
    *d = pt_float_to_half(am / 127.0f);
    *amax = am;
    return true;
}

/* Only called where pti_qgemm32_supported holds (an AVX2 CPU). */
void pti_qgemm32_pack_act(const float *x, void *dst, int64_t k)
{
    int64_t nb = k / PTI_QK, nbp = padded_blocks(k);
    int8_t *qs = dst;
    float *da = (float *)(qs + nbp * PTI_QK), *sa = da + nbp;
    int32_t *asum = (int32_t *)(sa + nbp);
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * PTI_QK;
        pti_half d;
        int32_t s = 0;
        float amax = 0.0f;
        if (!quantize_block(xb, qs + b * PTI_QK, &d, &s, &amax)) {
            pti_block_q8_0 blk;
            pti_quantize_row_q8_0(xb, &blk, PTI_QK);
            memcpy(qs + b * PTI_QK, blk.qs, PTI_QK);
            d = blk.d;
            for (int j = 0; j < PTI_QK; j++) {
                s += blk.qs[j];
                amax = fmaxf(amax, fabsf(xb[j]));
            }
        }
        da[b] = pti_h2f(d);
        asum[b] = s;
        /* llama.cpp's Q8_1 sum: float16(d * sum) with d = amax / 127 before rounding */
        sa[b] = pti_h2f(pt_float_to_half(amax / 127.0f * (float)s));
    }
    for (int64_t b = nb; b < nbp; b++) {
        memset(qs + b * PTI_QK, 0, PTI_QK);
        da[b] = sa[b] = 0.0f;
        asum[b] = 0;
    }
}

/* ---- weight decoding ---------------------------------------------------------------------- */

/* 0x10 in byte j where bit j of qh is set */
AVX2 static inline __m256i fifth_bits(const uint8_t qh[4])
{
    return _mm256_and_si256(pti_bits32(qh), _mm256_set1_epi8(0x10));
}

/* binary16 -> float through a full register (vmovd + vcvtph2ps: _cvtsh_ss's vpinsrw merges
 * into a register and can chain one block's conversion to the last one's) */
AVX2 static inline float h2f(pti_half h)
{
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* d and m of an affine block (adjacent binary16 fields) as floats, in one conversion */
AVX2 static inline void h2f_pair(const pti_half *dm, float *d, float *m)
{
    uint32_t both;
    memcpy(&both, dm, sizeof both);
    __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)both));
    *d = _mm_cvtss_f32(f);
    *m = _mm_cvtss_f32(_mm_movehdup_ps(f));
}

/* Block b of a weight row: its codes as they enter the product (u, or for Q8_0 without VNNI
 * the signed w), its scale d and its min m (0 where the format has none). */
KERNEL_INLINE __m256i decode_block(pt_dtype dt, bool vnni, const void *row, int64_t b, float *d,
                                   float *m)
{
    *m = 0.0f;
    switch (dt) {
    case PT_Q4_0: {
        const pti_block_q4_0 *w = (const pti_block_q4_0 *)row + b;
        *d = h2f(w->d);
        return pti_nibbles32(w->qs);
    }
    case PT_Q4_1: {
        const pti_block_q4_1 *w = (const pti_block_q4_1 *)row + b;
        h2f_pair(&w->d, d, m);
        return pti_nibbles32(w->qs);
    }
    case PT_Q5_0: {
        const pti_block_q5_0 *w = (const pti_block_q5_0 *)row + b;
        *d = h2f(w->d);
        return _mm256_or_si256(pti_nibbles32(w->qs), fifth_bits(w->qh));
    }
    case PT_Q5_1: {
        const pti_block_q5_1 *w = (const pti_block_q5_1 *)row + b;
        h2f_pair(&w->d, d, m);
        return _mm256_or_si256(pti_nibbles32(w->qs), fifth_bits(w->qh));
    }
    default: { /* PT_Q8_0 */
        const pti_block_q8_0 *w = (const pti_block_q8_0 *)row + b;
        *d = h2f(w->d);
        __m256i q = _mm256_loadu_si256((const __m256i *)w->qs);
        return vnni ? _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)) : q;
    }
    }
}

/* ---- the interleaved weight tile ----------------------------------------------------------- */

/* Block b of the tile's TILE_N (8) weight rows: g[q] holds bytes 4q .. 4q+3 of the 8 rows'
 * codes, row r in dword lane r; d and m the 8 rows' scales and mins (0 for missing rows). */
typedef struct wblock {
    __m256i g[8];
    __m256 d, m;
} wblock;

/* r[q] := dword lane q of every r[0 .. 8) (an 8 x 8 dword transpose). */
KERNEL_INLINE void transpose8x8(__m256i r[8])
{
    __m256i t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);     /* columns 0 1 | 4 5 */
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]); /* columns 2 3 | 6 7 */
    }
#pragma GCC unroll 8
    for (int h = 0; h < 2; h++) { /* rows 0-3, rows 4-7 */
        const __m256i *s = t + 4 * h;
        u[4 * h + 0] = _mm256_unpacklo_epi64(s[0], s[2]); /* column 0 | 4 */
        u[4 * h + 1] = _mm256_unpackhi_epi64(s[0], s[2]); /* column 1 | 5 */
        u[4 * h + 2] = _mm256_unpacklo_epi64(s[1], s[3]); /* column 2 | 6 */
        u[4 * h + 3] = _mm256_unpackhi_epi64(s[1], s[3]); /* column 3 | 7 */
    }
#pragma GCC unroll 8
    for (int q = 0; q < 4; q++) {
        r[q] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x20);
        r[q + 4] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x31);
    }
}

/* Decodes weight rows [0, rows) (rows <= TILE_N) of nb blocks into t[0 .. nb), row by row: for
 * a tile's last rows, and the reference the whole-tile decoders below must match. */
KERNEL_INLINE void decode_rows(const fmt32 *f, bool vnni, const char *w, size_t w_row_bytes,
                               int rows, int64_t nb, wblock *t)
{
    for (int64_t b = 0; b < nb; b++) {
        float *d = (float *)&t[b].d, *m = (float *)&t[b].m;
        __m256i r[8];
#pragma GCC unroll 8
        for (int j = 0; j < TILE_N; j++) {
            if (j < rows) {
                r[j] = decode_block(f->dt, vnni, w + (size_t)j * w_row_bytes, b, &d[j], &m[j]);
            } else {
                r[j] = _mm256_setzero_si256();
                d[j] = m[j] = 0.0f;
            }
        }
        transpose8x8(r);
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++)
            _mm256_store_si256(&t[b].g[q], r[q]);
    }
}

static inline uint32_t load_u32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline short load_i16(const char *p)
{
    short v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The scales (and mins) of 8 rows' blocks (row j's at blk + j * stride; d, then m for the affine
 * formats, first in every block) as two float vectors: one gather, one or two conversions. */
KERNEL_INLINE void tile_scales(const fmt32 *f, const char *blk, size_t stride, wblock *t)
{
    if (f->kind != K_AFFINE) {
        __m128i h = _mm_setr_epi16(load_i16(blk), load_i16(blk + stride),
                                   load_i16(blk + 2 * stride), load_i16(blk + 3 * stride),
                                   load_i16(blk + 4 * stride), load_i16(blk + 5 * stride),
                                   load_i16(blk + 6 * stride), load_i16(blk + 7 * stride));
        t->d = _mm256_cvtph_ps(h);
        t->m = _mm256_setzero_ps();
        return;
    }
    __m256i dm =
        _mm256_setr_epi32((int)load_u32(blk), (int)load_u32(blk + stride),
                          (int)load_u32(blk + 2 * stride), (int)load_u32(blk + 3 * stride),
                          (int)load_u32(blk + 4 * stride), (int)load_u32(blk + 5 * stride),
                          (int)load_u32(blk + 6 * stride), (int)load_u32(blk + 7 * stride));
    __m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(dm));       /* d0 m0 d1 m1 | d2 m2 d3 m3 */
    __m256 hi = _mm256_cvtph_ps(_mm256_extracti128_si256(dm, 1));  /* rows 4 .. 7 */
    __m256 d = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)); /* d0 d1 d4 d5 | d2 d3 d6 d7 */
    __m256 m = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    t->d = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(d), 0xD8));
    t->m = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(m), 0xD8));
}

/* The 16 code bytes (2 nibbles each) of rows j and j + 4 in one register. */
KERNEL_INLINE __m256i two_rows_qs(const char *qs, size_t stride, int j)
{
    __m128i a = _mm_loadu_si128((const __m128i *)(qs + (size_t)j * stride));
    __m128i b = _mm_loadu_si128((const __m128i *)(qs + (size_t)(j + 4) * stride));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
}

/* Q4_0 / Q4_1 codes of 8 rows' blocks: code byte 4q + i (q < 4) is the low nibble of qs byte
 * 4q + i and code byte 16 + 4q + i its high nibble, so a 4 x 4 dword transpose of the raw qs
 * (rows j and j + 4 side by side) gives qs dword q of all 8 rows, whose low nibbles are group q
 * and high nibbles group q + 4. */
KERNEL_INLINE void nibble_codes(const char *qs, size_t stride, wblock *t)
{
    __m256i r0 = two_rows_qs(qs, stride, 0), r1 = two_rows_qs(qs, stride, 1);
    __m256i r2 = two_rows_qs(qs, stride, 2), r3 = two_rows_qs(qs, stride, 3);
    __m256i t0 = _mm256_unpacklo_epi32(r0, r1), t1 = _mm256_unpackhi_epi32(r0, r1);
    __m256i t2 = _mm256_unpacklo_epi32(r2, r3), t3 = _mm256_unpackhi_epi32(r2, r3);
    __m256i c[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                    _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
    const __m256i low = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        _mm256_store_si256(&t->g[q], _mm256_and_si256(c[q], low));
        _mm256_store_si256(&t->g[q + 4], _mm256_and_si256(_mm256_srli_epi16(c[q], 4), low));
    }
}

static inline size_t block_bytes(pt_dtype dt)
{
    switch (dt) {
    case PT_Q4_0: return sizeof(pti_block_q4_0);
    case PT_Q4_1: return sizeof(pti_block_q4_1);
    case PT_Q5_0: return sizeof(pti_block_q5_0);
    case PT_Q5_1: return sizeof(pti_block_q5_1);
    default: return sizeof(pti_block_q8_0);
    }
}

/* Decodes block b of all TILE_N (8) weight rows (w: row 0) into t: the same bytes and floats as
 * decode_rows, with the scales gathered across rows and, for Q4_0 / Q4_1, the nibbles transposed
 * before they are split. Prefetches the same block of the next tile (the 8 rows that follow). */
KERNEL_INLINE void decode_tile_block(const fmt32 *f, bool vnni, const char *w, size_t w_row_bytes,
                                     int64_t b, wblock *t)
{
    const size_t bb = block_bytes(f->dt);
    const char *blk = w + (size_t)b * bb;
    for (size_t o = 0; o < TILE_N * bb; o += 64)
        _mm_prefetch(w + TILE_N * w_row_bytes + (size_t)b * TILE_N * bb + o, _MM_HINT_T0);
    tile_scales(f, blk, w_row_bytes, t);
    if (f->dt == PT_Q4_0) {
        nibble_codes(blk + offsetof(pti_block_q4_0, qs), w_row_bytes, t);
    } else if (f->dt == PT_Q4_1) {
        nibble_codes(blk + offsetof(pti_block_q4_1, qs), w_row_bytes, t);
    } else {
        __m256i r[8];
        float d, m;
#pragma GCC unroll 8
        for (int j = 0; j < TILE_N; j++)
            r[j] = decode_block(f->dt, vnni, w + (size_t)j * w_row_bytes, b, &d, &m);
        transpose8x8(r);
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++)
            _mm256_store_si256(&t->g[q], r[q]);
    }
}

/* ---- the integer block products ---------------------------------------------------------------
 */

/* acc + the 4-element lane sums of u * a (u unsigned, a signed): one vpdpbusd (EVEX-encoded
 * 256-bit, AVX512-VNNI + AVX512-VL; inline asm so this file needs no AVX-512 target flags). */
KERNEL_INLINE __m256i dpbusd(__m256i acc, __m256i u, __m256i a)
{
    __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(a));
    return acc;
}

KERNEL_INLINE __m256i lanes_us(__m256i u, __m256i a)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}

/* Start of a block's integer products: -offset * (sum of the activation block's codes), so that
 * the sum of u * a over the block lands on the exact sum of w * a. */
KERNEL_INLINE __m256i block_start(const fmt32 *f, bool vnni, int32_t asum)
{
    if (f->kind == K_AFFINE || (f->kind == K_SIGNED && !vnni))
        return _mm256_setzero_si256();
    return _mm256_set1_epi32(-asum * f->offset);
}

/* acc + u * a over one 4-byte group: lane r gets weight row r's 4 codes times the activation's
 * 4 codes (broadcast in a). AVX2 without VNNI: maddubs + madd (no saturation: |u| <= 31 or,
 * for Q8_0, the sign trick keeps |w| <= 128 against |a| <= 127). */
KERNEL_INLINE __m256i group_product(const fmt32 *f, bool vnni, __m256i acc, __m256i u, __m256i a)
{
    if (vnni)
        return dpbusd(acc, u, a);
    if (f->kind == K_SIGNED)
        return _mm256_add_epi32(acc, lanes_us(_mm256_sign_epi8(u, u), _mm256_sign_epi8(a, u)));
    return _mm256_add_epi32(acc, lanes_us(u, a));
}

/* ---- activation rows x the weight tile ----------------------------------------------------- */

typedef struct act_row {
    const int8_t *qs;
    const float *da, *sa;
    const int32_t *asum;
} act_row;

static act_row act_at(const char *act, size_t row_bytes, int64_t i, int64_t k)
{
    const char *p = act + (size_t)i * row_bytes;
    int64_t nbp = padded_blocks(k);
    act_row r = {(const int8_t *)p, (const float *)(p + nbp * PTI_QK), NULL, NULL};
    r.sa = r.da + nbp;
    r.asum = (const int32_t *)(r.sa + nbp);
    return r;
}

/* acc[r] += block b of activation rows a[0 .. R) times the 8 weight rows' block wb, lane j for
 * weight row j. R is a constant after inlining, so the R integer and R float accumulators stay
 * in registers. Every (activation row, weight row) pair goes through exactly these operations
 * in this order whatever R and whichever caller: the same bits for every M. */
KERNEL_INLINE void block_step(const fmt32 *f, bool vnni, const wblock *wb, const act_row *a, int R,
                              int64_t b, __m256 acc[TILE_M])
{
    __m256i lanes[TILE_M];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        lanes[r] = block_start(f, vnni, a[r].asum[b]);
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++) {
        __m256i u = _mm256_load_si256(&wb->g[q]);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            int32_t group;
            memcpy(&group, a[r].qs + b * PTI_QK + 4 * q, sizeof group);
            lanes[r] = group_product(f, vnni, lanes[r], u, _mm256_set1_epi32(group));
        }
    }
    __m256 dw = _mm256_load_ps((const float *)&wb->d);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        __m256 s = _mm256_mul_ps(dw, _mm256_broadcast_ss(&a[r].da[b]));
        acc[r] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(lanes[r]), acc[r]);
        if (f->kind == K_AFFINE)
            acc[r] = _mm256_fmadd_ps(_mm256_load_ps((const float *)&wb->m),
                                     _mm256_broadcast_ss(&a[r].sa[b]), acc[r]);
    }
}

/* The decoded tile t (nb blocks) times activation rows a[0 .. R): out[r] lane j = y of
 * (activation row r, weight row j). */
KERNEL_INLINE void tile32(const fmt32 *f, bool vnni, const wblock *t, const act_row *a, int R,
                          int64_t nb, __m256 out[TILE_M])
{
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        out[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++)
        block_step(f, vnni, t + b, a, R, b, out);
}

/* M = 1 on a whole tile: each block of the 8 rows decoded in registers and used at once (no
 * stores), the same operations as decode_tile_block + tile32 with one activation row. */
KERNEL_INLINE __m256 gemv_tile(const fmt32 *f, bool vnni, const char *w, size_t w_row_bytes,
                               act_row a, int64_t nb)
{
    __m256 acc[TILE_M] = {_mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        wblock wb;
        decode_tile_block(f, vnni, w, w_row_bytes, b, &wb);
        block_step(f, vnni, &wb, &a, 1, b, acc);
    }
    return acc[0];
}

/* M = 2 .. TILE_M on a whole tile, as gemv_tile: each decoded block of the 8 rows is used at
 * once by all R activation rows, in registers. Decoding the tile into t first and then running
 * the rows over it (gemm32's general path) cost 1.9x the GEMV at M = 2 and 2.6x at M = 4 on
 * gemma3's 262144 x 640 Q8_0 output matrix, which the weights' bandwidth alone does not
 * explain; this way M = 4 costs about what M = 1 does. */
KERNEL_INLINE void fused_tile(const fmt32 *f, bool vnni, const char *w, size_t w_row_bytes,
                              const act_row *a, int R, int64_t nb, __m256 acc[TILE_M])
{
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        wblock wb;
        decode_tile_block(f, vnni, w, w_row_bytes, b, &wb);
        block_step(f, vnni, &wb, a, R, b, acc);
    }
}

KERNEL_INLINE void store_tile(const __m256 out[TILE_M], int R, int rows, float *y, int64_t ldy)
{
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        if (rows == TILE_N) {
            _mm256_storeu_ps(y + r * ldy, out[r]);
        } else {
            float v[TILE_N];
            _mm256_storeu_ps(v, out[r]);
            memcpy(y + r * ldy, v, (size_t)rows * sizeof(float));
        }
    }
}

/* Activation rows [i, i + R) against the decoded tile; R a constant at each call below. */
KERNEL_INLINE void rows_x_tile(const fmt32 *f, bool vnni, const pti_qgemm32_args *g,
                               const wblock *t, int64_t i, int R, int rows, int64_t j0)
{
    act_row a[TILE_M];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        a[r] = act_at(g->act, g->act_row_bytes, i + r, g->k);
    __m256 out[TILE_M];
    tile32(f, vnni, t, a, R, g->k / PTI_QK, out);
    store_tile(out, R, rows, g->y + i * g->n + j0, g->n);
}

/* Output columns [n0, n1) of all m rows: each 8-row weight tile decoded once into t, then every
 * group of TILE_M activation rows through it. */
KERNEL_INLINE void gemm32(const fmt32 *f, bool vnni, const pti_qgemm32_args *g, int64_t n0,
                          int64_t n1, wblock *t)
{
    int64_t nb = g->k / PTI_QK;
    for (int64_t j0 = n0; j0 < n1; j0 += TILE_N) {
        int rows = n1 - j0 < TILE_N ? (int)(n1 - j0) : TILE_N;
        const char *w = g->w + (size_t)j0 * g->w_row_bytes;
        if (g->m == 1 && rows == TILE_N) {
            act_row a = act_at(g->act, g->act_row_bytes, 0, g->k);
            _mm256_storeu_ps(g->y + j0, gemv_tile(f, vnni, w, g->w_row_bytes, a, nb));
            continue;
        }
        if (g->m <= TILE_M && rows == TILE_N) {
            act_row a[TILE_M];
            for (int r = 0; r < (int)g->m; r++)
                a[r] = act_at(g->act, g->act_row_bytes, r, g->k);
            __m256 out[TILE_M];
            switch (g->m) {
            case 2: fused_tile(f, vnni, w, g->w_row_bytes, a, 2, nb, out); break;
            case 3: fused_tile(f, vnni, w, g->w_row_bytes, a, 3, nb, out); break;
            default: fused_tile(f, vnni, w, g->w_row_bytes, a, 4, nb, out); break;
            }
            store_tile(out, (int)g->m, TILE_N, g->y + j0, g->n);
            continue;
        }
        if (rows == TILE_N)
            for (int64_t b = 0; b < nb; b++)
                decode_tile_block(f, vnni, w, g->w_row_bytes, b, &t[b]);
        else
            decode_rows(f, vnni, w, g->w_row_bytes, rows, nb, t);
        int64_t i = 0;
        for (; i + TILE_M <= g->m; i += TILE_M)
            rows_x_tile(f, vnni, g, t, i, TILE_M, rows, j0);
        switch (g->m - i) {
        case 3: rows_x_tile(f, vnni, g, t, i, 3, rows, j0); break;
        case 2: rows_x_tile(f, vnni, g, t, i, 2, rows, j0); break;
        case 1: rows_x_tile(f, vnni, g, t, i, 1, rows, j0); break;
        default: break;
        }
    }
}

/* One instantiation per format and instruction set: the switch in decode_block and the kind
 * tests fold away. */
#define FMT_Q4_0 (&(const fmt32){PT_Q4_0, K_OFFSET, 8})
#define FMT_Q5_0 (&(const fmt32){PT_Q5_0, K_OFFSET, 16})
#define FMT_Q4_1 (&(const fmt32){PT_Q4_1, K_AFFINE, 0})
#define FMT_Q5_1 (&(const fmt32){PT_Q5_1, K_AFFINE, 0})
#define FMT_Q8_0 (&(const fmt32){PT_Q8_0, K_SIGNED, 128})

typedef void (*range_fn)(const pti_qgemm32_args *g, int64_t n0, int64_t n1, wblock *t);

#define RANGE_FN(name, fmt, vnni)                                                                  \
    AVX2 static void name(const pti_qgemm32_args *g, int64_t n0, int64_t n1, wblock *t)            \
    {                                                                                              \
        gemm32(fmt, vnni, g, n0, n1, t);                                                           \
    }
RANGE_FN(range_q4_0, FMT_Q4_0, false)
RANGE_FN(range_q4_0_vnni, FMT_Q4_0, true)
RANGE_FN(range_q5_0, FMT_Q5_0, false)
RANGE_FN(range_q5_0_vnni, FMT_Q5_0, true)
RANGE_FN(range_q4_1, FMT_Q4_1, false)
RANGE_FN(range_q4_1_vnni, FMT_Q4_1, true)
RANGE_FN(range_q5_1, FMT_Q5_1, false)
RANGE_FN(range_q5_1_vnni, FMT_Q5_1, true)
RANGE_FN(range_q8_0, FMT_Q8_0, false)
RANGE_FN(range_q8_0_vnni, FMT_Q8_0, true)

static range_fn pick(pt_dtype dt)
{
    bool v = pti_quant_vnni_ok();
    switch (dt) {
    case PT_Q4_0: return v ? range_q4_0_vnni : range_q4_0;
    case PT_Q5_0: return v ? range_q5_0_vnni : range_q5_0;
    case PT_Q4_1: return v ? range_q4_1_vnni : range_q4_1;
    case PT_Q5_1: return v ? range_q5_1_vnni : range_q5_1;
    case PT_Q8_0: return v ? range_q8_0_vnni : range_q8_0;
    default: return NULL;
    }
}

bool pti_qgemm32_supported(pt_dtype dt)
{
    return pti_quant_avx2_ok() && pick(dt) != NULL;
}

pt_status pti_qgemm32_range(const pti_qgemm32_args *g, int64_t n0, int64_t n1)
{
    range_fn fn = pick(g->dt);
    if (!fn)
        return pti_error(PT_ERR_UNSUPPORTED, "quant_linear: no tiled kernel for %s",
                         pt_dtype_name(g->dt));
    /* the decoded 8-row tile: 320 bytes a block, 15 KB at k = 1536 (L1) */
    size_t bytes = (size_t)(g->k / PTI_QK) * sizeof(wblock);
    wblock *t = pti_cpu_alloc(bytes ? bytes : 1);
    if (!t)
        return pti_error(PT_ERR_OOM, "quant_linear: out of memory for a weight tile");
    fn(g, n0, n1, t);
    pti_cpu_free(t, bytes ? bytes : 1);
    return PT_OK;
}

#else /* not x86 */

bool pti_quant_vnni_ok(void)
{
    return false;
}

bool pti_qgemm32_supported(pt_dtype dt)
{
    (void)dt;
    return false;
}
size_t pti_qgemm32_act_row_bytes(int64_t k)
{
    (void)k;
    return 0;
}
void pti_qgemm32_pack_act(const float *x, void *dst, int64_t k)
{
    (void)x;
    (void)dst;
    (void)k;
}
pt_status pti_qgemm32_range(const pti_qgemm32_args *g, int64_t n0, int64_t n1)
{
    (void)g;
    (void)n0;
    (void)n1;
    return pti_error(PT_ERR_UNSUPPORTED, "quant_linear: no tiled kernel on this CPU");
}

#endif
