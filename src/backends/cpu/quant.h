/* GGUF / ggml block formats on the CPU: the packed block structs (formats.md 2.3; every field
 * little-endian, no padding), the scalar dequantizer of every block dtype, and the quantizers
 * and dot products the quantized matmul kernels use (activations are quantized per block to 8
 * bits -- Q8_0 for the 32-element types, Q8_K for the K-quants -- as llama.cpp does). */
#ifndef PT_CPU_QUANT_H
#define PT_CPU_QUANT_H

#include "../../core/internal.h"

#define PTI_QK 32    /* elements per block of Q4_0 ... Q8_1 */
#define PTI_QK_K 256 /* elements per super-block of the K-quants */

typedef uint16_t pti_half; /* IEEE binary16 bits (pt_half_to_float converts) */

typedef struct {
    pti_half d;
    uint8_t qs[PTI_QK / 2];
} pti_block_q4_0;
typedef struct {
    pti_half d, m;
    uint8_t qs[PTI_QK / 2];
} pti_block_q4_1;
typedef struct {
    pti_half d;
    uint8_t qh[4];
    uint8_t qs[PTI_QK / 2];
} pti_block_q5_0;
typedef struct {
    pti_half d, m;
    uint8_t qh[4];
    uint8_t qs[PTI_QK / 2];
} pti_block_q5_1;
typedef struct {
    pti_half d;
    int8_t qs[PTI_QK];
} pti_block_q8_0;
typedef struct {
    pti_half d, s;
    int8_t qs[PTI_QK];
} pti_block_q8_1;
typedef struct {
    uint8_t scales[PTI_QK_K / 16];
    uint8_t qs[PTI_QK_K / 4];
    pti_half d, dmin;
} pti_block_q2_k;
typedef struct {
    uint8_t hmask[PTI_QK_K / 8];
    uint8_t qs[PTI_QK_K / 4];
    uint8_t scales[12];
    pti_half d;
} pti_block_q3_k;
typedef struct {
    pti_half d, dmin;
    uint8_t scales[12];
    uint8_t qs[PTI_QK_K / 2];
} pti_block_q4_k;
typedef struct {
    pti_half d, dmin;
    uint8_t scales[12];
    uint8_t qh[PTI_QK_K / 8];
    uint8_t qs[PTI_QK_K / 2];
} pti_block_q5_k;
typedef struct {
    uint8_t ql[PTI_QK_K / 2];
    uint8_t qh[PTI_QK_K / 4];
    int8_t scales[PTI_QK_K / 16];
    pti_half d;
} pti_block_q6_k;
typedef struct {
    float d;
    int8_t qs[PTI_QK_K];
    int16_t bsums[PTI_QK_K / 16];
} pti_block_q8_k;

_Static_assert(sizeof(pti_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(pti_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(pti_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(pti_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(pti_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(pti_block_q8_1) == 36, "q8_1 block");
_Static_assert(sizeof(pti_block_q2_k) == 84, "q2_k block");
_Static_assert(sizeof(pti_block_q3_k) == 110, "q3_k block");
_Static_assert(sizeof(pti_block_q4_k) == 144, "q4_k block");
_Static_assert(sizeof(pti_block_q5_k) == 176, "q5_k block");
_Static_assert(sizeof(pti_block_q6_k) == 210, "q6_k block");
_Static_assert(sizeof(pti_block_q8_k) == 292, "q8_k block");

/* ---- dequantization (quant_dequant.c): the scalar reference, bit-exact with gguf-py ---------- */

/* Dequantizes n elements (a whole number of blocks of dt) starting at `blocks` into out.
 * dt is a block dtype, PT_FLOAT16, PT_BFLOAT16 or PT_FLOAT32. */
void pti_dequantize_row(pt_dtype dt, const void *blocks, float *out, int64_t n);

/* ---- quantized dot products (quant_dot*.c) ------------------------------------------------ */

/* The activation block type a weight dtype's dot product takes: PT_Q8_0 for Q4_0 ... Q8_0,
 * PT_Q8_K for the K-quants (and Q8_K itself). */
pt_dtype pti_quant_act_dtype(pt_dtype weight);
/* Quantizes n floats (a multiple of the block size) to Q8_0 / Q8_K blocks, as llama.cpp's
 * quantize_row_q8_0 / quantize_row_q8_K do. */
void pti_quantize_row_q8_0(const float *x, pti_block_q8_0 *y, int64_t n);
/* Q8_0's values plus s = float16(d * sum(qs)) with d unrounded (llama.cpp's Q8_1). */
void pti_quantize_row_q8_1(const float *x, pti_block_q8_1 *y, int64_t n);
void pti_quantize_row_q8_k(const float *x, pti_block_q8_k *y, int64_t n);

/* Fills the quant_linear slot (quant_matmul.c); called by pti_cpu_register_linalg. */
void pti_cpu_register_quant_linear(pti_kernel *table);

#endif
