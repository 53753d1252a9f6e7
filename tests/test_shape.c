/* Shape tests: views against PyTorch (values, and storage sharing exactly where PyTorch shares),
 * writes through views, slicing with Python clamping, split/chunk/unbind arrays, the copying
 * ops (cat, stack, repeat, tile, flip, roll, tril, triu) in several dtypes with non-contiguous
 * inputs, and the error paths. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

static pt_tensor *get(const char *name)
{
    return fx_get(fx, name);
}

/* Asserts r equals fixture `name` and that r is a view of base. */
static void assert_view_of(pt_tensor *r, const char *name, const pt_tensor *base)
{
    assert_tensor_equal(r, get(name));
    assert_true(pt_shares_storage(r, base));
}

static void test_reshape_view_or_copy(void **state)
{
    (void)state;
    pt_tensor *x = get("x");
    assert_view_of(pt_reshape(x, PT_SHAPE(4, 6)), "reshape.4x6", x);
    assert_view_of(pt_reshape(x, PT_SHAPE(-1, 2)), "reshape.m1x2", x);
    assert_view_of(pt_view(x, PT_SHAPE(4, 6)), "reshape.4x6", x);
    pt_tensor *xt = pt_transpose(x, 0, 1);
    static const struct {
        const char *name;
        int nd;
        int64_t shape[4];
    } cases[] = {{"t_3x8", 2, {3, 8}},
                 {"t_6x4", 2, {6, 4}},
                 {"t_3x2x2x2", 4, {3, 2, 2, 2}},
                 {"t_24", 1, {24}},
                 {"t_3x1x2x4", 4, {3, 1, 2, 4}}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char key[64];
        snprintf(key, sizeof key, "reshape.%s", cases[i].name);
        pt_tensor *r = pt_reshape(xt, cases[i].nd, cases[i].shape);
        assert_tensor_equal(r, get(key));
        snprintf(key, sizeof key, "reshape.%s.view", cases[i].name);
        bool torch_view = pt_item(get(key)) != 0;
        assert_int_equal(pt_shares_storage(r, x), torch_view);
        /* pt_view succeeds exactly when PyTorch's reshape gives a view */
        pt_tensor *v = pt_view(xt, cases[i].nd, cases[i].shape);
        if (torch_view) {
            assert_tensor_equal(v, r);
            assert_true(pt_shares_storage(v, x));
        } else {
            assert_pt_error(v, PT_ERR_SHAPE, "use pt_reshape instead");
        }
    }
    /* an expanded (stride-0) tensor: PyTorch copies for [12] and views for [3, 2, 2] */
    pt_tensor *ex = pt_expand(get("e"), PT_SHAPE(3, 4));
    pt_tensor *r12 = pt_reshape(ex, PT_SHAPE(12));
    assert_tensor_equal(r12, get("reshape.ex_12"));
    assert_int_equal(pt_shares_storage(r12, ex), pt_item(get("reshape.ex_12.view")) != 0);
    pt_tensor *r322 = pt_reshape(ex, PT_SHAPE(3, 2, 2));
    assert_tensor_equal(r322, get("reshape.ex_3x2x2"));
    assert_int_equal(pt_shares_storage(r322, ex), pt_item(get("reshape.ex_3x2x2.view")) != 0);
    /* writes through a view are seen by the base */
    pt_tensor *base = pt_zeros(PT_SHAPE(2, 6), PT_FLOAT32, pt_cpu());
    pt_tensor *v = pt_view(base, PT_SHAPE(3, 4));
    pt_tensor *row = pt_select(v, 0, 1);
    assert_int_equal(pt_fill_(row, 7), PT_OK);
    for (int i = 0; i < 12; i++)
        assert_true(pt_test_get(base, i) == (i >= 4 && i < 8 ? 7.0 : 0.0));
    /* a 0-dim tensor reshapes to [1, 1]; an empty tensor to any empty shape */
    pt_tensor *s = pt_scalar_tensor(3, PT_INT64, pt_cpu());
    assert_shape(pt_reshape(s, PT_SHAPE(1, 1)), 1, 1);
    assert_shape(pt_reshape(pt_empty(PT_SHAPE(0, 4), PT_FLOAT32, pt_cpu()), PT_SHAPE(2, 0, 3)), 2,
                 0, 3);
}

/* Reads an int64 fixture vector into dst; returns its length. */
static int read_dims(const char *name, int64_t *dst)
{
    pt_tensor *t = get(name);
    int n = (int)pt_numel(t);
    for (int i = 0; i < n; i++)
        dst[i] = (int64_t)pt_test_get(t, i);
    return n;
}

static void test_reshape_random_cases(void **state)
{
    (void)state;
    int views = 0;
    for (int i = 0; i < 60; i++) {
        char key[64];
        int64_t perm[PT_MAX_DIMS], narrow[3], target[PT_MAX_DIMS];
        snprintf(key, sizeof key, "rr.%d.base", i);
        pt_tensor *base = get(key);
        snprintf(key, sizeof key, "rr.%d.perm", i);
        int nd = read_dims(key, perm);
        snprintf(key, sizeof key, "rr.%d.narrow", i);
        read_dims(key, narrow);
        snprintf(key, sizeof key, "rr.%d.target", i);
        int nt = read_dims(key, target);
        pt_tensor *v = pt_permute(base, nd, perm);
        if (narrow[0] >= 0)
            v = pt_narrow(v, narrow[0], narrow[1], narrow[2]);
        pt_tensor *r = pt_reshape(v, nt, target);
        snprintf(key, sizeof key, "rr.%d.out", i);
        assert_tensor_equal(r, get(key));
        snprintf(key, sizeof key, "rr.%d.view", i);
        bool torch_view = pt_item(get(key)) != 0;
        views += torch_view;
        assert_int_equal(pt_shares_storage(r, base), torch_view);
        pt_tensor *w = pt_view(v, nt, target);
        if (torch_view)
            assert_tensor_equal(w, r);
        else
            assert_pt_error(w, PT_ERR_SHAPE, "view size is not compatible");
    }
    assert_true(views > 5 && views < 55); /* both outcomes are exercised */
}

static void test_flatten_unflatten(void **state)
{
    (void)state;
    pt_tensor *x = get("x");
    assert_view_of(pt_flatten(x, 0, -1), "flatten.all", x);
    assert_view_of(pt_flatten(x, 1, 2), "flatten.1_2", x);
    pt_tensor *xt = pt_transpose(x, 0, 1);
    pt_tensor *f01 = pt_flatten(xt, 0, 1);
    assert_tensor_equal(f01, get("flatten.t_0_1"));
    assert_int_equal(pt_shares_storage(f01, x), pt_item(get("flatten.t_0_1.view")) != 0);
    pt_tensor *f12 = pt_flatten(xt, 1, 2);
    assert_tensor_equal(f12, get("flatten.t_1_2"));
    assert_int_equal(pt_shares_storage(f12, x), pt_item(get("flatten.t_1_2.view")) != 0);
    assert_view_of(pt_unflatten(x, 2, PT_SHAPE(2, -1)), "unflatten", x);
    assert_shape(pt_flatten(pt_scalar_tensor(1, PT_FLOAT32, pt_cpu()), 0, -1), 1);
    assert_pt_error(pt_flatten(x, 2, 1), PT_ERR_INVALID_ARG, "cannot come after");
    assert_pt_error(pt_unflatten(x, 1, PT_SHAPE(2, 2)), PT_ERR_SHAPE, "don't multiply up");
}

static void test_squeeze_unsqueeze_transpose_permute(void **state)
{
    (void)state;
    pt_tensor *s = get("s"), *x = get("x");
    assert_view_of(pt_squeeze(s), "squeeze.all", s);
    assert_view_of(pt_squeeze_dim(s, 2), "squeeze.d2", s);
    assert_view_of(pt_squeeze_dim(s, 1), "squeeze.d1", s); /* size 3: unchanged */
    pt_tensor *sd = pt_squeeze_dims(s, PT_DIMS(0, -2));
    assert_shape(sd, 3, 2);
    assert_view_of(pt_unsqueeze(x, 1), "unsqueeze.1", x);
    assert_view_of(pt_unsqueeze(x, -1), "unsqueeze.m1", x);
    assert_view_of(pt_transpose(x, 0, 2), "transpose.0_2", x);
    assert_view_of(pt_permute(x, PT_DIMS(2, 0, 1)), "permute.201", x);
    assert_view_of(pt_permute(x, PT_DIMS(-1, 0, 1)), "permute.201", x);
    pt_tensor *m = pt_zeros(PT_SHAPE(2, 3), PT_FLOAT32, pt_cpu());
    assert_shape(pt_t(m), 3, 2);
    assert_pt_error(pt_t(x), PT_ERR_SHAPE, "<= 2 dimensions");
    assert_pt_error(pt_unsqueeze(x, 4), PT_ERR_INDEX, "dimension out of range");
    assert_pt_error(pt_transpose(x, 0, 3), PT_ERR_INDEX, "[-3, 2]");
    assert_pt_error(pt_permute(x, PT_DIMS(0, 1)), PT_ERR_SHAPE, "number of dims");
    assert_pt_error(pt_permute(x, PT_DIMS(0, 1, 1)), PT_ERR_INVALID_ARG, "repeated dim");
    assert_pt_error(pt_squeeze_dim(x, 5), PT_ERR_INDEX, "out of range");
}

static void test_expand(void **state)
{
    (void)state;
    pt_tensor *e = get("e");
    pt_tensor *x = pt_expand(e, PT_SHAPE(2, 3, 4));
    assert_view_of(x, "expand.2x3x4", e);
    assert_int_equal(pt_stride(x)[0], 0);
    assert_view_of(pt_expand(e, PT_SHAPE(-1, 5)), "expand.m1x5", e);
    assert_view_of(pt_expand_as(e, get("x")), "expand.2x3x4", e);
    assert_pt_error(pt_expand(e, PT_SHAPE(4, 4)), PT_ERR_SHAPE,
                    "must match the existing size (3) at non-singleton dimension 0");
    assert_pt_error(pt_expand(e, PT_SHAPE(-1, 3, 1)), PT_ERR_SHAPE, "leading, non-existing");
    assert_pt_error(pt_expand(e, PT_SHAPE(3)), PT_ERR_SHAPE, "greater or equal");
}

static void test_narrow_select_slice(void **state)
{
    (void)state;
    pt_tensor *x = get("x"), *y = get("y");
    assert_view_of(pt_narrow(x, 2, 1, 2), "narrow.2_1_2", x);
    assert_view_of(pt_narrow(x, 1, -2, 2), "narrow.neg", x);
    assert_view_of(pt_select(x, 1, -1), "select.1_m1", x);
    assert_view_of(pt_select(x, 0, 1), "select.0_1", x);
    assert_view_of(pt_slice(y, 0, 1, 8, 3), "slice.1_8_3", y);
    assert_view_of(pt_slice(y, 0, -3, PT_SLICE_END, 1), "slice.m3_end_1", y);
    assert_view_of(pt_slice(y, 0, -20, 3, 1), "slice.m20_3_1", y);
    assert_view_of(pt_slice(y, 0, 5, 100, 2), "slice.5_100_2", y);
    assert_view_of(pt_slice(y, -1, 7, 2, 1), "slice.7_2_1", y);
    assert_view_of(pt_slice(y, 0, 0, -1, 4), "slice.0_m1_4", y);
    assert_tensor_equal(pt_slice(y, 0, 12, 20, 1), get("slice.12_20_1"));
    assert_view_of(pt_slice(x, 2, 1, PT_SLICE_END, 2), "slice.x_1_m1", x);
    /* a write through a slice is seen by the base */
    pt_tensor *yc = pt_clone(y);
    assert_int_equal(pt_fill_(pt_slice(yc, 0, 0, PT_SLICE_END, 3), -1), PT_OK);
    assert_true(pt_test_get(yc, 3) == -1.0 && pt_test_get(yc, 4) == 4.0);
    assert_pt_error(pt_narrow(x, 2, 3, 2), PT_ERR_INDEX, "exceeds dimension size");
    assert_pt_error(pt_select(x, 0, 2), PT_ERR_INDEX, "index 2 out of range");
    assert_pt_error(pt_select(x, 3, 0), PT_ERR_INDEX, "dimension out of range");
    assert_pt_error(pt_slice(y, 0, 0, 5, 0), PT_ERR_INVALID_ARG, "step must be positive");
    assert_pt_error(pt_select(pt_scalar_tensor(1, PT_FLOAT32, pt_cpu()), 0, 0), PT_ERR_INDEX,
                    "0-dim");
}

static void test_diagonal(void **state)
{
    (void)state;
    pt_tensor *d = get("d");
    assert_view_of(pt_diagonal(d, 0, 0, 1), "diagonal.0_0_1", d);
    assert_view_of(pt_diagonal(d, 1, 1, 2), "diagonal.1_1_2", d);
    assert_view_of(pt_diagonal(d, -2, 2, 0), "diagonal.m2_2_0", d);
    assert_view_of(pt_diagonal(d, 9, 1, 2), "diagonal.9_1_2", d);
    assert_pt_error(pt_diagonal(d, 0, 1, -2), PT_ERR_INVALID_ARG, "cannot be identical");
    /* filling the diagonal view writes the base: an identity matrix */
    pt_tensor *z = pt_zeros(PT_SHAPE(3, 4), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_fill_(pt_diagonal(z, 0, 0, 1), 1), PT_OK);
    assert_tensor_equal(z, pt_eye(3, 4, PT_FLOAT32, pt_cpu()));
    /* and through a transpose */
    pt_tensor *w = pt_zeros(PT_SHAPE(2, 3), PT_INT64, pt_cpu());
    assert_int_equal(pt_fill_(pt_select(pt_transpose(w, 0, 1), 0, 2), 5), PT_OK);
    assert_true(pt_test_get(w, 2) == 5 && pt_test_get(w, 5) == 5 && pt_test_get(w, 3) == 0);
}

/* Compares n pieces against fixtures "<prefix>.<i>", checks they are views, frees them. */
static void check_pieces(int n, pt_tensor **ps, int expect_n, const char *prefix,
                         const pt_tensor *base)
{
    assert_int_equal(n, expect_n);
    for (int i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s.%d", prefix, i);
        assert_view_of(ps[i], key, base);
        pt_release(ps[i]);
    }
    free(ps);
}

static void test_split_chunk_unbind(void **state)
{
    (void)state;
    pt_tensor *z = get("z");
    pt_tensor **ps;
    int n = pt_split(z, 3, 0, &ps);
    check_pieces(n, ps, 3, "split.3", z);
    n = pt_split_sizes(z, PT_DIMS(1, 4, 2), 0, &ps);
    check_pieces(n, ps, 3, "split_sizes", z);
    n = pt_chunk(z, 3, 0, &ps);
    check_pieces(n, ps, 3, "chunk.3", z);
    n = pt_chunk(z, 2, 1, &ps);
    check_pieces(n, ps, 2, "chunk.d1", z);
    n = pt_unbind(z, -1, &ps);
    check_pieces(n, ps, 3, "unbind", z);
    /* empty dim: one piece for split, `chunks` pieces for chunk */
    pt_tensor *e = pt_empty(PT_SHAPE(0, 2), PT_FLOAT32, pt_cpu());
    n = pt_split(e, 2, 0, &ps);
    assert_int_equal(n, 1);
    pt_release(ps[0]);
    free(ps);
    n = pt_chunk(e, 3, 0, &ps);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++)
        pt_release(ps[i]);
    free(ps);
    /* errors return -1 and NULL */
    ps = (pt_tensor **)&n;
    assert_int_equal(pt_split(z, 0, 0, &ps), -1);
    assert_null(ps);
    assert_pt_error(NULL, PT_ERR_INVALID_ARG, "split_size can only be 0");
    assert_int_equal(pt_split_sizes(z, PT_DIMS(1, 2), 0, &ps), -1);
    assert_pt_error(NULL, PT_ERR_SHAPE, "sum exactly to 7");
    assert_int_equal(pt_chunk(z, 0, 0, &ps), -1);
    assert_pt_error(NULL, PT_ERR_INVALID_ARG, "greater than 0");
    assert_int_equal(pt_unbind(z, 2, &ps), -1);
    assert_pt_error(NULL, PT_ERR_INDEX, "out of range");
}

static void test_cat_stack(void **state)
{
    (void)state;
    pt_tensor *a = get("cat.a"), *b = get("cat.b"), *c = get("cat.c");
    pt_tensor *r = pt_cat(3, (const pt_tensor *[]){a, b, c}, 0);
    assert_tensor_equal(r, get("cat.0"));
    assert_false(pt_shares_storage(r, a));
    /* non-contiguous inputs */
    pt_tensor *r2 =
        pt_cat(3, (const pt_tensor *[]){pt_test_noncontig(a), b, pt_test_noncontig(c)}, -2);
    assert_tensor_equal(r2, get("cat.0"));
    /* dtype promotion float32 + int32 -> float32 and int32 + int64 -> int64 */
    pt_tensor *bi = get("cat.bi");
    pt_tensor *bi3 = pt_slice(bi, 1, 0, 3, 1);
    assert_tensor_equal(pt_cat(2, (const pt_tensor *[]){a, bi3}, 1), get("cat.mixed_1"));
    pt_tensor *bl = pt_to_dtype(bi, PT_INT64);
    assert_tensor_equal(pt_cat(2, (const pt_tensor *[]){bi, bl}, -1), get("cat.bi_i64"));
    /* more inputs than one kernel call takes */
    pt_tensor *many[11];
    for (int i = 0; i < 11; i++)
        many[i] = pt_full(PT_SHAPE(1, 2), i, PT_FLOAT32, pt_cpu());
    assert_tensor_equal(pt_cat(11, (const pt_tensor *const *)many, 0), get("cat.many"));
    /* along dim 1, large enough to be split across threads, in two kernel calls (8 + 3
     * inputs: the second writes a column block of out): input i is all i, i + 1 columns wide */
    pt_tensor *wide[11];
    for (int i = 0; i < 11; i++)
        wide[i] = pt_full(PT_SHAPE(2001, i + 1), i, PT_FLOAT32, pt_cpu());
    pt_tensor *w = pt_cat(11, (const pt_tensor *const *)wide, 1);
    assert_non_null(w);
    assert_int_equal(pt_shape(w)[1], 66);
    const float *wd = pt_data_ptr(w);
    for (int64_t r = 0, bad = 0; r < 2001 && !bad; r++)
        for (int i = 0, col = 0; i < 11; i++)
            for (int k = 0; k <= i; k++, col++)
                if (wd[r * 66 + col] != (float)i) {
                    bad = 1;
                    fail_msg("cat wide: [%lld, %d] is %g, expected %d", (long long)r, col,
                             (double)wd[r * 66 + col], i);
                }
    /* [0] tensors are skipped */
    pt_tensor *e = pt_empty(PT_SHAPE(0), PT_FLOAT32, pt_cpu());
    assert_tensor_equal(pt_cat(3, (const pt_tensor *[]){a, e, a}, 0), get("cat.empty"));
    pt_tensor *a2 = get("stack.a2"), *a3 = get("stack.a3");
    pt_tensor *st = pt_stack(2, (const pt_tensor *[]){a, a2}, 0);
    assert_tensor_equal(st, get("stack.0"));
    assert_tensor_equal(pt_stack(3, (const pt_tensor *[]){a, a2, a3}, -1), get("stack.m1"));
    assert_tensor_equal(pt_stack(2, (const pt_tensor *[]){pt_test_noncontig(a), a2}, 1),
                        get("stack.1"));
    /* errors */
    assert_pt_error(pt_cat(2, (const pt_tensor *[]){a, pt_transpose(b, 0, 1)}, 0), PT_ERR_SHAPE,
                    "expected size 3 but got size 4 for tensor number 1");
    assert_pt_error(pt_cat(0, NULL, 0), PT_ERR_INVALID_ARG, "non-empty list");
    assert_pt_error(pt_cat(1, (const pt_tensor *[]){pt_scalar_tensor(1, PT_FLOAT32, pt_cpu())}, 0),
                    PT_ERR_SHAPE, "zero-dimensional tensor (at position 0)");
    assert_pt_error(pt_cat(2, (const pt_tensor *[]){a, a}, 2), PT_ERR_INDEX, "out of range");
    assert_pt_error(pt_stack(2, (const pt_tensor *[]){a, b}, 0), PT_ERR_SHAPE,
                    "expects each tensor to be equal size, but got [2, 3] at entry 0 and [4, 3] at "
                    "entry 1");
    assert_pt_error(pt_cat(2, (const pt_tensor *[]){a, NULL}, 0), PT_ERR_NULL, "pt_cat");
}

static void test_repeat_tile(void **state)
{
    (void)state;
    pt_tensor *r = get("r"), *ri = get("ri");
    assert_tensor_equal(pt_repeat(r, PT_DIMS(2, 1)), get("repeat.2_1"));
    assert_tensor_equal(pt_repeat(r, PT_DIMS(3, 2, 2)), get("repeat.3_2_2"));
    assert_tensor_equal(pt_repeat(pt_t(r), PT_DIMS(2, 3)), get("repeat.t_2_3"));
    assert_tensor_equal(pt_tile(r, PT_DIMS(2)), get("tile.2"));
    assert_tensor_equal(pt_tile(r, PT_DIMS(2, 1, 1)), get("tile.2_1_1"));
    assert_tensor_equal(pt_repeat(ri, PT_DIMS(4)), get("repeat.i_4"));
    assert_tensor_equal(pt_repeat(ri, PT_DIMS(2, 2)), get("repeat.i_2_2"));
    assert_shape(pt_repeat(r, PT_DIMS(0, 2)), 0, 6);
    assert_pt_error(pt_repeat(r, PT_DIMS(2)), PT_ERR_SHAPE, "can not be smaller");
    assert_pt_error(pt_repeat(r, PT_DIMS(2, -1)), PT_ERR_INVALID_ARG, "negative");
}

static void test_flip_roll(void **state)
{
    (void)state;
    pt_tensor *x = get("x");
    pt_tensor *xt = pt_transpose(x, 0, 1);
    pt_tensor *f = pt_flip(x, PT_DIMS(0));
    assert_tensor_equal(f, get("flip.0"));
    assert_false(pt_shares_storage(f, x));
    assert_tensor_equal(pt_flip(x, PT_DIMS(0, -1)), get("flip.0_2"));
    assert_tensor_equal(pt_flip(xt, PT_DIMS(-1)), get("flip.t_m1"));
    assert_tensor_equal(pt_flip(get("fb"), PT_DIMS(1)), get("flip.bool"));
    assert_tensor_equal(pt_flip(get("x64"), PT_DIMS(1)), get("x64.flip1"));
    assert_tensor_equal(pt_roll(x, PT_DIMS(1), PT_DIMS(2)), get("roll.1_d2"));
    assert_tensor_equal(pt_roll(x, PT_DIMS(-1, 2), PT_DIMS(0, 1)), get("roll.m1_d0_2_d1"));
    assert_tensor_equal(pt_roll(x, PT_DIMS(5), 0, NULL), get("roll.flat_5"));
    assert_tensor_equal(pt_roll(xt, PT_DIMS(7), PT_DIMS(2)), get("roll.t_7_d2"));
    assert_tensor_equal(pt_roll(x, PT_DIMS(1, 2), PT_DIMS(2, 2)), get("roll.same_dim"));
    assert_tensor_equal(pt_roll(pt_test_noncontig(get("xi")), PT_DIMS(2, -3), PT_DIMS(0, 1)),
                        get("roll.i_2_m3"));
    assert_pt_error(pt_flip(x, PT_DIMS(0, 0)), PT_ERR_INVALID_ARG, "multiple times");
    assert_pt_error(pt_roll(x, PT_DIMS(1, 2), PT_DIMS(0)), PT_ERR_INVALID_ARG, "must align");
}

static void test_tril_triu(void **state)
{
    (void)state;
    pt_tensor *m = get("m");
    const int64_t ks[] = {0, 1, -1, 10, -10};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        char key[64];
        snprintf(key, sizeof key, "tril.%lld", (long long)ks[i]);
        assert_tensor_equal(pt_tril(m, ks[i]), get(key));
        snprintf(key, sizeof key, "triu.%lld", (long long)ks[i]);
        assert_tensor_equal(pt_triu(pt_test_noncontig(m), ks[i]), get(key));
    }
    assert_tensor_equal(pt_tril(pt_transpose(m, 1, 2), 0), get("tril.t_0"));
    assert_tensor_equal(pt_triu(get("mi"), 1), get("triu.i16_1"));
    assert_tensor_equal(pt_tril(pt_to_dtype(m, PT_FLOAT64), -1), get("tril.f64_m1"));
    assert_tensor_equal(pt_triu(m, INT64_MAX), pt_zeros(PT_SHAPE(2, 4, 5), PT_FLOAT32, pt_cpu()));
    assert_pt_error(pt_tril(get("y"), 0), PT_ERR_SHAPE, "at least 2 dimensions");
}

static void test_large_copies_threaded(void **state)
{
    (void)state;
    /* big enough to split across the pool: compare against element-wise expectations */
    pt_tensor *a = pt_arange(0, 1 << 18, 1, PT_INT32, pt_cpu());
    pt_tensor *m = pt_view(a, PT_SHAPE(512, 512));
    pt_tensor *f = pt_flip(m, PT_DIMS(0));
    assert_true(pt_test_get(f, 0) == 511 * 512);
    assert_true(pt_test_get(f, (1 << 18) - 1) == 511);
    pt_tensor *r = pt_roll(m, PT_DIMS(3, -5), PT_DIMS(0, 1));
    /* r[i][j] = m[(i - 3) % 512][(j + 5) % 512] */
    assert_true(pt_test_get(r, 0) == (509 * 512 + 5));
    pt_tensor *c = pt_cat(2, (const pt_tensor *[]){m, pt_t(m)}, 1);
    assert_true(pt_test_get(c, 512 + 1) == 512); /* row 0, col 1 of the transpose */
    pt_tensor *t = pt_triu(m, 0);
    assert_true(pt_test_get(t, 512) == 0 && pt_test_get(t, 513) == 513);
}

int main(void)
{
    fx = fx_open("shape");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reshape_view_or_copy, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_reshape_random_cases, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_flatten_unflatten, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_squeeze_unsqueeze_transpose_permute, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_expand, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_narrow_select_slice, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_diagonal, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_split_chunk_unbind, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cat_stack, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_repeat_tile, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_flip_roll, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_tril_triu, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_large_copies_threaded, pt_test_setup,
                                        pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
