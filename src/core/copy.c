/* Moving data without autograd: the fill and copy kernels, contiguous copies and device
 * transfer, and reading values back to the host. The differentiable front-ends over these
 * (pt_fill_, pt_copy_, pt_contiguous, pt_to, ...) are ops, in src/ops/convert.c. */
#include <math.h>
#include <string.h>

#include "internal.h"

pt_status pti_fill_data(const char *op, pt_tensor *t, double v)
{
    if (pti_dtypes[t->dtype].is_block)
        return pti_error(PT_ERR_DTYPE, "%s: cannot fill a %s (block) tensor", op,
                         pt_dtype_name(t->dtype));
    pti_bump_version(t);
    if (t->numel == 0)
        return PT_OK;
    pti_call c = {.n_out = 1, .out = {t}, .scalar = {v}};
    return pti_dispatch(PTI_OP_fill, &c);
}

/* A view of src expanded to dst's shape (stride 0 on broadcast dims), or NULL with an error. */
static pt_tensor *expand_to(const pt_tensor *src, const pt_tensor *dst, const char *op)
{
    int64_t stride[PT_MAX_DIMS];
    int lead = dst->ndim - src->ndim;
    if (lead < 0)
        goto mismatch;
    for (int i = 0; i < dst->ndim; i++) {
        int j = i - lead;
        if (j < 0) {
            stride[i] = 0;
        } else if (src->shape[j] == dst->shape[i]) {
            stride[i] = src->shape[j] == 1 ? 0 : src->stride[j];
        } else if (src->shape[j] == 1) {
            stride[i] = 0;
        } else {
            goto mismatch;
        }
    }
    return pti_tensor_on_storage(src->storage, src->dtype, dst->ndim, dst->shape, stride,
                                 src->offset);
mismatch:
    return pti_error_null(PT_ERR_SHAPE, "%s: source shape %s cannot be broadcast to %s", op,
                          pti_shape_str(src->ndim, src->shape),
                          pti_shape_str(dst->ndim, dst->shape));
}

pt_status pti_copy_same_device(pt_tensor *dst, const pt_tensor *src, const char *op)
{
    if (pti_dtypes[dst->dtype].is_block || pti_dtypes[src->dtype].is_block) {
        if (dst->dtype != src->dtype || !pti_is_contiguous(dst) || !pti_is_contiguous(src) ||
            dst->numel != src->numel)
            return pti_error(PT_ERR_DTYPE,
                             "%s: block dtype %s can only be copied whole and contiguous to the "
                             "same dtype (got %s -> %s)",
                             op, pt_dtype_name(src->dtype), pti_tensor_desc(src),
                             pti_tensor_desc(dst));
        size_t n = pti_dtype_nbytes(src->dtype, src->numel);
        char *d = (char *)dst->storage->data + pti_dtype_nbytes(dst->dtype, dst->offset);
        const char *s =
            (const char *)src->storage->data + pti_dtype_nbytes(src->dtype, src->offset);
        return pti_copy_d2d(dst->storage->device, d, s, n);
    }
    pt_tensor *expanded = expand_to(src, dst, op);
    if (!expanded)
        return pt_last_status();
    pti_call c = {.n_in = 1, .n_out = 1, .in = {expanded}, .out = {dst}};
    pt_status st = pti_dispatch(PTI_OP_copy, &c);
    pt_release(expanded);
    return st;
}

pt_tensor *pti_contiguous_data(const pt_tensor *t)
{
    if (pti_is_contiguous(t))
        return pti_tensor_on_storage(t->storage, t->dtype, t->ndim, t->shape, t->stride, t->offset);
    pt_tensor *r = pti_tensor_new(t->ndim, t->shape, t->dtype, t->storage->device);
    if (r && pti_copy_same_device(r, t, "pt_contiguous") != PT_OK) {
        pt_release(r);
        return NULL;
    }
    return r;
}

pt_tensor *pti_to_device(const pt_tensor *t, pt_device dev)
{
    pt_device from = t->storage->device;
    if (pt_device_equal(from, dev))
        return pti_tensor_on_storage(t->storage, t->dtype, t->ndim, t->shape, t->stride, t->offset);
    pt_tensor *src = pti_contiguous_data(t);
    if (!src)
        return NULL;
    pt_tensor *r = pti_tensor_new(t->ndim, t->shape, t->dtype, dev);
    if (!r) {
        pt_release(src);
        return NULL;
    }
    size_t n = pti_dtype_nbytes(t->dtype, t->numel);
    const char *sp = (const char *)src->storage->data + pti_dtype_nbytes(src->dtype, src->offset);
    pt_status st = PT_OK;
    if (n == 0) {
        st = PT_OK;
    } else if (from.type == PT_DEVICE_CPU) {
        st = pti_copy_h2d(dev, r->storage->data, sp, n);
    } else if (dev.type == PT_DEVICE_CPU) {
        st = pti_copy_d2h(from, r->storage->data, sp, n);
    } else { /* between two devices: through the host */
        pt_tensor *host = pti_to_device(src, pt_cpu());
        pt_tensor *r2 = host ? pti_to_device(host, dev) : NULL;
        pt_release(host);
        pt_release(src);
        pt_release(r);
        return r2;
    }
    pt_release(src);
    if (st != PT_OK) {
        pt_release(r);
        return NULL;
    }
    return r;
}

pt_status pt_copy_to_host(const pt_tensor *t, void *dst, size_t nbytes)
{
    if (!PTI_CHECK_ARG(t, "pt_copy_to_host", "t"))
        return pt_last_status();
    size_t need = pti_dtype_nbytes(t->dtype, t->numel);
    if (nbytes != need)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_copy_to_host: buffer of %zu bytes given for %s which needs %zu",
                         nbytes, pti_tensor_desc(t), need);
    if (need == 0)
        return PT_OK;
    if (!dst)
        return pti_error(PT_ERR_NULL, "pt_copy_to_host: destination is NULL");
    pt_tensor *c = pti_contiguous_data(t);
    if (!c)
        return pt_last_status();
    const char *sp = (const char *)c->storage->data + pti_dtype_nbytes(c->dtype, c->offset);
    pt_status st = PT_OK;
    if (pti_is_cpu(c))
        memcpy(dst, sp, need);
    else
        st = pti_copy_d2h(c->storage->device, dst, sp, need);
    pt_release(c);
    return st;
}

double pt_item(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_item", "t"))
        return NAN;
    if (t->numel != 1) {
        pti_error(PT_ERR_SHAPE,
                  "pt_item: a tensor with %lld elements cannot be converted to a number",
                  (long long)t->numel);
        return NAN;
    }
    if (pti_dtypes[t->dtype].is_block) {
        pti_error(PT_ERR_DTYPE, "pt_item: block dtype %s", pt_dtype_name(t->dtype));
        return NAN;
    }
    unsigned char buf[8];
    if (pt_copy_to_host(t, buf, pti_dtypes[t->dtype].size) != PT_OK)
        return NAN;
    return pti_load_f64(buf, t->dtype);
}
