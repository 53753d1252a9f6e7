/* Reading zip archives (torch.save's container) from a file map; see zip_read.h.
 *
 * The archive comes from a stranger, so nothing in it is trusted. Opening walks the structure
 * from the end, the way the format is meant to be read:
 *   1. the end-of-central-directory record (EOCD), searched for in the last 65557 bytes
 *      (22-byte record + at most 65535 bytes of comment);
 *   2. when a zip64 locator sits just before it (torch's miniz always writes one), the zip64
 *      EOCD record it points to, whose 64-bit fields replace the saturated 16/32-bit ones;
 *   3. the central directory: one 46-byte header per entry plus its name, extra fields (zip64
 *      sizes/offset in extra 0x0001) and comment, all of it inside the directory's bytes;
 *   4. each entry's local header, whose own name/extra lengths give where the data starts.
 * Every offset and length is checked against what it must lie inside before it is used, and
 * additions are written so that they cannot wrap. No allocation is sized by a field before the
 * field has been bounded by the bytes actually present (an entry count by the directory size,
 * an inflated size by the caller's limit and by deflate's maximum expansion).
 *
 * Entries keep the central directory's order; an array of them sorted by name serves
 * pti_zip_find (binary search) and shows duplicate names as neighbours. A sorted array rather
 * than a hash table: names are chosen by the file's author, who could make them all collide in
 * an unkeyed hash and turn opening into quadratic work. Overlapping entries -- a classic way
 * to make one compressed stream count many times -- are found by sorting by offset. */
#include "zip_read.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u

#define EOCD_SIZE 22
#define EOCD64_SIZE 56
#define LOCATOR64_SIZE 20
#define CENTRAL_SIZE 46
#define LOCAL_SIZE 30
#define MAX_COMMENT 65535

#define FLAG_ENCRYPTED 0x0001u
#define FLAG_DESCRIPTOR 0x0008u
#define FLAG_STRONG_ENCRYPTION 0x0040u
#define FLAG_MASKED_HEADERS 0x2000u

#define EXTRA_ZIP64 0x0001u

/* deflate's best ratio is 1032:1 (258-byte matches coded in 2 bits); the slack covers block
 * headers and tiny inputs. */
#define DEFLATE_MAX_RATIO 1032u
#define DEFLATE_SLACK 1024u

struct pti_zip {
    pti_file_map *map;
    const char *file; /* the map's name, for messages */
    int64_t count;
    pti_zip_entry *entries;
    char *names;                   /* every name, NUL-terminated, back to back */
    const pti_zip_entry **by_name; /* the entries sorted by name (strcmp order) */
};

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p)
{
    return rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}

/* True when [off, off + len) lies inside [0, limit). */
static bool fits(uint64_t off, uint64_t len, uint64_t limit)
{
    return len <= limit && off <= limit - len;
}

/* ---- end records ----------------------------------------------------------------------------- */

typedef struct end_info {
    uint64_t count;     /* entries in the directory */
    uint64_t cd_offset; /* where the central directory starts */
    uint64_t cd_size;
    uint64_t cd_limit; /* the directory must end by here (the first end record) */
} end_info;

/* Finds the classic EOCD: the last signature in the tail whose comment fits in the file. */
static bool find_eocd(const char *file, const uint8_t *d, size_t size, size_t *pos)
{
    if (size < EOCD_SIZE) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: file of %zu bytes is too short for an end-of-central-directory "
                  "record (%d bytes)",
                  file, size, EOCD_SIZE);
        return false;
    }
    size_t last = size - EOCD_SIZE;
    size_t first = last > MAX_COMMENT ? last - MAX_COMMENT : 0;
    bool seen = false;
    for (size_t p = last + 1; p-- > first;) {
        if (rd32(d + p) != SIG_EOCD)
            continue;
        seen = true;
        if (rd16(d + p + 20) <= size - (p + EOCD_SIZE)) {
            *pos = p;
            return true;
        }
    }
    if (seen)
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: the end-of-central-directory record's comment runs past the end of "
                  "the file",
                  file);
    else
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: no end-of-central-directory record in the last %zu bytes (not a zip "
                  "file, or truncated)",
                  file, size - first);
    return false;
}

/* Reads the zip64 locator + record before the EOCD at `eocd`, replacing saturated fields. */
static bool read_zip64_end(const char *file, const uint8_t *d, size_t eocd, end_info *end,
                           bool saturated)
{
    if (eocd < LOCATOR64_SIZE || rd32(d + eocd - LOCATOR64_SIZE) != SIG_LOCATOR64) {
        if (!saturated)
            return true;
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: the end-of-central-directory record has saturated fields but no "
                  "zip64 locator precedes it",
                  file);
        return false;
    }
    const uint8_t *loc = d + eocd - LOCATOR64_SIZE;
    uint32_t disk = rd32(loc + 4), disks = rd32(loc + 16);
    uint64_t rec = rd64(loc + 8);
    if (disk != 0 || disks > 1) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: the zip64 locator describes a multi-disk archive (disk %u of %u)", file,
                  disk, disks);
        return false;
    }
    uint64_t limit = eocd - LOCATOR64_SIZE;
    if (!fits(rec, EOCD64_SIZE, limit)) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: the zip64 end record at offset %llu (+%d bytes) lies outside the "
                  "%llu bytes before the locator",
                  file, (unsigned long long)rec, EOCD64_SIZE, (unsigned long long)limit);
        return false;
    }
    const uint8_t *r = d + rec;
    if (rd32(r) != SIG_EOCD64) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: no zip64 end record signature at offset %llu (found 0x%08x)", file,
                  (unsigned long long)rec, rd32(r));
        return false;
    }
    uint64_t rec_size = rd64(r + 4);
    if (rec_size < EOCD64_SIZE - 12 || !fits(rec + 12, rec_size, limit)) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: the zip64 end record's size %llu is out of range (at least %d, "
                  "ending by offset %llu)",
                  file, (unsigned long long)rec_size, EOCD64_SIZE - 12, (unsigned long long)limit);
        return false;
    }
    uint32_t this_disk = rd32(r + 16), cd_disk = rd32(r + 20);
    uint64_t n_disk = rd64(r + 24), n = rd64(r + 32), cd_size = rd64(r + 40), cd_off = rd64(r + 48);
    if (this_disk != 0 || cd_disk != 0 || n_disk != n) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: the zip64 end record describes a multi-disk archive (disk %u, "
                  "directory on disk %u, %llu of %llu entries on this disk)",
                  file, this_disk, cd_disk, (unsigned long long)n_disk, (unsigned long long)n);
        return false;
    }
    /* a classic field that is not saturated must agree with its zip64 version */
    if ((end->count != 0xFFFF && end->count != n) ||
        (end->cd_size != 0xFFFFFFFFu && end->cd_size != cd_size) ||
        (end->cd_offset != 0xFFFFFFFFu && end->cd_offset != cd_off)) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: the classic and zip64 end records disagree (entries %llu vs %llu, "
                  "directory size %llu vs %llu, offset %llu vs %llu)",
                  file, (unsigned long long)end->count, (unsigned long long)n,
                  (unsigned long long)end->cd_size, (unsigned long long)cd_size,
                  (unsigned long long)end->cd_offset, (unsigned long long)cd_off);
        return false;
    }
    end->count = n;
    end->cd_size = cd_size;
    end->cd_offset = cd_off;
    end->cd_limit = rec;
    return true;
}

static bool read_end(const char *file, const uint8_t *d, size_t size, end_info *end)
{
    size_t eocd;
    if (!find_eocd(file, d, size, &eocd))
        return false;
    const uint8_t *e = d + eocd;
    uint16_t disk = rd16(e + 4), cd_disk = rd16(e + 6), n_disk = rd16(e + 8), n = rd16(e + 10);
    end->cd_size = rd32(e + 12);
    end->cd_offset = rd32(e + 16);
    end->count = n;
    end->cd_limit = eocd;
    bool saturated = disk == 0xFFFF || cd_disk == 0xFFFF || n_disk == 0xFFFF || n == 0xFFFF ||
                     end->cd_size == 0xFFFFFFFFu || end->cd_offset == 0xFFFFFFFFu;
    if (!saturated && (disk != 0 || cd_disk != 0 || n_disk != n)) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: multi-disk archives are not supported (disk %u, directory on disk "
                  "%u, %u of %u entries on this disk)",
                  file, disk, cd_disk, n_disk, n);
        return false;
    }
    if (!read_zip64_end(file, d, eocd, end, saturated))
        return false;
    if (!fits(end->cd_offset, end->cd_size, end->cd_limit)) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: central directory runs past its end (offset %llu + %llu > %llu)", file,
                  (unsigned long long)end->cd_offset, (unsigned long long)end->cd_size,
                  (unsigned long long)end->cd_limit);
        return false;
    }
    if (end->count > end->cd_size / CENTRAL_SIZE) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: %llu entries cannot fit in a central directory of %llu bytes (%d "
                  "bytes each at least)",
                  file, (unsigned long long)end->count, (unsigned long long)end->cd_size,
                  CENTRAL_SIZE);
        return false;
    }
    if (end->count >= UINT32_MAX / 2) {
        pti_error(PT_ERR_FORMAT, "%s: zip: too many entries (%llu)", file,
                  (unsigned long long)end->count);
        return false;
    }
    return true;
}

/* ---- extra fields ---------------------------------------------------------------------------- */

/* Replaces the saturated values among *usize, *csize, *offset (NULL = not in this header) and
 * *disk from the zip64 extra field, which holds exactly the saturated ones in that order. */
static bool apply_zip64_extra(const char *file, const char *where, const char *name,
                              const uint8_t *extra, size_t extra_len, uint64_t *usize,
                              uint64_t *csize, uint64_t *offset, uint32_t *disk)
{
    bool need = (usize && *usize == 0xFFFFFFFFu) || (csize && *csize == 0xFFFFFFFFu) ||
                (offset && *offset == 0xFFFFFFFFu) || (disk && *disk == 0xFFFF);
    size_t p = 0;
    while (p < extra_len) {
        if (extra_len - p < 4) {
            pti_error(PT_ERR_FORMAT,
                      "%s: zip: entry '%s': %s extra field header runs past the extra data (%zu "
                      "of %zu bytes)",
                      file, name, where, p, extra_len);
            return false;
        }
        uint16_t tag = rd16(extra + p), len = rd16(extra + p + 2);
        if (len > extra_len - p - 4) {
            pti_error(PT_ERR_FORMAT,
                      "%s: zip: entry '%s': %s extra field 0x%04x of %u bytes runs past the "
                      "extra data (%zu bytes left)",
                      file, name, where, tag, len, extra_len - p - 4);
            return false;
        }
        if (tag == EXTRA_ZIP64 && need) {
            const uint8_t *v = extra + p + 4;
            size_t left = len;
            uint64_t *fields[3] = {usize, csize, offset};
            static const char *labels[3] = {"size", "compressed size", "local header offset"};
            for (int i = 0; i < 3; i++) {
                if (!fields[i] || *fields[i] != 0xFFFFFFFFu)
                    continue;
                if (left < 8) {
                    pti_error(PT_ERR_FORMAT,
                              "%s: zip: entry '%s': %s zip64 extra field of %u bytes lacks the "
                              "%s",
                              file, name, where, len, labels[i]);
                    return false;
                }
                *fields[i] = rd64(v);
                v += 8;
                left -= 8;
            }
            if (disk && *disk == 0xFFFF) {
                if (left < 4) {
                    pti_error(PT_ERR_FORMAT,
                              "%s: zip: entry '%s': %s zip64 extra field of %u bytes lacks the "
                              "disk number",
                              file, name, where, len);
                    return false;
                }
                *disk = rd32(v);
            }
            return true;
        }
        p += 4 + (size_t)len;
    }
    if (need) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: entry '%s': %s header has saturated fields but no zip64 extra field",
                  file, name, where);
        return false;
    }
    return true;
}

/* ---- central directory and local headers ----------------------------------------------------- */

/* Parses central header i at *pos (advancing it) into z->entries[i], its name into *names. */
static bool read_central(pti_zip *z, const uint8_t *d, const end_info *end, uint64_t *pos,
                         int64_t i, char **names, uint16_t *flags_out)
{
    const char *file = z->file;
    uint64_t cd_end = end->cd_offset + end->cd_size;
    if (!fits(*pos, CENTRAL_SIZE, cd_end)) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: central directory header %lld at offset %llu runs past the "
                  "directory's end (%llu)",
                  file, (long long)i, (unsigned long long)*pos, (unsigned long long)cd_end);
        return false;
    }
    const uint8_t *h = d + *pos;
    if (rd32(h) != SIG_CENTRAL) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: bad central directory header signature 0x%08x for entry %lld at "
                  "offset %llu",
                  file, rd32(h), (long long)i, (unsigned long long)*pos);
        return false;
    }
    uint16_t flags = rd16(h + 8), method = rd16(h + 10);
    uint32_t crc = rd32(h + 16);
    uint64_t csize = rd32(h + 20), usize = rd32(h + 24);
    size_t name_len = rd16(h + 28), extra_len = rd16(h + 30), comment_len = rd16(h + 32);
    uint32_t disk = rd16(h + 34);
    uint64_t local = rd32(h + 42);
    uint64_t var_len = (uint64_t)name_len + extra_len + comment_len;
    if (!fits(*pos + CENTRAL_SIZE, var_len, cd_end)) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: central directory entry %lld's name, extra and comment (%zu + %zu + "
                  "%zu bytes) run past the directory's end",
                  file, (long long)i, name_len, extra_len, comment_len);
        return false;
    }
    const uint8_t *raw_name = h + CENTRAL_SIZE;
    if (memchr(raw_name, 0, name_len)) {
        pti_error(PT_ERR_FORMAT, "%s: zip: entry %lld's name holds a NUL byte", file, (long long)i);
        return false;
    }
    char *name = *names;
    memcpy(name, raw_name, name_len);
    name[name_len] = 0;
    *names += name_len + 1;
    if (flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION | FLAG_MASKED_HEADERS)) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: entry '%s' is encrypted (flags 0x%04x); encrypted archives are not "
                  "supported",
                  file, name, flags);
        return false;
    }
    if (!apply_zip64_extra(file, "central", name, raw_name + name_len, extra_len, &usize, &csize,
                           &local, &disk))
        return false;
    if (disk != 0) {
        pti_error(PT_ERR_FORMAT, "%s: zip: entry '%s' starts on disk %u (multi-disk archive)", file,
                  name, disk);
        return false;
    }
    if (method == 0 && csize != usize) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: stored entry '%s' has different sizes (%llu compressed, %llu "
                  "uncompressed)",
                  file, name, (unsigned long long)csize, (unsigned long long)usize);
        return false;
    }
    *pos += CENTRAL_SIZE + var_len;
    *flags_out = flags;
    z->entries[i] = (pti_zip_entry){.name = name,
                                    .method = method,
                                    .crc32 = crc,
                                    .comp_size = csize,
                                    .size = usize,
                                    .data_offset = local};
    return true;
}

/* Checks entry e's local header (e->data_offset holds its offset on entry) and sets
 * e->data_offset to where the data starts; the data must end by `limit`. */
static bool read_local(const pti_zip *z, const uint8_t *d, uint64_t limit, pti_zip_entry *e,
                       uint16_t central_flags)
{
    const char *file = z->file;
    uint64_t off = e->data_offset;
    if (!fits(off, LOCAL_SIZE, limit)) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: entry '%s': local header at offset %llu (+%d bytes) lies past the "
                  "data area's end (%llu)",
                  file, e->name, (unsigned long long)off, LOCAL_SIZE, (unsigned long long)limit);
        return false;
    }
    const uint8_t *h = d + off;
    if (rd32(h) != SIG_LOCAL) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: entry '%s': bad local header signature 0x%08x at offset %llu", file,
                  e->name, rd32(h), (unsigned long long)off);
        return false;
    }
    uint16_t flags = rd16(h + 6);
    uint64_t csize = rd32(h + 18), usize = rd32(h + 22);
    size_t name_len = rd16(h + 26), extra_len = rd16(h + 28);
    uint64_t data = off + LOCAL_SIZE + name_len + extra_len; /* cannot wrap: off < limit */
    if (data > limit) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: entry '%s': local name and extra (%zu + %zu bytes) run past the data "
                  "area's end (%llu)",
                  file, e->name, name_len, extra_len, (unsigned long long)limit);
        return false;
    }
    if (name_len != strlen(e->name) || memcmp(h + LOCAL_SIZE, e->name, name_len) != 0) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: entry '%s': the local header names it differently (%zu bytes)", file,
                  e->name, name_len);
        return false;
    }
    if (!fits(data, e->comp_size, limit)) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: entry '%s': data runs past the data area's end (offset %llu + %llu > "
                  "%llu)",
                  file, e->name, (unsigned long long)data, (unsigned long long)e->comp_size,
                  (unsigned long long)limit);
        return false;
    }
    /* Without a data descriptor (bit 3) the local sizes are real: they must agree with the
     * directory's, or another reader could see different contents. */
    if (!((flags | central_flags) & FLAG_DESCRIPTOR)) {
        if (!apply_zip64_extra(file, "local", e->name, h + LOCAL_SIZE + name_len, extra_len, &usize,
                               &csize, NULL, NULL))
            return false;
        if (usize != e->size || csize != e->comp_size) {
            pti_error(PT_ERR_FORMAT,
                      "%s: zip: entry '%s': local header sizes (%llu, %llu compressed) differ "
                      "from the central directory's (%llu, %llu)",
                      file, e->name, (unsigned long long)usize, (unsigned long long)csize,
                      (unsigned long long)e->size, (unsigned long long)e->comp_size);
            return false;
        }
    }
    e->data_offset = data;
    return true;
}

/* ---- overlap and name index ------------------------------------------------------------------ */

typedef struct span {
    uint64_t start, end;
    int64_t index;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

static bool check_overlap(const pti_zip *z, span *spans)
{
    qsort(spans, (size_t)z->count, sizeof *spans, span_cmp);
    for (int64_t i = 1; i < z->count; i++) {
        if (spans[i].start < spans[i - 1].end) {
            pti_error(PT_ERR_FORMAT,
                      "%s: zip: entries '%s' and '%s' overlap (bytes %llu..%llu and %llu..%llu)",
                      z->file, z->entries[spans[i - 1].index].name, z->entries[spans[i].index].name,
                      (unsigned long long)spans[i - 1].start, (unsigned long long)spans[i - 1].end,
                      (unsigned long long)spans[i].start, (unsigned long long)spans[i].end);
            return false;
        }
    }
    return true;
}

static int by_name_cmp(const void *a, const void *b)
{
    const pti_zip_entry *x = *(const pti_zip_entry *const *)a;
    const pti_zip_entry *y = *(const pti_zip_entry *const *)b;
    return strcmp(x->name, y->name);
}

static bool build_index(pti_zip *z)
{
    size_t n = (size_t)z->count;
    z->by_name = pti_malloc((n ? n : 1) * sizeof *z->by_name);
    if (!z->by_name) {
        pti_error(PT_ERR_OOM, "%s: zip: out of memory indexing %zu entries", z->file, n);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        z->by_name[i] = &z->entries[i];
    qsort(z->by_name, n, sizeof *z->by_name, by_name_cmp);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(z->by_name[i - 1]->name, z->by_name[i]->name) == 0) {
            long long a = (long long)(z->by_name[i - 1] - z->entries);
            long long b = (long long)(z->by_name[i] - z->entries);
            pti_error(PT_ERR_FORMAT, "%s: zip: duplicate entry name '%s' (entries %lld and %lld)",
                      z->file, z->by_name[i]->name, a < b ? a : b, a < b ? b : a);
            return false;
        }
    }
    return true;
}

/* ---- open / close / lookup ------------------------------------------------------------------- */

/* Reads the directory and local headers into z (entries, names already allocated). */
static bool read_entries(pti_zip *z, const uint8_t *d, const end_info *end, span *spans)
{
    uint64_t pos = end->cd_offset;
    char *names = z->names;
    for (int64_t i = 0; i < z->count; i++) {
        uint16_t flags;
        if (!read_central(z, d, end, &pos, i, &names, &flags))
            return false;
        pti_zip_entry *e = &z->entries[i];
        spans[i].start = e->data_offset;
        spans[i].index = i;
        /* entry data lies before the central directory */
        if (!read_local(z, d, end->cd_offset, e, flags))
            return false;
        spans[i].end = e->data_offset + e->comp_size;
    }
    if (pos != end->cd_offset + end->cd_size) {
        pti_error(PT_ERR_FORMAT,
                  "%s: zip: the central directory holds %llu bytes after its %lld entries", z->file,
                  (unsigned long long)(end->cd_offset + end->cd_size - pos), (long long)z->count);
        return false;
    }
    return true;
}

pti_zip *pti_zip_open(pti_file_map *m)
{
    if (!m) {
        if (pt_last_status() == PT_OK)
            pti_error(PT_ERR_NULL, "pti_zip_open: NULL file map");
        return NULL;
    }
    const char *file = pti_file_map_name(m);
    const uint8_t *d = pti_file_map_data(m);
    size_t size = pti_file_map_size(m);
    end_info end;
    if (!read_end(file, d, size, &end))
        return NULL;

    pti_zip *z = pti_calloc(1, sizeof *z);
    span *spans = NULL;
    if (!z)
        return pti_error_null(PT_ERR_OOM, "%s: zip: out of memory", file);
    z->file = file;
    z->count = (int64_t)end.count;
    /* both bounded by the directory's size: count <= cd_size / 46, names <= cd_size */
    size_t n = (size_t)end.count;
    z->entries = pti_calloc(n ? n : 1, sizeof *z->entries);
    z->names = pti_malloc((size_t)end.cd_size + n + 1);
    spans = pti_malloc((n ? n : 1) * sizeof *spans);
    if (!z->entries || !z->names || !spans) {
        pti_error(PT_ERR_OOM, "%s: zip: out of memory reading %zu entries", file, n);
        goto fail;
    }
    if (!read_entries(z, d, &end, spans) || !check_overlap(z, spans) || !build_index(z))
        goto fail;
    free(spans);
    z->map = pti_file_map_retain(m);
    return z;
fail:
    free(spans);
    pti_zip_close(z);
    return NULL;
}

void pti_zip_close(pti_zip *z)
{
    if (!z)
        return;
    if (z->map)
        pti_file_map_release(z->map);
    free(z->entries);
    free(z->names);
    free(z->by_name);
    free(z);
}

int64_t pti_zip_count(const pti_zip *z)
{
    return z ? z->count : 0;
}

const pti_zip_entry *pti_zip_entry_at(const pti_zip *z, int64_t i)
{
    if (!z)
        return pti_error_null(PT_ERR_NULL, "pti_zip_entry_at: NULL archive");
    if (i < 0 || i >= z->count)
        return pti_error_null(PT_ERR_INDEX, "%s: zip: entry index %lld out of range [0, %lld)",
                              z->file, (long long)i, (long long)z->count);
    return &z->entries[i];
}

const pti_zip_entry *pti_zip_find(const pti_zip *z, const char *name)
{
    if (!z || !name || !z->by_name)
        return NULL;
    size_t lo = 0, hi = (size_t)z->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(z->by_name[mid]->name, name);
        if (c == 0)
            return z->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

pti_file_map *pti_zip_map(const pti_zip *z)
{
    return z ? z->map : NULL;
}

/* ---- reading an entry ------------------------------------------------------------------------ */

/* Inflates e's raw deflate stream into out (exactly e->size bytes): anything that would produce
 * more, or that ends before e->size bytes, is an error. */
static bool inflate_entry(const pti_zip *z, const pti_zip_entry *e, const uint8_t *src,
                          uint8_t *out)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -15) != Z_OK) {
        pti_error(PT_ERR_OOM, "%s: zip: entry '%s': cannot start inflating (out of memory)",
                  z->file, e->name);
        return false;
    }
    uint64_t in_left = e->comp_size, out_left = e->size;
    uint8_t probe;
    bool ok = false, probing = false;
    s.next_in = (Bytef *)src;
    s.next_out = out;
    for (;;) {
        if (s.avail_in == 0 && in_left) {
            s.avail_in = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
            in_left -= s.avail_in;
        }
        if (s.avail_out == 0 && out_left) {
            s.avail_out = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
            out_left -= s.avail_out;
        } else if (s.avail_out == 0) {
            /* the declared size is filled: from now on any output at all is too much */
            s.next_out = &probe;
            s.avail_out = 1;
            probing = true;
        }
        int ret = inflate(&s, Z_NO_FLUSH);
        if (probing && s.avail_out == 0) {
            pti_error(PT_ERR_FORMAT,
                      "%s: zip: entry '%s' inflates to more than its declared size of %llu bytes",
                      z->file, e->name, (unsigned long long)e->size);
            break;
        }
        if (ret == Z_STREAM_END) {
            if ((uint64_t)s.total_out != e->size) {
                pti_error(PT_ERR_FORMAT,
                          "%s: zip: entry '%s' inflates to %llu bytes, short of its declared "
                          "size of %llu",
                          z->file, e->name, (unsigned long long)s.total_out,
                          (unsigned long long)e->size);
                break;
            }
            ok = true;
            break;
        }
        if (ret == Z_OK)
            continue;
        if (ret == Z_BUF_ERROR && s.avail_in == 0 && in_left == 0)
            pti_error(PT_ERR_FORMAT,
                      "%s: zip: entry '%s': deflate data ends early (after %llu compressed "
                      "bytes, %llu of %llu bytes inflated)",
                      z->file, e->name, (unsigned long long)e->comp_size,
                      (unsigned long long)s.total_out, (unsigned long long)e->size);
        else if (ret == Z_MEM_ERROR)
            pti_error(PT_ERR_OOM, "%s: zip: entry '%s': out of memory inflating", z->file, e->name);
        else
            pti_error(PT_ERR_FORMAT, "%s: zip: entry '%s': corrupt deflate data (%s)", z->file,
                      e->name, s.msg ? s.msg : "zlib error");
        break;
    }
    inflateEnd(&s);
    return ok;
}

static uint32_t crc_of(const uint8_t *p, uint64_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n) {
        uInt chunk = n > UINT_MAX ? UINT_MAX : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

uint8_t *pti_zip_read(const pti_zip *z, const pti_zip_entry *e, uint64_t max_bytes, size_t *len)
{
    if (len)
        *len = 0;
    if (!z || !e || e < z->entries || e >= z->entries + z->count)
        return pti_error_null(PT_ERR_INVALID_ARG, "pti_zip_read: the entry is not one of %s's",
                              z ? z->file : "the archive");
    if (e->method != 0 && e->method != 8)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: zip: entry '%s' uses compression method %u (only stored (0) "
                              "and deflate (8) are supported)",
                              z->file, e->name, e->method);
    if (e->size > max_bytes || e->size >= SIZE_MAX)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: zip: entry '%s' declares %llu bytes, more than the limit of "
                              "%llu",
                              z->file, e->name, (unsigned long long)e->size,
                              (unsigned long long)max_bytes);
    if (e->method == 8 && e->comp_size <= (UINT64_MAX - DEFLATE_SLACK) / DEFLATE_MAX_RATIO &&
        e->size > e->comp_size * DEFLATE_MAX_RATIO + DEFLATE_SLACK)
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: zip: entry '%s' declares %llu bytes from %llu compressed "
                              "bytes, more than deflate can expand to",
                              z->file, e->name, (unsigned long long)e->size,
                              (unsigned long long)e->comp_size);
    uint8_t *out = pti_malloc((size_t)e->size + 1);
    if (!out)
        return pti_error_null(PT_ERR_OOM, "%s: zip: out of memory for entry '%s' (%llu bytes)",
                              z->file, e->name, (unsigned long long)e->size);
    const uint8_t *src = pti_file_map_data(z->map) + e->data_offset;
    if (e->method == 0) {
        if (e->size)
            memcpy(out, src, (size_t)e->size);
    } else if (!inflate_entry(z, e, src, out)) {
        free(out);
        return NULL;
    }
    out[e->size] = 0;
    uint32_t crc = crc_of(out, e->size);
    if (crc != e->crc32) {
        free(out);
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: zip: entry '%s': CRC-32 mismatch (data 0x%08x, directory "
                              "0x%08x)",
                              z->file, e->name, crc, e->crc32);
    }
    if (len)
        *len = (size_t)e->size;
    return out;
}
