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

#ifdef __cplusplus
}
#endif
#endif
