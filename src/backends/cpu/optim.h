/* Shared by the CPU optimizer kernels: each algorithm's context (the call's data pointers
 * plus its pti_optim_<x>_params) and its range functions, the portable one in optim.c and the
 * AVX2 one in optim_avx2.c (x86 only), which takes the tail through the portable one. */
#ifndef PT_CPU_OPTIM_H
#define PT_CPU_OPTIM_H

#include "../../ops/optim_params.h"
#include "cpu.h"

/* The AVX2 loops use AVX2 without FMA: no contraction, so they give the portable loops'
 * results bit for bit. */
#if defined(__x86_64__) || defined(__i386__)
#define PTI_CPU_OPTIM_HAVE_AVX2 1
#define PTI_CPU_OPTIM_AVX2 __attribute__((target("avx2")))
#define PTI_CPU_OPTIM_AVX2_OR_NULL(fn) (fn)
#else
#define PTI_CPU_OPTIM_AVX2_OR_NULL(fn) NULL
#endif

/* One gradient element as most algorithms first transform it (the float32 twin of
 * src/optim's pti_optim_generic_grad): maximize ? -g : g, plus wd * p when has_wd. */
static inline float pti_cpu_optim_grad(float g, float p, bool maximize, bool has_wd, float wd)
{
    if (maximize)
        g = -g;
    return has_wd ? g + wd * p : g;
}

typedef struct sgd_ctx {
    float *p, *buf;
    const float *g;
    pti_optim_sgd_params hp;
} sgd_ctx;
void pti_cpu_optim_sgd_range(void *ctx, int64_t begin, int64_t end);
void pti_cpu_optim_sgd_range_avx2(void *ctx, int64_t begin, int64_t end);

typedef struct adam_ctx {
    float *p, *m, *v, *vmax;
    const float *g;
    pti_optim_adam_params hp;
} adam_ctx;
void pti_cpu_optim_adam_range(void *ctx, int64_t begin, int64_t end);
void pti_cpu_optim_adam_range_avx2(void *ctx, int64_t begin, int64_t end);

typedef struct adagrad_ctx {
    float *p, *sum;
    const float *g;
    pti_optim_adagrad_params hp;
} adagrad_ctx;
void pti_cpu_optim_adagrad_range(void *ctx, int64_t begin, int64_t end);
void pti_cpu_optim_adagrad_range_avx2(void *ctx, int64_t begin, int64_t end);

typedef struct adadelta_ctx {
    float *p, *sq, *acc;
    const float *g;
    pti_optim_adadelta_params hp;
} adadelta_ctx;
void pti_cpu_optim_adadelta_range(void *ctx, int64_t begin, int64_t end);
void pti_cpu_optim_adadelta_range_avx2(void *ctx, int64_t begin, int64_t end);

typedef struct adamax_ctx {
    float *p, *m, *u;
    const float *g;
    pti_optim_adamax_params hp;
} adamax_ctx;
void pti_cpu_optim_adamax_range(void *ctx, int64_t begin, int64_t end);
void pti_cpu_optim_adamax_range_avx2(void *ctx, int64_t begin, int64_t end);

typedef struct nadam_ctx {
    float *p, *m, *v;
    const float *g;
    pti_optim_nadam_params hp;
} nadam_ctx;
void pti_cpu_optim_nadam_range(void *ctx, int64_t begin, int64_t end);
void pti_cpu_optim_nadam_range_avx2(void *ctx, int64_t begin, int64_t end);

typedef struct rmsprop_ctx {
    float *p, *sq, *buf, *ga;
    const float *g;
    pti_optim_rmsprop_params hp;
} rmsprop_ctx;
void pti_cpu_optim_rmsprop_range(void *ctx, int64_t begin, int64_t end);
void pti_cpu_optim_rmsprop_range_avx2(void *ctx, int64_t begin, int64_t end);

typedef struct radam_ctx {
    float *p, *m, *v;
    const float *g;
    pti_optim_radam_params hp;
} radam_ctx;
void pti_cpu_optim_radam_range(void *ctx, int64_t begin, int64_t end);

typedef struct asgd_ctx {
    float *p, *ax;
    const float *g;
    pti_optim_asgd_params hp;
} asgd_ctx;
void pti_cpu_optim_asgd_range(void *ctx, int64_t begin, int64_t end);

typedef struct lion_ctx {
    float *p, *m;
    const float *g;
    pti_optim_lion_params hp;
} lion_ctx;
void pti_cpu_optim_lion_range(void *ctx, int64_t begin, int64_t end);

typedef struct rprop_ctx {
    float *p, *prev, *size;
    const float *g;
    pti_optim_rprop_params hp;
} rprop_ctx;
void pti_cpu_optim_rprop_range(void *ctx, int64_t begin, int64_t end);

typedef struct sophia_ctx {
    float *p, *m;
    const float *g, *h;
    pti_optim_sophia_params hp;
} sophia_ctx;
void pti_cpu_optim_sophia_range(void *ctx, int64_t begin, int64_t end);

#endif
