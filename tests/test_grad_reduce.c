/* Autograd of the reduce family: central-difference gradchecks (float64) of every
 * differentiable reduction over several dims/keepdim combinations and non-contiguous inputs,
 * gradgradchecks of the second-order ones, PyTorch's subgradients where the functions are not
 * differentiable (ties, zero norms, zero std; fixtures from tests/fixtures/gen/grad_reduce.py),
 * ops that must not record, and the saved-tensor version check. */
#include "grad_reduce_check.h"

static pt_fixture *fx;

typedef enum op_kind {
    OP_SUM,
    OP_SUM_DIM,
    OP_MEAN,
    OP_MEAN_DIM,
    OP_PROD,
    OP_PROD_DIM,
    OP_MAX,
    OP_MIN,
    OP_MAX_DIM,
    OP_MIN_DIM,
    OP_AMAX,
    OP_AMIN,
    OP_VAR,
    OP_STD,
    OP_NORM,
    OP_LOGSUMEXP,
    OP_CUMSUM,
    OP_CUMPROD,
    OP_SOFTMAX,
    OP_LOG_SOFTMAX,
} op_kind;

/* One reduction call: the op, its dims, keepdim and its number argument (correction or p). */
typedef struct rop {
    op_kind kind;
    int ndims;
    int64_t dims[4];
    bool keepdim;
    double arg;
} rop;

static pt_tensor *apply(pt_tensor *const *x, const void *c)
{
    const rop *o = c;
    const pt_tensor *t = x[0];
    int64_t d0 = o->dims[0];
    switch (o->kind) {
    case OP_SUM: return pt_sum(t);
    case OP_SUM_DIM: return pt_sum_dim(t, o->ndims, o->dims, o->keepdim);
    case OP_MEAN: return pt_mean(t);
    case OP_MEAN_DIM: return pt_mean_dim(t, o->ndims, o->dims, o->keepdim);
    case OP_PROD: return pt_prod(t);
    case OP_PROD_DIM: return pt_prod_dim(t, d0, o->keepdim);
    case OP_MAX: return pt_max(t);
    case OP_MIN: return pt_min(t);
    case OP_MAX_DIM: return pt_max_dim(t, d0, o->keepdim, NULL);
    case OP_MIN_DIM: {
        pt_tensor *idx = NULL;
        pt_tensor *r = pt_min_dim(t, d0, o->keepdim, &idx);
        pt_release(idx);
        return r;
    }
    case OP_AMAX: return pt_amax(t, o->ndims, o->dims, o->keepdim);
    case OP_AMIN: return pt_amin(t, o->ndims, o->dims, o->keepdim);
    case OP_VAR: return pt_var(t, o->ndims, o->dims, (int64_t)o->arg, o->keepdim);
    case OP_STD: return pt_std(t, o->ndims, o->dims, (int64_t)o->arg, o->keepdim);
    case OP_NORM: return pt_norm(t, o->arg, o->ndims, o->dims, o->keepdim);
    case OP_LOGSUMEXP: return pt_logsumexp(t, o->ndims, o->dims, o->keepdim);
    case OP_CUMSUM: return pt_cumsum(t, d0);
    case OP_CUMPROD: return pt_cumprod(t, d0);
    case OP_SOFTMAX: return pt_softmax(t, d0);
    case OP_LOG_SOFTMAX: return pt_log_softmax(t, d0);
    }
    return NULL;
}

/* Dim lists tried on a 3-D input (ndims 0 with keepdim = every dim kept). */
static const rop DIMSETS[] = {
    {.ndims = 1, .dims = {1}},     {.ndims = 1, .dims = {-1}, .keepdim = true},
    {.ndims = 2, .dims = {0, 2}},  {.ndims = 2, .dims = {-1, 0}, .keepdim = true},
    {.ndims = 0, .keepdim = true}, {.ndims = 3, .dims = {0, 1, 2}},
};
#define N_DIMSETS (int)(sizeof DIMSETS / sizeof *DIMSETS)

/* Distinct values (no ties: max/min are differentiable there), away from zero. */
static pt_tensor *input3(uint64_t seed)
{
    pt_tensor *t = gc_rand(3, (const int64_t[]){2, 3, 4}, seed, 0.0);
    double *p = pt_data_ptr(t);
    for (int64_t i = 0; i < pt_numel(t); i++)
        p[i] = (p[i] >= 0 ? 0.3 : -0.3) + p[i] + 0.001 * (double)i;
    return t;
}

/* gradcheck of o on the same values contiguous and non-contiguous. */
static void check_both_layouts(const char *what, const rop *o, const pt_tensor *vals)
{
    for (int nc = 0; nc < 2; nc++) {
        pt_tensor *x = gc_leaf(vals, nc);
        char name[160];
        snprintf(name, sizeof name, "%s kind %d ndims %d dim0 %lld keepdim %d arg %g %s", what,
                 (int)o->kind, o->ndims, (long long)o->dims[0], o->keepdim, o->arg,
                 nc ? "noncontig" : "contig");
        gc_check(name, apply, o, 1, &x);
        pt_release(x);
    }
}

/* Every dim set of DIMSETS with op `kind` (arg for var/std/norm). */
static void check_dimsets(op_kind kind, double arg, const pt_tensor *vals)
{
    for (int i = 0; i < N_DIMSETS; i++) {
        rop o = DIMSETS[i];
        o.kind = kind;
        o.arg = arg;
        check_both_layouts("dims", &o, vals);
    }
}

static void test_sum_mean(void **state)
{
    (void)state;
    pt_tensor *v = input3(1);
    check_dimsets(OP_SUM_DIM, 0, v);
    check_dimsets(OP_MEAN_DIM, 0, v);
    check_both_layouts("sum", &(rop){.kind = OP_SUM}, v);
    check_both_layouts("mean", &(rop){.kind = OP_MEAN}, v);
    pt_tensor *x = gc_leaf(v, false);
    pt_tensor *y = pt_sum(x);
    assert_string_equal(pt_grad_fn_name(y), "sum");
    pt_release(y);
    /* 0-dim input */
    pt_tensor *s = pt_scalar_tensor(1.5, PT_FLOAT64, pt_cpu());
    pt_tensor *xs = gc_leaf(s, false);
    gc_check("sum 0-dim", apply, &(rop){.kind = OP_SUM}, 1, &xs);
    gc_check("mean 0-dim", apply, &(rop){.kind = OP_MEAN}, 1, &xs);
    pt_release(s);
    pt_release(xs);
    pt_release(x);
    pt_release(v);
}

static void test_prod(void **state)
{
    (void)state;
    pt_tensor *v = input3(2);
    check_both_layouts("prod", &(rop){.kind = OP_PROD}, v);
    for (int d = -1; d < 3; d++)
        for (int k = 0; k < 2; k++)
            check_both_layouts("prod_dim", &(rop){.kind = OP_PROD_DIM, .dims = {d}, .keepdim = k},
                               v);
    /* zeros: one zero in some slices, two in others (smooth in every element, so central
     * differences apply) */
    double *p = pt_data_ptr(v);
    p[0] = 0;  /* [0,0,0] */
    p[5] = 0;  /* [0,1,1] */
    p[6] = 0;  /* [0,1,2] */
    p[13] = 0; /* [1,0,1] */
    for (int d = 0; d < 3; d++)
        check_both_layouts("prod_dim zeros", &(rop){.kind = OP_PROD_DIM, .dims = {d}}, v);
    pt_tensor *small = gc_rand(2, (const int64_t[]){2, 3}, 5, 1.0);
    double *q = pt_data_ptr(small);
    q[4] = 0;
    check_both_layouts("prod one zero", &(rop){.kind = OP_PROD}, small);
    q[1] = 0;
    check_both_layouts("prod two zeros", &(rop){.kind = OP_PROD}, small);
    pt_release(small);
    pt_release(v);
}

static void test_max_min(void **state)
{
    (void)state;
    pt_tensor *v = input3(3);
    check_both_layouts("max", &(rop){.kind = OP_MAX}, v);
    check_both_layouts("min", &(rop){.kind = OP_MIN}, v);
    check_dimsets(OP_AMAX, 0, v);
    check_dimsets(OP_AMIN, 0, v);
    for (int d = -1; d < 3; d++)
        for (int k = 0; k < 2; k++) {
            check_both_layouts("max_dim", &(rop){.kind = OP_MAX_DIM, .dims = {d}, .keepdim = k}, v);
            check_both_layouts("min_dim", &(rop){.kind = OP_MIN_DIM, .dims = {d}, .keepdim = k}, v);
        }
    /* the index output never requires grad */
    pt_tensor *x = gc_leaf(v, false), *idx = NULL;
    pt_tensor *m = pt_max_dim(x, 1, false, &idx);
    assert_true(pt_requires_grad(m));
    assert_false(pt_requires_grad(idx));
    assert_string_equal(pt_grad_fn_name(m), "max_dim");
    pt_release(m);
    pt_release(idx);
    pt_release(x);
    pt_release(v);
}

static void test_var_std(void **state)
{
    (void)state;
    pt_tensor *v = input3(4);
    for (int c = 0; c < 3; c++) {
        check_dimsets(OP_VAR, c, v);
        check_dimsets(OP_STD, c, v);
    }
    pt_release(v);
}

static void test_norm(void **state)
{
    (void)state;
    pt_tensor *v = input3(5);
    const double ps[] = {2, 1, INFINITY, -INFINITY, 3, 1.5, 0.5, 4.5};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        check_dimsets(OP_NORM, ps[i], v);
    /* p = 0 counts non-zeros: zero gradient */
    pt_tensor *x = gc_leaf(v, false);
    pt_tensor *y = pt_norm(x, 0, 0, NULL, false);
    pt_tensor *g = NULL;
    assert_int_equal(pt_autograd_grad(1, &y, NULL, 1, &x, false, false, false, &g), PT_OK);
    pt_tensor *z = pt_zeros_like(x);
    assert_tensor_equal(g, z);
    pt_release(z);
    pt_release(g);
    pt_release(y);
    pt_release(x);
    pt_release(v);
}

static void test_logsumexp(void **state)
{
    (void)state;
    pt_tensor *v = input3(6);
    check_dimsets(OP_LOGSUMEXP, 0, v);
    pt_release(v);
}

static void test_cumsum_cumprod(void **state)
{
    (void)state;
    pt_tensor *v = input3(7);
    for (int d = -3; d < 3; d++) {
        check_both_layouts("cumsum", &(rop){.kind = OP_CUMSUM, .dims = {d}}, v);
        check_both_layouts("cumprod", &(rop){.kind = OP_CUMPROD, .dims = {d}}, v);
    }
    /* zeros: first, middle, last position, and two zeros in one slice */
    double *p = pt_data_ptr(v);
    p[0] = 0;
    p[6] = 0;
    p[11] = 0;
    p[13] = 0;
    p[15] = 0;
    p[21] = 0;
    for (int d = 0; d < 3; d++)
        check_both_layouts("cumprod zeros", &(rop){.kind = OP_CUMPROD, .dims = {d}}, v);
    pt_tensor *s = pt_scalar_tensor(0.7, PT_FLOAT64, pt_cpu());
    pt_tensor *xs = gc_leaf(s, false);
    gc_check("cumsum 0-dim", apply, &(rop){.kind = OP_CUMSUM}, 1, &xs);
    gc_check("cumprod 0-dim", apply, &(rop){.kind = OP_CUMPROD}, 1, &xs);
    pt_release(xs);
    pt_release(s);
    pt_release(v);
}

static void test_softmax(void **state)
{
    (void)state;
    pt_tensor *v = input3(8);
    for (int d = -1; d < 3; d++) {
        check_both_layouts("softmax", &(rop){.kind = OP_SOFTMAX, .dims = {d}}, v);
        check_both_layouts("log_softmax", &(rop){.kind = OP_LOG_SOFTMAX, .dims = {d}}, v);
    }
    pt_release(v);
}

/* Non-differentiable points: PyTorch's gradients from the fixture. */
static void fixture_case(const char *name, const rop *o)
{
    char key[96];
    snprintf(key, sizeof key, "%s.x", name);
    pt_tensor *xv = fx_get(fx, key);
    snprintf(key, sizeof key, "%s.v", name);
    pt_tensor *v = fx_get(fx, key);
    snprintf(key, sizeof key, "%s.g", name);
    pt_tensor *want = fx_get(fx, key);
    for (int nc = 0; nc < 2; nc++) {
        pt_tensor *x = gc_leaf(xv, nc);
        pt_tensor *y = apply(&x, o);
        pt_tensor *g = NULL;
        pt_status st = pt_autograd_grad(1, &y, &v, 1, &x, false, false, false, &g);
        if (st != PT_OK)
            fail_msg("%s: %s", name, pt_last_error());
        assert_tensor_close(g, want, 1e-12, 1e-12);
        pt_release(g);
        pt_release(y);
        pt_release(x);
    }
    pt_release(xv);
    pt_release(v);
    pt_release(want);
}

static void test_subgradients(void **state)
{
    (void)state;
    fixture_case("max_all", &(rop){.kind = OP_MAX});
    fixture_case("min_all", &(rop){.kind = OP_MIN});
    fixture_case("amax_1", &(rop){.kind = OP_AMAX, .ndims = 1, .dims = {1}});
    fixture_case("amin_0k", &(rop){.kind = OP_AMIN, .ndims = 1, .dims = {0}, .keepdim = true});
    fixture_case("amax_all", &(rop){.kind = OP_AMAX, .ndims = 2, .dims = {0, 1}});
    fixture_case("max_dim_1", &(rop){.kind = OP_MAX_DIM, .dims = {1}});
    fixture_case("min_dim_0k", &(rop){.kind = OP_MIN_DIM, .dims = {0}, .keepdim = true});
    const struct {
        const char *name;
        double p;
    } norms[] = {{"norm_2", 2}, {"norm_1", 1},     {"norm_inf", INFINITY}, {"norm_ninf", -INFINITY},
                 {"norm_3", 3}, {"norm_1p5", 1.5}, {"norm_0p5", 0.5},      {"norm_0", 0}};
    for (size_t i = 0; i < sizeof norms / sizeof *norms; i++)
        fixture_case(norms[i].name,
                     &(rop){.kind = OP_NORM, .ndims = 1, .dims = {1}, .arg = norms[i].p});
    fixture_case("norm_all0", &(rop){.kind = OP_NORM, .arg = 2});
    fixture_case("std_const", &(rop){.kind = OP_STD, .ndims = 1, .dims = {1}, .arg = 1});
    fixture_case("prod_all_1zero", &(rop){.kind = OP_PROD});
    fixture_case("prod_all_2zero", &(rop){.kind = OP_PROD});
    fixture_case("prod_dim1", &(rop){.kind = OP_PROD_DIM, .dims = {1}});
    fixture_case("prod_dim0k", &(rop){.kind = OP_PROD_DIM, .dims = {0}, .keepdim = true});
    fixture_case("cumprod_1", &(rop){.kind = OP_CUMPROD, .dims = {1}});
    fixture_case("cumprod_0", &(rop){.kind = OP_CUMPROD, .dims = {0}});
}

/* argmax/argmin/all/any, integer inputs and no-grad mode record nothing. */
static void test_not_recorded(void **state)
{
    (void)state;
    pt_tensor *v = input3(9);
    pt_tensor *x = gc_leaf(v, false);
    pt_tensor *r[] = {pt_argmax(x, 1, false),
                      pt_argmin(x, 0, true),
                      pt_argmax_all(x),
                      pt_argmin_all(x),
                      pt_all(x),
                      pt_any_dim(x, 1, false)};
    for (size_t i = 0; i < sizeof r / sizeof *r; i++) {
        assert_non_null(r[i]);
        assert_false(pt_requires_grad(r[i]));
        assert_null(pt_grad_fn_name(r[i]));
        pt_release(r[i]);
    }
    pt_no_grad_begin();
    pt_tensor *s = pt_softmax(x, 1), *m = pt_max_dim(x, 2, false, NULL);
    pt_no_grad_end();
    assert_false(pt_requires_grad(s));
    assert_false(pt_requires_grad(m));
    pt_release(s);
    pt_release(m);
    pt_tensor *xi = pt_to_dtype(v, PT_INT64);
    pt_tensor *si = pt_sum(xi), *ci = pt_cumsum(xi, 0);
    assert_false(pt_requires_grad(si));
    assert_false(pt_requires_grad(ci));
    pt_release(si);
    pt_release(ci);
    pt_release(xi);
    pt_release(x);
    pt_release(v);
}

/* A saved output modified in place makes backward fail with a clear error. */
static void test_version_check(void **state)
{
    (void)state;
    pt_tensor *v = input3(10);
    pt_tensor *x = gc_leaf(v, false);
    pt_tensor *y = pt_softmax(x, 1);
    assert_string_equal(pt_grad_fn_name(y), "softmax");
    assert_int_equal(pt_fill_(y, 0.5), PT_OK);
    pt_tensor *w = pt_ones_like(y), *g = NULL;
    pt_status st = pt_autograd_grad(1, &y, &w, 1, &x, false, false, false, &g);
    assert_pt_status_error(st, PT_ERR_RUNTIME, "modified by an in-place operation");
    assert_null(g);
    pt_release(w);
    pt_release(y);
    /* a saved input (var saves x) */
    pt_tensor *xc = pt_clone(v);
    pt_requires_grad_(xc, true);
    pt_tensor *z = pt_var(xc, 1, (const int64_t[]){0}, 1, false);
    pt_tensor *xv = pt_detach(xc);
    assert_int_equal(pt_fill_(xv, 1.0), PT_OK);
    pt_tensor *w2 = pt_ones_like(z);
    st = pt_autograd_grad(1, &z, &w2, 1, &xc, false, false, false, &g);
    assert_pt_status_error(st, PT_ERR_RUNTIME, "modified by an in-place operation");
    pt_release(w2);
    pt_release(xv);
    pt_release(z);
    pt_release(xc);
    pt_release(x);
    pt_release(v);
}

/* float32/float16 inputs get gradients of their own dtype, equal to the float64 ones up to
 * rounding; empty inputs get empty gradients. */
static void test_dtypes_and_empty(void **state)
{
    (void)state;
    pt_tensor *v = input3(12);
    const rop ops[] = {
        {.kind = OP_SUM_DIM, .ndims = 1, .dims = {1}},
        {.kind = OP_VAR, .ndims = 1, .dims = {2}, .arg = 1},
        {.kind = OP_SOFTMAX, .dims = {1}},
        {.kind = OP_AMAX, .ndims = 1, .dims = {0}},
        {.kind = OP_NORM, .ndims = 0, .arg = 2},
        {.kind = OP_CUMPROD, .dims = {2}},
    };
    const pt_dtype dts[] = {PT_FLOAT32, PT_FLOAT16};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        pt_tensor *x64 = gc_leaf(v, false);
        pt_tensor *y64 = apply(&x64, &ops[i]);
        pt_tensor *w64 = pt_ones_like(y64), *g64 = NULL;
        assert_int_equal(pt_autograd_grad(1, &y64, &w64, 1, &x64, false, false, false, &g64),
                         PT_OK);
        for (size_t d = 0; d < 2; d++) {
            pt_tensor *x = pt_to_dtype(v, dts[d]);
            pt_requires_grad_(x, true);
            pt_tensor *y = apply(&x, &ops[i]);
            pt_tensor *w = pt_ones_like(y), *g = NULL;
            assert_int_equal(pt_autograd_grad(1, &y, &w, 1, &x, false, false, false, &g), PT_OK);
            assert_int_equal(pt_dtype_of(g), dts[d]);
            /* float16 keeps ~3 significant digits through the forward and the formula */
            double tol = dts[d] == PT_FLOAT32 ? 1e-5 : 2e-2;
            assert_tensor_close_any_dtype(g, g64, tol, tol);
            pt_release(g);
            pt_release(w);
            pt_release(y);
            pt_release(x);
        }
        pt_release(g64);
        pt_release(w64);
        pt_release(y64);
        pt_release(x64);
    }
    pt_release(v);
    /* empty */
    pt_tensor *e = pt_zeros(2, (const int64_t[]){0, 3}, PT_FLOAT64, pt_cpu());
    pt_requires_grad_(e, true);
    pt_tensor *outs[] = {pt_sum(e), pt_mean_dim(e, 1, (const int64_t[]){1}, false), pt_cumsum(e, 0),
                         pt_softmax(e, 1), pt_prod_dim(e, 0, false)};
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
        pt_tensor *w = pt_ones_like(outs[i]), *g = NULL;
        assert_int_equal(pt_autograd_grad(1, &outs[i], &w, 1, &e, false, false, false, &g), PT_OK);
        assert_shape(g, 0, 3);
        pt_release(g);
        pt_release(w);
        pt_release(outs[i]);
    }
    pt_release(e);
}

/* ---- second order ------------------------------------------------------------------------ */

static void test_gradgrad(void **state)
{
    (void)state;
    GG_REQUIRE();
    pt_tensor *v = input3(11);
    const rop ops[] = {
        {.kind = OP_SUM},
        {.kind = OP_SUM_DIM, .ndims = 1, .dims = {1}},
        {.kind = OP_MEAN},
        {.kind = OP_MEAN_DIM, .ndims = 2, .dims = {0, 2}, .keepdim = true},
        {.kind = OP_VAR, .ndims = 1, .dims = {-1}, .arg = 1},
        {.kind = OP_VAR, .ndims = 0, .arg = 0},
        {.kind = OP_STD, .ndims = 1, .dims = {1}, .arg = 1},
        {.kind = OP_SOFTMAX, .dims = {1}},
        {.kind = OP_SOFTMAX, .dims = {-1}},
        {.kind = OP_LOG_SOFTMAX, .dims = {0}},
        {.kind = OP_LOG_SOFTMAX, .dims = {2}},
        {.kind = OP_LOGSUMEXP, .ndims = 1, .dims = {1}},
        {.kind = OP_LOGSUMEXP, .ndims = 0, .keepdim = true},
        {.kind = OP_PROD_DIM, .dims = {1}},
        {.kind = OP_CUMSUM, .dims = {2}},
        {.kind = OP_CUMPROD, .dims = {1}},
        {.kind = OP_NORM, .ndims = 1, .dims = {1}, .arg = 2},
        {.kind = OP_NORM, .ndims = 2, .dims = {0, 2}, .arg = 3},
        {.kind = OP_NORM, .ndims = 1, .dims = {2}, .arg = 1.5},
        {.kind = OP_NORM, .ndims = 0, .arg = INFINITY},
        {.kind = OP_NORM, .ndims = 1, .dims = {0}, .arg = 1},
        {.kind = OP_AMAX, .ndims = 1, .dims = {1}},
        {.kind = OP_MAX_DIM, .dims = {2}},
    };
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        for (int nc = 0; nc < 2; nc++) {
            pt_tensor *x = gc_leaf(v, nc);
            char name[96];
            snprintf(name, sizeof name, "op %zu %s", i, nc ? "noncontig" : "contig");
            gg_check(name, apply, &ops[i], 1, &x);
            pt_release(x);
        }
    }
    /* zeros: one and two per slice (cumprod switches to its twice-differentiable form) */
    double *p = pt_data_ptr(v);
    p[0] = p[5] = p[6] = p[13] = p[15] = 0;
    const rop zops[] = {
        {.kind = OP_CUMPROD, .dims = {1}},  {.kind = OP_CUMPROD, .dims = {2}},
        {.kind = OP_CUMPROD, .dims = {0}},  {.kind = OP_PROD_DIM, .dims = {2}},
        {.kind = OP_PROD_DIM, .dims = {1}}, {.kind = OP_PROD},
    };
    for (size_t i = 0; i < sizeof zops / sizeof *zops; i++) {
        pt_tensor *x = gc_leaf(v, i % 2);
        char name[96];
        snprintf(name, sizeof name, "zeros op %zu", i);
        gg_check(name, apply, &zops[i], 1, &x);
        pt_release(x);
    }
    pt_release(v);
}

int main(void)
{
    fx = fx_open("grad_reduce");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sum_mean, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_prod, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_max_min, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_var_std, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_norm, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_logsumexp, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cumsum_cumprod, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_softmax, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_subgradients, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_not_recorded, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_version_check, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dtypes_and_empty, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gradgrad, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
