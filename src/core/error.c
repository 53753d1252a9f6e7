/* Thread-local error state: the status and message of the last failing call, and the
 * helpers front-ends use to describe shapes and tensors in messages. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local pt_status last_status = PT_OK;
static _Thread_local char last_message[1024];

pt_status pt_last_status(void)
{
    return last_status;
}
const char *pt_last_error(void)
{
    return last_message;
}

void pt_clear_error(void)
{
    last_status = PT_OK;
    last_message[0] = '\0';
}

const char *pt_status_name(pt_status s)
{
    switch (s) {
    case PT_OK: return "PT_OK";
    case PT_ERR_INVALID_ARG: return "PT_ERR_INVALID_ARG";
    case PT_ERR_NULL: return "PT_ERR_NULL";
    case PT_ERR_SHAPE: return "PT_ERR_SHAPE";
    case PT_ERR_DTYPE: return "PT_ERR_DTYPE";
    case PT_ERR_DEVICE: return "PT_ERR_DEVICE";
    case PT_ERR_INDEX: return "PT_ERR_INDEX";
    case PT_ERR_UNSUPPORTED: return "PT_ERR_UNSUPPORTED";
    case PT_ERR_OOM: return "PT_ERR_OOM";
    case PT_ERR_IO: return "PT_ERR_IO";
    case PT_ERR_FORMAT: return "PT_ERR_FORMAT";
    case PT_ERR_RUNTIME: return "PT_ERR_RUNTIME";
    }
    return "PT_ERR_UNKNOWN";
}

static void set_error_v(pt_status st, const char *fmt, va_list ap)
{
    last_status = st;
    vsnprintf(last_message, sizeof last_message, fmt, ap);
}

pt_status pti_error(pt_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error_v(st, fmt, ap);
    va_end(ap);
    return st;
}

void *pti_error_null(pt_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error_v(st, fmt, ap);
    va_end(ap);
    return NULL;
}

pt_status pti_null_arg(const char *op, const char *arg)
{
    if (last_status != PT_OK)
        return last_status;
    return pti_error(PT_ERR_NULL, "%s: argument '%s' is NULL", op, arg);
}

#define DESC_SLOTS 8
static _Thread_local char desc_buf[DESC_SLOTS][256];
static _Thread_local unsigned desc_next;

static char *next_desc_buf(void)
{
    return desc_buf[desc_next++ % DESC_SLOTS];
}

static void format_shape(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < n)
        snprintf(buf + used, n - used, "]");
}

const char *pti_shape_str(int ndim, const int64_t *shape)
{
    char *buf = next_desc_buf();
    format_shape(buf, 256, ndim, shape);
    return buf;
}

const char *pti_tensor_desc(const pt_tensor *t)
{
    char *buf = next_desc_buf();
    if (!t) {
        snprintf(buf, 256, "NULL");
        return buf;
    }
    char shape[160], dev[32];
    format_shape(shape, sizeof shape, t->ndim, t->shape);
    snprintf(buf, 256, "%s %s %s", shape, pt_dtype_name(t->dtype),
             pt_device_str(t->storage->device, dev, sizeof dev));
    return buf;
}
