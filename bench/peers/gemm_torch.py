#!/usr/bin/python3
"""PyTorch twin of bench/bench_gemm.cpp: the same shapes and ops (F.linear with bias, matmul of
transposed views, batched matmul), float32, on torch.get_num_threads() threads; GFLOP/s per wall
second and per CPU second (process CPU time over the threads), as bench_gemm prints them.

Run through bench/run_gemm.sh (same machine, same thread count, one run)."""
import json
import sys
import time

import torch

SHAPES = [  # op, M, N, K, ta, tb, batch: as bench_gemm.cpp
    ("matmul", 1024, 1024, 1024, 0, 0, 1), ("matmul", 2048, 2048, 2048, 0, 0, 1),
    ("matmul", 4096, 4096, 4096, 0, 0, 1),
    ("linear", 256, 1024, 784, 0, 0, 1), ("linear", 256, 1024, 1024, 0, 0, 1), ("linear", 256, 10, 1024, 0, 0, 1),
    ("matmul", 256, 784, 1024, 0, 0, 1), ("matmul", 1024, 784, 256, 1, 0, 1),
    ("matmul", 256, 1024, 1024, 0, 0, 1), ("matmul", 1024, 1024, 256, 1, 0, 1),
    ("linear", 768, 384, 128, 0, 0, 1), ("linear", 768, 512, 128, 0, 0, 1), ("linear", 768, 128, 512, 0, 0, 1),
    ("linear", 256, 2304, 768, 0, 0, 1), ("linear", 256, 3072, 768, 0, 0, 1), ("linear", 256, 50304, 768, 0, 0, 1),
    ("bmm", 64, 64, 64, 0, 1, 48), ("bmm", 64, 64, 64, 0, 0, 48),
]


def median_seconds(fn, reps):
    """Median wall seconds and median process CPU seconds of one call, over `reps` samples after
    a warm-up of about 0.2 s; a sample runs fn as many times as fill about 20 ms, as bench_gemm's do."""
    start = time.perf_counter()
    fn()
    first = max(time.perf_counter() - start, 1e-7)
    calls = int(min(max(0.02 / first, 1), 10000))
    for _ in range(int(min(0.2 / first, 100000)) - 1):
        fn()
    wall, cpu = [], []
    for _ in range(reps):
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(calls):
            fn()
        wall.append((time.perf_counter() - start) / calls)
        cpu.append((time.process_time() - cpu_start) / calls)
    wall.sort()
    cpu.sort()
    return wall[len(wall) // 2], cpu[len(cpu) // 2]


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    torch.manual_seed(0)
    with torch.no_grad():
        for op, m, n, k, ta, tb, batch in SHAPES:
            if op == "linear":
                x, w, b = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
                fn = lambda: torch.nn.functional.linear(x, w, b)
            else:
                a = torch.randn(batch, k, m).transpose(-1, -2) if ta else torch.randn(batch, m, k)
                bb = torch.randn(batch, n, k).transpose(-1, -2) if tb else torch.randn(batch, k, n)
                if batch == 1:
                    a, bb = a.squeeze(0), bb.squeeze(0)
                fn = lambda: torch.matmul(a, bb)
            sec, cpu_sec = median_seconds(fn, reps)
            gflop = 2.0 * m * n * k * batch / 1e9
            threads = torch.get_num_threads()
            print(json.dumps({"bench": "gemm", "impl": "torch", "op": op, "M": m, "N": n, "K": k, "ta": ta,
                              "tb": tb, "batch": batch, "threads": threads, "gflops": round(gflop / sec, 2),
                              "gflops_cpu": round(gflop / (cpu_sec / threads), 2)}), flush=True)


if __name__ == "__main__":
    main()
