/* nn layers: Conv1d, Conv2d and ConvTranspose2d (PyTorch's _ConvNd parameters, init, repr and
 * padding modes). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "layers_internal.h"
#include "module_internal.h"
#include "prometorch/nn_layers.h"
#include "prometorch/ops_conv.h"

typedef enum { PADMODE_ZEROS, PADMODE_REFLECT, PADMODE_REPLICATE } conv_padmode;

typedef struct {
    int nd; /* spatial dims: 1 or 2 */
    bool transposed;
    int64_t in, out;
    int64_t kernel[2], stride[2], padding[2], dilation[2], output_padding[2], groups;
    pt_conv_padding_mode padding_type;
    conv_padmode padmode;
    pt_tensor *weight, *bias; /* borrowed */
} conv_ctx;

static const char *const padmode_names[] = {"zeros", "reflect", "replicate"};

/* F.pad amounts for a non-zeros padding_mode, PyTorch's _reversed_padding_repeated_twice: last
 * dim first; padding='same' splits the total d*(k-1) with the extra cell at the end. */
static int reversed_padding(const conv_ctx *c, int64_t *pad)
{
    int n = 0;
    for (int d = c->nd - 1; d >= 0; d--) {
        int64_t lo = c->padding[d], hi = c->padding[d];
        if (c->padding_type == PT_CONV_PADDING_SAME) {
            int64_t total = c->dilation[d] * (c->kernel[d] - 1);
            lo = total / 2;
            hi = total - lo;
        } else if (c->padding_type == PT_CONV_PADDING_VALID) {
            lo = hi = 0;
        }
        pad[n++] = lo;
        pad[n++] = hi;
    }
    return n;
}

static pt_tensor *conv_run(const conv_ctx *c, const pt_tensor *x, const pt_conv_opts *o)
{
    return c->nd == 1 ? pt_conv1d_ex(x, c->weight, c->bias, o)
                      : pt_conv2d_ex(x, c->weight, c->bias, o);
}

static pt_conv_opts conv_op_opts(const conv_ctx *c, bool padded)
{
    pt_conv_opts o = {.groups = c->groups, .padding_mode = c->padding_type};
    for (int d = 0; d < 2; d++) {
        o.stride[d] = c->stride[d];
        o.padding[d] = c->padding[d];
        o.dilation[d] = c->dilation[d];
    }
    if (padded) { /* the input was already padded with pt_pad */
        o.padding_mode = PT_CONV_PADDING_EXPLICIT;
        o.padding[0] = o.padding[1] = 0;
    }
    return o;
}

static pt_tensor *conv_forward(pt_module *self, const pt_tensor *x)
{
    const conv_ctx *c = self->ctx;
    if (!PTI_CHECK_ARG(x, pt_nn_type_name(self), "input"))
        return NULL;
    if (c->transposed)
        return pt_conv_transpose2d(x, c->weight, c->bias, c->stride, c->padding, c->output_padding,
                                   c->groups, c->dilation);
    if (c->padmode == PADMODE_ZEROS) {
        pt_conv_opts o = conv_op_opts(c, false);
        return conv_run(c, x, &o);
    }
    int64_t pad[4];
    int n = reversed_padding(c, pad);
    pt_tensor *xp =
        pt_pad(x, n, pad, c->padmode == PADMODE_REFLECT ? PT_PAD_REFLECT : PT_PAD_REPLICATE, 0.0);
    if (!xp)
        return NULL;
    pt_conv_opts o = conv_op_opts(c, true);
    pt_tensor *y = conv_run(c, xp, &o);
    pt_release(xp);
    return y;
}

static bool all_equal(int n, const int64_t *v, int64_t x)
{
    for (int i = 0; i < n; i++)
        if (v[i] != x)
            return false;
    return true;
}

static void conv_repr(const pt_module *self, char *buf, size_t cap)
{
    const conv_ctx *c = self->ctx;
    int n = c->nd;
    pti_nn_catf(buf, cap, "%lld, %lld, kernel_size=", (long long)c->in, (long long)c->out);
    pti_nn_cat_tuple(buf, cap, n, c->kernel);
    pti_nn_catf(buf, cap, ", stride=");
    pti_nn_cat_tuple(buf, cap, n, c->stride);
    if (c->padding_type != PT_CONV_PADDING_EXPLICIT) {
        pti_nn_catf(buf, cap, ", padding=%s",
                    c->padding_type == PT_CONV_PADDING_SAME ? "same" : "valid");
    } else if (!all_equal(n, c->padding, 0)) {
        pti_nn_catf(buf, cap, ", padding=");
        pti_nn_cat_tuple(buf, cap, n, c->padding);
    }
    if (!all_equal(n, c->dilation, 1)) {
        pti_nn_catf(buf, cap, ", dilation=");
        pti_nn_cat_tuple(buf, cap, n, c->dilation);
    }
    if (!all_equal(n, c->output_padding, 0)) {
        pti_nn_catf(buf, cap, ", output_padding=");
        pti_nn_cat_tuple(buf, cap, n, c->output_padding);
    }
    if (c->groups != 1)
        pti_nn_catf(buf, cap, ", groups=%lld", (long long)c->groups);
    if (!c->bias)
        pti_nn_catf(buf, cap, ", bias=False");
    if (c->padmode != PADMODE_ZEROS)
        pti_nn_catf(buf, cap, ", padding_mode=%s", padmode_names[c->padmode]);
}

static const pt_module_def conv1d_def = {
    .type_name = "Conv1d", .forward = conv_forward, .free_ctx = free, .extra_repr = conv_repr};
static const pt_module_def conv2d_def = {
    .type_name = "Conv2d", .forward = conv_forward, .free_ctx = free, .extra_repr = conv_repr};
static const pt_module_def conv_transpose2d_def = {.type_name = "ConvTranspose2d",
                                                   .forward = conv_forward,
                                                   .free_ctx = free,
                                                   .extra_repr = conv_repr};

static pt_status parse_padmode(const char *op, const char *name, conv_padmode *out)
{
    if (!name || strcmp(name, "zeros") == 0) {
        *out = PADMODE_ZEROS;
        return PT_OK;
    }
    for (int i = 1; i < 3; i++)
        if (strcmp(name, padmode_names[i]) == 0) {
            *out = (conv_padmode)i;
            return PT_OK;
        }
    if (strcmp(name, "circular") == 0)
        return pti_error(PT_ERR_UNSUPPORTED, "%s: padding_mode 'circular' is not supported", op);
    return pti_error(PT_ERR_INVALID_ARG,
                     "%s: padding_mode must be one of 'zeros', 'reflect', "
                     "'replicate' or 'circular', but got '%s'",
                     op, name);
}

/* Checks the sizes (zero stride/dilation/groups already mapped to 1). */
static pt_status check_conv(const char *op, const conv_ctx *c)
{
    if (c->in <= 0 || c->out <= 0)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: in_channels (%lld) and out_channels (%lld) "
                         "must be > 0",
                         op, (long long)c->in, (long long)c->out);
    if (c->groups <= 0)
        return pti_error(PT_ERR_INVALID_ARG, "%s: groups must be a positive integer, got %lld", op,
                         (long long)c->groups);
    if (c->in % c->groups != 0)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: in_channels (%lld) must be divisible by groups "
                         "(%lld)",
                         op, (long long)c->in, (long long)c->groups);
    if (c->out % c->groups != 0)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: out_channels (%lld) must be divisible by groups "
                         "(%lld)",
                         op, (long long)c->out, (long long)c->groups);
    for (int d = 0; d < c->nd; d++) {
        if (c->kernel[d] <= 0 || c->stride[d] <= 0 || c->dilation[d] <= 0)
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: kernel_size (%lld), stride (%lld) and "
                             "dilation (%lld) must be > 0",
                             op, (long long)c->kernel[d], (long long)c->stride[d],
                             (long long)c->dilation[d]);
        if (c->padding[d] < 0 || c->output_padding[d] < 0)
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: padding (%lld) and output_padding (%lld) "
                             "must be >= 0",
                             op, (long long)c->padding[d], (long long)c->output_padding[d]);
        if (c->padding_type == PT_CONV_PADDING_SAME && c->stride[d] != 1)
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: padding='same' is not supported for strided "
                             "convolutions",
                             op);
    }
    if (c->padding_type != PT_CONV_PADDING_EXPLICIT && c->padding_type != PT_CONV_PADDING_SAME &&
        c->padding_type != PT_CONV_PADDING_VALID)
        return pti_error(PT_ERR_INVALID_ARG, "%s: unknown padding type %d", op,
                         (int)c->padding_type);
    return PT_OK;
}

/* Creates the module and its weight/bias with PyTorch's reset_parameters: kaiming_uniform_
 * (a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both, fan_in = weight.size(1) * k. */
static pt_module *conv_build(const pt_module_def *def, const char *op, conv_ctx *c, bool bias)
{
    pt_status st = check_conv(op, c);
    if (st != PT_OK) {
        free(c);
        return NULL;
    }
    pt_module *m = pt_nn_module_new(def, c);
    if (!m)
        return NULL;
    int64_t wshape[4] = {c->transposed ? c->in : c->out,
                         c->transposed ? c->out / c->groups : c->in / c->groups, c->kernel[0],
                         c->kernel[1]};
    int64_t fan_in = wshape[1] * c->kernel[0] * (c->nd == 2 ? c->kernel[1] : 1);
    double bound = 1.0 / sqrt((double)fan_in);
    return pti_nn_add_weight_bias(m, 2 + c->nd, wshape, c->out, bias, bound, &c->weight, &c->bias);
}

static int64_t or_one(int64_t v)
{
    return v == 0 ? 1 : v;
}

static pt_module *conv_nd(const pt_module_def *def, const char *op, int nd, int64_t in, int64_t out,
                          const int64_t *kernel, const pt_nn_conv_opts *opts)
{
    pt_nn_conv_opts o = opts ? *opts : (pt_nn_conv_opts){0};
    conv_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    c->nd = nd;
    c->in = in;
    c->out = out;
    c->groups = or_one(o.groups);
    c->padding_type = o.padding_type;
    c->kernel[1] = c->stride[1] = c->dilation[1] = 1;
    for (int d = 0; d < nd; d++) {
        c->kernel[d] = kernel[d];
        c->stride[d] = or_one(o.stride[d]);
        c->padding[d] = o.padding[d];
        c->dilation[d] = or_one(o.dilation[d]);
    }
    if (parse_padmode(op, o.padding_mode, &c->padmode) != PT_OK) {
        free(c);
        return NULL;
    }
    return conv_build(def, op, c, !o.no_bias);
}

pt_module *pt_nn_conv2d_ex(int64_t in, int64_t out, const int64_t kernel[2],
                           const pt_nn_conv_opts *opts)
{
    if (!kernel)
        return pti_error_null(PT_ERR_NULL, "pt_nn_conv2d_ex: kernel is NULL");
    return conv_nd(&conv2d_def, "pt_nn_conv2d", 2, in, out, kernel, opts);
}

pt_module *pt_nn_conv2d(int64_t in, int64_t out, int kernel, int stride, int padding, bool bias)
{
    int64_t k[2] = {kernel, kernel};
    if (stride <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_conv2d: stride must be > 0, got %d",
                              stride);
    pt_nn_conv_opts o = {
        .stride = {stride, stride}, .padding = {padding, padding}, .no_bias = !bias};
    return conv_nd(&conv2d_def, "pt_nn_conv2d", 2, in, out, k, &o);
}

pt_module *pt_nn_conv1d_ex(int64_t in, int64_t out, int64_t kernel, const pt_nn_conv_opts *opts)
{
    return conv_nd(&conv1d_def, "pt_nn_conv1d", 1, in, out, &kernel, opts);
}

pt_module *pt_nn_conv1d(int64_t in, int64_t out, int kernel, int stride, int padding, bool bias)
{
    int64_t k = kernel;
    if (stride <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_conv1d: stride must be > 0, got %d",
                              stride);
    pt_nn_conv_opts o = {.stride = {stride}, .padding = {padding}, .no_bias = !bias};
    return conv_nd(&conv1d_def, "pt_nn_conv1d", 1, in, out, &k, &o);
}

pt_module *pt_nn_conv_transpose2d_ex(int64_t in, int64_t out, const int64_t kernel[2],
                                     const pt_nn_conv_transpose_opts *opts)
{
    const char *op = "pt_nn_conv_transpose2d";
    if (!kernel)
        return pti_error_null(PT_ERR_NULL, "%s: kernel is NULL", op);
    pt_nn_conv_transpose_opts o = opts ? *opts : (pt_nn_conv_transpose_opts){0};
    conv_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    c->nd = 2;
    c->transposed = true;
    c->in = in;
    c->out = out;
    c->groups = or_one(o.groups);
    for (int d = 0; d < 2; d++) {
        c->kernel[d] = kernel[d];
        c->stride[d] = or_one(o.stride[d]);
        c->padding[d] = o.padding[d];
        c->output_padding[d] = o.output_padding[d];
        c->dilation[d] = or_one(o.dilation[d]);
        if (c->output_padding[d] >= c->stride[d] && c->output_padding[d] >= c->dilation[d]) {
            free(c);
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  "%s: output_padding (%lld) must be smaller "
                                  "than either stride (%lld) or dilation (%lld)",
                                  op, (long long)o.output_padding[d],
                                  (long long)or_one(o.stride[d]), (long long)or_one(o.dilation[d]));
        }
    }
    return conv_build(&conv_transpose2d_def, op, c, !o.no_bias);
}

pt_module *pt_nn_conv_transpose2d(int64_t in, int64_t out, int kernel, int stride, int padding,
                                  bool bias)
{
    int64_t k[2] = {kernel, kernel};
    if (stride <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_conv_transpose2d: stride must be > 0, "
                              "got %d",
                              stride);
    pt_nn_conv_transpose_opts o = {
        .stride = {stride, stride}, .padding = {padding, padding}, .no_bias = !bias};
    return pt_nn_conv_transpose2d_ex(in, out, k, &o);
}
