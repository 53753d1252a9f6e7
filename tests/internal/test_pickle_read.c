/* Tests of the restricted pickle VM (src/io/pickle_read.h). The fixtures come from Python's
 * own pickle (protocols 0-5) and torch 1.13's torch.save (tests/fixtures/gen_pickles.py): each
 * case's expected rendering was computed in Python in pt_value_to_string's format, and each
 * tensor's values and requires_grad flag were written by torch. Hand-made byte strings cover
 * the opcodes Python 3 no longer writes (STRING, text LONG) and the hostile inputs: code
 * execution attempts, deep nesting, reference cycles, "billion laughs" sharing, memo abuse,
 * huge lengths, truncation at every byte, bad operand types. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/pickle_read.h"
#include "testutil.h"

#ifndef PT_FIXTURES_DIR
#define PT_FIXTURES_DIR "tests/fixtures"
#endif
#define PK_DIR PT_FIXTURES_DIR "/pickle"

/* ---- the persistent_load callback: storages from NAME.s<key>, or zeros ------------------ */

typedef struct storage_ctx {
    const char *name; /* case name, or NULL: storages of zeros */
    int nstorages;
    char keys[32][32];
    pt_tensor *storages[32];
    int calls;
} storage_ctx;

static const struct {
    const char *cls;
    pt_dtype dt;
} storage_types[] = {
    {"torch.FloatStorage", PT_FLOAT32}, {"torch.DoubleStorage", PT_FLOAT64},
    {"torch.HalfStorage", PT_FLOAT16},  {"torch.BFloat16Storage", PT_BFLOAT16},
    {"torch.LongStorage", PT_INT64},    {"torch.IntStorage", PT_INT32},
    {"torch.ShortStorage", PT_INT16},   {"torch.CharStorage", PT_INT8},
    {"torch.ByteStorage", PT_UINT8},    {"torch.BoolStorage", PT_BOOL},
    {"torch.UntypedStorage", PT_UINT8},
};

static pt_value *load_storage(void *vctx, const pt_value *pid)
{
    storage_ctx *ctx = vctx;
    ctx->calls++;
    if (pt_value_len(pid) < 5 || !pt_value_is(pid, PT_VALUE_TUPLE))
        return pti_error_null(PT_ERR_FORMAT, "test: bad persistent id");
    const char *cls = pti_pickle_global_name(pt_value_item_ref(pid, 1));
    const char *key = pt_value_as_str(pt_value_item_ref(pid, 2), NULL);
    int64_t numel = -1;
    pt_value_as_int(pt_value_item_ref(pid, 4), &numel);
    if (!cls || !key || numel < 0 || strlen(key) >= 32)
        return pti_error_null(PT_ERR_FORMAT, "test: bad persistent id fields");
    int dt = -1;
    for (size_t k = 0; k < sizeof storage_types / sizeof *storage_types; k++)
        if (!strcmp(cls, storage_types[k].cls))
            dt = (int)storage_types[k].dt;
    if (dt < 0)
        return pti_error_null(PT_ERR_UNSUPPORTED, "test.pkl: unsupported storage type %s", cls);
    for (int i = 0; i < ctx->nstorages; i++)
        if (!strcmp(ctx->keys[i], key))
            return pt_value_tensor(ctx->storages[i]);
    if (ctx->nstorages == 32 || numel > 1 << 20)
        return pti_error_null(PT_ERR_FORMAT, "test: too many storages");
    pt_tensor *t;
    if (ctx->name) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.s%s", PK_DIR, ctx->name, key);
        size_t len = 0;
        uint8_t *raw = pt_test_read_file(path, &len);
        if (!raw || len != (size_t)numel * pt_dtype_size((pt_dtype)dt)) {
            free(raw);
            return pti_error_null(PT_ERR_FORMAT, "test: storage %s missing or wrong size", path);
        }
        t = pt_from_data(raw, 1, (int64_t[]){numel}, (pt_dtype)dt, pt_cpu());
        free(raw);
    } else {
        t = pt_zeros(1, (int64_t[]){numel}, (pt_dtype)dt, pt_cpu());
    }
    if (!t)
        return NULL;
    pt_keep(t);
    snprintf(ctx->keys[ctx->nstorages], 32, "%s", key);
    ctx->storages[ctx->nstorages++] = t;
    return pt_value_tensor(t);
}

static void storage_ctx_free(storage_ctx *ctx)
{
    for (int i = 0; i < ctx->nstorages; i++)
        pt_release(ctx->storages[i]);
    ctx->nstorages = 0;
}

static pt_value *unpickle(const void *data, size_t len, bool objects, storage_ctx *ctx)
{
    pti_unpickle_opts o = {
        .what = "test.pkl", .persistent_load = load_storage, .ctx = ctx, .allow_objects = objects};
    return pti_unpickle(data, len, &o, NULL);
}

/* Unpickles bytes given as a C string literal (sizeof - 1 bytes). */
#define UNPICKLE(lit, objects, ctx) unpickle((lit), sizeof(lit) - 1, (objects), (ctx))

/* ---- the Python / torch fixtures ------------------------------------------------------------ */

static void collect_tensors(const pt_value *v, pt_tensor **out, int *n)
{
    switch (pt_value_kind_of(v)) {
    case PT_VALUE_TENSOR:
        if (*n < 64)
            out[(*n)++] = pt_value_tensor_ref(v);
        break;
    case PT_VALUE_LIST:
    case PT_VALUE_TUPLE:
        for (int64_t i = 0; i < pt_value_len(v); i++)
            collect_tensors(pt_value_item_ref(v, i), out, n);
        break;
    case PT_VALUE_DICT:
        for (int64_t i = 0; i < pt_value_len(v); i++) {
            collect_tensors(pt_value_key_ref(v, i), out, n);
            collect_tensors(pt_value_item_ref(v, i), out, n);
        }
        break;
    default: break;
    }
}

/* Checks one case; returns the number of failures (printed). */
static int check_case(const char *name, const char *opts)
{
    char path[512];
    size_t len = 0, tlen = 0;
    snprintf(path, sizeof path, "%s/%s.pkl", PK_DIR, name);
    uint8_t *data = pt_test_read_file(path, &len);
    snprintf(path, sizeof path, "%s/%s.txt", PK_DIR, name);
    char *txt = (char *)pt_test_read_file(path, &tlen);
    if (!data || !txt) {
        printf("%s: fixture files missing\n", name);
        free(data);
        free(txt);
        return 1;
    }
    storage_ctx ctx = {.name = strstr(opts, "torch") ? name : NULL};
    bool objects = strstr(opts, "objects") != NULL;
    pt_clear_error();
    pt_value *v = unpickle(data, len, objects, &ctx);
    int fails = 0;
    char *line = strtok(txt, "\n");
    if (!strncmp(line, "ERROR ", 6)) {
        char *status = line + 6, *sub = strchr(status, ' ');
        *sub++ = '\0';
        if (v || strcmp(pt_status_name(pt_last_status()), status) ||
            !strstr(pt_last_error(), sub)) {
            printf("%s: expected %s '%s', got %s: %s\n", name, status, sub,
                   v ? "a value" : pt_status_name(pt_last_status()), pt_last_error());
            fails++;
        } else if (!strstr(pt_last_error(), "test.pkl")) {
            printf("%s: the message does not name the file: %s\n", name, pt_last_error());
            fails++;
        }
    } else if (!v) {
        printf("%s: failed: %s\n", name, pt_last_error());
        fails++;
    } else {
        char *s = pt_value_to_string(v, 0);
        if (!s || strcmp(s, line)) {
            printf("%s:\n  expected %s\n  got      %s\n", name, line, s ? s : "(null)");
            fails++;
        }
        free(s);
        pt_tensor *ts[64];
        int nt = 0;
        collect_tensors(v, ts, &nt);
        for (int i = 0; i < nt && !fails; i++) {
            char *vals = strtok(NULL, "\n");
            if (!vals) {
                printf("%s: more tensors than expected\n", name);
                fails++;
                break;
            }
            char *end;
            long rg = strtol(vals, &end, 10);
            if (rg != (long)pt_requires_grad(ts[i])) {
                printf("%s: tensor %d requires_grad %d, expected %ld\n", name, i,
                       (int)pt_requires_grad(ts[i]), rg);
                fails++;
            }
            for (int64_t k = 0; k < pt_numel(ts[i]); k++) {
                double e = strtod(end, &end), a = pt_test_get(ts[i], k);
                if (!(a == e || (isnan(a) && isnan(e)))) {
                    printf("%s: tensor %d element %lld is %.17g, expected %.17g\n", name, i,
                           (long long)k, a, e);
                    fails++;
                    break;
                }
            }
        }
        if (!fails && strtok(NULL, "\n")) {
            printf("%s: fewer tensors than expected\n", name);
            fails++;
        }
    }
    pt_value_free(v);
    storage_ctx_free(&ctx);
    free(data);
    free(txt);
    return fails;
}

static void test_python_and_torch_fixtures(void **state)
{
    (void)state;
    size_t len;
    char *index = (char *)pt_test_read_file(PK_DIR "/index.txt", &len);
    assert_non_null(index);
    int cases = 0, fails = 0;
    char *save = NULL;
    for (char *line = strtok_r(index, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[128], opts[64];
        assert_int_equal(sscanf(line, "%127s %63s", name, opts), 2);
        fails += check_case(name, opts);
        cases++;
    }
    free(index);
    printf("%d pickle fixtures checked\n", cases);
    assert_true(cases >= 60);
    assert_int_equal(fails, 0);
}

/* Shared storages stay shared; views keep their geometry. */
static void test_torch_views_share_storage(void **state)
{
    (void)state;
    size_t len;
    uint8_t *data = pt_test_read_file(PK_DIR "/torch_views.pkl", &len);
    assert_non_null(data);
    storage_ctx ctx = {.name = "torch_views"};
    pt_value *v = unpickle(data, len, false, &ctx);
    assert_non_null(v);
    assert_int_equal(ctx.calls, 6);     /* one persistent id per tensor ... */
    assert_int_equal(ctx.nstorages, 2); /* ... over two storages */
    pt_tensor *base = pt_value_tensor_ref(pt_value_get_str_ref(v, "base"));
    pt_tensor *t = pt_value_tensor_ref(pt_value_get_str_ref(v, "t"));
    pt_tensor *sl = pt_value_tensor_ref(pt_value_get_str_ref(v, "slice"));
    assert_true(pt_shares_storage(base, t) && pt_shares_storage(base, sl));
    assert_int_equal(pt_stride(t)[0], 1);
    assert_int_equal(pt_stride(t)[1], 4);
    assert_int_equal(pt_storage_offset(sl), 5);
    pt_value_free(v);
    storage_ctx_free(&ctx);
    free(data);
}

/* ---- hand-made pickles ------------------------------------------------------------------------
 */

static void assert_repr_of(const pt_value *v, const char *expected)
{
    if (!v)
        printf("failed: %s\n", pt_last_error());
    assert_non_null(v);
    char *s = pt_value_to_string(v, 0);
    assert_non_null(s);
    assert_string_equal(s, expected);
    free(s);
}

static void test_old_opcodes(void **state)
{
    (void)state;
    storage_ctx ctx = {0};
    pt_value *v = UNPICKLE("(S'abc'\nS\"it's\"\nS'\\xff\\n\\101'\nI01\nI00\nL123L\n"
                           "L-9223372036854775808\nF2.5\nV\\u20ac\\xe9x\nI-7\nt.",
                           false, &ctx);
    assert_repr_of(v,
                   "('abc', \"it's\", b'\\xff\\nA', True, False, 123, -9223372036854775808, 2.5, "
                   "'\xe2\x82\xac\\\\xe9x', -7)");
    pt_value_free(v);
    /* BINSTRING / SHORT_BINSTRING: bytes when not UTF-8 */
    v = UNPICKLE("\x80\x02U\x02\xc3\xa9T\x01\x00\x00\x00\xff\x86.", false, &ctx);
    assert_repr_of(v, "('\xc3\xa9', b'\\xff')");
    pt_value_free(v);
    /* DUP, POP, POP_MARK, MEMOIZE, FRAME, LONG4, BYTEARRAY8, EMPTY_SET/ADDITEMS, frozenset */
    v = UNPICKLE("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00"
                 "K\x01\x32\x30(K\x05\x31\x8b\x02\x00\x00\x00\xff\x7f\x94"
                 "\x96\x02\x00\x00\x00\x00\x00\x00\x00"
                 "ab"
                 "\x8f(K\x02K\x02K\x03\x90(K\x09\x91h\x00\x86\x86\x86\x86\x86.",
                 false, &ctx);
    assert_repr_of(v, "(1, (32767, (b'ab', ([2, 3], ([9], 32767)))))");
    pt_value_free(v);
    /* NEWOBJ_EX of a stub with keyword arguments, SETITEMS and APPENDS on stubs */
    v = UNPICKLE("\x80\x04\x8c\x03pkg\x8c\x03Obj\x93)}\x8c\x01kK\x01s\x92"
                 "(K\x01K\x02u}\x8c\x01"
                 "aK\x03sb.",
                 true, &ctx);
    assert_repr_of(v,
                   "{'__class__': 'pkg.Obj', '__kwargs__': {'k': 1}, '__items__': {1: 2}, 'a': 3}");
    pt_value_free(v);
    v = UNPICKLE("\x80\x02"
                 "cm\nL\n)\x81(K\x07K\x08"
                 "eK\x09"
                 "a.",
                 true, &ctx);
    assert_repr_of(v, "{'__class__': 'm.L', '__items__': [7, 8, 9]}");
    pt_value_free(v);
    assert_pt_error(UNPICKLE("\x80\x02"
                             "cm\nL\n)\x81K\x07"
                             "aK\x01K\x02s.",
                             true, &ctx),
                    PT_ERR_FORMAT, "both list and dict items");
    /* BUILD with (state, slotstate) on a stub; a non-dict state kept as __state__ */
    v = UNPICKLE("\x80\x02(cm\nC\n)\x81N}X\x01\x00\x00\x00sK\x02s\x86"
                 "bcm\nD\n)\x81]bl.",
                 true, &ctx);
    assert_repr_of(v, "[{'__class__': 'm.C', 's': 2}, {'__class__': 'm.D', '__state__': []}]");
    pt_value_free(v);
    /* a global left in the result becomes its name (dtypes, storage classes) */
    v = UNPICKLE("ctorch\nfloat16\nctorch\nFloatStorage\n\x86.", false, &ctx);
    assert_repr_of(v, "('torch.float16', 'torch.FloatStorage')");
    pt_value_free(v);
    assert_pt_error(UNPICKLE("cargparse\nNamespace\n.", false, &ctx), PT_ERR_UNSUPPORTED,
                    "global 'argparse.Namespace' is not allowed");
    v = UNPICKLE("cargparse\nNamespace\n.", true, &ctx);
    assert_repr_of(v, "'argparse.Namespace'");
    pt_value_free(v);
    /* protocol 0 copyreg reconstruction of a class */
    assert_pt_error(UNPICKLE("ccopy_reg\n_reconstructor\n(c__main__\nP\nc__builtin__\nobject\nNtR.",
                             false, &ctx),
                    PT_ERR_UNSUPPORTED, "whole pickled Python object");
    v = UNPICKLE("ccopy_reg\n_reconstructor\n(c__main__\nP\nc__builtin__\nobject\nNtR"
                 "(dS'x'\nI1\nsb.",
                 true, &ctx);
    assert_repr_of(v, "{'__class__': '__main__.P', 'x': 1}");
    pt_value_free(v);
    /* two pickles back to back: *consumed says where the next starts */
    const uint8_t two[] = "\x80\x02K\x01.\x80\x02K\x02.";
    size_t used = 0;
    pti_unpickle_opts o = {.what = "two"};
    v = pti_unpickle(two, sizeof two - 1, &o, &used);
    assert_repr_of(v, "1");
    assert_int_equal(used, 5);
    pt_value_free(v);
    v = pti_unpickle(two + used, sizeof two - 1 - used, &o, &used);
    assert_repr_of(v, "2");
    pt_value_free(v);
}

static void test_tensor_rebuilds(void **state)
{
    (void)state;
    storage_ctx ctx = {0};
#define PID_F4                                                                                     \
    "(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00"                             \
    "0X\x03\x00\x00\x00"                                                                           \
    "cpuK\x04tQ"
#define PID_U8                                                                                     \
    "(X\x07\x00\x00\x00storagectorch\nUntypedStorage\nX\x01\x00\x00\x00"                           \
    "1X\x03\x00\x00\x00"                                                                           \
    "cpuK\x10tQ"
#define HOOKS "ccollections\nOrderedDict\n)R"
    pt_value *v = UNPICKLE("\x80\x02"
                           "ctorch._utils\n_rebuild_tensor_v2\n(" PID_F4
                           "K\x01K\x03\x85K\x01\x85\x88" HOOKS "tR.",
                           false, &ctx);
    assert_repr_of(v, "tensor(float32, [3])");
    assert_true(pt_requires_grad(pt_value_tensor_ref(v)));
    assert_int_equal(pt_storage_offset(pt_value_tensor_ref(v)), 1);
    pt_value_free(v);
    /* out of the storage: size 5 over 4 elements; offset; overflowing strides */
    assert_pt_error(UNPICKLE("\x80\x02"
                             "ctorch._utils\n_rebuild_tensor_v2\n(" PID_F4
                             "K\x00K\x05\x85K\x01\x85\x89" HOOKS "tR.",
                             false, &ctx),
                    PT_ERR_FORMAT, "storage holds 4 float32 elements");
    assert_pt_error(UNPICKLE("\x80\x02"
                             "ctorch._utils\n_rebuild_tensor\n(" PID_F4
                             "K\x04K\x01\x85K\x01\x85tR.",
                             false, &ctx),
                    PT_ERR_FORMAT, "_rebuild_tensor: size [1]");
    assert_pt_error(UNPICKLE("\x80\x02"
                             "ctorch._utils\n_rebuild_tensor\n(" PID_F4
                             "K\x00K\x03K\x02\x86\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40K\x01\x86"
                             "tR.",
                             false, &ctx),
                    PT_ERR_FORMAT, "overflows");
    /* v3: 16 bytes viewed as 4 float32 / 2 float64; too many for the bytes */
    v = UNPICKLE("\x80\x02"
                 "ctorch._utils\n_rebuild_tensor_v3\n(" PID_U8
                 "K\x00K\x02K\x02\x86K\x02K\x01\x86\x89" HOOKS "ctorch\nfloat32\ntR.",
                 false, &ctx);
    assert_repr_of(v, "tensor(float32, [2, 2])");
    pt_value_free(v);
    assert_pt_error(UNPICKLE("\x80\x02"
                             "ctorch._utils\n_rebuild_tensor_v3\n(" PID_U8
                             "K\x00K\x03\x85K\x01\x85\x89" HOOKS "ctorch\nfloat64\ntR.",
                             false, &ctx),
                    PT_ERR_FORMAT, "storage holds 2 float64 elements");
    assert_pt_error(UNPICKLE("\x80\x02"
                             "ctorch._utils\n_rebuild_tensor_v3\n(" PID_U8
                             "K\x00K\x01\x85K\x01\x85\x89" HOOKS "ctorch\ncomplex64\ntR.",
                             false, &ctx),
                    PT_ERR_DTYPE, "torch.complex64");
    /* hooks, conj metadata, requires_grad on ints */
    assert_pt_error(UNPICKLE("\x80\x02"
                             "ctorch._utils\n_rebuild_tensor_v2\n(" PID_F4
                             "K\x00K\x01\x85K\x01\x85\x89}K\x01K\x02stR.",
                             false, &ctx),
                    PT_ERR_UNSUPPORTED, "backward hooks");
    assert_pt_error(UNPICKLE("\x80\x02"
                             "ctorch._utils\n_rebuild_tensor_v2\n(" PID_F4
                             "K\x00K\x01\x85K\x01\x85\x89" HOOKS "}X\x04\x00\x00\x00"
                             "conj\x88stR.",
                             false, &ctx),
                    PT_ERR_UNSUPPORTED, "'conj' bit");
    assert_pt_error(UNPICKLE("\x80\x02"
                             "ctorch._utils\n_rebuild_tensor_v3\n(" PID_U8
                             "K\x00K\x01\x85K\x01\x85\x88" HOOKS "ctorch\nint32\ntR.",
                             false, &ctx),
                    PT_ERR_FORMAT, "requires_grad on a int32 tensor");
    /* unsupported tensor kinds are named */
    assert_pt_error(UNPICKLE("ctorch._utils\n_rebuild_sparse_tensor\n)R.", false, &ctx),
                    PT_ERR_UNSUPPORTED, "_rebuild_sparse_tensor");
    assert_pt_error(UNPICKLE("ctorch._utils\n_rebuild_qtensor\n)R.", false, &ctx),
                    PT_ERR_UNSUPPORTED, "_rebuild_qtensor");
    /* Parameter via NEWOBJ, _rebuild_from_type_v2 around a rebuild */
    v = UNPICKLE("\x80\x02"
                 "ctorch.nn.parameter\nParameter\nctorch._utils\n_rebuild_tensor\n(" PID_F4
                 "K\x00K\x04\x85K\x01\x85tR\x85\x81.",
                 false, &ctx);
    assert_repr_of(v, "tensor(float32, [4])");
    assert_true(pt_requires_grad(pt_value_tensor_ref(v)));
    pt_value_free(v);
    v = UNPICKLE("\x80\x02"
                 "ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n_rebuild_tensor\n"
                 "ctorch\nTensor\n(" PID_F4 "K\x00K\x02\x85K\x01\x85t}X\x01\x00\x00\x00"
                 "aK\x01stR.",
                 false, &ctx);
    assert_repr_of(v, "tensor(float32, [2])");
    pt_value_free(v);
    v = UNPICKLE("\x80\x02"
                 "ctorch._utils\n_rebuild_parameter_with_state\n(ctorch._utils\n_rebuild_tensor\n"
                 "(" PID_F4 "K\x00K\x02\x85K\x01\x85tR\x89" HOOKS "}X\x01\x00\x00\x00"
                 "aK\x01stR.",
                 false, &ctx);
    assert_repr_of(v, "tensor(float32, [2])");
    assert_false(pt_requires_grad(pt_value_tensor_ref(v)));
    pt_value_free(v);
    /* nested rebuild_from_type calls are bounded */
    assert_pt_error(UNPICKLE("\x80\x02"
                             "ctorch._tensor\n_rebuild_from_type_v2\nq\x01"
                             "ctorch\nTensor\nq\x02"
                             "0"
                             "(h\x01h\x02(h\x01h\x02(h\x01h\x02(h\x01h\x02(h\x01h\x02(h\x01h\x02)"
                             "}t}t}t}t}t}tR.",
                             false, &ctx),
                    PT_ERR_FORMAT, "nested more than 4 deep");
    assert_pt_error(UNPICKLE("\x80\x02"
                             "ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n"
                             "_rebuild_tensor\ncmy\nT\n)}tR.",
                             false, &ctx),
                    PT_ERR_UNSUPPORTED, "tensor subclass 'my.T'");
    /* torch.device / Size / dtype values, _codecs.encode, sets */
    v = UNPICKLE("\x80\x02(ctorch\ndevice\nX\x04\x00\x00\x00"
                 "cudaK\x01\x86Rctorch\nSize\n"
                 "K\x02K\x03\x86\x85Rc_codecs\nencode\nX\x02\x00\x00\x00\xc3\xbfX\x06\x00\x00\x00"
                 "latin1\x86Rc__builtin__\nset\n]K\x01"
                 "aK\x01"
                 "a\x85Rt.",
                 false, &ctx);
    assert_repr_of(v, "('cuda:1', (2, 3), b'\\xff', [1])");
    pt_value_free(v);
    /* no persistent_load: refused */
    pti_unpickle_opts o = {.what = "nopid"};
    assert_pt_error(pti_unpickle((const uint8_t *)"K\x01Q.", 4, &o, NULL), PT_ERR_UNSUPPORTED,
                    "nopid: pickle: BINPERSID: persistent ids");
    storage_ctx_free(&ctx);
#undef PID_F4
#undef PID_U8
#undef HOOKS
}

static void test_code_execution_refused(void **state)
{
    (void)state;
    storage_ctx ctx = {0};
    assert_pt_error(UNPICKLE("cos\nsystem\n(S'echo hi'\ntR.", false, &ctx), PT_ERR_UNSUPPORTED,
                    "test.pkl: pickle: global 'os.system' is not allowed (a checkpoint may only "
                    "refer to PyTorch's tensor types; nothing was executed)");
    assert_pt_error(UNPICKLE("\x80\x04\x8c\x02os\x8c\x06system\x93.", true, &ctx),
                    PT_ERR_UNSUPPORTED, "global 'os.system' is not allowed");
    assert_pt_error(UNPICKLE("\x80\x04\x8c\x08"
                             "builtins\x8c\x04"
                             "exec\x93.",
                             true, &ctx),
                    PT_ERR_UNSUPPORTED, "'builtins.exec' is not allowed");
    assert_pt_error(UNPICKLE("csubprocess\nPopen\n.", true, &ctx), PT_ERR_UNSUPPORTED,
                    "subprocess.Popen");
    /* an unknown callable: refused when called, a stub with allow_objects */
    assert_pt_error(UNPICKLE("cnumpy.core.multiarray\n_reconstruct\n)R.", false, &ctx),
                    PT_ERR_UNSUPPORTED, "'numpy.core.multiarray._reconstruct' is not allowed");
    pt_value *v = UNPICKLE("cnumpy\nf\nK\x01\x85R.", true, &ctx);
    assert_repr_of(v, "{'__class__': 'numpy.f', '__args__': (1,)}");
    pt_value_free(v);
    /* STACK_GLOBAL with non-str operands, REDUCE of a non-global */
    assert_pt_error(UNPICKLE("\x80\x04K\x01K\x02\x93.", false, &ctx), PT_ERR_FORMAT,
                    "STACK_GLOBAL: module and name must be str");
    assert_pt_error(UNPICKLE("])R.", false, &ctx), PT_ERR_FORMAT, "REDUCE: calls a list");
    storage_ctx_free(&ctx);
}

static void test_refused_opcodes_and_operands(void **state)
{
    (void)state;
    storage_ctx ctx = {0};
    struct {
        const char *data;
        size_t len;
        pt_status st;
        const char *msg;
    } cases[] = {
#define C(lit, st, msg) {lit, sizeof(lit) - 1, st, msg}
        C("\x82\x01.", PT_ERR_UNSUPPORTED, "EXT1"),
        C("\x84\x01\x00\x00\x00.", PT_ERR_UNSUPPORTED, "EXT4"),
        C("(i__main__\nX\n.", PT_ERR_UNSUPPORTED, "INST"),
        C("(cm\nX\no.", PT_ERR_UNSUPPORTED, "OBJ"),
        C("\x80\x05\x97.", PT_ERR_UNSUPPORTED, "NEXT_BUFFER"),
        C("\x80\x05\x98.", PT_ERR_UNSUPPORTED, "READONLY_BUFFER"),
        C("\xff.", PT_ERR_FORMAT, "unknown opcode 0xff at byte 0"),
        C("\x80\x06N.", PT_ERR_FORMAT, "protocol 6"),
        C("a.", PT_ERR_FORMAT, "APPEND: stack underflow"),
        C("K\x01t.", PT_ERR_FORMAT, "TUPLE: no MARK on the stack at byte 2"),
        C("}K\x01"
          "a.",
          PT_ERR_FORMAT, "APPEND: appends to a dict, not a list"),
        C(")K\x01"
          "a.",
          PT_ERR_FORMAT, "appends to a tuple"),
        C("]K\x01K\x02s.", PT_ERR_FORMAT, "SETITEM: sets items of a list"),
        C("(]K\x02"
          "d.",
          PT_ERR_FORMAT, "DICT: unhashable dict key"),
        C("(K\x01"
          "d.",
          PT_ERR_FORMAT, "odd number"),
        C("}]K\x01s.", PT_ERR_FORMAT, "unhashable dict key or set item (a list)"),
        C("ccollections\nOrderedDict\n]R.", PT_ERR_FORMAT, "REDUCE: the arguments are a list"),
        C("(K\x01\x90.", PT_ERR_FORMAT, "ADDITEMS: no set below"),
        C("](K\x01\x90.", PT_ERR_FORMAT, "adds items to a list, not a set"),
        C("K\x01(.", PT_ERR_FORMAT, "STOP: stack underflow"),
        C("\x80\x02N\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", PT_ERR_FORMAT,
          "LONG1: integer too large"),
        C("\x80\x02N\x8a\x09\xff\xff\xff\xff\xff\xff\xff\x7f\xff.", PT_ERR_FORMAT,
          "integer too large"),
        C("L99999999999999999999L\n.", PT_ERR_FORMAT, "LONG: integer too large"),
        C("I12x\n.", PT_ERR_FORMAT, "malformed integer"),
        C("Fabc\n.", PT_ERR_FORMAT, "malformed float"),
        C("S'abc\n.", PT_ERR_FORMAT, "quoted"),
        C("X\x02\x00\x00\x00\xc3(.", PT_ERR_FORMAT, "invalid UTF-8"),
        C("V\\u12\n.", PT_ERR_FORMAT, "bad \\u escape"),
        C("\x80\x02N\x8d\x00\xff\xff\xff\xff\xff\xff\xff"
          "ab.",
          PT_ERR_FORMAT, "BINUNICODE8: truncated: needs 18446744073709551360 bytes, 3 left"),
        C("\x80\x02NX\xff\xff\xff\xff"
          "ab.",
          PT_ERR_FORMAT, "BINUNICODE: truncated"),
        C("\x80\x02N\x8e\x00\x00\x00\x00\x00\x00\x00\x80.", PT_ERR_FORMAT, "BINBYTES8: truncated"),
        C("\x80\x02NT\xff\xff\xff\xff.", PT_ERR_FORMAT, "negative length"),
        C("\x80\x02N\x8b\xff\xff\xff\x7f.", PT_ERR_FORMAT, "LONG4: truncated"),
        C("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xffN.", PT_ERR_FORMAT, "FRAME: truncated"),
        C("\x80\x02Nr\xff\xff\xff\x7f.", PT_ERR_FORMAT,
          "LONG_BINPUT: memo index 2147483647 is impossible in a 9-byte pickle"),
        C("\x80\x02h\x05.", PT_ERR_FORMAT, "BINGET: memo index 5 was never stored at byte 2"),
        C("Np-1\n.", PT_ERR_FORMAT, "negative memo index"),
        C("g7\n.", PT_ERR_FORMAT, "GET: memo index 7 was never stored"),
        C("q\x00.", PT_ERR_FORMAT, "nothing on the stack"),
        C("\x80\x02N", PT_ERR_FORMAT, "without a STOP"),
        C("", PT_ERR_FORMAT, "without a STOP"),
#undef C
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pt_clear_error();
        pt_value *v = unpickle(cases[i].data, cases[i].len, false, &ctx);
        if (v || pt_last_status() != cases[i].st || !strstr(pt_last_error(), cases[i].msg)) {
            printf("case %zu: expected %s '%s', got %s: %s\n", i, pt_status_name(cases[i].st),
                   cases[i].msg, v ? "a value" : pt_status_name(pt_last_status()), pt_last_error());
            pt_value_free(v);
            fail();
        }
    }
    storage_ctx_free(&ctx);
}

/* A pickle of `n` copies of `unit` between prefix and suffix. */
static uint8_t *repeat(const char *prefix, const char *unit, size_t n, const char *mid,
                       const char *unit2, size_t n2, const char *suffix, size_t *len)
{
    size_t lp = strlen(prefix), lu = strlen(unit), lm = strlen(mid), lu2 = strlen(unit2),
           ls = strlen(suffix);
    *len = lp + lu * n + lm + lu2 * n2 + ls;
    uint8_t *b = malloc(*len), *p = b;
    memcpy(p, prefix, lp), p += lp;
    for (size_t k = 0; k < n; k++)
        memcpy(p, unit, lu), p += lu;
    memcpy(p, mid, lm), p += lm;
    for (size_t k = 0; k < n2; k++)
        memcpy(p, unit2, lu2), p += lu2;
    memcpy(p, suffix, ls);
    return b;
}

/* Unpickles b, which must fail for nesting in opcode `op`; returns the "at byte N" offset. */
static size_t refused_at(const uint8_t *b, size_t len, storage_ctx *ctx, const char *op)
{
    assert_null(unpickle(b, len, false, ctx));
    assert_int_equal(pt_last_status(), PT_ERR_FORMAT);
    const char *msg = pt_last_error();
    char want[64];
    snprintf(want, sizeof want, ": %s: containers nested deeper than 1000", op);
    if (!strstr(msg, want))
        fail_msg("error \"%s\" lacks \"%s\"", msg, want);
    const char *at = strstr(msg, " at byte ");
    assert_non_null(at);
    return (size_t)strtoull(at + 9, NULL, 10);
}

/* 8 MB of nested containers fail at the level past the limit, not at STOP: the depth is
 * tracked as containers are filled, so millions of them are never built first. Before, the
 * error named STOP at the last byte. */
static void test_nesting_refused_when_reached(void **state)
{
    (void)state;
    storage_ctx ctx = {0};
    size_t len;
    const size_t mb8 = (size_t)8 << 20;
    /* EMPTY_TUPLE then TUPLE1 x 8M: the k-th TUPLE1 (byte k) makes depth k + 1 */
    uint8_t *b = repeat(")", "\x85", mb8, "", "", 0, ".", &len);
    assert_int_equal(refused_at(b, len, &ctx, "TUPLE1"), 1000);
    free(b);
    /* MARK key ... EMPTY_DICT DICT ...: the 1000th DICT makes depth 1001 */
    /* (the two layouts that open every container before nesting them cost memory per level
     * until the error: 1 MB of them keeps the test light) */
    size_t n = ((size_t)1 << 20) / 4;
    b = repeat("", "(K\x01", n, "}", "d", n, ".", &len);
    assert_int_equal(refused_at(b, len, &ctx, "DICT"), 3 * n + 1 + 999);
    free(b);
    /* EMPTY_DICT key EMPTY_DICT ... SETITEM ...: innermost first, the 1000th SETITEM */
    n = ((size_t)1 << 20) / 3;
    b = repeat("}", "K\x01}", n, "", "s", n, ".", &len);
    assert_int_equal(refused_at(b, len, &ctx, "SETITEM"), 1 + 3 * n + 999);
    free(b);
    /* MARK ... EMPTY_LIST LIST ...: the 1000th LIST */
    b = repeat("", "(", mb8 / 2, "]", "l", mb8 / 2, ".", &len);
    assert_int_equal(refused_at(b, len, &ctx, "LIST"), mb8 / 2 + 1 + 999);
    free(b);
    /* EMPTY_LIST x n then APPEND x n: the 1000th APPEND */
    b = repeat("", "]", 100000, "", "a", 99999, ".", &len);
    assert_int_equal(refused_at(b, len, &ctx, "APPEND"), 100000 + 999);
    free(b);

    /* large flat containers are not refused: 1e5 items in a list, a tuple and a dict */
    const char *flat[][3] = {
        {"](", "K\x01", "e."}, {"(", "K\x01", "t."}, {"}(", "K\x01K\x02", "u."}};
    for (int f = 0; f < 3; f++) {
        b = repeat(flat[f][0], flat[f][1], 100000, "", "", 0, flat[f][2], &len);
        pt_value *v = unpickle(b, len, false, &ctx);
        assert_non_null(v);
        int64_t want = f == 2 ? 1 : 100000; /* the dict's keys are all 1 */
        assert_int_equal(pt_value_len(v), want);
        pt_value_free(v);
        free(b);
    }
    /* 1000 levels built bottom-up are fine */
    b = repeat(")", "\x85", 999, "", "", 0, ".", &len);
    pt_value *v = unpickle(b, len, false, &ctx);
    assert_non_null(v);
    pt_value_free(v);
    free(b);
}

static void test_nesting_cycles_and_sharing(void **state)
{
    (void)state;
    storage_ctx ctx = {0};
    size_t len;
    uint8_t *b = repeat("\x80\x02", "(", 100000, "", "", 0, ".", &len);
    assert_pt_error(unpickle(b, len, false, &ctx), PT_ERR_FORMAT, "STOP: stack underflow");
    free(b);
    b = repeat("\x80\x02", "]", 100000, "", "a", 99999, ".", &len);
    assert_pt_error(unpickle(b, len, false, &ctx), PT_ERR_FORMAT, "nested deeper than 1000");
    free(b);
    b = repeat("", "(", 100000, "", "l", 100000, ".", &len);
    assert_pt_error(unpickle(b, len, false, &ctx), PT_ERR_FORMAT, "nested deeper than 1000");
    free(b);
    b = repeat("", "(", 100000, "", "t", 100000, ".", &len); /* tuples too */
    assert_pt_error(unpickle(b, len, false, &ctx), PT_ERR_FORMAT, "nested deeper than 1000");
    free(b);
    b = repeat("}", "K\x01}", 50000, "", "s", 50000, ".", &len); /* dicts */
    assert_pt_error(unpickle(b, len, false, &ctx), PT_ERR_FORMAT, "nested deeper than 1000");
    free(b);
    /* 1000 levels are fine */
    b = repeat("", "]", 1000, "", "a", 999, ".", &len);
    pt_value *v = unpickle(b, len, false, &ctx);
    assert_non_null(v);
    pt_value_free(v);
    free(b);

    /* cycles: direct, through another list, through a dict, in garbage, via a stub */
    assert_pt_error(UNPICKLE("\x80\x02]q\x00h\x00"
                             "a.",
                             false, &ctx),
                    PT_ERR_FORMAT, "reference cycle");
    assert_pt_error(UNPICKLE("\x80\x02]q\x00]h\x00"
                             "aa.",
                             false, &ctx),
                    PT_ERR_FORMAT, "reference cycle");
    assert_pt_error(UNPICKLE("\x80\x02}q\x00K\x01h\x00s.", false, &ctx), PT_ERR_FORMAT,
                    "reference cycle");
    assert_pt_error(UNPICKLE("\x80\x02]q\x00](h\x00K\x01"
                             "ea0N.",
                             false, &ctx),
                    PT_ERR_FORMAT, "reference cycle");
    assert_pt_error(UNPICKLE("\x80\x02]q\x00h\x00\x85"
                             "a0N.",
                             false, &ctx),
                    PT_ERR_FORMAT, "reference cycle");
    assert_pt_error(UNPICKLE("\x80\x02"
                             "cm\nC\n)\x81q\x00}X\x01\x00\x00\x00sh\x00sb.",
                             true, &ctx),
                    PT_ERR_FORMAT, "reference cycle");
    /* a tuple in a list in the tuple's own memo slot, used as a dict key */
    assert_pt_error(UNPICKLE("\x80\x02}]q\x00h\x00\x85q\x01"
                             "aN.",
                             false, &ctx),
                    PT_ERR_FORMAT, "reference cycle");

    /* billion laughs: 60 doublings of one list */
    b = repeat("\x80\x02]", "2\x86", 60, "", "", 0, ".", &len);
    assert_pt_error(unpickle(b, len, false, &ctx), PT_ERR_FORMAT, "counting shared ones");
    free(b);
    b = repeat("\x80\x02]q\x01", "h\x01h\x01\x86q\x01", 60, "", "", 0, ".", &len);
    assert_pt_error(unpickle(b, len, false, &ctx), PT_ERR_FORMAT, "counting shared ones");
    free(b);
    /* fuzz finding: 16 triplings (43M nodes, under the absolute cap) took seconds to walk;
     * the cap also scales with the input's size */
    b = repeat("\x80\x02N", "22\x87", 16, "", "", 0, ".", &len);
    assert_pt_error(unpickle(b, len, false, &ctx), PT_ERR_FORMAT, "for 52 bytes of pickle");
    free(b);
    /* ... and as a dict key, where hashing would walk it */
    b = repeat("\x80\x02}N", "2\x86", 60, "", "", 0, "K\x01s.", &len);
    assert_pt_error(unpickle(b, len, false, &ctx), PT_ERR_FORMAT, "a tuple of more than");
    free(b);
    /* copying a memoized 2000-item dict 10000 times (OrderedDict(d)): quadratic, refused */
    b = malloc(200000);
    len = 0;
    const char head[] = "\x80\x02"
                        "ccollections\nOrderedDict\nq\x01}(";
    memcpy(b, head, sizeof head - 1);
    len += sizeof head - 1;
    for (int i = 0; i < 2000; i++) {
        b[len++] = 'M';
        b[len++] = (uint8_t)i;
        b[len++] = (uint8_t)(i >> 8);
        b[len++] = 'N';
    }
    memcpy(b + len,
           "u\x85q\x02"
           "00",
           6);
    len += 6;
    for (int i = 0; i < 10000; i++) {
        memcpy(b + len, "h\x01h\x02R0", 6);
        len += 6;
    }
    memcpy(b + len, "N.", 2);
    len += 2;
    assert_pt_error(unpickle(b, len, false, &ctx), PT_ERR_FORMAT, "values copied more than");
    free(b);
    /* sharing within the limits stays shared */
    v = UNPICKLE("\x80\x02]q\x00K\x01"
                 "ah\x00h\x00\x86.",
                 false, &ctx);
    assert_repr_of(v, "([1], [1])");
    assert_ptr_equal(pt_value_item_ref(v, 0), pt_value_item_ref(v, 1));
    pt_value_free(v);
    storage_ctx_free(&ctx);
}

/* Every proper prefix of real pickles fails cleanly with a truncation error. */
static void test_truncated_at_every_byte(void **state)
{
    (void)state;
    const char *names[] = {"torch_state_dict", "torch_optimizer",  "torch_module_objects",
                           "py_containers_p0", "py_containers_p4", "py_scalars_p5",
                           "py_strings_p1",    "py_torchvals_p0"};
    for (size_t n = 0; n < sizeof names / sizeof *names; n++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.pkl", PK_DIR, names[n]);
        size_t len;
        uint8_t *data = pt_test_read_file(path, &len);
        assert_non_null(data);
        storage_ctx ctx = {.name = strncmp(names[n], "torch", 5) ? NULL : names[n]};
        for (size_t cut = 0; cut < len; cut++) {
            uint8_t *copy = malloc(cut ? cut : 1); /* exact size, so ASan sees overreads */
            memcpy(copy, data, cut);
            pt_clear_error();
            pt_value *v = unpickle(copy, cut, true, &ctx);
            if (v || pt_last_status() != PT_ERR_FORMAT || !strstr(pt_last_error(), "truncated")) {
                printf("%s cut at %zu: %s\n", names[n], cut, pt_last_error());
                fail();
            }
            free(copy);
        }
        storage_ctx_free(&ctx);
        free(data);
    }
}

/* The legacy (pre-1.6) .pt format: pickles back to back, read with *consumed. */
static void test_legacy_format(void **state)
{
    (void)state;
    size_t len, tlen, used = 0, pos;
    uint8_t *data = pt_test_read_file(PK_DIR "/torch_legacy.pt", &len);
    char *txt = (char *)pt_test_read_file(PK_DIR "/torch_legacy.txt", &tlen);
    assert_non_null(data);
    assert_non_null(txt);
    *strchr(txt, '\n') = '\0';
    storage_ctx ctx = {0};
    pti_unpickle_opts o = {.what = "legacy.pt", .persistent_load = load_storage, .ctx = &ctx};
    /* the magic number 0x1950a86a20f9469cfc6c is beyond int64: callers compare its bytes */
    static const uint8_t magic[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";
    assert_pt_error(pti_unpickle(data, len, &o, &used), PT_ERR_FORMAT,
                    "legacy.pt: pickle: LONG1: integer too large");
    assert_memory_equal(data, magic, sizeof magic - 1);
    pos = sizeof magic - 1;
    pt_value *v = pti_unpickle(data + pos, len - pos, &o, &used);
    assert_repr_of(v, "1001");
    pt_value_free(v);
    pos += used;
    v = pti_unpickle(data + pos, len - pos, &o, &used);
    assert_non_null(v);
    assert_non_null(pt_value_get_str_ref(v, "little_endian"));
    pt_value_free(v);
    pos += used;
    v = pti_unpickle(data + pos, len - pos, &o, &used);
    assert_repr_of(v, txt);
    assert_int_equal(ctx.calls, 2); /* ('storage', cls, key, location, numel, None) */
    pt_value_free(v);
    pos += used;
    v = pti_unpickle(data + pos, len - pos, &o, &used);
    assert_non_null(v);
    assert_int_equal(pt_value_len(v), 2); /* the storage keys */
    assert_true(pt_value_is(pt_value_item_ref(v, 0), PT_VALUE_STR));
    pt_value_free(v);
    pos += used;
    assert_true(pos < len); /* the raw storages follow */
    storage_ctx_free(&ctx);
    free(data);
    free(txt);
}

static void test_global_name(void **state)
{
    (void)state;
    storage_ctx ctx = {0};
    assert_null(pti_pickle_global_name(NULL));
    pt_value *i = pt_value_int(1);
    assert_null(pti_pickle_global_name(i));
    pt_value_free(i);
    pt_value *v = UNPICKLE("\x80\x02(X\x07\x00\x00\x00storagectorch\nLongStorage\nX\x01\x00\x00"
                           "\x00"
                           "0X\x03\x00\x00\x00"
                           "cpuK\x02tQ.",
                           false, &ctx);
    assert_repr_of(v, "tensor(int64, [2])");
    assert_int_equal(ctx.calls, 1);
    pt_value_free(v);
    storage_ctx_free(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_python_and_torch_fixtures, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_torch_views_share_storage, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_old_opcodes, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_tensor_rebuilds, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_code_execution_refused, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_refused_opcodes_and_operands, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_nesting_cycles_and_sharing, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_nesting_refused_when_reached, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_truncated_at_every_byte, pt_test_setup,
                                        pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_legacy_format, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_global_name, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
