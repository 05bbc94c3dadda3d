"""comm-compute-no-overlap: NCCL kernels run while no compute kernel does (communication not hidden)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import trace_spans as S
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

PLAYBOOK = declare(
    Playbook(
        id="comm-compute-no-overlap",
        title="Communication does not overlap computation",
        category="performance",
        severity=Severity.MEDIUM,
        tables=("spans",),
        explains=("low-gpu-utilization", "step-time-regression"),
        causes=(
            Cause("bucket_settings", "DDP gradient buckets too large (all-reduce starts late) or too small (many small collectives)",
                  verify="Vary DDP bucket_cap_mb and compare the overlap in a trace", fix="Tune bucket_cap_mb; gradient_as_bucket_view=True", prior=0.35),
            Cause("synchronous_collectives", "Collectives issued synchronously (all_reduce then wait, or outside backward)",
                  verify="Trace: NCCL kernels start only after the last compute kernel of backward",
                  fix="async_op=True and wait later; let DDP/FSDP hooks issue collectives during backward", prior=0.4),
            Cause("no_prefetch", "FSDP without forward/backward prefetch: all-gathers wait for compute and vice versa",
                  verify="FSDP config: forward_prefetch / backward_prefetch", fix="backward_prefetch=BACKWARD_PRE, forward_prefetch=True", prior=0.25),
        ),
        verify="HTA-style overlap: share of NCCL kernel time during which a compute kernel also runs (per rank trace)",
        fix="Enable overlap (async collectives, DDP/FSDP hooks, prefetch), tune bucket sizes",
        thresholds={
            "overlap_share": Threshold(0.25, "share of communication-kernel time overlapped by compute kernels below which overlap is poor", "ours; HTA get_comm_comp_overlap"),
            "comm_share": Threshold(0.1, "communication share of device busy time needed before overlap matters", "ours"),
        },
        doc="""\
## Symptom
NCCL (RCCL) kernels run while no compute kernel runs on any other stream: a low share of
communication time is overlapped by computation.

## Why it matters
Unhidden communication adds straight to step time; with good overlap most gradient all-reduce
time is free.

## Evidence
`spans` from torch.profiler traces: kernels classified as communication (`nccl*`, `rccl*`) or
compute, the union of each, and their intersection (as Holistic Trace Analysis computes it).

## Known false positives
Tiny models where communication is a negligible share of GPU time (ignored below 10%); the last
all-reduce of a step can never overlap.
""",
    )
)


@PLAYBOOK.detector(("spans",))
def detect_trace(ctx: Context, th: dict) -> list[Detection]:
    """Overlap of communication and compute kernels per trace and device."""
    sp = S.spans(ctx)
    if sp.height == 0:
        return []
    kernels = sp.filter(pl.col("kind") == "kernel")
    comm = kernels.filter(pl.col("name").str.contains(S.COMM_KERNEL))
    if comm.height == 0:
        return []
    comp = kernels.filter(~pl.col("name").str.contains(S.COMM_KERNEL))
    by = ["file", "device"]
    comm_u = S.union_us(comm, by).rename({"union_us": "comm_us"})
    busy = S.union_us(sp.filter(pl.col("kind").is_in(S.GPU_ACTIVITY)), by).rename({"union_us": "busy_us"})
    ov = S.overlap_us(comm, comp, by)
    table = comm_u.join(busy, on=by, how="left").join(ov, on=by, how="left").with_columns(pl.col("overlap_us").fill_null(0.0))
    out = []
    for r in table.iter_rows(named=True):
        comm_share = r["comm_us"] / r["busy_us"] if r["busy_us"] else 0.0
        share = r["overlap_us"] / r["comm_us"] if r["comm_us"] else 1.0
        if comm_share < th["comm_share"] or share >= th["overlap_share"]:  # negligible, or hidden enough
            continue
        mine = comm.filter((pl.col("file") == r["file"]) & (pl.col("device") == r["device"]))
        streams = sorted({int(s) for s in mine["stream"].drop_nulls().to_list()})
        rank = mine["rank"][0]
        who = f"rank {rank} " if rank is not None else ""
        summary = (f"{who}GPU {r['device']}: only {share:.0%} of communication-kernel time overlaps compute "
                   f"({S.ms(r['overlap_us'])} of {S.ms(r['comm_us'])}; threshold {th['overlap_share']:.0%}); communication is "
                   f"{comm_share:.0%} of device busy time; {mine.height} NCCL kernels on stream(s) {', '.join(map(str, streams))}")
        quoted = mine.sort("dur_us", descending=True).head(5)
        out.append(Detection(
            summary=summary, onset=S.step_onset(sp, r["file"]) or S.onset(mine.sort("ts_us").row(0, named=True)), evidence=S.quote(quoted, S.span_text()),
            evidence_count=mine.height, causes={"synchronous_collectives": 0.6, "bucket_settings": 0.5, "no_prefetch": 0.3},
            confidence=0.75,
            facts={"overlap_share": round(share, 3), "comm_us": round(r["comm_us"], 1), "overlap_us": round(r["overlap_us"], 1),
                   "comm_share_of_busy": round(comm_share, 3), "nccl_kernels": mine.height, "streams": streams},
            ranks=[rank] if rank is not None else [],
        ))
    return out
