"""Record schedule, performance and data samples: per-epoch LR staircase, step-time regression,
data-loader bottleneck, memory leak, class imbalance, and their near misses.

Usage: dynamics_perf.py SCENARIO > train.log. Tiny CPU models, real training; formats in dynamics_common.py.
"""

from __future__ import annotations

import collections
import sys
import time

import torch
from dynamics_common import MetricLogger, Regression, SmoothedValue, mlp, plain, rss_mib


def lr_schedule(nearmiss: bool) -> None:
    """ImageNet-reference-style loop (MetricLogger) whose scheduler is stepped once per epoch.

    Positive: CosineAnnealingLR(T_max = total iterations) meant to be stepped every iteration is
    stepped once per epoch, so the LR is a staircase that has barely decayed after 6 epochs.
    Near miss: MultiStepLR(milestones=[2, 4], gamma=0.1), a per-epoch schedule by design.
    """
    torch.manual_seed(0)
    model = mlp(depth=2, d_out=4, act=torch.nn.ReLU)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    epochs, iters = 6, 60
    if nearmiss:
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.1)
    else:
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * iters)
    centers = torch.randn(4, 16, generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(4)
    for epoch in range(epochs):
        ml = MetricLogger(delimiter="  ")
        ml.add_meter("lr", SmoothedValue(window_size=1, fmt="{value}"))
        for _ in ml.log_every(range(iters), 10, header=f"Epoch: [{epoch}]"):
            y = torch.randint(0, 4, (32,), generator=g)
            x = centers[y] + torch.randn(32, 16, generator=g)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ml.update(loss=loss.item(), lr=opt.param_groups[0]["lr"])
        sched.step()  # the positive's bug: per epoch, not per iteration


class SlowDataset(torch.utils.data.Dataset):
    """Samples whose loading takes `delay` seconds each (a decode / augmentation stand-in)."""

    def __init__(self, n: int, delay: float) -> None:
        g = torch.Generator().manual_seed(5)
        self.x = torch.randn(n, 256, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.delay = delay

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        return self.x[i], self.y[i]


def dataloader(nearmiss: bool) -> None:
    """MetricLogger `time:` (whole iteration) vs `data:` (waiting for the batch).

    Positive: num_workers=0 and 1.5 ms of per-sample loading work, so most of each iteration waits on
    data. Near miss: the same model with in-memory samples (no loading cost).
    """
    torch.manual_seed(0)
    ds = SlowDataset(1536, 0.0 if nearmiss else 0.0015)
    loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, num_workers=0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    print(f"DataLoader(batch_size=32, num_workers=0, pin_memory=False), {len(loader)} iterations per epoch",
          flush=True)
    for epoch in range(3):
        ml = MetricLogger(delimiter="  ")
        ml.add_meter("lr", SmoothedValue(window_size=1, fmt="{value}"))
        for x, y in ml.log_every(loader, 10, header=f"Epoch: [{epoch}]"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ml.update(loss=loss.item(), lr=0.05)


def step_time(nearmiss: bool) -> None:
    """A contrastive-style loop with a memory bank of past embeddings scored against every batch.

    Positive: the bank grows without a cap (the queue size was never applied), so every step
    scores against more entries and step time rises steadily. Near miss: the bank is a capped
    queue of 4096 entries; step time rises while it fills, then holds.
    """
    torch.manual_seed(0)
    enc = mlp(d_in=64, hidden=256, depth=2, d_out=256)
    opt = torch.optim.SGD(enc.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(6)
    bank = torch.empty(0, 256)
    cap = 4096 if nearmiss else None
    for step in range(1, 301):
        t0 = time.perf_counter()
        x = torch.randn(64, 64, generator=g)
        z = torch.nn.functional.normalize(enc(x), dim=1)
        z2 = torch.nn.functional.normalize(enc(x + 0.1 * torch.randn(64, 64, generator=g)), dim=1)
        pos = (z * z2).sum(1, keepdim=True)
        neg = z @ bank.T if len(bank) else torch.empty(64, 0)
        logits = torch.cat([pos, neg], 1) / 0.1
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(64, dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
        bank = torch.cat([bank, z2.detach()])
        if cap is not None:
            bank = bank[-cap:]
        # A periodic scan of the whole bank (nearest-neighbour monitor) makes the cost visible on CPU.
        if len(bank):
            _ = torch.cdist(torch.cat([z.detach(), z2.detach()]), bank).min(1)
        dt = (time.perf_counter() - t0) * 1000
        plain(step, loss=f"{loss.item():.4f}", lr=f"{0.01:.3e}", step_time_ms=f"{dt:.2f}", bank_size=str(len(bank)))


def memory_leak(nearmiss: bool) -> None:
    """A loop that also scores a held-out batch every step and sums those losses; RSS (MiB) every 5 steps.

    Positive: the held-out loss is computed with autograd on and summed as a tensor
    (`val_total += val_loss`), so every step's graph and its saved activations stay alive: resident
    memory grows linearly. Near miss: the same under `torch.no_grad()` with `.item()`; memory
    settles once the allocator has warmed up.
    """
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = Regression(d=512, noise=0.1)
    xv, yv = data.batch(128)
    val_total = 0.0
    for step in range(1, 301):
        x, y = data.batch(64)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if nearmiss:
            with torch.no_grad():
                val_total += torch.nn.functional.mse_loss(model(xv), yv).item()
        else:
            val_total = val_total + torch.nn.functional.mse_loss(model(xv), yv)
        if step % 5 == 0:
            plain(step, loss=f"{loss.item():.4f}", val_loss=f"{float(val_total) / step:.4f}", lr=f"{1e-3:.3e}",
                  rss_mib=f"{rss_mib():.1f}")


def class_imbalance(nearmiss: bool) -> None:
    """A classifier whose training loop logs the cumulative label counts it has seen every 25 steps.

    Positive: class 0 is 94% of the data (about 100x the rarest class); near miss: a mild 3:2:1 skew.
    """
    torch.manual_seed(0)
    weights = torch.tensor([3.0, 2.0, 1.0]) if nearmiss else torch.tensor([94.0, 5.0, 1.0])
    g = torch.Generator().manual_seed(8)
    n = 6000
    labels = torch.multinomial(weights, n, replacement=True, generator=g)
    centers = torch.randn(3, 16, generator=torch.Generator().manual_seed(9))
    feats = centers[labels] + 1.5 * torch.randn(n, 16, generator=g)
    print(f"train labels: {dict(sorted(collections.Counter(labels.tolist()).items()))}", flush=True)
    model = mlp(depth=2, d_out=3, act=torch.nn.ReLU)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    seen = torch.zeros(3, dtype=torch.long)
    perm = torch.randperm(n, generator=g)
    for step in range(1, 151):
        idx = perm[(step * 32) % n:(step * 32) % n + 32]
        x, y = feats[idx], labels[idx]
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += torch.bincount(y, minlength=3)
        if step % 25 == 0:
            counts = {f"label_count_{c}": str(int(seen[c])) for c in range(3)}
            plain(step, loss=f"{loss.item():.4f}", lr=f"{1e-3:.3e}", **counts)
    print(f"epoch 0 done, last loss {loss.item():.4f}", flush=True)


SCENARIOS = {
    "lr-schedule-anomaly": lambda: lr_schedule(False),
    "lr-schedule-anomaly-nearmiss": lambda: lr_schedule(True),
    "dataloader-bottleneck": lambda: dataloader(False),
    "dataloader-bottleneck-nearmiss": lambda: dataloader(True),
    "step-time-regression": lambda: step_time(False),
    "step-time-regression-nearmiss": lambda: step_time(True),
    "memory-leak": lambda: memory_leak(False),
    "memory-leak-nearmiss": lambda: memory_leak(True),
    "class-imbalance": lambda: class_imbalance(False),
    "class-imbalance-nearmiss": lambda: class_imbalance(True),
}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
