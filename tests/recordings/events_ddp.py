"""A 2-rank gloo DDP-style job where one rank fails, for the event parser tests (run under torchrun).

MODE=raise: rank 1 raises ValueError at step 3; MODE=kill: rank 1 SIGKILLs itself (host-OOM look);
MODE=mismatch: ranks issue different collectives (with TORCH_DISTRIBUTED_DEBUG=DETAIL).
"""

from __future__ import annotations

import os
import signal

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mode = os.environ.get("MODE", "raise")
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(6):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
        if step == 3 and rank == 1:
            if mode == "raise":
                raise ValueError("bad batch at step 3 on rank 1")
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
        if mode == "mismatch" and step == 2:
            t = torch.ones(4)
            if rank == 0:
                dist.all_reduce(t)
            else:
                dist.all_gather([torch.zeros(4), torch.zeros(4)], t)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
