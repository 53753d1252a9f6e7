/* The corpus smoke test run by ctest for the fuzz targets that read one file format
 * (fuzz_safetensors.c, fuzz_gguf.c): replays every seed file of a corpus folder -- each must be
 * accepted, or the mutations would test little -- then a fixed number of deterministic
 * mutations of them (bit flips, truncations, bytes set to extremes in the first 64, random
 * tails, copied ranges). Prints the plain result line.
 *   smoke_corpus CORPUS_DIR [RUNS] */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern int fuzz_accepted;

#define MAX_SEEDS 64
#define MAX_SIZE 65536

typedef struct seed {
    uint8_t *data;
    size_t size;
} seed;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t next_random(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static size_t mutate(const seed *in, uint8_t *out)
{
    size_t size = in->size;
    memcpy(out, in->data, size);
    int edits = 1 + (int)(next_random() % 4);
    for (int e = 0; e < edits && size > 0; e++) {
        size_t pos = next_random() % size;
        size_t head = size < 64 ? size : 64;
        switch (next_random() % 6) {
        case 0: out[pos] ^= (uint8_t)(1u << (next_random() % 8)); break;
        case 1: size = next_random() % size; break;
        case 2: out[next_random() % head] = 0xFF; break;
        case 3: out[next_random() % head] = 0; break;
        case 4: { /* copy a range over another (duplicates keys, lengths, names) */
            size_t from = next_random() % size, len = 1 + next_random() % 16;
            if (from + len <= size && pos + len <= size)
                memmove(out + pos, out + from, len);
            break;
        }
        default:
            while (size < MAX_SIZE && next_random() % 8)
                out[size++] = (uint8_t)next_random();
        }
    }
    return size;
}

static int load_seeds(const char *dir, seed *seeds)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) && n < MAX_SEEDS) {
        if (ent->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        seeds[n].data = malloc(MAX_SIZE);
        seeds[n].size = fread(seeds[n].data, 1, MAX_SIZE, f);
        fclose(f);
        n++;
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        printf("usage: %s CORPUS_DIR [RUNS]\n", argv[0]);
        return 2;
    }
    static seed seeds[MAX_SEEDS];
    int n = load_seeds(argv[1], seeds);
    int runs = argc > 2 ? atoi(argv[2]) : 4000;
    if (n <= 0) {
        printf("fuzz smoke: no seed files in %s\n0 passed, 1 failed\n", argv[1]);
        return 1;
    }
    for (int i = 0; i < n; i++)
        LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].size);
    if (fuzz_accepted != n) {
        printf("fuzz smoke: only %d of the %d seed files were read\n0 passed, 1 failed\n",
               fuzz_accepted, n);
        return 1;
    }
    uint8_t *m = malloc(MAX_SIZE);
    for (int r = 0; r < runs; r++) {
        size_t size = mutate(&seeds[r % n], m);
        LLVMFuzzerTestOneInput(m, size);
    }
    free(m);
    for (int i = 0; i < n; i++)
        free(seeds[i].data);
    printf("fuzz smoke: %d seeds and %d mutations of them, %d inputs accepted\n1 passed, 0 failed\n",
           n, runs, fuzz_accepted);
    return 0;
}
