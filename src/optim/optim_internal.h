/* Internal optimizer base shared by every algorithm in src/optim/: the pt_optim struct,
 * parameter groups, per-parameter state, and the description (pti_optim_def) an algorithm
 * fills in so the base can validate options, expose hyperparameters by PyTorch name, step,
 * and write/read torch's state-dict layout.
 *
 * Writing an optimizer: an options struct in include/prometorch/optim.h; in src/optim/<x>.c a
 * table of its hyperparameters (pti_hparam, in torch's param_groups key order), a table of its
 * state entries (pti_state_entry, in torch's state key order), a check_opts function, an
 * init_state function (allocates buffers with pti_optim_state_zeros on the first step) and an
 * update function (one parameter); then a static const pti_optim_def and two constructors
 * that call pti_optim_new. Algorithms with whole-optimizer state (LBFGS) set `step` instead of
 * `update` and keep their data in pt_optim.impl (freed by free_impl), and may override the
 * state-dict callbacks. */
#ifndef PT_OPTIM_INTERNAL_H
#define PT_OPTIM_INTERNAL_H

#include "../core/internal.h"
#include "../ops/optim.h"
#include "prometorch/optim.h"

/* ---- hyperparameters ---------------------------------------------------------------------- */

typedef enum pti_hp_kind {
    PTI_HP_FLOAT,     /* double field, saved as a Python float */
    PTI_HP_NUMBER,    /* double field whose torch default is an int literal (weight_decay=0):
                       * saved as an int when integral, else a float */
    PTI_HP_BOOL,      /* bool field */
    PTI_HP_INT,       /* int64_t field (LBFGS max_iter) */
    PTI_HP_PAIR,      /* double[2] field, saved as a tuple (betas, etas, step_sizes) */
    PTI_HP_OPT_FLOAT, /* double field where NAN means None, saved as float/None */
    PTI_HP_OPT_INT,   /* int64_t field where < 0 means None (LBFGS max_eval) */
    PTI_HP_STR,       /* const char * field (static string or NULL = None) */
    PTI_HP_NONE,      /* no field: always None (foreach) */
    PTI_HP_FALSE,     /* no field: always False (capturable, differentiable, fused) */
} pti_hp_kind;

/* One key of a param group: its torch name, kind and offset in the options struct. */
typedef struct pti_hparam {
    const char *name;
    pti_hp_kind kind;
    size_t offset; /* offsetof(pt_x_opts, field); unused for PTI_HP_NONE/FALSE */
} pti_hparam;

/* ---- per-parameter state -------------------------------------------------------------------- */

#define PTI_OPTIM_MAX_BUFS 4
#define PTI_OPTIM_MAX_SCALARS 4

/* State of one parameter. `initialized` is false until its first step (torch has no entry for
 * it in optimizer.state until then). Buffers are owned references (untracked by scopes). */
typedef struct pti_param_state {
    bool initialized;
    double step;                          /* torch's state['step'] */
    double scalar[PTI_OPTIM_MAX_SCALARS]; /* other scalar state (NAdam mu_product) */
    pt_tensor *buf[PTI_OPTIM_MAX_BUFS];   /* tensors shaped like the parameter, NULL = absent */
} pti_param_state;

typedef enum pti_state_kind {
    PTI_ST_STEP_TENSOR, /* state.step as a float32 0-dim tensor (Adam, Adagrad, NAdam, ...) */
    PTI_ST_STEP_INT,    /* state.step as a Python int (RMSprop, Adadelta in 1.13) */
    PTI_ST_SCALAR,      /* state.scalar[index] as a float32 0-dim tensor */
    PTI_ST_BUF,         /* state.buf[index]; omitted when NULL */
    PTI_ST_BUF_OR_NONE, /* state.buf[index]; None when NULL (SGD momentum_buffer) */
} pti_state_kind;

/* One key of a parameter's state dict, in torch's order. */
typedef struct pti_state_entry {
    const char *name;
    pti_state_kind kind;
    int index; /* buf / scalar slot */
} pti_state_entry;

/* ---- groups and the optimizer ------------------------------------------------------------- */

/* An extra numeric key of a group (set by pt_optim_set_option, e.g. "initial_lr"). */
typedef struct pti_group_extra {
    char *name;
    double v;
    bool is_int;
} pti_group_extra;

typedef struct pti_optim_group {
    void *opts; /* def->opts_size bytes: this group's options struct */
    int n;
    pt_tensor **params;     /* owned references */
    pti_param_state *state; /* n entries */
    int n_extra;
    pti_group_extra *extra;
} pti_optim_group;

typedef struct pti_optim_def pti_optim_def;

struct pt_optim {
    const pti_optim_def *def;
    void *defaults; /* the constructor's options (add_param_group with NULL opts) */
    int n_groups;
    pti_optim_group *groups;
    void *impl; /* algorithm-owned data (LBFGS), freed by def->free_impl */
};

struct pti_optim_def {
    const char *name; /* torch class name: "Adam" */
    size_t opts_size; /* sizeof(pt_adam_opts) */
    int n_hparams;
    const pti_hparam *hparams; /* torch's param_groups key order ("params" is added last) */
    int n_state;
    const pti_state_entry *state; /* torch's state key order */
    /* Validates an options struct; `op` names the caller for the message
     * ("pt_optim_adam: Invalid learning rate: -1"). */
    pt_status (*check_opts)(const char *op, const void *opts);
    /* true: state is created for every parameter when it joins the optimizer (torch's
     * Adagrad fills it in __init__), so it is in the state dict before any step. */
    bool eager_state;
    /* Allocates p's state on its first step, or when it joins the optimizer with eager_state
     * (s->initialized is set by the base after). */
    pt_status (*init_state)(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s);
    /* Updates one parameter p (with gradient g) in place; called under no_grad. */
    pt_status (*update)(pt_optim *o, const void *opts, pt_tensor *p, const pt_tensor *g,
                        pti_param_state *s);
    /* Optional whole-step override (LBFGS): replaces the per-parameter loop. closure may be
     * NULL (plain pt_optim_step). Called with grad mode as the caller has it. */
    pt_status (*step)(pt_optim *o, double (*closure)(void *user), void *user, double *loss);
    /* Optional: frees o->impl. */
    void (*free_impl)(void *impl);
    /* Optional state-dict overrides for one parameter's state (group g, index i in it, global
     * index gi). save sets *out to a dict (new reference) or NULL for "no entry". load gets
     * the saved entry (NULL when absent); it runs after every group check passed. */
    pt_status (*save_param_state)(pt_optim *o, int group, int i, int gi, pt_value **out);
    pt_status (*load_param_state)(pt_optim *o, int group, int i, const pt_value *st);
    /* Optional: whether buffer `index` must be in a loaded parameter state under the group's
     * options (Adam's max_exp_avg_sq only with amsgrad). NULL: every PTI_ST_BUF is needed.
     * Step and scalar entries are always needed; PTI_ST_BUF_OR_NONE never is. */
    bool (*buf_needed)(const void *opts, int index);
};

/* Builds an optimizer with one group of n params and the given options (validated with
 * def->check_opts; `op` names the public constructor in messages). */
pt_optim *pti_optim_new(const pti_optim_def *def, const char *op, int n, pt_tensor *const *params,
                        const void *opts);
/* Same over a module's parameters. */
pt_optim *pti_optim_new_module(const pti_optim_def *def, const char *op, pt_module *m,
                               const void *opts);

/* A zero-filled tensor shaped like p (its dtype and device), owned by the caller as a plain
 * reference (not tracked by any scope): store it in a state buf. NULL on error. */
pt_tensor *pti_optim_state_zeros(const pt_tensor *p);
/* Same, filled with v. */
pt_tensor *pti_optim_state_full(const pt_tensor *p, double v);
/* Same, a copy of src. */
pt_tensor *pti_optim_state_clone(const pt_tensor *src);
/* The common init_state: s->step = 0 and s->buf[0..n_bufs) zero-filled like p. PT_OK, or the
 * allocation's error. */
pt_status pti_optim_init_zero_bufs(const pt_tensor *p, int n_bufs, pti_param_state *s);

/* Fused updates: an algorithm asks pti_optim_kernel_applies(PTI_OP_optim_<x>, p, g, ...) and
 * runs pti_optim_kernel (src/ops/optim.h) with its pti_optim_<x>_params; when the kernel does
 * not apply (another dtype or layout, or the parameter's backend lacks the slot) it takes its
 * generic path from public ops below. A new fused update is a PT_OP(optim_<x>) line in
 * src/ops/optim.def, its pti_optim_<x>_params in src/ops/optim_params.h and its kernels in
 * src/backends/<device>/optim*.c; the generic path stays, as every backend's fallback. */

/* The generic path's temporaries: out-of-place results released by the caller. For an
 * in-place "dst = src" with dst a state buffer: pt_copy_ then release. */
pt_status pti_optim_assign(pt_tensor *dst, pt_tensor *src_owned);

/* Generic path, in place: avg = beta * avg + (1 - beta) * x (torch's mul_(beta).add_(x,
 * alpha=1 - beta): exp_avg, square_avg of the gradient, ...). */
pt_status pti_optim_ema_(pt_tensor *avg, const pt_tensor *x, double beta);
/* Same with x * x (torch's mul_(beta).addcmul_(x, x, value=1 - beta)): exp_avg_sq, ... */
pt_status pti_optim_ema_sq_(pt_tensor *avg, const pt_tensor *x, double beta);

/* Generic path: the gradient as most algorithms first transform it, a new reference:
 * d = maximize ? -g : g; if weight_decay != 0: d = d + weight_decay * p. NULL on error. */
pt_tensor *pti_optim_generic_grad(const pt_tensor *p, const pt_tensor *g, bool maximize,
                                  double weight_decay);

/* Message helpers for check_opts (return PT_ERR_INVALID_ARG with torch's wording). */
pt_status pti_optim_check_nonneg(const char *op, const char *what, double v);
pt_status pti_optim_check_beta(const char *op, int index, double v);
/* Both betas in [0, 1), index 0 first. */
pt_status pti_optim_check_betas(const char *op, const double betas[2]);
/* Adam's checks in torch's order: lr >= 0, eps >= 0, betas in [0, 1), weight_decay >= 0
 * (Adam, AdamW, Adamax, NAdam, RAdam, Lamb). */
pt_status pti_optim_check_adam_like(const char *op, double lr, double eps, const double betas[2],
                                    double weight_decay);

#endif
