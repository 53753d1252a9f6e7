/* The CPU optimizer kernels (src/ops/optim.def): one fused update per algorithm over
 * contiguous float32 tensors, split across the thread pool for big tensors, with the AVX2
 * loops of optim_avx2.c where the CPU has them; and LAMB's two-pass update and sum of squares.
 * The arithmetic is torch's single-tensor code in float32 (see src/optim/<x>.c for each
 * formula); src/optim falls back to public ops where a backend lacks these kernels. */
#include <math.h>

#include "optim.h"

/* State buffer k of the call (out[k]), NULL when absent. */
static float *state_buf(const pti_call *c, int k)
{
    return k < c->n_out && c->out[k] ? pti_data(c->out[k]) : NULL;
}

/* Runs the update over p's elements: the AVX2 loop when there is one and the CPU has AVX2.
 * Memory-bound updates: below ~64K elements a single thread wins. */
static void run(const pti_call *c, pti_range_fn scalar_fn, pti_range_fn avx2_fn, void *ctx)
{
    pti_parallel_for(c->out[0]->numel, 65536, avx2_fn && pti_cpu_has_avx2() ? avx2_fn : scalar_fn,
                     ctx);
}

/* ---- the portable loops ------------------------------------------------------------------- */

void pti_cpu_optim_sgd_range(void *vctx, int64_t begin, int64_t end)
{
    const sgd_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float d = c->hp.maximize ? -c->g[i] : c->g[i];
        if (c->hp.has_wd)
            d = d + c->hp.wd * c->p[i];
        if (c->buf) {
            float b = c->hp.first ? d : c->buf[i] * c->hp.mom + c->hp.damp1 * d;
            c->buf[i] = b;
            d = c->hp.nesterov ? d + c->hp.mom * b : b;
        }
        c->p[i] = c->p[i] + c->hp.neg_lr * d;
    }
}

void pti_cpu_optim_adam_range(void *vctx, int64_t begin, int64_t end)
{
    const adam_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float p = c->p[i];
        if (c->hp.decay_mul != 1.0f)
            p = p * c->hp.decay_mul;
        float g = pti_cpu_optim_grad(c->g[i], p, c->hp.maximize, c->hp.has_wd, c->hp.wd);
        float m = c->m[i] * c->hp.b1 + c->hp.one_b1 * g;
        float v = c->v[i] * c->hp.b2 + c->hp.one_b2 * g * g;
        c->m[i] = m;
        c->v[i] = v;
        if (c->vmax) {
            float vm = c->vmax[i];
            vm = v > vm || v != v ? v : vm;
            c->vmax[i] = vm;
            v = vm;
        }
        float denom = sqrtf(v) / c->hp.bc2_sqrt + c->hp.eps;
        c->p[i] = p + c->hp.neg_step_size * m / denom;
    }
}

void pti_cpu_optim_adagrad_range(void *vctx, int64_t begin, int64_t end)
{
    const adagrad_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = pti_cpu_optim_grad(c->g[i], c->p[i], c->hp.maximize, c->hp.has_wd, c->hp.wd);
        float sum = c->sum[i] + g * g;
        c->sum[i] = sum;
        c->p[i] = c->p[i] + c->hp.neg_clr * g / (sqrtf(sum) + c->hp.eps);
    }
}

void pti_cpu_optim_adadelta_range(void *vctx, int64_t begin, int64_t end)
{
    const adadelta_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = pti_cpu_optim_grad(c->g[i], c->p[i], c->hp.maximize, c->hp.has_wd, c->hp.wd);
        float sq = c->sq[i] * c->hp.rho + c->hp.one_rho * g * g;
        c->sq[i] = sq;
        float std = sqrtf(sq + c->hp.eps);
        float delta = sqrtf(c->acc[i] + c->hp.eps) / std * g;
        c->acc[i] = c->acc[i] * c->hp.rho + c->hp.one_rho * delta * delta;
        c->p[i] = c->p[i] + c->hp.neg_lr * delta;
    }
}

void pti_cpu_optim_adamax_range(void *vctx, int64_t begin, int64_t end)
{
    const adamax_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = pti_cpu_optim_grad(c->g[i], c->p[i], c->hp.maximize, c->hp.has_wd, c->hp.wd);
        float m = c->m[i] * c->hp.b1 + c->hp.one_b1 * g;
        c->m[i] = m;
        float a = c->u[i] * c->hp.b2, b = fabsf(g) + c->hp.eps;
        float u = a != a ? a : (b != b ? b : (a > b ? a : b));
        c->u[i] = u;
        c->p[i] = c->p[i] + c->hp.neg_clr * m / u;
    }
}

void pti_cpu_optim_nadam_range(void *vctx, int64_t begin, int64_t end)
{
    const nadam_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = c->g[i];
        float p = c->p[i];
        if (c->hp.has_wd)
            g = g + c->hp.wd * p;
        float m = c->m[i] * c->hp.b1 + c->hp.one_b1 * g;
        float v = c->v[i] * c->hp.b2 + c->hp.one_b2 * g * g;
        c->m[i] = m;
        c->v[i] = v;
        float denom = sqrtf(v / c->hp.bc2) + c->hp.eps;
        p = p + c->hp.coef_g * g / denom;
        c->p[i] = p + c->hp.coef_m * m / denom;
    }
}

void pti_cpu_optim_rmsprop_range(void *vctx, int64_t begin, int64_t end)
{
    const rmsprop_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = pti_cpu_optim_grad(c->g[i], c->p[i], c->hp.maximize, c->hp.has_wd, c->hp.wd);
        float sq = c->sq[i] * c->hp.alpha + c->hp.one_alpha * g * g;
        c->sq[i] = sq;
        float avg;
        if (c->ga) {
            float ga = c->ga[i] * c->hp.alpha + c->hp.one_alpha * g;
            c->ga[i] = ga;
            avg = sqrtf(sq + -1.0f * ga * ga) + c->hp.eps;
        } else {
            avg = sqrtf(sq) + c->hp.eps;
        }
        if (c->buf) {
            float b = c->buf[i] * c->hp.mom + g / avg;
            c->buf[i] = b;
            c->p[i] = c->p[i] + c->hp.neg_lr * b;
        } else {
            c->p[i] = c->p[i] + c->hp.neg_lr * g / avg;
        }
    }
}

void pti_cpu_optim_radam_range(void *vctx, int64_t begin, int64_t end)
{
    const radam_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = c->g[i];
        float p = c->p[i] * c->hp.decay;
        if (c->hp.has_wd)
            g = g + c->hp.wd * p;
        float m = c->m[i] * c->hp.b1 + c->hp.one_b1 * g;
        float v = c->v[i] * c->hp.b2 + c->hp.one_b2 * g * g;
        c->m[i] = m;
        c->v[i] = v;
        float u = m / c->hp.bc1 * c->hp.lr;
        if (c->hp.rectify)
            u = u * (c->hp.bc2_sqrt / (sqrtf(v) + c->hp.eps)) * c->hp.rect;
        c->p[i] = p - u;
    }
}

void pti_cpu_optim_asgd_range(void *vctx, int64_t begin, int64_t end)
{
    const asgd_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float p = c->p[i];
        float g = pti_cpu_optim_grad(c->g[i], p, c->hp.maximize, c->hp.has_wd, c->hp.wd);
        p = p * c->hp.decay;
        p = p + c->hp.neg_eta * g;
        c->p[i] = p;
        c->ax[i] = c->hp.average ? c->ax[i] + (p - c->ax[i]) * c->hp.mu : p;
    }
}

void pti_cpu_optim_lion_range(void *vctx, int64_t begin, int64_t end)
{
    const lion_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = c->g[i], m = c->m[i];
        float u = m * c->hp.b1 + c->hp.one_b1 * g;
        float s = u > 0.0f ? 1.0f : u < 0.0f ? -1.0f : 0.0f;
        c->p[i] = c->p[i] * c->hp.decay + c->hp.neg_lr * s;
        c->m[i] = m * c->hp.b2 + c->hp.one_b2 * g;
    }
}

void pti_cpu_optim_rprop_range(void *vctx, int64_t begin, int64_t end)
{
    const rprop_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = c->hp.maximize ? -c->g[i] : c->g[i];
        float prod = g * c->prev[i];
        float factor = prod > 0.0f ? c->hp.etaplus : prod < 0.0f ? c->hp.etaminus : 1.0f;
        float size = c->size[i] * factor;
        size = size < c->hp.smin ? c->hp.smin : size > c->hp.smax ? c->hp.smax : size;
        c->size[i] = size;
        if (prod < 0.0f)
            g = 0.0f;
        float sg = g > 0.0f ? 1.0f : g < 0.0f ? -1.0f : 0.0f;
        c->p[i] = c->p[i] - sg * size;
        c->prev[i] = g;
    }
}

void pti_cpu_optim_sophia_range(void *vctx, int64_t begin, int64_t end)
{
    const sophia_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = c->hp.maximize ? -c->g[i] : c->g[i];
        float p = c->p[i] * c->hp.decay;
        float m = c->m[i] * c->hp.b1 + c->hp.one_b1 * g;
        c->m[i] = m;
        float ratio = fabsf(m) / (c->hp.rho_bs * c->h[i] + 1e-15f);
        ratio = ratio > 1.0f ? 1.0f : ratio;
        float s = m > 0.0f ? 1.0f : m < 0.0f ? -1.0f : 0.0f;
        c->p[i] = p + c->hp.neg_lr * s * ratio;
    }
}

/* ---- LAMB ------------------------------------------------------------------------------------ */

static double lamb_trust_ratio(const pti_optim_lamb_params *a, double w_norm, double u_norm)
{
    double r = w_norm > 0.0 ? (u_norm > 0.0 ? w_norm / u_norm : 1.0) : 1.0;
    return a->trust_clip && r > 1.0 ? 1.0 : r;
}

static inline float lamb_u(const pti_optim_lamb_params *a, float m, float v, float p)
{
    float u = m / (float)a->bc1 / (sqrtf(v) / (float)a->bc2_sqrt + (float)a->eps);
    return a->wd != 0.0 ? u + (float)a->wd * p : u;
}

/* Two sequential passes (the norms are sums in index order, independent of the thread count):
 * moments and the norms of p and of the update, then the update scaled by the trust ratio. */
static pt_status optim_lamb(const pti_call *c)
{
    const pti_optim_lamb_params *a = c->params;
    float *pd = pti_data(c->out[0]), *m = state_buf(c, 1), *v = state_buf(c, 2);
    const float *gd = pti_data(c->in[0]);
    const int64_t n = c->out[0]->numel;
    float b1 = (float)a->b1, b3 = (float)a->b3, b2 = (float)a->b2, one_b2 = (float)(1.0 - a->b2);
    double w2 = 0.0, u2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float gi = gd[i];
        m[i] = m[i] * b1 + b3 * gi;
        v[i] = v[i] * b2 + one_b2 * gi * gi;
        float u = lamb_u(a, m[i], v[i], pd[i]);
        w2 += (double)pd[i] * pd[i];
        u2 += (double)u * u;
    }
    double trust = a->adapt ? lamb_trust_ratio(a, sqrt(w2), sqrt(u2)) : 1.0;
    float neg = (float)-a->lr;
    float tr = (float)trust;
    for (int64_t i = 0; i < n; i++) {
        float u = lamb_u(a, m[i], v[i], pd[i]);
        pd[i] = pd[i] + neg * (u * tr);
    }
    return PT_OK;
}

static pt_status optim_sum_sq(const pti_call *c)
{
    const float *x = pti_data(c->in[0]);
    double sum = 0.0;
    for (int64_t k = 0; k < c->in[0]->numel; k++)
        sum += (double)x[k] * x[k];
    *(double *)pti_data(c->out[0]) = sum;
    return PT_OK;
}

/* ---- kernels ----------------------------------------------------------------------------------
 */

static pt_status optim_sgd(const pti_call *c)
{
    sgd_ctx x = {.hp = *(const pti_optim_sgd_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.buf = state_buf(c, 1);
    run(c, pti_cpu_optim_sgd_range, PTI_CPU_OPTIM_AVX2_OR_NULL(pti_cpu_optim_sgd_range_avx2), &x);
    return PT_OK;
}

static pt_status optim_adam(const pti_call *c)
{
    adam_ctx x = {.hp = *(const pti_optim_adam_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.m = state_buf(c, 1);
    x.v = state_buf(c, 2);
    x.vmax = state_buf(c, 3);
    run(c, pti_cpu_optim_adam_range, PTI_CPU_OPTIM_AVX2_OR_NULL(pti_cpu_optim_adam_range_avx2), &x);
    return PT_OK;
}

static pt_status optim_adagrad(const pti_call *c)
{
    adagrad_ctx x = {.hp = *(const pti_optim_adagrad_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.sum = state_buf(c, 1);
    run(c, pti_cpu_optim_adagrad_range,
        PTI_CPU_OPTIM_AVX2_OR_NULL(pti_cpu_optim_adagrad_range_avx2), &x);
    return PT_OK;
}

static pt_status optim_adadelta(const pti_call *c)
{
    adadelta_ctx x = {.hp = *(const pti_optim_adadelta_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.sq = state_buf(c, 1);
    x.acc = state_buf(c, 2);
    run(c, pti_cpu_optim_adadelta_range,
        PTI_CPU_OPTIM_AVX2_OR_NULL(pti_cpu_optim_adadelta_range_avx2), &x);
    return PT_OK;
}

static pt_status optim_adamax(const pti_call *c)
{
    adamax_ctx x = {.hp = *(const pti_optim_adamax_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.m = state_buf(c, 1);
    x.u = state_buf(c, 2);
    run(c, pti_cpu_optim_adamax_range, PTI_CPU_OPTIM_AVX2_OR_NULL(pti_cpu_optim_adamax_range_avx2),
        &x);
    return PT_OK;
}

static pt_status optim_nadam(const pti_call *c)
{
    nadam_ctx x = {.hp = *(const pti_optim_nadam_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.m = state_buf(c, 1);
    x.v = state_buf(c, 2);
    run(c, pti_cpu_optim_nadam_range, PTI_CPU_OPTIM_AVX2_OR_NULL(pti_cpu_optim_nadam_range_avx2),
        &x);
    return PT_OK;
}

static pt_status optim_rmsprop(const pti_call *c)
{
    rmsprop_ctx x = {.hp = *(const pti_optim_rmsprop_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.sq = state_buf(c, 1);
    x.buf = state_buf(c, 2);
    x.ga = state_buf(c, 3);
    run(c, pti_cpu_optim_rmsprop_range,
        PTI_CPU_OPTIM_AVX2_OR_NULL(pti_cpu_optim_rmsprop_range_avx2), &x);
    return PT_OK;
}

static pt_status optim_radam(const pti_call *c)
{
    radam_ctx x = {.hp = *(const pti_optim_radam_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.m = state_buf(c, 1);
    x.v = state_buf(c, 2);
    run(c, pti_cpu_optim_radam_range, NULL, &x);
    return PT_OK;
}

static pt_status optim_asgd(const pti_call *c)
{
    asgd_ctx x = {.hp = *(const pti_optim_asgd_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.ax = state_buf(c, 1);
    run(c, pti_cpu_optim_asgd_range, NULL, &x);
    return PT_OK;
}

static pt_status optim_lion(const pti_call *c)
{
    lion_ctx x = {.hp = *(const pti_optim_lion_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.m = state_buf(c, 1);
    run(c, pti_cpu_optim_lion_range, NULL, &x);
    return PT_OK;
}

static pt_status optim_rprop(const pti_call *c)
{
    rprop_ctx x = {.hp = *(const pti_optim_rprop_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.prev = state_buf(c, 1);
    x.size = state_buf(c, 2);
    run(c, pti_cpu_optim_rprop_range, NULL, &x);
    return PT_OK;
}

static pt_status optim_sophia(const pti_call *c)
{
    sophia_ctx x = {.hp = *(const pti_optim_sophia_params *)c->params};
    x.p = pti_data(c->out[0]);
    x.g = pti_data(c->in[0]);
    x.m = state_buf(c, 1);
    x.h = state_buf(c, 2);
    run(c, pti_cpu_optim_sophia_range, NULL, &x);
    return PT_OK;
}

void pti_cpu_register_optim(pti_kernel *t)
{
    t[PTI_OP_optim_sgd] = optim_sgd;
    t[PTI_OP_optim_adam] = optim_adam;
    t[PTI_OP_optim_adagrad] = optim_adagrad;
    t[PTI_OP_optim_adadelta] = optim_adadelta;
    t[PTI_OP_optim_adamax] = optim_adamax;
    t[PTI_OP_optim_nadam] = optim_nadam;
    t[PTI_OP_optim_rmsprop] = optim_rmsprop;
    t[PTI_OP_optim_radam] = optim_radam;
    t[PTI_OP_optim_asgd] = optim_asgd;
    t[PTI_OP_optim_lion] = optim_lion;
    t[PTI_OP_optim_rprop] = optim_rprop;
    t[PTI_OP_optim_sophia] = optim_sophia;
    t[PTI_OP_optim_lamb] = optim_lamb;
    t[PTI_OP_optim_sum_sq] = optim_sum_sq;
}
