/* PromeTorch basic types: status codes, dtypes, devices, the opaque tensor handle and the
 * PT_SHAPE / PT_DIMS helpers used by every part of the API. */
#ifndef PROMETORCH_TYPES_H
#define PROMETORCH_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PT_BUILDING_LIBRARY)
#define PT_API __attribute__((visibility("default")))
#else
#define PT_API
#endif

/* Most dimensions a tensor may have (PyTorch allows 64; 16 covers every real network). */
#define PT_MAX_DIMS 16

/* Result of a fallible call. PT_OK is 0; every other value comes with a message from
 * pt_last_error(). */
typedef enum pt_status {
    PT_OK = 0,
    PT_ERR_INVALID_ARG, /* a bad argument value (negative size, unknown mode, ...) */
    PT_ERR_NULL,        /* a NULL tensor was passed (usually a failed earlier call) */
    PT_ERR_SHAPE,       /* shapes that do not fit together */
    PT_ERR_DTYPE,       /* a dtype the op does not accept */
    PT_ERR_DEVICE,      /* tensors on different devices, or an unknown/absent device */
    PT_ERR_INDEX,       /* an index or dim out of range */
    PT_ERR_UNSUPPORTED, /* the op has no kernel for this device/dtype */
    PT_ERR_OOM,         /* an allocation failed */
    PT_ERR_IO,          /* a file could not be read or written */
    PT_ERR_FORMAT,      /* a file or message is malformed */
    PT_ERR_RUNTIME,     /* anything else (a device runtime error, ...) */
} pt_status;

/* Element types. The GGUF block types are storage-only: a tensor of them has a shape in
 * elements, its bytes hold whole blocks, and only quantized matmul/embedding kernels and
 * conversion to float read them. */
typedef enum pt_dtype {
    PT_FLOAT32 = 0,
    PT_FLOAT64,
    PT_FLOAT16,
    PT_BFLOAT16,
    PT_INT64,
    PT_INT32,
    PT_INT16,
    PT_INT8,
    PT_UINT8,
    PT_BOOL,
    PT_Q4_0,
    PT_Q4_1,
    PT_Q5_0,
    PT_Q5_1,
    PT_Q8_0,
    PT_Q8_1,
    PT_Q2_K,
    PT_Q3_K,
    PT_Q4_K,
    PT_Q5_K,
    PT_Q6_K,
    PT_Q8_K,
    PT_DTYPE_COUNT
} pt_dtype;

/* Device types. The built-in ones have fixed values; PT_DEVICE_PRIVATE_FIRST ..
 * PT_DEVICE_PRIVATE_LAST are handed out by pt_backend_register (prometorch/backend.h) to
 * backends added at run time, under the name they register ("toy", "toy:1").
 * PT_DEVICE_TYPE_COUNT marks an invalid device (pt_device_parse of an unknown string). */
typedef enum pt_device_type {
    PT_DEVICE_CPU = 0,
    PT_DEVICE_CUDA,
    PT_DEVICE_E2K,
    PT_DEVICE_NMCARD,
    PT_DEVICE_PRIVATE_FIRST,
    PT_DEVICE_PRIVATE_LAST = PT_DEVICE_PRIVATE_FIRST + 7,
    PT_DEVICE_TYPE_COUNT
} pt_device_type;

/* A device: its type and index ("cuda:1" is {PT_DEVICE_CUDA, 1}). */
typedef struct pt_device {
    pt_device_type type;
    int index;
} pt_device;

/* Opaque, reference-counted n-dimensional array (a strided view over a pt_storage). */
typedef struct pt_tensor pt_tensor;

/* An array of tensors an op reads (pt_cat, pt_stack, pt_index, pt_index_put(_),
 * pt_nn_forward_n). C converts neither pt_tensor ** nor pt_tensor *arr[] to
 * const pt_tensor *const * without a cast (gcc 14 makes it an error), so with GCC and clang the
 * parameter is a transparent union: a pt_tensor **, pt_tensor *const *, const pt_tensor ** or
 * const pt_tensor *const * (an array of either, NULL) passes as it is, with the same calling
 * convention as a plain pointer. C++ converts all of these implicitly. Under a strict ISO
 * dialect (-std=c11, where -Wpedantic would flag the union conversion at every call) it stays
 * the plain const pointer. */
#if defined(__GNUC__) && !defined(__cplusplus) && !defined(__STRICT_ANSI__)
typedef union pt_tensor_list {
    const pt_tensor *const *c;
    pt_tensor *const *m;
} pt_tensor_list __attribute__((transparent_union));
#define PT_TENSOR_LIST_PTR(l) ((l).c)
#else
typedef const pt_tensor *const *pt_tensor_list;
#define PT_TENSOR_LIST_PTR(l) (l)
#endif

/* PT_SHAPE(2, 3) expands to `2, (const int64_t[]){2, 3}`: the (ndim, dims) argument pair.
 * PT_DIMS is the same for dimension lists. Up to 16 entries. */
#define PT_NARGS_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, N, ...) N
#define PT_NARGS(...)                                                                              \
    PT_NARGS_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define PT_SHAPE(...)                                                                              \
    PT_NARGS(__VA_ARGS__), (const int64_t[])                                                       \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }
#define PT_DIMS(...)                                                                               \
    PT_NARGS(__VA_ARGS__), (const int64_t[])                                                       \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }
/* A 0-dim (scalar) shape. */
#define PT_SCALAR_SHAPE 0, (const int64_t *)0

#ifdef __cplusplus
}
#endif
#endif
