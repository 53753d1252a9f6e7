/* Fuzz target for the whole checkpoint reader (pt_load_buffer, src/io/pt_read.c): the zip or
 * legacy container, the pickle VM and the storages assembled into tensors. The first byte picks
 * the options (allow_objects, and the forced format), the rest is the file. Any input must give
 * a value tree whose tensors lie inside their storages, or a clean error that names the file:
 * never a crash, a sanitizer report, a leak or an allocation beyond what the input justifies.
 * Built as a libFuzzer target with -DPT_FUZZ=ON (clang), replayed with mutations by
 * smoke_corpus.c in every build. */
#include <prometorch/prometorch.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz.pt"

/* Inputs the reader accepted; the smoke test checks that its unmutated seeds all are. */
int fuzz_accepted;

static void check_tensor(const pt_tensor *t)
{
    /* every element must be readable: copying them out walks the whole geometry */
    int64_t n = pt_numel(t);
    size_t esize = n > 0 ? pt_dtype_size(pt_dtype_of(t)) : 0;
    if (n < 0 || (n > 0 && esize == 0))
        abort();
    if (n > 0 && (uint64_t)n * esize <= (1u << 24)) {
        void *buf = malloc((size_t)n * esize);
        if (buf && pt_copy_to_host(t, buf, (size_t)n * esize) != PT_OK)
            abort();
        free(buf);
    }
}

static void walk(const pt_value *v, int depth)
{
    if (depth > 1100)
        abort();
    switch (pt_value_kind_of(v)) {
    case PT_VALUE_TENSOR: check_tensor(pt_value_tensor_ref(v)); break;
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE:
    case PT_VALUE_DICT:
        for (int64_t i = 0; i < pt_value_len(v) && i < 4096; i++)
            walk(pt_value_item_ref(v, i), depth + 1);
        break;
    default: break;
    }
}

static void check_rejected(void)
{
    const char *msg = pt_last_error();
    pt_status st = pt_last_status();
    if (st == PT_OK || !msg || (st != PT_ERR_OOM && strncmp(msg, FUZZ_NAME, 7) != 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    pt_load_opts o = {0};
    o.allow_objects = data[0] & 1;
    static const pt_file_format forced[] = {PT_FORMAT_AUTO, PT_FORMAT_AUTO, PT_FORMAT_PT_ZIP,
                                            PT_FORMAT_PT_LEGACY, PT_FORMAT_PICKLE};
    o.format = forced[(data[0] >> 1) % 5];
    pt_value *v = pt_load_buffer(data + 1, size - 1, FUZZ_NAME, &o);
    if (v) {
        fuzz_accepted++;
        walk(v, 0);
        char *s = pt_value_to_string(v, 8);
        free(s);
        pt_value_free(v);
    } else {
        check_rejected();
    }
    pt_clear_error();
    return 0;
}
