/* The token sampler of the LLM engine: turns one step's logits into the next token id.
 *
 * The chain and its formulas are llama.cpp's default sampler chain (src/llama-sampling.cpp,
 * common/sampling.cpp), in this order:
 *
 *   penalties -> top_k -> typical -> top_p -> min_p -> temperature -> dist
 *
 *   penalties  for each token seen c > 0 times among the last repeat_last_n accepted tokens:
 *              logit <= 0 ? logit *= repeat_penalty : logit /= repeat_penalty, then
 *              logit -= c * frequency_penalty + presence_penalty.
 *   top_k      keep the k largest logits (k <= 0 or k >= n_vocab: off).
 *   typical    locally typical sampling (typical_p >= 1: off): softmax, entropy H, keep the
 *              tokens in increasing order of |-log p - H| until their mass exceeds typical_p.
 *   top_p      softmax of the current set, keep the smallest prefix (by decreasing logit) whose
 *              mass reaches top_p (top_p >= 1: off).
 *   min_p      keep the tokens whose logit >= max logit + log(min_p), i.e. p >= min_p * p_max
 *              (min_p <= 0: off).
 *   temperature  logit /= temperature.
 *   dist       softmax of what is left and one draw from it.
 *
 * So top_p and min_p see the untempered distribution, as in llama.cpp (Ollama's own Go sampler
 * applies temperature before top_p/min_p; we follow llama.cpp, which Ollama's llama.cpp runner
 * also used). temperature <= 0 is greedy: the argmax of the penalized logits (ties: lowest id);
 * the filters are skipped then (they never remove the argmax, except typical_p, which greedy
 * ignores).
 *
 * Defaults (pti_sampler_default_opts) are Ollama's: temperature 0.8, top_k 40, top_p 0.9,
 * min_p 0.0, typical_p 1.0 (off), repeat_penalty 1.1, repeat_last_n 64, presence_penalty 0,
 * frequency_penalty 0, seed -1 (a random seed taken at creation).
 *
 * Ties between equal logits are broken by the lower token id everywhere (llama.cpp leaves their
 * order to std::partial_sort), so results are deterministic. NaN logits are treated as -inf
 * (never chosen); +inf logits share all the mass equally. A step where no token has a logit
 * above -inf is refused (pti_sample returns -1, PT_ERR_INVALID_ARG).
 *
 * Randomness: a counter-based generator (Philox4x32-10 keyed by the seed, counter = number of
 * draws so far), so the same seed and the same logits give the same tokens, on any machine.
 * The numbers differ from llama.cpp's mt19937, so sampled (non-greedy) text is not expected to
 * match llama.cpp token for token; the distributions are the same.
 *
 * Memory: everything is allocated by pti_sampler_new, sized by n_vocab (32 bytes per
 * vocabulary entry: 8 MB for a 262,144-token vocabulary); pti_sample does not allocate.
 * A sampler is not thread-safe; use one per generation stream. */
#ifndef PROMETORCH_SERVE_SAMPLER_H
#define PROMETORCH_SERVE_SAMPLER_H

#include <stdint.h>

#include "prometorch/prometorch.h"

typedef struct pti_sampler_opts {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0 or >= n_vocab: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float typical_p;         /* >= 1: off */
    float repeat_penalty;    /* 1: off; must be > 0 */
    int32_t repeat_last_n;   /* window of accepted tokens the penalties look at; 0: off.
                              * Ollama's -1 ("the whole context") must be resolved to num_ctx by
                              * the caller: negative values are refused. */
    float presence_penalty;  /* subtracted once from each token seen in the window */
    float frequency_penalty; /* subtracted per occurrence in the window */
    int64_t seed;            /* < 0: a random seed (time and address entropy) at creation */
} pti_sampler_opts;

typedef struct pti_sampler pti_sampler;

/* Ollama's defaults (see the top of this file). */
pti_sampler_opts pti_sampler_default_opts(void);

/* A sampler for vocabularies of n_vocab tokens (>= 1) with the options copied from *opts
 * (NULL: the defaults). Returns NULL with PT_ERR_INVALID_ARG for a bad option (NaN, infinite
 * temperature or penalty, negative repeat_last_n, repeat_penalty <= 0, n_vocab < 1), or
 * PT_ERR_OOM. */
pti_sampler *pti_sampler_new(const pti_sampler_opts *opts, int32_t n_vocab);
/* Frees; NULL is a no-op. */
void pti_sampler_free(pti_sampler *s);
/* Forgets the accepted tokens and restarts the random stream from the seed (a random seed is
 * kept, not redrawn). */
void pti_sampler_reset(pti_sampler *s);
/* The seed in use (the drawn one when opts.seed < 0). */
uint64_t pti_sampler_seed(const pti_sampler *s);

/* The next token for these logits (n_vocab of them, borrowed, not modified): 0 <= id < n_vocab,
 * or -1 with the error set (PT_ERR_INVALID_ARG: NULL, n_vocab different from the sampler's, no
 * finite logit). Does not accept the token: call pti_sampler_accept with it (and with prompt
 * tokens, if they should count for the penalties). No allocation. */
int32_t pti_sample(pti_sampler *s, const float *logits, int32_t n_vocab);

/* Records a token in the penalty window (the oldest leaves when the window is full). Ids
 * outside [0, n_vocab) are refused (PT_ERR_INVALID_ARG) and not recorded. */
pt_status pti_sampler_accept(pti_sampler *s, int32_t token);

/* Debug/test view of one step without drawing: runs the chain up to the final softmax and
 * writes the surviving candidates (at most cap of them, in the chain's internal order) to
 * ids[] and their probabilities to probs[] (NULL arrays allowed when cap is 0). Returns the
 * number of candidates (which may exceed cap: only cap are written), or -1 with the error set.
 * Greedy mode gives the single argmax with probability 1. The random stream is not advanced. */
int32_t pti_sampler_probs(pti_sampler *s, const float *logits, int32_t n_vocab, int32_t *ids,
                          float *probs, int32_t cap);

#endif
