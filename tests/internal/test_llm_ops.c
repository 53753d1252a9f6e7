/* Tests of the LLM engine's op list (src/serve/llm/llm_forward.c, pti_llm_required_ops):
 * every architecture generates the same tokens on a CPU backend that has kernels for the
 * listed ops only (so the forward pass dispatches nothing else) and on a device of another
 * backend ("hostsim", registered through pt_backend_register: its own memory, kernels that
 * count their calls and compute with the CPU's), where the weights, the cache and every kernel
 * call must be that device's; and pt_llm_load on a device whose backend lacks one of the ops
 * refuses with an error naming it. The reduced "devices" are copies of the CPU backend,
 * registered in its place for the test (as tests/internal/optim_paths.h does). */
#include <stdlib.h>
#include <string.h>

#include <prometorch/backend.h>

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
        const pti_llm_op_need *need = pti_llm_required_ops(&n);
        for (int i = 0; i < n; i++)
            reduced.kernels[need[i].op] = cpu->kernels[need[i].op];
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

/* The greedy continuation of a fixed prompt (loaded and run on device dev). */
static toks generate_on(const char *file, pt_device dev)
{
    toks t = {.n = 0};
    pt_llm_opts lo = {.num_ctx = 64, .device = dev};
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

static toks generate(const char *file)
{
    return generate_on(file, pt_cpu());
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

/* Each listed op's slot cleared in turn: the check counts its (op, dtype) pairs and
 * pt_llm_load names them. */
static void test_load_names_a_missing_op(void **state)
{
    (void)state;
    int n = 0;
    const pti_llm_op_need *need = pti_llm_required_ops(&n);
    assert_true(n > 0);
    for (int i = 0; i < n; i++) {
        int pairs = 0;
        for (int j = 0; j < n; j++)
            pairs += need[j].op == need[i].op;
        use_reduced(false, need[i].op);
        char buf[256];
        int missing = pti_llm_missing_ops(pt_cpu(), buf, sizeof buf);
        pt_llm *llm = pt_llm_load(models[0], NULL);
        pt_status st = pt_last_status();
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", pt_last_error());
        restore();
        pt_llm_free(llm);
        assert_int_equal(missing, pairs);
        const char *name = pti_op_names[need[i].op];
        assert_int_equal(strncmp(buf, name, strlen(name)), 0);
        if (pairs == 1 && need[i].dtype == PT_FLOAT32)
            assert_string_equal(buf, name);
        if (need[i].dtype != PT_FLOAT32) { /* named with its dtype */
            char with_dtype[64];
            snprintf(with_dtype, sizeof with_dtype, "%s (%s)", name, pt_dtype_name(need[i].dtype));
            assert_non_null(strstr(buf, with_dtype));
        }
        assert_null(llm);
        assert_int_equal(st, PT_ERR_UNSUPPORTED);
        char count[64];
        snprintf(count, sizeof count, "has no kernel for %d of the %d", pairs, n);
        assert_non_null(strstr(msg, count));
        assert_non_null(strstr(msg, name));
    }
}

/* ---- hostsim: the engine on a device of another backend ----------------------------------- */

static long sim_calls[PTI_OP_COUNT], sim_cpu_calls;
static size_t sim_live_bytes, sim_peak_bytes;
static pt_device_type sim_type = PT_DEVICE_TYPE_COUNT;

/* Host memory of its own (64-byte aligned, as the CPU kernels' vector loads like it). */
static void *sim_alloc(void *ctx, size_t nbytes)
{
    (void)ctx;
    void *p = aligned_alloc(64, (nbytes + 63) / 64 * 64 + 64);
    if (p) {
        sim_live_bytes += nbytes;
        if (sim_live_bytes > sim_peak_bytes)
            sim_peak_bytes = sim_live_bytes;
    }
    return p;
}
static void sim_free(void *ctx, void *p, size_t nbytes)
{
    (void)ctx;
    sim_live_bytes -= nbytes;
    free(p);
}
static pt_status sim_copy(void *ctx, void *dst, const void *src, size_t n)
{
    (void)ctx;
    memcpy(dst, src, n);
    return PT_OK;
}

/* Every kernel: counted, then computed by the CPU's kernel for the op. */
static pt_status sim_kernel(const pt_kernel_call *c)
{
    int op = pt_call_op(c);
    if (pt_call_device(c).type != sim_type)
        return pt_backend_error(PT_ERR_DEVICE, "hostsim: %s called for another device",
                                pt_op_name(op));
    sim_calls[op]++;
    return cpu->kernels[op](c);
}
static bool sim_supports(int op, pt_dtype dt, const pt_kernel_call *c)
{
    return !cpu->supports || cpu->supports(op, dt, c);
}

/* The CPU backend again, its kernels counting calls (none may reach it on hostsim). */
static pt_status cpu_counted(const pti_call *c)
{
    sim_cpu_calls++;
    return cpu->kernels[c->op](c);
}

static void register_hostsim(void)
{
    cpu = pti_backend_for(pt_cpu());
    if (sim_type != PT_DEVICE_TYPE_COUNT)
        return;
    int n = 0;
    const pti_llm_op_need *need = pti_llm_required_ops(&n);
    static pt_backend_kernel kernels[64];
    int nk = 0;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen |= need[j].op == need[i].op;
        if (!seen)
            kernels[nk++] = (pt_backend_kernel){pti_op_names[need[i].op], sim_kernel,
                                                cpu->kernel_dtypes[need[i].op]};
    }
    pt_backend_desc d = {
        .abi_version = PT_BACKEND_ABI_VERSION,
        .name = "hostsim",
        .alloc = sim_alloc,
        .free = sim_free,
        .copy_h2d = sim_copy,
        .copy_d2h = sim_copy,
        .copy_d2d = sim_copy,
        .supports = sim_supports,
        .kernels = kernels,
        .n_kernels = nk,
    };
    sim_type = pt_backend_register(&d);
    assert_int_not_equal(sim_type, PT_DEVICE_TYPE_COUNT);
}

static void use_counted_cpu(void)
{
    reduced = *cpu;
    for (int op = 0; op < PTI_OP_COUNT; op++)
        if (cpu->kernels[op])
            reduced.kernels[op] = cpu_counted;
    pti_backend_register(&reduced);
}

static void test_runs_on_another_backend(void **state)
{
    (void)state;
    register_hostsim();
    pt_device sim = pt_device_parse("hostsim");
    assert_int_equal(sim.type, sim_type);
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        toks ref = generate(models[i]);
        memset(sim_calls, 0, sizeof sim_calls);
        sim_cpu_calls = 0;
        sim_peak_bytes = 0;
        use_counted_cpu();
        toks got = generate_on(models[i], sim);
        restore();
        print_message("  %s on hostsim: %d tokens, peak %zu bytes, %ld quant_linear calls\n",
                      models[i], got.n, sim_peak_bytes, sim_calls[PTI_OP_quant_linear]);
        assert_true(ref.n > 0);
        assert_int_equal(got.n, ref.n);
        assert_memory_equal(got.ids, ref.ids, (size_t)ref.n * sizeof ref.ids[0]);
        /* every kernel ran on hostsim, none on the CPU, and hostsim's memory is all back */
        assert_int_equal(sim_cpu_calls, 0);
        assert_true(sim_calls[PTI_OP_quant_linear] > 0);
        assert_true(sim_calls[PTI_OP_attention_kv] > 0);
        assert_true(sim_calls[PTI_OP_rope] > 0);
        assert_true(sim_calls[PTI_OP_rms_norm] > 0);
        assert_int_equal(sim_live_bytes, 0);
    }
}

/* The weights live on the device: a loaded model holds at least the file's tensor bytes in
 * hostsim memory, and its info says so. */
static void test_weights_and_cache_on_device(void **state)
{
    (void)state;
    register_hostsim();
    pt_gguf *g = pt_gguf_open(models[0]);
    assert_non_null(g);
    size_t weight_bytes = 0;
    for (int64_t i = 0; i < pt_gguf_tensor_count(g); i++)
        weight_bytes += pt_gguf_tensor_nbytes(g, i);
    pt_gguf_close(g);
    pt_llm_opts lo = {.num_ctx = 64, .device = pt_device_parse("hostsim")};
    pt_llm *llm = pt_llm_load(models[0], &lo);
    assert_non_null(llm);
    size_t held = sim_live_bytes;
    pt_llm_free(llm);
    print_message("  weights %zu bytes, on hostsim %zu bytes\n", weight_bytes, held);
    assert_true(held >= weight_bytes);
    assert_int_equal(sim_live_bytes, 0);
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
        cmocka_unit_test_setup_teardown(test_runs_on_another_backend, pt_test_setup, teardown),
        cmocka_unit_test_setup_teardown(test_weights_and_cache_on_device, pt_test_setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
