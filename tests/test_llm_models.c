/* The LLM engine against llama.cpp: for each model with a reference file recorded by
 * tests/fixtures/gen_llamacpp.py (real models) or gen_tiny_models.py (small random-weight
 * models of each architecture), the prompts tokenize to llama.cpp's ids, the prompt's
 * last-token logits agree, and greedy decoding (argmax each step, as the generator did)
 * produces llama.cpp's tokens.
 *
 * Real models are looked up in $PT_MODELS_DIR, which ctest sets from the CMake variable
 * PT_MODELS_DIR (default data/models of the source tree, where `make models` fetches them); a
 * missing model fails its test. The reference files
 * are committed, so no Python is needed here.
 *
 * Logit tolerance: both sides quantize activations the same way and read the same quantized
 * weights, but sum in different orders, round differently in places (llama.cpp's GELU is a
 * float16 table lookup; its attention runs in float16 with other accumulation orders), so
 * logits differ by float rounding amplified through the layers. LOGIT_ATOL bounds that
 * (measured differences are printed). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/testutil.h"

#define MAX_IDS 4096
#define LOGIT_ATOL 0.25

typedef struct ref_prompt {
    char *text; /* NULL when the prompt was given as ids */
    int32_t ids[MAX_IDS], n_ids;
    int32_t greedy[MAX_IDS], n_greedy;
    float margin[MAX_IDS]; /* llama.cpp's top-1 minus top-2 logit at each greedy step */
    int n_margin;
    float selfdiff; /* llama.cpp's batched vs token-by-token difference (-1: not recorded) */
    int32_t top_id[64];
    float top_logit[64];
    int n_top;
    float *logits; /* every logit, when recorded (tiny models) */
    int64_t n_logits;
} ref_prompt;

static char *unhex(const char *h, size_t n)
{
    char *s = malloc(n / 2 + 1);
    for (size_t i = 0; i + 1 < n + 1 && 2 * i < n; i++) {
        unsigned v = 0;
        sscanf(h + 2 * i, "%2x", &v);
        s[i] = (char)v;
    }
    s[n / 2] = '\0';
    return s;
}

static int parse_ids(const char *p, int32_t *out, int cap)
{
    int n = 0;
    char *end;
    for (;;) {
        long v = strtol(p, &end, 10);
        if (end == p || n == cap)
            return n;
        out[n++] = (int32_t)v;
        p = end;
    }
}

/* Reads a .ref file's prompts (at most cap) into out; returns their number. */
static int read_ref(const char *path, ref_prompt *out, int cap)
{
    size_t len;
    char *buf = pt_test_read_file(path, &len);
    int n = -1;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "prompt ", 7) == 0 && n + 1 < cap) {
            ref_prompt *r = &out[++n];
            memset(r, 0, sizeof *r);
            char *colon = strstr(line, " : ");
            assert_non_null(colon);
            size_t hl = (size_t)(colon - (line + 7));
            r->text = (hl == 1 && line[7] == '-') ? NULL : unhex(line + 7, hl);
            r->n_ids = parse_ids(colon + 3, r->ids, MAX_IDS);
            r->selfdiff = -1.0f;
        } else if (n >= 0 && strncmp(line, "greedy :", 8) == 0) {
            out[n].n_greedy = parse_ids(line + 8, out[n].greedy, MAX_IDS);
        } else if (n >= 0 && strncmp(line, "margins :", 9) == 0) {
            char *p = line + 9, *end;
            while (out[n].n_margin < MAX_IDS) {
                float v = strtof(p, &end);
                if (end == p)
                    break;
                out[n].margin[out[n].n_margin++] = v;
                p = end;
            }
        } else if (n >= 0 && strncmp(line, "selfdiff ", 9) == 0) {
            out[n].selfdiff = strtof(line + 9, NULL);
        } else if (n >= 0 && strncmp(line, "top ", 4) == 0) {
            char *p = line + 4, *end;
            while (out[n].n_top < 64) {
                long id = strtol(p, &end, 10);
                if (end == p || *end != ':')
                    break;
                out[n].top_id[out[n].n_top] = (int32_t)id;
                out[n].top_logit[out[n].n_top++] = strtof(end + 1, &p);
            }
        } else if (n >= 0 && strncmp(line, "logits ", 7) == 0) {
            char *p = line + 7, *end;
            out[n].logits = malloc(sizeof(float) * 1000000);
            for (;;) {
                float v = strtof(p, &end);
                if (end == p)
                    break;
                out[n].logits[out[n].n_logits++] = v;
                p = end;
            }
        }
    }
    free(buf);
    return n + 1;
}

static void free_ref(ref_prompt *r, int n)
{
    for (int i = 0; i < n; i++) {
        free(r[i].text);
        free(r[i].logits);
    }
}

static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

typedef struct agree_stats {
    double max_logit_diff, tol;
    int prompts, tokens, forks, failures;
} agree_stats;

/* The logit tolerance for a prompt: the largest of LOGIT_ATOL; twice llama.cpp's own difference
 * between its batched and token-by-token evaluation of the prompt (its two kernels round
 * differently: we cannot be expected closer to it than it is to itself); and twice the model's
 * sensitivity to rounding, measured as how far its logits move when only the KV cache's
 * precision changes (float16 -> float32). Deep quantized models amplify any rounding difference
 * through their layers: SmolLM2-135M Q4_1's logits move by up to ~1 from that one change, so two
 * implementations that round differently in many places differ by that much too. */
static double tolerance(const ref_prompt *r, double sensitivity)
{
    double tol = LOGIT_ATOL;
    if (r->selfdiff > 0 && 2.0 * r->selfdiff > tol)
        tol = 2.0 * r->selfdiff;
    return 2.0 * sensitivity > tol ? 2.0 * sensitivity : tol;
}

/* Max |logit difference| between llm's logits for the prompt and those of the same model with a
 * float32 KV cache. */
static double kv_sensitivity(pt_llm *llm, pt_llm *llm32, const ref_prompt *r)
{
    const pt_llm_info *info = pt_llm_get_info(llm);
    assert_int_equal(pt_llm_eval(llm32, r->ids, r->n_ids, 0), PT_OK);
    const float *a = pt_llm_logits(llm), *b = pt_llm_logits(llm32);
    double worst = 0;
    for (int32_t k = 0; k < info->n_vocab; k++) {
        double d = fabs((double)a[k] - b[k]);
        worst = d > worst ? d : worst;
    }
    return worst;
}

static bool check_logits(pt_llm *llm, const ref_prompt *r, int idx, agree_stats *st, double tol,
                         double *observed)
{
    const pt_llm_info *info = pt_llm_get_info(llm);
    const float *lg = pt_llm_logits(llm);
    double worst = 0;
    for (int k = 0; k < r->n_top; k++) {
        double d = fabs((double)lg[r->top_id[k]] - r->top_logit[k]);
        worst = d > worst ? d : worst;
    }
    for (int64_t k = 0; k < r->n_logits && k < info->n_vocab; k++) {
        double d = fabs((double)lg[k] - r->logits[k]);
        worst = d > worst ? d : worst;
    }
    st->max_logit_diff = worst > st->max_logit_diff ? worst : st->max_logit_diff;
    st->tol = tol > st->tol ? tol : st->tol;
    *observed = worst;
    if (worst > tol)
        printf("  prompt %d: last-token logits differ by up to %.4f (tolerance %.4f)\n", idx, worst,
               tol);
    return worst <= tol;
}

/* Greedy decoding against llama.cpp's: every token must be the same, except that at a step
 * where llama.cpp's two best logits are closer than twice the logit difference observed between
 * the two engines on this prompt (a near-tie neither can be trusted to break the same way),
 * choosing the other one is a legitimate fork; the comparison of that prompt ends there. */
static bool check_greedy(pt_llm *llm, const ref_prompt *r, int idx, agree_stats *st,
                         double observed)
{
    const pt_llm_info *info = pt_llm_get_info(llm);
    int32_t n_past = r->n_ids;
    for (int i = 0; i < r->n_greedy; i++) {
        int32_t tok = argmax(pt_llm_logits(llm), info->n_vocab);
        if (tok != r->greedy[i]) {
            const float *l = pt_llm_logits(llm);
            double m = i < r->n_margin ? r->margin[i] : -1.0;
            double tie_below = 2.0 * (observed > LOGIT_ATOL ? observed : LOGIT_ATOL);
            bool tie = m >= 0 && m <= tie_below;
            printf("  prompt %d: step %d: we chose %d (%.4f), llama.cpp %d (our %.4f; its "
                   "margin %.4f)%s\n",
                   idx, i, tok, l[tok], r->greedy[i], l[r->greedy[i]], m,
                   tie ? ": a near-tie, sequences fork here" : "");
            st->forks += tie;
            return tie;
        }
        st->tokens++;
        if (i + 1 < r->n_greedy && pt_llm_eval(llm, &tok, 1, n_past++) != PT_OK)
            return false;
    }
    return true;
}

/* Checks one prompt; returns false (after printing why) on a disagreement. */
static bool check_prompt(pt_llm *llm, pt_llm *llm32, const ref_prompt *r, int idx, agree_stats *st)
{
    if (r->text) {
        int32_t ids[MAX_IDS];
        int64_t n = pt_llm_tokenize(llm, r->text, strlen(r->text), true, true, ids, MAX_IDS);
        assert_int_equal(n, r->n_ids);
        assert_memory_equal(ids, r->ids, (size_t)n * sizeof *ids);
    }
    assert_int_equal(pt_llm_eval(llm, r->ids, r->n_ids, 0), PT_OK);
    double observed = 0, sens = kv_sensitivity(llm, llm32, r);
    bool ok = check_logits(llm, r, idx, st, tolerance(r, sens), &observed);
    return check_greedy(llm, r, idx, st, observed) && ok;
}

/* Runs every prompt of ref_path on model_path; returns false if the model is absent. */
static bool agree_with(const char *model_path, const char *ref_path, pt_llm_opts opts)
{
    FILE *f = fopen(model_path, "rb");
    if (!f) {
        printf("SKIPPED: %s not found (run `make models` or set PT_MODELS_DIR)\n", model_path);
        return false;
    }
    fclose(f);
    static ref_prompt refs[16];
    int n = read_ref(ref_path, refs, 16);
    assert_true(n > 0);
    pt_llm *llm = pt_llm_load(model_path, &opts);
    if (!llm)
        fail_msg("pt_llm_load(%s): %s", model_path, pt_last_error());
    pt_llm_opts opts32 = opts;
    opts32.kv_f32 = true;
    pt_llm *llm32 = pt_llm_load(model_path, &opts32);
    assert_non_null(llm32);
    agree_stats st = {0};
    for (int i = 0; i < n; i++) {
        st.prompts++;
        if (!check_prompt(llm, llm32, &refs[i], i, &st))
            st.failures++;
    }
    printf("%s: %d prompts, %d greedy tokens equal to llama.cpp's, %d forks at near-ties, "
           "%d failures; max |logit diff| %.4f (tolerance up to %.4f)\n",
           strrchr(model_path, '/') ? strrchr(model_path, '/') + 1 : model_path, st.prompts,
           st.tokens, st.forks, st.failures, st.max_logit_diff, st.tol);
    pt_llm_free(llm);
    pt_llm_free(llm32);
    free_ref(refs, n);
    assert_int_equal(st.failures, 0);
    return true;
}

static void real_model(const char *file, const char *ref)
{
    char model[4096], refp[2048];
    snprintf(model, sizeof model, "%s", pt_test_model_path(file)); /* fails when missing */
    snprintf(refp, sizeof refp, "%s/llm/%s", PT_FIXTURES_DIR, ref);
    pt_llm_opts o = {.num_ctx = 512};
    assert_true(agree_with(model, refp, o));
}

static void test_smollm2(void **state)
{
    (void)state;
    real_model("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q4_1.ref");
}

static void test_gemma3(void **state)
{
    (void)state;
    real_model("gemma-3-270m-q4_k_m.gguf", "gemma-3-270m-q4_k_m.ref");
}

/* Every tests/fixtures/llm/tiny/<name>.ref with its <name>.gguf next to it. */
static void test_tiny_models(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/llm/tiny", PT_FIXTURES_DIR);
    DIR *d = opendir(dir);
    if (!d) {
        printf("SKIPPED: %s is missing\n", dir);
        skip();
    }
    int checked = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".ref") != 0)
            continue;
        char model[2048], refp[2048];
        snprintf(refp, sizeof refp, "%s/%s", dir, e->d_name);
        snprintf(model, sizeof model, "%s/%.*s.gguf", dir, (int)(l - 4), e->d_name);
        pt_llm_opts o = {.num_ctx = 256};
        assert_true(agree_with(model, refp, o));
        checked++;
    }
    closedir(d);
    assert_true(checked >= 15); /* 5 architectures x 3 quantizations */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_smollm2, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_gemma3, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_tiny_models, pt_test_setup, pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
