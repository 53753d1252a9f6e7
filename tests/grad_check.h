/* A private central-difference gradient checker for the autograd tests of the shape and
 * index families (until the public pt_gradcheck is merged): float64 inputs, eps 1e-6,
 * analytic gradients from pt_autograd_grad compared with (f(x+eps)-f(x-eps))/(2 eps) of the
 * weighted sum <f(x), w> per element (atol 1e-5, rtol 1e-3, like PyTorch's gradcheck).
 * gc_gradgradcheck checks the gradients' own gradients the same way (create_graph). */
#ifndef PT_TEST_GRAD_CHECK_H
#define PT_TEST_GRAD_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* At most GC_MAX_IN inputs (15 for gc_gradgradcheck, which adds one). */
#define GC_MAX_IN 16
typedef pt_tensor *(*gc_fn)(pt_tensor *const *in, void *user);

#define GC_EPS 1e-6
#define GC_ATOL 1e-5
#define GC_RTOL 1e-3

/* sum(out * w) on the host (w has out's shape). */
static double gc_dot(const pt_tensor *out, const pt_tensor *w)
{
    double s = 0;
    for (int64_t i = 0; i < pt_numel(out); i++)
        s += pt_test_get(out, i) * pt_test_get(w, i);
    return s;
}

/* The address of row-major element i of a float64 CPU tensor with any strides. */
static double *gc_elem(pt_tensor *t, int64_t i)
{
    int nd = pt_ndim(t);
    const int64_t *shape = pt_shape(t), *stride = pt_stride(t);
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += (i % shape[d]) * stride[d];
        i /= shape[d];
    }
    return (double *)pt_data_ptr(t) + off;
}

static double gc_eval(gc_fn f, pt_tensor *const *in, void *user, const pt_tensor *w)
{
    pt_tensor *out = f(in, user);
    assert_non_null(out);
    double v = gc_dot(out, w);
    pt_release(out);
    return v;
}

/* Checks f's gradients at the inputs (float64 tensors that require grad). */
static void gc_gradcheck_at(gc_fn f, void *user, int n, pt_tensor **in, const char *what)
{
    assert_true(n <= GC_MAX_IN);
    pt_tensor *out = f(in, user);
    assert_non_null(out);
    if (!pt_requires_grad(out))
        fail_msg("%s: the result does not require grad", what);
    pt_tensor *w = pt_randn(pt_ndim(out), pt_shape(out), PT_FLOAT64, pt_device_of(out));
    pt_tensor *grads[GC_MAX_IN] = {NULL};
    pt_status st = pt_autograd_grad(1, &out, &w, n, in, false, false, true, grads);
    if (st != PT_OK)
        fail_msg("%s: backward failed: %s", what, pt_last_error());
    pt_release(out);
    for (int k = 0; k < n; k++) {
        if (grads[k]) {
            assert_int_equal(pt_ndim(grads[k]), pt_ndim(in[k]));
            assert_memory_equal(pt_shape(grads[k]), pt_shape(in[k]),
                                sizeof(int64_t) * (size_t)pt_ndim(in[k]));
            assert_int_equal(pt_dtype_of(grads[k]), pt_dtype_of(in[k]));
        }
        for (int64_t i = 0; i < pt_numel(in[k]); i++) {
            double *p = gc_elem(in[k], i), x0 = *p;
            *p = x0 + GC_EPS;
            double fp = gc_eval(f, in, user, w);
            *p = x0 - GC_EPS;
            double fm = gc_eval(f, in, user, w);
            *p = x0;
            double num = (fp - fm) / (2 * GC_EPS);
            double ana = grads[k] ? pt_test_get(grads[k], i) : 0.0;
            if (fabs(ana - num) > GC_ATOL + GC_RTOL * fabs(num))
                fail_msg("%s: input %d element %lld: analytic %.9g, numeric %.9g", what, k,
                         (long long)i, ana, num);
        }
        pt_release(grads[k]);
    }
    pt_release(w);
}

static void gc_gradcheck(gc_fn f, void *user, int n, pt_tensor **in, const char *what)
{
    for (int k = 0; k < n; k++)
        assert_int_equal(pt_requires_grad_(in[k], true), PT_OK);
    gc_gradcheck_at(f, user, n, in, what);
}

/* f2(inputs..., v) = the gradients of <f(inputs), v> with respect to the inputs, flattened and
 * concatenated (computed with create_graph, so they are differentiable). */
typedef struct gc_gg {
    gc_fn f;
    void *user;
    int n;
} gc_gg;

static pt_tensor *gc_grad_fn(pt_tensor *const *in, void *user)
{
    gc_gg *g = user;
    pt_tensor *out = g->f(in, g->user);
    assert_non_null(out);
    pt_tensor *grads[GC_MAX_IN] = {NULL}, *flat[GC_MAX_IN];
    pt_status st =
        pt_autograd_grad(1, &out, &in[g->n], g->n, (pt_tensor *const *)in, true, true, true, grads);
    if (st != PT_OK)
        fail_msg("gradgrad: backward failed: %s", pt_last_error());
    for (int k = 0; k < g->n; k++) {
        pt_tensor *gk = grads[k] ? grads[k] : pt_zeros_like(in[k]);
        flat[k] = pt_reshape(gk, 1, (const int64_t[]){-1});
        pt_release(gk);
    }
    pt_tensor *r = pt_cat(g->n, (const pt_tensor *const *)flat, 0);
    for (int k = 0; k < g->n; k++)
        pt_release(flat[k]);
    pt_release(out);
    return r;
}

static void gc_gradgradcheck(gc_fn f, void *user, int n, pt_tensor **in, const char *what)
{
    assert_true(n < GC_MAX_IN);
    pt_tensor *all[GC_MAX_IN];
    for (int k = 0; k < n; k++) {
        assert_int_equal(pt_requires_grad_(in[k], true), PT_OK);
        all[k] = in[k];
    }
    pt_tensor *out = f(in, user);
    all[n] = pt_randn(pt_ndim(out), pt_shape(out), PT_FLOAT64, pt_device_of(out));
    pt_release(out);
    assert_int_equal(pt_requires_grad_(all[n], true), PT_OK);
    gc_gg g = {f, user, n};
    gc_gradcheck_at(gc_grad_fn, &g, n + 1, all, what);
    pt_release(all[n]);
}

/* A float64 tensor of standard normal values. */
static pt_tensor *gc_randn(int nd, const int64_t *shape)
{
    return pt_randn(nd, shape, PT_FLOAT64, pt_cpu());
}

#endif
