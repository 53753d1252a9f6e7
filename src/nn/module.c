/* The nn module base (torch.nn.Module): registration of parameters, buffers and children,
 * lookup by dotted path, recursive listing in PyTorch's order, forward with hooks, train/eval,
 * moving to a device or dtype in place, zero_grad, apply, and freeing.
 *
 * A module keeps three small arrays in registration order (parameters, buffers, children);
 * names are unique across the three, as in PyTorch. Recursive listings build full dotted
 * names into one block owned by the module that asked (freed by the next listing or by
 * pt_nn_free). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "module_internal.h"

/* ---- creation and registration -----------------------------------------------------------------
 */

pt_module *pt_nn_module_new(const pt_module_def *def, void *ctx)
{
    if (!def || !def->type_name)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_module_new: def and def->type_name are required");
    pt_module *m = pti_calloc(1, sizeof(*m));
    if (!m) {
        if (def->free_ctx && ctx)
            def->free_ctx(ctx);
        return NULL;
    }
    m->def = *def;
    m->ctx = ctx;
    m->training = true;
    m->next_hook = 1;
    return m;
}

void *pt_nn_ctx(const pt_module *m)
{
    return m ? m->ctx : NULL;
}
const char *pt_nn_type_name(const pt_module *m)
{
    return m ? m->def.type_name : NULL;
}

static bool name_taken(const pt_module *m, const char *name)
{
    for (int i = 0; i < m->params.n; i++)
        if (strcmp(m->params.items[i].name, name) == 0)
            return true;
    for (int i = 0; i < m->buffers.n; i++)
        if (strcmp(m->buffers.items[i].name, name) == 0)
            return true;
    for (int i = 0; i < m->n_children; i++)
        if (strcmp(m->children[i].name, name) == 0)
            return true;
    return false;
}

static pt_status check_new_name(const char *op, const pt_module *m, const char *name)
{
    if (!m)
        return pti_error(PT_ERR_NULL, "%s: module is NULL", op);
    if (!name || !name[0] || strchr(name, '.'))
        return pti_error(PT_ERR_INVALID_ARG, "%s: name \"%s\" must be non-empty and contain no '.'",
                         op, name ? name : "(null)");
    if (name_taken(m, name))
        return pti_error(PT_ERR_INVALID_ARG, "%s: %s already has a member named \"%s\"", op,
                         m->def.type_name, name);
    return PT_OK;
}

static pt_status tensor_list_push(pti_tensor_list *l, const char *name, pt_tensor *t,
                                  bool persistent)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        pti_named_tensor *items = pti_realloc(l->items, (size_t)cap * sizeof(*items));
        if (!items)
            return pti_error(PT_ERR_OOM, "nn: out of memory registering \"%s\"", name);
        l->items = items;
        l->cap = cap;
    }
    char *copy = pti_strdup(name);
    if (!copy)
        return pti_error(PT_ERR_OOM, "nn: out of memory registering \"%s\"", name);
    l->items[l->n++] = (pti_named_tensor){copy, pt_retain(t), persistent};
    return PT_OK;
}

pt_status pt_nn_register_parameter(pt_module *m, const char *name, pt_tensor *t)
{
    pt_status st = check_new_name("pt_nn_register_parameter", m, name);
    if (st != PT_OK)
        return st;
    if (!t)
        return pti_null_arg("pt_nn_register_parameter", name);
    if (!pti_dtypes[t->dtype].is_floating)
        return pti_error(
            PT_ERR_DTYPE,
            "pt_nn_register_parameter: \"%s\" is %s; parameters must be floating point", name,
            pti_dtypes[t->dtype].name);
    if (t->grad_fn)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_nn_register_parameter: \"%s\" is not a leaf tensor (detach it first)",
                         name);
    st = pt_requires_grad_(t, true);
    if (st != PT_OK)
        return st;
    return tensor_list_push(&m->params, name, t, true);
}

pt_status pt_nn_register_buffer(pt_module *m, const char *name, pt_tensor *t, bool persistent)
{
    pt_status st = check_new_name("pt_nn_register_buffer", m, name);
    if (st != PT_OK)
        return st;
    if (!t)
        return pti_null_arg("pt_nn_register_buffer", name);
    return tensor_list_push(&m->buffers, name, t, persistent);
}

pt_status pt_nn_set_buffer(pt_module *m, const char *name, pt_tensor *t)
{
    if (!m || !name)
        return pti_error(PT_ERR_NULL, "pt_nn_set_buffer: module and name are required");
    if (!t)
        return pti_null_arg("pt_nn_set_buffer", name);
    for (int i = 0; i < m->buffers.n; i++) {
        if (strcmp(m->buffers.items[i].name, name) == 0) {
            pt_tensor *old = m->buffers.items[i].t;
            m->buffers.items[i].t = pt_retain(t);
            pti_unref(old);
            return PT_OK;
        }
    }
    return pti_error(PT_ERR_INDEX, "pt_nn_set_buffer: %s has no buffer \"%s\"", m->def.type_name,
                     name);
}

pt_status pt_nn_add(pt_module *parent, const char *name, pt_module *child)
{
    if (!child) {
        pt_status st = pt_last_status();
        return st != PT_OK
                   ? st
                   : pti_error(PT_ERR_NULL, "pt_nn_add: child \"%s\" is NULL", name ? name : "");
    }
    pt_status st = check_new_name("pt_nn_add", parent, name);
    if (st == PT_OK && parent->n_children == parent->cap_children) {
        int cap = parent->cap_children ? parent->cap_children * 2 : 4;
        pti_named_child *c = pti_realloc(parent->children, (size_t)cap * sizeof(*c));
        if (!c)
            st = pti_error(PT_ERR_OOM, "pt_nn_add: out of memory");
        else {
            parent->children = c;
            parent->cap_children = cap;
        }
    }
    char *copy = st == PT_OK ? pti_strdup(name) : NULL;
    if (st == PT_OK && !copy)
        st = pti_error(PT_ERR_OOM, "pt_nn_add: out of memory");
    if (st != PT_OK) {
        pt_nn_free(child);
        return st;
    }
    parent->children[parent->n_children++] = (pti_named_child){copy, child};
    return PT_OK;
}

/* ---- direct access -----------------------------------------------------------------------------
 */

int pt_nn_num_direct_params(const pt_module *m)
{
    return m ? m->params.n : 0;
}
int pt_nn_num_direct_buffers(const pt_module *m)
{
    return m ? m->buffers.n : 0;
}
int pt_nn_num_children(const pt_module *m)
{
    return m ? m->n_children : 0;
}

pt_tensor *pt_nn_direct_param_ref(const pt_module *m, int i, const char **name)
{
    if (!m || i < 0 || i >= m->params.n)
        return NULL;
    if (name)
        *name = m->params.items[i].name;
    return m->params.items[i].t;
}

pt_tensor *pt_nn_direct_buffer_ref(const pt_module *m, int i, const char **name)
{
    if (!m || i < 0 || i >= m->buffers.n)
        return NULL;
    if (name)
        *name = m->buffers.items[i].name;
    return m->buffers.items[i].t;
}

pt_module *pt_nn_child_at(const pt_module *m, int i, const char **name)
{
    if (!m || i < 0 || i >= m->n_children)
        return NULL;
    if (name)
        *name = m->children[i].name;
    return m->children[i].m;
}

/* ---- lookup by dotted path ---------------------------------------------------------------------
 */

static pt_module *direct_child(const pt_module *m, const char *name, size_t len)
{
    for (int i = 0; i < m->n_children; i++)
        if (strlen(m->children[i].name) == len && memcmp(m->children[i].name, name, len) == 0)
            return m->children[i].m;
    return NULL;
}

/* Walks the module part of path; *leaf gets the last segment. NULL when a segment is absent. */
static const pt_module *walk_path(const pt_module *m, const char *path, const char **leaf)
{
    const char *seg = path;
    const char *dot;
    while ((dot = strchr(seg, '.')) != NULL) {
        m = direct_child(m, seg, (size_t)(dot - seg));
        if (!m)
            return NULL;
        seg = dot + 1;
    }
    *leaf = seg;
    return m;
}

static pt_tensor *find_tensor(const pti_tensor_list *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->items[i].name, name) == 0)
            return l->items[i].t;
    return NULL;
}

pt_tensor *pt_nn_param_ref(const pt_module *m, const char *path)
{
    if (!m || !path)
        return pti_error_null(PT_ERR_NULL, "pt_nn_param_ref: module and path are required");
    const char *leaf;
    const pt_module *owner = walk_path(m, path, &leaf);
    pt_tensor *t = owner ? find_tensor(&owner->params, leaf) : NULL;
    return t ? t
             : pti_error_null(PT_ERR_INDEX, "pt_nn_param_ref: %s has no parameter \"%s\"",
                              m->def.type_name, path);
}

pt_tensor *pt_nn_buffer_ref(const pt_module *m, const char *path)
{
    if (!m || !path)
        return pti_error_null(PT_ERR_NULL, "pt_nn_buffer_ref: module and path are required");
    const char *leaf;
    const pt_module *owner = walk_path(m, path, &leaf);
    pt_tensor *t = owner ? find_tensor(&owner->buffers, leaf) : NULL;
    return t ? t
             : pti_error_null(PT_ERR_INDEX, "pt_nn_buffer_ref: %s has no buffer \"%s\"",
                              m->def.type_name, path);
}

pt_module *pt_nn_child_ref(const pt_module *m, const char *path)
{
    if (!m || !path)
        return pti_error_null(PT_ERR_NULL, "pt_nn_child_ref: module and path are required");
    const char *leaf;
    const pt_module *owner = walk_path(m, path, &leaf);
    pt_module *c = owner ? direct_child(owner, leaf, strlen(leaf)) : NULL;
    return c ? c
             : pti_error_null(PT_ERR_INDEX, "pt_nn_child_ref: %s has no submodule \"%s\"",
                              m->def.type_name, path);
}

/* ---- recursive listing -------------------------------------------------------------------------
 */

typedef struct {
    const char *prefix[PTI_NN_MAX_DEPTH];
    int depth;
} path_stack;

/* Visits every (module, member) pair depth first in PyTorch's order; fn gets the path stack. */
typedef void (*member_fn)(void *acc, const path_stack *ps, const pti_named_tensor *nt);

static pt_status visit(const pt_module *m, path_stack *ps, bool buffers, member_fn fn, void *acc)
{
    const pti_tensor_list *l = buffers ? &m->buffers : &m->params;
    for (int i = 0; i < l->n; i++)
        fn(acc, ps, &l->items[i]);
    if (ps->depth == PTI_NN_MAX_DEPTH && m->n_children > 0)
        return pti_error(PT_ERR_INVALID_ARG, "nn: modules nested deeper than %d levels",
                         PTI_NN_MAX_DEPTH);
    for (int i = 0; i < m->n_children; i++) {
        ps->prefix[ps->depth++] = m->children[i].name;
        pt_status st = visit(m->children[i].m, ps, buffers, fn, acc);
        ps->depth--;
        if (st != PT_OK)
            return st;
    }
    return PT_OK;
}

typedef struct {
    int n;             /* entries kept */
    size_t name_bytes; /* bytes of all full names with their NULs */
    bool dedup, persistent_only;
    pt_tensor **tensors; /* second pass: output arrays (NULL in the counting pass) */
    const char **names;
    char *name_pool;
    size_t pool_used;
} listing;

static bool already_listed(const listing *acc, const pt_tensor *t)
{
    for (int i = 0; i < acc->n; i++)
        if (acc->tensors[i] == t)
            return true;
    return false;
}

static size_t full_name_len(const path_stack *ps, const char *leaf)
{
    size_t n = strlen(leaf) + 1;
    for (int i = 0; i < ps->depth; i++)
        n += strlen(ps->prefix[i]) + 1;
    return n;
}

static void write_full_name(char *dst, const path_stack *ps, const char *leaf)
{
    for (int i = 0; i < ps->depth; i++) {
        size_t k = strlen(ps->prefix[i]);
        memcpy(dst, ps->prefix[i], k);
        dst[k] = '.';
        dst += k + 1;
    }
    strcpy(dst, leaf);
}

/* Counting pass keeps a temporary tensor array too, so duplicates are found in both passes. */
static void list_member(void *vacc, const path_stack *ps, const pti_named_tensor *nt)
{
    listing *acc = vacc;
    if (acc->persistent_only && !nt->persistent)
        return;
    if (acc->dedup && already_listed(acc, nt->t))
        return;
    if (acc->names) {
        char *dst = acc->name_pool + acc->pool_used;
        write_full_name(dst, ps, nt->name);
        acc->names[acc->n] = dst;
        acc->pool_used += strlen(dst) + 1;
    }
    acc->name_bytes += full_name_len(ps, nt->name);
    acc->tensors[acc->n++] = nt->t;
}

static int count_members(const pt_module *m, bool buffers)
{
    int n = buffers ? m->buffers.n : m->params.n;
    for (int i = 0; i < m->n_children; i++)
        n += count_members(m->children[i].m, buffers);
    return n;
}

/* Lists members of m with full names. names_out/tensors_out get malloc'd arrays; the names
 * live in a block owned by m (replacing the previous listing's block). Returns the count. */
int pti_nn_list(pt_module *m, bool buffers, bool dedup, bool persistent_only,
                const char ***names_out, pt_tensor ***tensors_out)
{
    if (!m) {
        pti_error(PT_ERR_NULL, "nn: module is NULL");
        return -1;
    }
    int upper = count_members(m, buffers);
    listing acc = {.dedup = dedup, .persistent_only = persistent_only};
    acc.tensors = pti_malloc((size_t)(upper ? upper : 1) * sizeof(pt_tensor *));
    if (!acc.tensors) {
        pti_error(PT_ERR_OOM, "nn: out of memory listing parameters");
        return -1;
    }
    path_stack ps = {.depth = 0};
    if (visit(m, &ps, buffers, list_member, &acc) != PT_OK) {
        free(acc.tensors);
        return -1;
    }
    if (names_out) {
        int n = acc.n;
        char *pool = pti_malloc(acc.name_bytes ? acc.name_bytes : 1);
        const char **names = pti_malloc((size_t)(n ? n : 1) * sizeof(char *));
        if (!pool || !names) {
            free(pool);
            free(names);
            free(acc.tensors);
            pti_error(PT_ERR_OOM, "nn: out of memory listing parameters");
            return -1;
        }
        acc = (listing){.dedup = dedup,
                        .persistent_only = persistent_only,
                        .tensors = acc.tensors,
                        .names = names,
                        .name_pool = pool};
        visit(m, &ps, buffers, list_member, &acc);
        free(m->name_block);
        m->name_block = pool;
        *names_out = names;
    }
    if (tensors_out)
        *tensors_out = acc.tensors;
    else
        free(acc.tensors);
    return acc.n;
}

int pt_nn_named_parameters(pt_module *m, const char ***names, pt_tensor ***params)
{
    return pti_nn_list(m, false, true, false, names, params);
}

int pt_nn_named_buffers(pt_module *m, const char ***names, pt_tensor ***buffers)
{
    return pti_nn_list(m, true, true, false, names, buffers);
}

int pt_nn_parameters(pt_module *m, pt_tensor ***params)
{
    return pti_nn_list(m, false, true, false, NULL, params);
}

int64_t pt_nn_num_parameters(pt_module *m)
{
    pt_tensor **ps;
    int n = pt_nn_parameters(m, &ps);
    if (n < 0)
        return -1;
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += ps[i]->numel;
    free(ps);
    return total;
}

/* ---- forward and hooks -------------------------------------------------------------------------
 */

static pt_status run_pre_hooks(pt_module *m, int n_in, const pt_tensor *const *in)
{
    for (int i = 0; i < m->n_hooks; i++) {
        pti_hook_entry *h = &m->hooks[i];
        if (h->pre) {
            pt_status st = h->pre(m, n_in, in, h->user);
            if (st != PT_OK)
                return st;
        }
    }
    return PT_OK;
}

static pt_status run_post_hooks(pt_module *m, int n_in, const pt_tensor *const *in, int n_out,
                                pt_tensor **out)
{
    for (int i = 0; i < m->n_hooks; i++) {
        pti_hook_entry *h = &m->hooks[i];
        if (h->post) {
            pt_status st = h->post(m, n_in, in, n_out, out, h->user);
            if (st != PT_OK)
                return st;
        }
    }
    return PT_OK;
}

static void release_outputs(int n_out, pt_tensor **out)
{
    for (int i = 0; i < n_out; i++) {
        pt_release(out[i]);
        out[i] = NULL;
    }
}

pt_status pt_nn_forward_n(pt_module *m, int n_in, pt_tensor_list in_arg, int n_out, pt_tensor **out)
{
    const pt_tensor *const *in = PT_TENSOR_LIST_PTR(in_arg);
    if (!m)
        return pti_error(PT_ERR_NULL, "pt_nn_forward_n: module is NULL");
    if (n_in < 0 || n_out < 1 || !out || (n_in > 0 && !in))
        return pti_error(PT_ERR_INVALID_ARG, "pt_nn_forward_n(%s): bad input/output counts %d/%d",
                         m->def.type_name, n_in, n_out);
    for (int i = 0; i < n_out; i++)
        out[i] = NULL;
    pt_status st = run_pre_hooks(m, n_in, in);
    if (st != PT_OK)
        return st;
    if (m->def.forward_n) {
        st = m->def.forward_n(m, n_in, in, n_out, out);
    } else if (m->def.forward && n_in == 1 && n_out == 1) {
        out[0] = m->def.forward(m, in[0]);
        st = out[0] ? PT_OK : pt_last_status();
        if (st == PT_OK && !out[0])
            st = PT_ERR_RUNTIME;
    } else if (m->def.forward) {
        st = pti_error(PT_ERR_INVALID_ARG, "%s takes 1 input and gives 1 output (got %d and %d)",
                       m->def.type_name, n_in, n_out);
    } else {
        st = pti_error(PT_ERR_UNSUPPORTED, "%s has no forward (it is a container)",
                       m->def.type_name);
    }
    if (st == PT_OK)
        st = run_post_hooks(m, n_in, in, n_out, out);
    if (st != PT_OK)
        release_outputs(n_out, out);
    return st;
}

pt_tensor *pt_nn_forward(pt_module *m, const pt_tensor *x)
{
    if (!m)
        return pti_error_null(PT_ERR_NULL, "pt_nn_forward: module is NULL");
    if (!x)
        return pti_null_arg("pt_nn_forward", "x"), NULL;
    if (m->def.forward && m->n_hooks == 0)
        return m->def.forward(m, x);
    pt_tensor *y = NULL;
    return pt_nn_forward_n(m, 1, &x, 1, &y) == PT_OK ? y : NULL;
}

static int add_hook(pt_module *m, pti_hook_entry e)
{
    if (!m) {
        pti_error(PT_ERR_NULL, "pt_nn_register_forward_hook: module is NULL");
        return -1;
    }
    pti_hook_entry *h = pti_realloc(m->hooks, (size_t)(m->n_hooks + 1) * sizeof(*h));
    if (!h) {
        pti_error(PT_ERR_OOM, "pt_nn_register_forward_hook: out of memory");
        return -1;
    }
    m->hooks = h;
    e.handle = m->next_hook++;
    m->hooks[m->n_hooks++] = e;
    return e.handle;
}

int pt_nn_register_forward_pre_hook(pt_module *m, pt_forward_pre_hook hook, void *user)
{
    return add_hook(m, (pti_hook_entry){.pre = hook, .user = user});
}

int pt_nn_register_forward_hook(pt_module *m, pt_forward_hook hook, void *user)
{
    return add_hook(m, (pti_hook_entry){.post = hook, .user = user});
}

pt_status pt_nn_remove_hook(pt_module *m, int handle)
{
    if (!m)
        return pti_error(PT_ERR_NULL, "pt_nn_remove_hook: module is NULL");
    for (int i = 0; i < m->n_hooks; i++) {
        if (m->hooks[i].handle == handle) {
            memmove(&m->hooks[i], &m->hooks[i + 1],
                    (size_t)(m->n_hooks - i - 1) * sizeof(*m->hooks));
            m->n_hooks--;
            return PT_OK;
        }
    }
    return pti_error(PT_ERR_INDEX, "pt_nn_remove_hook: no hook with handle %d", handle);
}

/* ---- mode, device, gradients -------------------------------------------------------------------
 */

void pt_nn_train(pt_module *m, bool on)
{
    if (!m)
        return;
    bool changed = m->training != on;
    m->training = on;
    for (int i = 0; i < m->n_children; i++)
        pt_nn_train(m->children[i].m, on);
    if (changed && m->def.on_train)
        m->def.on_train(m, on);
}

void pt_nn_eval(pt_module *m)
{
    pt_nn_train(m, false);
}
bool pt_nn_is_training(const pt_module *m)
{
    return m && m->training;
}

/* Replaces t's data with src's (storage, geometry, dtype) keeping the tensor object, like
 * PyTorch's `param.data = new_data`. */
static void set_tensor_data(pt_tensor *t, pt_tensor *src)
{
    pt_storage *old = t->storage;
    pti_storage_retain(src->storage);
    t->storage = src->storage;
    t->offset = src->offset;
    t->ndim = src->ndim;
    t->dtype = src->dtype;
    memcpy(t->shape, src->shape, sizeof(t->shape));
    memcpy(t->stride, src->stride, sizeof(t->stride));
    t->numel = src->numel;
    pti_storage_release(old);
}

typedef pt_tensor *(*convert_fn)(const pt_tensor *t, const void *arg);

static pt_tensor *convert_device(const pt_tensor *t, const void *arg)
{
    const pt_device *d = arg;
    if (t->storage->device.type == d->type && t->storage->device.index == d->index)
        return NULL;
    return pt_to(t, *d);
}

static pt_tensor *convert_dtype(const pt_tensor *t, const void *arg)
{
    pt_dtype dt = *(const pt_dtype *)arg;
    if (!pti_dtypes[t->dtype].is_floating || t->dtype == dt)
        return NULL;
    return pt_to_dtype(t, dt);
}

/* Converts t (and its grad) in place; NULL from fn with no error set means "already there". */
static pt_status convert_in_place(pt_tensor *t, convert_fn fn, const void *arg)
{
    pt_clear_error();
    bool prev = pt_set_grad_enabled(false);
    pt_tensor *moved = fn(t, arg);
    pt_status st = moved ? PT_OK : pt_last_status();
    if (moved) {
        set_tensor_data(t, moved);
        pt_release(moved);
    }
    if (st == PT_OK && t->grad) {
        pt_tensor *g = fn(t->grad, arg);
        st = g ? PT_OK : pt_last_status();
        if (g) {
            set_tensor_data(t->grad, g);
            pt_release(g);
        }
    }
    pt_set_grad_enabled(prev);
    return st;
}

static pt_status convert_module(pt_module *m, convert_fn fn, const void *arg)
{
    for (int i = 0; i < m->params.n; i++) {
        pt_status st = convert_in_place(m->params.items[i].t, fn, arg);
        if (st != PT_OK)
            return st;
    }
    for (int i = 0; i < m->buffers.n; i++) {
        pt_status st = convert_in_place(m->buffers.items[i].t, fn, arg);
        if (st != PT_OK)
            return st;
    }
    for (int i = 0; i < m->n_children; i++) {
        pt_status st = convert_module(m->children[i].m, fn, arg);
        if (st != PT_OK)
            return st;
    }
    return PT_OK;
}

pt_status pt_nn_to(pt_module *m, pt_device dev)
{
    if (!m)
        return pti_error(PT_ERR_NULL, "pt_nn_to: module is NULL");
    return convert_module(m, convert_device, &dev);
}

pt_status pt_nn_to_dtype(pt_module *m, pt_dtype dt)
{
    if (!m)
        return pti_error(PT_ERR_NULL, "pt_nn_to_dtype: module is NULL");
    if (!pti_dtype_valid(dt) || !pti_dtypes[dt].is_floating || pti_dtypes[dt].is_block)
        return pti_error(PT_ERR_DTYPE, "pt_nn_to_dtype: target must be a floating-point dtype");
    return convert_module(m, convert_dtype, &dt);
}

void pt_nn_zero_grad(pt_module *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->params.n; i++)
        pt_set_grad(m->params.items[i].t, NULL);
    for (int i = 0; i < m->n_children; i++)
        pt_nn_zero_grad(m->children[i].m);
}

void pt_nn_requires_grad_(pt_module *m, bool on)
{
    if (!m)
        return;
    for (int i = 0; i < m->params.n; i++)
        pt_requires_grad_(m->params.items[i].t, on);
    for (int i = 0; i < m->n_children; i++)
        pt_nn_requires_grad_(m->children[i].m, on);
}

pt_status pt_nn_apply(pt_module *m, pt_module_fn fn, void *user)
{
    if (!m || !fn)
        return pti_error(PT_ERR_NULL, "pt_nn_apply: module and fn are required");
    for (int i = 0; i < m->n_children; i++) {
        pt_status st = pt_nn_apply(m->children[i].m, fn, user);
        if (st != PT_OK)
            return st;
    }
    return fn(m, user);
}

/* ---- freeing -----------------------------------------------------------------------------------
 */

static void free_tensor_list(pti_tensor_list *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->items[i].name);
        pti_unref(l->items[i].t);
    }
    free(l->items);
}

void pt_nn_free(pt_module *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_children; i++) {
        free(m->children[i].name);
        pt_nn_free(m->children[i].m);
    }
    free(m->children);
    free_tensor_list(&m->params);
    free_tensor_list(&m->buffers);
    free(m->hooks);
    free(m->name_block);
    if (m->def.free_ctx && m->ctx)
        m->def.free_ctx(m->ctx);
    free(m);
}
