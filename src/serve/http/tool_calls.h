/* Tool calling for promeserve: rendering tool definitions into a prompt for GGUF models whose
 * chat template is one of our C-coded families (no Ollama Go template), and parsing the tool
 * calls a model writes out of its streamed output.
 *
 * Rendering (pti_chat_render_tools) reproduces the Hugging Face Jinja templates' `tools`
 * branch byte for byte (checked against jinja2 with the real template texts,
 * tests/fixtures/gen_tool_templates.py): Qwen2.5 and Qwen3 (the system turn becomes a
 * "# Tools" block with <tools></tools> holding one JSON definition per line; calls as
 * <tool_call>{"name": ..., "arguments": ...}</tool_call>, results in <tool_response>),
 * Llama 3.1/3.2/3.3 ("Environment: ipython" in the system header; the first message after the
 * system message becomes a user turn listing the tools as indented JSON, tools_in_user_message
 * being the template's default; calls as {"name": ..., "parameters": ...}), Mistral v0.3
 * ([AVAILABLE_TOOLS] [...] before the [INST] of the last user message, and of any earlier user
 * message equal to it, as the template compares dicts; string values of a function inserted
 * unescaped, its "return" key skipped). Tool definitions are written as the templates' tojson
 * writes them (Python json.dumps: ", " and ": " separators, keys in the given order, UTF-8
 * kept; a number without a fraction is written as an integer). Deviations: Llama 3 needs the
 * first message after the system message to be a plain message (the template would take the
 * content of whatever comes first); Mistral needs tools of the form {"function": {...}} (the
 * template reads tool.function).
 *
 * Parsing (pti_tool_parser): a streaming state machine over generated text. Content that can
 * no longer be part of a tool call is released at once; text that may be the start of the open
 * tag is held back; after the open tag, JSON values are collected (string- and escape-aware
 * bracket matching, resumed across pushes) until they parse as complete calls: an object
 * {"name": s, "arguments": {..}} or {"name": s, "parameters": {..}} (or such an object under
 * "function"), or an array of those; several values may follow one tag, separated by white
 * space or commas, and a ']' after calls is skipped (Mistral's "[TOOL_CALLS] [{..}, {..}]").
 * The close tag (when there is one) ends the call block; text that is neither ends it too.
 * White space and separators after calls are dropped; text after a close tag is content again
 * (so "\n" between two <tool_call> blocks is content). Arguments always come out as a JSON
 * object: a string holding an object's JSON is parsed; a missing arguments member gives {}
 * after a real tag. Malformed text after an open tag (JSON that does not parse, or that is not
 * a call, or a string argument that is not an object's JSON, or a call left unfinished at
 * pti_tool_parser_finish) is released as content, tag included. Function names are not
 * checked against the request's tools: like Ollama, a call to an unknown name is returned.
 * With the open tag "{" (Ollama's choice when the template shows no tag: llama3.x), any JSON
 * object in the output is tried as a call (arguments/parameters required then), and released
 * as content when it is not one; text after an unclosed '{' is held until the end.
 *
 * Ownership: a parser is owned by the caller (pti_tool_parser_free; NULL is a no-op); it is
 * not thread-safe, one per generation. Strings returned by rendering are malloc'd (free()). */
#ifndef PT_SERVE_TOOL_CALLS_H
#define PT_SERVE_TOOL_CALLS_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "../../core/strbuf.h"
#include "../llm/chat_template.h"

/* ---- rendering tools for the C-coded chat families --------------------------------------- */

/* Whether pti_chat_render_tools can render tool definitions for the family: QWEN25, QWEN3,
 * LLAMA3 (3.1+), MISTRAL. */
bool pti_chat_family_supports_tools(pti_chat_family f);

/* Like pti_chat_render (same messages, options and errors), with tools_json: a JSON array of
 * tool definitions ({"type": "function", "function": {"name", "description", "parameters"}},
 * as OpenAI and Ollama requests carry them; written as given). tools_json NULL or "[]"
 * renders exactly as pti_chat_render. Errors (NULL): PT_ERR_INVALID_ARG "tools: ..." for
 * tools_json that is not a JSON array of objects and for the deviations above;
 * PT_ERR_UNSUPPORTED "<family> chat template does not support tools" for other families;
 * the family's template exceptions (Llama 3: "This model only supports single tool-calls at
 * once!", ...); PT_ERR_OOM. */
char *pti_chat_render_tools(const pti_chat_template *t, const pti_chat_message *msgs, size_t n,
                            const char *tools_json, bool add_generation_prompt,
                            const pti_chat_opts *opts, size_t *out_len);

/* ---- choosing the tags -------------------------------------------------------------------- */

/* Tool-call tags from an Ollama Go template (len bytes), as Ollama's tools.parseTag: the first
 * text inside the first {{ if }} over .ToolCalls, cut at its first '{', trimmed of white space;
 * "{" when that leaves nothing or the template has no such if (JSON objects are then tried as
 * calls). qwen2.5 -> "<tool_call>", mistral -> "[TOOL_CALLS] [" (the template's text before
 * the '{'), llama3.x -> "{". The close tag is "</x>" for an open tag "<x>" when the template
 * contains "</x>", else "". Writes NUL-terminated tags of at most cap-1 bytes into open_tag
 * and close_tag. False (tags "{" and "") when the template does not parse or a tag does not fit
 * cap; the tags are still usable then. */
bool pti_tool_tags_from_template(const char *go_template, size_t len, char *open_tag,
                                 char *close_tag, size_t cap);

/* Tags for a C-coded family: QWEN25/QWEN3 "<tool_call>" "</tool_call>", MISTRAL "[TOOL_CALLS]"
 * "", LLAMA3 "{" "". False (tags "{" and "") for families without tool support. */
bool pti_tool_tags_for_family(pti_chat_family f, char *open_tag, char *close_tag, size_t cap);

/* ---- parsing calls out of generated text -------------------------------------------------- */

typedef struct pti_tool_parser pti_tool_parser;

/* A growing text buffer the parser appends released content to (the library's pti_strbuf);
 * zero-initialise it, read data[0..len) (NUL-terminated when len > 0), free(data) when done. */
typedef pti_strbuf pti_tool_text;

/* open_tag: non-empty (copied); close_tag: nullable or "" = none (copied). NULL with
 * PT_ERR_INVALID_ARG for an empty or NULL open tag; PT_ERR_OOM. */
pti_tool_parser *pti_tool_parser_new(const char *open_tag, const char *close_tag);

void pti_tool_parser_free(pti_tool_parser *p);

/* Feeds len bytes of generated text. Appends the content released by this piece to content
 * and each completed call to calls (a cJSON array owned by the caller) as Ollama's tool-call
 * object {"function": {"index": k, "name": "...", "arguments": {...}}}, k counting the calls
 * of this parser from 0. False only on PT_ERR_OOM (or PT_ERR_NULL for NULL p/content/calls). */
bool pti_tool_parser_push(pti_tool_parser *p, const char *text, size_t len, pti_tool_text *content,
                          cJSON *calls);

/* End of generation: releases everything held back (a partial tag, an unfinished call) as
 * content, after completing any calls that are whole. The parser may then be reused. */
bool pti_tool_parser_finish(pti_tool_parser *p, pti_tool_text *content, cJSON *calls);

/* Whether the parser is inside a call block (after an open tag) or holding a possible tag;
 * streaming servers may use it to hold back a chunk. */
bool pti_tool_parser_holding(const pti_tool_parser *p);

/* Number of calls completed so far. */
size_t pti_tool_parser_ncalls(const pti_tool_parser *p);

#endif
