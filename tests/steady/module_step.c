/* "No malloc in a steady-state training step" for the nn and optim layers: a small CNN
 * (conv, batch norm, ReLU, max-pool, flatten, linear, dropout) and an LSTM, each trained
 * with Adam through pt_nn_forward / pt_backward / pt_optim_step / pt_optim_zero_grad inside a
 * scope, under the malloc_counter LD_PRELOAD shim on one thread. After warm-up steps, 20
 * more steps must make no allocator call and leave pt_memory_allocated() unchanged. */
#include <dlfcn.h>
#include <prometorch/prometorch.h>
#include <stdio.h>

typedef unsigned long (*counter_fn)(void);

static int fail(const char *what, const char *why)
{
    printf("module_step %s: %s\n0 passed, 1 failed\n", what, why);
    return 1;
}

static bool cnn_step(pt_module *net, pt_optim *opt, const pt_tensor *x, const pt_tensor *y)
{
    pt_scope_begin();
    pt_tensor *loss = pt_cross_entropy(pt_nn_forward(net, x), y);
    pt_optim_zero_grad(opt);
    bool ok = pt_backward(loss, NULL, false, false) == PT_OK && pt_optim_step(opt) == PT_OK;
    pt_scope_end();
    return ok;
}

static bool lstm_step(pt_module *lstm, pt_module *head, pt_optim *opt, const pt_tensor *x,
                      const pt_tensor *y)
{
    pt_scope_begin();
    pt_tensor *out = pt_nn_forward(lstm, x); /* [T, B, H] */
    pt_tensor *logits = pt_nn_forward(head, pt_reshape(out, PT_SHAPE(-1, 32)));
    pt_tensor *loss = pt_cross_entropy(logits, y);
    pt_optim_zero_grad(opt);
    bool ok = pt_backward(loss, NULL, false, false) == PT_OK && pt_optim_step(opt) == PT_OK;
    pt_scope_end();
    return ok;
}

/* Runs warm-up steps, then 20 counted steps; returns 0 when none allocated. */
static int check_steady(const char *what, bool (*run)(void *), void *ctx, counter_fn calls)
{
    for (int i = 0; i < 5; i++)
        if (!run(ctx))
            return fail(what, pt_last_error());
    unsigned long before = calls();
    size_t live = pt_memory_allocated();
    for (int i = 0; i < 20; i++)
        if (!run(ctx))
            return fail(what, pt_last_error());
    unsigned long made = calls() - before;
    printf("module_step %s: %lu allocator calls in 20 steady-state steps, live bytes %zu -> %zu\n",
           what, made, live, pt_memory_allocated());
    if (made != 0)
        return fail(what, "the steady-state steps called the allocator");
    if (pt_memory_allocated() != live)
        return fail(what, "the steady-state steps changed the live tensor bytes");
    return 0;
}

typedef struct {
    pt_module *net, *head;
    pt_optim *opt;
    pt_tensor *x, *y;
} job;

static bool run_cnn(void *p)
{
    job *j = p;
    return cnn_step(j->net, j->opt, j->x, j->y);
}

static bool run_lstm(void *p)
{
    job *j = p;
    return lstm_step(j->net, j->head, j->opt, j->x, j->y);
}

int main(void)
{
    counter_fn calls = (counter_fn)dlsym(RTLD_DEFAULT, "malloc_counter_calls");
    if (!calls)
        return fail("setup", "run with LD_PRELOAD=libmalloc_counter.so");
    pt_set_num_threads(1);
    pt_manual_seed(0);

    pt_module *cnn_layers[] = {pt_nn_conv2d(1, 8, 3, 1, 1, true),
                               pt_nn_batch_norm2d(8),
                               pt_nn_relu(),
                               pt_nn_max_pool2d(2, 2, 0),
                               pt_nn_flatten(1, -1),
                               pt_nn_linear(8 * 7 * 7, 32, true),
                               pt_nn_relu(),
                               pt_nn_dropout(0.25),
                               pt_nn_linear(32, 10, true)};
    job cnn = {.net = pt_nn_sequential(9, cnn_layers)};
    cnn.opt = pt_optim_adam(cnn.net, PT_ADAM_DEFAULTS);
    cnn.x = pt_randn(PT_SHAPE(16, 1, 14, 14), PT_FLOAT32, pt_cpu());
    cnn.y = pt_randint(0, 10, PT_SHAPE(16), PT_INT64, pt_cpu());
    if (!cnn.opt || !cnn.x || !cnn.y)
        return fail("setup", pt_last_error());
    int rc = check_steady("cnn+adam", run_cnn, &cnn, calls);

    pt_rnn_opts ro = PT_RNN_DEFAULTS;
    job lstm = {.net = pt_nn_lstm(16, 32, &ro), .head = pt_nn_linear(32, 10, true)};
    pt_module *both = pt_nn_module_list(2, (pt_module *[]){lstm.net, lstm.head});
    lstm.opt = pt_optim_adam(both, PT_ADAM_DEFAULTS);
    lstm.x = pt_randn(PT_SHAPE(12, 4, 16), PT_FLOAT32, pt_cpu());
    lstm.y = pt_randint(0, 10, PT_SHAPE(48), PT_INT64, pt_cpu());
    if (!lstm.opt)
        return fail("setup", pt_last_error());
    if (rc == 0)
        rc = check_steady("lstm+adam", run_lstm, &lstm, calls);
    if (rc == 0)
        printf("2 passed, 0 failed\n");
    pt_optim_free(cnn.opt);
    pt_optim_free(lstm.opt);
    pt_nn_free(cnn.net);
    pt_nn_free(both);
    return rc;
}
