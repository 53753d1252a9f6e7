/* Tests for the optimizers (include/prometorch/optim.h): 20-step trajectories against
 * torch.optim 1.13 (foreach=False) on the least-squares problem of tests/fixtures/gen/optim.py,
 * on the fused float32 kernel (checked to run) and on the generic fallback from public ops (the
 * CPU backend's optim_* slots emptied, tests/internal/optim_paths.h); parameter groups and
 * options by name; state dicts; error paths. Internal: it swaps the CPU backend's slots. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../optim_common.h"
#include "optim_paths.h"

static pt_fixture *fx;
/* NAdam references come from PyTorch 2 (gen/optim_nadam.py): torch 1.13, which made
 * optim.ptfx, put mu twice into the next momentum product. */
static pt_fixture *fx_nadam;

/* The fixture holding the reference values of `name` (a case or a "sd.<case>..." key). */
static const pt_fixture *ref_fx(const char *name)
{
    return strstr(name, "nadam") ? fx_nadam : fx;
}

#define STEPS 20

/* ---- the problem: loss = mean((x W^T + b - y)^2) + 0.05 sum(W^3) ------------------------------
 */

typedef struct problem {
    pt_tensor *W, *b, *x, *y;
} problem;

static problem problem_new_dtype(pt_dtype dt)
{
    problem pr;
    pr.W = pt_to_dtype(fx_get(fx, "init.W"), dt);
    pr.b = pt_to_dtype(fx_get(fx, "init.b"), dt);
    pr.x = pt_to_dtype(fx_get(fx, "data.x"), dt);
    pr.y = pt_to_dtype(fx_get(fx, "data.y"), dt);
    pt_set_requires_grad(pr.W, true);
    pt_set_requires_grad(pr.b, true);
    return pr;
}

static problem problem_new(void)
{
    return problem_new_dtype(PT_FLOAT32);
}

static pt_status problem_backward(problem *pr)
{
    pt_scope_begin();
    pt_tensor *pred = pt_add(pt_matmul(pr->x, pt_transpose(pr->W, 0, 1)), pr->b);
    pt_tensor *mse = pt_mean(pt_square(pt_sub(pred, pr->y)));
    pt_tensor *cube = pt_mul_scalar(pt_sum(pt_pow_scalar(pr->W, 3.0)), 0.05);
    pt_status st = pt_backward(pt_add(mse, cube), NULL, false, false);
    pt_scope_end();
    return st;
}

/* ---- cases (options must match CASES in tests/fixtures/gen/optim.py) ----------------------- */

static pt_optim *mk_sgd_plain(pt_tensor *W, pt_tensor *b)
{
    return pt_optim_sgd_params(PARAMS(W, b), (pt_sgd_opts){.lr = 0.1});
}
static pt_optim *mk_sgd_momentum(pt_tensor *W, pt_tensor *b)
{
    return pt_optim_sgd_params(PARAMS(W, b), (pt_sgd_opts){.lr = 0.05, .momentum = 0.9});
}
static pt_optim *mk_sgd_dampening_wd(pt_tensor *W, pt_tensor *b)
{
    pt_sgd_opts o = {.lr = 0.05, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.1};
    return pt_optim_sgd_params(PARAMS(W, b), o);
}
static pt_optim *mk_sgd_nesterov_maximize(pt_tensor *W, pt_tensor *b)
{
    pt_sgd_opts o = {.lr = 0.02, .momentum = 0.9, .nesterov = true, .maximize = true};
    return pt_optim_sgd_params(PARAMS(W, b), o);
}
static pt_optim *mk_sgd_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_sgd_opts o = {.lr = 0.05, .momentum = 0.5};
    return optim_test_second_group(pt_optim_sgd_params(1, &W, o), b, &o, 0.2);
}
static pt_optim *mk_adam_default(pt_tensor *W, pt_tensor *b)
{
    pt_adam_opts o = PT_ADAM_DEFAULTS;
    o.lr = 0.05;
    return pt_optim_adam_params(PARAMS(W, b), o);
}
static pt_optim *mk_adam_wd_amsgrad(pt_tensor *W, pt_tensor *b)
{
    pt_adam_opts o = PT_ADAM_DEFAULTS;
    o.lr = 0.05, o.betas[0] = 0.8, o.betas[1] = 0.95, o.weight_decay = 0.1, o.amsgrad = true;
    return pt_optim_adam_params(PARAMS(W, b), o);
}
static pt_optim *mk_adam_maximize(pt_tensor *W, pt_tensor *b)
{
    pt_adam_opts o = PT_ADAM_DEFAULTS;
    o.lr = 0.01, o.maximize = true, o.eps = 1e-3;
    return pt_optim_adam_params(PARAMS(W, b), o);
}
static pt_optim *mk_adam_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_adam_opts o = PT_ADAM_DEFAULTS;
    o.lr = 0.02;
    return optim_test_second_group(pt_optim_adam_params(1, &W, o), b, &o, 0.1);
}

static pt_optim *mk_adamw_default(pt_tensor *W, pt_tensor *b)
{
    pt_adamw_opts o = PT_ADAMW_DEFAULTS;
    o.lr = 0.05;
    return pt_optim_adamw_params(PARAMS(W, b), o);
}
static pt_optim *mk_adamw_amsgrad_maximize(pt_tensor *W, pt_tensor *b)
{
    pt_adamw_opts o = PT_ADAMW_DEFAULTS;
    o.lr = 0.03, o.weight_decay = 0.3, o.amsgrad = true, o.maximize = true;
    return pt_optim_adamw_params(PARAMS(W, b), o);
}
static pt_optim *mk_rmsprop_default(pt_tensor *W, pt_tensor *b)
{
    return pt_optim_rmsprop_params(PARAMS(W, b), PT_RMSPROP_DEFAULTS);
}
static pt_optim *mk_rmsprop_centered_momentum_wd(pt_tensor *W, pt_tensor *b)
{
    pt_rmsprop_opts o = PT_RMSPROP_DEFAULTS;
    o.alpha = 0.9, o.momentum = 0.7, o.centered = true, o.weight_decay = 0.1;
    return pt_optim_rmsprop_params(PARAMS(W, b), o);
}
static pt_optim *mk_rmsprop_momentum_maximize(pt_tensor *W, pt_tensor *b)
{
    pt_rmsprop_opts o = PT_RMSPROP_DEFAULTS;
    o.lr = 0.005, o.momentum = 0.5, o.maximize = true;
    return pt_optim_rmsprop_params(PARAMS(W, b), o);
}
static pt_optim *mk_rmsprop_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_rmsprop_opts o = PT_RMSPROP_DEFAULTS;
    o.centered = true;
    return optim_test_second_group(pt_optim_rmsprop_params(1, &W, o), b, &o, 0.03);
}
static pt_optim *mk_adagrad_default(pt_tensor *W, pt_tensor *b)
{
    pt_adagrad_opts o = PT_ADAGRAD_DEFAULTS;
    o.lr = 0.1;
    return pt_optim_adagrad_params(PARAMS(W, b), o);
}
static pt_optim *mk_adagrad_decay_init_wd(pt_tensor *W, pt_tensor *b)
{
    pt_adagrad_opts o = {.lr = 0.2,
                         .lr_decay = 0.05,
                         .initial_accumulator_value = 0.3,
                         .weight_decay = 0.1,
                         .eps = 1e-6};
    return pt_optim_adagrad_params(PARAMS(W, b), o);
}
static pt_optim *mk_adagrad_maximize_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_adagrad_opts o = PT_ADAGRAD_DEFAULTS;
    o.lr = 0.1, o.maximize = true;
    return optim_test_second_group(pt_optim_adagrad_params(1, &W, o), b, &o, 0.3);
}
static pt_optim *mk_adadelta_default(pt_tensor *W, pt_tensor *b)
{
    return pt_optim_adadelta_params(PARAMS(W, b), PT_ADADELTA_DEFAULTS);
}
static pt_optim *mk_adadelta_rho_wd_maximize(pt_tensor *W, pt_tensor *b)
{
    pt_adadelta_opts o = {
        .lr = 0.5, .rho = 0.8, .eps = 1e-4, .weight_decay = 0.1, .maximize = true};
    return pt_optim_adadelta_params(PARAMS(W, b), o);
}
static pt_optim *mk_adadelta_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_adadelta_opts o = PT_ADADELTA_DEFAULTS;
    return optim_test_second_group(pt_optim_adadelta_params(1, &W, o), b, &o, 2.0);
}
static pt_optim *mk_adamax_default(pt_tensor *W, pt_tensor *b)
{
    pt_adamax_opts o = PT_ADAMAX_DEFAULTS;
    o.lr = 0.05;
    return pt_optim_adamax_params(PARAMS(W, b), o);
}
static pt_optim *mk_adamax_wd_maximize(pt_tensor *W, pt_tensor *b)
{
    pt_adamax_opts o = PT_ADAMAX_DEFAULTS;
    o.lr = 0.02, o.betas[0] = 0.7, o.betas[1] = 0.9, o.weight_decay = 0.2, o.maximize = true;
    return pt_optim_adamax_params(PARAMS(W, b), o);
}
static pt_optim *mk_adamax_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_adamax_opts o = PT_ADAMAX_DEFAULTS;
    o.lr = 0.02;
    return optim_test_second_group(pt_optim_adamax_params(1, &W, o), b, &o, 0.1);
}
static pt_optim *mk_nadam_default(pt_tensor *W, pt_tensor *b)
{
    pt_nadam_opts o = PT_NADAM_DEFAULTS;
    o.lr = 0.05;
    return pt_optim_nadam_params(PARAMS(W, b), o);
}
static pt_optim *mk_nadam_wd_decay(pt_tensor *W, pt_tensor *b)
{
    pt_nadam_opts o = PT_NADAM_DEFAULTS;
    o.lr = 0.03, o.betas[0] = 0.8, o.betas[1] = 0.99, o.weight_decay = 0.1;
    o.momentum_decay = 0.05;
    return pt_optim_nadam_params(PARAMS(W, b), o);
}
static pt_optim *mk_nadam_two_groups(pt_tensor *W, pt_tensor *b)
{
    pt_nadam_opts o = PT_NADAM_DEFAULTS;
    o.lr = 0.02;
    return optim_test_second_group(pt_optim_nadam_params(1, &W, o), b, &o, 0.1);
}

typedef struct optim_case {
    const char *name;
    make_fn make;
} optim_case;

static const optim_case cases[] = {
    {"sgd_plain", mk_sgd_plain},
    {"sgd_momentum", mk_sgd_momentum},
    {"sgd_dampening_wd", mk_sgd_dampening_wd},
    {"sgd_nesterov_maximize", mk_sgd_nesterov_maximize},
    {"sgd_two_groups", mk_sgd_two_groups},
    {"adam_default", mk_adam_default},
    {"adam_wd_amsgrad", mk_adam_wd_amsgrad},
    {"adam_maximize", mk_adam_maximize},
    {"adam_two_groups", mk_adam_two_groups},
    {"adamw_default", mk_adamw_default},
    {"adamw_amsgrad_maximize", mk_adamw_amsgrad_maximize},
    {"rmsprop_default", mk_rmsprop_default},
    {"rmsprop_centered_momentum_wd", mk_rmsprop_centered_momentum_wd},
    {"rmsprop_momentum_maximize", mk_rmsprop_momentum_maximize},
    {"rmsprop_two_groups", mk_rmsprop_two_groups},
    {"adagrad_default", mk_adagrad_default},
    {"adagrad_decay_init_wd", mk_adagrad_decay_init_wd},
    {"adagrad_maximize_two_groups", mk_adagrad_maximize_two_groups},
    {"adadelta_default", mk_adadelta_default},
    {"adadelta_rho_wd_maximize", mk_adadelta_rho_wd_maximize},
    {"adadelta_two_groups", mk_adadelta_two_groups},
    {"adamax_default", mk_adamax_default},
    {"adamax_wd_maximize", mk_adamax_wd_maximize},
    {"adamax_two_groups", mk_adamax_two_groups},
    {"nadam_default", mk_nadam_default},
    {"nadam_wd_decay", mk_nadam_wd_decay},
    {"nadam_two_groups", mk_nadam_two_groups},
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

/* Runs one case for STEPS steps with parameters of dtype dt, comparing with torch after every
 * step. */
static void run_case_dtype(const optim_case *c, pt_dtype dt)
{
    print_message("  %s %s\n", c->name, pt_dtype_name(dt));
    char name[96];
    snprintf(name, sizeof(name), "%s%s", c->name, dt == PT_FLOAT64 ? ".f64" : "");
    problem pr = problem_new_dtype(dt);
    double rtol = dt == PT_FLOAT64 ? 1e-9 : 1e-5, atol = dt == PT_FLOAT64 ? 1e-12 : 1e-6;
    pt_optim *opt = c->make(pr.W, pr.b);
    assert_non_null(opt);
    for (int k = 0; k < STEPS; k++) {
        pt_optim_zero_grad(opt);
        assert_int_equal(problem_backward(&pr), PT_OK);
        assert_int_equal(pt_optim_step(opt), PT_OK);
        optim_test_check_step(ref_fx(name), name, pr.W, pr.b, k, rtol, atol);
    }
    pt_optim_free(opt);
    pt_release(pr.W);
    pt_release(pr.b);
}

/* One float32 case on `path`: it matches torch, and its algorithm's fused kernel ran 40 times
 * (20 steps x 2 parameters) on the kernel path and never on the fallback. */
static void run_case_path(const optim_case *c, optim_path path)
{
    pti_op op = optim_paths_op_of(c->name);
    assert_int_not_equal(op, PTI_OP_COUNT);
    optim_paths_use(path);
    run_case_dtype(c, PT_FLOAT32);
    int calls = optim_paths_count(op);
    optim_paths_restore();
    print_message("  %s: %s, %d kernel calls\n", c->name,
                  path == OPTIM_KERNEL ? "kernel" : "fallback", calls);
    assert_int_equal(calls, path == OPTIM_KERNEL ? 2 * STEPS : 0);
}

static void test_trajectories_match_torch(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++)
        run_case_path(&cases[i], OPTIM_KERNEL);
}

/* The same cases through the generic fallback (no optim_* kernels on the device). */
static void test_trajectories_generic_path(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++)
        run_case_path(&cases[i], OPTIM_FALLBACK);
}

/* float64 parameters take the generic path; torch ran the same cases in float64. */
static void test_trajectories_float64(void **state)
{
    (void)state;
    static const char *const names[] = {
        "sgd_nesterov_maximize",        "adam_wd_amsgrad",       "adamw_default",
        "rmsprop_centered_momentum_wd", "adagrad_decay_init_wd", "adadelta_default",
        "adamax_wd_maximize",           "nadam_wd_decay",
    };
    for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++)
        for (size_t i = 0; i < N_CASES; i++)
            if (strcmp(cases[i].name, names[n]) == 0)
                run_case_dtype(&cases[i], PT_FLOAT64);
}

/* The fused path (split across threads for these sizes) and the generic path agree on big
 * tensors with random gradients, for every case. */
static void test_fast_and_generic_paths_agree(void **state)
{
    (void)state;
    pt_manual_seed(11);
    pt_tensor *W0 = pt_randn(PT_SHAPE(300, 300), PT_FLOAT32, pt_cpu());
    pt_tensor *b0 = pt_randn(PT_SHAPE(1000), PT_FLOAT32, pt_cpu());
    pt_tensor *gW[3], *gb[3];
    for (int k = 0; k < 3; k++) {
        gW[k] = pt_randn(PT_SHAPE(300, 300), PT_FLOAT32, pt_cpu());
        gb[k] = pt_randn(PT_SHAPE(1000), PT_FLOAT32, pt_cpu());
    }
    for (size_t i = 0; i < N_CASES; i++) {
        pt_tensor *W[2], *b[2];
        for (int path = 0; path < 2; path++) {
            optim_paths_use(path == 1 ? OPTIM_FALLBACK : OPTIM_KERNEL);
            W[path] = pt_clone(W0);
            b[path] = pt_clone(b0);
            pt_set_requires_grad(W[path], true);
            pt_set_requires_grad(b[path], true);
            pt_optim *opt = cases[i].make(W[path], b[path]);
            for (int k = 0; k < 3; k++) {
                assert_int_equal(pt_set_grad(W[path], gW[k]), PT_OK);
                assert_int_equal(pt_set_grad(b[path], gb[k]), PT_OK);
                assert_int_equal(pt_optim_step(opt), PT_OK);
            }
            pt_optim_free(opt);
            optim_paths_restore();
        }
        print_message("  %s\n", cases[i].name);
        assert_tensor_close(W[0], W[1], 1e-5, 1e-6);
        assert_tensor_close(b[0], b[1], 1e-5, 1e-6);
        for (int path = 0; path < 2; path++) {
            pt_release(W[path]);
            pt_release(b[path]);
        }
    }
    for (int k = 0; k < 3; k++) {
        pt_release(gW[k]);
        pt_release(gb[k]);
    }
    pt_release(W0);
    pt_release(b0);
}

/* ---- groups and options ---------------------------------------------------------------------- */

static void test_groups_and_options(void **state)
{
    (void)state;
    problem pr = problem_new();
    pt_adam_opts o = PT_ADAM_DEFAULTS;
    pt_optim *opt = pt_optim_adam_params(1, &pr.W, o);
    assert_string_equal(pt_optim_name(opt), "Adam");
    assert_int_equal(pt_optim_add_param_group(opt, 1, &pr.b, NULL), PT_OK);
    assert_int_equal(pt_optim_num_groups(opt), 2);
    assert_int_equal(pt_optim_group_size(opt, 1), 1);
    assert_ptr_equal(pt_optim_group_param_ref(opt, 1, 0), pr.b);
    assert_true(pt_optim_get_lr(opt, 1) == 1e-3);
    assert_int_equal(pt_optim_set_lr(opt, 1, 0.5), PT_OK);
    assert_true(pt_optim_get_lr(opt, 1) == 0.5);
    assert_true(pt_optim_get_lr(opt, 0) == 1e-3);
    double v = 0;
    assert_int_equal(pt_optim_get_option(opt, 0, "betas", 1, &v), PT_OK);
    assert_true(v == 0.999);
    assert_int_equal(pt_optim_set_option(opt, 0, "betas", 0, 0.5), PT_OK);
    assert_int_equal(pt_optim_get_option(opt, 0, "betas", 0, &v), PT_OK);
    assert_true(v == 0.5);
    assert_int_equal(pt_optim_get_option(opt, 0, "amsgrad", 0, &v), PT_OK);
    assert_true(v == 0.0);
    /* extra keys (schedulers store initial_lr) */
    assert_false(pt_optim_has_option(opt, 0, "initial_lr"));
    assert_pt_status_error(pt_optim_get_option(opt, 0, "initial_lr", 0, &v), PT_ERR_INDEX,
                           "initial_lr");
    assert_int_equal(pt_optim_set_option(opt, 0, "initial_lr", 0, 0.25), PT_OK);
    assert_true(pt_optim_has_option(opt, 0, "initial_lr"));
    assert_false(pt_optim_has_option(opt, 1, "initial_lr"));
    assert_int_equal(pt_optim_get_option(opt, 0, "initial_lr", 0, &v), PT_OK);
    assert_true(v == 0.25);
    /* errors leave the value unchanged */
    assert_pt_status_error(pt_optim_set_lr(opt, 0, -1.0), PT_ERR_INVALID_ARG,
                           "Invalid learning rate");
    assert_true(pt_optim_get_lr(opt, 0) == 1e-3);
    assert_pt_status_error(pt_optim_set_option(opt, 0, "betas", 1, 1.0), PT_ERR_INVALID_ARG,
                           "Invalid beta parameter at index 1");
    assert_pt_status_error(pt_optim_get_option(opt, 0, "betas", 2, &v), PT_ERR_INDEX, "index 2");
    assert_pt_status_error(pt_optim_get_option(opt, 0, "foreach", 0, &v), PT_ERR_DTYPE,
                           "not a number");
    assert_pt_status_error(pt_optim_get_option(opt, 2, "lr", 0, &v), PT_ERR_INDEX,
                           "group 2 out of range");
    assert_true(isnan(pt_optim_get_lr(opt, 5)));
    pt_clear_error();
    pt_optim_free(opt);
    pt_release(pr.W);
    pt_release(pr.b);
}

/* Parameters without a gradient are skipped; zero_grad(set_to_none) clears .grad. */
static void test_step_skips_missing_grads_and_zero_grad(void **state)
{
    (void)state;
    problem pr = problem_new();
    pt_optim *opt = pt_optim_sgd_params(PARAMS(pr.W, pr.b), (pt_sgd_opts){.lr = 0.1});
    pt_tensor *b0 = pt_clone(pr.b);
    assert_int_equal(problem_backward(&pr), PT_OK);
    assert_int_equal(pt_set_grad(pr.b, NULL), PT_OK);
    pt_tensor *W0 = pt_clone(pr.W);
    assert_int_equal(pt_optim_step(opt), PT_OK);
    assert_tensor_equal(pr.b, b0);
    assert_true(pt_test_get(pr.W, 0) != pt_test_get(W0, 0));
    pt_tensor *g = pt_grad(pr.W);
    assert_non_null(g);
    pt_release(g);
    assert_int_equal(pt_optim_zero_grad_set_to_none(opt, false), PT_OK);
    g = pt_grad(pr.W);
    assert_true(pt_test_get(g, 3) == 0.0);
    pt_release(g);
    pt_optim_zero_grad(opt);
    assert_null(pt_grad(pr.W));
    pt_optim_free(opt);
    pt_release(pr.W);
    pt_release(pr.b);
    pt_release(b0);
    pt_release(W0);
}

static double closure_fn(void *user)
{
    problem *pr = user;
    pt_set_grad(pr->W, NULL);
    pt_set_grad(pr->b, NULL);
    return problem_backward(pr) == PT_OK ? 1.5 : NAN;
}

/* step(closure) runs the closure once then steps: same as the plain loop. */
static void test_step_closure(void **state)
{
    (void)state;
    problem pr = problem_new();
    pt_optim *opt = mk_sgd_momentum(pr.W, pr.b);
    pt_tensor *Wexp = fx_get(fx, "sgd_momentum.W");
    for (int k = 0; k < 3; k++) {
        double loss = 0;
        assert_int_equal(pt_optim_step_closure(opt, closure_fn, &pr, &loss), PT_OK);
        assert_true(loss == 1.5);
    }
    pt_scope_begin();
    assert_tensor_close(pr.W, pt_select(Wexp, 0, 2), 1e-5, 1e-6);
    pt_scope_end();
    pt_optim_free(opt);
    pt_release(pr.W);
    pt_release(pr.b);
}

/* ---- state dicts ------------------------------------------------------------------------------
 */

/* Renders a value the way tests/fixtures/gen/optim.py's render() does. */
static void render(const pt_value *v, char *buf, size_t cap, size_t *pos)
{
#define PUT(...) (*pos += (size_t)snprintf(buf + *pos, *pos < cap ? cap - *pos : 0, __VA_ARGS__))
    int64_t n = pt_value_len(v);
    switch (pt_value_kind_of(v)) {
    case PT_VALUE_NONE: PUT("None"); break;
    case PT_VALUE_BOOL: {
        bool b = false;
        pt_value_as_bool(v, &b);
        PUT("%s", b ? "True" : "False");
        break;
    }
    case PT_VALUE_INT: {
        int64_t i = 0;
        pt_value_as_int(v, &i);
        PUT("i%lld", (long long)i);
        break;
    }
    case PT_VALUE_FLOAT: {
        double d = 0;
        pt_value_as_float(v, &d);
        PUT("f%.17g", d);
        break;
    }
    case PT_VALUE_STR: PUT("'%s'", pt_value_as_str(v, NULL)); break;
    case PT_VALUE_TENSOR: {
        pt_tensor *t = pt_value_tensor_ref(v);
        PUT("T(%s,[", pt_dtype_name(pt_dtype_of(t)));
        for (int d = 0; d < pt_ndim(t); d++)
            PUT("%s%lld", d ? "," : "", (long long)pt_shape(t)[d]);
        PUT("])");
        break;
    }
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE: {
        bool list = pt_value_is(v, PT_VALUE_LIST);
        PUT(list ? "[" : "(");
        for (int64_t i = 0; i < n; i++) {
            if (i)
                PUT(",");
            render(pt_value_item_ref(v, i), buf, cap, pos);
        }
        PUT(list ? "]" : ")");
        break;
    }
    case PT_VALUE_DICT:
        PUT("{");
        for (int64_t i = 0; i < n; i++) {
            if (i)
                PUT(",");
            render(pt_value_key_ref(v, i), buf, cap, pos);
            PUT(":");
            render(pt_value_item_ref(v, i), buf, cap, pos);
        }
        PUT("}");
        break;
    default: PUT("?"); break;
    }
#undef PUT
}

static void assert_layout(const pt_value *sd, const char *fixture_name)
{
    static char got[16384], want[16384];
    size_t pos = 0;
    render(sd, got, sizeof(got), &pos);
    assert_true(pos < sizeof(got));
    pt_tensor *w = fx_get(fx, fixture_name);
    int64_t n = pt_numel(w);
    assert_true(n < (int64_t)sizeof(want));
    assert_int_equal(pt_copy_to_host(w, want, (size_t)n), PT_OK);
    want[n] = 0;
    assert_string_equal(got, want);
}

/* Every tensor in sd["state"] equals torch's (stored as sd.<case>.state.<id>.<key>). */
static void assert_state_values(const pt_value *sd, const char *name)
{
    const pt_value *state = pt_value_get_str_ref(sd, "state");
    assert_non_null(state);
    for (int64_t i = 0; i < pt_value_len(state); i++) {
        int64_t id = -1;
        assert_int_equal(pt_value_as_int(pt_value_key_ref(state, i), &id), PT_OK);
        const pt_value *st = pt_value_item_ref(state, i);
        for (int64_t k = 0; k < pt_value_len(st); k++) {
            pt_tensor *t = pt_value_tensor_ref(pt_value_item_ref(st, k));
            if (!t)
                continue;
            char key[128];
            snprintf(key, sizeof(key), "sd.%s.state.%lld.%s", name, (long long)id,
                     pt_value_as_str(pt_value_key_ref(st, k), NULL));
            assert_tensor_close(t, fx_get(ref_fx(key), key), 1e-5, 1e-6);
        }
    }
}

static pt_optim *mk_sd_sgd(pt_tensor *W, pt_tensor *b)
{
    pt_sgd_opts o = {.lr = 0.05};
    return optim_test_second_group(pt_optim_sgd_params(1, &W, o), b, &o, 0.2);
}
static pt_optim *mk_sd_sgd_momentum(pt_tensor *W, pt_tensor *b)
{
    pt_sgd_opts o = {.lr = 0.05, .momentum = 0.9, .nesterov = true};
    return optim_test_second_group(pt_optim_sgd_params(1, &W, o), b, &o, 0.2);
}
static pt_optim *mk_sd_adam_amsgrad(pt_tensor *W, pt_tensor *b)
{
    pt_adam_opts o = PT_ADAM_DEFAULTS;
    o.lr = 0.02, o.amsgrad = true, o.weight_decay = 0.5;
    return pt_optim_adam_params(PARAMS(W, b), o);
}
static pt_optim *mk_sd_adamw(pt_tensor *W, pt_tensor *b)
{
    pt_adamw_opts o = PT_ADAMW_DEFAULTS;
    o.lr = 0.02;
    return optim_test_second_group(pt_optim_adamw_params(1, &W, o), b, &o, 0.1);
}
static pt_optim *mk_sd_rmsprop(pt_tensor *W, pt_tensor *b)
{
    pt_rmsprop_opts o = PT_RMSPROP_DEFAULTS;
    return optim_test_second_group(pt_optim_rmsprop_params(1, &W, o), b, &o, 0.03);
}
static pt_optim *mk_sd_rmsprop_centered_momentum(pt_tensor *W, pt_tensor *b)
{
    pt_rmsprop_opts o = PT_RMSPROP_DEFAULTS;
    o.centered = true, o.momentum = 0.5;
    return pt_optim_rmsprop_params(PARAMS(W, b), o);
}
static pt_optim *mk_sd_adagrad(pt_tensor *W, pt_tensor *b)
{
    pt_adagrad_opts o = PT_ADAGRAD_DEFAULTS;
    o.lr = 0.1;
    return optim_test_second_group(pt_optim_adagrad_params(1, &W, o), b, &o, 0.3);
}
static pt_optim *mk_sd_adagrad_fresh(pt_tensor *W, pt_tensor *b)
{
    pt_adagrad_opts o = PT_ADAGRAD_DEFAULTS;
    o.lr = 0.1, o.initial_accumulator_value = 0.5;
    return pt_optim_adagrad_params(PARAMS(W, b), o);
}
static pt_optim *mk_sd_adam_fresh_initial_lr(pt_tensor *W, pt_tensor *b)
{
    pt_adam_opts o = PT_ADAM_DEFAULTS;
    o.lr = 0.02;
    pt_optim *opt = pt_optim_adam_params(PARAMS(W, b), o);
    assert_int_equal(pt_optim_set_option(opt, 0, "initial_lr", 0, 0.02), PT_OK);
    return opt;
}

typedef struct sd_case {
    const char *name;
    make_fn make;
    int steps;
} sd_case;

static const sd_case sd_cases[] = {
    {"sgd", mk_sd_sgd, 2},
    {"sgd_momentum", mk_sd_sgd_momentum, 2},
    {"adam", mk_adam_two_groups, 2},
    {"adam_amsgrad", mk_sd_adam_amsgrad, 2},
    {"adamw", mk_sd_adamw, 2},
    {"rmsprop", mk_sd_rmsprop, 2},
    {"rmsprop_centered_momentum", mk_sd_rmsprop_centered_momentum, 2},
    {"adagrad", mk_sd_adagrad, 2},
    {"adagrad_fresh", mk_sd_adagrad_fresh, 0},
    {"adadelta", mk_adadelta_two_groups, 2},
    {"adamax", mk_adamax_two_groups, 2},
    {"nadam", mk_nadam_two_groups, 2},
    {"adam_fresh_initial_lr", mk_sd_adam_fresh_initial_lr, 0},
};

static void run_steps(pt_optim *opt, problem *pr, int steps)
{
    for (int k = 0; k < steps; k++) {
        pt_optim_zero_grad(opt);
        assert_int_equal(problem_backward(pr), PT_OK);
        assert_int_equal(pt_optim_step(opt), PT_OK);
    }
}

static void test_state_dict_layout_matches_torch(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof(sd_cases) / sizeof(sd_cases[0]); c++) {
        print_message("  %s\n", sd_cases[c].name);
        problem pr = problem_new();
        pt_optim *opt = sd_cases[c].make(pr.W, pr.b);
        run_steps(opt, &pr, sd_cases[c].steps);
        pt_value *sd = pt_optim_state_dict(opt);
        assert_non_null(sd);
        char key[96];
        snprintf(key, sizeof(key), "sd.%s.layout", sd_cases[c].name);
        assert_layout(sd, key);
        assert_state_values(sd, sd_cases[c].name);
        pt_value_free(sd);
        pt_optim_free(opt);
        pt_release(pr.W);
        pt_release(pr.b);
    }
}

/* Save after 10 steps, load into a fresh optimizer (with a different lr, which the load
 * restores) over copies of the parameters, continue: the same trajectory as torch's
 * uninterrupted run. */
static void round_trip(const optim_case *c)
{
    problem a = problem_new();
    pt_optim *oa = c->make(a.W, a.b);
    run_steps(oa, &a, STEPS / 2);
    pt_value *sd = pt_optim_state_dict(oa);
    assert_non_null(sd);

    problem b = problem_new();
    optim_test_copy_params(b.W, b.b, a.W, a.b);
    pt_optim *ob = c->make(b.W, b.b);
    for (int g = 0; g < pt_optim_num_groups(ob); g++)
        assert_int_equal(pt_optim_set_lr(ob, g, 0.123), PT_OK);
    assert_int_equal(pt_optim_load_state_dict(ob, sd), PT_OK);
    for (int g = 0; g < pt_optim_num_groups(ob); g++)
        assert_true(pt_optim_get_lr(ob, g) == pt_optim_get_lr(oa, g));
    /* the loaded state is a copy: stepping A further must not move B */
    run_steps(oa, &a, 1);
    pt_value_free(sd);
    pt_optim_free(oa);
    for (int k = STEPS / 2; k < STEPS; k++) {
        run_steps(ob, &b, 1);
        optim_test_check_step(ref_fx(c->name), c->name, b.W, b.b, k, 1e-5, 1e-6);
    }
    pt_optim_free(ob);
    pt_release(a.W);
    pt_release(a.b);
    pt_release(b.W);
    pt_release(b.b);
}

static void test_state_dict_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++) {
        print_message("  %s\n", cases[i].name);
        round_trip(&cases[i]);
    }
}

/* A state dict missing any key the algorithm's step reads is refused at load, naming it
 * (it used to load and crash, or step silently, at the next step). */
static void test_load_refuses_missing_state_keys(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof(sd_cases) / sizeof(sd_cases[0]); c++) {
        if (sd_cases[c].steps == 0 && strcmp(sd_cases[c].name, "adagrad_fresh") != 0)
            continue;
        print_message("  %s\n", sd_cases[c].name);
        problem pr = problem_new();
        pt_optim *opt = sd_cases[c].make(pr.W, pr.b);
        run_steps(opt, &pr, sd_cases[c].steps);
        pt_value *sd = pt_optim_state_dict(opt);
        optim_test_missing_keys(sd_cases[c].make, sd, pr.W, pr.b, "momentum_buffer");
        pt_value_free(sd);
        pt_optim_free(opt);
        pt_release(pr.W);
        pt_release(pr.b);
    }
}

static void test_load_state_dict_errors(void **state)
{
    (void)state;
    problem pr = problem_new();
    pt_optim *two_groups = mk_adam_two_groups(pr.W, pr.b);
    run_steps(two_groups, &pr, 1);
    pt_value *sd2 = pt_optim_state_dict(two_groups);
    pt_optim *one_group = mk_adam_default(pr.W, pr.b);
    assert_pt_status_error(pt_optim_load_state_dict(one_group, sd2), PT_ERR_INVALID_ARG,
                           "different number of parameter groups");
    pt_value *sd1 = pt_optim_state_dict(one_group);
    pt_optim *other = pt_optim_adam_params(1, &pr.W, PT_ADAM_DEFAULTS);
    assert_int_equal(pt_optim_add_param_group(other, 1, &pr.b, NULL), PT_OK);
    assert_pt_status_error(pt_optim_load_state_dict(other, sd1), PT_ERR_INVALID_ARG,
                           "different number of parameter groups");
    /* same group sizes, swapped shapes: group 0 holds b ([5]) where W ([5, 4]) was saved */
    pt_optim *swapped = pt_optim_adam_params(1, &pr.b, PT_ADAM_DEFAULTS);
    assert_int_equal(pt_optim_add_param_group(swapped, 1, &pr.W, NULL), PT_OK);
    assert_int_equal(pt_optim_set_lr(swapped, 0, 0.5), PT_OK);
    assert_pt_status_error(pt_optim_load_state_dict(swapped, sd2), PT_ERR_SHAPE,
                           "'exp_avg' has shape [5, 4] but the parameter has shape [5]");
    assert_true(pt_optim_get_lr(swapped, 0) == 0.5); /* unchanged after the failure */
    /* a state buffer of an integer dtype is refused (a floating one is cast, as torch does) */
    pt_value *sd_int = pt_value_copy(sd2);
    pt_tensor *ints = pt_zeros(PT_SHAPE(5, 4), PT_INT64, pt_cpu());
    assert_int_equal(pt_value_dict_set_str(pt_value_path_ref(sd_int, "state.0"), "exp_avg",
                                           pt_value_tensor(ints)),
                     PT_OK);
    pt_release(ints);
    pt_optim *fresh_int = mk_adam_two_groups(pr.W, pr.b);
    assert_pt_status_error(pt_optim_load_state_dict(fresh_int, sd_int), PT_ERR_DTYPE,
                           "'exp_avg' must be a floating tensor");
    pt_optim_free(fresh_int);
    pt_value_free(sd_int);
    pt_value *sd_sw = pt_optim_state_dict(swapped);
    assert_int_equal(pt_value_len(pt_value_get_str_ref(sd_sw, "state")), 0);
    /* group size mismatch */
    pt_optim *big = pt_optim_adam_params(PARAMS(pr.W, pr.b), PT_ADAM_DEFAULTS);
    pt_tensor *extra = pt_zeros(PT_SHAPE(2), PT_FLOAT32, pt_cpu());
    pt_set_requires_grad(extra, true);
    assert_int_equal(pt_optim_add_param_group(big, 1, &extra, NULL), PT_OK);
    assert_pt_status_error(pt_optim_load_state_dict(big, sd2), PT_ERR_INVALID_ARG,
                           "doesn't match the size of optimizer's group");
    /* not a state dict */
    pt_value *junk = pt_value_list();
    assert_pt_status_error(pt_optim_load_state_dict(big, junk), PT_ERR_FORMAT, "must be a dict");
    assert_pt_status_error(pt_optim_load_state_dict(big, NULL), PT_ERR_NULL, "NULL");
    pt_value_free(junk);
    pt_value_free(sd_sw);
    pt_value_free(sd1);
    pt_value_free(sd2);
    pt_optim_free(big);
    pt_optim_free(swapped);
    pt_optim_free(other);
    pt_optim_free(one_group);
    pt_optim_free(two_groups);
    pt_release(extra);
    pt_release(pr.W);
    pt_release(pr.b);
}

/* ---- module constructors and closures ------------------------------------------------------ */

static pt_tensor *identity_forward(pt_module *self, const pt_tensor *x)
{
    (void)self;
    return pt_clone(x);
}

static const pt_module_def net_def = {.type_name = "Net", .forward = identity_forward};

/* pt_optim_<x>(module) takes the module's parameters in named_parameters order (children's
 * after the module's own); the optimizer keeps them alive after the module is freed. */
static void test_module_constructor(void **state)
{
    (void)state;
    pt_module *net = pt_nn_module_new(&net_def, NULL);
    pt_module *child = pt_nn_module_new(&net_def, NULL);
    pt_tensor *a = pt_zeros(PT_SHAPE(2, 3), PT_FLOAT32, pt_cpu());
    pt_tensor *c = pt_ones(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_nn_register_parameter(child, "w", c), PT_OK);
    assert_int_equal(pt_nn_register_parameter(net, "a", a), PT_OK);
    assert_int_equal(pt_nn_add(net, "child", child), PT_OK);
    pt_optim *opt = pt_optim_adamw(net, PT_ADAMW_DEFAULTS);
    assert_non_null(opt);
    assert_int_equal(pt_optim_num_groups(opt), 1);
    assert_int_equal(pt_optim_group_size(opt, 0), 2);
    assert_ptr_equal(pt_optim_group_param_ref(opt, 0, 0), a);
    assert_ptr_equal(pt_optim_group_param_ref(opt, 0, 1), c);
    pt_nn_free(net);
    pt_release(a);
    pt_tensor *g = pt_ones(PT_SHAPE(4), PT_FLOAT32, pt_cpu());
    assert_int_equal(pt_set_grad(c, g), PT_OK);
    assert_int_equal(pt_optim_step(opt), PT_OK);
    /* AdamW's first step moves by lr (plus the decay): 1 * (1 - 1e-5) - 1e-3 */
    assert_float_equal(pt_test_get(c, 0), 1.0 * (1.0 - 1e-5) - 1e-3, 1e-6);
    pt_optim_free(opt);
    pt_release(c);
    pt_release(g);

    pt_module *empty = pt_nn_module_new(&net_def, NULL);
    assert_pt_error(pt_optim_sgd(empty, PT_SGD_DEFAULTS), PT_ERR_INVALID_ARG,
                    "empty parameter list");
    assert_pt_error(pt_optim_sgd(NULL, PT_SGD_DEFAULTS), PT_ERR_NULL, "module is NULL");
    pt_nn_free(empty);
}

static double failing_closure(void *user)
{
    (void)user;
    return NAN;
}

static void test_closure_error_aborts_step(void **state)
{
    (void)state;
    problem pr = problem_new();
    pt_optim *opt = pt_optim_sgd_params(PARAMS(pr.W, pr.b), (pt_sgd_opts){.lr = 0.1});
    assert_int_equal(problem_backward(&pr), PT_OK);
    pt_tensor *W0 = pt_clone(pr.W);
    assert_pt_status_error(pt_optim_step_closure(opt, failing_closure, NULL, NULL), PT_ERR_RUNTIME,
                           "closure reported an error");
    assert_tensor_equal(pr.W, W0);
    pt_optim_free(opt);
    pt_release(W0);
    pt_release(pr.W);
    pt_release(pr.b);
}

/* ---- errors ------------------------------------------------------------------------------------
 */

static void test_constructor_errors(void **state)
{
    (void)state;
    problem pr = problem_new();
    pt_tensor *plain = pt_zeros(PT_SHAPE(3), PT_FLOAT32, pt_cpu());
    pt_adam_opts a = PT_ADAM_DEFAULTS;
    a.lr = -0.1;
    assert_pt_error(pt_optim_adam_params(1, &pr.W, a), PT_ERR_INVALID_ARG,
                    "pt_optim_adam: Invalid learning rate: -0.1");
    a = PT_ADAM_DEFAULTS;
    a.betas[0] = 1.0;
    assert_pt_error(pt_optim_adam_params(1, &pr.W, a), PT_ERR_INVALID_ARG,
                    "Invalid beta parameter at index 0");
    a = PT_ADAM_DEFAULTS;
    a.eps = -1;
    assert_pt_error(pt_optim_adam_params(1, &pr.W, a), PT_ERR_INVALID_ARG, "Invalid epsilon");
    assert_pt_error(pt_optim_sgd_params(1, &plain, PT_SGD_DEFAULTS), PT_ERR_INVALID_ARG,
                    "does not require grad");
    assert_pt_error(pt_optim_sgd_params(0, NULL, PT_SGD_DEFAULTS), PT_ERR_INVALID_ARG,
                    "empty parameter list");
    assert_pt_error(pt_optim_sgd_params(2, (pt_tensor *const[]){pr.W, pr.W}, PT_SGD_DEFAULTS),
                    PT_ERR_INVALID_ARG, "appears twice");
    assert_pt_error(pt_optim_sgd_params(1, &pr.W, (pt_sgd_opts){.lr = 0.1, .nesterov = true}),
                    PT_ERR_INVALID_ARG, "Nesterov momentum requires");
    assert_pt_error(pt_optim_sgd_params(1, &pr.W, (pt_sgd_opts){.lr = 0.1, .momentum = -1}),
                    PT_ERR_INVALID_ARG, "Invalid momentum value");
    pt_tensor *nonleaf = pt_mul_scalar(pr.W, 2.0);
    assert_pt_error(pt_optim_sgd_params(1, &nonleaf, PT_SGD_DEFAULTS), PT_ERR_INVALID_ARG,
                    "non-leaf");
    pt_optim *opt = pt_optim_sgd_params(1, &pr.W, PT_SGD_DEFAULTS);
    assert_pt_status_error(pt_optim_add_param_group(opt, 1, &pr.W, NULL), PT_ERR_INVALID_ARG,
                           "more than one parameter group");
    assert_int_equal(pt_optim_num_groups(opt), 1);
    assert_pt_status_error(pt_optim_step_closure(opt, NULL, NULL, NULL), PT_ERR_NULL, "closure");
    pt_optim_free(opt);
    pt_optim_free(NULL);
    pt_release(nonleaf);
    pt_release(plain);
    pt_release(pr.W);
    pt_release(pr.b);
}

int main(void)
{
    fx = fx_open("optim");
    fx_nadam = fx_open("optim_nadam");
#define T(f) cmocka_unit_test_setup_teardown(f, pt_test_setup, pt_test_teardown)
    const struct CMUnitTest tests[] = {
        T(test_trajectories_match_torch),
        T(test_trajectories_generic_path),
        T(test_trajectories_float64),
        T(test_fast_and_generic_paths_agree),
        T(test_groups_and_options),
        T(test_step_skips_missing_grads_and_zero_grad),
        T(test_step_closure),
        T(test_constructor_errors),
        T(test_module_constructor),
        T(test_closure_error_aborts_step),
        T(test_state_dict_layout_matches_torch),
        T(test_state_dict_round_trip),
        T(test_load_state_dict_errors),
        T(test_load_refuses_missing_state_keys),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_close(fx);
    fx_close(fx_nadam);
    return rc;
}
