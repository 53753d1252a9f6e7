/* CPU kernels of the LLM inference ops rope and attention_kv (front-ends in src/ops/nn_llm.c).
 *
 * rope follows ggml_compute_forward_rope_f32: per token, a table of cos/sin (times the YaRN
 * magnitude scale) for every rotated pair, with the angle advanced by repeated float32
 * multiplication by base^(-2/n_rot) as ggml does (so the float32 rounding of the angles is
 * ggml's); the table is built once per token and shared by its heads.
 *
 * attention_kv is llama.cpp's non flash-attention path: scores = q.k (with a float16 cache, q
 * is first rounded to float16 as ggml's matmul converts its float32 operand), times scale,
 * masked (causal from q_pos0, sliding window), softmax with the max subtracted and the sum
 * in double, the weights rounded to float16 for a float16 cache, then weights . v.
 *
 * Work is cut into units: up to AKV_ROWS query rows that read the same kv head (the query
 * heads of a GQA group, or consecutive positions of one head) over a range of keys, so each
 * key/value row is loaded once for all of them. Units of one (rows) set normally cover all
 * their keys and run in one pass (scores, softmax and values), threads taking whole units;
 * when there are fewer such sets than threads (decode with few kv heads), the keys are split
 * into chunks (flash-decoding): pass 1 computes each chunk's scores and maxima, pass 2 the
 * exponentials against the global max and the chunk sums, pass 3 the normalized weights and
 * each chunk's partial weights . v, which are then added up. The weights are the exact
 * normalized ones in both schedules, so the float16 rounding of the weights is the same. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "../../ops/nn_params.h"
#include "cpu.h"
#include "simd_math.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define LLM_HAVE_X86 1
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define LLM_HAVE_X86 0
#endif

/* AVX2+FMA and F16C (pti_cpu_has_f16c, which honours PT_DISABLE_AVX2). */
static bool use_avx2(void)
{
#if LLM_HAVE_X86
    return pti_cpu_has_f16c();
#else
    return false;
#endif
}

static inline float round_f16(float x)
{
    return pt_half_to_float(pt_float_to_half(x));
}

/* ---- rope ------------------------------------------------------------------------------------ */

typedef struct rope_ctx {
    const pti_rope_params *p;
    const float *x;
    int64_t xs[3]; /* x strides, elements */
    const void *pos;
    bool pos64;
    const float *ff;
    float *y;
    atomic_bool oom;
} rope_ctx;

/* cs[2i], cs[2i+1] = cos, sin of pair i's angle at position `pos`, times the magnitude scale
 * (ggml_rope_cache_init + rope_yarn). */
static void rope_table(const pti_rope_params *p, const float *ff, float pos, float *cs)
{
    const float ramp_den = fmaxf(0.001f, p->corr_dims[1] - p->corr_dims[0]);
    float theta = pos;
    for (int64_t i = 0; i < p->n_rot / 2; i++) {
        float extrap = theta / (ff ? ff[i] : 1.0f);
        float interp = p->freq_scale * extrap, th = interp, ms = p->mscale;
        if (p->ext_factor != 0.0f) {
            float y = ((float)i - p->corr_dims[0]) / ramp_den;
            float mix = (1 - fminf(1, fmaxf(0, y))) * p->ext_factor;
            th = interp * (1 - mix) + extrap * mix;
            ms *= 1.0f + 0.1f * logf(1.0f / p->freq_scale);
        }
        cs[2 * i] = cosf(th) * ms;
        cs[2 * i + 1] = sinf(th) * ms;
        theta *= p->theta_scale;
    }
}

/* Units u = t * H + h over [u0, u1): one head row each; the table is rebuilt per token. */
static void rope_range(void *arg, int64_t u0, int64_t u1)
{
    rope_ctx *r = arg;
    const pti_rope_params *p = r->p;
    int64_t half = p->n_rot / 2;
    size_t tbytes = (size_t)(p->n_rot > 0 ? p->n_rot : 1) * sizeof(float);
    float *cs = pti_cpu_alloc(tbytes);
    if (!cs) {
        atomic_store(&r->oom, true);
        return;
    }
    int64_t cur_t = -1;
    for (int64_t u = u0; u < u1; u++) {
        int64_t t = u / p->h, h = u % p->h;
        if (t != cur_t) {
            int64_t pos = r->pos64 ? ((const int64_t *)r->pos)[t] : ((const int32_t *)r->pos)[t];
            rope_table(p, r->ff, (float)pos, cs);
            cur_t = t;
        }
        const float *x = r->x + t * r->xs[0] + h * r->xs[1];
        int64_t s = r->xs[2];
        float *y = r->y + u * p->d;
        for (int64_t i = 0; i < half; i++) {
            /* NORM rotates (2i, 2i+1), NEOX (i, i + n_rot/2) */
            int64_t i0 = p->neox ? i : 2 * i, i1 = p->neox ? i + half : 2 * i + 1;
            float x0 = x[i0 * s], x1 = x[i1 * s], c = cs[2 * i], sn = cs[2 * i + 1];
            y[i0] = x0 * c - x1 * sn;
            y[i1] = x0 * sn + x1 * c;
        }
        for (int64_t i = p->n_rot; i < p->d; i++)
            y[i] = x[i * s];
    }
    pti_cpu_free(cs, tbytes);
}

static pt_status cpu_rope(const pti_call *c)
{
    const pti_rope_params *p = c->params;
    const pt_tensor *x = c->in[0], *pos = c->in[1], *ff = c->in[2];
    rope_ctx r = {.p = p,
                  .x = pti_data(x),
                  .xs = {x->stride[0], x->stride[1], x->stride[2]},
                  .pos = pti_data(pos),
                  .pos64 = pos->dtype == PT_INT64,
                  .ff = ff ? pti_data(ff) : NULL,
                  .y = pti_data(c->out[0])};
    atomic_init(&r.oom, false);
    int64_t grain = 32768 / (p->d > 0 ? p->d : 1);
    pti_parallel_for(p->t * p->h, grain > 0 ? grain : 1, rope_range, &r);
    if (atomic_load(&r.oom))
        return pti_error(PT_ERR_OOM, "pt_rope: out of memory for the cos/sin table");
    return PT_OK;
}

/* ---- attention_kv: shared state and units ---------------------------------------------------- */

#define AKV_ROWS 4

typedef struct akv_ctx {
    const pti_attention_kv_params *p;
    bool f16, avx2;
    const float *q;                  /* [T, Hq, D], values rounded to float16 when f16 */
    const char *k, *v;               /* element 0 of the caches */
    int64_t ks0, ks1, vs0, vs1, esz; /* strides (elements) and element size (bytes) */
    float *o;                        /* [T, Hq, Dv] */
    int64_t group;                   /* Hq / Hkv */
    int64_t nh, nt;                  /* query heads and positions per unit */
    int64_t n_hb, n_tb;              /* head blocks per group, position blocks */
    int64_t n_chunks;                /* key chunks per row set (1: single pass) */
    int64_t span;                    /* the most keys one unit covers (scratch row length) */
    /* split-keys scratch, per unit u and row r */
    float *sc;   /* [units][AKV_ROWS][span] scores / weights */
    float *mx;   /* [units][AKV_ROWS] chunk maxima */
    double *sum; /* [units][AKV_ROWS] chunk sums of exp */
    float *part; /* [units][AKV_ROWS][Dv] partial outputs */
    atomic_bool oom;
} akv_ctx;

typedef struct akv_unit {
    int n;                              /* rows */
    const float *q[AKV_ROWS];           /* query rows [D] */
    float *out[AKV_ROWS];               /* output rows [Dv] */
    float *dst[AKV_ROWS];               /* where this unit writes: out, or its partial rows */
    int64_t lo[AKV_ROWS], hi[AKV_ROWS]; /* keys [lo, hi) visible from each row */
    int64_t a, b;                       /* keys [a, b) covered by this unit */
    const char *k, *v;                  /* the kv head's row of position 0 */
} akv_unit;

/* Position blocks in zig-zag order (0, n-1, 1, n-2, ...) so that contiguous ranges of units
 * mix cheap early positions with expensive late ones (causal prefill). */
static int64_t zigzag(int64_t i, int64_t n)
{
    return i % 2 == 0 ? i / 2 : n - 1 - i / 2;
}

/* Unit u = ((position block * Hkv + kv head) * n_hb + head block) * n_chunks + chunk. */
static void unit_init(const akv_ctx *s, int64_t u, akv_unit *un)
{
    const pti_attention_kv_params *p = s->p;
    int64_t c = u % s->n_chunks, set = u / s->n_chunks;
    int64_t hb = set % s->n_hb, g = set / s->n_hb % p->hkv;
    int64_t tb = zigzag(set / (s->n_hb * p->hkv), s->n_tb);
    int64_t t0 = tb * s->nt, nt = p->t - t0 < s->nt ? p->t - t0 : s->nt;
    int64_t h0 = g * s->group + hb * s->nh;
    int64_t nh = s->group - hb * s->nh < s->nh ? s->group - hb * s->nh : s->nh;
    int64_t ulo = INT64_MAX, uhi = 0;
    un->n = (int)(nt * nh);
    for (int r = 0; r < un->n; r++) {
        int64_t t = t0 + r / nh, h = h0 + r % nh, pos = p->q_pos0 + t;
        un->q[r] = s->q + (t * p->hq + h) * p->d;
        un->out[r] = s->o + (t * p->hq + h) * p->dv;
        un->dst[r] = s->n_chunks == 1 ? un->out[r] : s->part + (u * AKV_ROWS + r) * p->dv;
        un->hi[r] = pos + 1;
        un->lo[r] = p->window > 0 && pos - p->window + 1 > 0 ? pos - p->window + 1 : 0;
        ulo = un->lo[r] < ulo ? un->lo[r] : ulo;
        uhi = un->hi[r] > uhi ? un->hi[r] : uhi;
    }
    int64_t len = (uhi - ulo + s->n_chunks - 1) / s->n_chunks;
    un->a = ulo + c * len < uhi ? ulo + c * len : uhi;
    un->b = un->a + len < uhi ? un->a + len : uhi;
    un->k = s->k + g * s->ks1 * s->esz;
    un->v = s->v + g * s->vs1 * s->esz;
}

/* ---- attention_kv: scalar kernels ---------------------------------------------------------- */

static inline float cache_get(const char *row, int64_t i, bool f16)
{
    return f16 ? pt_half_to_float(((const uint16_t *)row)[i]) : ((const float *)row)[i];
}

/* sc[r][j] = q_r . k_(a+j) for the unit's rows. */
static void dots_scalar(const akv_ctx *s, const akv_unit *un, float *sc, int64_t ld)
{
    for (int r = 0; r < un->n; r++)
        for (int64_t j = un->a; j < un->b; j++) {
            const char *kr = un->k + j * s->ks0 * s->esz;
            float acc = 0;
            for (int64_t d = 0; d < s->p->d; d++)
                acc += un->q[r][d] * cache_get(kr, d, s->f16);
            sc[r * ld + (j - un->a)] = acc;
        }
}

/* dst_r = sum_j w[r][j] v_(a+j) for the unit's rows. */
static void values_scalar(const akv_ctx *s, const akv_unit *un, const float *w, int64_t ld)
{
    int64_t dv = s->p->dv;
    for (int r = 0; r < un->n; r++) {
        float *o = un->dst[r];
        memset(o, 0, (size_t)dv * sizeof(float));
        for (int64_t j = un->a; j < un->b; j++) {
            const char *vr = un->v + j * s->vs0 * s->esz;
            float wj = w[r * ld + (j - un->a)];
            for (int64_t d = 0; d < dv; d++)
                o[d] += wj * cache_get(vr, d, s->f16);
        }
    }
}

/* ---- attention_kv: AVX2 + F16C kernels ----------------------------------------------------- */

#if LLM_HAVE_X86
AVX2 static inline __m256 ld8(const char *row, int64_t i, bool f16)
{
    if (f16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
    return _mm256_loadu_ps((const float *)row + i);
}

/* The eight horizontal sums of a0..a7, in lane order. */
AVX2 static inline __m256 hsum8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                                __m256 a6, __m256 a7)
{
    __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
    __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* One query row against 8 keys at a time (the key rows differ, so each is converted once). */
AVX2 static void dots_row_avx2(const akv_ctx *s, const akv_unit *un, const float *q, float *sc)
{
    const int64_t D = s->p->d, D8 = D & ~(int64_t)7, kstep = s->ks0 * s->esz;
    const bool f16 = s->f16;
    for (int64_t j = un->a; j < un->b; j += 8) {
        int64_t nk = un->b - j < 8 ? un->b - j : 8;
        const char *kr[8];
        for (int i = 0; i < 8; i++)
            kr[i] = un->k + (j + (i < nk ? i : nk - 1)) * kstep;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int64_t d = 0; d < D8; d += 8) {
            __m256 x = _mm256_loadu_ps(q + d);
            a0 = _mm256_fmadd_ps(x, ld8(kr[0], d, f16), a0);
            a1 = _mm256_fmadd_ps(x, ld8(kr[1], d, f16), a1);
            a2 = _mm256_fmadd_ps(x, ld8(kr[2], d, f16), a2);
            a3 = _mm256_fmadd_ps(x, ld8(kr[3], d, f16), a3);
            a4 = _mm256_fmadd_ps(x, ld8(kr[4], d, f16), a4);
            a5 = _mm256_fmadd_ps(x, ld8(kr[5], d, f16), a5);
            a6 = _mm256_fmadd_ps(x, ld8(kr[6], d, f16), a6);
            a7 = _mm256_fmadd_ps(x, ld8(kr[7], d, f16), a7);
        }
        float out[8];
        _mm256_storeu_ps(out, hsum8(a0, a1, a2, a3, a4, a5, a6, a7));
        for (int i = 0; i < nk; i++) {
            for (int64_t d = D8; d < D; d++)
                out[i] += q[d] * cache_get(kr[i], d, f16);
            sc[j - un->a + i] = out[i];
        }
    }
}

/* Up to four query rows against two keys at a time: each key row is converted once and used
 * for every row (rows past un->n repeat row 0 and are not stored). */
AVX2 static void dots_rows4_avx2(const akv_ctx *s, const akv_unit *un, float *sc, int64_t ld)
{
    const int64_t D = s->p->d, D8 = D & ~(int64_t)7, kstep = s->ks0 * s->esz;
    const bool f16 = s->f16;
    const float *q[AKV_ROWS];
    for (int r = 0; r < AKV_ROWS; r++)
        q[r] = un->q[r < un->n ? r : 0];
    for (int64_t j = un->a; j < un->b; j += 2) {
        int nk = un->b - j < 2 ? 1 : 2;
        const char *k0 = un->k + j * kstep, *k1 = un->k + (j + nk - 1) * kstep;
        __m256 a00 = _mm256_setzero_ps(), a10 = a00, a20 = a00, a30 = a00;
        __m256 a01 = a00, a11 = a00, a21 = a00, a31 = a00;
        for (int64_t d = 0; d < D8; d += 8) {
            __m256 kv0 = ld8(k0, d, f16), kv1 = ld8(k1, d, f16);
            __m256 x0 = _mm256_loadu_ps(q[0] + d), x1 = _mm256_loadu_ps(q[1] + d);
            __m256 x2 = _mm256_loadu_ps(q[2] + d), x3 = _mm256_loadu_ps(q[3] + d);
            a00 = _mm256_fmadd_ps(x0, kv0, a00);
            a10 = _mm256_fmadd_ps(x1, kv0, a10);
            a20 = _mm256_fmadd_ps(x2, kv0, a20);
            a30 = _mm256_fmadd_ps(x3, kv0, a30);
            a01 = _mm256_fmadd_ps(x0, kv1, a01);
            a11 = _mm256_fmadd_ps(x1, kv1, a11);
            a21 = _mm256_fmadd_ps(x2, kv1, a21);
            a31 = _mm256_fmadd_ps(x3, kv1, a31);
        }
        float out[8];
        _mm256_storeu_ps(out, hsum8(a00, a10, a20, a30, a01, a11, a21, a31));
        for (int i = 0; i < nk; i++) {
            const char *kr = i ? k1 : k0;
            for (int r = 0; r < un->n; r++) {
                float acc = out[4 * i + r];
                for (int64_t d = D8; d < D; d++)
                    acc += q[r][d] * cache_get(kr, d, f16);
                sc[r * ld + (j - un->a) + i] = acc;
            }
        }
    }
}

/* Two query rows against four keys at a time (a GQA group of two). */
AVX2 static void dots_rows2_avx2(const akv_ctx *s, const akv_unit *un, float *sc, int64_t ld)
{
    const int64_t D = s->p->d, D8 = D & ~(int64_t)7, kstep = s->ks0 * s->esz;
    const bool f16 = s->f16;
    const float *q0 = un->q[0], *q1 = un->q[1];
    for (int64_t j = un->a; j < un->b; j += 4) {
        int nk = un->b - j < 4 ? (int)(un->b - j) : 4;
        const char *kr[4];
        for (int i = 0; i < 4; i++)
            kr[i] = un->k + (j + (i < nk ? i : nk - 1)) * kstep;
        __m256 a00 = _mm256_setzero_ps(), a10 = a00, a01 = a00, a11 = a00;
        __m256 a02 = a00, a12 = a00, a03 = a00, a13 = a00;
        for (int64_t d = 0; d < D8; d += 8) {
            __m256 x0 = _mm256_loadu_ps(q0 + d), x1 = _mm256_loadu_ps(q1 + d);
            __m256 k0 = ld8(kr[0], d, f16), k1 = ld8(kr[1], d, f16);
            __m256 k2 = ld8(kr[2], d, f16), k3 = ld8(kr[3], d, f16);
            a00 = _mm256_fmadd_ps(x0, k0, a00);
            a10 = _mm256_fmadd_ps(x1, k0, a10);
            a01 = _mm256_fmadd_ps(x0, k1, a01);
            a11 = _mm256_fmadd_ps(x1, k1, a11);
            a02 = _mm256_fmadd_ps(x0, k2, a02);
            a12 = _mm256_fmadd_ps(x1, k2, a12);
            a03 = _mm256_fmadd_ps(x0, k3, a03);
            a13 = _mm256_fmadd_ps(x1, k3, a13);
        }
        float out[8];
        _mm256_storeu_ps(out, hsum8(a00, a10, a01, a11, a02, a12, a03, a13));
        for (int i = 0; i < nk; i++)
            for (int r = 0; r < 2; r++) {
                float acc = out[2 * i + r];
                for (int64_t d = D8; d < D; d++)
                    acc += un->q[r][d] * cache_get(kr[i], d, f16);
                sc[r * ld + (j - un->a) + i] = acc;
            }
    }
}

/* Two rows at once: 32 outputs of each row per pass over the value rows. */
AVX2 static void values_rows2_avx2(const akv_ctx *s, const akv_unit *un, const float *w, int64_t ld)
{
    const int64_t Dv = s->p->dv, vstep = s->vs0 * s->esz, n = un->b - un->a;
    const bool f16 = s->f16;
    const char *v0 = un->v + un->a * vstep;
    const float *w0 = w, *w1 = w + ld;
    int64_t d = 0;
    for (; d + 32 <= Dv; d += 32) {
        __m256 c[2][4];
        for (int i = 0; i < 4; i++)
            c[0][i] = c[1][i] = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j++) {
            const char *vr = v0 + j * vstep;
            __m256 b0 = _mm256_broadcast_ss(w0 + j), b1 = _mm256_broadcast_ss(w1 + j);
            for (int i = 0; i < 4; i++) {
                __m256 x = ld8(vr, d + 8 * i, f16);
                c[0][i] = _mm256_fmadd_ps(b0, x, c[0][i]);
                c[1][i] = _mm256_fmadd_ps(b1, x, c[1][i]);
            }
        }
        for (int i = 0; i < 4; i++) {
            _mm256_storeu_ps(un->dst[0] + d + 8 * i, c[0][i]);
            _mm256_storeu_ps(un->dst[1] + d + 8 * i, c[1][i]);
        }
    }
    for (; d < Dv; d++)
        for (int r = 0; r < 2; r++) {
            const float *wr = r ? w1 : w0;
            float acc = 0;
            for (int64_t j = 0; j < n; j++)
                acc += wr[j] * cache_get(v0 + j * vstep, d, f16);
            un->dst[r][d] = acc;
        }
}

/* dst = sum_j w[j] v_(a+j) for one row: 64 outputs at a time in eight accumulators. */
AVX2 static void values_row_avx2(const akv_ctx *s, const akv_unit *un, const float *w, float *dst)
{
    const int64_t Dv = s->p->dv, vstep = s->vs0 * s->esz, n = un->b - un->a;
    const bool f16 = s->f16;
    const char *v0 = un->v + un->a * vstep;
    int64_t d = 0;
    for (; d + 64 <= Dv; d += 64) {
        __m256 c[8];
        for (int i = 0; i < 8; i++)
            c[i] = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j++) {
            const char *vr = v0 + j * vstep;
            __m256 wj = _mm256_broadcast_ss(w + j);
            for (int i = 0; i < 8; i++)
                c[i] = _mm256_fmadd_ps(wj, ld8(vr, d + 8 * i, f16), c[i]);
        }
        for (int i = 0; i < 8; i++)
            _mm256_storeu_ps(dst + d + 8 * i, c[i]);
    }
    for (; d + 8 <= Dv; d += 8) {
        __m256 c0 = _mm256_setzero_ps(), c1 = c0;
        int64_t j = 0;
        for (; j + 2 <= n; j += 2) {
            c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + j), ld8(v0 + j * vstep, d, f16), c0);
            c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + j + 1), ld8(v0 + (j + 1) * vstep, d, f16),
                                 c1);
        }
        if (j < n)
            c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + j), ld8(v0 + j * vstep, d, f16), c0);
        _mm256_storeu_ps(dst + d, _mm256_add_ps(c0, c1));
    }
    for (; d < Dv; d++) {
        float acc = 0;
        for (int64_t j = 0; j < n; j++)
            acc += w[j] * cache_get(v0 + j * vstep, d, f16);
        dst[d] = acc;
    }
}

/* Up to four rows at once: 16 outputs of each row per pass over the value rows, so each value
 * row is converted once for all the rows. */
AVX2 static void values_rows4_avx2(const akv_ctx *s, const akv_unit *un, const float *w, int64_t ld)
{
    const int64_t Dv = s->p->dv, vstep = s->vs0 * s->esz, n = un->b - un->a;
    const bool f16 = s->f16;
    const char *v0 = un->v + un->a * vstep;
    const float *wr[AKV_ROWS];
    for (int r = 0; r < AKV_ROWS; r++)
        wr[r] = w + (r < un->n ? r : 0) * ld;
    int64_t d = 0;
    for (; d + 16 <= Dv; d += 16) {
        __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
        __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
        for (int64_t j = 0; j < n; j++) {
            const char *vr = v0 + j * vstep;
            __m256 x0 = ld8(vr, d, f16), x1 = ld8(vr, d + 8, f16);
            __m256 w0 = _mm256_broadcast_ss(wr[0] + j), w1 = _mm256_broadcast_ss(wr[1] + j);
            __m256 w2 = _mm256_broadcast_ss(wr[2] + j), w3 = _mm256_broadcast_ss(wr[3] + j);
            c00 = _mm256_fmadd_ps(w0, x0, c00);
            c01 = _mm256_fmadd_ps(w0, x1, c01);
            c10 = _mm256_fmadd_ps(w1, x0, c10);
            c11 = _mm256_fmadd_ps(w1, x1, c11);
            c20 = _mm256_fmadd_ps(w2, x0, c20);
            c21 = _mm256_fmadd_ps(w2, x1, c21);
            c30 = _mm256_fmadd_ps(w3, x0, c30);
            c31 = _mm256_fmadd_ps(w3, x1, c31);
        }
        __m256 c[AKV_ROWS][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
        for (int r = 0; r < un->n; r++) {
            _mm256_storeu_ps(un->dst[r] + d, c[r][0]);
            _mm256_storeu_ps(un->dst[r] + d + 8, c[r][1]);
        }
    }
    for (; d < Dv; d++)
        for (int r = 0; r < un->n; r++) {
            float acc = 0;
            for (int64_t j = 0; j < n; j++)
                acc += wr[r][j] * cache_get(v0 + j * vstep, d, f16);
            un->dst[r][d] = acc;
        }
}

/* x[i] = exp(x[i] - m); returns the sum in double (blocks of float lanes added to a double, as
 * ggml's soft_max sums in ggml_float). */
AVX2 static double exp_sum_avx2(float *x, int64_t n, float m)
{
    __m256 vm = _mm256_set1_ps(m);
    double s = 0;
    int64_t i = 0;
    while (i + 8 <= n) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t end = i + 256 < n ? i + 256 : n; i + 8 <= end; i += 8) {
            __m256 e = pti_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
            _mm256_storeu_ps(x + i, e);
            acc = _mm256_add_ps(acc, e);
        }
        float l[8];
        _mm256_storeu_ps(l, acc);
        s += ((double)l[0] + l[1]) + ((double)l[2] + l[3]) + ((double)l[4] + l[5]) +
             ((double)l[6] + l[7]);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - m);
        s += x[i];
    }
    return s;
}

/* w[i] *= inv, then rounded to float16 when f16. */
AVX2 static void normalize_avx2(float *w, int64_t n, float inv, bool f16)
{
    __m256 vi = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_mul_ps(_mm256_loadu_ps(w + i), vi);
        if (f16)
            x = _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        _mm256_storeu_ps(w + i, x);
    }
    for (; i < n; i++)
        w[i] = f16 ? round_f16(w[i] * inv) : w[i] * inv;
}

AVX2 static void round_f16_avx2(float *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                                                  _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++)
        dst[i] = round_f16(src[i]);
}
#endif

/* ---- attention_kv: the three steps of a unit ------------------------------------------------ */

/* Scores of the unit's rows over its keys, scaled and masked (-inf where not visible), in
 * sc[r * ld + j]; mx[r] = each row's max. */
static void unit_scores(const akv_ctx *s, const akv_unit *un, float *sc, int64_t ld, float *mx)
{
#if LLM_HAVE_X86
    if (s->avx2) {
        if (un->n == 1)
            dots_row_avx2(s, un, un->q[0], sc);
        else if (un->n == 2)
            dots_rows2_avx2(s, un, sc, ld);
        else
            dots_rows4_avx2(s, un, sc, ld);
    } else
#endif
        dots_scalar(s, un, sc, ld);
    const float scale = s->p->scale;
    for (int r = 0; r < un->n; r++) {
        float *row = sc + r * ld, m = -INFINITY;
        for (int64_t j = un->a; j < un->b; j++) {
            float x = j >= un->lo[r] && j < un->hi[r] ? row[j - un->a] * scale : -INFINITY;
            row[j - un->a] = x;
            m = x > m ? x : m;
        }
        mx[r] = m;
    }
}

static double unit_exp_sum(const akv_ctx *s, float *row, int64_t n, float m)
{
#if LLM_HAVE_X86
    if (s->avx2)
        return exp_sum_avx2(row, n, m);
#endif
    (void)s;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        row[i] = expf(row[i] - m);
        sum += row[i];
    }
    return sum;
}

/* Turns row r's exponentials into weights with the total `sum` (float16-rounded for a float16
 * cache, as ggml's KQV matmul converts them), for every row; then writes weights . v. */
static void unit_values(const akv_ctx *s, const akv_unit *un, float *sc, int64_t ld,
                        const double *sum)
{
    int64_t n = un->b - un->a;
    for (int r = 0; r < un->n; r++) {
        float inv = (float)(1.0 / sum[r]);
        float *w = sc + r * ld;
#if LLM_HAVE_X86
        if (s->avx2) {
            normalize_avx2(w, n, inv, s->f16);
            continue;
        }
#endif
        for (int64_t j = 0; j < n; j++)
            w[j] = s->f16 ? round_f16(w[j] * inv) : w[j] * inv;
    }
#if LLM_HAVE_X86
    if (s->avx2) {
        if (un->n == 1)
            values_row_avx2(s, un, sc, un->dst[0]);
        else if (un->n == 2)
            values_rows2_avx2(s, un, sc, ld);
        else
            values_rows4_avx2(s, un, sc, ld);
        return;
    }
#endif
    values_scalar(s, un, sc, ld);
}

/* ---- attention_kv: schedules ----------------------------------------------------------------- */

/* Single pass: each unit covers all the keys of its rows. */
static void akv_single_range(void *arg, int64_t u0, int64_t u1)
{
    akv_ctx *s = arg;
    size_t bytes = (size_t)(AKV_ROWS * s->span) * sizeof(float);
    float *sc = pti_cpu_alloc(bytes ? bytes : sizeof(float));
    if (!sc) {
        atomic_store(&s->oom, true);
        return;
    }
    for (int64_t u = u0; u < u1; u++) {
        akv_unit un;
        unit_init(s, u, &un);
        float mx[AKV_ROWS];
        double sum[AKV_ROWS];
        unit_scores(s, &un, sc, s->span, mx);
        for (int r = 0; r < un.n; r++)
            sum[r] = unit_exp_sum(s, sc + r * s->span, un.b - un.a, mx[r]);
        unit_values(s, &un, sc, s->span, sum);
    }
    pti_cpu_free(sc, bytes ? bytes : sizeof(float));
}

/* Split keys, pass 1: each chunk's scores and maxima. */
static void akv_split_scores(void *arg, int64_t u0, int64_t u1)
{
    akv_ctx *s = arg;
    for (int64_t u = u0; u < u1; u++) {
        akv_unit un;
        unit_init(s, u, &un);
        unit_scores(s, &un, s->sc + u * AKV_ROWS * s->span, s->span, s->mx + u * AKV_ROWS);
    }
}

/* Pass 2: exponentials against the max over all chunks of the row, and the chunk sums. */
static void akv_split_exp(void *arg, int64_t u0, int64_t u1)
{
    akv_ctx *s = arg;
    for (int64_t u = u0; u < u1; u++) {
        akv_unit un;
        unit_init(s, u, &un);
        int64_t first = u - u % s->n_chunks;
        for (int r = 0; r < un.n; r++) {
            float m = -INFINITY;
            for (int64_t c = 0; c < s->n_chunks; c++) {
                float x = s->mx[(first + c) * AKV_ROWS + r];
                m = x > m ? x : m;
            }
            s->sum[u * AKV_ROWS + r] =
                unit_exp_sum(s, s->sc + (u * AKV_ROWS + r) * s->span, un.b - un.a, m);
        }
    }
}

/* Pass 3: weights with the total sum, and each chunk's partial weights . v. */
static void akv_split_values(void *arg, int64_t u0, int64_t u1)
{
    akv_ctx *s = arg;
    for (int64_t u = u0; u < u1; u++) {
        akv_unit un;
        unit_init(s, u, &un);
        int64_t first = u - u % s->n_chunks;
        double total[AKV_ROWS];
        for (int r = 0; r < un.n; r++) {
            total[r] = 0;
            for (int64_t c = 0; c < s->n_chunks; c++)
                total[r] += s->sum[(first + c) * AKV_ROWS + r];
        }
        unit_values(s, &un, s->sc + u * AKV_ROWS * s->span, s->span, total);
    }
}

/* Adds up the chunks' partial outputs (in chunk order). */
static void akv_split_combine(akv_ctx *s, int64_t n_sets)
{
    int64_t dv = s->p->dv;
    for (int64_t set = 0; set < n_sets; set++) {
        akv_unit un;
        unit_init(s, set * s->n_chunks, &un);
        for (int r = 0; r < un.n; r++) {
            float *o = un.out[r];
            memcpy(o, s->part + (set * s->n_chunks * AKV_ROWS + r) * dv,
                   (size_t)dv * sizeof(float));
            for (int64_t c = 1; c < s->n_chunks; c++) {
                const float *pp = s->part + ((set * s->n_chunks + c) * AKV_ROWS + r) * dv;
                for (int64_t d = 0; d < dv; d++)
                    o[d] += pp[d];
            }
        }
    }
}

static pt_status akv_run_split(akv_ctx *s, int64_t n_sets)
{
    int64_t n_units = n_sets * s->n_chunks, rows = n_units * AKV_ROWS;
    size_t sc_b = (size_t)(rows * s->span) * sizeof(float), mx_b = (size_t)rows * sizeof(float);
    size_t sum_b = (size_t)rows * sizeof(double);
    size_t part_b = (size_t)(rows * s->p->dv) * sizeof(float);
    size_t total = sc_b + mx_b + sum_b + part_b + 64;
    char *buf = pti_cpu_alloc(total);
    if (!buf)
        return pti_error(PT_ERR_OOM, "pt_attention_kv: out of memory for %zu bytes of scratch",
                         total);
    s->sum = (double *)buf;
    s->sc = (float *)(buf + sum_b);
    s->mx = s->sc + rows * s->span;
    s->part = s->mx + rows;
    pti_parallel_for(n_units, 1, akv_split_scores, s);
    pti_parallel_for(n_units, 1, akv_split_exp, s);
    pti_parallel_for(n_units, 1, akv_split_values, s);
    akv_split_combine(s, n_sets);
    pti_cpu_free(buf, total);
    return PT_OK;
}

/* q as float16-rounded float32 values (a float16 cache), in a scratch the caller frees. */
static float *round_queries(const float *q, int64_t n, bool avx2)
{
    float *r = pti_cpu_alloc((size_t)n * sizeof(float));
    if (!r)
        return NULL;
#if LLM_HAVE_X86
    if (avx2) {
        round_f16_avx2(r, q, n);
        return r;
    }
#endif
    (void)avx2;
    for (int64_t i = 0; i < n; i++)
        r[i] = round_f16(q[i]);
    return r;
}

/* Rows of k's storage from k's first row on (at least k's own rows; a bound on the keys a
 * later call over a longer view of the same cache can pass). Capped to keep the scratch of a
 * huge storage reasonable. */
static int64_t key_capacity(const pt_tensor *k, int64_t ks0, int64_t esz)
{
    int64_t rows = k->shape[0];
    if (ks0 > 0) {
        size_t start = (size_t)k->offset * (size_t)esz, row_bytes = (size_t)(ks0 * esz);
        if (k->storage->nbytes > start) {
            int64_t fit = (int64_t)((k->storage->nbytes - start) / row_bytes);
            rows = fit > rows ? fit : rows;
        }
    }
    const int64_t max_rows = 1 << 17;
    return rows < max_rows || k->shape[0] >= max_rows ? rows : max_rows;
}

static pt_status cpu_attention_kv(const pti_call *c)
{
    const pti_attention_kv_params *p = c->params;
    const pt_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    akv_ctx s = {.p = p,
                 .f16 = k->dtype == PT_FLOAT16,
                 .avx2 = use_avx2(),
                 .q = pti_data(q),
                 .k = pti_data(k),
                 .v = pti_data(v),
                 .ks0 = k->stride[0],
                 .ks1 = k->stride[1],
                 .vs0 = v->stride[0],
                 .vs1 = v->stride[1],
                 .esz = k->dtype == PT_FLOAT16 ? 2 : 4,
                 .o = pti_data(c->out[0]),
                 .group = p->hq / p->hkv};
    atomic_init(&s.oom, false);
    s.nh = s.group < AKV_ROWS ? s.group : AKV_ROWS;
    s.nt = s.nh >= AKV_ROWS ? 1 : AKV_ROWS / s.nh;
    s.nt = s.nt < p->t ? s.nt : p->t;
    s.n_hb = (s.group + s.nh - 1) / s.nh;
    s.n_tb = (p->t + s.nt - 1) / s.nt;
    int64_t n_sets = s.n_tb * p->hkv * s.n_hb;
    /* keys one row set can see, and the multiply-adds of the whole call */
    int64_t seen = p->q_pos0 + p->t;
    if (p->window > 0 && p->window + s.nt < seen)
        seen = p->window + s.nt;
    double work = (double)p->t * (double)p->hq * (double)seen * (double)(p->d + p->dv);
    int threads = pt_get_num_threads();
    s.n_chunks = 1;
    if (threads > 1 && n_sets < threads && work >= 65536.0) {
        s.n_chunks = (threads + n_sets - 1) / n_sets;
        int64_t max_chunks = seen / 128 > 1 ? seen / 128 : 1;
        s.n_chunks = s.n_chunks < max_chunks ? s.n_chunks : max_chunks;
    }
    s.span = (seen + s.n_chunks - 1) / s.n_chunks;
    /* Size the score rows for every key k's storage can hold (k is usually a growing view of
     * a KV cache), not just the ones seen now, so decode steps at successive positions reuse
     * one scratch size and stop reaching the allocator. */
    int64_t cap = key_capacity(k, s.ks0, s.esz);
    int64_t cap_span = (cap + s.n_chunks - 1) / s.n_chunks;
    s.span = cap_span > s.span ? cap_span : s.span;
    float *qr = NULL;
    size_t qr_bytes = (size_t)(p->t * p->hq * p->d) * sizeof(float);
    if (s.f16) {
        qr = round_queries(s.q, p->t * p->hq * p->d, s.avx2);
        if (!qr)
            return pti_error(PT_ERR_OOM, "pt_attention_kv: out of memory rounding q");
        s.q = qr;
    }
    pt_status st = PT_OK;
    if (s.n_chunks > 1) {
        st = akv_run_split(&s, n_sets);
    } else {
        /* at least 64k multiply-adds per task */
        double per_set = work / (double)n_sets;
        int64_t grain = per_set >= 65536.0 ? 1 : (int64_t)(65536.0 / (per_set + 1.0)) + 1;
        pti_parallel_for(n_sets, grain, akv_single_range, &s);
    }
    if (st == PT_OK && atomic_load(&s.oom))
        st = pti_error(PT_ERR_OOM, "pt_attention_kv: out of memory for the score scratch");
    if (qr)
        pti_cpu_free(qr, qr_bytes);
    return st;
}

void pti_cpu_register_nn_llm(pti_kernel *table)
{
    table[PTI_OP_rope] = cpu_rope;
    table[PTI_OP_attention_kv] = cpu_attention_kv;
}
