/* TEMPORARY stand-ins for nn_layers.h (Linear, LayerNorm, Dropout); removed at the merge. */
#include <math.h>
#include <stdlib.h>

#include "prometorch/prometorch.h"
#include "tf_standin.h"

typedef struct { int64_t in, out; bool bias; double p, eps; int64_t d; } sctx;

static pt_tensor *lin_fwd(pt_module *self, const pt_tensor *x)
{
    pt_tensor *w = pt_nn_param_ref(self, "weight");
    pt_tensor *wt = pt_t(w);
    pt_tensor *y = pt_matmul(x, wt);
    pt_release(wt);
    if (((sctx *)pt_nn_ctx(self))->bias) {
        pt_tensor *z = pt_add(y, pt_nn_param_ref(self, "bias"));
        pt_release(y);
        y = z;
    }
    return y;
}
static const pt_module_def lin_def = {.type_name = "Linear", .forward = lin_fwd, .free_ctx = free};

pt_module *pt_nn_linear(int64_t in, int64_t out, bool bias)
{
    sctx *c = calloc(1, sizeof(*c));
    c->in = in; c->out = out; c->bias = bias;
    pt_module *m = pt_nn_module_new(&lin_def, c);
    double k = 1.0 / sqrt((double)in);
    pt_tensor *w = pt_empty(PT_SHAPE(out, in), PT_FLOAT32, pt_cpu());
    pt_uniform_(w, -k, k);
    pt_nn_register_parameter(m, "weight", w);
    pt_release(w);
    if (bias) {
        pt_tensor *b = pt_empty(PT_SHAPE(out), PT_FLOAT32, pt_cpu());
        pt_uniform_(b, -k, k);
        pt_nn_register_parameter(m, "bias", b);
        pt_release(b);
    }
    return m;
}

static pt_tensor *drop_fwd(pt_module *self, const pt_tensor *x)
{
    return pt_dropout(x, ((sctx *)pt_nn_ctx(self))->p, pt_nn_is_training(self));
}
static const pt_module_def drop_def = {.type_name = "Dropout", .forward = drop_fwd, .free_ctx = free};

pt_module *pt_nn_dropout(double p)
{
    sctx *c = calloc(1, sizeof(*c));
    c->p = p;
    return pt_nn_module_new(&drop_def, c);
}

static pt_tensor *ln_fwd(pt_module *self, const pt_tensor *x)
{
    sctx *c = pt_nn_ctx(self);
    return pt_layer_norm(x, 1, &c->d, pt_nn_param_ref(self, "weight"),
                         c->bias ? pt_nn_param_ref(self, "bias") : NULL, c->eps);
}
static const pt_module_def ln_def = {.type_name = "LayerNorm", .forward = ln_fwd, .free_ctx = free};

pt_module *pt_nn_layer_norm_ex(int n, const int64_t *normalized_shape,
                               const pt_nn_layer_norm_opts *opts)
{
    (void)n;
    sctx *c = calloc(1, sizeof(*c));
    c->d = normalized_shape[0]; c->eps = opts->eps ? opts->eps : 1e-5; c->bias = !opts->no_bias;
    pt_module *m = pt_nn_module_new(&ln_def, c);
    pt_tensor *w = pt_ones(PT_SHAPE(c->d), PT_FLOAT32, pt_cpu());
    pt_nn_register_parameter(m, "weight", w);
    pt_release(w);
    if (c->bias) {
        pt_tensor *b = pt_zeros(PT_SHAPE(c->d), PT_FLOAT32, pt_cpu());
        pt_nn_register_parameter(m, "bias", b);
        pt_release(b);
    }
    return m;
}
