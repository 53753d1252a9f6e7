/* TEMPORARY (the integrator deletes this file at merge): stand-ins so the srv-http branch links
 * and its HTTP layer can be tested before the other helpers' branches are merged.
 *
 * On the srv-api branch: the generation handlers (api_ollama.c, api_openai.c) and the engine
 * (srv-engine's engine.c) are real; what is left here are the store handlers of api_store.c,
 * which answer 501 {"error":"not implemented yet"}, and /api/ps. */
#include "serve_internal.h"

/* ---- the other handlers: not implemented in this branch --------------------------------------- */

static void pending(ps_request *r)
{
    ps_reply_error(r, 501, "not implemented yet");
}

void ps_api_tags(ps_request *r) { pending(r); }
void ps_api_show(ps_request *r) { pending(r); }
void ps_api_version(ps_request *r) { pending(r); }
void ps_api_copy(ps_request *r) { pending(r); }
void ps_api_delete(ps_request *r) { pending(r); }
void ps_api_create(ps_request *r) { pending(r); }
void ps_api_blob_head(ps_request *r) { pending(r); }
void ps_api_blob_post(ps_request *r) { pending(r); }
void ps_api_pull(ps_request *r) { pending(r); }
void ps_api_push(ps_request *r) { pending(r); }

/* /api/ps is simple enough to answer for real from the registry. */
void ps_api_ps(ps_request *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *models = ps_registry_ps_json(r->srv);
    if (models)
        cJSON_AddItemToObject(o, "models", models);
    ps_reply_json(r, 200, o);
}
