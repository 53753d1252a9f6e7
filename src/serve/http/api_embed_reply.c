/* The reply of an embedding batch (/api/embed, /v1/embeddings), written while it is sent.
 *
 * The vectors are computed first, into one buffer of count x dim float32 values (as Ollama
 * computes every embedding before it writes), so no error can happen once the first byte is
 * out. The JSON text is then generated from that buffer one vector at a time as the
 * connection sends it (ps_reply_pull): the server never holds the text of the whole reply,
 * nor a JSON node per vector or number. For N vectors the memory is the N x dim floats, plus
 * the text of one vector. The text is what the cJSON-built reply was, byte for byte: the
 * fields around the list are printed by cJSON, each number is the shortest decimal that
 * reads back as the same float32 (Go's encoding of a float32). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "../../core/utf8.h"

/* Appends v as the shortest decimal that reads back as the same float32 (what Go's JSON
 * encoder writes for a float32; ".9g" always round-trips); at most 16 bytes. */
static size_t put_float(char *out, float v)
{
    if (!isfinite(v))
        v = 0.0f; /* JSON has no NaN or infinity */
    for (int prec = 6; prec <= 9; prec++) {
        int n = snprintf(out, 24, "%.*g", prec, (double)v);
        if (prec == 9 || strtof(out, NULL) == v)
            return (size_t)n;
    }
    return 0;
}

#define FLOAT_TEXT_MAX 24 /* put_float's bytes, with room to spare */

/* "[v0,v1,...]" */
static size_t put_float_array(char *out, const float *v, int n)
{
    size_t len = 0;
    out[len++] = '[';
    for (int i = 0; i < n; i++) {
        if (i)
            out[len++] = ',';
        len += put_float(out + len, v[i]);
    }
    out[len++] = ']';
    return len;
}

/* The n values as base64 of little-endian float32 (OpenAI's encoding_format "base64"). */
static size_t put_base64(char *out, const float *v, int n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t nb = (size_t)n * 4, o = 0;
    unsigned char b[3];
    for (size_t i = 0; i < nb; i += 3) {
        for (size_t k = 0; k < 3; k++) {
            size_t j = i + k;
            uint32_t u = 0;
            if (j < nb) {
                float f = isfinite(v[j / 4]) ? v[j / 4] : 0.0f; /* as the float form */
                memcpy(&u, &f, 4);
            }
            b[k] = j < nb ? (unsigned char)(u >> (8 * (j % 4))) : 0;
        }
        uint32_t w = (uint32_t)b[0] << 16 | (uint32_t)b[1] << 8 | b[2];
        out[o++] = abc[w >> 18 & 63];
        out[o++] = abc[w >> 12 & 63];
        out[o++] = i + 1 < nb ? abc[w >> 6 & 63] : '=';
        out[o++] = i + 2 < nb ? abc[w & 63] : '=';
    }
    return o;
}

cJSON *ps_api_embed_vector_json(const float *v, int n)
{
    char *text = pti_malloc((size_t)n * FLOAT_TEXT_MAX + 3);
    if (!text)
        return NULL;
    text[put_float_array(text, v, n)] = '\0';
    cJSON *node = cJSON_CreateRaw(text);
    free(text);
    return node;
}

/* ---- the streamed reply --------------------------------------------------------------------- */

typedef struct embed_reply {
    ps_embed_vecs vecs;
    ps_embed_form form;
    char *head, *tail; /* the text before and after the list */
    char *piece;       /* the text of the head, one vector or the tail, being sent */
    size_t piece_len, piece_off;
    int next; /* 0 the head, 1..count the vectors, count + 1 the tail, then the end */
} embed_reply;

/* The text of vector i with what surrounds it in the list. */
static size_t vector_piece(embed_reply *e, int i, char *out)
{
    const float *v = e->vecs.v + (size_t)i * (size_t)e->vecs.dim;
    size_t len = 0;
    if (i)
        out[len++] = ',';
    if (e->form == PS_EMBED_OLLAMA)
        return len + put_float_array(out + len, v, e->vecs.dim);
    bool b64 = e->form == PS_EMBED_OPENAI_BASE64;
    len +=
        (size_t)sprintf(out + len, "{\"object\":\"embedding\",\"embedding\":%s", b64 ? "\"" : "");
    len += b64 ? put_base64(out + len, v, e->vecs.dim) : put_float_array(out + len, v, e->vecs.dim);
    len += (size_t)sprintf(out + len, "%s,\"index\":%d}", b64 ? "\"" : "", i);
    return len;
}

static size_t piece_cap(const embed_reply *e)
{
    size_t dim = (size_t)e->vecs.dim;
    size_t vec = e->form == PS_EMBED_OPENAI_BASE64 ? (dim * 4 + 2) / 3 * 4 : dim * FLOAT_TEXT_MAX;
    size_t cap = vec + 96; /* the object around it, the index */
    size_t h = strlen(e->head) + 1, t = strlen(e->tail) + 1;
    return cap > h ? (cap > t ? cap : t) : (h > t ? h : t);
}

static size_t embed_fill(void *user, char *out, size_t max)
{
    embed_reply *e = user;
    while (e->piece_off == e->piece_len) {
        int i = e->next;
        if (i > e->vecs.count + 1)
            return 0;
        if (i == 0)
            e->piece_len = (size_t)sprintf(e->piece, "%s", e->head);
        else if (i <= e->vecs.count)
            e->piece_len = vector_piece(e, i - 1, e->piece);
        else
            e->piece_len = (size_t)sprintf(e->piece, "%s", e->tail);
        e->piece_off = 0;
        e->next++;
    }
    size_t n = e->piece_len - e->piece_off < max ? e->piece_len - e->piece_off : max;
    memcpy(out, e->piece + e->piece_off, n);
    e->piece_off += n;
    return n;
}

static void embed_release(void *user)
{
    embed_reply *e = user;
    free(e->vecs.v);
    free(e->head);
    free(e->tail);
    free(e->piece);
    free(e);
}

/* cJSON_PrintUnformatted of obj (deleted), with bytes that are not UTF-8 made U+FFFD as every
 * JSON reply has them. */
static char *print_object(cJSON *obj)
{
    char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    size_t n = 0;
    char *fixed = text ? pti_utf8_repair(text, strlen(text), &n) : NULL;
    if (!fixed)
        return text;
    free(text);
    return fixed;
}

/* before's members, then `"key":[` (the list follows). */
static char *head_text(cJSON *before, const char *key)
{
    char *t = print_object(before);
    size_t n = t ? strlen(t) : 0;
    char *out = t ? pti_malloc(n + strlen(key) + 8) : NULL;
    if (out) /* "{...}" -> "{...,"key":[" ; "{}" -> "{"key":[" */
        sprintf(out, "%.*s%s\"%s\":[", (int)(n - 1), t, n > 2 ? "," : "", key);
    free(t);
    return out;
}

/* `]` (the end of the list), then after's members and the closing brace. */
static char *tail_text(cJSON *after)
{
    char *t = print_object(after);
    size_t n = t ? strlen(t) : 0;
    char *out = t ? pti_malloc(n + 4) : NULL;
    if (out)
        sprintf(out, "]%s%s", n > 2 ? "," : "", t + 1);
    free(t);
    return out;
}

void ps_api_reply_embeddings(ps_request *r, ps_embed_vecs *vecs, ps_embed_form form, cJSON *before,
                             const char *key, cJSON *after)
{
    embed_reply *e = pti_calloc(1, sizeof *e);
    if (e) {
        e->vecs = *vecs;
        e->form = form;
        e->head = head_text(before, key);
        e->tail = tail_text(after);
        e->piece = e->head && e->tail ? pti_malloc(piece_cap(e)) : NULL;
    } else {
        free(vecs->v);
        cJSON_Delete(before);
        cJSON_Delete(after);
    }
    vecs->v = NULL;
    if (!e || !e->piece) {
        if (e)
            embed_release(e);
        ps_api_fail(r, form != PS_EMBED_OLLAMA, 500, "out of memory");
        return;
    }
    ps_reply_pull(r, 200, "application/json; charset=utf-8", embed_fill, e, embed_release);
}
