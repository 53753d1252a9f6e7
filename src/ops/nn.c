/* The nn family's front-ends (torch.nn.functional semantics): batch_norm, layer_norm,
 * group_norm, rms_norm, dropout and scaled_dot_product_attention. Each checks its arguments,
 * brings the inputs to a contiguous float32/float64 compute copy (float16/bfloat16 compute in
 * float32 and round back, as PyTorch's CPU kernels), allocates the output and dispatches to
 * the kernels in src/backends/<device>/nn*.c with the parameters of nn_params.h.
 * Backward formulas join these when the autograd engine lands. */
#include <math.h>
#include <string.h>

#include "../graph/node.h"
#include "common.h"
#include "nn_params.h"
#include "nn_grad.h"

/* ---- shared helpers ---------------------------------------------------------------------------
 */

static pt_dtype compute_dtype(pt_dtype dt)
{
    return dt == PT_FLOAT64 ? PT_FLOAT64 : PT_FLOAT32;
}

/* t (nullable) as a contiguous tensor of dtype cdt: a new reference (to t itself when it
 * already is one). NULL in, NULL out (check pt_last_status() only for a non-NULL t). */
static pt_tensor *prep(const pt_tensor *t, pt_dtype cdt)
{
    if (!t)
        return NULL;
    pt_tensor *a = pti_as_dtype(t, cdt);
    if (!a)
        return NULL;
    pt_tensor *r = pt_contiguous(a);
    pt_release(a);
    return r;
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

/* Argument checks shared by the fused norm backwards: clears the gradient out-pointers, then
 * checks grad_out and x (floating, same shape), that all n tensors share a device, and, when
 * need_channels, that x is [N, C, *]. */
static bool check_norm_backward(const char *op, const pt_tensor *grad_out, const pt_tensor *x,
                                int n, const pt_tensor *const *all, bool need_channels,
                                pt_tensor **grad_weight, pt_tensor **grad_bias)
{
    if (grad_weight)
        *grad_weight = NULL;
    if (grad_bias)
        *grad_bias = NULL;
    if (!PTI_CHECK_ARG(grad_out, op, "grad_output") || !PTI_CHECK_ARG(x, op, "x") ||
        !pti_check_floating(op, "x", x) || !pti_check_floating(op, "grad_output", grad_out) ||
        !pti_check_same_device(op, n, all))
        return false;
    if (need_channels && x->ndim < 2) {
        pti_error(PT_ERR_SHAPE, "%s: x must be [N, C, *] (at least 2 dims), got %s", op,
                  pti_shape_str(x->ndim, x->shape));
        return false;
    }
    if (grad_out->ndim != x->ndim ||
        memcmp(grad_out->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim) != 0) {
        pti_error(PT_ERR_SHAPE, "%s: grad_output of size %s does not match x %s", op,
                  pti_shape_str(grad_out->ndim, grad_out->shape), pti_shape_str(x->ndim, x->shape));
        return false;
    }
    return true;
}

/* Runs a fused norm backward kernel. ins[0..n_in) are the prepared (contiguous, compute
 * dtype) inputs, grad_out first; this function releases them. ins_ok says they were all
 * prepared. The weight/bias gradients have shape (pn, pshape) and weight's dtype. Returns
 * the input gradient and fills the requested out-pointers, or NULL with nothing leaked. */
static pt_tensor *run_norm_backward(pti_op op, const void *params, int n_in, pt_tensor **ins,
                                    bool ins_ok, const pt_tensor *x, const pt_tensor *weight,
                                    int pn, const int64_t *pshape, pt_tensor **grad_weight,
                                    pt_tensor **grad_bias)
{
    pt_dtype cdt = compute_dtype(x->dtype);
    pt_device dev = x->storage->device;
    pt_tensor *gx = ins_ok ? pti_tensor_new(x->ndim, x->shape, cdt, dev) : NULL;
    pt_tensor *gw = gx && grad_weight ? pt_zeros(pn, pshape, cdt, dev) : NULL;
    pt_tensor *gb = gx && grad_bias ? pt_zeros(pn, pshape, cdt, dev) : NULL;
    bool ok = gx && (!grad_weight || gw) && (!grad_bias || gb);
    if (ok && gx->numel > 0) {
        pti_call call = {.n_in = n_in, .n_out = 3, .out = {gx, gw, gb}, .params = params};
        for (int i = 0; i < n_in; i++)
            call.in[i] = ins[i];
        ok = pti_dispatch(op, &call) == PT_OK;
    }
    for (int i = 0; i < n_in; i++)
        pt_release(ins[i]);
    pt_dtype wdt = weight ? weight->dtype : x->dtype;
    gx = ok ? finish(gx, x->dtype) : (pt_release(gx), NULL);
    gw = ok && gx ? finish(gw, wdt) : (pt_release(gw), NULL);
    gb = ok && gx ? finish(gb, wdt) : (pt_release(gb), NULL);
    if (!gx || (grad_weight && !gw) || (grad_bias && !gb)) {
        pt_release(gx);
        pt_release(gw);
        pt_release(gb);
        return NULL;
    }
    if (grad_weight)
        *grad_weight = gw;
    if (grad_bias)
        *grad_bias = gb;
    return gx;
}

/* An optional 1-D per-channel tensor: NULL, or floating of shape [c]. */
static bool check_channel_param(const char *op, const char *arg, const pt_tensor *t, int64_t c)
{
    if (!t)
        return true;
    if (!pti_check_floating(op, arg, t))
        return false;
    if (t->ndim != 1 || t->shape[0] != c)
        return pti_error(PT_ERR_SHAPE, "%s: %s must have shape [%lld], got %s", op, arg,
                         (long long)c, pti_shape_str(t->ndim, t->shape)),
               false;
    return true;
}

/* Runs a norm kernel on contiguous compute copies of x, weight and bias (both nullable) and
 * returns y in x's dtype. */
static pt_tensor *run_norm(pti_op kop, const pt_tensor *x, const pt_tensor *w, const pt_tensor *b,
                           const void *params)
{
    pt_dtype cdt = compute_dtype(x->dtype);
    pt_tensor *xc = prep(x, cdt), *wc = prep(w, cdt), *bc = prep(b, cdt);
    pt_tensor *out = NULL;
    if (xc && (!w || wc) && (!b || bc)) {
        out = pti_tensor_new(x->ndim, x->shape, cdt, x->storage->device);
        if (out && out->numel > 0) {
            pti_call c = {
                .n_in = 3, .n_out = 1, .in = {xc, wc, bc}, .out = {out}, .params = params};
            if (pti_dispatch(kop, &c) != PT_OK) {
                pt_release(out);
                out = NULL;
            }
        }
    }
    pt_release(xc);
    pt_release(wc);
    pt_release(bc);
    return finish(out, x->dtype);
}

/* ---- batch_norm -------------------------------------------------------------------------------
 */

static pt_tensor *batch_norm_impl(const pt_tensor *x, pt_tensor *running_mean,
                                  pt_tensor *running_var, const pt_tensor *weight,
                                  const pt_tensor *bias, bool training, double momentum,
                                  double eps);

/* Autograd: an op records when grad mode is on and an input requires grad; its kernel then
 * runs under no-grad and the node is added (nn_grad.c). Running stats never get gradients. */
static bool rec_begin(int n, const pt_tensor *const *inputs)
{
    if (!pti_grad_recording(n, inputs))
        return false;
    pt_no_grad_begin();
    return true;
}

pt_tensor *pt_batch_norm(const pt_tensor *x, pt_tensor *running_mean, pt_tensor *running_var,
                         const pt_tensor *weight, const pt_tensor *bias, bool training,
                         double momentum, double eps)
{
    const pt_tensor *ins[3] = {x, weight, bias};
    if (!rec_begin(3, ins))
        return batch_norm_impl(x, running_mean, running_var, weight, bias, training, momentum, eps);
    pt_tensor *out =
        batch_norm_impl(x, running_mean, running_var, weight, bias, training, momentum, eps);
    pt_no_grad_end();
    return pti_nn_record_batch_norm(out, x, running_mean, running_var, weight, bias, training, eps);
}

static pt_tensor *batch_norm_impl(const pt_tensor *x, pt_tensor *running_mean,
                                  pt_tensor *running_var, const pt_tensor *weight,
                                  const pt_tensor *bias, bool training, double momentum, double eps)
{
    const char *op = "pt_batch_norm";
    if (!PTI_CHECK_ARG(x, op, "x") || !pti_check_floating(op, "x", x))
        return NULL;
    const pt_tensor *all[5] = {x, running_mean, running_var, weight, bias};
    if (!pti_check_same_device(op, 5, all))
        return NULL;
    if (x->ndim < 2)
        return pti_error_null(PT_ERR_SHAPE, "%s: x must be [N, C, *] (at least 2 dims), got %s", op,
                              pti_shape_str(x->ndim, x->shape));
    pti_batch_norm_params p = {.n = x->shape[0],
                               .c = x->shape[1],
                               .s = 1,
                               .training = training,
                               .momentum = momentum,
                               .eps = eps};
    for (int d = 2; d < x->ndim; d++)
        p.s *= x->shape[d];
    if (!check_channel_param(op, "running_mean", running_mean, p.c) ||
        !check_channel_param(op, "running_var", running_var, p.c) ||
        !check_channel_param(op, "weight", weight, p.c) ||
        !check_channel_param(op, "bias", bias, p.c))
        return NULL;
    if (!training && (!running_mean || !running_var))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: running_mean and running_var are required when training is "
                              "false",
                              op);
    if (training && p.n * p.s == 1)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: expected more than 1 value per channel when training, got "
                              "input size %s",
                              op, pti_shape_str(x->ndim, x->shape));
    pt_dtype cdt = compute_dtype(x->dtype);
    pt_tensor *xc = prep(x, cdt), *wc = prep(weight, cdt), *bc = prep(bias, cdt);
    pt_tensor *out = NULL;
    if (xc && (!weight || wc) && (!bias || bc)) {
        out = pti_tensor_new(x->ndim, x->shape, cdt, x->storage->device);
        if (out) {
            /* An empty batch leaves the running stats as they are (PyTorch), rather than
             * blending in the NaN statistics of zero values. */
            bool update = training && p.n * p.s > 0;
            pt_tensor *rm_out = update ? running_mean : NULL;
            pt_tensor *rv_out = update ? running_var : NULL;
            if (rm_out)
                pti_bump_version(rm_out);
            if (rv_out)
                pti_bump_version(rv_out);
            pti_call c = {.n_in = 5,
                          .n_out = 3,
                          .in = {xc, wc, bc, running_mean, running_var},
                          .out = {out, rm_out, rv_out},
                          .params = &p};
            if (pti_dispatch(PTI_OP_batch_norm, &c) != PT_OK) {
                pt_release(out);
                out = NULL;
            }
        }
    }
    pt_release(xc);
    pt_release(wc);
    pt_release(bc);
    return finish(out, x->dtype);
}

pt_tensor *pt_batch_norm_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                  const pt_tensor *running_mean, const pt_tensor *running_var,
                                  const pt_tensor *weight, bool training, double eps,
                                  pt_tensor **grad_weight, pt_tensor **grad_bias)
{
    const char *op = "pt_batch_norm_backward";
    const pt_tensor *all[5] = {grad_out, x, running_mean, running_var, weight};
    if (!check_norm_backward(op, grad_out, x, 5, all, true, grad_weight, grad_bias))
        return NULL;
    pti_batch_norm_params p = {
        .n = x->shape[0], .c = x->shape[1], .s = 1, .training = training, .eps = eps};
    for (int d = 2; d < x->ndim; d++)
        p.s *= x->shape[d];
    if (!check_channel_param(op, "running_mean", running_mean, p.c) ||
        !check_channel_param(op, "running_var", running_var, p.c) ||
        !check_channel_param(op, "weight", weight, p.c))
        return NULL;
    if (!training && (!running_mean || !running_var))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: running_mean and running_var are required when training is "
                              "false",
                              op);
    pt_dtype cdt = compute_dtype(x->dtype);
    pt_tensor *ins[5] = {prep(grad_out, cdt), prep(x, cdt), prep(weight, cdt),
                         training ? NULL : prep(running_mean, cdt),
                         training ? NULL : prep(running_var, cdt)};
    bool ins_ok = ins[0] && ins[1] && (!weight || ins[2]) && (training || (ins[3] && ins[4]));
    return run_norm_backward(PTI_OP_batch_norm_backward, &p, 5, ins, ins_ok, x, weight, 1, &p.c,
                             grad_weight, grad_bias);
}

/* ---- layer_norm and rms_norm -------------------------------------------------------------------
 */

/* Checks normalized_shape against x's trailing dims and the weight/bias shapes; sets rows/cols. */
static bool check_normalized_shape(const char *op, const pt_tensor *x, int n, const int64_t *nshape,
                                   const pt_tensor *w, const pt_tensor *b, pti_row_norm_params *p)
{
    if (n < 1 || n > x->ndim || !nshape)
        return pti_error(PT_ERR_SHAPE,
                         "%s: normalized_shape must have 1..%d dims for input %s, got %d", op,
                         x->ndim, pti_shape_str(x->ndim, x->shape), n),
               false;
    int lead = x->ndim - n;
    for (int i = 0; i < n; i++)
        if (x->shape[lead + i] != nshape[i])
            return pti_error(PT_ERR_SHAPE, "%s: input %s does not end with normalized_shape %s", op,
                             pti_shape_str(x->ndim, x->shape), pti_shape_str(n, nshape)),
                   false;
    const pt_tensor *params[2] = {w, b};
    const char *names[2] = {"weight", "bias"};
    for (int k = 0; k < 2; k++) {
        const pt_tensor *t = params[k];
        if (!t)
            continue;
        if (!pti_check_floating(op, names[k], t))
            return false;
        if (t->ndim != n || memcmp(t->shape, nshape, (size_t)n * sizeof(int64_t)) != 0)
            return pti_error(PT_ERR_SHAPE, "%s: %s must have normalized_shape %s, got %s", op,
                             names[k], pti_shape_str(n, nshape), pti_shape_str(t->ndim, t->shape)),
                   false;
    }
    p->cols = pti_shape_numel(n, nshape);
    p->rows = p->cols > 0 ? x->numel / p->cols : 0;
    return true;
}

static pt_tensor *layer_norm_impl(const pt_tensor *x, int n_normalized_dims,
                                  const int64_t *normalized_shape, const pt_tensor *weight,
                                  const pt_tensor *bias, double eps);

pt_tensor *pt_layer_norm(const pt_tensor *x, int n_normalized_dims, const int64_t *normalized_shape,
                         const pt_tensor *weight, const pt_tensor *bias, double eps)
{
    const pt_tensor *ins[3] = {x, weight, bias};
    if (!rec_begin(3, ins))
        return layer_norm_impl(x, n_normalized_dims, normalized_shape, weight, bias, eps);
    pt_tensor *out = layer_norm_impl(x, n_normalized_dims, normalized_shape, weight, bias, eps);
    pt_no_grad_end();
    return pti_nn_record_row_norm(out, false, x, n_normalized_dims, weight, bias, eps);
}

static pt_tensor *layer_norm_impl(const pt_tensor *x, int n_normalized_dims,
                                  const int64_t *normalized_shape, const pt_tensor *weight,
                                  const pt_tensor *bias, double eps)
{
    const char *op = "pt_layer_norm";
    if (!PTI_CHECK_ARG(x, op, "x") || !pti_check_floating(op, "x", x))
        return NULL;
    const pt_tensor *all[3] = {x, weight, bias};
    if (!pti_check_same_device(op, 3, all))
        return NULL;
    pti_row_norm_params p = {.eps = eps};
    if (!check_normalized_shape(op, x, n_normalized_dims, normalized_shape, weight, bias, &p))
        return NULL;
    return run_norm(PTI_OP_layer_norm, x, weight, bias, &p);
}

/* The fused gradients of layer_norm (rms false) / rms_norm (rms true). */
static pt_tensor *row_norm_backward(const char *op, bool rms, const pt_tensor *grad_out,
                                    const pt_tensor *x, int n, const int64_t *nshape,
                                    const pt_tensor *weight, double eps, pt_tensor **grad_weight,
                                    pt_tensor **grad_bias)
{
    const pt_tensor *all[3] = {grad_out, x, weight};
    if (!check_norm_backward(op, grad_out, x, 3, all, false, grad_weight, grad_bias))
        return NULL;
    pti_row_norm_params rp = {.eps = eps};
    if (!check_normalized_shape(op, x, n, nshape, weight, NULL, &rp))
        return NULL;
    pti_row_norm_bw_params p = {.rows = rp.rows, .cols = rp.cols, .eps = rp.eps, .rms = rms};
    pt_dtype cdt = compute_dtype(x->dtype);
    pt_tensor *ins[3] = {prep(grad_out, cdt), prep(x, cdt), prep(weight, cdt)};
    bool ins_ok = ins[0] && ins[1] && (!weight || ins[2]);
    return run_norm_backward(PTI_OP_row_norm_backward, &p, 3, ins, ins_ok, x, weight, n, nshape,
                             grad_weight, grad_bias);
}

pt_tensor *pt_layer_norm_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                  int n_normalized_dims, const int64_t *normalized_shape,
                                  const pt_tensor *weight, double eps, pt_tensor **grad_weight,
                                  pt_tensor **grad_bias)
{
    return row_norm_backward("pt_layer_norm_backward", false, grad_out, x, n_normalized_dims,
                             normalized_shape, weight, eps, grad_weight, grad_bias);
}

/* torch.finfo(dt).eps */
static double finfo_eps(pt_dtype dt)
{
    switch (dt) {
    case PT_FLOAT64: return 2.220446049250313e-16;
    case PT_FLOAT16: return 0.0009765625;
    case PT_BFLOAT16: return 0.0078125;
    default: return 1.1920928955078125e-07;
    }
}

static pt_tensor *rms_norm_impl(const pt_tensor *x, int n_normalized_dims,
                                const int64_t *normalized_shape, const pt_tensor *weight,
                                double eps);

pt_tensor *pt_rms_norm_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                int n_normalized_dims, const int64_t *normalized_shape,
                                const pt_tensor *weight, double eps, pt_tensor **grad_weight)
{
    double e = eps < 0 && x ? finfo_eps(x->dtype) : eps;
    return row_norm_backward("pt_rms_norm_backward", true, grad_out, x, n_normalized_dims,
                             normalized_shape, weight, e, grad_weight, NULL);
}

pt_tensor *pt_rms_norm(const pt_tensor *x, int n_normalized_dims, const int64_t *normalized_shape,
                       const pt_tensor *weight, double eps)
{
    const pt_tensor *ins[2] = {x, weight};
    if (!rec_begin(2, ins))
        return rms_norm_impl(x, n_normalized_dims, normalized_shape, weight, eps);
    pt_tensor *out = rms_norm_impl(x, n_normalized_dims, normalized_shape, weight, eps);
    pt_no_grad_end();
    if (!out)
        return NULL;
    return pti_nn_record_row_norm(out, true, x, n_normalized_dims, weight, NULL,
                                  eps < 0 ? finfo_eps(x->dtype) : eps);
}

static pt_tensor *rms_norm_impl(const pt_tensor *x, int n_normalized_dims,
                                const int64_t *normalized_shape, const pt_tensor *weight,
                                double eps)
{
    const char *op = "pt_rms_norm";
    if (!PTI_CHECK_ARG(x, op, "x") || !pti_check_floating(op, "x", x))
        return NULL;
    const pt_tensor *all[2] = {x, weight};
    if (!pti_check_same_device(op, 2, all))
        return NULL;
    pti_row_norm_params p = {.eps = eps < 0 ? finfo_eps(x->dtype) : eps};
    if (!check_normalized_shape(op, x, n_normalized_dims, normalized_shape, weight, NULL, &p))
        return NULL;
    return run_norm(PTI_OP_rms_norm, x, weight, NULL, &p);
}

/* ---- group_norm ---------------------------------------------------------------------------------
 */

static pt_tensor *group_norm_impl(const pt_tensor *x, int64_t num_groups, const pt_tensor *weight,
                                  const pt_tensor *bias, double eps);

pt_tensor *pt_group_norm(const pt_tensor *x, int64_t num_groups, const pt_tensor *weight,
                         const pt_tensor *bias, double eps)
{
    const pt_tensor *ins[3] = {x, weight, bias};
    if (!rec_begin(3, ins))
        return group_norm_impl(x, num_groups, weight, bias, eps);
    pt_tensor *out = group_norm_impl(x, num_groups, weight, bias, eps);
    pt_no_grad_end();
    return pti_nn_record_group_norm(out, x, num_groups, weight, bias, eps);
}

static pt_tensor *group_norm_impl(const pt_tensor *x, int64_t num_groups, const pt_tensor *weight,
                                  const pt_tensor *bias, double eps)
{
    const char *op = "pt_group_norm";
    if (!PTI_CHECK_ARG(x, op, "x") || !pti_check_floating(op, "x", x))
        return NULL;
    const pt_tensor *all[3] = {x, weight, bias};
    if (!pti_check_same_device(op, 3, all))
        return NULL;
    if (x->ndim < 2)
        return pti_error_null(PT_ERR_SHAPE, "%s: x must be [N, C, *] (at least 2 dims), got %s", op,
                              pti_shape_str(x->ndim, x->shape));
    pti_group_norm_params p = {
        .n = x->shape[0], .c = x->shape[1], .s = 1, .groups = num_groups, .eps = eps};
    if (num_groups <= 0 || p.c % num_groups != 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: expected the number of channels (%lld) to be divisible by "
                              "num_groups (%lld)",
                              op, (long long)p.c, (long long)num_groups);
    for (int d = 2; d < x->ndim; d++)
        p.s *= x->shape[d];
    /* PyTorch refuses empty groups (even with N = 0): channels first, then the spatial size */
    if (p.c == 0)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: expected the number of channels to be greater than 0, got 0 "
                              "(x %s)",
                              op, pti_shape_str(x->ndim, x->shape));
    if (p.s == 0)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: expected HxW (the product of x's dims after C) to be greater "
                              "than 0, got 0 (x %s)",
                              op, pti_shape_str(x->ndim, x->shape));
    if (!check_channel_param(op, "weight", weight, p.c) ||
        !check_channel_param(op, "bias", bias, p.c))
        return NULL;
    return run_norm(PTI_OP_group_norm, x, weight, bias, &p);
}

pt_tensor *pt_group_norm_backward(const pt_tensor *grad_out, const pt_tensor *x, int64_t num_groups,
                                  const pt_tensor *weight, double eps, pt_tensor **grad_weight,
                                  pt_tensor **grad_bias)
{
    const char *op = "pt_group_norm_backward";
    const pt_tensor *all[3] = {grad_out, x, weight};
    if (!check_norm_backward(op, grad_out, x, 3, all, true, grad_weight, grad_bias))
        return NULL;
    pti_group_norm_params p = {
        .n = x->shape[0], .c = x->shape[1], .s = 1, .groups = num_groups, .eps = eps};
    if (num_groups <= 0 || p.c % num_groups != 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: expected the number of channels (%lld) to be divisible by "
                              "num_groups (%lld)",
                              op, (long long)p.c, (long long)num_groups);
    for (int d = 2; d < x->ndim; d++)
        p.s *= x->shape[d];
    if (!check_channel_param(op, "weight", weight, p.c))
        return NULL;
    pt_dtype cdt = compute_dtype(x->dtype);
    pt_tensor *ins[3] = {prep(grad_out, cdt), prep(x, cdt), prep(weight, cdt)};
    bool ins_ok = ins[0] && ins[1] && (!weight || ins[2]);
    return run_norm_backward(PTI_OP_group_norm_backward, &p, 3, ins, ins_ok, x, weight, 1, &p.c,
                             grad_weight, grad_bias);
}

/* ---- dropout
 * ------------------------------------------------------------------------------------- */

static pt_tensor *dropout_impl(const pt_tensor *x, double p, bool training, pt_tensor **mask);

pt_tensor *pt_dropout_mask(const pt_tensor *x, double p, bool training, pt_tensor **mask)
{
    if (!rec_begin(1, &x))
        return dropout_impl(x, p, training, mask);
    bool applied = training && p > 0 && x->numel > 0;
    pt_tensor *m = NULL;
    pt_tensor *out = dropout_impl(x, p, training, applied || mask ? &m : NULL);
    pt_no_grad_end();
    if (out && applied) {
        out = pti_nn_record_dropout(out, x, m, p);
    } else if (out && pti_record_alias(out, x) != PT_OK) {
        pt_release(out);
        out = NULL;
    }
    if (mask && out)
        *mask = m;
    else
        pt_release(m);
    return out;
}

static pt_tensor *dropout_impl(const pt_tensor *x, double p, bool training, pt_tensor **mask)
{
    const char *op = "pt_dropout";
    if (mask)
        *mask = NULL;
    if (!PTI_CHECK_ARG(x, op, "x") || !pti_check_floating(op, "x", x))
        return NULL;
    if (!(p >= 0 && p <= 1))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: dropout probability has to be between 0 and 1, but got %g", op,
                              p);
    pt_tensor *m = NULL;
    if (!training || p == 0 || x->numel == 0) {
        if (mask) {
            m = pt_ones(x->ndim, x->shape, PT_BOOL, x->storage->device);
            if (!m)
                return NULL;
        }
        pt_tensor *r = pti_alias(x);
        if (!r) {
            pt_release(m);
            return NULL;
        }
        if (mask)
            *mask = m;
        return r;
    }
    pt_tensor *xc = pt_contiguous(x);
    pt_tensor *out = xc ? pti_tensor_new(x->ndim, x->shape, x->dtype, x->storage->device) : NULL;
    if (out && mask)
        m = pti_tensor_new(x->ndim, x->shape, PT_BOOL, x->storage->device);
    if (!out || (mask && !m))
        goto fail;
    pti_rng_stream rs = pti_rng_reserve(((uint64_t)x->numel + 3) / 4);
    pti_dropout_params dp = {.p = p, .key = rs.key, .base = rs.base};
    pti_call c = {.n_in = 1, .n_out = 2, .in = {xc}, .out = {out, m}, .params = &dp};
    if (pti_dispatch(PTI_OP_dropout, &c) != PT_OK)
        goto fail;
    pt_release(xc);
    if (mask)
        *mask = m;
    return out;
fail:
    pt_release(xc);
    pt_release(out);
    pt_release(m);
    return NULL;
}

pt_tensor *pt_dropout(const pt_tensor *x, double p, bool training)
{
    return pt_dropout_mask(x, p, training, NULL);
}

/* ---- scaled_dot_product_attention
 * ---------------------------------------------------------------- */

/* Checks q/k/v shapes (equal batch dims, matching E and S); fills the sizes of p. */
static bool sdpa_check_qkv(const char *op, const pt_tensor *q, const pt_tensor *k,
                           const pt_tensor *v, pti_sdpa_params *p)
{
    const pt_tensor *t3[3] = {q, k, v};
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        if (!pti_check_floating(op, names[i], t3[i]))
            return false;
        if (t3[i]->dtype != q->dtype)
            return pti_error(PT_ERR_DTYPE, "%s: q, k and v must have one dtype, got %s, %s, %s", op,
                             pt_dtype_name(q->dtype), pt_dtype_name(k->dtype),
                             pt_dtype_name(v->dtype)),
                   false;
        if (t3[i]->ndim < 2 || t3[i]->ndim != q->ndim)
            goto bad_shape;
    }
    int nd = q->ndim;
    for (int d = 0; d < nd - 2; d++)
        if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d])
            goto bad_shape;
    if (k->shape[nd - 1] != q->shape[nd - 1] || v->shape[nd - 2] != k->shape[nd - 2])
        goto bad_shape;
    p->batch_ndim = nd - 2;
    p->batch = 1;
    for (int d = 0; d < nd - 2; d++) {
        p->batch_shape[d] = q->shape[d];
        p->batch *= q->shape[d];
    }
    p->l = q->shape[nd - 2];
    p->e = q->shape[nd - 1];
    p->s = k->shape[nd - 2];
    p->ev = v->shape[nd - 1];
    return true;
bad_shape:
    return pti_error(PT_ERR_SHAPE,
                     "%s: expected q [..., L, E], k [..., S, E], v [..., S, Ev] with the same "
                     "batch dims, got q %s, k %s, v %s",
                     op, pti_shape_str(q->ndim, q->shape), pti_shape_str(k->ndim, k->shape),
                     pti_shape_str(v->ndim, v->shape)),
           false;
}

/* Sets the mask's broadcast strides over [batch..., L, S]; false (error set) if it does not
 * broadcast there. */
static bool sdpa_mask_strides(const char *op, const pt_tensor *mask, const pt_tensor *q,
                              pti_sdpa_params *p)
{
    int nd = p->batch_ndim + 2;
    int64_t target[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    for (int d = 0; d < p->batch_ndim; d++)
        target[d] = p->batch_shape[d];
    target[nd - 2] = p->l;
    target[nd - 1] = p->s;
    int lead = nd - mask->ndim;
    if (lead < 0)
        goto bad;
    for (int d = 0; d < nd; d++) {
        int j = d - lead;
        if (j < 0 || mask->shape[j] == 1)
            stride[d] = 0;
        else if (mask->shape[j] == target[d])
            stride[d] = mask->stride[j];
        else
            goto bad;
    }
    for (int d = 0; d < p->batch_ndim; d++)
        p->mask_batch_stride[d] = stride[d];
    p->mask_stride_l = stride[nd - 2];
    p->mask_stride_s = stride[nd - 1];
    return true;
bad:
    (void)q;
    return pti_error(PT_ERR_SHAPE, "%s: attn_mask %s does not broadcast to the scores shape %s", op,
                     pti_shape_str(mask->ndim, mask->shape), pti_shape_str(nd, target)),
           false;
}

/* The argument checks of pt_scaled_dot_product_attention alone (for the recorded path with
 * dropout, which runs on public ops). */
static bool sdpa_validate(const pt_tensor *q, const pt_tensor *k, const pt_tensor *v,
                          const pt_tensor *attn_mask, double dropout_p)
{
    const char *op = "pt_scaled_dot_product_attention";
    pti_sdpa_params p = {0};
    const pt_tensor *all[4] = {q, k, v, attn_mask};
    if (!pti_check_same_device(op, 4, all) || !sdpa_check_qkv(op, q, k, v, &p))
        return false;
    if (!(dropout_p >= 0 && dropout_p <= 1))
        return pti_error(PT_ERR_INVALID_ARG, "%s: dropout_p must be in [0, 1], got %g", op,
                         dropout_p) == PT_OK;
    if (!attn_mask)
        return true;
    if (attn_mask->dtype != PT_BOOL && !pt_dtype_is_floating(attn_mask->dtype))
        return pti_error(PT_ERR_DTYPE, "%s: attn_mask must be bool or floating, got %s", op,
                         pt_dtype_name(attn_mask->dtype)) == PT_OK;
    p.mask_is_bool = attn_mask->dtype == PT_BOOL;
    pt_tensor *mask = pti_alias(attn_mask);
    bool ok = mask && sdpa_mask_strides(op, mask, q, &p);
    pt_release(mask);
    return ok;
}

/* Recorded attention with dropout: softmax, dropout (its mask kept for backward) and the
 * second matmul run as public ops, so the mask the forward used is the one backward applies. */
static pt_tensor *sdpa_dropout_forward(const pt_tensor *q, const pt_tensor *k, const pt_tensor *v,
                                       const pt_tensor *attn_mask, double dropout_p, bool is_causal,
                                       double scale, pt_tensor **drop_mask)
{
    pt_tensor *probs = pti_sdpa_probs(q, k, attn_mask, is_causal, scale);
    pt_tensor *dropped = probs ? pt_dropout_mask(probs, dropout_p, true, drop_mask) : NULL;
    pt_tensor *out = dropped ? pt_matmul(dropped, v) : NULL;
    pt_release(probs);
    pt_release(dropped);
    return out;
}

static pt_tensor *sdpa_impl(const pt_tensor *q, const pt_tensor *k, const pt_tensor *v,
                            const pt_tensor *attn_mask, double dropout_p, bool is_causal,
                            double scale);

pt_tensor *pt_scaled_dot_product_attention(const pt_tensor *q, const pt_tensor *k,
                                           const pt_tensor *v, const pt_tensor *attn_mask,
                                           double dropout_p, bool is_causal, double scale)
{
    const pt_tensor *ins[4] = {q, k, v, attn_mask};
    if (!rec_begin(4, ins))
        return sdpa_impl(q, k, v, attn_mask, dropout_p, is_causal, scale);
    pt_tensor *out = NULL, *drop_mask = NULL;
    double sc = scale;
    if (q && k && v) {
        if (scale == 0 && q->ndim > 0)
            sc = q->shape[q->ndim - 1] > 0 ? 1.0 / sqrt((double)q->shape[q->ndim - 1]) : 1.0;
        if (dropout_p > 0 && dropout_p <= 1 && sdpa_validate(q, k, v, attn_mask, dropout_p))
            out = sdpa_dropout_forward(q, k, v, attn_mask, dropout_p, is_causal, sc, &drop_mask);
        else if (!(dropout_p > 0 && dropout_p <= 1))
            out = sdpa_impl(q, k, v, attn_mask, dropout_p, is_causal, scale);
    } else {
        out = sdpa_impl(q, k, v, attn_mask, dropout_p, is_causal, scale);
    }
    pt_no_grad_end();
    out = pti_nn_record_sdpa(out, q, k, v, attn_mask, drop_mask, dropout_p > 0 ? dropout_p : 0,
                             is_causal, sc);
    pt_release(drop_mask);
    return out;
}

static pt_tensor *sdpa_impl(const pt_tensor *q, const pt_tensor *k, const pt_tensor *v,
                            const pt_tensor *attn_mask, double dropout_p, bool is_causal,
                            double scale)
{
    const char *op = "pt_scaled_dot_product_attention";
    if (!PTI_CHECK_ARG(q, op, "q") || !PTI_CHECK_ARG(k, op, "k") || !PTI_CHECK_ARG(v, op, "v"))
        return NULL;
    const pt_tensor *all[4] = {q, k, v, attn_mask};
    if (!pti_check_same_device(op, 4, all))
        return NULL;
    pti_sdpa_params p = {.is_causal = is_causal, .dropout_p = dropout_p};
    if (!sdpa_check_qkv(op, q, k, v, &p))
        return NULL;
    if (!(dropout_p >= 0 && dropout_p <= 1))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: dropout_p must be in [0, 1], got %g", op,
                              dropout_p);
    pt_dtype cdt = compute_dtype(q->dtype);
    pt_tensor *mask = NULL;
    if (attn_mask) {
        if (attn_mask->dtype != PT_BOOL && !pt_dtype_is_floating(attn_mask->dtype))
            return pti_error_null(PT_ERR_DTYPE, "%s: attn_mask must be bool or floating, got %s",
                                  op, pt_dtype_name(attn_mask->dtype));
        p.mask_is_bool = attn_mask->dtype == PT_BOOL;
        mask = p.mask_is_bool ? pti_alias(attn_mask) : pti_as_dtype(attn_mask, cdt);
        if (!mask)
            return NULL;
        if (!sdpa_mask_strides(op, mask, q, &p)) {
            pt_release(mask);
            return NULL;
        }
    }
    p.scale = scale != 0 ? scale : 1.0 / sqrt((double)p.e);
    int64_t oshape[PT_MAX_DIMS];
    memcpy(oshape, q->shape, sizeof(int64_t) * (size_t)q->ndim);
    oshape[q->ndim - 1] = p.ev;
    pt_tensor *qc = prep(q, cdt), *kc = prep(k, cdt), *vc = prep(v, cdt);
    pt_tensor *out =
        (qc && kc && vc) ? pti_tensor_new(q->ndim, oshape, cdt, q->storage->device) : NULL;
    if (out && out->numel > 0) {
        if (dropout_p > 0) {
            pti_rng_stream rs = pti_rng_reserve(((uint64_t)(p.batch * p.l * p.s) + 3) / 4);
            p.key = rs.key;
            p.base = rs.base;
        }
        pti_call c = {.n_in = 4, .n_out = 1, .in = {qc, kc, vc, mask}, .out = {out}, .params = &p};
        if (pti_dispatch(PTI_OP_scaled_dot_product_attention, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
    }
    pt_release(qc);
    pt_release(kc);
    pt_release(vc);
    pt_release(mask);
    return finish(out, q->dtype);
}
