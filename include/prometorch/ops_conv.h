/* PromeTorch ops: the conv family. Every function returning pt_tensor * returns a new
 * reference, or NULL with the error set (see core.h). */
#ifndef PROMETORCH_OPS_CONV_H
#define PROMETORCH_OPS_CONV_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
