/* Custom autograd functions (torch.autograd.Function): pt_function_apply runs a user forward
 * without recording, then records one node whose backward calls the user's backward with a
 * context holding saved tensors, needs_input_grad and user state. */
#include <stdlib.h>
#include <string.h>

#include "../graph/node.h"

#define CTX_MAX_SAVED PTI_NODE_MAX_SAVED

struct pt_autograd_ctx {
    const pt_function *fn;
    void *user;
    pti_node *node; /* set once recorded (weak: the node owns the ctx) */
    int n_in;
    bool needs[PTI_NODE_MAX_IN];
    int in_ndim[PTI_NODE_MAX_IN];
    int64_t in_shape[PTI_NODE_MAX_IN][PT_MAX_DIMS];
    pt_dtype in_dtype[PTI_NODE_MAX_IN];
    /* save_for_backward during forward: held here until the node exists */
    int n_saved;
    pt_tensor *pending[CTX_MAX_SAVED];
    int slot[CTX_MAX_SAVED]; /* node saved-slot of each */
    void *data;
    void (*data_free)(void *);
};

static void ctx_drop_pending(pt_autograd_ctx *ctx)
{
    for (int i = 0; i < ctx->n_saved; i++) {
        pti_unref(ctx->pending[i]);
        ctx->pending[i] = NULL;
    }
}

static void ctx_destroy(void *p)
{
    pt_autograd_ctx *ctx = p;
    ctx_drop_pending(ctx);
    if (ctx->data_free)
        ctx->data_free(ctx->data);
    pti_scratch_free(ctx);
}

pt_status pt_ctx_save_for_backward(pt_autograd_ctx *ctx, int n, pt_tensor *const *ts)
{
    if (!ctx)
        return pti_error(PT_ERR_NULL, "pt_ctx_save_for_backward: ctx is NULL");
    if (ctx->node)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_ctx_save_for_backward: can only save tensors during forward");
    if (n < 0 || ctx->n_saved + n > CTX_MAX_SAVED)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_ctx_save_for_backward: at most %d tensors can be saved (%d + %d)",
                         CTX_MAX_SAVED, ctx->n_saved, n);
    for (int i = 0; i < n; i++)
        if (!PTI_CHECK_ARG(ts[i], "pt_ctx_save_for_backward", "tensor"))
            return pt_last_status();
    for (int i = 0; i < n; i++)
        ctx->pending[ctx->n_saved++] = pt_retain(ts[i]);
    return PT_OK;
}

int pt_ctx_n_saved(const pt_autograd_ctx *ctx)
{
    return ctx ? ctx->n_saved : 0;
}

pt_tensor *pt_ctx_saved(pt_autograd_ctx *ctx, int i)
{
    if (!ctx)
        return pti_error_null(PT_ERR_NULL, "pt_ctx_saved: ctx is NULL");
    if (i < 0 || i >= ctx->n_saved)
        return pti_error_null(PT_ERR_INDEX, "pt_ctx_saved: index %d out of range (%d saved)", i,
                              ctx->n_saved);
    if (!ctx->node) /* still in forward */
        return pt_retain(ctx->pending[i]);
    return pti_node_saved(ctx->node, ctx->slot[i]);
}

bool pt_ctx_needs_input_grad(const pt_autograd_ctx *ctx, int i)
{
    return ctx && i >= 0 && i < ctx->n_in && ctx->needs[i];
}

void *pt_ctx_user(const pt_autograd_ctx *ctx)
{
    return ctx ? ctx->user : NULL;
}

void pt_ctx_set_data(pt_autograd_ctx *ctx, void *data, void (*free_fn)(void *))
{
    if (!ctx)
        return;
    if (ctx->data_free && ctx->data != data)
        ctx->data_free(ctx->data);
    ctx->data = data;
    ctx->data_free = free_fn;
}

void *pt_ctx_data(const pt_autograd_ctx *ctx)
{
    return ctx ? ctx->data : NULL;
}

/* The node's backward: the user's backward, then shape/dtype checks on what it returned. */
static pt_status custom_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_autograd_ctx *ctx = n->ctx;
    const pt_function *fn = ctx->fn;
    pt_status st = fn->backward(ctx, fn->n_outputs, grad_out, ctx->n_in, grad_in);
    if (st != PT_OK) {
        for (int i = 0; i < ctx->n_in; i++) {
            pt_release(grad_in[i]);
            grad_in[i] = NULL;
        }
        if (pt_last_status() == PT_OK)
            return pti_error(st, "%s: backward failed", fn->name);
        return st;
    }
    for (int i = 0; i < ctx->n_in && st == PT_OK; i++) {
        pt_tensor *g = grad_in[i];
        if (!g)
            continue;
        if (!pti_node_needs_grad(n, i)) {
            pt_release(g);
            grad_in[i] = NULL;
            continue;
        }
        bool same = g->ndim == ctx->in_ndim[i];
        for (int d = 0; same && d < g->ndim; d++)
            same = g->shape[d] == ctx->in_shape[i][d];
        if (!same) {
            st = pti_error(PT_ERR_SHAPE,
                           "%s: backward returned a gradient of shape %s for input "
                           "%d of shape %s",
                           fn->name, pti_shape_str(g->ndim, g->shape), i,
                           pti_shape_str(ctx->in_ndim[i], ctx->in_shape[i]));
        } else if (g->dtype != ctx->in_dtype[i]) {
            pt_tensor *cast = pt_to_dtype(g, ctx->in_dtype[i]);
            pt_release(g);
            grad_in[i] = cast;
            if (!cast)
                st = pt_last_status();
        }
    }
    if (st != PT_OK)
        for (int i = 0; i < ctx->n_in; i++) {
            pt_release(grad_in[i]);
            grad_in[i] = NULL;
        }
    return st;
}

static pt_status check_function(const pt_function *fn, int n_in, pt_tensor *const *inputs,
                                pt_tensor **outputs)
{
    if (!fn || !fn->forward || !fn->backward || !outputs || (n_in > 0 && !inputs))
        return pti_error(PT_ERR_NULL, "pt_function_apply: fn, its callbacks, inputs and outputs "
                                      "must not be NULL");
    if (fn->n_outputs < 1 || fn->n_outputs > PTI_NODE_MAX_OUT)
        return pti_error(PT_ERR_INVALID_ARG, "pt_function_apply: %s has %d outputs (1..%d)",
                         fn->name ? fn->name : "function", fn->n_outputs, PTI_NODE_MAX_OUT);
    if (n_in < 1 || n_in > PTI_NODE_MAX_IN)
        return pti_error(PT_ERR_INVALID_ARG, "pt_function_apply: %s given %d inputs (1..%d)",
                         fn->name ? fn->name : "function", n_in, PTI_NODE_MAX_IN);
    for (int i = 0; i < n_in; i++)
        if (!PTI_CHECK_ARG(inputs[i], "pt_function_apply", "inputs[i]"))
            return pt_last_status();
    return PT_OK;
}

/* Records the node for a finished forward; takes ownership of ctx. */
static pt_status record(pt_autograd_ctx *ctx, int n_in, pt_tensor *const *inputs,
                        pt_tensor **outputs)
{
    const pt_function *fn = ctx->fn;
    const char *name = fn->name ? fn->name : "custom_function";
    pti_node *node = pti_node_new(name, custom_backward, n_in, (const pt_tensor *const *)inputs);
    if (!node) {
        ctx_destroy(ctx);
        return pt_last_status();
    }
    node->ctx = ctx;
    node->ctx_free = ctx_destroy;
    bool is_output[CTX_MAX_SAVED] = {0};
    for (int s = 0; s < ctx->n_saved; s++) {
        for (int k = 0; k < fn->n_outputs; k++)
            if (ctx->pending[s] == outputs[k])
                is_output[s] = true;
        if (!is_output[s] && (ctx->slot[s] = pti_node_save(node, ctx->pending[s])) < 0) {
            pti_node_release(node);
            return pt_last_status();
        }
    }
    pt_tensor *attach[PTI_NODE_MAX_OUT] = {0};
    for (int k = 0; k < fn->n_outputs; k++)
        if (pti_dtypes[outputs[k]->dtype].is_floating)
            attach[k] = outputs[k];
    pti_node_retain(node); /* keep it alive while saving outputs */
    pt_status st = pti_node_finish(node, fn->n_outputs, attach);
    for (int s = 0; st == PT_OK && s < ctx->n_saved; s++)
        if (is_output[s] && (ctx->slot[s] = pti_node_save_output(node, ctx->pending[s])) < 0)
            st = pt_last_status();
    ctx_drop_pending(ctx);
    ctx->node = node;
    pti_node_release(node);
    return st;
}

pt_status pt_function_apply(const pt_function *fn, void *user, int n_in, pt_tensor *const *inputs,
                            pt_tensor **outputs)
{
    pt_status st = check_function(fn, n_in, inputs, outputs);
    if (st != PT_OK)
        return st;
    for (int k = 0; k < fn->n_outputs; k++)
        outputs[k] = NULL;
    pt_autograd_ctx *ctx = pti_scratch_alloc(sizeof *ctx);
    if (!ctx)
        return pt_last_status();
    ctx->fn = fn;
    ctx->user = user;
    ctx->n_in = n_in;
    bool recording = pti_grad_recording(n_in, (const pt_tensor *const *)inputs);
    for (int i = 0; i < n_in; i++) {
        ctx->needs[i] = recording && inputs[i]->requires_grad;
        ctx->in_ndim[i] = inputs[i]->ndim;
        memcpy(ctx->in_shape[i], inputs[i]->shape, sizeof(int64_t) * (size_t)inputs[i]->ndim);
        ctx->in_dtype[i] = inputs[i]->dtype;
    }
    bool prev = pt_set_grad_enabled(false);
    st = fn->forward(ctx, n_in, inputs, outputs);
    pt_set_grad_enabled(prev);
    for (int k = 0; st == PT_OK && k < fn->n_outputs; k++) {
        if (!outputs[k]) {
            st = pt_last_status() != PT_OK
                     ? pt_last_status()
                     : pti_error(PT_ERR_NULL, "%s: forward returned NULL for output %d",
                                 fn->name ? fn->name : "function", k);
            break;
        }
        /* an output that is an input (or another output) itself gets its own alias so that
         * attaching history does not touch the input */
        for (int j = 0; j < n_in + k && outputs[k]; j++) {
            const pt_tensor *other = j < n_in ? inputs[j] : outputs[j - n_in];
            if (other != outputs[k])
                continue;
            pt_tensor *o = outputs[k];
            outputs[k] = pti_tensor_on_storage(o->storage, o->dtype, o->ndim, o->shape, o->stride,
                                               o->offset);
            for (int s = 0; s < ctx->n_saved; s++)
                if (ctx->pending[s] == o) {
                    pti_unref(o);
                    ctx->pending[s] = pt_retain(outputs[k]);
                }
            /* the forward's extra reference to a tensor it did not create: drop it without
             * taking the tensor out of its owner's scope */
            pti_unref(o);
            if (!outputs[k])
                st = pt_last_status();
        }
    }
    if (st == PT_OK && recording) {
        st = record(ctx, n_in, inputs, outputs); /* the node owns ctx now */
        ctx = NULL;
    }
    if (st != PT_OK)
        for (int k = 0; k < fn->n_outputs; k++) {
            pt_release(outputs[k]);
            outputs[k] = NULL;
        }
    if (ctx)
        ctx_destroy(ctx);
    return st;
}
