/* Autograd for the elementwise family: recording of unary, binary and ternary ops and their
 * backward formulas (written with public ops, so create_graph gives higher derivatives), plus
 * the in-place rule (compute out of place, write back under no-grad, rebase).
 *
 * A node keeps: i[0] the op (pti_op) or ternary kind, i[1..3] the saved slot of input k and
 * i[4] the saved slot of the output (-1 when not saved); d[0..3] the kernel parameters, d[4]
 * and d[5] the numbers of `_scalar` forms; ctx the shapes and dtypes of the inputs, so each
 * gradient is summed over broadcast dims and cast back to its input's dtype. */
#include <string.h>
#include <math.h>
#include <stdlib.h>

#include "../graph/node.h"
#include "elementwise_internal.h"

#define SQRT_2_OVER_PI 0.79788456080286535587989211986876
#define TWO_OVER_SQRT_PI 1.1283791670955125738961589031215
#define INV_SQRT_2PI 0.39894228040143267793994605993438
#define GELU_C 0.044715

typedef struct ew_meta {
    int ndim[3];
    int64_t shape[3][PT_MAX_DIMS];
    pt_dtype dtype[3];
} ew_meta;

/* Temporaries of one formula, released together. */
#define TMP_CAP 40
typedef struct tmp_list {
    pt_tensor *t[TMP_CAP];
    int n;
} tmp_list;

static pt_tensor *T(tmp_list *l, pt_tensor *t)
{
    if (t) {
        if (l->n < TMP_CAP)
            l->t[l->n++] = t;
        else
            pti_error(PT_ERR_RUNTIME, "elementwise backward: too many temporaries");
    }
    return t;
}

static void tmp_free(tmp_list *l)
{
    for (int k = 0; k < l->n; k++)
        pt_release(l->t[k]);
    l->n = 0;
}

static pt_device dev_of(const pt_tensor *t)
{
    return t->storage->device;
}

static pt_tensor *num(tmp_list *l, double v, const pt_tensor *like)
{
    return T(l, pt_scalar_tensor(v, like->dtype, dev_of(like)));
}

/* g where mask, 0 elsewhere (no NaN leaks from g where masked out). */
static pt_tensor *keep_where(tmp_list *l, const pt_tensor *mask, const pt_tensor *g)
{
    if (!mask || !g)
        return NULL;
    return T(l, pt_where(mask, g, num(l, 0, g)));
}

static pt_tensor *drop_where(tmp_list *l, const pt_tensor *mask, const pt_tensor *g)
{
    if (!mask || !g)
        return NULL;
    return T(l, pt_where(mask, num(l, 0, g), g));
}

/* Short names for the public ops the formulas use; every result goes on the temp list. */
#define MUL(a, b) T(l, pt_mul((a), (b)))
#define DIV(a, b) T(l, pt_div((a), (b)))
#define ADD(a, b) T(l, pt_add((a), (b)))
#define SUB(a, b) T(l, pt_sub((a), (b)))
#define MULS(a, v) T(l, pt_mul_scalar((a), (v)))
#define ADDS(a, v) T(l, pt_add_scalar((a), (v)))
#define RSUB(a, v) T(l, pt_rsub_scalar((a), (v)))

/* The fused one-pass backward ops serve when no graph is built (they record nothing) and the
 * tensors are on the CPU (the only backend with their kernels). */
static bool fusable(const pt_tensor *g, const pt_tensor *s)
{
    const pt_tensor *ts[2] = {g, s};
    return s && dev_of(g).type == PT_DEVICE_CPU && dev_of(s).type == PT_DEVICE_CPU &&
           !pti_grad_recording(2, ts);
}

/* Hands gradient g of input k to grad_in[k]: summed to the input's shape, in its dtype. */
static pt_status put(pti_node *n, int k, pt_tensor *g, tmp_list *l, pt_tensor **grad_in)
{
    if (!g)
        return pt_last_status();
    const ew_meta *m = n->ctx;
    pt_tensor *s = g;
    if (m) {
        s = T(l, pti_sum_to(g, m->ndim[k], m->shape[k]));
        if (s && s->dtype != m->dtype[k])
            s = T(l, pt_to_dtype(s, m->dtype[k]));
    }
    if (!s)
        return pt_last_status();
    grad_in[k] = pt_retain(s);
    return PT_OK;
}

static pt_tensor *saved(pti_node *n, int which, tmp_list *l)
{
    int64_t slot = n->i[1 + which];
    if (slot < 0)
        return pti_error_null(PT_ERR_RUNTIME, "%s backward: a needed tensor was not saved",
                              n->name);
    return T(l, pti_node_saved(n, (int)slot));
}

/* Records a node over nin inputs; save_mask bit k saves input k, bit 3 the output. */
static pt_tensor *record(const char *name, pti_backward_fn fn, int64_t kind, int nin,
                         const pt_tensor *const *ins, unsigned save_mask, const double *d, int nd,
                         bool meta, pt_tensor *out)
{
    pti_node *n = pti_node_new(name, fn, nin, ins);
    if (!n) {
        pt_release(out);
        return NULL;
    }
    n->i[0] = kind;
    for (int k = 1; k <= 4; k++)
        n->i[k] = -1;
    for (int k = 0; k < nd; k++)
        n->d[k] = d[k];
    if (meta) {
        ew_meta *m = pti_scratch_alloc(sizeof *m);
        if (!m) {
            pti_node_release(n);
            pt_release(out);
            return pti_error_null(PT_ERR_OOM, "%s: out of memory recording autograd", name);
        }
        for (int k = 0; k < nin; k++) {
            if (!ins[k])
                continue;
            m->ndim[k] = ins[k]->ndim;
            for (int j = 0; j < ins[k]->ndim; j++)
                m->shape[k][j] = ins[k]->shape[j];
            m->dtype[k] = ins[k]->dtype;
        }
        n->ctx = m;
        n->ctx_free = pti_scratch_free;
    }
    for (int k = 0; k < nin; k++) {
        if (!(save_mask & (1u << k)) || !ins[k])
            continue;
        int slot = pti_node_save(n, ins[k]);
        if (slot < 0) {
            pti_node_release(n);
            pt_release(out);
            return NULL;
        }
        n->i[1 + k] = slot;
    }
    if (pti_node_finish(n, 1, &out) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    if (save_mask & 8u) {
        int slot = pti_node_save_output(n, out);
        if (slot < 0) {
            pt_release(out);
            return NULL;
        }
        n->i[4] = slot;
    }
    return out;
}

/* ---- unary ----------------------------------------------------------------------------------- */

enum { SAVE_X = 1u, SAVE_Y = 8u };

static unsigned unary_saves(pti_op op)
{
    switch (op) {
    case PTI_OP_neg:
    case PTI_OP_sign:
    case PTI_OP_floor:
    case PTI_OP_ceil:
    case PTI_OP_round:
    case PTI_OP_trunc: return 0;
    case PTI_OP_exp:
    case PTI_OP_expm1:
    case PTI_OP_sqrt:
    case PTI_OP_rsqrt:
    case PTI_OP_tan:
    case PTI_OP_tanh:
    case PTI_OP_sigmoid:
    case PTI_OP_reciprocal:
    case PTI_OP_relu: return SAVE_Y;
    default: return SAVE_X;
    }
}

/* d/dx of gelu: the erf form Phi(x) + x phi(x), or the tanh form's derivative. */
static pt_tensor *gelu_grad(tmp_list *l, const pt_tensor *g, const pt_tensor *x, bool tanh_form)
{
    if (!tanh_form) {
        pt_tensor *cdf = MULS(ADDS(T(l, pt_erf(MULS(x, M_SQRT1_2))), 1.0), 0.5);
        pt_tensor *pdf = MULS(T(l, pt_exp(MULS(T(l, pt_square(x)), -0.5))), INV_SQRT_2PI);
        return MUL(g, ADD(cdf, MUL(x, pdf)));
    }
    pt_tensor *x2 = T(l, pt_square(x));
    pt_tensor *inner = MULS(MUL(x, ADDS(MULS(x2, GELU_C), 1.0)), SQRT_2_OVER_PI);
    pt_tensor *t = T(l, pt_tanh(inner));
    pt_tensor *left = MULS(ADDS(t, 1.0), 0.5);
    pt_tensor *dinner = MULS(ADDS(MULS(x2, 3 * GELU_C), 1.0), SQRT_2_OVER_PI);
    pt_tensor *right = MUL(MULS(MUL(x, RSUB(T(l, pt_square(t)), 1.0)), 0.5), dinner);
    return MUL(g, ADD(left, right));
}

static pt_tensor *unary_formula(pti_node *n, tmp_list *l, const pt_tensor *g)
{
    pti_op op = (pti_op)n->i[0];
    const double *p = n->d;
    pt_tensor *x = n->i[1] >= 0 ? saved(n, 0, l) : NULL;
    pt_tensor *y = n->i[4] >= 0 ? T(l, pti_node_saved(n, (int)n->i[4])) : NULL;
    if ((n->i[1] >= 0 && !x) || (n->i[4] >= 0 && !y))
        return NULL;
    switch (op) {
    case PTI_OP_neg: return T(l, pt_neg(g));
    case PTI_OP_sign:
    case PTI_OP_floor:
    case PTI_OP_ceil:
    case PTI_OP_round:
    case PTI_OP_trunc: return T(l, pt_zeros_like(g));
    case PTI_OP_abs: return MUL(g, T(l, pt_sign(x)));
    case PTI_OP_exp: return MUL(g, y);
    case PTI_OP_expm1: return MUL(g, ADDS(y, 1.0));
    case PTI_OP_log: return DIV(g, x);
    case PTI_OP_log1p: return DIV(g, ADDS(x, 1.0));
    case PTI_OP_log2: return DIV(g, MULS(x, M_LN2));
    case PTI_OP_sqrt: return DIV(g, MULS(y, 2.0));
    case PTI_OP_rsqrt: return MUL(MULS(g, -0.5), T(l, pt_pow_scalar(y, 3.0)));
    case PTI_OP_square: return MUL(g, MULS(x, 2.0));
    case PTI_OP_sin: return MUL(g, T(l, pt_cos(x)));
    case PTI_OP_cos: return MUL(g, T(l, pt_neg(T(l, pt_sin(x)))));
    case PTI_OP_tan: return MUL(g, ADDS(T(l, pt_square(y)), 1.0));
    case PTI_OP_tanh:
        if (fusable(g, y))
            return T(l, pt_tanh_backward(g, y));
        return MUL(g, RSUB(T(l, pt_square(y)), 1.0));
    case PTI_OP_sigmoid:
        if (fusable(g, y))
            return T(l, pt_sigmoid_backward(g, y));
        return MUL(g, MUL(RSUB(y, 1.0), y));
    case PTI_OP_erf:
        return MUL(g, MULS(T(l, pt_exp(T(l, pt_neg(T(l, pt_square(x)))))), TWO_OVER_SQRT_PI));
    case PTI_OP_reciprocal: return MUL(T(l, pt_neg(g)), T(l, pt_square(y)));
    case PTI_OP_relu: /* PyTorch's threshold_backward on the output: y <= 0 gives 0 */
        if (fusable(g, y))
            return T(l, pt_threshold_backward(g, y, 0));
        return drop_where(l, T(l, pt_le_scalar(y, 0)), g);
    case PTI_OP_hardtanh: /* relu6 and hardtanh: zero at and beyond the bounds */
        return keep_where(
            l, T(l, pt_logical_and(T(l, pt_gt_scalar(x, p[0])), T(l, pt_lt_scalar(x, p[1])))), g);
    case PTI_OP_clamp:
        return keep_where(
            l, T(l, pt_logical_and(T(l, pt_ge_scalar(x, p[0])), T(l, pt_le_scalar(x, p[1])))), g);
    case PTI_OP_leaky_relu: return T(l, pt_where(T(l, pt_gt_scalar(x, 0)), g, MULS(g, p[0])));
    case PTI_OP_elu: { /* alpha p[0], scale p[1], input_scale p[2] */
        pt_tensor *neg = MULS(MUL(g, T(l, pt_exp(MULS(x, p[2])))), p[0] * p[1] * p[2]);
        return T(l, pt_where(T(l, pt_gt_scalar(x, 0)), MULS(g, p[1]), neg));
    }
    case PTI_OP_gelu:
        if (fusable(g, x))
            return T(l, pt_gelu_backward(g, x,
                                         &(pt_gelu_opts){p[0] != 0 ? PT_GELU_TANH : PT_GELU_NONE}));
        return gelu_grad(l, g, x, p[0] != 0);
    case PTI_OP_silu: {
        if (fusable(g, x))
            return T(l, pt_silu_backward(g, x));
        pt_tensor *s = T(l, pt_sigmoid(x));
        return MUL(g, MUL(s, ADDS(MUL(x, RSUB(s, 1.0)), 1.0)));
    }
    case PTI_OP_mish: {
        pt_tensor *t = T(l, pt_tanh(T(l, pt_softplus(x, 1.0, 20.0))));
        pt_tensor *d = MUL(MUL(x, T(l, pt_sigmoid(x))), RSUB(T(l, pt_square(t)), 1.0));
        return MUL(g, ADD(t, d));
    }
    case PTI_OP_softplus: { /* beta p[0], threshold p[1] */
        pt_tensor *bx = MULS(x, p[0]);
        pt_tensor *inner = MUL(g, T(l, pt_sigmoid(bx)));
        return T(l, pt_where(T(l, pt_gt_scalar(bx, p[1])), g, inner));
    }
    case PTI_OP_hardsigmoid:
        return keep_where(l,
                          T(l, pt_logical_and(T(l, pt_gt_scalar(x, -3)), T(l, pt_lt_scalar(x, 3)))),
                          MULS(g, 1.0 / 6.0));
    case PTI_OP_hardswish: {
        pt_tensor *mid =
            T(l, pt_where(T(l, pt_le_scalar(x, 3)), MUL(g, ADDS(MULS(x, 1.0 / 3.0), 0.5)), g));
        return drop_where(l, T(l, pt_lt_scalar(x, -3)), mid);
    }
    default:
        return pti_error_null(PT_ERR_RUNTIME,
                              "%s: internal error: the node has no backward formula for this op",
                              n->name);
    }
}

static pt_status unary_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    if (!pti_node_needs_grad(n, 0))
        return PT_OK;
    tmp_list l = {.n = 0};
    pt_status st = put(n, 0, unary_formula(n, &l, grad_out[0]), &l, grad_in);
    tmp_free(&l);
    return st;
}

pt_tensor *pti_ew_record_unary(const char *name, pti_op op, const pt_tensor *in, const double *p,
                               pt_tensor *out)
{
    double d[4] = {0, 0, 0, 0};
    for (int k = 0; p && k < 4; k++)
        d[k] = p[k];
    /* relu on a float16 input saves the output in its own dtype: the formula is dtype-free */
    return record(name + 3, unary_backward, op, 1, &in, unary_saves(op), d, 4, false, out);
}

/* ---- binary ---------------------------------------------------------------------------------- */

/* maximum/minimum: ties split the gradient in half (PyTorch). */
static pt_tensor *maxmin_grad(tmp_list *l, const pt_tensor *g, const pt_tensor *a,
                              const pt_tensor *b, bool for_a, bool is_max)
{
    pt_tensor *split = T(l, pt_where(T(l, pt_eq(a, b)), MULS(g, 0.5), g));
    /* a's gradient is dropped where a loses, b's where b loses */
    bool a_loses_when_lt = is_max;
    pt_tensor *lose = (for_a == a_loses_when_lt) ? T(l, pt_lt(a, b)) : T(l, pt_gt(a, b));
    return drop_where(l, lose, split);
}

/* Gradients of the binary op for input k (0 = a, 1 = b). */
static pt_tensor *binary_formula(pti_node *n, tmp_list *l, const pt_tensor *g, int k)
{
    pti_op op = (pti_op)n->i[0];
    double s0 = n->d[0];
    pt_tensor *a = n->i[1] >= 0 ? saved(n, 0, l) : NULL;
    pt_tensor *b = n->i[2] >= 0 ? saved(n, 1, l) : NULL;
    pt_tensor *y = n->i[4] >= 0 ? T(l, pti_node_saved(n, (int)n->i[4])) : NULL;
    if ((n->i[1] >= 0 && !a) || (n->i[2] >= 0 && !b) || (n->i[4] >= 0 && !y))
        return NULL;
    double av = n->d[4], bv = n->d[5];
    bool a_num = n->i[5] & 1, b_num = n->i[5] & 2;
    switch (op) {
    case PTI_OP_add: return k == 0 ? T(l, pt_retain((pt_tensor *)g)) : MULS(g, s0);
    case PTI_OP_mul:
        if (k == 0)
            return b_num ? MULS(g, bv) : MUL(g, b);
        return a_num ? MULS(g, av) : MUL(g, a);
    case PTI_OP_div:
        if (s0 != 0) /* rounding modes: piecewise constant */
            return T(l, pt_zeros_like(g));
        if (k == 0)
            return b_num ? T(l, pt_div_scalar(g, bv)) : DIV(g, b);
        return T(l, pt_neg(DIV(MUL(g, a), MUL(b, b))));
    case PTI_OP_pow:
        if (k == 0) {
            if (b_num) {
                if (bv == 0)
                    return T(l, pt_zeros_like(g));
                return MUL(g, MULS(T(l, pt_pow_scalar(a, bv - 1.0)), bv));
            }
            pt_tensor *r = MUL(g, MUL(b, T(l, pt_pow(a, ADDS(b, -1.0)))));
            return keep_where(l, T(l, pt_ne_scalar(b, 0)), r);
        }
        if (a_num) {
            pt_tensor *r = MUL(g, MULS(y, log(av)));
            /* 0 ** e for e >= 0 has no exponent gradient (PyTorch masks it) */
            return av == 0 ? drop_where(l, T(l, pt_ge_scalar(b, 0)), r) : r;
        }
        {
            pt_tensor *r = MUL(g, MUL(y, T(l, pt_log(a))));
            pt_tensor *zero_base =
                T(l, pt_logical_and(T(l, pt_eq_scalar(a, 0)), T(l, pt_ge_scalar(b, 0))));
            return drop_where(l, zero_base, r);
        }
    case PTI_OP_remainder:
    case PTI_OP_fmod:
        if (k == 0)
            return T(l, pt_retain((pt_tensor *)g));
        return MUL(
            T(l, pt_neg(g)),
            T(l, pt_div_rounding(a, b, op == PTI_OP_fmod ? PT_ROUND_TRUNC : PT_ROUND_FLOOR)));
    case PTI_OP_maximum:
    case PTI_OP_minimum: return maxmin_grad(l, g, a, b, k == 0, op == PTI_OP_maximum);
    case PTI_OP_atan2: {
        pt_tensor *den = ADD(MUL(a, a), MUL(b, b));
        return k == 0 ? MUL(g, DIV(b, den)) : MUL(g, DIV(T(l, pt_neg(a)), den));
    }
    case PTI_OP_hypot: return MUL(g, DIV(k == 0 ? a : b, y));
    default:
        return pti_error_null(PT_ERR_RUNTIME,
                              "%s: internal error: the node has no backward formula for this op",
                              n->name);
    }
}

static pt_status binary_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_status st = PT_OK;
    for (int k = 0; k < 2 && st == PT_OK; k++) {
        if (!pti_node_needs_grad(n, k))
            continue;
        tmp_list l = {.n = 0};
        st = put(n, k, binary_formula(n, &l, grad_out[0], k), &l, grad_in);
        tmp_free(&l);
    }
    return st;
}

/* Which tensors each binary formula reads: bit 0 a, bit 1 b, bit 3 the output. */
static unsigned binary_saves(pti_op op, double s0, double av, bool need_a, bool need_b, bool a_num,
                             bool b_num)
{
    switch (op) {
    case PTI_OP_mul: return (need_b ? 1u : 0u) | (need_a ? 2u : 0u);
    case PTI_OP_div:
        if (s0 != 0)
            return 0;
        return (need_b ? 1u : 0u) | ((need_a || need_b) ? 2u : 0u);
    case PTI_OP_pow:
        if (b_num)
            return 1u;
        if (a_num)
            return av == 0 ? 8u | 2u : 8u;
        return 1u | 2u | (need_b ? 8u : 0u);
    case PTI_OP_remainder:
    case PTI_OP_fmod: return need_b ? 3u : 0u;
    case PTI_OP_maximum:
    case PTI_OP_minimum:
    case PTI_OP_atan2: return 3u;
    case PTI_OP_hypot: return 3u | 8u;
    default: return 0;
    }
}

pt_tensor *pti_ew_record_binary(const char *name, pti_op op, const pt_tensor *a, double av,
                                const pt_tensor *b, double bv, double s0, pt_tensor *out)
{
    const pt_tensor *ins[2] = {a, b};
    bool need_a = a && a->requires_grad, need_b = b && b->requires_grad;
    unsigned saves = binary_saves(op, s0, av, need_a, need_b, !a, !b);
    double d[6] = {s0, 0, 0, 0, av, bv};
    /* name + 3 drops "pt_"; node->i[5] records which operands are numbers */
    pt_tensor *r = record(name + 3, binary_backward, op, 2, ins, saves, d, 6, true, out);
    if (r)
        ((pti_node *)r->grad_fn)->i[5] = (a ? 0 : 1) | (b ? 0 : 2);
    return r;
}

/* ---- ternary --------------------------------------------------------------------------------- */

static pt_tensor *clamp_t_formula(tmp_list *l, const pt_tensor *g, const pt_tensor *x,
                                  const pt_tensor *lo, const pt_tensor *hi, int k)
{
    if (lo && hi) {
        if (k == 0)
            return keep_where(l, T(l, pt_logical_and(T(l, pt_ge(x, lo)), T(l, pt_le(x, hi)))), g);
        if (k == 1)
            return keep_where(l, T(l, pt_logical_and(T(l, pt_lt(x, lo)), T(l, pt_lt(lo, hi)))), g);
        return keep_where(l, T(l, pt_logical_or(T(l, pt_gt(x, hi)), T(l, pt_lt(hi, lo)))), g);
    }
    if (lo)
        return keep_where(l, k == 0 ? T(l, pt_ge(x, lo)) : T(l, pt_lt(x, lo)), g);
    return keep_where(l, k == 0 ? T(l, pt_le(x, hi)) : T(l, pt_gt(x, hi)), g);
}

static pt_tensor *ternary_formula(pti_node *n, tmp_list *l, const pt_tensor *g, int k)
{
    pt_tensor *in[3] = {NULL, NULL, NULL};
    for (int j = 0; j < 3; j++)
        if (n->i[1 + j] >= 0 && !(in[j] = saved(n, j, l)))
            return NULL;
    double v = n->d[0];
    switch ((pti_ew_ternary)n->i[0]) {
    case PTI_EW_WHERE: return k == 1 ? keep_where(l, in[0], g) : drop_where(l, in[0], g);
    case PTI_EW_LERP:
        if (!in[2] && n->i[5]) { /* number weight */
            return MULS(g, k == 0 ? 1.0 - v : v);
        }
        if (k == 0)
            return MUL(g, RSUB(in[2], 1.0));
        if (k == 1)
            return MUL(g, in[2]);
        return MUL(g, SUB(in[1], in[0]));
    case PTI_EW_ADDCMUL:
        if (k == 0)
            return T(l, pt_retain((pt_tensor *)g));
        return MULS(MUL(g, in[k == 1 ? 2 : 1]), v);
    case PTI_EW_ADDCDIV:
        if (k == 0)
            return T(l, pt_retain((pt_tensor *)g));
        if (k == 1)
            return MULS(DIV(g, in[2]), v);
        return MULS(DIV(MUL(g, in[1]), MUL(in[2], in[2])), -v);
    case PTI_EW_CLAMP: return clamp_t_formula(l, g, in[0], in[1], in[2], k);
    }
    return pti_error_null(PT_ERR_RUNTIME,
                          "%s: internal error: the node has no backward formula for this op",
                          n->name);
}

static pt_status ternary_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_status st = PT_OK;
    for (int k = 0; k < 3 && st == PT_OK; k++) {
        if (!pti_node_needs_grad(n, k))
            continue;
        tmp_list l = {.n = 0};
        st = put(n, k, ternary_formula(n, &l, grad_out[0], k), &l, grad_in);
        tmp_free(&l);
    }
    return st;
}

pt_tensor *pti_ew_record_ternary(const char *name, pti_ew_ternary kind, const pt_tensor *x,
                                 const pt_tensor *y, const pt_tensor *z, double value,
                                 pt_tensor *out)
{
    const pt_tensor *ins[3] = {x, y, z};
    bool need[3];
    for (int k = 0; k < 3; k++)
        need[k] = ins[k] && ins[k]->requires_grad;
    unsigned saves = 0;
    switch (kind) {
    case PTI_EW_WHERE: saves = 1u; break;
    case PTI_EW_LERP:
        if (z)
            saves = ((need[0] || need[1]) ? 4u : 0u) | (need[2] ? 3u : 0u);
        break;
    case PTI_EW_ADDCMUL:
    case PTI_EW_ADDCDIV: saves = (need[1] || need[2]) ? 6u : 0u; break;
    case PTI_EW_CLAMP: saves = 7u; break;
    }
    double d[1] = {value};
    pt_tensor *r = record(name + 3, ternary_backward, kind, 3, ins, saves, d, 1, true, out);
    if (r)
        ((pti_node *)r->grad_fn)->i[5] = kind == PTI_EW_LERP && !z;
    return r;
}

/* ---- in place -------------------------------------------------------------------------------- */

pt_status pti_ew_inplace_finish(const char *name, pt_tensor *self, pt_tensor *result)
{
    if (!result)
        return pt_last_status();
    pt_status st = PT_OK;
    if (!pti_ew_check_inplace(name, self, result->dtype, result->ndim, result->shape))
        st = pt_last_status();
    if (st == PT_OK && result->dtype != self->dtype) {
        pt_tensor *c = pt_to_dtype(result, self->dtype); /* recorded: gradients in self's dtype */
        pt_release(result);
        result = c;
        if (!c)
            return pt_last_status();
    }
    if (st == PT_OK) {
        bool prev = pt_set_grad_enabled(false);
        st = pt_copy_(self, result);
        pt_set_grad_enabled(prev);
    }
    if (st == PT_OK)
        st = pti_inplace_rebase(self, result);
    pt_release(result);
    return st;
}
