/* Tests of the value tree (include/prometorch/value.h): constructors and getters, containers,
 * dict semantics against Python's (key equality 1 == 1.0 == True, insertion order, replace in
 * place), large dicts, dotted path lookup, copy/equal, the repr rendering (expected strings
 * are what python3's repr() prints for the same structure) and deep nesting. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Fails unless to_string(v, max_items) is exactly `expected`. */
static void assert_repr(const pt_value *v, int max_items, const char *expected)
{
    char *s = pt_value_to_string(v, max_items);
    assert_non_null(s);
    assert_string_equal(s, expected);
    free(s);
}

static pt_value *int_list(int n)
{
    pt_value *l = pt_value_list();
    for (int i = 0; i < n; i++)
        assert_int_equal(pt_value_append(l, pt_value_int(i)), PT_OK);
    return l;
}

static void test_scalars(void **state)
{
    (void)state;
    pt_value *n = pt_value_none(), *b = pt_value_bool(true), *i = pt_value_int(-7);
    pt_value *f = pt_value_float(2.5);
    assert_int_equal(pt_value_kind_of(n), PT_VALUE_NONE);
    assert_int_equal(pt_value_kind_of(b), PT_VALUE_BOOL);
    assert_int_equal(pt_value_kind_of(i), PT_VALUE_INT);
    assert_int_equal(pt_value_kind_of(f), PT_VALUE_FLOAT);
    assert_int_equal(pt_value_kind_of(NULL), PT_VALUE_NONE);
    assert_true(pt_value_is(f, PT_VALUE_FLOAT));
    assert_false(pt_value_is(f, PT_VALUE_INT));
    assert_false(pt_value_is(NULL, PT_VALUE_NONE));
    const char *names[] = {"None",  "bool",   "int",  "float", "str",
                           "bytes", "tensor", "list", "tuple", "dict"};
    for (int k = PT_VALUE_NONE; k <= PT_VALUE_DICT; k++)
        assert_string_equal(pt_value_kind_name((pt_value_kind)k), names[k]);

    bool bv = false;
    int64_t iv = 0;
    double fv = 0;
    assert_int_equal(pt_value_as_bool(b, &bv), PT_OK);
    assert_true(bv);
    assert_int_equal(pt_value_as_int(i, &iv), PT_OK);
    assert_int_equal(iv, -7);
    assert_int_equal(pt_value_as_int(b, &iv), PT_OK); /* bool is an int in Python */
    assert_int_equal(iv, 1);
    assert_int_equal(pt_value_as_float(f, &fv), PT_OK);
    assert_true(fv == 2.5);
    assert_int_equal(pt_value_as_float(i, &fv), PT_OK);
    assert_true(fv == -7.0);
    assert_int_equal(pt_value_as_float(b, &fv), PT_OK);
    assert_true(fv == 1.0);

    /* kind mismatches leave *out alone */
    iv = 42;
    assert_pt_status_error(pt_value_as_int(f, &iv), PT_ERR_DTYPE,
                           "expected int or bool, got float");
    assert_int_equal(iv, 42);
    bv = false;
    assert_pt_status_error(pt_value_as_bool(i, &bv), PT_ERR_DTYPE, "expected bool, got int");
    assert_false(bv);
    assert_pt_status_error(pt_value_as_float(n, &fv), PT_ERR_DTYPE, "got None");
    assert_true(fv == 1.0);
    assert_pt_error(pt_value_as_str(i, NULL), PT_ERR_DTYPE,
                    "pt_value_as_str: expected str, got int");
    assert_pt_error(pt_value_tensor_ref(i), PT_ERR_DTYPE, "expected tensor, got int");
    assert_int_equal(pt_value_len(i), -1);
    assert_int_equal(pt_value_len(NULL), -1);

    assert_ptr_equal(pt_value_retain(i), i);
    pt_value_free(i); /* drops the retain: i must still be alive */
    assert_int_equal(pt_value_as_int(i, &iv), PT_OK);
    assert_int_equal(iv, -7);
    assert_null(pt_value_retain(NULL));
    pt_value_free(NULL);
    pt_value_free(n);
    pt_value_free(b);
    pt_value_free(i);
    pt_value_free(f);
}

static void test_strings_and_bytes(void **state)
{
    (void)state;
    pt_value *s = pt_value_str("fc1.weight");
    size_t len = 0;
    assert_string_equal(pt_value_as_str(s, &len), "fc1.weight");
    assert_int_equal(len, 10);
    assert_int_equal(pt_value_len(s), 10);
    assert_int_equal(pt_value_kind_of(s), PT_VALUE_STR);

    pt_value *z = pt_value_strn("a\0b", 3); /* embedded NUL kept */
    const char *zs = pt_value_as_str(z, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(zs, "a\0b", 4); /* and NUL-terminated */

    const unsigned char raw[] = {0, 1, 255};
    pt_value *by = pt_value_bytes(raw, 3);
    const void *bp = pt_value_as_bytes(by, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(bp, raw, 3);
    assert_int_equal(pt_value_kind_of(by), PT_VALUE_BYTES);
    assert_pt_error(pt_value_as_bytes(s, NULL), PT_ERR_DTYPE, "expected bytes, got str");
    assert_pt_error(pt_value_as_str(by, NULL), PT_ERR_DTYPE, "expected str, got bytes");

    pt_value *e = pt_value_bytes(NULL, 0);
    assert_non_null(e);
    assert_int_equal(pt_value_len(e), 0);
    assert_false(pt_value_equal(s, by));

    /* str and bytes with the same content differ (Python: 'ab' != b'ab') */
    pt_value *s2 = pt_value_str("ab"), *b2 = pt_value_bytes("ab", 2);
    assert_false(pt_value_equal(s2, b2));

    /* impossible sizes are PT_ERR_OOM before any copy (the data is never read) */
    assert_pt_error(pt_value_strn("x", SIZE_MAX), PT_ERR_OOM, "out of memory");
    assert_pt_error(pt_value_bytes("x", SIZE_MAX - 8), PT_ERR_OOM, "out of memory");
    assert_pt_error(pt_value_str(NULL), PT_ERR_NULL, "pt_value_str");
    assert_pt_error(pt_value_strn(NULL, 3), PT_ERR_NULL, "pt_value_strn");
    assert_pt_error(pt_value_bytes(NULL, 1), PT_ERR_NULL, "pt_value_bytes");
    pt_value *values[] = {s, z, by, e, s2, b2};
    for (size_t k = 0; k < sizeof values / sizeof *values; k++)
        pt_value_free(values[k]);
}

static void test_tensor_values(void **state)
{
    (void)state;
    pt_tensor *t = pt_zeros(PT_SHAPE(10, 784), PT_FLOAT32, pt_cpu());
    pt_value *v = pt_value_tensor(t);
    assert_non_null(v);
    pt_release(t); /* the value keeps its own reference */
    pt_tensor *r = pt_value_tensor_ref(v);
    assert_non_null(r);
    assert_int_equal(pt_numel(r), 7840);
    assert_repr(v, 0, "tensor(float32, [10, 784])");

    pt_tensor *s = pt_zeros(PT_SCALAR_SHAPE, PT_INT64, pt_cpu());
    pt_value *sv = pt_value_tensor(s);
    assert_repr(sv, 0, "tensor(int64, [])");

    /* equal when the same object or the same view of the same storage */
    pt_value *v2 = pt_value_tensor(r);
    assert_true(pt_value_equal(v, v2));
    pt_tensor *same = pt_view(r, PT_SHAPE(10, 784));
    pt_tensor *other = pt_view(r, PT_SHAPE(784, 10));
    pt_value *vs = pt_value_tensor(same), *vo = pt_value_tensor(other);
    assert_true(pt_value_equal(v, vs));
    assert_false(pt_value_equal(v, vo));
    pt_tensor *z2 = pt_zeros(PT_SHAPE(10, 784), PT_FLOAT32, pt_cpu());
    pt_value *vz = pt_value_tensor(z2);
    assert_false(pt_value_equal(v, vz)); /* equal contents, different storage */

    assert_pt_error(pt_value_tensor(NULL), PT_ERR_NULL, "pt_value_tensor");
    pt_value *items[] = {v, sv, v2, vs, vo, vz};
    for (size_t k = 0; k < sizeof items / sizeof *items; k++)
        pt_value_free(items[k]);
    /* the teardown's leak check fails if a value kept a tensor reference */
}

static void test_lists_and_tuples(void **state)
{
    (void)state;
    pt_value *l = int_list(5);
    assert_int_equal(pt_value_len(l), 5);
    int64_t x;
    assert_int_equal(pt_value_as_int(pt_value_item_ref(l, 0), &x), PT_OK);
    assert_int_equal(x, 0);
    assert_int_equal(pt_value_as_int(pt_value_item_ref(l, -1), &x), PT_OK);
    assert_int_equal(x, 4);
    assert_int_equal(pt_value_as_int(pt_value_item_ref(l, -5), &x), PT_OK);
    assert_int_equal(x, 0);
    assert_pt_error(pt_value_item_ref(l, 5), PT_ERR_INDEX,
                    "index 5 out of range for list of length 5");
    assert_pt_error(pt_value_item_ref(l, -6), PT_ERR_INDEX, "index -6 out of range");

    pt_value *t = pt_value_tuple();
    assert_int_equal(pt_value_append(t, pt_value_str("a")), PT_OK);
    assert_int_equal(pt_value_kind_of(t), PT_VALUE_TUPLE);
    assert_int_equal(pt_value_len(t), 1);
    assert_repr(t, 0, "('a',)");

    pt_value *t2 =
        pt_value_tuple_of(3, (pt_value *[]){pt_value_int(1), pt_value_float(2.0), pt_value_none()});
    assert_repr(t2, 0, "(1, 2.0, None)");
    pt_value *t0 = pt_value_tuple_of(0, NULL);
    assert_repr(t0, 0, "()");

    /* a NULL entry (a failed constructor) is an error; the other items are freed */
    assert_pt_error(pt_value_tuple_of(2, (pt_value *[]){pt_value_int(1), NULL}), PT_ERR_NULL,
                    "items[1]");
    assert_pt_error(pt_value_tuple_of(-1, NULL), PT_ERR_INVALID_ARG, "negative");

    /* append takes the item also on failure (ASan's leak check covers it) */
    pt_value *d = pt_value_dict();
    assert_pt_status_error(pt_value_append(d, pt_value_int(1)), PT_ERR_DTYPE,
                           "pt_value_append: expected list or tuple, got dict");
    assert_pt_status_error(pt_value_append(NULL, pt_value_int(1)), PT_ERR_NULL, "seq");
    assert_pt_status_error(pt_value_append(l, NULL), PT_ERR_NULL, "item");
    assert_pt_status_error(pt_value_append(l, pt_value_retain(l)), PT_ERR_INVALID_ARG,
                           "cannot contain itself");
    assert_int_equal(pt_value_len(l), 5);
    assert_pt_error(pt_value_item_ref(pt_value_item_ref(l, 0), 0), PT_ERR_DTYPE,
                    "expected list, tuple or dict, got int");

    pt_value *items[] = {l, t, t2, t0, d};
    for (size_t k = 0; k < sizeof items / sizeof *items; k++)
        pt_value_free(items[k]);
}

static void test_dict_basics(void **state)
{
    (void)state;
    pt_value *d = pt_value_dict();
    assert_int_equal(pt_value_dict_set_str(d, "b", pt_value_int(1)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(d, "a", pt_value_int(2)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(d, "c", pt_value_int(3)), PT_OK);
    assert_int_equal(pt_value_len(d), 3);
    /* replacing keeps the position (Python: d['b'] = 10 keeps 'b' first) */
    assert_int_equal(pt_value_dict_set_str(d, "b", pt_value_int(10)), PT_OK);
    assert_int_equal(pt_value_len(d), 3);
    assert_repr(d, 0, "{'b': 10, 'a': 2, 'c': 3}");
    assert_string_equal(pt_value_as_str(pt_value_key_ref(d, 0), NULL), "b");
    assert_string_equal(pt_value_as_str(pt_value_key_ref(d, -1), NULL), "c");
    int64_t x;
    assert_int_equal(pt_value_as_int(pt_value_item_ref(d, 0), &x), PT_OK);
    assert_int_equal(x, 10);
    assert_int_equal(pt_value_as_int(pt_value_get_str_ref(d, "a"), &x), PT_OK);
    assert_int_equal(x, 2);

    /* missing keys name the key */
    assert_pt_error(pt_value_get_str_ref(d, "fc.weight"), PT_ERR_INDEX,
                    "pt_value_get_str_ref: key 'fc.weight' not found");
    assert_pt_error(pt_value_get_int_ref(d, 7), PT_ERR_INDEX, "key 7 not found");
    pt_value *k = pt_value_str("zz");
    assert_pt_error(pt_value_get_ref(d, k), PT_ERR_INDEX, "key 'zz' not found");
    assert_pt_error(pt_value_key_ref(d, 3), PT_ERR_INDEX, "index 3 out of range for dict");

    /* delete: later entries move up, lookups still work */
    assert_int_equal(pt_value_dict_del_str(d, "b"), PT_OK);
    assert_repr(d, 0, "{'a': 2, 'c': 3}");
    assert_int_equal(pt_value_as_int(pt_value_get_str_ref(d, "c"), &x), PT_OK);
    assert_int_equal(x, 3);
    assert_pt_status_error(pt_value_dict_del_str(d, "b"), PT_ERR_INDEX, "key 'b' not found");
    assert_int_equal(pt_value_dict_set_str(d, "b", pt_value_int(4)), PT_OK);
    assert_repr(d, 0, "{'a': 2, 'c': 3, 'b': 4}");

    /* unhashable keys, wrong kinds, NULLs: the references are taken and freed */
    assert_pt_status_error(pt_value_dict_set(d, pt_value_list(), pt_value_int(1)),
                           PT_ERR_INVALID_ARG, "unhashable dict key of kind list");
    assert_pt_status_error(pt_value_dict_set(d, pt_value_dict(), pt_value_int(1)),
                           PT_ERR_INVALID_ARG, "unhashable dict key of kind dict");
    assert_pt_status_error(pt_value_dict_set(d,
                                             pt_value_tuple_of(1, (pt_value *[]){pt_value_list()}),
                                             pt_value_none()),
                           PT_ERR_INVALID_ARG, "unhashable dict key of kind list");
    pt_tensor *t = pt_zeros(PT_SHAPE(2), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_value_dict_set(d, pt_value_tensor(t), pt_value_int(1)),
                           PT_ERR_INVALID_ARG, "unhashable dict key of kind tensor");
    pt_release(t);
    assert_pt_status_error(pt_value_dict_set_str(k, "a", pt_value_int(1)), PT_ERR_DTYPE,
                           "expected dict, got str");
    assert_pt_status_error(pt_value_dict_set_str(NULL, "a", pt_value_int(1)), PT_ERR_NULL, "dict");
    assert_pt_status_error(pt_value_dict_set_str(d, NULL, pt_value_int(1)), PT_ERR_NULL, "key");
    assert_pt_status_error(pt_value_dict_set(d, pt_value_int(1), NULL), PT_ERR_NULL, "val");
    assert_pt_status_error(pt_value_dict_set_str(d, "self", pt_value_retain(d)), PT_ERR_INVALID_ARG,
                           "cannot contain itself");
    assert_pt_error(pt_value_get_str_ref(k, "a"), PT_ERR_DTYPE, "expected dict, got str");
    assert_pt_error(pt_value_get_ref(d, NULL), PT_ERR_NULL, "key");
    assert_int_equal(pt_value_len(d), 3);
    pt_value_free(k);
    pt_value_free(d);
}

static void test_dict_python_key_equality(void **state)
{
    (void)state;
    /* Python: d = {1: 'a'}; d[1.0] = 'b'; d[True] = 'c' -> {1: 'c'} */
    pt_value *d = pt_value_dict();
    assert_int_equal(pt_value_dict_set_int(d, 1, pt_value_str("a")), PT_OK);
    assert_int_equal(pt_value_dict_set(d, pt_value_float(1.0), pt_value_str("b")), PT_OK);
    assert_int_equal(pt_value_dict_set(d, pt_value_bool(true), pt_value_str("c")), PT_OK);
    assert_int_equal(pt_value_len(d), 1);
    assert_repr(d, 0, "{1: 'c'}");
    pt_value *kf = pt_value_float(1.0), *kb = pt_value_bool(true);
    assert_string_equal(pt_value_as_str(pt_value_get_ref(d, kf), NULL), "c");
    assert_string_equal(pt_value_as_str(pt_value_get_ref(d, kb), NULL), "c");

    /* 0 == 0.0 == -0.0 == False; 2**53 + 1 != float(2**53); str 'x' != bytes b'x' */
    assert_int_equal(pt_value_dict_set(d, pt_value_bool(false), pt_value_int(0)), PT_OK);
    assert_int_equal(pt_value_as_int(pt_value_get_int_ref(d, 0), &(int64_t){0}), PT_OK);
    pt_value *mz = pt_value_float(-0.0);
    assert_non_null(pt_value_get_ref(d, mz));
    int64_t big = ((int64_t)1 << 53) + 1;
    assert_int_equal(pt_value_dict_set_int(d, big, pt_value_str("int")), PT_OK);
    assert_int_equal(pt_value_dict_set(d, pt_value_float(9007199254740992.0), pt_value_str("f")),
                     PT_OK);
    assert_int_equal(pt_value_len(d), 4);
    assert_int_equal(pt_value_dict_set_str(d, "x", pt_value_int(1)), PT_OK);
    assert_int_equal(pt_value_dict_set(d, pt_value_bytes("x", 1), pt_value_int(2)), PT_OK);
    assert_int_equal(pt_value_len(d), 6);
    assert_repr(d, 0,
                "{1: 'c', False: 0, 9007199254740993: 'int', 9007199254740992.0: 'f', 'x': 1, "
                "b'x': 2}");
    /* 1.5 is not an int key */
    pt_value *k15 = pt_value_float(1.5);
    assert_pt_error(pt_value_get_ref(d, k15), PT_ERR_INDEX, "key 1.5 not found");

    /* tuple keys hash recursively: (1, 'a') finds (1.0, 'a'); None keys work */
    pt_value *td = pt_value_dict();
    pt_value *key = pt_value_tuple_of(2, (pt_value *[]){pt_value_int(1), pt_value_str("a")});
    assert_int_equal(pt_value_dict_set(td, key, pt_value_str("t")), PT_OK);
    assert_int_equal(pt_value_dict_set(td, pt_value_none(), pt_value_str("n")), PT_OK);
    pt_value *probe = pt_value_tuple_of(2, (pt_value *[]){pt_value_float(1.0), pt_value_str("a")});
    assert_string_equal(pt_value_as_str(pt_value_get_ref(td, probe), NULL), "t");
    pt_value *probe2 =
        pt_value_tuple_of(2, (pt_value *[]){pt_value_int(1), pt_value_bytes("a", 1)});
    assert_pt_error(pt_value_get_ref(td, probe2), PT_ERR_INDEX, "key (1, b'a') not found");
    pt_value *none = pt_value_none();
    assert_string_equal(pt_value_as_str(pt_value_get_ref(td, none), NULL), "n");
    assert_repr(td, 0, "{(1, 'a'): 't', None: 'n'}");

    pt_value *items[] = {d, kf, kb, mz, k15, td, probe, probe2, none};
    for (size_t k = 0; k < sizeof items / sizeof *items; k++)
        pt_value_free(items[k]);
}

static void test_dict_100000_keys(void **state)
{
    (void)state;
    enum { N = 100000 };
    pt_value *d = pt_value_dict();
    char key[64];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "layers.%d.weight", i);
        assert_int_equal(pt_value_dict_set_str(d, key, pt_value_int(i)), PT_OK);
    }
    assert_int_equal(pt_value_len(d), N);
    for (int i = N - 1; i >= 0; i--) {
        snprintf(key, sizeof key, "layers.%d.weight", i);
        int64_t x = -1;
        pt_value *v = pt_value_get_str_ref(d, key);
        assert_non_null(v);
        assert_int_equal(pt_value_as_int(v, &x), PT_OK);
        assert_int_equal(x, i);
        /* insertion order is entry order */
        assert_ptr_equal(pt_value_item_ref(d, i), v);
    }
    assert_null(pt_value_get_str_ref(d, "layers.100000.weight"));
    pt_clear_error();
    /* integer keys too (optimizer state is keyed by parameter index) */
    pt_value *di = pt_value_dict();
    for (int i = 0; i < N; i++)
        assert_int_equal(pt_value_dict_set_int(di, (int64_t)i * 7919, pt_value_int(i)), PT_OK);
    for (int i = 0; i < N; i++) {
        int64_t x = -1;
        assert_int_equal(pt_value_as_int(pt_value_get_int_ref(di, (int64_t)i * 7919), &x), PT_OK);
        assert_int_equal(x, i);
    }
    /* a deletion in the middle keeps every other key reachable */
    assert_int_equal(pt_value_dict_del_str(d, "layers.500.weight"), PT_OK);
    assert_int_equal(pt_value_len(d), N - 1);
    assert_null(pt_value_get_str_ref(d, "layers.500.weight"));
    pt_clear_error();
    int64_t x;
    assert_int_equal(pt_value_as_int(pt_value_get_str_ref(d, "layers.99999.weight"), &x), PT_OK);
    assert_int_equal(x, 99999);
    assert_int_equal(pt_value_as_int(pt_value_item_ref(d, 500), &x), PT_OK);
    assert_int_equal(x, 501);
    pt_value_free(d);
    pt_value_free(di);
}

/* {'model': {'fc1.weight': T, 'fc1': {'bias': 1}, 'layers': [{'w': 2}, 3]},
 *  'state': {0: {'step': 5}}, 'a.b': {'c': 6}, 'a': {'b.d': 7}} */
static pt_value *path_tree(pt_tensor *t)
{
    pt_value *model = pt_value_dict(), *fc1 = pt_value_dict(), *layers = pt_value_list();
    pt_value *l0 = pt_value_dict(), *state = pt_value_dict(), *s0 = pt_value_dict();
    pt_value *ab = pt_value_dict(), *a = pt_value_dict(), *root = pt_value_dict();
    assert_int_equal(pt_value_dict_set_str(model, "fc1.weight", pt_value_tensor(t)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(fc1, "bias", pt_value_int(1)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(model, "fc1", fc1), PT_OK);
    assert_int_equal(pt_value_dict_set_str(l0, "w", pt_value_int(2)), PT_OK);
    assert_int_equal(pt_value_append(layers, l0), PT_OK);
    assert_int_equal(pt_value_append(layers, pt_value_int(3)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(model, "layers", layers), PT_OK);
    assert_int_equal(pt_value_dict_set_str(s0, "step", pt_value_int(5)), PT_OK);
    assert_int_equal(pt_value_dict_set_int(state, 0, s0), PT_OK);
    assert_int_equal(pt_value_dict_set_str(ab, "c", pt_value_int(6)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(a, "b.d", pt_value_int(7)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(root, "model", model), PT_OK);
    assert_int_equal(pt_value_dict_set_str(root, "state", state), PT_OK);
    assert_int_equal(pt_value_dict_set_str(root, "a.b", ab), PT_OK);
    assert_int_equal(pt_value_dict_set_str(root, "a", a), PT_OK);
    return root;
}

static int64_t path_int(const pt_value *root, const char *path)
{
    int64_t x = -1;
    assert_int_equal(pt_value_as_int(pt_value_path_ref(root, path), &x), PT_OK);
    return x;
}

static void test_path_lookup(void **state)
{
    (void)state;
    pt_tensor *t = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_value *root = path_tree(t);
    /* the longest dotted key wins: "fc1.weight" is one key */
    assert_ptr_equal(pt_value_tensor_ref(pt_value_path_ref(root, "model.fc1.weight")), t);
    /* backtracking: "fc1.bias" is not a key, so "fc1" then "bias" */
    assert_int_equal(path_int(root, "model.fc1.bias"), 1);
    /* "a.b" is a key but has no "d"; backtrack to "a" then "b.d" */
    assert_int_equal(path_int(root, "a.b.c"), 6);
    assert_int_equal(path_int(root, "a.b.d"), 7);
    /* list indices (negative from the end) and int dict keys */
    assert_int_equal(path_int(root, "model.layers.0.w"), 2);
    assert_int_equal(path_int(root, "model.layers.1"), 3);
    assert_int_equal(path_int(root, "model.layers.-1"), 3);
    assert_int_equal(path_int(root, "state.0.step"), 5);
    assert_ptr_equal(pt_value_path_ref(root, ""), root);

    /* errors name the first segment not found */
    assert_pt_error(pt_value_path_ref(root, "model.fc2.weight"), PT_ERR_INDEX,
                    "'fc2' not found (path 'model.fc2.weight')");
    assert_pt_error(pt_value_path_ref(root, "model.layers.2.w"), PT_ERR_INDEX, "'2' not found");
    assert_pt_error(pt_value_path_ref(root, "model.layers.x"), PT_ERR_INDEX, "'x' not found");
    assert_pt_error(pt_value_path_ref(root, "state.1.step"), PT_ERR_INDEX, "'1' not found");
    assert_pt_error(pt_value_path_ref(root, "model.fc1.weight.x"), PT_ERR_INDEX, "'x' not found");
    assert_pt_error(pt_value_path_ref(root, "nope"), PT_ERR_INDEX, "'nope' not found");
    assert_pt_error(pt_value_path_ref(NULL, "a"), PT_ERR_NULL, "root");
    assert_pt_error(pt_value_path_ref(root, NULL), PT_ERR_NULL, "path");

    /* explicit key lists do not split on dots */
    const char *keys[] = {"model", "fc1.weight"};
    assert_ptr_equal(pt_value_tensor_ref(pt_value_path_keys_ref(root, 2, keys)), t);
    const char *keys2[] = {"model", "layers", "0", "w"};
    int64_t x;
    assert_int_equal(pt_value_as_int(pt_value_path_keys_ref(root, 4, keys2), &x), PT_OK);
    assert_int_equal(x, 2);
    const char *keys3[] = {"state", "0", "step"};
    assert_int_equal(pt_value_as_int(pt_value_path_keys_ref(root, 3, keys3), &x), PT_OK);
    assert_int_equal(x, 5);
    const char *keys4[] = {"model", "fc1", "weight"};
    assert_pt_error(pt_value_path_keys_ref(root, 3, keys4), PT_ERR_INDEX, "key 'weight' (keys[2])");
    assert_ptr_equal(pt_value_path_keys_ref(root, 0, NULL), root);
    pt_release(t);
    pt_value_free(root);
}

static void test_copy_and_equal(void **state)
{
    (void)state;
    pt_tensor *t = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_value *root = path_tree(t);
    pt_value *c = pt_value_copy(root);
    assert_non_null(c);
    assert_true(pt_value_equal(root, c));
    char *s1 = pt_value_to_string(root, 0), *s2 = pt_value_to_string(c, 0);
    assert_string_equal(s1, s2);
    free(s1);
    free(s2);
    /* containers are new, tensors are shared */
    assert_ptr_not_equal(pt_value_path_ref(c, "model"), pt_value_path_ref(root, "model"));
    assert_ptr_equal(pt_value_tensor_ref(pt_value_path_ref(c, "model.fc1.weight")), t);
    /* mutating the copy leaves the original alone */
    assert_int_equal(pt_value_append(pt_value_path_ref(c, "model.layers"), pt_value_int(9)), PT_OK);
    assert_false(pt_value_equal(root, c));
    assert_int_equal(pt_value_len(pt_value_path_ref(root, "model.layers")), 2);
    assert_int_equal(pt_value_dict_set_str(pt_value_path_ref(c, "model"), "new", pt_value_none()),
                     PT_OK);
    assert_null(pt_value_path_ref(root, "model.new"));
    pt_clear_error();

    /* Python equality: numeric tower, dict order does not matter, list != tuple */
    pt_value *i1 = pt_value_int(1), *f1 = pt_value_float(1.0), *b1 = pt_value_bool(true);
    assert_true(pt_value_equal(i1, f1));
    assert_true(pt_value_equal(b1, f1));
    pt_value *nan = pt_value_float(NAN);
    assert_false(pt_value_equal(nan, nan)); /* nan != nan */
    pt_value *d1 = pt_value_dict(), *d2 = pt_value_dict();
    pt_value_dict_set_str(d1, "a", pt_value_int(1));
    pt_value_dict_set_str(d1, "b", pt_value_int(2));
    pt_value_dict_set_str(d2, "b", pt_value_float(2.0));
    pt_value_dict_set_str(d2, "a", pt_value_int(1));
    assert_true(pt_value_equal(d1, d2));
    pt_value_dict_set_str(d2, "a", pt_value_int(3));
    assert_false(pt_value_equal(d1, d2));
    pt_value *l = int_list(2);
    pt_value *tu = pt_value_tuple_of(2, (pt_value *[]){pt_value_int(0), pt_value_int(1)});
    assert_false(pt_value_equal(l, tu));
    pt_value *none1 = pt_value_none(), *none2 = pt_value_none();
    assert_true(pt_value_equal(none1, none2));
    assert_false(pt_value_equal(none1, i1));
    assert_false(pt_value_equal(NULL, i1));
    assert_pt_error(pt_value_copy(NULL), PT_ERR_NULL, "pt_value_copy");

    pt_value *items[] = {root, c, i1, f1, b1, nan, d1, d2, l, tu, none1, none2};
    for (size_t k = 0; k < sizeof items / sizeof *items; k++)
        pt_value_free(items[k]);
    pt_release(t);
}

static void test_to_string_matches_python_repr(void **state)
{
    (void)state;
    pt_tensor *t = pt_zeros(PT_SHAPE(10, 784), PT_FLOAT32, pt_cpu());
    pt_value *inner = pt_value_dict(), *root = pt_value_dict();
    pt_value_dict_set_str(inner, "fc.weight", pt_value_tensor(t));
    pt_value_dict_set_str(root, "model", inner);
    pt_value_dict_set_str(root, "epoch", pt_value_int(3));
    assert_repr(root, 0, "{'model': {'fc.weight': tensor(float32, [10, 784])}, 'epoch': 3}");
    pt_release(t);

    /* python3: repr([None, True, False, 0.1, 1.0, -0.0, 1e16, 1e-5, 0.0001,
     * 1234567890123456.0, 1.5e-7, 1e100, inf, -inf, nan, 2.5, 100.0, 1/3, -2**63]) */
    double fs[] = {0.1,    1.0,   -0.0,     1e16,      1e-5, 0.0001, 1234567890123456.0,
                   1.5e-7, 1e100, INFINITY, -INFINITY, NAN,  2.5,    100.0,
                   1.0 / 3};
    pt_value *l = pt_value_list();
    pt_value_append(l, pt_value_none());
    pt_value_append(l, pt_value_bool(true));
    pt_value_append(l, pt_value_bool(false));
    for (size_t k = 0; k < sizeof fs / sizeof *fs; k++)
        pt_value_append(l, pt_value_float(fs[k]));
    pt_value_append(l, pt_value_int(INT64_MIN));
    assert_repr(l, 0,
                "[None, True, False, 0.1, 1.0, -0.0, 1e+16, 1e-05, 0.0001, 1234567890123456.0, "
                "1.5e-07, 1e+100, inf, -inf, nan, 2.5, 100.0, 0.3333333333333333, "
                "-9223372036854775808]");
    /* python3: repr(1e22), repr(123456789.123), repr(5e-324), repr(1.7976931348623157e308) */
    double more[] = {1e22, 123456789.123, 5e-324, 1.7976931348623157e308};
    const char *more_repr[] = {"1e+22", "123456789.123", "5e-324", "1.7976931348623157e+308"};
    for (int k = 0; k < 4; k++) {
        pt_value *f = pt_value_float(more[k]);
        assert_repr(f, 0, more_repr[k]);
        pt_value_free(f);
    }

    /* python3: repr(["it's", 'say "hi"', 'both \' and "', 'tab\there\nnl\\', '\x01\x7f',
     * 'café', '\x85']) */
    const char *strs[] = {"it's",     "say \"hi\"",  "both ' and \"", "tab\there\nnl\\",
                          "\x01\x7f", "caf\xc3\xa9", "\xc2\x85"};
    pt_value *sl = pt_value_list();
    for (size_t k = 0; k < sizeof strs / sizeof *strs; k++)
        pt_value_append(sl, pt_value_str(strs[k]));
    assert_repr(sl, 0,
                "[\"it's\", 'say \"hi\"', 'both \\' and \"', 'tab\\there\\nnl\\\\', "
                "'\\x01\\x7f', 'caf\xc3\xa9', '\\x85']");
    /* python3: repr([b'', b'ab\x00\xff', b"it's", b'\t\\']) */
    pt_value *bl = pt_value_list();
    pt_value_append(bl, pt_value_bytes("", 0));
    pt_value_append(bl, pt_value_bytes("ab\0\xff", 4));
    pt_value_append(bl, pt_value_bytes("it's", 4));
    pt_value_append(bl, pt_value_bytes("\t\\", 2));
    assert_repr(bl, 0, "[b'', b'ab\\x00\\xff', b\"it's\", b'\\t\\\\']");

    /* python3: repr([]), repr({}), repr(()), repr([(1,), [()], {(1, 'a'): (2,)}]) */
    pt_value *e = pt_value_list(), *ed = pt_value_dict();
    assert_repr(e, 0, "[]");
    assert_repr(ed, 0, "{}");
    pt_value *nest = pt_value_list(), *inl = pt_value_list(), *nd = pt_value_dict();
    pt_value_append(nest, pt_value_tuple_of(1, (pt_value *[]){pt_value_int(1)}));
    pt_value_append(inl, pt_value_tuple());
    pt_value_append(nest, inl);
    pt_value_dict_set(nd, pt_value_tuple_of(2, (pt_value *[]){pt_value_int(1), pt_value_str("a")}),
                      pt_value_tuple_of(1, (pt_value *[]){pt_value_int(2)}));
    pt_value_append(nest, nd);
    assert_repr(nest, 0, "[(1,), [()], {(1, 'a'): (2,)}]");

    /* max_items elides longer containers (our extension; Python has none) */
    pt_value *big = int_list(10);
    assert_repr(big, 3, "[0, 1, 2, ...]");
    assert_repr(big, 10, "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]");
    assert_repr(root, 1, "{'model': {'fc.weight': tensor(float32, [10, 784])}, ...}");
    assert_pt_error(pt_value_to_string(NULL, 0), PT_ERR_NULL, "pt_value_to_string");

    pt_value *items[] = {root, l, sl, bl, e, ed, nest, big};
    for (size_t k = 0; k < sizeof items / sizeof *items; k++)
        pt_value_free(items[k]);
}

/* A chain [[[...]]] n lists deep; returns the outermost. */
static pt_value *deep_chain(int n)
{
    pt_value *v = pt_value_list();
    for (int i = 1; i < n; i++) {
        pt_value *outer = pt_value_list();
        assert_int_equal(pt_value_append(outer, v), PT_OK);
        v = outer;
    }
    return v;
}

static void test_deep_nesting(void **state)
{
    (void)state;
    /* 500 levels: every walk works (Python prints the same brackets) */
    pt_value *ok = deep_chain(500);
    char *s = pt_value_to_string(ok, 0);
    assert_non_null(s);
    assert_int_equal(strlen(s), 1000);
    assert_true(s[0] == '[' && s[499] == '[' && s[500] == ']');
    free(s);
    pt_value *okc = pt_value_copy(ok);
    assert_true(pt_value_equal(ok, okc));

    /* 100000 levels: recursive walks refuse with an error, free does not overflow the stack */
    pt_value *deep = deep_chain(100000);
    assert_pt_error(pt_value_to_string(deep, 0), PT_ERR_INVALID_ARG, "deeper than 1000 levels");
    assert_pt_error(pt_value_copy(deep), PT_ERR_INVALID_ARG, "deeper than 1000 levels");
    pt_value *deep2 = deep_chain(100000);
    assert_false(pt_value_equal(deep, deep2));
    assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
    assert_non_null(strstr(pt_last_error(), "deeper than 1000 levels"));
    pt_clear_error();
    /* deep dicts holding tensors free iteratively too and drop the tensor references */
    pt_tensor *t = pt_zeros(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    pt_value *dd = pt_value_tensor(t);
    pt_release(t);
    for (int i = 0; i < 100000; i++) {
        pt_value *outer = pt_value_dict();
        assert_int_equal(pt_value_dict_set_str(outer, "x", dd), PT_OK);
        dd = outer;
    }
    /* paths: 200 levels resolve; more than 1000 segments are refused up front */
    char *path = malloc(2 * 1001);
    for (size_t k = 0; k < 2 * 1001; k += 2) {
        path[k] = 'x';
        path[k + 1] = '.';
    }
    path[2 * 200 - 1] = '\0';
    const pt_value *at = pt_value_path_ref(dd, path);
    assert_non_null(at);
    const pt_value *mid = pt_value_path_ref(dd, "x.x.x.x.x.x.x.x.x.x");
    assert_ptr_equal(at, pt_value_path_ref(mid, path + 20));
    path[2 * 200 - 1] = '.';
    path[2 * 1001 - 1] = '\0';
    assert_pt_error(pt_value_path_ref(dd, path), PT_ERR_INVALID_ARG, "more than 1000");
    free(path);
    pt_value_free(ok);
    pt_value_free(okc);
    pt_value_free(deep);
    pt_value_free(deep2);
    pt_value_free(dd);
}

static void test_shared_items_and_refcounts(void **state)
{
    (void)state;
    /* one item in two containers: freeing one container keeps it alive in the other */
    pt_tensor *t = pt_zeros(PT_SHAPE(2, 2), PT_FLOAT64, pt_cpu());
    pt_value *tv = pt_value_tensor(t);
    pt_release(t);
    pt_value *a = pt_value_list(), *b = pt_value_dict();
    assert_int_equal(pt_value_append(a, pt_value_retain(tv)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(b, "w", tv), PT_OK);
    pt_value_free(a);
    assert_repr(b, 0, "{'w': tensor(float64, [2, 2])}");
    /* a key shared between a dict and a list */
    pt_value *key = pt_value_str("k"), *l = pt_value_list();
    assert_int_equal(pt_value_append(l, pt_value_retain(key)), PT_OK);
    assert_int_equal(pt_value_dict_set(b, key, pt_value_int(1)), PT_OK);
    pt_value_free(b);
    assert_repr(l, 0, "['k']");
    pt_value_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scalars, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_strings_and_bytes, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_tensor_values, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_lists_and_tuples, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dict_basics, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dict_python_key_equality, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dict_100000_keys, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_path_lookup, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_copy_and_equal, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_to_string_matches_python_repr, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_deep_nesting, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_shared_items_and_refcounts, pt_test_setup,
                                        pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
