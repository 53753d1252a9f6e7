/* Embedding PromeTorch's Ollama-compatible server (include/prometorch/server.h) in a program:
 * the whole of docs/promeserve.md's "Embedding the server" example.
 * Usage: embed_server [MODELS_DIR]   -- serves the .gguf files of MODELS_DIR by file name (and
 * the Ollama store) on a free loopback port until its standard input ends (Ctrl-D). */
#include <prometorch/prometorch.h>
#include <prometorch/server.h>
#include <signal.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);  /* a client hanging up mid-reply must not end the program */
    pt_server_opts opts = {0}; /* zero values: the defaults (127.0.0.1, a free port, ...) */
    opts.models_dir = argc > 1 ? argv[1] : NULL;
    pt_server *srv = pt_server_start(&opts);
    if (!srv) {
        fprintf(stderr, "embed_server: %s\n", pt_last_error());
        return 1;
    }
    printf("serving on http://%s:%d\n", pt_server_host(srv), pt_server_port(srv));
    fflush(stdout);
    while (getchar() != EOF) /* until stdin ends */
        ;
    pt_server_stop(srv); /* waits for requests in flight, unloads the models */
    return 0;
}
