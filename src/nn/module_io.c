/* Saving and loading a module's state to a file (io.h: pt_nn_save, pt_nn_load): the state_dict
 * as a .pt file or safetensors, and back through pt_load + pt_nn_load_state_dict. */
#include <string.h>

#include "../core/internal.h"
#include "prometorch/io.h"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

pt_status pt_nn_save(pt_module *m, const char *path)
{
    if (!m || !path)
        return pti_error(PT_ERR_INVALID_ARG, "pt_nn_save: NULL %s", m ? "path" : "module");
    pt_value *sd = pt_nn_state_dict(m);
    if (!sd)
        return pt_last_status();
    pt_status st =
        ends_with(path, ".safetensors") ? pt_save_safetensors(path, sd, NULL) : pt_save(path, sd);
    pt_value_free(sd);
    return st;
}

static bool all_tensors(const pt_value *d)
{
    for (int64_t i = 0; i < pt_value_len(d); i++)
        if (!pt_value_is(pt_value_item_ref(d, i), PT_VALUE_TENSOR))
            return false;
    return true;
}

/* The state dict inside a loaded file: the file's dict itself, or the dict under one of the
 * keys training scripts use for it. Borrowed; NULL with the error set. */
static const pt_value *find_state_dict(const pt_value *v, const char *path)
{
    static const char *const keys[] = {"model", "state_dict", "model_state_dict"};
    if (!pt_value_is(v, PT_VALUE_DICT))
        return pti_error_null(PT_ERR_FORMAT, "pt_nn_load: %s holds a %s, not a state dict", path,
                              pt_value_kind_name(pt_value_kind_of(v)));
    if (all_tensors(v))
        return v;
    const pt_value *found = NULL;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const pt_value *sd = pt_value_get_str_ref(v, keys[i]);
        if (sd && pt_value_is(sd, PT_VALUE_DICT) && all_tensors(sd)) {
            if (found)
                return pti_error_null(PT_ERR_FORMAT,
                                      "pt_nn_load: %s holds more than one of "
                                      "'model', 'state_dict', 'model_state_dict'",
                                      path);
            found = sd;
        }
    }
    pt_clear_error();
    if (!found)
        return pti_error_null(PT_ERR_FORMAT,
                              "pt_nn_load: %s is a dict with non-tensor values "
                              "and no 'model', 'state_dict' or 'model_state_dict' entry of "
                              "tensors",
                              path);
    return found;
}

pt_status pt_nn_load(pt_module *m, const char *path, bool strict)
{
    if (!m || !path)
        return pti_error(PT_ERR_INVALID_ARG, "pt_nn_load: NULL %s", m ? "path" : "module");
    pt_value *v = pt_load(path);
    if (!v)
        return pt_last_status();
    const pt_value *sd = find_state_dict(v, path);
    pt_status st = sd ? pt_nn_load_state_dict(m, sd, strict) : pt_last_status();
    pt_value_free(v);
    return st;
}
