/* Reduce family tests against PyTorch fixtures (tests/fixtures/gen/reduce.py): sum, mean,
 * prod, max/min (all and along a dim with indices), amax/amin, argmax/argmin, var/std, norm,
 * logsumexp, all/any, cumsum, cumprod, softmax, log_softmax over dim/keepdim combinations,
 * every dtype path, contiguous / strided / reversed-dims layouts, NaN and tie rules, stability,
 * the float32 row/column/split fast paths, large sums, empty tensors and error paths. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

/* Dim lists and single dims tried on the 3-D inputs (names match gen/reduce.py). */
static const struct {
    const char *name;
    int ndims;
    int64_t dims[3];
} DIMS[] = {{"all", 0, {0}}, {"0", 1, {0}},      {"1", 1, {1}},        {"2", 1, {2}},
            {"m1", 1, {-1}}, {"0_2", 2, {0, 2}}, {"m1_0", 2, {-1, 0}}, {"1_2", 2, {1, 2}}};
static const struct {
    const char *name;
    int64_t dim;
} SINGLE[] = {{"0", 0}, {"1", 1}, {"2", 2}, {"m1", -1}, {"m3", -3}};
static const char *const INPUTS[] = {"f", "d", "i", "i32", "b", "h", "bf"};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define N_LAYOUTS 3

/* The same values in another layout: 0 contiguous, 1 strided last dim, 2 dims reversed in
 * memory (a transposed buffer). Returns a new reference. */
static pt_tensor *layout(const pt_tensor *t, int which)
{
    if (which == 0 || pt_ndim(t) == 0)
        return pt_clone(t);
    if (which == 1)
        return pt_test_noncontig(t);
    int nd = pt_ndim(t);
    int64_t rshape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        rshape[d] = pt_shape(t)[nd - 1 - d];
    pt_tensor *buf = pt_zeros(nd, rshape, pt_dtype_of(t), pt_cpu());
    for (int d = 0; d < nd; d++)
        stride[d] = pt_stride(buf)[nd - 1 - d];
    pt_tensor *view = pt_as_strided(buf, nd, pt_shape(t), stride, 0);
    assert_int_equal(pt_copy_(view, t), PT_OK);
    pt_release(buf);
    return view;
}

/* Tolerance by input: float32 sums in a different order than PyTorch (1e-5); float64 tight;
 * float16/bfloat16 results may differ by one rounding of the result dtype (PyTorch rounds a
 * float32 accumulator, we round a double one). Integers exact. */
static void check(pt_tensor *got, const char *key, const char *inp)
{
    pt_tensor *exp = fx_get(fx, key);
    double rtol = 0, atol = 0;
    if (!strcmp(inp, "f") || !strcmp(inp, "p")) {
        rtol = 1e-5;
        atol = 1e-6;
    } else if (!strcmp(inp, "d")) {
        rtol = 1e-12;
        atol = 1e-13;
    } else if (!strcmp(inp, "h")) {
        rtol = 1e-3;
        atol = 1e-3;
    } else if (!strcmp(inp, "bf")) {
        rtol = 8e-3;
        atol = 8e-3;
    }
    if (!got)
        fail_msg("%s: %s", key, pt_last_error());
    if (getenv("PT_TEST_VERBOSE"))
        print_message("%s\n", key);
    assert_tensor_close(got, exp, rtol, atol);
    pt_release(got);
    pt_release(exp);
}

static pt_tensor *input(const char *inp, int lay)
{
    char key[32];
    snprintf(key, sizeof key, "in.%s", inp);
    pt_tensor *raw = fx_get(fx, key);
    pt_tensor *t = layout(raw, lay);
    pt_release(raw);
    return t;
}

static void test_sum_mean_amax_amin(void **state)
{
    (void)state;
    char key[64];
    for (size_t a = 0; a < N_OF(INPUTS); a++) {
        const char *inp = INPUTS[a];
        for (int lay = 0; lay < N_LAYOUTS; lay++) {
            pt_tensor *t = input(inp, lay);
            for (size_t d = 0; d < N_OF(DIMS); d++) {
                for (int kd = 0; kd < 2; kd++) {
                    const char *dn = DIMS[d].name;
                    int nd = DIMS[d].ndims;
                    const int64_t *dims = DIMS[d].dims;
                    snprintf(key, sizeof key, "sum.%s.%s.k%d", inp, dn, kd);
                    if (fx_has(fx, key))
                        check(pt_sum_dim(t, nd, dims, kd), key, inp);
                    snprintf(key, sizeof key, "mean.%s.%s.k%d", inp, dn, kd);
                    if (fx_has(fx, key))
                        check(pt_mean_dim(t, nd, dims, kd), key, inp);
                    snprintf(key, sizeof key, "amax.%s.%s.k%d", inp, dn, kd);
                    if (fx_has(fx, key))
                        check(pt_amax(t, nd, dims, kd), key, inp);
                    snprintf(key, sizeof key, "amin.%s.%s.k%d", inp, dn, kd);
                    if (fx_has(fx, key))
                        check(pt_amin(t, nd, dims, kd), key, inp);
                }
            }
            snprintf(key, sizeof key, "sum.%s.all.k0", inp);
            if (fx_has(fx, key))
                check(pt_sum(t), key, inp);
            snprintf(key, sizeof key, "mean.%s.all.k0", inp);
            if (fx_has(fx, key))
                check(pt_mean(t), key, inp);
            snprintf(key, sizeof key, "max.%s", inp);
            if (fx_has(fx, key))
                check(pt_max(t), key, inp);
            snprintf(key, sizeof key, "min.%s", inp);
            if (fx_has(fx, key))
                check(pt_min(t), key, inp);
            pt_release(t);
        }
    }
}

static void test_var_std_norm_logsumexp(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        double p;
    } P[] = {{"1", 1.0}, {"2", 2.0}, {"inf", INFINITY}, {"ninf", -INFINITY},
             {"0", 0.0}, {"3", 3.0}, {"h", 0.5}};
    char key[64];
    const char *inps[] = {"f", "d"};
    for (size_t a = 0; a < 2; a++) {
        const char *inp = inps[a];
        for (int lay = 0; lay < N_LAYOUTS; lay++) {
            pt_tensor *t = input(inp, lay);
            for (size_t d = 0; d < N_OF(DIMS); d++) {
                int nd = DIMS[d].ndims;
                const int64_t *dims = DIMS[d].dims;
                for (int kd = 0; kd < 2; kd++) {
                    for (int c = 0; c < 3; c++) {
                        snprintf(key, sizeof key, "var.%s.%s.k%d.c%d", inp, DIMS[d].name, kd, c);
                        check(pt_var(t, nd, dims, c, kd), key, inp);
                        snprintf(key, sizeof key, "std.%s.%s.k%d.c%d", inp, DIMS[d].name, kd, c);
                        check(pt_std(t, nd, dims, c, kd), key, inp);
                    }
                    snprintf(key, sizeof key, "lse.%s.%s.k%d", inp, DIMS[d].name, kd);
                    check(pt_logsumexp(t, nd, dims, kd), key, inp);
                    for (size_t p = 0; p < N_OF(P); p++) {
                        snprintf(key, sizeof key, "norm.%s.%s.k%d.p%s", inp, DIMS[d].name, kd,
                                 P[p].name);
                        check(pt_norm(t, P[p].p, nd, dims, kd), key, inp);
                    }
                }
            }
            pt_release(t);
        }
    }
    /* logsumexp of an int tensor is float32; of all -inf is -inf, with +inf is +inf */
    pt_tensor *xi = fx_get(fx, "in.i");
    check(pt_logsumexp(xi, PT_DIMS(1), false), "lse.i", "f");
    pt_tensor *inf = fx_get(fx, "lse_inf.in");
    check(pt_logsumexp(inf, PT_DIMS(1), false), "lse_inf.out", "f");
    pt_release(xi);
    pt_release(inf);
}

static void test_prod_cumsum_cumprod(void **state)
{
    (void)state;
    char key[64];
    for (size_t a = 0; a < N_OF(INPUTS); a++) {
        const char *inp = INPUTS[a];
        const char *src = !strcmp(inp, "f") ? "p" : inp; /* prod/cumprod of floats: near 1 */
        for (int lay = 0; lay < N_LAYOUTS; lay++) {
            pt_tensor *t = input(inp, lay), *tp = input(src, lay);
            snprintf(key, sizeof key, "prod.%s.all", inp);
            if (fx_has(fx, key))
                check(pt_prod(tp), key, inp);
            for (size_t d = 0; d < N_OF(SINGLE); d++) {
                for (int kd = 0; kd < 2; kd++) {
                    snprintf(key, sizeof key, "prod.%s.%s.k%d", inp, SINGLE[d].name, kd);
                    if (fx_has(fx, key))
                        check(pt_prod_dim(tp, SINGLE[d].dim, kd), key, inp);
                }
                snprintf(key, sizeof key, "cumsum.%s.%s", inp, SINGLE[d].name);
                if (fx_has(fx, key))
                    check(pt_cumsum(t, SINGLE[d].dim), key, inp);
                snprintf(key, sizeof key, "cumprod.%s.%s", inp, SINGLE[d].name);
                if (fx_has(fx, key))
                    check(pt_cumprod(tp, SINGLE[d].dim), key, inp);
            }
            pt_release(t);
            pt_release(tp);
        }
    }
}

static void test_max_min_dim_argmax(void **state)
{
    (void)state;
    char key[64];
    for (size_t a = 0; a < N_OF(INPUTS); a++) {
        const char *inp = INPUTS[a];
        for (int lay = 0; lay < N_LAYOUTS; lay++) {
            pt_tensor *t = input(inp, lay);
            for (size_t d = 0; d < N_OF(SINGLE); d++) {
                for (int kd = 0; kd < 2; kd++) {
                    const char *dn = SINGLE[d].name;
                    int64_t dim = SINGLE[d].dim;
                    snprintf(key, sizeof key, "maxd.%s.%s.k%d.v", inp, dn, kd);
                    if (!fx_has(fx, key))
                        continue;
                    pt_tensor *idx = NULL;
                    check(pt_max_dim(t, dim, kd, &idx), key, inp);
                    snprintf(key, sizeof key, "maxd.%s.%s.k%d.i", inp, dn, kd);
                    check(idx, key, "i");
                    snprintf(key, sizeof key, "mind.%s.%s.k%d.v", inp, dn, kd);
                    check(pt_min_dim(t, dim, kd, &idx), key, inp);
                    snprintf(key, sizeof key, "mind.%s.%s.k%d.i", inp, dn, kd);
                    check(idx, key, "i");
                    snprintf(key, sizeof key, "argmax.%s.%s.k%d", inp, dn, kd);
                    if (fx_has(fx, key))
                        check(pt_argmax(t, dim, kd), key, "i");
                    snprintf(key, sizeof key, "argmin.%s.%s.k%d", inp, dn, kd);
                    if (fx_has(fx, key))
                        check(pt_argmin(t, dim, kd), key, "i");
                }
            }
            snprintf(key, sizeof key, "argmax.%s", inp);
            if (fx_has(fx, key)) {
                check(pt_argmax_all(t), key, "i");
                snprintf(key, sizeof key, "argmin.%s", inp);
                check(pt_argmin_all(t), key, "i");
            }
            /* indices may be NULL */
            pt_tensor *v = pt_max_dim(t, 1, false, NULL);
            assert_non_null(v);
            pt_release(v);
            pt_release(t);
        }
    }
}

static void test_all_any(void **state)
{
    (void)state;
    char key[64];
    for (size_t a = 0; a < N_OF(INPUTS); a++) {
        const char *inp = INPUTS[a];
        for (int lay = 0; lay < N_LAYOUTS; lay++) {
            pt_tensor *t = input(inp, lay);
            snprintf(key, sizeof key, "all.%s", inp);
            if (fx_has(fx, key))
                check(pt_all(t), key, "b");
            snprintf(key, sizeof key, "any.%s", inp);
            if (fx_has(fx, key))
                check(pt_any(t), key, "b");
            for (size_t d = 0; d < N_OF(SINGLE); d++) {
                for (int kd = 0; kd < 2; kd++) {
                    snprintf(key, sizeof key, "all.%s.%s.k%d", inp, SINGLE[d].name, kd);
                    if (fx_has(fx, key))
                        check(pt_all_dim(t, SINGLE[d].dim, kd), key, "b");
                    snprintf(key, sizeof key, "any.%s.%s.k%d", inp, SINGLE[d].name, kd);
                    if (fx_has(fx, key))
                        check(pt_any_dim(t, SINGLE[d].dim, kd), key, "b");
                }
            }
            pt_release(t);
        }
    }
    /* uint8 input gives uint8 (PyTorch) */
    pt_tensor *b = fx_get(fx, "in.b");
    pt_tensor *u8 = pt_to_dtype(b, PT_UINT8);
    check(pt_any_dim(u8, 1, false), "any.u8", "b");
    pt_release(b);
    pt_release(u8);
}

static void test_softmax_log_softmax(void **state)
{
    (void)state;
    char key[64];
    const char *inps[] = {"f", "d", "h", "bf"};
    for (size_t a = 0; a < N_OF(inps); a++) {
        const char *inp = inps[a];
        for (int lay = 0; lay < N_LAYOUTS; lay++) {
            pt_tensor *t = input(inp, lay);
            for (size_t d = 0; d < N_OF(SINGLE); d++) {
                snprintf(key, sizeof key, "softmax.%s.%s", inp, SINGLE[d].name);
                if (fx_has(fx, key))
                    check(pt_softmax(t, SINGLE[d].dim), key, inp);
                snprintf(key, sizeof key, "logsoftmax.%s.%s", inp, SINGLE[d].name);
                if (fx_has(fx, key))
                    check(pt_log_softmax(t, SINGLE[d].dim), key, inp);
            }
            pt_release(t);
        }
    }
    /* stability: large magnitudes and -inf entries */
    pt_tensor *st = fx_get(fx, "stab.in");
    check(pt_softmax(st, 1), "stab.softmax", "f");
    check(pt_log_softmax(st, 1), "stab.logsoftmax", "f");
    check(pt_logsumexp(st, PT_DIMS(1), false), "stab.lse", "f");
    pt_release(st);
}

static void test_nan_and_ties(void **state)
{
    (void)state;
    char key[64];
    pt_tensor *raw = fx_get(fx, "nan.in");
    for (int lay = 0; lay < N_LAYOUTS; lay++) {
        pt_tensor *t = layout(raw, lay);
        for (int d = 0; d < 2; d++) {
            pt_tensor *idx = NULL;
            snprintf(key, sizeof key, "nan.max.%d.v", d);
            check(pt_max_dim(t, d, false, &idx), key, "f");
            snprintf(key, sizeof key, "nan.max.%d.i", d);
            check(idx, key, "i");
            snprintf(key, sizeof key, "nan.min.%d.v", d);
            check(pt_min_dim(t, d, false, &idx), key, "f");
            snprintf(key, sizeof key, "nan.min.%d.i", d);
            check(idx, key, "i");
            snprintf(key, sizeof key, "nan.amax.%d", d);
            check(pt_amax(t, PT_DIMS(d), false), key, "f");
            snprintf(key, sizeof key, "nan.amin.%d", d);
            check(pt_amin(t, PT_DIMS(d), false), key, "f");
            snprintf(key, sizeof key, "nan.argmax.%d", d);
            check(pt_argmax(t, d, false), key, "i");
            snprintf(key, sizeof key, "nan.argmin.%d", d);
            check(pt_argmin(t, d, false), key, "i");
            snprintf(key, sizeof key, "nan.softmax.%d", d);
            check(pt_softmax(t, d), key, "f");
        }
        check(pt_max(t), "nan.max", "f");
        check(pt_argmax_all(t), "nan.argmax", "i");
        pt_release(t);
    }
    pt_release(raw);
    pt_tensor *nc = fx_get(fx, "nancol.in");
    check(pt_amax(nc, PT_DIMS(0), false), "nancol.amax", "f");
    check(pt_amin(nc, PT_DIMS(0), false), "nancol.amin", "f");
    pt_tensor *idx = NULL;
    check(pt_max_dim(nc, 0, false, &idx), "nancol.max.v", "f");
    check(idx, "nancol.max.i", "i");
    check(pt_sum_dim(nc, PT_DIMS(0), false), "nancol.sum", "f");
    check(pt_softmax(nc, 0), "nancol.softmax", "f");
    check(pt_cumsum(nc, 0), "nancol.cumsum", "f");
    pt_release(nc);
}

/* Shapes that reach the float32 row (long rows with tails), column (partial 64-wide blocks,
 * a middle dim) and softmax row/column fast paths. */
static void test_fast_path_shapes(void **state)
{
    (void)state;
    static const char *const names[] = {"rows", "cols", "mid", "soft"};
    char key[64];
    for (size_t n = 0; n < N_OF(names); n++) {
        snprintf(key, sizeof key, "%s.in", names[n]);
        pt_tensor *raw = fx_get(fx, key);
        for (int lay = 0; lay < N_LAYOUTS; lay++) {
            pt_tensor *t = layout(raw, lay);
            for (int d = 0; d < pt_ndim(t); d++) {
                const char *nm = names[n];
                snprintf(key, sizeof key, "%s.sum.%d", nm, d);
                check(pt_sum_dim(t, PT_DIMS(d), false), key, "f");
                snprintf(key, sizeof key, "%s.mean.%d", nm, d);
                check(pt_mean_dim(t, PT_DIMS(d), false), key, "f");
                snprintf(key, sizeof key, "%s.amax.%d", nm, d);
                check(pt_amax(t, PT_DIMS(d), false), key, "f");
                snprintf(key, sizeof key, "%s.amin.%d", nm, d);
                check(pt_amin(t, PT_DIMS(d), false), key, "f");
                pt_tensor *idx = NULL;
                snprintf(key, sizeof key, "%s.max.%d.v", nm, d);
                check(pt_max_dim(t, d, false, &idx), key, "f");
                snprintf(key, sizeof key, "%s.max.%d.i", nm, d);
                check(idx, key, "i");
                snprintf(key, sizeof key, "%s.argmin.%d", nm, d);
                check(pt_argmin(t, d, false), key, "i");
                snprintf(key, sizeof key, "%s.softmax.%d", nm, d);
                check(pt_softmax(t, d), key, "f");
                snprintf(key, sizeof key, "%s.logsoftmax.%d", nm, d);
                check(pt_log_softmax(t, d), key, "f");
                snprintf(key, sizeof key, "%s.cumsum.%d", nm, d);
                check(pt_cumsum(t, d), key, "f");
            }
            pt_release(t);
        }
        pt_release(raw);
    }
}

/* Reductions over (0, 2, 3) of an NCHW tensor: several contiguous runs per output. */
static void test_multi_run(void **state)
{
    (void)state;
    pt_tensor *raw = fx_get(fx, "nchw.in");
    for (int lay = 0; lay < N_LAYOUTS; lay++) {
        pt_tensor *t = layout(raw, lay);
        check(pt_sum_dim(t, PT_DIMS(0, 2, 3), true), "nchw.sum", "f");
        check(pt_mean_dim(t, PT_DIMS(0, 2, -1), false), "nchw.mean", "f");
        check(pt_amax(t, PT_DIMS(0, 2, 3), false), "nchw.amax", "f");
        check(pt_amin(t, PT_DIMS(3, 2, 0), false), "nchw.amin", "f");
        check(pt_norm(t, 1.0, PT_DIMS(0, 2, 3), false), "nchw.norm1", "f");
        check(pt_norm(t, 2.0, PT_DIMS(0, 2, 3), false), "nchw.norm2", "f");
        check(pt_var(t, PT_DIMS(0, 2, 3), 1, false), "nchw.var", "f");
        /* prod/all over several dims: reduce 3 and 2 with keepdim, then 0 */
        pt_tensor *p1 = pt_prod_dim(t, 3, true), *p2 = pt_prod_dim(p1, 2, true);
        pt_tensor *p3 = pt_prod_dim(p2, 0, false), *p4 = pt_sum_dim(p3, PT_DIMS(-1, -2), false);
        check(p4, "nchw.prod", "f");
        pt_tensor *a1 = pt_all_dim(t, 0, false), *a2 = pt_all_dim(a1, -1, false);
        pt_tensor *a3 = pt_all_dim(a2, -1, false);
        check(a3, "nchw.all", "b");
        pt_release(p1);
        pt_release(p2);
        pt_release(p3);
        pt_release(a1);
        pt_release(a2);
        pt_release(t);
    }
    pt_release(raw);
}

/* 1M float32 elements: whole-tensor reductions split across threads, and row/column sums of
 * the 1000x1000 view, all within 1e-5 of PyTorch (and of the exact float64 sum). */
static void test_large_sums(void **state)
{
    (void)state;
    const int64_t n = 1000000;
    float *v = malloc(sizeof(float) * (size_t)n);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((double)((i * 7919) % 1000) / 1000.0 + 0.1);
    pt_tensor *big = pt_from_data(v, PT_SHAPE(n), PT_FLOAT32, pt_cpu());
    pt_tensor *b2 = pt_from_data(v, PT_SHAPE(1000, 1000), PT_FLOAT32, pt_cpu());
    free(v);
    check(pt_sum(big), "big.sum", "f");
    check(pt_mean(big), "big.mean", "f");
    check(pt_max(big), "big.max", "f");
    check(pt_argmax_all(big), "big.argmax", "i");
    check(pt_argmin_all(big), "big.argmin", "i");
    check(pt_sum_dim(b2, PT_DIMS(0), false), "big.sum0", "f");
    check(pt_sum_dim(b2, PT_DIMS(1), false), "big.sum1", "f");
    check(pt_var(big, 0, NULL, 1, false), "big.var", "f");
    check(pt_std(b2, PT_DIMS(1), 1, false), "big.std1", "f");
    check(pt_norm(big, 1.0, 0, NULL, false), "big.norm1", "f");
    check(pt_norm(big, 2.0, 0, NULL, false), "big.norm2", "f");
    check(pt_logsumexp(big, PT_DIMS(0), false), "big.lse", "f");
    check(pt_any(big), "big.any", "b");
    check(pt_all(big), "big.all", "b");
    check(pt_amin(b2, PT_DIMS(0), false), "big.amin0", "f");
    pt_tensor *cs = pt_cumsum(big, 0);
    pt_tensor *cs_tail =
        pt_as_strided(cs, 1, (const int64_t[]){1000}, (const int64_t[]){1}, n - 1000);
    check(cs_tail, "big.cumsum_last", "f");
    pt_release(cs);
    pt_tensor *exact = fx_get(fx, "big.exact");
    pt_tensor *s = pt_sum(big);
    double e = pt_item(exact), got = pt_item(s);
    assert_true(fabs(got - e) <= 1e-6 * fabs(e));
    /* deterministic: the same bits with one thread */
    int nt = pt_get_num_threads();
    pt_set_num_threads(1);
    pt_tensor *s1 = pt_sum(big);
    pt_set_num_threads(nt);
    assert_tensor_equal(s1, s);
    pt_release(s);
    pt_release(s1);
    pt_release(exact);
    pt_release(big);
    pt_release(b2);
}

static void test_empty_and_scalar(void **state)
{
    (void)state;
    pt_tensor *e = pt_zeros(PT_SHAPE(0, 3), PT_FLOAT32, pt_cpu());
    check(pt_sum(e), "empty.sum", "f");
    check(pt_sum_dim(e, PT_DIMS(0), false), "empty.sum0", "f");
    check(pt_prod_dim(e, 0, false), "empty.prod0", "f");
    check(pt_mean_dim(e, PT_DIMS(0), false), "empty.mean0", "f");
    check(pt_amax(e, PT_DIMS(1), false), "empty.amax1", "f");
    check(pt_cumsum(e, 0), "empty.cumsum", "f");
    assert_pt_error(pt_max(e), PT_ERR_INVALID_ARG, "pt_max");
    assert_pt_error(pt_min(e), PT_ERR_INVALID_ARG, "pt_min");
    assert_pt_error(pt_argmax_all(e), PT_ERR_INVALID_ARG, "pt_argmax_all");
    assert_pt_error(pt_max_dim(e, 0, false, NULL), PT_ERR_INVALID_ARG, "non-zero size");
    assert_pt_error(pt_amax(e, PT_DIMS(0), true), PT_ERR_INVALID_ARG, "pt_amax");
    assert_pt_error(pt_argmin(e, 0, false), PT_ERR_INVALID_ARG, "pt_argmin");
    pt_tensor *any = pt_any(e), *all = pt_all(e);
    assert_true(pt_item(any) == 0.0 && pt_item(all) == 1.0);
    pt_release(any);
    pt_release(all);
    pt_tensor *m = pt_mean(e);
    assert_true(isnan(pt_item(m)));
    pt_release(m);
    pt_release(e);
    /* 0-dim: dim 0 and -1 are accepted, keepdim keeps 0 dims */
    pt_tensor *s = pt_scalar_tensor(3.5, PT_FLOAT32, pt_cpu());
    pt_tensor *idx = NULL;
    pt_tensor *v = pt_max_dim(s, -1, true, &idx);
    assert_int_equal(pt_ndim(v), 0);
    assert_true(pt_item(v) == 3.5 && pt_item(idx) == 0.0);
    pt_tensor *sm = pt_softmax(s, 0), *cs = pt_cumsum(s, 0), *sd = pt_sum_dim(s, PT_DIMS(0), true);
    assert_true(pt_item(sm) == 1.0 && pt_item(cs) == 3.5 && pt_item(sd) == 3.5);
    assert_int_equal(pt_ndim(sd), 0);
    pt_release(sm);
    pt_release(cs);
    pt_release(sd);
    pt_release(v);
    pt_release(idx);
    pt_release(s);
}

static void test_errors(void **state)
{
    (void)state;
    pt_tensor *x = fx_get(fx, "in.f"), *xi = fx_get(fx, "in.i");
    /* bad / repeated dims */
    assert_pt_error(pt_sum_dim(x, PT_DIMS(3), false), PT_ERR_INDEX, "pt_sum_dim");
    assert_pt_error(pt_sum_dim(x, PT_DIMS(-4), false), PT_ERR_INDEX, "out of range");
    assert_pt_error(pt_sum_dim(x, PT_DIMS(1, -2), false), PT_ERR_INVALID_ARG, "multiple times");
    assert_pt_error(pt_sum_dim(x, -1, NULL, false), PT_ERR_INVALID_ARG, "ndims");
    assert_pt_error(pt_max_dim(x, 5, false, NULL), PT_ERR_INDEX, "pt_max_dim");
    assert_pt_error(pt_argmax(x, -4, false), PT_ERR_INDEX, "pt_argmax");
    assert_pt_error(pt_softmax(x, 3), PT_ERR_INDEX, "pt_softmax");
    assert_pt_error(pt_cumsum(x, -5), PT_ERR_INDEX, "pt_cumsum");
    assert_pt_error(pt_prod_dim(x, 7, true), PT_ERR_INDEX, "pt_prod_dim");
    assert_pt_error(pt_var(x, PT_DIMS(0, 0), 1, false), PT_ERR_INVALID_ARG, "pt_var");
    assert_pt_error(pt_all_dim(x, 3, false), PT_ERR_INDEX, "pt_all_dim");
    /* dtype rules */
    assert_pt_error(pt_mean(xi), PT_ERR_DTYPE, "pt_mean");
    assert_pt_error(pt_mean_dim(xi, PT_DIMS(0), false), PT_ERR_DTYPE, "int64");
    assert_pt_error(pt_var(xi, 0, NULL, 1, false), PT_ERR_DTYPE, "pt_var");
    assert_pt_error(pt_std(xi, 0, NULL, 1, false), PT_ERR_DTYPE, "pt_std");
    assert_pt_error(pt_norm(xi, 2.0, 0, NULL, false), PT_ERR_DTYPE, "pt_norm");
    assert_pt_error(pt_softmax(xi, 0), PT_ERR_DTYPE, "pt_softmax");
    assert_pt_error(pt_log_softmax(xi, 0), PT_ERR_DTYPE, "pt_log_softmax");
    assert_pt_error(pt_norm(x, NAN, 0, NULL, false), PT_ERR_INVALID_ARG, "pt_norm");
    pt_tensor *q = pt_empty(PT_SHAPE(2, 32), PT_Q8_0, pt_cpu());
    assert_non_null(q);
    assert_pt_error(pt_sum(q), PT_ERR_DTYPE, "block dtype");
    assert_pt_error(pt_softmax(q, 1), PT_ERR_DTYPE, "pt_softmax");
    assert_pt_error(pt_amax(x, PT_DIMS(2, -1), false), PT_ERR_INVALID_ARG, "pt_amax");
    assert_pt_error(pt_logsumexp(x, PT_DIMS(0, 1, 2, 0), false), PT_ERR_INVALID_ARG,
                    "multiple times");
    pt_release(q);
    /* NULL propagates */
    pt_clear_error();
    assert_pt_error(pt_sum(NULL), PT_ERR_NULL, "pt_sum");
    assert_pt_error(pt_softmax(NULL, 0), PT_ERR_NULL, "pt_softmax");
    pt_tensor *idx = (pt_tensor *)1;
    assert_pt_error(pt_max_dim(NULL, 0, false, &idx), PT_ERR_NULL, "pt_max_dim");
    assert_null(idx);
    pt_tensor *bad = pt_sum_dim(x, PT_DIMS(9), false);
    assert_null(bad);
    assert_pt_error(pt_mean(bad), PT_ERR_INDEX, "pt_sum_dim"); /* the first error is kept */
    pt_release(x);
    pt_release(xi);
}

int main(void)
{
    fx = fx_open("reduce");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sum_mean_amax_amin, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_var_std_norm_logsumexp, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_prod_cumsum_cumprod, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_max_min_dim_argmax, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_all_any, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_softmax_log_softmax, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_nan_and_ties, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_fast_path_shapes, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_multi_run, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_large_sums, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_empty_and_scalar, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_errors, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
