#!/bin/sh
# curl against a running promeserve (run_clients.sh starts it and creates smollm2:135m):
# the raw wire formats the Python clients hide.
#   check_curl.sh URL [PYTHON]
# NDJSON streams (every line one JSON object, the last done:true), SSE ("data: {...}" events and
# the final "data: [DONE]"), HEAD / and GET /, /api/version, /health, /metrics (the metric
# names), 404 JSON bodies for unknown models and paths, 405 for a wrong method, CORS.
# Prints "N passed, M failed"; exits 1 when any check failed.
set -u
url=$1
py=${2:-python3}
model=smollm2:135m
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    echo "FAIL: $*"
    for f in "$tmp/h" "$tmp/b"; do [ -f "$f" ] && { echo "--- $f:"; head -c 2000 "$f"; echo; }; done
    fail=$((fail + 1))
}
# req METHOD PATH [BODY]: headers to $tmp/h, body to $tmp/b, status printed
req() {
    if [ $# -ge 3 ]; then
        curl -s -m 120 -X "$1" -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' \
             -H 'Content-Type: application/json' --data-binary "$3" "$url$2"
    else
        curl -s -m 120 -X "$1" -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' "$url$2"
    fi
}
header() { grep -i "^$1:" "$tmp/h" | head -n 1 | cut -d: -f2- | tr -d ' \r'; }
# pyjson 'EXPR': evaluates EXPR with `d` the JSON in $tmp/b; fails unless it is true
pyjson() {
    "$py" -c "import json,sys; d = json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" \
        "$tmp/b" 2>/dev/null
}

# ---- plain endpoints -----------------------------------------------------------------------------
s=$(curl -s -m 30 -I -o /dev/null -w '%{http_code}' "$url/")
[ "$s" = 200 ] && ok || bad "HEAD / -> $s"
s=$(req GET /)
[ "$s" = 200 ] && [ -s "$tmp/b" ] && ok || bad "GET / -> $s"
s=$(req GET /api/version)
[ "$s" = 200 ] && pyjson 'isinstance(d["version"], str) and d["version"].count(".") == 2' &&
    ok || bad "/api/version -> $s"
s=$(curl -s -m 30 -I -o /dev/null -w '%{http_code}' "$url/api/version")
[ "$s" = 200 ] && ok || bad "HEAD /api/version -> $s"
s=$(req GET /health)
[ "$s" = 200 ] && ok || bad "/health -> $s"
s=$(req GET /api/tags)
[ "$s" = 200 ] && pyjson "any(m['name'] == '$model' for m in d['models'])" && ok ||
    bad "/api/tags -> $s"

# ---- NDJSON streaming ----------------------------------------------------------------------------
body='{"model":"'$model'","prompt":"Why is the sky blue?",'
body=$body'"options":{"temperature":0,"num_predict":12}}'
s=$(req POST /api/generate "$body")
ctype=$(header Content-Type)
[ "$s" = 200 ] && [ "${ctype%%;*}" = application/x-ndjson ] && ok ||
    bad "streamed generate -> $s, Content-Type $ctype"
if "$py" - "$tmp/b" <<'EOF'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[-1] == "", "the stream does not end with a newline"
objs = [json.loads(l) for l in lines[:-1]]          # every line is one JSON object
assert len(objs) >= 2, len(objs)
assert all(o["done"] is False and isinstance(o["response"], str) for o in objs[:-1])
last = objs[-1]
assert last["done"] is True and last["done_reason"] in ("stop", "length")
for k in ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration",
          "eval_count", "eval_duration"):
    assert isinstance(last[k], int), k
assert last["eval_count"] == 12 or last["done_reason"] == "stop"
assert isinstance(last["context"], list) and last["context"]
EOF
then ok; else bad "NDJSON generate stream"; fi

body='{"model":"'$model'","messages":[{"role":"user","content":"Hi"}],'
body=$body'"options":{"temperature":0,"num_predict":8}}'
s=$(req POST /api/chat "$body")
[ "$s" = 200 ] && "$py" - "$tmp/b" <<'EOF' && ok || bad "NDJSON chat stream -> $s"
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8").read().splitlines()]
assert all(o["message"]["role"] == "assistant" for o in objs)
assert objs[-1]["done"] is True and "context" not in objs[-1]
EOF
body='{"model":"'$model'","prompt":"Hi","stream":false,"options":{"num_predict":4}}'
s=$(req POST /api/generate "$body")
ctype=$(header Content-Type)
[ "$s" = 200 ] && [ "${ctype%%;*}" = application/json ] && pyjson 'd["done"] is True' && ok ||
    bad "stream:false -> $s, Content-Type $ctype"

# ---- SSE streaming -------------------------------------------------------------------------------
body='{"model":"'$model'","messages":[{"role":"user","content":"Hi"}],"max_tokens":8,'
body=$body'"temperature":0,"stream":true,"stream_options":{"include_usage":true}}'
s=$(req POST /v1/chat/completions "$body")
ctype=$(header Content-Type)
[ "$s" = 200 ] && [ "${ctype%%;*}" = text/event-stream ] && ok ||
    bad "SSE chat -> $s, Content-Type $ctype"
if "$py" - "$tmp/b" <<'EOF'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
events = text.split("\n\n")
assert events[-1] == "", "the stream does not end with a blank line"
events = events[:-1]
assert events[-1] == "data: [DONE]", events[-1]
chunks = []
for e in events[:-1]:
    assert e.startswith("data: "), e
    chunks.append(json.loads(e[len("data: "):]))
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
assert chunks[-2]["choices"][0]["finish_reason"] in ("stop", "length")
EOF
then ok; else bad "SSE event format"; fi
body='{"model":"'$model'","prompt":"Hi","max_tokens":4,"stream":true}'
s=$(req POST /v1/completions "$body")
[ "$s" = 200 ] && tail -c 14 "$tmp/b" | grep -q '^data: \[DONE\]$' && ok ||
    bad "SSE completions -> $s"

# ---- /metrics after those requests ---------------------------------------------------------------
s=$(req GET /metrics)
ctype=$(header Content-Type)
[ "$s" = 200 ] && [ "${ctype%%;*}" = text/plain ] && ok || bad "/metrics -> $s, $ctype"
for name in promeserve_requests_total promeserve_request_duration_seconds_sum \
            promeserve_prompt_tokens_total promeserve_generated_tokens_total \
            promeserve_generated_tokens_per_second promeserve_queue_depth \
            promeserve_busy_slots promeserve_loaded_models; do
    grep -q "^$name[ {]" "$tmp/b" &&
        grep -q -e "^# TYPE $name " -e "^# TYPE ${name%_sum} " "$tmp/b" &&
        ok || bad "/metrics lacks $name (with its # TYPE line)"
done
# the generations above were counted
"$py" - "$tmp/b" <<'EOF' && ok || bad "/metrics counters do not reflect the requests made"
import re, sys
text = open(sys.argv[1]).read()
def value(name):
    pattern = r"^%s(?:\{[^}]*\})? (\S+)$" % name
    return sum(float(m.group(1)) for m in re.finditer(pattern, text, re.M))
assert value("promeserve_generated_tokens_total") >= 12, "generated tokens"
assert value("promeserve_prompt_tokens_total") > 0, "prompt tokens"
assert re.search(r'^promeserve_requests_total\{route="/api/generate",status="200"\} [1-9]', text,
                 re.M), "requests_total for /api/generate"
assert value("promeserve_loaded_models") >= 1, "loaded models"
EOF

# ---- errors --------------------------------------------------------------------------------------
s=$(req POST /api/generate '{"model":"no-such-model:1","prompt":"hi"}')
[ "$s" = 404 ] && pyjson "'not found' in d['error']" && ok || bad "unknown model -> $s"
s=$(req POST /api/show '{"model":"no-such-model:1"}')
[ "$s" = 404 ] && pyjson "isinstance(d['error'], str)" && ok || bad "show unknown model -> $s"
s=$(req POST /v1/chat/completions '{"model":"no-such-model:1","messages":[]}')
[ "$s" = 404 ] && pyjson "d['error']['type'] == 'not_found_error'" && ok ||
    bad "/v1 unknown model -> $s"
s=$(req GET /api/no-such-endpoint)
[ "$s" = 404 ] && ok || bad "unknown path -> $s"
s=$(req GET /api/generate)
[ "$s" = 405 ] || [ "$s" = 404 ] && ok || bad "GET /api/generate -> $s"
s=$(req POST /api/generate '{"model":"'$model'","prompt":"hi"')
[ "$s" = 400 ] && pyjson "isinstance(d['error'], str)" && ok || bad "truncated JSON -> $s"

# ---- CORS (Ollama's default origins) -------------------------------------------------------------
s=$(curl -s -m 30 -o /dev/null -D "$tmp/h" -w '%{http_code}' -X OPTIONS \
         -H 'Origin: http://localhost:3000' -H 'Access-Control-Request-Method: POST' \
         "$url/api/generate")
allow=$(header Access-Control-Allow-Origin)
case "$s" in 2*) [ -n "$allow" ] && ok || bad "preflight from localhost: no Allow-Origin";;
             *) bad "preflight from localhost -> $s";; esac
s=$(curl -s -m 30 -o /dev/null -D "$tmp/h" -w '%{http_code}' -H 'Origin: https://evil.example' \
         "$url/api/version")
allow=$(header Access-Control-Allow-Origin)
[ -z "$allow" ] || [ "$s" = 403 ] && ok || bad "foreign origin allowed: $allow"
# DNS rebinding: a loopback bind refuses a foreign Host
s=$(curl -s -m 30 -o /dev/null -w '%{http_code}' -H 'Host: evil.example' "$url/api/version")
[ "$s" = 403 ] && ok || bad "Host: evil.example -> $s, expected 403"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
