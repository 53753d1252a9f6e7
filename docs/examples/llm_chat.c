/* docs/llm.md's example: load a GGUF model, ask one chat question, stream the answer.
 * Usage: llm_chat [MODEL.gguf] (default data/models/SmolLM2-135M-Instruct.Q4_1.gguf). */
#include <prometorch/prometorch.h>
#include <stdio.h>

static bool print_piece(int32_t token, const char *text, size_t len, void *user)
{
    (void)token, (void)user;
    fwrite(text, 1, len, stdout); /* whole UTF-8 characters; stop strings held back */
    fflush(stdout);
    return true; /* false stops generation */
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    pt_llm_opts lo = {.n_threads = 4, .num_ctx = 2048};
    pt_llm *llm = pt_llm_load(path, &lo);
    if (!llm) {
        fprintf(stderr, "%s\n", pt_last_error());
        return 1;
    }
    pt_chat_msg msgs[] = {{"user", "Name three prime numbers."}};
    pt_gen_stats st;
    pt_gen_opts go = pt_gen_opts_default(); /* Ollama's defaults */
    go.temperature = 0;                     /* greedy */
    go.num_predict = 64;
    go.stats = &st;
    if (pt_llm_chat(llm, msgs, 1, &go, print_piece, NULL) != PT_OK)
        fprintf(stderr, "%s\n", pt_last_error());
    printf("\n%d tokens at %.1f tokens/s (%s)\n", st.gen_tokens, st.gen_tokens / (st.gen_ns / 1e9),
           st.done_reason);
    pt_llm_free(llm);
    return 0;
}
