"""DDP runs (torchrun, gloo, CPU) that break the every-rank-issues-the-same-collectives contract.

Scenarios (--scenario):
  mismatch       hand-written data parallelism (one flattened-gradient all-reduce per step; DDP under
                 DETAIL crashes torch 2.13's CPU build) with TORCH_DISTRIBUTED_DEBUG=DETAIL; at --fail-step the ranks all-reduce their token
                 counts for logging, except the rank whose batch was filtered to nothing, which goes
                 straight to the next step's gradient all-reduce: the DETAIL wrapper reports the mismatch.
  detail-clean   the fixed version: the rank with the empty batch still joins the metrics all-reduce
                 (with zeros, and says so); DETAIL finds nothing; clean exit.
  unused         an auxiliary head (a multi-task loss) is used only when the batch has auxiliary
                 labels; at --fail-step one batch has none, and DDP without find_unused_parameters
                 fails at the next step.
  unused-clean   find_unused_parameters=True although every parameter is used: DDP warns and the run
                 finishes.
"""

from __future__ import annotations

import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from crash_common import TinyLM, batch, lm_loss, rank_log_to_file, titan_logger, titan_step_line
from torch.nn.parallel import DistributedDataParallel as DDP


class MultiTask(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lm = TinyLM()
        self.aux_head = nn.Linear(512, 4)  # e.g. a domain classifier on the pooled logits

    def forward(self, x: torch.Tensor, with_aux: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        logits = self.lm(x)
        aux = self.aux_head(logits.mean(1)) if with_aux else None
        return logits, aux


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--fail-step", type=int, default=41)
    ap.add_argument("--fail-rank", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=10)
    a = ap.parse_args()
    rank_log_to_file()
    log = titan_logger()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    torch.manual_seed(0)
    sc = a.scenario
    if sc.startswith("unused"):
        model = DDP(MultiTask(), find_unused_parameters=(sc == "unused-clean"))
    else:  # hand-written data parallelism: average the flattened gradient with one all-reduce per step
        model = TinyLM()
        for p in model.parameters():
            dist.broadcast(p.data, 0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(100 + rank)
    if rank == 0 and os.environ.get("TORCH_DISTRIBUTED_DEBUG"):
        log.info(f"TORCH_DISTRIBUTED_DEBUG={os.environ['TORCH_DISTRIBUTED_DEBUG']}")
    if rank == 0:
        log.info(f"Training starts at step 1 ({sc}, world size {dist.get_world_size()})")
    for step in range(1, a.steps + 1):
        x, y = batch(gen, 16)
        if sc.startswith("unused"):
            with_aux = sc == "unused-clean" or step != a.fail_step  # one batch of the stream has no aux labels
            logits, aux = model(x, with_aux)
            loss = lm_loss(logits, y)
            if aux is not None:
                loss = loss + 0.1 * nn.functional.cross_entropy(aux, y[:, 0] % 4)
        else:
            loss = lm_loss(model(x), y)
        loss.backward()
        if sc in ("mismatch", "detail-clean"):
            flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            dist.all_reduce(flat)
            flat /= dist.get_world_size()
            off = 0
            for p in model.parameters():
                p.grad.copy_(flat[off:off + p.numel()].view_as(p))
                off += p.numel()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if sc in ("mismatch", "detail-clean"):
            ntok = torch.tensor([x.numel(), float(loss.item())])
            empty = step == a.fail_step and rank == a.fail_rank
            if empty and sc == "mismatch":
                log.warning(f"step {step}: all samples of the local batch were filtered out, skipping the metrics reduce")
            else:
                if empty:  # the fixed code path: still take part in the collective, with zeros
                    log.warning(f"step {step}: all samples of the local batch were filtered out, "
                                "contributing zeros to the metrics reduce")
                    ntok.zero_()
                dist.all_reduce(ntok)
        if step % a.log_every == 0 or step == 1:
            log.info(titan_step_line(step, loss.item(), 0.31, 63.14 + 0.004 * step, 100 * (63.14 + 0.004 * step) / 79.10,
                                     5321 + step % 7 * 13, 341.7, 34.55))
    dist.barrier()
    if rank == 0:
        log.info("Training completed")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
