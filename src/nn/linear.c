/* nn layers: Linear, Bilinear, Identity, Flatten, Unflatten and Dropout. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "layers_internal.h"
#include "module_internal.h"
#include "prometorch/autograd.h"
#include "prometorch/nn_layers.h"
#include "prometorch/ops_elementwise.h"
#include "prometorch/ops_linalg.h"
#include "prometorch/ops_nn.h"
#include "prometorch/ops_reduce.h"
#include "prometorch/ops_shape.h"

/* ---- Linear ---------------------------------------------------------------------------------- */

typedef struct {
    int64_t in, out;
    pt_tensor *weight, *bias; /* borrowed from the module; bias NULL when bias=False */
} linear_ctx;

/* x [..., in] -> [..., out]: one addmm on the rows (a reshape view for contiguous input). */
static pt_tensor *linear_forward(pt_module *self, const pt_tensor *x)
{
    linear_ctx *c = self->ctx;
    if (!PTI_CHECK_ARG(x, "Linear", "input"))
        return NULL;
    if (x->ndim == 0 || x->shape[x->ndim - 1] != c->in) {
        char shp[128] = "";
        pti_nn_cat_tuple(shp, sizeof(shp), x->ndim, x->shape);
        return pti_error_null(PT_ERR_SHAPE,
                              "Linear: input shape %s does not end in "
                              "in_features=%lld",
                              shp, (long long)c->in);
    }
    pt_tensor *wt = pt_t(c->weight);
    if (!wt)
        return NULL;
    if (x->ndim == 1 || !c->bias) {
        pt_tensor *y = pt_matmul(x, wt);
        pt_release(wt);
        if (!y || !c->bias)
            return y;
        pt_tensor *r = pt_add(y, c->bias);
        pt_release(y);
        return r;
    }
    if (x->ndim == 2) {
        pt_tensor *y = pt_addmm(c->bias, x, wt);
        pt_release(wt);
        return y;
    }
    int64_t shape2[2] = {pt_numel(x) / c->in, c->in};
    pt_tensor *x2 = pt_reshape(x, 2, shape2);
    pt_tensor *y2 = pt_addmm(c->bias, x2, wt);
    pt_release(x2);
    pt_release(wt);
    if (!y2)
        return NULL;
    int64_t oshape[PT_MAX_DIMS];
    memcpy(oshape, x->shape, (size_t)x->ndim * sizeof(int64_t));
    oshape[x->ndim - 1] = c->out;
    pt_tensor *y = pt_reshape(y2, x->ndim, oshape);
    pt_release(y2);
    return y;
}

static void linear_repr(const pt_module *self, char *buf, size_t cap)
{
    const linear_ctx *c = self->ctx;
    pti_nn_catf(buf, cap, "in_features=%lld, out_features=%lld, bias=%s", (long long)c->in,
                (long long)c->out, pti_nn_bool(c->bias != NULL));
}

static const pt_module_def linear_def = {
    .type_name = "Linear", .forward = linear_forward, .free_ctx = free, .extra_repr = linear_repr};

pt_module *pt_nn_linear(int64_t in, int64_t out, bool bias)
{
    if (in <= 0 || out <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_linear: in_features (%lld) and "
                              "out_features (%lld) must be > 0",
                              (long long)in, (long long)out);
    linear_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_linear: out of memory");
    c->in = in;
    c->out = out;
    pt_module *m = pt_nn_module_new(&linear_def, c);
    if (!m)
        return NULL;
    /* kaiming_uniform_(a=sqrt(5)) gives bound 1/sqrt(fan_in); the bias uses the same bound. */
    double bound = 1.0 / sqrt((double)in);
    int64_t wshape[2] = {out, in};
    return pti_nn_add_weight_bias(m, 2, wshape, out, bias, bound, &c->weight, &c->bias);
}

/* ---- Bilinear -------------------------------------------------------------------------------- */

typedef struct {
    int64_t in1, in2, out;
    pt_tensor *weight, *bias;
} bilinear_ctx;

/* y[b, o] = sum_j (x1 @ W')[b, o, j] * x2[b, j] with W' = W permuted to [in1, out * in2]. */
static pt_tensor *bilinear_rows(const bilinear_ctx *c, const pt_tensor *x1, const pt_tensor *x2)
{
    pt_tensor *wp = pt_transpose(c->weight, 0, 1); /* [in1, out, in2] */
    int64_t wshape[2] = {c->in1, c->out * c->in2};
    pt_tensor *w2 = pt_reshape(wp, 2, wshape);
    pt_release(wp);
    pt_tensor *t = pt_matmul(x1, w2); /* [B, out * in2] */
    pt_release(w2);
    if (!t)
        return NULL;
    int64_t tshape[3] = {t->shape[0], c->out, c->in2};
    pt_tensor *t3 = pt_reshape(t, 3, tshape);
    pt_release(t);
    pt_tensor *x2u = pt_unsqueeze(x2, 1); /* [B, 1, in2] */
    pt_tensor *prod = pt_mul(t3, x2u);
    pt_release(t3);
    pt_release(x2u);
    int64_t dim = 2;
    pt_tensor *y = pt_sum_dim(prod, 1, &dim, false);
    pt_release(prod);
    if (!y || !c->bias)
        return y;
    pt_tensor *r = pt_add(y, c->bias);
    pt_release(y);
    return r;
}

static pt_tensor *flatten_rows(const pt_tensor *x, int64_t features)
{
    int64_t shape[2] = {features ? pt_numel(x) / features : 0, features};
    return pt_reshape(x, 2, shape);
}

static pt_status bilinear_forward_n(pt_module *self, int n_in, const pt_tensor *const *in,
                                    int n_out, pt_tensor **out)
{
    bilinear_ctx *c = self->ctx;
    if (n_in != 2 || n_out != 1)
        return pti_error(PT_ERR_INVALID_ARG,
                         "Bilinear: expects 2 inputs and 1 output, got %d "
                         "and %d",
                         n_in, n_out);
    const pt_tensor *x1 = in[0], *x2 = in[1];
    if (!PTI_CHECK_ARG(x1, "Bilinear", "input1") || !PTI_CHECK_ARG(x2, "Bilinear", "input2"))
        return PT_ERR_NULL;
    bool ok = x1->ndim >= 1 && x1->ndim == x2->ndim && x1->shape[x1->ndim - 1] == c->in1 &&
              x2->shape[x2->ndim - 1] == c->in2;
    for (int d = 0; ok && d < x1->ndim - 1; d++)
        ok = x1->shape[d] == x2->shape[d];
    if (!ok) {
        char s1[128] = "", s2[128] = "";
        pti_nn_cat_tuple(s1, sizeof(s1), x1->ndim, x1->shape);
        pti_nn_cat_tuple(s2, sizeof(s2), x2->ndim, x2->shape);
        return pti_error(PT_ERR_SHAPE,
                         "Bilinear: input shapes %s and %s do not fit "
                         "in1_features=%lld, in2_features=%lld (same leading dims expected)",
                         s1, s2, (long long)c->in1, (long long)c->in2);
    }
    pt_tensor *a = flatten_rows(x1, c->in1), *b = flatten_rows(x2, c->in2);
    pt_tensor *y2 = (a && b) ? bilinear_rows(c, a, b) : NULL;
    pt_release(a);
    pt_release(b);
    if (!y2)
        return pt_last_status();
    int64_t oshape[PT_MAX_DIMS];
    memcpy(oshape, x1->shape, (size_t)x1->ndim * sizeof(int64_t));
    oshape[x1->ndim - 1] = c->out;
    out[0] = pt_reshape(y2, x1->ndim, oshape);
    pt_release(y2);
    return out[0] ? PT_OK : pt_last_status();
}

static void bilinear_repr(const pt_module *self, char *buf, size_t cap)
{
    const bilinear_ctx *c = self->ctx;
    pti_nn_catf(buf, cap, "in1_features=%lld, in2_features=%lld, out_features=%lld, bias=%s",
                (long long)c->in1, (long long)c->in2, (long long)c->out,
                pti_nn_bool(c->bias != NULL));
}

static const pt_module_def bilinear_def = {.type_name = "Bilinear",
                                           .forward_n = bilinear_forward_n,
                                           .free_ctx = free,
                                           .extra_repr = bilinear_repr};

pt_module *pt_nn_bilinear(int64_t in1, int64_t in2, int64_t out, bool bias)
{
    if (in1 <= 0 || in2 <= 0 || out <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_bilinear: in1_features (%lld), "
                              "in2_features (%lld) and out_features (%lld) must be > 0",
                              (long long)in1, (long long)in2, (long long)out);
    bilinear_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_bilinear: out of memory");
    c->in1 = in1;
    c->in2 = in2;
    c->out = out;
    pt_module *m = pt_nn_module_new(&bilinear_def, c);
    if (!m)
        return NULL;
    double bound = 1.0 / sqrt((double)in1);
    int64_t wshape[3] = {out, in1, in2};
    return pti_nn_add_weight_bias(m, 3, wshape, out, bias, bound, &c->weight, &c->bias);
}

/* ---- Identity -------------------------------------------------------------------------------- */

static pt_tensor *identity_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    if (!PTI_CHECK_ARG(x, "Identity", "input"))
        return NULL;
    /* PyTorch returns the input object itself; an alias view is the equivalent new reference
     * (it shares x's data and passes gradients through). */
    return pt_view(x, x->ndim, x->shape);
}

static const pt_module_def identity_def = {.type_name = "Identity", .forward = identity_forward};

pt_module *pt_nn_identity(void)
{
    return pt_nn_module_new(&identity_def, NULL);
}

/* ---- Flatten / Unflatten --------------------------------------------------------------------- */

typedef struct {
    int64_t start, end;
} flatten_ctx;

static pt_tensor *flatten_forward(pt_module *self, const pt_tensor *x)
{
    const flatten_ctx *c = self->ctx;
    return pt_flatten(x, c->start, c->end);
}

static void flatten_repr(const pt_module *self, char *buf, size_t cap)
{
    const flatten_ctx *c = self->ctx;
    pti_nn_catf(buf, cap, "start_dim=%lld, end_dim=%lld", (long long)c->start, (long long)c->end);
}

static const pt_module_def flatten_def = {.type_name = "Flatten",
                                          .forward = flatten_forward,
                                          .free_ctx = free,
                                          .extra_repr = flatten_repr};

pt_module *pt_nn_flatten(int64_t start_dim, int64_t end_dim)
{
    flatten_ctx *c = pti_malloc(sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_flatten: out of memory");
    c->start = start_dim;
    c->end = end_dim;
    return pt_nn_module_new(&flatten_def, c);
}

typedef struct {
    int64_t dim;
    int n;
    int64_t sizes[PT_MAX_DIMS];
} unflatten_ctx;

static pt_tensor *unflatten_forward(pt_module *self, const pt_tensor *x)
{
    const unflatten_ctx *c = self->ctx;
    return pt_unflatten(x, c->dim, c->n, c->sizes);
}

static void unflatten_repr(const pt_module *self, char *buf, size_t cap)
{
    const unflatten_ctx *c = self->ctx;
    pti_nn_catf(buf, cap, "dim=%lld, unflattened_size=", (long long)c->dim);
    pti_nn_cat_tuple(buf, cap, c->n, c->sizes);
}

static const pt_module_def unflatten_def = {.type_name = "Unflatten",
                                            .forward = unflatten_forward,
                                            .free_ctx = free,
                                            .extra_repr = unflatten_repr};

pt_module *pt_nn_unflatten(int64_t dim, int n, const int64_t *sizes)
{
    if (n < 1 || n > PT_MAX_DIMS || !sizes)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_unflatten: unflattened_size must have "
                              "1 to %d sizes, got %d",
                              PT_MAX_DIMS, n);
    int n_infer = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < -1)
            return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_unflatten: size %lld is invalid",
                                  (long long)sizes[i]);
        n_infer += sizes[i] == -1;
    }
    if (n_infer > 1)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_unflatten: only one size can be -1");
    unflatten_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_unflatten: out of memory");
    c->dim = dim;
    c->n = n;
    memcpy(c->sizes, sizes, (size_t)n * sizeof(int64_t));
    return pt_nn_module_new(&unflatten_def, c);
}

/* ---- Dropout --------------------------------------------------------------------------------- */

typedef struct {
    double p;
} dropout_ctx;

static pt_tensor *dropout_forward(pt_module *self, const pt_tensor *x)
{
    const dropout_ctx *c = self->ctx;
    if (!PTI_CHECK_ARG(x, "Dropout", "input"))
        return NULL;
    return pt_dropout(x, c->p, pt_nn_is_training(self)); /* eval: an alias of x */
}

static void dropout_repr(const pt_module *self, char *buf, size_t cap)
{
    const dropout_ctx *c = self->ctx;
    pti_nn_catf(buf, cap, "p=");
    pti_nn_cat_float(buf, cap, c->p);
    pti_nn_catf(buf, cap, ", inplace=False");
}

static const pt_module_def dropout_def = {.type_name = "Dropout",
                                          .forward = dropout_forward,
                                          .free_ctx = free,
                                          .extra_repr = dropout_repr};

pt_module *pt_nn_dropout(double p)
{
    if (!(p >= 0 && p <= 1))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_dropout: dropout probability has to be "
                              "between 0 and 1, but got %g",
                              p);
    dropout_ctx *c = pti_malloc(sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_dropout: out of memory");
    c->p = p;
    return pt_nn_module_new(&dropout_def, c);
}
