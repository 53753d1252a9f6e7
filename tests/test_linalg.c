/* Linalg tests: mm, bmm, matmul (every rank combination, broadcast batch dims), mv, dot, outer,
 * addmm and baddbmm against PyTorch, in float32/float64/half/integer dtypes, with transposed and
 * strided operands, plus the error paths. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static pt_fixture *fx;

/* float32 products: the BLAS and PyTorch sum in different orders (K up to 64 terms of
 * magnitude ~1), so allow a few ulps of the sum rather than of each term. */
#define F32_RTOL 1e-5
#define F32_ATOL 1e-5

static pt_tensor *get(const char *name)
{
    return fx_get(fx, name);
}

static void check_mm_dtype(const char *dt)
{
    char an[64], bn[64], on[64];
    snprintf(an, sizeof an, "mm.%s.a", dt);
    snprintf(bn, sizeof bn, "mm.%s.b", dt);
    snprintf(on, sizeof on, "mm.%s.out", dt);
    pt_tensor *out = pt_mm(get(an), get(bn));
    if (strcmp(dt, "f32") == 0)
        assert_tensor_close(out, get(on), F32_RTOL, F32_ATOL);
    else if (strcmp(dt, "f64") == 0)
        assert_tensor_close(out, get(on), 1e-12, 1e-12);
    else
        assert_tensor_equal(out, get(on));
}

static void test_mm_dtypes(void **state)
{
    (void)state;
    const char *dts[] = {"f32", "f64", "i64", "i32", "i16", "i8", "u8", "wrap_i16", "wrap_i32"};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++)
        check_mm_dtype(dts[i]);
    /* half precision computes in float32 and rounds once, like PyTorch: results equal */
    assert_tensor_equal(pt_mm(get("mm.f16.a"), get("mm.f16.b")), get("mm.f16.out"));
    pt_tensor *bf = pt_mm(get("mm.bf16.a"), get("mm.bf16.b"));
    assert_tensor_equal(bf, get("mm.bf16.out_f32"));
    /* torch 1.13's own bfloat16 mm accumulates in bfloat16 for this layout, so it differs from
     * the float32 accumulation by a few bfloat16 roundings (ulp 2^-7 relative) */
    assert_tensor_close(bf, get("mm.bf16.out"), 3e-2, 1e-2);
}

static void test_mm_transposed_and_strided(void **state)
{
    (void)state;
    pt_tensor *at = pt_transpose(get("mm.t.a"), 0, 1); /* [4, 5] column-major */
    pt_tensor *bt = pt_transpose(get("mm.t.b"), 0, 1); /* [5, 3] column-major */
    assert_false(pt_is_contiguous(at));
    assert_tensor_close(pt_mm(at, bt), get("mm.t.out_tt"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_mm(get("mm.t.a2"), bt), get("mm.t.out_nt"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_mm(at, get("mm.f32.b")), get("mm.t.out_tn"), F32_RTOL, F32_ATOL);
    /* every-other-column slice: neither layout, copied by the front-end */
    pt_tensor *step = pt_slice(get("mm.step.a"), 1, 0, PT_SLICE_END, 2);
    assert_tensor_close(pt_mm(step, bt), get("mm.step.out"), F32_RTOL, F32_ATOL);
    /* non-contiguous copies from the test helper */
    pt_tensor *nc = pt_test_noncontig(get("mm.f64.a"));
    assert_tensor_close(pt_mm(nc, get("mm.f64.b")), get("mm.f64.out"), 1e-12, 1e-12);
    pt_tensor *nci = pt_test_noncontig(get("mm.i64.b"));
    assert_tensor_equal(pt_mm(get("mm.i64.a"), nci), get("mm.i64.out"));
    pt_tensor *ati = pt_transpose(pt_contiguous(pt_transpose(get("mm.i32.a"), 0, 1)), 0, 1);
    assert_tensor_equal(pt_mm(ati, get("mm.i32.b")), get("mm.i32.out"));
    /* the 64x64 BLAS path, also with its transpose */
    assert_tensor_close(pt_mm(get("mm.64.a"), get("mm.64.b")), get("mm.64.out"), 1e-4, 1e-4);
}

static void test_mm_empty(void **state)
{
    (void)state;
    /* K == 0 gives zeros; M == 0 an empty result */
    pt_tensor *a = pt_empty(PT_SHAPE(3, 0), PT_FLOAT32, pt_cpu());
    pt_tensor *b = pt_empty(PT_SHAPE(0, 4), PT_FLOAT32, pt_cpu());
    pt_tensor *z = pt_mm(a, b);
    assert_tensor_equal(z, pt_zeros(PT_SHAPE(3, 4), PT_FLOAT32, pt_cpu()));
    pt_tensor *e = pt_mm(pt_empty(PT_SHAPE(0, 2), PT_FLOAT64, pt_cpu()),
                         pt_ones(PT_SHAPE(2, 5), PT_FLOAT64, pt_cpu()));
    assert_shape(e, 0, 5);
    pt_tensor *zi = pt_mm(pt_empty(PT_SHAPE(2, 0), PT_INT64, pt_cpu()),
                          pt_empty(PT_SHAPE(0, 2), PT_INT64, pt_cpu()));
    assert_tensor_equal(zi, pt_zeros(PT_SHAPE(2, 2), PT_INT64, pt_cpu()));
}

static void test_bmm(void **state)
{
    (void)state;
    assert_tensor_close(pt_bmm(get("bmm.f32.a"), get("bmm.f32.b")), get("bmm.f32.out"), F32_RTOL,
                        F32_ATOL);
    assert_tensor_close(pt_bmm(get("bmm.f64.a"), get("bmm.f64.b")), get("bmm.f64.out"), 1e-12,
                        1e-12);
    assert_tensor_equal(pt_bmm(get("bmm.i64.a"), get("bmm.i64.b")), get("bmm.i64.out"));
    pt_tensor *bt = pt_transpose(get("bmm.t.b"), 1, 2);
    assert_tensor_close(pt_bmm(get("bmm.f32.a"), bt), get("bmm.t.out"), F32_RTOL, F32_ATOL);
    /* batch dim non-contiguous (every other matrix of a doubled batch) */
    pt_tensor *big = pt_cat(2, (const pt_tensor *[]){get("bmm.f32.a"), get("bmm.f32.a")}, 1);
    pt_tensor *a_nc = pt_narrow(big, 1, 4, 4); /* second copy: offset, batch stride 40 */
    assert_false(pt_is_contiguous(a_nc));
    assert_tensor_close(pt_bmm(a_nc, get("bmm.f32.b")), get("bmm.f32.out"), F32_RTOL, F32_ATOL);
    assert_tensor_close(pt_bmm(get("bmm.small.a"), get("bmm.small.b")), get("bmm.small.out"),
                        F32_RTOL, F32_ATOL);
}

static void test_bmm_threads_agree(void **state)
{
    (void)state;
    /* the batch-parallel path gives the same result single- and multi-threaded */
    int n = pt_get_num_threads();
    pt_set_num_threads(1);
    pt_tensor *one = pt_bmm(get("bmm.small.a"), get("bmm.small.b"));
    pt_set_num_threads(4);
    pt_tensor *four = pt_bmm(get("bmm.small.a"), get("bmm.small.b"));
    pt_set_num_threads(n);
    assert_tensor_equal(one, four);
}

static void test_matmul_ranks(void **state)
{
    (void)state;
    const char *cases[] = {"1x1", "2x1", "1x2",   "2x2",    "3x2", "3x1", "2x3",
                           "1x3", "3x3", "bcast", "bcast4", "4x1", "1x4"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char an[64], bn[64], on[64];
        snprintf(an, sizeof an, "matmul.%s.a", cases[i]);
        snprintf(bn, sizeof bn, "matmul.%s.b", cases[i]);
        snprintf(on, sizeof on, "matmul.%s.out", cases[i]);
        pt_tensor *out = pt_matmul(get(an), get(bn));
        assert_tensor_close(out, get(on), F32_RTOL, F32_ATOL);
        /* and with non-contiguous inputs */
        pt_tensor *nc = pt_matmul(pt_test_noncontig(get(an)), pt_test_noncontig(get(bn)));
        assert_tensor_close(nc, get(on), F32_RTOL, F32_ATOL);
    }
    assert_tensor_equal(pt_matmul(get("matmul.int.a"), get("matmul.int.b")), get("matmul.int.out"));
    assert_tensor_close(pt_matmul(get("matmul.f64.a"), get("matmul.f64.b")), get("matmul.f64.out"),
                        1e-12, 1e-12);
    pt_tensor *ap = pt_transpose(get("matmul.perm.a"), 1, 2);
    assert_tensor_close(pt_matmul(ap, get("matmul.perm.b")), get("matmul.perm.out"), F32_RTOL,
                        F32_ATOL);
    /* an expanded (stride-0) batched operand */
    pt_tensor *b2 = get("matmul.2x2.b");
    pt_tensor *bx = pt_expand(b2, PT_SHAPE(2, 5, 4));
    pt_tensor *r = pt_matmul(get("matmul.3x3.a"), bx);
    pt_tensor *ref = pt_matmul(get("matmul.3x3.a"), b2);
    assert_tensor_close(r, ref, F32_RTOL, F32_ATOL);
}

static void test_matmul_random_cases(void **state)
{
    (void)state;
    /* random ranks 1-4, broadcast batch dims, size-1 dims, operands stored transposed */
    for (int i = 0; i < 40; i++) {
        char key[64];
        snprintf(key, sizeof key, "rand.%d.flags", i);
        pt_tensor *flags = get(key);
        snprintf(key, sizeof key, "rand.%d.a", i);
        pt_tensor *a = get(key);
        snprintf(key, sizeof key, "rand.%d.b", i);
        pt_tensor *b = get(key);
        if (pt_test_get(flags, 0) != 0)
            a = pt_transpose(a, -1, -2);
        if (pt_test_get(flags, 1) != 0)
            b = pt_transpose(b, -1, -2);
        snprintf(key, sizeof key, "rand.%d.out", i);
        assert_tensor_close(pt_matmul(a, b), get(key), F32_RTOL, F32_ATOL);
        pt_tensor *nc = pt_matmul(pt_test_noncontig(a), pt_test_noncontig(b));
        assert_tensor_close(nc, get(key), F32_RTOL, F32_ATOL);
    }
}

static void test_mv_dot_outer(void **state)
{
    (void)state;
    assert_tensor_close(pt_mv(get("mv.m"), get("mv.v")), get("mv.out"), F32_RTOL, F32_ATOL);
    pt_tensor *mt = pt_transpose(get("mm.t.a"), 0, 1);
    pt_tensor *v5 = pt_slice(get("mv.v"), 0, 0, 5, 1);
    assert_tensor_close(pt_mv(mt, v5), get("mv.t.out"), F32_RTOL, F32_ATOL);
    pt_tensor *d = pt_dot(get("dot.a"), get("dot.b"));
    assert_int_equal(pt_ndim(d), 0);
    assert_tensor_close(d, get("dot.out"), F32_RTOL, F32_ATOL);
    assert_tensor_equal(pt_dot(get("dot.i.a"), get("dot.i.a")), get("dot.i.out"));
    /* strided vectors go straight to BLAS with their increments */
    pt_tensor *da = pt_test_noncontig(get("dot.a")), *db = pt_test_noncontig(get("dot.b"));
    assert_tensor_close(pt_dot(da, db), get("dot.out"), F32_RTOL, F32_ATOL);
    /* outer promotes int64 x float32 -> float32 */
    assert_tensor_close(pt_outer(get("outer.a"), get("outer.b")), get("outer.out"), 0, 0);
    assert_tensor_equal(pt_outer(get("outer.a"), get("outer.a")), get("outer.ii"));
}

static void test_addmm_baddbmm(void **state)
{
    (void)state;
    pt_tensor *in = get("addmm.in"), *m1 = get("addmm.m1"), *m2 = get("addmm.m2");
    assert_tensor_close(pt_addmm(in, m1, m2), get("addmm.out"), F32_RTOL, F32_ATOL);
    pt_addmm_opts o = {.beta = 0.5, .alpha = -2.0};
    assert_tensor_close(pt_addmm_ex(in, m1, m2, &o), get("addmm.out_ab"), F32_RTOL, F32_ATOL);
    /* beta = 0 ignores NaN in input */
    pt_tensor *nan_in = pt_full(PT_SHAPE(4, 3), NAN, PT_FLOAT32, pt_cpu());
    pt_addmm_opts b0 = {.beta = 0, .alpha = 1};
    assert_tensor_close(pt_addmm_ex(nan_in, m1, m2, &b0), get("addmm.out_b0"), F32_RTOL, F32_ATOL);
    /* the kernel never reads the output when beta == 0: a recycled block full of NaN (from
     * the caching allocator) does not leak into a plain product */
    pt_release(pt_full(PT_SHAPE(4, 3), NAN, PT_FLOAT32, pt_cpu()));
    assert_tensor_close(pt_mm(m1, m2), get("addmm.out_b0"), F32_RTOL, F32_ATOL);
    pt_addmm_opts oi = {.beta = 2, .alpha = 3};
    assert_tensor_equal(pt_addmm_ex(get("addmm.i.in"), get("addmm.i.m1"), get("addmm.i.m2"), &oi),
                        get("addmm.i.out"));
    /* float16 with beta: computed in float32 and rounded once; BLAS may order the float32
     * operations differently from torch, which can move a result by one float16 ulp (2^-10) */
    pt_addmm_opts oh = {.beta = 0.5, .alpha = 2.0};
    pt_tensor *hm2 = pt_transpose(pt_contiguous(pt_transpose(get("addmm.h.m2"), 0, 1)), 0, 1);
    assert_tensor_close(pt_addmm_ex(get("addmm.h.in"), get("addmm.h.m1"), hm2, &oh),
                        get("addmm.h.out"), 1e-3, 1e-3);
    pt_tensor *bin = get("baddbmm.in"), *b1 = get("baddbmm.b1"), *b2 = get("baddbmm.b2");
    assert_tensor_close(pt_baddbmm(bin, b1, b2), get("baddbmm.out"), F32_RTOL, F32_ATOL);
    pt_baddbmm_opts ob = {.beta = -1.5, .alpha = 0.25};
    assert_tensor_close(pt_baddbmm_ex(bin, b1, b2, &ob), get("baddbmm.out_ab"), F32_RTOL, F32_ATOL);
    /* NULL options are the defaults */
    assert_tensor_close(pt_baddbmm_ex(bin, pt_test_noncontig(b1), b2, NULL), get("baddbmm.out"),
                        F32_RTOL, F32_ATOL);
}

static void test_errors(void **state)
{
    (void)state;
    pt_tensor *a = pt_zeros(PT_SHAPE(3, 4), PT_FLOAT32, pt_cpu());
    pt_tensor *b = pt_zeros(PT_SHAPE(5, 6), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_matmul(a, b), PT_ERR_SHAPE,
                    "pt_matmul: shapes [3, 4] and [5, 6] cannot be multiplied (4 != 5)");
    assert_pt_error(pt_mm(a, b), PT_ERR_SHAPE, "cannot be multiplied (4 != 5)");
    pt_tensor *c = pt_zeros(PT_SHAPE(4, 4, 4), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_mm(a, c), PT_ERR_SHAPE, "2-D");
    assert_pt_error(pt_bmm(a, c), PT_ERR_SHAPE, "3-D");
    pt_tensor *d = pt_zeros(PT_SHAPE(2, 4, 4), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_bmm(c, d), PT_ERR_SHAPE, "same number of batches (4 != 2)");
    pt_tensor *f64 = pt_zeros(PT_SHAPE(4, 2), PT_FLOAT64, pt_cpu());
    assert_pt_error(pt_mm(a, f64), PT_ERR_DTYPE, "float32 and float64");
    pt_tensor *bl = pt_zeros(PT_SHAPE(4, 4), PT_BOOL, pt_cpu());
    assert_pt_error(pt_mm(bl, bl), PT_ERR_DTYPE, "bool");
    pt_tensor *s = pt_scalar_tensor(1, PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_matmul(s, a), PT_ERR_SHAPE, "at least 1 dimension");
    pt_tensor *v3 = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_tensor *v4 = pt_zeros(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_dot(v3, v4), PT_ERR_SHAPE, "(3 != 4)");
    assert_pt_error(pt_matmul(v3, v4), PT_ERR_SHAPE, "cannot be multiplied (3 != 4)");
    assert_pt_error(pt_mv(a, v3), PT_ERR_SHAPE, "(4 != 3)");
    /* broadcast batch dims that do not fit */
    pt_tensor *x = pt_zeros(PT_SHAPE(2, 3, 4), PT_FLOAT32, pt_cpu());
    pt_tensor *y = pt_zeros(PT_SHAPE(3, 4, 5), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_matmul(x, y), PT_ERR_SHAPE, "not broadcastable");
    /* addmm input that does not broadcast; integer alpha must be whole */
    pt_tensor *m = pt_zeros(PT_SHAPE(3, 4), PT_FLOAT32, pt_cpu());
    pt_tensor *k = pt_zeros(PT_SHAPE(4, 2), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_addmm(pt_zeros(PT_SHAPE(5), PT_FLOAT32, pt_cpu()), m, k), PT_ERR_SHAPE,
                    "pt_addmm");
    pt_tensor *mi = pt_zeros(PT_SHAPE(3, 4), PT_INT64, pt_cpu());
    pt_tensor *ki = pt_zeros(PT_SHAPE(4, 2), PT_INT64, pt_cpu());
    pt_addmm_opts half = {.beta = 1, .alpha = 0.5};
    assert_pt_error(pt_addmm_ex(pt_zeros(PT_SHAPE(2), PT_INT64, pt_cpu()), mi, ki, &half),
                    PT_ERR_INVALID_ARG, "whole numbers");
    /* NULL propagates */
    assert_pt_error(pt_mm(NULL, a), PT_ERR_NULL, "pt_mm");
    assert_pt_error(pt_matmul(a, NULL), PT_ERR_NULL, "pt_matmul");
}

int main(void)
{
    fx = fx_open("linalg");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mm_dtypes, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mm_transposed_and_strided, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mm_empty, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bmm, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bmm_threads_agree, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_ranks, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_random_cases, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mv_dot_outer, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_addmm_baddbmm, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_errors, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
