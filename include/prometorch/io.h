/* PromeTorch file formats: writing checkpoints. This header holds the safetensors writer; the
 * .pt (zip + pickle) reader and writer and the safetensors reader join it with the checkpoint
 * issue. */
#ifndef PROMETORCH_IO_H
#define PROMETORCH_IO_H

#include "types.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes a state dict (a pt_value dict of str keys -> tensors, as pt_nn_state_dict returns) to
 * `path` in the safetensors format (safetensors.torch.save_file(state_dict, path)): an 8-byte
 * little-endian header length, a JSON header {"key": {"dtype": "F32", "shape": [...],
 * "data_offsets": [begin, end]}, ...} padded with spaces to a multiple of 8 bytes, then the
 * tensors' bytes, contiguous, little-endian, in the dict's order. Tensors on other devices are
 * copied to the host. dtypes: float64/32/16, bfloat16, int64/32/16/8, uint8, bool (F64, F32,
 * F16, BF16, I64, I32, I16, I8, U8, BOOL). `metadata` (may be NULL) is a dict of str -> str
 * written as "__metadata__". The file is written to a temporary name and renamed, so a failed
 * save never leaves a truncated checkpoint at `path`.
 * Errors: PT_ERR_INVALID_ARG (not a dict, a non-str key, a key "__metadata__", a non-tensor
 * value), PT_ERR_DTYPE (a GGUF block dtype), PT_ERR_IO naming the path. */
PT_API pt_status pt_save_safetensors(const char *path, const pt_value *state_dict,
                                     const pt_value *metadata);

#ifdef __cplusplus
}
#endif
#endif
