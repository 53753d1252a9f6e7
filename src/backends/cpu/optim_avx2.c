/* AVX2 variants of the CPU optimizer updates (SGD, Adam/AdamW, Adagrad, Adadelta, Adamax,
 * NAdam, RMSprop): the portable loops of optim.c 8 lanes at a time with the same float
 * operations in the same order, so both give the same bits; each takes its tail through the
 * portable loop. Chosen at run time by optim.c (pti_cpu_has_avx2, off with PT_DISABLE_AVX2=1). */
#include "optim.h"

#ifdef PTI_CPU_OPTIM_HAVE_AVX2
#include <immintrin.h>

/* pti_cpu_optim_sgd_range 8 lanes at a time with the same float operations; the tail goes through
 * it. */
PTI_CPU_OPTIM_AVX2 void pti_cpu_optim_sgd_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const sgd_ctx *c = vctx;
    float *restrict P = c->p, *restrict B = c->buf;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->hp.maximize ? -0.0f : 0.0f);
    const __m256 wd = _mm256_set1_ps(c->hp.wd), mom = _mm256_set1_ps(c->hp.mom);
    const __m256 damp1 = _mm256_set1_ps(c->hp.damp1), neg_lr = _mm256_set1_ps(c->hp.neg_lr);
    const bool has_wd = c->hp.has_wd, first = c->hp.first, nesterov = c->hp.nesterov;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 p = _mm256_loadu_ps(P + i);
        __m256 d = _mm256_xor_ps(_mm256_loadu_ps(G + i), sign);
        if (has_wd)
            d = _mm256_add_ps(d, _mm256_mul_ps(wd, p));
        if (B) {
            __m256 b = first ? d
                             : _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(B + i), mom),
                                             _mm256_mul_ps(damp1, d));
            _mm256_storeu_ps(B + i, b);
            d = nesterov ? _mm256_add_ps(d, _mm256_mul_ps(mom, b)) : b;
        }
        _mm256_storeu_ps(P + i, _mm256_add_ps(p, _mm256_mul_ps(neg_lr, d)));
    }
    pti_cpu_optim_sgd_range(vctx, i, end);
}

/* The same float operations as pti_cpu_optim_adam_range, 8 lanes at a time (no FMA contraction, so
 * results equal the scalar loop's); the tail goes through pti_cpu_optim_adam_range. */
PTI_CPU_OPTIM_AVX2 void pti_cpu_optim_adam_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const adam_ctx *c = vctx;
    float *restrict P = c->p, *restrict M = c->m, *restrict V = c->v, *restrict VM = c->vmax;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->hp.maximize ? -0.0f : 0.0f);
    const __m256 wd = _mm256_set1_ps(c->hp.wd), dm = _mm256_set1_ps(c->hp.decay_mul);
    const __m256 b1 = _mm256_set1_ps(c->hp.b1), ob1 = _mm256_set1_ps(c->hp.one_b1);
    const __m256 b2 = _mm256_set1_ps(c->hp.b2), ob2 = _mm256_set1_ps(c->hp.one_b2);
    const __m256 bc2s = _mm256_set1_ps(c->hp.bc2_sqrt), eps = _mm256_set1_ps(c->hp.eps);
    const __m256 nss = _mm256_set1_ps(c->hp.neg_step_size);
    const bool decay = c->hp.decay_mul != 1.0f, has_wd = c->hp.has_wd;
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
    pti_cpu_optim_adam_range(vctx, i, end);
}

/* pti_cpu_optim_adagrad_range 8 lanes at a time with the same float operations; the tail goes
 * through it. */
PTI_CPU_OPTIM_AVX2 void pti_cpu_optim_adagrad_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const adagrad_ctx *c = vctx;
    float *restrict P = c->p, *restrict S = c->sum;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->hp.maximize ? -0.0f : 0.0f);
    const __m256 wd = _mm256_set1_ps(c->hp.wd), eps = _mm256_set1_ps(c->hp.eps);
    const __m256 neg_clr = _mm256_set1_ps(c->hp.neg_clr);
    const bool has_wd = c->hp.has_wd;
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
    pti_cpu_optim_adagrad_range(vctx, i, end);
}

/* pti_cpu_optim_adadelta_range 8 lanes at a time with the same float operations; the tail goes
 * through it. */
PTI_CPU_OPTIM_AVX2 void pti_cpu_optim_adadelta_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const adadelta_ctx *c = vctx;
    float *restrict P = c->p, *restrict SQ = c->sq, *restrict ACC = c->acc;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->hp.maximize ? -0.0f : 0.0f);
    const __m256 wd = _mm256_set1_ps(c->hp.wd), rho = _mm256_set1_ps(c->hp.rho);
    const __m256 one_rho = _mm256_set1_ps(c->hp.one_rho), eps = _mm256_set1_ps(c->hp.eps);
    const __m256 neg_lr = _mm256_set1_ps(c->hp.neg_lr);
    const bool has_wd = c->hp.has_wd;
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
    pti_cpu_optim_adadelta_range(vctx, i, end);
}

/* pti_cpu_optim_adamax_range 8 lanes at a time with the same float operations (NaN kept as
 * torch.amax does); the tail goes through it. */
PTI_CPU_OPTIM_AVX2 void pti_cpu_optim_adamax_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const adamax_ctx *c = vctx;
    float *restrict P = c->p, *restrict M = c->m, *restrict U = c->u;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->hp.maximize ? -0.0f : 0.0f);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 wd = _mm256_set1_ps(c->hp.wd), b1 = _mm256_set1_ps(c->hp.b1);
    const __m256 one_b1 = _mm256_set1_ps(c->hp.one_b1), b2 = _mm256_set1_ps(c->hp.b2);
    const __m256 eps = _mm256_set1_ps(c->hp.eps), neg_clr = _mm256_set1_ps(c->hp.neg_clr);
    const bool has_wd = c->hp.has_wd;
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
    pti_cpu_optim_adamax_range(vctx, i, end);
}

/* pti_cpu_optim_nadam_range 8 lanes at a time with the same float operations; the tail goes through
 * it. */
PTI_CPU_OPTIM_AVX2 void pti_cpu_optim_nadam_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const nadam_ctx *c = vctx;
    float *restrict P = c->p, *restrict M = c->m, *restrict V = c->v;
    const float *restrict G = c->g;
    const __m256 wd = _mm256_set1_ps(c->hp.wd), b1 = _mm256_set1_ps(c->hp.b1);
    const __m256 one_b1 = _mm256_set1_ps(c->hp.one_b1), b2 = _mm256_set1_ps(c->hp.b2);
    const __m256 one_b2 = _mm256_set1_ps(c->hp.one_b2), bc2 = _mm256_set1_ps(c->hp.bc2);
    const __m256 eps = _mm256_set1_ps(c->hp.eps), coef_g = _mm256_set1_ps(c->hp.coef_g);
    const __m256 coef_m = _mm256_set1_ps(c->hp.coef_m);
    const bool has_wd = c->hp.has_wd;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 p = _mm256_loadu_ps(P + i);
        __m256 g = _mm256_loadu_ps(G + i);
        if (has_wd)
            g = _mm256_add_ps(g, _mm256_mul_ps(wd, p));
        __m256 m =
            _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(M + i), b1), _mm256_mul_ps(one_b1, g));
        __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(V + i), b2),
                                 _mm256_mul_ps(_mm256_mul_ps(one_b2, g), g));
        _mm256_storeu_ps(M + i, m);
        _mm256_storeu_ps(V + i, v);
        __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(v, bc2)), eps);
        p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(coef_g, g), denom));
        p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(coef_m, m), denom));
        _mm256_storeu_ps(P + i, p);
    }
    pti_cpu_optim_nadam_range(vctx, i, end);
}

/* pti_cpu_optim_rmsprop_range 8 lanes at a time with the same float operations; the tail goes
 * through it. */
PTI_CPU_OPTIM_AVX2 void pti_cpu_optim_rmsprop_range_avx2(void *vctx, int64_t begin, int64_t end)
{
    const rmsprop_ctx *c = vctx;
    float *restrict P = c->p, *restrict SQ = c->sq, *restrict B = c->buf, *restrict GA = c->ga;
    const float *restrict G = c->g;
    const __m256 sign = _mm256_set1_ps(c->hp.maximize ? -0.0f : 0.0f);
    const __m256 wd = _mm256_set1_ps(c->hp.wd), alpha = _mm256_set1_ps(c->hp.alpha);
    const __m256 one_alpha = _mm256_set1_ps(c->hp.one_alpha), eps = _mm256_set1_ps(c->hp.eps);
    const __m256 mom = _mm256_set1_ps(c->hp.mom), neg_lr = _mm256_set1_ps(c->hp.neg_lr);
    const __m256 minus1 = _mm256_set1_ps(-1.0f);
    const bool has_wd = c->hp.has_wd;
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
    pti_cpu_optim_rmsprop_range(vctx, i, end);
}

#endif
