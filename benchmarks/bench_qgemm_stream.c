/* Decode-GEMM benchmark of the quantized matmul with the weights streamed from memory, as in a
 * real decode step: y[M, N] = x[M, K] @ W[N, K]^T through pt_linear for M = 1 .. 16 rows (one
 * per sequence a batched decode step carries) over all the distinct weight matrices of one
 * SmolLM2-135M-Q4_1 forward pass (30 layers of Q4_1 projections, ~66 MB) and its tied Q8_0
 * output matrix (49152 x 576, ~28 MB). bench_qgemm reuses one weight per shape, so it measures
 * the kernels at cache speed; this one shows what the memory access pattern costs (an 8-row
 * interleaved decode without prefetch measured 2-3x slower here than at cache speed).
 * Prints the fastest of 12 passes: ms and GOP/s (2 * M * N * K / time) for the layers and for
 * the output matrix.
 *
 *   bench_qgemm_stream [M (default 1)] [threads (default 1)] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <prometorch/prometorch.h>

#define LAYERS 30
#define DIM 576
#define FFN 1536
#define VOCAB 49152
#define PASSES 12

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Random block bytes with every scale (and Q4_1 min) set to ~0.001: no inf/NaN/subnormal. */
static pt_tensor *random_weight(pt_dtype dt, int64_t n, int64_t k, uint64_t seed)
{
    size_t bsize = pt_dtype_size(dt), nblocks = (size_t)(n * k / pt_dtype_block_size(dt));
    unsigned char *p = malloc(nblocks * bsize);
    if (!p)
        return NULL;
    uint64_t s = seed | 1;
    for (size_t i = 0; i < nblocks * bsize; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        p[i] = (unsigned char)s;
    }
    for (size_t b = 0; b < nblocks; b++) {
        p[b * bsize] = 0x00;
        p[b * bsize + 1] = 0x14;
        if (dt == PT_Q4_1) {
            p[b * bsize + 2] = 0x00;
            p[b * bsize + 3] = 0x94;
        }
    }
    pt_tensor *w = pt_from_data(p, 2, (const int64_t[]){n, k}, dt, pt_cpu());
    free(p);
    return w;
}

/* The Q4_1 projections of one layer: q, o (DIM x DIM), k, v (192 x DIM), gate, up (FFN x DIM),
 * down (DIM x FFN). */
static const int64_t SHAPES[7][2] = {{DIM, DIM}, {192, DIM}, {192, DIM}, {DIM, DIM},
                                     {FFN, DIM}, {FFN, DIM}, {DIM, FFN}};

int main(int argc, char **argv)
{
    int64_t m = argc > 1 ? atoll(argv[1]) : 1;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (m < 1 || m > 4096 || threads < 1) {
        fprintf(stderr, "usage: bench_qgemm_stream [M 1..4096] [threads >= 1]\n");
        return 2;
    }
    pt_set_num_threads(threads);
    static pt_tensor *w[LAYERS * 7];
    double layer_ops = 0.0;
    for (int i = 0; i < LAYERS * 7; i++) {
        w[i] = random_weight(PT_Q4_1, SHAPES[i % 7][0], SHAPES[i % 7][1], 1000 + (uint64_t)i);
        layer_ops += 2.0 * (double)m * (double)SHAPES[i % 7][0] * (double)SHAPES[i % 7][1];
    }
    pt_tensor *out = random_weight(PT_Q8_0, VOCAB, DIM, 7);
    float *xs = malloc(sizeof(float) * (size_t)(m * FFN));
    if (!out || !xs) {
        fprintf(stderr, "bench_qgemm_stream: out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < m * FFN; i++)
        xs[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    pt_tensor *x_dim = pt_from_data(xs, 2, (const int64_t[]){m, DIM}, PT_FLOAT32, pt_cpu());
    pt_tensor *x_ffn = pt_from_data(xs, 2, (const int64_t[]){m, FFN}, PT_FLOAT32, pt_cpu());
    double best_layers = 1e30, best_out = 1e30;
    for (int pass = 0; pass < PASSES; pass++) {
        double t0 = now();
        for (int i = 0; i < LAYERS * 7; i++)
            pt_release(pt_linear(SHAPES[i % 7][1] == DIM ? x_dim : x_ffn, w[i], NULL));
        double t1 = now();
        pt_release(pt_linear(x_dim, out, NULL));
        double t2 = now();
        if (t1 - t0 < best_layers)
            best_layers = t1 - t0;
        if (t2 - t1 < best_out)
            best_out = t2 - t1;
    }
    printf(
        "M=%lld threads=%d: q4_1 layers %.2f ms (%.1f GOP/s), q8_0 output %.2f ms (%.1f GOP/s)\n",
        (long long)m, threads, best_layers * 1e3, layer_ops / best_layers / 1e9, best_out * 1e3,
        2.0 * (double)m * VOCAB * DIM / best_out / 1e9);
    for (int i = 0; i < LAYERS * 7; i++)
        pt_release(w[i]);
    pt_release(out);
    pt_release(x_dim);
    pt_release(x_ffn);
    free(xs);
    return 0;
}
