/* Internal: a zip writer that lays records out exactly as PyTorch's PyTorchStreamWriter (miniz)
 * does for torch.save: stored entries (no compression), each record's data starting at a
 * multiple of 64 bytes (padding in an "FB" local extra field), a data descriptor after each
 * record, zip64 extras for records or offsets at or past 4 GiB, and a zip64 end record plus
 * locator before the classic end record on every archive. Used by pt_save (pt_write.c). */
#ifndef PT_IO_PT_ZIP_WRITE_H
#define PT_IO_PT_ZIP_WRITE_H

#include <stdint.h>
#include <stdio.h>

#include "prometorch/types.h"

typedef struct pti_zip_written_entry {
    char *name;
    uint32_t crc;
    uint64_t size;
    uint64_t offset; /* of the local header */
} pti_zip_written_entry;

typedef struct pti_zip_writer {
    FILE *f;
    const char *path;     /* for error messages */
    const char *op;       /* the public function, for error messages */
    uint64_t pos;         /* bytes written so far */
    uint64_t zip64_limit; /* sizes/offsets >= this use zip64 extras (0xFFFFFFFF normally) */
    pti_zip_written_entry *entries;
    size_t n, cap;
} pti_zip_writer;

/* Starts an archive on an open file. */
void pti_zip_init(pti_zip_writer *z, FILE *f, const char *path, const char *op);
/* Appends one stored record `name` holding `size` bytes of `data` (NULL when size is 0). */
pt_status pti_zip_add(pti_zip_writer *z, const char *name, const void *data, uint64_t size);
/* Writes the central directory and the end records. */
pt_status pti_zip_finish(pti_zip_writer *z);
/* Frees the entry table (not the file). */
void pti_zip_free(pti_zip_writer *z);

#endif
