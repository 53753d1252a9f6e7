"""Connections that trickle bytes cannot lock promeserve out: 600 loopback connections that send
a partial request and then one byte every half second (more than the connection limit of the
defaults) leave GET /api/version answering within 2 s, several times while they trickle.
Usage: check_slow_clients.py PROMESERVE [FIXTURES]. Standard library only."""
import http.client
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import ServerProcess, check, summary  # noqa: E402

N_SLOW = 600


def version(port):
    t0 = time.time()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/api/version")
        r = c.getresponse()
        ok = r.status == 200 and b"version" in r.read()
        c.close()
    except OSError as e:
        return False, "%r" % e, time.time() - t0
    return ok, "", time.time() - t0


def main():
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print("promeserve binary missing; skipped")
        return 77
    srv = ServerProcess(sys.argv[1], ["--threads", "1"])
    socks = []
    try:
        head = b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
        for _ in range(N_SLOW):
            try:
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
                s.setblocking(False)
                s.send(head)
                socks.append(s)
            except OSError:
                break
        print("%d slow connections open" % len(socks))
        for round_ in range(6):
            for s in socks:
                try:
                    s.send(b"z")
                except OSError:
                    pass
            ok, err, took = version(srv.port)
            check(ok and took < 2, "GET /api/version with %d trickling connections (round %d): "
                  "%s %.2f s" % (N_SLOW, round_, err, took))
            time.sleep(0.5)
    except Exception as e:
        check(False, "exception: %r\n%s" % (e, srv.log()[-2000:]))
    finally:
        for s in socks:
            s.close()
    ok, err, took = version(srv.port)
    check(ok, "GET /api/version after the slow connections closed: %s" % err)
    rc = srv.end(signal.SIGTERM, 20)
    check(rc == 0, "exit status after SIGTERM: %r" % rc)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
