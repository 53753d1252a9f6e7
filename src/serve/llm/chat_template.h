/* Chat templates of the supported model families (issue 6 item 5): which family a GGUF's
 * `tokenizer.chat_template` (a Jinja string) belongs to, and rendering a conversation into the
 * prompt text that family's template produces, byte for byte as Hugging Face's
 * apply_chat_template (jinja2, trim_blocks + lstrip_blocks) renders it.
 *
 * No Jinja interpreter: each family's template is recognized by distinctive markers and its
 * logic is written out in C (chat_template.c). Families: ChatML (SmolLM2, Qwen2 and other
 * plain <|im_start|> templates, with the template's default system prompt when it has one),
 * Qwen2.5, Qwen3 (with its <think> handling), Llama 3.0, Llama 3.1/3.2/3.3, Mistral [INST]
 * (v0.3 Instruct), Gemma (2/3, <start_of_turn>), Phi-3/3.5, DeepSeek-R1 distills. A template
 * that matches none falls back to a plain "role: content" format with a warning; a file
 * without a template is matched by general.architecture.
 *
 * Differences from running the Jinja template: tool definitions (`tools`) are not rendered
 * here (pti_chat_render_tools in tool_calls.h renders them for Qwen2.5/Qwen3/Llama 3.1+/Mistral);
 * tool-call arguments are inserted as given JSON text (the templates json.dumps a dict);
 * Gemma 2's template rejects a system message, we fold it into the first turn as Gemma 3
 * does; conversations the official templates reject (Mistral and Gemma need alternating
 * user/assistant turns) fail with the template's message, as jinja raises it.
 *
 * Ownership: a pti_chat_template is owned by the caller (pti_chat_template_free); rendered
 * prompts are malloc'd and freed by the caller with free(). Thread safety: a template is
 * immutable after creation and may be used from several threads at once. */
#ifndef PT_SERVE_CHAT_TEMPLATE_H
#define PT_SERVE_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "prometorch/gguf.h"

typedef enum pti_chat_family {
    PTI_CHAT_PLAIN = 0,  /* fallback: "role: content\n" per message, "assistant:" prompt */
    PTI_CHAT_CHATML,     /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2, generic) */
    PTI_CHAT_QWEN25,     /* ChatML + Qwen2.5's default system, tool responses, tool calls */
    PTI_CHAT_QWEN3,      /* ChatML + Qwen3's reasoning (<think>) handling */
    PTI_CHAT_LLAMA3,     /* Llama 3.1/3.2/3.3: system header with knowledge/today dates */
    PTI_CHAT_LLAMA30,    /* Llama 3.0: <|start_header_id|> turns, no system header */
    PTI_CHAT_MISTRAL,    /* [INST] ... [/INST] (Mistral 7B Instruct v0.3 template) */
    PTI_CHAT_GEMMA,      /* <start_of_turn>user/model, system folded into the first turn */
    PTI_CHAT_PHI3,       /* <|system|> <|user|> <|assistant|> ... <|end|> */
    PTI_CHAT_DEEPSEEK_R1 /* <｜User｜> <｜Assistant｜> (DeepSeek-R1-Distill-*) */
} pti_chat_family;

typedef struct pti_chat_template pti_chat_template;

/* One tool call made by an assistant turn. arguments is JSON text, inserted verbatim (the
 * Jinja templates serialize a dict with json.dumps; pass it in that form: ", " and ": "). */
typedef struct pti_chat_tool_call {
    const char *id; /* Mistral needs a 9-character id; others ignore it (nullable) */
    const char *name;
    const char *arguments;
} pti_chat_tool_call;

/* One message. role: "system", "user", "assistant" or "tool" (other roles are passed through
 * where the template prints the role name). content may be NULL (= ""). */
typedef struct pti_chat_message {
    const char *role;
    const char *content;
    const char *reasoning_content; /* Qwen3: an assistant turn's reasoning (nullable) */
    const pti_chat_tool_call *tool_calls;
    size_t n_tool_calls;
    const char *tool_call_id; /* Mistral tool results (nullable) */
} pti_chat_message;

/* Rendering options; the zero value is the templates' defaults. */
typedef struct pti_chat_opts {
    const char *bos_token;   /* text of the BOS token, as HF passes bos_token (NULL = "").
                              * Templates that print it (Llama 3, Mistral, Gemma, DeepSeek)
                              * then need tokenizing without adding another BOS */
    const char *eos_token;   /* text of the EOS token (NULL = "") */
    const char *date_string; /* Llama 3.1+: "Today Date" (NULL = today where the template
                              * calls strftime_now (3.2, 3.3), else its "26 Jul 2024") */
    bool disable_thinking;   /* Qwen3: enable_thinking=false, an empty <think> block */
} pti_chat_opts;

/* Recognizes a template. jinja (len bytes, need not be NUL-terminated; NULL or empty = none)
 * is the tokenizer.chat_template string; arch (nullable) is general.architecture, used only
 * when there is no template: qwen2 -> Qwen2.5, qwen3, gemma/gemma2/gemma3 -> Gemma, phi3;
 * llama (Llama 2/3, Mistral, SmolLM, ... share it) -> ChatML, llama.cpp's default, with a
 * warning; anything else -> plain with a warning. Never fails except out of memory (NULL,
 * PT_ERR_OOM): an unrecognized template gives PTI_CHAT_PLAIN and a warning
 * (pti_chat_template_warning). Returns a new template, freed with pti_chat_template_free. */
pti_chat_template *pti_chat_template_detect(const char *jinja, size_t len, const char *arch);

/* Same, reading tokenizer.chat_template and general.architecture from an open GGUF (borrowed). */
pti_chat_template *pti_chat_template_from_gguf(const pt_gguf *g);

/* A template of a given family with its defaults (ChatML: no default system prompt). */
pti_chat_template *pti_chat_template_new(pti_chat_family family);

void pti_chat_template_free(pti_chat_template *t);

pti_chat_family pti_chat_template_family(const pti_chat_template *t);
/* "chatml", "qwen2.5", "qwen3", "llama3", "llama3.0", "mistral", "gemma", "phi3",
 * "deepseek-r1", "plain". */
const char *pti_chat_family_name(pti_chat_family f);
/* A warning about the detection ("unrecognized chat template, using a plain format"), or
 * NULL when there is none. Borrowed from t. */
const char *pti_chat_template_warning(const pti_chat_template *t);

/* The text that ends a model turn in this family ("<|im_end|>", "<|eot_id|>",
 * "<end_of_turn>", "<|end|>", "</s>" for Mistral, ...); NULL for the plain format. Static. */
const char *pti_chat_end_of_turn(pti_chat_family f);
/* Stop strings for generation (a NULL-terminated static array; *n set when n is not NULL):
 * the end-of-turn text and the text that would start a new turn. */
const char *const *pti_chat_stop_strings(pti_chat_family f, size_t *n);

/* Renders n messages (n may be 0) into a new NUL-terminated string (free()); *out_len (when
 * not NULL) receives its length. add_generation_prompt appends the header of an assistant
 * turn. opts may be NULL. Errors (NULL): PT_ERR_NULL for a NULL message array with n > 0 or a
 * NULL role; PT_ERR_INVALID_ARG where the family's template raises an exception (Mistral and
 * Gemma require user/assistant alternation, Llama 3 one tool call per turn, ...), with the
 * template's own message; PT_ERR_OOM. */
char *pti_chat_render(const pti_chat_template *t, const pti_chat_message *msgs, size_t n,
                      bool add_generation_prompt, const pti_chat_opts *opts, size_t *out_len);

#endif
