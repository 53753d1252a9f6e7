/* Tests of the GGUF reader (gguf.h) against files written by the real gguf-py writer
 * (tests/fixtures/gen_gguf.py), whose manifest says what gguf.GGUFReader reads from them:
 * every metadata value through the typed and the converting getters, tensor infos, bytes and
 * tensors (from a file and from a buffer), and malformed files built here byte by byte, each
 * refused with "<name>: gguf: <what>". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <prometorch/prometorch.h>

#include "testutil.h"

#define GGUF_DIR PT_FIXTURES_DIR "/gguf/"

/* Decodes the manifest's hex strings. */
static size_t unhex(const char *hex, char *out)
{
    size_t n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (char)v;
    }
    out[n] = '\0';
    return n;
}

static int split_tabs(char *line, char **fields, int max)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        fields[n++] = p;
        char *t = strchr(p, '\t');
        if (!t)
            break;
        *t = '\0';
        p = t + 1;
    }
    return n;
}

static pt_gguf_type type_by_name(const char *s)
{
    for (int t = 0; t < PT_GGUF_TYPE_COUNT; t++)
        if (strcmp(pt_gguf_type_name((pt_gguf_type)t), s) == 0)
            return (pt_gguf_type)t;
    fail_msg("unknown type %s in the manifest", s);
    return PT_GGUF_TYPE_COUNT;
}

/* Checks the scalar value of key i against its manifest text through the typed getter and the
 * converting ones. */
static void check_scalar(pt_gguf *g, int64_t i, pt_gguf_type t, const char *text)
{
    int64_t iv = 0;
    double dv = 0;
    switch (t) {
    case PT_GGUF_UINT8: {
        uint8_t v;
        assert_int_equal(pt_gguf_get_u8(g, i, &v), PT_OK);
        assert_int_equal(v, strtoull(text, NULL, 10));
        break;
    }
    case PT_GGUF_INT8: {
        int8_t v;
        assert_int_equal(pt_gguf_get_i8(g, i, &v), PT_OK);
        assert_int_equal(v, strtoll(text, NULL, 10));
        break;
    }
    case PT_GGUF_UINT16: {
        uint16_t v;
        assert_int_equal(pt_gguf_get_u16(g, i, &v), PT_OK);
        assert_int_equal(v, strtoull(text, NULL, 10));
        break;
    }
    case PT_GGUF_INT16: {
        int16_t v;
        assert_int_equal(pt_gguf_get_i16(g, i, &v), PT_OK);
        assert_int_equal(v, strtoll(text, NULL, 10));
        break;
    }
    case PT_GGUF_UINT32: {
        uint32_t v;
        assert_int_equal(pt_gguf_get_u32(g, i, &v), PT_OK);
        assert_int_equal(v, strtoull(text, NULL, 10));
        break;
    }
    case PT_GGUF_INT32: {
        int32_t v;
        assert_int_equal(pt_gguf_get_i32(g, i, &v), PT_OK);
        assert_int_equal(v, strtoll(text, NULL, 10));
        break;
    }
    case PT_GGUF_UINT64: {
        uint64_t v;
        assert_int_equal(pt_gguf_get_u64(g, i, &v), PT_OK);
        assert_true(v == strtoull(text, NULL, 10));
        break;
    }
    case PT_GGUF_INT64: {
        int64_t v;
        assert_int_equal(pt_gguf_get_i64(g, i, &v), PT_OK);
        assert_true(v == strtoll(text, NULL, 10));
        break;
    }
    case PT_GGUF_FLOAT32: {
        float v;
        assert_int_equal(pt_gguf_get_f32(g, i, &v), PT_OK);
        assert_true((double)v == strtod(text, NULL));
        break;
    }
    case PT_GGUF_FLOAT64: {
        double v;
        assert_int_equal(pt_gguf_get_f64(g, i, &v), PT_OK);
        assert_true(v == strtod(text, NULL));
        break;
    }
    case PT_GGUF_BOOL: {
        bool v;
        assert_int_equal(pt_gguf_get_bool(g, i, &v), PT_OK);
        assert_int_equal(v, atoi(text));
        break;
    }
    case PT_GGUF_STRING: {
        char expect[1024];
        size_t n = unhex(text, expect), len = 99;
        const char *s = pt_gguf_get_str(g, i, &len);
        assert_non_null(s);
        assert_int_equal(len, n);
        assert_memory_equal(s, expect, n);
        assert_int_equal(s[n], '\0');
        assert_pt_status_error(pt_gguf_get_int(g, i, &iv), PT_ERR_DTYPE, "not an integer");
        return;
    }
    default: fail();
    }
    if (t == PT_GGUF_FLOAT32 || t == PT_GGUF_FLOAT64) {
        assert_int_equal(pt_gguf_get_float(g, i, &dv), PT_OK);
        assert_true(dv == strtod(text, NULL));
        assert_pt_status_error(pt_gguf_get_int(g, i, &iv), PT_ERR_DTYPE, "not an integer");
    } else if (t == PT_GGUF_UINT64 && strtoull(text, NULL, 10) > INT64_MAX) {
        assert_pt_status_error(pt_gguf_get_int(g, i, &iv), PT_ERR_FORMAT, "does not fit in int64");
    } else {
        assert_int_equal(pt_gguf_get_int(g, i, &iv), PT_OK);
        assert_true(iv == strtoll(text, NULL, 10));
    }
    /* a getter of another type refuses, naming the key and both types */
    uint8_t u8;
    if (t != PT_GGUF_UINT8)
        assert_pt_status_error(pt_gguf_get_u8(g, i, &u8), PT_ERR_DTYPE, "not u8");
}

static void check_array(pt_gguf *g, int64_t i, char **f, int nf)
{
    pt_gguf_type et = type_by_name(f[2]);
    int64_t count = atoll(f[3]);
    assert_int_equal(pt_gguf_kv_type(g, i), PT_GGUF_ARRAY);
    assert_int_equal(pt_gguf_arr_type(g, i), et);
    assert_int_equal(pt_gguf_arr_count(g, i), count);
    assert_int_equal(nf, 4 + count);
    for (int64_t j = 0; j < count; j++) {
        const char *text = f[4 + j];
        if (et == PT_GGUF_STRING) {
            char expect[256];
            size_t n = unhex(text, expect), len = 99;
            const char *s = pt_gguf_arr_str(g, i, j, &len);
            assert_non_null(s);
            assert_int_equal(len, n);
            assert_memory_equal(s, expect, n + 1);
        } else if (et == PT_GGUF_FLOAT32 || et == PT_GGUF_FLOAT64) {
            double v;
            assert_int_equal(pt_gguf_arr_float(g, i, j, &v), PT_OK);
            assert_true(v == strtod(text, NULL));
        } else if (et == PT_GGUF_UINT64 && strtoull(text, NULL, 10) > INT64_MAX) {
            int64_t v;
            assert_pt_status_error(pt_gguf_arr_int(g, i, j, &v), PT_ERR_FORMAT, "int64");
            const uint8_t *raw = pt_gguf_arr_data(g, i);
            uint64_t u;
            memcpy(&u, raw + 8 * j, 8);
            assert_true(u == strtoull(text, NULL, 10));
        } else {
            int64_t v;
            assert_int_equal(pt_gguf_arr_int(g, i, j, &v), PT_OK);
            assert_true(v == strtoll(text, NULL, 10));
        }
    }
    int64_t v;
    assert_pt_status_error(pt_gguf_arr_int(g, i, count, &v), PT_ERR_INDEX, "out of range");
    if (et == PT_GGUF_STRING)
        assert_pt_error(pt_gguf_arr_data(g, i), PT_ERR_DTYPE, "array of strings");
    else
        assert_non_null(pt_gguf_arr_data(g, i));
}

static void check_tensor(pt_gguf *g, const pt_fixture *fx, const char *stem, int64_t ti, char **f)
{
    size_t len;
    assert_string_equal(pt_gguf_tensor_name(g, ti, &len), f[1]);
    assert_int_equal(len, strlen(f[1]));
    assert_int_equal(pt_gguf_find_tensor(g, f[1]), ti);
    int type = atoi(f[2]), ndim = atoi(f[3]);
    assert_int_equal(pt_gguf_tensor_ggml_type(g, ti), type);
    assert_int_equal(pt_gguf_tensor_ndim(g, ti), ndim);
    int64_t numel = 1;
    for (int k = 0; k < ndim; k++) {
        int64_t ne = atoll(f[4 + k]);
        assert_int_equal(pt_gguf_tensor_ne(g, ti)[k], ne);
        assert_int_equal(pt_gguf_tensor_shape(g, ti)[ndim - 1 - k], ne);
        numel *= ne;
    }
    assert_int_equal(pt_gguf_tensor_numel(g, ti), numel);
    uint64_t nbytes = strtoull(f[4 + ndim], NULL, 10);
    assert_true(pt_gguf_tensor_nbytes(g, ti) == nbytes);
    assert_true(pt_gguf_tensor_offset(g, ti) == strtoull(f[5 + ndim], NULL, 10));
    char name[256];
    snprintf(name, sizeof name, "%s/%s.bytes", stem, f[1]);
    pt_tensor *bytes = fx_get(fx, name);
    assert_int_equal(pt_numel(bytes), (int64_t)nbytes);
    assert_memory_equal(pt_gguf_tensor_data(g, ti), pt_data_ptr(bytes), nbytes);

    pt_dtype expect_dt = type == 0   ? PT_FLOAT32
                         : type == 1 ? PT_FLOAT16
                         : type == 2 ? PT_Q4_0
                                     : PT_Q8_0;
    assert_int_equal(pt_gguf_tensor_dtype(g, ti), expect_dt);
    pt_tensor *t = pt_gguf_tensor(g, ti);
    assert_non_null(t);
    assert_int_equal(pt_dtype_of(t), expect_dt);
    assert_int_equal(pt_ndim(t), ndim);
    assert_memory_equal(pt_shape(t), pt_gguf_tensor_shape(g, ti), (size_t)ndim * sizeof(int64_t));
    assert_memory_equal(pt_data_ptr(t), pt_data_ptr(bytes), nbytes);
    if (type <= 1) {
        snprintf(name, sizeof name, "%s/%s", stem, f[1]);
        pt_tensor *e = fx_get(fx, name);
        assert_tensor_equal(t, e);
        pt_release(e);
    }
    pt_release(t);
    pt_release(bytes);
}

/* One file's block of the manifest, checked against the handle. */
static void check_file(pt_gguf *g, const pt_fixture *fx, const char *stem, char **lines, int n)
{
    int64_t kv = 0, ti = 0;
    for (int l = 0; l < n; l++) {
        char *f[64];
        char *line = strdup(lines[l]);
        int nf = split_tabs(line, f, 64);
        if (strcmp(f[0], "version") == 0) {
            assert_int_equal(pt_gguf_version(g), atoi(f[1]));
        } else if (strcmp(f[0], "alignment") == 0) {
            assert_int_equal(pt_gguf_alignment(g), atoi(f[1]));
        } else if (strcmp(f[0], "kv") == 0 || strcmp(f[0], "arr") == 0) {
            size_t len;
            assert_string_equal(pt_gguf_kv_key(g, kv, &len), f[1]);
            assert_int_equal(len, strlen(f[1]));
            assert_int_equal(pt_gguf_find_key(g, f[1]), kv);
            if (f[0][0] == 'k') {
                assert_int_equal(pt_gguf_kv_type(g, kv), type_by_name(f[2]));
                check_scalar(g, kv, type_by_name(f[2]), nf > 3 ? f[3] : "");
                assert_pt_error(pt_gguf_arr_data(g, kv), PT_ERR_DTYPE, "not array");
            } else {
                check_array(g, kv, f, nf);
            }
            kv++;
        } else if (strcmp(f[0], "tensor") == 0) {
            check_tensor(g, fx, stem, ti++, f);
        }
        free(line);
    }
    assert_int_equal(pt_gguf_kv_count(g), kv);
    assert_int_equal(pt_gguf_tensor_count(g), ti);
    assert_int_equal(pt_gguf_find_key(g, "no.such.key"), -1);
    assert_int_equal(pt_gguf_find_tensor(g, "no.such.tensor"), -1);
    assert_pt_error(pt_gguf_kv_key(g, kv, NULL), PT_ERR_INDEX, "out of range");
    assert_pt_error(pt_gguf_tensor(g, ti), PT_ERR_INDEX, "out of range");
    assert_pt_error(pt_gguf_tensor_name(g, -1, NULL), PT_ERR_INDEX, "out of range");
}

static void check_manifest(bool from_buffer)
{
    size_t len;
    char *text = pt_test_read_file(GGUF_DIR "manifest.txt", &len);
    char *lines[256];
    int n = 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l && n < 256; l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    pt_fixture *fx = fx_open("gguf");
    int files = 0;
    for (int i = 0; i < n;) {
        assert_true(strncmp(lines[i], "file\t", 5) == 0);
        char path[512], stem[128];
        snprintf(path, sizeof path, GGUF_DIR "%s", lines[i] + 5);
        snprintf(stem, sizeof stem, "%s", lines[i] + 5);
        *strstr(stem, ".gguf") = '\0';
        int j = i + 1;
        while (j < n && strncmp(lines[j], "file\t", 5) != 0)
            j++;
        size_t flen = 0;
        char *data = from_buffer ? pt_test_read_file(path, &flen) : NULL;
        pt_gguf *g = from_buffer ? pt_gguf_open_buffer(data, flen, stem) : pt_gguf_open(path);
        assert_non_null(g);
        assert_string_equal(pt_gguf_name(g), from_buffer ? stem : path);
        check_file(g, fx, stem, lines + i + 1, j - i - 1);
        pt_gguf_close(g);
        free(data);
        files++;
        i = j;
    }
    assert_int_equal(files, 2);
    fx_close(fx);
    free(text);
}

static void test_reference_files(void **state)
{
    (void)state;
    check_manifest(false);
}

static void test_reference_buffers(void **state)
{
    (void)state;
    check_manifest(true);
}

/* Tensors keep the mapping alive after pt_gguf_close, and writes to them stay private. */
static void test_tensor_outlives_handle(void **state)
{
    (void)state;
    size_t len0, len1;
    char *before = pt_test_read_file(GGUF_DIR "meta.gguf", &len0);
    pt_gguf *g = pt_gguf_open(GGUF_DIR "meta.gguf");
    assert_non_null(g);
    int64_t i = pt_gguf_find_tensor(g, "w2d");
    pt_tensor *t = pt_gguf_tensor(g, i);
    float first;
    memcpy(&first, pt_gguf_tensor_data(g, i), 4);
    pt_gguf_close(g);
    assert_shape(t, 3, 4);
    assert_true(pt_test_get(t, 0) == first);
    ((float *)pt_data_ptr(t))[0] = 99.0f;
    pt_release(t);
    char *after = pt_test_read_file(GGUF_DIR "meta.gguf", &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);
}

/* Every prefix shorter than the end of the last tensor's data is refused; longer ones (only
 * trailing padding cut) are fine. */
static void test_truncated_everywhere(void **state)
{
    (void)state;
    const char *files[] = {GGUF_DIR "meta.gguf", GGUF_DIR "quant.gguf"};
    for (int k = 0; k < 2; k++) {
        size_t len;
        char *data = pt_test_read_file(files[k], &len);
        pt_gguf *g = pt_gguf_open_buffer(data, len, "full");
        assert_non_null(g);
        uint64_t end = pt_gguf_data_offset(g);
        for (int64_t t = 0; t < pt_gguf_tensor_count(g); t++) {
            uint64_t e =
                pt_gguf_data_offset(g) + pt_gguf_tensor_offset(g, t) + pt_gguf_tensor_nbytes(g, t);
            end = e > end ? e : end;
        }
        pt_gguf_close(g);
        for (size_t cut = 0; cut < len; cut++) {
            g = pt_gguf_open_buffer(data, cut, "cut.gguf");
            if (cut < end) {
                if (g)
                    fail_msg("%s cut to %zu bytes (data ends at %llu) was accepted", files[k], cut,
                             (unsigned long long)end);
                assert_int_equal(pt_last_status(), PT_ERR_FORMAT);
                assert_non_null(strstr(pt_last_error(), "cut.gguf: gguf: "));
                pt_clear_error();
            } else {
                assert_non_null(g);
                pt_gguf_close(g);
            }
        }
        free(data);
    }
}

/* ---- hand-built files --------------------------------------------------------------------------
 */

typedef struct gbuf {
    uint8_t d[8192];
    size_t n;
} gbuf;

static void put(gbuf *b, const void *p, size_t n)
{
    assert_true(b->n + n <= sizeof b->d);
    memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void u32(gbuf *b, uint32_t v)
{
    put(b, &v, 4);
}
static void u64(gbuf *b, uint64_t v)
{
    put(b, &v, 8);
}
static void gstr(gbuf *b, const char *s)
{
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void header(gbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    b->n = 0;
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}
static void kv_u32(gbuf *b, const char *key, uint32_t v)
{
    gstr(b, key);
    u32(b, PT_GGUF_UINT32);
    u32(b, v);
}
static void tinfo(gbuf *b, const char *name, uint32_t ndim, const uint64_t *ne, uint32_t type,
                  uint64_t offset)
{
    gstr(b, name);
    u32(b, ndim);
    for (uint32_t i = 0; i < ndim; i++)
        u64(b, ne[i]);
    u32(b, type);
    u64(b, offset);
}
static void pad_data(gbuf *b, size_t align, size_t data_bytes)
{
    while (b->n % align)
        b->d[b->n++] = 0;
    assert_true(b->n + data_bytes <= sizeof b->d);
    memset(b->d + b->n, 0x3C, data_bytes);
    b->n += data_bytes;
}

static void expect_bad(const gbuf *b, pt_status status, const char *what)
{
    pt_gguf *g = pt_gguf_open_buffer(b->d, b->n, "bad.gguf");
    if (g) {
        pt_gguf_close(g);
        fail_msg("a malformed file (%s) was accepted", what);
    }
    const char *msg = pt_last_error();
    if (pt_last_status() != status || !strstr(msg, "bad.gguf: gguf: ") || !strstr(msg, what))
        fail_msg("expected status %d with '%s', got %d: %s", (int)status, what,
                 (int)pt_last_status(), msg);
    pt_clear_error();
}

static void test_bad_header(void **state)
{
    (void)state;
    gbuf b;
    header(&b, 3, 0, 0);
    b.d[0] = 'X';
    expect_bad(&b, PT_ERR_FORMAT, "no \"GGUF\" magic");
    b.n = 3;
    expect_bad(&b, PT_ERR_FORMAT, "no \"GGUF\" magic");
    header(&b, 1, 0, 0);
    expect_bad(&b, PT_ERR_FORMAT, "version 1 is not supported");
    header(&b, 0x03000000, 0, 0);
    expect_bad(&b, PT_ERR_FORMAT, "big-endian");
    header(&b, 4, 0, 0);
    expect_bad(&b, PT_ERR_FORMAT, "unknown version 4");
    header(&b, 3, 0, 0);
    b.n -= 3;
    expect_bad(&b, PT_ERR_FORMAT, "the header runs past the end of the file");
    header(&b, 3, 0, UINT64_MAX);
    expect_bad(&b, PT_ERR_FORMAT, "cannot fit in the 0 bytes left");
    header(&b, 3, 1000, 1);
    kv_u32(&b, "a", 1);
    expect_bad(&b, PT_ERR_FORMAT, "1 metadata entries and 1000 tensors cannot fit");
    /* v2 with no KVs and no tensors is a valid (empty) file */
    header(&b, 2, 0, 0);
    pt_gguf *g = pt_gguf_open_buffer(b.d, b.n, "empty.gguf");
    assert_non_null(g);
    assert_int_equal(pt_gguf_version(g), 2);
    assert_int_equal(pt_gguf_alignment(g), 32);
    pt_gguf_close(g);
}

static void test_bad_metadata(void **state)
{
    (void)state;
    gbuf b;
    header(&b, 3, 0, 1);
    u64(&b, UINT64_MAX - 2); /* key length */
    put(&b, "abcdefgh", 8);
    expect_bad(&b, PT_ERR_FORMAT, "a metadata key runs past the end of the file (offset 32 + ");
    header(&b, 3, 0, 1);
    gstr(&b, "k");
    u32(&b, 13);
    u32(&b, 0);
    expect_bad(&b, PT_ERR_FORMAT, "key 'k' has unknown value type 13");
    header(&b, 3, 0, 1);
    gstr(&b, "k");
    u32(&b, PT_GGUF_STRING);
    u64(&b, 1000);
    put(&b, "short", 5);
    expect_bad(&b, PT_ERR_FORMAT, "a string value runs past the end of the file");
    header(&b, 3, 0, 1);
    gstr(&b, "k");
    u32(&b, PT_GGUF_UINT64);
    u32(&b, 7);
    expect_bad(&b, PT_ERR_FORMAT, "a metadata value runs past the end");
    header(&b, 3, 0, 1);
    gstr(&b, "arr");
    u32(&b, PT_GGUF_ARRAY);
    u32(&b, PT_GGUF_INT32);
    u64(&b, UINT64_MAX / 2);
    u32(&b, 1);
    expect_bad(&b, PT_ERR_FORMAT, "array 'arr' of 9223372036854775807 i32 elements runs past");
    header(&b, 3, 0, 1);
    gstr(&b, "arr");
    u32(&b, PT_GGUF_ARRAY);
    u32(&b, PT_GGUF_STRING);
    u64(&b, 2);
    gstr(&b, "x");
    u64(&b, 100); /* the second string's length, with no bytes after it */
    expect_bad(&b, PT_ERR_FORMAT, "string array element runs past the end");
    header(&b, 3, 0, 1);
    gstr(&b, "nest");
    u32(&b, PT_GGUF_ARRAY);
    u32(&b, PT_GGUF_ARRAY);
    u64(&b, 1);
    u32(&b, PT_GGUF_UINT8);
    u64(&b, 1);
    put(&b, "\1", 1);
    expect_bad(&b, PT_ERR_FORMAT, "key 'nest' is an array of arrays");
    header(&b, 3, 0, 1);
    gstr(&b, "arr");
    u32(&b, PT_GGUF_ARRAY);
    u32(&b, 77);
    u64(&b, 0);
    expect_bad(&b, PT_ERR_FORMAT, "key 'arr' is an array of unknown type 77");
    header(&b, 3, 0, 2);
    kv_u32(&b, "dup", 1);
    kv_u32(&b, "dup", 2);
    expect_bad(&b, PT_ERR_FORMAT, "duplicate key 'dup'");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 0);
    expect_bad(&b, PT_ERR_FORMAT, "general.alignment 0 is not a power of two");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 48);
    expect_bad(&b, PT_ERR_FORMAT, "general.alignment 48 is not a power of two");
    header(&b, 3, 0, 1);
    gstr(&b, "general.alignment");
    u32(&b, PT_GGUF_UINT64);
    u64(&b, 64);
    expect_bad(&b, PT_ERR_FORMAT, "general.alignment has type u64 (expected u32)");
}

/* An empty array (which gguf-py cannot write) is fine. */
static void test_empty_array(void **state)
{
    (void)state;
    gbuf b;
    header(&b, 3, 0, 1);
    gstr(&b, "empty");
    u32(&b, PT_GGUF_ARRAY);
    u32(&b, PT_GGUF_STRING);
    u64(&b, 0);
    pt_gguf *g = pt_gguf_open_buffer(b.d, b.n, "e.gguf");
    assert_non_null(g);
    assert_int_equal(pt_gguf_arr_count(g, 0), 0);
    assert_int_equal(pt_gguf_arr_type(g, 0), PT_GGUF_STRING);
    assert_pt_error(pt_gguf_arr_str(g, 0, 0, NULL), PT_ERR_INDEX, "out of range");
    pt_gguf_close(g);
}

static void test_bad_tensors(void **state)
{
    (void)state;
    gbuf b;
    uint64_t ne[5] = {32, 2, 1, 1, 1};
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 0, ne, 0, 0);
    pad_data(&b, 32, 64);
    expect_bad(&b, PT_ERR_FORMAT, "tensor 't' has 0 dims (expected 1 to 4)");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 5, ne, 0, 0);
    pad_data(&b, 32, 64);
    expect_bad(&b, PT_ERR_FORMAT, "tensor 't' has 5 dims");
    uint64_t zero[2] = {4, 0};
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 2, zero, 0, 0);
    pad_data(&b, 32, 64);
    expect_bad(&b, PT_ERR_FORMAT, "tensor 't' has dim 1 = 0 (must be positive)");
    uint64_t huge[3] = {1u << 31, 1u << 31, 1u << 31};
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 3, huge, 0, 0);
    pad_data(&b, 32, 64);
    expect_bad(&b, PT_ERR_FORMAT, "tensor 't' has dim 2 = 2147483648 (too large)");
    uint64_t big2[2] = {1ull << 31, 1ull << 31}; /* 2^62 elements of 4 bytes: 2^64 bytes */
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 2, big2, 0, 0);
    pad_data(&b, 32, 64);
    expect_bad(&b, PT_ERR_FORMAT, "tensor 't' is too large");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 2, ne, 4, 0); /* Q4_2, retired */
    pad_data(&b, 32, 64);
    expect_bad(&b, PT_ERR_UNSUPPORTED, "tensor 't' has unknown ggml type 4");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 2, ne, 1000, 0);
    pad_data(&b, 32, 64);
    expect_bad(&b, PT_ERR_UNSUPPORTED, "tensor 't' has unknown ggml type 1000");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 2, ne, 99, 0); /* beyond ggml's types today: unsupported, named */
    pad_data(&b, 32, 64);
    expect_bad(&b, PT_ERR_UNSUPPORTED, "tensor 't' has unknown ggml type 99");
    uint64_t ne16[1] = {16};
    header(&b, 3, 1, 0);
    tinfo(&b, "q", 1, ne16, 8, 0); /* Q8_0 needs multiples of 32 */
    pad_data(&b, 32, 64);
    expect_bad(&b, PT_ERR_FORMAT,
               "tensor 'q' of type Q8_0 has ne[0] = 16, not a multiple of its block size 32");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 1, ne, 0, 16);
    pad_data(&b, 32, 256);
    expect_bad(&b, PT_ERR_FORMAT, "tensor 't' has offset 16, not a multiple of the alignment 32");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 2, ne, 0, 0); /* 256 bytes, 255 present */
    pad_data(&b, 32, 255);
    expect_bad(&b, PT_ERR_FORMAT,
               "tensor 't' (offset 0, 256 bytes) runs past the end of the data "
               "section (255 bytes)");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 2, ne, 0, UINT64_MAX - 31);
    pad_data(&b, 32, 256);
    expect_bad(&b, PT_ERR_FORMAT, "runs past the end of the data section");
    header(&b, 3, 2, 0);
    tinfo(&b, "a", 2, ne, 0, 0);
    tinfo(&b, "b", 1, ne, 0, 224);
    pad_data(&b, 32, 512);
    expect_bad(&b, PT_ERR_FORMAT, "tensor 'b' (offset 224) overlaps 'a' (offset 0, 256 bytes)");
    header(&b, 3, 2, 0);
    tinfo(&b, "a", 1, ne, 0, 0);
    tinfo(&b, "a", 1, ne, 0, 128);
    pad_data(&b, 32, 256);
    expect_bad(&b, PT_ERR_FORMAT, "duplicate tensor name 'a'");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 1, ne, 0, 0);
    /* the data section would start past the end: no padding, no data */
    expect_bad(&b, PT_ERR_FORMAT, "past the end of the file");
}

/* A type PromeTorch has no dtype for (IQ4_NL) is inspectable, but not a tensor; a custom
 * alignment of 1 puts an F32 tensor at an odd address, which is then copied. */
static void test_types_and_alignment(void **state)
{
    (void)state;
    gbuf b;
    uint64_t ne[2] = {32, 2}, ne1[1] = {3};
    header(&b, 3, 2, 1);
    kv_u32(&b, "general.alignment", 1);
    tinfo(&b, "iq", 2, ne, 20, 0); /* IQ4_NL: 2 blocks of 18 bytes */
    tinfo(&b, "f", 1, ne1, 0, 37);
    size_t data_at = b.n; /* alignment 1: no padding */
    pad_data(&b, 1, 36 + 1 + 12);
    memcpy(b.d + data_at + 37, (float[]){1.5f, -2.0f, 8.25f}, 12);
    pt_gguf *g = pt_gguf_open_buffer(b.d, b.n, "types.gguf");
    assert_non_null(g);
    assert_int_equal(pt_gguf_alignment(g), 1);
    assert_int_equal(pt_gguf_tensor_ggml_type(g, 0), 20);
    assert_string_equal(pt_gguf_ggml_type_name(20), "IQ4_NL");
    assert_int_equal(pt_gguf_tensor_dtype(g, 0), PT_DTYPE_COUNT);
    assert_int_equal(pt_gguf_tensor_nbytes(g, 0), 36);
    assert_pt_error(pt_gguf_tensor(g, 0), PT_ERR_DTYPE, "tensor 'iq' has ggml type IQ4_NL");
    assert_int_equal(pt_gguf_data_offset(g), data_at);
    pt_tensor *t = pt_gguf_tensor(g, 1);
    assert_non_null(t);
    assert_true(pt_test_get(t, 0) == 1.5 && pt_test_get(t, 1) == -2.0 && pt_test_get(t, 2) == 8.25);
    pt_release(t);
    assert_string_equal(pt_gguf_ggml_type_name(4), "unknown");
    assert_string_equal(pt_gguf_ggml_type_name(-1), "unknown");
    pt_gguf_close(g);
    pt_gguf_close(NULL);
    assert_pt_error(pt_gguf_open("/nonexistent/m.gguf"), PT_ERR_IO, "/nonexistent/m.gguf");
    assert_pt_error(pt_gguf_open(NULL), PT_ERR_NULL, "path is NULL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reference_files, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_reference_buffers, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_tensor_outlives_handle, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_truncated_everywhere, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bad_header, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bad_metadata, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_empty_array, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_bad_tensors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_types_and_alignment, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
