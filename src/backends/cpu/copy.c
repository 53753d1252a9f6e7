/* CPU kernels for the core data-movement ops: copy (strided, broadcasting, casting between
 * any two plain dtypes) and fill. */
#include <string.h>

#include "cpu.h"

typedef struct cast_ctx {
    pt_dtype to, from;
} cast_ctx;

/* Same dtype: a memcpy per contiguous run, else element by element. */
static void copy_same_loop(void *ctx, char **data, const int64_t *strides, int64_t n)
{
    size_t es = *(const size_t *)ctx;
    char *dst = data[0];
    const char *src = data[1];
    if (strides[0] == (int64_t)es && strides[1] == (int64_t)es) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    switch (es) {
    case 4:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * strides[0], src + i * strides[1], 4);
        break;
    case 8:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * strides[0], src + i * strides[1], 8);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * strides[0], src + i * strides[1], es);
    }
}

static void cast_f32_from_f64(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        *(float *)(dst + i * ds) = (float)*(const double *)(src + i * ss);
}

static void cast_f64_from_f32(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        *(double *)(dst + i * ds) = *(const float *)(src + i * ss);
}

static void cast_loop(void *arg, char **data, const int64_t *strides, int64_t n)
{
    const cast_ctx *c = arg;
    char *dst = data[0];
    const char *src = data[1];
    int64_t ds = strides[0], ss = strides[1];
    if (c->to == PT_FLOAT32 && c->from == PT_FLOAT64) {
        cast_f32_from_f64(dst, ds, src, ss, n);
    } else if (c->to == PT_FLOAT64 && c->from == PT_FLOAT32) {
        cast_f64_from_f32(dst, ds, src, ss, n);
    } else if (!pti_dtypes[c->to].is_floating && !pti_dtypes[c->from].is_floating) {
        for (int64_t i = 0; i < n; i++) /* int/bool to int/bool: exact through int64 */
            pti_store_i64(dst + i * ds, c->to, pti_load_i64(src + i * ss, c->from));
    } else {
        for (int64_t i = 0; i < n; i++)
            pti_store_f64(dst + i * ds, c->to, pti_load_f64(src + i * ss, c->from));
    }
}

static pt_status cpu_copy(const pti_call *c)
{
    pt_tensor *dst = c->out[0];
    const pt_tensor *src = c->in[0];
    const pt_tensor *ops[2] = {dst, src};
    pti_iter it;
    pti_iter_init(&it, 2, ops);
    if (dst->dtype == src->dtype) {
        size_t es = pti_dtypes[dst->dtype].size;
        pti_iter_for_each(&it, PTI_GRAIN_ELEMENTWISE * 4, copy_same_loop, &es);
    } else {
        cast_ctx ctx = {dst->dtype, src->dtype};
        pti_iter_for_each(&it, PTI_GRAIN_ELEMENTWISE, cast_loop, &ctx);
    }
    return PT_OK;
}

/* fill: the value is encoded once into an element, then replicated. */
static void fill_loop(void *arg, char **data, const int64_t *strides, int64_t n)
{
    const unsigned char *elem = arg;
    size_t es = elem[15];
    char *dst = data[0];
    if (es == 4 && strides[0] == 4) {
        uint32_t v;
        memcpy(&v, elem, 4);
        uint32_t *p = (uint32_t *)dst;
        for (int64_t i = 0; i < n; i++)
            p[i] = v;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + i * strides[0], elem, es);
}

static pt_status cpu_fill(const pti_call *c)
{
    pt_tensor *t = c->out[0];
    unsigned char elem[16] = {0};
    pti_store_f64(elem, t->dtype, c->scalar[0]);
    elem[15] = (unsigned char)pti_dtypes[t->dtype].size;
    const pt_tensor *ops[1] = {t};
    pti_iter it;
    pti_iter_init(&it, 1, ops);
    pti_iter_for_each(&it, PTI_GRAIN_ELEMENTWISE * 4, fill_loop, elem);
    return PT_OK;
}

void pti_cpu_register_core(pti_kernel *table)
{
    table[PTI_OP_copy] = cpu_copy;
    table[PTI_OP_fill] = cpu_fill;
}
