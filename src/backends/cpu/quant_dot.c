/* Quantized dot products on the CPU: the activation quantizers (Q8_0, Q8_K) and the portable
 * scalar dot product of every weight dtype with its activation format. The AVX2 variants live
 * in quant_dot_avx2.c; pti_quant_dot_fn picks one at run time.
 *
 * Scheme (llama.cpp's): a weight row stays in its GGUF blocks; the activation row is quantized
 * once to 8 bits per block -- Q8_0 (32 values, f16 scale) for Q4_0 ... Q8_0, Q8_K (256 values,
 * f32 scale, 16-value sums) for the K-quants -- and each block pair contributes
 * d_w * d_a * (integer dot product), plus a min/offset term where the weight format has one.
 * Q4_1 and Q5_1 take Q8_1 activations, as llama.cpp does: Q8_0's values plus the float16
 * s = d * sum(q) (d before its own rounding to float16); the min term is m_w * s. Rounding s
 * loses a little, but it is llama.cpp's rounding, and its logits are what ours are checked
 * against (this alone moved SmolLM2-135M Q4_1's logits by up to 0.5). F16/BF16/F32 weights take
 * float32 activations unquantized (llama.cpp rounds them to the weight's type; we keep them exact).
 *
 * Rounding: both quantizers round half to even, as llama.cpp's x86 path does (Q8_0:
 * _mm256_round_ps with id = 127 / amax; Q8_K: nearest_int with iscale = -127 / max). */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "quant_dot.h"

/* Round to nearest, ties to even, for |f| < 2^22 (the 1.5 * 2^23 trick: the addition rounds
 * in the current mode, default nearest-even); no float -> int conversion, so no UB on NaN. */
static inline int nearest_int(float f)
{
    float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int clamp127(int v)
{
    return v > 127 ? 127 : v < -127 ? -127 : v;
}

/* ---- activation quantizers ------------------------------------------------------------------ */

void pti_quantize_row_q8_0(const float *x, pti_block_q8_0 *y, int64_t n)
{
    for (int64_t b = 0; b < n / PTI_QK; b++, x += PTI_QK) {
        float amax = 0.0f;
        for (int j = 0; j < PTI_QK; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[b].d = pt_float_to_half(d);
        for (int j = 0; j < PTI_QK; j++)
            y[b].qs[j] = (int8_t)clamp127(nearest_int(x[j] * id));
    }
}

void pti_quantize_row_q8_k(const float *x, pti_block_q8_k *y, int64_t n)
{
    bool simd = pti_quant_avx512_ok();
    for (int64_t b = 0; b < n / PTI_QK_K; b++, x += PTI_QK_K) {
        if (simd && pti_quantize_block_q8_k_avx512(x, &y[b]))
            continue;
        /* the value of largest magnitude, sign kept: it maps to exactly -127 */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < PTI_QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float iscale = -127.0f / max;
        for (int j = 0; j < PTI_QK_K; j++)
            y[b].qs[j] = (int8_t)clamp127(nearest_int(iscale * x[j]));
        for (int g = 0; g < PTI_QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += y[b].qs[16 * g + j];
            y[b].bsums[g] = (int16_t)s;
        }
        y[b].d = 1.0f / iscale;
    }
}

void pti_quantize_row_q8_1(const float *x, pti_block_q8_1 *y, int64_t n)
{
    for (int64_t b = 0; b < n / PTI_QK; b++, x += PTI_QK) {
        float amax = 0.0f;
        for (int j = 0; j < PTI_QK; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < PTI_QK; j++) {
            y[b].qs[j] = (int8_t)clamp127(nearest_int(x[j] * id));
            sum += y[b].qs[j];
        }
        y[b].d = pt_float_to_half(d);
        y[b].s = pt_float_to_half(d * (float)sum);
    }
}

pt_dtype pti_quant_act_dtype(pt_dtype weight)
{
    switch (weight) {
    case PT_Q4_1:
    case PT_Q5_1: return PT_Q8_1;
    case PT_Q4_0:
    case PT_Q5_0:
    case PT_Q8_0: return PT_Q8_0;
    case PT_Q2_K:
    case PT_Q3_K:
    case PT_Q4_K:
    case PT_Q5_K:
    case PT_Q6_K:
    case PT_Q8_K: return PT_Q8_K;
    default: return PT_FLOAT32;
    }
}

/* ---- 32-value block formats x Q8_0 ------------------------------------------------------------
 */

static float dot_q4_0(const void *wv, const void *av, int64_t n)
{
    const pti_block_q4_0 *w = wv;
    const pti_block_q8_0 *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK; b++) {
        int isum = 0;
        for (int j = 0; j < PTI_QK / 2; j++) {
            isum += ((w[b].qs[j] & 0xF) - 8) * a[b].qs[j];
            isum += ((w[b].qs[j] >> 4) - 8) * a[b].qs[j + 16];
        }
        sum += (float)isum * (pti_h2f(w[b].d) * pti_h2f(a[b].d));
    }
    return sum;
}

static float dot_q4_1(const void *wv, const void *av, int64_t n)
{
    const pti_block_q4_1 *w = wv;
    const pti_block_q8_1 *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK; b++) {
        int isum = 0;
        for (int j = 0; j < PTI_QK / 2; j++)
            isum += (w[b].qs[j] & 0xF) * a[b].qs[j] + (w[b].qs[j] >> 4) * a[b].qs[j + 16];
        sum +=
            (float)isum * (pti_h2f(w[b].d) * pti_h2f(a[b].d)) + pti_h2f(w[b].m) * pti_h2f(a[b].s);
    }
    return sum;
}

static float dot_q5_0(const void *wv, const void *av, int64_t n)
{
    const pti_block_q5_0 *w = wv;
    const pti_block_q8_0 *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK; b++) {
        uint32_t h;
        memcpy(&h, w[b].qh, sizeof h);
        int isum = 0;
        for (int j = 0; j < PTI_QK / 2; j++) {
            int q0 = ((w[b].qs[j] & 0xF) | (int)((h >> j) & 1) << 4) - 16;
            int q1 = ((w[b].qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4) - 16;
            isum += q0 * a[b].qs[j] + q1 * a[b].qs[j + 16];
        }
        sum += (float)isum * (pti_h2f(w[b].d) * pti_h2f(a[b].d));
    }
    return sum;
}

static float dot_q5_1(const void *wv, const void *av, int64_t n)
{
    const pti_block_q5_1 *w = wv;
    const pti_block_q8_1 *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK; b++) {
        uint32_t h;
        memcpy(&h, w[b].qh, sizeof h);
        int isum = 0;
        for (int j = 0; j < PTI_QK / 2; j++) {
            int q0 = (w[b].qs[j] & 0xF) | (int)((h >> j) & 1) << 4;
            int q1 = (w[b].qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
            isum += q0 * a[b].qs[j] + q1 * a[b].qs[j + 16];
        }
        sum +=
            (float)isum * (pti_h2f(w[b].d) * pti_h2f(a[b].d)) + pti_h2f(w[b].m) * pti_h2f(a[b].s);
    }
    return sum;
}

static float dot_q8_0(const void *wv, const void *av, int64_t n)
{
    const pti_block_q8_0 *w = wv;
    const pti_block_q8_0 *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK; b++) {
        int isum = 0;
        for (int j = 0; j < PTI_QK; j++)
            isum += w[b].qs[j] * a[b].qs[j];
        sum += (float)isum * (pti_h2f(w[b].d) * pti_h2f(a[b].d));
    }
    return sum;
}

/* ---- K-quants x Q8_K
 * ------------------------------------------------------------------------------ */

/* Sum of q[i] * a[i] over 16 values. */
static inline int dot16(const int8_t *q, const int8_t *a)
{
    int s = 0;
    for (int i = 0; i < 16; i++)
        s += q[i] * a[i];
    return s;
}

static float dot_q2_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q2_k *w = wv;
    const pti_block_q8_k *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        /* group g of 16 values: half g / 8, shift 2 * ((g % 8) / 2), bytes Q[16 * (g % 2) ..] */
        int isum = 0, msum = 0;
        for (int g = 0; g < 16; g++) {
            const uint8_t *q = w[b].qs + 32 * (g / 8) + 16 * (g % 2);
            int shift = 2 * ((g % 8) / 2);
            int8_t v[16];
            for (int l = 0; l < 16; l++)
                v[l] = (int8_t)((q[l] >> shift) & 3);
            isum += (w[b].scales[g] & 0xF) * dot16(v, a[b].qs + 16 * g);
            msum += (w[b].scales[g] >> 4) * a[b].bsums[g];
        }
        sum += a[b].d * (pti_h2f(w[b].d) * (float)isum - pti_h2f(w[b].dmin) * (float)msum);
    }
    return sum;
}

static float dot_q3_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q3_k *w = wv;
    const pti_block_q8_k *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        const uint8_t *s = w[b].scales;
        int isum = 0;
        /* group g = 16 values e = 16g .. 16g+15; e = 128n + 32j + k */
        for (int g = 0; g < 16; g++) {
            int lo = g < 8 ? s[g] & 0xF : s[g - 8] >> 4;
            int scale = (lo | ((s[8 + g % 4] >> (2 * (g / 4))) & 3) << 4) - 32;
            int n2 = g / 8, j = (g % 8) / 2, k0 = 16 * (g % 2);
            int8_t v[16];
            for (int l = 0; l < 16; l++) {
                int k = k0 + l;
                int q = (w[b].qs[32 * n2 + k] >> (2 * j)) & 3;
                v[l] = (int8_t)(q - ((w[b].hmask[k] >> (4 * n2 + j)) & 1 ? 0 : 4));
            }
            isum += scale * dot16(v, a[b].qs + 16 * g);
        }
        sum += a[b].d * pti_h2f(w[b].d) * (float)isum;
    }
    return sum;
}

/* One Q4_K or Q5_K super-block (qh NULL for Q4_K: no fifth bits) against its Q8_K block:
 * d_a * (d * sum(scale * q . a) - dmin * sum(min * block sums)). */
static float k45_block(const uint8_t scales[12], const uint8_t *qs, const uint8_t *qh, pti_half d,
                       pti_half dmin, const pti_block_q8_k *a)
{
    uint8_t sc[8], mn[8];
    pti_kquant_scales(scales, sc, mn);
    int isum = 0, msum = 0;
    for (int c = 0; c < 4; c++) {
        const uint8_t *q = qs + 32 * c;
        const int8_t *a0 = a->qs + 64 * c, *a1 = a0 + 32;
        int s0 = 0, s1 = 0;
        for (int l = 0; l < 32; l++) {
            int h0 = qh ? ((qh[l] >> (2 * c)) & 1) << 4 : 0;
            int h1 = qh ? ((qh[l] >> (2 * c + 1)) & 1) << 4 : 0;
            s0 += ((q[l] & 0xF) | h0) * a0[l];
            s1 += ((q[l] >> 4) | h1) * a1[l];
        }
        isum += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
    }
    for (int i = 0; i < 8; i++)
        msum += mn[i] * (a->bsums[2 * i] + a->bsums[2 * i + 1]);
    return a->d * (pti_h2f(d) * (float)isum - pti_h2f(dmin) * (float)msum);
}

static float dot_q4_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q4_k *w = wv;
    const pti_block_q8_k *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK_K; b++)
        sum += k45_block(w[b].scales, w[b].qs, NULL, w[b].d, w[b].dmin, &a[b]);
    return sum;
}

static float dot_q5_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q5_k *w = wv;
    const pti_block_q8_k *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK_K; b++)
        sum += k45_block(w[b].scales, w[b].qs, w[b].qh, w[b].d, w[b].dmin, &a[b]);
    return sum;
}

static float dot_q6_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q6_k *w = wv;
    const pti_block_q8_k *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        int8_t v[PTI_QK_K];
        for (int h = 0; h < 2; h++) {
            const uint8_t *L = w[b].ql + 64 * h, *H = w[b].qh + 32 * h;
            int8_t *y = v + 128 * h;
            for (int l = 0; l < 32; l++) {
                y[l] = (int8_t)(((L[l] & 0xF) | ((H[l] >> 0) & 3) << 4) - 32);
                y[l + 32] = (int8_t)(((L[l + 32] & 0xF) | ((H[l] >> 2) & 3) << 4) - 32);
                y[l + 64] = (int8_t)(((L[l] >> 4) | ((H[l] >> 4) & 3) << 4) - 32);
                y[l + 96] = (int8_t)(((L[l + 32] >> 4) | ((H[l] >> 6) & 3) << 4) - 32);
            }
        }
        int isum = 0;
        for (int g = 0; g < 16; g++)
            isum += w[b].scales[g] * dot16(v + 16 * g, a[b].qs + 16 * g);
        sum += a[b].d * pti_h2f(w[b].d) * (float)isum;
    }
    return sum;
}

static float dot_q8_k(const void *wv, const void *av, int64_t n)
{
    const pti_block_q8_k *w = wv;
    const pti_block_q8_k *a = av;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / PTI_QK_K; b++) {
        int isum = 0;
        for (int j = 0; j < PTI_QK_K; j++)
            isum += w[b].qs[j] * a[b].qs[j];
        sum += w[b].d * a[b].d * (float)isum;
    }
    return sum;
}

/* ---- float weights x float32 activations --------------------------------------------------------
 */

static float dot_f32(const void *wv, const void *av, int64_t n)
{
    const float *w = wv, *a = av;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += w[i] * a[i];
    return sum;
}

static float dot_f16(const void *wv, const void *av, int64_t n)
{
    const uint16_t *w = wv;
    const float *a = av;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += pti_h2f(w[i]) * a[i];
    return sum;
}

static float dot_bf16(const void *wv, const void *av, int64_t n)
{
    const uint16_t *w = wv;
    const float *a = av;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)w[i] << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        sum += f * a[i];
    }
    return sum;
}

/* ---- selection ----------------------------------------------------------------------------------
 */

static pti_qdot_fn scalar_fn(pt_dtype dt)
{
    switch (dt) {
    case PT_Q4_0: return dot_q4_0;
    case PT_Q4_1: return dot_q4_1;
    case PT_Q5_0: return dot_q5_0;
    case PT_Q5_1: return dot_q5_1;
    case PT_Q8_0: return dot_q8_0;
    case PT_Q2_K: return dot_q2_k;
    case PT_Q3_K: return dot_q3_k;
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

pti_qdot_fn pti_quant_dot_fn(pt_dtype dt)
{
    if (pti_quant_avx2_ok()) {
        pti_qdot_fn f = pti_quant_dot_avx2_fn(dt);
        if (f)
            return f;
    }
    return scalar_fn(dt);
}

pti_qdot_rows_fn pti_quant_dot_rows_fn(pt_dtype dt)
{
    return pti_quant_avx2_ok() ? pti_quant_dot_rows_avx2_fn(dt) : NULL;
}
