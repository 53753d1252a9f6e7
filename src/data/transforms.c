/* Samplers and per-sample transforms (Normalize, RandomCrop with padding, RandomHorizontalFlip).
 * Random choices come from Philox keyed by a per-sample seed, so they are reproducible. */
#include <string.h>

#include "data_internal.h"

pt_status pt_sampler_order(int64_t n, bool shuffle, uint64_t seed, uint64_t epoch, int64_t *out)
{
    if (n < 0 || (n > 0 && !out))
        return pti_error(PT_ERR_INVALID_ARG, "pt_sampler_order: n = %lld, out NULL?", (long long)n);
    if (!shuffle) {
        for (int64_t i = 0; i < n; i++)
            out[i] = i;
        return PT_OK;
    }
    pti_data_permutation(n, pti_data_rand64(seed, epoch ^ 0x5eed0000000000ULL), out);
    return PT_OK;
}

static bool check_image(const pt_tensor *img, const char *op, int min_ndim)
{
    if (!PTI_CHECK_ARG(img, op, "img"))
        return false;
    if (!pti_is_cpu(img) || img->ndim < min_ndim || pti_dtypes[img->dtype].is_block)
        return pti_error(PT_ERR_SHAPE, "%s: expected a CPU tensor with >= %d dims, got %s", op,
                         min_ndim, pti_tensor_desc(img)),
               false;
    return true;
}

pt_tensor *pt_transform_normalize(const pt_tensor *img, int c, const double *mean,
                                  const double *std)
{
    if (!check_image(img, "pt_transform_normalize", 1))
        return NULL;
    if (!mean || !std || c != img->shape[0] || !pt_dtype_is_floating(img->dtype))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_transform_normalize: need a floating "
                              "[C, ...] tensor with C = %d, got %s",
                              c, pti_tensor_desc(img));
    for (int k = 0; k < c; k++)
        if (std[k] == 0)
            return pti_error_null(PT_ERR_INVALID_ARG, "pt_transform_normalize: std[%d] is 0", k);
    pt_tensor *src = pt_contiguous(img);
    if (!src)
        return NULL;
    pt_tensor *out = pti_tensor_new(img->ndim, img->shape, img->dtype, pt_cpu());
    if (out) {
        int64_t per = c ? img->numel / c : 0;
        size_t es = pt_dtype_size(img->dtype);
        const char *s = pti_data(src);
        char *d = pti_data(out);
        for (int64_t i = 0; i < img->numel; i++) {
            int k = (int)(i / per);
            double v = pti_load_f64(s + i * es, img->dtype);
            pti_store_f64(d + i * es, img->dtype, (v - mean[k]) / std[k]);
        }
    }
    pt_release(src);
    return out;
}

pt_tensor *pt_transform_random_crop(const pt_tensor *img, int64_t pad, uint64_t seed)
{
    if (!check_image(img, "pt_transform_random_crop", 3))
        return NULL;
    if (pad < 0 || pad > 1 << 16)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_transform_random_crop: padding %lld out "
                              "of range",
                              (long long)pad);
    int nd = img->ndim;
    int64_t h = img->shape[nd - 2], w = img->shape[nd - 1];
    uint64_t r = pti_data_rand64(seed, 1);
    int64_t oy = (int64_t)((r >> 32) % (uint64_t)(2 * pad + 1));
    int64_t ox = (int64_t)((r & 0xffffffffu) % (uint64_t)(2 * pad + 1));
    pt_tensor *src = pt_contiguous(img);
    if (!src)
        return NULL;
    pt_tensor *out = pti_tensor_new(nd, img->shape, img->dtype, pt_cpu());
    if (out) {
        size_t es = pt_dtype_size(img->dtype);
        int64_t planes = (h != 0 && w != 0) ? img->numel / (h * w) : 0;
        const char *s = pti_data(src);
        char *d = pti_data(out);
        memset(d, 0, (size_t)img->numel * es);
        /* output (y, x) reads padded (y + oy, x + ox) = source (y + oy - pad, x + ox - pad) */
        for (int64_t p = 0; p < planes; p++)
            for (int64_t y = 0; y < h; y++) {
                int64_t sy = y + oy - pad;
                if (sy < 0 || sy >= h)
                    continue;
                int64_t x0 = pad - ox > 0 ? pad - ox : 0;
                int64_t x1 = w + pad - ox < w ? w + pad - ox : w;
                if (x1 > x0)
                    memcpy(d + ((p * h + y) * w + x0) * es,
                           s + ((p * h + sy) * w + x0 + ox - pad) * es, (size_t)(x1 - x0) * es);
            }
    }
    pt_release(src);
    return out;
}

pt_tensor *pt_transform_random_hflip(const pt_tensor *img, uint64_t seed)
{
    if (!check_image(img, "pt_transform_random_hflip", 1))
        return NULL;
    pt_tensor *src = pt_contiguous(img);
    if (!src || (pti_data_rand64(seed, 2) >> 63))
        return src; /* not flipped: a contiguous copy or a new reference */
    pt_tensor *out = pti_tensor_new(img->ndim, img->shape, img->dtype, pt_cpu());
    if (out) {
        int64_t w = img->shape[img->ndim - 1];
        int64_t rows = w ? img->numel / w : 0;
        size_t es = pt_dtype_size(img->dtype);
        const char *s = pti_data(src);
        char *d = pti_data(out);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t x = 0; x < w; x++)
                memcpy(d + (r * w + x) * es, s + (r * w + w - 1 - x) * es, es);
    }
    pt_release(src);
    return out;
}
