/* Tests for the LR schedulers (include/prometorch/lr_scheduler.h): lr (and momentum / betas[0])
 * sequences against torch.optim.lr_scheduler 1.13 from tests/fixtures/gen/lr_scheduler.py,
 * two parameter groups each, within 1e-12 relative; explicit-epoch steps; state dicts and
 * resuming; error paths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/testutil.h"

static pt_fixture *fx;

/* ---- the optimizer: two groups (lr 0.1 and 0.05), SGD momentum 0.9 or Adam ------------------- */

typedef struct setup {
    pt_tensor *a, *b;
    pt_optim *opt;
} setup;

static setup setup_new(bool adam)
{
    setup su;
    su.a = pt_zeros(PT_SHAPE(2), PT_FLOAT32, pt_cpu());
    su.b = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_set_requires_grad(su.a, true);
    pt_set_requires_grad(su.b, true);
    if (adam) {
        pt_adam_opts o = PT_ADAM_DEFAULTS;
        o.lr = 0.1;
        su.opt = pt_optim_adam_params(1, &su.a, o);
        o.lr = 0.05;
        assert_int_equal(pt_optim_add_param_group(su.opt, 1, &su.b, &o), PT_OK);
    } else {
        pt_sgd_opts o = {.lr = 0.1, .momentum = 0.9};
        su.opt = pt_optim_sgd_params(1, &su.a, o);
        o.lr = 0.05;
        assert_int_equal(pt_optim_add_param_group(su.opt, 1, &su.b, &o), PT_OK);
    }
    assert_non_null(su.opt);
    return su;
}

static void setup_free(setup *su)
{
    pt_optim_free(su->opt);
    pt_release(su->a);
    pt_release(su->b);
}

static double momentum_of(pt_optim *o, int g)
{
    double v = NAN;
    if (pt_optim_has_option(o, g, "betas"))
        assert_int_equal(pt_optim_get_option(o, g, "betas", 0, &v), PT_OK);
    else
        assert_int_equal(pt_optim_get_option(o, g, "momentum", 0, &v), PT_OK);
    return v;
}

/* ---- cases (settings must match tests/fixtures/gen/lr_scheduler.py) -------------------------- */

static double lambda_095(int64_t e, void *user)
{
    (void)user;
    return pow(0.95, (double)e);
}

static double lambda_097(int64_t e, void *user)
{
    (void)user;
    (void)e;
    return 0.97;
}

static pt_lr_scheduler *mk_step(pt_optim *o)
{
    return pt_lr_step_lr(o, 3, 0.5);
}
static pt_lr_scheduler *mk_multistep(pt_optim *o)
{
    return pt_lr_multistep_lr(o, 4, (const int64_t[]){5, 10, 10, 20}, 0.3);
}
static pt_lr_scheduler *mk_exponential(pt_optim *o)
{
    return pt_lr_exponential_lr(o, 0.9);
}
static pt_lr_scheduler *mk_cosine(pt_optim *o)
{
    return pt_lr_cosine_annealing_lr(o, 10, 0.001);
}
static pt_lr_scheduler *mk_cosine7(pt_optim *o)
{
    return pt_lr_cosine_annealing_lr(o, 7, 0);
}
static pt_lr_scheduler *mk_wr(pt_optim *o)
{
    return pt_lr_cosine_annealing_warm_restarts(o, 5, 1, 0.01);
}
static pt_lr_scheduler *mk_wr_mult2(pt_optim *o)
{
    return pt_lr_cosine_annealing_warm_restarts(o, 3, 2, 0);
}
static pt_lr_scheduler *mk_wr_epochs(pt_optim *o)
{
    return pt_lr_cosine_annealing_warm_restarts(o, 3, 2, 0.001);
}
static pt_lr_scheduler *mk_wr_epochs_mult1(pt_optim *o)
{
    return pt_lr_cosine_annealing_warm_restarts(o, 4, 1, 0);
}
static pt_lr_scheduler *mk_linear(pt_optim *o)
{
    return pt_lr_linear_lr(o, 0.25, 1.0, 8);
}
static pt_lr_scheduler *mk_linear_decay(pt_optim *o)
{
    return pt_lr_linear_lr(o, 1.0, 0.1, 10);
}
static pt_lr_scheduler *mk_constant(pt_optim *o)
{
    return pt_lr_constant_lr(o, 0.5, 4);
}
static pt_lr_scheduler *mk_polynomial(pt_optim *o)
{
    return pt_lr_polynomial_lr(o, 10, 2.0);
}
static pt_lr_scheduler *mk_lambda(pt_optim *o)
{
    return pt_lr_lambda_lr(o, lambda_095, NULL);
}
static pt_lr_scheduler *mk_multiplicative(pt_optim *o)
{
    return pt_lr_multiplicative_lr(o, lambda_097, NULL);
}
static pt_lr_scheduler *mk_cyclic_triangular(pt_optim *o)
{
    pt_cyclic_lr_opts c = PT_CYCLIC_LR_DEFAULTS;
    c.base_lr = 0.01;
    c.max_lr = 0.1;
    c.step_size_up = 4;
    return pt_lr_cyclic_lr(o, c);
}
static pt_lr_scheduler *mk_cyclic_triangular2(pt_optim *o)
{
    pt_cyclic_lr_opts c = PT_CYCLIC_LR_DEFAULTS;
    c.base_lrs = (const double[]){0.01, 0.02};
    c.max_lrs = (const double[]){0.1, 0.3};
    c.step_size_up = 3;
    c.step_size_down = 5;
    c.mode = PT_CYCLIC_TRIANGULAR2;
    c.base_momentum = 0.7;
    c.max_momentum = 0.95;
    return pt_lr_cyclic_lr(o, c);
}
/* triangular2 through a user scale_fn over the cycle number: same sequence as the mode */
static double halving(double cycle, void *user)
{
    (void)user;
    return 1 / pow(2., cycle - 1);
}
static pt_lr_scheduler *mk_cyclic_custom_fn(pt_optim *o)
{
    pt_cyclic_lr_opts c = PT_CYCLIC_LR_DEFAULTS;
    c.base_lrs = (const double[]){0.01, 0.02};
    c.max_lrs = (const double[]){0.1, 0.3};
    c.step_size_up = 3;
    c.step_size_down = 5;
    c.scale_fn = halving;
    c.base_momentum = 0.7;
    c.max_momentum = 0.95;
    return pt_lr_cyclic_lr(o, c);
}
static pt_lr_scheduler *mk_cyclic_exp_range(pt_optim *o)
{
    pt_cyclic_lr_opts c = PT_CYCLIC_LR_DEFAULTS;
    c.base_lr = 0.01;
    c.max_lr = 0.1;
    c.step_size_up = 5;
    c.mode = PT_CYCLIC_EXP_RANGE;
    c.gamma = 0.95;
    c.cycle_momentum = false;
    return pt_lr_cyclic_lr(o, c);
}
static pt_lr_scheduler *mk_onecycle_cos(pt_optim *o)
{
    pt_one_cycle_lr_opts c = PT_ONE_CYCLE_LR_DEFAULTS;
    c.max_lrs = (const double[]){0.5, 0.2};
    c.total_steps = 30;
    return pt_lr_one_cycle_lr(o, c);
}
static pt_lr_scheduler *mk_onecycle_three_phase(pt_optim *o)
{
    pt_one_cycle_lr_opts c = PT_ONE_CYCLE_LR_DEFAULTS;
    c.max_lr = 0.4;
    c.total_steps = 25;
    c.pct_start = 0.25;
    c.anneal_linear = true;
    c.div_factor = 10.0;
    c.final_div_factor = 100.0;
    c.three_phase = true;
    return pt_lr_one_cycle_lr(o, c);
}
static pt_lr_scheduler *mk_onecycle_epochs(pt_optim *o)
{
    pt_one_cycle_lr_opts c = PT_ONE_CYCLE_LR_DEFAULTS;
    c.max_lr = 0.3;
    c.epochs = 4;
    c.steps_per_epoch = 5;
    c.cycle_momentum = false;
    return pt_lr_one_cycle_lr(o, c);
}
static pt_lr_scheduler *mk_sequential(pt_optim *o)
{
    pt_lr_scheduler *s[2] = {pt_lr_linear_lr(o, 0.1, 1.0, 4), pt_lr_exponential_lr(o, 0.9)};
    return pt_lr_sequential_lr(o, 2, s, (const int64_t[]){4});
}
static pt_lr_scheduler *mk_sequential3(pt_optim *o)
{
    pt_lr_scheduler *s[3] = {pt_lr_constant_lr(o, 0.5, 3), pt_lr_cosine_annealing_lr(o, 5, 0),
                             pt_lr_step_lr(o, 2, 0.5)};
    return pt_lr_sequential_lr(o, 3, s, (const int64_t[]){3, 9});
}
static pt_lr_scheduler *mk_chained(pt_optim *o)
{
    pt_lr_scheduler *s[2] = {pt_lr_constant_lr(o, 0.5, 4), pt_lr_exponential_lr(o, 0.9)};
    return pt_lr_chained_scheduler(2, s);
}
static pt_lr_scheduler *mk_warmup_cosine(pt_optim *o)
{
    return pt_lr_cosine_with_warmup(o, 5, 30, 0.5, 0.0);
}
static pt_lr_scheduler *mk_warmup_cosine_min(pt_optim *o)
{
    return pt_lr_cosine_with_warmup(o, 4, 24, 1.5, 0.1);
}
static pt_lr_scheduler *mk_plateau_min_rel(pt_optim *o)
{
    pt_reduce_on_plateau_opts p = PT_REDUCE_ON_PLATEAU_DEFAULTS;
    p.factor = 0.5;
    p.patience = 2;
    p.cooldown = 1;
    p.min_lrs = (const double[]){0.01, 0.002};
    return pt_lr_reduce_on_plateau(o, p);
}
static pt_lr_scheduler *mk_plateau_max_abs(pt_optim *o)
{
    pt_reduce_on_plateau_opts p = PT_REDUCE_ON_PLATEAU_DEFAULTS;
    p.mode_max = true;
    p.factor = 0.3;
    p.patience = 1;
    p.threshold = 0.05;
    p.threshold_abs = true;
    p.eps = 1e-3;
    return pt_lr_reduce_on_plateau(o, p);
}

typedef enum advance { ADV_STEP, ADV_EPOCHS, ADV_WR_EPOCHS, ADV_METRIC, ADV_NEG_METRIC } advance;

typedef struct lr_case {
    const char *name;
    pt_lr_scheduler *(*make)(pt_optim *o);
    bool adam;
    bool mom;
    advance adv;
} lr_case;

static const lr_case CASES[] = {
    {"step", mk_step, false, false, ADV_STEP},
    {"multistep", mk_multistep, false, false, ADV_STEP},
    {"exponential", mk_exponential, false, false, ADV_STEP},
    {"cosine", mk_cosine, false, false, ADV_STEP},
    {"cosine7", mk_cosine7, false, false, ADV_STEP},
    {"warm_restarts", mk_wr, false, false, ADV_STEP},
    {"warm_restarts_mult2", mk_wr_mult2, false, false, ADV_STEP},
    {"warm_restarts_epochs", mk_wr_epochs, false, false, ADV_WR_EPOCHS},
    {"warm_restarts_epochs_mult1", mk_wr_epochs_mult1, false, false, ADV_WR_EPOCHS},
    {"linear", mk_linear, false, false, ADV_STEP},
    {"linear_decay", mk_linear_decay, false, false, ADV_STEP},
    {"constant", mk_constant, false, false, ADV_STEP},
    {"polynomial", mk_polynomial, false, false, ADV_STEP},
    {"lambda", mk_lambda, false, false, ADV_STEP},
    {"multiplicative", mk_multiplicative, false, false, ADV_STEP},
    {"cyclic_triangular", mk_cyclic_triangular, false, true, ADV_STEP},
    {"cyclic_triangular2", mk_cyclic_triangular2, false, true, ADV_STEP},
    {"cyclic_exp_range", mk_cyclic_exp_range, false, true, ADV_STEP},
    /* a user scale_fn reproducing triangular2; momentum cycled in Adam's betas[0] (torch 2.x
     * semantics; the same values torch 1.13 writes into SGD's momentum) */
    {"cyclic_triangular2", mk_cyclic_custom_fn, false, true, ADV_STEP},
    {"cyclic_triangular", mk_cyclic_triangular, true, true, ADV_STEP},
    {"onecycle_cos", mk_onecycle_cos, false, true, ADV_STEP},
    {"onecycle_linear_three_phase_adam", mk_onecycle_three_phase, true, true, ADV_STEP},
    {"onecycle_epochs", mk_onecycle_epochs, false, true, ADV_STEP},
    {"sequential", mk_sequential, false, false, ADV_STEP},
    {"sequential3", mk_sequential3, false, false, ADV_STEP},
    {"chained", mk_chained, false, false, ADV_STEP},
    {"warmup_cosine", mk_warmup_cosine, false, false, ADV_STEP},
    {"warmup_cosine_min", mk_warmup_cosine_min, false, false, ADV_STEP},
    {"step_epochs", mk_step, false, false, ADV_EPOCHS},
    {"cosine_epochs", mk_cosine, false, false, ADV_EPOCHS},
    {"multistep_epochs", mk_multistep, false, false, ADV_EPOCHS},
    {"lambda_epochs", mk_lambda, false, false, ADV_EPOCHS},
    {"plateau_min_rel", mk_plateau_min_rel, false, false, ADV_METRIC},
    {"plateau_max_abs", mk_plateau_max_abs, false, false, ADV_NEG_METRIC},
};

static pt_status do_advance(pt_lr_scheduler *s, advance adv, int i)
{
    static const char *const inputs[] = {NULL, "step_epochs", "wr_epochs", "plateau_metrics",
                                         "plateau_metrics"};
    if (adv == ADV_STEP)
        return pt_lr_scheduler_step(s);
    pt_tensor *in = fx_get(fx, inputs[adv]);
    double v = pt_test_get(in, i);
    pt_release(in);
    if (adv == ADV_METRIC || adv == ADV_NEG_METRIC)
        return pt_lr_scheduler_step_metric(s, adv == ADV_METRIC ? v : -v);
    return pt_lr_scheduler_step_epoch(s, v);
}

/* Runs case c for `steps` steps from a fresh optimizer, writing the groups' lr / momentum after
 * construction and every step into lr[(steps + 1) * 2] / mom, and checking that get_last_lr
 * agrees with the groups. When resume_at >= 0, the scheduler is saved after that many steps
 * and replaced by a fresh one loaded from the state dict. */
static void run_case(const lr_case *c, int steps, double *lr, double *mom, int resume_at)
{
    setup su = setup_new(c->adam);
    pt_lr_scheduler *s = c->make(su.opt);
    if (!s)
        print_error("%s: %s\n", c->name, pt_last_error());
    assert_non_null(s);
    for (int i = 0; i <= steps; i++) {
        if (i > 0)
            if (do_advance(s, c->adv, i - 1) != PT_OK)
                fail_msg("%s step %d: %s", c->name, i, pt_last_error());
        for (int g = 0; g < 2; g++) {
            lr[i * 2 + g] = pt_optim_get_lr(su.opt, g);
            mom[i * 2 + g] = momentum_of(su.opt, g);
            assert_true(pt_lr_scheduler_get_last_lr(s, g) == lr[i * 2 + g]);
        }
        if (i == resume_at) {
            pt_value *sd = pt_lr_scheduler_state_dict(s);
            assert_non_null(sd);
            pt_lr_scheduler_free(s);
            /* a fresh scheduler over the same optimizer; its initial step changes the lrs, so
             * put them back as torch users do by loading the optimizer state too */
            double keep[2] = {lr[i * 2], lr[i * 2 + 1]};
            double keep_mom[2] = {mom[i * 2], mom[i * 2 + 1]};
            s = c->make(su.opt);
            assert_non_null(s);
            assert_int_equal(pt_lr_scheduler_load_state_dict(s, sd), PT_OK);
            for (int g = 0; g < 2; g++) {
                assert_int_equal(pt_optim_set_lr(su.opt, g, keep[g]), PT_OK);
                if (c->mom && pt_optim_has_option(su.opt, g, "betas"))
                    pt_optim_set_option(su.opt, g, "betas", 0, keep_mom[g]);
                else if (c->mom)
                    pt_optim_set_option(su.opt, g, "momentum", 0, keep_mom[g]);
            }
            pt_value_free(sd);
        }
    }
    pt_lr_scheduler_free(s);
    setup_free(&su);
}

static void check_case(const lr_case *c, int resume_at)
{
    char key[96];
    snprintf(key, sizeof key, "%s.lr", c->name);
    pt_tensor *want = fx_get(fx, key);
    int steps = (int)pt_shape(want)[0] - 1;
    double *lr = calloc((size_t)(steps + 1) * 2, sizeof(double));
    double *mom = calloc((size_t)(steps + 1) * 2, sizeof(double));
    assert_non_null(lr);
    assert_non_null(mom);
    run_case(c, steps, lr, mom, resume_at);
    pt_tensor *got = pt_from_data(lr, PT_SHAPE(steps + 1, 2), PT_FLOAT64, pt_cpu());
    assert_tensor_close(got, want, 1e-12, 0.0);
    pt_release(got);
    pt_release(want);
    if (c->mom) {
        snprintf(key, sizeof key, "%s.mom", c->name);
        want = fx_get(fx, key);
        got = pt_from_data(mom, PT_SHAPE(steps + 1, 2), PT_FLOAT64, pt_cpu());
        assert_tensor_close(got, want, 1e-12, 0.0);
        pt_release(got);
        pt_release(want);
    }
    free(lr);
    free(mom);
}

static void test_sequences_match_torch(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        print_message("case %s\n", CASES[i].name);
        check_case(&CASES[i], -1);
    }
}

/* Saving after 7 steps and continuing from a fresh scheduler loaded from the dict gives the
 * same sequence (cases stepped without explicit epochs). */
static void test_resume_from_state_dict(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        if (CASES[i].adv == ADV_EPOCHS || CASES[i].adv == ADV_WR_EPOCHS)
            continue;
        print_message("case %s\n", CASES[i].name);
        check_case(&CASES[i], 7);
    }
}

static void test_state_dict_keys(void **state)
{
    (void)state;
    setup su = setup_new(false);
    pt_lr_scheduler *s = pt_lr_step_lr(su.opt, 3, 0.5);
    pt_value *sd = pt_lr_scheduler_state_dict(s);
    static const char *const keys[] = {"step_size",
                                       "gamma",
                                       "base_lrs",
                                       "last_epoch",
                                       "verbose",
                                       "_step_count",
                                       "_get_lr_called_within_step",
                                       "_last_lr"};
    assert_int_equal(pt_value_len(sd), 8);
    for (int i = 0; i < 8; i++)
        assert_string_equal(pt_value_as_str(pt_value_key_ref(sd, i), NULL), keys[i]);
    int64_t v;
    assert_int_equal(pt_value_as_int(pt_value_get_str_ref(sd, "_step_count"), &v), PT_OK);
    assert_int_equal(v, 1);
    double init;
    assert_int_equal(pt_optim_get_option(su.opt, 1, "initial_lr", 0, &init), PT_OK);
    assert_true(init == 0.05);
    pt_value_free(sd);

    /* a bad dict is rejected and changes nothing */
    sd = pt_value_dict();
    pt_value_dict_set_str(sd, "last_epoch", pt_value_int(5));
    pt_value_dict_set_str(sd, "base_lrs", pt_value_list());
    assert_pt_status_error(pt_lr_scheduler_load_state_dict(s, sd), PT_ERR_INVALID_ARG,
                           "base_lrs must be a list of 2");
    assert_int_equal(pt_lr_scheduler_last_epoch(s), 0);
    pt_value_free(sd);

    /* a period of 0 is refused at load (it used to divide by zero at the next step) */
    sd = pt_lr_scheduler_state_dict(s);
    pt_value_dict_set_str(sd, "step_size", pt_value_int(0));
    assert_pt_status_error(pt_lr_scheduler_load_state_dict(s, sd), PT_ERR_INVALID_ARG,
                           "step_size must be a positive int, got 0");
    pt_value_free(sd);
    assert_int_equal(pt_lr_scheduler_step(s), PT_OK);
    assert_string_equal(pt_lr_scheduler_name(s), "StepLR");
    pt_lr_scheduler_free(s);

    /* MultiStepLR saves torch's Counter as {milestone: count} */
    s = pt_lr_multistep_lr(su.opt, 3, (const int64_t[]){2, 4, 4}, 0.1);
    sd = pt_lr_scheduler_state_dict(s);
    assert_int_equal(
        pt_value_as_int(pt_value_get_int_ref(pt_value_get_str_ref(sd, "milestones"), 4), &v),
        PT_OK);
    assert_int_equal(v, 2);
    pt_value_free(sd);
    pt_lr_scheduler_free(s);

    /* SequentialLR nests its children's dicts; ReduceLROnPlateau starts with best = inf */
    pt_lr_scheduler *kids[2] = {pt_lr_constant_lr(su.opt, 0.5, 2), pt_lr_step_lr(su.opt, 2, 0.5)};
    s = pt_lr_sequential_lr(su.opt, 2, kids, (const int64_t[]){3});
    sd = pt_lr_scheduler_state_dict(s);
    pt_value *children = pt_value_get_str_ref(sd, "_schedulers");
    assert_int_equal(pt_value_len(children), 2);
    assert_non_null(pt_value_get_str_ref(pt_value_item_ref(children, 1), "step_size"));
    pt_value_free(sd);
    pt_lr_scheduler_free(s);
    s = pt_lr_reduce_on_plateau(su.opt, PT_REDUCE_ON_PLATEAU_DEFAULTS);
    sd = pt_lr_scheduler_state_dict(s);
    double best = 0;
    assert_int_equal(pt_value_as_float(pt_value_get_str_ref(sd, "best"), &best), PT_OK);
    assert_true(isinf(best) && best > 0);
    assert_string_equal(pt_value_as_str(pt_value_get_str_ref(sd, "threshold_mode"), NULL), "rel");
    pt_value_free(sd);
    pt_lr_scheduler_free(s);
    setup_free(&su);
}

/* CyclicLR divides by total_size = up + down and by step_ratio = up / total_size: sizes that
 * make either 0 or not finite are refused when built and when loaded (torch raises
 * ZeroDivisionError at the next step), and a refused dict changes nothing */
static void test_cyclic_sizes(void **state)
{
    (void)state;
    setup su = setup_new(true);
    pt_cyclic_lr_opts c = PT_CYCLIC_LR_DEFAULTS;
    c.base_lr = 0.01;
    c.max_lr = 0.1;
    c.step_size_up = -2;
    assert_pt_error(pt_lr_cyclic_lr(su.opt, c), PT_ERR_INVALID_ARG, "step_size_up must be");
    c.step_size_up = INFINITY;
    assert_pt_error(pt_lr_cyclic_lr(su.opt, c), PT_ERR_INVALID_ARG, "step_size_up must be");
    c.step_size_up = 4;
    c.step_size_down = -1;
    assert_pt_error(pt_lr_cyclic_lr(su.opt, c), PT_ERR_INVALID_ARG, "step_size_down must be");
    c.step_size_down = NAN;
    assert_pt_error(pt_lr_cyclic_lr(su.opt, c), PT_ERR_INVALID_ARG, "step_size_down must be");
    c.step_size_up = 1e308;
    c.step_size_down = 1e308;
    assert_pt_error(pt_lr_cyclic_lr(su.opt, c), PT_ERR_INVALID_ARG,
                    "step_size_up + step_size_down must be finite");

    pt_lr_scheduler *s = mk_cyclic_triangular(su.opt);
    assert_non_null(s);
    assert_int_equal(pt_lr_scheduler_step(s), PT_OK);
    static const struct {
        const char *key;
        double v;
        const char *msg;
    } bad[] = {
        {"total_size", 0, "total_size must be a finite number > 0, got 0"},
        {"total_size", -8, "total_size must be a finite number > 0, got -8"},
        {"total_size", INFINITY, "total_size must be a finite number > 0, got inf"},
        {"step_ratio", 0, "step_ratio must be in (0, 1], got 0"},
        {"step_ratio", 1.5, "step_ratio must be in (0, 1], got 1.5"},
        {"step_ratio", NAN, "step_ratio must be in (0, 1], got nan"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_value *sd = pt_lr_scheduler_state_dict(s);
        pt_value_dict_set_str(sd, "last_epoch", pt_value_int(7));
        pt_value_dict_set_str(sd, bad[i].key, pt_value_float(bad[i].v));
        assert_pt_status_error(pt_lr_scheduler_load_state_dict(s, sd), PT_ERR_INVALID_ARG,
                               bad[i].msg);
        assert_int_equal(pt_lr_scheduler_last_epoch(s), 1);
        pt_value_free(sd);
    }
    /* the edge a real CyclicLR can have: step_size_down 0 in torch gives step_ratio 1 */
    pt_value *sd = pt_lr_scheduler_state_dict(s);
    pt_value_dict_set_str(sd, "step_ratio", pt_value_float(1.0));
    assert_int_equal(pt_lr_scheduler_load_state_dict(s, sd), PT_OK);
    pt_value_free(sd);
    assert_int_equal(pt_lr_scheduler_step(s), PT_OK);
    assert_true(isfinite(pt_lr_scheduler_get_last_lr(s, 0)));
    pt_lr_scheduler_free(s);
    setup_free(&su);
}

static void test_errors(void **state)
{
    (void)state;
    setup su = setup_new(false);
    pt_optim *o = su.opt;
    assert_pt_error(pt_lr_step_lr(o, 3, 0.0), PT_ERR_INVALID_ARG, "gamma must be > 0");
    assert_pt_error(pt_lr_step_lr(o, 0, 0.5), PT_ERR_INVALID_ARG, "step_size must be > 0");
    assert_pt_error(pt_lr_step_lr(NULL, 1, 0.5), PT_ERR_NULL, "optimizer is NULL");
    assert_pt_error(pt_lr_exponential_lr(o, -1.0), PT_ERR_INVALID_ARG, "gamma");
    assert_pt_error(pt_lr_multistep_lr(o, 2, (const int64_t[]){5, 3}, 0.1), PT_ERR_INVALID_ARG,
                    "milestones must be sorted");
    assert_pt_error(pt_lr_cosine_annealing_lr(o, 0, 0), PT_ERR_INVALID_ARG, "T_max");
    assert_pt_error(pt_lr_cosine_annealing_warm_restarts(o, 0, 1, 0), PT_ERR_INVALID_ARG,
                    "Expected positive integer T_0");
    assert_pt_error(pt_lr_cosine_annealing_warm_restarts(o, 3, 0, 0), PT_ERR_INVALID_ARG,
                    "T_mult >= 1");
    assert_pt_error(pt_lr_linear_lr(o, 0.0, 1.0, 5), PT_ERR_INVALID_ARG, "Starting");
    assert_pt_error(pt_lr_linear_lr(o, 0.5, 1.5, 5), PT_ERR_INVALID_ARG, "Ending");
    assert_pt_error(pt_lr_constant_lr(o, 1.5, 5), PT_ERR_INVALID_ARG, "Constant");
    assert_pt_error(pt_lr_polynomial_lr(o, 0, 1.0), PT_ERR_INVALID_ARG, "total_iters");
    assert_pt_error(pt_lr_lambda_lr(o, NULL, NULL), PT_ERR_NULL, "lr_lambda");
    assert_pt_error(pt_lr_cosine_with_warmup(o, 10, 5, 0.5, 0), PT_ERR_INVALID_ARG,
                    "warmup_steps <= total_steps");
    pt_cyclic_lr_opts c = PT_CYCLIC_LR_DEFAULTS;
    c.step_size_up = 0;
    assert_pt_error(pt_lr_cyclic_lr(o, c), PT_ERR_INVALID_ARG, "step_size_up");
    c = PT_CYCLIC_LR_DEFAULTS;
    c.mode = (pt_cyclic_mode)7;
    assert_pt_error(pt_lr_cyclic_lr(o, c), PT_ERR_INVALID_ARG, "mode is invalid");
    pt_one_cycle_lr_opts oc = PT_ONE_CYCLE_LR_DEFAULTS;
    oc.max_lr = 0.1;
    assert_pt_error(pt_lr_one_cycle_lr(o, oc), PT_ERR_INVALID_ARG, "total_steps OR");
    oc.total_steps = 10;
    oc.pct_start = 1.5;
    assert_pt_error(pt_lr_one_cycle_lr(o, oc), PT_ERR_INVALID_ARG, "pct_start");
    pt_reduce_on_plateau_opts p = PT_REDUCE_ON_PLATEAU_DEFAULTS;
    p.factor = 1.0;
    assert_pt_error(pt_lr_reduce_on_plateau(o, p), PT_ERR_INVALID_ARG, "Factor should be < 1.0");

    /* stepping OneCycleLR past total_steps */
    oc = PT_ONE_CYCLE_LR_DEFAULTS;
    oc.max_lr = 0.1;
    oc.total_steps = 3;
    pt_lr_scheduler *s = pt_lr_one_cycle_lr(o, oc);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pt_lr_scheduler_step(s), PT_OK);
    assert_pt_status_error(pt_lr_scheduler_step(s), PT_ERR_INVALID_ARG, "Tried to step 4 times");
    assert_pt_status_error(pt_lr_scheduler_step_metric(s, 1.0), PT_ERR_INVALID_ARG, "no metric");
    assert_pt_status_error(pt_lr_scheduler_step_epoch(s, 1.5), PT_ERR_INVALID_ARG, "integral");
    assert_true(isnan(pt_lr_scheduler_get_last_lr(s, 2)));
    pt_clear_error();
    pt_lr_scheduler_free(s);

    /* ReduceLROnPlateau needs a metric; warm restarts reject a negative epoch */
    s = pt_lr_reduce_on_plateau(o, PT_REDUCE_ON_PLATEAU_DEFAULTS);
    assert_pt_status_error(pt_lr_scheduler_step(s), PT_ERR_INVALID_ARG, "needs a metric");
    pt_lr_scheduler_free(s);
    s = pt_lr_cosine_annealing_warm_restarts(o, 3, 1, 0);
    assert_pt_status_error(pt_lr_scheduler_step_epoch(s, -1), PT_ERR_INVALID_ARG,
                           "non-negative epoch");
    pt_lr_scheduler_free(s);

    /* composite schedulers: bad milestones and a foreign optimizer (children are freed) */
    pt_lr_scheduler *kids[2] = {pt_lr_exponential_lr(o, 0.9), pt_lr_step_lr(o, 2, 0.5)};
    assert_pt_error(pt_lr_sequential_lr(o, 2, kids, NULL), PT_ERR_INVALID_ARG, "milestones");
    setup other = setup_new(false);
    kids[0] = pt_lr_exponential_lr(o, 0.9);
    kids[1] = pt_lr_exponential_lr(other.opt, 0.9);
    assert_pt_error(pt_lr_chained_scheduler(2, kids), PT_ERR_INVALID_ARG, "same optimizer");
    pt_lr_scheduler *kids3[3] = {pt_lr_exponential_lr(o, 0.9), pt_lr_step_lr(o, 2, 0.5),
                                 pt_lr_constant_lr(o, 0.5, 2)};
    assert_pt_error(pt_lr_sequential_lr(o, 3, kids3, (const int64_t[]){5, 3}), PT_ERR_INVALID_ARG,
                    "milestones must be increasing");
    setup_free(&other);

    /* cycle_momentum needs momentum or betas: Adagrad has neither */
    pt_adagrad_opts ao = PT_ADAGRAD_DEFAULTS;
    pt_optim *ada = pt_optim_adagrad_params(1, &su.a, ao);
    c = PT_CYCLIC_LR_DEFAULTS;
    c.base_lr = 0.01;
    c.max_lr = 0.1;
    assert_pt_error(pt_lr_cyclic_lr(ada, c), PT_ERR_INVALID_ARG, "must support momentum");
    pt_optim_free(ada);
    setup_free(&su);
}

int main(void)
{
    fx = fx_open("lr_scheduler");
#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)
    const struct CMUnitTest tests[] = {
        T(test_sequences_match_torch), T(test_resume_from_state_dict),
        T(test_state_dict_keys),       T(test_errors),
        T(test_cyclic_sizes),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
