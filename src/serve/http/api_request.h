/* Request JSON -> generation parameters for promeserve's generation endpoints (issue 7), the
 * library side without HTTP: Ollama's `options` object (types, ranges, the params layer under
 * the request's values, unknown keys reported), `keep_alive` (seconds or a Go duration string),
 * `format` ("json" or a JSON schema), chat `messages` and `tools` checked and normalised into
 * the Ollama form the prompt renderers take, and OpenAI's /v1 chat/completions fields mapped
 * onto the same (Ollama's openai middleware: temperature and top_p default to 1, max_tokens ->
 * num_predict, response_format -> format, content parts joined, tool-call arguments parsed).
 *
 * Every function validates what it reads and fails with PT_ERR_INVALID_ARG and a message fit
 * for a 400 reply (Ollama's wording where Ollama has one). Nothing here touches the engine,
 * templates or sockets. Thread-safe: no shared state. */
#ifndef PT_SERVE_API_REQUEST_H
#define PT_SERVE_API_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "prometorch/prometorch.h"

#define PTI_API_MAX_STOP 64            /* stop strings at most */
#define PTI_API_MAX_STOP_LEN 4096      /* bytes of one stop string at most */
#define PTI_API_MAX_CTX (1 << 22)      /* num_ctx at most */
#define PTI_API_KEEP_DEFAULT INT64_MIN /* keep_alive absent: the server's default */

/* Generation parameters of one request. Strings in stop are owned (pti_api_opts_free). */
typedef struct pti_api_opts {
    pt_gen_opts gen; /* sampling; gen.stop / gen.n_stop point at stop / n_stop */
    char **stop;
    int32_t n_stop;
    int32_t num_ctx;                         /* 0: the server's default */
    int32_t num_thread, num_batch, num_keep; /* accepted; 0 when absent */
    char unknown[256]; /* unknown option keys, comma-separated ("" none), for a warning */
} pti_api_opts;

/* Ollama's defaults (pt_gen_opts_default). */
void pti_api_opts_init(pti_api_opts *o);
void pti_api_opts_free(pti_api_opts *o);

/* Applies an Ollama `options` object (NULL or JSON null: nothing) over o. Ints may be given as
 * floats with an integral value (Go decodes options as float64); a wrong type is
 * `option "k" must be a number` (integer, boolean, an array of strings), an out-of-range value
 * `option "k" is out of range ...`. Unknown keys are ignored and listed in o->unknown. On
 * error o keeps the values applied before the bad key. */
pt_status pti_api_apply_options(pti_api_opts *o, const cJSON *options);

/* keep_alive: NULL/null -> PTI_API_KEEP_DEFAULT; a number = seconds (fractional allowed);
 * a string = a Go duration ("5m", "1h30m", "300ms", "-1m", "0") or a plain number of seconds
 * ("-1"); negative -> -1 (forever); 0 -> 0 (unload after the request). */
pt_status pti_api_keep_alive(const cJSON *v, int64_t *ns);
/* Go's time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+ with units ns us µs ms s m h, or
 * "0"; overflow past int64 nanoseconds is an error. */
pt_status pti_go_duration(const char *s, int64_t *ns);

typedef enum pti_api_format_kind {
    PTI_FORMAT_NONE = 0, /* absent, null or "" */
    PTI_FORMAT_JSON,     /* "json": a JSON object (Ollama's grammar: root ::= object) */
    PTI_FORMAT_SCHEMA    /* a JSON schema object (*schema borrowed from the request) */
} pti_api_format_kind;

/* Ollama's `format`. Anything but "json", "" or an object is
 * `invalid format: expected "json" or a valid JSON schema`. */
pt_status pti_api_format(const cJSON *format, pti_api_format_kind *kind, const cJSON **schema);
/* OpenAI's response_format: {"type":"text"|"json_object"|"json_schema",
 * "json_schema":{"schema":{...}}}. */
pt_status pti_api_openai_format(const cJSON *rf, pti_api_format_kind *kind, const cJSON **schema);

/* Checks an Ollama `messages` array and returns a normalised copy (cJSON_Delete): roles
 * lower-cased, content always a string, tool_calls [{function:{index,name,arguments:{}}}],
 * tool_name kept. *has_images is set when a message carries a non-empty images list. */
cJSON *pti_api_chat_messages(const cJSON *messages, bool *has_images);
/* OpenAI messages -> the Ollama form above: content strings or arrays of text parts (an
 * image_url part sets *has_images), assistant tool_calls with string arguments parsed into
 * objects, role "tool" results named after the call they answer (tool_call_id). */
cJSON *pti_api_openai_messages(const cJSON *messages, bool *has_images);
/* Checks a `tools` array ([{type:"function", function:{name, description?, parameters?}}]);
 * NULL/null/[] is fine. *n receives the number of tools. */
pt_status pti_api_tools(const cJSON *tools, int *n);

/* The Ollama options object an OpenAI request means (new cJSON object): temperature (1.0
 * when absent), top_p (1.0 when absent), num_predict from max_completion_tokens or
 * max_tokens, seed, stop (string or list), frequency_penalty, presence_penalty. Type errors
 * name the OpenAI field. */
cJSON *pti_api_openai_options(const cJSON *req);

/* An int32 array (the `context` of /api/generate): every element an integer in
 * [0, n_vocab). Returns a new array (free(); NULL with *n = 0 for absent/empty) or NULL with
 * the error set (check pt_last_status() when *n < 0). */
int32_t *pti_api_context_ids(const cJSON *context, int32_t n_vocab, int32_t *n);

/* Splits a streamed answer into thinking and content, as Ollama's thinking parser does for
 * `think: true`: when the answer opens with <think> (after white space), the text up to
 * </think> is thinking and what follows (leading newlines dropped) is content; an answer that
 * does not open with the tag is all content. Possible partial tags are held back (at most
 * 15 bytes) until the next piece or the end. */
typedef struct pti_think_split {
    int state; /* 0 off (all content), 1 awaiting the open tag, 2 content, 3 thinking,
                * 4 content after </think> (leading newlines dropped) */
    char hold[16];
    size_t n_hold;
} pti_think_split;

typedef bool (*pti_think_out)(void *user, bool thinking, const char *text, size_t len);

void pti_think_split_init(pti_think_split *t, bool enabled);
/* Feeds len bytes (finish: the end of the answer, everything held is released). out is
 * called with each non-empty part; its false return is passed back. False on OOM too. */
bool pti_think_split_push(pti_think_split *t, const char *text, size_t len, bool finish,
                          pti_think_out out, void *user);

/* Reads an optional boolean field: absent/null -> def; not a bool -> error naming it. */
pt_status pti_api_bool(const cJSON *obj, const char *key, bool def, bool *out);
/* Reads an optional string field: absent/null -> NULL; not a string -> error naming it. */
pt_status pti_api_string(const cJSON *obj, const char *key, const char **out);
/* Checks an optional images field (absent/null, or an array of base64 strings; `what` names
 * it in the error) and sets *has_images when it holds any (left unchanged otherwise). */
pt_status pti_api_images(const cJSON *images, const char *what, bool *has_images);

#endif
