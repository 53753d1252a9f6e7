/* The tiled 32-value kernel's activation packing (pti_qgemm32_pack_act, vectorized): its codes,
 * scales and code sums must be exactly pti_quantize_row_q8_0's (llama.cpp's Q8_0 values), its
 * Q8_1-style sums float16(amax / 127 * sum) -- on random rows, exact rounding ties, zero blocks,
 * blocks with infinities, NaN or subnormal maxima. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "backends/cpu/quant_dot.h"

#define K 256
#define NB (K / PTI_QK)

static void check_row(const float *x)
{
    if (!pti_qgemm32_supported(PT_Q8_0))
        skip();
    size_t bytes = pti_qgemm32_act_row_bytes(K);
    char *packed = calloc(1, bytes);
    assert_non_null(packed);
    pti_qgemm32_pack_act(x, packed, K);
    pti_block_q8_0 ref[NB];
    pti_quantize_row_q8_0(x, ref, K);
    /* layout: codes, float scales, float Q8_1 sums, int32 code sums (8-block padded) */
    int64_t nbp = (NB + 7) / 8 * 8;
    const int8_t *qs = (const int8_t *)packed;
    const float *da = (const float *)(packed + nbp * PTI_QK), *sa = da + nbp;
    const int32_t *asum = (const int32_t *)(sa + nbp);
    for (int b = 0; b < NB; b++) {
        assert_memory_equal(qs + b * PTI_QK, ref[b].qs, PTI_QK);
        float d = pti_h2f(ref[b].d);
        assert_memory_equal(&da[b], &d, sizeof d);
        int32_t s = 0;
        float amax = 0.0f;
        for (int j = 0; j < PTI_QK; j++) {
            s += ref[b].qs[j];
            amax = fmaxf(amax, fabsf(x[b * PTI_QK + j]));
        }
        assert_int_equal(asum[b], s);
        float want = pti_h2f(pt_float_to_half(amax / 127.0f * (float)s));
        assert_memory_equal(&sa[b], &want, sizeof want);
    }
    free(packed);
}

static void test_random_rows(void **state)
{
    (void)state;
    srand(7);
    float x[K];
    for (int rep = 0; rep < 200; rep++) {
        float scale = powf(10.0f, (float)(rand() % 9 - 4));
        for (int i = 0; i < K; i++)
            x[i] = scale * ((float)rand() / (float)RAND_MAX - 0.5f);
        check_row(x);
    }
}

/* amax 127 makes id = 1: every x + 0.5 is a tie, rounded to even */
static void test_ties_zero_inf_nan(void **state)
{
    (void)state;
    float x[K];
    for (int i = 0; i < K; i++)
        x[i] = (float)(i % 64) - 31.5f;
    for (int b = 0; b < NB; b++)
        x[b * PTI_QK] = 127.0f;
    memset(x + 2 * PTI_QK, 0, PTI_QK * sizeof(float)); /* block 2 all zero */
    x[3 * PTI_QK + 5] = INFINITY;                      /* block 3: amax inf, id 0 */
    x[4 * PTI_QK + 9] = NAN;                           /* block 4: the scalar fallback */
    x[5 * PTI_QK + 1] = -0.0f;
    for (int j = 0; j < PTI_QK; j++) /* block 6: 127 / amax overflows */
        x[6 * PTI_QK + j] = (float)(j % 3) * 1e-39f;
    check_row(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_rows),
        cmocka_unit_test(test_ties_zero_inf_nan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
