/* The generation plumbing promeserve's Ollama and OpenAI handlers share (api_ollama.c,
 * api_openai.c): reading the common request fields, loading the model, building the prompt
 * (an Ollama Go template layer or the GGUF's chat family), tokenizing, the JSON constraint,
 * submitting to the model's engine, and driving the reply: a non-streamed request waits on a
 * condition variable in its handler; a streamed one returns from its handler at once and the
 * engine's callbacks (worker thread) write the chunks, the last one, close the stream and
 * release the model. The endpoints differ only in how chunks and final objects look: a
 * ps_gen_style of callbacks formats them. api_common.c runs generations and embeddings;
 * api_prompt.c builds and tokenizes prompts. */
#ifndef PROMESERVE_API_COMMON_H
#define PROMESERVE_API_COMMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "http_internal.h"
#include "api_request.h"
#include "go_template.h"
#include "tool_calls.h"

typedef struct ps_gen ps_gen;

/* How one endpoint formats its replies. Each returns a new cJSON object (NULL: nothing). */
typedef struct ps_gen_style {
    bool openai; /* errors in OpenAI's shape, SSE instead of NDJSON */
    /* a streamed piece: content text and/or new tool calls (Ollama form; may be NULL) */
    cJSON *(*chunk)(ps_gen *g, const char *text, size_t len, const char *thinking,
                    size_t n_thinking, const cJSON *calls);
    /* writes the end of a stream with ps_gen_write (Ollama: the done object with the
     * metrics; OpenAI: the finish chunk, the usage chunk, [DONE]) */
    void (*finish)(ps_gen *g);
    /* the whole reply of a non-streamed request */
    cJSON *(*whole)(ps_gen *g);
} ps_gen_style;

struct ps_gen {
    const ps_gen_style *style;
    ps_server *srv;
    ps_model *m;
    pti_engine *eng;
    ps_stream *stream; /* NULL: not streamed */
    char model[512];   /* the name as the client gave it */
    char id[64];       /* OpenAI: chatcmpl-/cmpl- id */
    int64_t created;   /* unix seconds (OpenAI) */
    int64_t t0_ns;     /* handler start (monotonic), for total_duration */
    int64_t load_ns;
    int64_t deadline_ns; /* monotonic; 0 none */
    bool include_usage;  /* OpenAI stream_options.include_usage */
    bool sent_first;     /* OpenAI: the role chunk went out */
    bool want_context;   /* /api/generate not raw: reply with context */
    char *prompt_text;   /* the full prompt text (for context) */
    int32_t n_prompt_ids;
    /* collected output */
    char *text;
    size_t n_text, cap_text;
    char *thinking;
    size_t n_thinking, cap_thinking;
    pti_think_split think; /* think: true splits thinking from content */
    pti_tool_parser *tools;
    cJSON *calls; /* every tool call so far (Ollama form) */
    bool client_gone;
    /* completion */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    uint64_t req_id;
    pt_status st;
    char msg[512];
    pt_gen_stats stats;
    char done_reason[16];
    float *embedding;
    int32_t n_embd;
};

/* ---- replies ------------------------------------------------------------------------------- */

/* An error reply in the endpoint's shape (OpenAI: type from the status). */
void ps_api_fail(ps_request *r, bool openai, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Status for a failed pt_status (PT_ERR_INVALID_ARG/UNSUPPORTED/FORMAT -> 400, else 500). */
int ps_api_status_of(pt_status st);
/* RFC 3339 with nanoseconds in UTC, trailing zeros trimmed as Go's RFC3339Nano. */
void ps_api_time(char *buf, size_t cap);
/* The model name field: "model" (or "name"); NULL after answering 400 "model is required". */
const char *ps_api_model_name(ps_request *r, bool openai);

/* ---- model, options, prompt ----------------------------------------------------------------- */

/* Validates the request's options (before loading), loads the model and applies
 * defaults < params layer < request options into *opts. NULL after answering the error. */
ps_model *ps_api_load(ps_request *r, bool openai, const char *name, const cJSON *req_options,
                      int64_t keep_alive_ns, pti_api_opts *opts);

/* A parsed Go template of the model's template layer (cached; NULL when it has none or it
 * does not parse: the warning is logged and the GGUF chat family is used instead). */
const pti_gotmpl *ps_api_model_gotmpl(ps_model *m);
/* The GGUF chat family of a loaded model. */
pti_chat_family ps_api_family(ps_model *m);

/* Chat prompt: the template layer (or the family) over normalised messages and tools.
 * think_set/think: the request's think. On failure NULL with *status and err filled. */
char *ps_api_chat_prompt(ps_model *m, const char *model_name, const cJSON *messages,
                         const cJSON *tools, bool think_set, bool think, int *status, char *err,
                         size_t err_cap);
/* Tool-call tags for the parser of this model (template layer or family). */
void ps_api_tool_tags(ps_model *m, char *open_tag, char *close_tag, size_t cap);

/* The context length of a loaded model's slots (the engine's num_ctx, capped at the
 * model's trained length). */
int32_t ps_api_context_limit(pti_engine *e);
/* All token ids of text (BOS per the vocabulary, control tokens parsed), any length; NULL
 * with the error set. */
int32_t *ps_api_tokenize_all(pti_engine *e, const char *text, int64_t *n);
/* Tokenizes text (BOS per the vocabulary, control tokens parsed). NULL with err on failure
 * or when it is empty or longer than the context. */
int32_t *ps_api_tokenize(ps_model *m, const char *text, int32_t *n, char *err, size_t err_cap);

/* The JSON constraint for a format (PTI_FORMAT_NONE: an empty constraint). False with err
 * (400) when the schema is unsupported. */
bool ps_api_constraint(pti_api_format_kind kind, const cJSON *schema, pti_constraint *out,
                       char *err, size_t err_cap);

/* ---- running a generation ------------------------------------------------------------------- */

/* A new generation state for request r (model name copied, timers started). */
ps_gen *ps_gen_new(ps_request *r, const ps_gen_style *style, const char *model, ps_model *m);
/* Submits req (its events are set here) and answers r: streamed (stream true: returns at
 * once, the callbacks finish) or whole. Takes over g, the model, req->constraint and the
 * tool parser. extra_stop: the family's end-of-turn strings (nullable). */
void ps_gen_run(ps_request *r, ps_gen *g, pti_engine_request *req, bool stream);
/* Writes obj (taken over) to g's stream as NDJSON or SSE; NULL obj: SSE's [DONE]. False once
 * the client is gone. */
bool ps_gen_write(ps_gen *g, cJSON *obj);
/* The prompt of /api/generate and /v1/completions: raw (as is), a template override, the
 * template layer or the chat family; system (nullable) overrides the system layer; a suffix
 * needs a template with .Suffix. NULL with *status / err on failure. */
char *ps_api_generate_prompt(ps_model *m, const char *model_name, const char *prompt,
                             const char *suffix, const char *system, const char *template_override,
                             bool raw, bool think_set, bool think, int *status, char *err,
                             size_t err_cap);
/* Frees g (and releases its model). */
void ps_gen_free(ps_gen *g);

/* Ollama-form tool calls -> OpenAI's [{id, type:"function", function:{name, arguments: "json"}}]
 * (index set when with_index, for stream deltas). */
cJSON *ps_api_openai_tool_calls(const cJSON *calls, bool with_index);

/* The vectors of an embedding batch: count rows of dim float32 values (malloc'd, row-major);
 * non-finite values are stored as 0, as JSON has no NaN. */
typedef struct ps_embed_vecs {
    float *v;
    int count, dim;
} ps_embed_vecs;

/* Embeddings of several inputs (a string or an array of strings), one engine request each,
 * a window of them (--parallel) in the engine at once; the batch stops when the client hangs
 * up or the server stops. dims > 0: each vector cut to its first dims values and normalised
 * again (Ollama's `dimensions`). On success *out holds every vector (free out->v) and
 * *prompt_tokens their tokens; false after answering the error. */
bool ps_api_embed_inputs(ps_request *r, bool openai, ps_model *m, const cJSON *inputs,
                         bool truncate, int dims, int64_t *prompt_tokens, ps_embed_vecs *out);

/* How the list of ps_api_reply_embeddings looks: Ollama's arrays of numbers, or OpenAI's
 * {"object":"embedding","embedding":..., "index":i} objects with numbers or base64. */
typedef enum ps_embed_form {
    PS_EMBED_OLLAMA,
    PS_EMBED_OPENAI_FLOAT,
    PS_EMBED_OPENAI_BASE64,
} ps_embed_form;

/* Answers 200 with before's members, "key": [the list of vecs], after's members, the text
 * generated while it is sent (api_embed_reply.c): the whole reply never sits in memory.
 * Takes over vecs->v, before and after (objects of the fields around the list). */
void ps_api_reply_embeddings(ps_request *r, ps_embed_vecs *vecs, ps_embed_form form, cJSON *before,
                             const char *key, cJSON *after);
/* One vector as a raw JSON array node (the numbers as the batch reply writes them). */
cJSON *ps_api_embed_vector_json(const float *v, int n);
/* The `dimensions` field: absent/null 0; else a positive integer, or false after 400. */
bool ps_api_dimensions(ps_request *r, bool openai, int *dims);

#endif
