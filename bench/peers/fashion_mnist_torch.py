#!/usr/bin/python3
"""PyTorch twin of bench/bench_fashion_mnist.cpp: the same MLP (784-1024-1024-10) or CNN, Adam
lr 1e-3, batch 256, on the same Fashion-MNIST IDX .gz files (read with gzip + numpy, no
torchvision), the same 55k/5k train/val split sizes and normalization ((x/255 - 0.2860)/0.3530).

Measures training samples/s over the epochs (batch gather + forward + backward + step, the data
already decoded in memory, as Tandem's data module holds it), and peak RSS. With epochs > 1 it
keeps training and reports the test accuracy after the last epoch.

usage: fashion_mnist_torch.py [mlp|cnn] [epochs] [threads] [root]
prints one JSON line."""
import gzip
import json
import os
import resource
import struct
import sys
import time

import numpy as np
import torch

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_split(root, prefix):
    def path(kind):
        base = os.path.join(root, f"{prefix}-{kind}")
        return base if os.path.exists(base) else base + ".gz"
    images = read_idx(path("images-idx3-ubyte")).astype(np.float32) / 255.0
    labels = read_idx(path("labels-idx1-ubyte")).astype(np.int64)
    x = torch.from_numpy((images - MEAN) / STD).unsqueeze(1)  # [N, 1, 28, 28]
    return x, torch.from_numpy(labels)


def make_model(kind):
    nn = torch.nn
    if kind == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    # Flattens like Tandem's MLP does, so both read the same [B, 1, 28, 28] batches.
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else "mlp"
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    root = sys.argv[4] if len(sys.argv) > 4 else "/usr/share/datasets/fashion-mnist"
    batch, val_size = 256, 5000
    torch.set_num_threads(threads)
    torch.manual_seed(42)

    x_all, y_all = load_split(root, "train")
    perm = torch.randperm(len(x_all), generator=torch.Generator().manual_seed(42))
    train_idx = perm[val_size:]
    x_train, y_train = x_all[train_idx].contiguous(), y_all[train_idx].contiguous()
    x_test, y_test = load_split(root, "t10k")

    model = make_model(kind)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.functional.cross_entropy
    n = len(x_train)
    train_s = 0.0
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(n)
        start = time.perf_counter()
        for i in range(0, n, batch):
            idx = order[i:i + batch]
            loss = loss_fn(model(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        train_s += time.perf_counter() - start

    result = {"bench": f"fashion_mnist_{kind}", "impl": "torch", "threads": threads, "batch": batch,
              "epochs": epochs, "train_samples": n, "epoch_s": round(train_s / epochs, 3),
              "samples_per_s": round(n * epochs / train_s),
              # ru_maxrss is in KiB on Linux.
              "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if epochs > 1:
        model.eval()
        with torch.no_grad():
            correct = sum((model(x_test[i:i + 1000]).argmax(1) == y_test[i:i + 1000]).sum().item()
                          for i in range(0, len(x_test), 1000))
        result["test_acc"] = round(correct / len(x_test), 4)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
