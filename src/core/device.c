/* The device registry and op dispatch: backends register their vtables here; pti_dispatch
 * finds the kernel for an op on a tensor's device or reports that it has none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *const pti_op_names[PTI_OP_COUNT] = {
#define PT_OP(name) #name,
#include "../ops/ops.def"
#undef PT_OP
};

static const pt_backend *backends[PT_DEVICE_TYPE_COUNT];

static const char *const device_type_names[PT_DEVICE_TYPE_COUNT] = {
    [PT_DEVICE_CPU] = "cpu",
    [PT_DEVICE_CUDA] = "cuda",
    [PT_DEVICE_E2K] = "e2k",
    [PT_DEVICE_NMCARD] = "nmcard",
};

void pti_backend_register(const pt_backend *b)
{
    if (b && (unsigned)b->type < PT_DEVICE_TYPE_COUNT)
        backends[b->type] = b;
}

const pt_backend *pti_backend_for(pt_device d)
{
    if ((unsigned)d.type >= PT_DEVICE_TYPE_COUNT)
        return NULL;
    return backends[d.type];
}

pt_device pt_cpu(void)
{
    return (pt_device){PT_DEVICE_CPU, 0};
}
pt_device pt_cuda(int index)
{
    return (pt_device){PT_DEVICE_CUDA, index};
}

bool pt_device_equal(pt_device a, pt_device b)
{
    return a.type == b.type && a.index == b.index;
}

pt_device pt_device_parse(const char *s)
{
    pt_device bad = {PT_DEVICE_TYPE_COUNT, 0};
    if (!s) {
        pti_error(PT_ERR_DEVICE, "pt_device_parse: NULL device string");
        return bad;
    }
    for (int t = 0; t < PT_DEVICE_TYPE_COUNT; t++) {
        size_t n = strlen(device_type_names[t]);
        if (strncmp(s, device_type_names[t], n) != 0)
            continue;
        if (s[n] == '\0')
            return (pt_device){(pt_device_type)t, 0};
        if (s[n] == ':' && s[n + 1] >= '0' && s[n + 1] <= '9') {
            char *end;
            long idx = strtol(s + n + 1, &end, 10);
            if (*end == '\0' && idx < 1024)
                return (pt_device){(pt_device_type)t, (int)idx};
        }
    }
    pti_error(PT_ERR_DEVICE,
              "pt_device_parse: unknown device '%s' (expected cpu, cuda[:N], e2k or nmcard)", s);
    return bad;
}

char *pt_device_str(pt_device d, char *buf, size_t n)
{
    if (!buf || n == 0)
        return buf;
    if ((unsigned)d.type >= PT_DEVICE_TYPE_COUNT)
        snprintf(buf, n, "invalid");
    else if (d.type == PT_DEVICE_CPU)
        snprintf(buf, n, "cpu");
    else
        snprintf(buf, n, "%s:%d", device_type_names[d.type], d.index);
    return buf;
}

bool pt_device_available(pt_device d)
{
    const pt_backend *b = pti_backend_for(d);
    if (!b)
        return false;
    int count = b->device_count ? b->device_count() : 1;
    return d.index >= 0 && d.index < count;
}

int pt_cuda_device_count(void)
{
    const pt_backend *b = backends[PT_DEVICE_CUDA];
    return b && b->device_count ? b->device_count() : 0;
}

bool pti_check_same_device(const char *op, int n, const pt_tensor *const *ts)
{
    const pt_tensor *first = NULL;
    for (int i = 0; i < n; i++) {
        if (!ts[i])
            continue;
        if (!first) {
            first = ts[i];
            continue;
        }
        if (!pt_device_equal(first->storage->device, ts[i]->storage->device)) {
            char a[32], b[32];
            pti_error(PT_ERR_DEVICE, "%s: expected all tensors on one device, got %s and %s", op,
                      pt_device_str(first->storage->device, a, sizeof a),
                      pt_device_str(ts[i]->storage->device, b, sizeof b));
            return false;
        }
    }
    return true;
}

pt_status pti_dispatch(pti_op op, pti_call *c)
{
    const pt_tensor *t = c->n_out > 0 ? c->out[0] : (c->n_in > 0 ? c->in[0] : NULL);
    if (!t)
        return pti_error(PT_ERR_INVALID_ARG, "%s: dispatch without tensors", pti_op_names[op]);
    c->op = op;
    pt_device dev = t->storage->device;
    const pt_backend *b = pti_backend_for(dev);
    char name[32];
    if (!b)
        return pti_error(PT_ERR_DEVICE, "%s: no backend for device %s in this build",
                         pti_op_names[op], pt_device_str(dev, name, sizeof name));
    if (!b->kernels[op])
        return pti_error(PT_ERR_UNSUPPORTED, "%s: not supported on device %s (no kernel)",
                         pti_op_names[op], pt_device_str(dev, name, sizeof name));
    return b->kernels[op](c);
}
