/* Fuzz target for the restricted pickle VM (src/io/pickle_read.h): the first byte's low bit
 * turns allow_objects on, the rest is the pickle. Persistent ids of the torch form
 * ('storage', <storage class>, key, location, n) with n <= 64 load as small zero tensors, so
 * tensor rebuilds are reached. Any input must give a value of public kinds only or a clean
 * error naming the input: never a crash, a sanitizer report, a leak, a hang or a huge
 * allocation. Built as a libFuzzer target with -DPT_FUZZ=ON (clang), and replayed with
 * deterministic mutations by fuzz_pickle_smoke (smoke_pickle_main.c) in every build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/pickle_read.h"

/* Inputs the VM accepted; the smoke test checks that its unmutated seeds all are. */
int fuzz_accepted;

static const struct {
    const char *cls;
    pt_dtype dt;
} storage_types[] = {
    {"torch.FloatStorage", PT_FLOAT32}, {"torch.DoubleStorage", PT_FLOAT64},
    {"torch.HalfStorage", PT_FLOAT16},  {"torch.BFloat16Storage", PT_BFLOAT16},
    {"torch.LongStorage", PT_INT64},    {"torch.IntStorage", PT_INT32},
    {"torch.ShortStorage", PT_INT16},   {"torch.CharStorage", PT_INT8},
    {"torch.ByteStorage", PT_UINT8},    {"torch.BoolStorage", PT_BOOL},
    {"torch.UntypedStorage", PT_UINT8},
};

static pt_value *load_storage(void *ctx, const pt_value *pid)
{
    (void)ctx;
    if (!pt_value_is(pid, PT_VALUE_TUPLE) || pt_value_len(pid) < 5)
        return pti_error_null(PT_ERR_FORMAT, "fuzz.pkl: persistent id is not a storage tuple");
    const char *cls = pti_pickle_global_name(pt_value_item_ref(pid, 1));
    int64_t n = -1;
    if (!cls || pt_value_as_int(pt_value_item_ref(pid, 4), &n) != PT_OK || n < 0 || n > 64)
        return pti_error_null(PT_ERR_FORMAT, "fuzz.pkl: bad storage persistent id");
    for (size_t k = 0; k < sizeof storage_types / sizeof *storage_types; k++)
        if (!strcmp(cls, storage_types[k].cls)) {
            pt_tensor *t = pt_zeros(1, (int64_t[]){n}, storage_types[k].dt, pt_cpu());
            pt_value *v = pt_value_tensor(t);
            pt_release(t);
            return v;
        }
    return pti_error_null(PT_ERR_UNSUPPORTED, "fuzz.pkl: storage type %s", cls);
}

/* Every node of an accepted result is of a public kind (iterative: results may be deep). */
static void check_public(const pt_value *root)
{
    const pt_value **stack = malloc(sizeof *stack * 4096);
    size_t sp = 0, visited = 0;
    stack[sp++] = root;
    while (sp && visited < 200000) {
        const pt_value *v = stack[--sp];
        visited++;
        pt_value_kind k = pt_value_kind_of(v);
        if ((unsigned)k > PT_VALUE_DICT)
            abort();
        if (k == PT_VALUE_LIST || k == PT_VALUE_TUPLE || k == PT_VALUE_DICT)
            for (int64_t i = 0; i < pt_value_len(v) && sp + 2 < 4096; i++) {
                stack[sp++] = pt_value_item_ref(v, i);
                if (k == PT_VALUE_DICT)
                    stack[sp++] = pt_value_key_ref(v, i);
            }
    }
    free(stack);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    pti_unpickle_opts o = {
        .what = "fuzz.pkl", .persistent_load = load_storage, .allow_objects = data[0] & 1};
    size_t used = 0;
    pt_clear_error();
    pt_value *v = pti_unpickle(data + 1, size - 1, &o, &used);
    if (v) {
        if (used == 0 || used > size - 1)
            abort();
        check_public(v);
        char *s = pt_value_to_string(v, 16); /* depth <= 1000: renders */
        if (!s)
            abort();
        free(s);
        fuzz_accepted++;
        pt_value_free(v);
    } else if (pt_last_status() == PT_OK || strncmp(pt_last_error(), "fuzz.pkl", 8) != 0) {
        abort(); /* every refusal carries an error that names the input */
    }
    pt_clear_error();
    return 0;
}
