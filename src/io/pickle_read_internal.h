/* Shared state of the restricted pickle VM (pickle_read.h): the machine itself lives in
 * pickle_read.c (opcodes, stack, memo, container tracking, final validation), the allowlisted
 * callables in pickle_read_globals.c (what REDUCE / NEWOBJ / BUILD may do, tensor rebuilds).
 * Internal; never installed. */
#ifndef PT_IO_PICKLE_READ_INTERNAL_H
#define PT_IO_PICKLE_READ_INTERNAL_H

#include "pickle_read.h"

/* Flags of a container the VM made (pk_track.flags). */
enum {
    PK_ODICT = 1,     /* an OrderedDict / Counter result: BUILD drops its attributes */
    PK_STUB = 2,      /* an inert stand-in for an object of a class outside the allowlist */
    PK_SET = 4,       /* a set, kept as a dict {item: None} until the end, then a list */
    PK_FROZENSET = 8, /* same, immutable */
    PK_REACHED = 16,  /* reachable from the result (final pass only) */
};

/* One container made by the VM. Every one holds a reference here, so that on failure all of
 * them can be emptied (breaking any reference cycle) before they are released. */
typedef struct pk_track {
    pt_value *v;
    uint32_t flags;
    uint32_t tuple_size; /* tuples: nodes of the tuple counted through nested tuples (capped) */
} pk_track;

typedef struct pk_vm {
    const uint8_t *data;
    size_t len, pos;
    const pti_unpickle_opts *o;
    const char *what;
    size_t op_pos; /* offset of the opcode being run, for messages */
    uint8_t op;

    pt_value **stack;
    size_t sp, stack_cap;
    size_t *marks; /* stack heights at each MARK */
    size_t nmarks, marks_cap;
    pt_value **memo; /* dense, indexed by memo key (bounded by the input length) */
    size_t memo_cap, memo_count;

    pk_track *tr;
    size_t ntr, tr_cap;
    uint32_t *map; /* open addressing pointer -> tracker index + 1 (0: empty) */
    size_t map_cap;

    uint64_t work; /* items copied by BUILD merges and the like, against a budget */
} pk_vm;

/* PT_ERR_FORMAT "<what>: pickle: <OPNAME>: <message> at byte <offset>"; returns false. */
bool pk_fail(pk_vm *vm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* PT_ERR_UNSUPPORTED "<what>: pickle: <message>"; returns false. */
bool pk_unsupported(pk_vm *vm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Name of the opcode being run ("REDUCE"). */
const char *pk_op_name(uint8_t op);

/* A new container of `kind` registered with the tracker under `flags`; NULL on OOM. */
pt_value *pk_new_container(pk_vm *vm, pt_value_kind kind, uint32_t flags);
/* The tracker entry of v, or NULL when the VM did not make it. */
pk_track *pk_tracked(pk_vm *vm, const pt_value *v);
/* dict[key] = val for a dict the VM made (takes both references); false with the error set. */
bool pk_dict_set(pk_vm *vm, pt_value *dict, pt_value *key, pt_value *val);
/* dict["key"] = val (takes val). */
bool pk_dict_set_str(pk_vm *vm, pt_value *dict, const char *key, pt_value *val);
/* Appends to a list (takes item). */
bool pk_list_append(pk_vm *vm, pt_value *list, pt_value *item);

/* ---- pickle_read_globals.c -------------------------------------------------------------- */

/* Reacts to GLOBAL / STACK_GLOBAL of "module.name": false (error set) for the modules that
 * are refused outright (os, sys, subprocess, builtins.eval, ...). */
bool pk_global_check(pk_vm *vm, const char *name);
/* REDUCE: func(*args); *out gets a new reference. Borrowed func and args. */
bool pk_call(pk_vm *vm, const pt_value *func, const pt_value *args, pt_value **out);
/* NEWOBJ / NEWOBJ_EX: cls.__new__(cls, *args) (kwargs may be NULL). */
bool pk_newobj(pk_vm *vm, const pt_value *cls, const pt_value *args, const pt_value *kwargs,
               pt_value **out);
/* BUILD: inst.__setstate__(state) for the kinds of instance the VM knows. */
bool pk_build(pk_vm *vm, pt_value *inst, pt_value *state);
/* The str a global left in the result becomes ("torch.float32"), or false (error set) when
 * it may not appear there. */
bool pk_global_final(pk_vm *vm, const pt_value *g);

#endif
