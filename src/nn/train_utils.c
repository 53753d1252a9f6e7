/* Training utilities (train_utils.h): the progress bar of training loops and the SVG line-chart
 * writer for loss/accuracy curves.
 *
 * The bar keeps everything it prints in fixed buffers inside its struct, so an update allocates
 * nothing; time comes from CLOCK_MONOTONIC. The chart writer maps each panel's data range onto
 * "nice" tick values (1, 2 or 5 times a power of ten) and writes plain SVG 1.1 with fprintf. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/internal.h"
#include "prometorch/train_utils.h"

/* ---- progress bar ---------------------------------------------------------------------------- */

#define PROGRESS_MAX_METRICS 4
#define PROGRESS_BAR_WIDTH 24
#define PROGRESS_TTY_INTERVAL 0.1 /* seconds between redraws on a terminal */

struct pt_progress {
    char label[64];
    int64_t total;
    int64_t samples_per_step;
    FILE *out;
    pt_progress_mode mode; /* resolved: never AUTO */
    double t0;             /* monotonic seconds at creation */
    double last_draw;      /* time of the last TTY redraw (-1: never) */
    int64_t step;
    int next_decile; /* LINES mode: next 10% mark to print (1..10) */
    double loss_sum;
    int64_t loss_count;
    int n_metrics;
    char metric_name[PROGRESS_MAX_METRICS][16];
    double metric_value[PROGRESS_MAX_METRICS];
    char line[512]; /* the line being composed */
};

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "1:02:03" for an hour or more, else "2:03". */
static void format_duration(char *buf, size_t cap, double seconds)
{
    if (!(seconds >= 0) || seconds > 1e8)
        seconds = 0;
    long s = (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, cap, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    else
        snprintf(buf, cap, "%ld:%02ld", s / 60, s % 60);
}

pt_progress *pt_progress_new_ex(const char *label, int64_t total_steps, int64_t samples_per_step,
                                const pt_progress_opts *opts)
{
    if (total_steps <= 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_progress_new: total_steps must be positive, got %lld",
                              (long long)total_steps);
    if (samples_per_step < 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_progress_new: samples_per_step must be >= 0, got %lld",
                              (long long)samples_per_step);
    pt_progress *p = pti_calloc(1, sizeof(*p));
    if (!p)
        return pti_error_null(PT_ERR_OOM, "pt_progress_new: out of memory");
    snprintf(p->label, sizeof(p->label), "%s", label ? label : "");
    p->total = total_steps;
    p->samples_per_step = samples_per_step;
    p->out = opts && opts->stream ? opts->stream : stderr;
    p->mode = opts ? opts->mode : PT_PROGRESS_AUTO;
    if (p->mode == PT_PROGRESS_AUTO)
        p->mode = isatty(fileno(p->out)) ? PT_PROGRESS_TTY : PT_PROGRESS_LINES;
    p->t0 = monotonic_seconds();
    p->last_draw = -1;
    p->next_decile = 1;
    return p;
}

pt_progress *pt_progress_new(const char *label, int64_t total_steps, int64_t samples_per_step)
{
    return pt_progress_new_ex(label, total_steps, samples_per_step, NULL);
}

double pt_progress_elapsed(const pt_progress *p)
{
    return p ? monotonic_seconds() - p->t0 : 0;
}

double pt_progress_mean_loss(const pt_progress *p)
{
    return p && p->loss_count > 0 ? p->loss_sum / (double)p->loss_count : NAN;
}

/* Appends printf output to p->line at *len, never past its end. */
__attribute__((format(printf, 3, 4))) static void line_add(pt_progress *p, size_t *len,
                                                           const char *fmt, ...)
{
    if (*len >= sizeof(p->line) - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(p->line + *len, sizeof(p->line) - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n < sizeof(p->line) - *len ? (size_t)n : sizeof(p->line) - 1 - *len;
}

/* Composes the line: label, [bar] (TTY only), steps, loss, metrics, speed, ETA or elapsed. */
static void compose(pt_progress *p, double now, bool final)
{
    size_t len = 0;
    if (p->label[0])
        line_add(p, &len, "%s ", p->label);
    if (p->mode == PT_PROGRESS_TTY) {
        int filled = (int)(PROGRESS_BAR_WIDTH * p->step / p->total);
        char bar[PROGRESS_BAR_WIDTH + 1];
        for (int i = 0; i < PROGRESS_BAR_WIDTH; i++)
            bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
        if (filled >= PROGRESS_BAR_WIDTH)
            bar[PROGRESS_BAR_WIDTH - 1] = '=';
        bar[PROGRESS_BAR_WIDTH] = '\0';
        line_add(p, &len, "[%s] ", bar);
    }
    line_add(p, &len, "%lld/%lld", (long long)p->step, (long long)p->total);
    if (p->mode != PT_PROGRESS_TTY && !final)
        line_add(p, &len, " (%d%%)", (int)(100 * p->step / p->total));
    if (p->loss_count > 0)
        line_add(p, &len, " loss %.4f", p->loss_sum / (double)p->loss_count);
    for (int i = 0; i < p->n_metrics; i++)
        line_add(p, &len, " %s %.4f", p->metric_name[i], p->metric_value[i]);
    double elapsed = now - p->t0;
    if (p->samples_per_step > 0 && elapsed > 0 && p->step > 0)
        line_add(p, &len, " %.0f samples/s", (double)(p->step * p->samples_per_step) / elapsed);
    char t[32];
    if (final) {
        format_duration(t, sizeof(t), elapsed);
        line_add(p, &len, " time %s", t);
    } else if (p->step > 0) {
        format_duration(t, sizeof(t), elapsed / (double)p->step * (double)(p->total - p->step));
        line_add(p, &len, " ETA %s", t);
    }
}

static void draw(pt_progress *p, double now, bool final)
{
    compose(p, now, final);
    if (p->mode == PT_PROGRESS_TTY)
        fprintf(p->out, "\r%s\033[K%s", p->line, final ? "\n" : "");
    else
        fprintf(p->out, "%s\n", p->line);
    fflush(p->out);
    p->last_draw = now;
}

void pt_progress_update(pt_progress *p, int64_t step, double loss)
{
    if (!p)
        return;
    p->step = step < 0 ? 0 : (step > p->total ? p->total : step);
    if (isfinite(loss)) {
        p->loss_sum += loss;
        p->loss_count++;
    }
    if (p->mode == PT_PROGRESS_QUIET)
        return;
    if (p->mode == PT_PROGRESS_LINES) {
        /* one line per 10% mark passed (several marks at once print one line) */
        int decile = (int)(10 * p->step / p->total);
        if (decile >= p->next_decile && p->step < p->total) {
            p->next_decile = decile + 1;
            draw(p, monotonic_seconds(), false);
        }
        return;
    }
    double now = monotonic_seconds();
    if (p->last_draw < 0 || now - p->last_draw >= PROGRESS_TTY_INTERVAL || p->step == p->total)
        draw(p, now, false);
}

void pt_progress_set_metric(pt_progress *p, const char *name, double value)
{
    if (!p || !name)
        return;
    for (int i = 0; i < p->n_metrics; i++) {
        if (strncmp(p->metric_name[i], name, sizeof(p->metric_name[i]) - 1) == 0) {
            p->metric_value[i] = value;
            return;
        }
    }
    if (p->n_metrics == PROGRESS_MAX_METRICS)
        return;
    snprintf(p->metric_name[p->n_metrics], sizeof(p->metric_name[0]), "%s", name);
    p->metric_value[p->n_metrics++] = value;
}

void pt_progress_finish(pt_progress *p)
{
    if (!p)
        return;
    draw(p, monotonic_seconds(), true);
    free(p);
}

void pt_progress_free(pt_progress *p)
{
    free(p);
}

/* ---- SVG line charts ------------------------------------------------------------------------- */

/* Canvas geometry, in SVG user units (pixels). */
#define PLOT_W 800.0
#define PLOT_MARGIN_L 70.0
#define PLOT_MARGIN_R 170.0 /* the legend sits right of the plot area */
#define PLOT_MARGIN_T 40.0
#define PLOT_PANEL_H 260.0
#define PLOT_PANEL_GAP 30.0
#define PLOT_MARGIN_B 50.0
#define PLOT_MAX_MARKERS 50

static const char *const plot_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                          "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

/* Axis range and tick spacing of one axis. */
typedef struct plot_axis {
    double lo, hi, step;
} plot_axis;

/* 1, 2 or 5 times a power of ten, close to range / 5. */
static double nice_step(double range)
{
    double raw = range / 5.0;
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * mag;
}

/* Expands [lo, hi] outward to whole ticks; a degenerate range gets a unit-sized window. */
static plot_axis nice_axis(double lo, double hi)
{
    if (!(lo <= hi)) { /* no finite data */
        lo = 0;
        hi = 1;
    }
    if (hi - lo < 1e-12 * (fabs(lo) + fabs(hi)) || hi == lo) {
        double pad = lo == 0 ? 1.0 : fabs(lo) * 0.1;
        lo -= pad;
        hi += pad;
    }
    plot_axis a;
    a.step = nice_step(hi - lo);
    a.lo = floor(lo / a.step + 1e-9) * a.step;
    a.hi = ceil(hi / a.step - 1e-9) * a.step;
    return a;
}

static double series_x(const pt_plot_series *s, int64_t i)
{
    return s->x ? s->x[i] : (double)(i + 1);
}

/* Writes s with XML special characters escaped. */
static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            /* control characters other than tab/newline are not allowed in XML 1.0 */
            if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n')
                fputc(*s, f);
        }
    }
}

static pt_status plot_check(const char *path, int n_series, const pt_plot_series *series)
{
    if (!path)
        return pti_error(PT_ERR_INVALID_ARG, "pt_plot_svg: path is NULL");
    if (n_series < 0 || (n_series > 0 && !series))
        return pti_error(PT_ERR_INVALID_ARG, "pt_plot_svg: %d series given with series %s",
                         n_series, series ? "set" : "NULL");
    for (int i = 0; i < n_series; i++) {
        const pt_plot_series *s = &series[i];
        if (s->n < 0 || (s->n > 0 && !s->y))
            return pti_error(PT_ERR_INVALID_ARG, "pt_plot_svg: series %d has n = %lld and y %s", i,
                             (long long)s->n, s->y ? "set" : "NULL");
        if (s->panel != 0 && s->panel != 1)
            return pti_error(PT_ERR_INVALID_ARG, "pt_plot_svg: series %d has panel %d (0 or 1)", i,
                             s->panel);
    }
    return PT_OK;
}

/* Finite data ranges: x over every series, y per panel. */
static void plot_ranges(int n_series, const pt_plot_series *series, double xr[2], double yr[2][2])
{
    xr[0] = yr[0][0] = yr[1][0] = INFINITY;
    xr[1] = yr[0][1] = yr[1][1] = -INFINITY;
    for (int i = 0; i < n_series; i++) {
        const pt_plot_series *s = &series[i];
        for (int64_t j = 0; j < s->n; j++) {
            double x = series_x(s, j), y = s->y[j];
            if (!isfinite(x) || !isfinite(y))
                continue;
            xr[0] = fmin(xr[0], x);
            xr[1] = fmax(xr[1], x);
            yr[s->panel][0] = fmin(yr[s->panel][0], y);
            yr[s->panel][1] = fmax(yr[s->panel][1], y);
        }
    }
}

/* Geometry of one panel: plot-area rectangle and its axes. */
typedef struct plot_panel {
    double left, top, width, height;
    plot_axis x, y;
} plot_panel;

static double px(const plot_panel *p, double x)
{
    return p->left + (x - p->x.lo) / (p->x.hi - p->x.lo) * p->width;
}

static double py(const plot_panel *p, double y)
{
    return p->top + p->height - (y - p->y.lo) / (p->y.hi - p->y.lo) * p->height;
}

/* Grid lines, tick labels and the frame; x tick labels only on the lowest panel. */
static void plot_axes(FILE *f, const plot_panel *p, bool x_labels)
{
    int ny = (int)floor((p->y.hi - p->y.lo) / p->y.step + 0.5);
    for (int i = 0; i <= ny; i++) {
        double v = p->y.lo + i * p->y.step, y = py(p, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                p->left, y, p->left + p->width, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%.6g</text>\n",
                p->left - 6, y + 4, fabs(v) < 1e-12 * p->y.step ? 0.0 : v);
    }
    int nx = (int)floor((p->x.hi - p->x.lo) / p->x.step + 0.5);
    for (int i = 0; i <= nx; i++) {
        double v = p->x.lo + i * p->x.step, x = px(p, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x,
                p->top, x, p->top + p->height);
        if (x_labels)
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\">"
                    "%.6g</text>\n",
                    x, p->top + p->height + 16, fabs(v) < 1e-12 * p->x.step ? 0.0 : v);
    }
    /* the frame last, so the outermost grid lines do not cover it */
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            p->left, p->top, p->width, p->height);
}

/* One polyline (finite points only), optional point markers, and the legend entry. */
static void plot_series(FILE *f, const plot_panel *p, const pt_plot_series *s, int index,
                        int legend_row)
{
    const char *color = plot_colors[index % (int)(sizeof(plot_colors) / sizeof(plot_colors[0]))];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
    for (int64_t j = 0; j < s->n; j++) {
        double x = series_x(s, j), y = s->y[j];
        if (isfinite(x) && isfinite(y))
            fprintf(f, "%s%.2f,%.2f", j ? " " : "", px(p, x), py(p, y));
    }
    fputs("\"/>\n", f);
    if (s->n <= PLOT_MAX_MARKERS) {
        for (int64_t j = 0; j < s->n; j++) {
            double x = series_x(s, j), y = s->y[j];
            if (isfinite(x) && isfinite(y))
                fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", px(p, x),
                        py(p, y), color);
        }
    }
    double lx = p->left + p->width + 15, ly = p->top + 10 + 20 * legend_row;
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"2\"/>\n",
            lx, ly, lx + 20, ly, color);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">", lx + 26, ly + 4);
    if (s->name)
        xml_text(f, s->name);
    else
        fprintf(f, "series %d", index + 1);
    fputs("</text>\n", f);
}

pt_status pt_plot_svg(const char *path, const char *title, const char *x_label, int n_series,
                      const pt_plot_series *series)
{
    pt_status st = plot_check(path, n_series, series);
    if (st != PT_OK)
        return st;
    int n_panels = 1;
    for (int i = 0; i < n_series; i++)
        if (series[i].panel == 1)
            n_panels = 2;
    double xr[2], yr[2][2];
    plot_ranges(n_series, series, xr, yr);
    plot_panel panels[2];
    for (int k = 0; k < n_panels; k++) {
        panels[k].left = PLOT_MARGIN_L;
        panels[k].top = PLOT_MARGIN_T + k * (PLOT_PANEL_H + PLOT_PANEL_GAP);
        panels[k].width = PLOT_W - PLOT_MARGIN_L - PLOT_MARGIN_R;
        panels[k].height = PLOT_PANEL_H;
        panels[k].x = nice_axis(xr[0], xr[1]);
        panels[k].y = nice_axis(yr[k][0], yr[k][1]);
    }
    double height =
        PLOT_MARGIN_T + n_panels * PLOT_PANEL_H + (n_panels - 1) * PLOT_PANEL_GAP + PLOT_MARGIN_B;

    FILE *f = fopen(path, "w");
    if (!f)
        return pti_error(PT_ERR_IO, "pt_plot_svg: cannot write '%s'", path);
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
            "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            PLOT_W, height, PLOT_W, height);
    if (title) {
        fprintf(f, "<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">",
                PLOT_W / 2);
        xml_text(f, title);
        fputs("</text>\n", f);
    }
    for (int k = 0; k < n_panels; k++)
        plot_axes(f, &panels[k], k == n_panels - 1);
    int rows[2] = {0, 0};
    for (int i = 0; i < n_series; i++)
        plot_series(f, &panels[series[i].panel], &series[i], i, rows[series[i].panel]++);
    if (x_label) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">",
                PLOT_MARGIN_L + panels[0].width / 2, height - 12);
        xml_text(f, x_label);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad)
        return pti_error(PT_ERR_IO, "pt_plot_svg: error while writing '%s'", path);
    return PT_OK;
}
