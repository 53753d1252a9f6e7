/* PromeTorch nn.init: in-place weight initializers (torch.nn.init).
 *
 * Every initializer writes into t in place under no-grad (t may be a parameter that requires
 * grad) and draws from the library generator, so pt_manual_seed makes the result
 * reproducible. They work on any floating dtype and device. They return PT_OK, or an error
 * status with the message set (NULL t: PT_ERR_NULL; a bad argument: PT_ERR_INVALID_ARG).
 * Random streams are not torch's: the same seed gives the same weights here, not torch's. */
#ifndef PROMETORCH_NN_INIT_H
#define PROMETORCH_NN_INIT_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which fan kaiming_* scales by (PyTorch's mode='fan_in' / 'fan_out'). */
typedef enum pt_fan_mode {
    PT_FAN_IN = 0,
    PT_FAN_OUT,
} pt_fan_mode;

/* torch.nn.init.calculate_gain(nonlinearity, param): "linear", "conv1d", "conv2d", "conv3d",
 * "conv_transpose1d/2d/3d", "sigmoid" -> 1; "tanh" -> 5/3; "relu" -> sqrt(2);
 * "leaky_relu" -> sqrt(2 / (1 + param^2)) (param is the negative slope; PyTorch's default
 * param=None means 0.01: pass 0.01); "selu" -> 3/4. Unknown names return NaN with
 * PT_ERR_INVALID_ARG set. */
PT_API double pt_nn_init_calculate_gain(const char *nonlinearity, double param);

/* torch.nn.init._calculate_fan_in_and_fan_out: for a weight [out, in, *k], fan_in =
 * in * prod(k), fan_out = out * prod(k). Errors (PT_ERR_SHAPE) for fewer than 2 dims. */
PT_API pt_status pt_nn_init_calculate_fan(const pt_tensor *t, int64_t *fan_in, int64_t *fan_out);

/* uniform_(t, a, b): U(a, b). Error when a > b. */
PT_API pt_status pt_nn_init_uniform_(pt_tensor *t, double a, double b);
/* normal_(t, mean, std). Error when std < 0. */
PT_API pt_status pt_nn_init_normal_(pt_tensor *t, double mean, double std);
/* constant_(t, v), zeros_(t), ones_(t). */
PT_API pt_status pt_nn_init_constant_(pt_tensor *t, double v);
PT_API pt_status pt_nn_init_zeros_(pt_tensor *t);
PT_API pt_status pt_nn_init_ones_(pt_tensor *t);
/* eye_(t): the identity for a 2-D t (ones on the main diagonal of a rectangular t). */
PT_API pt_status pt_nn_init_eye_(pt_tensor *t);

/* xavier_uniform_(t, gain): U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)). */
PT_API pt_status pt_nn_init_xavier_uniform_(pt_tensor *t, double gain);
/* xavier_normal_(t, gain): N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)). */
PT_API pt_status pt_nn_init_xavier_normal_(pt_tensor *t, double gain);

/* kaiming_uniform_(t, a, mode, nonlinearity): U(-b, b) with b = gain * sqrt(3 / fan), gain =
 * calculate_gain(nonlinearity, a), fan = fan_in or fan_out per mode. nonlinearity NULL means
 * PyTorch's default "leaky_relu". A tensor with a zero-size dim is left as is (PyTorch warns
 * and returns). */
PT_API pt_status pt_nn_init_kaiming_uniform_(pt_tensor *t, double a, pt_fan_mode mode,
                                             const char *nonlinearity);
/* kaiming_normal_(t, a, mode, nonlinearity): N(0, std^2), std = gain / sqrt(fan). */
PT_API pt_status pt_nn_init_kaiming_normal_(pt_tensor *t, double a, pt_fan_mode mode,
                                            const char *nonlinearity);

/* trunc_normal_(t, mean, std, a, b): N(mean, std^2) restricted to [a, b] (inverse-CDF
 * sampling, like PyTorch). Error when std <= 0 or a >= b. */
PT_API pt_status pt_nn_init_trunc_normal_(pt_tensor *t, double mean, double std, double a,
                                          double b);

/* orthogonal_(t, gain): t (>= 2 dims, viewed as [size(0), numel/size(0)]) gets a (semi-)
 * orthogonal matrix times gain: the Q factor, with R's diagonal made positive, of the QR
 * decomposition of a standard normal matrix (the same distribution as PyTorch's: Haar). */
PT_API pt_status pt_nn_init_orthogonal_(pt_tensor *t, double gain);

#ifdef __cplusplus
}
#endif
#endif
