/* Training benchmark, C half: trains the MLP, the CNN or the ResNet-20 of the examples on
 * Fashion-MNIST held
 * in memory, batches drawn by a random permutation (the same scheme as the PyTorch half in
 * train_vs_torch.py), and prints one JSON line with the training time and the test accuracy.
 *
 *   train_vs_torch --model mlp|cnn|resnet20 [--data DIR] [--batches N] [--batch-size 64] [--seed 0]
 *
 * --batches 0 (default) trains one full epoch. Threads come from PT_NUM_THREADS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <prometorch/prometorch.h>

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 784-512-256-128-10 with ReLU (examples/mnist_mlp.c). */
static pt_module *make_mlp(void)
{
    pt_module *layers[] = {pt_nn_flatten(1, -1), pt_nn_linear(784, 512, true),
                           pt_nn_relu(),         pt_nn_linear(512, 256, true),
                           pt_nn_relu(),         pt_nn_linear(256, 128, true),
                           pt_nn_relu(),         pt_nn_linear(128, 10, true)};
    return pt_nn_sequential(8, layers);
}

/* Two conv + batch-norm blocks (examples/mnist_cnn.c: conv without bias before BN). */
static pt_module *make_cnn(void)
{
    pt_module *layers[] = {pt_nn_conv2d(1, 32, 3, 1, 1, false),
                           pt_nn_batch_norm2d(32),
                           pt_nn_relu(),
                           pt_nn_max_pool2d(2, 2, 0),
                           pt_nn_conv2d(32, 64, 3, 1, 1, false),
                           pt_nn_batch_norm2d(64),
                           pt_nn_relu(),
                           pt_nn_max_pool2d(2, 2, 0),
                           pt_nn_flatten(1, -1),
                           pt_nn_linear(64 * 7 * 7, 128, true),
                           pt_nn_relu(),
                           pt_nn_dropout(0.25),
                           pt_nn_linear(128, 10, true)};
    return pt_nn_sequential(13, layers);
}

/* ResNet-20 as in examples/resnet.c: BasicBlock = relu(bn2(conv2(relu(bn1(conv1(x))))) +
 * shortcut(x)), the shortcut a 1x1 convolution + BN where the shape changes. Children: 0 conv1,
 * 1 bn1, 2 conv2, 3 bn2, 4 shortcut. */
static pt_tensor *basic_block_forward(pt_module *self, const pt_tensor *x)
{
    pt_tensor *h = pt_nn_forward(pt_nn_child_at(self, 0, NULL), x);
    h = pt_relu(pt_nn_forward(pt_nn_child_at(self, 1, NULL), h));
    h = pt_nn_forward(pt_nn_child_at(self, 3, NULL),
                      pt_nn_forward(pt_nn_child_at(self, 2, NULL), h));
    /* a NULL from a failed shortcut propagates through pt_add; temporaries go with the step's
     * scope */
    pt_tensor *sum = pt_nn_num_children(self) == 5
                         ? pt_add(h, pt_nn_forward(pt_nn_child_at(self, 4, NULL), x))
                         : pt_add(h, x);
    return pt_relu(sum);
}

static const pt_module_def basic_block_def = {.type_name = "BasicBlock",
                                              .forward = basic_block_forward};

static pt_module *basic_block(int64_t in, int64_t out, int stride)
{
    pt_module *b = pt_nn_module_new(&basic_block_def, NULL);
    pt_status st = b ? PT_OK : pt_last_status();
    if (st == PT_OK)
        st = pt_nn_add(b, "conv1", pt_nn_conv2d(in, out, 3, stride, 1, false));
    if (st == PT_OK)
        st = pt_nn_add(b, "bn1", pt_nn_batch_norm2d(out));
    if (st == PT_OK)
        st = pt_nn_add(b, "conv2", pt_nn_conv2d(out, out, 3, 1, 1, false));
    if (st == PT_OK)
        st = pt_nn_add(b, "bn2", pt_nn_batch_norm2d(out));
    if (st == PT_OK && (stride != 1 || in != out)) {
        pt_module *proj[] = {pt_nn_conv2d(in, out, 1, stride, 0, false), pt_nn_batch_norm2d(out)};
        st = pt_nn_add(b, "shortcut", pt_nn_sequential(2, proj));
    }
    if (st != PT_OK) {
        pt_nn_free(b);
        return NULL;
    }
    return b;
}

/* conv 3x3 16 + BN + ReLU, three stages of three blocks (16, 32, 64 channels, stride 1, 2, 2),
 * global average pooling, linear 64 -> 10. */
static pt_module *make_resnet20(void)
{
    pt_module *layers[10] = {pt_nn_conv2d(1, 16, 3, 1, 1, false), pt_nn_batch_norm2d(16),
                             pt_nn_relu()};
    int n = 3;
    const int64_t widths[3] = {16, 32, 64};
    for (int s = 0; s < 3; s++) {
        pt_module *blocks[3];
        for (int i = 0; i < 3; i++)
            blocks[i] = basic_block(i || !s ? widths[s] : widths[s - 1], widths[s],
                                    i == 0 && s > 0 ? 2 : 1);
        layers[n++] = pt_nn_sequential(3, blocks);
    }
    layers[n++] = pt_nn_adaptive_avg_pool2d(1);
    layers[n++] = pt_nn_flatten(1, -1);
    layers[n++] = pt_nn_linear(64, 10, true);
    return pt_nn_sequential(n, layers);
}

/* The whole split as one normalized float batch: images [N, 1, 28, 28], labels [N]. */
static pt_status load_split(const char *dir, bool train, pt_tensor **images, pt_tensor **labels)
{
    pt_image_dataset_opts io = {.to_float = true, .n_norm = 1, .mean = {0.2860}, .std = {0.3530}};
    pt_dataset *ds = pt_mnist_dataset_dir(dir, train, &io);
    if (!ds)
        return pt_last_status();
    pt_dataloader *dl =
        pt_dataloader_new(ds, &(pt_dataloader_opts){.batch_size = pt_dataset_len(ds)});
    pt_dataset_free(ds);
    pt_tensor *fields[2] = {NULL, NULL};
    int got = dl ? pt_dataloader_next(dl, fields) : -1;
    pt_dataloader_free(dl);
    *images = fields[0];
    *labels = fields[1];
    return got == 1 ? PT_OK : pt_last_status();
}

static double accuracy(pt_module *model, pt_tensor *images, pt_tensor *labels)
{
    pt_nn_eval(model);
    pt_no_grad_begin();
    int64_t n = pt_shape(images)[0], correct = 0;
    for (int64_t start = 0; start < n; start += 1000) {
        pt_scope_begin();
        int64_t len = n - start < 1000 ? n - start : 1000;
        pt_tensor *x = pt_narrow(images, 0, start, len);
        pt_tensor *pred = pt_argmax(pt_nn_forward(model, x), 1, false);
        correct += (int64_t)pt_item(pt_sum(pt_eq(pred, pt_narrow(labels, 0, start, len))));
        pt_scope_end();
    }
    pt_no_grad_end();
    pt_nn_train(model, true);
    return (double)correct / (double)n;
}

int main(int argc, char **argv)
{
    const char *model_name = "mlp", *dir = "/usr/share/datasets/fashion-mnist";
    int64_t max_batches = 0, batch = 64;
    uint64_t seed = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model"))
            model_name = argv[i + 1];
        else if (!strcmp(argv[i], "--data"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--batches"))
            max_batches = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch-size"))
            batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    pt_manual_seed(seed);
    pt_tensor *train_x, *train_y, *test_x, *test_y;
    if (load_split(dir, true, &train_x, &train_y) != PT_OK ||
        load_split(dir, false, &test_x, &test_y) != PT_OK) {
        fprintf(stderr, "train_vs_torch: %s\n", pt_last_error());
        return 1;
    }
    pt_module *model = !strcmp(model_name, "cnn")        ? make_cnn()
                       : !strcmp(model_name, "resnet20") ? make_resnet20()
                                                         : make_mlp();
    pt_optim *opt = model ? pt_optim_adam(model, PT_ADAM_DEFAULTS) : NULL;
    if (!opt) {
        fprintf(stderr, "train_vs_torch: %s\n", pt_last_error());
        return 1;
    }
    int64_t n = pt_shape(train_x)[0], n_batches = n / batch;
    if (max_batches > 0 && max_batches < n_batches)
        n_batches = max_batches;

    double t0 = now_seconds();
    pt_tensor *perm = pt_randperm(n, PT_INT64, pt_cpu());
    for (int64_t b = 0; b < n_batches; b++) {
        pt_scope_begin();
        pt_tensor *idx = pt_narrow(perm, 0, b * batch, batch);
        pt_tensor *x = pt_index_select(train_x, 0, idx);
        pt_tensor *y = pt_index_select(train_y, 0, idx);
        pt_tensor *loss = pt_cross_entropy(pt_nn_forward(model, x), y);
        pt_optim_zero_grad(opt);
        if (pt_backward(loss, NULL, false, false) != PT_OK || pt_optim_step(opt) != PT_OK) {
            fprintf(stderr, "train_vs_torch: %s\n", pt_last_error());
            return 1;
        }
        pt_scope_end();
    }
    double seconds = now_seconds() - t0;
    double acc = accuracy(model, test_x, test_y);
    printf(
        "{\"impl\": \"prometorch\", \"model\": \"%s\", \"batches\": %lld, \"train_seconds\": %.4f, "
        "\"test_accuracy\": %.4f}\n",
        model_name, (long long)n_batches, seconds, acc);
    pt_release(perm);
    pt_optim_free(opt);
    pt_nn_free(model);
    pt_release(train_x);
    pt_release(train_y);
    pt_release(test_x);
    pt_release(test_y);
    return 0;
}
