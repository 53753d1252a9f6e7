/* Printing tests: pt_to_string against PyTorch's repr() of the same tensors (1-D to 4-D,
 * large/small magnitudes, integer-valued floats, nan/inf, ints, bool, float64/16, bfloat16,
 * summarized and empty tensors, 0-dim), strided inputs, pt_fprint, the CUDA device suffix
 * (where a GPU exists) and errors. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

/* The reference string of a case: the uint8 tensor of its bytes, NUL-terminated (malloc'd). */
static char *expected_repr(const char *name)
{
    pt_tensor *bytes = fx_get(fx, name);
    size_t n = (size_t)pt_numel(bytes);
    char *s = malloc(n + 1);
    assert_non_null(s);
    assert_int_equal(pt_copy_to_host(bytes, s, n), PT_OK);
    s[n] = '\0';
    pt_release(bytes);
    return s;
}

static void check_repr(const pt_tensor *t, const char *expected, const char *what)
{
    char *got = pt_to_string(t);
    assert_non_null(got);
    bool same = strcmp(got, expected) == 0;
    if (!same)
        print_error("%s:\n--- expected (PyTorch)\n%s\n--- got\n%s\n", what, expected, got);
    free(got);
    if (!same)
        fail();
}

static int case_count(void)
{
    int n = 0;
    char name[32];
    for (;; n++) {
        snprintf(name, sizeof name, "p%d.in", n);
        if (!fx_has(fx, name))
            return n;
    }
}

static void test_repr_matches_torch(void **state)
{
    (void)state;
    int n = case_count();
    assert_true(n >= 30);
    for (int i = 0; i < n; i++) {
        char in_name[32], repr_name[32];
        snprintf(in_name, sizeof in_name, "p%d.in", i);
        snprintf(repr_name, sizeof repr_name, "p%d.repr", i);
        pt_tensor *t = fx_get(fx, in_name);
        char *expected = expected_repr(repr_name);
        check_repr(t, expected, in_name);
        free(expected);
        pt_release(t);
    }
}

/* The same values through a strided view print the same. */
static void test_repr_of_strided_views(void **state)
{
    (void)state;
    int n = case_count();
    for (int i = 0; i < n; i++) {
        char in_name[32], repr_name[32];
        snprintf(in_name, sizeof in_name, "p%d.in", i);
        snprintf(repr_name, sizeof repr_name, "p%d.repr", i);
        pt_tensor *t = fx_get(fx, in_name);
        if (pt_numel(t) == 0 || pt_ndim(t) == 0) {
            pt_release(t);
            continue;
        }
        pt_tensor *nc = pt_test_noncontig(t);
        assert_non_null(nc);
        char *expected = expected_repr(repr_name);
        check_repr(nc, expected, in_name);
        free(expected);
        pt_release(nc);
        pt_release(t);
    }
}

static void test_fprint_writes_repr_and_newline(void **state)
{
    (void)state;
    pt_tensor *t = fx_get(fx, "p1.in");
    char *expected = expected_repr("p1.repr");
    FILE *f = tmpfile();
    assert_non_null(f);
    pt_fprint(f, t);
    long len = ftell(f);
    assert_int_equal(len, (long)strlen(expected) + 1);
    rewind(f);
    char buf[256] = {0};
    assert_true(fread(buf, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    assert_int_equal(buf[len - 1], '\n');
    buf[len - 1] = '\0';
    assert_string_equal(buf, expected);
    free(expected);
}

static void test_cuda_repr_has_device_suffix(void **state)
{
    (void)state;
    if (!pt_device_available(pt_cuda(0)))
        skip();
    pt_tensor *t = fx_get_on(fx, "cuda.in", pt_cuda(0));
    char *expected = expected_repr("cuda.repr");
    check_repr(t, expected, "cuda.in");
    free(expected);
}

static void test_errors(void **state)
{
    (void)state;
    pt_clear_error();
    assert_pt_error(pt_to_string(NULL), PT_ERR_NULL, "pt_to_string");
    unsigned char blocks[34] = {0};
    pt_tensor *q = pt_from_data(blocks, PT_SHAPE(32), PT_Q8_0, pt_cpu());
    assert_non_null(q);
    assert_pt_error(pt_to_string(q), PT_ERR_DTYPE, "q8_0");
    pt_print(NULL); /* prints nothing, does not crash */
    pt_clear_error();
}

int main(void)
{
    fx = fx_open("print");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_repr_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_repr_of_strided_views, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_fprint_writes_repr_and_newline, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cuda_repr_has_device_suffix, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_errors, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
