/* nn.init: in-place weight initializers (torch.nn.init), all under no-grad and drawing from the
 * library generator so pt_manual_seed reproduces them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "prometorch/autograd.h"
#include "prometorch/nn_init.h"
#include "prometorch/ops_elementwise.h"
#include "prometorch/ops_random.h"

double pt_nn_init_calculate_gain(const char *nl, double param)
{
    static const char *const unit[] = {"linear",           "conv1d",           "conv2d",
                                       "conv3d",           "conv_transpose1d", "conv_transpose2d",
                                       "conv_transpose3d", "sigmoid"};
    if (!nl) {
        pti_error(PT_ERR_NULL, "pt_nn_init_calculate_gain: nonlinearity is NULL");
        return NAN;
    }
    for (size_t i = 0; i < sizeof(unit) / sizeof(unit[0]); i++)
        if (strcmp(nl, unit[i]) == 0)
            return 1.0;
    if (strcmp(nl, "tanh") == 0)
        return 5.0 / 3.0;
    if (strcmp(nl, "relu") == 0)
        return sqrt(2.0);
    if (strcmp(nl, "leaky_relu") == 0)
        return sqrt(2.0 / (1.0 + param * param));
    if (strcmp(nl, "selu") == 0)
        return 3.0 / 4.0;
    pti_error(PT_ERR_INVALID_ARG, "pt_nn_init_calculate_gain: unsupported nonlinearity '%s'", nl);
    return NAN;
}

pt_status pt_nn_init_calculate_fan(const pt_tensor *t, int64_t *fan_in, int64_t *fan_out)
{
    if (!PTI_CHECK_ARG(t, "pt_nn_init_calculate_fan", "t"))
        return PT_ERR_NULL;
    if (t->ndim < 2)
        return pti_error(PT_ERR_SHAPE,
                         "pt_nn_init: fan in and fan out can not be computed for a tensor with "
                         "fewer than 2 dimensions (got %d)",
                         t->ndim);
    int64_t rf = 1;
    for (int d = 2; d < t->ndim; d++)
        rf *= t->shape[d];
    if (fan_in)
        *fan_in = t->shape[1] * rf;
    if (fan_out)
        *fan_out = t->shape[0] * rf;
    return PT_OK;
}

static pt_status check_float(const pt_tensor *t, const char *op)
{
    if (!PTI_CHECK_ARG(t, op, "t"))
        return PT_ERR_NULL;
    if (!pt_dtype_is_floating(t->dtype))
        return pti_error(PT_ERR_DTYPE, "%s: expected a floating-point tensor, got %s", op,
                         pt_dtype_name(t->dtype));
    return PT_OK;
}

pt_status pt_nn_init_uniform_(pt_tensor *t, double a, double b)
{
    pt_status st = check_float(t, "pt_nn_init_uniform_");
    if (st != PT_OK)
        return st;
    if (!(a <= b))
        return pti_error(PT_ERR_INVALID_ARG, "pt_nn_init_uniform_: expected a <= b, got %g > %g", a,
                         b);
    pt_no_grad_begin();
    st = pt_uniform_(t, a, b);
    pt_no_grad_end();
    return st;
}

pt_status pt_nn_init_normal_(pt_tensor *t, double mean, double std)
{
    pt_status st = check_float(t, "pt_nn_init_normal_");
    if (st != PT_OK)
        return st;
    if (!(std >= 0))
        return pti_error(PT_ERR_INVALID_ARG, "pt_nn_init_normal_: std must be >= 0, got %g", std);
    pt_no_grad_begin();
    st = pt_normal_(t, mean, std);
    pt_no_grad_end();
    return st;
}

pt_status pt_nn_init_constant_(pt_tensor *t, double v)
{
    if (!PTI_CHECK_ARG(t, "pt_nn_init_constant_", "t"))
        return PT_ERR_NULL;
    pt_no_grad_begin();
    pt_status st = pt_fill_(t, v);
    pt_no_grad_end();
    return st;
}

pt_status pt_nn_init_zeros_(pt_tensor *t)
{
    return pt_nn_init_constant_(t, 0.0);
}
pt_status pt_nn_init_ones_(pt_tensor *t)
{
    return pt_nn_init_constant_(t, 1.0);
}

pt_status pt_nn_init_eye_(pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_nn_init_eye_", "t"))
        return PT_ERR_NULL;
    if (t->ndim != 2)
        return pti_error(PT_ERR_SHAPE,
                         "pt_nn_init_eye_: only 2-D tensors are supported, got %d "
                         "dims",
                         t->ndim);
    pt_tensor *e = pt_eye(t->shape[0], t->shape[1], t->dtype, pt_device_of(t));
    if (!e)
        return pt_last_status();
    pt_no_grad_begin();
    pt_status st = pt_copy_(t, e);
    pt_no_grad_end();
    pt_release(e);
    return st;
}

static bool has_zero_dim(const pt_tensor *t)
{
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] == 0)
            return true;
    return false;
}

/* fan_in + fan_out of a floating tensor, for the xavier_* inits (`op` names the caller). */
static pt_status xavier_fan_sum(const pt_tensor *t, const char *op, double *fan_sum)
{
    int64_t fi, fo;
    pt_status st = check_float(t, op);
    if (st == PT_OK)
        st = pt_nn_init_calculate_fan(t, &fi, &fo);
    if (st == PT_OK)
        *fan_sum = (double)(fi + fo);
    return st;
}

pt_status pt_nn_init_xavier_uniform_(pt_tensor *t, double gain)
{
    double fans;
    pt_status st = xavier_fan_sum(t, "pt_nn_init_xavier_uniform_", &fans);
    if (st != PT_OK)
        return st;
    double a = gain * sqrt(6.0 / fans);
    return pt_nn_init_uniform_(t, -a, a);
}

pt_status pt_nn_init_xavier_normal_(pt_tensor *t, double gain)
{
    double fans;
    pt_status st = xavier_fan_sum(t, "pt_nn_init_xavier_normal_", &fans);
    if (st != PT_OK)
        return st;
    return pt_nn_init_normal_(t, 0.0, gain * sqrt(2.0 / fans));
}

/* std = gain / sqrt(fan) of kaiming_*; *skip when the tensor has a zero-size dim. */
static pt_status kaiming_std(pt_tensor *t, double a, pt_fan_mode mode, const char *nl,
                             const char *op, double *std, bool *skip)
{
    pt_status st = check_float(t, op);
    if (st != PT_OK)
        return st;
    *skip = has_zero_dim(t);
    if (*skip)
        return PT_OK;
    if (mode != PT_FAN_IN && mode != PT_FAN_OUT)
        return pti_error(PT_ERR_INVALID_ARG, "%s: mode %d is not fan_in or fan_out", op, (int)mode);
    int64_t fi, fo;
    st = pt_nn_init_calculate_fan(t, &fi, &fo);
    if (st != PT_OK)
        return st;
    double gain = pt_nn_init_calculate_gain(nl ? nl : "leaky_relu", a);
    if (isnan(gain))
        return pt_last_status();
    *std = gain / sqrt((double)(mode == PT_FAN_IN ? fi : fo));
    return PT_OK;
}

pt_status pt_nn_init_kaiming_uniform_(pt_tensor *t, double a, pt_fan_mode mode, const char *nl)
{
    double std = 0;
    bool skip = false;
    pt_status st = kaiming_std(t, a, mode, nl, "pt_nn_init_kaiming_uniform_", &std, &skip);
    if (st != PT_OK || skip)
        return st;
    double bound = sqrt(3.0) * std;
    return pt_nn_init_uniform_(t, -bound, bound);
}

pt_status pt_nn_init_kaiming_normal_(pt_tensor *t, double a, pt_fan_mode mode, const char *nl)
{
    double std = 0;
    bool skip = false;
    pt_status st = kaiming_std(t, a, mode, nl, "pt_nn_init_kaiming_normal_", &std, &skip);
    if (st != PT_OK || skip)
        return st;
    return pt_nn_init_normal_(t, 0.0, std);
}

/* ---- trunc_normal_ --------------------------------------------------------------------------- */

static double norm_cdf(double x)
{
    return 0.5 * (1.0 + erf(x / sqrt(2.0)));
}

/* Inverse of the standard normal CDF for p in (0, 1): a bisection start refined by Newton
 * steps on norm_cdf (double precision is plenty for float weights). */
static double norm_icdf(double p)
{
    double lo = -40.0, hi = 40.0;
    for (int i = 0; i < 60; i++) {
        double mid = 0.5 * (lo + hi);
        if (norm_cdf(mid) < p)
            lo = mid;
        else
            hi = mid;
    }
    double x = 0.5 * (lo + hi);
    for (int i = 0; i < 3; i++) {
        double pdf = exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
        if (pdf < 1e-300)
            break;
        x -= (norm_cdf(x) - p) / pdf;
    }
    return x;
}

/* Fills t from host doubles (converted to t's dtype and device) under no-grad. */
static pt_status copy_from_host(pt_tensor *t, const double *v)
{
    pt_tensor *src = pt_from_data(v, t->ndim, t->shape, PT_FLOAT64, pt_cpu());
    if (!src)
        return pt_last_status();
    pt_no_grad_begin();
    pt_status st = pt_copy_(t, src);
    pt_no_grad_end();
    pt_release(src);
    return st;
}

/* n uniform doubles in [0, 1) from the library generator (host array, caller frees). */
static double *host_uniform(int64_t n)
{
    int64_t shape[1] = {n};
    pt_tensor *u = pt_rand(1, shape, PT_FLOAT64, pt_cpu());
    if (!u)
        return NULL;
    double *v = pti_malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!v) {
        pt_release(u);
        return pti_error_null(PT_ERR_OOM, "pt_nn_init: out of memory for %lld values",
                              (long long)n);
    }
    pt_status st = pt_copy_to_host(u, v, (size_t)n * sizeof(double));
    pt_release(u);
    if (st != PT_OK) {
        free(v);
        return NULL;
    }
    return v;
}

pt_status pt_nn_init_trunc_normal_(pt_tensor *t, double mean, double std, double a, double b)
{
    pt_status st = check_float(t, "pt_nn_init_trunc_normal_");
    if (st != PT_OK)
        return st;
    if (!(std > 0) || !(a < b))
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_nn_init_trunc_normal_: need std > 0 and a < b "
                         "(got std=%g, a=%g, b=%g)",
                         std, a, b);
    int64_t n = pt_numel(t);
    double *v = host_uniform(n);
    if (!v)
        return pt_last_status();
    double l = norm_cdf((a - mean) / std), u = norm_cdf((b - mean) / std);
    for (int64_t i = 0; i < n; i++) {
        double p = l + (u - l) * v[i];
        double x = p <= 0 ? (a - mean) / std : p >= 1 ? (b - mean) / std : norm_icdf(p);
        x = mean + std * x;
        v[i] = x < a ? a : x > b ? b : x;
    }
    st = copy_from_host(t, v);
    free(v);
    return st;
}

/* ---- orthogonal_ ----------------------------------------------------------------------------- */

/* Orthonormalizes the r rows (length c, r <= c) of a in place by modified Gram-Schmidt, run
 * twice for stability. Returns false when a row is (numerically) dependent. Gram-Schmidt's Q
 * is the QR factor whose R has a positive diagonal, which is what PyTorch's sign fix gives. */
static bool gram_schmidt_rows(double *a, int64_t r, int64_t c)
{
    for (int64_t i = 0; i < r; i++) {
        double *ri = a + i * c;
        for (int pass = 0; pass < 2; pass++)
            for (int64_t j = 0; j < i; j++) {
                const double *rj = a + j * c;
                double dot = 0;
                for (int64_t k = 0; k < c; k++)
                    dot += ri[k] * rj[k];
                for (int64_t k = 0; k < c; k++)
                    ri[k] -= dot * rj[k];
            }
        double nrm = 0;
        for (int64_t k = 0; k < c; k++)
            nrm += ri[k] * ri[k];
        nrm = sqrt(nrm);
        if (!(nrm > 1e-300))
            return false;
        for (int64_t k = 0; k < c; k++)
            ri[k] /= nrm;
    }
    return true;
}

pt_status pt_nn_init_orthogonal_(pt_tensor *t, double gain)
{
    pt_status st = check_float(t, "pt_nn_init_orthogonal_");
    if (st != PT_OK)
        return st;
    if (t->ndim < 2)
        return pti_error(PT_ERR_SHAPE,
                         "pt_nn_init_orthogonal_: only tensors with 2 or more "
                         "dimensions are supported, got %d",
                         t->ndim);
    int64_t n = pt_numel(t);
    if (n == 0)
        return PT_OK;
    int64_t rows = t->shape[0], cols = n / rows;
    /* Orthonormalize the shorter side: rows of a [k, m] matrix with k = min(rows, cols). */
    int64_t k = rows < cols ? rows : cols, m = rows < cols ? cols : rows;
    int64_t shape[1] = {n};
    pt_tensor *g = pt_randn(1, shape, PT_FLOAT64, pt_cpu());
    if (!g)
        return pt_last_status();
    double *a = pti_malloc((size_t)n * sizeof(double)),
           *out = pti_malloc((size_t)n * sizeof(double));
    st = (a && out) ? pt_copy_to_host(g, a, (size_t)n * sizeof(double))
                    : pti_error(PT_ERR_OOM, "pt_nn_init_orthogonal_: out of memory");
    pt_release(g);
    if (st == PT_OK && !gram_schmidt_rows(a, k, m))
        st = pti_error(PT_ERR_RUNTIME, "pt_nn_init_orthogonal_: degenerate random matrix");
    if (st == PT_OK) {
        /* a holds k orthonormal rows of length m; when rows >= cols, t = a^T. */
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                out[i * cols + j] = gain * (rows < cols ? a[i * cols + j] : a[j * rows + i]);
        st = copy_from_host(t, out);
    }
    free(a);
    free(out);
    return st;
}
