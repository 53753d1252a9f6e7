/* Allocation fault injection: each scenario (ops with autograd, a module with an optimizer and
 * its state dict, a CNN step and the .pt / safetensors writers, the checkpoint and model readers,
 * an LLM load and generation) runs once to count its allocations, then again with the n-th
 * allocation failing for every n (sampled evenly when there are very many). Every run must end in a
 * clean error — a failing status with a message, PT_ERR_OOM or an error that names the failed call
 * — or succeed where the library could do without the block; never a crash; and afterwards no
 * tensor memory and no heap block may be left behind (pt_memory_allocated and glibc's mallinfo2
 * back to what they were; glibc's per-thread cache is turned off for the run, since it keeps freed
 * blocks counted as in use). Under the sanitizers LeakSanitizer checks the same at exit. */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/internal.h"
#include "prometorch/prometorch.h"
#include "testutil.h"

/* Runs with this many injected faults at most; beyond it the failure points are sampled. */
#define MAX_RUNS 400

typedef pt_status (*scenario_fn)(void);

static pt_status status_of(const void *p)
{
    return p ? PT_OK : (pt_last_status() != PT_OK ? pt_last_status() : PT_ERR_RUNTIME);
}

/* ---- scenarios: each frees everything it made, whatever happens ------------------------------ */

/* y = relu(x @ w + b).sum(); backward; the gradients read back. */
static pt_status ops_autograd(void)
{
    pt_scope_begin();
    pt_tensor *x = pt_randn(PT_SHAPE(8, 16), PT_FLOAT32, pt_cpu());
    pt_tensor *w = pt_randn(PT_SHAPE(16, 4), PT_FLOAT32, pt_cpu());
    pt_tensor *b = pt_zeros(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    pt_status st = status_of(x && w && b ? x : NULL);
    if (st == PT_OK) {
        pt_set_requires_grad(w, true);
        pt_set_requires_grad(b, true);
        pt_tensor *y = pt_sum(pt_relu(pt_add(pt_matmul(x, w), b)));
        st = status_of(y);
        if (st == PT_OK)
            st = pt_backward(y, NULL, false, false);
        pt_tensor *g = st == PT_OK ? pt_grad(w) : NULL;
        if (st == PT_OK)
            st = status_of(pt_cat(2, (pt_tensor *[]){pt_reshape(g, PT_SHAPE(-1)), b}, 0));
        pt_release(g);
    }
    pt_scope_end();
    return st;
}

/* Sequential(Linear, ReLU, Linear): forward, cross-entropy, backward, an Adam step, then the
 * state dict saved to memory and loaded back strictly. */
static pt_status module_optimizer(void)
{
    pt_module *layers[] = {pt_nn_linear(6, 8, true), pt_nn_relu(), pt_nn_linear(8, 3, true)};
    pt_module *model = pt_nn_sequential(3, layers); /* owns them, NULL ones included */
    if (!model)
        return status_of(NULL);
    pt_optim *opt = pt_optim_adam(model, PT_ADAM_DEFAULTS);
    pt_status st = status_of(opt);
    pt_scope_begin();
    if (st == PT_OK) {
        pt_tensor *x = pt_randn(PT_SHAPE(5, 6), PT_FLOAT32, pt_cpu());
        pt_tensor *t = pt_from_data((int64_t[]){0, 2, 1, 1, 0}, PT_SHAPE(5), PT_INT64, pt_cpu());
        pt_tensor *loss = pt_cross_entropy(pt_nn_forward(model, x), t);
        st = status_of(loss);
        if (st == PT_OK)
            st = pt_backward(loss, NULL, false, false);
        if (st == PT_OK)
            st = pt_optim_step(opt);
    }
    pt_scope_end();
    if (st == PT_OK) {
        pt_value *sd = pt_nn_state_dict(model);
        st = status_of(sd);
        if (st == PT_OK)
            st = pt_nn_load_state_dict(model, sd, true);
        pt_value_free(sd);
    }
    pt_optim_free(opt);
    pt_nn_free(model);
    return st;
}

/* A small CNN (conv, batch norm, max-pool, linear) trained one SGD step, its state dict written
 * as .pt and as safetensors. */
static pt_status conv_net_and_writers(void)
{
    pt_module *layers[] = {pt_nn_conv2d(2, 4, 3, 1, 1, false),
                           pt_nn_batch_norm2d(4),
                           pt_nn_relu(),
                           pt_nn_max_pool2d(2, 2, 0),
                           pt_nn_flatten(1, -1),
                           pt_nn_linear(4 * 4 * 4, 3, true)};
    pt_module *model = pt_nn_sequential(6, layers);
    if (!model)
        return status_of(NULL);
    pt_optim *opt = pt_optim_sgd(model, (pt_sgd_opts){.lr = 0.1, .momentum = 0.9});
    pt_status st = status_of(opt);
    pt_scope_begin();
    if (st == PT_OK) {
        pt_tensor *x = pt_randn(PT_SHAPE(2, 2, 8, 8), PT_FLOAT32, pt_cpu());
        pt_tensor *t = pt_from_data((int64_t[]){1, 2}, PT_SHAPE(2), PT_INT64, pt_cpu());
        pt_tensor *loss = pt_cross_entropy(pt_nn_forward(model, x), t);
        st = status_of(loss);
        if (st == PT_OK)
            st = pt_backward(loss, NULL, false, false);
        if (st == PT_OK)
            st = pt_optim_step(opt);
    }
    pt_scope_end();
    char path[64];
    snprintf(path, sizeof path, "/tmp/pt_alloc_faults_%d.pt", (int)getpid());
    if (st == PT_OK)
        st = pt_nn_save(model, path);
    snprintf(path, sizeof path, "/tmp/pt_alloc_faults_%d.safetensors", (int)getpid());
    if (st == PT_OK)
        st = pt_nn_save(model, path);
    unlink(path);
    snprintf(path, sizeof path, "/tmp/pt_alloc_faults_%d.pt", (int)getpid());
    unlink(path);
    pt_optim_free(opt);
    pt_nn_free(model);
    return st;
}

static char fixture_path[4][1024];

/* The readers: a torch.save'd checkpoint, a safetensors file, a GGUF file's metadata. */
static pt_status readers(void)
{
    pt_value *pt = pt_load(fixture_path[0]);
    pt_status st = status_of(pt);
    pt_value_free(pt);
    if (st != PT_OK)
        return st;
    pt_value *sf = pt_load_safetensors(fixture_path[1], NULL);
    st = status_of(sf);
    pt_value_free(sf);
    if (st != PT_OK)
        return st;
    pt_gguf *g = pt_gguf_open(fixture_path[2]);
    st = status_of(g);
    pt_gguf_close(g);
    return st;
}

/* A tiny GGUF model: load, tokenize, 4 greedy tokens, detokenize. */
static pt_status llm(void)
{
    pt_llm_opts lo = {.num_ctx = 64};
    pt_llm *m = pt_llm_load(fixture_path[3], &lo);
    if (!m)
        return status_of(NULL);
    pt_gen_opts go = pt_gen_opts_default();
    go.temperature = 0;
    go.num_predict = 4;
    pt_status st = pt_llm_generate(m, "Hello there", &go, NULL, NULL);
    int32_t ids[16];
    int64_t n = st == PT_OK ? pt_llm_tokenize(m, "a b", 3, false, false, ids, 16) : -1;
    if (st == PT_OK && n < 0)
        st = status_of(NULL);
    char *text = st == PT_OK ? pt_llm_detokenize(m, ids, n, false) : NULL;
    if (st == PT_OK)
        st = status_of(text);
    free(text);
    pt_llm_free(m);
    return st;
}

/* ---- the harness -------------------------------------------------------------------------- */

/* Heap bytes in use (glibc), after the tensor cache was emptied. Under AddressSanitizer the
 * heap is its own (mallinfo2 says nothing) and LeakSanitizer does this check at exit. */
static size_t heap_in_use(void)
{
    pt_empty_cache();
#ifdef __SANITIZE_ADDRESS__
    return 0;
#else
    return mallinfo2().uordblks;
#endif
}

typedef struct fault_stats {
    int runs, oom, other_errors, survived;
} fault_stats;

/* Runs fn with the n-th allocation failing; true when that allocation was reached. */
static bool faulty_run(scenario_fn fn, int64_t n, pt_status *st)
{
    pt_clear_error();
    pti_alloc_fail_nth(n);
    *st = fn();
    bool fired = pti_alloc_fault_pending() == 0;
    pti_alloc_fail_nth(0);
    return fired;
}

/* Runs with the n-th allocation failing: a clean result and nothing left behind. The run is
 * done twice and the second is measured: the library keeps small caches (tensor structs, scope
 * lists) that a failure path may fill once, while a leak repeats on every run. */
static void run_with_fault(const char *name, scenario_fn fn, int64_t n, fault_stats *stats)
{
    if (getenv("PT_FAULT_VERBOSE"))
        fprintf(stderr, "%s: failing allocation %lld\n", name, (long long)n);
    pt_status st;
    if (!faulty_run(fn, n, &st))
        fail_msg("%s: allocation %lld was not reached (the scenario is not deterministic)", name,
                 (long long)n);
    size_t tensors_before = pt_memory_allocated(), heap_before = heap_in_use();
    faulty_run(fn, n, &st);
    stats->runs++;
    if (st == PT_OK) {
        stats->survived++;
    } else if (pt_last_error()[0] == '\0') {
        fail_msg("%s: allocation %lld failed and gave status %d with no message", name,
                 (long long)n, (int)st);
    } else if (st == PT_ERR_OOM || strstr(pt_last_error(), "out of memory")) {
        stats->oom++;
    } else {
        stats->other_errors++;
        if (getenv("PT_FAULT_VERBOSE"))
            fprintf(stderr, "%s: allocation %lld: not an out-of-memory error: %s\n", name,
                    (long long)n, pt_last_error());
    }
    size_t tensors_after = pt_memory_allocated(), heap_after = heap_in_use();
    if (tensors_after != tensors_before)
        fail_msg("%s: with allocation %lld failing, %zd bytes of tensor memory leaked (%s)", name,
                 (long long)n, (ssize_t)(tensors_after - tensors_before), pt_last_error());
    if (heap_after > heap_before)
        fail_msg("%s: with allocation %lld failing, %zu heap bytes leaked (%s)", name, (long long)n,
                 heap_after - heap_before, pt_last_error());
}

/* Counts the scenario's allocations (a run with a failure point it never reaches), then runs
 * it with each one failing. */
static void check_scenario(const char *name, scenario_fn fn)
{
    pt_set_num_threads(1);         /* one allocation order */
    assert_int_equal(fn(), PT_OK); /* warm-up: lazy one-time state is made here */
    const int64_t far = (int64_t)1 << 40;
    pti_alloc_fail_nth(far);
    assert_int_equal(fn(), PT_OK);
    int64_t total = far - pti_alloc_fault_pending();
    pti_alloc_fail_nth(0);
    assert_true(total > 0);
    int64_t stride = total > MAX_RUNS ? (total + MAX_RUNS - 1) / MAX_RUNS : 1;
    fault_stats stats = {0};
    for (int64_t n = 1; n <= total; n += stride)
        run_with_fault(name, fn, n, &stats);
    if (stride > 1)
        run_with_fault(name, fn, total, &stats); /* the last one too */
    print_message("%s: %lld allocations, %d runs with one failing: %d out-of-memory errors, "
                  "%d other errors, %d completed without the block\n",
                  name, (long long)total, stats.runs, stats.oom, stats.other_errors,
                  stats.survived);
    assert_true(stats.oom > 0);
    /* a failed allocation is reported as one, not as some later symptom of it
     * (PT_FAULT_VERBOSE=1 names the runs that were not) */
    assert_int_equal(stats.other_errors, 0);
    assert_int_equal(fn(), PT_OK); /* and it still works afterwards */
}

static void test_ops_autograd(void **state)
{
    (void)state;
    check_scenario("ops+autograd", ops_autograd);
}

static void test_module_optimizer(void **state)
{
    (void)state;
    check_scenario("module+optimizer", module_optimizer);
}

static void test_conv_net_and_writers(void **state)
{
    (void)state;
    check_scenario("conv net+writers", conv_net_and_writers);
}

static void test_readers(void **state)
{
    (void)state;
    check_scenario("readers", readers);
}

static void test_llm(void **state)
{
    (void)state;
    check_scenario("llm", llm);
}

#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)

/* mallinfo2 counts blocks held in glibc's tcache as in use, which would read as leaks: the test
 * runs itself again with the cache off (sanitizer builds have their own allocator). */
static void without_tcache(char **argv)
{
    const char *tunables = getenv("GLIBC_TUNABLES");
    if (tunables && strstr(tunables, "glibc.malloc.tcache_count=0"))
        return;
    setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0", 1);
    execv("/proc/self/exe", argv);
    perror("test_alloc_faults: re-exec without tcache");
    exit(1);
}

int main(int argc, char **argv)
{
    (void)argc;
    without_tcache(argv);
    snprintf(fixture_path[0], sizeof fixture_path[0], "%s/safetensors/training.pt",
             PT_FIXTURES_DIR);
    snprintf(fixture_path[1], sizeof fixture_path[1], "%s/safetensors/model.safetensors",
             PT_FIXTURES_DIR);
    snprintf(fixture_path[2], sizeof fixture_path[2], "%s/gguf/meta.gguf", PT_FIXTURES_DIR);
    snprintf(fixture_path[3], sizeof fixture_path[3], "%s/llm/tiny/llama-q4_k_m.gguf",
             PT_FIXTURES_DIR);
    const struct CMUnitTest tests[] = {
        T(test_ops_autograd),
        T(test_module_optimizer),
        T(test_conv_net_and_writers),
        T(test_readers),
        T(test_llm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
