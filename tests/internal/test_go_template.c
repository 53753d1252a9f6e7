/* The Go text/template subset and Ollama's prompt assembly against Go itself: every case of
 * tests/fixtures/gotmpl/expected.json was produced by Go's text/template and encoding/json
 * (gen_expected.go, with a reproduction of Ollama's Values/collate/Execute and of the
 * library templates in templates.json); here the C implementation must give the same bytes,
 * the same parse failures and the same execution failures. Plus what Go 1.19 cannot produce
 * (range over an integer, else with), the error texts, Ollama helpers (references, the
 * tool-call tag text), limits and garbage input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "serve/http/go_template.h"
#include "serve/http/ollama_prompt.h"

#define FIXTURE PT_FIXTURES_DIR "/gotmpl/expected.json"
#define TEMPLATES PT_FIXTURES_DIR "/gotmpl/templates.json"

static cJSON *load_json(const char *path)
{
    size_t n;
    char *text = pt_test_read_file(path, &n);
    cJSON *j = cJSON_ParseWithLength(text, n);
    free(text);
    assert_non_null(j);
    return j;
}

static char *run(const char *tmpl, const char *data_json)
{
    pti_gotmpl *t = pti_gotmpl_parse(tmpl, strlen(tmpl));
    if (!t)
        return NULL;
    cJSON *data = cJSON_Parse(data_json);
    char *out = pti_gotmpl_execute(t, data, NULL);
    cJSON_Delete(data);
    pti_gotmpl_free(t);
    return out;
}

static void expect_output(const char *tmpl, const char *data, const char *want)
{
    char *out = run(tmpl, data);
    if (!out)
        fail_msg("%s: %s", tmpl, pt_last_error());
    if (strcmp(out, want) != 0)
        fail_msg("%s:\n got  [%s]\n want [%s]", tmpl, out, want);
    free(out);
}

static void test_generic_against_go(void **state)
{
    (void)state;
    cJSON *fx = load_json(FIXTURE);
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(fx, "generic"))
    {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *tmpl = cJSON_GetObjectItem(c, "template")->valuestring;
        char *data = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "data"));
        pti_gotmpl *t = pti_gotmpl_parse(tmpl, strlen(tmpl));
        if (cJSON_IsTrue(cJSON_GetObjectItem(c, "parse_error"))) {
            if (t)
                fail_msg("%s: Go rejects the template, we parsed it", name);
            assert_int_equal(pt_last_status(), PT_ERR_FORMAT);
            assert_non_null(strstr(pt_last_error(), "template: line "));
        } else {
            if (!t)
                fail_msg("%s: parse failed: %s", name, pt_last_error());
            cJSON *d = cJSON_Parse(data);
            size_t len = 0;
            char *out = pti_gotmpl_execute(t, d, &len);
            const cJSON *want = cJSON_GetObjectItem(c, "output");
            if (cJSON_IsTrue(cJSON_GetObjectItem(c, "error"))) {
                if (out)
                    fail_msg("%s: Go fails, we printed [%s]", name, out);
                assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
            } else {
                if (!out)
                    fail_msg("%s: %s", name, pt_last_error());
                if (strcmp(out, want->valuestring) != 0)
                    fail_msg("%s:\n got  [%s]\n want [%s]", name, out, want->valuestring);
                assert_int_equal(len, strlen(want->valuestring));
            }
            free(out);
            cJSON_Delete(d);
        }
        pti_gotmpl_free(t);
        free(data);
        n++;
    }
    assert_true(n >= 40);
    cJSON_Delete(fx);
}

static void test_ollama_prompts_against_go(void **state)
{
    (void)state;
    cJSON *fx = load_json(FIXTURE);
    cJSON *templates = load_json(TEMPLATES);
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(fx, "chat"))
    {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *src =
            cJSON_GetObjectItem(templates, cJSON_GetObjectItem(c, "template")->valuestring)
                ->valuestring;
        pti_gotmpl *t = pti_gotmpl_parse(src, strlen(src));
        if (!t)
            fail_msg("%s: %s", name, pt_last_error());
        const cJSON *def = cJSON_GetObjectItem(c, "default_system");
        size_t len = 0;
        char *out;
        if (cJSON_IsTrue(cJSON_GetObjectItem(c, "generate"))) {
            const cJSON *sys = cJSON_GetObjectItem(c, "system");
            const cJSON *prompt = cJSON_GetObjectItem(c, "prompt");
            const cJSON *suffix = cJSON_GetObjectItem(c, "suffix");
            out = pti_ollama_generate_prompt(t, sys ? sys->valuestring : NULL,
                                             prompt ? prompt->valuestring : NULL,
                                             suffix ? suffix->valuestring : NULL, &len);
        } else {
            out = pti_ollama_chat_prompt(
                t, cJSON_GetObjectItem(c, "messages"), cJSON_GetObjectItem(c, "tools"),
                def ? def->valuestring : NULL, cJSON_IsTrue(cJSON_GetObjectItem(c, "think_set")),
                cJSON_IsTrue(cJSON_GetObjectItem(c, "think")), &len);
        }
        if (!out)
            fail_msg("%s: %s", name, pt_last_error());
        const char *want = cJSON_GetObjectItem(c, "output")->valuestring;
        if (strcmp(out, want) != 0)
            fail_msg("%s:\n got  [%s]\n want [%s]", name, out, want);
        assert_int_equal(len, strlen(want));
        free(out);
        pti_gotmpl_free(t);
        n++;
    }
    assert_true(n >= 150);
    cJSON_Delete(templates);
    cJSON_Delete(fx);
}

/* Constructs of Go newer than the 1.19 that made the fixtures: expectations from the Go
 * documentation (range over an int since 1.22, else with since 1.23). */
static void test_newer_go(void **state)
{
    (void)state;
    expect_output("{{ range 3 }}{{ . }}{{ end }}|{{ range $i := 2 }}[{{ $i }}]{{ end }}"
                  "{{ range 0 }}x{{ else }}none{{ end }}",
                  "{}", "012|[0][1]none");
    expect_output("{{ with .A }}a{{ else with .B }}{{ . }}{{ else }}none{{ end }}",
                  "{\"B\": \"bee\"}", "bee");
    expect_output("{{ with .A }}a{{ else with .B }}{{ . }}{{ else }}none{{ end }}", "{}", "none");
}

static void expect_parse_error(const char *tmpl, pt_status st, const char *msg)
{
    pti_gotmpl *t = pti_gotmpl_parse(tmpl, strlen(tmpl));
    assert_pt_error(t, st, msg);
}

static void expect_exec_error(const char *tmpl, const char *data, const char *msg)
{
    char *out = run(tmpl, data);
    assert_pt_error(out, PT_ERR_INVALID_ARG, msg);
}

static void test_errors(void **state)
{
    (void)state;
    expect_parse_error("a\n{{ if .A }}", PT_ERR_FORMAT, "template: line 2: unexpected EOF");
    expect_parse_error("{{ .A", PT_ERR_FORMAT, "unclosed action");
    expect_parse_error("{{ end }}", PT_ERR_FORMAT, "unexpected {{end}}");
    expect_parse_error("{{ $x }}", PT_ERR_FORMAT, "undefined variable \"$x\"");
    expect_parse_error("{{ nosuch }}", PT_ERR_FORMAT, "function \"nosuch\" not defined");
    expect_parse_error("{{ define \"x\" }}{{ end }}", PT_ERR_UNSUPPORTED, "{{define}}");
    expect_parse_error("{{ template \"x\" }}", PT_ERR_UNSUPPORTED, "{{template}}");
    expect_parse_error("{{ html .A }}", PT_ERR_UNSUPPORTED, "\"html\" is not supported");
    expect_parse_error("{{ \"\\q\" }}", PT_ERR_FORMAT, "invalid escape");
    expect_parse_error("{{/* x */ .A }}", PT_ERR_FORMAT, "comment ends before closing delimiter");
    expect_exec_error("{{ index .L 3 }}", "{\"L\": [1]}", "index out of range: 3");
    expect_exec_error("\n{{ eq 1 \"a\" }}", "{}", "line 2: incompatible types for comparison");
    expect_exec_error("{{ .S.X }}", "{\"S\": \"s\"}", "can't evaluate field X in type string");
    expect_exec_error("{{ .N.X }}", "{\"N\": null}", "nil pointer evaluating interface {}.X");
    expect_exec_error("{{ len 1 }}", "{}", "len of type int");
    expect_exec_error("{{ 1 2 }}", "{}", "can't give argument to non-function");
    expect_exec_error("{{ .A.B 1 }}", "{\"A\": {}}", "B is not a method but has arguments");
}

static void test_limits_and_garbage(void **state)
{
    (void)state;
    /* deep nesting is refused, not a stack overflow */
    char deep[4096] = "{{ ";
    for (int i = 0; i < 300; i++)
        strcat(deep, "(");
    expect_parse_error(deep, PT_ERR_FORMAT, "nesting deeper than");
    char ifs[8192] = "";
    for (int i = 0; i < 300; i++)
        strcat(ifs, "{{if 1}}");
    expect_parse_error(ifs, PT_ERR_FORMAT, "nesting deeper than");
    /* output over 64 MiB: nested ranges multiply */
    expect_exec_error("{{ range 2000 }}{{ range 2000 }}0123456789abcdefghij{{ end }}{{ end }}",
                      "{}", "output exceeds 64 MiB");
    /* a loop that prints nothing still ends, and so does one that makes strings */
    expect_exec_error("{{ range 100000000 }}{{ end }}", "{}", "exceeds 20000000 steps");
    expect_exec_error("{{ range 10000 }}{{ $x := printf \"%09999d\" 1 }}{{ end }}", "{}",
                      "needs more than 64 MiB");
    /* prefixes of real templates never crash: each is either a parse error or runs */
    cJSON *templates = load_json(TEMPLATES);
    const cJSON *tj;
    cJSON_ArrayForEach(tj, templates)
    {
        const char *src = tj->valuestring;
        size_t n = strlen(src);
        for (size_t k = 0; k <= n; k += 7) {
            pti_gotmpl *t = pti_gotmpl_parse(src, k);
            if (t) {
                cJSON *data = cJSON_Parse("{\"Messages\": [{\"Role\": \"user\"}], \"Tools\": 1}");
                free(pti_gotmpl_execute(t, data, NULL));
                cJSON_Delete(data);
            }
            pti_gotmpl_free(t);
        }
    }
    cJSON_Delete(templates);
    /* random token soup parses or fails cleanly, and runs or fails cleanly */
    static const char *const toks[] = {
        "{{",    "}}", "{{- ", " -}}",   " ",    "if",    "else", "end",   "range", "with", "$x",
        ":=",    "=",  ".A",   ".",      "(",    ")",     "|",    "\"s\"", "1",     "len",  "index",
        "slice", "eq", "and",  "printf", "json", "break", "$",    ",",     "/*",    "*/"};
    unsigned seed = 99;
    char soup[512];
    cJSON *d = cJSON_Parse("{\"A\": [1, {\"A\": \"x\"}], \"B\": null}");
    for (int iter = 0; iter < 5000; iter++) {
        size_t len = 0;
        for (int k = 0; k < 30; k++) {
            seed = seed * 1103515245u + 12345u;
            const char *tk = toks[(seed >> 16) % (sizeof toks / sizeof *toks)];
            if (len + strlen(tk) + 1 > sizeof soup)
                break;
            memcpy(soup + len, tk, strlen(tk));
            len += strlen(tk);
        }
        pti_gotmpl *ts = pti_gotmpl_parse(soup, len);
        if (ts)
            free(pti_gotmpl_execute(ts, d, NULL));
        pti_gotmpl_free(ts);
    }
    cJSON_Delete(d);
    /* a NUL inside the text is text; a length without NUL termination is honoured */
    pti_gotmpl *t = pti_gotmpl_parse("a\0b{{ 1 }}xyz", 11);
    assert_non_null(t);
    size_t len;
    char *out = pti_gotmpl_execute(t, NULL, &len);
    assert_int_equal(len, 5);
    assert_memory_equal(out, "a\0b1x", 5);
    free(out);
    pti_gotmpl_free(t);
    pti_gotmpl_free(NULL);
    /* the template keeps its own copy of the source */
    char *src = strdup("text {{ .A }} more");
    t = pti_gotmpl_parse(src, strlen(src));
    memset(src, '#', strlen(src));
    free(src);
    cJSON *d2 = cJSON_Parse("{\"A\": 1}");
    out = pti_gotmpl_execute(t, d2, NULL);
    assert_string_equal(out, "text 1 more");
    free(out);
    cJSON_Delete(d2);
    pti_gotmpl_free(t);
}

static void test_references_and_tags(void **state)
{
    (void)state;
    cJSON *templates = load_json(TEMPLATES);
    const char *qwen = cJSON_GetObjectItem(templates, "qwen2.5")->valuestring;
    const char *mistral = cJSON_GetObjectItem(templates, "mistral")->valuestring;
    const char *legacy = cJSON_GetObjectItem(templates, "chatml-legacy")->valuestring;
    const char *fim = cJSON_GetObjectItem(templates, "codellama-fim")->valuestring;
    pti_gotmpl *tq = pti_gotmpl_parse(qwen, strlen(qwen));
    pti_gotmpl *tm = pti_gotmpl_parse(mistral, strlen(mistral));
    pti_gotmpl *tl = pti_gotmpl_parse(legacy, strlen(legacy));
    pti_gotmpl *tf = pti_gotmpl_parse(fim, strlen(fim));
    assert_true(tq && tm && tl && tf);
    assert_true(pti_gotmpl_references(tq, "Tools"));
    assert_true(pti_gotmpl_references(tq, "Messages"));
    assert_true(pti_gotmpl_references(tq, "ToolCalls"));
    assert_false(pti_gotmpl_references(tq, "Suffix"));
    assert_true(pti_gotmpl_references(tm, "Tools")); /* as $.Tools */
    assert_false(pti_gotmpl_references(tl, "Tools"));
    assert_false(pti_gotmpl_references(tl, "Messages"));
    assert_true(pti_gotmpl_references(tf, "Suffix"));
    char tag[64];
    assert_true(pti_gotmpl_first_text_in_if(tq, "ToolCalls", tag, sizeof tag));
    assert_string_equal(tag, "<tool_call>\n");
    assert_true(pti_gotmpl_first_text_in_if(tm, "ToolCalls", tag, sizeof tag));
    assert_string_equal(tag, "[TOOL_CALLS] [");
    assert_false(pti_gotmpl_first_text_in_if(tl, "ToolCalls", tag, sizeof tag));
    pti_gotmpl_free(tq);
    pti_gotmpl_free(tm);
    pti_gotmpl_free(tl);
    pti_gotmpl_free(tf);
    cJSON_Delete(templates);
}

static void test_prompt_input_errors(void **state)
{
    (void)state;
    pti_gotmpl *t = pti_gotmpl_parse("{{ .Prompt }}", 13);
    cJSON *bad = cJSON_Parse("[{\"content\": \"x\"}]");
    assert_pt_error(pti_ollama_chat_prompt(t, bad, NULL, NULL, false, false, NULL),
                    PT_ERR_INVALID_ARG, "invalid message format");
    cJSON_Delete(bad);
    bad = cJSON_Parse("[{\"role\": \"user\", \"content\": 3}]");
    assert_pt_error(pti_ollama_chat_prompt(t, bad, NULL, NULL, false, false, NULL),
                    PT_ERR_INVALID_ARG, "content of message 0");
    cJSON *tools = cJSON_Parse("{}");
    assert_pt_error(pti_ollama_chat_prompt(t, NULL, tools, NULL, false, false, NULL),
                    PT_ERR_INVALID_ARG, "invalid tools");
    cJSON_Delete(tools);
    cJSON_Delete(bad);
    /* string tool-call arguments holding JSON are parsed into the object */
    const char *src = "{{ range .Messages }}{{ range .ToolCalls }}{{ .Function.Arguments }}"
                      "{{ .Function.Arguments.a }}{{ end }}{{ end }}";
    pti_gotmpl *t2 = pti_gotmpl_parse(src, strlen(src));
    cJSON *msgs = cJSON_Parse("[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": "
                              "{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}}]}]");
    char *out = pti_ollama_chat_prompt(t2, msgs, NULL, NULL, false, false, NULL);
    assert_non_null(out);
    assert_string_equal(out, "{\"a\":1}1");
    free(out);
    cJSON_Delete(msgs);
    pti_gotmpl_free(t2);
    pti_gotmpl_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generic_against_go),
        cmocka_unit_test(test_ollama_prompts_against_go),
        cmocka_unit_test(test_newer_go),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_limits_and_garbage),
        cmocka_unit_test(test_references_and_tags),
        cmocka_unit_test(test_prompt_input_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
