/* The pickle fuzz smoke test run by ctest in every build: feeds fuzz_pickle's target every seed
 * of tests/fuzz/corpus/pickle/ (real torch.save data.pkl files and Python pickles of every
 * protocol, each with its selector byte), which must all load, then a fixed number of
 * deterministic mutations of them (bit flips, truncations, bytes set to extremes, inserted and
 * deleted bytes, random tails). Prints the plain result line. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern int fuzz_pickle_accepted;

#define MAX_SEEDS 64
#define MAX_SEED 16384

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

static void mutate(const seed *in, seed *out)
{
    *out = *in;
    int edits = 1 + (int)(next_random() % 4);
    for (int e = 0; e < edits; e++) {
        size_t body = out->size > 1 ? out->size - 1 : 1;
        size_t pos = 1 + next_random() % body;
        switch (next_random() % 6) {
        case 0: out->data[pos] ^= (uint8_t)(1u << (next_random() % 8)); break;
        case 1: out->size = 1 + next_random() % body; break; /* truncate */
        case 2: out->data[pos] = next_random() % 2 ? 0xFF : 0x00; break;
        case 3: /* delete a byte */
            if (pos < out->size) {
                memmove(out->data + pos, out->data + pos + 1, out->size - pos - 1);
                out->size--;
            }
            break;
        case 4: /* insert an opcode-like byte */
            if (out->size < MAX_SEED && pos < out->size) {
                memmove(out->data + pos + 1, out->data + pos, out->size - pos);
                out->data[pos] = (uint8_t) "(]})ta2hqsueRQbc.\x85\x86\x93\x94"[next_random() % 21];
                out->size++;
            }
            break;
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
    static seed seeds[MAX_SEEDS], m;
    int nseeds = 0;
    if (argc < 2) {
        printf("usage: %s CORPUS_DIR [RUNS]\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        printf("cannot open %s\n0 passed, 1 failed\n", argv[1]);
        return 1;
    }
    for (struct dirent *e; (e = readdir(d)) && nseeds < MAX_SEEDS;) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        seeds[nseeds].size = fread(seeds[nseeds].data, 1, MAX_SEED, f);
        fclose(f);
        if (seeds[nseeds].size > 1)
            nseeds++;
    }
    closedir(d);
    int runs = argc > 2 ? atoi(argv[2]) : 20000;
    for (int i = 0; i < nseeds; i++)
        LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].size);
    if (nseeds < 10 || fuzz_pickle_accepted != nseeds) {
        printf("fuzz smoke: only %d of the %d seed pickles were read\n0 passed, 1 failed\n",
               fuzz_pickle_accepted, nseeds);
        return 1;
    }
    for (int r = 0; r < runs; r++) {
        mutate(&seeds[r % nseeds], &m);
        LLVMFuzzerTestOneInput(m.data, m.size);
    }
    printf("fuzz smoke: %d seeds and %d mutated inputs through the pickle VM\n1 passed, 0 failed\n",
           nseeds, runs);
    return 0;
}
