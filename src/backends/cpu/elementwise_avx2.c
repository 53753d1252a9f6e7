/* AVX2+FMA float32 loops of the elementwise kernels: vectorized exp, log, tanh and the
 * activations built on them (sigmoid, silu, gelu), the basic binary arithmetic (flat or by
 * rows of a 2-D iteration), comparisons to bool and the 4-byte where select. exp and log are
 * accurate to about 1-2 ulp over the whole float range, tanh and erf (odd rational fits on a
 * clamped range) to a few ulp, with IEEE special values (NaN, +-inf, 0, subnormals) handled as
 * libm does. */
#include <immintrin.h>
#include <math.h>

#include "elementwise.h"

#define AVX2 __attribute__((target("avx2,fma")))

/* e^x: x = n ln2 + r, |r| <= ln2/2, e^r by its degree-7 Taylor polynomial, then 2^n applied in
 * two halves so results near overflow or in the subnormal range are rounded once. */
AVX2 static inline __m256 v_exp(__m256 x)
{
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* e^x for the activations (sigmoid, silu), which only need it in 1 + e^x: as v_exp, but x is
 * clamped to [-87.3, 89] so 2^n is one scale: results below the normal range are flushed to
 * ~1e-38 (1 + e^x is 1 either way) and x above 88.38 gives inf, as e^x overflows just above
 * 88.72 (the activations then differ from exact by under 1e-36). A NaN x stays NaN (the clamps
 * return their second operand for NaN). */
AVX2 static inline __m256 v_exp_act(__m256 x)
{
    __m256 xc = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-87.3f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* log x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), log m by a polynomial in f;
 * no division. */
AVX2 static inline __m256 v_log(__m256 x)
{
    __m256 zero = _mm256_setzero_ps();
    __m256 sub = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ),
                               _mm256_cmp_ps(x, zero, _CMP_GT_OQ));
    __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(8388608.0f)), sub);
    __m256i xi = _mm256_castps_si256(xs);
    __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(xi, 23), _mm256_set1_epi32(127));
    e = _mm256_sub_epi32(e, _mm256_and_si256(_mm256_castps_si256(sub), _mm256_set1_epi32(23)));
    __m256 m = _mm256_castsi256_ps(_mm256_or_si256(
        _mm256_and_si256(xi, _mm256_set1_epi32(0x7fffff)), _mm256_set1_epi32(0x3f800000)));
    __m256 big = _mm256_cmp_ps(m, _mm256_set1_ps(1.41421356f), _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), big);
    e = _mm256_sub_epi32(e, _mm256_castps_si256(big)); /* big lanes are -1: e += 1 */
    /* log(1 + f) = f - f^2/2 + f^3 P(f), P a least-squares fit on [sqrt(1/2) - 1, sqrt(2) - 1] */
    __m256 f = _mm256_sub_ps(m, _mm256_set1_ps(1.0f));
    __m256 p = _mm256_set1_ps(-8.101747915e-02f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.271247622e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.297224324e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.420215261e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.664224583e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.000146934e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-2.500029658e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(3.333332859e-01f));
    __m256 f2 = _mm256_mul_ps(f, f);
    __m256 lm =
        _mm256_fmadd_ps(_mm256_mul_ps(f2, f), p, _mm256_fnmadd_ps(_mm256_set1_ps(0.5f), f2, f));
    __m256 ef = _mm256_cvtepi32_ps(e);
    __m256 res = _mm256_fmadd_ps(ef, _mm256_set1_ps(-2.12194440e-4f), lm);
    res = _mm256_fmadd_ps(ef, _mm256_set1_ps(0.693359375f), res);
    /* specials: 0 -> -inf, negative -> NaN, +inf and NaN -> themselves */
    res = _mm256_blendv_ps(res, _mm256_set1_ps(-INFINITY), _mm256_cmp_ps(x, zero, _CMP_EQ_OQ));
    res = _mm256_blendv_ps(res, _mm256_set1_ps(NAN), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
    __m256 pass = _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q),
                               _mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ));
    return _mm256_blendv_ps(res, x, pass);
}

/* An odd rational function x P(x^2) / Q(x^2) on |x| <= xmax (x clamped to that range; beyond
 * it the function rounds to +-1 in float). P and Q (coefficients cp, cq; degree 4) are fits of
 * minimum relative error made for this file; all their coefficients are positive, so Q has no
 * pole and nothing cancels. A NaN x returns NaN. */
AVX2 static inline __m256 v_odd_rational(__m256 x, float xmax, const float *cp, const float *cq)
{
    __m256 z = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-xmax)), _mm256_set1_ps(xmax));
    __m256 t = _mm256_mul_ps(z, z);
    __m256 p = _mm256_set1_ps(cp[4]), q = _mm256_set1_ps(cq[4]);
    for (int k = 3; k >= 0; k--) {
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(cp[k]));
        q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(cq[k]));
    }
    __m256 r = _mm256_div_ps(_mm256_mul_ps(z, p), q);
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-1.0f)), _mm256_set1_ps(1.0f));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* tanh on |x| <= 9 (tanh(9) rounds to 1): relative error of the fit ~2e-8, a few ulp in float. */
AVX2 static inline __m256 v_tanh(__m256 x)
{
    static const float cp[5] = {9.999999795e-01f, 1.338103488e-01f, 3.495598670e-03f,
                                2.060924022e-05f, 1.335485234e-08f};
    static const float cq[5] = {1.000000000e+00f, 4.671435051e-01f, 2.587702339e-02f,
                                3.285651374e-04f, 7.776642291e-07f};
    return v_odd_rational(x, 9.0f, cp, cq);
}

AVX2 static inline __m256 v_sigmoid(__m256 x)
{
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = v_exp_act(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

/* erf on |x| <= 4 (erf(4) rounds to 1), same form as tanh but with a degree-5 P and Q whose
 * constant terms are 2/sqrt(pi) and 1; relative error of the fit ~3e-8. */
AVX2 static inline __m256 v_erf(__m256 x)
{
    static const float cp[6] = {1.128379139e+00f, 1.935413029e-01f, 5.310115773e-02f,
                                3.883154411e-03f, 2.845569066e-04f, 1.986751697e-06f};
    static const float cq[6] = {1.000000000e+00f, 5.048540714e-01f, 1.153483624e-01f,
                                1.520687992e-02f, 1.185516060e-03f, 3.741938123e-05f};
    __m256 z = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-4.0f)), _mm256_set1_ps(4.0f));
    __m256 t = _mm256_mul_ps(z, z);
    __m256 p = _mm256_set1_ps(cp[5]), q = _mm256_set1_ps(cq[5]);
    for (int k = 4; k >= 0; k--) {
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(cp[k]));
        q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(cq[k]));
    }
    __m256 r = _mm256_div_ps(_mm256_mul_ps(z, p), q);
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-1.0f)), _mm256_set1_ps(1.0f));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* gelu(x) = x/2 (1 + erf(x/sqrt(2))), in PyTorch's order of operations (so -0 stays -0 and -inf
 * gives NaN as there); a NaN x gives NaN through x/2. */
AVX2 static inline __m256 v_gelu_erf(__m256 x)
{
    __m256 hx = _mm256_mul_ps(_mm256_set1_ps(0.5f), x);
    __m256 e = v_erf(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
    return _mm256_mul_ps(hx, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* gelu, tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
AVX2 static inline __m256 v_gelu_tanh(__m256 x)
{
    __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x);
    __m256 t = v_tanh(_mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), inner));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x),
                         _mm256_add_ps(_mm256_set1_ps(1.0f), t));
}

/* e^x - 1: for |x| < 0.5 Kahan's (u - 1) x / log u with u = e^x (exact when u rounds to 1),
 * which cancels the rounding error of u; elsewhere u - 1 loses nothing. */
AVX2 static inline __m256 v_expm1(__m256 x)
{
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 u = v_exp(x);
    __m256 um1 = _mm256_sub_ps(u, one);
    __m256 k = _mm256_div_ps(_mm256_mul_ps(um1, x), v_log(u));
    k = _mm256_blendv_ps(k, x, _mm256_cmp_ps(u, one, _CMP_EQ_OQ));
    __m256 small =
        _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(0.5f), _CMP_LT_OQ);
    return _mm256_blendv_ps(um1, k, small);
}

/* log(1 + y) for y >= 0 (or NaN/inf), by the same trick: log(u) y / (u - 1), u = 1 + y. */
AVX2 static inline __m256 v_log1p_pos(__m256 y)
{
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 u = _mm256_add_ps(one, y);
    __m256 r = _mm256_div_ps(_mm256_mul_ps(v_log(u), y), _mm256_sub_ps(u, one));
    r = _mm256_blendv_ps(r, y, _mm256_cmp_ps(u, one, _CMP_EQ_OQ));
    return _mm256_blendv_ps(r, y, _mm256_cmp_ps(y, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ));
}

/* x < lo ? lo : x, then > hi ? hi : x, as max then min with the bound first: those return their
 * second operand when the two compare equal or either is NaN, so a NaN x stays NaN and -0 is
 * kept exactly as the compare-and-select form keeps it. */
AVX2 static inline __m256 v_clamp(__m256 x, __m256 lo, __m256 hi)
{
    return _mm256_min_ps(hi, _mm256_max_ps(lo, x));
}

bool pti_ew_avx2_has_unary(pti_op op)
{
    switch (op) {
    case PTI_OP_exp:
    case PTI_OP_expm1:
    case PTI_OP_log:
    case PTI_OP_tanh:
    case PTI_OP_sigmoid:
    case PTI_OP_silu:
    case PTI_OP_gelu:
    case PTI_OP_erf:
    case PTI_OP_elu:
    case PTI_OP_softplus:
    case PTI_OP_mish:
    case PTI_OP_hardsigmoid:
    case PTI_OP_hardswish:
    case PTI_OP_relu:
    case PTI_OP_neg:
    case PTI_OP_abs:
    case PTI_OP_sqrt:
    case PTI_OP_square:
    case PTI_OP_leaky_relu:
    case PTI_OP_hardtanh:
    case PTI_OP_clamp: return true;
    default: return false;
    }
}

/* One body per op: V is the vector expression of x. The tail (n % 8 elements) runs the same
 * vector code on a zero-padded copy, so every element gets identical math. */
#define VLOOP(V)                                                                                   \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + 8 <= n; i += 8) {                                                               \
            __m256 x = _mm256_loadu_ps(in + i);                                                    \
            _mm256_storeu_ps(out + i, (V));                                                        \
        }                                                                                          \
        if (i < n) {                                                                               \
            float tin[8] = {0}, tout[8];                                                           \
            for (int64_t j = i; j < n; j++)                                                        \
                tin[j - i] = in[j];                                                                \
            __m256 x = _mm256_loadu_ps(tin);                                                       \
            _mm256_storeu_ps(tout, (V));                                                           \
            for (int64_t j = i; j < n; j++)                                                        \
                out[j] = tout[j - i];                                                              \
        }                                                                                          \
    } while (0)

AVX2 void pti_ew_avx2_unary(pti_op op, float *out, const float *in, int64_t n, const float *p)
{
    __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    __m256 p0 = _mm256_set1_ps(p[0]), p1 = _mm256_set1_ps(p[1]), p2 = _mm256_set1_ps(p[2]);
    __m256 three = _mm256_set1_ps(3.0f), six = _mm256_set1_ps(6.0f);
    switch (op) {
    case PTI_OP_exp: VLOOP(v_exp(x)); break;
    case PTI_OP_expm1: VLOOP(v_expm1(x)); break;
    case PTI_OP_log: VLOOP(v_log(x)); break;
    case PTI_OP_erf: VLOOP(v_erf(x)); break;
    case PTI_OP_tanh: VLOOP(v_tanh(x)); break;
    case PTI_OP_sigmoid: VLOOP(v_sigmoid(x)); break;
    case PTI_OP_silu:
        VLOOP(_mm256_div_ps(x, _mm256_add_ps(one, v_exp_act(_mm256_sub_ps(zero, x)))));
        break;
    case PTI_OP_gelu:
        if (p[0] != 0.0f)
            VLOOP(v_gelu_tanh(x));
        else
            VLOOP(v_gelu_erf(x));
        break;
    case PTI_OP_elu: /* x > 0 ? scale x : scale alpha expm1(input_scale x) */
        VLOOP(_mm256_blendv_ps(_mm256_mul_ps(_mm256_mul_ps(v_expm1(_mm256_mul_ps(x, p2)), p0), p1),
                               _mm256_mul_ps(x, p1), _mm256_cmp_ps(x, zero, _CMP_GT_OQ)));
        break;
    case PTI_OP_softplus: /* beta x > threshold ? x : log1p(e^(beta x)) / beta */
        VLOOP(_mm256_blendv_ps(_mm256_div_ps(v_log1p_pos(v_exp(_mm256_mul_ps(x, p0))), p0), x,
                               _mm256_cmp_ps(_mm256_mul_ps(x, p0), p1, _CMP_GT_OQ)));
        break;
    case PTI_OP_mish: VLOOP(_mm256_mul_ps(x, v_tanh(v_log1p_pos(v_exp(x))))); break;
    case PTI_OP_hardsigmoid:
        VLOOP(_mm256_div_ps(v_clamp(_mm256_add_ps(x, three), zero, six), six));
        break;
    case PTI_OP_hardswish:
        VLOOP(_mm256_div_ps(_mm256_mul_ps(x, v_clamp(_mm256_add_ps(x, three), zero, six)), six));
        break;
    /* relu keeps NaN: max(x, 0) returns its second operand when either is NaN */
    case PTI_OP_relu: VLOOP(_mm256_max_ps(zero, x)); break;
    case PTI_OP_neg: VLOOP(_mm256_xor_ps(x, sign)); break;
    case PTI_OP_abs: VLOOP(_mm256_andnot_ps(sign, x)); break;
    case PTI_OP_sqrt: VLOOP(_mm256_sqrt_ps(x)); break;
    case PTI_OP_square: VLOOP(_mm256_mul_ps(x, x)); break;
    case PTI_OP_leaky_relu:
        VLOOP(_mm256_blendv_ps(_mm256_mul_ps(x, p0), x, _mm256_cmp_ps(x, zero, _CMP_GT_OQ)));
        break;
    case PTI_OP_hardtanh:
    case PTI_OP_clamp: VLOOP(v_clamp(x, p0, p1)); break;
    default: break;
    }
}

bool pti_ew_avx2_has_binary(pti_op op)
{
    return op == PTI_OP_add || op == PTI_OP_mul || op == PTI_OP_div || op == PTI_OP_maximum ||
           op == PTI_OP_minimum;
}

/* The loop of one operand pattern: LA/LB load lane group i of a and b. */
#define BLOOP_BODY(V, S, LA, LB)                                                                   \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + 8 <= n; i += 8) {                                                               \
            __m256 va = LA, vb = LB;                                                               \
            _mm256_storeu_ps(out + i, (V));                                                        \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            float x = a[i * sa], y = b[i * sb];                                                    \
            out[i] = (S);                                                                          \
        }                                                                                          \
    } while (0)

/* V is the vector expression of va, vb; S the scalar one of x, y (for the tail). Runs the
 * rows of the 2-D call below, so the op switch is taken once per call, not once per row. */
#define BLOOP(V, S)                                                                                \
    do {                                                                                           \
        for (int64_t r = 0; r < rows; r++)                                                         \
            BLOOP_ROW(V, S);                                                                       \
    } while (0)

#define BLOOP_ROW(V, S)                                                                            \
    do {                                                                                           \
        float *out = (float *)((char *)out0 + r * ro);                                             \
        const float *a = (const float *)((const char *)a0_ + r * ra);                              \
        const float *b = (const float *)((const char *)b0_ + r * rb);                              \
        __m256 a0 = _mm256_set1_ps(a[0]), b0 = _mm256_set1_ps(b[0]);                               \
        if (sa && sb)                                                                              \
            BLOOP_BODY(V, S, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));                      \
        else if (sa)                                                                               \
            BLOOP_BODY(V, S, _mm256_loadu_ps(a + i), b0);                                          \
        else                                                                                       \
            BLOOP_BODY(V, S, a0, _mm256_loadu_ps(b + i));                                          \
    } while (0)

AVX2 void pti_ew_avx2_binary_2d(pti_op op, float *out0, const float *a0_, int64_t sa,
                                const float *b0_, int64_t sb, int64_t n, float alpha, int64_t rows,
                                const int64_t *row_strides)
{
    int64_t ro = row_strides[0], ra = row_strides[1], rb = row_strides[2];
    __m256 va_alpha = _mm256_set1_ps(alpha);
    switch (op) {
    case PTI_OP_add:
        if (alpha == 1.0f)
            BLOOP(_mm256_add_ps(va, vb), x + y);
        else if (alpha == -1.0f)
            BLOOP(_mm256_sub_ps(va, vb), x - y);
        else
            BLOOP(_mm256_fmadd_ps(vb, va_alpha, va), x + alpha * y);
        break;
    case PTI_OP_mul: BLOOP(_mm256_mul_ps(va, vb), x * y); break;
    case PTI_OP_div: BLOOP(_mm256_div_ps(va, vb), x / y); break;
    case PTI_OP_maximum:
        BLOOP(_mm256_blendv_ps(_mm256_max_ps(va, vb), _mm256_add_ps(va, vb),
                               _mm256_cmp_ps(va, vb, _CMP_UNORD_Q)),
              (x != x || y != y) ? x + y : (x > y ? x : y));
        break;
    case PTI_OP_minimum:
        BLOOP(_mm256_blendv_ps(_mm256_min_ps(va, vb), _mm256_add_ps(va, vb),
                               _mm256_cmp_ps(va, vb, _CMP_UNORD_Q)),
              (x != x || y != y) ? x + y : (x < y ? x : y));
        break;
    default: break;
    }
}

void pti_ew_avx2_binary(pti_op op, float *out, const float *a, int64_t sa, const float *b,
                        int64_t sb, int64_t n, float alpha)
{
    static const int64_t zero[3];
    pti_ew_avx2_binary_2d(op, out, a, sa, b, sb, n, alpha, 1, zero);
}

bool pti_ew_avx2_has_compare(pti_op op)
{
    return op == PTI_OP_eq || op == PTI_OP_ne || op == PTI_OP_lt || op == PTI_OP_le ||
           op == PTI_OP_gt || op == PTI_OP_ge;
}

/* 32 comparisons packed to 32 bytes of 0/1: the masks narrow 32 -> 16 -> 8 bits per lane, which
 * interleaves the 128-bit halves; one dword permute restores the order. */
#define CMP32(PRED)                                                                                \
    do {                                                                                           \
        __m256i m0 = _mm256_castps_si256(_mm256_cmp_ps(LA(0), LB(0), PRED));                       \
        __m256i m1 = _mm256_castps_si256(_mm256_cmp_ps(LA(8), LB(8), PRED));                       \
        __m256i m2 = _mm256_castps_si256(_mm256_cmp_ps(LA(16), LB(16), PRED));                     \
        __m256i m3 = _mm256_castps_si256(_mm256_cmp_ps(LA(24), LB(24), PRED));                     \
        __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(m0, m1), _mm256_packs_epi32(m2, m3));    \
        w = _mm256_permutevar8x32_epi32(w, perm);                                                  \
        _mm256_storeu_si256((__m256i *)(out + i), _mm256_and_si256(w, one));                       \
    } while (0)

#define CMP_CASES()                                                                                \
    switch (op) {                                                                                  \
    case PTI_OP_eq: CMP_RUN(_CMP_EQ_OQ, x == y); break;                                            \
    case PTI_OP_ne: CMP_RUN(_CMP_NEQ_UQ, x != y); break;                                           \
    case PTI_OP_lt: CMP_RUN(_CMP_LT_OQ, x < y); break;                                             \
    case PTI_OP_le: CMP_RUN(_CMP_LE_OQ, x <= y); break;                                            \
    case PTI_OP_gt: CMP_RUN(_CMP_GT_OQ, x > y); break;                                             \
    case PTI_OP_ge: CMP_RUN(_CMP_GE_OQ, x >= y); break;                                            \
    default: break;                                                                                \
    }

#define CMP_RUN(PRED, S)                                                                           \
    do {                                                                                           \
        for (; i + 32 <= n; i += 32)                                                               \
            CMP32(PRED);                                                                           \
        for (; i < n; i++) {                                                                       \
            float x = a[i * sa], y = b[i * sb];                                                    \
            out[i] = (S);                                                                          \
        }                                                                                          \
    } while (0)

/* out[i] = a[i*sa] op b[i*sb] as bool bytes, sa and sb each 0 or 1 (not both 0). */
AVX2 void pti_ew_avx2_compare(pti_op op, uint8_t *out, const float *a, int64_t sa, const float *b,
                              int64_t sb, int64_t n)
{
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i one = _mm256_set1_epi8(1);
    __m256 a0 = _mm256_set1_ps(a[0]), b0 = _mm256_set1_ps(b[0]);
    int64_t i = 0;
    if (sa && sb) {
#define LA(k) _mm256_loadu_ps(a + i + (k))
#define LB(k) _mm256_loadu_ps(b + i + (k))
        CMP_CASES()
#undef LB
    } else if (sa) {
#define LB(k) b0
        CMP_CASES()
#undef LA
#undef LB
    } else {
#define LA(k) a0
#define LB(k) _mm256_loadu_ps(b + i + (k))
        CMP_CASES()
#undef LA
#undef LB
    }
}

/* out[i] = cond[i] ? a[i] : b[i] for n contiguous 4-byte elements (any 4-byte dtype). */
AVX2 void pti_ew_avx2_where32(uint32_t *out, const uint8_t *cond, const uint32_t *a,
                              const uint32_t *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(cond + i)));
        __m256 zero = _mm256_castsi256_ps(_mm256_cmpeq_epi32(c, _mm256_setzero_si256()));
        __m256 va = _mm256_loadu_ps((const float *)(a + i));
        __m256 vb = _mm256_loadu_ps((const float *)(b + i));
        _mm256_storeu_ps((float *)(out + i), _mm256_blendv_ps(va, vb, zero));
    }
    for (; i < n; i++)
        out[i] = cond[i] ? a[i] : b[i];
}

/* ---- fused activation backwards -------------------------------------------------------------- */

bool pti_ew_avx2_has_act_backward(pti_op op)
{
    return op == PTI_OP_threshold_backward || op == PTI_OP_tanh_backward ||
           op == PTI_OP_sigmoid_backward || op == PTI_OP_silu_backward ||
           op == PTI_OP_gelu_backward;
}

/* As VLOOP with two inputs: vg (gradient) and x (the saved tensor). */
#define GLOOP(V)                                                                                   \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + 8 <= n; i += 8) {                                                               \
            __m256 vg = _mm256_loadu_ps(g + i), x = _mm256_loadu_ps(xs + i);                       \
            _mm256_storeu_ps(out + i, (V));                                                        \
        }                                                                                          \
        if (i < n) {                                                                               \
            float tg[8] = {0}, tx[8] = {0}, tout[8];                                               \
            for (int64_t j = i; j < n; j++) {                                                      \
                tg[j - i] = g[j];                                                                  \
                tx[j - i] = xs[j];                                                                 \
            }                                                                                      \
            __m256 vg = _mm256_loadu_ps(tg), x = _mm256_loadu_ps(tx);                              \
            _mm256_storeu_ps(tout, (V));                                                           \
            for (int64_t j = i; j < n; j++)                                                        \
                out[j] = tout[j - i];                                                              \
        }                                                                                          \
    } while (0)

/* d/dx gelu(x), erf form: Phi(x) + x phi(x). */
AVX2 static inline __m256 v_gelu_erf_grad(__m256 x)
{
    __m256 cdf =
        _mm256_mul_ps(_mm256_set1_ps(0.5f),
                      _mm256_add_ps(_mm256_set1_ps(1.0f),
                                    v_erf(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)))));
    __m256 pdf = _mm256_mul_ps(v_exp(_mm256_mul_ps(_mm256_set1_ps(-0.5f), _mm256_mul_ps(x, x))),
                               _mm256_set1_ps(0.39894228040143267794f));
    return _mm256_fmadd_ps(x, pdf, cdf);
}

/* d/dx gelu(x), tanh form: (1 + t)/2 + x/2 (1 - t^2) k (1 + 3c x^2), t = tanh(u). Written with
 * e = e^(-2|u|) so neither term cancels in float32 where t is near +-1: (1 + t)/2 is
 * sigmoid(2u) = 1/(1 + e) for u >= 0 and e/(1 + e) below, and 1 - t^2 = 4e/(1 + e)^2. */
AVX2 static inline __m256 v_gelu_tanh_grad(__m256 x)
{
    __m256 k = _mm256_set1_ps(0.7978845608028654f), c = _mm256_set1_ps(0.044715f);
    __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 u = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(c, x2), x, x));
    __m256 au = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), u);
    __m256 e = v_exp(_mm256_mul_ps(_mm256_set1_ps(-2.0f), au));
    __m256 inv = _mm256_div_ps(one, _mm256_add_ps(one, e));
    __m256 left = _mm256_blendv_ps(_mm256_mul_ps(e, inv), inv,
                                   _mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_GE_OQ));
    __m256 sech2 = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(4.0f), e), _mm256_mul_ps(inv, inv));
    __m256 dinner =
        _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(3.0f), c), x2, one));
    __m256 right = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(half, x), sech2), dinner);
    return _mm256_add_ps(left, right);
}

AVX2 void pti_ew_avx2_act_backward(pti_op op, float *out, const float *g, const float *xs,
                                   int64_t n, float p0)
{
    __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f), vp0 = _mm256_set1_ps(p0);
    switch (op) {
    case PTI_OP_threshold_backward: /* x <= threshold gives 0; a NaN x passes g */
        GLOOP(_mm256_blendv_ps(vg, zero, _mm256_cmp_ps(x, vp0, _CMP_LE_OQ)));
        break;
    case PTI_OP_tanh_backward: GLOOP(_mm256_mul_ps(vg, _mm256_fnmadd_ps(x, x, one))); break;
    case PTI_OP_sigmoid_backward:
        GLOOP(_mm256_mul_ps(vg, _mm256_mul_ps(_mm256_sub_ps(one, x), x)));
        break;
    case PTI_OP_silu_backward: {
        /* s (1 + x (1 - s)), s = sigmoid(x) */
        GLOOP(_mm256_mul_ps(
            vg, _mm256_mul_ps(v_sigmoid(x),
                              _mm256_fmadd_ps(x, _mm256_sub_ps(one, v_sigmoid(x)), one))));
        break;
    }
    case PTI_OP_gelu_backward:
        if (p0 != 0.0f)
            GLOOP(_mm256_mul_ps(vg, v_gelu_tanh_grad(x)));
        else
            GLOOP(_mm256_mul_ps(vg, v_gelu_erf_grad(x)));
        break;
    default: break;
    }
}
