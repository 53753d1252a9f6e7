/* The CPU backend: host memory through the caching allocator, memcpy transfers, and the
 * kernel table filled by each op family's registration function. Registered at load. */
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static int cpu_count(void)
{
    return 1;
}
/* The CPU has no per-device context (context_create is NULL): ctx is always NULL here. */
static void *cpu_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return pti_cpu_alloc(n);
}
static void cpu_free(void *ctx, void *p, size_t n)
{
    (void)ctx;
    pti_cpu_free(p, n);
}
static pt_status cpu_copy(void *ctx, void *dst, const void *src, size_t n)
{
    (void)ctx;
    memmove(dst, src, n);
    return PT_OK;
}
static pt_status cpu_sync(void *ctx)
{
    (void)ctx;
    return PT_OK;
}

static pt_backend cpu_backend = {
    .name = "cpu",
    .type = PT_DEVICE_CPU,
    .abi_version = PT_BACKEND_ABI_VERSION,
    .device_count = cpu_count,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_h2d = cpu_copy,
    .copy_d2h = cpu_copy,
    .copy_d2d = cpu_copy,
    .synchronize = cpu_sync,
};

static bool avx2_enabled;
static bool f16c_enabled;
static bool avx512_enabled;

bool pti_cpu_has_avx512(void)
{
    return avx512_enabled;
}

bool pti_cpu_has_avx2(void)
{
    return avx2_enabled;
}
bool pti_cpu_has_f16c(void)
{
    return f16c_enabled;
}

#if defined(__x86_64__)
/* CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c"). */
static bool cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

__attribute__((constructor)) static void cpu_backend_init(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    avx2_enabled = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f16c_enabled = avx2_enabled && cpu_has_f16c();
    avx512_enabled = avx2_enabled && __builtin_cpu_supports("avx512f");
#endif
    const char *off = getenv("PT_DISABLE_AVX2");
    if (off && *off && strcmp(off, "0") != 0)
        avx2_enabled = f16c_enabled = avx512_enabled = false;
    off = getenv("PT_DISABLE_AVX512");
    if (off && *off && strcmp(off, "0") != 0)
        avx512_enabled = false;
    pti_cpu_register_core(cpu_backend.kernels);
    pti_cpu_register_elementwise(cpu_backend.kernels);
    pti_cpu_register_reduce(cpu_backend.kernels);
    pti_cpu_register_linalg(cpu_backend.kernels);
    pti_cpu_register_shape(cpu_backend.kernels);
    pti_cpu_register_index(cpu_backend.kernels);
    pti_cpu_register_conv(cpu_backend.kernels);
    pti_cpu_register_nn(cpu_backend.kernels);
    pti_cpu_register_loss(cpu_backend.kernels);
    pti_cpu_register_random(cpu_backend.kernels);
    pti_cpu_register_quant(cpu_backend.kernels);
    pti_cpu_register_optim(cpu_backend.kernels);
    pti_backend_register(&cpu_backend);
}
