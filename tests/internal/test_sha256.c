/* SHA-256 (src/serve/http/sha256.c): the FIPS 180-2 / NIST example vectors ("abc", the empty
 * string, the 448- and 896-bit messages, a million 'a'), the incremental API fed in uneven
 * pieces, and the file digest against coreutils' sha256sum over committed files (that part is
 * skipped when sha256sum is absent). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "serve/http/sha256.h"

static void expect_hex(const void *data, size_t len, const char *hex)
{
    uint8_t d[32];
    char got[65];
    pti_sha256(data, len, d);
    pti_sha256_hex(d, got);
    assert_string_equal(got, hex);
}

static void test_nist_vectors(void **state)
{
    (void)state;
    expect_hex("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect_hex("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    expect_hex(m448, strlen(m448),
               "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    expect_hex(m896, strlen(m896),
               "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    char *million = malloc(1000000);
    assert_non_null(million);
    memset(million, 'a', 1000000);
    expect_hex(million, 1000000,
               "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* the same million fed in uneven pieces, crossing block boundaries every way */
    pti_sha256_ctx c;
    pti_sha256_init(&c);
    size_t step = 1, done = 0;
    while (done < 1000000) {
        size_t n = step < 1000000 - done ? step : 1000000 - done;
        pti_sha256_update(&c, million + done, n);
        done += n;
        step = step * 7 % 131 + 1;
    }
    uint8_t d[32];
    char hex[65];
    pti_sha256_final(&c, d);
    pti_sha256_hex(d, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
    /* lengths around the padding boundary (55, 56, 63, 64 bytes) */
    expect_hex("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 55,
               "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    expect_hex("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 56,
               "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

/* sha256sum's answer for path, or false when the tool cannot be run. */
static bool sha256sum(const char *path, char hex[65])
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "sha256sum '%s' 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return false;
    char line[256] = "";
    bool ok = fgets(line, sizeof line, p) != NULL;
    int rc = pclose(p);
    if (!ok || rc != 0 || strspn(line, "0123456789abcdef") != 64)
        return false;
    memcpy(hex, line, 64);
    hex[64] = '\0';
    return true;
}

static void test_files_against_sha256sum(void **state)
{
    (void)state;
    const char *files[] = {
        PT_FIXTURES_DIR "/llm/tiny/qwen3-q8_0.gguf",
        PT_FIXTURES_DIR "/llm/tiny/llama-q4_k_m.gguf",
        PT_FIXTURES_DIR "/llm/tiny/gemma3-q6_k.ref",
    };
    char want[65], got[65];
    if (!sha256sum(files[0], want))
        skip();
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        assert_true(sha256sum(files[i], want));
        uint64_t size = 0;
        assert_true(pti_sha256_file(files[i], got, &size));
        assert_string_equal(got, want);
        assert_true(size > 0);
    }
    assert_pt_error(pti_sha256_file("/nonexistent/x", got, NULL) ? got : NULL, PT_ERR_IO,
                    "/nonexistent/x");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nist_vectors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_files_against_sha256sum, pt_test_setup,
                                        pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
