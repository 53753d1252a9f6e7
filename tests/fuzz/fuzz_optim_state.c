/* Fuzz target for the optimizer and LR scheduler state-dict loaders (src/optim/optim_state.c,
 * src/optim/lr_scheduler_state.c, and the algorithms' own loaders): the input is a .pt file
 * (seeds: torch-written optimizer state dicts over a [5, 4] and a [5] parameter, made by
 * tests/fuzz/gen_optim_state_corpus.py); its value, or its "optimizer" / "scheduler" entry, is
 * loaded into each of the 16 optimizers and several schedulers over such parameters, and each
 * one that accepts it must export a state that loads back (a round trip) and then takes a step; at
 * least one seed must load (checked when the smoke run ends). Any input must give PT_OK or a
 * clean error: never a crash, a sanitizer report or a leak. Built as a libFuzzer target with
 * -DPT_FUZZ=ON (clang), replayed with mutations by smoke_corpus.c in every build. */
#include <prometorch/prometorch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Inputs the .pt reader accepted; the smoke test checks that its unmutated seeds all are. */
int fuzz_accepted;
/* State dicts an optimizer or scheduler accepted (each then passed the round trip); the smoke
 * run's destructor below fails it when none did, since the round trip then tested nothing. */
static int fuzz_states_loaded;

__attribute__((destructor)) static void require_some_state_loaded(void)
{
    if (fuzz_accepted > 0 && fuzz_states_loaded == 0) {
        fprintf(stderr, "fuzz_optim_state: no input loaded into any optimizer or scheduler\n");
        _exit(1);
    }
}

typedef pt_optim *(*make_fn)(pt_tensor *const *params);

static pt_optim *mk_sgd(pt_tensor *const *p)
{
    pt_sgd_opts o = PT_SGD_DEFAULTS;
    o.momentum = 0.9;
    return pt_optim_sgd_params(2, p, o);
}
static pt_optim *mk_adam(pt_tensor *const *p)
{
    return pt_optim_adam_params(2, p, PT_ADAM_DEFAULTS);
}
static pt_optim *mk_adamw(pt_tensor *const *p)
{
    return pt_optim_adamw_params(2, p, PT_ADAMW_DEFAULTS);
}
static pt_optim *mk_rmsprop(pt_tensor *const *p)
{
    return pt_optim_rmsprop_params(2, p, PT_RMSPROP_DEFAULTS);
}
static pt_optim *mk_adagrad(pt_tensor *const *p)
{
    return pt_optim_adagrad_params(2, p, PT_ADAGRAD_DEFAULTS);
}
static pt_optim *mk_adadelta(pt_tensor *const *p)
{
    return pt_optim_adadelta_params(2, p, PT_ADADELTA_DEFAULTS);
}
static pt_optim *mk_adamax(pt_tensor *const *p)
{
    return pt_optim_adamax_params(2, p, PT_ADAMAX_DEFAULTS);
}
static pt_optim *mk_nadam(pt_tensor *const *p)
{
    return pt_optim_nadam_params(2, p, PT_NADAM_DEFAULTS);
}
static pt_optim *mk_radam(pt_tensor *const *p)
{
    return pt_optim_radam_params(2, p, PT_RADAM_DEFAULTS);
}
static pt_optim *mk_asgd(pt_tensor *const *p)
{
    return pt_optim_asgd_params(2, p, PT_ASGD_DEFAULTS);
}
static pt_optim *mk_rprop(pt_tensor *const *p)
{
    return pt_optim_rprop_params(2, p, PT_RPROP_DEFAULTS);
}
static pt_optim *mk_lbfgs(pt_tensor *const *p)
{
    return pt_optim_lbfgs_params(2, p, PT_LBFGS_DEFAULTS);
}
static pt_optim *mk_lion(pt_tensor *const *p)
{
    return pt_optim_lion_params(2, p, PT_LION_DEFAULTS);
}
static pt_optim *mk_lamb(pt_tensor *const *p)
{
    return pt_optim_lamb_params(2, p, PT_LAMB_DEFAULTS);
}
static pt_optim *mk_adafactor(pt_tensor *const *p)
{
    return pt_optim_adafactor_params(2, p, PT_ADAFACTOR_DEFAULTS);
}
static pt_optim *mk_sophia(pt_tensor *const *p)
{
    return pt_optim_sophia_params(2, p, PT_SOPHIA_DEFAULTS);
}

static const make_fn MAKERS[] = {
    mk_sgd,   mk_adam, mk_adamw, mk_rmsprop, mk_adagrad, mk_adadelta, mk_adamax,    mk_nadam,
    mk_radam, mk_asgd, mk_rprop, mk_lbfgs,   mk_lion,    mk_lamb,     mk_adafactor, mk_sophia};

static double closure(void *user)
{
    (void)user;
    return 1.0;
}

/* A sub-dict by key, else v itself (a checkpoint dict holds the optimizer's under a key). */
static const pt_value *entry_or_self(const pt_value *v, const char *key)
{
    const pt_value *e = pt_value_is(v, PT_VALUE_DICT) ? pt_value_get_str_ref(v, key) : NULL;
    pt_clear_error();
    return e ? e : v;
}

/* A refused state dict must say why: a failing status and a message (a crash, a silent
 * failure or a missing message aborts, which the fuzzer and the smoke test report). */
static void require_clean_refusal(pt_status st)
{
    if (st == PT_OK)
        return;
    if (pt_last_status() != st || pt_last_error()[0] == '\0')
        abort();
}

/* What an optimizer accepted it must give back: its exported state loads into a fresh one of
 * the same kind (a state that loads but cannot be saved and restored would lose a run). */
static void require_round_trip(make_fn make, pt_optim *o, pt_tensor *const *params)
{
    pt_value *back = pt_optim_state_dict(o);
    pt_optim *fresh = back ? make(params) : NULL;
    if (!back || !fresh || pt_optim_load_state_dict(fresh, back) != PT_OK)
        abort();
    pt_optim_free(fresh);
    pt_value_free(back);
}

static void try_optimizers(const pt_value *sd, pt_tensor *const *params)
{
    for (size_t k = 0; k < sizeof(MAKERS) / sizeof(MAKERS[0]); k++) {
        pt_optim *o = MAKERS[k](params);
        if (!o)
            abort();
        pt_clear_error();
        pt_status st = pt_optim_load_state_dict(o, sd);
        require_clean_refusal(st);
        if (st == PT_OK) {
            fuzz_states_loaded++;
            require_round_trip(MAKERS[k], o, params);
            /* LBFGS needs its closure; the others step on the gradients set below */
            double loss = 0;
            if (MAKERS[k] == mk_lbfgs)
                pt_optim_step_closure(o, closure, NULL, &loss);
            else
                pt_optim_step(o);
        }
        pt_clear_error();
        pt_optim_free(o);
    }
}

static void try_schedulers(const pt_value *sd, pt_tensor *const *params)
{
    for (int k = 0; k < 6; k++) {
        pt_optim *o = mk_sgd(params);
        pt_lr_scheduler *s = NULL;
        switch (k) {
        case 0: s = pt_lr_step_lr(o, 3, 0.5); break;
        case 1: s = pt_lr_cosine_annealing_lr(o, 10, 0.0); break;
        case 2: s = pt_lr_cosine_annealing_warm_restarts(o, 3, 2, 0.0); break;
        case 3: s = pt_lr_linear_lr(o, 0.5, 1.0, 4); break;
        case 4: s = pt_lr_polynomial_lr(o, 4, 1.0); break;
        default: s = pt_lr_exponential_lr(o, 0.9); break;
        }
        if (!s)
            abort();
        pt_clear_error();
        pt_status st = pt_lr_scheduler_load_state_dict(s, sd);
        require_clean_refusal(st);
        if (st == PT_OK) {
            fuzz_states_loaded++;
            /* the scheduler's exported state loads back into itself */
            pt_value *back = pt_lr_scheduler_state_dict(s);
            if (!back || pt_lr_scheduler_load_state_dict(s, back) != PT_OK)
                abort();
            pt_value_free(back);
            pt_lr_scheduler_step(s);
        }
        pt_clear_error();
        pt_lr_scheduler_free(s);
        pt_optim_free(o);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_value *v = pt_load_buffer(data, size, "fuzz.pt", NULL);
    if (!v) {
        if (pt_last_status() == PT_OK)
            abort();
        pt_clear_error();
        return 0;
    }
    fuzz_accepted++;
    pt_tensor *params[2] = {pt_full(PT_SHAPE(5, 4), 0.5, PT_FLOAT32, pt_cpu()),
                            pt_full(PT_SHAPE(5), -0.25, PT_FLOAT32, pt_cpu())};
    for (int i = 0; i < 2; i++) {
        pt_set_requires_grad(params[i], true);
        pt_tensor *g = pt_full_like(params[i], 0.125);
        pt_set_grad(params[i], g);
        pt_release(g);
    }
    try_optimizers(entry_or_self(v, "optimizer"), params);
    try_schedulers(entry_or_self(v, "scheduler"), params);
    pt_release(params[0]);
    pt_release(params[1]);
    pt_value_free(v);
    pt_clear_error();
    return 0;
}
