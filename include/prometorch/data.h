/* PromeTorch data loading: readers for MNIST idx files (plain or .gz) and CIFAR-10 binary
 * batches, the dataset interface with TensorDataset / Subset / ConcatDataset / random_split,
 * samplers, transforms, and a DataLoader whose worker threads prefetch whole batches. */
#ifndef PROMETORCH_DATA_H
#define PROMETORCH_DATA_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- readers ------------------------------------------------------------------------------- */

/* Reads an idx file (MNIST format, plain or gzip-compressed: detected from the content).
 * Returns a new CPU tensor with the header's dims and dtype (0x08 uint8, 0x09 int8, 0x0B int16,
 * 0x0C int32, 0x0D float32, 0x0E float64). A missing/unreadable file gives PT_ERR_IO; a bad
 * magic, a corrupt or truncated gzip stream, or a size that does not match the header gives
 * PT_ERR_FORMAT; every message names the file. */
PT_API pt_tensor *pt_read_idx(const char *path);

/* Reads an MNIST image file and label file: *images uint8 [N, ...dims of the header],
 * *labels int64 [N]. The files must both be uint8 idx, labels 1-D, counts equal. On error
 * both outputs are NULL. Returns new references. */
PT_API pt_status pt_read_mnist(const char *images_path, const char *labels_path, pt_tensor **images,
                               pt_tensor **labels);

/* Reads n CIFAR-10 binary batch files (records of 1 label byte + 3072 CHW pixel bytes) and
 * concatenates them: *images uint8 [N, 3, 32, 32], *labels int64 [N]. A size that is not a
 * positive multiple of 3073 or a label above 9 gives PT_ERR_FORMAT naming the file. */
PT_API pt_status pt_read_cifar10(int n, const char *const *paths, pt_tensor **images,
                                 pt_tensor **labels);

/* ---- datasets ------------------------------------------------------------------------------ */

/* A dataset: `nfields` tensors per sample (e.g. image and label). `get` writes nfields new
 * references into fields (or returns an error status with pt_last_error set); it is called
 * from DataLoader worker threads concurrently, so it must be thread-safe (read-only state is).
 * `free_ctx` (may be NULL) runs when the last reference goes. */
typedef struct pt_dataset pt_dataset;
typedef int64_t (*pt_dataset_len_fn)(void *ctx);
typedef pt_status (*pt_dataset_get_fn)(void *ctx, int64_t index, pt_tensor **fields);

/* A user-defined dataset over ctx. Returns a new dataset reference (free with pt_dataset_free). */
PT_API pt_dataset *pt_dataset_new(int nfields, pt_dataset_len_fn len, pt_dataset_get_fn get,
                                  void (*free_ctx)(void *ctx), void *ctx);
PT_API int64_t pt_dataset_len(const pt_dataset *ds); /* -1 for NULL */
PT_API int pt_dataset_nfields(const pt_dataset *ds);
/* Sample `index` (negative counts from the end): nfields new references into fields. */
PT_API pt_status pt_dataset_get(const pt_dataset *ds, int64_t index, pt_tensor **fields);
PT_API pt_dataset *pt_dataset_retain(pt_dataset *ds); /* adds a reference; returns ds */
PT_API void pt_dataset_free(pt_dataset *ds);          /* drops a reference; NULL is a no-op */

/* torch.utils.data.TensorDataset: n tensors sharing their first dim; item i is the views
 * t[i] of each. Holds its own references to the tensors. */
PT_API pt_dataset *pt_tensor_dataset(int n, pt_tensor *const *tensors);
/* torch.utils.data.Subset: item i is base[indices[i]] (indices copied and checked). */
PT_API pt_dataset *pt_subset(pt_dataset *base, int64_t n, const int64_t *indices);
/* torch.utils.data.ConcatDataset: the datasets one after another (same nfields). */
PT_API pt_dataset *pt_concat_dataset(int n, pt_dataset *const *datasets);
/* torch.utils.data.random_split: splits ds into n Subsets with the given lengths (summing to
 * its length) by a random permutation. seed NULL draws the seed from the default generator
 * (pt_manual_seed); the permutation is Philox-based, not PyTorch's randperm. out[i] are new
 * references; on error none are returned. */
PT_API pt_status pt_random_split(pt_dataset *ds, int n, const int64_t *lengths,
                                 const uint64_t *seed, pt_dataset **out);

/* Image dataset options (zero value = raw uint8 images). */
typedef struct pt_image_dataset_opts {
    bool to_float;  /* float32 images scaled to [0, 1] */
    int n_norm;     /* 0, or number of channels (1 for MNIST, 3 for CIFAR): normalize */
    double mean[3]; /* (x - mean[c]) / std[c] after scaling (needs to_float) */
    double std[3];
} pt_image_dataset_opts;

/* MNIST / Fashion-MNIST: fields (image [1, H, W], label int64 scalar). opts may be NULL. */
PT_API pt_dataset *pt_mnist_dataset(const char *images_path, const char *labels_path,
                                    const pt_image_dataset_opts *opts);
/* MNIST / Fashion-MNIST from a directory holding the usual files: {train,t10k}-images-idx3-ubyte
 * and {train,t10k}-labels-idx1-ubyte, each plain or .gz (the spelling train-images.idx3-ubyte
 * is accepted too). train picks the training or the test split. A directory without them
 * gives PT_ERR_IO naming the directory and the names tried. */
PT_API pt_dataset *pt_mnist_dataset_dir(const char *dir, bool train,
                                        const pt_image_dataset_opts *opts);
/* CIFAR-10 from n batch files: fields (image [3, 32, 32], label int64 scalar). */
PT_API pt_dataset *pt_cifar10_dataset(int n, const char *const *paths,
                                      const pt_image_dataset_opts *opts);

/* ---- samplers and transforms ---------------------------------------------------------------- */

/* Writes the sample order of one epoch into out[0..n): 0..n-1 when !shuffle, else a
 * permutation determined by (seed, epoch) alone. */
PT_API pt_status pt_sampler_order(int64_t n, bool shuffle, uint64_t seed, uint64_t epoch,
                                  int64_t *out);

/* Per-sample transform: may replace fields[i] (release the old one). `seed` is determined by
 * the loader seed, epoch and sample position, so results do not depend on num_workers. */
typedef pt_status (*pt_transform_fn)(void *ctx, pt_tensor **fields, uint64_t seed);

/* transforms.Normalize on a [C, ...] float tensor: (x - mean[c]) / std[c]; new reference. */
PT_API pt_tensor *pt_transform_normalize(const pt_tensor *img, int c, const double *mean,
                                         const double *std);
/* transforms.RandomCrop(size = H, W of img, padding=pad) with zero padding, on a CPU [C, H, W]
 * tensor of any plain dtype; the offset is drawn from seed. New reference. */
PT_API pt_tensor *pt_transform_random_crop(const pt_tensor *img, int64_t pad, uint64_t seed);
/* transforms.RandomHorizontalFlip(p=0.5) on a [..., W] CPU tensor, decided by seed. New ref. */
PT_API pt_tensor *pt_transform_random_hflip(const pt_tensor *img, uint64_t seed);

/* ---- DataLoader ---------------------------------------------------------------------------- */

typedef struct pt_dataloader pt_dataloader;

/* Options; zero value = batch_size 1, no shuffle, keep last batch, no workers, seed drawn from
 * the default generator. */
typedef struct pt_dataloader_opts {
    int64_t batch_size; /* 0 means 1 */
    bool shuffle;
    bool drop_last;
    int num_workers; /* background threads; 0 loads in the calling thread */
    int prefetch;    /* batches buffered ahead (bounded queue); 0 means 2 * num_workers */
    bool has_seed;   /* use `seed`, else draw one from pt_manual_seed's generator */
    uint64_t seed;
    /* Built-in augmentation of field 0 ([C, H, W]): crop_padding > 0 = RandomCrop with that
     * padding, hflip = RandomHorizontalFlip. Applied before `transform`. */
    int64_t crop_padding;
    bool hflip;
    pt_transform_fn transform; /* optional; must be thread-safe */
    void *transform_ctx;
} pt_dataloader_opts;

/* A loader over ds (takes its own dataset reference). opts may be NULL. */
PT_API pt_dataloader *pt_dataloader_new(pt_dataset *ds, const pt_dataloader_opts *opts);
/* Next batch of the current epoch: fields[i] are new references (tracked by the current
 * scope) to [B, ...] tensors collated from the samples. Returns 1 with a batch, 0 at the end
 * of the epoch (the next call starts the next epoch), -1 on error (pt_last_error). */
PT_API int pt_dataloader_next(pt_dataloader *dl, pt_tensor **fields);
/* Abandons the rest of the current epoch and starts the next one. */
PT_API pt_status pt_dataloader_reset(pt_dataloader *dl);
PT_API int64_t pt_dataloader_num_batches(const pt_dataloader *dl);
/* The batch size it was made with (the last batch of an epoch may be smaller); -1 for NULL. */
PT_API int64_t pt_dataloader_batch_size(const pt_dataloader *dl);
/* Stops and joins the workers, drops prefetched batches and the dataset reference. */
PT_API void pt_dataloader_free(pt_dataloader *dl);

#ifdef __cplusplus
}
#endif

#endif
