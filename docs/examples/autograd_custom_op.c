/* A custom differentiable op, y = x^3, written as a pt_function: forward, backward with a
 * saved tensor, pt_backward to get dy/dx, one gradient-descent step under no_grad, and
 * pt_gradcheck against finite differences. docs/autograd.md shows this file; the test suite
 * (tests/test_autograd.c) compiles and runs it.
 * Build alone: cc prog.c $(pkg-config --cflags --libs prometorch) -lm */
#include <math.h>
#include <stdio.h>

#include <prometorch/prometorch.h>

/* forward: runs with grad mode off; saves x for backward */
static pt_status cube_forward(pt_autograd_ctx *ctx, int n_in, pt_tensor *const *in, pt_tensor **out)
{
    (void)n_in;
    out[0] = pt_pow_scalar(in[0], 3.0);
    if (!out[0])
        return pt_last_status();
    return pt_ctx_save_for_backward(ctx, 1, in);
}

/* backward: dy/dx = 3 x^2, times the incoming gradient */
static pt_status cube_backward(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *grad_out,
                               int n_in, pt_tensor **grad_in)
{
    (void)n_out;
    (void)n_in;
    if (!pt_ctx_needs_input_grad(ctx, 0))
        return PT_OK;
    pt_tensor *x = pt_ctx_saved(ctx, 0); /* a new reference (NULL if modified in place) */
    if (!x)
        return pt_last_status();
    pt_tensor *x2 = pt_mul(x, x);
    pt_tensor *d = pt_mul_scalar(x2, 3.0);
    grad_in[0] = pt_mul(grad_out[0], d);
    pt_release(x);
    pt_release(x2);
    pt_release(d);
    return grad_in[0] ? PT_OK : pt_last_status();
}

static const pt_function CUBE = {
    .name = "cube", .n_outputs = 1, .forward = cube_forward, .backward = cube_backward};

static pt_tensor *cube(pt_tensor *x)
{
    pt_tensor *y = NULL;
    return pt_function_apply(&CUBE, NULL, 1, &x, &y) == PT_OK ? y : NULL;
}

/* the function pt_gradcheck differentiates */
static pt_tensor *cube_fn(int n, pt_tensor *const *inputs, void *user)
{
    (void)n;
    (void)user;
    return cube(inputs[0]);
}

int main(void)
{
    const double values[3] = {0.5, -1.0, 2.0};
    pt_scope_begin();
    pt_tensor *x = pt_from_data(values, PT_SHAPE(3), PT_FLOAT64, pt_cpu());
    pt_requires_grad_(x, true);

    /* forward records a node; backward with an all-ones gradient (y is not a scalar) fills
     * x's .grad with d sum(y) / dx = 3 x^2 */
    pt_tensor *y = cube(x);
    printf("y was produced by '%s'\n", pt_grad_fn_name(y));
    pt_tensor *ones = pt_ones_like(y);
    if (pt_backward(y, ones, false, false) != PT_OK) {
        fprintf(stderr, "backward failed: %s\n", pt_last_error());
        return 1;
    }
    pt_tensor *g = pt_grad(x);
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        double expected = 3 * values[i] * values[i];
        pt_tensor *gi = pt_select(g, 0, i);
        printf("dloss/dx[%d] = %g (expected %g)\n", i, pt_item(gi), expected);
        bad += fabs(pt_item(gi) - expected) > 1e-12;
    }

    /* one step of gradient descent, under no_grad so it is not recorded */
    pt_no_grad_begin();
    pt_tensor *step = pt_mul_scalar(g, 0.1);
    pt_tensor *moved = pt_sub(x, step);
    pt_copy_(x, moved);
    pt_no_grad_end();
    pt_set_grad(x, NULL); /* zero_grad */

    /* compare our backward with finite differences */
    if (!pt_gradcheck(cube_fn, NULL, 1, &x, NULL)) {
        fprintf(stderr, "gradcheck: %s\n", pt_last_error());
        bad++;
    }
    pt_scope_end(); /* frees every tensor above, and with them the graph */
    printf(bad ? "FAILED\n" : "ok\n");
    return bad != 0;
}
