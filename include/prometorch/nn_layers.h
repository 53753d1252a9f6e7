/* PromeTorch nn layers: the standard torch.nn modules (linear, convolution, normalization,
 * embedding, dropout, pooling, upsampling, shape layers).
 *
 * Each constructor returns a module (pt_module, see nn.h) with PyTorch's parameters and buffers
 * under PyTorch's names, shapes and registration order, PyTorch's default initialization
 * (drawn from the library generator: pt_manual_seed reproduces it, torch's numbers are not
 * reproduced), PyTorch's extra_repr and train/eval behaviour. Run them with pt_nn_forward;
 * free them with pt_nn_free (or let a container own them).
 *
 * Short constructors take PyTorch's most used arguments; `_ex` constructors take an options
 * struct whose zero value is PyTorch's default (a NULL opts pointer means all defaults).
 * Invalid arguments (a non-positive size, groups not dividing the channels, a probability
 * outside [0, 1], an unsupported option) return NULL with PT_ERR_INVALID_ARG (or
 * PT_ERR_UNSUPPORTED) and a message naming the layer and the argument. */
#ifndef PROMETORCH_NN_LAYERS_H
#define PROMETORCH_NN_LAYERS_H

#include "nn.h"
#include "ops_conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- linear and shape layers ----------------------------------------------------------------- */

/* nn.Linear(in, out, bias): weight [out, in], bias [out] (when bias), both U(-k, k) with
 * k = 1/sqrt(in) (PyTorch's kaiming_uniform_(a=sqrt(5)) and bias rule). Forward: x [..., in]
 * -> x W^T + b [..., out] (one addmm for 2-D input). */
PT_API pt_module *pt_nn_linear(int64_t in, int64_t out, bool bias);

/* nn.Bilinear(in1, in2, out, bias): weight [out, in1, in2], bias [out], U(-k, k) with
 * k = 1/sqrt(in1). Forward takes two inputs (pt_nn_forward_n, in = {x1, x2}, one output):
 * y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]. */
PT_API pt_module *pt_nn_bilinear(int64_t in1, int64_t in2, int64_t out, bool bias);

/* nn.Identity(): returns its input as an alias (a new tensor object viewing the same data,
 * passing gradients through; PyTorch returns the input object itself). */
PT_API pt_module *pt_nn_identity(void);

/* nn.Flatten(start_dim, end_dim) (PyTorch's defaults are 1, -1): pt_flatten on the input. */
PT_API pt_module *pt_nn_flatten(int64_t start_dim, int64_t end_dim);

/* nn.Unflatten(dim, unflattened_size): pt_unflatten(x, dim, n, sizes) (one size may be -1).
 * sizes is copied. */
PT_API pt_module *pt_nn_unflatten(int64_t dim, int n, const int64_t *sizes);

/* nn.Dropout(p) (PyTorch's default p = 0.5): pt_dropout in training mode, an alias of the
 * input in eval mode. Error unless 0 <= p <= 1. inplace=True is not offered. */
PT_API pt_module *pt_nn_dropout(double p);

/* ---- convolution ----------------------------------------------------------------------------- */

/* Options of pt_nn_conv2d_ex / pt_nn_conv1d_ex (1-D uses element [0] of each pair). The zero
 * value is PyTorch's default: stride 1, padding 0, dilation 1, groups 1, bias on,
 * padding_mode "zeros". */
typedef struct pt_nn_conv_opts {
    int64_t stride[2];   /* 0 = 1 */
    int64_t padding[2];  /* explicit zero padding (padding_type PT_CONV_PADDING_EXPLICIT) */
    int64_t dilation[2]; /* 0 = 1 */
    int64_t groups;      /* 0 = 1 */
    pt_conv_padding_mode padding_type; /* padding='same' / 'valid' (same needs stride 1) */
    bool no_bias;                      /* bias=False */
    /* padding_mode: NULL or "zeros" (default), "reflect" or "replicate" (done with pt_pad);
     * "circular" is not supported (PT_ERR_UNSUPPORTED). */
    const char *padding_mode;
} pt_nn_conv_opts;

/* nn.Conv2d(in, out, kernel, stride, padding, bias=bias) with square kernel/stride/padding:
 * weight [out, in, k, k], bias [out], U(-b, b) with b = 1/sqrt(in * k * k). Input
 * [N, C, H, W] or [C, H, W]. */
PT_API pt_module *pt_nn_conv2d(int64_t in, int64_t out, int kernel, int stride, int padding,
                               bool bias);
/* nn.Conv2d with a (kH, kW) kernel and all options (groups: weight [out, in/groups, kH, kW],
 * fan_in = in/groups * kH * kW). Errors: sizes <= 0, groups not dividing in and out,
 * padding='same' with a stride != 1. */
PT_API pt_module *pt_nn_conv2d_ex(int64_t in, int64_t out, const int64_t kernel[2],
                                  const pt_nn_conv_opts *opts);
/* nn.Conv1d(in, out, kernel, stride, padding, bias=bias): weight [out, in, k]. */
PT_API pt_module *pt_nn_conv1d(int64_t in, int64_t out, int kernel, int stride, int padding,
                               bool bias);
/* nn.Conv1d with all options (element [0] of each opts pair). */
PT_API pt_module *pt_nn_conv1d_ex(int64_t in, int64_t out, int64_t kernel,
                                  const pt_nn_conv_opts *opts);

/* Options of pt_nn_conv_transpose2d_ex; zero value = PyTorch's default. */
typedef struct pt_nn_conv_transpose_opts {
    int64_t stride[2]; /* 0 = 1 */
    int64_t padding[2];
    int64_t output_padding[2]; /* must be smaller than stride or dilation */
    int64_t dilation[2];       /* 0 = 1 */
    int64_t groups;            /* 0 = 1 */
    bool no_bias;
} pt_nn_conv_transpose_opts;

/* nn.ConvTranspose2d(in, out, kernel, stride, padding, bias=bias): weight
 * [in, out/groups, kH, kW] (PyTorch's layout), bias [out], U(-b, b) with
 * b = 1/sqrt(out/groups * kH * kW) (torch's fan_in of that weight). */
PT_API pt_module *pt_nn_conv_transpose2d(int64_t in, int64_t out, int kernel, int stride,
                                         int padding, bool bias);
PT_API pt_module *pt_nn_conv_transpose2d_ex(int64_t in, int64_t out, const int64_t kernel[2],
                                            const pt_nn_conv_transpose_opts *opts);

/* ---- normalization --------------------------------------------------------------------------- */

/* Options of the BatchNorm constructors; zero value = PyTorch's default (eps 1e-5,
 * momentum 0.1, affine, track_running_stats). */
typedef struct pt_nn_batch_norm_opts {
    double eps;                  /* 0 = 1e-5 */
    bool has_momentum;           /* false: momentum 0.1 */
    double momentum;             /* used when has_momentum */
    bool momentum_none;          /* momentum=None: cumulative average, 1/num_batches_tracked */
    bool no_affine;              /* affine=False: no weight/bias */
    bool no_track_running_stats; /* track_running_stats=False: no buffers, batch stats always */
} pt_nn_batch_norm_opts;

/* nn.BatchNorm1d(num_features): weight (ones) and bias (zeros) [C]; buffers running_mean
 * (zeros), running_var (ones) [C] float32 and num_batches_tracked (0-dim int64 0). Input
 * [N, C] or [N, C, L]. Training: batch statistics, running stats updated with momentum (the
 * unbiased variance), num_batches_tracked += 1. Eval: running statistics. */
PT_API pt_module *pt_nn_batch_norm1d(int64_t num_features);
PT_API pt_module *pt_nn_batch_norm1d_ex(int64_t num_features, const pt_nn_batch_norm_opts *opts);
/* nn.BatchNorm2d(num_features): as BatchNorm1d for [N, C, H, W] input. */
PT_API pt_module *pt_nn_batch_norm2d(int64_t num_features);
PT_API pt_module *pt_nn_batch_norm2d_ex(int64_t num_features, const pt_nn_batch_norm_opts *opts);

/* Options of pt_nn_instance_norm2d_ex; zero value = PyTorch's default (eps 1e-5, momentum 0.1,
 * affine=False, track_running_stats=False). */
typedef struct pt_nn_instance_norm_opts {
    double eps;        /* 0 = 1e-5 */
    bool has_momentum; /* false: 0.1 */
    double momentum;
    bool affine;              /* weight (ones) and bias (zeros) [C] */
    bool track_running_stats; /* running_mean/var/num_batches_tracked buffers */
} pt_nn_instance_norm_opts;

/* nn.InstanceNorm2d(num_features): normalizes each (sample, channel) plane of [N, C, H, W]
 * or [C, H, W] input. With track_running_stats, training updates the running stats with the
 * mean over the batch of the per-instance statistics and eval normalizes with them. */
PT_API pt_module *pt_nn_instance_norm2d(int64_t num_features);
PT_API pt_module *pt_nn_instance_norm2d_ex(int64_t num_features,
                                           const pt_nn_instance_norm_opts *opts);

/* Options of pt_nn_layer_norm_ex; zero value = PyTorch's default. */
typedef struct pt_nn_layer_norm_opts {
    double eps;                 /* 0 = 1e-5 */
    bool no_elementwise_affine; /* elementwise_affine=False: no parameters */
    bool no_bias;               /* bias=False (PyTorch >= 2.1): weight only */
} pt_nn_layer_norm_opts;

/* nn.LayerNorm(normalized_shape): weight (ones) and bias (zeros) of normalized_shape (n dims,
 * copied); normalizes over the last n dims of the input. */
PT_API pt_module *pt_nn_layer_norm(int n, const int64_t *normalized_shape);
PT_API pt_module *pt_nn_layer_norm_ex(int n, const int64_t *normalized_shape,
                                      const pt_nn_layer_norm_opts *opts);

/* Options of pt_nn_group_norm_ex; zero value = PyTorch's default. */
typedef struct pt_nn_group_norm_opts {
    double eps;     /* 0 = 1e-5 */
    bool no_affine; /* affine=False */
} pt_nn_group_norm_opts;

/* nn.GroupNorm(num_groups, num_channels): weight (ones), bias (zeros) [C]; input [N, C, *].
 * Error unless num_groups divides num_channels. */
PT_API pt_module *pt_nn_group_norm(int64_t num_groups, int64_t num_channels);
PT_API pt_module *pt_nn_group_norm_ex(int64_t num_groups, int64_t num_channels,
                                      const pt_nn_group_norm_opts *opts);

/* Options of pt_nn_rms_norm_ex; zero value = PyTorch's default (eps=None). */
typedef struct pt_nn_rms_norm_opts {
    bool has_eps; /* false: eps=None, torch.finfo(input.dtype).eps at run time */
    double eps;
    bool no_elementwise_affine;
} pt_nn_rms_norm_opts;

/* nn.RMSNorm(normalized_shape) (PyTorch >= 2.4): weight (ones) of normalized_shape. */
PT_API pt_module *pt_nn_rms_norm(int n, const int64_t *normalized_shape);
PT_API pt_module *pt_nn_rms_norm_ex(int n, const int64_t *normalized_shape,
                                    const pt_nn_rms_norm_opts *opts);

/* ---- embedding ------------------------------------------------------------------------------- */

/* Options of pt_nn_embedding_ex; zero value = PyTorch's default. max_norm,
 * scale_grad_by_freq and sparse are not supported: setting them fails with
 * PT_ERR_UNSUPPORTED. */
typedef struct pt_nn_embedding_opts {
    bool has_padding_idx;
    int64_t padding_idx; /* in [-num, num); negative counts from the end (stored normalized) */
    bool has_max_norm;
    double max_norm;
    bool scale_grad_by_freq;
    bool sparse;
} pt_nn_embedding_opts;

/* nn.Embedding(num_embeddings, embedding_dim): weight [num, dim] ~ N(0, 1); the padding_idx
 * row is zeroed at construction and gets no gradient. Input: int64/int32 indices of any
 * shape; output indices.shape + [dim]. */
PT_API pt_module *pt_nn_embedding(int64_t num_embeddings, int64_t embedding_dim);
PT_API pt_module *pt_nn_embedding_ex(int64_t num_embeddings, int64_t embedding_dim,
                                     const pt_nn_embedding_opts *opts);

/* ---- pooling and upsampling ------------------------------------------------------------------ */

/* nn.MaxPool2d(kernel, stride, padding) (stride 0 = kernel, PyTorch's stride=None). */
PT_API pt_module *pt_nn_max_pool2d(int64_t kernel, int64_t stride, int64_t padding);
/* nn.MaxPool2d with a (kH, kW) kernel and dilation / ceil_mode (opts as pt_max_pool2d_ex;
 * NULL = defaults). return_indices is not offered. */
PT_API pt_module *pt_nn_max_pool2d_ex(const int64_t kernel[2], const pt_max_pool2d_opts *opts);

/* nn.AvgPool2d(kernel, stride, padding) (stride 0 = kernel; count_include_pad=True). */
PT_API pt_module *pt_nn_avg_pool2d(int64_t kernel, int64_t stride, int64_t padding);
/* nn.AvgPool2d with a (kH, kW) kernel and ceil_mode / count_include_pad (exclude_pad) /
 * divisor_override (opts as pt_avg_pool2d_ex; NULL = defaults). */
PT_API pt_module *pt_nn_avg_pool2d_ex(const int64_t kernel[2], const pt_avg_pool2d_opts *opts);

/* nn.AdaptiveAvgPool2d(output_size) with a square int size. */
PT_API pt_module *pt_nn_adaptive_avg_pool2d(int64_t output_size);
/* nn.AdaptiveAvgPool2d((oH, oW)). */
PT_API pt_module *pt_nn_adaptive_avg_pool2d_hw(const int64_t output_size[2]);

/* nn.Upsample(size=..., scale_factor=..., mode=..., align_corners=...): opts as pt_interpolate
 * (exactly one of size / scale_factor; modes nearest and bilinear; align_corners bilinear
 * only). 4-D input. */
PT_API pt_module *pt_nn_upsample(const pt_interpolate_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
