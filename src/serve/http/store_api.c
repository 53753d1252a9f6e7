/* The public model-store functions (include/prometorch/model_store.h): thin wrappers over the
 * store operations the server uses (store_ops.h), giving JSON text instead of cJSON trees so
 * that callers need no internal header. Built with or without the HTTP server. */
#include <stdlib.h>

#include "../../core/internal.h"
#include "../llm/model_store.h"
#include "prometorch/model_store.h"
#include "store_ops.h"

bool pt_model_store_root(char *buf, size_t cap)
{
    if (!buf || cap == 0) {
        pti_error(PT_ERR_NULL, "pt_model_store_root: buf is NULL or cap is 0");
        return false;
    }
    if (pti_model_store_root(buf, cap))
        return true;
    pti_error(PT_ERR_INVALID_ARG,
              "pt_model_store_root: no model store: set OLLAMA_MODELS or "
              "HOME (or the path is longer than %zu bytes)",
              cap - 1);
    return false;
}

/* A tree as compact JSON text (malloc'd), the tree deleted; NULL (PT_ERR_OOM) when printing
 * fails, and NULL without touching the error when t is NULL (its maker set it). */
static char *to_text(cJSON *t, const char *fn)
{
    if (!t)
        return NULL;
    char *s = cJSON_PrintUnformatted(t);
    cJSON_Delete(t);
    if (!s)
        pti_error(PT_ERR_OOM, "%s: out of memory", fn);
    return s;
}

char *pt_model_store_list(const char *root, const char *models_dir)
{
    cJSON *t = pti_store_list(root, models_dir, NULL, 0);
    if (!t)
        pti_error(PT_ERR_OOM, "pt_model_store_list: out of memory");
    return to_text(t, "pt_model_store_list");
}

char *pt_model_store_show(const char *root, const char *name, bool verbose)
{
    if (!root || !name) {
        pti_error(PT_ERR_NULL, "pt_model_store_show: %s is NULL", !root ? "root" : "name");
        return NULL;
    }
    int status = 0;
    return to_text(pti_store_show(root, name, verbose, &status), "pt_model_store_show");
}

char *pt_model_store_show_file(const char *path, const char *shown, bool verbose)
{
    if (!path) {
        pti_error(PT_ERR_NULL, "pt_model_store_show_file: path is NULL");
        return NULL;
    }
    int status = 0;
    return to_text(pti_store_show_file(path, shown ? shown : path, verbose, &status),
                   "pt_model_store_show_file");
}

bool pt_model_store_copy(const char *root, const char *src, const char *dst)
{
    if (!root || !src || !dst) {
        pti_error(PT_ERR_NULL, "pt_model_store_copy: %s is NULL",
                  !root  ? "root"
                  : !src ? "src"
                         : "dst");
        return false;
    }
    return pti_store_copy(root, src, dst) == PTI_STORE_OK;
}

bool pt_model_store_delete(const char *root, const char *name)
{
    if (!root || !name) {
        pti_error(PT_ERR_NULL, "pt_model_store_delete: %s is NULL", !root ? "root" : "name");
        return false;
    }
    return pti_store_delete(root, name) == PTI_STORE_OK;
}

void pt_format_bytes(int64_t n, char *buf, size_t cap)
{
    if (buf && cap)
        pti_store_human_bytes(n, buf, cap);
}

void pt_format_count(uint64_t n, char *buf, size_t cap)
{
    if (buf && cap)
        pti_store_human_number(n, buf, cap);
}

void pt_format_ago(int64_t t_s, int64_t now_s, char *buf, size_t cap)
{
    if (buf && cap)
        pti_store_human_time(t_s, now_s, buf, cap);
}
