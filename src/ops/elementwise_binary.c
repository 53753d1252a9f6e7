/* Elementwise op front-ends, binary and ternary part: add/sub/mul/div/pow/remainder/fmod,
 * maximum/minimum, atan2/hypot, comparisons and logical ops (tensor-tensor, tensor-number and
 * in-place forms), where, clamp with tensor bounds, lerp, addcmul, addcdiv. The shared
 * machinery is in elementwise.c. */
#include <math.h>

#include "../graph/node.h"
#include "elementwise_internal.h"

/* One operand of a binary op: a tensor, or a number when t is NULL and is_number is set. */
typedef struct operand {
    const pt_tensor *t;
    double v;
    bool is_number;
} operand;

#define TENSOR(x) ((operand){.t = (x)})
#define NUMBER(x) ((operand){.v = (x), .is_number = true})

/* The compute dtype (inputs and kernel output) and the result dtype of a binary op, from the
 * promoted dtype ct; false (error set) for dtypes the op rejects. */
static bool binary_types(const char *name, pti_op op, double s0, pt_dtype ct, pt_dtype *kt,
                         pt_dtype *rt)
{
    bool fl = pti_dtypes[ct].is_floating;
    *rt = ct;
    switch (op) {
    case PTI_OP_add:
        if (!fl && !pti_ew_number_is_int(s0)) {
            pti_error(PT_ERR_INVALID_ARG,
                      "%s: for integral input tensors, argument alpha must not be a floating point "
                      "number (got %g)",
                      name, s0);
            return false;
        }
        break;
    case PTI_OP_div:
        if (s0 == 0)
            *rt = fl ? ct : PT_FLOAT32;
        else if (ct == PT_BOOL)
            goto no_bool;
        break;
    case PTI_OP_pow:
    case PTI_OP_remainder:
    case PTI_OP_fmod:
        if (ct == PT_BOOL)
            goto no_bool;
        break;
    case PTI_OP_atan2: *rt = fl ? ct : PT_FLOAT32; break;
    case PTI_OP_threshold_backward:
    case PTI_OP_tanh_backward:
    case PTI_OP_sigmoid_backward:
    case PTI_OP_silu_backward:
    case PTI_OP_gelu_backward:
    case PTI_OP_hypot:
        if (!fl) {
            pti_error(PT_ERR_DTYPE, "%s: not implemented for '%s' (expected floating point inputs)",
                      name, pt_dtype_name(ct));
            return false;
        }
        break;
    case PTI_OP_eq:
    case PTI_OP_ne:
    case PTI_OP_lt:
    case PTI_OP_le:
    case PTI_OP_gt:
    case PTI_OP_ge:
    case PTI_OP_logical_and:
    case PTI_OP_logical_or:
    case PTI_OP_logical_xor:
        *kt = pti_ew_compute_dtype(ct);
        *rt = PT_BOOL;
        return true;
    default: break;
    }
    *kt = pti_ew_compute_dtype(*rt);
    return true;
no_bool:
    pti_error(PT_ERR_DTYPE, "%s: not implemented for 'bool'", name);
    return false;
}

/* Brings an operand to dtype kt on dev: a borrowed tensor, a converted copy (*owned) or a boxed
 * number. */
static const pt_tensor *materialize(operand o, pt_dtype kt, pt_device dev, pti_ew_scalar_box *box,
                                    pt_tensor **owned)
{
    *owned = NULL;
    if (o.is_number) {
        pt_tensor *b = pti_ew_box(box, o.v, kt, dev);
        if (b != &box->tensor)
            *owned = b;
        return b;
    }
    return pti_ew_convert(o.t, kt, owned);
}

static pt_tensor *binary_inplace_grad(const char *name, pti_op op, pt_tensor *self, operand b,
                                      double s0);

/* The fused activation backwards record nothing (see ops_elementwise.h). */
static bool fused_backward(pti_op op)
{
    return op == PTI_OP_threshold_backward || op == PTI_OP_tanh_backward ||
           op == PTI_OP_sigmoid_backward || op == PTI_OP_silu_backward ||
           op == PTI_OP_gelu_backward;
}

/* The common path of every binary op. self != NULL: in place into self (returned, borrowed);
 * otherwise a new reference. */
static pt_tensor *binary_impl(const char *name, pti_op op, operand a, operand b, double s0,
                              pt_tensor *self)
{
    if ((!a.is_number && !PTI_CHECK_ARG(a.t, name, self ? "self" : "input")) ||
        (!b.is_number && !PTI_CHECK_ARG(b.t, name, "other")))
        return NULL;
    if ((!a.is_number && !pti_check_plain_dtype(name, a.t)) ||
        (!b.is_number && !pti_check_plain_dtype(name, b.t)))
        return NULL;
    if (!a.is_number && !b.is_number) {
        const pt_tensor *ts[2] = {a.t, b.t};
        if (!pti_check_same_device(name, 2, ts))
            return NULL;
    }
    const pt_tensor *gin[2] = {a.t, b.t}; /* numbers have t == NULL */
    if (self && pti_grad_recording(2, gin))
        return binary_inplace_grad(name, op, self, b, s0);
    const pt_tensor *ref = a.is_number ? b.t : a.t;
    pt_device dev = ref->storage->device;
    pti_ew_rt rs;
    pti_ew_rt_init(&rs);
    if (a.is_number)
        pti_ew_rt_number(&rs, a.v);
    else
        pti_ew_rt_tensor(&rs, a.t);
    if (b.is_number)
        pti_ew_rt_number(&rs, b.v);
    else
        pti_ew_rt_tensor(&rs, b.t);
    pt_dtype kt, rt;
    if (!binary_types(name, op, s0, pti_ew_rt_result(&rs), &kt, &rt))
        return NULL;
    int nd;
    int64_t shape[PT_MAX_DIMS];
    const pt_tensor *sa = a.is_number ? b.t : a.t, *sb = b.is_number ? a.t : b.t;
    if (!pti_broadcast_shapes(name, sa->ndim, sa->shape, sb->ndim, sb->shape, &nd, shape))
        return NULL;
    if (self && !pti_ew_check_inplace(name, self, rt, nd, shape))
        return NULL;
    pt_dtype ot = rt == PT_BOOL ? PT_BOOL : kt;
    pti_ew_scalar_box box_a, box_b;
    pt_tensor *own_a, *own_b;
    const pt_tensor *ia = materialize(a, kt, dev, &box_a, &own_a);
    const pt_tensor *ib = ia ? materialize(b, kt, dev, &box_b, &own_b) : NULL;
    pt_tensor *out = NULL;
    if (ia && ib)
        out = (self && self->dtype == ot) ? self : pti_tensor_new(nd, shape, ot, dev);
    pt_status st = out ? PT_OK : pt_last_status();
    if (out && out->numel) {
        pti_call c = {.n_in = 2, .n_out = 1, .in = {ia, ib}, .out = {out}, .scalar = {s0}};
        st = pti_dispatch(op, &c);
    }
    pt_release(own_a);
    if (ia)
        pt_release(own_b);
    if (self && out == self) {
        pti_bump_version(self);
        return st == PT_OK ? self : NULL;
    }
    if (st != PT_OK) {
        pt_release(out);
        return NULL;
    }
    if (self)
        return pti_ew_copy_back(self, pti_ew_finish(out, self->dtype)) == PT_OK ? self : NULL;
    out = pti_ew_finish(out, rt);
    if (out && rt != PT_BOOL && !fused_backward(op) && pti_grad_recording(2, gin))
        out = pti_ew_record_binary(name, op, a.t, a.v, b.t, b.v, s0, out);
    return out;
}

/* In place under autograd: computes op on a snapshot of self (recorded), writes it back. */
static pt_tensor *binary_inplace_grad(const char *name, pti_op op, pt_tensor *self, operand b,
                                      double s0)
{
    if (pti_inplace_check(name, self) != PT_OK)
        return NULL;
    pt_tensor *snap = pt_clone(self);
    if (!snap)
        return NULL;
    if (!b.is_number && b.t == self)
        b.t = snap;
    pt_tensor *r = binary_impl(name, op, TENSOR(snap), b, s0, NULL);
    pt_release(snap);
    return pti_ew_inplace_finish(name, self, r) == PT_OK ? self : NULL;
}

static pt_status binary_(const char *name, pti_op op, pt_tensor *self, operand b, double s0)
{
    if (!PTI_CHECK_ARG(self, name, "self"))
        return pt_last_status();
    return binary_impl(name, op, TENSOR(self), b, s0, self) ? PT_OK : pt_last_status();
}

/* sub rejects bool operands, as PyTorch does. */
static bool sub_check(const char *name, operand a, operand b)
{
    if ((!a.is_number && a.t && a.t->dtype == PT_BOOL) ||
        (!b.is_number && b.t && b.t->dtype == PT_BOOL)) {
        pti_error(PT_ERR_DTYPE,
                  "%s: subtraction, the `-` operator, with a bool tensor is not "
                  "supported; use pt_logical_xor or pt_logical_not instead",
                  name);
        return false;
    }
    return true;
}

static bool mode_check(const char *name, pt_rounding_mode mode)
{
    if (mode != PT_ROUND_NONE && mode != PT_ROUND_TRUNC && mode != PT_ROUND_FLOOR) {
        pti_error(PT_ERR_INVALID_ARG,
                  "%s: unknown rounding mode %d (expected PT_ROUND_NONE, "
                  "PT_ROUND_TRUNC or PT_ROUND_FLOOR)",
                  name, (int)mode);
        return false;
    }
    return true;
}

/* ---- arithmetic ------------------------------------------------------------------------------ */

pt_tensor *pt_add(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_add", PTI_OP_add, TENSOR(a), TENSOR(b), 1.0, NULL);
}

pt_tensor *pt_add_alpha(const pt_tensor *a, const pt_tensor *b, double alpha)
{
    return binary_impl("pt_add", PTI_OP_add, TENSOR(a), TENSOR(b), alpha, NULL);
}

pt_tensor *pt_add_scalar(const pt_tensor *a, double b)
{
    return binary_impl("pt_add_scalar", PTI_OP_add, TENSOR(a), NUMBER(b), 1.0, NULL);
}

pt_tensor *pt_sub(const pt_tensor *a, const pt_tensor *b)
{
    return pt_sub_alpha(a, b, 1.0);
}

pt_tensor *pt_sub_alpha(const pt_tensor *a, const pt_tensor *b, double alpha)
{
    if (!sub_check("pt_sub", TENSOR(a), TENSOR(b)))
        return NULL;
    return binary_impl("pt_sub", PTI_OP_add, TENSOR(a), TENSOR(b), -alpha, NULL);
}

pt_tensor *pt_sub_scalar(const pt_tensor *a, double b)
{
    if (!sub_check("pt_sub_scalar", TENSOR(a), NUMBER(b)))
        return NULL;
    return binary_impl("pt_sub_scalar", PTI_OP_add, TENSOR(a), NUMBER(b), -1.0, NULL);
}

pt_tensor *pt_rsub_scalar(const pt_tensor *a, double b)
{
    if (!sub_check("pt_rsub_scalar", TENSOR(a), NUMBER(b)))
        return NULL;
    return binary_impl("pt_rsub_scalar", PTI_OP_add, NUMBER(b), TENSOR(a), -1.0, NULL);
}

pt_tensor *pt_mul(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_mul", PTI_OP_mul, TENSOR(a), TENSOR(b), 0, NULL);
}

pt_tensor *pt_mul_scalar(const pt_tensor *a, double b)
{
    return binary_impl("pt_mul_scalar", PTI_OP_mul, TENSOR(a), NUMBER(b), 0, NULL);
}

pt_tensor *pt_div(const pt_tensor *a, const pt_tensor *b)
{
    return pt_div_rounding(a, b, PT_ROUND_NONE);
}

pt_tensor *pt_div_rounding(const pt_tensor *a, const pt_tensor *b, pt_rounding_mode mode)
{
    if (!mode_check("pt_div", mode))
        return NULL;
    return binary_impl("pt_div", PTI_OP_div, TENSOR(a), TENSOR(b), (double)mode, NULL);
}

pt_tensor *pt_div_scalar(const pt_tensor *a, double b)
{
    return pt_div_scalar_rounding(a, b, PT_ROUND_NONE);
}

pt_tensor *pt_div_scalar_rounding(const pt_tensor *a, double b, pt_rounding_mode mode)
{
    if (!mode_check("pt_div_scalar", mode))
        return NULL;
    return binary_impl("pt_div_scalar", PTI_OP_div, TENSOR(a), NUMBER(b), (double)mode, NULL);
}

pt_tensor *pt_pow(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_pow", PTI_OP_pow, TENSOR(a), TENSOR(b), 0, NULL);
}

static bool pow_scalar_check(const char *name, const pt_tensor *a, double e)
{
    if (a && !pti_dtypes[a->dtype].is_floating && pti_ew_number_is_int(e) && e < 0) {
        pti_error(PT_ERR_INVALID_ARG,
                  "%s: integers to negative integer powers are not allowed (%s ** %g)", name,
                  pt_dtype_name(a->dtype), e);
        return false;
    }
    return true;
}

pt_tensor *pt_pow_scalar(const pt_tensor *a, double exponent)
{
    if (!pow_scalar_check("pt_pow_scalar", a, exponent))
        return NULL;
    return binary_impl("pt_pow_scalar", PTI_OP_pow, TENSOR(a), NUMBER(exponent), 0, NULL);
}

pt_tensor *pt_scalar_pow(double base, const pt_tensor *exponent)
{
    return binary_impl("pt_scalar_pow", PTI_OP_pow, NUMBER(base), TENSOR(exponent), 0, NULL);
}

pt_tensor *pt_remainder(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_remainder", PTI_OP_remainder, TENSOR(a), TENSOR(b), 0, NULL);
}

pt_tensor *pt_remainder_scalar(const pt_tensor *a, double b)
{
    return binary_impl("pt_remainder_scalar", PTI_OP_remainder, TENSOR(a), NUMBER(b), 0, NULL);
}

pt_tensor *pt_fmod(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_fmod", PTI_OP_fmod, TENSOR(a), TENSOR(b), 0, NULL);
}

pt_tensor *pt_fmod_scalar(const pt_tensor *a, double b)
{
    return binary_impl("pt_fmod_scalar", PTI_OP_fmod, TENSOR(a), NUMBER(b), 0, NULL);
}

pt_tensor *pt_maximum(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_maximum", PTI_OP_maximum, TENSOR(a), TENSOR(b), 0, NULL);
}

pt_tensor *pt_minimum(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_minimum", PTI_OP_minimum, TENSOR(a), TENSOR(b), 0, NULL);
}

pt_tensor *pt_atan2(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_atan2", PTI_OP_atan2, TENSOR(a), TENSOR(b), 0, NULL);
}

pt_tensor *pt_hypot(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_hypot", PTI_OP_hypot, TENSOR(a), TENSOR(b), 0, NULL);
}

/* ---- fused activation backwards (not recorded) ---------------------------------------------- */

pt_tensor *pt_threshold_backward(const pt_tensor *grad, const pt_tensor *self, double threshold)
{
    return binary_impl("pt_threshold_backward", PTI_OP_threshold_backward, TENSOR(grad),
                       TENSOR(self), threshold, NULL);
}

pt_tensor *pt_tanh_backward(const pt_tensor *grad, const pt_tensor *output)
{
    return binary_impl("pt_tanh_backward", PTI_OP_tanh_backward, TENSOR(grad), TENSOR(output), 0,
                       NULL);
}

pt_tensor *pt_sigmoid_backward(const pt_tensor *grad, const pt_tensor *output)
{
    return binary_impl("pt_sigmoid_backward", PTI_OP_sigmoid_backward, TENSOR(grad), TENSOR(output),
                       0, NULL);
}

pt_tensor *pt_silu_backward(const pt_tensor *grad, const pt_tensor *input)
{
    return binary_impl("pt_silu_backward", PTI_OP_silu_backward, TENSOR(grad), TENSOR(input), 0,
                       NULL);
}

pt_tensor *pt_gelu_backward(const pt_tensor *grad, const pt_tensor *input, const pt_gelu_opts *opts)
{
    pt_gelu_approximate a = opts ? opts->approximate : PT_GELU_NONE;
    if (a != PT_GELU_NONE && a != PT_GELU_TANH)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_gelu_backward: unknown approximate mode %d (expected "
                              "PT_GELU_NONE or PT_GELU_TANH)",
                              (int)a);
    return binary_impl("pt_gelu_backward", PTI_OP_gelu_backward, TENSOR(grad), TENSOR(input),
                       a == PT_GELU_TANH ? 1.0 : 0.0, NULL);
}

/* ---- comparisons and logical ops --------------------------------------------------------------
 */

pt_tensor *pt_eq(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_eq", PTI_OP_eq, TENSOR(a), TENSOR(b), 0, NULL);
}
pt_tensor *pt_ne(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_ne", PTI_OP_ne, TENSOR(a), TENSOR(b), 0, NULL);
}
pt_tensor *pt_lt(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_lt", PTI_OP_lt, TENSOR(a), TENSOR(b), 0, NULL);
}
pt_tensor *pt_le(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_le", PTI_OP_le, TENSOR(a), TENSOR(b), 0, NULL);
}
pt_tensor *pt_gt(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_gt", PTI_OP_gt, TENSOR(a), TENSOR(b), 0, NULL);
}
pt_tensor *pt_ge(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_ge", PTI_OP_ge, TENSOR(a), TENSOR(b), 0, NULL);
}
pt_tensor *pt_eq_scalar(const pt_tensor *a, double b)
{
    return binary_impl("pt_eq_scalar", PTI_OP_eq, TENSOR(a), NUMBER(b), 0, NULL);
}
pt_tensor *pt_ne_scalar(const pt_tensor *a, double b)
{
    return binary_impl("pt_ne_scalar", PTI_OP_ne, TENSOR(a), NUMBER(b), 0, NULL);
}
pt_tensor *pt_lt_scalar(const pt_tensor *a, double b)
{
    return binary_impl("pt_lt_scalar", PTI_OP_lt, TENSOR(a), NUMBER(b), 0, NULL);
}
pt_tensor *pt_le_scalar(const pt_tensor *a, double b)
{
    return binary_impl("pt_le_scalar", PTI_OP_le, TENSOR(a), NUMBER(b), 0, NULL);
}
pt_tensor *pt_gt_scalar(const pt_tensor *a, double b)
{
    return binary_impl("pt_gt_scalar", PTI_OP_gt, TENSOR(a), NUMBER(b), 0, NULL);
}
pt_tensor *pt_ge_scalar(const pt_tensor *a, double b)
{
    return binary_impl("pt_ge_scalar", PTI_OP_ge, TENSOR(a), NUMBER(b), 0, NULL);
}
pt_tensor *pt_logical_and(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_logical_and", PTI_OP_logical_and, TENSOR(a), TENSOR(b), 0, NULL);
}
pt_tensor *pt_logical_or(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_logical_or", PTI_OP_logical_or, TENSOR(a), TENSOR(b), 0, NULL);
}
pt_tensor *pt_logical_xor(const pt_tensor *a, const pt_tensor *b)
{
    return binary_impl("pt_logical_xor", PTI_OP_logical_xor, TENSOR(a), TENSOR(b), 0, NULL);
}

/* ---- in-place binary --------------------------------------------------------------------------
 */

pt_status pt_add_(pt_tensor *self, const pt_tensor *other)
{
    return binary_("pt_add_", PTI_OP_add, self, TENSOR(other), 1.0);
}
pt_status pt_add_alpha_(pt_tensor *self, const pt_tensor *other, double alpha)
{
    return binary_("pt_add_", PTI_OP_add, self, TENSOR(other), alpha);
}
pt_status pt_add_scalar_(pt_tensor *self, double other)
{
    return binary_("pt_add_scalar_", PTI_OP_add, self, NUMBER(other), 1.0);
}
pt_status pt_sub_(pt_tensor *self, const pt_tensor *other)
{
    return pt_sub_alpha_(self, other, 1.0);
}
pt_status pt_sub_alpha_(pt_tensor *self, const pt_tensor *other, double alpha)
{
    if (!sub_check("pt_sub_", TENSOR(self), TENSOR(other)))
        return pt_last_status();
    return binary_("pt_sub_", PTI_OP_add, self, TENSOR(other), -alpha);
}
pt_status pt_sub_scalar_(pt_tensor *self, double other)
{
    if (!sub_check("pt_sub_scalar_", TENSOR(self), NUMBER(other)))
        return pt_last_status();
    return binary_("pt_sub_scalar_", PTI_OP_add, self, NUMBER(other), -1.0);
}
pt_status pt_mul_(pt_tensor *self, const pt_tensor *other)
{
    return binary_("pt_mul_", PTI_OP_mul, self, TENSOR(other), 0);
}
pt_status pt_mul_scalar_(pt_tensor *self, double other)
{
    return binary_("pt_mul_scalar_", PTI_OP_mul, self, NUMBER(other), 0);
}
pt_status pt_div_(pt_tensor *self, const pt_tensor *other)
{
    return pt_div_rounding_(self, other, PT_ROUND_NONE);
}
pt_status pt_div_rounding_(pt_tensor *self, const pt_tensor *other, pt_rounding_mode mode)
{
    if (!mode_check("pt_div_", mode))
        return pt_last_status();
    return binary_("pt_div_", PTI_OP_div, self, TENSOR(other), (double)mode);
}
pt_status pt_div_scalar_(pt_tensor *self, double other)
{
    return binary_("pt_div_scalar_", PTI_OP_div, self, NUMBER(other), 0);
}
pt_status pt_pow_(pt_tensor *self, const pt_tensor *exponent)
{
    return binary_("pt_pow_", PTI_OP_pow, self, TENSOR(exponent), 0);
}
pt_status pt_pow_scalar_(pt_tensor *self, double exponent)
{
    if (!pow_scalar_check("pt_pow_scalar_", self, exponent))
        return pt_last_status();
    return binary_("pt_pow_scalar_", PTI_OP_pow, self, NUMBER(exponent), 0);
}

/* ---- ternary ----------------------------------------------------------------------------------
 */

/* Broadcast shape of three tensors. */
static bool broadcast3(const char *name, const pt_tensor *a, const pt_tensor *b, const pt_tensor *c,
                       int *nd, int64_t *shape)
{
    return pti_broadcast_shapes(name, a->ndim, a->shape, b->ndim, b->shape, nd, shape) &&
           pti_broadcast_shapes(name, *nd, shape, c->ndim, c->shape, nd, shape);
}

/* Runs a three-input kernel with every input converted to kt; the result is converted to rt. */
static pt_tensor *ternary_run(const char *name, pti_op op, const pt_tensor *x, const pt_tensor *y,
                              const pt_tensor *z, pt_dtype kt, pt_dtype rt, double value)
{
    int nd;
    int64_t shape[PT_MAX_DIMS];
    if (!broadcast3(name, x, y, z, &nd, shape))
        return NULL;
    const pt_tensor *src[3] = {x, y, z};
    const pt_tensor *in[3] = {NULL, NULL, NULL};
    pt_tensor *own[3] = {NULL, NULL, NULL};
    pt_tensor *out = NULL;
    bool ok = true;
    for (int k = 0; k < 3 && ok; k++) {
        pt_dtype want = (op == PTI_OP_where && k == 0) ? PT_BOOL : kt;
        in[k] = pti_ew_convert(src[k], want, &own[k]);
        ok = in[k] != NULL;
    }
    if (ok)
        out = pti_tensor_new(nd, shape, kt, x->storage->device);
    if (out && out->numel) {
        pti_call c = {
            .n_in = 3, .n_out = 1, .in = {in[0], in[1], in[2]}, .out = {out}, .scalar = {value}};
        if (pti_dispatch(op, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
    }
    for (int k = 0; k < 3; k++)
        pt_release(own[k]);
    return pti_ew_finish(out, rt);
}

static bool check3(const char *name, const char *const names[3], const pt_tensor *const ts[3])
{
    for (int k = 0; k < 3; k++)
        if (!PTI_CHECK_ARG(ts[k], name, names[k]) || !pti_check_plain_dtype(name, ts[k]))
            return false;
    return pti_check_same_device(name, 3, ts);
}

pt_tensor *pt_where(const pt_tensor *cond, const pt_tensor *a, const pt_tensor *b)
{
    const pt_tensor *ts[3] = {cond, a, b};
    if (!check3("pt_where", (const char *const[]){"condition", "input", "other"}, ts))
        return NULL;
    if (cond->dtype != PT_BOOL)
        return pti_error_null(PT_ERR_DTYPE,
                              "pt_where: expected condition to be a bool tensor, but "
                              "got a tensor with dtype %s",
                              pt_dtype_name(cond->dtype));
    pti_ew_rt rs;
    pti_ew_rt_init(&rs);
    pti_ew_rt_tensor(&rs, a);
    pti_ew_rt_tensor(&rs, b);
    pt_dtype rt = pti_ew_rt_result(&rs);
    /* where copies bytes, so it runs in the result dtype itself */
    pt_tensor *r = ternary_run("pt_where", PTI_OP_where, cond, a, b, rt, rt, 0);
    if (r && pti_grad_recording(3, ts))
        r = pti_ew_record_ternary("pt_where", PTI_EW_WHERE, cond, a, b, 0, r);
    return r;
}

pt_tensor *pt_clamp_tensor(const pt_tensor *t, const pt_tensor *min, const pt_tensor *max)
{
    if (!PTI_CHECK_ARG(t, "pt_clamp_tensor", "input"))
        return NULL;
    if (!min && !max)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_clamp_tensor: at least one of 'min' or 'max' must be given");
    /* PyTorch's clamp kernel (both bounds) has no bool loop; one bound alone is maximum /
     * minimum, which accept bool */
    if (t->dtype == PT_BOOL && min && max)
        return pti_error_null(PT_ERR_DTYPE,
                              "pt_clamp_tensor: a bool input is not supported with both "
                              "'min' and 'max' tensors");
    /* min(max(t, lo), hi): NaN in any operand propagates, lo > hi gives hi (as PyTorch); the
     * gradient is clamp's own (recorded below), not that of maximum/minimum */
    const pt_tensor *ts[3] = {t, min, max};
    bool rec = pti_grad_recording(3, ts);
    bool prev = rec ? pt_set_grad_enabled(false) : true;
    pt_tensor *lo = min ? pt_maximum(t, min) : pt_retain((pt_tensor *)t);
    pt_tensor *r = lo;
    if (lo && max) {
        r = pt_minimum(lo, max);
        pt_release(lo);
    }
    if (rec) {
        pt_set_grad_enabled(prev);
        if (r)
            r = pti_ew_record_ternary("pt_clamp_tensor", PTI_EW_CLAMP, t, min, max, 0, r);
    }
    return r;
}

static bool lerp_check(const char *name, const pt_tensor *start, const pt_tensor *other,
                       const char *what)
{
    if (!pti_check_floating(name, "start", start))
        return false;
    if (other->dtype != start->dtype) {
        pti_error(PT_ERR_DTYPE, "%s: expected dtype %s for `%s` but got dtype %s", name,
                  pt_dtype_name(start->dtype), what, pt_dtype_name(other->dtype));
        return false;
    }
    return true;
}

pt_tensor *pt_lerp(const pt_tensor *start, const pt_tensor *end, const pt_tensor *weight)
{
    const pt_tensor *ts[3] = {start, end, weight};
    if (!check3("pt_lerp", (const char *const[]){"start", "end", "weight"}, ts) ||
        !lerp_check("pt_lerp", start, end, "end") ||
        !lerp_check("pt_lerp", start, weight, "weight"))
        return NULL;
    pt_tensor *r = ternary_run("pt_lerp", PTI_OP_lerp, start, end, weight,
                               pti_ew_compute_dtype(start->dtype), start->dtype, 0);
    if (r && pti_grad_recording(3, ts))
        r = pti_ew_record_ternary("pt_lerp", PTI_EW_LERP, start, end, weight, 0, r);
    return r;
}

pt_tensor *pt_lerp_scalar(const pt_tensor *start, const pt_tensor *end, double weight)
{
    if (!PTI_CHECK_ARG(start, "pt_lerp_scalar", "start") ||
        !PTI_CHECK_ARG(end, "pt_lerp_scalar", "end"))
        return NULL;
    const pt_tensor *ts[2] = {start, end};
    if (!pti_check_same_device("pt_lerp_scalar", 2, ts) ||
        !lerp_check("pt_lerp_scalar", start, end, "end"))
        return NULL;
    pt_dtype kt = pti_ew_compute_dtype(start->dtype);
    pti_ew_scalar_box box;
    pt_tensor *w = pti_ew_box(&box, weight, kt, start->storage->device);
    if (!w)
        return NULL;
    pt_tensor *r = ternary_run("pt_lerp_scalar", PTI_OP_lerp, start, end, w, kt, start->dtype, 0);
    pti_ew_unbox(&box, w);
    if (r && pti_grad_recording(2, ts))
        r = pti_ew_record_ternary("pt_lerp_scalar", PTI_EW_LERP, start, end, NULL, weight, r);
    return r;
}

static pt_tensor *addc(const char *name, pti_op op, const pt_tensor *self, const pt_tensor *t1,
                       const pt_tensor *t2, double value)
{
    const pt_tensor *ts[3] = {self, t1, t2};
    if (!check3(name, (const char *const[]){"self", "tensor1", "tensor2"}, ts))
        return NULL;
    pti_ew_rt rs;
    pti_ew_rt_init(&rs);
    for (int k = 0; k < 3; k++)
        pti_ew_rt_tensor(&rs, ts[k]);
    pt_dtype rt = pti_ew_rt_result(&rs);
    if (op == PTI_OP_addcdiv && !pti_dtypes[t1->dtype].is_floating &&
        !pti_dtypes[t2->dtype].is_floating)
        return pti_error_null(PT_ERR_DTYPE,
                              "%s: integer division with addcdiv is not supported "
                              "(tensor1 %s, tensor2 %s)",
                              name, pt_dtype_name(t1->dtype), pt_dtype_name(t2->dtype));
    if (rt == PT_BOOL)
        return pti_error_null(PT_ERR_DTYPE, "%s: not implemented for 'bool'", name);
    if (!pti_dtypes[rt].is_floating)
        value = (double)pti_ew_sat_i64(value);
    pt_tensor *r = ternary_run(name, op, self, t1, t2, pti_ew_compute_dtype(rt), rt, value);
    if (r && pti_grad_recording(3, ts))
        r = pti_ew_record_ternary(name, op == PTI_OP_addcmul ? PTI_EW_ADDCMUL : PTI_EW_ADDCDIV,
                                  self, t1, t2, value, r);
    return r;
}

pt_tensor *pt_addcmul(const pt_tensor *self, const pt_tensor *t1, const pt_tensor *t2, double value)
{
    return addc("pt_addcmul", PTI_OP_addcmul, self, t1, t2, value);
}

pt_tensor *pt_addcdiv(const pt_tensor *self, const pt_tensor *t1, const pt_tensor *t2, double value)
{
    return addc("pt_addcdiv", PTI_OP_addcdiv, self, t1, t2, value);
}
