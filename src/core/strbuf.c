/* pti_strbuf: the growable string builder shared by the library's printers and template
 * renderers (see strbuf.h). Capacity doubles from 64 bytes. */
#include "strbuf.h"
#include "internal.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for n more bytes plus the NUL; false (with a flag set) when it cannot. */
static bool reserve(pti_strbuf *b, size_t n)
{
    if (!pti_strbuf_ok(b))
        return false;
    if (b->limit && n > b->limit - b->len) {
        b->too_big = true;
        return false;
    }
    if (n >= SIZE_MAX - b->len) {
        b->oom = true;
        return false;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *d = pti_realloc(b->data, cap);
    if (!d) {
        b->oom = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

bool pti_strbuf_put(pti_strbuf *b, const void *s, size_t n)
{
    if (n == 0)
        return pti_strbuf_ok(b);
    if (!reserve(b, n))
        return false;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

bool pti_strbuf_puts(pti_strbuf *b, const char *s)
{
    return pti_strbuf_put(b, s, strlen(s));
}

bool pti_strbuf_putc(pti_strbuf *b, char c)
{
    return pti_strbuf_put(b, &c, 1);
}

bool pti_strbuf_printf(pti_strbuf *b, const char *fmt, ...)
{
    if (!pti_strbuf_ok(b))
        return false;
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return true;
    if ((size_t)n < sizeof tmp)
        return pti_strbuf_put(b, tmp, (size_t)n);
    /* too long for tmp: format again straight into the buffer */
    if (!reserve(b, (size_t)n))
        return false;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return true;
}

char *pti_strbuf_take(pti_strbuf *b)
{
    char *s = b->data;
    if (pti_strbuf_ok(b) && !s) {
        s = pti_calloc(1, 1);
        if (!s)
            b->oom = true;
    }
    if (!pti_strbuf_ok(b)) {
        free(s);
        s = NULL;
    }
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

void pti_strbuf_free(pti_strbuf *b)
{
    free(b->data);
    *b = (pti_strbuf){.limit = b->limit};
}
