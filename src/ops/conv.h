/* Kernel parameters of the conv family, shared by the front-ends (src/ops/conv*.c) and the
 * kernels of every backend (src/backends/<device>/conv*.c). The front-end has validated every
 * value and allocated the output; inputs reach kernels contiguous, in float32 or float64, or in
 * int64 for the integer forward ops (conv2d, conv_transpose2d, max_pool2d, avg_pool2d). */
#ifndef PT_OPS_CONV_H
#define PT_OPS_CONV_H

#include "../graph/node.h"
#include "common.h"

/* conv2d: in = {x [N,C,H,W], w [Co,C/g,kH,kW], bias [Co] or NULL}, out = {y [N,Co,oH,oW]}.
 * conv_transpose2d: in = {x [N,C,H,W], w [C,Co/g,kH,kW], bias}, out = {y [N,Co,oH,oW]}.
 * conv2d_weight_grad: in = {x [N,C,H,W], grad [N,Co,oH,oW]}, out = {gw [Co,C/g,kH,kW], gb [Co]
 * (optional, n_out 2)}; the input gradient runs as conv_transpose2d with out = [N,C,H,W].
 * pad[] is the padding before (top, left); the bottom/right padding is implied by the output
 * size (it may differ from the top/left one for padding="same"). */
typedef struct pti_conv_params {
    int64_t stride[2], pad[2], dilation[2];
    int64_t groups;
} pti_conv_params;

/* max_pool2d: in = {x [N,C,H,W]}, out = {y [N,C,oH,oW], indices int64 or absent (n_out 1)}.
 * avg_pool2d: in = {x}, out = {y}. adaptive_avg_pool2d: in = {x}, out = {y} (no params).
 * Backward ops: in = {grad_out [N,C,oH,oW], indices (max only)}, out = {grad_in [N,C,H,W]}. */
typedef struct pti_pool_params {
    int64_t kernel[2], stride[2], pad[2], dilation[2];
    bool count_include_pad;
    int64_t divisor_override; /* 0 = none */
} pti_pool_params;

/* pad: in = {x (any dtype, contiguous)}, out = {y}; before[d] is the padding added before dim
 * d (negative = crop); scalar[0] is the constant value. pad_backward: in = {grad [padded]},
 * out = {grad_in [input shape]}, float32/float64. */
typedef struct pti_pad_params {
    int mode; /* pt_pad_mode */
    int64_t before[PT_MAX_DIMS];
} pti_pad_params;

/* interpolate: in = {x [N,C,H,W]}, out = {y [N,C,oH,oW]}. scale[d] is the user's scale factor
 * (0 = none: the kernel uses in/out), as PyTorch passes it to its kernels.
 * interpolate_backward: in = {grad [N,C,oH,oW]}, out = {grad_in [N,C,H,W]}. */
typedef struct pti_interp_params {
    int mode; /* pt_interp_mode */
    bool align_corners;
    double scale[2];
} pti_interp_params;

/* ---- helpers shared by the front-ends (src/ops/conv*.c) ----------------------------------------
 */

/* The dtype kernels compute in: float64 stays, every other float dtype runs in float32 and
 * every integer dtype in int64 (the result is narrowed back, wrapping as PyTorch's does). The
 * front-ends refuse the dtypes an op does not take before asking. */
static inline pt_dtype pti_conv_compute_dtype(pt_dtype dt)
{
    if (pti_dtypes[dt].is_integral)
        return PT_INT64;
    return dt == PT_FLOAT64 ? PT_FLOAT64 : PT_FLOAT32;
}

/* Which integer dtypes a conv-family forward op takes besides the floats (PyTorch 2.x CPU). */
typedef enum pti_conv_ints {
    PTI_CONV_INTS_NONE,  /* floats only */
    PTI_CONV_INTS_INT64, /* int64 only: conv_transpose2d, avg_pool2d */
    PTI_CONV_INTS_ALL,   /* every integer width: conv1d/conv2d, max_pool2d */
} pti_conv_ints;

/* Checks that `arg` of op has a float dtype or an integer dtype that `ints` admits. */
bool pti_conv_check_dtype(const char *op, const char *arg, const pt_tensor *t, pti_conv_ints ints);
/* t converted to dt and made contiguous (a new reference; t itself when already so). */
pt_tensor *pti_conv_prepare(const pt_tensor *t, pt_dtype dt);
/* A contiguous view of contiguous t with another shape of the same numel. */
pt_tensor *pti_conv_reshape(const pt_tensor *t, int ndim, const int64_t *shape);
/* Consumes `out` (contiguous, compute dtype): returns it viewed as (ndim, shape) and converted
 * to dt. NULL (out released) on failure. */
pt_tensor *pti_conv_finish(pt_tensor *out, int ndim, const int64_t *shape, pt_dtype dt);

/* ---- autograd (conv_grad.c) -------------------------------------------------------------------
 * Each takes the forward result `out` (computed under no-grad; NULL passes through), records a
 * node with the op's backward formula and returns out, or releases out and returns NULL. */
pt_tensor *pti_conv_record(pt_tensor *out, int nsp, const pt_tensor *x, const pt_tensor *w,
                           const pt_tensor *bias, const pt_conv_opts *o);
pt_tensor *pti_conv_record_input_grad(pt_tensor *out, int nsp, const pt_tensor *w,
                                      const pt_tensor *g, const pt_conv_opts *o);
pt_tensor *pti_conv_record_weight_grad(pt_tensor *out, int nsp, const pt_tensor *x,
                                       const pt_tensor *g, const pt_conv_opts *o);
pt_tensor *pti_conv_record_transpose(pt_tensor *out, const pt_tensor *x, const pt_tensor *w,
                                     const pt_tensor *bias, const pt_conv_opts *o);
pt_tensor *pti_conv_record_max_pool(pt_tensor *out, const pt_tensor *x, const pt_tensor *indices);
pt_tensor *pti_conv_record_avg_pool(pt_tensor *out, const pt_tensor *x, const int64_t *kernel,
                                    const pt_avg_pool2d_opts *opts);
pt_tensor *pti_conv_record_pad(pt_tensor *out, const pt_tensor *x, int n_pad, const int64_t *pad,
                               pt_pad_mode mode);
pt_tensor *pti_conv_record_interpolate(pt_tensor *out, const pt_tensor *x,
                                       const pt_interpolate_opts *opts);
/* The gradient ops of pooling/pad/interpolate are linear in grad_out; recorded, their backward
 * is the forward op (avg/adaptive pooling, pad, interpolate) or a gather at the max indices. */
typedef enum pti_conv_bw_kind {
    PTI_BW_MAX_POOL,
    PTI_BW_AVG_POOL,
    PTI_BW_ADAPTIVE_AVG_POOL,
    PTI_BW_PAD,
    PTI_BW_INTERPOLATE,
} pti_conv_bw_kind;

typedef struct pti_conv_bw_ctx {
    pti_conv_bw_kind kind;
    int64_t kernel[2];          /* avg pool */
    pt_avg_pool2d_opts avg;     /* avg pool */
    int64_t out_size[2];        /* adaptive pool */
    pt_interpolate_opts interp; /* interpolate */
    int n_pad;                  /* pad */
    int64_t pad[2 * PT_MAX_DIMS];
    pt_pad_mode mode;
} pti_conv_bw_ctx;

/* Records the gradient op that produced out from grad_out (indices: max pooling only). */
pt_tensor *pti_conv_record_backward_op(pt_tensor *out, const pt_tensor *grad_out,
                                       const pt_tensor *indices, const pti_conv_bw_ctx *c);

/* True (and grad mode switched off, to be restored with pt_no_grad_end) when the op with these
 * inputs must be recorded. */
static inline bool pti_conv_rec_begin(int n, const pt_tensor *const *inputs)
{
    if (!pti_grad_recording(n, inputs))
        return false;
    pt_no_grad_begin();
    return true;
}

#endif
