#!/usr/bin/env python3
"""Drives examples/embed_server.c, the program docs/promeserve.md shows for embedding the
server (pt_server_start / pt_server_stop): it must start on a free port and say which, answer
GET /api/version and GET /api/tags (listing the tiny fixture model of its MODELS_DIR), and exit
0 promptly once its standard input ends. Standard library only.

Usage: check_embed_example.py EMBED_SERVER_BINARY FIXTURES_DIR"""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

failed = 0


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failed += 1


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return r.status, json.loads(r.read().decode())


def main():
    binary, fixtures = sys.argv[1], sys.argv[2]
    tiny = os.path.join(fixtures, "llm", "tiny")
    with tempfile.TemporaryDirectory() as store:
        env = dict(os.environ, OLLAMA_MODELS=store)  # an empty store, not the user's
        p = subprocess.Popen([binary, tiny], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, text=True)
        line = p.stdout.readline()
        m = re.match(r"serving on (http://127\.0\.0\.1:(\d+))$", line.strip())
        check(m is not None and int(m.group(2)) > 0, "says the port it picked: %r" % line)
        if m:
            base = m.group(1)
            st, v = get(base, "/api/version")
            check(st == 200 and isinstance(v.get("version"), str), "/api/version: %r" % v)
            st, tags = get(base, "/api/tags")
            names = sorted(x["name"] for x in tags.get("models", []))
            check(st == 200 and "llama-q8_0.gguf" in names, "/api/tags lists the fixture: %r"
                  % names)
        p.stdin.close()
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = None
        err = p.stderr.read()
        check(rc == 0, "exits 0 after pt_server_stop (rc %r, stderr %r)" % (rc, err[-500:]))
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
