/* Prefill-GEMM micro-benchmark of the quantized matmul: y[M, N] = x[M, K] @ W[N, K]^T through
 * pt_linear, for the weight matrices of real GGUF models (dtype, N, K and how many of each),
 * M = 512 (a 512-token prompt). Prints, per shape and per model, the time and the effective
 * GOP/s (2 * M * N * K / time), on 1 and 2 threads. The weights are random blocks with sane
 * scales (the speed does not depend on the values); one weight per shape, reused (the shapes
 * are small enough to stay in L2/L3, as a model's layer does during a 512-row product).
 *
 * benchmarks/qgemm_vs_llama.py runs this next to llama.cpp's pp512 on the same models.
 *
 *   bench_qgemm [M (default 512)] [seconds per shape (default 0.5)] [model name filter] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <prometorch/prometorch.h>

typedef struct {
    pt_dtype dt;
    int64_t n, k;
    int count;
} mat_shape;

typedef struct {
    const char *name;
    mat_shape shapes[8];
    int n_shapes;
} model;

/* From the GGUF files (token embedding excluded: a lookup, not a matmul). */
static const model MODELS[] = {
    {"gemma-3-270m-q4_k_m",
     {{PT_Q5_0, 2048, 640, 36},
      {PT_Q5_0, 1024, 640, 18},
      {PT_Q5_0, 256, 640, 27},
      {PT_Q8_0, 256, 640, 9},
      {PT_Q4_K, 640, 1024, 18},
      {PT_Q4_K, 640, 2048, 9},
      {PT_Q6_K, 640, 2048, 9}},
     7},
    {"SmolLM2-135M-Q4_1",
     {{PT_Q4_1, 1536, 576, 60},
      {PT_Q4_1, 576, 1536, 30},
      {PT_Q4_1, 576, 576, 60},
      {PT_Q4_1, 192, 576, 60}},
     4},
    /* the shapes of a ~1B Llama in Q4_K_M (Llama 3.2 1B: dim 2048, ffn 8192, 8 kv heads) */
    {"llama-1B-q4_k_m-shapes",
     {{PT_Q4_K, 8192, 2048, 32},
      {PT_Q6_K, 2048, 8192, 16},
      {PT_Q4_K, 2048, 8192, 16},
      {PT_Q4_K, 2048, 2048, 32},
      {PT_Q4_K, 512, 2048, 16},
      {PT_Q6_K, 512, 2048, 16}},
     6},
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Random block bytes; every f16 scale field set to ~0.001 so no value is inf/NaN/subnormal. */
static pt_tensor *random_weight(pt_dtype dt, int64_t n, int64_t k, uint64_t seed)
{
    size_t bsize = pt_dtype_size(dt), nblocks = (size_t)(n * k / pt_dtype_block_size(dt));
    unsigned char *p = malloc(nblocks * bsize);
    uint64_t s = seed | 1;
    for (size_t i = 0; i < nblocks * bsize; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        p[i] = (unsigned char)s;
    }
    int off[2] = {0, -1};
    switch (dt) {
    case PT_Q4_1:
    case PT_Q5_1:
    case PT_Q4_K:
    case PT_Q5_K: off[1] = 2; break;
    case PT_Q6_K: off[0] = 208; break;
    default: break;
    }
    for (size_t b = 0; b < nblocks; b++)
        for (int j = 0; j < 2; j++)
            if (off[j] >= 0) {
                p[b * bsize + (size_t)off[j]] = 0x00;
                p[b * bsize + (size_t)off[j] + 1] = 0x14;
            }
    pt_tensor *w = pt_from_data(p, 2, (const int64_t[]){n, k}, dt, pt_cpu());
    free(p);
    return w;
}

/* The fastest of the calls made in about `secs` seconds (at least 3): on a machine shared with
 * other jobs the minimum is the figure least disturbed by them. */
static double time_linear(const pt_tensor *x, const pt_tensor *w, double secs)
{
    pt_release(pt_linear(x, w, NULL)); /* warm-up */
    int calls = 0;
    double t0 = now(), t = t0, best = 1e30;
    do {
        double c0 = now();
        pt_tensor *y = pt_linear(x, w, NULL);
        if (!y) {
            fprintf(stderr, "pt_linear: %s\n", pt_last_error());
            exit(1);
        }
        pt_release(y);
        calls++;
        t = now();
        if (t - c0 < best)
            best = t - c0;
    } while (t - t0 < secs || calls < 3);
    return best;
}

int main(int argc, char **argv)
{
    int64_t m = argc > 1 ? atoll(argv[1]) : 512;
    double secs = argc > 2 ? atof(argv[2]) : 0.5;
    const char *filter = argc > 3 ? argv[3] : NULL;
    if (m < 1)
        m = 512;
    printf("bench_qgemm: y[M, N] = x[M, K] @ W[N, K]^T, M = %lld; GOP/s = 2*M*N*K / time of the "
           "fastest call\n",
           (long long)m);
    for (size_t mi = 0; mi < sizeof MODELS / sizeof MODELS[0]; mi++) {
        const model *md = &MODELS[mi];
        if (filter && !strstr(md->name, filter))
            continue;
        double total[2] = {0, 0}, ops = 0;
        printf("%s\n  %-5s %6s %6s %4s %12s %9s %12s %9s\n", md->name, "dtype", "N", "K", "x",
               "1T ms", "1T GOP/s", "2T ms", "2T GOP/s");
        for (int si = 0; si < md->n_shapes; si++) {
            const mat_shape *s = &md->shapes[si];
            pt_tensor *w = random_weight(s->dt, s->n, s->k, 0x9E3779B97F4A7C15ull + (uint64_t)si);
            float *xs = malloc((size_t)(m * s->k) * sizeof(float));
            for (int64_t i = 0; i < m * s->k; i++)
                xs[i] = (float)((i * 53 % 97) - 48) / 24.0f;
            pt_tensor *x = pt_from_data(xs, 2, (const int64_t[]){m, s->k}, PT_FLOAT32, pt_cpu());
            free(xs);
            double op = 2.0 * (double)m * (double)s->n * (double)s->k, t[2];
            for (int th = 0; th < 2; th++) {
                pt_set_num_threads(th + 1);
                t[th] = time_linear(x, w, secs);
                total[th] += t[th] * s->count;
            }
            ops += op * s->count;
            printf("  %-5s %6lld %6lld %4d %12.3f %9.1f %12.3f %9.1f\n", pt_dtype_name(s->dt),
                   (long long)s->n, (long long)s->k, s->count, t[0] * 1e3, op / t[0] / 1e9,
                   t[1] * 1e3, op / t[1] / 1e9);
            pt_release(w);
            pt_release(x);
        }
        printf("  MODEL %s: all matmuls of M=%lld rows: 1T %.1f ms %.1f GOP/s, 2T %.1f ms "
               "%.1f GOP/s\n",
               md->name, (long long)m, total[0] * 1e3, ops / total[0] / 1e9, total[1] * 1e3,
               ops / total[1] / 1e9);
    }
    return 0;
}
