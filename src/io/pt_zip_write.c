/* The zip container of .pt files (pt_zip_write.h), laid out as torch.save's miniz writer does:
 *
 *   per record: local header (version 0, flags 0x0808 = data descriptor + UTF-8, method 0,
 *               time/date/CRC/sizes 0), name, [zip64 extra], "FB" extra padding the data to a
 *               64-byte boundary, data, descriptor "PK\7\8" + CRC + sizes (8-byte with zip64)
 *   then:       central directory (real CRC/sizes, 0xFFFFFFFF + zip64 extra when too large),
 *               zip64 end of central directory, zip64 locator, end of central directory.
 *
 * The padding rule is PyTorch's getPadding (caffe2/serialize/inline_container.cc). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../core/internal.h"
#include "pt_zip_write.h"

#define ZIP_ALIGN 64
#define U32_MAX_ 0xFFFFFFFFull

/* Little-endian stores into a byte buffer. */
static unsigned char *put16(unsigned char *p, uint64_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}

static unsigned char *put32(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
    return p + 4;
}

static unsigned char *put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
    return p + 8;
}

void pti_zip_init(pti_zip_writer *z, FILE *f, const char *path, const char *op)
{
    memset(z, 0, sizeof(*z));
    z->f = f;
    z->path = path;
    z->op = op;
    z->zip64_limit = U32_MAX_;
}

void pti_zip_free(pti_zip_writer *z)
{
    for (size_t i = 0; i < z->n; i++)
        free(z->entries[i].name);
    free(z->entries);
    z->entries = NULL;
    z->n = z->cap = 0;
}

static pt_status zwrite(pti_zip_writer *z, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, z->f) != n)
        return pti_error(PT_ERR_IO, "%s: cannot write '%s': %s", z->op, z->path, strerror(errno));
    z->pos += n;
    return PT_OK;
}

/* zlib's crc32 takes uInt lengths: feed large buffers in 1 GiB pieces. */
static uint32_t crc_of(const void *data, uint64_t size)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const unsigned char *p = data;
    while (size > 0) {
        uInt n = size > (1u << 30) ? (1u << 30) : (uInt)size;
        crc = crc32(crc, p, n);
        p += n;
        size -= n;
    }
    return (uint32_t)crc;
}

/* A zip64 extended-information extra field (ID 1) holding the given values in the order the
 * spec fixes: uncompressed size, compressed size, local header offset. Returns its length. */
static size_t zip64_extra(unsigned char *p, bool sizes, uint64_t size, bool offs, uint64_t off)
{
    if (!sizes && !offs)
        return 0;
    unsigned char *q = put16(p, 1);
    q = put16(q, (sizes ? 16 : 0) + (offs ? 8 : 0));
    if (sizes) {
        q = put64(q, size);
        q = put64(q, size);
    }
    if (offs)
        q = put64(q, off);
    return (size_t)(q - p);
}

static pt_status add_entry(pti_zip_writer *z, const char *name, uint32_t crc, uint64_t size,
                           uint64_t offset)
{
    if (z->n == z->cap) {
        size_t cap = z->cap ? 2 * z->cap : 16;
        pti_zip_written_entry *e = pti_realloc(z->entries, cap * sizeof(*e));
        if (!e)
            return pti_error(PT_ERR_OOM, "%s: out of memory", z->op);
        z->entries = e;
        z->cap = cap;
    }
    size_t len = strlen(name);
    char *copy = pti_malloc(len + 1);
    if (!copy)
        return pti_error(PT_ERR_OOM, "%s: out of memory", z->op);
    memcpy(copy, name, len + 1);
    z->entries[z->n++] = (pti_zip_written_entry){copy, crc, size, offset};
    return PT_OK;
}

pt_status pti_zip_add(pti_zip_writer *z, const char *name, const void *data, uint64_t size)
{
    size_t name_len = strlen(name);
    if (name_len > 0xFFFF)
        return pti_error(PT_ERR_INVALID_ARG, "%s: record name too long", z->op);
    uint64_t offset = z->pos;
    bool big = size >= z->zip64_limit, far = offset >= z->zip64_limit;
    unsigned char extra[64 + 4 + 28];
    size_t x = zip64_extra(extra, big, size, far, offset);
    /* getPadding: data start = header + name + zip64 extra + 4-byte FB header + padding */
    uint64_t start = offset + 30 + name_len + x + 4;
    size_t pad = (size_t)((ZIP_ALIGN - start % ZIP_ALIGN) % ZIP_ALIGN);
    put16(extra + x, 0x4246); /* 'F', 'B' */
    put16(extra + x + 2, pad);
    memset(extra + x + 4, 'Z', pad);
    size_t extra_len = x + 4 + pad;

    unsigned char h[30];
    unsigned char *p = put32(h, 0x04034b50);
    p = put16(p, 0);      /* version needed (miniz writes 0) */
    p = put16(p, 0x0808); /* data descriptor follows; UTF-8 names */
    p = put16(p, 0);      /* stored */
    p = put32(p, 0);      /* time, date */
    p = put32(p, 0);      /* CRC (in the descriptor) */
    p = put32(p, 0);      /* compressed size */
    p = put32(p, 0);      /* uncompressed size */
    p = put16(p, name_len);
    put16(p, extra_len);
    uint32_t crc = crc_of(data, size);
    pt_status st = zwrite(z, h, sizeof(h));
    if (st == PT_OK)
        st = zwrite(z, name, name_len);
    if (st == PT_OK)
        st = zwrite(z, extra, extra_len);
    if (st == PT_OK)
        st = zwrite(z, data, (size_t)size);
    unsigned char d[24];
    p = put32(d, 0x08074b50);
    p = put32(p, crc);
    p = x ? put64(put64(p, size), size) : put32(put32(p, size), size);
    if (st == PT_OK)
        st = zwrite(z, d, (size_t)(p - d));
    if (st == PT_OK)
        st = add_entry(z, name, crc, size, offset);
    return st;
}

static pt_status write_central(pti_zip_writer *z, const pti_zip_written_entry *e)
{
    size_t name_len = strlen(e->name);
    bool big = e->size >= z->zip64_limit, far = e->offset >= z->zip64_limit;
    unsigned char extra[28];
    size_t x = zip64_extra(extra, big, e->size, far, e->offset);
    unsigned char h[46];
    unsigned char *p = put32(h, 0x02014b50);
    p = put16(p, 0);      /* version made by */
    p = put16(p, 0);      /* version needed */
    p = put16(p, 0x0808); /* flags */
    p = put16(p, 0);      /* stored */
    p = put32(p, 0);      /* time, date */
    p = put32(p, e->crc);
    p = put32(p, big ? U32_MAX_ : e->size);
    p = put32(p, big ? U32_MAX_ : e->size);
    p = put16(p, name_len);
    p = put16(p, x);
    p = put16(p, 0); /* comment length */
    p = put16(p, 0); /* disk */
    p = put16(p, 0); /* internal attributes */
    p = put32(p, 0); /* external attributes */
    put32(p, far ? U32_MAX_ : e->offset);
    pt_status st = zwrite(z, h, sizeof(h));
    if (st == PT_OK)
        st = zwrite(z, e->name, name_len);
    if (st == PT_OK)
        st = zwrite(z, extra, x);
    return st;
}

pt_status pti_zip_finish(pti_zip_writer *z)
{
    uint64_t cd_start = z->pos;
    for (size_t i = 0; i < z->n; i++) {
        pt_status st = write_central(z, &z->entries[i]);
        if (st != PT_OK)
            return st;
    }
    uint64_t cd_size = z->pos - cd_start, eocd64 = z->pos, n = z->n;
    unsigned char b[56 + 20 + 22];
    unsigned char *p = put32(b, 0x06064b50); /* zip64 end of central directory */
    p = put64(p, 44);                        /* size of the rest of this record */
    p = put16(p, 0x031e);                    /* made by: Unix, 3.0 (as miniz) */
    p = put16(p, 0x2d);                      /* needed: 4.5 */
    p = put32(p, 0);
    p = put32(p, 0);
    p = put64(p, n);
    p = put64(p, n);
    p = put64(p, cd_size);
    p = put64(p, cd_start);
    p = put32(p, 0x07064b50); /* zip64 locator */
    p = put32(p, 0);
    p = put64(p, eocd64);
    p = put32(p, 1);
    p = put32(p, 0x06054b50); /* end of central directory */
    p = put32(p, 0);
    p = put16(p, n >= 0xFFFF ? 0xFFFF : n);
    p = put16(p, n >= 0xFFFF ? 0xFFFF : n);
    p = put32(p, cd_size >= U32_MAX_ ? U32_MAX_ : cd_size);
    p = put32(p, cd_start >= U32_MAX_ ? U32_MAX_ : cd_start);
    p = put16(p, 0);
    return zwrite(z, b, (size_t)(p - b));
}
