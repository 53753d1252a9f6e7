/* Settings the index family's front-ends (src/ops/index.c) pass to its kernels
 * (src/backends/<device>/index.c) through pti_call.params. */
#ifndef PT_OPS_INDEX_H
#define PT_OPS_INDEX_H

#include "../core/internal.h"

/* Advanced indexing t[i0, :, i2]: k source dims are indexed by rows of an int64 table
 * [k, nb] (the index tensors broadcast to one shape of nb elements, negative values not yet
 * wrapped). The result, in row-major order, walks the `pre` source dims, then the nb index
 * positions, then the `post` source dims. */
typedef struct pti_index_plan {
    int k;
    int dims[PT_MAX_DIMS];
    int64_t nb;
    int npre, npost;
    int pre[PT_MAX_DIMS], post[PT_MAX_DIMS];
    bool accumulate; /* index_put: add instead of overwrite */
} pti_index_plan;

#endif
