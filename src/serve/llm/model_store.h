/* Model names and the Ollama model store (issue 7; ollama-api.md section 3): parsing
 * `[host/][namespace/]model[:tag][@digest]` with Ollama's defaults (registry.ollama.ai,
 * library, latest), and resolving a name through a store directory
 * (manifests/<host>/<namespace>/<model>/<tag> -> blobs/sha256-<hex>) to the files of its
 * layers, so models pulled by Ollama load without conversion. */
#ifndef PT_SERVE_MODEL_STORE_H
#define PT_SERVE_MODEL_STORE_H

#include <stdbool.h>
#include <stddef.h>

#define PTI_NAME_PART_MAX 350

typedef struct pti_model_name {
    char host[PTI_NAME_PART_MAX + 1];
    char ns[PTI_NAME_PART_MAX + 1];
    char model[PTI_NAME_PART_MAX + 1];
    char tag[PTI_NAME_PART_MAX + 1];
} pti_model_name;

/* Parses s; missing parts take the defaults. False (PT_ERR_INVALID_ARG naming the part) for
 * an empty or over-long part or characters Ollama does not allow: each part starts with a
 * letter, digit or '_', then also '-', '.' (not in a namespace) and ':' (host only: a port);
 * at most 80 characters (host 350). So no part can be "." or "..". A trailing @digest is
 * accepted and ignored. */
bool pti_model_name_parse(const char *s, pti_model_name *out);

/* The short form Ollama's APIs print: default host and namespace dropped, ":tag" kept. Writes
 * at most cap bytes (NUL included); returns the length it needs. */
size_t pti_model_name_format(const pti_model_name *n, char *buf, size_t cap);

/* The store root: $OLLAMA_MODELS, else $HOME/.ollama/models. Writes at most cap bytes; false
 * when neither variable is set or the path does not fit. */
bool pti_model_store_root(char *buf, size_t cap);

/* The files one model of the store is made of (absolute paths; empty string: no such layer). */
typedef struct pti_model_files {
    char model[4096]; /* application/vnd.ollama.image.model: the GGUF file */
    char template_[4096];
    char system[4096];
    char params[4096];
    char manifest[4096];
} pti_model_files;

/* The path of n's manifest in the store at root (components matched case-insensitively, as
 * Ollama does). False with PT_ERR_IO "model 'x' not found" when it does not exist (path then
 * holds the exact-case path it would have). */
bool pti_model_store_manifest_path(const char *root, const pti_model_name *n, char *path,
                                   size_t cap);

/* Resolves n in the store at root: reads and checks the manifest (schemaVersion 2, layers with
 * sha256 digests), and gives each layer's blob path (each blob must exist). Manifest names are
 * matched case-insensitively, as Ollama does. False with PT_ERR_IO ("model 'x' not found" when
 * the manifest does not exist) or PT_ERR_FORMAT (a broken manifest). */
bool pti_model_store_resolve(const char *root, const pti_model_name *n, pti_model_files *out);

#endif
