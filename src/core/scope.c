/* Scopes: a thread-local list of the tensors created since pt_scope_begin(). pt_scope_end()
 * releases those still listed; pt_keep() marks one to survive into the enclosing scope. A
 * tensor knows its slot in the list, so untracking on pt_release is O(1): it leaves a hole,
 * and the holes are squeezed out when the list is full, so a long-lived scope whose tensors
 * are released by hand does not grow the list without bound. */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

#define MAX_DEPTH 256
#define KEPT_TAG ((uintptr_t)1)

static _Thread_local pt_tensor **entries;
static _Thread_local int64_t count, capacity;
static _Thread_local int64_t starts[MAX_DEPTH];
static _Thread_local int depth;
static _Thread_local int overflow_depth; /* scopes begun beyond MAX_DEPTH (not tracked) */

void pt_scope_begin(void)
{
    if (depth == MAX_DEPTH) {
        overflow_depth++;
        return;
    }
    starts[depth++] = count;
}

/* Moves the listed tensors down over the holes (keeping their order and each scope's start). */
static void squeeze_holes(void)
{
    int64_t w = 0;
    int d = 0;
    for (int64_t i = 0; i < count; i++) {
        while (d < depth && starts[d] == i)
            starts[d++] = w;
        uintptr_t e = (uintptr_t)entries[i];
        if (!e)
            continue;
        ((pt_tensor *)(e & ~KEPT_TAG))->scope_slot = (int32_t)w;
        entries[w++] = (pt_tensor *)e;
    }
    while (d < depth)
        starts[d++] = w;
    count = w;
}

static bool grow_list(void)
{
    int64_t cap = capacity ? capacity * 2 : 1024;
    pt_tensor **grown = pti_realloc(entries, (size_t)cap * sizeof *grown);
    if (!grown)
        return false;
    entries = grown;
    capacity = cap;
    return true;
}

static bool append(pt_tensor *t)
{
    /* When full, squeeze the holes out first, and grow unless that freed a quarter (so one
     * squeeze pays for at least capacity/4 appends). */
    if (count == capacity) {
        squeeze_holes();
        if (count >= capacity - capacity / 4 && !grow_list() && count == capacity)
            return false;
    }
    t->scope_slot = (int32_t)count;
    entries[count++] = t;
    return true;
}

void pti_scope_thread_exit(void)
{
    if (depth > 0 || overflow_depth > 0)
        return; /* tensors are still listed: keep the list */
    free(entries);
    entries = NULL;
    count = capacity = 0;
}

void pti_scope_track(pt_tensor *t)
{
    if (depth == 0 || count >= INT32_MAX)
        return;
    if (!append(t))
        t->scope_slot = -1; /* cannot track: the tensor stays owned by its caller */
}

static bool slot_holds(pt_tensor *t)
{
    int64_t s = t->scope_slot;
    if (s < 0 || s >= count || depth == 0)
        return false;
    return ((uintptr_t)entries[s] & ~KEPT_TAG) == (uintptr_t)t;
}

bool pti_scope_untrack(pt_tensor *t)
{
    if (!slot_holds(t))
        return false;
    entries[t->scope_slot] = NULL;
    t->scope_slot = -1;
    return true;
}

pt_tensor *pt_keep(pt_tensor *t)
{
    if (t && slot_holds(t) && t->scope_slot >= starts[depth - 1])
        entries[t->scope_slot] = (pt_tensor *)((uintptr_t)t | KEPT_TAG);
    return t;
}

void pt_scope_end(void)
{
    if (overflow_depth > 0) {
        overflow_depth--;
        return;
    }
    if (depth == 0)
        return;
    int64_t start = starts[--depth];
    int64_t end = count, w = start;
    for (int64_t i = start; i < end; i++) {
        uintptr_t e = (uintptr_t)entries[i];
        if (!e)
            continue;
        pt_tensor *t = (pt_tensor *)(e & ~KEPT_TAG);
        entries[i] = NULL;
        if (e & KEPT_TAG) {
            entries[w] = t;
            t->scope_slot = depth > 0 ? (int32_t)w : -1;
            if (depth > 0)
                w++;
        } else {
            t->scope_slot = -1;
            pti_unref(t);
        }
    }
    count = depth > 0 ? w : 0;
}
