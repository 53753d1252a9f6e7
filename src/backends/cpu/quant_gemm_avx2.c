/* AVX2 (and AVX512-VNNI where the CPU has it) matrix products of the 32-value block formats --
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 -- with Q8_0-quantized activations: y[M, N] = x[M, K] W[N, K]^T,
 * for every M (M = 1 is the decode GEMV, M > 1 prefill).
 *
 * Design. The activation rows are quantized once (pti_quantize_row_q8_0, so the int8 values
 * and scales are llama.cpp's) into a kernel-friendly row layout (act32 below): the int8 codes
 * of all blocks back to back, 32-byte aligned, then each block's scale as a float, then the
 * scale times the block's code sum (for the formats with a min). For M > 1 the weight rows are
 * taken TILE_N (4) at a time and decoded ONCE into unsigned int8 codes u (w = u - offset) and
 * float scales in an L1-sized buffer; then every group of up to TILE_M (2) activation rows
 * runs through a register tile of 4 x 2 accumulators, so each decoded weight block serves all
 * M rows and each activation block loaded serves 4 weight rows. M = 1 decodes in registers
 * and skips the buffer.
 *
 * The block product of weight row j and activation row i gives 8 int32 lanes, lane l holding
 * the exact sum of w * a over elements 4l .. 4l+3 -- computed as maddubs + madd (AVX2) or one
 * vpdpbusd (VNNI), minus offset * (sum of a) over the same 4 elements, so both give the same
 * integers. Then, per block, acc = fma(d_w * d_a, float(lanes), acc) in 8 float lanes, and at
 * the end y = hsum(acc (+ the min term)). Every (i, j) pair sees exactly these operations in
 * this order whatever M, the tile position or the instruction set, so a row's result is the
 * same bits for any M (the engine's batched prefill equals token-by-token decode).
 *
 * The min term of Q4_1 / Q5_1 (y = d * q + m): sum over blocks of m_w * s_a, with s_a llama.cpp's
 * Q8_1 block sum (float16 of d * sum(a), d unrounded), an
 * 8-lane float dot over the blocks (zero-padded to a multiple of 8), added before the final
 * horizontal sum. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "quant_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "quant_simd.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define KERNEL_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

/* weight rows decoded together (a tile's width), activation rows per register tile */
#define TILE_N PTI_QGEMM32_TILE_N
#define TILE_M 2
/* weight rows the GEMV interleaves: 1 -- two interleaved row streams measured up to 3x slower
 * (and erratic) on the shared test machine, where one stream stays at cache speed */
#define GEMV_ROWS 1

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
    /* codes, then float scales, then float scale * code sums */
    return (size_t)padded_blocks(k) * (PTI_QK + 2 * sizeof(float));
}

void pti_qgemm32_pack_act(const float *x, void *dst, int64_t k)
{
    int64_t nb = k / PTI_QK, nbp = padded_blocks(k);
    int8_t *qs = dst;
    float *da = (float *)(qs + nbp * PTI_QK), *sa = da + nbp;
    for (int64_t b = 0; b < nb; b++) {
        pti_block_q8_0 blk;
        pti_quantize_row_q8_0(x + b * PTI_QK, &blk, PTI_QK);
        memcpy(qs + b * PTI_QK, blk.qs, PTI_QK);
        int s = 0;
        float amax = 0.0f;
        for (int j = 0; j < PTI_QK; j++) {
            s += blk.qs[j];
            amax = fmaxf(amax, fabsf(x[b * PTI_QK + j]));
        }
        da[b] = pti_h2f(blk.d);
        /* llama.cpp's Q8_1 sum: float16(d * sum) with d = amax / 127 before rounding */
        sa[b] = pti_h2f(pt_float_to_half(amax / 127.0f * (float)s));
    }
    for (int64_t b = nb; b < nbp; b++) {
        memset(qs + b * PTI_QK, 0, PTI_QK);
        da[b] = sa[b] = 0.0f;
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

/* ---- the integer block product ------------------------------------------------------------ */

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

/* What an activation block contributes to every weight row's product: for the offset
 * formats, offset * (its 4-element lane sums) -- subtracted (AVX2) or the negated start of
 * the accumulation (VNNI). */
KERNEL_INLINE __m256i act_prep(const fmt32 *f, bool vnni, __m256i a)
{
    if (f->kind == K_AFFINE || (f->kind == K_SIGNED && !vnni))
        return _mm256_setzero_si256();
    __m256i off = _mm256_set1_epi8((char)f->offset);
    if (vnni)
        return _mm256_sub_epi32(_mm256_setzero_si256(), dpbusd(_mm256_setzero_si256(), off, a));
    return lanes_us(off, a);
}

/* The 8 exact int32 lane sums of w * a for one block pair. */
KERNEL_INLINE __m256i block_lanes(const fmt32 *f, bool vnni, __m256i u, __m256i a, __m256i prep)
{
    if (vnni)
        return dpbusd(prep, u, a);
    switch (f->kind) {
    case K_OFFSET: return _mm256_sub_epi32(lanes_us(u, a), prep);
    case K_AFFINE: return lanes_us(u, a);
    default: return lanes_us(_mm256_sign_epi8(u, u), _mm256_sign_epi8(a, u));
    }
}

AVX2 static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- M = 1: the GEMV, decoding in registers ------------------------------------------------ */

typedef struct act_row {
    const int8_t *qs;
    const float *da, *sa;
} act_row;

static act_row act_at(const char *act, size_t row_bytes, int64_t i, int64_t k)
{
    const char *p = act + (size_t)i * row_bytes;
    int64_t nbp = padded_blocks(k);
    act_row r = {(const int8_t *)p, (const float *)(p + nbp * PTI_QK), NULL};
    r.sa = r.da + nbp;
    return r;
}

/* y[j] for `rows` weight rows from j0 and one activation row; the same per-pair operations as
 * the tiled kernel below. */
KERNEL_INLINE void gemv_rows(const fmt32 *f, bool vnni, const char *w, size_t w_row_bytes,
                             act_row a, int64_t k, int64_t j0, int rows, float *y)
{
    int64_t nb = k / PTI_QK, nbp = padded_blocks(k);
    {
        __m256 acc[TILE_N], accm[TILE_N];
        for (int j = 0; j < TILE_N; j++)
            acc[j] = accm[j] = _mm256_setzero_ps();
        /* 8 blocks at a time: the mins of the affine formats are collected on the way for the
         * min-term dot, which goes 8 blocks at a time */
        for (int64_t c = 0; c < nbp; c += 8) {
            /* unrolled, so the mins stay in registers (a stack array read back as a vector
             * would stall on store forwarding) */
            float mw[TILE_N][8];
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                int64_t b = c + t;
                if (b >= nb) {
                    for (int j = 0; j < rows; j++)
                        mw[j][t] = 0.0f;
                    continue;
                }
                __m256i av = _mm256_load_si256((const __m256i *)(a.qs + b * PTI_QK));
                __m256i prep = act_prep(f, vnni, av);
                for (int j = 0; j < rows; j++) {
                    float d;
                    __m256i u = decode_block(f->dt, vnni, w + (size_t)(j0 + j) * w_row_bytes, b, &d,
                                             &mw[j][t]);
                    __m256i l = block_lanes(f, vnni, u, av, prep);
                    acc[j] =
                        _mm256_fmadd_ps(_mm256_set1_ps(d * a.da[b]), _mm256_cvtepi32_ps(l), acc[j]);
                }
            }
            if (f->kind == K_AFFINE)
                for (int j = 0; j < rows; j++)
                    accm[j] =
                        _mm256_fmadd_ps(_mm256_setr_ps(mw[j][0], mw[j][1], mw[j][2], mw[j][3],
                                                       mw[j][4], mw[j][5], mw[j][6], mw[j][7]),
                                        _mm256_loadu_ps(a.sa + c), accm[j]);
        }
        if (f->kind == K_AFFINE)
            for (int j = 0; j < rows; j++)
                acc[j] = _mm256_add_ps(acc[j], accm[j]);
        for (int j = 0; j < rows; j++)
            y[j0 + j] = hsum8(acc[j]);
    }
}

/* rows is a constant in each call, so the accumulators stay in registers */
KERNEL_INLINE void gemv32(const fmt32 *f, bool vnni, const char *w, size_t w_row_bytes, act_row a,
                          int64_t k, int64_t n0, int64_t n1, float *y)
{
    /* Q8_0 one row at a time: the sign trick (4 operations) beats VNNI's offset correction
     * (5, not shared by other weight rows here); both give the same lanes */
    if (f->kind == K_SIGNED)
        vnni = false;
    int64_t j = n0;
    for (; j + GEMV_ROWS <= n1; j += GEMV_ROWS)
        gemv_rows(f, vnni, w, w_row_bytes, a, k, j, GEMV_ROWS, y);
    for (; j < n1; j++)
        gemv_rows(f, vnni, w, w_row_bytes, a, k, j, 1, y);
}

/* ---- M > 1: decoded weight tiles x register tiles of activation rows ---------------------- */

/* TILE_N decoded weight rows: codes [TILE_N][nbp * 32], scales and mins [TILE_N][nbp]. */
typedef struct wtile {
    int8_t *codes;
    float *d, *m;
    int64_t nbp;
} wtile;

KERNEL_INLINE void decode_tile(const fmt32 *f, bool vnni, const char *w, size_t w_row_bytes,
                               int rows, int64_t k, wtile *t)
{
    int64_t nb = k / PTI_QK;
    for (int j = 0; j < TILE_N; j++) {
        int8_t *c = t->codes + j * t->nbp * PTI_QK;
        float *d = t->d + j * t->nbp, *m = t->m + j * t->nbp;
        int64_t b = 0;
        if (j < rows)
            for (; b < nb; b++)
                _mm256_store_si256(
                    (__m256i *)(c + b * PTI_QK),
                    decode_block(f->dt, vnni, w + (size_t)j * w_row_bytes, b, &d[b], &m[b]));
        for (; b < t->nbp; b++) {
            memset(c + b * PTI_QK, 0, PTI_QK);
            d[b] = m[b] = 0.0f;
        }
    }
}

/* acc[r][j] over all blocks for activation rows a[0 .. R) and the tile's TILE_N weight rows;
 * out[r][j] = the results. R is a constant after inlining, so the accumulators stay in
 * registers (TILE_N * TILE_M of the 16). */
KERNEL_INLINE void tile32(const fmt32 *f, bool vnni, const wtile *t, const act_row *a, int R,
                          int64_t k, float out[TILE_M][TILE_N])
{
    int64_t nb = k / PTI_QK;
    __m256 acc[TILE_M][TILE_N];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < TILE_N; j++)
            acc[r][j] = _mm256_setzero_ps();
    const int8_t *codes = t->codes;
    const float *dw = t->d;
    const int64_t cstride = t->nbp * PTI_QK, dstride = t->nbp;
    for (int64_t b = 0; b < nb; b++, codes += PTI_QK, dw++) {
        for (int r = 0; r < R; r++) {
            __m256i av = _mm256_load_si256((const __m256i *)(a[r].qs + b * PTI_QK));
            __m256i prep = act_prep(f, vnni, av);
            __m256 da = _mm256_broadcast_ss(&a[r].da[b]);
            for (int j = 0; j < TILE_N; j++) {
                __m256i u = _mm256_load_si256((const __m256i *)(codes + j * cstride));
                __m256i l = block_lanes(f, vnni, u, av, prep);
                __m256 s = _mm256_mul_ps(_mm256_broadcast_ss(dw + j * dstride), da);
                acc[r][j] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(l), acc[r][j]);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        for (int j = 0; j < TILE_N; j++) {
            __m256 v = acc[r][j];
            if (f->kind == K_AFFINE) {
                __m256 accm = _mm256_setzero_ps();
                for (int64_t c = 0; c < t->nbp; c += 8)
                    accm = _mm256_fmadd_ps(_mm256_load_ps(t->m + j * t->nbp + c),
                                           _mm256_loadu_ps(a[r].sa + c), accm);
                v = _mm256_add_ps(v, accm);
            }
            out[r][j] = hsum8(v);
        }
    }
}

KERNEL_INLINE void store_tile(const float out[TILE_M][TILE_N], int R, int rows, float *y,
                              int64_t ldy)
{
    for (int r = 0; r < R; r++)
        for (int j = 0; j < rows; j++)
            y[r * ldy + j] = out[r][j];
}

/* Output columns [n0, n1) of all m rows. */
KERNEL_INLINE void gemm32(const fmt32 *f, bool vnni, const pti_qgemm32_args *g, int64_t n0,
                          int64_t n1, wtile *t)
{
    for (int64_t j0 = n0; j0 < n1; j0 += TILE_N) {
        int rows = n1 - j0 < TILE_N ? (int)(n1 - j0) : TILE_N;
        decode_tile(f, vnni, g->w + (size_t)j0 * g->w_row_bytes, g->w_row_bytes, rows, g->k, t);
        int64_t i = 0;
        for (; i + TILE_M <= g->m; i += TILE_M) {
            act_row a[TILE_M];
            for (int r = 0; r < TILE_M; r++)
                a[r] = act_at(g->act, g->act_row_bytes, i + r, g->k);
            float out[TILE_M][TILE_N];
            tile32(f, vnni, t, a, TILE_M, g->k, out);
            store_tile(out, TILE_M, rows, g->y + i * g->n + j0, g->n);
        }
        for (; i < g->m; i++) { /* the last m % TILE_M rows, one at a time */
            act_row a = act_at(g->act, g->act_row_bytes, i, g->k);
            float out[TILE_M][TILE_N];
            tile32(f, vnni, t, &a, 1, g->k, out);
            store_tile(out, 1, rows, g->y + i * g->n + j0, g->n);
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

typedef void (*range_fn)(const pti_qgemm32_args *g, int64_t n0, int64_t n1, wtile *t);

#define RANGE_FN(name, fmt, vnni)                                                                  \
    AVX2 static void name(const pti_qgemm32_args *g, int64_t n0, int64_t n1, wtile *t)             \
    {                                                                                              \
        if (g->m == 1)                                                                             \
            gemv32(fmt, vnni, g->w, g->w_row_bytes, act_at(g->act, g->act_row_bytes, 0, g->k),     \
                   g->k, n0, n1, g->y);                                                            \
        else                                                                                       \
            gemm32(fmt, vnni, g, n0, n1, t);                                                       \
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
    wtile t = {NULL, NULL, NULL, padded_blocks(g->k)};
    size_t bytes = 0;
    if (g->m > 1) {
        bytes = (size_t)(TILE_N * t.nbp) * (PTI_QK + 2 * sizeof(float));
        t.codes = pti_cpu_alloc(bytes ? bytes : 1);
        if (!t.codes)
            return pti_error(PT_ERR_OOM, "quant_linear: out of memory for a weight tile");
        t.d = (float *)(t.codes + TILE_N * t.nbp * PTI_QK);
        t.m = t.d + TILE_N * t.nbp;
    }
    fn(g, n0, n1, &t);
    if (t.codes)
        pti_cpu_free(t.codes, bytes ? bytes : 1);
    return PT_OK;
}

#else /* not x86 */

bool pti_quant_vnni_ok(void) { return false; }

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
