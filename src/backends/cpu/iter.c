/* The strided N-operand iterator: broadcasting, dimension coalescing, and splitting a flat
 * element range across the thread pool while walking each operand by its byte strides. */
#include "cpu.h"

void pti_iter_init(pti_iter *it, int n_ops, const pt_tensor *const *ops)
{
    const pt_tensor *ref = ops[0];
    it->n_ops = n_ops;
    it->numel = ref->numel;
    int nd = ref->ndim;
    /* innermost first: iterator dim d is tensor dim nd-1-d */
    int out_d = 0;
    for (int d = 0; d < nd; d++) {
        int64_t size = ref->shape[nd - 1 - d];
        if (size == 1)
            continue; /* size-1 dims never move any pointer */
        it->shape[out_d] = size;
        for (int k = 0; k < n_ops; k++) {
            const pt_tensor *t = ops[k];
            int td = t->ndim - 1 - d;
            int64_t es = (int64_t)pti_dtypes[t->dtype].size;
            it->strides[out_d][k] = (td >= 0 && t->shape[td] != 1) ? t->stride[td] * es : 0;
        }
        out_d++;
    }
    /* merge dim d+1 into d when every operand is contiguous across the pair */
    int w = 0;
    for (int d = 0; d < out_d; d++) {
        if (w > 0) {
            bool mergeable = true;
            for (int k = 0; k < n_ops && mergeable; k++)
                mergeable = it->strides[d][k] == it->strides[w - 1][k] * it->shape[w - 1];
            if (mergeable) {
                it->shape[w - 1] *= it->shape[d];
                continue;
            }
        }
        if (w != d) {
            it->shape[w] = it->shape[d];
            for (int k = 0; k < n_ops; k++)
                it->strides[w][k] = it->strides[d][k];
        }
        w++;
    }
    if (w == 0) { /* a scalar or all size-1 dims: one element */
        it->shape[0] = ref->numel ? 1 : 0;
        for (int k = 0; k < n_ops; k++)
            it->strides[0][k] = 0;
        w = 1;
    }
    it->ndim = w;
    for (int k = 0; k < n_ops; k++)
        it->data[k] = pti_data(ops[k]);
}

typedef struct iter_job {
    const pti_iter *it;
    pti_loop_fn fn;
    void *ctx;
} iter_job;

static void iter_range(void *arg, int64_t begin, int64_t end)
{
    const iter_job *job = arg;
    const pti_iter *it = job->it;
    int n_ops = it->n_ops, nd = it->ndim;
    int64_t idx[PT_MAX_DIMS];
    char *ptr[PTI_ITER_MAX_OPS];
    /* the multi-index of `begin` */
    int64_t rem = begin;
    for (int d = 0; d < nd; d++) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    for (int k = 0; k < n_ops; k++) {
        ptr[k] = it->data[k];
        for (int d = 0; d < nd; d++)
            ptr[k] += idx[d] * it->strides[d][k];
    }
    int64_t inner_strides[PTI_ITER_MAX_OPS];
    for (int k = 0; k < n_ops; k++)
        inner_strides[k] = it->strides[0][k];
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = it->shape[0] - idx[0];
        if (n > end - pos)
            n = end - pos;
        job->fn(job->ctx, ptr, inner_strides, n);
        pos += n;
        if (pos >= end)
            break;
        /* advance: finish the inner run, then carry into outer dims */
        for (int k = 0; k < n_ops; k++)
            ptr[k] += n * it->strides[0][k];
        idx[0] += n;
        for (int d = 0; d < nd - 1 && idx[d] == it->shape[d]; d++) {
            idx[d] = 0;
            idx[d + 1]++;
            for (int k = 0; k < n_ops; k++)
                ptr[k] += it->strides[d + 1][k] - it->shape[d] * it->strides[d][k];
        }
    }
}

void pti_iter_for_each(const pti_iter *it, int64_t grain, pti_loop_fn fn, void *ctx)
{
    if (it->numel == 0)
        return;
    iter_job job = {it, fn, ctx};
    pti_parallel_for(it->numel, grain, iter_range, &job);
}
