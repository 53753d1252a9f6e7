/* The public LLM API (include/prometorch/llm.h): loading a GGUF model with its tokenizer, chat
 * template and KV cache, evaluating tokens with prefix reuse, and the generation loop
 * (sampling, streaming detokenization, stop strings and tokens, statistics). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../../core/internal.h"
#include "chat_template.h"
#include "llm_gen.h"
#include "llm_model.h"
#include "model_store.h"
#include "sampler.h"
#include "tokenizer.h"

struct pt_llm {
    pti_llm_model *m;
    pti_tokenizer *tok;
    pti_chat_template *tmpl;
    pti_kv_cache *cache;
    int32_t num_ctx, n_batch;
    int32_t *cache_ids; /* [num_ctx] the tokens whose keys/values are in the cache */
    int32_t n_cached;
    float *logits; /* [n_vocab] of the last evaluated position */
    bool has_logits;
    char *name;
    pt_llm_info info;
};

pt_gen_opts pt_gen_opts_default(void)
{
    pt_gen_opts o = {
        .num_predict = -1,
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.9f,
        .min_p = 0.0f,
        .typical_p = 1.0f,
        .repeat_penalty = 1.1f,
        .repeat_last_n = 64,
        .seed = -1,
    };
    return o;
}

/* ---- loading -----------------------------------------------------------------------------------
 */

static char *name_of(const pt_gguf *g, const char *path)
{
    int64_t i = pt_gguf_find_key(g, "general.name");
    size_t len = 0;
    const char *s = i >= 0 ? pt_gguf_get_str(g, i, &len) : NULL;
    if (!s) {
        const char *slash = strrchr(path, '/');
        s = slash ? slash + 1 : path;
        len = strlen(s);
    }
    char *out = pti_malloc(len + 1);
    if (out) {
        memcpy(out, s, len);
        out[len] = '\0';
    }
    return out;
}

static void fill_info(pt_llm *llm, const char *path)
{
    const pti_llm_hparams *hp = &llm->m->hp;
    pt_llm_info *in = &llm->info;
    in->architecture = hp->arch_name;
    in->name = llm->name;
    in->quantization = llm->m->quant_name;
    in->chat_template = pti_chat_family_name(pti_chat_template_family(llm->tmpl));
    in->n_params = llm->m->n_params;
    FILE *f = fopen(path, "rb");
    if (f && fseek(f, 0, SEEK_END) == 0)
        in->file_size = ftell(f);
    if (f)
        fclose(f);
    in->context_length = hp->n_ctx_train;
    in->num_ctx = llm->num_ctx;
    in->n_vocab = hp->n_vocab;
    in->n_embd = hp->n_embd;
    in->n_layer = hp->n_layer;
    in->n_head = hp->n_head;
    in->n_head_kv = hp->n_head_kv;
    in->head_dim = hp->head_dim_k;
    in->n_ff = hp->n_ff;
}

/* The device's backend must have a kernel for every op the engine dispatches (the error
 * names the missing ones); the weights, the cache and the forward pass then live on it. */
static bool check_device(pt_device d)
{
    char dev[32], missing[512];
    int n_ops = 0;
    pti_llm_required_ops(&n_ops);
    pt_device_str(d, dev, sizeof dev);
    if (pti_device_check(d) != PT_OK)
        return false;
    int n = pti_llm_missing_ops(d, missing, sizeof missing);
    if (n < 0)
        pti_error(PT_ERR_UNSUPPORTED, "pt_llm_load: device %s has no backend in this build", dev);
    else if (n > 0)
        pti_error(PT_ERR_UNSUPPORTED,
                  "pt_llm_load: the backend of device %s has no kernel for %d of the %d ops the "
                  "LLM forward pass dispatches: %s",
                  dev, n, n_ops, missing);
    return n == 0;
}

static bool check_opts(const pt_llm_opts *o)
{
    if (o->n_threads < 0 || o->num_ctx < 0 || o->n_batch < 0) {
        pti_error(PT_ERR_INVALID_ARG, "pt_llm_load: negative n_threads, num_ctx or n_batch");
        return false;
    }
    return check_device(o->device);
}

/* model itself when it is a file; otherwise an Ollama name resolved through the store
 * ($OLLAMA_MODELS or ~/.ollama/models) to its GGUF blob. */
static const char *store_path(const char *model, pti_model_files *files)
{
    struct stat st;
    pti_model_name name;
    char root[4096];
    if (stat(model, &st) == 0 || strstr(model, ".gguf") || !pti_model_name_parse(model, &name))
        return model; /* a path (pt_gguf_open reports a missing file) */
    if (!pti_model_store_root(root, sizeof root)) {
        pti_error(PT_ERR_IO,
                  "pt_llm_load: '%s' is not a file, and there is no model store "
                  "(set OLLAMA_MODELS or HOME)",
                  model);
        return NULL;
    }
    return pti_model_store_resolve(root, &name, files) ? files->model : NULL;
}

static pt_llm *load_with_slots(const char *model, const pt_llm_opts *opts, int32_t n_slots);

pt_llm *pt_llm_load(const char *model, const pt_llm_opts *opts)
{
    return load_with_slots(model, opts, 1);
}

pt_llm *pti_llm_load_slots(const char *path, const pt_llm_opts *opts, int32_t n_slots)
{
    if (n_slots < 1) {
        pti_error(PT_ERR_INVALID_ARG, "pt_llm_load: %d KV cache slots (at least 1)", (int)n_slots);
        return NULL;
    }
    return load_with_slots(path, opts, n_slots);
}

static pt_llm *load_with_slots(const char *model, const pt_llm_opts *opts, int32_t n_slots)
{
    pt_llm_opts o = opts ? *opts : (pt_llm_opts){0};
    if (!model) {
        pti_error(PT_ERR_INVALID_ARG, "pt_llm_load: model path is NULL");
        return NULL;
    }
    if (!check_opts(&o))
        return NULL;
    if (o.n_threads > 0)
        pt_set_num_threads(o.n_threads);
    pti_model_files files; /* 20 KB of paths; the GGUF path points into it */
    const char *path = store_path(model, &files);
    if (!path)
        return NULL;
    pt_gguf *g = pt_gguf_open(path);
    if (!g)
        return NULL;
    pt_llm *llm = pti_calloc(1, sizeof *llm);
    if (!llm) {
        pt_gguf_close(g);
        return NULL;
    }
    llm->name = name_of(g, model);
    if (!llm->name) { /* checked at once: the tokenizer's optional-key reads clear the error */
        pt_gguf_close(g);
        pt_llm_free(llm);
        return NULL;
    }
    llm->tok = pti_tokenizer_from_gguf(g);
    llm->tmpl = llm->tok ? pti_chat_template_from_gguf(g) : NULL;
    llm->m = llm->tmpl ? pti_llm_model_from_gguf(g) : (pt_gguf_close(g), NULL);
    if (!llm->m || pti_llm_model_to_device(llm->m, o.device) != PT_OK) {
        pt_llm_free(llm);
        return NULL;
    }
    const pti_llm_hparams *hp = &llm->m->hp;
    llm->num_ctx = o.num_ctx > 0 ? o.num_ctx : PTI_LLM_DEFAULT_NUM_CTX;
    if (llm->num_ctx > hp->n_ctx_train)
        llm->num_ctx = hp->n_ctx_train;
    llm->n_batch = o.n_batch > 0 ? o.n_batch : PTI_LLM_DEFAULT_N_BATCH;
    llm->cache =
        pti_kv_cache_new(llm->m, n_slots, llm->num_ctx, o.kv_f32 ? PT_FLOAT32 : PT_FLOAT16);
    llm->cache_ids = pti_malloc((size_t)llm->num_ctx * sizeof *llm->cache_ids);
    llm->logits = pti_malloc((size_t)hp->n_vocab * sizeof *llm->logits);
    if (!llm->cache || !llm->cache_ids || !llm->logits) {
        pt_llm_free(llm);
        return NULL;
    }
    fill_info(llm, path);
    return llm;
}

void pt_llm_free(pt_llm *llm)
{
    if (!llm)
        return;
    pti_kv_cache_free(llm->cache);
    pti_llm_model_free(llm->m);
    pti_chat_template_free(llm->tmpl);
    pti_tokenizer_free(llm->tok);
    free(llm->cache_ids);
    free(llm->logits);
    free(llm->name);
    free(llm);
}

const pt_llm_info *pt_llm_get_info(const pt_llm *llm)
{
    if (!llm) {
        pti_error(PT_ERR_INVALID_ARG, "pt_llm_get_info: llm is NULL");
        return NULL;
    }
    return &llm->info;
}

const pti_tokenizer *pti_llm_tokenizer(const pt_llm *llm)
{
    return llm->tok;
}
const pti_chat_template *pti_llm_template(const pt_llm *llm)
{
    return llm->tmpl;
}
int32_t pti_llm_num_ctx(const pt_llm *llm)
{
    return llm->num_ctx;
}
int32_t pti_llm_n_vocab(const pt_llm *llm)
{
    return llm->m->hp.n_vocab;
}
const pti_llm_model *pti_llm_model_of(const pt_llm *llm)
{
    return llm->m;
}
pti_kv_cache *pti_llm_cache_of(pt_llm *llm)
{
    return llm->cache;
}

/* ---- evaluation --------------------------------------------------------------------------------
 */

const float *pt_llm_logits(const pt_llm *llm)
{
    return llm && llm->has_logits ? llm->logits : NULL;
}

pt_status pt_llm_eval(pt_llm *llm, const int32_t *ids, int32_t n, int32_t n_past)
{
    if (!llm || (!ids && n > 0) || n < 1)
        return pti_error(PT_ERR_INVALID_ARG, "pt_llm_eval: no tokens to evaluate");
    if (n_past < 0 || n_past > llm->n_cached)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_llm_eval: n_past %d is outside the %d cached "
                         "positions",
                         (int)n_past, (int)llm->n_cached);
    if (n > llm->num_ctx - n_past)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_llm_eval: %d + %d tokens do not fit the "
                         "context of %d (num_ctx)",
                         (int)n_past, (int)n, (int)llm->num_ctx);
    llm->n_cached = n_past;
    llm->has_logits = false;
    for (int32_t done = 0; done < n;) {
        int32_t chunk = n - done < llm->n_batch ? n - done : llm->n_batch;
        bool last = done + chunk == n;
        pti_llm_run run = {
            .slot = 0, .pos0 = n_past + done, .t0 = 0, .n = chunk, .want_logits = last};
        pt_scope_begin();
        pt_tensor *logits = pti_llm_forward(llm->m, llm->cache, ids + done, chunk, &run, 1);
        if (logits && last)
            memcpy(llm->logits, pt_data_ptr(logits), (size_t)llm->m->hp.n_vocab * sizeof(float));
        pt_scope_end();
        if (!logits)
            return pt_last_status();
        memcpy(llm->cache_ids + n_past + done, ids + done, (size_t)chunk * sizeof *ids);
        llm->n_cached = n_past + done + chunk;
        done += chunk;
    }
    llm->has_logits = true;
    return PT_OK;
}

int32_t pti_llm_cached(const pt_llm *llm, const int32_t *ids, int32_t n)
{
    int32_t common = 0, lim = n < llm->n_cached ? n : llm->n_cached;
    while (common < lim && llm->cache_ids[common] == ids[common])
        common++;
    return common;
}

/* ---- tokens and text ---------------------------------------------------------------------------
 */

int64_t pt_llm_tokenize(const pt_llm *llm, const char *text, size_t len, bool add_bos,
                        bool parse_special, int32_t *out, int64_t cap)
{
    if (!llm || !text) {
        pti_error(PT_ERR_INVALID_ARG, "pt_llm_tokenize: NULL llm or text");
        return -1;
    }
    return pti_tokenize(llm->tok, text, len, add_bos, parse_special, out, cap);
}

/* The text of ids and its length in bytes (*len; it may contain NUL bytes: a byte-fallback or
 * byte-level token can stand for byte 0). fn names the public function in errors. */
static char *detokenize(const pt_llm *llm, const int32_t *ids, int64_t n, bool special, size_t *len,
                        const char *fn)
{
    if (!llm || (!ids && n > 0) || n < 0) {
        pti_error(PT_ERR_INVALID_ARG, "%s: NULL llm or ids, or n < 0", fn);
        return NULL;
    }
    int32_t cap = pti_tokenizer_max_piece(llm->tok) + 8;
    size_t size = 0, used = 0;
    char *out = NULL, *piece = pti_malloc((size_t)cap);
    pti_detok d;
    pti_detok_init(&d, llm->tok, special);
    int64_t strip_at = -1;
    if (pti_tokenizer_add_space_prefix(llm->tok))
        strip_at = n > 0 && ids[0] == pti_tokenizer_bos(llm->tok) ? 1 : 0;
    for (int64_t i = 0; piece && i <= n; i++) {
        int32_t k =
            i < n ? pti_detok_push(&d, ids[i], piece, cap) : pti_detok_flush(&d, piece, cap);
        if (k < 0) {
            pti_error(PT_ERR_INVALID_ARG, "%s: token id %d is out of range", fn, (int)ids[i]);
            free(out);
            out = NULL;
            break;
        }
        if (used + (size_t)k + 1 > size) {
            size_t want = (used + (size_t)k + 1) * 2;
            char *grown = pti_realloc(out, want);
            if (!grown) {
                pti_error(PT_ERR_OOM, "%s: out of memory", fn);
                free(out);
                out = NULL;
                break;
            }
            out = grown;
            size = want;
        }
        size_t skip = 0;
        if (i == strip_at && k > 0 && piece[0] == ' ')
            skip = 1; /* the space tokenizing added before the text (llama.cpp drops it too) */
        memcpy(out + used, piece + skip, (size_t)k - skip);
        used += (size_t)k - skip;
        out[used] = '\0';
    }
    if (out == NULL && piece && n == 0)
        out = pti_calloc(1, 1);
    if (!piece)
        pti_error(PT_ERR_OOM, "%s: out of memory", fn);
    free(piece);
    *len = out ? used : 0;
    return out;
}

char *pt_llm_detokenize(const pt_llm *llm, const int32_t *ids, int64_t n, bool special)
{
    size_t len;
    return detokenize(llm, ids, n, special, &len, "pt_llm_detokenize");
}

char *pt_llm_detokenize_bytes(const pt_llm *llm, const int32_t *ids, int64_t n, bool special,
                              size_t *len)
{
    if (!len) {
        pti_error(PT_ERR_INVALID_ARG, "pt_llm_detokenize_bytes: NULL len");
        return NULL;
    }
    return detokenize(llm, ids, n, special, len, "pt_llm_detokenize_bytes");
}

/* ---- generation entry points -------------------------------------------------------------------
 */

static int32_t *tokenize_all(const pt_llm *llm, const char *text, bool add_bos, int64_t *n)
{
    size_t len = strlen(text);
    int64_t need = pti_tokenize(llm->tok, text, len, add_bos, true, NULL, 0);
    if (need < 0)
        return NULL;
    int32_t *ids = pti_malloc((size_t)(need > 0 ? need : 1) * sizeof *ids);
    int64_t got = ids ? pti_tokenize(llm->tok, text, len, add_bos, true, ids, need) : -1;
    if (got != need) {
        free(ids);
        if (got >= 0) /* otherwise the tokenizer's (or the allocation's) error stands */
            pti_error(PT_ERR_RUNTIME, "pt_llm: tokenization changed between two calls");
        return NULL;
    }
    *n = need;
    return ids;
}

pt_status pt_llm_generate(pt_llm *llm, const char *prompt, const pt_gen_opts *opts, pt_token_cb cb,
                          void *user)
{
    if (!llm || !prompt)
        return pti_error(PT_ERR_INVALID_ARG, "pt_llm_generate: NULL llm or prompt");
    bool raw = opts && opts->raw;
    int64_t n = 0;
    int32_t *ids = tokenize_all(llm, prompt, !raw, &n);
    if (!ids)
        return pt_last_status();
    pt_status st = n > INT32_MAX
                       ? pti_error(PT_ERR_INVALID_ARG, "pt_llm_generate: prompt too long")
                       : pti_llm_generate_ids(llm, ids, (int32_t)n, opts, NULL, 0, cb, user);
    free(ids);
    return st;
}

pt_status pt_llm_generate_tokens(pt_llm *llm, const int32_t *ids, int32_t n,
                                 const pt_gen_opts *opts, pt_token_cb cb, void *user)
{
    if (!llm || !ids)
        return pti_error(PT_ERR_INVALID_ARG, "pt_llm_generate_tokens: NULL llm or ids");
    return pti_llm_generate_ids(llm, ids, n, opts, NULL, 0, cb, user);
}

/* The rendered chat prompt (pti_chat_render's string, free()). */
static char *render_chat(const pt_llm *llm, const pt_chat_msg *msgs, int32_t n_msgs)
{
    if (!msgs || n_msgs < 1) {
        pti_error(PT_ERR_INVALID_ARG, "pt_llm_chat: no messages");
        return NULL;
    }
    pti_chat_message *cm = pti_calloc((size_t)n_msgs, sizeof *cm);
    if (!cm)
        return NULL;
    for (int32_t i = 0; i < n_msgs; i++) {
        cm[i].role = msgs[i].role;
        cm[i].content = msgs[i].content;
    }
    size_t len = 0;
    char *text = pti_chat_render(llm->tmpl, cm, (size_t)n_msgs, true, NULL, &len);
    free(cm);
    return text;
}

char *pt_llm_chat_prompt(pt_llm *llm, const pt_chat_msg *msgs, int32_t n_msgs)
{
    if (!llm) {
        pti_error(PT_ERR_INVALID_ARG, "pt_llm_chat_prompt: llm is NULL");
        return NULL;
    }
    return render_chat(llm, msgs, n_msgs);
}

pt_status pt_llm_chat(pt_llm *llm, const pt_chat_msg *msgs, int32_t n_msgs, const pt_gen_opts *opts,
                      pt_token_cb cb, void *user)
{
    if (!llm)
        return pti_error(PT_ERR_INVALID_ARG, "pt_llm_chat: llm is NULL");
    char *text = render_chat(llm, msgs, n_msgs);
    if (!text)
        return pt_last_status();
    int64_t n = 0;
    int32_t *ids = tokenize_all(llm, text, true, &n);
    free(text);
    if (!ids)
        return pt_last_status();
    size_t n_extra = 0;
    const char *const *extra = pti_chat_stop_strings(pti_chat_template_family(llm->tmpl), &n_extra);
    pt_status st = n > INT32_MAX ? pti_error(PT_ERR_INVALID_ARG, "pt_llm_chat: prompt too long")
                                 : pti_llm_generate_ids(llm, ids, (int32_t)n, opts, extra,
                                                        (int32_t)n_extra, cb, user);
    free(ids);
    return st;
}
