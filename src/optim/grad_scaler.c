/* Loss scaling for float16 training (include/prometorch/optim_utils.h): torch.cuda.amp.GradScaler
 * of torch 1.13 on any device. The scale is kept as a float32 value (torch keeps a float32
 * tensor), unscaling multiplies grads by the float32 rounding of the float64 reciprocal, and
 * update() is torch's _amp_update_scale_. Per-optimizer state (stage, found_inf) lives in a
 * small table reset by every update. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "prometorch/optim_utils.h"
#include "prometorch/prometorch.h"

typedef enum stage { STAGE_READY = 0, STAGE_UNSCALED, STAGE_STEPPED } stage;

typedef struct opt_state {
    const pt_optim *opt;
    stage stage;
    bool found_inf;
    bool checked; /* found_inf recorded (at least one grad seen) */
} opt_state;

struct pt_grad_scaler {
    pt_grad_scaler_opts opts;
    float scale;
    int64_t growth_tracker;
    int n_states, cap_states;
    opt_state *states;
};

pt_grad_scaler *pt_grad_scaler_new(pt_grad_scaler_opts o)
{
    const char *op = "pt_grad_scaler_new";
    if (!(o.growth_factor > 1.0))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s: The growth factor must be > 1.0, got %g", op,
                              o.growth_factor);
    if (!(o.backoff_factor < 1.0 && o.backoff_factor > 0))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: The backoff factor must be < 1.0 (and > 0), got %g", op,
                              o.backoff_factor);
    if (o.growth_interval <= 0 || !(o.init_scale > 0) || !isfinite(o.init_scale))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: growth_interval and init_scale must be > 0, got %lld and %g", op,
                              (long long)o.growth_interval, o.init_scale);
    pt_grad_scaler *gs = pti_calloc(1, sizeof *gs);
    if (!gs)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", op);
    gs->opts = o;
    gs->scale = (float)o.init_scale;
    return gs;
}

void pt_grad_scaler_free(pt_grad_scaler *gs)
{
    if (!gs)
        return;
    free(gs->states);
    free(gs);
}

static opt_state *state_of(pt_grad_scaler *gs, const pt_optim *o)
{
    for (int i = 0; i < gs->n_states; i++)
        if (gs->states[i].opt == o)
            return &gs->states[i];
    if (gs->n_states == gs->cap_states) {
        int cap = gs->cap_states ? gs->cap_states * 2 : 4;
        opt_state *s = pti_realloc(gs->states, sizeof *s * (size_t)cap);
        if (!s)
            return pti_error_null(PT_ERR_OOM, "pt_grad_scaler: out of memory");
        gs->states = s;
        gs->cap_states = cap;
    }
    opt_state *s = &gs->states[gs->n_states++];
    *s = (opt_state){.opt = o};
    return s;
}

pt_tensor *pt_grad_scaler_scale(pt_grad_scaler *gs, const pt_tensor *loss)
{
    if (!gs)
        return pti_error_null(PT_ERR_NULL, "pt_grad_scaler_scale: scaler is NULL");
    if (!PTI_CHECK_ARG(loss, "pt_grad_scaler_scale", "loss"))
        return NULL;
    if (gs->opts.disabled)
        return pt_retain((pt_tensor *)loss);
    return pt_mul_scalar(loss, (double)gs->scale);
}

/* Multiplies grad g by inv in place; *found |= g had inf/NaN (checked before scaling). */
static pt_status unscale_one(pt_tensor *g, double inv, bool *found)
{
    pt_scope_begin();
    pt_tensor *bad_inf = pt_any(pt_isinf(g));
    pt_tensor *bad_nan = pt_any(pt_isnan(g));
    pt_status st = bad_inf && bad_nan ? PT_OK : pt_last_status();
    if (st == PT_OK && (pt_item(bad_inf) != 0 || pt_item(bad_nan) != 0))
        *found = true;
    if (st == PT_OK)
        st = pt_mul_scalar_(g, inv);
    pt_scope_end();
    return st;
}

static pt_status unscale_grads(pt_grad_scaler *gs, pt_optim *o, opt_state *s)
{
    double inv = (double)(float)(1.0 / (double)gs->scale);
    pt_status st = PT_OK;
    pt_no_grad_begin();
    for (int g = 0; st == PT_OK && g < pt_optim_num_groups(o); g++) {
        for (int i = 0; st == PT_OK && i < pt_optim_group_size(o, g); i++) {
            pt_tensor *grad = pt_grad(pt_optim_group_param_ref(o, g, i));
            if (!grad)
                continue;
            s->checked = true;
            st = unscale_one(grad, inv, &s->found_inf);
            pt_release(grad);
        }
    }
    pt_no_grad_end();
    return st;
}

pt_status pt_grad_scaler_unscale_(pt_grad_scaler *gs, pt_optim *o)
{
    const char *op = "pt_grad_scaler_unscale_";
    if (!gs || !o)
        return pti_error(PT_ERR_NULL, "%s: scaler or optimizer is NULL", op);
    if (gs->opts.disabled)
        return PT_OK;
    opt_state *s = state_of(gs, o);
    if (!s)
        return pt_last_status();
    if (s->stage == STAGE_UNSCALED)
        return pti_error(PT_ERR_RUNTIME,
                         "%s: unscale_() has already been called on this "
                         "optimizer since the last update().",
                         op);
    if (s->stage == STAGE_STEPPED)
        return pti_error(PT_ERR_RUNTIME, "%s: unscale_() is being called after step().", op);
    pt_status st = unscale_grads(gs, o, s);
    if (st == PT_OK)
        s->stage = STAGE_UNSCALED;
    return st;
}

pt_status pt_grad_scaler_step(pt_grad_scaler *gs, pt_optim *o, bool *skipped)
{
    const char *op = "pt_grad_scaler_step";
    if (skipped)
        *skipped = false;
    if (!gs || !o)
        return pti_error(PT_ERR_NULL, "%s: scaler or optimizer is NULL", op);
    if (gs->opts.disabled)
        return pt_optim_step(o);
    opt_state *s = state_of(gs, o);
    if (!s)
        return pt_last_status();
    if (s->stage == STAGE_STEPPED)
        return pti_error(PT_ERR_RUNTIME,
                         "%s: step() has already been called since the last update().", op);
    if (s->stage == STAGE_READY) {
        pt_status st = pt_grad_scaler_unscale_(gs, o);
        if (st != PT_OK)
            return st;
    }
    if (!s->checked)
        return pti_error(PT_ERR_RUNTIME, "%s: No inf checks were recorded for this optimizer.", op);
    pt_status st = PT_OK;
    if (s->found_inf) {
        if (skipped)
            *skipped = true;
    } else {
        st = pt_optim_step(o);
    }
    s->stage = STAGE_STEPPED;
    return st;
}

pt_status pt_grad_scaler_update(pt_grad_scaler *gs)
{
    if (!gs)
        return pti_error(PT_ERR_NULL, "pt_grad_scaler_update: scaler is NULL");
    if (gs->opts.disabled)
        return PT_OK;
    bool any_checked = false, found = false;
    for (int i = 0; i < gs->n_states; i++) {
        any_checked = any_checked || gs->states[i].checked;
        found = found || gs->states[i].found_inf;
    }
    if (!any_checked)
        return pti_error(PT_ERR_RUNTIME,
                         "pt_grad_scaler_update: No inf checks were recorded prior to update.");
    /* torch._amp_update_scale_, with the scale in float32 */
    if (found) {
        gs->scale = gs->scale * (float)gs->opts.backoff_factor;
        gs->growth_tracker = 0;
    } else {
        int64_t successful = gs->growth_tracker + 1;
        if (successful == gs->opts.growth_interval) {
            gs->scale = gs->scale * (float)gs->opts.growth_factor;
            gs->growth_tracker = 0;
        } else {
            gs->growth_tracker = successful;
        }
    }
    gs->n_states = 0;
    return PT_OK;
}

pt_status pt_grad_scaler_update_to(pt_grad_scaler *gs, double new_scale)
{
    if (!gs)
        return pti_error(PT_ERR_NULL, "pt_grad_scaler_update_to: scaler is NULL");
    if (!(new_scale > 0) || !isfinite(new_scale))
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_grad_scaler_update_to: new_scale must be finite and > 0, got %g",
                         new_scale);
    if (!gs->opts.disabled)
        gs->scale = (float)new_scale;
    gs->n_states = 0;
    return PT_OK;
}

double pt_grad_scaler_get_scale(const pt_grad_scaler *gs)
{
    if (!gs) {
        pti_error(PT_ERR_NULL, "pt_grad_scaler_get_scale: scaler is NULL");
        return NAN;
    }
    return gs->opts.disabled ? 1.0 : (double)gs->scale;
}

int64_t pt_grad_scaler_growth_tracker(const pt_grad_scaler *gs)
{
    return gs ? gs->growth_tracker : -1;
}

pt_value *pt_grad_scaler_state_dict(const pt_grad_scaler *gs)
{
    if (!gs)
        return pti_error_null(PT_ERR_NULL, "pt_grad_scaler_state_dict: scaler is NULL");
    pt_value *d = pt_value_dict();
    if (!d || gs->opts.disabled)
        return d;
    if (pt_value_dict_set_str(d, "scale", pt_value_float((double)gs->scale)) != PT_OK ||
        pt_value_dict_set_str(d, "growth_factor", pt_value_float(gs->opts.growth_factor)) !=
            PT_OK ||
        pt_value_dict_set_str(d, "backoff_factor", pt_value_float(gs->opts.backoff_factor)) !=
            PT_OK ||
        pt_value_dict_set_str(d, "growth_interval", pt_value_int(gs->opts.growth_interval)) !=
            PT_OK ||
        pt_value_dict_set_str(d, "_growth_tracker", pt_value_int(gs->growth_tracker)) != PT_OK) {
        pt_value_free(d);
        return NULL;
    }
    return d;
}

pt_status pt_grad_scaler_load_state_dict(pt_grad_scaler *gs, const pt_value *sd)
{
    const char *op = "pt_grad_scaler_load_state_dict";
    if (!gs || !sd)
        return pti_error(PT_ERR_NULL, "%s: scaler or state dict is NULL", op);
    if (gs->opts.disabled)
        return PT_OK;
    if (!pt_value_is(sd, PT_VALUE_DICT) || pt_value_len(sd) == 0)
        return pti_error(PT_ERR_RUNTIME,
                         "%s: The source state dict is empty, possibly because "
                         "it was saved from a disabled instance of GradScaler.",
                         op);
    double scale, growth, backoff;
    int64_t interval, tracker;
    if (pt_value_as_float(pt_value_get_str_ref(sd, "scale"), &scale) != PT_OK ||
        pt_value_as_float(pt_value_get_str_ref(sd, "growth_factor"), &growth) != PT_OK ||
        pt_value_as_float(pt_value_get_str_ref(sd, "backoff_factor"), &backoff) != PT_OK ||
        pt_value_as_int(pt_value_get_str_ref(sd, "growth_interval"), &interval) != PT_OK ||
        pt_value_as_int(pt_value_get_str_ref(sd, "_growth_tracker"), &tracker) != PT_OK)
        return pti_error(PT_ERR_INVALID_ARG, "%s: missing key or wrong type (%s)", op,
                         pt_last_error());
    gs->scale = (float)scale;
    gs->opts.growth_factor = growth;
    gs->opts.backoff_factor = backoff;
    gs->opts.growth_interval = interval;
    gs->growth_tracker = tracker;
    return PT_OK;
}
