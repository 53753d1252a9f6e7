/* Core tests: dtype conversions and promotion against PyTorch, casts, creation functions,
 * views sharing storage, scopes, errors, devices, the caching allocator and threads. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static pt_fixture *fx;

static void test_half_rounding_matches_torch(void **state)
{
    (void)state;
    pt_tensor *in = fx_get(fx, "half.in");
    pt_tensor *out = pt_to_dtype(in, PT_FLOAT16);
    pt_tensor *expected = fx_get(fx, "half.out");
    assert_tensor_equal(out, expected);
    /* and back: float16 -> float32 is exact */
    pt_tensor *back = pt_to_dtype(out, PT_FLOAT32);
    pt_tensor *exp_back = pt_to_dtype(expected, PT_FLOAT32);
    assert_tensor_equal(back, exp_back);
}

static void test_bfloat16_rounding_matches_torch(void **state)
{
    (void)state;
    pt_tensor *out = pt_to_dtype(fx_get(fx, "bf16.in"), PT_BFLOAT16);
    assert_tensor_equal(out, fx_get(fx, "bf16.out"));
}

static void test_half_bits(void **state)
{
    (void)state;
    assert_int_equal(pt_float_to_half(1.0f), 0x3c00);
    assert_int_equal(pt_float_to_half(-2.0f), 0xc000);
    assert_int_equal(pt_float_to_half(65504.0f), 0x7bff);
    assert_int_equal(pt_float_to_half(1e6f), 0x7c00);
    assert_int_equal(pt_float_to_half(5.9604645e-8f), 0x0001);
    assert_true(isnan(pt_half_to_float(pt_float_to_half(NAN))));
    assert_int_equal(pt_float_to_bfloat16(1.0f), 0x3f80);
    assert_true(pt_bfloat16_to_float(0x4049) == 3.140625f);
}

static void test_casts_match_torch(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        pt_dtype dt;
    } casts[] = {{"i64", PT_INT64}, {"i32", PT_INT32}, {"i16", PT_INT16},  {"i8", PT_INT8},
                 {"u8", PT_UINT8},  {"bool", PT_BOOL}, {"f32", PT_FLOAT32}};
    pt_tensor *src = fx_get(fx, "cast.f64");
    for (size_t i = 0; i < sizeof casts / sizeof casts[0]; i++) {
        char key[64];
        snprintf(key, sizeof key, "cast.f64_to_%s", casts[i].name);
        assert_tensor_equal(pt_to_dtype(src, casts[i].dt), fx_get(fx, key));
    }
    pt_tensor *ints = fx_get(fx, "cast.i64");
    assert_tensor_equal(pt_to_dtype(ints, PT_UINT8), fx_get(fx, "cast.i64_to_u8"));
    assert_tensor_equal(pt_to_dtype(ints, PT_BOOL), fx_get(fx, "cast.i64_to_bool"));
    assert_tensor_equal(pt_to_dtype(ints, PT_FLOAT16), fx_get(fx, "cast.i64_to_f16"));
}

static void test_creation_matches_torch(void **state)
{
    (void)state;
    assert_tensor_equal(pt_arange(0, 10, 3, PT_INT64, pt_cpu()), fx_get(fx, "arange.0_10_3"));
    assert_tensor_equal(pt_arange(-1, 1, 0.25, PT_FLOAT32, pt_cpu()), fx_get(fx, "arange.f"));
    assert_tensor_equal(pt_arange(5, 1, -1.5, PT_FLOAT32, pt_cpu()), fx_get(fx, "arange.neg"));
    assert_tensor_close(pt_linspace(0, 1, 7, PT_FLOAT32, pt_cpu()), fx_get(fx, "linspace.0_1_7"), 0,
                        1e-7);
    assert_tensor_close(pt_linspace(-3, 10, 13, PT_FLOAT64, pt_cpu()), fx_get(fx, "linspace.f64"),
                        0, 1e-15);
    assert_tensor_equal(pt_eye(3, 4, PT_FLOAT32, pt_cpu()), fx_get(fx, "eye.3x4"));
    pt_tensor *f = pt_full(PT_SHAPE(2, 3), 2.5, PT_FLOAT64, pt_cpu());
    assert_shape(f, 2, 3);
    for (int i = 0; i < 6; i++)
        assert_true(pt_test_get(f, i) == 2.5);
    pt_tensor *z = pt_zeros(PT_SHAPE(0, 4), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_numel(z), 0);
    pt_tensor *s = pt_scalar_tensor(7, PT_INT32, pt_cpu());
    assert_int_equal(pt_ndim(s), 0);
    assert_true(pt_item(s) == 7.0);
}

static void test_promotion_matches_torch(void **state)
{
    (void)state;
    pt_tensor *table = fx_get(fx, "promote.table");
    for (int a = 0; a < 10; a++)
        for (int b = 0; b < 10; b++)
            assert_int_equal(pt_promote_types((pt_dtype)a, (pt_dtype)b),
                             (int)pt_test_get(table, a * 10 + b));
    assert_int_equal(pt_promote_types(PT_Q4_0, PT_FLOAT32), PT_DTYPE_COUNT);
}

static void test_from_data_and_copy_to_host(void **state)
{
    (void)state;
    const float data[6] = {1, 2, 3, 4, 5, 6};
    pt_tensor *t = pt_from_data(data, PT_SHAPE(2, 3), PT_FLOAT32, pt_cpu());
    float back[6];
    assert_int_equal(pt_copy_to_host(t, back, sizeof back), PT_OK);
    assert_memory_equal(data, back, sizeof back);
    assert_pt_status_error(pt_copy_to_host(t, back, 5), PT_ERR_INVALID_ARG, "needs 24");
    /* transposed view copies out in row-major order of the view */
    pt_tensor *tt = pt_as_strided(t, PT_SHAPE(3, 2), (const int64_t[]){1, 3}, 0);
    assert_false(pt_is_contiguous(tt));
    assert_int_equal(pt_copy_to_host(tt, back, sizeof back), PT_OK);
    const float expect[6] = {1, 4, 2, 5, 3, 6};
    assert_memory_equal(expect, back, sizeof back);
}

static void test_views_share_storage(void **state)
{
    (void)state;
    pt_tensor *base = pt_zeros(PT_SHAPE(4, 4), PT_FLOAT32, pt_cpu());
    pt_tensor *row = pt_as_strided(base, PT_SHAPE(4), (const int64_t[]){1}, 8);
    assert_true(pt_shares_storage(base, row));
    assert_int_equal(pt_fill_(row, 3.0), PT_OK);
    for (int i = 0; i < 16; i++)
        assert_true(pt_test_get(base, i) == (i >= 8 && i < 12 ? 3.0 : 0.0));
    pt_tensor *col = pt_as_strided(base, PT_SHAPE(4), (const int64_t[]){4}, 1);
    pt_tensor *vals = pt_arange(10, 14, 1, PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_copy_(col, vals), PT_OK);
    assert_true(pt_test_get(base, 1) == 10.0 && pt_test_get(base, 13) == 13.0);
    /* a view that would read past the storage is refused */
    assert_pt_error(pt_as_strided(base, PT_SHAPE(5, 4), (const int64_t[]){4, 1}, 0), PT_ERR_SHAPE,
                    "exceeds the storage");
    /* copies are not views */
    pt_tensor *c = pt_clone(col);
    assert_false(pt_shares_storage(c, base));
    assert_true(pt_is_contiguous(c));
}

static void test_copy_broadcasts_and_casts(void **state)
{
    (void)state;
    pt_tensor *dst = pt_zeros(PT_SHAPE(2, 3), PT_INT32, pt_cpu());
    const double row[3] = {1.9, -2.9, 3.5};
    pt_tensor *src = pt_from_data(row, PT_SHAPE(3), PT_FLOAT64, pt_cpu());
    assert_int_equal(pt_copy_(dst, src), PT_OK);
    const int32_t expect[6] = {1, -2, 3, 1, -2, 3};
    int32_t got[6];
    pt_copy_to_host(dst, got, sizeof got);
    assert_memory_equal(expect, got, sizeof got);
    pt_tensor *bad = pt_zeros(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_copy_(dst, bad), PT_ERR_SHAPE, "cannot be broadcast");
}

static void test_errors_name_the_problem(void **state)
{
    (void)state;
    assert_pt_error(pt_empty(PT_SHAPE(2, -1), PT_FLOAT32, pt_cpu()), PT_ERR_SHAPE,
                    "negative dimension");
    assert_pt_error(pt_empty(PT_SHAPE(2), (pt_dtype)99, pt_cpu()), PT_ERR_DTYPE, "invalid dtype");
    assert_pt_error(pt_clone(NULL), PT_ERR_NULL, "pt_clone");
    /* NULL propagates the earlier error instead of overwriting it */
    pt_tensor *t = pt_empty(PT_SHAPE(-3), PT_FLOAT32, pt_cpu());
    pt_tensor *u = pt_clone(t);
    assert_pt_error(u, PT_ERR_SHAPE, "negative dimension");
    assert_pt_error(pt_arange(0, 1, 0, PT_FLOAT32, pt_cpu()), PT_ERR_INVALID_ARG, "non-zero step");
    pt_tensor *two = pt_ones(PT_SHAPE(2), PT_FLOAT32, pt_cpu());
    assert_true(isnan(pt_item(two)));
    assert_pt_status_error(pt_last_status(), PT_ERR_SHAPE, "2 elements");
    assert_int_equal(pt_size(two, 5), -1);
    assert_pt_status_error(pt_last_status(), PT_ERR_INDEX, "out of range");
    assert_pt_error(pt_empty(PT_SHAPE(3, 30), PT_Q4_0, pt_cpu()), PT_ERR_SHAPE, "block size 32");
    pt_release(NULL); /* harmless */
}

static void test_block_dtypes(void **state)
{
    (void)state;
    assert_int_equal(pt_dtype_size(PT_Q4_0), 18);
    assert_int_equal(pt_dtype_block_size(PT_Q4_K), 256);
    assert_int_equal(pt_dtype_size(PT_Q6_K), 210);
    assert_int_equal(pt_dtype_size(PT_Q8_K), 292);
    assert_true(pt_dtype_is_block(PT_Q5_1));
    unsigned char blocks[2 * 34] = {0};
    pt_tensor *q = pt_from_data(blocks, PT_SHAPE(1, 64), PT_Q8_0, pt_cpu());
    assert_non_null(q);
    assert_int_equal(pt_numel(q), 64);
    /* block -> floating dtypes dequantize (tests/test_quant.c); other conversions are refused */
    assert_pt_error(pt_to_dtype(q, PT_INT32), PT_ERR_UNSUPPORTED, "q8_0");
}

static void test_devices(void **state)
{
    (void)state;
    pt_device d = pt_device_parse("cuda:1");
    assert_int_equal(d.type, PT_DEVICE_CUDA);
    assert_int_equal(d.index, 1);
    assert_int_equal(pt_device_parse("cpu").type, PT_DEVICE_CPU);
    assert_int_equal(pt_device_parse("nmcard").type, PT_DEVICE_NMCARD);
    assert_int_equal(pt_device_parse("tpu").type, PT_DEVICE_TYPE_COUNT);
    assert_pt_status_error(pt_last_status(), PT_ERR_DEVICE, "unknown device 'tpu'");
    char buf[32];
    assert_string_equal(pt_device_str(pt_cuda(2), buf, sizeof buf), "cuda:2");
    /* a device that is absent gives a clear error, never a crash */
    if (!pt_device_available(pt_device_parse("nmcard:7")))
        assert_pt_error(pt_zeros(PT_SHAPE(2), PT_FLOAT32, pt_device_parse("nmcard:7")),
                        PT_ERR_DEVICE, "nmcard:7");
}

static void test_scopes_release_temporaries(void **state)
{
    (void)state;
    size_t before = pt_memory_allocated();
    pt_tensor *kept;
    pt_scope_begin();
    {
        pt_tensor *a = pt_ones(PT_SHAPE(100), PT_FLOAT32, pt_cpu());
        pt_tensor *b = pt_zeros(PT_SHAPE(100), PT_FLOAT32, pt_cpu());
        pt_release(b); /* early release inside a scope is fine */
        pt_scope_begin();
        pt_tensor *inner = pt_full(PT_SHAPE(10), 4, PT_FLOAT32, pt_cpu());
        kept = pt_keep(pt_clone(inner));
        pt_scope_end();
        assert_true(pt_item(pt_as_strided(kept, PT_SHAPE(1), (const int64_t[]){1}, 3)) == 4.0);
        (void)a;
        pt_keep(kept);
    }
    pt_scope_end();
    /* only `kept` survives, now owned by the enclosing (test) scope */
    assert_true(pt_memory_allocated() - before == 64);
    assert_true(pt_test_get(kept, 9) == 4.0);
}

static void test_allocator_steady_state_does_not_malloc(void **state)
{
    (void)state;
    for (int warm = 0; warm < 2; warm++) {
        pt_scope_begin();
        pt_tensor *a = pt_ones(PT_SHAPE(1000), PT_FLOAT32, pt_cpu());
        pt_release(pt_clone(a));
        pt_scope_end();
    }
    uint64_t before = pt_memory_system_allocs();
    for (int i = 0; i < 100; i++) {
        pt_scope_begin();
        pt_tensor *a = pt_ones(PT_SHAPE(1000), PT_FLOAT32, pt_cpu());
        pt_release(pt_clone(a));
        pt_scope_end();
    }
    assert_int_equal(pt_memory_system_allocs(), before);
}

static void test_threads_setting(void **state)
{
    (void)state;
    int n = pt_get_num_threads();
    assert_true(n >= 1);
    pt_set_num_threads(3);
    assert_int_equal(pt_get_num_threads(), 3);
    /* a large copy runs across the pool and still gives the right values */
    pt_tensor *a = pt_arange(0, 1 << 20, 1, PT_FLOAT64, pt_cpu());
    pt_tensor *b = pt_to_dtype(a, PT_FLOAT32);
    assert_true(pt_test_get(b, (1 << 20) - 1) == (double)((1 << 20) - 1));
    pt_set_num_threads(n);
    assert_int_equal(pt_get_num_threads(), n);
}

/* torch.arange(..., dtype=torch.bool) has no kernel (even empty); torch.linspace has none
 * either, but steps = 0 needs none and returns an empty bool tensor. */
static void test_arange_linspace_bool(void **state)
{
    (void)state;
    assert_pt_error(pt_arange(0, 2, 1, PT_BOOL, pt_cpu()), PT_ERR_DTYPE,
                    "pt_arange: dtype bool is not supported");
    assert_pt_error(pt_arange(0, 0, 1, PT_BOOL, pt_cpu()), PT_ERR_DTYPE, "pt_arange");
    assert_pt_error(pt_linspace(0, 1, 3, PT_BOOL, pt_cpu()), PT_ERR_DTYPE,
                    "pt_linspace: dtype bool is not supported");
    pt_tensor *e = pt_linspace(0, 1, 0, PT_BOOL, pt_cpu());
    assert_shape(e, 0);
    assert_int_equal(pt_dtype_of(e), PT_BOOL);
    pt_release(e);
}

int main(void)
{
    fx = fx_open("core");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_arange_linspace_bool, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_half_rounding_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bfloat16_rounding_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_half_bits, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_casts_match_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_creation_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_promotion_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_from_data_and_copy_to_host, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_views_share_storage, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_copy_broadcasts_and_casts, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_errors_name_the_problem, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_block_dtypes, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_devices, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_scopes_release_temporaries, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_allocator_steady_state_does_not_malloc, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_threads_setting, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
