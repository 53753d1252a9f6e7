/* Tests of the nn module base: registration, PyTorch-order listings and state-dict keys,
 * dotted lookup, hooks, train/eval, in-place dtype moves, apply, repr, load_state_dict errors
 * (worded like PyTorch's; the expected strings were printed by torch 1.13 for the same
 * module tree), and the containers. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ---- a user-defined module: y = x * w (+ count buffer, non-persistent tmp) ------------------- */

/* Sets a parameter as torch.no_grad(): p.fill_(v) (filling a leaf that requires grad is an
 * error while grad mode is on, as in PyTorch). */
static void fill_param(pt_tensor *p, double v)
{
    pt_no_grad_begin();
    assert_int_equal(pt_fill_(p, v), PT_OK);
    pt_no_grad_end();
}

static pt_tensor *scale_forward(pt_module *self, const pt_tensor *x)
{
    return pt_mul(x, pt_nn_direct_param_ref(self, 0, NULL));
}

static void scale_extra_repr(const pt_module *self, char *buf, size_t cap)
{
    (void)self;
    snprintf(buf, cap, "n=3");
}

static int train_calls;
static void scale_on_train(pt_module *self, bool on)
{
    (void)self;
    (void)on;
    train_calls++;
}

static const pt_module_def scale_def = {.type_name = "Scale",
                                        .forward = scale_forward,
                                        .extra_repr = scale_extra_repr,
                                        .on_train = scale_on_train};

static pt_module *scale_new(void)
{
    pt_module *m = pt_nn_module_new(&scale_def, NULL);
    pt_tensor *w = pt_ones(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_tensor *count = pt_zeros(PT_SHAPE(1), PT_FLOAT32, pt_cpu());
    pt_tensor *tmp = pt_zeros(PT_SHAPE(1), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_nn_register_parameter(m, "w", w), PT_OK);
    assert_int_equal(pt_nn_register_buffer(m, "count", count, true), PT_OK);
    assert_int_equal(pt_nn_register_buffer(m, "tmp", tmp, false), PT_OK);
    pt_release(w);
    pt_release(count);
    pt_release(tmp);
    return m;
}

static const pt_module_def net_def = {.type_name = "Net"};

/* Net(bias, body = Sequential(Scale, Scale), head = Scale), as in the torch script. */
static pt_module *net_new(void)
{
    pt_module *net = pt_nn_module_new(&net_def, NULL);
    pt_tensor *bias = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_nn_register_parameter(net, "bias", bias), PT_OK);
    pt_release(bias);
    pt_module *body = pt_nn_sequential(2, (pt_module *[]){scale_new(), scale_new()});
    assert_int_equal(pt_nn_add(net, "body", body), PT_OK);
    assert_int_equal(pt_nn_add(net, "head", scale_new()), PT_OK);
    return net;
}

static void test_named_parameters_order(void **state)
{
    (void)state;
    pt_module *net = net_new();
    const char **names;
    pt_tensor **params;
    int n = pt_nn_named_parameters(net, &names, &params);
    assert_int_equal(n, 4);
    const char *want[] = {"bias", "body.0.w", "body.1.w", "head.w"};
    for (int i = 0; i < n; i++) {
        assert_string_equal(names[i], want[i]);
        assert_ptr_equal(params[i], pt_nn_param_ref(net, want[i]));
        assert_true(pt_requires_grad(params[i]));
    }
    free(names);
    free(params);
    assert_int_equal(pt_nn_num_parameters(net), 12);
    pt_tensor **bufs;
    assert_int_equal(pt_nn_named_buffers(net, &names, &bufs), 6); /* non-persistent included */
    assert_string_equal(names[1], "body.0.tmp");
    free(names);
    free(bufs);
    pt_nn_free(net);
}

static void test_shared_parameter_listed_once(void **state)
{
    (void)state;
    pt_module *a = scale_new();
    pt_tensor *w = pt_nn_param_ref(a, "w");
    assert_int_equal(pt_nn_register_parameter(a, "w2", w), PT_OK);
    assert_int_equal(pt_nn_parameters(a, NULL), 1);
    pt_value *sd = pt_nn_state_dict(a);
    assert_int_equal(pt_value_len(sd), 3); /* w, w2, count: state_dict keeps both names */
    pt_value_free(sd);
    pt_nn_free(a);
}

static void test_registration_errors(void **state)
{
    (void)state;
    pt_module *m = scale_new();
    pt_tensor *t = pt_zeros(PT_SHAPE(2), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_nn_register_parameter(m, "w", t), PT_ERR_INVALID_ARG,
                           "already has a member named \"w\"");
    assert_pt_status_error(pt_nn_register_buffer(m, "a.b", t, true), PT_ERR_INVALID_ARG, "no '.'");
    pt_tensor *ti = pt_zeros(PT_SHAPE(2), PT_INT64, pt_cpu());
    assert_pt_status_error(pt_nn_register_parameter(m, "i", ti), PT_ERR_DTYPE, "floating point");
    pt_tensor *y = pt_mul_scalar(pt_nn_param_ref(m, "w"), 2.0);
    assert_pt_status_error(pt_nn_register_parameter(m, "y", y), PT_ERR_INVALID_ARG, "not a leaf");
    assert_pt_status_error(pt_nn_add(m, "count", scale_new()), PT_ERR_INVALID_ARG, "already has");
    assert_pt_status_error(pt_nn_add(m, "c", NULL), PT_ERR_NULL, "NULL");
    pt_release(t);
    pt_release(ti);
    pt_release(y);
    pt_nn_free(m);
}

static void test_lookup_paths(void **state)
{
    (void)state;
    pt_module *net = net_new();
    assert_non_null(pt_nn_child_ref(net, "body.1"));
    assert_string_equal(pt_nn_type_name(pt_nn_child_ref(net, "body")), "Sequential");
    assert_non_null(pt_nn_buffer_ref(net, "head.count"));
    assert_pt_error(pt_nn_param_ref(net, "body.2.w"), PT_ERR_INDEX, "no parameter \"body.2.w\"");
    assert_pt_error(pt_nn_buffer_ref(net, "head.w"), PT_ERR_INDEX, "no buffer \"head.w\"");
    assert_pt_error(pt_nn_child_ref(net, "tail"), PT_ERR_INDEX, "no submodule \"tail\"");
    const char *name;
    assert_non_null(pt_nn_child_at(net, 1, &name));
    assert_string_equal(name, "head");
    assert_null(pt_nn_child_at(net, 2, NULL));
    pt_nn_free(net);
}

static void test_sequential_forward_and_backward(void **state)
{
    (void)state;
    pt_module *net = net_new();
    pt_module *body = pt_nn_child_ref(net, "body");
    fill_param(pt_nn_param_ref(net, "body.0.w"), 2.0);
    fill_param(pt_nn_param_ref(net, "body.1.w"), 3.0);
    pt_tensor *x = pt_arange(0, 3, 1, PT_FLOAT32, pt_cpu());
    pt_tensor *y = pt_nn_forward(body, x);
    pt_tensor *want = pt_mul_scalar(x, 6.0);
    assert_tensor_equal(y, want);
    pt_tensor *s = pt_sum(y);
    assert_int_equal(pt_backward(s, NULL, false, false), PT_OK);
    pt_tensor *g = pt_grad(pt_nn_param_ref(net, "body.0.w"));
    pt_tensor *gwant = pt_mul_scalar(x, 3.0);
    assert_tensor_equal(g, gwant);
    pt_nn_zero_grad(net);
    assert_null(pt_grad(pt_nn_param_ref(net, "body.0.w")));
    pt_release(g);
    pt_release(gwant);
    pt_release(s);
    pt_release(y);
    pt_release(want);
    /* a container without forward, an empty Sequential */
    assert_pt_error(pt_nn_forward(net, x), PT_ERR_UNSUPPORTED, "has no forward");
    pt_module *empty = pt_nn_sequential(0, NULL);
    pt_tensor *same = pt_nn_forward(empty, x);
    assert_tensor_equal(same, x);
    pt_release(same);
    pt_nn_free(empty);
    pt_release(x);
    pt_nn_free(net);
}

/* ---- hooks --------------------------------------------------------------------------------- */

static int pre_calls;
static pt_status pre_hook(pt_module *m, int n_in, const pt_tensor *const *in, void *user)
{
    (void)m;
    (void)in;
    pre_calls++;
    assert_int_equal(n_in, 1);
    return *(bool *)user ? PT_ERR_RUNTIME : PT_OK;
}

static pt_status double_hook(pt_module *m, int n_in, const pt_tensor *const *in, int n_out,
                             pt_tensor **out, void *user)
{
    (void)m;
    (void)n_in;
    (void)in;
    (void)user;
    pt_tensor *d = pt_mul_scalar(out[0], 2.0);
    pt_release(out[0]);
    out[0] = d;
    return d ? PT_OK : pt_last_status();
}

static void test_forward_hooks(void **state)
{
    (void)state;
    pt_module *m = scale_new();
    bool abort_call = false;
    int h1 = pt_nn_register_forward_pre_hook(m, pre_hook, &abort_call);
    int h2 = pt_nn_register_forward_hook(m, double_hook, NULL);
    assert_true(h1 > 0 && h2 > 0 && h1 != h2);
    pt_tensor *x = pt_ones(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_tensor *y = pt_nn_forward(m, x);
    assert_int_equal(pre_calls, 1);
    assert_float_equal(pt_item(pt_sum(y)), 6.0, 0);
    pt_release(y);
    abort_call = true;
    assert_null(pt_nn_forward(m, x));
    pt_clear_error();
    assert_int_equal(pt_nn_remove_hook(m, h1), PT_OK);
    assert_int_equal(pt_nn_remove_hook(m, h2), PT_OK);
    assert_pt_status_error(pt_nn_remove_hook(m, h2), PT_ERR_INDEX, "no hook");
    y = pt_nn_forward(m, x);
    assert_float_equal(pt_item(pt_sum(y)), 3.0, 0);
    assert_int_equal(pre_calls, 2);
    pt_release(y);
    pt_release(x);
    pt_nn_free(m);
}

/* ---- modes, dtype moves, apply ----------------------------------------------------------------
 */

static void test_train_eval(void **state)
{
    (void)state;
    pt_module *net = net_new();
    train_calls = 0;
    assert_true(pt_nn_is_training(pt_nn_child_ref(net, "body.1")));
    pt_nn_eval(net);
    assert_false(pt_nn_is_training(net));
    assert_false(pt_nn_is_training(pt_nn_child_ref(net, "body.1")));
    assert_int_equal(train_calls, 3);
    pt_nn_eval(net);
    assert_int_equal(train_calls, 3); /* no change, no callback */
    pt_nn_train(net, true);
    assert_true(pt_nn_is_training(pt_nn_child_ref(net, "head")));
    pt_nn_free(net);
}

static void test_to_dtype_keeps_tensor_identity(void **state)
{
    (void)state;
    pt_module *net = net_new();
    pt_tensor *w = pt_nn_param_ref(net, "head.w");
    fill_param(w, 1.5);
    pt_tensor *g = pt_full(PT_SHAPE(3), 0.25, PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_set_grad(w, g), PT_OK);
    pt_release(g);
    assert_int_equal(pt_nn_to_dtype(net, PT_FLOAT64), PT_OK);
    assert_ptr_equal(pt_nn_param_ref(net, "head.w"), w);
    assert_int_equal(pt_dtype_of(w), PT_FLOAT64);
    assert_int_equal(pt_dtype_of(pt_nn_buffer_ref(net, "head.count")), PT_FLOAT64);
    assert_float_equal(pt_test_get(w, 2), 1.5, 0);
    g = pt_grad(w);
    assert_int_equal(pt_dtype_of(g), PT_FLOAT64);
    assert_float_equal(pt_test_get(g, 0), 0.25, 0);
    pt_release(g);
    assert_true(pt_requires_grad(w));
    assert_int_equal(pt_nn_to(net, pt_cpu()), PT_OK);
    assert_pt_status_error(pt_nn_to_dtype(net, PT_INT32), PT_ERR_DTYPE, "floating-point");
    pt_nn_free(net);
}

static int visit_pos;
static char visit_order[8][16];
static pt_status record_visit(pt_module *m, void *user)
{
    (void)user;
    snprintf(visit_order[visit_pos++], 16, "%s", pt_nn_type_name(m));
    return visit_pos == *(int *)user ? PT_ERR_RUNTIME : PT_OK;
}

static void test_apply_children_first(void **state)
{
    (void)state;
    pt_module *net = net_new();
    int stop_at = 99;
    visit_pos = 0;
    assert_int_equal(pt_nn_apply(net, record_visit, &stop_at), PT_OK);
    assert_int_equal(visit_pos, 5);
    const char *want[] = {"Scale", "Scale", "Sequential", "Scale", "Net"};
    for (int i = 0; i < 5; i++)
        assert_string_equal(visit_order[i], want[i]);
    stop_at = 2;
    visit_pos = 0;
    assert_int_equal(pt_nn_apply(net, record_visit, &stop_at), PT_ERR_RUNTIME);
    assert_int_equal(visit_pos, 2);
    pt_nn_free(net);
}

static void test_repr_matches_torch(void **state)
{
    (void)state;
    pt_module *net = net_new();
    char *s = pt_nn_to_string(net);
    assert_string_equal(s, "Net(\n  (body): Sequential(\n    (0): Scale(n=3)\n    (1): Scale(n=3)\n"
                           "  )\n  (head): Scale(n=3)\n)");
    free(s);
    pt_nn_free(net);
}

/* ---- state dict -------------------------------------------------------------------------------
 */

static void test_state_dict_keys_and_sharing(void **state)
{
    (void)state;
    pt_module *net = net_new();
    pt_value *sd = pt_nn_state_dict(net);
    const char *want[] = {"bias",         "body.0.w", "body.0.count", "body.1.w",
                          "body.1.count", "head.w",   "head.count"};
    assert_int_equal(pt_value_len(sd), 7);
    for (int i = 0; i < 7; i++)
        assert_string_equal(pt_value_as_str(pt_value_key_ref(sd, i), NULL), want[i]);
    pt_tensor *t = pt_value_tensor_ref(pt_value_get_str_ref(sd, "head.w"));
    assert_false(pt_requires_grad(t));
    pt_fill_(t, 7.0); /* shares storage with the parameter */
    assert_float_equal(pt_test_get(pt_nn_param_ref(net, "head.w"), 1), 7.0, 0);
    pt_value_free(sd);
    pt_nn_free(net);
}

static void test_load_state_dict_roundtrip(void **state)
{
    (void)state;
    pt_module *a = net_new(), *b = net_new();
    fill_param(pt_nn_param_ref(a, "body.1.w"), 4.0);
    pt_fill_(pt_nn_buffer_ref(a, "head.count"), 9.0);
    pt_value *sd = pt_nn_state_dict(a);
    pt_tensor *w = pt_nn_param_ref(b, "body.1.w");
    assert_int_equal(pt_nn_load_state_dict(b, sd, true), PT_OK);
    assert_ptr_equal(pt_nn_param_ref(b, "body.1.w"), w);
    assert_float_equal(pt_test_get(w, 0), 4.0, 0);
    assert_float_equal(pt_test_get(pt_nn_buffer_ref(b, "head.count"), 0), 9.0, 0);
    assert_true(pt_requires_grad(w));
    assert_true(pt_is_leaf(w));
    pt_value_free(sd);
    pt_nn_free(a);
    pt_nn_free(b);
}

static void test_load_state_dict_errors_like_torch(void **state)
{
    (void)state;
    pt_module *net = net_new();
    pt_value *sd = pt_value_dict();
    pt_tensor *z4 = pt_zeros(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    pt_tensor *z1 = pt_zeros(PT_SHAPE(1), PT_FLOAT32, pt_cpu());
    pt_value_dict_set_str(sd, "bias", pt_value_tensor(z4));
    pt_value_dict_set_str(sd, "x", pt_value_tensor(z1));
    fill_param(pt_nn_param_ref(net, "bias"), 5.0);
    pt_status st = pt_nn_load_state_dict(net, sd, true);
    assert_int_equal(st, PT_ERR_INVALID_ARG);
    assert_string_equal(
        pt_last_error(),
        "Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: \"body.0.w\", "
        "\"body.0.count\", \"body.1.w\", \"body.1.count\", \"head.w\", \"head.count\". \n\t"
        "Unexpected key(s) in state_dict: \"x\". \n\tsize mismatch for bias: copying a param "
        "with shape torch.Size([4]) from checkpoint, the shape in current model is "
        "torch.Size([3]).");
    pt_clear_error();
    assert_float_equal(pt_test_get(pt_nn_param_ref(net, "bias"), 0), 5.0, 0); /* unchanged */
    /* non-strict: missing/unexpected are fine, the size mismatch is still an error */
    assert_int_equal(pt_nn_load_state_dict(net, sd, false), PT_ERR_INVALID_ARG);
    assert_null(strstr(pt_last_error(), "Missing"));
    pt_clear_error();
    pt_value_dict_set_str(sd, "bias", pt_value_int(3));
    assert_pt_status_error(pt_nn_load_state_dict(net, sd, false), PT_ERR_INVALID_ARG,
                           "expected a tensor but the state_dict holds a int");
    pt_value_dict_del_str(sd, "bias");
    assert_int_equal(pt_nn_load_state_dict(net, sd, false), PT_OK);
    assert_pt_status_error(pt_nn_load_state_dict(net, NULL, true), PT_ERR_INVALID_ARG,
                           "expected a dict");
    pt_release(z4);
    pt_release(z1);
    pt_value_free(sd);
    pt_nn_free(net);
}

static void test_module_dict_and_list(void **state)
{
    (void)state;
    pt_module *d = pt_nn_module_dict(2, (const char *[]){"enc", "dec"},
                                     (pt_module *[]){scale_new(), scale_new()});
    const char **names;
    assert_int_equal(pt_nn_named_parameters(d, &names, NULL), 2);
    assert_string_equal(names[0], "enc.w");
    assert_string_equal(names[1], "dec.w");
    free(names);
    pt_module *l = pt_nn_module_list(1, (pt_module *[]){d});
    assert_int_equal(pt_nn_sequential_append(l, scale_new()), PT_OK);
    assert_int_equal(pt_nn_named_parameters(l, &names, NULL), 3);
    assert_string_equal(names[2], "1.w");
    free(names);
    /* a NULL child fails and frees the others */
    pt_clear_error();
    assert_pt_error(pt_nn_sequential(2, (pt_module *[]){scale_new(), NULL}), PT_ERR_NULL, "NULL");
    pt_nn_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_named_parameters_order, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_shared_parameter_listed_once, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_registration_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_lookup_paths, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_sequential_forward_and_backward, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_forward_hooks, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_train_eval, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_to_dtype_keeps_tensor_identity, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_apply_children_first, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_repr_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_state_dict_keys_and_sharing, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_load_state_dict_roundtrip, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_load_state_dict_errors_like_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_module_dict_and_list, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
