/* module.state_dict() and module.load_state_dict(): PyTorch's keys and order (each module's
 * parameters, then its persistent buffers, then its children depth first), detached tensors
 * sharing storage, and one error message listing every missing key, unexpected key and
 * shape mismatch, worded like PyTorch's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "../core/strbuf.h"
#include "../value/value_internal.h"
#include "module_internal.h"

typedef struct {
    char *key;              /* full dotted name (malloc'd) */
    pt_tensor *t;           /* borrowed from the module */
    const pt_module *owner; /* the module it belongs to */
    size_t prefix_len;      /* of key, the owner's "a.b." */
} state_entry;

typedef struct {
    state_entry *items;
    int n, cap;
} state_list;

static pt_status push_entry(state_list *l, const pt_module *owner, const char *prefix,
                            const char *name, pt_tensor *t)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        state_entry *items = pti_realloc(l->items, (size_t)cap * sizeof(*items));
        if (!items)
            return pti_error(PT_ERR_OOM, "state_dict: out of memory");
        l->items = items;
        l->cap = cap;
    }
    size_t np = strlen(prefix), nn = strlen(name);
    char *key = pti_malloc(np + nn + 1);
    if (!key)
        return pti_error(PT_ERR_OOM, "state_dict: out of memory");
    memcpy(key, prefix, np);
    memcpy(key + np, name, nn + 1);
    l->items[l->n++] = (state_entry){key, t, owner, np};
    return PT_OK;
}

static void free_state_list(state_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->items[i].key);
    free(l->items);
}

/* prefix is "" or "a.b." (with the trailing dot); buf has room for PyTorch-sized paths. */
static pt_status collect(const pt_module *m, char *prefix, size_t cap, int depth, state_list *l)
{
    if (depth > PTI_NN_MAX_DEPTH)
        return pti_error(PT_ERR_INVALID_ARG, "state_dict: modules nested deeper than %d levels",
                         PTI_NN_MAX_DEPTH);
    for (int i = 0; i < m->params.n; i++)
        if (push_entry(l, m, prefix, m->params.items[i].name, m->params.items[i].t) != PT_OK)
            return PT_ERR_OOM;
    for (int i = 0; i < m->buffers.n; i++)
        if (m->buffers.items[i].persistent &&
            push_entry(l, m, prefix, m->buffers.items[i].name, m->buffers.items[i].t) != PT_OK)
            return PT_ERR_OOM;
    size_t len = strlen(prefix);
    for (int i = 0; i < m->n_children; i++) {
        int w = snprintf(prefix + len, cap - len, "%s.", m->children[i].name);
        if (w < 0 || (size_t)w >= cap - len)
            return pti_error(PT_ERR_INVALID_ARG, "state_dict: key prefix too long");
        pt_status st = collect(m->children[i].m, prefix, cap, depth + 1, l);
        prefix[len] = '\0';
        if (st != PT_OK)
            return st;
    }
    return PT_OK;
}

static pt_status collect_state(const pt_module *m, state_list *l)
{
    char prefix[4096] = "";
    pt_status st = collect(m, prefix, sizeof(prefix), 0, l);
    if (st != PT_OK)
        free_state_list(l);
    return st;
}

pt_value *pt_nn_state_dict(pt_module *m)
{
    if (!m)
        return pti_error_null(PT_ERR_NULL, "pt_nn_state_dict: module is NULL");
    state_list l = {0};
    if (collect_state(m, &l) != PT_OK)
        return NULL;
    pt_value *dict = pt_value_dict();
    for (int i = 0; dict && i < l.n; i++) {
        pt_tensor *d = pt_detach(l.items[i].t);
        pt_value *v = pt_value_tensor(d);
        pt_release(d);
        if (!v || pt_value_dict_set_str(dict, l.items[i].key, v) != PT_OK) {
            pt_value_free(dict);
            dict = NULL;
        }
    }
    free_state_list(&l);
    return dict;
}

/* ---- loading -----------------------------------------------------------------------------------
 */

/* "torch.Size([3, 4])" as PyTorch prints shapes in these messages. */
static const char *torch_size(const pt_tensor *t)
{
    static _Thread_local char buf[2][256];
    static _Thread_local int which;
    char *s = buf[which++ & 1];
    snprintf(s, 256, "torch.Size(%s)", pti_shape_str(t->ndim, t->shape));
    return s;
}

static bool same_shape(const pt_tensor *a, const pt_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

static bool is_expected_key(const state_list *l, const char *key)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->items[i].key, key) == 0)
            return true;
    return false;
}

/* Appends one "\n\t<title>: "k1", "k2". " section (PyTorch's wording). */
static void list_section(pti_strbuf *b, const char *title, int n, const char **keys)
{
    if (n == 0)
        return;
    pti_strbuf_printf(b, "\n\t%s: ", title);
    for (int i = 0; i < n; i++)
        pti_strbuf_printf(b, "\"%s\"%s", keys[i], i + 1 < n ? ", " : ". ");
}

/* PyTorch's _NormBase._load_from_state_dict: a state dict from before num_batches_tracked
 * existed (its _metadata version for the module absent or < 2, torch <= 0.4) loads with the
 * counter at 0 instead of a missing key. */
static bool old_norm_counter(const pt_value *state, const state_entry *e)
{
    const char *type = e->owner->def.type_name;
    if (strcmp(e->key + e->prefix_len, "num_batches_tracked") != 0 || !type ||
        (strncmp(type, "BatchNorm", 9) != 0 && strncmp(type, "InstanceNorm", 12) != 0))
        return false;
    char prefix[4096];
    size_t n = e->prefix_len ? e->prefix_len - 1 : 0; /* "a.b." -> "a.b" */
    if (n >= sizeof prefix)
        return false;
    memcpy(prefix, e->key, n);
    prefix[n] = '\0';
    int64_t version = 0;
    return !pti_value_dict_meta_version(state, prefix, &version) || version < 2;
}

/* Looks up every expected key; records problems in b. sources[i] receives the tensor to copy
 * (or NULL). Returns the number of problems. */
static int match_keys(const pt_module *m, const state_list *l, const pt_value *state, bool strict,
                      pt_tensor **sources, bool *zero, pti_strbuf *b)
{
    int problems = 0;
    const char **missing = pti_calloc((size_t)l->n + 1, sizeof(char *));
    int64_t n_state = pt_value_len(state);
    const char **unexpected = pti_calloc((size_t)n_state + 1, sizeof(char *));
    pti_strbuf mismatch = {0};
    if (!missing || !unexpected) {
        free(missing);
        free(unexpected);
        pti_strbuf_printf(b, "out of memory");
        return 1;
    }
    int n_missing = 0, n_unexpected = 0;
    for (int i = 0; i < l->n; i++) {
        pt_value *v = pt_value_get_str_ref(state, l->items[i].key);
        pt_tensor *src = v ? pt_value_tensor_ref(v) : NULL;
        sources[i] = NULL;
        zero[i] = !v && old_norm_counter(state, &l->items[i]);
        if (zero[i]) {
            /* set to 0 below, with the rest */
        } else if (!v) {
            missing[n_missing++] = l->items[i].key;
        } else if (!src) {
            pti_strbuf_printf(&mismatch,
                              "\n\tWhile copying the parameter named \"%s\", expected a tensor but "
                              "the state_dict holds a %s.",
                              l->items[i].key, pt_value_kind_name(pt_value_kind_of(v)));
            problems++;
        } else if (!same_shape(src, l->items[i].t)) {
            pti_strbuf_printf(&mismatch,
                              "\n\tsize mismatch for %s: copying a param with shape %s from "
                              "checkpoint, the shape in current model is %s.",
                              l->items[i].key, torch_size(src), torch_size(l->items[i].t));
            problems++;
        } else {
            sources[i] = src;
        }
    }
    for (int64_t i = 0; i < n_state; i++) {
        const char *key = pt_value_as_str(pt_value_key_ref(state, i), NULL);
        if (!key || !is_expected_key(l, key))
            unexpected[n_unexpected++] = key ? key : "(non-string key)";
    }
    if (strict) {
        list_section(b, "Missing key(s) in state_dict", n_missing, missing);
        list_section(b, "Unexpected key(s) in state_dict", n_unexpected, unexpected);
        problems += n_missing + n_unexpected;
    }
    pti_strbuf_put(b, mismatch.data, mismatch.len);
    pti_strbuf_free(&mismatch);
    free(missing);
    free(unexpected);
    (void)m;
    return problems;
}

pt_status pt_nn_load_state_dict(pt_module *m, const pt_value *state, bool strict)
{
    if (!m)
        return pti_error(PT_ERR_NULL, "pt_nn_load_state_dict: module is NULL");
    if (pt_value_kind_of(state) != PT_VALUE_DICT)
        return pti_error(PT_ERR_INVALID_ARG, "pt_nn_load_state_dict: expected a dict, got %s",
                         state ? pt_value_kind_name(pt_value_kind_of(state)) : "NULL");
    state_list l = {0};
    if (collect_state(m, &l) != PT_OK)
        return pt_last_status();
    pt_tensor **sources = pti_calloc((size_t)l.n + 1, sizeof(*sources));
    bool *zero = pti_calloc((size_t)l.n + 1, sizeof(*zero));
    if (!sources || !zero) {
        free(sources);
        free(zero);
        free_state_list(&l);
        return pti_error(PT_ERR_OOM, "pt_nn_load_state_dict: out of memory");
    }
    pti_strbuf b = {0};
    int problems = match_keys(m, &l, state, strict, sources, zero, &b);
    pt_status st = PT_OK;
    if (problems > 0) {
        st = pti_error(PT_ERR_INVALID_ARG, "Error(s) in loading state_dict for %s:%s",
                       m->def.type_name, b.data ? b.data : "");
    } else {
        pt_no_grad_begin();
        for (int i = 0; i < l.n && st == PT_OK; i++)
            if (sources[i])
                st = pt_copy_(l.items[i].t, sources[i]);
            else if (zero[i])
                st = pt_zero_(l.items[i].t);
        pt_no_grad_end();
        if (st == PT_OK)
            pt_clear_error();
    }
    pti_strbuf_free(&b);
    free(sources);
    free(zero);
    free_state_list(&l);
    return st;
}
