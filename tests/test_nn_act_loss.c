/* Activation and loss module tests (nn_activation.h, nn_loss.h): forward outputs and input
 * gradients against PyTorch modules with the same options (tests/fixtures/gen/nn_act_loss.py),
 * PReLU's weight and its gradient, the weight/pos_weight buffers of the losses, PyTorch's
 * reprs (strings printed by torch 1.13), a Sequential of activations, and the error paths. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

#define F32_RTOL 1e-5
#define F32_ATOL 1e-6
#define F64_RTOL 1e-12
#define F64_ATOL 1e-12

static pt_tensor *getf(const char *fmt, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, fmt, name);
    return fx_get(fx, key);
}

/* ---- activations ----------------------------------------------------------------------------- */

typedef struct {
    const char *name;  /* fixture prefix act.<name> */
    const char *input; /* act.<input> */
} act_case;

/* The module torch's gen script builds under `name`, with the same options. */
static pt_module *make_act(const char *name)
{
    static const struct {
        const char *name;
        pt_module *(*make0)(void);
    } plain[] = {
        {"relu", pt_nn_relu},           {"relu6", pt_nn_relu6},
        {"selu", pt_nn_selu},           {"silu", pt_nn_silu},
        {"mish", pt_nn_mish},           {"hardsigmoid", pt_nn_hardsigmoid},
        {"hardswish", pt_nn_hardswish}, {"sigmoid", pt_nn_sigmoid},
        {"tanh", pt_nn_tanh},           {"log_sigmoid", pt_nn_log_sigmoid},
        {"softsign", pt_nn_softsign},   {"tanhshrink", pt_nn_tanhshrink},
        {"softmax2d", pt_nn_softmax2d},
    };
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        if (strcmp(name, plain[i].name) == 0)
            return plain[i].make0();
    if (!strcmp(name, "leaky_relu"))
        return pt_nn_leaky_relu(0.01);
    if (!strcmp(name, "leaky_relu_02"))
        return pt_nn_leaky_relu(0.2);
    if (!strcmp(name, "elu"))
        return pt_nn_elu(1.0);
    if (!strcmp(name, "elu_05"))
        return pt_nn_elu(0.5);
    if (!strcmp(name, "celu"))
        return pt_nn_celu(1.0);
    if (!strcmp(name, "celu_07"))
        return pt_nn_celu(0.7);
    if (!strcmp(name, "gelu"))
        return pt_nn_gelu(PT_GELU_NONE);
    if (!strcmp(name, "gelu_tanh"))
        return pt_nn_gelu(PT_GELU_TANH);
    if (!strcmp(name, "softplus"))
        return pt_nn_softplus(1.0, 20.0);
    if (!strcmp(name, "softplus_2_1"))
        return pt_nn_softplus(2.0, 1.0);
    if (!strcmp(name, "hardtanh"))
        return pt_nn_hardtanh(-1.0, 1.0);
    if (!strcmp(name, "hardtanh_m2_3"))
        return pt_nn_hardtanh(-2.0, 3.0);
    if (!strcmp(name, "threshold"))
        return pt_nn_threshold(0.1, 20.0);
    if (!strcmp(name, "softshrink"))
        return pt_nn_softshrink(0.5);
    if (!strcmp(name, "softshrink_1"))
        return pt_nn_softshrink(1.0);
    if (!strcmp(name, "hardshrink"))
        return pt_nn_hardshrink(0.5);
    if (!strcmp(name, "hardshrink_1"))
        return pt_nn_hardshrink(1.0);
    if (!strcmp(name, "prelu"))
        return pt_nn_prelu(1, 0.25);
    if (!strcmp(name, "prelu3"))
        return pt_nn_prelu(3, 0.1);
    if (!strcmp(name, "glu"))
        return pt_nn_glu(-1);
    if (!strcmp(name, "glu0"))
        return pt_nn_glu(0);
    if (!strcmp(name, "softmax"))
        return pt_nn_softmax(1);
    if (!strcmp(name, "softmax_neg"))
        return pt_nn_softmax(-1);
    if (!strcmp(name, "log_softmax"))
        return pt_nn_log_softmax(1);
    if (!strcmp(name, "softmin"))
        return pt_nn_softmin(1);
    fail_msg("no module for %s", name);
    return NULL;
}

static const act_case act_cases[] = {
    {"relu", "x"},          {"relu6", "x"},       {"leaky_relu", "x"},   {"leaky_relu_02", "x"},
    {"elu", "x"},           {"elu_05", "x"},      {"selu", "x"},         {"celu", "x"},
    {"celu_07", "x"},       {"gelu", "x"},        {"gelu_tanh", "x"},    {"silu", "x"},
    {"mish", "x"},          {"softplus", "x"},    {"softplus_2_1", "x"}, {"hardtanh", "x"},
    {"hardtanh_m2_3", "x"}, {"hardsigmoid", "x"}, {"hardswish", "x"},    {"sigmoid", "x"},
    {"tanh", "x"},          {"log_sigmoid", "x"}, {"softsign", "x"},     {"tanhshrink", "x"},
    {"threshold", "x"},     {"softshrink", "x"},  {"softshrink_1", "x"}, {"hardshrink", "x"},
    {"hardshrink_1", "x"},  {"prelu", "x"},       {"prelu3", "x"},       {"glu", "x6"},
    {"glu0", "x6"},         {"softmax", "x"},     {"softmax_neg", "x"},  {"log_softmax", "x"},
    {"softmin", "x"},       {"softmax2d", "x4"},
};

/* Runs one activation case: output, input gradient and (PReLU) weight gradient vs torch. */
static void check_act(const act_case *c, bool noncontig)
{
    pt_module *m = make_act(c->name);
    assert_non_null(m);
    if (!strncmp(c->name, "prelu", 5)) {
        pt_tensor *w = pt_nn_param_ref(m, "weight");
        /* the module's own init must equal torch's before we load torch's values */
        if (!strcmp(c->name, "prelu"))
            assert_tensor_close(w, getf("act.%s.w", c->name), 0, 0);
        pt_no_grad_begin(); /* as torch.no_grad(): copying into a leaf is not recorded */
        pt_status st = pt_copy_(w, getf("act.%s.w", c->name));
        pt_no_grad_end();
        assert_int_equal(st, PT_OK);
    }
    pt_tensor *x0 = getf("act.%s", c->input);
    pt_tensor *x = noncontig ? pt_test_noncontig(x0) : x0;
    pt_set_requires_grad(x, true);
    pt_tensor *y = pt_nn_forward(m, x);
    assert_tensor_close(y, getf("act.%s.y", c->name), F32_RTOL, F32_ATOL);
    assert_int_equal(pt_backward(y, getf("act.%s.g", c->name), false, false), PT_OK);
    assert_tensor_close(pt_grad(x), getf("act.%s.dx", c->name), F32_RTOL, F32_ATOL);
    if (!strncmp(c->name, "prelu", 5))
        assert_tensor_close(pt_grad(pt_nn_param_ref(m, "weight")), getf("act.%s.dw", c->name),
                            F32_RTOL, F32_ATOL);
    pt_nn_free(m);
}

static void test_activations_match_torch(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(act_cases) / sizeof(act_cases[0]); i++) {
        print_message("  %s\n", act_cases[i].name);
        check_act(&act_cases[i], false);
    }
}

static void test_activations_noncontiguous(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(act_cases) / sizeof(act_cases[0]); i++)
        check_act(&act_cases[i], true);
}

/* NaN, the option boundaries (|x| == lambd, x == threshold) and large |x| give torch's values
 * for the activations composed of several ops. softshrink's are checked in
 * test_ops_hardening.c: this fixture's come from PyTorch 1.13, whose softshrink turned NaN
 * into 0 (2.x keeps it). */
static void test_activation_edge_values(void **state)
{
    (void)state;
    static const char *const names[] = {"threshold",   "hardshrink", "softsign",
                                        "log_sigmoid", "tanhshrink", "celu_07",
                                        "prelu",       "hardtanh",   "softplus_2_1"};
    pt_tensor *x = fx_get(fx, "act.edge");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        print_message("  %s\n", names[i]);
        pt_module *m = make_act(names[i]);
        assert_tensor_close(pt_nn_forward(m, x), getf("act.edge.%s", names[i]), F32_RTOL, F32_ATOL);
        pt_nn_free(m);
    }
}

static void test_activation_float64(void **state)
{
    (void)state;
    pt_module *m = pt_nn_gelu(PT_GELU_TANH);
    pt_tensor *x = fx_get(fx, "act.f64.x");
    pt_set_requires_grad(x, true);
    pt_tensor *y = pt_nn_forward(m, x);
    assert_tensor_close(y, fx_get(fx, "act.f64.gelu_tanh"), F64_RTOL, F64_ATOL);
    pt_tensor *s = pt_sum(y);
    assert_int_equal(pt_backward(s, NULL, false, false), PT_OK);
    assert_tensor_close(pt_grad(x), fx_get(fx, "act.f64.gelu_tanh_dx"), F64_RTOL, F64_ATOL);
    pt_nn_free(m);
}

static void test_prelu_parameter(void **state)
{
    (void)state;
    pt_module *m = pt_nn_prelu(3, 0.1);
    const char **names = NULL;
    pt_tensor **params = NULL;
    assert_int_equal(pt_nn_named_parameters(m, &names, &params), 1);
    assert_string_equal(names[0], "weight");
    assert_shape(params[0], 3);
    assert_true(pt_requires_grad(params[0]));
    assert_int_equal(pt_dtype_of(params[0]), PT_FLOAT32);
    for (int i = 0; i < 3; i++)
        assert_float_equal(pt_test_get(params[0], i), 0.1f, 0.0);
    free(names);
    free(params);
    assert_int_equal(pt_nn_num_direct_buffers(m), 0);
    pt_nn_free(m);
}

static void test_sequential_of_activations(void **state)
{
    (void)state;
    pt_module *kids[3] = {pt_nn_leaky_relu(0.1), pt_nn_tanh(), pt_nn_softmax(1)};
    pt_module *seq = pt_nn_sequential(3, kids);
    assert_non_null(seq);
    char *s = pt_nn_to_string(seq);
    assert_string_equal(s, "Sequential(\n"
                           "  (0): LeakyReLU(negative_slope=0.1)\n"
                           "  (1): Tanh()\n"
                           "  (2): Softmax(dim=1)\n"
                           ")");
    free(s);
    pt_tensor *x = fx_get(fx, "seq.x");
    pt_set_requires_grad(x, true);
    pt_tensor *y = pt_nn_forward(seq, x);
    assert_tensor_close(y, fx_get(fx, "seq.y"), F32_RTOL, F32_ATOL);
    assert_int_equal(pt_backward(y, fx_get(fx, "seq.g"), false, false), PT_OK);
    assert_tensor_close(pt_grad(x), fx_get(fx, "seq.dx"), F32_RTOL, F32_ATOL);
    assert_int_equal(pt_nn_num_parameters(seq), 0);
    pt_nn_free(seq);
}

/* ---- reprs ----------------------------------------------------------------------------------- */

static void check_repr(pt_module *m, const char *expected)
{
    assert_non_null(m);
    char *s = pt_nn_to_string(m);
    assert_non_null(s);
    assert_string_equal(s, expected);
    free(s);
    pt_nn_free(m);
}

/* Every expected string below was printed by torch 1.13 for the same module and options. */
static void test_reprs(void **state)
{
    (void)state;
    check_repr(pt_nn_relu(), "ReLU()");
    check_repr(pt_nn_relu6(), "ReLU6()");
    check_repr(pt_nn_leaky_relu(0.01), "LeakyReLU(negative_slope=0.01)");
    check_repr(pt_nn_leaky_relu(0.2), "LeakyReLU(negative_slope=0.2)");
    check_repr(pt_nn_leaky_relu(1e-16), "LeakyReLU(negative_slope=1e-16)");
    check_repr(pt_nn_elu(1.0), "ELU(alpha=1.0)");
    check_repr(pt_nn_elu(-2.5), "ELU(alpha=-2.5)");
    check_repr(pt_nn_selu(), "SELU()");
    check_repr(pt_nn_celu(1.0), "CELU(alpha=1.0)");
    check_repr(pt_nn_celu(0.5), "CELU(alpha=0.5)");
    check_repr(pt_nn_gelu(PT_GELU_NONE), "GELU(approximate='none')");
    check_repr(pt_nn_gelu(PT_GELU_TANH), "GELU(approximate='tanh')");
    check_repr(pt_nn_silu(), "SiLU()");
    check_repr(pt_nn_mish(), "Mish()");
    check_repr(pt_nn_softplus(1, 20), "Softplus(beta=1, threshold=20)");
    check_repr(pt_nn_softplus(2, 10), "Softplus(beta=2, threshold=10)");
    check_repr(pt_nn_hardtanh(-1.0, 1.0), "Hardtanh(min_val=-1.0, max_val=1.0)");
    check_repr(pt_nn_hardtanh(-2.0, 3.0), "Hardtanh(min_val=-2.0, max_val=3.0)");
    check_repr(pt_nn_hardtanh(-0.3, 100.0), "Hardtanh(min_val=-0.3, max_val=100.0)");
    check_repr(pt_nn_hardsigmoid(), "Hardsigmoid()");
    check_repr(pt_nn_hardswish(), "Hardswish()");
    check_repr(pt_nn_sigmoid(), "Sigmoid()");
    check_repr(pt_nn_tanh(), "Tanh()");
    check_repr(pt_nn_log_sigmoid(), "LogSigmoid()");
    check_repr(pt_nn_softsign(), "Softsign()");
    check_repr(pt_nn_tanhshrink(), "Tanhshrink()");
    check_repr(pt_nn_threshold(0.1, 20.0), "Threshold(threshold=0.1, value=20.0)");
    check_repr(pt_nn_threshold(1234.5, -0.001), "Threshold(threshold=1234.5, value=-0.001)");
    check_repr(pt_nn_softshrink(0.5), "Softshrink(0.5)");
    check_repr(pt_nn_softshrink(0.3), "Softshrink(0.3)");
    check_repr(pt_nn_softshrink(1e-5), "Softshrink(1e-05)");
    check_repr(pt_nn_hardshrink(0.5), "Hardshrink(0.5)");
    check_repr(pt_nn_prelu(1, 0.25), "PReLU(num_parameters=1)");
    check_repr(pt_nn_prelu(3, 0.1), "PReLU(num_parameters=3)");
    check_repr(pt_nn_glu(-1), "GLU(dim=-1)");
    check_repr(pt_nn_glu(0), "GLU(dim=0)");
    check_repr(pt_nn_softmax(1), "Softmax(dim=1)");
    check_repr(pt_nn_softmax(-1), "Softmax(dim=-1)");
    check_repr(pt_nn_log_softmax(1), "LogSoftmax(dim=1)");
    check_repr(pt_nn_softmin(1), "Softmin(dim=1)");
    check_repr(pt_nn_softmax2d(), "Softmax2d()");

    check_repr(pt_nn_cross_entropy_loss(NULL), "CrossEntropyLoss()");
    check_repr(pt_nn_cross_entropy_loss(&(pt_cross_entropy_loss_opts){.label_smoothing = 0.1}),
               "CrossEntropyLoss()");
    check_repr(pt_nn_nll_loss(NULL), "NLLLoss()");
    check_repr(pt_nn_mse_loss(PT_REDUCTION_MEAN), "MSELoss()");
    check_repr(pt_nn_mse_loss(PT_REDUCTION_SUM), "MSELoss()");
    check_repr(pt_nn_l1_loss(PT_REDUCTION_MEAN), "L1Loss()");
    check_repr(pt_nn_smooth_l1_loss(PT_REDUCTION_MEAN, 1.0), "SmoothL1Loss()");
    check_repr(pt_nn_smooth_l1_loss(PT_REDUCTION_MEAN, 0.5), "SmoothL1Loss()");
    check_repr(pt_nn_huber_loss(PT_REDUCTION_MEAN, 1.0), "HuberLoss()");
    check_repr(pt_nn_bce_loss(NULL, PT_REDUCTION_MEAN), "BCELoss()");
    check_repr(pt_nn_bce_with_logits_loss(NULL, PT_REDUCTION_MEAN, NULL), "BCEWithLogitsLoss()");
    check_repr(pt_nn_kl_div_loss(PT_REDUCTION_MEAN, false), "KLDivLoss()");
    check_repr(pt_nn_kl_div_loss(PT_REDUCTION_BATCHMEAN, true), "KLDivLoss()");
}

/* ---- losses ---------------------------------------------------------------------------------- */

/* The loss module torch's gen script builds under `name` (weights from the fixture). */
static pt_module *make_loss(const char *name)
{
    if (!strcmp(name, "ce") || !strcmp(name, "ce_prob") || !strcmp(name, "ce_3d"))
        return pt_nn_cross_entropy_loss(NULL);
    if (!strcmp(name, "ce_w_ign_sum"))
        return pt_nn_cross_entropy_loss(
            &(pt_cross_entropy_loss_opts){.weight = getf("loss.%s.weight", name),
                                          .has_ignore_index = true,
                                          .ignore_index = 1,
                                          .reduction = PT_REDUCTION_SUM});
    if (!strcmp(name, "ce_smooth_w"))
        return pt_nn_cross_entropy_loss(&(pt_cross_entropy_loss_opts){
            .weight = getf("loss.%s.weight", name), .label_smoothing = 0.1});
    if (!strcmp(name, "ce_none"))
        return pt_nn_cross_entropy_loss(
            &(pt_cross_entropy_loss_opts){.reduction = PT_REDUCTION_NONE});
    if (!strcmp(name, "nll"))
        return pt_nn_nll_loss(NULL);
    if (!strcmp(name, "nll_w"))
        return pt_nn_nll_loss(&(pt_nll_loss_module_opts){.weight = getf("loss.%s.weight", name)});
    if (!strcmp(name, "nll_none_ign"))
        return pt_nn_nll_loss(&(pt_nll_loss_module_opts){
            .has_ignore_index = true, .ignore_index = 3, .reduction = PT_REDUCTION_NONE});
    if (!strcmp(name, "mse"))
        return pt_nn_mse_loss(PT_REDUCTION_MEAN);
    if (!strcmp(name, "mse_sum"))
        return pt_nn_mse_loss(PT_REDUCTION_SUM);
    if (!strcmp(name, "mse_none"))
        return pt_nn_mse_loss(PT_REDUCTION_NONE);
    if (!strcmp(name, "l1"))
        return pt_nn_l1_loss(PT_REDUCTION_MEAN);
    if (!strcmp(name, "l1_sum"))
        return pt_nn_l1_loss(PT_REDUCTION_SUM);
    if (!strcmp(name, "smooth_l1"))
        return pt_nn_smooth_l1_loss(PT_REDUCTION_MEAN, 1.0);
    if (!strcmp(name, "smooth_l1_b05"))
        return pt_nn_smooth_l1_loss(PT_REDUCTION_MEAN, 0.5);
    if (!strcmp(name, "huber"))
        return pt_nn_huber_loss(PT_REDUCTION_MEAN, 1.0);
    if (!strcmp(name, "huber_d05_sum"))
        return pt_nn_huber_loss(PT_REDUCTION_SUM, 0.5);
    if (!strcmp(name, "bce"))
        return pt_nn_bce_loss(NULL, PT_REDUCTION_MEAN);
    if (!strcmp(name, "bce_w"))
        return pt_nn_bce_loss(getf("loss.%s.weight", name), PT_REDUCTION_MEAN);
    if (!strcmp(name, "bce_none"))
        return pt_nn_bce_loss(NULL, PT_REDUCTION_NONE);
    if (!strcmp(name, "bcel"))
        return pt_nn_bce_with_logits_loss(NULL, PT_REDUCTION_MEAN, NULL);
    if (!strcmp(name, "bcel_w_pw"))
        return pt_nn_bce_with_logits_loss(getf("loss.%s.weight", name), PT_REDUCTION_MEAN,
                                          getf("loss.%s.pos_weight", name));
    if (!strcmp(name, "bcel_pw_sum"))
        return pt_nn_bce_with_logits_loss(NULL, PT_REDUCTION_SUM, getf("loss.%s.pos_weight", name));
    if (!strcmp(name, "kl"))
        return pt_nn_kl_div_loss(PT_REDUCTION_MEAN, false);
    if (!strcmp(name, "kl_batchmean"))
        return pt_nn_kl_div_loss(PT_REDUCTION_BATCHMEAN, false);
    if (!strcmp(name, "kl_log_sum"))
        return pt_nn_kl_div_loss(PT_REDUCTION_SUM, true);
    fail_msg("no loss for %s", name);
    return NULL;
}

static const char *const loss_cases[] = {
    "ce",  "ce_w_ign_sum", "ce_smooth_w",  "ce_none",       "ce_prob",   "ce_3d",
    "nll", "nll_w",        "nll_none_ign", "mse",           "mse_sum",   "mse_none",
    "l1",  "l1_sum",       "smooth_l1",    "smooth_l1_b05", "huber",     "huber_d05_sum",
    "bce", "bce_w",        "bce_none",     "bcel",          "bcel_w_pw", "bcel_pw_sum",
    "kl",  "kl_batchmean", "kl_log_sum",
};

/* One loss case through pt_nn_loss (or pt_nn_forward_n): loss and input gradient vs torch. */
static void check_loss(const char *name, bool use_forward_n)
{
    pt_module *m = make_loss(name);
    assert_non_null(m);
    pt_tensor *x = getf("loss.%s.input", name);
    pt_tensor *t = getf("loss.%s.target", name);
    pt_set_requires_grad(x, true);
    pt_tensor *out = NULL;
    if (use_forward_n) {
        const pt_tensor *in[2] = {x, t};
        assert_int_equal(pt_nn_forward_n(m, 2, in, 1, &out), PT_OK);
    } else {
        out = pt_nn_loss(m, x, t);
    }
    assert_tensor_close(out, getf("loss.%s.out", name), F32_RTOL, F32_ATOL);
    assert_int_equal(pt_backward(out, getf("loss.%s.g", name), false, false), PT_OK);
    assert_tensor_close(pt_grad(x), getf("loss.%s.dx", name), F32_RTOL, F32_ATOL);
    pt_nn_free(m);
}

static void test_losses_match_torch(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(loss_cases) / sizeof(loss_cases[0]); i++) {
        print_message("  %s\n", loss_cases[i]);
        check_loss(loss_cases[i], false);
    }
}

static void test_losses_forward_n(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(loss_cases) / sizeof(loss_cases[0]); i++)
        check_loss(loss_cases[i], true);
}

/* Weights are buffers named as PyTorch's (weight, then pos_weight), the same tensor objects,
 * held by the module (the state dict itself is not implemented on this branch yet). */
static void test_loss_weight_buffers(void **state)
{
    (void)state;
    pt_tensor *w = fx_get(fx, "loss.bcel_w_pw.weight");
    pt_tensor *pw = fx_get(fx, "loss.bcel_w_pw.pos_weight");
    pt_module *m = pt_nn_bce_with_logits_loss(w, PT_REDUCTION_MEAN, pw);
    const char **names = NULL;
    pt_tensor **bufs = NULL;
    assert_int_equal(pt_nn_named_buffers(m, &names, &bufs), 2);
    assert_string_equal(names[0], "weight");
    assert_string_equal(names[1], "pos_weight");
    assert_ptr_equal(bufs[0], w);
    assert_ptr_equal(bufs[1], pw);
    free(names);
    free(bufs);
    assert_int_equal(pt_nn_num_parameters(m), 0);
    pt_nn_free(m);

    /* pos_weight alone is registered alone */
    m = pt_nn_bce_with_logits_loss(NULL, PT_REDUCTION_SUM, pw);
    assert_int_equal(pt_nn_named_buffers(m, &names, NULL), 1);
    assert_string_equal(names[0], "pos_weight");
    free(names);
    pt_nn_free(m);

    pt_tensor *w4 = fx_get(fx, "loss.ce_smooth_w.weight");
    m = pt_nn_cross_entropy_loss(&(pt_cross_entropy_loss_opts){.weight = w4});
    assert_ptr_equal(pt_nn_buffer_ref(m, "weight"), w4);
    pt_nn_free(m);
    /* the caller's reference outlives the module */
    assert_true(pt_numel(w4) == 4);

    m = pt_nn_nll_loss(NULL);
    assert_int_equal(pt_nn_num_direct_buffers(m), 0);
    pt_nn_free(m);
}

/* The loss reads its weight buffer at each call: new values written into the buffer (as
 * load_state_dict does, in place) change the loss as in PyTorch. */
static void test_loss_weight_updated_in_place(void **state)
{
    (void)state;
    pt_tensor *ones = pt_ones(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    pt_module *m = pt_nn_cross_entropy_loss(
        &(pt_cross_entropy_loss_opts){.weight = ones, .label_smoothing = 0.1});
    pt_release(ones);
    pt_no_grad_begin();
    pt_status st = pt_copy_(pt_nn_buffer_ref(m, "weight"), fx_get(fx, "loss.ce_smooth_w.weight"));
    pt_no_grad_end();
    assert_int_equal(st, PT_OK);
    pt_tensor *out =
        pt_nn_loss(m, fx_get(fx, "loss.ce_smooth_w.input"), fx_get(fx, "loss.ce_smooth_w.target"));
    assert_tensor_close(out, fx_get(fx, "loss.ce_smooth_w.out"), F32_RTOL, F32_ATOL);
    pt_nn_free(m);
}

/* pt_nn_to_dtype converts the weight buffers with the module (module.double() in PyTorch):
 * the float64 loss on float64 inputs matches torch's float32 result to float32 precision. */
static void test_loss_to_float64(void **state)
{
    (void)state;
    pt_module *m = make_loss("bcel_w_pw");
    assert_int_equal(pt_nn_to_dtype(m, PT_FLOAT64), PT_OK);
    assert_int_equal(pt_dtype_of(pt_nn_buffer_ref(m, "weight")), PT_FLOAT64);
    assert_int_equal(pt_dtype_of(pt_nn_buffer_ref(m, "pos_weight")), PT_FLOAT64);
    pt_tensor *x = pt_to_dtype(fx_get(fx, "loss.bcel_w_pw.input"), PT_FLOAT64);
    pt_tensor *t = pt_to_dtype(fx_get(fx, "loss.bcel_w_pw.target"), PT_FLOAT64);
    pt_tensor *out = pt_nn_loss(m, x, t);
    assert_non_null(out);
    assert_int_equal(pt_dtype_of(out), PT_FLOAT64);
    assert_tensor_close_any_dtype(out, fx_get(fx, "loss.bcel_w_pw.out"), F32_RTOL, F32_ATOL);
    pt_nn_free(m);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void test_wrong_input_counts(void **state)
{
    (void)state;
    pt_tensor *x = pt_ones(PT_SHAPE(2, 3), PT_FLOAT32, pt_cpu());
    pt_module *loss = pt_nn_mse_loss(PT_REDUCTION_MEAN);
    assert_pt_error(pt_nn_forward(loss, x), PT_ERR_INVALID_ARG,
                    "MSELoss takes 2 inputs (input, target) and gives 1 output (got 1 and 1)");
    const pt_tensor *three[3] = {x, x, x};
    pt_tensor *outs[2] = {NULL, NULL};
    assert_pt_status_error(pt_nn_forward_n(loss, 3, three, 1, outs), PT_ERR_INVALID_ARG,
                           "got 3 and 1");
    assert_pt_status_error(pt_nn_forward_n(loss, 2, three, 2, outs), PT_ERR_INVALID_ARG,
                           "got 2 and 2");
    assert_null(outs[0]);
    assert_pt_error(pt_nn_loss(loss, x, NULL), PT_ERR_NULL, "target");
    assert_pt_error(pt_nn_loss(loss, NULL, x), PT_ERR_NULL, "input");
    assert_pt_error(pt_nn_loss(NULL, x, x), PT_ERR_NULL, "module is NULL");
    pt_nn_free(loss);

    pt_module *act = pt_nn_relu();
    assert_pt_status_error(pt_nn_forward_n(act, 2, three, 1, outs), PT_ERR_INVALID_ARG,
                           "ReLU takes 1 input");
    assert_pt_error(pt_nn_forward(act, NULL), PT_ERR_NULL, "x");
    pt_nn_free(act);
}

static void test_constructor_errors(void **state)
{
    (void)state;
    assert_pt_error(pt_nn_mse_loss(PT_REDUCTION_BATCHMEAN), PT_ERR_INVALID_ARG,
                    "batchmean is not a valid value for reduction");
    assert_pt_error(pt_nn_l1_loss((pt_reduction)17), PT_ERR_INVALID_ARG, "bad reduction");
    assert_pt_error(pt_nn_cross_entropy_loss(&(pt_cross_entropy_loss_opts){.label_smoothing = 1.5}),
                    PT_ERR_INVALID_ARG, "label_smoothing must be between 0.0 and 1.0");
    assert_pt_error(pt_nn_smooth_l1_loss(PT_REDUCTION_MEAN, -1.0), PT_ERR_INVALID_ARG,
                    "beta must not be negative");
    assert_pt_error(pt_nn_huber_loss(PT_REDUCTION_MEAN, 0.0), PT_ERR_INVALID_ARG,
                    "delta must be positive");
    pt_tensor *iw = pt_ones(PT_SHAPE(4), PT_INT64, pt_cpu());
    assert_pt_error(pt_nn_nll_loss(&(pt_nll_loss_module_opts){.weight = iw}), PT_ERR_DTYPE,
                    "weight must be a floating-point tensor");
    assert_pt_error(pt_nn_bce_with_logits_loss(NULL, PT_REDUCTION_MEAN, iw), PT_ERR_DTYPE,
                    "pos_weight must be a floating-point tensor");
    assert_pt_error(pt_nn_celu(0.0), PT_ERR_INVALID_ARG, "alpha must not be 0");
    assert_pt_error(pt_nn_hardtanh(1.0, -1.0), PT_ERR_INVALID_ARG,
                    "max_val (-1) must be greater than min_val (1)");
    assert_pt_error(pt_nn_softshrink(-0.5), PT_ERR_INVALID_ARG, "lambd must be greater or equal");
    assert_pt_error(pt_nn_prelu(0, 0.25), PT_ERR_INVALID_ARG, "num_parameters must be >= 1");
    assert_pt_error(pt_nn_gelu((pt_gelu_approximate)5), PT_ERR_INVALID_ARG, "bad approximate");
}

static void test_forward_errors(void **state)
{
    (void)state;
    pt_tensor *x23 = pt_ones(PT_SHAPE(2, 3), PT_FLOAT32, pt_cpu());
    pt_module *m = pt_nn_glu(-1);
    assert_pt_error(pt_nn_forward(m, x23), PT_ERR_SHAPE,
                    "halving dimension must be even, but dimension 1 is size 3");
    pt_nn_free(m);
    m = pt_nn_glu(2);
    assert_pt_error(pt_nn_forward(m, x23), PT_ERR_INDEX, "dim 2 out of range");
    pt_nn_free(m);
    m = pt_nn_prelu(3, 0.25);
    pt_tensor *x24 = pt_ones(PT_SHAPE(2, 4), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_nn_forward(m, x24), PT_ERR_SHAPE, "num_parameters = 3, channel size = 4");
    pt_tensor *x3 = pt_ones(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_nn_forward(m, x3), PT_ERR_SHAPE, "num_parameters = 3, channel size = 1");
    pt_nn_free(m);
    m = pt_nn_softmax2d();
    assert_pt_error(pt_nn_forward(m, x23), PT_ERR_SHAPE, "expected a 3D or 4D input, got 2D");
    pt_nn_free(m);
    m = pt_nn_softmax(5);
    assert_null(pt_nn_forward(m, x23));
    assert_int_equal(pt_last_status(), PT_ERR_INDEX);
    pt_clear_error();
    pt_nn_free(m);
    m = pt_nn_gelu(PT_GELU_NONE);
    pt_tensor *xi = pt_ones(PT_SHAPE(2), PT_INT64, pt_cpu());
    assert_null(pt_nn_forward(m, xi));
    assert_int_equal(pt_last_status(), PT_ERR_DTYPE);
    pt_clear_error();
    pt_nn_free(m);
    m = pt_nn_threshold(0.0, 1.0);
    assert_pt_error(pt_nn_forward(m, NULL), PT_ERR_NULL, "x");
    pt_nn_free(m);
    /* a loss's op errors come through the module */
    m = pt_nn_mse_loss(PT_REDUCTION_MEAN);
    assert_pt_error(pt_nn_loss(m, x23, x24), PT_ERR_SHAPE, "");
    pt_nn_free(m);
    m = pt_nn_cross_entropy_loss(NULL);
    pt_tensor *bad = pt_full(PT_SHAPE(2), 7, PT_INT64, pt_cpu());
    assert_pt_error(pt_nn_loss(m, x23, bad), PT_ERR_INDEX, "7");
    pt_nn_free(m);
}

/* A PReLU with one parameter keeps a 0-dim input 0-dim (the weight broadcasts as a scalar). */
static void test_prelu_scalar_input(void **state)
{
    (void)state;
    pt_module *m = pt_nn_prelu(1, 0.25);
    pt_tensor *x = pt_scalar_tensor(-2.0, PT_FLOAT32, pt_cpu());
    pt_tensor *y = pt_nn_forward(m, x);
    assert_non_null(y);
    assert_int_equal(pt_ndim(y), 0);
    assert_float_equal(pt_test_get(y, 0), -0.5, 0.0);
    pt_nn_free(m);
}

/* PyTorch 2.x has no integer or bool kernel for CELU (elu_cpu), GLU, Hardshrink and Softshrink
 * and no bool kernel for Threshold ("... not implemented for 'Long'"); integer Threshold works. */
static void test_integer_inputs_refused(void **state)
{
    (void)state;
    pt_tensor *xi = pt_ones(PT_SHAPE(2, 2), PT_INT64, pt_cpu());
    pt_tensor *xu = pt_ones(PT_SHAPE(2, 2), PT_UINT8, pt_cpu());
    pt_tensor *xb = pt_ones(PT_SHAPE(2, 2), PT_BOOL, pt_cpu());
    pt_tensor *xs[3] = {xi, xu, xb};
    struct {
        pt_module *m;
        const char *name;
    } mods[4] = {{pt_nn_celu(1.0), "CELU: dtype"},
                 {pt_nn_glu(-1), "GLU: dtype"},
                 {pt_nn_hardshrink(0.5), "Hardshrink: dtype"},
                 {pt_nn_softshrink(0.5), "Softshrink: dtype"}};
    for (int k = 0; k < 4; k++) {
        for (int j = 0; j < 3; j++)
            assert_pt_error(pt_nn_forward(mods[k].m, xs[j]), PT_ERR_DTYPE, mods[k].name);
        pt_nn_free(mods[k].m);
    }
    pt_module *th = pt_nn_threshold(1.0, 20.0);
    assert_pt_error(pt_nn_forward(th, xb), PT_ERR_DTYPE, "Threshold: dtype bool is not supported");
    pt_tensor *yi = pt_nn_forward(th, xi); /* torch: int64 in, int64 out, 1 <= 1 -> 20 */
    assert_non_null(yi);
    assert_int_equal(pt_dtype_of(yi), PT_INT64);
    pt_tensor *want = pt_full(PT_SHAPE(2, 2), 20, PT_INT64, pt_cpu());
    assert_tensor_equal(yi, want);
    pt_nn_free(th);
    pt_release(yi);
    pt_release(want);
    pt_release(xi);
    pt_release(xu);
    pt_release(xb);
}

int main(void)
{
    fx = fx_open("nn_act_loss");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_integer_inputs_refused, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_activations_match_torch, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_activations_noncontiguous, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_activation_edge_values, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_activation_float64, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_prelu_parameter, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_prelu_scalar_input, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_sequential_of_activations, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_reprs, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_losses_match_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_losses_forward_n, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_loss_weight_buffers, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_loss_weight_updated_in_place, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_loss_to_float64, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_input_counts, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_constructor_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_forward_errors, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
