"""cuda-oom: the device ran out of memory; tell demand, fragmentation and foreign processes apart."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.fields import field, fmt_mib, size_mib

from forensics.contracts.context import Context, event_count, evidence_rows, onset_of, plain, sort_by_onset
from forensics.contracts.model import Cause, Detection, Severity

# Event codes of the signature table that are a device allocation failure.
OOM_CODES = ("cuda_oom", "mps_oom")
# cuBLAS cannot allocate its handle or workspace: the device is out of memory, without numbers.
CUBLAS_OOM = "CUBLAS_STATUS_ALLOC_FAILED"
# cublasCreate's NOT_INITIALIZED: the handle's set-up (a CUDA context and workspace on the device) failed. PyTorch's
# `CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`` and TensorFlow's `failed to create cublas
# handle: CUBLAS_STATUS_NOT_INITIALIZED` are, in the public threads, a GPU with too little memory left for it
# (tensorflow/tensorflow#9489, QwenLM/Qwen#120, OpenBMB/VisCPM#3, karpathy/llama2.c#279, YuelangX/AvatarMAV#5, and
# discuss.pytorch.org/t/125450 that they cite); an index past an embedding's size is the other reading
# (EleutherAI/lm-evaluation-harness#1689, wzk1015/video-bgm-generation#27), which a device-side assert shows: then it
# is that playbook's. NOT_INITIALIZED at any other call is not a handle's creation and says nothing of memory.
CUBLAS_HANDLE = r"(?i)cublasCreate|create cublas handle"
CUBLAS_NOT_INIT = "CUBLAS_STATUS_NOT_INITIALIZED"
# A kernel's out-of-bounds access reported first (device-assert's evidence): the handle failure is its aftermath.
KERNEL_FAULT_CODES = ("cuda_kernel_assert", "device_side_assert", "illegal_memory_access")
# accelerate's find_executable_batch_size swallows each OOM and halves the batch; this is its last word.
BATCH_FINDER_CODES = ("accelerate_no_batch_size",)
# A trainer's OOM handler reports the skipped batch within this many lines of the OOM message.
RECOVERY_LINES = 3

PLAYBOOK = declare(
    Playbook(
        id="cuda-oom",
        title="GPU out of memory",
        category="memory",
        severity=Severity.CRITICAL,
        tables=("events",),
        explains=("nccl-timeout", "silent-hang", "rank-straggler", "checkpoint-failure"),
        codes=("accelerate_no_batch_size", "cublas_error", "cuda_kernel_assert", "cuda_oom", "device_side_assert",
               "illegal_memory_access", "mps_oom", "oom_recovered"),
        causes=(
            Cause("demand_above_capacity", "The step needs more memory than the GPU has (batch, sequence length or an unsharded model)",
                  verify="Run one step with the same batch and print torch.cuda.max_memory_allocated(); compare with the capacity",
                  fix="Smaller per-device batch with gradient accumulation, activation checkpointing, bf16/fp16, or shard the model (FSDP/ZeRO)",
                  prior=0.5),
            Cause("memory_growth", "Memory grew over the run until it ran out (a leak)",
                  verify="Log torch.cuda.memory_allocated() every step and look for a steady rise",
                  fix="Call .item() on logged losses, .detach() tensors kept across steps, drop references to graphs",
                  prior=0.25, playbook="memory-leak"),
            Cause("fragmentation", "Enough memory is free in total but reserved-and-unallocated blocks are fragmented",
                  verify="torch.cuda.memory_summary() at the failure; compare reserved with allocated",
                  fix="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; bucket variable sequence lengths",
                  prior=0.15, playbook="allocator-fragmentation"),
            Cause("foreign_process", "Another process holds memory on the same GPU",
                  verify="nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
                  fix="Give the job exclusive GPUs (CUDA_VISIBLE_DEVICES, scheduler exclusivity); kill stray processes",
                  prior=0.15),
        ),
        verify="torch.cuda.memory_summary(); nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
        fix="Reduce per-device memory: smaller batch with gradient accumulation, activation checkpointing, mixed precision, sharding",
        thresholds={
            "foreign_share": Threshold(0.05, "memory held by other processes, as a share of capacity, that counts as a foreign-process cause", "PLAYBOOKS.md cuda-oom"),
            "fragmentation_share": Threshold(0.20, "reserved-but-unallocated memory as a share of capacity that points to fragmentation", "PLAYBOOKS.md allocator-fragmentation (>20%)"),
            "demand_share": Threshold(0.5, "requested allocation as a share of the memory free at failure above which demand, not fragmentation, is the cause", "ours"),
            "proc_lookback_s": Threshold(600, "how long (s) before the OOM a process sample still describes the GPU at the failure", "ours"),
        },
        doc="""\
## Symptom
A device allocation failed: `CUDA out of memory. Tried to allocate …` (every PyTorch era, also
`torch.OutOfMemoryError`, HIP/XPU/MPS forms, `CUDA error: out of memory` outside the caching
allocator, NCCL's `Cuda failure 2 'out of memory'`, `CUBLAS_STATUS_ALLOC_FAILED` when cuBLAS cannot
allocate its handle or workspace, `CUBLAS_STATUS_NOT_INITIALIZED` when creating the handle failed
(`cublasCreate(handle)`, TensorFlow's `failed to create cublas handle`, mshadow's `Check failed: err ==
CUBLAS_STATUS_SUCCESS (1 vs. 0) : Create cublas handle failed`: a GPU without memory left for it, unless a
device-side assert came first), other frameworks' own words (MXNet's `cudaMalloc failed: out of memory`, Theano's `Error
allocating N bytes of device memory (out of memory)` and `cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY`, DyNet's `dynet is out
of memory, try increasing with --dynet-mem`), XLA:TPU's compile-time `Ran out of memory in memory space hbm. Used
8.38G of 8.00G hbm.` when the program's buffers do not fit the TPU's HBM), or accelerate's batch-size finder gives up (`No executable batch
size found, reached zero`: it caught an OOM at every batch size down to one sample, so the demand of
a single sample is above what the GPU has free).

## Why it matters
The rank that fails takes the job down; the other ranks then block in collectives and time out,
so the first OOM is usually the root of a cascade of NCCL timeouts and launcher failures.

## Evidence
`events` with an OOM code. The numbers of the message tell the causes apart: requested size,
capacity, free, allocated by PyTorch, reserved-but-unallocated, and `Process N has X memory in use`
sentences naming other processes. A request larger than the reserved-but-unallocated memory is demand
(what stays reserved at the failure lies in segments partly in use and cannot join the free memory); one
that would fit into it is fragmentation; other processes holding more than the
shortfall make the foreign-process cause outrank demand. In a container NVML cannot match the job's
own PID, so the message lists the job itself as `Process N` (and has no `this process has` sentence):
the smallest listed amount that holds all of PyTorch's reservation is taken as the job, not a
foreign process. `gpu_procs` (nvidia-smi) can show foreign PIDs too, and a `memory-leak` finding
shows growth before the failure.

## Known false positives
An OOM the program catches and survives is noted at `info` severity only: every OOM is followed by a
trainer's skip line (fairseq's `| WARNING: ran out of memory …, skipping batch`, `attempting to
recover from OOM`) or by progress lines of the same rank at later steps (a batch-size finder or a
trainer that halves the batch and goes on), and no error follows in that file. A caught OOM followed
by nothing cannot be told from a crash by its text. Advice text (`If reserved but unallocated memory
is large …`) is never evidence on its own.

## References
PyTorch `c10/cuda/CUDACachingAllocator.cpp`; reference/formats.md §2.1.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect_oom_events(ctx: Context, th: dict) -> Detection | None:
    """OOM errors in the logs, with the causes told apart from the message's numbers."""
    ev = device_oom_events(ctx)
    if ev.height == 0:
        return None
    ev = ev.with_columns(
        size_mib(field("requested")).alias("req"),
        size_mib(field("capacity")).alias("cap"),
        size_mib(field("free")).alias("free"),
        size_mib(field("allocated")).alias("alloc"),
        size_mib(field("reserved_unallocated")).alias("frag"),
        size_mib(field("reserved")).alias("reserved"),
        field("other_memory").alias("others"),
        field("this_process").alias("this_process"),
        field("gpu").alias("gpu"),
        field("device").alias("device"),
        field("used").alias("used"),
        field("over").alias("over"),
        field("capacity").alias("capacity_text"),
        field("status").alias("cublas_status"),
    )
    first = ev.row(0, named=True)
    ranks = sorted({r for r in ev.get_column("rank").to_list() if r is not None})
    cap, req, free, frag = first["cap"], first["req"], first["free"], first["frag"]
    if frag is None and first["reserved"] is not None and first["alloc"] is not None:
        frag = max(first["reserved"] - first["alloc"], 0.0)  # old bracket form: reserved in total
    foreign = _foreign_mib(first["others"], own_listed=first["this_process"] is None,
                           pytorch_reserved=None if first["alloc"] is None else first["alloc"] + (frag or 0.0))
    causes, discount = _causes(th, cap=cap, req=req, free=free, frag=frag, foreign=foreign)
    recovered = _recovered(ctx, ev)
    where = f" on rank {first['rank']}" if first["rank"] is not None else ""
    step = f" at step {first['step']}" if first["step"] is not None else ""
    gpu = f" (GPU {first['gpu']})" if first["gpu"] is not None else ""
    numbers = ""
    if req is not None:
        numbers = f": tried to allocate {fmt_mib(req)}"
        if cap is not None:
            numbers += f" with {fmt_mib(free)} free of {fmt_mib(cap)}"
        if frag is not None:
            numbers += f", {fmt_mib(frag)} reserved but unallocated"
        if foreign:
            numbers += f", {fmt_mib(foreign)} held by other processes"
    if first["used"] is not None:
        # XLA:TPU's compile-time check prints what the program needs, not one allocation (TPU sizes: `8.38G`).
        numbers = f": the compiled program needs {first['used']} of {first['capacity_text']} HBM"
        numbers += f" ({first['over']} over)" if first["over"] is not None else ""
    kind = "TPU" if first["device"] == "TPU" else "CUDA"
    count = event_count(ev)
    more = f" ({count} OOM errors on {len(ranks)} rank(s))" if count > 1 else ""
    caught = "; the program caught it and went on (batch skipped), the run did not crash" if recovered else ""
    # A handle that cuBLAS could not create says memory only by what it usually means: worded and weighed so.
    handle = first["code"] == "cublas_error" and (
        CUBLAS_NOT_INIT in str(first["message"]) or first["cublas_status"] == CUBLAS_NOT_INIT)
    if handle:
        numbers = ": cuBLAS could not create its handle (CUBLAS_STATUS_NOT_INITIALIZED), most often a GPU with no memory left for it"
    return Detection(
        summary=f"{kind} out of memory{where}{step}{gpu}{numbers}{more}{caught}",
        onset=onset_of(ev),
        evidence=evidence_rows(ev),
        evidence_count=count,
        causes=causes,
        discount=discount,
        facts={k: first[k] for k in ("req", "cap", "free", "alloc", "frag") if first[k] is not None}
        | {"foreign_mib": foreign, "recovered": recovered},
        ranks=ranks,
        # A caught OOM costs a skipped batch or a smaller batch, not the run: noted, not raised.
        severity=Severity.INFO if recovered else None,
        confidence=0.7 if recovered or handle else 0.95,
    )


def device_oom_events(ctx: Context) -> pl.DataFrame:
    """Every device allocation failure the logs print (OOM messages and cuBLAS allocation failures), earliest first."""
    # TensorFlow names the allocator's device: a `device:CPU` allocation failure is host memory, not the GPU's.
    ev = ctx.events_of(*OOM_CODES).filter(field("tf_device").fill_null("").str.to_uppercase() != "CPU")
    cublas = ctx.events_of("cublas_error")
    handle = _cublas_status(CUBLAS_NOT_INIT) & pl.col("message").str.contains(CUBLAS_HANDLE)
    if cublas.height and ctx.events_of(*KERNEL_FAULT_CODES).height:
        handle = pl.lit(False)
    cublas = cublas.filter(_cublas_status(CUBLAS_OOM) | handle)
    if cublas.height:
        ev = sort_by_onset(pl.concat([ev, cublas], how="vertical_relaxed"))
    return ev


def _cublas_status(status: str) -> pl.Expr:
    """A cuBLAS status named in the message, or in the `status` field (mshadow's check prints only its number)."""
    return pl.col("message").str.contains(status, literal=True) | (field("status").fill_null("") == status)


@PLAYBOOK.detector(("events",))
def detect_batch_finder(ctx: Context, th: dict) -> Detection | None:
    """accelerate's batch-size finder reached zero: every batch size it tried ran out of memory."""
    ev = ctx.events_of(*BATCH_FINDER_CODES)
    if ev.height == 0:
        return None
    return Detection(
        summary="accelerate's find_executable_batch_size halved the batch down to zero: every batch size ran out of memory, "
                "down to a single sample (the OOMs themselves were caught and not printed)",
        onset=onset_of(ev),
        evidence=evidence_rows(ev),
        evidence_count=event_count(ev),
        causes={"demand_above_capacity": 1.0, "foreign_process": 0.3},
        severity=Severity.CRITICAL,  # a caught OOM elsewhere in the run must not lower this one
        confidence=0.9,
    )


def _causes(th: dict, *, cap: float | None, req: float | None, free: float | None, frag: float | None,
            foreign: float | None) -> tuple[dict[str, float], dict[str, float]]:
    """Cause strengths (and discounts) from the numbers of the first OOM message."""
    causes: dict[str, float] = {}
    discount: dict[str, float] = {}
    shortfall = None if req is None or free is None else max(req - free, 0.0)
    # The request fits into the reserved-but-unallocated memory alone: the cache holds that many bytes, split up.
    # Before it raises, the allocator has returned every unsplit cached block to the driver (c10/cuda/
    # CUDACachingAllocator.cpp: "The only remaining cached memory is split from a larger block that is partially
    # in-use"), so what stays reserved cannot join the free memory: a request larger than it needs new device
    # memory, and no allocator setting saves it (gtad#30: 4 GiB asked, 3.78 GiB cached, 1.75 GiB free; halving the
    # batch fixed it).
    fits_if_defragmented = shortfall is not None and frag is not None and req is not None and frag >= req
    if cap and foreign and foreign / cap >= th["foreign_share"]:
        causes["foreign_process"] = 1.0
        if shortfall is None or foreign >= shortfall:
            # Without the other processes the allocation would have fit: the job's own demand is not it.
            discount["demand_above_capacity"] = 0.1
    if cap and frag is not None and frag / cap >= th["fragmentation_share"] and fits_if_defragmented:
        causes["fragmentation"] = 0.9
    if shortfall is not None and not fits_if_defragmented:
        causes["demand_above_capacity"] = 0.9  # more than free + cached: no allocator setting helps
    elif req is not None and free is not None and (free == 0 or req / max(free, 1e-9) >= th["demand_share"]):
        causes["demand_above_capacity"] = 0.8
    elif fits_if_defragmented:
        causes["fragmentation"] = max(causes.get("fragmentation", 0.0), 0.7)
    if not causes:
        causes["demand_above_capacity"] = 0.5
    return causes, discount


def _foreign_mib(others: str | None, *, own_listed: bool, pytorch_reserved: float | None) -> float | None:
    """Memory of the `Process N has X memory in use` sentences that are other processes.

    When NVML cannot match this process's PID (in a container) the message has no `this process has`
    sentence and lists the process itself as `Process N`: the smallest listed amount that holds all of
    PyTorch's reservation is then this process, not a foreign one.
    """
    if not others:
        return None
    amounts = [a for a in pl.select(size_mib(pl.lit(pl.Series(others.split(","))))).to_series().to_list() if a is not None]
    if own_listed and pytorch_reserved is not None:
        own = [a for a in amounts if a >= pytorch_reserved]
        if own:
            amounts.remove(min(own))
    total = sum(amounts)
    return float(total) if total else None


def _recovered(ctx: Context, ev: pl.DataFrame) -> bool:
    """Whether the program caught every OOM and went on: a trainer's 'skipping batch' right after it, or
    progress lines of the same rank at later steps; and no error followed in that file."""
    # Each OOM is looked up once (as-of joins), never paired with every mark or metric row of its file: thousands
    # of OOMs in a file of a million progress lines must not make billions of pairs.
    ooms = ev.select("file", "line", "step", "rank").unique(["file", "line"]).sort("line")
    caught = pl.Series([False] * ooms.height)
    marks = ctx.events_of("oom_recovered")
    if marks.height:
        # The first mark at or after an OOM catches it when it is within RECOVERY_LINES lines.
        near = ooms.join_asof(marks.select("file", pl.col("line").alias("m")).sort("m"), left_on="line", right_on="m",
                              by="file", strategy="forward", check_sortedness=False)
        caught |= (near.get_column("m") <= near.get_column("line") + RECOVERY_LINES).fill_null(False)
    # Only the OOM files' rows, a rank's rows for that rank's OOMs (a null rank for a null rank).
    oom_files = ooms.get_column("file").unique().to_list()
    m = plain(ctx.metric_lines().filter(pl.col("step").is_not_null() & pl.col("file").is_in(oom_files))
              .select("file", "line", "step", "rank").collect())
    if m.height:
        # The highest step logged after each line of a (file, rank): a later step than the OOM's means it went on.
        top = (m.select("file", pl.col("rank").fill_null(-1).alias("_r"), pl.col("line").alias("m_line"), "step")
               .sort("file", "_r", "m_line")
               .with_columns(pl.col("step").reverse().cum_max().reverse().over("file", "_r").alias("top"))
               .drop("step").sort("m_line"))
        near = ooms.with_columns(pl.col("rank").fill_null(-1).alias("_r"), (pl.col("line") + 1).alias("_after")).join_asof(
            top, left_on="_after", right_on="m_line", by=["file", "_r"], strategy="forward", check_sortedness=False)
        caught |= (near.get_column("top") > near.get_column("step").fill_null(-1)).fill_null(False)
    if not caught.all():
        return False
    last = ooms.group_by("file").agg(pl.col("line").max().alias("last"))
    later_errors = ctx.events_where((pl.col("severity") == "error") & ~pl.col("code").is_in(list(OOM_CODES))).join(last, on="file")
    return later_errors.filter(pl.col("line") > pl.col("last")).height == 0
