/* CPU kernel of scaled dot-product attention (front-end in src/ops/nn.c):
 * o = softmax(q @ k^T * scale + mask) @ v per batch, in blocks of query rows so the score
 * scratch stays bounded. The two matmuls are BLAS products split across the pool
 * (pti_cpu_gemm); the softmax, masking and dropout of a block run on the pool, one row per task
 * unit. */
#include <math.h>

#include "../../ops/nn_params.h"
#include "nn_simd.h"

/* x[i] = exp(x[i] - m) in place; returns the sum (the float32 twin is in nn_simd.c). */
static double exp_sum_f64(double *x, int64_t n, double m)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = exp(x[i] - m);
        s += x[i];
    }
    return s;
}

/* Score elements per block (rows * S); bounds the scratch to 16 MiB of doubles. */
#define SDPA_BLOCK_ELEMS (1 << 21)
/* BLAS leading dimensions must be >= 1 even for empty operands. */
#define LD(x) ((x) > 0 ? (x) : 1)

typedef struct sdpa_ctx {
    const pti_call *c;
    const pti_sdpa_params *p;
    bool f64;
    void *scores;     /* [rows, S] for the current block */
    int64_t b, l0;    /* batch and first query row of the block */
    int64_t mask_off; /* element offset of batch b in the mask */
} sdpa_ctx;

/* Masks, softmaxes and drops one score row in place (double or float storage). */
#define SDPA_ROW_BODY(T, EXP_SUM)                                                                  \
    do {                                                                                           \
        T *row = (T *)s->scores + r * p->s;                                                        \
        T mx = -INFINITY;                                                                          \
        for (int64_t j = 0; j < p->s; j++) {                                                       \
            T v = row[j];                                                                          \
            if (p->is_causal && j > l)                                                             \
                v = -INFINITY;                                                                     \
            if (mask) {                                                                            \
                int64_t mo = s->mask_off + l * p->mask_stride_l + j * p->mask_stride_s;            \
                if (p->mask_is_bool)                                                               \
                    v = ((const uint8_t *)mask)[mo] ? v : -INFINITY;                               \
                else                                                                               \
                    v += ((const T *)mask)[mo];                                                    \
            }                                                                                      \
            row[j] = v;                                                                            \
            if (v > mx || isnan(v))                                                                \
                mx = isnan(mx) ? mx : v;                                                           \
        }                                                                                          \
        double sum = EXP_SUM(row, p->s, mx);                                                       \
        T inv = (T)(1.0 / sum);                                                                    \
        for (int64_t j = 0; j < p->s; j++)                                                         \
            row[j] *= inv;                                                                         \
        if (p->dropout_p > 0) {                                                                    \
            T dscale = p->dropout_p < 1 ? (T)(1.0 / (1.0 - p->dropout_p)) : 0;                     \
            float keep_prob = (float)(1.0 - p->dropout_p);                                         \
            uint64_t first = (uint64_t)((s->b * p->l + l) * p->s);                                 \
            uint32_t rnd[4];                                                                       \
            uint64_t have = UINT64_MAX; /* counter whose words rnd holds */                        \
            for (int64_t j = 0; j < p->s; j++) {                                                   \
                uint64_t idx = first + (uint64_t)j;                                                \
                if (idx / 4 != have) {                                                             \
                    have = idx / 4;                                                                \
                    pti_philox(p->key, p->base + have, rnd);                                       \
                }                                                                                  \
                bool keep = pti_u32_to_float(rnd[idx % 4]) < keep_prob;                            \
                row[j] = keep ? row[j] * dscale : 0;                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void sdpa_rows(void *arg, int64_t r0, int64_t r1)
{
    sdpa_ctx *s = arg;
    const pti_sdpa_params *p = s->p;
    const void *mask = s->c->in[3] ? pti_data(s->c->in[3]) : NULL;
    for (int64_t r = r0; r < r1; r++) {
        int64_t l = s->l0 + r;
        if (s->f64)
            SDPA_ROW_BODY(double, exp_sum_f64);
        else
            SDPA_ROW_BODY(float, pti_nn_exp_sum_f32);
    }
}

static int64_t mask_batch_offset(const pti_sdpa_params *p, int64_t b)
{
    int64_t off = 0;
    for (int d = p->batch_ndim - 1; d >= 0; d--) {
        off += (b % p->batch_shape[d]) * p->mask_batch_stride[d];
        b /= p->batch_shape[d];
    }
    return off;
}

static pt_status cpu_sdpa(const pti_call *c)
{
    const pti_sdpa_params *p = c->params;
    bool f64 = c->in[0]->dtype == PT_FLOAT64;
    size_t es = f64 ? 8 : 4;
    int64_t rows_per_block = p->s > 0 ? SDPA_BLOCK_ELEMS / p->s : p->l;
    if (rows_per_block < 1)
        rows_per_block = 1;
    if (rows_per_block > p->l)
        rows_per_block = p->l;
    size_t nbytes = (size_t)(rows_per_block * p->s) * es;
    if (nbytes == 0)
        nbytes = es;
    void *scores = pti_cpu_alloc(nbytes);
    if (!scores)
        return pti_error(PT_ERR_OOM, "pt_scaled_dot_product_attention: out of memory");
    sdpa_ctx s = {c, p, f64, scores, 0, 0, 0};
    const char *q = pti_data(c->in[0]), *k = pti_data(c->in[1]), *v = pti_data(c->in[2]);
    char *o = pti_data(c->out[0]);
    int m, n = (int)p->s, kd = (int)p->e, nv = (int)p->ev;
    for (int64_t b = 0; b < p->batch; b++) {
        s.b = b;
        s.mask_off = c->in[3] ? mask_batch_offset(p, b) : 0;
        const char *kb = k + (size_t)(b * p->s * p->e) * es;
        const char *vb = v + (size_t)(b * p->s * p->ev) * es;
        for (int64_t l0 = 0; l0 < p->l; l0 += rows_per_block) {
            m = (int)(p->l - l0 < rows_per_block ? p->l - l0 : rows_per_block);
            s.l0 = l0;
            const char *qb = q + (size_t)((b * p->l + l0) * p->e) * es;
            char *ob = o + (size_t)((b * p->l + l0) * p->ev) * es;
            /* scores[m, S] = scale * q[m, E] @ k[S, E]^T */
            pti_gemm_args qk = {.f64 = f64,
                                .trans_b = true,
                                .M = m,
                                .N = n,
                                .K = kd,
                                .alpha = p->scale,
                                .A = qb,
                                .B = kb,
                                .C = scores,
                                .lda = LD(kd),
                                .ldb = LD(kd),
                                .ldc = LD(n)};
            pti_cpu_gemm(&qk);
            if (kd == 0) /* BLAS may leave C untouched when k == 0 */
                for (int64_t i = 0; i < (int64_t)m * n; i++) {
                    if (f64)
                        ((double *)scores)[i] = 0;
                    else
                        ((float *)scores)[i] = 0;
                }
            pti_parallel_for(m, 1 + 8192 / (LD(n)), sdpa_rows, &s);
            /* o[m, Ev] = P[m, S] @ v[S, Ev] */
            pti_gemm_args pv = {.f64 = f64,
                                .M = m,
                                .N = nv,
                                .K = n,
                                .alpha = 1.0,
                                .A = scores,
                                .B = vb,
                                .C = ob,
                                .lda = LD(n),
                                .ldb = LD(nv),
                                .ldc = LD(nv)};
            pti_cpu_gemm(&pv);
        }
    }
    pti_cpu_free(scores, nbytes);
    return PT_OK;
}

void pti_cpu_register_nn_attention(pti_kernel *table)
{
    table[PTI_OP_scaled_dot_product_attention] = cpu_sdpa;
}
