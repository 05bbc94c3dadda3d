"""cuda-context-corruption: invalid resource handles / contexts, CUDA re-initialised after fork, shared GPUs."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import combine, detection, events, first_message, where

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

CODES = ("invalid_resource_handle", "invalid_device_context", "cuda_busy_unavailable", "cuda_fork_reinit")
# cudaErrorInitializationError (3) raised in a process that inherited CUDA state by fork: DataLoader workers and
# multiprocessing children of a parent that had already initialised CUDA [OBS pytorch/pytorch#4377, #21092,
# Lightning-AI/pytorch-lightning#19598, filipradenovic/cnnimageretrieval-pytorch#21]. Without a worker in sight
# it may be a broken driver at start-up instead, so it counts only next to one.
INIT_ERROR = r"(?:CUDA error(?: \(3\))?|cuda runtime error \(3\)) ?: initialization error"
WORKER_CODES = ("dataloader_worker_killed", "dataloader_worker_exited", "dataloader_worker_exception", "dataloader_worker_fault")
WORKER_TEXT = r"DataLoader worker|_worker_loop|multiprocessing|forked"
# NCCL refuses a communicator in which two ranks sit on one GPU (`Duplicate GPU detected : rank A and rank B both on
# CUDA device N`, ncclInvalidUsage): several processes share a GPU. The NCCL error that carries it as its `Last error`
# is the same failure, so it dates the finding (nccl-timeout reports that error as its consequence).
DUPLICATE_GPU_CODES = ("nccl_duplicate_gpu",)
NCCL_ERROR_CODES = ("nccl_error", "nccl_error_detail")
DUPLICATE_GPU_TEXT = r"Duplicate GPU detected"

PLAYBOOK = declare(
    Playbook(
        id="cuda-context-corruption",
        title="Stale or shared CUDA context",
        category="device",
        severity=Severity.HIGH,
        tables=("events", "gpu", "gpu_procs"),
        explains=("nccl-timeout", "device-assert"),
        codes=("cuda_busy_unavailable", "cuda_fork_reinit", "invalid_device_context", "invalid_resource_handle", "cuda_error", "dataloader_worker_exception", "dataloader_worker_exited", "dataloader_worker_fault", "dataloader_worker_killed", "python_traceback", "terminate_called",
               "nccl_duplicate_gpu", "nccl_error", "nccl_error_detail"),
        causes=(
            Cause("fork_after_cuda", "CUDA was initialised before fork (DataLoader workers or multiprocessing), so children use a stale context",
                  verify="Look for torch.cuda calls before DataLoader(num_workers>0) / multiprocessing.Process; 'Cannot re-initialize CUDA in forked subprocess'",
                  fix="multiprocessing.set_start_method('spawn') (or DataLoader(multiprocessing_context='spawn')); keep CUDA out of dataset __init__", prior=0.45),
            Cause("threads_without_device_guard", "Threads use CUDA objects (streams, events, handles) created on another device or context",
                  verify="Check every thread sets torch.cuda.set_device(...) before using streams/events",
                  fix="torch.cuda.set_device per thread or `with torch.cuda.device(i):`; create streams in the thread that uses them", prior=0.3),
            Cause("shared_gpu", "Several processes share one GPU (or its compute mode changed under the job)",
                  verify="nvidia-smi --query-compute-apps=pid,used_memory --format=csv -lms 100; nvidia-smi -q | grep 'Compute Mode'",
                  fix="One process per GPU (CUDA_VISIBLE_DEVICES per rank); keep the compute mode fixed", prior=0.25),
        ),
        verify="nvidia-smi --query-compute-apps=pid,used_memory --format=csv -lms 100",
        fix="spawn instead of fork, per-thread device guards, one process per GPU",
        thresholds={
            "min_shared_samples": Threshold(3, "samples of one GPU with two or more compute processes before it counts as shared (a restart overlaps for a moment)", "ours"),
        },
        doc="""\
## Symptom
`CUDA error: invalid resource handle`, `invalid device context`, `Cannot re-initialize CUDA in forked
subprocess`, `CUDA error: initialization error` in workers; nvidia-smi samples showing the compute mode
flipping between Default and Exclusive_Process, or several processes on one GPU.

## Why it matters
These errors look random and move around the code; the cause is process/thread structure, not the op
that fails.

## Evidence
`events` with context error codes (also the driver-API `CUDA_ERROR_INVALID_HANDLE: invalid resource
handle` of CuPy and TensorRT's `Cuda Runtime (invalid resource handle)`); `gpu` compute mode per
sample; `gpu_procs` PIDs per GPU. NCCL's `Duplicate GPU detected : rank A and rank B both on CUDA device N` (raised as
`ncclInvalidUsage`) says two ranks were given one GPU: the shared-GPU cause ranks first, and the NCCL error that
carries it is this failure, not a network fault. `Cannot re-initialize CUDA in forked subprocess` and
`initialization error` rank the fork cause first; a bare invalid handle ranks the device-guard cause
first (a stream or buffer created under one device's context and used under another's).

## Known false positives
`invalid resource handle` can follow an earlier device-side assert (the context is then dead): the
engine makes the assert the root when it comes first.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect_events(ctx: Context, th: dict) -> Detection | None:
    """Context errors in the logs."""
    shared = _duplicate_gpu(ctx)
    ev = combine(events(ctx, CODES), _init_error_in_worker(ctx), shared)
    if ev.height == 0:
        return None
    text = " ".join(ev.get_column("message").to_list()[:20]).lower()
    if shared.height:
        row = shared.row(0, named=True)
        return detection(ev, f"two ranks on one GPU{where(row)}: {first_message(shared.filter(pl.col('code') == 'nccl_duplicate_gpu'))}",
                         {"shared_gpu": 1.0}, confidence=0.9)
    if "fork" in text or "initialization error" in text:
        causes = {"fork_after_cuda": 0.9}
    else:
        # A handle (stream, event, memory) used under another device's context is the usual way to
        # an invalid handle; a fork leaves its own words ('forked subprocess', 'initialization error').
        causes = {"threads_without_device_guard": 0.8, "shared_gpu": 0.4, "fork_after_cuda": 0.3}
    row = ev.row(0, named=True)
    return detection(ev, f"CUDA context error{where(row)}: {first_message(ev)}", causes, confidence=0.85)


def _init_error_in_worker(ctx: Context) -> pl.DataFrame:
    """CUDA `initialization error`s of a run that shows forked workers (a worker's death, or worker frames)."""
    init = events(ctx, ("cuda_error", "terminate_called", "python_traceback"), text=INIT_ERROR)
    if init.height == 0:
        return init
    workers = events(ctx, WORKER_CODES).height or events(ctx, ("python_traceback",), text=WORKER_TEXT).height
    return init if workers else init.clear()


def _duplicate_gpu(ctx: Context) -> pl.DataFrame:
    """NCCL's duplicate-GPU refusal, with the NCCL errors whose `Last error` it is."""
    dup = events(ctx, DUPLICATE_GPU_CODES)
    if dup.height == 0:
        return dup
    return combine(dup, events(ctx, NCCL_ERROR_CODES, text=DUPLICATE_GPU_TEXT).join(dup.select("file").unique(), on="file", how="semi"))
