/* Moving and converting data: pt_copy_ / pt_fill_ (through the copy and fill kernels),
 * contiguous, clone, dtype conversion, device transfer, and reading values back to the host. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "../autograd/node.h"

/* ---- backward formulas of the conversions ---------------------------------------------------- */

/* clone: the gradient passes through unchanged. */
static pt_status clone_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    (void)n;
    grad_in[0] = pt_retain(grad_out[0]);
    return PT_OK;
}

/* to_dtype: the gradient is cast back to the input's dtype (n->i[0]). */
static pt_status to_dtype_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    grad_in[0] = pt_to_dtype(grad_out[0], (pt_dtype)n->i[0]);
    return grad_in[0] ? PT_OK : pt_last_status();
}

static pt_device node_device(const pti_node *n, int at)
{
    pt_device d = {(pt_device_type)n->i[at], (int)n->i[at + 1]};
    return d;
}

/* to(device): the gradient moves back to the input's device (n->i[0..1]). */
static pt_status to_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    grad_in[0] = pt_to(grad_out[0], node_device(n, 0));
    return grad_in[0] ? PT_OK : pt_last_status();
}

/* copy_(dst, src): dst's old value is overwritten (no gradient); src gets the gradient summed
 * over broadcast dims, cast to its dtype and moved to its device. n->i: dtype, device type,
 * device index, ndim, shape. */
static pt_status copy_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    if (!pti_node_needs_grad(n, 1))
        return PT_OK;
    pt_tensor *summed = pti_sum_to(grad_out[0], (int)n->i[3], &n->i[4]);
    pt_tensor *cast = summed ? pt_to_dtype(summed, (pt_dtype)n->i[0]) : NULL;
    pt_release(summed);
    grad_in[1] = cast ? pt_to(cast, node_device(n, 1)) : NULL;
    pt_release(cast);
    return grad_in[1] ? PT_OK : pt_last_status();
}

/* Records a one-input node for out = op(in); returns false (out released) on failure. */
static bool record_unary(const char *name, pti_backward_fn fn, pt_tensor *out, const pt_tensor *in,
                         int64_t i0, int64_t i1)
{
    pti_node *n = pti_node_new(name, fn, 1, &in);
    if (!n)
        return false;
    n->i[0] = i0;
    n->i[1] = i1;
    return pti_node_finish(n, 1, &out) == PT_OK;
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

static pt_status copy_same_device(pt_tensor *dst, const pt_tensor *src, const char *op)
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

static pt_status copy_data(pt_tensor *dst, const pt_tensor *src);

pt_status pt_copy_(pt_tensor *dst, const pt_tensor *src)
{
    if (!PTI_CHECK_ARG(dst, "pt_copy_", "dst") || !PTI_CHECK_ARG(src, "pt_copy_", "src"))
        return pt_last_status();
    const pt_tensor *ins[2] = {dst, src};
    if (!pti_grad_recording(2, ins))
        return copy_data(dst, src);
    pt_status st = pti_inplace_check("pt_copy_", dst);
    if (st != PT_OK)
        return st;
    pt_set_grad_enabled(false);
    st = copy_data(dst, src);
    pt_set_grad_enabled(true);
    if (st != PT_OK)
        return st;
    pti_node *n = pti_node_new("copy_", copy_backward, 2, ins);
    if (!n)
        return pt_last_status();
    n->i[0] = src->dtype;
    n->i[1] = src->storage->device.type;
    n->i[2] = src->storage->device.index;
    n->i[3] = src->ndim;
    for (int d = 0; d < src->ndim; d++)
        n->i[4 + d] = src->shape[d];
    return pti_node_finish(n, 1, &dst); /* dst takes the copy's history (rebase) */
}

static pt_status copy_data(pt_tensor *dst, const pt_tensor *src)
{
    pti_bump_version(dst);
    if (pt_device_equal(dst->storage->device, src->storage->device))
        return copy_same_device(dst, src, "pt_copy_");
    pt_tensor *moved = pt_to(src, dst->storage->device);
    if (!moved)
        return pt_last_status();
    pt_status st = copy_same_device(dst, moved, "pt_copy_");
    pt_release(moved);
    return st;
}

/* PyTorch's FillBackward: the old value of the filled tensor gets a zero gradient (not none:
 * y = 2*x; y.fill_(5); y.sum().backward() leaves x.grad all zeros). */
static pt_status fill_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    if (!pti_node_needs_grad(n, 0))
        return PT_OK;
    grad_in[0] = pt_zeros_like(grad_out[0]);
    return grad_in[0] ? PT_OK : pt_last_status();
}

static pt_status fill_data(pt_tensor *t, double v)
{
    pti_bump_version(t);
    if (t->numel == 0)
        return PT_OK;
    pti_call c = {.n_out = 1, .out = {t}, .scalar = {v}};
    return pti_dispatch(PTI_OP_fill, &c);
}

pt_status pt_fill_(pt_tensor *t, double v)
{
    if (!PTI_CHECK_ARG(t, "pt_fill_", "t"))
        return pt_last_status();
    if (pti_dtypes[t->dtype].is_block)
        return pti_error(PT_ERR_DTYPE, "pt_fill_: cannot fill a %s (block) tensor",
                         pt_dtype_name(t->dtype));
    const pt_tensor *ins[1] = {t};
    if (!pti_grad_recording(1, ins))
        return fill_data(t, v);
    /* In place under autograd: a leaf that requires grad is refused; a non-leaf is rebased onto
     * a fill node, so its old history gets a zero gradient (docs/autograd.md). */
    pt_status st = pti_inplace_check("pt_fill_", t);
    if (st != PT_OK)
        return st;
    pti_node *n = pti_node_new("fill_", fill_backward, 1, ins);
    if (!n)
        return pt_last_status();
    pt_set_grad_enabled(false);
    st = fill_data(t, v);
    pt_set_grad_enabled(true);
    if (st != PT_OK) {
        pti_node_release(n);
        return st;
    }
    return pti_node_finish(n, 1, &t);
}

pt_status pt_zero_(pt_tensor *t)
{
    return pt_fill_(t, 0.0);
}

pt_tensor *pt_clone(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_clone", "t"))
        return NULL;
    pt_tensor *r = pti_tensor_new(t->ndim, t->shape, t->dtype, t->storage->device);
    if (r && copy_same_device(r, t, "pt_clone") != PT_OK) {
        pt_release(r);
        return NULL;
    }
    if (r && pti_grad_recording(1, &t) && !record_unary("clone", clone_backward, r, t, 0, 0)) {
        pt_release(r);
        return NULL;
    }
    return r;
}

/* A new tensor sharing t's data; carries t's gradient through an identity node. */
static pt_tensor *alias_of(const pt_tensor *t)
{
    pt_tensor *r =
        pti_tensor_on_storage(t->storage, t->dtype, t->ndim, t->shape, t->stride, t->offset);
    if (r && pti_record_alias(r, t) != PT_OK) {
        pt_release(r);
        return NULL;
    }
    return r;
}

pt_tensor *pt_contiguous(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_contiguous", "t"))
        return NULL;
    if (pti_is_contiguous(t))
        return alias_of(t);
    return pt_clone(t);
}

pt_tensor *pt_to_dtype(const pt_tensor *t, pt_dtype dt)
{
    if (!PTI_CHECK_ARG(t, "pt_to_dtype", "t"))
        return NULL;
    if (!pti_dtype_valid(dt))
        return pti_error_null(PT_ERR_DTYPE, "pt_to_dtype: invalid dtype %d", (int)dt);
    if (t->dtype == dt)
        return alias_of(t);
    if (pti_dtypes[t->dtype].is_block && pti_dtypes[dt].is_floating) {
        /* reading a block tensor: dequantize (src/ops/quant.c), then round to dt */
        pt_tensor *f = pt_dequantize(t);
        if (!f || dt == PT_FLOAT32)
            return f;
        pt_tensor *r = pt_to_dtype(f, dt);
        pt_release(f);
        return r;
    }
    if (pti_dtypes[dt].is_block || pti_dtypes[t->dtype].is_block)
        return pti_error_null(PT_ERR_UNSUPPORTED,
                              "pt_to_dtype: conversion %s -> %s is not supported (block dtypes "
                              "are dequantized to floating dtypes only, and quantizing is not "
                              "supported)",
                              pt_dtype_name(t->dtype), pt_dtype_name(dt));
    pt_tensor *r = pti_tensor_new(t->ndim, t->shape, dt, t->storage->device);
    if (r && copy_same_device(r, t, "pt_to_dtype") != PT_OK) {
        pt_release(r);
        return NULL;
    }
    /* only float -> float is differentiable; an integer result never requires grad */
    if (r && pti_dtypes[dt].is_floating && pti_grad_recording(1, &t) &&
        !record_unary("to_dtype", to_dtype_backward, r, t, t->dtype, 0)) {
        pt_release(r);
        return NULL;
    }
    return r;
}

pt_tensor *pt_to(const pt_tensor *t, pt_device dev)
{
    if (!PTI_CHECK_ARG(t, "pt_to", "t"))
        return NULL;
    pt_device from = t->storage->device;
    if (pt_device_equal(from, dev))
        return alias_of(t);
    if (pti_grad_recording(1, &t)) {
        pt_set_grad_enabled(false);
        pt_tensor *r = pt_to(t, dev);
        pt_set_grad_enabled(true);
        if (r && !record_unary("to", to_backward, r, t, from.type, from.index)) {
            pt_release(r);
            return NULL;
        }
        return r;
    }
    pt_tensor *src = pt_contiguous(t);
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
        pt_tensor *host = pt_to(src, pt_cpu());
        pt_tensor *r2 = host ? pt_to(host, dev) : NULL;
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
    pt_tensor *c = pt_contiguous(t);
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
