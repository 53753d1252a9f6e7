/* PromeTorch ops: the conv family -- convolution (1-D, 2-D, transposed 2-D), pooling (max,
 * average, adaptive average), padding and interpolation, with torch.nn.functional semantics.
 *
 * Layout is NCHW (NCL for 1-D). Where PyTorch accepts an unbatched input (CHW / CL) so do
 * these ops, and the result is unbatched too. Float dtypes (float32, float64; float16 and
 * bfloat16 are computed in float32 and rounded back); pt_pad takes every plain dtype. Integer
 * inputs work where PyTorch 2.x's CPU kernels take them (forward only: integer tensors cannot
 * require grad): conv1d / conv2d and max_pool2d for int64, int32, int16, int8 and uint8
 * (dilation > 1 for int64 only), conv_transpose2d and avg_pool2d for int64 only. The result
 * keeps the input's dtype and wraps on overflow as PyTorch's does (a uint8 result of -5 is
 * 251); integer avg_pool2d truncates the quotient toward zero. Bool is refused by all of them.
 *
 * Gradients for autograd sit beside each op: pt_conv2d_input_grad / pt_conv2d_weight_grad
 * (torch.nn.grad), the 1-D versions, pt_max_pool2d_backward, pt_avg_pool2d_backward,
 * pt_adaptive_avg_pool2d_backward, pt_pad_backward and pt_interpolate_backward; the comment of
 * pt_conv_transpose2d says how its gradients compose from these. All functions are safe to call
 * from several threads on different tensors.
 *
 * Autograd: the forward ops record (their formulas are the gradient ops above), and so do the
 * gradient ops themselves (with respect to grad_out and, for the convolution gradients, the
 * weight/input), so every op here has second derivatives. Exception: the bias_grad output of
 * pt_conv{1,2}d_weight_grad carries no history. pt_max_pool2d_backward's own derivative uses
 * pt_gather.
 *
 * Ownership: every function returning pt_tensor * returns a new reference, or NULL with the
 * error set (see core.h); a NULL tensor argument propagates the earlier error. Errors:
 * PT_ERR_SHAPE for shapes that do not fit (the message names them), PT_ERR_INVALID_ARG for bad
 * window parameters (stride <= 0, negative padding, groups that do not divide the channels),
 * PT_ERR_DTYPE for dtypes an op does not take (above) or mixed dtypes, PT_ERR_DEVICE for mixed
 * devices. */
#ifndef PROMETORCH_OPS_CONV_H
#define PROMETORCH_OPS_CONV_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- convolution ----------------------------------------------------------------------------- */

/* How a convolution pads its input: the explicit `padding` values (default), or PyTorch's
 * padding="same" (output size = input size; stride must be 1; when the total padding
 * dilation*(k-1) is odd the extra row/column goes at the bottom/right, as PyTorch does) or
 * padding="valid" (no padding). */
typedef enum pt_conv_padding_mode {
    PT_CONV_PADDING_EXPLICIT = 0,
    PT_CONV_PADDING_SAME,
    PT_CONV_PADDING_VALID,
} pt_conv_padding_mode;

/* Options of pt_conv2d_ex / pt_conv1d_ex. The zero value is PyTorch's default: a zero stride,
 * dilation or groups means 1, padding 0. 1-D convolutions use element [0] of each pair. */
typedef struct pt_conv_opts {
    int64_t stride[2];   /* (sH, sW); 0 = 1 */
    int64_t padding[2];  /* (pH, pW) zeros added on both sides; only with PADDING_EXPLICIT */
    int64_t dilation[2]; /* 0 = 1 */
    int64_t groups;      /* 0 = 1 */
    pt_conv_padding_mode padding_mode;
} pt_conv_opts;

/* 2-D convolution (cross-correlation), F.conv2d(x, w, bias, stride, padding, dilation, groups).
 * x: [N, C_in, H, W] or unbatched [C_in, H, W]; w: [C_out, C_in/groups, kH, kW]; bias: [C_out]
 * or NULL. stride/padding/dilation may be NULL for (1,1)/(0,0)/(1,1). Result
 * [N, C_out, (H + 2pH - dH(kH-1) - 1)/sH + 1, ...]. Errors: channel mismatch (naming both
 * shapes), a kernel larger than the padded input, groups not dividing C_in and C_out. */
PT_API pt_tensor *pt_conv2d(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                            const int64_t stride[2], const int64_t padding[2],
                            const int64_t dilation[2], int64_t groups);
/* pt_conv2d with an options struct (adds padding="same"/"valid"); opts NULL = defaults. */
PT_API pt_tensor *pt_conv2d_ex(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                               const pt_conv_opts *opts);
/* 1-D convolution, F.conv1d: x [N, C_in, L] or [C_in, L]; w [C_out, C_in/groups, k]. */
PT_API pt_tensor *pt_conv1d(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                            int64_t stride, int64_t padding, int64_t dilation, int64_t groups);
/* pt_conv1d with an options struct (uses element [0] of each pair); opts NULL = defaults. */
PT_API pt_tensor *pt_conv1d_ex(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                               const pt_conv_opts *opts);
/* Transposed 2-D convolution, F.conv_transpose2d(x, w, bias, stride, padding, output_padding,
 * groups, dilation). x: [N, C_in, H, W] or [C_in, H, W]; w: [C_in, C_out/groups, kH, kW];
 * bias [C_out] or NULL. Output size (H-1)sH - 2pH + dH(kH-1) + opH + 1. Any of the pair
 * arguments may be NULL (stride/dilation 1, padding/output_padding 0); groups must be > 0.
 * output_padding must be smaller than stride or dilation.
 * Gradients: with o = {stride, padding, dilation, groups}, d/dx = pt_conv2d_ex(grad, w, NULL, &o)
 * cropped to x's size, and d/dw = pt_conv2d_weight_grad(grad, 4, w's shape, x', &o, NULL) where
 * x' is x zero-extended at the bottom/right to that convolution's output size (the sizes differ
 * only when output_padding >= stride); the bias gradient is grad summed over N, H and W. */
PT_API pt_tensor *pt_conv_transpose2d(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias,
                                      const int64_t stride[2], const int64_t padding[2],
                                      const int64_t output_padding[2], int64_t groups,
                                      const int64_t dilation[2]);

/* ---- convolution gradients (torch.nn.grad) ------------------------------------------------------
 */

/* The gradient of pt_conv2d_ex with respect to its input, torch.nn.grad.conv2d_input(input_size,
 * weight, grad_output, stride, padding, dilation, groups). input_shape (3 or 4 dims) is the
 * forward input's shape, w the forward weight, grad_out the gradient of the forward output
 * (its shape). opts as pt_conv2d_ex (NULL = defaults; same/valid padding work). Computed as a
 * transposed convolution. Returns a new tensor of input_shape. */
PT_API pt_tensor *pt_conv2d_input_grad(int ndim, const int64_t *input_shape, const pt_tensor *w,
                                       const pt_tensor *grad_out, const pt_conv_opts *opts);
/* The gradient of pt_conv2d_ex with respect to its weight, torch.nn.grad.conv2d_weight(input,
 * weight_size, grad_output, ...): a tensor of weight_shape (4 dims). When bias_grad is non-NULL
 * it receives (new reference) the bias gradient, grad_out summed over batch and space ([C_out]);
 * on failure it is set to NULL. */
PT_API pt_tensor *pt_conv2d_weight_grad(const pt_tensor *x, int ndim, const int64_t *weight_shape,
                                        const pt_tensor *grad_out, const pt_conv_opts *opts,
                                        pt_tensor **bias_grad);

/* The same for pt_conv1d_ex (opts use element [0] of each pair): input_shape has 2 or 3 dims,
 * weight_shape 3. */
PT_API pt_tensor *pt_conv1d_input_grad(int ndim, const int64_t *input_shape, const pt_tensor *w,
                                       const pt_tensor *grad_out, const pt_conv_opts *opts);
PT_API pt_tensor *pt_conv1d_weight_grad(const pt_tensor *x, int ndim, const int64_t *weight_shape,
                                        const pt_tensor *grad_out, const pt_conv_opts *opts,
                                        pt_tensor **bias_grad);

/* ---- pooling -----------------------------------------------------------------------------------
 */

/* Options of pt_max_pool2d_ex; the zero value is PyTorch's default (stride 0 = kernel size,
 * padding 0, dilation 0 = 1, ceil_mode false). */
typedef struct pt_max_pool2d_opts {
    int64_t stride[2];
    int64_t padding[2]; /* implicit -inf padding; at most half the kernel size */
    int64_t dilation[2];
    bool ceil_mode; /* round the output size up (windows must still start inside the input) */
} pt_max_pool2d_opts;

/* 2-D max pooling, F.max_pool2d(x, kernel, stride, padding). x [N, C, H, W] or [C, H, W].
 * stride NULL or {0, 0} means stride = kernel; padding NULL = 0. NaN wins, as in PyTorch. */
PT_API pt_tensor *pt_max_pool2d(const pt_tensor *x, const int64_t kernel[2],
                                const int64_t stride[2], const int64_t padding[2]);
/* Max pooling with dilation and ceil_mode; when `indices` is non-NULL it receives (new
 * reference) an int64 tensor of the output's shape holding the flat index h * W + w of each
 * maximum within its input plane (return_indices=True). On failure *indices is NULL. */
PT_API pt_tensor *pt_max_pool2d_ex(const pt_tensor *x, const int64_t kernel[2],
                                   const pt_max_pool2d_opts *opts, pt_tensor **indices);

/* Options of pt_avg_pool2d_ex; the zero value is PyTorch's default. */
typedef struct pt_avg_pool2d_opts {
    int64_t stride[2];  /* 0 = kernel size */
    int64_t padding[2]; /* zero padding; at most half the kernel size */
    bool ceil_mode;
    bool exclude_pad;         /* true = count_include_pad=False (divide by the real cells) */
    int64_t divisor_override; /* 0 = none; otherwise divide every window sum by it */
} pt_avg_pool2d_opts;

/* 2-D average pooling, F.avg_pool2d(x, kernel, stride, padding) (count_include_pad=True).
 * stride NULL or {0, 0} = kernel; padding NULL = 0. */
PT_API pt_tensor *pt_avg_pool2d(const pt_tensor *x, const int64_t kernel[2],
                                const int64_t stride[2], const int64_t padding[2]);
PT_API pt_tensor *pt_avg_pool2d_ex(const pt_tensor *x, const int64_t kernel[2],
                                   const pt_avg_pool2d_opts *opts);
/* F.adaptive_avg_pool2d(x, output_size): window i spans [floor(i*H/oH), ceil((i+1)*H/oH)). */
PT_API pt_tensor *pt_adaptive_avg_pool2d(const pt_tensor *x, const int64_t output_size[2]);

/* Pooling gradients (the backward of the ops above): each returns the gradient with respect
 * to x, a new tensor of x's shape and dtype. grad_out has the forward output's shape. */
/* Adds each grad_out element at its max position: indices as returned by pt_max_pool2d_ex
 * (flat h * W + w per plane; an index outside the plane is PT_ERR_INDEX). */
PT_API pt_tensor *pt_max_pool2d_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                         const pt_tensor *indices);
/* Spreads each grad_out element over its window divided as in the forward (same kernel and
 * options as the forward call). */
PT_API pt_tensor *pt_avg_pool2d_backward(const pt_tensor *grad_out, const pt_tensor *x,
                                         const int64_t kernel[2], const pt_avg_pool2d_opts *opts);
PT_API pt_tensor *pt_adaptive_avg_pool2d_backward(const pt_tensor *grad_out, const pt_tensor *x);

/* ---- padding -----------------------------------------------------------------------------------
 */

typedef enum pt_pad_mode {
    PT_PAD_CONSTANT = 0,
    PT_PAD_REFLECT,
    PT_PAD_REPLICATE,
} pt_pad_mode;

/* F.pad(x, pad, mode, value). pad holds n_pad (even) values in PyTorch's order: (left, right)
 * of the last dim, then of the dim before, ... Constant mode pads any dims (negative values
 * crop); reflect/replicate pad the last 1, 2 or 3 dims of a 2-D/3-D, 3-D/4-D or 4-D/5-D
 * input (reflect padding must be smaller than the dim). value is used by constant mode. */
PT_API pt_tensor *pt_pad(const pt_tensor *x, int n_pad, const int64_t *pad, pt_pad_mode mode,
                         double value);

/* The gradient of pt_pad with respect to its input: grad_out has the padded shape; cells that
 * came from the input (several, for reflect/replicate) add into it, constant cells are dropped.
 * Returns a new float tensor of input_shape. */
PT_API pt_tensor *pt_pad_backward(const pt_tensor *grad_out, int ndim, const int64_t *input_shape,
                                  int n_pad, const int64_t *pad, pt_pad_mode mode);

/* ---- interpolation -----------------------------------------------------------------------------
 */

typedef enum pt_interp_mode {
    PT_INTERP_NEAREST = 0,
    PT_INTERP_BILINEAR,
} pt_interp_mode;

/* Options of pt_interpolate: give either size (both > 0) or scale_factor (both > 0). */
typedef struct pt_interpolate_opts {
    int64_t size[2];        /* output (H, W); {0, 0} = use scale_factor */
    double scale_factor[2]; /* output = floor(input * scale); the kernel then maps with 1/scale */
    pt_interp_mode mode;
    bool align_corners; /* bilinear only (PyTorch rejects it for nearest) */
} pt_interpolate_opts;

/* F.interpolate for 4-D input [N, C, H, W] in modes "nearest" and "bilinear", with PyTorch's
 * source-index formulas (recompute_scale_factor=None). */
PT_API pt_tensor *pt_interpolate(const pt_tensor *x, const pt_interpolate_opts *opts);
/* The gradient of pt_interpolate with respect to its input (shape input_shape, 4-D): each
 * grad_out element is added to the source cells it was read from, times their weights. */
PT_API pt_tensor *pt_interpolate_backward(const pt_tensor *grad_out, int ndim,
                                          const int64_t *input_shape,
                                          const pt_interpolate_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
