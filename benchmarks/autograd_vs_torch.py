#!/usr/bin/env python3
"""Autograd benchmark: PromeTorch against PyTorch, in one run, on the same threads.

Runs build/bin/autograd_vs_torch (the C side: prints "name ns_per_step" lines) and the same
steps in PyTorch with the same shapes and thread count, then prints both times and
ours/PyTorch. A ratio below 1 means PromeTorch is faster.

  mlp:   forward + backward of a 3-layer MLP 784-512-256-10 (ReLU, cross_entropy), batch 64
  chain: forward + backward of 1,000 tiny elementwise ops (mul_scalar 0.999, add_scalar
         0.001, tanh in turn) on a [16] tensor, then sum

Each step ends with the parameters' .grad dropped (zero_grad(set_to_none=True)), as in the C
side.

    python3 benchmarks/autograd_vs_torch.py --bin build/bin/autograd_vs_torch --threads 2 \
        [--markdown]
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F


def make_mlp():
    g = torch.Generator().manual_seed(0)
    dims = [784, 512, 256, 10]
    params = []
    for i in range(3):
        bound = 1.0 / dims[i] ** 0.5
        w = (torch.rand(dims[i + 1], dims[i], generator=g) * 2 - 1) * bound
        b = (torch.rand(dims[i + 1], generator=g) * 2 - 1) * bound
        params += [w.requires_grad_(), b.requires_grad_()]
    x = torch.randn(64, 784, generator=g)
    y = torch.randint(0, 10, (64,), generator=g)
    return params, x, y


def mlp_step(state):
    params, x, y = state
    h = x
    for i in range(3):
        h = F.linear(h, params[2 * i], params[2 * i + 1])
        if i < 2:
            h = torch.relu(h)
    F.cross_entropy(h, y).backward()
    for p in params:
        p.grad = None


def chain_step(x):
    h = x
    for i in range(1000):
        if i % 3 == 0:
            h = h * 0.999
        elif i % 3 == 1:
            h = h + 0.001
        else:
            h = torch.tanh(h)
    h.sum().backward()
    x.grad = None


def time_torch(fn, state, min_seconds):
    for _ in range(3):
        fn(state)
    reps = 1
    while True:  # find a repetition count that runs >= min_seconds / 5
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            fn(state)
        dt = time.perf_counter_ns() - t0
        if dt >= min_seconds * 1e9 / 5 or reps > 1 << 20:
            break
        reps *= 2
    trials = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            fn(state)
        trials.append((time.perf_counter_ns() - t0) / reps)
    return statistics.median(trials)


def run_ours(binary, threads, min_seconds):
    env = dict(os.environ, PT_NUM_THREADS=str(threads))
    proc = subprocess.run([binary, str(min_seconds)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"warning: {binary} failed (rc {proc.returncode}):\n{proc.stderr}", file=sys.stderr)
    result = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            result[parts[0]] = float(parts[1])
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin/autograd_vs_torch")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-seconds", type=float, default=0.5)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    ours = run_ours(args.bin, args.threads, args.min_seconds)
    benches = {
        "mlp": (mlp_step, make_mlp(), "MLP 784-512-256-10, batch 64, fwd+bwd"),
        "chain": (chain_step, torch.randn(16).requires_grad_(),
                  "1,000 elementwise ops on [16], fwd+bwd"),
    }
    print(f"# autograd_vs_torch: {platform.processor() or platform.machine()}, "
          f"threads={args.threads}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}")
    if args.markdown:
        print("| benchmark | PromeTorch µs | PyTorch µs | ours/PyTorch |")
        print("|---|---:|---:|---:|")
    else:
        print(f"{'benchmark':42s} {'ours us':>10s} {'torch us':>10s} {'ratio':>7s}")
    missing = 0
    for name, (fn, state, desc) in benches.items():
        theirs = time_torch(fn, state, args.min_seconds)
        o = ours.get(name)
        if o is None:
            missing += 1
            o_s, r_s = "n/a", "n/a"
        else:
            o_s, r_s = f"{o / 1e3:.2f}", f"{o / theirs:.2f}"
        if args.markdown:
            print(f"| {desc} | {o_s} | {theirs / 1e3:.2f} | {r_s} |")
        else:
            print(f"{desc:42s} {o_s:>10s} {theirs / 1e3:10.2f} {r_s:>7s}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
