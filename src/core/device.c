/* The device registry and op dispatch: backends register their vtables here (in-tree ones at
 * load, out-of-tree ones through pt_backend_register), each device's backend context is
 * created here on first use, and pti_dispatch finds the kernel for an op on a tensor's
 * device or says exactly what is missing (no kernel for the op, or not for the dtype).
 *
 * The CUDA backend is a separate shared object (libprometorch_cuda.so) so that a program that
 * never asks for "cuda" maps no CUDA library: the first question about a CUDA device
 * (pti_backend_for with type cuda: parsing "cuda", counting devices, allocating there) loads
 * it with dlopen, from the folder of libprometorch.so first and then the default search path,
 * and calls its pt_cuda_backend_init, which registers it through pt_backend_register like any
 * out-of-tree backend. When it cannot be loaded the reason is kept and reported by every
 * operation that needs a CUDA device, and the device count is 0 (no error set). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *const pti_op_names[PTI_OP_COUNT] = {
#define PT_OP(name) #name,
#include "../ops/ops.def"
#undef PT_OP
};

/* Device indices with a context slot; larger indices are refused (no machine has more). */
#define MAX_DEVICE_INDEX 64
#define MAX_NAME 16

/* Names of the built-in types; private types take the name they register with. */
static const char *const builtin_names[PT_DEVICE_PRIVATE_FIRST] = {
    [PT_DEVICE_CPU] = "cpu",
    [PT_DEVICE_CUDA] = "cuda",
    [PT_DEVICE_E2K] = "e2k",
    [PT_DEVICE_NMCARD] = "nmcard",
};

/* One device's context: made once (under ctx_lock), then read without the lock. */
typedef struct device_ctx {
    atomic_bool made;
    void *ctx;
} device_ctx;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
/* Serializes context creation and destruction (a context_create may take a while: CUDA). */
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(const pt_backend *) backends[PT_DEVICE_TYPE_COUNT];
/* Backends registered through pt_backend_register: the library's own copy, and its name. */
static pt_backend *registered[PT_DEVICE_TYPE_COUNT];
static char registered_names[PT_DEVICE_TYPE_COUNT][MAX_NAME];
static device_ctx contexts[PT_DEVICE_TYPE_COUNT][MAX_DEVICE_INDEX];
/* Set once the contexts were destroyed at unload: none is made again (a storage released
 * later, by another destructor, is left to the process exit). */
static atomic_bool unloaded;

/* ---- the CUDA shared object ------------------------------------------------------------------ */

#define CUDA_PLUGIN "libprometorch_cuda.so"
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static char cuda_load_error[600]; /* why the CUDA backend is absent ("" when it loaded) */

/* dlopen of the plugin beside this library (found through dladdr on one of its functions),
 * then by name on the default search path. Returns the handle or NULL with `why` filled. */
static void *open_cuda_plugin(char *why, size_t n)
{
    Dl_info info;
    char path[4096];
    char first[300] = "";
    if (dladdr((void *)pt_backend_register, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        int dir = slash ? (int)(slash - info.dli_fname) : 0;
        if (slash && snprintf(path, sizeof path, "%.*s/%s", dir, info.dli_fname, CUDA_PLUGIN) <
                         (int)sizeof path) {
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h)
                return h;
            snprintf(first, sizeof first, "%s; ", dlerror());
        }
    }
    void *h = dlopen(CUDA_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        snprintf(why, n,
                 "%s could not be loaded (%s%s); build with PT_WITH_CUDA=ON and install it "
                 "beside libprometorch.so",
                 CUDA_PLUGIN, first, dlerror());
    return h;
}

static void load_cuda(void)
{
    /* keep the caller's error state: a failed load is reported only where a device is needed */
    pt_status saved_status = pt_last_status();
    char saved_msg[1024];
    snprintf(saved_msg, sizeof saved_msg, "%s", pt_last_error());
    void *h = open_cuda_plugin(cuda_load_error, sizeof cuda_load_error);
    if (h) {
        pt_status (*init)(void) = (pt_status(*)(void))dlsym(h, "pt_cuda_backend_init");
        if (!init)
            snprintf(cuda_load_error, sizeof cuda_load_error, "%s has no pt_cuda_backend_init",
                     CUDA_PLUGIN);
        else if (init() != PT_OK)
            snprintf(cuda_load_error, sizeof cuda_load_error, "%s failed to register: %s",
                     CUDA_PLUGIN, pt_last_error());
        /* the handle stays open for the life of the process: kernels and contexts live in it */
    }
    pt_clear_error();
    if (saved_status != PT_OK)
        pti_error(saved_status, "%s", saved_msg);
}

/* ---- registry -------------------------------------------------------------------------------- */

void pti_backend_register(const pt_backend *b)
{
    if (b && (unsigned)b->type < PT_DEVICE_TYPE_COUNT)
        atomic_store(&backends[b->type], b);
}

const pt_backend *pti_backend_for(pt_device d)
{
    if ((unsigned)d.type >= PT_DEVICE_TYPE_COUNT)
        return NULL;
    const pt_backend *b = atomic_load_explicit(&backends[d.type], memory_order_acquire);
    if (!b && d.type == PT_DEVICE_CUDA) {
        pthread_once(&cuda_once, load_cuda);
        b = atomic_load_explicit(&backends[d.type], memory_order_acquire);
    }
    return b;
}

/* The name of a device type ("cpu", "toy"), or NULL for a free private type / invalid type. */
static const char *type_name(pt_device_type t)
{
    if ((unsigned)t >= PT_DEVICE_TYPE_COUNT)
        return NULL;
    if (t < PT_DEVICE_PRIVATE_FIRST)
        return builtin_names[t];
    return atomic_load(&backends[t]) ? registered_names[t] : NULL;
}

static bool valid_name(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= MAX_NAME || s[0] < 'a' || s[0] > 'z')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* Checks desc and fills b's functions and kernel slots; false with the error set. */
static bool backend_from_desc(const pt_backend_desc *desc, pt_backend *b)
{
    const char *name = desc->name;
    if (!desc->alloc || !desc->free || !desc->copy_h2d || !desc->copy_d2h || !desc->copy_d2d) {
        pti_error(PT_ERR_INVALID_ARG,
                  "pt_backend_register: backend '%s' lacks a memory function (alloc, free, "
                  "copy_h2d, copy_d2h and copy_d2d are required)",
                  name);
        return false;
    }
    if (desc->n_kernels < 0 || (desc->n_kernels > 0 && !desc->kernels)) {
        pti_error(PT_ERR_INVALID_ARG, "pt_backend_register: backend '%s': %d kernels but no list",
                  name, desc->n_kernels);
        return false;
    }
    for (int i = 0; i < desc->n_kernels; i++) {
        const pt_backend_kernel *k = &desc->kernels[i];
        int op = k->op ? pt_op_lookup(k->op) : -1;
        if (op < 0 || !k->fn) {
            pti_error(PT_ERR_INVALID_ARG,
                      "pt_backend_register: backend '%s': kernel %d names %s op '%s'%s", name, i,
                      op < 0 ? "an unknown" : "the", k->op ? k->op : "(null)",
                      op >= 0 ? " but has no function" : "");
            return false;
        }
        b->kernels[op] = k->fn;
        b->kernel_dtypes[op] = k->dtypes;
    }
    b->abi_version = desc->abi_version;
    b->device_count = desc->device_count;
    b->absent_reason = desc->absent_reason;
    b->context_create = desc->context_create;
    b->context_destroy = desc->context_destroy;
    b->alloc = desc->alloc;
    b->free = desc->free;
    b->copy_h2d = desc->copy_h2d;
    b->copy_d2h = desc->copy_d2h;
    b->copy_d2d = desc->copy_d2d;
    b->synchronize = desc->synchronize;
    b->supports = desc->supports;
    return true;
}

/* The type a new backend called `name` gets (registry_lock held): its built-in type when
 * free, else a free private type; PT_DEVICE_TYPE_COUNT with the error set when none. */
static pt_device_type pick_type(const char *name)
{
    for (int t = 0; t < PT_DEVICE_TYPE_COUNT; t++) {
        const char *n = type_name((pt_device_type)t);
        if (n && strcmp(n, name) == 0) {
            if (t < PT_DEVICE_PRIVATE_FIRST && t != PT_DEVICE_CPU && !atomic_load(&backends[t]))
                return (pt_device_type)t;
            pti_error(PT_ERR_INVALID_ARG,
                      "pt_backend_register: a backend named '%s' is already registered", name);
            return PT_DEVICE_TYPE_COUNT;
        }
    }
    for (int t = PT_DEVICE_PRIVATE_FIRST; t <= PT_DEVICE_PRIVATE_LAST; t++)
        if (!atomic_load(&backends[t]))
            return (pt_device_type)t;
    pti_error(PT_ERR_RUNTIME,
              "pt_backend_register: cannot register '%s': all %d private device types are taken",
              name, PT_DEVICE_PRIVATE_LAST - PT_DEVICE_PRIVATE_FIRST + 1);
    return PT_DEVICE_TYPE_COUNT;
}

pt_device_type pt_backend_register(const pt_backend_desc *desc)
{
    if (!desc) {
        pti_error(PT_ERR_NULL, "pt_backend_register: NULL backend description");
        return PT_DEVICE_TYPE_COUNT;
    }
    if (desc->abi_version != PT_BACKEND_ABI_VERSION) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "pt_backend_register: backend '%s' was built for backend ABI version %u, "
                  "this library has version %u (rebuild the backend against these headers)",
                  desc->name ? desc->name : "(null)", (unsigned)desc->abi_version,
                  (unsigned)PT_BACKEND_ABI_VERSION);
        return PT_DEVICE_TYPE_COUNT;
    }
    if (!valid_name(desc->name)) {
        pti_error(PT_ERR_INVALID_ARG,
                  "pt_backend_register: bad device name '%s' (expected 1-%d characters "
                  "[a-z0-9_] starting with a letter)",
                  desc->name ? desc->name : "(null)", MAX_NAME - 1);
        return PT_DEVICE_TYPE_COUNT;
    }
    pt_backend *b = pti_calloc(1, sizeof *b);
    if (!b)
        return PT_DEVICE_TYPE_COUNT;
    if (!backend_from_desc(desc, b)) {
        free(b);
        return PT_DEVICE_TYPE_COUNT;
    }
    pthread_mutex_lock(&registry_lock);
    pt_device_type t = pick_type(desc->name);
    if (t != PT_DEVICE_TYPE_COUNT) {
        snprintf(registered_names[t], MAX_NAME, "%s", desc->name);
        b->name = registered_names[t];
        b->type = t;
        registered[t] = b;
        atomic_store_explicit(&backends[t], b, memory_order_release);
    }
    pthread_mutex_unlock(&registry_lock);
    if (t == PT_DEVICE_TYPE_COUNT)
        free(b);
    return t;
}

int pt_op_lookup(const char *name)
{
    if (name)
        for (int i = 0; i < PTI_OP_COUNT; i++)
            if (strcmp(pti_op_names[i], name) == 0)
                return i;
    pti_error(PT_ERR_INVALID_ARG, "pt_op_lookup: no op named '%s'", name ? name : "(null)");
    return -1;
}

const char *pt_op_name(int op)
{
    return op >= 0 && op < PTI_OP_COUNT ? pti_op_names[op] : "?";
}

/* ---- contexts -------------------------------------------------------------------------------- */

pt_status pti_device_ctx(pt_device d, void **ctx)
{
    *ctx = NULL;
    const pt_backend *b = pti_backend_for(d);
    if (!b) {
        char name[32];
        return pti_error(PT_ERR_DEVICE, "no backend for device %s",
                         pt_device_str(d, name, sizeof name));
    }
    if (!b->context_create)
        return PT_OK;
    if (d.index < 0 || d.index >= MAX_DEVICE_INDEX)
        return pti_error(PT_ERR_DEVICE, "device %s:%d: index out of range (0..%d)", b->name,
                         d.index, MAX_DEVICE_INDEX - 1);
    device_ctx *dc = &contexts[d.type][d.index];
    if (atomic_load_explicit(&dc->made, memory_order_acquire)) {
        *ctx = dc->ctx;
        return PT_OK;
    }
    if (atomic_load(&unloaded))
        return pti_error(PT_ERR_DEVICE, "device %s:%d: the library is being unloaded", b->name,
                         d.index);
    /* a context only for a device that exists (the backend sizes its state by its count) */
    pt_status st = pti_device_check(d);
    if (st != PT_OK)
        return st;
    pthread_mutex_lock(&ctx_lock);
    if (!atomic_load_explicit(&dc->made, memory_order_relaxed)) {
        void *c = NULL;
        st = b->context_create(d.index, &c);
        if (st == PT_OK) {
            dc->ctx = c;
            atomic_store_explicit(&dc->made, true, memory_order_release);
        } else if (pt_last_status() == PT_OK) {
            pti_error(st, "device %s:%d: the backend could not create its context", b->name,
                      d.index);
        }
    }
    *ctx = dc->ctx;
    pthread_mutex_unlock(&ctx_lock);
    return st;
}

pt_status pt_backend_context(pt_device dev, void **ctx)
{
    if (!ctx)
        return pti_error(PT_ERR_NULL, "pt_backend_context: NULL ctx pointer");
    return pti_device_ctx(dev, ctx);
}

pt_status pt_backend_context_destroy(pt_device dev)
{
    const pt_backend *b = pti_backend_for(dev);
    if (!b) {
        char name[32];
        return pti_error(PT_ERR_DEVICE, "pt_backend_context_destroy: no backend for device %s",
                         pt_device_str(dev, name, sizeof name));
    }
    if (dev.index < 0 || dev.index >= MAX_DEVICE_INDEX)
        return PT_OK;
    device_ctx *dc = &contexts[dev.type][dev.index];
    pthread_mutex_lock(&ctx_lock);
    if (atomic_load(&dc->made)) {
        atomic_store(&dc->made, false);
        if (b->context_destroy)
            b->context_destroy(dc->ctx);
        dc->ctx = NULL;
    }
    pthread_mutex_unlock(&ctx_lock);
    return PT_OK;
}

/* At library unload (process exit or dlclose): every context made is destroyed. */
__attribute__((destructor)) static void destroy_contexts(void)
{
    atomic_store(&unloaded, true);
    for (int t = 0; t < PT_DEVICE_TYPE_COUNT; t++) {
        const pt_backend *b = atomic_load(&backends[t]);
        for (int i = 0; b && i < MAX_DEVICE_INDEX; i++) {
            device_ctx *dc = &contexts[t][i];
            if (atomic_load(&dc->made) && b->context_destroy)
                b->context_destroy(dc->ctx);
            atomic_store(&dc->made, false);
        }
    }
    /* the registered backends' copies stay: a storage released later still points at one */
}

/* ---- memory through the device's backend --------------------------------------------------- */

void *pti_device_alloc(pt_device d, size_t nbytes)
{
    void *ctx;
    if (pti_device_ctx(d, &ctx) != PT_OK)
        return NULL;
    return pti_backend_for(d)->alloc(ctx, nbytes);
}

void pti_device_free(pt_device d, void *p, size_t nbytes)
{
    const pt_backend *b = pti_backend_for(d);
    if (!b)
        return;
    if (!b->context_create) {
        b->free(NULL, p, nbytes);
        return;
    }
    /* the context exists while memory of the device lives, unless destroyed at unload (then
     * the process is exiting and the memory goes with it) */
    device_ctx *dc = (unsigned)d.index < MAX_DEVICE_INDEX ? &contexts[d.type][d.index] : NULL;
    if (dc && atomic_load_explicit(&dc->made, memory_order_acquire))
        b->free(dc->ctx, p, nbytes);
}

pt_status pti_copy_h2d(pt_device d, void *dst, const void *src, size_t n)
{
    void *ctx;
    pt_status st = pti_device_ctx(d, &ctx);
    return st != PT_OK ? st : pti_backend_for(d)->copy_h2d(ctx, dst, src, n);
}

pt_status pti_copy_d2h(pt_device d, void *dst, const void *src, size_t n)
{
    void *ctx;
    pt_status st = pti_device_ctx(d, &ctx);
    return st != PT_OK ? st : pti_backend_for(d)->copy_d2h(ctx, dst, src, n);
}

pt_status pti_copy_d2d(pt_device d, void *dst, const void *src, size_t n)
{
    void *ctx;
    pt_status st = pti_device_ctx(d, &ctx);
    return st != PT_OK ? st : pti_backend_for(d)->copy_d2d(ctx, dst, src, n);
}

/* ---- device names ------------------------------------------------------------------------------
 */

pt_device pt_cpu(void)
{
    return (pt_device){PT_DEVICE_CPU, 0};
}
pt_device pt_cuda(int index)
{
    return (pt_device){PT_DEVICE_CUDA, index};
}

bool pt_device_equal(pt_device a, pt_device b)
{
    return a.type == b.type && a.index == b.index;
}

/* "cuda" / "cuda:N" matched against type t's name; false when s names another type. */
static bool parse_as(const char *s, pt_device_type t, pt_device *out)
{
    const char *name = type_name(t);
    size_t n = name ? strlen(name) : 0;
    if (!n || strncmp(s, name, n) != 0)
        return false;
    if (s[n] == '\0') {
        *out = (pt_device){t, 0};
        return true;
    }
    if (s[n] == ':' && s[n + 1] >= '0' && s[n + 1] <= '9') {
        char *end;
        long idx = strtol(s + n + 1, &end, 10);
        if (*end == '\0' && idx < 1024) {
            *out = (pt_device){t, (int)idx};
            return true;
        }
    }
    return false;
}

pt_device pt_device_parse(const char *s)
{
    pt_device d = {PT_DEVICE_TYPE_COUNT, 0};
    if (!s) {
        pti_error(PT_ERR_DEVICE, "pt_device_parse: NULL device string");
        return d;
    }
    for (int t = 0; t < PT_DEVICE_TYPE_COUNT; t++) {
        if (parse_as(s, (pt_device_type)t, &d)) {
            if (d.type == PT_DEVICE_CUDA)
                pti_backend_for(d); /* first use of "cuda": load its backend */
            return d;
        }
    }
    char names[160] = "cpu, cuda[:N], e2k, nmcard";
    for (int t = PT_DEVICE_PRIVATE_FIRST; t <= PT_DEVICE_PRIVATE_LAST; t++) {
        const char *n = type_name((pt_device_type)t);
        size_t len = strlen(names);
        if (n)
            snprintf(names + len, sizeof names - len, ", %s[:N]", n);
    }
    pti_error(PT_ERR_DEVICE, "pt_device_parse: unknown device '%s' (expected %s)", s, names);
    return d;
}

char *pt_device_str(pt_device d, char *buf, size_t n)
{
    if (!buf || n == 0)
        return buf;
    const char *name = type_name(d.type);
    if (!name)
        snprintf(buf, n, "invalid");
    else if (d.type == PT_DEVICE_CPU)
        snprintf(buf, n, "cpu");
    else
        snprintf(buf, n, "%s:%d", name, d.index);
    return buf;
}

bool pt_device_available(pt_device d)
{
    const pt_backend *b = pti_backend_for(d);
    if (!b)
        return false;
    int count = b->device_count ? b->device_count() : 1;
    return d.index >= 0 && d.index < count;
}

pt_status pti_device_check(pt_device d)
{
    char name[32];
    const pt_backend *b = pti_backend_for(d);
    pt_device_str(d, name, sizeof name);
    if (!b && d.type == PT_DEVICE_CUDA)
        return pti_error(PT_ERR_DEVICE, "device %s is not available: %s", name, cuda_load_error);
    if (!b)
        return pti_error(PT_ERR_DEVICE,
                         "device %s is not available: no backend for it in this "
                         "build",
                         name);
    int count = b->device_count ? b->device_count() : 1;
    if (d.index < 0 || d.index >= count) {
        const char *why = b->absent_reason ? b->absent_reason() : NULL;
        return pti_error(
            PT_ERR_DEVICE, "device %s is not available: the %s backend found %d device%s%s%s", name,
            b->name, count, count == 1 ? "" : "s", why && *why ? ": " : "", why && *why ? why : "");
    }
    return PT_OK;
}

int pt_cuda_device_count(void)
{
    const pt_backend *b = pti_backend_for(pt_cuda(0));
    return b && b->device_count ? b->device_count() : 0;
}

bool pt_cuda_is_available(void)
{
    return pt_cuda_device_count() > 0;
}

bool pti_check_same_device(const char *op, int n, const pt_tensor *const *ts)
{
    const pt_tensor *first = NULL;
    for (int i = 0; i < n; i++) {
        if (!ts[i])
            continue;
        if (!first) {
            first = ts[i];
            continue;
        }
        if (!pt_device_equal(first->storage->device, ts[i]->storage->device)) {
            char a[32], b[32];
            pti_error(PT_ERR_DEVICE, "%s: expected all tensors on one device, got %s and %s", op,
                      pt_device_str(first->storage->device, a, sizeof a),
                      pt_device_str(ts[i]->storage->device, b, sizeof b));
            return false;
        }
    }
    return true;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

bool pt_backend_supports(pt_device_type type, int op, pt_dtype dtype)
{
    const pt_backend *b = pti_backend_for((pt_device){type, 0});
    if (!b || op < 0 || op >= PTI_OP_COUNT || !b->kernels[op] || !pti_dtype_valid(dtype))
        return false;
    uint64_t mask = b->kernel_dtypes[op];
    if (mask && !(mask & PT_DTYPE_BIT(dtype)))
        return false;
    return !b->supports || b->supports(op, dtype, NULL);
}

pt_status pti_dispatch(pti_op op, pti_call *c)
{
    const pt_tensor *t = c->n_out > 0 ? c->out[0] : (c->n_in > 0 ? c->in[0] : NULL);
    if (!t)
        return pti_error(PT_ERR_INVALID_ARG, "%s: dispatch without tensors", pti_op_names[op]);
    c->op = op;
    pt_device dev = t->storage->device;
    const pt_backend *b = pti_backend_for(dev);
    char name[32];
    if (!b)
        return pti_error(PT_ERR_DEVICE, "%s: no backend for device %s in this build",
                         pti_op_names[op], pt_device_str(dev, name, sizeof name));
    pti_kernel k = b->kernels[op];
    if (!k)
        return pti_error(PT_ERR_UNSUPPORTED, "no kernel for op '%s' on device '%s'",
                         pti_op_names[op], b->name);
    uint64_t mask = b->kernel_dtypes[op];
    if ((mask && !(mask & PT_DTYPE_BIT(t->dtype))) ||
        (b->supports && !b->supports(op, t->dtype, c)))
        return pti_error(PT_ERR_UNSUPPORTED, "op '%s' on device '%s': dtype %s not supported",
                         pti_op_names[op], b->name, pti_dtypes[t->dtype].name);
    c->ctx = NULL;
    if (b->context_create) {
        pt_status st = pti_device_ctx(dev, &c->ctx);
        if (st != PT_OK)
            return st;
    }
    return k(c);
}

/* ---- the call, as a backend's kernel sees it ------------------------------------------------- */

int pt_call_op(const pt_kernel_call *c)
{
    return c ? (int)c->op : -1;
}
int pt_call_num_inputs(const pt_kernel_call *c)
{
    return c ? c->n_in : 0;
}
int pt_call_num_outputs(const pt_kernel_call *c)
{
    return c ? c->n_out : 0;
}
const pt_tensor *pt_call_input(const pt_kernel_call *c, int i)
{
    return c && i >= 0 && i < c->n_in ? c->in[i] : NULL;
}
pt_tensor *pt_call_output(const pt_kernel_call *c, int i)
{
    return c && i >= 0 && i < c->n_out ? c->out[i] : NULL;
}
double pt_call_scalar(const pt_kernel_call *c, int i)
{
    return c && i >= 0 && i < 4 ? c->scalar[i] : 0.0;
}
const void *pt_call_params(const pt_kernel_call *c)
{
    return c ? c->params : NULL;
}
void *pt_call_context(const pt_kernel_call *c)
{
    return c ? c->ctx : NULL;
}
pt_device pt_call_device(const pt_kernel_call *c)
{
    const pt_tensor *t = !c ? NULL : c->n_out > 0 ? c->out[0] : c->n_in > 0 ? c->in[0] : NULL;
    return t ? t->storage->device : (pt_device){PT_DEVICE_TYPE_COUNT, 0};
}

void *pt_device_data_ptr(const pt_tensor *t)
{
    if (!PTI_CHECK_ARG(t, "pt_device_data_ptr", "t"))
        return NULL;
    return pti_data(t);
}

void pt_dtype_store(void *dst, pt_dtype dt, double v)
{
    if (dst && pti_dtype_valid(dt))
        pti_store_f64(dst, dt, v);
}

pt_status pt_backend_error(pt_status st, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt ? fmt : "", ap);
    va_end(ap);
    return pti_error(st, "%s", msg);
}
