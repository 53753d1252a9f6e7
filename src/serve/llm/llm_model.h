/* Internal model of the LLM engine: hyperparameters and weights read from a GGUF file
 * (llm_model.c), the key/value cache and the batched forward pass (llm_forward.c). The public
 * API over it is include/prometorch/llm.h (llm.c); the server (issue 7) drives the forward
 * pass directly to batch several sequences.
 *
 * One forward pass takes a batch of tokens made of runs: each run is consecutive positions
 * pos0 .. pos0 + n - 1 of one sequence (a KV cache slot). Decode steps of several sequences
 * are several runs of one token; a prompt chunk is one run. */
#ifndef PT_SERVE_LLM_MODEL_H
#define PT_SERVE_LLM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "../../core/internal.h"
#include "prometorch/prometorch.h"

typedef enum pti_llm_arch {
    PTI_ARCH_LLAMA = 0, /* llama, mistral */
    PTI_ARCH_QWEN2,
    PTI_ARCH_QWEN3,
    PTI_ARCH_GEMMA3,
    PTI_ARCH_PHI3,
} pti_llm_arch;

typedef struct pti_llm_hparams {
    pti_llm_arch arch;
    char arch_name[32];
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim_k, head_dim_v, n_ff;
    int32_t n_ctx_train;
    float rms_eps;
    /* RoPE */
    pt_rope_mode rope_mode;
    int32_t n_rot;
    float rope_base;     /* global layers */
    float rope_base_swa; /* sliding-window layers (gemma3: 10000) */
    float rope_scale;    /* freq_scale = 1 / rope.scaling.factor */
    float rope_scale_swa;
    float yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
    int32_t yarn_n_ctx_orig;
    /* attention */
    int32_t n_swa;       /* sliding window (0: none) */
    int32_t swa_pattern; /* layer il is sliding when il % swa_pattern < swa_pattern - 1 */
    float attn_scale;    /* applied to q before attention (gemma3); 0: 1/sqrt(head_dim) in
                          * the attention op */
    bool embd_scale;     /* gemma3: embeddings times sqrt(n_embd) */
    bool gelu_ffn;       /* gemma3: GeGLU (tanh GELU); otherwise SwiGLU */
} pti_llm_hparams;

typedef struct pti_llm_layer {
    pt_tensor *attn_norm, *wq, *wk, *wv, *wqkv, *wo, *bq, *bk, *bv, *bqkv, *bo;
    pt_tensor *q_norm, *k_norm, *attn_post_norm;
    pt_tensor *ffn_norm, *w_gate, *w_up, *w_down, *ffn_post_norm;
    bool swa;
} pti_llm_layer;

typedef struct pti_llm_model {
    pti_llm_hparams hp;
    pt_gguf *gguf;
    pt_tensor *tok_embd, *output_norm, *output; /* output may alias tok_embd (tied) */
    pt_tensor *rope_freqs;                      /* llama 3.1 / phi3 frequency factors or NULL */
    pti_llm_layer *layers;
    int64_t n_params;
    char quant_name[16];
    pt_device device; /* where the weights live and the forward pass computes (the CPU unless
                       * pti_llm_model_to_device moved them) */
} pti_llm_model;

/* Reads hyperparameters and weights (zero-copy views of the mapped file) from g, which the
 * model takes over (closed by pti_llm_model_free). NULL with the error set (PT_ERR_FORMAT for
 * missing or inconsistent keys/tensors, PT_ERR_UNSUPPORTED for other architectures); g is
 * closed then too. */
pti_llm_model *pti_llm_model_from_gguf(pt_gguf *g);
/* The name of a GGUF general.file_type (llama.cpp's llama_ftype) as Ollama prints it as
 * quantization_level: 15 -> "Q4_K_M", 4 -> "MXFP4"; "unknown" for the others. The engine's
 * pt_llm_info.quantization and the model store's facts both come from here. */
const char *pti_llm_file_type_name(int64_t file_type);
/* Copies every weight to device d (a no-op for the CPU), releasing the file-backed views, so
 * that the forward pass, the cache made afterwards and all temporaries live on d. The
 * tokenizer, the sampler and the logits handed back stay on the host. PT_OK, or the error of
 * the first copy that failed (the model is then unchanged on the weights not yet moved and
 * must be freed). */
pt_status pti_llm_model_to_device(pti_llm_model *m, pt_device d);
void pti_llm_model_free(pti_llm_model *m);

/* The key/value cache: per layer [n_slots, n_ctx, n_head_kv, head_dim] tensors. */
typedef struct pti_kv_cache {
    int32_t n_slots, n_ctx, n_layer;
    pt_tensor **k, **v; /* [n_layer] */
} pti_kv_cache;

pti_kv_cache *pti_kv_cache_new(const pti_llm_model *m, int32_t n_slots, int32_t n_ctx, pt_dtype dt);
void pti_kv_cache_free(pti_kv_cache *c);

/* One run of a batch: tokens[t0 .. t0 + n) at positions pos0 .. pos0 + n - 1 of slot. */
typedef struct pti_llm_run {
    int32_t slot, pos0, t0, n;
    bool want_logits; /* the logits of the run's last token are returned */
    bool want_hidden; /* pti_llm_forward_ex: the final hidden states of all its tokens too */
} pti_llm_run;

/* Runs the model over the batch: writes the runs' keys/values into the cache and returns the
 * logits [number of runs with want_logits, n_vocab] (float32, on the CPU whatever the model's
 * device, new reference, in run order), or
 * NULL with the error set. Positions must fit the cache (pos0 + n <= n_ctx); earlier positions
 * of the slot are read from the cache as they are. */
pt_tensor *pti_llm_forward(const pti_llm_model *m, pti_kv_cache *c, const int32_t *tokens,
                           int32_t n_tokens, const pti_llm_run *runs, int32_t n_runs);
/* The same pass, returning in *hidden (when not NULL) the final hidden states after the output
 * norm (what the LM head reads) of every token of the runs with want_hidden: [their token
 * count, n_embd] float32, new reference, in batch order (NULL when no run wants them). The
 * logits are returned in *logits as pti_llm_forward returns them. Returns the status. */
pt_status pti_llm_forward_ex(const pti_llm_model *m, pti_kv_cache *c, const int32_t *tokens,
                             int32_t n_tokens, const pti_llm_run *runs, int32_t n_runs,
                             pt_tensor **logits, pt_tensor **hidden);

/* One op the engine dispatches and the dtype it computes in (float32 for most; float16 too
 * for the cache's copies and gemma3's GELU). */
typedef struct pti_llm_op_need {
    pti_op op;
    pt_dtype dtype;
} pti_llm_op_need;
/* The (op, dtype) pairs whose kernels the engine dispatches (the forward pass over every
 * supported architecture and weight dtype, and the cache set-up): *n of them, a static table.
 * A backend runs the engine only with a kernel for each. */
const pti_llm_op_need *pti_llm_required_ops(int *n);
/* How many of those pairs device d's backend has no kernel for (-1: no backend for d in this
 * build), written comma-separated into buf as "op" (float32) or "op (float16)" (cap bytes,
 * truncated with "..."). */
int pti_llm_missing_ops(pt_device d, char *buf, size_t cap);

#endif
