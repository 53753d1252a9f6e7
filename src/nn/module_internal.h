/* Internal layout of pt_module (src/nn only): registered members in registration order,
 * children, forward hooks, and the name block of the last recursive listing. */
#ifndef PT_NN_MODULE_INTERNAL_H
#define PT_NN_MODULE_INTERNAL_H

#include "prometorch/nn.h"

/* Deepest module nesting the recursive walks accept (real networks use < 10). */
#define PTI_NN_MAX_DEPTH 64

typedef struct {
    char *name;
    pt_tensor *t;    /* the module's own reference */
    bool persistent; /* buffers: part of the state dict */
} pti_named_tensor;

typedef struct {
    int n, cap;
    pti_named_tensor *items;
} pti_tensor_list;

typedef struct {
    char *name;
    pt_module *m; /* owned */
} pti_named_child;

typedef struct {
    int handle;
    pt_forward_pre_hook pre; /* one of pre/post is set */
    pt_forward_hook post;
    void *user;
} pti_hook_entry;

struct pt_module {
    pt_module_def def;
    void *ctx;
    bool training;
    pti_tensor_list params, buffers;
    pti_named_child *children;
    int n_children, cap_children;
    pti_hook_entry *hooks;
    int n_hooks, next_hook;
    char *name_block; /* full names of the last pt_nn_named_* listing */
};

/* Lists the parameters (buffers=false) or buffers of m and its descendants with full dotted
 * names in PyTorch's order. dedup drops a tensor seen before; persistent_only skips
 * non-persistent buffers. *names_out (may be NULL) and *tensors_out (may be NULL) receive
 * malloc'd arrays; the names live in m->name_block until the next listing. Returns the count
 * or -1 with the error set. */
int pti_nn_list(pt_module *m, bool buffers, bool dedup, bool persistent_only,
                const char ***names_out, pt_tensor ***tensors_out);

#endif
