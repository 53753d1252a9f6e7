/* A restricted pickle VM: reads Python pickles (protocols 0-5, as torch.save writes them) into
 * pt_value trees without ever executing anything. Only the globals PyTorch's own weights_only
 * loader accepts are understood (tensor/parameter rebuild functions, storage classes,
 * OrderedDict, torch.Size, dtypes, ...); any other global is refused with an error naming it,
 * or, when the caller allows objects, kept as an inert stub. Internal; never installed. */
#ifndef PT_IO_PICKLE_READ_H
#define PT_IO_PICKLE_READ_H

#include "../value/value_internal.h"

/* Limits that keep hostile pickles from exhausting memory or the C stack. */
#define PTI_PICKLE_MAX_DEPTH 1000        /* nesting of containers in the result */
#define PTI_PICKLE_MAX_EXPANDED 50000000 /* nodes in the result counted as if unshared */
#define PTI_PICKLE_EXPANDED_PER_BYTE 8   /* ... and at most this many per input byte */
#define PTI_PICKLE_EXPANDED_BASE 65536   /* ... plus this many */

typedef struct pti_unpickle_opts {
    /* File name (or "<name>/data.pkl") used as the prefix of every error message. */
    const char *what;
    /* Called for PERSID/BINPERSID with the persistent id (borrowed; for torch a tuple
     * ('storage', <global torch.FloatStorage>, '0', 'cpu', 4[, view metadata])). Returns a new
     * reference -- for storages a 1-D tensor value over the whole storage, of the storage's
     * dtype -- or NULL with the error set. NULL callback: persistent ids are refused. */
    pt_value *(*persistent_load)(void *ctx, const pt_value *pid);
    void *ctx;
    /* Instances of classes outside the allowlist (a model pickled whole with torch.save(model))
     * become dicts {'__class__': 'pkg.module.Name', ...the object's state...} instead of an
     * error; calls of other non-allowlisted globals become {'__class__': name, '__args__':
     * args}. Nothing is executed either way. */
    bool allow_objects;
} pti_unpickle_opts;

/* Reads one pickle from data[0..len) up to its STOP opcode; *consumed (may be NULL) gets the
 * number of bytes used, so a caller can read several pickles in a row (the legacy .pt
 * format). Returns a new reference holding only public pt_value kinds (sets become lists,
 * torch.Size a tuple, torch.device and dtypes their str, OrderedDict a dict, tensors and
 * parameters tensors sharing the persistent storages, requires_grad kept). NULL with
 * PT_ERR_FORMAT "<what>: pickle: <problem> at byte <offset>" for a truncated or malformed
 * pickle, stack underflow, a memo index never stored, an unsupported opcode, nesting deeper
 * than PTI_PICKLE_MAX_DEPTH, a reference cycle or more nodes than the expanded-size limits
 * allow (8 per input byte + 65536, at most PTI_PICKLE_MAX_EXPANDED);
 * PT_ERR_UNSUPPORTED "<what>: pickle: global 'os.system' is not allowed ..." for a global
 * outside the allowlist. */
pt_value *pti_unpickle(const uint8_t *data, size_t len, const pti_unpickle_opts *o,
                       size_t *consumed);

/* "module.name" of a global as it appears inside a persistent id given to persistent_load
 * (e.g. "torch.FloatStorage"), or NULL when v is not a global. */
const char *pti_pickle_global_name(const pt_value *v);

#endif
