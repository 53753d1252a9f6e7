/* The LLM forward pass, written with library ops (so it runs wherever the ops have kernels)
 * and the key/value cache it reads and writes. The graph is llama.cpp's for each architecture
 * (src/models/ there): pre-norm decoder blocks with RMSNorm, RoPE, grouped-query attention
 * over the cache and a gated feed-forward (SwiGLU, or GeGLU for gemma3), plus q/k norms
 * (qwen3, gemma3), post-norms and the embedding scale (gemma3), biases (qwen2) and a fused
 * qkv / gate-up (phi3).
 *
 * Memory: each layer runs in its own scope, so the temporaries of one layer are back in the
 * allocator cache before the next starts; in a steady decode loop no call reaches malloc.
 *
 * Every computation goes through ops and so through the kernel table of the model's device
 * (m->device: the weights, the cache and every temporary live there); the ops it dispatches
 * are listed in required_ops (pt_llm_load refuses a device whose backend lacks one and names
 * it). Done here on the host: only the int64 token ids / int32 positions of a batch and the
 * row lists of logits_of / hidden_of (index set-up, no arithmetic), copied to the device, and
 * the logits / hidden states copied back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "llm_model.h"

/* ---- KV cache ----------------------------------------------------------------------------------
 */

pti_kv_cache *pti_kv_cache_new(const pti_llm_model *m, int32_t n_slots, int32_t n_ctx, pt_dtype dt)
{
    const pti_llm_hparams *hp = &m->hp;
    pti_kv_cache *c = pti_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->n_slots = n_slots;
    c->n_ctx = n_ctx;
    c->n_layer = hp->n_layer;
    c->k = pti_calloc((size_t)hp->n_layer, sizeof *c->k);
    c->v = pti_calloc((size_t)hp->n_layer, sizeof *c->v);
    if (!c->k || !c->v) {
        pti_kv_cache_free(c);
        return NULL;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        c->k[il] = pt_zeros(PT_SHAPE(n_slots, n_ctx, hp->n_head_kv, hp->head_dim_k), dt, m->device);
        c->v[il] = pt_zeros(PT_SHAPE(n_slots, n_ctx, hp->n_head_kv, hp->head_dim_v), dt, m->device);
        if (!c->k[il] || !c->v[il]) {
            pti_kv_cache_free(c);
            return NULL;
        }
        pti_scope_untrack(c->k[il]);
        pti_scope_untrack(c->v[il]);
    }
    return c;
}

void pti_kv_cache_free(pti_kv_cache *c)
{
    if (!c)
        return;
    for (int il = 0; il < c->n_layer; il++) {
        if (c->k)
            pt_release(c->k[il]);
        if (c->v)
            pt_release(c->v[il]);
    }
    free(c->k);
    free(c->v);
    free(c);
}

/* ---- one decoder block -------------------------------------------------------------------------
 */

typedef struct fwd {
    const pti_llm_model *m;
    pti_kv_cache *c;
    const pti_llm_run *runs;
    int32_t n_runs, n_tokens;
    pt_tensor *pos; /* int32 [T] */
} fwd;

static pt_tensor *rms(const fwd *f, const pt_tensor *x, const pt_tensor *w)
{
    int64_t d = w->shape[0];
    return pt_rms_norm(x, 1, &d, w, f->m->hp.rms_eps);
}

static pt_tensor *heads(const pt_tensor *x, int64_t t, int64_t h, int64_t d)
{
    return pt_reshape(x, PT_SHAPE(t, h, d));
}

/* q/k/v projections of h [T, E] into [T, H, D] tensors. */
static bool project_qkv(const fwd *f, const pti_llm_layer *l, const pt_tensor *h, pt_tensor **q,
                        pt_tensor **k, pt_tensor **v)
{
    const pti_llm_hparams *hp = &f->m->hp;
    const int64_t T = f->n_tokens, qd = (int64_t)hp->n_head * hp->head_dim_k;
    const int64_t kd = (int64_t)hp->n_head_kv * hp->head_dim_k;
    const int64_t vd = (int64_t)hp->n_head_kv * hp->head_dim_v;
    pt_tensor *qf, *kf, *vf;
    if (l->wqkv) {
        pt_tensor *qkv = pt_linear(h, l->wqkv, l->bqkv);
        qf = pt_narrow(qkv, 1, 0, qd);
        kf = pt_narrow(qkv, 1, qd, kd);
        vf = pt_narrow(qkv, 1, qd + kd, vd);
    } else {
        qf = pt_linear(h, l->wq, l->bq);
        kf = pt_linear(h, l->wk, l->bk);
        vf = pt_linear(h, l->wv, l->bv);
    }
    *q = heads(qf, T, hp->n_head, hp->head_dim_k);
    *k = heads(kf, T, hp->n_head_kv, hp->head_dim_k);
    *v = heads(vf, T, hp->n_head_kv, hp->head_dim_v);
    return *q && *k && *v;
}

static pt_rope_opts rope_opts(const fwd *f, bool swa)
{
    const pti_llm_hparams *hp = &f->m->hp;
    pt_rope_opts o = {
        .mode = hp->rope_mode,
        .n_rot = hp->n_rot,
        .freq_base = swa ? hp->rope_base_swa : hp->rope_base,
        .freq_scale = swa ? hp->rope_scale_swa : hp->rope_scale,
        .freq_factors = f->m->rope_freqs,
        .ext_factor = hp->yarn_ext_factor,
        .attn_factor = hp->yarn_attn_factor,
        .beta_fast = hp->yarn_beta_fast,
        .beta_slow = hp->yarn_beta_slow,
        .n_ctx_orig = hp->yarn_n_ctx_orig,
    };
    return o;
}

/* Writes each run's k/v rows into its slot of the layer's cache and attends; returns the
 * attention output [T, Hq * Dv]. */
static pt_tensor *attend(const fwd *f, int il, const pt_tensor *q, const pt_tensor *k,
                         const pt_tensor *v)
{
    const pti_llm_hparams *hp = &f->m->hp;
    const pti_llm_layer *l = &f->m->layers[il];
    pt_tensor *kc = f->c->k[il], *vc = f->c->v[il];
    pt_tensor *out = f->n_runs == 1 ? NULL
                                    : pt_empty(PT_SHAPE(f->n_tokens, hp->n_head, hp->head_dim_v),
                                               PT_FLOAT32, f->m->device);
    pt_attention_kv_opts ao = {.scale = hp->attn_scale != 0.0f ? 1.0 : 0.0,
                               .window = l->swa ? hp->n_swa : 0};
    for (int32_t r = 0; r < f->n_runs; r++) {
        const pti_llm_run *run = &f->runs[r];
        pt_tensor *kslot = pt_select(kc, 0, run->slot), *vslot = pt_select(vc, 0, run->slot);
        pt_tensor *kdst = pt_narrow(kslot, 0, run->pos0, run->n);
        pt_tensor *vdst = pt_narrow(vslot, 0, run->pos0, run->n);
        if (!kdst || !vdst || pt_copy_(kdst, pt_narrow(k, 0, run->t0, run->n)) != PT_OK ||
            pt_copy_(vdst, pt_narrow(v, 0, run->t0, run->n)) != PT_OK)
            return NULL;
        ao.q_pos0 = run->pos0;
        pt_tensor *a = pt_attention_kv(pt_narrow(q, 0, run->t0, run->n),
                                       pt_narrow(kslot, 0, 0, run->pos0 + run->n),
                                       pt_narrow(vslot, 0, 0, run->pos0 + run->n), &ao);
        if (!a)
            return NULL;
        if (!out)
            out = a;
        else if (pt_copy_(pt_narrow(out, 0, run->t0, run->n), a) != PT_OK)
            return NULL;
    }
    return pt_reshape(out, PT_SHAPE(f->n_tokens, (int64_t)hp->n_head * hp->head_dim_v));
}

static pt_tensor *attention_block(const fwd *f, int il, const pt_tensor *x)
{
    const pti_llm_hparams *hp = &f->m->hp;
    const pti_llm_layer *l = &f->m->layers[il];
    pt_tensor *q, *k, *v;
    if (!project_qkv(f, l, rms(f, x, l->attn_norm), &q, &k, &v))
        return NULL;
    if (l->q_norm) {
        q = rms(f, q, l->q_norm);
        k = rms(f, k, l->k_norm);
    }
    pt_rope_opts ro = rope_opts(f, l->swa);
    q = pt_rope(q, f->pos, &ro);
    k = pt_rope(k, f->pos, &ro);
    if (hp->attn_scale != 0.0f)
        q = pt_mul_scalar(q, hp->attn_scale);
    if (!q || !k)
        return NULL;
    pt_tensor *o = pt_linear(attend(f, il, q, k, v), l->wo, l->bo);
    return l->attn_post_norm ? rms(f, o, l->attn_post_norm) : o;
}

/* GELU as ggml computes it on the CPU: a table over float16 inputs holding float16 results
 * (inputs beyond +-10 pass through or give 0). Rounding like it keeps us within llama.cpp's
 * numbers. */
static pt_tensor *gelu_f16(const pt_tensor *x, const pt_gelu_opts *o)
{
    pt_tensor *h = pt_to_dtype(x, PT_FLOAT16);
    pt_tensor *y = pt_to_dtype(pt_gelu_ex(h, o), PT_FLOAT32);
    return y;
}

static pt_tensor *ffn_block(const fwd *f, const pti_llm_layer *l, const pt_tensor *x)
{
    const pti_llm_hparams *hp = &f->m->hp;
    pt_tensor *h = rms(f, x, l->ffn_norm), *gate, *up;
    if (l->w_gate) {
        gate = pt_linear(h, l->w_gate, NULL);
        up = pt_linear(h, l->w_up, NULL);
    } else { /* phi3: gate and up stacked in one matrix */
        pt_tensor *gu = pt_linear(h, l->w_up, NULL);
        gate = pt_narrow(gu, 1, 0, hp->n_ff);
        up = pt_narrow(gu, 1, hp->n_ff, hp->n_ff);
    }
    pt_gelu_opts tanh_form = {.approximate = PT_GELU_TANH};
    pt_tensor *act = hp->gelu_ffn ? gelu_f16(gate, &tanh_form) : pt_silu(gate);
    pt_tensor *d = pt_linear(pt_mul(act, up), l->w_down, NULL);
    return l->ffn_post_norm ? rms(f, d, l->ffn_post_norm) : d;
}

/* x + attention, then + feed-forward; the result is kept in the caller's scope. */
static pt_tensor *decoder_block(const fwd *f, int il, pt_tensor *x)
{
    pt_scope_begin();
    pt_tensor *h = pt_add(x, attention_block(f, il, x));
    pt_tensor *out = h ? pt_add(h, ffn_block(f, &f->m->layers[il], h)) : NULL;
    if (out)
        pt_keep(out);
    pt_scope_end();
    return out;
}

/* ---- the whole model ----------------------------------------------------------------------------
 */

static bool check_batch(const pti_kv_cache *c, int32_t n_tokens, const pti_llm_run *runs,
                        int32_t n_runs)
{
    int32_t next = 0;
    for (int32_t r = 0; r < n_runs; r++) {
        const pti_llm_run *run = &runs[r];
        if (run->t0 != next || run->n < 1 || run->slot < 0 || run->slot >= c->n_slots ||
            run->pos0 < 0 || run->pos0 > c->n_ctx - run->n) {
            pti_error(PT_ERR_INVALID_ARG,
                      "pti_llm_forward: run %d (slot %d, positions %d..%d) "
                      "does not fit the batch or the cache of %d positions",
                      (int)r, (int)run->slot, (int)run->pos0, (int)(run->pos0 + run->n - 1),
                      (int)c->n_ctx);
            return false;
        }
        next += run->n;
    }
    if (next != n_tokens || n_tokens < 1) {
        pti_error(PT_ERR_INVALID_ARG, "pti_llm_forward: runs cover %d of %d tokens", (int)next,
                  (int)n_tokens);
        return false;
    }
    return true;
}

/* A host-built index tensor on the model's device (the same tensor on the CPU). */
static pt_tensor *on_model_device(const pti_llm_model *m, pt_tensor *host)
{
    return host && m->device.type != PT_DEVICE_CPU ? pt_to(host, m->device) : host;
}

/* int64 token ids [T] (checked against the vocabulary) and int32 positions [T], on the
 * model's device. */
static bool batch_inputs(const pti_llm_model *m, const int32_t *tokens, int32_t n_tokens,
                         const pti_llm_run *runs, int32_t n_runs, pt_tensor **ids, pt_tensor **pos)
{
    *ids = pt_empty(PT_SHAPE(n_tokens), PT_INT64, pt_cpu());
    *pos = pt_empty(PT_SHAPE(n_tokens), PT_INT32, pt_cpu());
    if (!*ids || !*pos)
        return false;
    int64_t *id = pt_data_ptr(*ids);
    int32_t *p = pt_data_ptr(*pos);
    for (int32_t t = 0; t < n_tokens; t++) {
        if (tokens[t] < 0 || tokens[t] >= m->hp.n_vocab) {
            pti_error(PT_ERR_INVALID_ARG,
                      "pti_llm_forward: token id %d is outside the "
                      "vocabulary of %d",
                      (int)tokens[t], (int)m->hp.n_vocab);
            return false;
        }
        id[t] = tokens[t];
    }
    for (int32_t r = 0; r < n_runs; r++)
        for (int32_t i = 0; i < runs[r].n; i++)
            p[runs[r].t0 + i] = runs[r].pos0 + i;
    *ids = on_model_device(m, *ids);
    *pos = on_model_device(m, *pos);
    return *ids && *pos;
}

static pt_tensor *embed(const pti_llm_model *m, const pt_tensor *ids)
{
    pt_tensor *x = pt_embedding(m->tok_embd, ids);
    if (x && x->dtype != PT_FLOAT32)
        x = pt_to_dtype(x, PT_FLOAT32);
    if (x && m->hp.embd_scale)
        x = pt_mul_scalar(x, (double)sqrtf((float)m->hp.n_embd));
    return x;
}

/* The final norm and output projection of the rows of x whose logits are wanted. */
static pt_tensor *logits_of(const pti_llm_model *m, const pt_tensor *x, const pti_llm_run *runs,
                            int32_t n_runs)
{
    int32_t n_want = 0;
    for (int32_t r = 0; r < n_runs; r++)
        n_want += runs[r].want_logits;
    pt_tensor *rows = pt_empty(PT_SHAPE(n_want), PT_INT64, pt_cpu());
    if (!rows)
        return NULL;
    int64_t *ri = pt_data_ptr(rows);
    for (int32_t r = 0, j = 0; r < n_runs; r++)
        if (runs[r].want_logits)
            ri[j++] = runs[r].t0 + runs[r].n - 1;
    int64_t E = m->hp.n_embd;
    rows = on_model_device(m, rows);
    pt_tensor *h = pt_rms_norm(pt_index_select(x, 0, rows), 1, &E, m->output_norm, m->hp.rms_eps);
    return pt_linear(h, m->output, NULL);
}

/* The output-normed hidden states of all tokens of the runs with want_hidden (NULL, with no
 * error, when there are none). */
static pt_tensor *hidden_of(const pti_llm_model *m, const pt_tensor *x, const pti_llm_run *runs,
                            int32_t n_runs)
{
    int32_t n_want = 0;
    for (int32_t r = 0; r < n_runs; r++)
        n_want += runs[r].want_hidden ? runs[r].n : 0;
    if (n_want == 0)
        return NULL;
    pt_tensor *rows = pt_empty(PT_SHAPE(n_want), PT_INT64, pt_cpu());
    if (!rows)
        return NULL;
    int64_t *ri = pt_data_ptr(rows);
    for (int32_t r = 0, j = 0; r < n_runs; r++)
        for (int32_t i = 0; runs[r].want_hidden && i < runs[r].n; i++)
            ri[j++] = runs[r].t0 + i;
    int64_t E = m->hp.n_embd;
    rows = on_model_device(m, rows);
    return pt_rms_norm(pt_index_select(x, 0, rows), 1, &E, m->output_norm, m->hp.rms_eps);
}

/* The result t on the CPU, where the sampler and the callers read it. */
static pt_tensor *on_host(pt_tensor *t)
{
    return t && t->storage->device.type != PT_DEVICE_CPU ? pt_to(t, pt_cpu()) : t;
}

static bool wants_hidden(const pti_llm_run *runs, int32_t n_runs)
{
    for (int32_t r = 0; r < n_runs; r++)
        if (runs[r].want_hidden)
            return true;
    return false;
}

pt_status pti_llm_forward_ex(const pti_llm_model *m, pti_kv_cache *c, const int32_t *tokens,
                             int32_t n_tokens, const pti_llm_run *runs, int32_t n_runs,
                             pt_tensor **logits, pt_tensor **hidden)
{
    *logits = NULL;
    if (hidden)
        *hidden = NULL;
    if (!m || !c || !tokens || !runs || n_runs < 1)
        return pti_error(PT_ERR_INVALID_ARG, "pti_llm_forward: empty batch");
    if (!check_batch(c, n_tokens, runs, n_runs))
        return pt_last_status();
    pt_scope_begin();
    fwd f = {.m = m, .c = c, .runs = runs, .n_runs = n_runs, .n_tokens = n_tokens};
    pt_tensor *ids, *lg = NULL, *hid = NULL;
    bool want_hid = hidden && wants_hidden(runs, n_runs);
    if (batch_inputs(m, tokens, n_tokens, runs, n_runs, &ids, &f.pos)) {
        pt_tensor *x = embed(m, ids);
        for (int il = 0; x && il < m->hp.n_layer; il++) {
            pt_tensor *next = decoder_block(&f, il, x);
            pt_release(x); /* layer il's input is not needed any more */
            x = next;
        }
        lg = on_host(x ? logits_of(m, x, runs, n_runs) : NULL);
        hid = lg && want_hid ? on_host(hidden_of(m, x, runs, n_runs)) : NULL;
    }
    bool ok = lg && (!want_hid || hid);
    if (ok) {
        pt_keep(lg);
        *logits = lg;
        if (hid) {
            pt_keep(hid);
            *hidden = hid;
        }
    }
    pt_scope_end();
    return ok ? PT_OK : pt_last_status();
}

pt_tensor *pti_llm_forward(const pti_llm_model *m, pti_kv_cache *c, const int32_t *tokens,
                           int32_t n_tokens, const pti_llm_run *runs, int32_t n_runs)
{
    pt_tensor *logits = NULL;
    return pti_llm_forward_ex(m, c, tokens, n_tokens, runs, n_runs, &logits, NULL) == PT_OK ? logits
                                                                                            : NULL;
}

/* ---- the ops the engine needs --------------------------------------------------------------
 */

/* What each op is used for (tests/internal/test_llm_ops.c runs every architecture on a CPU
 * backend with only these slots filled, and on a device of its own backend): */
static const pti_llm_op_need required_ops[] = {
    {PTI_OP_fill, PT_FLOAT32},            /* the zeroed KV cache (pti_kv_cache_new) */
    {PTI_OP_fill, PT_FLOAT16},            /* ... when it holds float16 (the default) */
    {PTI_OP_copy, PT_FLOAT32},            /* k/v rows into the cache, contiguous copies */
    {PTI_OP_copy, PT_FLOAT16},            /* the float16 cache; gemma3's GELU in float16 */
    {PTI_OP_embedding_quant, PT_FLOAT32}, /* token embedding rows of a block-dtype table */
    {PTI_OP_index_select, PT_FLOAT32},    /* float embedding tables, the rows wanting logits */
    {PTI_OP_quant_linear, PT_FLOAT32},    /* projections with block / float16 / bfloat16 weights */
    {PTI_OP_mm, PT_FLOAT32},              /* projections with float32 weights (pt_linear) */
    {PTI_OP_rms_norm, PT_FLOAT32},        /* pre/post, q/k and output norms */
    {PTI_OP_rope, PT_FLOAT32},            /* rotary position embedding of q and k */
    {PTI_OP_attention_kv, PT_FLOAT32},    /* attention of the new queries against the cache */
    {PTI_OP_add, PT_FLOAT32},             /* residuals, biases */
    {PTI_OP_mul, PT_FLOAT32},             /* gate * up, attention and embedding scales */
    {PTI_OP_silu, PT_FLOAT32},            /* SwiGLU feed-forward */
    {PTI_OP_gelu, PT_FLOAT16},            /* GeGLU feed-forward (gemma3, as ggml: in float16) */
};

const pti_llm_op_need *pti_llm_required_ops(int *n)
{
    *n = (int)(sizeof required_ops / sizeof required_ops[0]);
    return required_ops;
}

/* Appends ", name" (or "name") to buf, ending in "..." when it does not fit. */
static void append_name(char *buf, size_t cap, const char *name)
{
    size_t len = strlen(buf);
    int w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", name);
    if (w < 0 || (size_t)w >= cap - len)
        snprintf(buf + (cap > 4 ? cap - 4 : 0), cap > 4 ? 4 : cap, "...");
}

int pti_llm_missing_ops(pt_device d, char *buf, size_t cap)
{
    if (cap)
        buf[0] = '\0';
    const pt_backend *b = pti_backend_for(d);
    if (!b)
        return -1;
    int n_missing = 0, n = 0;
    const pti_llm_op_need *need = pti_llm_required_ops(&n);
    for (int i = 0; i < n; i++) {
        if (pt_backend_supports(d.type, (int)need[i].op, need[i].dtype))
            continue;
        n_missing++;
        char name[64];
        if (need[i].dtype == PT_FLOAT32)
            snprintf(name, sizeof name, "%s", pti_op_names[need[i].op]);
        else
            snprintf(name, sizeof name, "%s (%s)", pti_op_names[need[i].op],
                     pt_dtype_name(need[i].dtype));
        if (cap)
            append_name(buf, cap, name);
    }
    return n_missing;
}
