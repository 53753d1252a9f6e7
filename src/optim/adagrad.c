/* torch.optim.Adagrad (1.13 single-tensor math, dense gradients), fused float32 CPU pass +
 * generic path. State (step 0, sum = initial_accumulator_value) exists from construction:
 *
 *   t += 1;  g = maximize ? -g : g;  g += weight_decay * p
 *   clr = lr / (1 + (t - 1) * lr_decay)
 *   sum += g * g;  p -= clr * g / (sqrt(sum) + eps) */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

static const pti_hparam adagrad_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_adagrad_opts, lr)},
    {"lr_decay", PTI_HP_NUMBER, offsetof(pt_adagrad_opts, lr_decay)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_adagrad_opts, eps)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_adagrad_opts, weight_decay)},
    {"initial_accumulator_value", PTI_HP_NUMBER,
     offsetof(pt_adagrad_opts, initial_accumulator_value)},
    {"foreach", PTI_HP_NONE, 0},
    {"maximize", PTI_HP_BOOL, offsetof(pt_adagrad_opts, maximize)},
};

static const pti_state_entry adagrad_state[] = {
    {"step", PTI_ST_STEP_TENSOR, 0},
    {"sum", PTI_ST_BUF, 0},
};

static pt_status adagrad_check(const char *op, const void *opts)
{
    const pt_adagrad_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "lr_decay value", o->lr_decay);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "initial_accumulator_value value",
                                    o->initial_accumulator_value);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "epsilon value", o->eps);
    return st;
}

static pt_status adagrad_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o;
    s->step = 0.0;
    s->buf[0] = pti_optim_state_full(p, ((const pt_adagrad_opts *)opts)->initial_accumulator_value);
    return s->buf[0] ? PT_OK : pt_last_status();
}

typedef struct adagrad_ctx {
    float *p, *sum;
    const float *g;
    float wd, eps, neg_clr;
    bool maximize, has_wd;
} adagrad_ctx;

static void adagrad_range(void *vctx, int64_t begin, int64_t end)
{
    const adagrad_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = pti_optim_grad_f32(c->g[i], c->p[i], c->maximize, c->has_wd, c->wd);
        float sum = c->sum[i] + g * g;
        c->sum[i] = sum;
        c->p[i] = c->p[i] + c->neg_clr * g / (sqrtf(sum) + c->eps);
    }
}

#ifdef PTI_OPTIM_HAVE_AVX2
/* adagrad_range 8 lanes at a time with the same float operations; the tail goes through it. */
PTI_OPTIM_AVX2_FN static void adagrad_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const adagrad_ctx *c = vctx;
    float *restrict P = c->p, *restrict S = c->sum;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->maximize ? -0.0f : 0.0f);
    const __m256 wd = _mm256_set1_ps(c->wd), eps = _mm256_set1_ps(c->eps);
    const __m256 neg_clr = _mm256_set1_ps(c->neg_clr);
    const bool has_wd = c->has_wd;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 p = _mm256_loadu_ps(P + i);
        __m256 g = _mm256_xor_ps(_mm256_loadu_ps(G + i), sign);
        if (has_wd)
            g = _mm256_add_ps(g, _mm256_mul_ps(wd, p));
        __m256 sum = _mm256_add_ps(_mm256_loadu_ps(S + i), _mm256_mul_ps(g, g));
        _mm256_storeu_ps(S + i, sum);
        __m256 std = _mm256_add_ps(_mm256_sqrt_ps(sum), eps);
        _mm256_storeu_ps(P + i, _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(neg_clr, g), std)));
    }
    adagrad_range(vctx, i, end);
}
#endif

static pt_status adagrad_generic(const pt_adagrad_opts *o, pt_tensor *p, const pt_tensor *g,
                                 pt_tensor *sum, double clr)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_tensor *std = NULL;
    pt_status st = pti_optim_assign(sum, pt_addcmul(sum, d, d, 1.0));
    if (st == PT_OK && !(std = pt_sqrt(sum)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_add_scalar_(std, o->eps);
    if (st == PT_OK)
        st = pti_optim_assign(p, pt_addcdiv(p, d, std, -clr));
    pt_release(std);
    pt_release(d);
    return st;
}

static pt_status adagrad_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                                pti_param_state *s)
{
    (void)opt;
    const pt_adagrad_opts *o = opts;
    s->step += 1.0;
    double clr = o->lr / (1.0 + (s->step - 1.0) * o->lr_decay);
    if (!pti_optim_fast_ok(p, g, 1, &s->buf[0]))
        return adagrad_generic(o, p, g, s->buf[0], clr);
    adagrad_ctx c = {
        .p = pti_data(p),
        .sum = pti_data(s->buf[0]),
        .g = pti_data(g),
        .wd = (float)o->weight_decay,
        .eps = (float)o->eps,
        .neg_clr = (float)-clr,
        .maximize = o->maximize,
        .has_wd = o->weight_decay != 0.0,
    };
    pti_optim_run_fused(p->numel, adagrad_range, PTI_OPTIM_AVX2(adagrad_range_avx2), &c);
    return PT_OK;
}

static const pti_optim_def adagrad_def = {
    .name = "Adagrad",
    .opts_size = sizeof(pt_adagrad_opts),
    .n_hparams = (int)(sizeof(adagrad_hparams) / sizeof(adagrad_hparams[0])),
    .hparams = adagrad_hparams,
    .n_state = (int)(sizeof(adagrad_state) / sizeof(adagrad_state[0])),
    .state = adagrad_state,
    .check_opts = adagrad_check,
    .eager_state = true,
    .init_state = adagrad_init,
    .update = adagrad_update,
};

pt_optim *pt_optim_adagrad(pt_module *m, pt_adagrad_opts o)
{
    return pti_optim_new_module(&adagrad_def, "pt_optim_adagrad", m, &o);
}

pt_optim *pt_optim_adagrad_params(int n, pt_tensor *const *params, pt_adagrad_opts o)
{
    return pti_optim_new(&adagrad_def, "pt_optim_adagrad", n, params, &o);
}
