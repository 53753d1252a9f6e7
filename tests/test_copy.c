/* Copy-kernel tests against PyTorch: transposed same-dtype copies (the cache-blocked tile path,
 * both directions, every element size, batched permutations, edges that are not whole tiles)
 * the direct float32 <-> float16/bfloat16 casts and the typed integer-source casts, contiguous
 * and strided, and index_select's
 * row-copy kernels on inputs large enough to be split across threads. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include <prometorch/ops_index.h>

static pt_fixture *fx;

/* The [c, r] transpose view of a contiguous [r, c] tensor. */
static pt_tensor *t_view(const pt_tensor *x)
{
    const int64_t *s = pt_shape(x);
    int64_t shape[2] = {s[1], s[0]}, stride[2] = {1, s[1]};
    return pt_as_strided(x, 2, shape, stride, 0);
}

static void test_transpose_contiguous_matches_torch(void **state)
{
    (void)state;
    const char *names[] = {"small", "tiny", "big"};
    for (int i = 0; i < 3; i++) {
        char in[64], out[64];
        snprintf(in, sizeof in, "t2d.%s.in", names[i]);
        snprintf(out, sizeof out, "t2d.%s.out", names[i]);
        pt_tensor *y = pt_contiguous(t_view(fx_get(fx, in)));
        assert_true(pt_is_contiguous(y));
        assert_tensor_equal(y, fx_get(fx, out));
    }
}

static void test_copy_into_transposed_view(void **state)
{
    (void)state;
    const char *names[] = {"small", "tiny", "big"};
    for (int i = 0; i < 3; i++) {
        char in[64], out[64];
        snprintf(in, sizeof in, "t2d.%s.in", names[i]);
        snprintf(out, sizeof out, "t2d.%s.out", names[i]);
        pt_tensor *x = fx_get(fx, in);
        const int64_t *s = pt_shape(x);
        int64_t bshape[2] = {s[1], s[0]}, vstride[2] = {1, s[0]};
        pt_tensor *b = pt_empty(2, bshape, PT_FLOAT32, pt_cpu());
        pt_tensor *v = pt_as_strided(b, 2, s, vstride, 0);
        assert_int_equal(pt_copy_(v, x), PT_OK);
        assert_tensor_equal(b, fx_get(fx, out));
    }
}

static void test_transpose_every_element_size(void **state)
{
    (void)state;
    const char *names[] = {"f64", "i64", "i32", "f16", "bf16", "i16", "i8", "u8"};
    for (int i = 0; i < 8; i++) {
        char in[64], out[64];
        snprintf(in, sizeof in, "dt.%s.in", names[i]);
        snprintf(out, sizeof out, "dt.%s.out", names[i]);
        assert_tensor_equal(pt_contiguous(t_view(fx_get(fx, in))), fx_get(fx, out));
    }
}

static void test_batched_permutations(void **state)
{
    (void)state;
    pt_tensor *x = fx_get(fx, "perm.in"); /* [3, 20, 27] */
    int64_t s021[3] = {3, 27, 20}, st021[3] = {540, 1, 27};
    assert_tensor_equal(pt_contiguous(pt_as_strided(x, 3, s021, st021, 0)), fx_get(fx, "perm.021"));
    int64_t s201[3] = {27, 3, 20}, st201[3] = {1, 540, 27};
    assert_tensor_equal(pt_contiguous(pt_as_strided(x, 3, s201, st201, 0)), fx_get(fx, "perm.201"));
}

static void test_half_bfloat16_casts_match_torch(void **state)
{
    (void)state;
    pt_tensor *v = fx_get(fx, "cast.f32");
    pt_tensor *h = fx_get(fx, "cast.f32_to_f16"), *b = fx_get(fx, "cast.f32_to_bf16");
    assert_tensor_equal(pt_to_dtype(v, PT_FLOAT16), h);
    assert_tensor_equal(pt_to_dtype(v, PT_BFLOAT16), b);
    assert_tensor_equal(pt_to_dtype(pt_test_noncontig(v), PT_FLOAT16), h);
    assert_tensor_equal(pt_to_dtype(pt_test_noncontig(v), PT_BFLOAT16), b);
    assert_tensor_equal(pt_to_dtype(h, PT_FLOAT32), fx_get(fx, "cast.f16_to_f32"));
    assert_tensor_equal(pt_to_dtype(b, PT_FLOAT32), fx_get(fx, "cast.bf16_to_f32"));
    assert_tensor_equal(pt_to_dtype(pt_test_noncontig(h), PT_FLOAT32),
                        fx_get(fx, "cast.f16_to_f32"));
    assert_tensor_equal(pt_to_dtype(pt_test_noncontig(b), PT_FLOAT32),
                        fx_get(fx, "cast.bf16_to_f32"));
}

static void test_integer_casts_match_torch(void **state)
{
    (void)state;
    const char *names[] = {"i64", "i32", "i16", "i8", "u8", "f32", "f64"};
    const pt_dtype dts[] = {PT_INT64, PT_INT32,   PT_INT16,  PT_INT8,
                            PT_UINT8, PT_FLOAT32, PT_FLOAT64};
    for (int s = 0; s < 5; s++) {
        char src_name[32];
        snprintf(src_name, sizeof src_name, "icast.%s", names[s]);
        pt_tensor *x = fx_get(fx, src_name);
        for (int d = 0; d < 7; d++) {
            char key[64];
            snprintf(key, sizeof key, "icast.%s_to_%s", names[s], names[d]);
            assert_tensor_equal(pt_to_dtype(x, dts[d]), fx_get(fx, key));
            assert_tensor_equal(pt_to_dtype(pt_test_noncontig(x), dts[d]), fx_get(fx, key));
        }
    }
}

static void test_index_select_threaded_matches_torch(void **state)
{
    (void)state;
    assert_tensor_equal(pt_index_select(fx_get(fx, "sel.last.in"), 1, fx_get(fx, "sel.last.idx")),
                        fx_get(fx, "sel.last.out"));
    assert_tensor_equal(pt_index_select(fx_get(fx, "sel.rows.in"), 0, fx_get(fx, "sel.rows.idx")),
                        fx_get(fx, "sel.rows.out"));
    assert_tensor_equal(pt_index_select(pt_test_noncontig(fx_get(fx, "sel.rows.in")), 0,
                                        fx_get(fx, "sel.rows.idx")),
                        fx_get(fx, "sel.rows.out"));
}

/* Contiguous float16 <-> float32 casts take an F16C path on x86: they must give exactly the
 * scalar conversion's bits (pt_half_to_float / pt_float_to_half, themselves checked against
 * torch above) for every float16 value, and for floats around every rounding boundary
 * (ties, subnormals, overflow, NaN and infinities mixed into the vector blocks). */
static void test_half_casts_every_value(void **state)
{
    (void)state;
    uint16_t *h = malloc(65536 * sizeof *h);
    for (int i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    pt_tensor *th = pt_from_data(h, PT_SHAPE(65536), PT_FLOAT16, pt_cpu());
    pt_tensor *tf = pt_to_dtype(th, PT_FLOAT32);
    const float *f = pt_data_ptr(tf);
    for (int i = 0; i < 65536; i++) {
        float want = pt_half_to_float((uint16_t)i);
        assert_memory_equal(&f[i], &want, sizeof want);
    }
    enum { N = 1 << 18 };
    float *x = malloc(N * sizeof *x);
    uint32_t seed = 12345;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        float base = pt_half_to_float((uint16_t)(seed >> 16)); /* a half value... */
        uint32_t bits;
        memcpy(&bits, &base, sizeof bits);
        bits += (seed & 0x3fffu) - 0x1000u; /* ...moved around its rounding boundaries */
        memcpy(&x[i], &bits, sizeof bits);
    }
    pt_tensor *tx = pt_from_data(x, PT_SHAPE(N), PT_FLOAT32, pt_cpu());
    pt_tensor *tx16 = pt_to_dtype(tx, PT_FLOAT16);
    const uint16_t *r = pt_data_ptr(tx16);
    for (int i = 0; i < N; i++)
        assert_int_equal(r[i], pt_float_to_half(x[i]));
    pt_release(th);
    pt_release(tf);
    pt_release(tx);
    pt_release(tx16);
    free(h);
    free(x);
}

int main(void)
{
    fx = fx_open("copy");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_transpose_contiguous_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_copy_into_transposed_view, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_transpose_every_element_size, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_batched_permutations, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_half_bfloat16_casts_match_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_integer_casts_match_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_index_select_threaded_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_half_casts_every_value, pt_test_setup,
                                        pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
