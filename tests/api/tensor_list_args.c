/* Compiled (not run) by the test api_tensor_list_args with -Werror: every op that reads an
 * array of tensors accepts pt_tensor ** and pt_tensor *arr[] as well as their const forms,
 * without a cast. Under gcc 14 a plain const pt_tensor *const * parameter makes the first
 * calls errors, so this file stops compiling if a signature regresses. */
#include <prometorch/prometorch.h>

void calls(pt_tensor *a, pt_tensor *b, pt_module *m);

void calls(pt_tensor *a, pt_tensor *b, pt_module *m)
{
    pt_tensor *ts[2] = {a, b};
    pt_tensor **heap = ts;
    pt_tensor *const *fixed = ts;
    const pt_tensor *cts[2] = {a, b};
    const pt_tensor *const *cfixed = cts;
    pt_release(pt_cat(2, ts, 0));
    pt_release(pt_cat(2, heap, 0));
    pt_release(pt_cat(2, fixed, 0));
    pt_release(pt_cat(2, cts, 0));
    pt_release(pt_cat(2, cfixed, 0));
    pt_release(pt_cat(2, (pt_tensor *[]){a, b}, 0));
    pt_release(pt_stack(2, ts, 0));
    pt_release(pt_stack(2, cts, 0));
    pt_release(pt_index(a, 1, ts));
    pt_release(pt_index(a, 1, cts));
    pt_release(pt_index_put(a, 1, ts, b, false));
    pt_release(pt_index_put(a, 1, cfixed, b, true));
    pt_index_put_(a, 1, heap, b, false);
    pt_index_put_(a, 1, cts, b, false);
    pt_tensor *out[1];
    pt_nn_forward_n(m, 2, ts, 1, out);
    pt_nn_forward_n(m, 2, cts, 1, out);
    pt_nn_forward_n(m, 0, NULL, 1, out);
    pt_release(out[0]);
}
