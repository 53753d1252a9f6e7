/* CPU kernels for the core data-movement ops: copy (strided, broadcasting, casting between
 * any two plain dtypes; transposed same-dtype copies go through cache-blocked tiles) and fill. */
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "cpu.h"

typedef struct cast_ctx {
    pt_dtype to, from;
    void (*typed)(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n); /* or NULL */
} cast_ctx;

/* Same dtype: a memcpy per contiguous run, else element by element. */
static void copy_same_loop(void *ctx, char **data, const int64_t *strides, int64_t n)
{
    size_t es = *(const size_t *)ctx;
    char *dst = data[0];
    const char *src = data[1];
    if (strides[0] == (int64_t)es && strides[1] == (int64_t)es) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    switch (es) {
    case 1:
        for (int64_t i = 0; i < n; i++)
            dst[i * strides[0]] = src[i * strides[1]];
        break;
    case 2:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * strides[0], src + i * strides[1], 2);
        break;
    case 4:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * strides[0], src + i * strides[1], 4);
        break;
    case 8:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * strides[0], src + i * strides[1], 8);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * strides[0], src + i * strides[1], es);
    }
}

static void cast_f32_from_f64(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        *(float *)(dst + i * ds) = (float)*(const double *)(src + i * ss);
}

static void cast_f64_from_f32(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        *(double *)(dst + i * ds) = *(const float *)(src + i * ss);
}

/* float32 <-> float16/bfloat16 directly (the generic path goes through double). */
#if defined(__x86_64__)
#define F16C __attribute__((target("avx2,f16c")))

/* Contiguous float16 -> float32, eight at a time; blocks holding an infinity or NaN go through
 * the scalar conversion (the hardware quiets signalling NaNs, the scalar path keeps them). */
F16C static int64_t f32_from_f16_f16c(float *dst, const uint16_t *src, int64_t n)
{
    int64_t i = 0;
    const __m128i exp_mask = _mm_set1_epi16(0x7c00);
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i special = _mm_cmpeq_epi16(_mm_and_si128(h, exp_mask), exp_mask);
        if (_mm_movemask_epi8(special))
            break;
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    return i;
}

/* Contiguous float32 -> float16 (round to nearest even, as pt_float_to_half); NaN blocks go
 * scalar (the scalar path gives the canonical quiet NaN). */
F16C static int64_t f16_from_f32_f16c(uint16_t *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            break;
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}
#endif

static void cast_f32_from_f16(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n)
{
    int64_t done = 0;
#if defined(__x86_64__)
    if (ds == 4 && ss == 2 && pti_cpu_has_f16c())
        done = f32_from_f16_f16c((float *)dst, (const uint16_t *)src, n);
#endif
    dst += done * ds;
    src += done * ss;
    n -= done;
    for (int64_t i = 0; i < n; i++)
        *(float *)(dst + i * ds) = pt_half_to_float(*(const uint16_t *)(src + i * ss));
}

static void cast_f16_from_f32(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n)
{
    int64_t done = 0;
#if defined(__x86_64__)
    if (ds == 2 && ss == 4 && pti_cpu_has_f16c())
        done = f16_from_f32_f16c((uint16_t *)dst, (const float *)src, n);
#endif
    dst += done * ds;
    src += done * ss;
    n -= done;
    for (int64_t i = 0; i < n; i++)
        *(uint16_t *)(dst + i * ds) = pt_float_to_half(*(const float *)(src + i * ss));
}

static void cast_f32_from_bf16(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t) * (const uint16_t *)(src + i * ss) << 16;
        memcpy(dst + i * ds, &u, 4);
    }
}

/* Same rounding as pt_float_to_bfloat16 (nearest even, NaN kept quiet), inlined. */
static void cast_bf16_from_f32(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, src + i * ss, 4);
        uint16_t r = (x & 0x7fffffffu) > 0x7f800000u
                         ? (uint16_t)((x >> 16) | 0x40u)
                         : (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
        *(uint16_t *)(dst + i * ds) = r;
    }
}

/* Integer sources to float or (non-bool) integer destinations: a plain C conversion is what the
 * generic path computes (int -> double is exact below 2^53; int64 -> float32 rounds once, as
 * PyTorch's static_cast), without the two per-element dtype switches. */
#define DEFINE_INT_CAST(name, TD, TS)                                                              \
    static void name(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n)                \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            TS v;                                                                                  \
            memcpy(&v, src + i * ss, sizeof v);                                                    \
            TD r = (TD)v;                                                                          \
            memcpy(dst + i * ds, &r, sizeof r);                                                    \
        }                                                                                          \
    }
#define DEFINE_INT_CASTS_TO(tn, TD)                                                                \
    DEFINE_INT_CAST(cast_##tn##_from_i64, TD, int64_t)                                             \
    DEFINE_INT_CAST(cast_##tn##_from_i32, TD, int32_t)                                             \
    DEFINE_INT_CAST(cast_##tn##_from_i16, TD, int16_t)                                             \
    DEFINE_INT_CAST(cast_##tn##_from_i8, TD, int8_t)                                               \
    DEFINE_INT_CAST(cast_##tn##_from_u8, TD, uint8_t)
DEFINE_INT_CASTS_TO(f32, float)
DEFINE_INT_CASTS_TO(f64, double)
DEFINE_INT_CASTS_TO(i64, int64_t)
DEFINE_INT_CASTS_TO(i32, int32_t)
DEFINE_INT_CASTS_TO(i16, int16_t)
DEFINE_INT_CASTS_TO(i8, int8_t)
DEFINE_INT_CASTS_TO(u8, uint8_t)
#undef DEFINE_INT_CASTS_TO
#undef DEFINE_INT_CAST

typedef void (*cast_fn)(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n);

/* The typed loop for an integer source, or NULL (bool and half types take the generic path). */
static cast_fn int_cast_for(pt_dtype to, pt_dtype from)
{
#define ROW(tn)                                                                                    \
    {                                                                                              \
        cast_##tn##_from_i64, cast_##tn##_from_i32, cast_##tn##_from_i16, cast_##tn##_from_i8,     \
            cast_##tn##_from_u8                                                                    \
    }
    static const cast_fn table[7][5] = {ROW(f32), ROW(f64), ROW(i64), ROW(i32),
                                        ROW(i16), ROW(i8),  ROW(u8)};
#undef ROW
    int col, row;
    switch (from) {
    case PT_INT64: col = 0; break;
    case PT_INT32: col = 1; break;
    case PT_INT16: col = 2; break;
    case PT_INT8: col = 3; break;
    case PT_UINT8: col = 4; break;
    default: return NULL;
    }
    switch (to) {
    case PT_FLOAT32: row = 0; break;
    case PT_FLOAT64: row = 1; break;
    case PT_INT64: row = 2; break;
    case PT_INT32: row = 3; break;
    case PT_INT16: row = 4; break;
    case PT_INT8: row = 5; break;
    case PT_UINT8: row = 6; break;
    default: return NULL;
    }
    return table[row][col];
}

static void cast_loop(void *arg, char **data, const int64_t *strides, int64_t n)
{
    const cast_ctx *c = arg;
    char *dst = data[0];
    const char *src = data[1];
    int64_t ds = strides[0], ss = strides[1];
    if (c->typed) {
        c->typed(dst, ds, src, ss, n);
    } else if (c->to == PT_FLOAT32 && c->from == PT_FLOAT64) {
        cast_f32_from_f64(dst, ds, src, ss, n);
    } else if (c->to == PT_FLOAT64 && c->from == PT_FLOAT32) {
        cast_f64_from_f32(dst, ds, src, ss, n);
    } else if (c->to == PT_FLOAT32 && c->from == PT_FLOAT16) {
        cast_f32_from_f16(dst, ds, src, ss, n);
    } else if (c->to == PT_FLOAT16 && c->from == PT_FLOAT32) {
        cast_f16_from_f32(dst, ds, src, ss, n);
    } else if (c->to == PT_FLOAT32 && c->from == PT_BFLOAT16) {
        cast_f32_from_bf16(dst, ds, src, ss, n);
    } else if (c->to == PT_BFLOAT16 && c->from == PT_FLOAT32) {
        cast_bf16_from_f32(dst, ds, src, ss, n);
    } else if (!pti_dtypes[c->to].is_floating && !pti_dtypes[c->from].is_floating) {
        for (int64_t i = 0; i < n; i++) /* int/bool to int/bool: exact through int64 */
            pti_store_i64(dst + i * ds, c->to, pti_load_i64(src + i * ss, c->from));
    } else {
        for (int64_t i = 0; i < n; i++)
            pti_store_f64(dst + i * ds, c->to, pti_load_f64(src + i * ss, c->from));
    }
}

/* ---- tiled transposed copies ---------------------------------------------------------------- */

/* A same-dtype copy where dim a of the iterator is unit-stride in dst and dim b (another dim)
 * is unit-stride in src: walked in bands of TB positions along b, each band in tiles of 8
 * along a, so both sides touch whole cache lines instead of one element per line. The other
 * dims are an outer loop (batched transposes). */
#define TB 16 /* band height along b: a whole 64-byte src line of float32 */
#define SB 64 /* bands are grouped into superbands of SB along b (the unit of threading) */
/* ... walked in blocks of BA along a, so one block's lines and pages stay cached */
#define BA 128

typedef struct transpose_job {
    char *dst;
    const char *src;
    int64_t es;
    int64_t na, nb;   /* sizes of the dst-contiguous dim a and the src-contiguous dim b */
    int64_t dsb, ssa; /* dst byte stride along b, src byte stride along a */
    int64_t nbands;   /* superbands of SB along b, per outer position */
    int nouter;       /* remaining dims, innermost first */
    int64_t oshape[PT_MAX_DIMS], odst[PT_MAX_DIMS], osrc[PT_MAX_DIMS];
} transpose_job;

/* dst[ia*es + ib*dsb] = src[ia*ssa + ib*es] for ia < h_a, ib < h_b, elements of type T. */
#define DEFINE_TILE(name, T)                                                                       \
    static void name(char *dst, const char *src, int64_t dsb, int64_t ssa, int64_t ha, int64_t hb) \
    {                                                                                              \
        for (int64_t ib = 0; ib < hb; ib++) {                                                      \
            T *d = (T *)(dst + ib * dsb);                                                          \
            const char *s = src + ib * (int64_t)sizeof(T);                                         \
            for (int64_t ia = 0; ia < ha; ia++)                                                    \
                memcpy(&d[ia], s + ia * ssa, sizeof(T));                                           \
        }                                                                                          \
    }
DEFINE_TILE(tile_u8, uint8_t)
DEFINE_TILE(tile_u16, uint16_t)
DEFINE_TILE(tile_u32, uint32_t)
DEFINE_TILE(tile_u64, uint64_t)
#undef DEFINE_TILE

typedef void (*tile_fn)(char *, const char *, int64_t, int64_t, int64_t, int64_t);

static tile_fn tile_for(int64_t es)
{
    switch (es) {
    case 1: return tile_u8;
    case 2: return tile_u16;
    case 4: return tile_u32;
    default: return tile_u64;
    }
}

/* One band [b0, b0+hb) of one outer position with the portable tiles. */
static void band_scalar(const transpose_job *j, char *dst, const char *src, int64_t hb, int64_t na)
{
    tile_fn tile = tile_for(j->es);
    for (int64_t a0 = 0; a0 < na; a0 += 8) {
        int64_t ha = na - a0 < 8 ? na - a0 : 8;
        tile(dst + a0 * j->es, src + a0 * j->ssa, j->dsb, j->ssa, ha, hb);
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* 8x8 float32 tile: 8 src rows (consecutive b) in, 8 dst rows (consecutive a) out. */
__attribute__((target("avx2,fma"))) static inline void tile8x8_f32(char *dst, const char *src,
                                                                   int64_t dsb, int64_t ssa)
{
    __m256 r0 = _mm256_loadu_ps((const float *)(src + 0 * ssa));
    __m256 r1 = _mm256_loadu_ps((const float *)(src + 1 * ssa));
    __m256 r2 = _mm256_loadu_ps((const float *)(src + 2 * ssa));
    __m256 r3 = _mm256_loadu_ps((const float *)(src + 3 * ssa));
    __m256 r4 = _mm256_loadu_ps((const float *)(src + 4 * ssa));
    __m256 r5 = _mm256_loadu_ps((const float *)(src + 5 * ssa));
    __m256 r6 = _mm256_loadu_ps((const float *)(src + 6 * ssa));
    __m256 r7 = _mm256_loadu_ps((const float *)(src + 7 * ssa));
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    _mm256_storeu_ps((float *)(dst + 0 * dsb), _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps((float *)(dst + 1 * dsb), _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps((float *)(dst + 2 * dsb), _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps((float *)(dst + 3 * dsb), _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps((float *)(dst + 4 * dsb), _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps((float *)(dst + 5 * dsb), _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps((float *)(dst + 6 * dsb), _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps((float *)(dst + 7 * dsb), _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* 4x4 8-byte tile (bits moved as doubles). */
__attribute__((target("avx2,fma"))) static inline void tile4x4_f64(char *dst, const char *src,
                                                                   int64_t dsb, int64_t ssa)
{
    __m256d r0 = _mm256_loadu_pd((const double *)(src + 0 * ssa));
    __m256d r1 = _mm256_loadu_pd((const double *)(src + 1 * ssa));
    __m256d r2 = _mm256_loadu_pd((const double *)(src + 2 * ssa));
    __m256d r3 = _mm256_loadu_pd((const double *)(src + 3 * ssa));
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd((double *)(dst + 0 * dsb), _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd((double *)(dst + 1 * dsb), _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd((double *)(dst + 2 * dsb), _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd((double *)(dst + 3 * dsb), _mm256_permute2f128_pd(t1, t3, 0x31));
}

/* One band with in-register tiles for 4- and 8-byte elements, two tiles along a at a time so
 * every dst row gets a whole 64-byte line per step (dst rows of a power-of-two size alias in
 * L1, half-lines would be evicted before their second half arrives); partial tiles go scalar. */
__attribute__((target("avx2,fma"))) static void band_avx2(const transpose_job *j, char *dst,
                                                          const char *src, int64_t hb, int64_t na)
{
    int64_t es = j->es, dsb = j->dsb, ssa = j->ssa;
    int64_t t = es == 4 ? 8 : 4; /* tile edge */
    int64_t hb_full = hb - hb % t, na_full = na - na % (2 * t);
    int64_t a0 = 0;
    for (; a0 < na_full; a0 += 2 * t) {
        char *d = dst + a0 * es;
        const char *s = src + a0 * ssa;
        for (int64_t b0 = 0; b0 < hb_full; b0 += t) {
            if (es == 4) {
                tile8x8_f32(d + b0 * dsb, s + b0 * 4, dsb, ssa);
                tile8x8_f32(d + b0 * dsb + 32, s + b0 * 4 + 8 * ssa, dsb, ssa);
            } else {
                tile4x4_f64(d + b0 * dsb, s + b0 * 8, dsb, ssa);
                tile4x4_f64(d + b0 * dsb + 32, s + b0 * 8 + 4 * ssa, dsb, ssa);
            }
        }
        if (hb_full < hb)
            tile_for(es)(d + hb_full * dsb, s + hb_full * es, dsb, ssa, 2 * t, hb - hb_full);
    }
    if (a0 < na)
        tile_for(es)(dst + a0 * es, src + a0 * ssa, dsb, ssa, na - a0, hb);
}
#endif

static void transpose_range(void *arg, int64_t begin, int64_t end)
{
    const transpose_job *j = arg;
#if defined(__x86_64__) || defined(__i386__)
    bool vec = (j->es == 4 || j->es == 8) && pti_cpu_has_avx2();
#endif
    for (int64_t item = begin; item < end; item++) {
        int64_t o = item / j->nbands, sb0 = (item % j->nbands) * SB;
        char *dst = j->dst;
        const char *src = j->src;
        for (int d = 0; d < j->nouter; d++) {
            int64_t i = o % j->oshape[d];
            o /= j->oshape[d];
            dst += i * j->odst[d];
            src += i * j->osrc[d];
        }
        int64_t sb_end = j->nb - sb0 < SB ? j->nb : sb0 + SB;
        for (int64_t a0 = 0; a0 < j->na; a0 += BA) {
            int64_t na = j->na - a0 < BA ? j->na - a0 : BA;
            for (int64_t b0 = sb0; b0 < sb_end; b0 += TB) {
                char *d = dst + b0 * j->dsb + a0 * j->es;
                const char *s = src + b0 * j->es + a0 * j->ssa;
                int64_t hb = sb_end - b0 < TB ? sb_end - b0 : TB;
#if defined(__x86_64__) || defined(__i386__)
                if (vec) {
                    band_avx2(j, d, s, hb, na);
                    continue;
                }
#endif
                band_scalar(j, d, s, hb, na);
            }
        }
    }
}

/* Runs the tiled path when the copy is a transpose (see transpose_job); false otherwise. */
static bool try_transpose_copy(const pti_iter *it, int64_t es)
{
    if (it->ndim < 2 || (es != 1 && es != 2 && es != 4 && es != 8))
        return false;
    int a = -1, b = -1;
    for (int d = 0; d < it->ndim; d++) {
        if (it->strides[d][0] == es && a < 0)
            a = d;
        if (it->strides[d][1] == es && b < 0)
            b = d;
    }
    if (a < 0 || b < 0 || a == b || it->shape[a] < 8 || it->shape[b] < 8)
        return false;
    transpose_job j = {.dst = it->data[0],
                       .src = it->data[1],
                       .es = es,
                       .na = it->shape[a],
                       .nb = it->shape[b],
                       .dsb = it->strides[b][0],
                       .ssa = it->strides[a][1]};
    j.nbands = (j.nb + SB - 1) / SB;
    j.nouter = 0;
    int64_t outer = 1;
    for (int d = 0; d < it->ndim; d++) {
        if (d == a || d == b)
            continue;
        j.oshape[j.nouter] = it->shape[d];
        j.odst[j.nouter] = it->strides[d][0];
        j.osrc[j.nouter] = it->strides[d][1];
        j.nouter++;
        outer *= it->shape[d];
    }
    int64_t band_elems = SB * j.na;
    pti_parallel_for(outer * j.nbands, PTI_GRAIN_ELEMENTWISE / band_elems + 1, transpose_range, &j);
    return true;
}
#undef TB
#undef SB
#undef BA

static pt_status cpu_copy(const pti_call *c)
{
    pt_tensor *dst = c->out[0];
    const pt_tensor *src = c->in[0];
    const pt_tensor *ops[2] = {dst, src};
    pti_iter it;
    pti_iter_init(&it, 2, ops);
    if (dst->dtype == src->dtype) {
        size_t es = pti_dtypes[dst->dtype].size;
        if (try_transpose_copy(&it, (int64_t)es))
            return PT_OK;
        pti_iter_for_each(&it, PTI_GRAIN_ELEMENTWISE * 4, copy_same_loop, &es);
    } else {
        cast_ctx ctx = {dst->dtype, src->dtype, int_cast_for(dst->dtype, src->dtype)};
        pti_iter_for_each(&it, PTI_GRAIN_ELEMENTWISE, cast_loop, &ctx);
    }
    return PT_OK;
}

/* fill: the value is encoded once into an element, then replicated. */
static void fill_loop(void *arg, char **data, const int64_t *strides, int64_t n)
{
    const unsigned char *elem = arg;
    size_t es = elem[15];
    char *dst = data[0];
    if (es == 4 && strides[0] == 4) {
        uint32_t v;
        memcpy(&v, elem, 4);
        uint32_t *p = (uint32_t *)dst;
        for (int64_t i = 0; i < n; i++)
            p[i] = v;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + i * strides[0], elem, es);
}

static pt_status cpu_fill(const pti_call *c)
{
    pt_tensor *t = c->out[0];
    unsigned char elem[16] = {0};
    pti_store_f64(elem, t->dtype, c->scalar[0]);
    elem[15] = (unsigned char)pti_dtypes[t->dtype].size;
    const pt_tensor *ops[1] = {t};
    pti_iter it;
    pti_iter_init(&it, 1, ops);
    pti_iter_for_each(&it, PTI_GRAIN_ELEMENTWISE * 4, fill_loop, elem);
    return PT_OK;
}

void pti_cpu_register_core(pti_kernel *table)
{
    table[PTI_OP_copy] = cpu_copy;
    table[PTI_OP_fill] = cpu_fill;
}
