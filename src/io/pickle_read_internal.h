/* Shared state of the restricted pickle VM (pickle_read.h): the machine itself lives in
 * pickle_read.c (the opcode loop, stack, memo, containers, tracking, final validation), the
 * operand readers and scalar opcodes in pickle_read_operands.c, the allowlisted callables in
 * pickle_read_globals.c (what REDUCE / NEWOBJ / BUILD may do, tensor rebuilds).
 * Internal; never installed. */
#ifndef PT_IO_PICKLE_READ_INTERNAL_H
#define PT_IO_PICKLE_READ_INTERNAL_H

#include "pickle_read.h"

/* Opcode bytes. */
enum {
    OP_MARK = '(',
    OP_STOP = '.',
    OP_POP = '0',
    OP_POP_MARK = '1',
    OP_DUP = '2',
    OP_FLOAT = 'F',
    OP_INT = 'I',
    OP_BININT = 'J',
    OP_BININT1 = 'K',
    OP_LONG = 'L',
    OP_BININT2 = 'M',
    OP_NONE = 'N',
    OP_PERSID = 'P',
    OP_BINPERSID = 'Q',
    OP_REDUCE = 'R',
    OP_STRING = 'S',
    OP_BINSTRING = 'T',
    OP_SHORT_BINSTRING = 'U',
    OP_UNICODE = 'V',
    OP_BINUNICODE = 'X',
    OP_APPEND = 'a',
    OP_BUILD = 'b',
    OP_GLOBAL = 'c',
    OP_DICT = 'd',
    OP_EMPTY_DICT = '}',
    OP_APPENDS = 'e',
    OP_GET = 'g',
    OP_BINGET = 'h',
    OP_INST = 'i',
    OP_LONG_BINGET = 'j',
    OP_LIST = 'l',
    OP_EMPTY_LIST = ']',
    OP_OBJ = 'o',
    OP_PUT = 'p',
    OP_BINPUT = 'q',
    OP_LONG_BINPUT = 'r',
    OP_SETITEM = 's',
    OP_TUPLE = 't',
    OP_EMPTY_TUPLE = ')',
    OP_SETITEMS = 'u',
    OP_BINFLOAT = 'G',
    OP_PROTO = 0x80,
    OP_NEWOBJ = 0x81,
    OP_EXT1 = 0x82,
    OP_EXT2 = 0x83,
    OP_EXT4 = 0x84,
    OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86,
    OP_TUPLE3 = 0x87,
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a,
    OP_LONG4 = 0x8b,
    OP_BINBYTES = 'B',
    OP_SHORT_BINBYTES = 'C',
    OP_SHORT_BINUNICODE = 0x8c,
    OP_BINUNICODE8 = 0x8d,
    OP_BINBYTES8 = 0x8e,
    OP_EMPTY_SET = 0x8f,
    OP_ADDITEMS = 0x90,
    OP_FROZENSET = 0x91,
    OP_NEWOBJ_EX = 0x92,
    OP_STACK_GLOBAL = 0x93,
    OP_MEMOIZE = 0x94,
    OP_FRAME = 0x95,
    OP_BYTEARRAY8 = 0x96,
    OP_NEXT_BUFFER = 0x97,
    OP_READONLY_BUFFER = 0x98,
};

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
    /* Nesting depth as the VM built it: 1 + the deepest child's depth at the moment that child
     * went in. A child that grows later (reached again through the memo) does not raise it, so
     * this is a lower bound of the true depth that the final pass computes exactly; it exists
     * so that bottom-up nesting is refused at the level past the limit, not at STOP. */
    uint32_t depth;
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

    uint64_t work; /* items and bytes copied out of existing values (pk_charge) */
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
/* Accounts for copying `units` items or bytes out of values already built (OrderedDict(d),
 * set(l), BUILD merges, _codecs.encode): a memoized value copied again and again would
 * otherwise make memory quadratic in the input. The budget is 4 units per input byte plus
 * 2^20; false (PT_ERR_FORMAT) beyond it. */
bool pk_charge(pk_vm *vm, uint64_t units);
/* Appends to a list (takes item). */
bool pk_list_append(pk_vm *vm, pt_value *list, pt_value *item);

/* Operand readers and scalar opcodes (pickle_read_operands.c). Each returns false with the
 * error set (truncation, malformed text, integers beyond int64, invalid UTF-8). */
bool pk_push(pk_vm *vm, pt_value *v); /* takes v (NULL: the error of its constructor) */
bool pk_need_bytes(pk_vm *vm, uint64_t n);
bool pk_rd_uint(pk_vm *vm, int n, uint64_t *out);      /* little-endian, n bytes */
bool pk_rd_line(pk_vm *vm, const char **s, size_t *n); /* text up to '\n' (excluded) */
bool pk_text_int(pk_vm *vm, bool allow_l, int64_t *out);
bool pk_push_long_bytes(pk_vm *vm, uint64_t n); /* LONG1 / LONG4 payload */
bool pk_valid_utf8(const uint8_t *s, size_t n);
bool pk_push_utf8(pk_vm *vm, uint64_t n);
bool pk_push_bytes(pk_vm *vm, uint64_t n);
bool pk_push_py2_str(pk_vm *vm, const uint8_t *s, size_t n);
bool pk_op_string(pk_vm *vm);
bool pk_op_unicode(pk_vm *vm);
bool pk_op_float_text(pk_vm *vm);
bool pk_op_binfloat(pk_vm *vm);

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
