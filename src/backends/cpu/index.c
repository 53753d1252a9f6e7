/* CPU kernels of the index family (front-ends in src/ops/index.c). */
#include "cpu.h"

void pti_cpu_register_index(pti_kernel *table)
{
    (void)table;
}
