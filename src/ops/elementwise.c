/* Elementwise op front-ends, shared machinery and the unary ops (binary and ternary ops are in
 * elementwise_binary.c).
 *
 * Every op follows one path: check the arguments, compute PyTorch's result dtype, bring the
 * inputs to the kernel's compute dtype (float16/bfloat16 compute in float32; integer inputs
 * of float-only ops become float32), allocate the output, dispatch, and round back to the
 * result dtype if it differs. The common case (inputs already of the result dtype) allocates
 * nothing but the output. In-place forms write straight into `self` when its dtype is the
 * compute dtype, else compute out of place and copy back. */
#include <math.h>
#include <string.h>

#include "../graph/node.h"
#include "elementwise_internal.h"

/* ---- result types (PyTorch's ResultTypeState) ------------------------------------------------ */

static int promote_skip(int a, int b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return (int)pt_promote_types((pt_dtype)a, (pt_dtype)b);
}

static bool cat_float(int dt)
{
    return dt >= 0 && pti_dtypes[dt].is_floating;
}

/* The higher-priority class wins unless the lower one has a higher category. */
static int combine_categories(int higher, int lower)
{
    if (cat_float(higher))
        return higher;
    if (higher == PT_BOOL || cat_float(lower))
        return promote_skip(higher, lower);
    return higher >= 0 ? higher : lower;
}

void pti_ew_rt_init(pti_ew_rt *s)
{
    s->dim = s->zero = s->wrapped = -1;
}

void pti_ew_rt_tensor(pti_ew_rt *s, const pt_tensor *t)
{
    if (t->ndim > 0)
        s->dim = promote_skip(s->dim, t->dtype);
    else
        s->zero = promote_skip(s->zero, t->dtype);
}

bool pti_ew_number_is_int(double v)
{
    return isfinite(v) && v == trunc(v) && fabs(v) < 9.2e18;
}

void pti_ew_rt_number(pti_ew_rt *s, double v)
{
    s->wrapped = promote_skip(s->wrapped, pti_ew_number_is_int(v) ? PT_INT64 : PT_FLOAT32);
}

pt_dtype pti_ew_rt_result(const pti_ew_rt *s)
{
    int r = combine_categories(s->dim, combine_categories(s->zero, s->wrapped));
    return r < 0 ? PT_FLOAT32 : (pt_dtype)r;
}

/* PyTorch's canCast for in-place results: no floating into integral, nothing but bool into bool. */
bool pti_ew_can_cast(pt_dtype from, pt_dtype to)
{
    if (pti_dtypes[from].is_floating && !pti_dtypes[to].is_floating)
        return false;
    if (from != PT_BOOL && to == PT_BOOL)
        return false;
    return true;
}

pt_dtype pti_ew_compute_dtype(pt_dtype dt)
{
    return (dt == PT_FLOAT16 || dt == PT_BFLOAT16) ? PT_FLOAT32 : dt;
}

int64_t pti_ew_sat_i64(double v)
{
    if (isnan(v))
        return 0;
    if (v <= -9.2233720368547758e18)
        return INT64_MIN;
    if (v >= 9.2233720368547758e18)
        return INT64_MAX;
    return (int64_t)v;
}

/* ---- numbers as 0-dim tensors without heap work ---------------------------------------------- */

pt_tensor *pti_ew_box(pti_ew_scalar_box *b, double v, pt_dtype dt, pt_device dev)
{
    if (dev.type != PT_DEVICE_CPU)
        return pt_scalar_tensor(v, dt, dev);
    memset(b, 0, sizeof *b);
    atomic_init(&b->storage.refcount, 1);
    atomic_init(&b->storage.version, 0);
    b->storage.data = b->bytes;
    b->storage.nbytes = sizeof b->bytes;
    b->storage.device = dev;
    b->storage.backend = pti_backend_for(dev);
    atomic_init(&b->tensor.refcount, 1);
    b->tensor.storage = &b->storage;
    b->tensor.dtype = dt;
    b->tensor.ndim = 0;
    b->tensor.numel = 1;
    b->tensor.scope_slot = -1;
    if (pti_dtypes[dt].is_floating)
        pti_store_f64(b->bytes, dt, v);
    else
        pti_store_i64(b->bytes, dt, pti_ew_sat_i64(v));
    return &b->tensor;
}

void pti_ew_unbox(pti_ew_scalar_box *b, pt_tensor *t)
{
    if (t && t != &b->tensor)
        pt_release(t);
}

/* t in dtype dt: t itself (no reference taken) or a converted copy the caller releases. */
const pt_tensor *pti_ew_convert(const pt_tensor *t, pt_dtype dt, pt_tensor **owned)
{
    *owned = NULL;
    if (t->dtype == dt)
        return t;
    *owned = pt_to_dtype(t, dt);
    return *owned;
}

/* Finishes an out-of-place result: converts the kernel's output to the result dtype. */
pt_tensor *pti_ew_finish(pt_tensor *out, pt_dtype rt)
{
    if (!out || out->dtype == rt)
        return out;
    pt_tensor *r = pt_to_dtype(out, rt);
    pt_release(out);
    return r;
}

/* Copies a computed result into self for in-place forms; releases result. */
pt_status pti_ew_copy_back(pt_tensor *self, pt_tensor *result)
{
    if (!result)
        return pt_last_status();
    pt_status st = pt_copy_(self, result);
    pt_release(result);
    return st;
}

bool pti_ew_check_inplace(const char *op, const pt_tensor *self, pt_dtype rt, int ndim,
                          const int64_t *shape)
{
    for (int i = 0; i < self->ndim; i++) {
        if (self->stride[i] == 0 && self->shape[i] > 1) {
            pti_error(PT_ERR_INVALID_ARG,
                      "%s: unsupported operation: more than one element of the written-to tensor "
                      "%s refers to a single memory location (clone it first)",
                      op, pti_tensor_desc(self));
            return false;
        }
    }
    if (!pti_ew_can_cast(rt, self->dtype)) {
        pti_error(PT_ERR_DTYPE, "%s: result type %s can't be cast to the desired output type %s",
                  op, pt_dtype_name(rt), pt_dtype_name(self->dtype));
        return false;
    }
    bool same = ndim == self->ndim;
    for (int i = 0; same && i < ndim; i++)
        same = shape[i] == self->shape[i];
    if (!same) {
        pti_error(PT_ERR_SHAPE, "%s: output with shape %s doesn't match the broadcast shape %s", op,
                  pti_shape_str(self->ndim, self->shape), pti_shape_str(ndim, shape));
        return false;
    }
    return true;
}

/* ---- unary ops --------------------------------------------------------------------------------
 */

/* How an op treats dtypes. */
typedef enum unary_kind {
    U_FLOAT,      /* float math: integer/bool inputs give float32 */
    U_FLOAT_ONLY, /* activations PyTorch defines for floating dtypes only */
    U_NO_BOOL,  /* any numeric dtype kept; bool is an error (neg, abs, relu, hardtanh, rounding) */
    U_ANY,      /* every dtype kept (sign) */
    U_SQUARE,   /* dtype kept, bool -> int64 */
    U_BOOL_OUT, /* bool result from any dtype (logical_not, isnan, isinf) */
} unary_kind;

static const char *unary_bool_msg(pti_op op)
{
    switch (op) {
    case PTI_OP_neg:
        return "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
               "to invert a mask, use pt_logical_not instead";
    case PTI_OP_relu: return "Boolean inputs not supported for relu";
    default: return "not implemented for bool";
    }
}

/* Runs unary op on t with parameters p[4]; self != NULL writes into self (== t). The result
 * dtype is rt_override when >= 0 (clamp computes it from its bounds). */
static pt_tensor *unary_impl(const char *name, pti_op op, const pt_tensor *t, unary_kind kind,
                             const double p[4], pt_tensor *self, int rt_override)
{
    if (!PTI_CHECK_ARG(t, name, "input") || !pti_check_plain_dtype(name, t))
        return NULL;
    if (self && pti_grad_recording(1, &t)) {
        /* in place under autograd: out of place on a snapshot, written back, rebased */
        if (pti_inplace_check(name, self) != PT_OK)
            return NULL;
        pt_tensor *snap = pt_clone(self);
        pt_tensor *r = snap ? unary_impl(name, op, snap, kind, p, NULL, rt_override) : NULL;
        pt_release(snap);
        return pti_ew_inplace_finish(name, self, r) == PT_OK ? self : NULL;
    }
    pt_dtype dt = t->dtype, rt = dt;
    bool is_fl = pti_dtypes[dt].is_floating;
    switch (kind) {
    case U_FLOAT: rt = is_fl ? dt : PT_FLOAT32; break;
    case U_FLOAT_ONLY:
        if (!is_fl)
            return pti_error_null(PT_ERR_DTYPE,
                                  "%s: not implemented for '%s' (expected a floating point tensor)",
                                  name, pt_dtype_name(dt));
        break;
    case U_NO_BOOL:
        if (dt == PT_BOOL)
            return pti_error_null(PT_ERR_DTYPE, "%s: %s", name, unary_bool_msg(op));
        break;
    case U_ANY: break;
    case U_SQUARE: rt = dt == PT_BOOL ? PT_INT64 : dt; break;
    case U_BOOL_OUT: rt = PT_BOOL; break;
    }
    if (rt_override >= 0)
        rt = (pt_dtype)rt_override;
    if (self && !pti_ew_check_inplace(name, self, rt, self->ndim, self->shape))
        return NULL;
    pt_dtype kt = kind == U_BOOL_OUT ? dt : pti_ew_compute_dtype(rt);
    pt_dtype ot = kind == U_BOOL_OUT ? PT_BOOL : kt;
    pt_tensor *conv;
    const pt_tensor *in = pti_ew_convert(t, kt, &conv);
    if (!in)
        return NULL;
    pt_tensor *out = (self && self->dtype == ot)
                         ? self
                         : pti_tensor_new(t->ndim, t->shape, ot, t->storage->device);
    if (!out) {
        pt_release(conv);
        return NULL;
    }
    pti_call c = {.n_in = 1, .n_out = 1, .in = {in}, .out = {out}};
    for (int k = 0; k < 4; k++)
        c.scalar[k] = p ? p[k] : 0.0;
    pt_status st = out->numel ? pti_dispatch(op, &c) : PT_OK;
    pt_release(conv);
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
    if (out && kind != U_BOOL_OUT && pti_grad_recording(1, &t))
        out = pti_ew_record_unary(name, op, t, c.scalar, out);
    return out;
}

static pt_tensor *unary(const char *name, pti_op op, const pt_tensor *t, unary_kind kind)
{
    return unary_impl(name, op, t, kind, NULL, NULL, -1);
}

static pt_status unary_(const char *name, pti_op op, pt_tensor *t, unary_kind kind, const double *p)
{
    if (!PTI_CHECK_ARG(t, name, "self"))
        return pt_last_status();
    return unary_impl(name, op, t, kind, p, t, -1) ? PT_OK : pt_last_status();
}

pt_tensor *pt_neg(const pt_tensor *t)
{
    return unary("pt_neg", PTI_OP_neg, t, U_NO_BOOL);
}
pt_tensor *pt_abs(const pt_tensor *t)
{
    return unary("pt_abs", PTI_OP_abs, t, U_NO_BOOL);
}
pt_tensor *pt_sign(const pt_tensor *t)
{
    return unary("pt_sign", PTI_OP_sign, t, U_ANY);
}
pt_tensor *pt_exp(const pt_tensor *t)
{
    return unary("pt_exp", PTI_OP_exp, t, U_FLOAT);
}
pt_tensor *pt_expm1(const pt_tensor *t)
{
    return unary("pt_expm1", PTI_OP_expm1, t, U_FLOAT);
}
pt_tensor *pt_log(const pt_tensor *t)
{
    return unary("pt_log", PTI_OP_log, t, U_FLOAT);
}
pt_tensor *pt_log1p(const pt_tensor *t)
{
    return unary("pt_log1p", PTI_OP_log1p, t, U_FLOAT);
}
pt_tensor *pt_log2(const pt_tensor *t)
{
    return unary("pt_log2", PTI_OP_log2, t, U_FLOAT);
}
pt_tensor *pt_sqrt(const pt_tensor *t)
{
    return unary("pt_sqrt", PTI_OP_sqrt, t, U_FLOAT);
}
pt_tensor *pt_rsqrt(const pt_tensor *t)
{
    return unary("pt_rsqrt", PTI_OP_rsqrt, t, U_FLOAT);
}
pt_tensor *pt_square(const pt_tensor *t)
{
    return unary("pt_square", PTI_OP_square, t, U_SQUARE);
}
pt_tensor *pt_sin(const pt_tensor *t)
{
    return unary("pt_sin", PTI_OP_sin, t, U_FLOAT);
}
pt_tensor *pt_cos(const pt_tensor *t)
{
    return unary("pt_cos", PTI_OP_cos, t, U_FLOAT);
}
pt_tensor *pt_tan(const pt_tensor *t)
{
    return unary("pt_tan", PTI_OP_tan, t, U_FLOAT);
}
pt_tensor *pt_tanh(const pt_tensor *t)
{
    return unary("pt_tanh", PTI_OP_tanh, t, U_FLOAT);
}
pt_tensor *pt_sigmoid(const pt_tensor *t)
{
    return unary("pt_sigmoid", PTI_OP_sigmoid, t, U_FLOAT);
}
pt_tensor *pt_erf(const pt_tensor *t)
{
    return unary("pt_erf", PTI_OP_erf, t, U_FLOAT);
}
pt_tensor *pt_floor(const pt_tensor *t)
{
    return unary("pt_floor", PTI_OP_floor, t, U_NO_BOOL);
}
pt_tensor *pt_ceil(const pt_tensor *t)
{
    return unary("pt_ceil", PTI_OP_ceil, t, U_NO_BOOL);
}
pt_tensor *pt_round(const pt_tensor *t)
{
    return unary("pt_round", PTI_OP_round, t, U_NO_BOOL);
}
pt_tensor *pt_trunc(const pt_tensor *t)
{
    return unary("pt_trunc", PTI_OP_trunc, t, U_NO_BOOL);
}
pt_tensor *pt_reciprocal(const pt_tensor *t)
{
    return unary("pt_reciprocal", PTI_OP_reciprocal, t, U_FLOAT);
}
pt_tensor *pt_logical_not(const pt_tensor *t)
{
    return unary("pt_logical_not", PTI_OP_logical_not, t, U_BOOL_OUT);
}
pt_tensor *pt_isnan(const pt_tensor *t)
{
    return unary("pt_isnan", PTI_OP_isnan, t, U_BOOL_OUT);
}
pt_tensor *pt_isinf(const pt_tensor *t)
{
    return unary("pt_isinf", PTI_OP_isinf, t, U_BOOL_OUT);
}
pt_tensor *pt_relu(const pt_tensor *t)
{
    return unary("pt_relu", PTI_OP_relu, t, U_NO_BOOL);
}

pt_tensor *pt_relu6(const pt_tensor *t)
{
    return unary_impl("pt_relu6", PTI_OP_hardtanh, t, U_NO_BOOL, (double[4]){0, 6, 0, 0}, NULL, -1);
}

pt_tensor *pt_leaky_relu(const pt_tensor *t, double negative_slope)
{
    return unary_impl("pt_leaky_relu", PTI_OP_leaky_relu, t, U_FLOAT_ONLY,
                      (double[4]){negative_slope, 0, 0, 0}, NULL, -1);
}

pt_tensor *pt_elu(const pt_tensor *t, double alpha)
{
    return unary_impl("pt_elu", PTI_OP_elu, t, U_FLOAT_ONLY, (double[4]){alpha, 1, 1, 0}, NULL, -1);
}

#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

pt_tensor *pt_selu(const pt_tensor *t)
{
    return unary_impl("pt_selu", PTI_OP_elu, t, U_FLOAT_ONLY,
                      (double[4]){SELU_ALPHA, SELU_SCALE, 1, 0}, NULL, -1);
}

static bool gelu_param(const char *name, const pt_gelu_opts *opts, double *approx)
{
    pt_gelu_approximate a = opts ? opts->approximate : PT_GELU_NONE;
    if (a != PT_GELU_NONE && a != PT_GELU_TANH) {
        pti_error(PT_ERR_INVALID_ARG,
                  "%s: unknown approximate mode %d (expected PT_GELU_NONE or "
                  "PT_GELU_TANH)",
                  name, (int)a);
        return false;
    }
    *approx = a == PT_GELU_TANH ? 1.0 : 0.0;
    return true;
}

pt_tensor *pt_gelu(const pt_tensor *t)
{
    return pt_gelu_ex(t, NULL);
}

pt_tensor *pt_gelu_ex(const pt_tensor *t, const pt_gelu_opts *opts)
{
    double a;
    if (!gelu_param("pt_gelu", opts, &a))
        return NULL;
    return unary_impl("pt_gelu", PTI_OP_gelu, t, U_FLOAT_ONLY, (double[4]){a, 0, 0, 0}, NULL, -1);
}

pt_tensor *pt_silu(const pt_tensor *t)
{
    return unary("pt_silu", PTI_OP_silu, t, U_FLOAT_ONLY);
}
pt_tensor *pt_mish(const pt_tensor *t)
{
    return unary("pt_mish", PTI_OP_mish, t, U_FLOAT_ONLY);
}

pt_tensor *pt_softplus(const pt_tensor *t, double beta, double threshold)
{
    return unary_impl("pt_softplus", PTI_OP_softplus, t, U_FLOAT_ONLY,
                      (double[4]){beta, threshold, 0, 0}, NULL, -1);
}

/* F.hardtanh refuses min_val > max_val before looking at the input (relu6 shares the kernel
 * with fixed bounds 0, 6 and so never needs it). */
static bool hardtanh_bounds_ok(const char *op, double min_val, double max_val)
{
    if (min_val > max_val) {
        pti_error(PT_ERR_INVALID_ARG, "%s: min_val cannot be greater than max_val (got %g > %g)",
                  op, min_val, max_val);
        return false;
    }
    return true;
}

pt_tensor *pt_hardtanh(const pt_tensor *t, double min_val, double max_val)
{
    if (!hardtanh_bounds_ok("pt_hardtanh", min_val, max_val))
        return NULL;
    return unary_impl("pt_hardtanh", PTI_OP_hardtanh, t, U_NO_BOOL,
                      (double[4]){min_val, max_val, 0, 0}, NULL, -1);
}

pt_tensor *pt_hardsigmoid(const pt_tensor *t)
{
    return unary("pt_hardsigmoid", PTI_OP_hardsigmoid, t, U_FLOAT_ONLY);
}

pt_tensor *pt_hardswish(const pt_tensor *t)
{
    return unary("pt_hardswish", PTI_OP_hardswish, t, U_FLOAT_ONLY);
}

pt_status pt_neg_(pt_tensor *t)
{
    return unary_("pt_neg_", PTI_OP_neg, t, U_NO_BOOL, NULL);
}
pt_status pt_abs_(pt_tensor *t)
{
    return unary_("pt_abs_", PTI_OP_abs, t, U_NO_BOOL, NULL);
}
pt_status pt_sign_(pt_tensor *t)
{
    return unary_("pt_sign_", PTI_OP_sign, t, U_ANY, NULL);
}
pt_status pt_exp_(pt_tensor *t)
{
    return unary_("pt_exp_", PTI_OP_exp, t, U_FLOAT, NULL);
}
pt_status pt_expm1_(pt_tensor *t)
{
    return unary_("pt_expm1_", PTI_OP_expm1, t, U_FLOAT, NULL);
}
pt_status pt_log_(pt_tensor *t)
{
    return unary_("pt_log_", PTI_OP_log, t, U_FLOAT, NULL);
}
pt_status pt_log1p_(pt_tensor *t)
{
    return unary_("pt_log1p_", PTI_OP_log1p, t, U_FLOAT, NULL);
}
pt_status pt_log2_(pt_tensor *t)
{
    return unary_("pt_log2_", PTI_OP_log2, t, U_FLOAT, NULL);
}
pt_status pt_sqrt_(pt_tensor *t)
{
    return unary_("pt_sqrt_", PTI_OP_sqrt, t, U_FLOAT, NULL);
}
pt_status pt_rsqrt_(pt_tensor *t)
{
    return unary_("pt_rsqrt_", PTI_OP_rsqrt, t, U_FLOAT, NULL);
}
pt_status pt_square_(pt_tensor *t)
{
    return unary_("pt_square_", PTI_OP_square, t, U_SQUARE, NULL);
}
pt_status pt_sin_(pt_tensor *t)
{
    return unary_("pt_sin_", PTI_OP_sin, t, U_FLOAT, NULL);
}
pt_status pt_cos_(pt_tensor *t)
{
    return unary_("pt_cos_", PTI_OP_cos, t, U_FLOAT, NULL);
}
pt_status pt_tan_(pt_tensor *t)
{
    return unary_("pt_tan_", PTI_OP_tan, t, U_FLOAT, NULL);
}
pt_status pt_tanh_(pt_tensor *t)
{
    return unary_("pt_tanh_", PTI_OP_tanh, t, U_FLOAT, NULL);
}
pt_status pt_sigmoid_(pt_tensor *t)
{
    return unary_("pt_sigmoid_", PTI_OP_sigmoid, t, U_FLOAT, NULL);
}
pt_status pt_erf_(pt_tensor *t)
{
    return unary_("pt_erf_", PTI_OP_erf, t, U_FLOAT, NULL);
}
pt_status pt_floor_(pt_tensor *t)
{
    return unary_("pt_floor_", PTI_OP_floor, t, U_NO_BOOL, NULL);
}
pt_status pt_ceil_(pt_tensor *t)
{
    return unary_("pt_ceil_", PTI_OP_ceil, t, U_NO_BOOL, NULL);
}
pt_status pt_round_(pt_tensor *t)
{
    return unary_("pt_round_", PTI_OP_round, t, U_NO_BOOL, NULL);
}
pt_status pt_trunc_(pt_tensor *t)
{
    return unary_("pt_trunc_", PTI_OP_trunc, t, U_NO_BOOL, NULL);
}
pt_status pt_reciprocal_(pt_tensor *t)
{
    return unary_("pt_reciprocal_", PTI_OP_reciprocal, t, U_FLOAT, NULL);
}
pt_status pt_relu_(pt_tensor *t)
{
    return unary_("pt_relu_", PTI_OP_relu, t, U_NO_BOOL, NULL);
}
pt_status pt_relu6_(pt_tensor *t)
{
    return unary_("pt_relu6_", PTI_OP_hardtanh, t, U_NO_BOOL, (double[4]){0, 6, 0, 0});
}
pt_status pt_leaky_relu_(pt_tensor *t, double negative_slope)
{
    return unary_("pt_leaky_relu_", PTI_OP_leaky_relu, t, U_FLOAT_ONLY,
                  (double[4]){negative_slope, 0, 0, 0});
}
pt_status pt_elu_(pt_tensor *t, double alpha)
{
    return unary_("pt_elu_", PTI_OP_elu, t, U_FLOAT_ONLY, (double[4]){alpha, 1, 1, 0});
}
pt_status pt_selu_(pt_tensor *t)
{
    return unary_("pt_selu_", PTI_OP_elu, t, U_FLOAT_ONLY,
                  (double[4]){SELU_ALPHA, SELU_SCALE, 1, 0});
}
pt_status pt_gelu_(pt_tensor *t, const pt_gelu_opts *opts)
{
    double a;
    if (!gelu_param("pt_gelu_", opts, &a))
        return pt_last_status();
    return unary_("pt_gelu_", PTI_OP_gelu, t, U_FLOAT_ONLY, (double[4]){a, 0, 0, 0});
}
pt_status pt_silu_(pt_tensor *t)
{
    return unary_("pt_silu_", PTI_OP_silu, t, U_FLOAT_ONLY, NULL);
}
pt_status pt_mish_(pt_tensor *t)
{
    return unary_("pt_mish_", PTI_OP_mish, t, U_FLOAT_ONLY, NULL);
}
pt_status pt_softplus_(pt_tensor *t, double beta, double threshold)
{
    return unary_("pt_softplus_", PTI_OP_softplus, t, U_FLOAT_ONLY,
                  (double[4]){beta, threshold, 0, 0});
}
pt_status pt_hardtanh_(pt_tensor *t, double min_val, double max_val)
{
    if (!hardtanh_bounds_ok("pt_hardtanh_", min_val, max_val))
        return PT_ERR_INVALID_ARG;
    return unary_("pt_hardtanh_", PTI_OP_hardtanh, t, U_NO_BOOL,
                  (double[4]){min_val, max_val, 0, 0});
}
pt_status pt_hardsigmoid_(pt_tensor *t)
{
    return unary_("pt_hardsigmoid_", PTI_OP_hardsigmoid, t, U_FLOAT_ONLY, NULL);
}
pt_status pt_hardswish_(pt_tensor *t)
{
    return unary_("pt_hardswish_", PTI_OP_hardswish, t, U_FLOAT_ONLY, NULL);
}

/* ---- clamp with number bounds -----------------------------------------------------------------
 */

static pt_tensor *clamp_impl(const char *name, const pt_tensor *t, bool has_min, double min,
                             bool has_max, double max, pt_tensor *self)
{
    if (!PTI_CHECK_ARG(t, name, "input") || !pti_check_plain_dtype(name, t))
        return NULL;
    if (!has_min && !has_max)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: at least one of 'min' or 'max' must be given", name);
    pti_ew_rt rs;
    pti_ew_rt_init(&rs);
    pti_ew_rt_tensor(&rs, t);
    if (has_min)
        pti_ew_rt_number(&rs, min);
    if (has_max)
        pti_ew_rt_number(&rs, max);
    pt_dtype rt = pti_ew_rt_result(&rs);
    double p[4];
    if (pti_dtypes[rt].is_floating) {
        p[0] = has_min ? min : -INFINITY;
        p[1] = has_max ? max : INFINITY;
    } else {
        p[0] = has_min ? (double)pti_ew_sat_i64(min) : 0;
        p[1] = has_max ? (double)pti_ew_sat_i64(max) : 0;
    }
    p[2] = has_min;
    p[3] = has_max;
    return unary_impl(name, PTI_OP_clamp, t, U_ANY, p, self, (int)rt);
}

pt_tensor *pt_clamp(const pt_tensor *t, bool has_min, double min, bool has_max, double max)
{
    return clamp_impl("pt_clamp", t, has_min, min, has_max, max, NULL);
}

pt_status pt_clamp_(pt_tensor *t, bool has_min, double min, bool has_max, double max)
{
    if (!PTI_CHECK_ARG(t, "pt_clamp_", "self"))
        return pt_last_status();
    return clamp_impl("pt_clamp_", t, has_min, min, has_max, max, t) ? PT_OK : pt_last_status();
}

pt_tensor *pt_clamp_min(const pt_tensor *t, double min)
{
    return clamp_impl("pt_clamp_min", t, true, min, false, 0, NULL);
}

pt_tensor *pt_clamp_max(const pt_tensor *t, double max)
{
    return clamp_impl("pt_clamp_max", t, false, 0, true, max, NULL);
}
