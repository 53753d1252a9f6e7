/* CPU kernels of the dim-wise ops of the reduce family: cumsum, cumprod, softmax and
 * log_softmax along one dim. The input is seen as lines along the dim (any strides); the
 * output is contiguous. The generic path works in double (int64 for integer scans); float32
 * has fast paths for contiguous rows (AVX2 exp, or AVX-512 in reduce_dim_avx512.c) and for blocks
 * of contiguous columns. */
#include <math.h>
#include <string.h>

#include "reduce_impl.h"

typedef struct djob {
    const pti_call *c;
    pti_rgeom g;
    int64_t D, K;           /* length of the dim; elements after it (output stride along the dim) */
    bool log, avx2, avx512; /* avx512: the AVX-512 rows (contiguous, K == 1) */
} djob;

static inline double ld(const char *base, pt_dtype dt, size_t es, int64_t off)
{
    switch (dt) {
    case PT_FLOAT32: return ((const float *)base)[off];
    case PT_FLOAT64: return ((const double *)base)[off];
    default: return pti_load_f64(base + (size_t)off * es, dt);
    }
}

/* One line: input offset `in_off` step `st`, output offset `out_off` step K. */
static void scan_line(const djob *j, int64_t in_off, int64_t out_off)
{
    const pt_tensor *in = j->c->in[0];
    pt_tensor *out = j->c->out[0];
    const char *ib = pti_data(in);
    char *ob = pti_data(out);
    size_t ies = pti_dtypes[in->dtype].size, oes = pti_dtypes[out->dtype].size;
    int64_t st = j->g.run_stride;
    bool prod = j->c->op == PTI_OP_cumprod;
    if (pti_dtypes[in->dtype].is_floating) {
        double acc = prod ? 1.0 : 0.0;
        for (int64_t d = 0; d < j->D; d++) {
            double v = ld(ib, in->dtype, ies, in_off + d * st);
            acc = prod ? acc * v : acc + v;
            pti_store_f64(ob + (size_t)(out_off + d * j->K) * oes, out->dtype, acc);
        }
    } else {
        uint64_t acc = prod ? 1 : 0; /* wraps like PyTorch's int64 */
        int64_t *o = (int64_t *)ob;
        for (int64_t d = 0; d < j->D; d++) {
            uint64_t v = (uint64_t)pti_load_i64(ib + (size_t)(in_off + d * st) * ies, in->dtype);
            acc = prod ? acc * v : acc + v;
            o[out_off + d * j->K] = (int64_t)acc;
        }
    }
}

static void softmax_line(const djob *j, int64_t in_off, int64_t out_off)
{
    const pt_tensor *in = j->c->in[0];
    pt_tensor *out = j->c->out[0];
    const char *ib = pti_data(in);
    char *ob = pti_data(out);
    size_t ies = pti_dtypes[in->dtype].size, oes = pti_dtypes[out->dtype].size;
    int64_t st = j->g.run_stride, D = j->D, K = j->K;
    double m = -INFINITY;
    for (int64_t d = 0; d < D; d++) {
        double v = ld(ib, in->dtype, ies, in_off + d * st);
        if (v != v || v > m)
            m = v;
        if (v != v)
            break;
    }
    double s = 0.0;
    for (int64_t d = 0; d < D; d++)
        s += exp(ld(ib, in->dtype, ies, in_off + d * st) - m);
    double ls = log(s), inv = 1.0 / s;
    for (int64_t d = 0; d < D; d++) {
        double x = ld(ib, in->dtype, ies, in_off + d * st) - m;
        pti_store_f64(ob + (size_t)(out_off + d * K) * oes, out->dtype,
                      j->log ? x - ls : exp(x) * inv);
    }
}

/* ---- float32 rows (contiguous, K == 1) ------------------------------------------------------- */

static void softmax_row_scalar(const float *x, float *y, int64_t n, bool lg)
{
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] != x[i]) {
            m = x[i];
            break;
        }
        if (x[i] > m)
            m = x[i];
    }
    float s = 0.0f;
    if (lg) {
        for (int64_t i = 0; i < n; i++)
            s += expf(x[i] - m);
        float c = logf(s);
        for (int64_t i = 0; i < n; i++)
            y[i] = (x[i] - m) - c;
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - m);
        s += y[i];
    }
    float inv = 1.0f / s;
    for (int64_t i = 0; i < n; i++)
        y[i] *= inv;
}

#ifdef __x86_64__
__attribute__((target("avx2,fma"))) static float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) static float hmax256(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"), always_inline)) static inline void
softmax_row_avx2(const float *x, float *y, int64_t n, bool lg)
{
    if (n < 8) {
        softmax_row_scalar(x, y, n, lg);
        return;
    }
    __m256 vm = _mm256_loadu_ps(x), vm2 = vm, nan = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v = _mm256_loadu_ps(x + i), v2 = _mm256_loadu_ps(x + i + 8);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v2, _CMP_UNORD_Q));
        vm = _mm256_max_ps(vm, v);
        vm2 = _mm256_max_ps(vm2, v2);
    }
    vm = _mm256_max_ps(vm, vm2);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        vm = _mm256_max_ps(vm, v);
    }
    float m = hmax256(vm); /* NaN lanes are caught by the nan mask */
    for (; i < n; i++) {
        if (x[i] != x[i])
            nan = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        m = x[i] > m ? x[i] : m;
    }
    if (!_mm256_testz_ps(nan, nan))
        m = NAN;
    __m256 mv = _mm256_set1_ps(m), acc = _mm256_setzero_ps(), acc2 = acc;
    float tail = 0.0f;
    if (lg) {
        for (i = 0; i + 16 <= n; i += 16) { /* two chains: exp latency overlaps */
            acc = _mm256_add_ps(acc, pti_exp256_sum(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
            acc2 =
                _mm256_add_ps(acc2, pti_exp256_sum(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv)));
        }
    } else {
        for (i = 0; i + 16 <= n; i += 16) {
            __m256 e = pti_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
            __m256 e2 = pti_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv));
            _mm256_storeu_ps(y + i, e);
            _mm256_storeu_ps(y + i + 8, e2);
            acc = _mm256_add_ps(acc, e);
            acc2 = _mm256_add_ps(acc2, e2);
        }
    }
    acc = _mm256_add_ps(acc, acc2);
    for (; i + 8 <= n; i += 8) {
        __m256 e = pti_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        if (!lg)
            _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    for (; i < n; i++) {
        float e = expf(x[i] - m);
        if (!lg)
            y[i] = e;
        tail += e;
    }
    float s = hsum256(acc) + tail;
    if (lg) {
        float ls = logf(s);
        __m256 cv = _mm256_set1_ps(ls);
        for (i = 0; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv), cv));
        for (; i < n; i++)
            y[i] = (x[i] - m) - ls;
        return;
    }
    __m256 inv = _mm256_set1_ps(1.0f / s);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
    for (; i < n; i++)
        y[i] *= 1.0f / s;
}

/* Rows [begin, end) of length n: the row body is inlined here so its constants (the exp
 * polynomial, masks) are set up once per call rather than once per row, which dominated
 * short rows. */
__attribute__((target("avx2,fma"))) static void
softmax_rows_avx2(const float *x, float *y, int64_t n, int64_t begin, int64_t end, bool lg)
{
    if (lg) {
        for (int64_t o = begin; o < end; o++)
            softmax_row_avx2(x + o * n, y + o * n, n, true);
    } else {
        for (int64_t o = begin; o < end; o++)
            softmax_row_avx2(x + o * n, y + o * n, n, false);
    }
}
#endif

/* ---- float32 columns: 16 contiguous columns at a time ---------------------------------------- */

#define SMW 16

static void softmax_cols_f32(const float *x, float *y, int64_t D, int64_t K, int64_t w, bool lg)
{
    float m[SMW], s[SMW];
    for (int64_t k = 0; k < w; k++) {
        m[k] = -INFINITY;
        s[k] = 0.0f;
    }
    for (int64_t d = 0; d < D; d++)
        for (int64_t k = 0; k < w; k++) {
            float v = x[d * K + k];
            if (m[k] == m[k] && (v != v || v > m[k]))
                m[k] = v;
        }
    for (int64_t d = 0; d < D; d++)
        for (int64_t k = 0; k < w; k++)
            s[k] += expf(x[d * K + k] - m[k]);
    for (int64_t k = 0; k < w; k++)
        s[k] = lg ? logf(s[k]) : 1.0f / s[k];
    for (int64_t d = 0; d < D; d++)
        for (int64_t k = 0; k < w; k++) {
            float v = x[d * K + k] - m[k];
            y[d * K + k] = lg ? v - s[k] : expf(v) * s[k];
        }
}

#ifdef __x86_64__
/* 16 columns in two registers per quantity: max, sum of exp, then the outputs. */
__attribute__((target("avx2,fma"))) static void softmax_cols16_avx2(const float *x, float *y,
                                                                    int64_t D, int64_t K, bool lg)
{
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, n0 = _mm256_setzero_ps(), n1 = n0;
    for (int64_t d = 0; d < D; d++) {
        __m256 v0 = _mm256_loadu_ps(x + d * K), v1 = _mm256_loadu_ps(x + d * K + 8);
        n0 = _mm256_or_ps(n0, _mm256_cmp_ps(v0, v0, _CMP_UNORD_Q));
        n1 = _mm256_or_ps(n1, _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q));
        m0 = _mm256_max_ps(m0, v0);
        m1 = _mm256_max_ps(m1, v1);
    }
    m0 = _mm256_blendv_ps(m0, _mm256_set1_ps(NAN), n0);
    m1 = _mm256_blendv_ps(m1, _mm256_set1_ps(NAN), n1);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    if (lg) {
        for (int64_t d = 0; d < D; d++) {
            s0 = _mm256_add_ps(s0, pti_exp256_sum(_mm256_sub_ps(_mm256_loadu_ps(x + d * K), m0)));
            s1 = _mm256_add_ps(s1,
                               pti_exp256_sum(_mm256_sub_ps(_mm256_loadu_ps(x + d * K + 8), m1)));
        }
    } else { /* exps go to y, scaled in the last pass */
        for (int64_t d = 0; d < D; d++) {
            __m256 e0 = pti_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + d * K), m0));
            __m256 e1 = pti_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + d * K + 8), m1));
            _mm256_storeu_ps(y + d * K, e0);
            _mm256_storeu_ps(y + d * K + 8, e1);
            s0 = _mm256_add_ps(s0, e0);
            s1 = _mm256_add_ps(s1, e1);
        }
    }
    if (lg) {
        float t[16];
        _mm256_storeu_ps(t, s0);
        _mm256_storeu_ps(t + 8, s1);
        for (int k = 0; k < 16; k++)
            t[k] = logf(t[k]);
        s0 = _mm256_loadu_ps(t);
        s1 = _mm256_loadu_ps(t + 8);
        for (int64_t d = 0; d < D; d++) {
            __m256 v0 = _mm256_sub_ps(_mm256_loadu_ps(x + d * K), m0);
            __m256 v1 = _mm256_sub_ps(_mm256_loadu_ps(x + d * K + 8), m1);
            _mm256_storeu_ps(y + d * K, _mm256_sub_ps(v0, s0));
            _mm256_storeu_ps(y + d * K + 8, _mm256_sub_ps(v1, s1));
        }
        return;
    }
    __m256 one = _mm256_set1_ps(1.0f);
    s0 = _mm256_div_ps(one, s0);
    s1 = _mm256_div_ps(one, s1);
    for (int64_t d = 0; d < D; d++) {
        _mm256_storeu_ps(y + d * K, _mm256_mul_ps(_mm256_loadu_ps(y + d * K), s0));
        _mm256_storeu_ps(y + d * K + 8, _mm256_mul_ps(_mm256_loadu_ps(y + d * K + 8), s1));
    }
}
#endif

/* ---- float32 scans: rows, or blocks of SCW contiguous columns, accumulated in double --------- */

#define SCW 32

/* Rows (K == 1) [u0, u1): four rows at a time so the four dependency chains overlap. */
static void scan_f32_rows(const djob *j, int64_t u0, int64_t u1)
{
    const float *x = pti_data(j->c->in[0]);
    float *y = pti_data(j->c->out[0]);
    int64_t D = j->D;
    bool prod = j->c->op == PTI_OP_cumprod;
    double init = prod ? 1.0 : 0.0;
    int64_t u = u0;
    for (; u + 4 <= u1; u += 4) {
        const float *a = x + u * D;
        float *b = y + u * D;
        double c0 = init, c1 = init, c2 = init, c3 = init;
        for (int64_t d = 0; d < D; d++) {
            if (prod) {
                c0 *= a[d];
                c1 *= a[D + d];
                c2 *= a[2 * D + d];
                c3 *= a[3 * D + d];
            } else {
                c0 += a[d];
                c1 += a[D + d];
                c2 += a[2 * D + d];
                c3 += a[3 * D + d];
            }
            b[d] = (float)c0;
            b[D + d] = (float)c1;
            b[2 * D + d] = (float)c2;
            b[3 * D + d] = (float)c3;
        }
    }
    for (; u < u1; u++) {
        double c = init;
        for (int64_t d = 0; d < D; d++) {
            c = prod ? c * x[u * D + d] : c + x[u * D + d];
            y[u * D + d] = (float)c;
        }
    }
}

#ifdef __x86_64__
/* 32 columns in eight double registers. */
__attribute__((target("avx2,fma"))) static void scan_cols32_avx2(const float *x, float *y,
                                                                 int64_t D, int64_t K, bool prod)
{
    __m256d a[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        a[k] = _mm256_set1_pd(prod ? 1.0 : 0.0);
    for (int64_t d = 0; d < D; d++) {
        const float *xr = x + d * K;
        float *yr = y + d * K;
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(xr + 4 * k));
            a[k] = prod ? _mm256_mul_pd(a[k], v) : _mm256_add_pd(a[k], v);
            _mm_storeu_ps(yr + 4 * k, _mm256_cvtpd_ps(a[k]));
        }
    }
}
#endif

/* Block u of SCW contiguous columns (K > 1). */
static void scan_f32_cols(const djob *j, int64_t u)
{
    const float *x = pti_data(j->c->in[0]);
    float *y = pti_data(j->c->out[0]);
    int64_t D = j->D, K = j->K;
    int64_t nb = (K + SCW - 1) / SCW, o = u / nb, k0 = (u % nb) * SCW;
    int64_t w = K - k0 < SCW ? K - k0 : SCW;
    double acc[SCW];
    bool prod = j->c->op == PTI_OP_cumprod;
#ifdef __x86_64__
    if (j->avx2 && w == SCW) {
        scan_cols32_avx2(x + o * D * K + k0, y + o * D * K + k0, D, K, prod);
        return;
    }
#endif
    for (int64_t k = 0; k < w; k++)
        acc[k] = prod ? 1.0 : 0.0;
    x += o * D * K + k0;
    y += o * D * K + k0;
    for (int64_t d = 0; d < D; d++) {
        const float *xr = x + d * K;
        float *yr = y + d * K;
        if (prod)
            for (int64_t k = 0; k < w; k++)
                acc[k] *= xr[k];
        else
            for (int64_t k = 0; k < w; k++)
                acc[k] += xr[k];
        for (int64_t k = 0; k < w; k++)
            yr[k] = (float)acc[k];
    }
}

static void scan_f32_range(void *arg, int64_t begin, int64_t end)
{
    const djob *j = arg;
    if (j->K == 1) {
        scan_f32_rows(j, begin, end);
        return;
    }
    for (int64_t u = begin; u < end; u++)
        scan_f32_cols(j, u);
}

static void lines_range(void *arg, int64_t begin, int64_t end)
{
    const djob *j = arg;
    const pt_tensor *in = j->c->in[0];
    bool scan = j->c->op == PTI_OP_cumsum || j->c->op == PTI_OP_cumprod;
    for (int64_t l = begin; l < end; l++) {
        int64_t in_off = pti_rgeom_out_offset(&j->g, l);
        int64_t out_off = (l / j->K) * j->D * j->K + l % j->K;
        (void)in;
        if (scan)
            scan_line(j, in_off, out_off);
        else
            softmax_line(j, in_off, out_off);
    }
}

/* f32 contiguous input: unit u is a row (K == 1) or a block of SMW columns. */
static void f32_range(void *arg, int64_t begin, int64_t end)
{
    const djob *j = arg;
    const float *x = pti_data(j->c->in[0]);
    float *y = pti_data(j->c->out[0]);
    int64_t D = j->D, K = j->K;
    if (K == 1) {
#ifdef __x86_64__
        if (j->avx512) {
            pti_softmax_rows_avx512(x, y, D, begin, end, j->log);
            return;
        }
        if (j->avx2) {
            softmax_rows_avx2(x, y, D, begin, end, j->log);
            return;
        }
#endif
        for (int64_t o = begin; o < end; o++)
            softmax_row_scalar(x + o * D, y + o * D, D, j->log);
        return;
    }
    int64_t nb = (K + SMW - 1) / SMW;
    for (int64_t u = begin; u < end; u++) {
        int64_t o = u / nb, k0 = (u % nb) * SMW;
        int64_t w = K - k0 < SMW ? K - k0 : SMW;
#ifdef __x86_64__
        if (j->avx2 && w == SMW) {
            softmax_cols16_avx2(x + o * D * K + k0, y + o * D * K + k0, D, K, j->log);
            continue;
        }
#endif
        softmax_cols_f32(x + o * D * K + k0, y + o * D * K + k0, D, K, w, j->log);
    }
}

static pt_status cpu_dim_op(const pti_call *c)
{
    const pt_tensor *in = c->in[0];
    int dim = (int)c->scalar[0];
    djob j = {.c = c,
              .log = c->op == PTI_OP_log_softmax,
              .avx2 = pti_cpu_has_avx2(),
              .avx512 = pti_cpu_has_avx512()};
    if (in->numel == 0)
        return PT_OK;
    pti_rgeom_init(&j.g, in, in->ndim > 0 ? 1u << dim : 0u);
    j.D = in->ndim > 0 ? in->shape[dim] : 1;
    j.K = 1;
    for (int d = dim + 1; d < in->ndim; d++)
        j.K *= in->shape[d];
    bool softmax = c->op == PTI_OP_softmax || c->op == PTI_OP_log_softmax;
    if (softmax && in->dtype == PT_FLOAT32 && pti_is_contiguous(in)) {
        int64_t O = in->numel / (j.D * j.K);
        int64_t units = j.K == 1 ? O : O * ((j.K + SMW - 1) / SMW);
        int64_t per = j.K == 1 ? j.D : j.D * SMW;
        int64_t grain = 2048 / per;
        pti_parallel_for(units, grain > 1 ? grain : 1, f32_range, &j);
        return PT_OK;
    }
    if (!softmax && in->dtype == PT_FLOAT32 && pti_is_contiguous(in)) {
        int64_t O = in->numel / (j.D * j.K);
        int64_t units = j.K == 1 ? O : O * ((j.K + SCW - 1) / SCW);
        int64_t per = j.K == 1 ? j.D : j.D * SCW;
        int64_t grain = 32768 / per;
        pti_parallel_for(units, grain > 1 ? grain : 1, scan_f32_range, &j);
        return PT_OK;
    }
    int64_t grain = 8192 / j.D;
    pti_parallel_for(j.g.nout, grain > 1 ? grain : 1, lines_range, &j);
    return PT_OK;
}

void pti_cpu_register_reduce_dim(pti_kernel *table)
{
    table[PTI_OP_cumsum] = cpu_dim_op;
    table[PTI_OP_cumprod] = cpu_dim_op;
    table[PTI_OP_softmax] = cpu_dim_op;
    table[PTI_OP_log_softmax] = cpu_dim_op;
}
