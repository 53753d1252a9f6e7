#!/bin/sh
# Checks `promeserve run` end to end (run by ctest; see tools/CMakeLists.txt).
#   check_promeserve.sh PROMESERVE
# Usage and error paths need no model. The rest runs SmolLM2-135M-Instruct.Q4_1.gguf from
# $PT_MODELS_DIR (ctest sets it from the CMake variable PT_MODELS_DIR) and fails without it: a greedy one-shot answer (non-empty, the same twice), a prompt piped on stdin,
# a chat driven through a pipe (two turns, a slash command, /bye), --verbose's timing lines,
# and the terminal on a pseudo-terminal (check_promeserve_pty.py: the prompt's hint; Ctrl-C
# stops an answer at once and returns to the prompt; at the prompt it keeps the chat and says
# how to leave; an answer cut off by a full context says so).
# Prints the usual "N passed, M failed" line.
set -u
bin=$1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
show() { echo "--- stdout:"; cat "$tmp/out"; echo "--- stderr:"; cat "$tmp/err"; }
# run EXPECTED_STATUS ARGS...: runs promeserve with stdin from $tmp/in
run() {
    want=$1
    shift
    timeout 300 "$bin" "$@" < "$tmp/in" > "$tmp/out" 2> "$tmp/err"
    got=$?
    if [ "$got" != "$want" ]; then
        echo "promeserve $* exited $got, expected $want"; show; return 1
    fi
    return 0
}
: > "$tmp/in"

# ---- no model needed ---------------------------------------------------------------------------
run 0 && grep -q "run" "$tmp/out" && ok || bad "usage without arguments"
run 0 --help && grep -qi "not available yet" "$tmp/out" && ok || bad "--help"
run 1 pull x && grep -q "^Error: .*not available yet" "$tmp/err" && ok || bad "pull"
run 1 run "$tmp/missing.gguf" hello && grep -q "^Error: " "$tmp/err" && ok || bad "missing file"
run 1 run && grep -q "^Error: " "$tmp/err" && ok || bad "no model argument"
run 0 run --help && grep -q -- "--num-predict" "$tmp/out" && ok || bad "run --help"

model="${PT_MODELS_DIR:-}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -z "${PT_MODELS_DIR:-}" ] || [ ! -f "$model" ]; then
    echo "FAIL: SmolLM2-135M-Instruct.Q4_1.gguf is not in PT_MODELS_DIR" \
         "(${PT_MODELS_DIR:-unset}): run make models"
    echo "$pass passed, $((fail + 1)) failed"
    exit 1
fi
greedy="--temperature 0 --num-predict 16 --threads 2 --ctx 1024"

# ---- bad option values (the model exists, so only the option can be at fault) ------------------
run 1 run "$model" hi --temperature abc && grep -q "^Error: " "$tmp/err" && ok || bad "bad value"
run 1 run "$model" hi --threads 0 && grep -q "^Error: " "$tmp/err" && ok || bad "--threads 0"
run 1 run "$model" hi --no-such-flag && grep -q "^Error: " "$tmp/err" && ok || bad "unknown flag"
run 1 run "$model" hi --num-predict && grep -q "^Error: " "$tmp/err" && ok || bad "no value"

# ---- one-shot ----------------------------------------------------------------------------------
if run 0 run "$model" What is the capital "of France?" $greedy || { bad "one-shot"; false; }; then
    if [ -s "$tmp/out" ] && grep -q '[[:alnum:]]' "$tmp/out"; then ok
    else bad "empty answer"; show; fi
    cp "$tmp/out" "$tmp/first"
    if run 0 run "$model" What is the capital "of France?" $greedy || { bad "one-shot"; false; }; then
        cmp -s "$tmp/out" "$tmp/first" && ok || { bad "greedy answers differ"; show; }
    fi
fi

# a prompt on stdin (not a terminal, no prompt words): one-shot, as `ollama run` with a pipe
echo "Name three colors." > "$tmp/in"
if run 0 run "$model" $greedy || { bad "piped prompt"; false; }; then
    if grep -q '[[:alnum:]]' "$tmp/out" && ! grep -q '>>>' "$tmp/out"; then ok
    else bad "piped prompt"; show; fi
fi

# ---- a chat through a pipe: two turns, a command, /bye (the line after it is never read) -------
printf 'Hi, my name is Ann.\n/set parameter num_predict 12\nWhat is my name?\n/bye\nnot read\n' \
    > "$tmp/in"
if run 0 run "$model" --interactive $greedy || { bad "chat"; false; }; then
    prompts=$(grep -o '>>> ' "$tmp/out" | wc -l)
    if [ "$prompts" -eq 4 ] && grep -q "Set parameter 'num_predict' to '12'" "$tmp/out"; then ok
    else bad "chat: expected 4 prompts and the /set reply"; show; fi
fi

# ---- --verbose: Ollama's timing lines on stderr ------------------------------------------------
: > "$tmp/in"
if run 0 run "$model" Hello $greedy --verbose || { bad "--verbose"; false; }; then
    missing=""
    for line in "total duration:" "load duration:" "prompt eval count:" "prompt eval duration:" \
                "prompt eval rate:" "eval count:" "eval duration:" "eval rate:"; do
        grep -q "^$line" "$tmp/err" || missing="$missing [$line]"
    done
    rates=$(grep -c "rate: *[0-9.]* tokens/s" "$tmp/err")
    if [ -z "$missing" ] && [ "$rates" -eq 2 ] && grep -q "^eval count: *[1-9]" "$tmp/err"; then ok
    else bad "--verbose lines missing:$missing"; show; fi
fi

# ---- Ctrl-C on a terminal (a pseudo-terminal driven by Python, when there is one) --------------
if command -v python3 > /dev/null 2>&1; then
    python3 "$(dirname "$0")/check_promeserve_pty.py" "$bin" "$model" && ok || bad "terminal"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
