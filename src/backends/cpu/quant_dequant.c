/* Dequantization of the GGUF block dtypes on the CPU (formats.md 2.3): one small scalar
 * function per block type (the reference), AVX2 paths for the hot weight types (Q4_0, Q8_0,
 * Q4_K, Q6_K), and the kernels of the quant family (dequantize, embedding_quant).
 *
 * Bit-exactness: every output is computed with exactly the float32 operations gguf-py's
 * dequantizer (and ggml's dequantize_row_*) uses, in the same order -- e.g. Q4_K is
 * (d * sc) * q - (dmin * m), two products rounded separately, never fused. The AVX2 paths do
 * the same operations lane by lane (target "avx2" without "fma", so the compiler cannot fuse
 * them either), which makes them bit-identical to the scalar code. */
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PTI_DEQ_X86 1
#endif

#include "cpu.h"
#include "quant.h"

/* Never contract a * b + c into an FMA: gguf-py rounds the product first. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* ---- scale unpacking ----------------------------------------------------------------- */

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block i (0..7) from the 12 packed bytes. */
static void kquant_scale_min(const uint8_t *s, int i, int *sc, int *mn)
{
    if (i < 4) {
        *sc = s[i] & 63;
        *mn = s[i + 4] & 63;
    } else {
        *sc = (s[i + 4] & 0xF) | ((s[i - 4] >> 6) << 4);
        *mn = (s[i + 4] >> 4) | ((s[i] >> 6) << 4);
    }
}

/* Q3_K: the signed 6-bit scale of group i (0..15), stored value - 32. */
static int q3k_scale(const uint8_t *s, int i)
{
    int lo = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
    int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* ---- scalar reference: one function per block type, nb blocks each -------------------------- */

static void deq_q4_0(const pti_block_q4_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += PTI_QK) {
        float d = pt_half_to_float(x[i].d);
        for (int j = 0; j < PTI_QK / 2; j++) {
            y[j] = (float)((x[i].qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void deq_q4_1(const pti_block_q4_1 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += PTI_QK) {
        float d = pt_half_to_float(x[i].d), m = pt_half_to_float(x[i].m);
        for (int j = 0; j < PTI_QK / 2; j++) {
            y[j] = d * (float)(x[i].qs[j] & 0xF) + m;
            y[j + 16] = d * (float)(x[i].qs[j] >> 4) + m;
        }
    }
}

/* The 5-bit values of a Q5_0 / Q5_1 block (0..31) from its qh and qs. */
static void q5_values(const uint8_t qh[4], const uint8_t *qs, int q[PTI_QK])
{
    uint32_t h =
        (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int j = 0; j < PTI_QK / 2; j++) {
        q[j] = (qs[j] & 0xF) | (int)((h >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
    }
}

static void deq_q5_0(const pti_block_q5_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += PTI_QK) {
        float d = pt_half_to_float(x[i].d);
        int q[PTI_QK];
        q5_values(x[i].qh, x[i].qs, q);
        for (int j = 0; j < PTI_QK; j++)
            y[j] = d * (float)(q[j] - 16);
    }
}

static void deq_q5_1(const pti_block_q5_1 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += PTI_QK) {
        float d = pt_half_to_float(x[i].d), m = pt_half_to_float(x[i].m);
        int q[PTI_QK];
        q5_values(x[i].qh, x[i].qs, q);
        for (int j = 0; j < PTI_QK; j++)
            y[j] = d * (float)q[j] + m;
    }
}

static void deq_q8_0(const pti_block_q8_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += PTI_QK) {
        float d = pt_half_to_float(x[i].d);
        for (int j = 0; j < PTI_QK; j++)
            y[j] = (float)x[i].qs[j] * d;
    }
}

/* Q8_1's s field (d * sum(qs)) only serves dot products; the values are qs * d. */
static void deq_q8_1(const pti_block_q8_1 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += PTI_QK) {
        float d = pt_half_to_float(x[i].d);
        for (int j = 0; j < PTI_QK; j++)
            y[j] = (float)x[i].qs[j] * d;
    }
}

/* Output order: half n, shift step j, then two groups of 16, each with its scales byte. */
static void deq_q2_k(const pti_block_q2_k *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        float d = pt_half_to_float(x[i].d), dmin = pt_half_to_float(x[i].dmin);
        int is = 0;
        for (int n = 0; n < 2; n++) {
            const uint8_t *q = x[i].qs + 32 * n;
            for (int j = 0; j < 4; j++) {
                for (int g = 0; g < 2; g++, is++, y += 16) {
                    uint8_t sc = x[i].scales[is];
                    float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        y[l] = dl * (float)((q[l + 16 * g] >> (2 * j)) & 3) - ml;
                }
            }
        }
    }
}

static void deq_q3_k(const pti_block_q3_k *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += PTI_QK_K) {
        float d = pt_half_to_float(x[i].d);
        for (int e = 0; e < PTI_QK_K; e++) {
            int n = e / 128, j = (e % 128) / 32, k = e % 32;
            int q = (x[i].qs[32 * n + k] >> (2 * j)) & 3;
            if (!((x[i].hmask[k] >> (e / 32)) & 1))
                q -= 4;
            float dl = d * (float)q3k_scale(x[i].scales, e / 16);
            y[e] = dl * (float)q;
        }
    }
}

static void deq_q4_k(const pti_block_q4_k *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        float d = pt_half_to_float(x[i].d), dmin = pt_half_to_float(x[i].dmin);
        for (int c = 0; c < 4; c++, y += 64) {
            const uint8_t *q = x[i].qs + 32 * c;
            int sc0, mn0, sc1, mn1;
            kquant_scale_min(x[i].scales, 2 * c, &sc0, &mn0);
            kquant_scale_min(x[i].scales, 2 * c + 1, &sc1, &mn1);
            float d0 = d * (float)sc0, m0 = dmin * (float)mn0;
            float d1 = d * (float)sc1, m1 = dmin * (float)mn1;
            for (int l = 0; l < 32; l++) {
                y[l] = d0 * (float)(q[l] & 0xF) - m0;
                y[l + 32] = d1 * (float)(q[l] >> 4) - m1;
            }
        }
    }
}

static void deq_q5_k(const pti_block_q5_k *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        float d = pt_half_to_float(x[i].d), dmin = pt_half_to_float(x[i].dmin);
        for (int c = 0; c < 4; c++, y += 64) {
            const uint8_t *q = x[i].qs + 32 * c;
            int sc0, mn0, sc1, mn1;
            kquant_scale_min(x[i].scales, 2 * c, &sc0, &mn0);
            kquant_scale_min(x[i].scales, 2 * c + 1, &sc1, &mn1);
            float d0 = d * (float)sc0, m0 = dmin * (float)mn0;
            float d1 = d * (float)sc1, m1 = dmin * (float)mn1;
            for (int l = 0; l < 32; l++) {
                int lo = (q[l] & 0xF) | ((x[i].qh[l] >> (2 * c)) & 1) << 4;
                int hi = (q[l] >> 4) | ((x[i].qh[l] >> (2 * c + 1)) & 1) << 4;
                y[l] = d0 * (float)lo - m0;
                y[l + 32] = d1 * (float)hi - m1;
            }
        }
    }
}

static void deq_q6_k(const pti_block_q6_k *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        float d = pt_half_to_float(x[i].d);
        for (int h = 0; h < 2; h++, y += 128) {
            const uint8_t *L = x[i].ql + 64 * h, *H = x[i].qh + 32 * h;
            const int8_t *S = x[i].scales + 8 * h;
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((L[l] & 0xF) | ((H[l] >> 0 & 3) << 4)) - 32;
                int q2 = ((L[l + 32] & 0xF) | ((H[l] >> 2 & 3) << 4)) - 32;
                int q3 = ((L[l] >> 4) | ((H[l] >> 4 & 3) << 4)) - 32;
                int q4 = ((L[l + 32] >> 4) | ((H[l] >> 6 & 3) << 4)) - 32;
                y[l] = (d * (float)S[is + 0]) * (float)q1;
                y[l + 32] = (d * (float)S[is + 2]) * (float)q2;
                y[l + 64] = (d * (float)S[is + 4]) * (float)q3;
                y[l + 96] = (d * (float)S[is + 6]) * (float)q4;
            }
        }
    }
}

/* Q8_K's d is a float32; bsums only serve dot products. */
static void deq_q8_k(const pti_block_q8_k *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += PTI_QK_K) {
        for (int j = 0; j < PTI_QK_K; j++)
            y[j] = x[i].d * (float)x[i].qs[j];
    }
}

/* Plain dtypes: f16 / bf16 widen exactly; f32 is a copy. */
static void deq_plain(pt_dtype dt, const void *src, float *y, int64_t n)
{
    const uint16_t *h = src;
    switch (dt) {
    case PT_FLOAT16:
        for (int64_t i = 0; i < n; i++)
            y[i] = pt_half_to_float(h[i]);
        break;
    case PT_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            y[i] = pt_bfloat16_to_float(h[i]);
        break;
    default: memcpy(y, src, (size_t)n * sizeof(float)); break;
    }
}

/* ---- AVX2 paths (bit-identical to the scalar ones: same products, lane by lane) -------------- */

#ifdef PTI_DEQ_X86
/* 8 int32 lanes to float, times d, stored. */
__attribute__((target("avx2"))) static inline void store_scaled(float *y, __m256i q, __m256 d)
{
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
}

/* 8 unsigned bytes at p widened to int32 lanes. */
__attribute__((target("avx2"))) static inline __m256i load_u8x8(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

__attribute__((target("avx2"))) static void deq_q4_0_avx2(const pti_block_q4_0 *x, float *y,
                                                          int64_t nb)
{
    const __m256i mask = _mm256_set1_epi32(0xF), eight = _mm256_set1_epi32(8);
    for (int64_t i = 0; i < nb; i++, y += PTI_QK) {
        __m256 d = _mm256_set1_ps(pt_half_to_float(x[i].d));
        for (int j = 0; j < 16; j += 8) {
            __m256i b = load_u8x8(x[i].qs + j);
            __m256i lo = _mm256_sub_epi32(_mm256_and_si256(b, mask), eight);
            __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(b, 4), eight);
            store_scaled(y + j, lo, d);
            store_scaled(y + j + 16, hi, d);
        }
    }
}

__attribute__((target("avx2"))) static void deq_q8_0_avx2(const pti_block_q8_0 *x, float *y,
                                                          int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += PTI_QK) {
        __m256 d = _mm256_set1_ps(pt_half_to_float(x[i].d));
        for (int j = 0; j < PTI_QK; j += 8) {
            __m128i v = _mm_loadl_epi64((const __m128i *)(x[i].qs + j));
            store_scaled(y + j, _mm256_cvtepi8_epi32(v), d);
        }
    }
}

/* 8 lanes of d * q - m. */
__attribute__((target("avx2"))) static inline void store_affine(float *y, __m256i q, __m256 d,
                                                                __m256 m)
{
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q)), m));
}

__attribute__((target("avx2"))) static void deq_q4_k_avx2(const pti_block_q4_k *x, float *y,
                                                          int64_t nb)
{
    const __m256i mask = _mm256_set1_epi32(0xF);
    for (int64_t i = 0; i < nb; i++) {
        float d = pt_half_to_float(x[i].d), dmin = pt_half_to_float(x[i].dmin);
        for (int c = 0; c < 4; c++, y += 64) {
            const uint8_t *q = x[i].qs + 32 * c;
            int sc0, mn0, sc1, mn1;
            kquant_scale_min(x[i].scales, 2 * c, &sc0, &mn0);
            kquant_scale_min(x[i].scales, 2 * c + 1, &sc1, &mn1);
            __m256 d0 = _mm256_set1_ps(d * (float)sc0), m0 = _mm256_set1_ps(dmin * (float)mn0);
            __m256 d1 = _mm256_set1_ps(d * (float)sc1), m1 = _mm256_set1_ps(dmin * (float)mn1);
            for (int l = 0; l < 32; l += 8) {
                __m256i b = load_u8x8(q + l);
                store_affine(y + l, _mm256_and_si256(b, mask), d0, m0);
                store_affine(y + l + 32, _mm256_srli_epi32(b, 4), d1, m1);
            }
        }
    }
}

/* Q6_K: lanes l..l+7 of one half; the 4 outputs use scales S[is + 0/2/4/6]. */
__attribute__((target("avx2"))) static void deq_q6_k_avx2(const pti_block_q6_k *x, float *y,
                                                          int64_t nb)
{
    const __m256i m4 = _mm256_set1_epi32(0xF), m2 = _mm256_set1_epi32(3);
    const __m256i off = _mm256_set1_epi32(32);
    for (int64_t i = 0; i < nb; i++) {
        float d = pt_half_to_float(x[i].d);
        for (int h = 0; h < 2; h++, y += 128) {
            const uint8_t *L = x[i].ql + 64 * h, *H = x[i].qh + 32 * h;
            const int8_t *S = x[i].scales + 8 * h;
            for (int l = 0; l < 32; l += 8) {
                int is = l / 16;
                __m256i la = load_u8x8(L + l), lb = load_u8x8(L + l + 32), hh = load_u8x8(H + l);
                __m256i q1 = _mm256_or_si256(_mm256_and_si256(la, m4),
                                             _mm256_slli_epi32(_mm256_and_si256(hh, m2), 4));
                __m256i q2 = _mm256_or_si256(
                    _mm256_and_si256(lb, m4),
                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hh, 2), m2), 4));
                __m256i q3 = _mm256_or_si256(
                    _mm256_srli_epi32(la, 4),
                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hh, 4), m2), 4));
                __m256i q4 = _mm256_or_si256(_mm256_srli_epi32(lb, 4),
                                             _mm256_slli_epi32(_mm256_srli_epi32(hh, 6), 4));
                store_scaled(y + l, _mm256_sub_epi32(q1, off),
                             _mm256_set1_ps(d * (float)S[is + 0]));
                store_scaled(y + l + 32, _mm256_sub_epi32(q2, off),
                             _mm256_set1_ps(d * (float)S[is + 2]));
                store_scaled(y + l + 64, _mm256_sub_epi32(q3, off),
                             _mm256_set1_ps(d * (float)S[is + 4]));
                store_scaled(y + l + 96, _mm256_sub_epi32(q4, off),
                             _mm256_set1_ps(d * (float)S[is + 6]));
            }
        }
    }
}
#endif

/* True when the AVX2 path of dt exists and may run. */
static bool use_avx2(pt_dtype dt)
{
#ifdef PTI_DEQ_X86
    if (dt != PT_Q4_0 && dt != PT_Q8_0 && dt != PT_Q4_K && dt != PT_Q6_K)
        return false;
    return pti_cpu_has_avx2();
#else
    (void)dt;
    return false;
#endif
}

#ifdef PTI_DEQ_X86
static void dequantize_avx2(pt_dtype dt, const void *b, float *out, int64_t nb)
{
    switch (dt) {
    case PT_Q4_0: deq_q4_0_avx2(b, out, nb); break;
    case PT_Q8_0: deq_q8_0_avx2(b, out, nb); break;
    case PT_Q4_K: deq_q4_k_avx2(b, out, nb); break;
    case PT_Q6_K: deq_q6_k_avx2(b, out, nb); break;
    default: break;
    }
}
#endif

void pti_dequantize_row(pt_dtype dt, const void *blocks, float *out, int64_t n)
{
    int64_t nb = n / pti_dtypes[dt].block_size;
#ifdef PTI_DEQ_X86
    if (use_avx2(dt)) {
        dequantize_avx2(dt, blocks, out, nb);
        return;
    }
#endif
    switch (dt) {
    case PT_Q4_0: deq_q4_0(blocks, out, nb); break;
    case PT_Q4_1: deq_q4_1(blocks, out, nb); break;
    case PT_Q5_0: deq_q5_0(blocks, out, nb); break;
    case PT_Q5_1: deq_q5_1(blocks, out, nb); break;
    case PT_Q8_0: deq_q8_0(blocks, out, nb); break;
    case PT_Q8_1: deq_q8_1(blocks, out, nb); break;
    case PT_Q2_K: deq_q2_k(blocks, out, nb); break;
    case PT_Q3_K: deq_q3_k(blocks, out, nb); break;
    case PT_Q4_K: deq_q4_k(blocks, out, nb); break;
    case PT_Q5_K: deq_q5_k(blocks, out, nb); break;
    case PT_Q6_K: deq_q6_k(blocks, out, nb); break;
    case PT_Q8_K: deq_q8_k(blocks, out, nb); break;
    default: deq_plain(dt, blocks, out, n); break;
    }
}

/* ---- kernels ------------------------------------------------------------------------- */

/* First byte of a contiguous tensor whose offset (in elements) is a whole number of blocks. */
static const char *block_data(const pt_tensor *t)
{
    const pti_dtype_info *di = &pti_dtypes[t->dtype];
    return (const char *)t->storage->data + t->offset / di->block_size * (int64_t)di->size;
}

typedef struct deq_ctx {
    pt_dtype dt;
    const char *src;
    float *dst;
    int64_t per; /* elements per unit of work (one block, or one row for embedding) */
    size_t unit_bytes;
    const int64_t *rows; /* embedding: the row of each output row; NULL for dequantize */
} deq_ctx;

static void deq_range(void *ctx, int64_t begin, int64_t end)
{
    const deq_ctx *k = ctx;
    if (!k->rows) {
        pti_dequantize_row(k->dt, k->src + (size_t)begin * k->unit_bytes, k->dst + begin * k->per,
                           (end - begin) * k->per);
        return;
    }
    for (int64_t r = begin; r < end; r++)
        pti_dequantize_row(k->dt, k->src + (size_t)k->rows[r] * k->unit_bytes, k->dst + r * k->per,
                           k->per);
}

/* in[0]: contiguous block (or f16/bf16/f32) tensor; out[0]: contiguous float32, same numel. */
static pt_status cpu_dequantize(const pti_call *c)
{
    const pt_tensor *t = c->in[0];
    const pti_dtype_info *di = &pti_dtypes[t->dtype];
    int64_t units = t->numel / di->block_size;
    deq_ctx k = {t->dtype, block_data(t), pti_data(c->out[0]), di->block_size, di->size, NULL};
    /* ~16K output floats per task: a task costs far more than one block */
    int64_t grain = di->block_size >= 16384 ? 1 : 16384 / di->block_size;
    pti_parallel_for(units, grain, deq_range, &k);
    return PT_OK;
}

/* in[0]: contiguous block weight [V, D]; in[1]: int64 row indices (1-D, contiguous);
 * out[0]: contiguous float32 [n, D]. Out-of-range indices are refused before any work. */
static pt_status cpu_embedding_quant(const pti_call *c)
{
    const pt_tensor *w = c->in[0], *idx = c->in[1];
    const int64_t *rows = pti_data(idx);
    int64_t V = w->shape[0], D = w->shape[1];
    for (int64_t i = 0; i < idx->numel; i++) {
        if (rows[i] < 0 || rows[i] >= V)
            return pti_error(PT_ERR_INDEX,
                             "pt_embedding: index %lld is out of bounds for dimension 0 with "
                             "size %lld",
                             (long long)rows[i], (long long)V);
    }
    const pti_dtype_info *di = &pti_dtypes[w->dtype];
    size_t row_bytes = (size_t)(D / di->block_size) * di->size;
    deq_ctx k = {w->dtype, block_data(w), pti_data(c->out[0]), D, row_bytes, rows};
    int64_t grain = D >= 16384 ? 1 : 16384 / (D ? D : 1);
    pti_parallel_for(idx->numel, grain, deq_range, &k);
    return PT_OK;
}

void pti_cpu_register_quant(pti_kernel *table)
{
    table[PTI_OP_dequantize] = cpu_dequantize;
    table[PTI_OP_embedding_quant] = cpu_embedding_quant;
}
