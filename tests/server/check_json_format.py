"""format "json" and a JSON schema at temperature 0 on the real small models (SmolLM2-135M and
Gemma 3 270M), held to what llama.cpp does on the same prompts (tests/fixtures/
json_format_llamacpp.json, written by tests/fixtures/gen_json_format_llamacpp.py with
llama.cpp's grammar sampler and grammars/json.gbnf, greedy, the model's own chat template):
  - the prompt is the same one (prompt_eval_count equals llama.cpp's prompt tokens);
  - every whitespace gap is within llama.cpp's bound (one blank, or a newline and at most 20
    indent bytes), so a small model cannot fill the gaps with "\\r\\n" until num_predict;
  - wherever llama.cpp closes the JSON value within num_predict and ours has not forked from
    it at a near-tie before that (below), ours ends by itself (done_reason "stop"); a reply
    that stops parses (with the schema: the required keys are there). After a fork the text
    is another greedy continuation, whose length is the model's, not the engine's, to decide
    (a kernel's last-bit rounding moved Gemma's "Describe a cat" fork from a reply that
    closes to one that lists keys until num_predict);
  - greedy agreement: our reply is llama.cpp's text token for token, up to the token that
    closed the value (then ours ends there too) or to the first step where llama.cpp's two
    best allowed tokens were a near-tie (closer than NEAR_TIE), where either engine may pick
    either and the replies fork. A difference at a step where llama.cpp's choice was clear
    fails.
Usage: check_json_format.py PROMESERVE [FIXTURES]. Skipped (77) without the promeserve binary.
Standard library only."""
import json
import os
import signal
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import ServerProcess, check, find_model, summary  # noqa: E402

PROMPTS = [
    "Describe a cat as JSON.",
    "List three fruits and their colours in JSON.",
    "Give the weather in Paris as a JSON object.",
    "Return a JSON object with a user's name, age and email.",
]
SCHEMA_PROMPT = "Give a person's name, age and whether alive."
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                           "age": {"type": "integer"},
                                           "alive": {"type": "boolean"}},
          "required": ["name", "age", "alive"]}
NUM_PREDICT = 256
MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]
# Twice the logit tolerance of test_llm_models (0.25; docs/llm.md): below this margin between
# llama.cpp's best two candidates, a greedy step is a near-tie that the two engines' rounding
# may break either way.
NEAR_TIE = 0.5


def post_stream(port, path, body):
    """The streamed reply: (the pieces of text in order, the final object)."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                 data=json.dumps(dict(body, stream=True)).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    pieces, last = [], {}
    with urllib.request.urlopen(req, timeout=600) as resp:
        for line in resp:
            d = json.loads(line)
            if d.get("done"):
                last = d
            else:
                pieces.append(d.get("message", {}).get("content", ""))
    return pieces, last


def gaps_bounded(text):
    """Every whitespace gap outside strings is nothing, one blank, or a newline and at most 20
    blanks or tabs (llama.cpp's `ws ::= | " " | "\\n" [ \\t]{0,20}`)."""
    i, in_str, esc = 0, False, False
    while i < len(text):
        c = text[i]
        if in_str:
            esc, in_str = (False, True) if esc else (c == "\\", c != '"')
            i += 1
            continue
        if c in " \t\n\r":
            j = i
            while j < len(text) and text[j] in " \t\n\r":
                j += 1
            gap = text[i:j]
            if not (gap == " " or (gap[0] == "\n" and len(gap) <= 21
                                   and all(ch in " \t" for ch in gap[1:]))):
                return False
            i = j
            continue
        in_str = c == '"'
        i += 1
    return True


def check_case(port, name, prompt, fmt, ref):
    what = "%s, format %s, %r" % (name, "json" if fmt == "json" else "schema", prompt)
    ours_pieces, last = post_stream(port, "/api/chat", {
        "model": name, "format": fmt, "options": {"temperature": 0, "num_predict": NUM_PREDICT},
        "messages": [{"role": "user", "content": prompt}]})
    content = "".join(ours_pieces)
    check(last.get("prompt_eval_count") == ref["prompt_tokens"],
          "%s: the same prompt as llama.cpp's (%r tokens, llama.cpp %d)"
          % (what, last.get("prompt_eval_count"), ref["prompt_tokens"]))
    check(gaps_bounded(content), "%s: whitespace gaps bounded: %r" % (what, content[-300:]))
    run = ref["runs"]["llamacpp"]
    stop = last.get("done_reason") == "stop"
    # greedy agreement with llama.cpp, token for token: each streamed piece of ours is one
    # token's text, or several when a character was split across tokens (held until whole)
    pieces = [bytes.fromhex(h) for h in run["pieces"]]
    end = run["closed_at"] or len(pieces)
    fork, j = None, 0
    for chunk in (p.encode() for p in ours_pieces):
        got, start = b"", j
        while j < end and len(got) < len(chunk) and chunk.startswith(got + pieces[j]):
            got += pieces[j]
            j += 1
        if got != chunk:
            fork = start
            break
    if fork is None and j < end:
        fork = j  # ours ended early
    if fork is not None:
        margin = run["margin"][fork] if fork < len(run["margin"]) else None
        check(margin is not None and margin < NEAR_TIE,
              "%s: ours leaves llama.cpp's greedy tokens at step %d, where llama.cpp's margin "
              "was %r (a near-tie is below %g): ours %r, llama.cpp %r"
              % (what, fork, margin, NEAR_TIE, content[-100:],
                 b"".join(pieces[:fork + 1]).decode(errors="replace")[-100:]))
    if run["closed_at"] is not None and fork is None:
        check(stop, "%s: ends by itself as llama.cpp does after %d tokens (done_reason %r, "
              "%r tokens): %r" % (what, run["closed_at"], last.get("done_reason"),
                                  last.get("eval_count"), content[-200:]))
    if stop:
        try:
            v = json.loads(content)
            check(isinstance(v, dict), "%s: an object: %r" % (what, content))
            if fmt != "json":
                check(all(k in v for k in SCHEMA["required"]), "%s: required keys: %r"
                      % (what, v))
        except ValueError:
            check(False, "%s: parses: %r" % (what, content[-300:]))
    run["fork"] = fork
    return stop, last.get("eval_count"), run


def main():
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print("promeserve binary missing; skipped")
        return 77
    fixtures = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    with open(os.path.join(fixtures, "json_format_llamacpp.json")) as f:
        ref = json.load(f)
    check(ref["num_predict"] == NUM_PREDICT, "the fixture's num_predict is %d" % NUM_PREDICT)
    paths = [find_model(m) for m in MODELS]
    srv = ServerProcess(sys.argv[1], ["--threads", "2", "--parallel", "1"] + paths)
    try:
        for m in MODELS:
            name = os.path.splitext(m)[0]
            cases = [(p, "json") for p in PROMPTS] + [(SCHEMA_PROMPT, SCHEMA)]
            refs = ref["models"][m]["cases"]
            check(len(refs) == len(cases), "%s: the fixture has %d cases" % (m, len(cases)))
            for (prompt, fmt), r in zip(cases, refs):
                check(r["prompt"] == prompt, "fixture case %r is %r" % (r["prompt"], prompt))
                stop, count, run = check_case(srv.port, name, prompt, fmt, r)
                print("%s %-6s %-58r ours: %-6s %3s tokens | llama.cpp: %-24s | %s" % (
                    name, "json" if fmt == "json" else "schema", prompt,
                    "stop" if stop else "length", count,
                    "closed after %d tokens" % run["closed_at"] if run["closed_at"]
                    else "not closed in %d tokens" % len(run["tokens"]),
                    "same tokens" if run["fork"] is None else "fork at a near-tie, step %d "
                    "(margin %.3f)" % (run["fork"], run["margin"][run["fork"]])))
    except Exception as e:
        check(False, "exception: %r\n%s" % (e, srv.log()[-3000:]))
    finally:
        srv.end(signal.SIGTERM, 30)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
