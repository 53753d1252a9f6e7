"""/api/embed with many inputs does not take the whole server (tiny fixture model): 8 chats sent
while a big batch runs are answered before the batch ends; a client that hangs up stops its
batch (the busy slots drop to 0); SIGTERM during a big batch exits on one signal within the
10 s grace period; the big batch's reply is written while it is sent, so the server's peak
RSS grows by well under the reply's size (it used to grow by twice the reply: a JSON tree of
every vector, then its printed text). Usage: check_embed_load.py PROMESERVE [FIXTURES]. Standard library only."""
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import ServerProcess, check, summary  # noqa: E402

MODEL = "llama-q8_0"
N_BIG = 20000


def request(port, method, path, body=None, timeout=300):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def busy_slots(port):
    st, d = request(port, "GET", "/metrics")
    for line in d.decode().splitlines():
        if line.startswith("promeserve_busy_slots "):
            return float(line.split()[1])
    return None


def big_body(n):
    return {"model": MODEL, "input": ["input number %d of a big batch" % i for i in range(n)]}


def wait_busy(port, timeout=30):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if (busy_slots(port) or 0) >= 1:
            return True
        time.sleep(0.02)
    return False


def send_raw(port, body):
    """Sends a POST /api/embed on a raw socket and returns the socket (not read)."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"POST /api/embed HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
              b"\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    return s


def test_small_batch(port):
    st, d = request(port, "POST", "/api/embed", {"model": MODEL, "input": ["a", "b", "c"]})
    r = json.loads(d)
    embs = r.get("embeddings", [])
    check(st == 200 and len(embs) == 3 and all(len(e) == len(embs[0]) > 8 for e in embs),
          "3 inputs, 3 vectors: %d" % st)


def vm_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def test_chat_not_starved(srv):
    port = srv.port
    done = {}
    hwm0 = vm_kb(srv.proc.pid, "VmHWM")

    def big():
        done["status"], done["reply"] = request(port, "POST", "/api/embed", big_body(N_BIG),
                                                timeout=600)
        done["t"] = time.time()

    t = threading.Thread(target=big)
    t.start()
    check(wait_busy(port), "the big batch runs")
    t0 = time.time()
    chats = []

    def chat():
        chats.append(request(port, "POST", "/api/chat", {
            "model": MODEL, "stream": False, "messages": [{"role": "user", "content": "hi"}],
            "options": {"num_predict": 4}}))

    # 8 concurrent chats: half of --max-queue, all of which the batch alone used to fill (the
    # other half leaves room for the batch's own next input waiting for a slot)
    ts = [threading.Thread(target=chat) for _ in range(8)]
    for c in ts:
        c.start()
    for c in ts:
        c.join()
    t_chat = time.time()
    check(len(chats) == 8 and all(st == 200 for st, _ in chats),
          "8 chats during a %d-input embed: %r" % (N_BIG, [(st, d[:80]) for st, d in chats
                                                          if st != 200][:2]))
    check("t" not in done, "the chats were answered (%.1f s) before the batch ended" %
          (t_chat - t0))
    print("8 chats answered in %.2f s while the batch ran" % (t_chat - t0))
    t.join()
    check(done.get("status") == 200, "the big batch ends 200: %r" % done.get("status"))
    reply = done.get("reply") or b""
    try:
        embs = json.loads(reply).get("embeddings", [])
    except ValueError:
        embs = []
    check(len(embs) == N_BIG and all(len(e) == len(embs[0]) for e in embs),
          "%d vectors in the reply (%d)" % (N_BIG, len(embs)))
    grown = vm_kb(srv.proc.pid, "VmHWM") - hwm0
    print("peak RSS grew by %d kB for a reply of %d kB" % (grown, len(reply) // 1024))
    # AddressSanitizer's quarantine keeps freed memory, so the peak means nothing there
    if os.environ.get("PT_SANITIZE") == "1":
        print("peak RSS not checked: AddressSanitizer build")
    else:
        check(grown * 1024 < 0.75 * len(reply),
              "the reply is streamed: peak RSS grew by %d kB, under 3/4 of the %d kB reply"
              % (grown, len(reply) // 1024))


def test_hangup(port):
    s = send_raw(port, big_body(N_BIG))
    check(wait_busy(port), "the batch of the client that will hang up runs")
    s.close()
    t0 = time.time()
    while time.time() - t0 < 5 and busy_slots(port) != 0:
        time.sleep(0.05)
    check(busy_slots(port) == 0, "the batch stops when its client hangs up (%.1f s)"
          % (time.time() - t0))
    time.sleep(0.5)
    check(busy_slots(port) == 0, "and does not start again")


def test_sigterm(srv):
    s = send_raw(srv.port, big_body(N_BIG))
    check(wait_busy(srv.port), "a batch runs before SIGTERM")
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    try:
        rc = srv.proc.wait(12)
    except Exception:
        rc = None
    check(rc == 0, "one SIGTERM during a %d-input embed exits 0 within the 10 s grace: "
          "%r after %.1f s" % (N_BIG, rc, time.time() - t0))
    s.settimeout(5)
    try:
        reply = s.recv(4096)
    except OSError:
        reply = b""
    check(reply == b"" or b" 503 " in reply.split(b"\r\n")[0],
          "the batch's client gets 503 or a closed connection: %r" % reply[:120])
    s.close()


def main():
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print("promeserve binary missing; skipped")
        return 77
    fixtures = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    gguf = os.path.join(fixtures, "llm", "tiny", MODEL + ".gguf")
    if not os.path.isfile(gguf):
        print("tiny fixture models missing; skipped")
        return 77
    srv = ServerProcess(sys.argv[1], ["--threads", "2", "--parallel", "2", "--max-queue", "16",
                                      gguf])
    try:
        test_small_batch(srv.port)
        test_chat_not_starved(srv)
        test_hangup(srv.port)
        test_sigterm(srv)
    except Exception as e:
        check(False, "exception: %r\n%s" % (e, srv.log()[-3000:]))
    finally:
        srv.end(signal.SIGKILL, 10)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
