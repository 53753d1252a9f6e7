/* Helpers shared by the optimizer tests (tests/internal/test_optim.c and test_optim2.c):
 * building a two-group optimizer over the fixture problem's (W, b), comparing (W, b) with the
 * reference trajectory after a step, and copying parameters for state-dict round trips. Header-only
 * (static inline) so that each test binary stays one source file. */
#ifndef PT_TEST_OPTIM_COMMON_H
#define PT_TEST_OPTIM_COMMON_H

#include <stdio.h>
#include <string.h>

#include "common/testutil.h"

/* Builds the optimizer of one case over the problem's two parameters. */
typedef pt_optim *(*make_fn)(pt_tensor *W, pt_tensor *b);

/* Both parameters as the (n, params) arguments of pt_optim_<x>_params. */
#define PARAMS(W, b)                                                                               \
    2, (pt_tensor *const[])                                                                        \
    {                                                                                              \
        W, b                                                                                       \
    }

/* Adds {b} as group 1 of opt (built over {W}) with the options struct *opts (NULL: the
 * constructor's), then sets that group's lr to lr_b. Returns opt. */
static inline pt_optim *optim_test_second_group(pt_optim *opt, pt_tensor *b, const void *opts,
                                                double lr_b)
{
    assert_non_null(opt);
    assert_int_equal(pt_optim_add_param_group(opt, 1, &b, opts), PT_OK);
    assert_int_equal(pt_optim_set_lr(opt, 1, lr_b), PT_OK);
    return opt;
}

/* W and b equal row k of the fixture trajectories "<name>.W" and "<name>.b". */
static inline void optim_test_check_step(const pt_fixture *fx, const char *name, const pt_tensor *W,
                                         const pt_tensor *b, int k, double rtol, double atol)
{
    char key[128];
    pt_scope_begin();
    snprintf(key, sizeof(key), "%s.W", name);
    assert_tensor_close(W, pt_select(fx_get(fx, key), 0, k), rtol, atol);
    snprintf(key, sizeof(key), "%s.b", name);
    assert_tensor_close(b, pt_select(fx_get(fx, key), 0, k), rtol, atol);
    pt_scope_end();
}

/* dst_W = src_W, dst_b = src_b in place, outside autograd (fresh parameters that continue a
 * saved run). */
static inline void optim_test_copy_params(pt_tensor *dst_W, pt_tensor *dst_b,
                                          const pt_tensor *src_W, const pt_tensor *src_b)
{
    pt_no_grad_begin();
    assert_int_equal(pt_copy_(dst_W, src_W), PT_OK);
    assert_int_equal(pt_copy_(dst_b, src_b), PT_OK);
    pt_no_grad_end();
}

/* Every key of state 0 in sd (a state dict of the optimizer `make` builds) is needed: a copy
 * of sd without it is refused by a fresh optimizer with an error naming the key, and that
 * optimizer keeps its empty state (no half-loaded state). `optional` names a key that may be
 * absent (SGD's momentum_buffer), or NULL. */
static inline void optim_test_missing_keys(make_fn make, const pt_value *sd, pt_tensor *W,
                                           pt_tensor *b, const char *optional)
{
    const pt_value *st0 = pt_value_path_ref(sd, "state.0");
    if (!st0) {
        pt_clear_error();
        return;
    }
    for (int64_t k = 0; k < pt_value_len(st0); k++) {
        const char *key = pt_value_as_str(pt_value_key_ref(st0, k), NULL);
        if (optional && strcmp(key, optional) == 0)
            continue;
        print_message("    without '%s'\n", key);
        pt_value *bad = pt_value_copy(sd);
        assert_int_equal(pt_value_dict_del_str(pt_value_path_ref(bad, "state.0"), key), PT_OK);
        pt_optim *fresh = make(W, b);
        pt_value *before = pt_optim_state_dict(fresh);
        char want[96];
        snprintf(want, sizeof(want), "has no '%s'", key);
        assert_pt_status_error(pt_optim_load_state_dict(fresh, bad), PT_ERR_FORMAT, want);
        pt_value *after = pt_optim_state_dict(fresh);
        assert_int_equal(pt_value_len(pt_value_get_str_ref(after, "state")),
                         pt_value_len(pt_value_get_str_ref(before, "state")));
        assert_int_equal(pt_value_len(pt_value_path_ref(after, "state.0")),
                         pt_value_len(pt_value_path_ref(before, "state.0")));
        pt_clear_error();
        pt_value_free(before);
        pt_value_free(after);
        pt_value_free(bad);
        pt_optim_free(fresh);
    }
}

#endif
