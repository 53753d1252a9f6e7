"""Prefill matmul speed next to llama.cpp's, in one run.

For each real model: llama.cpp's whole-model prompt processing (pp512: llm.eval of 512 tokens
after a warm-up, llama-cpp-python, n_batch = n_ubatch = 512, best of `--reps`) on 1 and 2
threads, converted to matmul GOP/s = 2 * (weight parameters used per token, token embedding
excluded) * tokens/s -- an upper bound on llama.cpp's own matmul rate would be higher, since
its time also covers attention, norms and the rest; and our quantized GEMM alone
(build/bin/bench_qgemm: every weight matrix of the model at M = 512 through pt_linear), as
GOP/s. Prints both and their ratio (ours / llama.cpp's).

    PYTHON_WITH_LLAMA_CPP benchmarks/qgemm_vs_llama.py [--bench build/bin/bench_qgemm]
"""
import argparse
import re
import subprocess
import sys
import time

MODELS = [
    ("gemma-3-270m-q4_k_m", "data/models/gemma-3-270m-q4_k_m.gguf"),
    ("SmolLM2-135M-Q4_1", "data/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
]


def matmul_params(path):
    from gguf import GGUFReader
    total = 0
    for t in GGUFReader(path).tensors:
        if len(t.shape) == 2 and "token_embd" not in t.name:
            total += int(t.shape[0]) * int(t.shape[1])
    return total


def llama_pp512(path, threads, reps):
    from llama_cpp import Llama
    llm = Llama(model_path=path, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    toks = [(i * 7919) % 20000 + 100 for i in range(512)]
    llm.reset()
    llm.eval(toks[:64])
    best = 1e30
    for _ in range(reps):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(toks)
        best = min(best, time.perf_counter() - t0)
    del llm
    return 512 / best


def ours(bench, name, secs):
    out = subprocess.run([bench, "512", str(secs), name], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"MODEL .*1T ([\d.]+) ms ([\d.]+) GOP/s, 2T ([\d.]+) ms ([\d.]+) GOP/s", out)
    return out, {1: float(m.group(2)), 2: float(m.group(4))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/bin/bench_qgemm")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--secs", type=float, default=1.0)
    args = ap.parse_args()
    rows = []
    for name, path in MODELS:
        params = matmul_params(path)
        peer = {t: llama_pp512(path, t, args.reps) for t in (1, 2)}
        text, gops = ours(args.bench, name, args.secs)
        print(text, end="")
        for t in (1, 2):
            pg = 2 * params * peer[t] / 1e9
            rows.append((name, t, peer[t], pg, gops[t], gops[t] / pg))
    print("\nmodel                 thr  llama pp512 tok/s  llama matmul GOP/s  our GEMM GOP/s  ratio")
    for name, t, tps, pg, og, r in rows:
        print(f"{name:22s} {t:3d} {tps:18.1f} {pg:19.1f} {og:15.1f} {r:6.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
