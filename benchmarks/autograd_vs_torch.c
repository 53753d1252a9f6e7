/* The C half of benchmarks/autograd_vs_torch.py: times forward + backward of
 *   mlp:   a 3-layer MLP 784-512-256-10 (ReLU, cross_entropy) at batch 64, float32
 *   chain: 1,000 tiny elementwise ops (mul_scalar, add_scalar, tanh in turn) on a [16]
 *          float32 tensor, then sum (measures the engine's per-node overhead)
 * and prints "name ns_per_step" lines. A step includes building the graph, backward, and
 * dropping the parameters' .grad (PyTorch's zero_grad(set_to_none=True)), mirroring the
 * Python side exactly. Usage: autograd_vs_torch [min_seconds]. */
#include <math.h>
#include <prometorch/prometorch.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct mlp {
    pt_tensor *x, *y, *w[3], *b[3];
} mlp;

typedef struct chain {
    pt_tensor *x;
} chain;

typedef bool (*step_fn)(void *state);

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* A leaf parameter: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), nn.Linear's init. */
static pt_tensor *param(int ndim, const int64_t *shape, int64_t fan_in)
{
    pt_tensor *u = pt_rand(ndim, shape, PT_FLOAT32, pt_cpu());
    double bound = 1.0 / sqrt((double)fan_in);
    pt_tensor *p = pt_add_scalar(pt_mul_scalar(u, 2 * bound), -bound);
    pt_requires_grad_(p, true);
    return p;
}

static void mlp_init(mlp *m)
{
    static const int64_t dims[4] = {784, 512, 256, 10};
    pt_scope_begin();
    m->x = pt_retain(pt_randn(PT_SHAPE(64, 784), PT_FLOAT32, pt_cpu()));
    m->y = pt_retain(pt_randint(0, 10, PT_SHAPE(64), PT_INT64, pt_cpu()));
    for (int l = 0; l < 3; l++) {
        m->w[l] = pt_retain(param(PT_SHAPE(dims[l + 1], dims[l]), dims[l]));
        m->b[l] = pt_retain(param(PT_SHAPE(dims[l + 1]), dims[l]));
    }
    pt_scope_end();
}

static void mlp_free(mlp *m)
{
    pt_release(m->x);
    pt_release(m->y);
    for (int l = 0; l < 3; l++) {
        pt_release(m->w[l]);
        pt_release(m->b[l]);
    }
}

/* forward, cross_entropy, backward, grads dropped */
static bool mlp_step(void *state)
{
    mlp *m = state;
    pt_tensor *h = pt_retain(m->x);
    for (int l = 0; l < 3; l++) {
        pt_tensor *wt = pt_t(m->w[l]);
        pt_tensor *z = pt_addmm(m->b[l], h, wt);
        pt_release(wt);
        pt_release(h);
        h = l < 2 ? pt_relu(z) : pt_retain(z);
        pt_release(z);
    }
    pt_tensor *loss = pt_cross_entropy(h, m->y);
    pt_release(h);
    bool ok = loss && pt_backward(loss, NULL, false, false) == PT_OK;
    pt_release(loss);
    for (int l = 0; l < 3; l++) {
        pt_set_grad(m->w[l], NULL);
        pt_set_grad(m->b[l], NULL);
    }
    return ok;
}

static bool chain_step(void *state)
{
    chain *c = state;
    pt_tensor *h = pt_retain(c->x);
    for (int i = 0; i < 1000; i++) {
        pt_tensor *n = i % 3 == 0   ? pt_mul_scalar(h, 0.999)
                       : i % 3 == 1 ? pt_add_scalar(h, 0.001)
                                    : pt_tanh(h);
        pt_release(h);
        h = n;
    }
    pt_tensor *s = pt_sum(h);
    pt_release(h);
    bool ok = s && pt_backward(s, NULL, false, false) == PT_OK;
    pt_release(s);
    pt_set_grad(c->x, NULL);
    return ok;
}

static int cmp(const void *a, const void *b)
{
    double p = *(const double *)a, q = *(const double *)b;
    return p < q ? -1 : p > q;
}

static double run(step_fn fn, void *state, long reps)
{
    double t0 = now_ns();
    for (long i = 0; i < reps; i++)
        fn(state);
    return now_ns() - t0;
}

/* Median of 5 trials of ns per step; -1 when a step fails. */
static double time_step(step_fn fn, void *state, double min_seconds)
{
    for (int i = 0; i < 3; i++)
        if (!fn(state))
            return -1;
    long reps = 1;
    while (run(fn, state, reps) < min_seconds * 1e9 / 5 && reps < (1L << 20))
        reps *= 2;
    double trials[5];
    for (int t = 0; t < 5; t++)
        trials[t] = run(fn, state, reps) / (double)reps;
    qsort(trials, 5, sizeof(double), cmp);
    return trials[2];
}

static int report(const char *name, double ns)
{
    if (ns < 0) {
        fprintf(stderr, "%s: %s\n", name, pt_last_error());
        return 1;
    }
    printf("%s %.1f\n", name, ns);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    double min_seconds = argc > 1 ? atof(argv[1]) : 0.5;
    int failed = 0;
    pt_manual_seed(0);
    mlp m;
    mlp_init(&m);
    failed += report("mlp", time_step(mlp_step, &m, min_seconds));
    mlp_free(&m);
    chain c = {pt_randn(PT_SHAPE(16), PT_FLOAT32, pt_cpu())};
    pt_requires_grad_(c.x, true);
    failed += report("chain", time_step(chain_step, &c, min_seconds));
    pt_release(c.x);
    return failed ? 1 : 0;
}
