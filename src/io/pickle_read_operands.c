/* Operands and scalar opcodes of the restricted pickle VM (pickle_read.c): little-endian
 * operands and text lines checked against the bytes left before use, integers (text, LONG1,
 * LONG4; beyond int64 is an error), floats, and strings: UTF-8 validated as Python's decoder
 * with 'surrogatepass' does; Python 2 str (STRING, BINSTRING) becomes str when it is valid UTF-8
 * and bytes otherwise; UNICODE is raw-unicode-escape text (Latin-1 bytes, \uXXXX, \UXXXXXXXX). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_read_internal.h"

const char *pk_op_name(uint8_t op)
{
    switch (op) {
    case OP_MARK: return "MARK";
    case OP_STOP: return "STOP";
    case OP_POP: return "POP";
    case OP_POP_MARK: return "POP_MARK";
    case OP_DUP: return "DUP";
    case OP_FLOAT: return "FLOAT";
    case OP_INT: return "INT";
    case OP_BININT: return "BININT";
    case OP_BININT1: return "BININT1";
    case OP_LONG: return "LONG";
    case OP_BININT2: return "BININT2";
    case OP_NONE: return "NONE";
    case OP_PERSID: return "PERSID";
    case OP_BINPERSID: return "BINPERSID";
    case OP_REDUCE: return "REDUCE";
    case OP_STRING: return "STRING";
    case OP_BINSTRING: return "BINSTRING";
    case OP_SHORT_BINSTRING: return "SHORT_BINSTRING";
    case OP_UNICODE: return "UNICODE";
    case OP_BINUNICODE: return "BINUNICODE";
    case OP_APPEND: return "APPEND";
    case OP_BUILD: return "BUILD";
    case OP_GLOBAL: return "GLOBAL";
    case OP_DICT: return "DICT";
    case OP_EMPTY_DICT: return "EMPTY_DICT";
    case OP_APPENDS: return "APPENDS";
    case OP_GET: return "GET";
    case OP_BINGET: return "BINGET";
    case OP_INST: return "INST";
    case OP_LONG_BINGET: return "LONG_BINGET";
    case OP_LIST: return "LIST";
    case OP_EMPTY_LIST: return "EMPTY_LIST";
    case OP_OBJ: return "OBJ";
    case OP_PUT: return "PUT";
    case OP_BINPUT: return "BINPUT";
    case OP_LONG_BINPUT: return "LONG_BINPUT";
    case OP_SETITEM: return "SETITEM";
    case OP_TUPLE: return "TUPLE";
    case OP_EMPTY_TUPLE: return "EMPTY_TUPLE";
    case OP_SETITEMS: return "SETITEMS";
    case OP_BINFLOAT: return "BINFLOAT";
    case OP_PROTO: return "PROTO";
    case OP_NEWOBJ: return "NEWOBJ";
    case OP_EXT1: return "EXT1";
    case OP_EXT2: return "EXT2";
    case OP_EXT4: return "EXT4";
    case OP_TUPLE1: return "TUPLE1";
    case OP_TUPLE2: return "TUPLE2";
    case OP_TUPLE3: return "TUPLE3";
    case OP_NEWTRUE: return "NEWTRUE";
    case OP_NEWFALSE: return "NEWFALSE";
    case OP_LONG1: return "LONG1";
    case OP_LONG4: return "LONG4";
    case OP_BINBYTES: return "BINBYTES";
    case OP_SHORT_BINBYTES: return "SHORT_BINBYTES";
    case OP_SHORT_BINUNICODE: return "SHORT_BINUNICODE";
    case OP_BINUNICODE8: return "BINUNICODE8";
    case OP_BINBYTES8: return "BINBYTES8";
    case OP_EMPTY_SET: return "EMPTY_SET";
    case OP_ADDITEMS: return "ADDITEMS";
    case OP_FROZENSET: return "FROZENSET";
    case OP_NEWOBJ_EX: return "NEWOBJ_EX";
    case OP_STACK_GLOBAL: return "STACK_GLOBAL";
    case OP_MEMOIZE: return "MEMOIZE";
    case OP_FRAME: return "FRAME";
    case OP_BYTEARRAY8: return "BYTEARRAY8";
    case OP_NEXT_BUFFER: return "NEXT_BUFFER";
    case OP_READONLY_BUFFER: return "READONLY_BUFFER";
    default: return "opcode";
    }
}

/* ---- reading operands ----------------------------------------------------------------------- */

bool pk_need_bytes(pk_vm *vm, uint64_t n)
{
    size_t left = vm->len - vm->pos;
    if (n <= left)
        return true;
    return pk_fail(vm, "truncated: needs %llu byte%s, %zu left", (unsigned long long)n,
                   n == 1 ? "" : "s", left);
}

static uint64_t rd_le(pk_vm *vm, int n)
{
    uint64_t v = 0;
    for (int k = 0; k < n; k++)
        v |= (uint64_t)vm->data[vm->pos + (size_t)k] << (8 * k);
    vm->pos += (size_t)n;
    return v;
}

/* A little-endian unsigned operand of n bytes; false when truncated. */
bool pk_rd_uint(pk_vm *vm, int n, uint64_t *out)
{
    if (!pk_need_bytes(vm, (uint64_t)n))
        return false;
    *out = rd_le(vm, n);
    return true;
}

/* A text line (without its '\n'); false when no newline follows. */
bool pk_rd_line(pk_vm *vm, const char **s, size_t *n)
{
    const uint8_t *start = vm->data + vm->pos;
    const uint8_t *nl = memchr(start, '\n', vm->len - vm->pos);
    if (!nl)
        return pk_fail(vm, "truncated: a text operand without its newline");
    *s = (const char *)start;
    *n = (size_t)(nl - start);
    vm->pos += *n + 1;
    return true;
}

/* Parses a decimal integer (optional sign, surrounding blanks, a trailing 'L' if allow_l):
 * 0 ok, 1 malformed, 2 too large for int64. */
static int parse_decimal(const char *s, size_t n, bool allow_l, int64_t *out)
{
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\t'))
        n--;
    if (allow_l && n && s[n - 1] == 'L')
        n--;
    while (n && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    bool neg = false;
    if (n && (*s == '-' || *s == '+')) {
        neg = *s == '-';
        s++;
        n--;
    }
    if (!n)
        return 1;
    uint64_t mag = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    bool big = false;
    for (size_t k = 0; k < n; k++) {
        if (s[k] < '0' || s[k] > '9')
            return 1;
        unsigned d = (unsigned)(s[k] - '0');
        if (big || mag > (limit - d) / 10)
            big = true;
        else
            mag = mag * 10 + d;
    }
    if (big)
        return 2;
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return 0;
}

bool pk_text_int(pk_vm *vm, bool allow_l, int64_t *out)
{
    const char *s = NULL;
    size_t n = 0;
    if (!pk_rd_line(vm, &s, &n))
        return false;
    int r = parse_decimal(s, n, allow_l, out);
    if (r == 2)
        return pk_fail(vm, "integer too large (beyond int64)");
    if (r == 1)
        return pk_fail(vm, "malformed integer '%.*s'", (int)(n < 40 ? n : 40), s);
    return true;
}

/* Two's-complement little-endian integer of n bytes (LONG1 / LONG4). */
bool pk_push_long_bytes(pk_vm *vm, uint64_t n)
{
    if (!pk_need_bytes(vm, n))
        return false;
    const uint8_t *b = vm->data + vm->pos;
    vm->pos += (size_t)n;
    if (n == 0)
        return pk_push(vm, pt_value_int(0));
    bool neg = b[n - 1] & 0x80;
    if (n > 8) {
        for (uint64_t k = 8; k < n; k++)
            if (b[k] != (neg ? 0xff : 0x00))
                return pk_fail(vm, "integer too large (beyond int64)");
        if (((b[7] & 0x80) != 0) != neg)
            return pk_fail(vm, "integer too large (beyond int64)");
    }
    uint64_t v = neg ? ~(uint64_t)0 : 0;
    size_t m = n < 8 ? (size_t)n : 8;
    for (size_t k = 0; k < m; k++) {
        v &= ~((uint64_t)0xff << (8 * k));
        v |= (uint64_t)b[k] << (8 * k);
    }
    int64_t i;
    memcpy(&i, &v, sizeof i);
    return pk_push(vm, pt_value_int(i));
}

/* UTF-8 as Python's 'utf-8' codec with 'surrogatepass' accepts it (the pickler's encoding). */
bool pk_valid_utf8(const uint8_t *s, size_t n)
{
    size_t k = 0;
    while (k < n) {
        uint8_t c = s[k];
        if (c < 0x80) {
            k++;
            continue;
        }
        int len = c >= 0xc2 && c <= 0xdf   ? 2
                  : c >= 0xe0 && c <= 0xef ? 3
                  : c >= 0xf0 && c <= 0xf4 ? 4
                                           : 0;
        if (!len || n - k < (size_t)len)
            return false;
        for (int j = 1; j < len; j++)
            if ((s[k + (size_t)j] & 0xc0) != 0x80)
                return false;
        if ((c == 0xe0 && s[k + 1] < 0xa0) || (c == 0xf0 && s[k + 1] < 0x90) ||
            (c == 0xf4 && s[k + 1] > 0x8f))
            return false; /* overlong or beyond U+10FFFF */
        k += (size_t)len;
    }
    return true;
}

/* A counted str operand of n bytes (BINUNICODE and friends). */
bool pk_push_utf8(pk_vm *vm, uint64_t n)
{
    if (!pk_need_bytes(vm, n))
        return false;
    const uint8_t *s = vm->data + vm->pos;
    vm->pos += (size_t)n;
    if (!pk_valid_utf8(s, (size_t)n))
        return pk_fail(vm, "invalid UTF-8 in a %llu-byte string", (unsigned long long)n);
    return pk_push(vm, pt_value_strn((const char *)s, (size_t)n));
}

bool pk_push_bytes(pk_vm *vm, uint64_t n)
{
    if (!pk_need_bytes(vm, n))
        return false;
    const uint8_t *s = vm->data + vm->pos;
    vm->pos += (size_t)n;
    return pk_push(vm, pt_value_bytes(s, (size_t)n));
}

/* A Python 2 str: a str when it is valid UTF-8 (ASCII names, keys), else bytes. */
bool pk_push_py2_str(pk_vm *vm, const uint8_t *s, size_t n)
{
    if (pk_valid_utf8(s, n))
        return pk_push(vm, pt_value_strn((const char *)s, n));
    return pk_push(vm, pt_value_bytes(s, n));
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* STRING: the repr of a Python 2 str, 'abc' or "abc" with backslash escapes. */
bool pk_op_string(pk_vm *vm)
{
    const char *s = NULL;
    size_t n = 0;
    if (!pk_rd_line(vm, &s, &n))
        return false;
    while (n && s[n - 1] == '\r')
        n--;
    if (n < 2 || (s[0] != '\'' && s[0] != '"') || s[n - 1] != s[0])
        return pk_fail(vm, "the STRING argument must be quoted");
    uint8_t *out = pti_malloc(n);
    if (!out)
        return false;
    size_t o = 0;
    for (size_t k = 1; k + 1 < n; k++) {
        char c = s[k];
        if (c != '\\' || k + 2 >= n) {
            out[o++] = (uint8_t)c;
            continue;
        }
        char e = s[++k];
        const char *simple = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
        const char *hit = NULL;
        for (const char *p = simple; *p; p += 2)
            if (*p == e)
                hit = p;
        if (hit) {
            out[o++] = (uint8_t)hit[1];
        } else if (e == 'x' && k + 2 < n - 1 && hexval(s[k + 1]) >= 0 && hexval(s[k + 2]) >= 0) {
            out[o++] = (uint8_t)(hexval(s[k + 1]) * 16 + hexval(s[k + 2]));
            k += 2;
        } else if (e >= '0' && e <= '7') {
            unsigned v = (unsigned)(e - '0');
            for (int d = 0; d < 2 && k + 1 < n - 1 && s[k + 1] >= '0' && s[k + 1] <= '7'; d++)
                v = v * 8 + (unsigned)(s[++k] - '0');
            out[o++] = (uint8_t)v;
        } else if (e == 'x') {
            free(out);
            return pk_fail(vm, "bad \\x escape in a STRING");
        } else {
            out[o++] = '\\';
            out[o++] = (uint8_t)e;
        }
    }
    bool ok = pk_push_py2_str(vm, out, o);
    free(out);
    return ok;
}

static size_t put_utf8(uint8_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xc0 | cp >> 6);
        o[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xe0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (uint8_t)(0xf0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

/* UNICODE: raw-unicode-escape text (bytes are Latin-1 characters; \uXXXX, \UXXXXXXXX). */
bool pk_op_unicode(pk_vm *vm)
{
    const char *s = NULL;
    size_t n = 0;
    if (!pk_rd_line(vm, &s, &n))
        return false;
    if (n > SIZE_MAX / 3)
        return pk_fail(vm, "string too long");
    uint8_t *out = pti_malloc(n * 3 + 1); /* a byte gives at most 2; \uXXXX (6) at most 3 */
    if (!out)
        return false;
    size_t o = 0;
    for (size_t k = 0; k < n;) {
        int digits = 0;
        if (s[k] == '\\' && k + 1 < n && (s[k + 1] == 'u' || s[k + 1] == 'U'))
            digits = s[k + 1] == 'u' ? 4 : 8;
        if (digits) {
            uint32_t cp = 0;
            bool ok = n - k >= (size_t)digits + 2;
            for (int d = 0; ok && d < digits; d++) {
                int h = hexval(s[k + 2 + (size_t)d]);
                ok = h >= 0;
                cp = cp * 16 + (uint32_t)(h < 0 ? 0 : h);
            }
            if (!ok || cp > 0x10ffff) {
                free(out);
                return pk_fail(vm, "bad \\%c escape in a UNICODE string", s[k + 1]);
            }
            o += put_utf8(out + o, cp);
            k += (size_t)digits + 2;
        } else {
            o += put_utf8(out + o, (uint8_t)s[k]);
            k++;
        }
    }
    bool ok = pk_push(vm, pt_value_strn((const char *)out, o));
    free(out);
    return ok;
}

bool pk_op_float_text(pk_vm *vm)
{
    const char *s = NULL;
    size_t n = 0;
    if (!pk_rd_line(vm, &s, &n))
        return false;
    char buf[128];
    if (n >= sizeof buf)
        return pk_fail(vm, "malformed float (%zu characters)", n);
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    double f = strtod(buf, &end);
    while (*end == ' ' || *end == '\r' || *end == '\t')
        end++;
    if (end == buf || *end)
        return pk_fail(vm, "malformed float '%s'", buf);
    return pk_push(vm, pt_value_float(f));
}

bool pk_op_binfloat(pk_vm *vm)
{
    if (!pk_need_bytes(vm, 8))
        return false;
    uint64_t bits = 0;
    for (int k = 0; k < 8; k++)
        bits = bits << 8 | vm->data[vm->pos + (size_t)k];
    vm->pos += 8;
    double f;
    memcpy(&f, &bits, sizeof f);
    return pk_push(vm, pt_value_float(f));
}
