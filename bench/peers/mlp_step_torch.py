#!/usr/bin/python3
"""PyTorch twin of bench/bench_mlp_step.cpp: the same model (mlp or cnn), loss, optimizer and batch.

usage: mlp_step_torch.py [batch] [steps] [threads] [mlp|cnn]"""
import json
import sys
import time

import torch


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    kind = sys.argv[4] if len(sys.argv) > 4 else "mlp"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    nn = torch.nn
    if kind == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
        x = torch.randn(batch, 1, 28, 28)
    else:
        model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
        x = torch.randn(batch, 784)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    y = torch.arange(batch) % 10

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({"bench": kind + "_step", "impl": "torch", "batch": batch, "step_ms": round(median * 1e3, 3),
                      "samples_per_s": round(batch / median)}))


if __name__ == "__main__":
    main()
