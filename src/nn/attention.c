/* nn.MultiheadAttention: the input projections, scaled dot-product attention per head with
 * PyTorch's module masks (bool true = masked, float = added), dropout on the weights, the
 * output projection and the head-averaged weights -- the math of PyTorch's
 * F.multi_head_attention_forward, composed of public ops so autograd and every backend work.
 *
 * Shapes (N = batch, H = heads, D = E / H head dim, L = target length, S = source length):
 * query [L, N, E] (or [N, L, E] batch_first) -> q [N, H, L, D]; scores [N, H, L, S];
 * output [L, N, E]; weights [N, L, S]. Unbatched [L, E] inputs run as a batch of one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "prometorch/prometorch.h"
#include "prometorch/nn_transformer.h"
#include "../core/internal.h"
#include "prometorch/nn_layers.h"

typedef struct {
    int64_t embed_dim, num_heads, kdim, vdim;
    double dropout;
    bool bias, batch_first, packed; /* packed: one in_proj_weight (kdim == vdim == E) */
    bool add_bias_kv, add_zero_attn;
} mha_ctx;

/* Registration indices: parameters in_proj_weight, in_proj_bias (packed) or q/k/v_proj_weight,
 * in_proj_bias (separate), then bias_k, bias_v (found by name); the one child is out_proj. */
enum { MHA_OUT_PROJ_CHILD = 0 };

/* ---- construction ---------------------------------------------------------------------------- */

static pt_status mha_forward_n(pt_module *self, int n_in, const pt_tensor *const *in, int n_out,
                               pt_tensor **out);

static const pt_module_def mha_def = {
    .type_name = "MultiheadAttention",
    .forward_n = mha_forward_n,
    .free_ctx = free, /* no extra_repr: PyTorch prints only the out_proj child */
};

/* A fresh float32 tensor of the given shape initialized by xavier_uniform_ (uniform) or
 * xavier_normal_ (PyTorch's fans: [out, in] -> in, out; [1, 1, E] -> E, E). */
static pt_tensor *xavier_tensor(int ndim, const int64_t *shape, bool uniform)
{
    pt_tensor *t = pt_empty(ndim, shape, PT_FLOAT32, pt_cpu());
    pt_status st = uniform ? pt_nn_init_xavier_uniform_(t, 1.0) : pt_nn_init_xavier_normal_(t, 1.0);
    if (st != PT_OK) {
        pt_release(t);
        return NULL;
    }
    return t;
}

/* Registers a new parameter and drops the caller's reference. */
static pt_status add_param(pt_module *m, const char *name, pt_tensor *t)
{
    if (!t)
        return pt_last_status();
    pt_status st = pt_nn_register_parameter(m, name, t);
    pt_release(t);
    return st;
}

/* out_proj: a Linear(E, E) whose weight keeps Linear's default init, bias zeroed (PyTorch's
 * _reset_parameters). PyTorch calls F.linear with these parameters directly, and so do we. */
static pt_module *make_out_proj(int64_t e, bool bias)
{
    pt_module *lin = pt_nn_linear(e, e, bias);
    if (lin && bias) {
        if (pt_nn_init_zeros_(pt_nn_param_ref(lin, "bias")) != PT_OK) {
            pt_nn_free(lin);
            return NULL;
        }
    }
    return lin;
}

static pt_status mha_register(pt_module *m, const mha_ctx *c)
{
    int64_t e = c->embed_dim;
    pt_status st;
    if (c->packed) {
        st = add_param(m, "in_proj_weight", xavier_tensor(PT_SHAPE(3 * e, e), true));
    } else {
        st = add_param(m, "q_proj_weight", xavier_tensor(PT_SHAPE(e, e), true));
        if (st == PT_OK)
            st = add_param(m, "k_proj_weight", xavier_tensor(PT_SHAPE(e, c->kdim), true));
        if (st == PT_OK)
            st = add_param(m, "v_proj_weight", xavier_tensor(PT_SHAPE(e, c->vdim), true));
    }
    if (st == PT_OK && c->bias)
        st = add_param(m, "in_proj_bias", pt_zeros(PT_SHAPE(3 * e), PT_FLOAT32, pt_cpu()));
    if (st == PT_OK && c->add_bias_kv)
        st = add_param(m, "bias_k", xavier_tensor(PT_SHAPE(1, 1, e), false));
    if (st == PT_OK && c->add_bias_kv)
        st = add_param(m, "bias_v", xavier_tensor(PT_SHAPE(1, 1, e), false));
    if (st == PT_OK)
        st = pt_nn_add(m, "out_proj", make_out_proj(e, c->bias));
    return st;
}

pt_module *pt_nn_multihead_attention(int64_t embed_dim, int64_t num_heads,
                                     const pt_multihead_attention_opts *opts)
{
    static const pt_multihead_attention_opts defaults = {0};
    const pt_multihead_attention_opts *o = opts ? opts : &defaults;
    if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads != 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_multihead_attention: embed_dim %lld must be a positive "
                              "multiple of num_heads %lld",
                              (long long)embed_dim, (long long)num_heads);
    if (o->kdim < 0 || o->vdim < 0)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_multihead_attention: kdim %lld and vdim "
                              "%lld must be >= 0 (0 = embed_dim)",
                              (long long)o->kdim, (long long)o->vdim);
    if (!(o->dropout >= 0.0 && o->dropout <= 1.0))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pt_nn_multihead_attention: dropout %g is not in [0, 1]", o->dropout);
    mha_ctx *c = pti_calloc(1, sizeof(*c));
    if (!c)
        return pti_error_null(PT_ERR_OOM, "pt_nn_multihead_attention: out of memory");
    *c = (mha_ctx){
        .embed_dim = embed_dim,
        .num_heads = num_heads,
        .kdim = o->kdim ? o->kdim : embed_dim,
        .vdim = o->vdim ? o->vdim : embed_dim,
        .dropout = o->dropout,
        .bias = !o->no_bias,
        .batch_first = o->batch_first,
        .add_bias_kv = o->add_bias_kv,
        .add_zero_attn = o->add_zero_attn,
    };
    c->packed = c->kdim == embed_dim && c->vdim == embed_dim;
    pt_module *m = pt_nn_module_new(&mha_def, c);
    if (!m)
        return NULL;
    if (mha_register(m, c) != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

/* ---- forward --------------------------------------------------------------------------------- */

/* F.linear(x, w, b) over the last dim of x: [..., in] -> [..., out]. b nullable. */
static pt_tensor *linear_fn(const pt_tensor *x, const pt_tensor *w, const pt_tensor *b)
{
    int nd = pt_ndim(x);
    int64_t in = pt_shape(x)[nd - 1], out = pt_shape(w)[0];
    pt_tensor *x2 = pt_reshape(x, PT_SHAPE(-1, in));
    pt_tensor *wt = pt_t(w);
    pt_tensor *y2 = b ? pt_addmm(b, x2, wt) : pt_mm(x2, wt);
    pt_release(x2);
    pt_release(wt);
    if (!y2)
        return NULL;
    int64_t shape[8];
    for (int i = 0; i < nd - 1; i++)
        shape[i] = pt_shape(x)[i];
    shape[nd - 1] = out;
    pt_tensor *y = pt_view(y2, nd, shape);
    pt_release(y2);
    return y;
}

/* The forward's inputs (masks nullable) and sizes; batched is false for [L, E] inputs. */
typedef struct {
    const pt_tensor *q, *k, *v, *kpm, *mask;
    bool batched;
    int64_t n, l, s;
} mha_inputs;

static const char *layout_name(const mha_ctx *c)
{
    return c->batch_first ? "[N, L, E]" : "[L, N, E]";
}

static pt_status check_mask_dtype(const pt_tensor *m, const char *what)
{
    pt_dtype dt = pt_dtype_of(m);
    if (dt != PT_BOOL && !pt_dtype_is_floating(dt))
        return pti_error(PT_ERR_DTYPE, "MultiheadAttention: %s must be bool or floating point",
                         what);
    return PT_OK;
}

/* Validates the shapes (PyTorch's _mha_shape_check and the size asserts). */
static pt_status mha_check(const mha_ctx *c, mha_inputs *x)
{
    int qd = pt_ndim(x->q);
    if (qd != 2 && qd != 3)
        return pti_error(PT_ERR_SHAPE,
                         "MultiheadAttention: query must be 3-D %s or 2-D "
                         "(unbatched), got %d-D",
                         layout_name(c), qd);
    if (pt_ndim(x->k) != qd || pt_ndim(x->v) != qd)
        return pti_error(PT_ERR_SHAPE,
                         "MultiheadAttention: query, key and value must all be "
                         "%d-D (got %d-D key, %d-D value)",
                         qd, pt_ndim(x->k), pt_ndim(x->v));
    x->batched = qd == 3;
    int bdim = c->batch_first ? 0 : 1, sdim = x->batched ? 1 - bdim : 0;
    const int64_t *qs = pt_shape(x->q), *ks = pt_shape(x->k), *vs = pt_shape(x->v);
    x->n = x->batched ? qs[bdim] : 1;
    x->l = qs[sdim];
    x->s = ks[sdim];
    if (qs[qd - 1] != c->embed_dim || ks[qd - 1] != c->kdim || vs[qd - 1] != c->vdim)
        return pti_error(PT_ERR_SHAPE,
                         "MultiheadAttention: feature sizes of query/key/value "
                         "are %lld/%lld/%lld, expected %lld/%lld/%lld",
                         (long long)qs[qd - 1], (long long)ks[qd - 1], (long long)vs[qd - 1],
                         (long long)c->embed_dim, (long long)c->kdim, (long long)c->vdim);
    if (vs[sdim] != x->s || (x->batched && (ks[bdim] != x->n || vs[bdim] != x->n)))
        return pti_error(PT_ERR_SHAPE,
                         "MultiheadAttention: key and value must have query's "
                         "batch size %lld and the same sequence length (key %lld, value %lld)",
                         (long long)x->n, (long long)x->s, (long long)vs[sdim]);
    if (x->kpm) {
        pt_status st = check_mask_dtype(x->kpm, "key_padding_mask");
        if (st != PT_OK)
            return st;
        bool ok = x->batched ? pt_ndim(x->kpm) == 2 && pt_shape(x->kpm)[0] == x->n &&
                                   pt_shape(x->kpm)[1] == x->s
                             : pt_ndim(x->kpm) == 1 && pt_shape(x->kpm)[0] == x->s;
        if (!ok)
            return pti_error(PT_ERR_SHAPE,
                             "MultiheadAttention: key_padding_mask must be [%lld, "
                             "%lld] (N, S)%s",
                             (long long)x->n, (long long)x->s,
                             x->batched ? "" : " or [S] for unbatched input");
    }
    if (x->mask) {
        pt_status st = check_mask_dtype(x->mask, "attn_mask");
        if (st != PT_OK)
            return st;
        int md = pt_ndim(x->mask);
        const int64_t *ms = pt_shape(x->mask);
        int64_t b = x->n * c->num_heads;
        bool ok = (md == 2 && ms[0] == x->l && ms[1] == x->s) ||
                  (md == 3 && ms[0] == b && ms[1] == x->l && ms[2] == x->s);
        if (!ok)
            return pti_error(PT_ERR_SHAPE,
                             "MultiheadAttention: attn_mask must be [%lld, %lld] "
                             "(L, S) or [%lld, %lld, %lld] (N*num_heads, L, S), got %d-D",
                             (long long)x->l, (long long)x->s, (long long)b, (long long)x->l,
                             (long long)x->s, md);
    }
    return PT_OK;
}

/* The input projections q, k, v ([., ., E] each, the inputs' layout). */
static pt_status project(pt_module *self, const mha_ctx *c, const mha_inputs *x, pt_tensor **q,
                         pt_tensor **k, pt_tensor **v)
{
    int64_t e = c->embed_dim;
    pt_tensor *wq, *wk, *wv, *bq = NULL, *bk = NULL, *bv = NULL;
    if (c->packed) {
        pt_tensor *w = pt_nn_direct_param_ref(self, 0, NULL);
        wq = pt_narrow(w, 0, 0, e);
        wk = pt_narrow(w, 0, e, e);
        wv = pt_narrow(w, 0, 2 * e, e);
    } else {
        wq = pt_nn_direct_param_ref(self, 0, NULL);
        wk = pt_nn_direct_param_ref(self, 1, NULL);
        wv = pt_nn_direct_param_ref(self, 2, NULL);
    }
    if (c->bias) {
        pt_tensor *b = pt_nn_direct_param_ref(self, c->packed ? 1 : 3, NULL);
        bq = pt_narrow(b, 0, 0, e);
        bk = pt_narrow(b, 0, e, e);
        bv = pt_narrow(b, 0, 2 * e, e);
    }
    *q = linear_fn(x->q, wq, bq);
    *k = linear_fn(x->k, wk, bk);
    *v = linear_fn(x->v, wv, bv);
    return *q && *k && *v ? PT_OK : pt_last_status();
}

/* [L, N, E] (or [N, L, E] batch_first) -> [N, H, L, D]. */
static pt_tensor *split_heads(const mha_ctx *c, const pt_tensor *t)
{
    const int64_t *s = pt_shape(t);
    int64_t h = c->num_heads, d = c->embed_dim / h;
    pt_tensor *v = pt_view(t, PT_SHAPE(s[0], s[1], h, d));
    pt_tensor *p =
        c->batch_first ? pt_permute(v, PT_DIMS(0, 2, 1, 3)) : pt_permute(v, PT_DIMS(1, 2, 0, 3));
    pt_release(v);
    return p;
}

/* Number of key columns appended by add_bias_kv and add_zero_attn. */
static int64_t extra_keys(const mha_ctx *c)
{
    return (c->add_bias_kv ? 1 : 0) + (c->add_zero_attn ? 1 : 0);
}

/* Appends `extra` columns of "attend" (false / 0) to the last dim of a mask. */
static pt_tensor *pad_mask(pt_tensor *m, int64_t extra)
{
    if (!m || extra == 0)
        return m;
    int nd = pt_ndim(m);
    int64_t shape[4];
    for (int i = 0; i < nd; i++)
        shape[i] = pt_shape(m)[i];
    shape[nd - 1] = extra;
    pt_tensor *z = pt_zeros(nd, shape, pt_dtype_of(m), pt_device_of(m));
    pt_tensor *r = pt_cat(2, (const pt_tensor *[]){m, z}, -1);
    pt_release(z);
    pt_release(m);
    return r;
}

/* Appends one key (or value) position to t [N, H, S, D]: bias [1, 1, E] split into heads,
 * or zeros when bias is NULL (add_zero_attn). */
static pt_tensor *append_key(const mha_ctx *c, pt_tensor *t, const pt_tensor *bias)
{
    if (!t)
        return NULL;
    int64_t n = pt_shape(t)[0], h = c->num_heads, d = c->embed_dim / h;
    pt_tensor *col;
    if (bias) {
        pt_tensor *bv = pt_view(bias, PT_SHAPE(1, h, 1, d));
        col = pt_expand(bv, PT_SHAPE(n, h, 1, d));
        pt_release(bv);
    } else {
        col = pt_zeros(PT_SHAPE(n, h, 1, d), pt_dtype_of(t), pt_device_of(t));
    }
    pt_tensor *r = pt_cat(2, (const pt_tensor *[]){t, col}, 2);
    pt_release(col);
    pt_release(t);
    return r;
}

/* Applies a module mask to scores [N, H, L, S']: bool true -> -inf, float added. `shape` is
 * the mask's broadcast view before padding to S' columns. */
static pt_tensor *apply_mask(const mha_ctx *c, pt_tensor *scores, const pt_tensor *mask, int ndim,
                             const int64_t *shape)
{
    pt_tensor *m = pad_mask(pt_reshape(mask, ndim, shape), extra_keys(c));
    pt_tensor *r;
    if (pt_dtype_of(mask) == PT_BOOL) {
        r = pt_masked_fill(scores, m, -INFINITY);
    } else {
        pt_tensor *mf = pt_to_dtype(m, pt_dtype_of(scores));
        r = pt_add(scores, mf);
        pt_release(mf);
    }
    pt_release(m);
    pt_release(scores);
    return r;
}

/* softmax(q k^T / sqrt(D) + masks) [N, H, L, S], dropped out in training. */
static pt_tensor *attention_weights(pt_module *self, const mha_ctx *c, const mha_inputs *x,
                                    const pt_tensor *q, const pt_tensor *k)
{
    int64_t d = c->embed_dim / c->num_heads;
    pt_tensor *qs = pt_div_scalar(q, sqrt((double)d));
    pt_tensor *kt = pt_transpose(k, -2, -1);
    pt_tensor *scores = pt_matmul(qs, kt);
    if (x->mask)
        scores = pt_ndim(x->mask) == 2
                     ? apply_mask(c, scores, x->mask, PT_SHAPE(1, 1, x->l, x->s))
                     : apply_mask(c, scores, x->mask, PT_SHAPE(x->n, c->num_heads, x->l, x->s));
    if (x->kpm)
        scores = apply_mask(c, scores, x->kpm, PT_SHAPE(x->n, 1, 1, x->s));
    pt_tensor *w = pt_softmax(scores, -1);
    if (pt_nn_is_training(self) && c->dropout > 0.0)
        w = pt_dropout(w, c->dropout, true);
    return w;
}

/* Output projection of attn [N, H, L, D] back to the input layout [L, N, E] / [N, L, E]. */
static pt_tensor *merge_heads(pt_module *self, const mha_ctx *c, const mha_inputs *x,
                              const pt_tensor *attn)
{
    pt_tensor *p = c->batch_first ? pt_permute(attn, PT_DIMS(0, 2, 1, 3))
                                  : pt_permute(attn, PT_DIMS(2, 0, 1, 3));
    pt_tensor *merged = c->batch_first ? pt_reshape(p, PT_SHAPE(x->n, x->l, c->embed_dim))
                                       : pt_reshape(p, PT_SHAPE(x->l, x->n, c->embed_dim));
    pt_module *op = pt_nn_child_at(self, MHA_OUT_PROJ_CHILD, NULL);
    pt_tensor *b = c->bias ? pt_nn_param_ref(op, "bias") : NULL;
    return linear_fn(merged, pt_nn_param_ref(op, "weight"), b);
}

/* Unbatched inputs are processed as a batch of one (batch dim inserted where the module's
 * layout has it). */
static const pt_tensor *batch_of_one(const mha_ctx *c, const pt_tensor *t)
{
    return t ? pt_unsqueeze(t, c->batch_first ? 0 : 1) : NULL;
}

static pt_status mha_run(pt_module *self, const mha_ctx *c, mha_inputs *x, int n_out,
                         pt_tensor **out)
{
    if (!x->batched) {
        x->q = batch_of_one(c, x->q);
        x->k = batch_of_one(c, x->k);
        x->v = batch_of_one(c, x->v);
        x->kpm = x->kpm ? pt_unsqueeze(x->kpm, 0) : NULL;
    }
    pt_tensor *q, *k, *v;
    pt_status st = project(self, c, x, &q, &k, &v);
    if (st != PT_OK)
        return st;
    pt_tensor *qh = split_heads(c, q), *kh = split_heads(c, k), *vh = split_heads(c, v);
    if (c->add_bias_kv) {
        kh = append_key(c, kh, pt_nn_param_ref(self, "bias_k"));
        vh = append_key(c, vh, pt_nn_param_ref(self, "bias_v"));
    }
    if (c->add_zero_attn) {
        kh = append_key(c, kh, NULL);
        vh = append_key(c, vh, NULL);
    }
    pt_tensor *w = attention_weights(self, c, x, qh, kh);
    pt_tensor *y = merge_heads(self, c, x, pt_matmul(w, vh));
    if (!x->batched)
        y = pt_squeeze_dim(y, c->batch_first ? 0 : 1);
    if (!y)
        return pt_last_status();
    out[0] = y;
    if (n_out > 1) {
        /* PyTorch averages as sum over heads / num_heads. */
        pt_tensor *avg = pt_div_scalar(pt_sum_dim(w, PT_DIMS(1), false), (double)c->num_heads);
        if (avg && !x->batched)
            avg = pt_squeeze_dim(avg, 0);
        if (!avg)
            return pt_last_status();
        out[1] = avg;
    }
    return PT_OK;
}

/* in = {query, key, value, key_padding_mask, attn_mask}; out = {attn_output, attn_weights}. */
static pt_status mha_forward_n(pt_module *self, int n_in, const pt_tensor *const *in, int n_out,
                               pt_tensor **out)
{
    const mha_ctx *c = pt_nn_ctx(self);
    if (n_in < 1 || n_in > 5 || n_out > 2)
        return pti_error(PT_ERR_INVALID_ARG,
                         "MultiheadAttention: takes 1 to 5 inputs (query, "
                         "key, value, key_padding_mask, attn_mask) and gives 1 or 2 outputs "
                         "(got %d and %d)",
                         n_in, n_out);
    mha_inputs x = {
        .q = in[0],
        .k = n_in > 1 && in[1] ? in[1] : in[0],
        .v = n_in > 2 && in[2] ? in[2] : (n_in > 1 && in[1] ? in[1] : in[0]),
        .kpm = n_in > 3 ? in[3] : NULL,
        .mask = n_in > 4 ? in[4] : NULL,
    };
    if (!PTI_CHECK_ARG(x.q, "MultiheadAttention", "query"))
        return pt_last_status();
    pt_status st = mha_check(c, &x);
    if (st != PT_OK)
        return st;
    pt_scope_begin();
    st = mha_run(self, c, &x, n_out, out);
    for (int i = 0; i < n_out && st == PT_OK; i++)
        pt_keep(out[i]);
    pt_scope_end();
    if (st != PT_OK) {
        for (int i = 0; i < n_out; i++)
            out[i] = NULL;
    }
    return st;
}
