/* Gradient clipping (include/prometorch/optim_utils.h): torch 1.13's clip_grad_norm_ and
 * clip_grad_value_, written with public ops so they run on any device and dtype. The norm is
 * computed exactly as torch does it: per-grad norms, their stack's norm, then
 * clip_coef = reciprocal(total + 1e-6) * max_norm (torch's Tensor.__rtruediv__), clamped to 1,
 * all in the grads' dtype. */
#include <math.h>
#include <stdlib.h>

#include "../core/internal.h"
#include "prometorch/optim_utils.h"
#include "prometorch/prometorch.h"

/* The existing grads of params (new references in *grads, malloc'd); returns their count or
 * -1 with the error set. */
static int collect_grads(const char *op, int n, pt_tensor *const *params, pt_tensor ***grads)
{
    *grads = NULL;
    if (n < 0 || (n > 0 && !params))
        return pti_error(PT_ERR_INVALID_ARG, "%s: bad parameter list (n = %d)", op, n), -1;
    pt_tensor **gs = pti_malloc(sizeof *gs * (size_t)(n > 0 ? n : 1));
    if (!gs)
        return pti_error(PT_ERR_OOM, "%s: out of memory", op), -1;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!params[i]) {
            for (int j = 0; j < k; j++)
                pt_release(gs[j]);
            free(gs);
            return pti_error(PT_ERR_NULL, "%s: parameter %d is NULL", op, i), -1;
        }
        pt_tensor *g = pt_grad(params[i]);
        if (g)
            gs[k++] = g;
    }
    *grads = gs;
    return k;
}

static void release_grads(int k, pt_tensor **gs)
{
    for (int i = 0; i < k; i++)
        pt_release(gs[i]);
    free(gs);
}

/* The total norm as a tensor in the grads' (promoted) dtype; NULL on error. Scoped by caller. */
static pt_tensor *total_norm_of(int k, pt_tensor **gs, double p)
{
    pt_tensor **norms = pti_malloc(sizeof *norms * (size_t)k);
    if (!norms)
        return pti_error_null(PT_ERR_OOM, "pt_clip_grad_norm_: out of memory");
    pt_dtype dt = pt_dtype_of(gs[0]);
    for (int i = 0; i < k; i++) {
        norms[i] = isinf(p) && p > 0 ? pt_max(pt_abs(gs[i])) : pt_norm(gs[i], p, 0, NULL, false);
        dt = pt_promote_types(dt, pt_dtype_of(gs[i]));
    }
    for (int i = 0; i < k; i++)
        if (norms[i] && pt_dtype_of(norms[i]) != dt)
            norms[i] = pt_to_dtype(norms[i], dt);
    pt_tensor *total;
    if (isinf(p) && p > 0)
        total = k == 1 ? norms[0] : pt_max(pt_stack(k, (const pt_tensor *const *)norms, 0));
    else
        total = pt_norm(pt_stack(k, (const pt_tensor *const *)norms, 0), p, 0, NULL, false);
    free(norms);
    return total;
}

pt_status pt_clip_grad_norm_(int n, pt_tensor *const *params, double max_norm, double norm_type,
                             bool error_if_nonfinite, double *total_norm)
{
    const char *op = "pt_clip_grad_norm_";
    if (total_norm)
        *total_norm = 0.0;
    if (isnan(max_norm) || isnan(norm_type))
        return pti_error(PT_ERR_INVALID_ARG, "%s: max_norm and norm_type must not be NaN", op);
    pt_tensor **gs;
    int k = collect_grads(op, n, params, &gs);
    if (k <= 0)
        return k < 0 ? pt_last_status() : (free(gs), PT_OK);
    pt_status st = PT_OK;
    pt_no_grad_begin();
    pt_scope_begin();
    pt_tensor *total = total_norm_of(k, gs, norm_type);
    double tn = total ? pt_item(total) : NAN;
    if (!total) {
        st = pt_last_status();
    } else if (error_if_nonfinite && !isfinite(tn)) {
        st = pti_error(PT_ERR_RUNTIME,
                       "%s: The total norm of order %g for gradients from `parameters` is "
                       "non-finite, so it cannot be clipped. To disable this error and scale "
                       "the gradients by the non-finite norm anyway, set "
                       "`error_if_nonfinite=False`",
                       op, norm_type);
    } else {
        pt_tensor *coef =
            pt_clamp_max(pt_mul_scalar(pt_reciprocal(pt_add_scalar(total, 1e-6)), max_norm), 1.0);
        double c = coef ? pt_item(coef) : NAN;
        st = coef ? PT_OK : pt_last_status();
        for (int i = 0; st == PT_OK && i < k; i++)
            st = pt_mul_scalar_(gs[i], c);
    }
    pt_scope_end();
    pt_no_grad_end();
    release_grads(k, gs);
    if (st == PT_OK && total_norm)
        *total_norm = tn;
    return st;
}

pt_status pt_clip_grad_value_(int n, pt_tensor *const *params, double clip_value)
{
    const char *op = "pt_clip_grad_value_";
    if (!(clip_value >= 0))
        return pti_error(PT_ERR_INVALID_ARG, "%s: clip_value must be >= 0, got %g", op, clip_value);
    pt_tensor **gs;
    int k = collect_grads(op, n, params, &gs);
    if (k < 0)
        return pt_last_status();
    pt_status st = PT_OK;
    pt_no_grad_begin();
    for (int i = 0; st == PT_OK && i < k; i++)
        st = pt_clamp_(gs[i], true, -clip_value, true, clip_value);
    pt_no_grad_end();
    release_grads(k, gs);
    return st;
}

/* Runs fn over m's parameters. */
static int module_params(const char *op, pt_module *m, pt_tensor ***ps)
{
    if (!m)
        return pti_error(PT_ERR_NULL, "%s: module is NULL", op), -1;
    return pt_nn_parameters(m, ps);
}

pt_status pt_nn_clip_grad_norm_(pt_module *m, double max_norm, double norm_type,
                                bool error_if_nonfinite, double *total_norm)
{
    pt_tensor **ps = NULL;
    int n = module_params("pt_nn_clip_grad_norm_", m, &ps);
    if (n < 0)
        return pt_last_status();
    pt_status st = pt_clip_grad_norm_(n, ps, max_norm, norm_type, error_if_nonfinite, total_norm);
    free(ps);
    return st;
}

pt_status pt_nn_clip_grad_value_(pt_module *m, double clip_value)
{
    pt_tensor **ps = NULL;
    int n = module_params("pt_nn_clip_grad_value_", m, &ps);
    if (n < 0)
        return pt_last_status();
    pt_status st = pt_clip_grad_value_(n, ps, clip_value);
    free(ps);
    return st;
}
