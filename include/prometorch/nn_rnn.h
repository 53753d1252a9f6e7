/* PromeTorch nn: recurrent layers (torch.nn.RNN, LSTM, GRU) and their cells (RNNCell, LSTMCell,
 * GRUCell).
 *
 * Parameters, their names, shapes, order and initialization are PyTorch's: for layer k and
 * direction suffix "" or "_reverse", weight_ih_l{k}{suffix} [G*hidden, in_k],
 * weight_hh_l{k}{suffix} [G*hidden, hidden], bias_ih_l{k}{suffix} [G*hidden],
 * bias_hh_l{k}{suffix} [G*hidden], with G = 1 (RNN), 4 (LSTM: gates i, f, g, o) or 3 (GRU:
 * gates r, z, n, with n = tanh(W_in x + b_in + r * (W_hn h + b_hn))). Every parameter starts
 * uniform in [-1/sqrt(hidden), 1/sqrt(hidden)]. The cells have weight_ih, weight_hh, bias_ih,
 * bias_hh.
 *
 * Layers run through pt_nn_forward_n:
 *   in  = {x, h0 (may be NULL: zeros), c0 (LSTM only, may be NULL: zeros)}
 *   out = {output, h_n, c_n (LSTM only)}; n_out may be smaller to skip the later results.
 * x is [T, B, input_size] ([B, T, input_size] with batch_first) or unbatched [T, input_size];
 * h0/c0/h_n/c_n are [num_layers * D, B, hidden] (unbatched: [num_layers * D, hidden]) with
 * D = 2 when bidirectional; output is [T, B, D * hidden] (batch_first: [B, T, D * hidden]).
 * pt_nn_forward(m, x) returns just output.
 *
 * Cells: in = {x, h (may be NULL), c (LSTMCell only, may be NULL)}, out = {h'[, c']}; x is
 * [B, input_size] or unbatched [input_size]; pt_nn_forward returns h'.
 *
 * Gradients: each layer direction is one autograd node whose backward (backpropagation through
 * time, written with library ops) gives the gradients of the input projections, weight_hh,
 * bias_hh (GRU) and h0/c0; the input projection is an ordinary recorded matmul. Double backward
 * (create_graph) through a recurrent layer is not supported and is a clear error. */
#ifndef PROMETORCH_NN_RNN_H
#define PROMETORCH_NN_RNN_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nonlinearity of nn.RNN / nn.RNNCell (PyTorch's nonlinearity='tanh' | 'relu'). */
typedef enum pt_rnn_nonlinearity {
    PT_RNN_TANH = 0,
    PT_RNN_RELU = 1,
} pt_rnn_nonlinearity;

/* Options of pt_nn_rnn / pt_nn_lstm / pt_nn_gru. bias = true cannot be the zero value, so start
 * from PT_RNN_DEFAULTS (or pass NULL for PyTorch's defaults); a zero num_layers is rejected so
 * that a zero-initialized struct fails loudly instead of silently dropping the biases. */
typedef struct pt_rnn_opts {
    int64_t num_layers;               /* >= 1 (PyTorch: 1) */
    pt_rnn_nonlinearity nonlinearity; /* RNN only; LSTM/GRU reject PT_RNN_RELU */
    bool bias;                        /* PyTorch: true */
    bool batch_first;                 /* x and output are [B, T, feature] */
    double dropout;                   /* on each layer's output except the last, when training */
    bool bidirectional;
    int64_t proj_size; /* LSTM projections: not supported, must be 0 */
} pt_rnn_opts;
#define PT_RNN_DEFAULTS ((pt_rnn_opts){.num_layers = 1, .bias = true})

/* nn.RNN(input_size, hidden_size, ...): h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh) with
 * act = tanh or relu. opts may be NULL (PyTorch's defaults). Returns a new module (pt_nn_free),
 * or NULL with PT_ERR_INVALID_ARG for sizes < 1, num_layers < 1, dropout outside [0, 1],
 * proj_size != 0. */
PT_API pt_module *pt_nn_rnn(int64_t input_size, int64_t hidden_size, const pt_rnn_opts *opts);
/* nn.LSTM(input_size, hidden_size, ...): gates i, f, g, o; c_t = f * c_{t-1} + i * g,
 * h_t = o * tanh(c_t). Same options and errors as pt_nn_rnn (proj_size is not supported:
 * PT_ERR_UNSUPPORTED). */
PT_API pt_module *pt_nn_lstm(int64_t input_size, int64_t hidden_size, const pt_rnn_opts *opts);
/* nn.GRU(input_size, hidden_size, ...): gates r, z, n; h_t = (1 - z) * n + z * h_{t-1}. Same
 * options and errors as pt_nn_rnn. */
PT_API pt_module *pt_nn_gru(int64_t input_size, int64_t hidden_size, const pt_rnn_opts *opts);

/* nn.RNNCell(input_size, hidden_size, bias, nonlinearity): one step of pt_nn_rnn. Returns a new
 * module, or NULL with PT_ERR_INVALID_ARG for sizes < 1. */
PT_API pt_module *pt_nn_rnn_cell(int64_t input_size, int64_t hidden_size, bool bias,
                                 pt_rnn_nonlinearity nonlinearity);
/* nn.LSTMCell(input_size, hidden_size, bias): out = {h', c'}. */
PT_API pt_module *pt_nn_lstm_cell(int64_t input_size, int64_t hidden_size, bool bias);
/* nn.GRUCell(input_size, hidden_size, bias). */
PT_API pt_module *pt_nn_gru_cell(int64_t input_size, int64_t hidden_size, bool bias);

#ifdef __cplusplus
}
#endif
#endif
