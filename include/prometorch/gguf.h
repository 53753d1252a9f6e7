/* PromeTorch GGUF: reading llama.cpp / ggml model files (GGUF versions 2 and 3).
 *
 * A pt_gguf handle maps the file (copy-on-write, nothing read twice) and checks its whole
 * structure once, at open: magic, version, every count, length and offset against the bytes
 * actually present, value types, nested arrays (refused, as ggml does), duplicate keys and
 * tensor names, general.alignment, tensor dims and types, and that each tensor's data is
 * aligned, inside the file and overlaps no other. After a successful open every getter is a
 * cheap lookup that cannot read out of bounds. Files come from strangers: nothing is trusted.
 *
 * Shapes: GGUF lists a tensor's dims innermost first (ggml's ne[0] is the contiguous axis, the
 * one quantization blocks run along). pt_gguf_tensor_ne returns that order as stored;
 * pt_gguf_tensor_shape and the tensors pt_gguf_tensor makes use PyTorch's order (reversed),
 * so a Linear weight stored with ne = [in, out] has shape [out, in], as torch gives it.
 *
 * Strings (keys, values, tensor names) are returned as pointers to NUL-terminated copies that
 * live as long as the handle, with their byte length (GGUF strings may contain NUL bytes).
 * Numeric array data is returned as a pointer into the mapping: little-endian, packed, and
 * possibly unaligned (read it with memcpy). Indices are 0-based int64_t; an index out of range
 * is PT_ERR_INDEX. A handle is read-only after open and may be used from several threads.
 * Errors are "<file>: gguf: <what>" with PT_ERR_FORMAT for anything malformed. */
#ifndef PROMETORCH_GGUF_H
#define PROMETORCH_GGUF_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pt_gguf pt_gguf;

/* Metadata value types, with GGUF's numbering. */
typedef enum pt_gguf_type {
    PT_GGUF_UINT8 = 0,
    PT_GGUF_INT8 = 1,
    PT_GGUF_UINT16 = 2,
    PT_GGUF_INT16 = 3,
    PT_GGUF_UINT32 = 4,
    PT_GGUF_INT32 = 5,
    PT_GGUF_FLOAT32 = 6,
    PT_GGUF_BOOL = 7,
    PT_GGUF_STRING = 8,
    PT_GGUF_ARRAY = 9,
    PT_GGUF_UINT64 = 10,
    PT_GGUF_INT64 = 11,
    PT_GGUF_FLOAT64 = 12,
    PT_GGUF_TYPE_COUNT
} pt_gguf_type;

/* "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "array", "u64", "i64", "f64";
 * "?" for anything else. */
PT_API const char *pt_gguf_type_name(pt_gguf_type t);

/* ---- opening ------------------------------------------------------------------------------- */

/* Maps and checks the file at `path`. Returns a new handle (close with pt_gguf_close), or NULL
 * with PT_ERR_IO (cannot open or map, naming the path) or PT_ERR_FORMAT "<path>: gguf: ...". */
PT_API pt_gguf *pt_gguf_open(const char *path);
/* The same over `len` bytes in memory, which must stay valid and unchanged until the handle
 * is closed (they are never written); tensors made from it copy their bytes. `name` (may be
 * NULL: "<buffer>") names the buffer in error messages. */
PT_API pt_gguf *pt_gguf_open_buffer(const void *data, size_t len, const char *name);
/* Releases the handle. Tensors made by pt_gguf_tensor stay valid (they keep the mapping alive).
 * NULL is a no-op. */
PT_API void pt_gguf_close(pt_gguf *g);

/* The format version (2 or 3). */
PT_API uint32_t pt_gguf_version(const pt_gguf *g);
/* general.alignment, or 32 when the file does not set it. */
PT_API uint32_t pt_gguf_alignment(const pt_gguf *g);
/* The absolute file offset where the tensor data section starts. */
PT_API uint64_t pt_gguf_data_offset(const pt_gguf *g);
/* The path or name the handle was opened with. */
PT_API const char *pt_gguf_name(const pt_gguf *g);

/* ---- metadata (key/value pairs, in file order) ---------------------------------------------- */

PT_API int64_t pt_gguf_kv_count(const pt_gguf *g);
/* Index of `key`, or -1 when the file has no such key (no error is set). */
PT_API int64_t pt_gguf_find_key(const pt_gguf *g, const char *key);
/* Key i (borrowed, NUL-terminated; *len, if non-NULL, gets its byte length); NULL with
 * PT_ERR_INDEX when i is out of range. */
PT_API const char *pt_gguf_kv_key(const pt_gguf *g, int64_t i, size_t *len);
/* Type of value i; PT_GGUF_TYPE_COUNT (with PT_ERR_INDEX) when i is out of range. */
PT_API pt_gguf_type pt_gguf_kv_type(const pt_gguf *g, int64_t i);

/* Scalar getters: value i must have exactly the getter's type, else PT_ERR_DTYPE naming the
 * key and both types (*out untouched). */
PT_API pt_status pt_gguf_get_u8(const pt_gguf *g, int64_t i, uint8_t *out);
PT_API pt_status pt_gguf_get_i8(const pt_gguf *g, int64_t i, int8_t *out);
PT_API pt_status pt_gguf_get_u16(const pt_gguf *g, int64_t i, uint16_t *out);
PT_API pt_status pt_gguf_get_i16(const pt_gguf *g, int64_t i, int16_t *out);
PT_API pt_status pt_gguf_get_u32(const pt_gguf *g, int64_t i, uint32_t *out);
PT_API pt_status pt_gguf_get_i32(const pt_gguf *g, int64_t i, int32_t *out);
PT_API pt_status pt_gguf_get_u64(const pt_gguf *g, int64_t i, uint64_t *out);
PT_API pt_status pt_gguf_get_i64(const pt_gguf *g, int64_t i, int64_t *out);
PT_API pt_status pt_gguf_get_f32(const pt_gguf *g, int64_t i, float *out);
PT_API pt_status pt_gguf_get_f64(const pt_gguf *g, int64_t i, double *out);
/* A bool byte: any non-zero value is true. */
PT_API pt_status pt_gguf_get_bool(const pt_gguf *g, int64_t i, bool *out);
/* A string value (borrowed, NUL-terminated, valid until pt_gguf_close); NULL with
 * PT_ERR_DTYPE when value i is not a string. */
PT_API const char *pt_gguf_get_str(const pt_gguf *g, int64_t i, size_t *len);
/* Any integer type (or bool) as int64_t: writers disagree on widths (gguf-py writes u32 where
 * the spec says u64), so readers of counts and ids should use this. A u64 above INT64_MAX is
 * PT_ERR_FORMAT; a non-integer is PT_ERR_DTYPE. */
PT_API pt_status pt_gguf_get_int(const pt_gguf *g, int64_t i, int64_t *out);
/* f32 or f64 (or any integer type) as a double; PT_ERR_DTYPE otherwise. */
PT_API pt_status pt_gguf_get_float(const pt_gguf *g, int64_t i, double *out);

/* Arrays: value i must be PT_GGUF_ARRAY, else PT_ERR_DTYPE (count -1, type COUNT, NULL). */
PT_API int64_t pt_gguf_arr_count(const pt_gguf *g, int64_t i);
PT_API pt_gguf_type pt_gguf_arr_type(const pt_gguf *g, int64_t i);
/* The packed little-endian elements of a numeric or bool array, in the mapping (possibly
 * unaligned); NULL with PT_ERR_DTYPE for a string array (use pt_gguf_arr_str). An empty array
 * may give any non-NULL pointer. */
PT_API const void *pt_gguf_arr_data(const pt_gguf *g, int64_t i);
/* Element j of an integer or bool array as int64_t (u64 above INT64_MAX: PT_ERR_FORMAT). */
PT_API pt_status pt_gguf_arr_int(const pt_gguf *g, int64_t i, int64_t j, int64_t *out);
/* Element j of a numeric array as a double. */
PT_API pt_status pt_gguf_arr_float(const pt_gguf *g, int64_t i, int64_t j, double *out);
/* Element j of a string array (borrowed, NUL-terminated, valid until pt_gguf_close). */
PT_API const char *pt_gguf_arr_str(const pt_gguf *g, int64_t i, int64_t j, size_t *len);

/* ---- tensors (in file order) ------------------------------------------------------------------
 */

PT_API int64_t pt_gguf_tensor_count(const pt_gguf *g);
/* Index of the tensor named `name`, or -1 (no error set). */
PT_API int64_t pt_gguf_find_tensor(const pt_gguf *g, const char *name);
/* Tensor t's name (borrowed, NUL-terminated). */
PT_API const char *pt_gguf_tensor_name(const pt_gguf *g, int64_t t, size_t *len);
/* The ggml type id as stored (0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 30 BF16, ...); -1 if t is out of
 * range. Every id the file holds is one ggml defines (others are refused at open). */
PT_API int pt_gguf_tensor_ggml_type(const pt_gguf *g, int64_t t);
/* ggml's name of a type id ("F32", "Q4_0", "IQ2_XS", ...), or "unknown". */
PT_API const char *pt_gguf_ggml_type_name(int ggml_type);
/* The pt_dtype of tensor t (PT_FLOAT32, PT_FLOAT16, PT_BFLOAT16, PT_FLOAT64, PT_INT8..PT_INT64,
 * PT_Q4_0 ... PT_Q8_K), or PT_DTYPE_COUNT for a ggml type PromeTorch has no dtype for (the
 * IQ*, TQ* and MXFP4 types): such a tensor can be inspected but pt_gguf_tensor refuses it. */
PT_API pt_dtype pt_gguf_tensor_dtype(const pt_gguf *g, int64_t t);
/* Number of dims (1..4); -1 if t is out of range. */
PT_API int pt_gguf_tensor_ndim(const pt_gguf *g, int64_t t);
/* The dims in GGUF order (ne[0] innermost), ndim entries; borrowed. */
PT_API const int64_t *pt_gguf_tensor_ne(const pt_gguf *g, int64_t t);
/* The dims in PyTorch order (ne reversed), ndim entries; borrowed. */
PT_API const int64_t *pt_gguf_tensor_shape(const pt_gguf *g, int64_t t);
/* Element count. */
PT_API int64_t pt_gguf_tensor_numel(const pt_gguf *g, int64_t t);
/* Bytes of tensor t's data: (ne[0] / block) * block bytes * ne[1] * ne[2] * ne[3]. */
PT_API uint64_t pt_gguf_tensor_nbytes(const pt_gguf *g, int64_t t);
/* Offset of tensor t's data relative to the data section, as stored. */
PT_API uint64_t pt_gguf_tensor_offset(const pt_gguf *g, int64_t t);
/* Tensor t's bytes in the mapping (borrowed; valid until pt_gguf_close). */
PT_API const void *pt_gguf_tensor_data(const pt_gguf *g, int64_t t);

/* Tensor t as a contiguous CPU tensor of pt_gguf_tensor_dtype with pt_gguf_tensor_shape:
 * zero-copy over the mapping for files (copy-on-write: writes never reach the file), a copy
 * for buffers. The tensor holds its own reference to the mapping, so it outlives
 * pt_gguf_close. Returns a new reference; NULL with PT_ERR_INDEX, or PT_ERR_DTYPE for a ggml
 * type without a pt_dtype. */
PT_API pt_tensor *pt_gguf_tensor(pt_gguf *g, int64_t t);

#ifdef __cplusplus
}
#endif
#endif
