/* The C half of benchmarks/ops_vs_torch.py: times ~28 common ops at 64x64 and 1024x1024
 * float32 and prints "name size ns_per_call" lines. Each op mirrors the PyTorch lambda of
 * the same name in ops_vs_torch.py. A call's time includes creating and releasing its result,
 * as in PyTorch. Usage: bench_ops [min_seconds [op,op,...]]. */
#include <prometorch/prometorch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct inputs {
    pt_tensor *a, *b, *pos, *row, *idx, *w, *bias;
    int64_t rows, cols;
} inputs;

typedef void (*op_fn)(const inputs *x);

static void op_add(const inputs *x)
{
    pt_add(x->a, x->b);
}
static void op_mul(const inputs *x)
{
    pt_mul(x->a, x->b);
}
static void op_div(const inputs *x)
{
    pt_div(x->a, x->pos);
}
static void op_sub_broadcast(const inputs *x)
{
    pt_sub(x->a, x->row);
}
static void op_mul_scalar(const inputs *x)
{
    pt_mul_scalar(x->a, 0.5);
}
static void op_exp(const inputs *x)
{
    pt_exp(x->a);
}
static void op_log(const inputs *x)
{
    pt_log(x->pos);
}
static void op_sqrt(const inputs *x)
{
    pt_sqrt(x->pos);
}
static void op_tanh(const inputs *x)
{
    pt_tanh(x->a);
}
static void op_sigmoid(const inputs *x)
{
    pt_sigmoid(x->a);
}
static void op_relu(const inputs *x)
{
    pt_relu(x->a);
}
static void op_gelu(const inputs *x)
{
    pt_gelu(x->a);
}
static void op_silu(const inputs *x)
{
    pt_silu(x->a);
}
static void op_clamp(const inputs *x)
{
    pt_clamp(x->a, true, -0.5, true, 0.5);
}
static void op_where_gt(const inputs *x)
{
    pt_where(pt_gt(x->a, x->b), x->a, x->b);
}
static void op_sum(const inputs *x)
{
    pt_sum(x->a);
}
static void op_mean_dim(const inputs *x)
{
    pt_mean_dim(x->a, PT_DIMS(-1), false);
}
static void op_max_dim(const inputs *x)
{
    pt_tensor *idx = NULL;
    pt_max_dim(x->a, -1, false, &idx);
}
static void op_argmax(const inputs *x)
{
    pt_argmax(x->a, -1, false);
}
static void op_var_dim(const inputs *x)
{
    pt_var(x->a, PT_DIMS(-1), 1, false);
}
static void op_softmax(const inputs *x)
{
    pt_softmax(x->a, -1);
}
static void op_log_softmax(const inputs *x)
{
    pt_log_softmax(x->a, -1);
}
static void op_cumsum(const inputs *x)
{
    pt_cumsum(x->a, -1);
}
static void op_matmul(const inputs *x)
{
    pt_matmul(x->a, x->b);
}
static void op_transpose_contiguous(const inputs *x)
{
    pt_contiguous(pt_t(x->a));
}
static void op_cat(const inputs *x)
{
    const pt_tensor *ts[2] = {x->a, x->b};
    pt_cat(2, ts, 0);
}
static void op_index_select(const inputs *x)
{
    pt_index_select(x->a, 0, x->idx);
}
static void op_layer_norm(const inputs *x)
{
    pt_layer_norm(x->a, 1, &x->cols, x->w, x->bias, 1e-5);
}

static const struct {
    const char *name;
    op_fn fn;
} ops[] = {
    {"add", op_add},
    {"mul", op_mul},
    {"div", op_div},
    {"sub_broadcast", op_sub_broadcast},
    {"mul_scalar", op_mul_scalar},
    {"exp", op_exp},
    {"log", op_log},
    {"sqrt", op_sqrt},
    {"tanh", op_tanh},
    {"sigmoid", op_sigmoid},
    {"relu", op_relu},
    {"gelu", op_gelu},
    {"silu", op_silu},
    {"clamp", op_clamp},
    {"where_gt", op_where_gt},
    {"sum", op_sum},
    {"mean_dim", op_mean_dim},
    {"max_dim", op_max_dim},
    {"argmax", op_argmax},
    {"var_dim", op_var_dim},
    {"softmax", op_softmax},
    {"log_softmax", op_log_softmax},
    {"cumsum", op_cumsum},
    {"matmul", op_matmul},
    {"transpose_contiguous", op_transpose_contiguous},
    {"cat", op_cat},
    {"index_select", op_index_select},
    {"layer_norm", op_layer_norm},
};

/* True when name is one of the comma-separated entries of list. */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (end != NULL);
    }
    return 0;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* reps calls, each in its own scope so results are released as PyTorch releases them */
static double run(op_fn fn, const inputs *x, long reps)
{
    double t0 = now_ns();
    for (long i = 0; i < reps; i++) {
        pt_scope_begin();
        fn(x);
        pt_scope_end();
    }
    return now_ns() - t0;
}

static int cmp(const void *a, const void *b)
{
    double p = *(const double *)a, q = *(const double *)b;
    return p < q ? -1 : p > q;
}

static double time_op(op_fn fn, const inputs *x, double min_seconds)
{
    run(fn, x, 3);
    long reps = 1;
    while (run(fn, x, reps) < min_seconds * 1e9 / 5 && reps < (1L << 22))
        reps *= 2;
    double trials[5];
    for (int t = 0; t < 5; t++)
        trials[t] = run(fn, x, reps) / (double)reps;
    qsort(trials, 5, sizeof(double), cmp);
    return trials[2];
}

static void make_inputs(inputs *x, int64_t rows, int64_t cols)
{
    x->rows = rows;
    x->cols = cols;
    x->a = pt_randn(PT_SHAPE(rows, cols), PT_FLOAT32, pt_cpu());
    x->b = pt_randn(PT_SHAPE(rows, cols), PT_FLOAT32, pt_cpu());
    x->pos = pt_add_scalar(pt_abs(x->a), 0.5);
    x->row = pt_randn(PT_SHAPE(cols), PT_FLOAT32, pt_cpu());
    x->idx = pt_randint(0, rows, PT_SHAPE(rows), PT_INT64, pt_cpu());
    x->w = pt_randn(PT_SHAPE(cols), PT_FLOAT32, pt_cpu());
    x->bias = pt_randn(PT_SHAPE(cols), PT_FLOAT32, pt_cpu());
}

int main(int argc, char **argv)
{
    double min_seconds = argc > 1 ? atof(argv[1]) : 0.5;
    const char *only = argc > 2 ? argv[2] : NULL; /* comma-separated op names */
    static const struct {
        const char *name;
        int64_t rows, cols;
    } sizes[] = {{"small", 64, 64}, {"large", 1024, 1024}};
    pt_manual_seed(0);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        pt_scope_begin();
        inputs x;
        make_inputs(&x, sizes[s].rows, sizes[s].cols);
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
            if (only && !listed(only, ops[i].name))
                continue;
            pt_scope_begin();
            ops[i].fn(&x);
            pt_scope_end();
            if (pt_last_status() != PT_OK) {
                fprintf(stderr, "%s failed: %s\n", ops[i].name, pt_last_error());
                return 1;
            }
            printf("%s %s %.1f\n", ops[i].name, sizes[s].name, time_op(ops[i].fn, &x, min_seconds));
            fflush(stdout);
        }
        pt_scope_end();
    }
    return 0;
}
