/* torch.optim.Adadelta (1.13 single-tensor math), fused float32 CPU pass + generic path:
 *
 *   g = maximize ? -g : g;  g += weight_decay * p
 *   sq = rho * sq + (1 - rho) * g * g
 *   delta = sqrt(acc + eps) / sqrt(sq + eps) * g
 *   acc = rho * acc + (1 - rho) * delta * delta;  p -= lr * delta
 * state['step'] is a Python int in 1.13. */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_SQUARE_AVG, BUF_ACC_DELTA };

static const pti_hparam adadelta_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_adadelta_opts, lr)},
    {"rho", PTI_HP_FLOAT, offsetof(pt_adadelta_opts, rho)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_adadelta_opts, eps)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_adadelta_opts, weight_decay)},
    {"maximize", PTI_HP_BOOL, offsetof(pt_adadelta_opts, maximize)},
    {"foreach", PTI_HP_NONE, 0},
};

static const pti_state_entry adadelta_state[] = {
    {"step", PTI_ST_STEP_INT, 0},
    {"square_avg", PTI_ST_BUF, BUF_SQUARE_AVG},
    {"acc_delta", PTI_ST_BUF, BUF_ACC_DELTA},
};

static pt_status adadelta_check(const char *op, const void *opts)
{
    const pt_adadelta_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK && !(o->rho >= 0.0 && o->rho <= 1.0))
        st = pti_error(PT_ERR_INVALID_ARG, "%s: Invalid rho value: %g", op, o->rho);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "epsilon value", o->eps);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    return st;
}

static pt_status adadelta_init(pt_optim *o, const void *opts, const pt_tensor *p,
                               pti_param_state *s)
{
    (void)o, (void)opts;
    return pti_optim_init_zero_bufs(p, 2, s);
}

typedef struct adadelta_ctx {
    float *p, *sq, *acc;
    const float *g;
    float wd, rho, one_rho, eps, neg_lr;
    bool maximize, has_wd;
} adadelta_ctx;

static void adadelta_range(void *vctx, int64_t begin, int64_t end)
{
    const adadelta_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = pti_optim_grad_f32(c->g[i], c->p[i], c->maximize, c->has_wd, c->wd);
        float sq = c->sq[i] * c->rho + c->one_rho * g * g;
        c->sq[i] = sq;
        float std = sqrtf(sq + c->eps);
        float delta = sqrtf(c->acc[i] + c->eps) / std * g;
        c->acc[i] = c->acc[i] * c->rho + c->one_rho * delta * delta;
        c->p[i] = c->p[i] + c->neg_lr * delta;
    }
}

#ifdef PTI_OPTIM_HAVE_AVX2
/* adadelta_range 8 lanes at a time with the same float operations; the tail goes through it. */
PTI_OPTIM_AVX2_FN static void adadelta_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const adadelta_ctx *c = vctx;
    float *restrict P = c->p, *restrict SQ = c->sq, *restrict ACC = c->acc;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->maximize ? -0.0f : 0.0f);
    const __m256 wd = _mm256_set1_ps(c->wd), rho = _mm256_set1_ps(c->rho);
    const __m256 one_rho = _mm256_set1_ps(c->one_rho), eps = _mm256_set1_ps(c->eps);
    const __m256 neg_lr = _mm256_set1_ps(c->neg_lr);
    const bool has_wd = c->has_wd;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 p = _mm256_loadu_ps(P + i);
        __m256 g = _mm256_xor_ps(_mm256_loadu_ps(G + i), sign);
        if (has_wd)
            g = _mm256_add_ps(g, _mm256_mul_ps(wd, p));
        __m256 sq = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(SQ + i), rho),
                                  _mm256_mul_ps(_mm256_mul_ps(one_rho, g), g));
        _mm256_storeu_ps(SQ + i, sq);
        __m256 std = _mm256_sqrt_ps(_mm256_add_ps(sq, eps));
        __m256 acc = _mm256_loadu_ps(ACC + i);
        __m256 delta =
            _mm256_mul_ps(_mm256_div_ps(_mm256_sqrt_ps(_mm256_add_ps(acc, eps)), std), g);
        acc = _mm256_add_ps(_mm256_mul_ps(acc, rho),
                            _mm256_mul_ps(_mm256_mul_ps(one_rho, delta), delta));
        _mm256_storeu_ps(ACC + i, acc);
        _mm256_storeu_ps(P + i, _mm256_add_ps(p, _mm256_mul_ps(neg_lr, delta)));
    }
    adadelta_range(vctx, i, end);
}
#endif

static pt_status adadelta_generic(const pt_adadelta_opts *o, pt_tensor *p, const pt_tensor *g,
                                  pt_tensor *sq, pt_tensor *acc)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_tensor *std = NULL, *delta = NULL;
    pt_status st = pti_optim_ema_sq_(sq, d, o->rho);
    if (st == PT_OK && !(std = pt_add_scalar(sq, o->eps)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_sqrt_(std);
    if (st == PT_OK && !(delta = pt_add_scalar(acc, o->eps)))
        st = pt_last_status();
    if (st == PT_OK)
        st = pt_sqrt_(delta);
    if (st == PT_OK)
        st = pt_div_(delta, std);
    if (st == PT_OK)
        st = pt_mul_(delta, d);
    if (st == PT_OK)
        st = pti_optim_ema_sq_(acc, delta, o->rho);
    if (st == PT_OK)
        st = pt_add_ex_(p, delta, -o->lr);
    pt_release(delta);
    pt_release(std);
    pt_release(d);
    return st;
}

static pt_status adadelta_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                                 pti_param_state *s)
{
    (void)opt;
    const pt_adadelta_opts *o = opts;
    s->step += 1.0;
    pt_tensor *sq = s->buf[BUF_SQUARE_AVG], *acc = s->buf[BUF_ACC_DELTA];
    if (!pti_optim_fast_ok(p, g, 2, s->buf))
        return adadelta_generic(o, p, g, sq, acc);
    adadelta_ctx c = {
        .p = pti_data(p),
        .sq = pti_data(sq),
        .acc = pti_data(acc),
        .g = pti_data(g),
        .wd = (float)o->weight_decay,
        .rho = (float)o->rho,
        .one_rho = (float)(1.0 - o->rho),
        .eps = (float)o->eps,
        .neg_lr = (float)-o->lr,
        .maximize = o->maximize,
        .has_wd = o->weight_decay != 0.0,
    };
    pti_optim_run_fused(p->numel, adadelta_range, PTI_OPTIM_AVX2(adadelta_range_avx2), &c);
    return PT_OK;
}

static const pti_optim_def adadelta_def = {
    .name = "Adadelta",
    .opts_size = sizeof(pt_adadelta_opts),
    .n_hparams = (int)(sizeof(adadelta_hparams) / sizeof(adadelta_hparams[0])),
    .hparams = adadelta_hparams,
    .n_state = (int)(sizeof(adadelta_state) / sizeof(adadelta_state[0])),
    .state = adadelta_state,
    .check_opts = adadelta_check,
    .init_state = adadelta_init,
    .update = adadelta_update,
};

pt_optim *pt_optim_adadelta(pt_module *m, pt_adadelta_opts o)
{
    return pti_optim_new_module(&adadelta_def, "pt_optim_adadelta", m, &o);
}

pt_optim *pt_optim_adadelta_params(int n, pt_tensor *const *params, pt_adadelta_opts o)
{
    return pti_optim_new(&adadelta_def, "pt_optim_adadelta", n, params, &o);
}
