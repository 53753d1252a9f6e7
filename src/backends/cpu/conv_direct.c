/* Direct float32 convolution for stride 1 on AVX-512 CPUs (declared in conv_direct.h), used by
 * conv.c for conv2d and for the stride-1 conv_transpose2d that is a convolution's input gradient.
 *
 * Why: im2col + GEMM writes the column matrix (kh*kw times the input) and OpenBLAS packs it
 * again; on the CNN and ResNet-20 training steps that copying cost as much as the arithmetic.
 * Here the input of each image is copied once into a zero-bordered plane set xp [C, Hp, Wp]
 * (Hp = H + 2*ph, Wp = W + 2*pw). With outputs numbered on the padded width, q = oh*Wp + ow,
 * every tap (c, i, j) reads a contiguous run of xp: y[co, q] = sum_k w[co, k] * xp[koff[k] + q]
 * with koff[(c, i, j)] = c*Hp*Wp + i*Wp + j. So the column matrix is never built: a register tile
 * of 8 output channels x 32 positions accumulates over all C*kh*kw taps with two vector loads
 * and eight broadcast weights per tap, then the tile goes to a per-image buffer yq [Co, Qr] from
 * which the valid columns (ow < OW) are copied to y with the bias. The positions ow >= OW are
 * computed and dropped (Wp/OW - 1 of the work: 7% at 28 wide, 14% at 14, 29% at 7).
 *
 * Images are split across the thread pool in one chunk per thread, each with its own scratch.
 * The sums run over the taps in order (c, i, j), in float with FMA, as OpenBLAS's GEMM does
 * over the same K; the results match PyTorch within the conv tests' tolerances. */
#include <string.h>

#include "conv_direct.h"

#define MR 8  /* output channels per register tile */
#define NR 32 /* output positions per register tile: two 16-float vectors */

/* Scratch per chunk bounded (floats): larger images take the im2col path. */
#define DIRECT_MAX_SCRATCH ((int64_t)4 << 20)

typedef struct direct_plan {
    const pti_direct_geom *g;
    int64_t Hp, Wp, K, Q, Qr;  /* padded plane, taps, outputs on the padded grid (rounded to NR) */
    int64_t xp_len, per_chunk; /* floats of xp, and of a chunk's scratch (xp then yq) */
} direct_plan;

static direct_plan make_plan(const pti_direct_geom *g)
{
    direct_plan p = {.g = g, .Hp = g->H + 2 * g->ph, .Wp = g->W + 2 * g->pw};
    p.K = g->C * g->kh * g->kw;
    p.Q = g->OH * p.Wp;
    p.Qr = (p.Q + NR - 1) / NR * NR;
    /* the last tile reads up to C*Hp*Wp + kw - 2 + (Qr - Q): a zeroed tail covers it */
    p.xp_len = g->C * p.Hp * p.Wp + (p.Qr - p.Q) + g->kw + NR;
    p.per_chunk = p.xp_len + g->Co * p.Qr;
    return p;
}

bool pti_cpu_conv_direct_ok(const pti_direct_geom *g)
{
#if defined(__x86_64__)
    if (!pti_cpu_has_avx512() || g->Co % MR != 0 || g->Co == 0 || g->C == 0 || g->N == 0)
        return false;
    if (g->kh * g->kw < 2 || g->OH < 1 || g->OW < 1 || g->ph < 0 || g->pw < 0)
        return false; /* 1x1 convolutions are GEMMs already (conv.c) */
    if (g->OH != g->H + 2 * g->ph - g->kh + 1 || g->OW != g->W + 2 * g->pw - g->kw + 1)
        return false;
    return make_plan(g).per_chunk <= DIRECT_MAX_SCRATCH;
#else
    (void)g;
    return false;
#endif
}

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512_ATTR __attribute__((target("avx512f")))

/* Two accumulators of output channel m: a##m##0, a##m##1 += w[m] * (x0, x1). */
#define DIRECT_FMA(m)                                                                              \
    {                                                                                              \
        __m512 b_ = _mm512_set1_ps(w[m]);                                                          \
        a##m##0 = _mm512_fmadd_ps(b_, x0, a##m##0);                                                \
        a##m##1 = _mm512_fmadd_ps(b_, x1, a##m##1);                                                \
    }
#define DIRECT_STORE(m)                                                                            \
    {                                                                                              \
        _mm512_storeu_ps(yq + (m)*ldy, a##m##0);                                                   \
        _mm512_storeu_ps(yq + (m)*ldy + 16, a##m##1);                                              \
    }

/* yq[m*ldy + 0..31] = sum_k w[k*MR + m] * xp[koff[k] + 0..31] for m < 8 (xp already offset to
 * the tile's first position). */
AVX512_ATTR static void direct_tile(const float *xp, const int64_t *koff, int64_t K, const float *w,
                                    float *yq, int64_t ldy)
{
    __m512 z = _mm512_setzero_ps();
    __m512 a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
    __m512 a40 = z, a41 = z, a50 = z, a51 = z, a60 = z, a61 = z, a70 = z, a71 = z;
    for (int64_t k = 0; k < K; k++, w += MR) {
        const float *s = xp + koff[k];
        __m512 x0 = _mm512_loadu_ps(s), x1 = _mm512_loadu_ps(s + 16);
        DIRECT_FMA(0)
        DIRECT_FMA(1)
        DIRECT_FMA(2)
        DIRECT_FMA(3)
        DIRECT_FMA(4)
        DIRECT_FMA(5)
        DIRECT_FMA(6)
        DIRECT_FMA(7)
    }
    DIRECT_STORE(0)
    DIRECT_STORE(1)
    DIRECT_STORE(2)
    DIRECT_STORE(3)
    DIRECT_STORE(4)
    DIRECT_STORE(5)
    DIRECT_STORE(6)
    DIRECT_STORE(7)
}
#undef DIRECT_FMA
#undef DIRECT_STORE

typedef struct direct_task {
    const direct_plan *p;
    const float *x, *wp, *bias;
    const int64_t *koff;
    float *y, *scratch;
    int64_t n_chunks;
} direct_task;

/* One image: x [C, H, W] into the padded planes, the tiles into yq, the valid columns to y. */
AVX512_ATTR static void direct_image(const direct_task *t, const float *x, float *xp, float *yq,
                                     float *y)
{
    const direct_plan *p = t->p;
    const pti_direct_geom *g = p->g;
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t ih = 0; ih < g->H; ih++)
            memcpy(xp + (c * p->Hp + ih + g->ph) * p->Wp + g->pw, x + (c * g->H + ih) * g->W,
                   sizeof(float) * (size_t)g->W);
    for (int64_t cb = 0; cb < g->Co / MR; cb++)
        for (int64_t q0 = 0; q0 < p->Qr; q0 += NR)
            direct_tile(xp + q0, t->koff, p->K, t->wp + cb * p->K * MR, yq + cb * MR * p->Qr + q0,
                        p->Qr);
    for (int64_t co = 0; co < g->Co; co++) {
        float b = t->bias ? t->bias[co] : 0.0f;
        for (int64_t oh = 0; oh < g->OH; oh++) {
            const float *s = yq + co * p->Qr + oh * p->Wp;
            float *d = y + (co * g->OH + oh) * g->OW;
            for (int64_t ow = 0; ow < g->OW; ow++)
                d[ow] = s[ow] + b;
        }
    }
}

/* Chunks [c0, c1) of the images, each with its scratch (xp zeroed once: the borders stay zero). */
static void direct_chunks(void *arg, int64_t c0, int64_t c1)
{
    const direct_task *t = arg;
    const direct_plan *p = t->p;
    const pti_direct_geom *g = p->g;
    for (int64_t c = c0; c < c1; c++) {
        float *xp = t->scratch + c * p->per_chunk, *yq = xp + p->xp_len;
        memset(xp, 0, sizeof(float) * (size_t)p->xp_len);
        for (int64_t n = c * g->N / t->n_chunks; n < (c + 1) * g->N / t->n_chunks; n++)
            direct_image(t, t->x + n * g->C * g->H * g->W, xp, yq,
                         t->y + n * g->Co * g->OH * g->OW);
    }
}

/* wp[(cb*K + k)*MR + m] = weight of output channel cb*MR + m at tap k = (c*kh + i)*kw + j. */
static void pack_weights(const pti_direct_geom *g, const float *w, bool transposed, float *wp)
{
    int64_t K = g->C * g->kh * g->kw, khw = g->kh * g->kw;
    for (int64_t co = 0; co < g->Co; co++)
        for (int64_t c = 0; c < g->C; c++)
            for (int64_t r = 0; r < khw; r++) {
                /* a transposed weight [C, Co, kh, kw] is read flipped: tap r is khw - 1 - r */
                float v = transposed ? w[(c * g->Co + co) * khw + khw - 1 - r]
                                     : w[(co * g->C + c) * khw + r];
                wp[((co / MR) * K + c * khw + r) * MR + co % MR] = v;
            }
}

pt_status pti_cpu_conv_direct_f32(const pti_direct_geom *g, const float *x, const float *w,
                                  bool transposed, const float *bias, float *y)
{
    direct_plan p = make_plan(g);
    int threads = pt_get_num_threads();
    int64_t n_chunks = threads < 1 ? 1 : (threads > g->N ? g->N : threads);
    size_t scratch_bytes = sizeof(float) * (size_t)(n_chunks * p.per_chunk);
    size_t wp_bytes = sizeof(float) * (size_t)(p.K * g->Co), koff_bytes = sizeof(int64_t) * p.K;
    float *scratch = pti_cpu_alloc(scratch_bytes), *wp = pti_cpu_alloc(wp_bytes);
    int64_t *koff = pti_cpu_alloc(koff_bytes);
    if (!scratch || !wp || !koff) {
        pti_cpu_free(scratch, scratch_bytes);
        pti_cpu_free(wp, wp_bytes);
        pti_cpu_free(koff, koff_bytes);
        return pti_error(PT_ERR_OOM, "conv2d: out of memory for %zu bytes of scratch",
                         scratch_bytes + wp_bytes + koff_bytes);
    }
    pack_weights(g, w, transposed, wp);
    for (int64_t c = 0, k = 0; c < g->C; c++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++)
                koff[k++] = (c * p.Hp + i) * p.Wp + j;
    direct_task t = {.p = &p,
                     .x = x,
                     .wp = wp,
                     .bias = bias,
                     .koff = koff,
                     .y = y,
                     .scratch = scratch,
                     .n_chunks = n_chunks};
    pti_parallel_for(n_chunks, 1, direct_chunks, &t);
    pti_cpu_free(scratch, scratch_bytes);
    pti_cpu_free(wp, wp_bytes);
    pti_cpu_free(koff, koff_bytes);
    return PT_OK;
}
/* ---- weight gradient ------------------------------------------------------------------------
 * gw[co, k] = sum over images and positions q of go[co, q] * xp[koff[k] + q], with go laid out on
 * the padded grid (zero at ow >= OW). A chunk of nb images is stacked into one tall plane set
 * (image b's padded planes at rows b*Hp..), so positions run across images and a register tile
 * of 8 channels x 2 taps sums a long run before its 16 horizontal sums. nb keeps a chunk's
 * planes (C + Co channels) near 256 KiB, in L2. Each thread sums its chunks into its own
 * partial gradient; the partials are added at the end. */

typedef struct wgrad_task {
    const direct_plan *p;
    const float *x, *go;
    const int64_t *koff; /* taps on the stacked planes: c*L + i*Wp + j */
    float *scratch, *partial;
    int64_t nb, L, Lr, chunk_floats, n_parts; /* images per chunk, floats per stacked plane */
} wgrad_task;

/* gw[m*K + k + t] += sum_q go[m*ld + q] * xs[koff[k + t] + q], m < 8, t < 2 (t < 1 if one tap). */
AVX512_ATTR static void wgrad_tile(const float *go, int64_t ld, const float *xs,
                                   const int64_t *koff, int64_t k, int64_t taps, int64_t n,
                                   float *gw, int64_t K)
{
    const float *x0p = xs + koff[k], *x1p = xs + koff[taps > 1 ? k + 1 : k];
    __m512 acc[MR][2];
    for (int m = 0; m < MR; m++)
        acc[m][0] = acc[m][1] = _mm512_setzero_ps();
    for (int64_t q = 0; q < n; q += 16) {
        __m512 x0 = _mm512_loadu_ps(x0p + q), x1 = _mm512_loadu_ps(x1p + q);
        for (int m = 0; m < MR; m++) {
            __m512 g = _mm512_loadu_ps(go + m * ld + q);
            acc[m][0] = _mm512_fmadd_ps(g, x0, acc[m][0]);
            acc[m][1] = _mm512_fmadd_ps(g, x1, acc[m][1]);
        }
    }
    for (int m = 0; m < MR; m++) {
        gw[m * K + k] += _mm512_reduce_add_ps(acc[m][0]);
        if (taps > 1)
            gw[m * K + k + 1] += _mm512_reduce_add_ps(acc[m][1]);
    }
}

/* Chunk images [n0, n1) stacked: xs [C, L] (zero borders), gs [Co, Lr] (zero off the outputs). */
static void wgrad_stack(const wgrad_task *t, int64_t n0, int64_t n1, float *xs, float *gs)
{
    const direct_plan *p = t->p;
    const pti_direct_geom *g = p->g;
    memset(xs, 0, sizeof(float) * (size_t)t->chunk_floats);
    for (int64_t n = n0; n < n1; n++) {
        int64_t b = n - n0;
        for (int64_t c = 0; c < g->C; c++)
            for (int64_t ih = 0; ih < g->H; ih++)
                memcpy(xs + c * t->L + (b * p->Hp + ih + g->ph) * p->Wp + g->pw,
                       t->x + ((n * g->C + c) * g->H + ih) * g->W, sizeof(float) * (size_t)g->W);
        for (int64_t co = 0; co < g->Co; co++)
            for (int64_t oh = 0; oh < g->OH; oh++)
                memcpy(gs + co * t->Lr + (b * p->Hp + oh) * p->Wp,
                       t->go + ((n * g->Co + co) * g->OH + oh) * g->OW,
                       sizeof(float) * (size_t)g->OW);
    }
}

static void wgrad_parts(void *arg, int64_t r0, int64_t r1)
{
    const wgrad_task *t = arg;
    const direct_plan *p = t->p;
    const pti_direct_geom *g = p->g;
    int64_t n_chunks = (g->N + t->nb - 1) / t->nb;
    for (int64_t r = r0; r < r1; r++) {
        float *xs = t->scratch + r * t->chunk_floats, *gs = xs + g->C * t->L + t->Lr;
        float *gw = t->partial + r * g->Co * p->K;
        memset(gw, 0, sizeof(float) * (size_t)(g->Co * p->K));
        for (int64_t ch = r; ch < n_chunks; ch += t->n_parts) {
            int64_t n0 = ch * t->nb, n1 = n0 + t->nb < g->N ? n0 + t->nb : g->N;
            wgrad_stack(t, n0, n1, xs, gs);
            /* positions past the last image's outputs are zero in gs: the run can stop there */
            int64_t run = ((n1 - n0 - 1) * p->Hp * p->Wp + p->Q + 15) / 16 * 16;
            for (int64_t cb = 0; cb < g->Co / MR; cb++)
                for (int64_t k = 0; k < p->K; k += 2)
                    wgrad_tile(gs + cb * MR * t->Lr, t->Lr, xs, t->koff, k, p->K - k > 1 ? 2 : 1,
                               run, gw + cb * MR * p->K, p->K);
        }
    }
}

pt_status pti_cpu_conv_direct_weight_grad_f32(const pti_direct_geom *g, const float *x,
                                              const float *go, float *gw)
{
    direct_plan p = make_plan(g);
    wgrad_task t = {.p = &p, .x = x, .go = go};
    int64_t per_image = (g->C + g->Co) * p.Hp * p.Wp;
    t.nb = ((int64_t)64 << 10) / (per_image > 0 ? per_image : 1);
    t.nb = t.nb < 1 ? 1 : (t.nb > g->N ? g->N : t.nb);
    /* stacked plane: nb images of Hp*Wp, plus the tail the last run and taps read past it */
    t.L = t.nb * p.Hp * p.Wp + g->kw + 32;
    t.Lr = (t.L + 15) / 16 * 16;
    t.chunk_floats = g->C * t.L + t.Lr + g->Co * t.Lr;
    int threads = pt_get_num_threads();
    int64_t n_chunks = (g->N + t.nb - 1) / t.nb;
    t.n_parts = threads < 1 ? 1 : (threads > n_chunks ? n_chunks : threads);
    size_t scratch_bytes = sizeof(float) * (size_t)(t.n_parts * t.chunk_floats);
    size_t part_bytes = sizeof(float) * (size_t)(t.n_parts * g->Co * p.K);
    size_t koff_bytes = sizeof(int64_t) * (size_t)p.K;
    float *scratch = pti_cpu_alloc(scratch_bytes), *partial = pti_cpu_alloc(part_bytes);
    int64_t *koff = pti_cpu_alloc(koff_bytes);
    if (!scratch || !partial || !koff) {
        pti_cpu_free(scratch, scratch_bytes);
        pti_cpu_free(partial, part_bytes);
        pti_cpu_free(koff, koff_bytes);
        return pti_error(PT_ERR_OOM, "conv2d_weight_grad: out of memory for %zu bytes of scratch",
                         scratch_bytes + part_bytes + koff_bytes);
    }
    for (int64_t c = 0, k = 0; c < g->C; c++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++)
                koff[k++] = c * t.L + i * p.Wp + j;
    t.koff = koff;
    t.scratch = scratch;
    t.partial = partial;
    pti_parallel_for(t.n_parts, 1, wgrad_parts, &t);
    int64_t n = g->Co * p.K;
    memcpy(gw, partial, sizeof(float) * (size_t)n);
    for (int64_t r = 1; r < t.n_parts; r++)
        for (int64_t i = 0; i < n; i++)
            gw[i] += partial[r * n + i];
    pti_cpu_free(scratch, scratch_bytes);
    pti_cpu_free(partial, part_bytes);
    pti_cpu_free(koff, koff_bytes);
    return PT_OK;
}
#else
pt_status pti_cpu_conv_direct_f32(const pti_direct_geom *g, const float *x, const float *w,
                                  bool transposed, const float *bias, float *y)
{
    (void)g, (void)x, (void)w, (void)transposed, (void)bias, (void)y;
    return pti_error(PT_ERR_UNSUPPORTED, "conv2d: no direct kernel on this CPU");
}

pt_status pti_cpu_conv_direct_weight_grad_f32(const pti_direct_geom *g, const float *x,
                                              const float *go, float *gw)
{
    (void)g, (void)x, (void)go, (void)gw;
    return pti_error(PT_ERR_UNSUPPORTED, "conv2d_weight_grad: no direct kernel on this CPU");
}
#endif
