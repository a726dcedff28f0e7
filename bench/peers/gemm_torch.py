#!/usr/bin/python3
"""PyTorch twin of bench/bench_gemm.cpp: torch.nn.functional.linear at the same shapes.

Run through bench/run_gemm.sh (same machine, same thread count, one run)."""
import json
import sys
import time

import torch


def median_seconds(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    torch.manual_seed(0)
    shapes = [(256, 1024, 784), (256, 1024, 1024), (256, 10, 1024),
              (1024, 784, 256), (1024, 1024, 256), (1024, 1024, 1024)]
    with torch.no_grad():
        for m, n, k in shapes:
            x, w, b = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
            sec = median_seconds(lambda: torch.nn.functional.linear(x, w, b), reps)
            print(json.dumps({"bench": "linear", "impl": "torch", "M": m, "N": n, "K": k,
                              "gflops": round(2.0 * m * n * k / sec / 1e9, 2)}))


if __name__ == "__main__":
    main()
