/* Private to json_constraint*.c: the compiled form of a JSON schema that the matcher in
 * json_constraint.c walks, built by the compiler in json_constraint_schema.c.
 *
 * A schema becomes a graph of nodes. Node 0 is "any JSON value" (no schema, `{}`, `true`,
 * an array without `items`, the values of a free-form object). $ref targets are compiled once
 * and shared, so recursive schemas are cycles in the graph. After compilation no node is an
 * alias and every union's alternatives are non-union nodes (nested unions flattened). */
#ifndef PT_SERVE_JSON_CONSTRAINT_INTERNAL_H
#define PT_SERVE_JSON_CONSTRAINT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Bounds that keep the matcher's state fixed-size (bit masks of 64 candidates). */
#define JC_MAX_PROPS 64     /* properties of one object */
#define JC_MAX_LITS 64      /* enum values of one node */
#define JC_MAX_NODES 8192   /* nodes of one schema */
#define JC_MAX_LIT_LEN 4096 /* bytes of one key or enum value as JSON text */

enum {
    JT_OBJECT = 1 << 0,
    JT_ARRAY = 1 << 1,
    JT_STRING = 1 << 2,
    JT_NUMBER = 1 << 3,  /* any number */
    JT_INTEGER = 1 << 4, /* a number without fraction or exponent */
    JT_BOOLEAN = 1 << 5,
    JT_NULL = 1 << 6,
    JT_ALL = 0x7f,
};

enum { JN_TYPED, JN_UNION, JN_ALIAS };

typedef struct jc_lit {
    char *text; /* JSON text of a key (with its quotes) or of an enum value */
    uint32_t len;
} jc_lit;

typedef struct jc_prop {
    jc_lit key;
    int32_t node;
    bool required;
} jc_prop;

typedef struct jc_node {
    uint8_t kind;    /* JN_* */
    uint8_t types;   /* JT_* mask (JN_TYPED) */
    bool any_object; /* objects take any keys with any values */
    int32_t items;   /* node of array items */
    uint32_t min_items, max_items;
    jc_prop *props; /* n_props, in generation order: required first, then optional */
    int32_t n_props;
    jc_lit *lits; /* enum/const values; n_lits == 0: no enum */
    int32_t n_lits;
    int32_t *alts; /* JN_UNION: alternatives */
    int32_t n_alts;
    int32_t target; /* JN_ALIAS: the node this one stands for (removed after compiling) */
} jc_node;

typedef struct jc_schema {
    jc_node *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t root;
} jc_schema;

/* Compiles schema (NULL: any value). NULL with the error set (PT_ERR_UNSUPPORTED,
 * PT_ERR_INVALID_ARG, PT_ERR_OOM). */
jc_schema *jc_schema_compile(const cJSON *schema);
void jc_schema_free(jc_schema *s);

#endif
