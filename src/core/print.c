/* Printing tensors as PyTorch's repr does (torch/_tensor_str.py with the default print
 * options: precision 4, threshold 1000, edgeitems 3, linewidth 80).
 *
 * One formatter is chosen for the whole tensor from the elements that will be shown: integer
 * dtypes print as integers; floating ones switch to scientific notation when the non-zero
 * finite magnitudes span more than 1000x, exceed 1e8 or go below 1e-4, print as "1." when all
 * of them are integers, and as "%.4f" otherwise. Every element is right-aligned to the widest.
 * Rows wrap at 80 columns; tensors of more than 1000 elements show the first and last 3 items
 * of each dimension around "...". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "strbuf.h"

#define PRINT_PRECISION 4
#define PRINT_THRESHOLD 1000
#define PRINT_EDGEITEMS 3
#define PRINT_LINEWIDTH 80

/* ---- a growing string
 * ---------------------------------------------------------------------------- */

static void sb_repeat(pti_strbuf *s, char c, int n)
{
    for (int i = 0; i < n; i++)
        pti_strbuf_putc(s, c);
}

/* ---- the formatter
 * --------------------------------------------------------------------------------- */

typedef struct printer {
    const pt_tensor *t; /* a CPU tensor (any strides) */
    const char *data;   /* its element 0 */
    size_t elem_size;
    bool floating, summarize;
    bool int_mode, sci_mode;
    int max_width;
    /* statistics gathered over the shown non-zero finite values */
    int64_t count;
    double min_abs, max_abs;
    int width_sci, width_int, width_fix;
} printer;

/* Enough for "%.4f" of the largest double (309 digits). */
#define VALUE_BUF 400

static double load_float(const printer *pr, int64_t off)
{
    return pti_load_f64(pr->data + off * (int64_t)pr->elem_size, pr->t->dtype);
}

/* Python's str() of an integer or bool element. */
static int format_int(const printer *pr, int64_t off, char *buf)
{
    const char *p = pr->data + off * (int64_t)pr->elem_size;
    if (pr->t->dtype == PT_BOOL)
        return snprintf(buf, VALUE_BUF, "%s", *(const uint8_t *)p ? "True" : "False");
    return snprintf(buf, VALUE_BUF, "%lld", (long long)pti_load_i64(p, pr->t->dtype));
}

/* Python's "{:.Nf}" / "{:.Ne}" of a double: like C's, but NaN never carries a sign. */
static int format_double(double v, char conv, int precision, char *buf)
{
    if (isnan(v))
        return snprintf(buf, VALUE_BUF, "nan");
    if (isinf(v))
        return snprintf(buf, VALUE_BUF, "%s", v < 0 ? "-inf" : "inf");
    return snprintf(buf, VALUE_BUF, conv == 'e' ? "%.*e" : "%.*f", precision, v);
}

/* _Formatter.format without the padding. */
static int format_value(const printer *pr, int64_t off, char *buf)
{
    if (!pr->floating)
        return format_int(pr, off, buf);
    double v = load_float(pr, off);
    if (pr->sci_mode)
        return format_double(v, 'e', PRINT_PRECISION, buf);
    if (pr->int_mode) {
        int n = format_double(v, 'f', 0, buf);
        if (isfinite(v))
            buf[n++] = '.', buf[n] = '\0';
        return n;
    }
    return format_double(v, 'f', PRINT_PRECISION, buf);
}

static void observe(printer *pr, int64_t off)
{
    char buf[VALUE_BUF];
    if (!pr->floating) {
        int n = format_int(pr, off, buf);
        if (n > pr->max_width)
            pr->max_width = n;
        return;
    }
    double v = load_float(pr, off);
    if (!isfinite(v) || v == 0.0)
        return;
    double a = fabs(v);
    if (pr->count == 0 || a < pr->min_abs)
        pr->min_abs = a;
    if (pr->count == 0 || a > pr->max_abs)
        pr->max_abs = a;
    pr->count++;
    if (v != ceil(v))
        pr->int_mode = false;
    int n = format_double(v, 'e', PRINT_PRECISION, buf);
    if (n > pr->width_sci)
        pr->width_sci = n;
    n = format_double(v, 'f', 0, buf) + 1;
    if (n > pr->width_int)
        pr->width_int = n;
    n = format_double(v, 'f', PRINT_PRECISION, buf);
    if (n > pr->width_fix)
        pr->width_fix = n;
}

/* Number of shown indices of a dim of `size` and the i-th of them. */
static bool dim_summarized(const printer *pr, int64_t size)
{
    return pr->summarize && size > 2 * PRINT_EDGEITEMS;
}

static int64_t shown_index(const printer *pr, int64_t size, int64_t i)
{
    if (!dim_summarized(pr, size) || i < PRINT_EDGEITEMS)
        return i;
    return size - 2 * PRINT_EDGEITEMS + i;
}

static int64_t shown_count(const printer *pr, int64_t size)
{
    return dim_summarized(pr, size) ? 2 * PRINT_EDGEITEMS : size;
}

/* Visits every shown element of dims d.. (element offset `off`). */
static void observe_all(printer *pr, int d, int64_t off)
{
    if (d == pr->t->ndim) {
        observe(pr, off);
        return;
    }
    int64_t size = pr->t->shape[d], n = shown_count(pr, size);
    for (int64_t i = 0; i < n; i++)
        observe_all(pr, d + 1, off + shown_index(pr, size, i) * pr->t->stride[d]);
}

/* _Formatter.__init__ */
static void choose_format(printer *pr)
{
    pr->int_mode = true;
    pr->sci_mode = false;
    pr->max_width = 1;
    observe_all(pr, 0, 0);
    if (!pr->floating || pr->count == 0)
        return;
    bool wide = pr->max_abs / pr->min_abs > 1000.0 || pr->max_abs > 1.0e8;
    if (pr->int_mode) {
        pr->sci_mode = wide;
        pr->max_width = wide ? pr->width_sci : pr->width_int;
    } else {
        pr->sci_mode = wide || pr->min_abs < 1.0e-4;
        pr->max_width = pr->sci_mode ? pr->width_sci : pr->width_fix;
    }
    if (pr->max_width < 1)
        pr->max_width = 1;
}

/* ---- layout
 * ---------------------------------------------------------------------------------------- */

static void put_element(pti_strbuf *s, const printer *pr, int64_t off)
{
    char buf[VALUE_BUF];
    int n = format_value(pr, off, buf);
    sb_repeat(s, ' ', pr->max_width - n);
    pti_strbuf_put(s, buf, (size_t)n);
}

/* _vector_str: the last dim, wrapped at the line width. */
static void put_vector(pti_strbuf *s, const printer *pr, int64_t off, int indent)
{
    int d = pr->t->ndim - 1;
    int64_t size = pr->t->shape[d], n = shown_count(pr, size);
    int per_line = (PRINT_LINEWIDTH - indent) / (pr->max_width + 2);
    if (per_line < 1)
        per_line = 1;
    bool ellipsis = dim_summarized(pr, size);
    int64_t items = n + (ellipsis ? 1 : 0);
    pti_strbuf_puts(s, "[");
    for (int64_t item = 0, i = 0; item < items; item++) {
        if (item > 0) {
            if (item % per_line == 0) {
                pti_strbuf_puts(s, ",\n");
                sb_repeat(s, ' ', indent + 1);
            } else {
                pti_strbuf_puts(s, ", ");
            }
        }
        if (ellipsis && item == PRINT_EDGEITEMS) {
            pti_strbuf_puts(s, " ...");
            continue;
        }
        put_element(s, pr, off + shown_index(pr, size, i) * pr->t->stride[d]);
        i++;
    }
    pti_strbuf_puts(s, "]");
}

/* _tensor_str_with_formatter for dims d.. */
static void put_tensor(pti_strbuf *s, const printer *pr, int d, int64_t off, int indent)
{
    int dim = pr->t->ndim - d;
    if (dim == 0) {
        put_element(s, pr, off);
        return;
    }
    if (dim == 1) {
        put_vector(s, pr, off, indent);
        return;
    }
    int64_t size = pr->t->shape[d], n = shown_count(pr, size);
    bool ellipsis = dim_summarized(pr, size);
    int64_t items = n + (ellipsis ? 1 : 0);
    pti_strbuf_puts(s, "[");
    for (int64_t item = 0, i = 0; item < items; item++) {
        if (item > 0) { /* "," then dim-1 newlines and the indentation */
            pti_strbuf_puts(s, ",");
            sb_repeat(s, '\n', dim - 1);
            sb_repeat(s, ' ', indent + 1);
        }
        if (ellipsis && item == PRINT_EDGEITEMS) {
            pti_strbuf_puts(s, "...");
            continue;
        }
        put_tensor(s, pr, d + 1, off + shown_index(pr, size, i) * pr->t->stride[d], indent + 1);
        i++;
    }
    pti_strbuf_puts(s, "]");
}

/* _add_suffixes: ", suffix" on the same line while it fits, else on a new indented line. */
static void put_suffixes(pti_strbuf *s, int n, char suffixes[][64], int indent)
{
    size_t last_nl = 0;
    bool has_nl = false;
    for (size_t i = 0; i < s->len; i++)
        if (s->data[i] == '\n')
            last_nl = i, has_nl = true;
    /* PyTorch computes len - rfind("\n") + 1 (rfind gives -1 without a newline) */
    int64_t last_line_len = (int64_t)s->len - (has_nl ? (int64_t)last_nl : -1) + 1;
    for (int i = 0; i < n; i++) {
        int64_t len = (int64_t)strlen(suffixes[i]);
        if (last_line_len + len + 2 > PRINT_LINEWIDTH) {
            pti_strbuf_puts(s, ",\n");
            sb_repeat(s, ' ', indent);
            last_line_len = indent + len;
        } else {
            pti_strbuf_puts(s, ", ");
            last_line_len += len + 2;
        }
        pti_strbuf_puts(s, suffixes[i]);
    }
    pti_strbuf_puts(s, ")");
}

static void size_suffix(char *out, size_t cap, const pt_tensor *t)
{
    pti_strbuf s = {0};
    pti_strbuf_puts(&s, "size=(");
    for (int i = 0; i < t->ndim; i++)
        pti_strbuf_printf(&s, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    pti_strbuf_puts(&s, t->ndim == 1 ? ",)" : ")");
    snprintf(out, cap, "%s", pti_strbuf_ok(&s) ? s.data : "size=(?)");
    pti_strbuf_free(&s);
}

char *pt_to_string(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_to_string", "t"))
        return NULL;
    if (pti_dtypes[t->dtype].is_block)
        return pti_error_null(PT_ERR_DTYPE,
                              "pt_to_string: block dtype %s cannot be printed (dequantize first)",
                              pt_dtype_name(t->dtype));
    pt_tensor *host = pti_to_device(t, pt_cpu()); /* an alias for CPU tensors, a copy otherwise */
    if (!host)
        return NULL;
    const int indent = 7; /* strlen("tensor(") */
    char suffixes[4][64];
    int n_suffixes = 0;
    pt_device dev = t->storage->device;
    if (dev.type != PT_DEVICE_CPU) {
        char name[32];
        snprintf(suffixes[n_suffixes++], 64, "device='%s'", pt_device_str(dev, name, sizeof name));
    }
    pti_strbuf s = {0};
    pti_strbuf_puts(&s, "tensor(");
    if (t->numel == 0) {
        pti_strbuf_puts(&s, "[]");
        if (t->ndim != 1)
            size_suffix(suffixes[n_suffixes++], 64, t);
        if (t->dtype != PT_FLOAT32)
            snprintf(suffixes[n_suffixes++], 64, "dtype=torch.%s", pt_dtype_name(t->dtype));
    } else {
        if (t->dtype != PT_FLOAT32 && t->dtype != PT_INT64 && t->dtype != PT_BOOL)
            snprintf(suffixes[n_suffixes++], 64, "dtype=torch.%s", pt_dtype_name(t->dtype));
        printer pr = {.t = host,
                      .data = pti_data(host),
                      .elem_size = pti_dtypes[host->dtype].size,
                      .floating = pti_dtypes[host->dtype].is_floating,
                      .summarize = host->numel > PRINT_THRESHOLD};
        choose_format(&pr);
        put_tensor(&s, &pr, 0, 0, indent);
    }
    if (t->requires_grad && !t->grad_fn)
        snprintf(suffixes[n_suffixes++], 64, "requires_grad=True");
    put_suffixes(&s, n_suffixes, suffixes, indent);
    pt_release(host);
    char *str = pti_strbuf_take(&s);
    if (!str)
        return pti_error_null(PT_ERR_OOM, "pt_to_string: out of memory");
    return str;
}

void pt_fprint(FILE *f, const pt_tensor *t)
{
    char *s = pt_to_string(t);
    if (s) {
        fputs(s, f);
        fputc('\n', f);
        free(s);
    }
}

void pt_print(const pt_tensor *t)
{
    pt_fprint(stdout, t);
}
