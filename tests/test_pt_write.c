/* Tests of pt_save (io.h): the zip structure torch.save writes (local headers, 64-byte aligned
 * data, CRCs, data descriptors, central directory, zip64 end records, forced zip64 extras),
 * the pickle bytes of a dict with every scalar kind (compared with CPython's
 * pickle.dumps(protocol=2) of the same dict), state dicts, shared storages, dtypes, empty
 * tensors, the archive folder name, and the errors. tests/python/check_torch_load.py checks
 * the same writer against real PyTorch (ctest torch_load_check). */
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

/* ---- a small zip reader that checks every structural rule on the way ---------------------- */

typedef struct record {
    char name[128];
    const unsigned char *data;
    uint64_t size;
} record;

typedef struct archive {
    unsigned char *buf;
    size_t len;
    record rec[64];
    int n;
    bool zip64_extras; /* some entry used a zip64 extra field */
} archive;

static uint64_t rd(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    rewind(f);
    unsigned char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* CRC-32 (IEEE 802.3, reflected), bit by bit: an independent check of the writer's zlib CRCs. */
static uint32_t crc32_ref(const unsigned char *p, uint64_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (uint64_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
}

/* Reads values out of a zip64 extra (ID 1) for the fields marked 0xFFFFFFFF. */
static void zip64_fields(const unsigned char *x, size_t xlen, uint64_t *size, uint64_t *off)
{
    for (size_t i = 0; i + 4 <= xlen;) {
        uint64_t id = rd(x + i, 2), n = rd(x + i + 2, 2);
        if (id == 1) {
            const unsigned char *p = x + i + 4;
            if (*size == 0xFFFFFFFFu) {
                *size = rd(p, 8);
                assert_int_equal(rd(p + 8, 8), *size); /* compressed = uncompressed */
                p += 16;
            }
            if (*off == 0xFFFFFFFFu)
                *off = rd(p, 8);
            return;
        }
        i += 4 + n;
    }
    fail_msg("no zip64 extra where the central directory has 0xFFFFFFFF");
}

/* Parses and checks a .pt zip; fills a->rec in central-directory order. */
static void open_archive(const char *path, archive *a)
{
    memset(a, 0, sizeof(*a));
    a->buf = read_all(path, &a->len);
    const unsigned char *b = a->buf;
    size_t len = a->len;
    assert_true(len > 22 + 20 + 56);
    /* classic end record, zip64 locator and zip64 end record, as miniz writes them */
    const unsigned char *eocd = b + len - 22;
    assert_int_equal(rd(eocd, 4), 0x06054b50);
    const unsigned char *loc = eocd - 20;
    assert_int_equal(rd(loc, 4), 0x07064b50);
    uint64_t z64 = rd(loc + 8, 8);
    assert_int_equal(z64, len - 22 - 20 - 56);
    assert_int_equal(rd(b + z64, 4), 0x06064b50);
    uint64_t n = rd(b + z64 + 32, 8), cd_size = rd(b + z64 + 40, 8), cd = rd(b + z64 + 48, 8);
    assert_int_equal(rd(b + z64 + 24, 8), n);
    assert_int_equal(rd(eocd + 10, 2), n < 0xFFFF ? n : 0xFFFF);
    assert_int_equal(rd(eocd + 12, 4), cd_size);
    assert_int_equal(rd(eocd + 16, 4), cd);
    assert_int_equal(cd + cd_size, z64);
    assert_true(n <= 64);
    const unsigned char *c = b + cd;
    uint64_t expect_off = 0;
    for (uint64_t i = 0; i < n; i++) {
        assert_int_equal(rd(c, 4), 0x02014b50);
        assert_int_equal(rd(c + 8, 2), 0x0808);
        assert_int_equal(rd(c + 10, 2), 0); /* stored */
        uint32_t crc = (uint32_t)rd(c + 16, 4);
        uint64_t csize = rd(c + 20, 4), size = rd(c + 24, 4), off = rd(c + 42, 4);
        assert_int_equal(csize, size);
        size_t nl = (size_t)rd(c + 28, 2), xl = (size_t)rd(c + 30, 2), cl = (size_t)rd(c + 32, 2);
        if (size == 0xFFFFFFFFu || off == 0xFFFFFFFFu) {
            zip64_fields(c + 46 + nl, xl, &size, &off);
            a->zip64_extras = true;
        }
        record *r = &a->rec[a->n++];
        assert_true(nl < sizeof(r->name));
        memcpy(r->name, c + 46, nl);
        r->name[nl] = '\0';
        /* the local header: records are back to back, data 64-byte aligned */
        assert_int_equal(off, expect_off);
        const unsigned char *h = b + off;
        assert_int_equal(rd(h, 4), 0x04034b50);
        assert_int_equal(rd(h + 6, 2), 0x0808);
        assert_int_equal(rd(h + 8, 2), 0);
        assert_int_equal(rd(h + 26, 2), nl);
        assert_memory_equal(h + 30, r->name, nl);
        size_t lx = (size_t)rd(h + 28, 2);
        const unsigned char *fb = h + 30 + nl;
        if (a->zip64_extras && rd(fb, 2) == 1)
            fb += 4 + rd(fb + 2, 2);
        assert_int_equal(rd(fb, 2), 0x4246); /* "FB" padding field */
        for (uint64_t k = 0; k < rd(fb + 2, 2); k++)
            assert_int_equal(fb[4 + k], 'Z');
        assert_int_equal(fb + 4 + rd(fb + 2, 2), h + 30 + nl + lx);
        uint64_t data = off + 30 + nl + lx;
        assert_int_equal(data % 64, 0);
        r->data = b + data;
        r->size = size;
        assert_int_equal(crc32_ref(r->data, size), crc);
        /* the data descriptor */
        const unsigned char *d = r->data + size;
        assert_int_equal(rd(d, 4), 0x08074b50);
        assert_int_equal(rd(d + 4, 4), crc);
        bool wide = h + 30 + nl != fb;
        assert_int_equal(rd(d + 8, wide ? 8 : 4), size);
        assert_int_equal(rd(d + (wide ? 16 : 12), wide ? 8 : 4), size);
        expect_off = (uint64_t)(d - b) + (wide ? 24 : 16);
        c += 46 + nl + xl + cl;
    }
    assert_int_equal(expect_off, cd);
}

static const record *find(const archive *a, const char *name)
{
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->rec[i].name, name) == 0)
            return &a->rec[i];
    fail_msg("no record %s", name);
    return NULL;
}

static bool contains(const record *r, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= r->size; i++)
        if (memcmp(r->data + i, s, n) == 0)
            return true;
    return false;
}

/* A fresh directory for one test's files. */
static void temp_dir(char *dir)
{
    assert_non_null(mkdtemp(dir));
}

static void join(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void cleanup(const char *dir, const char *file)
{
    char p[256];
    join(p, sizeof(p), dir, file);
    remove(p);
    rmdir(dir);
}

/* ---- tests -------------------------------------------------------------------------------- */

/* Sequential(Linear(3, 4), BatchNorm1d(4)).state_dict(): 7 storages, an OrderedDict. */
static void test_state_dict(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt_save_XXXXXX", path[256];
    temp_dir(dir);
    join(path, sizeof(path), dir, "model.pt");
    pt_module *layers[2] = {pt_nn_linear(3, 4, true), pt_nn_batch_norm1d(4)};
    pt_module *m = pt_nn_sequential(2, layers);
    pt_value *sd = pt_nn_state_dict(m);
    assert_non_null(sd);
    assert_int_equal(pt_save(path, sd), PT_OK);
    archive a;
    open_archive(path, &a);
    const char *names[] = {"model/data.pkl", "model/byteorder", "model/data/0", "model/data/1",
                           "model/data/2",   "model/data/3",    "model/data/4", "model/data/5",
                           "model/data/6",   "model/version"};
    assert_int_equal(a.n, 10);
    for (int i = 0; i < 10; i++)
        assert_string_equal(a.rec[i].name, names[i]);
    const record *pkl = find(&a, "model/data.pkl");
    assert_int_equal(pkl->data[0], 0x80);
    assert_int_equal(pkl->data[1], 0x02);
    assert_int_equal(pkl->data[pkl->size - 1], '.');
    assert_true(contains(pkl, "ccollections\nOrderedDict\n"));
    assert_true(contains(pkl, "ctorch._utils\n_rebuild_tensor_v2\n"));
    assert_true(contains(pkl, "ctorch\nFloatStorage\n"));
    assert_true(contains(pkl, "ctorch\nLongStorage\n"));
    assert_true(contains(pkl, "1.num_batches_tracked"));
    const record *bo = find(&a, "model/byteorder"), *ver = find(&a, "model/version");
    assert_int_equal(bo->size, 6);
    assert_memory_equal(bo->data, "little", 6);
    assert_int_equal(ver->size, 2);
    assert_memory_equal(ver->data, "3\n", 2);
    /* data/0 = 0.weight [4, 3]; data/6 = num_batches_tracked, int64 0 */
    float w[12];
    assert_int_equal(pt_copy_to_host(pt_value_tensor_ref(pt_value_item_ref(sd, 0)), w, sizeof(w)),
                     PT_OK);
    const record *d0 = find(&a, "model/data/0"), *d6 = find(&a, "model/data/6");
    assert_int_equal(d0->size, sizeof(w));
    assert_memory_equal(d0->data, w, sizeof(w));
    assert_int_equal(d6->size, 8);
    assert_int_equal(rd(d6->data, 8), 0);
    free(a.buf);
    pt_value_free(sd);
    pt_nn_free(m);
    cleanup(dir, "model.pt");
}

/* {'a': None, ..., 'q': {7: 'a'}}: byte for byte what CPython's pickle.dumps(d, protocol=2)
 * gives (the list 'l' is also 'm', so the second is a BINGET). */
static void test_pickle_bytes(void **state)
{
    (void)state;
    static const unsigned char expected[] = {
        0x80, 0x02, 0x7d, 0x71, 0x00, 0x28, 0x58, 0x01, 0x00, 0x00, 0x00, 0x61, 0x71, 0x01, 0x4e,
        0x58, 0x01, 0x00, 0x00, 0x00, 0x62, 0x71, 0x02, 0x88, 0x58, 0x01, 0x00, 0x00, 0x00, 0x63,
        0x71, 0x03, 0x89, 0x58, 0x01, 0x00, 0x00, 0x00, 0x64, 0x71, 0x04, 0x4d, 0x2c, 0x01, 0x58,
        0x01, 0x00, 0x00, 0x00, 0x65, 0x71, 0x05, 0x8a, 0x05, 0x00, 0x00, 0x00, 0x80, 0x00, 0x58,
        0x01, 0x00, 0x00, 0x00, 0x66, 0x71, 0x06, 0x8a, 0x05, 0xff, 0xff, 0xff, 0x7f, 0xff, 0x58,
        0x01, 0x00, 0x00, 0x00, 0x67, 0x71, 0x07, 0x8a, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0x7f, 0x58, 0x01, 0x00, 0x00, 0x00, 0x68, 0x71, 0x08, 0x8a, 0x08, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x80, 0x58, 0x01, 0x00, 0x00, 0x00, 0x69, 0x71, 0x09, 0x4a, 0xfb,
        0xff, 0xff, 0xff, 0x58, 0x01, 0x00, 0x00, 0x00, 0x6a, 0x71, 0x0a, 0x47, 0x3f, 0xe0, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x58, 0x01, 0x00, 0x00, 0x00, 0x6b, 0x71, 0x0b, 0x58, 0x03,
        0x00, 0x00, 0x00, 0x78, 0xc3, 0xa9, 0x71, 0x0c, 0x58, 0x01, 0x00, 0x00, 0x00, 0x6c, 0x71,
        0x0d, 0x5d, 0x71, 0x0e, 0x4b, 0x01, 0x61, 0x58, 0x01, 0x00, 0x00, 0x00, 0x6d, 0x71, 0x0f,
        0x68, 0x0e, 0x58, 0x01, 0x00, 0x00, 0x00, 0x6e, 0x71, 0x10, 0x4b, 0x01, 0x4b, 0x02, 0x86,
        0x71, 0x11, 0x58, 0x01, 0x00, 0x00, 0x00, 0x6f, 0x71, 0x12, 0x29, 0x58, 0x01, 0x00, 0x00,
        0x00, 0x70, 0x71, 0x13, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x4b, 0x03, 0x4b, 0x04, 0x74, 0x71,
        0x14, 0x58, 0x01, 0x00, 0x00, 0x00, 0x71, 0x71, 0x15, 0x7d, 0x71, 0x16, 0x4b, 0x07, 0x68,
        0x01, 0x73, 0x75, 0x2e};
    char dir[] = "/tmp/pt_save_XXXXXX", path[256];
    temp_dir(dir);
    join(path, sizeof(path), dir, "v.pt");
    pt_value *d = pt_value_dict();
    pt_value_dict_set_str(d, "a", pt_value_none());
    pt_value_dict_set_str(d, "b", pt_value_bool(true));
    pt_value_dict_set_str(d, "c", pt_value_bool(false));
    pt_value_dict_set_str(d, "d", pt_value_int(300));
    pt_value_dict_set_str(d, "e", pt_value_int(2147483648LL));
    pt_value_dict_set_str(d, "f", pt_value_int(-2147483649LL));
    pt_value_dict_set_str(d, "g", pt_value_int(INT64_MAX));
    pt_value_dict_set_str(d, "h", pt_value_int(INT64_MIN));
    pt_value_dict_set_str(d, "i", pt_value_int(-5));
    pt_value_dict_set_str(d, "j", pt_value_float(0.5));
    pt_value_dict_set_str(d, "k", pt_value_str("x\xc3\xa9"));
    pt_value *l = pt_value_list();
    pt_value_append(l, pt_value_int(1));
    pt_value_dict_set_str(d, "l", pt_value_retain(l));
    pt_value_dict_set_str(d, "m", l);
    pt_value_dict_set_str(d, "n",
                          pt_value_tuple_of(2, (pt_value *[]){pt_value_int(1), pt_value_int(2)}));
    pt_value_dict_set_str(d, "o", pt_value_tuple());
    pt_value *t4 = pt_value_tuple();
    for (int i = 1; i <= 4; i++)
        pt_value_append(t4, pt_value_int(i));
    pt_value_dict_set_str(d, "p", t4);
    pt_value *q = pt_value_dict();
    pt_value_dict_set_int(q, 7, pt_value_str("a"));
    pt_value_dict_set_str(d, "q", q);
    assert_int_equal(pt_save(path, d), PT_OK);
    archive a;
    open_archive(path, &a);
    const record *pkl = find(&a, "v/data.pkl");
    assert_int_equal(pkl->size, sizeof(expected));
    assert_memory_equal(pkl->data, expected, sizeof(expected));
    assert_int_equal(a.n, 3); /* data.pkl, byteorder, version: no storages */
    free(a.buf);
    pt_value_free(d);
    cleanup(dir, "v.pt");
}

/* base [3, 4], its transpose and rows 1..2: one storage record holding all 12 floats. */
static void test_shared_storage(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt_save_XXXXXX", path[256];
    temp_dir(dir);
    join(path, sizeof(path), dir, "views.pt");
    pt_tensor *flat = pt_arange(0, 12, 1, PT_FLOAT32, pt_cpu());
    pt_tensor *base = pt_reshape(flat, PT_SHAPE(3, 4));
    pt_tensor *vt = pt_transpose(base, 0, 1);
    pt_tensor *rows = pt_narrow(base, 0, 1, 2);
    pt_value *d = pt_value_dict();
    pt_value_dict_set_str(d, "rows", pt_value_tensor(rows));
    pt_value_dict_set_str(d, "t", pt_value_tensor(vt));
    pt_value_dict_set_str(d, "base", pt_value_tensor(base));
    assert_int_equal(pt_save(path, d), PT_OK);
    archive a;
    open_archive(path, &a);
    assert_int_equal(a.n, 4);
    const record *d0 = find(&a, "views/data/0");
    assert_int_equal(d0->size, 48);
    for (int i = 0; i < 12; i++) {
        float f;
        memcpy(&f, d0->data + 4 * i, 4);
        assert_true(f == (float)i);
    }
    /* numel 12 ends every persistent id; rows: offset 4 and size (2, 4) after BINPERSID */
    const record *pkl = find(&a, "views/data.pkl");
    assert_true(contains(pkl, "X\x01\x00\x00\x00"
                              "0"));
    assert_true(contains(pkl, "K\x0ctq"));
    assert_true(contains(pkl, "QK\x04K\x02K\x04\x86"));
    free(a.buf);
    pt_value_free(d);
    pt_release(flat);
    pt_release(base);
    pt_release(vt);
    pt_release(rows);
    cleanup(dir, "views.pt");
}

/* bf16/f16/bool/uint8 storages and a zero-size tensor (an empty data record). */
static void test_dtypes_and_empty(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt_save_XXXXXX", path[256];
    temp_dir(dir);
    join(path, sizeof(path), dir, "dt.pt");
    const pt_dtype dts[4] = {PT_BFLOAT16, PT_FLOAT16, PT_BOOL, PT_UINT8};
    const char *globals[4] = {"ctorch\nBFloat16Storage\n", "ctorch\nHalfStorage\n",
                              "ctorch\nBoolStorage\n", "ctorch\nByteStorage\n"};
    pt_value *d = pt_value_dict();
    for (int i = 0; i < 4; i++) {
        pt_tensor *t = pt_ones(PT_SHAPE(5), dts[i], pt_cpu());
        char key[8];
        snprintf(key, sizeof(key), "t%d", i);
        pt_value_dict_set_str(d, key, pt_value_tensor(t));
        pt_release(t);
    }
    pt_tensor *e = pt_zeros(PT_SHAPE(0, 3), PT_FLOAT32, pt_cpu());
    pt_value_dict_set_str(d, "empty", pt_value_tensor(e));
    pt_release(e);
    assert_int_equal(pt_save(path, d), PT_OK);
    archive a;
    open_archive(path, &a);
    const record *pkl = find(&a, "dt/data.pkl");
    for (int i = 0; i < 4; i++)
        assert_true(contains(pkl, globals[i]));
    assert_int_equal(find(&a, "dt/data/0")->size, 10);
    assert_int_equal(rd(find(&a, "dt/data/0")->data, 2), 0x3f80); /* bf16 1.0 */
    assert_int_equal(rd(find(&a, "dt/data/1")->data, 2), 0x3c00); /* f16 1.0 */
    assert_int_equal(find(&a, "dt/data/2")->size, 5);
    assert_int_equal(find(&a, "dt/data/2")->data[4], 1);
    assert_int_equal(find(&a, "dt/data/4")->size, 0);
    assert_true(contains(pkl, "K\x00K\x03\x86")); /* empty's size (0, 3) */
    free(a.buf);
    pt_value_free(d);
    cleanup(dir, "dt.pt");
}

/* PT_SAVE_ZIP64_LIMIT=0 forces the zip64 form of every record: 0xFFFFFFFF in the central
 * directory with the real values in zip64 extras, 8-byte descriptor sizes. pt_save reads the
 * variable once, so this runs alone in its own process (ctest's test_pt_write_zip64). */
static void test_forced_zip64(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt_save_XXXXXX", path[256];
    temp_dir(dir);
    join(path, sizeof(path), dir, "z.pt");
    pt_tensor *t = pt_arange(0, 100, 1, PT_FLOAT64, pt_cpu());
    pt_value *d = pt_value_dict();
    pt_value_dict_set_str(d, "x", pt_value_tensor(t));
    pt_status st = pt_save(path, d);
    assert_int_equal(st, PT_OK);
    archive a;
    open_archive(path, &a);
    assert_true(a.zip64_extras);
    const record *d0 = find(&a, "z/data/0");
    assert_int_equal(d0->size, 800);
    double v;
    memcpy(&v, d0->data + 8 * 99, 8);
    assert_true(v == 99.0);
    free(a.buf);
    pt_value_free(d);
    pt_release(t);
    cleanup(dir, "z.pt");
}

/* The folder is the base name up to its last '.', or "archive" when that is empty. */
static void test_archive_name(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt_save_XXXXXX", path[256];
    temp_dir(dir);
    pt_value *v = pt_value_int(1);
    const char *files[3] = {"a.b.pt", "noext", ".pt"};
    const char *folders[3] = {"a.b/data.pkl", "noext/data.pkl", "archive/data.pkl"};
    for (int i = 0; i < 3; i++) {
        join(path, sizeof(path), dir, files[i]);
        assert_int_equal(pt_save(path, v), PT_OK);
        archive a;
        open_archive(path, &a);
        assert_string_equal(a.rec[0].name, folders[i]);
        free(a.buf);
        remove(path);
    }
    pt_value_free(v);
    rmdir(dir);
}

static void test_errors(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt_save_XXXXXX", path[256];
    temp_dir(dir);
    join(path, sizeof(path), dir, "e.pt");
    pt_value *ok = pt_value_int(1);
    assert_int_equal(pt_save(path, ok), PT_OK);
    size_t before_len;
    free(read_all(path, &before_len));
    assert_pt_status_error(pt_save("/nonexistent-dir/m.pt", ok), PT_ERR_IO,
                           "/nonexistent-dir/m.pt");
    /* the error names the OS reason */
    assert_pt_status_error(pt_save("/nonexistent-dir/m.pt", ok), PT_ERR_IO,
                           "m.pt': No such file or directory");
    assert_pt_status_error(pt_save(NULL, ok), PT_ERR_INVALID_ARG, "path");
    assert_pt_status_error(pt_save(path, NULL), PT_ERR_INVALID_ARG, "value");
    /* a GGUF block tensor */
    pt_tensor *q = pt_empty(PT_SHAPE(32), PT_Q4_0, pt_cpu());
    assert_non_null(q);
    pt_value *d = pt_value_dict();
    pt_value_dict_set_str(d, "q", pt_value_tensor(q));
    assert_pt_status_error(pt_save(path, d), PT_ERR_DTYPE, "q4_0");
    pt_value_free(d);
    pt_release(q);
    /* a str Python cannot decode */
    pt_value *bad = pt_value_str("\xff\xfe");
    assert_pt_status_error(pt_save(path, bad), PT_ERR_INVALID_ARG, "UTF-8");
    pt_value_free(bad);
    /* nesting past 1000 levels */
    pt_value *deep = pt_value_list();
    for (int i = 0; i < 1100; i++) {
        pt_value *outer = pt_value_list();
        pt_value_append(outer, deep);
        deep = outer;
    }
    assert_pt_status_error(pt_save(path, deep), PT_ERR_UNSUPPORTED, "nested deeper");
    pt_value_free(deep);
    /* the failed saves left the earlier file alone and no temporary behind */
    size_t after_len;
    free(read_all(path, &after_len));
    assert_int_equal(after_len, before_len);
    char tmp[300];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_int_not_equal(access(tmp, F_OK), 0);
    pt_value_free(ok);
    cleanup(dir, "e.pt");
}

#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)

int main(void)
{
    const char *zip64_limit = getenv("PT_SAVE_ZIP64_LIMIT");
    if (zip64_limit && strcmp(zip64_limit, "0") == 0) {
        const struct CMUnitTest zip64[] = {T(test_forced_zip64)};
        return cmocka_run_group_tests(zip64, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        T(test_state_dict),       T(test_pickle_bytes), T(test_shared_storage),
        T(test_dtypes_and_empty), T(test_archive_name), T(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
