/* Pooling, padding and interpolation front-ends of the conv family: pt_max_pool2d(_ex),
 * pt_avg_pool2d(_ex), pt_adaptive_avg_pool2d, pt_pad and pt_interpolate and their _backward
 * gradients, with PyTorch's output-size formulas, checks and messages. Kernels:
 * src/backends/cpu/conv_pool.c. */
#include <math.h>
#include <string.h>

#include "conv.h"

/* ---- shared input handling ---------------------------------------------------------------------
 */

/* Checks a pooling/interpolation input: float (or an integer dtype `ints` admits), [N, C, H, W]
 * (or [C, H, W] when allow_3d). */
static bool check_image(const char *op, const pt_tensor *x, bool allow_3d, pti_conv_ints ints)
{
    if (!PTI_CHECK_ARG(x, op, "input") || !pti_conv_check_dtype(op, "input", x, ints))
        return false;
    if (x->ndim != 4 && !(allow_3d && x->ndim == 3))
        return pti_error(PT_ERR_SHAPE, "%s: expected %sinput of shape [N, C, H, W], got %s", op,
                         allow_3d ? "a 3-D [C, H, W] or 4-D " : "a 4-D ",
                         pti_shape_str(x->ndim, x->shape)) == PT_OK;
    return true;
}

/* x as a contiguous 4-D tensor in the compute dtype. */
static pt_tensor *image_4d(const pt_tensor *x)
{
    pt_tensor *xc = pti_conv_prepare(x, pti_conv_compute_dtype(x->dtype));
    if (!xc || x->ndim == 4)
        return xc;
    int64_t s[4] = {1, x->shape[0], x->shape[1], x->shape[2]};
    pt_tensor *v = pti_conv_reshape(xc, 4, s);
    pt_release(xc);
    return v;
}

/* Dispatches op on x4 into a new [N, C, oh, ow] output (and int64 indices when idx != NULL);
 * returns the result in x's rank and dtype. Consumes x4. */
static pt_tensor *run_image_op(pti_op op, const pt_tensor *x, pt_tensor *x4, int64_t oh, int64_t ow,
                               const void *params, pt_tensor **idx)
{
    int64_t shape[4] = {x4->shape[0], x4->shape[1], oh, ow};
    pt_tensor *out = pti_tensor_new(4, shape, x4->dtype, x4->storage->device);
    pt_tensor *ind = idx && out ? pti_tensor_new(4, shape, PT_INT64, x4->storage->device) : NULL;
    if (out && (!idx || ind) && out->numel > 0) {
        pti_call c = {
            .n_in = 1, .n_out = ind ? 2 : 1, .in = {x4}, .out = {out, ind}, .params = params};
        if (pti_dispatch(op, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
    }
    pt_release(x4);
    if (!out || (idx && !ind)) {
        pt_release(out);
        pt_release(ind);
        return NULL;
    }
    const int64_t *rs = x->ndim == 4 ? shape : shape + 1;
    if (ind) {
        *idx = pti_conv_reshape(ind, x->ndim, rs);
        pt_release(ind);
        if (!*idx) {
            pt_release(out);
            return NULL;
        }
    }
    pt_tensor *r = pti_conv_finish(out, x->ndim, rs, x->dtype);
    if (!r && idx) {
        pt_release(*idx);
        *idx = NULL;
    }
    return r;
}

/* ---- pooling ------------------------------------------------------------------------------------
 */

static int64_t div_floor(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* PyTorch's pooling_output_shape. */
static int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil)
{
    int64_t out = div_floor(in + 2 * pad - d * (k - 1) - 1 + (ceil ? s - 1 : 0), s) + 1;
    if (ceil && (out - 1) * s >= in + pad)
        out--;
    return out;
}

/* Validates window parameters and computes the output size (oh, ow). */
static bool pool_setup(const char *op, const pt_tensor *x, pti_pool_params *p, bool ceil,
                       int64_t out[2])
{
    for (int i = 0; i < 2; i++) {
        if (p->kernel[i] <= 0 || p->stride[i] <= 0 || p->dilation[i] <= 0)
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: kernel size, stride and dilation must be greater than zero, "
                             "but got kernel (%lld, %lld), stride (%lld, %lld), dilation (%lld, "
                             "%lld)",
                             op, (long long)p->kernel[0], (long long)p->kernel[1],
                             (long long)p->stride[0], (long long)p->stride[1],
                             (long long)p->dilation[0], (long long)p->dilation[1]) == PT_OK;
        if (p->pad[i] < 0 || p->pad[i] > p->kernel[i] / 2)
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: pad should be at most half of kernel size (and non-negative), "
                             "but got pad=%lld and kernel_size=%lld",
                             op, (long long)p->pad[i], (long long)p->kernel[i]) == PT_OK;
    }
    int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
    out[0] = pool_out_size(H, p->kernel[0], p->pad[0], p->stride[0], p->dilation[0], ceil);
    out[1] = pool_out_size(W, p->kernel[1], p->pad[1], p->stride[1], p->dilation[1], ceil);
    if (out[0] < 1 || out[1] < 1)
        return pti_error(PT_ERR_SHAPE,
                         "%s: given input size %s, the calculated output size (%lldx%lld) is too "
                         "small",
                         op, pti_shape_str(x->ndim, x->shape), (long long)out[0],
                         (long long)out[1]) == PT_OK;
    return true;
}

static bool check_kernel_arg(const char *op, const int64_t *kernel)
{
    if (!kernel)
        return pti_error(PT_ERR_NULL, "%s: kernel_size is NULL", op) == PT_OK;
    return true;
}

static pt_tensor *max_pool_impl(const pt_tensor *x, const int64_t kernel[2],
                                const pt_max_pool2d_opts *opts, pt_tensor **indices);

pt_tensor *pt_max_pool2d_ex(const pt_tensor *x, const int64_t kernel[2],
                            const pt_max_pool2d_opts *opts, pt_tensor **indices)
{
    if (!pti_conv_rec_begin(1, &x))
        return max_pool_impl(x, kernel, opts, indices);
    pt_tensor *idx = NULL;
    pt_tensor *out = max_pool_impl(x, kernel, opts, &idx);
    pt_no_grad_end();
    out = pti_conv_record_max_pool(out, x, idx);
    if (indices)
        *indices = out ? idx : NULL;
    if (!out || !indices)
        pt_release(idx);
    return out;
}

static pt_tensor *max_pool_impl(const pt_tensor *x, const int64_t kernel[2],
                                const pt_max_pool2d_opts *opts, pt_tensor **indices)
{
    const char *op = "pt_max_pool2d";
    if (indices)
        *indices = NULL;
    if (!check_image(op, x, true, PTI_CONV_INTS_ALL) || !check_kernel_arg(op, kernel))
        return NULL;
    pt_max_pool2d_opts o = opts ? *opts : (pt_max_pool2d_opts){0};
    pti_pool_params p = {.count_include_pad = true};
    for (int i = 0; i < 2; i++) {
        p.kernel[i] = kernel[i];
        p.stride[i] = (o.stride[0] == 0 && o.stride[1] == 0) ? kernel[i] : o.stride[i];
        p.pad[i] = o.padding[i];
        p.dilation[i] = o.dilation[i] ? o.dilation[i] : 1;
    }
    int64_t out[2];
    if (!pool_setup(op, x, &p, o.ceil_mode, out))
        return NULL;
    pt_tensor *x4 = image_4d(x);
    if (!x4)
        return NULL;
    return run_image_op(PTI_OP_max_pool2d, x, x4, out[0], out[1], &p, indices);
}

pt_tensor *pt_max_pool2d(const pt_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                         const int64_t padding[2])
{
    pt_max_pool2d_opts o = {0};
    if (stride)
        memcpy(o.stride, stride, sizeof o.stride);
    if (padding)
        memcpy(o.padding, padding, sizeof o.padding);
    return pt_max_pool2d_ex(x, kernel, &o, NULL);
}

static pt_tensor *avg_pool_impl(const pt_tensor *x, const int64_t kernel[2],
                                const pt_avg_pool2d_opts *opts);

pt_tensor *pt_avg_pool2d_ex(const pt_tensor *x, const int64_t kernel[2],
                            const pt_avg_pool2d_opts *opts)
{
    if (!pti_conv_rec_begin(1, &x))
        return avg_pool_impl(x, kernel, opts);
    pt_tensor *out = avg_pool_impl(x, kernel, opts);
    pt_no_grad_end();
    return pti_conv_record_avg_pool(out, x, kernel, opts);
}

static pt_tensor *avg_pool_impl(const pt_tensor *x, const int64_t kernel[2],
                                const pt_avg_pool2d_opts *opts)
{
    const char *op = "pt_avg_pool2d";
    if (!check_image(op, x, true, PTI_CONV_INTS_INT64) || !check_kernel_arg(op, kernel))
        return NULL;
    pt_avg_pool2d_opts o = opts ? *opts : (pt_avg_pool2d_opts){0};
    /* A negative divisor_override is accepted and divides by it, as in PyTorch (0 = none). */
    pti_pool_params p = {.count_include_pad = !o.exclude_pad,
                         .divisor_override = o.divisor_override};
    for (int i = 0; i < 2; i++) {
        p.kernel[i] = kernel[i];
        p.stride[i] = (o.stride[0] == 0 && o.stride[1] == 0) ? kernel[i] : o.stride[i];
        p.pad[i] = o.padding[i];
        p.dilation[i] = 1;
    }
    int64_t out[2];
    if (!pool_setup(op, x, &p, o.ceil_mode, out))
        return NULL;
    pt_tensor *x4 = image_4d(x);
    if (!x4)
        return NULL;
    return run_image_op(PTI_OP_avg_pool2d, x, x4, out[0], out[1], &p, NULL);
}

pt_tensor *pt_avg_pool2d(const pt_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                         const int64_t padding[2])
{
    pt_avg_pool2d_opts o = {0};
    if (stride)
        memcpy(o.stride, stride, sizeof o.stride);
    if (padding)
        memcpy(o.padding, padding, sizeof o.padding);
    return pt_avg_pool2d_ex(x, kernel, &o);
}

static pt_tensor *adaptive_avg_impl(const pt_tensor *x, const int64_t output_size[2]);

pt_tensor *pt_adaptive_avg_pool2d(const pt_tensor *x, const int64_t output_size[2])
{
    if (!pti_conv_rec_begin(1, &x))
        return adaptive_avg_impl(x, output_size);
    pt_tensor *out = adaptive_avg_impl(x, output_size);
    pt_no_grad_end();
    return pti_conv_record_avg_pool(out, x, NULL, NULL);
}

static pt_tensor *adaptive_avg_impl(const pt_tensor *x, const int64_t output_size[2])
{
    const char *op = "pt_adaptive_avg_pool2d";
    if (!check_image(op, x, true, PTI_CONV_INTS_NONE))
        return NULL;
    if (!output_size)
        return pti_error_null(PT_ERR_NULL, "%s: output_size is NULL", op);
    if (output_size[0] < 0 || output_size[1] < 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: elements of output_size must be greater than or equal to 0 "
                              "but received (%lld, %lld)",
                              op, (long long)output_size[0], (long long)output_size[1]);
    for (int d = 1; d < x->ndim; d++)
        if (x->shape[d] == 0)
            return pti_error_null(PT_ERR_SHAPE,
                                  "%s: expected input to have non-zero size for non-batch "
                                  "dimensions, but input has sizes %s with dimension %d being "
                                  "empty",
                                  op, pti_shape_str(x->ndim, x->shape), d);
    pt_tensor *x4 = image_4d(x);
    if (!x4)
        return NULL;
    return run_image_op(PTI_OP_adaptive_avg_pool2d, x, x4, output_size[0], output_size[1], NULL,
                        NULL);
}

/* ---- pooling gradients ------------------------------------------------------------------------
 */

/* Checks grad_out against the forward output shape (oh, ow) of x and dispatches op writing a
 * new grad_in of x's shape; `extra` (indices) is passed as a second input when non-NULL. */
static pt_tensor *run_pool_backward(const char *op, pti_op kop, const pt_tensor *grad_out,
                                    const pt_tensor *x, const pt_tensor *extra, int64_t oh,
                                    int64_t ow, const void *params)
{
    const pt_tensor *ts[3] = {grad_out, x, extra};
    if (!pti_check_same_device(op, 3, ts) || !pti_check_floating(op, "grad_output", grad_out))
        return NULL;
    int nd = x->ndim;
    bool ok =
        grad_out->ndim == nd && grad_out->shape[nd - 1] == ow && grad_out->shape[nd - 2] == oh;
    for (int d = 0; ok && d < nd - 2; d++)
        ok = grad_out->shape[d] == x->shape[d];
    if (!ok)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: grad_output of size %s does not match the output "
                              "(%lld x %lld per plane) of input %s",
                              op, pti_shape_str(grad_out->ndim, grad_out->shape), (long long)oh,
                              (long long)ow, pti_shape_str(x->ndim, x->shape));
    if (extra) {
        if (extra->dtype != PT_INT64)
            return pti_error_null(PT_ERR_DTYPE, "%s: indices must be int64, got %s", op,
                                  pt_dtype_name(extra->dtype));
        bool same = extra->ndim == nd;
        for (int d = 0; same && d < nd; d++)
            same = extra->shape[d] == grad_out->shape[d];
        if (!same)
            return pti_error_null(PT_ERR_SHAPE, "%s: indices of size %s, expected %s", op,
                                  pti_shape_str(extra->ndim, extra->shape),
                                  pti_shape_str(grad_out->ndim, grad_out->shape));
    }
    int64_t in4[4] = {nd == 4 ? x->shape[0] : 1, x->shape[nd - 3], x->shape[nd - 2],
                      x->shape[nd - 1]};
    int64_t out4[4] = {in4[0], in4[1], oh, ow};
    pt_dtype cdt = pti_conv_compute_dtype(x->dtype);
    pt_tensor *g = pti_conv_prepare(grad_out, cdt);
    pt_tensor *g4 = g ? pti_conv_reshape(g, 4, out4) : NULL;
    pt_release(g);
    pt_tensor *i4 = NULL;
    if (extra) {
        pt_tensor *ic = pt_contiguous(extra);
        i4 = ic ? pti_conv_reshape(ic, 4, out4) : NULL;
        pt_release(ic);
    }
    pt_tensor *out = g4 && (!extra || i4) ? pti_tensor_new(4, in4, cdt, x->storage->device) : NULL;
    if (out && out->numel > 0) {
        pti_call c = {
            .n_in = extra ? 2 : 1, .n_out = 1, .in = {g4, i4}, .out = {out}, .params = params};
        if (pti_dispatch(kop, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
    }
    pt_release(g4);
    pt_release(i4);
    return out ? pti_conv_finish(out, nd, x->shape, x->dtype) : NULL;
}

static pt_tensor *max_pool_backward_impl(const pt_tensor *grad_out, const pt_tensor *x,
                                         const pt_tensor *indices);

pt_tensor *pt_max_pool2d_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                  const pt_tensor *indices)
{
    if (!pti_conv_rec_begin(1, &grad_out))
        return max_pool_backward_impl(grad_out, x, indices);
    pt_tensor *out = max_pool_backward_impl(grad_out, x, indices);
    pt_no_grad_end();
    pti_conv_bw_ctx c = {.kind = PTI_BW_MAX_POOL};
    return pti_conv_record_backward_op(out, grad_out, indices, &c);
}

static pt_tensor *max_pool_backward_impl(const pt_tensor *grad_out, const pt_tensor *x,
                                         const pt_tensor *indices)
{
    const char *op = "pt_max_pool2d_backward";
    if (!PTI_CHECK_ARG(grad_out, op, "grad_output") || !PTI_CHECK_ARG(indices, op, "indices") ||
        !check_image(op, x, true, PTI_CONV_INTS_NONE))
        return NULL;
    int64_t oh = grad_out->ndim >= 2 ? grad_out->shape[grad_out->ndim - 2] : -1;
    int64_t ow = grad_out->ndim >= 2 ? grad_out->shape[grad_out->ndim - 1] : -1;
    return run_pool_backward(op, PTI_OP_max_pool2d_backward, grad_out, x, indices, oh, ow, NULL);
}

static pt_tensor *avg_pool_backward_impl(const pt_tensor *grad_out, const pt_tensor *x,
                                         const int64_t kernel[2], const pt_avg_pool2d_opts *opts);

pt_tensor *pt_avg_pool2d_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                  const int64_t kernel[2], const pt_avg_pool2d_opts *opts)
{
    if (!pti_conv_rec_begin(1, &grad_out))
        return avg_pool_backward_impl(grad_out, x, kernel, opts);
    pt_tensor *out = avg_pool_backward_impl(grad_out, x, kernel, opts);
    pt_no_grad_end();
    if (!out)
        return NULL;
    pti_conv_bw_ctx c = {.kind = PTI_BW_AVG_POOL, .kernel = {kernel[0], kernel[1]}};
    if (opts)
        c.avg = *opts;
    return pti_conv_record_backward_op(out, grad_out, NULL, &c);
}

static pt_tensor *avg_pool_backward_impl(const pt_tensor *grad_out, const pt_tensor *x,
                                         const int64_t kernel[2], const pt_avg_pool2d_opts *opts)
{
    const char *op = "pt_avg_pool2d_backward";
    if (!PTI_CHECK_ARG(grad_out, op, "grad_output") ||
        !check_image(op, x, true, PTI_CONV_INTS_NONE) || !check_kernel_arg(op, kernel))
        return NULL;
    pt_avg_pool2d_opts o = opts ? *opts : (pt_avg_pool2d_opts){0};
    pti_pool_params p = {.count_include_pad = !o.exclude_pad,
                         .divisor_override = o.divisor_override};
    for (int i = 0; i < 2; i++) {
        p.kernel[i] = kernel[i];
        p.stride[i] = (o.stride[0] == 0 && o.stride[1] == 0) ? kernel[i] : o.stride[i];
        p.pad[i] = o.padding[i];
        p.dilation[i] = 1;
    }
    int64_t out[2];
    /* A negative divisor_override is accepted and divides by it, as in PyTorch (0 = none). */
    if (!pool_setup(op, x, &p, o.ceil_mode, out))
        return NULL;
    return run_pool_backward(op, PTI_OP_avg_pool2d_backward, grad_out, x, NULL, out[0], out[1], &p);
}

static pt_tensor *adaptive_avg_backward_impl(const pt_tensor *grad_out, const pt_tensor *x);

pt_tensor *pt_adaptive_avg_pool2d_backward(const pt_tensor *grad_out, const pt_tensor *x)
{
    if (!pti_conv_rec_begin(1, &grad_out))
        return adaptive_avg_backward_impl(grad_out, x);
    pt_tensor *out = adaptive_avg_backward_impl(grad_out, x);
    pt_no_grad_end();
    if (!out)
        return NULL;
    pti_conv_bw_ctx c = {
        .kind = PTI_BW_ADAPTIVE_AVG_POOL,
        .out_size = {grad_out->shape[grad_out->ndim - 2], grad_out->shape[grad_out->ndim - 1]}};
    return pti_conv_record_backward_op(out, grad_out, NULL, &c);
}

static pt_tensor *adaptive_avg_backward_impl(const pt_tensor *grad_out, const pt_tensor *x)
{
    const char *op = "pt_adaptive_avg_pool2d_backward";
    if (!PTI_CHECK_ARG(grad_out, op, "grad_output") ||
        !check_image(op, x, true, PTI_CONV_INTS_NONE))
        return NULL;
    if (grad_out->ndim != x->ndim)
        return pti_error_null(PT_ERR_SHAPE, "%s: grad_output of size %s for input %s", op,
                              pti_shape_str(grad_out->ndim, grad_out->shape),
                              pti_shape_str(x->ndim, x->shape));
    int64_t oh = grad_out->shape[grad_out->ndim - 2], ow = grad_out->shape[grad_out->ndim - 1];
    return run_pool_backward(op, PTI_OP_adaptive_avg_pool2d_backward, grad_out, x, NULL, oh, ow,
                             NULL);
}

/* ---- padding ----------------------------------------------------------------------------------
 */

static bool check_pad_args(const char *op, int ndim, const int64_t *shape, int n_pad,
                           const int64_t *pad, pt_pad_mode mode)
{
    if (n_pad < 0 || n_pad % 2 != 0)
        return pti_error(PT_ERR_INVALID_ARG, "%s: padding length must be divisible by 2 (got %d)",
                         op, n_pad) == PT_OK;
    if (n_pad > 0 && !pad)
        return pti_error(PT_ERR_NULL, "%s: pad is NULL", op) == PT_OK;
    if (n_pad / 2 > ndim)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: padding length too large: %d values for a %d-D input", op, n_pad,
                         ndim) == PT_OK;
    if (mode == PT_PAD_CONSTANT)
        return true;
    if (mode != PT_PAD_REFLECT && mode != PT_PAD_REPLICATE)
        return pti_error(PT_ERR_INVALID_ARG, "%s: unknown padding mode %d", op, (int)mode) == PT_OK;
    const char *name = mode == PT_PAD_REFLECT ? "reflect" : "replicate";
    int k = n_pad / 2;
    if (k < 1 || k > 3 || (ndim != k + 1 && ndim != k + 2))
        return pti_error(PT_ERR_SHAPE,
                         "%s: %s padding of %d values needs a %d-D or %d-D input, got %s", op, name,
                         n_pad, k + 1, k + 2, pti_shape_str(ndim, shape)) == PT_OK;
    for (int i = 0; i < k; i++) {
        int d = ndim - 1 - i;
        int64_t n = shape[d], l = pad[2 * i], r = pad[2 * i + 1];
        if (mode == PT_PAD_REFLECT && (l >= n || r >= n))
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: reflect padding size should be less than the corresponding "
                             "input dimension, but got padding (%lld, %lld) at dimension %d of "
                             "input %s",
                             op, (long long)l, (long long)r, d,
                             pti_shape_str(ndim, shape)) == PT_OK;
        if (n == 0)
            return pti_error(PT_ERR_SHAPE, "%s: %s padding of an empty dimension %d of input %s",
                             op, name, d, pti_shape_str(ndim, shape)) == PT_OK;
        if (n + l + r < 1)
            return pti_error(PT_ERR_SHAPE,
                             "%s: input size %lld at dimension %d with padding (%lld, %lld) gives "
                             "an output size < 1",
                             op, (long long)n, d, (long long)l, (long long)r) == PT_OK;
    }
    return true;
}

/* The padded shape of (ndim, in) and the kernel parameters. */
static bool pad_shape(const char *op, int ndim, const int64_t *in, int n_pad, const int64_t *pad,
                      pt_pad_mode mode, pti_pad_params *p, int64_t *shape)
{
    *p = (pti_pad_params){.mode = (int)mode};
    if (ndim > 0)
        memcpy(shape, in, sizeof(int64_t) * (size_t)ndim);
    for (int i = 0; i < n_pad / 2; i++) {
        int d = ndim - 1 - i;
        int64_t l = pad[2 * i], r = pad[2 * i + 1];
        shape[d] = in[d] + l + r;
        p->before[d] = l;
        if (shape[d] < 0)
            return pti_error(PT_ERR_SHAPE,
                             "%s: the input size %lld, plus negative padding %lld and %lld "
                             "resulted in a negative output size, which is invalid. Check "
                             "dimension %d of your input",
                             op, (long long)in[d], (long long)l, (long long)r, d) == PT_OK;
    }
    return true;
}

static pt_tensor *pad_impl(const pt_tensor *x, int n_pad, const int64_t *pad, pt_pad_mode mode,
                           double value);

pt_tensor *pt_pad(const pt_tensor *x, int n_pad, const int64_t *pad, pt_pad_mode mode, double value)
{
    if (!pti_conv_rec_begin(1, &x))
        return pad_impl(x, n_pad, pad, mode, value);
    pt_tensor *out = pad_impl(x, n_pad, pad, mode, value);
    pt_no_grad_end();
    return pti_conv_record_pad(out, x, n_pad, pad, mode);
}

static pt_tensor *pad_impl(const pt_tensor *x, int n_pad, const int64_t *pad, pt_pad_mode mode,
                           double value)
{
    const char *op = "pt_pad";
    pti_pad_params p;
    int64_t shape[PT_MAX_DIMS];
    if (!PTI_CHECK_ARG(x, op, "input") || !pti_check_plain_dtype(op, x) ||
        !check_pad_args(op, x->ndim, x->shape, n_pad, pad, mode) ||
        !pad_shape(op, x->ndim, x->shape, n_pad, pad, mode, &p, shape))
        return NULL;
    pt_tensor *xc = pt_contiguous(x);
    pt_tensor *out = xc ? pti_tensor_new(x->ndim, shape, x->dtype, x->storage->device) : NULL;
    if (out && out->numel > 0) {
        pti_call c = {
            .n_in = 1, .n_out = 1, .in = {xc}, .out = {out}, .params = &p, .scalar = {value}};
        if (pti_dispatch(PTI_OP_pad, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
    }
    pt_release(xc);
    return out;
}

/* Runs a float backward kernel: grad (converted to the compute dtype, contiguous) -> a new
 * gradient of (ndim, in_shape) in grad's dtype. */
static pt_tensor *run_shape_backward(pti_op kop, const pt_tensor *grad, int ndim,
                                     const int64_t *in_shape, const void *params)
{
    pt_tensor *g = pti_conv_prepare(grad, pti_conv_compute_dtype(grad->dtype));
    pt_tensor *out = g ? pti_tensor_new(ndim, in_shape, g->dtype, g->storage->device) : NULL;
    if (out && out->numel > 0) {
        pti_call c = {.n_in = 1, .n_out = 1, .in = {g}, .out = {out}, .params = params};
        if (pti_dispatch(kop, &c) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
    }
    pt_release(g);
    return out ? pti_conv_finish(out, ndim, in_shape, grad->dtype) : NULL;
}

/* grad_out must have exactly the shape (ndim, shape). */
static bool check_grad_exact(const char *op, const pt_tensor *grad_out, int ndim,
                             const int64_t *shape)
{
    bool ok = grad_out->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++)
        ok = grad_out->shape[d] == shape[d];
    if (!ok)
        return pti_error(PT_ERR_SHAPE, "%s: grad_output of size %s, expected %s", op,
                         pti_shape_str(grad_out->ndim, grad_out->shape),
                         pti_shape_str(ndim, shape)) == PT_OK;
    return true;
}

static pt_tensor *pad_backward_impl(const pt_tensor *grad_out, int ndim, const int64_t *input_shape,
                                    int n_pad, const int64_t *pad, pt_pad_mode mode);

pt_tensor *pt_pad_backward(const pt_tensor *grad_out, int ndim, const int64_t *input_shape,
                           int n_pad, const int64_t *pad, pt_pad_mode mode)
{
    if (!pti_conv_rec_begin(1, &grad_out))
        return pad_backward_impl(grad_out, ndim, input_shape, n_pad, pad, mode);
    pt_tensor *out = pad_backward_impl(grad_out, ndim, input_shape, n_pad, pad, mode);
    pt_no_grad_end();
    if (!out)
        return NULL;
    pti_conv_bw_ctx c = {.kind = PTI_BW_PAD, .n_pad = n_pad, .mode = mode};
    memcpy(c.pad, pad, (size_t)n_pad * sizeof(int64_t));
    return pti_conv_record_backward_op(out, grad_out, NULL, &c);
}

static pt_tensor *pad_backward_impl(const pt_tensor *grad_out, int ndim, const int64_t *input_shape,
                                    int n_pad, const int64_t *pad, pt_pad_mode mode)
{
    const char *op = "pt_pad_backward";
    pti_pad_params p;
    int64_t shape[PT_MAX_DIMS];
    if (!PTI_CHECK_ARG(grad_out, op, "grad_output") ||
        !pti_check_floating(op, "grad_output", grad_out))
        return NULL;
    if (!input_shape && ndim > 0)
        return pti_error_null(PT_ERR_NULL, "%s: input_shape is NULL", op);
    if (!pti_check_shape(op, ndim, input_shape) ||
        !check_pad_args(op, ndim, input_shape, n_pad, pad, mode) ||
        !pad_shape(op, ndim, input_shape, n_pad, pad, mode, &p, shape) ||
        !check_grad_exact(op, grad_out, ndim, shape))
        return NULL;
    return run_shape_backward(PTI_OP_pad_backward, grad_out, ndim, input_shape, &p);
}

/* ---- interpolation ----------------------------------------------------------------------------
 */

/* Checks opts and computes the output size out[2] of input spatial size in[2] (H, W). */
static bool interp_resolve(const char *op, const int64_t in_hw[2], const pt_interpolate_opts *opts,
                           pti_interp_params *pp, int64_t out[2])
{
    if (!opts)
        return pti_error(PT_ERR_NULL, "%s: opts is NULL (give a size or a scale_factor)", op) ==
               PT_OK;
    if (opts->mode != PT_INTERP_NEAREST && opts->mode != PT_INTERP_BILINEAR)
        return pti_error(PT_ERR_INVALID_ARG, "%s: unknown mode %d", op, (int)opts->mode) == PT_OK;
    if (opts->align_corners && opts->mode == PT_INTERP_NEAREST)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear",
                         op) == PT_OK;
    bool by_size = opts->size[0] != 0 || opts->size[1] != 0;
    bool by_scale = opts->scale_factor[0] != 0 || opts->scale_factor[1] != 0;
    if (by_size == by_scale)
        return pti_error(PT_ERR_INVALID_ARG, "%s: %s", op,
                         by_size ? "only one of size or scale_factor should be defined"
                                 : "either size or scale_factor should be defined") == PT_OK;
    pti_interp_params p = {.mode = (int)opts->mode, .align_corners = opts->align_corners};
    for (int i = 0; i < 2; i++) {
        int64_t in = in_hw[i];
        if (by_size) {
            out[i] = opts->size[i];
        } else {
            double s = opts->scale_factor[i];
            if (!(s > 0) || !isfinite(s))
                return pti_error(PT_ERR_INVALID_ARG,
                                 "%s: scale_factor must be positive and finite, got (%g, %g)", op,
                                 opts->scale_factor[0], opts->scale_factor[1]) == PT_OK;
            out[i] = (int64_t)floor((double)in * s);
            p.scale[i] = s;
        }
    }
    if (out[0] <= 0 || out[1] <= 0 || in_hw[0] <= 0 || in_hw[1] <= 0)
        return pti_error(PT_ERR_SHAPE,
                         "%s: input and output sizes should be greater than 0, but got input (H: "
                         "%lld, W: %lld) output (H: %lld, W: %lld)",
                         op, (long long)in_hw[0], (long long)in_hw[1], (long long)out[0],
                         (long long)out[1]) == PT_OK;
    *pp = p;
    return true;
}

static pt_tensor *interpolate_impl(const pt_tensor *x, const pt_interpolate_opts *opts);

pt_tensor *pt_interpolate(const pt_tensor *x, const pt_interpolate_opts *opts)
{
    if (!pti_conv_rec_begin(1, &x))
        return interpolate_impl(x, opts);
    pt_tensor *out = interpolate_impl(x, opts);
    pt_no_grad_end();
    return pti_conv_record_interpolate(out, x, opts);
}

static pt_tensor *interpolate_impl(const pt_tensor *x, const pt_interpolate_opts *opts)
{
    const char *op = "pt_interpolate";
    pti_interp_params p;
    int64_t out[2];
    if (!check_image(op, x, false, PTI_CONV_INTS_NONE) ||
        !interp_resolve(op, x->shape + 2, opts, &p, out))
        return NULL;
    pt_tensor *x4 = image_4d(x);
    if (!x4)
        return NULL;
    return run_image_op(PTI_OP_interpolate, x, x4, out[0], out[1], &p, NULL);
}

static pt_tensor *interpolate_backward_impl(const pt_tensor *grad_out, int ndim,
                                            const int64_t *input_shape,
                                            const pt_interpolate_opts *opts);

pt_tensor *pt_interpolate_backward(const pt_tensor *grad_out, int ndim, const int64_t *input_shape,
                                   const pt_interpolate_opts *opts)
{
    if (!pti_conv_rec_begin(1, &grad_out))
        return interpolate_backward_impl(grad_out, ndim, input_shape, opts);
    pt_tensor *out = interpolate_backward_impl(grad_out, ndim, input_shape, opts);
    pt_no_grad_end();
    if (!out)
        return NULL;
    pti_conv_bw_ctx c = {.kind = PTI_BW_INTERPOLATE, .interp = *opts};
    return pti_conv_record_backward_op(out, grad_out, NULL, &c);
}

static pt_tensor *interpolate_backward_impl(const pt_tensor *grad_out, int ndim,
                                            const int64_t *input_shape,
                                            const pt_interpolate_opts *opts)
{
    const char *op = "pt_interpolate_backward";
    pti_interp_params p;
    int64_t out[2];
    if (!PTI_CHECK_ARG(grad_out, op, "grad_output") ||
        !pti_check_floating(op, "grad_output", grad_out))
        return NULL;
    if (!input_shape)
        return pti_error_null(PT_ERR_NULL, "%s: input_shape is NULL", op);
    if (ndim != 4)
        return pti_error_null(PT_ERR_SHAPE, "%s: expected a 4-D input shape [N, C, H, W], got %s",
                              op, pti_shape_str(ndim, input_shape));
    if (!pti_check_shape(op, ndim, input_shape) ||
        !interp_resolve(op, input_shape + 2, opts, &p, out))
        return NULL;
    int64_t oshape[4] = {input_shape[0], input_shape[1], out[0], out[1]};
    if (!check_grad_exact(op, grad_out, 4, oshape))
        return NULL;
    return run_shape_backward(PTI_OP_interpolate_backward, grad_out, 4, input_shape, &p);
}
