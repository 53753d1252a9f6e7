/* CPU kernels of the nn family (front-ends in src/ops/nn.c): batch/layer/group/RMS
 * normalization and dropout. Inputs arrive contiguous in float32 or float64 (dropout: any
 * floating dtype). Statistics accumulate in double; float32 rows use the AVX2 primitives of
 * nn_simd.c. Attention lives in nn_attention.c. */
#include <math.h>
#include <string.h>

#include "../../ops/nn_params.h"
#include "nn_simd.h"

void pti_cpu_register_nn_attention(pti_kernel *table);
void pti_cpu_register_nn_llm(pti_kernel *table);

/* ---- dtype-generic row helpers (f64 selects double data, else float) ------------------------- */

static double row_sum(const void *x, bool f64, int64_t n)
{
    if (!f64)
        return pti_nn_sum_f32(x, n);
    const double *p = x;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += p[i];
    return s;
}

static double row_sqdev(const void *x, bool f64, int64_t n, double mean)
{
    if (!f64)
        return pti_nn_sqdev_f32(x, n, mean);
    const double *p = x;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (p[i] - mean) * (p[i] - mean);
    return s;
}

/* y = x * a + b over n elements */
static void row_affine(void *y, const void *x, bool f64, int64_t n, double a, double b)
{
    if (!f64) {
        pti_nn_affine_f32(y, x, n, (float)a, (float)b);
        return;
    }
    double *py = y;
    const double *px = x;
    for (int64_t i = 0; i < n; i++)
        py[i] = px[i] * a + b;
}

static inline const char *elem_ptr(const pt_tensor *t, int64_t i)
{
    return (const char *)pti_data(t) + i * (int64_t)pti_dtypes[t->dtype].size;
}

/* Element i of a 1-D tensor of any floating dtype and stride. */
static double vec_get(const pt_tensor *t, int64_t i)
{
    return pti_load_f64(elem_ptr(t, i * t->stride[0]), t->dtype);
}

static void vec_set(pt_tensor *t, int64_t i, double v)
{
    pti_store_f64((char *)pti_data(t) + i * t->stride[0] * (int64_t)pti_dtypes[t->dtype].size,
                  t->dtype, v);
}

/* Parameter c of an optional contiguous [C] tensor in the compute dtype (dflt when NULL). */
static inline double param_get(const pt_tensor *t, bool f64, int64_t c, double dflt)
{
    if (!t)
        return dflt;
    return f64 ? ((const double *)pti_data(t))[c] : ((const float *)pti_data(t))[c];
}

/* ---- batch_norm ------------------------------------------------------------------------------ */

typedef struct bn_ctx {
    const pti_call *c;
    const pti_batch_norm_params *p;
    bool f64;
    size_t es;
    double *mean, *var; /* [C] batch statistics (biased variance) */
    double *scale, *shift;
    float *scale_f, *shift_f; /* float32 copies for the [N, C] apply loop */
} bn_ctx;

/* Batch statistics of channels [c0, c1) of x [N, C, S]. */
static void bn_stats_range(void *arg, int64_t c0, int64_t c1)
{
    bn_ctx *b = arg;
    const pti_batch_norm_params *p = b->p;
    const char *x = pti_data(b->c->in[0]);
    double cnt = (double)(p->n * p->s);
    if (p->s == 1) { /* [N, C]: walk rows, channels contiguous */
        for (int64_t ch = c0; ch < c1; ch++)
            b->mean[ch] = b->var[ch] = 0;
        for (int pass = 0; pass < 2; pass++) {
            double *acc = pass == 0 ? b->mean : b->var;
            for (int64_t n = 0; n < p->n; n++) {
                int64_t row = n * p->c;
                if (b->f64) {
                    const double *xr = (const double *)x + row;
                    for (int64_t ch = c0; ch < c1; ch++) {
                        double d = xr[ch] - (pass ? b->mean[ch] : 0.0);
                        acc[ch] += pass ? d * d : d;
                    }
                } else {
                    const float *xr = (const float *)x + row;
                    for (int64_t ch = c0; ch < c1; ch++) {
                        double d = (double)xr[ch] - (pass ? b->mean[ch] : 0.0);
                        acc[ch] += pass ? d * d : d;
                    }
                }
            }
            for (int64_t ch = c0; ch < c1; ch++)
                acc[ch] /= cnt;
        }
        return;
    }
    for (int64_t ch = c0; ch < c1; ch++) {
        double s = 0;
        for (int64_t n = 0; n < p->n; n++)
            s += row_sum(x + (n * p->c + ch) * p->s * b->es, b->f64, p->s);
        double mean = s / cnt, v = 0;
        for (int64_t n = 0; n < p->n; n++)
            v += row_sqdev(x + (n * p->c + ch) * p->s * b->es, b->f64, p->s, mean);
        b->mean[ch] = mean;
        b->var[ch] = v / cnt;
    }
}

/* y = x * scale[c] + shift[c] over planes [i0, i1) of the N*C planes of S elements. */
static void bn_apply_planes(void *arg, int64_t i0, int64_t i1)
{
    bn_ctx *b = arg;
    int64_t s = b->p->s, ch_count = b->p->c;
    const char *x = pti_data(b->c->in[0]);
    char *y = pti_data(b->c->out[0]);
    for (int64_t i = i0; i < i1; i++) {
        int64_t ch = i % ch_count;
        row_affine(y + i * s * b->es, x + i * s * b->es, b->f64, s, b->scale[ch], b->shift[ch]);
    }
}

/* [N, C] with S == 1: rows [r0, r1), each a run of C channels. */
static void bn_apply_rows(void *arg, int64_t r0, int64_t r1)
{
    bn_ctx *b = arg;
    int64_t cn = b->p->c;
    for (int64_t r = r0; r < r1; r++) {
        if (b->f64) {
            const double *x = (const double *)pti_data(b->c->in[0]) + r * cn;
            double *y = (double *)pti_data(b->c->out[0]) + r * cn;
            for (int64_t ch = 0; ch < cn; ch++)
                y[ch] = x[ch] * b->scale[ch] + b->shift[ch];
        } else {
            const float *x = (const float *)pti_data(b->c->in[0]) + r * cn;
            float *y = (float *)pti_data(b->c->out[0]) + r * cn;
            for (int64_t ch = 0; ch < cn; ch++)
                y[ch] = x[ch] * b->scale_f[ch] + b->shift_f[ch];
        }
    }
}

static pt_status cpu_batch_norm(const pti_call *c)
{
    const pti_batch_norm_params *p = c->params;
    const pt_tensor *w = c->in[1], *bias = c->in[2], *rm = c->in[3], *rv = c->in[4];
    bool f64 = c->in[0]->dtype == PT_FLOAT64;
    size_t nbytes = (size_t)p->c * 5 * sizeof(double); /* 4 double + 2 float arrays */
    double *buf = pti_cpu_alloc(nbytes > 0 ? nbytes : sizeof(double));
    if (!buf)
        return pti_error(PT_ERR_OOM, "pt_batch_norm: out of memory for %lld channels",
                         (long long)p->c);
    bn_ctx b = {.c = c, .p = p, .f64 = f64, .es = f64 ? 8 : 4};
    b.mean = buf;
    b.var = buf + p->c;
    b.scale = buf + 2 * p->c;
    b.shift = buf + 3 * p->c;
    b.scale_f = (float *)(buf + 4 * p->c);
    b.shift_f = b.scale_f + p->c;
    if (p->training) {
        int64_t per = p->n * p->s;
        pti_parallel_for(p->c, per > 0 ? 1 + 65536 / per : p->c, bn_stats_range, &b);
        double unbias = per > 1 ? (double)per / (double)(per - 1) : NAN;
        for (int64_t ch = 0; ch < p->c; ch++) {
            if (c->out[1])
                vec_set(c->out[1], ch,
                        (1 - p->momentum) * vec_get(c->out[1], ch) + p->momentum * b.mean[ch]);
            if (c->out[2])
                vec_set(c->out[2], ch,
                        (1 - p->momentum) * vec_get(c->out[2], ch) +
                            p->momentum * b.var[ch] * unbias);
        }
    } else {
        for (int64_t ch = 0; ch < p->c; ch++) {
            b.mean[ch] = vec_get(rm, ch);
            b.var[ch] = vec_get(rv, ch);
        }
    }
    for (int64_t ch = 0; ch < p->c; ch++) {
        double invstd = 1.0 / sqrt(b.var[ch] + p->eps);
        if (!f64) /* PyTorch keeps the float32 statistics in float */
            invstd = (float)(1.0 / sqrt((float)b.var[ch] + (float)p->eps));
        b.scale[ch] = invstd * param_get(w, f64, ch, 1.0);
        b.shift[ch] = param_get(bias, f64, ch, 0.0) - b.mean[ch] * b.scale[ch];
        b.scale_f[ch] = (float)b.scale[ch];
        b.shift_f[ch] = (float)b.shift[ch];
    }
    if (p->s == 1)
        pti_parallel_for(p->n, 1 + 32768 / (p->c > 0 ? p->c : 1), bn_apply_rows, &b);
    else
        pti_parallel_for(p->n * p->c, 1 + 32768 / p->s, bn_apply_planes, &b);
    pti_cpu_free(buf, nbytes > 0 ? nbytes : sizeof(double));
    return PT_OK;
}

/* ---- layer_norm and rms_norm ------------------------------------------------------------------
 */

typedef struct rownorm_ctx {
    const pti_call *c;
    const pti_row_norm_params *p;
    bool f64, rms;
} rownorm_ctx;

static void rownorm_range(void *arg, int64_t r0, int64_t r1)
{
    rownorm_ctx *r = arg;
    int64_t d = r->p->cols;
    const pt_tensor *w = r->c->in[1], *b = r->rms ? NULL : r->c->in[2];
    if (!r->f64 && !r->rms) {
        const float *x = (const float *)pti_data(r->c->in[0]) + r0 * d;
        float *y = (float *)pti_data(r->c->out[0]) + r0 * d;
        pti_nn_layer_norm_rows_f32(y, x, r1 - r0, d, r->p->eps, w ? pti_data(w) : NULL,
                                   b ? pti_data(b) : NULL);
        return;
    }
    for (int64_t row = r0; row < r1; row++) {
        size_t off = (size_t)(row * d) * (r->f64 ? 8 : 4);
        const char *x = (const char *)pti_data(r->c->in[0]) + off;
        char *y = (char *)pti_data(r->c->out[0]) + off;
        double mean = r->rms ? 0.0 : row_sum(x, r->f64, d) / (double)d;
        double var = row_sqdev(x, r->f64, d, mean) / (double)d;
        double rstd = 1.0 / sqrt(var + r->p->eps);
        if (!r->f64) {
            pti_nn_norm_affine_f32((float *)y, (const float *)x, d, (float)mean, (float)rstd,
                                   w ? pti_data(w) : NULL, b ? pti_data(b) : NULL);
            continue;
        }
        const double *px = (const double *)x, *pw = w ? pti_data(w) : NULL;
        const double *pb = b ? pti_data(b) : NULL;
        double *py = (double *)y;
        for (int64_t i = 0; i < d; i++) {
            double v = (px[i] - mean) * rstd;
            if (pw)
                v *= pw[i];
            if (pb)
                v += pb[i];
            py[i] = v;
        }
    }
}

static pt_status row_norm(const pti_call *c, bool rms)
{
    const pti_row_norm_params *p = c->params;
    rownorm_ctx r = {c, p, c->in[0]->dtype == PT_FLOAT64, rms};
    pti_parallel_for(p->rows, 1 + 16384 / (p->cols > 0 ? p->cols : 1), rownorm_range, &r);
    return PT_OK;
}

static pt_status cpu_layer_norm(const pti_call *c)
{
    return row_norm(c, false);
}
static pt_status cpu_rms_norm(const pti_call *c)
{
    return row_norm(c, true);
}

/* ---- batch_norm backward
 * -------------------------------------------------------------------------- Per channel (channels
 * in parallel): the statistics (batch or running), the sums of g and of g * xhat, then grad_x = w *
 * rstd * (g - mean(g) - xhat * mean(g * xhat)) in training (the batch statistics depend on x) or g
 * * w * rstd in eval. */

static inline double ld(const void *base, bool f64, int64_t i)
{
    return f64 ? ((const double *)base)[i] : (double)((const float *)base)[i];
}

static inline void st(void *base, bool f64, int64_t i, double v)
{
    if (f64)
        ((double *)base)[i] = v;
    else
        ((float *)base)[i] = (float)v;
}

typedef struct bn_bw_ctx {
    const pti_call *c;
    const pti_batch_norm_params *p;
    bool f64;
} bn_bw_ctx;

/* One float32 channel with the row primitives of nn_simd.h (SIMD where the CPU has it): the same
 * sums in double as the generic loop below, the input gradient in float. */
static void bn_bw_channel_f32(const bn_bw_ctx *b, int64_t ch)
{
    const pti_batch_norm_params *p = b->p;
    const float *g = pti_data(b->c->in[0]), *x = pti_data(b->c->in[1]);
    const float *w = b->c->in[2] ? pti_data(b->c->in[2]) : NULL;
    float *gx = pti_data(b->c->out[0]);
    double cnt = (double)(p->n * p->s), mean, rstd;
    if (p->training) {
        double s = 0, v = 0;
        for (int64_t n = 0; n < p->n; n++)
            s += pti_nn_sum_f32(x + (n * p->c + ch) * p->s, p->s);
        mean = s / cnt;
        for (int64_t n = 0; n < p->n; n++)
            v += pti_nn_sqdev_f32(x + (n * p->c + ch) * p->s, p->s, mean);
        rstd = 1.0 / sqrt(v / cnt + p->eps);
    } else {
        mean = ((const float *)pti_data(b->c->in[3]))[ch];
        rstd = 1.0 / sqrt(((const float *)pti_data(b->c->in[4]))[ch] + p->eps);
    }
    double sg = 0, sgd = 0;
    for (int64_t n = 0; n < p->n; n++) {
        int64_t o = (n * p->c + ch) * p->s;
        pti_nn_dev_dot_f32(g + o, x + o, p->s, mean, &sg, &sgd);
    }
    double sgx = sgd * rstd;
    if (b->c->out[1])
        ((float *)pti_data(b->c->out[1]))[ch] = (float)sgx;
    if (b->c->out[2])
        ((float *)pti_data(b->c->out[2]))[ch] = (float)sg;
    double wv = w ? w[ch] : 1.0, a = sg / cnt, m = sgx / cnt;
    /* training: w*rstd*(g - a - (x - mean)*rstd*m); eval: g*w*rstd */
    float fs = (float)(wv * rstd), fa = p->training ? (float)a : 0.0f;
    float ft = p->training ? (float)(wv * rstd * rstd * m) : 0.0f;
    for (int64_t n = 0; n < p->n; n++) {
        int64_t o = (n * p->c + ch) * p->s;
        pti_nn_bn_input_grad_f32(gx + o, g + o, x + o, p->s, fs, fa, (float)mean, ft);
    }
}

static void bn_bw_range(void *arg, int64_t c0, int64_t c1)
{
    bn_bw_ctx *b = arg;
    const pti_batch_norm_params *p = b->p;
    bool f64 = b->f64;
    if (!f64) {
        for (int64_t ch = c0; ch < c1; ch++)
            bn_bw_channel_f32(b, ch);
        return;
    }
    const void *g = pti_data(b->c->in[0]), *x = pti_data(b->c->in[1]);
    const void *w = b->c->in[2] ? pti_data(b->c->in[2]) : NULL;
    void *gx = pti_data(b->c->out[0]);
    double cnt = (double)(p->n * p->s);
    for (int64_t ch = c0; ch < c1; ch++) {
        double mean, rstd;
        if (p->training) {
            double s = 0, v = 0;
            for (int64_t n = 0; n < p->n; n++)
                for (int64_t i = 0, o = (n * p->c + ch) * p->s; i < p->s; i++)
                    s += ld(x, f64, o + i);
            mean = s / cnt;
            for (int64_t n = 0; n < p->n; n++)
                for (int64_t i = 0, o = (n * p->c + ch) * p->s; i < p->s; i++) {
                    double d = ld(x, f64, o + i) - mean;
                    v += d * d;
                }
            rstd = 1.0 / sqrt(v / cnt + p->eps);
        } else {
            mean = ld(pti_data(b->c->in[3]), f64, ch);
            rstd = 1.0 / sqrt(ld(pti_data(b->c->in[4]), f64, ch) + p->eps);
        }
        double sg = 0, sgx = 0;
        for (int64_t n = 0; n < p->n; n++)
            for (int64_t i = 0, o = (n * p->c + ch) * p->s; i < p->s; i++) {
                double gv = ld(g, f64, o + i);
                sg += gv;
                sgx += gv * (ld(x, f64, o + i) - mean) * rstd;
            }
        if (b->c->out[1])
            st(pti_data(b->c->out[1]), f64, ch, sgx);
        if (b->c->out[2])
            st(pti_data(b->c->out[2]), f64, ch, sg);
        double wv = w ? ld(w, f64, ch) : 1.0, a = sg / cnt, m = sgx / cnt;
        for (int64_t n = 0; n < p->n; n++)
            for (int64_t i = 0, o = (n * p->c + ch) * p->s; i < p->s; i++) {
                double gv = ld(g, f64, o + i);
                double v = p->training
                               ? wv * rstd * (gv - a - (ld(x, f64, o + i) - mean) * rstd * m)
                               : gv * wv * rstd;
                st(gx, f64, o + i, v);
            }
    }
}

static pt_status cpu_batch_norm_backward(const pti_call *c)
{
    const pti_batch_norm_params *p = c->params;
    bn_bw_ctx b = {c, p, c->in[0]->dtype == PT_FLOAT64};
    int64_t per = p->n * p->s;
    pti_parallel_for(p->c, 1 + 16384 / (per > 0 ? per : 1), bn_bw_range, &b);
    return PT_OK;
}

/* ---- layer_norm / rms_norm backward ------------------------------------------------------------
 * Pass 1 (rows in parallel): each row's mean/rstd (kept in scratch) and its input gradient
 * rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) with gw = g * weight (rms: no mean(gw) term).
 * Pass 2 (columns in parallel): weight/bias gradients summed over the rows. */

typedef struct rownorm_bw_ctx {
    const pti_call *c;
    const pti_row_norm_bw_params *p;
    bool f64;
    double *stats; /* mean, rstd per row */
} rownorm_bw_ctx;

static void rownorm_bw_rows(void *arg, int64_t r0, int64_t r1)
{
    rownorm_bw_ctx *r = arg;
    int64_t d = r->p->cols;
    bool f64 = r->f64, rms = r->p->rms;
    const void *w = r->c->in[2] ? pti_data(r->c->in[2]) : NULL;
    for (int64_t row = r0; row < r1; row++) {
        size_t off = (size_t)(row * d) * (f64 ? 8 : 4);
        const char *g = (const char *)pti_data(r->c->in[0]) + off;
        const char *x = (const char *)pti_data(r->c->in[1]) + off;
        char *gx = (char *)pti_data(r->c->out[0]) + off;
        double mean = rms ? 0.0 : row_sum(x, f64, d) / (double)d;
        double rstd = 1.0 / sqrt(row_sqdev(x, f64, d, mean) / (double)d + r->p->eps);
        r->stats[2 * row] = mean;
        r->stats[2 * row + 1] = rstd;
        double sum_gw = 0, sum_gwx = 0;
        for (int64_t i = 0; i < d; i++) {
            double gw = ld(g, f64, i) * (w ? ld(w, f64, i) : 1.0);
            sum_gw += gw;
            sum_gwx += gw * (ld(x, f64, i) - mean) * rstd;
        }
        double a = rms ? 0.0 : sum_gw / (double)d, b = sum_gwx / (double)d;
        for (int64_t i = 0; i < d; i++) {
            double gw = ld(g, f64, i) * (w ? ld(w, f64, i) : 1.0);
            double xhat = (ld(x, f64, i) - mean) * rstd;
            st(gx, f64, i, rstd * (gw - a - xhat * b));
        }
    }
}

static void rownorm_bw_cols(void *arg, int64_t c0, int64_t c1)
{
    rownorm_bw_ctx *r = arg;
    int64_t d = r->p->cols, rows = r->p->rows;
    bool f64 = r->f64;
    const void *g = pti_data(r->c->in[0]), *x = pti_data(r->c->in[1]);
    pt_tensor *gw = r->c->out[1], *gb = r->c->out[2];
    for (int64_t j = c0; j < c1; j++) {
        double sw = 0, sb = 0;
        for (int64_t row = 0; row < rows; row++) {
            double gv = ld(g, f64, row * d + j);
            sw += gv * (ld(x, f64, row * d + j) - r->stats[2 * row]) * r->stats[2 * row + 1];
            sb += gv;
        }
        if (gw)
            st(pti_data(gw), f64, j, sw);
        if (gb)
            st(pti_data(gb), f64, j, sb);
    }
}

static pt_status cpu_row_norm_backward(const pti_call *c)
{
    const pti_row_norm_bw_params *p = c->params;
    size_t nbytes = (size_t)(p->rows > 0 ? p->rows : 1) * 2 * sizeof(double);
    rownorm_bw_ctx r = {c, p, c->in[0]->dtype == PT_FLOAT64, pti_cpu_alloc(nbytes)};
    if (!r.stats)
        return pti_error(PT_ERR_OOM, "layer_norm_backward: out of memory");
    int64_t grain = 1 + 16384 / (p->cols > 0 ? p->cols : 1);
    pti_parallel_for(p->rows, grain, rownorm_bw_rows, &r);
    if (c->out[1] || c->out[2])
        pti_parallel_for(p->cols, 1 + 16384 / (p->rows > 0 ? p->rows : 1), rownorm_bw_cols, &r);
    pti_cpu_free(r.stats, nbytes);
    return PT_OK;
}

/* ---- group_norm --------------------------------------------------------------------------------
 */

typedef struct gn_ctx {
    const pti_call *c;
    const pti_group_norm_params *p;
    bool f64;
} gn_ctx;

/* Groups [g0, g1) of the N * groups blocks; each block is C/groups channels of S elements. */
static void gn_range(void *arg, int64_t g0, int64_t g1)
{
    gn_ctx *g = arg;
    const pti_group_norm_params *p = g->p;
    size_t es = g->f64 ? 8 : 4;
    int64_t cpg = p->c / p->groups, len = cpg * p->s;
    for (int64_t blk = g0; blk < g1; blk++) {
        const char *x = (const char *)pti_data(g->c->in[0]) + (size_t)(blk * len) * es;
        char *y = (char *)pti_data(g->c->out[0]) + (size_t)(blk * len) * es;
        double mean = len > 0 ? row_sum(x, g->f64, len) / (double)len : 0;
        double var = len > 0 ? row_sqdev(x, g->f64, len, mean) / (double)len : 0;
        double rstd = 1.0 / sqrt(var + p->eps);
        int64_t ch0 = (blk % p->groups) * cpg;
        for (int64_t j = 0; j < cpg; j++) {
            double a = rstd * param_get(g->c->in[1], g->f64, ch0 + j, 1.0);
            double b = param_get(g->c->in[2], g->f64, ch0 + j, 0.0) - mean * a;
            row_affine(y + (size_t)(j * p->s) * es, x + (size_t)(j * p->s) * es, g->f64, p->s, a,
                       b);
        }
    }
}

static pt_status cpu_group_norm(const pti_call *c)
{
    const pti_group_norm_params *p = c->params;
    gn_ctx g = {c, p, c->in[0]->dtype == PT_FLOAT64};
    int64_t len = p->c / p->groups * p->s;
    pti_parallel_for(p->n * p->groups, 1 + 32768 / (len > 0 ? len : 1), gn_range, &g);
    return PT_OK;
}

/* group_norm backward. Pass 1 (blocks of one sample's group in parallel): the block statistics
 * (kept in scratch) and grad_x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) with
 * gw = g * weight[c]. Pass 2 (channels in parallel): weight/bias gradients over N and S. */
typedef struct gn_bw_ctx {
    const pti_call *c;
    const pti_group_norm_params *p;
    bool f64;
    double *stats; /* mean, rstd per block */
} gn_bw_ctx;

static void gn_bw_blocks(void *arg, int64_t b0, int64_t b1)
{
    gn_bw_ctx *r = arg;
    const pti_group_norm_params *p = r->p;
    bool f64 = r->f64;
    int64_t cpg = p->c / p->groups, len = cpg * p->s;
    const void *g = pti_data(r->c->in[0]), *x = pti_data(r->c->in[1]);
    const void *w = r->c->in[2] ? pti_data(r->c->in[2]) : NULL;
    void *gx = pti_data(r->c->out[0]);
    for (int64_t blk = b0; blk < b1; blk++) {
        int64_t o = blk * len, ch0 = (blk % p->groups) * cpg;
        double s = 0, v = 0;
        for (int64_t i = 0; i < len; i++)
            s += ld(x, f64, o + i);
        double mean = len > 0 ? s / (double)len : 0;
        for (int64_t i = 0; i < len; i++) {
            double d = ld(x, f64, o + i) - mean;
            v += d * d;
        }
        double rstd = 1.0 / sqrt((len > 0 ? v / (double)len : 0) + p->eps);
        r->stats[2 * blk] = mean;
        r->stats[2 * blk + 1] = rstd;
        double sgw = 0, sgwx = 0;
        for (int64_t i = 0; i < len; i++) {
            double gw = ld(g, f64, o + i) * (w ? ld(w, f64, ch0 + i / p->s) : 1.0);
            sgw += gw;
            sgwx += gw * (ld(x, f64, o + i) - mean) * rstd;
        }
        double a = sgw / (double)len, m = sgwx / (double)len;
        for (int64_t i = 0; i < len; i++) {
            double gw = ld(g, f64, o + i) * (w ? ld(w, f64, ch0 + i / p->s) : 1.0);
            double xhat = (ld(x, f64, o + i) - mean) * rstd;
            st(gx, f64, o + i, rstd * (gw - a - xhat * m));
        }
    }
}

static void gn_bw_channels(void *arg, int64_t c0, int64_t c1)
{
    gn_bw_ctx *r = arg;
    const pti_group_norm_params *p = r->p;
    bool f64 = r->f64;
    int64_t cpg = p->c / p->groups;
    const void *g = pti_data(r->c->in[0]), *x = pti_data(r->c->in[1]);
    for (int64_t ch = c0; ch < c1; ch++) {
        double sw = 0, sb = 0;
        for (int64_t n = 0; n < p->n; n++) {
            int64_t blk = n * p->groups + ch / cpg, o = (n * p->c + ch) * p->s;
            double mean = r->stats[2 * blk], rstd = r->stats[2 * blk + 1];
            for (int64_t i = 0; i < p->s; i++) {
                double gv = ld(g, f64, o + i);
                sw += gv * (ld(x, f64, o + i) - mean) * rstd;
                sb += gv;
            }
        }
        if (r->c->out[1])
            st(pti_data(r->c->out[1]), f64, ch, sw);
        if (r->c->out[2])
            st(pti_data(r->c->out[2]), f64, ch, sb);
    }
}

static pt_status cpu_group_norm_backward(const pti_call *c)
{
    const pti_group_norm_params *p = c->params;
    int64_t blocks = p->n * p->groups, len = p->c / p->groups * p->s;
    size_t nbytes = (size_t)(blocks > 0 ? blocks : 1) * 2 * sizeof(double);
    gn_bw_ctx r = {c, p, c->in[0]->dtype == PT_FLOAT64, pti_cpu_alloc(nbytes)};
    if (!r.stats)
        return pti_error(PT_ERR_OOM, "group_norm_backward: out of memory");
    pti_parallel_for(blocks, 1 + 32768 / (len > 0 ? len : 1), gn_bw_blocks, &r);
    if (c->out[1] || c->out[2]) {
        int64_t per = p->n * p->s;
        pti_parallel_for(p->c, 1 + 16384 / (per > 0 ? per : 1), gn_bw_channels, &r);
    }
    pti_cpu_free(r.stats, nbytes);
    return PT_OK;
}

/* ---- dropout -----------------------------------------------------------------------------------
 */

typedef struct dropout_ctx {
    const pti_call *c;
    const pti_dropout_params *p;
    float keep_prob; /* compare in float: u has 24 random bits */
    int64_t n;
} dropout_ctx;

/* Counters [q0, q1): each covers elements 4q .. 4q+3. */
static void dropout_range(void *arg, int64_t q0, int64_t q1)
{
    dropout_ctx *d = arg;
    const pt_tensor *x = d->c->in[0];
    pt_tensor *y = d->c->out[0], *mask = d->c->out[1];
    pt_dtype dt = x->dtype;
    size_t es = pti_dtypes[dt].size;
    /* PyTorch multiplies by a noise tensor holding 0 or 1/(1-p) in x's dtype, so dropped
     * elements are x * 0 (NaN stays NaN) and the float32 scale is 1.0f / (float)(1 - p). */
    double scale = d->p->p < 1 ? 1.0 / (1.0 - d->p->p) : 0.0;
    float scale_f = d->p->p < 1 ? 1.0f / (float)(1.0 - d->p->p) : 0.0f;
    const char *xp = pti_data(x);
    char *yp = pti_data(y);
    uint8_t *m = mask ? pti_data(mask) : NULL;
    const uint64_t key = d->p->key, base = d->p->base;
    const float keep_prob = d->keep_prob;
    for (int64_t q = q0; q < q1; q++) {
        uint32_t r[4];
        pti_philox(key, base + (uint64_t)q, r);
        int64_t i0 = q * 4, cnt = d->n - i0 < 4 ? d->n - i0 : 4;
        bool keep[4];
        for (int j = 0; j < 4; j++)
            keep[j] = pti_u32_to_float(r[j]) < keep_prob;
        if (m)
            for (int j = 0; j < cnt; j++)
                m[i0 + j] = keep[j];
        if (dt == PT_FLOAT32) {
            const float *xv = (const float *)xp + i0;
            float *yv = (float *)yp + i0;
            for (int j = 0; j < cnt; j++)
                yv[j] = xv[j] * (keep[j] ? scale_f : 0.0f);
        } else if (dt == PT_FLOAT64) {
            const double *xv = (const double *)xp + i0;
            double *yv = (double *)yp + i0;
            for (int j = 0; j < cnt; j++)
                yv[j] = xv[j] * (keep[j] ? scale : 0.0);
        } else {
            for (int j = 0; j < cnt; j++) {
                float v = (float)pti_load_f64(xp + (size_t)(i0 + j) * es, dt);
                pti_store_f64(yp + (size_t)(i0 + j) * es, dt,
                              (double)(v * (keep[j] ? scale_f : 0.0f)));
            }
        }
    }
}

static pt_status cpu_dropout(const pti_call *c)
{
    const pti_dropout_params *p = c->params;
    dropout_ctx d = {c, p, (float)(1.0 - p->p), c->in[0]->numel};
    pti_parallel_for((d.n + 3) / 4, 4096, dropout_range, &d);
    return PT_OK;
}

void pti_cpu_register_nn(pti_kernel *table)
{
    table[PTI_OP_batch_norm] = cpu_batch_norm;
    table[PTI_OP_layer_norm] = cpu_layer_norm;
    table[PTI_OP_rms_norm] = cpu_rms_norm;
    table[PTI_OP_row_norm_backward] = cpu_row_norm_backward;
    table[PTI_OP_batch_norm_backward] = cpu_batch_norm_backward;
    table[PTI_OP_group_norm_backward] = cpu_group_norm_backward;
    table[PTI_OP_group_norm] = cpu_group_norm;
    table[PTI_OP_dropout] = cpu_dropout;
    pti_cpu_register_nn_attention(table);
    pti_cpu_register_nn_llm(table);
}
