/* Fuzz target for the safetensors reader (pti_safetensors_load_map over a borrowed buffer):
 * any input must give a dict of tensors or a clean error naming the buffer -- never a crash, a
 * sanitizer report, a leak or an allocation the input's size does not justify. An accepted
 * input must agree with its bytes: the tensors tile the data section exactly and each holds the
 * bytes at its offset. Built as a libFuzzer target with -DPT_FUZZ=ON (clang), and as a corpus
 * replay/mutation smoke test (smoke_corpus.c) in every build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_map.h"
#include "io/safetensors_read.h"

#define FUZZ_NAME "fuzz.safetensors"

int fuzz_accepted;

static void check_accepted(const uint8_t *data, size_t size, const pt_value *d,
                           const pt_value *meta)
{
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | data[i];
    if (pt_value_kind_of(d) != PT_VALUE_DICT || pt_value_kind_of(meta) != PT_VALUE_DICT)
        abort();
    uint64_t covered = 0;
    for (int64_t i = 0; i < pt_value_len(d); i++) {
        pt_tensor *t = pt_value_tensor_ref(pt_value_item_ref(d, i));
        if (!t || pt_value_kind_of(pt_value_key_ref(d, i)) != PT_VALUE_STR)
            abort();
        size_t nbytes = (size_t)pt_numel(t) * pt_dtype_size(pt_dtype_of(t));
        /* offset order: tensor i starts where the previous one ended */
        if (nbytes && memcmp(pt_data_ptr(t), data + 8 + hlen + covered, nbytes) != 0)
            abort();
        covered += nbytes;
    }
    if (8 + hlen + covered != size)
        abort();
    for (int64_t i = 0; i < pt_value_len(meta); i++)
        if (pt_value_kind_of(pt_value_item_ref(meta, i)) != PT_VALUE_STR)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pti_file_map *m = pti_file_map_borrow(data, size, FUZZ_NAME);
    if (!m)
        return 0;
    pt_value *meta = NULL;
    pt_value *d = pti_safetensors_load_map(m, &meta, true);
    if (d) {
        check_accepted(data, size, d, meta);
        fuzz_accepted++;
    } else {
        const char *msg = pt_last_error();
        if (meta || pt_last_status() == PT_OK || !msg || !strstr(msg, FUZZ_NAME))
            abort();
    }
    pt_value_free(d);
    pt_value_free(meta);
    pti_file_map_release(m);
    pt_clear_error();
    return 0;
}
