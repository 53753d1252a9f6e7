/* Fuzz target for the GGUF reader (pt_gguf_open_buffer): any input must give a handle or a clean
 * error naming the buffer. An accepted input is walked completely -- every key, value, array
 * element and tensor info, and every tensor PromeTorch has a dtype for is materialized -- and
 * must agree with itself: tensor data inside the input, tensors equal to their bytes. Built as a
 * libFuzzer target with -DPT_FUZZ=ON (clang), and as a corpus replay/mutation smoke test
 * (smoke_corpus.c) in every build. */
#include <prometorch/prometorch.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz.gguf"

int fuzz_accepted;

static void walk_metadata(pt_gguf *g)
{
    for (int64_t i = 0; i < pt_gguf_kv_count(g); i++) {
        size_t len = 0;
        const char *key = pt_gguf_kv_key(g, i, &len);
        if (!key || key[len] != '\0')
            abort();
        pt_gguf_type t = pt_gguf_kv_type(g, i);
        int64_t iv;
        double dv;
        if (t == PT_GGUF_STRING) {
            const char *s = pt_gguf_get_str(g, i, &len);
            if (!s || s[len] != '\0')
                abort();
        } else if (t == PT_GGUF_ARRAY) {
            pt_gguf_type et = pt_gguf_arr_type(g, i);
            int64_t n = pt_gguf_arr_count(g, i);
            if (n < 0 || et == PT_GGUF_ARRAY || et >= PT_GGUF_TYPE_COUNT)
                abort();
            for (int64_t j = 0; j < n; j++) {
                if (et == PT_GGUF_STRING) {
                    const char *s = pt_gguf_arr_str(g, i, j, &len);
                    if (!s || s[len] != '\0')
                        abort();
                } else if (pt_gguf_arr_float(g, i, j, &dv) != PT_OK && et != PT_GGUF_BOOL) {
                    abort();
                }
            }
        } else if (pt_gguf_get_float(g, i, &dv) != PT_OK && t != PT_GGUF_BOOL) {
            abort();
        } else {
            pt_gguf_get_int(g, i, &iv);
        }
        pt_clear_error();
    }
}

static void walk_tensors(pt_gguf *g, const uint8_t *data, size_t size)
{
    for (int64_t t = 0; t < pt_gguf_tensor_count(g); t++) {
        const uint8_t *p = pt_gguf_tensor_data(g, t);
        uint64_t nbytes = pt_gguf_tensor_nbytes(g, t);
        int ndim = pt_gguf_tensor_ndim(g, t);
        if (!p || p < data || nbytes > size || (size_t)(p - data) > size - nbytes || ndim < 1 ||
            ndim > 4 || !pt_gguf_tensor_name(g, t, NULL))
            abort();
        size_t len = 0;
        const char *name = pt_gguf_tensor_name(g, t, &len);
        /* names are unique, so a lookup finds this one (unless it holds a NUL byte) */
        if (strlen(name) == len && pt_gguf_find_tensor(g, name) != t)
            abort();
        pt_dtype dt = pt_gguf_tensor_dtype(g, t);
        pt_tensor *x = pt_gguf_tensor(g, t);
        if (dt == PT_DTYPE_COUNT) {
            if (x)
                abort();
            pt_clear_error();
            continue;
        }
        if (!x || pt_dtype_of(x) != dt || memcmp(pt_data_ptr(x), p, nbytes) != 0)
            abort();
        pt_release(x);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_gguf *g = pt_gguf_open_buffer(data, size, FUZZ_NAME);
    if (g) {
        walk_metadata(g);
        walk_tensors(g, data, size);
        fuzz_accepted++;
        pt_gguf_close(g);
    } else {
        const char *msg = pt_last_error();
        if (pt_last_status() == PT_OK || !msg || !strstr(msg, FUZZ_NAME))
            abort();
    }
    pt_clear_error();
    return 0;
}
