#!/usr/bin/env python3
"""promeserve's chat page (GET / for browsers) driven in headless Chromium.

Starts `promeserve serve` on a free loopback port with a model given on the command line,
starts `chromium --headless=new` and drives it over the Chrome DevTools Protocol with the small
WebSocket client below (standard library only). Checks: GET / gives the embedded
chat_page.html to browsers and "Ollama is running" to others; the model picker lists
/api/tags; settings typed into the page (temperature, seed, max tokens, system prompt) are
kept and sent; Enter sends and Shift+Enter does not; the streamed answer equals a direct
/api/chat answer with the same messages and options; the whole conversation goes with each
turn; tokens/s and token counts come from the final chunk; Stop aborts a streaming answer;
the conversation survives a reload and New chat clears it; errors (an unknown model's 404, an
error line mid-stream) are shown; model and user text never becomes HTML; with --api-key the
page asks for the key and sends it as a Bearer token; no console errors or exceptions.

    check_chat_page.py [--server build/bin/promeserve] [--model M.gguf] [--screenshot PNG]
                       [--url http://127.0.0.1:PORT [--key KEY]]  (a server that already runs)

--screenshot PATH only has a short exchange and saves a 1100x800 PNG of the page (docs/).
Exit 0 pass, 1 fail, 77 skipped (no chromium, no server binary, no model).
"""
import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE_FILE = os.path.join(REPO, "src", "serve", "http", "chat_page.html")
WIDTH, HEIGHT = 1100, 800


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    print("ok:", what.split("\n")[0][:150])


# ---- a minimal RFC 6455 WebSocket client (text frames, client-to-server masking) -----------

class WebSocket:
    def __init__(self, url, timeout=30):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + ("?" + u.query if u.query else "")
        req = (f"GET {path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise Failure("WebSocket handshake: connection closed")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if " 101 " not in lines[0] + " ":
            raise Failure("WebSocket handshake refused: " + lines[0])
        want = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        accept = [l.split(":", 1)[1].strip() for l in lines[1:]
                  if l.lower().startswith("sec-websocket-accept:")]
        if accept != [want]:
            raise Failure("WebSocket handshake: wrong Sec-WebSocket-Accept")

    def _send_frame(self, opcode, payload):
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + body)

    def send_text(self, text):
        self._send_frame(0x1, text.encode())

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Failure("DevTools connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv_text(self, timeout):
        """The next text message, or None when none came within timeout seconds."""
        self.sock.settimeout(timeout)
        message = b""
        try:
            while True:
                b0, b1 = self._read(2)
                n = b1 & 0x7F
                if n == 126:
                    n = struct.unpack(">H", self._read(2))[0]
                elif n == 127:
                    n = struct.unpack(">Q", self._read(8))[0]
                mask = self._read(4) if b1 & 0x80 else None
                payload = self._read(n)
                if mask:
                    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                opcode = b0 & 0x0F
                if opcode == 0x8:
                    raise Failure("DevTools closed the WebSocket")
                if opcode == 0x9:
                    self._send_frame(0xA, payload)
                    continue
                if opcode in (0x0, 0x1, 0x2):
                    message += payload
                    if b0 & 0x80:
                        return message.decode()
        except socket.timeout:
            if message:
                raise Failure("DevTools sent half a message")
            return None

    def close(self):
        try:
            self._send_frame(0x8, b"")
            self.sock.close()
        except OSError:
            pass


# ---- Chrome DevTools Protocol over it -------------------------------------------------------

class Cdp:
    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.events = []

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send_text(json.dumps({"id": my_id, "method": method, "params": params or {}}))
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = self.ws.recv_text(max(0.05, deadline - time.time()))
            if text is None:
                break
            msg = json.loads(text)
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise Failure(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise Failure(f"{method}: no answer in {timeout} s")

    def evaluate(self, expr, timeout=30):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True}, timeout)
        if "exceptionDetails" in r:
            raise Failure(f"page script failed: {expr[:80]}: "
                          f"{json.dumps(r['exceptionDetails'])[:400]}")
        return r["result"].get("value")

    def wait_for(self, expr, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = self.evaluate(expr)
            if v:
                return v
            time.sleep(0.1)
        raise Failure(f"timed out after {timeout} s waiting for {what}")

    def center_of(self, selector):
        box = self.evaluate(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return null; const r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        if not box:
            raise Failure("no element " + selector)
        return box

    def click(self, selector):
        """A real mouse click at the element's centre (so hidden or covered elements fail)."""
        x, y = self.center_of(selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                   "button": "left", "clickCount": 1})

    def type_into(self, selector, text):
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", {"text": text})

    def key_enter(self, shift=False):
        base = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13,
                "nativeVirtualKeyCode": 13, "modifiers": 8 if shift else 0}
        self.call("Input.dispatchKeyEvent", dict(base, type="keyDown", text="\r"))
        self.call("Input.dispatchKeyEvent", dict(base, type="keyUp"))

    def drain(self, seconds=0.2):
        end = time.time() + seconds
        while time.time() < end:
            text = self.ws.recv_text(max(0.01, end - time.time()))
            if text is None:
                break
            msg = json.loads(text)
            if "method" in msg:
                self.events.append(msg)


# ---- processes --------------------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http(base, path, body=None, headers=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.headers, r.read()


def direct_chat(base, model, messages, options):
    """The answer promeserve streams for these messages, read without the page."""
    _, _, raw = http(base, "/api/chat", {"model": model, "messages": messages,
                                         "options": options, "stream": True})
    text, final = "", None
    try:
        text_all = raw.decode()
    except UnicodeDecodeError as e:
        # not the page's business (its TextDecoder replaces such bytes the same way), but a
        # JSON stream should be UTF-8: say so
        print(f"warning: /api/chat streamed invalid UTF-8 ({e}); compared with U+FFFD")
        text_all = raw.decode(errors="replace")
    for line in text_all.splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        if "error" in obj:
            raise Failure("direct /api/chat: " + obj["error"])
        text += obj.get("message", {}).get("content", "")
        if obj.get("done"):
            final = obj
    if final is None:
        raise Failure("direct /api/chat: no final chunk")
    return text, final


def find_model(arg):
    if arg:
        return arg
    # $PT_MODELS_DIR: ctest sets it from the CMake variable PT_MODELS_DIR (`make models`)
    d = os.environ.get("PT_MODELS_DIR", "")
    p = os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf") if d else ""
    return p if p and os.path.isfile(p) else None


def start_server(binary, model, log_path, extra=()):
    port = free_port()
    env = dict(os.environ, OLLAMA_HOST=f"127.0.0.1:{port}")
    env.pop("OLLAMA_ORIGINS", None)
    log = open(log_path, "wb")
    proc = subprocess.Popen([binary, "serve", *extra, model], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise Failure(f"promeserve serve exited with {proc.returncode}:\n" +
                          open(log_path, errors="replace").read()[-2000:])
        try:
            http(base, "/", timeout=2)
            return proc, base
        except (urllib.error.URLError, ConnectionError, socket.timeout):
            time.sleep(0.2)
    proc.kill()
    raise Failure("promeserve did not answer GET / within 60 s")


def start_chromium(chromium, profile, log_path):
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--no-default-browser-check", "--disable-extensions", "--remote-debugging-port=0",
         f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
         "--force-color-profile=srgb", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 60
    while time.time() < deadline:
        m = re.search(r"DevTools listening on (ws://\S+)", open(log_path, errors="replace").read())
        if m:
            port = urllib.parse.urlparse(m.group(1)).port
            break
        if proc.poll() is not None:
            raise Failure("chromium exited: " + open(log_path, errors="replace").read()[-2000:])
        time.sleep(0.1)
    else:
        proc.kill()
        raise Failure("chromium did not print its DevTools address within 60 s")
    for _ in range(50):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
            pages = [t for t in json.load(r) if t.get("type") == "page"]
        if pages:
            return proc, pages[0]["webSocketDebuggerUrl"]
        time.sleep(0.1)
    raise Failure("chromium has no page target")


# ---- the page's state, read through the DOM ---------------------------------------------------

MESSAGES_JS = """[...document.querySelectorAll('#log .msg')].map(n => ({
    role: n.classList.contains('user') ? 'user' : 'assistant',
    text: n.querySelector('.body').textContent,
    stats: (n.querySelector('.stats') || {}).textContent || '',
    stopped: !!n.querySelector('.stopped'),
    error: (n.querySelector('.error') || {}).textContent || '' }))"""
STORED_JS = "JSON.parse(localStorage.getItem('promeserve.chat') || '[]')"
IDLE_JS = ("document.getElementById('stop').hidden && "
           "!document.getElementById('send').disabled")


LISTED_JS = ("document.readyState === 'complete' && document.getElementById('model') && "
             "document.getElementById('model').dataset.loaded")


def open_page(cdp, base, want="true"):
    cdp.call("Page.navigate", {"url": base + "/"})
    state = cdp.wait_for(LISTED_JS, 60, "the model list")
    if state != want:
        status = cdp.evaluate("document.getElementById('status').textContent")
        raise Failure(f"listing the models: {state} (status line: {status!r})")


def reload_page(cdp):
    cdp.call("Page.reload")
    time.sleep(0.3)
    if cdp.wait_for(LISTED_JS, 60, "the page after a reload") != "true":
        raise Failure("listing the models failed after a reload")


def chat_requests(cdp):
    """Bodies of the POST /api/chat requests the page made, in order."""
    cdp.drain()
    out = []
    for e in cdp.events:
        if e["method"] == "Network.requestWillBeSent":
            req = e["params"]["request"]
            if req["url"].endswith("/api/chat") and req["method"] == "POST":
                out.append((e["params"]["requestId"], json.loads(req.get("postData", "{}"))))
    return out


def send_and_wait(cdp, how, text, timeout=180):
    n_before = cdp.evaluate("document.querySelectorAll('#log .msg').length")
    cdp.type_into("#prompt", text)
    if how == "click":
        cdp.click("#send")
    else:
        cdp.key_enter()
    cdp.wait_for(f"document.querySelectorAll('#log .msg').length === {n_before + 2}", 10,
                 "the question and the answer to appear")
    cdp.wait_for(IDLE_JS, timeout, "the answer to finish")
    return cdp.evaluate(MESSAGES_JS)[-1]


def set_settings(cdp, temperature, seed, num_predict, system=None):
    """Types the settings into the page's Settings panel (None: left as is, "": cleared)."""
    if not cdp.evaluate("document.getElementById('settings').open"):
        cdp.click("#settings summary")
    for sel, value in (("#temperature", temperature), ("#seed", seed),
                       ("#num-predict", num_predict), ("#system", system)):
        if value is None:
            continue
        cdp.evaluate(f"document.querySelector({json.dumps(sel)}).select()")
        if value == "":
            cdp.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Delete",
                                                "code": "Delete", "windowsVirtualKeyCode": 46})
            cdp.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": "Delete",
                                                "code": "Delete", "windowsVirtualKeyCode": 46})
        else:
            cdp.type_into(sel, value)
    cdp.click("#settings summary")  # close it again


# ---- the checks -------------------------------------------------------------------------------

def check_root(base):
    _, headers, body = http(base, "/")
    check(body.decode().strip() == "Ollama is running",
          "GET / without text/html answers 'Ollama is running'")
    _, headers, body = http(base, "/", headers={
        "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"})
    check(headers.get("Content-Type", "").startswith("text/html"),
          "GET / for a browser is text/html (" + headers.get("Content-Type", "") + ")")
    with open(PAGE_FILE, "rb") as f:
        check(body == f.read(), "GET / for a browser is the embedded chat_page.html, byte for byte")


def run_checks(cdp, base):
    options = {"temperature": 0, "seed": 42, "num_predict": 48}
    _, _, raw = http(base, "/api/tags")
    tag_names = [m["name"] for m in json.loads(raw)["models"]]
    open_page(cdp, base)
    picker = cdp.evaluate("[...document.getElementById('model').options].map(o => o.value)")
    check(picker == tag_names and picker, f"the model picker lists /api/tags: {picker}")
    model = cdp.evaluate("document.getElementById('model').value")
    cdp.evaluate("document.getElementById('model').dispatchEvent(new Event('change'))")
    check(cdp.evaluate("localStorage.getItem('promeserve.model')") == model,
          "the chosen model is kept in localStorage")

    set_settings(cdp, "0", "42", "48")
    check(cdp.evaluate("localStorage.getItem('promeserve.temperature')") == "0" and
          cdp.evaluate("localStorage.getItem('promeserve.seed')") == "42" and
          cdp.evaluate("localStorage.getItem('promeserve.numPredict')") == "48",
          "temperature 0, seed 42 and 48 max tokens typed into Settings are kept")

    # Shift+Enter is a new line, not a send
    cdp.type_into("#prompt", "line one")
    cdp.key_enter(shift=True)
    check(cdp.evaluate("document.getElementById('prompt').value") == "line one\n" and
          cdp.evaluate("document.querySelectorAll('#log .msg').length") == 0,
          "Shift+Enter adds a new line and sends nothing")
    cdp.evaluate("document.getElementById('prompt').value = ''")

    # turn 1: clicked Send
    q1 = "What is the capital of France?"
    a1 = send_and_wait(cdp, "click", q1)
    check(not a1["error"], "turn 1 has no error: " + a1["error"])
    stored = cdp.evaluate(STORED_JS)
    raw1 = stored[-1]["content"]
    check(raw1.strip() != "" and a1["text"].strip() != "",
          f"turn 1: the streamed answer is in the page: {raw1[:80]!r}")
    want1, final1 = direct_chat(base, model, [{"role": "user", "content": q1}], options)
    check(raw1 == want1, f"turn 1: the page's answer equals a direct /api/chat answer\n"
                         f"page:   {raw1!r}\ndirect: {want1!r}")
    m = re.search(r"([\d.]+) tokens/s · (\d+) tokens · (\d+) prompt tokens", a1["stats"])
    check(m is not None, "turn 1: tokens/s and prompt tokens are shown: " + a1["stats"])
    check(int(m.group(3)) == final1["prompt_eval_count"] and
          int(m.group(2)) == final1["eval_count"],
          "turn 1: the token counts shown are the server's")
    reqs = chat_requests(cdp)
    rb = cdp.call("Network.getResponseBody", {"requestId": reqs[0][0]})
    body = base64.b64decode(rb["body"]).decode("utf-8", "replace") if rb["base64Encoded"] \
        else rb["body"]
    last = json.loads(body.strip().splitlines()[-1])
    rate = last["eval_count"] / last["eval_duration"] * 1e9
    check(last["done"] and abs(float(m.group(1)) - rate) < 0.051,
          f"turn 1: tokens/s shown ({m.group(1)}) is eval_count / eval_duration * 1e9 of the "
          f"final chunk ({rate:.3f})")
    check(len(reqs) == 1 and reqs[0][1]["messages"] == [{"role": "user", "content": q1}] and
          reqs[0][1].get("options") == options and reqs[0][1]["model"] == model,
          f"turn 1: the page sent the model, the question and the options: {reqs[-1][1]}")

    # turn 2: Enter; the whole conversation goes with it
    q2 = "And of Germany?"
    a2 = send_and_wait(cdp, "enter", q2)
    convo = [{"role": "user", "content": q1}, {"role": "assistant", "content": raw1},
             {"role": "user", "content": q2}]
    reqs = chat_requests(cdp)
    check(len(reqs) == 2 and reqs[1][1]["messages"] == convo,
          "turn 2 (Enter): the page sent the whole conversation")
    want2, _ = direct_chat(base, model, convo, options)
    raw2 = cdp.evaluate(STORED_JS)[-1]["content"]
    check(raw2 == want2 and not a2["error"],
          f"turn 2: the page's answer equals a direct /api/chat answer\n"
          f"page:   {raw2!r}\ndirect: {want2!r}")

    # turn 3: Stop while streaming, clicked as soon as the first text shows (from inside the
    # page: a round trip over DevTools could come after a fast model has finished). The
    # browser's download rate is throttled meanwhile, so that even the tiny model, which
    # writes its whole answer in milliseconds, is still arriving when Stop is clicked.
    set_settings(cdp, None, None, "")
    cdp.call("Network.emulateNetworkConditions", {"offline": False, "latency": 0,
                                                  "downloadThroughput": 3000,
                                                  "uploadThroughput": -1})
    cdp.evaluate("""window.__stopper = new MutationObserver(() => {
        const all = document.querySelectorAll('#log .msg.assistant');
        const last = all[all.length - 1];
        const stop = document.getElementById('stop');
        if (all.length === 3 && last.querySelector('.body').textContent.length > 0 &&
            !stop.hidden) {
            window.__stopper.disconnect(); stop.click(); window.__stopClicked = true;
        }
    }); window.__stopper.observe(document.getElementById('log'),
        {childList: true, subtree: true, characterData: true}); true""")
    cdp.type_into("#prompt", "Write a very long story about a dragon who learns to paint. "
                             "Use at least ten paragraphs.")
    cdp.click("#send")
    try:
        cdp.wait_for("window.__stopClicked === true", 60, "the long answer to start streaming")
    except Failure as e:
        raise Failure(f"{e}; the page shows: {cdp.evaluate(MESSAGES_JS)[-1]}")
    cdp.wait_for(IDLE_JS, 30, "the page to go idle after Stop")
    cdp.call("Network.emulateNetworkConditions", {"offline": False, "latency": 0,
                                                  "downloadThroughput": -1,
                                                  "uploadThroughput": -1})
    a3 = cdp.evaluate(MESSAGES_JS)[-1]
    check(a3["stopped"] and not a3["stats"] and not a3["error"] and a3["text"].strip(),
          f"Stop ended the answer early (marked stopped, no final stats): {a3}")
    reqs = chat_requests(cdp)
    failed = [e["params"] for e in cdp.events if e["method"] == "Network.loadingFailed" and
              e["params"]["requestId"] == reqs[-1][0]]
    check(failed and failed[0].get("canceled"), "Stop cancelled the /api/chat request")
    _, final3 = direct_chat(base, model, [{"role": "user", "content": "Say yes."}], options)
    check(final3.get("done"), "the server still answers after the page stopped a stream")

    # reload: the conversation is still there
    before = cdp.evaluate(MESSAGES_JS)
    reload_page(cdp)
    after = cdp.evaluate(MESSAGES_JS)
    check(len(after) == 6 and after == before,
          "after a reload the conversation (texts, stats, stopped mark) is still there")
    check(cdp.evaluate("document.getElementById('temperature').value") == "0" and
          cdp.evaluate("document.getElementById('num-predict').value") == "",
          "after a reload the settings are still there")

    # New chat clears it
    cdp.click("#new-chat")
    check(cdp.evaluate("document.querySelectorAll('#log .msg').length") == 0 and
          cdp.evaluate("localStorage.getItem('promeserve.chat')") is None,
          "New chat clears the page and the stored conversation")

    # an error answer (unknown model: 404) is shown as an error, and left out of the next turn
    cdp.evaluate("""(() => { const s = document.getElementById('model');
        s.appendChild(new Option('no-such-model', 'no-such-model'));
        s.value = 'no-such-model'; return true; })()""")
    bad = send_and_wait(cdp, "click", "Hello?")
    check("not found" in bad["error"] and not bad["text"],
          f"an unknown model's 404 is shown as an error: {bad['error']!r}")
    cdp.evaluate(f"document.getElementById('model').value = {json.dumps(model)}; true")
    system = "You are a geography teacher. Answer in one sentence."
    set_settings(cdp, None, None, None, system)
    check(cdp.evaluate("localStorage.getItem('promeserve.system')") == system,
          "the system prompt typed into Settings is kept")
    a = send_and_wait(cdp, "click", q1)
    reqs = chat_requests(cdp)
    check(reqs[-1][1]["messages"] == [{"role": "system", "content": system},
                                      {"role": "user", "content": q1}],
          "the failed turn is not sent with the next one; the system prompt goes first")
    check(reqs[-1][1].get("options") == {"temperature": 0, "seed": 42},
          "with max tokens cleared the page sends no num_predict")
    want, _ = direct_chat(base, model, reqs[-1][1]["messages"], reqs[-1][1]["options"])
    got = cdp.evaluate(STORED_JS)[-1]["content"]
    check(got == want and a["stats"] and not a["error"],
          "with a system prompt the page's answer equals a direct /api/chat answer\n"
          f"page:   {got!r} {a}\ndirect: {want!r}")
    set_settings(cdp, None, None, None, "")
    check(cdp.evaluate("localStorage.getItem('promeserve.system')") is None,
          "the system prompt can be cleared")
    cdp.click("#new-chat")

    # markdown from model text is escaped: a fake answer with HTML renders as text
    cdp.evaluate("""localStorage.setItem('promeserve.chat', JSON.stringify([
        {role: 'user', content: '<b>hi</b>'},
        {role: 'assistant', content: '<img src=x onerror=alert(1)> **bold** `a<b`\\n\\n' +
         '```c\\nint x = 1 < 2;\\n```\\n- [l](javascript:alert(1))\\n\\n' +
         '2. two\\n   - nested\\n3. three\\n\\n[ok](https://example.org/)\\n\\n' +
         '| k | v |\\n|---|:-:|\\n| <s>a</s> | 1 |'}])); true""")
    reload_page(cdp)
    safe = cdp.evaluate("""(() => { const b = document.querySelectorAll('#log .body');
        return { img: document.querySelectorAll('#log img').length,
                 bTags: document.querySelectorAll('#log b').length,
                 strong: b[1].querySelector('strong') && b[1].querySelector('strong').textContent,
                 code: b[1].querySelector('pre code') && b[1].querySelector('pre code').textContent,
                 lang: b[1].querySelector('.code-head span').textContent,
                 copy: !!b[1].querySelector('.codeblock button.copy'),
                 links: [...document.querySelectorAll('#log a')].map(a =>
                     [a.getAttribute('href'), a.rel, a.textContent].join(' ')),
                 nested: document.querySelectorAll('#log ol[start="2"] > li > ul > li').length,
                 cells: [...document.querySelectorAll('#log table th, #log table td')].map(
                     c => c.textContent),
                 text0: b[0].textContent }; })()""")
    check(safe == {"img": 0, "bTags": 0, "strong": "bold", "code": "int x = 1 < 2;",
                   "lang": "c", "copy": True, "text0": "<b>hi</b>", "nested": 1,
                   "cells": ["k", "v", "<s>a</s>", "1"],
                   "links": ["https://example.org/ noopener noreferrer ok"]},
          f"markdown is rendered and model/user HTML stays text: {safe}")
    cdp.click("#new-chat")

    # the NDJSON reader: one canned /api/chat reply cut into 5-byte pieces (lines and UTF-8
    # sequences split across reads), with an error line in the middle of the stream
    cdp.evaluate("""(() => {
        const real = window.fetch;
        window.fetch = (url, init) => {
            if (url !== '/api/chat') return real(url, init);
            window.fetch = real;
            const bytes = new TextEncoder().encode(
                '{"message":{"role":"assistant","content":"Grüße "},"done":false}\\n' +
                '{"message":{"role":"assistant","content":"🌍 **x**"},"done":false}\\n' +
                '{"error":"an error in the middle of the stream"}\\n');
            const body = new ReadableStream({ start(c) {
                for (let i = 0; i < bytes.length; i += 5) c.enqueue(bytes.slice(i, i + 5));
                c.close(); } });
            return Promise.resolve(new Response(body, {status: 200,
                headers: {'Content-Type': 'application/x-ndjson'}}));
        };
        return true; })()""")
    canned = send_and_wait(cdp, "click", "canned")
    check(canned["text"] == "Grüße 🌍 x" and
          canned["error"] == "an error in the middle of the stream" and not canned["stats"],
          f"NDJSON split anywhere is reassembled; an error line is shown as an error: {canned}")
    cdp.click("#new-chat")


def run_key_checks(cdp, base, key):
    """A server started with --api-key: the page asks for the key and then works."""
    _, headers, _ = http(base, "/", headers={"Accept": "text/html"})
    check(headers.get("Content-Type", "").startswith("text/html"),
          "with --api-key the page itself loads without a key")
    try:
        http(base, "/api/tags")
        check(False, "with --api-key /api/tags without a key is refused")
    except urllib.error.HTTPError as e:
        check(e.code in (401, 403), f"with --api-key /api/tags without a key is refused ({e.code})")
    open_page(cdp, base, want="error")  # a new port is a new origin: nothing stored yet
    st = cdp.evaluate("""({status: document.getElementById('status').textContent,
        open: document.getElementById('settings').open, focus: document.activeElement.id})""")
    check("API key" in st["status"] and st["open"] and st["focus"] == "api-key",
          f"without a key the page asks for one: {st}")
    cdp.type_into("#api-key", key)
    cdp.evaluate("document.getElementById('api-key').blur(); true")
    check(cdp.wait_for(LISTED_JS, 30, "the model list after the key") == "true",
          "with the key typed in, the models are listed")
    set_settings(cdp, "0", "42", "8")
    a = send_and_wait(cdp, "click", "Hi")
    check(not a["error"] and a["stats"], f"with the key a chat works: {a}")
    check(cdp.evaluate("localStorage.getItem('promeserve.apiKey')") == key,
          "the key is kept in localStorage")
    reqs = chat_requests(cdp)
    hdrs = [e["params"]["request"]["headers"] for e in cdp.events
            if e["method"] == "Network.requestWillBeSent" and
            e["params"]["requestId"] == reqs[-1][0]]
    check(hdrs and hdrs[0].get("Authorization") == "Bearer " + key,
          "the page sends the key as Authorization: Bearer")
    cdp.click("#new-chat")
    cdp.evaluate("localStorage.clear(); true")


def expected_network_error(entry):
    """Chromium logs failed requests; these two the checks asked for."""
    if entry.get("source") != "network":
        return False
    text, url = entry.get("text", ""), entry.get("url", "")
    return ((" 404 " in text and url.endswith("/api/chat")) or       # the unknown model
            (re.search(r" 40[13] ", text) and url.endswith("/api/tags")))  # before the key


def console_errors(cdp):
    cdp.drain()
    errs = []
    for e in cdp.events:
        p = e["params"]
        if e["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            errs.append("console." + p["type"] + ": " +
                        " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
        elif e["method"] == "Runtime.exceptionThrown":
            errs.append("exception: " + json.dumps(p["exceptionDetails"])[:300])
        elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
            if expected_network_error(p["entry"]):
                continue
            errs.append("log: " + p["entry"].get("text", "") + " " + p["entry"].get("url", ""))
    return errs


def take_screenshot(cdp, base, path):
    open_page(cdp, base)
    set_settings(cdp, "0", "42", "")
    send_and_wait(cdp, "click", "Write a Python function that returns the square of a number.")
    send_and_wait(cdp, "enter", "Now name three uses of it as a short list.")
    cdp.evaluate("document.activeElement.blur(); document.getElementById('scroller').scrollTop"
                 " = 1e9; true")
    time.sleep(0.3)
    shot = cdp.call("Page.captureScreenshot", {"format": "png"})
    data = base64.b64decode(shot["data"])
    with open(path, "wb") as f:
        f.write(data)
    w, h = struct.unpack(">II", data[16:24])
    print(f"wrote {path}: {w}x{h}, {len(data)} bytes")
    check((w, h) == (WIDTH, HEIGHT), f"the screenshot is {WIDTH}x{HEIGHT}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", default=os.path.join(REPO, "build", "bin", "promeserve"))
    ap.add_argument("--model", help="a .gguf for the server (default: SmolLM2, else tiny)")
    ap.add_argument("--url", help="test a server that already runs at this base URL")
    ap.add_argument("--key", help="with --url: that server wants this API key")
    ap.add_argument("--screenshot", metavar="PNG", help="save a screenshot after a short chat")
    ap.add_argument("--chromium", default=None)
    args = ap.parse_args()

    chromium = args.chromium or next(
        (c for c in ("chromium", "chromium-browser", "google-chrome") if shutil.which(c)), None)
    if not chromium:
        print("skipped: chromium is not installed")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="chat_page_")
    server = browser = cdp = None
    try:
        if args.url:
            base = args.url.rstrip("/")
        else:
            if not os.access(args.server, os.X_OK):
                print(f"skipped: no promeserve binary at {args.server}")
                return SKIP
            model = find_model(args.model)
            if not model:
                print("FAIL: SmolLM2-135M-Instruct.Q4_1.gguf is not in PT_MODELS_DIR: run "
                      "`make models`")
                return 1
            print("model:", model)
            server, base = start_server(args.server, model, os.path.join(tmp, "server.log"))
        browser, ws_url = start_chromium(chromium, os.path.join(tmp, "profile"),
                                         os.path.join(tmp, "chromium.log"))
        cdp = Cdp(ws_url)
        for domain in ("Page", "Runtime", "Log", "Network"):
            cdp.call(domain + ".enable")
        cdp.call("Emulation.setDeviceMetricsOverride",
                 {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        if args.screenshot:
            take_screenshot(cdp, base, args.screenshot)
        else:
            if not args.url:
                check_root(base)
            if args.key:
                run_key_checks(cdp, base, args.key)
            else:
                run_checks(cdp, base)
            if not args.url:
                # the same model again, behind --api-key
                server.terminate()
                server.wait(30)
                key = "sesame-" + os.urandom(4).hex()
                server, base = start_server(args.server, model, os.path.join(tmp, "server.log"),
                                            ["--api-key", key])
                run_key_checks(cdp, base, key)
        errs = console_errors(cdp)
        check(not errs, "no console errors or exceptions in the page" +
              ("".join("\n  " + e for e in errs) if errs else ""))
        print("PASS")
        return 0
    except (Failure, urllib.error.URLError, OSError) as e:
        if isinstance(e, urllib.error.HTTPError):
            e = f"{e.url}: HTTP {e.code} {e.read()[:300]!r}"
        print("FAIL:", e)
        if server:
            log = open(os.path.join(tmp, "server.log"), errors="replace").read()
            print("--- server log (tail) ---\n" + log[-3000:])
        return 1
    finally:
        if cdp:
            cdp.ws.close()
        for p in (browser, server):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
