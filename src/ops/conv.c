/* Convolution front-ends: pt_conv2d / pt_conv2d_ex, pt_conv1d / pt_conv1d_ex,
 * pt_conv_transpose2d and the gradients pt_conv{1,2}d_input_grad / pt_conv{1,2}d_weight_grad,
 * with F.conv*'s argument checks, output sizes and error messages.
 * 1-D convolutions and unbatched inputs run through the 2-D kernel on [N, C, 1, L] /
 * [1, C, H, W] views. Pooling, padding and interpolation are in conv_pool.c. Kernels:
 * src/backends/cpu/conv.c. */
#include <string.h>

#include "conv.h"

/* ---- helpers shared with conv_pool.c ------------------------------------------------------- */

pt_tensor *pti_conv_prepare(const pt_tensor *t, pt_dtype dt)
{
    pt_tensor *a = pti_as_dtype(t, dt);
    if (!a)
        return NULL;
    pt_tensor *c = pt_contiguous(a);
    pt_release(a);
    return c;
}

pt_tensor *pti_conv_reshape(const pt_tensor *t, int ndim, const int64_t *shape)
{
    int64_t stride[PT_MAX_DIMS];
    pti_contiguous_strides(ndim, shape, stride);
    return pti_tensor_view(t, ndim, shape, stride, t->offset);
}

pt_tensor *pti_conv_finish(pt_tensor *out, int ndim, const int64_t *shape, pt_dtype dt)
{
    pt_tensor *v = pti_conv_reshape(out, ndim, shape);
    pt_release(out);
    if (!v || v->dtype == dt)
        return v;
    pt_tensor *r = pt_to_dtype(v, dt);
    pt_release(v);
    return r;
}

bool pti_conv_check_dtype(const char *op, const char *arg, const pt_tensor *t, pti_conv_ints ints)
{
    const pti_dtype_info *d = &pti_dtypes[t->dtype];
    if (d->is_floating || (d->is_integral && ints == PTI_CONV_INTS_ALL) ||
        (t->dtype == PT_INT64 && ints == PTI_CONV_INTS_INT64))
        return true;
    if (!d->is_integral || ints == PTI_CONV_INTS_NONE)
        return pti_error(PT_ERR_DTYPE, "%s: expected a floating point%s tensor for '%s', got %s",
                         op, ints == PTI_CONV_INTS_NONE ? "" : " or integer", arg,
                         pt_dtype_name(t->dtype)) == PT_OK;
    /* PyTorch's CPU kernel of this op exists for int64 only */
    return pti_error(PT_ERR_DTYPE,
                     "%s: integer '%s' must be int64 (the only integer dtype this op supports), "
                     "got %s",
                     op, arg, pt_dtype_name(t->dtype)) == PT_OK;
}

/* ---- convolution --------------------------------------------------------------------------- */

/* Everything a convolution call needs, resolved from the user's arguments. */
typedef struct conv_args {
    const char *op;
    int nsp; /* spatial dims: 1 or 2 */
    bool transposed;
    int64_t stride[2], pad[2], dilation[2], out_pad[2], groups;
    pt_conv_padding_mode mode;
} conv_args;

static bool check_pair(const char *op, const char *name, const int64_t v[2], int nsp, int64_t min)
{
    for (int i = 2 - nsp; i < 2; i++)
        if (v[i] < min)
            return pti_error(PT_ERR_INVALID_ARG, "%s: %s must be %s, got %lld", op, name,
                             min > 0 ? "positive" : "non-negative", (long long)v[i]) == PT_OK;
    return true;
}

/* Checks dtypes/devices/dims shared by conv and conv_transpose; sets *batched. */
static bool check_conv_tensors(const conv_args *a, const pt_tensor *x, const pt_tensor *w,
                               const pt_tensor *bias, bool *batched)
{
    const pt_tensor *ts[3] = {x, w, bias};
    pti_conv_ints ints = a->transposed ? PTI_CONV_INTS_INT64 : PTI_CONV_INTS_ALL;
    if (!pti_check_same_device(a->op, 3, ts) || !pti_conv_check_dtype(a->op, "input", x, ints))
        return false;
    if (w->dtype != x->dtype || (bias && bias->dtype != x->dtype))
        return pti_error(PT_ERR_DTYPE,
                         "%s: input (%s), weight (%s) and bias (%s) must have the same dtype",
                         a->op, pt_dtype_name(x->dtype), pt_dtype_name(w->dtype),
                         bias ? pt_dtype_name(bias->dtype) : "none") == PT_OK;
    int nsp = a->nsp;
    if (x->ndim != nsp + 1 && x->ndim != nsp + 2)
        return pti_error(PT_ERR_SHAPE,
                         "%s: expected %d-D (unbatched) or %d-D (batched) input, but got input of "
                         "size %s",
                         a->op, nsp + 1, nsp + 2, pti_shape_str(x->ndim, x->shape)) == PT_OK;
    if (w->ndim != nsp + 2)
        return pti_error(PT_ERR_SHAPE, "%s: expected %d-D weight, but got weight of size %s", a->op,
                         nsp + 2, pti_shape_str(w->ndim, w->shape)) == PT_OK;
    *batched = x->ndim == nsp + 2;
    if (!check_pair(a->op, "stride", a->stride, nsp, 1) ||
        !check_pair(a->op, "padding", a->pad, nsp, 0) ||
        !check_pair(a->op, "dilation", a->dilation, nsp, 1) ||
        !check_pair(a->op, "output_padding", a->out_pad, nsp, 0))
        return false;
    if (a->groups <= 0)
        return pti_error(PT_ERR_INVALID_ARG, "%s: non-positive groups is not supported (got %lld)",
                         a->op, (long long)a->groups) == PT_OK;
    /* PyTorch's dilated CPU convolution ("slow_conv_dilated") has no kernel for the narrower
     * integer dtypes; its undilated one has. */
    bool dilated = a->dilation[0] != 1 || a->dilation[1] != 1;
    if (dilated && pti_dtypes[x->dtype].is_integral && x->dtype != PT_INT64)
        return pti_error(PT_ERR_DTYPE,
                         "%s: a dilated convolution (dilation %lld) of integer input must be "
                         "int64, got %s",
                         a->op, (long long)(a->dilation[0] != 1 ? a->dilation[0] : a->dilation[1]),
                         pt_dtype_name(x->dtype)) == PT_OK;
    return true;
}

static bool check_bias(const char *op, const pt_tensor *w, const pt_tensor *bias, int64_t c_out)
{
    if (bias && (bias->ndim != 1 || bias->shape[0] != c_out))
        return pti_error(PT_ERR_SHAPE,
                         "%s: given weight of size %s, expected bias to be 1-dimensional with %lld "
                         "elements, but got bias of size %s instead",
                         op, pti_shape_str(w->ndim, w->shape), (long long)c_out,
                         pti_shape_str(bias->ndim, bias->shape)) == PT_OK;
    return true;
}

/* x and w as 4-D contiguous tensors in the compute dtype ([N, C, 1, L] for 1-D). */
static bool prepare_4d(const conv_args *a, const pt_tensor *x, const pt_tensor *w,
                       const pt_tensor *bias, bool batched, pt_tensor **x4, pt_tensor **w4,
                       pt_tensor **b1)
{
    pt_dtype cdt = pti_conv_compute_dtype(x->dtype);
    int64_t xs[4] = {1, 1, 1, 1}, ws[4] = {1, 1, 1, 1};
    int xo = batched ? 0 : 1;
    /* x: [N?, C, (H,) W] -> [N, C, H, W] */
    xs[0] = batched ? x->shape[0] : 1;
    xs[1] = x->shape[1 - xo];
    xs[2] = a->nsp == 2 ? x->shape[2 - xo] : 1;
    xs[3] = x->shape[x->ndim - 1];
    ws[0] = w->shape[0];
    ws[1] = w->shape[1];
    ws[2] = a->nsp == 2 ? w->shape[2] : 1;
    ws[3] = w->shape[w->ndim - 1];
    pt_tensor *xc = pti_conv_prepare(x, cdt), *wc = pti_conv_prepare(w, cdt);
    *b1 = bias ? pti_conv_prepare(bias, cdt) : NULL;
    *x4 = xc ? pti_conv_reshape(xc, 4, xs) : NULL;
    *w4 = wc ? pti_conv_reshape(wc, 4, ws) : NULL;
    pt_release(xc);
    pt_release(wc);
    if (!*x4 || !*w4 || (bias && !*b1)) {
        pt_release(*x4);
        pt_release(*w4);
        pt_release(*b1);
        return false;
    }
    return true;
}

/* The user-visible result shape: drop N when unbatched and H when 1-D. */
static int result_shape(const conv_args *a, bool batched, const int64_t out4[4], int64_t *shape)
{
    int nd = 0;
    if (batched)
        shape[nd++] = out4[0];
    shape[nd++] = out4[1];
    if (a->nsp == 2)
        shape[nd++] = out4[2];
    shape[nd++] = out4[3];
    return nd;
}

static pt_tensor *run_kernel(const conv_args *a, pti_op op, pt_tensor *x4, pt_tensor *w4,
                             pt_tensor *b1, const int64_t out4[4], const pti_conv_params *p,
                             bool batched, pt_dtype dt)
{
    pt_tensor *out = pti_tensor_new(4, out4, x4->dtype, x4->storage->device);
    if (out && out->numel > 0) {
        pti_call c = {.n_in = 3, .n_out = 1, .in = {x4, w4, b1}, .out = {out}, .params = p};
        if (pti_dispatch(op, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
    }
    pt_release(x4);
    pt_release(w4);
    pt_release(b1);
    if (!out)
        return NULL;
    int64_t shape[4];
    int nd = result_shape(a, batched, out4, shape);
    return pti_conv_finish(out, nd, shape, dt);
}

/* Resolves a convolution's geometry from the input shape (x_ndim, xs; batched or not) and the
 * weight shape ws (nsp + 2 dims): checks channels/groups/bias, resolves same/valid padding into
 * p and computes the 4-D output shape out4 ([N, C_out, oH, oW], oH = 1 for 1-D). */
static bool resolve_conv(const conv_args *a, int x_ndim, const int64_t *xs, const int64_t *ws,
                         const pt_tensor *w, const pt_tensor *bias, pti_conv_params *p,
                         int64_t out4[4])
{
    int nsp = a->nsp, wnd = nsp + 2;
    bool batched = x_ndim == nsp + 2;
    int cdim = batched ? 1 : 0;
    int64_t c_in = xs[cdim], c_out = ws[0], g = a->groups;
    if (c_out % g != 0)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: given groups=%lld, expected weight to be divisible by %lld at "
                         "dimension 0, but got weight of size %s instead",
                         a->op, (long long)g, (long long)g, pti_shape_str(wnd, ws)) == PT_OK;
    if (ws[1] * g != c_in)
        return pti_error(PT_ERR_SHAPE,
                         "%s: given groups=%lld, weight of size %s, expected input%s to have "
                         "%lld channels, but got %lld channels instead",
                         a->op, (long long)g, pti_shape_str(wnd, ws), pti_shape_str(x_ndim, xs),
                         (long long)(ws[1] * g), (long long)c_in) == PT_OK;
    if (w && !check_bias(a->op, w, bias, c_out))
        return false;
    /* per spatial dim; index 0 = H, 1 = W (H is a dummy 1 for 1-D) */
    int64_t in_sz[2] = {1, 1}, k[2] = {1, 1}, pad_after[2] = {0, 0};
    for (int i = 2 - nsp; i < 2; i++) {
        int j = i - (2 - nsp); /* index into x/w spatial dims */
        in_sz[i] = xs[cdim + 1 + j];
        k[i] = ws[2 + j];
    }
    if (a->mode == PT_CONV_PADDING_SAME) {
        for (int i = 2 - nsp; i < 2; i++)
            if (a->stride[i] != 1)
                return pti_error(PT_ERR_INVALID_ARG,
                                 "%s: padding='same' is not supported for strided convolutions",
                                 a->op) == PT_OK;
    } else if (a->mode != PT_CONV_PADDING_EXPLICIT && a->mode != PT_CONV_PADDING_VALID) {
        return pti_error(PT_ERR_INVALID_ARG, "%s: unknown padding mode %d", a->op, (int)a->mode) ==
               PT_OK;
    }
    *p = (pti_conv_params){.groups = g};
    for (int i = 0; i < 2; i++) {
        bool sp = i >= 2 - nsp;
        p->stride[i] = sp ? a->stride[i] : 1;
        p->dilation[i] = sp ? a->dilation[i] : 1;
        int64_t span = p->dilation[i] * (k[i] - 1);
        if (!sp || a->mode == PT_CONV_PADDING_VALID) {
            p->pad[i] = pad_after[i] = 0;
        } else if (a->mode == PT_CONV_PADDING_SAME) {
            p->pad[i] = span / 2; /* PyTorch puts the odd extra cell after */
            pad_after[i] = span - p->pad[i];
        } else {
            p->pad[i] = pad_after[i] = a->pad[i];
        }
    }
    int64_t padded[2], out_sz[2];
    for (int i = 0; i < 2; i++) {
        padded[i] = in_sz[i] + p->pad[i] + pad_after[i];
        int64_t span = p->dilation[i] * (k[i] - 1) + 1;
        out_sz[i] = padded[i] < span ? -1 : (padded[i] - span) / p->stride[i] + 1;
    }
    if (out_sz[0] < 1 || out_sz[1] < 1) {
        if (nsp == 1)
            return pti_error(PT_ERR_SHAPE,
                             "%s: calculated padded input size per channel: (%lld). Kernel size: "
                             "(%lld). Kernel size can't be greater than actual input size",
                             a->op, (long long)padded[1],
                             (long long)(p->dilation[1] * (k[1] - 1) + 1)) == PT_OK;
        return pti_error(PT_ERR_SHAPE,
                         "%s: calculated padded input size per channel: (%lld x %lld). Kernel "
                         "size: (%lld x %lld). Kernel size can't be greater than actual input size",
                         a->op, (long long)padded[0], (long long)padded[1],
                         (long long)(p->dilation[0] * (k[0] - 1) + 1),
                         (long long)(p->dilation[1] * (k[1] - 1) + 1)) == PT_OK;
    }
    out4[0] = batched ? xs[0] : 1;
    out4[1] = c_out;
    out4[2] = out_sz[0];
    out4[3] = out_sz[1];
    return true;
}

/* The options of a resolved call as the public struct (1-D: element [0] of each pair). */
static pt_conv_opts args_opts(const conv_args *a)
{
    pt_conv_opts o = {.groups = a->groups, .padding_mode = a->mode};
    int k0 = a->nsp == 1 ? 1 : 0;
    for (int k = k0; k < 2; k++) {
        o.stride[k - k0] = a->stride[k];
        o.padding[k - k0] = a->pad[k];
        o.dilation[k - k0] = a->dilation[k];
    }
    return o;
}

static pt_tensor *conv_forward_impl(const conv_args *a, const pt_tensor *x, const pt_tensor *w,
                                    const pt_tensor *bias);

static pt_tensor *conv_forward(const conv_args *a, const pt_tensor *x, const pt_tensor *w,
                               const pt_tensor *bias)
{
    const pt_tensor *ins[3] = {x, w, bias};
    if (!pti_conv_rec_begin(3, ins))
        return conv_forward_impl(a, x, w, bias);
    pt_tensor *out = conv_forward_impl(a, x, w, bias);
    pt_no_grad_end();
    pt_conv_opts o = args_opts(a);
    return pti_conv_record(out, a->nsp, x, w, bias, &o);
}

static pt_tensor *conv_forward_impl(const conv_args *a, const pt_tensor *x, const pt_tensor *w,
                                    const pt_tensor *bias)
{
    bool batched = false;
    if (!PTI_CHECK_ARG(x, a->op, "input") || !PTI_CHECK_ARG(w, a->op, "weight") ||
        !check_conv_tensors(a, x, w, bias, &batched))
        return NULL;
    pti_conv_params p;
    int64_t out4[4];
    if (!resolve_conv(a, x->ndim, x->shape, w->shape, w, bias, &p, out4))
        return NULL;
    pt_tensor *x4, *w4, *b1;
    if (!prepare_4d(a, x, w, bias, batched, &x4, &w4, &b1))
        return NULL;
    return run_kernel(a, PTI_OP_conv2d, x4, w4, b1, out4, &p, batched, x->dtype);
}

static void pair_or(const int64_t *v, int64_t dflt, int64_t out[2])
{
    out[0] = v ? v[0] : dflt;
    out[1] = v ? v[1] : dflt;
}

/* A zero in an options pair means the default d. */
static void opt_pair(const int64_t v[2], int64_t d, int64_t out[2])
{
    out[0] = v[0] ? v[0] : d;
    out[1] = v[1] ? v[1] : d;
}

pt_tensor *pt_conv2d(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                     const int64_t stride[2], const int64_t padding[2], const int64_t dilation[2],
                     int64_t groups)
{
    conv_args a = {.op = "pt_conv2d", .nsp = 2, .groups = groups};
    pair_or(stride, 1, a.stride);
    pair_or(padding, 0, a.pad);
    pair_or(dilation, 1, a.dilation);
    return conv_forward(&a, x, w, bias);
}

pt_tensor *pt_conv2d_ex(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                        const pt_conv_opts *opts)
{
    pt_conv_opts o = opts ? *opts : (pt_conv_opts){0};
    conv_args a = {
        .op = "pt_conv2d", .nsp = 2, .groups = o.groups ? o.groups : 1, .mode = o.padding_mode};
    opt_pair(o.stride, 1, a.stride);
    memcpy(a.pad, o.padding, sizeof a.pad);
    opt_pair(o.dilation, 1, a.dilation);
    return conv_forward(&a, x, w, bias);
}

pt_tensor *pt_conv1d(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias, int64_t stride,
                     int64_t padding, int64_t dilation, int64_t groups)
{
    conv_args a = {.op = "pt_conv1d",
                   .nsp = 1,
                   .groups = groups,
                   .stride = {1, stride},
                   .pad = {0, padding},
                   .dilation = {1, dilation}};
    return conv_forward(&a, x, w, bias);
}

pt_tensor *pt_conv1d_ex(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                        const pt_conv_opts *opts)
{
    pt_conv_opts o = opts ? *opts : (pt_conv_opts){0};
    conv_args a = {.op = "pt_conv1d",
                   .nsp = 1,
                   .groups = o.groups ? o.groups : 1,
                   .mode = o.padding_mode,
                   .stride = {1, o.stride[0] ? o.stride[0] : 1},
                   .pad = {0, o.padding[0]},
                   .dilation = {1, o.dilation[0] ? o.dilation[0] : 1}};
    return conv_forward(&a, x, w, bias);
}

/* ---- transposed convolution ------------------------------------------------------------------ */

static pt_tensor *conv_transpose_impl(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                                      const int64_t stride[2], const int64_t padding[2],
                                      const int64_t output_padding[2], int64_t groups,
                                      const int64_t dilation[2]);

pt_tensor *pt_conv_transpose2d(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                               const int64_t stride[2], const int64_t padding[2],
                               const int64_t output_padding[2], int64_t groups,
                               const int64_t dilation[2])
{
    const pt_tensor *ins[3] = {x, w, bias};
    if (!pti_conv_rec_begin(3, ins))
        return conv_transpose_impl(x, w, bias, stride, padding, output_padding, groups, dilation);
    pt_tensor *out =
        conv_transpose_impl(x, w, bias, stride, padding, output_padding, groups, dilation);
    pt_no_grad_end();
    conv_args a = {.nsp = 2, .groups = groups};
    pair_or(stride, 1, a.stride);
    pair_or(padding, 0, a.pad);
    pair_or(dilation, 1, a.dilation);
    pt_conv_opts o = args_opts(&a);
    return pti_conv_record_transpose(out, x, w, bias, &o);
}

static pt_tensor *conv_transpose_impl(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                                      const int64_t stride[2], const int64_t padding[2],
                                      const int64_t output_padding[2], int64_t groups,
                                      const int64_t dilation[2])
{
    conv_args a = {.op = "pt_conv_transpose2d", .nsp = 2, .transposed = true, .groups = groups};
    pair_or(stride, 1, a.stride);
    pair_or(padding, 0, a.pad);
    pair_or(output_padding, 0, a.out_pad);
    pair_or(dilation, 1, a.dilation);
    bool batched = false;
    if (!PTI_CHECK_ARG(x, a.op, "input") || !PTI_CHECK_ARG(w, a.op, "weight") ||
        !check_conv_tensors(&a, x, w, bias, &batched))
        return NULL;
    int cdim = batched ? 1 : 0;
    int64_t c_in = x->shape[cdim], g = a.groups, c_out = w->shape[1] * g;
    if (w->shape[0] != c_in)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: given transposed=1, weight of size %s, expected input%s to have "
                              "%lld channels, but got %lld channels instead",
                              a.op, pti_shape_str(w->ndim, w->shape),
                              pti_shape_str(x->ndim, x->shape), (long long)w->shape[0],
                              (long long)c_in);
    if (c_in % g != 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: given groups=%lld, expected weight to be divisible by %lld at "
                              "dimension 0, but got weight of size %s instead",
                              a.op, (long long)g, (long long)g, pti_shape_str(w->ndim, w->shape));
    if (!check_bias(a.op, w, bias, c_out))
        return NULL;
    for (int i = 0; i < 2; i++)
        if (a.out_pad[i] >= a.stride[i] && a.out_pad[i] >= a.dilation[i])
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  "%s: output padding must be smaller than either stride or "
                                  "dilation, but got output_padding (%lld, %lld), stride (%lld, "
                                  "%lld), dilation (%lld, %lld)",
                                  a.op, (long long)a.out_pad[0], (long long)a.out_pad[1],
                                  (long long)a.stride[0], (long long)a.stride[1],
                                  (long long)a.dilation[0], (long long)a.dilation[1]);
    pti_conv_params p = {.groups = g};
    int64_t out4[4] = {batched ? x->shape[0] : 1, c_out, 0, 0};
    for (int i = 0; i < 2; i++) {
        p.stride[i] = a.stride[i];
        p.pad[i] = a.pad[i];
        p.dilation[i] = a.dilation[i];
        int64_t in = x->shape[cdim + 1 + i], k = w->shape[2 + i];
        out4[2 + i] =
            (in - 1) * a.stride[i] - 2 * a.pad[i] + a.dilation[i] * (k - 1) + a.out_pad[i] + 1;
    }
    if (out4[2] < 1 || out4[3] < 1)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: given input size per channel (%lld x %lld), the calculated "
                              "output size (%lld x %lld) is too small",
                              a.op, (long long)x->shape[cdim + 1], (long long)x->shape[cdim + 2],
                              (long long)out4[2], (long long)out4[3]);
    pt_tensor *x4, *w4, *b1;
    if (!prepare_4d(&a, x, w, bias, batched, &x4, &w4, &b1))
        return NULL;
    return run_kernel(&a, PTI_OP_conv_transpose2d, x4, w4, b1, out4, &p, batched, x->dtype);
}

/* ---- convolution gradients ------------------------------------------------------------------ */

/* The options as conv_args; 1-D ops read element [0] of each pair into the W slot. */
static conv_args grad_args(const char *op, int nsp, const pt_conv_opts *opts)
{
    pt_conv_opts o = opts ? *opts : (pt_conv_opts){0};
    conv_args a = {.op = op, .nsp = nsp, .groups = o.groups ? o.groups : 1, .mode = o.padding_mode};
    if (nsp == 1) {
        a.stride[0] = a.dilation[0] = 1;
        a.stride[1] = o.stride[0] ? o.stride[0] : 1;
        a.pad[1] = o.padding[0];
        a.dilation[1] = o.dilation[0] ? o.dilation[0] : 1;
        return a;
    }
    opt_pair(o.stride, 1, a.stride);
    memcpy(a.pad, o.padding, sizeof a.pad);
    opt_pair(o.dilation, 1, a.dilation);
    return a;
}

/* (ndim, s) of a conv input or weight as 4-D: [N or 1, C, H or 1, W] / [Co, Cg, kH or 1, kW]. */
static void shape_4d(int nsp, bool has_batch, int ndim, const int64_t *s, int64_t out[4])
{
    out[0] = has_batch ? s[0] : 1;
    out[1] = s[ndim - nsp - 1];
    out[2] = nsp == 2 ? s[ndim - 2] : 1;
    out[3] = s[ndim - 1];
}

/* Common checks of the two gradient ops: t (weight or input) and grad_out, the given shape. */
static bool check_grad_args(const conv_args *a, const pt_tensor *t, const char *tname,
                            const pt_tensor *grad_out, int ndim, const int64_t *shape,
                            const char *shape_name)
{
    if (!PTI_CHECK_ARG(t, a->op, tname) || !PTI_CHECK_ARG(grad_out, a->op, "grad_output"))
        return false;
    const pt_tensor *ts[2] = {t, grad_out};
    if (!pti_check_same_device(a->op, 2, ts) || !pti_check_floating(a->op, tname, t))
        return false;
    if (grad_out->dtype != t->dtype)
        return pti_error(PT_ERR_DTYPE, "%s: %s (%s) and grad_output (%s) must have the same dtype",
                         a->op, tname, pt_dtype_name(t->dtype),
                         pt_dtype_name(grad_out->dtype)) == PT_OK;
    if (!shape)
        return pti_error(PT_ERR_NULL, "%s: %s is NULL", a->op, shape_name) == PT_OK;
    if (!pti_check_shape(a->op, ndim, shape))
        return false;
    return check_pair(a->op, "stride", a->stride, a->nsp, 1) &&
           check_pair(a->op, "padding", a->pad, a->nsp, 0) &&
           check_pair(a->op, "dilation", a->dilation, a->nsp, 1) &&
           (a->groups > 0 ||
            pti_error(PT_ERR_INVALID_ARG, "%s: non-positive groups", a->op) == PT_OK);
}

/* grad_out must have the forward output's shape. */
static bool check_grad_shape(const conv_args *a, const pt_tensor *grad_out, bool batched,
                             const int64_t out4[4])
{
    int64_t shape[4];
    int nd = result_shape(a, batched, out4, shape);
    bool ok = grad_out->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = grad_out->shape[i] == shape[i];
    if (!ok)
        return pti_error(PT_ERR_SHAPE, "%s: grad_output of size %s, expected %s", a->op,
                         pti_shape_str(grad_out->ndim, grad_out->shape),
                         pti_shape_str(nd, shape)) == PT_OK;
    return true;
}

/* t (contiguous, compute dtype) viewed with the 4-D shape s. */
static pt_tensor *prepared_as(const pt_tensor *t, const int64_t s[4])
{
    pt_tensor *c = pti_conv_prepare(t, pti_conv_compute_dtype(t->dtype));
    pt_tensor *v = c ? pti_conv_reshape(c, 4, s) : NULL;
    pt_release(c);
    return v;
}

static pt_tensor *conv_input_grad_impl(const conv_args *ca, int ndim, const int64_t *input_shape,
                                       const pt_tensor *w, const pt_tensor *grad_out);

static pt_tensor *conv_input_grad(const conv_args *ca, int ndim, const int64_t *input_shape,
                                  const pt_tensor *w, const pt_tensor *grad_out)
{
    const pt_tensor *ins[2] = {w, grad_out};
    if (!pti_conv_rec_begin(2, ins))
        return conv_input_grad_impl(ca, ndim, input_shape, w, grad_out);
    pt_tensor *out = conv_input_grad_impl(ca, ndim, input_shape, w, grad_out);
    pt_no_grad_end();
    pt_conv_opts o = args_opts(ca);
    return pti_conv_record_input_grad(out, ca->nsp, w, grad_out, &o);
}

static pt_tensor *conv_input_grad_impl(const conv_args *ca, int ndim, const int64_t *input_shape,
                                       const pt_tensor *w, const pt_tensor *grad_out)
{
    const conv_args a = *ca;
    int nsp = a.nsp;
    if (!check_grad_args(&a, w, "weight", grad_out, ndim, input_shape, "input_shape"))
        return NULL;
    if ((ndim != nsp + 1 && ndim != nsp + 2) || w->ndim != nsp + 2)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: expected a %d-D or %d-D input shape and a %d-D weight, got %s "
                              "and %s",
                              a.op, nsp + 1, nsp + 2, nsp + 2, pti_shape_str(ndim, input_shape),
                              pti_shape_str(w->ndim, w->shape));
    bool batched = ndim == nsp + 2;
    pti_conv_params p;
    int64_t out4[4], in4[4], w4s[4];
    if (!resolve_conv(&a, ndim, input_shape, w->shape, NULL, NULL, &p, out4) ||
        !check_grad_shape(&a, grad_out, batched, out4))
        return NULL;
    shape_4d(nsp, batched, ndim, input_shape, in4);
    shape_4d(nsp, false, w->ndim, w->shape, w4s);
    w4s[0] = w->shape[0];
    pt_tensor *g4 = prepared_as(grad_out, out4), *w4 = prepared_as(w, w4s);
    if (!g4 || !w4) {
        pt_release(g4);
        pt_release(w4);
        return NULL;
    }
    pt_tensor *out = pti_tensor_new(4, in4, g4->dtype, g4->storage->device);
    if (out && out->numel > 0) {
        pti_call c = {.n_in = 3, .n_out = 1, .in = {g4, w4, NULL}, .out = {out}, .params = &p};
        if (pti_dispatch(PTI_OP_conv_transpose2d, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
    }
    pt_release(g4);
    pt_release(w4);
    return out ? pti_conv_finish(out, ndim, input_shape, w->dtype) : NULL;
}

pt_tensor *pt_conv2d_input_grad(int ndim, const int64_t *input_shape, const pt_tensor *w,
                                const pt_tensor *grad_out, const pt_conv_opts *opts)
{
    conv_args a = grad_args("pt_conv2d_input_grad", 2, opts);
    return conv_input_grad(&a, ndim, input_shape, w, grad_out);
}

pt_tensor *pt_conv1d_input_grad(int ndim, const int64_t *input_shape, const pt_tensor *w,
                                const pt_tensor *grad_out, const pt_conv_opts *opts)
{
    conv_args a = grad_args("pt_conv1d_input_grad", 1, opts);
    return conv_input_grad(&a, ndim, input_shape, w, grad_out);
}

static pt_tensor *conv_weight_grad_impl(const conv_args *ca, const pt_tensor *x, int ndim,
                                        const int64_t *weight_shape, const pt_tensor *grad_out,
                                        pt_tensor **bias_grad);

/* The weight gradient records a node (for double backward); the optional bias gradient is
 * returned without history. */
static pt_tensor *conv_weight_grad(const conv_args *ca, const pt_tensor *x, int ndim,
                                   const int64_t *weight_shape, const pt_tensor *grad_out,
                                   pt_tensor **bias_grad)
{
    const pt_tensor *ins[2] = {x, grad_out};
    if (!pti_conv_rec_begin(2, ins))
        return conv_weight_grad_impl(ca, x, ndim, weight_shape, grad_out, bias_grad);
    pt_tensor *out = conv_weight_grad_impl(ca, x, ndim, weight_shape, grad_out, bias_grad);
    pt_no_grad_end();
    pt_conv_opts o = args_opts(ca);
    out = pti_conv_record_weight_grad(out, ca->nsp, x, grad_out, &o);
    if (!out && bias_grad) {
        pt_release(*bias_grad);
        *bias_grad = NULL;
    }
    return out;
}

static pt_tensor *conv_weight_grad_impl(const conv_args *ca, const pt_tensor *x, int ndim,
                                        const int64_t *weight_shape, const pt_tensor *grad_out,
                                        pt_tensor **bias_grad)
{
    const conv_args a = *ca;
    int nsp = a.nsp;
    if (bias_grad)
        *bias_grad = NULL;
    if (!check_grad_args(&a, x, "input", grad_out, ndim, weight_shape, "weight_shape"))
        return NULL;
    if ((x->ndim != nsp + 1 && x->ndim != nsp + 2) || ndim != nsp + 2)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: expected a %d-D or %d-D input and a %d-D weight shape, got %s "
                              "and %s",
                              a.op, nsp + 1, nsp + 2, nsp + 2, pti_shape_str(x->ndim, x->shape),
                              pti_shape_str(ndim, weight_shape));
    bool batched = x->ndim == nsp + 2;
    pti_conv_params p;
    int64_t out4[4];
    if (!resolve_conv(&a, x->ndim, x->shape, weight_shape, NULL, NULL, &p, out4) ||
        !check_grad_shape(&a, grad_out, batched, out4))
        return NULL;
    int64_t in4[4], ws4[4];
    shape_4d(nsp, batched, x->ndim, x->shape, in4);
    shape_4d(nsp, false, ndim, weight_shape, ws4);
    ws4[0] = weight_shape[0];
    pt_tensor *x4 = prepared_as(x, in4), *g4 = prepared_as(grad_out, out4);
    pt_dtype cdt = pti_conv_compute_dtype(x->dtype);
    pt_tensor *gw = x4 && g4 ? pti_tensor_new(4, ws4, cdt, x->storage->device) : NULL;
    pt_tensor *gb =
        gw && bias_grad ? pti_tensor_new(1, weight_shape, cdt, x->storage->device) : NULL;
    if (gw && gb && gw->numel == 0 && pt_zero_(gb) != PT_OK) {
        pt_release(gw);
        gw = NULL;
    }
    if (gw && (!bias_grad || gb) && gw->numel > 0) {
        pti_call c = {
            .n_in = 2, .n_out = gb ? 2 : 1, .in = {x4, g4}, .out = {gw, gb}, .params = &p};
        if (pti_dispatch(PTI_OP_conv2d_weight_grad, &c) != PT_OK) {
            pt_release(gw);
            gw = NULL;
        }
    }
    pt_release(x4);
    pt_release(g4);
    if (!gw || (bias_grad && !gb)) {
        pt_release(gw);
        pt_release(gb);
        return NULL;
    }
    if (gb) {
        *bias_grad = pti_conv_finish(gb, 1, weight_shape, x->dtype);
        if (!*bias_grad) {
            pt_release(gw);
            return NULL;
        }
    }
    pt_tensor *r = pti_conv_finish(gw, ndim, weight_shape, x->dtype);
    if (!r && bias_grad) {
        pt_release(*bias_grad);
        *bias_grad = NULL;
    }
    return r;
}

pt_tensor *pt_conv2d_weight_grad(const pt_tensor *x, int ndim, const int64_t *weight_shape,
                                 const pt_tensor *grad_out, const pt_conv_opts *opts,
                                 pt_tensor **bias_grad)
{
    conv_args a = grad_args("pt_conv2d_weight_grad", 2, opts);
    return conv_weight_grad(&a, x, ndim, weight_shape, grad_out, bias_grad);
}

pt_tensor *pt_conv1d_weight_grad(const pt_tensor *x, int ndim, const int64_t *weight_shape,
                                 const pt_tensor *grad_out, const pt_conv_opts *opts,
                                 pt_tensor **bias_grad)
{
    conv_args a = grad_args("pt_conv1d_weight_grad", 1, opts);
    return conv_weight_grad(&a, x, ndim, weight_shape, grad_out, bias_grad);
}
