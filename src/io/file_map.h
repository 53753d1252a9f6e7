/* A whole file (or a caller's buffer) in memory for the readers of src/io: files are mapped
 * copy-on-write (MAP_PRIVATE, readable and writable), so tensors made over the mapping can be
 * modified without touching the file and a multi-GB checkpoint is never read twice. The
 * mapping is reference-counted: every storage that points into it holds one reference, and
 * the memory is unmapped when the last one goes. Internal; never installed. */
#ifndef PT_IO_FILE_MAP_H
#define PT_IO_FILE_MAP_H

#include "../core/internal.h"

typedef struct pti_file_map pti_file_map;

/* Maps `path` whole. An empty file gives a valid map of size 0. NULL with PT_ERR_IO naming the
 * path (and the system's reason) when it cannot be opened, is not a regular file or cannot be
 * mapped. */
pti_file_map *pti_file_map_open(const char *path);
/* A map over a caller's buffer, which must outlive the map and everything made from it; the
 * buffer is not copied and never written (readers copy storages out of borrowed maps). */
pti_file_map *pti_file_map_borrow(const void *data, size_t size, const char *name);

const uint8_t *pti_file_map_data(const pti_file_map *m);
size_t pti_file_map_size(const pti_file_map *m);
/* The path or name given when it was made, for error messages. */
const char *pti_file_map_name(const pti_file_map *m);
/* True for a mapped file (storages may point into it); false for a borrowed buffer. */
bool pti_file_map_is_owned(const pti_file_map *m);

pti_file_map *pti_file_map_retain(pti_file_map *m);
void pti_file_map_release(pti_file_map *m);

/* A CPU storage of `nbytes` bytes at `offset` in the map: for a mapped file and a suitably
 * aligned offset, a zero-copy storage over the mapping that holds a reference to it; otherwise
 * (a borrowed buffer, or an offset not aligned to `align` bytes) a copy into library memory.
 * The caller has checked that offset + nbytes lies inside the map. NULL with PT_ERR_OOM. */
pt_storage *pti_file_map_storage(pti_file_map *m, uint64_t offset, uint64_t nbytes, size_t align,
                                 bool force_copy);

#endif
