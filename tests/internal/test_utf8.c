/* pti_utf8_char_len / pti_utf8_invalid_at (src/core/utf8.h) on the boundary cases of RFC 3629:
 * the first and last code point of each length, overlong forms, surrogates, values past
 * U+10FFFF, stray continuation bytes, truncated sequences. The expected verdicts are Python's
 * bytes.decode('utf-8') (strict), which refuses exactly these. */
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "testutil.h"

typedef struct {
    const char *bytes;
    size_t len; /* expected pti_utf8_char_len at offset 0 (0: invalid) */
} utf8_case;

static void test_char_len(void **state)
{
    (void)state;
    static const utf8_case cases[] = {
        {"A", 1},
        {"\x7F", 1},
        {"\xC2\x80", 2},
        {"\xDF\xBF", 2},
        {"\xE0\xA0\x80", 3},
        {"\xED\x9F\xBF", 3},
        {"\xEE\x80\x80", 3},
        {"\xEF\xBF\xBF", 3},
        {"\xF0\x90\x80\x80", 4},
        {"\xF4\x8F\xBF\xBF", 4},
        {"\xC0\x80", 0},
        {"\xC1\xBF", 0},
        {"\xE0\x9F\xBF", 0},
        {"\xED\xA0\x80", 0},
        {"\xED\xBF\xBF", 0},
        {"\xF0\x8F\xBF\xBF", 0},
        {"\xF4\x90\x80\x80", 0},
        {"\xF5\x80\x80\x80", 0},
        {"\xFF", 0},
        {"\x80", 0},
        {"\xBF", 0},
        {"\xE2\x82", 0},
        {"\xF0\x9F\x98", 0},
        {"\xE2\x28\xA1", 0},
        {"\xF0\x9F\x98\x28", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].bytes);
        size_t got = pti_utf8_char_len((const uint8_t *)cases[i].bytes, n);
        if (got != cases[i].len)
            fail_msg("case %zu: length %zu, expected %zu", i, got, cases[i].len);
    }
}

static void test_invalid_at(void **state)
{
    (void)state;
    const char ok[] = "plain, caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80";
    assert_int_equal(pti_utf8_invalid_at(ok, sizeof ok - 1), sizeof ok - 1);
    assert_int_equal(pti_utf8_invalid_at("", 0), 0);
    const char bad[] = "ab\xC3\xA9\xED\xA0\x80z"; /* a surrogate after 4 good bytes */
    assert_int_equal(pti_utf8_invalid_at(bad, sizeof bad - 1), 4);
    const char cut[] = "abc\xE2\x82"; /* truncated at the end */
    assert_int_equal(pti_utf8_invalid_at(cut, sizeof cut - 1), 3);
    const char nul[] = "a\0b"; /* NUL is a valid character */
    assert_int_equal(pti_utf8_invalid_at(nul, 3), 3);
}

/* Go's utf8.DecodeRune gives RuneError with width 1 for every byte that does not start a
 * character, so json.Marshal writes one U+FFFD per bad byte: "\xE2\x82c" is two of them. */
static void test_repair(void **state)
{
    (void)state;
    size_t n = 99;
    assert_null(pti_utf8_repair("caf\xC3\xA9", 5, &n)); /* valid: nothing to repair */
    assert_int_equal(n, 99);
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"a\xFF"
         "b",
         "a\xEF\xBF\xBD"
         "b"},
        {"a\xE2\x82"
         "c",
         "a\xEF\xBF\xBD\xEF\xBF\xBD"
         "c"},
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* an encoded surrogate */
        {"\xC0\xAF!", "\xEF\xBF\xBD\xEF\xBF\xBD!"},               /* overlong '/' */
        {"\xF0\x9F\x98\x80\x80", "\xF0\x9F\x98\x80\xEF\xBF\xBD"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = pti_utf8_repair(cases[i].in, strlen(cases[i].in), &n);
        assert_non_null(got);
        assert_int_equal(n, strlen(cases[i].want));
        assert_memory_equal(got, cases[i].want, n);
        assert_int_equal(got[n], 0);
        free(got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_char_len),
        cmocka_unit_test(test_invalid_at),
        cmocka_unit_test(test_repair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
