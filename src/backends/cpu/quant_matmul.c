/* CPU kernel of quant_linear (front-end: pt_linear / pt_matmul in src/ops/linalg_linear.c):
 * y[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) with W in a GGUF block dtype (or F16/BF16/F32)
 * read in place, block by block.
 *
 * Design: the M activation rows are quantized once (Q8_0, Q8_1 or Q8_K, pti_quant_act_dtype) into a
 * scratch buffer from the allocator cache; then the N output rows are split across the thread
 * pool, and each thread computes every one of the M rows for its range of N, so each weight
 * byte comes from memory once. M == 1 is the decode GEMV, bound by weight bandwidth; M = 2 .. 16
 * the server's batched decode, where the tiled kernel's per-block float work shared by 8 weight
 * rows makes a step of M sequences cost far less than M steps.
 *
 * Three kernels. The K-quants with a tiled kernel (pti_qgemmk_range_fn, on an AVX-512 VNNI
 * CPU: Q4_K and Q5_K in quant_gemm_q4k.c for every M, 1 included; Q6_K in quant_gemm_q6k.c for
 * M >= 2) take it: 16 weight rows decoded once per tile into zmm int32 lanes, Q8_K activations
 * as they are (Q6_K: repacked once per product, pti_qgemmk_pack_act). The 32-value formats (Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0) on an AVX2 CPU go to the tiled kernel of quant_gemm_avx2.c for every M, 1
 * included: its own activation layout; 8 weight rows decoded once per tile into an interleaved
 * layout whose int32 lanes are the 8 rows, then register tiles of 8 weight rows x up to 4
 * activation rows; AVX512-VNNI where present. The rest
 * -- Q6_K decode (its 512-bit row kernel on an AVX-512 VNNI CPU), the K-quants without AVX-512
 * VNNI, F16/BF16/F32, and everything on the scalar path -- take ROWS_PER_TILE weight rows at a time
 * (a few KB, kept in L1/L2 while all M activation rows stream past) through
 * pti_quant_dot_rows_wide_fn (8 activation rows per weight-block decode: the K-quants on an AVX-512
 * CPU, whose 32 vector registers hold the 8 rows' sums), then pti_quant_dot_rows_fn (each weight
 * block unpacked once for PTI_QDOT_ROWS activation rows) where the dtype has them, and row by row
 * for the rest. In every case a row's result is the same bits whatever M. */
#include "cpu.h"
#include "quant_dot.h"

/* weight rows per tile in the M > 1 loop */
#define ROWS_PER_TILE 16
/* multiply-adds below which a parallel chunk is not worth waking a thread */
#define MIN_WORK_PER_CHUNK 32768

typedef struct qlinear_ctx {
    pti_qgemm32_args g; /* g.w set: the tiled kernel (quant_gemm_avx2.c) */
    pti_qgemmk_fn kfn;  /* set: the tiled K-quant kernel (pti_qgemmk_range_fn) on kg */
    pti_qgemmk_args kg;
    pt_status status; /* its result (PT_ERR_OOM only), set by the chunk that failed */
    pti_qdot_fn dot;
    pti_qdot_rows_fn dot_rows; /* NULL: row by row */
    pti_qdot_rows_fn dot_wide; /* PTI_QDOT_ROWS_WIDE rows at once; NULL: none */
    const char *w;             /* weight row 0 */
    size_t w_row_bytes;        /* bytes of one weight row */
    const char *act;           /* quantized (or float) activation row 0 */
    size_t act_row_bytes;
    const float *bias; /* [N] or NULL */
    float *y;          /* [M, N] */
    int64_t m, n, k;
} qlinear_ctx;

/* Output columns of weight tiles [t0, t1) of every row of y through the tiled kernel in use:
 * the K-quants' (c->kfn, PTI_QGEMMK_TILE_N rows a tile) or the 32-value formats'
 * (PTI_QGEMM32_TILE_N); then the bias. */
static void qlinear_tiled(void *vctx, int64_t t0, int64_t t1)
{
    qlinear_ctx *c = vctx;
    int64_t tile = c->kfn ? PTI_QGEMMK_TILE_N : PTI_QGEMM32_TILE_N;
    int64_t n0 = t0 * tile, n1 = t1 * tile;
    if (n1 > c->n)
        n1 = c->n;
    pt_status st = c->kfn ? c->kfn(&c->kg, n0, n1) : pti_qgemm32_range(&c->g, n0, n1);
    if (st != PT_OK) {
        c->status = PT_ERR_OOM;
        return;
    }
    if (c->bias)
        for (int64_t i = 0; i < c->m; i++)
            for (int64_t j = n0; j < n1; j++)
                c->y[i * c->n + j] += c->bias[j];
}

/* Output columns [n0, n1) of every row of y. */
static void qlinear_rows(void *vctx, int64_t n0, int64_t n1)
{
    const qlinear_ctx *c = vctx;
    for (int64_t t0 = n0; t0 < n1; t0 += ROWS_PER_TILE) {
        int64_t t1 = t0 + ROWS_PER_TILE < n1 ? t0 + ROWS_PER_TILE : n1;
        int64_t i = 0;
        if (c->dot_wide) {
            for (; i + PTI_QDOT_ROWS_WIDE <= c->m; i += PTI_QDOT_ROWS_WIDE) {
                const char *a = c->act + (size_t)i * c->act_row_bytes;
                for (int64_t j = t0; j < t1; j++) {
                    float v[PTI_QDOT_ROWS_WIDE];
                    c->dot_wide(c->w + (size_t)j * c->w_row_bytes, a, c->act_row_bytes, c->k, v);
                    for (int r = 0; r < PTI_QDOT_ROWS_WIDE; r++)
                        c->y[(i + r) * c->n + j] = c->bias ? v[r] + c->bias[j] : v[r];
                }
            }
        }
        if (c->dot_rows) {
            for (; i + PTI_QDOT_ROWS <= c->m; i += PTI_QDOT_ROWS) {
                const char *a = c->act + (size_t)i * c->act_row_bytes;
                for (int64_t j = t0; j < t1; j++) {
                    float v[PTI_QDOT_ROWS];
                    c->dot_rows(c->w + (size_t)j * c->w_row_bytes, a, c->act_row_bytes, c->k, v);
                    for (int r = 0; r < PTI_QDOT_ROWS; r++)
                        c->y[(i + r) * c->n + j] = c->bias ? v[r] + c->bias[j] : v[r];
                }
            }
        }
        for (; i < c->m; i++) {
            const char *a = c->act + (size_t)i * c->act_row_bytes;
            float *yr = c->y + i * c->n;
            for (int64_t j = t0; j < t1; j++) {
                float v = c->dot(c->w + (size_t)j * c->w_row_bytes, a, c->k);
                yr[j] = c->bias ? v + c->bias[j] : v;
            }
        }
    }
}

typedef struct quantize_ctx {
    bool packed; /* pti_qgemm32_pack_act's layout */
    pt_dtype adt;
    const float *x;
    char *act;
    size_t act_row_bytes;
    int64_t k;
} quantize_ctx;

static void quantize_rows(void *vctx, int64_t r0, int64_t r1)
{
    const quantize_ctx *c = vctx;
    for (int64_t i = r0; i < r1; i++) {
        const float *xr = c->x + i * c->k;
        void *dst = c->act + (size_t)i * c->act_row_bytes;
        if (c->packed)
            pti_qgemm32_pack_act(xr, dst, c->k);
        else if (c->adt == PT_Q8_0)
            pti_quantize_row_q8_0(xr, dst, c->k);
        else if (c->adt == PT_Q8_1)
            pti_quantize_row_q8_1(xr, dst, c->k);
        else
            pti_quantize_row_q8_k(xr, dst, c->k);
    }
}

/* Row groups [g0, g1) of the tiled K-quant kernel's activations into its own layout; the
 * destination is passed in act_packed, set before the kernel runs. */
static void pack_act_groups(void *vctx, int64_t g0, int64_t g1)
{
    const pti_qgemmk_args *g = vctx;
    pti_qgemmk_pack_act(g, g0, g1, (char *)g->act_packed);
}

/* The weight's first byte: block tensors count their offset in elements, a whole number of
 * blocks (the front-end checked). */
static const char *weight_data(const pt_tensor *w)
{
    const pti_dtype_info *di = &pti_dtypes[w->dtype];
    return (const char *)w->storage->data + (w->offset / di->block_size) * (int64_t)di->size;
}

/* in[0] x float32 [M, K] contiguous; in[1] W [N, K] contiguous (block dtype, F16, BF16, F32;
 * K a multiple of the block size); in[2] bias float32 [N] contiguous or NULL;
 * out[0] y float32 [M, N] contiguous. */
static pt_status cpu_quant_linear(const pti_call *c)
{
    const pt_tensor *x = c->in[0], *w = c->in[1], *bias = c->n_in > 2 ? c->in[2] : NULL;
    pt_tensor *y = c->out[0];
    int64_t m = x->shape[0], k = w->shape[1], n = w->shape[0];
    pti_qdot_fn dot = pti_quant_dot_fn(w->dtype);
    if (!dot)
        return pti_error(PT_ERR_UNSUPPORTED, "quant_linear: no CPU kernel for weight dtype %s",
                         pt_dtype_name(w->dtype));
    const pti_dtype_info *wi = &pti_dtypes[w->dtype];
    pt_dtype adt = pti_quant_act_dtype(w->dtype);
    const pti_dtype_info *ai = &pti_dtypes[adt];
    qlinear_ctx q = {
        .dot = dot,
        .dot_rows = m > 1 ? pti_quant_dot_rows_fn(w->dtype) : NULL,
        .dot_wide = m >= PTI_QDOT_ROWS_WIDE ? pti_quant_dot_rows_wide_fn(w->dtype) : NULL,
        .w = weight_data(w),
        .w_row_bytes = (size_t)(k / wi->block_size) * wi->size,
        .act_row_bytes = (size_t)(k / ai->block_size) * ai->size,
        .bias = bias ? pti_data(bias) : NULL,
        .y = pti_data(y),
        .m = m,
        .n = n,
        .k = k,
    };
    bool tiled = pti_qgemm32_supported(w->dtype);
    if (tiled) {
        q.act_row_bytes = pti_qgemm32_act_row_bytes(k);
        q.g = (pti_qgemm32_args){.dt = w->dtype,
                                 .w = q.w,
                                 .w_row_bytes = q.w_row_bytes,
                                 .act_row_bytes = q.act_row_bytes,
                                 .y = q.y,
                                 .m = m,
                                 .n = n,
                                 .k = k};
    }
    q.kfn = tiled || adt != PT_Q8_K ? NULL : pti_qgemmk_range_fn(w->dtype, m);
    q.kg = (pti_qgemmk_args){.w = q.w,
                             .w_row_bytes = q.w_row_bytes,
                             .act_row_bytes = q.act_row_bytes,
                             .y = q.y,
                             .m = m,
                             .n = n,
                             .k = k};
    char *scratch = NULL;
    size_t scratch_bytes = (size_t)m * q.act_row_bytes;
    if (adt == PT_FLOAT32) {
        q.act = pti_data(x);
    } else {
        scratch = pti_cpu_alloc(scratch_bytes ? scratch_bytes : 1);
        if (!scratch)
            return pti_error(PT_ERR_OOM, "quant_linear: out of memory for %lld quantized rows",
                             (long long)m);
        quantize_ctx qc = {tiled, adt, pti_data(x), scratch, q.act_row_bytes, k};
        pti_parallel_for(m, k > 0 ? 1 + MIN_WORK_PER_CHUNK / k : m, quantize_rows, &qc);
        q.act = scratch;
        q.g.act = scratch;
        q.kg.act = scratch;
    }
    char *packed = NULL;
    size_t packed_bytes = q.kfn ? pti_qgemmk_packed_bytes(w->dtype, m, k) : 0;
    if (packed_bytes) {
        packed = pti_cpu_alloc(packed_bytes);
        if (!packed) {
            pti_cpu_free(scratch, scratch_bytes ? scratch_bytes : 1);
            return pti_error(PT_ERR_OOM, "quant_linear: out of memory for %lld packed rows",
                             (long long)m);
        }
        q.kg.act_packed = packed;
        pti_parallel_for((m + PTI_QGEMMK_PACK_ROWS - 1) / PTI_QGEMMK_PACK_ROWS,
                         1 + MIN_WORK_PER_CHUNK / (PTI_QGEMMK_PACK_ROWS * k), pack_act_groups,
                         &q.kg);
    }
    int64_t per_row = m * k > 0 ? m * k : 1;
    if (q.kfn || tiled) {
        int64_t tile = q.kfn ? PTI_QGEMMK_TILE_N : PTI_QGEMM32_TILE_N;
        pti_parallel_for_balanced((n + tile - 1) / tile, 1 + MIN_WORK_PER_CHUNK / (per_row * tile),
                                  qlinear_tiled, &q);
    } else {
        pti_parallel_for_balanced(n, 1 + MIN_WORK_PER_CHUNK / per_row, qlinear_rows, &q);
    }
    if (packed)
        pti_cpu_free(packed, packed_bytes);
    if (scratch)
        pti_cpu_free(scratch, scratch_bytes ? scratch_bytes : 1);
    if (q.status != PT_OK)
        return pti_error(PT_ERR_OOM, "quant_linear: out of memory for a weight tile");
    return PT_OK;
}

void pti_cpu_register_quant_linear(pti_kernel *table)
{
    table[PTI_OP_quant_linear] = cpu_quant_linear;
}
