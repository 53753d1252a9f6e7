/* Whole files mapped copy-on-write for the checkpoint and model readers (see file_map.h). */
#include "file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct pti_file_map {
    atomic_long refcount;
    const uint8_t *data;
    size_t size;
    bool owned; /* mmap'd by us (munmap on the last release) */
    char name[];
};

static pti_file_map *map_struct_new(const char *name)
{
    if (!name)
        name = "<buffer>";
    size_t len = strlen(name);
    pti_file_map *m = pti_malloc(sizeof *m + len + 1);
    if (!m)
        return pti_error_null(PT_ERR_OOM, "out of memory opening %s", name);
    atomic_init(&m->refcount, 1);
    m->data = NULL;
    m->size = 0;
    m->owned = false;
    memcpy(m->name, name, len + 1);
    return m;
}

pti_file_map *pti_file_map_open(const char *path)
{
    if (!path)
        return pti_error_null(PT_ERR_INVALID_ARG, "file map: NULL path");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pti_error_null(PT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return pti_error_null(PT_ERR_IO, "cannot read %s: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return pti_error_null(PT_ERR_IO, "cannot read %s: %s", path,
                              S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
    }
    pti_file_map *m = map_struct_new(path);
    if (!m) {
        close(fd);
        return NULL;
    }
    m->owned = true;
    m->size = (size_t)st.st_size;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            close(fd);
            free(m);
            return pti_error_null(PT_ERR_IO, "cannot map %s: %s", path, strerror(err));
        }
        m->data = p;
    }
    close(fd);
    return m;
}

pti_file_map *pti_file_map_borrow(const void *data, size_t size, const char *name)
{
    if (!data && size)
        return pti_error_null(PT_ERR_INVALID_ARG, "file map: NULL buffer of %zu bytes", size);
    pti_file_map *m = map_struct_new(name);
    if (!m)
        return NULL;
    m->data = data;
    m->size = size;
    return m;
}

const uint8_t *pti_file_map_data(const pti_file_map *m)
{
    return m->data;
}
size_t pti_file_map_size(const pti_file_map *m)
{
    return m->size;
}
const char *pti_file_map_name(const pti_file_map *m)
{
    return m->name;
}
bool pti_file_map_is_owned(const pti_file_map *m)
{
    return m->owned;
}

pti_file_map *pti_file_map_retain(pti_file_map *m)
{
    atomic_fetch_add_explicit(&m->refcount, 1, memory_order_relaxed);
    return m;
}

void pti_file_map_release(pti_file_map *m)
{
    if (!m || atomic_fetch_sub_explicit(&m->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (m->owned && m->size)
        munmap((void *)m->data, m->size);
    free(m);
}

static void release_map_of_storage(void *ctx, void *data)
{
    (void)data;
    pti_file_map_release(ctx);
}

pt_storage *pti_file_map_storage(pti_file_map *m, uint64_t offset, uint64_t nbytes, size_t align,
                                 bool force_copy)
{
    pt_device cpu = {PT_DEVICE_CPU, 0};
    void *src = (void *)(m->data + offset);
    bool aligned = align == 0 || ((uintptr_t)src % align) == 0;
    if (m->owned && aligned && !force_copy && nbytes > 0) {
        pt_storage *s = pti_storage_wrap(cpu, src, (size_t)nbytes, release_map_of_storage, m);
        if (s)
            pti_file_map_retain(m);
        return s;
    }
    pt_storage *s = pti_storage_new(cpu, (size_t)nbytes);
    if (s && nbytes)
        memcpy(s->data, src, (size_t)nbytes);
    return s;
}
