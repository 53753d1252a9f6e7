/* The recurrent modules nn.RNN / LSTM / GRU and nn.RNNCell / LSTMCell / GRUCell: construction
 * (PyTorch's parameter names, order and init), argument checks, and the forward that computes
 * each layer's input projections for all steps with one matmul and hands the recurrence to
 * pti_rnn_layer (rnn_layer.c). A cell is a one-step, one-layer run of the same recurrence. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "rnn_internal.h"

typedef struct {
    pti_rnn_mode mode;
    bool cell;
    int64_t input_size, hidden_size, num_layers;
    bool bias, batch_first, bidirectional;
    double dropout;
    /* borrowed, 4 per (layer, direction): w_ih, w_hh, b_ih, b_hh (biases NULL without bias) */
    pt_tensor **params;
} rnn_ctx;

static void rnn_ctx_free(void *p)
{
    rnn_ctx *c = p;
    if (c)
        free(c->params);
    free(c);
}

static const char *mode_name(const rnn_ctx *c)
{
    static const char *layers[] = {"RNN", "RNN", "LSTM", "GRU"};
    static const char *cells[] = {"RNNCell", "RNNCell", "LSTMCell", "GRUCell"};
    return c->cell ? cells[c->mode] : layers[c->mode];
}

static int n_dirs(const rnn_ctx *c)
{
    return c->bidirectional ? 2 : 1;
}

/* ---- argument checks ------------------------------------------------------------------------- */

static pt_status check_float(const rnn_ctx *c, const char *what, const pt_tensor *t,
                             const pt_tensor *w)
{
    if (pt_dtype_of(t) != pt_dtype_of(w))
        return pti_error(PT_ERR_DTYPE, "%s: %s must have the parameters' dtype %s, got %s",
                         mode_name(c), what, pt_dtype_name(pt_dtype_of(w)),
                         pt_dtype_name(pt_dtype_of(t)));
    if (!pt_device_equal(pt_device_of(t), pt_device_of(w)))
        return pti_error(PT_ERR_DEVICE, "%s: %s is on another device than the parameters",
                         mode_name(c), what);
    return PT_OK;
}

/* A state tensor must be [L*D, B, H] (or [L*D, H] unbatched). */
static pt_status check_state(const rnn_ctx *c, const char *what, const pt_tensor *h, bool batched,
                             int64_t B)
{
    int64_t LD = c->num_layers * n_dirs(c), H = c->hidden_size;
    int want = batched ? 3 : 2;
    if (pt_ndim(h) != want)
        return pti_error(PT_ERR_SHAPE,
                         "%s: for %s %d-D input, %s should also be %d-D but got "
                         "%d-D tensor",
                         mode_name(c), batched ? "batched" : "unbatched", batched ? 3 : 2, what,
                         want, pt_ndim(h));
    const int64_t *s = pt_shape(h);
    bool ok = batched ? (s[0] == LD && s[1] == B && s[2] == H) : (s[0] == LD && s[1] == H);
    if (!ok) {
        char exp[64];
        if (batched)
            snprintf(exp, sizeof exp, "(%lld, %lld, %lld)", (long long)LD, (long long)B,
                     (long long)H);
        else
            snprintf(exp, sizeof exp, "(%lld, %lld)", (long long)LD, (long long)H);
        return pti_error(PT_ERR_SHAPE, "%s: Expected %s size %s, got %s", mode_name(c), what, exp,
                         pti_shape_str(pt_ndim(h), s));
    }
    return check_float(c, what, h, c->params[1]);
}

static pt_status check_layer_args(const rnn_ctx *c, int n_in, const pt_tensor *const *in, int n_out)
{
    int max_io = c->mode == PTI_RNN_LSTM ? 3 : 2;
    if (n_in < 1 || n_in > max_io || n_out > max_io)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: takes 1..%d inputs (x, h0%s) and gives 1..%d "
                         "outputs, got %d and %d",
                         mode_name(c), max_io, max_io == 3 ? ", c0" : "", max_io, n_in, n_out);
    const pt_tensor *x = in[0];
    if (!PTI_CHECK_ARG(x, mode_name(c), "input"))
        return pt_last_status();
    if (pt_ndim(x) != 2 && pt_ndim(x) != 3)
        return pti_error(PT_ERR_SHAPE,
                         "%s: Expected input to be 2-D or 3-D but received %d-D "
                         "tensor",
                         mode_name(c), pt_ndim(x));
    int64_t feat = pt_shape(x)[pt_ndim(x) - 1];
    if (feat != c->input_size)
        return pti_error(PT_ERR_SHAPE,
                         "%s: input.size(-1) must be equal to input_size. "
                         "Expected %lld, got %lld",
                         mode_name(c), (long long)c->input_size, (long long)feat);
    bool batched = pt_ndim(x) == 3;
    int64_t T = pt_shape(x)[batched && c->batch_first ? 1 : 0];
    if (T < 1)
        return pti_error(PT_ERR_SHAPE, "%s: the input sequence is empty (shape %s)", mode_name(c),
                         pti_shape_str(pt_ndim(x), pt_shape(x)));
    pt_status st = check_float(c, "input", x, c->params[0]);
    int64_t B = batched ? pt_shape(x)[c->batch_first ? 0 : 1] : 1;
    const char *names[2] = {c->mode == PTI_RNN_LSTM ? "hx[0]" : "hx", "hx[1]"};
    for (int k = 1; k < n_in && st == PT_OK; k++)
        if (in[k])
            st = check_state(c, names[k - 1], in[k], batched, B);
    return st;
}

/* ---- forward of the layers ------------------------------------------------------------------- */

/* W_ih x + b_ih (+ b_hh except for GRU) for all steps: [T, B, G*H] from x [T, B, in]. */
static pt_tensor *input_projection(const rnn_ctx *c, pt_tensor *const *p, const pt_tensor *x)
{
    const int64_t *s = pt_shape(x);
    pt_tensor *x2 = pt_reshape(x, PT_SHAPE(s[0] * s[1], s[2]));
    pt_tensor *wt = pt_t(p[0]);
    pt_tensor *gi;
    if (c->bias) {
        pt_tensor *sum = c->mode == PTI_RNN_GRU ? NULL : pt_add(p[2], p[3]);
        gi = pt_addmm(sum ? sum : p[2], x2, wt);
        pt_release(sum);
    } else {
        gi = pt_mm(x2, wt);
    }
    pt_release(x2);
    pt_release(wt);
    pt_tensor *r = pt_view(gi, PT_SHAPE(s[0], s[1], pt_shape(p[0])[0]));
    pt_release(gi);
    return r;
}

/* State k of layer-direction ld: a [B, H] view of the given h0/c0 (owned by the current scope),
 * or the borrowed zeros. */
static pt_tensor *initial_state(const pt_tensor *given, int64_t ld, pt_tensor *zeros)
{
    return given ? pt_select(given, 0, ld) : zeros;
}

/* One layer, both directions: returns its output [T, B, D*H] and writes the final states. */
static pt_tensor *run_layer(const rnn_ctx *c, int64_t l, const pt_tensor *x, const pt_tensor *h0,
                            const pt_tensor *c0, pt_tensor *zeros, pt_tensor **hn, pt_tensor **cn)
{
    pt_tensor *outs[2] = {NULL, NULL};
    int D = n_dirs(c);
    pt_status st = PT_OK;
    for (int d = 0; d < D && st == PT_OK; d++) {
        int64_t ld = l * D + d;
        pt_tensor *const *p = c->params + 4 * ld;
        pt_tensor *gi = input_projection(c, p, x);
        pt_tensor *hs = initial_state(h0, ld, zeros);
        pt_tensor *cs = c->mode == PTI_RNN_LSTM ? initial_state(c0, ld, zeros) : NULL;
        st = pti_rnn_layer(c->mode, d == 1, gi, p[1], c->mode == PTI_RNN_GRU ? p[3] : NULL, hs, cs,
                           &outs[d], &hn[d], c->mode == PTI_RNN_LSTM ? &cn[d] : NULL);
        pt_release(gi);
    }
    if (st != PT_OK)
        return NULL;
    return D == 1 ? outs[0] : pt_cat(2, (const pt_tensor *const *)outs, 2);
}

static pt_status layers_forward(pt_module *self, int n_in, const pt_tensor *const *in, int n_out,
                                pt_tensor **out)
{
    rnn_ctx *c = pt_nn_ctx(self);
    pt_status st = check_layer_args(c, n_in, in, n_out);
    if (st != PT_OK)
        return st;
    const pt_tensor *x = in[0];
    bool batched = pt_ndim(x) == 3;
    int64_t L = c->num_layers, D = n_dirs(c), H = c->hidden_size;
    pt_scope_begin();
    /* everything below works on [T, B, feature] and [L*D, B, H] */
    pt_tensor *xs = !batched         ? pt_unsqueeze(x, 1)
                    : c->batch_first ? pt_transpose(x, 0, 1)
                                     : (pt_tensor *)x;
    const pt_tensor *h0 = n_in > 1 ? in[1] : NULL, *c0 = n_in > 2 ? in[2] : NULL;
    if (!batched) {
        h0 = h0 ? pt_unsqueeze(h0, 1) : NULL;
        c0 = c0 ? pt_unsqueeze(c0, 1) : NULL;
    }
    int64_t B = pt_shape(xs)[1];
    pt_tensor *zeros = pt_zeros(PT_SHAPE(B, H), pt_dtype_of(x), pt_device_of(x));
    /* the final states of every layer and direction; on the stack for usual depths so a
     * steady-state training step does not call malloc */
    pt_tensor *hn_stack[64] = {NULL};
    pt_tensor **hn =
        2 * L * D <= 64 ? hn_stack : pti_calloc((size_t)(2 * L * D), sizeof(pt_tensor *));
    pt_tensor **cn = hn ? hn + L * D : NULL;
    if (!hn)
        st = pti_error(PT_ERR_OOM, "%s: out of memory", mode_name(c));
    pt_tensor *cur = xs;
    for (int64_t l = 0; l < L && st == PT_OK; l++) {
        pt_tensor *y = run_layer(c, l, cur, h0, c0, zeros, hn + l * D, cn + l * D);
        if (y && l + 1 < L && c->dropout > 0)
            y = pt_dropout(y, c->dropout, pt_nn_is_training(self));
        if (!y)
            st = pt_last_status();
        cur = y;
    }
    if (st == PT_OK) {
        pt_tensor *y = !batched         ? pt_squeeze_dim(cur, 1)
                       : c->batch_first ? pt_transpose(cur, 0, 1)
                                        : cur;
        pt_tensor *finals[2] = {NULL, NULL};
        for (int k = 0; k < (c->mode == PTI_RNN_LSTM ? 2 : 1); k++) {
            pt_tensor *s = pt_stack((int)(L * D), (const pt_tensor *const *)(k ? cn : hn), 0);
            finals[k] = batched ? s : pt_squeeze_dim(s, 1);
        }
        pt_tensor *res[3] = {y, finals[0], finals[1]};
        for (int k = 0; k < n_out && st == PT_OK; k++)
            if (!res[k])
                st = pt_last_status();
        for (int k = 0; k < n_out && st == PT_OK; k++)
            out[k] = pt_keep(res[k]);
    }
    if (hn != hn_stack)
        free(hn);
    pt_scope_end();
    return st;
}

/* ---- forward of the cells -------------------------------------------------------------------- */

static pt_status check_cell_args(const rnn_ctx *c, int n_in, const pt_tensor *const *in, int n_out)
{
    int max_io = c->mode == PTI_RNN_LSTM ? 3 : 2;
    if (n_in < 1 || n_in > max_io || n_out > max_io - 1)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: takes 1..%d inputs (x, h%s) and gives 1..%d "
                         "outputs, got %d and %d",
                         mode_name(c), max_io, max_io == 3 ? ", c" : "", max_io - 1, n_in, n_out);
    const pt_tensor *x = in[0];
    if (!PTI_CHECK_ARG(x, mode_name(c), "input"))
        return pt_last_status();
    if (pt_ndim(x) != 1 && pt_ndim(x) != 2)
        return pti_error(PT_ERR_SHAPE,
                         "%s: Expected input to be 1-D or 2-D but received %d-D "
                         "tensor",
                         mode_name(c), pt_ndim(x));
    int64_t feat = pt_shape(x)[pt_ndim(x) - 1];
    if (feat != c->input_size)
        return pti_error(PT_ERR_SHAPE,
                         "%s: input has inconsistent input_size: got %lld expected "
                         "%lld",
                         mode_name(c), (long long)feat, (long long)c->input_size);
    pt_status st = check_float(c, "input", x, c->params[0]);
    for (int k = 1; k < n_in && st == PT_OK; k++) {
        const pt_tensor *h = in[k];
        if (!h)
            continue;
        const char *what = k == 1 ? "hx" : "cx";
        if (pt_ndim(h) != pt_ndim(x))
            return pti_error(PT_ERR_SHAPE, "%s: %s must be %d-D like the input, got %d-D",
                             mode_name(c), what, pt_ndim(x), pt_ndim(h));
        if (pt_ndim(x) == 2 && pt_shape(h)[0] != pt_shape(x)[0])
            return pti_error(PT_ERR_SHAPE,
                             "%s: Input batch size %lld doesn't match hidden%d "
                             "batch size %lld",
                             mode_name(c), (long long)pt_shape(x)[0], k - 1,
                             (long long)pt_shape(h)[0]);
        int64_t hs = pt_shape(h)[pt_ndim(h) - 1];
        if (hs != c->hidden_size)
            return pti_error(PT_ERR_SHAPE,
                             "%s: hidden%d has inconsistent hidden_size: got %lld, "
                             "expected %lld",
                             mode_name(c), k - 1, (long long)hs, (long long)c->hidden_size);
        st = check_float(c, what, h, c->params[1]);
    }
    return st;
}

static pt_status cell_forward(pt_module *self, int n_in, const pt_tensor *const *in, int n_out,
                              pt_tensor **out)
{
    rnn_ctx *c = pt_nn_ctx(self);
    pt_status st = check_cell_args(c, n_in, in, n_out);
    if (st != PT_OK)
        return st;
    bool batched = pt_ndim(in[0]) == 2;
    pt_tensor *const *p = c->params;
    pt_scope_begin();
    pt_tensor *x = batched ? (pt_tensor *)in[0] : pt_unsqueeze(in[0], 0);
    int64_t B = pt_shape(x)[0];
    pt_tensor *zeros = pt_zeros(PT_SHAPE(B, c->hidden_size), pt_dtype_of(x), pt_device_of(x));
    pt_tensor *st0[2] = {zeros, zeros};
    for (int k = 1; k < n_in; k++)
        if (in[k])
            st0[k - 1] = batched ? (pt_tensor *)in[k] : pt_unsqueeze(in[k], 0);
    pt_tensor *x3 = pt_unsqueeze(x, 0);
    pt_tensor *gi = input_projection(c, p, x3);
    pt_tensor *y = NULL, *hn = NULL, *cn = NULL;
    st = pti_rnn_layer(c->mode, false, gi, p[1], c->mode == PTI_RNN_GRU ? p[3] : NULL, st0[0],
                       st0[1], &y, &hn, c->mode == PTI_RNN_LSTM ? &cn : NULL);
    if (st == PT_OK) {
        pt_tensor *res[2] = {batched ? hn : pt_squeeze_dim(hn, 0),
                             cn ? (batched ? cn : pt_squeeze_dim(cn, 0)) : NULL};
        for (int k = 0; k < n_out && st == PT_OK; k++)
            if (!res[k])
                st = pt_last_status();
        for (int k = 0; k < n_out && st == PT_OK; k++)
            out[k] = pt_keep(res[k]);
    }
    pt_scope_end();
    return st;
}

static pt_tensor *forward_1(pt_module *self, const pt_tensor *x)
{
    pt_tensor *y = NULL;
    pt_status st = ((rnn_ctx *)pt_nn_ctx(self))->cell ? cell_forward(self, 1, &x, 1, &y)
                                                      : layers_forward(self, 1, &x, 1, &y);
    return st == PT_OK ? y : NULL;
}

/* ---- repr and construction ------------------------------------------------------------------- */

static void rnn_extra_repr(const pt_module *self, char *buf, size_t cap)
{
    const rnn_ctx *c = pt_nn_ctx(self);
    int n = snprintf(buf, cap, "%lld, %lld", (long long)c->input_size, (long long)c->hidden_size);
    if (!c->cell && c->num_layers != 1 && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ", num_layers=%lld", (long long)c->num_layers);
    if (!c->bias && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ", bias=False");
    if (c->cell && c->mode == PTI_RNN_RELU && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ", nonlinearity=relu");
    if (c->batch_first && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ", batch_first=True");
    if (c->dropout != 0 && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ", dropout=%g", c->dropout);
    if (c->bidirectional && n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, ", bidirectional=True");
}

/* A parameter of the given shape, uniform in [-k, k], registered under name. */
static pt_tensor *add_param(pt_module *m, const char *name, int ndim, const int64_t *shape,
                            double k)
{
    pt_tensor *t = pt_empty(ndim, shape, PT_FLOAT32, pt_cpu());
    if (!t || pt_uniform_(t, -k, k) != PT_OK || pt_nn_register_parameter(m, name, t) != PT_OK) {
        pt_release(t);
        return NULL;
    }
    pt_release(t); /* the module holds its own reference */
    return t;
}

/* Registers w_ih, w_hh[, b_ih, b_hh] of one (layer, direction) with PyTorch's names. */
static pt_status add_layer_params(pt_module *m, rnn_ctx *c, int64_t in, const char *suffix,
                                  pt_tensor **p)
{
    int64_t GH = pti_rnn_gates(c->mode) * c->hidden_size, H = c->hidden_size;
    double k = 1.0 / sqrt((double)H);
    const char *kinds[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    for (int j = 0; j < (c->bias ? 4 : 2); j++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", kinds[j], suffix);
        p[j] = j < 2 ? add_param(m, name, 2, (const int64_t[]){GH, j == 0 ? in : H}, k)
                     : add_param(m, name, 1, (const int64_t[]){GH}, k);
        if (!p[j])
            return pt_last_status();
    }
    return PT_OK;
}

static pt_module *build(rnn_ctx *c)
{
    static const char *layer_names[] = {"RNN", "RNN", "LSTM", "GRU"};
    static const char *cell_names[] = {"RNNCell", "RNNCell", "LSTMCell", "GRUCell"};
    pt_module_def def = {
        .type_name = c->cell ? cell_names[c->mode] : layer_names[c->mode],
        .forward = forward_1,
        .forward_n = c->cell ? cell_forward : layers_forward,
        .free_ctx = rnn_ctx_free,
        .extra_repr = rnn_extra_repr,
    };
    int64_t D = n_dirs(c), groups = c->num_layers * D;
    c->params = pti_calloc((size_t)(4 * groups), sizeof(pt_tensor *));
    if (!c->params) {
        rnn_ctx_free(c);
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", def.type_name);
    }
    pt_module *m = pt_nn_module_new(&def, c);
    if (!m)
        return NULL;
    pt_status st = PT_OK;
    for (int64_t l = 0; l < c->num_layers && st == PT_OK; l++)
        for (int64_t d = 0; d < D && st == PT_OK; d++) {
            char suffix[40] = "";
            if (!c->cell)
                snprintf(suffix, sizeof suffix, "_l%lld%s", (long long)l, d ? "_reverse" : "");
            int64_t in = l == 0 ? c->input_size : c->hidden_size * D;
            st = add_layer_params(m, c, in, suffix, c->params + 4 * (l * D + d));
        }
    if (st != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

static pt_module *make_layers(pti_rnn_mode mode, const char *name, int64_t input_size,
                              int64_t hidden_size, const pt_rnn_opts *opts)
{
    pt_rnn_opts o = opts ? *opts : PT_RNN_DEFAULTS;
    if (input_size < 1 || hidden_size < 1)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_%s: input_size and hidden_size must be "
                              ">= 1, got %lld and %lld",
                              name, (long long)input_size, (long long)hidden_size);
    if (o.num_layers < 1 || o.num_layers > 64)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_%s: num_layers must be in 1..64, got "
                              "%lld (start the options from PT_RNN_DEFAULTS)",
                              name, (long long)o.num_layers);
    if (!(o.dropout >= 0 && o.dropout <= 1))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_%s: dropout should be a number in range "
                              "[0, 1] representing the probability of an element being zeroed, "
                              "got %g",
                              name, o.dropout);
    if (o.proj_size != 0)
        return pti_error_null(mode == PTI_RNN_LSTM ? PT_ERR_UNSUPPORTED : PT_ERR_INVALID_ARG,
                              "pt_nn_%s: proj_size is %s (got %lld)", name,
                              mode == PTI_RNN_LSTM ? "not supported" : "only for LSTM",
                              (long long)o.proj_size);
    if (o.nonlinearity != PT_RNN_TANH && o.nonlinearity != PT_RNN_RELU)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_%s: unknown nonlinearity %d", name,
                              (int)o.nonlinearity);
    if (mode != PTI_RNN_TANH && o.nonlinearity != PT_RNN_TANH)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_%s: nonlinearity is only for RNN", name);
    rnn_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_%s: out of memory", name);
    *c = (rnn_ctx){mode == PTI_RNN_TANH && o.nonlinearity == PT_RNN_RELU ? PTI_RNN_RELU : mode,
                   false,
                   input_size,
                   hidden_size,
                   o.num_layers,
                   o.bias,
                   o.batch_first,
                   o.bidirectional,
                   o.dropout,
                   NULL};
    return build(c);
}

pt_module *pt_nn_rnn(int64_t input_size, int64_t hidden_size, const pt_rnn_opts *opts)
{
    return make_layers(PTI_RNN_TANH, "rnn", input_size, hidden_size, opts);
}

pt_module *pt_nn_lstm(int64_t input_size, int64_t hidden_size, const pt_rnn_opts *opts)
{
    return make_layers(PTI_RNN_LSTM, "lstm", input_size, hidden_size, opts);
}

pt_module *pt_nn_gru(int64_t input_size, int64_t hidden_size, const pt_rnn_opts *opts)
{
    return make_layers(PTI_RNN_GRU, "gru", input_size, hidden_size, opts);
}

static pt_module *make_cell(pti_rnn_mode mode, const char *name, int64_t input_size,
                            int64_t hidden_size, bool bias)
{
    if (input_size < 1 || hidden_size < 1)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_%s: input_size and hidden_size must be "
                              ">= 1, got %lld and %lld",
                              name, (long long)input_size, (long long)hidden_size);
    rnn_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_%s: out of memory", name);
    *c = (rnn_ctx){mode, true, input_size, hidden_size, 1, bias, false, false, 0.0, NULL};
    return build(c);
}

pt_module *pt_nn_rnn_cell(int64_t input_size, int64_t hidden_size, bool bias,
                          pt_rnn_nonlinearity nonlinearity)
{
    if (nonlinearity != PT_RNN_TANH && nonlinearity != PT_RNN_RELU)
        return pti_error_null(PT_ERR_INVALID_ARG, "pt_nn_rnn_cell: unknown nonlinearity %d",
                              (int)nonlinearity);
    return make_cell(nonlinearity == PT_RNN_RELU ? PTI_RNN_RELU : PTI_RNN_TANH, "rnn_cell",
                     input_size, hidden_size, bias);
}

pt_module *pt_nn_lstm_cell(int64_t input_size, int64_t hidden_size, bool bias)
{
    return make_cell(PTI_RNN_LSTM, "lstm_cell", input_size, hidden_size, bias);
}

pt_module *pt_nn_gru_cell(int64_t input_size, int64_t hidden_size, bool bias)
{
    return make_cell(PTI_RNN_GRU, "gru_cell", input_size, hidden_size, bias);
}
