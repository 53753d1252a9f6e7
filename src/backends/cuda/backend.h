/* Declarations shared by the C files of the CUDA backend (backend.c, blas.c): the per-device
 * context, error conversion, device selection and geometry for the kernel launchers. The
 * backend is its own shared object (libprometorch_cuda.so) and a client of the public API
 * only: it includes prometorch/prometorch.h (with prometorch/backend.h), never src/core. */
#ifndef PT_CUDA_BACKEND_H
#define PT_CUDA_BACKEND_H

#include <pthread.h>

#include <prometorch/prometorch.h>

#include "cuda.h"

/* Devices beyond this index are ignored. */
#define PTI_CUDA_MAX_DEVICES 16

/* Size classes of the caching allocator (backend.c). */
#define PTI_CUDA_N_CLASSES (1 + 64 * 8)

/* One class's cached blocks: a host-side stack of device pointers. */
typedef struct pti_cuda_block_stack {
    void **ptrs;
    int count, cap;
} pti_cuda_block_stack;

/* The context of one device (pt_backend_desc.context_create, made on its first use): its
 * index, its caching allocator and its cuBLAS handle. */
typedef struct pti_cuda_ctx {
    int index;
    pthread_mutex_t lock; /* guards the cache and the handle */
    pti_cuda_block_stack classes[PTI_CUDA_N_CLASSES];
    size_t cached_bytes, live_bytes;
    void *blas; /* cublasHandle_t, created on the first GEMM (blas.c) */
} pti_cuda_ctx;

/* True once the process is exiting (this object's destructor ran): contexts are then freed
 * without calls into the CUDA runtime, which may already be torn down. */
extern bool pti_cuda_exiting;

/* PT_OK for cudaSuccess; otherwise records PT_ERR_OOM (out of memory) or PT_ERR_RUNTIME with
 * "cuda: <call> failed: <cudaGetErrorString text>" and returns it. err is a cudaError_t. */
pt_status pti_cuda_check(int err, const char *call);
/* cudaSetDevice(index) through pti_cuda_check. */
pt_status pti_cuda_set_device(int index);
/* Geometry of ops[0..n_ops) over ops[0]'s shape (inputs already expanded to it). */
void pti_cuda_geom_init(pti_cuda_geom *g, int n_ops, const pt_tensor *const *ops);
/* The mm/bmm kernels (blas.c) and the release of a context's cuBLAS handle. */
pt_status pti_cuda_mm(const pt_kernel_call *c);
pt_status pti_cuda_bmm(const pt_kernel_call *c);
void pti_cuda_blas_release(pti_cuda_ctx *ctx);

#endif
