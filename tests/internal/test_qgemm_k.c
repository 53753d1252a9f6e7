/* The tiled K-quant kernels (pti_qgemmk_range_fn: Q4_K and Q5_K, quant_gemm_q4k.c; Q6_K has
 * test_quant_matmul) against the per-row fallback (pti_quant_dot_fn, the AVX2 or scalar dot
 * products) and against the exact llama.cpp arithmetic in float64: per super-block d_a * d * sum_j
 * sc_j * (codes . a) - d_a * dmin * sum_j m_j * (bsums of sub-block j), the integers exact. Both
 * must be within float32 summation (1e-5 of the sum of the terms' magnitudes, the fixture's
 * allowance) of it, for M in {1, 2, 3, 4, 5, 8, 17, 33} and N = 37 (not a multiple of the 16-row
 * tile); and every row's result must be the same bits whatever M, the range it is computed in (so
 * the tile position) and how the range is split. Skips where the CPU has no tiled kernel. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "backends/cpu/quant_dot.h"

#define K 768 /* 3 super-blocks */
#define NB (K / PTI_QK_K)
#define N 37
#define MAX_M 33

static uint32_t rng = 12345u;

static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

/* Random block bytes with binary16 scales d, dmin in [2^-10, 2^-6). */
static void fill_weights(unsigned char *w, size_t bytes, size_t block)
{
    for (size_t i = 0; i < bytes; i++)
        w[i] = (unsigned char)next_u32();
    for (size_t b = 0; b < bytes / block; b++)
        for (int f = 0; f < 2; f++) {
            pti_half h = (pti_half)(0x1400 + (next_u32() & 0x0fff)); /* 2^-10 .. 2^-6 */
            memcpy(w + b * block + 2 * (size_t)f, &h, sizeof h);
        }
}

/* Code l (0 .. 31) of sub-block j of a Q4_K / Q5_K block (qh NULL for Q4_K). */
static int code_at(const uint8_t *qs, const uint8_t *qh, int j, int l)
{
    uint8_t byte = qs[32 * (j / 2) + l];
    int c = j & 1 ? byte >> 4 : byte & 0xF;
    if (qh)
        c |= ((qh[l] >> j) & 1) << 4;
    return c;
}

/* The float64 value of llama.cpp's arithmetic and the sum of its terms' magnitudes. */
static double reference(pt_dtype dt, const unsigned char *wr, const pti_block_q8_k *a, double *mag)
{
    double y = 0.0;
    *mag = 0.0;
    for (int b = 0; b < NB; b++) {
        const uint8_t *qs, *qh = NULL, *scales;
        pti_half d, dmin;
        if (dt == PT_Q5_K) {
            const pti_block_q5_k *w = (const pti_block_q5_k *)wr + b;
            qs = w->qs, qh = w->qh, scales = w->scales, d = w->d, dmin = w->dmin;
        } else {
            const pti_block_q4_k *w = (const pti_block_q4_k *)wr + b;
            qs = w->qs, scales = w->scales, d = w->d, dmin = w->dmin;
        }
        uint8_t sc[8], mn[8];
        pti_kquant_scales(scales, sc, mn);
        int64_t sumi = 0, summs = 0;
        for (int j = 0; j < 8; j++) {
            int64_t dot = 0;
            for (int l = 0; l < 32; l++)
                dot += code_at(qs, qh, j, l) * a[b].qs[32 * j + l];
            sumi += sc[j] * dot;
            summs += mn[j] * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
        }
        double t1 = (double)a[b].d * pti_h2f(d) * (double)sumi;
        double t2 = (double)a[b].d * pti_h2f(dmin) * (double)summs;
        y += t1 - t2;
        *mag += fabs(t1) + fabs(t2);
    }
    return y;
}

static void check_dtype(pt_dtype dt)
{
    pti_qgemmk_fn fn = pti_qgemmk_range_fn(dt, 1);
    if (!fn)
        skip();
    pti_qdot_fn dot = pti_quant_dot_fn(dt);
    assert_non_null(dot);
    size_t block = dt == PT_Q5_K ? sizeof(pti_block_q5_k) : sizeof(pti_block_q4_k);
    size_t wrow = NB * block, arow = NB * sizeof(pti_block_q8_k);
    unsigned char *w = malloc(N * wrow);
    pti_block_q8_k *act = malloc(MAX_M * arow);
    float *x = malloc(MAX_M * K * sizeof(float));
    float *y = malloc(MAX_M * N * sizeof(float)), *y1 = malloc(MAX_M * N * sizeof(float));
    float *ys = malloc(MAX_M * N * sizeof(float));
    assert_true(w && act && x && y && y1 && ys);
    fill_weights(w, N * wrow, block);
    for (int i = 0; i < MAX_M * K; i++) {
        x[i] = (float)((int)(next_u32() % 20001) - 10000) / 5000.0f;
        if (next_u32() % 64 == 0)
            x[i] *= 8.0f; /* a few large values: block scales differ */
    }
    for (int i = 0; i < MAX_M; i++)
        pti_quantize_row_q8_k(x + i * K, act + (size_t)i * NB, K);

    /* M = 1, row by row: the reference bits of every (activation row, weight row) */
    for (int i = 0; i < MAX_M; i++) {
        pti_qgemmk_args g = {(const char *)w,
                             wrow,
                             (const char *)(act + (size_t)i * NB),
                             arow,
                             y1 + i * N,
                             1,
                             N,
                             K,
                             NULL};
        assert_int_equal(fn(&g, 0, N), PT_OK);
        for (int j = 0; j < N; j++) {
            double mag, ref = reference(dt, w + j * wrow, act + (size_t)i * NB, &mag);
            double tol = 1e-5 * mag + 1e-6;
            float fb = dot(w + j * wrow, act + (size_t)i * NB, K);
            if (!(fabs(y1[i * N + j] - ref) <= tol) || !(fabs(fb - ref) <= tol))
                fail_msg("%s [%d, %d]: tiled %.9g, fallback %.9g, reference %.9g (tol %.3g)",
                         pt_dtype_name(dt), i, j, y1[i * N + j], fb, ref, tol);
        }
    }
    static const int MS[] = {1, 2, 3, 4, 5, 8, 17, 33};
    for (size_t mi = 0; mi < sizeof MS / sizeof MS[0]; mi++) {
        int m = MS[mi];
        pti_qgemmk_args g = {(const char *)w, wrow, (const char *)act, arow, y, m, N, K, NULL};
        memset(y, 0, MAX_M * N * sizeof(float));
        assert_int_equal(fn(&g, 0, N), PT_OK);
        if (memcmp(y, y1, (size_t)(m * N) * sizeof(float)) != 0)
            fail_msg("%s, M = %d: not the same bits as each row alone", pt_dtype_name(dt), m);
        /* the same columns in ranges that start off the tile grid */
        pti_qgemmk_args gs = g;
        gs.y = ys;
        memset(ys, 0, MAX_M * N * sizeof(float));
        assert_int_equal(fn(&gs, 0, 5), PT_OK);
        assert_int_equal(fn(&gs, 5, 22), PT_OK);
        assert_int_equal(fn(&gs, 22, N), PT_OK);
        if (memcmp(ys, y1, (size_t)(m * N) * sizeof(float)) != 0)
            fail_msg("%s, M = %d: a split range changed the bits", pt_dtype_name(dt), m);
    }
    free(w);
    free(act);
    free(x);
    free(y);
    free(y1);
    free(ys);
}

static void test_q4_k(void **state)
{
    (void)state;
    check_dtype(PT_Q4_K);
}

static void test_q5_k(void **state)
{
    (void)state;
    check_dtype(PT_Q5_K);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_q4_k, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_q5_k, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
