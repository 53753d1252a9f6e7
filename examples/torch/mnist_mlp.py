#!/usr/bin/env python3
"""PyTorch twin of examples/mnist_mlp.c: the same 784-512-256-128-10 ReLU MLP, Adam(lr=1e-3),
batch 64, shuffled, inputs scaled to [0, 1] and normalized with Fashion-MNIST's mean/std
(0.2860, 0.3530), cross-entropy loss. Reads the idx.gz files directly (no torchvision).
Prints the same `final:` line as the C program, so the two can be compared:

    /usr/bin/python3 examples/torch/mnist_mlp.py --epochs 1
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.nn as nn


def read_idx(path):
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(directory, split, mean, std):
    def find(stem):
        for name in (stem, stem + ".gz"):
            if os.path.exists(os.path.join(directory, name)):
                return os.path.join(directory, name)
        raise FileNotFoundError(stem)
    x = read_idx(find(f"{split}-images-idx3-ubyte")).astype(np.float32) / 255.0
    y = read_idx(find(f"{split}-labels-idx1-ubyte")).astype(np.int64)
    x = (torch.from_numpy(x) - mean) / std
    return x.reshape(-1, 1, 28, 28), torch.from_numpy(y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    mean, std = (0.1307, 0.3081) if "fashion" not in args.data.lower() else (0.2860, 0.3530)
    xtr, ytr = load(args.data, "train", mean, std)
    xte, yte = load(args.data, "t10k", mean, std)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                          nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.time()
    acc = 0.0
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr))
        for i in range(0, len(xtr), args.batch_size):
            idx = perm[i:i + args.batch_size]
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print(f"epoch {epoch + 1}: last loss {loss.item():.4f} test accuracy {acc:.4f}")
    print(f"final: test_accuracy={acc:.4f} train_seconds={time.time() - t0:.1f} "
          f"epochs={args.epochs}")


if __name__ == "__main__":
    main()
