"""Multi-rank DDP pretraining of a tiny LM under torchrun (gloo, CPU), with one injected failure.

Launched by record_crash.sh as `torchrun --nproc_per_node N crash_ddp.py ...`; with RANK_LOG_DIR set every
rank writes its own rankN.log (stdout and stderr), otherwise torchrun's --log-dir/--redirects layout is used.

Scenarios (--scenario):
  healthy      train --steps steps and exit cleanly.
  oom          --fail-rank runs out of memory at --fail-step. With --gpu-text the exception is the
               CUDA allocator's (text copied from formats.md §2.1 with numbers of an 80 GB H100);
               a non-daemon metrics thread keeps the failed rank alive (as wandb-style threads do),
               so the others block in the next all-reduce until the process-group timeout.
  straggler    --fail-rank blocks for --stall-s seconds in data loading at --fail-step (a stuck
               network filesystem read); the others time out in the all-reduce.
  hang         --fail-rank blocks forever in data loading at --fail-step; the timeout is longer
               than the job's time limit, so nothing is printed until the job is killed.
  long-eval    rank 0 runs a slow evaluation at --fail-step while the others wait in a barrier,
               then training resumes and finishes (a pause that is not a hang).

--gpu-text: when gloo reports the collective timeout, print what ProcessGroupNCCL's watchdog
prints on a GPU cluster (PyTorch 2.6 form, formats.md §2.4.1 [OBS]: message order and line numbers
as in pytorch#153779, DiffSynth-Studio#458, mittagessen/party#7) and abort like the watchdog does
(SIGABRT, torchrun exitcode -6). Without it the real gloo exception propagates.
"""

from __future__ import annotations

import argparse
import datetime
import faulthandler
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
from crash_common import SEQ, TinyLM, batch, lm_loss, rank_log_to_file, titan_logger, titan_step_line
from torch.nn.parallel import DistributedDataParallel as DDP

TOTAL_GIB = 79.10  # torch.cuda.get_device_properties(0).total_memory of an 80 GB H100, in GiB


def glog_prefix(rank: int, level: str = "E", line: int = 616, now_ns: int | None = None) -> str:
    """`[rankN]:[E1122 02:21:05.123456789 ProcessGroupNCCL.cpp:616] ` (c10 logging, PyTorch >= 2.4)."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    sec, ns = divmod(now_ns, 1_000_000_000)
    t = time.localtime(sec)
    return f"[rank{rank}]:[{level}{t.tm_mon}{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{ns:09d} ProcessGroupNCCL.cpp:{line}] "


SITE = os.path.dirname(os.path.dirname(torch.__file__))


def watchdog_text(rank: int, seq: int, numel: int, ran_ms: int, timeout_ms: int) -> str:
    """What a PyTorch 2.6 rank prints when the NCCL watchdog times a collective out."""
    work = f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms})"
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    t0 = time.time_ns()
    lines = [
        glog_prefix(rank, "E", 616, t0) + f"[Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ran_ms} milliseconds before timing out.",
        glog_prefix(rank, "E", 1785, t0 + 171_331) + f"{pg} Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.",
        glog_prefix(rank, "E", 1834, t0 + 180_519) + f"{pg} Timeout at NCCL work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.",
        glog_prefix(rank, "E", 630, t0 + 188_004) + f"[Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        glog_prefix(rank, "E", 636, t0 + 193_112) + f"[Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
    ]
    what = f"{pg} Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ran_ms} milliseconds before timing out."
    lib = f"{SITE}/torch/lib"
    base = 0x7F3A00000000 + rank * 0x1000000000
    frames = [
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 (most recent call first):",
        f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 ({hex(base + 0x29A0446)} in {lib}/libc10.so)",
        f"frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x282 ({hex(base + 0x3CA5672)} in {lib}/libtorch_cuda.so)",
        f"frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 ({hex(base + 0x3CACAB3)} in {lib}/libtorch_cuda.so)",
        f"frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d ({hex(base + 0x3CAE51D)} in {lib}/libtorch_cuda.so)",
        f"frame #4: <unknown function> + 0x145c0 ({hex(base + 0x50D95C0)} in {lib}/libtorch.so)",
        f"frame #5: <unknown function> + 0x94ac3 ({hex(base + 0x5194AC3)} in /lib/x86_64-linux-gnu/libc.so.6)",
        f"frame #6: clone + 0x44 ({hex(base + 0x5225A04)} in /lib/x86_64-linux-gnu/libc.so.6)",
        "",
    ]
    outer = [
        "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1601 (most recent call first):",
        f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 ({hex(base + 0x29A0446)} in {lib}/libc10.so)",
        f"frame #1: <unknown function> + 0xe4271b ({hex(base + 0x3E4271B)} in {lib}/libtorch_cuda.so)",
        f"frame #2: <unknown function> + 0x145c0 ({hex(base + 0x50D95C0)} in {lib}/libtorch.so)",
        f"frame #3: <unknown function> + 0x94ac3 ({hex(base + 0x5194AC3)} in /lib/x86_64-linux-gnu/libc.so.6)",
        f"frame #4: clone + 0x44 ({hex(base + 0x5225A04)} in /lib/x86_64-linux-gnu/libc.so.6)",
        "",
    ]
    lines.append(glog_prefix(rank, "E", 1595, t0 + 412_870) + what)
    lines += frames
    lines.append("terminate called after throwing an instance of 'c10::DistBackendError'")
    lines.append(f"  what():  {what}")
    lines += frames
    lines += outer
    return "\n".join(lines) + "\n"


def oom_text(gpu: int, step: int) -> str:
    """formats.md §2.1 current allocator message; numbers of a run that is near the limit from step 1."""
    allocated = 74.12 + 0.004 * step
    unalloc = 1.94
    in_use = allocated + unalloc + 1.50  # + CUDA context, NCCL buffers, cuBLAS workspace
    free = TOTAL_GIB - in_use
    return (
        f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU {gpu} has a total capacity of {TOTAL_GIB:.2f} GiB "
        f"of which {free:.2f} GiB is free. Including non-PyTorch memory, this process has {in_use:.2f} GiB memory in use. "
        f"Of the allocated memory {allocated:.2f} GiB is allocated by PyTorch, and {unalloc:.2f} GiB is reserved by PyTorch "
        "but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def nccl_init_text(rank: int, world: int) -> None:
    """NCCL_DEBUG=INFO communicator set-up lines (formats.md §2.4.4 [SRC src/init.cc]) and PyTorch 2.6's
    barrier-device warning ([OBS verl-project/verl#1472, deepspeedai/DeepSpeed#7266])."""
    host, pid = "gpu-node-17", os.getpid()
    tid = pid + 57
    out = []
    if rank == 0:
        out.append("NCCL version 2.21.5+cuda12.4")
    out.append(f"{host}:{pid}:{tid} [{rank}] NCCL INFO Using network IB")
    out.append(f"{host}:{pid}:{tid} [{rank}] NCCL INFO comm 0x5581a3c0{rank}e40 rank {rank} nRanks {world} nNodes 1 localRanks {world} localRank {rank} MNNVL 0")
    out.append(f"{host}:{pid}:{tid} [{rank}] NCCL INFO ncclCommInitRank comm 0x5581a3c0{rank}e40 rank {rank} nranks {world} cudaDev {rank} nvmlDev {rank} busId {0x18 + 0x1a * rank:x}000 commId 0x8b2f1c6a4d0e9f37 - Init COMPLETE")
    out.append(glog_prefix(rank, "W", 4561) + f"[PG ID 0 PG GUID 0 Rank {rank}]  using GPU {rank} to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect. Specify device_ids in barrier() to force use of a particular device, or call init_process_group() with a device_id.")
    sys.stderr.write("\n".join(out) + "\n")
    sys.stderr.flush()


class Metrics(threading.Thread):
    """A background flusher like the ones experiment trackers start; non-daemon, stopped in `finally`."""

    def __init__(self) -> None:
        super().__init__(name="metrics-flush")
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="healthy")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--fail-rank", type=int, default=3)
    ap.add_argument("--fail-step", type=int, default=120)
    ap.add_argument("--timeout-s", type=float, default=600)
    ap.add_argument("--stall-s", type=float, default=0)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--step-sleep", type=float, default=0.0, help="stand-in for GPU compute time per step")
    ap.add_argument("--gpu-text", action="store_true")
    ap.add_argument("--dump-stacks-after", type=float, default=0, help="faulthandler watchdog (seconds without progress)")
    args = ap.parse_args()

    rank_log_to_file()
    log = titan_logger()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(TinyLM())
    numel = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    gen = torch.Generator().manual_seed(1234 + rank)
    bs = 16
    if rank == 0:
        log.info(f"Building tiny-lm with {numel:,} parameters, world size {world}, local batch {bs}, seq len {SEQ}")
        log.info(f"Process group timeout {datetime.timedelta(seconds=args.timeout_s)}")
        log.info("Training starts at step 1")
    if args.gpu_text and args.scenario == "healthy":
        nccl_init_text(rank, world)
    if args.dump_stacks_after:
        faulthandler.dump_traceback_later(args.dump_stacks_after, exit=False)

    flusher = Metrics()
    flusher.start()
    try:
        if args.gpu_text and args.scenario == "oom" and rank == args.fail_rank:
            def _alloc_guard(module, inputs):  # where the real allocator would fail: the LM head's output
                if state["step"] == args.fail_step:
                    raise torch.OutOfMemoryError(oom_text(rank, args.fail_step))
            state = {"step": 0}
            model.module.head.register_forward_pre_hook(_alloc_guard)
        else:
            state = {"step": 0}
        for step in range(1, args.steps + 1):
            state["step"] = step
            if args.dump_stacks_after:
                faulthandler.dump_traceback_later(args.dump_stacks_after, exit=False)
            x, y = batch(gen, bs)
            if step == args.fail_step and rank == args.fail_rank:
                if args.scenario == "straggler":
                    time.sleep(args.stall_s)  # blocked in a read from the dataset mount
                elif args.scenario == "hang":
                    while True:
                        time.sleep(3600)
            if step == args.fail_step and args.scenario == "long-eval":
                if rank == 0:
                    log.info(f"Running evaluation at step {step} on 2048 held-out sequences")
                    time.sleep(args.stall_s)
                    log.info(f"validate step: {step:2}  loss:  {3.9:7.4f}  memory: {0.0:5.2f}GiB({0.0:.2f}%)  tps: 41,337")
                dist.barrier()
            t_coll = time.perf_counter()
            try:
                loss = lm_loss(model(x), y)
                loss.backward()
            except RuntimeError as e:
                # gloo reports the timeout on the first ranks and "Connection closed by peer" on those whose
                # peers were already torn down; on NCCL every rank's watchdog fires, so print that for both.
                timed_out = time.perf_counter() - t_coll >= 0.99 * args.timeout_s
                if args.gpu_text and ("Timed out" in str(e) or ("Connection closed by peer" in str(e) and timed_out)):
                    ran = int((time.perf_counter() - t_coll) * 1000)
                    seq = dist.distributed_c10d._get_default_group()._get_sequence_number_for_group()
                    sys.stdout.flush()
                    sys.stderr.write(watchdog_text(rank, seq, numel, ran, int(args.timeout_s * 1000)))
                    sys.stderr.flush()
                    os.abort()
                raise
            gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
            opt.step()
            opt.zero_grad(set_to_none=True)
            if args.step_sleep:
                time.sleep(args.step_sleep)
            if step % args.log_every == 0 or step == 1:
                # memory/tps/tflops/mfu: what the same job reports on an H100 (simulated numbers, every scenario)
                mem = (74.12 if args.scenario == "oom" else 61.20) + 0.004 * step + 1.94
                log.info(titan_step_line(step, loss.item(), gn, mem, 100 * mem / TOTAL_GIB, 5321 + step % 7 * 13, 341.7, 34.55))
        dist.barrier()
        if rank == 0:
            log.info("Training completed")
        flusher.stop.set()
        dist.destroy_process_group()
    except BaseException:
        if args.scenario != "oom":
            flusher.stop.set()
        raise


if __name__ == "__main__":
    main()
