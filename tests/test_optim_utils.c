/* Tests for the training utilities (include/prometorch/optim_utils.h): clip_grad_norm_ /
 * clip_grad_value_ against torch 1.13 (float32 and float64, several norms, grads missing or
 * non-finite), EMA weights against AveragedModel and timm's ModelEmaV2 formula, and a
 * GradScaler run with injected inf/NaN grads against torch's GradScaler algorithm (fixtures
 * from tests/fixtures/gen/optim_utils.py). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/testutil.h"

static pt_fixture *fx;

/* float32 reductions may sum in another order than torch: a few ulps */
#define RTOL32 1e-6
#define ATOL32 1e-7

static pt_tensor *fx_get_as(const char *name, pt_dtype dt)
{
    pt_tensor *t = fx_get(fx, name);
    pt_tensor *r = pt_to_dtype(t, dt);
    pt_release(t);
    return r;
}

static void set_grad(pt_tensor *p, const char *name, pt_dtype dt)
{
    pt_tensor *g = fx_get_as(name, dt);
    assert_int_equal(pt_set_grad(p, g), PT_OK);
    pt_release(g);
}

static void assert_grad(pt_tensor *p, const char *name, double rtol, double atol)
{
    pt_tensor *want = fx_get(fx, name);
    pt_tensor *g = pt_grad(p);
    assert_tensor_close(g, want, rtol, atol);
    pt_release(g);
    pt_release(want);
}

/* ---- clipping -------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    double max_norm, p;
} CLIP[] = {
    {"l2", 1.0, 2.0}, {"l2_noclip", 100.0, 2.0}, {"inf", 0.5, INFINITY},
    {"l1", 2.0, 1.0}, {"p3_5", 0.7, 3.5},
};

static void test_clip_grad_norm(void **state)
{
    (void)state;
    for (int dti = 0; dti < 2; dti++) {
        pt_dtype dt = dti ? PT_FLOAT64 : PT_FLOAT32;
        double rtol = dti ? 1e-12 : RTOL32, atol = dti ? 1e-14 : ATOL32;
        for (size_t k = 0; k < sizeof CLIP / sizeof CLIP[0]; k++) {
            pt_tensor *W = pt_zeros(PT_SHAPE(5, 4), dt, pt_cpu());
            pt_tensor *b = pt_zeros(PT_SHAPE(5), dt, pt_cpu());
            pt_tensor *c = pt_zeros(PT_SHAPE(3), dt, pt_cpu());
            pt_set_requires_grad(W, true);
            pt_set_requires_grad(b, true);
            pt_set_requires_grad(c, true);
            set_grad(W, "clip.gW", dt);
            set_grad(b, "clip.gb", dt);
            double total = -1;
            pt_tensor *ps[3] = {W, b, c};
            assert_int_equal(pt_clip_grad_norm_(3, ps, CLIP[k].max_norm, CLIP[k].p, true, &total),
                             PT_OK);
            char key[64];
            const char *sfx = dti ? "_f64" : "";
            snprintf(key, sizeof key, "clip.%s%s.total", CLIP[k].name, sfx);
            pt_tensor *want = fx_get(fx, key);
            assert_true(fabs(total - pt_item(want)) <= rtol * fabs(pt_item(want)));
            pt_release(want);
            snprintf(key, sizeof key, "clip.%s%s.gW", CLIP[k].name, sfx);
            assert_grad(W, key, rtol, atol);
            snprintf(key, sizeof key, "clip.%s%s.gb", CLIP[k].name, sfx);
            assert_grad(b, key, rtol, atol);
            pt_tensor *gc = pt_grad(c);
            assert_null(gc); /* no grad stays no grad */
            pt_release(W);
            pt_release(b);
            pt_release(c);
        }
    }
}

static void test_clip_nonfinite_and_value(void **state)
{
    (void)state;
    pt_tensor *W = pt_zeros(PT_SHAPE(5, 4), PT_FLOAT32, pt_cpu());
    pt_set_requires_grad(W, true);
    pt_tensor *g = fx_get(fx, "clip.gW");
    float *gd = pt_data_ptr(g);
    gd[1 * 4 + 2] = INFINITY;
    assert_int_equal(pt_set_grad(W, g), PT_OK);
    pt_release(g);
    /* error_if_nonfinite: an error and the grads untouched */
    double total = 0;
    assert_pt_status_error(pt_clip_grad_norm_(1, &W, 1.0, 2.0, true, &total), PT_ERR_RUNTIME,
                           "non-finite, so it cannot be clipped");
    pt_tensor *gw = pt_grad(W);
    assert_true(isinf(pt_test_get(gw, 6)));
    assert_true(pt_test_get(gw, 0) != 0.0);
    pt_release(gw);
    /* without: torch's result (inf norm, coefficient 0, the inf entry becomes NaN) */
    assert_int_equal(pt_clip_grad_norm_(1, &W, 1.0, 2.0, false, &total), PT_OK);
    assert_true(isinf(total));
    assert_grad(W, "clip.nonfinite.gW", 0, 0);

    set_grad(W, "clip.gW", PT_FLOAT32);
    assert_int_equal(pt_clip_grad_value_(1, &W, 0.3), PT_OK);
    assert_grad(W, "clip.value.gW", 0, 0);

    /* no grads at all: total 0, nothing to do */
    pt_tensor *c = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_set_requires_grad(c, true);
    total = -1;
    assert_int_equal(pt_clip_grad_norm_(1, &c, 1.0, 2.0, true, &total), PT_OK);
    assert_true(total == 0.0);
    assert_pt_status_error(pt_clip_grad_value_(1, &W, -1.0), PT_ERR_INVALID_ARG, "clip_value");
    pt_tensor *bad[2] = {W, NULL};
    assert_pt_status_error(pt_clip_grad_norm_(2, bad, 1.0, 2.0, false, NULL), PT_ERR_NULL,
                           "parameter 1 is NULL");
    pt_release(c);
    pt_release(W);
}

/* ---- a tiny module: w [4, 3], b [3], buffer running [3] -------------------------------------- */

static const pt_module_def TINY_DEF = {.type_name = "Tiny"};

static pt_module *tiny_new(void)
{
    pt_module *m = pt_nn_module_new(&TINY_DEF, NULL);
    pt_tensor *w = fx_get(fx, "ema.w0");
    pt_tensor *b = fx_get(fx, "ema.b0");
    pt_tensor *r = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_nn_register_parameter(m, "w", w), PT_OK);
    assert_int_equal(pt_nn_register_parameter(m, "b", b), PT_OK);
    assert_int_equal(pt_nn_register_buffer(m, "running", r, true), PT_OK);
    pt_release(w);
    pt_release(b);
    pt_release(r);
    return m;
}

static void test_clip_module(void **state)
{
    (void)state;
    pt_module *m = tiny_new();
    pt_tensor *w = pt_nn_param_ref(m, "w");
    pt_tensor *g = pt_full(PT_SHAPE(4, 3), 2.0, PT_FLOAT32, pt_cpu());
    pt_set_grad(w, g);
    double total = 0;
    /* only w has a grad: norm sqrt(12 * 4), scaled to norm 1 */
    assert_int_equal(pt_nn_clip_grad_norm_(m, 1.0, 2.0, false, &total), PT_OK);
    assert_true(fabs(total - sqrt(48.0)) < 1e-6);
    pt_tensor *gw = pt_grad(w);
    assert_true(fabs(pt_test_get(gw, 0) - 2.0 / (sqrt(48.0) + 1e-6)) < 1e-7);
    assert_int_equal(pt_nn_clip_grad_value_(m, 0.1), PT_OK);
    pt_release(gw);
    gw = pt_grad(w);
    assert_true(fabs(pt_test_get(gw, 5) - 0.1) < 1e-7);
    pt_release(gw);
    pt_release(g);
    pt_nn_free(m);
}

/* ---- EMA ------------------------------------------------------------------------------------- */

static void load_step(pt_module *m, const char *name, int k)
{
    pt_tensor *all = fx_get(fx, name);
    pt_tensor *row = pt_select(all, 0, k);
    pt_tensor *dst = pt_nn_param_ref(m, name[4] == 'w' ? "w" : "b");
    pt_no_grad_begin();
    assert_int_equal(pt_copy_(dst, row), PT_OK);
    pt_no_grad_end();
    pt_release(row);
    pt_release(all);
}

static void check_row(const pt_tensor *t, const char *name, int k)
{
    pt_tensor *all = fx_get(fx, name);
    pt_tensor *row = pt_select(all, 0, k);
    assert_tensor_close(t, row, RTOL32, ATOL32);
    pt_release(row);
    pt_release(all);
}

static void run_ema(bool averaged_model, const char *want_w, const char *want_b)
{
    pt_module *m = tiny_new();
    pt_ema_opts o = PT_EMA_DEFAULTS;
    o.decay = 0.9;
    o.averaged_model = averaged_model;
    pt_ema *e = pt_ema_new(m, o);
    assert_non_null(e);
    assert_int_equal(pt_ema_num_params(e), 2);
    pt_tensor *running = pt_nn_buffer_ref(m, "running");
    for (int k = 0; k < 6; k++) {
        load_step(m, "ema.w", k);
        load_step(m, "ema.b", k);
        pt_fill_(running, (double)k);
        assert_int_equal(pt_ema_update(e, m), PT_OK);
        check_row(pt_ema_param_ref(e, 0), want_w, k);
        check_row(pt_ema_param_ref(e, 1), want_b, k);
        assert_false(pt_requires_grad(pt_ema_param_ref(e, 0)));
    }
    assert_int_equal(pt_ema_num_updates(e), 6);
    /* swap puts the averages into the module (buffers: the last copied values) and back */
    assert_int_equal(pt_ema_swap(e, m), PT_OK);
    check_row(pt_nn_param_ref(m, "w"), want_w, 5);
    assert_true(pt_test_get(pt_nn_buffer_ref(m, "running"), 0) == 5.0);
    assert_int_equal(pt_ema_swap(e, m), PT_OK);
    check_row(pt_nn_param_ref(m, "w"), "ema.w", 5);
    check_row(pt_ema_param_ref(e, 0), want_w, 5);
    assert_int_equal(pt_ema_copy_to(e, m), PT_OK);
    check_row(pt_nn_param_ref(m, "b"), want_b, 5);
    pt_ema_free(e);
    pt_nn_free(m);
}

static void test_ema_matches_averaged_model_and_timm(void **state)
{
    (void)state;
    run_ema(true, "ema.avg_w", "ema.avg_b");
    run_ema(false, "ema.timm_w", "ema.timm_b");
}

static void test_ema_errors(void **state)
{
    (void)state;
    pt_module *m = tiny_new();
    pt_ema_opts o = {.decay = 1.5};
    assert_pt_error(pt_ema_new(m, o), PT_ERR_INVALID_ARG, "decay must be in [0, 1]");
    assert_pt_error(pt_ema_new(NULL, PT_EMA_DEFAULTS), PT_ERR_NULL, "module is NULL");
    pt_ema *e = pt_ema_new(m, PT_EMA_DEFAULTS);
    pt_module *other = pt_nn_module_new(&TINY_DEF, NULL);
    assert_pt_status_error(pt_ema_update(e, other), PT_ERR_INVALID_ARG, "the EMA holds 2");
    assert_int_equal(pt_ema_num_updates(e), 0);
    pt_nn_free(other);
    pt_ema_free(e);
    pt_nn_free(m);
}

/* ---- GradScaler ------------------------------------------------------------------------------ */

static void test_grad_scaler_matches_torch(void **state)
{
    (void)state;
    pt_tensor *x = fx_get(fx, "scaler.x");
    pt_tensor *p = fx_get(fx, "scaler.p0");
    pt_set_requires_grad(p, true);
    pt_optim *opt = pt_optim_sgd_params(1, &p, (pt_sgd_opts){.lr = 0.1});
    pt_grad_scaler_opts so = PT_GRAD_SCALER_DEFAULTS;
    so.growth_interval = 3;
    pt_grad_scaler *gs = pt_grad_scaler_new(so);
    assert_true(pt_grad_scaler_get_scale(gs) == 65536.0);
    pt_tensor *want_p = fx_get(fx, "scaler.p");
    pt_tensor *want_scale = fx_get(fx, "scaler.scale");
    pt_tensor *want_tracker = fx_get(fx, "scaler.tracker");
    pt_tensor *want_skipped = fx_get(fx, "scaler.skipped");
    for (int it = 0; it < 12; it++) {
        pt_optim_zero_grad(opt);
        pt_scope_begin();
        pt_tensor *loss = pt_add(pt_sum(pt_mul(pt_mul(p, p), x)), pt_sum(p));
        assert_int_equal(pt_backward(pt_grad_scaler_scale(gs, loss), NULL, false, false), PT_OK);
        pt_scope_end();
        if (it == 2 || it == 3 || it == 8) {
            pt_tensor *g = pt_grad(p);
            ((float *)pt_data_ptr(g))[1] = it == 3 ? NAN : INFINITY;
            pt_release(g);
        }
        bool skipped = false;
        assert_int_equal(pt_grad_scaler_step(gs, opt, &skipped), PT_OK);
        assert_int_equal(skipped, pt_test_get(want_skipped, it) != 0);
        assert_int_equal(pt_grad_scaler_update(gs), PT_OK);
        assert_true(pt_grad_scaler_get_scale(gs) == pt_test_get(want_scale, it));
        assert_int_equal(pt_grad_scaler_growth_tracker(gs), (int64_t)pt_test_get(want_tracker, it));
        pt_tensor *row = pt_select(want_p, 0, it);
        assert_tensor_close(p, row, RTOL32, ATOL32);
        pt_release(row);
    }
    /* state dict round trip */
    pt_value *sd = pt_grad_scaler_state_dict(gs);
    pt_grad_scaler *gs2 = pt_grad_scaler_new(PT_GRAD_SCALER_DEFAULTS);
    assert_int_equal(pt_grad_scaler_load_state_dict(gs2, sd), PT_OK);
    assert_true(pt_grad_scaler_get_scale(gs2) == pt_grad_scaler_get_scale(gs));
    assert_int_equal(pt_grad_scaler_growth_tracker(gs2), pt_grad_scaler_growth_tracker(gs));
    int64_t interval;
    assert_int_equal(pt_value_as_int(pt_value_get_str_ref(sd, "growth_interval"), &interval),
                     PT_OK);
    assert_int_equal(interval, 3);
    pt_value_free(sd);
    pt_grad_scaler_free(gs2);
    pt_release(want_p);
    pt_release(want_scale);
    pt_release(want_tracker);
    pt_release(want_skipped);
    pt_grad_scaler_free(gs);
    pt_optim_free(opt);
    pt_release(p);
    pt_release(x);
}

static void test_grad_scaler_unscale_and_errors(void **state)
{
    (void)state;
    pt_tensor *p = pt_zeros(PT_SHAPE(3), PT_FLOAT16, pt_cpu());
    pt_set_requires_grad(p, true);
    pt_optim *opt = pt_optim_sgd_params(1, &p, (pt_sgd_opts){.lr = 0.1});
    pt_grad_scaler_opts so = PT_GRAD_SCALER_DEFAULTS;
    so.init_scale = 1024.0;
    pt_grad_scaler *gs = pt_grad_scaler_new(so);
    /* update without any inf check */
    assert_pt_status_error(pt_grad_scaler_update(gs), PT_ERR_RUNTIME, "No inf checks");
    /* step with no grads */
    assert_pt_status_error(pt_grad_scaler_step(gs, opt, NULL), PT_ERR_RUNTIME,
                           "No inf checks were recorded for this optimizer");
    pt_grad_scaler_update_to(gs, 1024.0);
    /* a float16 grad of 512 unscales to 0.5 */
    pt_tensor *g = pt_full(PT_SHAPE(3), 512.0, PT_FLOAT16, pt_cpu());
    pt_set_grad(p, g);
    pt_release(g);
    assert_int_equal(pt_grad_scaler_unscale_(gs, opt), PT_OK);
    g = pt_grad(p);
    assert_true(pt_test_get(g, 2) == 0.5);
    pt_release(g);
    assert_pt_status_error(pt_grad_scaler_unscale_(gs, opt), PT_ERR_RUNTIME, "already been called");
    assert_int_equal(pt_grad_scaler_step(gs, opt, NULL), PT_OK);
    assert_pt_status_error(pt_grad_scaler_step(gs, opt, NULL), PT_ERR_RUNTIME,
                           "step() has already been called");
    assert_int_equal(pt_grad_scaler_update(gs), PT_OK);
    assert_int_equal(pt_grad_scaler_growth_tracker(gs), 1);
    so.growth_factor = 1.0;
    assert_pt_error(pt_grad_scaler_new(so), PT_ERR_INVALID_ARG, "growth factor must be > 1.0");
    so = PT_GRAD_SCALER_DEFAULTS;
    so.backoff_factor = 1.0;
    assert_pt_error(pt_grad_scaler_new(so), PT_ERR_INVALID_ARG, "backoff factor");
    /* disabled: scale() is the identity, get_scale 1 */
    so = PT_GRAD_SCALER_DEFAULTS;
    so.disabled = true;
    pt_grad_scaler *off = pt_grad_scaler_new(so);
    assert_true(pt_grad_scaler_get_scale(off) == 1.0);
    pt_grad_scaler_free(off);
    pt_grad_scaler_free(gs);
    pt_optim_free(opt);
    pt_release(p);
}

int main(void)
{
    fx = fx_open("optim_utils");
#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)
    const struct CMUnitTest tests[] = {
        T(test_clip_grad_norm),
        T(test_clip_nonfinite_and_value),
        T(test_clip_module),
        T(test_ema_matches_averaged_model_and_timm),
        T(test_ema_errors),
        T(test_grad_scaler_matches_torch),
        T(test_grad_scaler_unscale_and_errors),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
