/* Recurrent module tests: nn.RNN / LSTM / GRU and the cells against PyTorch fixtures
 * (tests/fixtures/gen/nn_rnn.py) with torch's weights copied into the module: outputs, final
 * states and the gradients of the input, the initial states and every parameter. Also parameter
 * names, shapes and order, initialization bounds, dropout between layers, repr, and errors. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pt_fixture *fx;

/* float64 runs compare to torch's float64 to rounding; float32 runs differ by summation order
 * inside the matmuls and the recurrence (a few ulp growing over the steps). */
#define F64_RTOL 1e-10
#define F64_ATOL 1e-12
#define F32_RTOL 1e-5
#define F32_ATOL 1e-5

static pt_tensor *getf(const char *c, const char *what)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", c, what);
    return fx_get(fx, key);
}

/* ---- module makers, one per fixture case ----------------------------------------------------- */

enum { I = 4, H = 6 };

static pt_module *mk_lstm1(void)
{
    return pt_nn_lstm(I, H, NULL);
}
static pt_module *mk_lstm2(void)
{
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.num_layers = 2;
    return pt_nn_lstm(I, H, &o);
}
static pt_module *mk_lstm_bi_bf(void)
{
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.num_layers = 2;
    o.bidirectional = true;
    o.batch_first = true;
    return pt_nn_lstm(I, H, &o);
}
static pt_module *mk_lstm_bi_nobias(void)
{
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.bias = false;
    o.bidirectional = true;
    return pt_nn_lstm(I, H, &o);
}
static pt_module *mk_gru1(void)
{
    return pt_nn_gru(I, H, NULL);
}
static pt_module *mk_gru2_bi(void)
{
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.num_layers = 2;
    o.bidirectional = true;
    return pt_nn_gru(I, H, &o);
}
static pt_module *mk_gru_nobias_bf(void)
{
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.bias = false;
    o.batch_first = true;
    return pt_nn_gru(I, H, &o);
}
static pt_module *mk_rnn_tanh_bi_bf(void)
{
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.bidirectional = true;
    o.batch_first = true;
    return pt_nn_rnn(I, H, &o);
}
static pt_module *mk_rnn_relu2(void)
{
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.num_layers = 2;
    o.nonlinearity = PT_RNN_RELU;
    return pt_nn_rnn(I, H, &o);
}
static pt_module *mk_rnn_relu(void)
{
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.nonlinearity = PT_RNN_RELU;
    return pt_nn_rnn(I, H, &o);
}
static pt_module *mk_lstm_cell(void)
{
    return pt_nn_lstm_cell(I, H, true);
}
static pt_module *mk_gru_cell(void)
{
    return pt_nn_gru_cell(I, H, true);
}
static pt_module *mk_gru_cell_nobias(void)
{
    return pt_nn_gru_cell(I, H, false);
}
static pt_module *mk_rnn_cell_relu(void)
{
    return pt_nn_rnn_cell(I, H, true, PT_RNN_RELU);
}
static pt_module *mk_rnn_cell(void)
{
    return pt_nn_rnn_cell(I, H, true, PT_RNN_TANH);
}

typedef struct {
    const char *name;
    pt_module *(*make)(void);
    int n_states; /* h0 [, c0] given as inputs */
    int n_out;    /* outputs torch returned (all compared) */
    bool f32;
} rnn_case;

/* Copies torch's parameters into m (by torch's names, which must all exist in the fixture). */
static void load_params(pt_module *m, const char *c)
{
    const char **names = NULL;
    pt_tensor **ps = NULL;
    int n = pt_nn_named_parameters(m, &names, &ps);
    assert_true(n > 0);
    pt_no_grad_begin(); /* torch: with torch.no_grad(): p.copy_(...) */
    for (int k = 0; k < n; k++) {
        char key[128];
        snprintf(key, sizeof key, "p.%s", names[k]);
        assert_int_equal(pt_copy_(ps[k], getf(c, key)), PT_OK);
    }
    pt_no_grad_end();
    free(names);
    free(ps);
}

static void check_param_grads(pt_module *m, const char *c, double rtol, double atol)
{
    const char **names = NULL;
    pt_tensor **ps = NULL;
    int n = pt_nn_named_parameters(m, &names, &ps);
    for (int k = 0; k < n; k++) {
        char key[128];
        snprintf(key, sizeof key, "g.%s", names[k]);
        pt_tensor *g = pt_grad(ps[k]);
        assert_non_null(g);
        assert_tensor_close(g, getf(c, key), rtol, atol);
        pt_release(g);
    }
    free(names);
    free(ps);
}

static void run_case(const rnn_case *c)
{
    double rtol = c->f32 ? F32_RTOL : F64_RTOL, atol = c->f32 ? F32_ATOL : F64_ATOL;
    pt_module *m = c->make();
    assert_non_null(m);
    if (!c->f32)
        assert_int_equal(pt_nn_to_dtype(m, PT_FLOAT64), PT_OK);
    load_params(m, c->name);
    pt_tensor *in[3] = {getf(c->name, "x"), NULL, NULL};
    for (int k = 0; k < c->n_states; k++)
        in[k + 1] = getf(c->name, k ? "s1" : "s0");
    for (int k = 0; k <= c->n_states; k++)
        assert_int_equal(pt_requires_grad_(in[k], true), PT_OK);
    pt_tensor *out[3] = {NULL, NULL, NULL};
    assert_int_equal(
        pt_nn_forward_n(m, 1 + c->n_states, (const pt_tensor *const *)in, c->n_out, out), PT_OK);
    pt_tensor *loss = NULL;
    for (int k = 0; k < c->n_out; k++) {
        char key[16];
        snprintf(key, sizeof key, "out%d", k);
        assert_tensor_close(out[k], getf(c->name, key), rtol, atol);
        snprintf(key, sizeof key, "w%d", k);
        pt_tensor *term = pt_sum(pt_mul(out[k], getf(c->name, key)));
        loss = loss ? pt_add(loss, term) : term;
    }
    assert_int_equal(pt_backward(loss, NULL, false, false), PT_OK);
    assert_tensor_close(pt_grad(in[0]), getf(c->name, "gx"), rtol, atol);
    for (int k = 0; k < c->n_states; k++)
        assert_tensor_close(pt_grad(in[k + 1]), getf(c->name, k ? "gs1" : "gs0"), rtol, atol);
    check_param_grads(m, c->name, rtol, atol);
    /* pt_nn_forward gives the first output alone */
    if (c->n_states == 0)
        assert_tensor_close(pt_nn_forward(m, in[0]), getf(c->name, "out0"), rtol, atol);
    pt_nn_free(m);
}

static void test_lstm_matches_torch(void **state)
{
    (void)state;
    const rnn_case cases[] = {
        {"lstm1", mk_lstm1, 0, 3, false},
        {"lstm1_f32", mk_lstm1, 0, 3, true},
        {"lstm2_h0", mk_lstm2, 2, 3, false},
        {"lstm_bi_bf", mk_lstm_bi_bf, 2, 3, false},
        {"lstm_bi_nobias", mk_lstm_bi_nobias, 0, 3, false},
        {"lstm_unbatched", mk_lstm2, 2, 3, false},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        run_case(&cases[k]);
}

static void test_gru_matches_torch(void **state)
{
    (void)state;
    const rnn_case cases[] = {
        {"gru1", mk_gru1, 0, 2, false},
        {"gru2_bi_h0", mk_gru2_bi, 1, 2, false},
        {"gru_nobias_bf", mk_gru_nobias_bf, 1, 2, false},
        {"gru1_f32", mk_gru1, 0, 2, true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        run_case(&cases[k]);
}

static void test_rnn_matches_torch(void **state)
{
    (void)state;
    const rnn_case cases[] = {
        {"rnn_tanh_bi_bf", mk_rnn_tanh_bi_bf, 0, 2, false},
        {"rnn_relu2_h0", mk_rnn_relu2, 1, 2, false},
        {"rnn_relu_unbatched", mk_rnn_relu, 0, 2, false},
        {"rnn_relu2_f32", mk_rnn_relu2, 0, 2, true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        run_case(&cases[k]);
}

static void test_cells_match_torch(void **state)
{
    (void)state;
    const rnn_case cases[] = {
        {"lstm_cell", mk_lstm_cell, 2, 2, false},
        {"lstm_cell_noh", mk_lstm_cell, 0, 2, false},
        {"gru_cell", mk_gru_cell, 1, 1, false},
        {"gru_cell_unbatched", mk_gru_cell_nobias, 1, 1, false},
        {"rnn_cell_relu", mk_rnn_cell_relu, 1, 1, false},
        {"rnn_cell_noh", mk_rnn_cell, 0, 1, false},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        run_case(&cases[k]);
}

/* LSTM with h0 but no c0 (zeros, as torch given an explicit zero c0), and a non-contiguous x. */
static void test_lstm_h0_only_noncontig(void **state)
{
    (void)state;
    const char *c = "lstm_h0_only";
    pt_module *m = mk_lstm1();
    assert_int_equal(pt_nn_to_dtype(m, PT_FLOAT64), PT_OK);
    load_params(m, c);
    pt_tensor *x = pt_test_noncontig(getf(c, "x")), *h0 = getf(c, "s0");
    assert_false(pt_is_contiguous(x));
    pt_set_requires_grad(x, true);
    pt_set_requires_grad(h0, true);
    const pt_tensor *in[3] = {x, h0, NULL};
    pt_tensor *out[3];
    assert_int_equal(pt_nn_forward_n(m, 3, in, 3, out), PT_OK);
    pt_tensor *loss = NULL;
    for (int k = 0; k < 3; k++) {
        char key[16];
        snprintf(key, sizeof key, "out%d", k);
        assert_tensor_close(out[k], getf(c, key), F64_RTOL, F64_ATOL);
        snprintf(key, sizeof key, "w%d", k);
        pt_tensor *term = pt_sum(pt_mul(out[k], getf(c, key)));
        loss = loss ? pt_add(loss, term) : term;
    }
    assert_int_equal(pt_backward(loss, NULL, false, false), PT_OK);
    assert_tensor_close(pt_grad(x), getf(c, "gx"), F64_RTOL, F64_ATOL);
    assert_tensor_close(pt_grad(h0), getf(c, "gs0"), F64_RTOL, F64_ATOL);
    check_param_grads(m, c, F64_RTOL, F64_ATOL);
    pt_nn_free(m);
}

/* ---- parameters ------------------------------------------------------------------------------ */

/* Names and order as torch's named_parameters() lists them; shapes from the fixture. */
static void test_parameter_names_and_shapes(void **state)
{
    (void)state;
    pt_module *m = mk_lstm_bi_bf();
    const char *want[] = {
        "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
        "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
        "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
        "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse",
    };
    const char **names = NULL;
    pt_tensor **ps = NULL;
    int n = pt_nn_named_parameters(m, &names, &ps);
    assert_int_equal(n, 16);
    for (int k = 0; k < n; k++) {
        assert_string_equal(names[k], want[k]);
        char key[128];
        snprintf(key, sizeof key, "p.%s", want[k]);
        pt_tensor *ref = getf("lstm_bi_bf", key);
        assert_int_equal(pt_ndim(ps[k]), pt_ndim(ref));
        for (int d = 0; d < pt_ndim(ref); d++)
            assert_int_equal(pt_shape(ps[k])[d], pt_shape(ref)[d]);
        assert_int_equal(pt_dtype_of(ps[k]), PT_FLOAT32);
    }
    free(names);
    free(ps);
    pt_nn_free(m);

    /* no biases registered with bias=false; cells have unsuffixed names */
    m = mk_gru_nobias_bf();
    assert_int_equal(pt_nn_named_parameters(m, &names, NULL), 2);
    assert_string_equal(names[0], "weight_ih_l0");
    assert_string_equal(names[1], "weight_hh_l0");
    free(names);
    pt_nn_free(m);
    m = mk_gru_cell();
    assert_int_equal(pt_nn_named_parameters(m, &names, &ps), 4);
    const char *cell[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    for (int k = 0; k < 4; k++)
        assert_string_equal(names[k], cell[k]);
    assert_shape(ps[0], 3 * H, I);
    assert_shape(ps[1], 3 * H, H);
    assert_shape(ps[3], 3 * H);
    free(names);
    free(ps);
    pt_nn_free(m);
}

/* Every parameter uniform in [-1/sqrt(H), 1/sqrt(H)]: bounds hold, the range is used (min and
 * max near the bounds), mean ~ 0 and std ~ k/sqrt(3); a seed reproduces the values. */
static void test_init(void **state)
{
    (void)state;
    const int64_t hidden = 256;
    double k = 1.0 / sqrt((double)hidden);
    pt_manual_seed(7);
    pt_module *m = pt_nn_lstm(64, hidden, NULL);
    pt_manual_seed(7);
    pt_module *m2 = pt_nn_lstm(64, hidden, NULL);
    pt_tensor **ps = NULL, **ps2 = NULL;
    int n = pt_nn_parameters(m, &ps);
    assert_int_equal(pt_nn_parameters(m2, &ps2), n);
    for (int p = 0; p < n; p++) {
        int64_t cnt = pt_numel(ps[p]);
        double lo = 1e9, hi = -1e9, sum = 0, sq = 0;
        for (int64_t i = 0; i < cnt; i++) {
            double v = pt_test_get(ps[p], i);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += v;
            sq += v * v;
        }
        double mean = sum / (double)cnt, sd = sqrt(sq / (double)cnt - mean * mean);
        assert_true(lo >= -k && hi <= k);
        assert_true(lo < -0.95 * k && hi > 0.95 * k);
        /* the std of the mean is (k/sqrt(3))/sqrt(cnt): allow 5 of those */
        assert_true(fabs(mean) < 5 * k / sqrt(3.0 * (double)cnt));
        assert_true(fabs(sd - k / sqrt(3.0)) < 0.05 * k);
        assert_tensor_equal(ps[p], ps2[p]);
    }
    free(ps);
    free(ps2);
    pt_nn_free(m);
    pt_nn_free(m2);
}

/* ---- dropout, repr, no-grad ------------------------------------------------------------------ */

/* Dropout acts between layers in training only: eval matches torch's run without dropout;
 * dropout = 1 in training feeds zeros to layer 2, so its output no longer depends on x. */
static void test_dropout_between_layers(void **state)
{
    (void)state;
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.num_layers = 2;
    o.dropout = 1.0;
    pt_module *m = pt_nn_lstm(I, H, &o);
    assert_int_equal(pt_nn_to_dtype(m, PT_FLOAT64), PT_OK);
    load_params(m, "lstm2_h0");
    const pt_tensor *in[3] = {getf("lstm2_h0", "x"), getf("lstm2_h0", "s0"),
                              getf("lstm2_h0", "s1")};
    pt_tensor *out[3];
    pt_nn_eval(m);
    assert_int_equal(pt_nn_forward_n(m, 3, in, 3, out), PT_OK);
    assert_tensor_close(out[0], getf("lstm2_h0", "out0"), F64_RTOL, F64_ATOL);
    pt_nn_train(m, true);
    pt_tensor *y1 = NULL, *y2 = NULL;
    assert_int_equal(pt_nn_forward_n(m, 3, in, 1, &y1), PT_OK);
    const pt_tensor *in2[3] = {pt_mul_scalar(in[0], -3.0), in[1], in[2]};
    assert_int_equal(pt_nn_forward_n(m, 3, in2, 1, &y2), PT_OK);
    assert_tensor_equal(y1, y2);
    pt_nn_free(m);
}

static void test_repr(void **state)
{
    (void)state;
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.num_layers = 2;
    o.bias = false;
    o.dropout = 0.5;
    o.nonlinearity = PT_RNN_RELU;
    pt_module *m = pt_nn_rnn(3, 4, &o);
    char *s = pt_nn_to_string(m);
    assert_string_equal(s, "RNN(3, 4, num_layers=2, bias=False, dropout=0.5)");
    free(s);
    pt_nn_free(m);
    m = mk_lstm_bi_bf();
    s = pt_nn_to_string(m);
    assert_string_equal(s, "LSTM(4, 6, num_layers=2, batch_first=True, bidirectional=True)");
    free(s);
    pt_nn_free(m);
    m = pt_nn_rnn_cell(3, 4, false, PT_RNN_RELU);
    s = pt_nn_to_string(m);
    assert_string_equal(s, "RNNCell(3, 4, bias=False, nonlinearity=relu)");
    free(s);
    pt_nn_free(m);
}

/* Under no_grad nothing is recorded and the results are the same. */
static void test_no_grad(void **state)
{
    (void)state;
    pt_module *m = mk_gru2_bi();
    assert_int_equal(pt_nn_to_dtype(m, PT_FLOAT64), PT_OK);
    load_params(m, "gru2_bi_h0");
    const pt_tensor *in[2] = {getf("gru2_bi_h0", "x"), getf("gru2_bi_h0", "s0")};
    pt_tensor *out[2];
    pt_no_grad_begin();
    pt_status st = pt_nn_forward_n(m, 2, in, 2, out);
    pt_no_grad_end();
    assert_int_equal(st, PT_OK);
    assert_false(pt_requires_grad(out[0]));
    assert_tensor_close(out[0], getf("gru2_bi_h0", "out0"), F64_RTOL, F64_ATOL);
    assert_tensor_close(out[1], getf("gru2_bi_h0", "out1"), F64_RTOL, F64_ATOL);
    pt_nn_free(m);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void test_constructor_errors(void **state)
{
    (void)state;
    assert_pt_error(pt_nn_lstm(0, 4, NULL), PT_ERR_INVALID_ARG, "input_size and hidden_size");
    pt_rnn_opts zero = {0};
    assert_pt_error(pt_nn_lstm(3, 4, &zero), PT_ERR_INVALID_ARG, "num_layers must be in 1..64");
    pt_rnn_opts o = PT_RNN_DEFAULTS;
    o.dropout = 1.5;
    assert_pt_error(pt_nn_gru(3, 4, &o), PT_ERR_INVALID_ARG, "dropout should be a number");
    o = PT_RNN_DEFAULTS;
    o.proj_size = 2;
    assert_pt_error(pt_nn_lstm(3, 4, &o), PT_ERR_UNSUPPORTED, "proj_size is not supported");
    o = PT_RNN_DEFAULTS;
    o.nonlinearity = PT_RNN_RELU;
    assert_pt_error(pt_nn_lstm(3, 4, &o), PT_ERR_INVALID_ARG, "nonlinearity is only for RNN");
    assert_pt_error(pt_nn_gru_cell(3, -1, true), PT_ERR_INVALID_ARG, "hidden_size");
}

static void test_forward_errors(void **state)
{
    (void)state;
    pt_module *m = mk_lstm2();
    pt_tensor *x4 = pt_zeros(PT_SHAPE(2, 3, 4, 1), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_nn_forward(m, x4), PT_ERR_SHAPE,
                    "LSTM: Expected input to be 2-D or 3-D but received 4-D tensor");
    pt_tensor *x = pt_zeros(PT_SHAPE(5, 3, 7), PT_FLOAT32, pt_cpu());
    assert_pt_error(pt_nn_forward(m, x), PT_ERR_SHAPE,
                    "input.size(-1) must be equal to input_size. Expected 4, got 7");
    x = pt_zeros(PT_SHAPE(5, 3, 4), PT_FLOAT32, pt_cpu());
    pt_tensor *h = pt_zeros(PT_SHAPE(2, 2, 6), PT_FLOAT32, pt_cpu());
    const pt_tensor *in[3] = {x, h, NULL};
    pt_tensor *out[4]; /* room for the n_out = 4 call below */
    assert_pt_status_error(pt_nn_forward_n(m, 2, in, 1, out), PT_ERR_SHAPE,
                           "Expected hx[0] size (2, 3, 6), got [2, 2, 6]");
    in[1] = pt_zeros(PT_SHAPE(2, 6), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_nn_forward_n(m, 2, in, 1, out), PT_ERR_SHAPE,
                           "for batched 3-D input, hx[0] should also be 3-D but got 2-D");
    in[1] = NULL;
    in[2] = pt_zeros(PT_SHAPE(2, 3, 5), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_nn_forward_n(m, 3, in, 1, out), PT_ERR_SHAPE,
                           "Expected hx[1] size (2, 3, 6), got [2, 3, 5]");
    assert_pt_status_error(pt_nn_forward_n(m, 1, in, 4, out), PT_ERR_INVALID_ARG,
                           "takes 1..3 inputs (x, h0, c0) and gives 1..3 outputs");
    assert_pt_error(pt_nn_forward(m, pt_zeros(PT_SHAPE(5, 3, 4), PT_FLOAT64, pt_cpu())),
                    PT_ERR_DTYPE, "input must have the parameters' dtype float32, got float64");
    assert_pt_error(pt_nn_forward(m, pt_zeros(PT_SHAPE(0, 3, 4), PT_FLOAT32, pt_cpu())),
                    PT_ERR_SHAPE, "the input sequence is empty");
    assert_pt_error(pt_nn_forward(m, NULL), PT_ERR_NULL, "");
    pt_nn_free(m);

    m = mk_gru_cell();
    assert_pt_error(pt_nn_forward(m, pt_zeros(PT_SHAPE(1, 3, 4), PT_FLOAT32, pt_cpu())),
                    PT_ERR_SHAPE, "GRUCell: Expected input to be 1-D or 2-D but received 3-D");
    assert_pt_error(pt_nn_forward(m, pt_zeros(PT_SHAPE(3, 5), PT_FLOAT32, pt_cpu())), PT_ERR_SHAPE,
                    "input has inconsistent input_size: got 5 expected 4");
    const pt_tensor *cin[2] = {pt_zeros(PT_SHAPE(3, 4), PT_FLOAT32, pt_cpu()),
                               pt_zeros(PT_SHAPE(2, 6), PT_FLOAT32, pt_cpu())};
    assert_pt_status_error(pt_nn_forward_n(m, 2, cin, 1, out), PT_ERR_SHAPE,
                           "Input batch size 3 doesn't match hidden0 batch size 2");
    cin[1] = pt_zeros(PT_SHAPE(3, 7), PT_FLOAT32, pt_cpu());
    assert_pt_status_error(pt_nn_forward_n(m, 2, cin, 1, out), PT_ERR_SHAPE,
                           "hidden0 has inconsistent hidden_size: got 7, expected 6");
    pt_nn_free(m);
}

/* Double backward through the layer node is refused with a clear error. */
static void test_double_backward_unsupported(void **state)
{
    (void)state;
    pt_module *m = mk_rnn_cell();
    pt_tensor *x = pt_ones(PT_SHAPE(2, 4), PT_FLOAT32, pt_cpu());
    pt_set_requires_grad(x, true);
    pt_tensor *y = pt_sum(pt_nn_forward(m, x));
    pt_tensor *g = NULL;
    assert_pt_status_error(pt_autograd_grad(1, &y, NULL, 1, &x, true, true, false, &g),
                           PT_ERR_UNSUPPORTED, "double backward");
    pt_nn_free(m);
}

int main(void)
{
    fx = fx_open("nn_rnn");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lstm_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gru_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_rnn_matches_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cells_match_torch, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_lstm_h0_only_noncontig, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_parameter_names_and_shapes, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_init, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_dropout_between_layers, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_repr, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_no_grad, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_constructor_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_forward_errors, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_double_backward_unsupported, pt_test_setup,
                                        pt_test_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
