/* Random-op tests. The streams differ from PyTorch's (another generator), so these check
 * properties: the same seed gives identical tensors for 1, 2 or 3 threads, different seeds and
 * successive calls differ, values stay in range, moments of 1M samples sit within 5 standard
 * errors of the distribution's (the CLT bound stated at each check), integer and permutation
 * frequencies pass chi-square bounds, multinomial without replacement gives distinct indices,
 * and bad arguments give errors. Shapes and dtypes of results follow PyTorch's (fixture). */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

#define N_SAMPLES 1000000

/* Values of any tensor as a malloc'd double array (row-major). */
static double *values(const pt_tensor *t)
{
    pt_tensor *d = pt_to_dtype(t, PT_FLOAT64);
    assert_non_null(d);
    size_t n = (size_t)pt_numel(t);
    double *v = malloc((n ? n : 1) * sizeof(double));
    assert_non_null(v);
    assert_int_equal(pt_copy_to_host(d, v, n * sizeof(double)), PT_OK);
    pt_release(d);
    return v;
}

typedef struct moments {
    double mean, var, m4; /* m4: fourth central moment */
    double min, max;
} moments;

static moments moments_of(const pt_tensor *t)
{
    double *v = values(t);
    int64_t n = pt_numel(t);
    moments m = {0, 0, 0, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++) {
        m.mean += v[i];
        m.min = fmin(m.min, v[i]);
        m.max = fmax(m.max, v[i]);
    }
    m.mean /= (double)n;
    for (int64_t i = 0; i < n; i++) {
        double d = v[i] - m.mean;
        m.var += d * d;
        m.m4 += d * d * d * d;
    }
    m.var /= (double)n;
    m.m4 /= (double)n;
    free(v);
    return m;
}

/* Tensors equal in shape, dtype and every byte. */
static bool same_tensor(const pt_tensor *a, const pt_tensor *b)
{
    if (!a || !b || pt_dtype_of(a) != pt_dtype_of(b) || pt_ndim(a) != pt_ndim(b) ||
        pt_numel(a) != pt_numel(b))
        return false;
    if (memcmp(pt_shape(a), pt_shape(b), (size_t)pt_ndim(a) * sizeof(int64_t)) != 0)
        return false;
    size_t n = (size_t)pt_numel(a) * pt_dtype_size(pt_dtype_of(a));
    char *x = malloc(n + 1), *y = malloc(n + 1);
    assert_int_equal(pt_copy_to_host(a, x, n), PT_OK);
    assert_int_equal(pt_copy_to_host(b, y, n), PT_OK);
    bool eq = memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return eq;
}

/* Fails unless |x - expected| <= bound. */
static void assert_near(double x, double expected, double bound, const char *what)
{
    if (!(fabs(x - expected) <= bound)) {
        print_error("%s: %.8g differs from %.8g by more than %.3g\n", what, x, expected, bound);
        fail();
    }
}

/* Pearson's statistic of observed counts against expected probabilities (k categories). */
static double chi_square(const int64_t *counts, const double *p, int k, int64_t n)
{
    double x2 = 0.0;
    for (int i = 0; i < k; i++) {
        if (p[i] == 0.0) {
            assert_int_equal(counts[i], 0);
            continue;
        }
        double e = p[i] * (double)n;
        x2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    return x2;
}

/* ---- every op, one way of calling it
 * ------------------------------------------------------------- */

typedef pt_tensor *(*maker)(int64_t n);

static pt_tensor *make_rand_f32(int64_t n)
{
    return pt_rand(1, &n, PT_FLOAT32, pt_cpu());
}
static pt_tensor *make_rand_f64(int64_t n)
{
    return pt_rand(1, &n, PT_FLOAT64, pt_cpu());
}
static pt_tensor *make_rand_f16(int64_t n)
{
    return pt_rand(1, &n, PT_FLOAT16, pt_cpu());
}
static pt_tensor *make_rand_bf16(int64_t n)
{
    return pt_rand(1, &n, PT_BFLOAT16, pt_cpu());
}
static pt_tensor *make_randn_f32(int64_t n)
{
    return pt_randn(1, &n, PT_FLOAT32, pt_cpu());
}
static pt_tensor *make_randn_f64(int64_t n)
{
    return pt_randn(1, &n, PT_FLOAT64, pt_cpu());
}
static pt_tensor *make_randint(int64_t n)
{
    return pt_randint(-5, 1000, 1, &n, PT_INT64, pt_cpu());
}
static pt_tensor *make_randint_wide(int64_t n)
{
    return pt_randint(INT64_MIN, INT64_MAX, 1, &n, PT_INT64, pt_cpu());
}
static pt_tensor *make_bernoulli(int64_t n)
{
    pt_tensor *like = pt_empty(1, &n, PT_FLOAT32, pt_cpu());
    pt_tensor *r = pt_bernoulli_scalar(like, 0.3);
    pt_release(like);
    return r;
}
static pt_tensor *make_bernoulli_tensor(int64_t n)
{
    pt_tensor *p = pt_rand(1, &n, PT_FLOAT64, pt_cpu());
    pt_tensor *r = pt_bernoulli(p);
    pt_release(p);
    return r;
}
static pt_tensor *make_normal_strided(int64_t n)
{
    /* every other element of a [n, 2] buffer */
    pt_tensor *base = pt_zeros(PT_SHAPE(n, 2), PT_FLOAT32, pt_cpu());
    pt_tensor *col = pt_as_strided(base, 1, &n, (const int64_t[]){2}, 1);
    assert_int_equal(pt_normal_(col, 1.0, 3.0), PT_OK);
    pt_release(col);
    return base;
}
static pt_tensor *make_randperm(int64_t n)
{
    return pt_randperm(n, PT_INT64, pt_cpu());
}
static pt_tensor *make_multinomial(int64_t n)
{
    pt_tensor *p = pt_rand(PT_SHAPE(4, 50), PT_FLOAT32, pt_cpu());
    pt_tensor *r = pt_multinomial(p, n / 4, true);
    pt_release(p);
    return r;
}
static pt_tensor *make_multinomial_norepl(int64_t n)
{
    pt_tensor *p = pt_rand(PT_SHAPE(n / 64, 64), PT_FLOAT64, pt_cpu());
    pt_tensor *r = pt_multinomial(p, 20, false);
    pt_release(p);
    return r;
}

static const struct {
    const char *name;
    maker make;
} makers[] = {
    {"rand f32", make_rand_f32},
    {"rand f64", make_rand_f64},
    {"rand f16", make_rand_f16},
    {"rand bf16", make_rand_bf16},
    {"randn f32", make_randn_f32},
    {"randn f64", make_randn_f64},
    {"randint", make_randint},
    {"randint wide", make_randint_wide},
    {"bernoulli", make_bernoulli},
    {"bernoulli p", make_bernoulli_tensor},
    {"normal_ strided", make_normal_strided},
    {"randperm", make_randperm},
    {"multinomial", make_multinomial},
    {"multinomial no repl", make_multinomial_norepl},
};
#define N_MAKERS (sizeof makers / sizeof makers[0])

static void test_same_seed_same_tensors_other_seed_differs(void **state)
{
    (void)state;
    for (size_t m = 0; m < N_MAKERS; m++) {
        pt_manual_seed(1234);
        pt_tensor *a = makers[m].make(4096);
        pt_tensor *a2 = makers[m].make(4096); /* the generator moved on */
        pt_manual_seed(1234);
        pt_tensor *b = makers[m].make(4096);
        pt_manual_seed(1235);
        pt_tensor *c = makers[m].make(4096);
        assert_non_null(a);
        if (!same_tensor(a, b)) {
            print_error("%s: same seed gave different tensors\n", makers[m].name);
            fail();
        }
        if (same_tensor(a, c) || same_tensor(a, a2)) {
            print_error("%s: another seed or a later call repeated the tensor\n", makers[m].name);
            fail();
        }
        assert_int_equal(pt_initial_seed(), 1235);
        pt_release(a);
        pt_release(a2);
        pt_release(b);
        pt_release(c);
    }
}

static void test_streams_do_not_depend_on_thread_count(void **state)
{
    (void)state;
    int saved = pt_get_num_threads();
    const int64_t n = 300000; /* many kernel chunks per thread */
    for (size_t m = 0; m < N_MAKERS; m++) {
        pt_tensor *ref = NULL;
        for (int threads = 1; threads <= 3; threads++) {
            pt_set_num_threads(threads);
            pt_manual_seed(99);
            pt_tensor *t = makers[m].make(n);
            assert_non_null(t);
            if (!ref) {
                ref = t;
                continue;
            }
            if (!same_tensor(ref, t)) {
                print_error("%s: %d threads gave another tensor than 1 thread\n", makers[m].name,
                            threads);
                fail();
            }
            pt_release(t);
        }
        pt_release(ref);
    }
    pt_set_num_threads(saved);
}

/* ---- uniform
 * ----------------------------------------------------------------------------------------- */

static void test_rand_range_and_moments(void **state)
{
    (void)state;
    pt_manual_seed(7);
    /* U[0,1): mean 1/2, variance 1/12. Standard errors over 1M samples: mean
     * sqrt(1/12)/1000 = 2.9e-4, variance sqrt(1/80 - 1/144)/1000 = 7.5e-5; bounds are 5 SE. */
    const pt_dtype dts[] = {PT_FLOAT32, PT_FLOAT64};
    for (int k = 0; k < 2; k++) {
        pt_tensor *t = pt_rand(PT_SHAPE(1000, 1000), dts[k], pt_cpu());
        assert_shape(t, 1000, 1000);
        assert_int_equal(pt_dtype_of(t), dts[k]);
        moments m = moments_of(t);
        assert_true(m.min >= 0.0 && m.max < 1.0);
        assert_true(m.min < 1e-4 && m.max > 1.0 - 1e-4);
        assert_near(m.mean, 0.5, 1.5e-3, "rand mean");
        assert_near(m.var, 1.0 / 12.0, 3.8e-4, "rand variance");
        pt_release(t);
    }
    /* float16 / bfloat16 draw k / 2^digits exactly (digits 11 / 8), so 1.0 is never reached;
     * their mean is (1 - 2^-digits) / 2. */
    const struct {
        pt_dtype dt;
        int digits;
    } low[] = {{PT_FLOAT16, 11}, {PT_BFLOAT16, 8}};
    for (int k = 0; k < 2; k++) {
        pt_tensor *t = pt_rand(PT_SHAPE(N_SAMPLES), low[k].dt, pt_cpu());
        moments m = moments_of(t);
        assert_true(m.min >= 0.0 && m.max < 1.0);
        assert_near(m.max, 1.0 - ldexp(1.0, -low[k].digits), 0.0, "low-precision rand max");
        assert_near(m.mean, (1.0 - ldexp(1.0, -low[k].digits)) / 2.0, 1.5e-3, "low rand mean");
        pt_release(t);
    }
}

static void test_uniform_inplace_strided(void **state)
{
    (void)state;
    pt_manual_seed(8);
    /* U[-2, 5): mean 1.5, sd 7/sqrt(12) = 2.02; 5 SE of the mean over 1M: 0.0101; variance
     * 49/12 with SE 49 * 7.5e-5 = 3.7e-3, bound 0.0185 */
    pt_tensor *base = pt_full(PT_SHAPE(1000, 2000), -9.0, PT_FLOAT64, pt_cpu());
    pt_tensor *view = pt_as_strided(base, PT_SHAPE(1000, 1000), (const int64_t[]){2000, 2}, 0);
    assert_int_equal(pt_uniform_(view, -2.0, 5.0), PT_OK);
    moments m = moments_of(view);
    assert_true(m.min >= -2.0 && m.max < 5.0);
    assert_near(m.mean, 1.5, 0.0101, "uniform_ mean");
    assert_near(m.var, 49.0 / 12.0, 0.0185, "uniform_ variance");
    double *v = values(base);
    for (int64_t i = 1; i < 2000000; i += 2)
        if (v[i] != -9.0)
            fail_msg("uniform_ wrote outside the view at %lld", (long long)i);
    free(v);
    /* from == to gives that value; float32 values stay below `to` */
    pt_tensor *f = pt_empty(PT_SHAPE(1000), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_uniform_(f, 3.0, 3.0), PT_OK);
    moments mf = moments_of(f);
    assert_true(mf.min == 3.0 && mf.max == 3.0);
    assert_int_equal(pt_uniform_(f, 1.0, 1.0000001), PT_OK);
    mf = moments_of(f);
    assert_true(mf.min >= 1.0 && mf.max < 1.0000001);
    pt_tensor *h = pt_empty(PT_SHAPE(1000), PT_FLOAT16, pt_cpu());
    assert_int_equal(pt_uniform_(h, -1.0, 1.0), PT_OK);
    mf = moments_of(h);
    assert_true(mf.min >= -1.0 && mf.max < 1.0);
    pt_release(base);
    pt_release(view);
    pt_release(f);
    pt_release(h);
}

/* ---- normal
 * -------------------------------------------------------------------------------------------- */

static void test_randn_moments(void **state)
{
    (void)state;
    pt_manual_seed(9);
    /* N(0,1) over 1M: SE of the mean 1e-3, of the variance sqrt(2)/1000, of the 4th moment
     * sqrt(96)/1000 (E z^8 - 9 = 96); of P(|z| < 1) = 0.6827, sqrt(.6827 * .3173)/1000.
     * Bounds are 5 SE. */
    const pt_dtype dts[] = {PT_FLOAT32, PT_FLOAT64};
    for (int k = 0; k < 2; k++) {
        pt_tensor *t = pt_randn(PT_SHAPE(N_SAMPLES), dts[k], pt_cpu());
        moments m = moments_of(t);
        assert_near(m.mean, 0.0, 5e-3, "randn mean");
        assert_near(m.var, 1.0, 7.1e-3, "randn variance");
        assert_near(m.m4, 3.0, 0.049, "randn 4th moment");
        assert_true(m.max > 4.0 && m.min < -4.0); /* tails reach beyond 4 sd */
        double *v = values(t);
        int64_t within = 0;
        for (int64_t i = 0; i < N_SAMPLES; i++)
            within += fabs(v[i]) < 1.0;
        free(v);
        assert_near((double)within / N_SAMPLES, 0.682689, 2.33e-3, "randn P(|z|<1)");
        pt_release(t);
    }
    /* float16 / bfloat16 are computed in float and rounded: same moments at their precision */
    pt_tensor *h = pt_randn(PT_SHAPE(N_SAMPLES), PT_FLOAT16, pt_cpu());
    moments mh = moments_of(h);
    assert_near(mh.mean, 0.0, 5e-3, "randn f16 mean");
    assert_near(mh.var, 1.0, 1e-2, "randn f16 variance");
    pt_release(h);
    pt_tensor *like = pt_randn_like(h = pt_zeros(PT_SHAPE(2, 3), PT_BFLOAT16, pt_cpu()));
    assert_shape(like, 2, 3);
    assert_int_equal(pt_dtype_of(like), PT_BFLOAT16);
}

static void test_normal_inplace_mean_std(void **state)
{
    (void)state;
    pt_manual_seed(10);
    /* N(3, 2^2): 5 SE of the mean 2 * 5e-3 = 0.01; of the variance 4 * 7.1e-3 = 0.0283 */
    pt_tensor *t = pt_empty(PT_SHAPE(N_SAMPLES), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_normal_(t, 3.0, 2.0), PT_OK);
    moments m = moments_of(t);
    assert_near(m.mean, 3.0, 0.01, "normal_ mean");
    assert_near(m.var, 4.0, 0.0283, "normal_ variance");
    /* std 0 gives the mean exactly; the strided helper leaves the other column alone */
    assert_int_equal(pt_normal_(t, -1.5, 0.0), PT_OK);
    m = moments_of(t);
    assert_true(m.min == -1.5 && m.max == -1.5);
    pt_tensor *base = make_normal_strided(1000);
    double *v = values(base);
    for (int i = 0; i < 2000; i += 2)
        assert_true(v[i] == 0.0);
    free(v);
}

/* ---- integers
 * ------------------------------------------------------------------------------------------- */

static void test_randint_bounds_and_frequencies(void **state)
{
    (void)state;
    pt_manual_seed(11);
    pt_tensor *t = pt_randint(-3, 4, PT_SHAPE(N_SAMPLES), PT_INT64, pt_cpu());
    assert_int_equal(pt_dtype_of(t), PT_INT64);
    double *v = values(t);
    int64_t counts[7] = {0};
    for (int64_t i = 0; i < N_SAMPLES; i++) {
        assert_true(v[i] >= -3 && v[i] <= 3 && v[i] == floor(v[i]));
        counts[(int)v[i] + 3]++;
    }
    free(v);
    /* lo is inclusive and hi exclusive: -3 and 3 both occur, 4 never. chi-square with 6
     * degrees of freedom: mean 6, sd sqrt(12); P(X2 > 40) < 1e-6 */
    double p[7] = {1 / 7., 1 / 7., 1 / 7., 1 / 7., 1 / 7., 1 / 7., 1 / 7.};
    assert_true(counts[0] > 0 && counts[6] > 0);
    assert_true(chi_square(counts, p, 7, N_SAMPLES) < 40.0);

    /* Without rejection, a 32-bit draw mod 3*2^30 would put half the mass below 2^30 instead of
     * a third (SE sqrt(2/9)/1000 = 4.7e-4, bound 5 SE). */
    const int64_t r = INT64_C(3) << 30;
    t = pt_randint(0, r, PT_SHAPE(N_SAMPLES), PT_INT64, pt_cpu());
    v = values(t);
    int64_t below = 0;
    for (int64_t i = 0; i < N_SAMPLES; i++) {
        assert_true(v[i] >= 0 && v[i] < (double)r);
        below += v[i] < (double)(r / 3);
    }
    free(v);
    assert_near((double)below / N_SAMPLES, 1.0 / 3.0, 2.4e-3, "randint unbiased fraction");
    /* the same for a 64-bit range 3 * 2^62 */
    const int64_t r64 = INT64_C(3) << 61;
    t = pt_randint(-r64, r64, PT_SHAPE(N_SAMPLES), PT_INT64, pt_cpu());
    v = values(t);
    below = 0;
    for (int64_t i = 0; i < N_SAMPLES; i++)
        below += v[i] < (double)-r64 + 4611686018427387904.0; /* the lowest third: 2^62 wide */
    free(v);
    assert_near((double)below / N_SAMPLES, 1.0 / 3.0, 2.4e-3, "randint 64-bit unbiased fraction");

    /* other dtypes: ranges at the dtype's edges */
    const struct {
        pt_dtype dt;
        int64_t lo, hi;
    } cases[] = {{PT_INT32, INT32_MIN, INT32_MAX + INT64_C(1)},
                 {PT_UINT8, 0, 256},
                 {PT_INT8, -128, 128},
                 {PT_INT16, -7, -2},
                 {PT_BOOL, 0, 2},
                 {PT_FLOAT32, -10, 10},
                 {PT_FLOAT16, 0, 2048},
                 {PT_FLOAT64, 5, 6}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        pt_tensor *x = pt_randint(cases[k].lo, cases[k].hi, PT_SHAPE(20000), cases[k].dt, pt_cpu());
        assert_non_null(x);
        assert_int_equal(pt_dtype_of(x), cases[k].dt);
        moments m = moments_of(x);
        assert_true(m.min >= (double)cases[k].lo && m.max <= (double)(cases[k].hi - 1));
        if (cases[k].hi - cases[k].lo <= 256) /* small ranges hit both ends in 20000 draws */
            assert_true(m.min == (double)cases[k].lo && m.max == (double)(cases[k].hi - 1));
        double *xv = values(x);
        for (int i = 0; i < 20000; i++)
            assert_true(xv[i] == floor(xv[i]));
        free(xv);
    }
    /* random_ in place on a strided int32 view */
    pt_tensor *base = pt_zeros(PT_SHAPE(100, 2), PT_INT32, pt_cpu());
    pt_tensor *col = pt_as_strided(base, PT_SHAPE(100), (const int64_t[]){2}, 0);
    assert_int_equal(pt_random_(col, 10, 13), PT_OK);
    moments mc = moments_of(col);
    assert_true(mc.min >= 10 && mc.max <= 12);
    v = values(base);
    for (int i = 1; i < 200; i += 2)
        assert_true(v[i] == 0);
    free(v);
}

/* ---- bernoulli
 * ----------------------------------------------------------------------------------------- */

static void test_bernoulli(void **state)
{
    (void)state;
    pt_manual_seed(12);
    /* p = 0, 0.25, 0.5, 1 each 250000 times: counts of 1 within 5 SE (sqrt(p(1-p) * 250000)) */
    const double ps[4] = {0.0, 0.25, 0.5, 1.0};
    double *pv = malloc(N_SAMPLES * sizeof(double));
    for (int i = 0; i < N_SAMPLES; i++)
        pv[i] = ps[i % 4];
    pt_tensor *p = pt_from_data(pv, PT_SHAPE(250000, 4), PT_FLOAT64, pt_cpu());
    free(pv);
    pt_tensor *b = pt_bernoulli(p);
    assert_shape(b, 250000, 4);
    assert_int_equal(pt_dtype_of(b), PT_FLOAT64);
    double *v = values(b);
    int64_t ones[4] = {0};
    for (int i = 0; i < N_SAMPLES; i++) {
        assert_true(v[i] == 0.0 || v[i] == 1.0);
        ones[i % 4] += v[i] == 1.0;
    }
    free(v);
    assert_int_equal(ones[0], 0);
    assert_int_equal(ones[3], 250000);
    assert_near((double)ones[1], 62500, 5 * sqrt(0.1875 * 250000), "bernoulli p=0.25");
    assert_near((double)ones[2], 125000, 5 * sqrt(0.25 * 250000), "bernoulli p=0.5");
    /* a non-contiguous p tensor */
    pt_tensor *pnc = pt_test_noncontig(p);
    pt_tensor *bnc = pt_bernoulli(pnc);
    v = values(bnc);
    for (int i = 0; i < N_SAMPLES; i += 4)
        assert_true(v[i] == 0.0 && v[i + 3] == 1.0);
    free(v);

    /* scalar p: like t's dtype (int32), mean 0.3 within 5 SE sqrt(.21)/1000 */
    pt_tensor *like = pt_zeros(PT_SHAPE(N_SAMPLES), PT_INT32, pt_cpu());
    pt_tensor *s = pt_bernoulli_scalar(like, 0.3);
    assert_int_equal(pt_dtype_of(s), PT_INT32);
    moments m = moments_of(s);
    assert_true(m.min == 0 && m.max == 1);
    assert_near(m.mean, 0.3, 2.3e-3, "bernoulli_scalar mean");
    /* in place on bool */
    pt_tensor *bo = pt_empty(PT_SHAPE(N_SAMPLES), PT_BOOL, pt_cpu());
    assert_int_equal(pt_bernoulli_(bo, 0.9), PT_OK);
    m = moments_of(bo);
    assert_near(m.mean, 0.9, 1.5e-3, "bernoulli_ bool mean");
}

/* ---- randperm
 * ------------------------------------------------------------------------------------------ */

static void test_randperm_is_a_permutation(void **state)
{
    (void)state;
    pt_manual_seed(13);
    const pt_dtype dts[] = {PT_INT64, PT_INT32, PT_FLOAT32, PT_INT16};
    for (int k = 0; k < 4; k++) {
        const int64_t n = 20000;
        pt_tensor *t = pt_randperm(n, dts[k], pt_cpu());
        assert_shape(t, 20000);
        assert_int_equal(pt_dtype_of(t), dts[k]);
        double *v = values(t);
        char *seen = calloc((size_t)n, 1);
        int64_t fixed = 0;
        for (int64_t i = 0; i < n; i++) {
            assert_true(v[i] >= 0 && v[i] < n && v[i] == floor(v[i]));
            assert_false(seen[(int64_t)v[i]]);
            seen[(int64_t)v[i]] = 1;
            fixed += v[i] == (double)i;
        }
        assert_true(fixed < 10); /* Poisson(1) fixed points; P(>= 10) ~ 1e-7 */
        free(seen);
        free(v);
    }
    assert_int_equal(pt_numel(pt_randperm(0, PT_INT64, pt_cpu())), 0);
    assert_true(pt_item(pt_randperm(1, PT_INT64, pt_cpu())) == 0.0);
    /* uniform over the 24 permutations of 4: 48000 draws, chi-square with 23 degrees of
     * freedom (mean 23, sd 6.8); P(X2 > 70) < 1e-6 */
    int64_t counts[256] = {0};
    const int trials = 48000;
    for (int trial = 0; trial < trials; trial++) {
        pt_tensor *t = pt_randperm(4, PT_INT64, pt_cpu());
        int64_t p[4];
        assert_int_equal(pt_copy_to_host(t, p, sizeof p), PT_OK);
        counts[p[0] * 64 + p[1] * 16 + p[2] * 4 + p[3]]++;
        pt_release(t);
    }
    double probs[256] = {0};
    int distinct = 0;
    for (int code = 0; code < 256; code++) {
        int a = code / 64, b = code / 16 % 4, c = code / 4 % 4, d = code % 4;
        if (a != b && a != c && a != d && b != c && b != d && c != d) {
            probs[code] = 1.0 / 24.0;
            distinct++;
        }
    }
    assert_int_equal(distinct, 24);
    assert_true(chi_square(counts, probs, 256, trials) < 70.0);
}

/* ---- multinomial
 * ---------------------------------------------------------------------------------------- */

static void test_multinomial_with_replacement(void **state)
{
    (void)state;
    pt_manual_seed(14);
    pt_tensor *p1 = fx_get(fx, "multinomial.p1"); /* [0.1, 0.2, 0, 0.3, 0.4] */
    pt_tensor *s = pt_multinomial(p1, N_SAMPLES, true);
    assert_shape(s, N_SAMPLES);
    assert_int_equal(pt_dtype_of(s), PT_INT64);
    double *v = values(s);
    int64_t counts[5] = {0};
    for (int64_t i = 0; i < N_SAMPLES; i++)
        counts[(int)v[i]]++;
    free(v);
    /* 3 degrees of freedom (a zero-weight category never appears): P(X2 > 31) < 1e-6 */
    double probs[5] = {0.1, 0.2, 0.0, 0.3, 0.4};
    assert_true(chi_square(counts, probs, 5, N_SAMPLES) < 31.0);

    /* 2-D, unnormalized rows, float64 */
    pt_tensor *p2 = pt_to_dtype(fx_get(fx, "multinomial.p2"), PT_FLOAT64);
    const int64_t k = 300000;
    pt_tensor *s2 = pt_multinomial(p2, k, true);
    assert_shape(s2, 3, k);
    double *pv = values(p2);
    v = values(s2);
    for (int row = 0; row < 3; row++) {
        int64_t c[4] = {0};
        double sum = pv[row * 4] + pv[row * 4 + 1] + pv[row * 4 + 2] + pv[row * 4 + 3];
        double pr[4];
        for (int i = 0; i < 4; i++)
            pr[i] = pv[row * 4 + i] / sum;
        for (int64_t j = 0; j < k; j++)
            c[(int)v[row * k + j]]++;
        assert_true(chi_square(c, pr, 4, k) < 31.0); /* <= 3 degrees of freedom */
    }
    free(v);
    free(pv);
}

static void test_multinomial_without_replacement(void **state)
{
    (void)state;
    pt_manual_seed(15);
    /* distinct indices; k = n gives permutations */
    pt_tensor *p = pt_rand(PT_SHAPE(500, 10), PT_FLOAT32, pt_cpu());
    pt_tensor *s = pt_multinomial(p, 10, false);
    assert_shape(s, 500, 10);
    double *v = values(s);
    for (int row = 0; row < 500; row++) {
        int seen = 0;
        for (int j = 0; j < 10; j++) {
            int idx = (int)v[row * 10 + j];
            assert_true(idx >= 0 && idx < 10);
            assert_false(seen & (1 << idx));
            seen |= 1 << idx;
        }
    }
    free(v);
    /* first draw ~ p, second draw ~ sum_i p_i p_j / (1 - p_i): 200000 rows of [0.1, 0.2, 0,
     * 0.3, 0.4] drawing 3 (all three from the non-zero four). chi-square bound as above. */
    const int64_t rows = 200000;
    const double w[5] = {0.1, 0.2, 0.0, 0.3, 0.4};
    double *pv = malloc((size_t)rows * 5 * sizeof(double));
    for (int64_t i = 0; i < rows * 5; i++)
        pv[i] = w[i % 5];
    pt_tensor *pr = pt_from_data(pv, PT_SHAPE(rows, 5), PT_FLOAT64, pt_cpu());
    free(pv);
    pt_tensor *d = pt_multinomial(pr, 3, false);
    v = values(d);
    int64_t first[5] = {0}, second[5] = {0};
    for (int64_t r = 0; r < rows; r++) {
        int a = (int)v[r * 3], b = (int)v[r * 3 + 1], c = (int)v[r * 3 + 2];
        assert_true(a != b && a != c && b != c && a != 2 && b != 2 && c != 2);
        first[a]++;
        second[b]++;
    }
    free(v);
    assert_true(chi_square(first, w, 5, rows) < 31.0);
    double w2[5] = {0};
    for (int j = 0; j < 5; j++)
        for (int i = 0; i < 5; i++)
            if (i != j && w[i] < 1.0)
                w2[j] += w[i] * w[j] / (1.0 - w[i]);
    assert_true(chi_square(second, w2, 5, rows) < 31.0);
    /* all non-zero categories of a row can be drawn */
    pt_tensor *all = pt_multinomial(fx_get(fx, "multinomial.p1"), 4, false);
    v = values(all);
    assert_true(v[0] + v[1] + v[2] + v[3] == 0 + 1 + 3 + 4);
    free(v);
}

static void test_multinomial_errors(void **state)
{
    (void)state;
    const float neg[3] = {0.5f, -0.1f, 0.6f}, nan_[3] = {0.5f, NAN, 0.1f},
                inf_[3] = {INFINITY, 1, 1}, zero[3] = {0, 0, 0}, one_nz[3] = {0, 1, 0};
    pt_tensor *pn = pt_from_data(neg, PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_multinomial(pn, 1, true), PT_ERR_INVALID_ARG, "element < 0");
    pt_tensor *pnan = pt_from_data(nan_, PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_multinomial(pnan, 1, false), PT_ERR_INVALID_ARG, "`nan`");
    pt_tensor *pinf = pt_from_data(inf_, PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_multinomial(pinf, 1, true), PT_ERR_INVALID_ARG, "`inf`");
    pt_tensor *pz = pt_from_data(zero, PT_SHAPE(1, 3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_multinomial(pz, 2, true), PT_ERR_INVALID_ARG, "sum of probabilities <= 0");
    pt_tensor *p1 = pt_from_data(one_nz, PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_multinomial(p1, 2, false), PT_ERR_INVALID_ARG,
                    "not enough non-negative category");
    assert_pt_error(pt_multinomial(p1, 4, false), PT_ERR_INVALID_ARG, "without replacement");
    assert_non_null(pt_multinomial(p1, 4, true));
    assert_pt_error(pt_multinomial(p1, 0, true), PT_ERR_INVALID_ARG, "<= 0 samples");
    pt_tensor *p3 = pt_ones(PT_SHAPE(2, 2, 2), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_multinomial(p3, 1, true), PT_ERR_SHAPE, "1 or 2 dim");
    pt_tensor *pi = pt_ones(PT_SHAPE(3), PT_INT64, pt_cpu());
    assert_pt_error(pt_multinomial(pi, 1, true), PT_ERR_DTYPE, "floating-point");
    pt_clear_error();
    assert_pt_error(pt_multinomial(NULL, 1, true), PT_ERR_NULL, "pt_multinomial");
    /* zero rows: an empty result */
    pt_tensor *p0 = pt_ones(PT_SHAPE(0, 3), PT_FLOAT32, pt_cpu());
    pt_tensor *e = pt_multinomial(p0, 2, false);
    assert_shape(e, 0, 2);
}

/* ---- shapes, dtypes and errors
 * ---------------------------------------------------------------------------- */

static void assert_meta_like(const pt_tensor *t, const char *fixture)
{
    pt_tensor *ref = fx_get(fx, fixture);
    assert_non_null(t);
    if (pt_dtype_of(t) != pt_dtype_of(ref) || pt_ndim(t) != pt_ndim(ref) ||
        memcmp(pt_shape(t), pt_shape(ref), (size_t)pt_ndim(t) * sizeof(int64_t)) != 0) {
        print_error("%s: got %s, PyTorch gives %s\n", fixture, pt_dtype_name(pt_dtype_of(t)),
                    pt_dtype_name(pt_dtype_of(ref)));
        fail();
    }
    pt_release(ref);
}

static void test_shapes_and_dtypes_follow_torch(void **state)
{
    (void)state;
    assert_meta_like(pt_rand(PT_SHAPE(2, 3), PT_FLOAT32, pt_cpu()), "meta.rand");
    assert_meta_like(pt_rand(PT_SHAPE(4), PT_FLOAT64, pt_cpu()), "meta.rand_f64");
    assert_meta_like(pt_randn(PT_SHAPE(3, 1), PT_FLOAT16, pt_cpu()), "meta.randn_f16");
    assert_meta_like(pt_randint(-3, 4, PT_SHAPE(2, 5), PT_INT64, pt_cpu()), "meta.randint");
    assert_meta_like(pt_randint(0, 2, PT_SHAPE(6), PT_BOOL, pt_cpu()), "meta.randint_bool");
    assert_meta_like(pt_randint(0, 256, PT_SHAPE(3), PT_UINT8, pt_cpu()), "meta.randint_u8");
    assert_meta_like(pt_randperm(7, PT_INT64, pt_cpu()), "meta.randperm");
    assert_meta_like(pt_randperm(7, PT_INT32, pt_cpu()), "meta.randperm_i32");
    assert_meta_like(pt_bernoulli(fx_get(fx, "meta.bernoulli_p")), "meta.bernoulli");
    assert_meta_like(pt_bernoulli_scalar(fx_get(fx, "meta.bernoulli_like_in"), 0.5),
                     "meta.bernoulli_like");
    assert_meta_like(pt_multinomial(fx_get(fx, "multinomial.p1"), 3, false), "meta.multinomial_1d");
    assert_meta_like(pt_multinomial(fx_get(fx, "multinomial.p2"), 2, false), "meta.multinomial_2d");
    assert_meta_like(pt_multinomial(fx_get(fx, "multinomial.p2"), 9, true),
                     "meta.multinomial_2d_repl");
    /* 0-dim and empty shapes */
    pt_tensor *s = pt_rand(PT_SCALAR_SHAPE, PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_ndim(s), 0);
    assert_true(pt_item(s) >= 0.0 && pt_item(s) < 1.0);
    assert_int_equal(pt_numel(pt_randn(PT_SHAPE(0, 5), PT_FLOAT32, pt_cpu())), 0);
    pt_tensor *sl = pt_rand_like(s);
    assert_non_null(sl);
    assert_int_equal(pt_ndim(sl), 0);
}

static void test_errors(void **state)
{
    (void)state;
    pt_device cpu = pt_cpu();
    assert_pt_error(pt_randint(5, 5, PT_SHAPE(3), PT_INT64, cpu), PT_ERR_INVALID_ARG,
                    "from=5 >= to=5");
    assert_pt_error(pt_randint(6, 5, PT_SHAPE(3), PT_INT64, cpu), PT_ERR_INVALID_ARG, "less than");
    assert_pt_error(pt_randint(0, 300, PT_SHAPE(3), PT_UINT8, cpu), PT_ERR_INVALID_ARG,
                    "out of bounds for uint8");
    assert_pt_error(pt_randint(-1, 2, PT_SHAPE(3), PT_BOOL, cpu), PT_ERR_INVALID_ARG,
                    "out of bounds for bool");
    assert_pt_error(pt_randint(0, 5, PT_SHAPE(3), PT_Q4_0, cpu), PT_ERR_DTYPE, "block");
    assert_pt_error(pt_randint(0, 5, PT_SHAPE(-1), PT_INT64, cpu), PT_ERR_SHAPE, "negative");
    assert_pt_error(pt_randn(PT_SHAPE(3), PT_INT64, cpu), PT_ERR_DTYPE, "floating");
    assert_pt_error(pt_rand(PT_SHAPE(3), PT_INT32, cpu), PT_ERR_DTYPE, "floating");
    assert_pt_error(pt_rand(2, NULL, PT_FLOAT32, cpu), PT_ERR_NULL, "shape is NULL");
    assert_pt_error(pt_rand(PT_SHAPE(2), (pt_dtype)99, cpu), PT_ERR_DTYPE, "invalid dtype");
    pt_tensor *f = pt_zeros(PT_SHAPE(4), PT_FLOAT32, cpu);
    pt_tensor *i = pt_zeros(PT_SHAPE(4), PT_INT64, cpu);
    assert_pt_status_error(pt_uniform_(f, 2.0, 1.0), PT_ERR_INVALID_ARG, "from=2 > to=1");
    assert_pt_status_error(pt_uniform_(f, 0.0, INFINITY), PT_ERR_INVALID_ARG, "finite");
    assert_pt_status_error(pt_uniform_(i, 0.0, 1.0), PT_ERR_DTYPE, "int64");
    assert_pt_status_error(pt_normal_(f, 0.0, -1.0), PT_ERR_INVALID_ARG, "std >= 0.0");
    assert_pt_status_error(pt_normal_(f, 0.0, NAN), PT_ERR_INVALID_ARG, "std >= 0.0");
    assert_pt_status_error(pt_random_(i, 3, 3), PT_ERR_INVALID_ARG, "less than");
    assert_pt_status_error(pt_bernoulli_(f, 1.5), PT_ERR_INVALID_ARG, "p=1.5");
    assert_pt_status_error(pt_bernoulli_(f, NAN), PT_ERR_INVALID_ARG, "[0, 1]");
    assert_pt_error(pt_bernoulli_scalar(f, -0.1), PT_ERR_INVALID_ARG, "[0, 1]");
    const float bad[2] = {0.5f, 2.0f};
    pt_tensor *pb = pt_from_data(bad, PT_SHAPE(2), PT_FLOAT32, cpu);
    assert_pt_error(pt_bernoulli(pb), PT_ERR_INVALID_ARG, "got 2 at index 1");
    assert_pt_error(pt_bernoulli(i), PT_ERR_DTYPE, "floating");
    assert_pt_error(pt_randperm(-1, PT_INT64, cpu), PT_ERR_INVALID_ARG, "non-negative");
    assert_pt_error(pt_randperm(300, PT_UINT8, cpu), PT_ERR_INVALID_ARG, "too large");
    assert_pt_error(pt_randperm(3, PT_BOOL, cpu), PT_ERR_DTYPE, "bool");
    /* NULL inputs */
    pt_clear_error();
    assert_pt_status_error(pt_uniform_(NULL, 0, 1), PT_ERR_NULL, "pt_uniform_");
    assert_pt_status_error(pt_normal_(NULL, 0, 1), PT_ERR_NULL, "pt_normal_");
    assert_pt_status_error(pt_random_(NULL, 0, 1), PT_ERR_NULL, "pt_random_");
    assert_pt_status_error(pt_bernoulli_(NULL, 0.5), PT_ERR_NULL, "pt_bernoulli_");
    assert_pt_error(pt_bernoulli(NULL), PT_ERR_NULL, "pt_bernoulli");
    assert_pt_error(pt_bernoulli_scalar(NULL, 0.5), PT_ERR_NULL, "pt_bernoulli_scalar");
    assert_pt_error(pt_rand_like(NULL), PT_ERR_NULL, "pt_rand_like");
    assert_pt_error(pt_randn_like(NULL), PT_ERR_NULL, "pt_randn_like");
    /* a failed call leaves the tensor and the generator usable */
    assert_int_equal(pt_uniform_(f, 0.0, 1.0), PT_OK);
}

/* A saved generator state replays the same numbers (resuming a run from a checkpoint). */
static void test_rng_state_round_trip(void **state)
{
    (void)state;
    pt_manual_seed(1234);
    pt_tensor *warm = pt_rand(PT_SHAPE(5), PT_FLOAT32, pt_cpu());
    pt_tensor *saved = pt_get_rng_state();
    assert_non_null(saved);
    assert_int_equal(pt_dtype_of(saved), PT_UINT8);
    assert_int_equal(pt_numel(saved), 16);
    pt_tensor *first = pt_randn(PT_SHAPE(7), PT_FLOAT32, pt_cpu());
    pt_tensor *other = pt_randn(PT_SHAPE(7), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_set_rng_state(saved), PT_OK);
    pt_tensor *again = pt_randn(PT_SHAPE(7), PT_FLOAT32, pt_cpu());
    assert_tensor_equal(again, first);
    float a[7], b[7];
    assert_int_equal(pt_copy_to_host(again, a, sizeof a), PT_OK);
    assert_int_equal(pt_copy_to_host(other, b, sizeof b), PT_OK);
    assert_true(memcmp(a, b, sizeof a) != 0);
    assert_int_equal(pt_initial_seed(), 1234);

    pt_tensor *bad = pt_zeros(PT_SHAPE(16), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_set_rng_state(bad), PT_ERR_INVALID_ARG, "uint8 tensor of 16");
    assert_pt_status_error(pt_set_rng_state(NULL), PT_ERR_NULL, "state");
    pt_release(warm);
    pt_release(saved);
    pt_release(first);
    pt_release(other);
    pt_release(again);
    pt_release(bad);
}

int main(void)
{
    fx = fx_open("random");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_same_seed_same_tensors_other_seed_differs,
                                        pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_streams_do_not_depend_on_thread_count, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_rand_range_and_moments, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_uniform_inplace_strided, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_randn_moments, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_normal_inplace_mean_std, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_randint_bounds_and_frequencies, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bernoulli, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_randperm_is_a_permutation, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_multinomial_with_replacement, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_multinomial_without_replacement, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_multinomial_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_shapes_and_dtypes_follow_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_rng_state_round_trip, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
