#!/usr/bin/env python3
"""pt_attention_kv against the same math in PyTorch, in one run, same thread counts: wall time
(best of 5 windows) and process CPU time per call (steadier on a loaded machine).

PyTorch side (float32): softmax(q k^T * scale [+ causal mask]) v on [Hq, T, D] with k/v already
repeat_interleave'd to Hq heads outside the timed loop (torch 1.13 has no
F.scaled_dot_product_attention; this is its math path). PromeTorch side: benchmarks'
bench_attention_kv binary (float16 or float32 cache view, GQA done by the kernel).

    python3 benchmarks/attention_kv_vs_torch.py [build dir (default build)]
"""
import math
import os
import subprocess
import sys
import time

import torch

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
BIN = os.path.join(BUILD, "benchmarks", "bench_attention_kv")
if not os.path.exists(BIN):
    BIN = os.path.join(BUILD, "bin", "bench_attention_kv")

CONFIGS = [  # T, Hq, Hkv, D, S, cache dtype
    (1, 8, 2, 64, 2048, "f16"),
    (1, 8, 4, 64, 2048, "f16"),
    (1, 8, 1, 64, 2048, "f16"),
    (1, 8, 2, 64, 2048, "f32"),
    (1, 4, 1, 256, 2048, "f16"),
    (512, 8, 2, 64, 512, "f16"),
]


def torch_us(T, hq, hkv, d, s, threads, secs=1.0):
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(hq, T, d, generator=g)
    k = torch.randn(hkv, s, d, generator=g).repeat_interleave(hq // hkv, dim=0)
    v = torch.randn(hkv, s, d, generator=g).repeat_interleave(hq // hkv, dim=0)
    scale = 1.0 / math.sqrt(d)
    mask = None
    if T > 1:
        p = (s - T) + torch.arange(T)[:, None]
        mask = torch.zeros(T, s).masked_fill(torch.arange(s)[None, :] > p, float("-inf"))

    def f():
        sc = torch.matmul(q, k.transpose(1, 2)) * scale
        if mask is not None:
            sc = sc + mask
        return torch.matmul(torch.softmax(sc, dim=-1), v)

    with torch.no_grad():
        for _ in range(3):
            f()
        best, calls, c0 = float("inf"), 0, time.process_time()
        for _ in range(5):  # the best of 5 windows: the machine is shared
            n, t0 = 0, time.perf_counter()
            while True:
                f()
                n += 1
                t = time.perf_counter()
                if t - t0 >= secs / 5:
                    break
            best = min(best, 1e6 * (t - t0) / n)
            calls += n
    return best, 1e6 * (time.process_time() - c0) / calls


def pt_us(T, hq, hkv, d, s, dt, threads):
    out = subprocess.run([BIN, str(threads), str(T), str(hq), str(hkv), str(d), str(s), dt],
                         check=True, capture_output=True, text=True).stdout
    w = out.split()
    return float(w[1]), float(w[3])


def main():
    print("wall: best of 5 windows; cpu: process CPU time per call (all threads)")
    print(f"{'config':40s} {'thr':>3s} {'pt wall':>8s} {'torch wall':>10s} {'ratio':>6s}"
          f" {'pt cpu':>8s} {'torch cpu':>9s} {'ratio':>6s}")
    for T, hq, hkv, d, s, dt in CONFIGS:
        for threads in (1, 2):
            a, ac = pt_us(T, hq, hkv, d, s, dt, threads)
            b, bc = torch_us(T, hq, hkv, d, s, threads)
            name = f"T={T} Hq={hq} Hkv={hkv} D={d} S={s} {dt}"
            print(f"{name:40s} {threads:3d} {a:8.1f} {b:10.1f} {b / a:6.2f}"
                  f" {ac:8.1f} {bc:9.1f} {bc / ac:6.2f}")


if __name__ == "__main__":
    main()
