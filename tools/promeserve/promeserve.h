/* promeserve: the subcommands of the command-line front end (main.c dispatches to them). */
#ifndef PROMESERVE_H
#define PROMESERVE_H

/* `promeserve run MODEL.gguf [PROMPT...] [options]`: argv[0] is "run". Returns the exit
 * status (0 success, 1 an error, printed as "Error: ..." on stderr). */
int ps_cmd_run(int argc, char **argv);

/* `promeserve serve [flags] [MODEL.gguf ...]`: argv[0] is "serve". Runs the HTTP server until
 * SIGINT/SIGTERM; returns the exit status (0 after a graceful shutdown, 1 on an error). */
int ps_cmd_serve(int argc, char **argv);

/* `promeserve list [PREFIX...] [--models DIR]` (alias ls), `show MODEL [--modelfile|
 * --parameters|--template|--system|--license] [-v]`, `cp SRC DST`, `rm MODEL...`: the store
 * commands (list.c), reading $OLLAMA_MODELS directly; argv[0] is the command name. Return the
 * exit status (errors printed as "Error: ..." on stderr). */
int ps_cmd_list(int argc, char **argv);
int ps_cmd_show(int argc, char **argv);
int ps_cmd_cp(int argc, char **argv);
int ps_cmd_rm(int argc, char **argv);

#endif
