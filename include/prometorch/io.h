/* PromeTorch checkpoints: reading and writing PyTorch .pt files (torch.save's zip + pickle
 * format and the legacy format) and safetensors, and saving/loading a module's state. Loading
 * never executes anything from the file: pickles run on a restricted VM that knows only the
 * globals torch.load(weights_only=True) accepts. */
#ifndef PROMETORCH_IO_H
#define PROMETORCH_IO_H

#include "types.h"
#include "nn.h"
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

/* ---- reading -------------------------------------------------------------------------------- */

typedef enum pt_file_format {
    PT_FORMAT_AUTO = 0,  /* detected from the first bytes */
    PT_FORMAT_PT_ZIP,    /* torch.save since PyTorch 1.6 (a zip holding data.pkl, data/<key>) */
    PT_FORMAT_PT_LEGACY, /* torch.save(..., _use_new_zipfile_serialization=False) */
    PT_FORMAT_SAFETENSORS,
    PT_FORMAT_PICKLE, /* a bare pickle stream without tensor storages */
} pt_file_format;

/* Options of pt_load_ex; the zero value is pt_load's behaviour. */
typedef struct pt_load_opts {
    pt_file_format format;
    /* Read tensor storages into library memory instead of mapping the file (by default a file's
     * storages are mapped copy-on-write: no copy, nothing read twice, and writes to the tensors
     * never reach the file). */
    bool copy;
    /* Keep instances of classes that are not on the allowlist (a model saved whole with
     * torch.save(model)) as inert dicts {'__class__': 'pkg.module.Name', ...its state...}
     * instead of refusing the file. Nothing is executed either way. */
    bool allow_objects;
} pt_load_opts;

/* Reads a checkpoint written by torch.save (zip or legacy format), safetensors
 * (safetensors.torch.save_file) or pt_save, detected from its bytes, into a value tree as
 * torch.load(path, weights_only=True) returns it: dicts and OrderedDicts -> dict (insertion
 * order kept), list, tuple, set -> list, str, bytes, int, float, bool, None, torch.Size ->
 * tuple, torch.dtype and torch.device -> their str ("torch.float32", "cpu"), tensors and
 * Parameters -> tensors on the CPU with the file's dtype, shape, strides and storage offset
 * (requires_grad kept). Tensors that share a storage in the file share one storage here.
 * Returns a new reference, NULL with the error set:
 * PT_ERR_IO naming the path; PT_ERR_FORMAT "<path>: <what is wrong>" for anything malformed,
 * truncated or inconsistent (every size, offset, count and index in the file is checked);
 * PT_ERR_UNSUPPORTED naming the global for a pickle that refers to code outside the allowlist
 * (e.g. a model pickled whole: load it with pt_load_tensors, or save its state_dict());
 * PT_ERR_DTYPE for a storage type PromeTorch has no dtype for (complex, quantized). */
PT_API pt_value *pt_load(const char *path);
PT_API pt_value *pt_load_ex(const char *path, const pt_load_opts *opts);
/* pt_load_ex on bytes in memory (storages are copied out of the buffer). `name` (may be NULL)
 * names the buffer in error messages. */
PT_API pt_value *pt_load_buffer(const void *data, size_t len, const char *name,
                                const pt_load_opts *opts);
/* Every tensor of a checkpoint as a flat dict "dotted.path" -> tensor, in file order; works
 * also for a model pickled whole (torch.save(model)), whose tensors get the names its
 * state_dict() would give them ("fc1.weight"), without running any of its code. */
PT_API pt_value *pt_load_tensors(const char *path);
/* Reads a safetensors file (mapped; tensors are zero-copy views of the file when aligned). The
 * header is checked: valid JSON object of at most 100 MB, known dtypes, shapes whose element
 * count fits, data_offsets in order, inside the data section, matching shape x dtype size,
 * non-overlapping and covering the section; a repeated key or an unknown field in an entry is
 * refused too. Returns a dict name -> tensor in the order of their offsets (the order
 * safetensors.torch.load_file gives in safetensors 0.8; safe_open(...).keys() sorts by name);
 * *metadata (may be NULL) gets the "__metadata__" dict of str -> str, or an empty dict (also a
 * new reference; NULL on failure). Errors: PT_ERR_IO naming the path; PT_ERR_FORMAT
 * "<path>: safetensors: <what>"; PT_ERR_DTYPE naming a safetensors dtype PromeTorch lacks
 * (F8_E4M3, U16, U32, U64, C64, ...); PT_ERR_UNSUPPORTED for more than 16 dims. */
PT_API pt_value *pt_load_safetensors(const char *path, pt_value **metadata);

/* ---- modules ------------------------------------------------------------------------------- */

/* Saves m's state_dict: as safetensors when path ends in ".safetensors", else as a .pt file
 * (torch.save(model.state_dict(), path)). */
PT_API pt_status pt_nn_save(pt_module *m, const char *path);
/* Loads a state dict from path (any format pt_load reads) into m, as
 * model.load_state_dict(torch.load(path), strict) does; a training checkpoint dict whose
 * tensors sit under one of the keys "model", "state_dict" or "model_state_dict" works too.
 * Values are copied into m's existing tensors (dtype converted as PyTorch's copy_ does). */
PT_API pt_status pt_nn_load(pt_module *m, const char *path, bool strict);

#ifdef __cplusplus
}
#endif
#endif
