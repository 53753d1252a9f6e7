/* The loss family's front-ends (torch.nn.functional semantics): cross_entropy, nll_loss,
 * mse_loss, l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy[_with_logits] and
 * kl_div. Each checks shapes/dtypes/options, brings the operands to contiguous compute copies
 * (broadcast operands are expanded first) and dispatches to the kernels in
 * src/backends/<device>/loss*.c with the parameters of loss_params.h. The forward runs with
 * grad mode off (its conversions are not part of the graph); one node per loss is recorded
 * afterwards (backward formulas in loss_grad.c). */
#include <math.h>
#include <string.h>

#include "common.h"
#include "loss_grad.h"
#include "loss_params.h"
#include "prometorch/autograd.h"

#define DEFAULT_IGNORE_INDEX (-100)

/* ---- shared helpers ---------------------------------------------------------------------------
 */

static pt_dtype compute_dtype(pt_dtype dt)
{
    return dt == PT_FLOAT64 ? PT_FLOAT64 : PT_FLOAT32;
}

/* out converted to dtype want (out is released when a copy is made); NULL-safe. */
static pt_tensor *finish(pt_tensor *out, pt_dtype want)
{
    if (!out || out->dtype == want)
        return out;
    pt_tensor *r = pt_to_dtype(out, want);
    pt_release(out);
    return r;
}

/* t (nullable) converted to cdt, broadcast to [nd, shape] and made contiguous: a new
 * reference. The caller has checked that t broadcasts to shape. */
static pt_tensor *expand_prep(const pt_tensor *t, int nd, const int64_t *shape, pt_dtype cdt)
{
    if (!t)
        return NULL;
    pt_tensor *a = pti_as_dtype(t, cdt);
    if (!a)
        return NULL;
    pt_tensor *r;
    if (a->ndim == nd && memcmp(a->shape, shape, sizeof(int64_t) * (size_t)nd) == 0) {
        r = pt_contiguous(a);
    } else {
        int64_t stride[PT_MAX_DIMS];
        int lead = nd - a->ndim;
        for (int d = 0; d < nd; d++) {
            int j = d - lead;
            stride[d] = (j < 0 || a->shape[j] == 1) ? 0 : a->stride[j];
        }
        pt_tensor *view = pti_tensor_view(a, nd, shape, stride, a->offset);
        r = view ? pt_clone(view) : NULL;
        pt_release(view);
    }
    pt_release(a);
    return r;
}

static bool check_reduction(const char *op, pt_reduction r, bool allow_batchmean)
{
    if (r == PT_REDUCTION_MEAN || r == PT_REDUCTION_SUM || r == PT_REDUCTION_NONE ||
        (allow_batchmean && r == PT_REDUCTION_BATCHMEAN))
        return true;
    return pti_error(PT_ERR_INVALID_ARG, "%s: invalid reduction %d", op, (int)r), false;
}

/* True when t (nullable) broadcasts to exactly [nd, shape]. */
static bool broadcasts_to(const char *op, const char *arg, const pt_tensor *t, int nd,
                          const int64_t *shape)
{
    if (!t)
        return true;
    int n2;
    int64_t s2[PT_MAX_DIMS];
    if (!pti_broadcast_shapes(op, t->ndim, t->shape, nd, shape, &n2, s2))
        return false;
    if (n2 != nd || memcmp(s2, shape, sizeof(int64_t) * (size_t)nd) != 0)
        return pti_error(PT_ERR_SHAPE, "%s: %s %s does not broadcast to the input shape %s", op,
                         arg, pti_shape_str(t->ndim, t->shape), pti_shape_str(nd, shape)),
               false;
    return true;
}

/* ---- elementwise losses ---------------------------------------------------------------------- */

typedef struct pointwise_args {
    const char *op;
    pti_op kop;
    pti_pointwise_loss_kind kind;
    const pt_tensor *input, *target, *weight, *pos_weight;
    bool same_shape; /* input and target must match exactly (binary cross entropy) */
    bool allow_batchmean;
} pointwise_args;

static pt_tensor *pointwise_forward(const pointwise_args *a, pti_pointwise_loss_params *p)
{
    const char *op = a->op;
    if (!PTI_CHECK_ARG(a->input, op, "input") || !PTI_CHECK_ARG(a->target, op, "target"))
        return NULL;
    const pt_tensor *in = a->input, *tg = a->target;
    const pt_tensor *all[4] = {in, tg, a->weight, a->pos_weight};
    if (!pti_check_same_device(op, 4, all) ||
        !check_reduction(op, p->reduction, a->allow_batchmean))
        return NULL;
    if (!pti_check_floating(op, "input", in) || !pti_check_plain_dtype(op, tg) ||
        (a->weight && !pti_check_floating(op, "weight", a->weight)) ||
        (a->pos_weight && !pti_check_floating(op, "pos_weight", a->pos_weight)))
        return NULL;
    pt_dtype rdt = pt_promote_types(in->dtype, tg->dtype);
    if (!pt_dtype_is_floating(rdt))
        rdt = PT_FLOAT32;
    pt_dtype cdt = compute_dtype(rdt);
    int nd;
    int64_t shape[PT_MAX_DIMS];
    if (a->same_shape) {
        if (in->ndim != tg->ndim ||
            memcmp(in->shape, tg->shape, sizeof(int64_t) * (size_t)in->ndim) != 0)
            return pti_error_null(
                PT_ERR_SHAPE, "%s: target size %s must be the same as the input size %s", op,
                pti_shape_str(tg->ndim, tg->shape), pti_shape_str(in->ndim, in->shape));
        nd = in->ndim;
        memcpy(shape, in->shape, sizeof(int64_t) * (size_t)nd);
    } else if (!pti_broadcast_shapes(op, in->ndim, in->shape, tg->ndim, tg->shape, &nd, shape)) {
        return NULL;
    }
    if (!broadcasts_to(op, "weight", a->weight, nd, shape) ||
        !broadcasts_to(op, "pos_weight", a->pos_weight, nd, shape))
        return NULL;
    int64_t numel = pti_shape_numel(nd, shape);
    p->divisor = (double)numel;
    if (p->reduction == PT_REDUCTION_BATCHMEAN)
        p->divisor = in->ndim > 0 ? (double)in->shape[0] : 1.0;
    bool none = p->reduction == PT_REDUCTION_NONE;
    pt_tensor *x = expand_prep(in, nd, shape, cdt), *t = expand_prep(tg, nd, shape, cdt);
    pt_tensor *w = expand_prep(a->weight, nd, shape, cdt);
    pt_tensor *pw = expand_prep(a->pos_weight, nd, shape, cdt);
    pt_tensor *out = NULL;
    if (x && t && (!a->weight || w) && (!a->pos_weight || pw)) {
        out = pti_tensor_new(none ? nd : 0, shape, cdt, in->storage->device);
        if (out && !(none && numel == 0)) {
            pti_call c = {.n_in = 4, .n_out = 1, .in = {x, t, w, pw}, .out = {out}, .params = p};
            if (pti_dispatch(a->kop, &c) != PT_OK) {
                pt_release(out);
                out = NULL;
            }
        }
    }
    pt_release(x);
    pt_release(t);
    pt_release(w);
    pt_release(pw);
    return finish(out, rdt);
}

static pt_tensor *pointwise_loss(const pointwise_args *a, pti_pointwise_loss_params *p)
{
    bool prev = pt_set_grad_enabled(false);
    pt_tensor *out = pointwise_forward(a, p);
    pt_set_grad_enabled(prev);
    return pti_loss_record_pointwise(a->kind, a->input, a->target, a->weight, a->pos_weight, p,
                                     out);
}

pt_tensor *pt_mse_loss(const pt_tensor *input, const pt_tensor *target, pt_reduction reduction)
{
    pointwise_args a = {"pt_mse_loss", PTI_OP_mse_loss, PTI_LOSS_MSE, input, target, NULL,
                        NULL,          false,           false};
    pti_pointwise_loss_params p = {.reduction = reduction};
    return pointwise_loss(&a, &p);
}

pt_tensor *pt_l1_loss(const pt_tensor *input, const pt_tensor *target, pt_reduction reduction)
{
    pointwise_args a = {"pt_l1_loss", PTI_OP_l1_loss, PTI_LOSS_L1, input, target,
                        NULL,         NULL,           false,       false};
    pti_pointwise_loss_params p = {.reduction = reduction};
    return pointwise_loss(&a, &p);
}

pt_tensor *pt_smooth_l1_loss(const pt_tensor *input, const pt_tensor *target,
                             pt_reduction reduction, double beta)
{
    if (!(beta >= 0))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_smooth_l1_loss: beta must be non-negative, got %g", beta);
    pointwise_args a = {"pt_smooth_l1_loss",
                        PTI_OP_smooth_l1_loss,
                        PTI_LOSS_SMOOTH_L1,
                        input,
                        target,
                        NULL,
                        NULL,
                        false,
                        false};
    pti_pointwise_loss_params p = {.reduction = reduction, .beta = beta};
    return pointwise_loss(&a, &p);
}

pt_tensor *pt_huber_loss(const pt_tensor *input, const pt_tensor *target, pt_reduction reduction,
                         double delta)
{
    if (!(delta > 0))
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_huber_loss: delta must be positive, got %g",
                              delta);
    pointwise_args a = {"pt_huber_loss",
                        PTI_OP_huber_loss,
                        PTI_LOSS_HUBER,
                        input,
                        target,
                        NULL,
                        NULL,
                        false,
                        false};
    pti_pointwise_loss_params p = {.reduction = reduction, .beta = delta};
    return pointwise_loss(&a, &p);
}

pt_tensor *pt_binary_cross_entropy(const pt_tensor *input, const pt_tensor *target,
                                   const pt_tensor *weight, pt_reduction reduction)
{
    pointwise_args a = {"pt_binary_cross_entropy",
                        PTI_OP_binary_cross_entropy,
                        PTI_LOSS_BCE,
                        input,
                        target,
                        weight,
                        NULL,
                        true,
                        false};
    pti_pointwise_loss_params p = {.reduction = reduction};
    return pointwise_loss(&a, &p);
}

pt_tensor *pt_binary_cross_entropy_with_logits(const pt_tensor *input, const pt_tensor *target,
                                               const pt_tensor *weight, pt_reduction reduction,
                                               const pt_tensor *pos_weight)
{
    pointwise_args a = {"pt_binary_cross_entropy_with_logits",
                        PTI_OP_binary_cross_entropy_with_logits,
                        PTI_LOSS_BCE_LOGITS,
                        input,
                        target,
                        weight,
                        pos_weight,
                        true,
                        false};
    pti_pointwise_loss_params p = {.reduction = reduction};
    return pointwise_loss(&a, &p);
}

pt_tensor *pt_kl_div(const pt_tensor *input, const pt_tensor *target, pt_reduction reduction,
                     bool log_target)
{
    pointwise_args a = {"pt_kl_div", PTI_OP_kl_div, PTI_LOSS_KL_DIV, input, target,
                        NULL,        NULL,          false,           true};
    pti_pointwise_loss_params p = {.reduction = reduction, .log_target = log_target};
    return pointwise_loss(&a, &p);
}

/* ---- cross_entropy and nll_loss -----------------------------------------------------------------
 */

typedef struct class_args {
    const char *op;
    pti_op kop;
    const pt_tensor *input, *target, *weight;
    int64_t ignore_index;
    double label_smoothing;
    pt_reduction reduction;
    bool allow_prob; /* class-probability targets (cross_entropy) */
} class_args;

/* Checks the target against input [C] / [N, C, d...]; sets the sizes and the target kind. */
static bool check_class_target(const class_args *a, pti_class_loss_params *p)
{
    const char *op = a->op;
    const pt_tensor *in = a->input, *tg = a->target;
    bool batched = in->ndim >= 2;
    p->n = batched ? in->shape[0] : 1;
    p->c = batched ? in->shape[1] : in->shape[0];
    p->s = 1;
    for (int d = 2; d < in->ndim; d++)
        p->s *= in->shape[d];
    if (pt_dtype_is_floating(tg->dtype) && a->allow_prob) {
        p->prob_target = true;
        if (tg->ndim != in->ndim ||
            memcmp(tg->shape, in->shape, sizeof(int64_t) * (size_t)in->ndim) != 0)
            return pti_error(PT_ERR_SHAPE,
                             "%s: class-probability target %s must have the input's shape %s", op,
                             pti_shape_str(tg->ndim, tg->shape),
                             pti_shape_str(in->ndim, in->shape)),
                   false;
        return true;
    }
    if (!pt_dtype_is_integral(tg->dtype))
        return pti_error(PT_ERR_DTYPE, "%s: target must be %s, got %s", op,
                         a->allow_prob ? "int64 class indices or floating class probabilities"
                                       : "int64 class indices",
                         pt_dtype_name(tg->dtype)),
               false;
    bool ok = tg->ndim == in->ndim - 1;
    if (ok && batched) {
        ok = tg->shape[0] == in->shape[0];
        for (int d = 2; ok && d < in->ndim; d++)
            ok = tg->shape[d - 1] == in->shape[d];
    }
    if (!ok)
        return pti_error(PT_ERR_SHAPE,
                         "%s: target %s does not match input %s (expected the input's shape "
                         "without the class dim 1)",
                         op, pti_shape_str(tg->ndim, tg->shape),
                         pti_shape_str(in->ndim, in->shape)),
               false;
    return true;
}

/* Checks the arguments of a class loss and fills p; false with the error set otherwise. */
static bool class_check(const class_args *a, pti_class_loss_params *p)
{
    const char *op = a->op;
    if (!PTI_CHECK_ARG(a->input, op, "input") || !PTI_CHECK_ARG(a->target, op, "target"))
        return false;
    const pt_tensor *in = a->input;
    const pt_tensor *all[3] = {in, a->target, a->weight};
    if (!pti_check_same_device(op, 3, all) || !check_reduction(op, a->reduction, false) ||
        !pti_check_floating(op, "input", in))
        return false;
    if (in->ndim < 1)
        return pti_error(PT_ERR_SHAPE,
                         "%s: input must be [C] or [N, C, *], got a 0-dim "
                         "tensor",
                         op),
               false;
    if (!(a->label_smoothing >= 0 && a->label_smoothing <= 1))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: label_smoothing must be between 0.0 and 1.0, got %g", op,
                         a->label_smoothing),
               false;
    *p = (pti_class_loss_params){.ignore_index = a->ignore_index,
                                 .label_smoothing = a->label_smoothing,
                                 .reduction = a->reduction};
    if (!check_class_target(a, p))
        return false;
    if (a->weight && !pti_check_floating(op, "weight", a->weight))
        return false;
    if (a->weight && (a->weight->ndim != 1 || a->weight->shape[0] != p->c))
        return pti_error(PT_ERR_SHAPE, "%s: weight must have shape [%lld] (one per class), got %s",
                         op, (long long)p->c, pti_shape_str(a->weight->ndim, a->weight->shape)),
               false;
    return true;
}

/* The loss's shape for reduction NONE (the input's without the class dim; 0-dim for an
 * unbatched input), 0-dim otherwise. Returns ndim. */
static int class_out_shape(const class_args *a, int64_t *oshape)
{
    const pt_tensor *in = a->input;
    int ond = 0;
    if (a->reduction == PT_REDUCTION_NONE && in->ndim >= 2) {
        oshape[ond++] = in->shape[0];
        for (int d = 2; d < in->ndim; d++)
            oshape[ond++] = in->shape[d];
    }
    return ond;
}

static pt_tensor *class_forward(const class_args *a, pti_class_loss_params *p)
{
    if (!class_check(a, p))
        return NULL;
    const pt_tensor *in = a->input;
    pt_dtype cdt = compute_dtype(in->dtype);
    int64_t oshape[PT_MAX_DIMS];
    int ond = class_out_shape(a, oshape);
    pt_tensor *x = expand_prep(in, in->ndim, in->shape, cdt);
    pt_tensor *t =
        expand_prep(a->target, a->target->ndim, a->target->shape, p->prob_target ? cdt : PT_INT64);
    pt_tensor *w = a->weight ? expand_prep(a->weight, 1, a->weight->shape, cdt) : NULL;
    pt_tensor *out = NULL;
    if (x && t && (!a->weight || w)) {
        out = pti_tensor_new(ond, oshape, cdt, in->storage->device);
        if (out && out->numel > 0) {
            pti_call c = {.n_in = 3, .n_out = 1, .in = {x, t, w}, .out = {out}, .params = p};
            if (pti_dispatch(a->kop, &c) != PT_OK) {
                pt_release(out);
                out = NULL;
            }
        }
    }
    pt_release(x);
    pt_release(t);
    pt_release(w);
    return finish(out, in->dtype);
}

static pt_tensor *class_loss(const class_args *a)
{
    pti_class_loss_params p;
    bool prev = pt_set_grad_enabled(false);
    pt_tensor *out = class_forward(a, &p);
    pt_set_grad_enabled(prev);
    return pti_loss_record_class(a->allow_prob, a->input, a->target, a->weight, &p, out);
}

/* d(loss)/d(input) of a class loss in one kernel (the fused first-order backward). */
static pt_tensor *class_backward_fused(const class_args *a, const pt_tensor *grad_output)
{
    pti_class_loss_params p;
    if (!PTI_CHECK_ARG(grad_output, a->op, "grad_output") || !class_check(a, &p))
        return NULL;
    const pt_tensor *in = a->input;
    const pt_tensor *all[2] = {in, grad_output};
    if (!pti_check_same_device(a->op, 2, all) ||
        !pti_check_floating(a->op, "grad_output", grad_output))
        return NULL;
    int64_t oshape[PT_MAX_DIMS];
    int ond = class_out_shape(a, oshape);
    if (grad_output->ndim != ond ||
        memcmp(grad_output->shape, oshape, sizeof(int64_t) * (size_t)ond) != 0)
        return pti_error_null(PT_ERR_SHAPE, "%s: grad_output %s must have the loss's shape %s",
                              a->op, pti_shape_str(grad_output->ndim, grad_output->shape),
                              pti_shape_str(ond, oshape));
    pt_dtype cdt = compute_dtype(in->dtype);
    bool prev = pt_set_grad_enabled(false);
    pt_tensor *x = expand_prep(in, in->ndim, in->shape, cdt);
    pt_tensor *t =
        expand_prep(a->target, a->target->ndim, a->target->shape, p.prob_target ? cdt : PT_INT64);
    pt_tensor *w = a->weight ? expand_prep(a->weight, 1, a->weight->shape, cdt) : NULL;
    pt_tensor *g = expand_prep(grad_output, ond, oshape, cdt);
    pt_tensor *out = NULL;
    if (x && t && g && (!a->weight || w)) {
        out = pti_tensor_new(in->ndim, in->shape, cdt, in->storage->device);
        if (out && out->numel > 0) {
            pti_call c = {.n_in = 4, .n_out = 1, .in = {x, t, w, g}, .out = {out}, .params = &p};
            if (pti_dispatch(a->kop, &c) != PT_OK) {
                pt_release(out);
                out = NULL;
            }
        }
    }
    pt_release(x);
    pt_release(t);
    pt_release(w);
    pt_release(g);
    out = finish(out, in->dtype);
    pt_set_grad_enabled(prev);
    return out;
}

pt_tensor *pt_cross_entropy_backward(const pt_tensor *grad_output, const pt_tensor *logits,
                                     const pt_tensor *target, const pt_cross_entropy_opts *opts)
{
    pt_cross_entropy_opts o = opts ? *opts : (pt_cross_entropy_opts){0};
    class_args a = {"pt_cross_entropy_backward",
                    PTI_OP_cross_entropy_backward,
                    logits,
                    target,
                    o.weight,
                    o.has_ignore_index ? o.ignore_index : DEFAULT_IGNORE_INDEX,
                    o.label_smoothing,
                    o.reduction,
                    true};
    return class_backward_fused(&a, grad_output);
}

pt_tensor *pt_nll_loss_backward(const pt_tensor *grad_output, const pt_tensor *input,
                                const pt_tensor *target, const pt_nll_loss_opts *opts)
{
    pt_nll_loss_opts o = opts ? *opts : (pt_nll_loss_opts){0};
    class_args a = {"pt_nll_loss_backward",
                    PTI_OP_nll_loss_backward,
                    input,
                    target,
                    o.weight,
                    o.has_ignore_index ? o.ignore_index : DEFAULT_IGNORE_INDEX,
                    0.0,
                    o.reduction,
                    false};
    return class_backward_fused(&a, grad_output);
}

pt_tensor *pt_cross_entropy_ex(const pt_tensor *logits, const pt_tensor *target,
                               const pt_cross_entropy_opts *opts)
{
    pt_cross_entropy_opts o = opts ? *opts : (pt_cross_entropy_opts){0};
    class_args a = {"pt_cross_entropy",
                    PTI_OP_cross_entropy,
                    logits,
                    target,
                    o.weight,
                    o.has_ignore_index ? o.ignore_index : DEFAULT_IGNORE_INDEX,
                    o.label_smoothing,
                    o.reduction,
                    true};
    return class_loss(&a);
}

pt_tensor *pt_cross_entropy(const pt_tensor *logits, const pt_tensor *target)
{
    return pt_cross_entropy_ex(logits, target, NULL);
}

pt_tensor *pt_nll_loss_ex(const pt_tensor *input, const pt_tensor *target,
                          const pt_nll_loss_opts *opts)
{
    pt_nll_loss_opts o = opts ? *opts : (pt_nll_loss_opts){0};
    class_args a = {
        "pt_nll_loss", PTI_OP_nll_loss, input,
        target,        o.weight,        o.has_ignore_index ? o.ignore_index : DEFAULT_IGNORE_INDEX,
        0.0,           o.reduction,     false};
    return class_loss(&a);
}

pt_tensor *pt_nll_loss(const pt_tensor *input, const pt_tensor *target)
{
    return pt_nll_loss_ex(input, target, NULL);
}
