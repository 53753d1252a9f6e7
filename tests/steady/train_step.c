/* Checks the memory rule "no malloc in a steady-state training step": an MLP step (forward,
 * cross-entropy, backward, SGD update, grads dropped) inside a scope, run under the
 * malloc_counter LD_PRELOAD shim on one thread (OpenBLAS's own threaded GEMM allocates
 * internally, which is outside the library). After warm-up steps, 20 more steps must make
 * no allocator call and leave pt_memory_allocated() unchanged. Prints the plain result line. */
#include <dlfcn.h>
#include <prometorch/prometorch.h>
#include <stdio.h>

typedef unsigned long (*counter_fn)(void);

/* Reports a failed check in the plain result-line format and returns the exit status. */
static int fail(const char *why)
{
    printf("train_step: %s\n0 passed, 1 failed\n", why);
    return 1;
}

static int step(pt_tensor **w, pt_tensor **b, const pt_tensor *x, const pt_tensor *y)
{
    pt_scope_begin();
    const pt_tensor *h = x;
    for (int i = 0; i < 3; i++) {
        pt_tensor *z = pt_addmm(b[i], h, pt_t(w[i]));
        h = i < 2 ? pt_relu(z) : z;
    }
    pt_tensor *loss = pt_cross_entropy(h, y);
    int ok = pt_backward(loss, NULL, false, false) == PT_OK;
    pt_no_grad_begin();
    for (int i = 0; i < 3 && ok; i++) {
        ok = pt_add_alpha_(w[i], pt_grad(w[i]), -0.01) == PT_OK &&
             pt_add_alpha_(b[i], pt_grad(b[i]), -0.01) == PT_OK;
        pt_set_grad(w[i], NULL);
        pt_set_grad(b[i], NULL);
    }
    pt_no_grad_end();
    pt_scope_end();
    return ok;
}

int main(void)
{
    counter_fn calls = (counter_fn)dlsym(RTLD_DEFAULT, "malloc_counter_calls");
    if (!calls)
        return fail("run with LD_PRELOAD=libmalloc_counter.so");
    pt_set_num_threads(1);
    pt_manual_seed(0);
    const int64_t dims[4] = {784, 128, 64, 10};
    pt_tensor *w[3], *b[3];
    for (int i = 0; i < 3; i++) {
        w[i] = pt_mul_scalar(pt_randn(PT_SHAPE(dims[i + 1], dims[i]), PT_FLOAT32, pt_cpu()), 0.05);
        b[i] = pt_zeros(PT_SHAPE(dims[i + 1]), PT_FLOAT32, pt_cpu());
        pt_requires_grad_(w[i], true);
        pt_requires_grad_(b[i], true);
    }
    pt_tensor *x = pt_randn(PT_SHAPE(32, 784), PT_FLOAT32, pt_cpu());
    pt_tensor *y = pt_randint(0, 10, PT_SHAPE(32), PT_INT64, pt_cpu());
    for (int i = 0; i < 5; i++)
        if (!step(w, b, x, y))
            return fail(pt_last_error());
    unsigned long before = calls();
    size_t live = pt_memory_allocated();
    for (int i = 0; i < 20; i++)
        step(w, b, x, y);
    unsigned long made = calls() - before;
    printf("train_step: %lu allocator calls in 20 steady-state steps, live bytes %zu -> %zu\n",
           made, live, pt_memory_allocated());
    if (made != 0)
        return fail("the steady-state steps called the allocator");
    if (pt_memory_allocated() != live)
        return fail("the steady-state steps changed the live tensor bytes");
    printf("1 passed, 0 failed\n");
    return 0;
}
