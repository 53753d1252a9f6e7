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

/* ---- fill_ through a view: PyTorch's CopySlices ------------------------------------------------
 */

/* Where the view lies in its (contiguous) base: shapes, the view's strides and its offset from
 * the base's first element. Owned by the CopySlices node (ctx). */
typedef struct view_geometry {
    int base_ndim, ndim;
    int64_t base_shape[PT_MAX_DIMS];
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS], offset;
} view_geometry;

/* CopySlices(fill_): the base's old history gets the gradient with the filled positions
 * zeroed (g * mask, so it stays differentiable under create_graph). */
static pt_status copy_slices_fill_backward(pti_node *n, pt_tensor *const *grad_out,
                                           pt_tensor **grad_in)
{
    if (!pti_node_needs_grad(n, 0))
        return PT_OK;
    const view_geometry *vg = n->ctx;
    pt_tensor *g = grad_out[0];
    pt_tensor *mask = pt_ones(vg->base_ndim, vg->base_shape, g->dtype, pt_device_of(g));
    pt_tensor *region =
        mask ? pti_tensor_view(mask, vg->ndim, vg->shape, vg->stride, vg->offset) : NULL;
    pt_status st = region ? pti_fill_data("fill_", region, 0.0) : pt_last_status();
    pt_release(region);
    grad_in[0] = st == PT_OK ? pt_mul(g, mask) : NULL;
    pt_release(mask);
    return grad_in[0] ? PT_OK : pt_last_status();
}

/* The filled view's own new history: its values are constants now, so the base (through
 * which it reaches the old history) gets zeros of the base's shape (n->i, ndim in n->d[0]). */
static pt_status filled_view_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    if (!pti_node_needs_grad(n, 0))
        return PT_OK;
    grad_in[0] = pt_zeros((int)n->d[0], n->i, grad_out[0]->dtype, pt_device_of(grad_out[0]));
    return grad_in[0] ? PT_OK : pt_last_status();
}

/* pt_fill_ of a view t while recording: fills, then gives t's base a CopySlices node over its
 * old history and t a node over the base's new one (PyTorch: y = 2*x; y[0:2].fill_(5);
 * y.sum().backward() leaves x.grad 0 at 0..1 and 2 elsewhere). */
static pt_status fill_view_recorded(pt_tensor *t, double v)
{
    pt_tensor *base = t->view_base;
    if (!t->grad_fn || !base->requires_grad) /* a leaf view, or one not recorded from base */
        return pti_inplace_check("pt_fill_", t);
    if (base->requires_grad && !base->grad_fn)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_fill_: a view of a leaf tensor that requires grad (%s, a view of %s) "
                         "is being used in an in-place operation",
                         pti_tensor_desc(t), pti_tensor_desc(base));
    if (!pti_is_contiguous(base))
        return pti_error(PT_ERR_UNSUPPORTED,
                         "pt_fill_: in-place fill of a view (%s) of a non-contiguous base (%s) "
                         "while autograd records is not supported; clone the base first",
                         pti_tensor_desc(t), pti_tensor_desc(base));
    view_geometry *vg = pti_scratch_alloc(sizeof *vg);
    if (!vg)
        return pti_error(PT_ERR_OOM, "pt_fill_: out of memory recording the fill of a view");
    vg->base_ndim = base->ndim;
    memcpy(vg->base_shape, base->shape, sizeof(int64_t) * (size_t)base->ndim);
    vg->ndim = t->ndim;
    memcpy(vg->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(vg->stride, t->stride, sizeof(int64_t) * (size_t)t->ndim);
    vg->offset = t->offset - base->offset;
    const pt_tensor *bin[1] = {base};
    pti_node *cs = pti_node_new("CopySlices", copy_slices_fill_backward, 1, bin);
    if (!cs) {
        pti_scratch_free(vg);
        return pt_last_status();
    }
    cs->ctx = vg;
    cs->ctx_free = pti_scratch_free;
    pt_set_grad_enabled(false);
    pt_status st = pti_fill_data("pt_fill_", t, v);
    pt_set_grad_enabled(true);
    if (st != PT_OK) {
        pti_node_release(cs);
        return st;
    }
    if ((st = pti_node_finish(cs, 1, &base)) != PT_OK) /* base takes the new history */
        return st;
    pti_node *fv = pti_node_new("fill_", filled_view_backward, 1, bin);
    if (!fv)
        return pt_last_status();
    fv->d[0] = base->ndim;
    memcpy(fv->i, base->shape, sizeof(int64_t) * (size_t)base->ndim);
    return pti_node_finish(fv, 1, &t);
}

pt_status pt_fill_(pt_tensor *t, double v)
{
    if (!PTI_CHECK_ARG(t, "pt_fill_", "t"))
        return pt_last_status();
    const pt_tensor *ins[1] = {t};
    if (!pti_grad_recording(1, ins))
        return pti_fill_data("pt_fill_", t, v);
    if (t->is_view && t->view_base)
        return fill_view_recorded(t, v);
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
