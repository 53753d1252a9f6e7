/* Internal entry of the quant family used by other families' front-ends. */
#ifndef PT_OPS_QUANT_H
#define PT_OPS_QUANT_H

#include "../core/internal.h"

/* pt_embedding's path for a block-dtype weight [V, D] (D a multiple of the block size,
 * contiguous): float32 rows indices.shape + [D], only the looked-up rows dequantized.
 * padding_idx is validated by the caller; it does not change the forward result. */
pt_tensor *pti_fwd_embedding_quant(const pt_tensor *weight, const pt_tensor *indices);

#endif
