/* torch.optim.Adamax (1.13 single-tensor math), fused float32 CPU pass + generic path:
 *
 *   t += 1;  g = maximize ? -g : g;  g += weight_decay * p
 *   m = beta1 * m + (1 - beta1) * g
 *   u = max(beta2 * u, |g| + eps)            (NaN propagates, as torch.amax)
 *   p -= lr / (1 - beta1^t) * m / u */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_EXP_AVG, BUF_EXP_INF };

static const pti_hparam adamax_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_adamax_opts, lr)},
    {"betas", PTI_HP_PAIR, offsetof(pt_adamax_opts, betas)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_adamax_opts, eps)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_adamax_opts, weight_decay)},
    {"foreach", PTI_HP_NONE, 0},
    {"maximize", PTI_HP_BOOL, offsetof(pt_adamax_opts, maximize)},
};

static const pti_state_entry adamax_state[] = {
    {"step", PTI_ST_STEP_TENSOR, 0},
    {"exp_avg", PTI_ST_BUF, BUF_EXP_AVG},
    {"exp_inf", PTI_ST_BUF, BUF_EXP_INF},
};

static pt_status adamax_check(const char *op, const void *opts)
{
    const pt_adamax_opts *o = opts;
    return pti_optim_check_adam_like(op, o->lr, o->eps, o->betas, o->weight_decay);
}

static pt_status adamax_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o, (void)opts;
    return pti_optim_init_zero_bufs(p, 2, s);
}

typedef struct adamax_ctx {
    float *p, *m, *u;
    const float *g;
    float wd, b1, one_b1, b2, eps, neg_clr;
    bool maximize, has_wd;
} adamax_ctx;

static void adamax_range(void *vctx, int64_t begin, int64_t end)
{
    const adamax_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = pti_optim_grad_f32(c->g[i], c->p[i], c->maximize, c->has_wd, c->wd);
        float m = c->m[i] * c->b1 + c->one_b1 * g;
        c->m[i] = m;
        float a = c->u[i] * c->b2, b = fabsf(g) + c->eps;
        float u = a != a ? a : (b != b ? b : (a > b ? a : b));
        c->u[i] = u;
        c->p[i] = c->p[i] + c->neg_clr * m / u;
    }
}

#ifdef PTI_OPTIM_HAVE_AVX2
/* adamax_range 8 lanes at a time with the same float operations (NaN kept as torch.amax
 * does); the tail goes through it. */
PTI_OPTIM_AVX2_FN static void adamax_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const adamax_ctx *c = vctx;
    float *restrict P = c->p, *restrict M = c->m, *restrict U = c->u;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->maximize ? -0.0f : 0.0f);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 wd = _mm256_set1_ps(c->wd), b1 = _mm256_set1_ps(c->b1);
    const __m256 one_b1 = _mm256_set1_ps(c->one_b1), b2 = _mm256_set1_ps(c->b2);
    const __m256 eps = _mm256_set1_ps(c->eps), neg_clr = _mm256_set1_ps(c->neg_clr);
    const bool has_wd = c->has_wd;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 p = _mm256_loadu_ps(P + i);
        __m256 g = _mm256_xor_ps(_mm256_loadu_ps(G + i), sign);
        if (has_wd)
            g = _mm256_add_ps(g, _mm256_mul_ps(wd, p));
        __m256 m =
            _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(M + i), b1), _mm256_mul_ps(one_b1, g));
        _mm256_storeu_ps(M + i, m);
        __m256 a = _mm256_mul_ps(_mm256_loadu_ps(U + i), b2);
        __m256 b = _mm256_add_ps(_mm256_and_ps(g, absmask), eps);
        /* max propagating NaN: a if a is NaN or a > b, else b (b NaN stays b) */
        __m256 take_a =
            _mm256_or_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q), _mm256_cmp_ps(a, b, _CMP_GT_OQ));
        __m256 u = _mm256_blendv_ps(b, a, take_a);
        _mm256_storeu_ps(U + i, u);
        _mm256_storeu_ps(P + i, _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(neg_clr, m), u)));
    }
    adamax_range(vctx, i, end);
}
#endif

static pt_status adamax_generic(const pt_adamax_opts *o, pt_tensor *p, const pt_tensor *g,
                                pt_tensor *m, pt_tensor *u, double clr)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_tensor *absg = NULL;
    pt_status st = pti_optim_ema_(m, d, o->betas[0]);
    if (st == PT_OK)
        st = pt_mul_scalar_(u, o->betas[1]);
    if (st == PT_OK && !(absg = pt_abs(d)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_add_scalar_(absg, o->eps);
    if (st == PT_OK)
        st = pti_optim_assign(u, pt_maximum(u, absg));
    if (st == PT_OK)
        st = pti_optim_assign(p, pt_addcdiv(p, m, u, -clr));
    pt_release(absg);
    pt_release(d);
    return st;
}

static pt_status adamax_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                               pti_param_state *s)
{
    (void)opt;
    const pt_adamax_opts *o = opts;
    s->step += 1.0;
    double clr = o->lr / (1.0 - pow(o->betas[0], s->step));
    pt_tensor *m = s->buf[BUF_EXP_AVG], *u = s->buf[BUF_EXP_INF];
    if (!pti_optim_fast_ok(p, g, 2, s->buf))
        return adamax_generic(o, p, g, m, u, clr);
    adamax_ctx c = {
        .p = pti_data(p),
        .m = pti_data(m),
        .u = pti_data(u),
        .g = pti_data(g),
        .wd = (float)o->weight_decay,
        .b1 = (float)o->betas[0],
        .one_b1 = (float)(1.0 - o->betas[0]),
        .b2 = (float)o->betas[1],
        .eps = (float)o->eps,
        .neg_clr = (float)-clr,
        .maximize = o->maximize,
        .has_wd = o->weight_decay != 0.0,
    };
    pti_optim_run_fused(p->numel, adamax_range, PTI_OPTIM_AVX2(adamax_range_avx2), &c);
    return PT_OK;
}

static const pti_optim_def adamax_def = {
    .name = "Adamax",
    .opts_size = sizeof(pt_adamax_opts),
    .n_hparams = (int)(sizeof(adamax_hparams) / sizeof(adamax_hparams[0])),
    .hparams = adamax_hparams,
    .n_state = (int)(sizeof(adamax_state) / sizeof(adamax_state[0])),
    .state = adamax_state,
    .check_opts = adamax_check,
    .init_state = adamax_init,
    .update = adamax_update,
};

pt_optim *pt_optim_adamax(pt_module *m, pt_adamax_opts o)
{
    return pti_optim_new_module(&adamax_def, "pt_optim_adamax", m, &o);
}

pt_optim *pt_optim_adamax_params(int n, pt_tensor *const *params, pt_adamax_opts o)
{
    return pti_optim_new(&adamax_def, "pt_optim_adamax", n, params, &o);
}
