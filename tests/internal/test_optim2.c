/* Tests for RAdam, ASGD, Rprop, LBFGS, Lion, LAMB, Adafactor and SophiaG
 * (include/prometorch/optim.h): 20-step trajectories against torch.optim 1.13 (RAdam, ASGD,
 * Rprop, LBFGS) and against the reference implementations transcribed in
 * tests/fixtures/gen/optim2.py (Lion, LAMB, Adafactor, SophiaG), on the fused float32 kernel
 * (checked to run) and on the generic fallback from public ops (the CPU backend's optim_*
 * slots emptied, tests/internal/optim_paths.h); state dict layout and round trips (save after 10
 * steps, load into a fresh optimizer, continue: the trajectory still matches); error paths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../optim_common.h"
#include "optim_paths.h"

static pt_fixture *fx;

#define STEPS 20

/* ---- the problems --------------------------------------------------------------------------- */

typedef struct problem {
    pt_tensor *W, *b, *x, *y;
    bool convex; /* LBFGS: mean((x W^T + b - y)^2) + 0.1 sum(W^2) + 0.05 sum(W^4) */
} problem;

static problem problem_new(void)
{
    problem pr;
    pr.W = pt_clone(fx_get(fx, "init.W"));
    pr.b = pt_clone(fx_get(fx, "init.b"));
    pr.x = fx_get(fx, "data.x");
    pr.y = fx_get(fx, "data.y");
    pr.convex = false;
    pt_set_requires_grad(pr.W, true);
    pt_set_requires_grad(pr.b, true);
    return pr;
}

static void problem_free(problem *pr)
{
    pt_release(pr->W);
    pt_release(pr->b);
}

/* Converts the problem to float64: W and b become float64 leaves that require grad, x and y
 * new float64 tensors the caller releases. */
static void problem_to_float64(problem *pr)
{
    pt_tensor *W = pt_to_dtype(pr->W, PT_FLOAT64), *b = pt_to_dtype(pr->b, PT_FLOAT64);
    problem_free(pr);
    pr->W = pt_detach(W);
    pr->b = pt_detach(b);
    pt_release(W);
    pt_release(b);
    pt_set_requires_grad(pr->W, true);
    pt_set_requires_grad(pr->b, true);
    pr->x = pt_to_dtype(pr->x, PT_FLOAT64);
    pr->y = pt_to_dtype(pr->y, PT_FLOAT64);
}

/* Computes the loss and its gradients (accumulated into .grad); returns the loss or NAN. */
static double problem_backward(problem *pr)
{
    pt_scope_begin();
    pt_tensor *pred = pt_add(pt_matmul(pr->x, pt_transpose(pr->W, 0, 1)), pr->b);
    pt_tensor *mse = pt_mean(pt_square(pt_sub(pred, pr->y)));
    pt_tensor *extra = pr->convex ? pt_add(pt_mul_scalar(pt_sum(pt_pow_scalar(pr->W, 2.0)), 0.1),
                                           pt_mul_scalar(pt_sum(pt_pow_scalar(pr->W, 4.0)), 0.05))
                                  : pt_mul_scalar(pt_sum(pt_pow_scalar(pr->W, 3.0)), 0.05);
    pt_tensor *loss = pt_add(mse, extra);
    double l = loss ? pt_item(loss) : NAN;
    if (pt_backward(loss, NULL, false, false) != PT_OK)
        l = NAN;
    pt_scope_end();
    return l;
}

/* ---- cases (options must match CASES in tests/fixtures/gen/optim2.py) ---------------------- */

static pt_optim *mk_radam_default(pt_tensor *W, pt_tensor *b)
{
    pt_radam_opts o = PT_RADAM_DEFAULTS;
    o.lr = 0.05;
    return pt_optim_radam_params(PARAMS(W, b), o);
}
static pt_optim *mk_radam_wd_betas(pt_tensor *W, pt_tensor *b)
{
    pt_radam_opts o = {.lr = 0.03, .betas = {0.8, 0.9}, .eps = 1e-4, .weight_decay = 0.1};
    return pt_optim_radam_params(PARAMS(W, b), o);
}
static pt_optim *mk_radam_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_radam_opts o = PT_RADAM_DEFAULTS;
    o.lr = 0.02;
    return optim_test_second_group(pt_optim_radam_params(1, &W, o), b, NULL, 0.1);
}
static pt_optim *mk_radam_decoupled_wd(pt_tensor *W, pt_tensor *b)
{
    pt_radam_opts o = PT_RADAM_DEFAULTS;
    o.lr = 0.03, o.weight_decay = 0.2, o.decoupled_weight_decay = true;
    return pt_optim_radam_params(PARAMS(W, b), o);
}
static pt_optim *mk_asgd_default(pt_tensor *W, pt_tensor *b)
{
    pt_asgd_opts o = PT_ASGD_DEFAULTS;
    o.lr = 0.05;
    return pt_optim_asgd_params(PARAMS(W, b), o);
}
static pt_optim *mk_asgd_t0_wd_maximize(pt_tensor *W, pt_tensor *b)
{
    pt_asgd_opts o = {
        .lr = 0.02, .lambd = 0.01, .alpha = 0.5, .t0 = 5, .weight_decay = 0.1, .maximize = true};
    return pt_optim_asgd_params(PARAMS(W, b), o);
}
static pt_optim *mk_asgd_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_asgd_opts o = PT_ASGD_DEFAULTS;
    o.lr = 0.03, o.t0 = 3;
    return optim_test_second_group(pt_optim_asgd_params(1, &W, o), b, NULL, 0.1);
}
static pt_optim *mk_rprop_default(pt_tensor *W, pt_tensor *b)
{
    return pt_optim_rprop_params(PARAMS(W, b), PT_RPROP_DEFAULTS);
}
static pt_optim *mk_rprop_etas_sizes_maximize(pt_tensor *W, pt_tensor *b)
{
    pt_rprop_opts o = {.lr = 0.05, .etas = {0.3, 1.5}, .step_sizes = {1e-3, 0.1}, .maximize = true};
    return pt_optim_rprop_params(PARAMS(W, b), o);
}
static pt_optim *mk_rprop_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_rprop_opts o = PT_RPROP_DEFAULTS;
    o.lr = 0.005;
    return optim_test_second_group(pt_optim_rprop_params(1, &W, o), b, NULL, 0.02);
}
static pt_optim *mk_lion_default(pt_tensor *W, pt_tensor *b)
{
    pt_lion_opts o = PT_LION_DEFAULTS;
    o.lr = 0.01;
    return pt_optim_lion_params(PARAMS(W, b), o);
}
static pt_optim *mk_lion_wd_betas(pt_tensor *W, pt_tensor *b)
{
    pt_lion_opts o = {.lr = 0.02, .betas = {0.8, 0.95}, .weight_decay = 0.5};
    return pt_optim_lion_params(PARAMS(W, b), o);
}
static pt_optim *mk_lion_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_lion_opts o = PT_LION_DEFAULTS;
    o.lr = 0.01, o.weight_decay = 0.1;
    return optim_test_second_group(pt_optim_lion_params(1, &W, o), b, NULL, 0.005);
}
static pt_optim *mk_lamb_default(pt_tensor *W, pt_tensor *b)
{
    pt_lamb_opts o = PT_LAMB_DEFAULTS;
    o.lr = 0.05;
    return pt_optim_lamb_params(PARAMS(W, b), o);
}
static pt_optim *mk_lamb_clip_noavg_nobc(pt_tensor *W, pt_tensor *b)
{
    pt_lamb_opts o = PT_LAMB_DEFAULTS;
    o.lr = 0.03, o.bias_correction = false, o.grad_averaging = false, o.max_grad_norm = 0.5;
    o.trust_clip = true, o.weight_decay = 0.1, o.eps = 1.0;
    return pt_optim_lamb_params(PARAMS(W, b), o);
}
static pt_optim *mk_lamb_nowd_adapt_noclip(pt_tensor *W, pt_tensor *b)
{
    pt_lamb_opts o = PT_LAMB_DEFAULTS;
    o.lr = 0.02, o.weight_decay = 0.0, o.always_adapt = true, o.max_grad_norm = NAN;
    o.eps = 1e-4;
    return pt_optim_lamb_params(PARAMS(W, b), o);
}
static pt_optim *mk_lamb_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_lamb_opts o = PT_LAMB_DEFAULTS;
    o.lr = 0.02, o.weight_decay = 0.0;
    return optim_test_second_group(pt_optim_lamb_params(1, &W, o), b, NULL, 0.1);
}
static pt_optim *mk_adafactor_default(pt_tensor *W, pt_tensor *b)
{
    return pt_optim_adafactor_params(PARAMS(W, b), PT_ADAFACTOR_DEFAULTS);
}
static pt_optim *mk_adafactor_lr_beta1_wd(pt_tensor *W, pt_tensor *b)
{
    pt_adafactor_opts o = PT_ADAFACTOR_DEFAULTS;
    o.lr = 0.02, o.relative_step = false, o.beta1 = 0.9, o.weight_decay = 0.1;
    o.clip_threshold = 0.5, o.decay_rate = -0.6;
    return pt_optim_adafactor_params(PARAMS(W, b), o);
}
static pt_optim *mk_adafactor_warmup_noscale(pt_tensor *W, pt_tensor *b)
{
    pt_adafactor_opts o = PT_ADAFACTOR_DEFAULTS;
    o.warmup_init = true, o.scale_parameter = false, o.eps[0] = 1e-20, o.eps[1] = 1e-2;
    return pt_optim_adafactor_params(PARAMS(W, b), o);
}
static pt_optim *mk_adafactor_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_adafactor_opts o = PT_ADAFACTOR_DEFAULTS;
    o.lr = 0.01, o.relative_step = false, o.scale_parameter = false;
    return optim_test_second_group(pt_optim_adafactor_params(1, &W, o), b, NULL, 0.05);
}
static pt_optim *mk_sophia_default(pt_tensor *W, pt_tensor *b)
{
    pt_sophia_opts o = PT_SOPHIA_DEFAULTS;
    o.lr = 0.01;
    return pt_optim_sophia_params(PARAMS(W, b), o);
}
static pt_optim *mk_sophia_rho_maximize(pt_tensor *W, pt_tensor *b)
{
    pt_sophia_opts o = {.lr = 0.02,
                        .betas = {0.9, 0.95},
                        .rho = 0.5,
                        .weight_decay = 0.0,
                        .maximize = true,
                        .bs = 16};
    return pt_optim_sophia_params(PARAMS(W, b), o);
}
static pt_optim *mk_sophia_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_sophia_opts o = PT_SOPHIA_DEFAULTS;
    o.lr = 0.01, o.bs = 100;
    return optim_test_second_group(pt_optim_sophia_params(1, &W, o), b, NULL, 0.03);
}

typedef struct optim_case {
    const char *name;
    make_fn make;
    int hessian_every; /* SophiaG: update_hessian before step k when k % hessian_every == 0 */
} optim_case;

static const optim_case cases[] = {
    {"radam_default", mk_radam_default, 0},
    {"radam_wd_betas", mk_radam_wd_betas, 0},
    {"radam_two_groups", mk_radam_two_groups, 0},
    {"radam_decoupled_wd", mk_radam_decoupled_wd, 0},
    {"asgd_default", mk_asgd_default, 0},
    {"asgd_t0_wd_maximize", mk_asgd_t0_wd_maximize, 0},
    {"asgd_two_groups", mk_asgd_two_groups, 0},
    {"rprop_default", mk_rprop_default, 0},
    {"rprop_etas_sizes_maximize", mk_rprop_etas_sizes_maximize, 0},
    {"rprop_two_groups", mk_rprop_two_groups, 0},
    {"lion_default", mk_lion_default, 0},
    {"lion_wd_betas", mk_lion_wd_betas, 0},
    {"lion_two_groups", mk_lion_two_groups, 0},
    {"lamb_default", mk_lamb_default, 0},
    {"lamb_clip_noavg_nobc", mk_lamb_clip_noavg_nobc, 0},
    {"lamb_nowd_adapt_noclip", mk_lamb_nowd_adapt_noclip, 0},
    {"lamb_two_groups", mk_lamb_two_groups, 0},
    {"adafactor_default", mk_adafactor_default, 0},
    {"adafactor_lr_beta1_wd", mk_adafactor_lr_beta1_wd, 0},
    {"adafactor_warmup_noscale", mk_adafactor_warmup_noscale, 0},
    {"adafactor_two_groups", mk_adafactor_two_groups, 0},
    {"sophia_default", mk_sophia_default, 3},
    {"sophia_rho_maximize", mk_sophia_rho_maximize, 2},
    {"sophia_two_groups", mk_sophia_two_groups, 4},
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static void one_step(const optim_case *c, pt_optim *opt, problem *pr, int k)
{
    pt_optim_zero_grad(opt);
    assert_false(isnan(problem_backward(pr)));
    if (c->hessian_every && k % c->hessian_every == 0)
        assert_int_equal(pt_optim_sophia_update_hessian(opt), PT_OK);
    assert_int_equal(pt_optim_step(opt), PT_OK);
}

/* Runs one case for STEPS steps, comparing with the reference after every step. With
 * `reload`, the state dict after step 10 is loaded into a fresh optimizer over fresh copies of
 * the parameters, which then continues. */
static void run_case(const optim_case *c, bool reload)
{
    print_message("  %s%s\n", c->name, reload ? " (state dict round trip)" : "");
    problem pr = problem_new();
    pt_optim *opt = c->make(pr.W, pr.b);
    assert_non_null(opt);
    for (int k = 0; k < STEPS; k++) {
        if (reload && k == STEPS / 2) {
            pt_value *sd = pt_optim_state_dict(opt);
            assert_non_null(sd);
            problem pr2 = problem_new();
            optim_test_copy_params(pr2.W, pr2.b, pr.W, pr.b);
            pt_optim *opt2 = c->make(pr2.W, pr2.b);
            assert_int_equal(pt_optim_load_state_dict(opt2, sd), PT_OK);
            pt_value_free(sd);
            pt_optim_free(opt);
            problem_free(&pr);
            pr = pr2;
            opt = opt2;
        }
        one_step(c, opt, &pr, k);
        optim_test_check_step(fx, c->name, pr.W, pr.b, k, 1e-5, 1e-6);
    }
    pt_optim_free(opt);
    problem_free(&pr);
}

/* One case on `path`: it matches the reference, and its algorithm's fused kernel (if it has
 * one: not Adafactor) ran 40 times (20 steps x 2 parameters) on the kernel path and never on
 * the fallback; LAMB's clipping cases also ran the gradient sum of squares. */
static void run_case_path(const optim_case *c, optim_path path)
{
    pti_op op = optim_paths_op_of(c->name);
    optim_paths_use(path);
    run_case(c, false);
    int calls = op == PTI_OP_COUNT ? 0 : optim_paths_count(op);
    int sum_sq = optim_paths_count(PTI_OP_optim_sum_sq);
    optim_paths_restore();
    bool kernel = path == OPTIM_KERNEL && op != PTI_OP_COUNT;
    assert_int_equal(calls, kernel ? 2 * STEPS : 0);
    if (strncmp(c->name, "lamb_clip", 9) == 0)
        assert_int_equal(sum_sq, kernel ? 2 * STEPS : 0);
}

static void test_trajectories_match_reference(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++)
        run_case_path(&cases[i], OPTIM_KERNEL);
}

static void test_trajectories_generic_path(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++)
        run_case_path(&cases[i], OPTIM_FALLBACK);
}

static void test_state_dict_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++)
        run_case(&cases[i], true);
}

/* Once warm, a step on the fused kernels (including LAMB's gradient sum of squares) asks the
 * system allocator for nothing and leaves no live memory behind. */
static void test_kernel_steps_do_not_allocate(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++) {
        if (optim_paths_op_of(cases[i].name) == PTI_OP_COUNT)
            continue;
        problem pr = problem_new();
        pt_optim *opt = cases[i].make(pr.W, pr.b);
        for (int k = 0; k < 3; k++)
            one_step(&cases[i], opt, &pr, k);
        size_t live = pt_memory_allocated();
        uint64_t sys = pt_memory_system_allocs();
        for (int k = 3; k < 8; k++)
            one_step(&cases[i], opt, &pr, k);
        print_message("  %s\n", cases[i].name);
        assert_int_equal(pt_memory_system_allocs(), sys);
        assert_int_equal(pt_memory_allocated(), live);
        pt_optim_free(opt);
        problem_free(&pr);
    }
}

/* A state dict missing any key the algorithm's step reads is refused at load, naming it. */
static void test_load_refuses_missing_state_keys(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++) {
        print_message("  %s\n", cases[i].name);
        problem pr = problem_new();
        pt_optim *opt = cases[i].make(pr.W, pr.b);
        for (int k = 0; k < 2; k++)
            one_step(&cases[i], opt, &pr, k);
        pt_value *sd = pt_optim_state_dict(opt);
        optim_test_missing_keys(cases[i].make, sd, pr.W, pr.b, NULL);
        pt_value_free(sd);
        pt_optim_free(opt);
        problem_free(&pr);
    }
}

/* ASGD's averaged parameter ax (and eta, mu) after STEPS steps, read from the state dict. */
static void check_asgd_average(const char *name)
{
    const optim_case *c = NULL;
    for (size_t i = 0; i < N_CASES; i++)
        if (strcmp(cases[i].name, name) == 0)
            c = &cases[i];
    assert_non_null(c);
    problem pr = problem_new();
    pt_optim *opt = c->make(pr.W, pr.b);
    for (int k = 0; k < STEPS; k++)
        one_step(c, opt, &pr, k);
    pt_value *sd = pt_optim_state_dict(opt);
    char key[96];
    const char *fields[] = {"ax", "eta", "mu"};
    for (int f = 0; f < 3; f++) {
        char path[32];
        snprintf(key, sizeof(key), "%s.%s", name, fields[f]);
        snprintf(path, sizeof(path), "state.0.%s", fields[f]);
        assert_tensor_close(pt_value_tensor_ref(pt_value_path_ref(sd, path)), fx_get(fx, key), 1e-5,
                            1e-6);
    }
    pt_value_free(sd);
    pt_optim_free(opt);
    problem_free(&pr);
}

static void test_asgd_average(void **state)
{
    (void)state;
    check_asgd_average("asgd_default");
    check_asgd_average("asgd_t0_wd_maximize");
    optim_paths_use(OPTIM_FALLBACK);
    check_asgd_average("asgd_t0_wd_maximize");
    check_asgd_average("asgd_two_groups");
    optim_paths_restore();
}

/* float64 parameters take the generic path; the trajectory stays close to torch's float32
 * one (looser tolerance: the float32 reference itself carries ~1e-6 relative error). */
static void test_float64_params(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++) {
        const optim_case *c = &cases[i];
        problem pr = problem_new();
        problem_to_float64(&pr);
        pt_optim *opt = c->make(pr.W, pr.b);
        for (int k = 0; k < 5; k++)
            one_step(c, opt, &pr, k);
        char key[96];
        pt_scope_begin();
        snprintf(key, sizeof(key), "%s.W", c->name);
        assert_tensor_close(pt_to_dtype(pr.W, PT_FLOAT32), pt_select(fx_get(fx, key), 0, 4), 1e-4,
                            1e-5);
        pt_scope_end();
        pt_optim_free(opt);
        pt_release(pr.x);
        pt_release(pr.y);
        problem_free(&pr);
    }
}

/* ---- LBFGS ---------------------------------------------------------------------------------- */

static double lbfgs_closure(void *user)
{
    problem *pr = user;
    pt_set_grad(pr->W, NULL);
    pt_set_grad(pr->b, NULL);
    return problem_backward(pr);
}

static pt_lbfgs_opts lbfgs_case_opts(const char *name)
{
    pt_lbfgs_opts o = PT_LBFGS_DEFAULTS;
    if (strcmp(name, "lbfgs_plain") == 0) {
        o.lr = 0.5, o.max_iter = 3, o.history_size = 4;
    } else if (strcmp(name, "lbfgs_wolfe") == 0) {
        o.lr = 1.0, o.max_iter = 4, o.history_size = 3, o.line_search_fn = "strong_wolfe";
    } else {
        o.line_search_fn = "strong_wolfe";
    }
    return o;
}

static const char *const lbfgs_cases[] = {"lbfgs_plain", "lbfgs_wolfe", "lbfgs_wolfe_default"};

/* The LBFGS problem with float64 (or float32) parameters and data. */
static problem lbfgs_problem(bool f64)
{
    problem pr = problem_new();
    pr.convex = true;
    if (!f64)
        return pr;
    problem_to_float64(&pr);
    return pr;
}

static void lbfgs_problem_free(problem *pr, bool f64)
{
    if (f64) {
        pt_release(pr->x);
        pt_release(pr->y);
    }
    problem_free(pr);
}

/* float64: parameters after every step (and the counters) match torch's float64 run. float32:
 * the losses match torch's float32 run (LBFGS amplifies rounding differences in the
 * parameters; torch's own float32 and float64 trajectories differ by up to 1e-4, see
 * optim2.py, while the loss is insensitive near the minimum). */
static void run_lbfgs(const char *name, bool reload, bool f64)
{
    print_message("  %s %s%s\n", name, f64 ? "float64" : "float32",
                  reload ? " (state dict round trip)" : "");
    problem pr = lbfgs_problem(f64);
    pt_lbfgs_opts o = lbfgs_case_opts(name);
    pt_optim *opt = pt_optim_lbfgs_params(PARAMS(pr.W, pr.b), o);
    assert_non_null(opt);
    char key[96];
    snprintf(key, sizeof(key), "%s.%s", name, f64 ? "loss64" : "loss");
    pt_tensor *losses = fx_get(fx, key);
    for (int k = 0; k < STEPS; k++) {
        if (reload && k == STEPS / 2) {
            pt_value *sd = pt_optim_state_dict(opt);
            problem pr2 = lbfgs_problem(f64);
            optim_test_copy_params(pr2.W, pr2.b, pr.W, pr.b);
            pt_optim *opt2 = pt_optim_lbfgs_params(PARAMS(pr2.W, pr2.b), o);
            assert_int_equal(pt_optim_load_state_dict(opt2, sd), PT_OK);
            pt_value_free(sd);
            pt_optim_free(opt);
            lbfgs_problem_free(&pr, f64);
            pr = pr2;
            opt = opt2;
        }
        double loss = 0.0;
        assert_int_equal(pt_optim_step_closure(opt, lbfgs_closure, &pr, &loss), PT_OK);
        double want = pt_test_get(losses, k);
        if (getenv("LBFGS_DEBUG"))
            print_message("step %d loss %.9g want %.9g\n", k, loss, want);
        assert_true(fabs(loss - want) <= 1e-5 * fabs(want));
        if (!f64)
            continue;
        optim_test_check_step(fx, name, pr.W, pr.b, k, 1e-5, 1e-6);
    }
    if (f64) {
        pt_value *sd = pt_optim_state_dict(opt);
        int64_t evals = -1, n_iter = -1;
        assert_int_equal(pt_value_as_int(pt_value_path_ref(sd, "state.0.func_evals"), &evals),
                         PT_OK);
        assert_int_equal(pt_value_as_int(pt_value_path_ref(sd, "state.0.n_iter"), &n_iter), PT_OK);
        snprintf(key, sizeof(key), "%s.func_evals", name);
        assert_int_equal(evals, (int64_t)pt_item(fx_get(fx, key)));
        snprintf(key, sizeof(key), "%s.n_iter", name);
        assert_int_equal(n_iter, (int64_t)pt_item(fx_get(fx, key)));
        pt_value_free(sd);
    }
    pt_optim_free(opt);
    lbfgs_problem_free(&pr, f64);
}

static void test_lbfgs_matches_torch(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        run_lbfgs(lbfgs_cases[i], false, true);
        run_lbfgs(lbfgs_cases[i], false, false);
    }
}

static void test_lbfgs_state_dict_round_trip(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        run_lbfgs(lbfgs_cases[i], true, true);
        run_lbfgs(lbfgs_cases[i], true, false);
    }
}

/* torch's layout: everything under state[0]; max_eval resolved at construction. */
/* A state dict whose LBFGS state lacks a key the next step reads is refused naming it, one
 * with a non-floating or misshapen vector too, and the optimizer keeps the state it had. 'al'
 * (scratch) and prev_loss (overwritten before use) may be absent, as in torch. Before, a
 * missing d, t, history or prev_flat_grad loaded as zeros and the step went on from them. */
static void test_lbfgs_load_refuses_bad_state(void **state)
{
    (void)state;
    problem pr = problem_new();
    pr.convex = true;
    pt_lbfgs_opts o = lbfgs_case_opts("lbfgs_wolfe");
    pt_optim *opt = pt_optim_lbfgs_params(PARAMS(pr.W, pr.b), o);
    for (int k = 0; k < 2; k++)
        assert_int_equal(pt_optim_step_closure(opt, lbfgs_closure, &pr, NULL), PT_OK);
    pt_value *sd = pt_optim_state_dict(opt);
    pt_optim *fresh = pt_optim_lbfgs_params(PARAMS(pr.W, pr.b), o);
    assert_int_equal(pt_optim_load_state_dict(fresh, sd), PT_OK);
    pt_value *before_sd = pt_optim_state_dict(fresh);
    char *before = pt_value_to_string(before_sd, 0);
    pt_value_free(before_sd);
    const pt_value *st0 = pt_value_path_ref(sd, "state.0");
    assert_true(pt_value_len(pt_value_get_str_ref(st0, "old_dirs")) > 0);
    for (int64_t k = 0; k < pt_value_len(st0); k++) {
        const char *key = pt_value_as_str(pt_value_key_ref(st0, k), NULL);
        bool optional = strcmp(key, "al") == 0 || strcmp(key, "prev_loss") == 0;
        print_message("    without '%s'\n", key);
        pt_value *bad = pt_value_copy(sd);
        assert_int_equal(pt_value_dict_del_str(pt_value_path_ref(bad, "state.0"), key), PT_OK);
        pt_optim *other = pt_optim_lbfgs_params(PARAMS(pr.W, pr.b), o);
        if (optional) {
            assert_int_equal(pt_optim_load_state_dict(other, bad), PT_OK);
        } else {
            char want[96];
            snprintf(want, sizeof want, "has no '%s'", key);
            assert_pt_status_error(pt_optim_load_state_dict(fresh, bad), PT_ERR_FORMAT, want);
        }
        pt_optim_free(other);
        pt_value_free(bad);
    }
    /* wrong dtype, wrong length, a history that is not a list */
    pt_tensor *ints = pt_zeros(PT_SHAPE(25), PT_INT64, pt_cpu());
    pt_tensor *short_vec = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    struct {
        const char *key;
        pt_tensor *t;
        pt_status st;
        const char *msg;
    } cases[] = {
        {"d", ints, PT_ERR_DTYPE, "'d' must be a floating tensor"},
        {"prev_flat_grad", short_vec, PT_ERR_SHAPE, "'prev_flat_grad' must be a tensor of 25"},
        {"old_dirs", short_vec, PT_ERR_FORMAT, "must be lists"}};
    for (int c = 0; c < 3; c++) {
        pt_value *bad = pt_value_copy(sd);
        assert_int_equal(pt_value_dict_set_str(pt_value_path_ref(bad, "state.0"), cases[c].key,
                                               pt_value_tensor(cases[c].t)),
                         PT_OK);
        assert_pt_status_error(pt_optim_load_state_dict(fresh, bad), cases[c].st, cases[c].msg);
        pt_value_free(bad);
    }
    pt_release(ints);
    pt_release(short_vec);
    /* every failed load left fresh as it was */
    pt_value *after_sd = pt_optim_state_dict(fresh);
    char *after = pt_value_to_string(after_sd, 0);
    assert_string_equal(after, before);
    free(after);
    free(before);
    pt_value_free(after_sd);
    pt_value_free(sd);
    pt_optim_free(fresh);
    pt_optim_free(opt);
    problem_free(&pr);
}

static void test_lbfgs_state_dict_layout(void **state)
{
    (void)state;
    problem pr = problem_new();
    pr.convex = true;
    pt_optim *opt = pt_optim_lbfgs_params(PARAMS(pr.W, pr.b), lbfgs_case_opts("lbfgs_wolfe"));
    assert_int_equal(pt_optim_step_closure(opt, lbfgs_closure, &pr, NULL), PT_OK);
    pt_value *sd = pt_optim_state_dict(opt);
    pt_value *st = pt_value_path_ref(sd, "state");
    assert_int_equal(pt_value_len(st), 1);
    char *s = pt_value_to_string(pt_value_path_ref(sd, "state.0"), 0);
    const char *keys[] = {"'func_evals'", "'n_iter'",         "'al'",       "'d'",
                          "'t'",          "'old_dirs'",       "'old_stps'", "'ro'",
                          "'H_diag'",     "'prev_flat_grad'", "'prev_loss'"};
    const char *prev = s;
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        const char *at = strstr(s, keys[k]);
        assert_non_null(at);
        assert_true(at >= prev); /* in torch's order */
        prev = at;
    }
    assert_non_null(strstr(s, "'d': tensor(float32, [25])"));
    free(s);
    int64_t me = 0;
    assert_int_equal(pt_value_as_int(pt_value_path_ref(sd, "param_groups.0.max_eval"), &me), PT_OK);
    assert_int_equal(me, 5);
    assert_string_equal(
        pt_value_as_str(pt_value_path_ref(sd, "param_groups.0.line_search_fn"), NULL),
        "strong_wolfe");
    pt_value_free(sd);
    pt_optim_free(opt);
    problem_free(&pr);
}

static void test_lbfgs_errors(void **state)
{
    (void)state;
    problem pr = problem_new();
    pt_lbfgs_opts o = PT_LBFGS_DEFAULTS;
    o.line_search_fn = "backtracking";
    assert_pt_error(pt_optim_lbfgs_params(1, &pr.W, o), PT_ERR_INVALID_ARG,
                    "only 'strong_wolfe' is supported");
    o = PT_LBFGS_DEFAULTS;
    o.history_size = 0;
    assert_pt_error(pt_optim_lbfgs_params(1, &pr.W, o), PT_ERR_INVALID_ARG, "history_size");
    pt_optim *opt = pt_optim_lbfgs_params(1, &pr.W, PT_LBFGS_DEFAULTS);
    assert_pt_status_error(pt_optim_step(opt), PT_ERR_INVALID_ARG, "needs a closure");
    assert_int_equal(pt_optim_add_param_group(opt, 1, &pr.b, NULL), PT_OK);
    assert_pt_status_error(pt_optim_step_closure(opt, lbfgs_closure, &pr, NULL), PT_ERR_INVALID_ARG,
                           "parameter groups");
    pt_optim_free(opt);
    problem_free(&pr);
}

/* ---- state dict layouts ---------------------------------------------------------------------- */

/* The per-parameter state of param 0 after one step, rendered (tensors as dtype and shape). */
static char *state0_after_step(const optim_case *c)
{
    problem pr = problem_new();
    pt_optim *opt = c->make(pr.W, pr.b);
    one_step(c, opt, &pr, 0);
    pt_value *sd = pt_optim_state_dict(opt);
    char *s = pt_value_to_string(pt_value_path_ref(sd, "state.0"), 0);
    pt_value_free(sd);
    pt_optim_free(opt);
    problem_free(&pr);
    return s;
}

static void expect_state0(const char *case_name, const char *expected)
{
    for (size_t i = 0; i < N_CASES; i++) {
        if (strcmp(cases[i].name, case_name) != 0)
            continue;
        char *s = state0_after_step(&cases[i]);
        assert_string_equal(s, expected);
        free(s);
        return;
    }
    fail_msg("no case %s", case_name);
}

static void test_state_dict_layouts(void **state)
{
    (void)state;
    expect_state0("radam_default", "{'step': tensor(float32, []), 'exp_avg': tensor(float32, "
                                   "[5, 4]), 'exp_avg_sq': tensor(float32, [5, 4])}");
    expect_state0("asgd_default", "{'step': tensor(float32, []), 'eta': tensor(float32, []), "
                                  "'mu': tensor(float32, []), 'ax': tensor(float32, [5, 4])}");
    expect_state0("rprop_default", "{'step': 1, 'prev': tensor(float32, [5, 4]), "
                                   "'step_size': tensor(float32, [5, 4])}");
    expect_state0("lion_default", "{'exp_avg': tensor(float32, [5, 4])}");
    expect_state0("lamb_default", "{'exp_avg': tensor(float32, [5, 4]), 'exp_avg_sq': "
                                  "tensor(float32, [5, 4])}");
    expect_state0("adafactor_default",
                  "{'step': 1, 'exp_avg_sq_row': tensor(float32, [5]), "
                  "'exp_avg_sq_col': tensor(float32, [4]), 'RMS': tensor(float32, [])}");
    expect_state0("adafactor_lr_beta1_wd",
                  "{'step': 1, 'exp_avg': tensor(float32, [5, 4]), "
                  "'exp_avg_sq_row': tensor(float32, [5]), 'exp_avg_sq_col': "
                  "tensor(float32, [4]), 'RMS': tensor(float32, [])}");
    expect_state0("sophia_default", "{'step': tensor(float32, []), 'exp_avg': tensor(float32, "
                                    "[5, 4]), 'hessian': tensor(float32, [5, 4])}");
}

/* LAMB keeps its step counter in the param group, as timm does. */
static void test_lamb_group_step(void **state)
{
    (void)state;
    problem pr = problem_new();
    pt_optim *opt = mk_lamb_two_groups(pr.W, pr.b);
    for (int k = 0; k < 3; k++)
        one_step(&cases[0], opt, &pr, k);
    double v = 0;
    assert_int_equal(pt_optim_get_option(opt, 1, "step", 0, &v), PT_OK);
    assert_true(v == 3.0);
    pt_value *sd = pt_optim_state_dict(opt);
    int64_t step = 0;
    assert_int_equal(pt_value_as_int(pt_value_path_ref(sd, "param_groups.0.step"), &step), PT_OK);
    assert_int_equal(step, 3);
    pt_value_free(sd);
    pt_optim_free(opt);
    problem_free(&pr);
}

/* A saved Adafactor state with a wrong factored shape is rejected. */
static void test_adafactor_load_shape_error(void **state)
{
    (void)state;
    problem pr = problem_new();
    pt_optim *opt = mk_adafactor_default(pr.W, pr.b);
    one_step(&cases[0], opt, &pr, 0);
    pt_value *sd = pt_optim_state_dict(opt);
    pt_value *s0 = pt_value_path_ref(sd, "state.0");
    pt_tensor *bad = pt_zeros(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_value_dict_set_str(s0, "exp_avg_sq_row", pt_value_tensor(bad)), PT_OK);
    pt_release(bad);
    assert_pt_status_error(pt_optim_load_state_dict(opt, sd), PT_ERR_SHAPE, "exp_avg_sq_row");
    pt_value_free(sd);
    pt_optim_free(opt);
    problem_free(&pr);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void test_constructor_errors(void **state)
{
    (void)state;
    problem pr = problem_new();
    pt_radam_opts ra = PT_RADAM_DEFAULTS;
    ra.betas[1] = 1.0;
    assert_pt_error(pt_optim_radam_params(1, &pr.W, ra), PT_ERR_INVALID_ARG,
                    "pt_optim_radam: Invalid beta parameter at index 1");
    pt_asgd_opts as = PT_ASGD_DEFAULTS;
    as.lr = -1;
    assert_pt_error(pt_optim_asgd_params(1, &pr.W, as), PT_ERR_INVALID_ARG,
                    "Invalid learning rate");
    pt_rprop_opts rp = PT_RPROP_DEFAULTS;
    rp.etas[1] = 0.9;
    assert_pt_error(pt_optim_rprop_params(1, &pr.W, rp), PT_ERR_INVALID_ARG, "Invalid eta values");
    pt_lion_opts li = PT_LION_DEFAULTS;
    li.weight_decay = -0.1;
    assert_pt_error(pt_optim_lion_params(1, &pr.W, li), PT_ERR_INVALID_ARG, "Invalid weight_decay");
    pt_lamb_opts la = PT_LAMB_DEFAULTS;
    la.max_grad_norm = 0.0;
    assert_pt_error(pt_optim_lamb_params(1, &pr.W, la), PT_ERR_INVALID_ARG, "max_grad_norm");
    pt_adafactor_opts af = PT_ADAFACTOR_DEFAULTS;
    af.lr = 0.1;
    assert_pt_error(pt_optim_adafactor_params(1, &pr.W, af), PT_ERR_INVALID_ARG,
                    "Cannot combine manual `lr` and `relative_step=True`");
    af = PT_ADAFACTOR_DEFAULTS;
    af.relative_step = false;
    af.warmup_init = true;
    af.lr = 0.1;
    assert_pt_error(pt_optim_adafactor_params(1, &pr.W, af), PT_ERR_INVALID_ARG,
                    "`warmup_init=True` requires `relative_step=True`");
    pt_sophia_opts so = PT_SOPHIA_DEFAULTS;
    so.rho = -1;
    assert_pt_error(pt_optim_sophia_params(1, &pr.W, so), PT_ERR_INVALID_ARG, "Invalid rho");
    pt_optim *opt = pt_optim_lion_params(1, &pr.W, PT_LION_DEFAULTS);
    assert_pt_status_error(pt_optim_sophia_update_hessian(opt), PT_ERR_INVALID_ARG, "not SophiaG");
    assert_string_equal(pt_optim_name(opt), "Lion");
    pt_optim_free(opt);
    assert_pt_status_error(pt_optim_sophia_update_hessian(NULL), PT_ERR_NULL, "NULL");
    problem_free(&pr);
}

int main(void)
{
    fx = fx_open("optim2");
#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)
    const struct CMUnitTest tests[] = {
        T(test_trajectories_match_reference),
        T(test_trajectories_generic_path),
        T(test_kernel_steps_do_not_allocate),
        T(test_state_dict_round_trip),
        T(test_load_refuses_missing_state_keys),
        T(test_float64_params),
        T(test_asgd_average),
        T(test_lbfgs_matches_torch),
        T(test_lbfgs_state_dict_round_trip),
        T(test_lbfgs_state_dict_layout),
        T(test_lbfgs_load_refuses_bad_state),
        T(test_lbfgs_errors),
        T(test_state_dict_layouts),
        T(test_lamb_group_step),
        T(test_adafactor_load_shape_error),
        T(test_constructor_errors),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
