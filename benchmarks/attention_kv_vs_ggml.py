#!/usr/bin/env python3
"""pt_attention_kv against llama.cpp's own CPU attention (ggml from llama-cpp-python, the non
flash-attention graph llama.cpp builds: kq = mul_mat(k, q), soft_max_ext with the causal mask,
kqv = mul_mat(v^T, kq), float16 cache), in one run, same thread counts. The ggml graph is built
once and recomputed (ggml_graph_compute_with_ctx, which sets up its threads per call, as
llama.cpp's graph compute does per ubatch). Wall time is the best of 5 windows; CPU time is the
process CPU time per call.

    PYTHON_WITH_LLAMA_CPP benchmarks/attention_kv_vs_ggml.py [build dir (default build)]
"""
import ctypes as C
import math
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
import check_nn_llm_llamacpp as G  # noqa: E402  (ggml through ctypes)

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
BIN = os.path.join(BUILD, "bin", "bench_attention_kv")

CONFIGS = [  # T, Hq, Hkv, D, S
    (1, 8, 2, 64, 2048),
    (1, 8, 1, 64, 2048),
    (1, 4, 1, 256, 2048),
    (512, 8, 2, 64, 512),
]


def ggml_us(T, hq, hkv, d, s, threads, secs=1.0):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((T, hq, d), dtype=np.float32)
    k = rng.standard_normal((s, hkv, d), dtype=np.float32).astype(np.float16)
    v = rng.standard_normal((s, hkv, d), dtype=np.float32).astype(np.float16)
    ctx = G.new_ctx()
    qt = G.tensor(ctx, q.transpose(1, 0, 2))
    kt = G.tensor(ctx, k.transpose(1, 0, 2))
    vt = G.tensor(ctx, v.transpose(1, 2, 0))
    p = (s - T) + np.arange(T)[:, None]
    mask = np.where(np.arange(s)[None, :] <= p, 0.0, -np.inf).astype(np.float16)
    kq = G.base.ggml_mul_mat(ctx, kt, qt)
    kq = G.base.ggml_soft_max_ext(ctx, kq, G.tensor(ctx, mask), 1.0 / math.sqrt(d), 0.0)
    out = G.base.ggml_mul_mat(ctx, vt, kq)
    gf = G.base.ggml_new_graph(ctx)
    G.base.ggml_build_forward_expand(gf, out)
    for _ in range(3):
        G.cpu.ggml_graph_compute_with_ctx(ctx, gf, threads)
    best, calls, c0 = float("inf"), 0, time.process_time()
    for _ in range(5):
        n, t0 = 0, time.perf_counter()
        while True:
            G.cpu.ggml_graph_compute_with_ctx(ctx, gf, threads)
            n += 1
            t = time.perf_counter()
            if t - t0 >= secs / 5:
                break
        best = min(best, 1e6 * (t - t0) / n)
        calls += n
    cpu = 1e6 * (time.process_time() - c0) / calls
    G.base.ggml_free(ctx)
    return best, cpu


def pt_us(T, hq, hkv, d, s, threads):
    out = subprocess.run([BIN, str(threads), str(T), str(hq), str(hkv), str(d), str(s), "f16"],
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[1]), float(out[3])


def main():
    print(f"{'config (f16 cache)':36s} {'thr':>3s} {'pt wall':>8s} {'ggml wall':>9s} {'ratio':>6s}"
          f" {'pt cpu':>8s} {'ggml cpu':>8s} {'ratio':>6s}")
    for T, hq, hkv, d, s in CONFIGS:
        for threads in (1, 2):
            a, ac = pt_us(T, hq, hkv, d, s, threads)
            b, bc = ggml_us(T, hq, hkv, d, s, threads)
            name = f"T={T} Hq={hq} Hkv={hkv} D={d} S={s}"
            print(f"{name:36s} {threads:3d} {a:8.1f} {b:9.1f} {b / a:6.2f}"
                  f" {ac:8.1f} {bc:8.1f} {bc / ac:6.2f}")


if __name__ == "__main__":
    main()
