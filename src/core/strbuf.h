/* pti_strbuf: the library's one growable string builder (internal).
 *
 * Zero-initialise it (optionally with .limit), append with the put functions, then either take
 * the string or free it. Appends never fail loudly: an allocation failure sets oom, an append
 * that would pass limit sets too_big, and from then on appends are ignored, so a writer can
 * append unconditionally and check pti_strbuf_ok once at the end. Reporting the failure
 * (pti_error) is the caller's job. Not thread-safe; one buffer per writer. */
#ifndef PTI_STRBUF_H
#define PTI_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct pti_strbuf {
    char *data;   /* owned; NUL-terminated once anything was appended, NULL before */
    size_t len;   /* bytes of content, excluding the NUL */
    size_t cap;   /* bytes allocated */
    size_t limit; /* most bytes of content allowed; 0 = no limit */
    bool oom;     /* an allocation failed */
    bool too_big; /* an append would have passed limit (a writer may also set it when its
                   * output passes a bound of its own) */
} pti_strbuf;

/* Appends n bytes of s (which must not point into b's own data). Returns pti_strbuf_ok(b):
 * false once any append has failed. n = 0 appends nothing and allocates nothing. */
bool pti_strbuf_put(pti_strbuf *b, const void *s, size_t n);

/* Appends the NUL-terminated string s. */
bool pti_strbuf_puts(pti_strbuf *b, const char *s);

/* Appends one byte. */
bool pti_strbuf_putc(pti_strbuf *b, char c);

/* Appends printf-formatted text (of any length). An encoding error appends nothing. */
bool pti_strbuf_printf(pti_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether every append so far succeeded (neither oom nor too_big). */
static inline bool pti_strbuf_ok(const pti_strbuf *b)
{
    return !b->oom && !b->too_big;
}

/* Hands the string to the caller (free it): "" when nothing was appended. NULL when an append
 * failed (or allocating "" fails, which sets oom); the caller reports that. The content is
 * released either way: b is left empty, with its flags and limit kept. */
char *pti_strbuf_take(pti_strbuf *b);

/* Frees the content; b is left empty and usable, with limit kept and the flags cleared. */
void pti_strbuf_free(pti_strbuf *b);

#endif
