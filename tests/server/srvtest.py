"""Shared parts of the promeserve end-to-end scripts (check_http.py, check_api.py,
check_store.py): the pass/fail counters, free ports, finding the real test models, and a
`promeserve serve` process on a free loopback port with a temporary model store. Standard
library only."""
import os
import socket
import subprocess
import sys
import tempfile
import time

_counts = {"pass": 0, "fail": 0}


def check(cond, what):
    """Counts one check; prints what failed."""
    if cond:
        _counts["pass"] += 1
    else:
        _counts["fail"] += 1
        print("FAIL:", what, flush=True)
    return cond


def failed():
    return _counts["fail"]


def summary():
    """Prints "N passed, M failed" and returns the exit status (1 on a failure)."""
    print("%d passed, %d failed" % (_counts["pass"], _counts["fail"]))
    return 1 if _counts["fail"] else 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_model(name):
    """A real model file that `make models` fetches, in $PT_MODELS_DIR (ctest sets it from the
    CMake variable PT_MODELS_DIR). Exits 1 (a failure, not a skip) when it is missing."""
    d = os.environ.get("PT_MODELS_DIR", "")
    path = os.path.join(d, name) if d else ""
    if not path or not os.path.isfile(path):
        print(f"FAIL: {name} is not in PT_MODELS_DIR ({d or 'unset'}): run `make models`")
        sys.exit(1)
    return path


class ServerProcess:
    """`promeserve serve --port P ARGS` with OLLAMA_MODELS=store (a new temporary folder unless
    given) and no OLLAMA_HOST/OLLAMA_ORIGINS/PROMESERVE_API_KEY from the caller's
    environment; stderr goes to a file read by log(). Raises when it does not print
    "Listening on" within startup_s."""

    def __init__(self, binary, args, env_extra=None, store=None, startup_s=60,
                 log_prefix="promeserve-"):
        self.port = free_port()
        self.errf = tempfile.NamedTemporaryFile(prefix=log_prefix, suffix=".log", delete=False)
        self.store = store or tempfile.mkdtemp(prefix="ps-store-")
        env = dict(os.environ)
        env["OLLAMA_MODELS"] = self.store
        for k in ("OLLAMA_HOST", "OLLAMA_ORIGINS", "PROMESERVE_API_KEY"):
            env.pop(k, None)
        env.update(env_extra or {})
        self.proc = subprocess.Popen([binary, "serve", "--port", str(self.port)] + list(args),
                                     stdout=subprocess.DEVNULL, stderr=self.errf, env=env)
        deadline = time.time() + startup_s
        while time.time() < deadline:
            if "Listening on" in self.log():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("server did not start:\n" + self.log())

    def log(self):
        with open(self.errf.name, errors="replace") as f:
            return f.read()

    def end(self, sig, timeout):
        """Sends sig and waits; kills after timeout. Returns the exit status, None if killed."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
