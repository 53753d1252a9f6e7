#!/usr/bin/env python3
"""promeserve against llama.cpp's Python server (llama-cpp-python's llama_cpp.server) under the
same concurrent load: both serve the same GGUF on the same number of threads, and both are
driven through the same OpenAI-compatible endpoint (POST /v1/chat/completions, streamed SSE),
at 1, 4 and 16 concurrent streams, alternating which server goes first at each level.

    python serve_vs_llamacpp.py --bin build/bin/promeserve --gguf MODEL.gguf [--threads 2]
        [--seconds 20] [--max-tokens 64] [--levels 1,4,16] [--parallel 4]
        [--baseline-bin OTHER/promeserve] [--llamacpp-chat-format gemma]

Needs httpx and llama-cpp-python with its server extras (fastapi, uvicorn, sse-starlette,
starlette-context, pydantic-settings) in the Python that runs it. Generated tokens are counted
the same way for both: content deltas of the stream (both servers send one per token). Prints a
markdown table with aggregate tokens/s, requests/s and median time to first token of each,
and the ratio ours / llama.cpp (above 1: promeserve is faster). llama_cpp.server answers one
request at a time (a lock around its one context); promeserve decodes up to --parallel
sequences together in one batched forward pass per step. llama_cpp.server runs with
--interrupt_requests False (by default a new request cuts the stream in progress short).
After the table: each server's aggregate tokens/s at every level relative to its own 1 stream
(the scaling that batched decoding buys; the goal is at least 2.5x at 4 streams). With
--baseline-bin, a second promeserve build (say, the commit before a change) is measured in the
same run, taking its turn in the same alternation, so the two builds see the same machine load.
"""
import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import httpx

from serve_load import PROMPTS, free_port  # the same prompts as the load test


def wait_ready(url, proc, what):
    for _ in range(240):
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not answer within 120 s")


def start_promeserve(binary, gguf, threads, parallel, ctx, log):
    port = free_port()
    env = dict(os.environ, OLLAMA_MODELS=tempfile.mkdtemp(prefix="ps-bench-"))
    proc = subprocess.Popen([binary, "serve", "--port", str(port), "--threads", str(threads),
                             "--parallel", str(parallel), "--ctx", str(ctx), "--keep-alive", "-1",
                             "--quiet", gguf], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc, "promeserve")
    return proc, url, os.path.basename(gguf)


def start_llamacpp(gguf, threads, ctx, chat_format, log):
    port = free_port()
    extra = ["--chat_format", chat_format] if chat_format else []
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", gguf,
                             "--n_threads", str(threads), "--n_threads_batch", str(threads),
                             "--n_ctx", str(ctx), "--port", str(port), "--host", "127.0.0.1",
                             "--interrupt_requests", "False"] + extra,
                            stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc, "llama_cpp.server")
    return proc, url, gguf


async def one_chat(client, model, prompt, max_tokens, seed, stats):
    body = {"model": model, "stream": True, "max_tokens": max_tokens, "seed": seed,
            "temperature": 0.7, "messages": [{"role": "user", "content": prompt}]}
    t0 = time.perf_counter()
    first, tokens, done = None, 0, False
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                await r.aread()
                stats["errors"] += 1
                return
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
                if delta.get("content"):
                    tokens += 1
                    if first is None:
                        first = time.perf_counter() - t0
    except (httpx.HTTPError, json.JSONDecodeError):
        stats["errors"] += 1
        return
    if not done:
        stats["errors"] += 1
        return
    stats["ok"] += 1
    stats["tokens"] += tokens
    if first is not None:
        stats["ttft"].append(first)


async def run_level(url, model, concurrency, seconds, max_tokens):
    stats = {"ok": 0, "tokens": 0, "errors": 0, "ttft": []}
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(900.0),
                                 limits=limits) as client:
        start = time.perf_counter()
        deadline = start + seconds

        async def worker(w):
            n = 0
            while time.perf_counter() < deadline:
                await one_chat(client, model, PROMPTS[(w + n) % len(PROMPTS)], max_tokens,
                               w * 1009 + n, stats)
                n += 1

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        stats["elapsed"] = time.perf_counter() - start
    return stats


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else float("nan")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="build/bin/promeserve")
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=4, help="promeserve's slots")
    ap.add_argument("--ctx", type=int, default=2048, help="context per sequence")
    ap.add_argument("--seconds", type=float, default=20, help="per level and server")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--levels", default="1,4,16")
    ap.add_argument("--baseline-bin", help="another promeserve build to measure alongside")
    ap.add_argument("--llamacpp-chat-format",
                    help="llama_cpp.server's --chat_format, for a GGUF without a chat template "
                         "(gemma for gemma-3-270m-q4_k_m.gguf: promeserve picks the family from "
                         "the architecture, llama_cpp.server falls back to llama-2, whose prompts "
                         "make gemma answer in a token or two)")
    args = ap.parse_args()
    log = tempfile.NamedTemporaryFile(prefix="serve-vs-llamacpp-", suffix=".log", delete=False)
    servers = {}
    try:
        servers["promeserve"] = start_promeserve(args.bin, args.gguf, args.threads,
                                                 args.parallel, args.ctx, log)
        if args.baseline_bin:
            servers["baseline"] = start_promeserve(args.baseline_bin, args.gguf, args.threads,
                                                   args.parallel, args.ctx, log)
        servers["llama.cpp"] = start_llamacpp(args.gguf, args.threads, args.ctx,
                                              args.llamacpp_chat_format, log)
        for name, (_, url, model) in servers.items():  # warm-up: load, touch the caches
            asyncio.run(run_level(url, model, 1, 0.1, 8))
        results = {}
        for i, level in enumerate(int(x) for x in args.levels.split(",")):
            order = list(servers) if i % 2 == 0 else list(reversed(servers))
            for name in order:
                _, url, model = servers[name]
                results[(name, level)] = asyncio.run(run_level(url, model, level, args.seconds,
                                                               args.max_tokens))
    finally:
        for proc, _, _ in servers.values():
            stop(proc)
    print(f"## promeserve vs llama_cpp.server: {os.path.basename(args.gguf)}, {args.threads} "
          f"threads, streamed /v1/chat/completions, max_tokens {args.max_tokens}, "
          f"{args.seconds:.0f} s per level; promeserve --parallel {args.parallel}\n")
    print("| concurrent streams | ours tokens/s | llama.cpp tokens/s | ratio | ours req/s | "
          "llama.cpp req/s | ours TTFT p50 | llama.cpp TTFT p50 | errors ours / llama.cpp |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    bad = False
    levels = [int(x) for x in args.levels.split(",")]
    for level in levels:
        o, l = results[("promeserve", level)], results[("llama.cpp", level)]
        ot, lt = o["tokens"] / o["elapsed"], l["tokens"] / l["elapsed"]
        print(f"| {level} | {ot:.1f} | {lt:.1f} | **{ot / lt:.2f}** | "
              f"{o['ok'] / o['elapsed']:.2f} | {l['ok'] / l['elapsed']:.2f} | "
              f"{median(o['ttft']) * 1000:.0f} ms | {median(l['ttft']) * 1000:.0f} ms | "
              f"{o['errors']} / {l['errors']} |")
        bad = bad or o["errors"] > 0
    print("\n| server | " + " | ".join(f"{lv} streams: tokens/s (vs 1)" for lv in levels) + " |")
    print("|---|" + "---:|" * len(levels))
    for name in servers:
        tps = {lv: results[(name, lv)]["tokens"] / results[(name, lv)]["elapsed"]
               for lv in levels}
        base = tps.get(1)
        cells = [f"{tps[lv]:.1f}" + (f" ({tps[lv] / base:.2f}x)" if base else "")
                 for lv in levels]
        errs = sum(results[(name, lv)]["errors"] for lv in levels)
        print(f"| {name} | " + " | ".join(cells) + " |" + (f" errors: {errs}" if errs else ""))
    print(f"\n(server logs: {log.name})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
