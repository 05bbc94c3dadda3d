"""host-memory-exhaustion: host RAM or shared memory ran out (OOM killer, DataLoader workers killed, shm)."""

from __future__ import annotations

import polars as pl

from forensics.context import Context
from playbooks.base import Playbook, declare
from playbooks.evidence import combine, detection, events, first_message, ranks_text
from playbooks.model import Cause, Detection, Severity

# Proof that host memory ran out.
KERNEL_OOM_CODES = ("host_oom_killed", "slurm_oom_kill")
CPU_ALLOC_CODES = ("cpu_alloc_failed",)
SHM_CODES = ("dataloader_worker_bus_error", "nccl_shm_attach_failed")
WORKER_CODES = ("dataloader_worker_killed", "dataloader_worker_exited")
# A process ended by SIGKILL: the OOM killer's usual signal, but a scheduler or a person may send it too.
SIGKILL_CODES = ("torchrun_child_failed", "torchrun_worker_signal", "torchrun_child_failed_report", "deepspeed_launcher_exit",
                 "spawn_process_exited")
SIGKILL_TEXT = r"exitcode: -9|exitcode\s*:\s*-9|Signal 9 \(SIGKILL\)|return code = -9|signal SIGKILL|Signals\.SIGKILL"

PLAYBOOK = declare(
    Playbook(
        id="host-memory-exhaustion",
        title="Host memory or shared memory exhausted",
        category="memory",
        severity=Severity.CRITICAL,
        tables=("events",),
        explains=("nccl-timeout", "silent-hang", "rank-straggler"),
        causes=(
            Cause("small_shm", "/dev/shm is too small for the DataLoader's shared-memory tensors (containers default to 64 MB)",
                  verify="df -h /dev/shm inside the container",
                  fix="docker run --shm-size=16g (or --ipc=host); Kubernetes: mount an emptyDir with medium: Memory at /dev/shm", prior=0.35),
            Cause("too_many_workers", "Too many DataLoader workers or prefetched batches for the host RAM",
                  verify="dmesg -T | grep -i 'killed process'; watch RSS of the worker processes",
                  fix="Lower num_workers and prefetch_factor; use persistent_workers", prior=0.35),
            Cause("dataset_in_each_worker", "The dataset is held in Python objects copied into every worker (copy-on-read of refcounts)",
                  verify="RSS of each worker grows with the dataset size",
                  fix="Store samples in numpy arrays / memory-mapped files instead of Python lists of objects", prior=0.3),
        ),
        verify="dmesg -T | grep -iE 'out of memory|killed process'; df -h /dev/shm",
        fix="Fewer workers, a larger /dev/shm, memory-mapped datasets",
        thresholds={},
        doc="""\
## Symptom
The host ran out of memory: the kernel or cgroup OOM killer killed a process, Slurm reports an
oom-kill event, the CPU allocator failed (`DefaultCPUAllocator: can't allocate memory`), a DataLoader
worker was killed by a signal (`Killed` is SIGKILL, usually the OOM killer; `Bus error` is SIGBUS,
usually an exhausted `/dev/shm`).

## Why it matters
The killed process leaves its peers waiting in collectives until they time out; the real cause is
on the host, not the GPU.

## Evidence
`events`: kernel/cgroup/Slurm OOM-kill lines, CPU allocator failures, DataLoader worker deaths with
their signal, shared-memory errors.

## Known false positives
A bare `Killed` line is not counted. A launcher report of a worker killed by SIGKILL (`exitcode: -9`,
`Signal 9 (SIGKILL) received by PID …`) without any other host-memory evidence gives a finding of low
confidence that says so: the OOM killer is the usual sender, but a scheduler or a person may have
sent the signal; `dmesg` decides.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Host OOM kills, CPU allocation failures, shm exhaustion and workers killed by SIGKILL/SIGBUS."""
    kernel = events(ctx, KERNEL_OOM_CODES + CPU_ALLOC_CODES)
    shm = pl.concat([events(ctx, SHM_CODES), events(ctx, WORKER_CODES, text=r"Bus error|shared memory|shm")], how="vertical_relaxed")
    killed = events(ctx, WORKER_CODES, text=r"signal: Killed")
    parts = [p for p in (kernel, shm, killed) if p.height]
    if not parts:
        return _sigkill_only(ctx)
    ev = combine(*parts)
    causes: dict[str, float] = {}
    if shm.height:
        causes["small_shm"] = 1.0
    if kernel.height or killed.height:
        causes["too_many_workers"] = 0.6
        causes["dataset_in_each_worker"] = 0.5
    ranks = ranks_text(sorted({r for r in ev.get_column("rank").to_list() if r is not None}))
    what = "shared memory (/dev/shm) exhausted" if shm.height and not kernel.height else "host memory exhausted"
    return detection(ev, f"{what}{' on ' + ranks if ranks else ''}: {first_message(ev)}", causes,
                     confidence=0.9 if kernel.height or shm.height else 0.7)


def _sigkill_only(ctx: Context) -> Detection | None:
    """Workers killed by SIGKILL with no other host evidence: a possible OOM kill, reported as unproven."""
    ev = events(ctx, SIGKILL_CODES, text=SIGKILL_TEXT)
    if ev.height == 0:
        return None
    ranks = ranks_text(sorted({r for r in ev.get_column("rank").to_list() if r is not None}))
    return detection(ev, f"a worker{' (' + ranks + ')' if ranks else ''} was killed by SIGKILL (exit code -9): usually the host "
                         "OOM killer, but not proven by these logs (check dmesg)",
                     {"too_many_workers": 0.4, "dataset_in_each_worker": 0.4}, confidence=0.4)
