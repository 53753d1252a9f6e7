/* DataLoader: batches of samples in sampler order, collated into [B, ...] tensors. With
 * num_workers > 0, worker threads claim batch numbers in order and fill a ring of `prefetch`
 * slots; a worker may only start batch b once b < next batch to return + prefetch, so the
 * queue is bounded and the order of batches never depends on thread timing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

#define MAX_FIELDS (PTI_MAX_IN * 2)

typedef struct slot {
    bool ready;
    pt_status status;
    char msg[512];
    pt_tensor *fields[MAX_FIELDS];
} slot;

struct pt_dataloader {
    pt_dataset *ds;
    pt_dataloader_opts o;
    int64_t n, nbatches;
    uint64_t seed, epoch;
    int64_t *order; /* this epoch's sample order */
    /* epoch state */
    bool started;
    int64_t next_return; /* next batch handed to the caller */
    /* workers */
    pthread_mutex_t lock;
    pthread_cond_t work_cv, ready_cv;
    pthread_t *threads;
    int nthreads;
    bool stop;
    int64_t next_claim;
    slot *slots;
};

static void free_fields(pt_tensor **f, int n)
{
    for (int k = 0; k < n; k++) {
        pt_release(f[k]);
        f[k] = NULL;
    }
}

/* Built-in augmentation and the user transform for the sample at `pos` of the epoch. */
static pt_status transform_sample(pt_dataloader *dl, int64_t pos, pt_tensor **f)
{
    uint64_t seed =
        pti_data_rand64(dl->seed + 0x9E3779B97F4A7C15ULL, (dl->epoch << 40) + (uint64_t)pos);
    if (dl->o.crop_padding > 0) {
        pt_tensor *t = pt_transform_random_crop(f[0], dl->o.crop_padding, seed);
        if (!t)
            return pt_last_status();
        pt_release(f[0]);
        f[0] = t;
    }
    if (dl->o.hflip) {
        pt_tensor *t = pt_transform_random_hflip(f[0], seed);
        if (!t)
            return pt_last_status();
        pt_release(f[0]);
        f[0] = t;
    }
    if (dl->o.transform)
        return dl->o.transform(dl->o.transform_ctx, f, seed);
    return PT_OK;
}

/* Copies sample field `t` into row r of the batch tensor `b` (created from the first sample). */
static pt_status collate_into(pt_tensor **b, const pt_tensor *t, int64_t r, int64_t bs, int k)
{
    if (!PTI_CHECK_ARG(t, "pt_dataloader", "sample field"))
        return pt_last_status();
    if (!pti_is_cpu(t) || pti_dtypes[t->dtype].is_block || t->ndim >= PT_MAX_DIMS)
        return pti_error(PT_ERR_UNSUPPORTED, "pt_dataloader: cannot collate field %d %s", k,
                         pti_tensor_desc(t));
    if (!*b) {
        int64_t shape[PT_MAX_DIMS];
        shape[0] = bs;
        memcpy(shape + 1, t->shape, (size_t)t->ndim * sizeof(int64_t));
        *b = pti_tensor_new(t->ndim + 1, shape, t->dtype, pt_cpu());
        if (!*b)
            return pt_last_status();
    }
    pt_tensor *bt = *b;
    if (bt->dtype != t->dtype || bt->ndim != t->ndim + 1 ||
        memcmp(bt->shape + 1, t->shape, (size_t)t->ndim * sizeof(int64_t)) != 0)
        return pti_error(PT_ERR_SHAPE,
                         "pt_dataloader: field %d of a sample is %s but the first "
                         "sample of the batch had %s",
                         k, pti_tensor_desc(t), pti_shape_str(bt->ndim - 1, bt->shape + 1));
    pt_tensor *c = pt_contiguous(t);
    if (!c)
        return pt_last_status();
    size_t bytes = (size_t)t->numel * pt_dtype_size(t->dtype);
    if (bytes)
        memcpy((char *)pti_data(bt) + (size_t)r * bytes, pti_data(c), bytes);
    pt_release(c);
    return PT_OK;
}

/* Loads batch b of the current epoch into out (new references); on error none are kept. */
static pt_status produce_batch(pt_dataloader *dl, int64_t b, pt_tensor **out)
{
    int nf = dl->ds->nfields;
    int64_t bs = dl->o.batch_size, start = b * bs;
    int64_t end = start + bs < dl->n ? start + bs : dl->n;
    pt_tensor *f[MAX_FIELDS] = {0};
    pt_status st = PT_OK;
    for (int k = 0; k < nf; k++)
        out[k] = NULL;
    for (int64_t p = start; p < end && st == PT_OK; p++) {
        st = pt_dataset_get(dl->ds, dl->order[p], f);
        if (st == PT_OK)
            st = transform_sample(dl, p, f);
        for (int k = 0; k < nf && st == PT_OK; k++)
            st = collate_into(&out[k], f[k], p - start, end - start, k);
        free_fields(f, nf);
    }
    if (st != PT_OK)
        free_fields(out, nf);
    return st;
}

static void *worker_main(void *arg)
{
    pt_dataloader *dl = arg;
    int nf = dl->ds->nfields;
    pthread_mutex_lock(&dl->lock);
    while (!dl->stop && dl->next_claim < dl->nbatches) {
        if (dl->next_claim >= dl->next_return + dl->o.prefetch) {
            pthread_cond_wait(&dl->work_cv, &dl->lock);
            continue;
        }
        int64_t b = dl->next_claim++;
        pthread_mutex_unlock(&dl->lock);
        pt_tensor *f[MAX_FIELDS];
        pt_status st = produce_batch(dl, b, f);
        char msg[512] = "";
        if (st != PT_OK) {
            snprintf(msg, sizeof msg, "%s", pt_last_error());
            pt_clear_error();
        }
        pthread_mutex_lock(&dl->lock);
        if (dl->stop) {
            free_fields(f, nf);
            break;
        }
        slot *s = &dl->slots[b % dl->o.prefetch];
        s->status = st;
        memcpy(s->msg, msg, sizeof msg);
        memcpy(s->fields, f, sizeof(pt_tensor *) * (size_t)nf);
        s->ready = true;
        pthread_cond_broadcast(&dl->ready_cv);
    }
    pthread_mutex_unlock(&dl->lock);
    return NULL;
}

static void stop_workers(pt_dataloader *dl)
{
    pthread_mutex_lock(&dl->lock);
    dl->stop = true;
    pthread_cond_broadcast(&dl->work_cv);
    pthread_mutex_unlock(&dl->lock);
    for (int i = 0; i < dl->nthreads; i++)
        pthread_join(dl->threads[i], NULL);
    dl->nthreads = 0;
    dl->stop = false;
    for (int i = 0; dl->slots && i < dl->o.prefetch; i++) {
        if (dl->slots[i].ready)
            free_fields(dl->slots[i].fields, dl->ds->nfields);
        dl->slots[i].ready = false;
    }
}

static void start_epoch(pt_dataloader *dl)
{
    pt_sampler_order(dl->n, dl->o.shuffle, dl->seed, dl->epoch, dl->order);
    dl->next_return = 0;
    dl->next_claim = 0;
    dl->started = true;
    for (int i = 0; i < dl->o.num_workers; i++) {
        if (pthread_create(&dl->threads[i], NULL, worker_main, dl) != 0)
            break; /* fewer threads (none: the caller's thread loads) */
        dl->nthreads++;
    }
}

static void end_epoch(pt_dataloader *dl)
{
    stop_workers(dl);
    dl->started = false;
    dl->epoch++;
}

pt_dataloader *pt_dataloader_new(pt_dataset *ds, const pt_dataloader_opts *opts)
{
    if (!ds)
        return pti_error_null(PT_ERR_NULL, "pt_dataloader_new: dataset is NULL");
    pt_dataloader_opts o = {0};
    if (opts)
        o = *opts;
    if (o.batch_size == 0)
        o.batch_size = 1;
    if (o.batch_size < 0 || o.num_workers < 0 || o.num_workers > 256 || o.prefetch < 0 ||
        o.crop_padding < 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_dataloader_new: bad options (batch_size "
                              "%lld, num_workers %d, prefetch %d, crop_padding %lld)",
                              (long long)o.batch_size, o.num_workers, o.prefetch,
                              (long long)o.crop_padding);
    if (o.prefetch == 0)
        o.prefetch = o.num_workers ? 2 * o.num_workers : 1;
    pt_dataloader *dl = pti_calloc(1, sizeof *dl);
    if (!dl)
        return NULL;
    dl->o = o;
    dl->n = pt_dataset_len(ds);
    dl->nbatches = o.drop_last ? dl->n / o.batch_size : (dl->n + o.batch_size - 1) / o.batch_size;
    if (o.has_seed) {
        dl->seed = o.seed;
    } else {
        pti_rng_stream r = pti_rng_reserve(1);
        dl->seed = pti_data_rand64(r.key, r.base);
    }
    dl->order = pti_malloc((size_t)(dl->n ? dl->n : 1) * sizeof(int64_t));
    dl->threads = pti_calloc((size_t)(o.num_workers ? o.num_workers : 1), sizeof(pthread_t));
    dl->slots = pti_calloc((size_t)o.prefetch, sizeof(slot));
    if (!dl->order || !dl->threads || !dl->slots) {
        free(dl->order);
        free(dl->threads);
        free(dl->slots);
        free(dl);
        return NULL;
    }
    pthread_mutex_init(&dl->lock, NULL);
    pthread_cond_init(&dl->work_cv, NULL);
    pthread_cond_init(&dl->ready_cv, NULL);
    dl->ds = pt_dataset_retain(ds);
    return dl;
}

int64_t pt_dataloader_num_batches(const pt_dataloader *dl)
{
    return dl ? dl->nbatches : -1;
}

int64_t pt_dataloader_batch_size(const pt_dataloader *dl)
{
    return dl ? dl->o.batch_size : -1;
}

int pt_dataloader_next(pt_dataloader *dl, pt_tensor **fields)
{
    if (!dl || !fields)
        return pti_error(PT_ERR_NULL, "pt_dataloader_next: NULL loader or fields"), -1;
    int nf = dl->ds->nfields;
    if (!dl->started)
        start_epoch(dl);
    if (dl->next_return >= dl->nbatches) {
        end_epoch(dl);
        return 0;
    }
    if (dl->nthreads == 0) {
        pt_status st = produce_batch(dl, dl->next_return++, fields);
        return st == PT_OK ? 1 : -1;
    }
    pthread_mutex_lock(&dl->lock);
    slot *s = &dl->slots[dl->next_return % dl->o.prefetch];
    while (!s->ready)
        pthread_cond_wait(&dl->ready_cv, &dl->lock);
    pt_status st = s->status;
    char msg[sizeof s->msg];
    memcpy(msg, s->msg, sizeof msg); /* the slot is reused once we unlock */
    memcpy(fields, s->fields, sizeof(pt_tensor *) * (size_t)nf);
    s->ready = false;
    dl->next_return++;
    pthread_cond_broadcast(&dl->work_cv);
    pthread_mutex_unlock(&dl->lock);
    if (st != PT_OK) {
        pti_error(st, "%s", msg);
        return -1;
    }
    for (int k = 0; k < nf; k++)
        pti_scope_track(fields[k]); /* made on a worker thread: now owned by the caller's scope */
    return 1;
}

pt_status pt_dataloader_reset(pt_dataloader *dl)
{
    if (!dl)
        return pti_error(PT_ERR_NULL, "pt_dataloader_reset: NULL loader");
    if (dl->started)
        end_epoch(dl);
    return PT_OK;
}

void pt_dataloader_free(pt_dataloader *dl)
{
    if (!dl)
        return;
    stop_workers(dl);
    pthread_mutex_destroy(&dl->lock);
    pthread_cond_destroy(&dl->work_cv);
    pthread_cond_destroy(&dl->ready_cv);
    pt_dataset_free(dl->ds);
    free(dl->order);
    free(dl->threads);
    free(dl->slots);
    free(dl);
}
