/* Broken model files never crash the LLM engine: the committed tiny GGUF models are truncated
 * at many lengths and have bytes of their metadata and tensor tables corrupted (deterministic
 * pseudo-random mutations); pt_llm_load must either refuse the file with an error message or
 * load a model that then evaluates and generates without fault (run under ASan+UBSan by
 * `make asan`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/testutil.h"

#define TINY PT_FIXTURES_DIR "/llm/tiny/"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Writes len bytes to a temporary file whose path is returned in path (size 64). */
static void write_temp(const unsigned char *data, size_t len, char *path)
{
    snprintf(path, 64, "/tmp/pt_llm_robust_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

/* Loads the file; a model that loads must also run. Returns whether it loaded. */
static bool try_model(const unsigned char *data, size_t len)
{
    char path[64];
    write_temp(data, len, path);
    pt_llm_opts o = {.num_ctx = 32};
    pt_llm *llm = pt_llm_load(path, &o);
    unlink(path);
    if (!llm) {
        assert_true(strlen(pt_last_error()) > 0);
        pt_clear_error();
        return false;
    }
    int32_t ids[3] = {1, 2, 3};
    pt_gen_opts g = pt_gen_opts_default();
    g.num_predict = 3;
    g.seed = 1;
    (void)pt_llm_generate_tokens(llm, ids, 3, &g, NULL, NULL);
    pt_clear_error();
    pt_llm_free(llm);
    return true;
}

static void mutate_model(const char *file, int truncations, int mutations)
{
    size_t len;
    unsigned char *orig = pt_test_read_file(file, &len);
    unsigned char *buf = malloc(len);
    assert_true(try_model(orig, len));
    int loaded = 0;
    for (int i = 1; i <= truncations; i++)
        loaded += try_model(orig, len * (size_t)i / (size_t)(truncations + 1));
    assert_int_equal(loaded, 0);               /* a truncated file is always refused */
    size_t header = len < 65536 ? len : 65536; /* metadata and tensor infos live here */
    for (int i = 0; i < mutations; i++) {
        memcpy(buf, orig, len);
        int flips = 1 + (int)(next_random() % 4);
        for (int f = 0; f < flips; f++) {
            size_t at = (size_t)(next_random() % header);
            buf[at] = (unsigned char)(next_random() >> 8);
        }
        loaded += try_model(buf, len);
    }
    printf("%s: %d of %d corrupted copies loaded and ran, the rest were refused\n",
           strrchr(file, '/') + 1, loaded, mutations);
    free(buf);
    free(orig);
}

static void test_broken_llama(void **state)
{
    (void)state;
    mutate_model(TINY "llama-q4_k_m.gguf", 40, 150);
}

static void test_broken_gemma3(void **state)
{
    (void)state;
    mutate_model(TINY "gemma3-q8_0.gguf", 20, 150);
}

static void test_broken_qwen2(void **state)
{
    (void)state;
    mutate_model(TINY "qwen2-q6_k.gguf", 20, 150);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_broken_llama, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_broken_gemma3, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_broken_qwen2, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
