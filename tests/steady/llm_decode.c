/* Checks the memory rule "no malloc in a steady-state decode step": a tiny GGUF model (the
 * committed random-weight llama of tests/fixtures/llm/tiny) evaluates a prompt, then decodes
 * greedily one token per pt_llm_eval call, under the malloc_counter LD_PRELOAD shim on one
 * thread. After warm-up steps, 20 more steps must make no allocator call and leave
 * pt_memory_allocated() unchanged. Prints the plain result line. */
#include <dlfcn.h>
#include <prometorch/prometorch.h>
#include <stdio.h>

typedef unsigned long (*counter_fn)(void);

static int fail(const char *why)
{
    printf("llm_decode: %s\n0 passed, 1 failed\n", why);
    return 1;
}

static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

int main(void)
{
    counter_fn calls = (counter_fn)dlsym(RTLD_DEFAULT, "malloc_counter_calls");
    if (!calls)
        return fail("run with LD_PRELOAD=libmalloc_counter.so");
    pt_set_num_threads(1);
    pt_llm_opts o = {.num_ctx = 256};
    pt_llm *llm = pt_llm_load(PT_FIXTURES_DIR "/llm/tiny/llama-q4_k_m.gguf", &o);
    if (!llm)
        return fail(pt_last_error());
    int32_t n_vocab = pt_llm_get_info(llm)->n_vocab, prompt[8] = {1, 20, 30, 40, 50, 60, 70, 80};
    if (pt_llm_eval(llm, prompt, 8, 0) != PT_OK)
        return fail(pt_last_error());
    int32_t n_past = 8;
    unsigned long before = 0;
    size_t live = 0;
    for (int step = 0; step < 60; step++) {
        if (step == 40) {
            before = calls();
            live = pt_memory_allocated();
        }
        int32_t tok = argmax(pt_llm_logits(llm), n_vocab);
        if (pt_llm_eval(llm, &tok, 1, n_past++) != PT_OK)
            return fail(pt_last_error());
    }
    unsigned long made = calls() - before;
    printf("llm_decode: %lu allocator calls in 20 steady-state decode steps, live bytes %zu -> "
           "%zu\n",
           made, live, pt_memory_allocated());
    if (made != 0)
        return fail("the steady-state decode steps called the allocator");
    if (pt_memory_allocated() != live)
        return fail("the steady-state decode steps changed the live tensor bytes");
    pt_llm_free(llm);
    printf("1 passed, 0 failed\n");
    return 0;
}
