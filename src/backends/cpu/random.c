/* CPU kernels of the random family (front-ends in src/ops/random.c). */
#include "cpu.h"

void pti_cpu_register_random(pti_kernel *table)
{
    (void)table;
}
