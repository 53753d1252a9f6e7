/* The generation loop of the LLM API: prompt evaluation with prefix reuse, sampling, streaming
 * detokenization (whole UTF-8 characters only), stop tokens and stop strings (held back while
 * they may still match), statistics in Ollama's units. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/internal.h"
#include "llm_gen.h"
#include "sampler.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- stop strings ------------------------------------------------------------------------------
 */

bool pti_stopper_init(pti_stopper *s, const char *const *a, int32_t na, const char *const *b,
                      int32_t nb, size_t cap_hint)
{
    memset(s, 0, sizeof *s);
    s->stops[0] = a;
    s->n_stops[0] = a ? na : 0;
    s->stops[1] = b;
    s->n_stops[1] = b ? nb : 0;
    size_t longest = 0;
    for (int l = 0; l < 2; l++)
        for (int32_t i = 0; i < s->n_stops[l]; i++)
            if (s->stops[l][i] && strlen(s->stops[l][i]) > longest)
                longest = strlen(s->stops[l][i]);
    s->cap = longest + cap_hint + 16;
    s->pend = pti_malloc(s->cap);
    return s->pend != NULL;
}

void pti_stopper_free(pti_stopper *s)
{
    free(s->pend);
    s->pend = NULL;
}

/* Length of the longest suffix of text that is a proper prefix of stop. */
static size_t partial_match(const char *text, size_t n, const char *stop)
{
    size_t ls = strlen(stop);
    for (size_t k = ls > 1 ? ls - 1 : 0; k > 0; k--)
        if (k <= n && memcmp(text + n - k, stop, k) == 0)
            return k;
    return 0;
}

/* Drops the bytes handed out by the previous call. */
static void stopper_compact(pti_stopper *s)
{
    memmove(s->pend, s->pend + s->passed, s->n_pend - s->passed);
    s->n_pend -= s->passed;
    s->passed = 0;
}

static bool stopper_append(pti_stopper *s, const char *text, size_t len)
{
    if (s->n_pend + len > s->cap) { /* only with an unexpectedly long piece */
        char *grown = pti_realloc(s->pend, s->n_pend + len);
        if (!grown) {
            pti_error(PT_ERR_OOM, "pt_llm: out of memory holding generated text");
            return false;
        }
        s->pend = grown;
        s->cap = s->n_pend + len;
    }
    memcpy(s->pend + s->n_pend, text, len);
    s->n_pend += len;
    return true;
}

bool pti_stopper_push(pti_stopper *s, const char *text, size_t len, const char **emit,
                      size_t *n_emit)
{
    stopper_compact(s);
    *emit = s->pend;
    *n_emit = 0;
    if (!stopper_append(s, text, len))
        return false;
    size_t first = s->n_pend, hold = 0;
    for (int l = 0; l < 2; l++) {
        for (int32_t i = 0; i < s->n_stops[l]; i++) {
            const char *st = s->stops[l][i];
            if (!st || !*st)
                continue;
            size_t ls = strlen(st);
            for (size_t p = 0; p + ls <= s->n_pend && p < first; p++)
                if (memcmp(s->pend + p, st, ls) == 0) {
                    first = p;
                    break;
                }
            size_t k = partial_match(s->pend, s->n_pend, st);
            hold = k > hold ? k : hold;
        }
    }
    if (first < s->n_pend) {
        *n_emit = first;
        s->passed = s->n_pend; /* the stop string and what follows are dropped */
        return true;
    }
    *n_emit = s->n_pend - hold;
    s->passed = *n_emit;
    return false;
}

void pti_stopper_flush(pti_stopper *s, const char **emit, size_t *n_emit)
{
    stopper_compact(s);
    *emit = s->pend;
    *n_emit = s->n_pend;
    s->passed = s->n_pend;
}

/* ---- the loop ----------------------------------------------------------------------------------
 */

typedef struct gen_state {
    pt_llm *llm;
    const pt_gen_opts *o;
    pt_token_cb cb;
    void *user;
    pti_sampler *smp;
    pti_detok detok;
    pti_stopper stop;
    char *piece;
    int32_t piece_cap;
    pt_gen_stats st;
} gen_state;

static bool check_gen_opts(const pt_gen_opts *o)
{
    if (o->n_stop < 0 || (o->n_stop > 0 && !o->stop) || o->n_stop_tokens < 0 ||
        (o->n_stop_tokens > 0 && !o->stop_tokens) || o->repeat_last_n < -1) {
        pti_error(PT_ERR_INVALID_ARG, "pt_llm_generate: bad stop list or repeat_last_n");
        return false;
    }
    return true;
}

pti_sampler *pti_gen_sampler_new(const pt_gen_opts *o, int32_t num_ctx, int32_t n_vocab)
{
    pti_sampler_opts so = {
        .temperature = o->temperature,
        .top_k = o->top_k,
        .top_p = o->top_p,
        .min_p = o->min_p,
        .typical_p = o->typical_p,
        .repeat_penalty = o->repeat_penalty,
        .repeat_last_n = o->repeat_last_n < 0 ? num_ctx : o->repeat_last_n,
        .presence_penalty = o->presence_penalty,
        .frequency_penalty = o->frequency_penalty,
        .seed = o->seed,
    };
    return pti_sampler_new(&so, n_vocab);
}

static bool is_stop_token(const gen_state *g, int32_t tok)
{
    if (pti_tokenizer_is_eog(pti_llm_tokenizer(g->llm), tok))
        return true;
    for (int32_t i = 0; i < g->o->n_stop_tokens; i++)
        if (g->o->stop_tokens[i] == tok)
            return true;
    return false;
}

/* Passes text to the callback; false when it asked to stop. */
static bool deliver(gen_state *g, int32_t tok, const char *text, size_t len)
{
    if (g->cb && !g->cb(tok, text, len, g->user)) {
        g->st.done_reason = "cancel";
        return false;
    }
    return true;
}

/* Handles one sampled token: returns false when generation ends (done_reason set). */
static bool emit_token(gen_state *g, int32_t tok)
{
    g->st.gen_tokens++;
    if (is_stop_token(g, tok)) {
        g->st.done_reason = "stop";
        return false;
    }
    int32_t k = pti_detok_push(&g->detok, tok, g->piece, g->piece_cap);
    if (k < 0) { /* the model's output matrix has more rows than the vocabulary has tokens */
        pti_error(PT_ERR_FORMAT,
                  "pt_llm_generate: the model produced token %d, which the "
                  "vocabulary of %d tokens has no text for",
                  (int)tok, (int)pti_tokenizer_vocab_size(pti_llm_tokenizer(g->llm)));
        g->st.done_reason = NULL;
        return false;
    }
    const char *out;
    size_t n_out;
    bool stopped = pti_stopper_push(&g->stop, g->piece, (size_t)k, &out, &n_out);
    if (!deliver(g, tok, out, n_out))
        return false;
    if (stopped) {
        g->st.done_reason = "stop";
        return false;
    }
    return true;
}

/* Evaluates the prompt (after its cached prefix) and accepts it into the sampler's window. */
static pt_status eval_prompt(gen_state *g, const int32_t *ids, int32_t n)
{
    int32_t common = pti_llm_cached(g->llm, ids, n);
    if (common == n)
        common = n - 1; /* the last position is evaluated again for its logits */
    int64_t t0 = now_ns();
    pt_status st = pt_llm_eval(g->llm, ids + common, n - common, common);
    g->st.prompt_ns = now_ns() - t0;
    g->st.prompt_tokens = n;
    g->st.prompt_evaluated = n - common;
    for (int32_t i = 0; st == PT_OK && i < n; i++)
        st = pti_sampler_accept(g->smp, ids[i]);
    return st;
}

static pt_status generate_loop(gen_state *g, int32_t n_prompt)
{
    const int32_t num_ctx = pti_llm_num_ctx(g->llm);
    int32_t n_past = n_prompt;
    int64_t t0 = now_ns();
    g->st.done_reason = "length";
    while (g->o->num_predict < 0 || g->st.gen_tokens < g->o->num_predict) {
        int32_t tok = pti_sample(g->smp, pt_llm_logits(g->llm), pti_llm_n_vocab(g->llm));
        if (tok < 0 || pti_sampler_accept(g->smp, tok) != PT_OK)
            return pt_last_status();
        if (!emit_token(g, tok))
            break;
        if (n_past >= num_ctx) {
            g->st.done_reason = "length";
            break;
        }
        pt_status st = pt_llm_eval(g->llm, &tok, 1, n_past);
        if (st != PT_OK)
            return st;
        n_past++;
    }
    g->st.gen_ns = now_ns() - t0;
    if (!g->st.done_reason)
        return pt_last_status();
    if (strcmp(g->st.done_reason, "stop") == 0 || strcmp(g->st.done_reason, "length") == 0) {
        const char *out;
        size_t n_out;
        int32_t k = pti_detok_flush(&g->detok, g->piece, g->piece_cap);
        if (k > 0 && pti_stopper_push(&g->stop, g->piece, (size_t)k, &out, &n_out)) {
            deliver(g, -1, out, n_out);
            return PT_OK;
        }
        if (k > 0 && n_out > 0)
            deliver(g, -1, out, n_out);
        pti_stopper_flush(&g->stop, &out, &n_out);
        if (n_out > 0)
            deliver(g, -1, out, n_out);
    }
    return PT_OK;
}

pt_status pti_llm_generate_ids(pt_llm *llm, const int32_t *ids, int32_t n, const pt_gen_opts *opts,
                               const char *const *extra_stop, int32_t n_extra_stop, pt_token_cb cb,
                               void *user)
{
    pt_gen_opts defaults = pt_gen_opts_default();
    const pt_gen_opts *o = opts ? opts : &defaults;
    if (n < 1)
        return pti_error(PT_ERR_INVALID_ARG, "pt_llm_generate: the prompt is empty");
    if (n > pti_llm_num_ctx(llm))
        return pti_error(PT_ERR_INVALID_ARG,
                         "pt_llm_generate: the prompt has %d tokens, more "
                         "than the context of %d (raise num_ctx; prompts are not truncated)",
                         (int)n, (int)pti_llm_num_ctx(llm));
    if (!check_gen_opts(o))
        return PT_ERR_INVALID_ARG;
    gen_state g = {.llm = llm, .o = o, .cb = cb, .user = user};
    const pti_tokenizer *tok = pti_llm_tokenizer(llm);
    g.piece_cap = pti_tokenizer_max_piece(tok) + 8;
    g.piece = pti_malloc((size_t)g.piece_cap);
    g.smp = pti_gen_sampler_new(o, pti_llm_num_ctx(llm), pti_llm_n_vocab(llm));
    pti_detok_init(&g.detok, tok, o->special_output);
    pt_status st = PT_ERR_OOM;
    if (g.piece && g.smp &&
        pti_stopper_init(&g.stop, o->stop, o->n_stop, extra_stop, n_extra_stop,
                         (size_t)g.piece_cap)) {
        st = eval_prompt(&g, ids, n);
        if (st == PT_OK)
            st = generate_loop(&g, n);
    } else if (!g.smp && g.piece) {
        st = pt_last_status();
    }
    pti_stopper_free(&g.stop);
    pti_sampler_free(g.smp);
    free(g.piece);
    if (o->stats)
        *o->stats = g.st;
    return st;
}
