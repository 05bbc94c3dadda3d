"""Record 2-rank gloo (CPU) samples: sampler duplication, a straggler rank, gradient desync, and near misses.

Started by dynamics_record.sh via `torchrun --nproc_per_node=2 --log-dir logs --tee 3 dynamics_dist.py SCENARIO`
(as healthy-torchrun-gloo: console.log with `[defaultN]:` prefixes plus torchrun's per-rank files). Every
rank logs its own per-step metrics through Python logging with timestamps.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time

import torch
import torch.distributed as dist
from dynamics_common import grad_norm, mlp

logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(name)s - %(message)s")
log = logging.getLogger("train")


class Points(torch.utils.data.Dataset):
    """A fixed regression dataset (identical on every rank, as a real dataset on shared storage)."""

    def __init__(self, n: int = 4096) -> None:
        g = torch.Generator().manual_seed(11)
        self.x = torch.randn(n, 16, generator=g)
        w = 0.5 * torch.randn(16, 1, generator=torch.Generator().manual_seed(12))
        self.y = self.x @ w + 0.1 * torch.randn(n, 1, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def sampler(nearmiss: bool) -> None:
    """DDP over a DataLoader. Positive: shuffle=True with the same seed and no DistributedSampler, so both
    ranks draw the same batches and log identical losses. Near miss: a DistributedSampler."""
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(mlp(depth=2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ds = Points()
    if nearmiss:
        smp = torch.utils.data.distributed.DistributedSampler(ds, shuffle=True, seed=0)
        loader = torch.utils.data.DataLoader(ds, batch_size=32, sampler=smp)
        smp.set_epoch(0)
    else:
        loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True,
                                             generator=torch.Generator().manual_seed(0))
    for step, (x, y) in enumerate(loader, 1):
        t0 = time.perf_counter()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        log.info("step %d loss %.4f lr %.3e grad_norm %.4f step_time_ms %.2f", step, loss.item(), 0.05, gn.item(),
                 (time.perf_counter() - t0) * 1000)
        if step == 60:
            break
    if rank == 0:
        log.info("done")


def straggler(nearmiss: bool) -> None:
    """Data parallel with an explicit gradient all-reduce. Each rank logs compute_ms (its own data,
    forward and backward) and step_time_ms (including the wait in the all-reduce).
    Positive: rank 1 sleeps 40 ms in every step (a slow node), so its compute takes far longer and
    rank 0 waits for it. Near miss: no sleep, only the two ranks' natural jitter."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = mlp(d_in=16, hidden=256, depth=3)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    g = torch.Generator().manual_seed(100 + rank)
    w = 0.5 * torch.randn(16, 1, generator=torch.Generator().manual_seed(7))
    for step in range(1, 61):
        t0 = time.perf_counter()
        x = torch.randn(64, 16, generator=g)
        if rank == 1 and not nearmiss:
            time.sleep(0.04)
        loss = torch.nn.functional.mse_loss(model(x), x @ w)
        opt.zero_grad()
        loss.backward()
        t1 = time.perf_counter()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        t2 = time.perf_counter()
        log.info("step %d loss %.4f lr %.3e compute_ms %.2f step_time_ms %.2f", step, loss.item(), 0.02,
                 (t1 - t0) * 1000, (t2 - t0) * 1000)


def desync(nearmiss: bool) -> None:
    """DDP with gradient accumulation over 4 micro-batches. Positive: every micro-batch, the last one
    included, runs inside `model.no_sync()`, so gradients are never all-reduced and the replicas drift
    apart (grad_norm and param_norm differ between ranks and the gap grows). Near miss: the last
    micro-batch synchronises, as intended."""
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(mlp(depth=2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(100 + rank)
    w = 0.5 * torch.randn(16, 1, generator=torch.Generator().manual_seed(7))
    accum = 4
    for step in range(1, 61):
        opt.zero_grad()
        for micro in range(accum):
            x = torch.randn(16, 16, generator=g)
            # DDP decides in forward whether the coming backward all-reduces: no_sync must wrap both.
            ctx = model.no_sync() if (micro < accum - 1 or not nearmiss) else contextlib.nullcontext()
            with ctx:
                loss = torch.nn.functional.mse_loss(model(x), x @ w) / accum
                loss.backward()
        gn = grad_norm(model.parameters())
        opt.step()
        pn = torch.sqrt(sum((p.detach() ** 2).sum() for p in model.parameters())).item()
        log.info("step %d loss %.4f lr %.3e grad_norm %.4f param_norm %.4f", step, loss.item() * accum, 0.05, gn, pn)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    name = sys.argv[1]
    nearmiss = name.endswith("-nearmiss")
    {"sampler-duplication": sampler, "rank-straggler": straggler, "gradient-desync": desync}[
        name.removesuffix("-nearmiss")](nearmiss)
    dist.barrier()
    dist.destroy_process_group()
