/* nn activation modules (nn_activation.h): one pt_module_def per activation, a small options
 * ctx, a forward that calls the op library (or composes ops, for the activations that have no
 * op of their own), and PyTorch's extra_repr. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prometorch/nn_activation.h"

#include "../core/internal.h"
#include "prometorch/autograd.h"
#include "prometorch/ops_reduce.h"
#include "prometorch/ops_shape.h"

/* The options of every activation; each uses the fields it needs. */
typedef struct {
    double a, b; /* slope/alpha/beta/min_val/threshold/lambd; threshold/max_val/value */
    int64_t dim;
    pt_gelu_approximate approximate;
} act_ctx;

/* ---- repr helpers ---------------------------------------------------------------------------- */

/* Writes v as Python's repr(float) does: the shortest digits that read back as v, in fixed
 * notation for decimal exponents in [-4, 16) with at least one fractional digit ("1.0",
 * "0.01"), else scientific ("1e-05", "1e+16"). */
static void py_float(double v, char *buf, size_t cap)
{
    if (isnan(v)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, v < 0 ? "-inf" : "inf");
        return;
    }
    char sci[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(sci, sizeof(sci), "%.*e", prec - 1, v);
        if (strtod(sci, NULL) == v)
            break;
    }
    /* sci is "[-]d[.ddd]e[+-]XX": split into sign, digits and exponent. */
    const char *p = sci;
    bool neg = *p == '-';
    if (neg)
        p++;
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.' && nd < (int)sizeof(digits) - 1)
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int exp10 = *p == 'e' ? atoi(p + 1) : 0;
    char out[64];
    size_t n = 0;
    if (neg)
        out[n++] = '-';
    if (exp10 < -4 || exp10 >= 16) {
        out[n++] = digits[0];
        if (nd > 1) {
            out[n++] = '.';
            for (int i = 1; i < nd; i++)
                out[n++] = digits[i];
        }
        snprintf(out + n, sizeof(out) - n, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (exp10 < 0) {
        out[n++] = '0';
        out[n++] = '.';
        for (int i = -1; i > exp10; i--)
            out[n++] = '0';
        for (int i = 0; i < nd; i++)
            out[n++] = digits[i];
        out[n] = '\0';
    } else {
        for (int i = 0; i <= exp10; i++)
            out[n++] = i < nd ? digits[i] : '0';
        out[n++] = '.';
        if (nd > exp10 + 1)
            for (int i = exp10 + 1; i < nd; i++)
                out[n++] = digits[i];
        else
            out[n++] = '0';
        out[n] = '\0';
    }
    snprintf(buf, cap, "%s", out);
}

/* Python's repr of a number that PyTorch's defaults give as an int: integral values print
 * without ".0". */
static void py_number(double v, char *buf, size_t cap)
{
    if (isfinite(v) && v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, cap, "%.0f", v);
    else
        py_float(v, buf, cap);
}

static const act_ctx *ctx_of(const pt_module *m)
{
    return pt_nn_ctx(m);
}

/* "<name>=<float>" */
static void repr_float1(const pt_module *m, char *buf, size_t cap, const char *name)
{
    char a[40];
    py_float(ctx_of(m)->a, a, sizeof(a));
    snprintf(buf, cap, "%s=%s", name, a);
}

/* "<name_a>=<float>, <name_b>=<float>" */
static void repr_float2(const pt_module *m, char *buf, size_t cap, const char *na, const char *nb)
{
    char a[40], b[40];
    py_float(ctx_of(m)->a, a, sizeof(a));
    py_float(ctx_of(m)->b, b, sizeof(b));
    snprintf(buf, cap, "%s=%s, %s=%s", na, a, nb, b);
}

/* ---- construction ---------------------------------------------------------------------------- */

/* A module of `def` owning a copy of *opts (NULL: all zero). */
static pt_module *act_new(const pt_module_def *def, const act_ctx *opts)
{
    act_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn: out of memory creating %s", def->type_name);
    if (opts)
        *c = *opts;
    return pt_nn_module_new(def, c); /* frees c itself when it fails (def->free_ctx) */
}

/* ---- activations with no options ------------------------------------------------------------- */

static pt_tensor *relu_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    return pt_relu(x);
}

static pt_tensor *relu6_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    return pt_relu6(x);
}

static pt_tensor *selu_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    return pt_selu(x);
}

static pt_tensor *silu_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    return pt_silu(x);
}

static pt_tensor *mish_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    return pt_mish(x);
}

static pt_tensor *hardsigmoid_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    return pt_hardsigmoid(x);
}

static pt_tensor *hardswish_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    return pt_hardswish(x);
}

static pt_tensor *sigmoid_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    return pt_sigmoid(x);
}

static pt_tensor *tanh_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    return pt_tanh(x);
}

/* log sigmoid(x) = -softplus(-x); softplus's threshold form keeps it finite for large |x|. */
static pt_tensor *log_sigmoid_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    pt_tensor *nx = pt_neg(x);
    pt_tensor *sp = pt_softplus(nx, 1.0, 20.0);
    pt_release(nx);
    pt_tensor *y = pt_neg(sp);
    pt_release(sp);
    return y;
}

/* x / (1 + |x|) */
static pt_tensor *softsign_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    pt_tensor *ax = pt_abs(x);
    pt_tensor *den = pt_add_scalar(ax, 1.0);
    pt_release(ax);
    pt_tensor *y = pt_div(x, den);
    pt_release(den);
    return y;
}

/* x - tanh(x) */
static pt_tensor *tanhshrink_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    pt_tensor *th = pt_tanh(x);
    pt_tensor *y = pt_sub(x, th);
    pt_release(th);
    return y;
}

static const pt_module_def relu_def = {
    .type_name = "ReLU", .forward = relu_forward, .free_ctx = free};
static const pt_module_def relu6_def = {
    .type_name = "ReLU6", .forward = relu6_forward, .free_ctx = free};
static const pt_module_def selu_def = {
    .type_name = "SELU", .forward = selu_forward, .free_ctx = free};
static const pt_module_def silu_def = {
    .type_name = "SiLU", .forward = silu_forward, .free_ctx = free};
static const pt_module_def mish_def = {
    .type_name = "Mish", .forward = mish_forward, .free_ctx = free};
static const pt_module_def hardsigmoid_def = {
    .type_name = "Hardsigmoid", .forward = hardsigmoid_forward, .free_ctx = free};
static const pt_module_def hardswish_def = {
    .type_name = "Hardswish", .forward = hardswish_forward, .free_ctx = free};
static const pt_module_def sigmoid_def = {
    .type_name = "Sigmoid", .forward = sigmoid_forward, .free_ctx = free};
static const pt_module_def tanh_def = {
    .type_name = "Tanh", .forward = tanh_forward, .free_ctx = free};
static const pt_module_def log_sigmoid_def = {
    .type_name = "LogSigmoid", .forward = log_sigmoid_forward, .free_ctx = free};
static const pt_module_def softsign_def = {
    .type_name = "Softsign", .forward = softsign_forward, .free_ctx = free};
static const pt_module_def tanhshrink_def = {
    .type_name = "Tanhshrink", .forward = tanhshrink_forward, .free_ctx = free};

pt_module *pt_nn_relu(void)
{
    return act_new(&relu_def, NULL);
}

pt_module *pt_nn_relu6(void)
{
    return act_new(&relu6_def, NULL);
}

pt_module *pt_nn_selu(void)
{
    return act_new(&selu_def, NULL);
}

pt_module *pt_nn_silu(void)
{
    return act_new(&silu_def, NULL);
}

pt_module *pt_nn_mish(void)
{
    return act_new(&mish_def, NULL);
}

pt_module *pt_nn_hardsigmoid(void)
{
    return act_new(&hardsigmoid_def, NULL);
}

pt_module *pt_nn_hardswish(void)
{
    return act_new(&hardswish_def, NULL);
}

pt_module *pt_nn_sigmoid(void)
{
    return act_new(&sigmoid_def, NULL);
}

pt_module *pt_nn_tanh(void)
{
    return act_new(&tanh_def, NULL);
}

pt_module *pt_nn_log_sigmoid(void)
{
    return act_new(&log_sigmoid_def, NULL);
}

pt_module *pt_nn_softsign(void)
{
    return act_new(&softsign_def, NULL);
}

pt_module *pt_nn_tanhshrink(void)
{
    return act_new(&tanhshrink_def, NULL);
}

/* ---- pointwise activations with options ------------------------------------------------------ */

static pt_tensor *leaky_relu_forward(pt_module *self, const pt_tensor *x)
{
    return pt_leaky_relu(x, ctx_of(self)->a);
}

static void leaky_relu_repr(const pt_module *self, char *buf, size_t cap)
{
    repr_float1(self, buf, cap, "negative_slope");
}

static pt_tensor *elu_forward(pt_module *self, const pt_tensor *x)
{
    return pt_elu(x, ctx_of(self)->a);
}

static void alpha_repr(const pt_module *self, char *buf, size_t cap)
{
    repr_float1(self, buf, cap, "alpha");
}

static bool check_floating_input(const pt_tensor *x, const char *op);

/* celu(x, alpha) = alpha * elu(x / alpha, 1) */
static pt_tensor *celu_forward(pt_module *self, const pt_tensor *x)
{
    if (!check_floating_input(x, "CELU"))
        return NULL;
    double alpha = ctx_of(self)->a;
    pt_tensor *xs = pt_div_scalar(x, alpha);
    pt_tensor *e = pt_elu(xs, 1.0);
    pt_release(xs);
    pt_tensor *y = pt_mul_scalar(e, alpha);
    pt_release(e);
    return y;
}

static pt_tensor *gelu_forward(pt_module *self, const pt_tensor *x)
{
    pt_gelu_opts o = {.approximate = ctx_of(self)->approximate};
    return pt_gelu_ex(x, &o);
}

static void gelu_repr(const pt_module *self, char *buf, size_t cap)
{
    bool is_tanh = ctx_of(self)->approximate == PT_GELU_TANH;
    snprintf(buf, cap, "approximate='%s'", is_tanh ? "tanh" : "none");
}

static pt_tensor *softplus_forward(pt_module *self, const pt_tensor *x)
{
    return pt_softplus(x, ctx_of(self)->a, ctx_of(self)->b);
}

static void softplus_repr(const pt_module *self, char *buf, size_t cap)
{
    char a[40], b[40];
    py_number(ctx_of(self)->a, a, sizeof(a));
    py_number(ctx_of(self)->b, b, sizeof(b));
    snprintf(buf, cap, "beta=%s, threshold=%s", a, b);
}

static pt_tensor *hardtanh_forward(pt_module *self, const pt_tensor *x)
{
    return pt_hardtanh(x, ctx_of(self)->a, ctx_of(self)->b);
}

static void hardtanh_repr(const pt_module *self, char *buf, size_t cap)
{
    repr_float2(self, buf, cap, "min_val", "max_val");
}

/* x is given and floating: PyTorch has no integer or bool kernel for CELU (elu), GLU,
 * Hardshrink and Softshrink, though the compositions here would run on integers. */
static bool check_floating_input(const pt_tensor *x, const char *op)
{
    if (!PTI_CHECK_ARG(x, op, "input"))
        return false;
    if (!pti_dtypes[x->dtype].is_floating) {
        pti_error(PT_ERR_DTYPE, "%s: dtype %s is not supported (expected a floating input)", op,
                  pt_dtype_name(x->dtype));
        return false;
    }
    return true;
}

/* A 0-dim tensor holding v in x's dtype and device, for pt_where's other branch. */
static pt_tensor *scalar_like(const pt_tensor *x, double v)
{
    return pt_scalar_tensor(v, pt_dtype_of(x), pt_device_of(x));
}

/* where(x <= threshold, value, x): NaN stays NaN, as PyTorch's kernel. */
static pt_tensor *threshold_forward(pt_module *self, const pt_tensor *x)
{
    if (!PTI_CHECK_ARG(x, "Threshold", "input"))
        return NULL;
    if (x->dtype == PT_BOOL) /* PyTorch's threshold kernel has no bool loop */
        return pti_error_null(PT_ERR_DTYPE,
                              "Threshold: dtype bool is not supported (expected a number type)");
    pt_tensor *low = pt_le_scalar(x, ctx_of(self)->a);
    pt_tensor *value = scalar_like(x, ctx_of(self)->b);
    pt_tensor *y = low && value ? pt_where(low, value, x) : NULL;
    pt_release(low);
    pt_release(value);
    return y;
}

static void threshold_repr(const pt_module *self, char *buf, size_t cap)
{
    repr_float2(self, buf, cap, "threshold", "value");
}

/* where(x > l, x - l, where(x < -l, x + l, where(isnan(x), x, 0))): NaN fails both
 * comparisons but stays NaN, as in PyTorch's kernel. */
static pt_tensor *softshrink_forward(pt_module *self, const pt_tensor *x)
{
    if (!check_floating_input(x, "Softshrink"))
        return NULL;
    double l = ctx_of(self)->a;
    pt_tensor *hi = pt_gt_scalar(x, l), *lo = pt_lt_scalar(x, -l), *nan = pt_isnan(x);
    pt_tensor *xm = pt_sub_scalar(x, l), *xp = pt_add_scalar(x, l);
    pt_tensor *zero = scalar_like(x, 0.0);
    pt_tensor *mid = nan && zero ? pt_where(nan, x, zero) : NULL;
    pt_tensor *inner = lo && xp && mid ? pt_where(lo, xp, mid) : NULL;
    pt_tensor *y = hi && xm && inner ? pt_where(hi, xm, inner) : NULL;
    pt_release(hi);
    pt_release(lo);
    pt_release(nan);
    pt_release(xm);
    pt_release(xp);
    pt_release(zero);
    pt_release(mid);
    pt_release(inner);
    return y;
}

/* where(|x| <= l, 0, x): NaN stays NaN, as PyTorch's kernel. */
static pt_tensor *hardshrink_forward(pt_module *self, const pt_tensor *x)
{
    if (!check_floating_input(x, "Hardshrink"))
        return NULL;
    pt_tensor *ax = pt_abs(x);
    pt_tensor *inside = pt_le_scalar(ax, ctx_of(self)->a);
    pt_release(ax);
    pt_tensor *zero = scalar_like(x, 0.0);
    pt_tensor *y = inside && zero ? pt_where(inside, zero, x) : NULL;
    pt_release(inside);
    pt_release(zero);
    return y;
}

/* Softshrink(0.5): PyTorch's extra_repr is str(lambd), a Python float. */
static void lambd_repr(const pt_module *self, char *buf, size_t cap)
{
    py_float(ctx_of(self)->a, buf, cap);
}

static const pt_module_def leaky_relu_def = {.type_name = "LeakyReLU",
                                             .forward = leaky_relu_forward,
                                             .free_ctx = free,
                                             .extra_repr = leaky_relu_repr};
static const pt_module_def elu_def = {
    .type_name = "ELU", .forward = elu_forward, .free_ctx = free, .extra_repr = alpha_repr};
static const pt_module_def celu_def = {
    .type_name = "CELU", .forward = celu_forward, .free_ctx = free, .extra_repr = alpha_repr};
static const pt_module_def gelu_def = {
    .type_name = "GELU", .forward = gelu_forward, .free_ctx = free, .extra_repr = gelu_repr};
static const pt_module_def softplus_def = {.type_name = "Softplus",
                                           .forward = softplus_forward,
                                           .free_ctx = free,
                                           .extra_repr = softplus_repr};
static const pt_module_def hardtanh_def = {.type_name = "Hardtanh",
                                           .forward = hardtanh_forward,
                                           .free_ctx = free,
                                           .extra_repr = hardtanh_repr};
static const pt_module_def threshold_def = {.type_name = "Threshold",
                                            .forward = threshold_forward,
                                            .free_ctx = free,
                                            .extra_repr = threshold_repr};
static const pt_module_def softshrink_def = {.type_name = "Softshrink",
                                             .forward = softshrink_forward,
                                             .free_ctx = free,
                                             .extra_repr = lambd_repr};
static const pt_module_def hardshrink_def = {.type_name = "Hardshrink",
                                             .forward = hardshrink_forward,
                                             .free_ctx = free,
                                             .extra_repr = lambd_repr};

pt_module *pt_nn_leaky_relu(double negative_slope)
{
    return act_new(&leaky_relu_def, &(act_ctx){.a = negative_slope});
}

pt_module *pt_nn_elu(double alpha)
{
    return act_new(&elu_def, &(act_ctx){.a = alpha});
}

pt_module *pt_nn_celu(double alpha)
{
    if (alpha == 0.0)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_celu: alpha must not be 0");
    return act_new(&celu_def, &(act_ctx){.a = alpha});
}

pt_module *pt_nn_gelu(pt_gelu_approximate approximate)
{
    if (approximate != PT_GELU_NONE && approximate != PT_GELU_TANH)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_gelu: bad approximate value %d",
                              (int)approximate);
    return act_new(&gelu_def, &(act_ctx){.approximate = approximate});
}

pt_module *pt_nn_softplus(double beta, double threshold)
{
    return act_new(&softplus_def, &(act_ctx){.a = beta, .b = threshold});
}

pt_module *pt_nn_hardtanh(double min_val, double max_val)
{
    if (!(max_val > min_val))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_hardtanh: max_val (%g) must be greater than min_val (%g)",
                              max_val, min_val);
    return act_new(&hardtanh_def, &(act_ctx){.a = min_val, .b = max_val});
}

pt_module *pt_nn_threshold(double threshold, double value)
{
    return act_new(&threshold_def, &(act_ctx){.a = threshold, .b = value});
}

pt_module *pt_nn_softshrink(double lambd)
{
    if (!(lambd >= 0.0))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_softshrink: lambd must be greater or equal to 0, got %g",
                              lambd);
    return act_new(&softshrink_def, &(act_ctx){.a = lambd});
}

pt_module *pt_nn_hardshrink(double lambd)
{
    return act_new(&hardshrink_def, &(act_ctx){.a = lambd});
}

/* ---- PReLU ----------------------------------------------------------------------------------- */

/* The weight shaped to broadcast against x: 0-dim for one parameter, [C, 1, ..., 1] (over x's
 * dims after the batch dim) otherwise. */
static pt_tensor *prelu_weight_view(const pt_tensor *w, const pt_tensor *x)
{
    int64_t c = pt_numel(w);
    if (c == 1)
        return pt_reshape(w, 0, NULL);
    int nd = pt_ndim(x);
    int64_t channels = nd >= 2 ? pt_shape(x)[1] : 1;
    if (channels != c)
        return pti_error_null(PT_ERR_SHAPE,
                              "PReLU: mismatch of parameter numbers and input channel size: "
                              "num_parameters = %lld, channel size = %lld",
                              (long long)c, (long long)channels);
    int64_t shape[PT_MAX_DIMS];
    shape[0] = c;
    for (int i = 1; i < nd - 1; i++)
        shape[i] = 1;
    return pt_reshape(w, nd - 1, shape);
}

/* where(x > 0, x, weight * x) */
static pt_tensor *prelu_forward(pt_module *self, const pt_tensor *x)
{
    if (!PTI_CHECK_ARG(x, "PReLU", "input"))
        return NULL;
    pt_tensor *w = prelu_weight_view(pt_nn_direct_param_ref(self, 0, NULL), x);
    if (!w)
        return NULL;
    pt_tensor *wx = pt_mul(w, x);
    pt_release(w);
    pt_tensor *pos = pt_gt_scalar(x, 0.0);
    pt_tensor *y = wx && pos ? pt_where(pos, x, wx) : NULL;
    pt_release(wx);
    pt_release(pos);
    return y;
}

static void prelu_repr(const pt_module *self, char *buf, size_t cap)
{
    snprintf(buf, cap, "num_parameters=%lld", (long long)ctx_of(self)->dim);
}

static const pt_module_def prelu_def = {
    .type_name = "PReLU", .forward = prelu_forward, .free_ctx = free, .extra_repr = prelu_repr};

pt_module *pt_nn_prelu(int64_t num_parameters, double init)
{
    if (num_parameters < 1)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_prelu: num_parameters must be >= 1, got %lld",
                              (long long)num_parameters);
    pt_module *m = act_new(&prelu_def, &(act_ctx){.dim = num_parameters, .a = init});
    if (!m)
        return NULL;
    pt_tensor *w = pt_full(1, &num_parameters, init, pt_get_default_dtype(), pt_cpu());
    pt_status st = w ? pt_nn_register_parameter(m, "weight", w) : pt_last_status();
    pt_release(w);
    if (st != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

/* ---- activations along a dim ----------------------------------------------------------------- */

/* a * sigmoid(b), a and b the halves of x along dim */
static pt_tensor *glu_forward(pt_module *self, const pt_tensor *x)
{
    if (!check_floating_input(x, "GLU"))
        return NULL;
    int64_t dim = ctx_of(self)->dim;
    int nd = pt_ndim(x);
    int64_t d = dim < 0 ? dim + nd : dim;
    if (d < 0 || d >= nd)
        return pti_error_null(PT_ERR_INDEX, "GLU: dim %lld out of range for a %d-dim input",
                              (long long)dim, nd);
    int64_t size = pt_shape(x)[d];
    if (size % 2 != 0)
        return pti_error_null(
            PT_ERR_SHAPE, "GLU: halving dimension must be even, but dimension %lld is size %lld",
            (long long)d, (long long)size);
    pt_tensor *a = pt_narrow(x, d, 0, size / 2);
    pt_tensor *b = pt_narrow(x, d, size / 2, size / 2);
    pt_tensor *sb = pt_sigmoid(b);
    pt_tensor *y = a && sb ? pt_mul(a, sb) : NULL;
    pt_release(a);
    pt_release(b);
    pt_release(sb);
    return y;
}

static pt_tensor *softmax_forward(pt_module *self, const pt_tensor *x)
{
    return pt_softmax(x, ctx_of(self)->dim);
}

static pt_tensor *log_softmax_forward(pt_module *self, const pt_tensor *x)
{
    return pt_log_softmax(x, ctx_of(self)->dim);
}

static pt_tensor *softmin_forward(pt_module *self, const pt_tensor *x)
{
    pt_tensor *nx = pt_neg(x);
    pt_tensor *y = pt_softmax(nx, ctx_of(self)->dim);
    pt_release(nx);
    return y;
}

static pt_tensor *softmax2d_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    if (!PTI_CHECK_ARG(x, "Softmax2d", "input"))
        return NULL;
    if (pt_ndim(x) != 3 && pt_ndim(x) != 4)
        return pti_error_null(PT_ERR_SHAPE, "Softmax2d: expected a 3D or 4D input, got %dD",
                              pt_ndim(x));
    return pt_softmax(x, -3);
}

static void dim_repr(const pt_module *self, char *buf, size_t cap)
{
    snprintf(buf, cap, "dim=%lld", (long long)ctx_of(self)->dim);
}

static const pt_module_def glu_def = {
    .type_name = "GLU", .forward = glu_forward, .free_ctx = free, .extra_repr = dim_repr};
static const pt_module_def softmax_def = {
    .type_name = "Softmax", .forward = softmax_forward, .free_ctx = free, .extra_repr = dim_repr};
static const pt_module_def log_softmax_def = {.type_name = "LogSoftmax",
                                              .forward = log_softmax_forward,
                                              .free_ctx = free,
                                              .extra_repr = dim_repr};
static const pt_module_def softmin_def = {
    .type_name = "Softmin", .forward = softmin_forward, .free_ctx = free, .extra_repr = dim_repr};
static const pt_module_def softmax2d_def = {
    .type_name = "Softmax2d", .forward = softmax2d_forward, .free_ctx = free};

pt_module *pt_nn_glu(int64_t dim)
{
    return act_new(&glu_def, &(act_ctx){.dim = dim});
}

pt_module *pt_nn_softmax(int64_t dim)
{
    return act_new(&softmax_def, &(act_ctx){.dim = dim});
}

pt_module *pt_nn_log_softmax(int64_t dim)
{
    return act_new(&log_softmax_def, &(act_ctx){.dim = dim});
}

pt_module *pt_nn_softmin(int64_t dim)
{
    return act_new(&softmin_def, &(act_ctx){.dim = dim});
}

pt_module *pt_nn_softmax2d(void)
{
    return act_new(&softmax2d_def, NULL);
}
