#!/bin/sh
# The official `ollama` and `openai` Python clients and curl against a real promeserve (issue 7,
# item 8), run by ctest (tools/CMakeLists.txt: promeserve_clients).
#   run_clients.sh PROMESERVE
# 1. Finds SmolLM2-135M-Instruct.Q4_1.gguf in $PT_MODELS_DIR (ctest sets it from the CMake
#    variable PT_MODELS_DIR); fails (exit 1) when it is absent.
# 2. Uses the virtual environment scripts/setup-venv.sh made ($PT_CLIENTS_VENV: ctest sets
#    BUILD/clients-venv; `make test` makes it before ctest runs); a failing set-up fails the test.
# 3. Starts `promeserve serve` on a free loopback port with an empty temporary OLLAMA_MODELS
#    store; test_ollama_client.py --create puts the model into it through the API (blob upload
#    and /api/create, twice: the GGUF as is, and with a tool-calling template).
# 4. Runs test_ollama_client.py, test_openai_client.py and check_curl.sh against it, then stops
#    the server with SIGTERM: it must exit 0 within 30 s.
# Prints the usual "N passed, M failed" line (steps, not single checks: each step prints its own).
set -u
bin=$1
here=$(cd "$(dirname "$0")" && pwd)

model="${PT_MODELS_DIR:-}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -z "${PT_MODELS_DIR:-}" ] || [ ! -f "$model" ]; then
    echo "FAIL: SmolLM2-135M-Instruct.Q4_1.gguf is not in PT_MODELS_DIR" \
         "(${PT_MODELS_DIR:-unset}): run make models"
    exit 1
fi
if [ ! -x "$bin" ]; then
    echo "FAIL: $bin is not an executable"
    exit 1
fi

# ---- the clients' virtual environment ---------------------------------------------------------
# made by scripts/setup-venv.sh (`make test` runs it first; here it only checks it is up to date)
venv=${PT_CLIENTS_VENV:-${TMPDIR:-/tmp}/promeserve-clients-venv}
if ! sh "$here/../../scripts/setup-venv.sh" "$venv"; then
    echo "FAIL: scripts/setup-venv.sh $venv failed (python3-venv and PyPI are needed)"
    exit 1
fi
py="$venv/bin/python"

# ---- the server ----------------------------------------------------------------------------------
tmp=$(mktemp -d) || exit 1
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
mkdir -p "$tmp/store"
export OLLAMA_MAX_QUEUE=4   # test_ollama_client.py's 503 test relies on it
OLLAMA_HOST=127.0.0.1:$port OLLAMA_MODELS=$tmp/store OLLAMA_NUM_PARALLEL=2 \
OLLAMA_CONTEXT_LENGTH=2048 OLLAMA_KEEP_ALIVE=5m \
    "$bin" serve > "$tmp/server.log" 2>&1 &
server_pid=$!

up=0
i=0
while [ $i -lt 120 ]; do
    if ! kill -0 "$server_pid" 2>/dev/null; then
        break
    fi
    if curl -sf -o /dev/null "$url/api/version"; then
        up=1
        break
    fi
    sleep 0.5
    i=$((i + 1))
done
if [ $up = 0 ]; then
    echo "FAIL: promeserve serve did not answer GET /api/version on $url within 60 s"
    echo "--- server log:"
    tail -n 50 "$tmp/server.log"
    exit 1
fi

pass=0
fail=0
step() {
    name=$1
    shift
    echo "==== $name"
    if timeout 600 "$@"; then
        pass=$((pass + 1))
    else
        echo "FAIL: $name (exit $?)"
        fail=$((fail + 1))
    fi
}
export PROMESERVE_URL="$url"
export PROMESERVE_TEST_GGUF="$model"
step "create the test models through /api/blobs and /api/create" \
    "$py" "$here/test_ollama_client.py" --create
step "ollama client" "$py" "$here/test_ollama_client.py"
step "openai client" "$py" "$here/test_openai_client.py"
step "curl" sh "$here/check_curl.sh" "$url" "$py"

# ---- graceful shutdown ---------------------------------------------------------------------------
if kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    i=0
    while kill -0 "$server_pid" 2>/dev/null && [ $i -lt 60 ]; do
        sleep 0.5
        i=$((i + 1))
    done
    if kill -0 "$server_pid" 2>/dev/null; then
        echo "FAIL: promeserve did not stop within 30 s of SIGTERM"
        fail=$((fail + 1))
        kill -KILL "$server_pid"
        wait "$server_pid" 2>/dev/null
    else
        wait "$server_pid"
        rc=$?
        if [ $rc = 0 ]; then
            pass=$((pass + 1))
        else
            echo "FAIL: promeserve exited $rc after SIGTERM, expected 0"
            fail=$((fail + 1))
        fi
    fi
else
    echo "FAIL: promeserve died during the tests"
    fail=$((fail + 1))
    wait "$server_pid"
fi
server_pid=""
if [ $fail != 0 ]; then
    echo "--- server log (last 80 lines):"
    tail -n 80 "$tmp/server.log"
fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
