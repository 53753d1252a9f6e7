/* Ollama's prompt assembly over a model's Go template (Ollama's server/prompt.go and
 * template/template.go): the Values a template sees for /api/chat and /api/generate, and the
 * legacy turn-by-turn rendering of templates that do not use .Messages.
 *
 * Values passed to the template (Go field names, as Ollama's template.Values marshals them):
 *   Messages   [{Role, Content, Thinking, ToolCalls, ToolName, ToolCallID, Images: nil}]
 *              ToolCalls = [{Function: {Index, Name, Arguments}}] (Arguments an object; the
 *              template's `json` func prints it in JSON form, lowercase keys as given)
 *   Tools      [{Type, Function: {Name, Description, Parameters: {Type, Defs?, Items?,
 *              Required, Properties: {name: {Type, Items?, Description, Enum?}}}}}]; `json .`
 *              of a tool (or of .Function) prints the request's JSON form ({"type":"function",
 *              "function":{"name":...,"description":...,"parameters":{...}}}), as Ollama's
 *              api.Tool marshals it: we keep both spellings, capitalised keys for field access
 *              and the original lowercase object for json (see ollama_prompt.c).
 *   System     the last system message's content (legacy templates) or ""
 *   Prompt     the last user message (legacy) / the generate prompt
 *   Response   "" (generation continues after it)
 *   Suffix     /api/generate's suffix
 *   Think      whether thinking was requested; IsThinkSet whether "think" was given at all
 *
 * Chat (pti_ollama_chat_prompt): default_system (the model's system layer, nullable) is
 * prepended as a system message when the first message is not a system message (Ollama's
 * ChatHandler). Messages are collated as Ollama's template.collate: consecutive messages of the
 * same role (tool results excepted) are merged with "\n\n" between their contents. When the template references
 * .Messages it is executed once with all messages (System = the contents of all system messages
 * joined by "\n\n"). Otherwise it is executed turn by turn: the messages are
 * collated into (System, Prompt, Response) triples — each user message with the system
 * message(s) before it and the assistant message that follows; the outputs are concatenated;
 * for the last turn Response is "" and the template text after the first {{ .Response }}
 * action is cut off (Ollama's "cut after response" for generation), so the prompt ends where
 * the model continues.
 *
 * Ownership: messages and tools (cJSON arrays, nullable = none) are borrowed; the returned
 * prompt is malloc'd (free()), *out_len (when not NULL) its length. Thread-safe for a shared
 * template. Errors (NULL): PT_ERR_INVALID_ARG for messages that are not an array of objects
 * with a string "role" ("invalid message format" texts), a tools value that is not an array,
 * and the template's execution errors; PT_ERR_OOM. */
#ifndef PT_SERVE_OLLAMA_PROMPT_H
#define PT_SERVE_OLLAMA_PROMPT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "go_template.h"

/* messages: Ollama message objects {role, content, thinking?, tool_calls?
 * [{function:{index?, name, arguments}}], tool_name?, tool_call_id?}; tools: Ollama/OpenAI
 * tool objects {type, function:{name, description, parameters}} (nullable). think_set: the
 * request had "think"; think: its value. */
char *pti_ollama_chat_prompt(const pti_gotmpl *t, const cJSON *messages, const cJSON *tools,
                             const char *default_system, bool think_set, bool think,
                             size_t *out_len);

/* /api/generate: executes the template with System, Prompt, Suffix (each nullable = ""),
 * Response "" and Messages absent; when the template does not reference .Messages nothing is
 * cut; when it does (chat-only templates), the system and prompt are passed as Messages
 * [system?, user] too, as Ollama does for generate. */
char *pti_ollama_generate_prompt(const pti_gotmpl *t, const char *system, const char *prompt,
                                 const char *suffix, size_t *out_len);

#endif
