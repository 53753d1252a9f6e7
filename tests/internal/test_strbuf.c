/* pti_strbuf, the internal string builder: appends of text and binary bytes, printf of short
 * and long output (checked against the C library's snprintf), take of an empty buffer, the
 * size limit and what happens after it is hit, and free keeping the limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "testutil.h"

static void test_put_and_take(void **state)
{
    (void)state;
    pti_strbuf b = {0};
    assert_true(pti_strbuf_put(&b, "ab", 0)); /* nothing: no allocation */
    assert_null(b.data);
    assert_true(pti_strbuf_puts(&b, "hello"));
    assert_true(pti_strbuf_putc(&b, ','));
    assert_true(pti_strbuf_put(&b, " world!!", 6));
    assert_int_equal(b.len, 12);
    assert_string_equal(b.data, "hello, world");
    const unsigned char bin[3] = {0x00, 0xff, 0x80};
    assert_true(pti_strbuf_put(&b, bin, 3));
    assert_int_equal(b.len, 15);
    assert_memory_equal(b.data + 12, bin, 3);
    assert_int_equal(b.data[15], '\0');
    char *s = pti_strbuf_take(&b);
    assert_non_null(s);
    assert_memory_equal(s, "hello, world", 12);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    free(s);

    s = pti_strbuf_take(&b); /* nothing appended: "" */
    assert_non_null(s);
    assert_string_equal(s, "");
    free(s);
}

static void test_printf(void **state)
{
    (void)state;
    pti_strbuf b = {0};
    assert_true(pti_strbuf_printf(&b, "%d-%s-%.3f", 42, "x", 1.5));
    assert_string_equal(b.data, "42-x-1.500");
    /* longer than the 256-byte stack buffer: formatted straight into the buffer */
    char big[1000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    char want[1100];
    snprintf(want, sizeof want, "42-x-1.500[%s|%5d]", big, 7);
    assert_true(pti_strbuf_printf(&b, "[%s|%5d]", big, 7));
    assert_int_equal(b.len, strlen(want));
    assert_string_equal(b.data, want);
    pti_strbuf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
}

static void test_limit(void **state)
{
    (void)state;
    pti_strbuf b = {.limit = 8};
    assert_true(pti_strbuf_puts(&b, "12345678")); /* exactly the limit */
    assert_true(pti_strbuf_ok(&b));
    assert_false(pti_strbuf_putc(&b, '9'));
    assert_true(b.too_big);
    assert_false(b.oom);
    assert_string_equal(b.data, "12345678"); /* kept, not truncated further */
    assert_false(pti_strbuf_puts(&b, ""));   /* failed stays failed */
    assert_null(pti_strbuf_take(&b));
    assert_null(b.data);

    pti_strbuf_free(&b); /* flags cleared, limit kept */
    assert_int_equal(b.limit, 8);
    assert_true(pti_strbuf_ok(&b));
    assert_false(pti_strbuf_printf(&b, "%s", "123456789"));
    assert_true(b.too_big);
    pti_strbuf_free(&b);
    assert_true(pti_strbuf_printf(&b, "%s", "1234"));
    assert_false(pti_strbuf_printf(&b, "%300s", "x")); /* long printf path, past the limit */
    assert_true(b.too_big);
    assert_string_equal(b.data, "1234");
    pti_strbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_and_take),
        cmocka_unit_test(test_printf),
        cmocka_unit_test(test_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
