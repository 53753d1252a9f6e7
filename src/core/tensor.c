/* Storages and tensors: reference counting, construction of new tensors and views, the
 * accessors of the public API, and the creation functions (empty, zeros, full, from_data,
 * arange, ...). Tensor structs come from a free list so steady-state loops do not malloc. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- storage ----------------------------------------------------------------------------------
 */

/* Storage structs come from a free list, like tensor structs, so steady-state loops do not
 * malloc them. */
static pthread_mutex_t storage_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pt_storage *storage_pool; /* linked through ->data */
static int storage_pool_count;
#define STORAGE_POOL_MAX 4096

static pt_storage *storage_struct_alloc(void)
{
    pthread_mutex_lock(&storage_pool_lock);
    pt_storage *s = storage_pool;
    if (s) {
        storage_pool = s->data;
        storage_pool_count--;
    }
    pthread_mutex_unlock(&storage_pool_lock);
    return s ? s : pti_malloc(sizeof *s);
}

static void storage_struct_free(pt_storage *s)
{
    pthread_mutex_lock(&storage_pool_lock);
    if (storage_pool_count < STORAGE_POOL_MAX) {
        s->data = storage_pool;
        storage_pool = s;
        storage_pool_count++;
        s = NULL;
    }
    pthread_mutex_unlock(&storage_pool_lock);
    free(s);
}

pt_storage *pti_storage_new(pt_device dev, size_t nbytes)
{
    char name[32];
    if (pti_device_check(dev) != PT_OK)
        return NULL;
    const pt_backend *b = pti_backend_for(dev);
    pt_storage *s = storage_struct_alloc();
    if (!s)
        return NULL;
    s->data = pti_device_alloc(dev, nbytes);
    if (!s->data) {
        storage_struct_free(s);
        return pti_error_null(PT_ERR_OOM, "out of memory allocating %zu bytes on %s", nbytes,
                              pt_device_str(dev, name, sizeof name));
    }
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->nbytes = nbytes;
    s->device = dev;
    s->backend = b;
    s->external_free = NULL;
    s->external_ctx = NULL;
    return s;
}

pt_storage *pti_storage_wrap(pt_device dev, void *data, size_t nbytes,
                             void (*free_fn)(void *, void *), void *ctx)
{
    const pt_backend *b = pti_backend_for(dev);
    if (!b)
        return pti_error_null(PT_ERR_DEVICE, "no backend for the wrapped storage's device");
    pt_storage *s = storage_struct_alloc();
    if (!s)
        return NULL;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->data = data;
    s->nbytes = nbytes;
    s->device = dev;
    s->backend = b;
    s->external_free = free_fn;
    s->external_ctx = ctx;
    return s;
}

void pti_storage_retain(pt_storage *s)
{
    atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

void pti_storage_release(pt_storage *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (s->external_free)
        s->external_free(s->external_ctx, s->data);
    else if (s->data || s->nbytes)
        pti_device_free(s->device, s->data, s->nbytes);
    storage_struct_free(s);
}

/* ---- tensor struct pool -----------------------------------------------------------------------
 */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pt_tensor *pool_head; /* linked through ->grad */
static int pool_count;
#define POOL_MAX 4096

static pt_tensor *tensor_struct_alloc(void)
{
    pthread_mutex_lock(&pool_lock);
    pt_tensor *t = pool_head;
    if (t) {
        pool_head = t->grad;
        pool_count--;
    }
    pthread_mutex_unlock(&pool_lock);
    if (!t)
        t = pti_malloc(sizeof *t);
    return t;
}

static void tensor_struct_free(pt_tensor *t)
{
    pthread_mutex_lock(&pool_lock);
    if (pool_count < POOL_MAX) {
        t->grad = pool_head;
        pool_head = t;
        pool_count++;
        t = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    free(t);
}

/* ---- geometry ----------------------------------------------------------------------------------
 */

void pti_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i] > 1 ? shape[i] : 1;
    }
}

int64_t pti_shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

bool pti_check_shape(const char *op, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > PT_MAX_DIMS) {
        pti_error(PT_ERR_SHAPE, "%s: ndim %d out of range [0, %d]", op, ndim, PT_MAX_DIMS);
        return false;
    }
    if (ndim > 0 && !shape) {
        pti_error(PT_ERR_NULL, "%s: shape is NULL with ndim %d", op, ndim);
        return false;
    }
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            pti_error(PT_ERR_SHAPE, "%s: negative dimension %lld in shape %s", op,
                      (long long)shape[i], pti_shape_str(ndim, shape));
            return false;
        }
        if (shape[i] > 0 && n > (INT64_C(1) << 50) / shape[i]) {
            pti_error(PT_ERR_SHAPE, "%s: shape %s has too many elements", op,
                      pti_shape_str(ndim, shape));
            return false;
        }
        n *= shape[i];
    }
    return true;
}

bool pti_is_contiguous(const pt_tensor *t)
{
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 1)
            continue;
        if (t->stride[i] != expected)
            return false;
        expected *= t->shape[i];
    }
    return true;
}

/* ---- construction ------------------------------------------------------------------------------
 */

pt_tensor *pti_tensor_on_storage(pt_storage *s, pt_dtype dt, int ndim, const int64_t *shape,
                                 const int64_t *stride, int64_t offset)
{
    pt_tensor *t = tensor_struct_alloc();
    if (!t)
        return NULL;
    atomic_init(&t->refcount, 1);
    pti_storage_retain(s);
    t->storage = s;
    t->offset = offset;
    t->ndim = ndim;
    t->dtype = dt;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->stride[i] = stride[i];
    }
    t->numel = pti_shape_numel(ndim, shape);
    t->requires_grad = false;
    t->retains_grad = false;
    t->is_view = false;
    t->view_base = NULL;
    t->output_nr = 0;
    t->grad = NULL;
    t->grad_fn = NULL;
    t->hooks = NULL;
    t->scope_slot = -1;
    pti_scope_track(t);
    return t;
}

pt_tensor *pti_tensor_new(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev)
{
    if (!pti_dtype_valid(dt))
        return pti_error_null(PT_ERR_DTYPE, "invalid dtype %d", (int)dt);
    if (!pti_check_shape("pt_empty", ndim, shape))
        return NULL;
    int64_t numel = pti_shape_numel(ndim, shape);
    const pti_dtype_info *info = &pti_dtypes[dt];
    if (info->is_block && ndim > 0 && shape[ndim - 1] % info->block_size != 0)
        return pti_error_null(PT_ERR_SHAPE,
                              "pt_empty: last dimension %lld of a %s tensor must be a multiple "
                              "of its block size %lld",
                              (long long)shape[ndim - 1], info->name, (long long)info->block_size);
    pt_storage *s = pti_storage_new(dev, pti_dtype_nbytes(dt, numel));
    if (!s)
        return NULL;
    int64_t stride[PT_MAX_DIMS];
    pti_contiguous_strides(ndim, shape, stride);
    pt_tensor *t = pti_tensor_on_storage(s, dt, ndim, shape, stride, 0);
    pti_storage_release(s);
    return t;
}

pt_tensor *pti_tensor_view(const pt_tensor *base, int ndim, const int64_t *shape,
                           const int64_t *stride, int64_t offset)
{
    if (ndim < 0 || ndim > PT_MAX_DIMS)
        return pti_error_null(PT_ERR_SHAPE, "view: ndim %d out of range", ndim);
    int64_t numel = pti_shape_numel(ndim, shape);
    if (numel > 0 && !pti_dtypes[base->dtype].is_block) {
        int64_t last = offset;
        for (int i = 0; i < ndim; i++) {
            if (stride[i] < 0)
                return pti_error_null(PT_ERR_SHAPE, "view: negative strides are not supported");
            last += (shape[i] - 1) * stride[i];
        }
        int64_t capacity = (int64_t)(base->storage->nbytes / pti_dtypes[base->dtype].size);
        if (offset < 0 || last >= capacity)
            return pti_error_null(PT_ERR_SHAPE,
                                  "view: geometry %s at offset %lld exceeds the storage (%lld "
                                  "elements)",
                                  pti_shape_str(ndim, shape), (long long)offset,
                                  (long long)capacity);
    }
    pt_tensor *t = pti_tensor_on_storage(base->storage, base->dtype, ndim, shape, stride, offset);
    if (t) {
        t->is_view = true;
        t->view_base = pt_retain(base->view_base ? base->view_base : (pt_tensor *)base);
    }
    return t;
}

/* ---- reference counting ------------------------------------------------------------------------
 */

pt_tensor *pt_retain(pt_tensor *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}

void pt_release(pt_tensor *t)
{
    if (!t)
        return;
    pti_scope_untrack(t);
    pti_unref(t);
}

/* Set once, by a constructor of the graph layer, before any tensor exists. */
static pti_tensor_death_fn tensor_death_hook;

void pti_set_tensor_death_hook(pti_tensor_death_fn fn)
{
    tensor_death_hook = fn;
}

void pti_unref(pt_tensor *t)
{
    if (!t)
        return;
    if (atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if ((t->grad_fn || t->hooks) && tensor_death_hook)
        tensor_death_hook(t);
    pt_tensor *grad = t->grad, *base = t->view_base;
    pti_storage_release(t->storage);
    tensor_struct_free(t);
    pti_unref(grad);
    pti_unref(base); /* a root: it has no view_base, so this recurses one level at most */
}

/* ---- accessors ---------------------------------------------------------------------------------
 */

int pt_ndim(const pt_tensor *t)
{
    return t ? t->ndim : -1;
}
const int64_t *pt_shape(const pt_tensor *t)
{
    return t ? t->shape : NULL;
}
const int64_t *pt_stride(const pt_tensor *t)
{
    return t ? t->stride : NULL;
}
int64_t pt_numel(const pt_tensor *t)
{
    return t ? t->numel : -1;
}
int64_t pt_storage_offset(const pt_tensor *t)
{
    return t ? t->offset : -1;
}
pt_dtype pt_dtype_of(const pt_tensor *t)
{
    return t ? t->dtype : PT_DTYPE_COUNT;
}
pt_device pt_device_of(const pt_tensor *t)
{
    return t ? t->storage->device : (pt_device){PT_DEVICE_TYPE_COUNT, 0};
}
bool pt_is_contiguous(const pt_tensor *t)
{
    return t && pti_is_contiguous(t);
}
bool pt_shares_storage(const pt_tensor *a, const pt_tensor *b)
{
    return a && b && a->storage == b->storage;
}

int64_t pt_size(const pt_tensor *t, int64_t dim)
{
    if (!PTI_CHECK_ARG(t, "pt_size", "t"))
        return -1;
    int64_t d = dim < 0 ? dim + t->ndim : dim;
    if (d < 0 || d >= t->ndim) {
        pti_error(PT_ERR_INDEX, "pt_size: dim %lld out of range for a %d-dim tensor",
                  (long long)dim, t->ndim);
        return -1;
    }
    return t->shape[d];
}

void *pt_data_ptr(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_data_ptr", "t"))
        return NULL;
    if (!pti_is_cpu(t))
        return pti_error_null(PT_ERR_DEVICE, "pt_data_ptr: tensor %s is not on the CPU",
                              pti_tensor_desc(t));
    return pti_data(t);
}

/* ---- creation ----------------------------------------------------------------------------------
 */

pt_tensor *pt_empty(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev)
{
    return pti_tensor_new(ndim, shape, dt, dev);
}

pt_tensor *pt_full(int ndim, const int64_t *shape, double v, pt_dtype dt, pt_device dev)
{
    pt_tensor *t = pti_tensor_new(ndim, shape, dt, dev);
    if (t && pti_fill_data("pt_full", t, v) != PT_OK) {
        pt_release(t);
        return NULL;
    }
    return t;
}

pt_tensor *pt_zeros(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev)
{
    return pt_full(ndim, shape, 0.0, dt, dev);
}

pt_tensor *pt_ones(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev)
{
    return pt_full(ndim, shape, 1.0, dt, dev);
}

pt_tensor *pt_scalar_tensor(double v, pt_dtype dt, pt_device dev)
{
    return pt_full(0, NULL, v, dt, dev);
}

pt_tensor *pt_from_data(const void *data, int ndim, const int64_t *shape, pt_dtype dt,
                        pt_device dev)
{
    pt_tensor *t = pti_tensor_new(ndim, shape, dt, dev);
    if (!t)
        return NULL;
    size_t nbytes = pti_dtype_nbytes(dt, t->numel);
    if (nbytes && !data) {
        pt_release(t);
        return pti_error_null(PT_ERR_NULL, "pt_from_data: data is NULL");
    }
    pt_status st = nbytes ? pti_copy_h2d(dev, t->storage->data, data, nbytes) : PT_OK;
    if (st != PT_OK) {
        pt_release(t);
        return NULL;
    }
    return t;
}

static pt_tensor *like(const pt_tensor *t, const char *op)
{
    if (!PTI_CHECK_ARG(t, op, "t"))
        return NULL;
    return pti_tensor_new(t->ndim, t->shape, t->dtype, t->storage->device);
}

pt_tensor *pt_empty_like(const pt_tensor *t)
{
    return like(t, "pt_empty_like");
}

pt_tensor *pt_full_like(const pt_tensor *t, double v)
{
    pt_tensor *r = like(t, "pt_full_like");
    if (r && pti_fill_data("pt_full_like", r, v) != PT_OK) {
        pt_release(r);
        return NULL;
    }
    return r;
}

pt_tensor *pt_zeros_like(const pt_tensor *t)
{
    return pt_full_like(t, 0.0);
}
pt_tensor *pt_ones_like(const pt_tensor *t)
{
    return pt_full_like(t, 1.0);
}

/* Fills a new 1-D host buffer with values from value_at(i), then moves it to dev. */
static pt_tensor *host_sequence(const char *op, int64_t n, pt_dtype dt, pt_device dev,
                                double (*value_at)(const double *p, int64_t i), const double *p)
{
    if (!pti_dtype_valid(dt) || pti_dtypes[dt].is_block)
        return pti_error_null(PT_ERR_DTYPE, "%s: unsupported dtype %s", op, pt_dtype_name(dt));
    pt_tensor *host = pti_tensor_new(1, &n, dt, pt_cpu());
    if (!host)
        return NULL;
    char *data = pti_data(host);
    size_t sz = pti_dtypes[dt].size;
    for (int64_t i = 0; i < n; i++)
        pti_store_f64(data + i * sz, dt, value_at(p, i));
    if (dev.type == PT_DEVICE_CPU)
        return host;
    pt_tensor *r = pti_to_device(host, dev);
    pt_release(host);
    return r;
}

static double arange_at(const double *p, int64_t i)
{
    return p[0] + (double)i * p[1];
}

pt_tensor *pt_arange(double start, double end, double step, pt_dtype dt, pt_device dev)
{
    if (dt == PT_BOOL) /* PyTorch has no bool arange, even an empty one */
        return pti_error_null(PT_ERR_DTYPE, "pt_arange: dtype bool is not supported (a range of "
                                            "bools has no meaning; PyTorch refuses it too)");
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step))
        return pti_error_null(
            PT_ERR_INVALID_ARG,
            "pt_arange: need finite start/end and a non-zero step (got %g, %g, %g)", start, end,
            step);
    if ((step > 0 && end < start) || (step < 0 && end > start))
        return pti_error_null(
            PT_ERR_INVALID_ARG,
            "pt_arange: upper bound and larger bound inconsistent with step sign");
    double count = ceil((end - start) / step);
    if (count > (double)(INT64_C(1) << 40))
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_arange: %g elements is too many", count);
    /* The length comes from the bounds as given, but like PyTorch an integer dtype truncates
     * start and step to that type first (arange(0.5, 5.3, 1.2, int64) is 0, 1, 2, 3). */
    bool integral = pti_dtype_valid(dt) && pti_dtypes[dt].is_integral;
    double p[2] = {integral ? trunc(start) : start, integral ? trunc(step) : step};
    return host_sequence("pt_arange", (int64_t)count, dt, dev, arange_at, p);
}

static double linspace_at(const double *p, int64_t i)
{
    /* PyTorch computes from both ends to keep the last value exact */
    int64_t steps = (int64_t)p[2];
    double step = p[3];
    int64_t half = steps / 2;
    if (steps == 1)
        return p[0]; /* PyTorch fills a single step with start, not end */
    return i < half ? p[0] + step * (double)i : p[1] - step * (double)(steps - 1 - i);
}

pt_tensor *pt_linspace(double start, double end, int64_t steps, pt_dtype dt, pt_device dev)
{
    if (dt == PT_BOOL && steps > 0) /* PyTorch has no bool linspace kernel (steps 0 needs none) */
        return pti_error_null(PT_ERR_DTYPE,
                              "pt_linspace: dtype bool is not supported (PyTorch refuses it too)");
    if (steps < 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_linspace: steps must be >= 0, got %lld",
                              (long long)steps);
    /* Like PyTorch, an integer dtype truncates both bounds to that type first; the step between
     * them stays fractional and every value truncates again on the store. */
    if (pti_dtype_valid(dt) && pti_dtypes[dt].is_integral) {
        start = trunc(start);
        end = trunc(end);
    }
    double p[4] = {start, end, (double)steps, steps > 1 ? (end - start) / (double)(steps - 1) : 0};
    return host_sequence("pt_linspace", steps, dt, dev, linspace_at, p);
}

pt_tensor *pt_eye(int64_t n, int64_t m, pt_dtype dt, pt_device dev)
{
    if (n < 0 || m < 0)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_eye: negative size %lld x %lld", (long long)n,
                              (long long)m);
    pt_tensor *host = pt_zeros(PT_SHAPE(n, m), dt, pt_cpu());
    if (!host)
        return NULL;
    char *data = pti_data(host);
    size_t sz = pti_dtypes[dt].size;
    for (int64_t i = 0; i < n && i < m; i++)
        pti_store_f64(data + (i * m + i) * (int64_t)sz, dt, 1.0);
    if (dev.type == PT_DEVICE_CPU)
        return host;
    pt_tensor *r = pti_to_device(host, dev);
    pt_release(host);
    return r;
}
