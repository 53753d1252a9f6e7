/* docs/training.md's walk-through: a complete training program in C. An MLP learns
 * Fashion-MNIST with Adam for one epoch, is evaluated on the test set and saved as
 * mlp.safetensors (with the loss/accuracy chart mlp.svg). Usage: training [DATA_DIR] */
#include <prometorch/prometorch.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    pt_manual_seed(0); /* weights, shuffling and dropout all follow this seed */

    /* 1. Data: float images in [0, 1], normalized, batched by a DataLoader. */
    pt_image_dataset_opts img = {.to_float = true, .n_norm = 1, .mean = {0.2860}, .std = {0.3530}};
    pt_dataset *train_set = pt_mnist_dataset_dir(dir, true, &img);
    pt_dataset *test_set = pt_mnist_dataset_dir(dir, false, &img);
    if (!train_set || !test_set)
        return fprintf(stderr, "%s\n", pt_last_error()), 1;
    pt_dataloader *train = pt_dataloader_new(
        train_set, &(pt_dataloader_opts){.batch_size = 64, .shuffle = true, .num_workers = 1});
    pt_dataloader *test = pt_dataloader_new(test_set, &(pt_dataloader_opts){.batch_size = 1000});
    pt_dataset_free(train_set); /* the loaders keep their own references */
    pt_dataset_free(test_set);

    /* 2. Model and optimizer: nn.Sequential(Flatten, Linear, ReLU, Linear), Adam(lr=1e-3). */
    pt_module *layers[] = {pt_nn_flatten(1, -1), pt_nn_linear(784, 256, true), pt_nn_relu(),
                           pt_nn_linear(256, 10, true)};
    pt_module *model = pt_nn_sequential(4, layers); /* owns the layers */
    pt_optim *opt = pt_optim_adam(model, PT_ADAM_DEFAULTS);
    if (!model || !opt)
        return fprintf(stderr, "%s\n", pt_last_error()), 1;

    /* 3. Training: one scope per step frees the batch, activations, graph and loss. */
    pt_nn_train(model, true);
    pt_progress *bar = pt_progress_new("epoch 1/1", pt_dataloader_num_batches(train), 64);
    pt_tensor *batch[2]; /* images [64, 1, 28, 28], labels [64] */
    for (int64_t step = 1;; step++) {
        pt_scope_begin();
        int got = pt_dataloader_next(train, batch); /* 1 batch, 0 end of epoch, -1 error */
        double loss_value = 0;
        if (got == 1) {
            pt_tensor *loss = pt_cross_entropy(pt_nn_forward(model, batch[0]), batch[1]);
            pt_optim_zero_grad(opt);
            if (pt_backward(loss, NULL, false, false) != PT_OK || pt_optim_step(opt) != PT_OK)
                got = -1; /* NULL results propagate: one check at the end of the chain */
            else
                loss_value = pt_item(loss);
        }
        pt_scope_end();
        if (got != 1) {
            if (got < 0)
                return fprintf(stderr, "training: %s\n", pt_last_error()), 1;
            break;
        }
        pt_progress_update(bar, step, loss_value);
    }
    double train_loss = pt_progress_mean_loss(bar);
    pt_progress_finish(bar);

    /* 4. Evaluation: eval mode (dropout off, batch-norm running stats), no autograd. */
    pt_nn_eval(model);
    pt_no_grad_begin();
    int64_t correct = 0, total = 0;
    while (1) {
        pt_scope_begin();
        int got = pt_dataloader_next(test, batch);
        if (got == 1) {
            pt_tensor *pred = pt_argmax(pt_nn_forward(model, batch[0]), 1, false);
            correct += (int64_t)pt_item(pt_sum(pt_eq(pred, batch[1])));
            total += pt_numel(batch[1]);
        }
        pt_scope_end();
        if (got != 1)
            break;
    }
    pt_no_grad_end();
    double accuracy = (double)correct / (double)(total ? total : 1);
    printf("train loss %.4f, test accuracy %.4f\n", train_loss, accuracy);

    /* 5. Checkpoint: the state dict (PyTorch's keys "1.weight", ...) as safetensors, and a
     * chart of the curves (one point per epoch; here a single epoch). */
    pt_value *sd = pt_nn_state_dict(model);
    if (pt_save_safetensors("mlp.safetensors", sd, NULL) != PT_OK)
        fprintf(stderr, "saving: %s\n", pt_last_error());
    pt_value_free(sd);
    pt_plot_series curves[] = {{.name = "train loss", .n = 1, .y = &train_loss},
                               {.name = "test accuracy", .n = 1, .y = &accuracy, .panel = 1}};
    pt_plot_svg("mlp.svg", "MLP on Fashion-MNIST", "epoch", 2, curves);

    pt_optim_free(opt);
    pt_nn_free(model);
    pt_dataloader_free(train);
    pt_dataloader_free(test);
    return 0;
}
