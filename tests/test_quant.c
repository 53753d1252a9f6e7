/* Quant-family tests: pt_dequantize of every GGUF block dtype, bit-exact (memcmp of the float
 * bits) against gguf-py's dequantizer (tests/fixtures/gen/quant.py; Q8_1 and Q8_K, which
 * gguf-py lacks, against the generator's NumPy transcription of formats.md 2.3), on blocks
 * quantized by gguf-py and on random raw blocks; the multithreaded split; float16/bfloat16
 * inputs; pt_to_dtype of block tensors; pt_embedding with block tables; end to end through a
 * GGUF file; and the error paths. ctest also runs it with PT_DISABLE_AVX2=1 (scalar paths). */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define GGUF_DIR PT_FIXTURES_DIR "/gguf/"

static pt_fixture *fx;
static const pt_device cpu = {PT_DEVICE_CPU, 0};

typedef struct qtype {
    const char *name;
    pt_dtype dt;
} qtype;

static const qtype types[] = {
    {"Q4_0", PT_Q4_0}, {"Q4_1", PT_Q4_1}, {"Q5_0", PT_Q5_0}, {"Q5_1", PT_Q5_1},
    {"Q8_0", PT_Q8_0}, {"Q8_1", PT_Q8_1}, {"Q2_K", PT_Q2_K}, {"Q3_K", PT_Q3_K},
    {"Q4_K", PT_Q4_K}, {"Q5_K", PT_Q5_K}, {"Q6_K", PT_Q6_K}, {"Q8_K", PT_Q8_K},
};
#define N_TYPES ((int)(sizeof types / sizeof types[0]))

/* Fails unless actual is a float32 tensor of expected's shape with identical bits. */
static void assert_bits_equal(const pt_tensor *actual, const pt_tensor *expected, const char *what)
{
    if (!actual)
        fail_msg("%s: NULL result (%s)", what, pt_last_error());
    assert_int_equal(pt_dtype_of(actual), PT_FLOAT32);
    assert_int_equal(pt_ndim(actual), pt_ndim(expected));
    assert_memory_equal(pt_shape(actual), pt_shape(expected),
                        sizeof(int64_t) * (size_t)pt_ndim(expected));
    const uint32_t *a = pt_data_ptr(actual), *e = pt_data_ptr(expected);
    for (int64_t i = 0; i < pt_numel(expected); i++) {
        if (a[i] != e[i])
            fail_msg("%s: element %lld is 0x%08x, gguf-py gives 0x%08x", what, (long long)i, a[i],
                     e[i]);
    }
}

/* A block tensor of dtype dt and float shape [rows, cols] over the raw bytes (uint8 [rows, B]). */
static pt_tensor *blocks_from_raw(const pt_tensor *raw, const pt_tensor *out, pt_dtype dt)
{
    const int64_t *s = pt_shape(out);
    int64_t shape[2] = {s[0], s[1]};
    assert_int_equal(pt_numel(raw),
                     (int64_t)pt_dtype_size(dt) * (s[0] * s[1]) / pt_dtype_block_size(dt));
    return pt_from_data(pt_data_ptr(raw), 2, shape, dt, cpu);
}

static void test_dequantize_matches_gguf_py(void **state)
{
    (void)state;
    const char *variants[] = {"q", "r"};
    for (int i = 0; i < N_TYPES; i++) {
        for (int v = 0; v < 2; v++) {
            char rn[64], on[64];
            snprintf(rn, sizeof rn, "%s.%s.raw", types[i].name, variants[v]);
            snprintf(on, sizeof on, "%s.%s.out", types[i].name, variants[v]);
            if (!fx_has(fx, rn))
                continue; /* gguf-py quantizes only Q4_0 ... Q8_0 */
            pt_tensor *out = fx_get(fx, on);
            pt_tensor *t = blocks_from_raw(fx_get(fx, rn), out, types[i].dt);
            assert_non_null(t);
            assert_bits_equal(pt_dequantize(t), out, rn);
            /* the same bytes as one flat row */
            int64_t n = pt_numel(out);
            pt_tensor *flat = pt_from_data(pt_data_ptr(t), 1, &n, types[i].dt, cpu);
            assert_bits_equal(pt_dequantize(flat), pt_reshape(out, 1, &n), rn);
        }
    }
}

/* Tensors far larger than one task's grain (16K floats): the blocks split across threads must
 * land where they belong. The random blocks are tiled `reps` times. */
static void test_dequantize_threaded(void **state)
{
    (void)state;
    const int reps = 48;
    for (int i = 0; i < N_TYPES; i++) {
        char rn[64], on[64];
        snprintf(rn, sizeof rn, "%s.r.raw", types[i].name);
        snprintf(on, sizeof on, "%s.r.out", types[i].name);
        pt_tensor *raw = fx_get(fx, rn), *out = fx_get(fx, on);
        size_t rb = (size_t)pt_numel(raw), ob = (size_t)pt_numel(out) * 4;
        char *bytes = malloc(rb * reps), *vals = malloc(ob * reps);
        assert_non_null(bytes);
        assert_non_null(vals);
        for (int r = 0; r < reps; r++) {
            memcpy(bytes + r * rb, pt_data_ptr(raw), rb);
            memcpy(vals + r * ob, pt_data_ptr(out), ob);
        }
        int64_t shape[3] = {reps, pt_shape(out)[0], pt_shape(out)[1]};
        pt_tensor *t = pt_from_data(bytes, 3, shape, types[i].dt, cpu);
        pt_tensor *e = pt_from_data(vals, 3, shape, PT_FLOAT32, cpu);
        free(bytes);
        free(vals);
        assert_bits_equal(pt_dequantize(t), e, rn);
    }
}

static void test_dequantize_plain_dtypes(void **state)
{
    (void)state;
    assert_bits_equal(pt_dequantize(fx_get(fx, "F16.in")), fx_get(fx, "F16.out"), "f16");
    assert_bits_equal(pt_dequantize(fx_get(fx, "BF16.in")), fx_get(fx, "BF16.out"), "bf16");
    /* float32: a new tensor with the same values, also from a strided view */
    pt_tensor *x = fx_get(fx, "Q4_0.q.out");
    pt_tensor *c = pt_dequantize(x);
    assert_bits_equal(c, x, "f32 copy");
    assert_ptr_not_equal(pt_data_ptr(c), pt_data_ptr(x));
    pt_tensor *nc = pt_test_noncontig(x);
    assert_bits_equal(pt_dequantize(nc), x, "f32 strided");
    /* integers convert like pt_to_dtype */
    pt_tensor *iv = pt_arange(-5, 7, 1, PT_INT64, cpu);
    assert_tensor_equal(pt_dequantize(iv), pt_arange(-5, 7, 1, PT_FLOAT32, cpu));
}

static void test_dequantize_empty(void **state)
{
    (void)state;
    int64_t shape[2] = {0, 256};
    pt_tensor *t = pt_empty(2, shape, PT_Q4_K, cpu);
    pt_tensor *d = pt_dequantize(t);
    assert_non_null(d);
    assert_shape(d, 0, 256);
    assert_int_equal(pt_dtype_of(d), PT_FLOAT32);
}

static void test_to_dtype_of_block_tensor(void **state)
{
    (void)state;
    const qtype sel[2] = {{"Q4_K", PT_Q4_K}, {"Q8_0", PT_Q8_0}};
    for (int i = 0; i < 2; i++) {
        char k[64];
        snprintf(k, sizeof k, "%s.r.raw", sel[i].name);
        pt_tensor *raw = fx_get(fx, k);
        snprintf(k, sizeof k, "%s.r.out", sel[i].name);
        pt_tensor *out = fx_get(fx, k);
        pt_tensor *t = blocks_from_raw(raw, out, sel[i].dt);
        assert_bits_equal(pt_to_dtype(t, PT_FLOAT32), out, k);
        snprintf(k, sizeof k, "%s.r.out_f16", sel[i].name);
        assert_tensor_equal(pt_to_dtype(t, PT_FLOAT16), fx_get(fx, k));
        snprintf(k, sizeof k, "%s.r.out_bf16", sel[i].name);
        assert_tensor_equal(pt_to_dtype(t, PT_BFLOAT16), fx_get(fx, k));
        snprintf(k, sizeof k, "%s.r.out_f64", sel[i].name);
        assert_tensor_equal(pt_to_dtype(t, PT_FLOAT64), fx_get(fx, k));
        /* same dtype: an alias, as for any dtype */
        pt_tensor *same = pt_to_dtype(t, sel[i].dt);
        assert_non_null(same);
        assert_ptr_equal(pt_data_ptr(same), pt_data_ptr(t));
        assert_pt_error(pt_to_dtype(t, PT_INT32), PT_ERR_UNSUPPORTED, "q");
        assert_pt_error(pt_to_dtype(out, PT_Q4_0), PT_ERR_UNSUPPORTED, "float32 -> q4_0");
        assert_pt_error(pt_to_dtype(t, PT_Q4_1), PT_ERR_UNSUPPORTED, "not supported");
    }
}

/* pt_embedding(table, idx) rows equal rows of the dequantized table, bit for bit. */
static void check_embedding(const char *name, pt_dtype dt, pt_dtype idx_dt)
{
    char k[64];
    snprintf(k, sizeof k, "%s.r.raw", name);
    pt_tensor *raw = fx_get(fx, k);
    snprintf(k, sizeof k, "%s.r.out", name);
    pt_tensor *full = fx_get(fx, k);
    pt_tensor *w = blocks_from_raw(raw, full, dt);
    int64_t V = pt_shape(full)[0], D = pt_shape(full)[1];
    const int64_t rows[6] = {3, 0, 3, 1, 2, 0};
    int64_t ishape[2] = {2, 3};
    pt_tensor *idx = pt_to_dtype(pt_from_data(rows, 2, ishape, PT_INT64, cpu), idx_dt);
    pt_tensor *e = pt_embedding(w, idx);
    assert_non_null(e);
    assert_shape(e, 2, 3, D);
    assert_int_equal(pt_dtype_of(e), PT_FLOAT32);
    const float *got = pt_data_ptr(e), *want = pt_data_ptr(full);
    for (int r = 0; r < 6; r++) {
        assert_true(rows[r] < V);
        assert_memory_equal(got + r * D, want + rows[r] * D, (size_t)D * sizeof(float));
    }
    /* padding_idx only matters for gradients */
    pt_embedding_opts o = {.has_padding_idx = true, .padding_idx = -1};
    pt_tensor *ep = pt_embedding_ex(w, idx, &o);
    assert_non_null(ep);
    assert_memory_equal(pt_data_ptr(ep), got, (size_t)(6 * D) * sizeof(float));
    /* a 0-dim index gives one row */
    pt_tensor *i0 = pt_scalar_tensor(2, PT_INT64, cpu);
    pt_tensor *e0 = pt_embedding(w, i0);
    assert_non_null(e0);
    assert_shape(e0, D);
    assert_memory_equal(pt_data_ptr(e0), want + 2 * D, (size_t)D * sizeof(float));
}

static void test_embedding_block_tables(void **state)
{
    (void)state;
    check_embedding("Q4_K", PT_Q4_K, PT_INT64);
    check_embedding("Q8_0", PT_Q8_0, PT_INT64);
    check_embedding("Q8_0", PT_Q8_0, PT_INT32);
    check_embedding("Q6_K", PT_Q6_K, PT_INT32);
}

/* Many rows: the per-row work is split across threads. */
static void test_embedding_threaded(void **state)
{
    (void)state;
    pt_tensor *raw = fx_get(fx, "Q4_0.r.raw"), *full = fx_get(fx, "Q4_0.r.out");
    pt_tensor *w = blocks_from_raw(raw, full, PT_Q4_0);
    int64_t n = 3000, D = pt_shape(full)[1];
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)n);
    assert_non_null(rows);
    for (int64_t i = 0; i < n; i++)
        rows[i] = (i * 7 + i / 5) % 4;
    pt_tensor *it = pt_from_data(rows, 1, &n, PT_INT64, cpu);
    pt_tensor *e = pt_embedding(w, it);
    assert_non_null(e);
    const float *got = pt_data_ptr(e), *want = pt_data_ptr(full);
    for (int64_t i = 0; i < n; i++)
        assert_memory_equal(got + i * D, want + rows[i] * D, (size_t)D * sizeof(float));
    free(rows);
}

static void test_embedding_errors(void **state)
{
    (void)state;
    int64_t ws[2] = {4, 64};
    pt_tensor *q = pt_empty(2, ws, PT_Q8_0, cpu);
    memset(pt_data_ptr(q), 0, 8 * pt_dtype_size(PT_Q8_0)); /* 8 blocks */
    int64_t bad_idx[2] = {1, 4};
    int64_t two = 2;
    pt_tensor *ib = pt_from_data(bad_idx, 1, &two, PT_INT64, cpu);
    assert_pt_error(pt_embedding(q, ib), PT_ERR_INDEX, "index 4 is out of bounds");
    bad_idx[1] = -1;
    ib = pt_from_data(bad_idx, 1, &two, PT_INT64, cpu);
    assert_pt_error(pt_embedding(q, ib), PT_ERR_INDEX, "index -1 is out of bounds");
    pt_tensor *fi = pt_zeros(1, &two, PT_FLOAT32, cpu);
    assert_pt_error(pt_embedding(q, fi), PT_ERR_DTYPE, "indices");
    /* 1-D and 3-D block weights */
    int64_t n = 64, s3[3] = {2, 2, 64};
    pt_tensor *ok_idx = pt_zeros(1, &two, PT_INT64, cpu);
    assert_pt_error(pt_embedding(pt_empty(1, &n, PT_Q8_0, cpu), ok_idx), PT_ERR_SHAPE, "2-D");
    assert_pt_error(pt_embedding(pt_empty(3, s3, PT_Q8_0, cpu), ok_idx), PT_ERR_SHAPE, "2-D");
    /* rows 0 and 2 of the table: not contiguous */
    assert_pt_error(pt_embedding(pt_slice(q, 0, 0, 4, 2), ok_idx), PT_ERR_SHAPE, "contiguous");
    /* dim not a multiple of the block size (pt_empty refuses such a tensor; a view makes one) */
    assert_pt_error(pt_embedding(pt_narrow(q, 1, 0, 40), ok_idx), PT_ERR_SHAPE,
                    "multiple of the q8_0 block size 32");
    /* a block tensor cannot require grad, so no gradient can be asked of one */
    assert_pt_status_error(pt_requires_grad_(q, true), PT_ERR_DTYPE, "floating point");
    assert_pt_error(pt_embedding(NULL, ok_idx), PT_ERR_NULL, "weight");
}

/* End to end: pt_gguf_tensor's zero-copy block tensors dequantize to gguf-py's values. */
static void test_gguf_file_end_to_end(void **state)
{
    (void)state;
    pt_gguf *g = pt_gguf_open(GGUF_DIR "quant.gguf");
    assert_non_null(g);
    const char *names[2] = {"blk.0.q8", "blk.0.q4"};
    const pt_dtype dts[2] = {PT_Q8_0, PT_Q4_0};
    for (int i = 0; i < 2; i++) {
        int64_t ti = pt_gguf_find_tensor(g, names[i]);
        assert_true(ti >= 0);
        pt_tensor *t = pt_gguf_tensor(g, ti);
        assert_non_null(t);
        assert_int_equal(pt_dtype_of(t), dts[i]);
        char k[64];
        snprintf(k, sizeof k, "gguf.%s", names[i]);
        pt_tensor *want = fx_get(fx, k);
        assert_bits_equal(pt_dequantize(t), want, k);
        assert_bits_equal(pt_to_dtype(t, PT_FLOAT32), want, k);
        /* embedding rows straight from the mapped table */
        int64_t one = 1, last = pt_shape(t)[0] - 1;
        pt_tensor *e = pt_embedding(t, pt_from_data(&last, 1, &one, PT_INT64, cpu));
        assert_non_null(e);
        int64_t D = pt_shape(t)[1];
        assert_memory_equal(pt_data_ptr(e), (const float *)pt_data_ptr(want) + last * D,
                            (size_t)D * sizeof(float));
    }
    pt_gguf_close(g);
}

static void test_dequantize_errors(void **state)
{
    (void)state;
    assert_pt_error(pt_dequantize(NULL), PT_ERR_NULL, "pt_dequantize");
    int64_t s[2] = {4, 64};
    pt_tensor *q = pt_empty(2, s, PT_Q8_0, cpu);
    memset(pt_data_ptr(q), 0, 8 * pt_dtype_size(PT_Q8_0)); /* 8 blocks */
    /* rows 0 and 2: not contiguous */
    assert_pt_error(pt_dequantize(pt_slice(q, 0, 0, 4, 2)), PT_ERR_SHAPE, "must be contiguous");
    assert_pt_error(pt_dequantize(pt_transpose(pt_reshape(q, 2, (int64_t[2]){8, 32}), 0, 1)),
                    PT_ERR_SHAPE, "must be a multiple of the q8_0 block size");
    assert_pt_error(pt_dequantize(pt_narrow(q, 1, 32, 32)), PT_ERR_SHAPE, "block tensor 't'");
    /* contiguous but starting inside a block */
    int64_t n = 256;
    assert_pt_error(pt_dequantize(pt_narrow(pt_reshape(q, 1, &n), 0, 16, 32)), PT_ERR_SHAPE,
                    "block boundary");
    /* last dim not a multiple of the block size */
    assert_pt_error(pt_dequantize(pt_narrow(q, 1, 0, 48)), PT_ERR_SHAPE,
                    "[4, 48] must be a multiple of the q8_0 block size 32");
    assert_pt_error(pt_dequantize(pt_select(q, 1, 0)), PT_ERR_SHAPE, "[4] must be a multiple");
    assert_pt_error(pt_dequantize(pt_select(pt_select(q, 0, 0), 0, 0)), PT_ERR_SHAPE,
                    "at least 1 dim");
    /* views that keep whole rows of blocks are fine: rows 1..2, and a reshape */
    pt_tensor *d = pt_dequantize(pt_narrow(q, 0, 1, 2));
    assert_non_null(d);
    assert_shape(d, 2, 64);
    d = pt_dequantize(pt_reshape(q, 3, (int64_t[3]){2, 4, 32}));
    assert_non_null(d);
    assert_shape(d, 2, 4, 32);
}

int main(void)
{
    fx = fx_open("quant");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dequantize_matches_gguf_py, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dequantize_threaded, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dequantize_plain_dtypes, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dequantize_empty, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_to_dtype_of_block_tensor, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_embedding_block_tables, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_embedding_threaded, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_embedding_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gguf_file_end_to_end, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dequantize_errors, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
