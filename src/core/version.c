/* The library version string. */
#include "internal.h"

#define PT_STR_(x) #x
#define PT_STR(x) PT_STR_(x)

const char *pt_version(void)
{
    return PT_STR(PROMETORCH_VERSION_MAJOR) "." PT_STR(PROMETORCH_VERSION_MINOR) "." PT_STR(
        PROMETORCH_VERSION_PATCH);
}
