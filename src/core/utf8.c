/* Strict UTF-8 checking (utf8.h). */
#include "utf8.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

size_t pti_utf8_char_len(const uint8_t *s, size_t n)
{
    uint8_t b = s[0];
    if (b < 0x80)
        return 1;
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        lo = b == 0xE0 ? 0xA0 : 0x80; /* overlong */
        hi = b == 0xED ? 0x9F : 0xBF; /* surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        lo = b == 0xF0 ? 0x90 : 0x80; /* overlong */
        hi = b == 0xF4 ? 0x8F : 0xBF; /* above U+10FFFF */
    }
    if (len == 0 || len > n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return len;
}

size_t pti_utf8_invalid_at(const void *p, size_t n)
{
    const uint8_t *s = p;
    size_t i = 0, k;
    while (i < n && (k = pti_utf8_char_len(s + i, n - i)) > 0)
        i += k;
    return i;
}

char *pti_utf8_repair(const void *p, size_t n, size_t *out_n)
{
    const uint8_t *s = p;
    size_t i = pti_utf8_invalid_at(s, n);
    if (i == n || n > (SIZE_MAX - 1) / 3)
        return NULL;
    char *out = pti_malloc(n * 3 + 1); /* a bad byte grows to 3 */
    if (!out)
        return NULL;
    memcpy(out, s, i);
    size_t o = i;
    while (i < n) {
        size_t k = pti_utf8_char_len(s + i, n - i);
        if (k) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    *out_n = o;
    return out;
}
