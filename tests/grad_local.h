/* A small private gradient checker for the conv/nn autograd tests (until pt_gradcheck from the
 * engine branch is merged): central differences on float64 inputs (eps 1e-6) against
 * pt_autograd_grad, atol 1e-5 / rtol 1e-3 as torch.autograd.gradcheck, and a gradgradcheck that
 * checks the create_graph gradients the same way. Included by tests/test_grad_{conv,nn}.c. */
#ifndef PT_TEST_GRAD_LOCAL_H
#define PT_TEST_GRAD_LOCAL_H

#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define GC_EPS 1e-6
#define GC_ATOL 1e-5
#define GC_RTOL 1e-3
#define GC_MAX 8

/* Computes the outputs of the function under test into outs; returns their number (<= GC_MAX),
 * or 0 on failure. */
typedef int (*gc_fn)(pt_tensor *const *in, void *ctx, pt_tensor **outs);

/* Deterministic float64 values in about [-1, 1] (seeded per call site). */
static pt_tensor *gc_values(int ndim, const int64_t *shape, unsigned seed)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    uint32_t s = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = ((double)(s >> 8) / (double)(1u << 24)) * 2.0 - 1.0;
    }
    pt_tensor *t = pt_from_data(v, ndim, shape, PT_FLOAT64, (pt_device){PT_DEVICE_CPU, 0});
    free(v);
    return t;
}

/* A float64 leaf that requires grad. */
static pt_tensor *gc_leaf(int ndim, const int64_t *shape, unsigned seed)
{
    pt_tensor *t = gc_values(ndim, shape, seed);
    assert_non_null(t);
    assert_int_equal(pt_requires_grad_(t, true), PT_OK);
    return t;
}

/* Address of element i (row-major) of a CPU float64 tensor with any strides. */
static double *gc_elem(const pt_tensor *t, int64_t i)
{
    int nd = pt_ndim(t);
    const int64_t *sh = pt_shape(t), *st = pt_stride(t);
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += (i % sh[d]) * st[d];
        i /= sh[d];
    }
    return (double *)pt_data_ptr(t) + off;
}

/* sum_k dot(outs[k], r[k]) */
static double gc_dot(int n, pt_tensor *const *outs, pt_tensor *const *r)
{
    double s = 0;
    for (int k = 0; k < n; k++) {
        int64_t m = pt_numel(outs[k]);
        for (int64_t i = 0; i < m; i++)
            s += pt_test_get(outs[k], i) * pt_test_get(r[k], i);
    }
    return s;
}

static double gc_eval(gc_fn f, void *ctx, pt_tensor *const *in, pt_tensor *const *r)
{
    pt_tensor *outs[GC_MAX] = {0};
    int n = f(in, ctx, outs);
    if (n <= 0)
        fail_msg("gradcheck: the function failed during a numeric evaluation: %s", pt_last_error());
    double v = gc_dot(n, outs, r);
    for (int k = 0; k < n; k++)
        pt_release(outs[k]);
    return v;
}

/* Checks d(sum_k outs_k . r_k)/d(in_j) for every input that requires grad (float64). */
static void gc_check(const char *what, gc_fn f, void *ctx, int n_in, pt_tensor *const *in)
{
    pt_tensor *outs[GC_MAX] = {0}, *r[GC_MAX] = {0}, *req[GC_MAX] = {0}, *grads[GC_MAX] = {0};
    int n_out = f(in, ctx, outs);
    if (n_out <= 0)
        fail_msg("%s: forward failed: %s", what, pt_last_error());
    int n_req = 0;
    for (int j = 0; j < n_in; j++)
        if (in[j] && pt_requires_grad(in[j]))
            req[n_req++] = in[j];
    for (int k = 0; k < n_out; k++)
        r[k] = gc_values(pt_ndim(outs[k]), pt_shape(outs[k]), 977u + (unsigned)k);
    /* outputs that carry no history get no gradient (their numeric derivative must be 0) */
    pt_tensor *houts[GC_MAX], *hr[GC_MAX];
    int nh = 0;
    for (int k = 0; k < n_out; k++)
        if (pt_requires_grad(outs[k])) {
            houts[nh] = outs[k];
            hr[nh++] = r[k];
        }
    if (nh > 0) {
        pt_status st = pt_autograd_grad(nh, houts, hr, n_req, req, false, false, true, grads);
        if (st != PT_OK)
            fail_msg("%s: backward failed: %s", what, pt_last_error());
    }
    for (int k = 0; k < n_out; k++)
        pt_release(outs[k]);
    int bad = 0;
    for (int j = 0; j < n_req; j++) {
        if (grads[j]) {
            assert_int_equal(pt_ndim(grads[j]), pt_ndim(req[j]));
            for (int d = 0; d < pt_ndim(req[j]); d++)
                assert_int_equal(pt_shape(grads[j])[d], pt_shape(req[j])[d]);
            assert_int_equal(pt_dtype_of(grads[j]), pt_dtype_of(req[j]));
        }
        int64_t m = pt_numel(req[j]);
        for (int64_t i = 0; i < m; i++) {
            double *p = gc_elem(req[j], i), orig = *p;
            *p = orig + GC_EPS;
            double vp = gc_eval(f, ctx, in, r);
            *p = orig - GC_EPS;
            double vm = gc_eval(f, ctx, in, r);
            *p = orig;
            double num = (vp - vm) / (2 * GC_EPS);
            double ana = grads[j] ? pt_test_get(grads[j], i) : 0.0;
            if (!(fabs(ana - num) <= GC_ATOL + GC_RTOL * fabs(num))) {
                if (bad++ < 5)
                    print_error("%s: input %d element %lld: analytical %.10g, numerical %.10g\n",
                                what, j, (long long)i, ana, num);
            }
        }
    }
    for (int k = 0; k < n_out; k++)
        pt_release(r[k]);
    for (int j = 0; j < n_req; j++)
        pt_release(grads[j]);
    if (bad)
        fail_msg("%s: %d gradient elements differ", what, bad);
}

/* gradgradcheck: the first-order gradients (create_graph) of f, weighted by an extra input u
 * per output, checked as a function of the inputs and u. */
typedef struct gc_gg_ctx {
    gc_fn f;
    void *ctx;
    int n_in;
} gc_gg_ctx;

static int gc_gg_fn(pt_tensor *const *in, void *vctx, pt_tensor **outs)
{
    gc_gg_ctx *c = vctx;
    pt_tensor *fo[GC_MAX] = {0}, *req[GC_MAX];
    int n_out = c->f(in, c->ctx, fo);
    if (n_out <= 0)
        return 0;
    int n_req = 0;
    for (int j = 0; j < c->n_in; j++)
        if (in[j] && pt_requires_grad(in[j]))
            req[n_req++] = in[j];
    pt_tensor *const *u = in + c->n_in;
    pt_status st =
        pt_autograd_grad(n_out, fo, (pt_tensor *const *)u, n_req, req, true, true, true, outs);
    for (int k = 0; k < n_out; k++)
        pt_release(fo[k]);
    if (st != PT_OK)
        return 0;
    /* unused inputs: a zero gradient */
    for (int j = 0; j < n_req; j++)
        if (!outs[j])
            outs[j] = pt_zeros_like(req[j]);
    return n_req;
}

static void gc_gradgrad(const char *what, gc_fn f, void *ctx, int n_in, pt_tensor *const *in)
{
    pt_tensor *all[GC_MAX] = {0}, *fo[GC_MAX] = {0};
    int n_out = f(in, ctx, fo);
    if (n_out <= 0)
        fail_msg("%s: forward failed: %s", what, pt_last_error());
    assert_true(n_in + n_out <= GC_MAX);
    for (int j = 0; j < n_in; j++)
        all[j] = in[j];
    for (int k = 0; k < n_out; k++) {
        all[n_in + k] = gc_leaf(pt_ndim(fo[k]), pt_shape(fo[k]), 31u + (unsigned)k);
        pt_release(fo[k]);
    }
    gc_gg_ctx gg = {f, ctx, n_in};
    gc_check(what, gc_gg_fn, &gg, n_in + n_out, all);
    for (int k = 0; k < n_out; k++)
        pt_release(all[n_in + k]);
}

#endif
