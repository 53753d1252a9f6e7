/* PromeTorch: a PyTorch-style deep-learning library in C. Include this one header.
 *
 * Conventions (see docs/api.md): functions returning `pt_tensor *` return a new reference
 * or NULL with the thread-local error set (pt_last_status / pt_last_error); NULL tensor
 * arguments propagate the earlier error; `_` suffix = in place; `_scalar` = tensor op number;
 * `_ex` forms take an options struct whose zero value is PyTorch's defaults. */
#ifndef PROMETORCH_H
#define PROMETORCH_H

#include "types.h"
#include "core.h"
#include "ops_elementwise.h"
#include "ops_reduce.h"
#include "ops_linalg.h"
#include "ops_shape.h"
#include "ops_index.h"
#include "ops_conv.h"
#include "ops_nn.h"
#include "ops_loss.h"
#include "ops_random.h"
#include "ops_quant.h"
#include "autograd.h"
#include "data.h"
#include "train_utils.h"
#include "value.h"
#include "io.h"
#include "gguf.h"
#include "llm.h"
#include "model_store.h"
#include "server.h" /* always declared; pt_server_available() says if built in */
#include "nn.h"
#include "nn_layers.h"
#include "nn_init.h"
#include "nn_activation.h"
#include "nn_loss.h"
#include "nn_rnn.h"
#include "nn_transformer.h"
#include "optim.h"
#include "lr_scheduler.h"
#include "optim_utils.h"
#include "backend.h"

#define PROMETORCH_VERSION_MAJOR 0
#define PROMETORCH_VERSION_MINOR 1
#define PROMETORCH_VERSION_PATCH 0

#ifdef __cplusplus
extern "C" {
#endif
/* "0.1.0" */
PT_API const char *pt_version(void);
#ifdef __cplusplus
}
#endif

#endif
