/* Ollama's prompt assembly over a model's Go template (Ollama's server/prompt.go, routes.go and
 * template/template.go): the Values a template sees for /api/chat and /api/generate, the
 * collation of messages, and the legacy turn-by-turn rendering of templates that do not use
 * .Messages. Checked byte for byte against Go's text/template running a reproduction of
 * Ollama's Execute (tests/fixtures/gotmpl/gen_expected.go).
 *
 * Values (Go field names; every field present, as in a Go struct):
 *   Messages   [{Role, Content, Thinking, Images: nil, ToolCalls, ToolName, ToolCallID}];
 *              ToolCalls nil or [{ID, Function: {Index, Name, Arguments}}]; Arguments is an
 *              object (a string holding JSON is parsed; anything else becomes {}) and prints
 *              as JSON, as Ollama's ToolCallFunctionArguments does
 *   Tools      nil or [{Type, Items, Function: {Name, Description, Parameters: {Type, Defs,
 *              Items, Required, Properties: {name: {Type, Items, Description, Enum}}}}}];
 *              printing or `json` of the array, a tool, .Function or a property gives the JSON
 *              of Ollama's api types: struct field order, omitempty fields dropped, and only the
 *              fields api.Tool has (a property's "default", "minimum", ... are gone, as when
 *              Ollama unmarshals the request); a bare function object (no "function" member)
 *              is taken as the function of a "function" tool
 *   System     all system messages' contents joined by "\n\n" (chat with .Messages), or the
 *              turn's system message (legacy)
 *   Prompt, Response   the turn's user and assistant messages (legacy only; Response "" for
 *              the last turn and in the .Messages path)
 *   Think, ThinkLevel (""), IsThinkSet
 *
 * Chat (pti_ollama_chat_prompt): default_system (the model's system layer, nullable) is
 * prepended as a system message when the first message is not a system message (Ollama's
 * ChatHandler). Messages are collated as template.collate: consecutive messages of the same
 * role (tool results excepted) are merged, contents joined by "\n\n". When the template
 * references .Messages it is executed once. Otherwise it is executed turn by turn: a system
 * message after a user or assistant message, or a user message after an assistant message,
 * closes a turn (System, Prompt, Response); the outputs are concatenated, and the last turn is
 * executed with the template cut after its first {{ .Response }} field (Ollama's deleteNode:
 * every node after it in the walk order is dropped), so the prompt ends where the model
 * continues. Tool messages are skipped in legacy templates.
 *
 * Not done here (the caller's job): truncating old messages to fit num_ctx (Ollama's
 * chatPrompt drops messages from the start, keeping system messages and the last one), images.
 *
 * Ownership: messages and tools (cJSON arrays, nullable = none) are borrowed; the returned
 * prompt is malloc'd (free()), *out_len (when not NULL) its length. Thread-safe for a shared
 * template. Errors (NULL): PT_ERR_NULL for a NULL template; PT_ERR_INVALID_ARG "invalid message
 * format: ..." for messages that are not an array of objects with a string role and a string
 * (or null/absent) content, "invalid tools: ..." for tools that are not an array of objects,
 * and the template's execution errors ("template: line N: ..."); PT_ERR_OOM. */
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

/* /api/generate (not raw), as Ollama's GenerateHandler: with a non-empty suffix and prompt the
 * template is executed with only {Prompt, Suffix, Response: ""} (fill in the middle; no
 * System; a suffix with an empty prompt renders no messages at all);
 * otherwise as a chat of [system (when non-empty), user prompt], so a .Messages template sees
 * Messages and a legacy one System/Prompt with the cut after .Response. system is the
 * request's system or else the model's (the caller picks); each argument nullable = "". */
char *pti_ollama_generate_prompt(const pti_gotmpl *t, const char *system, const char *prompt,
                                 const char *suffix, size_t *out_len);

#endif
