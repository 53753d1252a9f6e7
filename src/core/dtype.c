/* Dtype facts (names, sizes, block sizes), PyTorch's type promotion, half/bfloat16
 * conversions with round-to-nearest-even, and loads/stores of any dtype through
 * double or int64 for the generic (non-fast) kernel paths. */
#include <math.h>
#include <string.h>

#include "internal.h"

const pti_dtype_info pti_dtypes[PT_DTYPE_COUNT] = {
    [PT_FLOAT32] = {"float32", 4, 1, true, false, false},
    [PT_FLOAT64] = {"float64", 8, 1, true, false, false},
    [PT_FLOAT16] = {"float16", 2, 1, true, false, false},
    [PT_BFLOAT16] = {"bfloat16", 2, 1, true, false, false},
    [PT_INT64] = {"int64", 8, 1, false, true, false},
    [PT_INT32] = {"int32", 4, 1, false, true, false},
    [PT_INT16] = {"int16", 2, 1, false, true, false},
    [PT_INT8] = {"int8", 1, 1, false, true, false},
    [PT_UINT8] = {"uint8", 1, 1, false, true, false},
    [PT_BOOL] = {"bool", 1, 1, false, false, false},
    [PT_Q4_0] = {"q4_0", 18, 32, false, false, true},
    [PT_Q4_1] = {"q4_1", 20, 32, false, false, true},
    [PT_Q5_0] = {"q5_0", 22, 32, false, false, true},
    [PT_Q5_1] = {"q5_1", 24, 32, false, false, true},
    [PT_Q8_0] = {"q8_0", 34, 32, false, false, true},
    [PT_Q8_1] = {"q8_1", 36, 32, false, false, true},
    [PT_Q2_K] = {"q2_k", 84, 256, false, false, true},
    [PT_Q3_K] = {"q3_k", 110, 256, false, false, true},
    [PT_Q4_K] = {"q4_k", 144, 256, false, false, true},
    [PT_Q5_K] = {"q5_k", 176, 256, false, false, true},
    [PT_Q6_K] = {"q6_k", 210, 256, false, false, true},
    [PT_Q8_K] = {"q8_k", 292, 256, false, false, true},
};

const char *pt_dtype_name(pt_dtype dt)
{
    return pti_dtype_valid(dt) ? pti_dtypes[dt].name : "invalid";
}
size_t pt_dtype_size(pt_dtype dt)
{
    return pti_dtype_valid(dt) ? pti_dtypes[dt].size : 0;
}
int64_t pt_dtype_block_size(pt_dtype dt)
{
    return pti_dtype_valid(dt) ? pti_dtypes[dt].block_size : 0;
}
bool pt_dtype_is_floating(pt_dtype dt)
{
    return pti_dtype_valid(dt) && pti_dtypes[dt].is_floating;
}
bool pt_dtype_is_integral(pt_dtype dt)
{
    return pti_dtype_valid(dt) && pti_dtypes[dt].is_integral;
}
bool pt_dtype_is_block(pt_dtype dt)
{
    return pti_dtype_valid(dt) && pti_dtypes[dt].is_block;
}
pt_dtype pt_get_default_dtype(void)
{
    return PT_FLOAT32;
}

size_t pti_dtype_nbytes(pt_dtype dt, int64_t numel)
{
    const pti_dtype_info *d = &pti_dtypes[dt];
    return (size_t)((numel + d->block_size - 1) / d->block_size) * d->size;
}

/* Rank inside the integral and floating categories, for promotion. */
static int int_rank(pt_dtype dt)
{
    switch (dt) {
    case PT_UINT8: return 0;
    case PT_INT8: return 0;
    case PT_INT16: return 1;
    case PT_INT32: return 2;
    case PT_INT64: return 3;
    default: return -1;
    }
}

static pt_dtype promote_ints(pt_dtype a, pt_dtype b)
{
    if ((a == PT_UINT8 && b == PT_INT8) || (a == PT_INT8 && b == PT_UINT8))
        return PT_INT16;
    if (a == PT_UINT8)
        return b;
    if (b == PT_UINT8)
        return a;
    return int_rank(a) >= int_rank(b) ? a : b;
}

static pt_dtype promote_floats(pt_dtype a, pt_dtype b)
{
    if (a == PT_FLOAT64 || b == PT_FLOAT64)
        return PT_FLOAT64;
    if (a == PT_FLOAT32 || b == PT_FLOAT32)
        return PT_FLOAT32;
    return PT_FLOAT32; /* float16 with bfloat16 */
}

pt_dtype pt_promote_types(pt_dtype a, pt_dtype b)
{
    if (!pti_dtype_valid(a) || !pti_dtype_valid(b) || pti_dtypes[a].is_block ||
        pti_dtypes[b].is_block)
        return PT_DTYPE_COUNT;
    if (a == b)
        return a;
    if (a == PT_BOOL)
        return b;
    if (b == PT_BOOL)
        return a;
    bool fa = pti_dtypes[a].is_floating, fb = pti_dtypes[b].is_floating;
    if (fa && fb)
        return promote_floats(a, b);
    if (fa)
        return a;
    if (fb)
        return b;
    return promote_ints(a, b);
}

/* ---- half and bfloat16 ------------------------------------------------------------------------
 */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t pt_float_to_half(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u);
    if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return sign | 0x7c00u;
    if (absx < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        /* value * 2^24 rounded to nearest even gives the subnormal mantissa */
        float v = bits_f32(absx) * 16777216.0f;
        float r = nearbyintf(v); /* default rounding mode is to nearest even */
        return sign | (uint16_t)r;
    }
    uint32_t mant_odd = (absx >> 13) & 1u;
    absx += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round to nearest even */
    return sign | (uint16_t)(absx >> 13);
}

float pt_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        float v = (float)mant * (1.0f / 16777216.0f); /* mant * 2^-24 */
        return bits_f32(f32_bits(v) | sign);
    }
    if (exp == 31)
        return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t pt_float_to_bfloat16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)((x + rounding) >> 16);
}

float pt_bfloat16_to_float(uint16_t b)
{
    return bits_f32((uint32_t)b << 16);
}

/* ---- generic loads and stores ------------------------------------------------------------------
 */

double pti_load_f64(const void *p, pt_dtype dt)
{
    switch (dt) {
    case PT_FLOAT32: return *(const float *)p;
    case PT_FLOAT64: return *(const double *)p;
    case PT_FLOAT16: return pt_half_to_float(*(const uint16_t *)p);
    case PT_BFLOAT16: return pt_bfloat16_to_float(*(const uint16_t *)p);
    case PT_INT64: return (double)*(const int64_t *)p;
    case PT_INT32: return *(const int32_t *)p;
    case PT_INT16: return *(const int16_t *)p;
    case PT_INT8: return *(const int8_t *)p;
    case PT_UINT8: return *(const uint8_t *)p;
    case PT_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    default: return NAN;
    }
}

/* Float to integer as C (and PyTorch on CPU) does: truncation; out-of-range and NaN values
 * are undefined in C, so they are clamped here to keep UBSan quiet and results stable. */
static int64_t double_to_i64(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

void pti_store_f64(void *p, pt_dtype dt, double v)
{
    switch (dt) {
    case PT_FLOAT32: *(float *)p = (float)v; break;
    case PT_FLOAT64: *(double *)p = v; break;
    case PT_FLOAT16: *(uint16_t *)p = pt_float_to_half((float)v); break;
    case PT_BFLOAT16: *(uint16_t *)p = pt_float_to_bfloat16((float)v); break;
    case PT_INT64: *(int64_t *)p = double_to_i64(v); break;
    case PT_INT32: *(int32_t *)p = (int32_t)double_to_i64(v); break;
    case PT_INT16: *(int16_t *)p = (int16_t)double_to_i64(v); break;
    case PT_INT8: *(int8_t *)p = (int8_t)double_to_i64(v); break;
    case PT_UINT8: *(uint8_t *)p = (uint8_t)double_to_i64(v); break;
    case PT_BOOL: *(uint8_t *)p = v != 0.0; break;
    default: break;
    }
}

int64_t pti_load_i64(const void *p, pt_dtype dt)
{
    switch (dt) {
    case PT_INT64: return *(const int64_t *)p;
    case PT_INT32: return *(const int32_t *)p;
    case PT_INT16: return *(const int16_t *)p;
    case PT_INT8: return *(const int8_t *)p;
    case PT_UINT8: return *(const uint8_t *)p;
    case PT_BOOL: return *(const uint8_t *)p != 0;
    default: return double_to_i64(pti_load_f64(p, dt));
    }
}

void pti_store_i64(void *p, pt_dtype dt, int64_t v)
{
    switch (dt) {
    case PT_INT64: *(int64_t *)p = v; break;
    case PT_INT32: *(int32_t *)p = (int32_t)v; break;
    case PT_INT16: *(int16_t *)p = (int16_t)v; break;
    case PT_INT8: *(int8_t *)p = (int8_t)v; break;
    case PT_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case PT_BOOL: *(uint8_t *)p = v != 0; break;
    default: pti_store_f64(p, dt, (double)v); break;
    }
}
