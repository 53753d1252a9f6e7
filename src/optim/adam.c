/* torch.optim.Adam and AdamW (1.13 single-tensor math), sharing one fused float32 CPU pass and
 * one generic path from public ops:
 *
 *   g = maximize ? -g : g;  Adam: g += weight_decay * p;  AdamW: p *= 1 - lr * weight_decay
 *   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g * g
 *   amsgrad: vmax = max(vmax, v), used in place of v below
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps) */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_EXP_AVG, BUF_EXP_AVG_SQ, BUF_MAX_EXP_AVG_SQ };

static const pti_hparam adam_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_adam_opts, lr)},
    {"betas", PTI_HP_PAIR, offsetof(pt_adam_opts, betas)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_adam_opts, eps)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_adam_opts, weight_decay)},
    {"amsgrad", PTI_HP_BOOL, offsetof(pt_adam_opts, amsgrad)},
    {"maximize", PTI_HP_BOOL, offsetof(pt_adam_opts, maximize)},
    {"foreach", PTI_HP_NONE, 0},
    {"capturable", PTI_HP_FALSE, 0},
    {"differentiable", PTI_HP_FALSE, 0},
    {"fused", PTI_HP_FALSE, 0},
};

static const pti_state_entry adam_state[] = {
    {"step", PTI_ST_STEP_TENSOR, 0},
    {"exp_avg", PTI_ST_BUF, BUF_EXP_AVG},
    {"exp_avg_sq", PTI_ST_BUF, BUF_EXP_AVG_SQ},
    {"max_exp_avg_sq", PTI_ST_BUF, BUF_MAX_EXP_AVG_SQ},
};

/* The fields Adam and AdamW share (their opts structs have the same layout). */
typedef struct adam_args {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize, decoupled;
} adam_args;

static pt_status adam_check(const char *op, const void *opts)
{
    const pt_adam_opts *o = opts;
    return pti_optim_check_adam_like(op, o->lr, o->eps, o->betas, o->weight_decay);
}

static pt_status adam_init_bufs(const pt_tensor *p, bool amsgrad, pti_param_state *s)
{
    return pti_optim_init_zero_bufs(p, amsgrad ? 3 : 2, s); /* max_exp_avg_sq last */
}

static pt_status adam_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o;
    return adam_init_bufs(p, ((const pt_adam_opts *)opts)->amsgrad, s);
}

/* ---- fused float32 path ------------------------------------------------------------------ */

typedef struct adam_ctx {
    float *p, *m, *v, *vmax;
    const float *g;
    float wd, decay_mul, b1, one_b1, b2, one_b2, bc2_sqrt, eps, neg_step_size;
    bool maximize, has_wd;
} adam_ctx;

static void adam_range(void *vctx, int64_t begin, int64_t end)
{
    const adam_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float p = c->p[i];
        if (c->decay_mul != 1.0f)
            p = p * c->decay_mul;
        float g = pti_optim_grad_f32(c->g[i], p, c->maximize, c->has_wd, c->wd);
        float m = c->m[i] * c->b1 + c->one_b1 * g;
        float v = c->v[i] * c->b2 + c->one_b2 * g * g;
        c->m[i] = m;
        c->v[i] = v;
        if (c->vmax) {
            float vm = c->vmax[i];
            vm = v > vm || v != v ? v : vm;
            c->vmax[i] = vm;
            v = vm;
        }
        float denom = sqrtf(v) / c->bc2_sqrt + c->eps;
        c->p[i] = p + c->neg_step_size * m / denom;
    }
}

#ifdef PTI_OPTIM_HAVE_AVX2
/* The same float operations as adam_range, 8 lanes at a time (no FMA contraction, so results
 * equal the scalar loop's); the tail goes through adam_range. */
PTI_OPTIM_AVX2_FN static void adam_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const adam_ctx *c = vctx;
    float *restrict P = c->p, *restrict M = c->m, *restrict V = c->v, *restrict VM = c->vmax;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->maximize ? -0.0f : 0.0f);
    const __m256 wd = _mm256_set1_ps(c->wd), dm = _mm256_set1_ps(c->decay_mul);
    const __m256 b1 = _mm256_set1_ps(c->b1), ob1 = _mm256_set1_ps(c->one_b1);
    const __m256 b2 = _mm256_set1_ps(c->b2), ob2 = _mm256_set1_ps(c->one_b2);
    const __m256 bc2s = _mm256_set1_ps(c->bc2_sqrt), eps = _mm256_set1_ps(c->eps);
    const __m256 nss = _mm256_set1_ps(c->neg_step_size);
    const bool decay = c->decay_mul != 1.0f, has_wd = c->has_wd;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 g = _mm256_xor_ps(_mm256_loadu_ps(G + i), sign);
        __m256 p = _mm256_loadu_ps(P + i);
        if (decay)
            p = _mm256_mul_ps(p, dm);
        if (has_wd)
            g = _mm256_add_ps(g, _mm256_mul_ps(wd, p));
        __m256 m = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(M + i), b1), _mm256_mul_ps(ob1, g));
        __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(V + i), b2),
                                 _mm256_mul_ps(_mm256_mul_ps(ob2, g), g));
        _mm256_storeu_ps(M + i, m);
        _mm256_storeu_ps(V + i, v);
        if (VM) {
            __m256 vm = _mm256_loadu_ps(VM + i);
            __m256 take =
                _mm256_or_ps(_mm256_cmp_ps(v, vm, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            vm = _mm256_blendv_ps(vm, v, take);
            _mm256_storeu_ps(VM + i, vm);
            v = vm;
        }
        __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), bc2s), eps);
        p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(nss, m), denom));
        _mm256_storeu_ps(P + i, p);
    }
    adam_range(vctx, i, end);
}
#endif

/* ---- generic path --------------------------------------------------------------------------- */

static pt_status adam_generic(const adam_args *a, pt_tensor *p, const pt_tensor *g,
                              pti_param_state *s, double bc2_sqrt, double step_size)
{
    pt_tensor *m = s->buf[BUF_EXP_AVG], *v = s->buf[BUF_EXP_AVG_SQ];
    pt_tensor *vmax = a->amsgrad ? s->buf[BUF_MAX_EXP_AVG_SQ] : NULL;
    pt_status st = PT_OK;
    if (a->decoupled && a->weight_decay != 0.0)
        st = pt_mul_scalar_(p, 1.0 - a->lr * a->weight_decay);
    if (st != PT_OK)
        return st;
    pt_tensor *d = pti_optim_generic_grad(p, g, a->maximize, a->decoupled ? 0.0 : a->weight_decay);
    if (!d)
        return pt_last_status();
    st = pti_optim_ema_(m, d, a->beta1);
    if (st == PT_OK)
        st = pti_optim_ema_sq_(v, d, a->beta2);
    pt_release(d);
    if (st == PT_OK && vmax)
        st = pti_optim_assign(vmax, pt_maximum(vmax, v));
    if (st != PT_OK)
        return st;
    pt_tensor *denom = pt_sqrt(vmax ? vmax : v);
    if (!denom)
        return pt_last_status();
    st = pt_div_scalar_(denom, bc2_sqrt);
    if (st == PT_OK)
        st = pt_add_scalar_(denom, a->eps);
    if (st == PT_OK)
        st = pti_optim_assign(p, pt_addcdiv(p, m, denom, -step_size));
    pt_release(denom);
    return st;
}

static pt_status adam_run(const adam_args *a, pt_tensor *p, const pt_tensor *g, pti_param_state *s)
{
    s->step += 1.0;
    double bc1 = 1.0 - pow(a->beta1, s->step);
    double bc2 = 1.0 - pow(a->beta2, s->step);
    double step_size = a->lr / bc1;
    double bc2_sqrt = sqrt(bc2);
    pt_tensor *bufs[3] = {s->buf[0], s->buf[1], a->amsgrad ? s->buf[2] : NULL};
    if (a->amsgrad && !bufs[2])
        return pti_error(PT_ERR_INVALID_ARG, "pt_optim_step: amsgrad was turned on after the "
                                             "first step; the state has no max_exp_avg_sq");
    if (!pti_optim_fast_ok(p, g, 3, bufs))
        return adam_generic(a, p, g, s, bc2_sqrt, step_size);
    adam_ctx c = {
        .p = pti_data(p),
        .m = pti_data(bufs[0]),
        .v = pti_data(bufs[1]),
        .vmax = bufs[2] ? pti_data(bufs[2]) : NULL,
        .g = pti_data(g),
        .wd = (float)a->weight_decay,
        .decay_mul = 1.0f,
        .b1 = (float)a->beta1,
        .one_b1 = (float)(1.0 - a->beta1),
        .b2 = (float)a->beta2,
        .one_b2 = (float)(1.0 - a->beta2),
        .bc2_sqrt = (float)bc2_sqrt,
        .eps = (float)a->eps,
        .neg_step_size = (float)-step_size,
        .maximize = a->maximize,
        .has_wd = !a->decoupled && a->weight_decay != 0.0,
    };
    if (a->decoupled)
        c.decay_mul = (float)(1.0 - a->lr * a->weight_decay);
    pti_optim_run_fused(p->numel, adam_range, PTI_OPTIM_AVX2(adam_range_avx2), &c);
    return PT_OK;
}

static pt_status adam_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                             pti_param_state *s)
{
    (void)opt;
    const pt_adam_opts *o = opts;
    adam_args a = {o->lr,           o->betas[0], o->betas[1], o->eps,
                   o->weight_decay, o->amsgrad,  o->maximize, false};
    return adam_run(&a, p, g, s);
}

/* max_exp_avg_sq is in torch's state only with amsgrad */
static bool adam_buf_needed(const void *opts, int index)
{
    return index != BUF_MAX_EXP_AVG_SQ || ((const pt_adam_opts *)opts)->amsgrad;
}

static bool adamw_buf_needed(const void *opts, int index)
{
    return index != BUF_MAX_EXP_AVG_SQ || ((const pt_adamw_opts *)opts)->amsgrad;
}

static const pti_optim_def adam_def = {
    .name = "Adam",
    .opts_size = sizeof(pt_adam_opts),
    .n_hparams = (int)(sizeof(adam_hparams) / sizeof(adam_hparams[0])),
    .hparams = adam_hparams,
    .n_state = (int)(sizeof(adam_state) / sizeof(adam_state[0])),
    .state = adam_state,
    .check_opts = adam_check,
    .init_state = adam_init,
    .buf_needed = adam_buf_needed,
    .update = adam_update,
};

pt_optim *pt_optim_adam(pt_module *m, pt_adam_opts o)
{
    return pti_optim_new_module(&adam_def, "pt_optim_adam", m, &o);
}

pt_optim *pt_optim_adam_params(int n, pt_tensor *const *params, pt_adam_opts o)
{
    return pti_optim_new(&adam_def, "pt_optim_adam", n, params, &o);
}

/* ---- AdamW ---------------------------------------------------------------------------------- */

static const pti_hparam adamw_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_adamw_opts, lr)},
    {"betas", PTI_HP_PAIR, offsetof(pt_adamw_opts, betas)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_adamw_opts, eps)},
    {"weight_decay", PTI_HP_FLOAT, offsetof(pt_adamw_opts, weight_decay)},
    {"amsgrad", PTI_HP_BOOL, offsetof(pt_adamw_opts, amsgrad)},
    {"foreach", PTI_HP_NONE, 0},
    {"maximize", PTI_HP_BOOL, offsetof(pt_adamw_opts, maximize)},
    {"capturable", PTI_HP_FALSE, 0},
};

static pt_status adamw_check(const char *op, const void *opts)
{
    const pt_adamw_opts *o = opts;
    return pti_optim_check_adam_like(op, o->lr, o->eps, o->betas, o->weight_decay);
}

static pt_status adamw_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o;
    return adam_init_bufs(p, ((const pt_adamw_opts *)opts)->amsgrad, s);
}

static pt_status adamw_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                              pti_param_state *s)
{
    (void)opt;
    const pt_adamw_opts *o = opts;
    adam_args a = {o->lr,           o->betas[0], o->betas[1], o->eps,
                   o->weight_decay, o->amsgrad,  o->maximize, true};
    return adam_run(&a, p, g, s);
}

static const pti_optim_def adamw_def = {
    .name = "AdamW",
    .opts_size = sizeof(pt_adamw_opts),
    .n_hparams = (int)(sizeof(adamw_hparams) / sizeof(adamw_hparams[0])),
    .hparams = adamw_hparams,
    .n_state = (int)(sizeof(adam_state) / sizeof(adam_state[0])),
    .state = adam_state,
    .check_opts = adamw_check,
    .init_state = adamw_init,
    .buf_needed = adamw_buf_needed,
    .update = adamw_update,
};

pt_optim *pt_optim_adamw(pt_module *m, pt_adamw_opts o)
{
    return pti_optim_new_module(&adamw_def, "pt_optim_adamw", m, &o);
}

pt_optim *pt_optim_adamw_params(int n, pt_tensor *const *params, pt_adamw_opts o)
{
    return pti_optim_new(&adamw_def, "pt_optim_adamw", n, params, &o);
}
