/* Tests of the zip reader (src/io/zip_read.c) on real archives written by torch.save and
 * Python's zipfile (tests/fixtures/gen_zips.py; expected names, sizes, CRCs, data offsets and
 * first bytes come from its manifest.txt), on a 70,000-entry archive built here, and on
 * malformed archives made by corrupting the real ones byte by byte: truncation at every
 * offset, end records and directories pointing outside the file, overlapping entries,
 * duplicate names, zip64 fields out of range, zip bombs, bad CRCs and methods. Every
 * malformed case must fail with PT_ERR_FORMAT and a message "<file>: zip: <what>". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"

#include "io/zip_read.h"

#define MB (1024u * 1024u)

/* ---- fixture files --------------------------------------------------------------------------- */

static void fixture_path(char *out, size_t cap, const char *fname)
{
    /* tests/fixtures/zip/ from PT_FIXTURES_DIR, the absolute path CMake passes (__FILE__ may be
     * relative to the build folder, which is not where ctest runs the test) */
    snprintf(out, cap, "%s/zip/%s", PT_FIXTURES_DIR, fname);
}

typedef struct zbuf {
    uint8_t *d;
    size_t n;
    const char *name; /* the fixture's file name, used as the map's name */
} zbuf;

static zbuf load(const char *fname)
{
    char path[4096];
    fixture_path(path, sizeof path, fname);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open fixture %s (run tests/fixtures/gen_zips.py)", path);
    zbuf b = {NULL, 0, fname};
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.n = (size_t)n;
    b.d = malloc(b.n ? b.n : 1);
    assert_non_null(b.d);
    assert_int_equal(fread(b.d, 1, b.n, f), b.n);
    fclose(f);
    return b;
}

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p)
{
    return rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}
static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void wr32(uint8_t *p, uint32_t v)
{
    wr16(p, (uint16_t)v);
    wr16(p + 2, (uint16_t)(v >> 16));
}
static void wr64(uint8_t *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

/* Offsets of the structures in a pristine fixture (the test trusts its own fixtures). */
static size_t eocd_of(const zbuf *b)
{
    for (size_t p = b->n - 22 + 1; p-- > 0;)
        if (rd32(b->d + p) == 0x06054b50u)
            return p;
    fail_msg("%s: no EOCD", b->name);
    return 0;
}
static bool has_zip64_end(const zbuf *b)
{
    size_t e = eocd_of(b);
    return e >= 20 && rd32(b->d + e - 20) == 0x07064b50u;
}
static size_t zip64_record_of(const zbuf *b)
{
    assert_true(has_zip64_end(b));
    return (size_t)rd64(b->d + eocd_of(b) - 20 + 8);
}
static size_t central_of(const zbuf *b, int i)
{
    size_t p = has_zip64_end(b) ? (size_t)rd64(b->d + zip64_record_of(b) + 48)
                                : rd32(b->d + eocd_of(b) + 16);
    for (int k = 0; k < i; k++)
        p += 46 + (size_t)rd16(b->d + p + 28) + rd16(b->d + p + 30) + rd16(b->d + p + 32);
    assert_int_equal(rd32(b->d + p), 0x02014b50u);
    return p;
}
/* The central header's zip64 extra (zip64_central.zip only): usize, csize, offset. */
static size_t central_zip64_extra_of(const zbuf *b, int i)
{
    size_t c = central_of(b, i);
    size_t x = c + 46 + rd16(b->d + c + 28);
    assert_int_equal(rd16(b->d + x), 1);
    return x;
}
static size_t local_of(const zbuf *b, int i)
{
    size_t c = central_of(b, i);
    uint64_t off = rd32(b->d + c + 42);
    if (off == 0xFFFFFFFFu)
        off = rd64(b->d + central_zip64_extra_of(b, i) + 4 + 16);
    assert_int_equal(rd32(b->d + off), 0x04034b50u);
    return (size_t)off;
}

/* ---- opening and expecting errors ------------------------------------------------------------ */

static pti_zip *open_buf(const zbuf *b)
{
    pti_file_map *m = pti_file_map_borrow(b->d, b->n, b->name);
    assert_non_null(m);
    pti_zip *z = pti_zip_open(m);
    pti_file_map_release(m); /* the zip holds its own reference */
    return z;
}

/* Fails unless the current error is PT_ERR_FORMAT, starts "<name>: zip: " and contains what. */
static void check_error(const char *name, const char *what, const char *file, int line)
{
    const char *msg = pt_last_error();
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s: zip: ", name);
    if (pt_last_status() != PT_ERR_FORMAT || !msg || strncmp(msg, prefix, strlen(prefix)) != 0 ||
        !strstr(msg, what))
        fail_msg("%s:%d: expected PT_ERR_FORMAT \"%s...%s...\", got %s \"%s\"", file, line, prefix,
                 what, pt_status_name(pt_last_status()), msg ? msg : "(null)");
    pt_clear_error();
}

#define expect_open_error(b, what) expect_open_error_at((b), (what), __FILE__, __LINE__)
static void expect_open_error_at(const zbuf *b, const char *what, const char *file, int line)
{
    pt_clear_error();
    pti_zip *z = open_buf(b);
    if (z) {
        pti_zip_close(z);
        fail_msg("%s:%d: %s opened, expected an error \"%s\"", file, line, b->name, what);
    }
    check_error(b->name, what, file, line);
}

#define expect_read_error(b, entry, max, what)                                                     \
    expect_read_error_at((b), (entry), (max), (what), __FILE__, __LINE__)
static void expect_read_error_at(const zbuf *b, const char *entry, uint64_t max, const char *what,
                                 const char *file, int line)
{
    pt_clear_error();
    pti_zip *z = open_buf(b);
    if (!z)
        fail_msg("%s:%d: %s did not open: %s", file, line, b->name, pt_last_error());
    const pti_zip_entry *e = pti_zip_find(z, entry);
    assert_non_null(e);
    size_t len = 99;
    uint8_t *data = pti_zip_read(z, e, max, &len);
    pti_zip_close(z);
    if (data) {
        free(data);
        fail_msg("%s:%d: %s/%s was read, expected an error \"%s\"", file, line, b->name, entry,
                 what);
    }
    assert_int_equal(len, 0);
    check_error(b->name, what, file, line);
}

/* ---- the real archives against the manifest -------------------------------------------------- */

typedef struct manifest_row {
    char archive[64], name[256], first[40];
    uint64_t size, data_offset;
    uint32_t crc;
    int method;
} manifest_row;

static int read_manifest(manifest_row *rows, int cap)
{
    char path[4096], line[1024];
    fixture_path(path, sizeof path, "manifest.txt");
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s", path);
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        assert_true(n < cap);
        manifest_row *r = &rows[n];
        unsigned long long size, off;
        unsigned crc;
        if (sscanf(line, "%63[^\t]\t%255[^\t]\t%llu\t%x\t%d\t%llu\t%39s", r->archive, r->name,
                   &size, &crc, &r->method, &off, r->first) != 7)
            fail_msg("bad manifest line: %s", line);
        r->size = size;
        r->crc = crc;
        r->data_offset = off;
        n++;
    }
    fclose(f);
    return n;
}

static const char *const ARCHIVES[] = {"torch_state_dict.pt", "torch_tensors.pt", "deflated.zip",
                                       "force_zip64.zip",     "descriptor.zip",   "empty.zip",
                                       "zip64_central.zip"};
#define N_ARCHIVES (int)(sizeof ARCHIVES / sizeof ARCHIVES[0])

static void hex_of(const uint8_t *p, size_t n, char *out)
{
    if (n == 0) {
        strcpy(out, "-");
        return;
    }
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
}

static void test_real_archives_match_manifest(void **state)
{
    (void)state;
    static manifest_row rows[64];
    int n_rows = read_manifest(rows, 64);
    int checked = 0;
    for (int a = 0; a < N_ARCHIVES; a++) {
        zbuf b = load(ARCHIVES[a]);
        pti_zip *z = open_buf(&b);
        if (!z)
            fail_msg("%s: %s", ARCHIVES[a], pt_last_error());
        int64_t i = 0;
        for (int r = 0; r < n_rows; r++) {
            if (strcmp(rows[r].archive, ARCHIVES[a]) != 0)
                continue;
            /* central-directory order is zipfile's infolist order */
            const pti_zip_entry *e = pti_zip_entry_at(z, i++);
            assert_non_null(e);
            assert_string_equal(e->name, rows[r].name);
            assert_ptr_equal(pti_zip_find(z, rows[r].name), e);
            assert_int_equal(e->size, rows[r].size);
            assert_int_equal(e->crc32, rows[r].crc);
            assert_int_equal(e->method, rows[r].method);
            assert_int_equal(e->data_offset, rows[r].data_offset);
            if (strstr(ARCHIVES[a], ".pt"))
                assert_int_equal(e->data_offset % 64, 0); /* torch aligns every record */
            size_t len = 7;
            uint8_t *data = pti_zip_read(z, e, 16 * MB, &len);
            if (rows[r].method == 12) { /* bzip2: a real entry we must refuse cleanly */
                assert_null(data);
                check_error(ARCHIVES[a], "compression method 12", __FILE__, __LINE__);
                checked++;
                continue;
            }
            if (!data)
                fail_msg("%s/%s: %s", ARCHIVES[a], rows[r].name, pt_last_error());
            assert_int_equal(len, rows[r].size);
            assert_int_equal(data[len], 0);
            assert_int_equal(crc32(0, data, (uInt)len), rows[r].crc);
            char first[40];
            hex_of(data, len < 16 ? len : 16, first);
            assert_string_equal(first, rows[r].first);
            free(data);
            checked++;
        }
        assert_int_equal(pti_zip_count(z), i);
        assert_ptr_equal(pti_file_map_data(pti_zip_map(z)), b.d);
        pti_zip_close(z);
        free(b.d);
    }
    assert_int_equal(checked, n_rows);
    assert_true(n_rows >= 25);
}

/* Contents that are known independently of the manifest. */
static void test_known_contents(void **state)
{
    (void)state;
    zbuf b = load("deflated.zip");
    pti_zip *z = open_buf(&b);
    assert_non_null(z);
    size_t len;
    uint8_t *s = pti_zip_read(z, pti_zip_find(z, "b.txt"), 100, &len);
    assert_non_null(s);
    assert_string_equal((char *)s, "hello, zip\n");
    free(s);
    s = pti_zip_read(z, pti_zip_find(z, "dir/nested/\xc3\xbcnicode.txt"), 100, &len);
    assert_non_null(s);
    assert_string_equal((char *)s, "gr\xc3\xbc\xc3\x9f"
                                   "e\n");
    free(s);
    s = pti_zip_read(z, pti_zip_find(z, "empty.bin"), 0, &len);
    assert_non_null(s);
    assert_int_equal(len, 0);
    assert_int_equal(s[0], 0);
    free(s);
    s = pti_zip_read(z, pti_zip_find(z, "a.txt"), 1 * MB, &len);
    assert_non_null(s);
    char line[80];
    for (int i = 0; i < 200; i += 37) { /* "line %d: the quick brown fox ..." */
        snprintf(line, sizeof line, "line %d: the quick brown fox jumps over the lazy dog\n", i);
        assert_non_null(strstr((char *)s, line));
    }
    free(s);
    const pti_zip_entry *zeros = pti_zip_find(z, "zeros.bin");
    s = pti_zip_read(z, zeros, 300000, &len); /* the limit is inclusive */
    assert_non_null(s);
    assert_int_equal(len, 300000);
    for (size_t i = 0; i < len; i++)
        if (s[i])
            fail_msg("zeros.bin byte %zu is %d", i, s[i]);
    free(s);
    assert_true(zeros->comp_size < 1000);
    pti_zip_close(z);
    free(b.d);

    b = load("torch_tensors.pt");
    z = open_buf(&b);
    assert_non_null(z);
    s = pti_zip_read(z, pti_zip_find(z, "torch_tensors/version"), 10, &len);
    assert_string_equal((char *)s, "3\n");
    free(s);
    s = pti_zip_read(z, pti_zip_find(z, "torch_tensors/data/0"), 100, &len);
    assert_int_equal(len, 24);
    for (int i = 0; i < 6; i++) { /* torch.arange(6, dtype=float32) */
        float v;
        memcpy(&v, s + 4 * i, 4);
        assert_true(v == (float)i);
    }
    free(s);
    pti_zip_close(z);
    free(b.d);
}

static void test_find_and_index(void **state)
{
    (void)state;
    zbuf b = load("torch_state_dict.pt");
    pti_zip *z = open_buf(&b);
    assert_non_null(z);
    pt_clear_error();
    assert_null(pti_zip_find(z, "torch_state_dict/data/7"));
    assert_null(pti_zip_find(z, "torch_state_dict/data/"));
    assert_null(pti_zip_find(z, "torch_state_dict/data.pk"));
    assert_null(pti_zip_find(z, ""));
    assert_null(pti_zip_find(z, NULL));
    assert_null(pti_zip_find(NULL, "x"));
    assert_int_equal(pt_last_status(), PT_OK); /* not found is no error */
    assert_non_null(pti_zip_find(z, "torch_state_dict/data/6"));
    assert_pt_error(pti_zip_entry_at(z, 9), PT_ERR_INDEX, "out of range");
    assert_pt_error(pti_zip_entry_at(z, -1), PT_ERR_INDEX, "out of range");
    assert_int_equal(pti_zip_count(NULL), 0);
    assert_null(pti_zip_map(NULL));
    pti_zip_close(NULL);

    /* an entry of another archive is not this one's */
    zbuf b2 = load("torch_tensors.pt");
    pti_zip *z2 = open_buf(&b2);
    assert_non_null(z2);
    size_t len;
    assert_pt_error(pti_zip_read(z, pti_zip_entry_at(z2, 0), MB, &len), PT_ERR_INVALID_ARG,
                    "not one of");
    pti_zip_close(z2);
    free(b2.d);
    pti_zip_close(z);
    free(b.d);

    /* a NULL map keeps the caller's error */
    assert_null(pti_zip_open(NULL));
    pt_clear_error();
}

/* pti_file_map_open (a real mapping); the zip keeps the map alive after the caller's release. */
static void test_mapped_file(void **state)
{
    (void)state;
    char path[4096];
    fixture_path(path, sizeof path, "torch_state_dict.pt");
    pti_file_map *m = pti_file_map_open(path);
    assert_non_null(m);
    pti_zip *z = pti_zip_open(m);
    pti_file_map_release(m);
    assert_non_null(z);
    assert_int_equal(pti_zip_count(z), 9);
    size_t len;
    uint8_t *s = pti_zip_read(z, pti_zip_find(z, "torch_state_dict/data.pkl"), MB, &len);
    assert_non_null(s);
    assert_int_equal(len, 680);
    assert_int_equal(s[0], 0x80); /* pickle PROTO */
    assert_int_equal(s[1], 2);
    free(s);
    pti_zip_close(z);
}

/* A stored archive of 70,000 entries (more than the classic 16-bit count) with zip64 end
 * records: every name found through the index, contents right. */
static void test_many_entries(void **state)
{
    (void)state;
    enum { N = 70000 };
    size_t cap = (size_t)N * 120 + 200;
    uint8_t *d = malloc(cap);
    uint64_t *offs = malloc(N * sizeof *offs);
    assert_non_null(d);
    assert_non_null(offs);
    size_t p = 0;
    char name[32], body[32];
    for (int i = 0; i < N; i++) {
        int nl = snprintf(name, sizeof name, "arch/data/%d", i);
        int bl = snprintf(body, sizeof body, "v%d", i * 7);
        uint32_t crc = (uint32_t)crc32(0, (const Bytef *)body, (uInt)bl);
        offs[i] = p;
        memset(d + p, 0, 30);
        wr32(d + p, 0x04034b50u);
        wr16(d + p + 4, 20);
        wr32(d + p + 14, crc);
        wr32(d + p + 18, (uint32_t)bl);
        wr32(d + p + 22, (uint32_t)bl);
        wr16(d + p + 26, (uint16_t)nl);
        memcpy(d + p + 30, name, (size_t)nl);
        memcpy(d + p + 30 + nl, body, (size_t)bl);
        p += 30 + (size_t)nl + (size_t)bl;
    }
    size_t cd = p;
    for (int i = 0; i < N; i++) {
        int nl = snprintf(name, sizeof name, "arch/data/%d", i);
        const uint8_t *l = d + offs[i];
        memset(d + p, 0, 46);
        wr32(d + p, 0x02014b50u);
        wr16(d + p + 4, 20);
        wr16(d + p + 6, 20);
        memcpy(d + p + 16, l + 14, 12); /* crc and sizes */
        wr16(d + p + 28, (uint16_t)nl);
        wr32(d + p + 42, (uint32_t)offs[i]);
        memcpy(d + p + 46, name, (size_t)nl);
        p += 46 + (size_t)nl;
    }
    size_t cd_size = p - cd, rec = p;
    memset(d + p, 0, 56 + 20 + 22);
    wr32(d + p, 0x06064b50u);
    wr64(d + p + 4, 44);
    wr64(d + p + 24, N);
    wr64(d + p + 32, N);
    wr64(d + p + 40, cd_size);
    wr64(d + p + 48, cd);
    p += 56;
    wr32(d + p, 0x07064b50u);
    wr64(d + p + 8, rec);
    wr32(d + p + 16, 1);
    p += 20;
    wr32(d + p, 0x06054b50u);
    wr16(d + p + 8, 0xFFFF);
    wr16(d + p + 10, 0xFFFF);
    wr32(d + p + 12, (uint32_t)cd_size);
    wr32(d + p + 16, (uint32_t)cd);
    p += 22;

    zbuf b = {d, p, "many.zip"};
    pti_zip *z = open_buf(&b);
    if (!z)
        fail_msg("%s", pt_last_error());
    assert_int_equal(pti_zip_count(z), N);
    for (int i = N - 1; i >= 0; i--) {
        snprintf(name, sizeof name, "arch/data/%d", i);
        const pti_zip_entry *e = pti_zip_find(z, name);
        assert_non_null(e);
        assert_ptr_equal(e, pti_zip_entry_at(z, i));
        if (i % 9973 == 0) {
            size_t len;
            uint8_t *s = pti_zip_read(z, e, 100, &len);
            assert_non_null(s);
            snprintf(body, sizeof body, "v%d", i * 7);
            assert_string_equal((char *)s, body);
            free(s);
        }
    }
    assert_null(pti_zip_find(z, "arch/data/70000"));
    pti_zip_close(z);

    /* the same archive with two entries sharing a name */
    memcpy(d + offs[1] + 30, "arch/data/0", 11);
    memcpy(d + cd + 46 + 11 + 46, "arch/data/0", 11); /* entry 1's central name follows entry 0's */
    expect_open_error(&b, "duplicate entry name 'arch/data/0'");
    free(d);
    free(offs);
}

/* pt_save's archive (src/io/pt_zip_write.c, miniz's layout) read back: plain, and (ctest's
 * test_zip_read_zip64) with the test hook PT_SAVE_ZIP64_LIMIT=64 that gives every record and
 * offset zip64 extras; pt_save reads it once, so that run is a process of its own. */
static void test_pt_save_archives(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/pt_zip_read_%d.pt", (int)getpid());
    pt_tensor *w = pt_arange(0, 100, 1, PT_FLOAT32, pt_cpu());
    pt_tensor *b = pt_arange(-3, 3, 1, PT_INT64, pt_cpu());
    pt_value *d = pt_value_dict();
    assert_int_equal(pt_value_dict_set_str(d, "w", pt_value_tensor(w)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(d, "b", pt_value_tensor(b)), PT_OK);
    pt_status st = pt_save(path, d);
    assert_int_equal(st, PT_OK);
    pt_value_free(d);

    pti_file_map *m = pti_file_map_open(path);
    assert_non_null(m);
    pti_zip *z = pti_zip_open(m);
    pti_file_map_release(m);
    if (!z)
        fail_msg("%s", pt_last_error());
    const char *archive = strrchr(path, '/') + 1;
    char name[128];
    int len = (int)(strchr(archive, '.') - archive);
    struct {
        const char *rec;
        const void *data;
        size_t size;
    } want[] = {
        {"byteorder", "little", 6},
        {"data/0", pt_data_ptr(w), 400},
        {"data/1", pt_data_ptr(b), 48},
        {"version", "3\n", 2},
    };
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%.*s/%s", len, archive, want[i].rec);
        const pti_zip_entry *e = pti_zip_find(z, name);
        if (!e)
            fail_msg("no %s in pt_save's archive", name);
        assert_int_equal(e->data_offset % 64, 0);
        size_t n;
        uint8_t *s = pti_zip_read(z, e, MB, &n);
        assert_non_null(s);
        assert_int_equal(n, want[i].size);
        assert_memory_equal(s, want[i].data, n);
        free(s);
    }
    snprintf(name, sizeof name, "%.*s/data.pkl", len, archive);
    assert_non_null(pti_zip_find(z, name));
    assert_int_equal(pti_zip_count(z), 5);
    pti_zip_close(z);
    unlink(path);
    pt_release(w);
    pt_release(b);
}

/* ---- malformed archives ---------------------------------------------------------------------- */

static void test_truncated_everywhere(void **state)
{
    (void)state;
    for (int a = 0; a < N_ARCHIVES; a++) {
        zbuf full = load(ARCHIVES[a]);
        for (size_t n = 0; n < full.n; n++) {
            /* a fresh allocation of exactly n bytes, so ASan sees any read past it */
            zbuf b = {malloc(n ? n : 1), n, full.name};
            assert_non_null(b.d);
            memcpy(b.d, full.d, n);
            pt_clear_error();
            pti_zip *z = open_buf(&b);
            if (z)
                fail_msg("%s truncated to %zu bytes opened", full.name, n);
            check_error(full.name, "", __FILE__, __LINE__);
            free(b.d);
        }
        free(full.d);
    }
    zbuf b = load("empty.zip");
    b.n = 21;
    expect_open_error(&b, "too short");
    b.n = 0;
    expect_open_error(&b, "too short");
    free(b.d);
    b = load("deflated.zip");
    b.n -= 1;
    expect_open_error(&b, "no end-of-central-directory record");
    free(b.d);
}

static void test_end_records_out_of_range(void **state)
{
    (void)state;
    zbuf b = load("deflated.zip"); /* classic end record only */
    size_t e = eocd_of(&b);
    assert_false(has_zip64_end(&b));
    wr32(b.d + e + 16, 0x7FFFFFF0u);
    expect_open_error(&b, "central directory runs past its end");
    free(b.d);
    b = load("deflated.zip");
    wr32(b.d + e + 12, rd32(b.d + e + 12) + 1);
    expect_open_error(&b, "central directory runs past its end");
    free(b.d);
    b = load("deflated.zip");
    wr16(b.d + e + 20, 1); /* a comment of 1 byte that is not there */
    expect_open_error(&b, "comment runs past the end");
    free(b.d);
    b = load("deflated.zip");
    wr16(b.d + e + 4, 1);
    expect_open_error(&b, "multi-disk");
    free(b.d);
    b = load("deflated.zip");
    wr16(b.d + e + 8, 0xFFFF);
    wr16(b.d + e + 10, 0xFFFF);
    expect_open_error(&b, "saturated fields but no zip64 locator");
    free(b.d);
    b = load("deflated.zip");
    wr32(b.d + e + 16, 0xFFFFFFFFu);
    expect_open_error(&b, "saturated fields but no zip64 locator");
    free(b.d);
    /* entry count disagreeing with the directory */
    b = load("deflated.zip");
    wr16(b.d + e + 8, (uint16_t)(rd16(b.d + e + 8) + 1));
    wr16(b.d + e + 10, (uint16_t)(rd16(b.d + e + 10) + 1));
    expect_open_error(&b, "runs past the directory's end");
    free(b.d);
    b = load("deflated.zip");
    wr16(b.d + e + 8, (uint16_t)(rd16(b.d + e + 8) - 1));
    wr16(b.d + e + 10, (uint16_t)(rd16(b.d + e + 10) - 1));
    expect_open_error(&b, "bytes after its 7 entries");
    free(b.d);
    b = load("deflated.zip");
    wr16(b.d + e + 8, 1000);
    wr16(b.d + e + 10, 1000);
    expect_open_error(&b, "1000 entries cannot fit");
    free(b.d);
    b = load("deflated.zip");
    wr16(b.d + e + 8, 3);
    expect_open_error(&b, "multi-disk");
    free(b.d);

    /* torch's zip64 end record and locator */
    b = load("torch_state_dict.pt");
    e = eocd_of(&b);
    size_t rec = zip64_record_of(&b), loc = e - 20;
    wr64(b.d + rec + 48, (uint64_t)1 << 40);
    wr32(b.d + e + 16, 0xFFFFFFFFu);
    expect_open_error(&b, "central directory runs past its end");
    free(b.d);
    b = load("torch_state_dict.pt");
    wr64(b.d + rec + 40, UINT64_MAX);
    wr32(b.d + e + 12, 0xFFFFFFFFu);
    expect_open_error(&b, "central directory runs past its end");
    free(b.d);
    b = load("torch_state_dict.pt");
    wr64(b.d + rec + 32, (uint64_t)1 << 60);
    wr64(b.d + rec + 24, (uint64_t)1 << 60);
    wr16(b.d + e + 8, 0xFFFF);
    wr16(b.d + e + 10, 0xFFFF);
    expect_open_error(&b, "entries cannot fit");
    free(b.d);
    b = load("torch_state_dict.pt");
    wr64(b.d + rec + 48, rd64(b.d + rec + 48) + 1); /* classic offset not saturated: differs */
    expect_open_error(&b, "classic and zip64 end records disagree");
    free(b.d);
    b = load("torch_state_dict.pt");
    wr64(b.d + loc + 8, UINT64_MAX - 10);
    expect_open_error(&b, "zip64 end record at offset");
    free(b.d);
    b = load("torch_state_dict.pt");
    wr64(b.d + loc + 8, rec + 1); /* inside the file, but overlapping the locator */
    expect_open_error(&b, "zip64 end record at offset");
    free(b.d);
    b = load("torch_state_dict.pt");
    wr64(b.d + loc + 8, 0);
    expect_open_error(&b, "no zip64 end record signature");
    free(b.d);
    b = load("torch_state_dict.pt");
    wr64(b.d + rec + 4, UINT64_MAX - 3);
    expect_open_error(&b, "zip64 end record's size");
    free(b.d);
    b = load("torch_state_dict.pt");
    wr64(b.d + rec + 4, 10);
    expect_open_error(&b, "zip64 end record's size");
    free(b.d);
    b = load("torch_state_dict.pt");
    wr32(b.d + loc + 16, 7);
    expect_open_error(&b, "multi-disk");
    free(b.d);
    b = load("torch_state_dict.pt");
    wr32(b.d + rec + 20, 1);
    expect_open_error(&b, "multi-disk");
    free(b.d);
}

static void test_overlapping_entries(void **state)
{
    (void)state;
    /* torch: data/0's declared size grows into data/1's local header (bit 3: sizes from the
     * directory only) */
    zbuf b = load("torch_state_dict.pt");
    size_t c = central_of(&b, 1);
    wr32(b.d + c + 20, 200);
    wr32(b.d + c + 24, 200);
    expect_open_error(&b,
                      "entries 'torch_state_dict/data/0' and 'torch_state_dict/data/1' overlap");
    free(b.d);
    /* two directory entries pointing at one local header (names must differ to get this far:
     * the second's local name check would fail, so point the first at the second instead) */
    b = load("descriptor.zip");
    size_t c1 = central_of(&b, 1);
    wr32(b.d + c1 + 20, rd32(b.d + c1 + 20) + 40); /* two.bin (stored) runs into three.txt */
    wr32(b.d + c1 + 24, rd32(b.d + c1 + 24) + 40);
    expect_open_error(&b, "overlap");
    free(b.d);
    /* an entry running into the central directory */
    b = load("descriptor.zip");
    size_t c2 = central_of(&b, 2);
    wr32(b.d + c2 + 20, rd32(b.d + c2 + 20) + 100);
    expect_open_error(&b, "data runs past the data area's end");
    free(b.d);
}

static void test_entry_data_beyond_eof(void **state)
{
    (void)state;
    zbuf b = load("descriptor.zip");
    size_t c = central_of(&b, 2);
    wr32(b.d + c + 20, 0x7FFFFFFFu);
    expect_open_error(&b, "entry 'three.txt': data runs past");
    free(b.d);
    b = load("deflated.zip");
    c = central_of(&b, 0);
    wr32(b.d + c + 42, (uint32_t)b.n - 10); /* local header near the end of the file */
    expect_open_error(&b, "entry 'a.txt': local header at offset");
    free(b.d);
    b = load("deflated.zip");
    wr32(b.d + central_of(&b, 0) + 42, 0xFFFFFFFEu);
    expect_open_error(&b, "local header at offset 4294967294");
    free(b.d);
    b = load("torch_tensors.pt");
    wr16(b.d + local_of(&b, 3) + 28, 0xFFFF); /* version's local extra length */
    expect_open_error(&b, "local name and extra");
    free(b.d);
}

static void test_names(void **state)
{
    (void)state;
    zbuf b = load("deflated.zip");
    b.d[central_of(&b, 1) + 46] = 'a'; /* b.txt -> a.txt in the directory and locally */
    b.d[local_of(&b, 1) + 30] = 'a';
    expect_open_error(&b, "duplicate entry name 'a.txt'");
    free(b.d);
    b = load("deflated.zip");
    b.d[central_of(&b, 1) + 46 + 1] = 0;
    expect_open_error(&b, "entry 1's name holds a NUL byte");
    free(b.d);
    b = load("deflated.zip");
    b.d[local_of(&b, 1) + 30] = 'c';
    expect_open_error(&b, "entry 'b.txt': the local header names it differently");
    free(b.d);
    b = load("deflated.zip");
    wr16(b.d + central_of(&b, 6) + 28, 0xFFFF); /* name length far past the directory */
    expect_open_error(&b, "run past the directory's end");
    free(b.d);
}

static void test_headers(void **state)
{
    (void)state;
    zbuf b = load("torch_tensors.pt");
    b.d[local_of(&b, 2)] = 'Q';
    expect_open_error(&b, "entry 'torch_tensors/data/1': bad local header signature");
    free(b.d);
    b = load("torch_tensors.pt");
    b.d[central_of(&b, 2) + 1] = 'Q';
    expect_open_error(&b, "bad central directory header signature");
    free(b.d);
    b = load("deflated.zip");
    wr16(b.d + central_of(&b, 3) + 8, 0x0001);
    expect_open_error(&b, "entry 'rand.bin' is encrypted");
    free(b.d);
    b = load("deflated.zip");
    wr16(b.d + central_of(&b, 3) + 8, 0x0040);
    expect_open_error(&b, "is encrypted");
    free(b.d);
    /* without a data descriptor, local sizes must agree with the directory */
    b = load("deflated.zip");
    size_t l = local_of(&b, 1);
    wr32(b.d + l + 22, rd32(b.d + l + 22) + 1);
    expect_open_error(&b, "entry 'b.txt': local header sizes");
    free(b.d);
    b = load("force_zip64.zip");
    l = local_of(&b, 0);
    wr32(b.d + l + 18, rd32(b.d + l + 18) - 1);
    expect_open_error(&b, "entry 'big.txt': local header sizes");
    free(b.d);
    /* a stored entry must have equal sizes */
    b = load("deflated.zip");
    size_t c = central_of(&b, 4);
    l = local_of(&b, 4);
    wr32(b.d + c + 24, 5);
    wr32(b.d + l + 22, 5);
    expect_open_error(&b, "stored entry 'stored.txt' has different sizes");
    free(b.d);
    /* an extra field running past the extra data */
    b = load("force_zip64.zip");
    l = local_of(&b, 0);
    wr16(b.d + l + 18, 0xFFFF); /* local sizes saturated: the zip64 extra is consulted */
    wr16(b.d + l + 20, 0xFFFF);
    wr16(b.d + l + 30 + 7 + 2, 200);
    expect_open_error(&b, "extra field 0x0001 of 200 bytes runs past");
    free(b.d);
}

static void test_zip64_extra_fields(void **state)
{
    (void)state;
    zbuf b = load("zip64_central.zip");
    size_t x = central_zip64_extra_of(&b, 1);
    wr64(b.d + x + 4 + 16, (uint64_t)1 << 62); /* the local header offset */
    expect_open_error(&b, "entry 'second.bin': local header at offset 4611686018427387904");
    free(b.d);
    b = load("zip64_central.zip");
    x = central_zip64_extra_of(&b, 1);
    wr64(b.d + x + 4, UINT64_MAX); /* sizes (stored: both) */
    wr64(b.d + x + 4 + 8, UINT64_MAX);
    expect_open_error(&b, "entry 'second.bin': data runs past");
    free(b.d);
    b = load("zip64_central.zip");
    x = central_zip64_extra_of(&b, 1);
    wr64(b.d + x + 4 + 8, 1);
    expect_open_error(&b, "stored entry 'second.bin' has different sizes");
    free(b.d);
    b = load("zip64_central.zip");
    x = central_zip64_extra_of(&b, 0);
    wr16(b.d + x + 2, 16); /* the offset is missing (8 bytes left over parse as a field) */
    expect_open_error(&b, "zip64 extra field of 16 bytes lacks the local header offset");
    free(b.d);
    b = load("zip64_central.zip");
    x = central_zip64_extra_of(&b, 0);
    wr16(b.d + x + 2, 200);
    expect_open_error(&b, "extra field 0x0001 of 200 bytes runs past");
    free(b.d);
    b = load("zip64_central.zip");
    x = central_zip64_extra_of(&b, 0);
    wr16(b.d + x, 0x0002);
    expect_open_error(&b, "central header has saturated fields but no zip64 extra field");
    free(b.d);
    b = load("zip64_central.zip");
    size_t c = central_of(&b, 0);
    wr16(b.d + c + 34, 0xFFFF); /* disk number saturated: not in the extra */
    expect_open_error(&b, "lacks the disk number");
    free(b.d);
    b = load("zip64_central.zip");
    wr16(b.d + central_of(&b, 2) + 34, 2);
    expect_open_error(&b, "entry 'third' starts on disk 2");
    free(b.d);
    /* the local header's zip64 extra (sizes saturated there too) */
    b = load("zip64_central.zip");
    size_t l = local_of(&b, 0);
    wr64(b.d + l + 30 + 9 + 4, 301);
    expect_open_error(&b, "entry 'first.txt': local header sizes (301");
    free(b.d);
    b = load("zip64_central.zip");
    l = local_of(&b, 0);
    wr16(b.d + l + 30 + 9 + 2, 8);
    expect_open_error(&b, "local zip64 extra field of 8 bytes lacks the compressed size");
    free(b.d);
}

static void test_read_refusals(void **state)
{
    (void)state;
    zbuf b = load("deflated.zip");
    expect_read_error(&b, "bzip2.txt", MB, "entry 'bzip2.txt' uses compression method 12");
    expect_read_error(&b, "zeros.bin", 299999,
                      "declares 300000 bytes, more than the limit of "
                      "299999");
    expect_read_error(&b, "a.txt", 0, "more than the limit of 0");
    free(b.d);
    b = load("deflated.zip");
    wr16(b.d + central_of(&b, 1) + 10, 99);
    expect_read_error(&b, "b.txt", MB, "compression method 99");
    free(b.d);

    /* CRC: the directory's value, or the data, changed */
    b = load("deflated.zip");
    size_t c = central_of(&b, 1);
    wr32(b.d + c + 16, rd32(b.d + c + 16) ^ 1);
    expect_read_error(&b, "b.txt", MB, "entry 'b.txt': CRC-32 mismatch");
    free(b.d);
    b = load("torch_tensors.pt");
    pti_zip *z = open_buf(&b);
    const pti_zip_entry *e = pti_zip_find(z, "torch_tensors/data/1");
    b.d[e->data_offset + 3] ^= 0x10;
    pti_zip_close(z);
    expect_read_error(&b, "torch_tensors/data/1", MB, "CRC-32 mismatch");
    free(b.d);

    /* zip bombs: zeros.bin (300000 bytes from ~300) declared smaller; declared huge */
    b = load("deflated.zip");
    c = central_of(&b, 6);
    size_t l = local_of(&b, 6);
    wr32(b.d + c + 24, 1000);
    wr32(b.d + l + 22, 1000);
    expect_read_error(&b, "zeros.bin", UINT64_MAX,
                      "entry 'zeros.bin' inflates to more than its declared size of 1000");
    wr32(b.d + c + 24, 299999);
    wr32(b.d + l + 22, 299999);
    expect_read_error(&b, "zeros.bin", UINT64_MAX, "more than its declared size of 299999");
    wr32(b.d + c + 24, 0);
    wr32(b.d + l + 22, 0);
    expect_read_error(&b, "zeros.bin", UINT64_MAX, "more than its declared size of 0");
    wr32(b.d + c + 24, 0x7FFFFFFFu); /* 2 GiB from ~300 bytes: refused before allocating */
    wr32(b.d + l + 22, 0x7FFFFFFFu);
    expect_read_error(&b, "zeros.bin", UINT64_MAX, "more than deflate can expand to");
    wr32(b.d + c + 24, 300001);
    wr32(b.d + l + 22, 300001);
    expect_read_error(&b, "zeros.bin", UINT64_MAX,
                      "inflates to 300000 bytes, short of its "
                      "declared size of 300001");
    free(b.d);
    b = load("zip64_central.zip"); /* stored, declared 2^62 bytes: never allocated */
    size_t x = central_zip64_extra_of(&b, 2);
    wr64(b.d + x + 4, (uint64_t)1 << 62);
    wr64(b.d + x + 4 + 8, (uint64_t)1 << 62);
    expect_open_error(&b, "data runs past");
    free(b.d);

    /* corrupt and truncated deflate streams */
    b = load("deflated.zip");
    z = open_buf(&b);
    e = pti_zip_find(z, "a.txt");
    b.d[e->data_offset] = 0xFF; /* block type 3 is invalid */
    pti_zip_close(z);
    expect_read_error(&b, "a.txt", MB, "entry 'a.txt': corrupt deflate data");
    free(b.d);
    b = load("deflated.zip");
    c = central_of(&b, 0);
    l = local_of(&b, 0);
    wr32(b.d + c + 20, rd32(b.d + c + 20) / 2);
    wr32(b.d + l + 18, rd32(b.d + l + 18) / 2);
    expect_read_error(&b, "a.txt", MB, "entry 'a.txt': deflate data ends early");
    free(b.d);
    b = load("descriptor.zip"); /* bit 3: the directory alone declares the sizes */
    c = central_of(&b, 0);
    wr32(b.d + c + 20, 5);
    expect_read_error(&b, "one.txt", MB, "deflate data ends early");
    free(b.d);
}

/* Random corruption of every archive: opening and reading must give data or a clean error. */
static void test_random_corruption(void **state)
{
    (void)state;
    uint64_t rng = 0x243F6A8885A308D3ull;
    for (int a = 0; a < N_ARCHIVES; a++) {
        zbuf orig = load(ARCHIVES[a]);
        for (int round = 0; round < 400; round++) {
            zbuf b = {malloc(orig.n + 1), orig.n, orig.name};
            assert_non_null(b.d);
            memcpy(b.d, orig.d, orig.n);
            int edits = 1 + round % 4;
            for (int k = 0; k < edits && b.n; k++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                size_t pos = (size_t)(rng >> 33) % b.n;
                uint8_t v = (uint8_t)(rng >> 20);
                b.d[pos] = (round & 8) ? (uint8_t)(v & 1 ? 0xFF : 0) : (uint8_t)(b.d[pos] ^ v);
            }
            pt_clear_error();
            pti_zip *z = open_buf(&b);
            if (!z) {
                check_error(orig.name, "", __FILE__, __LINE__);
            } else {
                for (int64_t i = 0; i < pti_zip_count(z); i++) {
                    size_t len;
                    uint8_t *s = pti_zip_read(z, pti_zip_entry_at(z, i), MB, &len);
                    if (s)
                        free(s);
                    else if (pt_last_status() != PT_ERR_OOM)
                        check_error(orig.name, "", __FILE__, __LINE__);
                }
                pti_zip_close(z);
            }
            free(b.d);
        }
        free(orig.d);
    }
}

int main(void)
{
    if (getenv("PT_SAVE_ZIP64_LIMIT")) { /* test_zip_read_zip64: pt_save's zip64 form only */
        const struct CMUnitTest zip64[] = {
            cmocka_unit_test_setup_teardown(test_pt_save_archives, pt_test_setup, pt_test_teardown),
        };
        return cmocka_run_group_tests(zip64, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_real_archives_match_manifest, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_known_contents, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_find_and_index, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mapped_file, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_many_entries, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_pt_save_archives, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_truncated_everywhere, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_end_records_out_of_range, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_overlapping_entries, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_entry_data_beyond_eof, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_names, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_headers, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_zip64_extra_fields, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_read_refusals, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_random_corruption, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
