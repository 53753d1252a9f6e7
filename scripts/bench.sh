#!/usr/bin/env bash
# Runs every benchmark against its peer, on 2 threads, printing ratios (see docs/benchmarks.md).
set -euo pipefail
build="${1:-build}"
cd "$(dirname "$0")/.."
echo "== ops vs PyTorch =="
/usr/bin/python3 benchmarks/ops_vs_torch.py --bin "$build/bin/bench_ops" --threads 2
echo "== float32 matmul 1024^3 vs direct OpenBLAS =="
PT_NUM_THREADS=2 "$build/bin/bench_matmul_blas"
