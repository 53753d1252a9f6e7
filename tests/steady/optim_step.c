/* Checks "no malloc in a steady-state training step" with the optimizers: an MLP step
 * (forward, cross-entropy, backward, pt_optim_step, pt_optim_zero_grad) for each algorithm in
 * include/prometorch/optim.h that steps without a closure (all but LBFGS), run under the
 * malloc_counter LD_PRELOAD shim on one thread. State tensors are allocated by the first steps;
 * after warm-up, 10 more steps must make no allocator call and leave pt_memory_allocated()
 * unchanged. Prints the plain result line. */
#include <dlfcn.h>
#include <prometorch/prometorch.h>
#include <stdio.h>

typedef unsigned long (*counter_fn)(void);

static int fail(const char *name, const char *why)
{
    printf("optim_step %s: %s\n0 passed, 1 failed\n", name, why);
    return 1;
}

static int step(pt_optim *opt, pt_tensor **w, pt_tensor **b, const pt_tensor *x, const pt_tensor *y)
{
    pt_scope_begin();
    const pt_tensor *h = x;
    for (int i = 0; i < 2; i++) {
        pt_tensor *z = pt_addmm(b[i], h, pt_t(w[i]));
        h = i < 1 ? pt_relu(z) : z;
    }
    int ok = pt_backward(pt_cross_entropy(h, y), NULL, false, false) == PT_OK &&
             pt_optim_step(opt) == PT_OK;
    pt_optim_zero_grad(opt);
    pt_scope_end();
    return ok;
}

static pt_optim *make(int which, pt_tensor *const *params, const char **name)
{
    pt_rmsprop_opts r = PT_RMSPROP_DEFAULTS;
    pt_adam_opts a = PT_ADAM_DEFAULTS;
    pt_adamw_opts aw = PT_ADAMW_DEFAULTS;
    a.amsgrad = true;
    r.centered = true, r.momentum = 0.9;
    switch (which) {
    case 0:
        *name = "SGD";
        return pt_optim_sgd_params(4, params,
                                   (pt_sgd_opts){.lr = 0.01, .momentum = 0.9, .nesterov = true});
    case 1: *name = "Adam"; return pt_optim_adam_params(4, params, a);
    case 2: *name = "AdamW"; return pt_optim_adamw_params(4, params, aw);
    case 3: *name = "RMSprop"; return pt_optim_rmsprop_params(4, params, r);
    case 4: *name = "Adagrad"; return pt_optim_adagrad_params(4, params, PT_ADAGRAD_DEFAULTS);
    case 5: *name = "Adadelta"; return pt_optim_adadelta_params(4, params, PT_ADADELTA_DEFAULTS);
    case 6: *name = "Adamax"; return pt_optim_adamax_params(4, params, PT_ADAMAX_DEFAULTS);
    case 7: *name = "NAdam"; return pt_optim_nadam_params(4, params, PT_NADAM_DEFAULTS);
    case 8: *name = "RAdam"; return pt_optim_radam_params(4, params, PT_RADAM_DEFAULTS);
    case 9: *name = "ASGD"; return pt_optim_asgd_params(4, params, PT_ASGD_DEFAULTS);
    case 10: *name = "Rprop"; return pt_optim_rprop_params(4, params, PT_RPROP_DEFAULTS);
    case 11: *name = "Lion"; return pt_optim_lion_params(4, params, PT_LION_DEFAULTS);
    case 12: *name = "LAMB"; return pt_optim_lamb_params(4, params, PT_LAMB_DEFAULTS);
    case 13:
        *name = "Adafactor";
        return pt_optim_adafactor_params(4, params, PT_ADAFACTOR_DEFAULTS);
    default: *name = "SophiaG"; return pt_optim_sophia_params(4, params, PT_SOPHIA_DEFAULTS);
    }
}

int main(void)
{
    counter_fn calls = (counter_fn)dlsym(RTLD_DEFAULT, "malloc_counter_calls");
    if (!calls)
        return fail("", "run with LD_PRELOAD=libmalloc_counter.so");
    pt_set_num_threads(1);
    pt_manual_seed(0);
    const int64_t dims[3] = {64, 32, 10};
    pt_tensor *w[2], *b[2], *params[4];
    for (int i = 0; i < 2; i++) {
        w[i] = pt_mul_scalar(pt_randn(PT_SHAPE(dims[i + 1], dims[i]), PT_FLOAT32, pt_cpu()), 0.1);
        b[i] = pt_zeros(PT_SHAPE(dims[i + 1]), PT_FLOAT32, pt_cpu());
        pt_requires_grad_(w[i], true);
        pt_requires_grad_(b[i], true);
        params[2 * i] = w[i];
        params[2 * i + 1] = b[i];
    }
    pt_tensor *x = pt_randn(PT_SHAPE(16, 64), PT_FLOAT32, pt_cpu());
    pt_tensor *y = pt_randint(0, 10, PT_SHAPE(16), PT_INT64, pt_cpu());
    for (int which = 0; which < 15; which++) {
        const char *name = "";
        pt_optim *opt = make(which, params, &name);
        if (!opt)
            return fail(name, pt_last_error());
        for (int i = 0; i < 3; i++)
            if (!step(opt, w, b, x, y))
                return fail(name, pt_last_error());
        unsigned long before = calls();
        size_t live = pt_memory_allocated();
        for (int i = 0; i < 10; i++)
            step(opt, w, b, x, y);
        unsigned long made = calls() - before;
        printf("optim_step %s: %lu allocator calls in 10 steady-state steps, live bytes %zu -> "
               "%zu\n",
               name, made, live, pt_memory_allocated());
        if (made != 0)
            return fail(name, "the steady-state steps called the allocator");
        if (pt_memory_allocated() != live)
            return fail(name, "the steady-state steps changed the live tensor bytes");
        pt_optim_free(opt);
    }
    printf("1 passed, 0 failed\n");
    return 0;
}
