/* Reading zip archives (torch.save's container) from a file map: the central directory with
 * zip64 records, stored and deflated entries, every offset and size checked against the file.
 * Internal; never installed. */
#ifndef PT_IO_ZIP_READ_H
#define PT_IO_ZIP_READ_H

#include "file_map.h"

typedef struct pti_zip_entry {
    const char *name;     /* NUL-terminated; names holding a NUL byte are refused */
    uint16_t method;      /* 0 stored, 8 deflated (others are refused when read) */
    uint32_t crc32;       /* from the central directory */
    uint64_t comp_size;   /* bytes in the archive */
    uint64_t size;        /* bytes once uncompressed */
    uint64_t data_offset; /* of the (compressed) data in the map, after the local header */
} pti_zip_entry;

typedef struct pti_zip pti_zip;

/* Parses the archive in m (takes a reference to m). Checks: the end-of-central-directory record
 * (and the zip64 one when any field is saturated) lies inside the file, the directory's
 * entries and every local header lie inside the file, each entry's data lies inside the file
 * and entries do not overlap, names are unique and NUL-free, flags show no encryption, the
 * number of entries matches the directory. NULL with PT_ERR_FORMAT "<name>: zip: <what is
 * wrong>" otherwise. */
pti_zip *pti_zip_open(pti_file_map *m);
void pti_zip_close(pti_zip *z);

int64_t pti_zip_count(const pti_zip *z);
/* Entry i (0 <= i < count) in central-directory order. */
const pti_zip_entry *pti_zip_entry_at(const pti_zip *z, int64_t i);
/* The entry named exactly `name`, or NULL (no error set). */
const pti_zip_entry *pti_zip_find(const pti_zip *z, const char *name);
pti_file_map *pti_zip_map(const pti_zip *z);

/* The bytes of an entry in a malloc'd buffer of entry->size bytes (+1 byte, set to 0), with
 * *len set to entry->size: stored entries are copied, deflated ones inflated. Refuses
 * (PT_ERR_FORMAT) an entry larger than max_bytes, an unknown method, inflated data whose length
 * differs from the declared size (a zip bomb declaring a small size is stopped at that size,
 * never inflated further), corrupt deflate data, and a CRC-32 that does not match. */
uint8_t *pti_zip_read(const pti_zip *z, const pti_zip_entry *e, uint64_t max_bytes, size_t *len);

#endif
