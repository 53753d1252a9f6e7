/* Tests of pt_save_safetensors (io.h): the exact bytes of a small file (header length, JSON
 * header as the safetensors format specifies it, 8-byte padding, tensor data in order), device
 * and non-contiguous tensors, metadata, and the error cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <prometorch/prometorch.h>
#include <prometorch/io.h>

#include "testutil.h"

static void temp_path(char *path)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* {"w": float32 [2, 3] (a transposed view), "n": int64 scalar, "m": uint8 [0]} */
static void test_exact_layout(void **state)
{
    (void)state;
    char path[] = "/tmp/pt_st_XXXXXX";
    temp_path(path);
    float wdata[6] = {1, 2, 3, 4, 5, 6}; /* [3, 2]; transposed -> [[1, 3, 5], [2, 4, 6]] */
    pt_tensor *w0 = pt_from_data(wdata, PT_SHAPE(3, 2), PT_FLOAT32, pt_cpu());
    pt_tensor *w = pt_transpose(w0, 0, 1);
    int64_t nval = 7;
    pt_tensor *n = pt_from_data(&nval, 0, NULL, PT_INT64, pt_cpu());
    pt_tensor *m = pt_empty(PT_SHAPE(0), PT_UINT8, pt_cpu());
    pt_value *sd = pt_value_dict();
    assert_int_equal(pt_value_dict_set_str(sd, "w", pt_value_tensor(w)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(sd, "n\"q", pt_value_tensor(n)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(sd, "m", pt_value_tensor(m)), PT_OK);
    pt_value *meta = pt_value_dict();
    assert_int_equal(pt_value_dict_set_str(meta, "format", pt_value_str("pt")), PT_OK);
    assert_int_equal(pt_save_safetensors(path, sd, meta), PT_OK);

    size_t len;
    char *buf = pt_test_read_file(path, &len);
    remove(path);
    const char *json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"n\\\"q\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]},"
                       "\"m\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[32,32]},"
                       "\"__metadata__\":{\"format\":\"pt\"}}";
    size_t jlen = strlen(json), hlen = (jlen + 7) / 8 * 8;
    assert_int_equal(le64((const unsigned char *)buf), hlen);
    assert_int_equal(len, 8 + hlen + 32);
    assert_memory_equal(buf + 8, json, jlen);
    for (size_t i = jlen; i < hlen; i++)
        assert_int_equal(buf[8 + i], ' ');
    float expect_w[6] = {1, 3, 5, 2, 4, 6};
    assert_memory_equal(buf + 8 + hlen, expect_w, 24);
    assert_memory_equal(buf + 8 + hlen + 24, &nval, 8);
    free(buf);
    pt_value_free(sd);
    pt_value_free(meta);
    pt_release(w0);
    pt_release(w);
    pt_release(n);
    pt_release(m);
}

/* A module's state dict: keys in PyTorch's order, every dtype name. */
static void test_dtypes(void **state)
{
    (void)state;
    char path[] = "/tmp/pt_st_XXXXXX";
    temp_path(path);
    const pt_dtype dts[] = {PT_FLOAT64, PT_FLOAT32, PT_FLOAT16, PT_BFLOAT16, PT_INT64,
                            PT_INT32,   PT_INT16,   PT_INT8,    PT_UINT8,    PT_BOOL};
    const char *names[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"};
    pt_value *sd = pt_value_dict();
    for (int i = 0; i < 10; i++) {
        pt_tensor *t = pt_ones(PT_SHAPE(2), dts[i], pt_cpu());
        char key[8];
        snprintf(key, sizeof(key), "t%d", i);
        assert_int_equal(pt_value_dict_set_str(sd, key, pt_value_tensor(t)), PT_OK);
        pt_release(t);
    }
    assert_int_equal(pt_save_safetensors(path, sd, NULL), PT_OK);
    size_t len;
    char *buf = pt_test_read_file(path, &len);
    remove(path);
    uint64_t off = 0;
    for (int i = 0; i < 10; i++) {
        char entry[128];
        uint64_t sz = 2 * pt_dtype_size(dts[i]);
        snprintf(entry, sizeof(entry),
                 "\"t%d\":{\"dtype\":\"%s\",\"shape\":[2],\"data_offsets\":[%llu,%llu]}", i,
                 names[i], (unsigned long long)off, (unsigned long long)(off + sz));
        assert_non_null(strstr(buf + 8, entry));
        off += sz;
    }
    assert_null(strstr(buf + 8, "__metadata__"));
    assert_int_equal(len, 8 + le64((const unsigned char *)buf) + off);
    free(buf);
    pt_value_free(sd);
}

static void test_errors(void **state)
{
    (void)state;
    char path[] = "/tmp/pt_st_XXXXXX";
    temp_path(path);
    pt_value *notdict = pt_value_list();
    assert_pt_status_error(pt_save_safetensors(path, notdict, NULL), PT_ERR_INVALID_ARG,
                           "not a dict");
    assert_pt_status_error(pt_save_safetensors(path, NULL, NULL), PT_ERR_INVALID_ARG, "not a dict");
    pt_value *sd = pt_value_dict();
    assert_int_equal(pt_value_dict_set_str(sd, "x", pt_value_int(3)), PT_OK);
    assert_pt_status_error(pt_save_safetensors(path, sd, NULL), PT_ERR_INVALID_ARG,
                           "value of 'x' is not a tensor");
    pt_value_free(sd);
    sd = pt_value_dict();
    pt_tensor *t = pt_zeros(PT_SHAPE(1), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_value_dict_set_int(sd, 3, pt_value_tensor(t)), PT_OK);
    assert_pt_status_error(pt_save_safetensors(path, sd, NULL), PT_ERR_INVALID_ARG,
                           "key 0 is not a str");
    pt_value_free(sd);
    sd = pt_value_dict();
    assert_int_equal(pt_value_dict_set_str(sd, "__metadata__", pt_value_tensor(t)), PT_OK);
    assert_pt_status_error(pt_save_safetensors(path, sd, NULL), PT_ERR_INVALID_ARG, "__metadata__");
    pt_value_free(sd);
    sd = pt_value_dict();
    assert_int_equal(pt_value_dict_set_str(sd, "a", pt_value_tensor(t)), PT_OK);
    assert_pt_status_error(pt_save_safetensors(path, sd, notdict), PT_ERR_INVALID_ARG,
                           "metadata is not a dict");
    pt_value *meta = pt_value_dict();
    assert_int_equal(pt_value_dict_set_str(meta, "k", pt_value_int(1)), PT_OK);
    assert_pt_status_error(pt_save_safetensors(path, sd, meta), PT_ERR_INVALID_ARG,
                           "metadata entry 0");
    assert_pt_status_error(pt_save_safetensors("/nonexistent-dir/m.safetensors", sd, NULL),
                           PT_ERR_IO, "/nonexistent-dir/m.safetensors");
    /* the error names the OS reason */
    assert_pt_status_error(pt_save_safetensors("/nonexistent-dir/m.safetensors", sd, NULL),
                           PT_ERR_IO, "m.safetensors': No such file or directory");
    assert_pt_status_error(pt_save_safetensors(NULL, sd, NULL), PT_ERR_INVALID_ARG, "path");
    /* a failed save leaves the existing file alone and no temporary behind */
    size_t len;
    char *before = pt_test_read_file(path, &len);
    assert_int_equal(len, 0);
    free(before);
    char tmp[64];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_int_not_equal(access(tmp, F_OK), 0);
    remove(path);
    pt_value_free(sd);
    pt_value_free(meta);
    pt_value_free(notdict);
    pt_release(t);
}

#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {T(test_exact_layout), T(test_dtypes), T(test_errors)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
