/* The allowlist of the restricted pickle VM (pickle_read.c): what the globals of a checkpoint
 * may be, and what REDUCE / NEWOBJ / BUILD do with them. It mirrors PyTorch's weights_only
 * unpickler (torch/_weights_only_unpickler.py): OrderedDict and Counter become dicts, sets
 * lists, torch.Size a tuple, torch.device and dtypes their str, _codecs.encode bytes, and the
 * tensor rebuild functions (_rebuild_tensor, _v2, _v3, _rebuild_parameter[_with_state],
 * _rebuild_from_type_v2) views over the storages persistent_load returned. Tensor kinds this
 * library cannot hold (sparse, quantized, complex, meta, subclass wrappers, numpy-backed) are
 * refused by name with PT_ERR_UNSUPPORTED rather than loaded wrong.
 *
 * Any other global is inert: nothing is ever imported or called. Without allow_objects, using
 * it (REDUCE, NEWOBJ, or leaving it in the result) is refused; with allow_objects, instances
 * become stub dicts {'__class__': 'mod.Name', '__args__': ..., ...state}. Modules that only an
 * exploit would name (os, sys, subprocess, builtins.eval, ...) are refused as soon as GLOBAL
 * names them, even with allow_objects: a stub of them would be harmless, but a checkpoint
 * never refers to them, and saying so plainly is more useful than loading the payload. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_read_internal.h"
#include "prometorch/autograd.h"

/* Nesting of _rebuild_from_type_v2 calling another rebuild function (one level is normal). */
#define PK_MAX_CALL_DEPTH 4

typedef enum pk_gid {
    G_OTHER,
    G_DENIED,
    G_ODICT,
    G_COUNTER,
    G_PARAMETER,
    G_SIZE,
    G_DEVICE,
    G_DTYPE,
    G_CODECS_ENCODE,
    G_SET,
    G_FROZENSET,
    G_BYTEARRAY,
    G_COMPLEX,
    G_GET_LAYOUT,
    G_QSCHEME,
    G_TENSOR_CLASS,
    G_STORAGE_CLASS,
    G_REBUILD_V1,
    G_REBUILD_V2,
    G_REBUILD_V3,
    G_REBUILD_PARAM,
    G_REBUILD_PARAM_STATE,
    G_REBUILD_FROM_TYPE,
    G_REBUILD_UNSUPPORTED,
    G_RECONSTRUCTOR,
} pk_gid;

static const struct {
    const char *name;
    pk_gid id;
} exact_names[] = {
    {"collections.OrderedDict", G_ODICT},
    {"collections.Counter", G_COUNTER},
    {"torch.nn.parameter.Parameter", G_PARAMETER},
    {"torch.nn.Parameter", G_PARAMETER},
    {"torch.Size", G_SIZE},
    {"torch.device", G_DEVICE},
    {"_codecs.encode", G_CODECS_ENCODE},
    {"builtins.set", G_SET},
    {"__builtin__.set", G_SET},
    {"builtins.frozenset", G_FROZENSET},
    {"__builtin__.frozenset", G_FROZENSET},
    {"builtins.bytearray", G_BYTEARRAY},
    {"__builtin__.bytearray", G_BYTEARRAY},
    {"builtins.bytes", G_BYTEARRAY}, /* protocols 0-2 write b'' as bytes() */
    {"__builtin__.bytes", G_BYTEARRAY},
    {"builtins.complex", G_COMPLEX},
    {"__builtin__.complex", G_COMPLEX},
    {"torch.serialization._get_layout", G_GET_LAYOUT},
    {"torch.Tensor", G_TENSOR_CLASS},
    {"torch._tensor.Tensor", G_TENSOR_CLASS},
    {"torch.UntypedStorage", G_STORAGE_CLASS},
    {"torch.TypedStorage", G_STORAGE_CLASS},
    {"torch._UntypedStorage", G_STORAGE_CLASS},
    {"torch.storage.TypedStorage", G_STORAGE_CLASS},
    {"torch.storage.UntypedStorage", G_STORAGE_CLASS},
    {"torch.storage._UntypedStorage", G_STORAGE_CLASS},
    {"torch.storage._TypedStorage", G_STORAGE_CLASS},
    {"torch._utils._rebuild_tensor", G_REBUILD_V1},
    {"torch._utils._rebuild_tensor_v2", G_REBUILD_V2},
    {"torch._utils._rebuild_tensor_v3", G_REBUILD_V3},
    {"torch._utils._rebuild_parameter", G_REBUILD_PARAM},
    {"torch._utils._rebuild_parameter_with_state", G_REBUILD_PARAM_STATE},
    {"torch._tensor._rebuild_from_type_v2", G_REBUILD_FROM_TYPE},
    {"torch._tensor._rebuild_from_type", G_REBUILD_FROM_TYPE},
    {"torch._utils._rebuild_sparse_tensor", G_REBUILD_UNSUPPORTED},
    {"torch._utils._rebuild_sparse_csr_tensor", G_REBUILD_UNSUPPORTED},
    {"torch._utils._rebuild_qtensor", G_REBUILD_UNSUPPORTED},
    {"torch._utils._rebuild_meta_tensor_no_storage", G_REBUILD_UNSUPPORTED},
    {"torch._utils._rebuild_wrapper_subclass", G_REBUILD_UNSUPPORTED},
    {"torch._utils._rebuild_device_tensor_from_numpy", G_REBUILD_UNSUPPORTED},
    {"torch._utils._rebuild_device_tensor_from_cpu_tensor", G_REBUILD_UNSUPPORTED},
    {"torch._utils._rebuild_nested_tensor", G_REBUILD_UNSUPPORTED},
    {"torch._utils._rebuild_xla_tensor", G_REBUILD_UNSUPPORTED},
    {"torch._utils._rebuild_mlc_tensor", G_REBUILD_UNSUPPORTED},
    {"torch.per_tensor_affine", G_QSCHEME},
    {"torch.per_channel_affine", G_QSCHEME},
    {"torch.per_tensor_symmetric", G_QSCHEME},
    {"torch.per_channel_symmetric", G_QSCHEME},
    {"torch.per_channel_affine_float_qparams", G_QSCHEME},
    {"copyreg._reconstructor", G_RECONSTRUCTOR},
    {"builtins.object", G_OTHER}, /* inert bases of protocol 0/1 objects, for allow_objects */
    {"__builtin__.object", G_OTHER},
    {"builtins.dict", G_OTHER},
    {"builtins.list", G_OTHER},
    {"copy_reg._reconstructor", G_RECONSTRUCTOR},
};

/* dtypes this library holds, by every name torch gives them */
static const struct {
    const char *name;
    pt_dtype dt;
} dtype_names[] = {
    {"float32", PT_FLOAT32},   {"float", PT_FLOAT32},   {"float64", PT_FLOAT64},
    {"double", PT_FLOAT64},    {"float16", PT_FLOAT16}, {"half", PT_FLOAT16},
    {"bfloat16", PT_BFLOAT16}, {"int64", PT_INT64},     {"long", PT_INT64},
    {"int32", PT_INT32},       {"int", PT_INT32},       {"int16", PT_INT16},
    {"short", PT_INT16},       {"int8", PT_INT8},       {"uint8", PT_UINT8},
    {"bool", PT_BOOL},
};

/* dtypes torch has and this library does not (tensors of them are refused by name) */
static const char *const other_dtypes[] = {
    "complex32",
    "chalf",
    "complex64",
    "cfloat",
    "complex128",
    "cdouble",
    "quint8",
    "qint8",
    "qint32",
    "quint4x2",
    "quint2x4",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "uint16",
    "uint32",
    "uint64",
    "uint1",
    "uint2",
    "uint3",
    "uint4",
    "uint5",
    "uint6",
    "uint7",
    "int1",
    "int2",
    "int3",
    "int4",
    "int5",
    "int6",
    "int7",
    "bits1x8",
    "bits2x4",
    "bits4x2",
    "bits8",
    "bits16",
};

static const char *const storage_bases[] = {
    "Float", "Double", "Half",   "BFloat16", "Long",         "Int",
    "Short", "Char",   "Byte",   "Bool",     "ComplexFloat", "ComplexDouble",
    "QInt8", "QUInt8", "QInt32", "QUInt4x2", "QUInt2x4",
};
#define N_TENSOR_BASES 10 /* the first ten storage bases also name legacy tensor classes */

/* Modules only an exploit names: refused at GLOBAL, even as inert stubs. */
static const char *const denied_modules[] = {
    "os",
    "posix",
    "nt",
    "sys",
    "subprocess",
    "shutil",
    "socket",
    "importlib",
    "runpy",
    "pty",
    "ctypes",
    "marshal",
    "pickle",
    "_pickle",
    "code",
    "codeop",
    "webbrowser",
    "pdb",
    "multiprocessing",
    "signal",
    "_posixsubprocess",
    "builtins",
    "__builtin__",
    "commands",
    "platform",
    "asyncio",
    "tempfile",
    "operator",
};

static bool has_prefix(const char *s, const char *p, const char **rest)
{
    size_t n = strlen(p);
    if (strncmp(s, p, n))
        return false;
    *rest = s + n;
    return true;
}

/* A dtype name ("torch.float32"): *dt gets it, or -1 for a dtype this library lacks. */
static bool dtype_of_name(const char *name, int *dt)
{
    const char *r;
    if (!has_prefix(name, "torch.", &r))
        return false;
    for (size_t k = 0; k < sizeof dtype_names / sizeof *dtype_names; k++)
        if (!strcmp(r, dtype_names[k].name)) {
            *dt = (int)dtype_names[k].dt;
            return true;
        }
    for (size_t k = 0; k < sizeof other_dtypes / sizeof *other_dtypes; k++)
        if (!strcmp(r, other_dtypes[k])) {
            *dt = -1;
            return true;
        }
    return false;
}

/* "torch.FloatStorage", "torch.cuda.LongTensor", ...: the base index, or -1. */
static int class_base(const char *name, const char *suffix, size_t nbases)
{
    const char *r = NULL;
    if (!has_prefix(name, "torch.cuda.sparse.", &r) && !has_prefix(name, "torch.cuda.", &r) &&
        !has_prefix(name, "torch.sparse.", &r) && !has_prefix(name, "torch.", &r))
        return -1;
    size_t n = strlen(r), sn = strlen(suffix);
    if (n <= sn || strcmp(r + n - sn, suffix))
        return -1;
    for (size_t k = 0; k < nbases; k++)
        if (strlen(storage_bases[k]) == n - sn && !strncmp(r, storage_bases[k], n - sn))
            return (int)k;
    return -1;
}

static pk_gid classify(const char *name)
{
    for (size_t k = 0; k < sizeof exact_names / sizeof *exact_names; k++)
        if (!strcmp(name, exact_names[k].name))
            return exact_names[k].id;
    int dt;
    if (dtype_of_name(name, &dt))
        return G_DTYPE;
    if (class_base(name, "Storage", sizeof storage_bases / sizeof *storage_bases) >= 0)
        return G_STORAGE_CLASS;
    if (class_base(name, "Tensor", N_TENSOR_BASES) >= 0)
        return G_TENSOR_CLASS;
    for (size_t k = 0; k < sizeof denied_modules / sizeof *denied_modules; k++) {
        const char *r;
        if (has_prefix(name, denied_modules[k], &r) && *r == '.')
            return G_DENIED;
    }
    return G_OTHER;
}

static bool not_allowed(pk_vm *vm, const char *name)
{
    return pk_unsupported(vm,
                          "global '%s' is not allowed (a checkpoint may only refer to "
                          "PyTorch's tensor types; nothing was executed)",
                          name);
}

static bool whole_object(pk_vm *vm, const char *name)
{
    return pk_unsupported(vm,
                          "%s at byte %zu instantiates class '%s': the file holds a whole "
                          "pickled Python object (as torch.save(model) writes), which needs "
                          "its Python class to load; nothing was executed. Read just its "
                          "tensors with pt_load_tensors, or save model.state_dict() instead",
                          pk_op_name(vm->op), vm->op_pos, name);
}

bool pk_global_check(pk_vm *vm, const char *name)
{
    return classify(name) != G_DENIED || not_allowed(vm, name);
}

bool pk_global_final(pk_vm *vm, const pt_value *g)
{
    if (classify(g->u.s.data) == G_OTHER && !vm->o->allow_objects)
        return not_allowed(vm, g->u.s.data);
    ((pt_value *)g)->kind = PT_VALUE_STR; /* same layout: the name becomes its str */
    return true;
}

/* ---- argument helpers ----------------------------------------------------------------- */

static int64_t nargs(const pt_value *args)
{
    return args->u.seq.len;
}

static const pt_value *arg(const pt_value *args, int64_t i)
{
    return args->u.seq.items[i];
}

static bool want_args(pk_vm *vm, const char *fn, const pt_value *args, int64_t lo, int64_t hi)
{
    int64_t n = nargs(args);
    if (n >= lo && n <= hi)
        return true;
    if (lo == hi)
        return pk_fail(vm, "%s takes %lld arguments, got %lld", fn, (long long)lo, (long long)n);
    return pk_fail(vm, "%s takes %lld to %lld arguments, got %lld", fn, (long long)lo,
                   (long long)hi, (long long)n);
}

static bool get_int(pk_vm *vm, const char *fn, const char *what, const pt_value *v, int64_t *out)
{
    if (v->kind == PT_VALUE_INT)
        *out = v->u.i;
    else if (v->kind == PT_VALUE_BOOL)
        *out = v->u.b;
    else
        return pk_fail(vm, "%s: %s is a %s, not an int", fn, what, pt_value_kind_name(v->kind));
    return true;
}

static bool get_bool(pk_vm *vm, const char *fn, const char *what, const pt_value *v, bool *out)
{
    int64_t i = 0;
    if (!get_int(vm, fn, what, v, &i))
        return false;
    *out = i != 0;
    return true;
}

/* A tuple or list of ints (torch.Size, size, stride). */
static bool get_dims(pk_vm *vm, const char *fn, const char *what, const pt_value *v, int *nd,
                     int64_t *dims)
{
    if (v->kind != PT_VALUE_TUPLE && v->kind != PT_VALUE_LIST)
        return pk_fail(vm, "%s: %s is a %s, not a tuple of ints", fn, what,
                       pt_value_kind_name(v->kind));
    if (v->u.seq.len > PT_MAX_DIMS)
        return pk_unsupported(vm, "%s: a tensor with %lld dimensions (at most %d are supported)",
                              fn, (long long)v->u.seq.len, PT_MAX_DIMS);
    *nd = (int)v->u.seq.len;
    for (int d = 0; d < *nd; d++)
        if (!get_int(vm, fn, what, v->u.seq.items[d], &dims[d]))
            return false;
    return true;
}

static bool is_dict_plain(pk_vm *vm, const pt_value *v)
{
    pk_track *t = pk_tracked(vm, v);
    return v->kind == PT_VALUE_DICT && !(t && (t->flags & (PK_SET | PK_FROZENSET | PK_STUB)));
}

static const char *dims_str(int nd, const int64_t *d)
{
    return pti_shape_str(nd, d);
}

/* ---- tensors ------------------------------------------------------------------------------ */

/* A view of the storage tensor `st` with the given geometry, in elements of dt (dt differs
 * from st's dtype only for _rebuild_tensor_v3 over a byte storage). Checked without overflow
 * against the storage size before anything is made. */
static bool rebuild_view(pk_vm *vm, const char *fn, const pt_value *st, const pt_value *off_v,
                         const pt_value *size_v, const pt_value *stride_v, int dt_override,
                         pt_tensor **out)
{
    int64_t offset = 0, size[PT_MAX_DIMS], stride[PT_MAX_DIMS];
    int nd, nds;
    if (st->kind != PT_VALUE_TENSOR)
        return pk_fail(vm, "%s: the storage is a %s, not a storage from a persistent id", fn,
                       pt_value_kind_name(st->kind));
    if (!get_int(vm, fn, "storage_offset", off_v, &offset) ||
        !get_dims(vm, fn, "size", size_v, &nd, size) ||
        !get_dims(vm, fn, "stride", stride_v, &nds, stride))
        return false;
    if (nd != nds)
        return pk_fail(vm, "%s: size %s and stride %s differ in length", fn, dims_str(nd, size),
                       dims_str(nds, stride));
    const pt_tensor *base = st->u.t;
    pt_dtype dt = dt_override >= 0 ? (pt_dtype)dt_override : base->dtype;
    if (dt != base->dtype && base->dtype != PT_UINT8)
        return pk_fail(vm, "%s: a %s storage cannot hold %s elements", fn,
                       pt_dtype_name(base->dtype), pt_dtype_name(dt));
    if (pt_dtype_is_block(dt))
        return pk_fail(vm, "%s: a storage of %s blocks", fn, pt_dtype_name(dt));
    int64_t capacity = (int64_t)(base->storage->nbytes / pt_dtype_size(dt));
    if (offset < 0)
        return pk_fail(vm, "%s: negative storage offset %lld", fn, (long long)offset);
    int64_t numel = 1, last = offset;
    for (int d = 0; d < nd; d++) {
        if (size[d] < 0 || stride[d] < 0)
            return pk_fail(vm, "%s: negative size or stride (size %s, stride %s)", fn,
                           dims_str(nd, size), dims_str(nd, stride));
        if (__builtin_mul_overflow(numel, size[d], &numel))
            return pk_fail(vm, "%s: size %s overflows", fn, dims_str(nd, size));
    }
    for (int d = 0; numel > 0 && d < nd; d++) {
        int64_t span;
        if (__builtin_mul_overflow(size[d] - 1, stride[d], &span) ||
            __builtin_add_overflow(last, span, &last))
            return pk_fail(vm, "%s: size %s with stride %s overflows", fn, dims_str(nd, size),
                           dims_str(nd, stride));
    }
    if ((numel > 0 && last >= capacity) || offset > capacity)
        return pk_fail(vm,
                       "%s: size %s, stride %s at offset %lld reach element %lld, but the "
                       "storage holds %lld %s elements",
                       fn, dims_str(nd, size), dims_str(nd, stride), (long long)offset,
                       (long long)last, (long long)capacity, pt_dtype_name(dt));
    if (dt == base->dtype)
        *out = pt_as_strided(base, nd, size, stride, offset);
    else
        *out = pti_tensor_on_storage(base->storage, dt, nd, size, stride, offset);
    if (!*out && pt_last_status() != PT_ERR_OOM) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", pt_last_error());
        return pk_fail(vm, "%s: %s", fn, msg);
    }
    return *out != NULL;
}

/* Wraps t (consumed) as a value, marking requires_grad first. */
static bool tensor_value(pk_vm *vm, const char *fn, pt_tensor *t, bool requires_grad,
                         pt_value **out)
{
    if (requires_grad && pt_requires_grad_(t, true) != PT_OK) {
        pt_release(t);
        return pk_fail(vm,
                       "%s: requires_grad on a %s tensor (only floating point tensors can "
                       "require gradients)",
                       fn, pt_dtype_name(pt_dtype_of(t)));
    }
    *out = pt_value_tensor(t);
    pt_release(t);
    return *out != NULL;
}

static bool check_hooks(pk_vm *vm, const char *fn, const pt_value *hooks)
{
    if (hooks->kind == PT_VALUE_NONE || (is_dict_plain(vm, hooks) && hooks->u.dict.len == 0))
        return true;
    if (is_dict_plain(vm, hooks))
        return pk_unsupported(vm,
                              "%s: %lld saved backward hooks (Python callables) are not "
                              "supported",
                              fn, (long long)hooks->u.dict.len);
    return pk_fail(vm, "%s: backward_hooks is a %s, not a dict", fn,
                   pt_value_kind_name(hooks->kind));
}

/* The optional metadata dict of _rebuild_tensor_v2/v3: conj/neg bits cannot be honoured. */
static bool check_metadata(pk_vm *vm, const char *fn, const pt_value *md)
{
    if (md->kind == PT_VALUE_NONE)
        return true;
    if (!is_dict_plain(vm, md))
        return pk_fail(vm, "%s: metadata is a %s, not a dict", fn, pt_value_kind_name(md->kind));
    for (int64_t k = 0; k < md->u.dict.len; k++) {
        const pt_value *key = md->u.dict.entries[k].key, *val = md->u.dict.entries[k].val;
        bool on = !(val->kind == PT_VALUE_NONE || (val->kind == PT_VALUE_BOOL && !val->u.b) ||
                    (val->kind == PT_VALUE_INT && val->u.i == 0));
        if (key->kind == PT_VALUE_STR && on &&
            (strstr(key->u.s.data, "conj") || strstr(key->u.s.data, "neg")))
            return pk_unsupported(vm,
                                  "%s: a tensor with the '%s' bit set (lazy conjugate or "
                                  "negative view) is not supported",
                                  fn, key->u.s.data);
    }
    return true;
}

static bool rebuild_tensor(pk_vm *vm, pk_gid id, const pt_value *args, pt_value **out)
{
    const char *fn = id == G_REBUILD_V1   ? "_rebuild_tensor"
                     : id == G_REBUILD_V2 ? "_rebuild_tensor_v2"
                                          : "_rebuild_tensor_v3";
    int64_t lo = id == G_REBUILD_V1 ? 4 : id == G_REBUILD_V2 ? 6 : 7;
    if (!want_args(vm, fn, args, lo, id == G_REBUILD_V1 ? 4 : lo + 1))
        return false;
    int dt = -1;
    bool rg = false;
    if (id == G_REBUILD_V3) {
        const pt_value *d = arg(args, 6);
        if (d->kind != PTI_VALUE_GLOBAL || !dtype_of_name(d->u.s.data, &dt))
            return pk_fail(vm, "%s: the dtype is a %s, not a torch dtype", fn,
                           pt_value_kind_name(d->kind));
        if (dt < 0) {
            pti_error(PT_ERR_DTYPE, "%s: pickle: %s: PromeTorch has no dtype %s", vm->what, fn,
                      d->u.s.data);
            return false;
        }
    }
    if (id != G_REBUILD_V1 && (!get_bool(vm, fn, "requires_grad", arg(args, 4), &rg) ||
                               !check_hooks(vm, fn, arg(args, 5)) ||
                               (nargs(args) > lo && !check_metadata(vm, fn, arg(args, lo)))))
        return false;
    pt_tensor *t = NULL;
    if (!rebuild_view(vm, fn, arg(args, 0), arg(args, 1), arg(args, 2), arg(args, 3), dt, &t))
        return false;
    return tensor_value(vm, fn, t, rg, out);
}

/* nn.Parameter(data, requires_grad): a new tensor object over data's memory. */
static bool make_parameter(pk_vm *vm, const char *fn, const pt_value *data, bool rg, pt_value **out)
{
    if (data->kind != PT_VALUE_TENSOR)
        return pk_fail(vm, "%s: the data is a %s, not a tensor", fn,
                       pt_value_kind_name(data->kind));
    const pt_tensor *d = data->u.t;
    pt_tensor *t = pti_tensor_view(d, d->ndim, d->shape, d->stride, d->offset);
    return t && tensor_value(vm, fn, t, rg, out);
}

static bool rebuild_parameter(pk_vm *vm, pk_gid id, const pt_value *args, pt_value **out)
{
    const char *fn = id == G_REBUILD_PARAM ? "_rebuild_parameter" : "_rebuild_parameter_with_state";
    int64_t n = id == G_REBUILD_PARAM ? 3 : 4;
    bool rg;
    /* the state of _with_state holds Python attributes of the parameter: dropped */
    return want_args(vm, fn, args, n, n) && get_bool(vm, fn, "requires_grad", arg(args, 1), &rg) &&
           check_hooks(vm, fn, arg(args, 2)) && make_parameter(vm, fn, arg(args, 0), rg, out);
}

static bool call_depth(pk_vm *vm, const pt_value *func, const pt_value *args, pt_value **out,
                       int depth);

/* _rebuild_from_type_v2(func, type, args, state): func(*args); the type (Tensor or Parameter,
 * or with allow_objects a subclass) and the state (Python attributes) are dropped. */
static bool rebuild_from_type(pk_vm *vm, const pt_value *args, pt_value **out, int depth)
{
    const char *fn = "_rebuild_from_type_v2";
    if (!want_args(vm, fn, args, 4, 4))
        return false;
    const pt_value *func = arg(args, 0), *type = arg(args, 1), *fargs = arg(args, 2);
    if (func->kind != PTI_VALUE_GLOBAL || type->kind != PTI_VALUE_GLOBAL ||
        fargs->kind != PT_VALUE_TUPLE)
        return pk_fail(vm, "%s expects (function, type, tuple, state)", fn);
    pk_gid tid = classify(type->u.s.data);
    if (tid != G_TENSOR_CLASS && tid != G_PARAMETER && !vm->o->allow_objects)
        return pk_unsupported(vm,
                              "%s: tensor subclass '%s' is not supported (nothing was "
                              "executed)",
                              fn, type->u.s.data);
    if (!call_depth(vm, func, fargs, out, depth + 1))
        return false;
    if ((*out)->kind != PT_VALUE_TENSOR) {
        pt_value_free(*out);
        *out = NULL;
        return pk_fail(vm, "%s: '%s' did not give a tensor", fn, func->u.s.data);
    }
    return true;
}

/* ---- plain Python values -----------------------------------------------------------------------
 */

static bool make_stub(pk_vm *vm, const char *name, const pt_value *args, const pt_value *kwargs,
                      pt_value **out)
{
    pt_value *s = pk_new_container(vm, PT_VALUE_DICT, PK_STUB);
    bool ok = s && pk_dict_set_str(vm, s, "__class__", pt_value_str(name));
    if (ok && args && nargs(args) > 0)
        ok = pk_dict_set_str(vm, s, "__args__", pt_value_retain((pt_value *)args));
    if (ok && kwargs && kwargs->u.dict.len > 0)
        ok = pk_dict_set_str(vm, s, "__kwargs__", pt_value_retain((pt_value *)kwargs));
    if (!ok) {
        pt_value_free(s);
        return false;
    }
    *out = s;
    return true;
}

/* Items of a list, tuple or set-dict source (borrowed array access). */
static bool seq_items(pk_vm *vm, const char *fn, const pt_value *src, int64_t *n, bool *keys)
{
    pk_track *t = pk_tracked(vm, src);
    *keys = false;
    if (src->kind == PT_VALUE_LIST || src->kind == PT_VALUE_TUPLE) {
        *n = src->u.seq.len;
        return true;
    }
    if (src->kind == PT_VALUE_DICT && t && (t->flags & (PK_SET | PK_FROZENSET))) {
        *n = src->u.dict.len;
        *keys = true;
        return true;
    }
    return pk_fail(vm, "%s: expects a list, tuple or set, got a %s", fn,
                   pt_value_kind_name(src->kind));
}

static bool make_set(pk_vm *vm, pk_gid id, const pt_value *args, pt_value **out)
{
    const char *fn = id == G_SET ? "set" : "frozenset";
    if (!want_args(vm, fn, args, 0, 1))
        return false;
    pt_value *s = pk_new_container(vm, PT_VALUE_DICT, id == G_SET ? PK_SET : PK_FROZENSET);
    if (!s)
        return false;
    int64_t n = 0;
    bool keys = false, ok = nargs(args) == 0 || seq_items(vm, fn, arg(args, 0), &n, &keys);
    ok = ok && pk_charge(vm, (uint64_t)n);
    for (int64_t k = 0; ok && k < n; k++) {
        const pt_value *src = arg(args, 0);
        pt_value *item = keys ? src->u.dict.entries[k].key : src->u.seq.items[k];
        ok = pk_dict_set(vm, s, pt_value_retain(item), pt_value_none());
    }
    if (!ok) {
        pt_value_free(s);
        return false;
    }
    *out = s;
    return true;
}

/* OrderedDict() / OrderedDict(mapping or pairs) / Counter(dict): a dict. */
static bool make_odict(pk_vm *vm, const char *fn, const pt_value *args, pt_value **out)
{
    if (!want_args(vm, fn, args, 0, 1))
        return false;
    pt_value *d = pk_new_container(vm, PT_VALUE_DICT, PK_ODICT);
    if (!d)
        return false;
    const pt_value *src = nargs(args) ? arg(args, 0) : NULL;
    bool ok = !src || pt_value_len(src) < 0 || pk_charge(vm, (uint64_t)pt_value_len(src));
    if (src && src->kind == PT_VALUE_DICT && is_dict_plain(vm, src)) {
        for (int64_t k = 0; ok && k < src->u.dict.len; k++)
            ok = pk_dict_set(vm, d, pt_value_retain(src->u.dict.entries[k].key),
                             pt_value_retain(src->u.dict.entries[k].val));
    } else if (src && (src->kind == PT_VALUE_LIST || src->kind == PT_VALUE_TUPLE)) {
        for (int64_t k = 0; ok && k < src->u.seq.len; k++) {
            const pt_value *p = src->u.seq.items[k];
            if ((p->kind != PT_VALUE_LIST && p->kind != PT_VALUE_TUPLE) || p->u.seq.len != 2)
                ok = pk_fail(vm, "%s: item %lld is not a (key, value) pair", fn, (long long)k);
            else
                ok = pk_dict_set(vm, d, pt_value_retain(p->u.seq.items[0]),
                                 pt_value_retain(p->u.seq.items[1]));
        }
    } else if (src) {
        ok = pk_fail(vm, "%s: expects a dict or (key, value) pairs, got a %s", fn,
                     pt_value_kind_name(src->kind));
    }
    if (!ok) {
        pt_value_free(d);
        return false;
    }
    *out = d;
    return true;
}

/* str.encode(encoding) for the encodings Python's pickler uses for bytes (latin1). */
static bool encode_str(pk_vm *vm, const char *fn, const pt_value *s, const pt_value *enc,
                       pt_value **out)
{
    if (s->kind != PT_VALUE_STR || (enc && enc->kind != PT_VALUE_STR))
        return pk_fail(vm, "%s expects (str, encoding)", fn);
    if (!pk_charge(vm, s->u.s.len))
        return false;
    const char *e = enc ? enc->u.s.data : "utf-8";
    bool latin1 = !strcmp(e, "latin1") || !strcmp(e, "latin-1") || !strcmp(e, "iso-8859-1");
    bool ascii = !strcmp(e, "ascii");
    if (!latin1 && !ascii && strcmp(e, "utf-8") && strcmp(e, "utf8"))
        return pk_unsupported(vm, "%s: encoding '%s' is not supported", fn, e);
    if (!latin1 && !ascii) {
        *out = pt_value_bytes(s->u.s.data, s->u.s.len);
        return *out != NULL;
    }
    uint8_t *b = pti_malloc(s->u.s.len + 1);
    if (!b)
        return false;
    size_t o = 0;
    const uint8_t *p = (const uint8_t *)s->u.s.data;
    for (size_t k = 0; k < s->u.s.len;) {
        uint32_t cp = p[k];
        if (cp >= 0xc0 && cp < 0xe0 && k + 1 < s->u.s.len) {
            cp = (cp & 0x1f) << 6 | (p[k + 1] & 0x3f);
            k += 2;
        } else if (cp >= 0x80) {
            cp = 0x100; /* three- and four-byte characters are beyond Latin-1 */
            k++;
        } else {
            k++;
        }
        if (cp > (ascii ? 0x7fu : 0xffu)) {
            free(b);
            return pk_fail(vm, "%s: the text has a character beyond %s", fn, e);
        }
        b[o++] = (uint8_t)cp;
    }
    *out = pt_value_bytes(b, o);
    free(b);
    return *out != NULL;
}

/* bytearray(...) and bytes(...): bytes. */
static bool make_bytearray(pk_vm *vm, const pt_value *args, pt_value **out)
{
    const char *fn = "bytes";
    if (!want_args(vm, fn, args, 0, 2))
        return false;
    if (nargs(args) == 0) {
        *out = pt_value_bytes("", 0);
        return *out != NULL;
    }
    const pt_value *a = arg(args, 0);
    if (a->kind == PT_VALUE_BYTES && nargs(args) == 1) {
        *out = pt_value_retain((pt_value *)a);
        return true;
    }
    return encode_str(vm, fn, a, nargs(args) == 2 ? arg(args, 1) : NULL, out);
}

static bool make_size(pk_vm *vm, const pt_value *args, pt_value **out)
{
    int64_t dims[PT_MAX_DIMS];
    int nd = 0;
    if (!want_args(vm, "torch.Size", args, 0, 1))
        return false;
    if (nargs(args) == 1 && !get_dims(vm, "torch.Size", "the size", arg(args, 0), &nd, dims))
        return false;
    pt_value *t = pk_new_container(vm, PT_VALUE_TUPLE, 0);
    for (int d = 0; t && d < nd; d++)
        if (pt_value_append(t, pt_value_int(dims[d])) != PT_OK) {
            pt_value_free(t);
            t = NULL;
        }
    *out = t;
    return t != NULL;
}

static bool make_device(pk_vm *vm, const pt_value *args, pt_value **out)
{
    const char *fn = "torch.device";
    if (!want_args(vm, fn, args, 1, 2))
        return false;
    const pt_value *type = arg(args, 0);
    if (type->kind != PT_VALUE_STR || type->u.s.len > 64)
        return pk_fail(vm, "%s: the device type is a %s, not a short str", fn,
                       pt_value_kind_name(type->kind));
    int64_t index = -1;
    if (nargs(args) == 2 && arg(args, 1)->kind != PT_VALUE_NONE &&
        !get_int(vm, fn, "the index", arg(args, 1), &index))
        return false;
    char buf[96];
    if (index >= 0)
        snprintf(buf, sizeof buf, "%s:%lld", type->u.s.data, (long long)index);
    else
        snprintf(buf, sizeof buf, "%s", type->u.s.data);
    *out = pt_value_str(buf);
    return *out != NULL;
}

/* ---- REDUCE / NEWOBJ / BUILD -------------------------------------------------------------- */

static bool call_depth(pk_vm *vm, const pt_value *func, const pt_value *args, pt_value **out,
                       int depth)
{
    const char *name = func->u.s.data;
    if (depth > PK_MAX_CALL_DEPTH)
        return pk_fail(vm, "rebuild functions nested more than %d deep", PK_MAX_CALL_DEPTH);
    pk_gid id = classify(name);
    switch (id) {
    case G_ODICT: return make_odict(vm, "OrderedDict", args, out);
    case G_COUNTER: return make_odict(vm, "Counter", args, out);
    case G_SET:
    case G_FROZENSET: return make_set(vm, id, args, out);
    case G_BYTEARRAY: return make_bytearray(vm, args, out);
    case G_CODECS_ENCODE:
        return want_args(vm, "_codecs.encode", args, 1, 2) &&
               encode_str(vm, "_codecs.encode", arg(args, 0),
                          nargs(args) == 2 ? arg(args, 1) : NULL, out);
    case G_SIZE: return make_size(vm, args, out);
    case G_DEVICE: return make_device(vm, args, out);
    case G_GET_LAYOUT:
        if (!want_args(vm, "_get_layout", args, 1, 1) || arg(args, 0)->kind != PT_VALUE_STR)
            return pk_fail(vm, "_get_layout expects (str,)");
        *out = pt_value_retain((pt_value *)arg(args, 0));
        return true;
    case G_PARAMETER: {
        bool rg = true;
        if (!want_args(vm, "Parameter", args, 1, 2) ||
            (nargs(args) == 2 && !get_bool(vm, "Parameter", "requires_grad", arg(args, 1), &rg)))
            return false;
        return make_parameter(vm, "Parameter", arg(args, 0), rg, out);
    }
    case G_REBUILD_V1:
    case G_REBUILD_V2:
    case G_REBUILD_V3: return rebuild_tensor(vm, id, args, out);
    case G_REBUILD_PARAM:
    case G_REBUILD_PARAM_STATE: return rebuild_parameter(vm, id, args, out);
    case G_REBUILD_FROM_TYPE: return rebuild_from_type(vm, args, out, depth);
    case G_REBUILD_UNSUPPORTED:
        return pk_unsupported(vm,
                              "%s: this kind of tensor (sparse, quantized, nested, meta, "
                              "subclass wrapper or numpy-backed) is not supported",
                              name);
    case G_COMPLEX: return pk_unsupported(vm, "%s: complex numbers are not supported", name);
    case G_RECONSTRUCTOR: { /* copyreg._reconstructor(cls, base, state): protocol 0/1 objects */
        const pt_value *cls = nargs(args) == 3 ? arg(args, 0) : NULL;
        if (!cls || cls->kind != PTI_VALUE_GLOBAL)
            return pk_fail(vm, "copyreg._reconstructor expects (class, base, state)");
        if (classify(cls->u.s.data) != G_OTHER)
            return pk_unsupported(vm, "copyreg._reconstructor of '%s' is not supported",
                                  cls->u.s.data);
        if (!vm->o->allow_objects)
            return whole_object(vm, cls->u.s.data);
        return make_stub(vm, cls->u.s.data, NULL, NULL, out);
    }
    case G_OTHER:
        if (!vm->o->allow_objects)
            return not_allowed(vm, name);
        return make_stub(vm, name, args, NULL, out);
    case G_DENIED: return not_allowed(vm, name);
    default: return pk_unsupported(vm, "calling '%s' is not supported", name);
    }
}

bool pk_call(pk_vm *vm, const pt_value *func, const pt_value *args, pt_value **out)
{
    return call_depth(vm, func, args, out, 0);
}

bool pk_newobj(pk_vm *vm, const pt_value *cls, const pt_value *args, const pt_value *kwargs,
               pt_value **out)
{
    const char *name = cls->u.s.data;
    pk_gid id = classify(name);
    if (id == G_OTHER) {
        if (!vm->o->allow_objects)
            return whole_object(vm, name);
        return make_stub(vm, name, args, kwargs, out);
    }
    if (kwargs && kwargs->u.dict.len > 0)
        return pk_unsupported(vm, "%s of '%s' with keyword arguments is not supported",
                              pk_op_name(vm->op), name);
    switch (id) {
    case G_ODICT:
    case G_COUNTER: { /* cls.__new__ ignores the arguments; items follow */
        pt_value *d = pk_new_container(vm, PT_VALUE_DICT, PK_ODICT);
        *out = d;
        return d != NULL;
    }
    case G_SET:
    case G_FROZENSET: {
        pt_value *s = pk_new_container(vm, PT_VALUE_DICT, id == G_SET ? PK_SET : PK_FROZENSET);
        *out = s;
        return s != NULL;
    }
    case G_PARAMETER:
    case G_SIZE:
    case G_DEVICE:
    case G_BYTEARRAY:
    case G_COMPLEX: return pk_call(vm, cls, args, out); /* __new__ builds the whole value */
    default: return pk_unsupported(vm, "%s of '%s' is not supported", pk_op_name(vm->op), name);
    }
}

/* Merges a dict state into a stub (Python's inst.__dict__.update(state)). */
static bool merge_into_stub(pk_vm *vm, pt_value *stub, const pt_value *state)
{
    if (!pk_charge(vm, (uint64_t)state->u.dict.len))
        return false;
    for (int64_t k = 0; k < state->u.dict.len; k++) {
        const pti_dict_entry *e = &state->u.dict.entries[k];
        if (e->key->kind == PT_VALUE_STR && !strcmp(e->key->u.s.data, "__class__"))
            continue;
        if (!pk_dict_set(vm, stub, pt_value_retain(e->key), pt_value_retain(e->val)))
            return false;
    }
    return true;
}

/* Keeps a state_dict's _metadata ({prefix: {"version": int, ...}}) on the OrderedDict as
 * {prefix: version}: module loaders (BatchNorm's num_batches_tracked) need the version. A
 * fresh untracked dict of scalars, so it adds no cycle and no depth; entries of other shapes
 * are left out, as PyTorch takes them for absent. */
static bool keep_metadata(pk_vm *vm, pt_value *inst, const pt_value *dstate)
{
    const pt_value *md = pt_value_get_str_ref(dstate, "_metadata");
    if (pt_value_kind_of(md) != PT_VALUE_DICT)
        return true;
    if (!pk_charge(vm, (uint64_t)md->u.dict.len)) /* one memoized _metadata BUILT again and again */
        return false;
    pt_value *kept = pt_value_dict();
    if (!kept)
        return false;
    for (int64_t k = 0; k < md->u.dict.len; k++) {
        const pti_dict_entry *e = &md->u.dict.entries[k];
        const pt_value *ver = pt_value_kind_of(e->val) == PT_VALUE_DICT
                                  ? pt_value_get_str_ref(e->val, "version")
                                  : NULL;
        if (e->key->kind != PT_VALUE_STR || pt_value_kind_of(ver) != PT_VALUE_INT)
            continue;
        if (pt_value_dict_set_str(kept, e->key->u.s.data, pt_value_int(ver->u.i)) != PT_OK) {
            pt_value_free(kept);
            return false;
        }
    }
    pti_value_dict_set_meta(inst, kept);
    return true;
}

bool pk_build(pk_vm *vm, pt_value *inst, pt_value *state)
{
    pk_track *t = pk_tracked(vm, inst);
    uint32_t flags = t ? t->flags : 0;
    const pt_value *dstate = state, *slots = NULL;
    if (state->kind == PT_VALUE_TUPLE && state->u.seq.len == 2) { /* (state, slotstate) */
        dstate = state->u.seq.items[0];
        slots = state->u.seq.items[1];
    }
    bool dict_like = (dstate->kind == PT_VALUE_NONE || is_dict_plain(vm, dstate)) &&
                     (!slots || slots->kind == PT_VALUE_NONE || is_dict_plain(vm, slots));
    if (flags & PK_STUB) {
        if (!dict_like)
            return pk_dict_set_str(vm, inst, "__state__", pt_value_retain(state));
        if (dstate->kind == PT_VALUE_DICT && !merge_into_stub(vm, inst, dstate))
            return false;
        return !slots || slots->kind != PT_VALUE_DICT || merge_into_stub(vm, inst, slots);
    }
    if (flags & PK_ODICT) { /* attributes: only a state_dict's _metadata versions are kept */
        if (!dict_like)
            return pk_fail(vm, "the state of an OrderedDict is a %s, not a dict",
                           pt_value_kind_name(state->kind));
        return inst->kind != PT_VALUE_DICT || dstate->kind != PT_VALUE_DICT ||
               keep_metadata(vm, inst, dstate);
    }
    if (inst->kind == PT_VALUE_TENSOR) { /* Python attributes of a tensor: dropped */
        if (dict_like || (state->kind == PT_VALUE_TUPLE && state->u.seq.len == 0))
            return true;
        return pk_unsupported(vm,
                              "BUILD on a tensor with a %s state (legacy tensor "
                              "serialization) is not supported",
                              pt_value_kind_name(state->kind));
    }
    return pk_fail(vm, "cannot set the state of a %s", pt_value_kind_name(inst->kind));
}
