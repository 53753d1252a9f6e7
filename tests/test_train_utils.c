/* Tests of the training utilities (train_utils.h): the classifier loop (pt_train_epoch,
 * pt_evaluate) against PyTorch's textbook loop (fixture train_loop.ptfx, written by
 * tests/fixtures/gen/train_loop.py), the progress bar's output in line and terminal modes, and
 * the SVG chart writer (well-formed document, one polyline per series with one point per
 * finite value, escaping, errors). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <prometorch/prometorch.h>
#include <prometorch/train_utils.h>

#include "testutil.h"

/* Reads the whole stream (rewound) into a malloc'd string. */
static char *slurp(FILE *f)
{
    long n;
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    return s;
}

static char *slurp_path(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *s = slurp(f);
    fclose(f);
    return s;
}

static int count_substr(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = strstr(s, sub); p; p = strstr(p + strlen(sub), sub))
        n++;
    return n;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Plain-line mode: one line per 10% mark, no control characters, a final line with the mean
 * loss and the elapsed time. */
static void test_progress_lines(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    pt_progress_opts o = {.stream = f, .mode = PT_PROGRESS_LINES};
    pt_progress *p = pt_progress_new_ex("epoch 1/5", 100, 64, &o);
    assert_non_null(p);
    for (int64_t s = 1; s <= 100; s++)
        pt_progress_update(p, s, s <= 50 ? 1.0 : 3.0);
    assert_true(fabs(pt_progress_mean_loss(p) - 2.0) < 1e-12);
    pt_progress_set_metric(p, "acc", 0.5);
    pt_progress_set_metric(p, "acc", 0.75); /* replaces */
    pt_progress_finish(p);
    char *s = slurp(f);
    fclose(f);
    /* marks 10%..90% (the 100% line is the final one) */
    assert_int_equal(count_lines(s), 10);
    assert_non_null(strstr(s, "epoch 1/5 10/100 (10%) loss 1.0000"));
    assert_non_null(strstr(s, "epoch 1/5 90/100 (90%) loss 1.8889"));
    assert_non_null(strstr(s, "ETA "));
    const char *last = strstr(s, "epoch 1/5 100/100 loss 2.0000 acc 0.7500");
    assert_non_null(last);
    assert_non_null(strstr(last, " time 0:00\n"));
    assert_int_equal(count_substr(s, "acc"), 1);
    for (const char *c = s; *c; c++)
        assert_true(*c == '\n' || (unsigned char)*c >= 0x20);
    free(s);
}

/* Several 10% marks crossed by one update print one line; steps past the end are clamped. */
static void test_progress_lines_big_steps(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    pt_progress_opts o = {.stream = f, .mode = PT_PROGRESS_LINES};
    pt_progress *p = pt_progress_new_ex(NULL, 7, 0, &o);
    pt_progress_update(p, 3, NAN); /* 42%: one line; NAN loss not counted */
    pt_progress_update(p, 3, 0.5);
    pt_progress_update(p, 99, 1.5); /* clamped to 7 */
    assert_true(fabs(pt_progress_mean_loss(p) - 1.0) < 1e-12);
    pt_progress_finish(p);
    char *s = slurp(f);
    fclose(f);
    assert_string_equal(s, "3/7 (42%) ETA 0:00\n7/7 loss 1.0000 time 0:00\n");
    free(s);
}

/* Terminal mode: a bar redrawn with "\r" and cleared with ESC[K, a newline only at the end. */
static void test_progress_tty(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    pt_progress_opts o = {.stream = f, .mode = PT_PROGRESS_TTY};
    pt_progress *p = pt_progress_new_ex("train", 4, 10, &o);
    pt_progress_update(p, 1, 0.25); /* first update draws */
    pt_progress_update(p, 2, 0.25); /* within 0.1 s: skipped */
    pt_progress_update(p, 4, 0.25); /* last step always draws */
    pt_progress_finish(p);
    char *s = slurp(f);
    fclose(f);
    assert_int_equal(count_substr(s, "\r"), 3);
    assert_int_equal(count_substr(s, "\033[K"), 3);
    assert_int_equal(count_lines(s), 1);
    assert_non_null(strstr(s, "\rtrain [======>                 ] 1/4 loss 0.2500"));
    assert_non_null(strstr(s, "\rtrain [========================] 4/4 loss 0.2500"));
    assert_non_null(strstr(s, "samples/s"));
    assert_non_null(strstr(s, "ETA 0:00"));
    free(s);
}

static void test_progress_errors(void **state)
{
    (void)state;
    assert_pt_error(pt_progress_new("x", 0, 1), PT_ERR_INVALID_ARG, "total_steps");
    assert_pt_error(pt_progress_new("x", 5, -1), PT_ERR_INVALID_ARG, "samples_per_step");
    pt_progress_update(NULL, 1, 1.0);
    pt_progress_set_metric(NULL, "a", 1.0);
    pt_progress_finish(NULL);
    pt_progress_free(NULL);
    assert_true(pt_progress_elapsed(NULL) == 0);
    assert_true(isnan(pt_progress_mean_loss(NULL)));
    pt_progress *p = pt_progress_new_ex("q", 3, 1, &(pt_progress_opts){.mode = PT_PROGRESS_QUIET});
    assert_non_null(p);
    assert_true(pt_progress_elapsed(p) >= 0);
    pt_progress_free(p);
}

/* The points attribute of the k-th polyline, number of "x,y" pairs in it. */
static int polyline_points(const char *svg, int k)
{
    const char *p = svg;
    for (int i = 0; i <= k; i++) {
        p = strstr(p, "<polyline");
        assert_non_null(p);
        p += 9;
    }
    p = strstr(p, "points=\"");
    assert_non_null(p);
    p += 8;
    int n = 0;
    for (; *p != '"'; p++)
        n += *p == ',';
    return n;
}

static void test_plot_two_panels(void **state)
{
    (void)state;
    char path[] = "/tmp/pt_plot_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    double train[5] = {2.3, 0.9, 0.6, 0.5, 0.45};
    double test[5] = {1.0, 0.7, NAN, 0.55, 0.5};
    double acc[5] = {0.70, 0.80, 0.84, 0.86, 0.87};
    double x[3] = {0.5, 1.5, 2.5};
    pt_plot_series s[4] = {
        {.name = "train loss", .n = 5, .y = train},
        {.name = "test <loss> & \"more\"", .n = 5, .y = test},
        {.name = "test accuracy", .n = 5, .y = acc, .panel = 1},
        {.name = NULL, .n = 3, .y = acc, .x = x, .panel = 1},
    };
    assert_int_equal(pt_plot_svg(path, "MLP on Fashion-MNIST", "epoch", 4, s), PT_OK);
    char *svg = slurp_path(path);
    remove(path);
    assert_true(strncmp(svg, "<?xml", 5) == 0);
    assert_non_null(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_non_null(strstr(svg, "</svg>\n"));
    assert_int_equal(count_substr(svg, "<svg"), 1);
    assert_int_equal(count_substr(svg, "<polyline"), 4);
    assert_int_equal(polyline_points(svg, 0), 5);
    assert_int_equal(polyline_points(svg, 1), 4); /* the NAN is skipped */
    assert_int_equal(polyline_points(svg, 2), 5);
    assert_int_equal(polyline_points(svg, 3), 3);
    assert_int_equal(count_substr(svg, "<circle"), 17);
    assert_non_null(strstr(svg, ">MLP on Fashion-MNIST</text>"));
    assert_non_null(strstr(svg, ">epoch</text>"));
    assert_non_null(strstr(svg, ">test &lt;loss&gt; &amp; &quot;more&quot;</text>"));
    assert_non_null(strstr(svg, ">series 4</text>"));
    /* two plot frames; loss axis ticks 0..2.5 by 0.5, accuracy ticks 0.7..0.88 by 0.02 */
    assert_int_equal(count_substr(svg, "fill=\"none\" stroke=\"#333\""), 2);
    assert_non_null(strstr(svg, ">2.5</text>"));
    assert_non_null(strstr(svg, ">0.88</text>"));
    assert_non_null(strstr(svg, ">0.7</text>"));
    /* x ticks 0 .. 5 by 1 labelled once (lower panel only) */
    assert_int_equal(count_substr(svg, "text-anchor=\"middle\" font-size=\"11\">5</text>"), 1);
    assert_int_equal(count_substr(svg, "&"), 5); /* only the escapes */
    free(svg);
}

/* One panel, a single point and an empty series, constant values: still a valid chart. */
static void test_plot_degenerate(void **state)
{
    (void)state;
    char path[] = "/tmp/pt_plot_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    double one = 0.25;
    pt_plot_series s[2] = {{.name = "one", .n = 1, .y = &one}, {.name = "none", .n = 0}};
    assert_int_equal(pt_plot_svg(path, NULL, NULL, 2, s), PT_OK);
    char *svg = slurp_path(path);
    assert_int_equal(count_substr(svg, "<polyline"), 2);
    assert_int_equal(polyline_points(svg, 0), 1);
    assert_int_equal(polyline_points(svg, 1), 0);
    assert_int_equal(count_substr(svg, "fill=\"none\" stroke=\"#333\""), 1);
    assert_null(strstr(svg, "nan"));
    assert_null(strstr(svg, "inf"));
    free(svg);
    assert_int_equal(pt_plot_svg(path, "empty", "x", 0, NULL), PT_OK);
    svg = slurp_path(path);
    assert_int_equal(count_substr(svg, "<polyline"), 0);
    assert_non_null(strstr(svg, "</svg>"));
    free(svg);
    remove(path);
}

static void test_plot_errors(void **state)
{
    (void)state;
    double y[2] = {1, 2};
    pt_plot_series bad_n = {.n = -1, .y = y};
    pt_plot_series no_y = {.n = 2};
    pt_plot_series bad_panel = {.n = 2, .y = y, .panel = 2};
    assert_pt_status_error(pt_plot_svg(NULL, "t", "x", 0, NULL), PT_ERR_INVALID_ARG, "path");
    assert_pt_status_error(pt_plot_svg("/tmp/x.svg", "t", "x", -1, NULL), PT_ERR_INVALID_ARG,
                           "-1 series");
    assert_pt_status_error(pt_plot_svg("/tmp/x.svg", "t", "x", 1, &bad_n), PT_ERR_INVALID_ARG,
                           "n = -1");
    assert_pt_status_error(pt_plot_svg("/tmp/x.svg", "t", "x", 1, &no_y), PT_ERR_INVALID_ARG,
                           "y NULL");
    assert_pt_status_error(pt_plot_svg("/tmp/x.svg", "t", "x", 1, &bad_panel), PT_ERR_INVALID_ARG,
                           "panel 2");
    pt_plot_series ok = {.n = 2, .y = y};
    assert_pt_status_error(pt_plot_svg("/nonexistent-dir/x.svg", "t", "x", 1, &ok), PT_ERR_IO,
                           "/nonexistent-dir/x.svg");
}

/* ---- the classifier loop ------------------------------------------------------------------ */

/* Copies the fixture's initial weights into the Linear(4, 3). */
static void load_linear(pt_module *m, const pt_fixture *fx)
{
    pt_tensor **params = NULL;
    assert_int_equal(pt_nn_named_parameters(m, NULL, &params), 2);
    pt_no_grad_begin();
    assert_int_equal(pt_copy_(params[0], fx_get(fx, "w0")), PT_OK);
    assert_int_equal(pt_copy_(params[1], fx_get(fx, "b0")), PT_OK);
    pt_no_grad_end();
    free(params);
}

static void assert_linear_is(pt_module *m, const pt_fixture *fx, const char *w, const char *b)
{
    pt_tensor **params = NULL;
    assert_int_equal(pt_nn_named_parameters(m, NULL, &params), 2);
    assert_tensor_close(params[0], fx_get(fx, w), 1e-5, 1e-6);
    assert_tensor_close(params[1], fx_get(fx, b), 1e-5, 1e-6);
    free(params);
}

static void assert_near(double actual, double expected, double tol)
{
    if (fabs(actual - expected) > tol)
        fail_msg("%.9g differs from PyTorch's %.9g", actual, expected);
}

/* One epoch with SGD + a per-batch StepLR, the evaluation pass, then an epoch cut to 2 batches:
 * weights, losses and accuracy as PyTorch's loop gives them. */
static void test_loop_matches_torch(void **state)
{
    (void)state;
    pt_fixture *fx = fx_open("train_loop");
    pt_tensor *data[2] = {fx_get(fx, "x"), fx_get(fx, "y")};
    pt_dataset *ds = pt_tensor_dataset(2, data);
    pt_dataloader *dl = pt_dataloader_new(ds, &(pt_dataloader_opts){.batch_size = 4});
    pt_dataset_free(ds);
    assert_non_null(dl);
    pt_module *model = pt_nn_linear(4, 3, true);
    load_linear(model, fx);
    pt_sgd_opts sgd = {.lr = 0.1, .momentum = 0.9};
    pt_optim *opt = pt_optim_sgd(model, sgd);
    pt_lr_scheduler *sched = pt_lr_step_lr(opt, 2, 0.5);
    assert_non_null(sched);
    pt_loop_opts o = {.per_batch_scheduler = sched,
                      .progress = {.mode = PT_PROGRESS_QUIET, .stream = stderr}};
    pt_loop_result r = {0};

    assert_int_equal(pt_train_epoch(model, opt, dl, &o, &r), PT_OK);
    assert_int_equal(r.batches, 3);
    assert_int_equal(r.samples, 10);
    assert_near(r.mean_loss, pt_item(fx_get(fx, "epoch1.mean_loss")), 1e-6);
    assert_linear_is(model, fx, "epoch1.w", "epoch1.b");

    pt_loop_result e = {0};
    assert_int_equal(pt_evaluate(model, dl, NULL, &e), PT_OK);
    assert_int_equal(e.samples, 10);
    assert_near(e.mean_loss, pt_item(fx_get(fx, "eval1.mean_loss")), 1e-6);
    assert_near(e.accuracy, pt_item(fx_get(fx, "eval1.accuracy")), 1e-12);
    assert_false(pt_grad_enabled() == false); /* evaluate turned autograd back on */

    o.max_batches = 2;
    assert_int_equal(pt_train_epoch(model, opt, dl, &o, &r), PT_OK);
    assert_int_equal(r.batches, 2);
    assert_int_equal(r.samples, 8);
    assert_near(r.mean_loss, pt_item(fx_get(fx, "epoch2.mean_loss")), 1e-6);
    assert_linear_is(model, fx, "epoch2.w", "epoch2.b");

    pt_lr_scheduler_free(sched);
    pt_optim_free(opt);
    pt_nn_free(model);
    pt_dataloader_free(dl);
    fx_close(fx);
}

/* Bad arguments and batches without a target are errors that say so. */
static void test_loop_errors(void **state)
{
    (void)state;
    pt_tensor *x = pt_randn(PT_SHAPE(6, 4), PT_FLOAT32, pt_cpu());
    pt_dataset *ds = pt_tensor_dataset(1, &x);
    pt_dataloader *dl = pt_dataloader_new(ds, &(pt_dataloader_opts){.batch_size = 3});
    pt_dataset_free(ds);
    pt_module *model = pt_nn_linear(4, 3, true);
    pt_optim *opt = pt_optim_sgd(model, PT_SGD_DEFAULTS);
    pt_loop_opts quiet = {.progress = {.mode = PT_PROGRESS_QUIET, .stream = stderr}};
    pt_loop_result r;
    assert_pt_status_error(pt_train_epoch(NULL, opt, dl, NULL, NULL), PT_ERR_NULL, "NULL model");
    assert_pt_status_error(pt_evaluate(model, dl, NULL, NULL), PT_ERR_NULL, "result");
    assert_pt_status_error(pt_train_epoch(model, opt, dl, &quiet, &r), PT_ERR_INVALID_ARG,
                           "two fields");
    assert_pt_status_error(pt_evaluate(model, dl, NULL, &r), PT_ERR_INVALID_ARG, "two fields");
    pt_optim_free(opt);
    pt_nn_free(model);
    pt_dataloader_free(dl);
}

#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_progress_lines),  T(test_progress_lines_big_steps), T(test_progress_tty),
        T(test_progress_errors), T(test_plot_two_panels),          T(test_plot_degenerate),
        T(test_plot_errors),     T(test_loop_matches_torch),       T(test_loop_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
