/* Resuming training from a checkpoint: a run that saves model + optimizer + scheduler + epoch
 * + generator state to a .pt file halfway, and is continued by a fresh process state that loads
 * it, must end with exactly the parameters of an uninterrupted run (dropout draws from the
 * generator, Adam has moment buffers and a step count, StepLR changes the rate mid-run). A run
 * started in PyTorch (tests/fixtures/resume_torch.pt, gen/resume.py) continues here to
 * torch's final parameters. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEPS 12
#define BATCH 8

typedef struct run {
    pt_module *model;
    pt_optim *opt;
    pt_lr_scheduler *sched;
} run;

static run make_run(uint64_t init_seed)
{
    pt_manual_seed(init_seed);
    pt_module *layers[] = {pt_nn_linear(6, 16, true), pt_nn_relu(), pt_nn_dropout(0.3),
                           pt_nn_linear(16, 3, true)};
    run r;
    r.model = pt_nn_sequential(4, layers);
    assert_non_null(r.model);
    pt_adam_opts o = PT_ADAM_DEFAULTS;
    o.lr = 0.05;
    o.weight_decay = 0.01;
    r.opt = pt_optim_adam(r.model, o);
    assert_non_null(r.opt);
    r.sched = pt_lr_step_lr(r.opt, 4, 0.5);
    assert_non_null(r.sched);
    return r;
}

static void free_run(run *r)
{
    pt_lr_scheduler_free(r->sched);
    pt_optim_free(r->opt);
    pt_nn_free(r->model);
}

/* One step on batch `step` (inputs fixed by the step number, not by the generator). */
static void train_step(run *r, int step)
{
    float x[BATCH * 6], y[BATCH * 3];
    for (int i = 0; i < BATCH * 6; i++)
        x[i] = (float)((i * 7 + step * 13) % 17) / 8.0f - 1.0f;
    for (int i = 0; i < BATCH * 3; i++)
        y[i] = (float)((i * 5 + step * 3) % 11) / 5.0f - 1.0f;
    pt_tensor *xt = pt_from_data(x, PT_SHAPE(BATCH, 6), PT_FLOAT32, pt_cpu());
    pt_tensor *yt = pt_from_data(y, PT_SHAPE(BATCH, 3), PT_FLOAT32, pt_cpu());
    pt_optim_zero_grad(r->opt);
    pt_tensor *out = pt_nn_forward(r->model, xt);
    pt_tensor *loss = pt_mse_loss(out, yt, PT_REDUCTION_MEAN);
    assert_non_null(loss);
    assert_int_equal(pt_backward(loss, NULL, false, false), PT_OK);
    assert_int_equal(pt_optim_step(r->opt), PT_OK);
    assert_int_equal(pt_lr_scheduler_step(r->sched), PT_OK);
    pt_release(xt);
    pt_release(yt);
    pt_release(out);
    pt_release(loss);
}

static void save_checkpoint(run *r, const char *path, int64_t epoch)
{
    pt_value *ck = pt_value_dict();
    assert_int_equal(pt_value_dict_set_str(ck, "model", pt_nn_state_dict(r->model)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(ck, "optimizer", pt_optim_state_dict(r->opt)), PT_OK);
    assert_int_equal(pt_value_dict_set_str(ck, "scheduler", pt_lr_scheduler_state_dict(r->sched)),
                     PT_OK);
    assert_int_equal(pt_value_dict_set_str(ck, "epoch", pt_value_int(epoch)), PT_OK);
    pt_tensor *rng = pt_get_rng_state();
    assert_int_equal(pt_value_dict_set_str(ck, "rng", pt_value_tensor(rng)), PT_OK);
    pt_release(rng);
    assert_int_equal(pt_save(path, ck), PT_OK);
    pt_value_free(ck);
}

static int64_t load_checkpoint(run *r, const char *path)
{
    pt_value *ck = pt_load(path);
    assert_non_null(ck);
    assert_int_equal(pt_nn_load_state_dict(r->model, pt_value_get_str_ref(ck, "model"), true),
                     PT_OK);
    assert_int_equal(pt_optim_load_state_dict(r->opt, pt_value_get_str_ref(ck, "optimizer")),
                     PT_OK);
    assert_int_equal(
        pt_lr_scheduler_load_state_dict(r->sched, pt_value_get_str_ref(ck, "scheduler")), PT_OK);
    assert_int_equal(pt_set_rng_state(pt_value_tensor_ref(pt_value_get_str_ref(ck, "rng"))), PT_OK);
    int64_t epoch = -1;
    assert_int_equal(pt_value_as_int(pt_value_get_str_ref(ck, "epoch"), &epoch), PT_OK);
    pt_value_free(ck);
    return epoch;
}

static void assert_same_parameters(pt_module *a, pt_module *b)
{
    pt_value *sa = pt_nn_state_dict(a), *sb = pt_nn_state_dict(b);
    assert_int_equal(pt_value_len(sa), pt_value_len(sb));
    for (int64_t i = 0; i < pt_value_len(sa); i++)
        assert_tensor_equal(pt_value_tensor_ref(pt_value_item_ref(sa, i)),
                            pt_value_tensor_ref(pt_value_item_ref(sb, i)));
    pt_value_free(sa);
    pt_value_free(sb);
}

static void test_resume_matches_uninterrupted_run(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/pt_resume_%d.pt", (int)getpid());

    run whole = make_run(7);
    pt_nn_train(whole.model, true);
    for (int s = 0; s < STEPS; s++)
        train_step(&whole, s);

    run first = make_run(7);
    pt_nn_train(first.model, true);
    for (int s = 0; s < STEPS / 2; s++)
        train_step(&first, s);
    save_checkpoint(&first, path, STEPS / 2);
    free_run(&first);

    /* a fresh start: other initial weights and generator position, then the checkpoint */
    run second = make_run(99);
    pt_tensor *noise = pt_rand(PT_SHAPE(100), PT_FLOAT32, pt_cpu());
    pt_release(noise);
    int64_t epoch = load_checkpoint(&second, path);
    assert_int_equal(epoch, STEPS / 2);
    pt_nn_train(second.model, true);
    for (int s = (int)epoch; s < STEPS; s++)
        train_step(&second, s);

    assert_same_parameters(whole.model, second.model);
    assert_true(pt_lr_scheduler_get_last_lr(whole.sched, 0) ==
                pt_lr_scheduler_get_last_lr(second.sched, 0));
    free_run(&whole);
    free_run(&second);
    unlink(path);
}

/* Without the generator state the continued run differs (dropout masks change): the test above
 * would catch a checkpoint that lost it. */
static void test_resume_without_rng_state_differs(void **state)
{
    (void)state;
    run whole = make_run(7);
    pt_nn_train(whole.model, true);
    for (int s = 0; s < STEPS; s++)
        train_step(&whole, s);

    run other = make_run(7);
    pt_nn_train(other.model, true);
    for (int s = 0; s < STEPS / 2; s++)
        train_step(&other, s);
    pt_manual_seed(12345);
    for (int s = STEPS / 2; s < STEPS; s++)
        train_step(&other, s);
    pt_value *sa = pt_nn_state_dict(whole.model), *sb = pt_nn_state_dict(other.model);
    float a[3], b[3];
    pt_tensor *wa = pt_value_tensor_ref(pt_value_get_str_ref(sa, "3.bias"));
    pt_tensor *wb = pt_value_tensor_ref(pt_value_get_str_ref(sb, "3.bias"));
    assert_int_equal(pt_copy_to_host(wa, a, sizeof a), PT_OK);
    assert_int_equal(pt_copy_to_host(wb, b, sizeof b), PT_OK);
    assert_true(memcmp(a, b, sizeof a) != 0);
    pt_value_free(sa);
    pt_value_free(sb);
    free_run(&whole);
    free_run(&other);
}

/* torch trained SAVE_AT steps and saved; PromeTorch loads model, Adam and StepLR state and runs
 * the remaining steps on the same batches. float32 rounding differs between the two libraries'
 * kernels, and Adam divides by sqrt(v) of small gradients, so parameters are compared at
 * rtol 1e-4 / atol 1e-5 rather than bit for bit. */
static void test_resume_a_pytorch_run(void **state)
{
    (void)state;
    pt_fixture *fx = fx_open("resume");
    pt_module *layers[] = {pt_nn_linear(6, 16, true), pt_nn_tanh(), pt_nn_linear(16, 3, true)};
    pt_module *model = pt_nn_sequential(3, layers);
    pt_adam_opts o = PT_ADAM_DEFAULTS;
    o.lr = 0.05;
    o.weight_decay = 0.01;
    pt_optim *opt = pt_optim_adam(model, o);
    pt_lr_scheduler *sched = pt_lr_step_lr(opt, 2, 0.5);
    char path[512];
    snprintf(path, sizeof path, "%s/resume_torch.pt", PT_FIXTURES_DIR);
    pt_value *ck = pt_load(path);
    assert_non_null(ck);
    assert_int_equal(pt_nn_load_state_dict(model, pt_value_get_str_ref(ck, "model"), true), PT_OK);
    assert_int_equal(pt_optim_load_state_dict(opt, pt_value_get_str_ref(ck, "optimizer")), PT_OK);
    assert_int_equal(pt_lr_scheduler_load_state_dict(sched, pt_value_get_str_ref(ck, "scheduler")),
                     PT_OK);
    int64_t start = 0;
    assert_int_equal(pt_value_as_int(pt_value_get_str_ref(ck, "epoch"), &start), PT_OK);
    pt_value_free(ck);
    for (int64_t s = start; s < 6; s++) {
        char xn[32], yn[32];
        snprintf(xn, sizeof xn, "x%lld", (long long)s);
        snprintf(yn, sizeof yn, "y%lld", (long long)s);
        pt_tensor *x = fx_get(fx, xn), *y = fx_get(fx, yn);
        pt_optim_zero_grad(opt);
        pt_tensor *out = pt_nn_forward(model, x);
        pt_tensor *loss = pt_mse_loss(out, y, PT_REDUCTION_MEAN);
        assert_int_equal(pt_backward(loss, NULL, false, false), PT_OK);
        assert_int_equal(pt_optim_step(opt), PT_OK);
        assert_int_equal(pt_lr_scheduler_step(sched), PT_OK);
        pt_release(x);
        pt_release(y);
        pt_release(out);
        pt_release(loss);
    }
    pt_value *sd = pt_nn_state_dict(model);
    for (int64_t i = 0; i < pt_value_len(sd); i++) {
        char name[64];
        snprintf(name, sizeof name, "final.%s", pt_value_as_str(pt_value_key_ref(sd, i), NULL));
        pt_tensor *want = fx_get(fx, name);
        assert_tensor_close(pt_value_tensor_ref(pt_value_item_ref(sd, i)), want, 1e-4, 1e-5);
        pt_release(want);
    }
    pt_tensor *lr = fx_get(fx, "final_lr");
    assert_true(pt_lr_scheduler_get_last_lr(sched, 0) == pt_item(lr));
    pt_release(lr);
    pt_value_free(sd);
    pt_lr_scheduler_free(sched);
    pt_optim_free(opt);
    pt_nn_free(model);
    fx_close(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_resume_matches_uninterrupted_run, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_resume_without_rng_state_differs, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_resume_a_pytorch_run, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
