#!/usr/bin/env python3
"""Ops benchmark: PromeTorch against PyTorch, in one run, on the same threads.

For each op, runs build/bin/bench_ops for that op (the C side: prints "name size
ns_per_call") and then the same op in PyTorch with the same shapes, dtypes and thread count,
and prints ours/PyTorch per op and the geometric mean per size. A ratio below 1 means
PromeTorch is faster.

    python3 benchmarks/ops_vs_torch.py --bin build/bin/bench_ops --threads 2 [--markdown]
"""
import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

SIZES = {"small": (64, 64), "large": (1024, 1024)}


def make_inputs(rows, cols):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(rows, cols, generator=g)
    b = torch.randn(rows, cols, generator=g)
    pos = a.abs() + 0.5
    row = torch.randn(cols, generator=g)
    idx = torch.randint(0, rows, (rows,), generator=g)
    w = torch.randn(cols, generator=g)
    bias = torch.randn(cols, generator=g)
    return dict(a=a, b=b, pos=pos, row=row, idx=idx, w=w, bias=bias)


# Each entry mirrors benchmarks/bench_ops.c exactly (same op, same inputs).
OPS = {
    "add": lambda x: torch.add(x["a"], x["b"]),
    "mul": lambda x: torch.mul(x["a"], x["b"]),
    "div": lambda x: torch.div(x["a"], x["pos"]),
    "sub_broadcast": lambda x: torch.sub(x["a"], x["row"]),
    "mul_scalar": lambda x: torch.mul(x["a"], 0.5),
    "exp": lambda x: torch.exp(x["a"]),
    "log": lambda x: torch.log(x["pos"]),
    "sqrt": lambda x: torch.sqrt(x["pos"]),
    "tanh": lambda x: torch.tanh(x["a"]),
    "sigmoid": lambda x: torch.sigmoid(x["a"]),
    "relu": lambda x: torch.relu(x["a"]),
    "gelu": lambda x: F.gelu(x["a"]),
    "silu": lambda x: F.silu(x["a"]),
    "clamp": lambda x: torch.clamp(x["a"], -0.5, 0.5),
    "where_gt": lambda x: torch.where(torch.gt(x["a"], x["b"]), x["a"], x["b"]),
    "sum": lambda x: torch.sum(x["a"]),
    "mean_dim": lambda x: torch.mean(x["a"], -1),
    "max_dim": lambda x: torch.max(x["a"], -1),
    "argmax": lambda x: torch.argmax(x["a"], -1),
    "var_dim": lambda x: torch.var(x["a"], -1),
    "softmax": lambda x: torch.softmax(x["a"], -1),
    "log_softmax": lambda x: torch.log_softmax(x["a"], -1),
    "cumsum": lambda x: torch.cumsum(x["a"], -1),
    "matmul": lambda x: torch.matmul(x["a"], x["b"]),
    "transpose_contiguous": lambda x: x["a"].t().contiguous(),
    "cat": lambda x: torch.cat([x["a"], x["b"]], 0),
    "index_select": lambda x: torch.index_select(x["a"], 0, x["idx"]),
    "layer_norm": lambda x: F.layer_norm(x["a"], (x["a"].shape[1],), x["w"], x["bias"]),
}


def time_torch(fn, inputs, min_seconds):
    for _ in range(3):
        fn(inputs)
    reps = 1
    while True:  # find a repetition count that runs >= min_seconds / 5
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            fn(inputs)
        dt = time.perf_counter_ns() - t0
        if dt >= min_seconds * 1e9 / 5 or reps > 1 << 22:
            break
        reps *= 2
    trials = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            fn(inputs)
        trials.append((time.perf_counter_ns() - t0) / reps)
    return statistics.median(trials)


def run_ours(binary, threads, min_seconds, only):
    env = dict(os.environ, PT_NUM_THREADS=str(threads))
    cmd = [binary, str(min_seconds)] + ([",".join(only)] if only else [])
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    result = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            result[(parts[0], parts[1])] = float(parts[2])
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin/bench_ops")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-seconds", type=float, default=0.5)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated op names (default: all)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure each op this many times (ours then PyTorch's each time) and "
                         "report the median ratio and its range")
    args = ap.parse_args()
    only = [o for o in args.only.split(",") if o]

    torch.set_num_threads(args.threads)
    inputs = {size_name: make_inputs(r, c) for size_name, (r, c) in SIZES.items()}
    rows = []
    # Per op, ours then PyTorch's, back to back, so slow drifts of a shared machine (other
    # load, clock changes) hit both sides of a ratio alike.
    for name, fn in OPS.items():
        if only and name not in only:
            continue
        trials = {size_name: [] for size_name in SIZES}
        for _ in range(args.repeat):
            ours = run_ours(args.bin, args.threads, args.min_seconds, [name])
            for size_name in SIZES:
                if (name, size_name) not in ours:
                    print(f"warning: bench_ops printed no {name} {size_name}", file=sys.stderr)
                    continue
                theirs = time_torch(fn, inputs[size_name], args.min_seconds)
                trials[size_name].append((ours[(name, size_name)], theirs))
        for size_name, pairs in trials.items():
            if not pairs:
                continue
            ratios = sorted(o / t for o, t in pairs)
            rows.append((name, size_name, statistics.median(o for o, _ in pairs),
                         statistics.median(t for _, t in pairs), statistics.median(ratios),
                         ratios[0], ratios[-1]))
    rows.sort(key=lambda row: list(SIZES).index(row[1]))

    print(f"# ops_vs_torch: {platform.processor() or platform.machine()}, threads={args.threads}, "
          f"torch {torch.__version__}, {time.strftime('%Y-%m-%d')}")
    ranged = args.repeat > 1
    if args.markdown:
        print("| op | size | PromeTorch µs | PyTorch µs | ours/PyTorch |" + (" range |" if ranged else ""))
        print("|---|---|---:|---:|---:|" + ("---|" if ranged else ""))
    else:
        print(f"{'op':24s} {'size':6s} {'ours us':>10s} {'torch us':>10s} {'ratio':>7s}" +
              ("  range" if ranged else ""))
    for name, size, o, t, ratio, lo, hi in rows:
        span = f"{lo:.2f}-{hi:.2f}"
        if args.markdown:
            print(f"| {name} | {size} | {o / 1e3:.2f} | {t / 1e3:.2f} | {ratio:.2f} |" +
                  (f" {span} |" if ranged else ""))
        else:
            print(f"{name:24s} {size:6s} {o / 1e3:10.2f} {t / 1e3:10.2f} {ratio:7.2f}" +
                  (f"  {span}" if ranged else ""))
    for size_name in SIZES:
        ratios = [row[4] for row in rows if row[1] == size_name]
        if ratios:
            gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            worst = max((row for row in rows if row[1] == size_name), key=lambda row: row[4])
            line = f"geomean {size_name}: {gm:.3f} (worst: {worst[0]} {worst[4]:.2f})"
            print(f"\n**{line}**" if args.markdown else line)


if __name__ == "__main__":
    main()
