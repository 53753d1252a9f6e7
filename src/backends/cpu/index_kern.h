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
/* Registers the kernels of index_adv.c. */
void pti_cpu_register_index_adv(pti_kernel *table);

#endif
