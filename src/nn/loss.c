/* nn loss modules (nn_loss.h): each is a two-input forward_n that calls its loss op of
 * ops_loss.h with the options kept in the module's ctx; class weights and pos_weight live in
 * the module as buffers, fetched by registration index at each call. */
#include <math.h>
#include <stdlib.h>

#include "prometorch/nn_loss.h"

#include "../core/internal.h"

/* The options of every loss; each uses the fields it needs. */
typedef struct {
    pt_reduction reduction;
    double param; /* label_smoothing, beta or delta */
    bool log_target;
    bool has_ignore_index;
    int64_t ignore_index;
    int weight_idx, pos_weight_idx; /* buffer indices, -1 when not given */
} loss_ctx;

static const loss_ctx *ctx_of(const pt_module *m)
{
    return pt_nn_ctx(m);
}

static const pt_tensor *weight_of(const pt_module *m)
{
    int i = ctx_of(m)->weight_idx;
    return i < 0 ? NULL : pt_nn_direct_buffer_ref(m, i, NULL);
}

static const pt_tensor *pos_weight_of(const pt_module *m)
{
    int i = ctx_of(m)->pos_weight_idx;
    return i < 0 ? NULL : pt_nn_direct_buffer_ref(m, i, NULL);
}

/* The loss op a module calls: (module, input, target) -> loss. */
typedef pt_tensor *(*loss_fn)(const pt_module *m, const pt_tensor *input, const pt_tensor *target);

/* ---- forwards -------------------------------------------------------------------------------- */

static pt_tensor *cross_entropy_call(const pt_module *m, const pt_tensor *in, const pt_tensor *tg)
{
    const loss_ctx *c = ctx_of(m);
    pt_cross_entropy_opts o = {.weight = weight_of(m),
                               .has_ignore_index = c->has_ignore_index,
                               .ignore_index = c->ignore_index,
                               .label_smoothing = c->param,
                               .reduction = c->reduction};
    return pt_cross_entropy_ex(in, tg, &o);
}

static pt_tensor *nll_call(const pt_module *m, const pt_tensor *in, const pt_tensor *tg)
{
    const loss_ctx *c = ctx_of(m);
    pt_nll_loss_opts o = {.weight = weight_of(m),
                          .has_ignore_index = c->has_ignore_index,
                          .ignore_index = c->ignore_index,
                          .reduction = c->reduction};
    return pt_nll_loss_ex(in, tg, &o);
}

static pt_tensor *mse_call(const pt_module *m, const pt_tensor *in, const pt_tensor *tg)
{
    return pt_mse_loss(in, tg, ctx_of(m)->reduction);
}

static pt_tensor *l1_call(const pt_module *m, const pt_tensor *in, const pt_tensor *tg)
{
    return pt_l1_loss(in, tg, ctx_of(m)->reduction);
}

static pt_tensor *smooth_l1_call(const pt_module *m, const pt_tensor *in, const pt_tensor *tg)
{
    return pt_smooth_l1_loss(in, tg, ctx_of(m)->reduction, ctx_of(m)->param);
}

static pt_tensor *huber_call(const pt_module *m, const pt_tensor *in, const pt_tensor *tg)
{
    return pt_huber_loss(in, tg, ctx_of(m)->reduction, ctx_of(m)->param);
}

static pt_tensor *bce_call(const pt_module *m, const pt_tensor *in, const pt_tensor *tg)
{
    return pt_binary_cross_entropy(in, tg, weight_of(m), ctx_of(m)->reduction);
}

static pt_tensor *bce_logits_call(const pt_module *m, const pt_tensor *in, const pt_tensor *tg)
{
    return pt_binary_cross_entropy_with_logits(in, tg, weight_of(m), ctx_of(m)->reduction,
                                               pos_weight_of(m));
}

static pt_tensor *kl_div_call(const pt_module *m, const pt_tensor *in, const pt_tensor *tg)
{
    return pt_kl_div(in, tg, ctx_of(m)->reduction, ctx_of(m)->log_target);
}

/* Checks the (input, target) -> loss signature, then calls `fn`. */
static pt_status loss_forward_n(pt_module *self, int n_in, const pt_tensor *const *in, int n_out,
                                pt_tensor **out, loss_fn fn)
{
    const char *name = pt_nn_type_name(self);
    if (n_in != 2 || n_out != 1)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s takes 2 inputs (input, target) and gives 1 output (got %d and %d)",
                         name, n_in, n_out);
    if (!in[0] || !in[1])
        return pti_null_arg(name, in[0] ? "target" : "input");
    out[0] = fn(self, in[0], in[1]);
    return out[0] ? PT_OK : pt_last_status();
}

static pt_status cross_entropy_forward(pt_module *s, int ni, const pt_tensor *const *in, int no,
                                       pt_tensor **out)
{
    return loss_forward_n(s, ni, in, no, out, cross_entropy_call);
}

static pt_status nll_forward(pt_module *s, int ni, const pt_tensor *const *in, int no,
                             pt_tensor **out)
{
    return loss_forward_n(s, ni, in, no, out, nll_call);
}

static pt_status mse_forward(pt_module *s, int ni, const pt_tensor *const *in, int no,
                             pt_tensor **out)
{
    return loss_forward_n(s, ni, in, no, out, mse_call);
}

static pt_status l1_forward(pt_module *s, int ni, const pt_tensor *const *in, int no,
                            pt_tensor **out)
{
    return loss_forward_n(s, ni, in, no, out, l1_call);
}

static pt_status smooth_l1_forward(pt_module *s, int ni, const pt_tensor *const *in, int no,
                                   pt_tensor **out)
{
    return loss_forward_n(s, ni, in, no, out, smooth_l1_call);
}

static pt_status huber_forward(pt_module *s, int ni, const pt_tensor *const *in, int no,
                               pt_tensor **out)
{
    return loss_forward_n(s, ni, in, no, out, huber_call);
}

static pt_status bce_forward(pt_module *s, int ni, const pt_tensor *const *in, int no,
                             pt_tensor **out)
{
    return loss_forward_n(s, ni, in, no, out, bce_call);
}

static pt_status bce_logits_forward(pt_module *s, int ni, const pt_tensor *const *in, int no,
                                    pt_tensor **out)
{
    return loss_forward_n(s, ni, in, no, out, bce_logits_call);
}

static pt_status kl_div_forward(pt_module *s, int ni, const pt_tensor *const *in, int no,
                                pt_tensor **out)
{
    return loss_forward_n(s, ni, in, no, out, kl_div_call);
}

static const pt_module_def cross_entropy_def = {
    .type_name = "CrossEntropyLoss", .forward_n = cross_entropy_forward, .free_ctx = free};
static const pt_module_def nll_def = {
    .type_name = "NLLLoss", .forward_n = nll_forward, .free_ctx = free};
static const pt_module_def mse_def = {
    .type_name = "MSELoss", .forward_n = mse_forward, .free_ctx = free};
static const pt_module_def l1_def = {
    .type_name = "L1Loss", .forward_n = l1_forward, .free_ctx = free};
static const pt_module_def smooth_l1_def = {
    .type_name = "SmoothL1Loss", .forward_n = smooth_l1_forward, .free_ctx = free};
static const pt_module_def huber_def = {
    .type_name = "HuberLoss", .forward_n = huber_forward, .free_ctx = free};
static const pt_module_def bce_def = {
    .type_name = "BCELoss", .forward_n = bce_forward, .free_ctx = free};
static const pt_module_def bce_logits_def = {
    .type_name = "BCEWithLogitsLoss", .forward_n = bce_logits_forward, .free_ctx = free};
static const pt_module_def kl_div_def = {
    .type_name = "KLDivLoss", .forward_n = kl_div_forward, .free_ctx = free};

pt_tensor *pt_nn_loss(pt_module *loss, const pt_tensor *input, const pt_tensor *target)
{
    const pt_tensor *in[2] = {input, target};
    pt_tensor *out = NULL;
    return pt_nn_forward_n(loss, 2, in, 1, &out) == PT_OK ? out : NULL;
}

/* ---- construction ---------------------------------------------------------------------------- */

/* PT_OK when r is a reduction the loss accepts (batchmean only for KLDivLoss). */
static pt_status check_reduction(const char *fn, pt_reduction r, bool batchmean_ok)
{
    if (r == PT_REDUCTION_MEAN || r == PT_REDUCTION_SUM || r == PT_REDUCTION_NONE)
        return PT_OK;
    if (r == PT_REDUCTION_BATCHMEAN && batchmean_ok)
        return PT_OK;
    if (r == PT_REDUCTION_BATCHMEAN)
        return pti_error(PT_ERR_INVALID_ARG, "%s: batchmean is not a valid value for reduction",
                         fn);
    return pti_error(PT_ERR_INVALID_ARG, "%s: bad reduction value %d", fn, (int)r);
}

/* Registers t (when non-NULL) as persistent buffer `name`, recording its index in *idx. */
static pt_status add_weight(pt_module *m, const char *fn, const char *name, pt_tensor *t, int *idx)
{
    *idx = -1;
    if (!t)
        return PT_OK;
    if (!pti_dtypes[pt_dtype_of(t)].is_floating)
        return pti_error(PT_ERR_DTYPE, "%s: %s must be a floating-point tensor, got %s", fn, name,
                         pt_dtype_name(pt_dtype_of(t)));
    pt_status st = pt_nn_register_buffer(m, name, t, true);
    if (st == PT_OK)
        *idx = pt_nn_num_direct_buffers(m) - 1;
    return st;
}

/* A loss module of `def` owning a copy of *c, with the optional weight buffers registered
 * (weight first, as PyTorch). */
static pt_module *loss_new(const pt_module_def *def, const char *fn, const loss_ctx *c,
                           pt_tensor *weight, pt_tensor *pos_weight)
{
    loss_ctx *ctx = pti_malloc(sizeof(*ctx));
    if (!ctx)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", fn);
    *ctx = *c;
    pt_module *m = pt_nn_module_new(def, ctx); /* on failure it frees ctx (def->free_ctx) */
    if (!m)
        return NULL;
    if (add_weight(m, fn, "weight", weight, &ctx->weight_idx) != PT_OK ||
        add_weight(m, fn, "pos_weight", pos_weight, &ctx->pos_weight_idx) != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

pt_module *pt_nn_cross_entropy_loss(const pt_cross_entropy_loss_opts *opts)
{
    const char *fn = "pt_nn_cross_entropy_loss";
    pt_cross_entropy_loss_opts o = opts ? *opts : (pt_cross_entropy_loss_opts){0};
    if (check_reduction(fn, o.reduction, false) != PT_OK)
        return NULL;
    if (!(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: label_smoothing must be between 0.0 and 1.0, got %g", fn,
                              o.label_smoothing);
    loss_ctx c = {.reduction = o.reduction,
                  .param = o.label_smoothing,
                  .has_ignore_index = o.has_ignore_index,
                  .ignore_index = o.ignore_index};
    return loss_new(&cross_entropy_def, fn, &c, o.weight, NULL);
}

pt_module *pt_nn_nll_loss(const pt_nll_loss_module_opts *opts)
{
    const char *fn = "pt_nn_nll_loss";
    pt_nll_loss_module_opts o = opts ? *opts : (pt_nll_loss_module_opts){0};
    if (check_reduction(fn, o.reduction, false) != PT_OK)
        return NULL;
    loss_ctx c = {.reduction = o.reduction,
                  .has_ignore_index = o.has_ignore_index,
                  .ignore_index = o.ignore_index};
    return loss_new(&nll_def, fn, &c, o.weight, NULL);
}

pt_module *pt_nn_mse_loss(pt_reduction reduction)
{
    if (check_reduction("pt_nn_mse_loss", reduction, false) != PT_OK)
        return NULL;
    return loss_new(&mse_def, "pt_nn_mse_loss", &(loss_ctx){.reduction = reduction}, NULL, NULL);
}

pt_module *pt_nn_l1_loss(pt_reduction reduction)
{
    if (check_reduction("pt_nn_l1_loss", reduction, false) != PT_OK)
        return NULL;
    return loss_new(&l1_def, "pt_nn_l1_loss", &(loss_ctx){.reduction = reduction}, NULL, NULL);
}

pt_module *pt_nn_smooth_l1_loss(pt_reduction reduction, double beta)
{
    const char *fn = "pt_nn_smooth_l1_loss";
    if (check_reduction(fn, reduction, false) != PT_OK)
        return NULL;
    if (!(beta >= 0.0))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: beta must not be negative, got %g", fn,
                              beta);
    return loss_new(&smooth_l1_def, fn, &(loss_ctx){.reduction = reduction, .param = beta}, NULL,
                    NULL);
}

pt_module *pt_nn_huber_loss(pt_reduction reduction, double delta)
{
    const char *fn = "pt_nn_huber_loss";
    if (check_reduction(fn, reduction, false) != PT_OK)
        return NULL;
    if (!(delta > 0.0))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: delta must be positive, got %g", fn, delta);
    return loss_new(&huber_def, fn, &(loss_ctx){.reduction = reduction, .param = delta}, NULL,
                    NULL);
}

pt_module *pt_nn_bce_loss(pt_tensor *weight, pt_reduction reduction)
{
    if (check_reduction("pt_nn_bce_loss", reduction, false) != PT_OK)
        return NULL;
    return loss_new(&bce_def, "pt_nn_bce_loss", &(loss_ctx){.reduction = reduction}, weight, NULL);
}

pt_module *pt_nn_bce_with_logits_loss(pt_tensor *weight, pt_reduction reduction,
                                      pt_tensor *pos_weight)
{
    const char *fn = "pt_nn_bce_with_logits_loss";
    if (check_reduction(fn, reduction, false) != PT_OK)
        return NULL;
    return loss_new(&bce_logits_def, fn, &(loss_ctx){.reduction = reduction}, weight, pos_weight);
}

pt_module *pt_nn_kl_div_loss(pt_reduction reduction, bool log_target)
{
    const char *fn = "pt_nn_kl_div_loss";
    if (check_reduction(fn, reduction, true) != PT_OK)
        return NULL;
    return loss_new(&kl_div_def, fn, &(loss_ctx){.reduction = reduction, .log_target = log_target},
                    NULL, NULL);
}
