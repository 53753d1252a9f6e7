/* Backward formulas of the reduce family (recorded by the front-ends in reduce.c through
 * pti_reduce_record). Every formula is composed of public ops, so it records its own graph
 * under create_graph (double backward). Public ops propagate a NULL argument as the earlier
 * error, so a chain of them is checked once, at its end.
 *
 * Node settings: i[0] = reduced-dims bitmask (the one dim for cumsum/softmax/...), i[1] =
 * keepdim, i[2] = input ndim, i[3 + d] = input shape; d[0] = correction (var/std) or p (norm).
 * Formulas follow PyTorch's derivatives (tools/autograd/derivatives.yaml), including its
 * subgradient choices: ties of max/min/amax/amin share the gradient evenly, max_dim/min_dim
 * send it to the returned index, a zero norm/std gets a zero gradient, and prod/cumprod handle
 * zeros in the input exactly. */
#include <math.h>
#include <stdlib.h>

#include "common.h"
#include "reduce_grad.h"

/* ---- shapes ---------------------------------------------------------------------------------- */

static int in_ndim(const pti_node *n)
{
    return (int)n->i[2];
}

static const int64_t *in_shape(const pti_node *n)
{
    return n->i + 3;
}

static uint32_t red_bits(const pti_node *n)
{
    return (uint32_t)n->i[0];
}

/* The one dim of a dim-wise op. */
static int64_t the_dim(const pti_node *n)
{
    uint32_t b = red_bits(n);
    int64_t d = 0;
    while (b > 1) {
        b >>= 1;
        d++;
    }
    return d;
}

/* The reduced dims as a list; returns their count. */
static int red_dims(const pti_node *n, int64_t *dims)
{
    int k = 0;
    for (int d = 0; d < in_ndim(n); d++)
        if (red_bits(n) & (1u << d))
            dims[k++] = d;
    return k;
}

/* Elements reduced into each output element. */
static int64_t red_count(const pti_node *n)
{
    int64_t c = 1;
    for (int d = 0; d < in_ndim(n); d++)
        if (red_bits(n) & (1u << d))
            c *= in_shape(n)[d];
    return c;
}

/* An output-shaped tensor viewed with the reduced dims kept as size 1 (new reference). */
static pt_tensor *keepdim_view(const pti_node *n, const pt_tensor *g)
{
    int64_t shape[PT_MAX_DIMS];
    for (int d = 0; d < in_ndim(n); d++)
        shape[d] = (red_bits(n) & (1u << d)) ? 1 : in_shape(n)[d];
    return pt_reshape(g, in_ndim(n), shape);
}

/* A keepdim-shaped tensor broadcast to the input shape (a view). */
static pt_tensor *expand_to_input(const pti_node *n, const pt_tensor *g_kd)
{
    return pt_expand(g_kd, in_ndim(n), in_shape(n));
}

/* Stores the result (or the pending error) of a formula in grad_in[0]. */
static pt_status done(pt_tensor **grad_in, pt_tensor *g)
{
    grad_in[0] = g;
    return g ? PT_OK : pt_last_status();
}

/* 1 when t has a zero element, 0 when not, -1 on error. */
static int has_zero(const pt_tensor *t)
{
    pt_tensor *z = pt_eq_scalar(t, 0.0);
    pt_tensor *any = pt_any(z);
    pt_release(z);
    if (!any)
        return -1;
    double v = pt_item(any);
    pt_release(any);
    return v != 0.0;
}

/* x * y, releasing both. */
static pt_tensor *mul_owned(pt_tensor *x, pt_tensor *y)
{
    pt_tensor *r = pt_mul(x, y);
    pt_release(x);
    pt_release(y);
    return r;
}

/* Sum from each position to the end of dim (a reversed cumsum). */
static pt_tensor *rev_cumsum(const pt_tensor *t, int64_t dim)
{
    pt_tensor *f = pt_flip(t, 1, &dim);
    pt_tensor *c = pt_cumsum(f, dim);
    pt_tensor *r = pt_flip(c, 1, &dim);
    pt_release(f);
    pt_release(c);
    return r;
}

/* ---- sum, mean ---------------------------------------------------------------------------------
 */

static pt_status sum_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *g_kd = keepdim_view(n, grad_out[0]);
    pt_tensor *g = expand_to_input(n, g_kd);
    pt_release(g_kd);
    return done(grad_in, g);
}

static pt_status mean_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *g_kd = keepdim_view(n, grad_out[0]);
    pt_tensor *scaled = pt_div_scalar(g_kd, (double)red_count(n));
    pt_tensor *g = expand_to_input(n, scaled);
    pt_release(g_kd);
    pt_release(scaled);
    return done(grad_in, g);
}

/* ---- prod ------------------------------------------------------------------------------------ */

/* For each element of x, the product of the other elements along dim (exact with zeros):
 * the exclusive running product from the left times the one from the right. */
static pt_tensor *product_of_others(const pt_tensor *x, int64_t dim)
{
    int64_t len = pt_size(x, dim);
    if (len <= 1)
        return pt_ones_like(x);
    pt_tensor *first = pt_narrow(x, dim, 0, 1);
    pt_tensor *one = pt_ones_like(first);
    pt_tensor *head = pt_narrow(x, dim, 0, len - 1);
    const pt_tensor *lparts[2] = {one, head};
    pt_tensor *lcat = pt_cat(2, lparts, dim);
    pt_tensor *left = pt_cumprod(lcat, dim);
    pt_tensor *xr = pt_flip(x, 1, &dim);
    pt_tensor *rhead = pt_narrow(xr, dim, 0, len - 1);
    const pt_tensor *rparts[2] = {one, rhead};
    pt_tensor *rcat = pt_cat(2, rparts, dim);
    pt_tensor *rcum = pt_cumprod(rcat, dim);
    pt_tensor *right = pt_flip(rcum, 1, &dim);
    pt_tensor *r = pt_mul(left, right);
    pt_tensor *tmp[] = {first, one, head, lcat, left, xr, rhead, rcat, rcum, right};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        pt_release(tmp[i]);
    return r;
}

/* slot 0: input, slot 1: output. Without zeros: g * out / x (PyTorch's fast path); with
 * zeros: g * (product of the others). prod() over all dims works on the flattened input. */
static pt_status prod_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *x = pti_node_saved(n, 0);
    pt_tensor *out = pti_node_saved(n, 1);
    pt_tensor *g_kd = keepdim_view(n, grad_out[0]);
    pt_tensor *g = NULL;
    int z = x ? has_zero(x) : -1;
    if (z == 0) {
        pt_tensor *out_kd = keepdim_view(n, out);
        pt_tensor *go = pt_mul(g_kd, out_kd);
        g = pt_div(go, x);
        pt_release(out_kd);
        pt_release(go);
    } else if (z == 1) {
        bool all = in_ndim(n) == 0 || red_count(n) == pt_numel(x);
        pt_tensor *others;
        if (all && in_ndim(n) != 1) {
            int64_t flat = pt_numel(x);
            pt_tensor *xf = pt_reshape(x, 1, &flat);
            pt_tensor *of = product_of_others(xf, 0);
            others = pt_reshape(of, in_ndim(n), in_shape(n));
            pt_release(xf);
            pt_release(of);
        } else {
            others = product_of_others(x, the_dim(n));
        }
        g = pt_mul(g_kd, others);
        pt_release(others);
    }
    pt_release(x);
    pt_release(out);
    pt_release(g_kd);
    return done(grad_in, g);
}

/* ---- max, min, amax, amin ----------------------------------------------------------------------
 */

/* slot 0: input, slot 1: output. mask = the elements equal to the result; each gets
 * g / (number of them). max()/min() also count NaN elements when the result is NaN (PyTorch's
 * evenly_distribute_backward); amax/amin do not. */
static pt_status extreme_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *x = pti_node_saved(n, 0);
    pt_tensor *out = pti_node_saved(n, 1);
    pt_tensor *out_kd = keepdim_view(n, out);
    pt_tensor *mask = pt_eq(x, out_kd);
    if (n->d[1] == PTI_RG_EXTREME_ALL) {
        pt_tensor *xn = pt_isnan(x), *on = pt_isnan(out_kd);
        pt_tensor *both = pt_logical_and(xn, on);
        pt_tensor *m2 = pt_logical_or(mask, both);
        pt_release(xn);
        pt_release(on);
        pt_release(both);
        pt_release(mask);
        mask = m2;
    }
    pt_tensor *maskf = pt_to_dtype(mask, pt_dtype_of(grad_out[0]));
    int64_t dims[PT_MAX_DIMS];
    int nd = red_dims(n, dims);
    pt_tensor *count = nd ? pt_sum_dim(maskf, nd, dims, true) : pt_retain(maskf);
    pt_tensor *g_kd = keepdim_view(n, grad_out[0]);
    pt_tensor *share = pt_div(g_kd, count);
    pt_tensor *g = pt_mul(maskf, share);
    pt_tensor *tmp[] = {x, out, out_kd, mask, maskf, count, g_kd, share};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        pt_release(tmp[i]);
    return done(grad_in, g);
}

/* slot 0: the indices. The gradient goes to the selected element: g where the position along
 * dim equals the index (a one-hot mask, so the formula stays differentiable in g). */
static pt_status extreme_dim_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    if (in_ndim(n) == 0)
        return done(grad_in, pt_retain(grad_out[0]));
    pt_tensor *idx = pti_node_saved(n, 0);
    pt_tensor *idx_kd = keepdim_view(n, idx);
    int64_t dim = the_dim(n), len = in_shape(n)[dim];
    int64_t ashape[PT_MAX_DIMS];
    for (int d = 0; d < in_ndim(n); d++)
        ashape[d] = d == dim ? len : 1;
    pt_tensor *ar = pt_arange(0, (double)len, 1, PT_INT64, pt_device_of(grad_out[0]));
    pt_tensor *arv = pt_reshape(ar, in_ndim(n), ashape);
    pt_tensor *hit = pt_eq(arv, idx_kd);
    pt_tensor *hitf = pt_to_dtype(hit, pt_dtype_of(grad_out[0]));
    pt_tensor *g_kd = keepdim_view(n, grad_out[0]);
    pt_tensor *g = pt_mul(hitf, g_kd);
    pt_tensor *tmp[] = {idx, idx_kd, ar, arv, hit, hitf, g_kd};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        pt_release(tmp[i]);
    return done(grad_in, g);
}

/* ---- var, std, norm, logsumexp ------------------------------------------------------------------
 */

/* d var / dx weighted by gv_kd (keepdim-shaped): gv * 2 (x - mean) / (N - correction). */
static pt_tensor *var_grad(const pti_node *n, const pt_tensor *x, const pt_tensor *gv_kd)
{
    int64_t dims[PT_MAX_DIMS];
    int nd = red_dims(n, dims);
    pt_tensor *mean = pt_mean_dim(x, nd, dims, true);
    pt_tensor *diff = pt_sub(x, mean);
    double scale = 2.0 / ((double)red_count(n) - n->d[0]);
    pt_tensor *sd = pt_mul_scalar(diff, scale);
    pt_tensor *g = pt_mul(sd, gv_kd);
    pt_release(mean);
    pt_release(diff);
    pt_release(sd);
    return g;
}

/* slot 0: input. */
static pt_status var_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *x = pti_node_saved(n, 0);
    pt_tensor *g_kd = keepdim_view(n, grad_out[0]);
    pt_tensor *g = var_grad(n, x, g_kd);
    pt_release(x);
    pt_release(g_kd);
    return done(grad_in, g);
}

/* slot 0: input, slot 1: output. d std = d var / (2 std), taken as 0 where std == 0. */
static pt_status std_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *x = pti_node_saved(n, 0);
    pt_tensor *out = pti_node_saved(n, 1);
    pt_tensor *out_kd = keepdim_view(n, out);
    pt_tensor *g_kd = keepdim_view(n, grad_out[0]);
    pt_tensor *two = pt_mul_scalar(out_kd, 2.0);
    pt_tensor *q = pt_div(g_kd, two);
    pt_tensor *zero = pt_eq_scalar(out_kd, 0.0);
    pt_tensor *gv = pt_masked_fill(q, zero, 0.0);
    pt_tensor *g = var_grad(n, x, gv);
    pt_tensor *tmp[] = {x, out, out_kd, g_kd, two, q, zero, gv};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        pt_release(tmp[i]);
    return done(grad_in, g);
}

/* p = +-inf: sign(x) * g shared evenly among the elements whose |x| equals the norm (or that
 * are NaN when the norm is NaN). */
static pt_tensor *norm_inf_grad(const pti_node *n, const pt_tensor *x, const pt_tensor *norm_kd,
                                const pt_tensor *g_kd)
{
    pt_tensor *ax = pt_abs(x);
    pt_tensor *eq = pt_eq(ax, norm_kd);
    pt_tensor *xn = pt_isnan(x), *nn = pt_isnan(norm_kd);
    pt_tensor *both = pt_logical_and(xn, nn);
    pt_tensor *mask = pt_logical_or(eq, both);
    pt_tensor *maskf = pt_to_dtype(mask, pt_dtype_of(g_kd));
    int64_t dims[PT_MAX_DIMS];
    int nd = red_dims(n, dims);
    pt_tensor *count = nd ? pt_sum_dim(maskf, nd, dims, true) : pt_retain(maskf);
    pt_tensor *share = pt_div(g_kd, count);
    pt_tensor *sg = pt_sign(x);
    pt_tensor *scaled = pt_mul(sg, maskf);
    pt_tensor *g = pt_mul(scaled, share);
    pt_tensor *tmp[] = {ax, eq, xn, nn, both, mask, maskf, count, share, sg, scaled};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        pt_release(tmp[i]);
    return g;
}

/* General p: sign(x) |x|^(p-1) * g / norm^(p-1). For p < 1 the x == 0 terms are 0 (|x|^(p-1)
 * is infinite there); for p > 1 a zero norm gives a zero gradient. */
static pt_tensor *norm_p_grad(double p, const pt_tensor *x, const pt_tensor *norm_kd,
                              const pt_tensor *g_kd)
{
    pt_tensor *sg = pt_sign(x);
    pt_tensor *ax = pt_abs(x);
    pt_tensor *axp = pt_pow_scalar(ax, p - 1.0);
    pt_tensor *scaled = pt_mul(sg, axp);
    pt_tensor *np = pt_pow_scalar(norm_kd, p - 1.0);
    pt_tensor *share = pt_div(g_kd, np);
    pt_tensor *g;
    if (p < 1.0) {
        pt_tensor *xz = pt_eq_scalar(x, 0.0);
        pt_tensor *safe = pt_masked_fill(scaled, xz, 0.0);
        g = pt_mul(safe, share);
        pt_release(xz);
        pt_release(safe);
    } else {
        pt_tensor *nz = pt_eq_scalar(norm_kd, 0.0);
        pt_tensor *safe = pt_masked_fill(share, nz, 0.0);
        g = pt_mul(scaled, safe);
        pt_release(nz);
        pt_release(safe);
    }
    pt_tensor *tmp[] = {sg, ax, axp, scaled, np, share};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        pt_release(tmp[i]);
    return g;
}

/* slot 0: input, slot 1: output; d[0] = p. */
static pt_status norm_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    double p = n->d[0];
    pt_tensor *x = pti_node_saved(n, 0);
    pt_tensor *out = pti_node_saved(n, 1);
    pt_tensor *norm_kd = keepdim_view(n, out);
    pt_tensor *g_kd = keepdim_view(n, grad_out[0]);
    pt_tensor *g;
    if (p == 0.0) {
        g = x ? pt_zeros_like(x) : NULL;
    } else if (p == 1.0) {
        pt_tensor *sg = pt_sign(x);
        g = pt_mul(sg, g_kd);
        pt_release(sg);
    } else if (p == 2.0) {
        pt_tensor *q = pt_div(x, norm_kd);
        pt_tensor *nz = pt_eq_scalar(norm_kd, 0.0);
        pt_tensor *safe = pt_masked_fill(q, nz, 0.0);
        g = pt_mul(safe, g_kd);
        pt_release(q);
        pt_release(nz);
        pt_release(safe);
    } else if (isinf(p)) {
        g = norm_inf_grad(n, x, norm_kd, g_kd);
    } else {
        g = norm_p_grad(p, x, norm_kd, g_kd);
    }
    pt_tensor *tmp[] = {x, out, norm_kd, g_kd};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        pt_release(tmp[i]);
    return done(grad_in, g);
}

/* slot 0: input, slot 1: output. g * exp(x - logsumexp). */
static pt_status logsumexp_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *x = pti_node_saved(n, 0);
    pt_tensor *out = pti_node_saved(n, 1);
    pt_tensor *out_kd = keepdim_view(n, out);
    pt_tensor *g_kd = keepdim_view(n, grad_out[0]);
    pt_tensor *diff = pt_sub(x, out_kd);
    pt_tensor *e = pt_exp(diff);
    pt_tensor *g = pt_mul(e, g_kd);
    pt_tensor *tmp[] = {x, out, out_kd, g_kd, diff, e};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        pt_release(tmp[i]);
    return done(grad_in, g);
}

/* ---- cumsum, cumprod, softmax, log_softmax
 * ------------------------------------------------------- */

static pt_status cumsum_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    if (in_ndim(n) == 0)
        return done(grad_in, pt_retain(grad_out[0]));
    return done(grad_in, rev_cumsum(grad_out[0], the_dim(n)));
}

/* cumprod with zeros along dim. Let k be the first zero of a slice. Positions before k: the
 * zero-free formula. Position k: sum over j >= k of g_j * prod_{m <= j, m != k} x_m, which is
 * the reversed cumsum of g * cumprod(x with x_k set to 1). Positions after k: 0. */
static pt_tensor *cumprod_grad_zeros(const pt_tensor *x, const pt_tensor *out, const pt_tensor *g,
                                     int64_t dim)
{
    pt_tensor *iszero = pt_eq_scalar(x, 0.0);
    pt_tensor *nzeros = pt_cumsum(iszero, dim);
    pt_tensor *before = pt_eq_scalar(nzeros, 0.0);
    pt_tensor *not_before = pt_logical_not(before);
    pt_tensor *one_zero = pt_eq_scalar(nzeros, 1.0);
    pt_tensor *first = pt_logical_and(iszero, one_zero);
    pt_tensor *not_first = pt_logical_not(first);
    /* before k */
    pt_tensor *go = pt_mul(g, out);
    pt_tensor *rgo = rev_cumsum(go, dim);
    pt_tensor *xsafe = pt_masked_fill(x, not_before, 1.0);
    pt_tensor *a = pt_div(rgo, xsafe);
    pt_tensor *a0 = pt_masked_fill(a, not_before, 0.0);
    /* at k */
    pt_tensor *x1 = pt_masked_fill(x, first, 1.0);
    pt_tensor *z = pt_cumprod(x1, dim);
    pt_tensor *gz = pt_mul(g, z);
    pt_tensor *rgz = rev_cumsum(gz, dim);
    pt_tensor *b0 = pt_masked_fill(rgz, not_first, 0.0);
    pt_tensor *r = pt_add(a0, b0);
    pt_tensor *tmp[] = {iszero, nzeros, before, not_before, one_zero, first, not_first, go, rgo,
                        xsafe,  a,      a0,     x1,         z,        gz,    rgz,       b0};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        pt_release(tmp[i]);
    return r;
}

/* The zeros formula again, as a function that stays differentiable at the zeros (the one
 * above treats the positions after the first zero as constant 0, which is right in value but
 * not in derivative): grad_i = left_i * (g_i + sum_{j > i} g_j * prod_{i < m <= j} x_m), with
 * left_i the product of the elements before i. O(len^2) work, used only under create_graph,
 * as PyTorch does. */
static pt_tensor *cumprod_grad_twice(const pt_tensor *x, const pt_tensor *g, int64_t dim)
{
    int64_t len = pt_size(x, dim);
    pt_tensor **parts = pti_calloc((size_t)len, sizeof *parts);
    if (!parts)
        return pti_error_null(PT_ERR_OOM, "cumprod backward: out of memory");
    for (int64_t i = 0; i < len; i++) {
        pt_tensor *gi = pt_narrow(g, dim, i, 1);
        if (i + 1 == len) {
            parts[i] = gi;
            continue;
        }
        pt_tensor *tail = pt_narrow(x, dim, i + 1, len - i - 1);
        pt_tensor *cp = pt_cumprod(tail, dim);
        pt_tensor *gt = pt_narrow(g, dim, i + 1, len - i - 1);
        pt_tensor *w = pt_mul(gt, cp);
        pt_tensor *sw = pt_sum_dim(w, 1, &dim, true);
        parts[i] = pt_add(gi, sw);
        pt_tensor *tmp[] = {gi, tail, cp, gt, w, sw};
        for (size_t k = 0; k < sizeof tmp / sizeof *tmp; k++)
            pt_release(tmp[k]);
    }
    pt_tensor *s = pt_cat((int)len, (const pt_tensor *const *)parts, dim);
    for (int64_t i = 0; i < len; i++)
        pt_release(parts[i]);
    free(parts);
    pt_tensor *first = pt_narrow(x, dim, 0, 1);
    pt_tensor *one = pt_ones_like(first);
    pt_tensor *head = pt_narrow(x, dim, 0, len - 1);
    const pt_tensor *lparts[2] = {one, head};
    pt_tensor *lcat = pt_cat(2, lparts, dim);
    pt_tensor *left = pt_cumprod(lcat, dim);
    pt_tensor *r = pt_mul(left, s);
    pt_tensor *tmp[] = {s, first, one, head, lcat, left};
    for (size_t k = 0; k < sizeof tmp / sizeof *tmp; k++)
        pt_release(tmp[k]);
    return r;
}

/* slot 0: input, slot 1: output. Zero-free: reversed cumsum of g * out, divided by x. */
static pt_status cumprod_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    if (in_ndim(n) == 0)
        return done(grad_in, pt_retain(grad_out[0]));
    int64_t dim = the_dim(n);
    pt_tensor *x = pti_node_saved(n, 0);
    pt_tensor *out = pti_node_saved(n, 1);
    pt_tensor *g = NULL;
    int z = x && out ? has_zero(x) : -1;
    if (z == 0) {
        pt_tensor *go = pt_mul(grad_out[0], out);
        pt_tensor *r = rev_cumsum(go, dim);
        g = pt_div(r, x);
        pt_release(go);
        pt_release(r);
    } else if (z == 1 && pt_grad_enabled()) {
        g = cumprod_grad_twice(x, grad_out[0], dim);
    } else if (z == 1) {
        g = cumprod_grad_zeros(x, out, grad_out[0], dim);
    }
    pt_release(x);
    pt_release(out);
    return done(grad_in, g);
}

/* slot 0: output y. y * (g - sum(g * y)). */
static pt_status softmax_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    int64_t dim = the_dim(n);
    pt_tensor *y = pti_node_saved(n, 0);
    pt_tensor *gy = pt_mul(grad_out[0], y);
    pt_tensor *s = in_ndim(n) ? pt_sum_dim(gy, 1, &dim, true) : pt_retain(gy);
    pt_tensor *d = pt_sub(grad_out[0], s);
    pt_tensor *g = pt_mul(y, d);
    pt_tensor *tmp[] = {y, gy, s, d};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        pt_release(tmp[i]);
    return done(grad_in, g);
}

/* slot 0: output y. g - exp(y) * sum(g). */
static pt_status log_softmax_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    int64_t dim = the_dim(n);
    pt_tensor *y = pti_node_saved(n, 0);
    pt_tensor *e = pt_exp(y);
    pt_tensor *s = in_ndim(n) ? pt_sum_dim(grad_out[0], 1, &dim, true) : pt_retain(grad_out[0]);
    pt_tensor *es = mul_owned(e, s);
    pt_tensor *g = pt_sub(grad_out[0], es);
    pt_release(y);
    pt_release(es);
    return done(grad_in, g);
}

/* ---- recording ---------------------------------------------------------------------------------
 */

static const pti_backward_fn formulas[] = {
    [PTI_RG_SUM] = sum_backward,         [PTI_RG_MEAN] = mean_backward,
    [PTI_RG_PROD] = prod_backward,       [PTI_RG_EXTREME_ALL] = extreme_backward,
    [PTI_RG_AMAX] = extreme_backward,    [PTI_RG_EXTREME_DIM] = extreme_dim_backward,
    [PTI_RG_VAR] = var_backward,         [PTI_RG_STD] = std_backward,
    [PTI_RG_NORM] = norm_backward,       [PTI_RG_LOGSUMEXP] = logsumexp_backward,
    [PTI_RG_CUMSUM] = cumsum_backward,   [PTI_RG_CUMPROD] = cumprod_backward,
    [PTI_RG_SOFTMAX] = softmax_backward, [PTI_RG_LOG_SOFTMAX] = log_softmax_backward,
};

/* What a formula saves: the input (before finishing), the output (after). */
static bool saves_input(pti_reduce_grad k)
{
    return k == PTI_RG_PROD || k == PTI_RG_EXTREME_ALL || k == PTI_RG_AMAX || k == PTI_RG_VAR ||
           k == PTI_RG_STD || k == PTI_RG_NORM || k == PTI_RG_LOGSUMEXP || k == PTI_RG_CUMPROD;
}

static bool saves_output(pti_reduce_grad k)
{
    return saves_input(k) && k != PTI_RG_VAR;
}

pt_tensor *pti_reduce_record(const char *name, pti_reduce_grad kind, const pt_tensor *t,
                             pt_tensor *out, const pt_tensor *idx, uint32_t bits, bool keepdim,
                             double arg)
{
    if (!out || !pti_grad_recording(1, &t) || !pti_dtypes[out->dtype].is_floating)
        return out;
    pti_node *n = pti_node_new(name, formulas[kind], 1, &t);
    if (!n) {
        pt_release(out);
        return NULL;
    }
    n->i[0] = bits;
    n->i[1] = keepdim;
    n->i[2] = t->ndim;
    for (int d = 0; d < t->ndim; d++)
        n->i[3 + d] = t->shape[d];
    n->d[0] = arg;
    n->d[1] = kind;
    bool ok = true;
    if (kind == PTI_RG_EXTREME_DIM)
        ok = pti_node_save(n, idx) >= 0;
    else if (saves_input(kind))
        ok = pti_node_save(n, t) >= 0;
    if (!ok) {
        pti_node_release(n);
        pt_release(out);
        return NULL;
    }
    if (pti_node_finish(n, 1, &out) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    bool save_out = saves_output(kind) || kind == PTI_RG_SOFTMAX || kind == PTI_RG_LOG_SOFTMAX;
    if (save_out && pti_node_save_output(n, out) < 0) {
        pt_release(out);
        return NULL;
    }
    return out;
}
