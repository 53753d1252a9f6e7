/* Path lookups into value trees: pt_value_path_ref ("model.fc1.weight", where a dict level
 * tries the longest dotted prefix that is a key first and backtracks to shorter ones, lists
 * take decimal indices, int-keyed dicts take decimal keys) and pt_value_path_keys_ref (an
 * explicit key list). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "value_internal.h"

/* The deepest point a path lookup failed at, for the error message. */
typedef struct path_fail {
    size_t pos; /* offset of the segment not found */
    bool set;
} path_fail;

/* Parses s[0..len) as a decimal int64 (optional '-'); false when it is not one. */
static bool parse_index(const char *s, size_t len, int64_t *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    size_t k = buf[0] == '-' ? 1 : 0;
    if (k == len)
        return false;
    for (; k < len; k++)
        if (buf[k] < '0' || buf[k] > '9')
            return false;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* One key step without a dot split: str key, then int key if it reads as one; a list or
 * tuple takes a decimal index. NULL (no error set) when absent. */
static const pt_value *step(const pt_value *v, const char *seg, size_t len)
{
    int64_t i;
    if (v->kind == PT_VALUE_DICT) {
        pt_value probe = pti_value_probe_str(seg, len);
        uint64_t h;
        pti_value_hash(&probe, &h, 0);
        int64_t e = pti_dict_find(v, &probe, h);
        if (e < 0 && parse_index(seg, len, &i)) {
            probe = pti_value_probe_int(i);
            pti_value_hash(&probe, &h, 0);
            e = pti_dict_find(v, &probe, h);
        }
        return e >= 0 ? v->u.dict.entries[e].val : NULL;
    }
    if ((v->kind == PT_VALUE_LIST || v->kind == PT_VALUE_TUPLE) && parse_index(seg, len, &i)) {
        int64_t n = v->u.seq.len;
        if (i < 0)
            i += n;
        return i >= 0 && i < n ? v->u.seq.items[i] : NULL;
    }
    return NULL;
}

static void note_fail(path_fail *f, size_t pos)
{
    if (!f->set || pos > f->pos) {
        f->pos = pos;
        f->set = true;
    }
}

/* Resolves path[pos..] from v. Dicts try every dotted prefix, longest first. */
static const pt_value *resolve(const pt_value *v, const char *path, size_t pos, size_t plen,
                               int depth, path_fail *fail, bool *too_deep)
{
    if (pos >= plen)
        return v;
    if (depth > PTI_VALUE_MAX_DEPTH) {
        *too_deep = true;
        return NULL;
    }
    const char *seg = path + pos;
    size_t left = plen - pos;
    if (v->kind != PT_VALUE_DICT) {
        const char *dot = memchr(seg, '.', left);
        size_t len = dot ? (size_t)(dot - seg) : left;
        const pt_value *next = step(v, seg, len);
        if (!next) {
            note_fail(fail, pos);
            return NULL;
        }
        return dot ? resolve(next, path, pos + len + 1, plen, depth + 1, fail, too_deep) : next;
    }
    /* candidate prefixes seg[0..end): the whole rest, then up to each dot from the right */
    for (size_t end = left;;) {
        const pt_value *next = step(v, seg, end);
        if (next) {
            const pt_value *r =
                end == left ? next
                            : resolve(next, path, pos + end + 1, plen, depth + 1, fail, too_deep);
            if (r || *too_deep)
                return r;
        }
        size_t k = end;
        while (k > 0 && seg[k - 1] != '.')
            k--;
        if (k == 0)
            break;
        end = k - 1;
    }
    note_fail(fail, pos);
    return NULL;
}

pt_value *pt_value_path_ref(const pt_value *root, const char *path)
{
    if (!root || !path)
        return (pti_null_arg("pt_value_path_ref", root ? "path" : "root"), NULL);
    path_fail fail = {0};
    bool too_deep = false;
    size_t plen = strlen(path), segments = 1;
    for (size_t k = 0; k < plen; k++)
        segments += path[k] == '.';
    /* each level may try every dotted prefix of the rest: bound the work up front */
    if (segments > PTI_VALUE_MAX_DEPTH)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_value_path_ref: path has %zu segments, more than %d", segments,
                              PTI_VALUE_MAX_DEPTH);
    const pt_value *r = resolve(root, path, 0, plen, 0, &fail, &too_deep);
    if (r)
        return (pt_value *)r;
    if (too_deep)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_value_path_ref: path '%s' is deeper than %d levels", path,
                              PTI_VALUE_MAX_DEPTH);
    const char *seg = path + fail.pos;
    const char *dot = strchr(seg, '.');
    int seglen = (int)(dot ? (size_t)(dot - seg) : strlen(seg));
    return pti_error_null(PT_ERR_INDEX, "pt_value_path_ref: '%.*s' not found (path '%s')", seglen,
                          seg, path);
}

pt_value *pt_value_path_keys_ref(const pt_value *root, int n, const char *const *keys)
{
    if (!root)
        return (pti_null_arg("pt_value_path_keys_ref", "root"), NULL);
    if (n < 0 || (n > 0 && !keys))
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_value_path_keys_ref: bad key list (n = %d)",
                              n);
    const pt_value *v = root;
    for (int k = 0; k < n; k++) {
        if (!keys[k])
            return pti_error_null(PT_ERR_NULL, "pt_value_path_keys_ref: keys[%d] is NULL", k);
        const pt_value *next = step(v, keys[k], strlen(keys[k]));
        if (!next)
            return pti_error_null(PT_ERR_INDEX,
                                  "pt_value_path_keys_ref: key '%s' (keys[%d]) not found in %s",
                                  keys[k], k, pt_value_kind_name(v->kind));
        v = next;
    }
    return (pt_value *)v;
}
