/* AVX-512 VNNI products with a broadcast activation operand, and the next tile's prefetch,
 * shared by the tiled K-quant kernels (quant_gemm_q4k.c, quant_gemm_q6k.c). Include after
 * <immintrin.h> on x86-64 only. */
#ifndef PT_CPU_QUANT_VNNI_H
#define PT_CPU_QUANT_VNNI_H

#include <stdint.h>

#define PTI_VNNI_INLINE                                                                            \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"),                   \
                   always_inline)) static inline

/* 4 bytes of an activation row (the operand of an embedded broadcast) */
typedef struct pti_bytes4 {
    int8_t b[4];
} pti_bytes4;

/* acc + the 4-element lane sums of u * a, u unsigned and a the 4 signed bytes at p broadcast:
 * one vpdpbusd with the broadcast embedded (inline asm: gcc emits a separate vpbroadcastd, an
 * extra instruction per product that measured 28% of the Q4_K prefill's kernel time) */
PTI_VNNI_INLINE __m512i pti_dpbusd_at(__m512i acc, __m512i u, const int8_t *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const pti_bytes4 *)p));
    return acc;
}

/* acc + the pair sums of the int16 lanes of u times the int16 pair at p, broadcast */
PTI_VNNI_INLINE __m512i pti_dpwssd_at(__m512i acc, __m512i u, const int16_t *p)
{
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const pti_bytes4 *)p));
    return acc;
}

/* Share `part` of `parts` of the cache lines of [next, next + bytes) prefetched into L2: a
 * tiled kernel spreads the next tile's prefetch over its work on this one. The M > 1 tiles read
 * 16 rows block by block (strided, not a stream the hardware prefetcher follows): without it
 * an M = 2 product of a matrix larger than the caches took 3x an M = 1 one (bench_qgemv). */
PTI_VNNI_INLINE void pti_prefetch_share(const char *next, size_t bytes, int64_t part, int64_t parts)
{
    size_t lines = (bytes + 63) / 64;
    for (size_t l = (size_t)part * lines / (size_t)parts;
         l < (size_t)(part + 1) * lines / (size_t)parts; l++)
        _mm_prefetch(next + 64 * l, _MM_HINT_T1);
}

#endif
