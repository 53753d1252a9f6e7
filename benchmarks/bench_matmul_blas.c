/* float32 matmul 1024^3: pt_matmul against calling OpenBLAS's cblas_sgemm directly on the same
 * data and the same threads, interleaved trials, printing the median times and the ratio. */
#include <cblas.h>
#include <prometorch/prometorch.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 1024
#define TRIALS 9

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    pt_manual_seed(0);
    pt_get_num_threads(); /* configures the pool and OpenBLAS's thread count */
    pt_tensor *a = pt_randn(PT_SHAPE(N, N), PT_FLOAT32, pt_cpu());
    pt_tensor *b = pt_randn(PT_SHAPE(N, N), PT_FLOAT32, pt_cpu());
    float *c = aligned_alloc(64, sizeof(float) * N * N);
    const float *ap = pt_data_ptr(a), *bp = pt_data_ptr(b);
    double ours[TRIALS], blas[TRIALS];
    pt_release(pt_matmul(a, b)); /* warm up both paths */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, ap, N, bp, N, 0.0f, c, N);
    for (int t = 0; t < TRIALS; t++) {
        double t0 = now();
        pt_tensor *r = pt_matmul(a, b);
        ours[t] = now() - t0;
        pt_release(r);
        t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, ap, N, bp, N, 0.0f, c,
                    N);
        blas[t] = now() - t0;
    }
    qsort(ours, TRIALS, sizeof(double), cmp);
    qsort(blas, TRIALS, sizeof(double), cmp);
    double mo = ours[TRIALS / 2], mb = blas[TRIALS / 2];
    printf(
        "matmul 1024^3 float32, threads=%d: pt_matmul %.2f ms (%.1f GFLOP/s), cblas_sgemm %.2f ms "
        "(%.1f GFLOP/s), ratio %.3f\n",
        pt_get_num_threads(), mo * 1e3, 2.0 * N * N * N / mo * 1e-9, mb * 1e3,
        2.0 * N * N * N / mb * 1e-9, mo / mb);
    free(c);
    pt_release(a);
    pt_release(b);
    return 0;
}
