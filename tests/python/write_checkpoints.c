/* Writes the checkpoints that tests/python/check_torch_load.py reads with real PyTorch (ctest
 * torch_load_check runs `write_checkpoints DIR` and then the checker on DIR). Two kinds:
 *
 * 1. pt_save files whose values are simple formulas the checker recomputes on its own:
 *   state_dict.pt  Sequential(Linear(3, 4), BatchNorm1d(4)), tensor j filled with
 *                  arange(numel) * 0.5 + j (num_batches_tracked = 6)
 *   values.pt      a dict with every value kind, shared tensors, views, all dtypes
 *   floats.pt      {'floats': [0.5, -1e300, 1e-310, inf, -0.0, 0.1]}
 *   bytes.pt       {'b': bytes(range(256)), 'e': b''}
 *   mlp.pt         the MLP of examples/mnist_mlp.c (seeded init), and mlp_io.pt: {'x': input,
 *                  'y': the C forward in eval mode}
 *   zip64.pt       state_dict.pt's content with every record in zip64 form
 *   many.pt        70000 one-element tensors (more than 65535 zip entries)
 *
 * 2. Checkpoints written through the module/optimizer API, described by this program from its
 * own inputs: expected.manifest gives each file's tree (the line format of
 * tests/fixtures/gen_checkpoints.py: key order, scalars, dtypes, shapes, strides, offsets,
 * storage sharing) and expected.ptfx (tests/fixtures/gen_fixtures.py's format) the bytes of
 * every tensor, named "<file stem>.<dotted path>". The checker compares what torch reads:
 *   nn_state_dict.pt / .safetensors   pt_nn_save of a Conv2d/BatchNorm2d/Linear net, plus
 *                  "nn.x" / "nn.y" in expected.ptfx: an input and the C eval-mode forward
 *   training.pt    {"model", "optimizer" (Adam after 3 steps), "scheduler" (StepLR), "epoch",
 *                  "loss", nested lists/tuples, bytes, None}
 *   views.pt       views sharing storages: slices with offsets, transposes, stride 0, a zero-size
 *                  view, one tensor twice, tied weights
 *   dtypes.pt      every dtype, special floats by their bits (NaN payloads, -0.0, subnormals,
 *                  infinities), zero-size and 0-dim tensors
 *   tensors.safetensors  pt_save_safetensors of every dtype with metadata {"format": "pt"} */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <prometorch/prometorch.h>
#include <prometorch/io.h>

static int failed(const char *what)
{
    fprintf(stderr, "write_checkpoints: %s: %s\n", what, pt_last_error());
    return 1;
}

/* Fills t with arange(numel) * 0.5 + j converted to t's dtype. */
static pt_status fill_pattern(pt_tensor *t, int j)
{
    int64_t n = pt_numel(t);
    float *buf = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        buf[i] = (float)i * 0.5f + (float)j;
    pt_tensor *src = pt_from_data(buf, pt_ndim(t), pt_shape(t), PT_FLOAT32, pt_cpu());
    free(buf);
    pt_status st = src ? pt_copy_(t, src) : pt_last_status();
    pt_release(src);
    return st;
}

static pt_status save_state_dict(const char *path)
{
    pt_module *layers[2] = {pt_nn_linear(3, 4, true), pt_nn_batch_norm1d(4)};
    pt_module *m = pt_nn_sequential(2, layers);
    pt_value *sd = m ? pt_nn_state_dict(m) : NULL;
    pt_status st = sd ? PT_OK : pt_last_status();
    for (int64_t j = 0; st == PT_OK && j < pt_value_len(sd); j++)
        st = fill_pattern(pt_value_tensor_ref(pt_value_item_ref(sd, j)), (int)j);
    if (st == PT_OK)
        st = pt_save(path, sd);
    pt_value_free(sd);
    pt_nn_free(m);
    return st;
}

static pt_value *tensor_of(const void *data, int ndim, const int64_t *shape, pt_dtype dt)
{
    pt_tensor *t = pt_from_data(data, ndim, shape, dt, pt_cpu());
    pt_value *v = pt_value_tensor(t);
    pt_release(t);
    return v;
}

/* A float tensor converted to dt (float16, bfloat16). */
static pt_value *float_tensor_as(const float *data, int64_t n, pt_dtype dt)
{
    pt_tensor *f = pt_from_data(data, 1, &n, PT_FLOAT32, pt_cpu());
    pt_tensor *t = pt_to_dtype(f, dt);
    pt_value *v = pt_value_tensor(t);
    pt_release(f);
    pt_release(t);
    return v;
}

static pt_value *int_list(int n, const int64_t *v)
{
    pt_value *l = pt_value_list();
    for (int i = 0; i < n; i++)
        pt_value_append(l, pt_value_int(v[i]));
    return l;
}

static void add_scalars(pt_value *d)
{
    pt_value_dict_set_str(d, "none", pt_value_none());
    pt_value_dict_set_str(d, "true", pt_value_bool(true));
    pt_value_dict_set_str(d, "false", pt_value_bool(false));
    const int64_t ints[] = {
        0,          255,           256,       65535,     65536,    -1, 2147483647, -2147483647 - 1,
        2147483648, -2147483649LL, INT64_MAX, INT64_MIN, 1LL << 40};
    pt_value_dict_set_str(d, "ints", int_list((int)(sizeof(ints) / sizeof(ints[0])), ints));
    pt_value_dict_set_str(d, "str", pt_value_str("h\xc3\xa9llo \xe2\x9c\x93"));
    pt_value_dict_set_str(d, "empty_str", pt_value_str(""));
    pt_value *tuples = pt_value_list();
    for (int n = 0; n <= 5; n++) {
        if (n == 4)
            continue;
        pt_value *t = pt_value_tuple();
        for (int i = 1; i <= n; i++)
            pt_value_append(t, pt_value_int(i));
        pt_value_append(tuples, t);
    }
    pt_value_dict_set_str(d, "tuples", tuples);
    /* {1: 'one', (2, 'x'): [None, {'k': 'v'}]} */
    pt_value *nested = pt_value_dict();
    pt_value_dict_set_int(nested, 1, pt_value_str("one"));
    pt_value *inner = pt_value_dict();
    pt_value_dict_set_str(inner, "k", pt_value_str("v"));
    pt_value *lst = pt_value_list();
    pt_value_append(lst, pt_value_none());
    pt_value_append(lst, inner);
    pt_value *key = pt_value_tuple_of(2, (pt_value *[]){pt_value_int(2), pt_value_str("x")});
    pt_value_dict_set(nested, key, lst);
    pt_value_dict_set_str(d, "nested", nested);
    pt_value *shared = int_list(2, (const int64_t[]){7, 8});
    pt_value_dict_set_str(d, "same_list_a", pt_value_retain(shared));
    pt_value_dict_set_str(d, "same_list_b", shared);
    /* batches: 2500 list items, 1500 dict entries, 300 distinct strings twice (long memo) */
    pt_value *big = pt_value_list();
    for (int i = 0; i < 2500; i++)
        pt_value_append(big, pt_value_int(i));
    pt_value_dict_set_str(d, "big_list", big);
    pt_value *many = pt_value_dict();
    pt_value *strs = pt_value_list();
    char name[32];
    for (int i = 0; i < 1500; i++) {
        snprintf(name, sizeof(name), "k%d", i);
        pt_value_dict_set_str(many, name, pt_value_int(-i));
    }
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 300; i++) {
            snprintf(name, sizeof(name), "s%d", i);
            pt_value_append(strs, pt_value_str(name));
        }
    pt_value_dict_set_str(d, "many_keys", many);
    pt_value_dict_set_str(d, "strs", strs);
}

static void add_tensors(pt_value *d)
{
    const float f6[6] = {0, 0.25f, 0.5f, 0.75f, 1, 1.25f};
    pt_value *f32 = tensor_of(f6, PT_SHAPE(2, 3), PT_FLOAT32);
    pt_value_dict_set_str(d, "f32", pt_value_tensor(pt_value_tensor_ref(f32)));
    pt_value_dict_set_str(d, "f32_again", f32);
    pt_value_dict_set_str(d, "f64",
                          tensor_of((const double[]){1.5, -2.25}, PT_SHAPE(2), PT_FLOAT64));
    const float h[4] = {0.5f, 1, -2, 65504};
    pt_value_dict_set_str(d, "f16", float_tensor_as(h, 4, PT_FLOAT16));
    const float b[4] = {0.5f, 1, -2, 3.140625f};
    pt_value_dict_set_str(d, "bf16", float_tensor_as(b, 4, PT_BFLOAT16));
    pt_value_dict_set_str(d, "bool",
                          tensor_of((const bool[]){true, false, true}, PT_SHAPE(3), PT_BOOL));
    pt_value_dict_set_str(d, "u8", tensor_of((const uint8_t[]){0, 1, 255}, PT_SHAPE(3), PT_UINT8));
    pt_value_dict_set_str(d, "i8", tensor_of((const int8_t[]){-128, 127}, PT_SHAPE(2), PT_INT8));
    pt_value_dict_set_str(d, "i16",
                          tensor_of((const int16_t[]){-32768, 32767}, PT_SHAPE(2), PT_INT16));
    pt_value_dict_set_str(
        d, "i32", tensor_of((const int32_t[]){INT32_MIN, INT32_MAX}, PT_SHAPE(2), PT_INT32));
    pt_value_dict_set_str(
        d, "i64", tensor_of((const int64_t[]){INT64_MIN, INT64_MAX}, PT_SHAPE(2), PT_INT64));
    pt_tensor *empty = pt_zeros(PT_SHAPE(0, 3), PT_FLOAT32, pt_cpu());
    pt_value_dict_set_str(d, "empty", pt_value_tensor(empty));
    pt_release(empty);
    pt_value_dict_set_str(d, "scalar", tensor_of((const float[]){2.5f}, 0, NULL, PT_FLOAT32));
    /* base = arange(12).reshape(3, 4); view_t = base.t(); view_rows = base[1:3] */
    pt_tensor *flat = pt_arange(0, 12, 1, PT_FLOAT32, pt_cpu());
    pt_tensor *base = pt_reshape(flat, PT_SHAPE(3, 4));
    pt_tensor *vt = pt_transpose(base, 0, 1);
    pt_tensor *rows = pt_narrow(base, 0, 1, 2);
    pt_value_dict_set_str(d, "base", pt_value_tensor(base));
    pt_value_dict_set_str(d, "view_t", pt_value_tensor(vt));
    pt_value_dict_set_str(d, "view_rows", pt_value_tensor(rows));
    pt_release(flat);
    pt_release(base);
    pt_release(vt);
    pt_release(rows);
}

static pt_status save_values(const char *path)
{
    pt_value *d = pt_value_dict();
    add_scalars(d);
    add_tensors(d);
    pt_status st = pt_save(path, d);
    pt_value_free(d);
    return st;
}

/* floats: BINFLOAT, which torch 1.13's weights_only unpickler lacks (torch 2.x has it) */
static pt_status save_floats(const char *path)
{
    pt_value *d = pt_value_dict();
    pt_value *fl = pt_value_list();
    const double floats[] = {0.5, -1e300, 1e-310, 1.0 / 0.0, -0.0, 0.1};
    for (int i = 0; i < 6; i++)
        pt_value_append(fl, pt_value_float(floats[i]));
    pt_value_dict_set_str(d, "floats", fl);
    pt_status st = pt_save(path, d);
    pt_value_free(d);
    return st;
}

static pt_status save_bytes(const char *path)
{
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    pt_value *d = pt_value_dict();
    pt_value_dict_set_str(d, "b", pt_value_bytes(all, 256));
    pt_value_dict_set_str(d, "e", pt_value_bytes("", 0));
    pt_status st = pt_save(path, d);
    pt_value_free(d);
    return st;
}

/* examples/mnist_mlp.c's model; eval-mode forward of a seeded input. */
static pt_status save_mlp(const char *path, const char *io_path)
{
    pt_manual_seed(1234);
    pt_module *layers[] = {
        pt_nn_flatten(1, -1), pt_nn_linear(784, 512, true),
        pt_nn_relu(),         pt_nn_linear(512, 256, true),
        pt_nn_relu(),         pt_nn_linear(256, 128, true),
        pt_nn_relu(),         pt_nn_linear(128, 10, true),
    };
    pt_module *m = pt_nn_sequential((int)(sizeof(layers) / sizeof(layers[0])), layers);
    if (!m)
        return pt_last_status();
    pt_nn_eval(m);
    pt_tensor *x = pt_randn(PT_SHAPE(4, 1, 28, 28), PT_FLOAT32, pt_cpu());
    pt_tensor *y = pt_nn_forward(m, x);
    pt_value *sd = pt_nn_state_dict(m);
    pt_status st = y && sd ? pt_save(path, sd) : pt_last_status();
    pt_value *io = pt_value_dict();
    pt_value_dict_set_str(io, "x", pt_value_tensor(x));
    pt_value_dict_set_str(io, "y", pt_value_tensor(y));
    if (st == PT_OK)
        st = pt_save(io_path, io);
    pt_value_free(io);
    pt_value_free(sd);
    pt_release(x);
    pt_release(y);
    pt_nn_free(m);
    return st;
}

static pt_status save_many(const char *path)
{
    pt_value *d = pt_value_dict();
    char name[32];
    pt_status st = PT_OK;
    for (int i = 0; i < 70000 && st == PT_OK; i++) {
        snprintf(name, sizeof(name), "t%d", i);
        int32_t v = i;
        st = pt_value_dict_set_str(d, name, tensor_of(&v, PT_SHAPE(1), PT_INT32));
    }
    if (st == PT_OK)
        st = pt_save(path, d);
    pt_value_free(d);
    return st;
}

/* ==== 2. checkpoints described by expected.manifest + expected.ptfx ======================== */

/* The expected.ptfx records, written at the end (the count comes first in the file). */
typedef struct ptfx_writer {
    FILE *f;
    uint32_t count;
} ptfx_writer;

static void ptfx_add(ptfx_writer *w, const char *name, const pt_tensor *t)
{
    size_t nbytes = (size_t)pt_numel(t) * pt_dtype_size(pt_dtype_of(t));
    unsigned char *buf = malloc(nbytes + 1);
    if (pt_copy_to_host(t, buf, nbytes) != PT_OK) {
        free(buf);
        return;
    }
    uint16_t nl = (uint16_t)strlen(name);
    uint8_t dt = (uint8_t)pt_dtype_of(t), nd = (uint8_t)pt_ndim(t);
    uint64_t nb = nbytes;
    fwrite(&nl, 2, 1, w->f);
    fwrite(name, 1, nl, w->f);
    fwrite(&dt, 1, 1, w->f);
    fwrite(&nd, 1, 1, w->f);
    fwrite(pt_shape(t), 8, (size_t)nd, w->f);
    fwrite(&nb, 8, 1, w->f);
    fwrite(buf, 1, nbytes, w->f);
    free(buf);
    w->count++;
}

/* One file's tree in expected.manifest; storages are numbered by first appearance. */
typedef struct describer {
    FILE *man;
    ptfx_writer *fx;
    const pt_tensor *storages[4096];
    int n_storages;
} describer;

static void put_hex(FILE *f, const void *data, size_t n)
{
    if (n == 0)
        fputc('-', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x", ((const unsigned char *)data)[i]);
}

static void describe(describer *d, const pt_value *v, int depth, const char *path)
{
    FILE *f = d->man;
    fprintf(f, "%d ", depth);
    switch (pt_value_kind_of(v)) {
    case PT_VALUE_NONE: fprintf(f, "N\n"); break;
    case PT_VALUE_BOOL: {
        bool b = false;
        pt_value_as_bool(v, &b);
        fprintf(f, "B %d\n", (int)b);
        break;
    }
    case PT_VALUE_INT: {
        int64_t i = 0;
        pt_value_as_int(v, &i);
        fprintf(f, "I %lld\n", (long long)i);
        break;
    }
    case PT_VALUE_FLOAT: {
        double x = 0;
        uint64_t bits;
        pt_value_as_float(v, &x);
        memcpy(&bits, &x, 8);
        fprintf(f, "F %016llx\n", (unsigned long long)bits);
        break;
    }
    case PT_VALUE_STR:
    case PT_VALUE_BYTES: {
        size_t n = 0;
        const void *p = pt_value_kind_of(v) == PT_VALUE_STR ? (const void *)pt_value_as_str(v, &n)
                                                            : pt_value_as_bytes(v, &n);
        fprintf(f, "%c ", pt_value_kind_of(v) == PT_VALUE_STR ? 'S' : 'Y');
        put_hex(f, p, n);
        fputc('\n', f);
        break;
    }
    case PT_VALUE_TENSOR: {
        const pt_tensor *t = pt_value_tensor_ref(v);
        int sid = 0;
        while (sid < d->n_storages && !pt_shares_storage(t, d->storages[sid]))
            sid++;
        if (sid == d->n_storages && d->n_storages < 4096)
            d->storages[d->n_storages++] = t;
        fprintf(f, "T %d %d", (int)pt_dtype_of(t), pt_ndim(t));
        for (int i = 0; i < pt_ndim(t); i++)
            fprintf(f, " %lld", (long long)pt_shape(t)[i]);
        for (int i = 0; i < pt_ndim(t); i++)
            fprintf(f, " %lld", (long long)pt_stride(t)[i]);
        fprintf(f, " %lld %d %d %s\n", (long long)pt_storage_offset(t), sid,
                (int)pt_requires_grad(t), path);
        ptfx_add(d->fx, path, t);
        break;
    }
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE:
    case PT_VALUE_DICT: {
        pt_value_kind k = pt_value_kind_of(v);
        int64_t n = pt_value_len(v);
        fprintf(f, "%c %lld\n",
                k == PT_VALUE_LIST    ? 'L'
                : k == PT_VALUE_TUPLE ? 'U'
                                      : 'D',
                (long long)n);
        for (int64_t i = 0; i < n; i++) {
            char sub[1024];
            if (k == PT_VALUE_DICT) {
                const pt_value *key = pt_value_key_ref(v, i);
                int64_t ik;
                if (pt_value_kind_of(key) == PT_VALUE_STR)
                    snprintf(sub, sizeof sub, "%s.%s", path, pt_value_as_str(key, NULL));
                else if (pt_value_kind_of(key) == PT_VALUE_INT && pt_value_as_int(key, &ik) == 0)
                    snprintf(sub, sizeof sub, "%s.%lld", path, (long long)ik);
                else
                    snprintf(sub, sizeof sub, "%s.%lld", path, (long long)i);
                describe(d, key, depth + 1, "?");
            } else {
                snprintf(sub, sizeof sub, "%s.%lld", path, (long long)i);
            }
            describe(d, pt_value_item_ref(v, i), depth + 1, sub);
        }
        break;
    }
    }
}

/* Saves v with pt_save (or has it saved already) and describes it under "file <name>". */
static pt_status save_described(describer *d, const char *dir, const char *name, const pt_value *v,
                                bool save)
{
    char path[4096], stem[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(stem, sizeof stem, "%s", name);
    *strrchr(stem, '.') = '\0';
    pt_status st = save ? pt_save(path, v) : PT_OK;
    if (st != PT_OK)
        return st;
    fprintf(d->man, "file %s\n", name);
    d->n_storages = 0;
    describe(d, v, 0, stem);
    return PT_OK;
}

static pt_tensor *bits_tensor(const void *bits, int64_t n, pt_dtype dt)
{
    return pt_from_data(bits, 1, &n, dt, pt_cpu());
}

static pt_value *dtypes_value(void)
{
    const uint32_t f32[] = {0x7FC00000, 0x7FC00001, 0xFFC00000, 0x7F800000, 0xFF800000, 0x80000000,
                            0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x3F800000, 0xBEAAAAAB};
    const uint64_t f64[] = {0x7FF8000000000000ULL, 0x7FF0000000000001ULL, 0xFFF0000000000000ULL,
                            0x8000000000000000ULL, 0x0000000000000001ULL, 0x3FB999999999999AULL};
    const uint16_t f16[] = {0x7E00, 0x7C00, 0xFC00, 0x8000, 0x0001, 0x03FF, 0x7BFF, 0x3C00};
    const uint16_t bf16[] = {0x7FC0, 0x7F80, 0xFF80, 0x8000, 0x0001, 0x007F, 0x7F7F, 0x4049};
    const int8_t i8[] = {-128, -1, 0, 127};
    const int16_t i16[] = {-32768, -1, 0, 32767};
    const int32_t i32[] = {INT32_MIN, -1, 0, INT32_MAX};
    const int64_t i64[] = {INT64_MIN, -1, 0, 1LL << 40, INT64_MAX};
    const uint8_t u8[] = {0, 1, 128, 255};
    const bool b[] = {true, false, true};
    pt_tensor *ts[] = {
        bits_tensor(f32, 12, PT_FLOAT32),
        bits_tensor(f64, 6, PT_FLOAT64),
        bits_tensor(f16, 8, PT_FLOAT16),
        bits_tensor(bf16, 8, PT_BFLOAT16),
        bits_tensor(i8, 4, PT_INT8),
        bits_tensor(i16, 4, PT_INT16),
        bits_tensor(i32, 4, PT_INT32),
        bits_tensor(i64, 5, PT_INT64),
        bits_tensor(u8, 4, PT_UINT8),
        bits_tensor(b, 3, PT_BOOL),
        pt_zeros(PT_SHAPE(0, 3), PT_FLOAT32, pt_cpu()),
        pt_zeros(PT_SHAPE(2, 0, 4), PT_INT64, pt_cpu()),
        pt_scalar_tensor(-2.5, PT_FLOAT64, pt_cpu()),
        pt_scalar_tensor(7, PT_INT32, pt_cpu()),
    };
    const char *names[] = {"float32", "float64", "float16",    "bfloat16",  "int8",
                           "int16",   "int32",   "int64",      "uint8",     "bool",
                           "empty",   "empty3d", "scalar_f64", "scalar_i32"};
    pt_value *d = pt_value_dict();
    for (int i = 0; i < 14; i++) {
        pt_value_dict_set_str(d, names[i], pt_value_tensor(ts[i]));
        pt_release(ts[i]);
    }
    return d;
}

static pt_value *views_value(void)
{
    pt_tensor *flat = pt_arange(0, 24, 1, PT_FLOAT32, pt_cpu());
    pt_tensor *base = pt_reshape(flat, PT_SHAPE(4, 6));
    pt_tensor *row0 = pt_narrow(base, 0, 0, 1);
    pt_tensor *ts[] = {
        base,
        pt_narrow(base, 0, 1, 2), /* offset 6 */
        pt_narrow(base, 1, 2, 3), /* offset 2, strides (6, 1) */
        pt_transpose(base, 0, 1), /* strides (1, 6) */
        pt_as_strided(flat, 2, (const int64_t[]){2, 2}, (const int64_t[]){12, 3}, 1),
        pt_expand(row0, PT_SHAPE(3, 6)), /* stride 0 */
        pt_narrow(base, 0, 2, 0),        /* [0, 6] at offset 12 */
        pt_ones(PT_SHAPE(3), PT_FLOAT64, pt_cpu()),
    };
    const char *names[] = {"base", "rows",     "cols",       "t",
                           "step", "expanded", "empty_view", "separate"};
    pt_value *d = pt_value_dict();
    for (int i = 0; i < 8; i++)
        pt_value_dict_set_str(d, names[i], pt_value_tensor(ts[i]));
    pt_value *same = pt_value_tensor(ts[1]);
    pt_value_dict_set_str(d, "same_a", pt_value_retain(same));
    pt_value_dict_set_str(d, "same_b", same);
    /* tied weights: two detached tensors viewing one parameter's storage */
    pt_tensor *w = pt_randn(PT_SHAPE(3, 3), PT_FLOAT32, pt_cpu());
    pt_tensor *w2 = pt_detach(w);
    pt_value *tied = pt_value_dict();
    pt_value_dict_set_str(tied, "enc.weight", pt_value_tensor(w));
    pt_value_dict_set_str(tied, "dec.weight", pt_value_tensor(w2));
    pt_value_dict_set_str(d, "tied", tied);
    for (int i = 1; i < 8; i++)
        pt_release(ts[i]);
    pt_release(w);
    pt_release(w2);
    pt_release(row0);
    pt_release(base);
    pt_release(flat);
    return d;
}

/* Conv2d(1, 2, 3) -> BatchNorm2d(2) -> Flatten -> Linear(8, 3) on [N, 1, 4, 4] inputs. */
static pt_module *small_net(void)
{
    pt_module *layers[] = {pt_nn_conv2d(1, 2, 3, 1, 0, true), pt_nn_batch_norm2d(2),
                           pt_nn_flatten(1, -1), pt_nn_linear(8, 3, true)};
    return pt_nn_sequential(4, layers);
}

/* Three Adam steps (train mode, so BatchNorm's running stats and counter move), StepLR. */
static pt_status train_small_net(pt_module *m, pt_optim **opt, pt_lr_scheduler **sched)
{
    pt_adam_opts ao = PT_ADAM_DEFAULTS;
    ao.lr = 0.01;
    *opt = pt_optim_adam(m, ao);
    *sched = *opt ? pt_lr_step_lr(*opt, 2, 0.5) : NULL;
    if (!*sched)
        return pt_last_status();
    pt_status st = PT_OK;
    for (int step = 0; step < 3 && st == PT_OK; step++) {
        pt_tensor *x = pt_randn(PT_SHAPE(4, 1, 4, 4), PT_FLOAT32, pt_cpu());
        pt_tensor *y = pt_nn_forward(m, x);
        pt_tensor *sq = pt_square(y);
        pt_tensor *loss = pt_mean(sq);
        pt_optim_zero_grad(*opt);
        st = loss ? pt_backward(loss, NULL, false, false) : pt_last_status();
        if (st == PT_OK)
            st = pt_optim_step(*opt);
        if (st == PT_OK)
            st = pt_lr_scheduler_step(*sched);
        pt_release(x);
        pt_release(y);
        pt_release(sq);
        pt_release(loss);
    }
    return st;
}

static pt_value *training_value(pt_module *m, pt_optim *opt, pt_lr_scheduler *sched)
{
    pt_value *d = pt_value_dict();
    pt_value_dict_set_str(d, "model", pt_nn_state_dict(m));
    pt_value_dict_set_str(d, "optimizer", pt_optim_state_dict(opt));
    pt_value_dict_set_str(d, "scheduler", pt_lr_scheduler_state_dict(sched));
    pt_value_dict_set_str(d, "epoch", pt_value_int(7));
    pt_value_dict_set_str(d, "loss", pt_value_float(0.25));
    /* [1.5, (1, 'x', None), [[2], ()]] */
    pt_value *hist = pt_value_list();
    pt_value_append(hist, pt_value_float(1.5));
    pt_value_append(hist, pt_value_tuple_of(3, (pt_value *[]){pt_value_int(1), pt_value_str("x"),
                                                              pt_value_none()}));
    pt_value *inner = pt_value_list();
    pt_value *two = pt_value_list();
    pt_value_append(two, pt_value_int(2));
    pt_value_append(inner, two);
    pt_value_append(inner, pt_value_tuple());
    pt_value_append(hist, inner);
    pt_value_dict_set_str(d, "history", hist);
    pt_value_dict_set_str(d, "blob", pt_value_bytes("\x00\x01\xfe\xff", 4));
    pt_value_dict_set_str(d, "nothing", pt_value_none());
    pt_value_dict_set_str(d, "flag", pt_value_bool(true));
    return d;
}

/* Writes part 2 into dir. */
static pt_status save_described_files(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/expected.manifest", dir);
    describer *d = calloc(1, sizeof(*d));
    ptfx_writer fx = {0};
    d->man = fopen(path, "w");
    snprintf(path, sizeof path, "%s/expected.ptfx", dir);
    fx.f = fopen(path, "wb");
    d->fx = &fx;
    if (!d->man || !fx.f) {
        fprintf(stderr, "write_checkpoints: cannot write into %s\n", dir);
        return PT_ERR_IO;
    }
    fwrite("PTFX\x01\x00\x00\x00\x00\x00\x00\x00", 1, 12, fx.f); /* count patched below */
    fprintf(d->man, "# written by tests/python/write_checkpoints.c from its own inputs\n");

    pt_manual_seed(5);
    pt_module *m = small_net();
    pt_optim *opt = NULL;
    pt_lr_scheduler *sched = NULL;
    pt_status st = m ? train_small_net(m, &opt, &sched) : pt_last_status();
    pt_value *sd = NULL;
    if (st == PT_OK) {
        pt_nn_eval(m);
        pt_tensor *x = pt_randn(PT_SHAPE(2, 1, 4, 4), PT_FLOAT32, pt_cpu());
        pt_tensor *y = pt_nn_forward(m, x);
        ptfx_add(&fx, "nn.x", x);
        ptfx_add(&fx, "nn.y", y);
        pt_release(x);
        pt_release(y);
        snprintf(path, sizeof path, "%s/nn_state_dict.pt", dir);
        st = pt_nn_save(m, path);
        if (st == PT_OK) {
            snprintf(path, sizeof path, "%s/nn_state_dict.safetensors", dir);
            st = pt_nn_save(m, path);
        }
        sd = pt_nn_state_dict(m);
    }
    if (st == PT_OK)
        st = save_described(d, dir, "nn_state_dict.pt", sd, false);
    if (st == PT_OK)
        st = save_described(d, dir, "nn_state_dict.safetensors", sd, false);
    pt_value_free(sd);
    if (st == PT_OK) {
        pt_value *v = training_value(m, opt, sched);
        st = save_described(d, dir, "training.pt", v, true);
        pt_value_free(v);
    }
    if (st == PT_OK) {
        pt_value *v = views_value();
        st = save_described(d, dir, "views.pt", v, true);
        pt_value_free(v);
    }
    if (st == PT_OK) {
        pt_value *v = dtypes_value();
        st = save_described(d, dir, "dtypes.pt", v, true);
        if (st == PT_OK) {
            pt_value *meta = pt_value_dict();
            pt_value_dict_set_str(meta, "format", pt_value_str("pt"));
            snprintf(path, sizeof path, "%s/tensors.safetensors", dir);
            /* safetensors holds no 0-dim/empty specials differently: the same dict */
            st = pt_save_safetensors(path, v, meta);
            pt_value_free(meta);
            if (st == PT_OK)
                st = save_described(d, dir, "tensors.safetensors", v, false);
        }
        pt_value_free(v);
    }
    pt_lr_scheduler_free(sched);
    pt_optim_free(opt);
    pt_nn_free(m);
    fseek(fx.f, 8, SEEK_SET);
    fwrite(&fx.count, 4, 1, fx.f);
    fclose(fx.f);
    fclose(d->man);
    free(d);
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: write_checkpoints DIR\n");
        return 2;
    }
    char p[4096], q[4096];
#define PATH(buf, name) (snprintf(buf, sizeof(buf), "%s/%s", argv[1], name), buf)
    /* With PT_SAVE_ZIP64_LIMIT=0 (read once by pt_save, so a run of its own): only zip64.pt,
     * every record in zip64 form. */
    if (getenv("PT_SAVE_ZIP64_LIMIT")) {
        if (save_state_dict(PATH(p, "zip64.pt")) != PT_OK)
            return failed("zip64.pt");
        printf("wrote zip64.pt to %s\n", argv[1]);
        return 0;
    }
    if (save_state_dict(PATH(p, "state_dict.pt")) != PT_OK)
        return failed("state_dict.pt");
    if (save_values(PATH(p, "values.pt")) != PT_OK)
        return failed("values.pt");
    if (save_floats(PATH(p, "floats.pt")) != PT_OK)
        return failed("floats.pt");
    if (save_bytes(PATH(p, "bytes.pt")) != PT_OK)
        return failed("bytes.pt");
    if (save_mlp(PATH(p, "mlp.pt"), PATH(q, "mlp_io.pt")) != PT_OK)
        return failed("mlp.pt");
    if (save_many(PATH(p, "many.pt")) != PT_OK)
        return failed("many.pt");
    if (save_described_files(argv[1]) != PT_OK)
        return failed("described checkpoints");
    printf("wrote 14 files to %s\n", argv[1]);
    return 0;
}
