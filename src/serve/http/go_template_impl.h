/* Internals of the Go text/template subset (go_template.h), shared by the parser
 * (go_template.c) and the executor (go_template_exec.c): the parse tree and the arena that
 * owns it. */
#ifndef PT_SERVE_GO_TEMPLATE_IMPL_H
#define PT_SERVE_GO_TEMPLATE_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "go_template.h"

/* Bump allocator: every allocation lives until the arena is freed; zero-filled. */
typedef struct gt_arena_blk gt_arena_blk;
typedef struct gt_arena {
    gt_arena_blk *head;
} gt_arena;

void *gt_arena_alloc(gt_arena *a, size_t n);
char *gt_arena_strndup(gt_arena *a, const char *s, size_t n);
void gt_arena_free(gt_arena *a);

typedef enum gt_arg_kind {
    GA_FIELD, /* .A.B: idents relative to dot */
    GA_VAR,   /* $x.A.B: name, then idents */
    GA_DOT,
    GA_NIL,
    GA_BOOL,
    GA_NUM,
    GA_STR,
    GA_FUNC, /* an identifier naming a function */
    GA_PIPE, /* ( pipeline ), then idents when followed by .A.B (a chain) */
} gt_arg_kind;

typedef struct gt_pipe gt_pipe;

typedef struct gt_arg {
    gt_arg_kind kind;
    int line;
    int seq;          /* pre-order position in Ollama's deleteNode walk (0 = not walked) */
    const char *name; /* variable ("$x", "$") or function name */
    const char **idents;
    int nidents;
    bool b;
    bool is_int;
    long long i;
    double f;
    const char *s;
    size_t slen;
    gt_pipe *pipe;
} gt_arg;

typedef struct gt_cmd {
    gt_arg **args;
    int nargs;
} gt_cmd;

struct gt_pipe {
    int line;
    int seq;
    bool is_assign;
    int ndecl;
    const char *decl[2];
    gt_cmd **cmds;
    int ncmds;
};

typedef enum gt_node_kind {
    GN_LIST,
    GN_TEXT,
    GN_ACTION,
    GN_IF,
    GN_RANGE,
    GN_WITH,
    GN_BREAK,
    GN_CONTINUE
} gt_node_kind;

typedef struct gt_node gt_node;
struct gt_node {
    gt_node_kind kind;
    int line;
    int seq;
    /* GN_TEXT */
    const char *text;
    size_t tlen;
    /* GN_ACTION, GN_IF, GN_RANGE, GN_WITH */
    gt_pipe *pipe;
    gt_node *list, *else_list; /* GN_LIST nodes; else_list may be NULL */
    int branch_seq;
    /* GN_LIST */
    gt_node **kids;
    int nkids;
};

struct pti_gotmpl {
    gt_arena arena;
    gt_node *root;
    int response_cut_seq; /* seq of the first .Response field in walk order, 0 if none */
};

/* Executes root with dot = data; cut_seq > 0 drops every walked node after that position
 * (Ollama's cut after {{ .Response }} for the last turn of a legacy template). */
char *gt_execute(const pti_gotmpl *t, const cJSON *data, int cut_seq, size_t *out_len);

/* Whether name is a function the executor provides. */
bool gt_is_builtin(const char *name);

#endif
