/* Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), shared by
 * the readers and the server: one checker instead of one per file. (The pickle reader keeps
 * its own, which accepts surrogates as Python's 'surrogatepass' does.) */
#ifndef PT_CORE_UTF8_H
#define PT_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1-4) of the valid UTF-8 character at s[0 .. n), n >= 1; 0 when the bytes there are
 * not one (a bad or truncated sequence). */
size_t pti_utf8_char_len(const uint8_t *s, size_t n);
/* Index of the first byte of s[0 .. n) that does not start a valid character, n when the
 * text is valid. */
size_t pti_utf8_invalid_at(const void *s, size_t n);
/* s[0 .. n) with every byte that does not start a valid character replaced by U+FFFD, as Go
 * does when it decodes or encodes JSON (one U+FFFD per bad byte): a new NUL-terminated buffer
 * (free()) with its length in *out_n, or NULL when s is valid already or memory ran out. */
char *pti_utf8_repair(const void *s, size_t n, size_t *out_n);

#endif
