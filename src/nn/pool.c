/* nn layers: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d and Upsample. */
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "layers_internal.h"
#include "module_internal.h"
#include "prometorch/nn_layers.h"
#include "prometorch/ops_conv.h"

/* A (h, w) pair as PyTorch prints what it was given: an int when both are equal (the form the
 * short constructors take), else a tuple. */
static void cat_pair(char *buf, size_t cap, const int64_t v[2])
{
    if (v[0] == v[1])
        pti_nn_catf(buf, cap, "%lld", (long long)v[0]);
    else
        pti_nn_cat_tuple(buf, cap, 2, v);
}

static pt_status check_pair(const char *op, const char *arg, const int64_t *v, int64_t min)
{
    if (!v)
        return PT_OK;
    for (int d = 0; d < 2; d++)
        if (v[d] < min)
            return pti_error(PT_ERR_INVALID_ARG, "%s: %s must be >= %lld, got %lld", op, arg,
                             (long long)min, (long long)v[d]);
    return PT_OK;
}

/* "kernel_size=K, stride=S, padding=P", the start of both pools' repr. */
static void cat_window(char *buf, size_t cap, const int64_t kernel[2], const int64_t stride[2],
                       const int64_t padding[2])
{
    pti_nn_catf(buf, cap, "kernel_size=");
    cat_pair(buf, cap, kernel);
    pti_nn_catf(buf, cap, ", stride=");
    cat_pair(buf, cap, stride);
    pti_nn_catf(buf, cap, ", padding=");
    cat_pair(buf, cap, padding);
}

/* The window checks shared by MaxPool2d and AvgPool2d: a (0, 0) stride becomes the kernel;
 * padding at most half the kernel (`kernel_what` words torch's message), stride > 0. */
static pt_status resolve_window(const char *op, const char *kernel_what, const int64_t kernel[2],
                                const int64_t padding[2], int64_t stride[2])
{
    bool stride_is_kernel = stride[0] == 0 && stride[1] == 0;
    for (int d = 0; d < 2; d++) {
        if (stride_is_kernel)
            stride[d] = kernel[d];
        if (padding[d] * 2 > kernel[d])
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: pad should be at most half of %s size, but got pad=%lld, "
                             "kernel_size=%lld",
                             op, kernel_what, (long long)padding[d], (long long)kernel[d]);
    }
    if (stride[0] <= 0 || stride[1] <= 0)
        return pti_error(PT_ERR_INVALID_ARG, "%s: stride must be > 0", op);
    return PT_OK;
}

/* ---- MaxPool2d ------------------------------------------------------------------------------- */

typedef struct {
    int64_t kernel[2];
    pt_max_pool2d_opts o; /* stride filled in (= kernel when 0), dilation 1 when 0 */
} max_pool_ctx;

static pt_tensor *max_pool_forward(pt_module *self, const pt_tensor *x)
{
    const max_pool_ctx *c = self->ctx;
    return pt_max_pool2d_ex(x, c->kernel, &c->o, NULL);
}

static void max_pool_repr(const pt_module *self, char *buf, size_t cap)
{
    const max_pool_ctx *c = self->ctx;
    cat_window(buf, cap, c->kernel, c->o.stride, c->o.padding);
    pti_nn_catf(buf, cap, ", dilation=");
    cat_pair(buf, cap, c->o.dilation);
    pti_nn_catf(buf, cap, ", ceil_mode=%s", pti_nn_bool(c->o.ceil_mode));
}

static const pt_module_def max_pool_def = {.type_name = "MaxPool2d",
                                           .forward = max_pool_forward,
                                           .free_ctx = free,
                                           .extra_repr = max_pool_repr};

pt_module *pt_nn_max_pool2d_ex(const int64_t kernel[2], const pt_max_pool2d_opts *opts)
{
    const char *op = "pt_nn_max_pool2d";
    if (!kernel)
        return pti_error_null(PT_ERR_NULL, "%s: kernel is NULL", op);
    pt_max_pool2d_opts o = opts ? *opts : (pt_max_pool2d_opts){0};
    if (check_pair(op, "kernel_size", kernel, 1) != PT_OK ||
        check_pair(op, "stride", o.stride, 0) != PT_OK ||
        check_pair(op, "padding", o.padding, 0) != PT_OK ||
        check_pair(op, "dilation", o.dilation, 0) != PT_OK ||
        resolve_window(op, "effective kernel", kernel, o.padding, o.stride) != PT_OK)
        return NULL;
    max_pool_ctx *c = pti_malloc(sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    c->o = o;
    for (int d = 0; d < 2; d++) {
        c->kernel[d] = kernel[d];
        if (c->o.dilation[d] == 0)
            c->o.dilation[d] = 1;
    }
    return pt_nn_module_new(&max_pool_def, c);
}

pt_module *pt_nn_max_pool2d(int64_t kernel, int64_t stride, int64_t padding)
{
    int64_t k[2] = {kernel, kernel};
    pt_max_pool2d_opts o = {.stride = {stride, stride}, .padding = {padding, padding}};
    return pt_nn_max_pool2d_ex(k, &o);
}

/* ---- AvgPool2d ------------------------------------------------------------------------------- */

typedef struct {
    int64_t kernel[2];
    pt_avg_pool2d_opts o;
} avg_pool_ctx;

static pt_tensor *avg_pool_forward(pt_module *self, const pt_tensor *x)
{
    const avg_pool_ctx *c = self->ctx;
    return pt_avg_pool2d_ex(x, c->kernel, &c->o);
}

static void avg_pool_repr(const pt_module *self, char *buf, size_t cap)
{
    const avg_pool_ctx *c = self->ctx;
    cat_window(buf, cap, c->kernel, c->o.stride, c->o.padding);
}

static const pt_module_def avg_pool_def = {.type_name = "AvgPool2d",
                                           .forward = avg_pool_forward,
                                           .free_ctx = free,
                                           .extra_repr = avg_pool_repr};

pt_module *pt_nn_avg_pool2d_ex(const int64_t kernel[2], const pt_avg_pool2d_opts *opts)
{
    const char *op = "pt_nn_avg_pool2d";
    if (!kernel)
        return pti_error_null(PT_ERR_NULL, "%s: kernel is NULL", op);
    pt_avg_pool2d_opts o = opts ? *opts : (pt_avg_pool2d_opts){0};
    if (check_pair(op, "kernel_size", kernel, 1) != PT_OK ||
        check_pair(op, "stride", o.stride, 0) != PT_OK ||
        check_pair(op, "padding", o.padding, 0) != PT_OK)
        return NULL;
    if (o.divisor_override < 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: divisor must be not zero", op);
    if (resolve_window(op, "kernel", kernel, o.padding, o.stride) != PT_OK)
        return NULL;
    avg_pool_ctx *c = pti_malloc(sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    c->o = o;
    memcpy(c->kernel, kernel, sizeof(c->kernel));
    return pt_nn_module_new(&avg_pool_def, c);
}

pt_module *pt_nn_avg_pool2d(int64_t kernel, int64_t stride, int64_t padding)
{
    int64_t k[2] = {kernel, kernel};
    pt_avg_pool2d_opts o = {.stride = {stride, stride}, .padding = {padding, padding}};
    return pt_nn_avg_pool2d_ex(k, &o);
}

/* ---- AdaptiveAvgPool2d ----------------------------------------------------------------------- */

typedef struct {
    int64_t size[2];
    bool as_tuple; /* given as (oH, oW): printed as a tuple */
} adaptive_ctx;

static pt_tensor *adaptive_forward(pt_module *self, const pt_tensor *x)
{
    const adaptive_ctx *c = self->ctx;
    return pt_adaptive_avg_pool2d(x, c->size);
}

static void adaptive_repr(const pt_module *self, char *buf, size_t cap)
{
    const adaptive_ctx *c = self->ctx;
    pti_nn_catf(buf, cap, "output_size=");
    if (c->as_tuple)
        pti_nn_cat_tuple(buf, cap, 2, c->size);
    else
        pti_nn_catf(buf, cap, "%lld", (long long)c->size[0]);
}

static const pt_module_def adaptive_def = {.type_name = "AdaptiveAvgPool2d",
                                           .forward = adaptive_forward,
                                           .free_ctx = free,
                                           .extra_repr = adaptive_repr};

static pt_module *adaptive_new(const int64_t size[2], bool as_tuple)
{
    const char *op = "pt_nn_adaptive_avg_pool2d";
    if (check_pair(op, "output_size", size, 1) != PT_OK)
        return NULL;
    adaptive_ctx *c = pti_malloc(sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    c->size[0] = size[0];
    c->size[1] = size[1];
    c->as_tuple = as_tuple;
    return pt_nn_module_new(&adaptive_def, c);
}

pt_module *pt_nn_adaptive_avg_pool2d(int64_t output_size)
{
    int64_t s[2] = {output_size, output_size};
    return adaptive_new(s, false);
}

pt_module *pt_nn_adaptive_avg_pool2d_hw(const int64_t output_size[2])
{
    if (!output_size)
        return pti_error_null(PT_ERR_NULL, "pt_nn_adaptive_avg_pool2d_hw: output_size is NULL");
    return adaptive_new(output_size, true);
}

/* ---- Upsample -------------------------------------------------------------------------------- */

static pt_tensor *upsample_forward(pt_module *self, const pt_tensor *x)
{
    return pt_interpolate(x, (const pt_interpolate_opts *)self->ctx);
}

static void upsample_repr(const pt_module *self, char *buf, size_t cap)
{
    const pt_interpolate_opts *o = self->ctx;
    if (o->size[0] > 0) {
        pti_nn_catf(buf, cap, "size=");
        cat_pair(buf, cap, o->size);
    } else {
        pti_nn_catf(buf, cap, "scale_factor=");
        if (o->scale_factor[0] == o->scale_factor[1]) {
            pti_nn_cat_float(buf, cap, o->scale_factor[0]);
        } else {
            pti_nn_catf(buf, cap, "(");
            pti_nn_cat_float(buf, cap, o->scale_factor[0]);
            pti_nn_catf(buf, cap, ", ");
            pti_nn_cat_float(buf, cap, o->scale_factor[1]);
            pti_nn_catf(buf, cap, ")");
        }
    }
    pti_nn_catf(buf, cap, ", mode=%s", o->mode == PT_INTERP_BILINEAR ? "bilinear" : "nearest");
}

static const pt_module_def upsample_def = {.type_name = "Upsample",
                                           .forward = upsample_forward,
                                           .free_ctx = free,
                                           .extra_repr = upsample_repr};

pt_module *pt_nn_upsample(const pt_interpolate_opts *opts)
{
    const char *op = "pt_nn_upsample";
    if (!opts)
        return pti_error_null(PT_ERR_NULL, "%s: opts is NULL (size or scale_factor is required)",
                              op);
    bool has_size = opts->size[0] != 0 || opts->size[1] != 0;
    bool has_scale = opts->scale_factor[0] != 0 || opts->scale_factor[1] != 0;
    if (has_size == has_scale)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: exactly one of size or scale_factor "
                              "should be defined",
                              op);
    if (has_size && (opts->size[0] <= 0 || opts->size[1] <= 0))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: size must be > 0, got (%lld, %lld)", op,
                              (long long)opts->size[0], (long long)opts->size[1]);
    if (has_scale && !(opts->scale_factor[0] > 0 && opts->scale_factor[1] > 0))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: scale_factor must be > 0, got (%g, %g)", op,
                              opts->scale_factor[0], opts->scale_factor[1]);
    if (opts->mode != PT_INTERP_NEAREST && opts->mode != PT_INTERP_BILINEAR)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: unknown mode %d", op, (int)opts->mode);
    if (opts->mode == PT_INTERP_NEAREST && opts->align_corners)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: align_corners option can only be set with "
                              "the interpolating modes: linear | bilinear | bicubic | trilinear",
                              op);
    pt_interpolate_opts *c = pti_malloc(sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    *c = *opts;
    return pt_nn_module_new(&upsample_def, c);
}
