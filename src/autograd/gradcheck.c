/* pt_gradcheck / pt_gradgradcheck: compare the Jacobian that backward computes with central
 * finite differences, as torch.autograd.gradcheck does. Both run on a "multi-output function"
 * (inputs -> up to GC_MAX_OUT results): gradcheck wraps the user's function, gradgradcheck
 * wraps the vector-Jacobian product (computed with create_graph) of the user's function. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../graph/node.h"

#define GC_MAX_IN 16
#define GC_MAX_OUT 16

/* Computes the outputs from the inputs; returns how many, or -1 with the error set. */
typedef int (*multi_fn)(void *ctx, int n, pt_tensor *const *inputs, pt_tensor **outs);

typedef struct checker {
    const char *op;
    double eps, atol, rtol;
    multi_fn fn;
    void *ctx;
    int n;
    pt_tensor *const *inputs;
    int n_req;
    int req[GC_MAX_IN]; /* indices of the inputs that require grad */
    int n_out;
    int64_t out_numel[GC_MAX_OUT], out_start[GC_MAX_OUT], total_out;
    int out_ndim[GC_MAX_OUT];
    int64_t out_shape[GC_MAX_OUT][PT_MAX_DIMS];
    double *jac[GC_MAX_IN]; /* analytical Jacobian per required input, [total_out][numel] */
} checker;

/* Row-major multi-index of flat element k of a shape, written into idx. */
static void unravel(int64_t k, int ndim, const int64_t *shape, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? k % shape[d] : 0;
        k = shape[d] ? k / shape[d] : 0;
    }
}

/* A 0-d view of logical element k of t (any strides). */
static pt_tensor *element_view(const pt_tensor *t, int64_t k)
{
    int64_t idx[PT_MAX_DIMS], off = t->offset;
    unravel(k, t->ndim, t->shape, idx);
    for (int d = 0; d < t->ndim; d++)
        off += idx[d] * t->stride[d];
    return pti_tensor_on_storage(t->storage, t->dtype, 0, NULL, NULL, off);
}

/* t's elements as float64 in row-major order into dst (numel of them). */
static pt_status read_f64(const pt_tensor *t, double *dst)
{
    bool prev = pt_set_grad_enabled(false);
    pt_tensor *d = pt_to_dtype(t, PT_FLOAT64);
    pt_status st =
        d ? pt_copy_to_host(d, dst, sizeof(double) * (size_t)t->numel) : pt_last_status();
    pt_release(d);
    pt_set_grad_enabled(prev);
    return st;
}

static void release_all(int n, pt_tensor **ts)
{
    for (int i = 0; i < n; i++) {
        pt_release(ts[i]);
        ts[i] = NULL;
    }
}

static int call_fn(checker *c, pt_tensor **outs)
{
    for (int k = 0; k < GC_MAX_OUT; k++)
        outs[k] = NULL;
    int n_out = c->fn(c->ctx, c->n, c->inputs, outs);
    if (n_out < 0)
        return -1;
    for (int k = 0; k < n_out; k++)
        if (!outs[k]) {
            release_all(n_out, outs);
            if (pt_last_status() == PT_OK)
                pti_error(PT_ERR_NULL, "%s: the function returned NULL for output %d", c->op, k);
            return -1;
        }
    return n_out;
}

/* Fills c->jac row by row: one pt_autograd_grad per output element. */
static pt_status analytical(checker *c)
{
    pt_tensor *outs[GC_MAX_OUT];
    int n_out = call_fn(c, outs);
    if (n_out < 0)
        return pt_last_status();
    c->n_out = n_out;
    c->total_out = 0;
    for (int k = 0; k < n_out; k++) {
        c->out_numel[k] = outs[k]->numel;
        c->out_start[k] = c->total_out;
        c->out_ndim[k] = outs[k]->ndim;
        for (int d = 0; d < outs[k]->ndim; d++)
            c->out_shape[k][d] = outs[k]->shape[d];
        c->total_out += outs[k]->numel;
    }
    pt_tensor *req_inputs[GC_MAX_IN];
    for (int r = 0; r < c->n_req; r++) {
        req_inputs[r] = c->inputs[c->req[r]];
        c->jac[r] = pti_calloc((size_t)(c->total_out * req_inputs[r]->numel) + 1, sizeof(double));
        if (!c->jac[r]) {
            release_all(n_out, outs);
            return pti_error(PT_ERR_OOM, "%s: out of memory for the Jacobian", c->op);
        }
    }
    pt_status st = PT_OK;
    for (int k = 0; k < n_out && st == PT_OK; k++) {
        if (!outs[k]->requires_grad)
            continue; /* constant output: its Jacobian rows stay zero */
        for (int64_t j = 0; j < outs[k]->numel && st == PT_OK; j++) {
            bool prev = pt_set_grad_enabled(false);
            pt_tensor *onehot =
                pt_zeros(outs[k]->ndim, outs[k]->shape, outs[k]->dtype, outs[k]->storage->device);
            pt_tensor *one = onehot ? element_view(onehot, j) : NULL;
            st = one ? pt_fill_(one, 1.0) : pt_last_status();
            pt_release(one);
            pt_set_grad_enabled(prev);
            pt_tensor *grads[GC_MAX_IN] = {0};
            if (st == PT_OK)
                st = pt_autograd_grad(1, &outs[k], &onehot, c->n_req, req_inputs, true, false, true,
                                      grads);
            pt_release(onehot);
            for (int r = 0; r < c->n_req && st == PT_OK; r++) {
                const pt_tensor *in = req_inputs[r], *g = grads[r];
                if (!g)
                    continue;
                if (g->ndim != in->ndim || g->dtype != in->dtype) {
                    st = pti_error(PT_ERR_RUNTIME,
                                   "%s: the gradient for input %d is %s but the "
                                   "input is %s",
                                   c->op, c->req[r], pti_tensor_desc(g), pti_tensor_desc(in));
                    break;
                }
                for (int d = 0; d < g->ndim; d++)
                    if (g->shape[d] != in->shape[d])
                        st = pti_error(PT_ERR_RUNTIME,
                                       "%s: the gradient for input %d is %s but "
                                       "the input is %s",
                                       c->op, c->req[r], pti_tensor_desc(g), pti_tensor_desc(in));
                if (st == PT_OK)
                    st = read_f64(g, c->jac[r] + (c->out_start[k] + j) * in->numel);
            }
            release_all(c->n_req, grads);
        }
    }
    release_all(n_out, outs);
    return st;
}

/* Evaluates the function into dst (total_out doubles). */
static pt_status evaluate(checker *c, double *dst)
{
    pt_tensor *outs[GC_MAX_OUT];
    int n_out = call_fn(c, outs);
    if (n_out < 0)
        return pt_last_status();
    pt_status st = PT_OK;
    if (n_out != c->n_out)
        st = pti_error(PT_ERR_RUNTIME, "%s: the function returned %d outputs, then %d", c->op,
                       c->n_out, n_out);
    for (int k = 0; k < n_out && st == PT_OK; k++) {
        if (outs[k]->numel != c->out_numel[k])
            st = pti_error(PT_ERR_RUNTIME, "%s: output %d changed its size under perturbation",
                           c->op, k);
        else
            st = read_f64(outs[k], dst + c->out_start[k]);
    }
    release_all(n_out, outs);
    return st;
}

static const char *index_str(int ndim, const int64_t *shape, int64_t k)
{
    int64_t idx[PT_MAX_DIMS];
    unravel(k, ndim, shape, idx);
    return pti_shape_str(ndim, idx);
}

/* Perturbs every element of every required input and compares the columns. */
static pt_status numerical(checker *c, bool *ok)
{
    double *plus = pti_malloc(sizeof(double) * (size_t)(c->total_out + 1));
    double *minus = pti_malloc(sizeof(double) * (size_t)(c->total_out + 1));
    if (!plus || !minus) {
        free(plus);
        free(minus);
        return pti_error(PT_ERR_OOM, "%s: out of memory", c->op);
    }
    pt_status st = PT_OK;
    for (int r = 0; r < c->n_req && st == PT_OK && *ok; r++) {
        const pt_tensor *in = c->inputs[c->req[r]];
        for (int64_t e = 0; e < in->numel && st == PT_OK && *ok; e++) {
            pt_tensor *el = element_view(in, e);
            if (!el) {
                st = pt_last_status();
                break;
            }
            double x = pt_item(el);
            st = pt_fill_(el, x + c->eps);
            if (st == PT_OK)
                st = evaluate(c, plus);
            if (st == PT_OK)
                st = pt_fill_(el, x - c->eps);
            if (st == PT_OK)
                st = evaluate(c, minus);
            pt_status restore = pt_fill_(el, x);
            pt_release(el);
            if (st == PT_OK)
                st = restore;
            for (int64_t o = 0; st == PT_OK && o < c->total_out; o++) {
                double num = (plus[o] - minus[o]) / (2 * c->eps);
                double ana = c->jac[r][o * in->numel + e];
                if (fabs(ana - num) <= c->atol + c->rtol * fabs(num))
                    continue;
                int k = 0;
                while (k + 1 < c->n_out && c->out_start[k + 1] <= o)
                    k++;
                *ok = false;
                st = pti_error(
                    PT_ERR_RUNTIME,
                    "%s: Jacobian mismatch for output %d element %s with respect to "
                    "input %d element %s: analytical %.10g, numerical %.10g "
                    "(atol %g, rtol %g)",
                    c->op, k, index_str(c->out_ndim[k], c->out_shape[k], o - c->out_start[k]),
                    c->req[r], index_str(in->ndim, in->shape, e), ana, num, c->atol, c->rtol);
            }
        }
    }
    free(plus);
    free(minus);
    return st;
}

static pt_status check_inputs(checker *c)
{
    if (c->n < 1 || c->n > GC_MAX_IN || !c->inputs)
        return pti_error(PT_ERR_INVALID_ARG, "%s: need 1..%d inputs (got %d)", c->op, GC_MAX_IN,
                         c->n);
    c->n_req = 0;
    for (int i = 0; i < c->n; i++) {
        const pt_tensor *t = c->inputs[i];
        if (!t)
            return pti_error(PT_ERR_NULL, "%s: input %d is NULL", c->op, i);
        if (!t->requires_grad)
            continue;
        if (t->dtype != PT_FLOAT64)
            return pti_error(PT_ERR_DTYPE,
                             "%s: input %d requires grad but is %s; use float64 "
                             "inputs (finite differences are too inexact otherwise)",
                             c->op, i, pt_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            if (t->stride[d] == 0 && t->shape[d] > 1)
                return pti_error(PT_ERR_INVALID_ARG,
                                 "%s: input %d (%s) has overlapping memory "
                                 "(an expanded view); pass a contiguous copy",
                                 c->op, i, pti_tensor_desc(t));
        c->req[c->n_req++] = i;
    }
    if (c->n_req == 0)
        return pti_error(PT_ERR_INVALID_ARG, "%s: no input requires grad", c->op);
    return PT_OK;
}

static bool run_checker(checker *c, const pt_gradcheck_opts *opts)
{
    c->eps = opts && opts->eps > 0 ? opts->eps : 1e-6;
    c->atol = opts && opts->atol > 0 ? opts->atol : 1e-5;
    c->rtol = opts && opts->rtol > 0 ? opts->rtol : 1e-3;
    for (int r = 0; r < GC_MAX_IN; r++)
        c->jac[r] = NULL;
    pt_clear_error();
    bool ok = true;
    pt_scope_begin();
    pt_status st = check_inputs(c);
    if (st == PT_OK) {
        bool prev = pt_set_grad_enabled(true);
        st = analytical(c);
        pt_set_grad_enabled(prev);
    }
    if (st == PT_OK) {
        /* no graph is needed for the perturbed evaluations (the gradgrad function turns grad
         * mode back on inside, as it needs its own graph) */
        bool prev = pt_set_grad_enabled(false);
        st = numerical(c, &ok);
        pt_set_grad_enabled(prev);
    }
    pt_scope_end();
    for (int r = 0; r < c->n_req; r++)
        free(c->jac[r]);
    return st == PT_OK && ok;
}

/* ---- gradcheck ------------------------------------------------------------------------------ */

typedef struct single_ctx {
    pt_grad_fn fn;
    void *user;
} single_ctx;

static int single_call(void *ctx, int n, pt_tensor *const *inputs, pt_tensor **outs)
{
    single_ctx *s = ctx;
    outs[0] = s->fn(n, inputs, s->user);
    if (!outs[0]) {
        if (pt_last_status() == PT_OK)
            pti_error(PT_ERR_NULL, "pt_gradcheck: the function returned NULL");
        return -1;
    }
    return 1;
}

bool pt_gradcheck(pt_grad_fn fn, void *user, int n, pt_tensor *const *inputs,
                  const pt_gradcheck_opts *opts)
{
    if (!fn) {
        pti_error(PT_ERR_NULL, "pt_gradcheck: fn is NULL");
        return false;
    }
    single_ctx s = {fn, user};
    checker c = {.op = "pt_gradcheck", .fn = single_call, .ctx = &s, .n = n, .inputs = inputs};
    return run_checker(&c, opts);
}

/* ---- gradgradcheck -------------------------------------------------------------------------- */

typedef struct vjp_ctx {
    pt_grad_fn fn;
    void *user;
    int n; /* the user's inputs; inputs[n] is the grad_output v */
} vjp_ctx;

/* (inputs, v) -> d fn(inputs) / d inputs . v, one result per input that requires grad. */
static int vjp_call(void *ctx, int n_all, pt_tensor *const *inputs, pt_tensor **outs)
{
    vjp_ctx *v = ctx;
    (void)n_all;
    bool prev = pt_set_grad_enabled(true);
    pt_tensor *y = v->fn(v->n, inputs, v->user);
    pt_tensor *req[GC_MAX_IN];
    int idx[GC_MAX_IN], n_req = 0;
    for (int i = 0; i < v->n; i++)
        if (inputs[i]->requires_grad) {
            idx[n_req] = i;
            req[n_req++] = inputs[i];
        }
    pt_tensor *grads[GC_MAX_IN] = {0};
    pt_status st = PT_OK;
    if (!y)
        st = pt_last_status() != PT_OK
                 ? pt_last_status()
                 : pti_error(PT_ERR_NULL, "pt_gradgradcheck: fn returned NULL");
    else if (!y->requires_grad)
        st = PT_OK; /* constant in the inputs: every vjp is zero */
    else
        st = pt_autograd_grad(1, &y, &inputs[v->n], n_req, req, false, true, true, grads);
    pt_release(y);
    pt_set_grad_enabled(prev);
    if (st != PT_OK) {
        release_all(n_req, grads);
        return -1;
    }
    for (int r = 0; r < n_req; r++) {
        outs[r] = grads[r] ? grads[r] : pt_zeros_like(inputs[idx[r]]);
        if (!outs[r]) {
            release_all(n_req, outs);
            return -1;
        }
    }
    return n_req;
}

bool pt_gradgradcheck(pt_grad_fn fn, void *user, int n, pt_tensor *const *inputs,
                      const pt_gradcheck_opts *opts)
{
    const char *op = "pt_gradgradcheck";
    if (!fn) {
        pti_error(PT_ERR_NULL, "%s: fn is NULL", op);
        return false;
    }
    if (n < 1 || n >= GC_MAX_IN || !inputs) {
        pti_error(PT_ERR_INVALID_ARG, "%s: need 1..%d inputs (got %d)", op, GC_MAX_IN - 1, n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!inputs[i]) {
            pti_error(PT_ERR_NULL, "%s: input %d is NULL", op, i);
            return false;
        }
    pt_scope_begin();
    /* the output's geometry, to draw v */
    bool prev = pt_set_grad_enabled(false);
    pt_tensor *y = fn(n, inputs, user);
    pt_tensor *v = y ? pt_randn(y->ndim, y->shape, PT_FLOAT64, y->storage->device) : NULL;
    pt_set_grad_enabled(prev);
    pt_release(y);
    bool ok = false;
    if (!v) {
        if (pt_last_status() == PT_OK)
            pti_error(PT_ERR_NULL, "%s: the function returned NULL", op);
    } else if (pt_requires_grad_(v, true) == PT_OK) {
        pt_tensor *all[GC_MAX_IN];
        for (int i = 0; i < n; i++)
            all[i] = inputs[i];
        all[n] = v;
        vjp_ctx ctx = {fn, user, n};
        checker c = {.op = op, .fn = vjp_call, .ctx = &ctx, .n = n + 1, .inputs = all};
        ok = run_checker(&c, opts);
    }
    pt_release(v);
    pt_scope_end();
    return ok;
}
