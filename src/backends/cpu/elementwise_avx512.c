/* AVX-512 (F/DQ/BW/VL) float32 loops of the unary elementwise kernels: exp, log, tanh, erf and
 * the activations built on them (sigmoid, silu, gelu), plus the cheap ones (relu, clamp, ...).
 * Chosen over the AVX2 loops of elementwise_avx2.c when the CPU has AVX-512 (pti_cpu_has_avx512;
 * PT_DISABLE_AVX512=1 caps the level at AVX2). Ops not listed in pti_ew_avx512_has_unary keep the
 * AVX2 loop.
 *
 * Why the math differs from the AVX2 file: on AVX-512 CPUs that split 512-bit work over 256-bit
 * units (AMD Zen 4) a zmm FMA costs what two ymm FMAs cost, and a division costs about six
 * FMAs, while min/max/add/compare/logic run on other ports beside the FMAs. So these loops
 * avoid divisions (rcp14 plus one Newton step, ~1 ulp) and count multiplies: e^x gets its 2^n
 * by an exponent-field shift (or vscalefps where gradual underflow matters), log takes mantissa
 * and exponent from vgetmantps/vgetexpps (subnormals included). Tails run the same vector code
 * under a lane mask, so every element gets identical math. Same accuracy targets as the AVX2
 * file: exp/log about 1-2 ulp, tanh/erf (odd rational fits on a clamped range) a few ulp, IEEE
 * special values (NaN, +-inf, +-0, subnormals) as libm and PyTorch give them. */
#include <immintrin.h>
#include <math.h>

#include "elementwise.h"

#define AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")))

#define LOG2E 1.44269504088896341f
/* ln 2 in two parts (Cody-Waite): n * LN2_HI is exact for |n| < 2^15 */
#define LN2_HI 0.693359375f
#define LN2_LO -2.12194440e-4f
/* 1.5 * 2^23 + 127: v + MAGIC rounds v to an integer n and leaves n + 127 in the low mantissa
 * bits, so shifting the bits left by 23 gives the float 2^n (for |n| <= 127). */
#define EXP_MAGIC 12583039.0f

AVX512 static inline __m512 w_set(float v)
{
    return _mm512_set1_ps(v);
}

/* 1/d to about 1 ulp: rcp14 (relative error 2^-14) and one Newton step. d must be finite and
 * nonzero with a normal reciprocal, or the lane gives inf/NaN/0 as rcp14 does. */
AVX512 static inline __m512 w_recip(__m512 d)
{
    __m512 r = _mm512_rcp14_ps(d);
    return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, w_set(1.0f)), r);
}

/* e^r for |r| <= ln2/2 by its degree-7 Taylor polynomial (truncation error 2e-9 relative), as
 * the AVX2 file. */
AVX512 static inline __m512 w_exp_poly(__m512 r)
{
    __m512 p = w_set(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, w_set(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, w_set(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, w_set(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, w_set(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, w_set(0.5f));
    p = _mm512_fmadd_ps(p, r, w_set(1.0f));
    return _mm512_fmadd_ps(p, r, w_set(1.0f));
}

/* e^x over the whole float range: x = n ln2 + r, then p(r) 2^n by vscalefps, which overflows to
 * inf and rounds subnormal results once. x is clamped to [-104, 89] first (beyond, the result
 * is 0 or inf either way); the clamps return x when it is NaN, so NaN propagates. */
AVX512 static inline __m512 w_exp(__m512 x)
{
    __m512 xc = _mm512_min_ps(w_set(89.0f), _mm512_max_ps(w_set(-104.0f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, w_set(LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, w_set(LN2_HI), xc);
    r = _mm512_fnmadd_ps(n, w_set(LN2_LO), r);
    return _mm512_scalef_ps(w_exp_poly(r), n);
}

/* 1 + e^-x, for sigmoid and silu. x is clamped to [-88, 88], so 2^n is a normal float or (at
 * n = -127) 0: e^-x below 2^-126 becomes 0, which 1 + e^-x cannot see, and x below -88 gives
 * 1 + e^88 = 1.65e38 instead of more, which only moves a result below 1e-38. A NaN x gives
 * NaN. */
AVX512 static inline __m512 w_one_plus_exp_neg(__m512 x)
{
    __m512 xc = _mm512_min_ps(w_set(88.0f), _mm512_max_ps(w_set(-88.0f), x));
    __m512 k = _mm512_fmadd_ps(xc, w_set(-LOG2E), w_set(EXP_MAGIC));
    __m512 n = _mm512_sub_ps(k, w_set(EXP_MAGIC)); /* round(-x log2 e) */
    /* -x = n ln2 + r, r = -(x + n ln2) */
    __m512 r = _mm512_fmadd_ps(n, w_set(LN2_HI), xc);
    r = _mm512_fmadd_ps(n, w_set(LN2_LO), r);
    r = _mm512_sub_ps(_mm512_setzero_ps(), r);
    __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(k), 23));
    return _mm512_fmadd_ps(w_exp_poly(r), scale, w_set(1.0f));
}

/* sigmoid = 1 / (1 + e^-x). 1 + e^-x is in [1, 1.65e38], where w_recip is accurate (the
 * result at the top end, 6e-39, is subnormal; rcp14 keeps it). NaN stays NaN. */
AVX512 static inline __m512 w_sigmoid(__m512 x)
{
    return w_recip(w_one_plus_exp_neg(x));
}

/* silu = x / (1 + e^-x) = x sigmoid(x). Below x = -88 the sigmoid factor is taken as 0, so the
 * result is -0 (PyTorch: x / inf) however large |x| is, and -inf gives NaN (-inf * 0) as
 * PyTorch's -inf / inf. */
AVX512 static inline __m512 w_silu(__m512 x)
{
    __mmask16 keep = _mm512_cmp_ps_mask(x, w_set(-88.0f), _CMP_NLT_UQ); /* NaN kept */
    __m512 s = _mm512_maskz_mov_ps(keep, w_recip(w_one_plus_exp_neg(x)));
    return _mm512_mul_ps(x, s);
}

/* z P(z^2) / Q(z^2) for the odd rational fits, z clamped to +-zmax (where the function rounds
 * to +-1); deg is the degree of P and Q. The result is clamped to [-1, 1]. NaN stays NaN: the
 * clamps are written so that they return a NaN operand. With exact, P/Q is a correctly rounded
 * division (the tanh and erf ops, whose results other formulas difference near +-1); without,
 * w_recip (~1 ulp more error, a third of the cost; gelu). */
AVX512 static inline __m512 w_odd_rational(__m512 x, float zmax, const float *cp, const float *cq,
                                           int deg, bool exact)
{
    __m512 z = _mm512_min_ps(w_set(zmax), _mm512_max_ps(w_set(-zmax), x));
    __m512 t = _mm512_mul_ps(z, z);
    __m512 p = w_set(cp[deg]), q = w_set(cq[deg]);
    for (int k = deg - 1; k >= 0; k--) {
        p = _mm512_fmadd_ps(p, t, w_set(cp[k]));
        q = _mm512_fmadd_ps(q, t, w_set(cq[k]));
    }
    /* Q is in [1, Q(zmax^2)] (all coefficients positive): w_recip is accurate there */
    __m512 zp = _mm512_mul_ps(z, p);
    __m512 r = exact ? _mm512_div_ps(zp, q) : _mm512_mul_ps(zp, w_recip(q));
    return _mm512_min_ps(w_set(1.0f), _mm512_max_ps(w_set(-1.0f), r));
}

/* The fits of elementwise_avx2.c (same coefficients, so both paths agree to rounding). */
static const float tanh_p[5] = {9.999999795e-01f, 1.338103488e-01f, 3.495598670e-03f,
                                2.060924022e-05f, 1.335485234e-08f};
static const float tanh_q[5] = {1.000000000e+00f, 4.671435051e-01f, 2.587702339e-02f,
                                3.285651374e-04f, 7.776642291e-07f};
static const float erf_p[6] = {1.128379139e+00f, 1.935413029e-01f, 5.310115773e-02f,
                               3.883154411e-03f, 2.845569066e-04f, 1.986751697e-06f};
static const float erf_q[6] = {1.000000000e+00f, 5.048540714e-01f, 1.153483624e-01f,
                               1.520687992e-02f, 1.185516060e-03f, 3.741938123e-05f};

AVX512 static inline __m512 w_tanh(__m512 x, bool exact)
{
    return w_odd_rational(x, 9.0f, tanh_p, tanh_q, 4, exact);
}

AVX512 static inline __m512 w_erf(__m512 x, bool exact)
{
    return w_odd_rational(x, 4.0f, erf_p, erf_q, 5, exact);
}

/* gelu(x) = x/2 (1 + erf(x/sqrt(2))) in PyTorch's order of operations, so -0 stays -0 and -inf
 * gives NaN (-inf * 0) as there; NaN gives NaN. */
AVX512 static inline __m512 w_gelu_erf(__m512 x)
{
    __m512 hx = _mm512_mul_ps(w_set(0.5f), x);
    __m512 e = w_erf(_mm512_mul_ps(x, w_set(0.70710678118654752f)), false);
    return _mm512_mul_ps(hx, _mm512_add_ps(w_set(1.0f), e));
}

/* gelu, tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
AVX512 static inline __m512 w_gelu_tanh(__m512 x)
{
    __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    __m512 inner = _mm512_fmadd_ps(w_set(0.044715f), x3, x);
    __m512 t = w_tanh(_mm512_mul_ps(w_set(0.7978845608028654f), inner), false);
    return _mm512_mul_ps(_mm512_mul_ps(w_set(0.5f), x), _mm512_add_ps(w_set(1.0f), t));
}

/* log x: x = m 2^e with m in [1, 2) from vgetmantps/vgetexpps (exact, subnormals included),
 * moved to [sqrt(1/2), sqrt(2)); log(1 + f), f = m - 1, by the AVX2 file's polynomial. The
 * special inputs are set by one vfixupimmps from x's class: +-0 -> -inf, negative (and -inf) ->
 * NaN, +inf -> +inf, NaN -> itself. */
AVX512 static inline __m512 w_log(__m512 x)
{
    __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);
    __m512 e = _mm512_getexp_ps(x);
    __mmask16 big = _mm512_cmp_ps_mask(m, w_set(1.41421356f), _CMP_GT_OQ);
    m = _mm512_mask_mul_ps(m, big, m, w_set(0.5f));
    e = _mm512_mask_add_ps(e, big, e, w_set(1.0f));
    __m512 f = _mm512_sub_ps(m, w_set(1.0f));
    __m512 p = w_set(-8.101747915e-02f);
    p = _mm512_fmadd_ps(p, f, w_set(1.271247622e-01f));
    p = _mm512_fmadd_ps(p, f, w_set(-1.297224324e-01f));
    p = _mm512_fmadd_ps(p, f, w_set(1.420215261e-01f));
    p = _mm512_fmadd_ps(p, f, w_set(-1.664224583e-01f));
    p = _mm512_fmadd_ps(p, f, w_set(2.000146934e-01f));
    p = _mm512_fmadd_ps(p, f, w_set(-2.500029658e-01f));
    p = _mm512_fmadd_ps(p, f, w_set(3.333332859e-01f));
    __m512 f2 = _mm512_mul_ps(f, f);
    __m512 lm = _mm512_fmadd_ps(_mm512_mul_ps(f2, f), p, _mm512_fnmadd_ps(w_set(0.5f), f2, f));
    __m512 res = _mm512_fmadd_ps(e, w_set(LN2_LO), lm);
    res = _mm512_fmadd_ps(e, w_set(LN2_HI), res);
    /* fixup tokens by class (4 bits each, class 0 lowest): QNaN, SNaN -> QNaN(x) (2); zero ->
     * -inf (4); +1 -> keep (0); -inf -> NaN (3); +inf -> +inf (5); negative -> NaN (3);
     * positive -> keep (0) */
    return _mm512_fixupimm_ps(res, x, _mm512_set1_epi32(0x03530422), 0);
}

/* e^x - 1: for |x| < 0.5 Kahan's (u - 1) x / log u with u = e^x (exact when u rounds to 1),
 * which cancels the rounding error of u; elsewhere u - 1 loses nothing. */
AVX512 static inline __m512 w_expm1(__m512 x)
{
    __m512 one = w_set(1.0f);
    __m512 u = w_exp(x);
    __m512 um1 = _mm512_sub_ps(u, one);
    __m512 k = _mm512_div_ps(_mm512_mul_ps(um1, x), w_log(u));
    k = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(u, one, _CMP_EQ_OQ), k, x);
    __m512 ax = _mm512_abs_ps(x);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, w_set(0.5f), _CMP_LT_OQ), um1, k);
}

/* log(1 + y) for y >= 0 (or NaN/inf), by the same trick: log(u) y / (u - 1), u = 1 + y. */
AVX512 static inline __m512 w_log1p_pos(__m512 y)
{
    __m512 one = w_set(1.0f);
    __m512 u = _mm512_add_ps(one, y);
    __m512 r = _mm512_div_ps(_mm512_mul_ps(w_log(u), y), _mm512_sub_ps(u, one));
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(u, one, _CMP_EQ_OQ), r, y);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(y, w_set(INFINITY), _CMP_EQ_OQ), r, y);
}

/* x < lo ? lo : x, then > hi ? hi : x, as max then min with the bound first: those return their
 * second operand when the two compare equal or either is NaN, so a NaN x stays NaN and -0 is
 * kept exactly as the compare-and-select form keeps it. */
AVX512 static inline __m512 w_clamp(__m512 x, __m512 lo, __m512 hi)
{
    return _mm512_min_ps(hi, _mm512_max_ps(lo, x));
}

bool pti_ew_avx512_has_unary(pti_op op)
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

/* One body per op: V is the vector expression of x. Two vectors per step (the work of one is
 * short for the cheap ops); the tail runs under a lane mask, inactive lanes read as 0. */
#define WLOOP(V)                                                                                   \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + 32 <= n; i += 32) {                                                             \
            __m512 x = _mm512_loadu_ps(in + i);                                                    \
            _mm512_storeu_ps(out + i, (V));                                                        \
            x = _mm512_loadu_ps(in + i + 16);                                                      \
            _mm512_storeu_ps(out + i + 16, (V));                                                   \
        }                                                                                          \
        for (; i < n; i += 16) {                                                                   \
            __mmask16 m_ = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);     \
            __m512 x = _mm512_maskz_loadu_ps(m_, in + i);                                          \
            _mm512_mask_storeu_ps(out + i, m_, (V));                                               \
        }                                                                                          \
    } while (0)

AVX512 void pti_ew_avx512_unary(pti_op op, float *out, const float *in, int64_t n, const float *p)
{
    __m512 zero = _mm512_setzero_ps(), one = w_set(1.0f);
    __m512 p0 = w_set(p[0]), p1 = w_set(p[1]), p2 = w_set(p[2]);
    __m512 three = w_set(3.0f), six = w_set(6.0f);
    switch (op) {
    case PTI_OP_exp: WLOOP(w_exp(x)); break;
    case PTI_OP_expm1: WLOOP(w_expm1(x)); break;
    case PTI_OP_log: WLOOP(w_log(x)); break;
    case PTI_OP_erf: WLOOP(w_erf(x, true)); break;
    case PTI_OP_tanh: WLOOP(w_tanh(x, true)); break;
    case PTI_OP_sigmoid: WLOOP(w_sigmoid(x)); break;
    case PTI_OP_silu: WLOOP(w_silu(x)); break;
    case PTI_OP_gelu:
        if (p[0] != 0.0f)
            WLOOP(w_gelu_tanh(x));
        else
            WLOOP(w_gelu_erf(x));
        break;
    case PTI_OP_elu: /* x > 0 ? scale x : scale alpha expm1(input_scale x) */
        WLOOP(_mm512_mask_blend_ps(
            _mm512_cmp_ps_mask(x, zero, _CMP_GT_OQ),
            _mm512_mul_ps(_mm512_mul_ps(w_expm1(_mm512_mul_ps(x, p2)), p0), p1),
            _mm512_mul_ps(x, p1)));
        break;
    case PTI_OP_softplus: /* beta x > threshold ? x : log1p(e^(beta x)) / beta */
        WLOOP(_mm512_mask_blend_ps(_mm512_cmp_ps_mask(_mm512_mul_ps(x, p0), p1, _CMP_GT_OQ),
                                   _mm512_div_ps(w_log1p_pos(w_exp(_mm512_mul_ps(x, p0))), p0), x));
        break;
    case PTI_OP_mish: WLOOP(_mm512_mul_ps(x, w_tanh(w_log1p_pos(w_exp(x)), true))); break;
    case PTI_OP_hardsigmoid:
        WLOOP(_mm512_div_ps(w_clamp(_mm512_add_ps(x, three), zero, six), six));
        break;
    case PTI_OP_hardswish:
        WLOOP(_mm512_div_ps(_mm512_mul_ps(x, w_clamp(_mm512_add_ps(x, three), zero, six)), six));
        break;
    /* relu keeps NaN: max(0, x) returns its second operand when either is NaN */
    case PTI_OP_relu: WLOOP(_mm512_max_ps(zero, x)); break;
    case PTI_OP_neg: WLOOP(_mm512_xor_ps(x, w_set(-0.0f))); break;
    case PTI_OP_abs: WLOOP(_mm512_abs_ps(x)); break;
    case PTI_OP_sqrt: WLOOP(_mm512_sqrt_ps(x)); break;
    case PTI_OP_square: WLOOP(_mm512_mul_ps(x, x)); break;
    case PTI_OP_leaky_relu:
        WLOOP(
            _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_GT_OQ), _mm512_mul_ps(x, p0), x));
        break;
    case PTI_OP_hardtanh:
    case PTI_OP_clamp: WLOOP(w_clamp(x, p0, p1)); break;
    default: break;
    }
    (void)one;
}

bool pti_ew_avx512_has_binary(pti_op op)
{
    return pti_ew_avx2_has_binary(op);
}

/* One row of a binary op: LA / LB give the two operand vectors at lane group i (a load, or the
 * broadcast value of a stride-0 operand; the masked forms for the tail), V combines va and vb.
 * Two vectors per step as in WLOOP; the tail runs the same vector code under a lane mask, so
 * every element gets the same instruction as the AVX2 loop's vector or scalar step would give
 * (add, sub, mul, div, fma, max, min are exactly rounded either way). */
#define BROW(V, LA, LB, LAM, LBM)                                                                  \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + 32 <= n; i += 32) {                                                             \
            __m512 va = LA(i), vb = LB(i);                                                         \
            _mm512_storeu_ps(out + i, (V));                                                        \
            va = LA(i + 16), vb = LB(i + 16);                                                      \
            _mm512_storeu_ps(out + i + 16, (V));                                                   \
        }                                                                                          \
        for (; i < n; i += 16) {                                                                   \
            __mmask16 m_ = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);     \
            __m512 va = LAM(m_, i), vb = LBM(m_, i);                                               \
            _mm512_mask_storeu_ps(out + i, m_, (V));                                               \
        }                                                                                          \
    } while (0)

#define LD_A(i) _mm512_loadu_ps(a + (i))
#define LD_B(i) _mm512_loadu_ps(b + (i))
#define LDM_A(m, i) _mm512_maskz_loadu_ps(m, a + (i))
#define LDM_B(m, i) _mm512_maskz_loadu_ps(m, b + (i))
#define BC_A(i) a0
#define BC_B(i) b0
#define BCM_A(m, i) a0
#define BCM_B(m, i) b0

/* Every row r of the call: out, a, b advanced by r * row_strides bytes; the operand pattern
 * (both loaded, or one broadcast) picked per row. */
#define BLOOP512(V)                                                                                \
    do {                                                                                           \
        for (int64_t r = 0; r < rows; r++) {                                                       \
            float *out = (float *)((char *)out0 + r * row_strides[0]);                             \
            const float *a = (const float *)((const char *)a_rows + r * row_strides[1]);           \
            const float *b = (const float *)((const char *)b_rows + r * row_strides[2]);           \
            __m512 a0 = w_set(a[0]), b0 = w_set(b[0]);                                             \
            if (sa && sb)                                                                          \
                BROW(V, LD_A, LD_B, LDM_A, LDM_B);                                                 \
            else if (sa)                                                                           \
                BROW(V, LD_A, BC_B, LDM_A, BCM_B);                                                 \
            else                                                                                   \
                BROW(V, BC_A, LD_B, BCM_A, LDM_B);                                                 \
        }                                                                                          \
    } while (0)

/* max / min with PyTorch's NaN rule: a NaN in either operand gives NaN (a + b carries it). */
AVX512 static inline __m512 w_maximum(__m512 va, __m512 vb)
{
    return _mm512_mask_add_ps(_mm512_max_ps(va, vb), _mm512_cmp_ps_mask(va, vb, _CMP_UNORD_Q), va,
                              vb);
}

AVX512 static inline __m512 w_minimum(__m512 va, __m512 vb)
{
    return _mm512_mask_add_ps(_mm512_min_ps(va, vb), _mm512_cmp_ps_mask(va, vb, _CMP_UNORD_Q), va,
                              vb);
}

AVX512 void pti_ew_avx512_binary_2d(pti_op op, float *out0, const float *a_rows, int64_t sa,
                                    const float *b_rows, int64_t sb, int64_t n, float alpha,
                                    int64_t rows, const int64_t *row_strides)
{
    __m512 valpha = w_set(alpha);
    switch (op) {
    case PTI_OP_add:
        if (alpha == 1.0f)
            BLOOP512(_mm512_add_ps(va, vb));
        else if (alpha == -1.0f)
            BLOOP512(_mm512_sub_ps(va, vb));
        else
            BLOOP512(_mm512_fmadd_ps(vb, valpha, va));
        break;
    case PTI_OP_mul: BLOOP512(_mm512_mul_ps(va, vb)); break;
    case PTI_OP_div: BLOOP512(_mm512_div_ps(va, vb)); break;
    case PTI_OP_maximum: BLOOP512(w_maximum(va, vb)); break;
    case PTI_OP_minimum: BLOOP512(w_minimum(va, vb)); break;
    default: break;
    }
}
