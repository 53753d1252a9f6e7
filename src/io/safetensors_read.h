/* The safetensors reader's internal entry (src/io/safetensors_read.c), used by pt_load_safetensors
 * and by pt_load / pt_load_buffer once they have detected the format. Internal; never installed. */
#ifndef PT_IO_SAFETENSORS_READ_H
#define PT_IO_SAFETENSORS_READ_H

#include "file_map.h"

/* Parses and checks the safetensors file in `m` (see pt_load_safetensors in io.h for the
 * checks) and returns a dict name -> tensor in data-offset order. Tensors are zero-copy views of
 * a mapped file when their offset is aligned for their dtype and `copy` is false; otherwise (a
 * borrowed buffer, an unaligned offset, or `copy`) their bytes are copied. *metadata (may be
 * NULL) receives the "__metadata__" dict (str -> str; empty when absent), also a new reference;
 * it is set to NULL on failure. Errors: PT_ERR_FORMAT / PT_ERR_DTYPE "<name>: safetensors: ...",
 * PT_ERR_OOM. The map is not consumed (tensors take their own references). */
pt_value *pti_safetensors_load_map(pti_file_map *m, pt_value **metadata, bool copy);

#endif
