#!/usr/bin/env python3
"""Training benchmark: PromeTorch against PyTorch, in one run, on the same threads.

Trains the examples' MLP (784-512-256-128-10, ReLU), CNN (two conv3x3 (no bias) +
batch-norm + ReLU + max-pool blocks, linear 128, ReLU, dropout 0.25, linear 10) and ResNet-20
(examples/resnet.c: 3 stages x 3 basic blocks of 16/32/64 channels, 1x1 conv + BN shortcuts where
the shape changes, global average pooling, linear 10) on Fashion-MNIST with Adam (lr 1e-3) and
batch size 64, data held in memory and batches drawn by a random permutation, in PyTorch
and in build/bin/train_vs_torch (the C half), alternating, and prints each side's training
time, test accuracy and the time ratio ours/PyTorch (below 1 = PromeTorch faster).

    python3 benchmarks/train_vs_torch.py --bin build/bin/train_vs_torch --threads 2 \
        [--batches 0 (= one epoch)] [--repeat 1] [--models mlp,cnn,resnet20] [--seeds 0]
        [--markdown]

--seeds 0,1,2 runs every model once per seed (times: median over seeds and repeats; accuracy:
mean over seeds).
"""
import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(dir_, split, what, idx):
    for name in (f"{split}-{what}-{idx}-ubyte", f"{split}-{what}-{idx}-ubyte.gz"):
        if os.path.exists(os.path.join(dir_, name)):
            return os.path.join(dir_, name)
    sys.exit(f"no {split} {what} in {dir_}")


def load_split(dir_, train):
    split = "train" if train else "t10k"
    x = read_idx(find(dir_, split, "images", "idx3")).astype(np.float32) / 255.0
    y = read_idx(find(dir_, split, "labels", "idx1")).astype(np.int64)
    x = (torch.from_numpy(x).unsqueeze(1) - MEAN) / STD
    return x, torch.from_numpy(y)


def make_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                         nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def make_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(32, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        h = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(h + (self.shortcut(x) if self.shortcut is not None else x))


def make_resnet20():
    layers = [nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    widths = [16, 32, 64]
    for s, w in enumerate(widths):
        layers.append(nn.Sequential(*[
            BasicBlock(w if i or not s else widths[s - 1], w, 2 if i == 0 and s > 0 else 1)
            for i in range(3)]))
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


MODELS = {"mlp": make_mlp, "cnn": make_cnn, "resnet20": make_resnet20}


def torch_run(model_name, data, batches, batch_size, seed):
    torch.manual_seed(seed)
    (train_x, train_y), (test_x, test_y) = data
    model = MODELS[model_name]()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    n_batches = len(train_x) // batch_size
    if 0 < batches < n_batches:
        n_batches = batches
    t0 = time.perf_counter()
    perm = torch.randperm(len(train_x))
    for b in range(n_batches):
        idx = perm[b * batch_size:(b + 1) * batch_size]
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - t0
    model.eval()
    correct = 0
    with torch.no_grad():
        for s in range(0, len(test_x), 1000):
            correct += (model(test_x[s:s + 1000]).argmax(1) == test_y[s:s + 1000]).sum().item()
    return {"impl": "pytorch", "model": model_name, "batches": n_batches,
            "train_seconds": seconds, "test_accuracy": correct / len(test_x)}


def ours_run(binary, model_name, data_dir, batches, batch_size, seed, threads):
    env = dict(os.environ, PT_NUM_THREADS=str(threads))
    out = subprocess.run([binary, "--model", model_name, "--data", data_dir, "--batches",
                          str(batches), "--batch-size", str(batch_size), "--seed", str(seed)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin/train_vs_torch")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = (load_split(args.data, True), load_split(args.data, False))
    print(f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{args.threads} threads, batch {args.batch_size}")
    rows = []
    for model_name in args.models.split(","):
        ours, theirs = [], []
        for seed in (int(s) for s in args.seeds.split(",")):
            for _ in range(args.repeat):
                theirs.append(torch_run(model_name, data, args.batches, args.batch_size, seed))
                ours.append(ours_run(args.bin, model_name, args.data, args.batches,
                                     args.batch_size, seed, args.threads))
        t_ours = [r["train_seconds"] for r in ours]
        t_torch = [r["train_seconds"] for r in theirs]
        rows.append((model_name, ours[-1]["batches"], statistics.median(t_ours),
                     statistics.median(t_torch),
                     statistics.median(a / b for a, b in zip(t_ours, t_torch)),
                     statistics.mean(r["test_accuracy"] for r in ours),
                     statistics.mean(r["test_accuracy"] for r in theirs),
                     min(t_ours), max(t_ours), min(t_torch), max(t_torch)))
    if args.markdown:
        print("| model | batches | ours s (range) | torch s (range) | ours/torch | acc ours | "
              "acc torch |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]:.2f} ({r[7]:.2f}-{r[8]:.2f}) | {r[3]:.2f} "
                  f"({r[9]:.2f}-{r[10]:.2f}) | {r[4]:.3f} | {r[5]:.4f} | {r[6]:.4f} |")
    else:
        for r in rows:
            print(f"{r[0]:8s} batches {r[1]:5d}  ours {r[2]:8.2f} s  torch {r[3]:8.2f} s  "
                  f"ratio {r[4]:.3f}  acc ours {r[5]:.4f} torch {r[6]:.4f}")


if __name__ == "__main__":
    main()
