/* PromeTorch nn: activation modules (torch.nn.ReLU, GELU, Softmax, PReLU, ...).
 *
 * Each constructor returns a new module (free with pt_nn_free) whose forward applies the
 * activation with the parameters given here, through the op library (ops_elementwise.h,
 * ops_reduce.h), so autograd records it like the functional call. Run it with pt_nn_forward
 * (one input, one output); pt_nn_forward_n with other counts is a PT_ERR_INVALID_ARG error.
 * Only PReLU has a parameter ("weight"); the others have no parameters or buffers.
 *
 * Reprs (pt_nn_to_string) are PyTorch's, e.g. "LeakyReLU(negative_slope=0.01)", "ReLU()",
 * "GELU(approximate='none')", "Softmax(dim=1)". Floating-point options print as Python
 * floats ("alpha=1.0", "min_val=-1.0"), except Softplus, whose PyTorch defaults are Python
 * ints and print as "beta=1, threshold=20" (an integral value prints without ".0" there).
 *
 * Not supported: PyTorch's `inplace=True` (these modules always return a new tensor; the
 * values are the same, the input is left unchanged) and Softmax/LogSoftmax/Softmin with
 * dim=None (PyTorch's deprecated implicit dim): a dim is required.
 *
 * Constructors return NULL with the error set on a bad option (PT_ERR_INVALID_ARG) or out of
 * memory (PT_ERR_OOM). Forward errors are those of the underlying ops (PT_ERR_DTYPE for an
 * integer input to a floating-only activation, PT_ERR_INDEX for a bad dim, ...). */
#ifndef PROMETORCH_NN_ACTIVATION_H
#define PROMETORCH_NN_ACTIVATION_H

#include "types.h"
#include "nn.h"
#include "ops_elementwise.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- pointwise activations with no options --------------------------------------------------- */

/* nn.ReLU(): max(x, 0) (pt_relu). Repr "ReLU()". */
PT_API pt_module *pt_nn_relu(void);
/* nn.ReLU6(): min(max(x, 0), 6) (pt_relu6). Repr "ReLU6()". */
PT_API pt_module *pt_nn_relu6(void);
/* nn.SELU(): scale * elu(x, alpha) with PyTorch's fixed constants (pt_selu). */
PT_API pt_module *pt_nn_selu(void);
/* nn.SiLU(): x * sigmoid(x) (pt_silu). */
PT_API pt_module *pt_nn_silu(void);
/* nn.Mish(): x * tanh(softplus(x)) (pt_mish). */
PT_API pt_module *pt_nn_mish(void);
/* nn.Hardsigmoid(): relu6(x + 3) / 6 (pt_hardsigmoid). */
PT_API pt_module *pt_nn_hardsigmoid(void);
/* nn.Hardswish(): x * relu6(x + 3) / 6 (pt_hardswish). */
PT_API pt_module *pt_nn_hardswish(void);
/* nn.Sigmoid(): 1 / (1 + e^-x) (pt_sigmoid). */
PT_API pt_module *pt_nn_sigmoid(void);
/* nn.Tanh() (pt_tanh). */
PT_API pt_module *pt_nn_tanh(void);
/* nn.LogSigmoid(): log(sigmoid(x)), computed as -softplus(-x). */
PT_API pt_module *pt_nn_log_sigmoid(void);
/* nn.Softsign(): x / (1 + |x|). */
PT_API pt_module *pt_nn_softsign(void);
/* nn.Tanhshrink(): x - tanh(x). */
PT_API pt_module *pt_nn_tanhshrink(void);

/* ---- pointwise activations with options (PyTorch's defaults in the comments) ----------------- */

/* nn.LeakyReLU(negative_slope=0.01): x if x >= 0 else negative_slope * x (pt_leaky_relu).
 * Repr "LeakyReLU(negative_slope=0.01)". */
PT_API pt_module *pt_nn_leaky_relu(double negative_slope);
/* nn.ELU(alpha=1.0): x if x > 0 else alpha (e^x - 1) (pt_elu). Repr "ELU(alpha=1.0)". */
PT_API pt_module *pt_nn_elu(double alpha);
/* nn.CELU(alpha=1.0): max(0, x) + min(0, alpha (e^(x/alpha) - 1)), computed as
 * alpha * elu(x / alpha). PT_ERR_INVALID_ARG when alpha == 0 (PyTorch divides by it).
 * Repr "CELU(alpha=1.0)". */
PT_API pt_module *pt_nn_celu(double alpha);
/* nn.GELU(approximate='none'): PT_GELU_NONE (the zero value, erf form) or PT_GELU_TANH
 * (pt_gelu_ex). Repr "GELU(approximate='none')" / "GELU(approximate='tanh')". */
PT_API pt_module *pt_nn_gelu(pt_gelu_approximate approximate);
/* nn.Softplus(beta=1, threshold=20): log(1 + e^(beta x)) / beta, x where beta x > threshold
 * (pt_softplus). Repr "Softplus(beta=1, threshold=20)" (see the note on formatting above). */
PT_API pt_module *pt_nn_softplus(double beta, double threshold);
/* nn.Hardtanh(min_val=-1.0, max_val=1.0): clamp(x, min_val, max_val) (pt_hardtanh).
 * PT_ERR_INVALID_ARG unless max_val > min_val (PyTorch asserts the same).
 * Repr "Hardtanh(min_val=-1.0, max_val=1.0)". */
PT_API pt_module *pt_nn_hardtanh(double min_val, double max_val);
/* nn.Threshold(threshold, value) (no defaults in PyTorch): x if x > threshold else value.
 * Integer inputs work (result in their dtype); a bool input is PT_ERR_DTYPE, as in PyTorch.
 * Repr "Threshold(threshold=0.1, value=20.0)". */
PT_API pt_module *pt_nn_threshold(double threshold, double value);
/* nn.Softshrink(lambd=0.5): x - lambd if x > lambd, x + lambd if x < -lambd, else 0.
 * PT_ERR_INVALID_ARG when lambd < 0 (PyTorch refuses it at forward). Repr "Softshrink(0.5)".
 * CELU, GLU, Hardshrink and Softshrink need a floating input: an integer or bool one is
 * PT_ERR_DTYPE (PyTorch has no kernel for them). */
PT_API pt_module *pt_nn_softshrink(double lambd);
/* nn.Hardshrink(lambd=0.5): x if |x| > lambd else 0. Repr "Hardshrink(0.5)". */
PT_API pt_module *pt_nn_hardshrink(double lambd);

/* nn.PReLU(num_parameters=1, init=0.25): x if x > 0 else weight * x, with a learnable
 * parameter "weight" of shape [num_parameters] filled with init (float32, the default
 * dtype). With num_parameters > 1 the input must have at least 2 dims and input.shape[1] ==
 * num_parameters (PT_ERR_SHAPE otherwise, as PyTorch). PT_ERR_INVALID_ARG when
 * num_parameters < 1. Repr "PReLU(num_parameters=1)". */
PT_API pt_module *pt_nn_prelu(int64_t num_parameters, double init);

/* ---- activations along a dim ----------------------------------------------------------------- */

/* nn.GLU(dim=-1): a * sigmoid(b) where a and b are the two halves of the input along dim
 * (PT_ERR_SHAPE when that size is odd). Repr "GLU(dim=-1)". */
PT_API pt_module *pt_nn_glu(int64_t dim);
/* nn.Softmax(dim) (pt_softmax). Repr "Softmax(dim=1)". */
PT_API pt_module *pt_nn_softmax(int64_t dim);
/* nn.LogSoftmax(dim) (pt_log_softmax). Repr "LogSoftmax(dim=1)". */
PT_API pt_module *pt_nn_log_softmax(int64_t dim);
/* nn.Softmin(dim): softmax(-x, dim). Repr "Softmin(dim=1)". */
PT_API pt_module *pt_nn_softmin(int64_t dim);
/* nn.Softmax2d(): softmax over the channel dim (-3) of a [C, H, W] or [N, C, H, W] input
 * (PT_ERR_SHAPE for other ranks). Repr "Softmax2d()". */
PT_API pt_module *pt_nn_softmax2d(void);

#ifdef __cplusplus
}
#endif
#endif
