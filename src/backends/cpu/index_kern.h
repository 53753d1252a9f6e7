/* Helpers shared by the CPU kernel files of the index family (index.c, index_adv.c). */
#ifndef PT_CPU_INDEX_KERN_H
#define PT_CPU_INDEX_KERN_H

#include "cpu.h"

/* PT_ERR_INDEX "pt_<op>: index v is out of bounds for dimension d with size s". */
pt_status pti_index_oob(pti_op op, int64_t v, int dim, int64_t size);
/* Checks 0 <= idx[i] < size for every i (no wrapping). */
pt_status pti_index_check_range(pti_op op, const int64_t *idx, int64_t n, int dim, int64_t size);
/* *dst += alpha * *src for one element of dtype dt (integers wrap; bool is logical or). */
void pti_index_add_elem(char *dst, const char *src, pt_dtype dt, double alpha);
/* A list of source dims walked as one block: sizes and byte strides, merged where contiguous. */
typedef struct pti_index_block {
    int nd;
    int64_t shape[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    int64_t numel;
} pti_index_block;
void pti_index_block_init(pti_index_block *bl, const pt_tensor *t, int n, const int *dims);
/* Byte offset of the element at flat (row-major) position i of the block. */
int64_t pti_index_block_offset(const pti_index_block *bl, int64_t i);
/* True when the block is one contiguous run of elements of size es (or a single element). */
static inline bool pti_index_block_is_run(const pti_index_block *bl, int64_t es)
{
    return bl->nd == 0 || (bl->nd == 1 && bl->stride[0] == es);
}
/* Registers the kernels of index_adv.c. */
void pti_cpu_register_index_adv(pti_kernel *table);

#endif
