/* CUDA kernels for the data-movement and elementwise op slots: strided copy with dtype
 * casts, fill, add/mul, and a scale used by mm when K == 0. Each kernel walks a linear index
 * over the (host-coalesced) shape in a grid-stride loop and turns it into per-operand
 * element offsets. Conversions mirror src/core/dtype.c bit for bit, so a CUDA result equals
 * the CPU one exactly for copies and casts. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda.h"

#define THREADS 256
#define MAX_BLOCKS 65536

/* ---- geometry ------------------------------------------------------------------------------- */

/* Element offsets of linear index i (row-major over g.shape) for the first N operands. */
template <int N>
__device__ __forceinline__ void geom_offsets(const pti_cuda_geom &g, int64_t i, int64_t *off)
{
    for (int k = 0; k < N; k++)
        off[k] = 0;
    if (g.ndim == 1) {
        for (int k = 0; k < N; k++)
            off[k] = i * g.stride[k][0];
        return;
    }
    for (int d = g.ndim - 1; d >= 0 && i > 0; d--) {
        int64_t n = g.shape[d];
        int64_t c = i % n;
        i /= n;
        for (int k = 0; k < N; k++)
            off[k] += c * g.stride[k][d];
    }
}

static unsigned blocks_for(int64_t n)
{
    int64_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < MAX_BLOCKS ? (b > 0 ? b : 1) : MAX_BLOCKS);
}

#define GRID_STRIDE_LOOP(i, n)                                                                     \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* ---- scalar conversions (same rules as src/core/dtype.c) ---------------------------------- */

__device__ __forceinline__ uint32_t f32_bits(float f)
{
    return __float_as_uint(f);
}
__device__ __forceinline__ float bits_f32(uint32_t u)
{
    return __uint_as_float(u);
}

__device__ uint16_t float_to_half(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u)
        return sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u);
    if (absx >= 0x477ff000u)
        return sign | 0x7c00u;
    if (absx < 0x38800000u) {
        float r = rintf(bits_f32(absx) * 16777216.0f); /* round to nearest even */
        return sign | (uint16_t)r;
    }
    uint32_t mant_odd = (absx >> 13) & 1u;
    absx += 0xc8000fffu + mant_odd;
    return sign | (uint16_t)(absx >> 13);
}

__device__ float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0)
        return bits_f32(f32_bits((float)mant * (1.0f / 16777216.0f)) | sign);
    if (exp == 31)
        return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

__device__ uint16_t float_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)((x + rounding) >> 16);
}

__device__ __forceinline__ float bf16_to_float(uint16_t b)
{
    return bits_f32((uint32_t)b << 16);
}

/* Truncation with NaN -> 0 and saturation at the int64 range, as the CPU does. */
__device__ int64_t double_to_i64(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

__device__ double load_f64(const char *p, int dt)
{
    switch (dt) {
    case PT_FLOAT32: return *(const float *)p;
    case PT_FLOAT64: return *(const double *)p;
    case PT_FLOAT16: return half_to_float(*(const uint16_t *)p);
    case PT_BFLOAT16: return bf16_to_float(*(const uint16_t *)p);
    case PT_INT64: return (double)*(const int64_t *)p;
    case PT_INT32: return *(const int32_t *)p;
    case PT_INT16: return *(const int16_t *)p;
    case PT_INT8: return *(const int8_t *)p;
    case PT_UINT8: return *(const uint8_t *)p;
    case PT_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    default: return 0.0;
    }
}

__device__ void store_f64(char *p, int dt, double v)
{
    switch (dt) {
    case PT_FLOAT32: *(float *)p = (float)v; break;
    case PT_FLOAT64: *(double *)p = v; break;
    case PT_FLOAT16: *(uint16_t *)p = float_to_half((float)v); break;
    case PT_BFLOAT16: *(uint16_t *)p = float_to_bf16((float)v); break;
    case PT_INT64: *(int64_t *)p = double_to_i64(v); break;
    case PT_INT32: *(int32_t *)p = (int32_t)double_to_i64(v); break;
    case PT_INT16: *(int16_t *)p = (int16_t)double_to_i64(v); break;
    case PT_INT8: *(int8_t *)p = (int8_t)double_to_i64(v); break;
    case PT_UINT8: *(uint8_t *)p = (uint8_t)double_to_i64(v); break;
    case PT_BOOL: *(uint8_t *)p = v != 0.0; break;
    default: break;
    }
}

/* Only called with integer/bool dtypes (the copy kernel routes int -> int through here). */
__device__ int64_t load_i64(const char *p, int dt)
{
    switch (dt) {
    case PT_INT64: return *(const int64_t *)p;
    case PT_INT32: return *(const int32_t *)p;
    case PT_INT16: return *(const int16_t *)p;
    case PT_INT8: return *(const int8_t *)p;
    case PT_UINT8: return *(const uint8_t *)p;
    case PT_BOOL: return *(const uint8_t *)p != 0;
    default: return 0;
    }
}

__device__ void store_i64(char *p, int dt, int64_t v)
{
    switch (dt) {
    case PT_INT64: *(int64_t *)p = v; break;
    case PT_INT32: *(int32_t *)p = (int32_t)v; break;
    case PT_INT16: *(int16_t *)p = (int16_t)v; break;
    case PT_INT8: *(int8_t *)p = (int8_t)v; break;
    case PT_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case PT_BOOL: *(uint8_t *)p = v != 0; break;
    default: break;
    }
}

static size_t plain_size(pt_dtype dt)
{
    switch (dt) {
    case PT_FLOAT64:
    case PT_INT64: return 8;
    case PT_FLOAT32:
    case PT_INT32: return 4;
    case PT_FLOAT16:
    case PT_BFLOAT16:
    case PT_INT16: return 2;
    case PT_INT8:
    case PT_UINT8:
    case PT_BOOL: return 1;
    default: return 0;
    }
}

static bool is_floating(pt_dtype dt)
{
    return dt == PT_FLOAT32 || dt == PT_FLOAT64 || dt == PT_FLOAT16 || dt == PT_BFLOAT16;
}

/* ---- copy ----------------------------------------------------------------------------------- */

/* Same dtype: move U-sized words (U = an unsigned integer of the element size). */
template <typename U>
__global__ void copy_same_kernel(const __grid_constant__ pti_cuda_geom g, U *out, const U *in)
{
    GRID_STRIDE_LOOP(i, g.numel)
    {
        int64_t off[2];
        geom_offsets<2>(g, i, off);
        out[off[0]] = in[off[1]];
    }
}

/* Casts: int/bool -> int/bool exactly through int64, anything else through double. */
__global__ void copy_cast_kernel(const __grid_constant__ pti_cuda_geom g, char *out, int to,
                                 size_t out_size, const char *in, int from, size_t in_size,
                                 bool via_int)
{
    GRID_STRIDE_LOOP(i, g.numel)
    {
        int64_t off[2];
        geom_offsets<2>(g, i, off);
        char *d = out + off[0] * (int64_t)out_size;
        const char *s = in + off[1] * (int64_t)in_size;
        if (via_int)
            store_i64(d, to, load_i64(s, from));
        else
            store_f64(d, to, load_f64(s, from));
    }
}

extern "C" int pti_cuda_launch_copy(const pti_cuda_geom *g, void *out, pt_dtype to, const void *in,
                                    pt_dtype from)
{
    size_t os = plain_size(to), is = plain_size(from);
    if (os == 0 || is == 0)
        return (int)cudaErrorInvalidValue;
    unsigned nb = blocks_for(g->numel);
    if (to == from) {
        switch (os) {
        case 1:
            copy_same_kernel<uint8_t><<<nb, THREADS>>>(*g, (uint8_t *)out, (const uint8_t *)in);
            break;
        case 2:
            copy_same_kernel<uint16_t><<<nb, THREADS>>>(*g, (uint16_t *)out, (const uint16_t *)in);
            break;
        case 4:
            copy_same_kernel<uint32_t><<<nb, THREADS>>>(*g, (uint32_t *)out, (const uint32_t *)in);
            break;
        default:
            copy_same_kernel<uint64_t><<<nb, THREADS>>>(*g, (uint64_t *)out, (const uint64_t *)in);
            break;
        }
    } else {
        bool via_int = !is_floating(to) && !is_floating(from);
        copy_cast_kernel<<<nb, THREADS>>>(*g, (char *)out, (int)to, os, (const char *)in, (int)from,
                                          is, via_int);
    }
    return (int)cudaGetLastError();
}

/* ---- fill ----------------------------------------------------------------------------------- */

template <typename U>
__global__ void fill_kernel(const __grid_constant__ pti_cuda_geom g, U *out, U v)
{
    GRID_STRIDE_LOOP(i, g.numel)
    {
        int64_t off[1];
        geom_offsets<1>(g, i, off);
        out[off[0]] = v;
    }
}

template <typename U> static void launch_fill_as(const pti_cuda_geom *g, void *out, uint64_t bits)
{
    U v;
    memcpy(&v, &bits, sizeof v); /* little-endian: the low bytes hold the element */
    fill_kernel<U><<<blocks_for(g->numel), THREADS>>>(*g, (U *)out, v);
}

extern "C" int pti_cuda_launch_fill(const pti_cuda_geom *g, void *out, size_t elem_size,
                                    uint64_t bits)
{
    switch (elem_size) {
    case 1: launch_fill_as<uint8_t>(g, out, bits); break;
    case 2: launch_fill_as<uint16_t>(g, out, bits); break;
    case 4: launch_fill_as<uint32_t>(g, out, bits); break;
    case 8: launch_fill_as<uint64_t>(g, out, bits); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

/* ---- add / mul ------------------------------------------------------------------------------ */

/* Per-dtype storage type S, compute type C and the conversions between them. float16 and
 * bfloat16 compute in float and round back (as PyTorch does); integers compute in 64 bits
 * with wrap-around (through uint64 so overflow is defined) and truncate on store. */
struct ty_f32 {
    typedef float S;
    typedef float C;
    static __device__ __forceinline__ C load(S v) { return v; }
    static __device__ __forceinline__ S store(C v) { return v; }
    static __device__ __forceinline__ C add(C a, C alpha, C b) { return a + alpha * b; }
    static __device__ __forceinline__ C mul(C a, C b) { return a * b; }
};
struct ty_f64 {
    typedef double S;
    typedef double C;
    static __device__ __forceinline__ C load(S v) { return v; }
    static __device__ __forceinline__ S store(C v) { return v; }
    static __device__ __forceinline__ C add(C a, C alpha, C b) { return a + alpha * b; }
    static __device__ __forceinline__ C mul(C a, C b) { return a * b; }
};
struct ty_f16 {
    typedef uint16_t S;
    typedef float C;
    static __device__ __forceinline__ C load(S v) { return half_to_float(v); }
    static __device__ __forceinline__ S store(C v) { return float_to_half(v); }
    static __device__ __forceinline__ C add(C a, C alpha, C b) { return a + alpha * b; }
    static __device__ __forceinline__ C mul(C a, C b) { return a * b; }
};
struct ty_bf16 {
    typedef uint16_t S;
    typedef float C;
    static __device__ __forceinline__ C load(S v) { return bf16_to_float(v); }
    static __device__ __forceinline__ S store(C v) { return float_to_bf16(v); }
    static __device__ __forceinline__ C add(C a, C alpha, C b) { return a + alpha * b; }
    static __device__ __forceinline__ C mul(C a, C b) { return a * b; }
};
template <typename T> struct ty_int {
    typedef T S;
    typedef int64_t C;
    static __device__ __forceinline__ C load(S v) { return (C)v; }
    static __device__ __forceinline__ S store(C v) { return (S)v; }
    static __device__ __forceinline__ C add(C a, C alpha, C b)
    {
        return (C)((uint64_t)a + (uint64_t)alpha * (uint64_t)b);
    }
    static __device__ __forceinline__ C mul(C a, C b) { return (C)((uint64_t)a * (uint64_t)b); }
};

template <typename Ty, bool ADD>
__global__ void binary_kernel(const __grid_constant__ pti_cuda_geom g, typename Ty::S *out,
                              const typename Ty::S *a, const typename Ty::S *b,
                              typename Ty::C alpha)
{
    GRID_STRIDE_LOOP(i, g.numel)
    {
        int64_t off[3];
        geom_offsets<3>(g, i, off);
        typename Ty::C x = Ty::load(a[off[1]]), y = Ty::load(b[off[2]]);
        out[off[0]] = Ty::store(ADD ? Ty::add(x, alpha, y) : Ty::mul(x, y));
    }
}

template <typename Ty>
static void launch_binary_as(pti_cuda_binop op, const pti_cuda_geom *g, void *out, const void *a,
                             const void *b, typename Ty::C alpha)
{
    typedef typename Ty::S S;
    unsigned nb = blocks_for(g->numel);
    if (op == PTI_CUDA_ADD)
        binary_kernel<Ty, true><<<nb, THREADS>>>(*g, (S *)out, (const S *)a, (const S *)b, alpha);
    else
        binary_kernel<Ty, false><<<nb, THREADS>>>(*g, (S *)out, (const S *)a, (const S *)b, alpha);
}

extern "C" int pti_cuda_binary_supports(pt_dtype dt)
{
    return plain_size(dt) != 0 && dt != PT_BOOL;
}

extern "C" int pti_cuda_launch_binary(pti_cuda_binop op, const pti_cuda_geom *g, pt_dtype dt,
                                      void *out, const void *a, const void *b, double alpha)
{
    int64_t ialpha = (int64_t)alpha; /* front-ends reject non-integral alpha for int tensors */
    switch (dt) {
    case PT_FLOAT32: launch_binary_as<ty_f32>(op, g, out, a, b, (float)alpha); break;
    case PT_FLOAT64: launch_binary_as<ty_f64>(op, g, out, a, b, alpha); break;
    case PT_FLOAT16: launch_binary_as<ty_f16>(op, g, out, a, b, (float)alpha); break;
    case PT_BFLOAT16: launch_binary_as<ty_bf16>(op, g, out, a, b, (float)alpha); break;
    case PT_INT64: launch_binary_as<ty_int<int64_t>>(op, g, out, a, b, ialpha); break;
    case PT_INT32: launch_binary_as<ty_int<int32_t>>(op, g, out, a, b, ialpha); break;
    case PT_INT16: launch_binary_as<ty_int<int16_t>>(op, g, out, a, b, ialpha); break;
    case PT_INT8: launch_binary_as<ty_int<int8_t>>(op, g, out, a, b, ialpha); break;
    case PT_UINT8: launch_binary_as<ty_int<uint8_t>>(op, g, out, a, b, ialpha); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

/* ---- scale (mm with K == 0: out = beta * out) -------------------------------------------- */

template <typename Ty>
__global__ void scale_kernel(int64_t n, typename Ty::S *out, typename Ty::C beta)
{
    GRID_STRIDE_LOOP(i, n)
    out[i] = Ty::store(Ty::mul(beta, Ty::load(out[i])));
}

extern "C" int pti_cuda_launch_scale(pt_dtype dt, int64_t n, void *out, double beta)
{
    unsigned nb = blocks_for(n);
    switch (dt) {
    case PT_FLOAT32: scale_kernel<ty_f32><<<nb, THREADS>>>(n, (float *)out, (float)beta); break;
    case PT_FLOAT64: scale_kernel<ty_f64><<<nb, THREADS>>>(n, (double *)out, beta); break;
    case PT_FLOAT16: scale_kernel<ty_f16><<<nb, THREADS>>>(n, (uint16_t *)out, (float)beta); break;
    case PT_BFLOAT16:
        scale_kernel<ty_bf16><<<nb, THREADS>>>(n, (uint16_t *)out, (float)beta);
        break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
