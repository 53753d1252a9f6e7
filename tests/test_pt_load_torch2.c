/* Loading files written by PyTorch 2.x (tests/fixtures/torch2/, by gen_torch2.py): the newer
 * archive layout, torch.device / dtype / bytes / float values in a training checkpoint, every
 * dtype, views of one storage, Parameters, the legacy and protocol-4 variants, a dtype without a
 * legacy storage class (refused by name), a model pickled whole (refused; its tensors load by
 * name with pt_load_tensors) and safetensors from the safetensors package. Expected tensors are
 * torch's, from torch2.ptfx. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static char *fixture_path(const char *file)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/torch2/%s", PT_FIXTURES_DIR, file);
    return path;
}

/* Checks every "<stem>/<path>" record of the fixture against the loaded file's tensor at
 * <path> (flattened as pt_load_tensors names them), and the storage-sharing markers. */
static void check_file_against_fixture(const char *stem, const char *file)
{
    pt_fixture *fx = fx_open("torch2");
    pt_value *flat = pt_load_tensors(fixture_path(file));
    assert_non_null(flat);
    size_t plen = strlen(stem);
    int checked = 0;
    for (int i = 0; i < fx_count(fx); i++) {
        const char *name = fx_name(fx, i);
        if (strncmp(name, stem, plen) != 0 || name[plen] != '/')
            continue;
        const char *path = name + plen + 1;
        const char *mark = strstr(path, "#shares#");
        if (mark) {
            char first[256];
            snprintf(first, sizeof first, "%.*s", (int)(mark - path), path);
            pt_tensor *a = pt_value_tensor_ref(pt_value_get_str_ref(flat, first));
            pt_tensor *b = pt_value_tensor_ref(pt_value_get_str_ref(flat, mark + 8));
            assert_non_null(a);
            assert_non_null(b);
            assert_true(pt_shares_storage(a, b));
            continue;
        }
        pt_value *v = pt_value_get_str_ref(flat, path);
        if (!v)
            fail_msg("%s: no tensor '%s' (%s)", file, path, pt_last_error());
        pt_tensor *want = fx_get(fx, name);
        assert_tensor_equal(pt_value_tensor_ref(v), want);
        pt_release(want);
        checked++;
    }
    assert_true(checked > 0);
    assert_int_equal(checked, pt_value_len(flat));
    pt_value_free(flat);
    fx_close(fx);
}

static void test_state_dict(void **state)
{
    (void)state;
    check_file_against_fixture("state_dict", "state_dict.pt");
    pt_value *sd = pt_load(fixture_path("state_dict.pt"));
    assert_non_null(sd);
    static const char *const keys[] = {"conv.weight",
                                       "conv.bias",
                                       "bn.weight",
                                       "bn.bias",
                                       "bn.running_mean",
                                       "bn.running_var",
                                       "bn.num_batches_tracked",
                                       "emb.weight",
                                       "norm.weight",
                                       "norm.bias",
                                       "fc.weight",
                                       "fc.bias"};
    assert_int_equal(pt_value_len(sd), 12);
    for (int i = 0; i < 12; i++)
        assert_string_equal(pt_value_as_str(pt_value_key_ref(sd, i), NULL), keys[i]);
    pt_tensor *nbt = pt_value_tensor_ref(pt_value_get_str_ref(sd, "bn.num_batches_tracked"));
    assert_int_equal(pt_ndim(nbt), 0);
    assert_int_equal(pt_dtype_of(nbt), PT_INT64);
    pt_value_free(sd);
}

static void test_training_checkpoint_values(void **state)
{
    (void)state;
    check_file_against_fixture("training", "training.pt");
    pt_value *ck = pt_load(fixture_path("training.pt"));
    assert_non_null(ck);
    int64_t epoch = 0;
    double loss = 0;
    bool flag = false;
    size_t blob_len = 0;
    assert_int_equal(pt_value_as_int(pt_value_get_str_ref(ck, "epoch"), &epoch), PT_OK);
    assert_int_equal(epoch, 7);
    assert_int_equal(pt_value_as_float(pt_value_get_str_ref(ck, "loss"), &loss), PT_OK);
    assert_true(loss == 0.125);
    assert_string_equal(pt_value_as_str(pt_value_get_str_ref(ck, "name"), NULL), "run-2");
    assert_string_equal(pt_value_as_str(pt_value_get_str_ref(ck, "device"), NULL), "cpu");
    assert_string_equal(pt_value_as_str(pt_value_get_str_ref(ck, "dtype"), NULL), "torch.float16");
    pt_value *shape = pt_value_get_str_ref(ck, "shape");
    assert_true(pt_value_is(shape, PT_VALUE_TUPLE));
    assert_int_equal(pt_value_len(shape), 2);
    assert_true(pt_value_is(pt_value_get_str_ref(ck, "tags"), PT_VALUE_LIST));
    assert_string_equal(pt_value_as_str(pt_value_path_ref(ck, "tags.1"), NULL), "b");
    assert_true(pt_value_is(pt_value_path_ref(ck, "pair.1"), PT_VALUE_NONE));
    assert_int_equal(pt_value_as_bool(pt_value_get_str_ref(ck, "flag"), &flag), PT_OK);
    assert_true(flag);
    const unsigned char *blob = pt_value_as_bytes(pt_value_get_str_ref(ck, "blob"), &blob_len);
    assert_non_null(blob);
    assert_int_equal(blob_len, 3);
    assert_memory_equal(blob, "\x00\x01\xff", 3);
    /* torch.optim's layout: state keyed by int parameter index, param_groups with options */
    double lr = 0;
    assert_int_equal(pt_value_as_float(pt_value_path_ref(ck, "optimizer.param_groups.0.lr"), &lr),
                     PT_OK);
    assert_true(lr == 0.01);
    assert_non_null(pt_value_path_ref(ck, "optimizer.state.5.exp_avg"));
    int64_t step_size = 0;
    assert_int_equal(pt_value_as_int(pt_value_path_ref(ck, "scheduler.step_size"), &step_size),
                     PT_OK);
    assert_int_equal(step_size, 3);
    pt_value_free(ck);
}

static void test_dtypes_and_views(void **state)
{
    (void)state;
    check_file_against_fixture("dtypes", "dtypes.pt");
    check_file_against_fixture("views", "views.pt");
    pt_value *v = pt_load(fixture_path("views.pt"));
    assert_non_null(v);
    pt_tensor *t = pt_value_tensor_ref(pt_value_get_str_ref(v, "t"));
    assert_int_equal(pt_stride(t)[0], 1);
    assert_int_equal(pt_stride(t)[1], 6);
    pt_tensor *slice = pt_value_tensor_ref(pt_value_get_str_ref(v, "slice"));
    assert_int_equal(pt_storage_offset(slice), 8);
    /* the same tensor saved twice is one object */
    assert_ptr_equal(pt_value_tensor_ref(pt_value_get_str_ref(v, "again")),
                     pt_value_tensor_ref(pt_value_get_str_ref(v, "base")));
    pt_value_free(v);
}

static void test_parameter_keeps_requires_grad(void **state)
{
    (void)state;
    check_file_against_fixture("param", "param.pt");
    pt_value *v = pt_load(fixture_path("param.pt"));
    assert_non_null(v);
    assert_true(pt_requires_grad(pt_value_tensor_ref(pt_value_get_str_ref(v, "w"))));
    pt_value_free(v);
}

static void test_legacy_and_protocol4(void **state)
{
    (void)state;
    check_file_against_fixture("legacy", "legacy.pt");
    check_file_against_fixture("protocol4", "protocol4.pt");
}

static void test_refusals(void **state)
{
    (void)state;
    assert_pt_error(pt_load(fixture_path("uint16.pt")), PT_ERR_DTYPE, "uint16");
    assert_pt_error(pt_load(fixture_path("whole_model.pt")), PT_ERR_UNSUPPORTED,
                    "torch.nn.modules");
    check_file_against_fixture("whole_model", "whole_model.pt");
}

static void test_safetensors_from_the_package(void **state)
{
    (void)state;
    pt_fixture *fx = fx_open("torch2");
    pt_value *meta = NULL;
    pt_value *st = pt_load_safetensors(fixture_path("dtypes.safetensors"), &meta);
    assert_non_null(st);
    assert_string_equal(pt_value_as_str(pt_value_get_str_ref(meta, "format"), NULL), "pt");
    static const char *const names[] = {"f32", "f64", "f16", "bf16", "i64",    "i32",
                                        "i16", "i8",  "u8",  "bool", "scalar", "empty"};
    for (int i = 0; i < 12; i++) {
        char rec[64];
        snprintf(rec, sizeof rec, "dtypes/%s", names[i]);
        pt_tensor *want = fx_get(fx, rec);
        assert_tensor_equal(pt_value_tensor_ref(pt_value_get_str_ref(st, names[i])), want);
        pt_release(want);
    }
    pt_value_free(meta);
    pt_value_free(st);
    fx_close(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_state_dict, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_training_checkpoint_values, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dtypes_and_views, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_parameter_keeps_requires_grad, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_legacy_and_protocol4, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_safetensors_from_the_package, pt_test_setup,
                                        pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
