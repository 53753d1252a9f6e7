/* Gradient checkpointing (torch.utils.checkpoint, reentrant form): the forward runs without
 * recording, so none of its intermediate results are kept; backward reruns it with grad on,
 * from the saved inputs and the random-generator state of the first run, and backpropagates
 * through the recomputed graph. Built on the custom-function machinery of function.c. */
#include <stdlib.h>

#include "../graph/node.h"

typedef struct ckpt_state {
    pt_grad_fn fn;
    void *user;
    pti_rng_state rng; /* generator state when the forward started */
} ckpt_state;

typedef struct ckpt_args {
    pt_grad_fn fn;
    void *user;
} ckpt_args;

static pt_status ckpt_forward(pt_autograd_ctx *ctx, int n, pt_tensor *const *inputs,
                              pt_tensor **outputs)
{
    const ckpt_args *a = pt_ctx_user(ctx);
    ckpt_state *s = pti_malloc(sizeof *s);
    if (!s)
        return pt_last_status();
    s->fn = a->fn;
    s->user = a->user;
    s->rng = pti_rng_get_state();
    pt_ctx_set_data(ctx, s, free);
    outputs[0] = a->fn(n, inputs, a->user);
    if (!outputs[0])
        return pt_last_status() != PT_OK
                   ? pt_last_status()
                   : pti_error(PT_ERR_NULL, "pt_checkpoint: the function returned NULL");
    if (!pti_dtypes[outputs[0]->dtype].is_floating)
        return pti_error(PT_ERR_DTYPE,
                         "pt_checkpoint: the function must return a floating-point "
                         "tensor (got %s)",
                         pt_dtype_name(outputs[0]->dtype));
    return pt_ctx_save_for_backward(ctx, n, inputs);
}

static pt_status ckpt_backward(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *grad_outputs,
                               int n_in, pt_tensor **grad_inputs)
{
    (void)n_out;
    const ckpt_state *s = pt_ctx_data(ctx);
    pt_tensor *detached[PTI_NODE_MAX_IN] = {0}, *req[PTI_NODE_MAX_IN];
    int idx[PTI_NODE_MAX_IN], n_req = 0;
    pt_status st = PT_OK;
    for (int i = 0; i < n_in && st == PT_OK; i++) {
        pt_tensor *saved = pt_ctx_saved(ctx, i);
        detached[i] = saved ? pt_detach(saved) : NULL;
        pt_release(saved);
        if (!detached[i])
            st = pt_last_status();
        else if (pt_ctx_needs_input_grad(ctx, i)) {
            st = pt_requires_grad_(detached[i], true);
            idx[n_req] = i;
            req[n_req++] = detached[i];
        }
    }
    if (st == PT_OK) {
        pti_rng_state now = pti_rng_get_state();
        pti_rng_set_state(s->rng);
        bool prev = pt_set_grad_enabled(true);
        pt_tensor *y = s->fn(n_in, detached, s->user);
        pt_set_grad_enabled(prev);
        pti_rng_set_state(now);
        pt_tensor *grads[PTI_NODE_MAX_IN] = {0};
        if (!y)
            st = pt_last_status() != PT_OK
                     ? pt_last_status()
                     : pti_error(PT_ERR_NULL, "pt_checkpoint: the function returned NULL when "
                                              "recomputed");
        else if (y->requires_grad && n_req > 0)
            st = pt_autograd_grad(1, &y, &grad_outputs[0], n_req, req, false, false, true, grads);
        pt_release(y);
        for (int r = 0; r < n_req; r++)
            grad_inputs[idx[r]] = st == PT_OK ? grads[r] : (pt_release(grads[r]), NULL);
    }
    for (int i = 0; i < n_in; i++)
        pt_release(detached[i]);
    return st;
}

static const pt_function checkpoint_fn = {
    .name = "checkpoint",
    .n_outputs = 1,
    .forward = ckpt_forward,
    .backward = ckpt_backward,
};

pt_tensor *pt_checkpoint(pt_grad_fn fn, void *user, int n, pt_tensor *const *inputs)
{
    if (!fn)
        return pti_error_null(PT_ERR_NULL, "pt_checkpoint: fn is NULL");
    ckpt_args a = {fn, user};
    pt_tensor *out = NULL;
    if (pt_function_apply(&checkpoint_fn, &a, n, inputs, &out) != PT_OK)
        return NULL;
    return out;
}
