/* Internal layout of pt_value (include/prometorch/value.h) shared by the value files:
 * value.c (nodes, free, getters, lists), value_dict.c (hashing, equality, dicts, copy),
 * value_path.c (dotted path lookup) and value_repr.c (Python-repr rendering). Never installed. */
#ifndef PT_IO_VALUE_INTERNAL_H
#define PT_IO_VALUE_INTERNAL_H

#include <stdatomic.h>

#include "../core/internal.h"

/* Recursive walks (equal, copy, hash, repr, path) stop with an error below this depth, so a
 * hostile or accidental deep tree cannot overflow the C stack (free is iterative). */
#define PTI_VALUE_MAX_DEPTH 1000

/* Internal-only kinds, never seen by callers of the public API. The pickle reader
 * (pickle_read.c) uses PTI_VALUE_GLOBAL for a pickled global ("module.name" in u.s, laid out
 * like a str) while it runs, and converts or refuses every such node before it returns; a
 * persistent_load callback may meet one inside a persistent id (pti_pickle_global_name). */
#define PTI_VALUE_GLOBAL ((pt_value_kind)64)

typedef struct pti_dict_entry {
    pt_value *key;
    pt_value *val;
    uint64_t hash;
} pti_dict_entry;

struct pt_value {
    atomic_long refcount;
    pt_value_kind kind;
    pt_value *next_dead; /* worklist link used only while pt_value_free tears a tree down */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            char *data; /* NUL-terminated; lives in the same allocation as the node */
            size_t len;
        } s;          /* str, bytes */
        pt_tensor *t; /* one reference taken with pt_retain, dropped with pti_unref */
        struct {
            pt_value **items;
            int64_t len, cap;
        } seq; /* list, tuple */
        struct {
            pti_dict_entry *entries; /* insertion order, no holes */
            int64_t len, cap;
            int64_t *index; /* open addressing: entry number or -1; power-of-2 size */
            int64_t index_cap;
            /* PyTorch's state_dict._metadata as the pickle carried it, reduced to
             * {module prefix: version int} (an OrderedDict's BUILD state); NULL when none.
             * Owned; shared by copies (never changed after the pickle made it). */
            pt_value *meta;
        } dict;
    } u;
};

/* A zeroed node of `kind` with refcount 1 and `extra` bytes after it; NULL with PT_ERR_OOM. */
pt_value *pti_value_node_new(pt_value_kind kind, size_t extra);
/* Grows an array of `elem`-byte items to hold at least `need`; false with PT_ERR_OOM. */
bool pti_value_grow(void **arr, int64_t *cap, int64_t need, size_t elem);
/* PT_ERR_DTYPE "fn: expected <expected>, got <kind of v>". */
pt_status pti_value_kind_error(const char *fn, const char *expected, const pt_value *v);
/* Python hash of a key value (same value for keys that compare equal: 1, 1.0, True).
 * Returns false with PT_ERR_INVALID_ARG for unhashable kinds (list, dict, tensor). */
bool pti_value_hash(const pt_value *v, uint64_t *out, int depth);
/* Entry number of key in dict, or -1. */
int64_t pti_dict_find(const pt_value *dict, const pt_value *key, uint64_t hash);
/* A str value over borrowed bytes, for lookups without allocation (never freed). */
pt_value pti_value_probe_str(const char *s, size_t len);
pt_value pti_value_probe_int(int64_t i);
/* Python repr of a key for error messages: a thread-local buffer (valid until next call). */
const char *pti_value_key_desc(const pt_value *key);

/* Sets d's _metadata (takes meta; NULL clears it). */
void pti_value_dict_set_meta(pt_value *d, pt_value *meta);
/* The "version" _metadata gives the module at `prefix` ("" or "bn", no trailing dot) of a
 * state dict; false when there is none (PyTorch's version None). */
bool pti_value_dict_meta_version(const pt_value *d, const char *prefix, int64_t *version);

#endif
