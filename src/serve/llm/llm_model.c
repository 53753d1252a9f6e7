/* Reads an LLM's hyperparameters and weights from a GGUF file: the <arch>.* metadata keys and
 * the blk.N.* tensor names llama.cpp defines (src/llama-arch.cpp, llama-model.cpp), with each
 * tensor's shape checked against the hyperparameters so a broken or mislabelled file is refused
 * here, naming the tensor, instead of failing inside an op. Weights are zero-copy views of the
 * mapping in their GGUF dtype. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "llm_model.h"

/* ---- metadata ----------------------------------------------------------------------------------
 */

static int64_t find_arch_key(const pt_gguf *g, const char *arch, const char *suffix)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return pt_gguf_find_key(g, key);
}

/* An integer key <arch>.<suffix>: its value in *out (in [lo, hi]), the default when absent and
 * not required. */
static bool arch_int(const pt_gguf *g, const char *arch, const char *suffix, bool required,
                     int64_t lo, int64_t hi, int32_t *out)
{
    int64_t i = find_arch_key(g, arch, suffix), v;
    if (i < 0) {
        if (required)
            pti_error(PT_ERR_FORMAT, "pt_llm_load: metadata key '%s.%s' is missing", arch, suffix);
        return !required;
    }
    if (pt_gguf_kv_type(g, i) == PT_GGUF_ARRAY) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "pt_llm_load: '%s.%s' varies per layer (an array); not supported", arch, suffix);
        return false;
    }
    if (pt_gguf_get_int(g, i, &v) != PT_OK)
        return false;
    if (v < lo || v > hi) {
        pti_error(PT_ERR_FORMAT, "pt_llm_load: '%s.%s' = %lld is out of range [%lld, %lld]", arch,
                  suffix, (long long)v, (long long)lo, (long long)hi);
        return false;
    }
    *out = (int32_t)v;
    return true;
}

static bool arch_float(const pt_gguf *g, const char *arch, const char *suffix, float lo, float hi,
                       float *out)
{
    int64_t i = find_arch_key(g, arch, suffix);
    double v;
    if (i < 0)
        return true;
    if (pt_gguf_get_float(g, i, &v) != PT_OK)
        return false;
    if (!(v >= lo && v <= hi)) {
        pti_error(PT_ERR_FORMAT, "pt_llm_load: '%s.%s' = %g is out of range [%g, %g]", arch, suffix,
                  v, (double)lo, (double)hi);
        return false;
    }
    *out = (float)v;
    return true;
}

static bool parse_arch(const pt_gguf *g, pti_llm_hparams *hp)
{
    int64_t i = pt_gguf_find_key(g, "general.architecture");
    size_t len = 0;
    const char *name = i >= 0 ? pt_gguf_get_str(g, i, &len) : NULL;
    if (!name) {
        pti_error(PT_ERR_FORMAT, "pt_llm_load: metadata key 'general.architecture' is missing");
        return false;
    }
    static const struct {
        const char *name;
        pti_llm_arch arch;
    } known[] = {{"llama", PTI_ARCH_LLAMA}, {"mistral", PTI_ARCH_LLAMA}, {"qwen2", PTI_ARCH_QWEN2},
                 {"qwen3", PTI_ARCH_QWEN3}, {"gemma3", PTI_ARCH_GEMMA3}, {"phi3", PTI_ARCH_PHI3}};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        if (strlen(known[k].name) == len && memcmp(known[k].name, name, len) == 0) {
            hp->arch = known[k].arch;
            snprintf(hp->arch_name, sizeof hp->arch_name, "%s", known[k].name);
            return true;
        }
    }
    pti_error(PT_ERR_UNSUPPORTED,
              "pt_llm_load: architecture '%.*s' is not supported (supported: llama, mistral, "
              "qwen2, qwen3, gemma3, phi3)",
              (int)(len > 64 ? 64 : len), name);
    return false;
}

/* rope.scaling.* keys: linear scaling and YaRN (llama.cpp's defaults for the rest). */
static bool parse_rope_scaling(const pt_gguf *g, const char *a, pti_llm_hparams *hp)
{
    float factor = 0.0f;
    if (!arch_float(g, a, "rope.scaling.factor", 0.0f, 1e6f, &factor) ||
        !arch_float(g, a, "rope.scale_linear", 0.0f, 1e6f, &factor))
        return false;
    int64_t ti = find_arch_key(g, a, "rope.scaling.type");
    size_t tl = 0;
    const char *type = ti >= 0 ? pt_gguf_get_str(g, ti, &tl) : NULL;
    bool yarn = type && tl == 4 && memcmp(type, "yarn", 4) == 0;
    bool none = !type || (tl == 4 && memcmp(type, "none", 4) == 0);
    if (type && !yarn && !none && !(tl == 6 && memcmp(type, "linear", 6) == 0)) {
        pti_error(PT_ERR_UNSUPPORTED, "pt_llm_load: rope scaling type '%.*s' is not supported",
                  (int)(tl > 32 ? 32 : tl), type);
        return false;
    }
    hp->rope_scale = (!none && factor > 0.0f) ? 1.0f / factor : 1.0f;
    hp->yarn_attn_factor = 1.0f;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->yarn_n_ctx_orig = hp->n_ctx_train;
    if (yarn) {
        hp->yarn_ext_factor = 1.0f;
        if (!arch_float(g, a, "rope.scaling.attn_factor", 0.0f, 1e3f, &hp->yarn_attn_factor) ||
            !arch_int(g, a, "rope.scaling.original_context_length", false, 1, INT32_MAX,
                      &hp->yarn_n_ctx_orig))
            return false;
    }
    return true;
}

static bool parse_hparams(const pt_gguf *g, pti_llm_hparams *hp)
{
    if (!parse_arch(g, hp))
        return false;
    const char *a = hp->arch_name;
    int64_t ek = find_arch_key(g, a, "expert_count");
    int64_t experts = 0;
    if (ek >= 0 && pt_gguf_get_int(g, ek, &experts) == PT_OK && experts > 0) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "pt_llm_load: mixture-of-experts models (%s.expert_count "
                  "= %lld) are not supported",
                  a, (long long)experts);
        return false;
    }
    const int32_t big = 1 << 20;
    if (!arch_int(g, a, "context_length", true, 1, INT32_MAX, &hp->n_ctx_train) ||
        !arch_int(g, a, "embedding_length", true, 1, big, &hp->n_embd) ||
        !arch_int(g, a, "block_count", true, 1, 4096, &hp->n_layer) ||
        !arch_int(g, a, "feed_forward_length", true, 1, big, &hp->n_ff) ||
        !arch_int(g, a, "attention.head_count", true, 1, 4096, &hp->n_head))
        return false;
    hp->n_head_kv = hp->n_head;
    hp->head_dim_k = hp->n_embd / hp->n_head;
    if (!arch_int(g, a, "attention.head_count_kv", false, 1, hp->n_head, &hp->n_head_kv) ||
        !arch_int(g, a, "attention.key_length", false, 1, 4096, &hp->head_dim_k))
        return false;
    hp->head_dim_v = hp->head_dim_k;
    hp->n_rot = hp->head_dim_k;
    if (!arch_int(g, a, "attention.value_length", false, 1, 4096, &hp->head_dim_v) ||
        !arch_int(g, a, "rope.dimension_count", false, 2, hp->head_dim_k, &hp->n_rot))
        return false;
    if (hp->n_head % hp->n_head_kv != 0 || hp->n_rot % 2 != 0) {
        pti_error(PT_ERR_FORMAT,
                  "pt_llm_load: head_count %d is not a multiple of head_count_kv "
                  "%d, or rope.dimension_count %d is odd",
                  hp->n_head, hp->n_head_kv, hp->n_rot);
        return false;
    }
    hp->rms_eps = 1e-5f;
    hp->rope_base = 10000.0f;
    if (!arch_float(g, a, "attention.layer_norm_rms_epsilon", 0.0f, 1.0f, &hp->rms_eps) ||
        !arch_float(g, a, "rope.freq_base", 1.0f, 1e12f, &hp->rope_base) ||
        !parse_rope_scaling(g, a, hp))
        return false;
    hp->rope_mode = hp->arch == PTI_ARCH_LLAMA ? PT_ROPE_NORM : PT_ROPE_NEOX;
    hp->rope_base_swa = hp->rope_base;
    hp->rope_scale_swa = hp->rope_scale;
    hp->swa_pattern = 1;
    if (hp->arch == PTI_ARCH_GEMMA3) {
        /* llama.cpp: gemma3's sliding layers (five of every six) use base 10000, unscaled */
        if (!arch_int(g, a, "attention.sliding_window", false, 0, INT32_MAX, &hp->n_swa))
            return false;
        /* llama.cpp: five sliding layers in six unless sliding_window_pattern says otherwise */
        hp->swa_pattern = 6;
        if (!arch_int(g, a, "attention.sliding_window_pattern", false, 1, 4096, &hp->swa_pattern))
            return false;
        if (hp->n_swa == 0)
            hp->swa_pattern = 1;
        hp->rope_base_swa = 10000.0f;
        hp->rope_scale_swa = 1.0f;
        hp->embd_scale = true;
        hp->gelu_ffn = true;
        /* 27B (62 layers) scales by n_embd / n_head, the others by the head size */
        hp->attn_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                           : 1.0f / sqrtf((float)hp->head_dim_k);
    }
    /* phi3's sliding_window key is ignored, as llama.cpp does (its SWA is disabled there) */
    return true;
}

/* ---- tensors -----------------------------------------------------------------------------------
 */

typedef struct loader {
    pt_gguf *g;
    int64_t n_params;
    bool failed;
} loader;

/* The tensor `name` (printf-style) checked to have shape [d0] (d1 < 0) or [d0, d1]; NULL when
 * absent (an error unless optional). */
static pt_tensor *load_tensor(loader *L, bool optional, int64_t d0, int64_t d1, const char *fmt,
                              ...) __attribute__((format(printf, 5, 6)));

static pt_tensor *load_tensor(loader *L, bool optional, int64_t d0, int64_t d1, const char *fmt,
                              ...)
{
    if (L->failed)
        return NULL;
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    int64_t i = pt_gguf_find_tensor(L->g, name);
    if (i < 0) {
        if (!optional) {
            pti_error(PT_ERR_FORMAT, "pt_llm_load: tensor '%s' is missing", name);
            L->failed = true;
        }
        return NULL;
    }
    int nd = pt_gguf_tensor_ndim(L->g, i);
    const int64_t *sh = pt_gguf_tensor_shape(L->g, i);
    bool ok = d1 < 0 ? (nd == 1 && sh[0] == d0) : (nd == 2 && sh[0] == d0 && sh[1] == d1);
    if (!ok) {
        pti_error(PT_ERR_FORMAT,
                  "pt_llm_load: tensor '%s' has shape %s%lld%s%lld%s, expected "
                  "[%lld%s%lld]",
                  name, "[", (long long)sh[0], nd > 1 ? ", " : "", nd > 1 ? (long long)sh[1] : 0LL,
                  nd > 2 ? ", ...]" : "]", (long long)d0, d1 < 0 ? "" : ", ",
                  d1 < 0 ? 0LL : (long long)d1);
        L->failed = true;
        return NULL;
    }
    pt_dtype dt = pt_gguf_tensor_dtype(L->g, i);
    if (dt == PT_DTYPE_COUNT) {
        pti_error(PT_ERR_UNSUPPORTED,
                  "pt_llm_load: tensor '%s' has ggml type %s, which "
                  "PromeTorch cannot compute with",
                  name, pt_gguf_ggml_type_name(pt_gguf_tensor_ggml_type(L->g, i)));
        L->failed = true;
        return NULL;
    }
    pt_tensor *t = pt_gguf_tensor(L->g, i);
    if (!t) {
        L->failed = true;
        return NULL;
    }
    pti_scope_untrack(t); /* owned by the model, not by a scope the caller may have open */
    L->n_params += pt_gguf_tensor_numel(L->g, i);
    return t;
}

static bool load_layer(loader *L, const pti_llm_hparams *hp, int il, pti_llm_layer *l)
{
    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim_k;
    const int64_t kd = (int64_t)hp->n_head_kv * hp->head_dim_k;
    const int64_t vd = (int64_t)hp->n_head_kv * hp->head_dim_v;
    const int64_t od = (int64_t)hp->n_head * hp->head_dim_v, F = hp->n_ff;
    l->attn_norm = load_tensor(L, false, E, -1, "blk.%d.attn_norm.weight", il);
    l->wqkv = load_tensor(L, true, qd + kd + vd, E, "blk.%d.attn_qkv.weight", il);
    if (l->wqkv) {
        l->bqkv = load_tensor(L, true, qd + kd + vd, -1, "blk.%d.attn_qkv.bias", il);
    } else {
        l->wq = load_tensor(L, false, qd, E, "blk.%d.attn_q.weight", il);
        l->wk = load_tensor(L, false, kd, E, "blk.%d.attn_k.weight", il);
        l->wv = load_tensor(L, false, vd, E, "blk.%d.attn_v.weight", il);
        bool bias = hp->arch == PTI_ARCH_QWEN2;
        l->bq = load_tensor(L, !bias, qd, -1, "blk.%d.attn_q.bias", il);
        l->bk = load_tensor(L, !bias, kd, -1, "blk.%d.attn_k.bias", il);
        l->bv = load_tensor(L, !bias, vd, -1, "blk.%d.attn_v.bias", il);
    }
    l->wo = load_tensor(L, false, E, od, "blk.%d.attn_output.weight", il);
    l->bo = load_tensor(L, true, E, -1, "blk.%d.attn_output.bias", il);
    bool qk_norm = hp->arch == PTI_ARCH_QWEN3 || hp->arch == PTI_ARCH_GEMMA3;
    l->q_norm = load_tensor(L, !qk_norm, hp->head_dim_k, -1, "blk.%d.attn_q_norm.weight", il);
    l->k_norm = load_tensor(L, !qk_norm, hp->head_dim_k, -1, "blk.%d.attn_k_norm.weight", il);
    bool gemma = hp->arch == PTI_ARCH_GEMMA3;
    l->attn_post_norm = load_tensor(L, !gemma, E, -1, "blk.%d.post_attention_norm.weight", il);
    l->ffn_norm = load_tensor(L, false, E, -1, "blk.%d.ffn_norm.weight", il);
    l->ffn_post_norm = load_tensor(L, !gemma, E, -1, "blk.%d.post_ffw_norm.weight", il);
    l->w_gate = load_tensor(L, true, F, E, "blk.%d.ffn_gate.weight", il);
    /* without a gate tensor, ffn_up holds gate and up stacked (phi3) */
    l->w_up =
        load_tensor(L, false, l->w_gate || L->failed ? F : 2 * F, E, "blk.%d.ffn_up.weight", il);
    l->w_down = load_tensor(L, false, E, F, "blk.%d.ffn_down.weight", il);
    l->swa = hp->n_swa > 0 && il % hp->swa_pattern < hp->swa_pattern - 1;
    return !L->failed;
}

const char *pti_llm_file_type_name(int64_t ft)
{
    /* Ollama's fs/ggml FileType.String() over llama.cpp's llama_ftype numbering: the short
     * names both print, where llama.cpp's llama_model_ftype_name adds a description
     * ("Q4_K - Medium"). 4 is Ollama's MXFP4 (llama.cpp's retired Q4_1_SOME_F16); the types
     * Ollama does not name (IQ*, TQ*, llama.cpp's 38 MXFP4_MOE) it shows as "unknown". */
    static const char *const names[] = {
        [0] = "F32",     [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [4] = "MXFP4",
        [7] = "Q8_0",    [8] = "Q5_0",    [9] = "Q5_1",    [10] = "Q2_K",   [11] = "Q3_K_S",
        [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S", [15] = "Q4_K_M", [16] = "Q5_K_S",
        [17] = "Q5_K_M", [18] = "Q6_K",   [21] = "Q2_K_S", [32] = "BF16",
    };
    if (ft >= 0 && ft < (int64_t)(sizeof names / sizeof names[0]) && names[ft])
        return names[ft];
    return "unknown";
}

static void set_quant_name(pti_llm_model *m)
{
    int64_t i = pt_gguf_find_key(m->gguf, "general.file_type"), ft = -1;
    if (i >= 0 && pt_gguf_get_int(m->gguf, i, &ft) == PT_OK)
        snprintf(m->quant_name, sizeof m->quant_name, "%s", pti_llm_file_type_name(ft));
    else /* older files: the type of the first attention weight */
        snprintf(m->quant_name, sizeof m->quant_name, "%s", pt_dtype_name(m->layers[0].wo->dtype));
}

pti_llm_model *pti_llm_model_from_gguf(pt_gguf *g)
{
    pti_llm_model *m = pti_calloc(1, sizeof *m);
    if (!m) {
        pt_gguf_close(g);
        return NULL;
    }
    m->gguf = g;
    pti_llm_hparams *hp = &m->hp;
    if (!parse_hparams(g, hp)) {
        pti_llm_model_free(m);
        return NULL;
    }
    loader L = {.g = g};
    int64_t ti = pt_gguf_find_tensor(g, "token_embd.weight");
    if (ti < 0 || pt_gguf_tensor_ndim(g, ti) != 2) {
        pti_error(PT_ERR_FORMAT, "pt_llm_load: tensor 'token_embd.weight' is missing or not 2-D");
        pti_llm_model_free(m);
        return NULL;
    }
    int64_t n_vocab = pt_gguf_tensor_shape(g, ti)[0];
    if (n_vocab < 1 || n_vocab > INT32_MAX) {
        pti_error(PT_ERR_FORMAT, "pt_llm_load: vocabulary of %lld tokens", (long long)n_vocab);
        pti_llm_model_free(m);
        return NULL;
    }
    hp->n_vocab = (int32_t)n_vocab;
    m->tok_embd = load_tensor(&L, false, n_vocab, hp->n_embd, "token_embd.weight");
    m->output_norm = load_tensor(&L, false, hp->n_embd, -1, "output_norm.weight");
    m->output = load_tensor(&L, true, n_vocab, hp->n_embd, "output.weight");
    m->rope_freqs = load_tensor(&L, true, hp->n_rot / 2, -1, "rope_freqs.weight");
    m->layers = L.failed ? NULL : pti_calloc((size_t)hp->n_layer, sizeof *m->layers);
    for (int il = 0; m->layers && il < hp->n_layer; il++)
        if (!load_layer(&L, hp, il, &m->layers[il]))
            break;
    if (L.failed || !m->layers) {
        pti_llm_model_free(m);
        return NULL;
    }
    if (!m->output)
        m->output = pt_retain(m->tok_embd); /* tied embeddings */
    m->n_params = L.n_params;
    set_quant_name(m);
    return m;
}

/* The weight slots of a layer, for walking them all (moving, releasing). */
enum { LAYER_WEIGHTS = 19 };
static void layer_weights(pti_llm_layer *l, pt_tensor **all[LAYER_WEIGHTS])
{
    pt_tensor **w[LAYER_WEIGHTS] = {&l->attn_norm,    &l->wq,
                                    &l->wk,           &l->wv,
                                    &l->wqkv,         &l->wo,
                                    &l->bq,           &l->bk,
                                    &l->bv,           &l->bqkv,
                                    &l->bo,           &l->q_norm,
                                    &l->k_norm,       &l->attn_post_norm,
                                    &l->ffn_norm,     &l->w_gate,
                                    &l->w_up,         &l->w_down,
                                    &l->ffn_post_norm};
    memcpy(all, w, sizeof w);
}

static void release_layer(pti_llm_layer *l)
{
    pt_tensor **all[LAYER_WEIGHTS];
    layer_weights(l, all);
    for (size_t i = 0; i < LAYER_WEIGHTS; i++) {
        pt_release(*all[i]);
        *all[i] = NULL;
    }
}

/* Replaces *slot by its copy on d (NULL slots stay NULL). */
static bool move_weight(pt_tensor **slot, pt_device d)
{
    if (!*slot)
        return true;
    pt_tensor *moved = pt_to(*slot, d);
    if (!moved)
        return false;
    pti_scope_untrack(moved);
    pt_release(*slot);
    *slot = moved;
    return true;
}

pt_status pti_llm_model_to_device(pti_llm_model *m, pt_device d)
{
    if (pt_device_equal(m->device, d))
        return PT_OK;
    bool tied = m->output == m->tok_embd;
    if (tied) { /* one copy for both */
        pt_release(m->output);
        m->output = NULL;
    }
    bool ok = move_weight(&m->tok_embd, d) && move_weight(&m->output_norm, d) &&
              move_weight(&m->output, d) && move_weight(&m->rope_freqs, d);
    for (int il = 0; ok && il < m->hp.n_layer; il++) {
        pt_tensor **all[LAYER_WEIGHTS];
        layer_weights(&m->layers[il], all);
        for (size_t i = 0; ok && i < LAYER_WEIGHTS; i++)
            ok = move_weight(all[i], d);
    }
    if (tied)
        m->output = pt_retain(m->tok_embd);
    if (!ok)
        return pt_last_status();
    m->device = d;
    return PT_OK;
}

void pti_llm_model_free(pti_llm_model *m)
{
    if (!m)
        return;
    for (int il = 0; m->layers && il < m->hp.n_layer; il++)
        release_layer(&m->layers[il]);
    free(m->layers);
    pt_release(m->tok_embd);
    pt_release(m->output_norm);
    pt_release(m->output);
    pt_release(m->rope_freqs);
    pt_gguf_close(m->gguf);
    free(m);
}
