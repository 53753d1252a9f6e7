/* CPU kernels of the loss family (front-ends in src/ops/loss.c). Inputs arrive contiguous in
 * float32 or float64. Each element's loss is computed in double; reductions sum fixed-size
 * blocks into partials that are added in order, so results do not depend on the thread count.
 * Class losses (cross_entropy, nll_loss) take the log-sum-exp of contiguous float32 rows with
 * the AVX2 primitive of nn_simd.c. Their fused backward (d(loss)/d(input)) is at the end. */
#include <math.h>
#include <stdatomic.h>

#include "../../ops/loss_params.h"
#include "nn_simd.h"

#define POINTWISE_BLOCK 4096
#define CLASS_BLOCK 256

static inline double load(const void *base, bool f64, int64_t i)
{
    return f64 ? ((const double *)base)[i] : (double)((const float *)base)[i];
}

static inline void store(void *base, bool f64, int64_t i, double v)
{
    if (f64)
        ((double *)base)[i] = v;
    else
        ((float *)base)[i] = (float)v;
}

/* Writes the reduced result (sum of partials, divided for MEAN/BATCHMEAN) to out[0]. */
static void store_reduced(pt_tensor *out, bool f64, const double *partial, int64_t nblocks,
                          double divisor, pt_reduction red)
{
    double s = 0;
    for (int64_t b = 0; b < nblocks; b++)
        s += partial[b];
    store(pti_data(out), f64, 0, red == PT_REDUCTION_SUM ? s : s / divisor);
}

/* ---- elementwise losses -----------------------------------------------------------------------
 */

typedef enum pw_kind {
    PW_MSE,
    PW_L1,
    PW_SMOOTH_L1,
    PW_HUBER,
    PW_BCE,
    PW_BCE_LOGITS,
    PW_KL_DIV
} pw_kind;

typedef struct pw_ctx {
    const pti_call *c;
    const pti_pointwise_loss_params *p;
    pw_kind kind;
    bool f64;
    int64_t n;
    double *partial;
    atomic_bool bad; /* BCE input outside [0, 1] */
} pw_ctx;

static double softplus(double z)
{
    return (z > 0 ? z : 0) + log1p(exp(-fabs(z)));
}

static double xlogy_self(double t)
{
    return isnan(t) ? t : (t == 0 ? 0 : t * log(t));
}

static inline double pointwise_loss(const pw_ctx *pc, double x, double t, int64_t i, bool *bad)
{
    const pti_pointwise_loss_params *p = pc->p;
    double d = x - t, ad = fabs(d), l;
    switch (pc->kind) {
    case PW_MSE: return d * d;
    case PW_L1: return ad;
    case PW_SMOOTH_L1:
        if (p->beta == 0)
            return ad;
        return ad < p->beta ? 0.5 * d * d / p->beta : ad - 0.5 * p->beta;
    case PW_HUBER: return ad <= p->beta ? 0.5 * d * d : p->beta * (ad - 0.5 * p->beta);
    case PW_BCE:
        if (!(x >= 0 && x <= 1))
            *bad = true;
        l = (t - 1) * fmax(log1p(-x), -100.0) - t * fmax(log(x), -100.0);
        break;
    case PW_BCE_LOGITS: {
        double pw = pc->c->in[3] ? load(pti_data(pc->c->in[3]), pc->f64, i) : 1.0;
        l = (1 - t) * x + (1 + (pw - 1) * t) * softplus(-x);
        break;
    }
    case PW_KL_DIV: return p->log_target ? exp(t) * (t - x) : xlogy_self(t) - t * x;
    default: return NAN;
    }
    if (pc->c->in[2])
        l *= load(pti_data(pc->c->in[2]), pc->f64, i);
    return l;
}

static void pw_blocks(void *arg, int64_t b0, int64_t b1)
{
    pw_ctx *pc = arg;
    const void *x = pti_data(pc->c->in[0]), *t = pti_data(pc->c->in[1]);
    void *out = pti_data(pc->c->out[0]);
    bool none = pc->p->reduction == PT_REDUCTION_NONE, bad = false;
    for (int64_t b = b0; b < b1; b++) {
        int64_t i0 = b * POINTWISE_BLOCK;
        int64_t i1 = i0 + POINTWISE_BLOCK < pc->n ? i0 + POINTWISE_BLOCK : pc->n;
        double s = 0;
        for (int64_t i = i0; i < i1; i++) {
            double l = pointwise_loss(pc, load(x, pc->f64, i), load(t, pc->f64, i), i, &bad);
            if (none)
                store(out, pc->f64, i, l);
            else
                s += l;
        }
        if (!none)
            pc->partial[b] = s;
    }
    if (bad)
        atomic_store(&pc->bad, true);
}

static pt_status run_pointwise(const pti_call *c, pw_kind kind)
{
    const pti_pointwise_loss_params *p = c->params;
    pw_ctx pc = {c, p, kind, c->in[0]->dtype == PT_FLOAT64, c->in[0]->numel, NULL, false};
    int64_t nblocks = (pc.n + POINTWISE_BLOCK - 1) / POINTWISE_BLOCK;
    size_t nbytes = (size_t)(nblocks > 0 ? nblocks : 1) * sizeof(double);
    if (p->reduction != PT_REDUCTION_NONE) {
        pc.partial = pti_cpu_alloc(nbytes);
        if (!pc.partial)
            return pti_error(PT_ERR_OOM, "%s: out of memory", pti_op_names[c->op]);
    }
    pti_parallel_for(nblocks, 4, pw_blocks, &pc);
    if (p->reduction != PT_REDUCTION_NONE) {
        store_reduced(c->out[0], pc.f64, pc.partial, nblocks, p->divisor, p->reduction);
        pti_cpu_free(pc.partial, nbytes);
    }
    if (atomic_load(&pc.bad))
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_binary_cross_entropy: all elements of input should be between 0 "
                         "and 1");
    return PT_OK;
}

static pt_status cpu_mse_loss(const pti_call *c)
{
    return run_pointwise(c, PW_MSE);
}
static pt_status cpu_l1_loss(const pti_call *c)
{
    return run_pointwise(c, PW_L1);
}
static pt_status cpu_smooth_l1_loss(const pti_call *c)
{
    return run_pointwise(c, PW_SMOOTH_L1);
}
static pt_status cpu_huber_loss(const pti_call *c)
{
    return run_pointwise(c, PW_HUBER);
}
static pt_status cpu_bce(const pti_call *c)
{
    return run_pointwise(c, PW_BCE);
}
static pt_status cpu_bce_logits(const pti_call *c)
{
    return run_pointwise(c, PW_BCE_LOGITS);
}
static pt_status cpu_kl_div(const pti_call *c)
{
    return run_pointwise(c, PW_KL_DIV);
}

/* ---- cross_entropy and nll_loss ------------------------------------------------------------- */

typedef struct cls_ctx {
    const pti_call *c;
    const pti_class_loss_params *p;
    bool f64, log_softmax;
    int64_t samples;
    double *partial; /* per block: loss sum, weight sum */
    atomic_bool bad;
    _Atomic int64_t bad_target;
} cls_ctx;

/* log-sum-exp over the C classes of one sample (stride S). */
static double sample_lse(const cls_ctx *cc, const void *x, int64_t base)
{
    const pti_class_loss_params *p = cc->p;
    if (!cc->f64 && p->s == 1)
        return pti_nn_logsumexp_f32((const float *)x + base, p->c);
    double m = -INFINITY;
    for (int64_t k = 0; k < p->c; k++) {
        double v = load(x, cc->f64, base + k * p->s);
        if (v > m || isnan(v))
            m = isnan(m) ? m : v;
    }
    if (isnan(m) || isinf(m))
        return m;
    double s = 0;
    for (int64_t k = 0; k < p->c; k++)
        s += exp(load(x, cc->f64, base + k * p->s) - m);
    return m + log(s);
}

/* Loss of sample i; *wsum gets the weight it adds to the mean's divisor. */
static double sample_loss(cls_ctx *cc, int64_t i, double *wsum, bool *bad)
{
    const pti_class_loss_params *p = cc->p;
    const void *x = pti_data(cc->c->in[0]);
    const pt_tensor *wt = cc->c->in[2];
    const void *w = wt ? pti_data(wt) : NULL;
    int64_t n = i / p->s, base = n * p->c * p->s + i % p->s;
    double lse = cc->log_softmax ? sample_lse(cc, x, base) : 0.0;
    double eps = p->label_smoothing, loss = 0;
    if (p->prob_target) {
        const void *t = pti_data(cc->c->in[1]);
        for (int64_t k = 0; k < p->c; k++) {
            double tk = load(t, cc->f64, base + k * p->s);
            if (eps > 0)
                tk = tk * (1 - eps) + eps / (double)p->c;
            double wk = w ? load(w, cc->f64, k) : 1.0;
            loss += wk * tk * (lse - load(x, cc->f64, base + k * p->s));
        }
        *wsum = 1;
        return loss;
    }
    int64_t y = ((const int64_t *)pti_data(cc->c->in[1]))[i];
    *wsum = 0;
    if (y == p->ignore_index)
        return 0;
    if (y < 0 || y >= p->c) {
        if (!atomic_exchange(&cc->bad, true))
            atomic_store(&cc->bad_target, y);
        *bad = true;
        return 0;
    }
    double wy = w ? load(w, cc->f64, y) : 1.0;
    loss = wy * (lse - load(x, cc->f64, base + y * p->s));
    if (eps > 0) {
        double smooth = 0;
        for (int64_t k = 0; k < p->c; k++)
            smooth += (w ? load(w, cc->f64, k) : 1.0) * (lse - load(x, cc->f64, base + k * p->s));
        loss = (1 - eps) * loss + eps / (double)p->c * smooth;
    }
    *wsum = wy;
    return loss;
}

static void cls_blocks(void *arg, int64_t b0, int64_t b1)
{
    cls_ctx *cc = arg;
    void *out = pti_data(cc->c->out[0]);
    bool none = cc->p->reduction == PT_REDUCTION_NONE;
    for (int64_t b = b0; b < b1; b++) {
        int64_t i0 = b * CLASS_BLOCK;
        int64_t i1 = i0 + CLASS_BLOCK < cc->samples ? i0 + CLASS_BLOCK : cc->samples;
        double ls = 0, ws = 0;
        bool bad = false;
        for (int64_t i = i0; i < i1 && !bad; i++) {
            double wi;
            double l = sample_loss(cc, i, &wi, &bad);
            if (none)
                store(out, cc->f64, i, l);
            ls += l;
            ws += wi;
        }
        if (!none) {
            cc->partial[2 * b] = ls;
            cc->partial[2 * b + 1] = ws;
        }
    }
}

static pt_status run_class_loss(const pti_call *c, bool log_softmax)
{
    const pti_class_loss_params *p = c->params;
    cls_ctx cc = {c, p, c->in[0]->dtype == PT_FLOAT64, log_softmax, p->n * p->s, NULL, false, 0};
    int64_t nblocks = (cc.samples + CLASS_BLOCK - 1) / CLASS_BLOCK;
    size_t nbytes = (size_t)(nblocks > 0 ? nblocks : 1) * 2 * sizeof(double);
    bool reduce = p->reduction != PT_REDUCTION_NONE;
    if (reduce) {
        cc.partial = pti_cpu_alloc(nbytes);
        if (!cc.partial)
            return pti_error(PT_ERR_OOM, "%s: out of memory", pti_op_names[c->op]);
    }
    pti_parallel_for(nblocks, 1 + 16384 / (p->c > 0 ? p->c * 4 : 1) / CLASS_BLOCK, cls_blocks, &cc);
    if (reduce) {
        double ls = 0, ws = 0;
        for (int64_t b = 0; b < nblocks; b++) {
            ls += cc.partial[2 * b];
            ws += cc.partial[2 * b + 1];
        }
        pti_cpu_free(cc.partial, nbytes);
        store(pti_data(c->out[0]), cc.f64, 0, p->reduction == PT_REDUCTION_SUM ? ls : ls / ws);
    }
    if (atomic_load(&cc.bad))
        return pti_error(PT_ERR_INDEX, "%s: target %lld is out of bounds for %lld classes",
                         log_softmax ? "pt_cross_entropy" : "pt_nll_loss",
                         (long long)atomic_load(&cc.bad_target), (long long)p->c);
    return PT_OK;
}

static pt_status cpu_cross_entropy(const pti_call *c)
{
    return run_class_loss(c, true);
}
static pt_status cpu_nll_loss(const pti_call *c)
{
    return run_class_loss(c, false);
}

/* ---- class loss backward ----------------------------------------------------------------------
 */

/* d(loss)/d(input) of sample i's C entries: with Q_c the weight that log_softmax_c (or
 * input_c for nll) carries in the loss, the gradient is (softmax_c * sum(Q) - Q_c) * scale
 * for cross entropy and -Q_c * scale for nll. */
typedef struct cls_bwd_ctx {
    cls_ctx cc;
    double scale;   /* grad_output / mean divisor, unless reduction is NONE */
    double total_w; /* sum of the class weights (C without weight) */
} cls_bwd_ctx;

static void cls_bwd_range(void *arg, int64_t i0, int64_t i1)
{
    const cls_bwd_ctx *b = arg;
    const cls_ctx *cc = &b->cc;
    const pti_class_loss_params *p = cc->p;
    const pti_call *c = cc->c;
    const void *x = pti_data(c->in[0]), *go = pti_data(c->in[3]);
    const void *w = c->in[2] ? pti_data(c->in[2]) : NULL;
    void *gi = pti_data(c->out[0]);
    bool f64 = cc->f64;
    double eps = p->label_smoothing, se = eps / (double)p->c;
    for (int64_t i = i0; i < i1; i++) {
        int64_t n = i / p->s, base = n * p->c * p->s + i % p->s;
        double gs = p->reduction == PT_REDUCTION_NONE ? load(go, f64, i) : b->scale;
        double lse = cc->log_softmax ? sample_lse(cc, x, base) : 0.0;
        double a = 0, sumq = 0;
        int64_t y = -1;
        if (p->prob_target) {
            const void *t = pti_data(c->in[1]);
            for (int64_t k = 0; k < p->c; k++)
                sumq +=
                    (w ? load(w, f64, k) : 1.0) * ((1 - eps) * load(t, f64, base + k * p->s) + se);
        } else {
            y = ((const int64_t *)pti_data(c->in[1]))[i];
            if (y == p->ignore_index) {
                for (int64_t k = 0; k < p->c; k++)
                    store(gi, f64, base + k * p->s, 0.0);
                continue;
            }
            a = (1 - eps) * (w ? load(w, f64, y) : 1.0);
            sumq = a + se * b->total_w;
        }
        for (int64_t k = 0; k < p->c; k++) {
            double wk = w ? load(w, f64, k) : 1.0, q;
            if (p->prob_target)
                q = wk * ((1 - eps) * load(pti_data(c->in[1]), f64, base + k * p->s) + se);
            else
                q = (k == y ? a : 0.0) + se * wk;
            double g = cc->log_softmax ? exp(load(x, f64, base + k * p->s) - lse) * sumq - q : -q;
            store(gi, f64, base + k * p->s, g * gs);
        }
    }
}

static pt_status run_class_backward(const pti_call *c, bool log_softmax)
{
    const pti_class_loss_params *p = c->params;
    cls_bwd_ctx b = {
        {c, p, c->in[0]->dtype == PT_FLOAT64, log_softmax, p->n * p->s, NULL, false, 0},
        1.0,
        (double)p->c};
    const void *w = c->in[2] ? pti_data(c->in[2]) : NULL;
    if (w) {
        b.total_w = 0;
        for (int64_t k = 0; k < p->c; k++)
            b.total_w += load(w, b.cc.f64, k);
    }
    /* the targets' range, and the 'mean' divisor (as the forward) */
    double denom = (double)b.cc.samples;
    if (!p->prob_target) {
        const int64_t *t = pti_data(c->in[1]);
        denom = 0;
        for (int64_t i = 0; i < b.cc.samples; i++) {
            if (t[i] == p->ignore_index)
                continue;
            if (t[i] < 0 || t[i] >= p->c)
                return pti_error(PT_ERR_INDEX, "%s: target %lld is out of bounds for %lld classes",
                                 log_softmax ? "pt_cross_entropy_backward" : "pt_nll_loss_backward",
                                 (long long)t[i], (long long)p->c);
            denom += w ? load(w, b.cc.f64, t[i]) : 1.0;
        }
    }
    if (p->reduction != PT_REDUCTION_NONE) {
        b.scale = load(pti_data(c->in[3]), b.cc.f64, 0);
        if (p->reduction == PT_REDUCTION_MEAN)
            b.scale /= denom;
    }
    int64_t grain = 16384 / (p->c > 0 ? p->c : 1) + 1;
    pti_parallel_for(b.cc.samples, grain, cls_bwd_range, &b);
    return PT_OK;
}

static pt_status cpu_cross_entropy_backward(const pti_call *c)
{
    return run_class_backward(c, true);
}
static pt_status cpu_nll_loss_backward(const pti_call *c)
{
    return run_class_backward(c, false);
}

void pti_cpu_register_loss(pti_kernel *table)
{
    table[PTI_OP_cross_entropy] = cpu_cross_entropy;
    table[PTI_OP_nll_loss] = cpu_nll_loss;
    table[PTI_OP_mse_loss] = cpu_mse_loss;
    table[PTI_OP_l1_loss] = cpu_l1_loss;
    table[PTI_OP_smooth_l1_loss] = cpu_smooth_l1_loss;
    table[PTI_OP_huber_loss] = cpu_huber_loss;
    table[PTI_OP_binary_cross_entropy] = cpu_bce;
    table[PTI_OP_binary_cross_entropy_with_logits] = cpu_bce_logits;
    table[PTI_OP_kl_div] = cpu_kl_div;
    table[PTI_OP_cross_entropy_backward] = cpu_cross_entropy_backward;
    table[PTI_OP_nll_loss_backward] = cpu_nll_loss_backward;
}
