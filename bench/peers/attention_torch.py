#!/usr/bin/python3
"""PyTorch twin of bench/bench_attention.cpp: causal attention as nanoGPT's CausalSelfAttention
computes it without flash attention (PyTorch 1.13 has no scaled_dot_product_attention):
matmul, masked_fill with -inf, softmax, matmul; forward under no_grad, and forward + backward
through torch.autograd.grad.

Run through bench/run_attention.sh (same machine, same thread count, one run)."""
import json
import math
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


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def attention(q, k, v, mask):
    t = q.size(-2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(mask[:t, :t] == 0, float("-inf"))
    return torch.softmax(att, dim=-1) @ v


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    torch.manual_seed(0)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    sec = min(timed(lambda: a @ b) for _ in range(reps))
    print(json.dumps({"bench": "matmul_peak", "impl": "torch", "gflops": round(2.0 * 1024 ** 3 / sec / 1e9, 2)}))
    shapes = [("gpt-nano", 12, 4, 64, 32), ("gpt2-T64", 4, 12, 64, 64), ("gpt-char", 8, 6, 256, 64),
              ("T1024", 1, 4, 1024, 64)]
    for name, B, H, T, D in shapes:
        q, k, v, g = (torch.randn(B, H, T, D) for _ in range(4))
        mask = torch.tril(torch.ones(T, T))
        with torch.no_grad():
            fwd = median_seconds(lambda: attention(q, k, v, mask), reps)

        def fwd_bwd():
            qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
            torch.autograd.grad(attention(qq, kk, vv, mask), (qq, kk, vv), g)

        both = median_seconds(fwd_bwd, reps)
        dense = B * H * T * T * D
        print(json.dumps({"bench": "attention", "impl": "torch", "shape": name, "B": B, "H": H, "T": T, "D": D,
                          "fwd_ms": round(fwd * 1e3, 4), "fwd_bwd_ms": round(both * 1e3, 4),
                          "fwd_gflops": round(4 * dense / fwd / 1e9, 2),
                          "fwd_bwd_gflops": round(12 * dense / both / 1e9, 2)}))


if __name__ == "__main__":
    main()
