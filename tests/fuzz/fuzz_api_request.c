/* Fuzz target for promeserve's request JSON -> generation options path
 * (src/serve/http/api_request.h): the bytes are parsed as a request body and every field the
 * generation endpoints read goes through the same functions the handlers call -- Ollama options
 * over a params layer, keep_alive, format, messages, tools, context, and the OpenAI mapping
 * (options, response_format, messages) -- and the raw bytes go through the thinking splitter. Any
 * input must give either parameters that respect the documented ranges or an error with a message;
 * never a crash, a leak or a hang. A request is "accepted" when the
 * Ollama reading or the OpenAI reading of it succeeds completely (the seed corpus,
 * tests/fuzz/corpus/api_request, holds real requests of each endpoint). Built as a libFuzzer
 * target with -DPT_FUZZ=ON (clang) and as a corpus replay/mutation smoke test in every build. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/http/api_request.h"

int fuzz_accepted;

/* A broken invariant: say which, then crash so the fuzzer keeps the input. */
static void fail(const char *what)
{
    fprintf(stderr, "fuzz_api_request: %s\n", what);
    abort();
}

/* An error must come with its status and a message. */
static void check_error(void)
{
    const char *msg = pt_last_error();
    if (pt_last_status() == PT_OK || !msg || !msg[0])
        fail("a refused request has no error status or message");
    pt_clear_error();
}

static void check_opts(const pti_api_opts *o)
{
    const pt_gen_opts *g = &o->gen;
    if (o->num_ctx < 0 || o->num_ctx > PTI_API_MAX_CTX || o->n_stop < 0 ||
        o->n_stop > PTI_API_MAX_STOP || g->n_stop != o->n_stop || g->num_predict < -1 ||
        !(g->temperature >= 0) || !(g->top_p >= 0 && g->top_p <= 1) || g->repeat_last_n < -1)
        fail("accepted options outside their documented ranges");
    for (int32_t i = 0; i < o->n_stop; i++)
        if (!g->stop[i] || !g->stop[i][0] || strlen(g->stop[i]) > PTI_API_MAX_STOP_LEN)
            fail("an empty, missing or over-long stop string was accepted");
    if (memchr(o->unknown, '\0', sizeof o->unknown) == NULL)
        fail("the unknown-options list is not NUL-terminated");
}

static bool step(pt_status st)
{
    if (st != PT_OK)
        check_error();
    return st == PT_OK;
}

static bool read_messages(cJSON *(*fn)(const cJSON *, bool *), const cJSON *messages)
{
    if (!messages)
        return true;
    bool images = false;
    cJSON *m = fn(messages, &images);
    if (!m) {
        check_error();
        return false;
    }
    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != cJSON_GetArraySize(messages))
        fail("converted messages are not one per request message");
    cJSON_Delete(m);
    return true;
}

static bool read_ollama(const cJSON *req)
{
    pti_api_opts o;
    pti_api_opts_init(&o);
    /* the params layer of a store model is an options object too: the request's own options
     * serve as one here, applied twice as the layers are */
    const cJSON *options = cJSON_GetObjectItemCaseSensitive(req, "options");
    bool ok = step(pti_api_apply_options(&o, options)) && step(pti_api_apply_options(&o, options));
    if (ok)
        check_opts(&o);
    pti_api_opts_free(&o);
    int64_t keep = 0;
    ok = ok && step(pti_api_keep_alive(cJSON_GetObjectItemCaseSensitive(req, "keep_alive"), &keep));
    if (ok && keep != PTI_API_KEEP_DEFAULT && keep < -1)
        fail("keep_alive below -1 accepted");
    pti_api_format_kind kind;
    const cJSON *schema = NULL;
    ok =
        ok && step(pti_api_format(cJSON_GetObjectItemCaseSensitive(req, "format"), &kind, &schema));
    if (ok && (kind == PTI_FORMAT_SCHEMA) != (schema != NULL))
        fail("format kind and schema disagree");
    int n_tools = 0;
    ok = ok && step(pti_api_tools(cJSON_GetObjectItemCaseSensitive(req, "tools"), &n_tools));
    ok = ok &&
         read_messages(pti_api_chat_messages, cJSON_GetObjectItemCaseSensitive(req, "messages"));
    if (ok) {
        int32_t n = 0;
        int32_t *ids =
            pti_api_context_ids(cJSON_GetObjectItemCaseSensitive(req, "context"), 49152, &n);
        if (n < 0)
            check_error();
        for (int32_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= 49152)
                fail("a context id outside the vocabulary was accepted");
        free(ids);
        ok = n >= 0;
    }
    bool b;
    const char *s;
    ok = ok && step(pti_api_bool(req, "stream", true, &b)) &&
         step(pti_api_string(req, "prompt", &s));
    return ok;
}

static bool read_openai(const cJSON *req)
{
    cJSON *options = pti_api_openai_options(req);
    if (!options) {
        check_error();
        return false;
    }
    pti_api_opts o;
    pti_api_opts_init(&o);
    bool ok = step(pti_api_apply_options(&o, options));
    if (ok)
        check_opts(&o);
    pti_api_opts_free(&o);
    cJSON_Delete(options);
    pti_api_format_kind kind;
    const cJSON *schema = NULL;
    ok = ok && step(pti_api_openai_format(cJSON_GetObjectItemCaseSensitive(req, "response_format"),
                                          &kind, &schema));
    int n_tools = 0;
    ok = ok && step(pti_api_tools(cJSON_GetObjectItemCaseSensitive(req, "tools"), &n_tools));
    ok = ok &&
         read_messages(pti_api_openai_messages, cJSON_GetObjectItemCaseSensitive(req, "messages"));
    return ok;
}

static bool count_part(void *user, bool thinking, const char *text, size_t len)
{
    (void)thinking;
    if (!text || len == 0)
        fail("the thinking splitter passed on an empty part");
    *(size_t *)user += len;
    return true;
}

/* The thinking splitter over the raw bytes in pieces: it never yields more than it is fed. */
static void split_thinking(const uint8_t *data, size_t size)
{
    pti_think_split t;
    pti_think_split_init(&t, true);
    size_t out = 0, step = size ? data[0] % 7 + 1 : 1;
    for (size_t i = 0; i < size; i += step)
        if (!pti_think_split_push(&t, (const char *)data + i, i + step < size ? step : size - i,
                                  false, count_part, &out))
            fail("the thinking splitter failed on a piece");
    if (!pti_think_split_push(&t, "", 0, true, count_part, &out) || out > size || t.n_hold != 0)
        fail("the thinking splitter lost or invented text");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    split_thinking(data, size);
    cJSON *req = cJSON_ParseWithLength((const char *)data, size);
    if (cJSON_IsObject(req)) {
        bool a = read_ollama(req);
        bool b = read_openai(req);
        if (a || b)
            fuzz_accepted++;
    }
    cJSON_Delete(req);
    pt_clear_error();
    return 0;
}
