/* Index family tests against PyTorch fixtures (tests/fixtures/gen/index.py): index_select,
 * embedding, gather, scatter, scatter_add, index_add, masked_fill, masked_select, advanced
 * indexing, index_put, nonzero, sort/argsort/topk, unique, one_hot, and their error paths. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

#define F(name) fx_get(fx, name)

static pt_tensor *i64(int n, const int64_t *v)
{
    return pt_from_data(v, 1, (int64_t[]){n}, PT_INT64, pt_cpu());
}

static void test_index_select(void **state)
{
    (void)state;
    pt_tensor *x = F("x3");
    assert_tensor_equal(pt_index_select(x, 0, i64(3, (int64_t[]){2, 0, 2})), F("sel.d0"));
    assert_tensor_equal(pt_index_select(x, 1, F("sel.idx")), F("sel.d1"));
    assert_tensor_equal(pt_index_select(x, -1, i64(2, (int64_t[]){4, 0})), F("sel.dm1"));
    /* non-contiguous input */
    assert_tensor_equal(pt_index_select(pt_test_noncontig(x), 1, F("sel.idx")), F("sel.d1"));
    /* a permuted view: strided outer dims and strided rows */
    pt_tensor *xt = pt_as_strided(F("x3t"), PT_SHAPE(3, 4, 5), (int64_t[]){1, 3, 12}, 0);
    assert_tensor_equal(pt_index_select(xt, 1, F("sel.idx")), F("sel.d1"));
    assert_tensor_equal(pt_index_select(xt, 0, i64(3, (int64_t[]){2, 0, 2})), F("sel.d0"));
    /* int64 data with an int32 index, float16 data */
    pt_tensor *i32 = pt_from_data((int32_t[]){5, 5, 0}, 1, (int64_t[]){3}, PT_INT32, pt_cpu());
    assert_tensor_equal(pt_index_select(F("sel.xi"), 1, i32), F("sel.xi_d1"));
    assert_tensor_equal(pt_index_select(F("sel.xh"), 0, i64(2, (int64_t[]){3, 1})), F("sel.xh_d0"));
    /* empty index */
    pt_tensor *e = pt_index_select(x, 1, pt_empty(PT_SHAPE(0), PT_INT64, pt_cpu()));
    assert_shape(e, 3, 0, 5);
}

static void test_index_select_errors(void **state)
{
    (void)state;
    pt_tensor *x = F("x3");
    assert_pt_error(pt_index_select(x, 1, i64(2, (int64_t[]){1, 4})), PT_ERR_INDEX,
                    "index 4 is out of bounds for dimension 1 with size 4");
    assert_pt_error(pt_index_select(x, 0, i64(1, (int64_t[]){-1})), PT_ERR_INDEX, "index -1");
    assert_pt_error(pt_index_select(x, 3, F("sel.idx")), PT_ERR_INDEX, "dimension out of range");
    assert_pt_error(pt_index_select(x, 0, pt_zeros(PT_SHAPE(2), PT_FLOAT32, pt_cpu())),
                    PT_ERR_DTYPE, "int64");
    assert_pt_error(pt_index_select(x, 0, pt_zeros(PT_SHAPE(2, 1), PT_INT64, pt_cpu())),
                    PT_ERR_SHAPE, "1-D");
    assert_pt_error(pt_index_select(NULL, 0, F("sel.idx")), PT_ERR_NULL, "pt_index_select");
}

static void test_embedding(void **state)
{
    (void)state;
    pt_tensor *w = F("emb.w"), *idx = F("emb.idx");
    assert_tensor_equal(pt_embedding(w, idx), F("emb.out"));
    pt_tensor *i32 = pt_to_dtype(idx, PT_INT32);
    pt_embedding_opts o = {.has_padding_idx = true, .padding_idx = -1};
    assert_tensor_equal(pt_embedding_ex(w, i32, &o), F("emb.out"));
    assert_tensor_equal(pt_embedding(pt_test_noncontig(w), idx), F("emb.out"));
    pt_tensor *wt = pt_as_strided(F("emb.wt"), PT_SHAPE(10, 4), (int64_t[]){1, 10}, 0);
    assert_tensor_equal(pt_embedding(wt, idx), F("emb.out"));
    assert_pt_error(pt_embedding(w, i64(2, (int64_t[]){3, 10})), PT_ERR_INDEX,
                    "pt_embedding: index 10 is out of bounds for dimension 0 with size 10");
    assert_pt_error(pt_embedding(w, i64(1, (int64_t[]){-1})), PT_ERR_INDEX, "index -1");
    o.padding_idx = 10;
    assert_pt_error(pt_embedding_ex(w, idx, &o), PT_ERR_INDEX, "padding_idx 10");
    assert_pt_error(pt_embedding(F("x3"), idx), PT_ERR_SHAPE, "2-D");
    assert_pt_error(pt_embedding(w, pt_to_dtype(idx, PT_FLOAT32)), PT_ERR_DTYPE, "indices");
}

static void test_embedding_large_threads(void **state)
{
    (void)state;
    /* big enough to split across the pool; each row i must equal weight row idx[i] */
    int64_t v = 1000, d = 64, n = 5000;
    pt_tensor *w = pt_arange(0, (double)(v * d), 1, PT_FLOAT32, pt_cpu());
    pt_tensor *w2 = pt_as_strided(w, PT_SHAPE(v, d), (int64_t[]){d, 1}, 0);
    int64_t *iv = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        iv[i] = (i * 7919) % v;
    pt_tensor *idx = i64((int)n, iv);
    pt_tensor *e = pt_embedding(w2, idx);
    assert_shape(e, n, d);
    const float *p = pt_data_ptr(e);
    for (int64_t i = 0; i < n; i += 97)
        for (int64_t j = 0; j < d; j++)
            assert_true(p[i * d + j] == (float)(iv[i] * d + j));
    free(iv);
}

static void test_gather(void **state)
{
    (void)state;
    pt_tensor *g = F("gather.x");
    assert_tensor_equal(pt_gather(g, 1, F("gather.i1")), F("gather.d1"));
    assert_tensor_equal(pt_gather(g, 0, F("gather.i0")), F("gather.d0"));
    assert_tensor_equal(pt_gather(pt_test_noncontig(g), 0, F("gather.i0")), F("gather.d0"));
    /* index smaller than the input on a non-gathered dim, negative dim, noncontig index */
    assert_tensor_equal(pt_gather(F("x3"), -1, pt_test_noncontig(F("gather.i3s"))),
                        F("gather.x3_dm1"));
    assert_pt_error(pt_gather(g, 1, pt_full(PT_SHAPE(1, 1), 4, PT_INT64, pt_cpu())), PT_ERR_INDEX,
                    "pt_gather: index 4 is out of bounds for dimension 1 with size 4");
    assert_pt_error(pt_gather(g, 1, i64(2, (int64_t[]){0, 1})), PT_ERR_SHAPE, "as many dims");
    /* int32 is accepted since PyTorch 2.x (test_int32_index_gather_scatter); int16 is not */
    assert_pt_error(pt_gather(g, 1, pt_to_dtype(F("gather.i1"), PT_INT16)), PT_ERR_DTYPE,
                    "int64 or int32");
    pt_tensor *neg = pt_full(PT_SHAPE(1, 1), -1, PT_INT64, pt_cpu());
    assert_pt_error(pt_gather(g, 1, neg), PT_ERR_INDEX,
                    "index -1 is out of bounds for dimension 1 with size 4");
    assert_pt_error(pt_gather(g, 1, pt_zeros(PT_SHAPE(4, 1), PT_INT64, pt_cpu())), PT_ERR_SHAPE,
                    "larger");
}

static void test_scatter(void **state)
{
    (void)state;
    pt_tensor *base = pt_zeros(PT_SHAPE(3, 5), PT_FLOAT32, pt_cpu());
    assert_tensor_equal(pt_scatter(base, 0, F("scatter.i"), F("scatter.src")), F("scatter.d0"));
    assert_tensor_equal(pt_scatter_scalar(base, 1, F("scatter.vi"), 2.5), F("scatter.val"));
    /* in place into a non-contiguous tensor */
    pt_tensor *nc = pt_test_noncontig(base);
    assert_int_equal(pt_scatter_(nc, 0, F("scatter.i"), pt_test_noncontig(F("scatter.src"))),
                     PT_OK);
    assert_tensor_equal(pt_contiguous(nc), F("scatter.d0"));
    assert_int_equal(pt_scatter_scalar_(base, 1, F("scatter.vi"), 2.5), PT_OK);
    assert_tensor_equal(base, F("scatter.val"));
    /* scatter_add: duplicates add up */
    pt_tensor *self = F("scatter_add.self");
    assert_tensor_close(pt_scatter_add(self, 0, F("scatter_add.i"), F("scatter_add.src")),
                        F("scatter_add.d0"), 1e-6, 1e-6);
    assert_tensor_close(pt_scatter_add(self, -1, F("scatter_add.i"), F("scatter_add.src")),
                        F("scatter_add.d1"), 1e-6, 1e-6);
    pt_tensor *zi = pt_zeros(PT_SHAPE(3, 5), PT_INT64, pt_cpu());
    assert_int_equal(pt_scatter_add_(zi, 1, F("scatter_add.i"), F("scatter_add.srci")), PT_OK);
    assert_tensor_equal(zi, F("scatter_add.i64"));
    /* errors */
    pt_tensor *bad = pt_full(PT_SHAPE(1, 1), 5, PT_INT64, pt_cpu());
    assert_pt_error(pt_scatter(base, 1, bad, F("scatter.src")), PT_ERR_INDEX,
                    "pt_scatter: index 5 is out of bounds for dimension 1 with size 5");
    assert_pt_status_error(
        pt_scatter_add_(base, 0, F("scatter.i"), pt_zeros(PT_SHAPE(3, 5), PT_FLOAT64, pt_cpu())),
        PT_ERR_DTYPE, "dtype");
    assert_pt_error(
        pt_scatter(base, 0, F("scatter.i"), pt_zeros(PT_SHAPE(1, 5), PT_FLOAT32, pt_cpu())),
        PT_ERR_SHAPE, "larger than src");
    assert_pt_error(pt_scatter(base, 0, NULL, F("scatter.src")), PT_ERR_NULL, "index");
}

static void test_index_add(void **state)
{
    (void)state;
    pt_tensor *self = F("index_add.self");
    assert_tensor_close(pt_index_add(self, 0, F("index_add.idx"), F("index_add.src"), 2.0),
                        F("index_add.d0"), 1e-6, 1e-6);
    pt_tensor *i32 = pt_from_data((int32_t[]){2, 2}, 1, (int64_t[]){2}, PT_INT32, pt_cpu());
    assert_tensor_close(pt_index_add(pt_test_noncontig(self), -1, i32, F("index_add.src1"), 1.0),
                        F("index_add.dm1"), 1e-6, 1e-6);
    pt_tensor *c = pt_clone(self);
    assert_int_equal(pt_index_add_(c, 0, F("index_add.idx"), F("index_add.src"), 2.0), PT_OK);
    assert_tensor_close(c, F("index_add.d0"), 1e-6, 1e-6);
    assert_pt_error(pt_index_add(self, 0, i64(4, (int64_t[]){0, 5, 1, 1}), F("index_add.src"), 1),
                    PT_ERR_INDEX, "index 5 is out of bounds for dimension 0 with size 5");
    pt_tensor *ints = pt_zeros(PT_SHAPE(5, 3), PT_INT64, pt_cpu());
    assert_pt_error(
        pt_index_add(ints, 0, F("index_add.idx"), pt_ones(PT_SHAPE(4, 3), PT_INT64, pt_cpu()), 0.5),
        PT_ERR_INVALID_ARG, "alpha must be an integer");
    assert_pt_error(pt_index_add(self, 0, i64(3, (int64_t[]){0, 1, 1}), F("index_add.src"), 1),
                    PT_ERR_SHAPE, "number of indices");
}

static void test_masked_fill_select(void **state)
{
    (void)state;
    pt_tensor *x = F("mf.x");
    assert_tensor_equal(pt_masked_fill(x, F("mf.m1"), -7.5), F("mf.out1"));
    assert_tensor_equal(pt_masked_fill(pt_test_noncontig(x), F("mf.m3"), 0.25), F("mf.out3"));
    assert_tensor_equal(pt_masked_fill(F("mf.small"), F("mf.m3"), 3.0), F("mf.bcast"));
    pt_tensor *m =
        pt_from_data((bool[]){true, false, false, true}, 1, (int64_t[]){4}, PT_BOOL, pt_cpu());
    assert_tensor_equal(pt_masked_fill(F("mf.xi"), m, 2.7), F("mf.xi_out"));
    pt_tensor *v = pt_scalar_tensor(2.7, PT_FLOAT64, pt_cpu());
    assert_tensor_equal(pt_masked_fill_tensor(F("mf.xi"), m, v), F("mf.xi_out"));
    pt_tensor *c = pt_clone(x);
    assert_int_equal(pt_masked_fill_(c, F("mf.m1"), -7.5), PT_OK);
    assert_tensor_equal(c, F("mf.out1"));
    pt_tensor *c2 = pt_clone(x);
    assert_int_equal(
        pt_masked_fill_tensor_(c2, F("mf.m3"), pt_scalar_tensor(0.25, PT_FLOAT32, pt_cpu())),
        PT_OK);
    assert_tensor_equal(c2, F("mf.out3"));
    assert_tensor_equal(pt_masked_select(x, F("mf.m3")), F("ms.out3"));
    assert_tensor_equal(pt_masked_select(pt_test_noncontig(x), F("mf.m1")), F("ms.out1"));
    /* errors */
    assert_pt_error(pt_masked_fill(x, pt_zeros(PT_SHAPE(4), PT_FLOAT32, pt_cpu()), 1), PT_ERR_DTYPE,
                    "bool");
    assert_pt_error(pt_masked_fill(x, pt_zeros(PT_SHAPE(5), PT_BOOL, pt_cpu()), 1), PT_ERR_SHAPE,
                    "broadcast");
    assert_pt_status_error(pt_masked_fill_(F("mf.small"), F("mf.m3"), 1), PT_ERR_SHAPE,
                           "broadcast");
    assert_pt_error(pt_masked_fill_tensor(x, m, pt_zeros(PT_SHAPE(1), PT_FLOAT32, pt_cpu())),
                    PT_ERR_SHAPE, "0-dim");
    assert_pt_error(pt_masked_select(x, NULL), PT_ERR_NULL, "mask");
}

static void test_advanced_indexing(void **state)
{
    (void)state;
    pt_tensor *a = F("adv.x");
    const pt_tensor *l1[] = {F("adv.i2")};
    assert_tensor_equal(pt_index(a, 1, l1), F("adv.a"));
    const pt_tensor *l2[] = {NULL, F("adv.ii"), F("adv.jj")};
    assert_tensor_equal(pt_index(a, 3, l2), F("adv.b"));
    assert_tensor_equal(pt_index(pt_test_noncontig(a), 3, l2), F("adv.b"));
    const pt_tensor *l3[] = {F("adv.kk"), NULL, F("adv.jj")};
    assert_tensor_equal(pt_index(a, 3, l3), F("adv.c"));
    assert_tensor_equal(pt_index(pt_test_noncontig(a), 3, l3), F("adv.c"));
    const pt_tensor *l4[] = {F("adv.mask4")};
    assert_tensor_equal(pt_index(a, 1, l4), F("adv.d"));
    const pt_tensor *l5[] = {F("adv.mask45")};
    assert_tensor_equal(pt_index(a, 1, l5), F("adv.e"));
    const pt_tensor *l6[] = {NULL, NULL, F("adv.i2")};
    assert_tensor_equal(pt_index(a, 3, l6), F("adv.f"));
    const pt_tensor *l7[] = {F("adv.ib"), F("adv.jb")};
    assert_tensor_equal(pt_index(a, 2, l7), F("adv.g"));
    const pt_tensor *l8[] = {NULL, F("adv.mask5"), F("adv.jj")};
    assert_tensor_equal(pt_index(a, 3, l8), F("adv.h"));
    pt_tensor *two = pt_scalar_tensor(2, PT_INT64, pt_cpu());
    const pt_tensor *l9[] = {two, NULL, F("adv.ii")};
    assert_tensor_equal(pt_index(a, 3, l9), F("adv.s"));
    /* no index tensor: a view */
    const pt_tensor *l10[] = {NULL, NULL};
    pt_tensor *view = pt_index(a, 2, l10);
    assert_true(pt_shares_storage(view, a));
    /* errors */
    const pt_tensor *e1[] = {i64(2, (int64_t[]){0, 4})};
    assert_pt_error(pt_index(a, 1, e1), PT_ERR_INDEX,
                    "index 4 is out of bounds for dimension 0 with size 4");
    const pt_tensor *e2[] = {i64(1, (int64_t[]){-5})};
    assert_pt_error(pt_index(a, 1, e2), PT_ERR_INDEX, "index -5");
    const pt_tensor *e3[] = {pt_zeros(PT_SHAPE(2), PT_FLOAT32, pt_cpu())};
    assert_pt_error(pt_index(a, 1, e3), PT_ERR_DTYPE, "indices");
    const pt_tensor *e4[] = {F("adv.ii"), i64(2, (int64_t[]){0, 1})};
    assert_pt_error(pt_index(a, 2, e4), PT_ERR_INDEX, "broadcast together ([3] and [2])");
    const pt_tensor *e5[] = {F("adv.mask5")};
    assert_pt_error(pt_index(a, 1, e5), PT_ERR_INDEX, "does not match");
    const pt_tensor *e6[] = {NULL, NULL, NULL, NULL};
    assert_pt_error(pt_index(a, 4, e6), PT_ERR_INDEX, "too many indices");
    assert_pt_error(pt_index(NULL, 1, l1), PT_ERR_NULL, "pt_index");
}

static void test_index_put(void **state)
{
    (void)state;
    pt_tensor *p = pt_zeros(PT_SHAPE(4, 3), PT_FLOAT32, pt_cpu());
    const pt_tensor *l1[] = {F("put.i")};
    assert_tensor_equal(pt_index_put(p, 1, l1, F("put.v"), true), F("put.acc"));
    const pt_tensor *l2[] = {F("put.i"), F("put.j")};
    assert_tensor_equal(pt_index_put(p, 2, l2, F("put.vs"), true), F("put.acc2"));
    const pt_tensor *l3[] = {i64(2, (int64_t[]){3, 1}), i64(2, (int64_t[]){-1, 0})};
    pt_tensor *vals = pt_from_data((float[]){5, 6}, 1, (int64_t[]){2}, PT_FLOAT32, pt_cpu());
    assert_tensor_equal(pt_index_put(p, 2, l3, vals, false), F("put.set"));
    pt_tensor *pm = pt_clone(F("put.pm"));
    pt_tensor *mask = pt_masked_select(pm, pt_zeros(PT_SHAPE(1), PT_BOOL, pt_cpu())); /* empty */
    assert_int_equal(pt_numel(mask), 0);
    /* bool mask with a 0-dim value, in place */
    pt_tensor *gt = pt_clone(F("put.pm"));
    bool mb[12];
    for (int i = 0; i < 12; i++)
        mb[i] = pt_test_get(gt, i) > 0;
    const pt_tensor *l4[] = {pt_from_data(mb, 2, (int64_t[]){4, 3}, PT_BOOL, pt_cpu())};
    assert_int_equal(pt_index_put_(pm, 1, l4, pt_scalar_tensor(0, PT_FLOAT32, pt_cpu()), false),
                     PT_OK);
    assert_tensor_equal(pm, F("put.mask"));
    /* column indexing into a non-contiguous tensor */
    pt_tensor *nc = pt_test_noncontig(p);
    const pt_tensor *l5[] = {NULL, i64(2, (int64_t[]){2, 0})};
    pt_tensor *v2 = pt_from_data((float[]){1.5f, -1.5f}, 1, (int64_t[]){2}, PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_index_put_(nc, 2, l5, v2, false), PT_OK);
    assert_tensor_equal(pt_contiguous(nc), F("put.cols"));
    /* errors */
    assert_pt_error(pt_index_put(p, 1, l1, pt_to_dtype(F("put.v"), PT_FLOAT64), false),
                    PT_ERR_DTYPE, "dtypes to match");
    assert_pt_error(pt_index_put(p, 1, l1, pt_zeros(PT_SHAPE(3, 3), PT_FLOAT32, pt_cpu()), false),
                    PT_ERR_SHAPE, "broadcast");
    const pt_tensor *e1[] = {i64(1, (int64_t[]){7})};
    assert_pt_status_error(pt_index_put_(p, 1, e1, pt_scalar_tensor(1, PT_FLOAT32, pt_cpu()), true),
                           PT_ERR_INDEX, "index 7 is out of bounds for dimension 0 with size 4");
}

static void test_nonzero(void **state)
{
    (void)state;
    assert_tensor_equal(pt_nonzero(F("nz.x")), F("nz.out"));
    assert_tensor_equal(pt_nonzero(F("nz.x3")), F("nz.out3"));
    assert_tensor_equal(pt_nonzero(pt_test_noncontig(F("nz.x3"))), F("nz.out3"));
    assert_shape(pt_nonzero(pt_zeros(PT_SHAPE(2, 2), PT_FLOAT32, pt_cpu())), 0, 2);
}

static void test_sort_topk(void **state)
{
    (void)state;
    pt_tensor *s = F("sort.x"), *idx = NULL;
    assert_tensor_equal(pt_sort(s, 1, false, true, &idx), F("sort.v"));
    assert_tensor_equal(idx, F("sort.i"));
    assert_tensor_equal(pt_sort(pt_test_noncontig(s), -1, true, true, &idx), F("sort.vd"));
    assert_tensor_equal(idx, F("sort.id"));
    assert_tensor_equal(pt_sort(F("sort.x0"), 0, false, true, &idx), F("sort.v0"));
    assert_tensor_equal(idx, F("sort.i0"));
    assert_tensor_equal(pt_argsort(F("sort.x0"), 0, true), F("argsort.x0"));
    assert_tensor_equal(pt_topk(F("topk.x"), 3, 1, true, true, &idx), F("topk.v"));
    assert_tensor_equal(idx, F("topk.i"));
    assert_tensor_equal(pt_topk(F("topk.x"), 2, 0, false, true, &idx), F("topk.vs"));
    assert_tensor_equal(idx, F("topk.is"));
    /* ties: values match torch; each index points at its value */
    pt_tensor *tt = F("topk.ties");
    assert_tensor_equal(pt_topk(tt, 4, 0, true, true, &idx), F("topk.ties_v"));
    pt_tensor *back = pt_gather(tt, 0, idx);
    assert_tensor_equal(back, F("topk.ties_v"));
    assert_shape(pt_topk(tt, 0, 0, true, true, NULL), 0);
    assert_pt_error(pt_topk(tt, 7, 0, true, true, &idx), PT_ERR_INDEX, "k (7)");
    assert_null(idx);
    assert_pt_error(pt_sort(tt, 1, false, false, NULL), PT_ERR_INDEX, "dimension out of range");
}

static void test_sort_large_threads(void **state)
{
    (void)state;
    /* many rows sort in parallel; every row must come out ascending with a valid permutation */
    int64_t rows = 2000, n = 64;
    pt_tensor *x = pt_arange(0, (double)(rows * n), 1, PT_INT32, pt_cpu());
    int32_t *p = pt_data_ptr(x);
    for (int64_t i = 0; i < rows * n; i++)
        p[i] = (int32_t)((i * 2654435761u) % 1000);
    pt_tensor *x2 = pt_as_strided(x, PT_SHAPE(rows, n), (int64_t[]){n, 1}, 0);
    pt_tensor *idx = NULL;
    pt_tensor *v = pt_sort(x2, 1, false, true, &idx);
    assert_non_null(v);
    const int32_t *vp = pt_data_ptr(v);
    const int64_t *ip = pt_data_ptr(idx);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            assert_true(vp[r * n + j] == p[r * n + ip[r * n + j]]);
            if (j)
                assert_true(vp[r * n + j - 1] <= vp[r * n + j]);
        }
}

static void test_unique(void **state)
{
    (void)state;
    pt_tensor *inv = NULL, *cnt = NULL;
    assert_tensor_equal(pt_unique(F("unique.x"), &inv, &cnt), F("unique.v"));
    assert_tensor_equal(inv, F("unique.inv"));
    assert_tensor_equal(cnt, F("unique.cnt"));
    assert_tensor_equal(pt_unique(pt_test_noncontig(F("unique.xf")), NULL, NULL), F("unique.vf"));
    assert_shape(pt_unique(pt_zeros(PT_SHAPE(0), PT_FLOAT32, pt_cpu()), NULL, NULL), 0);
}

static void test_one_hot(void **state)
{
    (void)state;
    assert_tensor_equal(pt_one_hot(F("oh.x"), -1), F("oh.infer"));
    assert_tensor_equal(pt_one_hot(pt_test_noncontig(F("oh.x")), 5), F("oh.c5"));
    assert_pt_error(pt_one_hot(F("oh.x"), 3), PT_ERR_INDEX, "smaller than num_classes");
    assert_pt_error(pt_one_hot(i64(2, (int64_t[]){1, -2}), 3), PT_ERR_INDEX, "non-negative");
    assert_pt_error(pt_one_hot(i64(2, (int64_t[]){-1, -2}), -1), PT_ERR_INDEX, "non-negative");
    assert_pt_error(pt_one_hot(i64(1, (int64_t[]){INT64_MAX}), -1), PT_ERR_INDEX, "too large");
    assert_pt_error(pt_one_hot(pt_to_dtype(F("oh.x"), PT_INT32), 5), PT_ERR_DTYPE, "int64");
    assert_pt_error(pt_one_hot(pt_empty(PT_SHAPE(0), PT_INT64, pt_cpu()), -1), PT_ERR_INVALID_ARG,
                    "empty");
}

static void test_zero_dim_and_dtypes(void **state)
{
    (void)state;
    pt_tensor *s = F("z.s");
    pt_tensor *zero = pt_scalar_tensor(0, PT_INT64, pt_cpu());
    assert_tensor_equal(pt_index_select(s, 0, zero), s);
    assert_tensor_equal(pt_index_select(s, 0, i64(1, (int64_t[]){0})), s);
    assert_tensor_equal(pt_gather(s, 0, zero), s);
    assert_tensor_equal(pt_scatter_add(s, 0, zero, pt_scalar_tensor(2, PT_FLOAT32, pt_cpu())),
                        F("z.scatter_add"));
    assert_pt_error(pt_gather(s, 0, pt_scalar_tensor(1, PT_INT64, pt_cpu())), PT_ERR_INDEX,
                    "index 1 is out of bounds for dimension 0 with size 1");
    /* NaN is the largest value in topk */
    pt_tensor *idx = NULL;
    assert_tensor_equal(pt_topk(F("topk.nan"), 2, 0, true, true, &idx), F("topk.nan_v"));
    assert_tensor_equal(idx, F("topk.nan_i"));
    assert_tensor_equal(pt_topk(F("topk.nan"), 3, -1, false, true, &idx), F("topk.nan_vs"));
    assert_tensor_equal(idx, F("topk.nan_is"));
    /* float64, int8, bool, float16, bfloat16, int64 data */
    assert_tensor_equal(pt_gather(pt_test_noncontig(F("dt.f64")), 1, F("gather.i1")),
                        F("dt.f64_gather"));
    pt_tensor *i8 = F("dt.i8");
    assert_tensor_equal(pt_scatter_scalar(i8, 0, F("scatter.i"), 7), F("dt.i8_scatter"));
    assert_tensor_equal(pt_scatter_add(i8, 1, F("scatter_add.i"), i8), F("dt.i8_scatter_add"));
    assert_tensor_equal(pt_masked_fill(F("dt.b"), F("mf.m1"), 0), F("dt.b_mf"));
    assert_tensor_equal(pt_nonzero(F("dt.b")), F("dt.b_nz"));
    assert_tensor_equal(pt_sort(F("dt.h"), 1, true, true, &idx), F("dt.h_sv"));
    assert_tensor_equal(idx, F("dt.h_si"));
    pt_tensor *ones = pt_ones(PT_SHAPE(4, 3), PT_BFLOAT16, pt_cpu());
    assert_tensor_equal(pt_index_add(F("dt.bf"), 0, F("index_add.idx"), ones, 2), F("dt.bf_ia"));
    pt_tensor *jj = pt_from_data((int64_t[]){5, -6}, 2, (int64_t[]){2, 1}, PT_INT64, pt_cpu());
    const pt_tensor *l[] = {i64(2, (int64_t[]){3, 0}), jj};
    assert_tensor_equal(pt_index(F("sel.xi"), 2, l), F("dt.i64_adv"));
    /* a uint8 mask works like a bool one (deprecated in PyTorch), broadcast over rows */
    pt_tensor *u8 =
        pt_from_data((uint8_t[]){1, 0, 1, 0, 0, 1}, 2, (int64_t[]){1, 6}, PT_UINT8, pt_cpu());
    assert_tensor_equal(pt_masked_select(F("sel.xi"), u8), F("dt.u8mask_ms"));
}

static void test_gather_large_threads(void **state)
{
    (void)state;
    /* large enough to run across the pool: out[i][j] = t[i][idx[i][j]] */
    int64_t r = 3000, c = 40;
    pt_tensor *t = pt_arange(0, (double)(r * c), 1, PT_FLOAT64, pt_cpu());
    pt_tensor *t2 = pt_as_strided(t, PT_SHAPE(r, c), (int64_t[]){c, 1}, 0);
    pt_tensor *idx = pt_zeros(PT_SHAPE(r, c), PT_INT64, pt_cpu());
    int64_t *ip = pt_data_ptr(idx);
    for (int64_t i = 0; i < r * c; i++)
        ip[i] = (i * 31 + 7) % c;
    pt_tensor *g = pt_gather(t2, 1, idx);
    const double *gp = pt_data_ptr(g);
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            assert_true(gp[i * c + j] == (double)(i * c + ip[i * c + j]));
    /* and index_select along the rows */
    pt_tensor *rows = pt_index_select(t2, 0, i64(3, (int64_t[]){r - 1, 0, 5}));
    assert_true(pt_test_get(rows, 0) == (double)((r - 1) * c));
    assert_true(pt_test_get(rows, 2 * c + 3) == (double)(5 * c + 3));
}

static void test_index_add_large_threads(void **state)
{
    (void)state;
    /* split across the pool over slice positions; duplicates must all add up */
    int64_t rows = 50, cols = 4000, n = 40;
    pt_tensor *self = pt_zeros(PT_SHAPE(rows, cols), PT_FLOAT64, pt_cpu());
    pt_tensor *src = pt_arange(0, (double)(n * cols), 1, PT_FLOAT64, pt_cpu());
    pt_tensor *src2 = pt_as_strided(src, PT_SHAPE(n, cols), (int64_t[]){cols, 1}, 0);
    int64_t iv[40];
    for (int i = 0; i < n; i++)
        iv[i] = (i * 7) % 5; /* rows 0..4, each 8 times */
    assert_int_equal(pt_index_add_(self, 0, i64((int)n, iv), src2, 0.5), PT_OK);
    for (int64_t r = 0; r < 5; r++)
        for (int64_t c = 0; c < cols; c += 37) {
            double want = 0;
            for (int i = 0; i < n; i++)
                if (iv[i] == r)
                    want += 0.5 * (double)(i * cols + c);
            assert_true(pt_test_get(self, r * cols + c) == want);
        }
    assert_true(pt_test_get(self, 5 * cols + 1) == 0.0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, pt_test_setup, pt_test_teardown)

/* torch.topk raises "topk does not support bool dtypes on CPU", even for k = 0. */
static void test_topk_bool_refused(void **state)
{
    (void)state;
    pt_tensor *b = pt_ones(PT_SHAPE(3), PT_BOOL, pt_cpu());
    pt_tensor *e = pt_ones(PT_SHAPE(0), PT_BOOL, pt_cpu());
    pt_tensor *idx = NULL;
    assert_pt_error(pt_topk(b, 2, 0, true, true, &idx), PT_ERR_DTYPE,
                    "pt_topk: topk does not support bool");
    assert_null(idx);
    assert_pt_error(pt_topk(e, 0, 0, true, true, NULL), PT_ERR_DTYPE, "pt_topk");
    pt_release(b);
    pt_release(e);
}

/* PyTorch 2.x's gather, scatter (tensor and scalar) and scatter_add take int32 index tensors
 * as well as int64 ones (index_select, index_add and embedding already did); int16, int8,
 * uint8 and bool indices stay refused ("Expected dtype int32/int64 for index"). */
static void test_int32_index_gather_scatter(void **state)
{
    (void)state;
    pt_fixture *f32 = fx_open("index_i32");
    assert_non_null(f32);
#define G(name) fx_get(f32, name)
    pt_tensor *x = G("x"), *src = G("src");
    assert_int_equal(pt_dtype_of(G("i")), PT_INT32);
    assert_tensor_equal(pt_gather(x, 1, G("i")), G("gather1"));
    assert_tensor_equal(pt_gather(x, 0, G("i0")), G("gather0"));
    assert_tensor_equal(pt_gather(x, 1, pt_test_noncontig(G("i"))), G("gather1"));
    assert_tensor_equal(pt_scatter(x, 1, G("iu"), src), G("scatter1"));
    assert_tensor_equal(pt_scatter_scalar(x, 1, G("iu"), 2.5), G("scatter_val1"));
    assert_tensor_close(pt_scatter_add(x, 1, G("i"), src), G("scatter_add1"), 1e-6, 1e-6);
    pt_tensor *y = pt_clone(x);
    assert_int_equal(pt_scatter_add_(y, 1, G("i"), src), PT_OK);
    assert_tensor_close(y, G("scatter_add1"), 1e-6, 1e-6);
    pt_release(y);
    /* the backward of gather scatters the gradient through the same int32 index */
    pt_tensor *xg = pt_clone(x);
    pt_set_requires_grad(xg, true);
    pt_tensor *out = pt_gather(xg, 1, G("i"));
    assert_int_equal(pt_backward(out, G("gather1_grad_out"), false, false), PT_OK);
    assert_tensor_close(pt_grad(xg), G("gather1_grad_x"), 1e-6, 1e-6);
    pt_release(out);
    pt_release(xg);
    const pt_dtype refused[4] = {PT_INT16, PT_INT8, PT_UINT8, PT_BOOL};
    for (int k = 0; k < 4; k++) {
        pt_tensor *bad = pt_zeros(PT_SHAPE(3, 3), refused[k], pt_cpu());
        assert_pt_error(pt_gather(x, 1, bad), PT_ERR_DTYPE,
                        "pt_gather: expected an int64 or int32");
        assert_pt_error(pt_scatter(x, 1, bad, src), PT_ERR_DTYPE, "pt_scatter");
        assert_pt_error(pt_scatter_add(x, 1, bad, src), PT_ERR_DTYPE, "pt_scatter_add");
        assert_pt_error(pt_index_select(x, 1, pt_reshape(bad, PT_SHAPE(9))), PT_ERR_DTYPE,
                        "pt_index_select");
        pt_release(bad);
    }
#undef G
    fx_close(f32);
}

int main(void)
{
    fx = fx_open("index");
    const struct CMUnitTest tests[] = {
        T(test_topk_bool_refused),
        T(test_int32_index_gather_scatter),
        T(test_index_select),
        T(test_index_select_errors),
        T(test_embedding),
        T(test_embedding_large_threads),
        T(test_gather),
        T(test_scatter),
        T(test_index_add),
        T(test_masked_fill_select),
        T(test_advanced_indexing),
        T(test_index_put),
        T(test_nonzero),
        T(test_sort_topk),
        T(test_sort_large_threads),
        T(test_unique),
        T(test_one_hot),
        T(test_zero_dim_and_dtypes),
        T(test_gather_large_threads),
        T(test_index_add_large_threads),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
