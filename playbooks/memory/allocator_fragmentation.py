"""allocator-fragmentation: a large share of GPU memory reserved by the caching allocator but unallocated."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import detection, events, where
from forensics.playbooks.fields import field, fmt_mib, size_mib
from forensics.playbooks.memory.cuda_oom import BATCH_FINDER_CODES, OOM_CODES, device_oom_events

from forensics.contracts.context import Context, event_count
from forensics.contracts.model import Cause, Detection, Severity

# The caching allocator had to free its cache and retry cudaMalloc: DeepSpeed ZeRO-3's per-step count of
# cache flushes, and `cudaMalloc retries` in torch.cuda.memory_summary(). Memory pressure, not a failure.
PRESSURE_CODES = ("allocator_cache_flush", "memory_summary_alloc_retries")

PLAYBOOK = declare(
    Playbook(
        id="allocator-fragmentation",
        title="Caching-allocator fragmentation",
        category="memory",
        severity=Severity.HIGH,
        tables=("events",),
        explains=("cuda-oom",),
        codes=("accelerate_no_batch_size", "allocator_cache_flush", "cuda_oom", "memory_summary_alloc_retries",
               "mps_oom"),
        causes=(
            Cause("variable_shapes", "Variable-shape batches (sequence lengths, image sizes) leave blocks the allocator cannot reuse",
                  verify="torch.cuda.memory_summary(): compare 'reserved' with 'allocated' and look at the inactive split blocks",
                  fix="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; pad or bucket sequence lengths to a few shapes", prior=0.6),
            Cause("allocator_caching", "The caching allocator holds freed blocks that are too small or split for the next request",
                  verify="torch.cuda.memory_stats()['inactive_split_bytes.all.current']",
                  fix="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb on old PyTorch); avoid torch.cuda.empty_cache() in the loop", prior=0.4),
        ),
        verify="torch.cuda.memory_summary() at the failure: reserved minus allocated",
        fix="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; bucket variable shapes",
        thresholds={
            "reserved_share": Threshold(0.20, "reserved-but-unallocated memory as a share of GPU capacity", "PLAYBOOKS.md allocator-fragmentation (default >20%)"),
            "pressure_reports": Threshold(3, "allocator cache-flush / cudaMalloc-retry reports (without any OOM) that make the pressure finding medium instead of low", "ours"),
        },
        doc="""\
## Symptom
At an out-of-memory error, the memory PyTorch has reserved but not allocated is a large share of the
GPU (default more than 20%) and would have held the request by itself: the allocation failed although
the cache holds enough bytes.

## Why it matters
The job dies with memory nominally available; a smaller batch is the wrong fix and wastes the GPU.

## Evidence
`events`: the OOM message's `reserved by PyTorch but unallocated` figure (new format) or
`reserved in total by PyTorch` minus `already allocated` (1.x bracket format; 1.0–1.3's `cached` figure is
that difference already), against the capacity.

Without any OOM, DeepSpeed's `N pytorch allocator cache flushes since last step` warnings and a
memory summary's `cudaMalloc retries: N` show the allocator freeing its cache to satisfy requests:
memory pressure that slows every step it happens on. They give a `low` finding (`medium` from 3
reports on), never more: they do not tell fragmentation from a working set near capacity.

## Known false positives
Cache flushes and cudaMalloc retries in a run that also ran out of memory are left to the OOM's
numbers: they precede every OOM, fragmented or not, and must not make this playbook the root of a
plain demand OOM. A request larger than the reserved-but-unallocated memory is demand, not fragmentation:
before raising, the allocator returns every unsplit cached block to the driver, so what stays reserved lies
in segments partly in use and cannot join the free memory (no arrangement of the cached blocks would have
fit the request; 4 GiB asked with 3.78 GiB cached and 1.75 GiB free is demand): this playbook stays silent
and cuda-oom ranks demand first. The advice sentence `If reserved but unallocated memory is large …`
is printed with every OOM and proves nothing by itself.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """OOM messages whose reserved-unallocated figure is a large share of capacity."""
    ev = events(ctx, OOM_CODES)
    if ev.height == 0:
        return None
    ev = ev.with_columns(
        size_mib(field("capacity")).alias("cap"),
        pl.coalesce(size_mib(field("reserved_unallocated")),
                    size_mib(field("reserved")) - size_mib(field("allocated"))).alias("frag"),
        size_mib(field("requested")).alias("req"),
        size_mib(field("free")).alias("free"),
    ).filter(pl.col("cap").is_not_null() & pl.col("frag").is_not_null())
    ev = ev.filter(pl.col("frag") / pl.col("cap") >= th["reserved_share"])
    # Only when the request would fit into the reserved-but-unallocated memory alone: what stays reserved at the
    # failure lies in segments partly in use (the allocator returned the rest before raising), so it cannot join the
    # free memory; a larger request is demand, and no allocator setting would have saved it (cuda_oom._causes).
    ev = ev.filter(pl.col("req").is_null() | (pl.col("req") <= pl.col("frag")))
    if ev.height == 0:
        return None
    row = ev.row(0, named=True)
    share = row["frag"] / row["cap"]
    causes = {"variable_shapes": 0.6, "allocator_caching": 0.5}
    return detection(
        ev,
        f"{fmt_mib(row['frag'])} ({share:.0%} of {fmt_mib(row['cap'])}) reserved by PyTorch but unallocated when an allocation of {fmt_mib(row['req'])} failed{where(row)}",
        causes,
        confidence=0.85,
        facts={"reserved_unallocated_mib": row["frag"], "capacity_mib": row["cap"], "share": round(share, 3)},
    )


@PLAYBOOK.detector(("events",))
def detect_pressure(ctx: Context, th: dict) -> Detection | None:
    """Allocator cache flushes / cudaMalloc retries in a run without an OOM: memory pressure."""
    ev = events(ctx, PRESSURE_CODES)
    # With an OOM its numbers decide between demand and fragmentation; flushes precede either.
    if ev.height == 0 or device_oom_events(ctx).height or ctx.events_of(*BATCH_FINDER_CODES).height:
        return None
    counts = ev.with_columns(pl.coalesce(field("flushes"), field("retries")).cast(pl.Int64, strict=False).alias("n"))
    top = counts.get_column("n").max()
    reports = event_count(ev)
    many = reports >= th["pressure_reports"]
    summary = (f"the caching allocator flushed its cache to satisfy allocations ({reports} report{'s' if reports > 1 else ''}, "
               f"up to {top} per step): memory pressure that slows those steps")
    # A flush is the cache being emptied to satisfy a request: the cached blocks did not fit it.
    return detection(ev, summary, {"allocator_caching": 0.9, "variable_shapes": 0.4}, confidence=0.5,
                     severity=Severity.MEDIUM if many else Severity.LOW, facts={"reports": reports, "max_per_step": top})
