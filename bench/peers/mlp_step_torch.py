#!/usr/bin/python3
"""PyTorch twin of bench/bench_mlp_step.cpp: the same model (mlp or cnn), loss, optimizer, batch,
device and precision.

usage: mlp_step_torch.py [batch] [steps] [threads] [mlp|cnn] [cpu|cuda] [32-true|bf16-mixed|16-mixed] [eager|compile]

On CUDA the clock covers `steps` steps queued back to back and one synchronize (best of three
rounds), as the Tandem side does; bf16-mixed/16-mixed use torch.autocast (16-mixed with
torch.cuda.amp.GradScaler). `compile` wraps the model in torch.compile (warm-up compiles)."""
import json
import sys
import time

import torch


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    kind = sys.argv[4] if len(sys.argv) > 4 else "mlp"
    device = sys.argv[5] if len(sys.argv) > 5 else "cpu"
    precision = sys.argv[6] if len(sys.argv) > 6 else "32-true"
    mode = sys.argv[7] if len(sys.argv) > 7 else "eager"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    # Tandem's 32-true keeps float32 products (TF32 off), as PyTorch's matmul default.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    nn = torch.nn
    if kind == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
        x = torch.randn(batch, 1, 28, 28)
    else:
        model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
        x = torch.randn(batch, 784)
    model = model.to(device)
    x = x.to(device)
    y = (torch.arange(batch) % 10).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    forward = torch.compile(model) if mode == "compile" else model
    low = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision)
    scaler = torch.cuda.amp.GradScaler() if precision == "16-mixed" else None

    def step():
        with torch.autocast(device_type=device, dtype=low, enabled=low is not None):
            loss = torch.nn.functional.cross_entropy(forward(x), y)
        opt.zero_grad()
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(5):
        step()
    sync()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        step()
        sync()
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(steps):
                step()
            sync()
            best = min(best, (time.perf_counter() - start) / steps)
        median = best
        peak_mb = torch.cuda.max_memory_allocated() / 1e6
    else:
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        times.sort()
        median = times[len(times) // 2]
        peak_mb = 0.0
    print(json.dumps({"bench": kind + "_step", "impl": "torch-" + mode, "device": device, "precision": precision,
                      "batch": batch, "step_ms": round(median * 1e3, 3), "samples_per_s": round(batch / median),
                      "peak_device_mb": round(peak_mb, 1)}))


if __name__ == "__main__":
    main()
