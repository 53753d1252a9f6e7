#!/usr/bin/env python3
"""Malformed requests against promeserve (issue 7, item 9): each must get a 4xx (or, for a
truncated or trickled request, a dropped connection), never a 5xx, a hang or a crash, and after
each one the server must still answer GET /api/version. Standard library only.

    check_malformed.py --bin build/bin/promeserve [--gguf SmolLM2-135M-Instruct.Q4_1.gguf]
    check_malformed.py --url http://127.0.0.1:11434 [--model smollm2:135m]

--bin starts `promeserve serve` on a free loopback port with an empty temporary store and
creates the model from the GGUF (--gguf, else $PT_MODELS_DIR, which ctest sets; the test fails
without it) through /api/blobs and /api/create so that the option-parsing paths behind a valid
model name are reached too.
Exits 1 naming every case that failed.
"""
import argparse
import hashlib
import http.client
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CASE_TIMEOUT = 30.0       # seconds one request may take before it counts as a hang
SLOWLORIS_CONNS = 8
HUGE_BODY = 100 * 1024 * 1024

FOURXX = "4xx"
FOURXX_OR_DROP = "4xx or dropped"
NOT_5XX = "not 5xx"       # 2xx or 4xx: behaviour that Ollama itself accepts (e.g. odd prompts)


class Server:
    def __init__(self, host, port):
        self.host, self.port = host, port
        self.proc = None
        self.log = None

    def alive(self):
        return self.proc is None or self.proc.poll() is None


# ---- raw HTTP ------------------------------------------------------------------------------------

def connect(srv, timeout=CASE_TIMEOUT):
    return socket.create_connection((srv.host, srv.port), timeout=timeout)


def parse_response(buf, method, closed):
    """(status, body) once buf holds a whole HTTP response, else None; with closed (the server
    has closed the connection) whatever arrived. Interim 1xx responses are skipped."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return (None, f"dropped after {len(buf)} bytes") if closed else None
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        return None, f"not an HTTP response: {lines[0][:80]!r}"
    status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    rest = buf[end + 4:]
    if 100 <= status < 200:
        return parse_response(rest, method, closed)
    if method == "HEAD" or status in (204, 304):
        return status, b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body, pos = b"", 0
        while True:
            eol = rest.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(rest[pos:eol].split(b";")[0] or b"0", 16)
            if size == 0:
                return status, body
            if len(rest) < eol + 2 + size + 2:
                break
            body += rest[eol + 2:eol + 2 + size]
            pos = eol + 2 + size + 2
        return (status, body) if closed else None
    if "content-length" in headers:
        n = int(headers["content-length"])
        if len(rest) >= n:
            return status, rest[:n]
        return (status, rest) if closed else None
    return (status, rest) if closed else None


def read_response(sock, method="POST", limit=CASE_TIMEOUT):
    """Reads one HTTP response from sock within `limit` seconds in all (a reply that keeps
    streaming past it counts as a hang: socket.timeout). (status, body bytes), or (None, why)
    when the server closed or reset the connection without answering."""
    deadline = time.time() + limit
    buf = b""
    while True:
        got = parse_response(buf, method, closed=False)
        if got is not None:
            return got
        left = deadline - time.time()
        if left <= 0:
            raise socket.timeout(f"no complete answer within {limit:.0f} s")
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError) as e:
            got = parse_response(buf, method, closed=True)
            return got if got[0] is not None else (None, f"dropped ({type(e).__name__})")
        if not data:
            return parse_response(buf, method, closed=True)
        buf += data


def send_raw(srv, data, method="POST", shut_wr=False):
    """Sends bytes as they are, returns (status or None, body or reason)."""
    with connect(srv) as s:
        try:
            s.sendall(data)
            if shut_wr:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return read_response(s, method)


def request_bytes(method, path, body=b"", headers=None, host="127.0.0.1"):
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
    if body is not None:
        head.append(f"Content-Length: {len(body)}")
        head.append("Content-Type: application/json")
    for k, v in (headers or {}).items():
        head.append(f"{k}: {v}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")


def post(srv, path, body, method="POST"):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    return send_raw(srv, request_bytes(method, path, body, host=f"127.0.0.1:{srv.port}"),
                    method)


def version_ok(srv):
    try:
        c = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
        c.request("GET", "/api/version")
        r = c.getresponse()
        r.read()
        c.close()
        return r.status == 200
    except OSError:
        return False


# ---- the cases ---------------------------------------------------------------------------------

def json_cases(model):
    """(name, path, body, expectation) for requests whose JSON is malformed or mistyped."""
    one = {"num_predict": 1}
    gen = lambda **kw: {"model": model, "prompt": "hi", "stream": False, "options": one, **kw}
    chat = lambda **kw: {"model": model, "stream": False, "options": one,
                         "messages": [{"role": "user", "content": "hi"}], **kw}
    v1 = lambda **kw: {"model": model, "max_tokens": 1,
                       "messages": [{"role": "user", "content": "hi"}], **kw}
    cases = [
        ("not JSON", "/api/generate", b"{", FOURXX),
        ("empty body", "/api/chat", b"", FOURXX),
        ("JSON array body", "/api/generate", b"[]", FOURXX),
        ("JSON string body", "/api/chat", b'"hello"', FOURXX),
        ("JSON null body", "/api/embed", b"null", FOURXX),
        ("trailing garbage", "/api/generate", json.dumps(gen()).encode() + b"xyz", FOURXX),
        ("invalid UTF-8 in the model name", "/api/generate",
         b'{"model":"smol\xff\xfelm","prompt":"hi"}', FOURXX),
        ("invalid UTF-8 in the prompt", "/api/generate",
         ('{"model":"%s","prompt":"hi \xff\xfe\xc3","stream":false,"options":{"num_predict":2}}'
          % model).encode("latin-1"), NOT_5XX),
        ("overlong UTF-8 in a message", "/api/chat",
         ('{"model":"%s","stream":false,"options":{"num_predict":1},"messages":[{"role":"user",'
          '"content":"\xc0\xaf\xe0\x80\xaf"}]}' % model).encode("latin-1"), NOT_5XX),
        ("lone surrogate escape", "/api/generate",
         ('{"model":"%s","prompt":"\\ud800x","stream":false,"options":{"num_predict":1}}'
          % model).encode(), NOT_5XX),
        ("NUL byte outside a string", "/api/generate",
         b'{"model":"x"\x00,"prompt":"hi"}', FOURXX),
        ("NUL escape in the model name", "/api/generate",
         b'{"model":"smollm2\\u0000:135m","prompt":"hi"}', FOURXX),
        ("NUL escape in the prompt", "/api/generate",
         ('{"model":"%s","prompt":"a\\u0000b","stream":false,"options":{"num_predict":1}}'
          % model).encode(), NOT_5XX),
        ("100000 [ nested", "/api/generate", b"[" * 100000, FOURXX),
        ("100000 [ nested in options", "/api/generate",
         ('{"model":"%s","prompt":"hi","options":' % model).encode() + b"[" * 100000, FOURXX),
        ("100000 { nested", "/api/chat", b'{"a":' * 100000, FOURXX),
        ("model name of 100 KB", "/api/generate", gen(model="m" * 100000), FOURXX),
    ]
    for field, val in (("num_predict", "1e999"), ("num_predict", "99999999999999999999"),
                       ("num_predict", "-1e999"), ("num_ctx", "1e999"),
                       ("num_ctx", "99999999999999999999"), ("num_ctx", "-99999999999999999999"),
                       ("seed", "99999999999999999999"), ("temperature", "1e999"),
                       ("top_k", "1e999"), ("num_thread", "99999999999999999999"),
                       ("repeat_last_n", "99999999999999999999")):
        body = ('{"model":"%s","prompt":"hi","stream":false,"options":{"%s":%s}}'
                % (model, field, val)).encode()
        cases.append((f"options.{field} = {val}", "/api/generate", body, FOURXX))
    cases.append(("keep_alive = 1e999", "/api/generate",
                  ('{"model":"%s","prompt":"","keep_alive":1e999}' % model).encode(), FOURXX))
    cases.append(("max_tokens = 99999999999999999999 (/v1)", "/v1/chat/completions",
                  ('{"model":"%s","max_tokens":99999999999999999999,"messages":[{"role":"user",'
                   '"content":"hi"}]}' % model).encode(), FOURXX))
    # values Ollama accepts but that must not turn into a huge allocation, a thread storm or a
    # crash: answered (2xx or 4xx) within the time limit
    for field, val in (("num_ctx", 2147483647), ("num_thread", 1000000), ("num_ctx", -5),
                       ("num_predict", -2), ("top_k", -1), ("repeat_last_n", -1000),
                       ("temperature", -1), ("num_batch", 2147483647)):
        cases.append((f"options.{field} = {val}", "/api/generate",
                      gen(options={"num_predict": 1, field: val}), NOT_5XX))

    wrong = {
        "/api/generate": (gen, [("model", 123), ("model", None), ("model", ["x"]),
                                ("prompt", 1), ("prompt", {"a": 1}), ("system", 5),
                                ("template", []), ("suffix", 1), ("stream", "yes"),
                                ("raw", "no"), ("format", 123), ("format", "xml"),
                                ("options", "fast"), ("options", [1]), ("keep_alive", {}),
                                ("keep_alive", True), ("keep_alive", "forever"),
                                ("context", "x"), ("context", ["a"]), ("context", [1.5]),
                                ("images", "x"), ("images", [1]), ("think", 5),
                                ("options", {"temperature": "hot"}),
                                ("options", {"num_predict": "5"}), ("options", {"stop": 5}),
                                ("options", {"stop": [1]}), ("options", {"seed": "x"}),
                                ("options", {"top_p": [0.5]})]),
        "/api/chat": (chat, [("messages", "hi"), ("messages", [1]), ("messages", [{"role": 1}]),
                             ("messages", [{"content": "no role"}]),
                             ("messages", [{"role": "user", "content": 1}]),
                             ("messages", [{"role": "user", "content": "x", "images": "x"}]),
                             ("messages", [{"role": "assistant", "tool_calls": "x"}]),
                             ("messages", [{"role": "assistant", "tool_calls": [
                                 {"function": {"name": "f", "arguments": "not an object"}}]}]),
                             ("tools", "x"), ("tools", [1]), ("tools", [{"type": 5}]),
                             ("format", []), ("stream", 1), ("options", 3)]),
        "/api/embed": (lambda **kw: {"model": model, "input": "x", **kw},
                       [("input", 1), ("input", [1, 2]), ("input", {"a": 1}),
                        ("input", [["nested"]]), ("truncate", "x"), ("dimensions", "x"),
                        ("dimensions", -1)]),
        "/api/embeddings": (lambda **kw: {"model": model, "prompt": "x", **kw},
                            [("prompt", 5), ("prompt", ["x"])]),
        "/api/show": (lambda **kw: {"model": model, **kw}, [("model", 5), ("verbose", "x")]),
        "/api/copy": (lambda **kw: {"source": model, "destination": "cp:1", **kw},
                      [("source", 5), ("destination", []), ("destination", "bad name!")]),
        "/api/create": (lambda **kw: {"model": "created:1", **kw},
                        [("files", "x"), ("files", {"a.gguf": 5}),
                         ("files", {"a.gguf": "sha256:../../etc/passwd"}), ("template", 5),
                         ("parameters", "x"), ("system", []), ("from", 5),
                         ("from", "/etc/passwd"), ("model", "bad name!")]),
        "/v1/chat/completions": (v1, [("messages", "x"), ("messages", [{"role": 5}]),
                                      ("max_tokens", "x"), ("temperature", "hot"),
                                      ("stop", 5), ("stream", "x"), ("response_format", "x"),
                                      ("tools", "x"),
                                      ("stream_options", "x"), ("seed", "x")]),
        "/v1/completions": (lambda **kw: {"model": model, "prompt": "x", "max_tokens": 1, **kw},
                            [("prompt", 5), ("max_tokens", "x"), ("suffix", 1)]),
        "/v1/embeddings": (lambda **kw: {"model": model, "input": "x", **kw},
                           [("input", 5), ("input", [[1, 2]]), ("encoding_format", "zip")]),
    }
    for path, (make, fields) in wrong.items():
        for field, val in fields:
            cases.append((f"{path} {field} = {json.dumps(val)[:40]}", path, make(**{field: val}),
                          FOURXX))
    cases.append(("DELETE /api/delete model = 5", "/api/delete", {"model": 5}, FOURXX))
    return cases


def traversal_cases(model, gguf):
    names = ["../../../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "/etc/passwd",
             "library/../../../../etc/passwd", "smollm2/../../x:1", "..", "a/b/c/d/e:f"]
    if gguf:
        names.append(os.path.abspath(gguf))  # never a path from a request (DESIGN §8)
    cases = []
    for n in names:
        cases.append((f"model {n!r} (generate)", "/api/generate",
                      {"model": n, "prompt": "hi", "stream": False}, FOURXX))
        cases.append((f"model {n!r} (show)", "/api/show", {"model": n}, FOURXX))
    cases.append(("delete ../ name", "/api/delete", {"model": "../../../../tmp/x"}, FOURXX))
    return cases


def check_no_file(status, body):
    text = body if isinstance(body, (bytes, bytearray)) else b""
    return b"root:x:0:0" not in text and b"GGUF" not in text[:8]


def raw_cases(srv, model):
    """(name, function returning (status, body), expectation) for broken HTTP."""
    hp = f"127.0.0.1:{srv.port}"
    ok_body = json.dumps({"model": model, "prompt": "hi", "stream": False}).encode()
    head = (f"POST /api/generate HTTP/1.1\r\nHost: {hp}\r\nContent-Type: application/json\r\n")

    def truncated_then_close():
        data = (head + "Content-Length: 1000\r\n\r\n").encode() + ok_body[:10]
        return send_raw(srv, data, shut_wr=True)

    def truncated_then_wait():
        # the client stalls mid-body: the server may wait, but closing must not hurt it
        with connect(srv, timeout=3) as s:
            s.sendall((head + "Content-Length: 1000\r\n\r\n").encode() + ok_body[:10])
            try:
                return read_response(s, limit=3)
            except socket.timeout:
                return None, "no answer within 3 s (client gave up)"

    def chunked(data):
        return lambda: send_raw(srv, (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + data,
                                shut_wr=True)

    def huge_body():
        return send_huge(srv, head + f"Content-Length: {HUGE_BODY}\r\n\r\n", HUGE_BODY)

    def huge_chunked():
        return send_huge(srv, head + "Transfer-Encoding: chunked\r\n\r\n", HUGE_BODY, chunked=True)

    def header_flood():
        lines = "".join(f"X-Flood-{i}: {'v' * 90}\r\n" for i in range(20000))
        return send_raw(srv, (f"GET /api/version HTTP/1.1\r\nHost: {hp}\r\n" + lines +
                              "\r\n").encode(), method="GET")

    def huge_header():
        return send_raw(srv, (f"GET /api/version HTTP/1.1\r\nHost: {hp}\r\nX-Big: "
                              + "a" * (4 * 1024 * 1024) + "\r\n\r\n").encode(), method="GET")

    def huge_url():
        return send_raw(srv, (f"GET /api/{'a' * (2 * 1024 * 1024)} HTTP/1.1\r\nHost: {hp}\r\n\r\n"
                              ).encode(), method="GET")

    return [
        ("Content-Length larger than the body, then close", truncated_then_close, FOURXX_OR_DROP),
        ("Content-Length larger than the body, client stalls", truncated_then_wait,
         FOURXX_OR_DROP),
        ("chunked: bad chunk size", chunked(b"ZZZ\r\nxx\r\n0\r\n\r\n"), FOURXX_OR_DROP),
        ("chunked: size larger than data, then close", chunked(b"ffff\r\n{\"model\"\r\n"),
         FOURXX_OR_DROP),
        ("chunked: missing CRLF", chunked(b"5\r\nabcdefgh0\r\n\r\n"), FOURXX_OR_DROP),
        ("chunked: huge size", chunked(b"ffffffffffffffffffff\r\nab\r\n"), FOURXX_OR_DROP),
        ("Content-Length: -5", lambda: send_raw(srv, (head + "Content-Length: -5\r\n\r\n{}")
                                                .encode(), shut_wr=True), FOURXX_OR_DROP),
        ("Content-Length: abc", lambda: send_raw(srv, (head + "Content-Length: abc\r\n\r\n{}")
                                                 .encode(), shut_wr=True), FOURXX_OR_DROP),
        ("Content-Length twice, different", lambda: send_raw(
            srv, (head + "Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}").encode(),
            shut_wr=True), FOURXX_OR_DROP),
        ("100 MB body (Content-Length)", huge_body, "413"),
        ("100 MB body (chunked)", huge_chunked, "413"),
        ("20000 headers", header_flood, FOURXX_OR_DROP),
        ("a 4 MB header", huge_header, FOURXX_OR_DROP),
        ("a 2 MB URL", huge_url, FOURXX_OR_DROP),
        ("no Host header (HTTP/1.1)", lambda: send_raw(
            srv, b"GET /api/version HTTP/1.1\r\nConnection: close\r\n\r\n", method="GET"),
         FOURXX),
        ("garbage request line", lambda: send_raw(srv, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc"
                                                  b"\x03\x03garbage\r\n\r\n", shut_wr=True),
         FOURXX_OR_DROP),
        ("NUL byte in the path", lambda: send_raw(
            srv, f"GET /api/vers\x00ion HTTP/1.1\r\nHost: {hp}\r\n\r\n".encode(), method="GET",
            shut_wr=True), FOURXX_OR_DROP),
        ("path traversal in the URL", lambda: send_raw(
            srv, f"GET /../../../../etc/passwd HTTP/1.1\r\nHost: {hp}\r\nConnection: close\r\n\r\n"
            .encode(), method="GET"), FOURXX_OR_DROP),
        ("encoded traversal in a blob digest", lambda: send_raw(
            srv, f"HEAD /api/blobs/sha256:..%2F..%2F..%2Fetc%2Fpasswd HTTP/1.1\r\nHost: {hp}\r\n"
            "Connection: close\r\n\r\n".encode(), method="HEAD"), FOURXX),
        ("traversal in a blob upload", lambda: send_raw(
            srv, request_bytes("POST", "/api/blobs/sha256:../../../../tmp/promeserve-x",
                               b"hello", host=hp)), FOURXX),
    ]


def send_huge(srv, head, total, chunked=False):
    """Sends a head announcing `total` bytes and then body data while watching for an early
    answer. Returns (status, info) where info says how much was sent before the answer."""
    s = connect(srv, timeout=10)   # a server that stops reading stalls our sends: 10 s, then
    sent = 0                        # we stop sending and read its answer
    block = b"x" * (64 << 10)
    try:
        s.sendall(head.encode())
        deadline = time.time() + CASE_TIMEOUT
        while sent < total and time.time() < deadline:
            r, _, _ = select.select([s], [], [], 0 if sent else 0.5)
            if r:
                break
            piece = block if not chunked else b"%x\r\n" % len(block) + block + b"\r\n"
            s.sendall(piece)
            sent += len(block)
        if chunked and sent >= total:
            s.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    status, body = read_response(s)
    s.close()
    # the server took it all in instead of answering or dropping early; but a chunked body has
    # no length to refuse up front, so the server drops it as it comes (no memory) and answers
    # 413 at its end, whatever its length
    if sent >= total and not (chunked and status == 413):
        status = "read all"
    return status, f"after {sent / (1 << 20):.1f} MiB of {total >> 20} sent; " + (
        body.decode("utf-8", "replace")[:200] if isinstance(body, bytes) else str(body))


def judge(status, expect):
    if expect == "413":
        return status == 413
    if expect == FOURXX:
        return status is not None and 400 <= status < 500
    if expect == FOURXX_OR_DROP:
        return status is None or 400 <= status < 500
    if expect == NOT_5XX:
        return status is not None and status < 500
    raise ValueError(expect)


def valid_json_reply(status, body):
    """A 2xx JSON reply must be valid UTF-8 JSON (no raw bytes from a malformed prompt)."""
    if status is None or not 200 <= status < 300 or not isinstance(body, bytes) or not body:
        return True
    try:
        for line in body.decode("utf-8").splitlines():   # one object, or NDJSON lines
            if line.strip():
                json.loads(line)
        return True
    except (UnicodeDecodeError, ValueError):
        return False


# ---- slowloris -----------------------------------------------------------------------------------

def slowloris(srv, limit, results):
    """Opens SLOWLORIS_CONNS connections and trickles a request's headers one byte per second
    into each; records for each whether and when the server dropped it."""
    hp = f"127.0.0.1:{srv.port}"
    text = (f"POST /api/generate HTTP/1.1\r\nHost: {hp}\r\nContent-Type: application/json\r\n" +
            "".join(f"X-Slow-{i}: {'z' * 50}\r\n" for i in range(100))).encode()
    socks = []
    for _ in range(SLOWLORIS_CONNS):
        try:
            socks.append(connect(srv, timeout=5))
        except OSError as e:
            results.append(("connect failed", str(e)))
    start = time.time()
    alive = {id(s): s for s in socks}
    pos = 0
    while alive and time.time() - start < limit:
        for key, s in list(alive.items()):
            try:
                s.sendall(text[pos % len(text):pos % len(text) + 1])
                r, _, _ = select.select([s], [], [], 0)
                if r and not s.recv(4096, socket.MSG_PEEK):
                    raise ConnectionResetError("closed")
                if r:   # an answer (408 and close is fine); wait for the close
                    s.recv(4096)
            except OSError:
                results.append(("dropped", time.time() - start))
                s.close()
                del alive[key]
        pos += 1
        time.sleep(1.0)
    for s in alive.values():
        results.append(("still open", time.time() - start))
        s.close()


# ---- server start / model ------------------------------------------------------------------------

def find_gguf(arg):
    if arg:
        return arg if os.path.isfile(arg) else None
    # $PT_MODELS_DIR: ctest sets it from the CMake variable PT_MODELS_DIR (`make models`)
    d = os.environ.get("PT_MODELS_DIR")
    if d and os.path.isfile(os.path.join(d, MODEL_FILE)):
        return os.path.join(d, MODEL_FILE)
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary, tmpdir):
    port = free_port()
    env = dict(os.environ, OLLAMA_HOST=f"127.0.0.1:{port}",
               OLLAMA_MODELS=os.path.join(tmpdir, "store"), OLLAMA_NUM_PARALLEL="2",
               OLLAMA_CONTEXT_LENGTH="2048")
    os.makedirs(env["OLLAMA_MODELS"])
    srv = Server("127.0.0.1", port)
    srv.log = open(os.path.join(tmpdir, "server.log"), "w+b")
    srv.proc = subprocess.Popen([binary, "serve"], env=env, stdout=srv.log,
                                stderr=subprocess.STDOUT)
    for _ in range(120):
        if srv.proc.poll() is not None:
            break
        if version_ok(srv):
            return srv
        time.sleep(0.5)
    raise RuntimeError("promeserve serve did not answer GET /api/version within 60 s:\n" +
                       server_log(srv))


def server_log(srv, n=40):
    if not srv.log:
        return ""
    srv.log.flush()
    srv.log.seek(0)
    lines = srv.log.read().decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-n:])


def create_model(srv, gguf, name):
    h = hashlib.sha256()
    with open(gguf, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = "sha256:" + h.hexdigest()
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=300)
    with open(gguf, "rb") as f:
        c.request("POST", f"/api/blobs/{digest}", body=f,
                  headers={"Content-Length": str(os.path.getsize(gguf))})
        r = c.getresponse()
        r.read()
    if r.status not in (200, 201):
        return f"blob upload answered {r.status}"
    c.request("POST", "/api/create", body=json.dumps(
        {"model": name, "files": {os.path.basename(gguf): digest}, "stream": False}))
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        return f"/api/create answered {r.status}: {body[:200]!r}"
    return None


# ---- main ----------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", help="promeserve binary to start")
    ap.add_argument("--url", help="a running server instead")
    ap.add_argument("--gguf", help="the model to create (--bin)")
    ap.add_argument("--model", default="smollm2:135m", help="the model name to use")
    ap.add_argument("--slowloris-seconds", type=float, default=120,
                    help="how long the trickled connections may stay open")
    ap.add_argument("--only", help="run only cases whose name contains this")
    args = ap.parse_args()
    if not args.bin and not args.url:
        ap.error("--bin or --url is needed")

    tmpdir = tempfile.mkdtemp(prefix="promeserve-malformed-")
    if args.url:
        u = urllib.parse.urlsplit(args.url)
        srv = Server(u.hostname, u.port or 80)
        gguf = None
        if not version_ok(srv):
            print(f"FAIL: {args.url} does not answer GET /api/version")
            return 1
    else:
        srv = start_server(args.bin, tmpdir)
        gguf = find_gguf(args.gguf)
        if not gguf:
            print(f"FAIL: {MODEL_FILE} is not in PT_MODELS_DIR (or --gguf): run `make models`")
            return 1
        why = create_model(srv, gguf, args.model)
        if why:
            print(f"NOTE: no model in the store ({why}): the cases behind a valid model name "
                  "meet a 404 instead of reaching option parsing")

    failures = []
    loris = []
    loris_thread = None
    if not args.only or "slowloris" in args.only:
        loris_thread = threading.Thread(target=slowloris, args=(srv, args.slowloris_seconds,
                                                                loris), daemon=True)
        loris_thread.start()
        time.sleep(2)
        if not version_ok(srv):
            failures.append("slowloris: GET /api/version not served while "
                            f"{SLOWLORIS_CONNS} connections trickle headers")

    cases = [(n, (lambda p=p, b=b: post(srv, p, b)), e) for n, p, b, e in
             json_cases(args.model) + traversal_cases(args.model, gguf)]
    cases += raw_cases(srv, args.model)
    n_run = 0
    for name, fn, expect in cases:
        if args.only and args.only not in name:
            continue
        n_run += 1
        before = len(failures)
        t0 = time.time()
        try:
            status, body = fn()
        except socket.timeout:
            status, body = "hang", f"no answer within {CASE_TIMEOUT:.0f} s"
        except OSError as e:
            status, body = "error", f"{type(e).__name__}: {e}"
        took = time.time() - t0
        shown = body[:160] if isinstance(body, bytes) else body
        if status in ("hang", "error", "read all") or not judge(status, expect):
            failures.append(f"{name}: got {status}, expected {expect} ({shown!r})")
        elif not valid_json_reply(status, body):
            failures.append(f"{name}: a {status} reply that is not valid UTF-8 JSON ({shown!r})")
        elif isinstance(body, bytes) and not check_no_file(status, body):
            failures.append(f"{name}: the reply holds a file's contents")
        if not srv.alive():
            failures.append(f"{name}: the server died (exit {srv.proc.returncode})")
            print(server_log(srv))
            break
        if not version_ok(srv):
            failures.append(f"{name}: GET /api/version fails afterwards")
        if "traversal in a blob upload" in name and os.path.exists("/tmp/promeserve-x"):
            failures.append(f"{name}: the upload was written to /tmp/promeserve-x")
        note = f"; {body[:60]}" if isinstance(body, str) and "MiB" in body else ""
        verdict = "ok  " if len(failures) == before else "FAIL"
        print(f"{verdict} {name}: {status} ({took:.1f} s{note})")
        sys.stdout.flush()

    if loris_thread is not None and srv.alive():
        loris_thread.join(args.slowloris_seconds + 30)
        dropped = [t for what, t in loris if what == "dropped"]
        still = [t for what, t in loris if what != "dropped"]
        if still:
            failures.append(f"slowloris: {len(still)} of {SLOWLORIS_CONNS} connections trickling "
                            f"headers at 1 byte/s still open after {args.slowloris_seconds:.0f} s")
        else:
            print(f"ok   slowloris: all {len(dropped)} connections dropped by the server after "
                  f"{min(dropped):.0f}-{max(dropped):.0f} s")
        if not version_ok(srv):
            failures.append("slowloris: GET /api/version fails afterwards")

    if srv.proc is not None:
        srv.proc.terminate()
        try:
            rc = srv.proc.wait(30)
            if rc != 0:
                failures.append(f"promeserve exited {rc} after SIGTERM")
        except subprocess.TimeoutExpired:
            srv.proc.kill()
            failures.append("promeserve did not stop within 30 s of SIGTERM")
        if failures:
            print("--- server log (last lines):\n" + server_log(srv))
    shutil.rmtree(tmpdir, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print(f"{n_run + (1 if loris_thread else 0) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
