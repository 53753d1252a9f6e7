/* PromeTorch values: a Python-like value tree (None, bool, int, float, str, bytes, tensor,
 * list, tuple, dict) used for state dicts, optimizer state and checkpoints (.pt files hold
 * exactly these). Values are reference-counted; a container owns one reference to each item.
 *
 * Ownership: constructors return a new reference. Functions that put a value into a
 * container (pt_value_append, pt_value_dict_set*) take over the caller's reference to the
 * item, also when they fail (the item is then freed). Getters named *_ref return borrowed
 * pointers that stay valid while the container holds them. pt_value_free(NULL) is a no-op.
 * Values are not thread-safe for concurrent mutation; concurrent reads are fine. */
#ifndef PROMETORCH_VALUE_H
#define PROMETORCH_VALUE_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pt_value_kind {
    PT_VALUE_NONE = 0,
    PT_VALUE_BOOL,
    PT_VALUE_INT,   /* int64_t */
    PT_VALUE_FLOAT, /* double */
    PT_VALUE_STR,   /* UTF-8 bytes with a length (may hold NUL), always NUL-terminated too */
    PT_VALUE_BYTES,
    PT_VALUE_TENSOR,
    PT_VALUE_LIST,
    PT_VALUE_TUPLE,
    PT_VALUE_DICT, /* insertion-ordered; keys: none, bool, int, float, str, bytes, tuple */
} pt_value_kind;

typedef struct pt_value pt_value;

/* ---- construction (each returns a new reference, or NULL with the error set on OOM) ------- */

PT_API pt_value *pt_value_none(void);
PT_API pt_value *pt_value_bool(bool b);
PT_API pt_value *pt_value_int(int64_t i);
PT_API pt_value *pt_value_float(double f);
/* A copy of the NUL-terminated string s (NULL gives an error). Not validated as UTF-8. */
PT_API pt_value *pt_value_str(const char *s);
PT_API pt_value *pt_value_strn(const char *s, size_t len);
PT_API pt_value *pt_value_bytes(const void *data, size_t len);
/* Holds its own reference to t (the caller keeps theirs). NULL t propagates the error. */
PT_API pt_value *pt_value_tensor(pt_tensor *t);
PT_API pt_value *pt_value_list(void);
PT_API pt_value *pt_value_tuple(void);
PT_API pt_value *pt_value_dict(void);
/* A tuple of n items, taking over the references in items (NULL entries are an error). */
PT_API pt_value *pt_value_tuple_of(int n, pt_value *const *items);

/* Adds a reference; returns v. */
PT_API pt_value *pt_value_retain(pt_value *v);
/* Drops a reference; the last one frees v and (recursively) its items. NULL is a no-op. */
PT_API void pt_value_free(pt_value *v);

/* ---- containers ----------------------------------------------------------------------------- */

/* Appends item to a list or tuple (takes over the item reference, also on failure). */
PT_API pt_status pt_value_append(pt_value *seq, pt_value *item);
/* Sets dict[key] = val, taking over both references. An existing equal key keeps its
 * position and gets the new value (Python semantics). Unhashable keys (list, dict, tensor)
 * are PT_ERR_INVALID_ARG. */
PT_API pt_status pt_value_dict_set(pt_value *dict, pt_value *key, pt_value *val);
/* dict["key"] = val (takes over val). */
PT_API pt_status pt_value_dict_set_str(pt_value *dict, const char *key, pt_value *val);
/* dict[i] = val for an int key (takes over val). */
PT_API pt_status pt_value_dict_set_int(pt_value *dict, int64_t key, pt_value *val);
/* Removes a key; PT_ERR_INDEX when absent. */
PT_API pt_status pt_value_dict_del_str(pt_value *dict, const char *key);

/* ---- inspection ------------------------------------------------------------------------------ */

/* The kind of v; PT_VALUE_NONE for a NULL pointer too. */
PT_API pt_value_kind pt_value_kind_of(const pt_value *v);
/* "None", "bool", "int", "float", "str", "bytes", "tensor", "list", "tuple", "dict". */
PT_API const char *pt_value_kind_name(pt_value_kind k);
PT_API bool pt_value_is(const pt_value *v, pt_value_kind k);

/* Scalar getters: a kind mismatch returns a status (PT_ERR_DTYPE) and leaves *out alone.
 * as_int accepts bool; as_float accepts bool and int (Python's numeric tower). */
PT_API pt_status pt_value_as_bool(const pt_value *v, bool *out);
PT_API pt_status pt_value_as_int(const pt_value *v, int64_t *out);
PT_API pt_status pt_value_as_float(const pt_value *v, double *out);
/* Borrowed string / bytes and their length (len may be NULL); NULL on a kind mismatch. */
PT_API const char *pt_value_as_str(const pt_value *v, size_t *len);
PT_API const void *pt_value_as_bytes(const pt_value *v, size_t *len);
/* Borrowed tensor; NULL on a kind mismatch. */
PT_API pt_tensor *pt_value_tensor_ref(const pt_value *v);

/* Number of items of a list/tuple/dict, bytes of a str/bytes; -1 for other kinds. */
PT_API int64_t pt_value_len(const pt_value *v);
/* Item i of a list/tuple, or the value of entry i (insertion order) of a dict. Negative i
 * counts from the end. Borrowed; NULL with PT_ERR_INDEX when out of range. */
PT_API pt_value *pt_value_item_ref(const pt_value *v, int64_t i);
/* The key of entry i of a dict. Borrowed. */
PT_API pt_value *pt_value_key_ref(const pt_value *dict, int64_t i);
/* dict lookups, borrowed; NULL (error PT_ERR_INDEX naming the key) when absent. */
PT_API pt_value *pt_value_get_ref(const pt_value *dict, const pt_value *key);
PT_API pt_value *pt_value_get_str_ref(const pt_value *dict, const char *key);
PT_API pt_value *pt_value_get_int_ref(const pt_value *dict, int64_t key);

/* Follows a dotted path from root: "model.fc1.weight". At each dict level the longest
 * remaining dotted prefix that is a str key wins ("fc1.weight" is one key of a state_dict),
 * backtracking to shorter prefixes; a segment applied to a list/tuple is a decimal index; a
 * segment applied to a dict with int keys is tried as an int key. Borrowed; NULL with
 * PT_ERR_INDEX naming the first segment not found. */
PT_API pt_value *pt_value_path_ref(const pt_value *root, const char *path);
/* Follows an explicit key list (each key a str for dicts or a decimal index for lists). */
PT_API pt_value *pt_value_path_keys_ref(const pt_value *root, int n, const char *const *keys);

/* Python equality: same kind (int/float/bool compare numerically as in Python) and equal
 * contents; tensors are equal when they are the same tensor object or share storage, offset,
 * shape, strides and dtype. */
PT_API bool pt_value_equal(const pt_value *a, const pt_value *b);
/* A deep copy of the containers; tensors and scalars are shared (tensor refs added). */
PT_API pt_value *pt_value_copy(const pt_value *v);

/* A Python-repr-like rendering: {'model': {'fc.weight': tensor(float32, [10, 784])}, 'epoch': 3}.
 * Tensors print as dtype and shape only. Returns a malloc'd string (free with free()), or
 * NULL on OOM. max_items > 0 elides longer containers with "...". */
PT_API char *pt_value_to_string(const pt_value *v, int max_items);

#ifdef __cplusplus
}
#endif
#endif
