/* A subset of Go's text/template, enough to run the prompt templates Ollama ships in its model
 * stores (the "template" layer of an Ollama model, e.g. qwen2.5's, llama3.2's, mistral's,
 * gemma3's; Ollama's template/template.go executes them with text/template plus a few funcs).
 *
 * Supported: text and actions {{ }} with the {{- and -}} trim markers (a '-' trims when it is
 * followed/preceded by an ASCII space, exactly as Go: all adjacent white space, newlines
 * included); comments (a slash-star comment filling an action); pipelines with '|' chaining; fields .A.B, $.A, $x.A
 * (a field looks up the key "A" of a cJSON object; a missing key is <no value>/nil, as Go's
 * map lookup); the dot; variables $x := p and $x = p (scoped like Go: to the end of the
 * enclosing block); if / else if / else / end; range over arrays, objects (sorted by key,
 * as Go ranges over maps) and integers, with $i, $e := and with else; with / else with / else;
 * break / continue inside range; literals: strings "..." (Go escapes) and `raw`, integers,
 * floats, true, false, nil; parenthesised pipelines.
 * Functions: and, or (short-circuit, returning the deciding operand as Go), not, len, index,
 * slice, eq (several right operands), ne, lt, le, gt, ge (Go semantics for basic kinds:
 * integers and floats compare numerically, strings bytewise; comparing unlike kinds is an
 * error "incompatible types for comparison"), print, println, printf (verbs %s %d %v %q %f
 * %g %x %%, with widths), html and js are not provided (text/template templates of Ollama do
 * not use them), urlquery neither. Ollama's funcs: json (compact JSON, Go's json.Marshal
 * with HTML escaping of <, >, & as \u003c \u003e \u0026), currentDate ("2006-01-02" of
 * today, UTC), toTypeScriptType (the TypeScript-ish type string Ollama's tools renderer
 * uses: "string", "number", "string[]", "\"a\" | \"b\"" for an enum, ...).
 * Not supported (PT_ERR_UNSUPPORTED naming it at parse time): define, template, block, call,
 * method calls with arguments, range over channels/funcs, field access on non-objects is an
 * execution error as in Go.
 *
 * Values: the data is cJSON. An object or array node whose valuestring is set (cJSON frees it
 * with the node) prints, with {{ }}, print and json, as that text: this is how the Go types
 * of Ollama's Values that have a String()/MarshalJSON method (api.Tools, api.Tool, tool-call
 * arguments) print their JSON form while templates access their fields by Go name.
 * Numbers print as Go prints the type Ollama would hold: a number
 * without a fraction prints as an integer ("3"), others with Go's %v of a float64 (shortest
 * repr, "0.5", "1e+21"). Other arrays print as [a b c] and objects as map[k:v ...] (Go's %v, keys sorted).
 * Truthiness as Go: false, 0, nil, "" and empty arrays/objects are false.
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
 * (index out of range, wrong argument types, field of a non-object, incompatible comparison,
 * range nesting deeper than 100, output beyond 64 MiB), PT_ERR_OOM. */
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
