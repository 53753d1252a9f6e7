/* Placeholder for pt_load_ex until the .pt reader (src/io/pt_read.c, the integrator's) lands:
 * a weak definition, so the real one replaces it at link time without a conflict. It lets the
 * branch that brings pt-inspect link and makes its .pt path report a clean error. Delete this
 * file once pt_read.c defines pt_load_ex. */
#include "../core/internal.h"
#include "prometorch/io.h"

__attribute__((weak)) pt_value *pt_load_ex(const char *path, const pt_load_opts *opts)
{
    (void)opts;
    return pti_error_null(PT_ERR_UNSUPPORTED, "%s: reading .pt files is not built into this "
                                              "library yet",
                          path ? path : "(null)");
}
