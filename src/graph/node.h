/* The autograd graph as op front-ends see it: nodes with backward functions, saved tensors
 * and edges, and the calls a front-end makes to record one. This layer sits below the ops
 * (src/graph); the engine that runs the graph is src/autograd/engine.c, above them.
 *
 * Recording, in an op front-end after the result `out` has been computed:
 *
 *     const pt_tensor *ins[2] = {a, b};
 *     if (pti_grad_recording(2, ins)) {
 *         pti_node *n = pti_node_new("mul", mul_backward, 2, ins);
 *         if (!n || pti_node_save(n, a) < 0 || pti_node_save(n, b) < 0 ||
 *             pti_node_finish(n, 1, &out) != PT_OK) { pt_release(out); return NULL; }
 *     }
 *
 * The backward function gets the gradients of the node's outputs (never NULL: missing ones
 * are zeros of the output's shape) and writes one new reference per input into grad_in[i]
 * (NULL when pti_node_needs_grad(n, i) is false, or when the input gets no gradient). It is
 * written with public ops, so it runs on every backend and records its own graph when
 * create_graph is on. Shapes: a gradient has its input's shape (pti_sum_to, src/ops/common.h,
 * undoes broadcasting). */
#ifndef PT_AUTOGRAD_NODE_H
#define PT_AUTOGRAD_NODE_H

#include "../core/internal.h"

#define PTI_NODE_MAX_IN 8
#define PTI_NODE_MAX_OUT 4
#define PTI_NODE_MAX_SAVED 8

typedef struct pti_node pti_node;

/* A gradient hook (pt_register_hook); `next` must stay the first field. */
typedef struct pti_hook {
    struct pti_hook *next;
    pt_grad_hook fn;
    void *user;
} pti_hook;
typedef pt_status (*pti_backward_fn)(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in);

/* Where an input's gradient goes: the node that produced it (and which of its outputs), or,
 * for a leaf that requires grad, the leaf itself. Both NULL: the input needs no gradient. */
typedef struct pti_edge {
    pti_node *node;
    int output_nr;
    pt_tensor *leaf;
} pti_edge;

/* What a missing output gradient is filled with: zeros of this geometry. */
typedef struct pti_out_meta {
    int ndim;
    int64_t shape[PT_MAX_DIMS];
    pt_dtype dtype;
    pt_device device;
    bool used;
} pti_out_meta;

struct pti_node {
    atomic_long refcount;
    const char *name;
    pti_backward_fn backward;
    int n_in, n_out, n_saved;
    pti_edge edges[PTI_NODE_MAX_IN];
    pti_out_meta out_meta[PTI_NODE_MAX_OUT];
    pt_tensor *saved[PTI_NODE_MAX_SAVED];
    unsigned saved_version[PTI_NODE_MAX_SAVED];
    bool saved_is_output[PTI_NODE_MAX_SAVED];
    bool released; /* saved tensors freed after a backward without retain_graph */
    /* op settings for the backward formula */
    double d[8];
    int64_t i[2 * PT_MAX_DIMS];
    void *ctx; /* optional extra state owned by the node */
    void (*ctx_free)(void *ctx);
    /* per-backward bookkeeping (engine.c) */
    uint64_t epoch;
    int dependencies;
    int scratch;   /* pt_autograd_grad: topological-sort counter */
    bool needed;   /* runs in this pass (pt_autograd_grad runs only what leads to its inputs) */
    bool descends; /* its formula is needed (not only its output gradient) */
    pt_tensor *grad_sum[PTI_NODE_MAX_OUT];
    pti_hook *pre_hooks[PTI_NODE_MAX_OUT];      /* hooks of non-leaf outputs */
    pt_tensor *retain_target[PTI_NODE_MAX_OUT]; /* weak: outputs with retains_grad */
};

/* True when grad mode is on and any of the n tensors requires grad. */
bool pti_grad_recording(int n, const pt_tensor *const *inputs);
/* A node with edges to the n inputs (NULL inputs and inputs that need no grad get empty
 * edges). Returns NULL with the error set on failure. */
pti_node *pti_node_new(const char *name, pti_backward_fn fn, int n, const pt_tensor *const *inputs);
/* Saves an input for backward (keeps a reference and its version); returns the slot or -1. */
int pti_node_save(pti_node *n, const pt_tensor *t);
/* Saves one of the node's own outputs (as a detached alias, so no reference cycle forms);
 * call after pti_node_finish. Returns the slot or -1. */
int pti_node_save_output(pti_node *n, const pt_tensor *out);
/* Attaches the node to its outputs (sets grad_fn/output_nr/requires_grad, records each
 * output's geometry) and drops the creation reference: the outputs now own the node. */
pt_status pti_node_finish(pti_node *n, int n_out, pt_tensor *const *outs);
/* Saved tensor i for use in a backward formula: a new reference (scope-tracked), or NULL
 * with the error set when it was freed or modified in place since it was saved. */
pt_tensor *pti_node_saved(pti_node *n, int i);
/* True when input i's gradient is needed. */
static inline bool pti_node_needs_grad(const pti_node *n, int i)
{
    return i < n->n_in && (n->edges[i].node || n->edges[i].leaf);
}

/* For ops that return an alias of their input (contiguous of a contiguous tensor, to() to
 * the same dtype/device): records an identity node so gradients reach `in`. */
pt_status pti_record_alias(pt_tensor *out, const pt_tensor *in);

/* In-place ops on tensors that take part in autograd: call before modifying `self` in place
 * with the result of an out-of-place computation `result` that was recorded from a snapshot
 * of self (pt_clone). Makes self take result's history (rebase). Fails for a leaf that
 * requires grad (PyTorch's "a leaf Variable that requires grad is being used in an in-place
 * operation"). */
pt_status pti_inplace_check(const char *op, const pt_tensor *self);
pt_status pti_inplace_rebase(pt_tensor *self, const pt_tensor *result);

void pti_node_retain(pti_node *n);
void pti_node_release(pti_node *n);

#endif
