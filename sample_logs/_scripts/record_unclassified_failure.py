"""Record the unclassified-failure samples: a real CPU training loop that fails (or ends healthily) in plain Python.

Usage: python record_unclassified_failure.py SCENARIO [--steps N] [--fail-step K]
  keyerror      the loss code reads a key the batch dict lacks at step K: an uncaught KeyError ends the run
  caught        the same KeyError at step K is caught and logged with its traceback; training goes on (near miss)
  interrupt     the process sends itself SIGINT at step K, inside the forward pass: Ctrl-C ends a healthy run (near miss)
  ddp-valueerror  (under torchrun, gloo) rank 1 raises ValueError at step K; rank 0 waits in the all-reduce until
                torchrun stops it and prints its ChildFailedError report
Nothing here is imported by the project; it needs torch (CPU).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

import torch
import torch.nn as nn

log = logging.getLogger("train")


def batches(gen: torch.Generator, step: int, fail_step: int) -> dict:
    """A batch as a dict; from `fail_step` on the collate forgets the labels (the bug being recorded)."""
    x = torch.randn(16, 32, generator=gen)
    y = (x.sum(1) > 0).long()
    return {"inputs": x} if step == fail_step else {"inputs": x, "labels": y}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=["keyerror", "caught", "interrupt", "ddp-valueerror"])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--fail-step", type=int, default=25)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", stream=sys.stdout)
    rank = 0
    if a.scenario == "ddp-valueerror":
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank = dist.get_rank()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(rank)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(1, a.steps + 1):
        b = batches(gen, step, a.fail_step if a.scenario in ("keyerror", "caught") else -1)
        if a.scenario == "interrupt" and step == a.fail_step:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arrives while the step computes
        if a.scenario == "ddp-valueerror" and rank == 1 and step == a.fail_step:
            raise ValueError(f"expected inputs of width 32, got a batch of shape {tuple(b['inputs'].shape)} with an empty label column")
        try:
            out = model(b["inputs"])
            loss = loss_fn(out, b["labels"])
        except KeyError:
            if a.scenario != "caught":
                raise
            log.exception("skipping a malformed batch at step %d", step)
            continue
        opt.zero_grad()
        loss.backward()
        if a.scenario == "ddp-valueerror":
            import torch.distributed as dist

            for p in model.parameters():
                dist.all_reduce(p.grad)
        opt.step()
        log.info("step %d | loss %.4f | lr %.2e", step, loss.item(), opt.param_groups[0]["lr"])
    log.info("training finished after %d steps", a.steps)


if __name__ == "__main__":
    main()
