/* PromeTorch ops: the shape family. Every function returning pt_tensor * returns a new
 * reference, or NULL with the error set (see core.h). */
#ifndef PROMETORCH_OPS_SHAPE_H
#define PROMETORCH_OPS_SHAPE_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
