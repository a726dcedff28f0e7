#!/usr/bin/env python3
"""Mutation check of the emulation build (docs/CUDA.md, "Does it catch bugs?").

Applies one deliberate bug at a time to kernels/cuda, rebuilds the emulated GPU tests, runs
them, records which tests fail, and restores the file. Prints one Markdown table row per
mutation. Usage: scripts/emulation_mutations.py [build-emu]  (a configured emulation build)
"""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / (sys.argv[1] if len(sys.argv) > 1 else "build-emu")

# (file, text, replacement, what the mutation is)
MUTATIONS = [
    ("kernels/cuda/kernel_utils.cuh",
     "  if (lane == 0) scratch[warp] = v;\n  __syncthreads();\n",
     "  if (lane == 0) scratch[warp] = v;\n",
     "barrier removed: block_sum's `__syncthreads` between the warps writing their partial sums and warp 0 reading them"),
    ("kernels/cuda/kernel_utils.cuh",
     "for (int delta = 16; delta > 0; delta >>= 1) v += __shfl_down_sync",
     "for (int delta = 8; delta > 0; delta >>= 1) v += __shfl_down_sync",
     "wrong shuffle offset: warp_sum starts at offset 8 instead of 16"),
    ("kernels/cuda/softmax_kernels.cuh",
     "v += __shfl_xor_sync(kFullMask, v, mask);",
     "v += __shfl_xor_sync(kFullMask, v, mask == 1 ? 3 : mask);",
     "equivalent mutant: the softmax warp sum's last xor step pairs lanes 3 apart (after the steps"
     " 16..2 the lanes l and l^3 hold the two halves, so the sum is unchanged: not a bug)"),
    ("kernels/cuda/softmax_kernels.cuh",
     "v += __shfl_xor_sync(kFullMask, v, mask);",
     "v += __shfl_xor_sync(kFullMask, v, mask >> 1);",
     "wrong shuffle offset: the softmax warp sum's xor steps halved (8, 4, 2, 1, 0)"),
    ("kernels/cuda/conv_pool_cuda.cu",
     "cuda::launch<channel_sum_kernel<T>>(unsigned(channels),",
     "cuda::launch<channel_sum_kernel<T>>(unsigned(channels - 1),",
     "wrong grid size: the conv2d bias gradient launches one block (channel) too few"),
    ("kernels/cuda/reduce_kernels.cuh",
     "for (int64_t k = head + vectors * kVec + lane; k < n; k += group)",
     "for (int64_t k = head + vectors * kVec + lane; k < n - 1; k += group)",
     "bound off by one: a row reduction's tail loop stops one element short"),
]


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)


def main():
    env = dict(os.environ, TANDEM_EMULATED_GPUS="2", TANDEM_CUDA_POISON="1")
    print("| mutation | tests that fail |")
    print("|---|---|")
    for path, old, new, what in MUTATIONS:
        file = ROOT / path
        original = file.read_text()
        if old not in original:
            print(f"| {what} | (not applied: text not found in {path}) |")
            continue
        file.write_text(original.replace(old, new, 1))
        try:
            build = run(["cmake", "--build", str(BUILD), "--target", "test_cuda_backend"])
            if build.returncode != 0:
                print(f"| {what} | (build failed) |")
                continue
            tests = run([str(BUILD / "tests/gpu/test_cuda_backend"), "--gtest_brief=1"], env=env)
            failed = sorted(set(re.findall(r"^\[  FAILED  \] ([A-Za-z0-9_.]+)", tests.stdout, re.M)))
            crashed = tests.returncode != 0 and not failed
            result = ", ".join(f"`{t}`" for t in failed) or ("the test program crashed" if crashed else "none: NOT CAUGHT")
            print(f"| {what} (`{path}`) | {result} |", flush=True)
        finally:
            file.write_text(original)
    run(["cmake", "--build", str(BUILD), "--target", "test_cuda_backend"])


if __name__ == "__main__":
    main()
