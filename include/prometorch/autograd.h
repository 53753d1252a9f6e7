/* PromeTorch autograd: reverse-mode automatic differentiation, define-by-run as in PyTorch.
 *
 * An op whose inputs require grad (while grad mode is on) records a node: its backward
 * formula, the tensors it saved, and edges to its inputs' nodes. pt_backward() walks the
 * graph from a result in dependency order and accumulates gradients into the leaves' .grad.
 * The graph is freed after use unless retain_graph. Backward formulas are written with public
 * ops, so create_graph gives higher derivatives. See docs/autograd.md. */
#ifndef PROMETORCH_AUTOGRAD_H
#define PROMETORCH_AUTOGRAD_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- leaves and gradients ------------------------------------------------------------------ */

/* Marks a leaf tensor as requiring grad (torch.Tensor.requires_grad_). Only floating-point
 * tensors can require grad. Turning it off on a non-leaf is an error. */
PT_API pt_status pt_requires_grad_(pt_tensor *t, bool on);
/* Same as pt_requires_grad_, ignoring the status (DESIGN's short form). */
PT_API void pt_set_requires_grad(pt_tensor *t, bool on);
/* True for leaves marked with pt_requires_grad_ and for results of recorded ops. */
PT_API bool pt_requires_grad(const pt_tensor *t);
/* True when t has no grad_fn (it was not produced by a recorded op). */
PT_API bool pt_is_leaf(const pt_tensor *t);
/* t's accumulated gradient: a new reference, or NULL (no error) when it has none. */
PT_API pt_tensor *pt_grad(const pt_tensor *t);
/* Replaces t's gradient with g (retained; NULL clears it, like `t.grad = None`). */
PT_API pt_status pt_set_grad(pt_tensor *t, const pt_tensor *g);
/* Keeps the gradient of a non-leaf in its .grad during backward (torch retain_grad). */
PT_API pt_status pt_retain_grad(pt_tensor *t);
/* The name of the op that produced t ("mul", "matmul", ...), or NULL for leaves. Borrowed. */
PT_API const char *pt_grad_fn_name(const pt_tensor *t);
/* A new tensor sharing t's data, with no history and requires_grad false (torch.detach). */
PT_API pt_tensor *pt_detach(const pt_tensor *t);

/* ---- backward ------------------------------------------------------------------------------ */

/* Computes the gradient of `root` with respect to every leaf that requires grad and adds it to
 * their .grad. `grad` is d(something)/d(root); NULL is allowed only for a one-element root
 * (then 1). The graph is freed afterwards unless retain_graph (create_graph implies it in
 * PyTorch; pass both to keep the graph). Backward through a freed graph, on a tensor that
 * does not require grad, or with a non-scalar root and no grad is a clear error. */
PT_API pt_status pt_backward(pt_tensor *root, pt_tensor *grad, bool retain_graph,
                             bool create_graph);

/* torch.autograd.grad: the gradients of the outputs (weighted by grad_outputs, each NULL
 * meaning ones for a one-element output) with respect to `inputs`, written to grads[i] (new
 * references) without touching any .grad. An input that the outputs do not depend on is an
 * error unless allow_unused (then grads[i] = NULL). */
PT_API pt_status pt_autograd_grad(int n_out, pt_tensor *const *outputs,
                                  pt_tensor *const *grad_outputs, int n_in,
                                  pt_tensor *const *inputs, bool retain_graph, bool create_graph,
                                  bool allow_unused, pt_tensor **grads);

/* ---- grad mode ----------------------------------------------------------------------------- */

/* Thread-local: while off, ops record nothing and allocate no nodes. */
PT_API bool pt_grad_enabled(void);
/* Sets grad mode on this thread; returns the previous setting. */
PT_API bool pt_set_grad_enabled(bool on);
/* torch.no_grad() as a pair of calls; they nest. */
PT_API void pt_no_grad_begin(void);
PT_API void pt_no_grad_end(void);

/* ---- hooks and anomaly mode ---------------------------------------------------------------- */

/* Called with the gradient of t when it is computed. Return NULL to keep the gradient, or a
 * new reference to a tensor of the same shape to replace it. */
typedef pt_tensor *(*pt_grad_hook)(const pt_tensor *grad, void *user);
PT_API pt_status pt_register_hook(pt_tensor *t, pt_grad_hook hook, void *user);

/* When on, every backward result is checked for NaN/Inf and the error names the op whose
 * backward produced it (torch.autograd.set_detect_anomaly). Process-wide. */
PT_API void pt_set_detect_anomaly(bool on);
PT_API bool pt_is_anomaly_enabled(void);

/* ---- gradient checking --------------------------------------------------------------------- */

/* The function under test: computes one result from the n inputs (a new reference, or NULL
 * with the error set). It must be deterministic and use only differentiable ops on them. */
typedef pt_tensor *(*pt_grad_fn)(int n, pt_tensor *const *inputs, void *user);

/* Tolerances; the zero value means PyTorch's defaults (eps 1e-6, atol 1e-5, rtol 1e-3). */
typedef struct pt_gradcheck_opts {
    double eps;  /* finite-difference step */
    double atol; /* |analytical - numerical| <= atol + rtol * |numerical| */
    double rtol;
} pt_gradcheck_opts;

/* torch.autograd.gradcheck: compares the Jacobian computed by backward (pt_autograd_grad, one
 * pass per output element) with central differences (f(x+eps) - f(x-eps)) / 2eps for every
 * input that requires grad (those must be float64 and must not overlap in memory, e.g. no
 * expanded inputs); inputs that do not require grad are held fixed. The gradients must also
 * have their input's shape and dtype. Returns true when all match; on a mismatch returns
 * false with PT_ERR_RUNTIME set, naming the input, the output and input element indices and
 * both values. An error inside fn or backward also returns false with that error. The inputs
 * are perturbed in place and restored; their .grad is not touched. opts may be NULL. */
PT_API bool pt_gradcheck(pt_grad_fn fn, void *user, int n, pt_tensor *const *inputs,
                         const pt_gradcheck_opts *opts);

/* torch.autograd.gradgradcheck: checks the second derivatives by running the same comparison
 * on the function (inputs, v) -> vjp = d(fn(inputs))/d(inputs) . v, computed with
 * create_graph, where v is a random grad_output drawn once from the default generator (so it
 * is reproducible after pt_manual_seed) and also treated as an input. */
PT_API bool pt_gradgradcheck(pt_grad_fn fn, void *user, int n, pt_tensor *const *inputs,
                             const pt_gradcheck_opts *opts);

/* ---- custom functions (torch.autograd.Function) ------------------------------------------- */

/* The context a custom function's forward fills and its backward reads. */
typedef struct pt_autograd_ctx pt_autograd_ctx;

typedef struct pt_function {
    const char *name; /* shown by pt_grad_fn_name and in errors (static storage) */
    int n_outputs;    /* 1..4 */
    /* Computes n_outputs new references in outputs[] from the inputs. Runs with grad mode off
     * (nothing it does is recorded); may save tensors and state in ctx. */
    pt_status (*forward)(pt_autograd_ctx *ctx, int n_in, pt_tensor *const *inputs,
                         pt_tensor **outputs);
    /* Given the gradients of the outputs (zeros for a float output that got none; NULL for an
     * integer output, which is not differentiable),
     * writes a new reference (or NULL for "no gradient") per input into grad_inputs[], each
     * with its input's shape. Runs with grad mode equal to create_graph, so public ops used
     * here record a graph for double backward. Inputs whose gradient is not needed
     * (pt_ctx_needs_input_grad false) may be left NULL. */
    pt_status (*backward)(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *grad_outputs, int n_in,
                          pt_tensor **grad_inputs);
} pt_function;

/* Runs fn->forward on the inputs (1..8) and, when grad mode is on and an input requires grad,
 * records a node whose backward is fn->backward. outputs[] receives n_outputs new references
 * (float outputs become differentiable; integer outputs never are). `user` is available to
 * both callbacks through pt_ctx_user. On failure outputs[] are NULL and the error is set. */
PT_API pt_status pt_function_apply(const pt_function *fn, void *user, int n_in,
                                   pt_tensor *const *inputs, pt_tensor **outputs);

/* Saves tensors for backward (ctx.save_for_backward): up to 8 in all, inputs or outputs of
 * the forward (an output is saved without a reference cycle). In-place changes to a saved
 * tensor before backward make pt_ctx_saved fail with the version-counter error. */
PT_API pt_status pt_ctx_save_for_backward(pt_autograd_ctx *ctx, int n, pt_tensor *const *ts);
/* Saved tensor i in backward: a new reference, or NULL with the error set. */
PT_API pt_tensor *pt_ctx_saved(pt_autograd_ctx *ctx, int i);
PT_API int pt_ctx_n_saved(const pt_autograd_ctx *ctx);
/* True when input i needs a gradient (ctx.needs_input_grad[i]). */
PT_API bool pt_ctx_needs_input_grad(const pt_autograd_ctx *ctx, int i);
/* The `user` pointer given to pt_function_apply. */
PT_API void *pt_ctx_user(const pt_autograd_ctx *ctx);
/* Non-tensor state from forward for backward (ctx.foo = ...): `data` is owned by the ctx and
 * freed with free_fn (may be NULL) when the graph is freed. */
PT_API void pt_ctx_set_data(pt_autograd_ctx *ctx, void *data, void (*free_fn)(void *));
PT_API void *pt_ctx_data(const pt_autograd_ctx *ctx);

/* ---- gradient checkpointing ---------------------------------------------------------------- */

/* torch.utils.checkpoint: runs fn(n, inputs, user) without recording (so its intermediate
 * results are freed at once) and returns its result (a new reference) attached to a node
 * that, in backward, reruns fn with grad enabled on detached copies of the inputs, with the
 * random generator state restored to what it was at forward (dropout draws the same mask),
 * and backpropagates through it. fn must return a float tensor and be deterministic given
 * the inputs and the generator state. Inputs must not be modified in place before backward
 * (version-counter error). */
/* Every tensor requiring grad that fn uses must be among the inputs (1..8): tensors reached
 * through `user` get no gradient. Double backward through a checkpoint is not supported. */
PT_API pt_tensor *pt_checkpoint(pt_grad_fn fn, void *user, int n, pt_tensor *const *inputs);

#ifdef __cplusplus
}
#endif
#endif
