/* Private to the quantized dot products (quant_dot.c, quant_dot_avx2.c) and the quantized
 * matmul kernel (quant_matmul.c): the row dot-product function type, the AVX2 variants and a
 * branch-light binary16 -> float conversion for the per-block scales. */
#ifndef PT_CPU_QUANT_DOT_H
#define PT_CPU_QUANT_DOT_H

#include <string.h>

#include "quant.h"

/* Dot product of one weight row of n elements with one activation row (already in
 * pti_quant_act_dtype(weight dtype)); n is a whole number of blocks. */
typedef float (*pti_qdot_fn)(const void *w_row, const void *act, int64_t n);

/* The dot-product kernel for dt (AVX2 when available, else scalar); NULL for a dtype without
 * one. */
pti_qdot_fn pti_quant_dot_fn(pt_dtype dt);

/* Activation rows a multi-row kernel takes at once. */
#define PTI_QDOT_ROWS 4

/* out[r] = the dot product of one weight row with activation row r (at act + r * act_stride
 * bytes), r < PTI_QDOT_ROWS: each weight block is decoded once for all the rows. out[r] is
 * bit-identical to the pti_qdot_fn result for that row. */
typedef void (*pti_qdot_rows_fn)(const void *w_row, const void *act, size_t act_stride, int64_t n,
                                 float *out);

/* The multi-row kernel for dt, or NULL (then callers use pti_quant_dot_fn row by row). */
pti_qdot_rows_fn pti_quant_dot_rows_fn(pt_dtype dt);

/* Activation rows of the wide kernels (pti_quant_dot_rows_wide_fn): the same contract as
 * pti_qdot_rows_fn with PTI_QDOT_ROWS_WIDE rows (out[r] bit-identical to pti_qdot_fn's). */
#define PTI_QDOT_ROWS_WIDE 8

/* The wide kernel for dt (Q4_K, Q5_K, Q6_K on an AVX-512 VNNI CPU, pti_quant_avx512_ok), or
 * NULL. Prefill runs 8 activation rows per weight-row decode with it: the 8 rows' accumulators
 * need AVX-512's 32 vector registers. */
pti_qdot_rows_fn pti_quant_dot_rows_wide_fn(pt_dtype dt);
/* AVX512F/BW/VL/VNNI usable (pti_quant_vnni_ok, and PT_DISABLE_AVX512 not set). */
bool pti_quant_avx512_ok(void);

/* AVX2+FMA+F16C variants (quant_dot_avx2.c); only called when pti_quant_avx2_ok(). NULL
 * from pti_quant_dot_avx2_fn for the dtypes that only have the scalar path. */
bool pti_quant_avx2_ok(void);
pti_qdot_fn pti_quant_dot_avx2_fn(pt_dtype dt);
pti_qdot_rows_fn pti_quant_dot_rows_avx2_fn(pt_dtype dt);
/* AVX512-VNNI + AVX512-VL usable (and PT_DISABLE_VNNI not set): the kernels then use
 * vpdpbusd / vpdpwssd on 256-bit registers; the integer results, hence the bits, are the
 * same either way. */
bool pti_quant_vnni_ok(void);

/* ---- tiled products of the 32-value formats (quant_gemm_avx2.c) ---------------------------- */

/* True where the tiled AVX2 kernel handles weight dtype dt (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 on an
 * AVX2 CPU). Its activation rows are in its own layout (pti_qgemm32_pack_act). */
bool pti_qgemm32_supported(pt_dtype dt);
/* Bytes of one packed activation row of k values (k a multiple of 32). */
size_t pti_qgemm32_act_row_bytes(int64_t k);
/* Quantizes x[k] to Q8_0 (pti_quantize_row_q8_0's values, bit for bit) into the packed row
 * layout. Uses AVX2: call only where pti_qgemm32_supported holds. */
void pti_qgemm32_pack_act(const float *x, void *dst, int64_t k);

typedef struct pti_qgemm32_args {
    pt_dtype dt;
    const char *w; /* weight row 0, [n] rows of w_row_bytes */
    size_t w_row_bytes;
    const char *act; /* m packed activation rows of act_row_bytes */
    size_t act_row_bytes;
    float *y; /* [m, n] */
    int64_t m, n, k;
} pti_qgemm32_args;

/* Weight rows the tiled kernel decodes together: ranges of N that start at a multiple of it
 * waste no work. */
#define PTI_QGEMM32_TILE_N 8

/* y[:, n0:n1] = act @ w[n0:n1]^T (no bias). A row's result is the same bits for every m. */
pt_status pti_qgemm32_range(const pti_qgemm32_args *g, int64_t n0, int64_t n1);

/* ---- tiled products of the K-quants (quant_gemm_q4k.c: Q4_K, Q5_K; quant_gemm_q6k.c: Q6_K) -- */

/* Weight rows the tiled K-quant kernels decode together (one int32 lane of a zmm each): ranges
 * of N that start at a multiple of it waste no work. */
#define PTI_QGEMMK_TILE_N 16

/* Arguments of a tiled K-quant kernel: activations in Q8_K rows (pti_quantize_row_q8_k). */
typedef struct pti_qgemmk_args {
    const char *w; /* weight row 0, [n] rows of w_row_bytes */
    size_t w_row_bytes;
    const char *act; /* m Q8_K rows of act_row_bytes */
    size_t act_row_bytes;
    float *y; /* [m, n] */
    int64_t m, n, k;
    /* the activations in the kernel's own layout (pti_qgemmk_pack_act), where it has one
     * (pti_qgemmk_packed_bytes > 0); else NULL */
    const char *act_packed;
} pti_qgemmk_args;

/* y[:, n0:n1] = act @ w[n0:n1]^T (no bias); a row's result is the same bits for every m, tile
 * position and thread count. PT_ERR_OOM (set) where its scratch tile could not be had. */
typedef pt_status (*pti_qgemmk_fn)(const pti_qgemmk_args *g, int64_t n0, int64_t n1);

/* Q4_K and Q5_K on an AVX-512 VNNI CPU (pti_quant_avx512_ok), for every m; else NULL. */
pti_qgemmk_fn pti_qgemm_q4k_fn(pt_dtype dt);
/* The Q6_K kernel for m activation rows (m >= 2: its results are the per-row kernel's bits, which
 * decode keeps), or NULL where the CPU or m wants the per-row path. */
pti_qgemmk_fn pti_qgemm_q6k_fn(int64_t m);

/* The tiled K-quant kernel for weight dtype dt and m activation rows, or NULL (then
 * quant_matmul.c takes the row kernels). */
static inline pti_qgemmk_fn pti_qgemmk_range_fn(pt_dtype dt, int64_t m)
{
    switch (dt) {
    case PT_Q4_K:
    case PT_Q5_K: return pti_qgemm_q4k_fn(dt);
    case PT_Q6_K: return pti_qgemm_q6k_fn(m);
    default: return NULL;
    }
}

/* Bytes of the Q6_K kernel's activation layout for m Q8_K rows of k values (0: the kernel
 * reads the Q8_K rows as they are, as every other dtype's does). */
size_t pti_qgemmk_packed_bytes(pt_dtype dt, int64_t m, int64_t k);
/* Row groups [g0, g1) (of PTI_QGEMMK_PACK_ROWS rows) of g->act into packed, which holds
 * pti_qgemmk_packed_bytes(dt, g->m, g->k) bytes. */
#define PTI_QGEMMK_PACK_ROWS 8
void pti_qgemmk_pack_act(const pti_qgemmk_args *g, int64_t g0, int64_t g1, char *packed);

/* One block of pti_quantize_row_q8_k (the same bytes) with AVX-512: call only where
 * pti_quant_avx512_ok(). False (nothing written) for a block with a NaN or an infinity, which
 * the scalar code then takes. */
bool pti_quantize_block_q8_k_avx512(const float *x, pti_block_q8_k *y);

/* IEEE binary16 bits -> float (exact; subnormals, inf and NaN included). */
static inline float pti_h2f(pti_half h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | man << 13;
    } else if (exp != 0) {
        bits = sign | (exp + 112u) << 23 | man << 13;
    } else {
        float v = (float)man * (1.0f / 16777216.0f); /* 0 or a subnormal: man * 2^-24 */
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The eight 6-bit scales and mins of a Q4_K / Q5_K super-block (formats.md 2.3). */
static inline void pti_kquant_scales(const uint8_t s[12], uint8_t sc[8], uint8_t mn[8])
{
    for (int i = 0; i < 4; i++) {
        sc[i] = s[i] & 63;
        mn[i] = s[i + 4] & 63;
        sc[i + 4] = (uint8_t)((s[i + 8] & 0xF) | (s[i] >> 6) << 4);
        mn[i + 4] = (uint8_t)((s[i + 8] >> 4) | (s[i + 4] >> 6) << 4);
    }
}

#endif
