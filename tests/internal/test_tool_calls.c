/* Tool calls: rendering tool definitions through the C-coded chat families byte for byte as
 * jinja2 renders the official templates' tools branch (tests/fixtures/chat_tools/cases.json,
 * made by gen_tool_templates.py), the tool-call tags Ollama derives from a Go template, and the
 * streaming parser: the same result whatever the chunking (whole, 1 byte, random pieces),
 * content around and between calls, several calls, arrays, string arguments, malformed JSON
 * released as content, partial tags held back and released at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "serve/http/tool_calls.h"

static cJSON *load_json(const char *path)
{
    size_t n;
    char *text = pt_test_read_file(path, &n);
    cJSON *j = cJSON_ParseWithLength(text, n);
    free(text);
    assert_non_null(j);
    return j;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- rendering ------------------------------------------------------------------------------ */

static void test_render_against_jinja(void **state)
{
    (void)state;
    cJSON *cases = load_json(PT_FIXTURES_DIR "/chat_tools/cases.json");
    const cJSON *c;
    int n_ok = 0, n_err = 0;
    cJSON_ArrayForEach(c, cases)
    {
        const char *fam = str(c, "family");
        char path[512];
        snprintf(path, sizeof path, PT_FIXTURES_DIR "/chat/%s.jinja", fam);
        size_t jlen;
        char *jinja = pt_test_read_file(path, &jlen);
        pti_chat_template *t = pti_chat_template_detect(jinja, jlen, NULL);
        free(jinja);
        assert_non_null(t);
        assert_true(pti_chat_family_supports_tools(pti_chat_template_family(t)));
        const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
        size_t n = (size_t)cJSON_GetArraySize(msgs);
        pti_chat_message m[16];
        pti_chat_tool_call calls[16][4];
        assert_true(n <= 16);
        for (size_t i = 0; i < n; i++) {
            const cJSON *mj = cJSON_GetArrayItem(msgs, (int)i);
            m[i] = (pti_chat_message){.role = str(mj, "role"),
                                      .content = str(mj, "content"),
                                      .tool_call_id = str(mj, "tool_call_id")};
            const cJSON *tcs = cJSON_GetObjectItem(mj, "tool_calls");
            size_t k = 0;
            const cJSON *tc;
            cJSON_ArrayForEach(tc, tcs)
            {
                const cJSON *fn = cJSON_GetObjectItem(tc, "function");
                calls[i][k++] = (pti_chat_tool_call){.id = str(tc, "id"),
                                                     .name = str(fn, "name"),
                                                     .arguments = str(tc, "arguments_text")};
            }
            m[i].tool_calls = k ? calls[i] : NULL;
            m[i].n_tool_calls = k;
        }
        pti_chat_opts o = {.bos_token = str(c, "bos_token"),
                           .eos_token = str(c, "eos_token"),
                           .date_string = "26 Jul 2024"};
        char *tools = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "tools"));
        bool gen = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
        size_t len = 0;
        char *out = pti_chat_render_tools(t, m, n, tools, gen, &o, &len);
        const char *want = str(c, "expected");
        if (want) {
            if (!out)
                fail_msg("%s/%s/%d: %s", fam, str(c, "conversation"), gen, pt_last_error());
            if (strcmp(out, want) != 0)
                fail_msg("%s/%s/%d:\n got  [%s]\n want [%s]", fam, str(c, "conversation"), gen, out,
                         want);
            assert_int_equal(len, strlen(want));
            n_ok++;
        } else {
            if (out)
                fail_msg("%s/%s: jinja raised \"%s\", we rendered [%s]", fam,
                         str(c, "conversation"), str(c, "error"), out);
            assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
            assert_non_null(strstr(pt_last_error(), str(c, "error")));
            n_err++;
        }
        free(out);
        free(tools);
        pti_chat_template_free(t);
    }
    assert_true(n_ok >= 40);
    assert_true(n_err >= 4);
    cJSON_Delete(cases);
}

static void test_render_edges(void **state)
{
    (void)state;
    pti_chat_template *t = pti_chat_template_new(PTI_CHAT_QWEN25);
    pti_chat_message m = {.role = "user", .content = "hi"};
    /* no tools or an empty list: exactly pti_chat_render */
    char *a = pti_chat_render(t, &m, 1, true, NULL, NULL);
    char *b = pti_chat_render_tools(t, &m, 1, NULL, true, NULL, NULL);
    char *c = pti_chat_render_tools(t, &m, 1, "[]", true, NULL, NULL);
    assert_string_equal(a, b);
    assert_string_equal(a, c);
    free(a);
    free(b);
    free(c);
    assert_pt_error(pti_chat_render_tools(t, &m, 1, "{\"a\": 1}", true, NULL, NULL),
                    PT_ERR_INVALID_ARG, "tools: not a JSON array");
    assert_pt_error(pti_chat_render_tools(t, &m, 1, "[1]", true, NULL, NULL), PT_ERR_INVALID_ARG,
                    "not a JSON object");
    assert_pt_error(pti_chat_render_tools(t, &m, 1, "[{", true, NULL, NULL), PT_ERR_INVALID_ARG,
                    "not a JSON array");
    pti_chat_template_free(t);
    t = pti_chat_template_new(PTI_CHAT_GEMMA);
    assert_false(pti_chat_family_supports_tools(PTI_CHAT_GEMMA));
    assert_pt_error(pti_chat_render_tools(t, &m, 1, "[{\"type\": \"function\"}]", true, NULL, NULL),
                    PT_ERR_UNSUPPORTED, "gemma chat template does not support tools");
    pti_chat_template_free(t);
}

/* ---- tags ----------------------------------------------------------------------------------- */

static void expect_tags(const char *tmpl_name, const char *open, const char *close)
{
    cJSON *templates = load_json(PT_FIXTURES_DIR "/gotmpl/templates.json");
    const char *src = str(templates, tmpl_name);
    char o[64], c[64];
    assert_true(pti_tool_tags_from_template(src, strlen(src), o, c, sizeof o));
    assert_string_equal(o, open);
    assert_string_equal(c, close);
    cJSON_Delete(templates);
}

static void test_tags(void **state)
{
    (void)state;
    expect_tags("qwen2.5", "<tool_call>", "</tool_call>");
    expect_tags("qwen3", "<tool_call>", "</tool_call>");
    expect_tags("mistral", "[TOOL_CALLS] [", "");
    expect_tags("llama3.2", "{", "");
    expect_tags("chatml-legacy", "{", "");
    char o[64], c[64];
    assert_false(pti_tool_tags_from_template("{{ if }", 7, o, c, sizeof o));
    assert_string_equal(o, "{");
    assert_string_equal(c, "");
    const char *crlf = "{{ if .ToolCalls }}\r\n  [CALL]\r\n{{ end }}";
    assert_true(pti_tool_tags_from_template(crlf, strlen(crlf), o, c, sizeof o));
    assert_string_equal(o, "[CALL]");
    assert_true(pti_tool_tags_for_family(PTI_CHAT_QWEN3, o, c, sizeof o));
    assert_string_equal(o, "<tool_call>");
    assert_string_equal(c, "</tool_call>");
    assert_true(pti_tool_tags_for_family(PTI_CHAT_MISTRAL, o, c, sizeof o));
    assert_string_equal(o, "[TOOL_CALLS]");
    assert_true(pti_tool_tags_for_family(PTI_CHAT_LLAMA3, o, c, sizeof o));
    assert_string_equal(o, "{");
    assert_false(pti_tool_tags_for_family(PTI_CHAT_GEMMA, o, c, sizeof o));
    /* a tag that does not fit: false, the JSON fallback */
    assert_false(pti_tool_tags_for_family(PTI_CHAT_QWEN25, o, c, 5));
    assert_string_equal(o, "{");
}

/* ---- parsing -------------------------------------------------------------------------------- */

typedef struct result {
    char *content;
    char *calls; /* the calls array as compact JSON */
} result;

/* Feeds text in pieces: chunk 0 = whole, k > 0 = k bytes, -1 = random sizes (seeded). */
static result parse(const char *open, const char *close, const char *text, int chunk)
{
    pti_tool_parser *p = pti_tool_parser_new(open, close);
    assert_non_null(p);
    pti_tool_text content = {0};
    cJSON *calls = cJSON_CreateArray();
    size_t n = strlen(text), i = 0;
    unsigned seed = 12345;
    while (i < n) {
        size_t k = chunk == 0 ? n : chunk > 0 ? (size_t)chunk : 0;
        if (chunk < 0) {
            seed = seed * 1103515245u + 12345u;
            k = 1 + (seed >> 16) % 9;
        }
        if (k > n - i)
            k = n - i;
        assert_true(pti_tool_parser_push(p, text + i, k, &content, calls));
        i += k;
    }
    assert_true(pti_tool_parser_finish(p, &content, calls));
    assert_false(pti_tool_parser_holding(p));
    result r = {strdup(content.data ? content.data : ""), cJSON_PrintUnformatted(calls)};
    free(content.data);
    cJSON_Delete(calls);
    pti_tool_parser_free(p);
    return r;
}

static void expect_parse(const char *open, const char *close, const char *text,
                         const char *want_content, const char *want_calls)
{
    int chunks[] = {0, 1, 2, 3, 7, -1};
    for (size_t k = 0; k < sizeof chunks / sizeof *chunks; k++) {
        result r = parse(open, close, text, chunks[k]);
        if (strcmp(r.content, want_content) != 0 || strcmp(r.calls, want_calls) != 0)
            fail_msg("%s (chunk %d):\n content [%s]\n want    [%s]\n calls   %s\n want    %s", text,
                     chunks[k], r.content, want_content, r.calls, want_calls);
        free(r.content);
        free(r.calls);
    }
}

#define WEATHER(city, i)                                                                           \
    "{\"function\":{\"index\":" #i ",\"name\":\"get_weather\",\"arguments\":{\"city\":\"" city     \
    "\"}}}"

static void test_qwen_calls(void **state)
{
    (void)state;
    const char *o = "<tool_call>", *c = "</tool_call>";
    expect_parse(o, c, "plain text, no call", "plain text, no call", "[]");
    expect_parse(o, c,
                 "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                 "{\"city\": \"Paris\"}}\n</tool_call>",
                 "Let me check.", "[" WEATHER("Paris", 0) "]");
    expect_parse(o, c,
                 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
                 "\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                 "{\"city\": \"R}o{m\\\"e\"}}\n</tool_call> done",
                 "\n done",
                 "[" WEATHER("Paris", 0) ",{\"function\":{\"index\":1,\"name\":\"get_weather\","
                                         "\"arguments\":{\"city\":\"R}o{m\\\"e\"}}}]");
    /* arguments given as a string holding JSON; "parameters"; an array of calls */
    expect_parse(o, c,
                 "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1, 2]}\"}"
                 "</tool_call><tool_call>[{\"name\": \"g\", \"parameters\": {}}, "
                 "{\"name\": \"unknown_fn\"}]</tool_call>",
                 "",
                 "[{\"function\":{\"index\":0,\"name\":\"f\",\"arguments\":{\"a\":[1,2]}}},"
                 "{\"function\":{\"index\":1,\"name\":\"g\",\"arguments\":{}}},"
                 "{\"function\":{\"index\":2,\"name\":\"unknown_fn\",\"arguments\":{}}}]");
    /* malformed JSON and non-calls are content, tag included */
    expect_parse(o, c, "a<tool_call>{not json}</tool_call> b",
                 "a<tool_call>{not json}</tool_call> b", "[]");
    expect_parse(o, c, "<tool_call>{\"foo\": 1}</tool_call>", "<tool_call>{\"foo\": 1}</tool_call>",
                 "[]");
    expect_parse(o, c, "<tool_call>{\"name\": \"f\", \"arguments\": \"not json\"}",
                 "<tool_call>{\"name\": \"f\", \"arguments\": \"not json\"}", "[]");
    /* an unfinished call at the end is content; so is a partial tag */
    expect_parse(o, c, "x <tool_call>\n{\"name\": \"get_weather\", \"argu",
                 "x <tool_call>\n{\"name\": \"get_weather\", \"argu", "[]");
    expect_parse(o, c, "x <tool_ca", "x <tool_ca", "[]");
    expect_parse(o, c, "<<tool_call>>", "<<tool_call>>", "[]");
    expect_parse(o, c, "<tool_call>   ", "<tool_call>   ", "[]");
    /* a call without the close tag still counts (generation stopped at it) */
    expect_parse(o, c,
                 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                 "\"Paris\"}}",
                 "", "[" WEATHER("Paris", 0) "]");
}

static void test_mistral_and_json_calls(void **state)
{
    (void)state;
    const char *two = "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                      "\"Paris\"}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": "
                      "\"Rome\"}}]";
    const char *want = "[" WEATHER("Paris", 0) "," WEATHER("Rome", 1) "]";
    expect_parse("[TOOL_CALLS]", "", two, "", want);
    expect_parse("[TOOL_CALLS] [", "", two, "", want);
    /* Llama 3: JSON objects are calls when they look like one */
    expect_parse("{", "", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "",
                 "[" WEATHER("Paris", 0) "]");
    expect_parse("{", "", "Use {braces} and {\"name\": \"Bob\", \"age\": 3} freely.",
                 "Use {braces} and {\"name\": \"Bob\", \"age\": 3} freely.", "[]");
    expect_parse("{", "", "x {\"name\": \"f\", \"parameters\": {}} y {unclosed", "x y {unclosed",
                 "[{\"function\":{\"index\":0,\"name\":\"f\",\"arguments\":{}}}]");
}

static void test_parser_errors(void **state)
{
    (void)state;
    assert_pt_error(pti_tool_parser_new("", NULL), PT_ERR_INVALID_ARG, "open tag is empty");
    assert_pt_error(pti_tool_parser_new(NULL, NULL), PT_ERR_INVALID_ARG, "open tag is empty");
    pti_tool_parser_free(NULL);
    pti_tool_parser *p = pti_tool_parser_new("<tool_call>", "</tool_call>");
    pti_tool_text t = {0};
    assert_false(pti_tool_parser_push(p, "x", 1, NULL, NULL));
    /* reuse after finish */
    cJSON *calls = cJSON_CreateArray();
    assert_true(
        pti_tool_parser_push(p, "<tool_call>{\"name\":\"a\",\"arguments\":{}}", 38, &t, calls));
    assert_true(pti_tool_parser_finish(p, &t, calls));
    assert_true(
        pti_tool_parser_push(p, "<tool_call>{\"name\":\"b\",\"arguments\":{}}", 38, &t, calls));
    assert_true(pti_tool_parser_finish(p, &t, calls));
    assert_int_equal(cJSON_GetArraySize(calls), 2);
    assert_int_equal(pti_tool_parser_ncalls(p), 2);
    cJSON_Delete(calls);
    free(t.data);
    pti_tool_parser_free(p);
}

/* A long call streamed byte by byte is scanned once (a quadratic rescan would take minutes),
 * and random text made of the syntax's pieces gives the same result in any chunking. */
static void test_long_and_random(void **state)
{
    (void)state;
    size_t big = 300000;
    char *text = malloc(big + 100);
    strcpy(text, "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"");
    size_t n = strlen(text);
    memset(text + n, 'x', big);
    strcpy(text + n + big, "\"}}</tool_call>");
    result r = parse("<tool_call>", "</tool_call>", text, 1);
    assert_string_equal(r.content, "");
    assert_int_equal(strlen(r.calls), big + 58);
    free(r.content);
    free(r.calls);
    free(text);

    static const char *const pieces[] = {"<tool_call>",
                                         "</tool_call>",
                                         "{",
                                         "}",
                                         "[",
                                         "]",
                                         "\"",
                                         "\\",
                                         ",",
                                         " ",
                                         "\n",
                                         "a",
                                         "\"name\": \"f\"",
                                         "\"arguments\": {}",
                                         "<tool",
                                         "_call>",
                                         ":"};
    unsigned seed = 7;
    char buf[512];
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = 0;
        buf[0] = '\0';
        for (int k = 0; k < 24; k++) {
            seed = seed * 1103515245u + 12345u;
            const char *pc = pieces[(seed >> 16) % (sizeof pieces / sizeof *pieces)];
            if (len + strlen(pc) + 1 > sizeof buf)
                break;
            strcpy(buf + len, pc);
            len += strlen(pc);
        }
        const char *open = iter % 3 == 0 ? "{" : "<tool_call>";
        const char *close = iter % 3 == 0 ? "" : "</tool_call>";
        result whole = parse(open, close, buf, 0);
        result bytes = parse(open, close, buf, 1);
        result rnd = parse(open, close, buf, -1);
        if (strcmp(whole.content, bytes.content) || strcmp(whole.calls, bytes.calls) ||
            strcmp(whole.content, rnd.content) || strcmp(whole.calls, rnd.calls))
            fail_msg("chunking changes the result for [%s]:\n whole [%s] %s\n bytes [%s] %s\n "
                     "random [%s] %s",
                     buf, whole.content, whole.calls, bytes.content, bytes.calls, rnd.content,
                     rnd.calls);
        free(whole.content);
        free(whole.calls);
        free(bytes.content);
        free(bytes.calls);
        free(rnd.content);
        free(rnd.calls);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_against_jinja),
        cmocka_unit_test(test_render_edges),
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_qwen_calls),
        cmocka_unit_test(test_mistral_and_json_calls),
        cmocka_unit_test(test_parser_errors),
        cmocka_unit_test(test_long_and_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
