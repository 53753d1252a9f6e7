/* Test-only choice of the optimizer's path (tests/internal/test_optim*.c): the CPU backend is
 * registered again as a copy whose optim_* kernel slots are either empty, so every algorithm
 * takes its generic fallback from public ops exactly as on a backend without those kernels,
 * or counting wrappers around the CPU kernels, so a test can assert that the kernel ran.
 * optim_paths_restore puts the real CPU backend back. Header-only, like optim_common.h. */
#ifndef PT_TEST_OPTIM_PATHS_H
#define PT_TEST_OPTIM_PATHS_H

#include <string.h>

#include "core/internal.h"

typedef enum optim_path { OPTIM_KERNEL, OPTIM_FALLBACK } optim_path;

static const pt_backend *optim_paths_cpu;
static pt_backend optim_paths_copy;
static pti_kernel optim_paths_orig[PTI_OP_COUNT];
static int optim_paths_calls[PTI_OP_COUNT];

static inline bool optim_paths_is_optim_op(int op)
{
    return strncmp(pti_op_names[op], "optim_", 6) == 0;
}

static inline pt_status optim_paths_counting(const pti_call *c)
{
    optim_paths_calls[c->op]++;
    return optim_paths_orig[c->op](c);
}

/* Every optimizer step from here on takes `path` (counts reset). */
static inline void optim_paths_use(optim_path path)
{
    if (!optim_paths_cpu)
        optim_paths_cpu = pti_backend_for(pt_cpu());
    optim_paths_copy = *optim_paths_cpu;
    for (int op = 0; op < PTI_OP_COUNT; op++) {
        if (!optim_paths_is_optim_op(op))
            continue;
        optim_paths_orig[op] = optim_paths_cpu->kernels[op];
        optim_paths_copy.kernels[op] = path == OPTIM_KERNEL ? optim_paths_counting : NULL;
        optim_paths_calls[op] = 0;
    }
    pti_backend_register(&optim_paths_copy);
}

static inline void optim_paths_restore(void)
{
    if (optim_paths_cpu)
        pti_backend_register(optim_paths_cpu);
}

/* How many times kernel `op` ran since the last optim_paths_use. */
static inline int optim_paths_count(pti_op op)
{
    return optim_paths_calls[op];
}

/* The kernel a test case's algorithm uses, from the case name's first word ("adamw_default"
 * -> optim_adam); PTI_OP_COUNT for algorithms without a fused kernel (Adafactor, LBFGS). */
static inline pti_op optim_paths_op_of(const char *case_name)
{
    static const struct {
        const char *prefix;
        pti_op op;
    } map[] = {
        {"sgd", PTI_OP_optim_sgd},         {"adamw", PTI_OP_optim_adam},
        {"adamax", PTI_OP_optim_adamax},   {"adam", PTI_OP_optim_adam},
        {"adagrad", PTI_OP_optim_adagrad}, {"adadelta", PTI_OP_optim_adadelta},
        {"nadam", PTI_OP_optim_nadam},     {"rmsprop", PTI_OP_optim_rmsprop},
        {"radam", PTI_OP_optim_radam},     {"asgd", PTI_OP_optim_asgd},
        {"lion", PTI_OP_optim_lion},       {"rprop", PTI_OP_optim_rprop},
        {"sophia", PTI_OP_optim_sophia},   {"lamb", PTI_OP_optim_lamb},
    };
    size_t n = strcspn(case_name, "_");
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strlen(map[i].prefix) == n && strncmp(case_name, map[i].prefix, n) == 0)
            return map[i].op;
    return PTI_OP_COUNT;
}

#endif
