/* Internal interface between the recurrent modules (rnn.c) and the recurrence of one layer in
 * one direction (rnn_layer.c). */
#ifndef PT_NN_RNN_INTERNAL_H
#define PT_NN_RNN_INTERNAL_H

#include "prometorch/prometorch.h"

typedef enum { PTI_RNN_TANH, PTI_RNN_RELU, PTI_RNN_LSTM, PTI_RNN_GRU } pti_rnn_mode;

/* Gates per hidden unit: 1, 1, 4, 3. */
int pti_rnn_gates(pti_rnn_mode mode);

/* Runs the recurrence of one layer in one direction (reverse: t = T-1 .. 0) as one autograd
 * node.
 *   gi   [T, B, G*H]  input projections W_ih x_t + b_ih (+ b_hh except for GRU)
 *   w_hh [G*H, H]
 *   b_hh [G*H] or NULL (GRU only: its n part sits inside r * (...))
 *   h0   [B, H]; c0 [B, H] (LSTM only)
 * Writes new references: *out [T, B, H], *h_n [B, H], *c_n [B, H] (LSTM; c_n may be NULL
 * otherwise). */
pt_status pti_rnn_layer(pti_rnn_mode mode, bool reverse, pt_tensor *gi, pt_tensor *w_hh,
                        pt_tensor *b_hh, pt_tensor *h0, pt_tensor *c0, pt_tensor **out,
                        pt_tensor **h_n, pt_tensor **c_n);

#endif
