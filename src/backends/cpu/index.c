/* CPU kernels of the index family, part 1: index_select/embedding, gather, scatter,
 * scatter_add, index_add, masked_fill, masked_select, count_nonzero, nonzero, one_hot
 * (advanced indexing, sort and unique are in index_adv.c). Data is moved by element size, so
 * every plain dtype shares one path; only the adding kernels look at the dtype. Every index
 * value read from a tensor is checked before any memory is touched. */
#include <string.h>

#include "cpu.h"
#include "index_kern.h"

/* ---- shared helpers -------------------------------------------------------------------------- */

pt_status pti_index_oob(pti_op op, int64_t v, int dim, int64_t size)
{
    return pti_error(PT_ERR_INDEX,
                     "pt_%s: index %lld is out of bounds for dimension %d with size %lld",
                     pti_op_names[op], (long long)v, dim, (long long)size);
}

pt_status pti_index_check_range(pti_op op, const int64_t *idx, int64_t n, int dim, int64_t size)
{
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= size)
            return pti_index_oob(op, idx[i], dim, size);
    return PT_OK;
}

void pti_index_add_elem(char *dst, const char *src, pt_dtype dt, double alpha)
{
    switch (dt) {
    case PT_FLOAT32: *(float *)dst += (float)alpha * *(const float *)src; break;
    case PT_FLOAT64: *(double *)dst += alpha * *(const double *)src; break;
    case PT_FLOAT16:
    case PT_BFLOAT16: {
        float a = (float)pti_load_f64(dst, dt), b = (float)pti_load_f64(src, dt);
        pti_store_f64(dst, dt, (double)(a + (float)alpha * b));
        break;
    }
    case PT_BOOL: *(uint8_t *)dst = *(uint8_t *)dst || (*(const uint8_t *)src && alpha != 0); break;
    default: { /* integers wrap around, as in PyTorch (unsigned math avoids overflow UB) */
        uint64_t a = (uint64_t)pti_load_i64(dst, dt), b = (uint64_t)pti_load_i64(src, dt);
        uint64_t al = (uint64_t)(int64_t)alpha;
        pti_store_i64(dst, dt, (int64_t)(a + al * b));
        break;
    }
    }
}

void pti_index_block_init(pti_index_block *bl, const pt_tensor *t, int n, const int *dims)
{
    int64_t es = (int64_t)pti_dtypes[t->dtype].size;
    bl->nd = 0;
    bl->numel = 1;
    for (int i = 0; i < n; i++) {
        int64_t size = t->shape[dims[i]], st = t->stride[dims[i]] * es;
        bl->numel *= size;
        if (size == 1)
            continue;
        if (bl->nd > 0 && bl->stride[bl->nd - 1] == st * size) { /* merge into the previous */
            bl->shape[bl->nd - 1] *= size;
            bl->stride[bl->nd - 1] = st;
            continue;
        }
        bl->shape[bl->nd] = size;
        bl->stride[bl->nd] = st;
        bl->nd++;
    }
}

int64_t pti_index_block_offset(const pti_index_block *bl, int64_t i)
{
    int64_t off = 0;
    for (int d = bl->nd - 1; d >= 0; d--) {
        off += (i % bl->shape[d]) * bl->stride[d];
        i /= bl->shape[d];
    }
    return off;
}

/* ---- index_select / embedding ---------------------------------------------------------------- */

typedef struct select_ctx {
    const char *src;
    char *dst;
    const int64_t *idx;
    int64_t nidx, dstride; /* dstride: bytes between positions along the selected dim */
    pti_index_block outer, inner;
    int64_t es;
    size_t row_bytes; /* inner numel * element size */
} select_ctx;

/* Copies one row of n bytes; fixed sizes for single elements (selection along the last dim). */
static inline void copy_row(char *d, const char *s, size_t n)
{
    switch (n) {
    case 1: *d = *s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    case 8: memcpy(d, s, 8); break;
    default: memcpy(d, s, n);
    }
}

/* Row r of the output = (outer position o, index position j): one inner block, a memcpy when
 * the source rows are contiguous. o and j are stepped, the outer offset recomputed once per o. */
static void select_rows(void *arg, int64_t begin, int64_t end)
{
    const select_ctx *c = arg;
    bool run = pti_index_block_is_run(&c->inner, c->es);
    int64_t o = begin / c->nidx, j = begin % c->nidx;
    const char *base = c->src + pti_index_block_offset(&c->outer, o);
    char *d = c->dst + begin * (int64_t)c->row_bytes;
    for (int64_t r = begin; r < end; r++, d += c->row_bytes) {
        const char *s = base + c->idx[j] * c->dstride;
        if (run)
            copy_row(d, s, c->row_bytes);
        else
            for (int64_t i = 0; i < c->inner.numel; i++)
                memcpy(d + i * c->es, s + pti_index_block_offset(&c->inner, i), (size_t)c->es);
        if (++j == c->nidx && r + 1 < end) {
            j = 0;
            base = c->src + pti_index_block_offset(&c->outer, ++o);
        }
    }
}

/* The common case (selecting along the outermost non-trivial dim, rows that are contiguous
 * runs): a memcpy per row, with no index arithmetic per row. */
static void select_rows_flat(void *arg, int64_t begin, int64_t end)
{
    const select_ctx *c = arg;
    size_t rb = c->row_bytes;
    char *d = c->dst + begin * (int64_t)rb;
    for (int64_t r = begin; r < end; r++, d += rb)
        copy_row(d, c->src + c->idx[r] * c->dstride, rb);
}

/* src (strided) viewed as [outer, size, inner] -> dst (contiguous) [outer, nidx, inner]. */
static pt_status select_along(pti_op op, const pt_tensor *src, const pt_tensor *index,
                              pt_tensor *dst, int d)
{
    const int64_t *idx = pti_data(index);
    pt_status st = pti_index_check_range(op, idx, index->numel, d, src->shape[d]);
    if (st != PT_OK)
        return st;
    int dims[PT_MAX_DIMS];
    for (int i = 0; i < src->ndim; i++)
        dims[i] = i;
    select_ctx c = {.src = pti_data(src),
                    .dst = pti_data(dst),
                    .idx = idx,
                    .nidx = index->numel,
                    .es = (int64_t)pti_dtypes[src->dtype].size};
    c.dstride = src->stride[d] * c.es;
    pti_index_block_init(&c.outer, src, d, dims);
    pti_index_block_init(&c.inner, src, src->ndim - d - 1, dims + d + 1);
    c.row_bytes = (size_t)(c.inner.numel * c.es);
    int64_t rows = c.outer.numel * index->numel;
    if (rows == 0 || c.row_bytes == 0)
        return PT_OK;
    int64_t grain = (int64_t)(65536 / c.row_bytes) + 1;
    bool flat = c.outer.numel == 1 && pti_index_block_is_run(&c.inner, c.es);
    pti_parallel_for(rows, grain, flat ? select_rows_flat : select_rows, &c);
    return PT_OK;
}

static pt_status cpu_index_select(const pti_call *c)
{
    return select_along(c->op, c->in[0], c->in[1], c->out[0], (int)c->scalar[0]);
}

static pt_status cpu_embedding(const pti_call *c)
{
    return select_along(c->op, c->in[0], c->in[1], c->out[0], 0);
}

/* ---- gather ---------------------------------------------------------------------------------- */

/* Walks the index tensor's shape in row-major order from flat position `begin`, keeping the
 * byte offsets of up to 3 operands (dim `skip` contributes nothing: the index value says). */
typedef struct walker {
    int nd;
    int64_t shape[PT_MAX_DIMS], coord[PT_MAX_DIMS];
    int nops;
    int64_t stride[3][PT_MAX_DIMS]; /* bytes */
    int64_t off[3];
} walker;

static void walker_init_shape(walker *w, int nd, const int64_t *shape, int nops,
                              const pt_tensor *const *ops, int skip, int64_t begin)
{
    w->nd = nd;
    w->nops = nops;
    for (int d = 0; d < w->nd; d++)
        w->shape[d] = shape[d];
    for (int k = 0; k < nops; k++) {
        int64_t es = (int64_t)pti_dtypes[ops[k]->dtype].size;
        for (int d = 0; d < w->nd; d++)
            w->stride[k][d] = d == skip && k < 2 ? 0 : ops[k]->stride[d] * es;
        w->off[k] = 0;
    }
    for (int d = w->nd - 1; d >= 0; d--) {
        w->coord[d] = w->shape[d] ? begin % w->shape[d] : 0;
        begin = w->shape[d] ? begin / w->shape[d] : 0;
        for (int k = 0; k < nops; k++)
            w->off[k] += w->coord[d] * w->stride[k][d];
    }
}

static void walker_init(walker *w, const pt_tensor *shape_of, int nops, const pt_tensor *const *ops,
                        int skip, int64_t begin)
{
    walker_init_shape(w, shape_of->ndim, shape_of->shape, nops, ops, skip, begin);
}

static inline void walker_next(walker *w)
{
    for (int d = w->nd - 1; d >= 0; d--) {
        for (int k = 0; k < w->nops; k++)
            w->off[k] += w->stride[k][d];
        if (++w->coord[d] < w->shape[d])
            return;
        for (int k = 0; k < w->nops; k++)
            w->off[k] -= w->stride[k][d] * w->shape[d];
        w->coord[d] = 0;
    }
}

static inline void copy_elem(char *dst, const char *src, size_t es)
{
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es);
    }
}

typedef struct gather_ctx {
    const pt_tensor *src, *index;
    pt_tensor *out;
    int d;
} gather_ctx;

/* ops: 0 = src (strided, dim d skipped), 1 = unused, 2 = index (contiguous, walked too). */
static void gather_range(void *arg, int64_t begin, int64_t end)
{
    const gather_ctx *c = arg;
    const pt_tensor *ops[3] = {c->src, c->out, c->index};
    walker w;
    walker_init(&w, c->index, 3, ops, c->d, begin);
    size_t es = pti_dtypes[c->src->dtype].size;
    const char *src = pti_data(c->src);
    char *out = (char *)pti_data(c->out);
    const char *idx = pti_data(c->index);
    int64_t dstride = c->src->stride[c->d] * (int64_t)es;
    for (int64_t i = begin; i < end; i++) {
        int64_t v = *(const int64_t *)(idx + w.off[2]);
        copy_elem(out + i * (int64_t)es, src + w.off[0] + v * dstride, es);
        walker_next(&w);
    }
}

static pt_status cpu_gather(const pti_call *c)
{
    int d = (int)c->scalar[0];
    const pt_tensor *src = c->in[0], *index = c->in[1];
    pt_status st = pti_index_check_range(c->op, pti_data(index), index->numel, d, src->shape[d]);
    if (st != PT_OK || index->numel == 0)
        return st;
    gather_ctx g = {src, index, c->out[0], d};
    pti_parallel_for(index->numel, 16384, gather_range, &g);
    return PT_OK;
}

/* ---- scatter / scatter_add ------------------------------------------------------------------- */

/* Serial: duplicates must apply in a fixed order (and add up exactly once each). */
static pt_status scatter_common(const pti_call *c, bool add)
{
    pt_tensor *self = c->out[0];
    const pt_tensor *index = c->in[0], *src = c->in[1];
    int d = (int)c->scalar[0];
    pt_status st = pti_index_check_range(c->op, pti_data(index), index->numel, d, self->shape[d]);
    if (st != PT_OK || index->numel == 0)
        return st;
    const pt_tensor *ops[3] = {self, src ? src : index, index};
    walker w;
    walker_init(&w, index, 3, ops, d, 0);
    if (!src) /* scalar form: operand 1 unused */
        for (int k = 0; k < PT_MAX_DIMS; k++)
            w.stride[1][k] = 0, w.off[1] = 0;
    else
        for (int k = 0; k < w.nd; k++) /* src is walked on every dim, including d */
            w.stride[1][k] = src->stride[k] * (int64_t)pti_dtypes[src->dtype].size;
    w.off[1] = 0;
    for (int k = 0; src && k < w.nd; k++)
        w.off[1] += w.coord[k] * w.stride[1][k];
    size_t es = pti_dtypes[self->dtype].size;
    unsigned char value[16] = {0};
    pti_store_f64(value, self->dtype, c->scalar[1]);
    char *base = (char *)pti_data(self);
    const char *sbase = src ? (const char *)pti_data(src) : NULL;
    const char *idx = pti_data(index);
    int64_t dstride = self->stride[d] * (int64_t)es;
    for (int64_t i = 0; i < index->numel; i++) {
        int64_t v = *(const int64_t *)(idx + w.off[2]);
        char *dst = base + w.off[0] + v * dstride;
        const char *s = src ? sbase + w.off[1] : (const char *)value;
        if (add)
            pti_index_add_elem(dst, s, self->dtype, 1.0);
        else
            copy_elem(dst, s, es);
        walker_next(&w);
    }
    return PT_OK;
}

static pt_status cpu_scatter(const pti_call *c)
{
    return scatter_common(c, false);
}
static pt_status cpu_scatter_add(const pti_call *c)
{
    return scatter_common(c, true);
}

/* ---- index_add ------------------------------------------------------------------------------- */

typedef struct index_add_ctx {
    pt_tensor *self;
    const pt_tensor *index, *src;
    int d;
    double alpha;
    int64_t slice_shape[PT_MAX_DIMS]; /* self's shape with dim d = 1 */
} index_add_ctx;

/* Slice positions [begin, end): for each index j, self.select(d, idx[j])[pos] +=
 * alpha * src.select(d, j)[pos]. Ranges are disjoint, so threads never write one element. */
static void index_add_range(void *arg, int64_t begin, int64_t end)
{
    const index_add_ctx *c = arg;
    const pt_tensor *ops[2] = {c->self, c->src};
    int64_t es = (int64_t)pti_dtypes[c->self->dtype].size;
    const int64_t *idx = pti_data(c->index);
    char *base = (char *)pti_data(c->self);
    const char *sbase = pti_data(c->src);
    for (int64_t j = 0; j < c->index->numel; j++) {
        walker w;
        walker_init_shape(&w, c->self->ndim, c->slice_shape, 2, ops, -1, begin);
        char *dst0 = base + idx[j] * c->self->stride[c->d] * es;
        const char *src0 = sbase + j * c->src->stride[c->d] * es;
        for (int64_t i = begin; i < end; i++) {
            pti_index_add_elem(dst0 + w.off[0], src0 + w.off[1], c->self->dtype, c->alpha);
            walker_next(&w);
        }
    }
}

static pt_status cpu_index_add(const pti_call *c)
{
    index_add_ctx a = {c->out[0], c->in[0], c->in[1], (int)c->scalar[0], c->scalar[1], {0}};
    pt_status st =
        pti_index_check_range(c->op, pti_data(a.index), a.index->numel, a.d, a.self->shape[a.d]);
    if (st != PT_OK || a.self->shape[a.d] == 0 || a.index->numel == 0)
        return st;
    memcpy(a.slice_shape, a.self->shape, sizeof(int64_t) * (size_t)a.self->ndim);
    a.slice_shape[a.d] = 1;
    int64_t slice_numel = a.self->numel / a.self->shape[a.d];
    int64_t grain = PTI_GRAIN_ELEMENTWISE / a.index->numel + 1;
    pti_parallel_for(slice_numel, grain, index_add_range, &a);
    return PT_OK;
}

/* ---- masked_fill / masked_select / count_nonzero / nonzero
 * ---------------------------------------- */

typedef struct fill_ctx {
    unsigned char value[16];
    size_t es;
} fill_ctx;

static void masked_fill_loop(void *arg, char **data, const int64_t *strides, int64_t n)
{
    const fill_ctx *f = arg;
    for (int64_t i = 0; i < n; i++) {
        const char *src = *(const uint8_t *)(data[2] + i * strides[2]) ? (const char *)f->value
                                                                       : data[1] + i * strides[1];
        copy_elem(data[0] + i * strides[0], src, f->es);
    }
}

static pt_status cpu_masked_fill(const pti_call *c)
{
    pt_tensor *out = c->out[0];
    fill_ctx f = {{0}, pti_dtypes[out->dtype].size};
    pti_store_f64(f.value, out->dtype, c->scalar[0]);
    const pt_tensor *ops[3] = {out, c->in[0], c->in[1]};
    pti_iter it;
    pti_iter_init(&it, 3, ops);
    pti_iter_for_each(&it, PTI_GRAIN_ELEMENTWISE, masked_fill_loop, &f);
    return PT_OK;
}

static inline bool elem_nonzero(const char *p, pt_dtype dt)
{
    switch (dt) {
    case PT_FLOAT32: return *(const float *)p != 0.0f;
    case PT_FLOAT64: return *(const double *)p != 0.0;
    case PT_FLOAT16:
    case PT_BFLOAT16: return (*(const uint16_t *)p & 0x7fff) != 0;
    case PT_INT64: return *(const int64_t *)p != 0;
    case PT_INT32: return *(const int32_t *)p != 0;
    case PT_INT16: return *(const int16_t *)p != 0;
    default: return *(const uint8_t *)p != 0;
    }
}

typedef struct select_out {
    size_t es;
    char *dst;
    int64_t n, cap;
} select_out;

static void masked_select_loop(void *arg, char **data, const int64_t *strides, int64_t n)
{
    select_out *s = arg;
    for (int64_t i = 0; i < n; i++)
        if (*(const uint8_t *)(data[1] + i * strides[1]) && s->n < s->cap)
            copy_elem(s->dst + (s->n++) * (int64_t)s->es, data[0] + i * strides[0], s->es);
}

static pt_status cpu_masked_select(const pti_call *c)
{
    pt_tensor *out = c->out[0];
    select_out s = {pti_dtypes[out->dtype].size, pti_data(out), 0, out->numel};
    const pt_tensor *ops[2] = {c->in[0], c->in[1]};
    pti_iter it;
    pti_iter_init(&it, 2, ops);
    pti_iter_for_each(&it, INT64_MAX, masked_select_loop, &s); /* serial: keeps the order */
    return PT_OK;
}

typedef struct count_ctx {
    pt_dtype dt;
    _Atomic int64_t total;
} count_ctx;

static void count_loop(void *arg, char **data, const int64_t *strides, int64_t n)
{
    count_ctx *c = arg;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        k += elem_nonzero(data[0] + i * strides[0], c->dt);
    atomic_fetch_add(&c->total, k);
}

static pt_status cpu_count_nonzero(const pti_call *c)
{
    count_ctx ctx = {c->in[0]->dtype, 0};
    const pt_tensor *ops[1] = {c->in[0]};
    pti_iter it;
    pti_iter_init(&it, 1, ops);
    pti_iter_for_each(&it, PTI_GRAIN_ELEMENTWISE, count_loop, &ctx);
    *(int64_t *)pti_data(c->out[0]) = atomic_load(&ctx.total);
    return PT_OK;
}

static pt_status cpu_nonzero(const pti_call *c)
{
    const pt_tensor *t = c->in[0];
    pt_tensor *out = c->out[0];
    int64_t *dst = pti_data(out), cap = out->shape[0], n = 0;
    const pt_tensor *ops[1] = {t};
    walker w;
    walker_init(&w, t, 1, ops, -1, 0);
    const char *base = pti_data(t);
    for (int64_t i = 0; i < t->numel && n < cap; i++) {
        if (elem_nonzero(base + w.off[0], t->dtype)) {
            memcpy(dst + n * t->ndim, w.coord, sizeof(int64_t) * (size_t)t->ndim);
            n++;
        }
        walker_next(&w);
    }
    return PT_OK;
}

/* ---- one_hot
 * ------------------------------------------------------------------------------------- */

static pt_status cpu_index_max(const pti_call *c)
{
    const int64_t *v = pti_data(c->in[0]);
    int64_t m = -1;
    for (int64_t i = 0; i < c->in[0]->numel; i++)
        if (v[i] > m)
            m = v[i];
    *(int64_t *)pti_data(c->out[0]) = m;
    return PT_OK;
}

static pt_status cpu_one_hot(const pti_call *c)
{
    const int64_t *v = pti_data(c->in[0]);
    pt_tensor *out = c->out[0];
    int64_t n = out->shape[0], classes = out->shape[1];
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0)
            return pti_error(PT_ERR_INDEX,
                             "pt_one_hot: class values must be non-negative, got %lld",
                             (long long)v[i]);
        if (v[i] >= classes)
            return pti_error(PT_ERR_INDEX,
                             "pt_one_hot: class value %lld must be smaller than num_classes (%lld)",
                             (long long)v[i], (long long)classes);
    }
    int64_t *dst = pti_data(out);
    memset(dst, 0, (size_t)(n * classes) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++)
        dst[i * classes + v[i]] = 1;
    return PT_OK;
}

void pti_cpu_register_index(pti_kernel *table)
{
    table[PTI_OP_index_select] = cpu_index_select;
    table[PTI_OP_embedding] = cpu_embedding;
    table[PTI_OP_gather] = cpu_gather;
    table[PTI_OP_scatter] = cpu_scatter;
    table[PTI_OP_scatter_add] = cpu_scatter_add;
    table[PTI_OP_index_add] = cpu_index_add;
    table[PTI_OP_masked_fill] = cpu_masked_fill;
    table[PTI_OP_masked_select] = cpu_masked_select;
    table[PTI_OP_count_nonzero] = cpu_count_nonzero;
    table[PTI_OP_nonzero] = cpu_nonzero;
    table[PTI_OP_index_max] = cpu_index_max;
    table[PTI_OP_one_hot] = cpu_one_hot;
    pti_cpu_register_index_adv(table);
}
