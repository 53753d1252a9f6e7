/* The corpus smoke test run by ctest for the libFuzzer targets that read one file format
 * (fuzz_zip, fuzz_pickle, fuzz_safetensors, fuzz_gguf, fuzz_pt_load): feeds the target every
 * file of its seed corpus (tests/fuzz/corpus/<format>: real files written by PyTorch, Python,
 * safetensors, gguf-py), checks they are all accepted -- or the mutations would test little --
 * then a fixed number of deterministic mutations of them: bit flips, truncations, 2/4/8-byte
 * fields set to extremes or nudged (sizes, offsets and counts are what readers must check),
 * deleted and duplicated spans. Each input is passed in an exact-size buffer, so a read one byte
 * past it is an ASan report. Then the inputs libFuzzer once found problems with
 * (tests/fuzz/regressions/<format>, if present) must each run in under a second. Prints the
 * plain result line.
 * Usage: <target>_smoke CORPUS_DIR [RUNS [REGRESSIONS_DIR]] */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static int load_corpus(const char *dir, seed *seeds)
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
        uint8_t *buf = malloc(MAX_SIZE);
        size_t got = buf ? fread(buf, 1, MAX_SIZE, f) : 0;
        fclose(f);
        if (!buf)
            break;
        seeds[n].data = buf;
        seeds[n].size = got;
        n++;
    }
    closedir(d);
    return n;
}

static void set_field(uint8_t *p, int bytes, uint64_t v)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_field(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void mutate(const seed *in, uint8_t *out, size_t *out_size)
{
    size_t n = in->size;
    memcpy(out, in->data, n);
    int edits = 1 + (int)(next_random() % 3);
    for (int e = 0; e < edits && n > 0; e++) {
        size_t pos = next_random() % n;
        switch (next_random() % 6) {
        case 0: out[pos] ^= (uint8_t)(1u << (next_random() % 8)); break;
        case 1: n = pos; break; /* truncate */
        case 2: {               /* a field set to an extreme */
            static const int widths[] = {2, 4, 8};
            int w = widths[next_random() % 3];
            static const uint64_t extremes[] = {
                0, 1, 0xFFFF, 0xFFFFFFFFull, UINT64_MAX, 0x7FFFFFFFull, 0x80000000ull, 46, 30};
            if (pos + (size_t)w <= n)
                set_field(out + pos, w, extremes[next_random() % 9]);
            break;
        }
        case 3: { /* a field nudged */
            int w = next_random() % 2 ? 2 : 4;
            if (pos + (size_t)w <= n)
                set_field(out + pos, w, get_field(out + pos, w) + (next_random() % 129) - 64);
            break;
        }
        case 4: { /* a span deleted */
            size_t len = next_random() % 64;
            if (len > n - pos)
                len = n - pos;
            memmove(out + pos, out + pos + len, n - pos - len);
            n -= len;
            break;
        }
        default: { /* a span duplicated in place */
            size_t len = next_random() % 64;
            if (len > n - pos)
                len = n - pos;
            if (n + len <= MAX_SIZE) {
                memmove(out + pos + len, out + pos, n - pos);
                n += len;
            }
            break;
        }
        }
    }
    *out_size = n;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Replays each past finding; false (with the reason printed) if one takes a second or more. */
static bool replay_regressions(const char *dir, int *count)
{
    static seed found[MAX_SEEDS];
    int n = load_corpus(dir, found);
    bool ok = true;
    for (int i = 0; i < n; i++) {
        double t0 = now_seconds();
        LLVMFuzzerTestOneInput(found[i].data, found[i].size);
        double dt = now_seconds() - t0;
        if (dt >= 1.0) {
            printf("fuzz smoke: regression input %d of %s took %.1f s\n", i, dir, dt);
            ok = false;
        }
        free(found[i].data);
    }
    *count = n > 0 ? n : 0;
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        printf("usage: %s CORPUS_DIR [RUNS]\n0 passed, 1 failed\n", argv[0]);
        return 1;
    }
    static seed seeds[MAX_SEEDS];
    int n = load_corpus(argv[1], seeds);
    if (n <= 0) {
        printf("fuzz smoke: no seed files in %s\n0 passed, 1 failed\n", argv[1]);
        return 1;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 4000;
    for (int i = 0; i < n; i++)
        LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].size);
    if (fuzz_accepted != n) { /* the valid seeds must open, or the mutations test little */
        printf("fuzz smoke: only %d of the %d seed files in %s were accepted\n0 passed, 1 "
               "failed\n",
               fuzz_accepted, n, argv[1]);
        return 1;
    }
    uint8_t *buf = malloc(MAX_SIZE);
    if (!buf)
        return 1;
    for (int r = 0; r < runs; r++) {
        size_t size;
        mutate(&seeds[r % n], buf, &size);
        /* an exact-size copy, so a read one byte past the input is an ASan report */
        uint8_t *exact = malloc(size ? size : 1);
        if (!exact)
            return 1;
        memcpy(exact, buf, size);
        LLVMFuzzerTestOneInput(exact, size);
        free(exact);
    }
    free(buf);
    for (int i = 0; i < n; i++)
        free(seeds[i].data);
    int accepted = fuzz_accepted - n, regressions = 0;
    if (argc > 3 && !replay_regressions(argv[3], &regressions)) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    printf("fuzz smoke: %d seeds of %s + %d mutated inputs (%d of them accepted), %d past "
           "findings replayed\n1 passed, 0 failed\n",
           n, argv[1], runs, accepted, regressions);
    return 0;
}
