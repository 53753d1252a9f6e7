/* Declarations shared by the reduce family's CPU kernel files (reduce.c, reduce_f32.c,
 * reduce_dim.c, reduce_dim_avx512.c): the reduction geometry and the float32 fast paths. */
#ifndef PT_CPU_REDUCE_IMPL_H
#define PT_CPU_REDUCE_IMPL_H

#include <math.h>

#include "cpu.h"

#include "simd_math.h"

/* An input split into kept dims (the output's, row-major) and reduced dims, each listed
 * innermost first and coalesced; strides in elements. */
typedef struct pti_rgeom {
    int nk, nr;
    int64_t ks[PT_MAX_DIMS], kst[PT_MAX_DIMS];
    int64_t rs[PT_MAX_DIMS], rst[PT_MAX_DIMS];
    int64_t nout, nred;
    int64_t run, run_stride; /* innermost reduced dim (1 and 0 when none) */
} pti_rgeom;

/* bits: bit d set = tensor dim d is reduced. */
void pti_rgeom_init(pti_rgeom *g, const pt_tensor *t, uint32_t bits);
/* Input element offset of output element o's first reduced element. */
int64_t pti_rgeom_out_offset(const pti_rgeom *g, int64_t o);
/* float32 fast paths (contiguous rows, columns, split whole reductions); false when the op or
 * layout is not covered and the generic path must run. */
bool pti_reduce_f32_fast(const pti_call *c, const pti_rgeom *g);
void pti_cpu_register_reduce_dim(pti_kernel *table);
/* softmax (lg false) or log_softmax (lg true) of rows [begin, end) of n contiguous floats, x to
 * y; the AVX-512 loops of reduce_dim_avx512.c (only when pti_cpu_has_avx512()). */
void pti_softmax_rows_avx512(const float *x, float *y, int64_t n, int64_t begin, int64_t end,
                             bool lg);

#endif
