"""host-memory-exhaustion: host RAM or shared memory ran out (OOM killer, DataLoader workers killed, shm)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, declare
from forensics.playbooks.evidence import combine, detection, events, first_message, ranks_text, within
from forensics.playbooks.failure_signals import progress_after
from forensics.playbooks.fields import field

from forensics.contracts.context import Context, evidence_rows
from forensics.contracts.model import Cause, Detection, Severity

# Proof that host memory ran out.
KERNEL_OOM_CODES = ("host_oom_killed", "slurm_oom_kill")
CPU_ALLOC_CODES = ("cpu_alloc_failed",)
# Windows' commit limit (WinError / os error 1455, `The paging file is too small`): RAM plus the paging file ran out,
# most often as spawned DataLoader workers each load torch's CUDA DLLs again (parsers/signatures.toml).
WINDOWS_COMMIT = "windows_commit"
# TensorFlow's allocator failure names its device (`OOM when allocating tensor … on …/device:CPU:0 by allocator
# cpu`): on the CPU it is host RAM that ran out, not the GPU's memory (cuda-oom leaves those out).
TF_OOM_CODES = ("cuda_oom",)
SHM_CODES = ("dataloader_worker_bus_error", "nccl_shm_attach_failed")
# torch's shared-memory segments (`</torch_…>`): errno tells the exhausted resource apart. ENOSPC (28)
# or the TH-era write failure: /dev/shm is full; EMFILE (24): the open-file limit (every tensor a
# worker shares under the default file_descriptor strategy holds an fd); ENOMEM (12) on mmap: host
# memory or the process's memory-map limit, not the size of /dev/shm.
# The open-file limit counts here only as a shared-memory segment torch could not open (ML-GSAI/SMDM#3). The loader's
# own `Too many open files. Communication with the workers is no longer possible`, `received 0 items of ancdata` and a
# plain `OSError: [Errno 24] Too many open files` name the per-process descriptor limit, neither host RAM nor /dev/shm
# (PLAYBOOKS.md: "host RAM or shared memory exhausted"): no playbook claims them and unclassified-failure quotes them
# (yzhangcs/NeuralRecon#91: `ulimit -n` or the file_system sharing strategy, nothing about memory).
SEGMENT_CODES = ("shared_memory_error",)
# ENOSPC where nothing is written to disk: POSIX semaphores (multiprocessing's SemLock, which every Queue and Lock of a
# DataLoader's workers creates) and SharedMemory segments live in /dev/shm, so `[Errno 28] No space left on device`
# under those frames is a full /dev/shm (a container's 64 MB default; cpython#93253 reproduces it with
# `docker run --shm-size=1m`). Under torch.save / serialization frames it stays checkpoint-failure's disk.
ENOSPC_CODES = ("no_space_left",)
SHM_CONTEXT = (r"SemLock|multiprocessing[/\\](?:synchronize|shared_memory)\.py|_MultiProcessingDataLoaderIter"
               r"|/dev/shm")

FD_TEXT = r"Too many open files|\(24\)$"
MMAP_TEXT = r"unable to mmap .*\(12\)"
# srun's report of a task's end: `Out Of Memory` is the cgroup OOM killer; `Bus error` a SIGBUS (usually
# a full /dev/shm); `Killed` only says SIGKILL (the OOM killer, or the scheduler after a cancel).
SLURM_TASK = ("slurm_task_failed",)
# Any report of a process ended by SIGBUS (signal 7): a launcher's `Signal 7 (SIGBUS) received by PID`/`exitcode: -7`,
# the shell's `Bus error`, UCX's `Caught signal 7 (Bus error: …)` from an NCCL thread. In a training job the page
# it touched is nearly always a shared-memory segment that /dev/shm could not back (a container's 64 MB default).
SIGNAL_CODES = ("shell_signal_exit", "torchrun_worker_signal", "torchrun_child_failed", "torchrun_child_failed_report",
                "spawn_process_exited")
SIGBUS_TEXT = r"(?i)bus error|SIGBUS|\bsignal 7\b|exitcode\s*[:=]\s*-7\b"
# The scheduler stopped the job (time limit, scancel, preemption, requeue): a SIGKILL that follows is its own.
SCHEDULER_STOP_CODES = ("slurm_job_cancelled", "torchrun_death_signal", "preemption_exit")
WORKER_CODES = ("dataloader_worker_killed", "dataloader_worker_exited")
# A process ended by SIGKILL: the OOM killer's usual signal, but a scheduler or a person may send it too.
SIGKILL_CODES = ("torchrun_child_failed", "torchrun_worker_signal", "torchrun_child_failed_report", "deepspeed_launcher_exit",
                 "spawn_process_exited", "slurm_task_failed")
SIGKILL_TEXT = r"exitcode: -9|exitcode\s*:\s*-9|Signal 9 \(SIGKILL\)|return code = -9|signal SIGKILL|Signals\.SIGKILL|: tasks? [\d,-]+: Killed$"
# A worker the main process found dead with no reason printed (`DataLoader worker (pid(s) N) exited unexpectedly`,
# raised by _try_get_data; the `with exit code N` form is a worker that exited by itself, an error of its own). On
# Linux a signal's report (`is killed by signal: Killed` / `Bus error`) comes first when it is printed at all; pasted
# alone, PyTorch's threads answer with the OOM killer or a too-small /dev/shm (detectron2#384 `--shm-size`,
# Yet-Another-EfficientDet-Pytorch#586 Colab RAM, VideoSys#97 RAM growth until killed). A line that names another
# cause of the worker's end (its Python exception, a segfault, another signal, CUDA in a forked worker) decides.
BARE_EXIT_CODES = ("dataloader_worker_exited",)
OTHER_WORKER_END_CODES = ("dataloader_worker_exception", "dataloader_worker_fault", "dataloader_worker_killed",
                          "cuda_fork_reinit")
# The shell's own report of a child it lost to SIGKILL (`Killed`, bash's `line 27:   318 Killed  sh start.sh`, glued
# after a tqdm or Keras progress bar, or localised): the same evidence as a launcher's `exitcode: -9`, so the same unproven finding.
SHELL_KILL_CODES = ("process_killed",)
DIGITS_FORM = "digits"

PLAYBOOK = declare(
    Playbook(
        id="host-memory-exhaustion",
        title="Host memory or shared memory exhausted",
        category="memory",
        severity=Severity.CRITICAL,
        tables=("events",),
        explains=("nccl-timeout", "silent-hang", "rank-straggler"),
        codes=("cpu_alloc_failed", "cuda_fork_reinit", "cuda_oom", "dataloader_worker_bus_error",
               "dataloader_worker_exception", "dataloader_worker_exited", "dataloader_worker_fault", "dataloader_worker_killed", "deepspeed_launcher_exit", "host_oom_killed",
               "nccl_shm_attach_failed", "preemption_exit", "shared_memory_error", "slurm_job_cancelled",
               "slurm_oom_kill", "slurm_task_failed", "spawn_process_exited",
               "torchrun_child_failed", "torchrun_child_failed_report", "torchrun_death_signal",
               "torchrun_worker_signal", "process_killed", "shell_signal_exit", "no_space_left"),
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
            Cause("fd_limit", "The open-file limit ran out opening a shared-memory segment: under the default file_descriptor "
                              "sharing strategy every tensor a DataLoader worker sends holds a file descriptor (EMFILE, errno 24)",
                  verify="ulimit -n; ls /proc/<pid>/fd | wc -l while the loader runs",
                  fix="ulimit -n 65536 (or higher), or torch.multiprocessing.set_sharing_strategy('file_system'); "
                      "return fewer, larger tensors per sample", prior=0.3),
            Cause("small_pagefile", "Windows' commit limit (RAM plus the paging file) ran out: every spawned DataLoader "
                                    "worker imports torch and commits its CUDA libraries again (WinError 1455)",
                  verify="Task Manager > Performance > Memory: `Committed` against its limit while the workers start; "
                         "System > Advanced system settings > Performance > Virtual memory",
                  fix="Fewer DataLoader workers (num_workers 2 or 0); a larger or system-managed paging file; more RAM",
                  prior=0.3),
        ),
        verify="dmesg -T | grep -iE 'out of memory|killed process'; df -h /dev/shm",
        fix="Fewer workers, a larger /dev/shm, memory-mapped datasets",
        thresholds={},
        doc="""\
## Symptom
The host ran out of memory: the kernel or cgroup OOM killer killed a process, Slurm reports an
oom-kill event, the CPU allocator failed (`DefaultCPUAllocator: can't allocate memory`, an uncaught C++
`std::bad_alloc` ending the process, Windows' commit limit: `[WinError 1455] The paging file is too small for this
operation to complete` while torch's DLLs load in spawned workers, `… (os error 1455)`, `DLL load failed: The paging
file is too small …`, localised alike; TensorFlow's
`OOM when allocating tensor … on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu`), a DataLoader
worker was killed by a signal (`Killed` is SIGKILL, usually the OOM killer; `Bus error` is SIGBUS,
usually an exhausted `/dev/shm`), torch cannot write, open or map a `</torch_…>` shared-memory segment,
multiprocessing cannot create a semaphore or shared-memory segment (`OSError: [Errno 28] No space left on device`
under `SemLock` / `synchronize.py` / DataLoader worker start-up frames, or naming `/dev/shm`: /dev/shm is full, no
disk is), the open-file limit runs out while torch opens a worker's shared-memory segment (`unable to open shared
memory object </torch_…> in read-write mode: Too many open files (24)`), srun reports a task ended by `Out Of Memory` (the cgroup OOM killer) or `Bus error`, Kubernetes
reports the container `OOMKilled`, Ray's memory monitor kills a worker (`ray.exceptions.OutOfMemoryError: Task was
killed due to the node running low on memory`, `Memory on the node … exceeds the memory usage threshold`, and the
`ray-oom-prevention` advice it prints only with a kill), or any process ends by SIGBUS (a launcher's `Signal 7 (SIGBUS)`, UCX's
`Caught signal 7 (Bus error …)` in an NCCL thread): in a container, /dev/shm could not back a shared page.

## Why it matters
The killed process leaves its peers waiting in collectives until they time out; the real cause is
on the host, not the GPU.

## Evidence
`events`: kernel/cgroup/Slurm OOM-kill lines, CPU allocator failures, DataLoader worker deaths with
their signal, shared-memory errors. The errno of a `</torch_…>` segment error tells the causes apart:
`No space left on device (28)` (and the TH-era `unable to write to file … at THAllocator.c`) is a full
`/dev/shm`; `Too many open files (24)` is the open-file limit (`fd_limit`), not memory; `Cannot allocate
memory (12)` on mmap is host memory (too many workers, a large dataset object copied into each, or
the memory-map limit `vm.max_map_count`).

## Known false positives
A report of a process killed by SIGKILL — a launcher's (`exitcode: -9`, `Signal 9 (SIGKILL) received by
PID …`, srun's `task 0: Killed`) or the shell's (`Killed`, bash's `line 27:   318 Killed   sh start.sh`,
either glued after the last frame of a progress bar drawn with no newline (tqdm's, Keras' `[====>....] - ETA: …`),
the localised `已杀死`) — without any other host-memory evidence
gives a finding of low confidence that says so: the OOM killer is the usual sender (the answer in nearly
every public thread with such a paste), but a scheduler or a person may have sent the signal; `dmesg` decides. When the scheduler says it stopped the job
(`*** JOB … CANCELLED AT …` for a time limit, `scancel`, preemption or requeue; a launcher's death
signal), the SIGKILLs that follow are its own and nothing is reported; so are srun's `Killed` tasks
after another task's failure was reported (`--kill-on-bad-exit`). A bare `DataLoader worker (pid(s) N) exited
unexpectedly` with nothing else about the worker's end gives a `medium` finding of low confidence (host RAM or
/dev/shm is the usual answer, not proven); a line naming another end (the worker's own exception, `with exit
code N`, a segfault or another signal, CUDA re-initialised in a forked worker) leaves it to that cause. The
DataLoader's `Too many open files. Communication with the workers is no longer possible`, `received 0 items of
ancdata` and `OSError: [Errno 24] Too many open files` are the per-process open-file limit, not memory: not this
playbook's (unclassified-failure quotes them).
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Host OOM kills, CPU allocation failures, shm / fd exhaustion and workers killed by SIGKILL/SIGBUS."""
    slurm = events(ctx, SLURM_TASK)
    kernel = combine(events(ctx, KERNEL_OOM_CODES + CPU_ALLOC_CODES), _host_tensor_oom(ctx), _status(slurm, "Out Of Memory"))
    segments = events(ctx, SEGMENT_CODES)
    fd = _matching(segments, FD_TEXT)
    mmap = _matching(segments, MMAP_TEXT)
    shm_segments = segments.join(combine(fd, mmap).select("file", "line"), on=["file", "line"], how="anti") if segments.height else segments
    shm = combine(events(ctx, SHM_CODES), events(ctx, WORKER_CODES, text=r"Bus error|shared memory|shm"), shm_segments,
                  within(ctx, events(ctx, ENOSPC_CODES), SHM_CONTEXT))
    bus = combine(_status(slurm, "Bus error"), events(ctx, SIGNAL_CODES, text=SIGBUS_TEXT))
    killed = events(ctx, WORKER_CODES, text=r"signal: Killed")
    parts = [p for p in (kernel, shm, fd, mmap, bus, killed) if p.height]
    if not parts:
        return _sigkill_only(ctx) or _bare_worker_exit(ctx)
    ev = combine(*parts)
    causes: dict[str, float] = {}
    cause_ev: dict[str, list] = {}
    if shm.height or bus.height:
        causes["small_shm"] = 1.0 if shm.height else 0.6
        cause_ev["small_shm"] = evidence_rows(combine(shm, bus))
    if fd.height:
        causes["fd_limit"] = 1.0
        cause_ev["fd_limit"] = evidence_rows(fd)
    commit = kernel.filter(field("allocator") == WINDOWS_COMMIT) if kernel.height else kernel
    if kernel.height or killed.height or mmap.height:
        causes["too_many_workers"] = 0.6
        causes["dataset_in_each_worker"] = 0.5
        cause_ev["too_many_workers"] = evidence_rows(combine(kernel, killed, mmap))
    if commit.height:
        # The paging file is a cause of its own only on Windows; a copied dataset is not what these workers load.
        causes["small_pagefile"] = 0.5
        causes["dataset_in_each_worker"] = 0.2
        cause_ev["small_pagefile"] = evidence_rows(commit)
    ranks = ranks_text(sorted({r for r in ev.get_column("rank").to_list() if r is not None}))
    if fd.height and not (kernel.height or shm.height or mmap.height or bus.height or killed.height):
        what = "open-file limit exhausted while DataLoader workers share tensors"
    elif (shm.height or bus.height) and not kernel.height:
        what = "shared memory (/dev/shm) exhausted"
    elif commit.height == kernel.height and commit.height and not (killed.height or mmap.height):
        what = "host memory exhausted (Windows' commit limit: RAM plus the paging file)"
    else:
        what = "host memory exhausted"
    d = detection(ev, f"{what}{' on ' + ranks if ranks else ''}: {first_message(ev)}", causes,
                  confidence=0.9 if kernel.height or shm.height or fd.height or mmap.height else 0.7)
    d.cause_evidence = cause_ev
    return d


def _host_tensor_oom(ctx: Context) -> pl.DataFrame:
    """TensorFlow allocation failures on a CPU device (`… device:CPU:0 by allocator cpu`): host RAM."""
    ev = events(ctx, TF_OOM_CODES)
    if ev.height == 0:
        return ev
    return ev.filter(field("tf_device").fill_null("").str.to_uppercase() == "CPU")


def _status(slurm: pl.DataFrame, status: str) -> pl.DataFrame:
    """srun task reports with this status."""
    if slurm.height == 0:
        return slurm
    return slurm.filter(field("status") == status)


def _matching(ev: pl.DataFrame, pattern: str) -> pl.DataFrame:
    """Rows whose message matches a regex (the errno part of a segment error)."""
    if ev.height == 0:
        return ev
    return ev.filter(pl.col("message").str.contains(pattern) | pl.col("text").str.contains(pattern))


def _sigkill_only(ctx: Context) -> Detection | None:
    """Workers killed by SIGKILL with no other host evidence: a possible OOM kill, reported as unproven."""
    shell = events(ctx, SHELL_KILL_CODES)
    if shell.height:
        # A `Killed` after which the same log goes on training is some other process's (a side command's) end. DIGITS'
        # job page prints its `ERROR: error code -9` above the task's log tail: the lines after it came before it.
        shell = shell.filter(~progress_after(ctx, shell) | (field("form").fill_null("") == DIGITS_FORM))
    ev = combine(events(ctx, SIGKILL_CODES, text=SIGKILL_TEXT), shell)
    # srun --kill-on-bad-exit SIGKILLs the other tasks once one has failed: after an earlier srun report of
    # another end (`Exited with exit code 1`, `Segmentation fault`) their `Killed` is that failure's consequence.
    failed = events(ctx, SLURM_TASK).filter(field("status") != "Killed").group_by("file").agg(pl.col("line").min().alias("_first"))
    if failed.height and ev.height:
        ev = ev.join(failed, on="file", how="left").filter(
            (pl.col("code") != "slurm_task_failed") | pl.col("_first").is_null() | (pl.col("line") < pl.col("_first"))).drop("_first")
    if ev.height == 0:
        return None
    # A job the scheduler stopped (time limit, scancel, preemption) is killed by the scheduler, not the OOM killer.
    if events(ctx, SCHEDULER_STOP_CODES).height:
        return None
    ranks = ranks_text(sorted({r for r in ev.get_column("rank").to_list() if r is not None}))
    return detection(ev, f"a worker{' (' + ranks + ')' if ranks else ''} was killed by SIGKILL: usually the host "
                         "OOM killer, but not proven by these logs (check dmesg)",
                     {"too_many_workers": 0.4, "dataset_in_each_worker": 0.4}, confidence=0.4)


def _bare_worker_exit(ctx: Context) -> Detection | None:
    """A DataLoader worker found dead with no reason printed: usually the OOM killer or /dev/shm, reported as unproven."""
    ev = events(ctx, BARE_EXIT_CODES)
    if ev.height == 0:
        return None
    ev = ev.filter(field("exitcode").is_null())
    other = events(ctx, OTHER_WORKER_END_CODES)
    if other.height and ev.height:
        ev = ev.join(other.select("file").unique(), on="file", how="anti")
    if ev.height == 0:
        return None
    return detection(ev, "a DataLoader worker died with no reason printed: usually the host OOM killer or a too-small "
                         f"/dev/shm, not proven by these logs (check dmesg, df -h /dev/shm): {first_message(ev)}",
                     {"too_many_workers": 0.4, "small_shm": 0.4, "dataset_in_each_worker": 0.3},
                     confidence=0.4, severity=Severity.MEDIUM)
