/* resnet: trains ResNet-20 (He et al. 2016, "Deep Residual Learning", section 4.2: the CIFAR
 * network of 3 stages x 3 basic blocks with 16, 32 and 64 channels, global average pooling
 * and a 10-way linear layer; 0.27M parameters) with SGD (momentum 0.9, weight decay 5e-4) and a
 * cosine learning-rate schedule (CosineAnnealingLR over the epochs), evaluating on the test set
 * after every epoch.
 *
 *     build/bin/resnet --data ~/cifar-10-batches-bin --epochs 30 --save resnet20.safetensors
 *     build/bin/resnet --epochs 1                       (Fashion-MNIST, 1 x 28 x 28)
 *
 * Data: CIFAR-10 binary batches when --data holds data_batch_1.bin .. data_batch_5.bin and
 * test_batch.bin (with random crop (padding 4) and horizontal flip while training), else
 * Fashion-MNIST / MNIST from the same directory layout as mnist_mlp.
 * Shortcuts: option B of the paper (a 1x1 convolution + BatchNorm where the shape changes,
 * identity elsewhere). The blocks are user-defined modules (pt_module_def with a forward
 * callback), the way any custom layer is written. The last line printed is
 * `final: test_accuracy=A train_seconds=S epochs=N` (A to 4 decimals). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <prometorch/prometorch.h>

typedef struct options {
    const char *data; /* CIFAR-10 binary batches, or the four MNIST idx files */
    const char *norm; /* MNIST only: "fashion" or "mnist" mean/std */
    int epochs;
    int64_t batch_size;
    double lr;
    double weight_decay;
    const char *device; /* "cpu", "cuda", "cuda:1", ... */
    int threads;        /* 0: the library's default (all cores) */
    const char *save;   /* NULL: save nothing */
    uint64_t seed;
    int64_t limit; /* > 0: only this many training and test batches (quick checks) */
    int workers;   /* DataLoader threads */
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: resnet [options]\n"
            "  --data DIR        CIFAR-10 binary batches (data_batch_*.bin) or an MNIST-format\n"
            "                    directory (default /usr/share/datasets/fashion-mnist)\n"
            "  --norm NAME       MNIST data: fashion (mean 0.2860, std 0.3530) or mnist (0.1307,\n"
            "                    0.3081); default: fashion when DIR's name contains \"fashion\"\n"
            "  --epochs N        epochs (default 1)\n"
            "  --batch-size N    training batch size (default 128)\n"
            "  --lr X            initial SGD learning rate, cosine-annealed to 0 (default 0.1)\n"
            "  --wd X            weight decay (default 5e-4)\n"
            "  --device D        cpu, cuda, cuda:N ... (default cpu)\n"
            "  --threads N       CPU threads (default: all cores)\n"
            "  --workers N       data-loading threads (default 1)\n"
            "  --save FILE       write the weights to FILE (a PyTorch state dict when FILE\n"
            "                    ends in .pt, else safetensors) and the curves to FILE\n"
            "                    without its .pt / .safetensors extension + .svg\n"
            "  --seed N          random seed (default 0): same seed, same results\n"
            "  --limit N         use only N batches per epoch for training and for testing\n"
            "                    (quick checks)\n"
            "  --help            this text\n");
}

/* Returns 0 to run, 1 to exit successfully (--help), -1 on a bad option. */
static int parse_options(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"data", required_argument, NULL, 'd'},    {"norm", required_argument, NULL, 'n'},
        {"epochs", required_argument, NULL, 'e'},  {"batch-size", required_argument, NULL, 'b'},
        {"lr", required_argument, NULL, 'l'},      {"device", required_argument, NULL, 'D'},
        {"threads", required_argument, NULL, 't'}, {"workers", required_argument, NULL, 'w'},
        {"save", required_argument, NULL, 's'},    {"seed", required_argument, NULL, 'S'},
        {"limit", required_argument, NULL, 'L'},   {"wd", required_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    *o = (options){.data = "/usr/share/datasets/fashion-mnist",
                   .epochs = 1,
                   .batch_size = 128,
                   .lr = 0.1,
                   .weight_decay = 5e-4,
                   .device = "cpu",
                   .workers = 1};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'd': o->data = optarg; break;
        case 'n': o->norm = optarg; break;
        case 'e': o->epochs = atoi(optarg); break;
        case 'b': o->batch_size = atoll(optarg); break;
        case 'l': o->lr = atof(optarg); break;
        case 'D': o->device = optarg; break;
        case 't': o->threads = atoi(optarg); break;
        case 'w': o->workers = atoi(optarg); break;
        case 's': o->save = optarg; break;
        case 'S': o->seed = strtoull(optarg, NULL, 10); break;
        case 'L': o->limit = atoll(optarg); break;
        case 'W': o->weight_decay = atof(optarg); break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc || o->epochs < 1 || o->batch_size < 1 || !(o->lr > 0) || o->workers < 0 ||
        !(o->weight_decay >= 0)) {
        fprintf(stderr, "resnet: bad arguments (epochs, batch size and lr must be positive)\n");
        usage(stderr);
        return -1;
    }
    if (!o->norm)
        o->norm = strstr(o->data, "fashion") || strstr(o->data, "Fashion") ? "fashion" : "mnist";
    if (strcmp(o->norm, "fashion") != 0 && strcmp(o->norm, "mnist") != 0) {
        fprintf(stderr, "resnet: --norm must be fashion or mnist, not '%s'\n", o->norm);
        return -1;
    }
    return 0;
}

/* Prints what failed with the library's message; returns the process exit code. */
static int fail(const char *what)
{
    fprintf(stderr, "resnet: %s: %s\n", what, pt_last_error());
    return 1;
}

/* Runs child i of m on x and releases x: one link of a forward chain (NULL x propagates). */
static pt_tensor *child_forward(pt_module *m, int i, pt_tensor *x)
{
    pt_tensor *y = pt_nn_forward(pt_nn_child_at(m, i, NULL), x);
    pt_release(x);
    return y;
}

/* relu(x), releasing x. */
static pt_tensor *relu_owned(pt_tensor *x)
{
    pt_tensor *y = pt_relu(x);
    pt_release(x);
    return y;
}

/* BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)). Children by registration
 * index: 0 conv1, 1 bn1, 2 conv2, 3 bn2, and 4 shortcut when the block changes the shape. */
static pt_tensor *basic_block_forward(pt_module *self, const pt_tensor *x)
{
    pt_tensor *h = pt_nn_forward(pt_nn_child_at(self, 0, NULL), x);
    h = relu_owned(child_forward(self, 1, h));
    h = child_forward(self, 3, child_forward(self, 2, h));
    bool projection = pt_nn_num_children(self) == 5;
    pt_tensor *shortcut = projection ? pt_nn_forward(pt_nn_child_at(self, 4, NULL), x) : NULL;
    pt_tensor *sum = projection && !shortcut ? NULL : pt_add(h, projection ? shortcut : x);
    pt_release(h);
    pt_release(shortcut);
    return relu_owned(sum);
}

static const pt_module_def basic_block_def = {.type_name = "BasicBlock",
                                              .forward = basic_block_forward};

/* A BasicBlock from `in` to `out` channels; stride 2 halves the resolution. Children are
 * registered in the order of the usual PyTorch CIFAR ResNet, so the state-dict keys match it
 * ("layer2.0.conv1.weight", "layer2.0.shortcut.0.weight", ...). */
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

/* One stage: n blocks, the first one changing channels/stride. */
static pt_module *stage(int64_t in, int64_t out, int stride, int n)
{
    pt_module *seq = pt_nn_sequential(0, NULL);
    for (int i = 0; seq && i < n; i++) {
        if (pt_nn_sequential_append(seq, basic_block(i ? out : in, out, i ? 1 : stride))) {
            pt_nn_free(seq);
            return NULL;
        }
    }
    return seq;
}

/* ResNet forward: conv1 -> bn1 -> relu -> layer1..3 -> global average pool -> flatten ->
 * linear. Children: 0 conv1, 1 bn1, 2 layer1, 3 layer2, 4 layer3, 5 avgpool, 6 linear. */
static pt_tensor *resnet_forward(pt_module *self, const pt_tensor *x)
{
    pt_tensor *h = pt_nn_forward(pt_nn_child_at(self, 0, NULL), x); /* [B, 16, H, W] */
    h = relu_owned(child_forward(self, 1, h));
    for (int i = 2; i <= 5;
         i++) /* [B, 16, H, W] -> [B, 32, H/2] -> [B, 64, H/4] -> [B, 64, 1, 1] */
        h = child_forward(self, i, h);
    pt_tensor *flat = pt_flatten(h, 1, -1); /* [B, 64] */
    pt_release(h);
    return child_forward(self, 6, flat); /* [B, 10] */
}

static const pt_module_def resnet_def = {.type_name = "ResNet", .forward = resnet_forward};

/* ResNet-20 for `in_channels`-channel images (6n+2 layers with n = 3). */
static pt_module *build_model(int64_t in_channels)
{
    pt_module *m = pt_nn_module_new(&resnet_def, NULL);
    pt_status st = m ? PT_OK : pt_last_status();
    if (st == PT_OK)
        st = pt_nn_add(m, "conv1", pt_nn_conv2d(in_channels, 16, 3, 1, 1, false));
    if (st == PT_OK)
        st = pt_nn_add(m, "bn1", pt_nn_batch_norm2d(16));
    if (st == PT_OK)
        st = pt_nn_add(m, "layer1", stage(16, 16, 1, 3));
    if (st == PT_OK)
        st = pt_nn_add(m, "layer2", stage(16, 32, 2, 3));
    if (st == PT_OK)
        st = pt_nn_add(m, "layer3", stage(32, 64, 2, 3));
    if (st == PT_OK)
        st = pt_nn_add(m, "avgpool", pt_nn_adaptive_avg_pool2d(1));
    if (st == PT_OK)
        st = pt_nn_add(m, "linear", pt_nn_linear(64, 10, true));
    if (st != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

/* True when s ends in ext (and has more before it). */
static bool has_ext(const char *s, const char *ext)
{
    size_t n = strlen(s), e = strlen(ext);
    return n > e && strcmp(s + n - e, ext) == 0;
}

/* Writes the weights to o->save (.pt: pt_save of the state dict, else safetensors) and the
 * curves next to it ("resnet20.safetensors" -> "resnet20.svg"). */
static pt_status save_results(pt_module *model, const options *o, int epochs,
                              const double *train_loss, const double *test_loss,
                              const double *test_acc)
{
    pt_value *sd = pt_nn_state_dict(model);
    pt_status st = !sd                       ? pt_last_status()
                   : has_ext(o->save, ".pt") ? pt_save(o->save, sd)
                                             : pt_save_safetensors(o->save, sd, NULL);
    pt_value_free(sd);
    if (st != PT_OK)
        return st;
    char svg[4096];
    size_t n = strlen(o->save);
    if (has_ext(o->save, ".safetensors"))
        n -= strlen(".safetensors");
    else if (has_ext(o->save, ".pt"))
        n -= strlen(".pt");
    snprintf(svg, sizeof(svg), "%.*s.svg", (int)n, o->save);
    pt_plot_series curves[] = {
        {.name = "train loss", .n = epochs, .y = train_loss},
        {.name = "test loss", .n = epochs, .y = test_loss},
        {.name = "test accuracy", .n = epochs, .y = test_acc, .panel = 1},
    };
    st = pt_plot_svg(svg, "ResNet-20", "epoch", 3, curves);
    if (st == PT_OK)
        printf("saved %s and %s\n", o->save, svg);
    return st;
}

/* CIFAR-10 when dir holds data_batch_1.bin .. data_batch_5.bin and test_batch.bin: opens both
 * splits (normalized with CIFAR-10's per-channel mean and std) and returns true. */
static bool open_cifar(const char *dir, pt_dataset **train, pt_dataset **test)
{
    char paths[6][4096];
    const char *train_paths[5];
    for (int i = 0; i < 5; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/data_batch_%d.bin", dir, i + 1);
        train_paths[i] = paths[i];
    }
    snprintf(paths[5], sizeof(paths[5]), "%s/test_batch.bin", dir);
    for (int i = 0; i < 6; i++)
        if (access(paths[i], R_OK) != 0)
            return false;
    pt_image_dataset_opts img = {.to_float = true,
                                 .n_norm = 3,
                                 .mean = {0.4914, 0.4822, 0.4465},
                                 .std = {0.2470, 0.2435, 0.2616}};
    const char *test_path = paths[5];
    *train = pt_cifar10_dataset(5, train_paths, &img);
    *test = pt_cifar10_dataset(1, &test_path, &img);
    return true;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* epoch lines show up at once in a log file too */
    options o;
    int r = parse_options(argc, argv, &o);
    if (r != 0)
        return r > 0 ? 0 : 2;
    pt_manual_seed(o.seed);
    if (o.threads > 0)
        pt_set_num_threads(o.threads);
    pt_clear_error();
    pt_device dev = pt_device_parse(o.device);
    if (pt_last_status() != PT_OK || !pt_device_available(dev))
        return fprintf(stderr, "resnet: device '%s' is not available\n", o.device), 1;

    /* Data: pixels scaled to [0, 1], then (x - mean[c]) / std[c] per channel. */
    pt_dataset *train_set = NULL, *test_set = NULL;
    bool cifar = open_cifar(o.data, &train_set, &test_set);
    if (!cifar) {
        bool fashion = strcmp(o.norm, "fashion") == 0;
        pt_image_dataset_opts img = {.to_float = true,
                                     .n_norm = 1,
                                     .mean = {fashion ? 0.2860 : 0.1307},
                                     .std = {fashion ? 0.3530 : 0.3081}};
        train_set = pt_mnist_dataset_dir(o.data, true, &img);
        test_set = pt_mnist_dataset_dir(o.data, false, &img);
    }
    if (!train_set || !test_set)
        return fail("loading the data set (try --data DIR)");
    pt_dataloader_opts train_opts = {.batch_size = o.batch_size,
                                     .shuffle = true,
                                     .num_workers = o.workers,
                                     .has_seed = true,
                                     .seed = o.seed,
                                     .crop_padding = cifar ? 4 : 0,
                                     .hflip = cifar};
    pt_dataloader_opts test_opts = {.batch_size = 1000, .num_workers = o.workers};
    int64_t n_train = pt_dataset_len(train_set);
    pt_dataloader *train = pt_dataloader_new(train_set, &train_opts);
    pt_dataloader *test = pt_dataloader_new(test_set, &test_opts);
    pt_dataset_free(train_set); /* the loaders hold their own references */
    pt_dataset_free(test_set);
    if (!train || !test)
        return fail("creating the data loaders");

    /* Model and optimizer. */
    pt_module *model = build_model(cifar ? 3 : 1);
    if (!model || pt_nn_to(model, dev) != PT_OK)
        return fail("building the model");
    pt_nn_print(model);
    printf("%lld parameters, %lld training samples (%s), device %s\n",
           (long long)pt_nn_num_parameters(model), (long long)n_train, cifar ? "CIFAR-10" : o.norm,
           o.device);
    pt_sgd_opts sgd = {.lr = o.lr, .momentum = 0.9, .weight_decay = o.weight_decay};
    pt_optim *opt = pt_optim_sgd(model, sgd);
    /* lr follows 0.5 * lr0 * (1 + cos(pi * epoch / epochs)) down to 0 at the end */
    pt_lr_scheduler *sched = opt ? pt_lr_cosine_annealing_lr(opt, o.epochs, 0.0) : NULL;
    if (!opt || !sched)
        return fail("creating the optimizer");

    /* Train, evaluating after every epoch. */
    double *train_loss = calloc((size_t)o.epochs, sizeof(double));
    double *test_loss = calloc((size_t)o.epochs, sizeof(double));
    double *test_acc = calloc((size_t)o.epochs, sizeof(double));
    double train_seconds = 0, acc = 0;
    int status = 0;
    for (int epoch = 1; epoch <= o.epochs && status == 0; epoch++) {
        char label[32];
        snprintf(label, sizeof(label), "epoch %d/%d", epoch, o.epochs);
        pt_loop_opts loop = {.device = dev, .max_batches = o.limit, .label = label};
        pt_loop_result train_r = {0}, test_r = {0};
        if (pt_train_epoch(model, opt, train, &loop, &train_r) != PT_OK)
            status = fail("training");
        else if (pt_evaluate(model, test, &loop, &test_r) != PT_OK)
            status = fail("evaluating");
        else
            printf("epoch %d: lr %.4g, train loss %.4f, test loss %.4f, test accuracy %.4f "
                   "(%.1f s)\n",
                   epoch, pt_optim_get_lr(opt, 0), train_r.mean_loss, test_r.mean_loss,
                   test_r.accuracy, train_r.seconds);
        if (status == 0 && pt_lr_scheduler_step(sched) != PT_OK) /* scheduler.step() */
            status = fail("stepping the learning-rate schedule");
        train_seconds += train_r.seconds;
        train_loss[epoch - 1] = train_r.mean_loss;
        test_loss[epoch - 1] = test_r.mean_loss;
        test_acc[epoch - 1] = acc = test_r.accuracy;
    }
    if (status == 0 && o.save &&
        save_results(model, &o, o.epochs, train_loss, test_loss, test_acc) != PT_OK)
        status = fail("saving");
    if (status == 0)
        printf("final: test_accuracy=%.4f train_seconds=%.1f epochs=%d\n", acc, train_seconds,
               o.epochs);

    free(train_loss);
    free(test_loss);
    free(test_acc);
    pt_lr_scheduler_free(sched);
    pt_optim_free(opt);
    pt_nn_free(model);
    pt_dataloader_free(train);
    pt_dataloader_free(test);
    return status;
}
