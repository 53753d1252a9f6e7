/* The README's example: create tensors, run a few ops, print the results PyTorch-style,
 * and show how errors are reported. `make run` runs this. */
#include <prometorch/prometorch.h>
#include <stdio.h>

int main(void)
{
    pt_manual_seed(0);
    pt_scope_begin();
    pt_tensor *x = pt_randn(PT_SHAPE(2, 3), PT_FLOAT32, pt_cpu());
    pt_tensor *w = pt_arange(0, 6, 1, PT_FLOAT32, pt_cpu());
    pt_tensor *w2 = pt_reshape(w, PT_SHAPE(3, 2));
    pt_tensor *y = pt_relu(pt_matmul(x, w2)); /* [2, 3] @ [3, 2] -> [2, 2] */
    pt_tensor *p = pt_softmax(y, -1);
    printf("x = "), pt_print(x);
    printf("softmax(relu(x @ w)) = "), pt_print(p);
    printf("sum = %.4f\n", pt_item(pt_sum(p)));

    pt_tensor *bad = pt_matmul(x, x); /* [2, 3] @ [2, 3]: an error */
    if (!bad)
        printf("error: %s\n", pt_last_error());
    pt_scope_end(); /* frees every tensor above */
    return 0;
}
