/* CPU kernels of the elementwise family, unary part (front-ends in src/ops/elementwise.c):
 * math functions, activations, rounding, clamp and the bool-valued tests. float32 and float64
 * share one expression per op (type-generic math); contiguous float32 runs take the AVX-512 loops
 * of elementwise_avx512.c or the AVX2 loops of elementwise_avx2.c when the CPU has them; integer
 * dtypes go through int64. Binary and ternary kernels are in elementwise_binary.c. */
#include <tgmath.h>

#include "elementwise.h"

typedef struct unary_ctx {
    pti_op op;
    pt_dtype dt;       /* input dtype (= output dtype except for the bool-valued ops) */
    bool avx2, avx512; /* the contiguous float32 loop to take (AVX-512 first) */
    double p[4];       /* the op's parameters (call scalars) */
    float pf[4];       /* the same as floats, for the float32 loops */
} unary_ctx;

/* x is the input element of type T; each case assigns y. */
#define UNARY_LOOP(T, EXPR)                                                                        \
    do {                                                                                           \
        if (so == (int64_t)sizeof(T) && si == (int64_t)sizeof(T)) {                                \
            T *o_ = (T *)out;                                                                      \
            const T *i_ = (const T *)in;                                                           \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T x = i_[i];                                                                       \
                o_[i] = (EXPR);                                                                    \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T x = *(const T *)(in + i * si);                                                   \
                *(T *)(out + i * so) = (EXPR);                                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static inline float clampf_(float x, float lo, float hi)
{
    float y = x < lo ? lo : x;
    return y > hi ? hi : y;
}
static inline double clampd_(double x, double lo, double hi)
{
    double y = x < lo ? lo : x;
    return y > hi ? hi : y;
}

/* The floating cases, written once for float (T = float, CL = clampf_) and double. P0..P2 are
 * the parameters in T. */
#define FLOAT_UNARY_CASES(T, CL)                                                                   \
    case PTI_OP_neg: UNARY_LOOP(T, -x); break;                                                     \
    case PTI_OP_abs: UNARY_LOOP(T, fabs(x)); break;                                                \
    case PTI_OP_sign: UNARY_LOOP(T, (T)((x > 0) - (x < 0))); break;                                \
    case PTI_OP_exp: UNARY_LOOP(T, exp(x)); break;                                                 \
    case PTI_OP_expm1: UNARY_LOOP(T, expm1(x)); break;                                             \
    case PTI_OP_log: UNARY_LOOP(T, log(x)); break;                                                 \
    case PTI_OP_log1p: UNARY_LOOP(T, log1p(x)); break;                                             \
    case PTI_OP_log2: UNARY_LOOP(T, log2(x)); break;                                               \
    case PTI_OP_sqrt: UNARY_LOOP(T, sqrt(x)); break;                                               \
    case PTI_OP_rsqrt: UNARY_LOOP(T, (T)1 / sqrt(x)); break;                                       \
    case PTI_OP_square: UNARY_LOOP(T, x *x); break;                                                \
    case PTI_OP_sin: UNARY_LOOP(T, sin(x)); break;                                                 \
    case PTI_OP_cos: UNARY_LOOP(T, cos(x)); break;                                                 \
    case PTI_OP_tan: UNARY_LOOP(T, tan(x)); break;                                                 \
    case PTI_OP_tanh: UNARY_LOOP(T, tanh(x)); break;                                               \
    case PTI_OP_sigmoid: UNARY_LOOP(T, (T)1 / ((T)1 + exp(-x))); break;                            \
    case PTI_OP_relu: UNARY_LOOP(T, x <= 0 ? (T)0 : x); break;                                     \
    case PTI_OP_leaky_relu: UNARY_LOOP(T, x > 0 ? x : x * P0); break;                              \
    case PTI_OP_elu: UNARY_LOOP(T, x > 0 ? x * P1 : expm1(x * P2) * P0 * P1); break;               \
    case PTI_OP_gelu:                                                                              \
        if (u->p[0] != 0)                                                                          \
            UNARY_LOOP(                                                                            \
                T, (T)0.5 * x *                                                                    \
                       ((T)1 + tanh((T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x))));  \
        else                                                                                       \
            UNARY_LOOP(T, (T)0.5 * x * ((T)1 + erf(x * (T)0.70710678118654752440)));               \
        break;                                                                                     \
    case PTI_OP_silu: UNARY_LOOP(T, x / ((T)1 + exp(-x))); break;                                  \
    case PTI_OP_mish: UNARY_LOOP(T, x *tanh(log1p(exp(x)))); break;                                \
    case PTI_OP_softplus: UNARY_LOOP(T, x *P0 > P1 ? x : log1p(exp(x * P0)) / P0); break;          \
    case PTI_OP_hardtanh:                                                                          \
    case PTI_OP_clamp: UNARY_LOOP(T, CL(x, P0, P1)); break;                                        \
    case PTI_OP_hardsigmoid: UNARY_LOOP(T, CL(x + (T)3, (T)0, (T)6) / (T)6); break;                \
    case PTI_OP_hardswish: UNARY_LOOP(T, x *CL(x + (T)3, (T)0, (T)6) / (T)6); break;               \
    case PTI_OP_erf: UNARY_LOOP(T, erf(x)); break;                                                 \
    case PTI_OP_floor: UNARY_LOOP(T, floor(x)); break;                                             \
    case PTI_OP_ceil: UNARY_LOOP(T, ceil(x)); break;                                               \
    case PTI_OP_round: UNARY_LOOP(T, nearbyint(x)); break;                                         \
    case PTI_OP_trunc: UNARY_LOOP(T, trunc(x)); break;                                             \
    case PTI_OP_reciprocal: UNARY_LOOP(T, (T)1 / x); break;                                        \
    default: break;

static void unary_f32_loop(void *ctx, char **data, const int64_t *strides, int64_t n)
{
    const unary_ctx *u = ctx;
    char *out = data[0];
    const char *in = data[1];
    int64_t so = strides[0], si = strides[1];
    if (u->avx512 && so == 4 && si == 4) {
        pti_ew_avx512_unary(u->op, (float *)out, (const float *)in, n, u->pf);
        return;
    }
    if (u->avx2 && so == 4 && si == 4) {
        pti_ew_avx2_unary(u->op, (float *)out, (const float *)in, n, u->pf);
        return;
    }
    float P0 = u->pf[0], P1 = u->pf[1], P2 = u->pf[2];
    switch (u->op) {
        FLOAT_UNARY_CASES(float, clampf_)
    }
}

static void unary_f64_loop(void *ctx, char **data, const int64_t *strides, int64_t n)
{
    const unary_ctx *u = ctx;
    char *out = data[0];
    const char *in = data[1];
    int64_t so = strides[0], si = strides[1];
    double P0 = u->p[0], P1 = u->p[1], P2 = u->p[2];
    switch (u->op) {
        FLOAT_UNARY_CASES(double, clampd_)
    }
}

/* A double bound as int64, saturating (inf and out-of-range values would be undefined). */
static int64_t bound_i64(double v)
{
    if (v != v)
        return 0;
    if (v <= -9.2233720368547758e18)
        return INT64_MIN;
    if (v >= 9.2233720368547758e18)
        return INT64_MAX;
    return (int64_t)v;
}

/* Integer and bool inputs: values through int64, wrapping arithmetic done unsigned. */
static int64_t int_unary(const unary_ctx *u, int64_t x)
{
    switch (u->op) {
    case PTI_OP_neg: return (int64_t)(0 - (uint64_t)x);
    case PTI_OP_abs: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case PTI_OP_sign: return (x > 0) - (x < 0);
    case PTI_OP_square: return (int64_t)((uint64_t)x * (uint64_t)x);
    case PTI_OP_relu: return x < 0 ? 0 : x;
    case PTI_OP_hardtanh:
    case PTI_OP_clamp: {
        /* p[2]/p[3] flag a given bound (hardtanh always has both) */
        bool has_lo = u->op == PTI_OP_hardtanh || u->p[2] != 0;
        bool has_hi = u->op == PTI_OP_hardtanh || u->p[3] != 0;
        if (has_lo && x < bound_i64(u->p[0]))
            x = bound_i64(u->p[0]);
        if (has_hi && x > bound_i64(u->p[1]))
            x = bound_i64(u->p[1]);
        return x;
    }
    default: return x; /* floor, ceil, round, trunc: integers are unchanged */
    }
}

static void unary_int_loop(void *ctx, char **data, const int64_t *strides, int64_t n)
{
    const unary_ctx *u = ctx;
    size_t es = pti_dtypes[u->dt].size;
    if (u->dt == PT_INT64 && strides[0] == 8 && strides[1] == 8) {
        int64_t *o = (int64_t *)data[0];
        const int64_t *x = (const int64_t *)data[1];
        for (int64_t i = 0; i < n; i++)
            o[i] = int_unary(u, x[i]);
        return;
    }
    (void)es;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = pti_load_i64(data[1] + i * strides[1], u->dt);
        pti_store_i64(data[0] + i * strides[0], u->dt, int_unary(u, v));
    }
}

/* logical_not, isnan, isinf: any input dtype, bool output. */
static void unary_bool_loop(void *ctx, char **data, const int64_t *strides, int64_t n)
{
    const unary_ctx *u = ctx;
    bool fl = pti_dtypes[u->dt].is_floating;
    for (int64_t i = 0; i < n; i++) {
        const char *p = data[1] + i * strides[1];
        bool r;
        if (u->op == PTI_OP_logical_not)
            r = fl ? pti_load_f64(p, u->dt) == 0 : pti_load_i64(p, u->dt) == 0;
        else if (!fl)
            r = false;
        else if (u->op == PTI_OP_isnan)
            r = isnan(pti_load_f64(p, u->dt));
        else
            r = isinf(pti_load_f64(p, u->dt));
        *(uint8_t *)(data[0] + i * strides[0]) = r;
    }
}

/* Transcendental ops are split across threads at a smaller size than cheap ones. */
static int64_t unary_grain(pti_op op)
{
    switch (op) {
    case PTI_OP_neg:
    case PTI_OP_abs:
    case PTI_OP_relu:
    case PTI_OP_square:
    case PTI_OP_clamp:
    case PTI_OP_hardtanh:
    case PTI_OP_floor:
    case PTI_OP_ceil:
    case PTI_OP_trunc:
    case PTI_OP_round: return PTI_GRAIN_ELEMENTWISE;
    default: return PTI_GRAIN_ELEMENTWISE / 4;
    }
}

static pt_status cpu_unary(const pti_call *c)
{
    const pt_tensor *ops[2] = {c->out[0], c->in[0]};
    unary_ctx u = {.op = c->op, .dt = c->in[0]->dtype};
    for (int k = 0; k < 4; k++) {
        u.p[k] = c->scalar[k];
        u.pf[k] = (float)c->scalar[k];
    }
    pti_loop_fn fn;
    if (c->op == PTI_OP_logical_not || c->op == PTI_OP_isnan || c->op == PTI_OP_isinf)
        fn = unary_bool_loop;
    else if (u.dt == PT_FLOAT32)
        fn = unary_f32_loop;
    else if (u.dt == PT_FLOAT64)
        fn = unary_f64_loop;
    else if (pti_dtypes[u.dt].is_floating)
        return pti_error(PT_ERR_UNSUPPORTED, "%s: no CPU kernel for %s (computed in float32)",
                         pti_op_names[c->op], pt_dtype_name(u.dt));
    else
        fn = unary_int_loop;
    u.avx2 = u.dt == PT_FLOAT32 && pti_ew_avx2_has_unary(c->op) && pti_cpu_has_avx2();
    u.avx512 = u.dt == PT_FLOAT32 && pti_ew_avx512_has_unary(c->op) && pti_cpu_has_avx512();
    pti_iter it;
    pti_iter_init(&it, 2, ops);
    pti_iter_for_each(&it, unary_grain(c->op), fn, &u);
    return PT_OK;
}

void pti_cpu_register_elementwise(pti_kernel *table)
{
    static const pti_op unary_ops[] = {
        PTI_OP_neg,         PTI_OP_abs,        PTI_OP_sign,     PTI_OP_exp,
        PTI_OP_expm1,       PTI_OP_log,        PTI_OP_log1p,    PTI_OP_log2,
        PTI_OP_sqrt,        PTI_OP_rsqrt,      PTI_OP_square,   PTI_OP_sin,
        PTI_OP_cos,         PTI_OP_tan,        PTI_OP_tanh,     PTI_OP_sigmoid,
        PTI_OP_relu,        PTI_OP_leaky_relu, PTI_OP_elu,      PTI_OP_gelu,
        PTI_OP_silu,        PTI_OP_mish,       PTI_OP_softplus, PTI_OP_hardtanh,
        PTI_OP_hardsigmoid, PTI_OP_hardswish,  PTI_OP_erf,      PTI_OP_floor,
        PTI_OP_ceil,        PTI_OP_round,      PTI_OP_trunc,    PTI_OP_reciprocal,
        PTI_OP_logical_not, PTI_OP_isnan,      PTI_OP_isinf,    PTI_OP_clamp,
    };
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
        table[unary_ops[i]] = cpu_unary;
    pti_cpu_register_elementwise_binary(table);
}
