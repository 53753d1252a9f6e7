/* Request JSON -> generation parameters (src/serve/http/api_request.h): Ollama's options (defaults,
 * types, integral floats as Go decodes them, ranges, unknown keys ignored and reported, the
 * params layer under the request), keep_alive as seconds or Go durations (values checked
 * against Go's time.ParseDuration documentation), format, chat messages and tools, OpenAI's
 * mapping (temperature/top_p default 1, max_tokens, stop string|array, response_format,
 * content parts, string tool-call arguments) and the context of /api/generate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "serve/http/api_request.h"

static cJSON *json(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    return j;
}

static pt_status apply(pti_api_opts *o, const char *text)
{
    cJSON *j = json(text);
    pt_status st = pti_api_apply_options(o, j);
    cJSON_Delete(j);
    return st;
}

static void expect_option_error(const char *text, const char *substring)
{
    pti_api_opts o;
    pti_api_opts_init(&o);
    assert_pt_status_error(apply(&o, text), PT_ERR_INVALID_ARG, substring);
    pti_api_opts_free(&o);
}

static void test_option_defaults_and_values(void **state)
{
    (void)state;
    pti_api_opts o;
    pti_api_opts_init(&o);
    assert_int_equal(o.gen.num_predict, -1);
    assert_float_equal(o.gen.temperature, 0.8, 1e-6);
    assert_int_equal(o.gen.top_k, 40);
    assert_float_equal(o.gen.top_p, 0.9, 1e-6);
    assert_true(o.gen.seed < 0);
    assert_int_equal(o.num_ctx, 0);
    assert_int_equal(apply(&o, "{\"temperature\":0,\"top_k\":3.0,\"top_p\":0.5,\"min_p\":0.1,"
                               "\"typical_p\":0.7,\"num_predict\":12,\"seed\":42,"
                               "\"repeat_penalty\":1.3,\"repeat_last_n\":-1,"
                               "\"presence_penalty\":-0.5,\"frequency_penalty\":0.25,"
                               "\"num_ctx\":512,\"num_thread\":2,\"num_batch\":64,"
                               "\"num_keep\":5,\"stop\":[\"\\n\\n\",\"END\"]}"),
                     PT_OK);
    assert_float_equal(o.gen.temperature, 0, 0);
    assert_int_equal(o.gen.top_k, 3);
    assert_float_equal(o.gen.top_p, 0.5, 1e-6);
    assert_float_equal(o.gen.min_p, 0.1, 1e-6);
    assert_float_equal(o.gen.typical_p, 0.7, 1e-6);
    assert_int_equal(o.gen.num_predict, 12);
    assert_int_equal(o.gen.seed, 42);
    assert_float_equal(o.gen.repeat_penalty, 1.3, 1e-6);
    assert_int_equal(o.gen.repeat_last_n, -1);
    assert_float_equal(o.gen.presence_penalty, -0.5, 1e-6);
    assert_float_equal(o.gen.frequency_penalty, 0.25, 1e-6);
    assert_int_equal(o.num_ctx, 512);
    assert_int_equal(o.num_thread, 2);
    assert_int_equal(o.num_batch, 64);
    assert_int_equal(o.num_keep, 5);
    assert_int_equal(o.gen.n_stop, 2);
    assert_string_equal(o.gen.stop[0], "\n\n");
    assert_string_equal(o.gen.stop[1], "END");
    assert_string_equal(o.unknown, "");
    /* a later layer (the request over the params layer) replaces the list, as Go's FromMap */
    assert_int_equal(apply(&o, "{\"stop\":[\"x\"],\"num_predict\":-2,\"seed\":null}"), PT_OK);
    assert_int_equal(o.gen.n_stop, 1);
    assert_string_equal(o.gen.stop[0], "x");
    assert_int_equal(o.gen.num_predict, -1); /* -2 "fill the context" is the same here */
    assert_int_equal(o.gen.seed, 42);        /* null leaves the value */
    pti_api_opts_free(&o);
}

static void test_option_unknown_and_ignored(void **state)
{
    (void)state;
    pti_api_opts o;
    pti_api_opts_init(&o);
    assert_int_equal(apply(&o, "{\"foo\":1,\"num_gpu\":99,\"use_mmap\":false,\"mirostat\":0,"
                               "\"bar\":\"x\"}"),
                     PT_OK);
    assert_string_equal(o.unknown, "foo, bar");
    assert_int_equal(apply(&o, "null"), PT_OK);
    pti_api_opts_free(&o);
    /* known-but-unused keys are still type-checked, as Ollama's FromMap does */
    expect_option_error("{\"use_mmap\":1}", "option \"use_mmap\" must be a boolean");
    expect_option_error("{\"num_gpu\":\"all\"}", "option \"num_gpu\" must be an integer");
}

static void test_option_errors(void **state)
{
    (void)state;
    expect_option_error("[1]", "options must be an object");
    expect_option_error("{\"temperature\":\"hot\"}", "option \"temperature\" must be a number");
    expect_option_error("{\"top_k\":3.5}", "option \"top_k\" must be an integer");
    expect_option_error("{\"top_k\":true}", "option \"top_k\" must be an integer");
    expect_option_error("{\"num_ctx\":-1}", "option \"num_ctx\" is out of range");
    expect_option_error("{\"num_ctx\":1e12}", "option \"num_ctx\" is out of range");
    expect_option_error("{\"num_predict\":-3}", "option \"num_predict\" is out of range");
    expect_option_error("{\"num_predict\":1e300}", "option \"num_predict\" is out of range");
    expect_option_error("{\"seed\":1e19}", "option \"seed\" is out of range");
    expect_option_error("{\"temperature\":-1}", "option \"temperature\" is out of range");
    expect_option_error("{\"temperature\":1e999}", "option \"temperature\" is out of range");
    expect_option_error("{\"top_p\":1.5}", "option \"top_p\" is out of range");
    expect_option_error("{\"repeat_last_n\":-2}", "option \"repeat_last_n\" is out of range");
    expect_option_error("{\"stop\":\"x\"}", "option \"stop\" must be an array of strings");
    expect_option_error("{\"stop\":[1]}", "option \"stop\" must be an array of strings");
    expect_option_error("{\"stop\":[\"\"]}", "stop string must have 1 to");
}

static int64_t keep(const char *text)
{
    cJSON *j = json(text);
    int64_t ns = 12345;
    pt_status st = pti_api_keep_alive(j, &ns);
    cJSON_Delete(j);
    assert_int_equal(st, PT_OK);
    return ns;
}

static void expect_keep_error(const char *text, const char *substring)
{
    cJSON *j = json(text);
    int64_t ns = 0;
    assert_pt_status_error(pti_api_keep_alive(j, &ns), PT_ERR_INVALID_ARG, substring);
    cJSON_Delete(j);
}

static void test_keep_alive(void **state)
{
    (void)state;
    const int64_t S = 1000000000;
    int64_t ns = 0;
    assert_int_equal(pti_api_keep_alive(NULL, &ns), PT_OK);
    assert_true(ns == PTI_API_KEEP_DEFAULT);
    assert_true(keep("null") == PTI_API_KEEP_DEFAULT);
    assert_true(keep("0") == 0);
    assert_true(keep("300") == 300 * S);
    assert_true(keep("1.5") == 3 * S / 2);
    assert_true(keep("-1") == -1);
    assert_true(keep("1e30") == -1); /* past int64 nanoseconds: forever */
    assert_true(keep("\"5m\"") == 300 * S);
    assert_true(keep("\"1h30m\"") == 5400 * S);
    assert_true(keep("\"300ms\"") == 300000000);
    assert_true(keep("\"1.5h\"") == 5400 * S);
    assert_true(keep("\"2h45m30.5s\"") == 9930 * S + S / 2);
    assert_true(keep("\"1\\u00b5s\"") == 1000);
    assert_true(keep("\"10us\"") == 10000);
    assert_true(keep("\"7ns\"") == 7);
    assert_true(keep("\"0\"") == 0);
    assert_true(keep("\"-1\"") == -1);
    assert_true(keep("\"-1m\"") == -1);
    assert_true(keep("\"+5s\"") == 5 * S);
    assert_true(keep("\"24h\"") == 86400 * S);
    expect_keep_error("\"\"", "time: invalid duration \"\"");
    expect_keep_error("\"abc\"", "time: invalid duration \"abc\"");
}

static void test_keep_alive_errors(void **state)
{
    (void)state;
    expect_keep_error("\"5x\"", "time: unknown unit \"x\" in duration \"5x\"");
    expect_keep_error("\"1h5\"", "time: missing unit in duration \"1h5\"");
    expect_keep_error("\".s\"", "time: invalid duration \".s\"");
    expect_keep_error("\"-\"", "time: invalid duration \"-\"");
    expect_keep_error("\"99999999999h\"", "time: invalid duration");
    expect_keep_error("true", "keep_alive must be");
    expect_keep_error("[1]", "keep_alive must be");
}

static void test_go_duration_direct(void **state)
{
    (void)state;
    int64_t ns = 0;
    assert_int_equal(pti_go_duration("1m0.5s", &ns), PT_OK);
    assert_true(ns == 60500000000LL);
    assert_int_equal(pti_go_duration("-1.5h", &ns), PT_OK);
    assert_true(ns == -5400000000000LL);
    assert_int_equal(pti_go_duration("2562047h", &ns), PT_OK); /* Go's maximum is 2562047h47m */
    assert_pt_status_error(pti_go_duration("2562048h", &ns), PT_ERR_INVALID_ARG,
                           "invalid duration");
    assert_pt_status_error(pti_go_duration("1", &ns), PT_ERR_INVALID_ARG, "missing unit");
}

static void test_format(void **state)
{
    (void)state;
    pti_api_format_kind k;
    const cJSON *schema = NULL;
    cJSON *j = json("\"json\"");
    assert_int_equal(pti_api_format(j, &k, &schema), PT_OK);
    assert_int_equal(k, PTI_FORMAT_JSON);
    cJSON_Delete(j);
    j = json("\"\"");
    assert_int_equal(pti_api_format(j, &k, &schema), PT_OK);
    assert_int_equal(k, PTI_FORMAT_NONE);
    cJSON_Delete(j);
    assert_int_equal(pti_api_format(NULL, &k, &schema), PT_OK);
    assert_int_equal(k, PTI_FORMAT_NONE);
    j = json("{\"type\":\"object\"}");
    assert_int_equal(pti_api_format(j, &k, &schema), PT_OK);
    assert_int_equal(k, PTI_FORMAT_SCHEMA);
    assert_ptr_equal(schema, j);
    cJSON_Delete(j);
    j = json("\"xml\"");
    assert_pt_status_error(pti_api_format(j, &k, &schema), PT_ERR_INVALID_ARG,
                           "invalid format: expected \"json\" or a valid JSON schema");
    cJSON_Delete(j);
    j = json("5");
    assert_pt_status_error(pti_api_format(j, &k, &schema), PT_ERR_INVALID_ARG, "invalid format");
    cJSON_Delete(j);
}

static void test_openai_format(void **state)
{
    (void)state;
    pti_api_format_kind k;
    const cJSON *schema = NULL;
    cJSON *j = json("{\"type\":\"json_object\"}");
    assert_int_equal(pti_api_openai_format(j, &k, &schema), PT_OK);
    assert_int_equal(k, PTI_FORMAT_JSON);
    cJSON_Delete(j);
    j = json("{\"type\":\"text\"}");
    assert_int_equal(pti_api_openai_format(j, &k, &schema), PT_OK);
    assert_int_equal(k, PTI_FORMAT_NONE);
    cJSON_Delete(j);
    j = json("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":"
             "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}");
    assert_int_equal(pti_api_openai_format(j, &k, &schema), PT_OK);
    assert_int_equal(k, PTI_FORMAT_SCHEMA);
    assert_string_equal(cJSON_GetObjectItem(schema, "type")->valuestring, "object");
    cJSON_Delete(j);
    j = json("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}}");
    assert_pt_status_error(pti_api_openai_format(j, &k, &schema), PT_ERR_INVALID_ARG,
                           "json_schema.schema");
    cJSON_Delete(j);
    j = json("{\"type\":\"yaml\"}");
    assert_pt_status_error(pti_api_openai_format(j, &k, &schema), PT_ERR_INVALID_ARG,
                           "invalid response_format type \"yaml\"");
    cJSON_Delete(j);
}

static void test_chat_messages(void **state)
{
    (void)state;
    bool images = true;
    cJSON *in = json("[{\"role\":\"System\",\"content\":\"be brief\"},"
                     "{\"role\":\"user\",\"content\":\"hi\",\"images\":[]},"
                     "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":"
                     "{\"name\":\"get\",\"arguments\":{\"city\":\"Paris\"}}}]},"
                     "{\"role\":\"tool\",\"content\":\"sunny\",\"tool_name\":\"get\"}]");
    cJSON *out = pti_api_chat_messages(in, &images);
    assert_non_null(out);
    assert_false(images);
    assert_int_equal(cJSON_GetArraySize(out), 4);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "role")->valuestring,
                        "system");
    cJSON *a = cJSON_GetArrayItem(out, 2);
    assert_string_equal(cJSON_GetObjectItem(a, "content")->valuestring, "");
    cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "tool_calls"), 0),
                                    "function");
    assert_int_equal(cJSON_GetObjectItem(fn, "index")->valueint, 0);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(fn, "arguments"), "city")->valuestring, "Paris");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 3), "tool_name")->valuestring,
                        "get");
    cJSON_Delete(out);
    cJSON_Delete(in);

    in = json("[{\"role\":\"user\",\"content\":\"look\",\"images\":[\"aGk=\"]}]");
    out = pti_api_chat_messages(in, &images);
    assert_true(images);
    cJSON_Delete(out);
    cJSON_Delete(in);

    const char *bad[][2] = {
        {"{}", "messages must be an array"},
        {"[1]", "messages[0] must be an object"},
        {"[{\"content\":\"x\"}]", "messages[0].role"},
        {"[{\"role\":\"user\",\"content\":[1]}]", "messages[0].content must be a string"},
        {"[{\"role\":\"user\",\"images\":\"x\"}]", "messages[0].images must be an array"},
        {"[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{}}]}]",
         "messages[0].tool_calls[0].function.name"},
        {"[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
         "\"arguments\":[1]}}]}]",
         "arguments must be a JSON object"},
        {"[{\"role\":\"tool\",\"tool_name\":5}]", "messages[0].tool_name must be a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        in = json(bad[i][0]);
        assert_pt_error(pti_api_chat_messages(in, &images), PT_ERR_INVALID_ARG, bad[i][1]);
        cJSON_Delete(in);
    }
}

static void test_openai_messages(void **state)
{
    (void)state;
    bool images = true;
    cJSON *in = json("[{\"role\":\"developer\",\"content\":\"sys\"},"
                     "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                     "{\"type\":\"text\",\"text\":\"b\"}]},"
                     "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
                     "\"type\":\"function\",\"function\":{\"name\":\"add\","
                     "\"arguments\":\"{\\\"x\\\": 1}\"}}]},"
                     "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"2\"}]");
    cJSON *out = pti_api_openai_messages(in, &images);
    assert_non_null(out);
    assert_false(images);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "role")->valuestring,
                        "system");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 1), "content")->valuestring,
                        "ab");
    cJSON *fn = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 2), "tool_calls"), 0),
        "function");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(fn, "arguments"), "x")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 3), "tool_name")->valuestring,
                        "add");
    cJSON_Delete(out);
    cJSON_Delete(in);

    in = json("[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
              "{\"url\":\"data:image/png;base64,aGk=\"}}]}]");
    out = pti_api_openai_messages(in, &images);
    assert_non_null(out);
    assert_true(images);
    cJSON_Delete(out);
    cJSON_Delete(in);

    in = json("[{\"role\":\"user\",\"content\":[{\"type\":\"audio\"}]}]");
    assert_pt_error(pti_api_openai_messages(in, &images), PT_ERR_INVALID_ARG,
                    "invalid message content type: audio");
    cJSON_Delete(in);
    in = json("[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"function\":"
              "{\"name\":\"f\",\"arguments\":\"{not json\"}}]}]");
    assert_pt_error(pti_api_openai_messages(in, &images), PT_ERR_INVALID_ARG,
                    "arguments must be a JSON object");
    cJSON_Delete(in);
}

static void test_tools(void **state)
{
    (void)state;
    int n = -1;
    cJSON *j = json("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                    "\"description\":\"d\",\"parameters\":{\"type\":\"object\"}}}]");
    assert_int_equal(pti_api_tools(j, &n), PT_OK);
    assert_int_equal(n, 1);
    cJSON_Delete(j);
    assert_int_equal(pti_api_tools(NULL, &n), PT_OK);
    assert_int_equal(n, 0);
    const char *bad[][2] = {
        {"{}", "tools must be an array"},
        {"[{\"type\":\"code\",\"function\":{\"name\":\"f\"}}]", "tools[0] must be"},
        {"[{\"type\":\"function\",\"function\":{}}]", "tools[0].function.name"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":3}}]",
         "tools[0].function.parameters"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = json(bad[i][0]);
        assert_pt_status_error(pti_api_tools(j, &n), PT_ERR_INVALID_ARG, bad[i][1]);
        cJSON_Delete(j);
    }
}

static void test_openai_options(void **state)
{
    (void)state;
    cJSON *req = json("{\"model\":\"m\"}");
    cJSON *o = pti_api_openai_options(req);
    pti_api_opts opts;
    pti_api_opts_init(&opts);
    assert_int_equal(pti_api_apply_options(&opts, o), PT_OK);
    assert_float_equal(opts.gen.temperature, 1.0, 0); /* OpenAI's defaults, not Ollama's */
    assert_float_equal(opts.gen.top_p, 1.0, 0);
    assert_int_equal(opts.gen.num_predict, -1);
    cJSON_Delete(o);
    cJSON_Delete(req);

    req = json("{\"temperature\":0,\"top_p\":0.5,\"max_tokens\":7,\"seed\":3,\"stop\":\"\\n\","
               "\"frequency_penalty\":0.5,\"presence_penalty\":0.25}");
    o = pti_api_openai_options(req);
    assert_int_equal(pti_api_apply_options(&opts, o), PT_OK);
    assert_float_equal(opts.gen.temperature, 0, 0);
    assert_float_equal(opts.gen.top_p, 0.5, 0);
    assert_int_equal(opts.gen.num_predict, 7);
    assert_int_equal(opts.gen.seed, 3);
    assert_int_equal(opts.gen.n_stop, 1);
    assert_string_equal(opts.gen.stop[0], "\n");
    assert_float_equal(opts.gen.frequency_penalty, 0.5, 0);
    assert_float_equal(opts.gen.presence_penalty, 0.25, 0);
    cJSON_Delete(o);
    cJSON_Delete(req);

    /* max_completion_tokens wins over the deprecated max_tokens */
    req = json("{\"max_tokens\":7,\"max_completion_tokens\":9,\"stop\":[\"a\",\"b\"]}");
    o = pti_api_openai_options(req);
    assert_int_equal(pti_api_apply_options(&opts, o), PT_OK);
    assert_int_equal(opts.gen.num_predict, 9);
    assert_int_equal(opts.gen.n_stop, 2);
    cJSON_Delete(o);
    cJSON_Delete(req);
    pti_api_opts_free(&opts);

    req = json("{\"temperature\":\"warm\"}");
    assert_pt_error(pti_api_openai_options(req), PT_ERR_INVALID_ARG,
                    "\"temperature\" must be a number");
    cJSON_Delete(req);
    req = json("{\"stop\":5}");
    assert_pt_error(pti_api_openai_options(req), PT_ERR_INVALID_ARG, "\"stop\" must be a string");
    cJSON_Delete(req);
}

static void test_context_ids(void **state)
{
    (void)state;
    int32_t n = 0;
    cJSON *j = json("[1, 2, 99]");
    int32_t *ids = pti_api_context_ids(j, 100, &n);
    assert_int_equal(n, 3);
    assert_int_equal(ids[2], 99);
    free(ids);
    cJSON_Delete(j);
    assert_null(pti_api_context_ids(NULL, 100, &n));
    assert_int_equal(n, 0);
    const char *bad[] = {"[100]", "[-1]", "[1.5]", "[\"1\"]", "{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = json(bad[i]);
        assert_null(pti_api_context_ids(j, 100, &n));
        assert_int_equal(n, -1);
        assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
        cJSON_Delete(j);
    }
}

static void test_fields(void **state)
{
    (void)state;
    cJSON *j = json("{\"stream\":false,\"raw\":1,\"system\":\"s\",\"template\":2}");
    bool b = true;
    const char *s = NULL;
    assert_int_equal(pti_api_bool(j, "stream", true, &b), PT_OK);
    assert_false(b);
    assert_int_equal(pti_api_bool(j, "missing", true, &b), PT_OK);
    assert_true(b);
    assert_pt_status_error(pti_api_bool(j, "raw", false, &b), PT_ERR_INVALID_ARG,
                           "\"raw\" must be a boolean");
    assert_int_equal(pti_api_string(j, "system", &s), PT_OK);
    assert_string_equal(s, "s");
    assert_pt_status_error(pti_api_string(j, "template", &s), PT_ERR_INVALID_ARG,
                           "\"template\" must be a string");
    cJSON_Delete(j);
}

typedef struct split_out {
    char thinking[256], content[256];
} split_out;

static bool collect(void *user, bool thinking, const char *text, size_t len)
{
    split_out *o = user;
    char *dst = thinking ? o->thinking : o->content;
    assert_true(len > 0);
    assert_true(strlen(dst) + len < sizeof o->thinking);
    strncat(dst, text, len);
    return true;
}

/* Feeds text in pieces of `step` bytes (0: all at once), then finishes. */
static void split(bool enabled, const char *text, size_t step, const char *thinking,
                  const char *content)
{
    pti_think_split t;
    pti_think_split_init(&t, enabled);
    split_out o = {{0}, {0}};
    size_t n = strlen(text);
    if (step == 0)
        step = n ? n : 1;
    for (size_t i = 0; i < n; i += step)
        assert_true(
            pti_think_split_push(&t, text + i, i + step < n ? step : n - i, false, collect, &o));
    assert_true(pti_think_split_push(&t, "", 0, true, collect, &o));
    assert_string_equal(o.thinking, thinking);
    assert_string_equal(o.content, content);
}

static void test_think_split(void **state)
{
    (void)state;
    for (size_t step = 0; step <= 3; step++) {
        split(true, "<think>\nhmm, 2+2</think>\n\nIt is 4.", step, "\nhmm, 2+2", "It is 4.");
        split(true, "  \n<think>a</think>b", step, "a", "b");
        split(true, "The answer is 4.", step, "", "The answer is 4.");
        split(true, "<thin", step, "", "<thin"); /* an unfinished tag at the end is content */
        split(true, "<think>still thinking</thi", step, "still thinking</thi", "");
        split(true, "<think></think>", step, "", "");
        split(true, "x</think>y", step, "", "x</think>y"); /* no open tag: all content */
        split(false, "<think>a</think>b", step, "", "<think>a</think>b");
    }
    split(true, "               <think>late", 0, "late", ""); /* white space is skipped */
    split(true, "", 0, "", "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_option_defaults_and_values),
        cmocka_unit_test(test_option_unknown_and_ignored),
        cmocka_unit_test(test_option_errors),
        cmocka_unit_test(test_keep_alive),
        cmocka_unit_test(test_keep_alive_errors),
        cmocka_unit_test(test_go_duration_direct),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_openai_format),
        cmocka_unit_test(test_chat_messages),
        cmocka_unit_test(test_openai_messages),
        cmocka_unit_test(test_tools),
        cmocka_unit_test(test_openai_options),
        cmocka_unit_test(test_context_ids),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_think_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
