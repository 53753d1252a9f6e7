/* The CUDA backend is its own shared object, loaded on first use: a program that only runs CPU
 * ops maps no CUDA library (read from /proc/self/maps), and the first question about a CUDA
 * device loads libprometorch_cuda.so when the build has it (PT_TEST_CUDA_PLUGIN, set by
 * tests/CMakeLists.txt under PT_WITH_CUDA). Without a GPU or driver the device count is 0 with
 * no error left behind, and an allocation on "cuda" fails with PT_ERR_DEVICE saying what is
 * missing. Runs on every machine (no GPU needed). */
#include "testutil.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef PT_TEST_CUDA_PLUGIN
#define PT_TEST_CUDA_PLUGIN 0
#endif

/* True if a mapped file's name contains `what` (e.g. "libcudart"). */
static bool mapped(const char *what)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, what) != NULL;
    fclose(f);
    return found;
}

static const char *const cuda_libs[] = {"libcudart", "libcublas", "libcuda.", "libprometorch_cuda"};

static void test_cpu_program_maps_no_cuda(void **state)
{
    (void)state;
    pt_scope_begin();
    pt_tensor *a = pt_randn(PT_SHAPE(8, 8), PT_FLOAT32, pt_cpu());
    pt_tensor *b = pt_mm(a, pt_transpose(a, 0, 1));
    assert_non_null(pt_sum(pt_add(b, pt_relu(a))));
    assert_true(pt_device_parse("cpu").type == PT_DEVICE_CPU);
    char buf[16];
    assert_string_equal(pt_device_str(pt_cuda(1), buf, sizeof buf), "cuda:1"); /* no load */
    pt_scope_end();
    for (size_t i = 0; i < sizeof cuda_libs / sizeof cuda_libs[0]; i++)
        if (mapped(cuda_libs[i]))
            fail_msg("a CPU-only program maps %s", cuda_libs[i]);
    assert_true(mapped("libprometorch.so")); /* the check itself sees the library's files */
}

static void test_cuda_on_first_use(void **state)
{
    (void)state;
    pt_clear_error();
    int n = pt_cuda_device_count();
    assert_true(n >= 0);
    assert_int_equal(pt_last_status(), PT_OK); /* no error noise, whatever is missing */
    assert_int_equal(mapped("libprometorch_cuda"), PT_TEST_CUDA_PLUGIN);
    bool gpu_node = access("/dev/nvidiactl", F_OK) == 0;
    if (!gpu_node) /* no driver: no device, and cuda ops say so */
        assert_int_equal(n, 0);
    assert_int_equal(pt_cuda_is_available(), n > 0);
    if (n == 0) {
        assert_false(pt_device_available(pt_cuda(0)));
        assert_int_equal(pt_last_status(), PT_OK);
        pt_tensor *t = pt_zeros(PT_SHAPE(2), PT_FLOAT32, pt_device_parse("cuda"));
        /* the message names the device and what is missing: the object, or a device */
        assert_pt_error(t, PT_ERR_DEVICE,
                        PT_TEST_CUDA_PLUGIN ? "device cuda:0 is not available: the cuda backend "
                                              "found 0 devices"
                                            : "device cuda:0 is not available: "
                                              "libprometorch_cuda.so could not be loaded");
    }
    pt_clear_error();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_program_maps_no_cuda),
        cmocka_unit_test(test_cuda_on_first_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
