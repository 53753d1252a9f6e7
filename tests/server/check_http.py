#!/usr/bin/env python3
"""Checks promeserve's HTTP layer end to end (run by ctest; see tools/CMakeLists.txt).

    check_http.py PROMESERVE [FIXTURES_DIR]

Starts `promeserve serve` on free loopback ports with the tiny fixture models (on the command
line, through --models DIR and through a fake Ollama store) and checks, with nothing but the
standard library:
  GET/HEAD /, gin's 404 and 405 texts, missing/invalid/non-object JSON bodies (400 with Go's
  wording), oversize bodies (413, declared and chunked, the server still serving), OpenAI's
  error shape on /v1, unknown models (404);
  CORS (allowed and refused origins, preflight, OLLAMA_ORIGINS wildcards), the Host check
  (403), --api-key (401/200, / and /health open), /health (503 while loading, then 200),
  /metrics (every line parses as Prometheus text, the required series), the access log;
  a streamed and a non-streamed /api/generate, /api/ps; the registry (names with and without
  .gguf or :latest, no paths from requests, keep_alive 0 and -1, LRU unloading past
  --max-loaded-models, a num_ctx reload, concurrent loads, store names and manifest digests);
  blob uploads through a temporary file (none left behind, 413 past --max-blob);
  OLLAMA_HOST forms, flags over variables, bad flags and variables, a port in use;
  a slow client cut after --header-timeout (and a dripped body after 6 of them) while others
  are served; with SmolLM2-135M-Instruct.Q4_1.gguf ($PT_MODELS_DIR; a failure without
  it): a client hanging up mid-stream frees its slot, and
  SIGTERM with a stream open ends the server with status 0 within seconds.
Prints "N passed, M failed"; exits 1 on a failure, 77 when the binary or model is missing.
Under a sanitizer build any sanitizer report in the server's stderr fails the test.
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from srvtest import ServerProcess, check, find_model, free_port, summary



class Server(ServerProcess):
    """A promeserve serve process (srvtest.ServerProcess) with requests and a checked end."""

    def __init__(self, binary, args, env_extra=None):
        super().__init__(binary, args, env_extra, startup_s=30)

    def request(self, method, path, body=None, headers=None, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data

    def stop(self, sig=signal.SIGTERM, timeout=15):
        try:
            return self.end(sig, timeout)
        finally:
            log = self.log()
            check("runtime error:" not in log and "Sanitizer" not in log,
                  "sanitizer report:\n" + log[-3000:])
            os.unlink(self.errf.name)
            shutil.rmtree(self.store, ignore_errors=True)


def jerr(data):
    try:
        return json.loads(data).get("error")
    except Exception:
        return None


def check_basics(s):
    st, h, d = s.request("GET", "/")
    check(st == 200 and d == b"Ollama is running", "GET / %d %r" % (st, d))
    check(h.get("content-type", "").startswith("text/plain"), "GET / content type %s" % h)
    st, h, d = s.request("HEAD", "/")
    check(st == 200 and d == b"", "HEAD / %d %r" % (st, d))
    st, h, d = s.request("GET", "/nope")
    check(st == 404 and d == b"404 page not found", "404 %d %r" % (st, d))
    check(h.get("content-type", "").startswith("text/plain"), "404 content type")
    st, h, d = s.request("GET", "/api/generate")
    check(st == 405 and d == b"405 method not allowed", "405 %d %r" % (st, d))
    st, h, d = s.request("DELETE", "/api/tags")
    check(st == 405, "DELETE /api/tags %d" % st)
    st, h, d = s.request("GET", "/health")
    check(st == 200 and json.loads(d) == {"status": "ok"}, "/health %d %r" % (st, d))


def check_bodies(s):
    st, h, d = s.request("POST", "/api/chat")
    check(st == 400 and jerr(d) == "missing request body", "missing body %d %r" % (st, d))
    check(h.get("content-type", "").startswith("application/json"), "error content type")
    st, h, d = s.request("POST", "/api/chat", body="   ")
    check(st == 400 and jerr(d) == "missing request body", "blank body %d %r" % (st, d))
    st, h, d = s.request("POST", "/api/chat", body='{"model": x}')
    e = jerr(d) or ""
    check(st == 400 and "invalid character 'x'" in e and "10" in e, "invalid JSON %d %r" % (st, d))
    st, h, d = s.request("POST", "/api/chat", body='{"model": "a"')
    check(st == 400 and "unexpected end" in (jerr(d) or ""), "truncated JSON %d %r" % (st, d))
    st, h, d = s.request("POST", "/api/chat", body='[1, 2]')
    check(st == 400 and "array" in (jerr(d) or ""), "array body %d %r" % (st, d))
    st, h, d = s.request("POST", "/api/chat", body='{"a":1} {"b":2}')
    check(st == 400, "two values %d %r" % (st, d))
    st, h, d = s.request("POST", "/api/chat", body="{" * 5000 + "}" * 5000)
    check(st in (400, 413), "deep nesting %d" % st)
    st, h, d = s.request("POST", "/v1/chat/completions", body="nope")
    e = json.loads(d).get("error") if st == 400 else None
    check(isinstance(e, dict) and e.get("type") == "invalid_request_error",
          "OpenAI error shape %d %r" % (st, d))
    # oversize, declared (--max-body 1000)
    big = json.dumps({"model": "x", "prompt": "a" * 2000})
    st, h, d = s.request("POST", "/api/generate", body=big)
    check(st == 413 and jerr(d) == "request body too large", "413 declared %d %r" % (st, d))
    # oversize, chunked (no Content-Length)
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    c.putrequest("POST", "/api/generate")
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    try:
        for _ in range(4):
            chunk = b"a" * 600
            c.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        c.send(b"0\r\n\r\n")
        r = c.getresponse()
        st, d = r.status, r.read()
    except OSError as ex:
        st, d = -1, str(ex).encode()
    c.close()
    check(st == 413, "413 chunked %d %r" % (st, d))
    st, h, d = s.request("GET", "/")
    check(st == 200, "still serving after 413: %d" % st)
    st, h, d = s.request("POST", "/api/generate", body={"model": "no-such-model", "prompt": "x"})
    check(st == 404 and jerr(d) == "model 'no-such-model' not found", "unknown model %d %r" % (st, d))


def check_missing_host(s):
    """HTTP/1.1 without Host: Go's net/http answers 400 and this text before any handler;
    HTTP/1.0 needs no Host."""
    def raw(text):
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        sock.sendall(text)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        sock.close()
        return data
    d = raw(b"GET /api/version HTTP/1.1\r\n\r\n")
    check(d.startswith(b"HTTP/1.1 400") and
          d.endswith(b"\r\n\r\n400 Bad Request: missing required Host header"),
          "HTTP/1.1 without Host: %r" % d[:300])
    d = raw(b"GET /api/version HTTP/1.0\r\n\r\n")
    check(d.startswith(b"HTTP/1.") and b" 200 " in d.split(b"\r\n")[0],
          "HTTP/1.0 without Host: %r" % d[:200])


def check_cors_and_host(s):
    st, h, d = s.request("GET", "/", headers={"Origin": "http://localhost:3000"})
    check(st == 200 and h.get("access-control-allow-origin") == "http://localhost:3000",
          "CORS allowed origin %d %s" % (st, h))
    st, h, d = s.request("GET", "/api/ps", headers={"Origin": "app://obsidian.md"})
    check(st == 200 and h.get("access-control-allow-origin") == "app://obsidian.md",
          "CORS app:// %d" % st)
    st, h, d = s.request("GET", "/", headers={"Origin": "http://evil.example"})
    check(st == 403, "CORS refused origin %d" % st)
    st, h, d = s.request("OPTIONS", "/api/chat", headers={
        "Origin": "http://127.0.0.1:8080", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    check(st == 204 and "POST" in h.get("access-control-allow-methods", "") and
          "Content-Type" in h.get("access-control-allow-headers", "") and
          h.get("access-control-allow-origin") == "http://127.0.0.1:8080",
          "preflight %d %s" % (st, h))
    st, h, d = s.request("OPTIONS", "/api/chat", headers={"Origin": "https://evil.example"})
    check(st == 403, "preflight refused %d" % st)
    st, h, d = s.request("GET", "/", headers={"Origin": "https://app.example.com"})
    check(st == 200 and h.get("access-control-allow-origin") == "https://app.example.com",
          "OLLAMA_ORIGINS wildcard %d %s" % (st, h))
    for host, want in [("evil.example", 403), ("evil.example:11434", 403), ("localhost:99", 200),
                       ("127.0.0.5", 200), ("192.168.1.7:80", 200), ("10.1.2.3", 200),
                       ("foo.localhost", 200), ("box.local", 200), ("svc.internal", 200),
                       ("[::1]:11434", 200), ("8.8.8.8", 403)]:
        st, h, d = s.request("GET", "/", headers={"Host": host})
        check(st == want, "Host %s: %d, want %d" % (host, st, want))


def check_metrics(s):
    st, h, d = s.request("GET", "/metrics")
    check(st == 200 and h.get("content-type", "").startswith("text/plain; version=0.0.4"),
          "/metrics %d %s" % (st, h))
    text = d.decode()
    sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*"'
                        r'(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*")*)?\})? '
                        r'[-+]?([0-9.]+([eE][-+]?[0-9]+)?|Inf|NaN)$')
    comment = re.compile(r'^# (HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*|TYPE [a-zA-Z_:][a-zA-Z0-9_:]* '
                         r'(counter|gauge|summary|histogram|untyped))$')
    bad = [ln for ln in text.splitlines() if not (sample.match(ln) or comment.match(ln))]
    check(not bad and text.endswith("\n"), "metrics lines that do not parse: %r" % bad[:5])
    for name in ["promeserve_requests_total", "promeserve_request_duration_seconds_sum",
                 "promeserve_request_duration_seconds_count", "promeserve_prompt_tokens_total",
                 "promeserve_generated_tokens_total", "promeserve_generated_tokens_per_second",
                 "promeserve_queue_depth", "promeserve_busy_slots", "promeserve_loaded_models"]:
        check(re.search("^" + name + r"[ {]", text, re.M), "metric %s missing" % name)
    m = re.search(r'^promeserve_requests_total\{route="/",status="200"\} (\d+)$', text, re.M)
    check(m and int(m.group(1)) >= 3, "requests_total for / : %r" % (m and m.group(0)))
    m = re.search(r'^promeserve_requests_total\{route="unmatched",status="404"\} (\d+)$', text,
                  re.M)
    check(m is not None, "404s counted as route unmatched")
    return text


def metric(s, name):
    _, _, d = s.request("GET", "/metrics")
    m = re.search("^" + re.escape(name) + r" ([0-9.e+-]+)$", d.decode(), re.M)
    return float(m.group(1)) if m else None


def check_generate(s, model):
    st, h, d = s.request("POST", "/api/generate",
                         body={"model": model, "prompt": "hello", "options": {"num_predict": 8}})
    lines = [json.loads(x) for x in d.decode(errors="replace").splitlines() if x.strip()]
    check(st == 200 and h.get("content-type") == "application/x-ndjson" and len(lines) >= 2 and
          lines[-1].get("done") is True and all(x.get("done") is False for x in lines[:-1]),
          "streamed generate %d %s %r" % (st, h.get("content-type"), d[:300]))
    check(h.get("transfer-encoding") == "chunked", "stream is chunked: %s" % h)
    st, h, d = s.request("POST", "/api/generate", body={
        "model": model, "prompt": "hello", "stream": False, "options": {"num_predict": 4}})
    check(st == 200, "non-streamed generate %d %r" % (st, d[:200]))
    st, h, d = s.request("GET", "/api/ps")
    ms = json.loads(d).get("models", []) if st == 200 else []
    ok = len(ms) == 1 and ms[0]["name"] == model + ".gguf" and len(ms[0]["digest"]) == 64
    ok = ok and re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$",
                         ms[0]["expires_at"]) is not None
    ok = ok and ms[0]["details"]["format"] == "gguf" and ms[0]["size"] > 0
    check(ok, "/api/ps %d %r" % (st, d))
    check(metric(s, "promeserve_generated_tokens_total") >= 1, "generated tokens counted")
    check(metric(s, "promeserve_loaded_models") == 1, "loaded models gauge")


def check_access_log(s):
    lines = [ln for ln in s.log().splitlines() if ln.startswith("time=")]
    pat = re.compile(r"^time=\d{4}-\d\d-\d\dT\S+ method=[A-Z]+ path=\S+ status=\d{3} "
                     r"duration_ms=[0-9.]+ bytes=\d+ model=\S+ tokens_in=\d+ tokens_out=\d+ "
                     r"remote=\S+$")
    check(len(lines) >= 20 and all(pat.match(ln) for ln in lines),
          "access log (%d lines) bad: %r" % (len(lines), [ln for ln in lines if not pat.match(ln)][:3]))
    check(any("method=HEAD path=/ status=200" in ln for ln in lines), "HEAD / logged")
    check(any("path=/nope status=404" in ln for ln in lines), "404 logged")
    check(any(re.search(r"path=/api/generate status=200 .* model=llama-q8_0 tokens_in=[1-9]\d* "
                        r"tokens_out=[1-9]", ln) for ln in lines), "generate logged with tokens")


def check_slowloris(s, header_timeout):
    sock = socket.create_connection(("127.0.0.1", s.port))
    result = {}

    def drip():
        t0 = time.time()
        try:
            for ch in b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 100:
                sock.send(bytes([ch]))
                time.sleep(0.5)
                if time.time() - t0 > header_timeout + 10:
                    break
            result["cut"] = None
        except OSError:
            result["cut"] = time.time() - t0
        sock.close()

    t = threading.Thread(target=drip)
    t.start()
    time.sleep(1)
    st, _, _ = s.request("GET", "/", timeout=5)
    check(st == 200, "other clients served during a slow one: %d" % st)
    t.join(header_timeout + 15)
    cut = result.get("cut")
    check(cut is not None and cut < header_timeout + 4, "slow client cut after %r s" % cut)
    st, _, _ = s.request("GET", "/", timeout=5)
    check(st == 200, "serving after the slow client: %d" % st)
    # a JSON body dripped byte by byte is cut after 6 header timeouts
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"POST /api/chat HTTP/1.1\r\nHost: localhost\r\nContent-Length: 500\r\n\r\n")
    t0 = time.time()
    cut = None
    try:
        while time.time() - t0 < 6 * header_timeout + 10:
            sock.send(b" ")
            time.sleep(0.5)
    except OSError:
        cut = time.time() - t0
    sock.close()
    check(cut is not None and cut < 6 * header_timeout + 4, "slow body cut after %r s" % cut)


def check_api_key(binary, model_path):
    s = Server(binary, ["--api-key", "s3cret", "--quiet", model_path])
    try:
        st, _, d = s.request("GET", "/")
        check(st == 200, "key: / open %d" % st)
        st, _, d = s.request("GET", "/health")
        check(st == 200, "key: /health open %d" % st)
        st, _, d = s.request("GET", "/api/ps")
        check(st == 401 and jerr(d) == "unauthorized", "key: missing %d %r" % (st, d))
        st, _, d = s.request("GET", "/api/ps", headers={"Authorization": "Bearer wrong"})
        check(st == 401, "key: wrong %d" % st)
        st, _, d = s.request("GET", "/api/ps", headers={"Authorization": "Bearer s3cret"})
        check(st == 200, "key: right %d %r" % (st, d))
        st, _, d = s.request("GET", "/metrics", headers={"Authorization": "Bearer s3cre"})
        check(st == 401, "key: prefix %d" % st)
        check("time=" not in s.log(), "--quiet: no access log")
    finally:
        check(s.stop() == 0, "key server exit status")


def generate(s, model, **extra):
    body = {"model": model, "prompt": "hello", "options": {"num_predict": 2}}
    opts = extra.pop("options", {})
    body["options"].update(opts)
    body.update(extra)
    st, _, d = s.request("POST", "/api/generate", body=body)
    return st, d


def loaded(s):
    st, _, d = s.request("GET", "/api/ps")
    return {m["name"]: m for m in json.loads(d)["models"]} if st == 200 else None


def wait_for(cond, seconds=5):
    t0 = time.time()
    while time.time() - t0 < seconds:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def check_registry(binary, fixtures):
    """Resolution by --models DIR, keep_alive, LRU past --max-loaded-models, num_ctx reloads,
    concurrent loads."""
    tiny = os.path.join(fixtures, "llm", "tiny")
    s = Server(binary, ["--quiet", "--models", tiny, "--max-loaded-models", "2"])
    try:
        for name in ["llama-q8_0", "llama-q8_0.gguf", "llama-q8_0:latest"]:
            st, d = generate(s, name)
            check(st == 200, "--models DIR resolves %s: %d %r" % (name, st, d[:200]))
        for name in ["../tiny/llama-q8_0.gguf", ".llama", "llama-q8_0.ref", tiny + "/llama-q8_0.gguf"]:
            st, d = generate(s, name)
            check(st == 404 and "not found" in (jerr(d) or ""), "no path from requests: %s %d"
                  % (name, st))
        ps = loaded(s)
        check(list(ps) == ["llama-q8_0.gguf"], "one entry for the three spellings: %r" % ps)
        exp = ps["llama-q8_0.gguf"]["expires_at"]
        check(exp.startswith(time.strftime("%Y-")), "default keep_alive 5m: %s" % exp)
        # keep_alive 0 unloads right after the request
        st, d = generate(s, "qwen2-q8_0", keep_alive=0)
        check(st == 200, "keep_alive 0 request %d" % st)
        check(wait_for(lambda: "qwen2-q8_0.gguf" not in loaded(s)), "keep_alive 0 unloads")
        # keep_alive -1 keeps it forever (Go's far-future time)
        st, d = generate(s, "qwen2-q8_0", keep_alive=-1)
        ps = loaded(s)
        check(st == 200 and int(ps["qwen2-q8_0.gguf"]["expires_at"][:4]) > 2200,
              "keep_alive -1: %r" % ps.get("qwen2-q8_0.gguf"))
        # a third model unloads the least recently used idle one (max 2)
        st, d = generate(s, "llama-q8_0")  # llama now more recent than qwen2
        st, d = generate(s, "phi3-q8_0")
        ps = loaded(s)
        check(st == 200 and sorted(ps) == ["llama-q8_0.gguf", "phi3-q8_0.gguf"],
              "LRU unloading past --max-loaded-models: %r" % sorted(ps))
        # num_ctx change reloads with the new context
        st, d = generate(s, "phi3-q8_0", options={"num_ctx": 128})
        ps = loaded(s)
        check(st == 200 and ps["phi3-q8_0.gguf"]["context_length"] == 128,
              "num_ctx 128 reload: %r" % ps.get("phi3-q8_0.gguf"))
        # concurrent requests for three models with room for two: all answered
        results = []

        def worker(name):
            results.append(generate(s, name)[0])

        ts = [threading.Thread(target=worker, args=(n,)) for n in
              ["gemma3-q8_0", "qwen3-q8_0", "gemma3-q8_0", "qwen3-q8_0", "llama-q6_k", "llama-q6_k"]]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        check(sorted(results) == [200] * 6, "concurrent loads: %r" % results)
        check(len(loaded(s)) <= 2, "never more than --max-loaded-models: %r" % sorted(loaded(s)))
        check(metric(s, "promeserve_loaded_models") <= 2, "loaded_models gauge")
    finally:
        check(s.stop() == 0, "registry server exit status")


def check_blobs_and_env(binary, model_path):
    """Blob uploads go through a temporary file in <store>/blobs (none left behind); --max-blob
    answers 413; OLLAMA_HOST forms and flags over variables."""
    import hashlib
    port = free_port()
    s = Server(binary, ["--quiet", "--max-blob", "64K", model_path],
               {"OLLAMA_HOST": "http://127.0.0.1:%d" % port})
    try:
        check(s.log().startswith("Listening on 127.0.0.1:%d " % s.port),
              "--port wins over OLLAMA_HOST: %r" % s.log()[:80])
        data = os.urandom(5000)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        st, _, d = s.request("POST", "/api/blobs/" + digest, body=data)
        check(st == 201, "blob upload %d %r" % (st, d))
        st, _, d = s.request("HEAD", "/api/blobs/" + digest)
        check(st == 200, "blob HEAD after upload %d" % st)
        st, _, d = s.request("POST", "/api/blobs/sha256:" + "0" * 64, body=data)
        check(st == 400, "blob with the wrong digest %d %r" % (st, d))
        big = b"x" * 70000
        st, _, d = s.request("POST", "/api/blobs/sha256:" + hashlib.sha256(big).hexdigest(),
                             body=big)
        check(st == 413, "blob over --max-blob %d %r" % (st, d))
        blobs = os.path.join(s.store, "blobs")
        left = [f for f in os.listdir(blobs) if f.startswith(".upload")]
        check(not left, "temporary upload files left: %r" % left)
        check(os.path.isfile(os.path.join(blobs, digest.replace(":", "-"))), "blob stored")
    finally:
        check(s.stop() == 0, "blob server exit status")
    for form, want in [("127.0.0.1:%d", "127.0.0.1:%d"), ("http://127.0.0.1:%d", "127.0.0.1:%d"),
                       ("localhost:%d", "localhost:%d")]:
        port = free_port()
        env = dict(os.environ, OLLAMA_HOST=form % port)
        p = subprocess.Popen([binary, "serve", "--quiet"], stderr=subprocess.PIPE, env=env)
        line = p.stderr.readline().decode()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/")
            ok = c.getresponse().status == 200
        except OSError:
            ok = False
        p.send_signal(signal.SIGTERM)
        rc = p.wait(10)
        check(ok and line.startswith("Listening on " + want % port) and rc == 0,
              "OLLAMA_HOST=%s: %r rc %r" % (form % port, line, rc))
    s = Server(binary, ["--quiet"])
    try:
        p = subprocess.Popen([binary, "serve", "--port", str(s.port)], stderr=subprocess.PIPE)
        try:
            err = p.communicate(timeout=5)[1].decode()
        except subprocess.TimeoutExpired:
            p.kill()
            err = p.communicate()[1].decode()
        check(p.returncode == 1 and "in use" in err, "a second server on the port: %r" % err)
    finally:
        s.stop()
    r = subprocess.run([binary, "serve", "--help"], capture_output=True, timeout=10)
    check(r.returncode == 0 and b"--max-body" in r.stdout, "serve --help")
    r = subprocess.run([binary, "serve", "--bogus"], capture_output=True, timeout=10)
    check(r.returncode == 1 and b"unknown flag: --bogus" in r.stderr, "unknown flag %r" % r.stderr)
    r = subprocess.run([binary, "serve", "--max-body"], capture_output=True, timeout=10)
    check(r.returncode == 1 and b"needs an argument" in r.stderr, "flag without value")
    r = subprocess.run([binary, "serve", "/no/such/model.gguf"], capture_output=True, timeout=10)
    check(r.returncode == 1 and b"/no/such/model.gguf" in r.stderr, "missing model file")
    s = Server(binary, [], {"OLLAMA_NUM_PARALLEL": "lots", "OLLAMA_KEEP_ALIVE": "soon"})
    try:
        log = s.log()
        check("OLLAMA_NUM_PARALLEL" in log and "OLLAMA_KEEP_ALIVE" in log,
              "bad variables are warned about, the defaults kept: %r" % log)
    finally:
        s.stop()
    p = subprocess.Popen([binary, "serve", "--port", "99999"], stderr=subprocess.PIPE)
    err = p.communicate(timeout=10)[1].decode()
    check(p.returncode == 1 and "Error:" in err, "bad --port: %r" % err)


def make_store(root, gguf, name="tiny", params=None):
    """An Ollama store holding one model: the weights and a params layer as blobs, a manifest."""
    import hashlib
    blobs = os.path.join(root, "blobs")
    os.makedirs(blobs, exist_ok=True)

    def blob(data):
        hexd = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, "sha256-" + hexd), "wb") as f:
            f.write(data)
        return {"digest": "sha256:" + hexd, "size": len(data)}

    with open(gguf, "rb") as f:
        weights = f.read()
    layers = [dict(blob(weights), mediaType="application/vnd.ollama.image.model")]
    if params is not None:
        layers.append(dict(blob(json.dumps(params).encode()),
                           mediaType="application/vnd.ollama.image.params"))
    layers.append(dict(blob(b"You are terse."), mediaType="application/vnd.ollama.image.system"))
    config = dict(blob(b'{"model_format":"gguf"}'),
                  mediaType="application/vnd.docker.container.image.v1+json")
    manifest = json.dumps({"schemaVersion": 2,
                           "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                           "config": config, "layers": layers}).encode()
    mdir = os.path.join(root, "manifests", "registry.ollama.ai", "library", name)
    os.makedirs(mdir, exist_ok=True)
    with open(os.path.join(mdir, "latest"), "wb") as f:
        f.write(manifest)
    return hashlib.sha256(manifest).hexdigest()


def check_store_models(binary, model_path):
    """A model of the Ollama store loads by its short names; /api/ps has the manifest digest."""
    s = Server(binary, ["--quiet"])
    try:
        digest = make_store(s.store, model_path, params={"temperature": 0, "stop": ["x"]})
        for name in ["tiny", "tiny:latest", "library/tiny", "registry.ollama.ai/library/tiny:latest"]:
            st, d = generate(s, name)
            check(st == 200, "store model %s: %d %r" % (name, st, d[:200]))
        ps = loaded(s)
        check(list(ps) == ["tiny:latest"] and ps["tiny:latest"]["digest"] == digest,
              "store model in /api/ps: %r (manifest digest %s)" % (ps, digest))
        st, d = generate(s, "tiny:other")
        check(st == 404, "unknown tag %d" % st)
        st, d = generate(s, "Bad Name!")
        check(st == 404, "invalid name %d %r" % (st, d))
        make_store(s.store, model_path, name="broken", params=None)
        with open(os.path.join(s.store, "manifests", "registry.ollama.ai", "library", "broken",
                               "latest"), "w") as f:
            f.write("{not json")
        st, d = generate(s, "broken")
        check(st == 404, "a broken manifest is not a model: %d %r" % (st, d))
        check_recreate_loaded(s, model_path)
    finally:
        check(s.stop() == 0, "store server exit status")


def sha256_hex(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_recreate_loaded(s, model_path):
    """Ollama reads a model's layers per request: /api/create over a loaded model takes effect
    at the next request (same weights: new layers; other weights: a reload), and /api/delete of
    a loaded model makes the next request 404 and unloads it."""
    greedy = {"temperature": 0, "top_k": 1, "num_predict": 6}

    def create(gguf, **extra):
        body = dict({"model": "recreate", "stream": False,
                     "files": {"m.gguf": "sha256:" + sha256_hex(gguf)}}, **extra)
        if s.request("HEAD", "/api/blobs/sha256:" + sha256_hex(gguf))[0] != 200:
            with open(gguf, "rb") as f:
                s.request("POST", "/api/blobs/sha256:" + sha256_hex(gguf), body=f.read())
        st, _, d = s.request("POST", "/api/create", body=body)
        return st

    def response(**extra):
        st, d = generate(s, "recreate", options=greedy, stream=False, **extra)
        return json.loads(d)["response"] if st == 200 else (st, d)

    check(create(model_path, template="{{ .Prompt }}") == 200, "create 'recreate'")
    plain = response()
    check(plain == response(raw=True), "template {{ .Prompt }} is the raw prompt")
    digest1 = loaded(s).get("recreate:latest", {}).get("digest")
    check(create(model_path, template="Q: {{ .Prompt }} A:", system="unused") == 200,
          "re-create 'recreate' while loaded")
    templated = response()
    by_hand = response(prompt="Q: hello A:", raw=True)
    check(templated == by_hand and templated != plain,
          "re-created model uses its new template: %r, by hand %r, old %r"
          % (templated, by_hand, plain))
    digest2 = loaded(s).get("recreate:latest", {}).get("digest")
    check(digest2 and digest2 != digest1, "/api/ps shows the new manifest digest")
    other = os.path.join(os.path.dirname(model_path), "qwen3-q8_0.gguf")
    if os.path.exists(other):
        check(create(other) == 200, "re-create 'recreate' with other weights")
        st, d = generate(s, "recreate")
        check(st == 200, "generate after new weights: %d %r" % (st, d[:200]))
        st, _, d = s.request("POST", "/api/show", body={"model": "recreate"})
        arch = json.loads(d)["model_info"]["general.architecture"] if st == 200 else None
        check(arch == "qwen3", "show after new weights: %s" % arch)
    st, _, d = s.request("DELETE", "/api/delete", body={"model": "recreate"})
    check(st == 200, "delete the loaded model: %d %r" % (st, d))
    st, d = generate(s, "recreate")
    check(st == 404 and b"not found" in d, "generate after delete: %d %r" % (st, d))
    check(wait_for(lambda: "recreate:latest" not in (loaded(s) or {})),
          "a deleted model unloads: %r" % loaded(s))


def find_smollm():
    return find_model("SmolLM2-135M-Instruct.Q4_1.gguf")  # exits 1 when missing


def open_stream(s, model, n):
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c.request("POST", "/api/generate", body=json.dumps(
        {"model": model, "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
         "options": {"num_predict": n}}))
    r = c.getresponse()
    first = r.readline()
    return c, r, first


def check_disconnect_and_sigterm(binary):
    path = find_smollm()
    s = Server(binary, ["--quiet", path])
    model = "SmolLM2-135M-Instruct.Q4_1"
    # /health says 503 {"status":"loading"} while the model loads (about a second here)
    seen = set()
    done = threading.Event()

    def poll_health():
        while not done.is_set():
            st, _, d = s.request("GET", "/health", timeout=5)
            seen.add((st, d))

    t = threading.Thread(target=poll_health)
    t.start()
    st, _, _ = s.request("POST", "/api/generate", body={"model": model, "prompt": "hi",
                                                        "options": {"num_predict": 1}})
    done.set()
    t.join(10)
    check(st == 200 and (503, b'{"status":"loading"}') in seen, "/health while loading: %r" % seen)
    st, _, d = s.request("GET", "/health")
    check(st == 200 and d == b'{"status":"ok"}', "/health after loading %d %r" % (st, d))
    # a client hanging up mid-stream frees its slot at once
    c, r, first = open_stream(s, model, 3000)
    check(r.status == 200 and b'"done":false' in first, "long stream started %r" % first)
    check(metric(s, "promeserve_busy_slots") >= 1, "busy while streaming")
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    t0 = time.time()
    while time.time() - t0 < 5 and metric(s, "promeserve_busy_slots") != 0:
        time.sleep(0.1)
    check(metric(s, "promeserve_busy_slots") == 0, "slot freed after the client hung up")
    # SIGTERM while streams are open (NDJSON and SSE): each ends with a last line saying so,
    # and the server exits 0 within seconds
    c, r, first = open_stream(s, model, 3000)
    check(r.status == 200, "second stream started")
    c2 = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c2.request("POST", "/v1/chat/completions", body=json.dumps(
        {"model": model, "stream": True, "max_tokens": 3000,
         "messages": [{"role": "user", "content": "Count to ten thousand."}]}))
    r2 = c2.getresponse()
    first2 = r2.readline()
    check(r2.status == 200 and first2.startswith(b"data: "), "SSE stream started %r" % first2)
    # and a long generation whose reply is not streamed: cancelled, answered 503 (before, the
    # server waited for it past the grace period)
    whole = {}

    def whole_reply():
        whole["r"] = s.request("POST", "/api/generate", body={
            "model": model, "prompt": "Count to ten thousand.", "stream": False,
            "options": {"num_predict": 3000}}, timeout=60)

    tw = threading.Thread(target=whole_reply)
    tw.start()
    t0 = time.time()
    while time.time() - t0 < 5 and metric(s, "promeserve_busy_slots") < 3:
        time.sleep(0.05)
    check(metric(s, "promeserve_busy_slots") >= 3, "the non-streamed generation is running")
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    rests = []
    for conn, resp in ((c, r), (c2, r2)):
        try:
            rests.append(resp.read())
        except (OSError, http.client.IncompleteRead) as ex:
            rests.append(getattr(ex, "partial", b""))
        conn.close()
    try:
        rc = s.proc.wait(15)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.time() - t0
    s.stop()
    check(rc == 0 and took < 8, "SIGTERM with open streams: status %r after %.1f s" % (rc, took))
    tw.join(30)
    st_w, _, d_w = whole.get("r", (None, None, b""))
    check(st_w == 503 and b"server is shutting down" in d_w,
          "the non-streamed generation ends 503 at SIGTERM: %r %r" % (st_w, d_w[:200]))
    lines = [ln for ln in (first + rests[0]).split(b"\n") if ln.strip()]
    try:
        last = json.loads(lines[-1])
    except (ValueError, IndexError):
        last = None
    check(isinstance(last, dict) and (last.get("error") == "server is shutting down" or
                                      (last.get("done") is True and last.get("done_reason"))),
          "NDJSON stream's last line says it ended: %r" % (lines[-1:] or None))
    events = [ev for ev in (first2 + rests[1]).split(b"\n\n") if ev.strip()]
    last_ev = events[-1] if events else b""
    try:
        last2 = json.loads(last_ev[len(b"data: "):]) if last_ev != b"data: [DONE]" else "done"
    except ValueError:
        last2 = None
    check(last2 == "done" or (isinstance(last2, dict) and "error" in last2 and
                              "shutting down" in last2["error"].get("message", "")),
          "SSE stream's last event says it ended: %r" % last_ev[-200:])

def main():
    binary = sys.argv[1]
    fixtures = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    model_path = os.path.join(fixtures, "llm", "tiny", "llama-q8_0.gguf")
    if not os.access(binary, os.X_OK) or not os.path.isfile(model_path):
        print("skip: no promeserve binary or no tiny model")
        return 77
    header_timeout = 2
    s = Server(binary, ["--max-body", "1000", "--header-timeout", "%ds" % header_timeout,
                        model_path], {"OLLAMA_ORIGINS": "https://*.example.com"})
    try:
        check_basics(s)
        check_bodies(s)
        check_cors_and_host(s)
        check_missing_host(s)
        check_generate(s, "llama-q8_0")
        check_metrics(s)
        check_slowloris(s, header_timeout)
        check_access_log(s)
    finally:
        rc = s.stop()
        check(rc == 0, "exit status after SIGTERM: %r" % rc)
    check_api_key(binary, model_path)
    check_registry(binary, fixtures)
    check_blobs_and_env(binary, model_path)
    check_store_models(binary, model_path)
    check_disconnect_and_sigterm(binary)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
