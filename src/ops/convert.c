/* The differentiable conversions: pt_copy_ / pt_fill_ / pt_zero_, contiguous, clone, dtype
 * conversion and device transfer, each recording its autograd node. The data movement under
 * them (no autograd) is core's (src/core/copy.c), and so is reading values back to the host. */
#include <math.h>
#include <string.h>

#include "../core/internal.h"
#include "../graph/node.h"
#include "common.h"

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
        return pti_copy_same_device(dst, src, "pt_copy_");
    pt_tensor *moved = pt_to(src, dst->storage->device);
    if (!moved)
        return pt_last_status();
    pt_status st = pti_copy_same_device(dst, moved, "pt_copy_");
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

pt_status pt_fill_(pt_tensor *t, double v)
{
    if (!PTI_CHECK_ARG(t, "pt_fill_", "t"))
        return pt_last_status();
    const pt_tensor *ins[1] = {t};
    if (!pti_grad_recording(1, ins))
        return pti_fill_data("pt_fill_", t, v);
    /* In place under autograd: a leaf that requires grad is refused; a non-leaf is rebased onto
     * a fill node, so its old history gets a zero gradient (docs/autograd.md). */
    pt_status st = pti_inplace_check("pt_fill_", t);
    if (st != PT_OK)
        return st;
    pti_node *n = pti_node_new("fill_", fill_backward, 1, ins);
    if (!n)
        return pt_last_status();
    pt_set_grad_enabled(false);
    st = pti_fill_data("pt_fill_", t, v);
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
    if (r && pti_copy_same_device(r, t, "pt_clone") != PT_OK) {
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
    if (r && pti_copy_same_device(r, t, "pt_to_dtype") != PT_OK) {
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
    return pti_to_device(t, dev);
}
