/* Optimizer state dicts in torch.optim's layout (Optimizer.state_dict / load_state_dict):
 *
 *   {"state": {<global param index>: {<state keys of the algorithm>}, ...},
 *    "param_groups": [{<hyperparameters in torch's order>, <extra keys>, "params": [i, ...]}]}
 *
 * Parameters are numbered across groups in order. The state keys and hyperparameter keys come
 * from the algorithm's tables (pti_state_entry, pti_hparam), so their order and value types
 * are torch 1.13's. Loading builds the whole new state aside and swaps it in only when every
 * check passed, so a failed load leaves the optimizer unchanged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim_internal.h"

/* ---- saving ---------------------------------------------------------------------------------- */

static pt_value *scalar_tensor_value(double v)
{
    float f = (float)v;
    pt_tensor *t = pt_from_data(&f, PT_SCALAR_SHAPE, PT_FLOAT32, pt_cpu());
    if (!t)
        return NULL;
    pt_value *val = pt_value_tensor(t);
    pt_release(t);
    return val;
}

/* A Python number for a double: an int when `as_int` and integral, else a float. */
static pt_value *number_value(double v, bool as_int)
{
    if (as_int && v == floor(v) && fabs(v) < 9e15)
        return pt_value_int((int64_t)v);
    return pt_value_float(v);
}

static pt_value *hparam_value(const pti_hparam *h, const void *opts)
{
    const char *field = (const char *)opts + h->offset;
    switch (h->kind) {
    case PTI_HP_FLOAT: return pt_value_float(*(const double *)field);
    case PTI_HP_NUMBER: return number_value(*(const double *)field, true);
    case PTI_HP_BOOL: return pt_value_bool(*(const bool *)field);
    case PTI_HP_INT: return pt_value_int(*(const int64_t *)field);
    case PTI_HP_PAIR: {
        const double *d = (const double *)field;
        pt_value *items[2] = {pt_value_float(d[0]), pt_value_float(d[1])};
        if (!items[0] || !items[1]) {
            pt_value_free(items[0]);
            pt_value_free(items[1]);
            return NULL;
        }
        return pt_value_tuple_of(2, items);
    }
    case PTI_HP_OPT_FLOAT: {
        double v = *(const double *)field;
        return isnan(v) ? pt_value_none() : pt_value_float(v);
    }
    case PTI_HP_OPT_INT: {
        int64_t v = *(const int64_t *)field;
        return v < 0 ? pt_value_none() : pt_value_int(v);
    }
    case PTI_HP_STR: {
        const char *s = *(const char *const *)field;
        return s ? pt_value_str(s) : pt_value_none();
    }
    case PTI_HP_NONE: return pt_value_none();
    case PTI_HP_FALSE: return pt_value_bool(false);
    }
    return pt_value_none();
}

static pt_value *group_value(const pt_optim *o, const pti_optim_group *g, int first_index)
{
    pt_value *d = pt_value_dict();
    pt_status st = d ? PT_OK : pt_last_status();
    for (int k = 0; k < o->def->n_hparams && st == PT_OK; k++)
        st = pt_value_dict_set_str(d, o->def->hparams[k].name,
                                   hparam_value(&o->def->hparams[k], g->opts));
    for (int k = 0; k < g->n_extra && st == PT_OK; k++)
        st = pt_value_dict_set_str(d, g->extra[k].name,
                                   number_value(g->extra[k].v, g->extra[k].is_int));
    pt_value *ids = st == PT_OK ? pt_value_list() : NULL;
    if (st == PT_OK && !ids)
        st = pt_last_status();
    for (int i = 0; i < g->n && st == PT_OK; i++)
        st = pt_value_append(ids, pt_value_int(first_index + i));
    if (st == PT_OK)
        st = pt_value_dict_set_str(d, "params", ids);
    else
        pt_value_free(ids);
    if (st != PT_OK) {
        pt_value_free(d);
        return NULL;
    }
    return d;
}

/* The state of one parameter as the algorithm's table describes it. */
static pt_value *param_state_value(const pt_optim *o, const pti_param_state *s)
{
    pt_value *d = pt_value_dict();
    pt_status st = d ? PT_OK : pt_last_status();
    for (int k = 0; k < o->def->n_state && st == PT_OK; k++) {
        const pti_state_entry *e = &o->def->state[k];
        pt_value *v = NULL;
        switch (e->kind) {
        case PTI_ST_STEP_TENSOR: v = scalar_tensor_value(s->step); break;
        case PTI_ST_STEP_INT: v = pt_value_int((int64_t)s->step); break;
        case PTI_ST_SCALAR: v = scalar_tensor_value(s->scalar[e->index]); break;
        case PTI_ST_BUF:
            if (!s->buf[e->index])
                continue;
            v = pt_value_tensor(s->buf[e->index]);
            break;
        case PTI_ST_BUF_OR_NONE:
            v = s->buf[e->index] ? pt_value_tensor(s->buf[e->index]) : pt_value_none();
            break;
        }
        st = pt_value_dict_set_str(d, e->name, v);
    }
    if (st != PT_OK) {
        pt_value_free(d);
        return NULL;
    }
    return d;
}

static pt_status add_states(pt_optim *o, pt_value *state)
{
    int gi = 0;
    for (int g = 0; g < o->n_groups; g++) {
        const pti_optim_group *grp = &o->groups[g];
        for (int i = 0; i < grp->n; i++, gi++) {
            pt_value *v = NULL;
            if (o->def->save_param_state) {
                pt_status st = o->def->save_param_state(o, g, i, gi, &v);
                if (st != PT_OK)
                    return st;
            } else {
                if (!grp->state[i].initialized)
                    continue;
                v = param_state_value(o, &grp->state[i]);
                if (!v)
                    return pt_last_status();
            }
            if (v) {
                pt_status st = pt_value_dict_set_int(state, gi, v);
                if (st != PT_OK)
                    return st;
            }
        }
    }
    return PT_OK;
}

pt_value *pt_optim_state_dict(pt_optim *o)
{
    if (!o)
        return pti_error_null(PT_ERR_NULL, "pt_optim_state_dict: optimizer is NULL");
    pt_value *sd = pt_value_dict(), *state = pt_value_dict(), *groups = pt_value_list();
    pt_status st = sd && state && groups ? PT_OK : pt_last_status();
    if (st == PT_OK)
        st = add_states(o, state);
    for (int g = 0, first = 0; g < o->n_groups && st == PT_OK; first += o->groups[g].n, g++) {
        pt_value *gv = group_value(o, &o->groups[g], first);
        st = gv ? pt_value_append(groups, gv) : pt_last_status();
    }
    if (st == PT_OK) {
        st = pt_value_dict_set_str(sd, "state", state);
        state = NULL;
    }
    if (st == PT_OK) {
        st = pt_value_dict_set_str(sd, "param_groups", groups);
        groups = NULL;
    }
    pt_value_free(state);
    pt_value_free(groups);
    if (st != PT_OK) {
        pt_value_free(sd);
        return NULL;
    }
    return sd;
}

/* ---- loading --------------------------------------------------------------------------------- */

#define OP "pt_optim_load_state_dict"

/* dict lookups that set no error when the key is absent (borrowed; NULL when absent) */
static const pt_value *find_str(const pt_value *d, const char *key)
{
    int64_t n = pt_value_len(d);
    for (int64_t k = 0; k < n; k++) {
        const char *s = pt_value_as_str(pt_value_key_ref(d, k), NULL);
        if (s && strcmp(s, key) == 0)
            return pt_value_item_ref(d, k);
    }
    return NULL;
}

static const pt_value *find_int(const pt_value *d, int64_t key)
{
    int64_t n = pt_value_len(d);
    for (int64_t k = 0; k < n; k++) {
        const pt_value *kv = pt_value_key_ref(d, k);
        int64_t id;
        if (pt_value_is(kv, PT_VALUE_INT) && pt_value_as_int(kv, &id) == PT_OK && id == key)
            return pt_value_item_ref(d, k);
    }
    return NULL;
}

/* A group's new contents, built aside. */
typedef struct loaded_group {
    void *opts;
    pti_group_extra *extra;
    int n_extra;
    pti_param_state *state;
} loaded_group;

static void loaded_free(loaded_group *lg, int n_params)
{
    if (lg->state)
        for (int i = 0; i < n_params; i++)
            for (int k = 0; k < PTI_OPTIM_MAX_BUFS; k++)
                pti_unref(lg->state[i].buf[k]);
    for (int k = 0; k < lg->n_extra; k++)
        free(lg->extra[k].name);
    free(lg->extra);
    free(lg->state);
    free(lg->opts);
    memset(lg, 0, sizeof(*lg));
}

static pt_status read_number(const pt_value *v, const char *what, double *out)
{
    if (pt_value_is(v, PT_VALUE_TENSOR)) {
        pt_tensor *t = pt_value_tensor_ref(v);
        if (pt_numel(t) != 1)
            return pti_error(PT_ERR_SHAPE, "%s: '%s' must be a one-element tensor, got %s", OP,
                             what, pti_tensor_desc(t));
        *out = pt_item(t);
        return PT_OK;
    }
    if (pt_value_as_float(v, out) != PT_OK)
        return pti_error(PT_ERR_FORMAT, "%s: '%s' must be a number, got %s", OP, what,
                         pt_value_kind_name(pt_value_kind_of(v)));
    return PT_OK;
}

static pt_status read_hparam(const pti_hparam *h, const pt_value *v, void *opts)
{
    char *field = (char *)opts + h->offset;
    double d = 0.0;
    switch (h->kind) {
    case PTI_HP_NONE:
    case PTI_HP_FALSE: return PT_OK; /* fixed in this implementation */
    case PTI_HP_BOOL: {
        bool b;
        if (pt_value_as_bool(v, &b) != PT_OK)
            return pti_error(PT_ERR_FORMAT, "%s: param group key '%s' must be a bool", OP, h->name);
        *(bool *)field = b;
        return PT_OK;
    }
    case PTI_HP_PAIR: {
        if (!(pt_value_is(v, PT_VALUE_TUPLE) || pt_value_is(v, PT_VALUE_LIST)) ||
            pt_value_len(v) != 2)
            return pti_error(PT_ERR_FORMAT, "%s: param group key '%s' must be a pair", OP, h->name);
        for (int k = 0; k < 2; k++)
            if (read_number(pt_value_item_ref(v, k), h->name, &((double *)field)[k]) != PT_OK)
                return pt_last_status();
        return PT_OK;
    }
    case PTI_HP_OPT_FLOAT:
        if (pt_value_is(v, PT_VALUE_NONE)) {
            *(double *)field = NAN;
            return PT_OK;
        }
        return read_number(v, h->name, (double *)field);
    case PTI_HP_OPT_INT:
        if (pt_value_is(v, PT_VALUE_NONE)) {
            *(int64_t *)field = -1;
            return PT_OK;
        }
        /* fall through */
    case PTI_HP_INT:
        if (read_number(v, h->name, &d) != PT_OK)
            return pt_last_status();
        *(int64_t *)field = (int64_t)d;
        return PT_OK;
    case PTI_HP_STR:
        /* Strings must keep static storage: only None or the value already set are accepted
         * here; an algorithm with string options maps them in its own load callback. */
        return PT_OK;
    case PTI_HP_FLOAT:
    case PTI_HP_NUMBER: return read_number(v, h->name, (double *)field);
    }
    return PT_OK;
}

static const pti_hparam *hparam_named(const pti_optim_def *def, const char *name)
{
    for (int k = 0; k < def->n_hparams; k++)
        if (strcmp(def->hparams[k].name, name) == 0)
            return &def->hparams[k];
    return NULL;
}

/* Reads a saved group's options and extra numeric keys into lg. */
static pt_status load_group_opts(const pt_optim *o, const pti_optim_group *g, const pt_value *sg,
                                 loaded_group *lg)
{
    lg->opts = pti_malloc(o->def->opts_size);
    if (!lg->opts)
        return pti_error(PT_ERR_OOM, "%s: out of memory", OP);
    memcpy(lg->opts, g->opts, o->def->opts_size);
    int64_t n = pt_value_len(sg);
    lg->extra = pti_calloc((size_t)(n > 0 ? n : 1), sizeof(*lg->extra));
    if (!lg->extra)
        return pti_error(PT_ERR_OOM, "%s: out of memory", OP);
    for (int64_t k = 0; k < n; k++) {
        const char *key = pt_value_as_str(pt_value_key_ref(sg, k), NULL);
        const pt_value *v = pt_value_item_ref(sg, k);
        if (!key || strcmp(key, "params") == 0)
            continue;
        const pti_hparam *h = hparam_named(o->def, key);
        if (h) {
            if (read_hparam(h, v, lg->opts) != PT_OK)
                return pt_last_status();
            continue;
        }
        double d;
        if (pt_value_as_float(v, &d) != PT_OK || pt_value_is(v, PT_VALUE_BOOL))
            continue; /* a non-numeric extra key: not kept */
        size_t len = strlen(key);
        char *copy = pti_malloc(len + 1);
        if (!copy)
            return pti_error(PT_ERR_OOM, "%s: out of memory", OP);
        memcpy(copy, key, len + 1);
        lg->extra[lg->n_extra++] = (pti_group_extra){copy, d, pt_value_is(v, PT_VALUE_INT)};
    }
    return o->def->check_opts(OP, lg->opts);
}

/* A copy of a saved state tensor with p's shape, dtype and device. A floating tensor of
 * another dtype is cast to p's, as torch's load_state_dict does; any other dtype is refused. */
static pt_tensor *load_buf(const pt_value *v, const pt_tensor *p, const char *key, int gi)
{
    pt_tensor *t = pt_value_tensor_ref(v);
    if (!t)
        return pti_error_null(PT_ERR_FORMAT, "%s: state %d '%s' must be a tensor, got %s", OP, gi,
                              key, pt_value_kind_name(pt_value_kind_of(v)));
    if (!pt_dtype_is_floating(pt_dtype_of(t)))
        return pti_error_null(PT_ERR_DTYPE,
                              "%s: state %d '%s' must be a floating tensor like the parameter "
                              "(%s), got %s",
                              OP, gi, key, pti_tensor_desc(p), pti_tensor_desc(t));
    if (pt_ndim(t) != pt_ndim(p) ||
        memcmp(pt_shape(t), pt_shape(p), sizeof(int64_t) * (size_t)pt_ndim(p)) != 0)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: state %d '%s' has shape %s but the parameter "
                              "has shape %s",
                              OP, gi, key, pti_shape_str(pt_ndim(t), pt_shape(t)),
                              pti_shape_str(pt_ndim(p), pt_shape(p)));
    pt_tensor *dst = pti_optim_state_zeros(p);
    if (dst && pt_copy_(dst, t) != PT_OK) {
        pti_unref(dst);
        return NULL;
    }
    return dst;
}

/* Whether entry e must be in a loaded parameter state under the group's options: the
 * algorithm's next step reads it (a missing buffer would be dereferenced as NULL). */
static bool entry_needed(const pti_optim_def *def, const pti_state_entry *e, const void *opts)
{
    switch (e->kind) {
    case PTI_ST_BUF: return !def->buf_needed || def->buf_needed(opts, e->index);
    case PTI_ST_BUF_OR_NONE: return false;
    default: return true;
    }
}

static pt_status load_param_state(const pt_optim *o, const void *opts, const pt_value *sv,
                                  const pt_tensor *p, int gi, pti_param_state *s)
{
    if (!pt_value_is(sv, PT_VALUE_DICT))
        return pti_error(PT_ERR_FORMAT, "%s: state %d must be a dict", OP, gi);
    s->initialized = true;
    for (int k = 0; k < o->def->n_state; k++) {
        const pti_state_entry *e = &o->def->state[k];
        const pt_value *v = find_str(sv, e->name);
        bool needed = entry_needed(o->def, e, opts);
        if (needed && (!v || pt_value_is(v, PT_VALUE_NONE)))
            return pti_error(PT_ERR_FORMAT, "%s: %s state %d has no '%s' (the algorithm needs it)",
                             OP, o->def->name, gi, e->name);
        if (!v)
            continue;
        pt_status st = PT_OK;
        switch (e->kind) {
        case PTI_ST_STEP_TENSOR:
        case PTI_ST_STEP_INT: st = read_number(v, e->name, &s->step); break;
        case PTI_ST_SCALAR: st = read_number(v, e->name, &s->scalar[e->index]); break;
        case PTI_ST_BUF:
        case PTI_ST_BUF_OR_NONE:
            if (pt_value_is(v, PT_VALUE_NONE))
                break;
            s->buf[e->index] = load_buf(v, p, e->name, gi);
            if (!s->buf[e->index])
                st = pt_last_status();
            break;
        }
        if (st != PT_OK)
            return st;
    }
    return PT_OK;
}

static pt_status check_layout(const pt_optim *o, const pt_value *sd, const pt_value **state,
                              const pt_value **groups)
{
    if (!pt_value_is(sd, PT_VALUE_DICT))
        return pti_error(PT_ERR_FORMAT, "%s: the state dict must be a dict", OP);
    *state = find_str(sd, "state");
    *groups = find_str(sd, "param_groups");
    if (!*state || !*groups || !pt_value_is(*state, PT_VALUE_DICT) ||
        !pt_value_is(*groups, PT_VALUE_LIST))
        return pti_error(PT_ERR_FORMAT,
                         "%s: the state dict needs a dict 'state' and a list "
                         "'param_groups'",
                         OP);
    if (pt_value_len(*groups) != o->n_groups)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: loaded state dict has a different number of "
                         "parameter groups (%lld, the optimizer has %d)",
                         OP, (long long)pt_value_len(*groups), o->n_groups);
    for (int g = 0; g < o->n_groups; g++) {
        const pt_value *sg = pt_value_item_ref(*groups, g);
        const pt_value *ids = pt_value_is(sg, PT_VALUE_DICT) ? find_str(sg, "params") : NULL;
        if (!ids || !pt_value_is(ids, PT_VALUE_LIST))
            return pti_error(PT_ERR_FORMAT, "%s: param group %d has no 'params' list", OP, g);
        if (pt_value_len(ids) != o->groups[g].n)
            return pti_error(PT_ERR_INVALID_ARG,
                             "%s: loaded state dict contains a parameter "
                             "group that doesn't match the size of optimizer's group (group %d: "
                             "%lld saved, %d here)",
                             OP, g, (long long)pt_value_len(ids), o->groups[g].n);
    }
    return PT_OK;
}

/* Builds group g's new state: saved ids in "params" map, by position, to this group's
 * parameters (as torch does). */
static pt_status load_group_state(pt_optim *o, int g, const pt_value *sg, const pt_value *state,
                                  loaded_group *lg)
{
    const pti_optim_group *grp = &o->groups[g];
    lg->state = pti_calloc((size_t)grp->n, sizeof(*lg->state));
    if (!lg->state)
        return pti_error(PT_ERR_OOM, "%s: out of memory", OP);
    const pt_value *ids = find_str(sg, "params");
    for (int i = 0; i < grp->n; i++) {
        int64_t id;
        if (pt_value_as_int(pt_value_item_ref(ids, i), &id) != PT_OK)
            return pti_error(PT_ERR_FORMAT, "%s: param group %d: params must be ints", OP, g);
        const pt_value *sv = find_int(state, id);
        if (!sv)
            continue;
        pt_status st = load_param_state(o, lg->opts, sv, grp->params[i], (int)id, &lg->state[i]);
        if (st != PT_OK)
            return st;
    }
    return PT_OK;
}

/* Swaps the loaded contents into the groups (after every check passed). */
static void commit_groups(pt_optim *o, loaded_group *lgs)
{
    for (int g = 0; g < o->n_groups; g++) {
        pti_optim_group *grp = &o->groups[g];
        loaded_group *lg = &lgs[g];
        void *opts = grp->opts;
        grp->opts = lg->opts;
        lg->opts = opts;
        if (lg->state) {
            pti_param_state *st = grp->state;
            grp->state = lg->state;
            lg->state = st;
        }
        /* keep current extra keys that the saved group lacks, take the saved values */
        for (int k = 0; k < lg->n_extra; k++) {
            pti_group_extra *e = NULL;
            for (int j = 0; j < grp->n_extra; j++)
                if (strcmp(grp->extra[j].name, lg->extra[k].name) == 0)
                    e = &grp->extra[j];
            if (e) {
                e->v = lg->extra[k].v;
                e->is_int = lg->extra[k].is_int;
                continue;
            }
            pti_group_extra *es = pti_realloc(grp->extra, sizeof(*es) * (size_t)(grp->n_extra + 1));
            if (!es)
                continue; /* out of memory: the key is dropped, nothing else is affected */
            grp->extra = es;
            es[grp->n_extra++] = lg->extra[k];
            lg->extra[k].name = NULL;
        }
        loaded_free(lg, grp->n);
    }
}

pt_status pt_optim_load_state_dict(pt_optim *o, const pt_value *sd)
{
    if (!o)
        return pti_error(PT_ERR_NULL, "%s: optimizer is NULL", OP);
    if (!sd)
        return pti_error(PT_ERR_NULL, "%s: state dict is NULL", OP);
    const pt_value *state = NULL, *groups = NULL;
    pt_status st = check_layout(o, sd, &state, &groups);
    if (st != PT_OK)
        return st;
    loaded_group *lgs = pti_calloc(o->n_groups > 0 ? (size_t)o->n_groups : 1, sizeof(*lgs));
    if (!lgs)
        return pti_error(PT_ERR_OOM, "%s: out of memory", OP);
    for (int g = 0; g < o->n_groups && st == PT_OK; g++) {
        const pt_value *sg = pt_value_item_ref(groups, g);
        st = load_group_opts(o, &o->groups[g], sg, &lgs[g]);
        if (st == PT_OK && !o->def->load_param_state)
            st = load_group_state(o, g, sg, state, &lgs[g]);
    }
    /* algorithms with their own state format read it per parameter */
    for (int g = 0, gi = 0; g < o->n_groups && st == PT_OK && o->def->load_param_state; g++) {
        const pt_value *ids = find_str(pt_value_item_ref(groups, g), "params");
        for (int i = 0; i < o->groups[g].n && st == PT_OK; i++, gi++) {
            int64_t id = gi;
            pt_value_as_int(pt_value_item_ref(ids, i), &id);
            st = o->def->load_param_state(o, g, i, find_int(state, id));
        }
    }
    if (st == PT_OK) {
        commit_groups(o, lgs);
    } else {
        for (int g = 0; g < o->n_groups; g++)
            loaded_free(&lgs[g], o->groups[g].n);
    }
    free(lgs);
    return st;
}
