/* Checkpoint loading benchmark, C half: times loading FILE with pt_load (pt_load_safetensors for
 * a .safetensors file) and optionally reading every element of every tensor once, then freeing
 * the value tree, and prints one JSON line with the best and median times (benchmarks/
 * load_vs_torch.py drives it against torch.load / safetensors.torch.load_file).
 *
 *   load_vs_torch FILE [--repeat N] [--warmup N] [--touch] [--copy]
 *
 * --touch: after loading, pt_sum of every tensor (the PyTorch half calls t.sum() per tensor),
 *          so mapped storages are actually read (page faults).
 * --copy:  pt_load_ex with .copy = true: storages read into library memory instead of mapping
 *          the file copy-on-write (the default).
 * --warmup N: untimed runs first (default 0), so the caching allocator is warm as in a process
 *          that has loaded before (the PyTorch half runs in a long-lived worker).
 * Every repetition loads the file afresh; the page cache is whatever the caller left (the
 * driver reads the file once first). Threads come from PT_NUM_THREADS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <prometorch/prometorch.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static pt_value *load_file(const char *path, bool copy)
{
    if (copy)
        return pt_load_ex(path, &(pt_load_opts){.copy = true});
    if (ends_with(path, ".safetensors"))
        return pt_load_safetensors(path, NULL);
    return pt_load(path);
}

/* Sums every tensor in the tree (dicts, lists, tuples walked recursively); adds the number of
 * tensors and elements seen to *tensors / *elems. Returns false on an error. */
static bool touch_all(const pt_value *v, int64_t *tensors, int64_t *elems)
{
    switch (pt_value_kind_of(v)) {
    case PT_VALUE_TENSOR: {
        pt_tensor *t = pt_value_tensor_ref(v);
        pt_tensor *s = pt_sum(t);
        if (!s)
            return false;
        pt_release(s);
        *tensors += 1;
        *elems += pt_numel(t);
        return true;
    }
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE:
    case PT_VALUE_DICT:
        for (int64_t i = 0; i < pt_value_len(v); i++)
            if (!touch_all(pt_value_item_ref(v, i), tensors, elems))
                return false;
        return true;
    default: return true;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *xs, int n)
{
    qsort(xs, (size_t)n, sizeof *xs, cmp_double);
    return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

static double best(const double *xs, int n)
{
    double b = xs[0];
    for (int i = 1; i < n; i++)
        b = xs[i] < b ? xs[i] : b;
    return b;
}

static const char usage[] =
    "usage: load_vs_torch FILE [--repeat N (1-1000)] [--warmup N] [--touch] [--copy]\n";

int main(int argc, char **argv)
{
    const char *path = NULL;
    int repeat = 5, warmup = 0;
    bool touch = false, copy = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--touch"))
            touch = true;
        else if (!strcmp(argv[i], "--copy"))
            copy = true;
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (!path || repeat < 1 || repeat > 1000 || warmup < 0 || warmup > 1000) {
        fputs(usage, stderr);
        return 2;
    }
    double *load_ms = calloc((size_t)repeat, sizeof(double));
    double *total_ms = calloc((size_t)repeat, sizeof(double));
    if (!load_ms || !total_ms)
        return 1;
    int64_t tensors = 0, elems = 0;
    for (int r = -warmup; r < repeat; r++) {
        double t0 = now_ms();
        pt_value *v = load_file(path, copy);
        if (!v) {
            fprintf(stderr, "load_vs_torch: %s\n", pt_last_error());
            return 1;
        }
        double t1 = now_ms();
        tensors = elems = 0;
        if (touch && !touch_all(v, &tensors, &elems)) {
            fprintf(stderr, "load_vs_torch: touching %s: %s\n", path, pt_last_error());
            return 1;
        }
        pt_value_free(v);
        double t2 = now_ms();
        if (r >= 0) {
            load_ms[r] = t1 - t0;
            total_ms[r] = t2 - t0;
        }
    }
    printf("{\"times_ms\": [");
    for (int r = 0; r < repeat; r++)
        printf("%s%.3f", r ? ", " : "", total_ms[r]);
    printf("], ");
    double bl = best(load_ms, repeat), bt = best(total_ms, repeat);
    double ml = median(load_ms, repeat), mt = median(total_ms, repeat);
    /* total = load + touch (if any) + pt_value_free: what a caller pays end to end. */
    printf("\"impl\": \"prometorch\", \"file\": \"%s\", \"touch\": %s, \"copy\": %s, "
           "\"repeat\": %d, \"threads\": %d, \"load_best_ms\": %.3f, \"load_median_ms\": %.3f, "
           "\"best_ms\": %.3f, \"median_ms\": %.3f, \"tensors\": %lld, \"elements\": %lld}\n",
           path, touch ? "true" : "false", copy ? "true" : "false", repeat, pt_get_num_threads(),
           bl, ml, bt, mt, (long long)tensors, (long long)elems);
    free(load_ms);
    free(total_ms);
    return 0;
}
