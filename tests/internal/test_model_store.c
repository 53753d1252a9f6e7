/* Ollama model names and the model store: name grammar and defaults (ollama-api.md section 3,
 * Ollama's types/model/name.go), the short form, manifest -> blob resolution with
 * case-insensitive names, the errors for missing or broken manifests and blobs, and
 * pt_llm_load by name through $OLLAMA_MODELS (a store built in a temporary directory around a
 * committed tiny model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "serve/llm/model_store.h"

#define TINY_MODEL PT_FIXTURES_DIR "/llm/tiny/qwen3-q8_0.gguf"
#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HEX64B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static void expect_name(const char *s, const char *host, const char *ns, const char *model,
                        const char *tag, const char *shown)
{
    pti_model_name n;
    assert_true(pti_model_name_parse(s, &n));
    assert_string_equal(n.host, host);
    assert_string_equal(n.ns, ns);
    assert_string_equal(n.model, model);
    assert_string_equal(n.tag, tag);
    char buf[512];
    pti_model_name_format(&n, buf, sizeof buf);
    assert_string_equal(buf, shown);
}

static void test_names(void **state)
{
    (void)state;
    expect_name("qwen3:4b", "registry.ollama.ai", "library", "qwen3", "4b", "qwen3:4b");
    expect_name("qwen3", "registry.ollama.ai", "library", "qwen3", "latest", "qwen3:latest");
    expect_name("me/m:v1", "registry.ollama.ai", "me", "m", "v1", "me/m:v1");
    expect_name("hf.co/u/r:Q4_K_M", "hf.co", "u", "r", "Q4_K_M", "hf.co/u/r:Q4_K_M");
    expect_name("localhost:5000/ns/m:t", "localhost:5000", "ns", "m", "t", "localhost:5000/ns/m:t");
    expect_name("llama3.2:1b-instruct-q4_K_M@sha256:" HEX64, "registry.ollama.ai", "library",
                "llama3.2", "1b-instruct-q4_K_M", "llama3.2:1b-instruct-q4_K_M");
    pti_model_name n;
    assert_pt_error(pti_model_name_parse("", &n) ? &n : NULL, PT_ERR_INVALID_ARG, "model is empty");
    assert_pt_error(pti_model_name_parse("qwen3:", &n) ? &n : NULL, PT_ERR_INVALID_ARG, "tag");
    assert_pt_error(pti_model_name_parse("../etc/passwd", &n) ? &n : NULL, PT_ERR_INVALID_ARG,
                    "host");
    assert_pt_error(pti_model_name_parse("a.b/m", &n) ? &n : NULL, PT_ERR_INVALID_ARG, "namespace");
    assert_pt_error(pti_model_name_parse("a b", &n) ? &n : NULL, PT_ERR_INVALID_ARG, "' '");
    assert_pt_error(pti_model_name_parse(".hidden", &n) ? &n : NULL, PT_ERR_INVALID_ARG, "'.'");
    char longname[200];
    memset(longname, 'a', 81);
    longname[81] = '\0';
    assert_pt_error(pti_model_name_parse(longname, &n) ? &n : NULL, PT_ERR_INVALID_ARG, "too long");
}

static char root[256];

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A store with one model, library/tiny:latest, whose model layer is a link to TINY_MODEL. */
static void make_store(void)
{
    snprintf(root, sizeof root, "/tmp/pt_store_XXXXXX");
    assert_non_null(mkdtemp(root));
    char p[1024];
    const char *dirs[] = {"/blobs", "/manifests", "/manifests/registry.ollama.ai",
                          "/manifests/registry.ollama.ai/library",
                          "/manifests/registry.ollama.ai/library/tiny"};
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s%s", root, dirs[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof p, "%s/blobs/sha256-" HEX64, root);
    assert_int_equal(symlink(TINY_MODEL, p), 0);
    snprintf(p, sizeof p, "%s/blobs/sha256-" HEX64B, root);
    write_text(p, "{{ .Prompt }}");
    snprintf(p, sizeof p, "%s/manifests/registry.ollama.ai/library/tiny/latest", root);
    write_text(p, "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution."
                  "manifest.v2+json\",\"layers\":[{\"mediaType\":\"application/vnd.ollama.image."
                  "model\",\"digest\":\"sha256:" HEX64 "\",\"size\":1},{\"mediaType\":"
                  "\"application/vnd.ollama.image.template\",\"digest\":\"sha256:" HEX64B
                  "\",\"size\":13}]}");
}

static void remove_store(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

static void test_resolve(void **state)
{
    (void)state;
    make_store();
    pti_model_name n;
    pti_model_files f;
    assert_true(pti_model_name_parse("tiny", &n));
    assert_true(pti_model_store_resolve(root, &n, &f));
    assert_non_null(strstr(f.model, "/blobs/sha256-" HEX64));
    assert_non_null(strstr(f.template_, "/blobs/sha256-" HEX64B));
    assert_string_equal(f.system, "");
    assert_true(pti_model_name_parse("TINY:Latest", &n)); /* case-insensitive, as Ollama */
    assert_true(pti_model_store_resolve(root, &n, &f));
    assert_true(pti_model_name_parse("tiny:7b", &n));
    assert_pt_error(pti_model_store_resolve(root, &n, &f) ? &f : NULL, PT_ERR_IO,
                    "model 'tiny:7b' not found");
    /* a broken manifest, then one whose blob is missing */
    char p[1024];
    snprintf(p, sizeof p, "%s/manifests/registry.ollama.ai/library/tiny/bad", root);
    write_text(p, "{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"application/vnd.ollama."
                  "image.model\",\"digest\":\"sha256:../../etc/passwd\"}]}");
    assert_true(pti_model_name_parse("tiny:bad", &n));
    assert_pt_error(pti_model_store_resolve(root, &n, &f) ? &f : NULL, PT_ERR_FORMAT, "digest");
    snprintf(p, sizeof p, "%s/manifests/registry.ollama.ai/library/tiny/gone", root);
    write_text(p, "{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"application/vnd.ollama."
                  "image.model\",\"digest\":\"sha256:" HEX64B "0\"}]}");
    assert_true(pti_model_name_parse("tiny:gone", &n));
    assert_pt_error(pti_model_store_resolve(root, &n, &f) ? &f : NULL, PT_ERR_FORMAT, "digest");
    write_text(p, "not json");
    assert_pt_error(pti_model_store_resolve(root, &n, &f) ? &f : NULL, PT_ERR_FORMAT, "JSON");
    /* pt_llm_load by name through OLLAMA_MODELS */
    setenv("OLLAMA_MODELS", root, 1);
    pt_llm *llm = pt_llm_load("tiny", NULL);
    assert_non_null(llm);
    assert_string_equal(pt_llm_get_info(llm)->architecture, "qwen3");
    pt_llm_free(llm);
    assert_pt_error(pt_llm_load("qwen3:4b", NULL), PT_ERR_IO, "model 'qwen3:4b' not found");
    unsetenv("OLLAMA_MODELS");
    remove_store();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_names, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_resolve, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
