#!/usr/bin/env python3
"""Load benchmark for promeserve (issue 7, item 9): concurrent streaming chats over loopback.

    serve_load.py --url http://127.0.0.1:11434 --model smollm2:135m
    serve_load.py --bin build/bin/promeserve --gguf data/models/SmolLM2-135M-Instruct.Q4_1.gguf
    serve_load.py ... --quick          (10 s main run, 5 s per scaling step: a smoke check)

Main run: --concurrency (16) workers each send streaming POST /api/chat requests back to back
for --seconds (60); reports requests/s, aggregate generated tokens/s (eval_count of finished
requests over the wall time), p50/p99 time to first token, errors by status (only 503, the
queue-full answer, is allowed), requests lost (a stream that ends without its done:true line or
a connection error), and, when it started the server (--bin) or is given --pid, the server's
RSS before and after. Then the scaling table: aggregate tokens/s at 1, 4 and 16 concurrent
streams (--scaling); with --parallel 4 on the server, 4 streams should give much more than 1
(that is what batched decoding buys). Prints markdown. Needs httpx (tests/clients/requirements
.txt). Exit status 1 when a request was lost or failed with anything but 503.
"""
import argparse
import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import httpx

PROMPTS = [
    "Write a short story about a robot who learns to paint.",
    "Explain how a bicycle stays upright.",
    "List some ideas for a rainy afternoon.",
    "Describe the water cycle to a child.",
    "What makes a good cup of tea?",
    "Tell me about the history of the printing press.",
    "Give advice for someone learning to cook.",
    "Why do cats purr?",
]


class Stats:
    def __init__(self):
        self.ok = 0
        self.tokens = 0
        self.ttft = []
        self.errors = {}     # status or exception name -> count
        self.lost = 0
        self.first_start = None
        self.last_end = None

    def error(self, key):
        self.errors[key] = self.errors.get(key, 0) + 1


async def one_chat(client, model, prompt, num_predict, seed, temperature, stats):
    body = {"model": model, "stream": True,
            "messages": [{"role": "user", "content": prompt}],
            "options": {"num_predict": num_predict, "seed": seed, "temperature": temperature}}
    t0 = time.perf_counter()
    first = None
    done = None
    try:
        async with client.stream("POST", "/api/chat", json=body) as r:
            if r.status_code != 200:
                await r.aread()
                stats.error(r.status_code)
                return
            async for line in r.aiter_lines():
                if not line:
                    continue
                obj = json.loads(line)
                if "error" in obj:
                    stats.error("error line: " + str(obj["error"])[:60])
                    return
                if first is None and (obj.get("message") or {}).get("content"):
                    first = time.perf_counter() - t0
                if obj.get("done"):
                    done = obj
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        stats.error(type(e).__name__)
        stats.lost += 1
        return
    if done is None:
        stats.lost += 1
        stats.error("stream ended without done")
        return
    stats.ok += 1
    stats.tokens += int(done.get("eval_count") or 0)
    if first is not None:
        stats.ttft.append(first)


async def run_load(url, model, concurrency, seconds, num_predict, temperature=0.7):
    stats = Stats()
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600.0),
                                 limits=limits) as client:
        start = time.perf_counter()
        deadline = start + seconds

        async def worker(w):
            n = 0
            while time.perf_counter() < deadline:
                prompt = PROMPTS[(w + n) % len(PROMPTS)]
                await one_chat(client, model, prompt, num_predict, w * 100003 + n, temperature,
                               stats)
                n += 1

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        elapsed = time.perf_counter() - start
    return stats, elapsed


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    k = min(len(v) - 1, max(0, int(round(p / 100 * (len(v) - 1)))))
    return v[k]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


# ---- starting a server ---------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary, gguf, name, parallel, tmpdir):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    store = os.path.join(tmpdir, "store")
    os.makedirs(store)
    env = dict(os.environ, OLLAMA_HOST=f"127.0.0.1:{port}", OLLAMA_MODELS=store,
               OLLAMA_NUM_PARALLEL=str(parallel), OLLAMA_KEEP_ALIVE="-1")
    log = open(os.path.join(tmpdir, "server.log"), "wb")
    proc = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(120):
        if proc.poll() is not None:
            raise RuntimeError(f"promeserve exited {proc.returncode}; see {log.name}")
        try:
            if httpx.get(url + "/api/version", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    else:
        raise RuntimeError("promeserve did not answer within 60 s")
    h = hashlib.sha256()
    with open(gguf, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = "sha256:" + h.hexdigest()
    with open(gguf, "rb") as f:
        r = httpx.post(f"{url}/api/blobs/{digest}", content=f, timeout=300)
    r.raise_for_status()
    r = httpx.post(url + "/api/create", timeout=300, json={
        "model": name, "files": {os.path.basename(gguf): digest}, "stream": False})
    r.raise_for_status()
    return proc, url


# ---- report --------------------------------------------------------------------------------------

def row(*cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"


def describe_errors(stats):
    if not stats.errors:
        return "none"
    return ", ".join(f"{k}: {v}" for k, v in sorted(stats.errors.items(), key=str))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running server")
    ap.add_argument("--pid", type=int, help="its process id, for RSS (with --url)")
    ap.add_argument("--bin", help="start this promeserve instead")
    ap.add_argument("--gguf", default="data/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                    help="the model file to create in the started server's store")
    ap.add_argument("--model", default="smollm2:135m", help="model name to chat with")
    ap.add_argument("--parallel", type=int, default=4, help="slots of the started server")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--scaling", default="1,4,16", help="concurrency levels of the table")
    ap.add_argument("--scale-seconds", type=float, default=20)
    ap.add_argument("--num-predict", type=int, default=64, help="tokens per answer at most")
    ap.add_argument("--temperature", type=float, default=0.7, help="0: greedy")
    ap.add_argument("--quick", action="store_true", help="10 s run, 5 s scaling steps")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.scale_seconds = 10, 5
    if not args.url and not args.bin:
        ap.error("--url or --bin is needed")

    proc = None
    pid = args.pid
    tmpdir = tempfile.mkdtemp(prefix="serve-load-")
    url = args.url
    if args.bin:
        proc, url = start_server(args.bin, args.gguf, args.model, args.parallel, tmpdir)
        pid = proc.pid
    try:
        # warm up: load the model and touch every slot once
        warm, _ = asyncio.run(run_load(url, args.model, max(1, args.parallel), 0.1, 8))
        if warm.ok == 0:
            print(f"warm-up failed: {describe_errors(warm)}")
            return 1
        rss0 = rss_kib(pid) if pid else None
        stats, elapsed = asyncio.run(run_load(url, args.model, args.concurrency, args.seconds,
                                              args.num_predict, args.temperature))
        rss1 = rss_kib(pid) if pid else None
        scaling = []
        for c in [int(x) for x in args.scaling.split(",") if x]:
            s, e = asyncio.run(run_load(url, args.model, c, args.scale_seconds, args.num_predict,
                                        args.temperature))
            scaling.append((c, s, e))
        rss2 = rss_kib(pid) if pid else None
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(tmpdir, ignore_errors=True)

    print(f"## promeserve load: {args.concurrency} concurrent streaming chats, "
          f"{args.seconds:.0f} s, num_predict {args.num_predict}, temperature {args.temperature}, "
          f"model {args.model}\n")
    print(row("metric", "value"))
    print(row("---", "---"))
    print(row("requests finished", stats.ok))
    print(row("requests/s", f"{stats.ok / elapsed:.2f}"))
    print(row("aggregate generated tokens/s", f"{stats.tokens / elapsed:.1f}"))
    print(row("time to first token p50 / p99",
              f"{pct(stats.ttft, 50) * 1000:.0f} ms / {pct(stats.ttft, 99) * 1000:.0f} ms"))
    print(row("errors by status", describe_errors(stats)))
    print(row("requests lost", stats.lost))
    if rss0 is not None and rss1 is not None:
        print(row("server RSS after warm-up / after the run / after scaling",
                  f"{rss0 / 1024:.1f} / {rss1 / 1024:.1f} / {(rss2 or 0) / 1024:.1f} MiB"))
    print()
    print(row("concurrent streams", "requests", "aggregate tokens/s", "tokens/s per stream",
              "TTFT p50", "errors"))
    print(row("---", "---", "---", "---", "---", "---"))
    base = None
    for c, s, e in scaling:
        agg = s.tokens / e
        base = base or agg
        print(row(c, s.ok, f"{agg:.1f} ({agg / base:.2f}x)", f"{agg / c:.1f}",
                  f"{pct(s.ttft, 50) * 1000:.0f} ms", describe_errors(s)))
    bad = [k for st in [stats] + [s for _, s, _ in scaling] for k in st.errors if k != 503]
    lost = stats.lost + sum(s.lost for _, s, _ in scaling)
    failed = False
    if bad or lost:
        print(f"\nFAIL: {lost} requests lost; errors other than 503: {sorted(set(map(str, bad)))}")
        failed = True
    # the slots' KV caches are allocated by the warm-up, so the load itself should not grow
    # the server by more than allocator noise
    if rss0 and rss2 and rss2 > rss0 * 1.10:
        print(f"\nFAIL: server RSS grew from {rss0 / 1024:.1f} to {rss2 / 1024:.1f} MiB under load")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
