/* PromeTorch core API: errors, scopes, dtypes, devices, tensor creation and access,
 * conversion, memory statistics, threads, the random generator and printing.
 *
 * Ownership: every function returning `pt_tensor *` returns a NEW reference that the caller
 * releases with pt_release() (or leaves to the enclosing pt_scope_end()). On failure it
 * returns NULL and sets the thread-local error (pt_last_status / pt_last_error). Passing
 * NULL as a tensor argument propagates the earlier error, so a chain of calls can be checked
 * once at the end. Nothing here aborts the process on bad input. */
#ifndef PROMETORCH_CORE_H
#define PROMETORCH_CORE_H

#include <stdio.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---------------------------------------------------------------------------- */

/* The status of the most recent failing call on this thread (PT_OK if none since the last
 * pt_clear_error). Successful calls do not clear it. */
PT_API pt_status pt_last_status(void);
/* The message of the most recent failure on this thread ("" if none). Borrowed; valid until
 * the next failing call on this thread. */
PT_API const char *pt_last_error(void);
PT_API void pt_clear_error(void);
/* A short constant name of a status ("PT_ERR_SHAPE"). */
PT_API const char *pt_status_name(pt_status s);

/* ---- scopes ----------------------------------------------------------------------------- */

/* Every tensor created on this thread between pt_scope_begin() and the matching
 * pt_scope_end() is released at pt_scope_end() unless pt_keep() moved it to the outer scope
 * (or, at the outermost scope, handed it to the caller). pt_release() on a tensor inside its
 * scope releases it early and the scope forgets it. Scopes nest. */
PT_API void pt_scope_begin(void);
PT_API void pt_scope_end(void);
/* Moves `t` out of the current scope into the enclosing one; returns t. */
PT_API pt_tensor *pt_keep(pt_tensor *t);

/* ---- reference counting ------------------------------------------------------------------ */

PT_API pt_tensor *pt_retain(pt_tensor *t); /* adds a reference; returns t; NULL-safe */
PT_API void pt_release(pt_tensor *t);      /* drops a reference; pt_release(NULL) is a no-op */

/* ---- dtypes ------------------------------------------------------------------------------ */

PT_API const char *pt_dtype_name(pt_dtype dt);   /* "float32", "q4_0", ... */
PT_API size_t pt_dtype_size(pt_dtype dt);        /* bytes per element (per block for blocks) */
PT_API int64_t pt_dtype_block_size(pt_dtype dt); /* elements per block; 1 for plain dtypes */
PT_API bool pt_dtype_is_floating(pt_dtype dt);   /* float32/64/16, bfloat16 */
PT_API bool pt_dtype_is_integral(pt_dtype dt);   /* ints and uint8 (not bool) */
PT_API bool pt_dtype_is_block(pt_dtype dt);      /* GGUF block types */
/* PyTorch's promotion of two tensor dtypes (torch.promote_types). */
PT_API pt_dtype pt_promote_types(pt_dtype a, pt_dtype b);
/* The default floating dtype (float32) used for int inputs of float ops. */
PT_API pt_dtype pt_get_default_dtype(void);

/* IEEE half and bfloat16 conversions with round-to-nearest-even. */
PT_API uint16_t pt_float_to_half(float f);
PT_API float pt_half_to_float(uint16_t h);
PT_API uint16_t pt_float_to_bfloat16(float f);
PT_API float pt_bfloat16_to_float(uint16_t b);

/* ---- devices ------------------------------------------------------------------------------ */

PT_API pt_device pt_cpu(void);
PT_API pt_device pt_cuda(int index);
/* Parses "cpu", "cuda", "cuda:1", "e2k", "nmcard". An unknown string gives a device with
 * type PT_DEVICE_TYPE_COUNT and sets the error. */
PT_API pt_device pt_device_parse(const char *s);
/* Writes "cpu" / "cuda:1" into buf; returns buf. */
PT_API char *pt_device_str(pt_device d, char *buf, size_t n);
PT_API bool pt_device_equal(pt_device a, pt_device b);
/* True if a backend for the device is compiled in and the device is present. */
PT_API bool pt_device_available(pt_device d);
/* Number of CUDA devices (0 without libprometorch_cuda.so, a driver or a GPU; never an error).
 * The first call loads the CUDA backend (docs/backends.md). */
PT_API int pt_cuda_device_count(void);
/* torch.cuda.is_available(): pt_cuda_device_count() > 0. */
PT_API bool pt_cuda_is_available(void);

/* ---- creation ----------------------------------------------------------------------------- */

PT_API pt_tensor *pt_empty(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev);
PT_API pt_tensor *pt_zeros(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev);
PT_API pt_tensor *pt_ones(int ndim, const int64_t *shape, pt_dtype dt, pt_device dev);
PT_API pt_tensor *pt_full(int ndim, const int64_t *shape, double v, pt_dtype dt, pt_device dev);
/* Copies ndim/shape's worth of contiguous elements of dtype dt from host memory. */
PT_API pt_tensor *pt_from_data(const void *data, int ndim, const int64_t *shape, pt_dtype dt,
                               pt_device dev);
/* A 0-dim tensor holding v. */
PT_API pt_tensor *pt_scalar_tensor(double v, pt_dtype dt, pt_device dev);
/* Values start, start+step, ... < end (torch.arange). The length is ceil((end - start) / step);
 * an integer dt truncates start and step first, as PyTorch (arange(0.5, 5.3, 1.2) as int64 is
 * 0, 1, 2, 3). */
PT_API pt_tensor *pt_arange(double start, double end, double step, pt_dtype dt, pt_device dev);
/* n evenly spaced values from start to end inclusive (torch.linspace); steps = 1 gives
 * [start]. An integer dt truncates start and end first and each value again (PyTorch). */
PT_API pt_tensor *pt_linspace(double start, double end, int64_t steps, pt_dtype dt, pt_device dev);
/* An n x m identity matrix (torch.eye). */
PT_API pt_tensor *pt_eye(int64_t n, int64_t m, pt_dtype dt, pt_device dev);
PT_API pt_tensor *pt_zeros_like(const pt_tensor *t);
PT_API pt_tensor *pt_ones_like(const pt_tensor *t);
PT_API pt_tensor *pt_full_like(const pt_tensor *t, double v);
PT_API pt_tensor *pt_empty_like(const pt_tensor *t);

/* ---- access ------------------------------------------------------------------------------- */

PT_API int pt_ndim(const pt_tensor *t);
PT_API const int64_t *pt_shape(const pt_tensor *t);      /* borrowed, ndim entries */
PT_API const int64_t *pt_stride(const pt_tensor *t);     /* borrowed, in elements */
PT_API int64_t pt_size(const pt_tensor *t, int64_t dim); /* negative dims allowed; -1 on error */
PT_API int64_t pt_numel(const pt_tensor *t);
PT_API int64_t pt_storage_offset(const pt_tensor *t);
PT_API pt_dtype pt_dtype_of(const pt_tensor *t);
PT_API pt_device pt_device_of(const pt_tensor *t);
PT_API bool pt_is_contiguous(const pt_tensor *t);
/* True if a and b view the same storage. */
PT_API bool pt_shares_storage(const pt_tensor *a, const pt_tensor *b);
/* Pointer to the first element for CPU tensors (borrowed); NULL (with an error) otherwise. */
PT_API void *pt_data_ptr(const pt_tensor *t);
/* Copies the elements in row-major order, in t's dtype, to host memory; nbytes must equal
 * numel * dtype size (or the block bytes for block dtypes). Works for any device/strides. */
PT_API pt_status pt_copy_to_host(const pt_tensor *t, void *dst, size_t nbytes);
/* The value of a one-element tensor as a double (NaN and an error on failure). */
PT_API double pt_item(const pt_tensor *t);
/* Copies src into dst (same shape after broadcasting src, any dtypes/devices); in place. */
PT_API pt_status pt_copy_(pt_tensor *dst, const pt_tensor *src);
/* Fills t with v in place. */
PT_API pt_status pt_fill_(pt_tensor *t, double v);
PT_API pt_status pt_zero_(pt_tensor *t);

/* A view of t's storage with the given shape, strides (elements) and storage offset
 * (torch.as_strided); fails if the geometry reaches outside the storage. */
PT_API pt_tensor *pt_as_strided(const pt_tensor *t, int ndim, const int64_t *shape,
                                const int64_t *stride, int64_t offset);

/* ---- conversion --------------------------------------------------------------------------- */

/* Same data on another device. Returns a new reference to t itself if already there. */
PT_API pt_tensor *pt_to(const pt_tensor *t, pt_device dev);
/* Converted to dtype dt (C casts; floats to ints truncate toward zero, as PyTorch). Returns
 * a new reference to t itself if it already has dt. */
PT_API pt_tensor *pt_to_dtype(const pt_tensor *t, pt_dtype dt);
/* t itself (new reference) if contiguous, else a contiguous copy. */
PT_API pt_tensor *pt_contiguous(const pt_tensor *t);
/* A contiguous copy with its own storage. */
PT_API pt_tensor *pt_clone(const pt_tensor *t);

/* ---- memory ------------------------------------------------------------------------------- */

/* Bytes currently held by live storages on CPU (not counting the allocator's cache). */
PT_API size_t pt_memory_allocated(void);
/* Number of times the CPU allocator had to ask the system for memory (cache misses). */
PT_API uint64_t pt_memory_system_allocs(void);
/* Returns cached free blocks to the system. */
PT_API void pt_empty_cache(void);

/* ---- threads ------------------------------------------------------------------------------ */

/* Threads used by kernels (default: the number of cores, or $PT_NUM_THREADS). Also sets
 * OpenBLAS's thread count so the two never oversubscribe the cores. */
PT_API void pt_set_num_threads(int n);
PT_API int pt_get_num_threads(void);

/* ---- random -------------------------------------------------------------------------------- */

/* Seeds the default generator. Streams are counter-based: the same seed gives the same
 * numbers whatever the thread count. */
PT_API void pt_manual_seed(uint64_t seed);
PT_API uint64_t pt_initial_seed(void);
/* The default generator's state as a uint8 tensor (torch.get_rng_state's role; PromeTorch's
 * generator is Philox, so the bytes differ from torch's): 16 bytes, the seed then the next
 * counter, each little-endian. Save it in a checkpoint to resume a run with the same random
 * numbers. Returns a new reference. */
PT_API pt_tensor *pt_get_rng_state(void);
/* Restores a state from pt_get_rng_state (torch.set_rng_state). PT_ERR_NULL for NULL,
 * PT_ERR_INVALID_ARG unless state is a uint8 tensor of 16 elements. */
PT_API pt_status pt_set_rng_state(const pt_tensor *state);

/* ---- printing ------------------------------------------------------------------------------ */

/* PyTorch's repr: "tensor([[1., 2.],\n        [3., 4.]])" with dtype/device suffixes as
 * PyTorch prints them. Returns a malloc'd string the caller frees; NULL on error. */
PT_API char *pt_to_string(const pt_tensor *t);
/* Prints pt_to_string(t) and a newline to stdout. */
PT_API void pt_print(const pt_tensor *t);
PT_API void pt_fprint(FILE *f, const pt_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
