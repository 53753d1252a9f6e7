/* The public backend interface (prometorch/backend.h), exercised from outside the tree: this
 * file includes only the public headers (it is built without src/ on its include path) and
 * registers "toy", a backend of host memory with a handful of float32 kernels written here:
 * what tensors, basic ops and a Linear + MSE + SGD training step dispatch. It checks the
 * results against the same computations on the CPU, the per-device contexts (made once per
 * index on first use, passed to memory functions and kernels, destroyed on request), the
 * supports query, the errors for a missing kernel / an unsupported dtype (PT_ERR_UNSUPPORTED
 * naming op and device) and the refusal of a wrong ABI version or a bad description. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include <prometorch/backend.h>

/* ---- the toy backend ------------------------------------------------------------------------ */

#define TOY_DEVICES 2

/* Per-device context: which device it is for, and what went through it. */
typedef struct toy_ctx {
    int index;
    long allocs, frees, kernel_calls;
} toy_ctx;

static int contexts_made[TOY_DEVICES], contexts_destroyed;
static bool toy_ctx_mismatch; /* a kernel got a context of another device */

static int toy_count(void)
{
    return TOY_DEVICES;
}
static const char *toy_absent(void)
{
    return "the toy simulates two";
}
static pt_status toy_ctx_create(int index, void **ctx)
{
    toy_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return pt_backend_error(PT_ERR_OOM, "toy: no memory for the context of toy:%d", index);
    c->index = index;
    contexts_made[index]++;
    *ctx = c;
    return PT_OK;
}
static void toy_ctx_destroy(void *ctx)
{
    contexts_destroyed++;
    free(ctx);
}
static void *toy_alloc(void *ctx, size_t n)
{
    ((toy_ctx *)ctx)->allocs++;
    return malloc(n ? n : 1);
}
static void toy_free(void *ctx, void *p, size_t n)
{
    (void)n;
    ((toy_ctx *)ctx)->frees++;
    free(p);
}
static pt_status toy_copy(void *ctx, void *dst, const void *src, size_t n)
{
    (void)ctx;
    memmove(dst, src, n);
    return PT_OK;
}

/* The float at element `linear` (row-major) of an output of shape[ndim], read from t, which
 * broadcasts to that shape (dims aligned from the right; missing and size-1 dims repeat). */
static float *toy_at(const pt_tensor *t, const int64_t *shape, int ndim, int64_t linear)
{
    const int64_t *st = pt_stride(t), *ts = pt_shape(t);
    int lead = ndim - pt_ndim(t);
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t i = linear % shape[d];
        linear /= shape[d];
        if (d >= lead && ts[d - lead] != 1)
            off += i * st[d - lead];
    }
    return (float *)pt_device_data_ptr(t) + off;
}

/* Every kernel starts here: checks that it got its device's context and counts the call. */
static void toy_enter(const pt_kernel_call *c)
{
    toy_ctx *ctx = pt_call_context(c);
    if (!ctx || ctx->index != pt_call_device(c).index)
        toy_ctx_mismatch = true;
    else
        ctx->kernel_calls++;
}

/* copy (float32 -> float32 only: the supports() below refuses casts) and fill */
static pt_status toy_copy_kernel(const pt_kernel_call *c)
{
    toy_enter(c);
    pt_tensor *o = pt_call_output(c, 0);
    const pt_tensor *i = pt_call_input(c, 0);
    for (int64_t k = 0; k < pt_numel(o); k++)
        *toy_at(o, pt_shape(o), pt_ndim(o), k) = *toy_at(i, pt_shape(o), pt_ndim(o), k);
    return PT_OK;
}
static pt_status toy_fill(const pt_kernel_call *c)
{
    toy_enter(c);
    pt_tensor *o = pt_call_output(c, 0);
    for (int64_t k = 0; k < pt_numel(o); k++)
        *toy_at(o, pt_shape(o), pt_ndim(o), k) = (float)pt_call_scalar(c, 0);
    return PT_OK;
}

/* add: out = a + alpha * b; mul: out = a * b; div: out = a / b (true division only: scalar[0]
 * is the rounding mode). Inputs broadcastable to out's shape. */
typedef enum toy_binop { TOY_ADD, TOY_MUL, TOY_DIV } toy_binop;

static pt_status toy_binary(const pt_kernel_call *c, toy_binop op)
{
    toy_enter(c);
    if (op == TOY_DIV && pt_call_scalar(c, 0) != 0)
        return pt_backend_error(PT_ERR_UNSUPPORTED, "div on toy: only true division");
    pt_tensor *o = pt_call_output(c, 0);
    const pt_tensor *a = pt_call_input(c, 0), *b = pt_call_input(c, 1);
    float alpha = (float)pt_call_scalar(c, 0);
    const int64_t *sh = pt_shape(o);
    int nd = pt_ndim(o);
    for (int64_t k = 0; k < pt_numel(o); k++) {
        float x = *toy_at(a, sh, nd, k), y = *toy_at(b, sh, nd, k);
        *toy_at(o, sh, nd, k) = op == TOY_ADD ? x + alpha * y : op == TOY_MUL ? x * y : x / y;
    }
    return PT_OK;
}
static pt_status toy_add(const pt_kernel_call *c)
{
    return toy_binary(c, TOY_ADD);
}
static pt_status toy_mul(const pt_kernel_call *c)
{
    return toy_binary(c, TOY_MUL);
}
static pt_status toy_div(const pt_kernel_call *c)
{
    return toy_binary(c, TOY_DIV);
}

/* neg: out = -in (same shape) */
static pt_status toy_neg(const pt_kernel_call *c)
{
    toy_enter(c);
    pt_tensor *o = pt_call_output(c, 0);
    const pt_tensor *i = pt_call_input(c, 0);
    for (int64_t k = 0; k < pt_numel(o); k++)
        *toy_at(o, pt_shape(o), pt_ndim(o), k) = -*toy_at(i, pt_shape(o), pt_ndim(o), k);
    return PT_OK;
}

/* mm: out[M,N] = beta * out + alpha * A[M,K] @ B[K,N] (out is not read when beta is 0) */
static pt_status toy_mm(const pt_kernel_call *c)
{
    toy_enter(c);
    pt_tensor *o = pt_call_output(c, 0);
    const pt_tensor *a = pt_call_input(c, 0), *b = pt_call_input(c, 1);
    double alpha = pt_call_scalar(c, 0), beta = pt_call_scalar(c, 1);
    int64_t M = pt_shape(o)[0], N = pt_shape(o)[1], K = pt_shape(a)[1];
    const int64_t *sa = pt_stride(a), *sb = pt_stride(b), *so = pt_stride(o);
    const float *pa = pt_device_data_ptr(a), *pb = pt_device_data_ptr(b);
    float *po = pt_device_data_ptr(o);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)pa[m * sa[0] + k * sa[1]] * pb[k * sb[0] + n * sb[1]];
            float *dst = &po[m * so[0] + n * so[1]];
            *dst = (float)(alpha * s + (beta != 0 ? beta * *dst : 0));
        }
    return PT_OK;
}

/* sum: out (contiguous) = in summed over the dims in the bitmask scalar[0]; out's elements
 * are the kept dims in order (keepdim or not). */
static pt_status toy_sum(const pt_kernel_call *c)
{
    toy_enter(c);
    pt_tensor *o = pt_call_output(c, 0);
    const pt_tensor *in = pt_call_input(c, 0);
    uint64_t mask = (uint64_t)pt_call_scalar(c, 0);
    int nd = pt_ndim(in);
    const int64_t *sh = pt_shape(in);
    int64_t n_out = pt_numel(o);
    double *acc = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof *acc);
    if (!acc)
        return pt_backend_error(PT_ERR_OOM, "sum on toy: out of memory");
    for (int64_t k = 0; k < pt_numel(in); k++) {
        int64_t rest = k, out_i = 0, scale = 1;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t i = rest % sh[d];
            rest /= sh[d];
            if (!(mask >> d & 1)) {
                out_i += i * scale;
                scale *= sh[d];
            }
        }
        acc[out_i] += *toy_at(in, sh, nd, k);
    }
    float *po = pt_device_data_ptr(o);
    for (int64_t i = 0; i < n_out; i++)
        po[i] = (float)acc[i];
    free(acc);
    return PT_OK;
}

/* mse_loss with its public params: inputs contiguous of one shape, out a 0-dim loss for
 * MEAN / SUM (the toy has no NONE; it refuses it). */
static pt_status toy_mse_loss(const pt_kernel_call *c)
{
    toy_enter(c);
    const pt_pointwise_loss_params *p = pt_call_params(c);
    if (p->reduction == PT_REDUCTION_NONE)
        return pt_backend_error(PT_ERR_UNSUPPORTED, "mse_loss on toy: reduction 'none'");
    const pt_tensor *x = pt_call_input(c, 0), *t = pt_call_input(c, 1);
    const float *px = pt_device_data_ptr(x), *pt = pt_device_data_ptr(t);
    double s = 0;
    for (int64_t i = 0; i < pt_numel(x); i++)
        s += ((double)px[i] - pt[i]) * ((double)px[i] - pt[i]);
    if (p->reduction != PT_REDUCTION_SUM)
        s /= p->divisor;
    *(float *)pt_device_data_ptr(pt_call_output(c, 0)) = (float)s;
    return PT_OK;
}

/* The toy's copy kernel does no casts: copies between dtypes are refused. */
static bool toy_supports(int op, pt_dtype dtype, const pt_kernel_call *c)
{
    if (c && op == pt_op_lookup("copy"))
        return pt_dtype_of(pt_call_input(c, 0)) == dtype;
    return true;
}

#define F32 PT_DTYPE_BIT(PT_FLOAT32)
static const pt_backend_kernel toy_kernels[] = {
    {"copy", toy_copy_kernel, F32}, {"fill", toy_fill, F32}, {"add", toy_add, F32},
    {"mul", toy_mul, F32},          {"mm", toy_mm, F32},     {"sum", toy_sum, F32},
    {"div", toy_div, F32},          {"neg", toy_neg, F32},   {"mse_loss", toy_mse_loss, F32},
};

static pt_backend_desc toy_desc(void)
{
    return (pt_backend_desc){
        .abi_version = PT_BACKEND_ABI_VERSION,
        .name = "toy",
        .device_count = toy_count,
        .absent_reason = toy_absent,
        .context_create = toy_ctx_create,
        .context_destroy = toy_ctx_destroy,
        .alloc = toy_alloc,
        .free = toy_free,
        .copy_h2d = toy_copy,
        .copy_d2h = toy_copy,
        .copy_d2d = toy_copy,
        .supports = toy_supports,
        .kernels = toy_kernels,
        .n_kernels = (int)(sizeof toy_kernels / sizeof toy_kernels[0]),
    };
}

static pt_device_type toy_type = PT_DEVICE_TYPE_COUNT;

static pt_device toy(int index)
{
    return (pt_device){toy_type, index};
}

static int setup(void **state)
{
    (void)state;
    pt_backend_desc d = toy_desc();
    toy_type = pt_backend_register(&d);
    return toy_type == PT_DEVICE_TYPE_COUNT ? -1 : 0;
}

/* ---- registration and names ---------------------------------------------------------------- */

static void test_register_and_names(void **state)
{
    (void)state;
    assert_true(toy_type >= PT_DEVICE_PRIVATE_FIRST && toy_type <= PT_DEVICE_PRIVATE_LAST);
    pt_device d = pt_device_parse("toy");
    assert_int_equal(d.type, toy_type);
    assert_int_equal(d.index, 0);
    d = pt_device_parse("toy:1");
    assert_int_equal(d.type, toy_type);
    assert_int_equal(d.index, 1);
    char buf[32];
    assert_string_equal(pt_device_str(d, buf, sizeof buf), "toy:1");
    assert_true(pt_device_available(toy(1)));
    assert_false(pt_device_available(toy(2)));
    assert_pt_error(pt_empty(PT_SHAPE(2), PT_FLOAT32, toy(2)), PT_ERR_DEVICE,
                    "device toy:2 is not available: the toy backend found 2 devices: the toy "
                    "simulates two");
    /* an unknown name lists the registered one */
    pt_clear_error();
    assert_int_equal(pt_device_parse("toyx").type, PT_DEVICE_TYPE_COUNT);
    assert_non_null(strstr(pt_last_error(), "toy[:N]"));
    /* the name is taken now */
    pt_backend_desc again = toy_desc();
    assert_int_equal(pt_backend_register(&again), PT_DEVICE_TYPE_COUNT);
    assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
    assert_non_null(strstr(pt_last_error(), "already registered"));
    assert_int_equal(pt_op_lookup("mm") >= 0, true);
    assert_string_equal(pt_op_name(pt_op_lookup("mm")), "mm");
    assert_int_equal(pt_op_lookup("no_such_op"), -1);
}

static void test_register_refusals(void **state)
{
    (void)state;
    pt_backend_desc d = toy_desc();
    d.name = "toy_abi";
    d.abi_version = PT_BACKEND_ABI_VERSION + 98;
    pt_clear_error();
    assert_int_equal(pt_backend_register(&d), PT_DEVICE_TYPE_COUNT);
    assert_int_equal(pt_last_status(), PT_ERR_UNSUPPORTED);
    assert_non_null(strstr(pt_last_error(), "ABI version 99"));
    assert_non_null(strstr(pt_last_error(), "toy_abi"));
    /* nothing was registered under that name */
    assert_int_equal(pt_device_parse("toy_abi").type, PT_DEVICE_TYPE_COUNT);

    d = toy_desc();
    d.name = "Toy:2";
    pt_clear_error();
    assert_int_equal(pt_backend_register(&d), PT_DEVICE_TYPE_COUNT);
    assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
    assert_non_null(strstr(pt_last_error(), "bad device name"));

    d = toy_desc();
    d.name = "toy_nofree";
    d.free = NULL;
    pt_clear_error();
    assert_int_equal(pt_backend_register(&d), PT_DEVICE_TYPE_COUNT);
    assert_non_null(strstr(pt_last_error(), "memory function"));

    static const pt_backend_kernel bad[] = {{"not_an_op", toy_add, F32}};
    d = toy_desc();
    d.name = "toy_badop";
    d.kernels = bad;
    d.n_kernels = 1;
    pt_clear_error();
    assert_int_equal(pt_backend_register(&d), PT_DEVICE_TYPE_COUNT);
    assert_non_null(strstr(pt_last_error(), "not_an_op"));
    assert_int_equal(pt_backend_register(NULL), PT_DEVICE_TYPE_COUNT);
    pt_clear_error();
}

/* ---- tensors and ops ------------------------------------------------------------------------- */

static pt_tensor *cpu_values(int64_t r, int64_t c, float start)
{
    float v[64];
    for (int64_t i = 0; i < r * c; i++)
        v[i] = start + 0.25f * (float)((i * 7) % 11) - 1.0f;
    return pt_from_data(v, PT_SHAPE(r, c), PT_FLOAT32, pt_cpu());
}

static void test_ops_match_cpu(void **state)
{
    (void)state;
    pt_scope_begin();
    pt_tensor *a = cpu_values(3, 4, 0.5f), *b = cpu_values(4, 2, -0.25f), *r = cpu_values(1, 4, 1);
    pt_tensor *ta = pt_to(a, toy(0)), *tb = pt_to(b, toy(0)), *tr = pt_to(r, toy(0));
    assert_non_null(ta);
    assert_true(pt_device_equal(pt_device_of(ta), toy(0)));
    /* results come back through copy_d2h and compare with the CPU's */
    assert_tensor_close(pt_to(pt_add(ta, tr), pt_cpu()), pt_add(a, r), 1e-6, 1e-6);
    assert_tensor_close(pt_to(pt_mul(ta, tr), pt_cpu()), pt_mul(a, r), 1e-6, 1e-6);
    assert_tensor_close(pt_to(pt_mm(ta, tb), pt_cpu()), pt_mm(a, b), 1e-6, 1e-6);
    /* a transposed (strided) operand */
    pt_tensor *tt = pt_transpose(ta, 0, 1);
    assert_tensor_close(pt_to(pt_mm(tt, pt_to(a, toy(0))), pt_cpu()),
                        pt_mm(pt_transpose(a, 0, 1), a), 1e-6, 1e-6);
    assert_tensor_close(pt_to(pt_sum(ta), pt_cpu()), pt_sum(a), 1e-6, 1e-6);
    assert_tensor_close(pt_to(pt_sum_dim(ta, PT_DIMS(0), false), pt_cpu()),
                        pt_sum_dim(a, PT_DIMS(0), false), 1e-6, 1e-6);
    assert_tensor_close(pt_to(pt_full(PT_SHAPE(2, 2), 1.5, PT_FLOAT32, toy(0)), pt_cpu()),
                        pt_full(PT_SHAPE(2, 2), 1.5, PT_FLOAT32, pt_cpu()), 0, 0);
    assert_tensor_close(pt_to(pt_contiguous(tt), pt_cpu()), pt_transpose(a, 0, 1), 0, 0);
    /* and on the second device */
    pt_tensor *a1 = pt_to(a, toy(1));
    assert_tensor_close(pt_to(pt_add(a1, a1), pt_cpu()), pt_add(a, a), 0, 0);
    assert_float_equal(pt_item(pt_sum(a1)), pt_item(pt_sum(a)), 1e-5);
    pt_scope_end();
    assert_false(toy_ctx_mismatch);
    assert_int_equal(pt_last_status(), PT_OK);
}

static void test_missing_kernel_and_dtype(void **state)
{
    (void)state;
    pt_scope_begin();
    pt_tensor *t = pt_to(cpu_values(2, 2, 0), toy(0));
    assert_pt_error(pt_exp(t), PT_ERR_UNSUPPORTED, "no kernel for op 'exp' on device 'toy'");
    double v[4] = {1, 2, 3, 4};
    pt_tensor *d = pt_from_data(v, PT_SHAPE(2, 2), PT_FLOAT64, toy(0)); /* a transfer: fine */
    assert_non_null(d);
    assert_pt_error(pt_mul(d, d), PT_ERR_UNSUPPORTED,
                    "op 'mul' on device 'toy': dtype float64 not supported");
    /* the supports() hook: the copy kernel does no casts */
    assert_pt_error(pt_to_dtype(t, PT_FLOAT64), PT_ERR_UNSUPPORTED,
                    "op 'copy' on device 'toy': dtype float64 not supported");
    /* the query says the same without running anything */
    assert_true(pt_backend_supports(toy_type, pt_op_lookup("mul"), PT_FLOAT32));
    assert_false(pt_backend_supports(toy_type, pt_op_lookup("mul"), PT_FLOAT64));
    assert_false(pt_backend_supports(toy_type, pt_op_lookup("exp"), PT_FLOAT32));
    assert_true(pt_backend_supports(PT_DEVICE_CPU, pt_op_lookup("exp"), PT_FLOAT64));
    pt_scope_end();
    pt_clear_error();
}

/* ---- a training step ------------------------------------------------------------------------- */

/* Asserts PT_OK, showing the library's message otherwise (the missing kernel, ...). */
#define assert_ok(expr)                                                                            \
    do {                                                                                           \
        pt_status st_ = (expr);                                                                    \
        if (st_ != PT_OK)                                                                          \
            fail_msg("%s: %s", #expr, pt_last_error());                                            \
    } while (0)

/* Runs `steps` steps of Linear(4, 3) + MSE + SGD(momentum) on dev from the same start and
 * data; returns the flattened parameters after them, on the CPU. */
static pt_tensor *train(pt_device dev, int steps, double *last_loss)
{
    pt_manual_seed(7);
    pt_module *m = pt_nn_linear(4, 3, true);
    assert_non_null(m);
    assert_ok(pt_nn_to(m, dev));
    pt_optim *opt = pt_optim_sgd(m, (pt_sgd_opts){.lr = 0.1, .momentum = 0.9});
    assert_non_null(opt);
    pt_tensor *x = pt_to(cpu_values(5, 4, 0.1f), dev), *y = pt_to(cpu_values(5, 3, -0.3f), dev);
    for (int s = 0; s < steps; s++) {
        pt_scope_begin();
        pt_optim_zero_grad(opt);
        pt_tensor *loss = pt_mse_loss(pt_nn_forward(m, x), y, PT_REDUCTION_MEAN);
        assert_non_null(loss);
        assert_ok(pt_backward(loss, NULL, false, false));
        assert_ok(pt_optim_step(opt));
        *last_loss = pt_item(loss);
        pt_scope_end();
    }
    pt_tensor **params;
    int n = pt_nn_parameters(m, &params);
    assert_int_equal(n, 2);
    pt_tensor *w = pt_to(params[0], pt_cpu()), *b = pt_to(params[1], pt_cpu());
    free(params);
    pt_tensor *flat = pt_cat(2, (const pt_tensor *[]){pt_reshape(w, PT_SHAPE(-1)), b}, 0);
    pt_optim_free(opt);
    pt_nn_free(m);
    pt_release(x);
    pt_release(y);
    return flat;
}

static void test_training_step_matches_cpu(void **state)
{
    (void)state;
    pt_scope_begin();
    double loss_cpu = 0, loss_toy = 0;
    pt_tensor *p_cpu = train(pt_cpu(), 3, &loss_cpu);
    pt_clear_error();
    pt_tensor *p_toy = train(toy(0), 3, &loss_toy);
    if (!p_toy)
        print_error("toy training failed: %s\n", pt_last_error());
    assert_int_equal(pt_last_status(), PT_OK);
    assert_tensor_close(p_toy, p_cpu, 1e-5, 1e-6);
    assert_float_equal(loss_toy, loss_cpu, 1e-6);
    /* the parameters moved */
    pt_tensor *p0 = train(pt_cpu(), 0, &loss_cpu);
    assert_true(pt_item(pt_sum(pt_abs(pt_sub(p0, p_cpu)))) > 1e-3);
    pt_scope_end();
    assert_false(toy_ctx_mismatch);
}

/* ---- contexts ------------------------------------------------------------------------------- */

static void test_contexts(void **state)
{
    (void)state;
    /* one context per index, made on first use, whatever ran since */
    assert_int_equal(contexts_made[0], 1);
    assert_int_equal(contexts_made[1], 1);
    void *c0 = NULL, *c1 = NULL;
    assert_int_equal(pt_backend_context(toy(0), &c0), PT_OK);
    assert_int_equal(pt_backend_context(toy(1), &c1), PT_OK);
    assert_int_equal(((toy_ctx *)c0)->index, 0);
    assert_int_equal(((toy_ctx *)c1)->index, 1);
    assert_true(((toy_ctx *)c0)->kernel_calls > 0);
    /* every allocation was freed through the same context */
    assert_int_equal(((toy_ctx *)c1)->allocs, ((toy_ctx *)c1)->frees);
    /* an explicit destroy; the next use makes a new one */
    int destroyed = contexts_destroyed;
    assert_int_equal(pt_backend_context_destroy(toy(1)), PT_OK);
    assert_int_equal(contexts_destroyed, destroyed + 1);
    pt_tensor *t = pt_zeros(PT_SHAPE(3), PT_FLOAT32, toy(1));
    assert_non_null(t);
    assert_int_equal(contexts_made[1], 2);
    assert_float_equal(pt_item(pt_sum(t)), 0.0, 0);
    pt_release(t);
    /* no context for a device that does not exist */
    void *none = (void *)1;
    assert_pt_status_error(pt_backend_context(toy(5), &none), PT_ERR_DEVICE, "toy:5");
    assert_null(none);
    /* CPU has no context: NULL, no error */
    void *cc = (void *)1;
    assert_int_equal(pt_backend_context(pt_cpu(), &cc), PT_OK);
    assert_null(cc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_and_names),
        cmocka_unit_test(test_register_refusals),
        cmocka_unit_test(test_ops_match_cpu),
        cmocka_unit_test(test_missing_kernel_and_dtype),
        cmocka_unit_test(test_training_step_matches_cpu),
        cmocka_unit_test(test_contexts),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
