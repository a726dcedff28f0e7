#!/usr/bin/env python3
"""PyTorch twin of bench/bench_attention_cuda.cpp: torch.nn.functional.scaled_dot_product_attention
(is_causal=True; PyTorch picks its flash / memory-efficient kernel) in bfloat16 on one GPU, forward
and forward + backward, at the same shapes, timed the same way (CUDA events, best of 5 groups).
Needs PyTorch >= 2.0 with CUDA. Run through bench/run_attention_cuda.sh."""
import json
import sys

import torch
import torch.nn.functional as F


def time_ms(fn, reps):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) / reps)
    return best


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    torch.manual_seed(0)
    B, H, D = 8, 12, 64
    for T in (256, 512, 1024, 2048, 4096):
        q, k, v, g = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        with torch.no_grad():
            fwd = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps)

        def fwd_bwd():
            qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
            torch.autograd.grad(F.scaled_dot_product_attention(qq, kk, vv, is_causal=True), (qq, kk, vv), g)

        both = time_ms(fwd_bwd, reps)
        causal_flops = 2.0 * B * H * T * T * D
        print(json.dumps({"bench": "attention_cuda", "impl": "torch", "dtype": "bfloat16", "B": B, "H": H, "T": T,
                          "D": D, "fwd_ms": round(fwd, 4), "fwd_bwd_ms": round(both, 4),
                          "fwd_tflops": round(causal_flops / fwd / 1e9, 3),
                          "fwd_bwd_tflops": round(3 * causal_flops / both / 1e9, 3)}))


if __name__ == "__main__":
    main()
