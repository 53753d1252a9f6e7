/* Fuzz target for the data-file parsers (idx plain/gzip, MNIST pairs, CIFAR-10 batches): the
 * first byte picks the reader, the rest is the file's content. Any input must give a tensor
 * or a clean error: never a crash, a sanitizer report, a leak or a huge allocation. Built as
 * a libFuzzer target with -DPT_FUZZ=ON (clang), and as the replay/mutation smoke test
 * (smoke_main.c) in every build. */
#include <prometorch/prometorch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char input_path[256], labels_path[256];

static bool write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

static void make_paths(void)
{
    if (input_path[0])
        return;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(input_path, sizeof input_path, "%s/pt_fuzz_%d.bin", dir, (int)getpid());
    snprintf(labels_path, sizeof labels_path, "%s/pt_fuzz_%d.labels", dir, (int)getpid());
}

/* Inputs the readers accepted; the smoke test checks that its unmutated seeds all are. */
int fuzz_readers_accepted;

/* A result must agree with the bytes it came from; a failure must carry an error that names
 * the file. Either broken is a finding: abort, so the fuzzer reports it. */
static void check_accepted(int reader, const uint8_t *file, size_t size, const pt_tensor *a,
                           const pt_tensor *b)
{
    if (reader == 1) { /* CIFAR-10: [N, 3, 32, 32] uint8 from N records of 3073 bytes */
        const int64_t *s = pt_shape(a);
        if (pt_ndim(a) != 4 || s[1] != 3 || s[2] != 32 || s[3] != 32 ||
            (size_t)s[0] * 3073 != size || pt_numel(b) != s[0])
            abort();
        for (int64_t i = 0; i < s[0]; i++)
            if (file[(size_t)i * 3073] > 9)
                abort();
    } else if (reader == 0 && !(size >= 2 && file[0] == 0x1f && file[1] == 0x8b)) {
        /* plain idx: header (4 + 4 * ndim bytes) then exactly numel elements */
        size_t elem = pt_dtype_size(pt_dtype_of(a));
        if (4 + 4 * (size_t)pt_ndim(a) + (size_t)pt_numel(a) * elem != size)
            abort();
    } else if (reader == 2 && (pt_ndim(a) < 1 || pt_shape(a)[0] != 3 || pt_numel(b) != 3)) {
        abort(); /* the labels file holds 3 labels */
    }
}

static void check_rejected(void)
{
    const char *msg = pt_last_error();
    if (pt_last_status() == PT_OK || !msg ||
        (!strstr(msg, input_path) && !strstr(msg, labels_path)))
        abort();
}

/* 8 valid label bytes for the MNIST case: idx uint8, 1-D, n = 3 */
static const uint8_t mnist_labels[] = {0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 3};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    make_paths();
    if (!write_file(input_path, data + 1, size - 1))
        return 0;
    pt_tensor *a = NULL, *b = NULL;
    switch (data[0] % 3) {
    case 0: a = pt_read_idx(input_path); break;
    case 1: {
        const char *paths[1] = {input_path};
        pt_read_cifar10(1, paths, &a, &b);
        break;
    }
    default:
        if (write_file(labels_path, mnist_labels, sizeof mnist_labels))
            pt_read_mnist(input_path, labels_path, &a, &b);
        break;
    }
    if (a) {
        check_accepted(data[0] % 3, data + 1, size - 1, a, b);
        fuzz_readers_accepted++;
    } else {
        check_rejected();
    }
    pt_release(a);
    pt_release(b);
    pt_clear_error();
    unlink(input_path);
    unlink(labels_path);
    return 0;
}
