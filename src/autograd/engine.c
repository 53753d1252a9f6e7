/* The autograd engine: pt_backward and pt_autograd_grad run the recorded graph.
 *
 * Design. A backward pass (1) walks the graph from the roots once, counting for every node how
 * many edges point at it (its dependencies), (2) seeds the roots' gradients, then (3) runs a
 * node once all of its dependencies have delivered: the gradients of its outputs are summed
 * (grad_sum), hooks run, the node's backward formula produces its inputs' gradients, which are
 * added into the producing nodes' grad_sum (or into a leaf's .grad). Saved tensors are freed
 * right after a node runs unless the graph is retained. Grad mode during formulas equals
 * create_graph, so formulas record their own graph for higher derivatives. The walk and the
 * ready list use thread-local buffers that are reused, so a steady-state step does not malloc
 * for bookkeeping. The public accessors for leaves (requires_grad_, grad, detach, hooks) are
 * here too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/node.h"

static atomic_uint_fast64_t epoch_counter;
static atomic_bool anomaly_mode;

void pt_set_detect_anomaly(bool on)
{
    atomic_store(&anomaly_mode, on);
}
bool pt_is_anomaly_enabled(void)
{
    return atomic_load(&anomaly_mode);
}

/* ---- reusable node lists ------------------------------------------------------------------ */

typedef struct node_list {
    pti_node **items;
    int64_t count, cap;
} node_list;

/* Reused by the outermost pass of a thread; a pass started from inside a backward formula
 * (checkpoint recomputation, a custom function calling pt_autograd_grad) gets its own. */
static _Thread_local node_list cached_visited, cached_ready;
static _Thread_local int pass_depth;

static bool list_push(node_list *l, pti_node *n)
{
    if (l->count == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 256;
        pti_node **grown = pti_realloc(l->items, (size_t)cap * sizeof *grown);
        if (!grown) {
            pti_error(PT_ERR_OOM, "autograd: out of memory walking the graph");
            return false;
        }
        l->items = grown;
        l->cap = cap;
    }
    l->items[l->count++] = n;
    return true;
}

/* ---- what a pass does with gradients that reach inputs -------------------------------------- */

typedef struct pass {
    const char *op;
    bool keep_graph, create_graph;
    bool accumulate; /* pt_backward: into leaves' .grad */
    int n_capture;   /* pt_autograd_grad: gradients of these tensors are returned */
    pt_tensor *const *capture;
    pt_tensor **captured;
    uint64_t epoch;
    node_list *visited, *ready;
} pass;

static pt_status accumulate_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    for (int i = 0; i < 2; i++)
        if (pti_node_needs_grad(n, i))
            grad_in[i] = pt_retain(grad_out[0]);
    return PT_OK;
}

/* a + b as a new reference. With create_graph the sum must carry history even while pt_add
 * itself records nothing (grad mode is off between formulas), so the engine records it. */
static pt_tensor *sum2(const pt_tensor *a, const pt_tensor *b, bool create_graph)
{
    pt_tensor *s = pt_add(a, b);
    if (!s || s->requires_grad || !create_graph || !(a->requires_grad || b->requires_grad))
        return s;
    const pt_tensor *ins[2] = {a, b};
    pti_node *n = pti_node_new("add", accumulate_backward, 2, ins);
    if (!n || pti_node_finish(n, 1, &s) != PT_OK) {
        pt_release(s);
        return NULL;
    }
    return s;
}

/* a + b, taking ownership of both references (either may be NULL). */
static pt_tensor *add_owned(const pass *p, pt_tensor *a, pt_tensor *b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    pt_tensor *s = sum2(a, b, p->create_graph);
    pt_release(a);
    pt_release(b);
    return s;
}

/* A new tensor (tracked by the current scope) that is t's twin: same data, same history. Used
 * where a reference crosses between the engine and the caller, because pt_release on a
 * scope-tracked tensor also takes it out of its scope: the engine never releases a tensor it
 * did not create, and never hands out one the scope does not know. A leaf that requires grad
 * gets an identity node when keep_history, so gradients still reach it. */
static pt_tensor *twin(const pt_tensor *t, bool keep_history)
{
    pt_tensor *a =
        pti_tensor_on_storage(t->storage, t->dtype, t->ndim, t->shape, t->stride, t->offset);
    if (!a || !t->requires_grad || !keep_history)
        return a;
    if (t->grad_fn) {
        pti_node_retain(t->grad_fn);
        a->grad_fn = t->grad_fn;
        a->output_nr = t->output_nr;
        a->requires_grad = true;
        return a;
    }
    bool prev = pt_set_grad_enabled(true);
    pt_status st = pti_record_alias(a, t);
    pt_set_grad_enabled(prev);
    if (st != PT_OK) {
        pt_release(a);
        return NULL;
    }
    return a;
}

/* Runs the hooks of a list on g (owned); returns the (possibly replaced) owned gradient. */
static pt_tensor *run_hooks(pti_hook *h, pt_tensor *g)
{
    for (; h && g; h = h->next) {
        pt_tensor *r = h->fn(g, h->user);
        if (r) {
            pt_release(g);
            g = r;
        }
    }
    return g;
}

static void capture_grad(pass *p, const pt_tensor *t, pt_tensor *g)
{
    for (int i = 0; i < p->n_capture; i++)
        if (p->capture[i] == t)
            p->captured[i] = add_owned(p, p->captured[i], pt_retain(g));
}

/* True when g is a dense view that nothing else can reach: g is held once, and the only other
 * holder of its storage is its base, held only by g (e.g. the transposed-back gradient of a
 * linear layer's weight, laid out as the weight). Its memory can then become .grad as it is,
 * on a fresh non-view tensor, instead of a copy. */
static bool sole_view(const pt_tensor *g)
{
    return g->is_view && g->view_base && atomic_load(&g->refcount) == 1 &&
           atomic_load(&g->view_base->refcount) == 1 && g->view_base->storage == g->storage &&
           atomic_load(&g->storage->refcount) == 2;
}

/* Stores g as .grad of t: its own copy unless create_graph (then with history, as PyTorch). */
static pt_status store_grad(pt_tensor *t, pt_tensor *g, bool create_graph)
{
    pt_tensor *value;
    if (t->grad)
        value = sum2(t->grad, g, create_graph);
    else if (!pti_is_contiguous(g))
        value = pt_contiguous(g); /* an expanded/strided gradient gets its own dense copy */
    else if (create_graph ||
             (atomic_load(&g->refcount) == 1 && atomic_load(&g->storage->refcount) == 1))
        value = pt_retain(g);
    else if (sole_view(g))
        value =
            pti_tensor_on_storage(g->storage, g->dtype, g->ndim, g->shape, g->stride, g->offset);
    else
        value = pt_clone(g);
    if (!value)
        return pt_last_status();
    pti_scope_untrack(value); /* owned by t from now on */
    pti_unref(t->grad);
    t->grad = value;
    return PT_OK;
}

/* A gradient arrives at a leaf: hooks, then capture or accumulate. Takes ownership of g. */
static pt_status deliver_to_leaf(pass *p, pt_tensor *leaf, pt_tensor *g)
{
    g = run_hooks(leaf->hooks, g);
    if (!g)
        return pt_last_status();
    pt_status st = PT_OK;
    if (p->n_capture)
        capture_grad(p, leaf, g);
    if (p->accumulate)
        st = store_grad(leaf, g, p->create_graph);
    pt_release(g);
    return st;
}

/* ---- the walk ------------------------------------------------------------------------------- */

static void visit(pass *p, pti_node *n)
{
    n->epoch = p->epoch;
    n->dependencies = 0;
    n->needed = true;
    n->descends = true;
    for (int k = 0; k < PTI_NODE_MAX_OUT; k++)
        n->grad_sum[k] = NULL;
}

/* Marks every node reachable from the roots and counts its dependencies. */
static bool count_dependencies(pass *p)
{
    for (int64_t at = 0; at < p->visited->count; at++) {
        pti_node *n = p->visited->items[at];
        for (int i = 0; i < n->n_in; i++) {
            pti_node *next = n->edges[i].node;
            if (!next)
                continue;
            if (next->epoch != p->epoch) {
                visit(p, next);
                if (!list_push(p->visited, next))
                    return false;
            }
            next->dependencies++;
        }
    }
    return true;
}

static pt_status check_finite(const pti_node *n, int i, const pt_tensor *g)
{
    bool prev = pt_set_grad_enabled(false);
    pt_tensor *isnan_ = pt_isnan(g), *isinf_ = pt_isinf(g);
    pt_tensor *nan = pt_any(isnan_), *inf = pt_any(isinf_);
    bool bad_nan = nan && pt_item(nan) != 0, bad_inf = inf && pt_item(inf) != 0;
    pt_set_grad_enabled(prev);
    pt_release(isnan_);
    pt_release(isinf_);
    pt_release(nan);
    pt_release(inf);
    if (bad_nan || bad_inf)
        return pti_error(PT_ERR_RUNTIME,
                         "autograd anomaly: the backward of '%s' returned %s values "
                         "in its gradient for input %d",
                         n->name, bad_nan ? "nan" : "inf", i);
    return PT_OK;
}

static pt_tensor *zeros_for(const pti_out_meta *m)
{
    return pt_zeros(m->ndim, m->shape, m->dtype, m->device);
}

/* Prepares the gradient of output k of n (sum, zeros if none, hooks, retain_grad, capture). */
static pt_tensor *output_grad(pass *p, pti_node *n, int k)
{
    pt_tensor *g = n->grad_sum[k];
    n->grad_sum[k] = NULL;
    if (!g)
        g = zeros_for(&n->out_meta[k]);
    if (!g)
        return NULL;
    if (n->pre_hooks[k])
        g = run_hooks(n->pre_hooks[k], g);
    if (g && n->retain_target[k] && store_grad(n->retain_target[k], g, p->create_graph) != PT_OK) {
        pt_release(g);
        return NULL;
    }
    for (int i = 0; g && i < p->n_capture; i++) {
        const pt_tensor *t = p->capture[i];
        if (t->grad_fn == n && t->output_nr == k)
            p->captured[i] = add_owned(p, p->captured[i], pt_retain(g));
    }
    return g;
}

static void free_saved(pti_node *n)
{
    for (int i = 0; i < n->n_saved; i++) {
        pti_unref(n->saved[i]);
        n->saved[i] = NULL;
    }
    n->released = true;
}

static bool is_captured(const pass *p, const pt_tensor *t)
{
    for (int i = 0; i < p->n_capture; i++)
        if (p->capture[i] == t)
            return true;
    return false;
}

/* A leaf's gradient is wanted by pt_backward always, by pt_autograd_grad only for its inputs
 * (other leaves' hooks do not run, as in PyTorch). */
static bool leaf_wanted(const pass *p, const pt_tensor *leaf)
{
    return p->accumulate || is_captured(p, leaf);
}

/* pt_autograd_grad: marks the nodes on a path from the roots to one of the inputs; only those
 * run, so nodes below the inputs keep their saved tensors and cost nothing (PyTorch prunes
 * the same way). Topological order by Kahn's algorithm on a copy of the dependency counts
 * (p->ready is free as scratch before the run starts), then needs are propagated from the
 * leaves side back to the roots. */
static bool mark_needed(pass *p, int n_roots, pt_tensor *const *roots)
{
    node_list *order = p->ready;
    order->count = 0;
    for (int64_t i = 0; i < p->visited->count; i++) {
        pti_node *n = p->visited->items[i];
        n->scratch = n->dependencies;
        n->needed = false;
    }
    for (int r = 0; r < n_roots; r++) {
        pti_node *n = roots[r]->grad_fn;
        if (n && n->scratch == 0) {
            n->scratch = -1;
            if (!list_push(order, n))
                return false;
        }
    }
    for (int64_t at = 0; at < order->count; at++) {
        pti_node *n = order->items[at];
        for (int i = 0; i < n->n_in; i++) {
            pti_node *c = n->edges[i].node;
            if (c && --c->scratch == 0 && !list_push(order, c))
                return false;
        }
    }
    for (int64_t at = order->count - 1; at >= 0; at--) {
        pti_node *n = order->items[at];
        bool descends = false, captured = false;
        for (int i = 0; i < n->n_in && !descends; i++)
            descends = (n->edges[i].node && n->edges[i].node->needed) ||
                       (n->edges[i].leaf && is_captured(p, n->edges[i].leaf));
        for (int i = 0; i < p->n_capture && !captured; i++)
            captured = p->capture[i]->grad_fn == n;
        n->descends = descends;
        n->needed = descends || captured;
    }
    order->count = 0;
    return true;
}

/* Runs one node and routes its input gradients. */
static pt_status run_node(pass *p, pti_node *n)
{
    if (n->released && n->n_saved > 0 && n->descends)
        return pti_error(PT_ERR_RUNTIME,
                         "%s: trying to backward through the graph a second time (the saved "
                         "tensors of '%s' were freed); pass retain_graph=true the first time",
                         p->op, n->name);
    pt_tensor *grad_out[PTI_NODE_MAX_OUT] = {0};
    pt_tensor *grad_in[PTI_NODE_MAX_IN] = {0};
    pt_status st = PT_OK;
    for (int k = 0; k < n->n_out && st == PT_OK; k++)
        if (n->out_meta[k].used && !(grad_out[k] = output_grad(p, n, k)))
            st = pt_last_status();
    if (st == PT_OK && !n->descends) { /* only its output gradient was wanted */
        for (int k = 0; k < n->n_out; k++)
            pt_release(grad_out[k]);
        return PT_OK;
    }
    if (st == PT_OK) {
        bool prev = pt_set_grad_enabled(p->create_graph);
        st = n->backward(n, grad_out, grad_in);
        pt_set_grad_enabled(prev);
        if (st != PT_OK && pt_last_status() == PT_OK)
            st = pti_error(st, "%s: the backward of '%s' failed", p->op, n->name);
    }
    for (int k = 0; k < n->n_out; k++)
        pt_release(grad_out[k]);
    if (!p->keep_graph)
        free_saved(n);
    for (int i = 0; i < n->n_in; i++) {
        pt_tensor *g = grad_in[i];
        pti_edge *e = &n->edges[i];
        if (st == PT_OK && g && pt_is_anomaly_enabled())
            st = check_finite(n, i, g);
        if (st != PT_OK || !g || (e->node && !e->node->needed) ||
            (e->leaf && !leaf_wanted(p, e->leaf))) {
            pt_release(g);
        } else if (e->node) {
            e->node->grad_sum[e->output_nr] = add_owned(p, e->node->grad_sum[e->output_nr], g);
            if (!e->node->grad_sum[e->output_nr])
                st = pt_last_status();
        } else if (e->leaf) {
            st = deliver_to_leaf(p, e->leaf, g);
        } else {
            pt_release(g);
        }
        if (e->node && --e->node->dependencies == 0 && e->node->needed &&
            !list_push(p->ready, e->node))
            st = pt_last_status();
    }
    return st;
}

/* Seeds the roots and runs the graph to completion. */
static pt_status run_pass_on(pass *p, int n_roots, pt_tensor *const *roots, pt_tensor **root_grads)
{
    p->visited->count = 0;
    p->ready->count = 0;
    for (int r = 0; r < n_roots; r++) {
        pti_node *n = roots[r]->grad_fn;
        if (n && n->epoch != p->epoch) {
            visit(p, n);
            if (!list_push(p->visited, n))
                return pt_last_status();
        }
    }
    if (!count_dependencies(p))
        return pt_last_status();
    if (!p->accumulate && !mark_needed(p, n_roots, roots))
        return pt_last_status();
    pt_status st = PT_OK;
    for (int r = 0; r < n_roots && st == PT_OK; r++) {
        pt_tensor *g = root_grads[r];
        root_grads[r] = NULL;
        pti_node *n = roots[r]->grad_fn;
        if (n && n->needed) {
            n->grad_sum[roots[r]->output_nr] = add_owned(p, n->grad_sum[roots[r]->output_nr], g);
        } else if (!n && leaf_wanted(p, roots[r])) {
            st = deliver_to_leaf(p, roots[r], g);
        } else {
            pt_release(g);
        }
    }
    for (int r = 0; r < n_roots && st == PT_OK; r++) {
        pti_node *n = roots[r]->grad_fn;
        if (n && n->needed && n->dependencies == 0) {
            n->dependencies = -1; /* queued */
            if (!list_push(p->ready, n))
                st = pt_last_status();
        }
    }
    while (st == PT_OK && p->ready->count > 0)
        st = run_node(p, p->ready->items[--p->ready->count]);
    /* on failure, drop partial sums so nothing leaks */
    for (int64_t i = 0; i < p->visited->count; i++)
        for (int k = 0; k < PTI_NODE_MAX_OUT; k++) {
            pt_release(p->visited->items[i]->grad_sum[k]);
            p->visited->items[i]->grad_sum[k] = NULL;
        }
    return st;
}

static pt_status run_pass(pass *p, int n_roots, pt_tensor *const *roots, pt_tensor **root_grads)
{
    node_list own_visited = {0}, own_ready = {0};
    bool nested = pass_depth > 0;
    p->visited = nested ? &own_visited : &cached_visited;
    p->ready = nested ? &own_ready : &cached_ready;
    pass_depth++;
    pt_status st = run_pass_on(p, n_roots, roots, root_grads);
    pass_depth--;
    free(own_visited.items);
    free(own_ready.items);
    return st;
}

/* Root gradient: the given one (shape-checked) or ones for a one-element root. */
static pt_tensor *root_grad(const char *op, const pt_tensor *root, const pt_tensor *grad,
                            bool create_graph)
{
    if (grad) {
        if (grad->ndim != root->ndim ||
            memcmp(grad->shape, root->shape, sizeof(int64_t) * (size_t)root->ndim))
            return pti_error_null(PT_ERR_SHAPE, "%s: gradient %s does not match the output %s", op,
                                  pti_tensor_desc(grad), pti_tensor_desc(root));
        return twin(grad, create_graph);
    }
    if (root->numel != 1)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: grad can be implicitly created only for scalar outputs (got %s)",
                              op, pti_tensor_desc(root));
    return pt_ones_like(root);
}

static pt_status check_root(const char *op, int i, const pt_tensor *root)
{
    if (!PTI_CHECK_ARG(root, op, "output"))
        return pt_last_status();
    if (!root->requires_grad)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: element %d of tensors does not require grad and does not have a "
                         "grad_fn",
                         op, i);
    return PT_OK;
}

pt_status pt_backward(pt_tensor *root, pt_tensor *grad, bool retain_graph, bool create_graph)
{
    pt_status st = check_root("pt_backward", 0, root);
    if (st != PT_OK)
        return st;
    pt_tensor *g = root_grad("pt_backward", root, grad, create_graph);
    if (!g)
        return pt_last_status();
    pass p = {.op = "pt_backward",
              .keep_graph = retain_graph || create_graph,
              .create_graph = create_graph,
              .accumulate = true,
              .epoch = atomic_fetch_add(&epoch_counter, 1) + 1};
    st = run_pass(&p, 1, &root, &g);
    pt_release(g);
    return st;
}

pt_status pt_autograd_grad(int n_out, pt_tensor *const *outputs, pt_tensor *const *grad_outputs,
                           int n_in, pt_tensor *const *inputs, bool retain_graph, bool create_graph,
                           bool allow_unused, pt_tensor **grads)
{
    const char *op = "pt_autograd_grad";
    if (n_out < 1 || n_in < 1 || !outputs || !inputs || !grads || n_out > 64)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: need 1..64 outputs, at least one input and a "
                         "grads array",
                         op);
    for (int i = 0; i < n_in; i++)
        grads[i] = NULL;
    for (int i = 0; i < n_in; i++) {
        if (!PTI_CHECK_ARG(inputs[i], op, "inputs[i]"))
            return pt_last_status();
        if (!inputs[i]->requires_grad)
            return pti_error(PT_ERR_INVALID_ARG, "%s: input %d does not require grad", op, i);
    }
    pt_tensor *seeds[64] = {0};
    pt_status st = PT_OK;
    for (int r = 0; r < n_out && st == PT_OK; r++) {
        st = check_root(op, r, outputs[r]);
        if (st == PT_OK &&
            !(seeds[r] =
                  root_grad(op, outputs[r], grad_outputs ? grad_outputs[r] : NULL, create_graph)))
            st = pt_last_status();
    }
    if (st == PT_OK) {
        pass p = {.op = op,
                  .keep_graph = retain_graph || create_graph,
                  .create_graph = create_graph,
                  .accumulate = false,
                  .n_capture = n_in,
                  .capture = inputs,
                  .captured = grads,
                  .epoch = atomic_fetch_add(&epoch_counter, 1) + 1};
        st = run_pass(&p, n_out, outputs, seeds);
    }
    for (int r = 0; r < n_out; r++)
        pt_release(seeds[r]);
    for (int i = 0; st == PT_OK && i < n_in; i++)
        if (!grads[i] && !allow_unused)
            st = pti_error(PT_ERR_INVALID_ARG,
                           "%s: one of the differentiated tensors (input %d) appears to not have "
                           "been used in the graph; pass allow_unused=true if this is desired",
                           op, i);
    for (int i = 0; i < n_in; i++) {
        pt_tensor *g = grads[i];
        grads[i] = st == PT_OK && g ? twin(g, create_graph) : NULL;
        if (st == PT_OK && g && !grads[i])
            st = pt_last_status();
        pt_release(g);
    }
    if (st != PT_OK)
        for (int i = 0; i < n_in; i++) {
            pt_release(grads[i]);
            grads[i] = NULL;
        }
    return st;
}

/* ---- leaves, gradients, hooks --------------------------------------------------------------- */

pt_status pt_requires_grad_(pt_tensor *t, bool on)
{
    if (!PTI_CHECK_ARG(t, "pt_requires_grad_", "t"))
        return pt_last_status();
    if (on && !pti_dtypes[t->dtype].is_floating)
        return pti_error(PT_ERR_DTYPE,
                         "pt_requires_grad_: only floating point tensors can require "
                         "gradients (got %s)",
                         pt_dtype_name(t->dtype));
    if (!on && t->grad_fn)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_requires_grad_: you can only change requires_grad flags of leaf "
                         "tensors (use pt_detach for a non-leaf)");
    t->requires_grad = on;
    return PT_OK;
}

void pt_set_requires_grad(pt_tensor *t, bool on)
{
    (void)pt_requires_grad_(t, on);
}
bool pt_requires_grad(const pt_tensor *t)
{
    return t && t->requires_grad;
}
bool pt_is_leaf(const pt_tensor *t)
{
    return t && !t->grad_fn;
}

const char *pt_grad_fn_name(const pt_tensor *t)
{
    return t && t->grad_fn ? ((const pti_node *)t->grad_fn)->name : NULL;
}

pt_tensor *pt_grad(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_grad", "t") || !t->grad)
        return NULL;
    pt_tensor *g = pti_tensor_on_storage(t->grad->storage, t->grad->dtype, t->grad->ndim,
                                         t->grad->shape, t->grad->stride, t->grad->offset);
    /* a gradient computed with create_graph keeps its history (differentiable .grad) */
    if (g && pti_record_alias(g, t->grad) != PT_OK) {
        pt_release(g);
        return NULL;
    }
    return g;
}

pt_status pt_set_grad(pt_tensor *t, const pt_tensor *g)
{
    if (!PTI_CHECK_ARG(t, "pt_set_grad", "t"))
        return pt_last_status();
    if (g && (g->ndim != t->ndim || memcmp(g->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim)))
        return pti_error(PT_ERR_SHAPE, "pt_set_grad: gradient %s does not match the tensor %s",
                         pti_tensor_desc(g), pti_tensor_desc(t));
    if (g && (g->dtype != t->dtype || !pt_device_equal(g->storage->device, t->storage->device)))
        return pti_error(PT_ERR_DTYPE,
                         "pt_set_grad: gradient %s must have the dtype and device of "
                         "the tensor %s",
                         pti_tensor_desc(g), pti_tensor_desc(t));
    pt_retain((pt_tensor *)g);
    pti_unref(t->grad);
    t->grad = (pt_tensor *)g;
    return PT_OK;
}

pt_tensor *pt_detach(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_detach", "t"))
        return NULL;
    return pti_tensor_on_storage(t->storage, t->dtype, t->ndim, t->shape, t->stride, t->offset);
}

pt_status pt_retain_grad(pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_retain_grad", "t"))
        return pt_last_status();
    if (!t->requires_grad)
        return pti_error(
            PT_ERR_INVALID_ARG,
            "pt_retain_grad: can't retain_grad on a tensor that has requires_grad=false");
    if (!t->grad_fn)
        return PT_OK; /* leaves keep their grad anyway */
    pti_node *n = t->grad_fn;
    n->retain_target[t->output_nr] = t;
    t->retains_grad = true;
    return PT_OK;
}

pt_status pt_register_hook(pt_tensor *t, pt_grad_hook hook, void *user)
{
    if (!PTI_CHECK_ARG(t, "pt_register_hook", "t"))
        return pt_last_status();
    if (!hook)
        return pti_error(PT_ERR_NULL, "pt_register_hook: hook is NULL");
    if (!t->requires_grad)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_register_hook: cannot register a hook on a tensor that doesn't "
                         "require gradient");
    pti_hook *h = pti_malloc(sizeof *h);
    if (!h)
        return pt_last_status();
    h->fn = hook;
    h->user = user;
    h->next = NULL;
    pti_hook **head =
        t->grad_fn ? &((pti_node *)t->grad_fn)->pre_hooks[t->output_nr] : (pti_hook **)&t->hooks;
    while (*head) /* hooks run in registration order */
        head = &(*head)->next;
    *head = h;
    return PT_OK;
}
