/* A private central-difference gradient checker for test_grad_reduce.c and test_grad_linalg.c
 * (until the public pt_gradcheck lands): float64 inputs, eps 1e-6, and PyTorch's gradcheck
 * tolerances (atol 1e-5, rtol 1e-3). The output is weighted by a fixed pseudo-random tensor v,
 * so one backward (pt_autograd_grad with grad_outputs = v) checks the whole Jacobian against
 * sum((f(x + eps e_j) - f(x - eps e_j)) * v) / (2 eps) for every input element j.
 *
 * gg_check does the same for the gradient itself (gradgradcheck): the function checked is
 * x, v -> d(sum(f(x) * v))/dx_k computed with create_graph. */
#ifndef PT_GRAD_REDUCE_CHECK_H
#define PT_GRAD_REDUCE_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/testutil.h"

#define GC_EPS 1e-6
#define GC_ATOL 1e-5
#define GC_RTOL 1e-3
#define GC_MAX_IN 6

/* The function under test: inputs -> one output (new reference). */
typedef pt_tensor *(*gc_fn)(pt_tensor *const *x, const void *ctx);

/* Deterministic values in [-1, 1) (no RNG of the library involved). */
static double gc_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / (double)(1ULL << 53) * 2.0 - 1.0;
}

/* A float64 tensor of the given shape with values from gc_next, plus `shift`. */
static pt_tensor *gc_rand(int ndim, const int64_t *shape, uint64_t seed, double shift)
{
    pt_tensor *t = pt_empty(ndim, shape, PT_FLOAT64, pt_cpu());
    double *p = pt_data_ptr(t);
    uint64_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < pt_numel(t); i++)
        p[i] = gc_next(&s) + shift;
    return t;
}

/* A float64 leaf requiring grad: a copy of t, made non-contiguous when asked. */
static pt_tensor *gc_leaf(const pt_tensor *t, bool noncontig)
{
    pt_tensor *d = pt_to_dtype(t, PT_FLOAT64);
    pt_tensor *r = noncontig ? pt_test_noncontig(d) : pt_clone(d);
    pt_release(d);
    assert_int_equal(pt_requires_grad_(r, true), PT_OK);
    return r;
}

/* Storage offset (from the data pointer) of row-major element i of t. */
static int64_t gc_offset(const pt_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int d = pt_ndim(t) - 1; d >= 0; d--) {
        int64_t n = pt_shape(t)[d];
        off += (i % n) * pt_stride(t)[d];
        i /= n;
    }
    return off;
}

/* sum(f(x) * v) as a double, evaluated with values only. */
static double gc_eval(gc_fn f, const void *ctx, pt_tensor *const *x, const pt_tensor *v)
{
    pt_tensor *y = f(x, ctx);
    assert_non_null(y);
    double s = 0;
    for (int64_t i = 0; i < pt_numel(y); i++)
        s += pt_test_get(y, i) * pt_test_get(v, i);
    pt_release(y);
    return s;
}

/* Checks f's gradient with respect to every input of x[0..n) that requires grad. */
static void gc_check(const char *what, gc_fn f, const void *ctx, int n, pt_tensor *const *x)
{
    pt_tensor *y = f(x, ctx);
    assert_non_null(y);
    pt_tensor *v = gc_rand(pt_ndim(y), pt_shape(y), (uint64_t)pt_numel(y) + 17, 0.0);
    pt_tensor *grads[GC_MAX_IN] = {0}, *wrt[GC_MAX_IN], *got[GC_MAX_IN] = {0};
    int nw = 0, pos[GC_MAX_IN];
    for (int k = 0; k < n; k++)
        if (pt_requires_grad(x[k])) {
            pos[nw] = k;
            wrt[nw++] = x[k];
        }
    if (pt_requires_grad(y)) {
        pt_status st = pt_autograd_grad(1, &y, &v, nw, wrt, false, false, true, got);
        if (st != PT_OK)
            fail_msg("%s: autograd failed: %s", what, pt_last_error());
        for (int i = 0; i < nw; i++)
            grads[pos[i]] = got[i];
    }
    pt_release(y);
    for (int k = 0; k < n; k++) {
        if (!pt_requires_grad(x[k]))
            continue;
        if (grads[k]) {
            assert_int_equal(pt_ndim(grads[k]), pt_ndim(x[k]));
            for (int d = 0; d < pt_ndim(x[k]); d++)
                assert_int_equal(pt_shape(grads[k])[d], pt_shape(x[k])[d]);
            assert_int_equal(pt_dtype_of(grads[k]), pt_dtype_of(x[k]));
        }
        double *base = pt_data_ptr(x[k]);
        for (int64_t j = 0; j < pt_numel(x[k]); j++) {
            int64_t off = gc_offset(x[k], j);
            double orig = base[off];
            base[off] = orig + GC_EPS;
            double fp = gc_eval(f, ctx, x, v);
            base[off] = orig - GC_EPS;
            double fm = gc_eval(f, ctx, x, v);
            base[off] = orig;
            double num = (fp - fm) / (2 * GC_EPS);
            double ana = grads[k] ? pt_test_get(grads[k], j) : 0.0;
            if (!(fabs(ana - num) <= GC_ATOL + GC_RTOL * fabs(num)))
                fail_msg("%s: d/d input %d element %lld: analytic %.10g, numeric %.10g", what, k,
                         (long long)j, ana, num);
        }
        pt_release(grads[k]);
    }
    pt_release(v);
}

/* ---- gradgradcheck ------------------------------------------------------------------------- */

typedef struct gg_ctx {
    gc_fn f;
    const void *ctx;
    int n;     /* inputs of f; x[n] is the output weight v */
    int which; /* the input whose gradient is the checked function */
} gg_ctx;

static pt_tensor *gg_first_grad(pt_tensor *const *xv, const void *c)
{
    const gg_ctx *g = c;
    pt_tensor *y = g->f(xv, g->ctx);
    pt_tensor *grad = NULL;
    pt_tensor *v = xv[g->n];
    if (y && pt_requires_grad(y)) {
        pt_status st = pt_autograd_grad(1, &y, &v, 1, &xv[g->which], true, true, true, &grad);
        if (st != PT_OK)
            fail_msg("gradgradcheck: first backward failed: %s", pt_last_error());
    }
    pt_release(y);
    return grad ? grad : pt_zeros_like(xv[g->which]);
}

/* Second-order check: for each input k that requires grad, the gradient of f with respect to
 * x[k] (with create_graph) is checked by gc_check against x and the output weight v. */
static void gg_check(const char *what, gc_fn f, const void *ctx, int n, pt_tensor *const *x)
{
    pt_tensor *y = f(x, ctx);
    assert_non_null(y);
    pt_tensor *v = gc_rand(pt_ndim(y), pt_shape(y), 99, 0.0);
    pt_release(y);
    assert_int_equal(pt_requires_grad_(v, true), PT_OK);
    pt_tensor *xv[GC_MAX_IN + 1];
    for (int k = 0; k < n; k++)
        xv[k] = x[k];
    xv[n] = v;
    for (int k = 0; k < n; k++) {
        if (!pt_requires_grad(x[k]))
            continue;
        gg_ctx g = {.f = f, .ctx = ctx, .n = n, .which = k};
        char name[200];
        snprintf(name, sizeof name, "%s (gradgrad wrt input %d)", what, k);
        gc_check(name, gg_first_grad, &g, n + 1, xv);
    }
    pt_release(v);
}

/* True once the elementwise and shape ops record autograd (their formulas are written on
 * other branches): double backward of formulas built from them needs it. */
static bool gg_supported(void)
{
    pt_tensor *x = pt_ones(2, (const int64_t[]){2, 2}, PT_FLOAT64, pt_cpu());
    pt_requires_grad_(x, true);
    pt_tensor *a = pt_mul(x, x), *b = pt_reshape(x, 1, (const int64_t[]){4});
    pt_tensor *c = pt_transpose(x, 0, 1), *d = pt_expand(x, 3, (const int64_t[]){2, 2, 2});
    pt_tensor *e = pt_exp(x);
    bool ok = pt_requires_grad(a) && pt_requires_grad(b) && pt_requires_grad(c) &&
              pt_requires_grad(d) && pt_requires_grad(e);
    pt_tensor *all[] = {x, a, b, c, d, e};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pt_release(all[i]);
    return ok;
}

#define GG_REQUIRE()                                                                               \
    do {                                                                                           \
        if (!gg_supported()) {                                                                     \
            print_message("skipped: elementwise/shape ops do not record autograd yet\n");          \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

#endif
