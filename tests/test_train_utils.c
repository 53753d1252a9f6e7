/* Tests of the training utilities (train_utils.h): the progress bar's output in line and
 * terminal modes, and the SVG chart writer (well-formed document, one polyline per series with
 * one point per finite value, escaping, errors). */
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

#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_progress_lines),  T(test_progress_lines_big_steps), T(test_progress_tty),
        T(test_progress_errors), T(test_plot_two_panels),          T(test_plot_degenerate),
        T(test_plot_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
