#!/usr/bin/env python3
"""Checks promeserve's generation endpoints end to end (run by ctest; see tools/CMakeLists.txt).

    check_api.py PROMESERVE [FIXTURES_DIR]

Starts `promeserve serve` on a free loopback port with the tiny fixture models and, when
SmolLM2-135M-Instruct.Q4_1.gguf ($PT_MODELS_DIR; the test fails without it), and
checks with the standard library only, against Ollama's documented behaviour
(ollama-api.md sections 0-2):
  /api/generate and /api/chat: stream vs "stream": false (same text at temperature 0 with a
  seed), NDJSON chunk and final-object fields, num_predict -> done_reason "length", stop
  strings, context continuation, raw, format "json" output that parses, a JSON-schema format
  whose output conforms, load/unload with an empty prompt or message list, and the 400/404
  errors (missing/unknown model, option types, keep_alive, raw + system, images, think,
  tools, suffix);
  /api/embed and /api/embeddings: shapes, L2 norm 1, truncate false on an over-long input;
  /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models(/id): objects, SSE
  framing (role in the first delta, one id and created, finish chunk, usage chunk, [DONE]),
  stream vs whole equality, response_format, finish_reason "length", OpenAI's error shape;
  a store model's Go template, system and params layers (against raw renderings), tool calls
  through a template that renders .Tools, --timeout (done_reason "length") and a full queue
  (503 with the engine's message) on a second server; clients hanging up mid-stream free
  their slots; mutated request bodies get 200 or a 4xx.
Under a sanitizer build any sanitizer report in the server log is a failure.
Prints "N passed, M failed"; exits 1 on a failure, 77 when the binary is missing.
"""
import base64
import hashlib
import http.client
import json
import math
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time

from srvtest import ServerProcess, check, find_model, summary



GO_TEMPLATE = ("{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}"
               "{{ if .Prompt }}<|im_start|>user\n{{ .Prompt }}<|im_end|>\n{{ end }}"
               "<|im_start|>assistant\n{{ .Response }}")
SYSTEM_LAYER = "You are a test."


# A ChatML-like template with tools: the calls it shows start with '{', so Ollama's tag is "{"
TOOLS_TEMPLATE = ("{{- range .Messages }}<|im_start|>{{ .Role }}\n"
                  "{{- if and (eq .Role \"user\") $.Tools }}Tools: {{ json $.Tools }}\n{{ end }}"
                  "{{- if .ToolCalls }}{{ range .ToolCalls }}{\"name\": \"{{ .Function.Name }}\", "
                  "\"arguments\": {{ json .Function.Arguments }}}{{ end }}"
                  "{{- else }}{{ .Content }}{{ end }}<|im_end|>\n{{ end }}<|im_start|>assistant\n")


def make_store(root, name, gguf, template, system=None, params=None):
    """An Ollama store model `name:latest`: the GGUF (linked, with its real digest) plus
    template, system and params layers (ollama-api.md section 3)."""
    blobs = os.path.join(root, "blobs")
    os.makedirs(blobs, exist_ok=True)

    def blob(data, media, link=None):
        digest = hashlib.sha256(data).hexdigest()
        path = os.path.join(blobs, "sha256-" + digest)
        if not os.path.exists(path):
            if link:
                os.symlink(os.path.abspath(link), path)
            else:
                with open(path, "wb") as f:
                    f.write(data)
        return {"mediaType": media, "digest": "sha256:" + digest, "size": len(data)}

    with open(gguf, "rb") as f:
        weights = f.read()
    p = "application/vnd.ollama.image."
    layers = [blob(weights, p + "model", link=gguf), blob(template.encode(), p + "template")]
    if system:
        layers.append(blob(system.encode(), p + "system"))
    if params:
        layers.append(blob(json.dumps(params).encode(), p + "params"))
    config = blob(json.dumps({"model_format": "gguf", "model_family": "llama",
                              "model_families": ["llama"], "model_type": "1M",
                              "file_type": "Q8_0"}).encode(),
                  "application/vnd.docker.container.image.v1+json")
    manifest = {"schemaVersion": 2,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": config, "layers": layers}
    d = os.path.join(root, "manifests", "registry.ollama.ai", "library", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "latest"), "w") as f:
        json.dump(manifest, f)


class Server(ServerProcess):
    """A promeserve serve process (srvtest.ServerProcess) whose store holds the tmpltest and
    toolstest models, with JSON, NDJSON and SSE requests."""

    def __init__(self, binary, args, tiny_gguf=None, tools_gguf=None):
        store = tempfile.mkdtemp(prefix="ps-store-")
        if tiny_gguf:
            make_store(store, "tmpltest", tiny_gguf, GO_TEMPLATE, SYSTEM_LAYER,
                       {"temperature": 0, "num_predict": 8, "seed": 9, "num_ctx": 128})
        if tools_gguf:
            make_store(store, "toolstest", tools_gguf, TOOLS_TEMPLATE)
        super().__init__(binary, args, store=store, log_prefix="promeserve-api-")

    def raw(self, method, path, body=None, timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = json.dumps(body) if isinstance(body, (dict, list)) else body
        c.request(method, path, body=data,
                  headers={"Content-Type": "application/json"} if data is not None else {})
        resp = c.getresponse()
        payload = resp.read()
        c.close()
        return resp.status, resp.getheader("Content-Type") or "", payload

    def post(self, path, body):
        st, ct, payload = self.raw("POST", path, body)
        try:
            return st, json.loads(payload)
        except ValueError:
            return st, {"_raw": payload.decode("utf-8", "replace")}

    def get(self, path):
        st, ct, payload = self.raw("GET", path)
        try:
            return st, json.loads(payload)
        except ValueError:
            return st, {"_raw": payload.decode("utf-8", "replace")}

    def ndjson(self, path, body):
        st, ct, payload = self.raw("POST", path, body)
        lines = [json.loads(l) for l in payload.decode().split("\n") if l.strip()]
        return st, ct, lines

    def sse(self, path, body):
        st, ct, payload = self.raw("POST", path, body)
        text = payload.decode()
        events = [e for e in text.split("\n\n") if e.strip()]
        out = []
        for e in events:
            if not e.startswith("data: "):
                out.append(("bad", e))
            elif e == "data: [DONE]":
                out.append(("done", None))
            else:
                out.append(("data", json.loads(e[6:])))
        return st, ct, out, text

    def stop(self):
        self.end(signal.SIGTERM, 20)


def conforms(value, schema):
    """The subset of JSON schema the test schemas use."""
    t = schema.get("type")
    if t == "object":
        if not isinstance(value, dict):
            return False
        for k in schema.get("required", []):
            if k not in value:
                return False
        props = schema.get("properties", {})
        return all(k in props and conforms(v, props[k]) for k, v in value.items())
    if t == "array":
        return isinstance(value, list) and all(conforms(v, schema.get("items", {})) for v in value)
    if t == "string":
        return isinstance(value, str) and ("enum" not in schema or value in schema["enum"])
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    return True


METRICS = ["total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration",
           "eval_count", "eval_duration"]


def same_model(listed, name):
    """Plain .gguf files are listed under their file name; clients may drop ".gguf"."""
    return listed in (name, name + ".gguf")


def check_error(srv, path, body, status, text, what):
    st, r = srv.post(path, body)
    ok = st == status and isinstance(r.get("error"), str) and text in r["error"]
    check(ok, "%s: want %d %r, got %d %r" % (what, status, text, st, r))


def check_openai_error(srv, path, body, status, etype, text, what):
    st, r = srv.post(path, body) if body is not None else srv.get(path)
    e = r.get("error") if isinstance(r, dict) else None
    ok = (st == status and isinstance(e, dict) and e.get("type") == etype and
          text in e.get("message", "") and "param" in e and "code" in e)
    check(ok, "%s: want %d %s %r, got %d %r" % (what, status, etype, text, st, r))


def test_generate(srv, model):
    opts = {"temperature": 0, "seed": 42, "num_predict": 12}
    body = {"model": model, "prompt": "Write one sentence about the sea.", "options": opts}
    st, whole = srv.post("/api/generate", dict(body, stream=False))
    check(st == 200 and whole.get("done") is True, "generate stream:false: %d %r" % (st, whole))
    for k in ["model", "created_at", "response", "done_reason", "context"] + METRICS:
        check(k in whole, "generate: field %s" % k)
    check(whole.get("created_at", "").endswith("Z") and "T" in whole.get("created_at", ""),
          "created_at is RFC 3339 UTC")
    check(whole.get("eval_count") == 12 and whole.get("done_reason") == "length",
          "num_predict 12 -> 12 tokens, done_reason length: %r" % whole)
    check(whole.get("total_duration", 0) >= whole.get("eval_duration", 0) > 0,
          "durations in ns, total >= eval")

    st, ct, lines = srv.ndjson("/api/generate", body)
    check(st == 200 and ct.startswith("application/x-ndjson"), "generate stream content type")
    check(len(lines) >= 2 and all(l.get("done") is False for l in lines[:-1]),
          "stream chunks are done:false")
    last = lines[-1] if lines else {}
    check(last.get("done") is True and last.get("response") == "" and
          all(k in last for k in METRICS + ["context", "done_reason"]),
          "stream final object: %r" % last)
    text = "".join(l.get("response", "") for l in lines)
    check(text == whole.get("response"), "streamed text == whole text at temperature 0: %r vs %r"
          % (text, whole.get("response")))

    # context continuation: the previous context comes before the new prompt
    st, cont = srv.post("/api/generate", {"model": model, "prompt": "And about the sky?",
                                          "context": whole.get("context", []), "stream": False,
                                          "options": opts})
    check(st == 200 and cont.get("prompt_eval_count", 0) > len(whole.get("context", [])),
          "context continuation: prompt holds the context: %r" % cont.get("prompt_eval_count"))
    check(len(cont.get("context", [])) > len(whole.get("context", [])),
          "context grows across turns")

    # stop strings: cut at a word of the unconstrained answer
    long_opts = dict(opts, num_predict=24)
    st, ref = srv.post("/api/generate", dict(body, stream=False, options=long_opts))
    words = [w for w in ref.get("response", "").split(" ") if len(w) >= 3]
    if check(len(words) >= 3, "reference answer has words: %r" % ref.get("response")):
        stop = words[len(words) // 2]
        st, cut = srv.post("/api/generate",
                           dict(body, stream=False, options=dict(long_opts, stop=[stop])))
        want = ref["response"][:ref["response"].find(stop)]
        check(cut.get("response") == want and cut.get("done_reason") == "stop",
              "stop %r: want %r got %r (%s)" % (stop, want, cut.get("response"),
                                                cut.get("done_reason")))

    # raw: the prompt as is, no context in the reply
    st, r = srv.post("/api/generate", {"model": model, "prompt": "The capital of France is",
                                       "raw": True, "stream": False,
                                       "options": {"num_predict": 3, "temperature": 0}})
    check(st == 200 and "context" not in r and r.get("prompt_eval_count", 99) < 12,
          "raw generate: %r" % r)
    # system overrides; a template override renders the prompt
    st, r = srv.post("/api/generate", {"model": model, "prompt": "hi", "system": "Be terse.",
                                       "stream": False, "options": {"num_predict": 2}})
    check(st == 200, "generate with system: %d %r" % (st, r))


def test_generate_errors(srv, model):
    check_error(srv, "/api/generate", {"prompt": "x"}, 400, "model is required", "missing model")
    check_error(srv, "/api/generate", {"model": "no-such-model", "prompt": "x"}, 404,
                "model 'no-such-model' not found", "unknown model")
    check_error(srv, "/api/generate", {"model": model, "prompt": "x",
                                       "options": {"temperature": "hot"}}, 400,
                'option "temperature" must be a number', "option type")
    check_error(srv, "/api/generate", {"model": model, "prompt": "x",
                                       "options": {"num_ctx": -5}}, 400,
                'option "num_ctx" is out of range', "negative num_ctx")
    check_error(srv, "/api/generate", {"model": model, "prompt": "x",
                                       "options": {"top_k": 2.5}}, 400,
                'option "top_k" must be an integer', "non-integral int option")
    check_error(srv, "/api/generate", {"model": model, "prompt": "x", "keep_alive": "5 parsecs"},
                400, "time: ", "bad keep_alive")
    check_error(srv, "/api/generate", {"model": model, "prompt": "x", "raw": True,
                                       "system": "s"}, 400,
                "raw mode does not support template, system, or context", "raw + system")
    check_error(srv, "/api/generate", {"model": model, "prompt": "x", "images": ["aGk="]}, 400,
                "this model is missing data required for image input", "images")
    check_error(srv, "/api/generate", {"model": model, "prompt": "x", "format": "xml"}, 400,
                "invalid format", "format xml")
    check_error(srv, "/api/generate", {"model": model, "prompt": "x", "suffix": "y"}, 400,
                "does not support insert", "suffix without .Suffix")
    check_error(srv, "/api/generate", {"model": model, "prompt": "x", "stream": "yes"}, 400,
                '"stream" must be a boolean', "stream type")
    check_error(srv, "/api/generate", {"model": model, "prompt": "x",
                                       "context": [1, "two"]}, 400, "context[1]", "bad context")
    test_field_types(srv, model)
    # unknown option keys are ignored (and logged)
    st, r = srv.post("/api/generate", {"model": model, "prompt": "x", "stream": False,
                                       "options": {"num_predict": 1, "no_such_key": 1}})
    check(st == 200 and "no_such_key" in srv.log(), "unknown option ignored and logged")


def raw_post(srv, path, text):
    """POST of a body written by hand (Python's json cannot write 1e999)."""
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    c.request("POST", path, body=text, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def test_field_types(srv, model):
    """A field of the wrong type (or a number Go's decoder cannot hold) is a 400 naming it, as
    Ollama's JSON decoding into typed structs; null is the default."""
    st, d = raw_post(srv, "/api/generate",
                     '{"model":"%s","prompt":"","keep_alive":1e999}' % model)
    check(st == 400 and b"keep_alive" in d, "keep_alive 1e999: %d %r" % (st, d))
    for images in ("x", [1], {"a": "b"}):
        check_error(srv, "/api/generate", {"model": model, "prompt": "x", "images": images}, 400,
                    "images must be an array", "generate images %r" % (images,))
    check_error(srv, "/api/chat", {"model": model, "messages": [
        {"role": "user", "content": "x", "images": [1]}]}, 400, "messages[0].images",
        "chat images [1]")
    check_error(srv, "/api/show", {"model": model, "verbose": "x"}, 400,
                '"verbose" must be a boolean', "show verbose 'x'")
    check_error(srv, "/api/show", {"model": 5}, 400, '"model" must be a string', "show model 5")
    check_error(srv, "/api/generate", {"model": 5, "prompt": "x"}, 400,
                '"model" must be a string', "generate model 5")
    check_error(srv, "/api/copy", {"source": model, "destination": 7}, 400,
                '"destination" must be a string', "copy destination 7")
    check_error(srv, "/api/create", {"model": "typed", "from": model, "stream": "no"}, 400,
                '"stream" must be a boolean', "create stream 'no'")
    check_openai_error(srv, "/v1/chat/completions",
                       {"model": model, "messages": [{"role": "user", "content": "x"}],
                        "stream_options": "x"}, 400, "invalid_request_error",
                       "stream_options must be an object", "stream_options 'x'")
    check_openai_error(srv, "/v1/chat/completions",
                       {"model": model, "messages": [{"role": "user", "content": "x"}],
                        "reasoning": 3}, 400, "invalid_request_error",
                       "reasoning must be an object", "reasoning 3")
    st, d = raw_post(srv, "/v1/chat/completions", '{"model":"%s","messages":[{"role":"user",'
                     '"content":"x"}],"temperature":1e999}' % model)
    check(st == 400 and b"temperature" in d, "OpenAI temperature 1e999: %d %r" % (st, d))
    check_openai_error(srv, "/v1/chat/completions",
                       {"model": model, "messages": [{"role": "user", "content": "x",
                                                      "name": 5}]}, 400,
                       "invalid_request_error", "messages[0].name must be a string",
                       "OpenAI message name 5")
    check_error(srv, "/api/chat", {"model": model, "messages": [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": 5, "function": {"name": "f", "arguments": {}}}]}]}, 400,
        "messages[0].tool_calls[0].id must be a string", "tool call id 5")
    check_error(srv, "/api/chat", {"model": model, "messages": [
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"index": "0", "name": "f", "arguments": {}}}]}]}, 400,
        "function.index must be an integer", "tool call index '0'")
    check_error(srv, "/api/pull", {"model": model, "stream": "x"}, 400,
                '"stream" must be a boolean', "pull stream 'x'")
    # null means the default
    st, r = srv.post("/api/generate", {"model": model, "prompt": "x", "stream": False,
                                       "images": None, "keep_alive": None,
                                       "options": {"num_predict": 1}})
    check(st == 200, "null images / keep_alive are the defaults: %d %r" % (st, r))
    st, r = srv.post("/api/show", {"model": model, "verbose": None})
    check(st == 200, "show verbose null: %d" % st)


def test_load_unload(srv, model):
    st, r = srv.post("/api/generate", {"model": model})
    check(st == 200 and r.get("done_reason") == "load" and r.get("response") == "" and
          r.get("done") is True, "empty prompt loads: %r" % r)
    st, ps = srv.get("/api/ps")
    check(any(same_model(m.get("name"), model) for m in ps.get("models", [])),
          "/api/ps lists the loaded model: %r" % ps)
    st, r = srv.post("/api/chat", {"model": model, "messages": []})
    check(st == 200 and r.get("done_reason") == "load" and
          r.get("message", {}).get("role") == "assistant", "empty messages load: %r" % r)
    st, r = srv.post("/api/generate", {"model": model, "keep_alive": 0})
    check(st == 200 and r.get("done_reason") == "unload", "keep_alive 0 unloads: %r" % r)
    time.sleep(0.5)
    st, ps = srv.get("/api/ps")
    check(not any(same_model(m.get("name"), model) for m in ps.get("models", [])),
          "unloaded model gone from /api/ps: %r" % ps)


def test_chat(srv, model, real):
    msgs = [{"role": "user", "content": "Name three colors."}]
    opts = {"temperature": 0, "seed": 1, "num_predict": 16}
    st, whole = srv.post("/api/chat", {"model": model, "messages": msgs, "stream": False,
                                       "options": opts})
    m = whole.get("message", {})
    check(st == 200 and m.get("role") == "assistant" and isinstance(m.get("content"), str) and
          whole.get("done") is True and "context" not in whole and
          all(k in whole for k in METRICS), "chat stream:false: %r" % whole)
    st, ct, lines = srv.ndjson("/api/chat", {"model": model, "messages": msgs, "options": opts})
    text = "".join(l.get("message", {}).get("content", "") for l in lines)
    check(lines and lines[-1].get("done") is True and lines[-1]["message"]["content"] == "",
          "chat final chunk")
    check(text == m.get("content"), "chat streamed == whole: %r vs %r" % (text, m.get("content")))
    # a multi-turn conversation with assistant and system turns renders
    st, r = srv.post("/api/chat", {"model": model, "stream": False, "options": {"num_predict": 2},
                                   "messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "hi"},
                                                {"role": "assistant", "content": "hello"},
                                                {"role": "user", "content": "bye"}]})
    check(st == 200, "multi-turn chat: %d %r" % (st, r))

    # format "json": the output parses
    n = 120 if real else 60
    st, r = srv.post("/api/chat", {"model": model, "stream": False, "format": "json",
                                   "options": {"temperature": 0, "num_predict": n},
                                   "messages": [{"role": "user", "content":
                                                 "Describe a cat as JSON."}]})
    content = r.get("message", {}).get("content", "")
    if r.get("done_reason") == "stop":
        try:
            json.loads(content)
            check(True, "")
        except ValueError:
            check(False, "format json output parses: %r" % content)
    else:
        check(not real, "format json finished within %d tokens: %r" % (n, r))
    # a schema: the output conforms
    schema = {"type": "object", "properties": {"name": {"type": "string"},
                                               "age": {"type": "integer"},
                                               "alive": {"type": "boolean"}},
              "required": ["name", "age", "alive"]}
    st, r = srv.post("/api/generate", {"model": model, "stream": False, "format": schema,
                                       "prompt": "Give a person's name, age and whether alive.",
                                       "options": {"temperature": 0, "num_predict": n}})
    if r.get("done_reason") == "stop":
        try:
            v = json.loads(r.get("response", ""))
            check(conforms(v, schema), "schema output conforms: %r" % v)
        except ValueError:
            check(False, "schema output parses: %r" % r.get("response"))
    else:
        check(not real, "schema output finished within %d tokens: %r" % (n, r))
    check_error(srv, "/api/generate", {"model": model, "prompt": "x",
                                       "format": {"type": "object", "patternProperties": {}}},
                400, "patternProperties", "unsupported schema keyword")

    # errors
    check_error(srv, "/api/chat", {"model": model, "messages": "hi"}, 400,
                "messages must be an array", "messages type")
    check_error(srv, "/api/chat", {"model": model, "messages": [{"content": "x"}]}, 400,
                "messages[0].role", "message without role")
    check_error(srv, "/api/chat", {"model": model, "messages": [{"role": "user", "content": "x",
                                                                "images": ["aGk="]}]},
                400, "this model is missing data required for image input", "chat images")
    check_error(srv, "/api/chat", {"model": "nope:1b", "messages": msgs}, 404,
                "model 'nope:1b' not found", "chat unknown model")


def test_capabilities(srv, smol, tiny_qwen3):
    msgs = [{"role": "user", "content": "weather?"}]
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "w",
                                               "parameters": {"type": "object", "properties":
                                                              {"city": {"type": "string"}}}}}]
    if smol:
        check_error(srv, "/api/chat", {"model": smol, "messages": msgs, "think": True}, 400,
                    '"%s" does not support thinking' % smol, "think on a ChatML model")
        check_error(srv, "/api/chat", {"model": smol, "messages": msgs, "tools": tools}, 400,
                    '"%s" does not support tools' % smol, "tools on a ChatML model")
    # Qwen3 (family renderer) takes think (its tool prompt does not fit the tiny 256 context)
    st, r = srv.post("/api/chat", {"model": tiny_qwen3, "messages": msgs, "think": True,
                                   "stream": False, "options": {"num_predict": 8}})
    check(st == 200, "think on qwen3: %d %r" % (st, r))
    st, r = srv.post("/api/chat", {"model": tiny_qwen3, "messages": msgs, "think": False,
                                   "stream": False, "options": {"num_predict": 8}})
    check(st == 200, "think false on qwen3: %d %r" % (st, r))


CALL_SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "enum": ["get_weather"]},
    "arguments": {"type": "object", "properties": {"city": {"type": "string", "enum":
                                                            ["Paris", "Rome"]}},
                  "required": ["city"]}}, "required": ["name", "arguments"]}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


def test_tool_calls(srv):
    """Tool calls through a store model whose Go template renders .Tools (SmolLM2 weights);
    the JSON schema format makes the model write a call, which must come back parsed."""
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    body = {"model": "toolstest", "messages": msgs, "tools": TOOLS, "format": CALL_SCHEMA,
            "options": {"temperature": 0, "num_predict": 40}}
    st, r = srv.post("/api/chat", dict(body, stream=False))
    m = r.get("message", {})
    calls = m.get("tool_calls") or []
    check(st == 200 and len(calls) == 1 and m.get("content") == "" and
          calls[0]["function"]["name"] == "get_weather" and
          calls[0]["function"].get("index") == 0 and
          isinstance(calls[0]["function"]["arguments"], dict) and
          calls[0]["function"]["arguments"].get("city") in ("Paris", "Rome"),
          "chat tool call (arguments an object): %d %r" % (st, r))
    st, ct, lines = srv.ndjson("/api/chat", body)
    streamed = [c for l in lines for c in (l.get("message", {}).get("tool_calls") or [])]
    check(streamed == calls and lines[-1].get("done") is True,
          "streamed tool call == whole: %r" % lines)
    # the call and its result in the history render through the template
    st, r = srv.post("/api/chat", {"model": "toolstest", "tools": TOOLS, "stream": False,
                                   "options": {"num_predict": 4}, "messages": msgs + [
                                       {"role": "assistant", "content": "",
                                        "tool_calls": calls or [{"function": {
                                            "name": "get_weather",
                                            "arguments": {"city": "Paris"}}}]},
                                       {"role": "tool", "content": "22 C",
                                        "tool_name": "get_weather"}]})
    check(st == 200, "tool call history renders: %d %r" % (st, r))

    # OpenAI: arguments as a JSON string, type function, call_ ids, finish_reason tool_calls
    ob = {"model": "toolstest", "messages": msgs, "tools": TOOLS, "temperature": 0,
          "max_tokens": 40, "response_format": {"type": "json_schema", "json_schema": {
              "name": "call", "schema": CALL_SCHEMA}}}
    st, r = srv.post("/v1/chat/completions", ob)
    c = (r.get("choices") or [{}])[0]
    tc = c.get("message", {}).get("tool_calls") or []
    ok = (st == 200 and c.get("finish_reason") == "tool_calls" and len(tc) == 1 and
          tc[0].get("type") == "function" and tc[0].get("id", "").startswith("call_") and
          tc[0]["function"]["name"] == "get_weather" and
          isinstance(tc[0]["function"]["arguments"], str))
    if check(ok, "v1 tool call: %d %r" % (st, r)):
        check(json.loads(tc[0]["function"]["arguments"]) == calls[0]["function"]["arguments"]
              if calls else True, "v1 arguments string parses to the native call's object")
    st, ct, events, text = srv.sse("/v1/chat/completions", dict(ob, stream=True))
    deltas = [d["choices"][0] for k, d in events if k == "data" and d.get("choices")]
    stc = [t for d in deltas for t in (d["delta"].get("tool_calls") or [])]
    check(len(stc) == 1 and stc[0].get("index") == 0 and
          deltas[-1].get("finish_reason") == "tool_calls" and events[-1][0] == "done",
          "v1 streamed tool call: %r" % deltas)
    # a follow-up turn with an OpenAI tool message (tool_call_id -> the call's name)
    if tc:
        st, r = srv.post("/v1/chat/completions", {
            "model": "toolstest", "tools": TOOLS, "max_tokens": 4,
            "messages": msgs + [{"role": "assistant", "content": None, "tool_calls": tc},
                                {"role": "tool", "tool_call_id": tc[0]["id"],
                                 "content": "22 C"}]})
        check(st == 200, "v1 tool result turn: %d %r" % (st, r))


def test_embed(srv, model, tiny):
    st, r = srv.post("/api/embed", {"model": model, "input": ["hello world", "good night"]})
    embs = r.get("embeddings", [])
    check(st == 200 and len(embs) == 2 and len(embs[0]) > 8 and
          all(k in r for k in ["model", "total_duration", "load_duration", "prompt_eval_count"]),
          "embed list: %d %r" % (st, {k: v for k, v in r.items() if k != "embeddings"}))
    for e in embs:
        check(abs(math.sqrt(sum(x * x for x in e)) - 1) < 1e-3, "embedding L2 norm 1")
    if len(embs) == 2:
        check(embs[0] != embs[1], "different inputs, different embeddings")
    st, r = srv.post("/api/embed", {"model": model, "input": "hello world"})
    check(st == 200 and len(r.get("embeddings", [])) == 1, "embed string")
    if len(embs) == 2 and r.get("embeddings"):
        check(max(abs(a - b) for a, b in zip(r["embeddings"][0], embs[0])) < 1e-4,
              "same input, same embedding")
    st, r = srv.post("/api/embeddings", {"model": model, "prompt": "hello world"})
    check(st == 200 and len(r.get("embedding", [])) == len(embs[0] if embs else []),
          "legacy /api/embeddings")
    long_text = "word " * 400  # past the tiny model's 256-token context
    check_error(srv, "/api/embed", {"model": tiny, "input": long_text, "truncate": False}, 400,
                "input length exceeds maximum context length", "truncate false, over-long")
    st, r = srv.post("/api/embed", {"model": tiny, "input": long_text})
    check(st == 200 and len(r.get("embeddings", [])) == 1, "truncate true: over-long input fits")
    check_error(srv, "/api/embed", {"model": model, "input": 5}, 400, "invalid input",
                "embed input type")


def test_openai(srv, model, real):
    msgs = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": [{"type": "text", "text": "Count to five."}]}]
    body = {"model": model, "messages": msgs, "temperature": 0, "seed": 3, "max_tokens": 10}
    st, whole = srv.post("/v1/chat/completions", body)
    ch = (whole.get("choices") or [{}])[0]
    check(st == 200 and whole.get("object") == "chat.completion" and
          whole.get("id", "").startswith("chatcmpl-") and isinstance(whole.get("created"), int)
          and ch.get("message", {}).get("role") == "assistant" and
          ch.get("finish_reason") in ("stop", "length"), "v1 chat: %d %r" % (st, whole))
    u = whole.get("usage", {})
    check(u.get("total_tokens") == u.get("prompt_tokens", 0) + u.get("completion_tokens", 0) and
          u.get("completion_tokens", 0) > 0, "v1 usage: %r" % u)
    check(ch.get("finish_reason") == "length" and u.get("completion_tokens") == 10,
          "max_tokens 10 -> finish_reason length: %r" % ch.get("finish_reason"))

    st, ct, events, text = srv.sse("/v1/chat/completions",
                                   dict(body, stream=True, stream_options={"include_usage": True}))
    check(st == 200 and ct.startswith("text/event-stream"), "v1 SSE content type: %s" % ct)
    check(all(k != "bad" for k, _ in events), "every SSE event is a data: line")
    check(events and events[-1][0] == "done" and text.endswith("data: [DONE]\n\n"),
          "SSE ends with [DONE]")
    chunks = [d for k, d in events if k == "data"]
    check(len(chunks) >= 3, "SSE chunks")
    if len(chunks) >= 3:
        check(chunks[0]["choices"][0]["delta"].get("role") == "assistant",
              "first delta has the role")
        check(len({c["created"] for c in chunks}) == 1 and len({c["id"] for c in chunks}) == 1,
              "one created and id for the stream")
        check(all(c["object"] == "chat.completion.chunk" for c in chunks), "chunk objects")
        fin = chunks[-2]
        check(fin["choices"][0]["finish_reason"] == "length" and
              fin["choices"][0]["delta"] in ({}, {"role": "assistant"}),
              "finish chunk: %r" % fin)
        check(chunks[-1]["choices"] == [] and chunks[-1].get("usage", {}).get(
            "completion_tokens") == 10, "usage chunk: %r" % chunks[-1])
        streamed = "".join(c["choices"][0]["delta"].get("content") or ""
                           for c in chunks if c["choices"])
        check(streamed == ch.get("message", {}).get("content"),
              "v1 streamed == whole: %r vs %r" % (streamed, ch.get("message", {}).get("content")))
    st, ct, events, text = srv.sse("/v1/chat/completions", dict(body, stream=True))
    check(not any(k == "data" and d.get("choices") == [] for k, d in events),
          "no usage chunk without include_usage")

    # response_format
    n = 120 if real else 60
    for rf, schema in [({"type": "json_object"}, None),
                       ({"type": "json_schema", "json_schema": {"name": "p", "schema": {
                           "type": "object", "properties": {"city": {"type": "string"},
                                                            "population": {"type": "integer"}},
                           "required": ["city", "population"]}}},
                        "schema")]:
        st, r = srv.post("/v1/chat/completions", {
            "model": model, "temperature": 0, "max_tokens": n, "response_format": rf,
            "messages": [{"role": "user", "content": "A city and its population as JSON."}]})
        c = (r.get("choices") or [{}])[0]
        if c.get("finish_reason") == "stop":
            try:
                v = json.loads(c["message"]["content"])
                check(schema is None or conforms(v, rf["json_schema"]["schema"]),
                      "json_schema output conforms: %r" % v)
            except ValueError:
                check(False, "response_format %s parses: %r" % (rf["type"], c))
        else:
            check(not real, "response_format %s finished: %r" % (rf["type"], r))

    # completions
    cbody = {"model": model, "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0,
             "seed": 5}
    st, r = srv.post("/v1/completions", cbody)
    c = (r.get("choices") or [{}])[0]
    check(st == 200 and r.get("object") == "text_completion" and
          r.get("id", "").startswith("cmpl-") and isinstance(c.get("text"), str) and
          c.get("finish_reason") == "length" and "usage" in r, "v1 completions: %d %r" % (st, r))
    st, ct, events, text = srv.sse("/v1/completions", dict(cbody, stream=True))
    chunks = [d for k, d in events if k == "data"]
    streamed = "".join(d["choices"][0]["text"] for d in chunks if d.get("choices"))
    check(events and events[-1][0] == "done" and streamed == c.get("text"),
          "v1 completions stream == whole: %r vs %r" % (streamed, c.get("text")))
    check(chunks and chunks[-1]["choices"][0]["finish_reason"] == "length",
          "completions finish chunk")

    # embeddings
    st, r = srv.post("/v1/embeddings", {"model": model, "input": ["a", "b c"]})
    d = r.get("data", [])
    check(st == 200 and r.get("object") == "list" and len(d) == 2 and
          d[1].get("index") == 1 and d[0].get("object") == "embedding" and
          r.get("usage", {}).get("prompt_tokens", 0) > 0, "v1 embeddings: %d" % st)

    # base64 (the official client's default) decodes to the float vector; dimensions
    st, r64 = srv.post("/v1/embeddings", {"model": model, "input": "a", "encoding_format": "base64"})
    st2, rf = srv.post("/v1/embeddings", {"model": model, "input": "a"})
    if check(st == 200 and st2 == 200 and isinstance(r64["data"][0]["embedding"], str),
             "v1 embeddings base64: %d" % st):
        raw = base64.b64decode(r64["data"][0]["embedding"])
        vals = struct.unpack("<%df" % (len(raw) // 4), raw)
        ref = rf["data"][0]["embedding"]
        check(len(vals) == len(ref) and max(abs(a - b) for a, b in zip(vals, ref)) < 1e-6,
              "base64 floats == float list")
    st, r = srv.post("/api/embed", {"model": model, "input": "a", "dimensions": 8})
    e = (r.get("embeddings") or [[]])[0]
    check(st == 200 and len(e) == 8 and abs(math.sqrt(sum(x * x for x in e)) - 1) < 1e-3,
          "embed dimensions 8: cut and normalised")

    # models
    st, r = srv.get("/v1/models")
    ids = [m.get("id") for m in r.get("data", [])]
    check(st == 200 and r.get("object") == "list" and any(same_model(i, model) for i in ids) and
          all(m.get("object") == "model" and "owned_by" in m and "created" in m
              for m in r.get("data", [])), "v1 models: %r" % r)
    st, r = srv.get("/v1/models/" + model)
    check(st == 200 and r.get("id") == model and r.get("object") == "model", "v1 model: %r" % r)
    check_openai_error(srv, "/v1/models/nope", None, 404, "not_found_error", "nope",
                       "v1 unknown model id")

    # errors in OpenAI's shape
    check_openai_error(srv, "/v1/chat/completions", {"model": "nope", "messages": msgs}, 404,
                       "not_found_error", 'model "nope" not found, try pulling it first',
                       "v1 unknown model")
    check_openai_error(srv, "/v1/chat/completions", {"messages": msgs}, 400,
                       "invalid_request_error", "model is required", "v1 missing model")
    check_openai_error(srv, "/v1/chat/completions", {"model": model, "messages": [
        {"role": "user", "content": [{"type": "image_url",
                                      "image_url": {"url": "data:image/png;base64,aGk="}}]}]},
        400, "invalid_request_error", "image", "v1 image part")
    check_openai_error(srv, "/v1/chat/completions", {"model": model, "messages": msgs,
                                                     "temperature": "x"},
                       400, "invalid_request_error", "temperature", "v1 temperature type")
    check_openai_error(srv, "/v1/chat/completions", {"model": model, "messages": msgs,
                                                     "reasoning_effort": "extreme"},
                       400, "invalid_request_error", "reasoning", "v1 reasoning_effort value")
    if real:
        check_openai_error(srv, "/v1/chat/completions", {"model": model, "messages": msgs,
                                                         "reasoning_effort": "high"},
                           400, "invalid_request_error", "does not support thinking",
                           "v1 reasoning on a model without thinking")
    st, r = srv.post("/v1/chat/completions", {"model": model, "messages": msgs, "max_tokens": 2,
                                              "reasoning_effort": "none"})
    check(st == 200, "reasoning_effort none is think off: %d %r" % (st, r))
    check_openai_error(srv, "/v1/completions", {"model": model, "prompt": ["a", "b"]}, 400,
                       "invalid_request_error", "prompt", "v1 completions prompt list")


def test_template_layer(srv):
    """A store model's Go template, system and params layers: the templated answer equals a
    raw request of the text the template renders, and the params layer's temperature 0,
    num_predict 8 and seed apply without request options."""
    want_prompt = ("<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                   "<|im_start|>assistant\n" % SYSTEM_LAYER)
    st, t = srv.post("/api/generate", {"model": "tmpltest", "prompt": "Hello", "stream": False})
    check(st == 200 and t.get("eval_count") == 8 and t.get("done_reason") == "length",
          "template layer generate with the params layer: %d %r" % (st, t))
    st, ps = srv.get("/api/ps")
    ctx = [m.get("context_length") for m in ps.get("models", [])
           if m.get("name", "").startswith("tmpltest")]
    check(ctx == [128], "the params layer's num_ctx applies at load: %r" % ps)
    st, raw = srv.post("/api/generate", {"model": "tmpltest", "prompt": want_prompt, "raw": True,
                                         "stream": False})
    check(st == 200 and raw.get("prompt_eval_count") == t.get("prompt_eval_count") and
          raw.get("response") == t.get("response"),
          "templated == raw rendering: %r/%r vs %r/%r" % (
              t.get("prompt_eval_count"), t.get("response"), raw.get("prompt_eval_count"),
              raw.get("response")))
    st, c = srv.post("/api/chat", {"model": "tmpltest", "stream": False,
                                   "messages": [{"role": "user", "content": "Hello"}]})
    check(st == 200 and c.get("message", {}).get("content") == t.get("response") and
          c.get("prompt_eval_count") == t.get("prompt_eval_count"),
          "chat through the template layer (legacy turns, system layer): %r" % c)
    # the request's system replaces the system layer; a template override replaces the layer
    st, o = srv.post("/api/generate", {"model": "tmpltest", "prompt": "Hello", "stream": False,
                                       "system": "Other."})
    st2, raw2 = srv.post("/api/generate", {"model": "tmpltest", "stream": False, "raw": True,
                                           "prompt": want_prompt.replace(SYSTEM_LAYER, "Other.")})
    check(st == 200 and o.get("response") == raw2.get("response") and
          o.get("prompt_eval_count") == raw2.get("prompt_eval_count"), "system override")
    st, o = srv.post("/api/generate", {"model": "tmpltest", "prompt": "Hello", "stream": False,
                                       "template": "Q: {{ .Prompt }}\nA:"})
    st2, raw2 = srv.post("/api/generate", {"model": "tmpltest", "stream": False, "raw": True,
                                           "prompt": "Q: Hello\nA:"})
    check(st == 200 and o.get("response") == raw2.get("response") and
          o.get("prompt_eval_count") == raw2.get("prompt_eval_count"),
          "template override: %r vs %r" % (o, raw2))
    check_error(srv, "/api/generate", {"model": "tmpltest", "prompt": "x",
                                       "template": "{{ if }"}, 400, "template", "bad template")
    check_error(srv, "/api/generate", {"model": "tmpltest", "prompt": "x", "suffix": "y"}, 400,
                '"tmpltest" does not support insert', "suffix needs .Suffix")
    # request options override the params layer
    st, o = srv.post("/api/generate", {"model": "tmpltest", "prompt": "Hello", "stream": False,
                                       "options": {"num_predict": 3}})
    check(st == 200 and o.get("eval_count") == 3, "request options over the params layer")


def test_parallel(srv, model):
    results = []

    def one(i):
        st, ct, lines = srv.ndjson("/api/generate", {"model": model, "prompt": "Story %d" % i,
                                                     "options": {"num_predict": 8, "seed": i}})
        results.append(st == 200 and lines and lines[-1].get("done") is True)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(len(results) == 6 and all(results), "6 concurrent streams all finish: %r" % results)


def test_malformed(srv, model, corpus_dir):
    """Mutated request bodies (the fuzz corpus, bytes flipped, cut, duplicated) to every
    generation endpoint: each answer is 200 or a 4xx with an error, never a crash or a hang.
    Bodies that still parse get a tiny num_predict so none runs long."""
    import random
    rnd = random.Random(7)
    seeds = []
    for f in sorted(os.listdir(corpus_dir)):
        with open(os.path.join(corpus_dir, f), "rb") as fh:
            seeds.append(fh.read())
    paths = ["/api/generate", "/api/chat", "/api/embed", "/api/embeddings",
             "/v1/chat/completions", "/v1/completions", "/v1/embeddings"]
    bad = []
    for i in range(140):
        b = bytearray(rnd.choice(seeds))
        for _ in range(rnd.randint(1, 4)):
            op = rnd.randint(0, 3)
            k = rnd.randrange(len(b))
            if op == 0:
                b[k] = rnd.randrange(256)
            elif op == 1:
                b = b[:k]
            elif op == 2:
                b[k:k] = b[k:k + rnd.randint(1, 40)]
            elif len(b) > 2:
                del b[k:k + rnd.randint(1, 20)]
            if not b:
                b = bytearray(b"{")
        body = bytes(b)
        try:
            j = json.loads(body)
            if isinstance(j, dict):
                j["model"] = model if rnd.random() < 0.8 else j.get("model")
                opts = j.get("options") if isinstance(j.get("options"), dict) else {}
                opts["num_predict"] = 2
                j["options"] = opts
                j["max_tokens"] = 2
                j.pop("max_completion_tokens", None)
                body = json.dumps(j)
        except (ValueError, RecursionError):
            pass
        path = paths[i % len(paths)]
        try:
            st, ct, payload = srv.raw("POST", path, body, timeout=60)
        except Exception as e:
            bad.append((path, body[:200], repr(e)))
            continue
        if not (st == 200 or 400 <= st < 500):
            bad.append((path, body[:200], st, payload[:200]))
    check(not bad, "malformed bodies get 200 or 4xx: %r" % bad[:3])
    st, r = srv.get("/health")
    check(st == 200 and srv.proc.poll() is None, "server alive after malformed bodies")


def busy_slots(srv):
    st, ct, d = srv.raw("GET", "/metrics")
    for line in d.decode().splitlines():
        if line.startswith("promeserve_busy_slots "):
            return float(line.split()[1])
    return None


def test_hangup(srv, model):
    """A client that hangs up mid-stream (/api/chat NDJSON, /v1 SSE) frees its slot at once."""
    for path, body in [("/api/chat", {"model": model, "messages": [
                            {"role": "user", "content": "Write a very long story."}],
                            "options": {"num_predict": 3000}}),
                       ("/v1/chat/completions", {"model": model, "stream": True,
                                                 "max_tokens": 3000, "messages": [
                            {"role": "user", "content": "Write a very long story."}]})]:
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        c.request("POST", path, body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        first = r.fp.readline()
        check(r.status == 200 and first.strip(), "%s stream started: %r" % (path, first))
        check((busy_slots(srv) or 0) >= 1, "%s: a slot is busy while streaming" % path)
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        t0 = time.time()
        while time.time() - t0 < 5 and busy_slots(srv) != 0:
            time.sleep(0.05)
        check(busy_slots(srv) == 0, "%s: the slot is freed after the client hung up" % path)


def test_limits(binary, gguf, name):
    """--timeout ends a long generation normally with done_reason "length" (streamed and not);
    past --parallel 1 + --max-queue 1, requests get 503 with the engine's message."""
    srv = Server(binary, ["--threads", "2", "--parallel", "1", "--max-queue", "1",
                          "--timeout", "2s", gguf])
    try:
        body = {"model": name, "prompt": "Count from one to ten thousand in words.",
                "options": {"num_predict": 100000, "temperature": 0}}
        t0 = time.time()
        st, r = srv.post("/api/generate", dict(body, stream=False))
        dt = time.time() - t0
        check(st == 200 and r.get("done_reason") == "length" and dt < 8,
              "--timeout: whole reply cut with done_reason length after %.1f s: %r" % (
                  dt, {k: v for k, v in r.items() if k != "context"}))
        t0 = time.time()
        st, ct, lines = srv.ndjson("/api/generate", body)
        dt = time.time() - t0
        check(st == 200 and lines and lines[-1].get("done_reason") == "length" and dt < 8,
              "--timeout: stream ends with done_reason length after %.1f s" % dt)
        results = []

        def one():
            results.append(srv.post("/api/generate", {"model": name, "prompt": "Tell a story.",
                                                      "stream": False,
                                                      "options": {"num_predict": 30}}))

        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(st for st, _ in results)
        busy = [r for st, r in results if st == 503]
        check(set(codes) <= {200, 503} and 200 in codes and busy and
              all("server busy, please try again.  maximum pending requests exceeded" in
                  r.get("error", "") for r in busy), "queue full -> 503: %r" % codes)
        # a batch of inputs larger than the queue is embedded in waves, not refused
        st, r = srv.post("/api/embed", {"model": name, "input": ["text %d" % i for i in range(6)]})
        check(st == 200 and len(r.get("embeddings", [])) == 6,
              "6 inputs through a queue of 1: %d %s" % (st, r.get("error")))
        st, r = srv.get("/health")
        check(st == 200, "healthy after the limits")
    finally:
        srv.stop()
        shutil.rmtree(srv.store, ignore_errors=True)
    check(not any(t in srv.log() for t in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                           "runtime error:")),
          "no sanitizer report from the limits server:\n" + srv.log()[-3000:])


def main():
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print("promeserve binary missing; skipped")
        return 77
    binary = sys.argv[1]
    fixtures = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(__file__), "..", "fixtures")
    tiny_dir = os.path.join(fixtures, "llm", "tiny")
    tiny_qwen3 = os.path.join(tiny_dir, "qwen3-q8_0.gguf")
    tiny_llama = os.path.join(tiny_dir, "llama-q8_0.gguf")
    if not os.path.isfile(tiny_qwen3):
        print("tiny fixture models missing; skipped")
        return 77
    smol_path = find_model("SmolLM2-135M-Instruct.Q4_1.gguf")
    args = ["--threads", "2", "--parallel", "4", tiny_qwen3, tiny_llama, smol_path]
    srv = Server(binary, args, tiny_gguf=tiny_llama, tools_gguf=smol_path)
    smol = "SmolLM2-135M-Instruct.Q4_1" if smol_path else None
    model = smol or "llama-q8_0"
    try:
        test_generate(srv, model)
        test_generate_errors(srv, model)
        test_chat(srv, model, smol is not None)
        test_capabilities(srv, smol, "qwen3-q8_0")
        test_embed(srv, model, "qwen3-q8_0")
        test_openai(srv, model, smol is not None)
        test_template_layer(srv)
        if smol:
            test_tool_calls(srv)
            test_hangup(srv, smol)
        test_parallel(srv, model)
        test_malformed(srv, "llama-q8_0", os.path.join(os.path.dirname(os.path.abspath(
            __file__)), "..", "fuzz", "corpus", "api_request"))
        test_load_unload(srv, "llama-q8_0")
        st, r = srv.get("/health")
        check(st == 200, "server still healthy after everything")
    except Exception as e:  # a crash of the server shows up here
        check(False, "exception: %r\n--- server log ---\n%s" % (e, srv.log()[-3000:]))
    finally:
        srv.stop()
        shutil.rmtree(srv.store, ignore_errors=True)
    check(srv.proc.returncode == 0, "server exits 0 on SIGTERM (got %s)" % srv.proc.returncode)
    if smol:
        try:
            test_limits(binary, smol_path, smol)
        except Exception as e:
            check(False, "exception in the limits checks: %r" % e)
    if any(t in srv.log() for t in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                    "runtime error:")):
        check(False, "sanitizer report in the server log:\n" + srv.log()[-5000:])
    return summary()


if __name__ == "__main__":
    sys.exit(main())
