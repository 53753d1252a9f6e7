/* Exponential moving average of a module's weights (include/prometorch/optim_utils.h):
 * torch.optim.swa_utils.AveragedModel with the EMA avg_fn (decay * avg + (1 - decay) * p,
 * first update copies) or timm's ModelEmaV2 (the average starts from the weights at
 * construction). Shadow tensors are private copies (not scope-tracked, no grad); buffers are
 * copied at every update. */
#include <math.h>
#include <stdlib.h>

#include "../core/internal.h"
#include "optim_internal.h"
#include "prometorch/optim_utils.h"
#include "prometorch/prometorch.h"

struct pt_ema {
    pt_ema_opts opts;
    int n_params, n_buffers;
    pt_tensor **params;  /* shadow parameters, owned */
    pt_tensor **buffers; /* shadow buffers, owned */
    int64_t n_updates;
};

void pt_ema_free(pt_ema *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->n_params; i++)
        pt_release(e->params[i]);
    for (int i = 0; i < e->n_buffers; i++)
        pt_release(e->buffers[i]);
    free(e->params);
    free(e->buffers);
    free(e);
}

/* m's parameters (which 0) or buffers (1), borrowed in a malloc'd array; count or -1. */
static int members(pt_module *m, int which, pt_tensor ***out)
{
    return which == 0 ? pt_nn_named_parameters(m, NULL, out) : pt_nn_named_buffers(m, NULL, out);
}

static pt_tensor **clone_all(int n, pt_tensor **src)
{
    pt_tensor **out = pti_calloc((size_t)(n > 0 ? n : 1), sizeof *out);
    if (!out)
        return pti_error_null(PT_ERR_OOM, "pt_ema_new: out of memory");
    pt_no_grad_begin();
    for (int i = 0; i < n; i++) {
        out[i] = pti_optim_state_clone(src[i]);
        if (!out[i]) {
            for (int j = 0; j < i; j++)
                pt_release(out[j]);
            free(out);
            out = NULL;
            break;
        }
    }
    pt_no_grad_end();
    return out;
}

pt_ema *pt_ema_new(pt_module *m, pt_ema_opts opts)
{
    if (!m)
        return pti_error_null(PT_ERR_NULL, "pt_ema_new: module is NULL");
    if (!(opts.decay >= 0 && opts.decay <= 1))
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_ema_new: decay must be in [0, 1], got %g",
                              opts.decay);
    pt_ema *e = pti_calloc(1, sizeof *e);
    if (!e)
        return pti_error_null(PT_ERR_OOM, "pt_ema_new: out of memory");
    e->opts = opts;
    pt_tensor **ps = NULL, **bs = NULL;
    int np = members(m, 0, &ps), nb = members(m, 1, &bs);
    if (np >= 0 && nb >= 0) {
        e->params = clone_all(np, ps);
        e->n_params = e->params ? np : 0;
        e->buffers = clone_all(nb, bs);
        e->n_buffers = e->buffers ? nb : 0;
    }
    free(ps);
    free(bs);
    if (np < 0 || nb < 0 || !e->params || !e->buffers) {
        pt_ema_free(e);
        return NULL;
    }
    return e;
}

/* Checks that m still has e's parameter/buffer shapes; fills *ps / *bs (caller frees). */
static pt_status matching(const char *op, const pt_ema *e, pt_module *m, pt_tensor ***ps,
                          pt_tensor ***bs)
{
    *ps = *bs = NULL;
    if (!e || !m)
        return pti_error(PT_ERR_NULL, "%s: ema or module is NULL", op);
    int np = members(m, 0, ps), nb = members(m, 1, bs);
    pt_status st = PT_OK;
    if (np != e->n_params || nb != e->n_buffers) {
        st = pti_error(PT_ERR_INVALID_ARG,
                       "%s: the module has %d parameters and %d buffers, the EMA holds %d and %d",
                       op, np, nb, e->n_params, e->n_buffers);
    }
    for (int i = 0; st == PT_OK && i < np + nb; i++) {
        const pt_tensor *a = i < np ? (*ps)[i] : (*bs)[i - np];
        const pt_tensor *b = i < np ? e->params[i] : e->buffers[i - np];
        if (a->ndim != b->ndim || pt_numel(a) != pt_numel(b))
            st = pti_error(PT_ERR_SHAPE, "%s: %s %d is %s, the EMA holds %s", op,
                           i < np ? "parameter" : "buffer", i < np ? i : i - np, pti_tensor_desc(a),
                           pti_tensor_desc(b));
    }
    if (st != PT_OK) {
        free(*ps);
        free(*bs);
        *ps = *bs = NULL;
    }
    return st;
}

pt_status pt_ema_update(pt_ema *e, pt_module *m)
{
    pt_tensor **ps, **bs;
    pt_status st = matching("pt_ema_update", e, m, &ps, &bs);
    if (st != PT_OK)
        return st;
    bool copy = e->opts.averaged_model && e->n_updates == 0;
    double d = e->opts.decay;
    pt_no_grad_begin();
    pt_scope_begin();
    for (int i = 0; st == PT_OK && i < e->n_params; i++) {
        if (copy) {
            st = pt_copy_(e->params[i], ps[i]);
        } else {
            pt_tensor *avg = pt_add(pt_mul_scalar(e->params[i], d), pt_mul_scalar(ps[i], 1 - d));
            st = avg ? pt_copy_(e->params[i], avg) : pt_last_status();
        }
    }
    for (int i = 0; st == PT_OK && i < e->n_buffers; i++)
        st = pt_copy_(e->buffers[i], bs[i]);
    pt_scope_end();
    pt_no_grad_end();
    free(ps);
    free(bs);
    if (st == PT_OK)
        e->n_updates++;
    return st;
}

/* Copies the EMA value into the module's tensor. */
static pt_status copy_from_ema(pt_tensor *module_t, pt_tensor *ema_t)
{
    return pt_copy_(module_t, ema_t);
}

/* Exchanges the values of a and b through a temporary copy. */
static pt_status swap_values(pt_tensor *a, pt_tensor *b)
{
    pt_tensor *tmp = pt_clone(a);
    pt_status st = tmp ? pt_copy_(a, b) : pt_last_status();
    if (st == PT_OK)
        st = pt_copy_(b, tmp);
    pt_release(tmp);
    return st;
}

/* Runs fn(module tensor, EMA tensor) under no_grad over every parameter, then every buffer,
 * of m matched with e's (`op` names the caller in messages); stops at the first error. */
static pt_status for_each_pair(const char *op, const pt_ema *e, pt_module *m,
                               pt_status (*fn)(pt_tensor *module_t, pt_tensor *ema_t))
{
    pt_tensor **ps, **bs;
    pt_status st = matching(op, e, m, &ps, &bs);
    if (st != PT_OK)
        return st;
    pt_no_grad_begin();
    for (int i = 0; st == PT_OK && i < e->n_params; i++)
        st = fn(ps[i], e->params[i]);
    for (int i = 0; st == PT_OK && i < e->n_buffers; i++)
        st = fn(bs[i], e->buffers[i]);
    pt_no_grad_end();
    free(ps);
    free(bs);
    return st;
}

pt_status pt_ema_copy_to(const pt_ema *e, pt_module *m)
{
    return for_each_pair("pt_ema_copy_to", e, m, copy_from_ema);
}

pt_status pt_ema_swap(pt_ema *e, pt_module *m)
{
    return for_each_pair("pt_ema_swap", e, m, swap_values);
}

int64_t pt_ema_num_updates(const pt_ema *e)
{
    return e ? e->n_updates : -1;
}

int pt_ema_num_params(const pt_ema *e)
{
    return e ? e->n_params : -1;
}

pt_tensor *pt_ema_param_ref(const pt_ema *e, int i)
{
    if (!e || i < 0 || i >= e->n_params)
        return pti_error_null(PT_ERR_INDEX, "pt_ema_param_ref: index %d out of range", i);
    return e->params[i];
}
