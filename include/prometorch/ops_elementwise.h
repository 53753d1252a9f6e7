/* PromeTorch ops: the elementwise family (unary math and activations, binary arithmetic and
 * comparisons with broadcasting, where/clamp/lerp/addcmul/addcdiv).
 *
 * Common contract (as PyTorch):
 * - Every function returning pt_tensor * returns a new reference, or NULL with the error set
 *   (pt_last_status()/pt_last_error()). A NULL tensor argument propagates the earlier error.
 * - Binary and ternary ops broadcast their tensor arguments (PT_ERR_SHAPE when they cannot)
 *   and promote dtypes with PyTorch's rules: dimensioned tensors over 0-dim tensors over
 *   numbers, a higher category (bool < integer < floating) always wins.
 * - `_scalar` forms take a C double. A value with no fractional part acts like a Python int
 *   (int tensor + 2 stays int64/int32...), any other like a Python float (gives float32 for
 *   integer tensors). This is the one difference from PyTorch, where `t + 2.0` is float.
 * - Float-only ops (exp, log, sigmoid, div, atan2, ...) turn integer/bool inputs into
 *   float32; activations PyTorch does not define for integers (gelu, elu, ...) give
 *   PT_ERR_DTYPE for them. float16/bfloat16 are computed in float32 and rounded back.
 * - In-place forms (`_` suffix) write into `self` and return pt_status. The result dtype of
 *   the op must be castable to self's dtype the way PyTorch allows (no float into an integer
 *   tensor, nothing but bool into bool), and the broadcast shape must equal self's shape.
 * - Errors: PT_ERR_NULL (NULL argument), PT_ERR_SHAPE, PT_ERR_DTYPE, PT_ERR_DEVICE (tensors on
 *   different devices), PT_ERR_INVALID_ARG (bad option, integer division by zero). */
#ifndef PROMETORCH_OPS_ELEMENTWISE_H
#define PROMETORCH_OPS_ELEMENTWISE_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- unary math: torch.<name>(t) ------------------------------------------------------------ */

PT_API pt_tensor *pt_neg(const pt_tensor *t);    /* -t; bool is an error */
PT_API pt_tensor *pt_abs(const pt_tensor *t);    /* |t|; bool is an error */
PT_API pt_tensor *pt_sign(const pt_tensor *t);   /* -1, 0, 1 (0 for NaN) */
PT_API pt_tensor *pt_exp(const pt_tensor *t);    /* e^t (int -> float32) */
PT_API pt_tensor *pt_expm1(const pt_tensor *t);  /* e^t - 1 */
PT_API pt_tensor *pt_log(const pt_tensor *t);    /* natural log */
PT_API pt_tensor *pt_log1p(const pt_tensor *t);  /* log(1 + t) */
PT_API pt_tensor *pt_log2(const pt_tensor *t);   /* base-2 log */
PT_API pt_tensor *pt_sqrt(const pt_tensor *t);   /* square root */
PT_API pt_tensor *pt_rsqrt(const pt_tensor *t);  /* 1 / sqrt(t) */
PT_API pt_tensor *pt_square(const pt_tensor *t); /* t * t (int stays int, bool -> int64) */
PT_API pt_tensor *pt_sin(const pt_tensor *t);
PT_API pt_tensor *pt_cos(const pt_tensor *t);
PT_API pt_tensor *pt_tan(const pt_tensor *t);
PT_API pt_tensor *pt_tanh(const pt_tensor *t);
PT_API pt_tensor *pt_sigmoid(const pt_tensor *t); /* 1 / (1 + e^-t) */
PT_API pt_tensor *pt_erf(const pt_tensor *t);     /* error function */
PT_API pt_tensor *pt_floor(const pt_tensor *t);   /* integers returned unchanged */
PT_API pt_tensor *pt_ceil(const pt_tensor *t);
PT_API pt_tensor *pt_round(const pt_tensor *t);       /* half to even */
PT_API pt_tensor *pt_trunc(const pt_tensor *t);       /* toward zero */
PT_API pt_tensor *pt_reciprocal(const pt_tensor *t);  /* 1 / t */
PT_API pt_tensor *pt_logical_not(const pt_tensor *t); /* bool: t == 0 */
PT_API pt_tensor *pt_isnan(const pt_tensor *t);       /* bool */
PT_API pt_tensor *pt_isinf(const pt_tensor *t);       /* bool: +-inf */

/* ---- activations: torch.nn.functional.<name> ------------------------------------------------ */

PT_API pt_tensor *pt_relu(const pt_tensor *t);  /* max(t, 0); integers allowed, bool is an error */
PT_API pt_tensor *pt_relu6(const pt_tensor *t); /* min(max(t, 0), 6) */
PT_API pt_tensor *pt_leaky_relu(const pt_tensor *t, double negative_slope); /* PyTorch: 0.01 */
PT_API pt_tensor *pt_elu(const pt_tensor *t, double alpha);                 /* PyTorch: 1.0 */
PT_API pt_tensor *pt_selu(const pt_tensor *t);

/* gelu's options; the zero value is PyTorch's default (approximate='none', the erf form). */
typedef enum pt_gelu_approximate {
    PT_GELU_NONE = 0, /* 0.5 x (1 + erf(x / sqrt 2)) */
    PT_GELU_TANH,     /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
} pt_gelu_approximate;
typedef struct pt_gelu_opts {
    pt_gelu_approximate approximate;
} pt_gelu_opts;
PT_API pt_tensor *pt_gelu(const pt_tensor *t);
PT_API pt_tensor *pt_gelu_ex(const pt_tensor *t, const pt_gelu_opts *opts); /* opts may be NULL */
PT_API pt_tensor *pt_silu(const pt_tensor *t);                              /* t * sigmoid(t) */
PT_API pt_tensor *pt_mish(const pt_tensor *t); /* t * tanh(softplus(t)) */
/* log(1 + e^(beta t)) / beta, or t where beta t > threshold (PyTorch: beta 1, threshold 20). */
PT_API pt_tensor *pt_softplus(const pt_tensor *t, double beta, double threshold);
/* clamp(t, min_val, max_val) (PyTorch's defaults -1, 1); min_val > max_val is
 * PT_ERR_INVALID_ARG, for pt_hardtanh_ too (F.hardtanh raises the same). */
PT_API pt_tensor *pt_hardtanh(const pt_tensor *t, double min_val, double max_val);
PT_API pt_tensor *pt_hardsigmoid(const pt_tensor *t);
PT_API pt_tensor *pt_hardswish(const pt_tensor *t);

/* ---- in-place unary: same as above, written into t (must keep t's dtype: float-only ops need a
 * floating t). Return PT_OK or the error. --------------------------------------------------------
 */

PT_API pt_status pt_neg_(pt_tensor *t);
PT_API pt_status pt_abs_(pt_tensor *t);
PT_API pt_status pt_sign_(pt_tensor *t);
PT_API pt_status pt_exp_(pt_tensor *t);
PT_API pt_status pt_expm1_(pt_tensor *t);
PT_API pt_status pt_log_(pt_tensor *t);
PT_API pt_status pt_log1p_(pt_tensor *t);
PT_API pt_status pt_log2_(pt_tensor *t);
PT_API pt_status pt_sqrt_(pt_tensor *t);
PT_API pt_status pt_rsqrt_(pt_tensor *t);
PT_API pt_status pt_square_(pt_tensor *t);
PT_API pt_status pt_sin_(pt_tensor *t);
PT_API pt_status pt_cos_(pt_tensor *t);
PT_API pt_status pt_tan_(pt_tensor *t);
PT_API pt_status pt_tanh_(pt_tensor *t);
PT_API pt_status pt_sigmoid_(pt_tensor *t);
PT_API pt_status pt_erf_(pt_tensor *t);
PT_API pt_status pt_floor_(pt_tensor *t);
PT_API pt_status pt_ceil_(pt_tensor *t);
PT_API pt_status pt_round_(pt_tensor *t);
PT_API pt_status pt_trunc_(pt_tensor *t);
PT_API pt_status pt_reciprocal_(pt_tensor *t);
PT_API pt_status pt_relu_(pt_tensor *t);
PT_API pt_status pt_relu6_(pt_tensor *t);
PT_API pt_status pt_leaky_relu_(pt_tensor *t, double negative_slope);
PT_API pt_status pt_elu_(pt_tensor *t, double alpha);
PT_API pt_status pt_selu_(pt_tensor *t);
PT_API pt_status pt_gelu_(pt_tensor *t, const pt_gelu_opts *opts); /* opts may be NULL */
PT_API pt_status pt_silu_(pt_tensor *t);
PT_API pt_status pt_mish_(pt_tensor *t);
PT_API pt_status pt_softplus_(pt_tensor *t, double beta, double threshold);
PT_API pt_status pt_hardtanh_(pt_tensor *t, double min_val, double max_val);
PT_API pt_status pt_hardsigmoid_(pt_tensor *t);
PT_API pt_status pt_hardswish_(pt_tensor *t);

/* ---- binary arithmetic ------------------------------------------------------------------------
 */

/* a + b (torch.add); bool + bool is logical or. */
PT_API pt_tensor *pt_add(const pt_tensor *a, const pt_tensor *b);
/* a + alpha * b (torch.add(a, b, alpha=alpha)); alpha must be integral for integer results. */
PT_API pt_tensor *pt_add_alpha(const pt_tensor *a, const pt_tensor *b, double alpha);
PT_API pt_tensor *pt_add_scalar(const pt_tensor *a, double b);
/* a - b / a - alpha * b (torch.sub); bool - bool is an error. */
PT_API pt_tensor *pt_sub(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_sub_alpha(const pt_tensor *a, const pt_tensor *b, double alpha);
PT_API pt_tensor *pt_sub_scalar(const pt_tensor *a, double b);
/* b - a (torch.rsub with a number: `b - tensor`). */
PT_API pt_tensor *pt_rsub_scalar(const pt_tensor *a, double b);
PT_API pt_tensor *pt_mul(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_mul_scalar(const pt_tensor *a, double b);

/* torch.div rounding modes; the zero value is true division. */
typedef enum pt_rounding_mode {
    PT_ROUND_NONE = 0, /* true division: integer inputs give float32 */
    PT_ROUND_TRUNC,    /* toward zero; integers stay integers */
    PT_ROUND_FLOOR,    /* toward -inf (Python //); integers stay integers */
} pt_rounding_mode;
PT_API pt_tensor *pt_div(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_div_rounding(const pt_tensor *a, const pt_tensor *b, pt_rounding_mode mode);
PT_API pt_tensor *pt_div_scalar(const pt_tensor *a, double b);
PT_API pt_tensor *pt_div_scalar_rounding(const pt_tensor *a, double b, pt_rounding_mode mode);
/* a ** b. Integer bases with negative integer exponents follow PyTorch (0 unless |a| == 1);
 * pt_pow_scalar with an integer tensor and a negative integral exponent is an error. */
PT_API pt_tensor *pt_pow(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_pow_scalar(const pt_tensor *a, double exponent);
PT_API pt_tensor *pt_scalar_pow(double base, const pt_tensor *exponent); /* base ** tensor */
/* Python-style modulus: the result has the divisor's sign (torch.remainder). */
PT_API pt_tensor *pt_remainder(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_remainder_scalar(const pt_tensor *a, double b);
/* C-style modulus: the result has the dividend's sign (torch.fmod). */
PT_API pt_tensor *pt_fmod(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_fmod_scalar(const pt_tensor *a, double b);
/* Elementwise max/min, propagating NaN. */
PT_API pt_tensor *pt_maximum(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_minimum(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_atan2(const pt_tensor *a, const pt_tensor *b); /* int -> float32 */
PT_API pt_tensor *pt_hypot(const pt_tensor *a, const pt_tensor *b); /* floating inputs only */

/* ---- fused activation gradients -----------------------------------------------------------------
 * The input gradient of an activation from the output gradient `grad` and the tensor the
 * activation saved, in one pass (aten's threshold_backward, tanh_backward, ...). Used by the
 * backward formulas when no graph is being built; they do not record autograd history
 * themselves (compose public ops for differentiable versions). Broadcast like binary ops;
 * floating dtypes only. CPU kernels only. */

/* grad where self > threshold, else 0 (relu's backward with self = relu's output). */
PT_API pt_tensor *pt_threshold_backward(const pt_tensor *grad, const pt_tensor *self,
                                        double threshold);
PT_API pt_tensor *pt_tanh_backward(const pt_tensor *grad, const pt_tensor *output); /* g(1-y^2) */
PT_API pt_tensor *pt_sigmoid_backward(const pt_tensor *grad, const pt_tensor *output); /* gy(1-y) */
/* grad * s (1 + x (1 - s)), s = sigmoid(input). */
PT_API pt_tensor *pt_silu_backward(const pt_tensor *grad, const pt_tensor *input);
/* grad * d gelu(x)/dx for the erf or tanh form (opts may be NULL: erf form). */
PT_API pt_tensor *pt_gelu_backward(const pt_tensor *grad, const pt_tensor *input,
                                   const pt_gelu_opts *opts);

/* ---- comparisons and logical ops: bool results ------------------------------------------------
 */

PT_API pt_tensor *pt_eq(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_ne(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_lt(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_le(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_gt(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_ge(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_eq_scalar(const pt_tensor *a, double b);
PT_API pt_tensor *pt_ne_scalar(const pt_tensor *a, double b);
PT_API pt_tensor *pt_lt_scalar(const pt_tensor *a, double b);
PT_API pt_tensor *pt_le_scalar(const pt_tensor *a, double b);
PT_API pt_tensor *pt_gt_scalar(const pt_tensor *a, double b);
PT_API pt_tensor *pt_ge_scalar(const pt_tensor *a, double b);
PT_API pt_tensor *pt_logical_and(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_logical_or(const pt_tensor *a, const pt_tensor *b);
PT_API pt_tensor *pt_logical_xor(const pt_tensor *a, const pt_tensor *b);

/* ---- in-place binary: self op= other (see the contract at the top) -----------------------------
 */

PT_API pt_status pt_add_(pt_tensor *self, const pt_tensor *other);
PT_API pt_status pt_add_alpha_(pt_tensor *self, const pt_tensor *other, double alpha);
PT_API pt_status pt_add_scalar_(pt_tensor *self, double other);
PT_API pt_status pt_sub_(pt_tensor *self, const pt_tensor *other);
PT_API pt_status pt_sub_alpha_(pt_tensor *self, const pt_tensor *other, double alpha);
PT_API pt_status pt_sub_scalar_(pt_tensor *self, double other);
PT_API pt_status pt_mul_(pt_tensor *self, const pt_tensor *other);
PT_API pt_status pt_mul_scalar_(pt_tensor *self, double other);
PT_API pt_status pt_div_(pt_tensor *self, const pt_tensor *other);
PT_API pt_status pt_div_rounding_(pt_tensor *self, const pt_tensor *other, pt_rounding_mode mode);
PT_API pt_status pt_div_scalar_(pt_tensor *self, double other);
PT_API pt_status pt_pow_(pt_tensor *self, const pt_tensor *exponent);
PT_API pt_status pt_pow_scalar_(pt_tensor *self, double exponent);

/* ---- ternary ----------------------------------------------------------------------------------
 */

/* cond ? a : b with broadcasting; cond must be bool; a and b are promoted together. */
PT_API pt_tensor *pt_where(const pt_tensor *cond, const pt_tensor *a, const pt_tensor *b);
/* min(max(t, min), max) with number bounds; has_min/has_max say which bounds are given (at least
 * one must be). A fractional bound makes an integer tensor float32, as in PyTorch. */
PT_API pt_tensor *pt_clamp(const pt_tensor *t, bool has_min, double min, bool has_max, double max);
PT_API pt_status pt_clamp_(pt_tensor *t, bool has_min, double min, bool has_max, double max);
PT_API pt_tensor *pt_clamp_min(const pt_tensor *t, double min);
PT_API pt_tensor *pt_clamp_max(const pt_tensor *t, double max);
/* Tensor bounds, broadcast with t: min(max(t, min), max), NaN propagating. A NULL bound means
 * none (so a failed call producing a bound must be checked first); at least one is required.
 * A bool t with both bounds is PT_ERR_DTYPE (PyTorch's clamp kernel has no bool loop; one
 * bound alone is maximum / minimum, which accept bool). */
PT_API pt_tensor *pt_clamp_tensor(const pt_tensor *t, const pt_tensor *min, const pt_tensor *max);
/* start + weight * (end - start); start and end of one floating dtype (torch.lerp). */
PT_API pt_tensor *pt_lerp(const pt_tensor *start, const pt_tensor *end, const pt_tensor *weight);
PT_API pt_tensor *pt_lerp_scalar(const pt_tensor *start, const pt_tensor *end, double weight);
/* self + value * t1 * t2 (torch.addcmul) and self + value * t1 / t2 (torch.addcdiv, floating
 * only). */
PT_API pt_tensor *pt_addcmul(const pt_tensor *self, const pt_tensor *t1, const pt_tensor *t2,
                             double value);
PT_API pt_tensor *pt_addcdiv(const pt_tensor *self, const pt_tensor *t1, const pt_tensor *t2,
                             double value);

#ifdef __cplusplus
}
#endif
#endif
