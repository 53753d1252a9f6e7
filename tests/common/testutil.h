/* Shared test helpers: reading the PyTorch reference fixtures (tests/fixtures/<area>.ptfx,
 * written by gen_fixtures.py) and comparing tensors with cmocka failures that say where and
 * how values differ. Include after <cmocka.h>'s prerequisites (this header includes them). */
#ifndef PT_TESTUTIL_H
#define PT_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <prometorch/prometorch.h>

typedef struct pt_fixture pt_fixture;

/* Opens tests/fixtures/<area>.ptfx; fails the running test if it is missing or malformed. */
pt_fixture *fx_open(const char *area);
void fx_close(pt_fixture *fx);
bool fx_has(const pt_fixture *fx, const char *name);
/* The number of records and the name of record i, in file order. */
int fx_count(const pt_fixture *fx);
const char *fx_name(const pt_fixture *fx, int i);
/* A new CPU tensor with the record's dtype/shape/data; fails the test if absent. */
pt_tensor *fx_get(const pt_fixture *fx, const char *name);
/* fx_get then pt_to(dev). */
pt_tensor *fx_get_on(const pt_fixture *fx, const char *name, pt_device dev);

/* The whole file at path in a malloc'd buffer (free with free()) with a NUL byte after its
 * *len bytes; fails the running test if it cannot be read. */
void *pt_test_read_file(const char *path, size_t *len);

/* The path of a real model that `make models` fetches (file: its name, such as
 * "SmolLM2-135M-Instruct.Q4_1.gguf") in $PT_MODELS_DIR, which ctest sets from the CMake cache
 * variable PT_MODELS_DIR (default: data/models of the source tree; compiled in as the fallback
 * for a test run by hand). Static buffer. Fails the running test when the file is missing: a
 * model the set-up should have fetched is never a reason to skip. */
const char *pt_test_model_path(const char *file);

/* Fails unless `actual` is non-NULL, has expected's shape and dtype, and every element
 * satisfies |a - e| <= atol + rtol * |e| (NaN matches NaN, inf matches same-sign inf).
 * Works for any device (values are copied to the host). */
#define assert_tensor_close(actual, expected, rtol, atol)                                          \
    pt_test_assert_close((actual), (expected), (rtol), (atol), true, __FILE__, __LINE__)
/* Same, but the dtypes may differ (values compared as doubles). */
#define assert_tensor_close_any_dtype(actual, expected, rtol, atol)                                \
    pt_test_assert_close((actual), (expected), (rtol), (atol), false, __FILE__, __LINE__)
/* Exact equality of shape, dtype and values. */
#define assert_tensor_equal(actual, expected)                                                      \
    pt_test_assert_close((actual), (expected), 0.0, 0.0, true, __FILE__, __LINE__)
void pt_test_assert_close(const pt_tensor *actual, const pt_tensor *expected, double rtol,
                          double atol, bool same_dtype, const char *file, int line);

/* Fails unless the call failed: `result` is NULL, pt_last_status() == status and the message
 * contains `substring`. Clears the error afterwards. */
#define assert_pt_error(result, status, substring)                                                 \
    pt_test_assert_error((const void *)(result), (status), (substring), __FILE__, __LINE__)
void pt_test_assert_error(const void *result, pt_status status, const char *substring,
                          const char *file, int line);
/* Fails unless a pt_status-returning call failed with `status` and `substring`. */
#define assert_pt_status_error(st, status, substring)                                              \
    pt_test_assert_status_error((st), (status), (substring), __FILE__, __LINE__)
void pt_test_assert_status_error(pt_status st, pt_status status, const char *substring,
                                 const char *file, int line);

/* Fails unless t is a non-NULL tensor with the given shape. */
#define assert_shape(t, ...) pt_test_assert_shape((t), PT_SHAPE(__VA_ARGS__), __FILE__, __LINE__)
void pt_test_assert_shape(const pt_tensor *t, int ndim, const int64_t *shape, const char *file,
                          int line);

/* Reads element i (row-major) of any CPU tensor as a double. */
double pt_test_get(const pt_tensor *t, int64_t i);

/* A non-contiguous copy of t with the same values: the data of a larger tensor viewed through
 * a transpose/step, for exercising strided paths. Returns a new reference. */
pt_tensor *pt_test_noncontig(const pt_tensor *t);

/* cmocka setup/teardown that open/close a scope around each test, so leaked temporaries are
 * freed, and check afterwards that no CPU tensor memory is left allocated. */
int pt_test_setup(void **state);
int pt_test_teardown(void **state);

#endif
