/* Front-ends of the quant family: pt_dequantize (a block tensor -- or any plain one -- as a new
 * float32 tensor) and the block-weight path of pt_embedding. The layout checks every block
 * reader shares are here: blocks are read whole, so a block tensor must be contiguous, start
 * on a block boundary and have a last dim that is a whole number of blocks. */
#include "common.h"
#include "index_util.h"
#include "quant.h"

/* Checks that block tensor t can be read as whole rows of blocks. */
static bool check_block_layout(const char *op, const char *arg, const pt_tensor *t)
{
    int64_t bs = pti_dtypes[t->dtype].block_size;
    if (t->ndim == 0) {
        pti_error(PT_ERR_SHAPE, "%s: block tensor '%s' (%s) must have at least 1 dim", op, arg,
                  pt_dtype_name(t->dtype));
        return false;
    }
    if (t->shape[t->ndim - 1] % bs != 0) {
        pti_error(PT_ERR_SHAPE,
                  "%s: the last dim of block tensor '%s' %s must be a multiple of the %s block "
                  "size %lld",
                  op, arg, pti_shape_str(t->ndim, t->shape), pt_dtype_name(t->dtype),
                  (long long)bs);
        return false;
    }
    if (!pti_is_contiguous(t) || t->offset % bs != 0) {
        pti_error(PT_ERR_SHAPE,
                  "%s: block tensor '%s' %s must be contiguous and start on a block boundary "
                  "(blocks are read whole)",
                  op, arg, pti_tensor_desc(t));
        return false;
    }
    return true;
}

pt_tensor *pt_dequantize(const pt_tensor *t)
{
    const char *op = "pt_dequantize";
    if (!PTI_CHECK_ARG(t, op, "t"))
        return NULL;
    pt_device dev = t->storage->device;
    if (!pti_dtypes[t->dtype].is_block) { /* plain dtype: a converted copy */
        pt_tensor *r = pti_tensor_new(t->ndim, t->shape, PT_FLOAT32, dev);
        if (r && pt_copy_(r, t) != PT_OK) {
            pt_release(r);
            return NULL;
        }
        return r;
    }
    if (!check_block_layout(op, "t", t))
        return NULL;
    pt_tensor *r = pti_tensor_new(t->ndim, t->shape, PT_FLOAT32, dev);
    if (!r)
        return NULL;
    pti_call c = {.n_in = 1, .n_out = 1, .in = {t}, .out = {r}};
    if (pti_dispatch(PTI_OP_dequantize, &c) != PT_OK) {
        pt_release(r);
        return NULL;
    }
    return r;
}

pt_tensor *pti_fwd_embedding_quant(const pt_tensor *weight, const pt_tensor *indices)
{
    const char *op = "pt_embedding";
    const pt_tensor *ts[2] = {weight, indices};
    if (!pti_check_same_device(op, 2, ts))
        return NULL;
    if (weight->ndim != 2)
        return pti_error_null(PT_ERR_SHAPE, "%s: weight must be 2-D [num_embeddings, dim], got %s",
                              op, pti_shape_str(weight->ndim, weight->shape));
    if (!check_block_layout(op, "weight", weight))
        return NULL;
    if (weight->requires_grad)
        return pti_error_null(PT_ERR_UNSUPPORTED,
                              "%s: no gradient flows to a block-dtype (%s) weight", op,
                              pt_dtype_name(weight->dtype));
    if (indices->ndim + 1 > PT_MAX_DIMS)
        return pti_error_null(PT_ERR_SHAPE, "%s: indices have too many dims (%d)", op,
                              indices->ndim);
    pt_tensor *idx = pti_index_as_i64(op, "indices", indices, true);
    if (!idx)
        return NULL;
    int64_t shape[PT_MAX_DIMS];
    for (int d = 0; d < indices->ndim; d++)
        shape[d] = indices->shape[d];
    shape[indices->ndim] = weight->shape[1];
    pt_tensor *out = pti_tensor_new(indices->ndim + 1, shape, PT_FLOAT32, weight->storage->device);
    int64_t s2[2] = {idx->numel, weight->shape[1]}, st2[2] = {weight->shape[1], 1};
    int64_t n1 = idx->numel, st1 = 1;
    pt_tensor *out2 = out ? pti_tensor_on_storage(out->storage, PT_FLOAT32, 2, s2, st2, 0) : NULL;
    pt_tensor *idx1 = pti_tensor_on_storage(idx->storage, idx->dtype, 1, &n1, &st1, idx->offset);
    pti_call c = {.n_in = 2, .n_out = 1, .in = {weight, idx1}, .out = {out2}};
    if (!out2 || !idx1 || pti_dispatch(PTI_OP_embedding_quant, &c) != PT_OK) {
        pt_release(out);
        out = NULL;
    }
    pt_release(out2);
    pt_release(idx1);
    pt_release(idx);
    return out;
}
