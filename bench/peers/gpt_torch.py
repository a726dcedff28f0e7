#!/usr/bin/python3
"""PyTorch twin of Tandem's GPT (models/gpt.h): the same GPT-2 layout, parameter names and init
as nanoGPT's model.py (written here for torch 1.13, which has no fused attention), the same text
windows and training recipe.

usage:
  gpt_torch.py check CKPT BATCH            loss and gradients of a Tandem checkpoint's weights on the
                                           batch file (safetensors: x, y int64 [B, T]); prints JSON
                                           {"loss": ..., "grads": {name: max |torch - tandem|}}
                                           against the batch file's grad.<name> tensors
  gpt_torch.py train TEXT STEPS [threads]  nanoGPT's CPU recipe on a text's bytes (gpt-nano, batch 12,
                                           AdamW 1e-3 (0.9, 0.99) wd 0.1, clip 1, warm-up 100 then cosine
                                           to 1e-4); prints JSON: ms/step, val loss over 200 batches, sample
  gpt_torch.py step PRESET B T STEPS [threads]   ms per AdamW training step of gpt2/gpt-nano on random
                                           tokens, and peak RSS
  gpt_torch.py ddp TEXT STEPS [ranks]      the recipe's model and optimizer (constant lr 1e-3, clip 1)
                                           under DistributedDataParallel over gloo, batch 12 per rank,
                                           one thread per process; prints JSON: ms per step after 5
                                           warm-up steps (rank 0's clock; each step ends with the
                                           gradient allreduce), peak RSS (max over ranks)
  gpt_torch.py cuda PRESET B STEPS PRECISION [compile]
                                           the preset at its block_size on one GPU, AdamW lr 1e-4,
                                           random tokens, autocast to bf16 for bf16-mixed (32-true:
                                           float32), eager or torch.compile'd; attention through
                                           scaled_dot_product_attention (nanoGPT's flash path); prints
                                           JSON: ms per step after 5 warm-up steps, tokens per second
"""
import json
import math
import os
import resource
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "gpt-nano": dict(n_layer=4, n_head=4, n_embd=128, block_size=64, vocab_size=256),
    "gpt-char": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, vocab_size=256),
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50304),
}


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if x.is_cuda:  # nanoGPT's fused path on a GPU (torch 2); the CPU keeps the explicit form
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout.p if self.training else 0.0,
                                               is_causal=True)
            return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = self.attn_dropout(F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd, dropout, bias):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout, bias)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd, dropout, bias)
        if not bias:
            self.ln_1.bias = None
            self.ln_2.bias = None

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size, dropout=0.0, bias=True):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd), wpe=nn.Embedding(block_size, n_embd), drop=nn.Dropout(dropout),
            h=nn.ModuleList([Block(n_embd, n_head, dropout, bias) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd)))
        if not bias:
            self.transformer.ln_f.bias = None
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                torch.nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                torch.nn.init.zeros_(p)

    def forward(self, idx, targets=None):
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=0.8, top_k=200):
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.block_size:])
            logits = logits[:, -1, :] / temperature
            if top_k:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("inf")
            idx = torch.cat((idx, torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)), dim=1)
        return idx


DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}


def load_safetensors(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    out = {}
    for name, spec in header.items():
        begin, end = spec["data_offsets"]
        raw = bytearray(data[begin:end])
        out[name] = torch.frombuffer(raw, dtype=DTYPES[spec["dtype"]]).reshape(spec["shape"]).clone()
    return out, meta


def model_from_checkpoint(path):
    tensors, meta = load_safetensors(path)
    h = json.loads(meta["tandem.trainer_state"])["hparams"] if "tandem.trainer_state" in meta else json.loads(meta["hparams"])
    model = GPT(h["n_layer"], h["n_head"], h["n_embd"], h["block_size"], h["vocab_size"], 0.0, h.get("bias", True))
    weights = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert missing == ["lm_head.weight"] and not unexpected, (missing, unexpected)  # lm_head is wte (tied)
    return model.double()


def check(ckpt, batch_path):
    model = model_from_checkpoint(ckpt)
    batch, _ = load_safetensors(batch_path)
    _, loss = model(batch["x"], batch["y"])
    loss.backward()
    grads = {}
    for name, p in model.named_parameters():
        theirs = batch["grad." + name].double()
        grads[name] = (p.grad - theirs).abs().max().item()
    print(json.dumps({"loss": loss.item(), "tandem_loss": batch["loss"].double().item(),
                      "loss_diff": abs(loss.item() - batch["loss"].double().item()), "grads": grads}))


def windows(data, n, block, gen):
    ix = torch.randint(len(data) - block, (n,), generator=gen)
    x = torch.stack([data[i:i + block] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block] for i in ix])
    return x, y


def lr_at(step, warmup=100, total=2000, lr=1e-3, min_lr=1e-4):
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    ratio = (step - warmup) / (total - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def recipe_optimizer(model):
    """The recipe's AdamW: weight decay 0.1 on the matrices only, betas (0.9, 0.99)."""
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99))


def recipe_step(model, opt, x, y):
    """One training step of the recipe: forward, backward, gradients clipped to norm 1, update."""
    _, loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def train(text_path, steps, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    raw = torch.frombuffer(bytearray(open(text_path, "rb").read()), dtype=torch.uint8).long()
    split = len(raw) * 9 // 10
    train_data, val_data = raw[:split], raw[split:]
    cfg = PRESETS["gpt-nano"]
    model = GPT(**cfg)
    opt = recipe_optimizer(model)
    gen = torch.Generator().manual_seed(1337)
    start = time.perf_counter()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total=steps)
        recipe_step(model, opt, *windows(train_data, 12, cfg["block_size"], gen))
    elapsed = time.perf_counter() - start
    model.eval()
    val_gen = torch.Generator().manual_seed(42)
    with torch.no_grad():
        losses = [model(*windows(val_data, 12, cfg["block_size"], val_gen))[1].item() for _ in range(200)]
        torch.manual_seed(1337)
        sample = model.generate(torch.tensor([[10]]), 300)[0].tolist()
    print(json.dumps({"ms_per_step": 1000 * elapsed / steps, "val_loss": sum(losses) / len(losses),
                      "sample": bytes(sample).decode("utf-8", "replace")}))


def step_time(preset, batch, block, steps, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = GPT(**PRESETS[preset])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, PRESETS[preset]["vocab_size"], (batch, block))
    y = torch.randint(0, PRESETS[preset]["vocab_size"], (batch, block))
    times = []
    for i in range(steps + 1):
        t0 = time.perf_counter()
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i > 0:  # the first step allocates the optimizer state
            times.append(time.perf_counter() - t0)
    times.sort()
    print(json.dumps({"ms_per_step_median": 1000 * times[len(times) // 2],
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def cuda_step_time(preset, batch, steps, precision, compiled):
    warmup = 5
    if steps <= warmup:
        sys.exit("gpt_torch.py cuda: STEPS must be above the 5 warm-up steps")
    if precision not in ("32-true", "bf16-mixed"):
        sys.exit(f"gpt_torch.py cuda: precision {precision!r}; allowed: 32-true, bf16-mixed")
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # Tandem's 32-true is float32 throughout
    cfg = PRESETS[preset]
    model = GPT(**cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_model = torch.compile(model) if compiled else model
    block = cfg["block_size"]
    start = None
    for i in range(steps):
        x = torch.randint(0, 256, (batch, block), device="cuda")
        y = torch.randint(0, 256, (batch, block), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
            _, loss = step_model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i == warmup - 1:
            torch.cuda.synchronize()
            start = time.perf_counter()
    torch.cuda.synchronize()
    ms = 1000 * (time.perf_counter() - start) / (steps - warmup)
    print(json.dumps({"preset": preset, "B": batch, "T": block, "precision": precision,
                      "torch": torch.__version__ + (" compile" if compiled else " eager"), "ms_per_step": ms,
                      "tokens_per_s": 1000 * batch * block / ms, "loss": loss.item()}))


def ddp_worker(rank, world, text_path, steps, port, results):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1337)
    raw = torch.frombuffer(bytearray(open(text_path, "rb").read()), dtype=torch.uint8).long()
    train_data = raw[:len(raw) * 9 // 10]
    cfg = PRESETS["gpt-nano"]
    model = torch.nn.parallel.DistributedDataParallel(GPT(**cfg))
    opt = recipe_optimizer(model)
    gen = torch.Generator().manual_seed(1337 + rank)
    warmup, start = 5, None
    for step in range(steps):
        recipe_step(model, opt, *windows(train_data, 12, cfg["block_size"], gen))
        if step == warmup - 1:
            start = time.perf_counter()
    elapsed = time.perf_counter() - start
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        results.put({"ranks": world, "ms_per_step": 1000 * elapsed / (steps - warmup), "peak_rss_mb_per_rank": rss.item()})
    dist.destroy_process_group()


def ddp(text_path, steps, world):
    import torch.multiprocessing as mp
    if steps <= 5:
        sys.exit("gpt_torch.py ddp: STEPS must be above the 5 warm-up steps")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    mp.spawn(ddp_worker, args=(world, text_path, steps, 29500 + os.getpid() % 1000, results), nprocs=world, join=True)
    print(json.dumps(results.get()))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "check":
        check(sys.argv[2], sys.argv[3])
    elif mode == "train":
        train(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 2)
    elif mode == "ddp":
        ddp(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 2)
    elif mode == "step":
        step_time(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]) if len(sys.argv) > 6 else 2)
    elif mode == "cuda":
        cuda_step_time(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5],
                       len(sys.argv) > 6 and sys.argv[6] == "compile")
    else:
        sys.exit(__doc__)
