/* PromeTorch file formats: writing checkpoints. This header holds the PyTorch .pt writer
 * (pt_save: torch.save's zip + pickle format, loadable by torch.load) and the safetensors
 * writer (pt_save_safetensors); the readers join them with the checkpoint issue. */
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

/* Writes a value tree to `path` as torch.save(obj, path) would (torch 1.6+ zip format), so that
 * torch.load(path) -- also with weights_only=True -- returns the equivalent Python object. The
 * file is a zip of stored (uncompressed) records under a folder named after the file's base
 * name without extension ("ckpt" for "runs/ckpt.pt"; "archive" if that is empty):
 * data.pkl (a protocol-2 pickle of v), byteorder ("little"), data/0, data/1, ... (the raw
 * bytes of each storage, each record starting at a multiple of 64 bytes) and version ("3\n"),
 * with zip64 records for files over 4 GiB, exactly as torch.save lays them out.
 * Mapping: None, bool, int, float, str -> the Python values; list -> list; tuple -> tuple;
 * dict -> dict, except that a non-empty dict of str keys -> tensors (a state dict, as
 * pt_nn_state_dict returns) becomes a collections.OrderedDict like module.state_dict();
 * bytes -> bytes (pickled as CPython does, via _codecs.encode: torch 2.x loads it with
 * weights_only=True, torch 1.13 only with weights_only=False); tensor -> a torch.Tensor of the
 * same dtype, shape, strides and storage offset (requires_grad kept, no autograd history).
 * Tensors sharing a storage are saved as views of one storage written once (the whole
 * storage, as torch does), and a tensor or container that appears twice is pickled once, so
 * torch.load restores the sharing. Device tensors are copied to the host and load on 'cpu'.
 * dtypes: float32/64/16, bfloat16, int64/32/16/8, uint8, bool. The file is written to a
 * temporary name and renamed, so a failed save never leaves a truncated file at `path`.
 * Errors: PT_ERR_INVALID_ARG (NULL path or value, a str that is not valid UTF-8),
 * PT_ERR_DTYPE (a GGUF block dtype), PT_ERR_UNSUPPORTED (one storage viewed as two dtypes,
 * nesting deeper than 1000 levels), PT_ERR_IO naming the path, PT_ERR_OOM. */
PT_API pt_status pt_save(const char *path, const pt_value *v);

#ifdef __cplusplus
}
#endif
#endif
