/* Tests of pt_load_safetensors (io.h) against files written by the real safetensors package
 * (tests/fixtures/gen_safetensors.py): exact values, dtypes, shapes, order and metadata as
 * safetensors.torch.load_file returns them; copy-on-write mapping; a round trip through
 * pt_save_safetensors; and malformed files, each refused with a message naming the file and
 * the problem. */
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

#include "testutil.h"

#define ST_DIR PT_FIXTURES_DIR "/safetensors/"

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void temp_path(char *path)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

static pt_dtype dtype_by_name(const char *s)
{
    for (int d = 0; d < PT_DTYPE_COUNT; d++)
        if (strcmp(pt_dtype_name((pt_dtype)d), s) == 0)
            return (pt_dtype)d;
    fail_msg("unknown dtype %s in the manifest", s);
    return PT_FLOAT32;
}

/* Checks one file against its manifest block: tensors in order, dtype, shape, values. */
static void check_file(const pt_fixture *fx, const char *stem, char **lines, int nlines)
{
    char path[512];
    snprintf(path, sizeof path, ST_DIR "%s.safetensors", stem);
    pt_value *meta = NULL;
    pt_value *d = pt_load_safetensors(path, &meta);
    assert_non_null(d);
    assert_non_null(meta);
    int64_t ti = 0, nmeta = 0;
    for (int l = 0; l < nlines; l++) {
        char *fields[24];
        int nf = 0;
        char *save = NULL, *line = strdup(lines[l]);
        for (char *tok = strtok_r(line, "\t", &save); tok && nf < 24;
             tok = strtok_r(NULL, "\t", &save))
            fields[nf++] = tok;
        if (strcmp(fields[0], "tensor") == 0) {
            const char *name = pt_value_as_str(pt_value_key_ref(d, ti), NULL);
            assert_non_null(name);
            assert_string_equal(name, fields[1]); /* load_file's order */
            pt_tensor *t = pt_value_tensor_ref(pt_value_item_ref(d, ti));
            assert_non_null(t);
            assert_int_equal(pt_dtype_of(t), dtype_by_name(fields[2]));
            int ndim = atoi(fields[3]);
            assert_int_equal(pt_ndim(t), ndim);
            for (int k = 0; k < ndim; k++)
                assert_int_equal(pt_shape(t)[k], atoll(fields[4 + k]));
            char fxname[512];
            snprintf(fxname, sizeof fxname, "%s/%s", stem, fields[1]);
            pt_tensor *e = fx_get(fx, fxname);
            assert_tensor_equal(t, e);
            pt_release(e);
            ti++;
        } else if (strcmp(fields[0], "meta") == 0) {
            pt_value *v = pt_value_get_str_ref(meta, fields[1]);
            assert_non_null(v);
            assert_string_equal(pt_value_as_str(v, NULL), nf > 2 ? fields[2] : "");
            nmeta++;
        }
        free(line);
    }
    assert_int_equal(pt_value_len(d), ti);
    assert_int_equal(pt_value_len(meta), nmeta);
    pt_value_free(d);
    pt_value_free(meta);
}

/* Every file of manifest.txt (written by the generator from load_file's results). */
static void test_reference_files(void **state)
{
    (void)state;
    size_t len;
    char *text = pt_test_read_file(ST_DIR "manifest.txt", &len);
    char *lines[256];
    int n = 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l && n < 256; l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    pt_fixture *fx = fx_open("safetensors");
    int files = 0;
    for (int i = 0; i < n;) {
        assert_true(strncmp(lines[i], "file\t", 5) == 0);
        char stem[256];
        snprintf(stem, sizeof stem, "%s", lines[i] + 5);
        *strstr(stem, ".safetensors") = '\0';
        int j = i + 1;
        while (j < n && strncmp(lines[j], "file\t", 5) != 0)
            j++;
        check_file(fx, stem, lines + i + 1, j - i - 1);
        files++;
        i = j;
    }
    assert_int_equal(files, 4);
    fx_close(fx);
    free(text);
}

/* Tensors are copy-on-write views of the mapping: writing to one does not reach the file. */
static void test_copy_on_write(void **state)
{
    (void)state;
    size_t len0, len1;
    char *before = pt_test_read_file(ST_DIR "model.safetensors", &len0);
    pt_value *d = pt_load_safetensors(ST_DIR "model.safetensors", NULL);
    assert_non_null(d);
    pt_tensor *w = pt_value_tensor_ref(pt_value_get_str_ref(d, "4.weight"));
    assert_non_null(w);
    float *p = pt_data_ptr(w);
    /* a view of the file's bytes: the data sits inside the file at its offset */
    assert_int_equal(((uintptr_t)p) % 4, 0);
    p[0] = 12345.0f;
    assert_true(pt_test_get(w, 0) == 12345.0);
    pt_value_free(d);
    char *after = pt_test_read_file(ST_DIR "model.safetensors", &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);
}

/* Loaded tensors saved with pt_save_safetensors and loaded again are identical. */
static void test_round_trip(void **state)
{
    (void)state;
    const char *stems[] = {"dtypes", "model", "unaligned", "empty"};
    for (int i = 0; i < 4; i++) {
        char src[512], tmp[] = "/tmp/pt_st_rt_XXXXXX";
        snprintf(src, sizeof src, ST_DIR "%s.safetensors", stems[i]);
        temp_path(tmp);
        pt_value *meta = NULL, *meta2 = NULL;
        pt_value *a = pt_load_safetensors(src, &meta);
        assert_non_null(a);
        assert_int_equal(pt_save_safetensors(tmp, a, meta), PT_OK);
        pt_value *b = pt_load_safetensors(tmp, &meta2);
        assert_non_null(b);
        assert_int_equal(pt_value_len(a), pt_value_len(b));
        for (int64_t k = 0; k < pt_value_len(a); k++) {
            assert_string_equal(pt_value_as_str(pt_value_key_ref(a, k), NULL),
                                pt_value_as_str(pt_value_key_ref(b, k), NULL));
            assert_tensor_equal(pt_value_tensor_ref(pt_value_item_ref(b, k)),
                                pt_value_tensor_ref(pt_value_item_ref(a, k)));
        }
        assert_true(pt_value_equal(meta, meta2));
        pt_value_free(a);
        pt_value_free(b);
        pt_value_free(meta);
        pt_value_free(meta2);
        unlink(tmp);
    }
}

/* ---- malformed files ------------------------------------------------------------------------ */

/* Loads `len` bytes written to a temporary file; the call must fail with `status` and a message
 * naming the file and containing `what`. */
static void expect_bad(const void *bytes, size_t len, pt_status status, const char *what)
{
    char path[] = "/tmp/pt_st_bad_XXXXXX";
    temp_path(path);
    write_file(path, bytes, len);
    pt_value *meta = (pt_value *)&meta; /* must be reset to NULL */
    pt_value *v = pt_load_safetensors(path, &meta);
    if (v)
        fail_msg("a malformed file (%s) was accepted", what);
    assert_null(meta);
    const char *msg = pt_last_error();
    if (pt_last_status() != status || !strstr(msg, path) || !strstr(msg, what))
        fail_msg("expected status %d with '%s' and the path, got %d: %s", (int)status, what,
                 (int)pt_last_status(), msg);
    pt_clear_error();
    unlink(path);
}

/* A file from a header text and `ndata` data bytes (0x11 each). */
static void expect_bad_header(const char *json, size_t ndata, pt_status status, const char *what)
{
    size_t hl = strlen(json), len = 8 + hl + ndata;
    unsigned char *buf = malloc(len);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, json, hl);
    memset(buf + 8 + hl, 0x11, ndata);
    expect_bad(buf, len, status, what);
    free(buf);
}

static void test_truncated_everywhere(void **state)
{
    (void)state;
    size_t len;
    char *file = pt_test_read_file(ST_DIR "dtypes.safetensors", &len);
    for (size_t cut = 0; cut < len; cut++) {
        char path[] = "/tmp/pt_st_cut_XXXXXX";
        temp_path(path);
        write_file(path, file, cut);
        pt_value *v = pt_load_safetensors(path, NULL);
        if (v)
            fail_msg("the file truncated to %zu of %zu bytes was accepted", cut, len);
        assert_int_equal(pt_last_status(), PT_ERR_FORMAT);
        assert_non_null(strstr(pt_last_error(), path));
        assert_non_null(strstr(pt_last_error(), "safetensors: "));
        pt_clear_error();
        unlink(path);
    }
    /* extra bytes after the data are not covered by any tensor */
    char *longer = malloc(len + 1);
    memcpy(longer, file, len);
    longer[len] = 0;
    expect_bad(longer, len + 1, PT_ERR_FORMAT, "cover only");
    free(longer);
    free(file);
}

static void test_header_length(void **state)
{
    (void)state;
    unsigned char buf[16] = {0};
    expect_bad(buf, 5, PT_ERR_FORMAT, "too short for the 8-byte header length");
    memset(buf, 0xFF, 8); /* 2^64 - 1 */
    expect_bad(buf, 16, PT_ERR_FORMAT, "exceeds the 100000000-byte limit");
    uint64_t n = 100000001;
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(n >> (8 * i));
    expect_bad(buf, 16, PT_ERR_FORMAT, "header length 100000001 exceeds");
    memset(buf, 0, 8);
    buf[0] = 9; /* 9 header bytes, 8 present */
    memcpy(buf + 8, "{}      ", 8);
    expect_bad(buf, 16, PT_ERR_FORMAT, "header length 9 runs past the end of the file");
}

/* A header of millions of tiny JSON values is refused before cJSON builds a tree for it. */
static void test_too_many_values(void **state)
{
    (void)state;
    size_t n = (1u << 22) + 10, hl = 2 * n + 8;
    char *json = malloc(hl + 1);
    memcpy(json, "{\"a\": [", 7);
    size_t k = 7;
    for (size_t i = 0; i < n; i++) {
        json[k++] = '0';
        json[k++] = ',';
    }
    memcpy(json + k - 1, "]}", 3);
    expect_bad_header(json, 0, PT_ERR_FORMAT, "JSON values, more than the 4194304 allowed");
    free(json);
}

static void test_bad_json(void **state)
{
    (void)state;
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], ", 1, PT_ERR_FORMAT,
                      "not valid JSON");
    expect_bad_header("[1, 2]", 0, PT_ERR_FORMAT, "not a JSON object");
    expect_bad_header("{} x", 0, PT_ERR_FORMAT, "unexpected bytes after the JSON header");
    static const unsigned char nul_padded[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    expect_bad(nul_padded, 16, PT_ERR_FORMAT, "unexpected bytes after the JSON header (at byte 2");
    expect_bad_header("{\"\xC3\x28\": 1}", 0, PT_ERR_FORMAT, "not valid UTF-8 (byte 2)");
    expect_bad_header("{\"a\": 3}", 0, PT_ERR_FORMAT, "entry 'a' is not an object");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]},"
                      " \"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [1, 2]}}",
                      2, PT_ERR_FORMAT, "repeats the key 'a'");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1], "
                      "\"extra\": 1}}",
                      1, PT_ERR_FORMAT, "tensor 'a' has an unknown field 'extra'");
    expect_bad_header("{\"a\": {\"shape\": [1], \"data_offsets\": [0, 1]}}", 1, PT_ERR_FORMAT,
                      "tensor 'a' lacks \"dtype\"");
    expect_bad_header("{\"a\": {\"dtype\": 1, \"shape\": [1], \"data_offsets\": [0, 1]}}", 1,
                      PT_ERR_FORMAT, "\"dtype\" is not a string");
}

static void test_bad_offsets(void **state)
{
    (void)state;
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [0, 2]}, "
                      "\"b\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [1, 3]}}",
                      3, PT_ERR_FORMAT, "tensor 'b' (data_offsets [1, 3]) overlaps 'a'");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}, "
                      "\"b\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [2, 3]}}",
                      3, PT_ERR_FORMAT, "bytes [1, 2) of the data section belong to no tensor");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 7,
                      PT_ERR_FORMAT,
                      "data_offsets [0, 8] run past the end of the data "
                      "section (7 bytes)");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8,
                      PT_ERR_FORMAT, "shape [3] of F32 needs 3 x 4 bytes");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [2, 1]}}", 2,
                      PT_ERR_FORMAT, "end before they begin");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0]}}", 1,
                      PT_ERR_FORMAT, "not a list of two non-negative integers");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [-1, 0]}}", 1,
                      PT_ERR_FORMAT, "not a list of two non-negative integers");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], "
                      "\"data_offsets\": [0, 1e300]}}",
                      1, PT_ERR_FORMAT, "not a list of two non-negative integers");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 3,
                      PT_ERR_FORMAT, "the data section has 3 bytes but the tensors cover only 1");
}

static void test_bad_shapes_and_dtypes(void **state)
{
    (void)state;
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [-1], \"data_offsets\": [0, 0]}}", 0,
                      PT_ERR_FORMAT, "shape entry 0 is not a non-negative integer");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1.5], \"data_offsets\": [0, 1]}}", 1,
                      PT_ERR_FORMAT, "shape entry 0 is not a non-negative integer");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": 4, \"data_offsets\": [0, 4]}}", 4,
                      PT_ERR_FORMAT, "\"shape\" is not a list");
    /* empty, but the other dims multiply past 2^62 */
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [0, 4294967296, 4294967296], "
                      "\"data_offsets\": [0, 0]}}",
                      0, PT_ERR_FORMAT, "shape has too many elements");
    /* the element count times the size overflows 64 bits */
    expect_bad_header("{\"a\": {\"dtype\": \"F64\", \"shape\": [2147483648, 2147483648], "
                      "\"data_offsets\": [0, 8]}}",
                      8, PT_ERR_FORMAT, "needs");
    expect_bad_header("{\"a\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
                      " \"data_offsets\": [0, 1]}}",
                      1, PT_ERR_UNSUPPORTED, "17 dimensions");
    const char *unsupported[] = {"F8_E4M3", "F8_E5M2", "U16", "U32", "U64", "C64"};
    for (int i = 0; i < 6; i++) {
        char json[256];
        snprintf(json, sizeof json,
                 "{\"a\": {\"dtype\": \"%s\", \"shape\": [1], \"data_offsets\": [0, 1]}}",
                 unsupported[i]);
        expect_bad_header(json, 1, PT_ERR_DTYPE, unsupported[i]);
    }
    expect_bad_header("{\"a\": {\"dtype\": \"Q4\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1,
                      PT_ERR_FORMAT, "unknown dtype 'Q4'");
}

static void test_bad_metadata(void **state)
{
    (void)state;
    expect_bad_header("{\"__metadata__\": {\"k\": 1}}", 0, PT_ERR_FORMAT,
                      "\"__metadata__\" value of 'k' is not a string");
    expect_bad_header("{\"__metadata__\": {\"k\": null}}", 0, PT_ERR_FORMAT,
                      "\"__metadata__\" value of 'k' is not a string");
    expect_bad_header("{\"__metadata__\": [\"k\"]}", 0, PT_ERR_FORMAT,
                      "\"__metadata__\" is not an object");
    expect_bad_header("{\"__metadata__\": {\"k\": \"a\", \"k\": \"b\"}}", 0, PT_ERR_FORMAT,
                      "\"__metadata__\" repeats the key 'k'");
}

/* What the reference reader accepts, we accept: whitespace around the JSON, null metadata,
 * an empty file with no tensors, zero-size tensors. */
static void test_accepted_edge_cases(void **state)
{
    (void)state;
    const char *json = " {\"__metadata__\": null, \"e\": {\"dtype\": \"I32\", \"shape\": [0], "
                       "\"data_offsets\": [0, 0]}, \"x\": {\"dtype\": \"U8\", \"shape\": [], "
                       "\"data_offsets\": [0, 1]}}\n  ";
    size_t hl = strlen(json);
    unsigned char buf[512];
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, json, hl);
    buf[8 + hl] = 0xAB;
    char path[] = "/tmp/pt_st_ok_XXXXXX";
    temp_path(path);
    write_file(path, buf, 8 + hl + 1);
    pt_value *meta = NULL;
    pt_value *d = pt_load_safetensors(path, &meta);
    assert_non_null(d);
    assert_int_equal(pt_value_len(meta), 0);
    assert_int_equal(pt_value_len(d), 2);
    assert_string_equal(pt_value_as_str(pt_value_key_ref(d, 0), NULL), "e");
    pt_tensor *x = pt_value_tensor_ref(pt_value_get_str_ref(d, "x"));
    assert_int_equal(pt_ndim(x), 0);
    assert_true(pt_test_get(x, 0) == 0xAB);
    pt_value_free(d);
    pt_value_free(meta);
    unlink(path);
}

static void test_missing_file(void **state)
{
    (void)state;
    assert_pt_error(pt_load_safetensors("/nonexistent/x.safetensors", NULL), PT_ERR_IO,
                    "/nonexistent/x.safetensors");
    assert_pt_error(pt_load_safetensors(NULL, NULL), PT_ERR_NULL, "path is NULL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reference_files, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_copy_on_write, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_truncated_everywhere, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_header_length, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bad_json, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_too_many_values, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bad_offsets, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bad_shapes_and_dtypes, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bad_metadata, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_accepted_edge_cases, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_missing_file, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
