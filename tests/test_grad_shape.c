/* Autograd tests of the shape family: central-difference gradient checks (float64) of every
 * differentiable view and copy op, with negative dims, non-contiguous inputs, views of views,
 * unused split outputs, and second derivatives of a few (tests/grad_check.h). */
#include "grad_check.h"

enum {
    OP_RESHAPE,
    OP_VIEW,
    OP_FLATTEN,
    OP_UNFLATTEN,
    OP_SQUEEZE,
    OP_SQUEEZE_DIM,
    OP_SQUEEZE_DIMS,
    OP_UNSQUEEZE,
    OP_TRANSPOSE,
    OP_T,
    OP_PERMUTE,
    OP_EXPAND,
    OP_EXPAND_AS,
    OP_NARROW,
    OP_SELECT,
    OP_SLICE,
    OP_DIAGONAL,
    OP_SPLIT,
    OP_SPLIT_SIZES,
    OP_CHUNK,
    OP_UNBIND,
    OP_REPEAT,
    OP_TILE,
    OP_FLIP,
    OP_ROLL,
    OP_ROLL_FLAT,
    OP_TRIL,
    OP_TRIU,
    OP_RESHAPE_COPY,
    OP_VIEW_CHAIN
};

typedef struct case_args {
    int op;
    int64_t a[6];
} case_args;

/* Picks pieces 0 and 2 of a split (piece 1 stays unused: its gradient is zeros). */
static pt_tensor *cat_pieces(int n, pt_tensor **p, int64_t dim)
{
    assert_true(n >= 3);
    const pt_tensor *use[2] = {p[0], p[2]};
    pt_tensor *r = pt_cat(2, use, dim);
    for (int k = 0; k < n; k++)
        pt_release(p[k]);
    free(p);
    return r;
}

static pt_tensor *shape_op(pt_tensor *const *in, void *user)
{
    const case_args *c = user;
    const int64_t *a = c->a;
    pt_tensor *x = in[0], **p = NULL;
    int n;
    switch (c->op) {
    case OP_RESHAPE: return pt_reshape(x, PT_SHAPE(-1, 2, 3));
    case OP_VIEW: return pt_view(x, PT_SHAPE(6, -1));
    case OP_FLATTEN: return pt_flatten(x, a[0], a[1]);
    case OP_UNFLATTEN: return pt_unflatten(x, -1, PT_SHAPE(2, -1));
    case OP_SQUEEZE: return pt_squeeze(x);
    case OP_SQUEEZE_DIM: return pt_squeeze_dim(x, a[0]);
    case OP_SQUEEZE_DIMS: return pt_squeeze_dims(x, PT_SHAPE(-1, 1));
    case OP_UNSQUEEZE: return pt_unsqueeze(x, a[0]);
    case OP_TRANSPOSE: return pt_transpose(x, a[0], a[1]);
    case OP_T: return pt_t(x);
    case OP_PERMUTE: return pt_permute(x, PT_SHAPE(-1, 0, 1));
    case OP_EXPAND: return pt_expand(x, PT_SHAPE(2, 3, -1, 4));
    case OP_EXPAND_AS: {
        pt_tensor *o = pt_zeros(PT_SHAPE(3, 4, 2), PT_FLOAT64, pt_cpu());
        pt_tensor *r = pt_expand_as(x, o);
        pt_release(o);
        return r;
    }
    case OP_NARROW: return pt_narrow(x, a[0], a[1], a[2]);
    case OP_SELECT: return pt_select(x, a[0], a[1]);
    case OP_SLICE: return pt_slice(x, a[0], a[1], a[2], a[3]);
    case OP_DIAGONAL: return pt_diagonal(x, a[0], a[1], a[2]);
    case OP_SPLIT: n = pt_split(x, a[0], a[1], &p); return cat_pieces(n, p, a[1]);
    case OP_SPLIT_SIZES:
        n = pt_split_sizes(x, PT_SHAPE(1, 2, 2), a[1], &p);
        return cat_pieces(n, p, a[1]);
    case OP_CHUNK: n = pt_chunk(x, 3, a[1], &p); return cat_pieces(n, p, a[1]);
    case OP_UNBIND: {
        n = pt_unbind(x, a[1], &p);
        assert_true(n >= 3);
        const pt_tensor *use[2] = {p[2], p[0]};
        pt_tensor *r = pt_stack(2, use, -1);
        for (int k = 0; k < n; k++)
            pt_release(p[k]);
        free(p);
        return r;
    }
    case OP_REPEAT: return pt_repeat(x, PT_SHAPE(2, 1, 3));
    case OP_TILE: return pt_tile(x, PT_SHAPE(3));
    case OP_FLIP: return pt_flip(x, PT_SHAPE(0, -1));
    case OP_ROLL: return pt_roll(x, PT_SHAPE(1, -2), PT_SHAPE(0, -1));
    case OP_ROLL_FLAT: return pt_roll(x, PT_SHAPE(5), 0, NULL);
    case OP_TRIL: return pt_tril(x, a[0]);
    case OP_TRIU: return pt_triu(x, a[0]);
    case OP_RESHAPE_COPY: { /* strides that no view can express: reshape copies */
        pt_tensor *tr = pt_transpose(x, 0, 1);
        pt_tensor *r = pt_reshape(tr, PT_SHAPE(-1));
        assert_false(pt_shares_storage(r, x));
        pt_release(tr);
        return r;
    }
    default: { /* a view of a view of a view */
        pt_tensor *t1 = pt_transpose(x, 0, -1);
        pt_tensor *t2 = pt_slice(t1, 1, 0, PT_SLICE_END, 2);
        pt_tensor *t3 = pt_select(t2, 0, -1);
        pt_tensor *r = pt_diagonal(t3, 0, 0, 1);
        pt_release(t1);
        pt_release(t2);
        pt_release(t3);
        return r;
    }
    }
}

/* Gradchecks op on a fresh input of `shape`, contiguous and non-contiguous. */
static void check_op(const char *what, case_args c, int nd, const int64_t *shape)
{
    for (int nc = 0; nc < 2; nc++) {
        pt_tensor *x = gc_randn(nd, shape);
        if (nc) {
            pt_tensor *y = pt_test_noncontig(x);
            pt_release(x);
            x = y;
        }
        char label[96];
        snprintf(label, sizeof label, "%s%s", what, nc ? " (non-contiguous)" : "");
        gc_gradcheck(shape_op, &c, 1, &x, label);
        pt_release(x);
    }
}

#define CASE(op, ...) ((case_args){op, {__VA_ARGS__}})

static void test_reshaping_views(void **state)
{
    (void)state;
    check_op("reshape", CASE(OP_RESHAPE, 0), PT_SHAPE(3, 4));
    check_op("view", CASE(OP_VIEW, 0), PT_SHAPE(3, 4));
    check_op("reshape copy", CASE(OP_RESHAPE_COPY, 0), PT_SHAPE(3, 4));
    check_op("flatten", CASE(OP_FLATTEN, 1, -1), PT_SHAPE(2, 3, 2));
    check_op("flatten 0-dim", CASE(OP_FLATTEN, 0, -1), 0, NULL);
    check_op("unflatten", CASE(OP_UNFLATTEN, 0), PT_SHAPE(3, 4));
    check_op("squeeze", CASE(OP_SQUEEZE, 0), PT_SHAPE(3, 1, 2, 1));
    check_op("squeeze_dim", CASE(OP_SQUEEZE_DIM, -3), PT_SHAPE(3, 1, 2, 1));
    check_op("squeeze_dims", CASE(OP_SQUEEZE_DIMS, 0), PT_SHAPE(3, 1, 2, 1));
    check_op("unsqueeze", CASE(OP_UNSQUEEZE, -1), PT_SHAPE(3, 2));
    check_op("unsqueeze 0", CASE(OP_UNSQUEEZE, 0), PT_SHAPE(3, 2));
}

static void test_reordering_views(void **state)
{
    (void)state;
    check_op("transpose", CASE(OP_TRANSPOSE, -1, 0), PT_SHAPE(2, 3, 4));
    check_op("t", CASE(OP_T, 0), PT_SHAPE(3, 4));
    check_op("t 1-d", CASE(OP_T, 0), PT_SHAPE(5));
    check_op("permute", CASE(OP_PERMUTE, 0), PT_SHAPE(2, 3, 4));
    check_op("expand", CASE(OP_EXPAND, 0), PT_SHAPE(3, 1, 4));
    check_op("expand_as", CASE(OP_EXPAND_AS, 0), PT_SHAPE(4, 1));
}

static void test_slicing_views(void **state)
{
    (void)state;
    check_op("narrow", CASE(OP_NARROW, -1, -3, 2), PT_SHAPE(3, 5));
    check_op("select", CASE(OP_SELECT, -2, -1), PT_SHAPE(2, 3, 4));
    check_op("slice step 2", CASE(OP_SLICE, 1, -4, PT_SLICE_END, 2), PT_SHAPE(3, 7));
    check_op("slice step 3", CASE(OP_SLICE, 0, 1, 6, 3), PT_SHAPE(7, 2));
    check_op("diagonal", CASE(OP_DIAGONAL, 0, 0, 1), PT_SHAPE(3, 4));
    check_op("diagonal offset 1", CASE(OP_DIAGONAL, 1, -1, -2), PT_SHAPE(2, 3, 4));
    check_op("diagonal offset -1", CASE(OP_DIAGONAL, -1, 0, 2), PT_SHAPE(4, 2, 3));
    check_op("view chain", CASE(OP_VIEW_CHAIN, 0), PT_SHAPE(3, 4, 5));
}

static void test_views_share_storage_and_record(void **state)
{
    (void)state;
    pt_tensor *x = gc_randn(PT_SHAPE(3, 4));
    pt_requires_grad_(x, true);
    pt_tensor *v[] = {pt_transpose(x, 0, 1),   pt_reshape(x, PT_SHAPE(12)),
                      pt_slice(x, 1, 0, 4, 2), pt_select(x, 0, 1),
                      pt_diagonal(x, 0, 0, 1), pt_expand(x, PT_SHAPE(2, 3, 4)),
                      pt_narrow(x, 0, 1, 2),   pt_unsqueeze(x, 0)};
    const char *names[] = {"transpose", "reshape", "slice",  "select",
                           "diagonal",  "expand",  "narrow", "unsqueeze"};
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        assert_true(pt_shares_storage(v[k], x));
        assert_non_null(pt_grad_fn_name(v[k]));
        assert_string_equal(pt_grad_fn_name(v[k]), names[k]);
        pt_release(v[k]);
    }
    /* no recording without grad mode */
    pt_no_grad_begin();
    pt_tensor *u = pt_transpose(x, 0, 1);
    assert_false(pt_requires_grad(u));
    assert_null(pt_grad_fn_name(u));
    pt_release(u);
    pt_no_grad_end();
    pt_release(x);
}

static void test_split_family(void **state)
{
    (void)state;
    check_op("split", CASE(OP_SPLIT, 2, -1), PT_SHAPE(3, 5));
    check_op("split_sizes", CASE(OP_SPLIT_SIZES, 0, 0), PT_SHAPE(5, 2));
    check_op("chunk", CASE(OP_CHUNK, 0, 1), PT_SHAPE(2, 6));
    check_op("unbind", CASE(OP_UNBIND, 0, -2), PT_SHAPE(3, 2));
}

static void test_split_backward_accumulates(void **state)
{
    (void)state;
    /* every piece used: .grad of the input is the sum of the pieces' gradients */
    pt_tensor *x = gc_randn(PT_SHAPE(4, 3));
    pt_requires_grad_(x, true);
    pt_tensor **p = NULL;
    int n = pt_split(x, 3, 0, &p);
    assert_int_equal(n, 2);
    const pt_tensor *both[2] = {p[1], p[0]};
    pt_tensor *s = pt_cat(2, both, 0);
    pt_tensor *ones = pt_ones(PT_SHAPE(4, 3), PT_FLOAT64, pt_cpu());
    assert_int_equal(pt_backward(s, ones, false, false), PT_OK);
    pt_tensor *g = pt_grad(x);
    assert_tensor_close(g, ones, 0, 0);
    for (int k = 0; k < n; k++)
        pt_release(p[k]);
    free(p);
    pt_release(s);
    pt_release(g);
    pt_release(ones);
    pt_release(x);
}

typedef struct cat_args {
    int kind; /* 0 cat, 1 stack */
    int64_t dim;
} cat_args;

static pt_tensor *cat_op(pt_tensor *const *in, void *user)
{
    const cat_args *c = user;
    const pt_tensor *const *ts = (const pt_tensor *const *)in;
    return c->kind ? pt_stack(3, ts, c->dim) : pt_cat(3, ts, c->dim);
}

static pt_tensor *cat_many(pt_tensor *const *in, void *user)
{
    (void)user;
    return pt_cat(11, (const pt_tensor *const *)in, -1);
}

static void test_cat_stack(void **state)
{
    (void)state;
    for (int nc = 0; nc < 2; nc++) {
        pt_tensor *in[3] = {gc_randn(PT_SHAPE(2, 3)), gc_randn(PT_SHAPE(2, 1)),
                            gc_randn(PT_SHAPE(2, 2))};
        if (nc) {
            pt_tensor *y = pt_test_noncontig(in[2]);
            pt_release(in[2]);
            in[2] = y;
        }
        cat_args c = {0, -1};
        gc_gradcheck(cat_op, &c, 3, in, "cat");
        for (int k = 0; k < 3; k++)
            pt_release(in[k]);
    }
    pt_tensor *in[3] = {gc_randn(PT_SHAPE(2, 3)), gc_randn(PT_SHAPE(2, 3)),
                        gc_randn(PT_SHAPE(2, 3))};
    cat_args c = {1, -2};
    gc_gradcheck(cat_op, &c, 3, in, "stack");
    /* one input without grad */
    pt_tensor *nog = gc_randn(PT_SHAPE(2, 3));
    pt_tensor *mix[3] = {in[0], nog, in[2]};
    cat_args c0 = {0, 0};
    pt_tensor *out = cat_op(mix, &c0);
    pt_tensor *grads[3];
    pt_tensor *sel[2] = {in[0], in[2]};
    pt_tensor *w = pt_ones(PT_SHAPE(6, 3), PT_FLOAT64, pt_cpu());
    assert_int_equal(pt_autograd_grad(1, &out, &w, 2, sel, false, false, false, grads), PT_OK);
    assert_tensor_close(grads[0], pt_ones(PT_SHAPE(2, 3), PT_FLOAT64, pt_cpu()), 0, 0);
    pt_release(grads[0]);
    pt_release(grads[1]);
    pt_release(out);
    pt_release(w);
    pt_release(nog);
    for (int k = 0; k < 3; k++)
        pt_release(in[k]);
    /* promoted dtypes: each input's gradient comes back in its own dtype */
    pt_tensor *f32 = pt_ones(PT_SHAPE(2, 2), PT_FLOAT32, pt_cpu());
    pt_tensor *f64 = gc_randn(PT_SHAPE(1, 2));
    pt_requires_grad_(f32, true);
    pt_requires_grad_(f64, true);
    const pt_tensor *pair[2] = {f32, f64};
    pt_tensor *pc = pt_cat(2, pair, 0);
    assert_int_equal(pt_dtype_of(pc), PT_FLOAT64);
    double wv[] = {1, 2, 3, 4, 5, 6};
    pt_tensor *pw = pt_from_data(wv, PT_SHAPE(3, 2), PT_FLOAT64, pt_cpu());
    pt_tensor *pg[2] = {NULL, NULL};
    pt_tensor *pin[2] = {f32, f64};
    assert_int_equal(pt_autograd_grad(1, &pc, &pw, 2, pin, false, false, false, pg), PT_OK);
    float e32[] = {1, 2, 3, 4};
    double e64[] = {5, 6};
    pt_tensor *x32 = pt_from_data(e32, PT_SHAPE(2, 2), PT_FLOAT32, pt_cpu());
    pt_tensor *x64 = pt_from_data(e64, PT_SHAPE(1, 2), PT_FLOAT64, pt_cpu());
    assert_tensor_equal(pg[0], x32);
    assert_tensor_equal(pg[1], x64);
    pt_tensor *pown[] = {f32, f64, pc, pw, pg[0], pg[1], x32, x64};
    for (size_t k = 0; k < sizeof pown / sizeof pown[0]; k++)
        pt_release(pown[k]);
    /* more inputs than a node holds */
    pt_tensor *many[11];
    for (int k = 0; k < 11; k++)
        many[k] = gc_randn(PT_SHAPE(2, 1 + k % 3));
    gc_gradcheck(cat_many, NULL, 11, many, "cat of 11");
    for (int k = 0; k < 11; k++)
        pt_release(many[k]);
}

static void test_copying_ops(void **state)
{
    (void)state;
    check_op("repeat", CASE(OP_REPEAT, 0), PT_SHAPE(2, 3));
    check_op("tile", CASE(OP_TILE, 0), PT_SHAPE(2, 3));
    check_op("flip", CASE(OP_FLIP, 0), PT_SHAPE(3, 4));
    check_op("roll", CASE(OP_ROLL, 0), PT_SHAPE(3, 4));
    check_op("roll flat", CASE(OP_ROLL_FLAT, 0), PT_SHAPE(3, 4));
    check_op("tril", CASE(OP_TRIL, -1), PT_SHAPE(2, 3, 4));
    check_op("triu", CASE(OP_TRIU, 1), PT_SHAPE(4, 3));
}

static void test_second_order(void **state)
{
    (void)state;
    case_args cases[] = {CASE(OP_TRANSPOSE, 0, -1),
                         CASE(OP_RESHAPE, 0),
                         CASE(OP_SLICE, 1, 1, PT_SLICE_END, 2),
                         CASE(OP_SELECT, 0, 1),
                         CASE(OP_DIAGONAL, 1, 0, 1),
                         CASE(OP_NARROW, -1, 1, 2),
                         CASE(OP_FLIP, 0),
                         CASE(OP_TRIL, 0)};
    const int64_t shapes[][2] = {{3, 4}, {3, 4}, {3, 5}, {3, 4}, {3, 4}, {3, 4}, {3, 4}, {3, 3}};
    const char *names[] = {"transpose", "reshape", "slice", "select",
                           "diagonal",  "narrow",  "flip",  "tril"};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        pt_tensor *x = gc_randn(2, shapes[k]);
        gc_gradgradcheck(shape_op, &cases[k], 1, &x, names[k]);
        pt_release(x);
    }
    pt_tensor *in[3] = {gc_randn(PT_SHAPE(2, 3)), gc_randn(PT_SHAPE(2, 1)),
                        gc_randn(PT_SHAPE(2, 2))};
    cat_args c = {0, 1};
    gc_gradgradcheck(cat_op, &c, 3, in, "cat");
    for (int k = 0; k < 3; k++)
        pt_release(in[k]);
}

/* pt_fill_ / pt_zero_ on a view of a tensor with history rebase the base's history, as
 * PyTorch's CopySlices does: the filled positions get no gradient, the others keep theirs
 * (tests/fixtures/gen/grad_inplace_view.py). */
static void test_fill_of_view_rebases_base(void **state)
{
    (void)state;
    pt_fixture *fx = fx_open("grad_inplace_view");
    pt_tensor *x0 = fx_get(fx, "x");
    /* y = 2*x; y[0:2].fill_(5); y.sum().backward() */
    pt_tensor *x = pt_clone(x0);
    pt_requires_grad_(x, true);
    pt_tensor *y = pt_mul_scalar(x, 2.0);
    pt_tensor *v = pt_slice(y, 0, 0, 2, 1);
    assert_int_equal(pt_fill_(v, 5.0), PT_OK);
    assert_tensor_close(y, fx_get(fx, "slice.y"), 0, 0);
    assert_int_equal(pt_backward(pt_sum(y), NULL, false, false), PT_OK);
    assert_tensor_close(pt_grad(x), fx_get(fx, "slice.grad"), 1e-12, 0);
    pt_release(v);
    pt_release(y);
    pt_release(x);
    /* a strided 2-D view zeroed: y = x.view(2,4)^2; y[:, 1::2].zero_(); (y * w).sum() */
    x = pt_clone(x0);
    pt_requires_grad_(x, true);
    pt_tensor *x2 = pt_view(x, PT_SHAPE(2, 4));
    y = pt_mul(x2, x2);
    v = pt_slice(y, 1, 1, 4, 2);
    assert_int_equal(pt_zero_(v), PT_OK);
    assert_tensor_close(y, fx_get(fx, "cols.y"), 1e-12, 0);
    pt_tensor *l = pt_sum(pt_mul(y, fx_get(fx, "cols.w")));
    assert_int_equal(pt_backward(l, NULL, false, false), PT_OK);
    assert_tensor_close(pt_grad(x), fx_get(fx, "cols.grad"), 1e-12, 0);
    pt_release(v);
    pt_release(y);
    pt_release(x2);
    pt_release(x);
    /* the filled view used afterwards: v = y[2:5]; v.fill_(1); (v*3).sum() + y.sum() */
    x = pt_clone(x0);
    pt_requires_grad_(x, true);
    y = pt_mul(x, x);
    v = pt_slice(y, 0, 2, 5, 1);
    assert_int_equal(pt_fill_(v, 1.0), PT_OK);
    l = pt_add(pt_sum(pt_mul_scalar(v, 3.0)), pt_sum(y));
    assert_int_equal(pt_backward(l, NULL, false, false), PT_OK);
    assert_tensor_close(pt_grad(x), fx_get(fx, "used.grad"), 1e-12, 0);
    pt_release(v);
    pt_release(y);
    pt_release(x);
    /* a view of a leaf that requires grad is refused, as in PyTorch */
    x = pt_clone(x0);
    pt_requires_grad_(x, true);
    v = pt_slice(x, 0, 0, 2, 1);
    assert_pt_status_error(pt_fill_(v, 1.0), PT_ERR_INVALID_ARG, "view of a leaf");
    pt_release(v);
    pt_release(x);
    fx_close(fx);
}

/* A view keeps its base alive; a node that saves a view must not keep the base's later
 * history, or y.mul_(y[:, :1]) (y rebased onto a node that saved a view of y; its backward
 * would then fail the version check, as in PyTorch) would be a reference cycle that is never
 * freed. */
static void test_inplace_with_view_input_frees_graph(void **state)
{
    (void)state;
    pt_tensor *x = pt_randn(PT_SHAPE(4, 3), PT_FLOAT64, pt_cpu());
    pt_requires_grad_(x, true);
    size_t live = pt_memory_allocated();
    for (int i = 0; i < 3; i++) {
        pt_scope_begin();
        pt_tensor *y = pt_mul_scalar(x, 2.0);
        pt_tensor *col = pt_slice(y, 1, 0, 1, 1);
        assert_int_equal(pt_mul_(y, col), PT_OK);
        assert_string_equal(pt_grad_fn_name(y), "mul_");
        pt_scope_end();
        assert_int_equal(pt_memory_allocated(), live);
    }
    pt_release(x);
}

int main(void)
{
    pt_manual_seed(1234);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reshaping_views, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_fill_of_view_rebases_base, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_inplace_with_view_input_frees_graph, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_reordering_views, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_slicing_views, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_views_share_storage_and_record, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_split_family, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_split_backward_accumulates, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cat_stack, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_copying_ops, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_second_order, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
