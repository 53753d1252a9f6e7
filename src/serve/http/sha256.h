/* SHA-256 (FIPS 180-4) for the model store: blobs are named by the sha256 of their bytes and
 * a model's digest is the sha256 of its manifest file. Incremental (init/update/final) for
 * files of any size, one-shot for buffers, and a helper that hashes a file. */
#ifndef PT_SERVE_SHA256_H
#define PT_SERVE_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PTI_SHA256_HEX_LEN 64

typedef struct pti_sha256 {
    uint32_t h[8];
    uint64_t total; /* bytes hashed so far */
    uint8_t block[64];
    size_t used; /* bytes waiting in block */
} pti_sha256_ctx;

void pti_sha256_init(pti_sha256_ctx *c);
void pti_sha256_update(pti_sha256_ctx *c, const void *data, size_t len);
/* Writes the 32-byte digest; c must be initialised again before reuse. */
void pti_sha256_final(pti_sha256_ctx *c, uint8_t out[32]);

/* One-shot digest of len bytes. */
void pti_sha256(const void *data, size_t len, uint8_t out[32]);
/* 32 bytes -> 64 lowercase hex digits + NUL. */
void pti_sha256_hex(const uint8_t digest[32], char hex[PTI_SHA256_HEX_LEN + 1]);
/* The lowercase hex digest of the file at path (64 digits + NUL) and, if size is non-NULL, its
 * byte count. False with PT_ERR_IO naming the path when it cannot be opened or read. */
bool pti_sha256_file(const char *path, char hex[PTI_SHA256_HEX_LEN + 1], uint64_t *size);

#endif
