"""Ingest benchmark: a generated multi-rank run folder, timed against grep -E and a per-line Python loop.

Usage: python bench/ingest_bench.py [--size-mb 1000] [--size-mb 250 ...] [--loop-sample-mb 4] [--no-loop]

For each size it generates (once, then reuses; under /tmp/forensics-bench) a run folder of 8 rank
logs in mixed formats (HF Trainer dicts behind tqdm `\r` redraws, Megatron iteration lines behind
torchrun's `[defaultN]:`, DeepSpeed log_dist / timer / pipeline lines, torchtitan lines with ANSI
colours, torch glog / NCCL INFO / Python warning chatter) with sparse errors (DeepSpeed overflows
along the way; an OOM traceback, NCCL watchdog timeouts and a torchrun ChildFailedError report at
the end); two rank logs are gzip-compressed. Every line format is copied from
../shared/reference/formats.md. Then, in one process:

1. `grep -E -c -f` with the signature table's regexes, converted from Rust-regex syntax to POSIX
   ERE (named groups dropped, `\\d` -> `[0-9]`, lazy quantifiers made greedy: the same set of
   matching lines), over the same bytes already decompressed (decompression is not timed for
   grep; ingest's time includes it). It runs twice: LC_ALL=C.UTF-8 (this machine's locale; the
   logs are UTF-8 and our regexes are Unicode-aware) and LC_ALL=C (bytes; much faster);
2. a plain per-line Python `re` loop applying every signature regex and every metric regex to
   each line segment (after the same `\r` split and ANSI strip the parser does); it is slow, so
   --loop-sample-mb runs it on the first N MiB of every file and scales its time by bytes;
3. `forensics.ingest.ingest()` of the folder in a child interpreter; peak RSS is the sum over
   that process and its worker processes, sampled every 50 ms until ingest() returns.

It prints ingest time as a ratio to grep, the Python loop's time as a ratio to ingest, and the
peak RSS. Targets (issue 2): ingest/grep <= 3, loop/ingest >= 3, RSS < 1 GiB at any size.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gzip
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The checkout and interpreter whose ingest is measured (--code, --python): this one by default.
CODE, PYTHON = REPO, sys.executable
GEN_VERSION = 3  # bump when the generated content changes, so cached folders are rebuilt
RANKS = 8
# Which trainer family writes which rank's log; ranks 1 and 5 are gzip-compressed.
FAMILY = {0: "hf", 1: "hf5", 2: "megatron", 3: "megatron", 4: "deepspeed", 5: "deepspeed", 6: "titan", 7: "titan"}
COMPRESSED = {1, 5}
BASE_TIME = dt.datetime(2025, 3, 1, 10, 0, 0)
HOST = "gpu-node-017"
MB = 1024 * 1024

# torchtitan colours [SRC torchtitan/tools/utils.py via formats.md §0.1]
RED, GREEN, ORANGE, TURQ, BLUE, CYAN, MAGENTA, RESET = (
    "\033[31m", "\033[32m", "\033[38;2;180;60;0m", "\033[38;2;54;234;195m", "\033[34m", "\033[36m", "\033[35m", "\033[39m",
)
BAR_PARTS = " ▏▎▍▌▋▊▉"


# ---------------------------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------------------------


def _t(sec: float) -> dt.datetime:
    return BASE_TIME + dt.timedelta(seconds=sec)


def ts_comma_ms(sec: float) -> str:
    """`2025-03-01 10:00:00,123` (DeepSpeed, torchtitan, Python logging asctime)."""
    t = _t(sec)
    return f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d}"


def ts_glog(sec: float, nanos: bool = False) -> str:
    """`0301 10:00:00.123456` (torch logging) or with 9 fraction digits (c10 >= 2.4)."""
    t = _t(sec)
    frac = f"{t.microsecond:06d}" + ("913" if nanos else "")
    return f"{t:%m%d %H:%M:%S}.{frac}"


def fmt_interval(s: float) -> str:
    """tqdm's format_interval: MM:SS or H:MM:SS."""
    s = int(s)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h:d}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def tqdm_bar(n: int, total: int, elapsed: float) -> str:
    """One tqdm state [SRC tqdm/std.py format_meter]: ` 10%|█         | 100/1000 [01:40<15:00,  1.00s/it]`."""
    frac = n / total
    filled = frac * 10
    full = int(filled)
    bar = "█" * full
    if full < 10:
        bar += BAR_PARTS[int((filled - full) * 8)] + " " * (9 - full)
    rate = n / elapsed if elapsed > 0 else 0.0
    if rate <= 0:
        rate_s = "?it/s"
        rem = "?"
    else:
        rate_s = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
        rem = fmt_interval((total - n) / rate)
    return f"{frac * 100:3.0f}%|{bar}| {n}/{total} [{fmt_interval(elapsed)}<{rem}, {rate_s}]"


def curves(step: int, rng: random.Random) -> tuple[float, float, float]:
    """A plausible loss, grad norm and learning rate at `step`."""
    loss = 2.0 + 8.0 * math.exp(-step / 3000.0) + rng.gauss(0, 0.05)
    gnorm = 0.3 + 2.0 * math.exp(-step / 5000.0) + abs(rng.gauss(0, 0.1))
    lr = 3e-4 * min(1.0, step / 2000.0) * (0.5 + 0.5 * math.cos(min(step, 1_000_000) / 1_000_000 * math.pi))
    return loss, gnorm, lr


def chatter(rank: int, sec: float, step: int, rng: random.Random) -> str:
    """One line of the background noise a real run prints, in the prefixes of formats.md §0.1/§2.5."""
    pid = 40000 + rank
    k = rng.randrange(12)
    if k == 0:
        return f"[rank{rank}]:W{ts_glog(sec)} {pid} torch/_dynamo/convert_frame.py:762] [0/8] torch._dynamo hit config.cache_size_limit (8)\n"
    if k == 1:
        return (f"[rank{rank}]:W{ts_glog(sec)} {pid} torch/_dynamo/convert_frame.py:762] [0/8]    function: 'forward' "
                f"(/usr/local/lib/python3.10/dist-packages/transformers/models/llama/modeling_llama.py:1126)\n")
    if k == 2:
        return f"{HOST}:{pid}:{pid + 17} [{rank}] NCCL INFO Channel {step % 32:02d}/32 : 0 1 2 3 4 5 6 7\n"
    if k == 3:
        return f"{HOST}:{pid}:{pid + 17} [{rank}] NCCL INFO Using network IB\n"
    if k == 4:
        return f"[{ts_comma_ms(sec)}] [INFO] [checkpointing.py:529:forward] Activation Checkpointing Information\n"
    if k == 5:
        return f"Saving model checkpoint to /ckpt/run-17/checkpoint-{step}\n"
    if k == 6:
        return (f"Epoch {step // 1000:d}, global step {step:d}: 'val_loss' reached {2.0 + rng.random():0.5f} "
                f"(best {2.0:0.5f}), saving model to '/ckpt/epoch={step // 1000}-step={step}.ckpt' as top 3\n")
    if k == 7:
        return ("/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: "
                "the use_reentrant parameter should be passed explicitly.\n  warnings.warn(\n")
    if k == 8:
        return ("/usr/local/lib/python3.10/dist-packages/torch/cuda/amp/grad_scaler.py:120: FutureWarning: "
                "`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', args...)` instead.\n")
    if k == 9:
        return f"[rank{rank}]:I{ts_glog(sec)} {pid} torch/distributed/checkpoint/state_dict_saver.py:144] Saving state dict in {rng.random():.3f} seconds\n"
    if k == 10:
        return f"[{ts_comma_ms(sec)}] [INFO] [logging.py:128:log_dist] [Rank {rank}] step={step}, skipped=0, lr=[0.0003], mom=[(0.9, 0.95)]\n"
    return f"{ts_comma_ms(sec)} - INFO - __main__ - dataloader shard {rng.randrange(1024)} opened, {rng.randrange(10**6)} samples\n"


def gen_hf(rank: int, step: int, sec: float, total: int, rng: random.Random, quoted: bool, state: dict) -> str:
    """HF Trainer: a tqdm redraw per step (\\r, no newline); every 5 steps a tqdm.write of the log dict."""
    bar = "\r" + tqdm_bar(step, total, sec)
    if step % 5:
        return bar
    loss, gnorm, lr = curves(step, rng)
    epoch = step / 20000
    if quoted:  # transformers 5.x formats floats with .4g and quotes them [SRC 5.0.0]
        d = f"{{'loss': '{loss:.4g}', 'grad_norm': '{gnorm:.4g}', 'learning_rate': '{lr:.4g}', 'epoch': '{epoch:.4g}'}}"
    else:
        d = f"{{'loss': {round(loss, 4)}, 'grad_norm': {gnorm}, 'learning_rate': {lr}, 'epoch': {round(epoch, 2)}}}"
    out = bar + "\r" + " " * 60 + "\r" + d + "\n"
    if step % 2000 == 0:
        out += (f"{{'eval_loss': {loss + 0.1:.4f}, 'eval_runtime': 12.3456, 'eval_samples_per_second': 81.0, "
                f"'eval_steps_per_second': 10.125, 'epoch': {round(epoch, 2)}}}\n")
    return out


def gen_megatron(rank: int, step: int, sec: float, total: int, rng: random.Random, state: dict) -> str:
    """Megatron-LM iteration line [SRC training_log HEAD], behind torchrun --tee's `[defaultN]:` prefix."""
    p = f"[default{rank}]:"
    loss, gnorm, lr = curves(step, rng)
    t = _t(sec)
    out = (f"{p} [{t:%Y-%m-%d %H:%M:%S.%f}] iteration {step:8d}/{total:8d} | consumed samples: {step * 512:12d} | "
           f"elapsed time per iteration (ms): {1000 + rng.random() * 300:.1f} | throughput per GPU (TFLOP/s/GPU): {400 + rng.random() * 20:.1f} | "
           f"learning rate: {lr:.6E} | global batch size:   512 | lm loss: {loss:.6E} | loss scale: 1.0 | "
           f"grad norm: {gnorm:.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    if step % 100 == 0:
        out += (f"{p}(min, max) time across ranks (ms):\n"
                f"{p}    forward-backward ...............................: ({1234.56 + rng.random():.2f}, {1240.01 + rng.random():.2f})\n"
                f"{p}    optimizer ......................................: (12.34, {12.40 + rng.random():.2f})\n")
    if step % 1000 == 0:
        s = f" validation loss at iteration {step} | lm loss value: {loss + 0.05:.6E} | lm loss PPL: {math.exp(min(20, loss + 0.05)):.6E} | "
        out += f"{p}{'-' * (len(s) + 1)}\n{p}{s}\n{p}{'-' * (len(s) + 1)}\n"
    if step in (10, 20) or step % 5000 == 0:
        out += (f"{p}[Rank {rank}] (after {step} iterations) memory (MB) | allocated: {20480 + rng.random() * 100:.2f} | "
                f"max allocated: 40960.00 | reserved: 45056.00 | max reserved: 45056.00\n")
    return out


def gen_deepspeed(rank: int, step: int, sec: float, total: int, rng: random.Random, state: dict) -> str:
    """DeepSpeed: pipeline `steps:` print, wall-clock breakdown; log_dist/timer reports every 10 steps; rare overflows."""
    loss, gnorm, lr = curves(step, rng)
    ts = ts_comma_ms(sec)
    out = (f"[{ts}] [INFO] [logging.py:128:log_dist] [Rank {rank}] time (ms) | fwd_microstep: {12 + rng.random():.2f} | "
           f"bwd_microstep: {45 + rng.random():.2f} | bwd_inner_microstep: 40.01 | bwd_allreduce_microstep: 5.55 | step_microstep: 3.21\n"
           f"steps: {step} loss: {loss:0.4f} iter time (s): {1.2 + rng.random() * 0.1:0.3f} samples/sec: {207 + rng.random():0.3f}\n")
    if rng.random() < 0.0005:
        scale = state.get("scale", 65536)
        out += (f"[{ts}] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank {rank} Skipping step. "
                f"Attempted loss scale: {scale}, reducing to {scale // 2}\n")
        state["skipped"] = state.get("skipped", 0) + 1
    if step % 10 == 0:
        out += (f"[{ts}] [INFO] [logging.py:128:log_dist] [Rank {rank}] step={step}, skipped={state.get('skipped', 0)}, "
                f"lr=[{lr}, {lr}], mom=[(0.9, 0.999), (0.9, 0.999)]\n"
                f"[{ts}] [INFO] [timer.py:264:stop] epoch=0/micro_step={step * 4}/global_step={step}, RunningAvgSamplesPerSec={205 + rng.random():.12f}, "
                f"CurrSamplesPerSec={200 + rng.random() * 10:.12f}, MemAllocated=17.32GB, MaxMemAllocated=38.74GB\n")
    return out


def gen_titan(rank: int, step: int, sec: float, total: int, rng: random.Random, state: dict) -> str:
    """torchtitan metrics line with its ANSI colours [SRC components/metrics.py], `[rankN]:` prefixed."""
    loss, gnorm, lr = curves(step, rng)
    out = (f"[rank{rank}]:[titan] {ts_comma_ms(sec)} - root - INFO - {RED}step: {step:2}  {GREEN}loss: {loss:8.5f}  "
           f"{ORANGE}grad_norm: {gnorm:7.4f}  {TURQ}memory: {66.91:5.2f}GiB({37.51:.2f}%)  {BLUE}tps: {round(10050 + rng.random() * 100):,}  "
           f"{CYAN}tflops: {314.71:,.2f}  {MAGENTA}mfu: {13.99:.2f}%{RESET}\n")
    if step % 1000 == 0:
        out += f"[rank{rank}]:[titan] {ts_comma_ms(sec)} - root - INFO - [GC] Peforming periodical GC collection. 0.06 seconds.\n"
    return out


def banner(rank: int, fam: str) -> str:
    """Start-of-run lines (formats.md §1.1 banner, §2.5 OMP warning, §2.4.4 NCCL INFO)."""
    pid = 40000 + rank
    out = (
        f"W0301 09:59:58.405000 1 site-packages/torch/distributed/run.py:793] \n"
        f"W0301 09:59:58.405000 1 site-packages/torch/distributed/run.py:793] *****************************************\n"
        f"W0301 09:59:58.405000 1 site-packages/torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process "
        f"to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your "
        f"application as needed. \n"
        f"W0301 09:59:58.405000 1 site-packages/torch/distributed/run.py:793] *****************************************\n"
        f"{HOST}:{pid}:{pid} [{rank}] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        f"{HOST}:{pid}:{pid + 17} [{rank}] NCCL INFO comm 0x5581d2c0 rank {rank} nRanks 8 nNodes 1 localRanks 8 localRank {rank} MNNVL 0\n"
    )
    if fam.startswith("hf"):
        out += ("***** Running training *****\n  Num examples = 1,280,000\n  Num Epochs = 3\n"
                "  Instantaneous batch size per device = 8\n  Total train batch size (w. parallel, distributed & accumulation) = 512\n"
                "  Gradient Accumulation steps = 8\n  Total optimization steps = 7,500\n  Number of trainable parameters = 6,738,415,616\n")
    return out


def error_tail(rank: int, fam: str, sec: float, step: int) -> str:
    """The sparse errors at the end: OOM traceback on rank 3, NCCL watchdog timeouts elsewhere (formats.md §2.1, §2.4.1)."""
    if rank == 3:
        p = f"[default{rank}]:[rank{rank}]: "
        return (
            f"{p}Traceback (most recent call last):\n"
            f'{p}  File "/ws/pretrain_gpt.py", line 270, in <module>\n'
            f"{p}    pretrain(train_valid_test_datasets_provider, model_provider, ModelType.encoder_or_decoder, forward_step)\n"
            f'{p}  File "/ws/megatron/training/training.py", line 386, in pretrain\n'
            f"{p}    iteration, num_floating_point_operations_so_far = train(\n"
            f'{p}  File "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", line 1736, in _wrapped_call_impl\n'
            f"{p}    return self._call_impl(*args, **kwargs)\n"
            f"{p}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 546.00 MiB. GPU 3 has a total capacity of 79.15 GiB of which "
            f"514.19 MiB is free. Process 562167 has 78.63 GiB memory in use. Of the allocated memory 73.73 GiB is allocated by PyTorch, "
            f"with 46.00 MiB allocated in private pools (e.g., CUDA Graphs), and 736.86 MiB is reserved by PyTorch but unallocated. "
            f"If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
            f"fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n"
        )
    g = ts_glog(sec + 600, nanos=True)
    seq = step * 12
    return (
        f"[rank{rank}]:[E{g} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
        f"[rank{rank}]:[E{g} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or timeout) "
        f"detected by watchdog at work: {seq}, last enqueued NCCL work: {seq + 3}, last completed NCCL work: {seq - 1}.\n"
        f"[rank{rank}]:[E{g} ProcessGroupNCCL.cpp:630] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous "
        f"nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n"
        f"[rank{rank}]:[E{g} ProcessGroupNCCL.cpp:636] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.\n"
        f"terminate called after throwing an instance of 'c10::DistBackendError'\n"
        f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: [Rank {rank}] "
        f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, "
        f"Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
        f"Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 (most recent call first):\n"
        f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f94ddb56897 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)\n"
        f"frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 "
        f"(0x7f94dee2c1b2 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)\n"
    )


def launcher_log(steps_sec: float) -> str:
    """torchrun's own output: SIGTERMs, the failure line and the ChildFailedError report [OBS formats.md §2.5]."""
    g = ts_glog(steps_sec + 620)
    lines = [f"W{g} 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:897] Sending process {40000 + r} closing signal SIGTERM\n"
             for r in range(RANKS) if r != 3]
    lines.append(f"E{g} 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 3 (pid: 40003) of binary: /usr/bin/python\n")
    lines.append(
        "Traceback (most recent call last):\n"
        '  File "/usr/local/bin/torchrun", line 8, in <module>\n'
        "    sys.exit(main())\n"
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 919, in main\n'
        "    run(args)\n"
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 260, in launch_agent\n'
        "    raise ChildFailedError(\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        "pretrain_gpt.py FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n"
        "  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        f"  time      : {_t(steps_sec + 620):%Y-%m-%d_%H:%M:%S}\n"
        f"  host      : {HOST}\n"
        "  rank      : 3 (local_rank: 3)\n"
        "  exitcode  : 1 (pid: 40003)\n"
        "  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
        "============================================================\n"
    )
    return "".join(lines)


def gen_rank(path: Path, rank: int, target: int, seed: int) -> tuple[int, float, int]:
    """Write one rank's log of about `target` bytes; returns (steps, seconds, decompressed bytes)."""
    fam = FAMILY[rank]
    rng = random.Random(seed * 1000 + rank)
    state: dict = {}
    written = 0
    # Rough bytes per step per family, to size tqdm's `total`.
    per_step = {"hf": 92, "hf5": 92, "megatron": 440, "deepspeed": 420, "titan": 230}[fam]
    total = max(10, target // per_step)
    opener = (lambda p: gzip.open(p, "wb", compresslevel=6)) if rank in COMPRESSED else (lambda p: open(p, "wb"))  # noqa: SIM115
    step, sec = 0, 0.0
    with opener(path) as fh:
        head = banner(rank, fam).encode()
        fh.write(head)
        written += len(head)
        buf: list[str] = []
        while written < target:
            for _ in range(2000):
                step += 1
                sec += 1.0 + rng.random() * 0.05
                if fam in ("hf", "hf5"):
                    buf.append(gen_hf(rank, step, sec, total, rng, fam == "hf5", state))
                elif fam == "megatron":
                    buf.append(gen_megatron(rank, step, sec, total, rng, state))
                elif fam == "deepspeed":
                    buf.append(gen_deepspeed(rank, step, sec, total, rng, state))
                else:
                    buf.append(gen_titan(rank, step, sec, total, rng, state))
                if rng.random() < 0.08:
                    line = chatter(rank, sec, step, rng)
                    # A line printed while a tqdm bar is open starts on the bar's physical line.
                    buf.append(("\n" + line) if fam.startswith("hf") and step % 5 else line)
            data = "".join(buf).encode()
            buf.clear()
            fh.write(data)
            written += len(data)
        tail = ("\n" if fam.startswith("hf") else "") + error_tail(rank, fam, sec, step)
        data = tail.encode()
        fh.write(data)
        written += len(data)
    return step, sec, written


def generate(size_mb: int, workdir: Path, seed: int = 7) -> Path:
    """The run folder for `size_mb` (reused when already generated with the same parameters)."""
    params = {"gen_version": GEN_VERSION, "size_mb": size_mb, "ranks": RANKS, "seed": seed}
    base = workdir / f"run-{size_mb}mb"
    stamp = base / "params.json"
    if stamp.exists():
        old = json.loads(stamp.read_text())
        if {k: old.get(k) for k in params} == params:
            return base
    if base.exists():
        shutil.rmtree(base)
    run = base / "run"
    (run / "logs").mkdir(parents=True)
    t0 = time.perf_counter()
    per_rank = size_mb * MB // RANKS
    last_sec = 0.0
    total_bytes = 0
    for rank in range(RANKS):
        name = f"rank{rank}.log" + (".gz" if rank in COMPRESSED else "")
        _, sec, n = gen_rank(run / "logs" / name, rank, per_rank, seed)
        last_sec = max(last_sec, sec)
        total_bytes += n
    launcher = launcher_log(last_sec).encode()
    (run / "torchrun.log").write_bytes(launcher)
    total_bytes += len(launcher)
    # grep reads the same bytes already decompressed (decompression is not part of grep's time).
    plain = base / "plain"
    plain.mkdir()
    for path in sorted(run.rglob("*")):
        if path.is_file():
            rel = path.relative_to(run)
            out = plain / (str(rel).replace("/", "__").removesuffix(".gz"))
            if path.suffix == ".gz":
                with gzip.open(path, "rb") as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, 4 * MB)
            else:
                os.link(path, out)
    params["decompressed_bytes"] = total_bytes
    params["generate_s"] = round(time.perf_counter() - t0, 1)
    stamp.write_text(json.dumps(params))
    return base


# ---------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------


def signature_regexes() -> list[tuple[str, str]]:
    """(code, regex) of every row of parsers/signatures.toml."""
    data = tomllib.loads((REPO / "parsers" / "signatures.toml").read_text(encoding="utf-8"))
    return [(s["code"], s["regex"]) for s in data["signature"]]


def metric_regexes() -> list[str]:
    """Per-line regexes equivalent to the metric grammars' work (what a hand-written loop would use)."""
    try:
        sys.path.insert(0, str(REPO))
        from forensics.parsers import metric_lines

        own = getattr(metric_lines, "LOOP_REGEXES", None)
        if own:
            return list(own)
    except Exception:  # noqa: BLE001 - the bench must run against any state of the module
        pass
    return [
        r"^\{'[\w/ .-]+': .*\}$",  # HF dict line
        r"'([\w/ .-]+)': ('[^']*'|[-+\w.]+)",  # HF dict pairs
        r"iteration\s+(\d+)/\s*(\d+) \|",  # Megatron
        r"\| ([\w .()/-]+): ([-+\d.eE]+|nan|inf)",  # Megatron fields
        r"step=(\d+), skipped=(\d+), lr=\[([^\]]*)\]",  # DeepSpeed log_dist report
        r"global_step=(\d+), RunningAvgSamplesPerSec=([\d.]+), CurrSamplesPerSec=([\d.]+)",  # DeepSpeed timer
        r"steps: (\d+) loss: ([\d.]+) iter time \(s\): ([\d.]+) samples/sec: ([\d.]+)",  # DeepSpeed pipeline
        r"time \(ms\)((?: \| \w+: [\d.]+)+)",  # DeepSpeed wall clock breakdown
        r"step:\s*(\d+)\s+loss:\s*([-\d.]+|nan)",  # torchtitan
        r"(\w+): ([\d,.]+)(GiB|%)?",  # torchtitan fields
        r"iter (\d+): loss ([\d.]+), time ([\d.]+)ms",  # nanoGPT
        r"\b(loss|lr|grad_norm)[=:]\s*([-+\d.eE]+|nan|inf)",  # generic
    ]


ERE_SPECIAL = set(".[]()*+?{}|^$\\")


def rust_to_ere(rx: str) -> str:
    """Rust-regex syntax to GNU grep -E syntax (same set of matching lines). Raises ValueError if it can't."""
    out: list[str] = []
    i, n = 0, len(rx)
    in_class = False
    class_buf: list[str] = []
    if rx.startswith("(?i)") or "(?i" in rx:
        raise ValueError("case-insensitive flag")
    while i < n:
        c = rx[i]
        if in_class:
            if c == "\\" and i + 1 < n:
                e = rx[i + 1]
                i += 2
                class_buf.append({"d": "0-9", "w": "[:alnum:]_", "s": "[:space:]", "t": "\t", "n": "\n"}.get(e, e if e not in "-]" else "\x00" + e))
                if e in "DWS":
                    raise ValueError(f"negated class escape \\{e} inside []")
                continue
            if c == "]" and class_buf and class_buf != ["^"]:
                items = "".join(class_buf)
                neg = items.startswith("^")
                body = items[1:] if neg else items
                # ERE: a literal `]` must come first and a literal `-` last.
                has_rb = "\x00]" in body
                has_dash = "\x00-" in body
                body = body.replace("\x00]", "").replace("\x00-", "")
                out.append("[" + ("^" if neg else "") + ("]" if has_rb else "") + body + ("-" if has_dash else "") + "]")
                in_class, class_buf = False, []
                i += 1
                continue
            class_buf.append(c)
            i += 1
            continue
        if c == "[":
            in_class, class_buf = True, []
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            e = rx[i + 1]
            i += 2
            if e == "d":
                out.append("[0-9]")
            elif e == "D":
                out.append("[^0-9]")
            elif e in "wWsSb":
                out.append("\\" + e)
            elif e == "t":
                out.append("\t")
            elif e == "x":
                raise ValueError("\\x escape")
            elif e in ERE_SPECIAL:
                out.append("\\" + e)
            elif e.isalnum():
                raise ValueError(f"escape \\{e}")
            else:
                out.append(e)  # `\-`, `\'`, `\:`... are plain characters
            continue
        if c == "(" and rx.startswith("(?", i):
            m = re.match(r"\(\?(?:P?<\w+>|:)", rx[i:])
            if not m:
                raise ValueError(f"group syntax {rx[i:i + 5]!r}")
            out.append("(")
            i += len(m.group(0))
            continue
        if c == "?" and out and out[-1] in ("*", "+", "?") or (c == "?" and out and out[-1].endswith("}") and not out[-1].startswith("\\")):
            i += 1  # lazy quantifier: same set of matching lines
            continue
        out.append(c)
        i += 1
    return "".join(out)


def grep_patterns() -> tuple[list[str], list[str]]:
    """ERE patterns for grep -E and the codes whose regex could not be converted."""
    pats, skipped = [], []
    for code, rx in signature_regexes():
        try:
            pats.append(rust_to_ere(rx))
        except ValueError as exc:
            skipped.append(f"{code} ({exc})")
    return pats, skipped


def pattern_file(patterns: list[str]) -> str:
    """A temporary file of ERE patterns, one per line, for `grep -f` (the caller unlinks it)."""
    with tempfile.NamedTemporaryFile("w", suffix=".ere", delete=False) as fh:
        fh.write("\n".join(patterns) + "\n")
    return fh.name


GREP_CPU: dict[str, float] = {}  # CPU seconds of the last grep run per locale (a load-independent twin of its wall time)


def run_grep(plain: Path, patterns: list[str], locale: str = "C.UTF-8") -> tuple[float, int]:
    """Seconds and matching-line count of one `grep -E -c -f` over every decompressed file."""
    pfile = pattern_file(patterns)
    files = sorted(str(p) for p in plain.iterdir())
    env = dict(os.environ, LC_ALL=locale)
    t0 = time.perf_counter()
    c0 = os.times()
    proc = subprocess.run(["grep", "-E", "-c", "-f", pfile, *files], capture_output=True, text=True, env=env)
    secs = time.perf_counter() - t0
    c1 = os.times()
    GREP_CPU[locale] = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    os.unlink(pfile)
    if proc.returncode > 1:
        raise RuntimeError(f"grep failed: {proc.stderr.strip()}")
    count = sum(int(line.rsplit(":", 1)[1]) for line in proc.stdout.splitlines() if ":" in line)
    return secs, count


ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")


def python_loop(run: Path, sig_rx: list[str], met_rx: list[str], sample_bytes: int | None = None) -> tuple[float, int, int, int]:
    """Seconds, signature-matching lines, metric-matching segments and bytes read of a per-line `re` loop.

    With `sample_bytes`, each file is read only up to that many (decompressed) bytes.
    """
    sigs = []
    for rx in sig_rx:
        with contextlib.suppress(re.error):
            sigs.append(re.compile(rx))
    mets = [re.compile(rx) for rx in met_rx]
    sig_lines = met_hits = nbytes = 0
    t0 = time.perf_counter()
    for path in sorted(p for p in run.rglob("*") if p.is_file()):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as fh:
            fbytes = 0
            for raw in fh:
                fbytes += len(raw)
                if sample_bytes is not None and fbytes > sample_bytes:
                    break
                nbytes += len(raw)
                line = raw.decode("utf-8", "replace")
                if "\x1b" in line:
                    line = ANSI.sub("", line)
                hit = False
                for seg in line.rstrip("\n").split("\r"):
                    for rx in sigs:
                        if rx.search(seg):
                            hit = True
                    for rx in mets:
                        if rx.search(seg):
                            met_hits += 1
                sig_lines += hit
    return time.perf_counter() - t0, sig_lines, met_hits, nbytes


CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
def cpu():
    return sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) for f in ("ru_utime", "ru_stime"))
t0 = time.perf_counter()
from forensics.ingest import ingest
t1, c1 = time.perf_counter(), cpu()
run = ingest(sys.argv[1])
t2, c2 = time.perf_counter(), cpu()  # the pool's workers are reaped when ingest returns: their CPU time counts
done = {"import_s": t1 - t0, "ingest_s": t2 - t1, "cpu_s": c2 - c1,
        "rss_self_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "rss_children_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}
print("INGESTED " + json.dumps(done), flush=True)  # the parent stops sampling memory here
from forensics.ingest import _load
parts = run.parts.get("metrics", [])
events = run.table("events")
codes = {}
for c in events.column("code").to_pylist():
    codes[c] = codes.get(c, 0) + 1
files = run.table("files").to_pylist()
print(json.dumps({
    # Row counts without assembling the metrics table (that would be the consumer's memory, not ingest's).
    "metrics": sum(_load(p).num_rows for p in parts), "events": events.num_rows, "codes": codes,
    "statuses": sorted({(f["status"], f["error"] or "") for f in files}),
}), flush=True)
# What `forensics ingest RUN -o DIR` does next: every table written as Parquet (the parent keeps
# sampling memory until the child exits, so this phase has its own peak).
import tempfile
from forensics import cache
t3 = time.perf_counter()
with tempfile.TemporaryDirectory() as out:
    cache.save(run, __import__("pathlib").Path(out))
print("SAVED " + json.dumps({"save_s": time.perf_counter() - t3}), flush=True)
"""


def _tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants, from /proc (0 when gone)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        stack.extend(children.get(p, []))
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total


def run_ingest(run: Path, workers: str | None = None) -> dict:
    """Time `ingest()` in a fresh child interpreter; peak RSS of it and its workers while it ingests."""
    import threading

    env = dict(os.environ)
    if workers is not None:
        env["FORENSICS_WORKERS"] = workers
    t0 = time.perf_counter()
    proc = subprocess.Popen([PYTHON, "-c", CHILD, str(run), str(CODE)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    ingested = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("INGESTED "):
                ingested.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    peak = 0
    peak_ingest = None
    while proc.poll() is None:
        if sys.platform.startswith("linux"):
            peak = max(peak, _tree_rss_kib(proc.pid))
        if peak_ingest is None and ingested.is_set():
            peak_ingest = peak
        time.sleep(0.05)
    err_s = proc.stderr.read()
    proc.wait()
    reader.join()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"ingest failed:\n{err_s}")
    out = json.loads(next(x for x in lines if x.startswith("INGESTED "))[len("INGESTED "):])
    out.update(json.loads(next(x for x in lines if x.startswith("{"))))
    out.update(json.loads(next(x for x in lines if x.startswith("SAVED "))[len("SAVED "):]))
    out["wall_s"] = wall
    out["rss_tree_kib"] = peak if peak_ingest is None else peak_ingest
    out["rss_with_save_kib"] = peak
    return out


def _uptime() -> str:
    """The machine's load as `uptime` prints it (other work on the machine skews every ratio)."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return f"load average {os.getloadavg()[0]:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, action="append", help="decompressed size of the run folder (repeatable; default 1000)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "forensics-bench")
    ap.add_argument("--loop-sample-mb", type=float, default=None,
                    help="run the Python loop on the first N MiB of each file and scale its time by bytes (it is slow)")
    ap.add_argument("--no-loop", action="store_true", help="skip the per-line Python loop (ingest/grep only)")
    ap.add_argument("--repeat", type=int, default=1, help="time grep and ingest this many times, keep the best")
    ap.add_argument("--workers", default=None, help="FORENSICS_WORKERS for the ingest (default: automatic)")
    ap.add_argument("--code", type=Path, default=REPO,
                    help="checkout whose ingest is measured (another commit's, for a before/after), with --python")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the ingest child (the --code checkout's venv)")
    args = ap.parse_args()
    global CODE, PYTHON
    CODE, PYTHON = args.code, args.python
    sizes = sorted(args.size_mb or [1000])
    args.workdir.mkdir(parents=True, exist_ok=True)
    patterns, skipped = grep_patterns()
    sig_rx = [rx for _, rx in signature_regexes()]
    met_rx = metric_regexes()
    print(f"signature table: {len(sig_rx)} regexes; grep -E with {len(patterns)} of them converted to POSIX ERE"
          + (f"; not convertible, left out of grep: {', '.join(skipped)}" if skipped else ""))
    print(f"python loop: {len(sig_rx)} signature + {len(met_rx)} metric regexes per line segment")
    print(f"cores: {os.cpu_count()}  load: {_uptime()}")
    for size in sizes:
        base = generate(size, args.workdir)
        params = json.loads((base / "params.json").read_text())
        nbytes = params["decompressed_bytes"]
        run, plain = base / "run", base / "plain"
        on_disk = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
        print(f"\n== {size} MB run folder: {base} ({nbytes / MB:.0f} MiB decompressed, {on_disk / MB:.0f} MiB on disk, "
              f"{len(list(run.rglob('*.log*')))} files)")
        # Warm the page cache for every contender alike.
        for p in list(run.rglob("*")) + list(plain.iterdir()):
            if p.is_file():
                with open(p, "rb") as fh:
                    while fh.read(16 * MB):
                        pass
        greps = {}
        for loc in ("C", "C.UTF-8"):
            g_s, g_n = min(run_grep(plain, patterns, loc) for _ in range(args.repeat))
            greps[loc] = g_s
            print(f"grep -E (LC_ALL={loc:7s}): {g_s:7.2f} s  ({nbytes / MB / g_s:6.0f} MiB/s)  {g_n} matching lines")
        ing = min((run_ingest(run, args.workers) for _ in range(args.repeat)), key=lambda r: r["ingest_s"])
        i_s = ing["ingest_s"]
        rss = max(ing["rss_tree_kib"], ing["rss_self_kib"], ing["rss_children_kib"]) / 1024
        print(f"ingest             : {i_s:7.2f} s  ({nbytes / MB / i_s:6.0f} MiB/s)  metrics {ing['metrics']}, events {ing['events']}; "
              f"imports {ing['import_s']:.1f} s")
        print(f"  cores used: {ing['cpu_s'] / i_s:.2f} (CPU time of ingest and its workers / wall time; {ing['cpu_s']:.1f} s / {i_s:.1f} s)")
        print(f"  peak RSS {ing['rss_tree_kib'] / 1024:.0f} MiB (parent + workers, sampled every 50 ms); "
              f"max RSS {ing['rss_self_kib'] / 1024:.0f} MiB (parent), {ing['rss_children_kib'] / 1024:.0f} MiB (largest worker)")
        print(f"  then every table written as Parquet (what `forensics ingest -o` does): {ing['save_s']:.1f} s, "
              f"peak RSS {ing['rss_with_save_kib'] / 1024:.0f} MiB")
        print(f"  events by code: {dict(sorted(ing['codes'].items()))}")
        bad = [s for s in ing["statuses"] if s[0] != "parsed"]
        if bad:
            print(f"  files not parsed cleanly: {bad}")
        if "cpu_s" in ing and GREP_CPU.get("C"):
            # On a loaded machine wall times swing with the neighbours; CPU seconds do not (ingest's are summed
            # over its cores, so this is the ratio on one core).
            print(f"  CPU seconds: ingest {ing['cpu_s']:.1f} (process and its reaped workers), grep -E (LC_ALL=C) "
                  f"{GREP_CPU['C']:.1f}: ingest/grep = {ing['cpu_s'] / GREP_CPU['C']:.2f}x in CPU")
        if args.no_loop:
            print(f"RESULT {size} MB: ingest/grep = {i_s / greps['C']:.2f}x vs grep in the C locale, {i_s / greps['C.UTF-8']:.2f}x vs grep in "
                  f"C.UTF-8 (target <= 3); peak RSS = {rss:.0f} MiB")
            print(f"load now: {_uptime()}")
            continue
        sample = int(args.loop_sample_mb * MB) if args.loop_sample_mb else None
        l_s, l_sig, l_met, l_bytes = python_loop(run, sig_rx, met_rx, sample)
        scale = nbytes / l_bytes if l_bytes else 1.0
        how = f"measured on {l_bytes / MB:.0f} MiB, scaled x{scale:.1f}" if sample else "whole folder"
        print(f"python loop        : {l_s * scale:7.2f} s  ({l_bytes / MB / l_s:6.1f} MiB/s, {how})  {l_sig} signature lines, {l_met} metric matches")
        if not sample and l_sig != g_n:
            print(f"  note: grep counted {g_n} lines, the loop {l_sig} (grep sees ANSI codes and whole \\r-joined lines)")
        print(f"RESULT {size} MB: ingest/grep = {i_s / greps['C']:.2f}x vs grep in the C locale, {i_s / greps['C.UTF-8']:.2f}x vs grep in "
              f"C.UTF-8 (target <= 3); python loop/ingest = {l_s * scale / i_s:.2f}x (target >= 3); peak RSS = {rss:.0f} MiB, {ing['rss_with_save_kib'] / 1024:.0f} MiB with the Parquet writing (target < 1024)")
        print(f"load now: {_uptime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
