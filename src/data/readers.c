/* Data file readers: MNIST idx files (plain or gzip, via zlib's gzread which reads both) and
 * CIFAR-10 binary batches. Every size in a header is checked against the bytes actually read,
 * and the content is read in growing chunks, so a lying header cannot cause a huge allocation. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../core/internal.h"

#define CHUNK (1u << 20)
#define CIFAR_RECORD 3073

/* Reads the whole (decompressed) content of path, stopping once more than `limit` bytes are
 * seen. *n gets the count. Returns a malloc'd buffer or NULL with the error set. */
static unsigned char *read_all(const char *path, size_t limit, size_t *n)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        return pti_error_null(PT_ERR_IO, "%s: cannot open (%s)", path,
                              errno ? strerror(errno) : "gzopen failed");
    size_t cap = 0, len = 0;
    unsigned char *buf = NULL;
    for (;;) {
        if (len + CHUNK > cap) {
            size_t ncap = cap ? cap * 2 : CHUNK;
            unsigned char *g = pti_realloc(buf, ncap);
            if (!g) {
                free(buf);
                gzclose(f);
                return pti_error_null(PT_ERR_OOM, "%s: out of memory reading the file", path);
            }
            buf = g;
            cap = ncap;
        }
        int r = gzread(f, buf + len, CHUNK);
        if (r < 0) {
            int code;
            const char *msg = gzerror(f, &code);
            pt_status st = code == Z_ERRNO ? PT_ERR_IO : PT_ERR_FORMAT;
            pti_error(st, "%s: corrupt or unreadable data (%s)", path, msg);
            free(buf);
            gzclose(f);
            return NULL;
        }
        len += (size_t)r;
        if (r == 0 || len > limit)
            break;
    }
    /* gzread reports a truncated gzip stream at the end, not as an error return */
    int code;
    const char *msg = gzerror(f, &code);
    if (code != Z_OK && code != Z_STREAM_END && len <= limit) {
        pti_error(PT_ERR_FORMAT, "%s: corrupt or truncated gzip data (%s)", path, msg);
        free(buf);
        gzclose(f);
        return NULL;
    }
    gzclose(f);
    *n = len;
    return buf;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool idx_dtype(int code, pt_dtype *dt)
{
    switch (code) {
    case 0x08: *dt = PT_UINT8; return true;
    case 0x09: *dt = PT_INT8; return true;
    case 0x0B: *dt = PT_INT16; return true;
    case 0x0C: *dt = PT_INT32; return true;
    case 0x0D: *dt = PT_FLOAT32; return true;
    case 0x0E: *dt = PT_FLOAT64; return true;
    default: return false;
    }
}

/* Header checks up to and including the data size; sets *dt, ndim, shape, *need (total bytes). */
static pt_status idx_header(const char *path, const unsigned char *b, size_t n, pt_dtype *dt,
                            int *ndim, int64_t *shape, size_t *need)
{
    if (n < 4)
        return pti_error(PT_ERR_FORMAT, "%s: not an idx file (only %zu bytes)", path, n);
    if (b[0] != 0 || b[1] != 0 || !idx_dtype(b[2], dt))
        return pti_error(PT_ERR_FORMAT,
                         "%s: bad idx magic %02x %02x %02x %02x (expected 00 00 <type> <ndim>)",
                         path, b[0], b[1], b[2], b[3]);
    *ndim = b[3];
    if (*ndim < 1 || *ndim > PT_MAX_DIMS)
        return pti_error(PT_ERR_FORMAT, "%s: idx header has %d dims (expected 1..%d)", path, *ndim,
                         PT_MAX_DIMS);
    size_t hdr = 4 + 4 * (size_t)*ndim;
    if (n < hdr)
        return pti_error(PT_ERR_FORMAT, "%s: truncated idx header (%zu of %zu bytes)", path, n,
                         hdr);
    size_t elems = 1, esize = pt_dtype_size(*dt);
    for (int i = 0; i < *ndim; i++) {
        uint32_t d = be32(b + 4 + 4 * i);
        shape[i] = d;
        if (d && elems > (SIZE_MAX / 2) / esize / d)
            return pti_error(PT_ERR_FORMAT, "%s: idx dims %s are too large", path,
                             pti_shape_str(i + 1, shape));
        elems *= d;
    }
    *need = hdr + elems * esize;
    return PT_OK;
}

pt_tensor *pt_read_idx(const char *path)
{
    if (!path)
        return pti_error_null(PT_ERR_NULL, "pt_read_idx: path is NULL");
    /* header first (bounded read), then the whole file with the limit the header implies */
    size_t n = 0;
    unsigned char *b = read_all(path, SIZE_MAX / 4, &n);
    if (!b)
        return NULL;
    pt_dtype dt = PT_UINT8;
    int ndim = 0;
    int64_t shape[PT_MAX_DIMS];
    size_t need = 0;
    pt_tensor *t = NULL;
    if (idx_header(path, b, n, &dt, &ndim, shape, &need) != PT_OK)
        goto done;
    if (n != need) {
        pti_error(PT_ERR_FORMAT, "%s: idx header %s %s needs %zu bytes but the file has %zu (%s)",
                  path, pti_shape_str(ndim, shape), pt_dtype_name(dt), need, n,
                  n < need ? "truncated" : "trailing data");
        goto done;
    }
    t = pti_tensor_new(ndim, shape, dt, pt_cpu());
    if (!t)
        goto done;
    size_t es = pt_dtype_size(dt), hdr = 4 + 4 * (size_t)ndim;
    unsigned char *dst = pti_data(t);
    for (size_t i = 0; i < (size_t)t->numel; i++) /* big-endian to host order */
        for (size_t k = 0; k < es; k++)
            dst[i * es + k] = b[hdr + i * es + (es - 1 - k)];
done:
    free(b);
    return t;
}

static pt_tensor *labels_to_int64(const unsigned char *src, int64_t n)
{
    pt_tensor *l = pti_tensor_new(1, &n, PT_INT64, pt_cpu());
    if (!l)
        return NULL;
    int64_t *d = pti_data(l);
    for (int64_t i = 0; i < n; i++)
        d[i] = src[i];
    return l;
}

pt_status pt_read_mnist(const char *images_path, const char *labels_path, pt_tensor **images,
                        pt_tensor **labels)
{
    if (!images || !labels)
        return pti_error(PT_ERR_NULL, "pt_read_mnist: output pointer is NULL");
    *images = *labels = NULL;
    pt_tensor *img = pt_read_idx(images_path);
    if (!img)
        return pt_last_status();
    pt_tensor *lab = pt_read_idx(labels_path);
    pt_status st = PT_OK;
    if (!lab) {
        st = pt_last_status();
    } else if (img->dtype != PT_UINT8 || img->ndim < 2) {
        st = pti_error(PT_ERR_FORMAT, "%s: expected uint8 images with >= 2 dims, got %s",
                       images_path, pti_tensor_desc(img));
    } else if (lab->dtype != PT_UINT8 || lab->ndim != 1) {
        st = pti_error(PT_ERR_FORMAT, "%s: expected 1-D uint8 labels, got %s", labels_path,
                       pti_tensor_desc(lab));
    } else if (lab->shape[0] != img->shape[0]) {
        st = pti_error(PT_ERR_FORMAT, "%s has %lld labels but %s has %lld images", labels_path,
                       (long long)lab->shape[0], images_path, (long long)img->shape[0]);
    }
    if (st == PT_OK) {
        pt_tensor *l64 = labels_to_int64(pti_data(lab), lab->shape[0]);
        pt_release(lab);
        if (!l64) {
            pt_release(img);
            return pt_last_status();
        }
        *images = img;
        *labels = l64;
        return PT_OK;
    }
    pt_release(img);
    pt_release(lab);
    return st;
}

pt_status pt_read_cifar10(int n, const char *const *paths, pt_tensor **images, pt_tensor **labels)
{
    if (!images || !labels || !paths)
        return pti_error(PT_ERR_NULL, "pt_read_cifar10: NULL argument");
    *images = *labels = NULL;
    if (n < 1)
        return pti_error(PT_ERR_INVALID_ARG, "pt_read_cifar10: n = %d, need >= 1 file", n);
    unsigned char **bufs = pti_calloc((size_t)n, sizeof *bufs);
    size_t *lens = pti_calloc((size_t)n, sizeof *lens);
    pt_status st = PT_OK;
    int64_t total = 0;
    if (!bufs || !lens) {
        st = pti_error(PT_ERR_OOM, "pt_read_cifar10: out of memory");
        goto done;
    }
    for (int f = 0; f < n && st == PT_OK; f++) {
        if (!paths[f]) {
            st = pti_error(PT_ERR_NULL, "pt_read_cifar10: paths[%d] is NULL", f);
            break;
        }
        bufs[f] = read_all(paths[f], SIZE_MAX / 4, &lens[f]);
        if (!bufs[f]) {
            st = pt_last_status();
            break;
        }
        if (lens[f] == 0 || lens[f] % CIFAR_RECORD != 0) {
            st = pti_error(PT_ERR_FORMAT,
                           "%s: size %zu is not a positive multiple of the CIFAR-10 record "
                           "size 3073 (truncated or not a CIFAR-10 batch)",
                           paths[f], lens[f]);
            break;
        }
        for (size_t r = 0; r < lens[f] / CIFAR_RECORD; r++)
            if (bufs[f][r * CIFAR_RECORD] > 9) {
                st = pti_error(PT_ERR_FORMAT, "%s: record %zu has label %d (expected 0..9)",
                               paths[f], r, bufs[f][r * CIFAR_RECORD]);
                break;
            }
        total += (int64_t)(lens[f] / CIFAR_RECORD);
    }
    if (st != PT_OK)
        goto done;
    pt_tensor *img = pti_tensor_new(PT_SHAPE(total, 3, 32, 32), PT_UINT8, pt_cpu());
    pt_tensor *lab = pti_tensor_new(1, &total, PT_INT64, pt_cpu());
    if (!img || !lab) {
        pt_release(img);
        pt_release(lab);
        st = pt_last_status();
        goto done;
    }
    unsigned char *di = pti_data(img);
    int64_t *dl = pti_data(lab), k = 0;
    for (int f = 0; f < n; f++)
        for (size_t r = 0; r < lens[f] / CIFAR_RECORD; r++, k++) {
            dl[k] = bufs[f][r * CIFAR_RECORD];
            memcpy(di + k * 3072, bufs[f] + r * CIFAR_RECORD + 1, 3072);
        }
    *images = img;
    *labels = lab;
done:
    for (int f = 0; bufs && f < n; f++)
        free(bufs[f]);
    free(bufs);
    free(lens);
    return st;
}
