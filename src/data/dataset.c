/* The dataset interface and the built-in datasets: user-defined, TensorDataset, Subset,
 * ConcatDataset, random_split, and the MNIST / CIFAR-10 image datasets. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_internal.h"

pt_dataset *pt_dataset_new(int nfields, pt_dataset_len_fn len, pt_dataset_get_fn get,
                           void (*free_ctx)(void *ctx), void *ctx)
{
    if (nfields < 1 || nfields > PTI_MAX_IN * 2 || !len || !get)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_dataset_new: need 1..%d fields and len/get callbacks "
                              "(got nfields=%d)",
                              PTI_MAX_IN * 2, nfields);
    pt_dataset *ds = pti_calloc(1, sizeof *ds);
    if (!ds)
        return NULL;
    atomic_init(&ds->refcount, 1);
    ds->nfields = nfields;
    ds->len = len;
    ds->get = get;
    ds->free_ctx = free_ctx;
    ds->ctx = ctx;
    return ds;
}

int64_t pt_dataset_len(const pt_dataset *ds)
{
    return ds ? ds->len(ds->ctx) : -1;
}

int pt_dataset_nfields(const pt_dataset *ds)
{
    return ds ? ds->nfields : 0;
}

pt_status pt_dataset_get(const pt_dataset *ds, int64_t index, pt_tensor **fields)
{
    if (!ds || !fields)
        return pti_error(PT_ERR_NULL, "pt_dataset_get: NULL dataset or fields");
    int64_t n = ds->len(ds->ctx);
    int64_t i = index < 0 ? index + n : index;
    if (i < 0 || i >= n)
        return pti_error(PT_ERR_INDEX, "pt_dataset_get: index %lld out of range for %lld items",
                         (long long)index, (long long)n);
    for (int k = 0; k < ds->nfields; k++)
        fields[k] = NULL;
    pt_status st = ds->get(ds->ctx, i, fields);
    if (st != PT_OK) {
        for (int k = 0; k < ds->nfields; k++) {
            pt_release(fields[k]);
            fields[k] = NULL;
        }
    }
    return st;
}

pt_dataset *pt_dataset_retain(pt_dataset *ds)
{
    if (ds)
        atomic_fetch_add(&ds->refcount, 1);
    return ds;
}

void pt_dataset_free(pt_dataset *ds)
{
    if (!ds || atomic_fetch_sub(&ds->refcount, 1) != 1)
        return;
    if (ds->free_ctx)
        ds->free_ctx(ds->ctx);
    free(ds);
}

/* ---- TensorDataset --------------------------------------------------------------------------- */

typedef struct tensor_ds {
    int n;
    pt_tensor *t[PTI_MAX_IN * 2];
} tensor_ds;

static int64_t tensor_ds_len(void *ctx)
{
    tensor_ds *c = ctx;
    return c->t[0]->shape[0];
}

static pt_status tensor_ds_get(void *ctx, int64_t i, pt_tensor **fields)
{
    tensor_ds *c = ctx;
    for (int k = 0; k < c->n; k++) {
        const pt_tensor *t = c->t[k];
        fields[k] = pti_tensor_view(t, t->ndim - 1, t->shape + 1, t->stride + 1,
                                    t->offset + i * t->stride[0]);
        if (!fields[k])
            return pt_last_status();
    }
    return PT_OK;
}

static void tensor_ds_free(void *ctx)
{
    tensor_ds *c = ctx;
    for (int k = 0; k < c->n; k++)
        pti_unref(c->t[k]);
    free(c);
}

pt_dataset *pt_tensor_dataset(int n, pt_tensor *const *tensors)
{
    if (n < 1 || n > PTI_MAX_IN * 2 || !tensors)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_tensor_dataset: need 1..%d tensors, got %d",
                              PTI_MAX_IN * 2, n);
    for (int k = 0; k < n; k++) {
        if (!PTI_CHECK_ARG(tensors[k], "pt_tensor_dataset", "tensors[k]"))
            return NULL;
        if (tensors[k]->ndim < 1 || tensors[k]->shape[0] != tensors[0]->shape[0])
            return pti_error_null(PT_ERR_SHAPE,
                                  "pt_tensor_dataset: tensors[%d] %s does not share the first "
                                  "dim of tensors[0] %s",
                                  k, pti_tensor_desc(tensors[k]), pti_tensor_desc(tensors[0]));
        if (!pti_is_cpu(tensors[k]))
            return pti_error_null(PT_ERR_DEVICE,
                                  "pt_tensor_dataset: tensors[%d] is not on the "
                                  "CPU",
                                  k);
    }
    tensor_ds *c = pti_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->n = n;
    for (int k = 0; k < n; k++)
        c->t[k] = pt_retain(tensors[k]);
    pt_dataset *ds = pt_dataset_new(n, tensor_ds_len, tensor_ds_get, tensor_ds_free, c);
    if (!ds)
        tensor_ds_free(c);
    return ds;
}

/* ---- Subset ---------------------------------------------------------------------------------- */

typedef struct subset_ds {
    pt_dataset *base;
    int64_t n;
    int64_t idx[];
} subset_ds;

static int64_t subset_len(void *ctx)
{
    return ((subset_ds *)ctx)->n;
}

static pt_status subset_get(void *ctx, int64_t i, pt_tensor **fields)
{
    subset_ds *c = ctx;
    return pt_dataset_get(c->base, c->idx[i], fields);
}

static void subset_free(void *ctx)
{
    subset_ds *c = ctx;
    pt_dataset_free(c->base);
    free(c);
}

pt_dataset *pt_subset(pt_dataset *base, int64_t n, const int64_t *indices)
{
    if (!base || n < 0 || (n > 0 && !indices))
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_subset: NULL dataset/indices or n < 0");
    int64_t len = pt_dataset_len(base);
    for (int64_t i = 0; i < n; i++)
        if (indices[i] < 0 || indices[i] >= len)
            return pti_error_null(PT_ERR_INDEX,
                                  "pt_subset: indices[%lld] = %lld out of range "
                                  "for %lld items",
                                  (long long)i, (long long)indices[i], (long long)len);
    if ((uint64_t)n > (SIZE_MAX - sizeof(subset_ds)) / sizeof(int64_t))
        return pti_error_null(PT_ERR_OOM, "pt_subset: too many indices");
    subset_ds *c = pti_malloc(sizeof *c + (size_t)n * sizeof(int64_t));
    if (!c)
        return NULL;
    c->base = pt_dataset_retain(base);
    c->n = n;
    if (n)
        memcpy(c->idx, indices, (size_t)n * sizeof(int64_t));
    pt_dataset *ds = pt_dataset_new(base->nfields, subset_len, subset_get, subset_free, c);
    if (!ds)
        subset_free(c);
    return ds;
}

/* ---- ConcatDataset --------------------------------------------------------------------------- */

typedef struct concat_ds {
    int n;
    int64_t total;
    pt_dataset **ds;
    int64_t *ends; /* cumulative sizes */
} concat_ds;

static int64_t concat_len(void *ctx)
{
    return ((concat_ds *)ctx)->total;
}

static pt_status concat_get(void *ctx, int64_t i, pt_tensor **fields)
{
    concat_ds *c = ctx;
    int lo = 0, hi = c->n - 1; /* first dataset whose end is > i */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c->ends[mid] > i)
            hi = mid;
        else
            lo = mid + 1;
    }
    int64_t start = lo ? c->ends[lo - 1] : 0;
    return pt_dataset_get(c->ds[lo], i - start, fields);
}

static void concat_free(void *ctx)
{
    concat_ds *c = ctx;
    for (int k = 0; k < c->n; k++)
        pt_dataset_free(c->ds[k]);
    free(c->ds);
    free(c->ends);
    free(c);
}

pt_dataset *pt_concat_dataset(int n, pt_dataset *const *datasets)
{
    if (n < 1 || !datasets)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_concat_dataset: need >= 1 dataset");
    for (int k = 0; k < n; k++) {
        if (!datasets[k])
            return pti_error_null(PT_ERR_NULL, "pt_concat_dataset: datasets[%d] is NULL", k);
        if (datasets[k]->nfields != datasets[0]->nfields)
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  "pt_concat_dataset: datasets[%d] has %d "
                                  "fields, datasets[0] has %d",
                                  k, datasets[k]->nfields, datasets[0]->nfields);
    }
    concat_ds *c = pti_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ds = pti_calloc((size_t)n, sizeof *c->ds);
    c->ends = pti_calloc((size_t)n, sizeof *c->ends);
    if (!c->ds || !c->ends) {
        concat_free(c);
        return NULL;
    }
    c->n = n;
    for (int k = 0; k < n; k++) {
        c->ds[k] = pt_dataset_retain(datasets[k]);
        c->total += pt_dataset_len(datasets[k]);
        c->ends[k] = c->total;
    }
    pt_dataset *ds = pt_dataset_new(datasets[0]->nfields, concat_len, concat_get, concat_free, c);
    if (!ds)
        concat_free(c);
    return ds;
}

/* ---- random_split ---------------------------------------------------------------------------- */

void pti_data_permutation(int64_t n, uint64_t key, int64_t *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(pti_data_rand64(key, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}

pt_status pt_random_split(pt_dataset *ds, int n, const int64_t *lengths, const uint64_t *seed,
                          pt_dataset **out)
{
    if (!ds || !lengths || !out || n < 1)
        return pti_error(PT_ERR_INVALID_ARG, "pt_random_split: NULL argument or n < 1");
    int64_t len = pt_dataset_len(ds), sum = 0;
    for (int k = 0; k < n; k++) {
        if (lengths[k] < 0)
            return pti_error(PT_ERR_INVALID_ARG, "pt_random_split: lengths[%d] = %lld < 0", k,
                             (long long)lengths[k]);
        sum += lengths[k];
    }
    if (sum != len)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_random_split: lengths sum to %lld but the "
                         "dataset has %lld items",
                         (long long)sum, (long long)len);
    uint64_t key = seed ? *seed : pti_data_rand64(pti_rng_reserve(1).key, pti_rng_reserve(1).base);
    int64_t *perm = pti_malloc((size_t)(len ? len : 1) * sizeof *perm);
    if (!perm)
        return PT_ERR_OOM;
    pti_data_permutation(len, key, perm);
    int64_t off = 0;
    for (int k = 0; k < n; k++) {
        out[k] = pt_subset(ds, lengths[k], perm + off);
        if (!out[k]) {
            for (int j = 0; j < k; j++) {
                pt_dataset_free(out[j]);
                out[j] = NULL;
            }
            free(perm);
            return pt_last_status();
        }
        off += lengths[k];
    }
    free(perm);
    return PT_OK;
}

/* ---- MNIST / CIFAR-10 ------------------------------------------------------------------------ */

/* Converts uint8 [N, C, ...] images to float32 per opts; returns a new reference. */
static pt_tensor *convert_images(pt_tensor *img, const pt_image_dataset_opts *o)
{
    if (o->n_norm && (o->n_norm != img->shape[1] || o->n_norm > 3))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "image dataset: n_norm %d does not match %lld "
                              "channels",
                              o->n_norm, (long long)img->shape[1]);
    for (int c = 0; c < o->n_norm; c++)
        if (!(o->std[c] > 0))
            return pti_error_null(PT_ERR_INVALID_ARG, "image dataset: std[%d] = %g must be > 0", c,
                                  o->std[c]);
    pt_tensor *f = pti_tensor_new(img->ndim, img->shape, PT_FLOAT32, pt_cpu());
    if (!f)
        return NULL;
    const uint8_t *s = pti_data(img);
    float *d = pti_data(f);
    int64_t rows = img->shape[0] * img->shape[1];
    int64_t per_ch = rows != 0 ? img->numel / rows : 1;
    for (int64_t i = 0; i < img->numel; i++) {
        double v = s[i] / 255.0;
        if (o->n_norm) {
            int c = (int)((i / per_ch) % img->shape[1]);
            v = (v - o->mean[c]) / o->std[c];
        }
        d[i] = (float)v;
    }
    return f;
}

static pt_dataset *image_dataset(pt_tensor *img, pt_tensor *lab, const pt_image_dataset_opts *o)
{
    pt_image_dataset_opts zero = {0};
    if (!o)
        o = &zero;
    pt_tensor *use = img;
    if (o->to_float || o->n_norm) {
        use = convert_images(img, o);
        pt_release(img);
    }
    pt_dataset *ds = NULL;
    if (use) {
        pt_tensor *ts[2] = {use, lab};
        ds = pt_tensor_dataset(2, ts);
    }
    pt_release(use);
    pt_release(lab);
    return ds;
}

pt_dataset *pt_mnist_dataset(const char *images_path, const char *labels_path,
                             const pt_image_dataset_opts *opts)
{
    pt_tensor *img, *lab;
    if (pt_read_mnist(images_path, labels_path, &img, &lab) != PT_OK)
        return NULL;
    /* [N, H, W] -> [N, 1, H, W] (a channel dim, as torchvision's ToTensor gives) */
    if (img->ndim == 3) {
        int64_t shape[4] = {img->shape[0], 1, img->shape[1], img->shape[2]};
        int64_t stride[4] = {img->stride[0], img->stride[1] * img->shape[1], img->stride[1],
                             img->stride[2]};
        pt_tensor *v = pti_tensor_view(img, 4, shape, stride, img->offset);
        pt_release(img);
        img = v;
        if (!img) {
            pt_release(lab);
            return NULL;
        }
    }
    return image_dataset(img, lab, opts);
}

/* Finds <split>-<what>-<idx>-ubyte in dir under its usual spellings; false when none exists. */
static bool find_mnist_file(const char *dir, const char *split, const char *what, const char *idx,
                            char *out, size_t cap)
{
    static const char *const patterns[] = {"%s/%s-%s-%s-ubyte", "%s/%s-%s-%s-ubyte.gz",
                                           "%s/%s-%s.%s-ubyte", "%s/%s-%s.%s-ubyte.gz"};
    for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
        int n = snprintf(out, cap, patterns[i], dir, split, what, idx);
        if (n > 0 && (size_t)n < cap && access(out, R_OK) == 0)
            return true;
    }
    return false;
}

pt_dataset *pt_mnist_dataset_dir(const char *dir, bool train, const pt_image_dataset_opts *opts)
{
    if (!dir)
        return pti_error_null(PT_ERR_NULL, "pt_mnist_dataset_dir: dir is NULL");
    const char *split = train ? "train" : "t10k";
    char images[4096], labels[4096];
    if (!find_mnist_file(dir, split, "images", "idx3", images, sizeof(images)) ||
        !find_mnist_file(dir, split, "labels", "idx1", labels, sizeof(labels)))
        return pti_error_null(PT_ERR_IO,
                              "pt_mnist_dataset_dir: %s has no %s-images-idx3-ubyte[.gz] "
                              "and %s-labels-idx1-ubyte[.gz]",
                              dir, split, split);
    return pt_mnist_dataset(images, labels, opts);
}

pt_dataset *pt_cifar10_dataset(int n, const char *const *paths, const pt_image_dataset_opts *opts)
{
    pt_tensor *img, *lab;
    if (pt_read_cifar10(n, paths, &img, &lab) != PT_OK)
        return NULL;
    return image_dataset(img, lab, opts);
}
