/* Front-ends of the linalg family: mm, bmm, matmul, mv, dot, outer, addmm, baddbmm.
 *
 * Every product ends in one helper, run_product(), which hands the mm/bmm kernels 2-D or 3-D
 * operands in the layout their contract fixes (src/ops/linalg.def): each matrix row-major or
 * column-major (a transposed contiguous matrix, passed to BLAS as a transpose flag, not
 * copied), any batch stride. Operands in any other layout (a step slice, a broadcast with
 * stride 0 inside a matrix, batch dims that do not flatten to one stride) are made contiguous
 * first. float16/bfloat16 compute in float32 and are rounded back, as PyTorch does on CPU.
 *
 * Autograd: each front-end records a node (record()) whose backward formula (section
 * "backward formulas") is written with these same public products, so double backward works.
 * matmul's gradients are reduced back to the input shapes (broadcast batch dims summed, the
 * dims added for 1-D operands removed). */
#include <math.h>

#include "../graph/node.h"
#include "common.h"

/* ---- operand layout -------------------------------------------------------------------------- */

/* True when a rows x cols matrix with strides (sr, sc) is row-major or column-major in the
 * sense of the kernel contract; then rewrites the strides of size-1 dims (which address
 * nothing) so that the layout is visible from the strides alone. */
static bool matrix_layout_ok(int64_t rows, int64_t cols, int64_t *sr, int64_t *sc)
{
    int64_t maxc = cols > 1 ? cols : 1, maxr = rows > 1 ? rows : 1;
    if ((*sc == 1 || cols == 1) && (*sr >= maxc || rows == 1)) {
        if (rows == 1)
            *sr = maxc;
        *sc = 1;
        return true;
    }
    if ((*sr == 1 || rows == 1) && (*sc >= maxr || cols == 1)) {
        if (cols == 1)
            *sc = maxr;
        *sr = 1;
        return true;
    }
    return false;
}

/* The single stride that walks dims [0, nd) of a geometry in row-major order, if there is
 * one (size-1 dims are skipped; all-size-1 gives 0). */
static bool flat_stride(int nd, const int64_t *shape, const int64_t *stride, int64_t *out)
{
    int prev = -1; /* the previous (inner) non-1 dim */
    for (int i = nd - 1; i >= 0; i--) {
        if (shape[i] == 1)
            continue;
        if (prev >= 0 && stride[i] != stride[prev] * shape[prev])
            return false;
        if (prev < 0)
            *out = stride[i];
        prev = i;
    }
    if (prev < 0)
        *out = 0;
    return true;
}

/* A 3-D kernel operand [B, rows, cols] for the geometry (nd = batch dims + 2) over t's
 * storage: a view when the batch dims flatten and the matrix layout fits, else a contiguous
 * copy. New reference. */
static pt_tensor *kernel_operand(const pt_tensor *t, int nd, const int64_t *shape,
                                 const int64_t *stride, int64_t offset)
{
    int nb = nd - 2;
    int64_t B = pti_shape_numel(nb, shape), rows = shape[nb], cols = shape[nb + 1];
    int64_t sr = stride[nb], sc = stride[nb + 1], sb = 0;
    if (flat_stride(nb, shape, stride, &sb) && matrix_layout_ok(rows, cols, &sr, &sc))
        return pti_tensor_on_storage(t->storage, t->dtype, 3, (const int64_t[]){B, rows, cols},
                                     (const int64_t[]){sb, sr, sc}, offset);
    pt_tensor *geom = pti_tensor_on_storage(t->storage, t->dtype, nd, shape, stride, offset);
    if (!geom)
        return NULL;
    pt_tensor *c = pt_contiguous(geom);
    pt_release(geom);
    if (!c)
        return NULL;
    pt_tensor *r = pti_tensor_on_storage(c->storage, c->dtype, 3, (const int64_t[]){B, rows, cols},
                                         (const int64_t[]){rows * cols, cols, 1}, c->offset);
    pt_release(c);
    return r;
}

/* ---- checks ---------------------------------------------------------------------------------- */

static bool check_dtype(const char *op, const pt_tensor *t)
{
    if (pti_dtypes[t->dtype].is_block || t->dtype == PT_BOOL) {
        pti_error(PT_ERR_DTYPE,
                  "%s: dtype %s is not supported (expected a floating point or "
                  "integer tensor)",
                  op, pt_dtype_name(t->dtype));
        return false;
    }
    return true;
}

/* Both non-NULL, on one device, one supported dtype. */
static bool check_pair(const char *op, const pt_tensor *a, const char *an, const pt_tensor *b,
                       const char *bn)
{
    if (!PTI_CHECK_ARG(a, op, an) || !PTI_CHECK_ARG(b, op, bn))
        return false;
    const pt_tensor *ts[2] = {a, b};
    if (!pti_check_same_device(op, 2, ts) || !check_dtype(op, a) || !check_dtype(op, b))
        return false;
    if (a->dtype != b->dtype) {
        pti_error(PT_ERR_DTYPE,
                  "%s: expected '%s' and '%s' to have the same dtype, but got %s "
                  "and %s",
                  op, an, bn, pt_dtype_name(a->dtype), pt_dtype_name(b->dtype));
        return false;
    }
    return true;
}

static bool check_ndim(const char *op, const char *arg, const pt_tensor *t, int want)
{
    if (t->ndim != want) {
        pti_error(PT_ERR_SHAPE,
                  "%s: expected '%s' to be a %d-D tensor, but got a %d-D tensor "
                  "of shape %s",
                  op, arg, want, t->ndim, pti_shape_str(t->ndim, t->shape));
        return false;
    }
    return true;
}

static bool check_inner(const char *op, const pt_tensor *a, const pt_tensor *b, int64_t ka,
                        int64_t kb)
{
    if (ka != kb) {
        pti_error(PT_ERR_SHAPE, "%s: shapes %s and %s cannot be multiplied (%lld != %lld)", op,
                  pti_shape_str(a->ndim, a->shape), pti_shape_str(b->ndim, b->shape), (long long)ka,
                  (long long)kb);
        return false;
    }
    return true;
}

/* Integer products take whole beta/alpha that fit int64 (PyTorch requires integers). */
static bool check_alpha_beta(const char *op, pt_dtype dt, double alpha, double beta)
{
    if (pti_dtypes[dt].is_floating)
        return true;
    const double lim = 9.2e18;
    if (alpha != floor(alpha) || beta != floor(beta) || fabs(alpha) > lim || fabs(beta) > lim) {
        pti_error(PT_ERR_INVALID_ARG,
                  "%s: for integer tensors beta (%g) and alpha (%g) must be whole numbers", op,
                  beta, alpha);
        return false;
    }
    return true;
}

/* ---- the product ----------------------------------------------------------------------------- */

/* out3 = beta * out3 + alpha * a3 @ b3, all 3-D [B, M, K] / [B, K, N] / [B, M, N]; out3 is
 * contiguous (and holds beta's operand when beta != 0); a3, b3 already kernel operands. */
static pt_status dispatch_product(const pt_tensor *a3, const pt_tensor *b3, pt_tensor *out3,
                                  double alpha, double beta)
{
    if (out3->numel == 0)
        return PT_OK;
    pti_call c = {.n_in = 2, .n_out = 1, .scalar = {alpha, beta}};
    if (out3->shape[0] != 1) {
        c.in[0] = a3;
        c.in[1] = b3;
        c.out[0] = out3;
        return pti_dispatch(PTI_OP_bmm, &c);
    }
    /* one batch: the 2-D kernel on views of matrix 0 */
    pt_tensor *a2 =
        pti_tensor_on_storage(a3->storage, a3->dtype, 2, a3->shape + 1, a3->stride + 1, a3->offset);
    pt_tensor *b2 =
        pti_tensor_on_storage(b3->storage, b3->dtype, 2, b3->shape + 1, b3->stride + 1, b3->offset);
    pt_tensor *o2 = pti_tensor_on_storage(out3->storage, out3->dtype, 2, out3->shape + 1,
                                          out3->stride + 1, out3->offset);
    pt_status st = PT_ERR_OOM;
    if (a2 && b2 && o2) {
        c.in[0] = a2;
        c.in[1] = b2;
        c.out[0] = o2;
        st = pti_dispatch(PTI_OP_mm, &c);
    }
    pt_release(a2);
    pt_release(b2);
    pt_release(o2);
    return st;
}

/* The geometry of one product operand: batch dims then the matrix dims. */
typedef struct operand_geom {
    int nd;
    int64_t shape[PT_MAX_DIMS + 2];
    int64_t stride[PT_MAX_DIMS + 2];
} operand_geom;

/* out (contiguous, shape any with numel B*M*N) = beta * out + alpha * A @ B where A and B
 * are given as geometries over a's and b's storages. Handles the half-precision round trip. */
static pt_status run_product(const pt_tensor *a, const operand_geom *ga, const pt_tensor *b,
                             const operand_geom *gb, pt_tensor *out, double alpha, double beta)
{
    int nb = ga->nd - 2;
    int64_t B = pti_shape_numel(nb, ga->shape);
    int64_t M = ga->shape[nb], N = gb->shape[nb + 1];
    pt_tensor *a3 = kernel_operand(a, ga->nd, ga->shape, ga->stride, a->offset);
    pt_tensor *b3 = kernel_operand(b, gb->nd, gb->shape, gb->stride, b->offset);
    pt_tensor *o3 = pti_tensor_on_storage(out->storage, out->dtype, 3, (const int64_t[]){B, M, N},
                                          (const int64_t[]){M * N, N, 1}, out->offset);
    pt_status st = pt_last_status();
    if (!a3 || !b3 || !o3)
        goto done;
    if (out->dtype == PT_FLOAT16 || out->dtype == PT_BFLOAT16) {
        pt_tensor *af = pt_to_dtype(a3, PT_FLOAT32), *bf = pt_to_dtype(b3, PT_FLOAT32);
        pt_tensor *of = beta != 0 ? pt_to_dtype(o3, PT_FLOAT32)
                                  : pti_tensor_new(3, o3->shape, PT_FLOAT32, out->storage->device);
        pt_tensor *af3 = af ? kernel_operand(af, 3, af->shape, af->stride, af->offset) : NULL;
        pt_tensor *bf3 = bf ? kernel_operand(bf, 3, bf->shape, bf->stride, bf->offset) : NULL;
        st = pt_last_status();
        if (af3 && bf3 && of) {
            st = dispatch_product(af3, bf3, of, alpha, beta);
            if (st == PT_OK)
                st = pt_copy_(o3, of);
        }
        pt_release(af);
        pt_release(bf);
        pt_release(af3);
        pt_release(bf3);
        pt_release(of);
    } else {
        st = dispatch_product(a3, b3, o3, alpha, beta);
    }
done:
    pt_release(a3);
    pt_release(b3);
    pt_release(o3);
    return st;
}

/* A geometry for a 2-D matrix view of t with the given rows/cols strides (no batch dims). */
static operand_geom geom2(int64_t rows, int64_t cols, int64_t sr, int64_t sc)
{
    operand_geom g = {.nd = 2, .shape = {rows, cols}, .stride = {sr, sc}};
    return g;
}

static pt_tensor *finish(pt_tensor *out, pt_status st)
{
    if (st != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

/* ---- backward formulas ----------------------------------------------------------------------- */

/* r * alpha, releasing r (r itself when alpha == 1). */
static pt_tensor *scaled_owned(pt_tensor *r, double alpha)
{
    if (alpha == 1.0 || !r)
        return r;
    pt_tensor *s = pt_mul_scalar(r, alpha);
    pt_release(r);
    return s;
}

/* Stores g as grad_in[i]; the pending error when g is NULL. */
static pt_status put_grad(pt_tensor **grad_in, int i, pt_tensor *g)
{
    grad_in[i] = g;
    return g ? PT_OK : pt_last_status();
}

/* Where record() keeps which product operands are transposed views (bits below): the slots
 * before it hold the first input's ndim and shape. */
#define LAYOUT_SLOT (2 * PT_MAX_DIMS - 1)
#define A_TRANSPOSED 1
#define B_TRANSPOSED 2

/* True when t's last two dims are the transpose of a contiguous matrix (a pt_t / transpose
 * view such as the weight of a linear layer), so a gradient laid out like t is contiguous
 * once transposed back. */
static bool transposed_layout(const pt_tensor *t)
{
    if (t->ndim < 2)
        return false;
    int d = t->ndim;
    return t->shape[d - 1] > 1 && t->shape[d - 2] > 1 && t->stride[d - 2] == 1 &&
           t->stride[d - 1] == t->shape[d - 2];
}

/* x @ y, or, when want_transposed, the same values computed as (y^T @ x^T)^T so that they come
 * out in a transposed layout (PyTorch's mm_mat1/mat2_backward do the same): a gradient that
 * goes back through a transpose view then lands contiguous, without a transposing copy. */
static pt_tensor *product(const pt_tensor *x, const pt_tensor *y, bool batched,
                          bool want_transposed)
{
    if (!want_transposed)
        return batched ? pt_bmm(x, y) : pt_mm(x, y);
    pt_tensor *xt = pt_transpose(x, -1, -2), *yt = pt_transpose(y, -1, -2);
    pt_tensor *r = xt && yt ? (batched ? pt_bmm(yt, xt) : pt_mm(yt, xt)) : NULL;
    pt_release(xt);
    pt_release(yt);
    pt_tensor *rt = r ? pt_transpose(r, -1, -2) : NULL;
    pt_release(r);
    return rt;
}

/* Gradients of alpha * (a @ b) for 2-D (mm) or 3-D (bmm) operands: da = alpha g b^T,
 * db = alpha a^T g, each laid out as its operand is when that operand is a transposed view.
 * Slot 0 holds a, slot 1 holds b (each saved only when the other's gradient is needed); ia and
 * ib are their input positions; d[0] = alpha; i[LAYOUT_SLOT] the forward's layout bits. */
static pt_status product_grads(pti_node *n, const pt_tensor *g, int ia, int ib, bool batched,
                               pt_tensor **grad_in)
{
    double alpha = n->d[0];
    if (pti_node_needs_grad(n, ia)) {
        pt_tensor *b = pti_node_saved(n, 1);
        pt_tensor *bt = pt_transpose(b, -1, -2);
        pt_tensor *r = product(g, bt, batched, (n->i[LAYOUT_SLOT] & A_TRANSPOSED) != 0);
        pt_release(b);
        pt_release(bt);
        pt_status st = put_grad(grad_in, ia, scaled_owned(r, alpha));
        if (st != PT_OK)
            return st;
    }
    if (pti_node_needs_grad(n, ib)) {
        pt_tensor *a = pti_node_saved(n, 0);
        pt_tensor *at = pt_transpose(a, -1, -2);
        pt_tensor *r = product(at, g, batched, (n->i[LAYOUT_SLOT] & B_TRANSPOSED) != 0);
        pt_release(a);
        pt_release(at);
        return put_grad(grad_in, ib, scaled_owned(r, alpha));
    }
    return PT_OK;
}

static pt_status mm_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    return product_grads(n, grad_out[0], 0, 1, false, grad_in);
}

static pt_status bmm_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    return product_grads(n, grad_out[0], 0, 1, true, grad_in);
}

/* addmm / baddbmm: input's gradient is beta * g summed to input's shape (i[0] = its ndim,
 * i[1...] its shape; d[1] = beta). */
static pt_status addmm_common_backward(pti_node *n, const pt_tensor *g, bool batched,
                                       pt_tensor **grad_in)
{
    if (pti_node_needs_grad(n, 0)) {
        pt_tensor *gb = scaled_owned(pt_retain((pt_tensor *)g), n->d[1]);
        pt_tensor *r = pti_sum_to(gb, (int)n->i[0], n->i + 1);
        pt_release(gb);
        pt_status st = put_grad(grad_in, 0, r);
        if (st != PT_OK)
            return st;
    }
    return product_grads(n, g, 1, 2, batched, grad_in);
}

static pt_status addmm_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    return addmm_common_backward(n, grad_out[0], false, grad_in);
}

static pt_status baddbmm_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    return addmm_common_backward(n, grad_out[0], true, grad_in);
}

/* slot 0: mat (for vec's gradient), slot 1: vec (for mat's). */
static pt_status mv_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    const pt_tensor *g = grad_out[0];
    if (pti_node_needs_grad(n, 0)) {
        pt_tensor *vec = pti_node_saved(n, 1);
        pt_tensor *r = pt_outer(g, vec);
        pt_release(vec);
        pt_status st = put_grad(grad_in, 0, r);
        if (st != PT_OK)
            return st;
    }
    if (pti_node_needs_grad(n, 1)) {
        pt_tensor *mat = pti_node_saved(n, 0);
        pt_tensor *mt = pt_t(mat);
        pt_tensor *r = pt_mv(mt, g);
        pt_release(mat);
        pt_release(mt);
        return put_grad(grad_in, 1, r);
    }
    return PT_OK;
}

/* slot 0: a, slot 1: b; g is 0-dim. */
static pt_status dot_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    for (int i = 0; i < 2; i++) {
        if (!pti_node_needs_grad(n, i))
            continue;
        pt_tensor *other = pti_node_saved(n, 1 - i);
        pt_tensor *r = pt_mul(grad_out[0], other);
        pt_release(other);
        pt_status st = put_grad(grad_in, i, r);
        if (st != PT_OK)
            return st;
    }
    return PT_OK;
}

/* slot 0: a, slot 1: b. outer promotes dtypes: the other operand is cast to the gradient's
 * dtype, and each result back to its input's dtype. */
static pt_status outer_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    const pt_tensor *g = grad_out[0];
    for (int i = 0; i < 2; i++) {
        if (!pti_node_needs_grad(n, i))
            continue;
        pt_tensor *self = pti_node_saved(n, i), *other = pti_node_saved(n, 1 - i);
        pt_tensor *oc = other ? pt_to_dtype(other, pt_dtype_of(g)) : NULL;
        pt_tensor *gm = i == 0 ? pt_retain((pt_tensor *)g) : pt_t(g);
        pt_tensor *r = pt_mv(gm, oc);
        pt_tensor *rc = r && self ? pt_to_dtype(r, pt_dtype_of(self)) : NULL;
        pt_release(self);
        pt_release(other);
        pt_release(oc);
        pt_release(gm);
        pt_release(r);
        pt_status st = put_grad(grad_in, i, rc);
        if (st != PT_OK)
            return st;
    }
    return PT_OK;
}

/* b's gradient when b is shared by every batch (at most 2-D) and a is batched: a's batch and
 * row dims fold into one, so it is a single 2-D product [m, B*n] @ [B*n, p]. */
static pt_tensor *matmul_shared_b_grad(const pt_tensor *a2, const pt_tensor *g2, const pt_tensor *b)
{
    int64_t m = pt_size(a2, -1), p = pt_size(g2, -1);
    /* the product of the leading dims, not numel / m: a [B, n, 0] input still has B*n rows */
    int64_t rows = 1;
    for (int d = 0; d < pt_ndim(a2) - 1; d++)
        rows *= pt_size(a2, d);
    pt_tensor *af = pt_reshape(a2, 2, (const int64_t[]){rows, m});
    pt_tensor *gf = pt_reshape(g2, 2, (const int64_t[]){rows, p});
    pt_tensor *at = pt_t(af);
    pt_tensor *r = product(at, gf, false, transposed_layout(b));
    pt_tensor *rb = pt_reshape(r, pt_ndim(b), pt_shape(b));
    pt_release(af);
    pt_release(gf);
    pt_release(at);
    pt_release(r);
    return rb;
}

/* ga = g2 @ b2^T summed to a's shape; gb = a2^T @ g2 summed to b's shape, where a2/b2/g2 are
 * the operands and gradient with the dims of 1-D operands restored. */
static pt_status matmul_grads(pti_node *n, const pt_tensor *a, const pt_tensor *b,
                              const pt_tensor *g, pt_tensor **grad_in)
{
    pt_tensor *a2 = a->ndim == 1 ? pt_unsqueeze(a, 0) : pt_retain((pt_tensor *)a);
    pt_tensor *b2 = b->ndim == 1 ? pt_unsqueeze(b, 1) : pt_retain((pt_tensor *)b);
    pt_tensor *g1 = a->ndim == 1 ? pt_unsqueeze(g, -2) : pt_retain((pt_tensor *)g);
    pt_tensor *g2 = b->ndim == 1 ? pt_unsqueeze(g1, -1) : pt_retain(g1);
    pt_release(g1);
    pt_status st = PT_OK;
    if (pti_node_needs_grad(n, 0)) {
        pt_tensor *bt = pt_transpose(b2, -1, -2);
        pt_tensor *r = pt_matmul(g2, bt);
        pt_tensor *rs = pti_sum_to(r, a2 ? a2->ndim : 0, a2 ? a2->shape : NULL);
        pt_tensor *ra = pt_reshape(rs, a->ndim, a->shape);
        pt_release(bt);
        pt_release(r);
        pt_release(rs);
        st = put_grad(grad_in, 0, ra);
    }
    if (st == PT_OK && pti_node_needs_grad(n, 1)) {
        pt_tensor *rb;
        if (b->ndim <= 2 && a->ndim > 2) {
            rb = matmul_shared_b_grad(a2, g2, b);
        } else {
            pt_tensor *at = pt_transpose(a2, -1, -2);
            pt_tensor *r = a2->ndim == 2 && b2->ndim == 2
                               ? product(at, g2, false, transposed_layout(b2))
                               : pt_matmul(at, g2);
            pt_tensor *rs = pti_sum_to(r, b2 ? b2->ndim : 0, b2 ? b2->shape : NULL);
            rb = pt_reshape(rs, b->ndim, b->shape);
            pt_release(at);
            pt_release(r);
            pt_release(rs);
        }
        st = put_grad(grad_in, 1, rb);
    }
    pt_release(a2);
    pt_release(b2);
    pt_release(g2);
    return st;
}

/* slot 0: a, slot 1: b (both: their shapes are needed for either gradient). */
static pt_status matmul_backward(pti_node *n, pt_tensor *const *grad_out, pt_tensor **grad_in)
{
    pt_tensor *a = pti_node_saved(n, 0), *b = pti_node_saved(n, 1);
    pt_status st = a && b ? matmul_grads(n, a, b, grad_out[0], grad_in) : pt_last_status();
    pt_release(a);
    pt_release(b);
    return st;
}

/* Records a node for out = op(ins...) when grad mode is on and an input requires grad.
 * saves[] (NULL entries allowed) fill slots 0, 1, ...; d[0] = alpha, d[1] = beta, and for
 * addmm/baddbmm, i[] holds input's shape. Returns out, or NULL (out released) on failure. */
static pt_tensor *record(const char *name, pti_backward_fn fn, int n_in,
                         const pt_tensor *const *ins, int n_save, const pt_tensor *const *saves,
                         double alpha, double beta, pt_tensor *out)
{
    if (!out || !pti_grad_recording(n_in, ins))
        return out;
    pti_node *n = pti_node_new(name, fn, n_in, ins);
    if (!n)
        goto fail;
    n->d[0] = alpha;
    n->d[1] = beta;
    n->i[0] = ins[0]->ndim;
    for (int d = 0; d < ins[0]->ndim; d++)
        n->i[1 + d] = ins[0]->shape[d];
    /* the product's operands are the last two inputs (mm: a, b; addmm: input, a, b) */
    n->i[LAYOUT_SLOT] = (transposed_layout(ins[n_in - 2]) ? A_TRANSPOSED : 0) |
                        (transposed_layout(ins[n_in - 1]) ? B_TRANSPOSED : 0);
    for (int i = 0; i < n_save; i++) {
        if (pti_node_save(n, saves[i]) < 0) {
            pti_node_release(n);
            goto fail;
        }
    }
    if (pti_node_finish(n, 1, &out) == PT_OK)
        return out;
fail:
    pt_release(out);
    return NULL;
}

/* The two operands of a product, each saved only when the other one's gradient is needed. */
static pt_tensor *record_pair(const char *name, pti_backward_fn fn, const pt_tensor *a,
                              const pt_tensor *b, pt_tensor *out)
{
    const pt_tensor *ins[2] = {a, b};
    const pt_tensor *saves[2] = {b->requires_grad ? a : NULL, a->requires_grad ? b : NULL};
    return record(name, fn, 2, ins, 2, saves, 1.0, 0.0, out);
}

/* ---- mm, bmm, mv, dot, outer ----------------------------------------------------------------- */

pt_tensor *pt_mm(const pt_tensor *a, const pt_tensor *b)
{
    const char *op = "pt_mm";
    if (!check_pair(op, a, "a", b, "b") || !check_ndim(op, "a", a, 2) ||
        !check_ndim(op, "b", b, 2) || !check_inner(op, a, b, a->shape[1], b->shape[0]))
        return NULL;
    pt_tensor *out = pti_tensor_new(2, (const int64_t[]){a->shape[0], b->shape[1]}, a->dtype,
                                    a->storage->device);
    if (!out)
        return NULL;
    operand_geom ga = geom2(a->shape[0], a->shape[1], a->stride[0], a->stride[1]);
    operand_geom gb = geom2(b->shape[0], b->shape[1], b->stride[0], b->stride[1]);
    out = finish(out, run_product(a, &ga, b, &gb, out, 1.0, 0.0));
    return record_pair("mm", mm_backward, a, b, out);
}

/* Geometry of a 3-D tensor as [B, rows, cols]. */
static operand_geom geom3(const pt_tensor *t)
{
    operand_geom g = {.nd = 3};
    for (int i = 0; i < 3; i++) {
        g.shape[i] = t->shape[i];
        g.stride[i] = t->stride[i];
    }
    return g;
}

static bool check_bmm_shapes(const char *op, const pt_tensor *a, const pt_tensor *b)
{
    if (!check_ndim(op, "batch1", a, 3) || !check_ndim(op, "batch2", b, 3))
        return false;
    if (a->shape[0] != b->shape[0]) {
        pti_error(PT_ERR_SHAPE,
                  "%s: batch1 %s and batch2 %s must have the same number of "
                  "batches (%lld != %lld)",
                  op, pti_shape_str(3, a->shape), pti_shape_str(3, b->shape),
                  (long long)a->shape[0], (long long)b->shape[0]);
        return false;
    }
    return check_inner(op, a, b, a->shape[2], b->shape[1]);
}

pt_tensor *pt_bmm(const pt_tensor *a, const pt_tensor *b)
{
    const char *op = "pt_bmm";
    if (!check_pair(op, a, "batch1", b, "batch2") || !check_bmm_shapes(op, a, b))
        return NULL;
    pt_tensor *out = pti_tensor_new(3, (const int64_t[]){a->shape[0], a->shape[1], b->shape[2]},
                                    a->dtype, a->storage->device);
    if (!out)
        return NULL;
    operand_geom ga = geom3(a), gb = geom3(b);
    out = finish(out, run_product(a, &ga, b, &gb, out, 1.0, 0.0));
    return record_pair("bmm", bmm_backward, a, b, out);
}

pt_tensor *pt_mv(const pt_tensor *mat, const pt_tensor *vec)
{
    const char *op = "pt_mv";
    if (!check_pair(op, mat, "mat", vec, "vec") || !check_ndim(op, "mat", mat, 2) ||
        !check_ndim(op, "vec", vec, 1) || !check_inner(op, mat, vec, mat->shape[1], vec->shape[0]))
        return NULL;
    pt_tensor *out = pti_tensor_new(1, mat->shape, mat->dtype, mat->storage->device);
    if (!out)
        return NULL;
    operand_geom ga = geom2(mat->shape[0], mat->shape[1], mat->stride[0], mat->stride[1]);
    operand_geom gb = geom2(vec->shape[0], 1, vec->stride[0], 1);
    out = finish(out, run_product(mat, &ga, vec, &gb, out, 1.0, 0.0));
    return record_pair("mv", mv_backward, mat, vec, out);
}

pt_tensor *pt_dot(const pt_tensor *a, const pt_tensor *b)
{
    const char *op = "pt_dot";
    if (!check_pair(op, a, "a", b, "b") || !check_ndim(op, "a", a, 1) || !check_ndim(op, "b", b, 1))
        return NULL;
    if (a->shape[0] != b->shape[0])
        return pti_error_null(PT_ERR_SHAPE,
                              "pt_dot: inconsistent sizes: a %s and b %s must have "
                              "the same number of elements (%lld != %lld)",
                              pti_shape_str(1, a->shape), pti_shape_str(1, b->shape),
                              (long long)a->shape[0], (long long)b->shape[0]);
    pt_tensor *out = pti_tensor_new(0, NULL, a->dtype, a->storage->device);
    if (!out)
        return NULL;
    operand_geom ga = geom2(1, a->shape[0], 1, a->stride[0]);
    operand_geom gb = geom2(b->shape[0], 1, b->stride[0], 1);
    out = finish(out, run_product(a, &ga, b, &gb, out, 1.0, 0.0));
    return record_pair("dot", dot_backward, a, b, out);
}

pt_tensor *pt_outer(const pt_tensor *a, const pt_tensor *b)
{
    const char *op = "pt_outer";
    if (!PTI_CHECK_ARG(a, op, "a") || !PTI_CHECK_ARG(b, op, "b"))
        return NULL;
    const pt_tensor *ts[2] = {a, b};
    if (!pti_check_same_device(op, 2, ts) || !check_ndim(op, "a", a, 1) ||
        !check_ndim(op, "b", b, 1))
        return NULL;
    if (pti_dtypes[a->dtype].is_block || pti_dtypes[b->dtype].is_block)
        return pti_error_null(PT_ERR_DTYPE,
                              "pt_outer: block dtypes are not supported (got %s "
                              "and %s)",
                              pt_dtype_name(a->dtype), pt_dtype_name(b->dtype));
    pt_dtype dt = pt_promote_types(a->dtype, b->dtype);
    /* bool x bool is a logical and: compute in uint8, convert back */
    pt_dtype cdt = dt == PT_BOOL ? PT_UINT8 : dt;
    pt_tensor *ac = pti_as_dtype(a, cdt), *bc = pti_as_dtype(b, cdt);
    pt_tensor *out = ac && bc ? pti_tensor_new(2, (const int64_t[]){a->shape[0], b->shape[0]}, cdt,
                                               a->storage->device)
                              : NULL;
    pt_status st = pt_last_status();
    if (out) {
        operand_geom ga = geom2(ac->shape[0], 1, ac->stride[0], 1);
        operand_geom gb = geom2(1, bc->shape[0], 1, bc->stride[0]);
        st = run_product(ac, &ga, bc, &gb, out, 1.0, 0.0);
    }
    pt_release(ac);
    pt_release(bc);
    out = finish(out, out ? st : PT_ERR_OOM);
    if (out && dt != cdt) {
        pt_tensor *r = pt_to_dtype(out, dt);
        pt_release(out);
        out = r;
    }
    if (!out || !pti_dtypes[out->dtype].is_floating)
        return out;
    const pt_tensor *ins[2] = {a, b};
    return record("outer", outer_backward, 2, ins, 2, ins, 1.0, 0.0, out);
}

/* ---- matmul ---------------------------------------------------------------------------------- */

/* A block-dtype b (a GGUF weight, transposed): src/ops/linalg_linear.c. */
pt_tensor *pti_matmul_block_weight(const pt_tensor *a, const pt_tensor *b);

pt_tensor *pt_matmul(const pt_tensor *a, const pt_tensor *b)
{
    const char *op = "pt_matmul";
    if (a && b && pti_dtypes[b->dtype].is_block)
        return pti_matmul_block_weight(a, b);
    if (!check_pair(op, a, "a", b, "b"))
        return NULL;
    if (a->ndim == 0 || b->ndim == 0)
        return pti_error_null(PT_ERR_SHAPE,
                              "pt_matmul: both arguments need at least 1 dimension, "
                              "but got shapes %s and %s",
                              pti_shape_str(a->ndim, a->shape), pti_shape_str(b->ndim, b->shape));
    if (a->ndim == 1 && b->ndim == 1) {
        if (!check_inner(op, a, b, a->shape[0], b->shape[0]))
            return NULL;
        return pt_dot(a, b);
    }
    /* matrix geometry of each side; 1-D a is a row [1, m], 1-D b a column [m, 1] */
    int nba = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    int64_t n = a->ndim == 1 ? 1 : a->shape[a->ndim - 2], m = a->shape[a->ndim - 1];
    int64_t sar = a->ndim == 1 ? 0 : a->stride[a->ndim - 2], sac = a->stride[a->ndim - 1];
    int64_t mb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
    int64_t p = b->ndim == 1 ? 1 : b->shape[b->ndim - 1];
    int64_t sbr = b->ndim == 1 ? b->stride[0] : b->stride[b->ndim - 2];
    int64_t sbc = b->ndim == 1 ? 0 : b->stride[b->ndim - 1];
    if (!check_inner(op, a, b, m, mb))
        return NULL;
    int nb;
    int64_t batch[PT_MAX_DIMS];
    if (!pti_broadcast_shapes(op, nba, a->shape, nbb, b->shape, &nb, batch))
        return NULL;
    /* result shape: batch, then n unless a is 1-D, then p unless b is 1-D */
    int64_t rshape[PT_MAX_DIMS + 2];
    int rnd = nb;
    for (int i = 0; i < nb; i++)
        rshape[i] = batch[i];
    if (a->ndim > 1)
        rshape[rnd++] = n;
    if (b->ndim > 1)
        rshape[rnd++] = p;
    if (rnd > PT_MAX_DIMS)
        return pti_error_null(PT_ERR_SHAPE, "pt_matmul: result would have %d dims (max %d)", rnd,
                              PT_MAX_DIMS);
    /* expanded geometries: batch dims broadcast with stride 0 */
    operand_geom ga = {.nd = nb + 2}, gb = {.nd = nb + 2};
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - nba), ib = i - (nb - nbb);
        ga.shape[i] = gb.shape[i] = batch[i];
        ga.stride[i] = ia >= 0 && a->shape[ia] != 1 ? a->stride[ia] : 0;
        gb.stride[i] = ib >= 0 && b->shape[ib] != 1 ? b->stride[ib] : 0;
    }
    ga.shape[nb] = n;
    ga.shape[nb + 1] = m;
    ga.stride[nb] = sar;
    ga.stride[nb + 1] = sac;
    gb.shape[nb] = m;
    gb.shape[nb + 1] = p;
    gb.stride[nb] = sbr;
    gb.stride[nb + 1] = sbc;
    /* b shared by every batch and a's batch and row dims flatten: one big 2-D product
     * [(batch * n), m] @ [m, p], as PyTorch folds it */
    int64_t fold_stride = 0;
    if (nbb == 0 && nb > 0 && flat_stride(nb + 1, ga.shape, ga.stride, &fold_stride)) {
        int64_t rows = pti_shape_numel(nb + 1, ga.shape);
        ga = geom2(rows, m, fold_stride, sac);
        gb = geom2(m, p, sbr, sbc);
    }
    pt_tensor *out = pti_tensor_new(rnd, rshape, a->dtype, a->storage->device);
    if (!out)
        return NULL;
    out = finish(out, run_product(a, &ga, b, &gb, out, 1.0, 0.0));
    const pt_tensor *ins[2] = {a, b};
    return record("matmul", matmul_backward, 2, ins, 2, ins, 1.0, 0.0, out);
}

/* ---- addmm, baddbmm -------------------------------------------------------------------------- */

/* out = input broadcast to shape (skipped when beta == 0: input is ignored, as in PyTorch). */
static pt_tensor *init_from_input(const char *op, const pt_tensor *input, int nd,
                                  const int64_t *shape, double beta)
{
    int bnd;
    int64_t bshape[PT_MAX_DIMS];
    if (!pti_broadcast_shapes(op, input->ndim, input->shape, nd, shape, &bnd, bshape))
        return NULL;
    bool same = bnd == nd;
    for (int i = 0; same && i < nd; i++)
        same = bshape[i] == shape[i];
    if (!same)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: input of shape %s cannot be broadcast to the "
                              "product's shape %s",
                              op, pti_shape_str(input->ndim, input->shape),
                              pti_shape_str(nd, shape));
    pt_tensor *out = pti_tensor_new(nd, shape, input->dtype, input->storage->device);
    if (out && beta != 0 && pt_copy_(out, input) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

static bool check_triple(const char *op, const pt_tensor *input, const pt_tensor *x, const char *xn,
                         const pt_tensor *y, const char *yn)
{
    if (!PTI_CHECK_ARG(input, op, "input") || !check_pair(op, x, xn, y, yn))
        return false;
    const pt_tensor *ts[3] = {input, x, y};
    if (!pti_check_same_device(op, 3, ts))
        return false;
    if (input->dtype != x->dtype) {
        pti_error(PT_ERR_DTYPE,
                  "%s: expected 'input' and '%s' to have the same dtype, but got "
                  "%s and %s",
                  op, xn, pt_dtype_name(input->dtype), pt_dtype_name(x->dtype));
        return false;
    }
    return true;
}

pt_tensor *pt_addmm_ex(const pt_tensor *input, const pt_tensor *m1, const pt_tensor *m2,
                       const pt_addmm_opts *opts)
{
    const char *op = "pt_addmm";
    pt_addmm_opts o = opts ? *opts : PT_ADDMM_DEFAULTS;
    if (!check_triple(op, input, m1, "mat1", m2, "mat2") || !check_ndim(op, "mat1", m1, 2) ||
        !check_ndim(op, "mat2", m2, 2) || !check_inner(op, m1, m2, m1->shape[1], m2->shape[0]) ||
        !check_alpha_beta(op, m1->dtype, o.alpha, o.beta))
        return NULL;
    pt_tensor *out =
        init_from_input(op, input, 2, (const int64_t[]){m1->shape[0], m2->shape[1]}, o.beta);
    if (!out)
        return NULL;
    operand_geom ga = geom2(m1->shape[0], m1->shape[1], m1->stride[0], m1->stride[1]);
    operand_geom gb = geom2(m2->shape[0], m2->shape[1], m2->stride[0], m2->stride[1]);
    out = finish(out, run_product(m1, &ga, m2, &gb, out, o.alpha, o.beta));
    const pt_tensor *ins[3] = {input, m1, m2};
    const pt_tensor *saves[2] = {m2->requires_grad ? m1 : NULL, m1->requires_grad ? m2 : NULL};
    return record("addmm", addmm_backward, 3, ins, 2, saves, o.alpha, o.beta, out);
}

pt_tensor *pt_addmm(const pt_tensor *input, const pt_tensor *m1, const pt_tensor *m2)
{
    return pt_addmm_ex(input, m1, m2, NULL);
}

pt_tensor *pt_baddbmm_ex(const pt_tensor *input, const pt_tensor *batch1, const pt_tensor *batch2,
                         const pt_baddbmm_opts *opts)
{
    const char *op = "pt_baddbmm";
    pt_addmm_opts o = opts ? *opts : PT_ADDMM_DEFAULTS;
    if (!check_triple(op, input, batch1, "batch1", batch2, "batch2") ||
        !check_bmm_shapes(op, batch1, batch2) ||
        !check_alpha_beta(op, batch1->dtype, o.alpha, o.beta))
        return NULL;
    int64_t shape[3] = {batch1->shape[0], batch1->shape[1], batch2->shape[2]};
    pt_tensor *out = init_from_input(op, input, 3, shape, o.beta);
    if (!out)
        return NULL;
    operand_geom ga = geom3(batch1), gb = geom3(batch2);
    out = finish(out, run_product(batch1, &ga, batch2, &gb, out, o.alpha, o.beta));
    const pt_tensor *ins[3] = {input, batch1, batch2};
    const pt_tensor *saves[2] = {batch2->requires_grad ? batch1 : NULL,
                                 batch1->requires_grad ? batch2 : NULL};
    return record("baddbmm", baddbmm_backward, 3, ins, 2, saves, o.alpha, o.beta, out);
}

pt_tensor *pt_baddbmm(const pt_tensor *input, const pt_tensor *batch1, const pt_tensor *batch2)
{
    return pt_baddbmm_ex(input, batch1, batch2, NULL);
}
