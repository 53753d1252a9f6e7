/* CPU kernels of the index family, part 2: advanced indexing (index, index_put) and the
 * sorting kernels (sort/topk/argsort, unique). Sorting is a stable bottom-up merge sort of
 * (key, position) pairs, keys as double for floating dtypes and int64 for the rest, with NaN
 * ordered above +inf as in PyTorch. */
#include <math.h>
#include <string.h>

#include "../../ops/index.h"
#include "cpu.h"
#include "index_kern.h"

/* ---- advanced indexing ----------------------------------------------------------------------- */

/* Byte offset into t of each index position b: sum_j wrap(table[j][b]) * stride(dims[j]). */
static pt_status index_offsets(pti_op op, const pti_index_plan *p, const pt_tensor *t,
                               const pt_tensor *table, int64_t *off)
{
    int64_t es = (int64_t)pti_dtypes[t->dtype].size;
    const int64_t *tab = table ? (const int64_t *)pti_data(table) : NULL;
    for (int64_t b = 0; b < p->nb; b++)
        off[b] = 0;
    for (int j = 0; j < p->k; j++) {
        int d = p->dims[j];
        int64_t size = t->shape[d], stride = t->stride[d] * es;
        const int64_t *row = tab + (int64_t)j * p->nb;
        for (int64_t b = 0; b < p->nb; b++) {
            int64_t v = row[b];
            if (v < -size || v >= size)
                return pti_index_oob(op, v, d, size);
            off[b] += (v < 0 ? v + size : v) * stride;
        }
    }
    return PT_OK;
}

typedef struct adv_ctx {
    const pti_index_plan *p;
    const int64_t *off;
    pti_index_block pre, post;
    char *strided; /* t's element 0 */
    char *dense;   /* the contiguous side (result of index, values of index_put) */
    size_t es;
    pt_dtype dt;
    int mode; /* 0 read (index), 1 write, 2 accumulate */
} adv_ctx;

/* Rows r = (pre position, index position b); each moves one post block. */
static void adv_rows(void *arg, int64_t begin, int64_t end)
{
    const adv_ctx *c = arg;
    int64_t es = (int64_t)c->es, post_n = c->post.numel;
    bool run = c->post.nd == 1 && c->post.stride[0] == es; /* the post block is contiguous */
    for (int64_t r = begin; r < end; r++) {
        int64_t pre_i = r / c->p->nb, b = r % c->p->nb;
        char *s = c->strided + pti_index_block_offset(&c->pre, pre_i) + c->off[b];
        char *d = c->dense + r * post_n * es;
        if (c->mode == 0 && (run || c->post.nd == 0)) {
            memcpy(d, s, (size_t)(post_n * es));
        } else if (c->mode == 1 && (run || c->post.nd == 0)) {
            memcpy(s, d, (size_t)(post_n * es));
        } else {
            for (int64_t i = 0; i < post_n; i++) {
                char *e = s + pti_index_block_offset(&c->post, i);
                if (c->mode == 0)
                    memcpy(d + i * es, e, c->es);
                else if (c->mode == 1)
                    memcpy(e, d + i * es, c->es);
                else
                    pti_index_add_elem(e, d + i * es, c->dt, 1.0);
            }
        }
    }
}

static pt_status adv_run(const pti_call *c, pt_tensor *strided, pt_tensor *dense,
                         const pt_tensor *table, int mode)
{
    const pti_index_plan *p = c->params;
    int64_t nb = p->nb > 0 ? p->nb : 0;
    int64_t *off = pti_cpu_alloc(sizeof(int64_t) * (size_t)(nb ? nb : 1));
    if (!off)
        return pti_error(PT_ERR_OOM, "pt_%s: out of memory", pti_op_names[c->op]);
    pt_status st = index_offsets(c->op, p, strided, table, off);
    if (st == PT_OK) {
        adv_ctx a = {.p = p,
                     .off = off,
                     .strided = pti_data(strided),
                     .dense = pti_data(dense),
                     .es = pti_dtypes[strided->dtype].size,
                     .dt = strided->dtype,
                     .mode = mode};
        pti_index_block_init(&a.pre, strided, p->npre, p->pre);
        pti_index_block_init(&a.post, strided, p->npost, p->post);
        int64_t rows = a.pre.numel * nb;
        /* writes may hit one element twice: only reads run in parallel */
        int64_t grain = mode == 0 ? 4096 / (a.post.numel + 1) + 1 : INT64_MAX;
        if (rows > 0 && a.post.numel > 0)
            pti_parallel_for(rows, grain, adv_rows, &a);
    }
    pti_cpu_free(off, sizeof(int64_t) * (size_t)(nb ? nb : 1));
    return st;
}

static pt_status cpu_index(const pti_call *c)
{
    return adv_run(c, (pt_tensor *)c->in[0], c->out[0], c->in[1], 0);
}

static pt_status cpu_index_put(const pti_call *c)
{
    const pti_index_plan *p = c->params;
    return adv_run(c, c->out[0], (pt_tensor *)c->in[0], c->in[1], p->accumulate ? 2 : 1);
}

/* ---- sort
 * ----------------------------------------------------------------------------------------- */

typedef struct sort_item {
    union {
        double f;
        int64_t i;
    } key;
    int64_t pos;
} sort_item;

/* True when a must come before b (strictly). */
static inline bool before(const sort_item *a, const sort_item *b, bool is_float, bool desc)
{
    if (is_float) {
        double x = a->key.f, y = b->key.f;
        bool nx = isnan(x), ny = isnan(y);
        if (nx || ny)
            return desc ? (nx && !ny) : (!nx && ny);
        return desc ? x > y : x < y;
    }
    return desc ? a->key.i > b->key.i : a->key.i < b->key.i;
}

/* Stable bottom-up merge sort of v[0..n) using tmp[0..n). Returns the array holding the result. */
static sort_item *merge_sort(sort_item *v, sort_item *tmp, int64_t n, bool is_float, bool desc)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = before(&v[j], &v[i], is_float, desc) ? v[j++] : v[i++];
            while (i < mid)
                tmp[k++] = v[i++];
            while (j < hi)
                tmp[k++] = v[j++];
        }
        sort_item *s = v;
        v = tmp;
        tmp = s;
    }
    return v;
}

static void load_keys(sort_item *v, const char *src, int64_t n, int64_t step, pt_dtype dt)
{
    bool is_float = pti_dtypes[dt].is_floating;
    for (int64_t i = 0; i < n; i++) {
        const char *p = src + i * step;
        if (is_float)
            v[i].key.f = pti_load_f64(p, dt);
        else
            v[i].key.i = pti_load_i64(p, dt);
        v[i].pos = i;
    }
}

typedef struct sort_ctx {
    const char *src;
    char *vals;
    int64_t *idx;
    int64_t n, k, inner;
    pt_dtype dt;
    bool desc;
} sort_ctx;

/* Rows r = (outer o, inner i) of the [outer, n, inner] source. */
static void sort_rows(void *arg, int64_t begin, int64_t end)
{
    const sort_ctx *c = arg;
    size_t bytes = sizeof(sort_item) * (size_t)c->n * 2;
    sort_item *buf = pti_cpu_alloc(bytes);
    if (!buf)
        return; /* leaves the rows unwritten; reported by the caller's pre-allocation check */
    int64_t es = (int64_t)pti_dtypes[c->dt].size;
    bool is_float = pti_dtypes[c->dt].is_floating;
    for (int64_t r = begin; r < end; r++) {
        int64_t o = r / c->inner, in = r % c->inner;
        const char *s = c->src + (o * c->n * c->inner + in) * es;
        load_keys(buf, s, c->n, c->inner * es, c->dt);
        sort_item *sorted = merge_sort(buf, buf + c->n, c->n, is_float, c->desc);
        for (int64_t j = 0; j < c->k; j++) {
            int64_t at = (o * c->k + j) * c->inner + in;
            memcpy(c->vals + at * es, s + sorted[j].pos * c->inner * es, (size_t)es);
            c->idx[at] = sorted[j].pos;
        }
    }
    pti_cpu_free(buf, bytes);
}

static pt_status cpu_sort(const pti_call *c)
{
    const pt_tensor *src = c->in[0];
    int d = (int)c->scalar[0];
    sort_ctx s = {.src = pti_data(src),
                  .vals = pti_data(c->out[0]),
                  .idx = pti_data(c->out[1]),
                  .k = (int64_t)c->scalar[2],
                  .inner = 1,
                  .dt = src->dtype,
                  .desc = c->scalar[1] != 0};
    s.n = src->ndim ? src->shape[d] : 1;
    int64_t outer = 1;
    for (int i = 0; i < d; i++)
        outer *= src->shape[i];
    for (int i = d + 1; i < src->ndim; i++)
        s.inner *= src->shape[i];
    /* probe the scratch allocation once so a failure is reported, not skipped */
    size_t bytes = sizeof(sort_item) * (size_t)s.n * 2;
    void *probe = pti_cpu_alloc(bytes ? bytes : 1);
    if (!probe)
        return pti_error(PT_ERR_OOM, "pt_sort: out of memory for %lld keys", (long long)s.n);
    pti_cpu_free(probe, bytes ? bytes : 1);
    int64_t rows = outer * s.inner;
    pti_parallel_for(rows, 65536 / (s.n + 1) + 1, sort_rows, &s);
    return PT_OK;
}

/* ---- unique
 * -------------------------------------------------------------------------------------- */

static bool same_key(const sort_item *a, const sort_item *b, bool is_float)
{
    return is_float ? a->key.f == b->key.f : a->key.i == b->key.i;
}

static pt_status cpu_unique(const pti_call *c)
{
    const pt_tensor *src = c->in[0];
    int64_t n = src->numel, es = (int64_t)pti_dtypes[src->dtype].size;
    bool is_float = pti_dtypes[src->dtype].is_floating;
    size_t bytes = sizeof(sort_item) * (size_t)n * 2;
    sort_item *buf = pti_cpu_alloc(bytes);
    if (!buf)
        return pti_error(PT_ERR_OOM, "pt_unique: out of memory for %lld elements", (long long)n);
    const char *s = pti_data(src);
    load_keys(buf, s, n, es, src->dtype);
    sort_item *v = merge_sort(buf, buf + n, n, is_float, false);
    char *vals = pti_data(c->out[0]);
    int64_t *inv = pti_data(c->out[1]), *cnt = pti_data(c->out[2]);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || !same_key(&v[i], &v[i - 1], is_float)) {
            memcpy(vals + m * es, s + v[i].pos * es, (size_t)es);
            cnt[m++] = 0;
        }
        cnt[m - 1]++;
        inv[v[i].pos] = m - 1;
    }
    *(int64_t *)pti_data(c->out[3]) = m;
    pti_cpu_free(buf, bytes);
    return PT_OK;
}

void pti_cpu_register_index_adv(pti_kernel *table)
{
    table[PTI_OP_index] = cpu_index;
    table[PTI_OP_index_put] = cpu_index_put;
    table[PTI_OP_sort] = cpu_sort;
    table[PTI_OP_unique] = cpu_unique;
}
