/* Autograd nodes: creation, saved tensors (with version checks), attaching nodes to their
 * outputs, iterative destruction, grad mode, and alias and in-place recording. This is the
 * graph layer below the ops (which record nodes beside their forward); the engine that runs
 * nodes is src/autograd/engine.c, above the ops. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"

/* ---- grad mode ---------------------------------------------------------------------------- */

static _Thread_local bool grad_disabled;
#define NO_GRAD_DEPTH 64
static _Thread_local bool no_grad_stack[NO_GRAD_DEPTH];
static _Thread_local int no_grad_depth, no_grad_overflow;

bool pt_grad_enabled(void)
{
    return !grad_disabled;
}

bool pt_set_grad_enabled(bool on)
{
    bool previous = !grad_disabled;
    grad_disabled = !on;
    return previous;
}

void pt_no_grad_begin(void)
{
    if (no_grad_depth == NO_GRAD_DEPTH) {
        no_grad_overflow++;
        grad_disabled = true;
        return;
    }
    no_grad_stack[no_grad_depth++] = pt_set_grad_enabled(false);
}

void pt_no_grad_end(void)
{
    if (no_grad_overflow > 0) {
        no_grad_overflow--;
        return;
    }
    if (no_grad_depth > 0)
        pt_set_grad_enabled(no_grad_stack[--no_grad_depth]);
}

bool pti_grad_recording(int n, const pt_tensor *const *inputs)
{
    if (grad_disabled)
        return false;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad)
            return true;
    return false;
}

/* ---- node lifetime ------------------------------------------------------------------------- */

void pti_node_retain(pti_node *n)
{
    if (n)
        atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

/* Node structs come from a free list (like tensor structs), so recording a steady-state
 * training step does not call malloc once the list is warm. */
static pthread_mutex_t node_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pti_node *node_pool; /* linked through ->ctx */
static int node_pool_count;
#define NODE_POOL_MAX 8192

static pti_node *node_alloc(void)
{
    pthread_mutex_lock(&node_pool_lock);
    pti_node *n = node_pool;
    if (n) {
        node_pool = n->ctx;
        node_pool_count--;
    }
    pthread_mutex_unlock(&node_pool_lock);
    if (n)
        memset(n, 0, sizeof *n);
    else
        n = pti_calloc(1, sizeof *n);
    return n;
}

static void node_dealloc(pti_node *n)
{
    pthread_mutex_lock(&node_pool_lock);
    if (node_pool_count < NODE_POOL_MAX) {
        n->ctx = node_pool;
        node_pool = n;
        node_pool_count++;
        n = NULL;
    }
    pthread_mutex_unlock(&node_pool_lock);
    free(n);
}

/* Destroying a node drops its edges and saved tensors, which may destroy more nodes; a long
 * chain would recurse as deep as the graph, so dying nodes go on a thread-local worklist. */
static _Thread_local pti_node **dying;
static _Thread_local int64_t dying_count, dying_cap;
static _Thread_local bool draining;

static void node_free_contents(pti_node *n)
{
    for (int i = 0; i < n->n_saved; i++)
        pti_unref(n->saved[i]);
    for (int i = 0; i < n->n_in; i++) {
        pti_node_release(n->edges[i].node);
        pti_unref(n->edges[i].leaf);
    }
    for (int k = 0; k < n->n_out; k++) {
        pti_unref(n->grad_sum[k]);
        pti_hook *h = n->pre_hooks[k];
        while (h) {
            pti_hook *next = h->next;
            free(h);
            h = next;
        }
    }
    if (n->ctx_free)
        n->ctx_free(n->ctx);
    node_dealloc(n);
}

static bool push_dying(pti_node *n)
{
    if (dying_count == dying_cap) {
        int64_t cap = dying_cap ? dying_cap * 2 : 256;
        pti_node **grown = pti_realloc(dying, (size_t)cap * sizeof *grown);
        if (!grown)
            return false;
        dying = grown;
        dying_cap = cap;
    }
    dying[dying_count++] = n;
    return true;
}

void pti_node_release(pti_node *n)
{
    if (!n || atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (draining) {
        if (!push_dying(n))
            node_free_contents(n); /* out of memory for the list: recurse instead */
        return;
    }
    draining = true;
    node_free_contents(n);
    while (dying_count > 0)
        node_free_contents(dying[--dying_count]);
    draining = false;
}

/* Called by core's pti_unref when a tensor with autograd state dies (registered below, so
 * core does not call up into this layer). */
static void tensor_dies(pt_tensor *t)
{
    pti_node *n = t->grad_fn;
    if (n) {
        for (int k = 0; k < n->n_out; k++)
            if (n->retain_target[k] == t)
                n->retain_target[k] = NULL;
        t->grad_fn = NULL;
        pti_node_release(n);
    }
    pti_hook *h = t->hooks;
    while (h) {
        pti_hook *next = h->next;
        free(h);
        h = next;
    }
    t->hooks = NULL;
}

__attribute__((constructor)) static void graph_init(void)
{
    pti_set_tensor_death_hook(tensor_dies);
}

/* ---- building nodes ------------------------------------------------------------------------- */

pti_node *pti_node_new(const char *name, pti_backward_fn fn, int n, const pt_tensor *const *inputs)
{
    if (n > PTI_NODE_MAX_IN)
        return pti_error_null(PT_ERR_RUNTIME, "autograd: %s has %d inputs (at most %d)", name, n,
                              PTI_NODE_MAX_IN);
    pti_node *node = node_alloc();
    if (!node)
        return pti_error_null(PT_ERR_OOM, "autograd: out of memory recording %s", name);
    atomic_init(&node->refcount, 1);
    node->name = name;
    node->backward = fn;
    node->n_in = n;
    for (int i = 0; i < n; i++) {
        const pt_tensor *t = inputs[i];
        if (!t || !t->requires_grad)
            continue;
        if (t->grad_fn) {
            node->edges[i].node = t->grad_fn;
            node->edges[i].output_nr = t->output_nr;
            pti_node_retain(t->grad_fn);
        } else {
            node->edges[i].leaf = pt_retain((pt_tensor *)t);
        }
    }
    return node;
}

/* What a node keeps of a saved input. A view keeps its base alive (view_base), so saving the
 * view itself would keep the base's later history alive, and when that history comes to
 * include this node (y.mul_(y[:, :1]) rebases y onto a node that saved a view of y) the
 * cycle would never be freed. A view with history is therefore kept as an alias with the same
 * storage, geometry and history but no base. A leaf (or a view without history) is kept
 * itself: gradients for a leaf must reach that very tensor. */
static pt_tensor *saved_ref(const pt_tensor *t)
{
    if (!t->view_base || !t->grad_fn)
        return pt_retain((pt_tensor *)t);
    pt_tensor *a =
        pti_tensor_on_storage(t->storage, t->dtype, t->ndim, t->shape, t->stride, t->offset);
    if (!a)
        return NULL;
    pti_scope_untrack(a); /* owned by the node */
    pti_node_retain(t->grad_fn);
    a->grad_fn = t->grad_fn;
    a->output_nr = t->output_nr;
    a->requires_grad = t->requires_grad;
    return a;
}

int pti_node_save(pti_node *n, const pt_tensor *t)
{
    if (n->n_saved == PTI_NODE_MAX_SAVED) {
        pti_error(PT_ERR_RUNTIME, "autograd: %s saves more than %d tensors", n->name,
                  PTI_NODE_MAX_SAVED);
        return -1;
    }
    pt_tensor *kept = t ? saved_ref(t) : NULL;
    if (t && !kept)
        return -1;
    int slot = n->n_saved++;
    n->saved[slot] = kept;
    n->saved_version[slot] = t ? atomic_load(&t->storage->version) : 0;
    n->saved_is_output[slot] = false;
    return slot;
}

int pti_node_save_output(pti_node *n, const pt_tensor *out)
{
    if (n->n_saved == PTI_NODE_MAX_SAVED) {
        pti_error(PT_ERR_RUNTIME, "autograd: %s saves more than %d tensors", n->name,
                  PTI_NODE_MAX_SAVED);
        return -1;
    }
    /* a detached alias: holding `out` itself would make out -> node -> out a cycle */
    pt_tensor *alias = pti_tensor_on_storage(out->storage, out->dtype, out->ndim, out->shape,
                                             out->stride, out->offset);
    if (!alias)
        return -1;
    pti_scope_untrack(alias); /* owned by the node, not by the caller's scope */
    int slot = n->n_saved++;
    n->saved[slot] = alias;
    n->saved_version[slot] = atomic_load(&out->storage->version);
    n->saved_is_output[slot] = true;
    alias->output_nr = out->output_nr; /* remembered for create_graph unpacking */
    return slot;
}

pt_status pti_node_finish(pti_node *n, int n_out, pt_tensor *const *outs)
{
    if (n_out > PTI_NODE_MAX_OUT) {
        pti_node_release(n);
        return pti_error(PT_ERR_RUNTIME, "autograd: %s has %d outputs (at most %d)", n->name, n_out,
                         PTI_NODE_MAX_OUT);
    }
    n->n_out = n_out;
    for (int k = 0; k < n_out; k++) {
        pt_tensor *o = outs[k];
        pti_out_meta *m = &n->out_meta[k];
        if (!o)
            continue;
        m->used = true;
        m->ndim = o->ndim;
        for (int d = 0; d < o->ndim; d++)
            m->shape[d] = o->shape[d];
        m->dtype = o->dtype;
        m->device = o->storage->device;
        if (o->grad_fn)
            pti_node_release(o->grad_fn);
        pti_node_retain(n);
        o->grad_fn = n;
        o->output_nr = k;
        o->requires_grad = true;
    }
    pti_node_release(n); /* the creation reference: the outputs own the node now */
    return PT_OK;
}

pt_tensor *pti_node_saved(pti_node *n, int i)
{
    if (n->released)
        return pti_error_null(PT_ERR_RUNTIME,
                              "autograd: trying to backward through the graph a second time (or "
                              "to read saved tensors of %s after they were freed); pass "
                              "retain_graph=true the first time",
                              n->name);
    pt_tensor *s = n->saved[i];
    if (!s)
        return NULL;
    unsigned now = atomic_load(&s->storage->version);
    if (now != n->saved_version[i])
        return pti_error_null(PT_ERR_RUNTIME,
                              "autograd: one of the tensors needed for gradient computation has "
                              "been modified by an in-place operation: %s, saved by %s, is at "
                              "version %u; expected version %u",
                              pti_tensor_desc(s), n->name, now, n->saved_version[i]);
    pt_tensor *alias =
        pti_tensor_on_storage(s->storage, s->dtype, s->ndim, s->shape, s->stride, s->offset);
    if (!alias || !pt_grad_enabled())
        return alias;
    /* create_graph: the alias carries the history of what was saved */
    if (n->saved_is_output[i]) {
        pti_node_retain(n);
        alias->grad_fn = n;
        alias->output_nr = s->output_nr;
        alias->requires_grad = true;
    } else if (s->requires_grad && pti_record_alias(alias, s) != PT_OK) {
        pt_release(alias);
        return NULL;
    }
    return alias;
}

/* ---- alias and in-place recording ------------------------------------------------------------ */

static pt_status alias_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    (void)n;
    grad_in[0] = pt_retain(grad_out[0]);
    return PT_OK;
}

pt_status pti_record_alias(pt_tensor *out, const pt_tensor *in)
{
    if (!pti_grad_recording(1, &in))
        return PT_OK;
    pti_node *n = pti_node_new("alias", alias_backward, 1, &in);
    if (!n)
        return pt_last_status();
    return pti_node_finish(n, 1, &out);
}

pt_status pti_inplace_check(const char *op, const pt_tensor *self)
{
    if (pt_grad_enabled() && self->requires_grad && !self->grad_fn)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: a leaf tensor that requires grad (%s) is being used in an in-place "
                         "operation",
                         op, pti_tensor_desc(self));
    /* Writing through a view changes its base, whose history would not know (PyTorch's
     * CopySlices is not implemented): refuse rather than give silently wrong gradients. */
    if (pt_grad_enabled() && self->is_view)
        return pti_error(PT_ERR_UNSUPPORTED,
                         "%s: in-place operation on a view (%s) while autograd records is not "
                         "supported; clone the view first, or run it under pt_no_grad_begin()",
                         op, pti_tensor_desc(self));
    return PT_OK;
}

pt_status pti_inplace_rebase(pt_tensor *self, const pt_tensor *result)
{
    if (!result->grad_fn)
        return PT_OK;
    pti_node *old = self->grad_fn;
    pti_node_retain(result->grad_fn);
    self->grad_fn = result->grad_fn;
    self->output_nr = result->output_nr;
    self->requires_grad = true;
    pti_node_release(old);
    return PT_OK;
}
