/* Checks "no malloc in a steady-state decode step" for the serving engine (src/serve/llm/engine.h):
 * two requests on the committed tiny llama decode together, one batched forward pass per
 * step, under the malloc_counter LD_PRELOAD shim on one op thread. Between request 0's 40th
 * and 140th piece of text (100 steps of both slots) no allocator call may happen. Linked with
 * the library's objects (the engine is internal). Prints the plain result line. */
#include <dlfcn.h>
#include <prometorch/prometorch.h>
#include <stdio.h>
#include <unistd.h>

#include "serve/llm/engine.h"

typedef unsigned long (*counter_fn)(void);

static counter_fn calls;
static unsigned long at_40, at_140;
static int n_text[2], n_done;

static int fail(const char *why)
{
    printf("engine_decode: %s\n0 passed, 1 failed\n", why);
    return 1;
}

/* Runs on the engine's worker thread; must not allocate. */
static bool on_text(void *user, const char *text, size_t len)
{
    (void)text;
    (void)len;
    int k = (int)(long)user;
    n_text[k]++;
    if (k == 0 && n_text[0] == 40)
        at_40 = calls();
    if (k == 0 && n_text[0] == 140)
        at_140 = calls();
    return true;
}

static void on_done(void *user, pt_status st, const char *msg, const pt_gen_stats *stats,
                    const float *embedding, int32_t n_embd)
{
    (void)user;
    (void)st;
    (void)msg;
    (void)stats;
    (void)embedding;
    (void)n_embd;
    __atomic_add_fetch(&n_done, 1, __ATOMIC_SEQ_CST);
}

int main(void)
{
    calls = (counter_fn)dlsym(RTLD_DEFAULT, "malloc_counter_calls");
    if (!calls)
        return fail("run with LD_PRELOAD=libmalloc_counter.so");
    pt_set_num_threads(1);
    pti_engine_opts eo = {.n_parallel = 2, .num_ctx = 256};
    pti_engine *e = pti_engine_load(PT_FIXTURES_DIR "/llm/tiny/llama-q4_k_m.gguf", &eo);
    if (!e)
        return fail(pt_last_error());
    /* prompts whose greedy continuations on the random tiny model run past 140 pieces without
     * an end-of-generation token on every kernel path (AVX-512 tiled, AVX2, scalar): the point
     * where one comes moves with the last bits of the logits */
    int32_t ids[2][9] = {{1, 30, 40, 50, 60, 70, 80, 90}, {1, 31, 41, 51, 61, 71, 81, 91, 101}};
    int32_t never = -5; /* a stop token that never comes: end-of-generation tokens still end */
    for (int k = 0; k < 2; k++) {
        pti_engine_request q = {.ids = ids[k], .n_ids = 8 + k, .gen = pt_gen_opts_default()};
        q.gen.temperature = 0.0f;
        q.gen.num_predict = 200;
        q.gen.stop_tokens = &never;
        q.gen.n_stop_tokens = 1;
        q.ev = (pti_engine_events){.on_text = on_text, .on_done = on_done, .user = (void *)(long)k};
        if (pti_engine_submit(e, &q) == 0)
            return fail(pt_last_error());
    }
    for (int waited = 0; __atomic_load_n(&n_done, __ATOMIC_SEQ_CST) < 2; waited++) {
        if (waited > 60000)
            return fail("the requests did not end within a minute");
        usleep(1000);
    }
    pti_engine_free(e);
    if (n_text[0] < 140 || n_text[1] < 140)
        return fail("the requests ended too early to measure (an end-of-generation token)");
    unsigned long made = at_140 - at_40;
    printf("engine_decode: %lu allocator calls in 100 steady-state steps of 2 slots\n", made);
    if (made != 0)
        return fail("the steady-state engine steps called the allocator");
    printf("1 passed, 0 failed\n");
    return 0;
}
