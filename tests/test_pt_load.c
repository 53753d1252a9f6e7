/* Tests of reading checkpoints through the public API (include/prometorch/io.h): every file of
 * tests/fixtures/checkpoints/ (written by real PyTorch 1.13, see gen_checkpoints.py) is loaded
 * and compared with what torch.load returned for it, recorded in checkpoints.manifest (tree
 * shape, dict key order, scalars, dtypes, shapes, strides, storage offsets, which tensors share
 * a storage) and checkpoints.ptfx (tensor values, compared bit for bit). Also: the load options
 * (copy, buffer, format), pt_save round trips, pt_load_tensors, pt_nn_load into the same network
 * built from PromeTorch modules with torch's forward output as the reference, pt_nn_save, and
 * malicious or broken files, which must be refused with the right status and message, without
 * running anything and without leaking. */
#define _GNU_SOURCE /* mkdtemp, strdup */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include <prometorch/io.h>

#ifndef PT_FIXTURES_DIR /* set by tests/CMakeLists.txt */
#define PT_FIXTURES_DIR "tests/fixtures"
#endif
#define PT_CKPT_DIR PT_FIXTURES_DIR
#define CKPT(name) PT_CKPT_DIR "/checkpoints/" name

/* What the malicious pickles would create if anything ran them (gen_checkpoints.py's PWNED). */
#define PWNED "/tmp/prometorch_pwned_by_checkpoint"

/* The files torch.load reads; each has a tree in the manifest. */
static const char *const LOADABLE[] = {
    "state_dict.pt", "training.pt", "protocol4.pt",         "dtypes.pt",
    "views.pt",      "edge.pt",     "legacy_state_dict.pt", "legacy_views.pt",
    "deflated.pt",   "zip64.pt",    "parameter.pt",         "big.pt",
};
#define N_LOADABLE ((int)(sizeof(LOADABLE) / sizeof(LOADABLE[0])))

/* ---- the manifest ---------------------------------------------------------------------------- */

typedef struct manifest {
    char *text;
    char **lines;
    int n;
} manifest;

static manifest *man_open(void)
{
    FILE *f = fopen(PT_CKPT_DIR "/checkpoints.manifest", "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    manifest *m = calloc(1, sizeof(*m));
    m->text = malloc((size_t)size + 1);
    assert_int_equal(fread(m->text, 1, (size_t)size, f), (size_t)size);
    m->text[size] = '\0';
    fclose(f);
    int cap = 0;
    for (char *line = strtok(m->text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        if (m->n == cap) {
            cap = cap ? 2 * cap : 1024;
            m->lines = realloc(m->lines, sizeof(char *) * (size_t)cap);
        }
        m->lines[m->n++] = line;
    }
    return m;
}

static void man_close(manifest *m)
{
    free(m->lines);
    free(m->text);
    free(m);
}

/* Index of the line after "<what> <name>..." (what = "file" or "flat"); fails if absent. */
static int man_find(const manifest *m, const char *what, const char *name)
{
    size_t wl = strlen(what), nl = strlen(name);
    for (int i = 0; i < m->n; i++) {
        const char *l = m->lines[i];
        if (strncmp(l, what, wl) == 0 && l[wl] == ' ' && strncmp(l + wl + 1, name, nl) == 0 &&
            (l[wl + 1 + nl] == '\0' || l[wl + 1 + nl] == ' '))
            return i + 1;
    }
    fail_msg("checkpoints.manifest has no '%s %s'", what, name);
    return -1;
}

/* Decodes lowercase hex ("-" = empty) into a malloc'd buffer; *len gets the byte count. */
static unsigned char *unhex(const char *s, size_t *len)
{
    size_t n = strcmp(s, "-") == 0 ? 0 : strlen(s) / 2;
    unsigned char *out = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(s + 2 * i, "%2x", &v);
        out[i] = (unsigned char)v;
    }
    out[n] = 0;
    *len = n;
    return out;
}

/* ---- tree comparison ------------------------------------------------------------------------- */

#define MAX_STORAGES 1024

typedef struct walk {
    const manifest *m;
    const char *file;
    int pos;
    pt_fixture *fx;
    /* first tensor seen for each storage number of the manifest */
    const pt_tensor *storage_of[MAX_STORAGES];
    int n_tensors;
} walk;

#define WALK_FAIL(w, ...)                                                                          \
    do {                                                                                           \
        char why_[512];                                                                            \
        snprintf(why_, sizeof why_, __VA_ARGS__);                                                  \
        fail_msg("%s, manifest line '%s': %s", (w)->file, (w)->m->lines[(w)->pos - 1], why_);      \
    } while (0)

/* Fails unless the tensors have the same dtype, shape and bytes (NaN payloads, -0.0 too). */
static void assert_bitwise_equal(const pt_tensor *actual, const pt_tensor *expected,
                                 const char *what)
{
    if (!actual)
        fail_msg("%s: no tensor (%s)", what, pt_last_error());
    if (pt_dtype_of(actual) != pt_dtype_of(expected) || pt_ndim(actual) != pt_ndim(expected))
        fail_msg("%s: dtype %d ndim %d, expected dtype %d ndim %d", what, pt_dtype_of(actual),
                 pt_ndim(actual), pt_dtype_of(expected), pt_ndim(expected));
    for (int d = 0; d < pt_ndim(actual); d++)
        if (pt_shape(actual)[d] != pt_shape(expected)[d])
            fail_msg("%s: size %lld of dim %d, expected %lld", what, (long long)pt_shape(actual)[d],
                     d, (long long)pt_shape(expected)[d]);
    size_t nbytes = (size_t)pt_numel(actual) * pt_dtype_size(pt_dtype_of(actual));
    unsigned char *a = malloc(nbytes + 1), *e = malloc(nbytes + 1);
    assert_int_equal(pt_copy_to_host(actual, a, nbytes), PT_OK);
    assert_int_equal(pt_copy_to_host(expected, e, nbytes), PT_OK);
    size_t es = pt_dtype_size(pt_dtype_of(actual));
    for (size_t i = 0; i < nbytes; i++)
        if (a[i] != e[i]) {
            size_t el = i / es;
            free(a);
            free(e);
            fail_msg("%s: element %zu differs (byte %zu)", what, el, i);
        }
    free(a);
    free(e);
}

static void walk_node(walk *w, const pt_value *v, int depth);

static void walk_tensor(walk *w, const pt_value *v, const char *rest)
{
    pt_tensor *t = pt_value_tensor_ref(v);
    if (!t)
        WALK_FAIL(w, "expected a tensor, got %s", pt_value_kind_name(pt_value_kind_of(v)));
    int dtype, ndim, consumed;
    sscanf(rest, "%d %d%n", &dtype, &ndim, &consumed);
    rest += consumed;
    int64_t shape[16], stride[16];
    for (int i = 0; i < ndim; i++) {
        long long x;
        sscanf(rest, " %lld%n", &x, &consumed);
        shape[i] = x;
        rest += consumed;
    }
    for (int i = 0; i < ndim; i++) {
        long long x;
        sscanf(rest, " %lld%n", &x, &consumed);
        stride[i] = x;
        rest += consumed;
    }
    long long offset;
    int storage, rg;
    char record[256];
    sscanf(rest, " %lld %d %d %255s", &offset, &storage, &rg, record);
    if ((int)pt_dtype_of(t) != dtype)
        WALK_FAIL(w, "dtype %d, torch has %d", (int)pt_dtype_of(t), dtype);
    if (pt_ndim(t) != ndim)
        WALK_FAIL(w, "ndim %d, torch has %d", pt_ndim(t), ndim);
    for (int i = 0; i < ndim; i++) {
        if (pt_shape(t)[i] != shape[i])
            WALK_FAIL(w, "size %lld of dim %d", (long long)pt_shape(t)[i], i);
        if (pt_stride(t)[i] != stride[i])
            WALK_FAIL(w, "stride %lld of dim %d", (long long)pt_stride(t)[i], i);
    }
    if (pt_storage_offset(t) != offset)
        WALK_FAIL(w, "storage offset %lld", (long long)pt_storage_offset(t));
    if (pt_requires_grad(t) != (rg != 0))
        WALK_FAIL(w, "requires_grad %d", (int)pt_requires_grad(t));
    pt_tensor *expected = fx_get(w->fx, record);
    assert_bitwise_equal(t, expected, record);
    pt_release(expected);
    /* sharing: the same storage as every earlier tensor with the same number, no other one
     * (zero-element tensors are exempt from the second rule) */
    assert_in_range(storage, 0, MAX_STORAGES - 1);
    if (w->storage_of[storage]) {
        if (!pt_shares_storage(t, w->storage_of[storage]))
            WALK_FAIL(w, "torch shares storage %d with an earlier tensor; here it does not",
                      storage);
    } else {
        for (int s = 0; s < MAX_STORAGES; s++)
            if (w->storage_of[s] && pt_numel(t) > 0 && pt_numel(w->storage_of[s]) > 0 &&
                pt_shares_storage(t, w->storage_of[s]))
                WALK_FAIL(w, "shares a storage with tensors of storage %d; torch's do not", s);
        w->storage_of[storage] = t;
    }
    w->n_tensors++;
}

/* Compares v with the manifest node at w->pos (and its children), advancing w->pos. */
static void walk_node(walk *w, const pt_value *v, int depth)
{
    assert_true(w->pos < w->m->n);
    const char *line = w->m->lines[w->pos++];
    int d, consumed;
    char kind;
    if (sscanf(line, "%d %c%n", &d, &kind, &consumed) != 2 || d != depth)
        WALK_FAIL(w, "malformed or at depth %d instead of %d", d, depth);
    const char *rest = line + consumed + (line[consumed] == ' ');
    pt_value_kind k = pt_value_kind_of(v);
    switch (kind) {
    case 'N':
        if (!v || k != PT_VALUE_NONE)
            WALK_FAIL(w, "expected None, got %s", pt_value_kind_name(k));
        break;
    case 'B': {
        bool b;
        if (k != PT_VALUE_BOOL || pt_value_as_bool(v, &b) != PT_OK || b != (atoi(rest) != 0))
            WALK_FAIL(w, "expected bool %s (got %s)", rest, pt_value_kind_name(k));
        break;
    }
    case 'I': {
        int64_t i;
        if (k != PT_VALUE_INT || pt_value_as_int(v, &i) != PT_OK || i != strtoll(rest, NULL, 10))
            WALK_FAIL(w, "expected int %s (got %s)", rest, pt_value_kind_name(k));
        break;
    }
    case 'F': {
        double f;
        uint64_t bits = strtoull(rest, NULL, 16), got;
        if (k != PT_VALUE_FLOAT || pt_value_as_float(v, &f) != PT_OK)
            WALK_FAIL(w, "expected a float, got %s", pt_value_kind_name(k));
        memcpy(&got, &f, sizeof got);
        if (got != bits)
            WALK_FAIL(w, "float %.17g (bits %016llx)", f, (unsigned long long)got);
        break;
    }
    case 'S':
    case 'Y': {
        size_t n, len = 0;
        unsigned char *want = unhex(rest, &n);
        const void *got =
            kind == 'S' ? (const void *)pt_value_as_str(v, &len) : pt_value_as_bytes(v, &len);
        bool ok = got && len == n && memcmp(got, want, n) == 0;
        if (!got)
            pt_clear_error();
        free(want);
        if (!ok)
            WALK_FAIL(w, "expected %s, got %s of length %zu", kind == 'S' ? "str" : "bytes",
                      pt_value_kind_name(k), len);
        break;
    }
    case 'T': walk_tensor(w, v, rest); break;
    case 'L':
    case 'U':
    case 'D': {
        pt_value_kind want = kind == 'L'   ? PT_VALUE_LIST
                             : kind == 'U' ? PT_VALUE_TUPLE
                                           : PT_VALUE_DICT;
        int64_t n = strtoll(rest, NULL, 10);
        if (k != want || pt_value_len(v) != n)
            WALK_FAIL(w, "expected %s of %lld, got %s of %lld", pt_value_kind_name(want),
                      (long long)n, pt_value_kind_name(k), (long long)pt_value_len(v));
        for (int64_t i = 0; i < n; i++) {
            if (kind == 'D')
                walk_node(w, pt_value_key_ref(v, i), depth + 1);
            walk_node(w, pt_value_item_ref(v, i), depth + 1);
        }
        break;
    }
    default: WALK_FAIL(w, "unknown kind '%c'", kind);
    }
}

/* Fails unless v is what torch.load returned for `file` (its manifest tree). */
static void assert_matches_torch(const pt_value *v, const char *file)
{
    if (!v)
        fail_msg("%s: load failed: %s", file, pt_last_error());
    manifest *m = man_open();
    walk *w = calloc(1, sizeof(*w));
    w->m = m;
    w->file = file;
    w->pos = man_find(m, "file", file);
    w->fx = fx_open("checkpoints");
    walk_node(w, v, 0);
    fx_close(w->fx);
    free(w);
    man_close(m);
}

/* Collects the tensors of a tree in pre-order. */
static void collect_tensors(const pt_value *v, const pt_tensor **out, int *n, int cap)
{
    pt_value_kind k = pt_value_kind_of(v);
    if (k == PT_VALUE_TENSOR) {
        assert_true(*n < cap);
        out[(*n)++] = pt_value_tensor_ref(v);
    } else if (k == PT_VALUE_LIST || k == PT_VALUE_TUPLE || k == PT_VALUE_DICT) {
        for (int64_t i = 0; i < pt_value_len(v); i++) {
            if (k == PT_VALUE_DICT)
                collect_tensors(pt_value_key_ref(v, i), out, n, cap);
            collect_tensors(pt_value_item_ref(v, i), out, n, cap);
        }
    }
}

/* Same structure and scalars (Python equality, floats by bits), tensors with the same dtype,
 * shape, strides, offset and bytes, and the same pattern of storage sharing. */
static void assert_same_tree_rec(const pt_value *a, const pt_value *b, const char *where)
{
    pt_value_kind ka = pt_value_kind_of(a), kb = pt_value_kind_of(b);
    if (ka != kb)
        fail_msg("%s: %s vs %s", where, pt_value_kind_name(ka), pt_value_kind_name(kb));
    if (ka == PT_VALUE_TENSOR) {
        pt_tensor *ta = pt_value_tensor_ref(a), *tb = pt_value_tensor_ref(b);
        assert_bitwise_equal(ta, tb, where);
        for (int d = 0; d < pt_ndim(ta); d++)
            if (pt_stride(ta)[d] != pt_stride(tb)[d])
                fail_msg("%s: stride of dim %d differs", where, d);
        if (pt_storage_offset(ta) != pt_storage_offset(tb))
            fail_msg("%s: storage offset differs", where);
        if (pt_requires_grad(ta) != pt_requires_grad(tb))
            fail_msg("%s: requires_grad differs", where);
    } else if (ka == PT_VALUE_FLOAT) {
        double x, y;
        pt_value_as_float(a, &x);
        pt_value_as_float(b, &y);
        if (memcmp(&x, &y, sizeof x) != 0)
            fail_msg("%s: float %.17g vs %.17g", where, x, y);
    } else if (ka == PT_VALUE_LIST || ka == PT_VALUE_TUPLE || ka == PT_VALUE_DICT) {
        if (pt_value_len(a) != pt_value_len(b))
            fail_msg("%s: %lld vs %lld items", where, (long long)pt_value_len(a),
                     (long long)pt_value_len(b));
        for (int64_t i = 0; i < pt_value_len(a); i++) {
            char sub[512];
            if (ka == PT_VALUE_DICT) {
                if (!pt_value_equal(pt_value_key_ref(a, i), pt_value_key_ref(b, i)))
                    fail_msg("%s: key %lld differs", where, (long long)i);
                const char *ks = pt_value_as_str(pt_value_key_ref(a, i), NULL);
                if (!ks)
                    pt_clear_error();
                snprintf(sub, sizeof sub, "%s.%s", where, ks ? ks : "?");
            } else {
                snprintf(sub, sizeof sub, "%s.%lld", where, (long long)i);
            }
            assert_same_tree_rec(pt_value_item_ref(a, i), pt_value_item_ref(b, i), sub);
        }
    } else if (!pt_value_equal(a, b)) {
        fail_msg("%s: values differ", where);
    }
}

static void assert_same_tree(const pt_value *a, const pt_value *b, const char *where)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_same_tree_rec(a, b, where);
    enum { CAP = 4096 };
    const pt_tensor **ta = malloc(sizeof(*ta) * CAP), **tb = malloc(sizeof(*tb) * CAP);
    int na = 0, nb = 0;
    collect_tensors(a, ta, &na, CAP);
    collect_tensors(b, tb, &nb, CAP);
    assert_int_equal(na, nb);
    for (int i = 0; i < na; i++)
        for (int j = i + 1; j < na; j++)
            if (pt_shares_storage(ta[i], ta[j]) != pt_shares_storage(tb[i], tb[j]) &&
                pt_numel(ta[i]) > 0 && pt_numel(ta[j]) > 0)
                fail_msg("%s: tensors %d and %d: sharing differs", where, i, j);
    free(ta);
    free(tb);
}

static pt_value *load_ok(const char *path)
{
    pt_value *v = pt_load(path);
    if (!v)
        fail_msg("pt_load(%s): %s", path, pt_last_error());
    return v;
}

/* A fresh temporary directory; the tests remove what they write into it. */
static char *temp_dir(void)
{
    char *d = strdup("/tmp/pt_load_test_XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

/* ---- the files torch wrote ------------------------------------------------------------------- */

static void test_every_file_matches_torch(void **state)
{
    (void)state;
    for (int i = 0; i < N_LOADABLE; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/checkpoints/%s", PT_CKPT_DIR, LOADABLE[i]);
        pt_value *v = load_ok(path);
        assert_matches_torch(v, LOADABLE[i]);
        pt_value_free(v);
    }
}

static void test_training_checkpoint_paths(void **state)
{
    (void)state;
    pt_value *v = load_ok(CKPT("training.pt"));
    /* the generator's own inputs */
    int64_t i;
    double f;
    bool b;
    assert_int_equal(pt_value_as_int(pt_value_path_ref(v, "epoch"), &i), PT_OK);
    assert_int_equal(i, 7);
    assert_int_equal(pt_value_as_float(pt_value_path_ref(v, "loss"), &f), PT_OK);
    assert_true(f == 0.25);
    assert_string_equal(pt_value_as_str(pt_value_path_ref(v, "name"), NULL), "run1");
    assert_string_equal(pt_value_as_str(pt_value_path_ref(v, "tags.1"), NULL), "b");
    assert_int_equal(pt_value_kind_of(pt_value_path_ref(v, "shape")), PT_VALUE_TUPLE);
    assert_int_equal(pt_value_as_int(pt_value_path_ref(v, "shape.1"), &i), PT_OK);
    assert_int_equal(i, 3);
    assert_int_equal(pt_value_kind_of(pt_value_path_ref(v, "nothing")), PT_VALUE_NONE);
    assert_non_null(pt_value_path_ref(v, "nothing"));
    assert_int_equal(pt_value_as_bool(pt_value_path_ref(v, "flag"), &b), PT_OK);
    assert_true(b);
    /* keys with dots inside a state dict, int keys of the optimizer state */
    pt_fixture *fx = fx_open("checkpoints");
    const char *paths[] = {"model.fc1.weight",        "model.bn.num_batches_tracked",
                           "model.lstm.weight_hh_l0", "optimizer.state.0.exp_avg",
                           "optimizer.state.13.step", "rng"};
    for (int k = 0; k < 6; k++) {
        char rec[256];
        snprintf(rec, sizeof rec, "training.%s", paths[k]);
        pt_tensor *e = fx_get(fx, rec);
        assert_bitwise_equal(pt_value_tensor_ref(pt_value_path_ref(v, paths[k])), e, rec);
        pt_release(e);
    }
    fx_close(fx);
    pt_value *model = pt_value_get_str_ref(v, "model");
    assert_ptr_equal(pt_value_path_ref(v, "model.fc1.weight"),
                     pt_value_get_str_ref(model, "fc1.weight"));
    assert_int_equal(
        pt_value_as_float(pt_value_path_ref(v, "optimizer.param_groups.0.betas.1"), &f), PT_OK);
    assert_true(f == 0.999);
    assert_pt_error(pt_value_path_ref(v, "model.fc9.weight"), PT_ERR_INDEX, "fc9");
    pt_value_free(v);
}

static void test_protocol4_and_copies_give_identical_trees(void **state)
{
    (void)state;
    pt_value *training = load_ok(CKPT("training.pt"));
    pt_value *p4 = load_ok(CKPT("protocol4.pt"));
    assert_same_tree(p4, training, "protocol4");
    pt_value_free(p4);
    pt_value_free(training);

    pt_value *sd = load_ok(CKPT("state_dict.pt"));
    const char *copies[] = {CKPT("legacy_state_dict.pt"), CKPT("deflated.pt"), CKPT("zip64.pt")};
    for (int i = 0; i < 3; i++) {
        pt_value *c = load_ok(copies[i]);
        assert_same_tree(c, sd, copies[i]);
        pt_value_free(c);
    }
    pt_value_free(sd);
    pt_value *views = load_ok(CKPT("views.pt")), *lviews = load_ok(CKPT("legacy_views.pt"));
    assert_same_tree(lviews, views, "legacy_views");
    pt_value_free(views);
    pt_value_free(lviews);
}

static void test_views_share_and_write_through(void **state)
{
    (void)state;
    pt_value *v = load_ok(CKPT("views.pt"));
    pt_tensor *base = pt_value_tensor_ref(pt_value_get_str_ref(v, "base"));
    pt_tensor *t = pt_value_tensor_ref(pt_value_get_str_ref(v, "t"));
    pt_tensor *rows = pt_value_tensor_ref(pt_value_get_str_ref(v, "rows"));
    assert_true(pt_shares_storage(base, t) && pt_shares_storage(base, rows));
    assert_true(
        pt_value_equal(pt_value_get_str_ref(v, "same_a"), pt_value_get_str_ref(v, "same_b")));
    assert_true(pt_shares_storage(pt_value_tensor_ref(pt_value_path_ref(v, "tied.enc.weight")),
                                  pt_value_tensor_ref(pt_value_path_ref(v, "tied.dec.weight"))));
    double before = pt_test_get(t, 1 * 4 + 0); /* t[1][0] = base[0][1] */
    ((float *)pt_data_ptr(base))[1] = 100.0f;
    assert_true(pt_test_get(t, 4) == 100.0);
    assert_true(pt_test_get(base, 1) == 100.0);
    pt_value_free(v);
    /* the mapping is copy-on-write: the file still has the old value */
    v = load_ok(CKPT("views.pt"));
    assert_true(pt_test_get(pt_value_tensor_ref(pt_value_get_str_ref(v, "t")), 4) == before);
    pt_value_free(v);
}

static void test_parameter_and_big(void **state)
{
    (void)state;
    pt_value *p = load_ok(CKPT("parameter.pt"));
    assert_int_equal(pt_value_kind_of(p), PT_VALUE_TENSOR);
    assert_true(pt_requires_grad(pt_value_tensor_ref(p)));
    pt_value_free(p);
    /* a 256 KB storage (mapped): writing to it must not change the file */
    pt_value *big = load_ok(CKPT("big.pt"));
    pt_tensor *t = pt_value_tensor_ref(pt_value_get_str_ref(big, "big"));
    assert_shape(t, 256, 256);
    float *data = pt_data_ptr(t);
    float old = data[256 * 256 - 1];
    data[256 * 256 - 1] = -12345.0f;
    pt_value *again = load_ok(CKPT("big.pt"));
    assert_true(((float *)pt_data_ptr(pt_value_tensor_ref(
                    pt_value_get_str_ref(again, "big"))))[256 * 256 - 1] == old);
    pt_value_free(again);
    pt_value_free(big);
}

/* ---- load options ---------------------------------------------------------------------------- */

static void test_copy_buffer_and_format_options(void **state)
{
    (void)state;
    for (int i = 0; i < N_LOADABLE; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/checkpoints/%s", PT_CKPT_DIR, LOADABLE[i]);
        pt_value *ref = load_ok(path);
        pt_load_opts copy = {.copy = true};
        pt_value *c = pt_load_ex(path, &copy);
        assert_same_tree(c, ref, LOADABLE[i]);
        pt_value_free(c);
        size_t len;
        unsigned char *bytes = pt_test_read_file(path, &len);
        pt_value *b = pt_load_buffer(bytes, len, LOADABLE[i], NULL);
        memset(bytes, 0xAA, len); /* the storages were copied out of the buffer */
        free(bytes);
        assert_same_tree(b, ref, LOADABLE[i]);
        assert_matches_torch(b, LOADABLE[i]);
        pt_value_free(b);
        pt_value_free(ref);
    }
    pt_value *sd = load_ok(CKPT("state_dict.pt"));
    pt_load_opts zip = {.format = PT_FORMAT_PT_ZIP}, legacy = {.format = PT_FORMAT_PT_LEGACY};
    pt_value *z = pt_load_ex(CKPT("state_dict.pt"), &zip);
    assert_same_tree(z, sd, "format zip");
    pt_value *l = pt_load_ex(CKPT("legacy_state_dict.pt"), &legacy);
    assert_same_tree(l, sd, "format legacy");
    pt_value_free(z);
    pt_value_free(l);
    pt_value_free(sd);
    pt_load_opts st = {.format = PT_FORMAT_SAFETENSORS};
    assert_pt_error(pt_load_ex(CKPT("state_dict.pt"), &st), PT_ERR_FORMAT, "state_dict.pt");
    assert_pt_error(pt_load(CKPT("no_such_file.pt")), PT_ERR_IO, "no_such_file.pt");
    assert_pt_error(pt_load(PT_FIXTURES_DIR), PT_ERR_IO, "is a directory");
}

static void test_round_trip_through_pt_save(void **state)
{
    (void)state;
    char *dir = temp_dir();
    const char *files[] = {"training.pt", "dtypes.pt",    "views.pt",
                           "edge.pt",     "parameter.pt", "legacy_views.pt"};
    for (int i = 0; i < 6; i++) {
        char in[1024], out[1024];
        snprintf(in, sizeof in, "%s/checkpoints/%s", PT_CKPT_DIR, files[i]);
        snprintf(out, sizeof out, "%s/%s", dir, files[i]);
        pt_value *v = load_ok(in);
        assert_int_equal(pt_save(out, v), PT_OK);
        pt_value *back = load_ok(out);
        assert_same_tree(back, v, files[i]);
        pt_value_free(back);
        pt_value_free(v);
        unlink(out);
    }
    rmdir(dir);
    free(dir);
}

/* ---- pt_load_tensors ------------------------------------------------------------------------- */

static void test_load_tensors(void **state)
{
    (void)state;
    manifest *m = man_open();
    pt_fixture *fx = fx_open("checkpoints");
    /* a whole pickled model: the names and values of its state_dict(), in order */
    pt_value *flat = pt_load_tensors(CKPT("whole_model.pt"));
    if (!flat)
        fail_msg("pt_load_tensors(whole_model.pt): %s", pt_last_error());
    int at = man_find(m, "flat", "whole_model.pt");
    int n = atoi(strrchr(m->lines[at - 1], ' ') + 1);
    assert_int_equal(pt_value_len(flat), n);
    for (int i = 0; i < n; i++) {
        const char *key = m->lines[at + i];
        assert_string_equal(pt_value_as_str(pt_value_key_ref(flat, i), NULL), key);
        char rec[256];
        snprintf(rec, sizeof rec, "whole_model.%s", key);
        pt_tensor *e = fx_get(fx, rec);
        assert_bitwise_equal(pt_value_tensor_ref(pt_value_item_ref(flat, i)), e, rec);
        pt_release(e);
    }
    pt_value_free(flat);
    /* a training checkpoint: every tensor under its dotted path, in file order */
    flat = pt_load_tensors(CKPT("training.pt"));
    if (!flat)
        fail_msg("pt_load_tensors(training.pt): %s", pt_last_error());
    int k = 0;
    for (int i = man_find(m, "file", "training.pt"); i < m->n && strncmp(m->lines[i], "file ", 5);
         i++) {
        const char *rec = strrchr(m->lines[i], ' ') + 1;
        if (!strstr(m->lines[i], " T "))
            continue;
        const char *key = rec + strlen("training.");
        assert_true(k < pt_value_len(flat));
        assert_string_equal(pt_value_as_str(pt_value_key_ref(flat, k), NULL), key);
        pt_tensor *e = fx_get(fx, rec);
        assert_bitwise_equal(pt_value_tensor_ref(pt_value_item_ref(flat, k)), e, rec);
        pt_release(e);
        k++;
    }
    assert_int_equal(pt_value_len(flat), k);
    pt_value_free(flat);
    fx_close(fx);
    man_close(m);
}

static void test_whole_model_refused_or_inert(void **state)
{
    (void)state;
    assert_pt_error(pt_load(CKPT("whole_model.pt")), PT_ERR_UNSUPPORTED, "CheckpointNet");
    pt_load_opts opts = {.allow_objects = true};
    pt_value *v = pt_load_ex(CKPT("whole_model.pt"), &opts);
    if (!v)
        fail_msg("allow_objects: %s", pt_last_error());
    assert_int_equal(pt_value_kind_of(v), PT_VALUE_DICT);
    const char *cls = pt_value_as_str(pt_value_get_str_ref(v, "__class__"), NULL);
    assert_non_null(cls);
    assert_non_null(strstr(cls, "CheckpointNet"));
    pt_value_free(v);
}

/* ---- modules --------------------------------------------------------------------------------- */

/* gen_checkpoints.py's CheckpointNet from PromeTorch modules, children in torch's order.
 * drop_fc2 leaves out the last layer; extra adds a child "fc3" torch's net does not have. */
static pt_module *build_net(bool drop_fc2, bool extra)
{
    const char *names[] = {"conv", "bn", "fc1", "emb", "lstm", "ln", "fc2", "fc3"};
    int64_t ln_shape[1] = {24};
    pt_module *ch[8] = {
        pt_nn_conv2d(1, 4, 3, 1, 1, true),
        pt_nn_batch_norm2d(4),
        pt_nn_linear(64, 16, true),
        pt_nn_embedding(10, 6),
        pt_nn_lstm(6, 8, NULL),
        pt_nn_layer_norm(1, ln_shape),
        pt_nn_linear(24, 5, true),
        pt_nn_linear(5, 5, true),
    };
    int n = drop_fc2 ? 6 : extra ? 8 : 7;
    for (int i = n; i < 8; i++)
        pt_nn_free(ch[i]);
    pt_module *m = pt_nn_module_dict(n, names, ch);
    assert_non_null(m);
    return m;
}

/* CheckpointNet.forward: fc2(ln(cat(relu(fc1(flatten(relu(bn(conv(img)))))), h_n[0]))) */
static pt_tensor *net_forward(pt_module *m, const pt_tensor *img, const pt_tensor *tokens)
{
    pt_tensor *c = pt_nn_forward(pt_nn_child_ref(m, "conv"), img);
    pt_tensor *b = pt_nn_forward(pt_nn_child_ref(m, "bn"), c);
    pt_tensor *r = pt_relu(b);
    pt_tensor *f = pt_flatten(r, 1, -1);
    pt_tensor *l1 = pt_nn_forward(pt_nn_child_ref(m, "fc1"), f);
    pt_tensor *a = pt_relu(l1);
    pt_tensor *e = pt_nn_forward(pt_nn_child_ref(m, "emb"), tokens);
    pt_tensor *out[2] = {NULL, NULL};
    const pt_tensor *in[1] = {e};
    assert_int_equal(pt_nn_forward_n(pt_nn_child_ref(m, "lstm"), 1, in, 2, out), PT_OK);
    pt_tensor *h = pt_select(out[1], 0, 0);
    const pt_tensor *parts[2] = {a, h};
    pt_tensor *cat = pt_cat(2, parts, 1);
    pt_tensor *n = pt_nn_forward(pt_nn_child_ref(m, "ln"), cat);
    pt_tensor *y = pt_nn_forward(pt_nn_child_ref(m, "fc2"), n);
    pt_tensor *tmp[] = {c, b, r, f, l1, a, e, out[0], out[1], h, cat, n};
    for (size_t i = 0; i < sizeof(tmp) / sizeof(tmp[0]); i++)
        pt_release(tmp[i]);
    return y;
}

static void test_nn_load_and_forward_matches_torch(void **state)
{
    (void)state;
    pt_fixture *fx = fx_open("checkpoints");
    pt_tensor *img = fx_get(fx, "net.input.img"), *tokens = fx_get(fx, "net.input.tokens");
    pt_tensor *want = fx_get(fx, "net.output");
    const char *files[] = {CKPT("state_dict.pt"), CKPT("training.pt"), CKPT("legacy_state_dict.pt"),
                           CKPT("zip64.pt")};
    for (int i = 0; i < 4; i++) {
        pt_module *m = build_net(false, false);
        pt_status st = pt_nn_load(m, files[i], true);
        if (st != PT_OK)
            fail_msg("pt_nn_load(%s): %s", files[i], pt_last_error());
        pt_nn_eval(m);
        /* every parameter and buffer holds torch's bits */
        pt_value *sd = pt_nn_state_dict(m);
        for (int64_t k = 0; k < pt_value_len(sd); k++) {
            char rec[256];
            snprintf(rec, sizeof rec, "state_dict.%s",
                     pt_value_as_str(pt_value_key_ref(sd, k), NULL));
            pt_tensor *e = fx_get(fx, rec);
            assert_bitwise_equal(pt_value_tensor_ref(pt_value_item_ref(sd, k)), e, rec);
            pt_release(e);
        }
        pt_value_free(sd);
        pt_tensor *y = net_forward(m, img, tokens);
        /* float32 with sums in another order: PyTorch-level agreement */
        assert_tensor_close(y, want, 1e-5, 1e-6);
        pt_release(y);
        pt_nn_free(m);
    }
    pt_release(img);
    pt_release(tokens);
    pt_release(want);
    fx_close(fx);
}

static void test_nn_load_strict_errors(void **state)
{
    (void)state;
    /* a net without fc2: the file has unexpected keys */
    pt_module *m = build_net(true, false);
    pt_tensor *w = pt_nn_param_ref(m, "fc1.weight");
    float before = ((float *)pt_data_ptr(w))[0];
    assert_pt_status_error(pt_nn_load(m, CKPT("state_dict.pt"), true), PT_ERR_INVALID_ARG,
                           "Unexpected key(s) in state_dict: \"fc2.weight\", \"fc2.bias\"");
    assert_true(((float *)pt_data_ptr(w))[0] == before); /* nothing changed */
    assert_int_equal(pt_nn_load(m, CKPT("state_dict.pt"), false), PT_OK);
    pt_nn_free(m);
    /* a net with an extra layer: missing keys */
    m = build_net(false, true);
    assert_pt_status_error(pt_nn_load(m, CKPT("state_dict.pt"), true), PT_ERR_INVALID_ARG,
                           "Missing key(s) in state_dict: \"fc3.weight\", \"fc3.bias\"");
    assert_int_equal(pt_nn_load(m, CKPT("state_dict.pt"), false), PT_OK);
    pt_nn_free(m);
    /* files that are not state dicts, or cannot be read */
    m = build_net(false, false);
    assert_pt_status_error(pt_nn_load(m, CKPT("no_such_file.pt"), true), PT_ERR_IO,
                           "no_such_file.pt");
    assert_pt_status_error(pt_nn_load(m, CKPT("evil_os_system.pt"), true), PT_ERR_UNSUPPORTED,
                           "system");
    assert_true(pt_nn_load(m, CKPT("dtypes.pt"), true) != PT_OK);
    pt_clear_error();
    pt_nn_free(m);
}

/* torch <= 0.4 BatchNorm state dicts (gen_bn_metadata.py): no num_batches_tracked and
 * _metadata version 1 load strictly with the counter at 0, as _NormBase does; at version 2 the
 * missing key is an error, as in torch. Before, both were "Missing key(s)". */
static void test_nn_load_old_batch_norm(void **state)
{
    (void)state;
    pt_fixture *fx = fx_open("bn_metadata");
    pt_module *bn = pt_nn_batch_norm2d(4);
    pt_fill_(pt_nn_buffer_ref(bn, "num_batches_tracked"), 5.0);
    assert_int_equal(pt_nn_load(bn, PT_FIXTURES_DIR "/bn_metadata/bn_v1.pt", true), PT_OK);
    const char *names[] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
    for (int i = 0; i < 5; i++) {
        char key[64];
        snprintf(key, sizeof key, "v1.%s", names[i]);
        pt_tensor *want = fx_get(fx, key);
        pt_tensor *got = i < 2 ? pt_nn_param_ref(bn, names[i]) : pt_nn_buffer_ref(bn, names[i]);
        assert_tensor_equal(got, want);
        pt_release(want);
    }
    pt_nn_free(bn);

    bn = pt_nn_batch_norm2d(4);
    pt_tensor *w = pt_nn_param_ref(bn, "weight");
    assert_pt_status_error(pt_nn_load(bn, PT_FIXTURES_DIR "/bn_metadata/bn_v2_missing.pt", true),
                           PT_ERR_INVALID_ARG,
                           "Missing key(s) in state_dict: \"num_batches_tracked\"");
    assert_true(((float *)pt_data_ptr(w))[0] == 1.0f); /* nothing changed */
    pt_nn_free(bn);

    /* in a Sequential: the version is the child's (_metadata["0"]), not the root's */
    pt_module *kids[] = {pt_nn_batch_norm2d(4)};
    pt_module *seq = pt_nn_sequential(1, kids);
    pt_fill_(pt_nn_buffer_ref(seq, "0.num_batches_tracked"), 5.0);
    assert_int_equal(pt_nn_load(seq, PT_FIXTURES_DIR "/bn_metadata/seq_v1.pt", true), PT_OK);
    assert_int_equal((int64_t)pt_item(pt_nn_buffer_ref(seq, "0.num_batches_tracked")), 0);
    pt_tensor *want = fx_get(fx, "v1.running_mean");
    assert_tensor_equal(pt_nn_buffer_ref(seq, "0.running_mean"), want);
    pt_release(want);
    assert_pt_status_error(pt_nn_load(seq, PT_FIXTURES_DIR "/bn_metadata/seq_v2_missing.pt", true),
                           PT_ERR_INVALID_ARG,
                           "Missing key(s) in state_dict: \"0.num_batches_tracked\"");
    pt_nn_free(seq);
    fx_close(fx);
}

static void test_nn_save_then_load(void **state)
{
    (void)state;
    char *dir = temp_dir();
    char pt_path[1024], st_path[1024];
    snprintf(pt_path, sizeof pt_path, "%s/net.pt", dir);
    snprintf(st_path, sizeof st_path, "%s/net.safetensors", dir);
    pt_module *src = build_net(false, false);
    assert_int_equal(pt_nn_load(src, CKPT("state_dict.pt"), true), PT_OK);
    assert_int_equal(pt_nn_save(src, pt_path), PT_OK);
    assert_int_equal(pt_nn_save(src, st_path), PT_OK);
    pt_value *want = pt_nn_state_dict(src);
    const char *paths[] = {pt_path, st_path};
    for (int i = 0; i < 2; i++) {
        pt_manual_seed(99 + i); /* different initial values */
        pt_module *m = build_net(false, false);
        pt_status st = pt_nn_load(m, paths[i], true);
        if (st != PT_OK)
            fail_msg("pt_nn_load(%s): %s", paths[i], pt_last_error());
        pt_value *got = pt_nn_state_dict(m);
        assert_same_tree(got, want, paths[i]);
        pt_value_free(got);
        pt_nn_free(m);
    }
    /* the safetensors file holds the state dict's keys in order */
    pt_value *meta = NULL;
    pt_value *st = pt_load_safetensors(st_path, &meta);
    assert_non_null(st);
    assert_int_equal(pt_value_len(st), pt_value_len(want));
    for (int64_t k = 0; k < pt_value_len(want); k++)
        assert_true(pt_value_equal(pt_value_key_ref(st, k), pt_value_key_ref(want, k)));
    pt_value_free(st);
    pt_value_free(meta);
    pt_value_free(want);
    pt_nn_free(src);
    unlink(pt_path);
    unlink(st_path);
    rmdir(dir);
    free(dir);
}

/* ---- malicious and broken files -------------------------------------------------------------- */

typedef struct refusal {
    const char *file;
    pt_status status;
    const char *what; /* a second substring of the message besides the file name (or NULL) */
} refusal;

static const refusal REFUSALS[] = {
    {"evil_os_system.pt", PT_ERR_UNSUPPORTED, "os.system"},
    {"evil_eval.pt", PT_ERR_UNSUPPORTED, "builtins.eval"},
    {"evil_subprocess.pt", PT_ERR_UNSUPPORTED, "subprocess.check_output"},
    {"evil_posix_system.pt", PT_ERR_UNSUPPORTED, "posix.system"},
    {"evil_nested.pt", PT_ERR_UNSUPPORTED, "os.system"},
    {"evil_legacy.pt", PT_ERR_UNSUPPORTED, "os.system"},
    {"bad_storage_type.pt", PT_ERR_UNSUPPORTED, "torch.Evil"},
    {"complex_storage.pt", PT_ERR_DTYPE, "Complex"},
    {"missing_storage.pt", PT_ERR_FORMAT, "data/0"},
    {"short_storage.pt", PT_ERR_FORMAT, "data/0"},
    {"oob_size.pt", PT_ERR_FORMAT, NULL},
    {"oob_offset.pt", PT_ERR_FORMAT, NULL},
    {"oob_stride.pt", PT_ERR_FORMAT, NULL},
    {"negative_size.pt", PT_ERR_FORMAT, NULL},
    {"negative_offset.pt", PT_ERR_FORMAT, NULL},
    {"huge_shape.pt", PT_ERR_FORMAT, NULL},
    {"huge_storage.pt", PT_ERR_FORMAT, NULL},
    {"no_data_pkl.pt", PT_ERR_FORMAT, "data.pkl"},
    {"truncated.pt", PT_ERR_FORMAT, NULL},
    {"legacy_truncated.pt", PT_ERR_FORMAT, NULL},
    {"legacy_bad_magic.pt", PT_ERR_FORMAT, "no magic number, or a wrong one"},
    {"zip_size_past_end.pt", PT_ERR_FORMAT, "data/0"},
    {"bad_memo.pt", PT_ERR_FORMAT, NULL},
    {"no_stop.pt", PT_ERR_FORMAT, NULL},
    {"stack_underflow.pt", PT_ERR_FORMAT, NULL},
    {"huge_string.pt", PT_ERR_FORMAT, NULL},
    {"deep_nesting.pt", PT_ERR_FORMAT, "nested"}, /* 20000 lists in lists */
};

static void assert_refused(const void *result, const refusal *r, const char *how)
{
    if (result)
        fail_msg("%s %s: loaded, expected status %d", how, r->file, (int)r->status);
    const char *msg = pt_last_error();
    if (pt_last_status() != r->status || !strstr(msg, r->file) ||
        (r->what && !strstr(msg, r->what)))
        fail_msg("%s %s: status %d '%s', expected status %d naming the file and '%s'", how, r->file,
                 (int)pt_last_status(), msg, (int)r->status, r->what ? r->what : "");
    pt_clear_error();
}

static void test_malicious_files_refused(void **state)
{
    (void)state;
    unlink(PWNED);
    for (size_t i = 0; i < sizeof(REFUSALS) / sizeof(REFUSALS[0]); i++) {
        const refusal *r = &REFUSALS[i];
        char path[1024];
        snprintf(path, sizeof path, "%s/checkpoints/%s", PT_CKPT_DIR, r->file);
        assert_refused(pt_load(path), r, "pt_load");
        pt_load_opts copy = {.copy = true};
        assert_refused(pt_load_ex(path, &copy), r, "pt_load_ex copy");
        /* pt_load_tensors reads whole pickled models, yet refuses calls of other globals */
        assert_refused(pt_load_tensors(path), r, "pt_load_tensors");
        size_t len;
        void *bytes = pt_test_read_file(path, &len);
        assert_refused(pt_load_buffer(bytes, len, r->file, NULL), r, "pt_load_buffer");
        free(bytes);
        /* keeping unknown objects as inert dicts must still not call anything */
        pt_load_opts objs = {.allow_objects = true};
        pt_value *v = pt_load_ex(path, &objs);
        if (!v)
            pt_clear_error();
        pt_value_free(v);
        if (access(PWNED, F_OK) == 0)
            fail_msg("%s: loading it ran its payload (%s exists)", r->file, PWNED);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_file_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_training_checkpoint_paths, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_protocol4_and_copies_give_identical_trees,
                                        pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_views_share_and_write_through, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_parameter_and_big, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_copy_buffer_and_format_options, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_through_pt_save, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_load_tensors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_whole_model_refused_or_inert, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_nn_load_and_forward_matches_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_nn_load_strict_errors, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_nn_save_then_load, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_nn_load_old_batch_norm, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_malicious_files_refused, pt_test_setup,
                                        pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
