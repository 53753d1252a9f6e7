/* A classifier's training epoch and evaluation pass (pt_train_epoch, pt_evaluate in
 * train_utils.h): the loop every example program used to write out, written once. It sits in
 * the optim layer because it drives an optimizer and a scheduler; it uses only public
 * functions of the layers below (data loaders, nn modules, ops, autograd). */
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "../core/internal.h"

#include <prometorch/prometorch.h>
#include <prometorch/train_utils.h>

static const pt_loop_opts default_loop_opts = {0};

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The number of batches this pass runs: the loader's, or max_batches when smaller. */
static int64_t pass_length(const pt_dataloader *dl, const pt_loop_opts *o)
{
    int64_t n = pt_dataloader_num_batches(dl);
    return o->max_batches > 0 && o->max_batches < n ? o->max_batches : n;
}

/* Forward, loss, backward and optimizer step on one batch; *loss gets the batch's loss. Runs
 * in the caller's scope, which frees every tensor made here. */
static pt_status train_batch(pt_module *model, pt_optim *opt, pt_tensor *const *batch,
                             const pt_loop_opts *o, double *loss_value)
{
    pt_tensor *x = pt_to(batch[0], o->device);
    pt_tensor *y = pt_to(batch[1], o->device);
    pt_tensor *loss = pt_cross_entropy(pt_nn_forward(model, x), y);
    if (!loss)
        return pt_last_status();
    *loss_value = pt_item(loss);
    pt_optim_zero_grad(opt);
    pt_status st = pt_backward(loss, NULL, false, false);
    if (st == PT_OK)
        st = pt_optim_step(opt);
    if (st == PT_OK && o->per_batch_scheduler)
        st = pt_lr_scheduler_step(o->per_batch_scheduler);
    return st;
}

/* A batch as the loader gives it: room for every field a dataset may have (the loader's own
 * bound), of which the loops use the first two. */
#define LOOP_MAX_FIELDS (PTI_MAX_IN * 2)

/* Takes the next batch into batch[0..1]; an epoch that ends before `step` of `steps` is an
 * error (the loader's length said otherwise), as is a batch without (input, target). */
static pt_status next_batch(const char *op, pt_dataloader *dl, pt_tensor **batch, int64_t step,
                            int64_t steps)
{
    for (int k = 0; k < LOOP_MAX_FIELDS; k++)
        batch[k] = NULL;
    int got = pt_dataloader_next(dl, batch);
    if (got == 1 && !batch[1])
        return pti_error(PT_ERR_INVALID_ARG, "%s: batches need two fields (inputs, targets)", op);
    if (got == 1)
        return PT_OK;
    if (got < 0)
        return pt_last_status();
    return pti_error(PT_ERR_RUNTIME, "%s: the loader ended at batch %lld of %lld", op,
                     (long long)step, (long long)steps);
}

pt_status pt_train_epoch(pt_module *model, pt_optim *opt, pt_dataloader *train,
                         const pt_loop_opts *opts, pt_loop_result *result)
{
    if (!model || !opt || !train)
        return pti_error(PT_ERR_NULL, "pt_train_epoch: NULL model, optimizer or loader");
    const pt_loop_opts *o = opts ? opts : &default_loop_opts;
    int64_t steps = pass_length(train, o);
    pt_progress *bar = pt_progress_new_ex(o->label ? o->label : "train", steps > 0 ? steps : 1,
                                          pt_dataloader_batch_size(train), &o->progress);
    if (!bar)
        return pt_last_status();
    pt_nn_train(model, true);
    pt_status st = PT_OK;
    int64_t step = 0, samples = 0;
    while (st == PT_OK && step < steps) {
        double loss = NAN;
        pt_scope_begin(); /* everything of this batch is freed at pt_scope_end */
        pt_tensor *batch[LOOP_MAX_FIELDS];
        st = next_batch("pt_train_epoch", train, batch, step + 1, steps);
        if (st == PT_OK) {
            samples += pt_size(batch[0], 0);
            st = train_batch(model, opt, batch, o, &loss);
        }
        pt_scope_end();
        if (st == PT_OK)
            pt_progress_update(bar, ++step, loss);
    }
    /* Ends the epoch whether max_batches cut it short or every batch was taken (the loader
     * would otherwise answer its end-of-epoch 0 to the next pass's first call). */
    if (st == PT_OK)
        st = pt_dataloader_reset(train);
    if (result)
        *result = (pt_loop_result){.mean_loss = pt_progress_mean_loss(bar),
                                   .batches = step,
                                   .samples = samples,
                                   .seconds = pt_progress_elapsed(bar)};
    if (st == PT_OK)
        pt_progress_finish(bar);
    else
        pt_progress_free(bar);
    return st;
}

/* Adds one batch's summed loss, hits and size to the totals. */
static pt_status evaluate_batch(pt_module *model, pt_tensor *const *batch, pt_device dev,
                                double *loss_sum, int64_t *correct, int64_t *total)
{
    pt_tensor *y = pt_to(batch[1], dev);
    pt_tensor *logits = pt_nn_forward(model, pt_to(batch[0], dev));
    pt_cross_entropy_opts sum = {.reduction = PT_REDUCTION_SUM};
    pt_tensor *loss = pt_cross_entropy_ex(logits, y, &sum);
    pt_tensor *hits = pt_sum(pt_eq(pt_argmax(logits, 1, false), y));
    if (!loss || !hits)
        return pt_last_status();
    *loss_sum += pt_item(loss);
    *correct += (int64_t)pt_item(hits);
    *total += pt_size(y, 0);
    return PT_OK;
}

pt_status pt_evaluate(pt_module *model, pt_dataloader *test, const pt_loop_opts *opts,
                      pt_loop_result *result)
{
    if (!model || !test || !result)
        return pti_error(PT_ERR_NULL, "pt_evaluate: NULL model, loader or result");
    const pt_loop_opts *o = opts ? opts : &default_loop_opts;
    int64_t steps = pass_length(test, o), step = 0, correct = 0, total = 0;
    double loss_sum = 0, start = monotonic_seconds();
    pt_nn_eval(model);
    pt_status st = PT_OK;
    pt_no_grad_begin();
    while (st == PT_OK && step < steps) {
        pt_scope_begin();
        pt_tensor *batch[LOOP_MAX_FIELDS];
        st = next_batch("pt_evaluate", test, batch, step + 1, steps);
        if (st == PT_OK)
            st = evaluate_batch(model, batch, o->device, &loss_sum, &correct, &total);
        pt_scope_end();
        step += st == PT_OK;
    }
    pt_no_grad_end();
    if (st == PT_OK)
        st = pt_dataloader_reset(test);
    *result = (pt_loop_result){.mean_loss = total ? loss_sum / (double)total : 0,
                               .accuracy = total ? (double)correct / (double)total : 0,
                               .batches = step,
                               .samples = total,
                               .seconds = monotonic_seconds() - start};
    return st;
}
