/* Declarations shared by the C files of the CUDA backend (backend.c, blas.c): error
 * conversion, device selection, tensor pointers and geometry for the kernel launchers. */
#ifndef PT_CUDA_BACKEND_H
#define PT_CUDA_BACKEND_H

#include "../../core/internal.h"
#include "cuda.h"

/* Devices beyond this index are ignored (per-device state lives in fixed arrays). */
#define PTI_CUDA_MAX_DEVICES 16

/* PT_OK for cudaSuccess; otherwise records PT_ERR_OOM (out of memory) or PT_ERR_RUNTIME with
 * "cuda: <call> failed: <cudaGetErrorString text>" and returns it. err is a cudaError_t. */
pt_status pti_cuda_check(int err, const char *call);
/* cudaSetDevice(index) through pti_cuda_check. */
pt_status pti_cuda_set_device(int index);
/* Device address of t's element 0 (storage base + offset); never dereferenced on the host. */
void *pti_cuda_ptr(const pt_tensor *t);
/* Geometry of ops[0..n_ops) over ops[0]'s shape (inputs already expanded to it). */
void pti_cuda_geom_init(pti_cuda_geom *g, int n_ops, const pt_tensor *const *ops);
/* Fills the mm/bmm slots (blas.c). */
void pti_cuda_register_blas(pti_kernel *table);

#endif
