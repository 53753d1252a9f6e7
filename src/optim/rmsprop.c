/* torch.optim.RMSprop (1.13 single-tensor math), fused float32 CPU pass + generic path:
 *
 *   g = maximize ? -g : g;  g += weight_decay * p
 *   sq = alpha * sq + (1 - alpha) * g * g
 *   centered: ga = alpha * ga + (1 - alpha) * g;  avg = sqrt(sq - ga * ga) + eps
 *   else:     avg = sqrt(sq) + eps
 *   momentum > 0: buf = momentum * buf + g / avg;  p -= lr * buf
 *   else:         p -= lr * g / avg
 * state['step'] is a Python int in 1.13. */
#include <math.h>
#include <stddef.h>

#include "optim_internal.h"

enum { BUF_SQUARE_AVG, BUF_MOMENTUM, BUF_GRAD_AVG };

static const pti_hparam rmsprop_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_rmsprop_opts, lr)},
    {"momentum", PTI_HP_NUMBER, offsetof(pt_rmsprop_opts, momentum)},
    {"alpha", PTI_HP_FLOAT, offsetof(pt_rmsprop_opts, alpha)},
    {"eps", PTI_HP_FLOAT, offsetof(pt_rmsprop_opts, eps)},
    {"centered", PTI_HP_BOOL, offsetof(pt_rmsprop_opts, centered)},
    {"weight_decay", PTI_HP_NUMBER, offsetof(pt_rmsprop_opts, weight_decay)},
    {"foreach", PTI_HP_NONE, 0},
    {"maximize", PTI_HP_BOOL, offsetof(pt_rmsprop_opts, maximize)},
    {"differentiable", PTI_HP_FALSE, 0},
};

static const pti_state_entry rmsprop_state[] = {
    {"step", PTI_ST_STEP_INT, 0},
    {"square_avg", PTI_ST_BUF, BUF_SQUARE_AVG},
    {"momentum_buffer", PTI_ST_BUF, BUF_MOMENTUM},
    {"grad_avg", PTI_ST_BUF, BUF_GRAD_AVG},
};

static pt_status rmsprop_check(const char *op, const void *opts)
{
    const pt_rmsprop_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "epsilon value", o->eps);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "momentum value", o->momentum);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "weight_decay value", o->weight_decay);
    if (st == PT_OK)
        st = pti_optim_check_nonneg(op, "alpha value", o->alpha);
    return st;
}

/* Creates the buffers the options need that are missing (torch creates momentum_buffer and
 * grad_avg at the first step only when momentum > 0 / centered then). */
static pt_status rmsprop_ensure(const pt_rmsprop_opts *o, const pt_tensor *p, pti_param_state *s)
{
    bool need[3] = {true, o->momentum > 0.0, o->centered};
    for (int k = 0; k < 3; k++) {
        if (need[k] && !s->buf[k]) {
            s->buf[k] = pti_optim_state_zeros(p);
            if (!s->buf[k])
                return pt_last_status();
        }
    }
    return PT_OK;
}

static pt_status rmsprop_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o;
    s->step = 0.0;
    return rmsprop_ensure(opts, p, s);
}

/* ---- fused float32 path ------------------------------------------------------------------ */

typedef struct rmsprop_ctx {
    float *p, *sq, *buf, *ga;
    const float *g;
    float wd, alpha, one_alpha, eps, mom, neg_lr;
    bool maximize, has_wd;
} rmsprop_ctx;

static void rmsprop_range(void *vctx, int64_t begin, int64_t end)
{
    const rmsprop_ctx *c = vctx;
    for (int64_t i = begin; i < end; i++) {
        float g = pti_optim_grad_f32(c->g[i], c->p[i], c->maximize, c->has_wd, c->wd);
        float sq = c->sq[i] * c->alpha + c->one_alpha * g * g;
        c->sq[i] = sq;
        float avg;
        if (c->ga) {
            float ga = c->ga[i] * c->alpha + c->one_alpha * g;
            c->ga[i] = ga;
            avg = sqrtf(sq + -1.0f * ga * ga) + c->eps;
        } else {
            avg = sqrtf(sq) + c->eps;
        }
        if (c->buf) {
            float b = c->buf[i] * c->mom + g / avg;
            c->buf[i] = b;
            c->p[i] = c->p[i] + c->neg_lr * b;
        } else {
            c->p[i] = c->p[i] + c->neg_lr * g / avg;
        }
    }
}

#ifdef PTI_OPTIM_HAVE_AVX2
/* rmsprop_range 8 lanes at a time with the same float operations; the tail goes through it. */
PTI_OPTIM_AVX2_FN static void rmsprop_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const rmsprop_ctx *c = vctx;
    float *restrict P = c->p, *restrict SQ = c->sq, *restrict B = c->buf, *restrict GA = c->ga;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->maximize ? -0.0f : 0.0f);
    const __m256 wd = _mm256_set1_ps(c->wd), alpha = _mm256_set1_ps(c->alpha);
    const __m256 one_alpha = _mm256_set1_ps(c->one_alpha), eps = _mm256_set1_ps(c->eps);
    const __m256 mom = _mm256_set1_ps(c->mom), neg_lr = _mm256_set1_ps(c->neg_lr);
    const __m256 minus1 = _mm256_set1_ps(-1.0f);
    const bool has_wd = c->has_wd;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 p = _mm256_loadu_ps(P + i);
        __m256 g = _mm256_xor_ps(_mm256_loadu_ps(G + i), sign);
        if (has_wd)
            g = _mm256_add_ps(g, _mm256_mul_ps(wd, p));
        __m256 sq = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(SQ + i), alpha),
                                  _mm256_mul_ps(_mm256_mul_ps(one_alpha, g), g));
        _mm256_storeu_ps(SQ + i, sq);
        __m256 avg;
        if (GA) {
            __m256 ga = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(GA + i), alpha),
                                      _mm256_mul_ps(one_alpha, g));
            _mm256_storeu_ps(GA + i, ga);
            avg = _mm256_add_ps(
                _mm256_sqrt_ps(_mm256_add_ps(sq, _mm256_mul_ps(_mm256_mul_ps(minus1, ga), ga))),
                eps);
        } else {
            avg = _mm256_add_ps(_mm256_sqrt_ps(sq), eps);
        }
        if (B) {
            __m256 b =
                _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(B + i), mom), _mm256_div_ps(g, avg));
            _mm256_storeu_ps(B + i, b);
            p = _mm256_add_ps(p, _mm256_mul_ps(neg_lr, b));
        } else {
            p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(neg_lr, g), avg));
        }
        _mm256_storeu_ps(P + i, p);
    }
    rmsprop_range(vctx, i, end);
}
#endif

/* ---- generic path --------------------------------------------------------------------------- */

static pt_status rmsprop_generic(const pt_rmsprop_opts *o, pt_tensor *p, const pt_tensor *g,
                                 pt_tensor *sq, pt_tensor *buf, pt_tensor *ga)
{
    pt_tensor *d = pti_optim_generic_grad(p, g, o->maximize, o->weight_decay);
    if (!d)
        return pt_last_status();
    pt_tensor *avg = NULL;
    pt_status st = pti_optim_ema_sq_(sq, d, o->alpha);
    if (st == PT_OK && ga) {
        st = pti_optim_ema_(ga, d, o->alpha);
        if (st == PT_OK && !(avg = pt_addcmul(sq, ga, ga, -1.0)))
            st = pt_last_status();
        if (st == PT_OK)
            st = pt_sqrt_(avg);
    } else if (st == PT_OK && !(avg = pt_sqrt(sq))) {
        st = pt_last_status();
    }
    if (st == PT_OK)
        st = pt_add_scalar_(avg, o->eps);
    if (st == PT_OK && buf) {
        st = pt_mul_scalar_(buf, o->momentum);
        if (st == PT_OK)
            st = pti_optim_assign(buf, pt_addcdiv(buf, d, avg, 1.0));
        if (st == PT_OK)
            st = pt_add_ex_(p, buf, -o->lr);
    } else if (st == PT_OK) {
        st = pti_optim_assign(p, pt_addcdiv(p, d, avg, -o->lr));
    }
    pt_release(avg);
    pt_release(d);
    return st;
}

static pt_status rmsprop_update(pt_optim *opt, const void *opts, pt_tensor *p, const pt_tensor *g,
                                pti_param_state *s)
{
    (void)opt;
    const pt_rmsprop_opts *o = opts;
    pt_status st = rmsprop_ensure(o, p, s);
    if (st != PT_OK)
        return st;
    s->step += 1.0;
    pt_tensor *bufs[3] = {s->buf[BUF_SQUARE_AVG], o->momentum > 0.0 ? s->buf[BUF_MOMENTUM] : NULL,
                          o->centered ? s->buf[BUF_GRAD_AVG] : NULL};
    if (!pti_optim_fast_ok(p, g, 3, bufs))
        return rmsprop_generic(o, p, g, bufs[0], bufs[1], bufs[2]);
    rmsprop_ctx c = {
        .p = pti_data(p),
        .sq = pti_data(bufs[0]),
        .buf = bufs[1] ? pti_data(bufs[1]) : NULL,
        .ga = bufs[2] ? pti_data(bufs[2]) : NULL,
        .g = pti_data(g),
        .wd = (float)o->weight_decay,
        .alpha = (float)o->alpha,
        .one_alpha = (float)(1.0 - o->alpha),
        .eps = (float)o->eps,
        .mom = (float)o->momentum,
        .neg_lr = (float)-o->lr,
        .maximize = o->maximize,
        .has_wd = o->weight_decay != 0.0,
    };
    pti_optim_run_fused(p->numel, rmsprop_range, PTI_OPTIM_AVX2(rmsprop_range_avx2), &c);
    return PT_OK;
}

/* torch's state has momentum_buffer only with momentum > 0 and grad_avg only when centered */
static bool rmsprop_buf_needed(const void *opts, int index)
{
    const pt_rmsprop_opts *o = opts;
    bool need[3] = {true, o->momentum > 0.0, o->centered};
    return need[index];
}

static const pti_optim_def rmsprop_def = {
    .name = "RMSprop",
    .opts_size = sizeof(pt_rmsprop_opts),
    .n_hparams = (int)(sizeof(rmsprop_hparams) / sizeof(rmsprop_hparams[0])),
    .hparams = rmsprop_hparams,
    .n_state = (int)(sizeof(rmsprop_state) / sizeof(rmsprop_state[0])),
    .state = rmsprop_state,
    .check_opts = rmsprop_check,
    .init_state = rmsprop_init,
    .buf_needed = rmsprop_buf_needed,
    .update = rmsprop_update,
};

pt_optim *pt_optim_rmsprop(pt_module *m, pt_rmsprop_opts o)
{
    return pti_optim_new_module(&rmsprop_def, "pt_optim_rmsprop", m, &o);
}

pt_optim *pt_optim_rmsprop_params(int n, pt_tensor *const *params, pt_rmsprop_opts o)
{
    return pti_optim_new(&rmsprop_def, "pt_optim_rmsprop", n, params, &o);
}
