/* Constrained generation of JSON (issue 7: Ollama's `format: "json"` and a JSON-schema
 * `format`, OpenAI's response_format json_object / json_schema): an incremental matcher that
 * says whether some bytes may extend the text generated so far and still lead to a valid JSON
 * document (RFC 8259) -- or to one valid against a JSON schema -- so the sampler can refuse a
 * token before it is taken instead of checking the output afterwards.
 *
 * The matcher is a pushdown automaton over bytes (a stack of containers and, with a schema,
 * of schema nodes); checking bytes copies nothing but a small fixed state. Schema subset
 * (what structured-output schemas use; anything else is refused at creation with
 * PT_ERR_UNSUPPORTED naming the keyword, never silently ignored):
 *   type (string or array of types: object, array, string, number, integer, boolean, null),
 *   properties, required, additionalProperties (false or absent: with a schema, objects take
 *   exactly the listed properties; required ones must appear; the generated order is the
 *   order of `properties`), items, minItems, maxItems, enum, const (of scalars), anyOf/oneOf
 *   of the above, $ref to #/$defs/x or #/definitions/x, and the annotations title,
 *   description, default, examples, $schema, $id, format (ignored as annotations).
 * Ollama (through llama.cpp's json-schema-to-grammar) also fixes property order to the
 * schema's order, as here.
 *
 * Whitespace: at most a bounded run (PTI_JSON_MAX_WS) between tokens, so a model cannot
 * loop on blanks forever; strings may not contain raw control characters; numbers follow the
 * JSON grammar (no leading zeros, no NaN); nesting depth is bounded (PTI_JSON_MAX_DEPTH).
 * The text must be valid UTF-8. */
#ifndef PT_SERVE_JSON_CONSTRAINT_H
#define PT_SERVE_JSON_CONSTRAINT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "engine.h"

#define PTI_JSON_MAX_DEPTH 64
#define PTI_JSON_MAX_WS 16
#define PTI_JSON_MAX_ALTS 8

typedef struct pti_json_matcher pti_json_matcher;

/* A matcher for any JSON value (schema NULL; Ollama's "json" format takes an object or any
 * value: any value here) or for values valid against schema (borrowed during the call:
 * compiled into the matcher). NULL with the error set: PT_ERR_UNSUPPORTED (a keyword outside
 * the subset), PT_ERR_INVALID_ARG (a malformed schema: wrong types, dangling $ref, cycles that
 * never reach a scalar), PT_ERR_OOM. */
pti_json_matcher *pti_json_matcher_new(const cJSON *schema);
void pti_json_matcher_free(pti_json_matcher *m);

/* Would the text so far followed by bytes[0..n) still be a prefix of a valid document? */
bool pti_json_matcher_allows(const pti_json_matcher *m, const char *bytes, size_t n);
/* Appends bytes (which allows() accepted). */
void pti_json_matcher_advance(pti_json_matcher *m, const char *bytes, size_t n);
/* The text so far is a complete valid document. */
bool pti_json_matcher_complete(const pti_json_matcher *m);
/* Complete, and no byte other than whitespace could follow (an object or array closed, a
 * string or literal finished; a bare number is complete but not done). */
bool pti_json_matcher_done(const pti_json_matcher *m);

/* The engine's constraint interface over a new matcher (takes it over). */
pti_constraint pti_json_constraint(pti_json_matcher *m);

#endif
