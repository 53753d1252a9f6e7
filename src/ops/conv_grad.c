/* Autograd for the conv family: recording and backward formulas of conv1d/conv2d, their input
 * and weight gradients (so double backward works), conv_transpose2d, the poolings, pad and
 * interpolate. Formulas use public ops only. The front-ends (conv.c, conv_pool.c) run their
 * kernels under no-grad when recording and hand the result to the pti_conv_record_* calls. */
#include <stdlib.h>
#include <string.h>

#include "../graph/node.h"
#include "conv.h"

/* ---- helpers --------------------------------------------------------------------------------- */

/* Releases the node (when not yet finished) and the output; returns NULL. */
static pt_tensor *rec_fail(pti_node *n, pt_tensor *out)
{
    pti_node_release(n);
    pt_release(out);
    return NULL;
}

/* Sums g over every dim but the channel dim (1, or 0 for an unbatched tensor). */
static pt_tensor *sum_but_channel(const pt_tensor *g, bool batched)
{
    int64_t dims[PT_MAX_DIMS];
    int nd = 0, cdim = batched ? 1 : 0;
    for (int d = 0; d < g->ndim; d++)
        if (d != cdim)
            dims[nd++] = d;
    return pt_sum_dim(g, nd, dims, false);
}

/* Convolution options live in node->i[0..8]. */
static void put_opts(pti_node *n, const pt_conv_opts *o, int nsp)
{
    for (int k = 0; k < 2; k++) {
        n->i[k] = o->stride[k];
        n->i[2 + k] = o->padding[k];
        n->i[4 + k] = o->dilation[k];
    }
    n->i[6] = o->groups;
    n->i[7] = o->padding_mode;
    n->i[8] = nsp;
}

static pt_conv_opts get_opts(const pti_node *n)
{
    pt_conv_opts o = {.groups = n->i[6], .padding_mode = (pt_conv_padding_mode)n->i[7]};
    for (int k = 0; k < 2; k++) {
        o.stride[k] = n->i[k];
        o.padding[k] = n->i[2 + k];
        o.dilation[k] = n->i[4 + k];
    }
    return o;
}

static pt_tensor *conv_fwd(int nsp, const pt_tensor *x, const pt_tensor *w, const pt_conv_opts *o)
{
    return nsp == 1 ? pt_conv1d_ex(x, w, NULL, o) : pt_conv2d_ex(x, w, NULL, o);
}

static pt_tensor *conv_ig(int nsp, int ndim, const int64_t *shape, const pt_tensor *w,
                          const pt_tensor *g, const pt_conv_opts *o)
{
    return nsp == 1 ? pt_conv1d_input_grad(ndim, shape, w, g, o)
                    : pt_conv2d_input_grad(ndim, shape, w, g, o);
}

static pt_tensor *conv_wg(int nsp, const pt_tensor *x, int ndim, const int64_t *shape,
                          const pt_tensor *g, const pt_conv_opts *o)
{
    return nsp == 1 ? pt_conv1d_weight_grad(x, ndim, shape, g, o, NULL)
                    : pt_conv2d_weight_grad(x, ndim, shape, g, o, NULL);
}

static pt_status finish_grads(pt_tensor **grad_in, int n)
{
    pt_status st = PT_OK;
    for (int i = 0; i < n; i++)
        if (grad_in[i] == (pt_tensor *)&grad_in[i]) /* marker: needed but failed */
            st = PT_ERR_RUNTIME;
    if (st != PT_OK)
        for (int i = 0; i < n; i++) {
            if (grad_in[i] != (pt_tensor *)&grad_in[i])
                pt_release(grad_in[i]);
            grad_in[i] = NULL;
        }
    return st == PT_OK ? PT_OK : pt_last_status();
}

/* Stores r into *slot, or a failure marker when r is NULL (see finish_grads). */
static void set_grad(pt_tensor **slot, pt_tensor *r)
{
    *slot = r ? r : (pt_tensor *)slot;
}

/* ---- conv1d / conv2d ---------------------------------------------------------------------------
 */

static pt_status conv_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_conv_opts o = get_opts(n);
    int nsp = (int)n->i[8];
    const pt_tensor *g = grad_out[0];
    pt_tensor *x = pti_node_saved(n, 0), *w = pti_node_saved(n, 1);
    if (!x || !w) {
        pt_release(x);
        pt_release(w);
        return pt_last_status();
    }
    if (pti_node_needs_grad(n, 0))
        set_grad(&grad_in[0], conv_ig(nsp, x->ndim, x->shape, w, g, &o));
    if (pti_node_needs_grad(n, 1))
        set_grad(&grad_in[1], conv_wg(nsp, x, w->ndim, w->shape, g, &o));
    if (pti_node_needs_grad(n, 2))
        set_grad(&grad_in[2], sum_but_channel(g, x->ndim == nsp + 2));
    pt_release(x);
    pt_release(w);
    return finish_grads(grad_in, 3);
}

/* Records a convolution-family node on out: inputs ins (n of them), the conv options, and
 * the two tensors its formula needs saved. Returns out, or NULL (out released) on failure. */
static pt_tensor *record_conv_node(pt_tensor *out, const char *name, pti_backward_fn fn, int n_in,
                                   const pt_tensor *const *ins, const pt_conv_opts *o, int nsp,
                                   const pt_tensor *save0, const pt_tensor *save1)
{
    if (!out)
        return NULL;
    pti_node *n = pti_node_new(name, fn, n_in, ins);
    if (!n)
        return rec_fail(NULL, out);
    put_opts(n, o, nsp);
    if (pti_node_save(n, save0) < 0 || pti_node_save(n, save1) < 0)
        return rec_fail(n, out);
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}

pt_tensor *pti_conv_record(pt_tensor *out, int nsp, const pt_tensor *x, const pt_tensor *w,
                           const pt_tensor *bias, const pt_conv_opts *o)
{
    const pt_tensor *ins[3] = {x, w, bias};
    return record_conv_node(out, nsp == 1 ? "conv1d" : "conv2d", conv_backward, 3, ins, o, nsp, x,
                            w);
}

/* input_grad(shape, w, g) is linear in w and g: d/dg = conv(u, w), d/dw = weight_grad(u, g). */
static pt_status input_grad_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_conv_opts o = get_opts(n);
    int nsp = (int)n->i[8];
    const pt_tensor *u = grad_out[0];
    pt_tensor *w = pti_node_saved(n, 0), *g = pti_node_saved(n, 1);
    if (!w || !g) {
        pt_release(w);
        pt_release(g);
        return pt_last_status();
    }
    if (pti_node_needs_grad(n, 0))
        set_grad(&grad_in[0], conv_wg(nsp, u, w->ndim, w->shape, g, &o));
    if (pti_node_needs_grad(n, 1))
        set_grad(&grad_in[1], conv_fwd(nsp, u, w, &o));
    pt_release(w);
    pt_release(g);
    return finish_grads(grad_in, 2);
}

pt_tensor *pti_conv_record_input_grad(pt_tensor *out, int nsp, const pt_tensor *w,
                                      const pt_tensor *g, const pt_conv_opts *o)
{
    const pt_tensor *ins[2] = {w, g};
    return record_conv_node(out, nsp == 1 ? "conv1d_input_grad" : "conv2d_input_grad",
                            input_grad_backward, 2, ins, o, nsp, w, g);
}

/* weight_grad(x, shape, g): d/dx = input_grad(x.shape, u, g), d/dg = conv(x, u). */
static pt_status weight_grad_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_conv_opts o = get_opts(n);
    int nsp = (int)n->i[8];
    const pt_tensor *u = grad_out[0];
    pt_tensor *x = pti_node_saved(n, 0), *g = pti_node_saved(n, 1);
    if (!x || !g) {
        pt_release(x);
        pt_release(g);
        return pt_last_status();
    }
    if (pti_node_needs_grad(n, 0))
        set_grad(&grad_in[0], conv_ig(nsp, x->ndim, x->shape, u, g, &o));
    if (pti_node_needs_grad(n, 1))
        set_grad(&grad_in[1], conv_fwd(nsp, x, u, &o));
    pt_release(x);
    pt_release(g);
    return finish_grads(grad_in, 2);
}

pt_tensor *pti_conv_record_weight_grad(pt_tensor *out, int nsp, const pt_tensor *x,
                                       const pt_tensor *g, const pt_conv_opts *o)
{
    const pt_tensor *ins[2] = {x, g};
    return record_conv_node(out, nsp == 1 ? "conv1d_weight_grad" : "conv2d_weight_grad",
                            weight_grad_backward, 2, ins, o, nsp, x, g);
}

/* ---- conv_transpose2d -------------------------------------------------------------------------
 */

/* t zero-extended (or cropped, for negative values) at the bottom/right of its last two dims. */
static pt_tensor *extend_hw(const pt_tensor *t, int64_t dh, int64_t dw)
{
    if (dh == 0 && dw == 0)
        return pt_retain((pt_tensor *)t);
    int64_t pad[4] = {0, dw, 0, dh};
    return pt_pad(t, 4, pad, PT_PAD_CONSTANT, 0.0);
}

/* y = conv_transpose(x, w): d/dx = conv2d(g, w) cropped to x, d/dw = weight_grad(g, w, x'). */
static pt_status conv_transpose_backward(pti_node *n, pt_tensor *const *grad_out,
                                         pt_tensor **grad_in)
{
    pt_conv_opts o = get_opts(n);
    const pt_tensor *g = grad_out[0];
    pt_tensor *x = pti_node_saved(n, 0), *w = pti_node_saved(n, 1);
    if (!x || !w) {
        pt_release(x);
        pt_release(w);
        return pt_last_status();
    }
    bool batched = x->ndim == 4;
    int hd = batched ? 2 : 1;
    /* the size conv2d(g, w) gives: H + floor(output_padding / stride) */
    int64_t ext[2];
    for (int k = 0; k < 2; k++) {
        int64_t go = g->shape[hd + k], kk = w->shape[2 + k];
        ext[k] = (go + 2 * o.padding[k] - o.dilation[k] * (kk - 1) - 1) / o.stride[k] + 1 -
                 x->shape[hd + k];
    }
    if (pti_node_needs_grad(n, 0)) {
        pt_tensor *c = pt_conv2d_ex(g, w, NULL, &o);
        set_grad(&grad_in[0], c ? extend_hw(c, -ext[0], -ext[1]) : NULL);
        pt_release(c);
    }
    if (pti_node_needs_grad(n, 1)) {
        pt_tensor *xe = extend_hw(x, ext[0], ext[1]);
        set_grad(&grad_in[1],
                 xe ? pt_conv2d_weight_grad(g, w->ndim, w->shape, xe, &o, NULL) : NULL);
        pt_release(xe);
    }
    if (pti_node_needs_grad(n, 2))
        set_grad(&grad_in[2], sum_but_channel(g, batched));
    pt_release(x);
    pt_release(w);
    return finish_grads(grad_in, 3);
}

pt_tensor *pti_conv_record_transpose(pt_tensor *out, const pt_tensor *x, const pt_tensor *w,
                                     const pt_tensor *bias, const pt_conv_opts *o)
{
    if (!out)
        return NULL;
    const pt_tensor *ins[3] = {x, w, bias};
    pti_node *n = pti_node_new("conv_transpose2d", conv_transpose_backward, 3, ins);
    if (!n)
        return rec_fail(NULL, out);
    put_opts(n, o, 2);
    if (pti_node_save(n, x) < 0 || pti_node_save(n, w) < 0)
        return rec_fail(n, out);
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}

/* ---- pooling ------------------------------------------------------------------------------------
 */

static pt_status max_pool_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *x = pti_node_saved(n, 0), *idx = pti_node_saved(n, 1);
    if (x && idx)
        set_grad(&grad_in[0], pt_max_pool2d_backward(grad_out[0], x, idx));
    else
        grad_in[0] = (pt_tensor *)&grad_in[0];
    pt_release(x);
    pt_release(idx);
    return finish_grads(grad_in, 1);
}

pt_tensor *pti_conv_record_max_pool(pt_tensor *out, const pt_tensor *x, const pt_tensor *indices)
{
    if (!out)
        return NULL;
    pti_node *n = pti_node_new("max_pool2d", max_pool_backward, 1, &x);
    if (!n)
        return rec_fail(NULL, out);
    if (pti_node_save(n, x) < 0 || pti_node_save(n, indices) < 0)
        return rec_fail(n, out);
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}

typedef struct avg_ctx {
    int64_t kernel[2];
    pt_avg_pool2d_opts opts;
} avg_ctx;

static pt_status avg_pool_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *x = pti_node_saved(n, 0);
    if (x) {
        if (n->ctx) {
            const avg_ctx *c = n->ctx;
            set_grad(&grad_in[0], pt_avg_pool2d_backward(grad_out[0], x, c->kernel, &c->opts));
        } else {
            set_grad(&grad_in[0], pt_adaptive_avg_pool2d_backward(grad_out[0], x));
        }
    } else {
        grad_in[0] = (pt_tensor *)&grad_in[0];
    }
    pt_release(x);
    return finish_grads(grad_in, 1);
}

/* kernel NULL = adaptive average pooling. */
pt_tensor *pti_conv_record_avg_pool(pt_tensor *out, const pt_tensor *x, const int64_t *kernel,
                                    const pt_avg_pool2d_opts *opts)
{
    if (!out)
        return NULL;
    pti_node *n =
        pti_node_new(kernel ? "avg_pool2d" : "adaptive_avg_pool2d", avg_pool_backward, 1, &x);
    if (!n)
        return rec_fail(NULL, out);
    if (kernel) {
        avg_ctx *c = pti_scratch_alloc(sizeof *c);
        if (!c)
            return rec_fail(n, out);
        c->kernel[0] = kernel[0];
        c->kernel[1] = kernel[1];
        if (opts)
            c->opts = *opts;
        n->ctx = c;
        n->ctx_free = pti_scratch_free;
    }
    if (pti_node_save(n, x) < 0)
        return rec_fail(n, out);
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}

/* ---- pad and interpolate ------------------------------------------------------------------------
 */

/* pad: i[0] = mode, i[1] = n_pad, i[2..] = pad; the input shape goes in ctx. */
typedef struct shape_ctx {
    int ndim;
    int64_t shape[PT_MAX_DIMS];
    pt_interpolate_opts interp;
} shape_ctx;

static shape_ctx *new_shape_ctx(pti_node *n, const pt_tensor *x)
{
    shape_ctx *c = pti_scratch_alloc(sizeof *c);
    if (!c)
        return NULL;
    c->ndim = x->ndim;
    memcpy(c->shape, x->shape, (size_t)x->ndim * sizeof(int64_t));
    n->ctx = c;
    n->ctx_free = pti_scratch_free;
    return c;
}

static pt_status pad_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    const shape_ctx *c = n->ctx;
    pt_pad_mode mode = (pt_pad_mode)n->i[0];
    int n_pad = (int)n->i[1];
    int64_t neg[2 * PT_MAX_DIMS];
    if (mode == PT_PAD_CONSTANT) {
        /* the adjoint of constant padding is the opposite padding (crop), itself differentiable */
        for (int k = 0; k < n_pad; k++)
            neg[k] = -n->i[2 + k];
        set_grad(&grad_in[0], pt_pad(grad_out[0], n_pad, neg, PT_PAD_CONSTANT, 0.0));
    } else {
        set_grad(&grad_in[0],
                 pt_pad_backward(grad_out[0], c->ndim, c->shape, n_pad, n->i + 2, mode));
    }
    return finish_grads(grad_in, 1);
}

pt_tensor *pti_conv_record_pad(pt_tensor *out, const pt_tensor *x, int n_pad, const int64_t *pad,
                               pt_pad_mode mode)
{
    if (!out)
        return NULL;
    pti_node *n = pti_node_new("pad", pad_backward, 1, &x);
    if (!n || !new_shape_ctx(n, x))
        return rec_fail(n, out);
    n->i[0] = mode;
    n->i[1] = n_pad;
    memcpy(n->i + 2, pad, (size_t)n_pad * sizeof(int64_t));
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}

static pt_status interp_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    const shape_ctx *c = n->ctx;
    set_grad(&grad_in[0], pt_interpolate_backward(grad_out[0], c->ndim, c->shape, &c->interp));
    return finish_grads(grad_in, 1);
}

pt_tensor *pti_conv_record_interpolate(pt_tensor *out, const pt_tensor *x,
                                       const pt_interpolate_opts *opts)
{
    if (!out)
        return NULL;
    pti_node *n = pti_node_new("interpolate", interp_backward, 1, &x);
    shape_ctx *c = n ? new_shape_ctx(n, x) : NULL;
    if (!c)
        return rec_fail(n, out);
    c->interp = *opts;
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}

/* ---- the gradient ops themselves (double backward) ----------------------------------------------
 * input {grad_out}; saved {indices (max pooling)}; ctx: a copy of pti_conv_bw_ctx. */

/* u (x-shaped) read at the max positions: the adjoint of pt_max_pool2d_backward. */
static pt_tensor *gather_at_max(const pt_tensor *u, const pt_tensor *idx)
{
    pt_tensor *uf = pt_flatten(u, -2, -1), *idf = pt_flatten(idx, -2, -1);
    pt_tensor *r = uf && idf ? pt_gather(uf, -1, idf) : NULL;
    pt_tensor *out = r ? pt_reshape(r, idx->ndim, idx->shape) : NULL;
    pt_release(uf);
    pt_release(idf);
    pt_release(r);
    return out;
}

static pt_status backward_op_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    const pti_conv_bw_ctx *c = n->ctx;
    const pt_tensor *u = grad_out[0];
    pt_tensor *r = NULL;
    switch (c->kind) {
    case PTI_BW_MAX_POOL: {
        pt_tensor *idx = pti_node_saved(n, 0);
        r = idx ? gather_at_max(u, idx) : NULL;
        pt_release(idx);
        break;
    }
    case PTI_BW_AVG_POOL: r = pt_avg_pool2d_ex(u, c->kernel, &c->avg); break;
    case PTI_BW_ADAPTIVE_AVG_POOL: r = pt_adaptive_avg_pool2d(u, c->out_size); break;
    case PTI_BW_PAD: r = pt_pad(u, c->n_pad, c->pad, c->mode, 0.0); break;
    case PTI_BW_INTERPOLATE: r = pt_interpolate(u, &c->interp); break;
    }
    if (r && r->dtype != n->i[0]) {
        pt_tensor *cast = pt_to_dtype(r, (pt_dtype)n->i[0]);
        pt_release(r);
        r = cast;
    }
    set_grad(&grad_in[0], r);
    return finish_grads(grad_in, 1);
}

pt_tensor *pti_conv_record_backward_op(pt_tensor *out, const pt_tensor *grad_out,
                                       const pt_tensor *indices, const pti_conv_bw_ctx *c)
{
    static const char *const names[] = {"max_pool2d_backward", "avg_pool2d_backward",
                                        "adaptive_avg_pool2d_backward", "pad_backward",
                                        "interpolate_backward"};
    if (!out)
        return NULL;
    pti_node *n = pti_node_new(names[c->kind], backward_op_backward, 1, &grad_out);
    if (!n)
        return rec_fail(NULL, out);
    pti_conv_bw_ctx *copy = pti_scratch_alloc(sizeof *copy);
    if (!copy)
        return rec_fail(n, out);
    *copy = *c;
    n->ctx = copy;
    n->ctx_free = pti_scratch_free;
    n->i[0] = grad_out->dtype;
    if (indices && pti_node_save(n, indices) < 0)
        return rec_fail(n, out);
    return pti_node_finish(n, 1, &out) == PT_OK ? out : rec_fail(NULL, out);
}
