/* PromeTorch nn: the module base (torch.nn.Module) and the containers.
 *
 * A module owns named parameters and buffers (in registration order), named child modules,
 * a training flag and forward hooks. Every module, built-in or user-defined, is used through
 * the same calls: pt_nn_forward / pt_nn_forward_n, pt_nn_named_parameters, pt_nn_train,
 * pt_nn_to, pt_nn_state_dict, pt_nn_free. Names and state-dict keys are PyTorch's
 * ("features.0.weight", "bn1.running_mean", "bn1.num_batches_tracked").
 *
 * A user-defined module is a C struct (the ctx) plus a pt_module_def with its forward
 * callback; children and parameters are registered on it and found back by name or by
 * registration index. The layers themselves are declared in nn_layers.h (linear, conv, norms,
 * pooling, embedding, dropout), nn_activation.h, nn_loss.h, nn_rnn.h (RNN/LSTM/GRU) and
 * nn_transformer.h (attention and transformer layers); weight initialization in nn_init.h.
 *
 * Ownership: constructors return a module the caller frees with pt_nn_free (NULL is a
 * no-op). pt_nn_add and the containers take ownership of the child modules they are given,
 * also when they fail. The module holds its own reference to each parameter and buffer;
 * *_ref getters return borrowed pointers valid while the module lives (pt_nn_to and
 * pt_nn_load_state_dict change tensors in place, so the pointers stay valid). */
#ifndef PROMETORCH_NN_H
#define PROMETORCH_NN_H

#include "types.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pt_module pt_module;

/* ---- user-defined modules ---------------------------------------------------------------------
 */

/* forward with one input and one output: returns a new reference or NULL with the error set. */
typedef pt_tensor *(*pt_forward_fn)(pt_module *self, const pt_tensor *x);
/* forward with several inputs/outputs: writes n_out new references into out (NULL entries
 * of `in` mean "not given" for optional inputs, as the module documents). */
typedef pt_status (*pt_forward_n_fn)(pt_module *self, int n_in, const pt_tensor *const *in,
                                     int n_out, pt_tensor **out);

typedef struct pt_module_def {
    const char *type_name;       /* shown by pt_nn_to_string: "Linear", "Net" */
    pt_forward_fn forward;       /* may be NULL when forward_n is given */
    pt_forward_n_fn forward_n;   /* may be NULL: then pt_nn_forward_n calls forward (1 in, 1 out) */
    void (*free_ctx)(void *ctx); /* frees the ctx (may be NULL) */
    /* Writes PyTorch's extra_repr ("in_features=4, out_features=2, bias=True") into buf;
     * may be NULL. */
    void (*extra_repr)(const pt_module *self, char *buf, size_t cap);
    /* Called by pt_nn_train after the flag changed (may be NULL). */
    void (*on_train)(pt_module *self, bool training);
} pt_module_def;

/* A new module with no parameters or children. `def` is copied (its strings must outlive the
 * module: use literals); ctx is owned by the module when def->free_ctx is set. */
PT_API pt_module *pt_nn_module_new(const pt_module_def *def, void *ctx);
/* The ctx given at creation (borrowed). */
PT_API void *pt_nn_ctx(const pt_module *m);
/* "Linear", "Sequential", the user's type_name. */
PT_API const char *pt_nn_type_name(const pt_module *m);

/* Registers a parameter: the module adds its own reference to t and marks it requires_grad
 * (t must be a floating-point leaf). Names are unique among the module's parameters, buffers
 * and children and contain no '.'. */
PT_API pt_status pt_nn_register_parameter(pt_module *m, const char *name, pt_tensor *t);
/* Registers a buffer (running statistics, masks); persistent buffers are in the state dict. */
PT_API pt_status pt_nn_register_buffer(pt_module *m, const char *name, pt_tensor *t,
                                       bool persistent);
/* Replaces the tensor of an existing buffer (the module drops its old reference, adds one to t). */
PT_API pt_status pt_nn_set_buffer(pt_module *m, const char *name, pt_tensor *t);
/* Adds child under `name`, taking ownership of child (freed on failure too). */
PT_API pt_status pt_nn_add(pt_module *parent, const char *name, pt_module *child);

/* ---- lookup --------------------------------------------------------------------------------- */

/* Borrowed lookups by dotted path from m ("layer1.0.conv1.weight", "bn1.running_mean",
 * "layer1.0"); NULL with PT_ERR_INDEX naming the path when absent. */
PT_API pt_tensor *pt_nn_param_ref(const pt_module *m, const char *path);
PT_API pt_tensor *pt_nn_buffer_ref(const pt_module *m, const char *path);
PT_API pt_module *pt_nn_child_ref(const pt_module *m, const char *path);

/* Direct (not recursive) members by registration index, borrowed; NULL when out of range. */
PT_API int pt_nn_num_direct_params(const pt_module *m);
PT_API pt_tensor *pt_nn_direct_param_ref(const pt_module *m, int i, const char **name);
PT_API int pt_nn_num_direct_buffers(const pt_module *m);
PT_API pt_tensor *pt_nn_direct_buffer_ref(const pt_module *m, int i, const char **name);
PT_API int pt_nn_num_children(const pt_module *m);
PT_API pt_module *pt_nn_child_at(const pt_module *m, int i, const char **name);

/* All parameters of m and its descendants in PyTorch's order (module.named_parameters():
 * the module's own first, then each child's, depth first; a tensor registered twice is
 * listed once). Returns the count, or -1 on error. When names/params are non-NULL they
 * receive malloc'd arrays the caller frees with free(); the name strings belong to m and stay
 * valid until the next pt_nn_named_* call on m or pt_nn_free(m); the tensors are borrowed. */
PT_API int pt_nn_named_parameters(pt_module *m, const char ***names, pt_tensor ***params);
/* Same for buffers (persistent and not). */
PT_API int pt_nn_named_buffers(pt_module *m, const char ***names, pt_tensor ***buffers);
/* Parameters only (borrowed tensors in a malloc'd array). */
PT_API int pt_nn_parameters(pt_module *m, pt_tensor ***params);
/* Total number of parameter elements (sum of numel), -1 on error. */
PT_API int64_t pt_nn_num_parameters(pt_module *m);

/* ---- running -------------------------------------------------------------------------------- */

/* Calls the module's forward (with its hooks). Returns a new reference. */
PT_API pt_tensor *pt_nn_forward(pt_module *m, const pt_tensor *x);
/* Several inputs/outputs (LSTM: in = {x, h0, c0}, out = {y, h_n, c_n}). */
PT_API pt_status pt_nn_forward_n(pt_module *m, int n_in, pt_tensor_list in, int n_out,
                                 pt_tensor **out);

/* Runs before forward with the inputs (return non-OK to abort the call with that status). */
typedef pt_status (*pt_forward_pre_hook)(pt_module *m, int n_in, const pt_tensor *const *in,
                                         void *user);
/* Runs after forward with the outputs; may replace out[i] (release the old one). */
typedef pt_status (*pt_forward_hook)(pt_module *m, int n_in, const pt_tensor *const *in, int n_out,
                                     pt_tensor **out, void *user);
/* Register hooks; each returns a handle > 0 for pt_nn_remove_hook, or -1 on error. */
PT_API int pt_nn_register_forward_pre_hook(pt_module *m, pt_forward_pre_hook hook, void *user);
PT_API int pt_nn_register_forward_hook(pt_module *m, pt_forward_hook hook, void *user);
PT_API pt_status pt_nn_remove_hook(pt_module *m, int handle);

/* ---- state ---------------------------------------------------------------------------------- */

/* Sets training mode on m and every descendant (module.train(on)); pt_nn_eval = train(false). */
PT_API void pt_nn_train(pt_module *m, bool on);
PT_API void pt_nn_eval(pt_module *m);
PT_API bool pt_nn_is_training(const pt_module *m);
/* Moves every parameter and buffer to dev in place (the tensor objects stay the same, so
 * optimizers keep working); gradients are moved too. */
PT_API pt_status pt_nn_to(pt_module *m, pt_device dev);
/* Converts floating-point parameters and buffers to dt in place (module.to(dtype)). */
PT_API pt_status pt_nn_to_dtype(pt_module *m, pt_dtype dt);
/* Clears every parameter's gradient (set_to_none, PyTorch 2's default). */
PT_API void pt_nn_zero_grad(pt_module *m);
/* Calls fn on every descendant and then on m (module.apply: children first). Stops at the
 * first non-OK status and returns it. */
typedef pt_status (*pt_module_fn)(pt_module *m, void *user);
PT_API pt_status pt_nn_apply(pt_module *m, pt_module_fn fn, void *user);
/* Sets requires_grad on every parameter (module.requires_grad_). */
PT_API void pt_nn_requires_grad_(pt_module *m, bool on);

/* module.state_dict(): an insertion-ordered dict {key: tensor} of parameters and persistent
 * buffers with PyTorch's keys. The tensors are detached and share storage with the module's
 * (like PyTorch). Returns a new reference (pt_value_free). */
PT_API pt_value *pt_nn_state_dict(pt_module *m);
/* module.load_state_dict(): copies each tensor into the matching parameter/buffer (shapes
 * must match; dtypes are converted). strict: missing and unexpected keys are an error. Any
 * error (PT_ERR_INVALID_ARG / PT_ERR_SHAPE) lists every missing key, unexpected key and shape
 * mismatch in one message, like PyTorch's, and nothing is changed. */
PT_API pt_status pt_nn_load_state_dict(pt_module *m, const pt_value *state, bool strict);

/* PyTorch's repr of a module tree:
 *   Sequential(
 *     (0): Linear(in_features=784, out_features=512, bias=True)
 *     (1): ReLU()
 *   )
 * Returns a malloc'd string (free()), NULL on OOM. pt_nn_print writes it to stdout. */
PT_API char *pt_nn_to_string(const pt_module *m);
PT_API void pt_nn_print(const pt_module *m);

/* Frees the module, its children and its references to parameters and buffers. NULL is a
 * no-op. Tensors still referenced elsewhere (an optimizer, the caller) stay alive. */
PT_API void pt_nn_free(pt_module *m);

/* ---- containers ----------------------------------------------------------------------------- */

/* nn.Sequential: children "0".."n-1"; forward feeds each one's output to the next. Takes
 * ownership of the children (NULL entries are an error; all are freed then). */
PT_API pt_module *pt_nn_sequential(int n, pt_module **children);
/* Appends a child named by its index. Takes ownership. */
PT_API pt_status pt_nn_sequential_append(pt_module *seq, pt_module *child);
/* nn.ModuleList: children "0".."n-1", no forward of its own. */
PT_API pt_module *pt_nn_module_list(int n, pt_module **children);
/* nn.ModuleDict: named children in the given order, no forward of its own. */
PT_API pt_module *pt_nn_module_dict(int n, const char *const *names, pt_module **children);

#ifdef __cplusplus
}
#endif
#endif
