/* include/prometorch/server.h in a library built without the server (PT_WITH_SERVER off, no
 * libmicrohttpd): pt_server_start says so; the helpers that need no HTTP still work. */
#include "../../core/internal.h"
#include "prometorch/server.h"
#include "serve_internal.h"

bool pt_server_available(void)
{
    return false;
}

pt_server *pt_server_start(const pt_server_opts *opts)
{
    (void)opts;
    pti_error(PT_ERR_UNSUPPORTED, "pt_server_start: this PromeTorch was built without the HTTP "
                                  "server (configure with -DPT_WITH_SERVER=ON and libmicrohttpd)");
    return NULL;
}

void pt_server_stop(pt_server *s)
{
    (void)s; /* no server can have been started */
}

int pt_server_port(const pt_server *s)
{
    (void)s;
    return -1;
}

const char *pt_server_host(const pt_server *s)
{
    (void)s;
    return NULL;
}
