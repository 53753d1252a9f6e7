/* The Ollama model store (docs/promeserve.md "Model store"): the folder Ollama pulls models
 * into ($OLLAMA_MODELS, default ~/.ollama/models: manifests/<host>/<namespace>/<model>/<tag>
 * -> blobs/sha256-<hex>), read and edited as `ollama list`, `show`, `cp` and `rm` do. The
 * server's /api/tags, /api/show, /api/copy and /api/delete answer from the same code.
 *
 * Names are Ollama's: `[host/][namespace/]model[:tag]`, defaults registry.ollama.ai, library,
 * latest, matched case-insensitively. JSON results are new NUL-terminated strings in Ollama's
 * shapes, freed with free(). Errors: NULL or false with pt_last_status()/pt_last_error():
 * PT_ERR_INVALID_ARG for a bad name, PT_ERR_IO with "model 'x' not found" for a missing model
 * or a file that cannot be read or written, PT_ERR_FORMAT for a broken manifest. */
#ifndef PROMETORCH_MODEL_STORE_H
#define PROMETORCH_MODEL_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default store root: $OLLAMA_MODELS, else $HOME/.ollama/models, written to buf (at most
 * cap bytes). False (PT_ERR_INVALID_ARG) when neither variable is set or it does not fit. */
PT_API bool pt_model_store_root(char *buf, size_t cap);

/* `ollama list` / GET /api/tags: a JSON array of {name, model, modified_at, size, digest,
 * details}, newest first, of every model of the store at root (NULL: none; broken manifests
 * are skipped with a warning on stderr) and every *.gguf file of models_dir (NULL: none;
 * listed by file name). NULL only when out of memory. */
PT_API char *pt_model_store_list(const char *root, const char *models_dir);

/* `ollama show` / POST /api/show: a JSON object (modelfile, parameters, template, system,
 * license, details, model_info, capabilities, ...) of the model `name` of the store at root;
 * verbose: the GGUF's arrays in full (else null, as Ollama). */
PT_API char *pt_model_store_show(const char *root, const char *name, bool verbose);
/* The same for a plain .gguf file, shown under the name `shown` (NULL: the path). */
PT_API char *pt_model_store_show_file(const char *path, const char *shown, bool verbose);

/* `ollama cp SRC DST`: a second name for the model src (the manifest copied; no blob is). */
PT_API bool pt_model_store_copy(const char *root, const char *src, const char *dst);
/* `ollama rm NAME`: removes the manifest, then the blobs no other model uses. */
PT_API bool pt_model_store_delete(const char *root, const char *name);

/* Ollama's format package, as `ollama list` and `show` print numbers (buf: at most cap bytes):
 * sizes in decimal units ("91 MB", "1.5 GB"), counts ("134.52M", "7B"), and how long ago a
 * time was ("2 days ago", "About a minute ago"; seconds since the epoch). */
PT_API void pt_format_bytes(int64_t n, char *buf, size_t cap);
PT_API void pt_format_count(uint64_t n, char *buf, size_t cap);
PT_API void pt_format_ago(int64_t t_s, int64_t now_s, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
