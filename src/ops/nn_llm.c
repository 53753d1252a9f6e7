/* Front-ends of the LLM inference ops of the nn family: pt_rope (rotary position embedding,
 * ggml_rope_ext's semantics including YaRN) and pt_attention_kv (causal, sliding-window,
 * grouped-query attention of new queries against a float16/float32 key/value cache, as
 * llama.cpp's KQ -> soft_max_ext -> KQV path). They check arguments and compute the float32
 * constants ggml derives from the options, then dispatch to the kernels in
 * src/backends/<device>/nn_llm.c.
 *
 * Autograd: these are inference ops and record no gradient. Rather than return a result that
 * silently drops the graph, they fail with PT_ERR_UNSUPPORTED when grad mode is on and an
 * input requires grad (call them under pt_no_grad_begin, or on tensors that do not require
 * grad). */
#include <math.h>

#include "../graph/node.h"
#include "common.h"
#include "nn_params.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Fails (PT_ERR_UNSUPPORTED) when a gradient would have to be recorded. */
static bool check_no_grad(const char *op, int n, const pt_tensor *const *ins)
{
    if (!pti_grad_recording(n, ins))
        return true;
    pti_error(PT_ERR_UNSUPPORTED,
              "%s: inference-only op (no gradient): an input requires grad while grad mode is "
              "on; call it under pt_no_grad_begin()",
              op);
    return false;
}

/* Runs a one-output kernel; releases out and returns NULL on failure. */
static pt_tensor *run(pti_op kop, pti_call *c, pt_tensor *out)
{
    if (!out)
        return NULL;
    if (out->numel == 0)
        return out;
    c->n_out = 1;
    c->out[0] = out;
    if (pti_dispatch(kop, c) != PT_OK) {
        pt_release(out);
        return NULL;
    }
    return out;
}

/* ---- rope ---------------------------------------------------------------------------------- */

/* ggml's YaRN correction dim: the dim index at which a rotation count of n_rot happens over
 * n_ctx_orig positions (solving n_rot = n_ctx_orig / (2 pi base^(2i/n_dims)) for i), float32
 * as ggml computes it. */
static float yarn_corr_dim(int64_t n_dims, int64_t n_ctx_orig, float n_rot, float base)
{
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

/* Validates opts and fills the kernel constants (defaults for zero fields). */
static bool rope_params(const char *op, const pt_tensor *x, const pt_rope_opts *o,
                        pti_rope_params *p)
{
    static const pt_rope_opts dflt = {0};
    if (!o)
        o = &dflt;
    p->t = x->shape[0];
    p->h = x->shape[1];
    p->d = x->shape[2];
    if (o->mode != PT_ROPE_NORM && o->mode != PT_ROPE_NEOX)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: opts->mode must be PT_ROPE_NORM or PT_ROPE_NEOX, got %d", op,
                         (int)o->mode) == PT_OK;
    p->neox = o->mode == PT_ROPE_NEOX;
    p->n_rot = o->n_rot ? o->n_rot : p->d;
    if (p->n_rot < 0 || p->n_rot > p->d || p->n_rot % 2 != 0)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: opts->n_rot must be even and in [0, D = %lld], got %lld", op,
                         (long long)p->d, (long long)o->n_rot) == PT_OK;
    double base = o->freq_base ? o->freq_base : 10000.0;
    double fscale = o->freq_scale ? o->freq_scale : 1.0;
    if (!(base > 0) || !isfinite(base) || !(fscale > 0) || !isfinite(fscale))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: opts->freq_base (%g) and opts->freq_scale (%g) must be positive "
                         "and finite",
                         op, o->freq_base, o->freq_scale) == PT_OK;
    double beta_fast = o->beta_fast ? o->beta_fast : 32.0;
    double beta_slow = o->beta_slow ? o->beta_slow : 1.0;
    int64_t n_ctx = o->n_ctx_orig ? o->n_ctx_orig : 4096;
    if (n_ctx < 0 || !(beta_fast > 0) || !(beta_slow > 0))
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: opts->beta_fast (%g), opts->beta_slow (%g) and opts->n_ctx_orig "
                         "(%lld) must be positive",
                         op, o->beta_fast, o->beta_slow, (long long)o->n_ctx_orig) == PT_OK;
    float fbase = (float)base;
    int64_t nr = p->n_rot > 0 ? p->n_rot : 1;
    p->theta_scale = powf(fbase, -2.0f / (float)nr);
    p->freq_scale = (float)fscale;
    p->ext_factor = (float)o->ext_factor;
    p->mscale = o->attn_factor ? (float)o->attn_factor : 1.0f;
    float lo = floorf(yarn_corr_dim(nr, n_ctx, (float)beta_fast, fbase));
    float hi = ceilf(yarn_corr_dim(nr, n_ctx, (float)beta_slow, fbase));
    p->corr_dims[0] = lo > 0 ? lo : 0;
    p->corr_dims[1] = hi < (float)(nr - 1) ? hi : (float)(nr - 1);
    return true;
}

pt_tensor *pt_rope(const pt_tensor *x, const pt_tensor *pos, const pt_rope_opts *opts)
{
    const char *op = "pt_rope";
    if (!PTI_CHECK_ARG(x, op, "x") || !PTI_CHECK_ARG(pos, op, "pos"))
        return NULL;
    const pt_tensor *ff = opts ? opts->freq_factors : NULL;
    const pt_tensor *all[3] = {x, pos, ff};
    if (!pti_check_same_device(op, 3, all) || !check_no_grad(op, 3, all))
        return NULL;
    if (x->dtype != PT_FLOAT32 || x->ndim != 3)
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: x must be a float32 [T, H, D] tensor, got %s", op,
                              pti_tensor_desc(x));
    if ((pos->dtype != PT_INT32 && pos->dtype != PT_INT64) || pos->ndim != 1 ||
        pos->shape[0] != x->shape[0])
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: pos must be an int32 or int64 [T] tensor with T = %lld (x is "
                              "%s), got %s",
                              op, (long long)x->shape[0], pti_shape_str(x->ndim, x->shape),
                              pti_tensor_desc(pos));
    pti_rope_params p;
    if (!rope_params(op, x, opts, &p))
        return NULL;
    if (ff && (ff->dtype != PT_FLOAT32 || ff->ndim != 1 || ff->shape[0] != p.n_rot / 2))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "%s: opts->freq_factors must be a float32 [n_rot/2 = %lld] tensor, "
                              "got %s",
                              op, (long long)(p.n_rot / 2), pti_tensor_desc(ff));
    pt_tensor *posc = pt_contiguous(pos);
    pt_tensor *ffc = ff ? pt_contiguous(ff) : NULL;
    pt_tensor *out = NULL;
    if (posc && (!ff || ffc)) {
        out = pti_tensor_new(3, x->shape, PT_FLOAT32, x->storage->device);
        pti_call c = {.n_in = 3, .in = {x, posc, ffc}, .params = &p};
        out = run(PTI_OP_rope, &c, out);
    }
    pt_release(posc);
    pt_release(ffc);
    return out;
}

/* ---- attention_kv ---------------------------------------------------------------------------- */

/* k or v (`arg`) must be a float16/float32 [S, Hkv, dim] tensor. */
static bool check_cache(const char *op, const char *arg, const pt_tensor *t)
{
    if ((t->dtype == PT_FLOAT16 || t->dtype == PT_FLOAT32) && t->ndim == 3)
        return true;
    pti_error(PT_ERR_INVALID_ARG,
              "%s: %s must be a float16 or float32 [S, Hkv, dim] tensor, got %s", op, arg,
              pti_tensor_desc(t));
    return false;
}

/* t itself (a new reference) when its last dim is contiguous, else a contiguous copy. */
static pt_tensor *last_dim_contiguous(const pt_tensor *t)
{
    if (t->stride[2] == 1 || t->shape[2] <= 1)
        return pti_alias(t);
    return pt_contiguous(t);
}

static bool attention_kv_check(const char *op, const pt_tensor *q, const pt_tensor *k,
                               const pt_tensor *v, const pt_attention_kv_opts *o,
                               pti_attention_kv_params *p)
{
    if (q->dtype != PT_FLOAT32 || q->ndim != 3)
        return pti_error(PT_ERR_INVALID_ARG, "%s: q must be a float32 [T, Hq, D] tensor, got %s",
                         op, pti_tensor_desc(q)) == PT_OK;
    if (!check_cache(op, "k", k) || !check_cache(op, "v", v))
        return false;
    if (k->dtype != v->dtype)
        return pti_error(PT_ERR_INVALID_ARG, "%s: k and v must have the same dtype, got %s and %s",
                         op, pti_tensor_desc(k), pti_tensor_desc(v)) == PT_OK;
    *p = (pti_attention_kv_params){.t = q->shape[0],
                                   .hq = q->shape[1],
                                   .d = q->shape[2],
                                   .s = k->shape[0],
                                   .hkv = k->shape[1],
                                   .dv = v->shape[2]};
    if (k->shape[2] != p->d || v->shape[0] != p->s || v->shape[1] != p->hkv)
        return pti_error(PT_ERR_SHAPE,
                         "%s: expected q [T, Hq, D], k [S, Hkv, D], v [S, Hkv, Dv], got q %s, "
                         "k %s, v %s",
                         op, pti_shape_str(q->ndim, q->shape), pti_shape_str(k->ndim, k->shape),
                         pti_shape_str(v->ndim, v->shape)) == PT_OK;
    if (p->d == 0)
        return pti_error(PT_ERR_SHAPE, "%s: the head dim D of q and k must be > 0", op) == PT_OK;
    if (p->hkv == 0 ? p->hq != 0 : p->hq % p->hkv != 0)
        return pti_error(PT_ERR_SHAPE,
                         "%s: the query heads Hq = %lld must be a multiple of the key/value heads "
                         "Hkv = %lld (grouped-query attention)",
                         op, (long long)p->hq, (long long)p->hkv) == PT_OK;
    static const pt_attention_kv_opts dflt = {0};
    if (!o)
        o = &dflt;
    if (o->q_pos0 < 0 || o->window < 0)
        return pti_error(PT_ERR_INVALID_ARG,
                         "%s: opts->q_pos0 (%lld) and opts->window (%lld) must be >= 0", op,
                         (long long)o->q_pos0, (long long)o->window) == PT_OK;
    if (o->q_pos0 > INT64_MAX - p->t || p->s < o->q_pos0 + p->t)
        return pti_error(PT_ERR_SHAPE,
                         "%s: the cache holds S = %lld positions but the queries reach position "
                         "q_pos0 + T - 1 = %lld + %lld - 1 (S >= q_pos0 + T is required)",
                         op, (long long)p->s, (long long)o->q_pos0, (long long)p->t) == PT_OK;
    if (!isfinite(o->scale))
        return pti_error(PT_ERR_INVALID_ARG, "%s: opts->scale must be finite, got %g", op,
                         o->scale) == PT_OK;
    p->q_pos0 = o->q_pos0;
    p->window = o->window;
    p->scale = o->scale != 0 ? (float)o->scale : (float)(1.0 / sqrt((double)p->d));
    return true;
}

pt_tensor *pt_attention_kv(const pt_tensor *q, const pt_tensor *k, const pt_tensor *v,
                           const pt_attention_kv_opts *opts)
{
    const char *op = "pt_attention_kv";
    if (!PTI_CHECK_ARG(q, op, "q") || !PTI_CHECK_ARG(k, op, "k") || !PTI_CHECK_ARG(v, op, "v"))
        return NULL;
    const pt_tensor *all[3] = {q, k, v};
    if (!pti_check_same_device(op, 3, all) || !check_no_grad(op, 3, all))
        return NULL;
    pti_attention_kv_params p;
    if (!attention_kv_check(op, q, k, v, opts, &p))
        return NULL;
    pt_tensor *qc = pt_contiguous(q);
    pt_tensor *kc = last_dim_contiguous(k), *vc = last_dim_contiguous(v);
    pt_tensor *out = NULL;
    if (qc && kc && vc) {
        int64_t shape[3] = {p.t, p.hq, p.dv};
        out = pti_tensor_new(3, shape, PT_FLOAT32, q->storage->device);
        pti_call c = {.n_in = 3, .in = {qc, kc, vc}, .params = &p};
        out = run(PTI_OP_attention_kv, &c, out);
    }
    pt_release(qc);
    pt_release(kc);
    pt_release(vc);
    return out;
}
