/* docs/checkpoints.md's example: a network trained in PyTorch, loaded into the same network built
 * in C, run, and saved back for torch.load. Build: cc checkpoint.c $(pkg-config --cflags --libs
 * prometorch). Run: ./checkpoint mlp.pt mlp_from_c.pt */
#include <prometorch/prometorch.h>
#include <stdio.h>

/* nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)) */
static pt_module *make_net(void)
{
    pt_module *layers[] = {pt_nn_linear(6, 16, true), pt_nn_tanh(), pt_nn_linear(16, 3, true)};
    return pt_nn_sequential(3, layers);
}

static int fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, pt_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s FROM_TORCH.pt OUT.pt\n", argv[0]);
        return 2;
    }
    pt_module *net = make_net();
    /* strict: every key of the file must match a parameter or buffer, and the other way round */
    if (pt_nn_load(net, argv[1], true) != PT_OK)
        return fail("load");
    pt_nn_train(net, false);

    pt_tensor *x = pt_ones(PT_SHAPE(1, 6), PT_FLOAT32, pt_cpu());
    pt_tensor *y = pt_nn_forward(net, x);
    if (!y)
        return fail("forward");
    pt_print(y);

    /* back to PyTorch: torch.load(OUT.pt, weights_only=True) gives the same state_dict */
    if (pt_nn_save(net, argv[2]) != PT_OK)
        return fail("save");

    /* the saved file loads into a fresh network with identical results */
    pt_module *again = make_net();
    if (pt_nn_load(again, argv[2], true) != PT_OK)
        return fail("reload");
    pt_nn_train(again, false);
    pt_tensor *y2 = pt_nn_forward(again, x);
    float a[3], b[3];
    pt_copy_to_host(y, a, sizeof a);
    pt_copy_to_host(y2, b, sizeof b);
    int same = a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
    printf("%s\n", same ? "reloaded copy agrees" : "reloaded copy DIFFERS");

    pt_release(x);
    pt_release(y);
    pt_release(y2);
    pt_nn_free(net);
    pt_nn_free(again);
    return same ? 0 : 1;
}
