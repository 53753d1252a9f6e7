/* Model store operations (src/serve/http/store_ops.h) on a temporary store built around the
 * committed tiny GGUF models: Ollama's number/size/time formats (format.HumanNumber,
 * HumanBytes, HumanTime, Go's RFC 3339 JSON times), blob upload with digest checks, create
 * from an uploaded GGUF with template/system/parameters/license/messages, list (digest = the
 * sha256 of the manifest file per sha256sum, sizes, details), show (model_info from the GGUF
 * as Ollama gives it, capabilities, Modelfile, parameters text), copy, delete with blob
 * garbage collection, and the refusals: bad names and digests, a digest mismatch, a missing
 * blob, quantize. Expected parameter counts, file types and chat-template facts were read
 * with gguf-py (the reference reader), not with our code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "serve/http/sha256.h"
#include "serve/http/store_ops.h"
#include "serve/llm/llm_model.h"

#define TINY_QWEN3 PT_FIXTURES_DIR "/llm/tiny/qwen3-q8_0.gguf"
#define TINY_DIR PT_FIXTURES_DIR "/llm/tiny"
#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char root[256];

static void run(const char *fmt, const char *arg)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, arg);
    assert_int_equal(system(cmd), 0);
}

static void make_root(void)
{
    snprintf(root, sizeof root, "/tmp/pt_store_ops_XXXXXX");
    assert_non_null(mkdtemp(root));
}

static void remove_root(void)
{
    run("rm -rf '%s'", root);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Copies src into the store's blobs directory under a temporary name and commits it as an
 * upload would be; digest gets "sha256:<hex>". */
static void upload(const char *src, char digest[72])
{
    char tmp[512], hex[65], cmd[1200];
    snprintf(tmp, sizeof tmp, "%s/blobs/upload-1", root);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/blobs' && cp '%s' '%s'", root, src, tmp);
    assert_int_equal(system(cmd), 0);
    assert_true(pti_sha256_file(tmp, hex, NULL));
    snprintf(digest, 72, "sha256:%s", hex);
    assert_int_equal(pti_store_blob_commit(root, tmp, digest), PTI_STORE_OK);
    assert_false(exists(tmp));
    assert_int_equal(pti_store_blob_check(root, digest), PTI_STORE_OK);
}

static void test_formats(void **state)
{
    (void)state;
    char buf[64];
    struct {
        uint64_t n;
        const char *s;
    } numbers[] = {{134515008, "134.52M"}, {4022468096ull, "4.0B"}, {7000000000ull, "7B"},
                   {135000000, "135M"},    {895232, "895K"},        {999, "999"}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        pti_store_human_number(numbers[i].n, buf, sizeof buf);
        assert_string_equal(buf, numbers[i].s);
    }
    struct {
        int64_t n;
        const char *s;
    } bytes[] = {{91234567, "91 MB"}, {1500000000, "1.5 GB"}, {2000000000, "2 GB"},
                 {512, "512 B"},      {1234, "1.2 KB"},       {270000000000, "270 GB"}};
    for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
        pti_store_human_bytes(bytes[i].n, buf, sizeof buf);
        assert_string_equal(buf, bytes[i].s);
    }
    int64_t now = 1700000000;
    struct {
        int64_t ago;
        const char *s;
    } times[] = {{0, "Less than a second ago"}, {1, "1 second ago"},
                 {75, "About a minute ago"},    {600, "10 minutes ago"},
                 {3600, "About an hour ago"},   {5 * 3600, "5 hours ago"},
                 {2 * 86400, "2 days ago"},     {21 * 86400, "3 weeks ago"},
                 {90 * 86400, "3 months ago"},  {800 * 86400, "2 years ago"}};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        pti_store_human_time(now - times[i].ago, now, buf, sizeof buf);
        assert_string_equal(buf, times[i].s);
    }
    /* Go's time.Time JSON: RFC 3339, fraction without trailing zeros, Z or the offset */
    char *old_tz = getenv("TZ") ? strdup(getenv("TZ")) : NULL;
    setenv("TZ", "UTC", 1);
    tzset();
    pti_store_rfc3339(1700000000, 500000000, buf, sizeof buf);
    assert_string_equal(buf, "2023-11-14T22:13:20.5Z");
    pti_store_rfc3339(1700000000, 0, buf, sizeof buf);
    assert_string_equal(buf, "2023-11-14T22:13:20Z");
    setenv("TZ", "PST8PDT", 1);
    tzset();
    pti_store_rfc3339(1700000000, 393035486, buf, sizeof buf);
    assert_string_equal(buf, "2023-11-14T14:13:20.393035486-08:00");
    if (old_tz)
        setenv("TZ", old_tz, 1);
    else
        unsetenv("TZ");
    tzset();
    free(old_tz);
    /* one table for the engine and the store, with the names of Ollama's FileType.String():
     * 4 is Ollama's MXFP4; llama.cpp's 38 (MXFP4_MOE) and the IQ types Ollama calls unknown */
    assert_string_equal(pti_llm_file_type_name(15), "Q4_K_M");
    assert_string_equal(pti_llm_file_type_name(7), "Q8_0");
    assert_string_equal(pti_llm_file_type_name(3), "Q4_1");
    assert_string_equal(pti_llm_file_type_name(21), "Q2_K_S");
    assert_string_equal(pti_llm_file_type_name(32), "BF16");
    assert_string_equal(pti_llm_file_type_name(4), "MXFP4");
    assert_string_equal(pti_llm_file_type_name(38), "unknown");
    assert_string_equal(pti_llm_file_type_name(19), "unknown");
    assert_string_equal(pti_llm_file_type_name(5), "unknown");
    assert_string_equal(pti_llm_file_type_name(-1), "unknown");
    assert_string_equal(pti_llm_file_type_name(1000), "unknown");
    assert_true(pti_store_digest_valid("sha256:" HEX64));
    assert_false(pti_store_digest_valid("sha256:" HEX64 "0"));
    assert_false(pti_store_digest_valid("sha256-" HEX64));
    assert_false(pti_store_digest_valid("sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef"
                                        "0123456789abcdef"));
    assert_false(pti_store_digest_valid(NULL));
}

static void test_gguf_facts(void **state)
{
    (void)state;
    pti_gguf_facts f;
    assert_true(pti_store_gguf_facts(TINY_QWEN3, &f));
    assert_string_equal(f.family, "qwen3");
    assert_int_equal(f.parameter_count, 895232); /* gguf-py: sum of n_elements */
    assert_string_equal(f.parameter_size, "895K");
    assert_string_equal(f.quantization, "Q8_0");
    assert_int_equal(f.context_length, 256);
    assert_int_equal(f.embedding_length, 256);
    assert_pt_error(pti_store_gguf_facts("/nonexistent.gguf", &f) ? &f : NULL, PT_ERR_IO,
                    "/nonexistent.gguf");
}

typedef struct statuses {
    char list[32][128];
    int n;
} statuses;

static void record(const char *status, void *user)
{
    statuses *s = user;
    if (s->n < 32)
        snprintf(s->list[s->n++], sizeof s->list[0], "%s", status);
}

static bool saw(const statuses *s, const char *prefix)
{
    for (int i = 0; i < s->n; i++)
        if (!strncmp(s->list[i], prefix, strlen(prefix)))
            return true;
    return false;
}

/* Creates tiny:latest from the uploaded qwen3 GGUF with every kind of text layer. */
static void create_tiny(char gguf_digest[72])
{
    upload(TINY_QWEN3, gguf_digest);
    char req_text[2048];
    snprintf(req_text, sizeof req_text,
             "{\"model\":\"tiny\",\"files\":{\"qwen3-q8_0.gguf\":\"%s\"},"
             "\"template\":\"{{ if .System }}{{ .System }}{{ end }}{{ if .Tools }}T{{ end }}"
             "{{ .Prompt }}\",\"system\":\"You are terse.\",\"license\":[\"MIT\",\"Apache\"],"
             "\"parameters\":{\"stop\":\"<|im_end|>\",\"temperature\":0.6,\"num_ctx\":128},"
             "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
             gguf_digest);
    cJSON *req = cJSON_Parse(req_text);
    statuses s = {0};
    assert_int_equal(pti_store_create(root, req, record, &s), PTI_STORE_OK);
    cJSON_Delete(req);
    assert_string_equal(s.list[0], "parsing GGUF");
    char want[128];
    snprintf(want, sizeof want, "using existing layer %s", gguf_digest);
    assert_true(saw(&s, want));
    assert_true(saw(&s, "creating new layer sha256:"));
    assert_string_equal(s.list[s.n - 2], "writing manifest");
    assert_string_equal(s.list[s.n - 1], "success");
}

/* sha256sum's digest of a file (the independent check of the list digest). */
static bool sha256sum(const char *path, char hex[65])
{
    char cmd[1024], line[256] = "";
    snprintf(cmd, sizeof cmd, "sha256sum '%s' 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    bool ok = p && fgets(line, sizeof line, p) && strspn(line, "0123456789abcdef") == 64;
    if (p && pclose(p) != 0)
        ok = false;
    if (ok) {
        memcpy(hex, line, 64);
        hex[64] = '\0';
    }
    return ok;
}

static const cJSON *find_entry(const cJSON *list, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, list)
    {
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), name))
            return e;
    }
    return NULL;
}

static void test_create_list_show(void **state)
{
    (void)state;
    make_root();
    char gguf_digest[72];
    create_tiny(gguf_digest);
    char manifest[512];
    snprintf(manifest, sizeof manifest, "%s/manifests/registry.ollama.ai/library/tiny/latest",
             root);
    assert_true(exists(manifest));

    /* list: the store model and, from a --models dir, the plain files */
    cJSON *list = pti_store_list(root, TINY_DIR, NULL, 0);
    const cJSON *e = find_entry(list, "tiny:latest");
    assert_non_null(e);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "model")), "tiny:latest");
    char hex[65];
    if (sha256sum(manifest, hex))
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "digest")), hex);
    struct stat st;
    assert_int_equal(stat(TINY_QWEN3, &st), 0);
    double size = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "size"));
    assert_true(size > (double)st.st_size && size < (double)st.st_size + 4096);
    const cJSON *d = cJSON_GetObjectItem(e, "details");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(d, "format")), "gguf");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(d, "family")), "qwen3");
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItem(d, "families"), 0)), "qwen3");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(d, "parameter_size")), "895K");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(d, "quantization_level")), "Q8_0");
    const char *when = cJSON_GetStringValue(cJSON_GetObjectItem(e, "modified_at"));
    assert_true(strlen(when) >= 20 && when[10] == 'T');
    const cJSON *plain = find_entry(list, "llama-q4_k_m.gguf");
    assert_non_null(plain);
    d = cJSON_GetObjectItem(plain, "details");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(d, "family")), "llama");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(d, "quantization_level")),
                        "Q4_K_M");
    assert_int_equal(cJSON_GetArraySize(list), 1 + 15);
    cJSON_Delete(list);

    /* show */
    int status;
    cJSON *show = pti_store_show(root, "TINY", false, &status);
    assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(show, "modelfile")),
                           "# FROM TINY:latest\n"));
    cJSON_Delete(show);
    show = pti_store_show(root, "tiny", false, &status);
    assert_non_null(show);
    assert_int_equal(status, PTI_STORE_OK);
    const cJSON *info = cJSON_GetObjectItem(show, "model_info");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(info, "general.architecture")),
                        "qwen3");
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(info, "qwen3.context_length")),
                     256);
    assert_true(cJSON_GetNumberValue(
                    cJSON_GetObjectItem(info, "qwen3.attention.layer_norm_rms_epsilon")) == 1e-06);
    assert_int_equal(
        (int)cJSON_GetNumberValue(cJSON_GetObjectItem(info, "general.parameter_count")), 895232);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(info, "tokenizer.ggml.tokens")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(info, "tokenizer.ggml.add_bos_token")));
    assert_null(cJSON_GetObjectItem(info, "general.name"));
    assert_null(cJSON_GetObjectItem(info, "tokenizer.chat_template"));
    /* keys sorted, as Go marshals a map */
    for (const cJSON *k = info->child; k && k->next; k = k->next)
        assert_true(strcmp(k->string, k->next->string) < 0);
    const cJSON *caps = cJSON_GetObjectItem(show, "capabilities");
    assert_int_equal(cJSON_GetArraySize(caps), 2);
    assert_string_equal(cJSON_GetArrayItem(caps, 0)->valuestring, "completion");
    assert_string_equal(cJSON_GetArrayItem(caps, 1)->valuestring, "tools");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(show, "system")),
                        "You are terse.");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(show, "license")), "MIT\nApache");
    const char *params = cJSON_GetStringValue(cJSON_GetObjectItem(show, "parameters"));
    assert_string_equal(params, "stop                           \"<|im_end|>\"\n"
                                "temperature                    0.6\n"
                                "num_ctx                        128");
    const char *mf = cJSON_GetStringValue(cJSON_GetObjectItem(show, "modelfile"));
    char from[512];
    snprintf(from, sizeof from, "\n\nFROM %s/blobs/sha256-%s\nTEMPLATE ", root, gguf_digest + 7);
    assert_non_null(strstr(mf, "# Modelfile generated by \"ollama show\"\n"
                               "# To build a new Modelfile based on this, replace FROM with:\n"
                               "# FROM tiny:latest\n"));
    assert_non_null(strstr(mf, from));
    assert_non_null(strstr(mf, "SYSTEM You are terse.\nPARAMETER stop <|im_end|>\n"
                               "PARAMETER temperature 0.6\nPARAMETER num_ctx 128\n"
                               "LICENSE \"MIT\nApache\"\nMESSAGE user hi\n"));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(show, "messages")), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(show, "tensors")), 24);
    cJSON_Delete(show);
    show = pti_store_show(root, "tiny", true, &status);
    info = cJSON_GetObjectItem(show, "model_info");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(info, "tokenizer.ggml.tokens")), 419);
    cJSON_Delete(show);
    assert_null(pti_store_show(root, "nope", false, &status));
    assert_int_equal(status, PTI_STORE_NOT_FOUND);
    assert_non_null(strstr(pt_last_error(), "model 'nope:latest' not found"));
    assert_null(pti_store_show(root, "../../etc", false, &status));
    assert_int_equal(status, PTI_STORE_BAD_REQUEST);

    /* a plain file: the Jinja chat template decides tools and thinking */
    show = pti_store_show_file(TINY_QWEN3, "qwen3-q8_0.gguf", false, &status);
    assert_non_null(show);
    caps = cJSON_GetObjectItem(show, "capabilities");
    assert_int_equal(cJSON_GetArraySize(caps), 3);
    assert_string_equal(cJSON_GetArrayItem(caps, 1)->valuestring, "tools");
    assert_string_equal(cJSON_GetArrayItem(caps, 2)->valuestring, "thinking");
    assert_non_null(
        strstr(cJSON_GetStringValue(cJSON_GetObjectItem(show, "template")), "<|im_start|>"));
    cJSON_Delete(show);
    show = pti_store_show_file(TINY_DIR "/gemma3-q8_0.gguf", "g", false, &status);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(show, "capabilities")), 1);
    cJSON_Delete(show);

    /* a broken manifest is skipped, the rest still listed */
    run("mkdir -p '%s/manifests/registry.ollama.ai/library/broken'", root);
    char broken[512];
    snprintf(broken, sizeof broken, "%s/manifests/registry.ollama.ai/library/broken/latest", root);
    run("echo nonsense > '%s'", broken);
    list = pti_store_list(root, NULL, NULL, 0);
    assert_int_equal(cJSON_GetArraySize(list), 1);
    cJSON_Delete(list);
    remove_root();
}

static void test_copy_delete(void **state)
{
    (void)state;
    make_root();
    char gguf_digest[72], blob[512];
    create_tiny(gguf_digest);
    snprintf(blob, sizeof blob, "%s/blobs/sha256-%s", root, gguf_digest + 7);
    assert_int_equal(pti_store_copy(root, "tiny", "me/other:v1"), PTI_STORE_OK);
    assert_int_equal(pti_store_copy(root, "missing", "x"), PTI_STORE_NOT_FOUND);
    assert_non_null(strstr(pt_last_error(), "model 'missing:latest' not found"));
    assert_int_equal(pti_store_copy(root, "tiny", "../x"), PTI_STORE_BAD_REQUEST);
    cJSON *list = pti_store_list(root, NULL, NULL, 0);
    assert_int_equal(cJSON_GetArraySize(list), 2);
    assert_non_null(find_entry(list, "me/other:v1"));
    /* same manifest bytes, same digest */
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 0), "digest")),
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 1), "digest")));
    cJSON_Delete(list);

    /* a third model shares only the GGUF blob */
    char req_text[512];
    snprintf(req_text, sizeof req_text,
             "{\"model\":\"third\",\"from\":\"tiny\",\"system\":\"Other.\"}");
    cJSON *req = cJSON_Parse(req_text);
    statuses s = {0};
    assert_int_equal(pti_store_create(root, req, record, &s), PTI_STORE_OK);
    cJSON_Delete(req);
    assert_true(saw(&s, "using existing layer"));
    int status;
    cJSON *show = pti_store_show(root, "third", false, &status);
    if (!show)
        fail_msg("show third: %s", pt_last_error());
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(show, "system")), "Other.");
    assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(show, "parameters")),
                           "temperature")); /* inherited */
    cJSON_Delete(show);

    assert_int_equal(pti_store_delete(root, "tiny"), PTI_STORE_OK);
    assert_int_equal(pti_store_delete(root, "tiny"), PTI_STORE_NOT_FOUND);
    assert_true(exists(blob)); /* still used by me/other:v1 and third */
    assert_int_equal(pti_store_delete(root, "me/other:v1"), PTI_STORE_OK);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/manifests/registry.ollama.ai/me", root);
    assert_false(exists(dir)); /* empty directories removed */
    assert_true(exists(blob)); /* still used by third */
    assert_int_equal(pti_store_delete(root, "third"), PTI_STORE_OK);
    assert_false(exists(blob));
    /* every blob is gone, the directory stays */
    list = pti_store_list(root, NULL, NULL, 0);
    assert_int_equal(cJSON_GetArraySize(list), 0);
    cJSON_Delete(list);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s/blobs')\"", root);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(pti_store_delete(root, "a/b/c/d"), PTI_STORE_BAD_REQUEST);
    remove_root();
}

static int create_json(const char *text)
{
    cJSON *req = cJSON_Parse(text);
    assert_non_null(req);
    int st = pti_store_create(root, req, NULL, NULL);
    cJSON_Delete(req);
    return st;
}

static void test_refusals(void **state)
{
    (void)state;
    make_root();
    /* blobs */
    assert_int_equal(pti_store_blob_check(root, "sha256:abc"), PTI_STORE_BAD_REQUEST);
    assert_int_equal(pti_store_blob_check(root, "sha256:../../../etc/passwd"),
                     PTI_STORE_BAD_REQUEST);
    assert_int_equal(pti_store_blob_check(root, "sha256:" HEX64), PTI_STORE_NOT_FOUND);
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/upload", root);
    run("printf hello > '%s'", tmp);
    assert_int_equal(pti_store_blob_commit(root, tmp, "sha256:" HEX64), PTI_STORE_BAD_REQUEST);
    assert_string_equal(pt_last_error(),
                        "digest mismatch, expected sha256:" HEX64 ", got sha256:"
                        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    assert_false(exists(tmp));
    char text_digest[72];
    upload("/dev/null", text_digest); /* an empty blob: not a GGUF */

    /* no store root: refused, never /manifests or /blobs */
    int status;
    assert_int_equal(pti_store_copy("", "a", "b"), PTI_STORE_FAILED);
    assert_non_null(strstr(pt_last_error(), "no model store"));
    assert_int_equal(pti_store_delete(NULL, "a"), PTI_STORE_FAILED);
    assert_int_equal(pti_store_blob_check("", "sha256:" HEX64), PTI_STORE_FAILED);
    assert_null(pti_store_show("", "a", false, &status));
    assert_int_equal(status, PTI_STORE_FAILED);

    /* create */
    assert_int_equal(create_json("{\"from\":\"x\"}"), PTI_STORE_BAD_REQUEST);
    assert_non_null(strstr(pt_last_error(), "model is required"));
    assert_int_equal(create_json("{\"model\":\"m\"}"), PTI_STORE_BAD_REQUEST);
    assert_non_null(strstr(pt_last_error(), "neither 'from' or 'files'"));
    assert_int_equal(create_json("{\"model\":\"m\",\"from\":\"nope\"}"), PTI_STORE_NOT_FOUND);
    assert_int_equal(create_json("{\"model\":\"../../m\",\"from\":\"nope\"}"),
                     PTI_STORE_BAD_REQUEST);
    assert_int_equal(create_json("{\"model\":\"m\",\"from\":\"x\",\"quantize\":\"q4_K_M\"}"),
                     PTI_STORE_BAD_REQUEST);
    assert_non_null(strstr(pt_last_error(), "quantizing is not supported"));
    assert_int_equal(create_json("{\"name\":\"m\",\"files\":{\"a.gguf\":\"sha256:" HEX64 "\"}}"),
                     PTI_STORE_BAD_REQUEST); /* legacy "name"; the blob is missing */
    assert_non_null(strstr(pt_last_error(), "blob sha256:" HEX64 " for 'a.gguf' not found"));
    assert_int_equal(create_json("{\"model\":\"m\",\"files\":{\"a.gguf\":\"sha256:xyz\"}}"),
                     PTI_STORE_BAD_REQUEST);
    assert_int_equal(
        create_json("{\"model\":\"m\",\"files\":{\"a.safetensors\":\"sha256:" HEX64 "\"}}"),
        PTI_STORE_BAD_REQUEST);
    assert_non_null(strstr(pt_last_error(), "only GGUF"));
    assert_int_equal(create_json("{\"model\":\"m\",\"files\":[1]}"), PTI_STORE_BAD_REQUEST);
    assert_int_equal(create_json("{\"model\":7,\"from\":\"x\"}"), PTI_STORE_BAD_REQUEST);
    char req[512];
    snprintf(req, sizeof req, "{\"model\":\"m\",\"files\":{\"a.gguf\":\"%s\"}}", text_digest);
    assert_int_equal(create_json(req), PTI_STORE_BAD_REQUEST); /* not a GGUF */
    char gguf[72];
    upload(TINY_QWEN3, gguf);
    snprintf(req, sizeof req,
             "{\"model\":\"m\",\"files\":{\"a.gguf\":\"%s\"},\"parameters\":{\"x\":{}}}", gguf);
    assert_int_equal(create_json(req), PTI_STORE_BAD_REQUEST);
    snprintf(req, sizeof req, "{\"model\":\"m\",\"files\":{\"a.gguf\":\"%s\"},\"license\":3}",
             gguf);
    assert_int_equal(create_json(req), PTI_STORE_BAD_REQUEST);
    snprintf(req, sizeof req, "{\"model\":\"m\",\"files\":{\"a.gguf\":\"%s\"},\"messages\":[1]}",
             gguf);
    assert_int_equal(create_json(req), PTI_STORE_BAD_REQUEST);
    /* nothing was written by the refused creates */
    cJSON *list = pti_store_list(root, NULL, NULL, 0);
    assert_int_equal(cJSON_GetArraySize(list), 0);
    cJSON_Delete(list);
    snprintf(req, sizeof req, "{\"model\":\"m\",\"files\":{\"a.gguf\":\"%s\"}}", gguf);
    assert_int_equal(create_json(req), PTI_STORE_OK);
    cJSON *show = pti_store_show(root, "m", false, &status);
    assert_non_null(show);
    assert_null(cJSON_GetObjectItem(show, "parameters"));
    /* no template layer: the GGUF's tokenizer.chat_template (what the server renders with, as
     * Ollama detects a template at create time); length and sha256 read with gguf-py */
    const char *tmpl = cJSON_GetStringValue(cJSON_GetObjectItem(show, "template"));
    assert_non_null(tmpl);
    assert_int_equal(strlen(tmpl), 4116);
    uint8_t d[32];
    char hex[PTI_SHA256_HEX_LEN + 1];
    pti_sha256(tmpl, strlen(tmpl), d);
    pti_sha256_hex(d, hex);
    assert_string_equal(hex, "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5");
    /* and the Modelfile claims no TEMPLATE it does not use (the text is Jinja) */
    assert_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(show, "modelfile")), "TEMPLATE"));
    const cJSON *caps = cJSON_GetObjectItem(show, "capabilities"); /* Jinja: tools, <think> */
    assert_int_equal(cJSON_GetArraySize(caps), 3);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetArrayItem(caps, 1)), "tools");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetArrayItem(caps, 2)), "thinking");
    cJSON_Delete(show);

    /* a hand-written manifest whose params and messages layers are not what they should be */
    char bad_params[72], manifest[512], text[1024];
    snprintf(tmp, sizeof tmp, "%s/params.json", root);
    run("printf '[1,2]' > '%s'", tmp);
    upload(tmp, bad_params);
    snprintf(manifest, sizeof manifest, "%s/manifests/registry.ollama.ai/library/odd/latest", root);
    run("mkdir -p \"$(dirname '%s')\"", manifest);
    snprintf(text, sizeof text,
             "{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"application/vnd.ollama.image."
             "model\",\"digest\":\"%s\",\"size\":1},{\"mediaType\":\"application/vnd.ollama."
             "image.params\",\"digest\":\"%s\",\"size\":5},{\"mediaType\":\"application/"
             "vnd.ollama.image.messages\",\"digest\":\"%s\",\"size\":5}]}",
             gguf, bad_params, bad_params);
    FILE *f = fopen(manifest, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    show = pti_store_show(root, "odd", false, &status);
    assert_non_null(show);
    assert_null(cJSON_GetObjectItem(show, "parameters"));
    assert_null(cJSON_GetObjectItem(show, "messages"));
    cJSON_Delete(show);
    list = pti_store_list(root, NULL, NULL, 0); /* no config blob: details from the GGUF */
    const cJSON *odd = find_entry(list, "odd:latest");
    assert_non_null(odd);
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(odd, "details"), "family")),
        "qwen3");
    cJSON_Delete(list);
    remove_root();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_formats, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gguf_facts, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_create_list_show, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_copy_delete, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
