/* Fuzz target for the zip reader (src/io/zip_read.c): the input is a whole archive, opened from
 * a borrowed buffer, every entry read with a 1 MB limit. Any input must give entries that agree
 * with the bytes they came from, or a clean PT_ERR_FORMAT "fuzz.zip: zip: ..." error: never a
 * crash, a sanitizer report, a leak or an allocation beyond the limit. Built as a libFuzzer
 * target with -DPT_FUZZ=ON (clang), and replayed with mutations by smoke_zip.c in every
 * build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/zip_read.h"

#define FUZZ_NAME "fuzz.zip"
#define READ_LIMIT (1u << 20)

/* Inputs the reader opened; the smoke test checks that its unmutated seeds all are. */
int fuzz_accepted;

/* A failure must carry a format error that names the file (out of memory aside). */
static void check_rejected(void)
{
    const char *msg = pt_last_error();
    pt_status st = pt_last_status();
    if (st == PT_ERR_OOM)
        return;
    if (st != PT_ERR_FORMAT || !msg || strncmp(msg, FUZZ_NAME ": zip: ", 15) != 0)
        abort();
}

static void check_entries(const pti_zip *z, size_t size)
{
    int64_t n = pti_zip_count(z);
    for (int64_t i = 0; i < n; i++) {
        const pti_zip_entry *e = pti_zip_entry_at(z, i);
        if (!e || e->data_offset > size || e->comp_size > size - e->data_offset ||
            pti_zip_find(z, e->name) != e)
            abort();
        size_t len = 1;
        uint8_t *data = pti_zip_read(z, e, READ_LIMIT, &len);
        if (data) {
            if (len != e->size || len > READ_LIMIT || data[len] != 0)
                abort();
            free(data);
        } else {
            if (len != 0)
                abort();
            check_rejected();
            pt_clear_error();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pti_file_map *m = pti_file_map_borrow(data, size, FUZZ_NAME);
    if (!m)
        return 0;
    pti_zip *z = pti_zip_open(m);
    pti_file_map_release(m);
    if (z) {
        fuzz_accepted++;
        check_entries(z, size);
        pti_zip_close(z);
    } else {
        check_rejected();
    }
    pt_clear_error();
    return 0;
}
