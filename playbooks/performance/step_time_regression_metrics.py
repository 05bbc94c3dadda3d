"""step-time-regression from logged step times: a steady rise over the run, or repeated outliers."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.evidence import events
from forensics.playbooks.memory.allocator_fragmentation import PRESSURE_CODES
from forensics.playbooks.performance.step_time_regression import PLAYBOOK

from forensics.contracts.context import Context, evidence_rows
from forensics.contracts.model import Detection, Severity


def _tiny_rise(part: pl.DataFrame, th: dict) -> tuple | None:
    """A paste of 3 to 5 step times: every one slower than the one before, the last >= 2x the first, on a line.

    The first point is kept: warm-up makes the first steps slower, never faster, so a strict rise is not
    warm-up; a single slow step (eval, checkpoint) among fast ones breaks the line (R² < 0.9).
    """
    if not th["tiny_min_points"] <= part.height < th["short_min_points"]:
        return None
    v = part.get_column("value")
    first, last = float(v[0]), float(v[-1])
    t = M.ts.trend(part)
    if first > 0 and last / first >= th["short_rise_ratio"] and bool((v.diff().drop_nulls() > 0).all()) \
            and t is not None and t.r2 >= th["short_min_r2"]:
        return ("rise", part, first, last, t)
    return None


def _short_rise(part: pl.DataFrame, th: dict) -> tuple | None:
    """A short paste (fewer than `min_steps` points), its first point left out as warm-up: a blatant steady rise."""
    if part.height < th["short_min_points"]:
        return _tiny_rise(part, th)
    if part.height >= th["warmup_points"] + th["min_steps"]:
        return None
    part = part.slice(1)
    third = max(part.height // 3, 2)
    early = float(part.head(third).get_column("value").median())
    late = float(part.tail(third).get_column("value").median())
    rising = float((part.get_column("value").diff().drop_nulls() > 0).mean())
    t = M.ts.trend(part)
    if early > 0 and late / early >= th["short_rise_ratio"] and t is not None and t.slope > 0 and t.r2 >= th["short_min_r2"] \
            and rising >= th["short_min_rising"]:
        return ("rise", part, early, late, t)
    return None


def _level_shift(part: pl.DataFrame, th: dict) -> tuple | None:
    """A short paste of a steady run (the first half within `shift_steady_tol` of its median) whose last
    `shift_tail` step times all sit at least `shift_ratio` above every point of that first half: the run stepped
    down to a slower pace and stayed there ([OBS] bigscience-workshop/bigscience tr11-176B-ml chronicles.md,
    2022-04-28: `elapsed time per iteration (s)` 105.16, 105.17, 106.25, 110.17, 111.14 with TFLOPs 149 -> 141,
    a slow GPU on one node). Small at a few percent, so a note (low), never an alarm: a noisy run (epfLLM/Megatron-LLM#11,
    125.5-130.5 s) is not steady enough to show it, and warm-up makes the first steps slower, not faster."""
    n = part.height
    if n < th["shift_tail"] + 2 or n >= th["warmup_points"] + th["min_steps"]:
        return None
    v = part.get_column("value")
    head, tail = v.head(max(n // 2, 2)), v.tail(int(th["shift_tail"]))
    base = float(head.median())
    if base <= 0 or (float(head.max()) - float(head.min())) / base > th["shift_steady_tol"]:
        return None
    if float(tail.min()) < float(head.max()) * (1 + th["shift_ratio"]):
        return None
    return ("shift", part, base, float(tail.median()), None)


@PLAYBOOK.detector(("metrics",))
def detect_metrics(ctx: Context, th: dict) -> Detection | None:
    """Per rank: late/early median ratio with a good linear fit, else repeated robust outliers."""
    found = []
    # One rank at a time (its steps and values: the rows quoted are read at the end), up to the first that shows a
    # rise (the one reported).
    for part in M.series_ranks(ctx, M.STEP_TIME, finite=True, cols=("rank", "step", "value")):
        if found:
            break
        short = _short_rise(part.sort("step"), th) or _level_shift(part.sort("step"), th)
        if short is not None:
            found.append(short)
            continue
        part = part.sort("step").slice(int(th["warmup_points"]))
        if part.height < th["min_steps"]:
            continue
        third = max(part.height // 3, 3)
        early = float(part.head(third).get_column("value").median())
        late = float(part.tail(third).get_column("value").median())
        # Fit on a rolling median: a few stalls (GC, another job on the node) must not hide the trend.
        t = M.ts.trend(part.with_columns(pl.col("value").rolling_median(9, min_samples=1, center=True)))
        if early > 0 and late / early >= th["rise_ratio"] and t is not None and t.slope > 0 and t.r2 >= th["min_r2"]:
            found.append(("rise", part, early, late, t))
            continue
        if float(part.get_column("value").median()) < th["min_step_ms"]:
            continue
        sp = M.ts.spikes(part, k=th["outlier_mads"], window=50, min_points=10, rel_floor=0.05)
        sp = sp.filter(pl.col("ratio") >= th["outlier_ratio"])
        if sp.height >= th["min_outliers"] and sp.height >= 0.05 * part.height:
            found.append(("outliers", part, early, late, sp))
    if not found:
        return None
    kind, part, early, late, extra = found[0]
    rank = part.item(0, "rank")
    where = f" on rank {rank}" if rank is not None else ""
    severity = None
    if kind == "shift":
        summary = (f"step time stepped up{where} from a steady ~{M.fmt(early)} ms to ~{M.fmt(late)} ms ({late / early - 1:+.1%}) "
                   f"at step {part.item(-int(th['shift_tail']), 'step')} and stayed there to the end of the log")
        first = part.tail(int(th["shift_tail"])).row(0, named=True)
        quoted = pl.concat([part.head(1), part.tail(int(th["shift_tail"]))])
        # A synchronous job runs at its slowest member's pace: a slow GPU or node, throttling, a neighbour's job.
        causes = {"straggler": 0.7, "throttling": 0.4}
        facts = {"kind": "shift", "early_ms": early, "late_ms": late}
        count = int(th["shift_tail"])
        severity = Severity.LOW
    elif kind == "rise":
        t = extra
        summary = (f"step time rose steadily{where} from ~{M.fmt(early)} ms to ~{M.fmt(late)} ms ({late / early:.2f}x, "
                   f"+{M.fmt(t.slope, 3)} ms per step, R² {t.r2:.2f}) between steps {part.item(0, 'step')} and {part.item(-1, 'step')}")
        first = part.row(0, named=True)
        quoted = pl.concat([part.head(1), part.slice(part.height // 2, 1), part.tail(1)])
        causes = {"growing_work": 0.7, "memory_pressure": 0.5, "throttling": 0.3}
        facts = {"kind": "rise", "early_ms": early, "late_ms": late, "slope_ms_per_step": t.slope, "r2": t.r2}
        count = part.height
    else:
        sp = extra
        first = sp.row(0, named=True)
        summary = (f"{sp.height} step-time outliers{where} (> {M.fmt(th['outlier_mads'])} MADs above the rolling median, "
                   f"up to {M.fmt(float(sp.get_column('value').max()))} ms vs a median of {M.fmt(float(part.get_column('value').median()))} ms)")
        quoted = sp.head(4)
        causes = {"gc_or_checkpoint": 0.7, "throttling": 0.4, "straggler": 0.3}
        facts = {"kind": "outliers", "outliers": sp.height}
        count = sp.height
    # The rows quoted, and the onset's, with their provenance.
    at = pl.DataFrame({"rank": [first["rank"]], "step": [first["step"]]}, schema={"rank": pl.Int32, "step": pl.Int64})
    first = M.provenance(ctx, M.STEP_TIME, at, finite=True).row(0, named=True)
    quoted = M.provenance(ctx, M.STEP_TIME, quoted.select("rank", "step"), finite=True)
    # The allocator flushing its cache and retrying cudaMalloc during the run is memory pressure, seen directly.
    pressure = events(ctx, PRESSURE_CODES)
    cause_ev = {}
    if pressure.height:
        causes["memory_pressure"] = 0.9
        cause_ev["memory_pressure"] = evidence_rows(pressure)
        summary += f"; the caching allocator reported cache flushes / cudaMalloc retries {pressure.height} time(s)"
        facts["allocator_pressure_reports"] = pressure.height
    return Detection(summary=summary, onset=M.onset_at(first), evidence=M.quote(quoted), evidence_count=count, causes=causes,
                     cause_evidence=cause_ev, confidence=0.8, facts=facts, ranks=[rank] if rank is not None else [],
                     severity=severity)
