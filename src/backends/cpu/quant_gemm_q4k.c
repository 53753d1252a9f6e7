/* AVX-512 VNNI matrix products of the Q4_K and Q5_K weight formats with Q8_K activations:
 * y[M, N] = x[M, K] W[N, K]^T for every M (M = 1 is the decode GEMV, M = 2 .. 16 the server's
 * batched decode, more the prefill). The per-row kernels of quant_dot_avx2.c stay the path of
 * CPUs without AVX-512 VNNI and of PT_DISABLE_AVX512=1 / PT_DISABLE_VNNI=1.
 *
 * Design. The weight rows are taken 16 at a time (TILE_N, one int32 lane of a zmm register
 * each). For every super-block (256 values, 8 sub-blocks of 32) the 16 rows are decoded into an
 * interleaved form: for sub-block j and 4-byte group g, one vector whose lane r holds codes
 * 4g .. 4g+3 of sub-block j of weight row r (an 8 x 16 dword transpose of each 32-byte qs chunk,
 * then the nibbles split), and the rows' 6-bit scales and mins unpacked for all 16 rows at once
 * with dword arithmetic. An activation row then needs no horizontal sum: vpdpbusd of a weight
 * vector with the activation's group g broadcast adds the 4 products of every row to its lane.
 *
 * Integer accumulation within a super-block (vpdpbusd / vpdpwssd with the activation's bytes as
 * an embedded broadcast). M = 1: the 4-byte-group products of a quarter (Q5_K) or half (Q4_K)
 * sub-block -- at most 8 * 31 * 127 or 16 * 15 * 127, below 2^15 -- are summed from zero, then
 * multiplied by the sub-block's 6-bit scale and added to the block sum with one vpdpwssd (the
 * scale in the low 16 bits of the dword, 0 in the high ones: the partial's int32 is its own
 * sign-extended int16), four independent chains per chunk. M > 1: a sub-block's 8 groups are
 * summed whole and scaled with one vpmulld (the activation rows give the parallelism). The min
 * term sum_j m_j * (bsums[2j] + bsums[2j+1]) is one vpdpwssd per sub-block with (m_j, m_j)
 * against the Q8_K 16-value sums broadcast in pairs. All of it exact in int32, so the grouping
 * does not change the value. Then ONE float step per super-block, activation row and 16 weight
 * rows: acc -= (dmin * d_a) * float(mins); acc += (d * d_a) * float(sum) (llama.cpp's d * sumi -
 * dmin * summs, summed in float over the super-blocks).
 *
 * M = 1 (and M = 2 .. 4, small_tile) keeps each decoded chunk in registers and uses it at once
 * (decode is bound by weight bandwidth, so nothing is stored), and prefetches the next 16 rows into
 * L2 as one sequential stream spread over the tile. M > 4 decodes the tile's super-blocks once into
 * a scratch tile (5 KB a super-block, from the allocator cache) and runs up to TILE_M (8)
 * activation rows at a time through it, so every weight byte is decoded once per M rows.
 *
 * Every (activation row, weight row) pair sees the same integer sums (exact, whatever the
 * grouping) and exactly the same float operations in the same order whatever M, the rows it is
 * tiled with, the tile's position (a tile's rows past N repeat its last row and are not stored)
 * or the thread count: a row's result is the same bits for any M (the engine's batched decode
 * equals decoding each sequence alone). */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "cpu.h"
#include "quant_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "quant_vnni.h"

#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define KINLINE                                                                                    \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"),                   \
                   always_inline)) static inline

#define TILE_N PTI_QGEMMK_TILE_N
/* activation rows per register tile (M > 1): 3 vectors each (a part, the block sum, the float
 * sum), with the weight and scale vectors that fits the 32 registers */
#define TILE_M 8
/* sub-blocks of a super-block, 4-byte groups of a sub-block */
#define NSUB 8
#define NGRP 8

/* Where a format's fields lie in its block (the two layouts differ only by Q5_K's qh). */
typedef struct kfmt {
    bool q5;
    size_t bytes;     /* block size */
    size_t qs, qh;    /* offsets of the 4-bit codes and (Q5_K) the fifth bits */
    int grp_per_part; /* 4-byte groups summed before the scale (the partial stays < 2^15) */
} kfmt;

#define FMT_Q4_K (&(const kfmt){false, sizeof(pti_block_q4_k), offsetof(pti_block_q4_k, qs), 0, 4})
#define FMT_Q5_K                                                                                   \
    (&(const kfmt){true, sizeof(pti_block_q5_k), offsetof(pti_block_q5_k, qs),                     \
                   offsetof(pti_block_q5_k, qh), 2})

/* The 16 rows' scales of one super-block: bytes j of sc[0] (j < 4) and sc[1] (j >= 4) are the
 * 6-bit scales of sub-block j in each row's dword lane, mn[] the mins alike; d and dmin as
 * floats. */
typedef struct kscales {
    __m512i sc[2], mn[2];
    __m512 d, dmin;
} kscales;

/* One super-block of the 16 rows decoded (M > 1): q[j][g] lane r = codes 4g .. 4g+3 of
 * sub-block j of row r (0 .. 15 or 0 .. 31). */
typedef struct ktile {
    __m512i q[NSUB][NGRP];
    kscales s;
} ktile;

/* ---- decoding 16 rows ---------------------------------------------------------------------- */

/* Super-block b of the tile's 16 rows. A full tile addresses row r as quad[r / 4] + (r % 4) *
 * stride (7 registers instead of 16 pointers, which spilled); a tile cut short by N lists its
 * rows, those past N repeating the last one (computed, never stored). */
typedef struct rowset {
    const char *quad[4];
    size_t stride;
    const char *p[TILE_N];
} rowset;

/* v, hidden from the optimizer: each use of the stride is then an address computed in place
 * ([quad + s], [quad + 2 s], ...), not one of 16 row pointers hoisted out of the loops */
static inline size_t opaque(size_t v)
{
    __asm__ volatile("" : "+r"(v));
    return v;
}

KINLINE const char *row_at(const rowset *rs, bool full, int r)
{
    return full ? rs->quad[r >> 2] + (size_t)(r & 3) * opaque(rs->stride) : rs->p[r];
}

KINLINE void rowset_at(const kfmt *f, bool full, const char *w, size_t w_row_bytes, int rows,
                       int64_t b, rowset *rs)
{
    const char *blk = w + (size_t)b * f->bytes;
    if (full) {
        for (int i = 0; i < 4; i++)
            rs->quad[i] = blk + (size_t)(4 * i) * w_row_bytes;
        rs->stride = w_row_bytes;
        return;
    }
    for (int r = 0; r < TILE_N; r++)
        rs->p[r] = blk + (size_t)(r < rows ? r : rows - 1) * w_row_bytes;
}

/* In each 128-bit lane, r[q] := dword q of r[0 .. 4) (a 4 x 4 dword transpose per lane). */
KINLINE void transpose4_lanes(__m512i r[4])
{
    __m512i t0 = _mm512_unpacklo_epi32(r[0], r[1]), t1 = _mm512_unpackhi_epi32(r[0], r[1]);
    __m512i t2 = _mm512_unpacklo_epi32(r[2], r[3]), t3 = _mm512_unpackhi_epi32(r[2], r[3]);
    r[0] = _mm512_unpacklo_epi64(t0, t2);
    r[1] = _mm512_unpackhi_epi64(t0, t2);
    r[2] = _mm512_unpacklo_epi64(t1, t3);
    r[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* The 32 bytes at offset off of the 16 rows (rp[r]: row r's super-block) as 8 vectors, v[q]
 * lane r = dword q of row r. Loads pair rows (i, i + 4) and (i + 8, i + 12) in the two 256-bit
 * halves so that after the per-lane transposes one 128-bit shuffle per vector puts the lanes in
 * row order. */
KINLINE void rows32(const rowset *rs, bool full, size_t off, __m512i v[8])
{
    __m512i z[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        int a = i < 4 ? i : i + 4, b = a + 4;
        __m256i lo = _mm256_loadu_si256((const __m256i *)(row_at(rs, full, a) + off));
        __m256i hi = _mm256_loadu_si256((const __m256i *)(row_at(rs, full, b) + off));
        z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    /* z[4h + q] lanes: dword q of rows A, dword q + 4 of rows A, the same of rows B, where
     * A, B = rows 0-3, 4-7 (h = 0) or 8-11, 12-15 (h = 1) */
    transpose4_lanes(z);
    transpose4_lanes(z + 4);
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        v[q] = _mm512_shuffle_i32x4(z[q], z[4 + q], 0x88);     /* lanes 0, 2 of each */
        v[q + 4] = _mm512_shuffle_i32x4(z[q], z[4 + q], 0xDD); /* lanes 1, 3 */
    }
}

/* d, dmin and the 12 scale bytes of the 16 rows' super-blocks (the first 16 bytes of a Q4_K /
 * Q5_K block), unpacked with dword arithmetic for all rows at once (pti_kquant_scales's
 * layout). */
KINLINE void decode_scales(const rowset *rs, bool full, kscales *s)
{
    __m512i h[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) { /* lane l: row i + 4 l */
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)row_at(rs, full, i)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)row_at(rs, full, i + 4)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)row_at(rs, full, i + 8)), 2);
        h[i] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)row_at(rs, full, i + 12)), 3);
    }
    transpose4_lanes(h); /* h[q] lane r = dword q of row r */
    s->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
    s->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
    const __m512i m6 = _mm512_set1_epi32(0x3f3f3f3f), m4 = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i top = _mm512_set1_epi32(0x30303030);
    /* sc_j = s[j] & 63 (j < 4), (s[j + 8] & 15) | (s[j] >> 6) << 4; the mins from s[j + 4] */
    s->sc[0] = _mm512_and_si512(h[1], m6);
    s->mn[0] = _mm512_and_si512(h[2], m6);
    s->sc[1] = _mm512_or_si512(_mm512_and_si512(h[3], m4),
                               _mm512_and_si512(_mm512_srli_epi32(h[1], 2), top));
    s->mn[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 4), m4),
                               _mm512_and_si512(_mm512_srli_epi32(h[2], 2), top));
}

/* vpshufb pattern: byte j of each dword to the low 16 bits (dup: also to the high 16) */
KINLINE __m512i byte_pattern(int j, bool dup)
{
    const __m512i base = _mm512_set_epi32(12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0);
    __m512i p = _mm512_add_epi32(base, _mm512_set1_epi32(j));
    if (dup)
        return _mm512_or_si512(_mm512_or_si512(p, _mm512_slli_epi32(p, 16)),
                               _mm512_set1_epi32((int)0x80008000u));
    return _mm512_or_si512(p, _mm512_set1_epi32((int)0x80808000u));
}

/* Scale of sub-block j in each row's lane as the int16 pair (sc, 0). */
KINLINE __m512i sub_scale(const kscales *s, int j)
{
    return _mm512_shuffle_epi8(s->sc[j >> 2], byte_pattern(j & 3, false));
}

/* Min of sub-block j in each row's lane as the int16 pair (m, m). */
KINLINE __m512i sub_min(const kscales *s, int j)
{
    return _mm512_shuffle_epi8(s->mn[j >> 2], byte_pattern(j & 3, true));
}

/* The codes of sub-blocks 2c (lo) and 2c + 1 (hi) from the transposed qs chunk c (raw) and, for
 * Q5_K, the transposed qh (bit j of each byte: the fifth bit of sub-block j's code). */
KINLINE void split_codes(const kfmt *f, int c, __m512i raw, __m512i qh, __m512i *lo, __m512i *hi)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    *lo = _mm512_and_si512(raw, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
    if (f->q5) {
        const __m512i b4 = _mm512_set1_epi8(0x10);
        int jl = 2 * c, jh = 2 * c + 1; /* bit j to bit 4: within the byte, the rest masked */
        __m512i l = jl <= 4 ? _mm512_slli_epi16(qh, (unsigned)(4 - jl))
                            : _mm512_srli_epi16(qh, (unsigned)(jl - 4));
        __m512i h = jh <= 4 ? _mm512_slli_epi16(qh, (unsigned)(4 - jh))
                            : _mm512_srli_epi16(qh, (unsigned)(jh - 4));
        /* 0xF8: a | (b & c) */
        *lo = _mm512_ternarylogic_epi32(*lo, l, b4, 0xF8);
        *hi = _mm512_ternarylogic_epi32(*hi, h, b4, 0xF8);
    }
}

/* ---- activation rows ----------------------------------------------------------------------- */

/* The min term of one activation super-block for the 16 rows: sum_j m_j (bsums[2j] +
 * bsums[2j + 1]), exact in int32. */
KINLINE __m512i min_sum(const kscales *s, const pti_block_q8_k *a)
{
    __m512i mins = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < NSUB; j++)
        mins = pti_dpwssd_at(mins, sub_min(s, j), &a->bsums[2 * j]);
    return mins;
}

/* The float step of one super-block (the same operations in every path): acc - (dmin d_a) *
 * mins + (d d_a) * sum. */
KINLINE __m512 float_step(const kscales *s, float da, __m512i mins, __m512i sum, __m512 acc)
{
    __m512 dav = _mm512_set1_ps(da);
    acc = _mm512_fnmadd_ps(_mm512_mul_ps(s->dmin, dav), _mm512_cvtepi32_ps(mins), acc);
    return _mm512_fmadd_ps(_mm512_mul_ps(s->d, dav), _mm512_cvtepi32_ps(sum), acc);
}

/* sum + scale_j * (the codes of sub-block j, q[0 .. 8) by group, times activation sub-block
 * aq): parts of grp_per_part groups, each summed from zero and then scaled by vpdpwssd. */
KINLINE __m512i sub_dot(const kfmt *f, const __m512i q[NGRP], const int8_t *aq, __m512i scale,
                        __m512i sum)
{
#pragma GCC unroll 4
    for (int p = 0; p < NGRP / f->grp_per_part; p++) {
        __m512i part = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int g = p * f->grp_per_part; g < (p + 1) * f->grp_per_part; g++)
            part = pti_dpbusd_at(part, q[g], aq + 4 * g);
        sum = _mm512_dpwssd_epi32(sum, part, scale);
    }
    return sum;
}

/* ---- M = 1 ---------------------------------------------------------------------------------- */

/* One activation row against 16 weight rows (rows valid, w: row 0), every decoded chunk used at
 * once from registers; prefetches each super-block of the next 16 rows. */
KINLINE __m512 gemv_tile(const kfmt *f, bool full, const char *w, size_t w_row_bytes, int rows,
                         const pti_block_q8_k *a, int64_t nb)
{
    __m512 acc = _mm512_setzero_ps();
    const char *next = w + TILE_N * w_row_bytes;
    /* cache lines of the next tile to prefetch per super-block, a quarter per qs chunk */
    const size_t pf_lines = (TILE_N * w_row_bytes / (size_t)nb + 63) / 64;
    for (int64_t b = 0; b < nb; b++) {
        rowset rs;
        rowset_at(f, full, w, w_row_bytes, rows, b, &rs);
        kscales s;
        decode_scales(&rs, full, &s);
        __m512i qh[8];
        if (f->q5)
            rows32(&rs, full, f->qh, qh);
        __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m512i raw[8];
            /* the next tile in address order, a 1 / nb share per super-block spread over its
             * chunks, into L2: one sequential stream (per-row prefetches of the 16 interleaved
             * rows, prefetching into L1, or all of a super-block's at once measured slower) */
            for (size_t l = ((size_t)b * 4 + (size_t)c) * pf_lines / 4;
                 l < ((size_t)b * 4 + (size_t)c + 1) * pf_lines / 4; l++)
                _mm_prefetch(next + 64 * l, _MM_HINT_T1);
            rows32(&rs, full, f->qs + 32 * (size_t)c, raw);
            const int8_t *alo = a[b].qs + 64 * c, *ahi = alo + 32;
            /* each group's codes split and used at once (all 16 split vectors live spilled) */
#pragma GCC unroll 4
            for (int p = 0; p < NGRP / f->grp_per_part; p++) {
                __m512i plo = _mm512_setzero_si512(), phi = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int g = p * f->grp_per_part; g < (p + 1) * f->grp_per_part; g++) {
                    __m512i lo, hi;
                    split_codes(f, c, raw[g], f->q5 ? qh[g] : raw[g], &lo, &hi);
                    plo = pti_dpbusd_at(plo, lo, alo + 4 * g);
                    phi = pti_dpbusd_at(phi, hi, ahi + 4 * g);
                }
                sum[0] = _mm512_dpwssd_epi32(sum[0], plo, sub_scale(&s, 2 * c));
                sum[1] = _mm512_dpwssd_epi32(sum[1], phi, sub_scale(&s, 2 * c + 1));
            }
        }
        __m512i mins = min_sum(&s, &a[b]);
        acc = float_step(&s, a[b].d, mins, _mm512_add_epi32(sum[0], sum[1]), acc);
    }
    return acc;
}

/* ---- M = 2 .. 4 ----------------------------------------------------------------------------- */

/* R (2 .. SMALL_M_MAX, a constant after inlining) activation rows against 16 weight rows, the
 * decoded chunks used at once from registers as in gemv_tile (the server's batched decode: the
 * weights stream from memory, and a decoded tile stored and read back for a few rows cost 1.7x
 * a GEMV on a matrix larger than the caches). One integer sum per row (the rows give the ILP);
 * the same exact integers and the same float step, so the same bits as gemv_tile and
 * rows_x_tile. */
#define SMALL_M_MAX 4
KINLINE void small_tile(const kfmt *f, bool full, const char *w, size_t w_row_bytes, int rows,
                        const pti_block_q8_k *const a[SMALL_M_MAX], int R, int64_t nb,
                        __m512 acc[SMALL_M_MAX])
{
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        pti_prefetch_share(w + TILE_N * w_row_bytes, TILE_N * w_row_bytes, b, nb);
        rowset rs;
        rowset_at(f, full, w, w_row_bytes, rows, b, &rs);
        kscales s;
        decode_scales(&rs, full, &s);
        __m512i qh[8];
        if (f->q5)
            rows32(&rs, full, f->qh, qh);
        __m512i sum[SMALL_M_MAX];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            sum[r] = _mm512_setzero_si512();
#pragma GCC unroll 1
        for (int c = 0; c < 4; c++) {
            __m512i raw[8];
            rows32(&rs, full, f->qs + 32 * (size_t)c, raw);
            __m512i slo = sub_scale(&s, 2 * c), shi = sub_scale(&s, 2 * c + 1);
#pragma GCC unroll 4
            for (int p = 0; p < NGRP / f->grp_per_part; p++) {
                __m512i plo[SMALL_M_MAX], phi[SMALL_M_MAX];
#pragma GCC unroll 4
                for (int r = 0; r < R; r++)
                    plo[r] = phi[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int g = p * f->grp_per_part; g < (p + 1) * f->grp_per_part; g++) {
                    __m512i lo, hi;
                    split_codes(f, c, raw[g], f->q5 ? qh[g] : raw[g], &lo, &hi);
#pragma GCC unroll 4
                    for (int r = 0; r < R; r++) {
                        const int8_t *alo = a[r][b].qs + 64 * c;
                        plo[r] = pti_dpbusd_at(plo[r], lo, alo + 4 * g);
                        phi[r] = pti_dpbusd_at(phi[r], hi, alo + 32 + 4 * g);
                    }
                }
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    sum[r] = _mm512_dpwssd_epi32(sum[r], plo[r], slo);
                    sum[r] = _mm512_dpwssd_epi32(sum[r], phi[r], shi);
                }
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            acc[r] = float_step(&s, a[r][b].d, min_sum(&s, &a[r][b]), sum[r], acc[r]);
    }
}

/* ---- M > 1 ---------------------------------------------------------------------------------- */

/* Decodes every super-block of the tile's rows into t[0 .. nb), prefetching the next tile. */
KINLINE void decode_tile(const kfmt *f, bool full, const char *w, size_t w_row_bytes, int rows,
                         int64_t nb, ktile *t)
{
    for (int64_t b = 0; b < nb; b++) {
        pti_prefetch_share(w + TILE_N * w_row_bytes, TILE_N * w_row_bytes, b, nb);
        rowset rs;
        rowset_at(f, full, w, w_row_bytes, rows, b, &rs);
        decode_scales(&rs, full, &t[b].s);
        __m512i qh[8];
        if (f->q5)
            rows32(&rs, full, f->qh, qh);
        for (int c = 0; c < 4; c++) {
            __m512i raw[8];
            rows32(&rs, full, f->qs + 32 * (size_t)c, raw);
#pragma GCC unroll 8
            for (int g = 0; g < NGRP; g++)
                split_codes(f, c, raw[g], f->q5 ? qh[g] : raw[g], &t[b].q[2 * c][g],
                            &t[b].q[2 * c + 1][g]);
        }
    }
}

/* Activation rows a[0 .. R) against the decoded tile t (nb super-blocks): out[r] lane j = y of
 * (activation row r, weight row j). R is a constant after inlining. */
KINLINE void rows_x_tile(const kfmt *f, const ktile *t, const pti_block_q8_k *const a[TILE_M],
                         int R, int64_t nb, __m512 out[TILE_M])
{
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        out[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const ktile *tb = &t[b];
        __m512i sum[TILE_M];
        /* the min terms first (each sub-block's mins unpacked once for the R rows) */
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            sum[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < NSUB; j++) {
            __m512i mn = sub_min(&tb->s, j);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                sum[r] = pti_dpwssd_at(sum[r], mn, &a[r][b].bsums[2 * j]);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            out[r] = _mm512_fnmadd_ps(_mm512_mul_ps(tb->s.dmin, _mm512_set1_ps(a[r][b].d)),
                                      _mm512_cvtepi32_ps(sum[r]), out[r]);
            sum[r] = _mm512_setzero_si512();
        }
#pragma GCC unroll 8
        for (int j = 0; j < NSUB; j++) {
            __m512i scale = sub_scale(&tb->s, j);
            /* the whole sub-block's products, then one vpmulld by its scale (one multiply per
             * sub-block instead of a vpdpwssd per part: the rows give the ILP here) */
            __m512i part[TILE_M];
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                part[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int g = 0; g < NGRP; g++) {
                __m512i u = _mm512_load_si512(&tb->q[j][g]);
#pragma GCC unroll 8
                for (int r = 0; r < R; r++)
                    part[r] = pti_dpbusd_at(part[r], u, a[r][b].qs + 32 * j + 4 * g);
            }
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                sum[r] = _mm512_add_epi32(sum[r], _mm512_mullo_epi32(part[r], scale));
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            out[r] = _mm512_fmadd_ps(_mm512_mul_ps(tb->s.d, _mm512_set1_ps(a[r][b].d)),
                                     _mm512_cvtepi32_ps(sum[r]), out[r]);
    }
}

KINLINE void store_rows(float *y, int rows, __m512 v)
{
    _mm512_mask_storeu_ps(y, (__mmask16)((1u << rows) - 1u), v);
}

/* Activation rows [i, i + R) against the decoded tile of weight rows [j0, j0 + rows). */
KINLINE void rows_at(const kfmt *f, const pti_qgemmk_args *g, const ktile *t, int64_t i, int R,
                     int rows, int64_t j0)
{
    const pti_block_q8_k *a[TILE_M];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        a[r] = (const pti_block_q8_k *)(g->act + (size_t)(i + r) * g->act_row_bytes);
    __m512 out[TILE_M];
    rows_x_tile(f, t, a, R, g->k / PTI_QK_K, out);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        store_rows(g->y + (i + r) * g->n + j0, rows, out[r]);
}

/* Weight rows [j0, j0 + rows) (at w) of all g->m (2 .. SMALL_M_MAX) rows through small_tile. */
KINLINE void small_rows(const kfmt *f, const pti_qgemmk_args *g, const char *w, int rows,
                        int64_t j0, int64_t nb)
{
    const pti_block_q8_k *a[SMALL_M_MAX];
    int R = (int)g->m;
    for (int r = 0; r < R; r++)
        a[r] = (const pti_block_q8_k *)(g->act + (size_t)r * g->act_row_bytes);
    __m512 out[SMALL_M_MAX];
    bool full = rows == TILE_N;
    switch (R) {
    case 2:
        full ? small_tile(f, true, w, g->w_row_bytes, rows, a, 2, nb, out)
             : small_tile(f, false, w, g->w_row_bytes, rows, a, 2, nb, out);
        break;
    case 3:
        full ? small_tile(f, true, w, g->w_row_bytes, rows, a, 3, nb, out)
             : small_tile(f, false, w, g->w_row_bytes, rows, a, 3, nb, out);
        break;
    default:
        full ? small_tile(f, true, w, g->w_row_bytes, rows, a, 4, nb, out)
             : small_tile(f, false, w, g->w_row_bytes, rows, a, 4, nb, out);
        break;
    }
    for (int r = 0; r < R; r++)
        store_rows(g->y + r * g->n + j0, rows, out[r]);
}

/* Output columns [n0, n1) of all m rows. */
KINLINE void gemm_k(const kfmt *f, const pti_qgemmk_args *g, int64_t n0, int64_t n1, ktile *t)
{
    int64_t nb = g->k / PTI_QK_K;
    for (int64_t j0 = n0; j0 < n1; j0 += TILE_N) {
        int rows = n1 - j0 < TILE_N ? (int)(n1 - j0) : TILE_N;
        const char *w = g->w + (size_t)j0 * g->w_row_bytes;
        if (g->m == 1) {
            const pti_block_q8_k *a = (const pti_block_q8_k *)g->act;
            __m512 v = rows == TILE_N ? gemv_tile(f, true, w, g->w_row_bytes, rows, a, nb)
                                      : gemv_tile(f, false, w, g->w_row_bytes, rows, a, nb);
            store_rows(g->y + j0, rows, v);
            continue;
        }
        if (g->m <= SMALL_M_MAX) {
            small_rows(f, g, w, rows, j0, nb);
            continue;
        }
        if (rows == TILE_N)
            decode_tile(f, true, w, g->w_row_bytes, rows, nb, t);
        else
            decode_tile(f, false, w, g->w_row_bytes, rows, nb, t);
        int64_t i = 0;
        for (; i + TILE_M <= g->m; i += TILE_M)
            rows_at(f, g, t, i, TILE_M, rows, j0);
        switch (g->m - i) {
        case 7: rows_at(f, g, t, i, 7, rows, j0); break;
        case 6: rows_at(f, g, t, i, 6, rows, j0); break;
        case 5: rows_at(f, g, t, i, 5, rows, j0); break;
        case 4: rows_at(f, g, t, i, 4, rows, j0); break;
        case 3: rows_at(f, g, t, i, 3, rows, j0); break;
        case 2: rows_at(f, g, t, i, 2, rows, j0); break;
        case 1: rows_at(f, g, t, i, 1, rows, j0); break;
        default: break;
        }
    }
}

AVX512 static void gemm_q4_k(const pti_qgemmk_args *g, int64_t n0, int64_t n1, ktile *t)
{
    gemm_k(FMT_Q4_K, g, n0, n1, t);
}

AVX512 static void gemm_q5_k(const pti_qgemmk_args *g, int64_t n0, int64_t n1, ktile *t)
{
    gemm_k(FMT_Q5_K, g, n0, n1, t);
}

/* y[:, n0:n1] for Q4_K / Q5_K weights; the decoded tile (M > 1: 5 KB a super-block, 40 KB at
 * k = 2048) comes from the allocator cache. */
static pt_status range_k(const pti_qgemmk_args *g, int64_t n0, int64_t n1, bool q5)
{
    if (g->m <= 0)
        return PT_OK;
    ktile *t = NULL;
    size_t bytes = (size_t)(g->k / PTI_QK_K) * sizeof(ktile);
    if (g->m > SMALL_M_MAX && bytes) {
        t = pti_cpu_alloc(bytes);
        if (!t)
            return pti_error(PT_ERR_OOM, "quant_linear: out of memory for a weight tile");
    }
    if (q5)
        gemm_q5_k(g, n0, n1, t);
    else
        gemm_q4_k(g, n0, n1, t);
    if (t)
        pti_cpu_free(t, bytes);
    return PT_OK;
}

static pt_status range_q4_k(const pti_qgemmk_args *g, int64_t n0, int64_t n1)
{
    return range_k(g, n0, n1, false);
}

static pt_status range_q5_k(const pti_qgemmk_args *g, int64_t n0, int64_t n1)
{
    return range_k(g, n0, n1, true);
}

pti_qgemmk_fn pti_qgemm_q4k_fn(pt_dtype dt)
{
    if (!pti_quant_avx512_ok())
        return NULL;
    switch (dt) {
    case PT_Q4_K: return range_q4_k;
    case PT_Q5_K: return range_q5_k;
    default: return NULL;
    }
}

#else /* not x86 */

pti_qgemmk_fn pti_qgemm_q4k_fn(pt_dtype dt)
{
    (void)dt;
    return NULL;
}

#endif
