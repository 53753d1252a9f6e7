/* CPU kernels of the reduce family (front-ends in src/ops/reduce.c): sum, mean, prod,
 * amax/amin, max/min along a dim with indices, argmax/argmin, var/std, norm, logsumexp,
 * all/any. The dim-wise ops (cumsum, cumprod, softmax, log_softmax) are in reduce_dim.c.
 *
 * Design: the input's dims are split into kept dims (the output's, row-major) and reduced
 * dims; each set is coalesced where strides allow. The generic path walks, for each output
 * element, the reduced dims as runs of a strided innermost dim, loads runs in chunks into a
 * double (or int64) buffer and reduces the chunk -- one loader per dtype, one reducer per op,
 * every dtype and stride handled. float32 has fast paths: contiguous rows (reduce over the
 * innermost dims), columns (reduce over outer dims: vector accumulation across the contiguous
 * kept dim) and whole-tensor reductions split across threads and combined in a fixed order
 * (deterministic for any thread count). float32 sums accumulate blocks of at most 256 floats
 * and add the block sums in double, so large sums are as accurate as PyTorch's cascade sum. */
#include <math.h>
#include <string.h>

#include "reduce_impl.h"

/* ---- geometry -------------------------------------------------------------------------------- */

static int coalesce(int n, int64_t *size, int64_t *stride)
{
    int w = 0;
    for (int d = 0; d < n; d++) {
        if (w > 0 && stride[d] == stride[w - 1] * size[w - 1]) {
            size[w - 1] *= size[d];
            continue;
        }
        size[w] = size[d];
        stride[w] = stride[d];
        w++;
    }
    return w;
}

void pti_rgeom_init(pti_rgeom *g, const pt_tensor *t, uint32_t bits)
{
    g->nk = g->nr = 0;
    g->nout = g->nred = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t s = t->shape[d];
        if (bits >> d & 1u) {
            g->nred *= s;
            if (s != 1) {
                g->rs[g->nr] = s;
                g->rst[g->nr++] = t->stride[d];
            }
        } else {
            g->nout *= s;
            if (s != 1) {
                g->ks[g->nk] = s;
                g->kst[g->nk++] = t->stride[d];
            }
        }
    }
    g->nk = coalesce(g->nk, g->ks, g->kst);
    g->nr = coalesce(g->nr, g->rs, g->rst);
    g->run = g->nr > 0 ? g->rs[0] : 1;
    g->run_stride = g->nr > 0 ? g->rst[0] : 0;
}

int64_t pti_rgeom_out_offset(const pti_rgeom *g, int64_t o)
{
    int64_t off = 0;
    for (int d = 0; d < g->nk; d++) {
        off += (o % g->ks[d]) * g->kst[d];
        o /= g->ks[d];
    }
    return off;
}

/* ---- walking the reduced elements of one output in chunks ------------------------------------ */

#define CHUNK 256

typedef struct chunker {
    const pti_rgeom *g;
    const char *data; /* element 0 of the input */
    pt_dtype dt;
    int64_t idx[PT_MAX_DIMS]; /* multi-index over reduced dims 1.. */
    int64_t next_run;         /* element offset of the next run */
    int64_t runs_left;
    int64_t off, left; /* the current run: offset of its next element, elements left */
    int64_t pos;       /* row-major index (over the reduced dims) of the next element */
} chunker;

static void chunker_init(chunker *ck, const pti_rgeom *g, const pt_tensor *t, int64_t base)
{
    ck->g = g;
    ck->data = pti_data(t);
    ck->dt = t->dtype;
    memset(ck->idx, 0, sizeof ck->idx);
    ck->next_run = base;
    ck->runs_left = g->nred == 0 ? 0 : g->nred / g->run;
    ck->left = 0;
    ck->pos = 0;
}

static bool chunker_advance(chunker *ck)
{
    if (ck->left > 0)
        return true;
    if (ck->runs_left == 0)
        return false;
    const pti_rgeom *g = ck->g;
    ck->off = ck->next_run;
    ck->left = g->run;
    ck->runs_left--;
    for (int d = 1; d < g->nr; d++) {
        ck->next_run += g->rst[d];
        if (++ck->idx[d] < g->rs[d])
            break;
        ck->next_run -= g->rs[d] * g->rst[d];
        ck->idx[d] = 0;
    }
    return true;
}

/* Loads up to CHUNK values as doubles; returns how many (0 at the end). */
static int64_t chunk_f64(chunker *ck, double *buf)
{
    if (!chunker_advance(ck))
        return 0;
    int64_t n = ck->left < CHUNK ? ck->left : CHUNK, st = ck->g->run_stride;
    int64_t off = ck->off;
    switch (ck->dt) {
    case PT_FLOAT32: {
        const float *p = (const float *)ck->data + off;
        for (int64_t i = 0; i < n; i++)
            buf[i] = p[i * st];
        break;
    }
    case PT_FLOAT64: {
        const double *p = (const double *)ck->data + off;
        for (int64_t i = 0; i < n; i++)
            buf[i] = p[i * st];
        break;
    }
    default: {
        size_t es = pti_dtypes[ck->dt].size;
        for (int64_t i = 0; i < n; i++)
            buf[i] = pti_load_f64(ck->data + (size_t)(off + i * st) * es, ck->dt);
    }
    }
    ck->off += n * st;
    ck->left -= n;
    ck->pos += n;
    return n;
}

/* Same as int64 (integer and bool inputs: exact). */
static int64_t chunk_i64(chunker *ck, int64_t *buf)
{
    if (!chunker_advance(ck))
        return 0;
    int64_t n = ck->left < CHUNK ? ck->left : CHUNK, st = ck->g->run_stride;
    int64_t off = ck->off;
    switch (ck->dt) {
    case PT_INT64: {
        const int64_t *p = (const int64_t *)ck->data + off;
        for (int64_t i = 0; i < n; i++)
            buf[i] = p[i * st];
        break;
    }
    case PT_INT32: {
        const int32_t *p = (const int32_t *)ck->data + off;
        for (int64_t i = 0; i < n; i++)
            buf[i] = p[i * st];
        break;
    }
    default: {
        size_t es = pti_dtypes[ck->dt].size;
        for (int64_t i = 0; i < n; i++)
            buf[i] = pti_load_i64(ck->data + (size_t)(off + i * st) * es, ck->dt);
    }
    }
    ck->off += n * st;
    ck->left -= n;
    ck->pos += n;
    return n;
}

/* ---- generic reducers: one output element each ----------------------------------------------- */

typedef struct rjob {
    const pti_call *c;
    const pti_rgeom *g;
    double arg; /* correction / p */
} rjob;

/* NaN-propagating "better than" for max (sign = 1) and min (sign = -1); ties keep the first. */
static inline bool better_f64(double v, double best, int sign)
{
    if (isnan(best))
        return false;
    if (isnan(v))
        return true;
    return sign > 0 ? v > best : v < best;
}

static double reduce_sum_f64(chunker *ck)
{
    double buf[CHUNK], acc = 0.0;
    int64_t n;
    while ((n = chunk_f64(ck, buf)) > 0) {
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            s0 += buf[i];
            s1 += buf[i + 1];
            s2 += buf[i + 2];
            s3 += buf[i + 3];
        }
        for (; i < n; i++)
            s0 += buf[i];
        acc += (s0 + s1) + (s2 + s3);
    }
    return acc;
}

/* Index (row-major over the reduced dims) and value of the first max/min. */
static int64_t reduce_arg_f64(chunker *ck, int sign, double *value)
{
    double buf[CHUNK], best = 0.0;
    int64_t n, besti = -1;
    while ((n = chunk_f64(ck, buf)) > 0) {
        int64_t start = ck->pos - n;
        for (int64_t i = 0; i < n; i++) {
            if (besti < 0 || better_f64(buf[i], best, sign)) {
                best = buf[i];
                besti = start + i;
            }
        }
    }
    *value = best;
    return besti;
}

static int64_t reduce_arg_i64(chunker *ck, int sign, int64_t *value)
{
    int64_t buf[CHUNK], best = 0;
    int64_t n, besti = -1;
    while ((n = chunk_i64(ck, buf)) > 0) {
        int64_t start = ck->pos - n;
        for (int64_t i = 0; i < n; i++) {
            if (besti < 0 || (sign > 0 ? buf[i] > best : buf[i] < best)) {
                best = buf[i];
                besti = start + i;
            }
        }
    }
    *value = best;
    return besti;
}

static double reduce_var_f64(const rjob *j, int64_t base, double correction)
{
    chunker ck;
    chunker_init(&ck, j->g, j->c->in[0], base);
    double n = (double)j->g->nred;
    double mean = reduce_sum_f64(&ck) / n;
    chunker_init(&ck, j->g, j->c->in[0], base);
    double buf[CHUNK], acc = 0.0;
    int64_t m;
    while ((m = chunk_f64(&ck, buf)) > 0) {
        for (int64_t i = 0; i < m; i++) {
            double d = buf[i] - mean;
            acc += d * d;
        }
    }
    double div = n - correction;
    return acc / (div > 0 ? div : 0.0);
}

static double reduce_norm_f64(chunker *ck, double p)
{
    double buf[CHUNK], acc = 0.0;
    int64_t n;
    if (isinf(p)) {
        acc = p > 0 ? 0.0 : INFINITY;
        bool first = true;
        while ((n = chunk_f64(ck, buf)) > 0) {
            for (int64_t i = 0; i < n; i++) {
                double a = fabs(buf[i]);
                if (first || better_f64(a, acc, p > 0 ? 1 : -1))
                    acc = a;
                first = false;
            }
        }
        return acc;
    }
    while ((n = chunk_f64(ck, buf)) > 0) {
        for (int64_t i = 0; i < n; i++) {
            double a = fabs(buf[i]);
            if (p == 2.0)
                acc += a * a;
            else if (p == 1.0)
                acc += a;
            else if (p == 0.0)
                acc += buf[i] != 0.0;
            else
                acc += pow(a, p);
        }
    }
    if (p == 2.0)
        return sqrt(acc);
    if (p == 1.0 || p == 0.0)
        return acc;
    return pow(acc, 1.0 / p);
}

static double reduce_logsumexp_f64(const rjob *j, int64_t base)
{
    chunker ck;
    chunker_init(&ck, j->g, j->c->in[0], base);
    double m;
    if (reduce_arg_f64(&ck, 1, &m) < 0)
        return -INFINITY; /* empty */
    if (isinf(m))
        m = 0.0; /* all -inf gives log(0) = -inf; any +inf gives +inf */
    chunker_init(&ck, j->g, j->c->in[0], base);
    double buf[CHUNK], acc = 0.0;
    int64_t n;
    while ((n = chunk_f64(&ck, buf)) > 0)
        for (int64_t i = 0; i < n; i++)
            acc += exp(buf[i] - m);
    return log(acc) + m;
}

/* all (want_all) / any over nonzero tests. */
static bool reduce_allany(chunker *ck, bool want_all)
{
    double buf[CHUNK];
    int64_t n;
    while ((n = chunk_f64(ck, buf)) > 0) {
        for (int64_t i = 0; i < n; i++) {
            bool nz = buf[i] != 0.0;
            if (want_all && !nz)
                return false;
            if (!want_all && nz)
                return true;
        }
    }
    return want_all;
}

static void generic_one(const rjob *j, int64_t o)
{
    const pti_call *c = j->c;
    const pt_tensor *in = c->in[0];
    pt_tensor *out = c->out[0];
    int64_t base = pti_rgeom_out_offset(j->g, o);
    char *dst = (char *)pti_data(out) + (size_t)o * pti_dtypes[out->dtype].size;
    bool isfloat = pti_dtypes[in->dtype].is_floating;
    chunker ck;
    chunker_init(&ck, j->g, in, base);
    switch (c->op) {
    case PTI_OP_sum:
    case PTI_OP_mean:
        if (isfloat) {
            double s = reduce_sum_f64(&ck);
            pti_store_f64(dst, out->dtype, c->op == PTI_OP_mean ? s / (double)j->g->nred : s);
        } else {
            int64_t buf[CHUNK], n;
            uint64_t acc = 0;
            while ((n = chunk_i64(&ck, buf)) > 0)
                for (int64_t i = 0; i < n; i++)
                    acc += (uint64_t)buf[i];
            pti_store_i64(dst, out->dtype, (int64_t)acc);
        }
        break;
    case PTI_OP_prod:
        if (isfloat) {
            double buf[CHUNK], acc = 1.0;
            int64_t n;
            while ((n = chunk_f64(&ck, buf)) > 0)
                for (int64_t i = 0; i < n; i++)
                    acc *= buf[i];
            pti_store_f64(dst, out->dtype, acc);
        } else {
            int64_t buf[CHUNK], n;
            uint64_t acc = 1;
            while ((n = chunk_i64(&ck, buf)) > 0)
                for (int64_t i = 0; i < n; i++)
                    acc *= (uint64_t)buf[i];
            pti_store_i64(dst, out->dtype, (int64_t)acc);
        }
        break;
    case PTI_OP_amax:
    case PTI_OP_amin:
    case PTI_OP_max_dim:
    case PTI_OP_min_dim:
    case PTI_OP_argmax:
    case PTI_OP_argmin: {
        int sign =
            (c->op == PTI_OP_amax || c->op == PTI_OP_max_dim || c->op == PTI_OP_argmax) ? 1 : -1;
        int64_t idx;
        bool is_arg = c->op == PTI_OP_argmax || c->op == PTI_OP_argmin;
        if (isfloat) {
            double v;
            idx = reduce_arg_f64(&ck, sign, &v);
            if (!is_arg)
                pti_store_f64(dst, out->dtype, v);
        } else {
            int64_t v;
            idx = reduce_arg_i64(&ck, sign, &v);
            if (!is_arg)
                pti_store_i64(dst, out->dtype, v);
        }
        if (is_arg)
            ((int64_t *)pti_data(out))[o] = idx;
        else if (c->n_out > 1 && c->out[1])
            ((int64_t *)pti_data(c->out[1]))[o] = idx;
        break;
    }
    case PTI_OP_var:
    case PTI_OP_std: {
        double v = reduce_var_f64(j, base, j->arg);
        pti_store_f64(dst, out->dtype, c->op == PTI_OP_std ? sqrt(v) : v);
        break;
    }
    case PTI_OP_norm: pti_store_f64(dst, out->dtype, reduce_norm_f64(&ck, j->arg)); break;
    case PTI_OP_logsumexp: pti_store_f64(dst, out->dtype, reduce_logsumexp_f64(j, base)); break;
    case PTI_OP_all:
    case PTI_OP_any: pti_store_i64(dst, out->dtype, reduce_allany(&ck, c->op == PTI_OP_all)); break;
    default: break;
    }
}

static void generic_range(void *arg, int64_t begin, int64_t end)
{
    const rjob *j = arg;
    for (int64_t o = begin; o < end; o++)
        generic_one(j, o);
}

static pt_status cpu_reduce(const pti_call *c)
{
    const pt_tensor *in = c->in[0];
    pti_rgeom g;
    pti_rgeom_init(&g, in, (uint32_t)c->scalar[0]);
    if (g.nout == 0)
        return PT_OK;
    if (in->dtype == PT_FLOAT32 && pti_reduce_f32_fast(c, &g))
        return PT_OK;
    rjob j = {c, &g, c->scalar[1]};
    int64_t per = g.nred > 0 ? g.nred : 1;
    if (c->op == PTI_OP_var || c->op == PTI_OP_std || c->op == PTI_OP_logsumexp)
        per *= 2;
    if (c->op == PTI_OP_norm || c->op == PTI_OP_logsumexp)
        per *= 8; /* pow / exp per element */
    int64_t grain = 32768 / per;
    pti_parallel_for(g.nout, grain > 1 ? grain : 1, generic_range, &j);
    return PT_OK;
}

void pti_cpu_register_reduce(pti_kernel *table)
{
    static const pti_op ops[] = {PTI_OP_sum,       PTI_OP_mean,    PTI_OP_prod,    PTI_OP_amax,
                                 PTI_OP_amin,      PTI_OP_max_dim, PTI_OP_min_dim, PTI_OP_argmax,
                                 PTI_OP_argmin,    PTI_OP_var,     PTI_OP_std,     PTI_OP_norm,
                                 PTI_OP_logsumexp, PTI_OP_all,     PTI_OP_any};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        table[ops[i]] = cpu_reduce;
    pti_cpu_register_reduce_dim(table);
}
