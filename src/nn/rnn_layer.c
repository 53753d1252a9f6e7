/* The recurrence of one RNN/LSTM/GRU layer in one direction, as one autograd node.
 *
 * Why one node and not a graph of per-step ops: the input projections of all steps come from
 * one matmul ([T*B, in] x W_ih^T), and slicing step t out of it with a recorded view would make
 * backward build a zero tensor of the whole [T, B, G*H] per step (O(T^2) work). Here forward
 * runs the steps with grad mode off, keeping the activated gates, and backward walks the steps
 * in reverse (backpropagation through time) writing each step's gate gradients into one
 * [T, B, G*H] tensor, which is the gradient of the projections. Both are written with library
 * ops, so they run on any backend.
 *
 * Shapes: T steps, B batch, H hidden, G gates (RNN 1, LSTM 4 = i f g o, GRU 3 = r z n).
 * Saved for backward:
 *   all modes: w_hh [G*H, H], h0 [B, H], out [T, B, H] (h_t of every step)
 *   LSTM: act [T, B, 4H] (sigmoid i, f, tanh g, sigmoid o), cs [T, B, H] (c_t), c0 [B, H]
 *   GRU:  act [T, B, 3H] (sigmoid r, z, tanh n), ghn [T, B, H] (W_hn h_{t-1} + b_hn) */
#include "rnn_internal.h"

#include "../core/internal.h"

typedef struct {
    pti_rnn_mode mode;
    bool reverse;
} layer_cfg;

/* Static so the node can point at it for as long as the graph lives. */
static const layer_cfg layer_cfgs[4][2] = {
    {{PTI_RNN_TANH, false}, {PTI_RNN_TANH, true}},
    {{PTI_RNN_RELU, false}, {PTI_RNN_RELU, true}},
    {{PTI_RNN_LSTM, false}, {PTI_RNN_LSTM, true}},
    {{PTI_RNN_GRU, false}, {PTI_RNN_GRU, true}},
};

int pti_rnn_gates(pti_rnn_mode mode)
{
    return mode == PTI_RNN_LSTM ? 4 : mode == PTI_RNN_GRU ? 3 : 1;
}

/* First error wins. */
static void chk(pt_status *st, pt_status s)
{
    if (*st == PT_OK && s != PT_OK)
        *st = s;
}

/* Columns [k*H, (k+1)*H) of the last dim (a view). */
static pt_tensor *part(const pt_tensor *t, int64_t k, int64_t H)
{
    return pt_narrow(t, -1, k * H, H);
}

/* Step index of the s-th processed step, and of the one processed before it (-1: none). */
static int64_t step_at(const layer_cfg *cfg, int64_t T, int64_t s)
{
    return cfg->reverse ? T - 1 - s : s;
}

static int64_t prev_step(const layer_cfg *cfg, int64_t T, int64_t s)
{
    return s == 0 ? -1 : step_at(cfg, T, s - 1);
}

/* State before step t: x0 (borrowed) for the first processed step, else the previous step's
 * row of xs (a view owned by the current scope). */
static pt_tensor *state_before(const pt_tensor *xs, const pt_tensor *x0, int64_t prev)
{
    return prev < 0 ? (pt_tensor *)x0 : pt_select(xs, 0, prev);
}

/* [T, B, H]: the state each step started from (x0 for the first processed step). */
static pt_tensor *shifted(const layer_cfg *cfg, const pt_tensor *xs, const pt_tensor *x0)
{
    int64_t T = pt_shape(xs)[0];
    pt_tensor *first = pt_unsqueeze(x0, 0);
    pt_tensor *rest = pt_narrow(xs, 0, cfg->reverse ? 1 : 0, T - 1);
    const pt_tensor *parts[2] = {cfg->reverse ? rest : first, cfg->reverse ? first : rest};
    pt_tensor *r = pt_cat(2, parts, 0);
    pt_release(first);
    pt_release(rest);
    return r;
}

/* ---- forward steps (grad mode off; results written into the step's rows) --------------------- */

static pt_status step_rnn(const layer_cfg *cfg, const pt_tensor *gi_t, const pt_tensor *h,
                          const pt_tensor *w_t, pt_tensor *out_t)
{
    pt_status st = pt_copy_(out_t, pt_addmm(gi_t, h, w_t));
    if (st == PT_OK)
        st = cfg->mode == PTI_RNN_TANH ? pt_tanh_(out_t) : pt_relu_(out_t);
    return st;
}

/* gates = gi_t + h W_hh^T; c_t = f * c + i * g; h_t = o * tanh(c_t). */
static pt_status step_lstm(const pt_tensor *gi_t, const pt_tensor *h, const pt_tensor *c,
                           const pt_tensor *w_t, int64_t H, pt_tensor *act_t, pt_tensor *c_t,
                           pt_tensor *out_t)
{
    pt_status st = pt_copy_(act_t, pt_addmm(gi_t, h, w_t));
    pt_tensor *ifg = pt_narrow(act_t, 1, 0, 2 * H);
    pt_tensor *i = part(act_t, 0, H), *f = part(act_t, 1, H), *g = part(act_t, 2, H);
    pt_tensor *o = part(act_t, 3, H);
    chk(&st, pt_sigmoid_(ifg));
    chk(&st, pt_tanh_(g));
    chk(&st, pt_sigmoid_(o));
    if (st == PT_OK)
        st = pt_copy_(c_t, pt_addcmul(pt_mul(f, c), i, g, 1.0));
    if (st == PT_OK)
        st = pt_copy_(out_t, pt_mul(o, pt_tanh(c_t)));
    return st;
}

/* r, z = sigmoid(gi + gh); n = tanh(gi_n + r * gh_n); h_t = n + z * (h - n). */
static pt_status step_gru(const pt_tensor *gi_t, const pt_tensor *h, const pt_tensor *w_t,
                          const pt_tensor *b_hh, int64_t H, pt_tensor *act_t, pt_tensor *ghn_t,
                          pt_tensor *out_t)
{
    pt_tensor *gh = b_hh ? pt_addmm(b_hh, h, w_t) : pt_mm(h, w_t);
    pt_tensor *rz = pt_narrow(act_t, 1, 0, 2 * H);
    pt_status st = pt_copy_(rz, pt_add(pt_narrow(gi_t, 1, 0, 2 * H), pt_narrow(gh, 1, 0, 2 * H)));
    chk(&st, pt_sigmoid_(rz));
    chk(&st, pt_copy_(ghn_t, part(gh, 2, H)));
    pt_tensor *n = part(act_t, 2, H);
    if (st == PT_OK)
        st = pt_copy_(n, pt_addcmul(part(gi_t, 2, H), part(act_t, 0, H), ghn_t, 1.0));
    chk(&st, pt_tanh_(n));
    if (st == PT_OK)
        st = pt_copy_(out_t, pt_lerp(n, h, part(act_t, 1, H)));
    return st;
}

/* ---- the node -------------------------------------------------------------------------------- */

static pt_status layer_forward(pt_autograd_ctx *ctx, int n_in, pt_tensor *const *in,
                               pt_tensor **outs)
{
    const layer_cfg *cfg = pt_ctx_user(ctx);
    pti_rnn_mode mode = cfg->mode;
    pt_tensor *gi = in[0], *w_hh = in[1], *h0 = in[2];
    pt_tensor *c0 = mode == PTI_RNN_LSTM ? in[3] : NULL;
    pt_tensor *b_hh = mode == PTI_RNN_GRU && n_in > 3 ? in[3] : NULL;
    int64_t T = pt_shape(gi)[0], B = pt_shape(gi)[1], H = pt_shape(w_hh)[1];
    int64_t G = pti_rnn_gates(mode);
    pt_dtype dt = pt_dtype_of(gi);
    pt_device dev = pt_device_of(gi);

    pt_scope_begin();
    pt_tensor *w_t = pt_t(w_hh);
    pt_tensor *out = pt_empty(PT_SHAPE(T, B, H), dt, dev);
    pt_tensor *act = mode >= PTI_RNN_LSTM ? pt_empty(PT_SHAPE(T, B, G * H), dt, dev) : NULL;
    pt_tensor *aux = mode >= PTI_RNN_LSTM ? pt_empty(PT_SHAPE(T, B, H), dt, dev) : NULL;
    pt_status st = out && w_t && (mode < PTI_RNN_LSTM || (act && aux)) ? PT_OK : pt_last_status();
    for (int64_t s = 0; s < T && st == PT_OK; s++) {
        int64_t t = step_at(cfg, T, s), tp = prev_step(cfg, T, s);
        pt_scope_begin();
        pt_tensor *gi_t = pt_select(gi, 0, t), *out_t = pt_select(out, 0, t);
        pt_tensor *h = state_before(out, h0, tp);
        if (mode == PTI_RNN_LSTM)
            st = step_lstm(gi_t, h, state_before(aux, c0, tp), w_t, H, pt_select(act, 0, t),
                           pt_select(aux, 0, t), out_t);
        else if (mode == PTI_RNN_GRU)
            st = step_gru(gi_t, h, w_t, b_hh, H, pt_select(act, 0, t), pt_select(aux, 0, t), out_t);
        else
            st = step_rnn(cfg, gi_t, h, w_t, out_t);
        pt_scope_end();
    }
    if (st == PT_OK) {
        int64_t last = step_at(cfg, T, T - 1);
        outs[0] = out;
        outs[1] = pt_clone(pt_select(out, 0, last));
        if (mode == PTI_RNN_LSTM)
            outs[2] = pt_clone(pt_select(aux, 0, last));
        if (!outs[1] || (mode == PTI_RNN_LSTM && !outs[2]))
            st = pt_last_status();
    }
    if (st == PT_OK) {
        pt_tensor *save[6] = {w_hh, h0, out, act, aux, c0};
        int n_save = mode == PTI_RNN_LSTM ? 6 : mode == PTI_RNN_GRU ? 5 : 3;
        st = pt_ctx_save_for_backward(ctx, n_save, save);
    }
    if (st == PT_OK)
        for (int k = 0; k < (mode == PTI_RNN_LSTM ? 3 : 2); k++)
            pt_keep(outs[k]);
    pt_scope_end();
    if (st != PT_OK)
        for (int k = 0; k < 3; k++)
            outs[k] = NULL;
    return st;
}

/* ---- backward steps (dh, dc: running gradients of h and c, [B, H] buffers) ------------------- */

typedef struct {
    const layer_cfg *cfg;
    int64_t T, B, H;
    pt_tensor *w_hh, *g_out; /* g_out [T, B, H]: gradient of out */
    pt_tensor *dh, *dc;      /* [B, H] buffers updated in place */
    pt_tensor *dgi, *dgh;    /* [T, B, G*H] results: gradients of gi and of h W_hh^T (+ b_hh) */
} bptt;

/* d pre = dh * act'(pre), with act' precomputed from the outputs. */
static pt_status back_rnn(bptt *b, const pt_tensor *out)
{
    pt_tensor *d =
        b->cfg->mode == PTI_RNN_TANH ? pt_rsub_scalar(pt_mul(out, out), 1.0) : pt_sign(out);
    pt_status st = d ? PT_OK : pt_last_status();
    for (int64_t s = b->T - 1; s >= 0 && st == PT_OK; s--) {
        int64_t t = step_at(b->cfg, b->T, s);
        pt_scope_begin();
        pt_tensor *dpre = pt_mul(pt_add(pt_select(b->g_out, 0, t), b->dh), pt_select(d, 0, t));
        st = pt_copy_(pt_select(b->dgi, 0, t), dpre);
        chk(&st, pt_copy_(b->dh, pt_mm(dpre, b->w_hh)));
        pt_scope_end();
    }
    return st;
}

/* With i, f, g, o the activated gates, tc = tanh(c_t), d = dh of the step:
 *   dc += d * o * (1 - tc^2);  pre-activation grads: i: dc * g * i(1-i), f: dc * c_prev * f(1-f),
 *   g: dc * i * (1-g^2), o: d * tc * o(1-o);  dh = dgates W_hh;  dc = dc * f.
 * The factors not involving d or dc are computed for all steps at once. */
static pt_status back_lstm(bptt *b, const pt_tensor *act, const pt_tensor *cs, const pt_tensor *c0)
{
    int64_t T = b->T, B = b->B, H = b->H;
    pt_tensor *i = part(act, 0, H), *f = part(act, 1, H), *g = part(act, 2, H);
    pt_tensor *o = part(act, 3, H);
    pt_tensor *tc = pt_tanh(cs);
    pt_tensor *k = pt_mul(o, pt_rsub_scalar(pt_mul(tc, tc), 1.0));
    pt_tensor *sig = pt_mul(act, pt_rsub_scalar(act, 1.0)); /* s(1-s), used for i, f, o */
    pt_tensor *p = pt_empty(PT_SHAPE(T, B, 3 * H), pt_dtype_of(act), pt_device_of(act));
    pt_status st = pt_copy_(part(p, 0, H), pt_mul(g, part(sig, 0, H)));
    chk(&st, pt_copy_(part(p, 1, H), pt_mul(shifted(b->cfg, cs, c0), part(sig, 1, H))));
    chk(&st, pt_copy_(part(p, 2, H), pt_mul(i, pt_rsub_scalar(pt_mul(g, g), 1.0))));
    pt_tensor *q = pt_mul(tc, part(sig, 3, H));
    if (!k || !q)
        chk(&st, pt_last_status());
    for (int64_t s = T - 1; s >= 0 && st == PT_OK; s--) {
        int64_t t = step_at(b->cfg, T, s);
        pt_scope_begin();
        pt_tensor *d = pt_add(pt_select(b->g_out, 0, t), b->dh);
        pt_tensor *dc = pt_addcmul(b->dc, d, pt_select(k, 0, t), 1.0);
        pt_tensor *dg_t = pt_select(b->dgi, 0, t);
        pt_tensor *p_t = pt_view(pt_select(p, 0, t), PT_SHAPE(B, 3, H));
        pt_tensor *ifg = pt_reshape(pt_mul(p_t, pt_unsqueeze(dc, 1)), PT_SHAPE(B, 3 * H));
        st = pt_copy_(pt_narrow(dg_t, 1, 0, 3 * H), ifg);
        chk(&st, pt_copy_(part(dg_t, 3, H), pt_mul(d, pt_select(q, 0, t))));
        chk(&st, pt_copy_(b->dh, pt_mm(dg_t, b->w_hh)));
        chk(&st, pt_copy_(b->dc, pt_mul(dc, pt_select(f, 0, t))));
        pt_scope_end();
    }
    return st;
}

/* h_t = n + z * (h - n), n = tanh(gi_n + r * ghn):
 *   dn = d (1-z)(1-n^2); dz = d (h - n) z(1-z); dr = dn * ghn * r(1-r);
 *   dgi = [dr, dz, dn]; dgh = [dr, dz, dn * r]; dh = d * z + dgh W_hh. */
static pt_status back_gru(bptt *b, const pt_tensor *act, const pt_tensor *ghn, const pt_tensor *out,
                          const pt_tensor *h0)
{
    int64_t T = b->T, H = b->H;
    pt_tensor *r = part(act, 0, H), *z = part(act, 1, H), *n = part(act, 2, H);
    pt_tensor *dn_f = pt_mul(pt_rsub_scalar(z, 1.0), pt_rsub_scalar(pt_mul(n, n), 1.0));
    pt_tensor *dz_f =
        pt_mul(pt_sub(shifted(b->cfg, out, h0), n), pt_mul(z, pt_rsub_scalar(z, 1.0)));
    pt_tensor *dr_f = pt_mul(ghn, pt_mul(r, pt_rsub_scalar(r, 1.0)));
    pt_status st = dn_f && dz_f && dr_f ? PT_OK : pt_last_status();
    for (int64_t s = T - 1; s >= 0 && st == PT_OK; s--) {
        int64_t t = step_at(b->cfg, T, s);
        pt_scope_begin();
        pt_tensor *d = pt_add(pt_select(b->g_out, 0, t), b->dh);
        pt_tensor *dn = pt_mul(d, pt_select(dn_f, 0, t));
        pt_tensor *dz = pt_mul(d, pt_select(dz_f, 0, t));
        pt_tensor *dr = pt_mul(dn, pt_select(dr_f, 0, t));
        pt_tensor *dgi_t = pt_select(b->dgi, 0, t), *dgh_t = pt_select(b->dgh, 0, t);
        st = pt_copy_(part(dgi_t, 0, H), dr);
        chk(&st, pt_copy_(part(dgi_t, 1, H), dz));
        chk(&st, pt_copy_(part(dgi_t, 2, H), dn));
        chk(&st, pt_copy_(pt_narrow(dgh_t, 1, 0, 2 * H), pt_narrow(dgi_t, 1, 0, 2 * H)));
        chk(&st, pt_copy_(part(dgh_t, 2, H), pt_mul(dn, pt_select(r, 0, t))));
        if (st == PT_OK)
            st = pt_copy_(b->dh, pt_addmm(pt_mul(d, pt_select(z, 0, t)), dgh_t, b->w_hh));
        pt_scope_end();
    }
    return st;
}

static pt_status layer_backward(pt_autograd_ctx *ctx, int n_out, pt_tensor *const *gout, int n_in,
                                pt_tensor **gin)
{
    (void)n_out;
    const layer_cfg *cfg = pt_ctx_user(ctx);
    pti_rnn_mode mode = cfg->mode;
    if (pt_grad_enabled())
        return pti_error(PT_ERR_UNSUPPORTED, "rnn: double backward (create_graph) through a "
                                             "recurrent layer is not supported");
    pt_scope_begin();
    pt_tensor *saved[6] = {NULL};
    for (int k = 0; k < pt_ctx_n_saved(ctx); k++)
        saved[k] = pt_ctx_saved(ctx, k);
    pt_tensor *w_hh = saved[0], *h0 = saved[1], *out = saved[2];
    pt_status st = w_hh && h0 && out ? PT_OK : pt_last_status();
    if (st == PT_OK && mode >= PTI_RNN_LSTM &&
        !(saved[3] && saved[4] && (mode == PTI_RNN_GRU || saved[5])))
        st = pt_last_status();
    bptt b = {cfg, 0, 0, 0, w_hh, gout[0], NULL, NULL, NULL, NULL};
    if (st == PT_OK) {
        b.T = pt_shape(out)[0];
        b.B = pt_shape(out)[1];
        b.H = pt_shape(out)[2];
        int64_t GH = pt_shape(w_hh)[0];
        b.dh = pt_clone(gout[1]);
        b.dc = mode == PTI_RNN_LSTM ? pt_clone(gout[2]) : NULL;
        b.dgi = pt_empty(PT_SHAPE(b.T, b.B, GH), pt_dtype_of(out), pt_device_of(out));
        b.dgh = mode == PTI_RNN_GRU ? pt_empty_like(b.dgi) : b.dgi;
        if (!b.dh || !b.dgi || !b.dgh || (mode == PTI_RNN_LSTM && !b.dc))
            st = pt_last_status();
    }
    if (st == PT_OK) {
        if (mode == PTI_RNN_LSTM)
            st = back_lstm(&b, saved[3], saved[4], saved[5]);
        else if (mode == PTI_RNN_GRU)
            st = back_gru(&b, saved[3], saved[4], out, h0);
        else
            st = back_rnn(&b, out);
    }
    if (st == PT_OK) {
        int64_t GH = pt_shape(w_hh)[0];
        pt_tensor *dgh2 = pt_reshape(b.dgh, PT_SHAPE(b.T * b.B, GH));
        gin[0] = b.dgi; /* owned by this scope until pt_keep below */
        if (pt_ctx_needs_input_grad(ctx, 1))
            gin[1] = pt_mm(pt_t(dgh2), pt_reshape(shifted(cfg, out, h0), PT_SHAPE(b.T * b.B, b.H)));
        gin[2] = b.dh;
        if (n_in > 3)
            gin[3] = mode == PTI_RNN_LSTM ? b.dc : pt_sum_dim(dgh2, PT_DIMS(0), false);
        for (int k = 0; k < n_in; k++) {
            if (k == 1 && !pt_ctx_needs_input_grad(ctx, 1))
                continue;
            if (!gin[k])
                st = pt_last_status();
        }
    }
    if (st == PT_OK)
        for (int k = 0; k < n_in; k++)
            pt_keep(gin[k]);
    pt_scope_end();
    if (st != PT_OK)
        for (int k = 0; k < n_in; k++)
            gin[k] = NULL;
    return st;
}

static const pt_function layer_fn_2 = {
    .name = "rnn_layer", .n_outputs = 2, .forward = layer_forward, .backward = layer_backward};
static const pt_function layer_fn_3 = {
    .name = "lstm_layer", .n_outputs = 3, .forward = layer_forward, .backward = layer_backward};

pt_status pti_rnn_layer(pti_rnn_mode mode, bool reverse, pt_tensor *gi, pt_tensor *w_hh,
                        pt_tensor *b_hh, pt_tensor *h0, pt_tensor *c0, pt_tensor **out,
                        pt_tensor **h_n, pt_tensor **c_n)
{
    pt_tensor *in[4] = {gi, w_hh, h0, mode == PTI_RNN_LSTM ? c0 : b_hh};
    int n_in = (mode == PTI_RNN_LSTM || (mode == PTI_RNN_GRU && b_hh)) ? 4 : 3;
    pt_tensor *res[3] = {NULL, NULL, NULL};
    const pt_function *fn = mode == PTI_RNN_LSTM ? &layer_fn_3 : &layer_fn_2;
    pt_status st = pt_function_apply(fn, (void *)&layer_cfgs[mode][reverse ? 1 : 0], n_in, in, res);
    *out = res[0];
    *h_n = res[1];
    if (c_n)
        *c_n = res[2];
    else
        pt_release(res[2]);
    return st;
}
