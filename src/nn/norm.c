/* nn layers: BatchNorm1d/2d, InstanceNorm2d, LayerNorm, GroupNorm and RMSNorm. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "layers_internal.h"
#include "module_internal.h"
#include "prometorch/autograd.h"
#include "prometorch/nn_layers.h"
#include "prometorch/ops_elementwise.h"
#include "prometorch/ops_nn.h"
#include "prometorch/ops_reduce.h"
#include "prometorch/ops_shape.h"

#define DEFAULT_EPS 1e-5
#define DEFAULT_MOMENTUM 0.1

/* ---- BatchNorm / InstanceNorm (PyTorch's _NormBase) ------------------------------------------ */

typedef struct {
    int64_t num_features;
    double eps, momentum;
    bool momentum_none, affine, track;
    int kind; /* 1 = BatchNorm1d, 2 = BatchNorm2d, 3 = InstanceNorm2d */
    pt_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked; /* borrowed */
} norm_ctx;

static void norm_repr(const pt_module *self, char *buf, size_t cap)
{
    const norm_ctx *c = self->ctx;
    pti_nn_catf(buf, cap, "%lld, eps=", (long long)c->num_features);
    pti_nn_cat_float(buf, cap, c->eps);
    pti_nn_catf(buf, cap, ", momentum=");
    if (c->momentum_none)
        pti_nn_catf(buf, cap, "None");
    else
        pti_nn_cat_float(buf, cap, c->momentum);
    pti_nn_catf(buf, cap, ", affine=%s, track_running_stats=%s", pti_nn_bool(c->affine),
                pti_nn_bool(c->track));
}

/* Training with tracked stats: num_batches_tracked += 1 and the update factor (momentum, or
 * 1/num_batches_tracked for momentum=None). */
static pt_status count_batch(const norm_ctx *c, double *factor)
{
    *factor = c->momentum;
    pt_no_grad_begin();
    pt_status st = pt_add_scalar_(c->num_batches_tracked, 1.0);
    pt_no_grad_end();
    if (st != PT_OK)
        return st;
    if (c->momentum_none)
        *factor = 1.0 / pt_item(c->num_batches_tracked);
    return PT_OK;
}

static pt_tensor *batch_norm_forward(pt_module *self, const pt_tensor *x)
{
    const norm_ctx *c = self->ctx;
    const char *name = pt_nn_type_name(self);
    if (!PTI_CHECK_ARG(x, name, "input"))
        return NULL;
    if (c->kind == 1 && x->ndim != 2 && x->ndim != 3)
        return pti_error_null(PT_ERR_SHAPE, "%s: expected 2D or 3D input (got %dD input)", name,
                              x->ndim);
    if (c->kind == 2 && x->ndim != 4)
        return pti_error_null(PT_ERR_SHAPE, "%s: expected 4D input (got %dD input)", name, x->ndim);
    bool training = pt_nn_is_training(self);
    double factor = 0.0;
    if (training && c->track && count_batch(c, &factor) != PT_OK)
        return NULL;
    /* Without running stats PyTorch normalizes with the batch statistics in eval mode too. */
    bool use_batch = training || !c->track;
    return pt_batch_norm(x, c->running_mean, c->running_var, c->weight, c->bias, use_batch, factor,
                         c->eps);
}

/* Registers weight/bias and the running statistics in PyTorch's order. */
static pt_status norm_register(pt_module *m, norm_ctx *c)
{
    int64_t shape[1] = {c->num_features};
    if (c->affine) {
        c->weight = pti_nn_new_param(m, "weight", 1, shape, -1, 1.0);
        c->bias = c->weight ? pti_nn_new_param(m, "bias", 1, shape, -1, 0.0) : NULL;
        if (!c->bias)
            return pt_last_status();
    }
    if (c->track) {
        c->running_mean = pti_nn_new_buffer(m, "running_mean", 1, shape, PT_FLOAT32, 0.0);
        c->running_var =
            c->running_mean ? pti_nn_new_buffer(m, "running_var", 1, shape, PT_FLOAT32, 1.0) : NULL;
        c->num_batches_tracked =
            c->running_var ? pti_nn_new_buffer(m, "num_batches_tracked", 0, shape, PT_INT64, 0.0)
                           : NULL;
        if (!c->num_batches_tracked)
            return pt_last_status();
    }
    return PT_OK;
}

static pt_module *norm_build(const pt_module_def *def, const char *op, norm_ctx *c)
{
    if (c->num_features <= 0) {
        long long n = (long long)c->num_features;
        free(c);
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: num_features must be > 0, got %lld", op, n);
    }
    if (!(c->eps >= 0)) {
        double eps = c->eps;
        free(c);
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: eps must be >= 0, got %g", op, eps);
    }
    pt_module *m = pt_nn_module_new(def, c);
    if (!m)
        return NULL;
    if (norm_register(m, c) != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

static const pt_module_def batch_norm1d_def = {.type_name = "BatchNorm1d",
                                               .forward = batch_norm_forward,
                                               .free_ctx = free,
                                               .extra_repr = norm_repr};
static const pt_module_def batch_norm2d_def = {.type_name = "BatchNorm2d",
                                               .forward = batch_norm_forward,
                                               .free_ctx = free,
                                               .extra_repr = norm_repr};

static pt_module *batch_norm_nd(int kind, int64_t n, const pt_nn_batch_norm_opts *opts)
{
    const char *op = kind == 1 ? "pt_nn_batch_norm1d" : "pt_nn_batch_norm2d";
    pt_nn_batch_norm_opts o = opts ? *opts : (pt_nn_batch_norm_opts){0};
    norm_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    c->kind = kind;
    c->num_features = n;
    c->eps = o.eps == 0 ? DEFAULT_EPS : o.eps;
    c->momentum = o.has_momentum ? o.momentum : DEFAULT_MOMENTUM;
    c->momentum_none = o.momentum_none;
    c->affine = !o.no_affine;
    c->track = !o.no_track_running_stats;
    return norm_build(kind == 1 ? &batch_norm1d_def : &batch_norm2d_def, op, c);
}

pt_module *pt_nn_batch_norm1d(int64_t num_features)
{
    return batch_norm_nd(1, num_features, NULL);
}
pt_module *pt_nn_batch_norm1d_ex(int64_t num_features, const pt_nn_batch_norm_opts *opts)
{
    return batch_norm_nd(1, num_features, opts);
}
pt_module *pt_nn_batch_norm2d(int64_t num_features)
{
    return batch_norm_nd(2, num_features, NULL);
}
pt_module *pt_nn_batch_norm2d_ex(int64_t num_features, const pt_nn_batch_norm_opts *opts)
{
    return batch_norm_nd(2, num_features, opts);
}

/* ---- LayerNorm / RMSNorm --------------------------------------------------------------------- */

typedef struct {
    int n;
    int64_t shape[PT_MAX_DIMS];
    bool has_eps; /* RMSNorm: eps=None when false */
    double eps;
    bool affine;
    pt_tensor *weight, *bias; /* borrowed, may be NULL */
} layer_norm_ctx;

static pt_tensor *layer_norm_forward(pt_module *self, const pt_tensor *x)
{
    const layer_norm_ctx *c = self->ctx;
    return pt_layer_norm(x, c->n, c->shape, c->weight, c->bias, c->eps);
}

static pt_tensor *rms_norm_forward(pt_module *self, const pt_tensor *x)
{
    const layer_norm_ctx *c = self->ctx;
    return pt_rms_norm(x, c->n, c->shape, c->weight, c->has_eps ? c->eps : -1.0);
}

static void layer_norm_repr(const pt_module *self, char *buf, size_t cap)
{
    const layer_norm_ctx *c = self->ctx;
    pti_nn_cat_tuple(buf, cap, c->n, c->shape);
    pti_nn_catf(buf, cap, ", eps=");
    if (c->has_eps)
        pti_nn_cat_float(buf, cap, c->eps);
    else
        pti_nn_catf(buf, cap, "None");
    pti_nn_catf(buf, cap, ", elementwise_affine=%s", pti_nn_bool(c->affine));
}

static const pt_module_def layer_norm_def = {.type_name = "LayerNorm",
                                             .forward = layer_norm_forward,
                                             .free_ctx = free,
                                             .extra_repr = layer_norm_repr};
static const pt_module_def rms_norm_def = {.type_name = "RMSNorm",
                                           .forward = rms_norm_forward,
                                           .free_ctx = free,
                                           .extra_repr = layer_norm_repr};

static pt_module *shape_norm(const pt_module_def *def, const char *op, int n, const int64_t *shape,
                             layer_norm_ctx *c, bool bias)
{
    if (n < 1 || n > PT_MAX_DIMS || !shape) {
        free(c);
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: normalized_shape must have 1 to %d dims, "
                              "got %d",
                              op, PT_MAX_DIMS, n);
    }
    for (int i = 0; i < n; i++)
        if (shape[i] <= 0) {
            free(c);
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  "%s: normalized_shape[%d] = %lld must be "
                                  "> 0",
                                  op, i, (long long)shape[i]);
        }
    if (c->has_eps && !(c->eps >= 0)) {
        free(c);
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: eps must be >= 0", op);
    }
    c->n = n;
    memcpy(c->shape, shape, (size_t)n * sizeof(int64_t));
    pt_module *m = pt_nn_module_new(def, c);
    if (!m)
        return NULL;
    if (c->affine) {
        c->weight = pti_nn_new_param(m, "weight", n, shape, -1, 1.0);
        if (c->weight && bias)
            c->bias = pti_nn_new_param(m, "bias", n, shape, -1, 0.0);
        if (!c->weight || (bias && !c->bias)) {
            pt_nn_free(m);
            return NULL;
        }
    }
    return m;
}

pt_module *pt_nn_layer_norm_ex(int n, const int64_t *normalized_shape,
                               const pt_nn_layer_norm_opts *opts)
{
    pt_nn_layer_norm_opts o = opts ? *opts : (pt_nn_layer_norm_opts){0};
    layer_norm_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_layer_norm: out of memory");
    c->has_eps = true;
    c->eps = o.eps == 0 ? DEFAULT_EPS : o.eps;
    c->affine = !o.no_elementwise_affine;
    return shape_norm(&layer_norm_def, "pt_nn_layer_norm", n, normalized_shape, c, !o.no_bias);
}

pt_module *pt_nn_layer_norm(int n, const int64_t *normalized_shape)
{
    return pt_nn_layer_norm_ex(n, normalized_shape, NULL);
}

pt_module *pt_nn_rms_norm_ex(int n, const int64_t *normalized_shape,
                             const pt_nn_rms_norm_opts *opts)
{
    pt_nn_rms_norm_opts o = opts ? *opts : (pt_nn_rms_norm_opts){0};
    layer_norm_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_rms_norm: out of memory");
    c->has_eps = o.has_eps;
    c->eps = o.eps;
    c->affine = !o.no_elementwise_affine;
    return shape_norm(&rms_norm_def, "pt_nn_rms_norm", n, normalized_shape, c, false);
}

pt_module *pt_nn_rms_norm(int n, const int64_t *normalized_shape)
{
    return pt_nn_rms_norm_ex(n, normalized_shape, NULL);
}

/* ---- GroupNorm ------------------------------------------------------------------------------- */

typedef struct {
    int64_t groups, channels;
    double eps;
    pt_tensor *weight, *bias;
} group_norm_ctx;

static pt_tensor *group_norm_forward(pt_module *self, const pt_tensor *x)
{
    const group_norm_ctx *c = self->ctx;
    return pt_group_norm(x, c->groups, c->weight, c->bias, c->eps);
}

static void group_norm_repr(const pt_module *self, char *buf, size_t cap)
{
    const group_norm_ctx *c = self->ctx;
    pti_nn_catf(buf, cap, "%lld, %lld, eps=", (long long)c->groups, (long long)c->channels);
    pti_nn_cat_float(buf, cap, c->eps);
    pti_nn_catf(buf, cap, ", affine=%s", pti_nn_bool(c->weight != NULL));
}

static const pt_module_def group_norm_def = {.type_name = "GroupNorm",
                                             .forward = group_norm_forward,
                                             .free_ctx = free,
                                             .extra_repr = group_norm_repr};

pt_module *pt_nn_group_norm_ex(int64_t num_groups, int64_t num_channels,
                               const pt_nn_group_norm_opts *opts)
{
    const char *op = "pt_nn_group_norm";
    pt_nn_group_norm_opts o = opts ? *opts : (pt_nn_group_norm_opts){0};
    if (num_groups <= 0 || num_channels <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: num_groups (%lld) and num_channels (%lld) "
                              "must be > 0",
                              op, (long long)num_groups, (long long)num_channels);
    if (num_channels % num_groups != 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: num_channels (%lld) must be divisible by "
                              "num_groups (%lld)",
                              op, (long long)num_channels, (long long)num_groups);
    if (!(o.eps >= 0))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: eps must be >= 0, got %g", op, o.eps);
    group_norm_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    c->groups = num_groups;
    c->channels = num_channels;
    c->eps = o.eps == 0 ? DEFAULT_EPS : o.eps;
    pt_module *m = pt_nn_module_new(&group_norm_def, c);
    if (!m || o.no_affine)
        return m;
    int64_t shape[1] = {num_channels};
    c->weight = pti_nn_new_param(m, "weight", 1, shape, -1, 1.0);
    c->bias = c->weight ? pti_nn_new_param(m, "bias", 1, shape, -1, 0.0) : NULL;
    if (!c->bias) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

pt_module *pt_nn_group_norm(int64_t num_groups, int64_t num_channels)
{
    return pt_nn_group_norm_ex(num_groups, num_channels, NULL);
}

/* ---- InstanceNorm2d -------------------------------------------------------------------------- */

/* running = (1 - m) * running + m * mean over the batch of the per-instance statistics (what
 * PyTorch's instance_norm does with its repeated running stats). x is 4-D. */
static pt_status update_instance_stats(const norm_ctx *c, const pt_tensor *x)
{
    int64_t hw[2] = {2, 3}, n0 = 0;
    pt_no_grad_begin();
    pt_tensor *mean = pt_mean_dim(x, 2, hw, false);
    pt_tensor *var = pt_var(x, 2, hw, 1, false);
    pt_tensor *mbar = pt_mean_dim(mean, 1, &n0, false), *vbar = pt_mean_dim(var, 1, &n0, false);
    pt_tensor *ms = pt_mul_scalar(mbar, c->momentum), *vs = pt_mul_scalar(vbar, c->momentum);
    pt_status st = (ms && vs) ? PT_OK : pt_last_status();
    if (st == PT_OK)
        st = pt_mul_scalar_(c->running_mean, 1.0 - c->momentum);
    if (st == PT_OK)
        st = pt_add_(c->running_mean, ms);
    if (st == PT_OK)
        st = pt_mul_scalar_(c->running_var, 1.0 - c->momentum);
    if (st == PT_OK)
        st = pt_add_(c->running_var, vs);
    pt_no_grad_end();
    pt_release(mean);
    pt_release(var);
    pt_release(mbar);
    pt_release(vbar);
    pt_release(ms);
    pt_release(vs);
    return st;
}

static pt_tensor *instance_norm4d(const norm_ctx *c, bool training, const pt_tensor *x)
{
    if (c->affine && x->shape[1] != c->num_features)
        return pti_error_null(PT_ERR_SHAPE,
                              "InstanceNorm2d: expected input's size at dim=1 to "
                              "match num_features (%lld), but got: %lld.",
                              (long long)c->num_features, (long long)x->shape[1]);
    if (c->track && !training) /* per-channel normalization with the running statistics */
        return pt_batch_norm(x, c->running_mean, c->running_var, c->weight, c->bias, false, 0.0,
                             c->eps);
    if (c->track && x->shape[1] != c->num_features)
        return pti_error_null(PT_ERR_SHAPE,
                              "InstanceNorm2d: expected input's size at dim=1 to "
                              "match num_features (%lld), but got: %lld.",
                              (long long)c->num_features, (long long)x->shape[1]);
    if (c->track && update_instance_stats(c, x) != PT_OK)
        return NULL;
    return pt_group_norm(x, x->shape[1], c->weight, c->bias, c->eps);
}

static pt_tensor *instance_norm_forward(pt_module *self, const pt_tensor *x)
{
    const norm_ctx *c = self->ctx;
    if (!PTI_CHECK_ARG(x, "InstanceNorm2d", "input"))
        return NULL;
    if (x->ndim != 3 && x->ndim != 4)
        return pti_error_null(PT_ERR_SHAPE,
                              "InstanceNorm2d: expected 3D or 4D input (got %dD "
                              "input)",
                              x->ndim);
    bool training = pt_nn_is_training(self);
    if (x->ndim == 4)
        return instance_norm4d(c, training, x);
    pt_tensor *x4 = pt_unsqueeze(x, 0);
    pt_tensor *y4 = x4 ? instance_norm4d(c, training, x4) : NULL;
    pt_release(x4);
    pt_tensor *y = y4 ? pt_squeeze_dim(y4, 0) : NULL;
    pt_release(y4);
    return y;
}

static const pt_module_def instance_norm2d_def = {.type_name = "InstanceNorm2d",
                                                  .forward = instance_norm_forward,
                                                  .free_ctx = free,
                                                  .extra_repr = norm_repr};

pt_module *pt_nn_instance_norm2d_ex(int64_t num_features, const pt_nn_instance_norm_opts *opts)
{
    pt_nn_instance_norm_opts o = opts ? *opts : (pt_nn_instance_norm_opts){0};
    norm_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_instance_norm2d: out of memory");
    c->kind = 3;
    c->num_features = num_features;
    c->eps = o.eps == 0 ? DEFAULT_EPS : o.eps;
    c->momentum = o.has_momentum ? o.momentum : DEFAULT_MOMENTUM;
    c->affine = o.affine;
    c->track = o.track_running_stats;
    return norm_build(&instance_norm2d_def, "pt_nn_instance_norm2d", c);
}

pt_module *pt_nn_instance_norm2d(int64_t num_features)
{
    return pt_nn_instance_norm2d_ex(num_features, NULL);
}
