/* The fuzz smoke test run by ctest in every build: feeds fuzz_readers' target valid seed
 * files of each format and a fixed number of deterministic mutations of them (bit flips,
 * truncations, header bytes set to extremes, random tails). With `--write-seeds DIR` it writes
 * the seeds as a libFuzzer corpus instead. Prints the plain result line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern int fuzz_readers_accepted;

#define MAX_SEED 8192
typedef struct seed {
    uint8_t data[MAX_SEED];
    size_t size;
} seed;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t next_random(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* selector byte + an idx uint8 file of dims [3, 4, 5] */
static void seed_idx(seed *s)
{
    static const uint8_t header[] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5};
    s->data[0] = 0;
    memcpy(s->data + 1, header, sizeof header);
    s->size = 1 + sizeof header;
    for (int i = 0; i < 60; i++)
        s->data[s->size++] = (uint8_t)(i * 7);
}

/* the same idx file gzip-compressed (zlib's gz format through deflateInit2) */
static void seed_idx_gz(seed *s)
{
    seed plain;
    seed_idx(&plain);
    z_stream z = {0};
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    z.next_in = plain.data + 1;
    z.avail_in = (uInt)(plain.size - 1);
    z.next_out = s->data + 1;
    z.avail_out = MAX_SEED - 1;
    deflate(&z, Z_FINISH);
    s->data[0] = 0;
    s->size = 1 + z.total_out;
    deflateEnd(&z);
}

/* selector 1 + two CIFAR records */
static void seed_cifar(seed *s)
{
    s->data[0] = 1;
    s->size = 1;
    for (int r = 0; r < 2; r++) {
        s->data[s->size++] = (uint8_t)(r + 3);
        for (int i = 0; i < 3072; i++)
            s->data[s->size++] = (uint8_t)(i + r);
    }
}

/* selector 2 + an MNIST image file of 3 images of 2x2 (labels are supplied by the target) */
static void seed_mnist(seed *s)
{
    static const uint8_t header[] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
    s->data[0] = 2;
    memcpy(s->data + 1, header, sizeof header);
    s->size = 1 + sizeof header;
    for (int i = 0; i < 12; i++)
        s->data[s->size++] = (uint8_t)i;
}

static void mutate(const seed *in, seed *out)
{
    *out = *in;
    int edits = 1 + (int)(next_random() % 4);
    for (int e = 0; e < edits; e++) {
        size_t body = out->size > 1 ? out->size - 1 : 1;
        size_t pos = 1 + next_random() % body;
        switch (next_random() % 5) {
        case 0: out->data[pos] ^= (uint8_t)(1u << (next_random() % 8)); break;
        case 1: out->size = 1 + next_random() % body; break;                          /* truncate */
        case 2: out->data[1 + next_random() % (body < 17 ? body : 17)] = 0xFF; break; /* header */
        case 3: out->data[1 + next_random() % (body < 17 ? body : 17)] = 0; break;
        default: /* random tail */
            while (out->size < MAX_SEED && next_random() % 8)
                out->data[out->size++] = (uint8_t)next_random();
        }
        if (out->size < 1)
            out->size = 1;
    }
}

int main(int argc, char **argv)
{
    static seed seeds[4], m;
    seed_idx(&seeds[0]);
    seed_idx_gz(&seeds[1]);
    seed_cifar(&seeds[2]);
    seed_mnist(&seeds[3]);
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) {
        for (int i = 0; i < 4; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/seed%d", argv[2], i);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(seeds[i].data, 1, seeds[i].size, f) != seeds[i].size) {
                printf("cannot write %s\n", path);
                return 1;
            }
            fclose(f);
        }
        return 0;
    }
    int runs = argc > 1 ? atoi(argv[1]) : 4000;
    for (int i = 0; i < 4; i++)
        LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].size);
    if (fuzz_readers_accepted != 4) { /* the valid seeds must parse, or the mutations test little */
        printf("fuzz smoke: only %d of the 4 valid seed files were read\n0 passed, 1 failed\n",
               fuzz_readers_accepted);
        return 1;
    }
    for (int r = 0; r < runs; r++) {
        mutate(&seeds[r % 4], &m);
        LLVMFuzzerTestOneInput(m.data, m.size);
    }
    printf("fuzz smoke: %d mutated inputs through the data-file readers\n1 passed, 0 failed\n",
           runs + 4);
    return 0;
}
