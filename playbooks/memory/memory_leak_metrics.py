"""memory-leak from logged memory series (allocated, reserved, RSS): a steady linear rise with no plateau."""

from __future__ import annotations

import re

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.memory.memory_leak import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Logged memory amounts (MiB after the parsers' unit conversion): allocated, reserved, RSS, "max mem".
MEMORY = r"(^|_)(mem|memory|rss|vram|allocated|reserved)(_|$)"
NOT_MEMORY = r"util|percent|pct|bandwidth|_frac|share"
# A high-water mark rises at every sample by definition: no short series of one is a leak.
PEAK = r"max|peak"



@PLAYBOOK.detector(("metrics",))
def detect_metrics(ctx: Context, th: dict) -> Detection | None:
    """Per memory series and rank: positive slope, good linear fit, real growth, still rising at the end."""
    leaks = []
    for name in M.names_like(ctx, MEMORY, exclude=NOT_MEMORY):
        # One rank at a time, its steps and values (the rows quoted are read at the end).
        for part in M.series_ranks(ctx, name, finite=True, cols=("rank", "step", "value")):
            part = part.sort("step")
            part = part.slice(int(part.height * th["warmup_share"]))
            if part.height < th["min_points"] and not _rises_throughout(part, name, th):
                continue
            t = M.ts.trend(part)
            if t is None or t.slope <= 0 or t.r2 < th["min_r2"]:
                continue
            growth = t.last_fit - t.first_fit
            if growth < th["min_growth_share"] * max(abs(t.first_fit), 1e-9):
                continue
            late = M.ts.trend(part.tail(max(3, part.height // 3)))
            if late is None or late.slope < th["late_slope_share"] * t.slope:
                continue
            leaks.append((growth / max(abs(t.first_fit), 1e-9), name, t, part))
    if not leaks:
        return None
    leaks.sort(key=lambda x: -x[0])
    rel, name, t, part = leaks[0]
    rows = M.provenance(ctx, name, pl.concat([part.head(1), part.slice(part.height // 2, 1), part.tail(1)]), finite=True)
    first, last = rows.row(0, named=True), rows.row(-1, named=True)
    rank = f" on rank {first['rank']}" if first["rank"] is not None else ""
    summary = (f"{name}{rank} rose steadily from {M.fmt(first['value'])} to {M.fmt(last['value'])} between steps {first['step']} and "
               f"{last['step']} (+{M.fmt(t.slope, 3)} per step, R² {t.r2:.2f}, +{rel:.0%}), no plateau")
    others = sorted({n for _, n, _, _ in leaks[1:] if n != name})
    if others:
        summary += f"; also {', '.join(others)}"
    return Detection(
        summary=summary,
        onset=M.onset_at(first),
        evidence=M.quote(rows),
        evidence_count=sum(p.height for *_, p in leaks),
        causes={"loss_kept_with_graph": 0.6, "tensors_kept": 0.5, "pinned_or_host_buffers": 0.2},
        confidence=0.85,
        facts={"series": name, "slope_per_step": t.slope, "r2": t.r2, "growth_share": rel, "first": first["value"], "last": last["value"]},
    )


def _rises_throughout(part: pl.DataFrame, name: str, th: dict) -> bool:
    """A short series (a few `free` tables pasted over hours) that is blatant: above its previous sample at every
    sample, and half its first value or more above it at the end."""
    if part.height < th["short_min_points"] or re.search(PEAK, name):
        return False
    v = part.get_column("value")
    first = float(v.item(0))
    return bool((v.diff().drop_nulls() > 0).all()) and first > 0 and float(v.item(-1)) - first >= th["short_growth_share"] * first
