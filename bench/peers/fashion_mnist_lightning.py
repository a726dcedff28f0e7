#!/usr/bin/env python3
"""Lightning twin of `tandem fit` with its defaults on one device: the MLP 784-1024-1024-10 on
Fashion-MNIST's training file (read with gzip + numpy, normalized with (x/255 - 0.2860)/0.3530),
batch 256, Adam lr 1e-3 with a cosine from lr to 0 over the epochs (CosineAnnealingLR, stepped per
epoch), float32 with TF32 off, seed 42, logs and checkpoints as Lightning's defaults write them.

The data is Tandem's to the example: the 55k/5k train/val split and each epoch's training order
are made by the algorithm of engine/data/sampler.cpp (a Fisher-Yates shuffle driven by
std::mt19937_64, seeded from (seed, stream) through splitmix64), reimplemented below; the
validation set is read in index order and the last, smaller batch of an epoch is kept, as Tandem
does. val_loss and val_acc are batch means weighted by batch size (Lightning's epoch reduction,
which Tandem's logger follows). Parameter init differs (Tandem's generator is its own).

usage: fashion_mnist_lightning.py [epochs] [root] [out_dir] [gpu|cpu]
prints one JSON line: fit_s (trainer.fit's wall time), samples_per_s, val_loss, val_acc."""
import json
import os
import sys
import time

import numpy as np

from fashion_mnist_torch import read_idx  # the same IDX reader as the plain PyTorch twin

MEAN, STD = 0.2860, 0.3530
BATCH, VAL_SIZE, SEED, LR = 256, 5000, 42, 1e-3
MASK64 = (1 << 64) - 1


def mix64(x):
    """splitmix64's finalizer (engine/data/sampler.cpp)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def mt19937_64(seed, count):
    """The first `count` outputs of std::mt19937_64(seed) (the C++ standard's 64-bit Mersenne Twister
    and seeding), the state twisted 312 words at a time with numpy."""
    state = [seed & MASK64]
    for i in range(1, 312):
        prev = state[-1]
        state.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64)
    s = np.array(state, dtype=np.uint64)
    upper, lower, twist_a = np.uint64(0xFFFFFFFF80000000), np.uint64(0x7FFFFFFF), np.uint64(0xB5026F5AA96619E9)
    one = np.uint64(1)

    def mixed(x):
        return (x >> one) ^ ((x & one) * twist_a)

    blocks = []
    for _ in range((count + 311) // 312):
        # Word i takes word i+1 as it was and word i+156 (mod 312) as updated so far: three runs.
        s[:156] = s[156:] ^ mixed((s[:156] & upper) | (s[1:157] & lower))
        s[156:311] = s[:155] ^ mixed((s[156:311] & upper) | (s[157:] & lower))
        s[311] = s[155] ^ mixed((s[311] & upper) | (s[0] & lower))
        x = s.copy()
        x ^= (x >> np.uint64(29)) & np.uint64(0x5555555555555555)
        x ^= (x << np.uint64(17)) & np.uint64(0x71D67FFFEDA60000)
        x ^= (x << np.uint64(37)) & np.uint64(0xFFF7EEE000000000)
        blocks.append(x ^ (x >> np.uint64(43)))
    return np.concatenate(blocks)[:count]


def seeded_shuffle(values, seed, stream):
    """tandem::data::seeded_shuffle: the same permutation of `values` (a list), in place. Draw k
    bounds Fisher-Yates' swap partner by b = n - k with Lemire's multiply-shift (the high 64 bits of
    draw * b), redrawn while the low 64 bits fall under (2^64 - b) mod b: taken vectorized when no
    draw needs that test (almost always, as b < 2^32), one by one otherwise."""
    n = len(values)
    if n < 2:
        return values
    seed = mix64(seed) ^ mix64((mix64(stream) + 0x5851F42D4C957F2D) & MASK64)
    bounds = np.arange(n, 1, -1, dtype=np.uint64)
    draws = mt19937_64(seed, len(bounds))
    if np.any(draws * bounds < bounds):  # wrapping product: the low 64 bits
        draws, picks, k = [int(d) for d in mt19937_64(seed, 2 * len(bounds) + 64)], [], 0
        for b in range(n, 1, -1):
            m = draws[k] * b
            k += 1
            if (m & MASK64) < b:
                while (m & MASK64) < ((1 << 64) - b) % b:
                    m, k = draws[k] * b, k + 1
            picks.append(m >> 64)
    else:
        shift = np.uint64(32)
        low = (draws & np.uint64(0xFFFFFFFF)) * bounds
        picks = (((draws >> shift) * bounds + (low >> shift)) >> shift).tolist()
    for i, j in zip(range(n - 1, 0, -1), picks):
        values[i], values[j] = values[j], values[i]
    return values


def tandem_split(n, val_size, seed):
    """random_split(dataset, {n - val_size, val_size}, seed): each part's indices, sorted."""
    order = seeded_shuffle(list(range(n)), seed, MASK64)
    return sorted(order[:n - val_size]), sorted(order[n - val_size:])


def load_train(root):
    def path(kind):
        base = os.path.join(root, f"train-{kind}")
        return base if os.path.exists(base) else base + ".gz"
    images = (read_idx(path("images-idx3-ubyte")).astype(np.float32) / 255.0 - MEAN) / STD
    return images[:, None, :, :], read_idx(path("labels-idx1-ubyte")).astype(np.int64)


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    root = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
    out_dir = sys.argv[3] if len(sys.argv) > 3 else "lightning_twin"
    accelerator = sys.argv[4] if len(sys.argv) > 4 else "gpu"

    import lightning as L
    import torch
    from lightning.pytorch.loggers import CSVLogger

    torch.backends.cuda.matmul.allow_tf32 = False  # Tandem's 32-true: float32 products
    torch.backends.cudnn.allow_tf32 = False
    images, labels = load_train(root)
    train_idx, val_idx = tandem_split(len(images), VAL_SIZE, SEED)
    x_all, y_all = torch.from_numpy(images), torch.from_numpy(labels)
    train_idx, val_idx = torch.tensor(train_idx), torch.tensor(val_idx)
    x_train, y_train = x_all[train_idx].contiguous(), y_all[train_idx].contiguous()
    x_val, y_val = x_all[val_idx].contiguous(), y_all[val_idx].contiguous()
    n_train = len(x_train)
    # Each epoch's order over the training part, made before the clock starts (pure Python).
    orders = [torch.tensor(seeded_shuffle(list(range(n_train)), SEED, e)) for e in range(epochs)]

    class BatchOrder(torch.utils.data.Sampler):
        """Yields each batch's example indices: Tandem's order for the epoch, or index order."""

        def __init__(self, n, per_epoch=None):
            self.n, self.per_epoch, self.epoch = n, per_epoch, 0

        def set_epoch(self, epoch):
            self.epoch = epoch

        def __len__(self):
            return (self.n + BATCH - 1) // BATCH

        def __iter__(self):
            order = self.per_epoch[self.epoch] if self.per_epoch else torch.arange(self.n)
            if self.per_epoch:
                self.epoch += 1  # unless Lightning sets the next epoch itself
            return iter(order.split(BATCH))

    class Gather(torch.utils.data.Dataset):
        """One batch per item: a row gather of the decoded tensors, as Tandem's loader does."""

        def __init__(self, x, y):
            self.x, self.y = x, y

        def __getitem__(self, idx):
            return self.x[idx], self.y[idx]

        def __len__(self):
            return len(self.x)

    def loader(x, y, per_epoch):
        return torch.utils.data.DataLoader(Gather(x, y), batch_size=None, sampler=BatchOrder(len(x), per_epoch),
                                           pin_memory=accelerator == "gpu")

    class MLP(L.LightningModule):
        def __init__(self):
            super().__init__()
            nn = torch.nn
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                     nn.Linear(1024, 10))

        def training_step(self, batch, _):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss, batch_size=len(y))
            return loss

        def validation_step(self, batch, _):
            x, y = batch
            logits = self.net(x)
            self.log("val_loss", torch.nn.functional.cross_entropy(logits, y), batch_size=len(y))
            self.log("val_acc", (logits.argmax(1) == y).float().mean(), batch_size=len(y))

        def configure_optimizers(self):
            opt = torch.optim.Adam(self.parameters(), lr=LR)
            return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)}

    L.seed_everything(SEED)
    model = MLP()
    trainer = L.Trainer(accelerator=accelerator, devices=1, max_epochs=epochs, precision="32-true",
                        default_root_dir=out_dir, logger=CSVLogger(out_dir), enable_progress_bar=False)
    start = time.perf_counter()
    trainer.fit(model, loader(x_train, y_train, orders), loader(x_val, y_val, None))
    fit_s = time.perf_counter() - start
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    print(json.dumps({"impl": "lightning", "lightning": L.__version__, "torch": torch.__version__,
                      "device": torch.cuda.get_device_name() if accelerator == "gpu" else "cpu",
                      "epochs": epochs, "batch": BATCH, "train_samples": n_train, "fit_s": round(fit_s, 2),
                      "samples_per_s": round(n_train * epochs / fit_s),
                      "val_loss": round(metrics["val_loss"], 4), "val_acc": round(metrics["val_acc"], 4)}))


if __name__ == "__main__":
    main()
