"""allocator-fragmentation: a large share of GPU memory reserved by the caching allocator but unallocated."""

from __future__ import annotations

import polars as pl

from forensics.context import Context
from playbooks.base import Playbook, Threshold, declare
from playbooks.evidence import detection, events, where
from playbooks.fields import field, fmt_mib, size_mib
from playbooks.memory.cuda_oom import OOM_CODES
from playbooks.model import Cause, Detection, Severity

PLAYBOOK = declare(
    Playbook(
        id="allocator-fragmentation",
        title="Caching-allocator fragmentation",
        category="memory",
        severity=Severity.HIGH,
        tables=("events",),
        explains=("cuda-oom",),
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
        },
        doc="""\
## Symptom
At an out-of-memory error, the memory PyTorch has reserved but not allocated is a large share of the
GPU (default more than 20%) and, with the free memory, would have held the request: the allocation
failed although the cache holds enough bytes.

## Why it matters
The job dies with memory nominally available; a smaller batch is the wrong fix and wastes the GPU.

## Evidence
`events`: the OOM message's `reserved by PyTorch but unallocated` figure (new format) or
`reserved in total by PyTorch` minus `already allocated` (1.x bracket format), against the capacity.

## Known false positives
A request larger than the free plus the reserved-but-unallocated memory is demand, not
fragmentation (no arrangement of the cached blocks would have fit it): this playbook stays silent
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
    # Only when the request would fit into free plus reserved-but-unallocated memory: a request larger
    # than both is demand, and no allocator setting would have saved it.
    ev = ev.filter(pl.col("req").is_null() | pl.col("free").is_null() | (pl.col("req") <= pl.col("free") + pl.col("frag")))
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
