#!/usr/bin/python3
"""PyTorch twin of bench/bench_ddp.cpp: DistributedDataParallel over gloo on CPU processes, the
same MLP (784-1024-1024-10) or CNN, Adam lr 1e-3, the same per-rank batch, one epoch of the same
55k training split, sharded like DistributedSampler (torch's own). One thread per process.

Measures samples/s over the epoch (a barrier at the start and the end; data decoded before the
clock) and peak RSS (max over ranks).

usage: ddp_torch.py [mlp|cnn] [batch_per_rank] [ranks] [root]
prints one JSON line."""
import json
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist_torch import load_split, make_model  # noqa: E402


def worker(rank, world, kind, batch, root, port, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(42)
    x_all, y_all = load_split(root, "train")
    perm = torch.randperm(len(x_all), generator=torch.Generator().manual_seed(42))
    train_idx = perm[5000:]
    x_train, y_train = x_all[train_idx].contiguous(), y_all[train_idx].contiguous()
    dataset = torch.utils.data.TensorDataset(x_train, y_train)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    indices = torch.tensor(list(iter(sampler)))
    model = torch.nn.parallel.DistributedDataParallel(make_model(kind))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    dist.barrier()
    start = time.perf_counter()
    for i in range(0, len(indices), batch):
        idx = indices[i:i + batch]
        loss = torch.nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.barrier()
    seconds = time.perf_counter() - start
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        results.put({"bench": f"ddp_{kind}", "impl": "torch_gloo", "ranks": world, "batch_per_rank": batch,
                     "train_samples": len(dataset), "epoch_s": round(seconds, 3),
                     "samples_per_s": round(len(dataset) / seconds), "peak_rss_mb_per_rank": round(rss.item(), 1)})
    dist.destroy_process_group()


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else "mlp"
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    world = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    root = sys.argv[4] if len(sys.argv) > 4 else "/usr/share/datasets/fashion-mnist"
    port = 29500 + os.getpid() % 1000
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    mp.spawn(worker, args=(world, kind, batch, root, port, results), nprocs=world, join=True)
    print(json.dumps(results.get()))


if __name__ == "__main__":
    main()
