/* Tests of the LLM engine's op list (src/serve/llm_forward.c, pti_llm_required_ops): every
 * architecture generates the same tokens on a CPU backend that has kernels for the listed ops
 * only (so the forward pass dispatches nothing else), and pt_llm_load on a device whose
 * backend lacks one of them refuses with an error naming it. The "devices" are copies of the
 * CPU backend, registered in its place for the test (as tests/internal/optim_paths.h does). */
#include <string.h>

#include "serve/llm/llm_model.h"
#include "testutil.h"

#define TINY PT_FIXTURES_DIR "/llm/tiny/"

static const char *const models[] = {
    TINY "llama-q8_0.gguf",    TINY "qwen2-q4_k_m.gguf", TINY "qwen3-q6_k.gguf",
    TINY "gemma3-q4_k_m.gguf", TINY "phi3-q8_0.gguf",
};

static const pt_backend *cpu;
static pt_backend reduced;

/* Registers a copy of the CPU backend with only the required ops' slots filled, or (when
 * only_required is false) with every slot but `drop`'s. */
static void use_reduced(bool only_required, pti_op drop)
{
    cpu = pti_backend_for(pt_cpu());
    reduced = *cpu;
    if (only_required) {
        memset(reduced.kernels, 0, sizeof reduced.kernels);
        int n = 0;
        const pti_op *ops = pti_llm_required_ops(&n);
        for (int i = 0; i < n; i++)
            reduced.kernels[ops[i]] = cpu->kernels[ops[i]];
    } else {
        reduced.kernels[drop] = NULL;
    }
    pti_backend_register(&reduced);
}

static void restore(void)
{
    if (cpu)
        pti_backend_register(cpu);
}

/* A failed assertion leaves its test early: the real CPU backend goes back here too. */
static int teardown(void **state)
{
    restore();
    return pt_test_teardown(state);
}

typedef struct toks {
    int32_t ids[16];
    int n;
} toks;

static bool collect(int32_t token, const char *text, size_t len, void *user)
{
    (void)text, (void)len;
    toks *t = user;
    if (t->n < 16)
        t->ids[t->n++] = token;
    return true;
}

/* The greedy continuation of a fixed prompt (loaded and run on the current CPU backend). */
static toks generate(const char *file)
{
    toks t = {.n = 0};
    pt_llm_opts lo = {.num_ctx = 64};
    pt_llm *llm = pt_llm_load(file, &lo);
    if (!llm)
        fail_msg("pt_llm_load(%s): %s", file, pt_last_error());
    pt_gen_opts o = pt_gen_opts_default();
    o.temperature = 0;
    o.num_predict = 8;
    int32_t prompt[5] = {1, 17, 42, 99, 7};
    pt_status st = pt_llm_generate_tokens(llm, prompt, 5, &o, collect, &t);
    if (st != PT_OK)
        fail_msg("%s: %s", file, pt_last_error());
    pt_llm_free(llm);
    return t;
}

static void test_listed_ops_suffice(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        toks full = generate(models[i]);
        use_reduced(true, PTI_OP_COUNT);
        toks only = generate(models[i]);
        restore();
        print_message("  %s: %d tokens\n", models[i], only.n);
        assert_true(full.n > 0);
        assert_int_equal(only.n, full.n);
        assert_memory_equal(only.ids, full.ids, (size_t)full.n * sizeof full.ids[0]);
    }
}

static void test_cpu_has_every_listed_op(void **state)
{
    (void)state;
    char buf[256];
    assert_int_equal(pti_llm_missing_ops(pt_cpu(), buf, sizeof buf), 0);
    assert_string_equal(buf, "");
}

/* Each listed op cleared in turn: the check counts it and pt_llm_load names it. */
static void test_load_names_a_missing_op(void **state)
{
    (void)state;
    int n = 0;
    const pti_op *ops = pti_llm_required_ops(&n);
    assert_true(n > 0);
    for (int i = 0; i < n; i++) {
        use_reduced(false, ops[i]);
        char buf[256];
        int missing = pti_llm_missing_ops(pt_cpu(), buf, sizeof buf);
        pt_llm *llm = pt_llm_load(models[0], NULL);
        pt_status st = pt_last_status();
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", pt_last_error());
        restore();
        pt_llm_free(llm);
        assert_int_equal(missing, 1);
        assert_string_equal(buf, pti_op_names[ops[i]]);
        assert_null(llm);
        assert_int_equal(st, PT_ERR_UNSUPPORTED);
        assert_non_null(strstr(msg, "has no kernel for 1 of the"));
        assert_non_null(strstr(msg, pti_op_names[ops[i]]));
    }
}

/* The names of several missing ops are listed, and a short buffer is cut with "...". */
static void test_missing_list_and_truncation(void **state)
{
    (void)state;
    use_reduced(false, PTI_OP_rope);
    reduced.kernels[PTI_OP_attention_kv] = NULL;
    char buf[64], tiny[8];
    int n = pti_llm_missing_ops(pt_cpu(), buf, sizeof buf);
    int m = pti_llm_missing_ops(pt_cpu(), tiny, sizeof tiny);
    restore();
    assert_int_equal(n, 2);
    assert_string_equal(buf, "rope, attention_kv");
    assert_int_equal(m, 2);
    assert_string_equal(tiny, "rope...");
    assert_int_equal(pti_llm_missing_ops((pt_device){PT_DEVICE_NMCARD, 0}, buf, sizeof buf), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_listed_ops_suffice, pt_test_setup, teardown),
        cmocka_unit_test_setup_teardown(test_cpu_has_every_listed_op, pt_test_setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_names_a_missing_op, pt_test_setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_list_and_truncation, pt_test_setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
