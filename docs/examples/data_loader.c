/* docs/data.md's example: an MNIST-format data set batched by a threaded DataLoader. Reads
 * the idx files named on the command line (plain or .gz), e.g. Debian's
 * dataset-fashion-mnist: /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz. */
#include <prometorch/prometorch.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s IMAGES.idx[.gz] LABELS.idx[.gz]\n", argv[0]);
        return 2;
    }
    pt_image_dataset_opts img = {.to_float = true, .n_norm = 1, .mean = {0.2860}, .std = {0.3530}};
    pt_dataset *ds = pt_mnist_dataset(argv[1], argv[2], &img);
    if (!ds) {
        fprintf(stderr, "%s\n", pt_last_error()); /* names the file and what is wrong */
        return 1;
    }
    pt_dataloader_opts o = {.batch_size = 64, .shuffle = true, .num_workers = 2};
    pt_dataloader *dl = pt_dataloader_new(ds, &o);
    pt_dataset_free(ds); /* the loader holds its own reference */
    int64_t batches = 0, samples = 0;
    pt_tensor *batch[2];
    int got;
    while ((got = pt_dataloader_next(dl, batch)) == 1) { /* 0 = end of epoch, -1 = error */
        pt_scope_begin();
        samples += pt_shape(batch[0])[0]; /* images [64, 1, 28, 28], labels [64] */
        batches++;
        pt_release(batch[0]);
        pt_release(batch[1]);
        pt_scope_end();
    }
    pt_dataloader_free(dl);
    if (got < 0) {
        fprintf(stderr, "%s\n", pt_last_error());
        return 1;
    }
    printf("%lld batches, %lld samples\n", (long long)batches, (long long)samples);
    return 0;
}
