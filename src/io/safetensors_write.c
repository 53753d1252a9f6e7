/* The safetensors writer (io.h: pt_save_safetensors).
 *
 * Layout (https://github.com/huggingface/safetensors, "Format"): u64 little-endian N, then N
 * bytes of UTF-8 JSON mapping each tensor name to {"dtype", "shape", "data_offsets"} (offsets
 * relative to the end of the header, covering the data without holes), then the data. The
 * header is padded with spaces to a multiple of 8 bytes, as the reference writer does. */
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "../core/strbuf.h"
#include "prometorch/io.h"

/* A JSON string literal: quotes, backslashes and control characters escaped. */
static void sb_json_string(pti_strbuf *b, const char *s, size_t n)
{
    pti_strbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            pti_strbuf_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            pti_strbuf_put(b, esc, 6);
        } else {
            pti_strbuf_put(b, (const char *)&c, 1);
        }
    }
    pti_strbuf_put(b, "\"", 1);
}

static const char *safetensors_dtype(pt_dtype dt)
{
    switch (dt) {
    case PT_FLOAT64: return "F64";
    case PT_FLOAT32: return "F32";
    case PT_FLOAT16: return "F16";
    case PT_BFLOAT16: return "BF16";
    case PT_INT64: return "I64";
    case PT_INT32: return "I32";
    case PT_INT16: return "I16";
    case PT_INT8: return "I8";
    case PT_UINT8: return "U8";
    case PT_BOOL: return "BOOL";
    default: return NULL;
    }
}

/* Checks the dict and builds the JSON header; *data_bytes receives the total data size. */
static pt_status build_header(const pt_value *sd, const pt_value *metadata, pti_strbuf *b,
                              uint64_t *data_bytes)
{
    if (!sd || pt_value_kind_of(sd) != PT_VALUE_DICT)
        return pti_error(PT_ERR_INVALID_ARG, "pt_save_safetensors: state_dict is not a dict");
    if (metadata && pt_value_kind_of(metadata) != PT_VALUE_DICT)
        return pti_error(PT_ERR_INVALID_ARG, "pt_save_safetensors: metadata is not a dict");
    uint64_t offset = 0;
    pti_strbuf_puts(b, "{");
    int64_t n = pt_value_len(sd);
    for (int64_t i = 0; i < n; i++) {
        const pt_value *k = pt_value_key_ref(sd, i);
        const pt_tensor *t = pt_value_tensor_ref(pt_value_item_ref(sd, i));
        size_t klen = 0;
        const char *key = pt_value_kind_of(k) == PT_VALUE_STR ? pt_value_as_str(k, &klen) : NULL;
        if (!key)
            return pti_error(PT_ERR_INVALID_ARG, "pt_save_safetensors: key %lld is not a str",
                             (long long)i);
        if (strcmp(key, "__metadata__") == 0)
            return pti_error(PT_ERR_INVALID_ARG,
                             "pt_save_safetensors: '__metadata__' cannot be a tensor name");
        if (!t)
            return pti_error(PT_ERR_INVALID_ARG,
                             "pt_save_safetensors: value of '%s' is not a tensor", key);
        const char *dt = safetensors_dtype(t->dtype);
        if (!dt)
            return pti_error(PT_ERR_DTYPE,
                             "pt_save_safetensors: '%s' has dtype %s, which "
                             "safetensors cannot store",
                             key, pt_dtype_name(t->dtype));
        uint64_t nbytes = pti_dtype_nbytes(t->dtype, t->numel);
        char num[64];
        pti_strbuf_puts(b, i ? "," : "");
        sb_json_string(b, key, klen);
        pti_strbuf_puts(b, ":{\"dtype\":\"");
        pti_strbuf_puts(b, dt);
        pti_strbuf_puts(b, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            snprintf(num, sizeof(num), "%s%lld", d ? "," : "", (long long)t->shape[d]);
            pti_strbuf_puts(b, num);
        }
        snprintf(num, sizeof(num), "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                 (unsigned long long)(offset + nbytes));
        pti_strbuf_puts(b, num);
        offset += nbytes;
    }
    if (metadata && pt_value_len(metadata) > 0) {
        pti_strbuf_puts(b, n ? ",\"__metadata__\":{" : "\"__metadata__\":{");
        for (int64_t i = 0; i < pt_value_len(metadata); i++) {
            size_t kl = 0, vl = 0;
            const pt_value *k = pt_value_key_ref(metadata, i), *v = pt_value_item_ref(metadata, i);
            const char *ks = pt_value_kind_of(k) == PT_VALUE_STR ? pt_value_as_str(k, &kl) : NULL;
            const char *vs = pt_value_kind_of(v) == PT_VALUE_STR ? pt_value_as_str(v, &vl) : NULL;
            if (!ks || !vs)
                return pti_error(PT_ERR_INVALID_ARG,
                                 "pt_save_safetensors: metadata entry %lld is not str -> str",
                                 (long long)i);
            pti_strbuf_puts(b, i ? "," : "");
            sb_json_string(b, ks, kl);
            pti_strbuf_puts(b, ":");
            sb_json_string(b, vs, vl);
        }
        pti_strbuf_puts(b, "}");
    }
    pti_strbuf_puts(b, "}");
    while (pti_strbuf_ok(b) && b->len % 8 != 0)
        pti_strbuf_puts(b, " ");
    if (!pti_strbuf_ok(b))
        return pti_error(PT_ERR_OOM, "pt_save_safetensors: out of memory for the header");
    *data_bytes = offset;
    return PT_OK;
}

/* Writes each tensor's bytes (contiguous, host order = little-endian on supported hosts). */
static pt_status write_data(FILE *f, const pt_value *sd, const char *path)
{
    for (int64_t i = 0; i < pt_value_len(sd); i++) {
        const pt_tensor *t = pt_value_tensor_ref(pt_value_item_ref(sd, i));
        size_t nbytes = pti_dtype_nbytes(t->dtype, t->numel);
        if (nbytes == 0)
            continue;
        void *buf = pti_malloc(nbytes);
        if (!buf)
            return pti_error(PT_ERR_OOM, "pt_save_safetensors: out of memory (%zu bytes)", nbytes);
        pt_status st = pt_copy_to_host(t, buf, nbytes);
        if (st == PT_OK && fwrite(buf, 1, nbytes, f) != nbytes)
            st = pti_error(PT_ERR_IO, "pt_save_safetensors: cannot write '%s': %s", path,
                           strerror(errno));
        free(buf);
        if (st != PT_OK)
            return st;
    }
    return PT_OK;
}

pt_status pt_save_safetensors(const char *path, const pt_value *state_dict,
                              const pt_value *metadata)
{
    if (!path)
        return pti_error(PT_ERR_INVALID_ARG, "pt_save_safetensors: path is NULL");
    pti_strbuf header = {0};
    uint64_t data_bytes = 0;
    pt_status st = build_header(state_dict, metadata, &header, &data_bytes);
    if (st != PT_OK) {
        pti_strbuf_free(&header);
        return st;
    }
    size_t plen = strlen(path);
    char *tmp = pti_malloc(plen + 5);
    if (!tmp) {
        pti_strbuf_free(&header);
        return pti_error(PT_ERR_OOM, "pt_save_safetensors: out of memory");
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = pti_error(PT_ERR_IO, "pt_save_safetensors: cannot write '%s': %s", path,
                       strerror(errno));
    } else {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++)
            len8[i] = (unsigned char)((uint64_t)header.len >> (8 * i));
        if (fwrite(len8, 1, 8, f) != 8 || fwrite(header.data, 1, header.len, f) != header.len)
            st = pti_error(PT_ERR_IO, "pt_save_safetensors: cannot write '%s': %s", path,
                           strerror(errno));
        if (st == PT_OK)
            st = write_data(f, state_dict, path);
        if (fclose(f) != 0 && st == PT_OK)
            st = pti_error(PT_ERR_IO, "pt_save_safetensors: cannot write '%s': %s", path,
                           strerror(errno));
        if (st == PT_OK && rename(tmp, path) != 0)
            st = pti_error(PT_ERR_IO, "pt_save_safetensors: cannot rename '%s' to '%s': %s", tmp,
                           path, strerror(errno));
        if (st != PT_OK)
            remove(tmp);
    }
    free(tmp);
    pti_strbuf_free(&header);
    return st;
}
