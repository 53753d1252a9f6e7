#!/usr/bin/env python3
"""promeserve under hostile or odd clients (issue 14, item 4), end to end with the standard
library only (run by ctest; see tools/CMakeLists.txt).

    check_hostile.py PROMESERVE [FIXTURES_DIR]

Checks, against `promeserve serve` over a temporary store with the tiny qwen3 fixture model:
  names with a NUL (\\u0000) or invalid UTF-8 are refused with 400 and touch nothing (a delete
  of "victim\\u0000 other" must not delete "victim"); every JSON reply is valid UTF-8 (raw
  invalid bytes in a system prompt come back as U+FFFD, as Go's encoding/json decodes them);
  lone surrogate escapes become U+FFFD while pairs stay; the last of duplicate keys wins, and
  keys match fields case-insensitively as Go decodes them ({"Model": ...} is model);
  temporary files of interrupted uploads and creates (older than an hour) are removed when the
  server starts; browser-extension origins only when OLLAMA_ORIGINS lists them; "adapters" in
  /api/create is 400; numbers in show's parameters and Modelfile print as Go's %v does (top_k
  40, 1e+06); a chunked body far over --max-body (40 MB) gets 413 and costs no memory;
  /api/ps and /api/tags agree on parameter_size; unloading a model (keep_alive 0) gives its
  memory back (VmRSS); /v1 errors (401, 404, 405) use OpenAI's error object (401 with
  --api-key too).
Prints "N passed, M failed"; exits 1 on a failure, 77 when the binary or fixture is missing.
"""
import hashlib
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import sys
import tempfile
import time

from srvtest import ServerProcess, check, failed, find_model, summary

GGUF = None  # the tiny qwen3 fixture (main)


def call(port, method, path, body=None, headers=None, timeout=60):
    """(status, headers, raw bytes); body: bytes as they are, or an object as JSON."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


def strict_json(data):
    """The reply as JSON decoded strictly as UTF-8 (None when it is not valid UTF-8 JSON)."""
    try:
        return json.loads(data.decode("utf-8", "strict"))
    except (UnicodeDecodeError, ValueError):
        return None


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def create(port, name, digest, **extra):
    body = dict({"model": name, "files": {"m.gguf": digest}, "stream": False}, **extra)
    return call(port, "POST", "/api/create", body)


def show(port, name):
    st, _, d = call(port, "POST", "/api/show", {"model": name})
    return st, strict_json(d)


def check_names(port, digest):
    for n in ("victim", "victim2"):
        check(create(port, n, digest)[0] == 200, "create %s" % n)
    # an escaped NUL: cJSON would stop the string there and delete "victim2"
    st, _, d = call(port, "DELETE", "/api/delete", b'{"model":"victim2\\u0000 other"}')
    check(st == 400, "delete of a name with \\u0000 is 400 (%d %r)" % (st, d))
    check(show(port, "victim2")[0] == 200, "victim2 survives the NUL name")
    st, _, d = call(port, "DELETE", "/api/delete", b'{"model":"victim\xff"}')
    check(st == 400 and strict_json(d) is not None,
          "delete of a name with invalid UTF-8 is 400, valid UTF-8 JSON (%d %r)" % (st, d))
    check(show(port, "victim")[0] == 200, "victim survives the invalid UTF-8 name")
    st, _, d = call(port, "POST", "/api/show", b'{"model":"tiny\xc0\xaf"}')
    check(st == 400 and strict_json(d) is not None,
          "show of an invalid UTF-8 name: 400 with valid UTF-8 (%d %r)" % (st, d))
    st, _, d = call(port, "POST", "/api/copy", b'{"source":"victim","destination":"a\\u0000b"}')
    check(st == 400, "copy to a name with \\u0000 is 400 (%d %r)" % (st, d))


def check_strings(port, digest):
    # raw invalid bytes in a string: Go decodes each as U+FFFD; the reply is valid UTF-8
    body = b'{"model":"u1","files":{"m.gguf":"' + digest.encode() + \
        b'"},"system":"a\xffb\xe2\x82c","stream":false}'
    st, _, d = call(port, "POST", "/api/create", body)
    check(st == 200, "create with invalid UTF-8 in system (%d %r)" % (st, d))
    st, j = show(port, "u1")
    check(st == 200 and j is not None and j.get("system") == "a\ufffdb\ufffd\ufffdc",
          "invalid UTF-8 bytes come back as U+FFFD, valid UTF-8 (%d %r)" % (st, j))
    # bytes that are not UTF-8 in a model file's metadata (tokenizer.ggml.pre): sent as U+FFFD
    gguf = bytearray(open(GGUF, "rb").read())
    at = gguf.find(b"qwen2", gguf.find(b"tokenizer.ggml.pre"))
    gguf[at + 2] = 0xFF
    bad = "sha256:" + hashlib.sha256(bytes(gguf)).hexdigest()
    check(call(port, "POST", "/api/blobs/" + bad, bytes(gguf))[0] == 201, "blob with a bad name")
    check(create(port, "badmeta", bad)[0] == 200, "create from a GGUF with bad UTF-8 metadata")
    st, j = show(port, "badmeta")
    name = ((j or {}).get("model_info") or {}).get("tokenizer.ggml.pre", "")
    check(st == 200 and j is not None and name == "qw\ufffdn2",
          "show of non-UTF-8 metadata is valid UTF-8 JSON with U+FFFD (%d %r)" % (st, name))
    # lone surrogates become U+FFFD, a pair stays one character
    body = ('{"model":"u2","files":{"m.gguf":"%s"},"stream":false,'
            '"system":"x\\ud800y\\udc00z\\ud83d\\ude00w\\ud800"}' % digest).encode()
    st, _, d = call(port, "POST", "/api/create", body)
    check(st == 200, "create with lone surrogates (%d %r)" % (st, d))
    st, j = show(port, "u2")
    check(st == 200 and j is not None and j.get("system") == "x\ufffdy\ufffdz\U0001F600w\ufffd",
          "lone surrogates are U+FFFD, pairs kept (%r)" % (j or {}).get("system"))
    # duplicate keys: the last one wins (Go), not the first (cJSON)
    st, _, d = call(port, "POST", "/api/show", b'{"model":"nope","model":"u2"}')
    check(st == 200, "duplicate key: the last wins (%d %r)" % (st, d))
    st, _, d = call(port, "POST", "/api/show", b'{"model":"u2","x":{"k":1,"k":[2]},"model":"nope"}')
    check(st == 404, "duplicate key: the last wins, nested objects too (%d %r)" % (st, d))
    # keys match fields case-insensitively, as Go decodes into Ollama's structs
    st, _, d = call(port, "POST", "/api/show", b'{"Model":"u2"}')
    check(st == 200, "\"Model\" is model (%d %r)" % (st, d[:120]))
    st, _, d = call(port, "POST", "/api/show", b'{"MODEL":"nope","model":"u2"}')
    check(st == 200, "keys differing in case: the last wins (%d %r)" % (st, d[:120]))
    st, _, d = call(port, "POST", "/api/show", b'{"model":"u2","MoDeL":"nope"}')
    check(st == 404, "keys differing in case: the last wins, exact or not (%d %r)" % (st, d[:120]))
    st, _, d = call(port, "DELETE", "/api/delete", b'{"Name":"u2\\u0000 x"}')
    check(st == 400 and show(port, "u2")[0] == 200,
          "a NUL in a folded name key is refused too, nothing deleted (%d %r)" % (st, d[:120]))
    # Go's Unicode simple folding: U+017F (long s) is s, U+212A (Kelvin) is K; nested structs
    # (messages) fold too; a map's keys (files) stay as sent
    body = ('{"MODEL":"fold1","Files":{"M.gguf":"%s"},"\u017fystem":"folded","Stream":false,'
            '"Messages":[{"ROLE":"user","Content":"hi"}]}' % digest).encode()
    st, h, d = call(port, "POST", "/api/create", body)
    check(st == 200 and strict_json(d) == {"status": "success"},
          "create with folded keys, not streamed (%d %r)" % (st, d[:200]))
    st, j = show(port, "fold1")
    check(st == 200 and (j or {}).get("system") == "folded" and
          (j or {}).get("messages") == [{"role": "user", "content": "hi"}],
          "folded keys reach their fields: system, messages (%d %r)" % (st, j and
                                                                         j.get("messages")))
    st, _, d = call(port, "POST", "/api/show", '{"model":"fold1","verbose":true,'
                    '"\u212a":1}'.encode())
    check(st == 200, "an unknown folded key is ignored (%d)" % st)


def check_create_fields(port, digest):
    st, _, d = create(port, "ad", digest, adapters={"a.gguf": "sha256:" + "1" * 64})
    j = strict_json(d) or {}
    check(st == 400 and "adapter" in str(j.get("error", "")),
          "adapters in create: 400 (%d %r)" % (st, d))
    check(show(port, "ad")[0] == 404, "no model made from a refused adapters create")
    params = {"top_k": 40, "temperature": 0.5, "seed": 1000000, "num_predict": 123456,
              "top_p": 0.0001, "min_p": 0.00001}
    st, _, d = create(port, "nums", digest, parameters=params)
    check(st == 200, "create with parameters (%d %r)" % (st, d))
    st, j = show(port, "nums")
    text = (j or {}).get("parameters", "")
    want = {"top_k": "40", "temperature": "0.5", "seed": "1e+06", "num_predict": "123456",
            "top_p": "0.0001", "min_p": "1e-05"}
    for k, v in want.items():
        check(re.search(r"(?m)^%s +%s$" % (k, re.escape(v)), text) is not None,
              "show parameters: %s %s, as Go's %%v (%r)" % (k, v, text))
        check("PARAMETER %s %s\n" % (k, v) in (j or {}).get("modelfile", ""),
              "Modelfile: PARAMETER %s %s" % (k, v))


def chunked_post(port, path, total, piece=65536):
    """POSTs total bytes chunked, watching for an early answer as curl does (a server that
    refuses the body answers and stops reading); (status, body), or (-1, why) when the
    connection was dropped without an answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
               "Transfer-Encoding: chunked\r\n\r\n" % (path, port)).encode())
    sent = 0
    try:
        while sent < total:
            if select.select([s], [], [], 0)[0]:
                break  # an early answer
            s.sendall(b"%x\r\n%s\r\n" % (piece, b" " * piece))
            sent += piece
        else:
            s.sendall(b"0\r\n\r\n")
    except OSError:
        pass
    data = b""
    try:
        while True:
            got = s.recv(65536)
            if not got:
                break
            data += got
            if b"\r\n\r\n" in data and data.split(b"\r\n\r\n", 1)[1].endswith(b"}"):
                break
    except OSError as ex:
        if not data:
            return -1, str(ex).encode()
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    return (int(m.group(1)), data) if m else (-1, data or b"no answer")


def check_body_limit(port, pid):
    st, d = chunked_post(port, "/api/show", 8 << 20)
    check(st == 413, "a chunked body 8 MB over --max-body 64K gets 413 (%d %r)" % (st, d[:200]))
    check(call(port, "GET", "/")[0] == 200, "still serving after the chunked 413")
    # however far past the limit: the rest is dropped, not kept (it used to be cut 16 MiB past
    # the limit, and the client saw the connection close instead of the 413)
    hwm = vm_kb(pid, "VmHWM")
    st, d = chunked_post(port, "/api/show", 40 << 20)
    grown = vm_kb(pid, "VmHWM") - hwm
    check(st == 413, "a chunked body 40 MB over --max-body 64K gets 413 (%d %r)" % (st, d[:200]))
    check(grown < 8192, "and the server's peak RSS does not grow with it (%d kB)" % grown)
    check(call(port, "GET", "/")[0] == 200, "still serving after the 40 MB chunked 413")


def check_embed_limit(port, digest):
    """One /api/embed may hold 64 times --max-body in vectors: with 64K, 4 MiB, 4096 of the
    tiny model's 256-dim vectors. 5000 one-letter inputs (a 20 KB body) are refused with 413
    saying so, not computed into an unbounded buffer; 4000 are answered."""
    check(create(port, "embedlim", digest)[0] == 200, "create embedlim")
    st, _, d = call(port, "POST", "/api/embed", {"model": "embedlim", "input": ["a"] * 5000},
                    timeout=300)
    j = strict_json(d) or {}
    check(st == 413 and "limit" in j.get("error", ""),
          "5000 embeddings of 256 values over a 64K body limit get 413 (%d %r)" % (st, d[:300]))
    st, _, d = call(port, "POST", "/api/embed", {"model": "embedlim", "input": ["a"] * 4000},
                    timeout=300)
    j = strict_json(d) or {}
    check(st == 200 and len(j.get("embeddings", [])) == 4000,
          "4000 embeddings under the limit are answered (%d %r)" % (st, d[:200]))


def check_openai_errors(port):
    for method, path, want in (("GET", "/v1/models/nope", 404),
                               ("POST", "/v1/chat/completions", 400),
                               ("GET", "/v1/chat/completions", 405),
                               ("GET", "/v1/nothing-here", 404)):
        st, _, d = call(port, method, path)
        e = (strict_json(d) or {}).get("error") if d else None
        check(st == want and isinstance(e, dict) and isinstance(e.get("message"), str) and
              isinstance(e.get("type"), str) and "param" in e and "code" in e,
              "%s %s: %d with OpenAI's error object (%d %r)" % (method, path, want, st, d))


def check_origins(binary, store):
    ext = "chrome-extension://abcdefgh"
    srv = ServerProcess(binary, ["--quiet"], store=store)
    try:
        st, h, _ = call(srv.port, "GET", "/api/version", headers={"Origin": ext})
        check(st == 403, "a browser-extension origin is refused by default (%d)" % st)
        st, h, _ = call(srv.port, "GET", "/api/version", headers={"Origin": "app://x"})
        check(st == 200, "app:// is allowed by default (%d)" % st)
    finally:
        srv.end(signal.SIGTERM, 15)
    srv = ServerProcess(binary, ["--quiet"], store=store,
                        env_extra={"OLLAMA_ORIGINS": "chrome-extension://*"})
    try:
        st, h, _ = call(srv.port, "GET", "/api/version", headers={"Origin": ext})
        check(st == 200 and h.get("access-control-allow-origin") == ext,
              "an extension origin listed in OLLAMA_ORIGINS is allowed (%d %s)" % (st, h))
        st, h, _ = call(srv.port, "GET", "/api/version", headers={"Origin": "moz-extension://q"})
        check(st == 403, "an extension origin not listed stays refused (%d)" % st)
    finally:
        srv.end(signal.SIGTERM, 15)


def check_api_key_errors(binary, store):
    srv = ServerProcess(binary, ["--quiet", "--api-key", "sekrit"], store=store)
    try:
        st, _, d = call(srv.port, "GET", "/v1/models")
        e = (strict_json(d) or {}).get("error")
        check(st == 401 and isinstance(e, dict) and e.get("message") == "unauthorized" and
              "param" in e and "code" in e, "/v1 401 is OpenAI's error object (%d %r)" % (st, d))
        st, _, d = call(srv.port, "GET", "/api/tags")
        check(st == 401 and strict_json(d) == {"error": "unauthorized"},
              "/api 401 stays Ollama's (%d %r)" % (st, d))
    finally:
        srv.end(signal.SIGTERM, 15)


def check_prune(binary, store):
    """Leftovers of an interrupted upload and create older than an hour are gone once the
    server started; a recent one stays (Ollama's layerPruneGracePeriod)."""
    blobs = os.path.join(store, "blobs")
    mdir = os.path.join(store, "manifests", "registry.ollama.ai", "library", "tiny")
    os.makedirs(blobs, exist_ok=True)
    os.makedirs(mdir, exist_ok=True)
    junk = [os.path.join(blobs, ".upload-Ab12Cd"), os.path.join(blobs, "upload-Xy34Zw"),
            os.path.join(blobs, ".sha256-%s.tmp-123-0" % ("a" * 64)),
            os.path.join(mdir, ".latest.tmp-123-4")]
    old = time.time() - 2 * 3600  # past the prune's hour of grace
    for p in junk:
        with open(p, "wb") as f:
            f.write(b"partial")
        os.utime(p, (old, old))
    recent = os.path.join(blobs, ".upload-Recent")  # maybe another process's upload
    with open(recent, "wb") as f:
        f.write(b"partial")
    keep = [p for p in os.listdir(blobs) if p.startswith("sha256-")]
    srv = ServerProcess(binary, ["--quiet"], store=store)
    try:
        for p in junk:
            check(not os.path.exists(p), "leftover %s removed at start" % os.path.basename(p))
        check(os.path.exists(recent), "a leftover younger than an hour stays")
        check(all(os.path.exists(os.path.join(blobs, p)) for p in keep), "blobs are kept")
        check(show(srv.port, "victim")[0] == 200, "models still there after the prune")
    finally:
        srv.end(signal.SIGTERM, 15)


def vm_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_kb(pid):
    return vm_kb(pid, "VmRSS")


def check_ps_and_unload(port, pid, name):
    base = rss_kb(pid)
    st, _, d = call(port, "POST", "/api/generate", {"model": name, "prompt": "hi",
                                                    "stream": False, "keep_alive": -1,
                                                    "options": {"num_predict": 2}}, timeout=300)
    check(st == 200, "generate loads %s (%d %r)" % (name, st, d[:200]))
    loaded = rss_kb(pid)
    _, _, d = call(port, "GET", "/api/ps")
    ps = [m for m in (strict_json(d) or {}).get("models", []) if m.get("name") == name]
    _, _, d = call(port, "GET", "/api/tags")
    tags = [m for m in (strict_json(d) or {}).get("models", []) if m.get("name") == name]
    _, j = show(port, name)
    if check(ps and tags, "%s in /api/ps and /api/tags" % name):
        a = ps[0]["details"]["parameter_size"]
        b = tags[0]["details"]["parameter_size"]
        c = ((j or {}).get("details") or {}).get("parameter_size")
        check(a == b == c and a, "parameter_size agrees: ps %r tags %r show %r" % (a, b, c))
    call(port, "POST", "/api/generate", {"model": name, "keep_alive": 0})
    deadline = time.time() + 10
    while time.time() < deadline:
        _, _, d = call(port, "GET", "/api/ps")
        if not (strict_json(d) or {}).get("models"):
            break
        time.sleep(0.1)
    time.sleep(0.3)
    after = rss_kb(pid)
    grown = loaded - base
    check(grown > 20000, "loading grew the RSS (%d kB -> %d kB)" % (base, loaded))
    # AddressSanitizer's allocator keeps freed memory in quarantine and never trims it, so the
    # figure means something only in an ordinary build (ctest sets PT_SANITIZE in an ASan one)
    if os.environ.get("PT_SANITIZE") == "1":
        print("RSS after unload not checked: AddressSanitizer build")
    else:
        check(after - base < grown * 0.25,
              "unloading gives the memory back: RSS %d kB before, %d kB loaded, %d kB after"
              % (base, loaded, after))
    print("RSS kB: before load %d, loaded %d, after unload %d" % (base, loaded, after))


def main():
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print("usage: check_hostile.py PROMESERVE [FIXTURES_DIR]; binary missing")
        return 77
    binary = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    # the real models of the checkout (data/models), wherever ctest runs from
    os.environ.setdefault("PT_MODELS_DIR", os.path.join(here, "..", "..", "data", "models"))
    fixtures = os.path.join(sys.argv[2] if len(sys.argv) > 2 else
                            os.path.join(here, "..", "fixtures"), "llm", "tiny")
    global GGUF
    gguf = GGUF = os.path.join(fixtures, "qwen3-q8_0.gguf")
    if not os.path.exists(gguf):
        print("skip: no fixture", gguf)
        return 77
    store = tempfile.mkdtemp(prefix="ps-hostile-")
    srv = ServerProcess(binary, ["--quiet", "--max-body", "64K"], store=store)
    try:
        port = srv.port
        with open(gguf, "rb") as f:
            data = f.read()
        digest = "sha256:" + sha256_file(gguf)
        check(call(port, "POST", "/api/blobs/" + digest, data)[0] == 201, "blob upload")
        check_names(port, digest)
        check_strings(port, digest)
        check_create_fields(port, digest)
        check_body_limit(port, srv.proc.pid)
        check_embed_limit(port, digest)
        check_openai_errors(port)
        smol = find_model("SmolLM2-135M-Instruct.Q4_1.gguf")
        if smol:
            with open(smol, "rb") as f:
                sd = "sha256:" + hashlib.sha256(f.read()).hexdigest()
            call(port, "POST", "/api/blobs/" + sd, open(smol, "rb").read())
            check(create(port, "smol", sd)[0] == 200, "create smol")
            check_ps_and_unload(port, srv.proc.pid, "smol:latest")
        else:
            print("skip: the RSS check needs SmolLM2-135M-Instruct.Q4_1.gguf")
    finally:
        srv.end(signal.SIGTERM, 15)
    try:
        check_prune(binary, store)
        check_origins(binary, store)
        check_api_key_errors(binary, store)
    finally:
        shutil.rmtree(store, ignore_errors=True)
    if not failed():
        os.unlink(srv.errf.name)
    else:
        print("server log:", srv.errf.name)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
