/* Constrained generation of JSON (issue 7: Ollama's `format: "json"` and a JSON-schema
 * `format`, OpenAI's response_format json_object / json_schema): an incremental matcher that
 * says whether some bytes may extend the text generated so far and still lead to a valid JSON
 * document (RFC 8259) -- or to one valid against a JSON schema -- so the sampler can refuse a
 * token before it is taken instead of checking the output afterwards.
 *
 * The matcher is a pushdown automaton over bytes (a stack of containers and, with a schema,
 * of schema nodes); checking bytes copies nothing but a small fixed state. Schema subset
 * (what structured-output schemas use; anything else is refused at creation with
 * PT_ERR_UNSUPPORTED naming the keyword and where it is, never silently ignored):
 *   type (string or array of types: object, array, string, number, integer, boolean, null;
 *     without `type`, a schema with properties is an object and one with items an array, as
 *     in llama.cpp), properties, required, additionalProperties, items (one schema; tuples
 *     are refused), minItems, maxItems, enum, const (of scalars), anyOf/oneOf of the above,
 *     $ref to #, #/$defs/NAME or #/definitions/NAME (recursion allowed), and the annotations
 *     title, description, default, examples, $schema, $id, $comment, format, $defs,
 *     definitions (ignored).
 * Objects: with `properties`, an object takes exactly the listed properties --
 *   additionalProperties false or absent both mean no others (true or a schema next to
 *   `properties` is refused); required ones must appear, optional ones may be skipped; the
 *   generated order is llama.cpp's json-schema-to-grammar order (what Ollama uses): the
 *   required properties first, then the optional ones, each group in the order of
 *   `properties`. Without `properties`, {"type": "object"} takes any object (as llama.cpp)
 *   and additionalProperties false takes only {}. Keys are matched as their JSON text as
 *   cJSON writes it (UTF-8 as is, only '"', '\' and control characters escaped).
 * enum/const: the generated text must equal one value's JSON text as cJSON writes it (so
 *   "a\u0062" does not match "ab", nor 1.0 match 1); values of a type the schema's `type`
 *   excludes are dropped; objects and arrays are refused.
 * integer: digits with an optional '-' (no fraction or exponent, as llama.cpp).
 * anyOf/oneOf: a union (oneOf's exclusivity is not enforced, as in llama.cpp). The matcher
 *   follows every alternative that still matches; a union may have at most
 *   PTI_JSON_MAX_ALTS alternatives once nested unions and $refs are expanded (more:
 *   PT_ERR_UNSUPPORTED), and at most PTI_JSON_MAX_ALTS readings of the text are followed at
 *   once -- when nested ambiguous unions would need more, the later alternatives are dropped,
 *   so the output is still valid but may not use them.
 * Bounds: 64 properties per object, 64 enum values, 8192 schema nodes, 4096 bytes per key or
 *   enum text, schemas nested 128 deep (beyond: an error at creation).
 *
 * Tokens are allowed as by llama.cpp's grammars/json.gbnf (checked token for token against
 * llama.cpp's grammar sampler on SmolLM2's vocabulary by tests/internal/test_json_constraint.c):
 * Whitespace: `ws ::= | " " | "\n" [ \t]{0,20}`: each gap between tokens (and after the
 * value) holds nothing, one blank, or one newline and at most PTI_JSON_MAX_INDENT blanks or
 * tabs; never '\r'; none before the value (`root ::= object`). So a model cannot fill the
 * gaps with blank lines until num_predict. Strings may not contain raw control characters or
 * DEL (0x7f); escapes are llama.cpp's (\" \\ \b \f \n \r \t \u with four hex digits; not \/), and
 * surrogates written as \u escapes must pair (llama.cpp takes any four hex digits).
 * Numbers follow the JSON grammar (no leading zeros, no NaN) with at most 16 integer digits,
 * as llama.cpp's `[1-9] [0-9]{0,15}`, and at most 16 exponent digits; fraction digits are not
 * bounded (as json.gbnf).
 * json.gbnf's exponent is `[0-9] [1-9]{0,15}`, which refuses a 0 after the first digit (1e10): ours
 * takes it; llama.cpp's schema converter bounds fractions to 16 digits, ours does not. Nesting
 * depth is bounded (PTI_JSON_MAX_DEPTH containers; llama.cpp has no bound). A schema's gaps
 * hold one newline at most, where llama.cpp's schema converter allows two (`"\n"{1,2}`).
 * The text must be valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
 *
 * Threads and memory: a matcher is used by one thread at a time (allows() does not change
 * it). It holds about 9 KB plus the compiled schema; allows() does not allocate (it works on
 * a copy of the live part of the state on the stack, about 9 KB at most) and answers most
 * tokens from the set of possible next bytes recorded by advance(): a scan of SmolLM2's 49k
 * tokens takes about 0.3-1 ms here, Gemma 3's 262k about 2-6 ms (measured by
 * tests/internal/test_json_constraint.c, which prints the figures). */
#ifndef PT_SERVE_JSON_CONSTRAINT_H
#define PT_SERVE_JSON_CONSTRAINT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "../llm/engine.h"

#define PTI_JSON_MAX_DEPTH 64
#define PTI_JSON_MAX_INDENT 20 /* blanks or tabs after the newline of one gap */
#define PTI_JSON_MAX_ALTS 8    /* alternatives of one union; readings followed at once */

typedef struct pti_json_matcher pti_json_matcher;

/* A matcher for any JSON value (schema NULL) or for values valid against schema (borrowed
 * during the call: compiled into the matcher). Ollama's `format: "json"` grammar is
 * `root ::= object` (grammarJSON in Ollama's llm/server.go) and OpenAI's json_object asks for
 * an object too: the schema {"type": "object"} gives exactly that (any object).
 * NULL with the error set: PT_ERR_UNSUPPORTED (a keyword outside the subset or over a bound),
 * PT_ERR_INVALID_ARG (a malformed schema: wrong types, dangling $ref, minItems > maxItems,
 * required names missing from properties, an enum left empty by the type, a recursion that
 * can never end), PT_ERR_OOM. Free with pti_json_matcher_free (NULL is a no-op). */
pti_json_matcher *pti_json_matcher_new(const cJSON *schema);
void pti_json_matcher_free(pti_json_matcher *m);

/* Would the text so far followed by bytes[0..n) still be a prefix of a valid document?
 * n == 0 (a token without text): true unless the matcher is dead. */
bool pti_json_matcher_allows(const pti_json_matcher *m, const char *bytes, size_t n);
/* Appends bytes (which allows() accepted). Bytes that allows() would refuse leave a dead
 * matcher: it then refuses everything, and complete() and done() are false. */
void pti_json_matcher_advance(pti_json_matcher *m, const char *bytes, size_t n);
/* The text so far is a complete valid document. */
bool pti_json_matcher_complete(const pti_json_matcher *m);
/* Complete, and no byte other than whitespace could follow (an object or array closed, a
 * string or literal finished; a bare number is complete but not done). */
bool pti_json_matcher_done(const pti_json_matcher *m);

/* The engine's constraint interface over a new matcher (takes it over: the constraint's free
 * frees it). m NULL gives state NULL: no constraint. */
pti_constraint pti_json_constraint(pti_json_matcher *m);

#endif
