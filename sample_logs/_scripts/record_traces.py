"""Record real torch.profiler and VizTracer traces on CPU for the trace playbooks' sample folders.

Usage: python record_traces.py SCENARIO OUTDIR   (run by record_traces.sh with /work/recvenv)

Scenarios (each prints `step N done` lines and the profiler's key_averages table on stdout;
the caller saves it as train.log):
- dataloader-slow: DataLoader(num_workers=0) whose __getitem__ does a slow per-sample
  transform; the profiler shows `enumerate(DataLoader)#..._SingleProcessDataLoaderIter.__next__`
  taking most of each ProfilerStep.
- dataloader-light: the same loop with a cheap transform (near miss: the loader share stays low).
- item-sync: `.item()` inside the inner micro-batch loop (aten::item / _local_scalar_dense per step).
- item-sync-rare: `.item()` once per step, for logging only (near miss).
- healthy: in-memory batches, no per-step host syncs beyond one logged loss every 4 steps.
- race: VizTracer, two threads running forward+backward on one shared model at the same time.
- race-locked: VizTracer, the same two threads serialised by a lock (near miss: no overlap).
- viz-healthy: VizTracer, single-threaded training.
- small-ops: 300 tiny elementwise ops per step (the launch-bound shape, on CPU: no kernel to launch).
- gloo-ddp: DistributedDataParallel over gloo (world of 2, rank 0 profiled) with the gradient all-reduce
  run by hand after backward (the no-overlap shape, on CPU: no device stream to overlap).
"""

from __future__ import annotations

import os
import sys
import threading

import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
torch.set_num_threads(1)


class Slow(Dataset):
    """Synthetic images whose per-sample 'augmentation' costs `work` matrix products."""

    def __init__(self, n: int, work: int) -> None:
        self.n, self.work = n, work

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(3, 32, 32, generator=g)
        if self.work:  # a heavy CPU transform (decode + augment): a few large ops per sample
            big = torch.randn(3, self.work, self.work, generator=g)
            x = x + torch.tanh(big @ big.transpose(1, 2)).mean() * 0.01
        return x, i % 10


def model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(), torch.nn.Linear(8 * 16, 10),
    )


def profiled(out: str, steps: int, body) -> None:
    """Run `body(step)` under torch.profiler (wait 1, warmup 1, active steps-2) and export the trace."""
    trace_path = os.path.join(out, "rank0.pt.trace.json.gz")
    sched = schedule(wait=1, warmup=1, active=steps - 2, repeat=1)

    def ready(prof) -> None:
        prof.export_chrome_trace(trace_path)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12), flush=True)

    with profile(activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=ready,
                 profile_memory=True, record_shapes=False) as prof:
        for step in range(steps):
            body(step)
            prof.step()


def train_loader(out: str, work: int, workers: int) -> None:
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    loader = DataLoader(Slow(4096, work), batch_size=16, num_workers=workers)
    it = iter(loader)
    print(f"DataLoader(num_workers={workers}, batch_size=16), transform work={work}", flush=True)

    def body(step: int) -> None:
        x, y = next(it)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()  # the loss is read once per step (as any logging loop does)
        print(f"step {step} done", flush=True)

    profiled(out, 10, body)


def train_sync(out: str, every_micro: bool) -> None:
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    data = [(torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))) for _ in range(8)]

    def body(step: int) -> None:
        opt.zero_grad()
        running = 0.0
        for micro in range(8):  # gradient accumulation over 8 micro-batches
            x, y = data[micro]
            loss = torch.nn.functional.cross_entropy(net(x), y) / 8
            loss.backward()
            if every_micro:
                running += loss.item()  # host sync on every micro-batch
                if torch.isnan(loss).item():
                    print("nan", flush=True)
            else:
                running += loss.detach()
        opt.step()
        if not every_micro:
            running.item()  # one sync per step, for logging
        print(f"step {step} done", flush=True)

    profiled(out, 10, body)


def in_memory() -> tuple[torch.nn.Module, torch.optim.Optimizer, list]:
    """The small model, its SGD optimizer and 4 in-memory batches of 32."""
    net = model()
    return net, torch.optim.SGD(net.parameters(), lr=0.05), [(torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))) for _ in range(4)]


def train_healthy(out: str) -> None:
    net, opt, data = in_memory()

    def body(step: int) -> None:
        x, y = data[step % 4]
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 4 == 0:
            loss.item()  # logged every 4 steps
        print(f"step {step} done", flush=True)

    profiled(out, 10, body)


def viz(out: str, threads: int, lock: bool) -> None:
    from viztracer import VizTracer

    net = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
    shared = torch.randn(64, 256, requires_grad=True)  # a tensor both threads use in their graphs
    guard = threading.Lock()

    def worker(k: int) -> None:
        for step in range(6):
            if lock:
                with guard:
                    one_step(k, step)
            else:
                one_step(k, step)

    def one_step(k: int, step: int) -> None:
        out_ = net(shared * (k + 1))
        loss = out_.pow(2).mean()
        loss.backward()
        print(f"thread {k} step {step} done", flush=True)

    tracer = VizTracer(output_file=os.path.join(out, "viztracer.json"), max_stack_depth=12, verbose=0,
                       ignore_c_function=True)
    tracer.start()
    pool = [threading.Thread(target=worker, args=(k,), name=f"trainer-{k}") for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    tracer.stop()
    tracer.save()


def train_small_ops(out: str) -> None:
    x = torch.randn(64)
    w = torch.randn(64)

    def body(step: int) -> None:
        y = x.clone()
        for _ in range(300):  # many tiny ops, each far cheaper than a kernel launch would be
            y.add_(w).mul_(0.5)
        y.sum().item()
        print(f"step {step} done", flush=True)

    profiled(out, 10, body)


def _gloo_rank(rank: int, out: str) -> None:
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(rank)
    net, opt, data = in_memory()

    def body(step: int) -> None:
        x, y = data[step % 4]
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        for p in net.parameters():  # all-reduce only after the whole backward: nothing overlaps it
            dist.all_reduce(p.grad)
            p.grad /= 2
        opt.step()
        print(f"rank {rank} step {step} done", flush=True)

    if rank == 0:
        profiled(out, 10, body)
    else:
        for step in range(10):
            body(step)
    dist.destroy_process_group()


def train_gloo(out: str) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_gloo_rank, args=(out,), nprocs=2, join=True)


def main() -> None:
    scenario, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    if scenario == "dataloader-slow":
        train_loader(out, work=160, workers=0)
    elif scenario == "dataloader-light":
        train_loader(out, work=0, workers=0)
    elif scenario == "item-sync":
        train_sync(out, every_micro=True)
    elif scenario == "item-sync-rare":
        train_sync(out, every_micro=False)
    elif scenario == "healthy":
        train_healthy(out)
    elif scenario == "race":
        viz(out, threads=2, lock=False)
    elif scenario == "race-locked":
        viz(out, threads=2, lock=True)
    elif scenario == "viz-healthy":
        viz(out, threads=1, lock=False)
    elif scenario == "small-ops":
        train_small_ops(out)
    elif scenario == "gloo-ddp":
        train_gloo(out)
    else:
        raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    main()
