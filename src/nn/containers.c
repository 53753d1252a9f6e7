/* nn containers (Sequential, ModuleList, ModuleDict) and PyTorch's module repr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "../core/strbuf.h"
#include "module_internal.h"

/* ---- Sequential, ModuleList, ModuleDict --------------------------------------------------------
 */

/* Each child's output feeds the next; intermediate results are released as we go. An empty
 * Sequential returns its input (as a view, so the caller owns a new reference). */
static pt_tensor *sequential_forward(pt_module *self, const pt_tensor *x)
{
    if (self->n_children == 0)
        return pt_view(x, x->ndim, x->shape);
    pt_tensor *cur = NULL;
    for (int i = 0; i < self->n_children; i++) {
        pt_tensor *next = pt_nn_forward(self->children[i].m, cur ? cur : x);
        pt_release(cur);
        if (!next)
            return NULL;
        cur = next;
    }
    return cur;
}

static const pt_module_def sequential_def = {.type_name = "Sequential",
                                             .forward = sequential_forward};
static const pt_module_def module_list_def = {.type_name = "ModuleList"};
static const pt_module_def module_dict_def = {.type_name = "ModuleDict"};

static void free_children(int from, int n, pt_module **children)
{
    for (int i = from; i < n; i++)
        pt_nn_free(children[i]);
}

/* Adds children under their index names; on failure frees the rest too. */
static pt_module *indexed_container(const pt_module_def *def, int n, pt_module **children)
{
    if (n < 0 || (n > 0 && !children))
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_%s: bad child count %d", def->type_name,
                              n);
    pt_module *m = pt_nn_module_new(def, NULL);
    if (!m) {
        free_children(0, n, children);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "%d", i);
        if (!children[i]) {
            /* a NULL child is usually a failed constructor: keep its error, as ops keep the
             * error of a failed call whose NULL they are given */
            if (pt_last_status() == PT_OK)
                pti_error(PT_ERR_NULL, "%s: child %d is NULL", def->type_name, i);
            free_children(i + 1, n, children);
            pt_nn_free(m);
            return NULL;
        }
        if (pt_nn_add(m, name, children[i]) != PT_OK) {
            free_children(i + 1, n, children);
            pt_nn_free(m);
            return NULL;
        }
    }
    return m;
}

pt_module *pt_nn_sequential(int n, pt_module **children)
{
    return indexed_container(&sequential_def, n, children);
}

pt_module *pt_nn_module_list(int n, pt_module **children)
{
    return indexed_container(&module_list_def, n, children);
}

pt_status pt_nn_sequential_append(pt_module *seq, pt_module *child)
{
    if (!seq) {
        pt_nn_free(child);
        return pti_error(PT_ERR_NULL, "pt_nn_sequential_append: container is NULL");
    }
    char name[16];
    snprintf(name, sizeof(name), "%d", seq->n_children);
    return pt_nn_add(seq, name, child);
}

pt_module *pt_nn_module_dict(int n, const char *const *names, pt_module **children)
{
    if (n < 0 || (n > 0 && (!children || !names)))
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_module_dict: bad child count %d", n);
    pt_module *m = pt_nn_module_new(&module_dict_def, NULL);
    if (!m) {
        free_children(0, n, children);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (pt_nn_add(m, names[i], children[i]) != PT_OK) {
            free_children(i + 1, n, children);
            pt_nn_free(m);
            return NULL;
        }
    }
    return m;
}

/* ---- repr --------------------------------------------------------------------------------------
 */

static void sb_indent(pti_strbuf *sb, int depth)
{
    for (int i = 0; i < depth; i++)
        pti_strbuf_puts(sb, "  ");
}

/* Children print as "(name): Repr" indented one level deeper, as PyTorch's _addindent does. */
static void module_repr(pti_strbuf *sb, const pt_module *m, int depth)
{
    char extra[512] = "";
    if (m->def.extra_repr)
        m->def.extra_repr(m, extra, sizeof(extra));
    pti_strbuf_puts(sb, m->def.type_name);
    pti_strbuf_puts(sb, "(");
    if (m->n_children == 0 || depth >= PTI_NN_MAX_DEPTH) {
        pti_strbuf_puts(sb, extra);
        pti_strbuf_puts(sb, ")");
        return;
    }
    pti_strbuf_puts(sb, "\n");
    if (extra[0]) {
        sb_indent(sb, depth + 1);
        pti_strbuf_puts(sb, extra);
        pti_strbuf_puts(sb, "\n");
    }
    for (int i = 0; i < m->n_children; i++) {
        sb_indent(sb, depth + 1);
        pti_strbuf_puts(sb, "(");
        pti_strbuf_puts(sb, m->children[i].name);
        pti_strbuf_puts(sb, "): ");
        module_repr(sb, m->children[i].m, depth + 1);
        pti_strbuf_puts(sb, "\n");
    }
    sb_indent(sb, depth);
    pti_strbuf_puts(sb, ")");
}

char *pt_nn_to_string(const pt_module *m)
{
    if (!m)
        return pti_error_null(PT_ERR_NULL, "pt_nn_to_string: module is NULL");
    pti_strbuf sb = {0};
    module_repr(&sb, m, 0);
    char *s = pti_strbuf_take(&sb);
    if (!s)
        return pti_error_null(PT_ERR_OOM, "pt_nn_to_string: out of memory");
    return s;
}

void pt_nn_print(const pt_module *m)
{
    char *s = pt_nn_to_string(m);
    if (s) {
        puts(s);
        free(s);
    }
}
