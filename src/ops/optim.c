/* Front-end of the optimizer family: src/optim's algorithms ask whether their fused update
 * kernel applies to a parameter (layout, dtype, and whether the parameter's backend has the
 * slot) and run it through dispatch; otherwise they take their generic path from public ops,
 * so a backend without these kernels still trains, only slower. */
#include "optim.h"

static bool fits(const pt_tensor *t, const pt_tensor *p)
{
    return t->dtype == PT_FLOAT32 && t->numel == p->numel && pti_is_contiguous(t) &&
           pt_device_equal(t->storage->device, p->storage->device);
}

bool pti_optim_kernel_applies(pti_op op, const pt_tensor *p, const pt_tensor *g, int n_bufs,
                              pt_tensor *const *bufs)
{
    if (!p || !g || n_bufs > PTI_MAX_OUT - 1 || !fits(p, p) || !fits(g, p))
        return false;
    for (int k = 0; k < n_bufs; k++)
        if (bufs[k] && !fits(bufs[k], p))
            return false;
    /* the backend's own answer: a kernel for op that takes float32 (dtype mask, supports()) */
    return pt_backend_supports(p->storage->device.type, (int)op, PT_FLOAT32);
}

pt_status pti_optim_kernel(pti_op op, pt_tensor *p, const pt_tensor *g, int n_bufs,
                           pt_tensor *const *bufs, const void *params)
{
    if (n_bufs > PTI_MAX_OUT - 1)
        return pti_error(PT_ERR_INVALID_ARG, "%s: %d state buffers (at most %d)", pti_op_names[op],
                         n_bufs, PTI_MAX_OUT - 1);
    if (p->numel == 0)
        return PT_OK;
    pti_call c = {.n_in = 1, .n_out = 1 + n_bufs, .params = params};
    c.in[0] = g;
    c.out[0] = p;
    for (int k = 0; k < n_bufs; k++)
        c.out[1 + k] = bufs[k];
    return pti_dispatch(op, &c);
}

pt_status pti_optim_sum_sq(const pt_tensor *t, double *out)
{
    *out = 0.0;
    if (t->numel == 0)
        return PT_OK;
    pt_tensor *s = pti_tensor_new(0, NULL, PT_FLOAT64, t->storage->device);
    if (!s)
        return pt_last_status();
    pti_call c = {.n_in = 1, .n_out = 1};
    c.in[0] = t;
    c.out[0] = s;
    pt_status st = pti_dispatch(PTI_OP_optim_sum_sq, &c);
    if (st == PT_OK)
        *out = pt_item(s);
    pt_release(s);
    return st;
}
