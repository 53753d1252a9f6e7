/* CPU kernels of the shape family (front-ends in src/ops/shape.c): cat, flip, roll, repeat,
 * tril and triu. They move whole elements (memcpy by element size), so every plain dtype
 * works, and read inputs of any strides. Most are expressed as strided copies between
 * geometries over the same storages (a flipped input is a view with negative strides, a roll
 * is 2^k block copies), run by the strided iterator across the thread pool. */
#include <string.h>

#include "cpu.h"

#define COPY_GRAIN (PTI_GRAIN_ELEMENTWISE * 4)

/* ---- element copies -------------------------------------------------------------------------- */

/* n elements of es bytes from src (byte stride ss) to dst (byte stride ds). */
static void copy_elems(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n, size_t es)
{
    if (ds == (int64_t)es && ss == (int64_t)es) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    switch (es) {
    case 1:
        for (int64_t i = 0; i < n; i++)
            dst[i * ds] = src[i * ss];
        break;
    case 2:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * ds, src + i * ss, 2);
        break;
    case 4:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * ds, src + i * ss, 4);
        break;
    case 8:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * ds, src + i * ss, 8);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * ds, src + i * ss, es);
    }
}

static void copy_loop(void *ctx, char **data, const int64_t *strides, int64_t n)
{
    copy_elems(data[0], strides[0], data[1], strides[1], n, *(const size_t *)ctx);
}

/* A temporary geometry over base's storage (never escapes the kernel; strides may be
 * negative). */
static void geometry(pt_tensor *v, const pt_tensor *base, const int64_t *shape,
                     const int64_t *stride, int64_t offset)
{
    memset(v, 0, sizeof *v);
    v->storage = base->storage;
    v->dtype = base->dtype;
    v->ndim = base->ndim;
    v->offset = offset;
    for (int i = 0; i < base->ndim; i++) {
        v->shape[i] = shape[i];
        v->stride[i] = stride[i];
    }
    v->numel = pti_shape_numel(base->ndim, shape);
}

/* dst = src elementwise (same shape and dtype), across the pool. */
static void copy_view(const pt_tensor *dst, const pt_tensor *src)
{
    if (dst->numel == 0)
        return;
    const pt_tensor *ops[2] = {dst, src};
    pti_iter it;
    pti_iter_init(&it, 2, ops);
    size_t es = pti_dtypes[dst->dtype].size;
    pti_iter_for_each(&it, COPY_GRAIN, copy_loop, &es);
}

/* ---- cat, flip, roll ------------------------------------------------------------------------- */

/* Fast cat: contiguous inputs, out a stack of rows at one stride. Row r of out (dims d.. of
 * one outer index) is row r of input 0, then row r of input 1, ...: each piece is one memcpy.
 * Work is split by output bytes across the pool. */
typedef struct cat_job {
    int n;
    const char *src[PTI_MAX_IN];
    int64_t rowb[PTI_MAX_IN]; /* bytes of one row of input k */
    char *dst;
    int64_t out_rowb, out_stride; /* bytes of one out row, bytes between out rows */
} cat_job;

static void cat_range(void *arg, int64_t begin, int64_t end)
{
    const cat_job *j = arg;
    int64_t r = begin / j->out_rowb, off = begin % j->out_rowb;
    while (begin < end) {
        int64_t pre = 0;
        int k = 0;
        while (off >= pre + j->rowb[k]) /* off < out_rowb, so k stays < n */
            pre += j->rowb[k++];
        for (; k < j->n && begin < end; k++) {
            int64_t in_off = off - pre, len = j->rowb[k] - in_off;
            if (len > end - begin)
                len = end - begin;
            memcpy(j->dst + r * j->out_stride + off, j->src[k] + r * j->rowb[k] + in_off,
                   (size_t)len);
            begin += len;
            off += len;
            pre += j->rowb[k];
        }
        r++;
        off = 0;
    }
}

/* Sets j->out_rowb/out_stride when dims d.. of out are dense and dims ..d-1 are rows at one
 * stride; false otherwise. */
static bool cat_out_rows(const pt_tensor *out, int d, cat_job *j)
{
    size_t es = pti_dtypes[out->dtype].size;
    int64_t expect = 1, outer_stride = -1, outer_size = 1;
    for (int i = out->ndim - 1; i >= d; i--) {
        if (out->shape[i] != 1 && out->stride[i] != expect)
            return false;
        expect *= out->shape[i];
    }
    for (int i = d - 1; i >= 0; i--) {
        if (out->shape[i] == 1)
            continue;
        if (outer_stride < 0)
            outer_stride = out->stride[i];
        else if (out->stride[i] != outer_stride * outer_size)
            return false;
        outer_size *= out->shape[i];
    }
    j->out_rowb = expect * (int64_t)es;
    j->out_stride = (outer_stride < 0 ? expect : outer_stride) * (int64_t)es;
    return outer_stride < 0 || outer_stride >= expect;
}

static bool cat_fast(const pti_call *c, int d)
{
    pt_tensor *out = c->out[0];
    cat_job j = {.n = c->n_in, .dst = pti_data(out)};
    if (out->numel == 0 || !cat_out_rows(out, d, &j))
        return false;
    size_t es = pti_dtypes[out->dtype].size;
    for (int k = 0; k < c->n_in; k++) {
        const pt_tensor *in = c->in[k];
        if (!pti_is_contiguous(in) || in->dtype != out->dtype)
            return false;
        j.src[k] = pti_data(in);
        j.rowb[k] = in->shape[d] * (j.out_rowb / (out->shape[d] * (int64_t)es)) * (int64_t)es;
    }
    int64_t rows = out->numel * (int64_t)es / j.out_rowb;
    pti_parallel_for(rows * j.out_rowb, COPY_GRAIN * 4, cat_range, &j);
    return true;
}

static pt_status cpu_cat(const pti_call *c)
{
    pt_tensor *out = c->out[0];
    int d = (int)c->scalar[0];
    if (cat_fast(c, d))
        return PT_OK;
    int64_t pos = 0;
    for (int k = 0; k < c->n_in; k++) {
        const pt_tensor *in = c->in[k];
        pt_tensor dst;
        int64_t shape[PT_MAX_DIMS];
        memcpy(shape, out->shape, sizeof shape);
        shape[d] = in->shape[d];
        geometry(&dst, out, shape, out->stride, out->offset + pos * out->stride[d]);
        copy_view(&dst, in);
        pos += in->shape[d];
    }
    return PT_OK;
}

static pt_status cpu_flip(const pti_call *c)
{
    const pt_tensor *in = c->in[0];
    int bits = (int)c->scalar[0];
    int64_t stride[PT_MAX_DIMS], offset = in->offset;
    for (int i = 0; i < in->ndim; i++) {
        stride[i] = in->stride[i];
        if (bits & (1 << i) && in->shape[i] > 1) {
            offset += (in->shape[i] - 1) * in->stride[i];
            stride[i] = -in->stride[i];
        }
    }
    pt_tensor src;
    geometry(&src, in, in->shape, stride, offset);
    copy_view(c->out[0], &src);
    return PT_OK;
}

/* out[i] = in[(i - s) mod n] along each rolled dim: with k rolled dims, 2^k block copies
 * (per dim: out[s:] <- in[:n-s] and out[:s] <- in[n-s:]). */
static pt_status cpu_roll(const pti_call *c)
{
    const pt_tensor *in = c->in[0];
    pt_tensor *out = c->out[0];
    const int64_t *shift = c->params;
    int rolled[PT_MAX_DIMS], k = 0;
    for (int i = 0; i < in->ndim; i++)
        if (shift[i] != 0)
            rolled[k++] = i;
    for (int piece = 0; piece < (1 << k); piece++) {
        int64_t shape[PT_MAX_DIMS];
        int64_t in_off = in->offset, out_off = out->offset;
        memcpy(shape, in->shape, sizeof shape);
        bool empty = false;
        for (int r = 0; r < k; r++) {
            int d = rolled[r];
            int64_t n = in->shape[d], s = shift[d];
            if (piece & (1 << r)) { /* out[:s] <- in[n-s:] */
                shape[d] = s;
                in_off += (n - s) * in->stride[d];
            } else { /* out[s:] <- in[:n-s] */
                shape[d] = n - s;
                out_off += s * out->stride[d];
            }
            empty |= shape[d] == 0;
        }
        if (empty)
            continue;
        pt_tensor src, dst;
        geometry(&src, in, shape, in->stride, in_off);
        geometry(&dst, out, shape, out->stride, out_off);
        copy_view(&dst, &src);
    }
    return PT_OK;
}

/* ---- repeat ---------------------------------------------------------------------------------- */

/* Rows of the output's last dim: each is the matching input row (index mod the input's
 * shape in every dim) repeated along the last dim. */
typedef struct rows_job {
    const pt_tensor *in;
    pt_tensor *out;
    int64_t k; /* tril/triu diagonal */
    bool upper;
} rows_job;

/* Byte offset of input row `r` for output row r (repeat: indices taken mod the input shape). */
static const char *repeat_src_row(const pt_tensor *in, const pt_tensor *out, int64_t r)
{
    int nd = out->ndim;
    size_t es = pti_dtypes[in->dtype].size;
    const char *p = pti_data(in);
    for (int d = nd - 2; d >= 0; d--) {
        int64_t idx = r % out->shape[d];
        r /= out->shape[d];
        p += (idx % in->shape[d]) * in->stride[d] * (int64_t)es;
    }
    return p;
}

static void repeat_rows(void *ctx, int64_t begin, int64_t end)
{
    const rows_job *j = ctx;
    const pt_tensor *in = j->in;
    pt_tensor *out = j->out;
    int nd = out->ndim;
    size_t es = pti_dtypes[in->dtype].size;
    int64_t L = nd ? out->shape[nd - 1] : 1, Lin = nd ? in->shape[nd - 1] : 1;
    int64_t sin = nd ? in->stride[nd - 1] * (int64_t)es : 0;
    char *base = pti_data(out);
    for (int64_t r = begin; r < end; r++) {
        char *dst = base + r * L * (int64_t)es;
        copy_elems(dst, (int64_t)es, repeat_src_row(in, out, r), sin, Lin, es);
        /* replicate the first copy by doubling */
        for (int64_t have = Lin; have < L;) {
            int64_t n = have < L - have ? have : L - have;
            memcpy(dst + have * (int64_t)es, dst, (size_t)n * es);
            have += n;
        }
    }
}

static pt_status cpu_repeat(const pti_call *c)
{
    pt_tensor *out = c->out[0];
    int nd = out->ndim;
    int64_t L = nd ? out->shape[nd - 1] : 1;
    if (L == 0 || out->numel == 0)
        return PT_OK;
    rows_job j = {.in = c->in[0], .out = out};
    pti_parallel_for(out->numel / L, COPY_GRAIN / L + 1, repeat_rows, &j);
    return PT_OK;
}

/* ---- tril / triu ----------------------------------------------------------------------------- */

static void triangle_rows(void *ctx, int64_t begin, int64_t end)
{
    const rows_job *j = ctx;
    const pt_tensor *in = j->in;
    int nd = in->ndim;
    size_t es = pti_dtypes[in->dtype].size;
    int64_t R = in->shape[nd - 2], C = in->shape[nd - 1];
    char *obase = pti_data(j->out);
    for (int64_t r = begin; r < end; r++) {
        int64_t i = r % R, rest = r / R;
        const char *src = (const char *)pti_data(in) + i * in->stride[nd - 2] * (int64_t)es;
        for (int d = nd - 3; d >= 0; d--) {
            src += (rest % in->shape[d]) * in->stride[d] * (int64_t)es;
            rest /= in->shape[d];
        }
        /* kept columns [lo, hi) */
        int64_t lo = 0, hi = C;
        if (j->upper)
            lo = i + j->k;
        else
            hi = i + j->k + 1;
        lo = lo < 0 ? 0 : lo > C ? C : lo;
        hi = hi < lo ? lo : hi > C ? C : hi;
        char *dst = obase + r * C * (int64_t)es;
        memset(dst, 0, (size_t)lo * es);
        copy_elems(dst + lo * (int64_t)es, (int64_t)es, src + lo * in->stride[nd - 1] * (int64_t)es,
                   in->stride[nd - 1] * (int64_t)es, hi - lo, es);
        memset(dst + hi * (int64_t)es, 0, (size_t)(C - hi) * es);
    }
}

static pt_status cpu_triangle(const pti_call *c)
{
    pt_tensor *out = c->out[0];
    int64_t C = out->shape[out->ndim - 1];
    if (out->numel == 0)
        return PT_OK;
    rows_job j = {
        .in = c->in[0], .out = out, .k = (int64_t)c->scalar[0], .upper = c->op == PTI_OP_triu};
    pti_parallel_for(out->numel / C, COPY_GRAIN / C + 1, triangle_rows, &j);
    return PT_OK;
}

void pti_cpu_register_shape(pti_kernel *table)
{
    table[PTI_OP_cat] = cpu_cat;
    table[PTI_OP_flip] = cpu_flip;
    table[PTI_OP_roll] = cpu_roll;
    table[PTI_OP_repeat] = cpu_repeat;
    table[PTI_OP_tril] = cpu_triangle;
    table[PTI_OP_triu] = cpu_triangle;
}
