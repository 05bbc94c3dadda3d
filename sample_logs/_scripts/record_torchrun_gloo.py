"""Record a healthy 2-process DDP run (gloo, CPU) where every rank logs its per-step metrics.

Started by record_torchrun_gloo.sh via `torchrun --nproc_per_node=2 --log-dir ... --tee 3`,
so each rank's output lands in torchrun's per-rank files and, prefixed `[defaultN]:`, on the console.
Ranks log through Python logging with timestamps (`%(asctime)s - %(levelname)s - %(name)s - %(message)s`).
"""

import logging
import os
import time

import torch
import torch.distributed as dist

logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(name)s - %(message)s")
log = logging.getLogger("train")

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 1))
)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
gen = torch.Generator().manual_seed(100 + rank)  # each rank draws its own shard of data
w_true = 0.5 * torch.randn(16, 1, generator=torch.Generator().manual_seed(7))
if rank == 0:
    log.info("world size %d, pid %d", world, os.getpid())
for step in range(1, 31):
    t0 = time.perf_counter()
    x = torch.randn(32, 16, generator=gen)
    y = x @ w_true
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
    opt.step()
    dt_ms = (time.perf_counter() - t0) * 1000
    log.info("step %d loss %.4f lr %.3e grad_norm %.4f step_time_ms %.2f", step, loss.item(), 0.05, grad_norm.item(), dt_ms)
dist.barrier()
dist.destroy_process_group()
