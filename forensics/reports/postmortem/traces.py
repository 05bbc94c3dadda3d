"""Trace summary of the postmortem: per-trace step shares and the top kernels and ops, from the `spans` table."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from forensics.contracts.context import Context
from forensics.playbooks import trace_spans as S
from forensics.playbooks.performance.dataloader_bottleneck_trace import loader_shares
from forensics.playbooks.performance.host_device_sync import sync_rows
from forensics.playbooks.performance.low_gpu_utilization_trace import step_busy

TOP = 10


@dataclass
class TraceSummary:
    """Per trace file: profiled steps and medians per step; over all traces: the costliest kernels and ops."""

    traces: list[dict] = field(default_factory=list)
    kernels: list[dict] = field(default_factory=list)
    ops: list[dict] = field(default_factory=list)


def _median_by_file(df: pl.DataFrame, col: str) -> dict[str, float]:
    if df.height == 0 or col not in df.columns:
        return {}
    return {r["file"]: r[col] for r in df.group_by("file").agg(pl.col(col).median()).iter_rows(named=True)}


def _top(sp: pl.DataFrame, kinds: tuple[str, ...]) -> list[dict]:
    d = sp.filter(pl.col("kind").is_in(list(kinds)) & pl.col("dur_us").is_not_null())
    if d.height == 0:
        return []
    total = d.get_column("dur_us").sum() or 1.0
    top = (d.group_by("name").agg(pl.len().alias("calls"), pl.col("dur_us").sum().alias("us"))
           .sort(["us", "name"], descending=[True, False]).head(TOP))
    return [{"name": r["name"], "calls": r["calls"], "ms": r["us"] / 1000, "share": r["us"] / total} for r in top.iter_rows(named=True)]


def summarize(ctx: Context) -> TraceSummary | None:
    """The trace summary, or None when the run has no complete spans."""
    if not ctx.has("spans"):
        return None
    sp = S.spans(ctx)
    if sp.height == 0:
        return None
    steps = S.steps(sp)
    n_steps = {r["file"]: r["n"] for r in steps.group_by("file").agg(pl.len().alias("n")).iter_rows(named=True)} if steps.height else {}
    busy = _median_by_file(step_busy(sp), "util")
    syncs = sync_rows(sp)
    per_step = syncs.group_by("file", "step").len() if syncs.height else pl.DataFrame()
    sync_med = _median_by_file(per_step, "len")
    loader = _median_by_file(loader_shares(sp), "share")
    files = sorted(sp.get_column("file").unique().to_list())
    ranks = {r["file"]: r["rank"] for r in sp.group_by("file").agg(pl.col("rank").first()).iter_rows(named=True)}
    out = TraceSummary()
    for f in files:
        out.traces.append({"file": f, "rank": ranks.get(f), "steps": n_steps.get(f, 0), "gpu_busy": busy.get(f),
                           "syncs_per_step": sync_med.get(f, 0.0 if n_steps.get(f) else None), "loader_share": loader.get(f)})
    out.kernels = _top(sp, ("kernel", "gpu_memcpy", "gpu_memset"))
    out.ops = _top(sp, ("cpu_op", "python_function"))
    return out
