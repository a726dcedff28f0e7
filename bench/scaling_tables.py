#!/usr/bin/python3
"""Extrapolates Tandem's data-parallel step to 8-1,024 GPUs with the scaling model.

Every number comes from `tandem plan --predict` (engine/strategies/scaling_model.h): this script
only chooses the configurations, turns a per-GPU batch into a step profile, and prints the
tables of docs/SCALING.md (and, with matplotlib, writes one PNG per model). Clusters are
DGX-H100-like nodes of 8 GPUs: NVLink 4 inside a node (370 GB/s bus bandwidth, nccl-tests'
8 x H100 figure; 2 us a step) and 8 x 400 Gb/s InfiniBand per node (400 GB/s; 5 us a step).

Per-GPU compute is an ASSUMPTION (no GPU has run Tandem yet): GPT-2 124M from its FLOPs per
token (6 N + 12 L C T, nanoGPT's estimate) at 40% of an H100's 989 TFLOP/s dense bf16, backward
twice the forward, and AdamW streaming its 16 bytes of state per parameter at 3 TB/s; the MLP and
CNN from a kernel-launch floor plus a per-sample cost (see MODELS). Two scalings: the per-GPU
batch fixed (weak) and the global batch fixed (strong; a per-GPU batch below one example is not
run).

  TANDEM=build/bin/tandem bench/scaling_tables.py [--png DIR]
"""
import argparse
import json
import os
import subprocess
import sys

GPUS = [8, 16, 32, 64, 128, 256, 512, 1024]
H100_BF16 = 989e12
MFU = 0.40


def gpt2_profile(sequences):
    """(forward, backward, optimizer) ms for `sequences` of 1024 tokens on one GPU."""
    n, layers, width, t = 124_475_904, 12, 768, 1024
    flops = (6 * n + 12 * layers * width * t) * t * sequences
    compute_ms = flops / (MFU * H100_BF16) * 1e3
    optimizer_ms = n * 16 * 2 / 3e12 * 1e3  # read and write p, g, m, v in float32
    return compute_ms / 3, 2 * compute_ms / 3, optimizer_ms


def small_profile(floor_ms, per_sample_us):
    def profile(samples):
        compute = floor_ms + per_sample_us * samples * 1e-3
        return compute / 3, 2 * compute / 3, 0.03
    return profile


# name: (model flags, per-GPU batch for the weak scaling, global batch for the strong one,
#        profile(per-GPU batch) -> (F, B, O) ms, what the batch counts)
MODELS = {
    "gpt2": (["--model=gpt2", "--trainer.precision=bf16-mixed"], 16, 512, gpt2_profile, "sequences of 1024 tokens"),
    # About 30 kernels a step at ~5 us each; 784-1024-1024-10 is 3.7 MFLOP a sample forward.
    "mlp": (["--model=mlp"], 256, 65536, small_profile(0.15, 0.03), "images"),
    # About 60 kernels a step; the two convolutions are ~12 MFLOP a sample forward.
    "cnn": (["--model=cnn"], 256, 65536, small_profile(0.3, 0.12), "images"),
}


def predict(tandem, flags, gpus, profile_ms):
    nodes = gpus // 8
    cmd = [tandem, "plan", "--trainer.accelerator=cuda", "--trainer.devices=8", f"--trainer.num_nodes={nodes}",
           "--predict_step_ms=" + ",".join(f"{v:.6f}" for v in profile_ms),
           "--predict_intra=2,370", "--predict_inter=5,400"] + flags
    env = dict(os.environ, TANDEM_SIMULATE_CUDA_DEVICES="8")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["prediction"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--png", help="directory for one PNG per model (needs python3-matplotlib)")
    ap.add_argument("--models", default="gpt2,mlp,cnn")
    args = ap.parse_args()
    tandem = os.environ.get("TANDEM", "build/bin/tandem")
    curves = {}
    for name in args.models.split(","):
        flags, per_gpu, global_batch, profile, unit = MODELS[name]
        print(f"\n### {name}: per-GPU batch {per_gpu} (weak) / global batch {global_batch} (strong) {unit}\n")
        print("| GPUs | nodes | weak: step ms | exposed ms | efficiency | strong: per-GPU batch | step ms | exposed ms "
              "| speedup over 8 GPUs | efficiency vs 8 |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        weak, strong = [], []
        base = None
        for gpus in GPUS:
            w = predict(tandem, flags, gpus, profile(per_gpu))
            weak.append(w["efficiency"])
            batch = global_batch / gpus
            if batch >= 1:
                s = predict(tandem, flags, gpus, profile(batch))
                base = base or (s["step_ms"], gpus)
                speedup = base[0] / s["step_ms"]
                strong.append(speedup / (gpus / base[1]))
                strong_cells = f"{batch:g} | {s['step_ms']:.2f} | {s['exposed_communication_ms']:.2f} | {speedup:.1f}x | {strong[-1]:.0%}"
            else:
                strong.append(None)
                strong_cells = f"{batch:g} | - | - | - | -"
            print(f"| {gpus} | {gpus // 8} | {w['step_ms']:.2f} | {w['exposed_communication_ms']:.2f} | "
                  f"{w['efficiency']:.0%} | {strong_cells} |", flush=True)
        curves[name] = (weak, strong)
    if args.png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            sys.exit("scaling_tables.py: --png needs matplotlib (apt install python3-matplotlib)")
        os.makedirs(args.png, exist_ok=True)
        for name, (weak, strong) in curves.items():
            fig, ax = plt.subplots(figsize=(6, 3.5))
            ax.plot(GPUS, [100 * e for e in weak], "o-", label="per-GPU batch fixed")
            pts = [(g, 100 * e) for g, e in zip(GPUS, strong) if e is not None]
            ax.plot([g for g, _ in pts], [e for _, e in pts], "s--", label="global batch fixed (vs 8 GPUs)")
            ax.set_xscale("log", base=2)
            ax.set_xticks(GPUS, [str(g) for g in GPUS])
            ax.set_ylim(0, 105)
            ax.set_xlabel("GPUs (8 per node)")
            ax.set_ylabel("predicted efficiency %")
            ax.set_title(f"{name}: scaling model, H100 nodes (compute assumed)")
            ax.grid(True, alpha=0.3)
            ax.legend(loc="lower left")
            fig.tight_layout()
            path = os.path.join(args.png, f"scaling_{name}.png")
            tmp = path + ".tmp.png"
            fig.savefig(tmp, dpi=100)
            os.replace(tmp, path)
            print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
