/* PromeTorch training utilities: a classifier's training and evaluation loop (one epoch each,
 * with a progress bar), the progress bar itself and an SVG line-chart writer for loss/accuracy
 * curves. They keep the example programs (examples/) short readable files and are available to
 * any training program.
 *
 *     pt_progress *bar = pt_progress_new("epoch 1/5", n_batches, batch_size);
 *     for (int64_t step = 1; step <= n_batches; step++) {
 *         ... train one batch ...
 *         pt_progress_update(bar, step, loss);
 *     }
 *     pt_progress_finish(bar);                     (prints the last line and frees the bar)
 *
 * Neither has a PyTorch equivalent in torch itself (tqdm and matplotlib play these roles in
 * Python programs). Not thread-safe: use a bar from one thread. */
#ifndef PROMETORCH_TRAIN_UTILS_H
#define PROMETORCH_TRAIN_UTILS_H

#include <stdio.h>

#include "data.h"
#include "lr_scheduler.h"
#include "nn.h"
#include "optim.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- progress bar ---------------------------------------------------------------------------- */

typedef struct pt_progress pt_progress;

/* How the bar is drawn. */
typedef enum pt_progress_mode {
    PT_PROGRESS_AUTO = 0, /* PT_PROGRESS_TTY when the stream is a terminal, else LINES */
    PT_PROGRESS_TTY,      /* one line redrawn in place ("\r" ... "\033[K"), at most 10 times/s */
    PT_PROGRESS_LINES,    /* a plain line each time another 10% of the steps is done */
    PT_PROGRESS_QUIET,    /* nothing but the final line of pt_progress_finish */
} pt_progress_mode;

/* Options of pt_progress_new_ex; the zero value is the default (stderr, AUTO). */
typedef struct pt_progress_opts {
    FILE *stream; /* NULL = stderr */
    pt_progress_mode mode;
} pt_progress_opts;

/* A progress bar for `total_steps` steps (batches) of `samples_per_step` samples each (used
 * for the samples/s figure; the last, smaller batch is counted as full). `label` ("epoch 1/5")
 * is copied (up to 63 bytes). The clock starts now (monotonic clock). On a terminal the bar is
 * one self-overwriting line:
 *     epoch 1/5 [=========>          ] 312/938 loss 0.4312 12345 samples/s ETA 0:21
 * elsewhere (a file, a pipe) a plain line is printed at every 10% of the steps, without
 * control characters. Returns NULL with PT_ERR_INVALID_ARG when total_steps <= 0 or
 * samples_per_step < 0, PT_ERR_OOM on allocation failure. Free with pt_progress_finish (or
 * pt_progress_free to drop it silently). */
PT_API pt_progress *pt_progress_new(const char *label, int64_t total_steps,
                                    int64_t samples_per_step);
/* Same with options (NULL = defaults). */
PT_API pt_progress *pt_progress_new_ex(const char *label, int64_t total_steps,
                                       int64_t samples_per_step, const pt_progress_opts *opts);

/* Reports that `step` steps (1..total_steps) are done and the last one had loss `loss`. The
 * loss shown is the mean of the losses reported so far (a NAN loss is not counted). Steps past
 * the total are clamped. Allocates nothing; on a terminal it redraws at most every 0.1 s (and
 * always at the last step). NULL p is a no-op. */
PT_API void pt_progress_update(pt_progress *p, int64_t step, double loss);

/* Sets an extra figure shown after the loss as "name value" ("acc 0.9123"); up to 4 metrics,
 * names copied (up to 15 bytes). Setting an existing name replaces its value; a fifth name is
 * ignored. NULL p is a no-op. */
PT_API void pt_progress_set_metric(pt_progress *p, const char *name, double value);

/* Seconds since pt_progress_new (monotonic clock); 0 for NULL. */
PT_API double pt_progress_elapsed(const pt_progress *p);
/* Mean of the losses reported so far (NAN when none). */
PT_API double pt_progress_mean_loss(const pt_progress *p);

/* Prints the final line (steps done, mean loss, metrics, samples/s and the elapsed time
 * instead of the ETA), ends it with a newline and frees p. NULL is a no-op. */
PT_API void pt_progress_finish(pt_progress *p);
/* Frees p without printing. NULL is a no-op. */
PT_API void pt_progress_free(pt_progress *p);

/* ---- a classifier's training and evaluation loop ------------------------------------------- */

/* Settings of pt_train_epoch and pt_evaluate; the zero value is the default. */
typedef struct pt_loop_opts {
    pt_device device;    /* batches are moved here before the forward (zero value: CPU) */
    int64_t max_batches; /* > 0: stop after this many batches (quick checks) */
    pt_lr_scheduler *per_batch_scheduler; /* pt_train_epoch: stepped after every optimizer
                                           * step (OneCycleLR-style); NULL: none */
    const char *label;                    /* pt_train_epoch's progress-bar label ("epoch 1/5");
                                           * NULL: "train" */
    pt_progress_opts progress; /* how pt_train_epoch draws its bar (pt_evaluate draws none) */
} pt_loop_opts;

/* What one pass over a loader measured. */
typedef struct pt_loop_result {
    double mean_loss; /* train: mean of the batches' losses; evaluate: per sample */
    double accuracy;  /* evaluate: share of samples whose argmax is the target; train: 0 */
    int64_t batches;  /* batches run */
    int64_t samples;  /* samples seen */
    double seconds;   /* wall-clock time of the pass */
} pt_loop_result;

/* One training epoch of a classifier, as the usual PyTorch loop writes it: model.train(); for
 * each batch (x, y) of `train` (fields 0 and 1: inputs and int64 class indices): x, y moved to
 * the device, logits = model(x), loss = cross_entropy(logits, y), zero_grad, backward, step
 * (then the per-batch scheduler's step). Each batch runs in its own scope, so nothing of it
 * outlives the step. A progress bar shows the running mean loss. When max_batches cut the
 * epoch short the loader is reset, so the next call starts a new epoch. opts and result may be
 * NULL. Returns the first failing call's status (the message is its own), PT_ERR_RUNTIME when the
 * loader ends before its length said, or PT_ERR_INVALID_ARG when its batches have fewer than
 * two fields. */
PT_API pt_status pt_train_epoch(pt_module *model, pt_optim *opt, pt_dataloader *train,
                                const pt_loop_opts *opts, pt_loop_result *result);

/* Accuracy and mean cross-entropy of a classifier over `test` (its first max_batches batches
 * when set) in eval mode with autograd off (model.eval(); torch.no_grad()). The loader is left
 * at the start of its next epoch. opts may be NULL; result must not be. */
PT_API pt_status pt_evaluate(pt_module *model, pt_dataloader *test, const pt_loop_opts *opts,
                             pt_loop_result *result);

/* ---- SVG line charts ------------------------------------------------------------------------- */

/* One curve of a chart. */
typedef struct pt_plot_series {
    const char *name; /* shown in the legend (XML-escaped); NULL = "series N" */
    int64_t n;        /* number of points (0 draws nothing) */
    const double *y;  /* n values; non-finite ones are skipped */
    const double *x;  /* n x values, or NULL for 1, 2, ..., n (epochs) */
    int panel;        /* 0 = upper panel, 1 = lower panel (e.g. losses above, accuracy below) */
} pt_plot_series;

/* Writes a standalone SVG file with one or two stacked panels (two when any series has
 * panel 1), each with its own y axis: axes with "nice" ticks (1, 2, 5 x 10^k) and tick
 * labels, a grid, the x-axis label under the lowest panel, the title on top, a legend per
 * panel, and one <polyline> per series with exactly one point per finite value (plus a small
 * circle per point when a series has at most 50 points). `title` and `x_label` may be NULL.
 * Returns PT_OK, or PT_ERR_INVALID_ARG (n_series < 0, a series with n < 0 or n > 0 and y
 * NULL, panel not 0 or 1) or PT_ERR_IO (the file cannot be written; the message names the
 * path). */
PT_API pt_status pt_plot_svg(const char *path, const char *title, const char *x_label, int n_series,
                             const pt_plot_series *series);

#ifdef __cplusplus
}
#endif
#endif
