/* The JSON-schema compiler of the JSON constraint (json_constraint.h): turns the supported
 * subset of a schema into the node graph of json_constraint_internal.h, refusing every
 * keyword outside the subset (PT_ERR_UNSUPPORTED) and every malformed or unsatisfiable schema
 * (PT_ERR_INVALID_ARG) with a message naming the keyword and where it is.
 *
 * Steps: compile the tree (each $ref target once, memoised by its cJSON node, so recursion
 * becomes a cycle through an alias node); resolve aliases; flatten nested unions; check that
 * every node can produce a finite value (a cycle of required properties cannot). Property
 * order follows llama.cpp's json-schema-to-grammar (what Ollama uses): required properties
 * first, then optional ones, each group in the order of `properties`. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "../../core/utf8.h"
#include "json_constraint.h"
#include "json_constraint_internal.h"

#define MAX_SCHEMA_NESTING 128

typedef struct ref_memo {
    const cJSON *target;
    int32_t node;
} ref_memo;

typedef struct ctx {
    jc_schema *s;
    const cJSON *root;
    ref_memo *memo;
    int n_memo, cap_memo;
    int nesting;
    char path[256]; /* where in the schema we are, for messages */
} ctx;

static const char *const annotations[] = {"title",   "description", "default", "examples",
                                          "$schema", "$id",         "format",  "$comment",
                                          "$defs",   "definitions"};

static bool is_annotation(const char *k)
{
    for (size_t i = 0; i < sizeof annotations / sizeof annotations[0]; i++) {
        if (strcmp(k, annotations[i]) == 0) {
            return true;
        }
    }
    return false;
}

static bool is_supported_keyword(const char *k)
{
    static const char *const kw[] = {"type",  "properties", "required", "additionalProperties",
                                     "items", "minItems",   "maxItems", "enum",
                                     "const", "anyOf",      "oneOf",    "$ref"};
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++) {
        if (strcmp(k, kw[i]) == 0) {
            return true;
        }
    }
    return is_annotation(k);
}

/* Sets the error and returns false. */
static bool fail(pt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(pt_status st, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pti_error(st, "%s", msg);
    return false;
}

static const char *where(const ctx *c)
{
    return c->path[0] ? c->path : "the schema root";
}

/* Appends "/seg" to the path; returns the old length to restore. */
static size_t path_push(ctx *c, const char *seg)
{
    size_t old = strlen(c->path);
    snprintf(c->path + old, sizeof c->path - old, "/%s", seg);
    return old;
}

static void path_pop(ctx *c, size_t old)
{
    c->path[old] = '\0';
}

static int32_t new_node(ctx *c)
{
    jc_schema *s = c->s;
    if (s->n_nodes >= JC_MAX_NODES) {
        pti_error(PT_ERR_UNSUPPORTED, "json schema: more than %d nodes", JC_MAX_NODES);
        return -1;
    }
    if (s->n_nodes == s->cap_nodes) {
        int32_t cap = s->cap_nodes ? s->cap_nodes * 2 : 16;
        jc_node *n = pti_realloc(s->nodes, (size_t)cap * sizeof *n);
        if (!n) {
            pti_error(PT_ERR_OOM, "json schema: out of memory");
            return -1;
        }
        s->nodes = n;
        s->cap_nodes = cap;
    }
    jc_node *n = &s->nodes[s->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = JN_TYPED;
    n->types = JT_ALL;
    n->any_object = true;
    n->items = 0;
    n->max_items = UINT32_MAX;
    return s->n_nodes++;
}

/* The JSON text of a scalar value (cJSON's unformatted printing: the canonical form that
 * generated text must equal). */
static bool lit_from_value(ctx *c, const cJSON *v, jc_lit *out)
{
    if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) {
        pti_error(PT_ERR_INVALID_ARG, "json schema: a number out of range at %s", where(c));
        return false;
    }
    char *p = cJSON_PrintUnformatted(v);
    if (!p) {
        pti_error(PT_ERR_OOM, "json schema: out of memory");
        return false;
    }
    size_t len = strlen(p);
    if (len > JC_MAX_LIT_LEN || pti_utf8_invalid_at(p, len) != len) {
        pti_error(PT_ERR_INVALID_ARG, "json schema: a value at %s is %s", where(c),
                  len > JC_MAX_LIT_LEN ? "longer than 4096 bytes" : "not valid UTF-8");
        cJSON_free(p);
        return false;
    }
    out->text = pti_malloc(len + 1);
    if (!out->text) {
        cJSON_free(p);
        pti_error(PT_ERR_OOM, "json schema: out of memory");
        return false;
    }
    memcpy(out->text, p, len + 1);
    out->len = (uint32_t)len;
    cJSON_free(p);
    return true;
}

static bool lit_from_key(ctx *c, const char *key, jc_lit *out)
{
    cJSON *s = cJSON_CreateString(key);
    if (!s) {
        pti_error(PT_ERR_OOM, "json schema: out of memory");
        return false;
    }
    bool ok = lit_from_value(c, s, out);
    cJSON_Delete(s);
    return ok;
}

static int32_t compile(ctx *c, const cJSON *j);

/* ---- keywords ------------------------------------------------------------------------------- */

static uint8_t type_bit(const char *name)
{
    static const struct {
        const char *name;
        uint8_t bit;
    } t[] = {{"object", JT_OBJECT}, {"array", JT_ARRAY},     {"string", JT_STRING},
             {"number", JT_NUMBER}, {"integer", JT_INTEGER}, {"boolean", JT_BOOLEAN},
             {"null", JT_NULL}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (strcmp(name, t[i].name) == 0) {
            return t[i].bit;
        }
    }
    return 0;
}

static bool parse_type(ctx *c, const cJSON *type, uint8_t *mask)
{
    *mask = 0;
    if (cJSON_IsString(type)) {
        *mask = type_bit(type->valuestring);
    } else if (cJSON_IsArray(type) && cJSON_GetArraySize(type) > 0) {
        const cJSON *e;
        cJSON_ArrayForEach(e, type)
        {
            uint8_t b = cJSON_IsString(e) ? type_bit(e->valuestring) : 0;
            if (!b) {
                *mask = 0;
                break;
            }
            *mask |= b;
        }
    }
    if (!*mask) {
        pti_error(PT_ERR_INVALID_ARG,
                  "json schema: 'type' at %s must be one of object, array, string, number, "
                  "integer, boolean, null or a non-empty array of them",
                  where(c));
        return false;
    }
    return true;
}

/* A non-negative integer keyword (minItems, maxItems). */
static bool parse_count(ctx *c, const cJSON *v, const char *kw, uint32_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) ||
        !isfinite(v->valuedouble)) {
        pti_error(PT_ERR_INVALID_ARG, "json schema: '%s' at %s must be a non-negative integer", kw,
                  where(c));
        return false;
    }
    *out = v->valuedouble >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)v->valuedouble;
    return true;
}

static bool value_has_type(const cJSON *v, const jc_lit *lit, uint8_t types)
{
    if (cJSON_IsString(v)) {
        return types & JT_STRING;
    }
    if (cJSON_IsBool(v)) {
        return types & JT_BOOLEAN;
    }
    if (cJSON_IsNull(v)) {
        return types & JT_NULL;
    }
    if (types & JT_NUMBER) {
        return true;
    }
    if (!(types & JT_INTEGER)) {
        return false;
    }
    for (uint32_t i = 0; i < lit->len; i++) { /* an integer's text: digits and a sign */
        if (lit->text[i] != '-' && (lit->text[i] < '0' || lit->text[i] > '9')) {
            return false;
        }
    }
    return true;
}

static uint8_t type_of_value(const cJSON *v)
{
    return cJSON_IsString(v) ? JT_STRING
           : cJSON_IsBool(v) ? JT_BOOLEAN
           : cJSON_IsNull(v) ? JT_NULL
                             : JT_NUMBER;
}

/* enum / const: the values' JSON texts, kept when they have one of the node's types. */
static bool compile_enum(ctx *c, int32_t idx, const cJSON *en, const cJSON *cn, bool typed)
{
    if (en && cn) {
        return fail(PT_ERR_UNSUPPORTED,
                    "json schema: 'enum' together with 'const' at %s is not supported", where(c));
    }
    const char *kw = en ? "enum" : "const";
    if (en && (!cJSON_IsArray(en) || cJSON_GetArraySize(en) == 0)) {
        return fail(PT_ERR_INVALID_ARG, "json schema: 'enum' at %s must be a non-empty array",
                    where(c));
    }
    int n = en ? cJSON_GetArraySize(en) : 1;
    if (n > JC_MAX_LITS) {
        return fail(PT_ERR_UNSUPPORTED,
                    "json schema: 'enum' at %s has more than %d values (not supported)", where(c),
                    JC_MAX_LITS);
    }
    jc_lit *lits = pti_calloc((size_t)n, sizeof *lits);
    if (!lits) {
        return fail(PT_ERR_OOM, "json schema: out of memory");
    }
    c->s->nodes[idx].lits = lits;
    uint8_t types = c->s->nodes[idx].types, seen = 0;
    const cJSON *v = en ? en->child : cn;
    for (int i = 0; i < n; i++, v = v->next) {
        if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
            return fail(PT_ERR_UNSUPPORTED,
                        "json schema: '%s' of objects or arrays at %s is not supported", kw,
                        where(c));
        }
        jc_lit lit;
        if (!lit_from_value(c, v, &lit)) {
            return false;
        }
        bool dup = false;
        for (int k = 0; k < c->s->nodes[idx].n_lits; k++) {
            dup |= lits[k].len == lit.len && memcmp(lits[k].text, lit.text, lit.len) == 0;
        }
        if (dup || !value_has_type(v, &lit, types)) {
            free(lit.text);
            continue;
        }
        seen |= type_of_value(v);
        lits[c->s->nodes[idx].n_lits++] = lit;
    }
    if (c->s->nodes[idx].n_lits == 0) {
        return fail(PT_ERR_INVALID_ARG, "json schema: no '%s' value at %s has the schema's 'type'",
                    kw, where(c));
    }
    if (!typed) {
        c->s->nodes[idx].types = seen;
    }
    return true;
}

static bool compile_properties(ctx *c, int32_t idx, const cJSON *props, const cJSON *req)
{
    if (!cJSON_IsObject(props)) {
        return fail(PT_ERR_INVALID_ARG, "json schema: 'properties' at %s must be an object",
                    where(c));
    }
    if (req && !cJSON_IsArray(req)) {
        return fail(PT_ERR_INVALID_ARG, "json schema: 'required' at %s must be an array", where(c));
    }
    int n = cJSON_GetArraySize(props);
    if (n > JC_MAX_PROPS) {
        return fail(PT_ERR_UNSUPPORTED,
                    "json schema: more than %d 'properties' at %s (not supported)", JC_MAX_PROPS,
                    where(c));
    }
    const cJSON *r;
    cJSON_ArrayForEach(r, req)
    {
        if (!cJSON_IsString(r)) {
            return fail(PT_ERR_INVALID_ARG,
                        "json schema: 'required' at %s must hold property names", where(c));
        }
        if (!cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
            return fail(PT_ERR_INVALID_ARG,
                        "json schema: required property '%s' at %s is not in 'properties'",
                        r->valuestring, where(c));
        }
    }
    jc_prop *p = pti_calloc(n ? (size_t)n : 1, sizeof *p);
    if (!p) {
        return fail(PT_ERR_OOM, "json schema: out of memory");
    }
    c->s->nodes[idx].props = p;
    /* two passes: required properties, then optional ones (llama.cpp's order) */
    for (int pass = 0; pass < 2; pass++) {
        const cJSON *e;
        cJSON_ArrayForEach(e, props)
        {
            bool required = false;
            cJSON_ArrayForEach(r, req)
            {
                required |= strcmp(r->valuestring, e->string) == 0;
            }
            if (required != (pass == 0)) {
                continue;
            }
            if (cJSON_GetObjectItemCaseSensitive(props, e->string) != e) {
                return fail(PT_ERR_INVALID_ARG,
                            "json schema: property '%.100s' at %s is listed twice", e->string,
                            where(c));
            }
            jc_prop *q = &p[c->s->nodes[idx].n_props++];
            q->required = required;
            q->node = -1;
            if (!lit_from_key(c, e->string, &q->key)) {
                return false;
            }
            char seg[160];
            snprintf(seg, sizeof seg, "properties/%.100s", e->string);
            size_t old = path_push(c, seg);
            int32_t child = compile(c, e);
            path_pop(c, old);
            if (child < 0) {
                return false;
            }
            c->s->nodes[idx].props[c->s->nodes[idx].n_props - 1].node = child;
        }
    }
    return true;
}

static bool compile_object(ctx *c, int32_t idx, const cJSON *j)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(j, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(j, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(j, "additionalProperties");
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl)) {
        return fail(PT_ERR_INVALID_ARG,
                    "json schema: 'additionalProperties' at %s must be a boolean or a schema",
                    where(c));
    }
    bool addl_false = cJSON_IsFalse(addl);
    if (props) {
        if (addl && !addl_false) {
            return fail(PT_ERR_UNSUPPORTED,
                        "json schema: 'additionalProperties' other than false with "
                        "'properties' at %s is not supported",
                        where(c));
        }
        c->s->nodes[idx].any_object = false;
        return compile_properties(c, idx, props, req);
    }
    if (req && cJSON_GetArraySize(req) > 0) {
        return fail(PT_ERR_UNSUPPORTED,
                    "json schema: 'required' without 'properties' at %s is not supported",
                    where(c));
    }
    if (cJSON_IsObject(addl)) {
        return fail(PT_ERR_UNSUPPORTED,
                    "json schema: 'additionalProperties' as a schema at %s is not supported",
                    where(c));
    }
    c->s->nodes[idx].any_object = !addl_false; /* additionalProperties false: only {} */
    return true;
}

static bool compile_array(ctx *c, int32_t idx, const cJSON *j)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(j, "minItems");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(j, "maxItems");
    uint32_t lo = 0, hi = UINT32_MAX;
    if ((mn && !parse_count(c, mn, "minItems", &lo)) ||
        (mx && !parse_count(c, mx, "maxItems", &hi))) {
        return false;
    }
    if (lo > hi) {
        return fail(PT_ERR_INVALID_ARG,
                    "json schema: 'minItems' %u is more than 'maxItems' %u at %s", lo, hi,
                    where(c));
    }
    c->s->nodes[idx].min_items = lo;
    c->s->nodes[idx].max_items = hi;
    if (items) {
        if (cJSON_IsArray(items)) {
            return fail(PT_ERR_UNSUPPORTED,
                        "json schema: 'items' as an array (tuples) at %s is not supported",
                        where(c));
        }
        size_t old = path_push(c, "items");
        int32_t child = compile(c, items);
        path_pop(c, old);
        if (child < 0) {
            return false;
        }
        c->s->nodes[idx].items = child;
    }
    return true;
}

/* The keywords other than annotations next to `kw` (for $ref / anyOf, which stand alone). */
static const char *other_keyword(const cJSON *j, const char *kw)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, j)
    {
        if (strcmp(e->string, kw) != 0 && !is_annotation(e->string)) {
            return e->string;
        }
    }
    return NULL;
}

/* "#", "#/$defs/NAME", "#/definitions/NAME" (NAME with JSON-pointer escapes ~0 ~1). */
static const cJSON *resolve_ref(ctx *c, const char *ref)
{
    if (strcmp(ref, "#") == 0) {
        return c->root;
    }
    const char *name = NULL, *section = NULL;
    if (strncmp(ref, "#/$defs/", 8) == 0) {
        section = "$defs";
        name = ref + 8;
    } else if (strncmp(ref, "#/definitions/", 14) == 0) {
        section = "definitions";
        name = ref + 14;
    }
    if (!name || !*name || strchr(name, '/')) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "json schema: '$ref' \"%.200s\" at %s is not supported (only #, "
                  "#/$defs/NAME and #/definitions/NAME)",
                  ref, where(c));
        return NULL;
    }
    char decoded[512];
    size_t n = 0;
    for (const char *p = name; *p && n + 1 < sizeof decoded; p++) {
        if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
            decoded[n++] = p[1] == '0' ? '~' : '/';
            p++;
        } else {
            decoded[n++] = *p;
        }
    }
    decoded[n] = '\0';
    const cJSON *defs = cJSON_GetObjectItemCaseSensitive(c->root, section);
    const cJSON *t = cJSON_IsObject(defs) ? cJSON_GetObjectItemCaseSensitive(defs, decoded) : NULL;
    if (!t) {
        pti_error(PT_ERR_INVALID_ARG, "json schema: '$ref' \"%.200s\" at %s names no definition",
                  ref, where(c));
    }
    return t;
}

static int32_t compile_ref(ctx *c, const cJSON *target)
{
    for (int i = 0; i < c->n_memo; i++) {
        if (c->memo[i].target == target) {
            return c->memo[i].node;
        }
    }
    if (c->n_memo == c->cap_memo) {
        int cap = c->cap_memo ? c->cap_memo * 2 : 8;
        ref_memo *m = pti_realloc(c->memo, (size_t)cap * sizeof *m);
        if (!m) {
            pti_error(PT_ERR_OOM, "json schema: out of memory");
            return -1;
        }
        c->memo = m;
        c->cap_memo = cap;
    }
    /* an alias node standing for the target, registered before compiling it (recursion) */
    int32_t alias = new_node(c);
    if (alias < 0) {
        return -1;
    }
    c->memo[c->n_memo++] = (ref_memo){target, alias};
    int32_t t = compile(c, target);
    if (t < 0) {
        return -1;
    }
    c->s->nodes[alias].kind = JN_ALIAS;
    c->s->nodes[alias].target = t;
    return alias;
}

static int32_t compile_union(ctx *c, const cJSON *j, const char *kw)
{
    const cJSON *alts = cJSON_GetObjectItemCaseSensitive(j, kw);
    if (!cJSON_IsArray(alts) || cJSON_GetArraySize(alts) == 0) {
        pti_error(PT_ERR_INVALID_ARG, "json schema: '%s' at %s must be a non-empty array", kw,
                  where(c));
        return -1;
    }
    int n = cJSON_GetArraySize(alts);
    if (n > PTI_JSON_MAX_ALTS) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "json schema: '%s' at %s has more than %d alternatives (not supported)", kw,
                  where(c), PTI_JSON_MAX_ALTS);
        return -1;
    }
    int32_t idx = new_node(c);
    if (idx < 0) {
        return -1;
    }
    int32_t *a = pti_calloc((size_t)n, sizeof *a);
    if (!a) {
        pti_error(PT_ERR_OOM, "json schema: out of memory");
        return -1;
    }
    c->s->nodes[idx].kind = JN_UNION;
    c->s->nodes[idx].alts = a;
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, alts)
    {
        char seg[64];
        snprintf(seg, sizeof seg, "%s/%d", kw, i);
        size_t old = path_push(c, seg);
        int32_t child = compile(c, e);
        path_pop(c, old);
        if (child < 0) {
            return -1;
        }
        c->s->nodes[idx].alts[i++] = child;
        c->s->nodes[idx].n_alts = i;
    }
    return idx;
}

static int32_t compile_typed(ctx *c, const cJSON *j)
{
    int32_t idx = new_node(c);
    if (idx < 0) {
        return -1;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(j, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(j, "const");
    uint8_t types = JT_ALL;
    if (type) {
        if (!parse_type(c, type, &types)) {
            return -1;
        }
    } else if (cJSON_GetObjectItemCaseSensitive(j, "properties") ||
               cJSON_GetObjectItemCaseSensitive(j, "additionalProperties")) {
        types = JT_OBJECT; /* as llama.cpp: an untyped schema with properties is an object */
    } else if (cJSON_GetObjectItemCaseSensitive(j, "items") ||
               cJSON_GetObjectItemCaseSensitive(j, "minItems") ||
               cJSON_GetObjectItemCaseSensitive(j, "maxItems")) {
        types = JT_ARRAY;
    }
    c->s->nodes[idx].types = types;
    if ((en || cn) && !compile_enum(c, idx, en, cn, type != NULL)) {
        return -1;
    }
    if ((types & JT_OBJECT) && !compile_object(c, idx, j)) {
        return -1;
    }
    if ((types & JT_ARRAY) && !compile_array(c, idx, j)) {
        return -1;
    }
    return idx;
}

/* Compiles one schema; returns its node (an alias for a $ref) or -1 with the error set. */
static int32_t compile(ctx *c, const cJSON *j)
{
    if (cJSON_IsTrue(j)) {
        return 0;
    }
    if (cJSON_IsFalse(j)) {
        pti_error(PT_ERR_INVALID_ARG, "json schema: the schema false at %s matches nothing",
                  where(c));
        return -1;
    }
    if (!cJSON_IsObject(j)) {
        pti_error(PT_ERR_INVALID_ARG, "json schema: the schema at %s must be an object", where(c));
        return -1;
    }
    if (++c->nesting > MAX_SCHEMA_NESTING) {
        pti_error(PT_ERR_INVALID_ARG, "json schema: nested deeper than %d at %s",
                  MAX_SCHEMA_NESTING, where(c));
        return -1;
    }
    int32_t r = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, j)
    {
        if (!is_supported_keyword(e->string)) {
            pti_error(PT_ERR_UNSUPPORTED, "json schema: keyword '%.100s' at %s is not supported",
                      e->string, where(c));
            goto out;
        }
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(j, "$ref");
    const char *kw = ref                                            ? "$ref"
                     : cJSON_GetObjectItemCaseSensitive(j, "anyOf") ? "anyOf"
                     : cJSON_GetObjectItemCaseSensitive(j, "oneOf") ? "oneOf"
                                                                    : NULL;
    const char *other = kw ? other_keyword(j, kw) : NULL;
    if (other) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "json schema: '%s' together with '%.100s' at %s is not supported", kw, other,
                  where(c));
    } else if (ref) {
        if (!cJSON_IsString(ref)) {
            pti_error(PT_ERR_INVALID_ARG, "json schema: '$ref' at %s must be a string", where(c));
        } else {
            const cJSON *t = resolve_ref(c, ref->valuestring);
            r = t ? compile_ref(c, t) : -1;
        }
    } else if (kw) {
        r = compile_union(c, j, kw);
    } else {
        r = compile_typed(c, j);
    }
out:
    c->nesting--;
    return r;
}

/* ---- after compiling: aliases, unions, satisfiability --------------------------------------- */

static int32_t resolve_alias(const jc_schema *s, int32_t x)
{
    for (int32_t steps = 0; steps <= s->n_nodes; steps++) {
        if (s->nodes[x].kind != JN_ALIAS) {
            return x;
        }
        x = s->nodes[x].target;
    }
    return -1;
}

static bool resolve_all_aliases(jc_schema *s)
{
    int32_t bad = 0;
    s->root = resolve_alias(s, s->root);
    bad |= s->root < 0;
    for (int32_t i = 0; i < s->n_nodes; i++) {
        jc_node *n = &s->nodes[i];
        if (n->kind == JN_ALIAS) {
            continue;
        }
        n->items = resolve_alias(s, n->items);
        bad |= n->items < 0;
        for (int32_t k = 0; k < n->n_props; k++) {
            n->props[k].node = resolve_alias(s, n->props[k].node);
            bad |= n->props[k].node < 0;
        }
        for (int32_t k = 0; k < n->n_alts; k++) {
            n->alts[k] = resolve_alias(s, n->alts[k]);
            bad |= n->alts[k] < 0;
        }
    }
    if (bad) {
        pti_error(PT_ERR_INVALID_ARG,
                  "json schema: a cycle of '$ref's that never reaches a schema");
    }
    return !bad;
}

static void collect_alts(const jc_schema *s, int32_t u, uint8_t *seen, int32_t *out, int32_t *n,
                         int32_t cap)
{
    seen[u] = 1;
    const jc_node *nd = &s->nodes[u];
    for (int32_t k = 0; k < nd->n_alts; k++) {
        int32_t a = nd->alts[k];
        if (seen[a]) {
            continue;
        }
        if (s->nodes[a].kind == JN_UNION) {
            collect_alts(s, a, seen, out, n, cap);
        } else {
            seen[a] = 1;
            if (*n < cap) {
                out[*n] = a;
            }
            (*n)++;
        }
    }
}

/* Replaces each union's alternatives by the non-union nodes they reach. */
static bool flatten_unions(jc_schema *s)
{
    uint8_t *seen = pti_malloc((size_t)s->n_nodes);
    if (!seen) {
        return fail(PT_ERR_OOM, "json schema: out of memory");
    }
    int32_t flat[PTI_JSON_MAX_ALTS];
    bool ok = true;
    for (int32_t i = 0; i < s->n_nodes && ok; i++) {
        jc_node *nd = &s->nodes[i];
        if (nd->kind != JN_UNION) {
            continue;
        }
        memset(seen, 0, (size_t)s->n_nodes);
        int32_t n = 0;
        collect_alts(s, i, seen, flat, &n, PTI_JSON_MAX_ALTS);
        if (n == 0) {
            ok = fail(PT_ERR_INVALID_ARG, "json schema: an anyOf/oneOf whose alternatives "
                                          "only refer back to it");
        } else if (n > PTI_JSON_MAX_ALTS) {
            ok = fail(PT_ERR_UNSUPPORTED,
                      "json schema: an anyOf/oneOf with more than %d alternatives once "
                      "nested ones are expanded (not supported)",
                      PTI_JSON_MAX_ALTS);
        } else {
            int32_t *a = pti_realloc(nd->alts, (size_t)n * sizeof *a);
            if (!a) {
                ok = fail(PT_ERR_OOM, "json schema: out of memory");
                break;
            }
            memcpy(a, flat, (size_t)n * sizeof *a);
            nd->alts = a;
            nd->n_alts = n;
        }
    }
    free(seen);
    return ok;
}

/* Can node i produce a finite value, given what is known to be producible? */
static bool producible(const jc_schema *s, const uint8_t *prod, int32_t i)
{
    const jc_node *n = &s->nodes[i];
    if (n->kind == JN_UNION) {
        for (int32_t k = 0; k < n->n_alts; k++) {
            if (prod[n->alts[k]]) {
                return true;
            }
        }
        return false;
    }
    if (n->n_lits > 0 || (n->types & ~(JT_OBJECT | JT_ARRAY))) {
        return true;
    }
    if (n->types & JT_ARRAY && (n->min_items == 0 || prod[n->items])) {
        return true;
    }
    if (n->types & JT_OBJECT) {
        if (n->any_object) {
            return true;
        }
        for (int32_t k = 0; k < n->n_props; k++) {
            if (n->props[k].required && !prod[n->props[k].node]) {
                return false;
            }
        }
        return true;
    }
    return false;
}

static bool check_satisfiable(const jc_schema *s)
{
    uint8_t *prod = pti_calloc((size_t)s->n_nodes, 1);
    if (!prod) {
        return fail(PT_ERR_OOM, "json schema: out of memory");
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t i = 0; i < s->n_nodes; i++) {
            if (!prod[i] && s->nodes[i].kind != JN_ALIAS && producible(s, prod, i)) {
                prod[i] = 1;
                changed = true;
            }
        }
    }
    bool ok = true;
    for (int32_t i = 0; i < s->n_nodes; i++) {
        ok &= s->nodes[i].kind == JN_ALIAS || prod[i];
    }
    free(prod);
    if (!ok) {
        pti_error(PT_ERR_INVALID_ARG, "json schema: a recursive schema that can never end (a "
                                      "cycle of required properties or items never reaches a "
                                      "value)");
    }
    return ok;
}

jc_schema *jc_schema_compile(const cJSON *schema)
{
    jc_schema *s = pti_calloc(1, sizeof *s);
    if (!s) {
        return pti_error_null(PT_ERR_OOM, "json schema: out of memory");
    }
    ctx c = {.s = s, .root = schema};
    if (new_node(&c) != 0) { /* node 0: any value */
        jc_schema_free(s);
        return NULL;
    }
    s->root = schema ? compile(&c, schema) : 0;
    free(c.memo);
    if (s->root < 0 || !resolve_all_aliases(s) || !flatten_unions(s) || !check_satisfiable(s)) {
        jc_schema_free(s);
        return NULL;
    }
    return s;
}

void jc_schema_free(jc_schema *s)
{
    if (!s) {
        return;
    }
    for (int32_t i = 0; i < s->n_nodes; i++) {
        jc_node *n = &s->nodes[i];
        for (int32_t k = 0; k < n->n_props; k++) {
            free(n->props[k].key.text);
        }
        for (int32_t k = 0; k < n->n_lits; k++) {
            free(n->lits[k].text);
        }
        free(n->props);
        free(n->lits);
        free(n->alts);
    }
    free(s->nodes);
    free(s);
}
