/* Micro-benchmark of pt_attention_kv, the C half of benchmarks/attention_kv_vs_torch.py: times
 * one configuration and prints "us_per_call <best wall time> cpu_us_per_call <process CPU time
 * per call, all threads>" (on a loaded machine the CPU time is the steadier figure).
 *
 *   bench_attention_kv threads T Hq Hkv D S f16|f32 [seconds (default 1)]
 *
 * q is [T, Hq, D] at positions S - T .. S - 1 (decode when T = 1, prefill when T = S); k/v are
 * the first S rows of a [S + 64, Hkv, D] cache (a narrow view, as an LLM's cache is). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <prometorch/prometorch.h>

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: %s threads T Hq Hkv D S f16|f32 [seconds]\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[1]);
    int64_t T = atoll(argv[2]), hq = atoll(argv[3]), hkv = atoll(argv[4]), d = atoll(argv[5]);
    int64_t s = atoll(argv[6]);
    pt_dtype dt = strcmp(argv[7], "f16") == 0 ? PT_FLOAT16 : PT_FLOAT32;
    double secs = argc > 8 ? atof(argv[8]) : 1.0;
    pt_set_num_threads(threads);
    pt_manual_seed(0);
    pt_tensor *q = pt_randn(PT_SHAPE(T, hq, d), PT_FLOAT32, pt_cpu());
    pt_tensor *kc = pt_to_dtype(pt_randn(PT_SHAPE(s + 64, hkv, d), PT_FLOAT32, pt_cpu()), dt);
    pt_tensor *vc = pt_to_dtype(pt_randn(PT_SHAPE(s + 64, hkv, d), PT_FLOAT32, pt_cpu()), dt);
    const int64_t shape[3] = {s, hkv, d};
    pt_tensor *k = pt_as_strided(kc, 3, shape, pt_stride(kc), 0);
    pt_tensor *v = pt_as_strided(vc, 3, shape, pt_stride(vc), 0);
    pt_attention_kv_opts o = {.q_pos0 = s - T};
    if (!q || !k || !v) {
        fprintf(stderr, "setup failed: %s\n", pt_last_error());
        return 1;
    }
    for (int i = 0; i < 3; i++)
        pt_release(pt_attention_kv(q, k, v, &o));
    /* the best of 5 windows of secs/5 (the machine is shared: the minimum is the signal) */
    double best = 1e30, cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    long calls = 0;
    for (int rep = 0; rep < 5; rep++) {
        long n = 0;
        double t0 = now(), t;
        do {
            pt_tensor *out = pt_attention_kv(q, k, v, &o);
            if (!out) {
                fprintf(stderr, "pt_attention_kv failed: %s\n", pt_last_error());
                return 1;
            }
            pt_release(out);
            n++;
            t = now();
        } while (t - t0 < secs / 5);
        calls += n;
        double us = 1e6 * (t - t0) / (double)n;
        best = us < best ? us : best;
    }
    double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    printf("us_per_call %.2f cpu_us_per_call %.2f\n", best, 1e6 * cpu / (double)calls);
    return 0;
}
