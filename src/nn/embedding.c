/* nn layer: Embedding (lookup table with an optional padding_idx row). */
#include <stdlib.h>

#include "../core/internal.h"
#include "layers_internal.h"
#include "module_internal.h"
#include "prometorch/autograd.h"
#include "prometorch/nn_init.h"
#include "prometorch/nn_layers.h"
#include "prometorch/ops_index.h"
#include "prometorch/ops_shape.h"

typedef struct {
    int64_t num, dim;
    bool has_padding_idx;
    int64_t padding_idx; /* normalized to [0, num) */
    pt_tensor *weight;   /* borrowed */
} embedding_ctx;

static pt_tensor *embedding_forward(pt_module *self, const pt_tensor *idx)
{
    const embedding_ctx *c = self->ctx;
    pt_embedding_opts o = {.has_padding_idx = c->has_padding_idx, .padding_idx = c->padding_idx};
    return pt_embedding_ex(c->weight, idx, &o);
}

static void embedding_repr(const pt_module *self, char *buf, size_t cap)
{
    const embedding_ctx *c = self->ctx;
    pti_nn_catf(buf, cap, "%lld, %lld", (long long)c->num, (long long)c->dim);
    if (c->has_padding_idx)
        pti_nn_catf(buf, cap, ", padding_idx=%lld", (long long)c->padding_idx);
}

static const pt_module_def embedding_def = {.type_name = "Embedding",
                                            .forward = embedding_forward,
                                            .free_ctx = free,
                                            .extra_repr = embedding_repr};

/* Zeroes the padding row in place (PyTorch's _fill_padding_idx_with_zero). */
static pt_status zero_padding_row(const embedding_ctx *c)
{
    pt_tensor *row = pt_select(c->weight, 0, c->padding_idx);
    if (!row)
        return pt_last_status();
    pt_status st = pt_nn_init_zeros_(row);
    pt_release(row);
    return st;
}

static pt_status check_embedding(const char *op, int64_t num, int64_t dim,
                                 const pt_nn_embedding_opts *o)
{
    if (num <= 0 || dim <= 0)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: num_embeddings (%lld) and embedding_dim (%lld) "
                         "must be > 0",
                         op, (long long)num, (long long)dim);
    if (o->has_max_norm)
        return pti_error(PT_ERR_UNSUPPORTED, "%s: max_norm is not supported", op);
    if (o->scale_grad_by_freq)
        return pti_error(PT_ERR_UNSUPPORTED, "%s: scale_grad_by_freq is not supported", op);
    if (o->sparse)
        return pti_error(PT_ERR_UNSUPPORTED, "%s: sparse gradients are not supported", op);
    if (o->has_padding_idx && (o->padding_idx < -num || o->padding_idx >= num))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: padding_idx (%lld) must be within "
                         "num_embeddings (%lld)",
                         op, (long long)o->padding_idx, (long long)num);
    return PT_OK;
}

pt_module *pt_nn_embedding_ex(int64_t num_embeddings, int64_t embedding_dim,
                              const pt_nn_embedding_opts *opts)
{
    const char *op = "pt_nn_embedding";
    pt_nn_embedding_opts o = opts ? *opts : (pt_nn_embedding_opts){0};
    if (check_embedding(op, num_embeddings, embedding_dim, &o) != PT_OK)
        return NULL;
    embedding_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    c->num = num_embeddings;
    c->dim = embedding_dim;
    c->has_padding_idx = o.has_padding_idx;
    c->padding_idx = o.padding_idx < 0 ? o.padding_idx + num_embeddings : o.padding_idx;
    pt_module *m = pt_nn_module_new(&embedding_def, c);
    if (!m)
        return NULL;
    int64_t shape[2] = {num_embeddings, embedding_dim};
    pt_tensor *w = pt_empty(2, shape, PT_FLOAT32, pt_cpu());
    pt_status st = w ? pt_nn_init_normal_(w, 0.0, 1.0) : pt_last_status();
    if (st == PT_OK)
        st = pt_nn_register_parameter(m, "weight", w);
    pt_release(w);
    c->weight = st == PT_OK ? w : NULL;
    if (st == PT_OK && c->has_padding_idx)
        st = zero_padding_row(c);
    if (st != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

pt_module *pt_nn_embedding(int64_t num_embeddings, int64_t embedding_dim)
{
    return pt_nn_embedding_ex(num_embeddings, embedding_dim, NULL);
}
