/* Front-ends of the reduce family (see include/prometorch/ops_reduce.h): argument checks, the
 * reduced dims, output shape and dtype, then dispatch to the kernels (CPU kernels in
 * src/backends/cpu/reduce*.c). Reduced dims reach the kernel as a bitmask in scalar[0]; the
 * output is always allocated contiguous, so kernels write it in row-major order of the kept
 * dims whether or not keepdim is set. */
#include <math.h>

#include "common.h"
#include "reduce_grad.h"

/* The output geometry of a reduction. */
typedef struct rshape {
    int ndim;
    int64_t shape[PT_MAX_DIMS];
    uint32_t bits; /* reduced dims */
    int64_t nred;  /* elements reduced into each output element */
    int zero_dim;  /* a reduced dim of size 0, or -1 */
} rshape;

static bool check_input(const char *op, const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, op, "t"))
        return false;
    return pti_check_plain_dtype(op, t);
}

/* Reduced dims from a dim list (ndims == 0 or dims == NULL: every dim). */
static bool reduce_shape(const char *op, const pt_tensor *t, int ndims, const int64_t *dims,
                         bool keepdim, rshape *r)
{
    if (ndims < 0 || ndims > PT_MAX_DIMS) {
        pti_error(PT_ERR_INVALID_ARG, "%s: ndims must be in [0, %d], got %d", op, PT_MAX_DIMS,
                  ndims);
        return false;
    }
    bool mask[PT_MAX_DIMS];
    if (!pti_dims_mask(op, ndims, dims, t->ndim, mask))
        return false;
    r->ndim = 0;
    r->bits = 0;
    r->nred = 1;
    r->zero_dim = -1;
    for (int d = 0; d < t->ndim; d++) {
        if (mask[d]) {
            r->bits |= 1u << d;
            r->nred *= t->shape[d];
            if (t->shape[d] == 0 && r->zero_dim < 0)
                r->zero_dim = d;
            if (keepdim)
                r->shape[r->ndim++] = 1;
        } else {
            r->shape[r->ndim++] = t->shape[d];
        }
    }
    return true;
}

static bool reduce_shape_dim(const char *op, const pt_tensor *t, int64_t dim, bool keepdim,
                             rshape *r)
{
    return reduce_shape(op, t, 1, &dim, keepdim, r);
}

/* Allocates the output(s) and runs the kernel. idx_out (may be NULL) receives int64 indices
 * for max_dim/min_dim. */
static pt_tensor *run(pti_op op, const pt_tensor *t, const rshape *r, pt_dtype out_dt, double arg,
                      pt_tensor **idx_out)
{
    pt_device dev = t->storage->device;
    pt_tensor *out = pti_tensor_new(r->ndim, r->shape, out_dt, dev);
    if (!out)
        return NULL;
    pt_tensor *idx = NULL;
    if (idx_out) {
        idx = pti_tensor_new(r->ndim, r->shape, PT_INT64, dev);
        if (!idx) {
            pt_release(out);
            return NULL;
        }
    }
    pti_call c = {.n_in = 1,
                  .n_out = idx ? 2 : 1,
                  .in = {t},
                  .out = {out, idx},
                  .scalar = {(double)r->bits, arg}};
    if (pti_dispatch(op, &c) != PT_OK) {
        pt_release(out);
        pt_release(idx);
        return NULL;
    }
    if (idx_out)
        *idx_out = idx;
    return out;
}

/* int and bool sum/prod/cumsum/cumprod give int64 (PyTorch). */
static pt_dtype accum_dtype(pt_dtype dt)
{
    return pti_dtypes[dt].is_floating ? dt : PT_INT64;
}

static bool check_float(const char *op, const pt_tensor *t)
{
    if (pti_dtypes[t->dtype].is_floating)
        return true;
    pti_error(PT_ERR_DTYPE,
              "%s: expected a floating point input, got %s (convert with pt_to_dtype)", op,
              pti_tensor_desc(t));
    return false;
}

/* ---- sum, mean, prod ------------------------------------------------------------------------- */

pt_tensor *pt_sum_dim(const pt_tensor *t, int ndims, const int64_t *dims, bool keepdim)
{
    const char *op = "pt_sum_dim";
    rshape r;
    if (!check_input(op, t) || !reduce_shape(op, t, ndims, dims, keepdim, &r))
        return NULL;
    pt_tensor *out = run(PTI_OP_sum, t, &r, accum_dtype(t->dtype), 0, NULL);
    return pti_reduce_record("sum", PTI_RG_SUM, t, out, NULL, r.bits, keepdim, 0);
}

pt_tensor *pt_sum(const pt_tensor *t)
{
    rshape r;
    if (!check_input("pt_sum", t) || !reduce_shape("pt_sum", t, 0, NULL, false, &r))
        return NULL;
    pt_tensor *out = run(PTI_OP_sum, t, &r, accum_dtype(t->dtype), 0, NULL);
    return pti_reduce_record("sum", PTI_RG_SUM, t, out, NULL, r.bits, false, 0);
}

static pt_tensor *mean_common(const char *op, const pt_tensor *t, int ndims, const int64_t *dims,
                              bool keepdim)
{
    rshape r;
    if (!check_input(op, t) || !reduce_shape(op, t, ndims, dims, keepdim, &r))
        return NULL;
    if (!pti_dtypes[t->dtype].is_floating)
        return pti_error_null(PT_ERR_DTYPE,
                              "%s: could not infer output dtype: the input must be floating "
                              "point, got %s (as PyTorch, integer mean is not defined)",
                              op, pt_dtype_name(t->dtype));
    pt_tensor *out = run(PTI_OP_mean, t, &r, t->dtype, 0, NULL);
    return pti_reduce_record("mean", PTI_RG_MEAN, t, out, NULL, r.bits, keepdim, 0);
}

pt_tensor *pt_mean(const pt_tensor *t)
{
    return mean_common("pt_mean", t, 0, NULL, false);
}

pt_tensor *pt_mean_dim(const pt_tensor *t, int ndims, const int64_t *dims, bool keepdim)
{
    return mean_common("pt_mean_dim", t, ndims, dims, keepdim);
}

pt_tensor *pt_prod(const pt_tensor *t)
{
    rshape r;
    if (!check_input("pt_prod", t) || !reduce_shape("pt_prod", t, 0, NULL, false, &r))
        return NULL;
    pt_tensor *out = run(PTI_OP_prod, t, &r, accum_dtype(t->dtype), 0, NULL);
    return pti_reduce_record("prod", PTI_RG_PROD, t, out, NULL, r.bits, false, 0);
}

pt_tensor *pt_prod_dim(const pt_tensor *t, int64_t dim, bool keepdim)
{
    rshape r;
    if (!check_input("pt_prod_dim", t) || !reduce_shape_dim("pt_prod_dim", t, dim, keepdim, &r))
        return NULL;
    pt_tensor *out = run(PTI_OP_prod, t, &r, accum_dtype(t->dtype), 0, NULL);
    return pti_reduce_record("prod_dim", PTI_RG_PROD, t, out, NULL, r.bits, keepdim, 0);
}

/* ---- max, min, amax, amin, argmax, argmin
 * -------------------------------------------------------- */

/* PyTorch refuses max/min-style reductions over nothing. */
static bool check_nonempty(const char *op, const pt_tensor *t, const rshape *r, bool all)
{
    if (all && t->numel == 0) {
        pti_error(PT_ERR_INVALID_ARG,
                  "%s: the input is empty (shape %s); specify a reduction dim with non-zero size",
                  op, pti_shape_str(t->ndim, t->shape));
        return false;
    }
    if (r->zero_dim >= 0) {
        pti_error(PT_ERR_INVALID_ARG,
                  "%s: expected reduction dim %d to have non-zero size (input shape %s)", op,
                  r->zero_dim, pti_shape_str(t->ndim, t->shape));
        return false;
    }
    return true;
}

static pt_tensor *extreme_all(const char *op, const char *name, pti_op kop, const pt_tensor *t)
{
    rshape r;
    if (!check_input(op, t) || !reduce_shape(op, t, 0, NULL, false, &r) ||
        !check_nonempty(op, t, &r, true))
        return NULL;
    pt_tensor *out = run(kop, t, &r, t->dtype, 0, NULL);
    return pti_reduce_record(name, PTI_RG_EXTREME_ALL, t, out, NULL, r.bits, false, 0);
}

pt_tensor *pt_max(const pt_tensor *t)
{
    return extreme_all("pt_max", "max", PTI_OP_amax, t);
}

pt_tensor *pt_min(const pt_tensor *t)
{
    return extreme_all("pt_min", "min", PTI_OP_amin, t);
}

/* When recording, the indices are computed even if the caller does not want them: the
 * backward sends the gradient to them. */
static pt_tensor *extreme_dim(const char *op, const char *name, pti_op kop, const pt_tensor *t,
                              int64_t dim, bool keepdim, pt_tensor **indices)
{
    if (indices)
        *indices = NULL;
    rshape r;
    if (!check_input(op, t) || !reduce_shape_dim(op, t, dim, keepdim, &r) ||
        !check_nonempty(op, t, &r, false))
        return NULL;
    bool rec = pti_grad_recording(1, &t) && pti_dtypes[t->dtype].is_floating;
    pt_tensor *idx = NULL;
    pt_tensor *v = run(kop, t, &r, t->dtype, 0, indices || rec ? &idx : NULL);
    if (v && rec)
        v = pti_reduce_record(name, PTI_RG_EXTREME_DIM, t, v, idx, r.bits, keepdim, 0);
    if (v && indices)
        *indices = idx;
    else
        pt_release(idx);
    return v;
}

pt_tensor *pt_max_dim(const pt_tensor *t, int64_t dim, bool keepdim, pt_tensor **indices)
{
    return extreme_dim("pt_max_dim", "max_dim", PTI_OP_max_dim, t, dim, keepdim, indices);
}

pt_tensor *pt_min_dim(const pt_tensor *t, int64_t dim, bool keepdim, pt_tensor **indices)
{
    return extreme_dim("pt_min_dim", "min_dim", PTI_OP_min_dim, t, dim, keepdim, indices);
}

static pt_tensor *extreme_dims(const char *op, const char *name, pti_op kop, const pt_tensor *t,
                               int ndims, const int64_t *dims, bool keepdim)
{
    rshape r;
    if (!check_input(op, t) || !reduce_shape(op, t, ndims, dims, keepdim, &r))
        return NULL;
    bool all = ndims == 0 || dims == NULL;
    if (!check_nonempty(op, t, &r, all))
        return NULL;
    pt_tensor *out = run(kop, t, &r, t->dtype, 0, NULL);
    return pti_reduce_record(name, PTI_RG_AMAX, t, out, NULL, r.bits, keepdim, 0);
}

pt_tensor *pt_amax(const pt_tensor *t, int ndims, const int64_t *dims, bool keepdim)
{
    return extreme_dims("pt_amax", "amax", PTI_OP_amax, t, ndims, dims, keepdim);
}

pt_tensor *pt_amin(const pt_tensor *t, int ndims, const int64_t *dims, bool keepdim)
{
    return extreme_dims("pt_amin", "amin", PTI_OP_amin, t, ndims, dims, keepdim);
}

static pt_tensor *arg_dim(const char *op, pti_op kop, const pt_tensor *t, int64_t dim, bool keepdim)
{
    rshape r;
    if (!check_input(op, t) || !reduce_shape_dim(op, t, dim, keepdim, &r) ||
        !check_nonempty(op, t, &r, false))
        return NULL;
    return run(kop, t, &r, PT_INT64, 0, NULL);
}

pt_tensor *pt_argmax(const pt_tensor *t, int64_t dim, bool keepdim)
{
    return arg_dim("pt_argmax", PTI_OP_argmax, t, dim, keepdim);
}

pt_tensor *pt_argmin(const pt_tensor *t, int64_t dim, bool keepdim)
{
    return arg_dim("pt_argmin", PTI_OP_argmin, t, dim, keepdim);
}

/* The kernel numbers reduced elements row-major, which over every dim is the flat index. */
static pt_tensor *arg_all(const char *op, pti_op kop, const pt_tensor *t)
{
    rshape r;
    if (!check_input(op, t) || !reduce_shape(op, t, 0, NULL, false, &r) ||
        !check_nonempty(op, t, &r, true))
        return NULL;
    return run(kop, t, &r, PT_INT64, 0, NULL);
}

pt_tensor *pt_argmax_all(const pt_tensor *t)
{
    return arg_all("pt_argmax_all", PTI_OP_argmax, t);
}

pt_tensor *pt_argmin_all(const pt_tensor *t)
{
    return arg_all("pt_argmin_all", PTI_OP_argmin, t);
}

/* ---- var, std, norm, logsumexp --------------------------------------------------------------- */

static pt_tensor *var_common(const char *op, const char *name, pti_op kop, pti_reduce_grad kind,
                             const pt_tensor *t, int ndims, const int64_t *dims, int64_t correction,
                             bool keepdim)
{
    rshape r;
    if (!check_input(op, t) || !reduce_shape(op, t, ndims, dims, keepdim, &r))
        return NULL;
    if (!pti_dtypes[t->dtype].is_floating)
        return pti_error_null(PT_ERR_DTYPE,
                              "%s: only floating point inputs are supported (as PyTorch's std "
                              "and var), got %s",
                              op, pt_dtype_name(t->dtype));
    pt_tensor *out = run(kop, t, &r, t->dtype, (double)correction, NULL);
    return pti_reduce_record(name, kind, t, out, NULL, r.bits, keepdim, (double)correction);
}

pt_tensor *pt_var(const pt_tensor *t, int ndims, const int64_t *dims, int64_t correction,
                  bool keepdim)
{
    return var_common("pt_var", "var", PTI_OP_var, PTI_RG_VAR, t, ndims, dims, correction, keepdim);
}

pt_tensor *pt_std(const pt_tensor *t, int ndims, const int64_t *dims, int64_t correction,
                  bool keepdim)
{
    return var_common("pt_std", "std", PTI_OP_std, PTI_RG_STD, t, ndims, dims, correction, keepdim);
}

pt_tensor *pt_norm(const pt_tensor *t, double p, int ndims, const int64_t *dims, bool keepdim)
{
    const char *op = "pt_norm";
    rshape r;
    if (!check_input(op, t) || !reduce_shape(op, t, ndims, dims, keepdim, &r) ||
        !check_float(op, t))
        return NULL;
    if (isnan(p))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: p must not be NaN", op);
    pt_tensor *out = run(PTI_OP_norm, t, &r, t->dtype, p, NULL);
    return pti_reduce_record("norm", PTI_RG_NORM, t, out, NULL, r.bits, keepdim, p);
}

pt_tensor *pt_logsumexp(const pt_tensor *t, int ndims, const int64_t *dims, bool keepdim)
{
    const char *op = "pt_logsumexp";
    rshape r;
    if (!check_input(op, t) || !reduce_shape(op, t, ndims, dims, keepdim, &r))
        return NULL;
    pt_dtype dt = pti_dtypes[t->dtype].is_floating ? t->dtype : PT_FLOAT32;
    pt_tensor *out = run(PTI_OP_logsumexp, t, &r, dt, 0, NULL);
    return pti_reduce_record("logsumexp", PTI_RG_LOGSUMEXP, t, out, NULL, r.bits, keepdim, 0);
}

/* ---- all, any -------------------------------------------------------------------------------- */

static pt_tensor *allany(const char *op, pti_op kop, const pt_tensor *t, bool all_dims, int64_t dim,
                         bool keepdim)
{
    rshape r;
    if (!check_input(op, t))
        return NULL;
    bool ok = all_dims ? reduce_shape(op, t, 0, NULL, false, &r)
                       : reduce_shape_dim(op, t, dim, keepdim, &r);
    if (!ok)
        return NULL;
    return run(kop, t, &r, t->dtype == PT_UINT8 ? PT_UINT8 : PT_BOOL, 0, NULL);
}

pt_tensor *pt_all(const pt_tensor *t)
{
    return allany("pt_all", PTI_OP_all, t, true, 0, false);
}

pt_tensor *pt_all_dim(const pt_tensor *t, int64_t dim, bool keepdim)
{
    return allany("pt_all_dim", PTI_OP_all, t, false, dim, keepdim);
}

pt_tensor *pt_any(const pt_tensor *t)
{
    return allany("pt_any", PTI_OP_any, t, true, 0, false);
}

pt_tensor *pt_any_dim(const pt_tensor *t, int64_t dim, bool keepdim)
{
    return allany("pt_any_dim", PTI_OP_any, t, false, dim, keepdim);
}

/* ---- cumsum, cumprod, softmax, log_softmax
 * -------------------------------------------------------- */

static pt_tensor *dim_op(const char *op, const char *name, pti_op kop, pti_reduce_grad kind,
                         const pt_tensor *t, int64_t dim, bool float_only)
{
    int d;
    if (!check_input(op, t) || !pti_wrap_dim(op, dim, t->ndim, &d))
        return NULL;
    if (float_only && !check_float(op, t))
        return NULL;
    pt_dtype dt = float_only ? t->dtype : accum_dtype(t->dtype);
    pt_tensor *out = pti_tensor_new(t->ndim, t->shape, dt, t->storage->device);
    if (!out)
        return NULL;
    pti_call c = {.n_in = 1, .n_out = 1, .in = {t}, .out = {out}, .scalar = {(double)d}};
    if (pti_dispatch(kop, &c) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return pti_reduce_record(name, kind, t, out, NULL, 1u << d, true, 0);
}

pt_tensor *pt_cumsum(const pt_tensor *t, int64_t dim)
{
    return dim_op("pt_cumsum", "cumsum", PTI_OP_cumsum, PTI_RG_CUMSUM, t, dim, false);
}

pt_tensor *pt_cumprod(const pt_tensor *t, int64_t dim)
{
    return dim_op("pt_cumprod", "cumprod", PTI_OP_cumprod, PTI_RG_CUMPROD, t, dim, false);
}

pt_tensor *pt_softmax(const pt_tensor *t, int64_t dim)
{
    return dim_op("pt_softmax", "softmax", PTI_OP_softmax, PTI_RG_SOFTMAX, t, dim, true);
}

pt_tensor *pt_log_softmax(const pt_tensor *t, int64_t dim)
{
    return dim_op("pt_log_softmax", "log_softmax", PTI_OP_log_softmax, PTI_RG_LOG_SOFTMAX, t, dim,
                  true);
}
