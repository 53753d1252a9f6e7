/* Operations on the Ollama model store behind /api/tags, /api/show, /api/copy, /api/delete,
 * /api/create and /api/blobs, and behind `promeserve list` / `show` (ollama-api.md sections
 * 1.5 and 3). No HTTP here: each operation returns a status the server maps to its reply
 * (PTI_STORE_* equal the HTTP codes Ollama answers with) and sets the library error
 * (pt_last_error) to the message, in Ollama's words where Ollama has them.
 *
 * store_ops.c reads (listing, show, GGUF details, formatting); store_edit.c writes (copy,
 * delete with blob garbage collection, create, blob upload). Every name goes through
 * pti_model_name_parse (so no path can escape the store) and every digest must be
 * "sha256:" + 64 lowercase hex digits. Files are written to a temporary name and renamed, so a
 * reader never sees half a manifest or blob; the write operations of one process are
 * serialised by a lock, so delete's garbage collection never removes a blob that a create
 * running at the same time has just written. */
#ifndef PT_SERVE_STORE_OPS_H
#define PT_SERVE_STORE_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

typedef enum pti_store_status {
    PTI_STORE_OK = 0,
    PTI_STORE_BAD_REQUEST = 400, /* a bad name, digest, field, or a digest mismatch */
    PTI_STORE_NOT_FOUND = 404,   /* the model (or, for copy, the source) does not exist */
    PTI_STORE_FAILED = 500,      /* a file could not be read or written, a broken store */
} pti_store_status;

#define PTI_MEDIA_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define PTI_MEDIA_CONFIG "application/vnd.docker.container.image.v1+json"
#define PTI_MEDIA_PREFIX "application/vnd.ollama.image."

/* ---- small formatting helpers (Ollama's format package) -------------------------------- */

/* Ollama's format.HumanNumber: "134.52M", "4.0B", "7B", "12K", "999". */
void pti_store_human_number(uint64_t n, char *buf, size_t cap);
/* Ollama's format.HumanBytes (decimal units): "91 MB", "1.5 GB", "512 B". */
void pti_store_human_bytes(int64_t n, char *buf, size_t cap);
/* Ollama's format.HumanTime relative to now_s: "2 days ago", "About a minute ago",
 * "Less than a second ago". */
void pti_store_human_time(int64_t t_s, int64_t now_s, char *buf, size_t cap);
/* RFC 3339 with nanoseconds in local time, as Go's time.Time marshals to JSON (trailing zeros
 * of the fraction dropped, "Z" for UTC): "2025-05-17T07:59:32.393035486-07:00". */
void pti_store_rfc3339(int64_t sec, long nsec, char *buf, size_t cap);
/* True for "sha256:" + 64 lowercase hex digits. */
bool pti_store_digest_valid(const char *digest);

/* ---- reading --------------------------------------------------------------------------- */

/* What a GGUF file says about itself (for details, config blobs and `show`). */
typedef struct pti_gguf_facts {
    char family[64];          /* general.architecture */
    char parameter_size[32];  /* pti_store_human_number(parameter_count) */
    char quantization[32];    /* pti_llm_file_type_name(general.file_type) */
    uint64_t parameter_count; /* general.parameter_count, else the sum of the tensors' elements */
    int64_t context_length;   /* <arch>.context_length; 0 when absent */
    int64_t embedding_length; /* <arch>.embedding_length; 0 when absent */
} pti_gguf_facts;

/* Opens the GGUF at path and fills out. False with the reader's error (PT_ERR_IO/FORMAT). */
bool pti_store_gguf_facts(const char *path, pti_gguf_facts *out);

/* /api/tags: a new cJSON array of Ollama's list entries (name, model, modified_at, size,
 * digest, details), newest first: every model of the store at root (NULL or "" for none;
 * broken manifests are skipped with a warning on stderr), every *.gguf file in models_dir
 * (NULL or "" for none) and every path of paths (n_paths entries), listed under their file
 * names with the sha256 of the path as digest. NULL only when out of memory. */
cJSON *pti_store_list(const char *root, const char *models_dir, const char *const *paths,
                      int n_paths);

/* /api/show for a model of the store: a new cJSON object (modelfile, parameters, template,
 * system, license, details, model_info, tensors, capabilities, modified_at; messages when the
 * model has a messages layer). verbose: the GGUF's arrays in full (else null, as Ollama). NULL
 * with *status set (NOT_FOUND "model 'x' not found", BAD_REQUEST for a bad name, FAILED). */
cJSON *pti_store_show(const char *root, const char *name, bool verbose, int *status);
/* The same for a plain .gguf file shown under the name `shown` (template: the GGUF's
 * tokenizer.chat_template). NULL with *status FAILED when the file cannot be read. */
cJSON *pti_store_show_file(const char *path, const char *shown, bool verbose, int *status);

/* ---- writing (store_edit.c) ------------------------------------------------------------ */

/* Copies the manifest of src to dst (both names parsed; the destination's directories made).
 * NOT_FOUND "model 'src' not found" when src does not exist. */
int pti_store_copy(const char *root, const char *src, const char *dst);
/* Removes name's manifest, then every blob of it that no other manifest references, then the
 * directories left empty. NOT_FOUND "model 'name' not found". */
int pti_store_delete(const char *root, const char *name);

/* HEAD /api/blobs/<digest>: OK when blobs/sha256-<hex> exists, NOT_FOUND when not,
 * BAD_REQUEST for a malformed digest. */
int pti_store_blob_check(const char *root, const char *digest);
/* POST /api/blobs/<digest>: hashes tmp_path and renames it to blobs/sha256-<hex> when it
 * matches `digest`; else removes it and answers BAD_REQUEST "digest mismatch, expected
 * sha256:<claimed>, got sha256:<actual>". */
int pti_store_blob_commit(const char *root, const char *tmp_path, const char *digest);

/* Progress of a create, one status string at a time ("parsing GGUF", "using existing layer
 * sha256:...", "creating new layer sha256:...", "writing manifest", "success"). */
typedef void (*pti_store_progress)(const char *status, void *user);

/* POST /api/create with Ollama's request object: model (or legacy name), from, files
 * ({"x.gguf": "sha256:..."}, blobs already uploaded), template, system, license (string or
 * list), parameters (object; stop as a list), messages, quantize (refused: "quantizing is not
 * supported"). Writes the new layers, the config blob and the manifest. progress (may be
 * NULL) is called before each step; an error before the first call is a request error, one
 * after it happened while writing. */
int pti_store_create(const char *root, const cJSON *req, pti_store_progress progress, void *user);

/* ---- shared between store_ops.c and store_edit.c ---------------------------------------- */

/* Reads a whole small file (at most max bytes) into a new NUL-terminated buffer; NULL with
 * PT_ERR_IO or PT_ERR_FORMAT (too large). *len (optional) gets the byte count. */
char *pti_store_read_file(const char *path, size_t max, size_t *len);
/* blobs/sha256-<hex> of a valid digest into buf. False when it does not fit. */
bool pti_store_blob_path(const char *root, const char *digest, char *buf, size_t cap);
/* Reads and checks a manifest file: schemaVersion 2, layers whose digests are valid and
 * sizes non-negative, a valid config digest when there is one. A new cJSON object; NULL with
 * PT_ERR_IO / PT_ERR_FORMAT naming the file. hex (optional) gets the sha256 of its bytes. */
cJSON *pti_store_read_manifest(const char *path, char hex[65]);

/* Calls visit for every manifest file of the store (4 levels under manifests/), with its
 * parsed name and path; names that do not parse are skipped with a warning. visit returns
 * false to stop. */
typedef bool (*pti_store_visit)(const char *name, const char *path, void *user);
void pti_store_walk(const char *root, pti_store_visit visit, void *user);
/* Removes the leftovers of interrupted uploads and creates under the store root last modified
 * before before_s (Unix seconds): files in blobs/ not named sha256-<64 hex> (upload
 * temporaries, as Ollama's PruneLayers removes partial files) and the ".NAME.tmp-PID-N" files
 * of atomic writes in blobs/ and manifests/. Returns how many were removed. */
int pti_store_prune_temporaries(const char *root, int64_t before_s);

/* A file in the store younger than this is never pruned: it may be another process's write
 * whose manifest is not written yet (Ollama's layerPruneGracePeriod, one hour). */
#define PTI_STORE_PRUNE_GRACE_S 3600

/* Ollama's prune at start (PruneLayers, then PruneDirectory of manifests/; the caller skips it
 * when OLLAMA_NOPRUNE is set): when every manifest reads (else nothing is removed, with a
 * warning, as Ollama skips the prune on a corrupt manifest), the files of blobs/ and
 * manifests/ last modified more than PTI_STORE_PRUNE_GRACE_S before now_s that are
 * leftovers (pti_store_prune_temporaries) or blobs no manifest references (its config or a
 * layer) are removed, then the empty directories under manifests/. Returns how many files
 * were removed, -1 when a manifest could not be read. Run it before anything writes. */
int pti_store_prune(const char *root, int64_t now_s);

/* ---- warnings ------------------------------------------------------------------------- */

/* Receives one store warning (a manifest skipped in a listing, pruning refused) as a line
 * without a trailing newline. */
typedef void (*pti_store_warn_fn)(void *user, const char *msg);
/* Sends the calling thread's store warnings to fn (NULL: to stderr as "model store: warning:
 * <msg>", what the CLI prints). The server points it at its log around each request it
 * handles and around its start-up prune. */
void pti_store_set_warn(pti_store_warn_fn fn, void *user);
/* One warning (printf format) to this thread's sink. */
void pti_store_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
