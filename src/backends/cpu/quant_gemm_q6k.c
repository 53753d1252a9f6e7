/* AVX-512 VNNI matrix product of Q6_K weights with Q8_K activations for M >= 2 activation rows
 * (the server's batched decode and the prefill): y[M, N] = x[M, K] W[N, K]^T, called by
 * quant_matmul.c through pti_qgemmk_range_fn.
 *
 * Design. The weight rows are taken 16 at a time (TILE_N, one int32 lane of a zmm register
 * each). Block b of the 16 rows (256 values each) is decoded ONCE into an interleaved tile in L1
 * (q6tile): 64 vectors where vector e holds the unsigned 6-bit codes q of elements 4e .. 4e+3
 * for all 16 rows (a 16 x 16 dword transpose of the rows' raw ql and qh bytes, then the nibbles
 * and the two high bits put together), the 16 sub-block scales as int32 vectors and the 16 rows'
 * d as floats. Then up to TILE_M (8) activation rows at a time run through the tile: per
 * 16-value sub-block s, four vpdpbusd of the code vectors with the activation's 4-byte groups
 * broadcast, started at -32 * bsum_s (the activation sub-block's code sum: q - 32 is the signed
 * code, and sum((q - 32) a) = sum(q a) - 32 sum(a)), give the exact integer sub-block dot of
 * each of the 16 rows; a vpmulld by the sub-block scale and an add accumulate the exact integer
 * block total. Then ONE convert and ONE acc = fma(d_a * d_w, float(total), acc) per block and
 * activation row: lane j of acc is y of weight row j; no horizontal sum. The decode is shared by
 * up to M activation rows, the per-block float work by 16 weight rows.
 *
 * The blocks are the outer loop (each decoded tile used by all M rows while it is in L1; the
 * float accumulators of the M x 16 outputs live in a scratch buffer between blocks), and each
 * block prefetches its share of the next tile. The activations come packed (q6act, written by
 * pti_qgemmk_pack_act once per product): the operands of 8 rows at constant offsets from one
 * pointer, each 4-byte group an embedded-broadcast operand of vpdpbusd.
 *
 * Bits. Every (activation row, weight row) pair computes the exact integer block total and then
 * acc = fma(d_a * d_w, float(total), acc) over the blocks in order, starting from 0: the
 * arithmetic of the per-row kernels (quant_dot_avx2.c's q6_k_rows, quant_dot.c's dot_q6_k), so a
 * row's result is the same bits whatever M, the rows it is tiled with, the tile position and the
 * thread count, and M = 1 keeps the per-row GEMV (a whole-tile decode per activation row costs
 * more than the per-row kernel there: quant_dot_avx2.c's dot_q6_k_avx512). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "cpu.h"
#include "quant_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "quant_vnni.h"

#define AVX512                                                                                     \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define K_INLINE                                                                                   \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"),          \
                   always_inline)) static inline

/* weight rows per tile (int32 lanes of a zmm), activation rows per register tile */
#define TILE_N PTI_QGEMMK_TILE_N
#define TILE_M 8
/* 16-value sub-blocks and 4-value groups of a 256-value super-block */
#define SUBS (PTI_QK_K / 16)
#define GROUPS (PTI_QK_K / 4)

_Static_assert(TILE_N == 16, "a tile is one zmm of int32 lanes");

/* Block b of the tile's 16 weight rows: g[e] the codes q (0..63) of elements 4e .. 4e+3, row j
 * in dword lane j; sc[s] the sub-block scales as int32; d the rows' d as floats. */
typedef struct q6tile {
    __m512i g[GROUPS];
    __m512i sc[SUBS];
    __m512 d;
} q6tile;

/* r[c] := dword c of every r[0 .. 16) (a 16 x 16 dword transpose). */
K_INLINE void transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* u[4G + c], 128-bit lane L: dword 4L + c of rows 4G .. 4G+3 */
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        const __m512i *s = t + 4 * g;
        u[4 * g + 0] = _mm512_unpacklo_epi64(s[0], s[2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(s[0], s[2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(s[1], s[3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(s[1], s[3]);
    }
    /* gather lane L of u[c], u[4 + c], u[8 + c], u[12 + c] into r[4L + c] */
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], _MM_SHUFFLE(2, 0, 2, 0));
        __m512i v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 1, 3, 1));
        __m512i w0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
        __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 1, 3, 1));
        r[c] = _mm512_shuffle_i32x4(v0, w0, _MM_SHUFFLE(2, 0, 2, 0));
        r[8 + c] = _mm512_shuffle_i32x4(v0, w0, _MM_SHUFFLE(3, 1, 3, 1));
        r[4 + c] = _mm512_shuffle_i32x4(v1, w1, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + c] = _mm512_shuffle_i32x4(v1, w1, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* code bytes: the 4-bit part of ql (shifted down by lo_shift) with bits 4-5 taken from qh */
K_INLINE __m512i code(__m512i ql, int ql_shift, __m512i qh_bits)
{
    __m512i lo = ql_shift ? _mm512_srli_epi32(ql, 4) : ql;
    return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi8(0x0F)),
                           _mm512_and_si512(qh_bits, _mm512_set1_epi8(0x30)));
}

/* The 16 rows' block at p[j] (block b of weight row j, already offset) decoded into t.
 *
 * Layout (formats.md, Q6_K): in half h (elements 128h .. 128h+127), ql byte 64h + l (l < 64)
 * holds in its low nibble element 128h + l and in its high nibble element 128h + 64 + l; qh byte
 * 32h + l (l < 32) holds the two high bits of elements 128h + l (bits 0-1), + 32 (2-3), + 64
 * (4-5) and + 96 (6-7). So after the transposes, ql dword i (< 16) of half h, ql dword 8 + i and
 * qh dword 8h + i give the four groups 32h + i, + 16, + 8 and + 24. */
K_INLINE void decode_tile(const char *const p[TILE_N], q6tile *t)
{
    __m512i qh[16];
#pragma GCC unroll 16
    for (int j = 0; j < TILE_N; j++)
        qh[j] = _mm512_loadu_si512(p[j] + offsetof(pti_block_q6_k, qh));
    transpose16(qh);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m512i ql[16];
#pragma GCC unroll 16
        for (int j = 0; j < TILE_N; j++)
            ql[j] = _mm512_loadu_si512(p[j] + offsetof(pti_block_q6_k, ql) + 64 * h);
        transpose16(ql);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            __m512i z = qh[8 * h + i];
            __m512i *g = t->g + 32 * h + i;
            _mm512_store_si512(&g[0], code(ql[i], 0, _mm512_slli_epi32(z, 4)));
            _mm512_store_si512(&g[8], code(ql[8 + i], 0, _mm512_slli_epi32(z, 2)));
            _mm512_store_si512(&g[16], code(ql[i], 4, z));
            _mm512_store_si512(&g[24], code(ql[8 + i], 4, _mm512_srli_epi32(z, 2)));
        }
    }
    /* scales: a[k]'s 128-bit lane L is row k + 4L's 16 scale bytes; a 4 x 4 dword transpose
     * in every lane leaves scale dword q of row j in dword j of s[q] */
    __m512i a[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        __m512i v = _mm512_castsi128_si512(
            _mm_loadu_si128((const __m128i *)(p[k] + offsetof(pti_block_q6_k, scales))));
        v = _mm512_inserti32x4(
            v, _mm_loadu_si128((const __m128i *)(p[k + 4] + offsetof(pti_block_q6_k, scales))), 1);
        v = _mm512_inserti32x4(
            v, _mm_loadu_si128((const __m128i *)(p[k + 8] + offsetof(pti_block_q6_k, scales))), 2);
        v = _mm512_inserti32x4(
            v, _mm_loadu_si128((const __m128i *)(p[k + 12] + offsetof(pti_block_q6_k, scales))), 3);
        a[k] = v;
    }
    __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]), t1 = _mm512_unpackhi_epi32(a[0], a[1]);
    __m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]), t3 = _mm512_unpackhi_epi32(a[2], a[3]);
    __m512i s[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                    _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        /* byte c of each dword, sign-extended: scale 4q + c */
        _mm512_store_si512(&t->sc[4 * q + 0], _mm512_srai_epi32(_mm512_slli_epi32(s[q], 24), 24));
        _mm512_store_si512(&t->sc[4 * q + 1], _mm512_srai_epi32(_mm512_slli_epi32(s[q], 16), 24));
        _mm512_store_si512(&t->sc[4 * q + 2], _mm512_srai_epi32(_mm512_slli_epi32(s[q], 8), 24));
        _mm512_store_si512(&t->sc[4 * q + 3], _mm512_srai_epi32(s[q], 24));
    }
    uint16_t d[TILE_N];
#pragma GCC unroll 16
    for (int j = 0; j < TILE_N; j++)
        memcpy(&d[j], p[j] + offsetof(pti_block_q6_k, d), sizeof d[j]);
    _mm512_store_ps(&t->d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)d)));
}

/* One super-block of TILE_M activation rows in the order tile_rows reads them, so that every
 * operand is at a constant offset from one pointer (with the rows' own pointers the loop ran out
 * of general registers and spent a fifth of its instructions on addresses): qs[s][q][r] the
 * 4 bytes of group q of sub-block s of row r (an embedded-broadcast operand), neg[s][r] =
 * -32 * bsum_s of row r, d[r] its scale. Rows past the last of a group are left unset and never
 * read. */
typedef struct q6act {
    int8_t qs[SUBS][4][TILE_M][4];
    int32_t neg[SUBS][TILE_M];
    float d[TILE_M];
} q6act;

_Static_assert(PTI_QGEMMK_PACK_ROWS == TILE_M, "a packed row group is one register tile");

/* acc[r] = fma(d_a * d_w, float(total), acc[r]) for activation rows r < R of the packed group
 * pa against the decoded tile t, lane j for weight row j (total: the exact integer block dot
 * product). R is a constant after inlining, so the R integer accumulators stay in registers. */
K_INLINE void tile_rows(const q6tile *t, const q6act *pa, int R, float *acc, size_t acc_stride)
{
    __m512i tot[TILE_M];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        tot[r] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int s = 0; s < SUBS; s++) {
        __m512i dot[TILE_M];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            dot[r] = _mm512_set1_epi32(pa->neg[s][r]);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            __m512i u = _mm512_load_si512(&t->g[4 * s + q]);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                dot[r] = pti_dpbusd_at(dot[r], u, pa->qs[s][q][r]);
        }
        __m512i sc = _mm512_load_si512(&t->sc[s]);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            tot[r] = _mm512_add_epi32(tot[r], _mm512_mullo_epi32(dot[r], sc));
    }
    __m512 dw = _mm512_load_ps(&t->d);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        float *o = acc + (size_t)r * acc_stride;
        __m512 s = _mm512_mul_ps(_mm512_set1_ps(pa->d[r]), dw);
        _mm512_store_ps(o, _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(tot[r]), _mm512_load_ps(o)));
    }
}

/* Activation rows [i, i + R) (a packed group) x block b of the decoded tile; R a constant at
 * each call. */
K_INLINE void rows_block(const q6tile *t, const pti_qgemmk_args *g, int64_t i, int R, int64_t b,
                         float *acc)
{
    const q6act *pa = (const q6act *)g->act_packed + (i / TILE_M) * (g->k / PTI_QK_K) + b;
    tile_rows(t, pa, R, acc + i * TILE_N, TILE_N);
}

/* Output columns [n0, n1) of all m rows: for each 16-row weight tile, each block decoded once and
 * used by every activation row; acc holds the m x 16 float sums between blocks. */
AVX512 static void gemm_q6k(const pti_qgemmk_args *g, int64_t n0, int64_t n1, q6tile *t, float *acc)
{
    int64_t nb = g->k / PTI_QK_K;
    for (int64_t j0 = n0; j0 < n1; j0 += TILE_N) {
        int rows = n1 - j0 < TILE_N ? (int)(n1 - j0) : TILE_N;
        memset(acc, 0, (size_t)g->m * TILE_N * sizeof(float));
        for (int64_t b = 0; b < nb; b++) {
            pti_prefetch_share(g->w + (size_t)(j0 + TILE_N) * g->w_row_bytes,
                               TILE_N * g->w_row_bytes, b, nb);
            /* a tile's missing rows repeat its last row (their lanes are never stored) */
            const char *p[TILE_N];
            for (int j = 0; j < TILE_N; j++)
                p[j] = g->w + (size_t)(j0 + (j < rows ? j : rows - 1)) * g->w_row_bytes +
                       (size_t)b * sizeof(pti_block_q6_k);
            decode_tile(p, t);
            int64_t i = 0;
            for (; i + TILE_M <= g->m; i += TILE_M)
                rows_block(t, g, i, TILE_M, b, acc);
            switch (g->m - i) {
            case 7: rows_block(t, g, i, 7, b, acc); break;
            case 6: rows_block(t, g, i, 6, b, acc); break;
            case 5: rows_block(t, g, i, 5, b, acc); break;
            case 4: rows_block(t, g, i, 4, b, acc); break;
            case 3: rows_block(t, g, i, 3, b, acc); break;
            case 2: rows_block(t, g, i, 2, b, acc); break;
            case 1: rows_block(t, g, i, 1, b, acc); break;
            default: break;
            }
        }
        __mmask16 keep = (__mmask16)((1u << rows) - 1u);
        for (int64_t i = 0; i < g->m; i++)
            _mm512_mask_storeu_ps(g->y + i * g->n + j0, keep, _mm512_load_ps(acc + i * TILE_N));
    }
}

static pt_status range_q6k(const pti_qgemmk_args *g, int64_t n0, int64_t n1)
{
    /* one decoded block (5 KB, L1) and the m x 16 float sums */
    size_t acc_bytes = (size_t)g->m * TILE_N * sizeof(float);
    size_t bytes = sizeof(q6tile) + acc_bytes;
    if (!g->act_packed)
        return pti_error(PT_ERR_INVALID_ARG, "quant_linear: Q6_K activations not packed");
    char *scratch = pti_cpu_alloc(bytes);
    if (!scratch)
        return pti_error(PT_ERR_OOM, "quant_linear: out of memory for a Q6_K weight tile");
    gemm_q6k(g, n0, n1, (q6tile *)scratch, (float *)(scratch + sizeof(q6tile)));
    pti_cpu_free(scratch, bytes);
    return PT_OK;
}

pti_qgemmk_fn pti_qgemm_q6k_fn(int64_t m)
{
    return m >= 2 && pti_quant_avx512_ok() ? range_q6k : NULL;
}

size_t pti_qgemmk_packed_bytes(pt_dtype dt, int64_t m, int64_t k)
{
    if (dt != PT_Q6_K || !pti_qgemm_q6k_fn(m))
        return 0;
    return (size_t)((m + TILE_M - 1) / TILE_M) * (size_t)(k / PTI_QK_K) * sizeof(q6act);
}

void pti_qgemmk_pack_act(const pti_qgemmk_args *g, int64_t g0, int64_t g1, char *packed)
{
    int64_t nb = g->k / PTI_QK_K;
    for (int64_t grp = g0; grp < g1; grp++) {
        int64_t i0 = grp * TILE_M;
        int rows = g->m - i0 < TILE_M ? (int)(g->m - i0) : TILE_M;
        for (int r = 0; r < rows; r++) {
            const pti_block_q8_k *a =
                (const pti_block_q8_k *)(g->act + (size_t)(i0 + r) * g->act_row_bytes);
            q6act *pa = (q6act *)packed + grp * nb;
            for (int64_t b = 0; b < nb; b++, pa++) {
                pa->d[r] = a[b].d;
                for (int s = 0; s < SUBS; s++) {
                    pa->neg[s][r] = -32 * a[b].bsums[s];
                    for (int q = 0; q < 4; q++)
                        memcpy(pa->qs[s][q][r], a[b].qs + 16 * s + 4 * q, 4);
                }
            }
        }
    }
}

/* ---- the Q8_K activation quantizer -------------------------------------------------------- */

/* pti_quantize_row_q8_k's block, vectorized (the prefill quantizes every row of every K-quant
 * product, ~5% of its time in scalar code): the same value of largest magnitude (the first one,
 * sign kept), the same iscale = -127 / max and products, rounded to nearest even as the scalar
 * 1.5 * 2^23 trick does (|iscale * x| <= 127 here, where both agree), the same bsums and d. */
AVX512 bool pti_quantize_block_q8_k_avx512(const float *x, pti_block_q8_k *y)
{
    __m512 v[16], m = _mm512_setzero_ps();
    __mmask16 odd = 0;
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
        v[i] = _mm512_loadu_ps(x + 16 * i);
        odd |= _mm512_fpclass_ps_mask(v[i], 0x99); /* NaN or infinite */
        m = _mm512_max_ps(m, _mm512_abs_ps(v[i]));
    }
    if (odd) /* the scalar code's NaN-skipping max and its products: left to it */
        return false;
    float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.0f) {
        memset(y, 0, sizeof *y);
        return true;
    }
    float max = 0.0f;
    for (int i = 0; i < 16; i++) {
        __mmask16 at = _mm512_cmp_ps_mask(_mm512_abs_ps(v[i]), _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (at) {
            max = x[16 * i + __builtin_ctz(at)];
            break;
        }
    }
    float iscale = -127.0f / max;
    __m512 is = _mm512_set1_ps(iscale);
    __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
        __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(is, v[i])); /* MXCSR: nearest even */
        q = _mm512_max_epi32(_mm512_min_epi32(q, hi), lo);
        _mm_storeu_si128((__m128i *)(y->qs + 16 * i), _mm512_cvtepi32_epi8(q));
        y->bsums[i] = (int16_t)_mm512_reduce_add_epi32(q);
    }
    y->d = 1.0f / iscale;
    return true;
}

#else /* not x86 */

pti_qgemmk_fn pti_qgemm_q6k_fn(int64_t m)
{
    (void)m;
    return NULL;
}

size_t pti_qgemmk_packed_bytes(pt_dtype dt, int64_t m, int64_t k)
{
    (void)dt;
    (void)m;
    (void)k;
    return 0;
}

void pti_qgemmk_pack_act(const pti_qgemmk_args *g, int64_t g0, int64_t g1, char *packed)
{
    (void)g;
    (void)g0;
    (void)g1;
    (void)packed;
}

bool pti_quantize_block_q8_k_avx512(const float *x, pti_block_q8_k *y)
{
    (void)x;
    (void)y;
    return false;
}

#endif
