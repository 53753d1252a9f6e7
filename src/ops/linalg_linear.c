/* The linalg family's linear layer op, pt_linear (F.linear), and the weight-only quantized
 * product behind it and behind pt_matmul with a block-dtype second argument.
 *
 * Float weights take the ordinary path (addmm / matmul + add, differentiable). A GGUF weight
 * -- a block dtype, or float16/bfloat16 next to a float32 input -- stays as loaded, [N, K]
 * row-major, and goes to the quant_linear kernel (src/ops/linalg.def), which quantizes the
 * activations per block to 8 bits as llama.cpp does. That path is inference only. */
#include <string.h>

#include "../graph/node.h"
#include "../core/internal.h"
#include "common.h"
#include "prometorch/ops_elementwise.h"
#include "prometorch/ops_linalg.h"
#include "prometorch/ops_shape.h"

pt_tensor *pti_matmul_block_weight(const pt_tensor *a, const pt_tensor *b);

/* True when w goes to the quant_linear kernel rather than the float path. */
static bool is_weight_only(const pt_tensor *x, const pt_tensor *w)
{
    if (pti_dtypes[w->dtype].is_block)
        return true;
    return x->dtype == PT_FLOAT32 && (w->dtype == PT_FLOAT16 || w->dtype == PT_BFLOAT16);
}

/* A contiguous [N, K] weight whose bytes lie inside its storage: block tensors are never
 * copied, and their views are not bounds-checked when made, so this is checked here. */
static bool check_weight_layout(const char *op, const pt_tensor *w)
{
    const pti_dtype_info *di = &pti_dtypes[w->dtype];
    int64_t n = w->shape[0], k = w->shape[1], bs = di->block_size;
    if (k % bs != 0) {
        pti_error(PT_ERR_SHAPE,
                  "%s: in_features %lld of the %s weight %s is not a multiple of its block "
                  "size %lld",
                  op, (long long)k, di->name, pti_shape_str(2, w->shape), (long long)bs);
        return false;
    }
    if (w->numel > 0 && !pti_is_contiguous(w)) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "%s: the %s weight must be contiguous ([N, K] as stored), but has shape %s "
                  "and strides %s",
                  op, di->name, pti_shape_str(2, w->shape), pti_shape_str(2, w->stride));
        return false;
    }
    uint64_t first = (uint64_t)(w->offset / bs) * di->size;
    uint64_t bytes = (uint64_t)n * (uint64_t)(k / bs) * di->size;
    if (w->offset < 0 || w->offset % bs != 0 || first + bytes > w->storage->nbytes) {
        pti_error(PT_ERR_SHAPE,
                  "%s: the %s weight %s at element offset %lld does not lie on whole blocks "
                  "inside its storage (%zu bytes)",
                  op, di->name, pti_shape_str(2, w->shape), (long long)w->offset,
                  w->storage->nbytes);
        return false;
    }
    return true;
}

/* Checks of the weight-only path; shapes: x [..., K], w [N, K], bias [N]. */
static bool check_weight_only(const char *op, const pt_tensor *x, const pt_tensor *w,
                              const pt_tensor *bias)
{
    const char *wname = pt_dtype_name(w->dtype);
    if (x->dtype != PT_FLOAT32) {
        pti_error(PT_ERR_DTYPE, "%s: a %s weight needs a float32 input, but got %s", op, wname,
                  pt_dtype_name(x->dtype));
        return false;
    }
    if (w->ndim != 2) {
        pti_error(PT_ERR_SHAPE,
                  "%s: a %s weight must be 2-D [out_features, in_features], but got shape %s", op,
                  wname, pti_shape_str(w->ndim, w->shape));
        return false;
    }
    if (x->ndim == 0 || x->shape[x->ndim - 1] != w->shape[1]) {
        pti_error(PT_ERR_SHAPE,
                  "%s: input %s and %s weight %s cannot be multiplied (in_features %lld != "
                  "%lld)",
                  op, pti_shape_str(x->ndim, x->shape), wname, pti_shape_str(2, w->shape),
                  (long long)(x->ndim ? x->shape[x->ndim - 1] : 0), (long long)w->shape[1]);
        return false;
    }
    if (!check_weight_layout(op, w))
        return false;
    if (bias && bias->dtype != PT_FLOAT32) {
        pti_error(PT_ERR_DTYPE, "%s: bias must be float32 next to a %s weight, but got %s", op,
                  wname, pt_dtype_name(bias->dtype));
        return false;
    }
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0])) {
        pti_error(PT_ERR_SHAPE, "%s: bias must have shape [%lld] (out_features), but got %s", op,
                  (long long)w->shape[0], pti_shape_str(bias->ndim, bias->shape));
        return false;
    }
    const pt_tensor *ins[3] = {x, w, bias};
    if (pti_grad_recording(3, ins)) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "%s: no gradient through a %s weight (the quantized product is inference "
                  "only), but an input requires grad; use pt_no_grad_begin() or pt_detach()",
                  op, wname);
        return false;
    }
    return true;
}

/* y [..., N] = x [..., K] @ w[N, K]^T (+ bias) on the quant_linear kernel; checked inputs. */
static pt_tensor *run_weight_only(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias)
{
    int64_t n = w->shape[0], k = w->shape[1], m = 1;
    for (int i = 0; i < x->ndim - 1; i++)
        m *= x->shape[i];
    int64_t yshape[PT_MAX_DIMS];
    memcpy(yshape, x->shape, (size_t)x->ndim * sizeof(int64_t));
    yshape[x->ndim - 1] = n;
    pt_tensor *y = pti_tensor_new(x->ndim, yshape, PT_FLOAT32, x->storage->device);
    if (!y || y->numel == 0)
        return y;
    pt_tensor *xc = pt_contiguous(x);
    pt_tensor *bc = bias ? pt_contiguous(bias) : NULL;
    pt_tensor *x2 =
        xc ? pti_tensor_view(xc, 2, (const int64_t[]){m, k}, (const int64_t[]){k, 1}, xc->offset)
           : NULL;
    pt_tensor *y2 = pti_tensor_view(y, 2, (const int64_t[]){m, n}, (const int64_t[]){n, 1}, 0);
    pt_status st = PT_ERR_OOM;
    if (x2 && y2 && (!bias || bc)) {
        pti_call c = {.n_in = bias ? 3 : 2, .n_out = 1, .in = {x2, w, bc}, .out = {y2}};
        st = pti_dispatch(PTI_OP_quant_linear, &c);
    } else {
        st = pt_last_status();
    }
    pt_release(y2);
    pt_release(x2);
    pt_release(bc);
    pt_release(xc);
    if (st != PT_OK) {
        pt_release(y);
        return NULL;
    }
    return y;
}

/* ---- float weights -----------------------------------------------------------------------------
 */

static bool check_float_linear(const char *op, const pt_tensor *x, const pt_tensor *w,
                               const pt_tensor *bias)
{
    if (w->ndim != 1 && w->ndim != 2) {
        pti_error(PT_ERR_SHAPE, "%s: weight must be 1-D or 2-D, but got shape %s", op,
                  pti_shape_str(w->ndim, w->shape));
        return false;
    }
    int64_t k = w->shape[w->ndim - 1];
    if (x->ndim == 0 || x->shape[x->ndim - 1] != k) {
        pti_error(PT_ERR_SHAPE, "%s: input %s and weight %s cannot be multiplied (%lld != %lld)",
                  op, pti_shape_str(x->ndim, x->shape), pti_shape_str(w->ndim, w->shape),
                  (long long)(x->ndim ? x->shape[x->ndim - 1] : 0), (long long)k);
        return false;
    }
    if (x->dtype != w->dtype || (bias && bias->dtype != x->dtype)) {
        pti_error(PT_ERR_DTYPE,
                  "%s: input, weight and bias must have the same dtype, but got %s, %s and %s", op,
                  pt_dtype_name(x->dtype), pt_dtype_name(w->dtype),
                  bias ? pt_dtype_name(bias->dtype) : "none");
        return false;
    }
    return true;
}

/* A contiguous [*, K] input with a bias as one addmm on its [rows, K] flattening (PyTorch's
 * _flatten_nd_linear): the product and the bias add round to float16/bfloat16 once. */
static pt_tensor *flat_addmm(const pt_tensor *x, const pt_tensor *wt, const pt_tensor *bias)
{
    int64_t k = x->shape[x->ndim - 1], rows = 1;
    for (int d = 0; d < x->ndim - 1; d++)
        rows *= x->shape[d];
    pt_tensor *x2 = pt_reshape(x, PT_SHAPE(rows, k));
    pt_tensor *y2 = x2 ? pt_addmm(bias, x2, wt) : NULL;
    pt_release(x2);
    if (!y2)
        return NULL;
    int64_t shape[PT_MAX_DIMS];
    for (int d = 0; d < x->ndim - 1; d++)
        shape[d] = x->shape[d];
    shape[x->ndim - 1] = wt->shape[1];
    pt_tensor *y = pt_reshape(y2, x->ndim, shape);
    pt_release(y2);
    return y;
}

/* PyTorch's own split: addmm for a 2-D input with bias (and, flattened, for a contiguous
 * input of more dims with a 1-D bias), else matmul then add. */
static pt_tensor *float_linear(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias)
{
    pt_tensor *wt = pt_t(w);
    if (!wt)
        return NULL;
    pt_tensor *y;
    if (bias && x->ndim == 2 && w->ndim == 2) {
        y = pt_addmm(bias, x, wt);
    } else if (bias && x->ndim > 2 && w->ndim == 2 && bias->ndim == 1 && pt_is_contiguous(x)) {
        y = flat_addmm(x, wt, bias);
    } else {
        y = pt_matmul(x, wt);
        if (y && bias) {
            pt_tensor *r = pt_add(y, bias);
            pt_release(y);
            y = r;
        }
    }
    pt_release(wt);
    return y;
}

pt_tensor *pt_linear(const pt_tensor *x, const pt_tensor *w, const pt_tensor *bias)
{
    const char *op = "pt_linear";
    if (!PTI_CHECK_ARG(x, op, "input") || !PTI_CHECK_ARG(w, op, "weight"))
        return NULL;
    const pt_tensor *ts[3] = {x, w, bias};
    if (!pti_check_same_device(op, 3, ts))
        return NULL;
    if (pti_dtypes[x->dtype].is_block || (bias && pti_dtypes[bias->dtype].is_block))
        return pti_error_null(PT_ERR_DTYPE,
                              "%s: only the weight may have a block dtype (input %s, bias %s)", op,
                              pt_dtype_name(x->dtype), bias ? pt_dtype_name(bias->dtype) : "none");
    if (is_weight_only(x, w)) {
        /* a strided float16/bfloat16 weight is copied; block weights never are */
        bool block = pti_dtypes[w->dtype].is_block;
        pt_tensor *wc = block ? NULL : pt_contiguous(w);
        const pt_tensor *wu = block ? w : wc;
        pt_tensor *y =
            wu && check_weight_only(op, x, wu, bias) ? run_weight_only(x, wu, bias) : NULL;
        pt_release(wc);
        return y;
    }
    if (!check_float_linear(op, x, w, bias))
        return NULL;
    return float_linear(x, w, bias);
}

/* pt_matmul(a, b) with b of a block dtype (called by pt_matmul): b [K, N] must be the
 * transpose of a contiguous [N, K] weight, i.e. pt_t(w), and the product is pt_linear(a, w).
 * A block matrix used untransposed would contract across its blocks, which no kernel does. */
pt_tensor *pti_matmul_block_weight(const pt_tensor *a, const pt_tensor *b)
{
    const char *op = "pt_matmul";
    const pt_tensor *ts[2] = {a, b};
    if (!pti_check_same_device(op, 2, ts))
        return NULL;
    if (pti_dtypes[a->dtype].is_block)
        return pti_error_null(PT_ERR_DTYPE,
                              "%s: only the second argument may have a block "
                              "dtype (got %s and %s)",
                              op, pt_dtype_name(a->dtype), pt_dtype_name(b->dtype));
    if (b->ndim != 2)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: a %s second argument must be 2-D (the transpose of a [N, K] "
                              "weight), but got shape %s",
                              op, pt_dtype_name(b->dtype), pti_shape_str(b->ndim, b->shape));
    /* the [N, K] weight b is the transpose of */
    int64_t wshape[2] = {b->shape[1], b->shape[0]}, wstride[2] = {b->stride[1], b->stride[0]};
    pt_tensor *w = pti_tensor_view(b, 2, wshape, wstride, b->offset);
    if (!w)
        return NULL;
    pt_tensor *y = NULL;
    if (w->numel > 0 && !pti_is_contiguous(w)) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "%s: a %s second argument must be the transpose of a contiguous [N, K] "
                  "weight (pt_t(w); or call pt_linear(x, w)), but has shape %s and strides %s",
                  op, pt_dtype_name(b->dtype), pti_shape_str(2, b->shape),
                  pti_shape_str(2, b->stride));
    } else if (a->ndim == 0) {
        pti_error(PT_ERR_SHAPE,
                  "%s: both arguments need at least 1 dimension, but got shapes "
                  "%s and %s",
                  op, pti_shape_str(a->ndim, a->shape), pti_shape_str(2, b->shape));
    } else if (a->shape[a->ndim - 1] != b->shape[0]) {
        pti_error(PT_ERR_SHAPE, "%s: shapes %s and %s cannot be multiplied (%lld != %lld)", op,
                  pti_shape_str(a->ndim, a->shape), pti_shape_str(2, b->shape),
                  (long long)a->shape[a->ndim - 1], (long long)b->shape[0]);
    } else if (check_weight_only(op, a, w, NULL)) {
        y = run_weight_only(a, w, NULL);
    }
    pt_release(w);
    return y;
}
