/* promeserve: run GGUF language models from the terminal and serve them over HTTP, in the
 * manner of `ollama`.
 *
 *   promeserve serve [flags] [MODEL.gguf ...]      the Ollama/OpenAI-compatible server
 *   promeserve run MODEL.gguf [PROMPT] [options]   one-shot answer or an interactive chat
 *
 * Commands not written yet are an error that says so. Subcommands live in their own files
 * (run.c, serve.c) behind promeserve.h. */
#include <stdio.h>
#include <string.h>

#include "promeserve.h"

static const char *const LATER[] = {"pull", "push", "create", "ps", "stop", NULL};

static void usage(FILE *f)
{
    fputs("Usage:\n"
          "  promeserve [command]\n"
          "\n"
          "Available Commands:\n"
          "  serve       Start the server\n"
          "  list        List models\n"
          "  show        Show information for a model\n"
          "  cp          Copy a model\n"
          "  rm          Remove a model\n"
          "  run         Run a model (a .gguf file or an Ollama model name): one answer to a\n"
          "              prompt, or a chat\n"
          "  help        Help about any command\n"
          "\n"
          "Not available yet:\n"
          "  pull, push, create, ps, stop (use the HTTP API)\n"
          "\n"
          "Flags:\n"
          "  -h, --help   help for promeserve\n"
          "\n"
          "Use \"promeserve [command] --help\" for the options of a command.\n",
          f);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run"))
        return ps_cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve") || !strcmp(cmd, "start"))
        return ps_cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "list") || !strcmp(cmd, "ls"))
        return ps_cmd_list(argc - 1, argv + 1);
    if (!strcmp(cmd, "show"))
        return ps_cmd_show(argc - 1, argv + 1);
    if (!strcmp(cmd, "cp"))
        return ps_cmd_cp(argc - 1, argv + 1);
    if (!strcmp(cmd, "rm"))
        return ps_cmd_rm(argc - 1, argv + 1);
    if (!strcmp(cmd, "help")) {
        if (argc > 2 && !strcmp(argv[2], "run")) {
            char *args[] = {"run", "--help", NULL};
            return ps_cmd_run(2, args);
        }
        if (argc > 2 && !strcmp(argv[2], "serve")) {
            char *args[] = {"serve", "--help", NULL};
            return ps_cmd_serve(2, args);
        }
        usage(stdout);
        return 0;
    }
    for (int i = 0; LATER[i]; i++) {
        if (!strcmp(cmd, LATER[i])) {
            fprintf(stderr,
                    "Error: \"%s\" is not available yet from the command line: use "
                    "the server's HTTP API\n",
                    cmd);
            return 1;
        }
    }
    fprintf(stderr, "Error: unknown command \"%s\" for \"promeserve\"\n", cmd);
    usage(stderr);
    return 1;
}
