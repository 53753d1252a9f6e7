/* Writes the .pt files that tests/fixtures/check_pt_save.py loads with real PyTorch: the
 * ptsave_torch ctest runs `pt_save_writer DIR` and then the checker on DIR. The values are
 * simple formulas that the checker recomputes on its own (it never reads expected values from
 * here). Files:
 *   state_dict.pt  Sequential(Linear(3, 4), BatchNorm1d(4)), tensor j filled with
 *                  arange(numel) * 0.5 + j (num_batches_tracked = 6)
 *   values.pt      a dict with every value kind, shared tensors, views, all dtypes
 *   floats.pt      {'floats': [0.5, -1e300, 1e-310, inf, -0.0, 0.1]}
 *   bytes.pt       {'b': bytes(range(256)), 'e': b''}
 *   mlp.pt         the MLP of examples/mnist_mlp.c (seeded init), and mlp_io.pt: {'x': input,
 *                  'y': the C forward in eval mode}
 *   zip64.pt       state_dict.pt's content with every record in zip64 form
 *   many.pt        70000 one-element tensors (more than 65535 zip entries) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <prometorch/prometorch.h>
#include <prometorch/io.h>

static int failed(const char *what)
{
    fprintf(stderr, "pt_save_writer: %s: %s\n", what, pt_last_error());
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

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pt_save_writer DIR\n");
        return 2;
    }
    char p[4096], q[4096];
#define PATH(buf, name) (snprintf(buf, sizeof(buf), "%s/%s", argv[1], name), buf)
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
    setenv("PT_SAVE_ZIP64_LIMIT", "0", 1);
    pt_status st = save_state_dict(PATH(p, "zip64.pt"));
    unsetenv("PT_SAVE_ZIP64_LIMIT");
    if (st != PT_OK)
        return failed("zip64.pt");
    if (save_many(PATH(p, "many.pt")) != PT_OK)
        return failed("many.pt");
    printf("wrote 8 files to %s\n", argv[1]);
    return 0;
}
