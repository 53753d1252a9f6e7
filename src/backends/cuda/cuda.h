/* Shared pieces of the CUDA backend, included by both the C files (backend.c, blas.c, which
 * see the core structs) and the nvcc-compiled kernels.cu (which does not: internal.h uses C11
 * atomics that C++ cannot parse). Everything crossing that line is plain data: device
 * pointers already offset to element 0, dtypes, and a small geometry struct passed to the
 * kernels by value. The launchers return a cudaError_t value as int (0 = cudaSuccess). */
#ifndef PT_CUDA_H
#define PT_CUDA_H

#include <stdint.h>

#include "prometorch/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PTI_CUDA_MAX_OPS 3

/* Up to three operands over one shape (outermost dim first, as in a tensor), strides in
 * elements (0 on broadcast dims). Coalesced on the host so kernels do little index math. */
typedef struct pti_cuda_geom {
    int ndim; /* >= 1 */
    int n_ops;
    int64_t numel;
    int64_t shape[PT_MAX_DIMS];
    int64_t stride[PTI_CUDA_MAX_OPS][PT_MAX_DIMS];
} pti_cuda_geom;

/* Operand 0 is the destination of every launcher below. */

/* out <- in (operand 1), casting from `from` to `to` like the CPU copy kernel. */
int pti_cuda_launch_copy(const pti_cuda_geom *g, void *out, pt_dtype to, const void *in,
                         pt_dtype from);
/* Every element of out <- the `elem_size`-byte pattern `bits` (the value already encoded in
 * out's dtype on the host). */
int pti_cuda_launch_fill(const pti_cuda_geom *g, void *out, size_t elem_size, uint64_t bits);

typedef enum pti_cuda_binop { PTI_CUDA_ADD, PTI_CUDA_MUL } pti_cuda_binop;
/* True if launch_binary handles dtype. */
int pti_cuda_binary_supports(pt_dtype dt);
/* out <- a + alpha * b (ADD) or a * b (MUL); a = operand 1, b = operand 2, all of dtype dt. */
int pti_cuda_launch_binary(pti_cuda_binop op, const pti_cuda_geom *g, pt_dtype dt, void *out,
                           const void *a, const void *b, double alpha);
/* n contiguous elements of out (float dtypes) <- beta * out. */
int pti_cuda_launch_scale(pt_dtype dt, int64_t n, void *out, double beta);

#ifdef __cplusplus
}
#endif
#endif
