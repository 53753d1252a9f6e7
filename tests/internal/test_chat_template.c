/* Tests of the chat templates (src/serve/llm/chat_template.c) against jinja2: each family's
 * official template string (tests/fixtures/chat/<family>.jinja) must be detected as that
 * family, and every conversation of tests/fixtures/chat/conversations.json rendered with and
 * without a generation prompt must equal jinja2's rendering (the .txt files there, written by
 * tests/fixtures/gen_chat_templates.py) byte for byte; where jinja raised, so must we.
 * Also: detection from the real GGUF files (in $PT_MODELS_DIR; missing ones fail), the fallback
 * warning, architecture-based detection, stop strings and argument errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "testutil.h"

#include "serve/llm/chat_template.h"

#define CHAT_DIR PT_FIXTURES_DIR "/chat/"

static char *read_fixture(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s%s", CHAT_DIR, name);
    return pt_test_read_file(path, len);
}

static cJSON *read_json(const char *name)
{
    size_t len;
    char *text = read_fixture(name, &len);
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(j);
    return j;
}

/* The family each fixture template must be detected as. */
static pti_chat_family expected_family(const char *fam)
{
    static const struct {
        const char *name;
        pti_chat_family f;
    } map[] = {{"qwen25", PTI_CHAT_QWEN25},
               {"qwen3", PTI_CHAT_QWEN3},
               {"smollm2", PTI_CHAT_CHATML},
               {"llama32", PTI_CHAT_LLAMA3},
               {"llama30", PTI_CHAT_LLAMA30},
               {"mistral", PTI_CHAT_MISTRAL},
               {"gemma3", PTI_CHAT_GEMMA},
               {"phi3", PTI_CHAT_PHI3},
               {"deepseek_r1", PTI_CHAT_DEEPSEEK_R1},
               {"deepseek_r1_new", PTI_CHAT_DEEPSEEK_R1},
               {"llama31", PTI_CHAT_LLAMA3},
               {"phi3_mini", PTI_CHAT_PHI3},
               {"chatml", PTI_CHAT_CHATML}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].name, fam) == 0)
            return map[i].f;
    fail_msg("no expected family for fixture %s", fam);
    return PTI_CHAT_PLAIN;
}

/* Runs every case of one fixture family; returns the number of cases checked. */
static int check_family(const char *fam)
{
    cJSON *convs = read_json("conversations.json");
    cJSON *cases = read_json("cases.json");
    char tname[128];
    snprintf(tname, sizeof tname, "%s.jinja", fam);
    size_t tlen;
    char *tsrc = read_fixture(tname, &tlen);
    pti_chat_template *t = pti_chat_template_detect(tsrc, tlen, NULL);
    assert_non_null(t);
    assert_int_equal(pti_chat_template_family(t), expected_family(fam));
    assert_null(pti_chat_template_warning(t));
    int checked = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        if (strcmp(cJSON_GetObjectItem(c, "family")->valuestring, fam) != 0)
            continue;
        const char *cname = cJSON_GetObjectItem(c, "conversation")->valuestring;
        const cJSON *conv = cJSON_GetObjectItem(convs, cname);
        assert_non_null(conv);
        size_t n = (size_t)cJSON_GetArraySize(conv);
        pti_chat_message msgs[16];
        assert_true(n <= 16);
        memset(msgs, 0, sizeof msgs);
        for (size_t i = 0; i < n; i++) {
            const cJSON *m = cJSON_GetArrayItem(conv, (int)i);
            msgs[i].role = cJSON_GetObjectItem(m, "role")->valuestring;
            msgs[i].content = cJSON_GetObjectItem(m, "content")->valuestring;
            const cJSON *r = cJSON_GetObjectItem(m, "reasoning_content");
            msgs[i].reasoning_content = r ? r->valuestring : NULL;
        }
        pti_chat_opts o = {
            .bos_token = cJSON_GetObjectItem(c, "bos_token")->valuestring,
            .eos_token = cJSON_GetObjectItem(c, "eos_token")->valuestring,
            /* jinja rendered without strftime_now, so Llama 3.2 took its default date */
            .date_string = "26 Jul 2024",
        };
        bool gen = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
        size_t out_len = 0;
        char *out = pti_chat_render(t, msgs, n, gen, &o, &out_len);
        const cJSON *err = cJSON_GetObjectItem(c, "error");
        if (err) {
            if (out)
                fail_msg("%s/%s gen=%d: jinja raised '%s' but we rendered:\n%s", fam, cname, gen,
                         err->valuestring, out);
            assert_pt_error(out, PT_ERR_INVALID_ARG, err->valuestring);
        } else {
            size_t elen;
            char *expected = read_fixture(cJSON_GetObjectItem(c, "expected")->valuestring, &elen);
            if (!out)
                fail_msg("%s/%s gen=%d: render failed: %s", fam, cname, gen, pt_last_error());
            if (out_len != elen || memcmp(out, expected, elen) != 0)
                fail_msg("%s/%s gen=%d differs from jinja\n--- jinja (%zu bytes):\n%s\n--- ours "
                         "(%zu bytes):\n%s\n---",
                         fam, cname, gen, elen, expected, out_len, out);
            free(expected);
        }
        free(out);
        checked++;
    }
    pti_chat_template_free(t);
    free(tsrc);
    cJSON_Delete(cases);
    cJSON_Delete(convs);
    assert_true(checked >= 30);
    return checked;
}

static void test_qwen25(void **state)
{
    (void)state;
    check_family("qwen25");
}
static void test_qwen3(void **state)
{
    (void)state;
    check_family("qwen3");
}
static void test_smollm2(void **state)
{
    (void)state;
    check_family("smollm2");
}
static void test_llama32(void **state)
{
    (void)state;
    check_family("llama32");
}
static void test_llama30(void **state)
{
    (void)state;
    check_family("llama30");
}
static void test_mistral(void **state)
{
    (void)state;
    check_family("mistral");
}
static void test_gemma3(void **state)
{
    (void)state;
    check_family("gemma3");
}
static void test_phi3(void **state)
{
    (void)state;
    check_family("phi3");
}
static void test_deepseek_r1(void **state)
{
    (void)state;
    check_family("deepseek_r1");
}

static void test_deepseek_r1_new(void **state)
{
    (void)state;
    check_family("deepseek_r1_new");
}

static void test_llama31(void **state)
{
    (void)state;
    check_family("llama31");
}

static void test_phi3_mini(void **state)
{
    (void)state;
    check_family("phi3_mini");
}

static void test_chatml(void **state)
{
    (void)state;
    check_family("chatml");
}

/* Options the fixtures do not cover: Qwen3's enable_thinking=false and Llama's date. */
static void test_options(void **state)
{
    (void)state;
    pti_chat_message m[] = {{.role = "user", .content = "Hi"}};
    pti_chat_template *t = pti_chat_template_new(PTI_CHAT_QWEN3);
    pti_chat_opts o = {.disable_thinking = true};
    char *s = pti_chat_render(t, m, 1, true, &o, NULL);
    assert_string_equal(s, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                           "<think>\n\n</think>\n\n");
    free(s);
    pti_chat_template_free(t);
    t = pti_chat_template_new(PTI_CHAT_LLAMA3);
    o = (pti_chat_opts){.bos_token = "<|begin_of_text|>", .date_string = "01 Jan 2026"};
    s = pti_chat_render(t, m, 1, false, &o, NULL);
    assert_non_null(strstr(s, "Today Date: 01 Jan 2026\n\n<|eot_id|>"));
    free(s);
    pti_chat_template_free(t);
    /* without a date: Llama 3.1 keeps its fixed date, 3.2 (strftime_now) uses today's */
    size_t len;
    char *src = read_fixture("llama31.jinja", &len);
    t = pti_chat_template_detect(src, len, NULL);
    free(src);
    s = pti_chat_render(t, m, 1, false, NULL, NULL);
    assert_non_null(strstr(s, "Today Date: 26 Jul 2024\n\n<|eot_id|>"));
    free(s);
    pti_chat_template_free(t);
    src = read_fixture("llama32.jinja", &len);
    t = pti_chat_template_detect(src, len, NULL);
    free(src);
    s = pti_chat_render(t, m, 1, false, NULL, NULL);
    char today[32];
    time_t now = time(NULL);
    strftime(today, sizeof today, "Today Date: %d %b %Y\n", localtime(&now));
    assert_non_null(strstr(s, today));
    free(s);
    pti_chat_template_free(t);
}

/* Tool calls in assistant turns (not in the jinja fixtures: the templates serialize argument
 * dicts with json.dumps, which we take as given text). */
static void test_tool_calls(void **state)
{
    (void)state;
    pti_chat_tool_call tc = {
        .id = "abcdefghi", .name = "get_weather", .arguments = "{\"city\": \"Paris\"}"};
    pti_chat_message m[] = {
        {.role = "user", .content = "Weather?"},
        {.role = "assistant", .content = "", .tool_calls = &tc, .n_tool_calls = 1}};
    pti_chat_template *t = pti_chat_template_new(PTI_CHAT_QWEN3);
    char *s = pti_chat_render(t, m, 2, false, NULL, NULL);
    assert_non_null(strstr(s, "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"
                              "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
                              "\n</tool_call><|im_end|>\n"));
    free(s);
    pti_chat_template_free(t);
    t = pti_chat_template_new(PTI_CHAT_QWEN25);
    s = pti_chat_render(t, m, 2, false, NULL, NULL);
    assert_non_null(strstr(s, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", "
                              "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"));
    free(s);
    pti_chat_template_free(t);
    t = pti_chat_template_new(PTI_CHAT_LLAMA3);
    pti_chat_tool_call two[2] = {tc, tc};
    m[1].tool_calls = two;
    m[1].n_tool_calls = 2;
    assert_pt_error(pti_chat_render(t, m, 2, false, NULL, NULL), PT_ERR_INVALID_ARG,
                    "single tool-calls");
    pti_chat_template_free(t);
}

static void test_fallback_and_arch(void **state)
{
    (void)state;
    const char *odd = "{% for m in messages %}### {{ m.role }}\n{{ m.content }}{% endfor %}";
    pti_chat_template *t = pti_chat_template_detect(odd, strlen(odd), "llama");
    assert_int_equal(pti_chat_template_family(t), PTI_CHAT_PLAIN);
    assert_non_null(strstr(pti_chat_template_warning(t), "unrecognized chat template"));
    pti_chat_message m[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "U"}};
    char *s = pti_chat_render(t, m, 2, true, NULL, NULL);
    assert_string_equal(s, "system: S\nuser: U\nassistant: ");
    free(s);
    pti_chat_template_free(t);

    t = pti_chat_template_detect(NULL, 0, "gemma3");
    assert_int_equal(pti_chat_template_family(t), PTI_CHAT_GEMMA);
    assert_null(pti_chat_template_warning(t));
    pti_chat_template_free(t);
    t = pti_chat_template_detect("", 0, "qwen3");
    assert_int_equal(pti_chat_template_family(t), PTI_CHAT_QWEN3);
    pti_chat_template_free(t);
    t = pti_chat_template_detect(NULL, 0, "mamba");
    assert_int_equal(pti_chat_template_family(t), PTI_CHAT_PLAIN);
    assert_non_null(pti_chat_template_warning(t));
    pti_chat_template_free(t);
    t = pti_chat_template_detect(NULL, 0, NULL);
    assert_int_equal(pti_chat_template_family(t), PTI_CHAT_PLAIN);
    pti_chat_template_free(t);
}

static void test_stop_strings(void **state)
{
    (void)state;
    size_t n;
    const char *const *s = pti_chat_stop_strings(PTI_CHAT_GEMMA, &n);
    assert_true(n >= 1);
    assert_string_equal(s[0], "<end_of_turn>");
    assert_null(s[n]);
    assert_string_equal(pti_chat_end_of_turn(PTI_CHAT_QWEN3), "<|im_end|>");
    assert_string_equal(pti_chat_end_of_turn(PTI_CHAT_LLAMA3), "<|eot_id|>");
    assert_string_equal(pti_chat_end_of_turn(PTI_CHAT_PHI3), "<|end|>");
    assert_string_equal(pti_chat_end_of_turn(PTI_CHAT_MISTRAL), "</s>");
    assert_null(pti_chat_end_of_turn(PTI_CHAT_PLAIN));
    for (int f = PTI_CHAT_PLAIN; f <= PTI_CHAT_DEEPSEEK_R1; f++) {
        s = pti_chat_stop_strings((pti_chat_family)f, &n);
        assert_true(n >= 1);
        assert_non_null(pti_chat_family_name((pti_chat_family)f));
    }
}

/* Every family on odd input: no messages, NULL content, unknown roles, long content. */
static void test_robustness(void **state)
{
    (void)state;
    size_t big_n = 1 << 20;
    char *big = malloc(big_n + 1);
    memset(big, ' ', big_n);
    big[big_n] = '\0';
    big[big_n / 2] = 'x';
    pti_chat_message m[] = {{.role = "system"},
                            {.role = "user", .content = big},
                            {.role = "narrator", .content = "</think>"},
                            {.role = "assistant", .content = "<think></think></think>"},
                            {.role = "tool", .content = "\x01\"\\"}};
    for (int f = PTI_CHAT_PLAIN; f <= PTI_CHAT_DEEPSEEK_R1; f++) {
        pti_chat_template *t = pti_chat_template_new((pti_chat_family)f);
        for (size_t n = 0; n <= 5; n++) {
            for (int gen = 0; gen < 2; gen++) {
                size_t len = 0;
                char *s = pti_chat_render(t, m, n, gen, NULL, &len);
                if (s)
                    assert_int_equal(strlen(s), len);
                else
                    pt_clear_error();
                free(s);
            }
        }
        pti_chat_template_free(t);
    }
    free(big);
}

static void test_errors(void **state)
{
    (void)state;
    pti_chat_template *t = pti_chat_template_new(PTI_CHAT_CHATML);
    assert_pt_error(pti_chat_render(NULL, NULL, 0, true, NULL, NULL), PT_ERR_NULL, "template");
    assert_pt_error(pti_chat_render(t, NULL, 2, true, NULL, NULL), PT_ERR_NULL, "messages");
    pti_chat_message m[] = {{.role = NULL, .content = "x"}};
    assert_pt_error(pti_chat_render(t, m, 1, true, NULL, NULL), PT_ERR_NULL, "no role");
    m[0].role = "assistant";
    m[0].n_tool_calls = 1;
    assert_pt_error(pti_chat_render(t, m, 1, true, NULL, NULL), PT_ERR_NULL, "tool call");
    size_t len = 99;
    char *s = pti_chat_render(t, NULL, 0, false, NULL, &len);
    assert_non_null(s);
    assert_int_equal(len, 0);
    free(s);
    assert_pt_error(pti_chat_template_new((pti_chat_family)99), PT_ERR_INVALID_ARG, "family");
    assert_pt_error(pti_chat_template_from_gguf(NULL), PT_ERR_NULL, "NULL");
    pti_chat_template_free(t);
    pti_chat_template_free(NULL);
}

/* The real model files: SmolLM2's template is ChatML with its default system prompt; the
 * Gemma 3 270M file has no template and is matched by its architecture. */
static void test_real_models(void **state)
{
    (void)state;
    pt_gguf *g = pt_gguf_open(pt_test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf"));
    assert_non_null(g);
    pti_chat_template *t = pti_chat_template_from_gguf(g);
    assert_int_equal(pti_chat_template_family(t), PTI_CHAT_CHATML);
    pti_chat_message m[] = {{.role = "user", .content = "Hi"}};
    char *s = pti_chat_render(t, m, 1, true, NULL, NULL);
    assert_string_equal(s, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
                           "trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                           "<|im_start|>assistant\n");
    free(s);
    pti_chat_template_free(t);
    pt_gguf_close(g);
    g = pt_gguf_open(pt_test_model_path("gemma-3-270m-q4_k_m.gguf"));
    assert_non_null(g);
    t = pti_chat_template_from_gguf(g);
    assert_int_equal(pti_chat_template_family(t), PTI_CHAT_GEMMA);
    pti_chat_template_free(t);
    pt_gguf_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_qwen25, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_qwen3, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_smollm2, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_llama32, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_llama30, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mistral, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gemma3, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_phi3, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_deepseek_r1, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_deepseek_r1_new, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_llama31, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_phi3_mini, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_chatml, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_options, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_tool_calls, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_fallback_and_arch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_stop_strings, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_robustness, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_real_models, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
