/* A subset of Go's text/template, enough to run the prompt templates Ollama ships in its model
 * stores (the "template" layer of an Ollama model, e.g. qwen2.5's, llama3.2's, mistral's,
 * gemma3's; Ollama's template/template.go executes them with text/template plus a few funcs).
 *
 * Supported: text and actions {{ }} with the trim markers "{{- " and " -}}" (the '-' must be
 * followed / preceded by a white space character, as in Go; it trims all adjacent white space,
 * newlines included); comments (a slash-star comment filling an action, trim markers allowed);
 * pipelines chained with '|'; fields .A.B, $.A, $x.A, (pipeline).A (a field looks up the key
 * "A" of a cJSON object); the dot; variables $x := p and $x = p (scoped like Go: to the {{end}}
 * of the enclosing if/range/with); if / else if / else; range over arrays, objects (sorted by
 * key, as Go ranges over maps) and integers (Go 1.22), with $e := / $i, $e := and else;
 * with / else with (Go 1.23) / else; break and continue inside range; literals: "strings"
 * (Go escapes), `raw strings`, 'c' characters, integers (0x, 0o, 0b, _ separators), floats,
 * true, false, nil; parenthesised pipelines.
 * Functions: and, or (short-circuit, returning the deciding operand, as Go 1.18+), not, len,
 * index, slice, eq (several right operands), ne, lt, le, gt, ge (Go's rules for basic kinds:
 * a JSON number without a fraction is an int, others float64; int vs float64 or string vs
 * number is "incompatible types for comparison"; nil equals only nil), print, println,
 * printf (verbs v s d q x X t f e g and %%, flags - + 0, width and precision; a wrong
 * argument prints as Go does, "%!d(string=x)"). Ollama's funcs: json (Go's json.Marshal:
 * compact, map keys sorted, <, >, & as \u003c \u003e \u0026), currentDate and yesterdayDate
 * ("2006-01-02" in local time), toTypeScriptType (of a tool property: its JSON type mapped to
 * TypeScript, "string", "number" (number, integer), "boolean", "any[]", "Record<string, any>",
 * "null", several joined with " | ", "any" otherwise).
 * Not supported: define, template and block (PT_ERR_UNSUPPORTED at parse time); html, js,
 * urlquery and call (PT_ERR_UNSUPPORTED); method calls (the data has no methods: a field given
 * arguments is an execution error, as Go reports for a map).
 *
 * Missing data as Go's map[string]any: a missing key is <no value> and so is a field of it;
 * a field of a JSON null is an error ("nil pointer evaluating interface {}.X"); a field of a
 * string or number is an error. Truthiness as Go: false, 0, nil, "" and empty arrays/objects
 * are false.
 *
 * Printing: strings as they are, integers without decimals ("3"), float64s as Go's %v
 * (shortest, "0.5", "1e+06"), missing/nil as "<no value>" at the top of an action ("<nil>"
 * inside print and containers), arrays as [a b c], objects as map[k:v ...] with sorted keys.
 * An object or array node whose valuestring is set (cJSON frees it with the node) prints, with
 * {{ }}, print and json, as that text: this is how the Go types of Ollama's Values that have a
 * String()/MarshalJSON method (api.Tools, api.Tool, tool-call arguments) print their JSON form
 * while templates access their fields by Go name (ollama_prompt.c builds such values).
 *
 * Limits, so that a template from a request cannot hurt the server: nesting deeper than 200
 * parentheses/blocks is a parse error; an execution that prints more than 64 MiB, makes more
 * than 64 MiB of strings, or takes more than 20 million steps (nodes and range iterations)
 * fails with PT_ERR_INVALID_ARG.
 *
 * Ownership: pti_gotmpl_parse returns a new template freed with pti_gotmpl_free (NULL is a
 * no-op); a parsed template is immutable and may be executed from several threads at once;
 * it does not borrow the source text. Execution output is malloc'd, freed with free(). */
#ifndef PT_SERVE_GO_TEMPLATE_H
#define PT_SERVE_GO_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

typedef struct pti_gotmpl pti_gotmpl;

/* Parses len bytes of template text (need not be NUL-terminated; text may be NULL when len is
 * 0). Errors (NULL): PT_ERR_FORMAT "template: line N: <what>" for a syntax error (unclosed
 * action, unexpected {{end}}, missing {{end}}, bad literal, undefined variable, unknown
 * function ...), PT_ERR_UNSUPPORTED "template: line N: <construct> is not supported" for Go
 * constructs outside the subset, PT_ERR_OOM. */
pti_gotmpl *pti_gotmpl_parse(const char *text, size_t len);

void pti_gotmpl_free(pti_gotmpl *t);

/* Executes t with dot = data (any cJSON value, usually an object; NULL is nil). Returns a new
 * NUL-terminated string (free()), *out_len (when not NULL) its length. Errors (NULL):
 * PT_ERR_INVALID_ARG "template: line N: <what>" for the errors Go raises at execution time
 * (index out of range, wrong argument types, field of a null or a scalar, incompatible
 * comparison, the limits above), PT_ERR_OOM. */
char *pti_gotmpl_execute(const pti_gotmpl *t, const cJSON *data, size_t *out_len);

/* Whether the template mentions the field name anywhere (a field .Name or $.Name or $x.Name
 * anywhere in a chain, e.g. "Tools" for .Tools, "Messages", "Suffix", "Think", "Response").
 * Ollama uses this to derive a model's capabilities (tools, insert, thinking) and whether to
 * render a chat turn by turn. False for NULL arguments. */
bool pti_gotmpl_references(const pti_gotmpl *t, const char *field);

/* Go's json.Marshal of a cJSON value, as the template func json prints it: compact, object
 * keys sorted (Go maps), <, >, & escaped as \u003c \u003e \u0026, integral numbers without
 * a fraction, an object or array with a valuestring printed as that text. Returns a new string
 * (free()), *out_len its length when not NULL; NULL with PT_ERR_OOM. NULL v gives "null". */
char *pti_gotmpl_json(const cJSON *v, size_t *out_len);

/* The text of the first text node inside the first {{ if }} whose condition references field
 * (searching the whole template in order, into nested blocks), as Ollama's tools parser finds
 * the tool-call tag (tools.parseTag: the if over .ToolCalls). Copies at most cap-1 bytes and a
 * NUL into out. False when there is no such if or it holds no text. */
bool pti_gotmpl_first_text_in_if(const pti_gotmpl *t, const char *field, char *out, size_t cap);

#endif
