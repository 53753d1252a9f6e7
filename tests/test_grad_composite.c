/* Gradients of composite programs against PyTorch (tests/fixtures/gen/grad_composite.py): an
 * MLP with cross entropy, a small CNN with batch norm (training mode) and an attention block
 * with a causal mask and layer norm. Each program is built from PromeTorch ops with the
 * fixture's parameters and inputs, run forward and backward, and its loss and the .grad of
 * every parameter and of the input are compared with PyTorch's (float32, rtol 1e-4 / atol
 * 1e-5: the programs chain several float32 reductions and matmuls whose summation order
 * differs from PyTorch's). test_loss_heads checks the losses' own backward from PyTorch's
 * loss inputs (needs only the loss family). The programs need the backward formulas of the
 * elementwise, reduce/linalg, shape/index, conv/nn and loss families. */
#include "testutil.h"

#include <string.h>

#define RTOL 1e-4
#define ATOL 1e-5
#define MAX_P 16

static pt_fixture *fx;

typedef struct program {
    const char *prefix;
    int n;
    const char *names[MAX_P]; /* fixture tensors; the first n_leaves require grad */
    int n_leaves;
    pt_tensor *t[MAX_P];
} program;

static pt_tensor *param(const program *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->names[i], name) == 0)
            return p->t[i];
    fail_msg("no tensor %s in program %s", name, p->prefix);
    return NULL;
}

static void load(program *p)
{
    for (int i = 0; i < p->n; i++) {
        char key[128];
        snprintf(key, sizeof key, "%s.%s", p->prefix, p->names[i]);
        p->t[i] = fx_get(fx, key);
        assert_non_null(p->t[i]);
        if (i < p->n_leaves)
            assert_int_equal(pt_requires_grad_(p->t[i], true), PT_OK);
    }
}

/* Runs backward from loss and compares it and every leaf's .grad with PyTorch's. */
static void check(program *p, pt_tensor *loss)
{
    char key[128];
    if (!loss)
        fail_msg("%s: forward failed: %s", p->prefix, pt_last_error());
    snprintf(key, sizeof key, "%s.loss", p->prefix);
    pt_tensor *want = fx_get(fx, key);
    assert_tensor_close(loss, want, RTOL, ATOL);
    pt_release(want);
    pt_status st = pt_backward(loss, NULL, false, false);
    if (st != PT_OK)
        fail_msg("%s: backward failed: %s", p->prefix, pt_last_error());
    for (int i = 0; i < p->n_leaves; i++) {
        snprintf(key, sizeof key, "%s.%s.grad", p->prefix, p->names[i]);
        pt_tensor *g = pt_grad(p->t[i]);
        if (!g)
            fail_msg("%s: no gradient", key);
        want = fx_get(fx, key);
        assert_tensor_close(g, want, RTOL, ATOL);
        pt_release(want);
        pt_release(g);
    }
    pt_release(loss);
    for (int i = 0; i < p->n; i++)
        pt_release(p->t[i]);
}

/* The loss's own backward: PyTorch's head (the loss input) as a leaf, its gradient compared. */
static void check_head(const char *prefix,
                       pt_tensor *(*loss_fn)(const pt_tensor *, const pt_tensor *),
                       const char *target)
{
    char key[128];
    snprintf(key, sizeof key, "%s.head", prefix);
    pt_tensor *head = fx_get(fx, key);
    snprintf(key, sizeof key, "%s.%s", prefix, target);
    pt_tensor *tg = fx_get(fx, key);
    assert_int_equal(pt_requires_grad_(head, true), PT_OK);
    pt_tensor *loss = loss_fn(head, tg);
    snprintf(key, sizeof key, "%s.loss", prefix);
    pt_tensor *want = fx_get(fx, key);
    assert_tensor_close(loss, want, RTOL, ATOL);
    assert_int_equal(pt_backward(loss, NULL, false, false), PT_OK);
    snprintf(key, sizeof key, "%s.head.grad", prefix);
    pt_tensor *g = pt_grad(head), *wg = fx_get(fx, key);
    assert_non_null(g);
    assert_tensor_close(g, wg, 1e-5, 1e-6);
    pt_release(g);
    pt_release(wg);
    pt_release(want);
    pt_release(loss);
    pt_release(tg);
    pt_release(head);
}

static pt_tensor *mse_mean(const pt_tensor *x, const pt_tensor *t)
{
    return pt_mse_loss(x, t, PT_REDUCTION_MEAN);
}

/* The three losses' backward alone (needs only the loss family). */
static void test_loss_heads(void **state)
{
    (void)state;
    check_head("mlp", pt_cross_entropy, "y");
    check_head("cnn", pt_cross_entropy, "y");
    check_head("attn", mse_mean, "target");
}

/* F.linear(x, w, b): addmm for a matrix, matmul + bias otherwise. */
static pt_tensor *linear(const pt_tensor *x, const pt_tensor *w, const pt_tensor *b)
{
    pt_tensor *wt = pt_t(w);
    pt_tensor *r;
    if (pt_ndim(x) == 2) {
        r = pt_addmm(b, x, wt);
    } else {
        pt_tensor *m = pt_matmul(x, wt);
        r = pt_add(m, b);
        pt_release(m);
    }
    pt_release(wt);
    return r;
}

/* Linear(12, 16) - ReLU - Linear(16, 5) + cross_entropy. */
static void test_mlp(void **state)
{
    (void)state;
    program p = {"mlp", 6, {"x", "w1", "b1", "w2", "b2", "y"}, 5, {0}};
    load(&p);
    pt_tensor *h1 = linear(param(&p, "x"), param(&p, "w1"), param(&p, "b1"));
    pt_tensor *a1 = pt_relu(h1);
    pt_tensor *logits = linear(a1, param(&p, "w2"), param(&p, "b2"));
    pt_tensor *loss = pt_cross_entropy(logits, param(&p, "y"));
    pt_release(h1);
    pt_release(a1);
    pt_release(logits);
    check(&p, loss);
}

/* conv2d - batch_norm(train) - ReLU - max_pool2d - flatten - Linear + cross_entropy. */
static void test_cnn(void **state)
{
    (void)state;
    program p = {"cnn", 8, {"x", "cw", "cb", "bnw", "bnb", "fw", "fb", "y"}, 7, {0}};
    load(&p);
    int64_t c4[1] = {4};
    pt_tensor *rm = pt_zeros(1, c4, PT_FLOAT32, pt_cpu());
    pt_tensor *rv = pt_ones(1, c4, PT_FLOAT32, pt_cpu());
    const int64_t one[2] = {1, 1}, two[2] = {2, 2}, zero[2] = {0, 0};
    pt_tensor *c = pt_conv2d(param(&p, "x"), param(&p, "cw"), param(&p, "cb"), one, one, one, 1);
    pt_tensor *bn = pt_batch_norm(c, rm, rv, param(&p, "bnw"), param(&p, "bnb"), true, 0.1, 1e-5);
    pt_tensor *r = pt_relu(bn);
    pt_tensor *mp = pt_max_pool2d(r, two, two, zero);
    pt_tensor *fl = pt_flatten(mp, 1, -1);
    pt_tensor *logits = linear(fl, param(&p, "fw"), param(&p, "fb"));
    pt_tensor *loss = pt_cross_entropy(logits, param(&p, "y"));
    pt_tensor *c_rm = fx_get(fx, "cnn.running_mean"), *c_rv = fx_get(fx, "cnn.running_var");
    assert_tensor_close(rm, c_rm, 1e-5, 1e-6);
    assert_tensor_close(rv, c_rv, 1e-5, 1e-6);
    pt_release(c_rm);
    pt_release(c_rv);
    pt_release(rm);
    pt_release(rv);
    pt_release(c);
    pt_release(bn);
    pt_release(r);
    pt_release(mp);
    pt_release(fl);
    pt_release(logits);
    check(&p, loss);
}

enum { B = 2, L = 6, E = 8, H = 2, D = E / H };

/* [B, L, E] -> [B, H, L, D] */
static pt_tensor *heads(pt_tensor *t)
{
    int64_t s[4] = {B, L, H, D};
    pt_tensor *r = pt_reshape(t, 4, s);
    pt_tensor *tr = pt_transpose(r, 1, 2);
    pt_release(r);
    pt_release(t);
    return tr;
}

/* q/k/v projections into 2 heads, causal attention, output projection, residual + layer_norm,
 * mse_loss. */
static void test_attention(void **state)
{
    (void)state;
    program p = {"attn",
                 12,
                 {"x", "wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "lnw", "lnb", "target"},
                 11,
                 {0}};
    load(&p);
    const pt_tensor *x = param(&p, "x");
    pt_tensor *q = heads(linear(x, param(&p, "wq"), param(&p, "bq")));
    pt_tensor *k = heads(linear(x, param(&p, "wk"), param(&p, "bk")));
    pt_tensor *v = heads(linear(x, param(&p, "wv"), param(&p, "bv")));
    pt_tensor *a = pt_scaled_dot_product_attention(q, k, v, NULL, 0.0, true, 0.0);
    pt_tensor *at = pt_transpose(a, 1, 2);
    int64_t sbl[3] = {B, L, E}, se[1] = {E};
    pt_tensor *am = pt_reshape(at, 3, sbl);
    pt_tensor *o = linear(am, param(&p, "wo"), param(&p, "bo"));
    pt_tensor *res = pt_add(x, o);
    pt_tensor *ln = pt_layer_norm(res, 1, se, param(&p, "lnw"), param(&p, "lnb"), 1e-5);
    pt_tensor *loss = pt_mse_loss(ln, param(&p, "target"), PT_REDUCTION_MEAN);
    pt_tensor *tmp[] = {q, k, v, a, at, am, o, res, ln};
    for (size_t i = 0; i < sizeof(tmp) / sizeof(tmp[0]); i++)
        pt_release(tmp[i]);
    check(&p, loss);
}

int main(void)
{
    fx = fx_open("grad_composite");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_loss_heads, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_mlp, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_cnn, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_attention, pt_test_setup, pt_test_teardown),
    };
    int rc = cmocka_run_group_tests_name("grad_composite", tests, NULL, NULL);
    fx_close(fx);
    return rc;
}
