"""format "json" and a JSON schema at temperature 0 on the real small models (SmolLM2-135M and
Gemma 3 270M): every reply ends by itself (done_reason "stop") and parses. The JSON
constraint bounds whitespace as llama.cpp's grammar does (one blank, or a newline and at most
20 indent bytes, per gap), so a small model cannot fill the gaps with "\\r\\n" until
num_predict. Usage: check_json_format.py PROMESERVE [FIXTURES]. Skipped (77) without the
models. Standard library only."""
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
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                           "age": {"type": "integer"},
                                           "alive": {"type": "boolean"}},
          "required": ["name", "age", "alive"]}
NUM_PREDICT = 256


def post(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


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


def check_model(port, name, must_end):
    """must_end: every reply must end by itself (done_reason "stop"); otherwise a reply cut
    by num_predict is allowed (a model repeating content at temperature 0), but it must still
    keep the whitespace bound, and a reply that ended must parse."""
    cases = [(p, "json") for p in PROMPTS] + [("Give a person's name, age and whether alive.",
                                                SCHEMA)]
    ended = 0
    for prompt, fmt in cases:
        r = post(port, "/api/chat", {"model": name, "stream": False, "format": fmt,
                                     "options": {"temperature": 0, "num_predict": NUM_PREDICT},
                                     "messages": [{"role": "user", "content": prompt}]})
        content = r.get("message", {}).get("content", "")
        what = "%s, format %s, %r" % (name, "json" if fmt == "json" else "schema", prompt)
        check(gaps_bounded(content), "%s: whitespace gaps bounded: %r" % (what, content[-300:]))
        stop = r.get("done_reason") == "stop"
        ended += stop
        if must_end:
            check(stop, "%s: ends by itself within %d tokens (done_reason %r): %r"
                  % (what, NUM_PREDICT, r.get("done_reason"), content[-200:]))
        if not stop:
            continue
        try:
            v = json.loads(content)
            check(isinstance(v, dict), "%s: an object: %r" % (what, content))
            if fmt != "json":
                check(all(k in v for k in SCHEMA["required"]), "%s: required keys: %r"
                      % (what, v))
        except ValueError:
            check(False, "%s: parses: %r" % (what, content[-300:]))
    print("%s: %d of %d replies ended by themselves" % (name, ended, len(cases)))


def main():
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print("promeserve binary missing; skipped")
        return 77
    models = [m for m in (find_model("SmolLM2-135M-Instruct.Q4_1.gguf"),
                          find_model("gemma-3-270m-q4_k_m.gguf")) if m]
    if not models:
        print("SmolLM2 and Gemma 3 models not found; skipped")
        return 77
    srv = ServerProcess(sys.argv[1], ["--threads", "2", "--parallel", "1"] + models)
    try:
        for path in models:
            name = os.path.splitext(os.path.basename(path))[0]
            # Gemma 3 270M repeats content (a run of zeros, a list of users) on two of the
            # prompts until num_predict; SmolLM2 ends every reply
            check_model(srv.port, name, must_end=name.startswith("SmolLM2"))
    except Exception as e:
        check(False, "exception: %r\n%s" % (e, srv.log()[-3000:]))
    finally:
        srv.end(signal.SIGTERM, 30)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
