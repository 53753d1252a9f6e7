/* Autograd tests of the index family: central-difference gradient checks (float64) of every
 * differentiable op with duplicate indices (accumulation), negative dims, non-contiguous
 * inputs and broadcasting masks; the self/src split of scatter and index_put; in-place
 * variants on non-leaves; non-differentiable results; second derivatives of a few ops. */
#include "grad_check.h"

enum {
    OP_INDEX_SELECT,
    OP_GATHER,
    OP_SCATTER,
    OP_SCATTER_SCALAR,
    OP_SCATTER_ADD,
    OP_INDEX_ADD,
    OP_MASKED_FILL,
    OP_MASKED_FILL_TENSOR,
    OP_MASKED_SELECT,
    OP_INDEX,
    OP_INDEX_MASK,
    OP_INDEX_PUT,
    OP_INDEX_PUT_ACC,
    OP_SORT,
    OP_TOPK,
    OP_EMBEDDING,
    OP_EMBEDDING_PAD,
    OP_SCATTER_INPLACE,
    OP_INDEX_ADD_INPLACE,
    OP_MASKED_FILL_INPLACE,
    OP_INDEX_PUT_INPLACE,
    OP_SCATTER_ADD_INPLACE,
    OP_SCATTER_SCALAR_INPLACE,
    OP_MASKED_FILL_SCALAR_INPLACE
};

typedef struct case_args {
    int op;
    int64_t dim;
    pt_tensor *idx, *idx2, *mask;
} case_args;

static pt_tensor *i64(int nd, const int64_t *shape, const int64_t *v)
{
    return pt_from_data(v, nd, shape, PT_INT64, pt_cpu());
}

static pt_tensor *bools(int nd, const int64_t *shape, const bool *v)
{
    return pt_from_data(v, nd, shape, PT_BOOL, pt_cpu());
}

/* A non-leaf copy of x (x[:] through an index_select with all positions) for in-place ops. */
static pt_tensor *nonleaf(pt_tensor *x)
{
    int64_t n = pt_shape(x)[0];
    pt_tensor *all = pt_arange(0, (double)n, 1, PT_INT64, pt_cpu());
    pt_tensor *r = pt_index_select(x, 0, all);
    pt_release(all);
    return r;
}

static pt_tensor *index_op(pt_tensor *const *in, void *user)
{
    const case_args *c = user;
    pt_tensor *x = in[0], *r = NULL, *tmp = NULL;
    pt_status st;
    switch (c->op) {
    case OP_INDEX_SELECT: return pt_index_select(x, c->dim, c->idx);
    case OP_GATHER: return pt_gather(x, c->dim, c->idx);
    case OP_SCATTER: return pt_scatter(x, c->dim, c->idx, in[1]);
    case OP_SCATTER_SCALAR: return pt_scatter_scalar(x, c->dim, c->idx, 2.5);
    case OP_SCATTER_ADD: return pt_scatter_add(x, c->dim, c->idx, in[1]);
    case OP_INDEX_ADD: return pt_index_add(x, c->dim, c->idx, in[1], 2.0);
    case OP_MASKED_FILL: return pt_masked_fill(x, c->mask, -3.0);
    case OP_MASKED_FILL_TENSOR: return pt_masked_fill_tensor(x, c->mask, in[1]);
    case OP_MASKED_SELECT: return pt_masked_select(x, c->mask);
    case OP_INDEX: {
        const pt_tensor *ix[3] = {c->idx, NULL, c->idx2};
        return pt_index(x, 3, ix);
    }
    case OP_INDEX_MASK: {
        const pt_tensor *ix[1] = {c->mask};
        return pt_index(x, 1, ix);
    }
    case OP_INDEX_PUT:
    case OP_INDEX_PUT_ACC: {
        const pt_tensor *ix[2] = {c->idx, c->idx2};
        return pt_index_put(x, 2, ix, in[1], c->op == OP_INDEX_PUT_ACC);
    }
    case OP_SORT: return pt_sort(x, c->dim, true, true, NULL);
    case OP_TOPK: {
        pt_tensor *ind = NULL;
        r = pt_topk(x, 2, c->dim, false, true, &ind);
        assert_non_null(ind);
        assert_false(pt_requires_grad(ind));
        pt_release(ind);
        return r;
    }
    case OP_EMBEDDING: return pt_embedding(x, c->idx);
    case OP_EMBEDDING_PAD: {
        pt_embedding_opts o = {.has_padding_idx = true, .padding_idx = -1};
        return pt_embedding_ex(x, c->idx, &o);
    }
    case OP_SCATTER_INPLACE:
        tmp = nonleaf(x);
        st = pt_scatter_(tmp, c->dim, c->idx, in[1]);
        break;
    case OP_INDEX_ADD_INPLACE:
        tmp = nonleaf(x);
        st = pt_index_add_(tmp, c->dim, c->idx, in[1], -1.5);
        break;
    case OP_MASKED_FILL_INPLACE:
        tmp = nonleaf(x);
        st = pt_masked_fill_tensor_(tmp, c->mask, in[1]);
        break;
    case OP_SCATTER_ADD_INPLACE:
        tmp = nonleaf(x);
        st = pt_scatter_add_(tmp, c->dim, c->idx, in[1]);
        break;
    case OP_SCATTER_SCALAR_INPLACE:
        tmp = nonleaf(x);
        st = pt_scatter_scalar_(tmp, c->dim, c->idx, 7.0);
        break;
    case OP_MASKED_FILL_SCALAR_INPLACE:
        tmp = nonleaf(x);
        st = pt_masked_fill_(tmp, c->mask, 7.0);
        break;
    default: {
        tmp = nonleaf(x);
        const pt_tensor *ix[2] = {c->idx, c->idx2};
        st = pt_index_put_(tmp, 2, ix, in[1], true);
        break;
    }
    }
    if (st != PT_OK)
        fail_msg("in-place op failed: %s", pt_last_error());
    return tmp;
}

static pt_tensor *noncontig(pt_tensor *x)
{
    pt_tensor *y = pt_test_noncontig(x);
    pt_release(x);
    return y;
}

/* Gradchecks with inputs of the given shapes (NULL shape: 0-dim), contiguous then strided. */
static void check(const char *what, case_args c, int n, const int64_t shapes[][4], const int *nds)
{
    for (int nc = 0; nc < 2; nc++) {
        pt_tensor *in[4];
        for (int k = 0; k < n; k++) {
            in[k] = gc_randn(nds[k], shapes[k]);
            if (nc && nds[k] > 0)
                in[k] = noncontig(in[k]);
        }
        char label[96];
        snprintf(label, sizeof label, "%s%s", what, nc ? " (non-contiguous)" : "");
        gc_gradcheck(index_op, &c, n, in, label);
        for (int k = 0; k < n; k++)
            pt_release(in[k]);
    }
}

static void test_index_select_gather(void **state)
{
    (void)state;
    case_args c = {OP_INDEX_SELECT, -1, i64(PT_SHAPE(5), (int64_t[]){2, 0, 2, 3, 2}), 0, 0};
    check("index_select dup", c, 1, (const int64_t[][4]){{3, 4}}, (int[]){2});
    c.dim = 0;
    check("index_select dim 0", c, 1, (const int64_t[][4]){{4, 2}}, (int[]){2});
    pt_release(c.idx);
    case_args g = {OP_GATHER, -2, i64(PT_SHAPE(2, 3), (int64_t[]){0, 2, 2, 1, 1, 0}), 0, 0};
    check("gather dup", g, 1, (const int64_t[][4]){{3, 4}}, (int[]){2});
    g.dim = 1;
    check("gather dim 1", g, 1, (const int64_t[][4]){{2, 3}}, (int[]){2});
    pt_release(g.idx);
}

static void test_scatter_family(void **state)
{
    (void)state;
    /* unique positions per column: the src gradient is well defined */
    case_args c = {OP_SCATTER, 0, i64(PT_SHAPE(2, 3), (int64_t[]){1, 0, 3, 3, 2, 0}), 0, 0};
    const int64_t sh[][4] = {{4, 3}, {2, 4}};
    check("scatter", c, 2, sh, (int[]){2, 2});
    c.op = OP_SCATTER_SCALAR;
    check("scatter scalar", c, 1, sh, (int[]){2});
    pt_release(c.idx);
    case_args a = {OP_SCATTER_ADD, -1, i64(PT_SHAPE(2, 3), (int64_t[]){1, 1, 3, 0, 0, 0}), 0, 0};
    check("scatter_add dup", a, 2, (const int64_t[][4]){{2, 4}, {3, 3}}, (int[]){2, 2});
    pt_release(a.idx);
    case_args ia = {OP_INDEX_ADD, -2, i64(PT_SHAPE(3), (int64_t[]){1, 0, 1}), 0, 0};
    check("index_add dup", ia, 2, (const int64_t[][4]){{2, 4}, {3, 4}}, (int[]){2, 2});
    pt_release(ia.idx);
}

static void test_masked(void **state)
{
    (void)state;
    bool mv[] = {true, false, true, false};
    case_args c = {OP_MASKED_FILL, 0, 0, 0, bools(PT_SHAPE(4), mv)};
    check("masked_fill", c, 1, (const int64_t[][4]){{3, 4}}, (int[]){2});
    c.op = OP_MASKED_FILL_TENSOR;
    check("masked_fill tensor", c, 2, (const int64_t[][4]){{3, 4}, {0}}, (int[]){2, 0});
    c.op = OP_MASKED_SELECT;
    check("masked_select", c, 1, (const int64_t[][4]){{3, 4}}, (int[]){2});
    pt_release(c.mask);
    /* self broadcast by the mask: its gradient is summed back */
    bool m2[] = {true, false, false, true, true, false};
    case_args b = {OP_MASKED_FILL, 0, 0, 0, bools(PT_SHAPE(2, 3), m2)};
    check("masked_fill broadcast self", b, 1, (const int64_t[][4]){{1, 3}}, (int[]){2});
    b.op = OP_MASKED_SELECT;
    check("masked_select broadcast self", b, 1, (const int64_t[][4]){{3}}, (int[]){1});
    pt_release(b.mask);
}

static void test_advanced_indexing(void **state)
{
    (void)state;
    case_args c = {OP_INDEX, 0, i64(PT_SHAPE(2, 2), (int64_t[]){1, -1, 1, 0}),
                   i64(PT_SHAPE(2), (int64_t[]){0, 3}), NULL};
    check("index dup", c, 1, (const int64_t[][4]){{3, 2, 4}}, (int[]){3});
    pt_release(c.idx);
    pt_release(c.idx2);
    bool mv[] = {true, false, false, true, true, true};
    case_args m = {OP_INDEX_MASK, 0, 0, 0, bools(PT_SHAPE(2, 3), mv)};
    check("index bool mask", m, 1, (const int64_t[][4]){{2, 3, 2}}, (int[]){3});
    pt_release(m.mask);
    /* index_put: values broadcast over the indexed positions */
    case_args p = {OP_INDEX_PUT_ACC, 0, i64(PT_SHAPE(3), (int64_t[]){0, 2, 0}),
                   i64(PT_SHAPE(3), (int64_t[]){1, 1, 1}), NULL};
    check("index_put accumulate dup", p, 2, (const int64_t[][4]){{3, 2, 2}, {2}}, (int[]){3, 1});
    pt_release(p.idx);
    pt_release(p.idx2);
    case_args q = {OP_INDEX_PUT, 0, i64(PT_SHAPE(2), (int64_t[]){2, 0}),
                   i64(PT_SHAPE(2), (int64_t[]){1, 0}), NULL};
    check("index_put", q, 2, (const int64_t[][4]){{3, 2, 2}, {2, 2}}, (int[]){3, 2});
    pt_release(q.idx);
    pt_release(q.idx2);
}

static void test_sort_topk(void **state)
{
    (void)state;
    case_args c = {OP_SORT, -1, 0, 0, 0};
    check("sort", c, 1, (const int64_t[][4]){{3, 5}}, (int[]){2});
    c.dim = 0;
    check("sort dim 0", c, 1, (const int64_t[][4]){{4, 2}}, (int[]){2});
    c.op = OP_TOPK;
    check("topk", c, 1, (const int64_t[][4]){{4, 3}}, (int[]){2});
    c.dim = -1;
    check("topk last", c, 1, (const int64_t[][4]){{2, 5}}, (int[]){2});
}

static void test_embedding(void **state)
{
    (void)state;
    case_args c = {OP_EMBEDDING, 0, i64(PT_SHAPE(2, 3), (int64_t[]){1, 3, 1, 0, 3, 3}), 0, 0};
    check("embedding dup", c, 1, (const int64_t[][4]){{4, 3}}, (int[]){2});
    int32_t i32v[] = {2, 2, 0, 3};
    case_args c32 = {OP_EMBEDDING, 0, pt_from_data(i32v, PT_SHAPE(4), PT_INT32, pt_cpu()), 0, 0};
    check("embedding int32", c32, 1, (const int64_t[][4]){{4, 2}}, (int[]){2});
    pt_release(c32.idx);
    /* padding_idx -1 (row 3): its gradient is zero although it is read */
    c.op = OP_EMBEDDING_PAD;
    pt_tensor *w = gc_randn(PT_SHAPE(4, 3));
    pt_requires_grad_(w, true);
    pt_tensor *out = index_op(&w, &c);
    pt_tensor *go = pt_ones(PT_SHAPE(2, 3, 3), PT_FLOAT64, pt_cpu());
    pt_tensor *g = NULL;
    assert_int_equal(pt_autograd_grad(1, &out, &go, 1, &w, false, false, false, &g), PT_OK);
    /* counts of rows 0..2 (1, 2, 0), row 3 padding */
    double expected[] = {1, 1, 1, 2, 2, 2, 0, 0, 0, 0, 0, 0};
    pt_tensor *e = pt_from_data(expected, PT_SHAPE(4, 3), PT_FLOAT64, pt_cpu());
    assert_tensor_close(g, e, 0, 0);
    pt_release(e);
    pt_release(g);
    pt_release(go);
    pt_release(out);
    pt_release(w);
    pt_release(c.idx);
}

static void test_inplace_variants(void **state)
{
    (void)state;
    case_args c = {OP_SCATTER_INPLACE, 1, i64(PT_SHAPE(2, 2), (int64_t[]){2, 0, 1, 3}), 0, 0};
    check("scatter_", c, 2, (const int64_t[][4]){{3, 4}, {2, 2}}, (int[]){2, 2});
    c.op = OP_SCATTER_ADD_INPLACE;
    check("scatter_add_", c, 2, (const int64_t[][4]){{3, 4}, {2, 3}}, (int[]){2, 2});
    c.op = OP_SCATTER_SCALAR_INPLACE;
    check("scatter_scalar_", c, 1, (const int64_t[][4]){{3, 4}}, (int[]){2});
    pt_release(c.idx);
    case_args a = {OP_INDEX_ADD_INPLACE, 0, i64(PT_SHAPE(3), (int64_t[]){2, 2, 0}), 0, 0};
    check("index_add_", a, 2, (const int64_t[][4]){{3, 2}, {3, 2}}, (int[]){2, 2});
    pt_release(a.idx);
    bool mv[] = {false, true, true};
    case_args m = {OP_MASKED_FILL_INPLACE, 0, 0, 0, bools(PT_SHAPE(3), mv)};
    check("masked_fill_tensor_", m, 2, (const int64_t[][4]){{2, 3}, {0}}, (int[]){2, 0});
    m.op = OP_MASKED_FILL_SCALAR_INPLACE;
    check("masked_fill_", m, 1, (const int64_t[][4]){{2, 3}}, (int[]){2});
    pt_release(m.mask);
    case_args p = {OP_INDEX_PUT_INPLACE, 0, i64(PT_SHAPE(2), (int64_t[]){1, 1}),
                   i64(PT_SHAPE(2), (int64_t[]){0, 0}), NULL};
    check("index_put_", p, 2, (const int64_t[][4]){{2, 3}, {0}}, (int[]){2, 0});
    pt_release(p.idx);
    pt_release(p.idx2);
}

static void test_errors_and_non_differentiable(void **state)
{
    (void)state;
    pt_tensor *x = gc_randn(PT_SHAPE(3, 4));
    pt_requires_grad_(x, true);
    pt_tensor *idx = i64(PT_SHAPE(1, 2), (int64_t[]){0, 1});
    pt_tensor *src = gc_randn(PT_SHAPE(1, 2));
    assert_pt_status_error(pt_scatter_(x, 0, idx, src), PT_ERR_INVALID_ARG, "leaf");
    pt_tensor *mask = pt_ones(PT_SHAPE(4), PT_BOOL, pt_cpu());
    assert_pt_status_error(pt_masked_fill_(x, mask, 0), PT_ERR_INVALID_ARG, "in-place");
    /* a view with history: refused rather than silently leaving the base's history stale */
    pt_tensor *row = pt_select(x, 0, 1);
    pt_tensor *m3 = pt_ones(PT_SHAPE(4), PT_BOOL, pt_cpu());
    assert_pt_status_error(pt_masked_fill_(row, m3, 0), PT_ERR_UNSUPPORTED, "view");
    pt_tensor *tr = pt_transpose(x, 0, 1);
    pt_tensor *c2 = i64(PT_SHAPE(1, 3), (int64_t[]){0, 1, 2});
    pt_tensor *s2 = gc_randn(PT_SHAPE(1, 3));
    assert_pt_status_error(pt_scatter_(tr, 0, c2, s2), PT_ERR_UNSUPPORTED, "view");
    pt_release(row);
    pt_release(m3);
    pt_release(tr);
    pt_release(c2);
    pt_release(s2);
    /* non-differentiable results */
    pt_tensor *as = pt_argsort(x, -1, false);
    pt_tensor *nz = pt_nonzero(x);
    pt_tensor *ind = NULL;
    pt_tensor *v = pt_sort(x, 0, false, true, &ind);
    assert_false(pt_requires_grad(as));
    assert_false(pt_requires_grad(nz));
    assert_false(pt_requires_grad(ind));
    assert_true(pt_requires_grad(v));
    assert_string_equal(pt_grad_fn_name(v), "sort");
    /* saved index modified in place: backward reports the version mismatch */
    pt_tensor *gi = i64(PT_SHAPE(2), (int64_t[]){0, 2});
    pt_tensor *sel = pt_index_select(x, 0, gi);
    pt_tensor *zero = pt_zeros(PT_SHAPE(1), PT_INT64, pt_cpu());
    pt_tensor *pos = i64(PT_SHAPE(1), (int64_t[]){0});
    assert_int_equal(pt_index_put_(gi, 1, (const pt_tensor *const[]){pos}, zero, false), PT_OK);
    pt_tensor *go = pt_ones(PT_SHAPE(2, 4), PT_FLOAT64, pt_cpu());
    assert_pt_status_error(pt_backward(sel, go, false, false), PT_ERR_RUNTIME,
                           "modified by an in-place operation");
    /* no recording in no-grad mode */
    pt_no_grad_begin();
    pt_tensor *ng = pt_gather(x, 0, idx);
    assert_false(pt_requires_grad(ng));
    pt_no_grad_end();
    pt_tensor *owned[] = {x, idx, src, mask, as, nz, ind, v, gi, sel, zero, pos, go, ng};
    for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++)
        pt_release(owned[k]);
}

static void test_second_order(void **state)
{
    (void)state;
    case_args g = {OP_GATHER, 1, i64(PT_SHAPE(2, 3), (int64_t[]){0, 2, 2, 1, 1, 0}), 0, 0};
    pt_tensor *x = gc_randn(PT_SHAPE(2, 4));
    gc_gradgradcheck(index_op, &g, 1, &x, "gather");
    pt_release(x);
    pt_release(g.idx);
    case_args s = {OP_INDEX_SELECT, 0, i64(PT_SHAPE(3), (int64_t[]){1, 1, 0}), 0, 0};
    x = gc_randn(PT_SHAPE(2, 3));
    gc_gradgradcheck(index_op, &s, 1, &x, "index_select");
    pt_release(x);
    pt_release(s.idx);
    case_args p = {OP_INDEX, 0, i64(PT_SHAPE(2), (int64_t[]){1, 1}),
                   i64(PT_SHAPE(2), (int64_t[]){0, 2}), NULL};
    x = gc_randn(PT_SHAPE(2, 2, 3));
    gc_gradgradcheck(index_op, &p, 1, &x, "index");
    pt_release(x);
    pt_release(p.idx);
    pt_release(p.idx2);
    case_args a = {OP_SCATTER_ADD, 0, i64(PT_SHAPE(2, 2), (int64_t[]){1, 0, 1, 1}), 0, 0};
    pt_tensor *in[2] = {gc_randn(PT_SHAPE(2, 2)), gc_randn(PT_SHAPE(2, 2))};
    gc_gradgradcheck(index_op, &a, 2, in, "scatter_add");
    pt_release(in[0]);
    pt_release(in[1]);
    pt_release(a.idx);
}

int main(void)
{
    pt_manual_seed(4321);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_index_select_gather, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_scatter_family, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_masked, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_advanced_indexing, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_sort_topk, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_embedding, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_inplace_variants, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_errors_and_non_differentiable, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_second_order, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
