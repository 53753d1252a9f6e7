/* The token sampler (llama.cpp's default chain; see sampler.h for the formulas and defaults).
 *
 * One step works on a candidate set: (logit, id, p) triples in s->cand[0..size), with a flag
 * saying whether they are sorted best-first (higher logit, then lower id). The caller's logits
 * are read in place; the penalties are applied to the window's tokens as they enter the
 * candidate set (only greedy decoding writes a penalized copy, to s->work), so a step on a
 * 262k vocabulary does not copy 1 MB of logits first. top_k selects with a size-k min-heap in one
 * pass over the vocabulary (O(n log k), no full sort); top_p on an unsorted set selects the best
 * 256 first and grows the prefix 16-fold only when their mass is short of top_p, as llama.cpp's
 * adaptive top-p does. */
#include "sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/internal.h"

typedef struct cand {
    float logit;
    int32_t id;
    float p;
} cand;

struct pti_sampler {
    pti_sampler_opts o;
    int32_t n_vocab;
    uint64_t seed, counter; /* Philox key and the number of draws so far */
    int32_t *ring;          /* the last repeat_last_n accepted tokens, oldest at ring_first */
    int32_t ring_len, ring_first;
    int32_t *count; /* [n_vocab] occurrences of each token in the ring */
    float *work;    /* [n_vocab] penalized logits */
    cand *cand;     /* [n_vocab] the candidate set */
    cand *buf;      /* [n_vocab] selection output / reordering scratch */
};

pti_sampler_opts pti_sampler_default_opts(void)
{
    return (pti_sampler_opts){.temperature = 0.8f,
                              .top_k = 40,
                              .top_p = 0.9f,
                              .min_p = 0.0f,
                              .typical_p = 1.0f,
                              .repeat_penalty = 1.1f,
                              .repeat_last_n = 64,
                              .presence_penalty = 0.0f,
                              .frequency_penalty = 0.0f,
                              .seed = -1};
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t random_seed(const void *addr)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    uint64_t x = splitmix64((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
    return splitmix64(x ^ (uint64_t)(uintptr_t)addr);
}

static bool opts_valid(const pti_sampler_opts *o)
{
    return isfinite(o->temperature) && !isnan(o->top_p) && !isnan(o->min_p) &&
           !isnan(o->typical_p) && isfinite(o->repeat_penalty) && o->repeat_penalty > 0.0f &&
           isfinite(o->presence_penalty) && isfinite(o->frequency_penalty) && o->repeat_last_n >= 0;
}

pti_sampler *pti_sampler_new(const pti_sampler_opts *opts, int32_t n_vocab)
{
    pti_sampler_opts o = opts ? *opts : pti_sampler_default_opts();
    if (n_vocab < 1)
        return pti_error_null(PT_ERR_INVALID_ARG, "pti_sampler_new: n_vocab %d must be >= 1",
                              (int)n_vocab);
    if (!opts_valid(&o))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "pti_sampler_new: invalid options (NaN or infinite value, "
                              "repeat_penalty %g must be > 0, repeat_last_n %d must be >= 0; "
                              "resolve -1 to num_ctx)",
                              (double)o.repeat_penalty, (int)o.repeat_last_n);
    pti_sampler *s = pti_calloc(1, sizeof *s);
    if (!s)
        return pti_error_null(PT_ERR_OOM, "pti_sampler_new: out of memory");
    s->o = o;
    s->n_vocab = n_vocab;
    size_t n = (size_t)n_vocab;
    s->count = pti_calloc(n, sizeof *s->count);
    s->work = pti_malloc(n * sizeof *s->work);
    s->cand = pti_malloc(n * sizeof *s->cand);
    s->buf = pti_malloc(n * sizeof *s->buf);
    s->ring = o.repeat_last_n > 0 ? pti_malloc((size_t)o.repeat_last_n * sizeof *s->ring) : NULL;
    if (!s->count || !s->work || !s->cand || !s->buf || (o.repeat_last_n > 0 && !s->ring)) {
        pti_sampler_free(s);
        return pti_error_null(PT_ERR_OOM, "pti_sampler_new: out of memory for n_vocab %d",
                              (int)n_vocab);
    }
    s->seed = o.seed >= 0 ? (uint64_t)o.seed : random_seed(s);
    return s;
}

void pti_sampler_free(pti_sampler *s)
{
    if (!s)
        return;
    free(s->ring);
    free(s->count);
    free(s->work);
    free(s->cand);
    free(s->buf);
    free(s);
}

void pti_sampler_reset(pti_sampler *s)
{
    if (!s)
        return;
    for (int32_t i = 0; i < s->ring_len; i++)
        s->count[s->ring[(s->ring_first + i) % s->o.repeat_last_n]] = 0;
    s->ring_len = 0;
    s->ring_first = 0;
    s->counter = 0;
}

uint64_t pti_sampler_seed(const pti_sampler *s)
{
    return s ? s->seed : 0;
}

pt_status pti_sampler_accept(pti_sampler *s, int32_t token)
{
    if (!s)
        return pti_error(PT_ERR_NULL, "pti_sampler_accept: sampler is NULL");
    if (token < 0 || token >= s->n_vocab)
        return pti_error(PT_ERR_INVALID_ARG,
                         "pti_sampler_accept: token %d outside the vocabulary [0, %d)", (int)token,
                         (int)s->n_vocab);
    int32_t cap = s->o.repeat_last_n;
    if (cap == 0)
        return PT_OK;
    if (s->ring_len == cap) {
        s->count[s->ring[s->ring_first]]--;
        s->ring[s->ring_first] = token;
        s->ring_first = (s->ring_first + 1) % cap;
    } else {
        s->ring[(s->ring_first + s->ring_len) % cap] = token;
        s->ring_len++;
    }
    s->count[token]++;
    return PT_OK;
}

/* ---- penalties ---------------------------------------------------------------------------- */

static bool penalties_active(const pti_sampler *s)
{
    const pti_sampler_opts *o = &s->o;
    return o->repeat_last_n > 0 && s->ring_len > 0 &&
           !(o->repeat_penalty == 1.0f && o->frequency_penalty == 0.0f &&
             o->presence_penalty == 0.0f);
}

/* Token t's logit l after the penalties, c its count in the window (c > 0). */
static float penalized(const pti_sampler_opts *o, float l, int32_t c)
{
    l = l <= 0.0f ? l * o->repeat_penalty : l / o->repeat_penalty;
    return l - ((float)c * o->frequency_penalty + o->presence_penalty);
}

/* s->work = logits with each token of the window penalized once (the greedy path). NaNs stay
 * NaN: argmax treats them as -inf. */
static const float *apply_penalties(pti_sampler *s, const float *logits)
{
    float *w = s->work;
    memcpy(w, logits, (size_t)s->n_vocab * sizeof *w);
    int32_t cap = s->o.repeat_last_n;
    /* from the caller's logits, so a token repeated in the ring is penalized once */
    for (int32_t j = 0; j < s->ring_len; j++) {
        int32_t t = s->ring[(s->ring_first + j) % cap];
        w[t] = penalized(&s->o, logits[t], s->count[t]);
    }
    return w;
}

/* ---- selection ---------------------------------------------------------------------------- */

/* a ranks before b: higher logit, then lower id (a total order, so results are deterministic). */
static inline bool better(const cand *a, const cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* Restores the min-heap (root = worst) below position i of h[0..n). */
static void sift_down(cand *h, int32_t n, int32_t i)
{
    cand x = h[i];
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && better(&h[c], &h[c + 1]))
            c++;
        if (!better(&x, &h[c]))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static void sift_up(cand *h, int32_t i)
{
    cand x = h[i];
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!better(&h[p], &x))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

/* Turns the min-heap h[0..k) into a best-first sorted array. */
static void heap_to_sorted(cand *h, int32_t k)
{
    for (int32_t end = k - 1; end > 0; end--) {
        cand t = h[0];
        h[0] = h[end];
        h[end] = t;
        sift_down(h, end, 0);
    }
}

static void heap_offer(cand *h, int32_t *len, int32_t k, cand c)
{
    if (*len < k) {
        h[*len] = c;
        sift_up(h, (*len)++);
    } else if (better(&c, &h[0])) {
        h[0] = c;
        sift_down(h, k, 0);
    }
}

/* out[0..k) = the k best of the n logits (NaN as -inf), best first. 1 <= k <= n. */
static void select_from_logits(const float *src, int32_t n, int32_t k, cand *out)
{
    int32_t len = 0;
    for (int32_t i = 0; i < k; i++)
        heap_offer(out, &len, k, (cand){isnan(src[i]) ? -INFINITY : src[i], i, 0.0f});
    /* A later equal logit has a higher id, so it never beats the root: '>' suffices, and NaN
     * fails it. Blocks of 16 are first tested against the root as a whole (a branch-free loop
     * the compiler vectorizes): once the heap has warmed up almost every block is skipped. */
    int32_t i = k;
    for (; i + 16 <= n; i += 16) {
        float thr = out[0].logit;
        int any = 0;
        for (int j = 0; j < 16; j++)
            any |= src[i + j] > thr;
        if (!any)
            continue;
        for (int j = 0; j < 16; j++)
            if (src[i + j] > out[0].logit) {
                out[0] = (cand){src[i + j], i + j, 0.0f};
                sift_down(out, k, 0);
            }
    }
    for (; i < n; i++)
        if (src[i] > out[0].logit) {
            out[0] = (cand){src[i], i, 0.0f};
            sift_down(out, k, 0);
        }
    heap_to_sorted(out, k);
}

/* Offers src[i0 .. i1) to the full heap out[0..k), skipping the marked (count < 0) tokens. */
static void offer_unmarked(const float *src, const int32_t *count, int32_t i0, int32_t i1,
                           int32_t k, cand *out)
{
    for (int32_t i = i0; i < i1; i++) {
        cand c = {isnan(src[i]) ? -INFINITY : src[i], i, 0.0f};
        if (count[i] == 0 && better(&c, &out[0])) {
            out[0] = c;
            sift_down(out, k, 0);
        }
    }
}

/* out[0..k) = the k best of the penalized logits (NaN as -inf), best first, without writing the
 * penalized copy of the whole vocabulary: the window's distinct tokens enter the heap first with
 * their penalized logits (their counts negated meanwhile, which marks them), then the scan of
 * the caller's logits skips the marked tokens. better() is a total order, so this is the same
 * set in the same order as select_from_logits on the penalized copy. 1 <= k < n_vocab. */
static void select_penalized(pti_sampler *s, const float *src, int32_t k, cand *out)
{
    int32_t n = s->n_vocab, cap = s->o.repeat_last_n, len = 0;
    int32_t *count = s->count;
    for (int32_t j = 0; j < s->ring_len; j++) {
        int32_t t = s->ring[(s->ring_first + j) % cap];
        if (count[t] <= 0)
            continue; /* offered already */
        float l = penalized(&s->o, src[t], count[t]);
        heap_offer(out, &len, k, (cand){isnan(l) ? -INFINITY : l, t, 0.0f});
        count[t] = -count[t];
    }
    int32_t i = 0;
    for (; i < n && len < k; i++) /* the window has < k distinct tokens: fill the heap */
        if (count[i] == 0)
            heap_offer(out, &len, k, (cand){isnan(src[i]) ? -INFINITY : src[i], i, 0.0f});
    /* The root may be a window token of a higher id, so a logit equal to the root's can win:
     * the block test is "not below" (true for NaN too, which the full test then ranks as
     * -inf), and a hit goes through better(). */
    for (; i + 16 <= n; i += 16) {
        float thr = out[0].logit;
        int any = 0;
        for (int j = 0; j < 16; j++)
            any |= !(src[i + j] < thr);
        if (any)
            offer_unmarked(src, count, i, i + 16, k, out);
    }
    offer_unmarked(src, count, i, n, k, out);
    for (int32_t j = 0; j < s->ring_len; j++) {
        int32_t t = s->ring[(s->ring_first + j) % cap];
        if (count[t] < 0)
            count[t] = -count[t];
    }
    heap_to_sorted(out, k);
}

/* out[0..k) = the k best of in[0..n), best first. 1 <= k <= n; out and in do not overlap. */
static void select_from_cands(const cand *in, int32_t n, int32_t k, cand *out)
{
    int32_t len = 0;
    for (int32_t i = 0; i < n; i++)
        heap_offer(out, &len, k, in[i]);
    heap_to_sorted(out, k);
}

/* Sorts c[0..n) best-first in place (heapsort: no allocation). */
static void sort_inplace(cand *c, int32_t n)
{
    for (int32_t i = n / 2 - 1; i >= 0; i--)
        sift_down(c, n, i);
    heap_to_sorted(c, n);
}

/* ---- softmax ------------------------------------------------------------------------------ */

static float max_logit(const cand *c, int32_t n)
{
    float m = c[0].logit;
    for (int32_t i = 1; i < n; i++)
        m = c[i].logit > m ? c[i].logit : m;
    return m;
}

/* Unnormalized exp(logit - max) into p; +inf logits take all the mass equally. */
static void exp_shifted(cand *c, int32_t n, float m)
{
    if (m == INFINITY) {
        for (int32_t i = 0; i < n; i++)
            c[i].p = c[i].logit == INFINITY ? 1.0f : 0.0f;
    } else {
        for (int32_t i = 0; i < n; i++)
            c[i].p = expf(c[i].logit - m);
    }
}

/* llama.cpp's softmax_impl: float sum. */
static void softmax(cand *c, int32_t n)
{
    exp_shifted(c, n, max_logit(c, n));
    float sum = 0.0f;
    for (int32_t i = 0; i < n; i++)
        sum += c[i].p;
    for (int32_t i = 0; i < n; i++)
        c[i].p /= sum;
}

/* ---- the filters -------------------------------------------------------------------------- */

typedef struct set {
    int32_t size;
    bool sorted;
} set;

static void sort_all(pti_sampler *s, set *st)
{
    if (st->sorted)
        return;
    sort_inplace(s->cand, st->size);
    st->sorted = true;
}

static void typical_filter(pti_sampler *s, set *st)
{
    float typ = s->o.typical_p;
    if (typ >= 1.0f)
        return;
    sort_all(s, st);
    cand *c = s->cand, *b = s->buf;
    int32_t n = st->size;
    softmax(c, n);
    float entropy = 0.0f;
    for (int32_t i = 0; i < n; i++)
        if (c[i].p > 0.0f) /* 0 log 0 = 0 (llama.cpp would get NaN) */
            entropy += -c[i].p * logf(c[i].p);
    /* Ascending |-log p - H| with ties by position: sort best-first on the negated score. */
    for (int32_t i = 0; i < n; i++)
        b[i] = (cand){-fabsf(-logf(c[i].p) - entropy), i, 0.0f};
    sort_inplace(b, n);
    int32_t last = n;
    float cum = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        cum += c[b[i].id].p;
        if (cum > typ) {
            last = i + 1;
            break;
        }
    }
    for (int32_t i = 0; i < last; i++)
        b[i] = c[b[i].id];
    memcpy(c, b, (size_t)last * sizeof *c);
    st->size = last;
    st->sorted = false;
}

/* For top_p on a large unsorted set: buckets the candidates by logit below the max m, finds
 * the bucket where the mass (summed per bucket in double) reaches top_p, and copies every
 * candidate of that bucket and those above it into out, sorted best-first. That is a top-k set
 * (equal logits share a bucket) holding at least top_p of the mass up to rounding; the caller
 * grows it if the exact float cumulative sum falls short. Returns k. */
static int32_t top_p_prefilter(const cand *c, int32_t n, float m, float top_p, cand *out)
{
    enum { NB = 512 };
    const float range = 32.0f, scale = NB / range; /* exp(-32) of the max: far below any cut */
    double mass[NB] = {0};
    for (int32_t i = 0; i < n; i++) {
        float d = (m - c[i].logit) * scale; /* >= 0; +inf for -inf logits */
        int b = d < (float)(NB - 1) ? (int)d : NB - 1;
        mass[b] += c[i].p;
    }
    double cum = 0.0;
    int last_b = NB - 1;
    for (int b = 0; b < NB; b++) {
        cum += mass[b];
        if (cum >= (double)top_p + 1e-6) {
            last_b = b;
            break;
        }
    }
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        float d = (m - c[i].logit) * scale;
        int b = d < (float)(NB - 1) ? (int)d : NB - 1;
        if (b <= last_b)
            out[k++] = c[i];
    }
    sort_inplace(out, k);
    return k;
}

static void top_p_filter(pti_sampler *s, set *st)
{
    float top_p = s->o.top_p;
    if (top_p >= 1.0f)
        return;
    cand *c = s->cand;
    int32_t n = st->size;
    softmax(c, n);
    const cand *pd = c;
    int32_t k = n;
    if (!st->sorted) {
        float m = max_logit(c, n);
        if (n > 1024 && isfinite(m)) {
            k = top_p_prefilter(c, n, m, top_p, s->buf);
        } else {
            k = n < 256 ? n : 256;
            select_from_cands(c, n, k, s->buf);
        }
        pd = s->buf;
    }
    int32_t last = n;
    for (;;) {
        float cum = 0.0f;
        int32_t i = 0;
        for (; i < k; i++) {
            cum += pd[i].p;
            if (cum >= top_p)
                break;
        }
        if (i < k) {
            last = i + 1;
            break;
        }
        if (k == n)
            break; /* rounding left the total short of top_p: keep everything */
        k = n / 16 > k ? k * 16 : n;
        if (k > n)
            k = n;
        select_from_cands(c, n, k, s->buf);
    }
    if (!st->sorted) {
        memcpy(c, s->buf, (size_t)last * sizeof *c);
        st->sorted = true;
    }
    st->size = last;
}

static void min_p_filter(pti_sampler *s, set *st)
{
    float min_p = s->o.min_p;
    if (min_p <= 0.0f)
        return;
    cand *c = s->cand;
    float m = -FLT_MAX;
    for (int32_t i = 0; i < st->size; i++)
        m = c[i].logit > m ? c[i].logit : m;
    float min_logit = m + logf(min_p);
    int32_t kept = 0;
    for (int32_t i = 0; i < st->size; i++)
        if (c[i].logit >= min_logit)
            c[kept++] = c[i];
    if (kept == 0) {
        /* min_p > 1 (or +inf): like llama.cpp's sorted path, the best token alone remains */
        int32_t best = 0;
        for (int32_t i = 1; i < st->size; i++)
            if (better(&c[i], &c[best]))
                best = i;
        c[0] = c[best];
        kept = 1;
    }
    st->size = kept;
}

/* ---- the chain ---------------------------------------------------------------------------- */

static bool check_call(const pti_sampler *s, const float *logits, int32_t n_vocab, const char *op)
{
    if (!s || !logits) {
        pti_error(PT_ERR_NULL, "%s: %s is NULL", op, s ? "logits" : "sampler");
        return false;
    }
    if (n_vocab != s->n_vocab) {
        pti_error(PT_ERR_INVALID_ARG, "%s: %d logits for a sampler of n_vocab %d", op, (int)n_vocab,
                  (int)s->n_vocab);
        return false;
    }
    return true;
}

/* Greedy: the argmax of the (penalized) logits, lowest id on ties; -1 if none is above -inf. */
static int32_t argmax(const float *src, int32_t n)
{
    /* Two passes: the max with 8 independent lanes (NaN never wins '>'), then its first
     * position. Much faster than one branchy pass with an index. */
    float lane[8];
    for (int j = 0; j < 8; j++)
        lane[j] = -INFINITY;
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            lane[j] = src[i + j] > lane[j] ? src[i + j] : lane[j];
    float m = -INFINITY;
    for (; i < n; i++)
        m = src[i] > m ? src[i] : m;
    for (int j = 0; j < 8; j++)
        m = lane[j] > m ? lane[j] : m;
    if (m == -INFINITY)
        return -1;
    for (i = 0; i < n; i++)
        if (src[i] == m)
            return i;
    return -1;
}

/* Runs the chain up to dist's softmax: s->cand[0..size) with normalized p. Returns size, or
 * -1 with the error set. */
static int32_t run_chain(pti_sampler *s, const float *logits, const char *op)
{
    bool pen = penalties_active(s);
    int32_t n = s->n_vocab;
    if (s->o.temperature <= 0.0f) {
        const float *src = pen ? apply_penalties(s, logits) : logits;
        int32_t t = argmax(src, n);
        if (t < 0) {
            pti_error(PT_ERR_INVALID_ARG, "%s: no logit above -inf", op);
            return -1;
        }
        s->cand[0] = (cand){src[t], t, 1.0f};
        return 1;
    }
    set st = {n, false};
    int32_t k = s->o.top_k;
    if (k > 0 && k < n) {
        if (pen)
            select_penalized(s, logits, k, s->cand);
        else
            select_from_logits(logits, n, k, s->cand);
        st = (set){k, true};
    } else {
        for (int32_t i = 0; i < n; i++)
            s->cand[i] = (cand){isnan(logits[i]) ? -INFINITY : logits[i], i, 0.0f};
        for (int32_t j = 0; pen && j < s->ring_len; j++) { /* cand[t] is token t here */
            int32_t t = s->ring[(s->ring_first + j) % s->o.repeat_last_n];
            float l = penalized(&s->o, logits[t], s->count[t]);
            s->cand[t].logit = isnan(l) ? -INFINITY : l;
        }
    }
    if (max_logit(s->cand, st.size) == -INFINITY) {
        pti_error(PT_ERR_INVALID_ARG, "%s: no logit above -inf", op);
        return -1;
    }
    typical_filter(s, &st);
    top_p_filter(s, &st);
    min_p_filter(s, &st);
    cand *c = s->cand;
    for (int32_t i = 0; i < st.size; i++)
        c[i].logit /= s->o.temperature;
    /* dist: llama.cpp's softmax with a double sum */
    float m = max_logit(c, st.size);
    if (m == -INFINITY) {
        pti_error(PT_ERR_INVALID_ARG, "%s: temperature %g underflows every logit to -inf", op,
                  (double)s->o.temperature);
        return -1;
    }
    exp_shifted(c, st.size, m);
    double sum = 0.0;
    for (int32_t i = 0; i < st.size; i++)
        sum += c[i].p;
    for (int32_t i = 0; i < st.size; i++)
        c[i].p = (float)(c[i].p / sum);
    return st.size;
}

int32_t pti_sample(pti_sampler *s, const float *logits, int32_t n_vocab)
{
    if (!check_call(s, logits, n_vocab, "pti_sample"))
        return -1;
    int32_t n = run_chain(s, logits, "pti_sample");
    if (n < 0)
        return -1;
    if (s->o.temperature <= 0.0f)
        return s->cand[0].id;
    uint32_t w[4];
    pti_philox(s->seed, s->counter++, w);
    double r = pti_u64_to_double(w[0], w[1]); /* [0, 1) */
    /* Cumulative search in candidate order; '>' so a zero-probability candidate is never
     * picked, and the last positive one is the fallback for rounding. */
    double total = 0.0, run = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += s->cand[i].p;
    double target = r * total;
    int32_t pick = -1;
    for (int32_t i = 0; i < n; i++) {
        if (s->cand[i].p <= 0.0f)
            continue;
        pick = i;
        run += s->cand[i].p;
        if (run > target)
            break;
    }
    return s->cand[pick < 0 ? 0 : pick].id;
}

int32_t pti_sampler_probs(pti_sampler *s, const float *logits, int32_t n_vocab, int32_t *ids,
                          float *probs, int32_t cap)
{
    if (!check_call(s, logits, n_vocab, "pti_sampler_probs"))
        return -1;
    if (cap < 0 || (cap > 0 && (!ids || !probs))) {
        pti_error(PT_ERR_INVALID_ARG, "pti_sampler_probs: cap %d with NULL output arrays",
                  (int)cap);
        return -1;
    }
    int32_t n = run_chain(s, logits, "pti_sampler_probs");
    for (int32_t i = 0; i < n && i < cap; i++) {
        ids[i] = s->cand[i].id;
        probs[i] = s->cand[i].p;
    }
    return n;
}
