/* AVX2 helpers shared by the quantized dot-product kernels (quant_dot_avx2.c) and the tiled
 * GEMM/GEMV (quant_gemm_avx2.c): unpacking the 4-bit codes and the fifth bits of the 32-value
 * block formats. Include after <immintrin.h> on x86-64 only. */
#ifndef PT_CPU_QUANT_SIMD_H
#define PT_CPU_QUANT_SIMD_H

#include <stdint.h>
#include <string.h>

/* 16 packed bytes -> 32 values 0..15: the low nibbles (elements 0..15) in the low half, the
 * high nibbles (elements 16..31) in the high half. */
__attribute__((target("avx2"))) static inline __m256i pti_nibbles32(const uint8_t *p)
{
    __m128i raw = _mm_loadu_si128((const __m128i *)p);
    __m256i v = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF where bit j of the 32-bit little-endian qh is set, else 0. */
__attribute__((target("avx2"))) static inline __m256i pti_bits32(const uint8_t qh[4])
{
    uint32_t h;
    memcpy(&h, qh, sizeof h);
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), pick);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

#endif
