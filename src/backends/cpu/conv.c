/* CPU kernels of the conv family, convolutions part (front-ends in src/ops/conv.c):
 *
 * - conv2d: im2col + OpenBLAS GEMM. Images are processed in chunks whose column buffer stays
 *   under the column budget (256 KiB); a chunk's columns sit side by side ([K, nb*P]) so one GEMM
 *   per group covers several images, then the result is scattered to NCHW with the bias. An
 *   image too large for the budget is processed a block of output rows at a time. 1x1
 *   convolutions with stride 1 and no padding skip im2col (the input already is the column
 *   matrix); grouped convolutions with few output channels per group (depthwise) run a direct
 *   loop over output planes instead of many tiny GEMMs.
 * - conv_transpose2d (also the input gradient of conv2d): per chunk of images, col = W^T x (one
 *   GEMM per group over the chunk's gathered inputs), then col2im adds the columns into the
 *   output planes (blocks of input rows for a large image).
 * - conv2d_weight_grad: im2col per chunk as in conv2d, then gw += grad * col^T per group.
 * im2col/col2im/bias loops run on the thread pool; GEMMs use OpenBLAS's threads (never both
 * at once). float32 and float64 (float32 loops also built for AVX2+FMA, chosen at run time);
 * the front-end has converted every other float dtype. Integer forward convolutions arrive in
 * int64 and run plain direct loops (conv_int64 below): exact, and fast enough for what integer
 * convolutions are used for. Pooling, padding and interpolation kernels are
 * in conv_pool.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/conv.h"
#include "conv_direct.h"
#include "cpu.h"

/* Bytes of column buffer per step: several images side by side when they fit, else one image's
 * output rows in blocks (so a large image never needs a huge buffer). 256 KiB keeps the columns
 * and OpenBLAS's packed copy of them in a core's L2 cache between im2col and the GEMM: 8 MiB,
 * the old default, cost the CNN and ResNet-20 training steps a quarter of their time in cache
 * misses (im2col and sgemm_itcopy, measured with perf). PT_CONV_COL_BUDGET (bytes)
 * overrides it, read once at the first convolution (docs/architecture.md); the tests set it tiny to
 * run the row-block paths against PyTorch. */
static pthread_once_t col_budget_once = PTHREAD_ONCE_INIT;
static int64_t col_budget_bytes;

static void read_col_budget(void)
{
    const char *e = getenv("PT_CONV_COL_BUDGET");
    long long v = e ? atoll(e) : 0;
    col_budget_bytes = v > 0 ? (int64_t)v : ((int64_t)256 << 10);
}

static int64_t col_budget(void)
{
    pthread_once(&col_budget_once, read_col_budget);
    return col_budget_bytes;
}

/* Images per step (nb) and, when nb == 1, output rows per step (*blk, else rows_total). */
static int64_t chunk_plan(int64_t N, int64_t per_image, int64_t rows_total, int64_t per_row,
                          int64_t *blk)
{
    int64_t budget = col_budget();
    int64_t nb = per_image > 0 ? budget / per_image : N;
    nb = nb < 1 ? 1 : (nb > N ? N : nb);
    *blk = rows_total;
    if (nb == 1 && per_image > budget && per_row > 0) {
        int64_t b = budget / per_row;
        *blk = b < 1 ? 1 : (b > rows_total ? rows_total : b);
    }
    return nb;
}

/* Geometry of one conv2d / conv_transpose2d call (x [N,C,H,W] -> y [N,Co,OH,OW]). */
typedef struct conv_geom {
    int64_t N, C, H, W, Co, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, g;
    int64_t Cg, Cog; /* channels per group, input and output */
    int64_t HW, P;   /* H*W, OH*OW */
    size_t es;       /* element size: 4 or 8 */
    bool f64;
} conv_geom;

/* x [N,C,H,W], y [N,Co,OH,OW], kernel kh x kw. */
static conv_geom make_geom_of(const pt_tensor *x, const pt_tensor *y, int64_t kh, int64_t kw,
                              const pti_conv_params *p)
{
    conv_geom g = {
        .N = x->shape[0],
        .C = x->shape[1],
        .H = x->shape[2],
        .W = x->shape[3],
        .Co = y->shape[1],
        .OH = y->shape[2],
        .OW = y->shape[3],
        .kh = kh,
        .kw = kw,
        .sh = p->stride[0],
        .sw = p->stride[1],
        .ph = p->pad[0],
        .pw = p->pad[1],
        .dh = p->dilation[0],
        .dw = p->dilation[1],
        .g = p->groups,
        .es = pti_dtypes[x->dtype].size,
        .f64 = x->dtype == PT_FLOAT64,
    };
    g.Cg = g.C / g.g;
    g.Cog = g.Co / g.g;
    g.HW = g.H * g.W;
    g.P = g.OH * g.OW;
    return g;
}

/* conv2d / conv_transpose2d: in = {x, w, bias}, out = {y}. */
static conv_geom make_geom(const pti_call *c)
{
    const pt_tensor *w = c->in[1];
    return make_geom_of(c->in[0], c->out[0], w->shape[2], w->shape[3], c->params);
}

/* Positions o in [0, n_out) with 0 <= o*s + off < n_in form the range [*lo, *hi). */
static void valid_range(int64_t n_out, int64_t n_in, int64_t s, int64_t off, int64_t *lo,
                        int64_t *hi)
{
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t h = n_in - 1 - off < 0 ? 0 : (n_in - 1 - off) / s + 1;
    if (l > n_out)
        l = n_out;
    if (h > n_out)
        h = n_out;
    *lo = l;
    *hi = h < l ? l : h;
}

/* C[M,N] = op(A)[M,K] * op(B)[K,N] + beta * C, row-major, in float or double. */
static void gemm_ex(bool f64, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                    const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                    int64_t ldc)
{
    pti_gemm_args g = {.f64 = f64,
                       .trans_a = trans_a,
                       .trans_b = trans_b,
                       .M = M,
                       .N = N,
                       .K = K,
                       .alpha = 1.0,
                       .beta = beta,
                       .A = A,
                       .B = B,
                       .C = C,
                       .lda = lda,
                       .ldb = ldb,
                       .ldc = ldc};
    pti_cpu_gemm(&g);
}

/* C[M,N] = op(A)[M,K] * B[K,N]. */
static void gemm(bool f64, bool trans_a, int64_t M, int64_t N, int64_t K, const void *A,
                 int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc)
{
    gemm_ex(f64, trans_a, false, M, N, K, A, lda, B, ldb, 0.0, C, ldc);
}

/* ---- typed loops (float and double versions of each, generated by a local macro) ------------ */

/* add_bias: planes [p0, p1) of length n get bias[plane % n_ch] added.
 * scatter: tmp [Co, nb*P] -> y [nb, Co, P] plus bias; plane index = b*Co + co.
 * direct_plane: one output plane of a grouped convolution by direct accumulation.
 * col2im_plane: channel co's rows of col [Co*kh*kw, ld] (columns from col on, holding input
 * rows [iy0, iy1)) summed into the output plane yp; the first block (iy0 == 0) starts the plane
 * from the bias. */
#define CONV_TYPED_LOOPS(T, SFX, ATTR)                                                             \
    ATTR static void add_bias_##SFX(T *y, const T *bias, int64_t n_ch, int64_t n, int64_t p0,      \
                                    int64_t p1)                                                    \
    {                                                                                              \
        for (int64_t q = p0; q < p1; q++) {                                                        \
            T v = bias[q % n_ch], *d = y + q * n;                                                  \
            for (int64_t i = 0; i < n; i++)                                                        \
                d[i] += v;                                                                         \
        }                                                                                          \
    }                                                                                              \
    ATTR static void scatter_##SFX(T *y, const T *tmp, const T *bias, int64_t Co, int64_t P,       \
                                   int64_t ld, int64_t p0, int64_t p1)                             \
    {                                                                                              \
        for (int64_t q = p0; q < p1; q++) {                                                        \
            int64_t b = q / Co, co = q % Co;                                                       \
            const T *s = tmp + co * ld + b * P;                                                    \
            T *d = y + q * P, v = bias ? bias[co] : (T)0;                                          \
            for (int64_t i = 0; i < P; i++)                                                        \
                d[i] = s[i] + v;                                                                   \
        }                                                                                          \
    }                                                                                              \
    ATTR static void direct_plane_##SFX(const conv_geom *g, const T *x, const T *w, const T *bias, \
                                        T *y, int64_t n, int64_t co)                               \
    {                                                                                              \
        int64_t gi = co / g->Cog;                                                                  \
        T *yp = y + (n * g->Co + co) * g->P;                                                       \
        T b0 = bias ? bias[co] : (T)0;                                                             \
        for (int64_t i = 0; i < g->P; i++)                                                         \
            yp[i] = b0;                                                                            \
        for (int64_t ci = 0; ci < g->Cg; ci++) {                                                   \
            const T *xp = x + (n * g->C + gi * g->Cg + ci) * g->HW;                                \
            const T *wp = w + (co * g->Cg + ci) * g->kh * g->kw;                                   \
            for (int64_t i = 0; i < g->kh; i++) {                                                  \
                for (int64_t j = 0; j < g->kw; j++) {                                              \
                    T wv = wp[i * g->kw + j];                                                      \
                    int64_t off = j * g->dw - g->pw, lo, hi;                                       \
                    valid_range(g->OW, g->W, g->sw, off, &lo, &hi);                                \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                       \
                        int64_t ih = oh * g->sh - g->ph + i * g->dh;                               \
                        if (ih < 0 || ih >= g->H)                                                  \
                            continue;                                                              \
                        const T *xr = xp + ih * g->W;                                              \
                        T *yr = yp + oh * g->OW;                                                   \
                        if (g->sw == 1) {                                                          \
                            for (int64_t ow = lo; ow < hi; ow++)                                   \
                                yr[ow] += wv * xr[ow + off];                                       \
                        } else {                                                                   \
                            for (int64_t ow = lo; ow < hi; ow++)                                   \
                                yr[ow] += wv * xr[ow * g->sw + off];                               \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    ATTR static void col2im_plane_##SFX(const conv_geom *g, const T *col, int64_t ld,              \
                                        const T *bias, T *yp, int64_t co, int64_t iy0,             \
                                        int64_t iy1)                                               \
    {                                                                                              \
        T b0 = bias ? bias[co] : (T)0;                                                             \
        for (int64_t i = 0; iy0 == 0 && i < g->P; i++)                                             \
            yp[i] = b0;                                                                            \
        for (int64_t i = 0; i < g->kh; i++) {                                                      \
            for (int64_t j = 0; j < g->kw; j++) {                                                  \
                const T *cr = col + ((co * g->kh + i) * g->kw + j) * ld;                           \
                int64_t off = j * g->dw - g->pw, lo, hi;                                           \
                valid_range(g->W, g->OW, g->sw, off, &lo, &hi);                                    \
                for (int64_t iy = iy0; iy < iy1; iy++) {                                           \
                    int64_t oy = iy * g->sh - g->ph + i * g->dh;                                   \
                    if (oy < 0 || oy >= g->OH)                                                     \
                        continue;                                                                  \
                    T *yr = yp + oy * g->OW;                                                       \
                    const T *src = cr + (iy - iy0) * g->W;                                         \
                    for (int64_t ix = lo; ix < hi; ix++)                                           \
                        yr[ix * g->sw + off] += src[ix];                                           \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

#define AVX2_ATTR __attribute__((target("avx2,fma")))
CONV_TYPED_LOOPS(float, f32, )
CONV_TYPED_LOOPS(float, f32_avx2, AVX2_ATTR) /* the same loops vectorized 8-wide with FMA */
CONV_TYPED_LOOPS(double, f64, )
#undef AVX2_ATTR
#undef CONV_TYPED_LOOPS

/* ---- parallel tasks ------------------------------------------------------------------------- */

typedef struct conv_task {
    const conv_geom *g;
    const char *x; /* input (conv: first image of the chunk) */
    const char *w;
    const void *bias;
    char *y; /* output (conv: first image of the chunk) */
    char *col;
    const char *tmp;
    int64_t nb, ld;    /* images in the chunk, row length of col/tmp */
    int64_t ch, plane; /* gather: channels and plane size of the source */
    int64_t r0, r1;    /* im2col: output rows [r0, r1); col2im: input rows */
} conv_task;

/* One im2col row segment: dst[ow] = src[ow*s] for ow in [lo, hi), zero elsewhere in [0, n). */
#define IM2COL_SEGMENT(T)                                                                          \
    do {                                                                                           \
        T *d_ = (T *)dst;                                                                          \
        const T *s_ = (const T *)src;                                                              \
        for (int64_t o = 0; o < lo; o++)                                                           \
            d_[o] = 0;                                                                             \
        if (sw == 1)                                                                               \
            for (int64_t o = lo; o < hi; o++)                                                      \
                d_[o] = s_[o + off];                                                               \
        else                                                                                       \
            for (int64_t o = lo; o < hi; o++)                                                      \
                d_[o] = s_[o * sw + off];                                                          \
        for (int64_t o = hi; o < OW; o++)                                                          \
            d_[o] = 0;                                                                             \
    } while (0)

/* im2col rows [r0, r1): row r = (c, i, j) holds x[b, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]
 * at column (b*(t->r1 - t->r0) + oh - t->r0)*OW + ow for output rows oh in [t->r0, t->r1)
 * (zero outside the input). Rows are short (OW elements), so the
 * copies are plain loops rather than memcpy/memset calls. */
static void im2col_rows(void *arg, int64_t r0, int64_t r1)
{
    const conv_task *t = arg;
    const conv_geom *g = t->g;
    size_t es = g->es;
    int64_t OW = g->OW, sw = g->sw;
    for (int64_t r = r0; r < r1; r++) {
        int64_t c = r / (g->kh * g->kw), i = (r / g->kw) % g->kh, j = r % g->kw;
        int64_t off = j * g->dw - g->pw, lo, hi;
        valid_range(g->OW, g->W, g->sw, off, &lo, &hi);
        for (int64_t b = 0; b < t->nb; b++) {
            const char *plane = t->x + (size_t)((b * g->C + c) * g->HW) * es;
            char *dst = t->col + (size_t)(r * t->ld + b * (t->r1 - t->r0) * OW) * es;
            for (int64_t oh = t->r0; oh < t->r1; oh++, dst += OW * es) {
                int64_t ih = oh * g->sh - g->ph + i * g->dh;
                if (ih < 0 || ih >= g->H) {
                    memset(dst, 0, (size_t)OW * es);
                    continue;
                }
                const char *src = plane + (size_t)(ih * g->W) * es; /* row start; + off inside */
                if (es == 4)
                    IM2COL_SEGMENT(float);
                else
                    IM2COL_SEGMENT(double);
            }
        }
    }
}
#undef IM2COL_SEGMENT

static void scatter_task(void *arg, int64_t q0, int64_t q1)
{
    const conv_task *t = arg;
    const conv_geom *g = t->g;
    if (g->f64)
        scatter_f64((double *)t->y, (const double *)t->tmp, t->bias, g->Co, g->P, t->ld, q0, q1);
    else if (pti_cpu_has_avx2())
        scatter_f32_avx2((float *)t->y, (const float *)t->tmp, t->bias, g->Co, g->P, t->ld, q0, q1);
    else
        scatter_f32((float *)t->y, (const float *)t->tmp, t->bias, g->Co, g->P, t->ld, q0, q1);
}

static void add_bias_task(void *arg, int64_t q0, int64_t q1)
{
    const conv_task *t = arg;
    const conv_geom *g = t->g;
    if (g->f64)
        add_bias_f64((double *)t->y, t->bias, g->Co, g->P, q0, q1);
    else if (pti_cpu_has_avx2())
        add_bias_f32_avx2((float *)t->y, t->bias, g->Co, g->P, q0, q1);
    else
        add_bias_f32((float *)t->y, t->bias, g->Co, g->P, q0, q1);
}

static void direct_task(void *arg, int64_t q0, int64_t q1)
{
    const conv_task *t = arg;
    const conv_geom *g = t->g;
    for (int64_t q = q0; q < q1; q++) {
        if (g->f64)
            direct_plane_f64(g, (const double *)t->x, (const double *)t->w, t->bias, (double *)t->y,
                             q / g->Co, q % g->Co);
        else if (pti_cpu_has_avx2())
            direct_plane_f32_avx2(g, (const float *)t->x, (const float *)t->w, t->bias,
                                  (float *)t->y, q / g->Co, q % g->Co);
        else
            direct_plane_f32(g, (const float *)t->x, (const float *)t->w, t->bias, (float *)t->y,
                             q / g->Co, q % g->Co);
    }
}

/* col2im over planes q = b*Co + co of a chunk: image b's columns start at b*(rows)*W. */
static void col2im_task(void *arg, int64_t q0, int64_t q1)
{
    const conv_task *t = arg;
    const conv_geom *g = t->g;
    for (int64_t q = q0; q < q1; q++) {
        int64_t b = q / g->Co, co = q % g->Co;
        if (g->f64)
            col2im_plane_f64(g, (const double *)t->col + b * (t->r1 - t->r0) * g->W, t->ld, t->bias,
                             (double *)t->y + q * g->P, co, t->r0, t->r1);
        else if (pti_cpu_has_avx2())
            col2im_plane_f32_avx2(g, (const float *)t->col + b * (t->r1 - t->r0) * g->W, t->ld,
                                  t->bias, (float *)t->y + q * g->P, co, t->r0, t->r1);
        else
            col2im_plane_f32(g, (const float *)t->col + b * (t->r1 - t->r0) * g->W, t->ld, t->bias,
                             (float *)t->y + q * g->P, co, t->r0, t->r1);
    }
}

/* gather: src [nb, ch, plane] -> dst [ch, nb*plane] (the column layout of a chunk). */
static void gather_task(void *arg, int64_t q0, int64_t q1)
{
    const conv_task *t = arg;
    size_t es = t->g->es;
    for (int64_t q = q0; q < q1; q++) {
        int64_t b = q / t->ch, ch = q % t->ch;
        memcpy(t->col + (size_t)(ch * t->ld + b * t->plane) * es,
               t->x + (size_t)(q * t->plane) * es, (size_t)t->plane * es);
    }
}

/* Grain (in planes) so that a task covers roughly 32k elements. */
static int64_t plane_grain(int64_t plane)
{
    return plane >= 32768 ? 1 : 32768 / (plane > 0 ? plane : 1);
}

/* ---- conv2d ------------------------------------------------------------------------------------
 */

/* 1x1, stride 1, no padding: y[n, group] = W_group [Cog, Cg] * x[n, group] [Cg, HW]. */
static void conv_1x1(const conv_geom *g, const char *x, const char *w, const void *bias, char *y)
{
    size_t es = g->es;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t gi = 0; gi < g->g; gi++)
            gemm(g->f64, false, g->Cog, g->P, g->Cg, w + (size_t)(gi * g->Cog * g->Cg) * es, g->Cg,
                 x + (size_t)((n * g->C + gi * g->Cg) * g->HW) * es, g->HW,
                 y + (size_t)((n * g->Co + gi * g->Cog) * g->P) * es, g->P);
    if (bias) {
        conv_task t = {.g = g, .y = y, .bias = bias};
        pti_parallel_for(g->N * g->Co, plane_grain(g->P), add_bias_task, &t);
    }
}

static pt_status conv_im2col(const conv_geom *g, const char *x, const char *w, const void *bias,
                             char *y)
{
    size_t es = g->es;
    int64_t K = g->Cg * g->kh * g->kw, rows = g->C * g->kh * g->kw, blk;
    int64_t nb =
        chunk_plan(g->N, rows * g->P * (int64_t)es, g->OH, rows * g->OW * (int64_t)es, &blk);
    size_t col_bytes = (size_t)(rows * nb * blk * g->OW) * es;
    size_t tmp_bytes = nb > 1 ? (size_t)(g->Co * nb * g->P) * es : 0;
    char *col = pti_cpu_alloc(col_bytes);
    char *tmp = tmp_bytes ? pti_cpu_alloc(tmp_bytes) : NULL;
    if (!col || (tmp_bytes && !tmp)) {
        pti_cpu_free(col, col_bytes);
        pti_cpu_free(tmp, tmp_bytes);
        return pti_error(PT_ERR_OOM, "conv2d: out of memory for a %zu-byte column buffer",
                         col_bytes + tmp_bytes);
    }
    for (int64_t n0 = 0; n0 < g->N; n0 += nb) {
        int64_t cur = g->N - n0 < nb ? g->N - n0 : nb;
        char *yn = y + (size_t)(n0 * g->Co * g->P) * es;
        conv_task t = {.g = g,
                       .x = x + (size_t)(n0 * g->C * g->HW) * es,
                       .y = yn,
                       .col = col,
                       .tmp = tmp,
                       .nb = cur,
                       .bias = bias};
        /* one step per block of output rows (a single block unless the image is large) */
        for (int64_t oh0 = 0; oh0 < g->OH; oh0 += blk) {
            int64_t nrow = g->OH - oh0 < blk ? g->OH - oh0 : blk, ld = cur * nrow * g->OW;
            t.r0 = oh0;
            t.r1 = oh0 + nrow;
            t.ld = ld;
            int64_t row_grain = 32768 / (ld > 0 ? ld : 1);
            pti_parallel_for(rows, row_grain > 0 ? row_grain : 1, im2col_rows, &t);
            /* several images: into tmp [Co, ld], scattered below; one: straight into y */
            char *dst = cur > 1 ? tmp : yn + (size_t)(oh0 * g->OW) * es;
            int64_t ldc = cur > 1 ? ld : g->P;
            for (int64_t gi = 0; gi < g->g; gi++)
                gemm_ex(g->f64, false, false, g->Cog, ld, K, w + (size_t)(gi * g->Cog * K) * es, K,
                        col + (size_t)(gi * K * ld) * es, ld, 0.0,
                        dst + (size_t)(gi * g->Cog * ldc) * es, ldc);
        }
        if (cur > 1)
            pti_parallel_for(cur * g->Co, plane_grain(g->P), scatter_task, &t);
        else if (bias)
            pti_parallel_for(g->Co, plane_grain(g->P), add_bias_task, &t);
    }
    pti_cpu_free(col, col_bytes);
    pti_cpu_free(tmp, tmp_bytes);
    return PT_OK;
}

/* ---- integer reference path (int64) ---------------------------------------------------------- */

/* Integer convolutions wrap around like PyTorch's: the front-end widens every integer dtype to
 * int64 and narrows the result back, and sums/products mod 2^64 truncated to n bits equal the
 * same sums/products mod 2^n. The arithmetic runs in uint64_t, where wrap-around is defined. */
typedef struct int_conv_task {
    const conv_geom *g;
    const int64_t *x, *w, *bias;
    int64_t *y;
} int_conv_task;

/* The weight element [co, ci, kh, kw] of a conv2d ([Co, Cg, kH, kW]) or of a transposed one
 * ([C, Cog, kH, kW]: ci is the input channel, co the output channel within its group). */
static uint64_t int_w(const int_conv_task *t, bool transposed, int64_t co, int64_t ci, int64_t i,
                      int64_t j)
{
    const conv_geom *g = t->g;
    int64_t k = i * g->kw + j;
    if (transposed)
        return (uint64_t)t->w[(ci * g->Cog + co % g->Cog) * g->kh * g->kw + k];
    return (uint64_t)t->w[(co * g->Cg + ci % g->Cg) * g->kh * g->kw + k];
}

/* Input tap of output position o along one axis for kernel offset k: conv2d reads
 * o*s - p + k*d; a transposed conv reads i with i*s - p + k*d == o. -1 when there is none. */
static int64_t int_tap(bool transposed, int64_t o, int64_t k, int64_t s, int64_t p, int64_t d,
                       int64_t n)
{
    int64_t i = o * s - p + k * d;
    if (transposed) {
        int64_t num = o + p - k * d;
        if (num < 0 || num % s != 0)
            return -1;
        i = num / s;
    }
    return i >= 0 && i < n ? i : -1;
}

/* One output element y[n, co, oy, ox]. */
static int64_t int_conv_point(const int_conv_task *t, bool transposed, int64_t n, int64_t co,
                              int64_t oy, int64_t ox)
{
    const conv_geom *g = t->g;
    int64_t grp = co / g->Cog;
    uint64_t acc = t->bias ? (uint64_t)t->bias[co] : 0;
    for (int64_t cig = 0; cig < g->Cg; cig++) {
        int64_t ci = grp * g->Cg + cig;
        const int64_t *xp = t->x + (n * g->C + ci) * g->HW;
        for (int64_t i = 0; i < g->kh; i++) {
            int64_t iy = int_tap(transposed, oy, i, g->sh, g->ph, g->dh, g->H);
            for (int64_t j = 0; iy >= 0 && j < g->kw; j++) {
                int64_t ix = int_tap(transposed, ox, j, g->sw, g->pw, g->dw, g->W);
                if (ix >= 0)
                    acc += (uint64_t)xp[iy * g->W + ix] * int_w(t, transposed, co, ci, i, j);
            }
        }
    }
    return (int64_t)acc;
}

static void int_conv_planes(const int_conv_task *t, bool transposed, int64_t q0, int64_t q1)
{
    const conv_geom *g = t->g;
    for (int64_t q = q0; q < q1; q++) /* plane q = (n, co) */
        for (int64_t oy = 0; oy < g->OH; oy++)
            for (int64_t ox = 0; ox < g->OW; ox++)
                t->y[q * g->P + oy * g->OW + ox] =
                    int_conv_point(t, transposed, q / g->Co, q % g->Co, oy, ox);
}

static void int_conv_task_fn(void *arg, int64_t q0, int64_t q1)
{
    int_conv_planes(arg, false, q0, q1);
}

static void int_conv_transpose_task_fn(void *arg, int64_t q0, int64_t q1)
{
    int_conv_planes(arg, true, q0, q1);
}

/* conv2d (transposed = false) or conv_transpose2d on int64 tensors. */
static pt_status conv_int64(const pti_call *c, bool transposed)
{
    conv_geom g = make_geom(c);
    int_conv_task t = {.g = &g,
                       .x = pti_data(c->in[0]),
                       .w = pti_data(c->in[1]),
                       .bias = c->in[2] ? pti_data(c->in[2]) : NULL,
                       .y = pti_data(c->out[0])};
    pti_parallel_for(g.N * g.Co, plane_grain(g.P * g.Cg * g.kh * g.kw),
                     transposed ? int_conv_transpose_task_fn : int_conv_task_fn, &t);
    return PT_OK;
}

/* The direct kernel's geometry for g read as a stride-1 convolution with padding (ph, pw), when
 * the kernel takes it (float32, one group, no dilation, AVX-512: conv_direct.h). */
static bool direct_geom(const conv_geom *g, int64_t ph, int64_t pw, pti_direct_geom *d)
{
    if (g->f64 || g->g != 1 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1)
        return false;
    *d = (pti_direct_geom){.N = g->N,
                           .C = g->C,
                           .H = g->H,
                           .W = g->W,
                           .Co = g->Co,
                           .kh = g->kh,
                           .kw = g->kw,
                           .ph = ph,
                           .pw = pw,
                           .OH = g->OH,
                           .OW = g->OW};
    return pti_cpu_conv_direct_ok(d);
}

/* Picks the conv2d strategy for geometry g (also used by stride-1 transposed convolutions). */
static pt_status conv2d_run(const conv_geom *g, const char *x, const char *w, const void *bias,
                            char *y)
{
    conv_task t = {.g = g, .x = x, .w = w, .y = y, .bias = bias};
    pti_direct_geom dg;
    if (direct_geom(g, g->ph, g->pw, &dg))
        return pti_cpu_conv_direct_f32(&dg, (const float *)x, (const float *)w, false, bias,
                                       (float *)y);
    if (g->Cg * g->kh * g->kw == 0 || (g->g > 1 && g->Cog <= 4)) {
        /* no input channels (bias only), or depthwise-like: direct loops */
        pti_parallel_for(g->N * g->Co, plane_grain(g->P * g->Cg * g->kh * g->kw), direct_task, &t);
        return PT_OK;
    }
    if (g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&
        (g->N == 1 || g->P >= 1024)) {
        conv_1x1(g, x, w, bias, y);
        return PT_OK;
    }
    return conv_im2col(g, x, w, bias, y);
}

static pt_status cpu_conv2d(const pti_call *c)
{
    if (c->in[0]->dtype == PT_INT64)
        return conv_int64(c, false);
    conv_geom g = make_geom(c);
    return conv2d_run(&g, pti_data(c->in[0]), pti_data(c->in[1]),
                      c->in[2] ? pti_data(c->in[2]) : NULL, pti_data(c->out[0]));
}

/* ---- conv_transpose2d ----------------------------------------------------------------------- */

static pt_status cpu_conv_transpose2d(const pti_call *c)
{
    if (c->in[0]->dtype == PT_INT64)
        return conv_int64(c, true);
    conv_geom g = make_geom(c);
    /* stride 1 without output padding: a convolution with the flipped weight and padding k-1-p */
    pti_direct_geom dg;
    if (direct_geom(&g, g.kh - 1 - g.ph, g.kw - 1 - g.pw, &dg))
        return pti_cpu_conv_direct_f32(&dg, pti_data(c->in[0]), pti_data(c->in[1]), true,
                                       c->in[2] ? pti_data(c->in[2]) : NULL, pti_data(c->out[0]));
    size_t es = g.es;
    const char *x = pti_data(c->in[0]), *w = pti_data(c->in[1]);
    const void *bias = c->in[2] ? pti_data(c->in[2]) : NULL;
    char *y = pti_data(c->out[0]);
    int64_t Kc = g.Cog * g.kh * g.kw, rows = g.g * Kc; /* rows of col: per group, all */
    int64_t blk; /* input rows per step when one image does not fit */
    int64_t nb =
        chunk_plan(g.N, (rows + g.C) * g.HW * (int64_t)es, g.H, rows * g.W * (int64_t)es, &blk);
    size_t col_bytes = (size_t)(rows * nb * blk * g.W) * es + 1;
    size_t tmp_bytes = nb > 1 ? (size_t)(g.C * nb * g.HW) * es : 0;
    char *col = pti_cpu_alloc(col_bytes);
    char *tmp = tmp_bytes ? pti_cpu_alloc(tmp_bytes) : NULL;
    if (!col || (tmp_bytes && !tmp)) {
        pti_cpu_free(col, col_bytes);
        pti_cpu_free(tmp, tmp_bytes);
        return pti_error(PT_ERR_OOM, "conv_transpose2d: out of memory for %zu bytes",
                         col_bytes + tmp_bytes);
    }
    for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
        int64_t cur = g.N - n0 < nb ? g.N - n0 : nb;
        const char *xn = x + (size_t)(n0 * g.C * g.HW) * es;
        int64_t ldx = g.HW;
        if (cur > 1) { /* x chunk [cur, C, HW] -> [C, cur*HW] */
            ldx = cur * g.HW;
            conv_task gt = {.g = &g, .x = xn, .col = tmp, .ld = ldx, .ch = g.C, .plane = g.HW};
            pti_parallel_for(cur * g.C, plane_grain(g.HW), gather_task, &gt);
            xn = tmp;
        }
        for (int64_t iy0 = 0; iy0 < g.H; iy0 += blk) {
            int64_t nrow = g.H - iy0 < blk ? g.H - iy0 : blk, ld = cur * nrow * g.W;
            if (g.Cg == 0)
                memset(col, 0, col_bytes);
            else /* col_g [Kc, ld] = W_g^T [Kc, Cg] x_g [Cg, ld] (input rows iy0..) */
                for (int64_t gi = 0; gi < g.g; gi++)
                    gemm(g.f64, true, Kc, ld, g.Cg, w + (size_t)(gi * g.Cg * Kc) * es, Kc,
                         xn + (size_t)(gi * g.Cg * ldx + iy0 * g.W) * es, ldx,
                         col + (size_t)(gi * Kc * ld) * es, ld);
            conv_task t = {.g = &g,
                           .col = col,
                           .ld = ld,
                           .bias = bias,
                           .r0 = iy0,
                           .r1 = iy0 + nrow,
                           .y = y + (size_t)(n0 * g.Co * g.P) * es};
            pti_parallel_for(cur * g.Co, plane_grain(g.P + g.kh * g.kw * g.HW), col2im_task, &t);
        }
    }
    pti_cpu_free(col, col_bytes);
    pti_cpu_free(tmp, tmp_bytes);
    return PT_OK;
}

/* ---- conv2d weight gradient ----------------------------------------------------------------- */

/* gb[co] = sum over n, p of grad[n, co, p], accumulated in double. */
static void bias_grad_task(void *arg, int64_t c0, int64_t c1)
{
    const conv_task *t = arg;
    const conv_geom *g = t->g;
    for (int64_t co = c0; co < c1; co++) {
        double s = 0;
        for (int64_t n = 0; n < g->N; n++) {
            int64_t base = (n * g->Co + co) * g->P;
            if (g->f64)
                for (int64_t i = 0; i < g->P; i++)
                    s += ((const double *)t->x)[base + i];
            else
                for (int64_t i = 0; i < g->P; i++)
                    s += ((const float *)t->x)[base + i];
        }
        if (g->f64)
            ((double *)t->y)[co] = s;
        else
            ((float *)t->y)[co] = (float)s;
    }
}

/* gw_group [Cog, K] = sum over images of grad_group [Cog, P] * col_group^T [P, K], chunk by
 * chunk (the chunk's grad gathered into [Co, nb*P] so one GEMM covers it). */
static pt_status cpu_conv2d_weight_grad(const pti_call *c)
{
    const pt_tensor *gwt = c->out[0];
    conv_geom g = make_geom_of(c->in[0], c->in[1], gwt->shape[2], gwt->shape[3], c->params);
    size_t es = g.es;
    const char *x = pti_data(c->in[0]), *go = pti_data(c->in[1]);
    char *gw = pti_data(c->out[0]);
    int64_t K = g.Cg * g.kh * g.kw, rows = g.C * g.kh * g.kw;
    if (c->n_out > 1) {
        conv_task t = {.g = &g, .x = go, .y = pti_data(c->out[1])};
        pti_parallel_for(g.Co, plane_grain(g.N * g.P), bias_grad_task, &t);
    }
    if (g.N == 0 || g.P == 0) {
        memset(gw, 0, (size_t)(g.Co * K) * es);
        return PT_OK;
    }
    pti_direct_geom dg;
    if (direct_geom(&g, g.ph, g.pw, &dg))
        return pti_cpu_conv_direct_weight_grad_f32(&dg, (const float *)x, (const float *)go,
                                                   (float *)gw);
    int64_t blk;
    int64_t nb = chunk_plan(g.N, rows * g.P * (int64_t)es, g.OH, rows * g.OW * (int64_t)es, &blk);
    size_t col_bytes = (size_t)(rows * nb * blk * g.OW) * es;
    size_t tmp_bytes = nb > 1 ? (size_t)(g.Co * nb * g.P) * es : 0;
    char *col = pti_cpu_alloc(col_bytes);
    char *tmp = tmp_bytes ? pti_cpu_alloc(tmp_bytes) : NULL;
    if (!col || (tmp_bytes && !tmp)) {
        pti_cpu_free(col, col_bytes);
        pti_cpu_free(tmp, tmp_bytes);
        return pti_error(PT_ERR_OOM, "conv2d_weight_grad: out of memory for %zu bytes",
                         col_bytes + tmp_bytes);
    }
    for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
        int64_t cur = g.N - n0 < nb ? g.N - n0 : nb;
        const char *gn = go + (size_t)(n0 * g.Co * g.P) * es;
        conv_task t = {.g = &g, .x = x + (size_t)(n0 * g.C * g.HW) * es, .col = col, .nb = cur};
        for (int64_t oh0 = 0; oh0 < g.OH; oh0 += blk) {
            int64_t nrow = g.OH - oh0 < blk ? g.OH - oh0 : blk, ld = cur * nrow * g.OW;
            t.r0 = oh0;
            t.r1 = oh0 + nrow;
            t.ld = ld;
            int64_t row_grain = 32768 / (ld > 0 ? ld : 1);
            pti_parallel_for(rows, row_grain > 0 ? row_grain : 1, im2col_rows, &t);
            /* grad columns matching col: several images gathered into tmp [Co, ld]; one image
             * read in place (row block oh0.., leading dimension P) */
            const char *ga = gn + (size_t)(oh0 * g.OW) * es;
            int64_t lda = g.P;
            if (cur > 1) {
                conv_task gt = {.g = &g, .x = gn, .col = tmp, .ld = ld, .ch = g.Co, .plane = g.P};
                pti_parallel_for(cur * g.Co, plane_grain(g.P), gather_task, &gt);
                ga = tmp;
                lda = ld;
            }
            bool first = n0 == 0 && oh0 == 0;
            for (int64_t gi = 0; gi < g.g; gi++)
                gemm_ex(g.f64, false, true, g.Cog, K, ld, ga + (size_t)(gi * g.Cog * lda) * es, lda,
                        col + (size_t)(gi * K * ld) * es, ld, first ? 0.0 : 1.0,
                        gw + (size_t)(gi * g.Cog * K) * es, K);
        }
    }
    pti_cpu_free(col, col_bytes);
    pti_cpu_free(tmp, tmp_bytes);
    return PT_OK;
}

void pti_cpu_register_conv_pool(pti_kernel *table);

void pti_cpu_register_conv(pti_kernel *table)
{
    table[PTI_OP_conv2d] = cpu_conv2d;
    table[PTI_OP_conv_transpose2d] = cpu_conv_transpose2d;
    table[PTI_OP_conv2d_weight_grad] = cpu_conv2d_weight_grad;
    pti_cpu_register_conv_pool(table);
}
