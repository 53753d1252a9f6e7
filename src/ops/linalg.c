/* Front-ends of the linalg family: mm, bmm, matmul, mv, dot, outer, addmm, baddbmm.
 *
 * Every product ends in one helper, run_product(), which hands the mm/bmm kernels 2-D or 3-D
 * operands in the layout their contract fixes (src/ops/linalg.def): each matrix row-major or
 * column-major (a transposed contiguous matrix, passed to BLAS as a transpose flag, not
 * copied), any batch stride. Operands in any other layout (a step slice, a broadcast with
 * stride 0 inside a matrix, batch dims that do not flatten to one stride) are made contiguous
 * first. float16/bfloat16 compute in float32 and are rounded back, as PyTorch does on CPU. */
#include <math.h>

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
    int64_t sr = stride[nb], sc = stride[nb + 1], sb;
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
    return finish(out, run_product(a, &ga, b, &gb, out, 1.0, 0.0));
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
    return finish(out, run_product(a, &ga, b, &gb, out, 1.0, 0.0));
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
    return finish(out, run_product(mat, &ga, vec, &gb, out, 1.0, 0.0));
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
    return finish(out, run_product(a, &ga, b, &gb, out, 1.0, 0.0));
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
    return out;
}

/* ---- matmul ---------------------------------------------------------------------------------- */

pt_tensor *pt_matmul(const pt_tensor *a, const pt_tensor *b)
{
    const char *op = "pt_matmul";
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
    int64_t fold_stride;
    if (nbb == 0 && nb > 0 && flat_stride(nb + 1, ga.shape, ga.stride, &fold_stride)) {
        int64_t rows = pti_shape_numel(nb + 1, ga.shape);
        ga = geom2(rows, m, fold_stride, sac);
        gb = geom2(m, p, sbr, sbc);
    }
    pt_tensor *out = pti_tensor_new(rnd, rshape, a->dtype, a->storage->device);
    if (!out)
        return NULL;
    return finish(out, run_product(a, &ga, b, &gb, out, 1.0, 0.0));
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
    return finish(out, run_product(m1, &ga, m2, &gb, out, o.alpha, o.beta));
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
    return finish(out, run_product(batch1, &ga, batch2, &gb, out, o.alpha, o.beta));
}

pt_tensor *pt_baddbmm(const pt_tensor *input, const pt_tensor *batch1, const pt_tensor *batch2)
{
    return pt_baddbmm_ex(input, batch1, batch2, NULL);
}
