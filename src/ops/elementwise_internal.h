/* Helpers shared by the elementwise front-end files (elementwise.c, elementwise_binary.c):
 * PyTorch's result-type computation, numbers boxed as 0-dim tensors, dtype conversion and the
 * in-place checks. */
#ifndef PT_OPS_ELEMENTWISE_INTERNAL_H
#define PT_OPS_ELEMENTWISE_INTERNAL_H

#include "common.h"

/* PyTorch's ResultTypeState: the promoted dtype of dimensioned tensors, 0-dim tensors and
 * numbers separately (-1 = none yet); the result favours the first unless a later class has a
 * higher category (bool < integer < floating). */
typedef struct pti_ew_rt {
    int dim, zero, wrapped;
} pti_ew_rt;
void pti_ew_rt_init(pti_ew_rt *s);
void pti_ew_rt_tensor(pti_ew_rt *s, const pt_tensor *t);
/* A number: integral values count as Python ints (int64), others as floats (float32). */
void pti_ew_rt_number(pti_ew_rt *s, double v);
pt_dtype pti_ew_rt_result(const pti_ew_rt *s);
bool pti_ew_number_is_int(double v);

bool pti_ew_can_cast(pt_dtype from, pt_dtype to);
/* The dtype kernels compute in: float16/bfloat16 -> float32, others unchanged. */
pt_dtype pti_ew_compute_dtype(pt_dtype dt);
int64_t pti_ew_sat_i64(double v);

/* A number as a 0-dim tensor: on the CPU it lives in the box (no allocation); elsewhere it is a
 * new device tensor. Release with pti_ew_unbox. */
typedef struct pti_ew_scalar_box {
    pt_storage storage;
    pt_tensor tensor;
    _Alignas(8) unsigned char bytes[8];
} pti_ew_scalar_box;
pt_tensor *pti_ew_box(pti_ew_scalar_box *b, double v, pt_dtype dt, pt_device dev);
void pti_ew_unbox(pti_ew_scalar_box *b, pt_tensor *t);

const pt_tensor *pti_ew_convert(const pt_tensor *t, pt_dtype dt, pt_tensor **owned);
pt_tensor *pti_ew_finish(pt_tensor *out, pt_dtype rt);
pt_status pti_ew_copy_back(pt_tensor *self, pt_tensor *result);
/* In-place checks: rt castable to self's dtype and the broadcast shape equal to self's. */
bool pti_ew_check_inplace(const char *op, const pt_tensor *self, pt_dtype rt, int ndim,
                          const int64_t *shape);

/* ---- autograd (elementwise_grad.c) ---- */

/* Each records a node for `out` (the caller has checked pti_grad_recording) and returns out, or
 * releases it and returns NULL with the error set. Numbers of `_scalar` forms are passed as a
 * NULL tensor plus their value. */
pt_tensor *pti_ew_record_unary(const char *name, pti_op op, const pt_tensor *in, const double *p,
                               pt_tensor *out);
pt_tensor *pti_ew_record_binary(const char *name, pti_op op, const pt_tensor *a, double av,
                                const pt_tensor *b, double bv, double s0, pt_tensor *out);
typedef enum pti_ew_ternary {
    PTI_EW_WHERE,   /* (cond, a, b) */
    PTI_EW_LERP,    /* (start, end, weight or NULL with value = the weight) */
    PTI_EW_ADDCMUL, /* (self, t1, t2), value */
    PTI_EW_ADDCDIV,
    PTI_EW_CLAMP, /* (t, min or NULL, max or NULL) */
} pti_ew_ternary;
pt_tensor *pti_ew_record_ternary(const char *name, pti_ew_ternary kind, const pt_tensor *x,
                                 const pt_tensor *y, const pt_tensor *z, double value,
                                 pt_tensor *out);
/* The in-place rule while recording: `result` (recorded, computed out of place from a clone of
 * self) is written into self under no-grad and self takes its history. Releases result. */
pt_status pti_ew_inplace_finish(const char *name, pt_tensor *self, pt_tensor *result);

#endif
