"""Single-process LM training fed by a multi-worker DataLoader; host-memory failures of the input pipeline.

Scenarios (--scenario):
  killed     a worker is SIGKILLed while producing a batch (what the kernel OOM killer does to the
             biggest process; here the worker sends the signal to itself, so no dmesg is involved).
  shm        a worker gets SIGBUS (what touching a /dev/shm page that cannot be backed raises).
  cpu-alloc  a corrupt length field makes collate pad the batch to 2**40 tokens; the CPU allocator
             refuses (a real `DefaultCPUAllocator: can't allocate memory`).
  neg-pad    packed shards store short documents padded with -1; one short document reaches the
             model unmasked and the embedding lookup fails (`index out of range in self`).
  healthy    4 workers on a 2-core machine (torch warns about it), persistent workers, clean exit.
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import torch
from crash_common import SEQ, TinyLM, batch, lm_loss, nanogpt_line
from torch.utils.data import DataLoader, Dataset


class TokenFile(Dataset):
    """Stands for a tokenized shard: sample i is a deterministic sequence of SEQ+1 tokens."""

    def __init__(self, n: int, scenario: str, fail_index: int) -> None:
        self.n, self.scenario, self.fail_index = n, scenario, fail_index

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        g = torch.Generator().manual_seed(i)
        x, y = batch(g, 1)  # the same learnable toy language as every other recording
        toks = torch.cat([x[0], y[0, -1:]])
        length = SEQ + 1
        if i == self.fail_index:
            if self.scenario == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            elif self.scenario == "shm":
                os.kill(os.getpid(), signal.SIGBUS)
            elif self.scenario == "cpu-alloc":
                length = 2**40  # the shard's length header is garbage for this record
            elif self.scenario == "neg-pad":
                toks = torch.cat([toks[:40], torch.full((SEQ + 1 - 40,), -1)])  # -1 = padding of the packer
        return {"tokens": toks, "length": length}


def collate(items: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    longest = max(it["length"] for it in items)
    out = torch.zeros(len(items), longest, dtype=torch.long)  # pad to the longest record
    for k, it in enumerate(items):
        out[k, : it["tokens"].numel()] = it["tokens"]
    out = out[:, : SEQ + 1]
    return out[:, :-1], out[:, 1:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="healthy")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--fail-index", type=int, default=-1)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()

    torch.manual_seed(0)
    print(f"number of parameters: {sum(p.numel() for p in TinyLM().parameters()) / 1e6:.2f}M")
    print(f"tokens per iteration will be: {args.batch_size * SEQ:,}")
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ds = TokenFile(args.iters * args.batch_size, args.scenario, args.fail_index)
    dl = DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers, collate_fn=collate,
                    persistent_workers=args.workers > 0, prefetch_factor=4 if args.workers else None)
    t0 = time.time()
    for it, (x, y) in enumerate(dl):
        loss = lm_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if it % 10 == 0:
            t1 = time.time()
            print(nanogpt_line(it, loss.item(), t1 - t0, -1.0 if it < 5 else 0.0021), flush=True)
            t0 = t1
    print(f"saving checkpoint to out-{args.scenario}")


if __name__ == "__main__":
    main()
