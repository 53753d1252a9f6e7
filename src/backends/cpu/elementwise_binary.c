/* CPU kernels of the elementwise family, binary and ternary part: arithmetic, pow, modulus,
 * max/min, atan2/hypot, comparisons, logical ops, where, lerp, addcmul, addcdiv. Inputs arrive
 * in one compute dtype (the front-end converts); the output has that dtype or bool. float32
 * and float64 share one expression per op; float32 add/mul/div/max/min runs that are contiguous
 * or broadcast take the AVX-512 or AVX2 loops (a 2-D iteration, e.g. matrix op row, in one call per
 * block of rows), as do float32 comparisons and where on 4-byte elements; integers go through int64
 * with wrapping arithmetic. */
#include <stdatomic.h>
#include <string.h>
#include <tgmath.h>

#include "elementwise.h"

typedef struct binary_ctx {
    pti_op op;
    pt_dtype dt;   /* compute (input) dtype */
    pt_dtype ot;   /* output dtype */
    bool avx2;     /* the AVX2 float32 arithmetic loops apply */
    bool avx512;   /* ... and their AVX-512 forms (same results) */
    bool avx2_cmp; /* the AVX2 float32 comparison loop applies */
    bool avx2_bwd; /* the AVX2 float32 fused activation backward loop applies */
    double s[4];
    atomic_int div_by_zero; /* integer division by zero seen */
} binary_ctx;

/* a, b are the elements (type T); EXPR gives the output (type OT). */
#define BINARY_LOOP(T, OT, EXPR)                                                                   \
    do {                                                                                           \
        if (so == (int64_t)sizeof(OT) && sa == (int64_t)sizeof(T) && sb == (int64_t)sizeof(T)) {   \
            OT *o_ = (OT *)out;                                                                    \
            const T *a_ = (const T *)pa, *b_ = (const T *)pb;                                      \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T a = a_[i], b = b_[i];                                                            \
                o_[i] = (OT)(EXPR);                                                                \
            }                                                                                      \
        } else if (so == (int64_t)sizeof(OT) && sa == (int64_t)sizeof(T) && sb == 0) {             \
            OT *o_ = (OT *)out;                                                                    \
            const T *a_ = (const T *)pa;                                                           \
            T b = *(const T *)pb;                                                                  \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T a = a_[i];                                                                       \
                o_[i] = (OT)(EXPR);                                                                \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T a = *(const T *)(pa + i * sa), b = *(const T *)(pb + i * sb);                    \
                *(OT *)(out + i * so) = (OT)(EXPR);                                                \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Python-style modulus and floor division of floating values (as PyTorch computes them). */
static inline float remainder_f32(float a, float b)
{
    float m = fmodf(a, b);
    return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
static inline double remainder_f64(double a, double b)
{
    double m = fmod(a, b);
    return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}

static inline double floor_div_f64(double a, double b)
{
    if (b == 0)
        return a / b;
    double mod = fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0))
        div -= 1;
    if (div == 0)
        return copysign(0.0, a / b);
    double fd = floor(div);
    if (div - fd > 0.5)
        fd += 1.0;
    return fd;
}

static inline float floor_div_f32(float a, float b)
{
    if (b == 0)
        return a / b;
    float mod = fmodf(a, b);
    float div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0))
        div -= 1;
    if (div == 0)
        return copysignf(0.0f, a / b);
    float fd = floorf(div);
    if (div - fd > 0.5f)
        fd += 1.0f;
    return fd;
}

/* Fused activation gradients (g = output gradient, x = input); computed in double, which
 * costs little next to the exp/erf/tanh they call. */
static inline double silu_grad(double g, double x)
{
    double s = 1.0 / (1.0 + exp(-x));
    return g * s * (1.0 + x * (1.0 - s));
}

static inline double gelu_erf_grad(double g, double x)
{
    double cdf = 0.5 * (1.0 + erf(x * 0.70710678118654752440));
    double pdf = exp(-0.5 * x * x) * 0.39894228040143267794;
    return g * (cdf + x * pdf);
}

static inline double gelu_tanh_grad(double g, double x)
{
    const double k = 0.79788456080286535588, c = 0.044715;
    double x2 = x * x;
    double t = tanh(k * (x + c * x2 * x));
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * c * x2));
}

/* NaN-propagating max/min */
#define FMAX(a, b) ((a != a || b != b) ? a + b : (a > b ? a : b))
#define FMIN(a, b) ((a != a || b != b) ? a + b : (a < b ? a : b))

#define FLOAT_BINARY_CASES(T, FDIV, REM)                                                           \
    case PTI_OP_add: BINARY_LOOP(T, T, a + S0 * b); break;                                         \
    case PTI_OP_mul: BINARY_LOOP(T, T, a *b); break;                                               \
    case PTI_OP_div:                                                                               \
        if (c->s[0] == 1)                                                                          \
            BINARY_LOOP(T, T, trunc(a / b));                                                       \
        else if (c->s[0] == 2)                                                                     \
            BINARY_LOOP(T, T, FDIV(a, b));                                                         \
        else                                                                                       \
            BINARY_LOOP(T, T, a / b);                                                              \
        break;                                                                                     \
    case PTI_OP_pow: BINARY_LOOP(T, T, pow(a, b)); break;                                          \
    case PTI_OP_remainder: BINARY_LOOP(T, T, REM(a, b)); break;                                    \
    case PTI_OP_fmod: BINARY_LOOP(T, T, fmod(a, b)); break;                                        \
    case PTI_OP_maximum: BINARY_LOOP(T, T, FMAX(a, b)); break;                                     \
    case PTI_OP_minimum: BINARY_LOOP(T, T, FMIN(a, b)); break;                                     \
    case PTI_OP_atan2: BINARY_LOOP(T, T, atan2(a, b)); break;                                      \
    case PTI_OP_hypot: BINARY_LOOP(T, T, hypot(a, b)); break;                                      \
    case PTI_OP_threshold_backward: BINARY_LOOP(T, T, b <= S0 ? (T)0 : a); break;                  \
    case PTI_OP_tanh_backward: BINARY_LOOP(T, T, (1 - b * b) * a); break;                          \
    case PTI_OP_sigmoid_backward: BINARY_LOOP(T, T, ((1 - b) * b) * a); break;                     \
    case PTI_OP_silu_backward: BINARY_LOOP(T, T, silu_grad(a, b)); break;                          \
    case PTI_OP_gelu_backward:                                                                     \
        if (c->s[0] != 0)                                                                          \
            BINARY_LOOP(T, T, gelu_tanh_grad(a, b));                                               \
        else                                                                                       \
            BINARY_LOOP(T, T, gelu_erf_grad(a, b));                                                \
        break;                                                                                     \
    case PTI_OP_eq: BINARY_LOOP(T, uint8_t, a == b); break;                                        \
    case PTI_OP_ne: BINARY_LOOP(T, uint8_t, a != b); break;                                        \
    case PTI_OP_lt: BINARY_LOOP(T, uint8_t, a < b); break;                                         \
    case PTI_OP_le: BINARY_LOOP(T, uint8_t, a <= b); break;                                        \
    case PTI_OP_gt: BINARY_LOOP(T, uint8_t, a > b); break;                                         \
    case PTI_OP_ge: BINARY_LOOP(T, uint8_t, a >= b); break;                                        \
    case PTI_OP_logical_and: BINARY_LOOP(T, uint8_t, a != 0 && b != 0); break;                     \
    case PTI_OP_logical_or: BINARY_LOOP(T, uint8_t, a != 0 || b != 0); break;                      \
    case PTI_OP_logical_xor: BINARY_LOOP(T, uint8_t, (a != 0) != (b != 0)); break;                 \
    default: break;

static void binary_f32_loop(void *ctx, char **data, const int64_t *strides, int64_t n)
{
    binary_ctx *c = ctx;
    char *out = data[0];
    const char *pa = data[1], *pb = data[2];
    int64_t so = strides[0], sa = strides[1], sb = strides[2];
    if (c->avx2 && so == 4 && (sa == 4 || sa == 0) && (sb == 4 || sb == 0) &&
        !(sa == 0 && sb == 0)) {
        static const int64_t one_row[3];
        if (c->avx512)
            pti_ew_avx512_binary_2d(c->op, (float *)out, (const float *)pa, sa / 4,
                                    (const float *)pb, sb / 4, n, (float)c->s[0], 1, one_row);
        else
            pti_ew_avx2_binary(c->op, (float *)out, (const float *)pa, sa / 4, (const float *)pb,
                               sb / 4, n, (float)c->s[0]);
        return;
    }
    if (c->avx2_cmp && so == 1 && (sa == 4 || sa == 0) && (sb == 4 || sb == 0) &&
        !(sa == 0 && sb == 0)) {
        pti_ew_avx2_compare(c->op, (uint8_t *)out, (const float *)pa, sa / 4, (const float *)pb,
                            sb / 4, n);
        return;
    }
    if (c->avx2_bwd && so == 4 && sa == 4 && sb == 4) {
        pti_ew_avx2_act_backward(c->op, (float *)out, (const float *)pa, (const float *)pb, n,
                                 (float)c->s[0]);
        return;
    }
    float S0 = (float)c->s[0];
    switch (c->op) {
        FLOAT_BINARY_CASES(float, floor_div_f32, remainder_f32)
    }
}

static void binary_f64_loop(void *ctx, char **data, const int64_t *strides, int64_t n)
{
    binary_ctx *c = ctx;
    char *out = data[0];
    const char *pa = data[1], *pb = data[2];
    int64_t so = strides[0], sa = strides[1], sb = strides[2];
    double S0 = c->s[0];
    switch (c->op) {
        FLOAT_BINARY_CASES(double, floor_div_f64, remainder_f64)
    }
}

/* Integer a ** b with wrapping; negative exponents give 0 unless |a| == 1 (as PyTorch). */
static int64_t int_pow(int64_t a, int64_t b)
{
    if (b < 0) {
        if (a == 1)
            return 1;
        if (a == -1)
            return (b & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, base = (uint64_t)a;
    while (b) {
        if (b & 1)
            r *= base;
        base *= base;
        b >>= 1;
    }
    return (int64_t)r;
}

/* The integer result of op (arithmetic ops), or the 0/1 of a comparison. */
static int64_t int_binary(binary_ctx *c, int64_t a, int64_t b)
{
    switch (c->op) {
    case PTI_OP_add: return (int64_t)((uint64_t)a + (uint64_t)(int64_t)c->s[0] * (uint64_t)b);
    case PTI_OP_mul: return (int64_t)((uint64_t)a * (uint64_t)b);
    case PTI_OP_div: {
        if (b == 0) {
            atomic_store_explicit(&c->div_by_zero, 1, memory_order_relaxed);
            return 0;
        }
        if (b == -1)
            return (int64_t)(0 - (uint64_t)a);
        int64_t q = a / b;
        if (c->s[0] == 2 && (a % b != 0) && ((a < 0) != (b < 0)))
            q -= 1;
        return q;
    }
    case PTI_OP_remainder:
    case PTI_OP_fmod: {
        if (b == 0) {
            atomic_store_explicit(&c->div_by_zero, 1, memory_order_relaxed);
            return 0;
        }
        if (b == -1)
            return 0;
        int64_t r = a % b;
        if (c->op == PTI_OP_remainder && r != 0 && ((r < 0) != (b < 0)))
            r += b;
        return r;
    }
    case PTI_OP_pow: return int_pow(a, b);
    case PTI_OP_maximum: return a > b ? a : b;
    case PTI_OP_minimum: return a < b ? a : b;
    case PTI_OP_eq: return a == b;
    case PTI_OP_ne: return a != b;
    case PTI_OP_lt: return a < b;
    case PTI_OP_le: return a <= b;
    case PTI_OP_gt: return a > b;
    case PTI_OP_ge: return a >= b;
    case PTI_OP_logical_and: return a != 0 && b != 0;
    case PTI_OP_logical_or: return a != 0 || b != 0;
    case PTI_OP_logical_xor: return (a != 0) != (b != 0);
    default: return 0;
    }
}

static void binary_int_loop(void *ctx, char **data, const int64_t *strides, int64_t n)
{
    binary_ctx *c = ctx;
    if (c->dt == PT_INT64 && c->ot == PT_INT64 && strides[0] == 8 && strides[1] == 8 &&
        strides[2] == 8 && c->op == PTI_OP_add) {
        int64_t *o = (int64_t *)data[0];
        const int64_t *a = (const int64_t *)data[1], *b = (const int64_t *)data[2];
        uint64_t alpha = (uint64_t)(int64_t)c->s[0];
        for (int64_t i = 0; i < n; i++)
            o[i] = (int64_t)((uint64_t)a[i] + alpha * (uint64_t)b[i]);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t a = pti_load_i64(data[1] + i * strides[1], c->dt);
        int64_t b = pti_load_i64(data[2] + i * strides[2], c->dt);
        pti_store_i64(data[0] + i * strides[0], c->ot, int_binary(c, a, b));
    }
}

/* A 2-D float32 iteration whose rows are contiguous (or a broadcast value) in every operand,
 * e.g. a matrix and a row vector: the rows go to the AVX2 loop in blocks, split across threads,
 * instead of one kernel call per row. */
typedef struct rows_job {
    const pti_iter *it;
    const binary_ctx *c;
} rows_job;

static void binary_rows(void *arg, int64_t begin, int64_t end)
{
    const rows_job *j = arg;
    const pti_iter *it = j->it;
    int64_t rs[3] = {it->strides[1][0], it->strides[1][1], it->strides[1][2]};
    void (*loop)(pti_op, float *, const float *, int64_t, const float *, int64_t, int64_t, float,
                 int64_t, const int64_t *) =
        j->c->avx512 ? pti_ew_avx512_binary_2d : pti_ew_avx2_binary_2d;
    loop(j->c->op, (float *)(it->data[0] + begin * rs[0]),
         (const float *)(it->data[1] + begin * rs[1]), it->strides[0][1] / 4,
         (const float *)(it->data[2] + begin * rs[2]), it->strides[0][2] / 4, it->shape[0],
         (float)j->c->s[0], end - begin, rs);
}

static bool binary_2d_avx2(const pti_iter *it, const binary_ctx *c)
{
    const int64_t *s = it->strides[0];
    if (it->ndim != 2 || s[0] != 4 || (s[1] != 4 && s[1] != 0) || (s[2] != 4 && s[2] != 0) ||
        (s[1] == 0 && s[2] == 0))
        return false;
    rows_job j = {it, c};
    int64_t grain = PTI_GRAIN_ELEMENTWISE / it->shape[0];
    pti_parallel_for(it->shape[1], grain > 0 ? grain : 1, binary_rows, &j);
    return true;
}

static pt_status cpu_binary(const pti_call *call)
{
    const pt_tensor *ops[3] = {call->out[0], call->in[0], call->in[1]};
    binary_ctx c = {.op = call->op, .dt = call->in[0]->dtype, .ot = call->out[0]->dtype};
    memcpy(c.s, call->scalar, sizeof c.s);
    atomic_init(&c.div_by_zero, 0);
    pti_loop_fn fn;
    if (c.dt == PT_FLOAT32)
        fn = binary_f32_loop;
    else if (c.dt == PT_FLOAT64)
        fn = binary_f64_loop;
    else if (pti_dtypes[c.dt].is_floating)
        return pti_error(PT_ERR_UNSUPPORTED, "%s: no CPU kernel for %s (computed in float32)",
                         pti_op_names[call->op], pt_dtype_name(c.dt));
    else
        fn = binary_int_loop;
    c.avx2 = c.dt == PT_FLOAT32 && pti_ew_avx2_has_binary(call->op) &&
             !(call->op == PTI_OP_div && c.s[0] != 0) && pti_cpu_has_avx2();
    c.avx512 = c.avx2 && pti_ew_avx512_has_binary(call->op) && pti_cpu_has_avx512();
    c.avx2_cmp = c.dt == PT_FLOAT32 && pti_ew_avx2_has_compare(call->op) && pti_cpu_has_avx2();
    c.avx2_bwd = c.dt == PT_FLOAT32 && pti_ew_avx2_has_act_backward(call->op) && pti_cpu_has_avx2();
    pti_iter it;
    pti_iter_init(&it, 3, ops);
    if (c.avx2 && binary_2d_avx2(&it, &c))
        return PT_OK;
    int64_t grain =
        (call->op == PTI_OP_pow || call->op == PTI_OP_atan2 || call->op == PTI_OP_hypot ||
         call->op == PTI_OP_gelu_backward || call->op == PTI_OP_silu_backward)
            ? PTI_GRAIN_ELEMENTWISE / 4
            : PTI_GRAIN_ELEMENTWISE;
    pti_iter_for_each(&it, grain, fn, &c);
    if (atomic_load(&c.div_by_zero))
        return pti_error(PT_ERR_INVALID_ARG, "%s: integer division by zero (ZeroDivisionError)",
                         pti_op_names[call->op]);
    return PT_OK;
}

/* ---- where: selects bytes, so it serves every dtype ----------------------------------------- */

/* Contiguous runs of 4- and 8-byte elements: a select loop the compiler vectorizes. */
#define WHERE_CONTIG(T)                                                                            \
    do {                                                                                           \
        T *o_ = (T *)data[0];                                                                      \
        const uint8_t *c_ = (const uint8_t *)data[1];                                              \
        const T *a_ = (const T *)data[2], *b_ = (const T *)data[3];                                \
        for (int64_t i = 0; i < n; i++)                                                            \
            o_[i] = c_[i] ? a_[i] : b_[i];                                                         \
    } while (0)

typedef struct where_ctx {
    size_t es; /* element size */
    bool avx2;
} where_ctx;

static void where_loop(void *ctx, char **data, const int64_t *s, int64_t n)
{
    const where_ctx *w = ctx;
    size_t es = w->es;
    if (s[1] == 1 && s[0] == (int64_t)es && s[2] == (int64_t)es && s[3] == (int64_t)es) {
        if (es == 4 && w->avx2) {
            pti_ew_avx2_where32((uint32_t *)data[0], (const uint8_t *)data[1],
                                (const uint32_t *)data[2], (const uint32_t *)data[3], n);
            return;
        }
        if (es == 4) {
            WHERE_CONTIG(uint32_t);
            return;
        }
        if (es == 8) {
            WHERE_CONTIG(uint64_t);
            return;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        bool cond = *(const uint8_t *)(data[1] + i * s[1]) != 0;
        const char *src = cond ? data[2] + i * s[2] : data[3] + i * s[3];
        char *dst = data[0] + i * s[0];
        switch (es) {
        case 4: memcpy(dst, src, 4); break;
        case 8: memcpy(dst, src, 8); break;
        default: memcpy(dst, src, es); break;
        }
    }
}

static pt_status cpu_where(const pti_call *c)
{
    const pt_tensor *ops[4] = {c->out[0], c->in[0], c->in[1], c->in[2]};
    where_ctx w = {pti_dtypes[c->out[0]->dtype].size, pti_cpu_has_avx2()};
    pti_iter it;
    pti_iter_init(&it, 4, ops);
    pti_iter_for_each(&it, PTI_GRAIN_ELEMENTWISE, where_loop, &w);
    return PT_OK;
}

/* ---- lerp, addcmul, addcdiv: out = f(x, y, z) ---------------------------------------------- */

typedef struct ternary_ctx {
    pti_op op;
    pt_dtype dt;
    double value;
} ternary_ctx;

#define TERNARY_LOOP(T, EXPR)                                                                      \
    do {                                                                                           \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = *(const T *)(d[1] + i * s[1]), y = *(const T *)(d[2] + i * s[2]);                \
            T z = *(const T *)(d[3] + i * s[3]);                                                   \
            *(T *)(d[0] + i * s[0]) = (EXPR);                                                      \
        }                                                                                          \
    } while (0)

/* lerp as PyTorch writes it: exact at both ends. */
#define LERP(T, x, y, w) (fabs(w) < (T)0.5 ? x + w * (y - x) : y - (y - x) * ((T)1 - w))

static void ternary_loop(void *ctx, char **d, const int64_t *s, int64_t n)
{
    const ternary_ctx *c = ctx;
    if (c->dt == PT_FLOAT32) {
        float v = (float)c->value;
        switch (c->op) {
        case PTI_OP_lerp: TERNARY_LOOP(float, LERP(float, x, y, z)); break;
        case PTI_OP_addcmul: TERNARY_LOOP(float, x + v * y * z); break;
        case PTI_OP_addcdiv: TERNARY_LOOP(float, x + v * y / z); break;
        default: break;
        }
    } else if (c->dt == PT_FLOAT64) {
        double v = c->value;
        switch (c->op) {
        case PTI_OP_lerp: TERNARY_LOOP(double, LERP(double, x, y, z)); break;
        case PTI_OP_addcmul: TERNARY_LOOP(double, x + v * y * z); break;
        case PTI_OP_addcdiv: TERNARY_LOOP(double, x + v * y / z); break;
        default: break;
        }
    } else { /* integer addcmul */
        uint64_t v = (uint64_t)(int64_t)c->value;
        for (int64_t i = 0; i < n; i++) {
            uint64_t x = (uint64_t)pti_load_i64(d[1] + i * s[1], c->dt);
            uint64_t y = (uint64_t)pti_load_i64(d[2] + i * s[2], c->dt);
            uint64_t z = (uint64_t)pti_load_i64(d[3] + i * s[3], c->dt);
            pti_store_i64(d[0] + i * s[0], c->dt, (int64_t)(x + v * y * z));
        }
    }
}

static pt_status cpu_ternary(const pti_call *c)
{
    const pt_tensor *ops[4] = {c->out[0], c->in[0], c->in[1], c->in[2]};
    ternary_ctx t = {c->op, c->out[0]->dtype, c->scalar[0]};
    if (pti_dtypes[t.dt].is_floating && t.dt != PT_FLOAT32 && t.dt != PT_FLOAT64)
        return pti_error(PT_ERR_UNSUPPORTED, "%s: no CPU kernel for %s (computed in float32)",
                         pti_op_names[c->op], pt_dtype_name(t.dt));
    pti_iter it;
    pti_iter_init(&it, 4, ops);
    pti_iter_for_each(&it, PTI_GRAIN_ELEMENTWISE / 2, ternary_loop, &t);
    return PT_OK;
}

void pti_cpu_register_elementwise_binary(pti_kernel *table)
{
    static const pti_op binary_ops[] = {
        PTI_OP_add,
        PTI_OP_mul,
        PTI_OP_div,
        PTI_OP_pow,
        PTI_OP_remainder,
        PTI_OP_fmod,
        PTI_OP_maximum,
        PTI_OP_minimum,
        PTI_OP_atan2,
        PTI_OP_hypot,
        PTI_OP_eq,
        PTI_OP_ne,
        PTI_OP_lt,
        PTI_OP_le,
        PTI_OP_gt,
        PTI_OP_ge,
        PTI_OP_logical_and,
        PTI_OP_logical_or,
        PTI_OP_logical_xor,
        /* fused activation backwards */
        PTI_OP_threshold_backward,
        PTI_OP_tanh_backward,
        PTI_OP_sigmoid_backward,
        PTI_OP_silu_backward,
        PTI_OP_gelu_backward,
    };
    for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
        table[binary_ops[i]] = cpu_binary;
    table[PTI_OP_where] = cpu_where;
    table[PTI_OP_lerp] = cpu_ternary;
    table[PTI_OP_addcmul] = cpu_ternary;
    table[PTI_OP_addcdiv] = cpu_ternary;
}
