/* Shared helpers of the nn layers: Python-style repr formatting and parameter/buffer creation. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "layers_internal.h"
#include "prometorch/nn_init.h"

void pti_nn_catf(char *buf, size_t cap, const char *fmt, ...)
{
    size_t len = strnlen(buf, cap);
    if (len + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

const char *pti_nn_bool(bool b)
{
    return b ? "True" : "False";
}

/* Python's float repr: the shortest digits that round-trip, fixed notation for decimal
 * exponents in [-4, 16), otherwise d.ddde+XX with at least two exponent digits. */
void pti_nn_cat_float(char *buf, size_t cap, double v)
{
    if (v != v) {
        pti_nn_catf(buf, cap, "nan");
        return;
    }
    if (v == 1.0 / 0.0 || v == -1.0 / 0.0) {
        pti_nn_catf(buf, cap, v > 0 ? "inf" : "-inf");
        return;
    }
    char tmp[64];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX: split into sign, digits and exponent. */
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg)
        p++;
    char digits[32];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int exp10 = atoi(p + 1);
    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -exp10 - 1; i++)
                out[o++] = '0';
            for (int i = 0; i < nd; i++)
                out[o++] = digits[i];
        } else {
            for (int i = 0; i <= exp10; i++)
                out[o++] = i < nd ? digits[i] : '0';
            out[o++] = '.';
            if (nd > exp10 + 1)
                for (int i = exp10 + 1; i < nd; i++)
                    out[o++] = digits[i];
            else
                out[o++] = '0';
        }
        out[o] = '\0';
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        snprintf(out + o, sizeof(out) - o, "e%c%02d", exp10 < 0 ? '-' : '+',
                 exp10 < 0 ? -exp10 : exp10);
    }
    pti_nn_catf(buf, cap, "%s", out);
}

void pti_nn_cat_tuple(char *buf, size_t cap, int n, const int64_t *v)
{
    pti_nn_catf(buf, cap, "(");
    for (int i = 0; i < n; i++)
        pti_nn_catf(buf, cap, i ? ", %lld" : "%lld", (long long)v[i]);
    pti_nn_catf(buf, cap, n == 1 ? ",)" : ")");
}

pt_tensor *pti_nn_new_param(pt_module *m, const char *name, int ndim, const int64_t *shape,
                            double bound, double fill)
{
    pt_tensor *t = pt_empty(ndim, shape, PT_FLOAT32, pt_cpu());
    if (!t)
        return NULL;
    pt_status st = bound >= 0 ? pt_nn_init_uniform_(t, -bound, bound) : pt_fill_(t, fill);
    if (st == PT_OK)
        st = pt_nn_register_parameter(m, name, t);
    pt_release(t);
    return st == PT_OK ? t : NULL;
}

pt_module *pti_nn_add_weight_bias(pt_module *m, int w_ndim, const int64_t *w_shape, int64_t out,
                                  bool with_bias, double bound, pt_tensor **weight,
                                  pt_tensor **bias)
{
    int64_t b_shape[1] = {out};
    *weight = pti_nn_new_param(m, "weight", w_ndim, w_shape, bound, 0);
    if (*weight && with_bias)
        *bias = pti_nn_new_param(m, "bias", 1, b_shape, bound, 0);
    if (!*weight || (with_bias && !*bias)) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

pt_tensor *pti_nn_new_buffer(pt_module *m, const char *name, int ndim, const int64_t *shape,
                             pt_dtype dt, double fill)
{
    pt_tensor *t = pt_full(ndim, shape, fill, dt, pt_cpu());
    if (!t)
        return NULL;
    pt_status st = pt_nn_register_buffer(m, name, t, true);
    pt_release(t);
    return st == PT_OK ? t : NULL;
}
