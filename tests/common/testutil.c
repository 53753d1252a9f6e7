/* Test helpers: fixture reading (see gen_fixtures.py for the format) and tensor comparison. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PT_FIXTURES_DIR
#define PT_FIXTURES_DIR "tests/fixtures"
#endif

typedef struct fx_record {
    char *name;
    pt_dtype dtype;
    int ndim;
    int64_t shape[PT_MAX_DIMS];
    size_t nbytes;
    unsigned char *data;
} fx_record;

struct pt_fixture {
    char area[64];
    int count;
    fx_record *records;
};

static bool read_exact(FILE *f, void *dst, size_t n)
{
    return fread(dst, 1, n, f) == n;
}

pt_fixture *fx_open(const char *area)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.ptfx", PT_FIXTURES_DIR, area);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("fixture file %s is missing (run tests/fixtures/gen_fixtures.py)", path);
    char magic[4];
    uint32_t version = 0, count = 0;
    if (!read_exact(f, magic, 4) || memcmp(magic, "PTFX", 4) != 0 || !read_exact(f, &version, 4) ||
        !read_exact(f, &count, 4) || version != 1)
        fail_msg("fixture file %s: bad header", path);
    pt_fixture *fx = calloc(1, sizeof *fx);
    snprintf(fx->area, sizeof fx->area, "%s", area);
    fx->records = calloc(count ? count : 1, sizeof(fx_record));
    fx->count = (int)count;
    for (uint32_t i = 0; i < count; i++) {
        fx_record *r = &fx->records[i];
        uint16_t name_len = 0;
        uint8_t dt = 0, nd = 0;
        if (!read_exact(f, &name_len, 2))
            fail_msg("fixture %s: truncated", path);
        r->name = calloc(name_len + 1u, 1);
        uint64_t nbytes = 0;
        if (!read_exact(f, r->name, name_len) || !read_exact(f, &dt, 1) || !read_exact(f, &nd, 1) ||
            nd > PT_MAX_DIMS || !read_exact(f, r->shape, 8u * nd) || !read_exact(f, &nbytes, 8))
            fail_msg("fixture %s: truncated record %u", path, i);
        r->dtype = (pt_dtype)dt;
        r->ndim = nd;
        r->nbytes = nbytes;
        r->data = malloc(nbytes ? nbytes : 1);
        if (!read_exact(f, r->data, nbytes))
            fail_msg("fixture %s: truncated data of %s", path, r->name);
    }
    fclose(f);
    return fx;
}

void fx_close(pt_fixture *fx)
{
    if (!fx)
        return;
    for (int i = 0; i < fx->count; i++) {
        free(fx->records[i].name);
        free(fx->records[i].data);
    }
    free(fx->records);
    free(fx);
}

static const fx_record *find(const pt_fixture *fx, const char *name)
{
    for (int i = 0; i < fx->count; i++)
        if (strcmp(fx->records[i].name, name) == 0)
            return &fx->records[i];
    return NULL;
}

bool fx_has(const pt_fixture *fx, const char *name)
{
    return find(fx, name) != NULL;
}

void *pt_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    rewind(f);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        fail_msg("cannot read %s", path);
    }
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

int fx_count(const pt_fixture *fx)
{
    return fx->count;
}

const char *fx_name(const pt_fixture *fx, int i)
{
    if (i < 0 || i >= fx->count)
        fail_msg("fixture %s: record %d of %d requested", fx->area, i, fx->count);
    return fx->records[i].name;
}

pt_tensor *fx_get(const pt_fixture *fx, const char *name)
{
    const fx_record *r = find(fx, name);
    if (!r)
        fail_msg("fixture %s has no record '%s' (regenerate the fixtures)", fx->area, name);
    pt_tensor *t = pt_from_data(r->data, r->ndim, r->shape, r->dtype, pt_cpu());
    if (!t)
        fail_msg("fixture %s/%s: %s", fx->area, name, pt_last_error());
    return t;
}

pt_tensor *fx_get_on(const pt_fixture *fx, const char *name, pt_device dev)
{
    pt_tensor *h = fx_get(fx, name);
    pt_tensor *t = pt_to(h, dev);
    pt_release(h);
    if (!t)
        fail_msg("fixture %s/%s to device: %s", fx->area, name, pt_last_error());
    return t;
}

double pt_test_get(const pt_tensor *t, int64_t i)
{
    pt_tensor *c = pt_contiguous(t);
    const unsigned char *p = pt_data_ptr(c);
    size_t es = pt_dtype_size(pt_dtype_of(t));
    double v;
    switch (pt_dtype_of(t)) {
    case PT_FLOAT32: v = ((const float *)p)[i]; break;
    case PT_FLOAT64: v = ((const double *)p)[i]; break;
    case PT_FLOAT16: v = pt_half_to_float(((const uint16_t *)p)[i]); break;
    case PT_BFLOAT16: v = pt_bfloat16_to_float(((const uint16_t *)p)[i]); break;
    case PT_INT64: v = (double)((const int64_t *)p)[i]; break;
    case PT_INT32: v = ((const int32_t *)p)[i]; break;
    case PT_INT16: v = ((const int16_t *)p)[i]; break;
    case PT_INT8: v = ((const int8_t *)p)[i]; break;
    case PT_UINT8: v = p[i]; break;
    case PT_BOOL: v = p[i * es] != 0; break;
    default: v = NAN;
    }
    pt_release(c);
    return v;
}

static bool values_close(double a, double e, double rtol, double atol)
{
    if (isnan(e))
        return isnan(a);
    if (isinf(e))
        return a == e;
    return fabs(a - e) <= atol + rtol * fabs(e);
}

void pt_test_assert_close(const pt_tensor *actual, const pt_tensor *expected, double rtol,
                          double atol, bool same_dtype, const char *file, int line)
{
    if (!expected)
        _fail(file, line);
    if (!actual) {
        print_error("%s:%d: result is NULL: %s\n", file, line, pt_last_error());
        _fail(file, line);
    }
    if (pt_ndim(actual) != pt_ndim(expected) ||
        memcmp(pt_shape(actual), pt_shape(expected), sizeof(int64_t) * (size_t)pt_ndim(actual)) !=
            0) {
        print_error("%s:%d: shape mismatch: ndim %d vs expected %d\n", file, line, pt_ndim(actual),
                    pt_ndim(expected));
        for (int i = 0; i < pt_ndim(actual); i++)
            print_error("  actual dim %d = %lld\n", i, (long long)pt_shape(actual)[i]);
        for (int i = 0; i < pt_ndim(expected); i++)
            print_error("  expected dim %d = %lld\n", i, (long long)pt_shape(expected)[i]);
        _fail(file, line);
    }
    if (same_dtype && pt_dtype_of(actual) != pt_dtype_of(expected)) {
        print_error("%s:%d: dtype %s, expected %s\n", file, line,
                    pt_dtype_name(pt_dtype_of(actual)), pt_dtype_name(pt_dtype_of(expected)));
        _fail(file, line);
    }
    pt_tensor *ha = pt_to(actual, pt_cpu()), *he = pt_to(expected, pt_cpu());
    int64_t n = pt_numel(ha);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        if (!values_close(pt_test_get(ha, i), pt_test_get(he, i), rtol, atol)) {
            if (first < 0)
                first = i;
            bad++;
        }
    }
    if (bad) {
        print_error("%s:%d: %lld of %lld elements differ; first at flat index %lld: got %.9g, "
                    "expected %.9g (rtol %g, atol %g)\n",
                    file, line, (long long)bad, (long long)n, (long long)first,
                    pt_test_get(ha, first), pt_test_get(he, first), rtol, atol);
        pt_release(ha);
        pt_release(he);
        _fail(file, line);
    }
    pt_release(ha);
    pt_release(he);
}

void pt_test_assert_error(const void *result, pt_status status, const char *substring,
                          const char *file, int line)
{
    if (result != NULL) {
        print_error("%s:%d: expected the call to fail with %s\n", file, line,
                    pt_status_name(status));
        _fail(file, line);
    }
    pt_test_assert_status_error(pt_last_status(), status, substring, file, line);
}

void pt_test_assert_status_error(pt_status st, pt_status status, const char *substring,
                                 const char *file, int line)
{
    if (st != status) {
        print_error("%s:%d: status %s, expected %s (message: %s)\n", file, line, pt_status_name(st),
                    pt_status_name(status), pt_last_error());
        _fail(file, line);
    }
    if (substring && !strstr(pt_last_error(), substring)) {
        print_error("%s:%d: message \"%s\" does not mention \"%s\"\n", file, line, pt_last_error(),
                    substring);
        _fail(file, line);
    }
    pt_clear_error();
}

void pt_test_assert_shape(const pt_tensor *t, int ndim, const int64_t *shape, const char *file,
                          int line)
{
    if (!t) {
        print_error("%s:%d: result is NULL: %s\n", file, line, pt_last_error());
        _fail(file, line);
    }
    bool ok = pt_ndim(t) == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = pt_shape(t)[i] == shape[i];
    if (!ok) {
        print_error("%s:%d: unexpected shape (ndim %d)\n", file, line, pt_ndim(t));
        _fail(file, line);
    }
}

pt_tensor *pt_test_noncontig(const pt_tensor *t)
{
    /* Build a buffer twice as long in the last dim, place t's values at even positions, and
     * return the strided view [..., ::2]. */
    int nd = pt_ndim(t);
    if (nd == 0)
        return pt_clone(t);
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    memcpy(shape, pt_shape(t), sizeof(int64_t) * (size_t)nd);
    shape[nd - 1] *= 2;
    pt_tensor *big = pt_zeros(nd, shape, pt_dtype_of(t), pt_device_of(t));
    memcpy(stride, pt_stride(big), sizeof(int64_t) * (size_t)nd);
    stride[nd - 1] = 2;
    pt_tensor *view = pt_as_strided(big, nd, pt_shape(t), stride, 0);
    bool grad_mode = pt_set_grad_enabled(false); /* a fresh input: no history from t */
    pt_copy_(view, t);
    pt_set_grad_enabled(grad_mode);
    pt_release(big);
    return view;
}

static size_t baseline_bytes;

int pt_test_setup(void **state)
{
    (void)state;
    pt_clear_error();
    baseline_bytes = pt_memory_allocated();
    pt_scope_begin();
    return 0;
}

int pt_test_teardown(void **state)
{
    (void)state;
    pt_scope_end();
    size_t now = pt_memory_allocated();
    if (now != baseline_bytes) {
        print_error("tensor memory leaked by the test: %zu bytes still allocated (was %zu)\n", now,
                    baseline_bytes);
        return -1;
    }
    return 0;
}

const char *pt_test_model_path(const char *file)
{
    static char path[4096];
    const char *dir = getenv("PT_MODELS_DIR");
    if (!dir || !*dir)
        dir = PT_TEST_MODELS_DIR;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (access(path, R_OK) != 0)
        fail_msg("%s is missing: run `make models` (it fetches the test models into %s)", path,
                 dir);
    return path;
}
