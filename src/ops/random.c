/* Front-ends of the random family: rand/randn/randint and their in-place forms, bernoulli,
 * randperm and multinomial. Each checks its arguments, reserves a range of counters from the
 * default Philox generator (element i of the call draws counter base + i, so the numbers do not
 * depend on the thread count) and dispatches to the backend's kernel with the stream in a
 * pti_random_params. Kernels write contiguous outputs; in-place ops on strided tensors fill a
 * contiguous temporary and copy it in. */
#include <math.h>

#include "common.h"
#include "random.h"

/* ---- helpers --------------------------------------------------------------------------------- */

/* Mantissa digits of a floating dtype: integers up to 2^digits are exact. */
static int float_digits(pt_dtype dt)
{
    switch (dt) {
    case PT_FLOAT64: return 53;
    case PT_FLOAT16: return 11;
    case PT_BFLOAT16: return 8;
    default: return 24;
    }
}

/* The integers a dtype holds exactly ([-2^digits, 2^digits] for floats). */
static void dtype_int_range(pt_dtype dt, int64_t *min, int64_t *max)
{
    switch (dt) {
    case PT_INT32:
        *min = INT32_MIN;
        *max = INT32_MAX;
        break;
    case PT_INT16:
        *min = INT16_MIN;
        *max = INT16_MAX;
        break;
    case PT_INT8:
        *min = INT8_MIN;
        *max = INT8_MAX;
        break;
    case PT_UINT8:
        *min = 0;
        *max = UINT8_MAX;
        break;
    case PT_BOOL:
        *min = 0;
        *max = 1;
        break;
    case PT_FLOAT32:
    case PT_FLOAT64:
    case PT_FLOAT16:
    case PT_BFLOAT16:
        *max = INT64_C(1) << float_digits(dt);
        *min = -*max;
        break;
    default:
        *min = INT64_MIN;
        *max = INT64_MAX;
        break;
    }
}

static bool check_dtype(const char *op, pt_dtype dt, bool floating_only)
{
    if (!pti_dtype_valid(dt)) {
        pti_error(PT_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt);
        return false;
    }
    if (pti_dtypes[dt].is_block) {
        pti_error(PT_ERR_DTYPE, "%s: block dtype %s is not supported", op, pt_dtype_name(dt));
        return false;
    }
    if (floating_only && !pti_dtypes[dt].is_floating) {
        pti_error(PT_ERR_DTYPE, "%s: dtype %s is not supported (expected a floating dtype)", op,
                  pt_dtype_name(dt));
        return false;
    }
    return true;
}

/* Reserves `counters` values of the generator into p, then runs op with out = t. */
static pt_status dispatch_random(pti_op op, pt_tensor *t, int n_in, const pt_tensor *in,
                                 pti_random_params *p, uint64_t counters)
{
    pti_rng_stream s = pti_rng_reserve(counters);
    p->key = s.key;
    p->base = s.base;
    pti_call c = {.n_in = n_in, .n_out = 1, .in = {in}, .out = {t}, .params = p};
    return pti_dispatch(op, &c);
}

/* Fills t (any layout) through op: directly when contiguous, else through a temporary. */
static pt_status fill_random(pti_op op, pt_tensor *t, pti_random_params *p)
{
    pti_bump_version(t);
    if (t->numel == 0)
        return PT_OK;
    if (pti_is_contiguous(t))
        return dispatch_random(op, t, 0, NULL, p, (uint64_t)t->numel);
    pt_tensor *tmp = pti_tensor_new(t->ndim, t->shape, t->dtype, t->storage->device);
    if (!tmp)
        return pt_last_status();
    pt_status st = dispatch_random(op, tmp, 0, NULL, p, (uint64_t)t->numel);
    if (st == PT_OK)
        st = pt_copy_(t, tmp);
    pt_release(tmp);
    return st;
}

/* A new tensor filled by op, or NULL. */
static pt_tensor *new_random(const char *name, pti_op op, int ndim, const int64_t *shape,
                             pt_dtype dt, pt_device dev, pti_random_params *p)
{
    if (!pti_check_shape(name, ndim, shape))
        return NULL;
    pt_tensor *t = pti_tensor_new(ndim, shape, dt, dev);
    if (t && fill_random(op, t, p) != PT_OK) {
        pt_release(t);
        return NULL;
    }
    return t;
}

/* ---- uniform and normal ---------------------------------------------------------------------- */

static bool check_uniform_bounds(const char *op, double from, double to)
{
    if (!isfinite(from) || !isfinite(to)) {
        pti_error(PT_ERR_INVALID_ARG, "%s: bounds must be finite, got from=%g to=%g", op, from, to);
        return false;
    }
    if (from > to) {
        pti_error(PT_ERR_INVALID_ARG,
                  "%s: expects to return a [from, to) range, but found from=%g > to=%g", op, from,
                  to);
        return false;
    }
    return true;
}

pt_tensor *pt_rand(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev)
{
    if (!check_dtype("pt_rand", dt, true))
        return NULL;
    pti_random_params p = {.a = 0.0, .b = 1.0};
    return new_random("pt_rand", PTI_OP_uniform, ndim, shape, dt, dev, &p);
}

pt_tensor *pt_randn(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev)
{
    if (!check_dtype("pt_randn", dt, true))
        return NULL;
    pti_random_params p = {.a = 0.0, .b = 1.0};
    return new_random("pt_randn", PTI_OP_normal, ndim, shape, dt, dev, &p);
}

pt_tensor *pt_rand_like(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_rand_like", "t"))
        return NULL;
    return pt_rand(t->ndim, t->shape, t->dtype, t->storage->device);
}

pt_tensor *pt_randn_like(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_randn_like", "t"))
        return NULL;
    return pt_randn(t->ndim, t->shape, t->dtype, t->storage->device);
}

pt_status pt_uniform_(pt_tensor *t, double from, double to)
{
    if (!PTI_CHECK_ARG(t, "pt_uniform_", "t"))
        return pt_last_status();
    if (!check_dtype("pt_uniform_", t->dtype, true) ||
        !check_uniform_bounds("pt_uniform_", from, to))
        return pt_last_status();
    pti_random_params p = {.a = from, .b = to};
    return fill_random(PTI_OP_uniform, t, &p);
}

pt_status pt_normal_(pt_tensor *t, double mean, double std)
{
    if (!PTI_CHECK_ARG(t, "pt_normal_", "t"))
        return pt_last_status();
    if (!check_dtype("pt_normal_", t->dtype, true))
        return pt_last_status();
    if (!(std >= 0.0) || !isfinite(mean) || isinf(std))
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_normal_: expects a finite mean and std >= 0.0, but found mean=%g "
                         "std=%g",
                         mean, std);
    pti_random_params p = {.a = mean, .b = std};
    return fill_random(PTI_OP_normal, t, &p);
}

/* ---- integers -------------------------------------------------------------------------------- */

static bool check_int_bounds(const char *op, int64_t lo, int64_t hi, pt_dtype dt)
{
    if (lo >= hi) {
        pti_error(PT_ERR_INVALID_ARG,
                  "%s: expects 'from' to be less than 'to', but got from=%lld >= to=%lld", op,
                  (long long)lo, (long long)hi);
        return false;
    }
    int64_t min, max;
    dtype_int_range(dt, &min, &max);
    if (lo < min || lo > max) {
        pti_error(PT_ERR_INVALID_ARG, "%s: from=%lld is out of bounds for %s", op, (long long)lo,
                  pt_dtype_name(dt));
        return false;
    }
    if (hi - 1 < min || hi - 1 > max) {
        pti_error(PT_ERR_INVALID_ARG, "%s: to - 1 = %lld is out of bounds for %s", op,
                  (long long)(hi - 1), pt_dtype_name(dt));
        return false;
    }
    return true;
}

pt_tensor *pt_randint(int64_t lo, int64_t hi, int ndim, const int64_t *shape, pt_dtype dt,
                      pt_device dev)
{
    if (!check_dtype("pt_randint", dt, false) || !check_int_bounds("pt_randint", lo, hi, dt))
        return NULL;
    pti_random_params p = {.lo = lo, .hi = hi};
    return new_random("pt_randint", PTI_OP_randint, ndim, shape, dt, dev, &p);
}

pt_status pt_random_(pt_tensor *t, int64_t from, int64_t to)
{
    if (!PTI_CHECK_ARG(t, "pt_random_", "t"))
        return pt_last_status();
    if (!check_dtype("pt_random_", t->dtype, false) ||
        !check_int_bounds("pt_random_", from, to, t->dtype))
        return pt_last_status();
    pti_random_params p = {.lo = from, .hi = to};
    return fill_random(PTI_OP_randint, t, &p);
}

/* ---- bernoulli ------------------------------------------------------------------------------- */

static bool check_probability(const char *op, double p)
{
    if (!(p >= 0.0 && p <= 1.0)) {
        pti_error(PT_ERR_INVALID_ARG, "%s: expects p to be in [0, 1], but got p=%g", op, p);
        return false;
    }
    return true;
}

pt_tensor *pt_bernoulli(const pt_tensor *p)
{
    if (!PTI_CHECK_ARG(p, "pt_bernoulli", "p"))
        return NULL;
    if (!pti_check_floating("pt_bernoulli", "p", p))
        return NULL;
    pt_tensor *pc = pt_contiguous(p);
    pt_tensor *out = pc ? pti_tensor_new(p->ndim, p->shape, p->dtype, p->storage->device) : NULL;
    if (out && out->numel > 0) {
        pti_random_params params = {0};
        if (dispatch_random(PTI_OP_bernoulli, out, 1, pc, &params, (uint64_t)out->numel) != PT_OK) {
            pt_release(out);
            out = NULL;
        }
    }
    pt_release(pc);
    return out;
}

pt_status pt_bernoulli_(pt_tensor *t, double p)
{
    if (!PTI_CHECK_ARG(t, "pt_bernoulli_", "t"))
        return pt_last_status();
    if (!check_dtype("pt_bernoulli_", t->dtype, false) || !check_probability("pt_bernoulli_", p))
        return pt_last_status();
    pti_random_params params = {.a = p};
    return fill_random(PTI_OP_bernoulli, t, &params);
}

pt_tensor *pt_bernoulli_scalar(const pt_tensor *t, double p)
{
    if (!PTI_CHECK_ARG(t, "pt_bernoulli_scalar", "t"))
        return NULL;
    if (!check_dtype("pt_bernoulli_scalar", t->dtype, false) ||
        !check_probability("pt_bernoulli_scalar", p))
        return NULL;
    pti_random_params params = {.a = p};
    return new_random("pt_bernoulli_scalar", PTI_OP_bernoulli, t->ndim, t->shape, t->dtype,
                      t->storage->device, &params);
}

/* ---- randperm -------------------------------------------------------------------------------- */

pt_tensor *pt_randperm(int64_t n, pt_dtype dt, pt_device dev)
{
    if (!check_dtype("pt_randperm", dt, false))
        return NULL;
    if (dt == PT_BOOL)
        return pti_error_null(PT_ERR_DTYPE, "pt_randperm: dtype bool is not supported");
    if (n < 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_randperm: n must be non-negative, got %lld",
                              (long long)n);
    int64_t min, max;
    dtype_int_range(dt, &min, &max);
    if (n > 0 && n - 1 > max)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_randperm: n=%lld is too large for dtype %s (largest value %lld)",
                              (long long)n, pt_dtype_name(dt), (long long)max);
    pti_random_params p = {0};
    return new_random("pt_randperm", PTI_OP_randperm, 1, &n, dt, dev, &p);
}

/* ---- multinomial ----------------------------------------------------------------------------- */

pt_tensor *pt_multinomial(const pt_tensor *probs, int64_t num_samples, bool replacement)
{
    const char *op = "pt_multinomial";
    if (!PTI_CHECK_ARG(probs, op, "probs"))
        return NULL;
    if (probs->ndim != 1 && probs->ndim != 2)
        return pti_error_null(PT_ERR_SHAPE, "%s: probs must be 1 or 2 dim, got shape %s", op,
                              pti_shape_str(probs->ndim, probs->shape));
    if (!pti_dtypes[probs->dtype].is_floating)
        return pti_error_null(PT_ERR_DTYPE,
                              "%s: only supports floating-point dtypes for probs, got %s", op,
                              pt_dtype_name(probs->dtype));
    int64_t rows = probs->ndim == 2 ? probs->shape[0] : 1;
    int64_t n = probs->shape[probs->ndim - 1];
    if (num_samples <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: cannot sample num_samples=%lld <= 0 samples",
                              op, (long long)num_samples);
    if (!replacement && num_samples > n)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: cannot sample num_samples=%lld > probs.size(-1)=%lld samples "
                              "without replacement",
                              op, (long long)num_samples, (long long)n);
    if (n > (INT64_C(1) << 24))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: number of categories cannot exceed 2^24, got %lld", op,
                              (long long)n);
    if (n == 0 && rows > 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: invalid multinomial distribution (no categories)", op);
    int64_t out_shape[2] = {rows, num_samples};
    if (probs->ndim == 1)
        out_shape[0] = num_samples;
    if (!pti_check_shape(op, probs->ndim, out_shape))
        return NULL;
    pt_tensor *out = pti_tensor_new(probs->ndim, out_shape, PT_INT64, probs->storage->device);
    if (!out || rows == 0)
        return out;
    pt_tensor *pc = pt_contiguous(probs);
    const int64_t mat[2] = {rows, n};
    pt_tensor *p2 = pc ? pti_tensor_view(pc, 2, mat, (const int64_t[]){n, 1}, pc->offset) : NULL;
    pti_random_params p = {.lo = num_samples, .replacement = replacement};
    uint64_t counters = (uint64_t)rows * (uint64_t)(replacement ? num_samples : n);
    if (!p2 || dispatch_random(PTI_OP_multinomial, out, 1, p2, &p, counters) != PT_OK) {
        pt_release(out);
        out = NULL;
    }
    pt_release(p2);
    pt_release(pc);
    return out;
}
