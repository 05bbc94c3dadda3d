"""step-time-regression from profiler traces: ProfilerStep durations within one trace (outliers, steady rise)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import trace_spans as S
from forensics.playbooks.performance.step_time_regression import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection


@PLAYBOOK.detector(("spans",))
def detect_trace(ctx: Context, th: dict) -> list[Detection]:
    """Per trace: a step far above the median, or the last third's median above the first third's."""
    sp = S.spans(ctx)
    if sp.height == 0:
        return []
    st = S.steps(sp)
    out = []
    for (file,), part in st.group_by(["file"], maintain_order=True):
        part = part.sort("s0")
        n = part.height
        if n < th["trace_min_steps"]:
            continue
        dur = part["step_us"]
        med = float(dur.median())
        third = max(1, n // 3)
        early, late = float(dur.head(third).median()), float(dur.tail(third).median())
        rise = late / early if early > 0 else 1.0
        worst = part.sort("step_us", descending=True).row(0, named=True)
        outlier = worst["step_us"] / med if med > 0 else 1.0
        rank = part["rank"][0]
        who = f"rank {rank}: " if rank is not None else ""
        times = ", ".join(f"#{s} {S.ms(d)}" for s, d in zip(part["step"], dur, strict=True))
        text = pl.format("{} took {} µs", pl.col("name"), pl.col("dur_us").round(0))
        rows = sp.filter((pl.col("file") == file) & pl.col("name").str.contains(S.STEP_NAME) & (pl.col("kind") != "gpu_user_annotation"))
        if outlier >= th["trace_outlier_ratio"]:
            quoted = rows.filter(pl.col("step") == worst["step"]).head(1).vstack(rows.sort("ts_us").head(2))
            summary = (f"{who}ProfilerStep#{worst['step']} took {S.ms(worst['step_us'])}, {outlier:.1f}x the median "
                       f"{S.ms(med)} of {n} profiled steps (threshold {th['trace_outlier_ratio']:.1f}x): {times}")
            causes = {"gc_or_checkpoint": 0.6, "memory_pressure": 0.3, "throttling": 0.3, "straggler": 0.2}
        elif rise >= th["rise_ratio"]:
            quoted = rows.sort("ts_us").head(2).vstack(rows.sort("ts_us").tail(2))
            summary = (f"{who}step time rises over the profiled steps: median {S.ms(late)} in the last third vs "
                       f"{S.ms(early)} in the first ({rise:.2f}x, threshold {th['rise_ratio']:.2f}x): {times}")
            causes = {"memory_pressure": 0.5, "throttling": 0.4, "gc_or_checkpoint": 0.3, "straggler": 0.2}
        else:
            continue
        out.append(Detection(
            summary=summary, onset=S.onset(quoted.row(0, named=True)), evidence=S.quote(quoted, text), evidence_count=n,
            causes=causes, confidence=0.6,
            facts={"steps": n, "median_step_us": round(med, 1), "outlier_ratio": round(outlier, 2), "rise_ratio": round(rise, 2),
                   "step_us": {int(s): round(float(d), 1) for s, d in zip(part["step"], dur, strict=True)}},
            ranks=[rank] if rank is not None else [],
        ))
    return out
