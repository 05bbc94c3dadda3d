"""Shared measurements on the `spans` table for the trace-evidenced playbooks (steps, busy time, overlap).

Everything is per trace file (one process of one rank); intervals are in the trace's own
microsecond clock (`ts_us`, `dur_us`).
"""

from __future__ import annotations

import polars as pl

from forensics.contracts.context import Context
from forensics.contracts.model import Evidence, Onset

GPU_ACTIVITY = ("kernel", "gpu_memcpy", "gpu_memset")
STEP_NAME = r"^ProfilerStep#\d+$"
# Communication kernels (HTA's classification: nccl/rccl/hccl kernels).
COMM_KERNEL = r"(?i)^nccl|^rccl|^hccl|ncclKernel|ncclDevKernel"


def spans(ctx: Context) -> pl.DataFrame:
    """The spans table (complete events only, with an end time)."""
    sp = ctx.table("spans")
    if sp.height == 0:
        return sp
    return sp.filter(pl.col("ph") == "X").with_columns((pl.col("ts_us") + pl.col("dur_us").fill_null(0)).alias("end_us"))


def steps(sp: pl.DataFrame) -> pl.DataFrame:
    """Host-side ProfilerStep#N spans: file, rank, step, line, ts, start/end (µs), duration."""
    st = sp.filter(pl.col("name").str.contains(STEP_NAME) & ~pl.col("kind").is_in(["gpu_user_annotation"]).fill_null(False))
    return (st.sort("ts_us").unique(subset=["file", "step"], keep="first")
            .select("file", "rank", "step", "line", "ts", "thread", pl.col("ts_us").alias("s0"), pl.col("end_us").alias("s1"),
                    pl.col("dur_us").alias("step_us"))
            .sort("file", "s0"))


def union_us(df: pl.DataFrame, by: list[str], start: str = "ts_us", end: str = "end_us") -> pl.DataFrame:
    """Length of the union of intervals per group (overlapping intervals counted once)."""
    if df.height == 0:
        return pl.DataFrame(schema={**{b: df.schema[b] for b in by}, "union_us": pl.Float64})
    d = df.select(*by, pl.col(start).alias("_s"), pl.col(end).alias("_e")).sort([*by, "_s"])
    prev_end = pl.col("_e").cum_max().shift(1).over(by)
    d = d.with_columns((prev_end.is_null() | (pl.col("_s") > prev_end)).cast(pl.Int64).cum_sum().over(by).alias("_g"))
    merged = d.group_by([*by, "_g"]).agg(pl.col("_s").min(), pl.col("_e").max())
    return merged.group_by(by).agg((pl.col("_e") - pl.col("_s")).sum().alias("union_us"))


def merged_intervals(df: pl.DataFrame, by: list[str], start: str = "ts_us", end: str = "end_us") -> pl.DataFrame:
    """The union of intervals per group as disjoint intervals (_s, _e)."""
    d = df.select(*by, pl.col(start).alias("_s"), pl.col(end).alias("_e")).sort([*by, "_s"])
    if d.height == 0:
        return d
    prev_end = pl.col("_e").cum_max().shift(1).over(by)
    d = d.with_columns((prev_end.is_null() | (pl.col("_s") > prev_end)).cast(pl.Int64).cum_sum().over(by).alias("_g"))
    return d.group_by([*by, "_g"]).agg(pl.col("_s").min(), pl.col("_e").max()).drop("_g").sort([*by, "_s"])


def concurrency(intervals: pl.DataFrame, by: list[str], min_active: int) -> pl.DataFrame:
    """Per group: time during which at least `min_active` of the (per-lane disjoint) intervals are open."""
    ev = pl.concat([intervals.select(*by, pl.col("_s").alias("t"), pl.lit(1).alias("d")),
                    intervals.select(*by, pl.col("_e").alias("t"), pl.lit(-1).alias("d"))]).sort([*by, "t", "d"])
    ev = ev.with_columns(pl.col("d").cum_sum().over(by).alias("active"),
                         (pl.col("t").shift(-1).over(by) - pl.col("t")).alias("len"))
    return ev.filter(pl.col("active") >= min_active).group_by(by).agg(pl.col("len").sum().alias("concurrent_us"))


def overlap_us(a: pl.DataFrame, b: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per group: time during which an interval of `a` and one of `b` are both open (a, b merged first)."""
    ma = merged_intervals(a, by).with_columns(pl.lit(1).alias("_w"))
    mb = merged_intervals(b, by).with_columns(pl.lit(2).alias("_w"))
    if ma.height == 0 or mb.height == 0:
        return pl.DataFrame(schema={**{k: pl.Int64 for k in by}, "overlap_us": pl.Float64})
    ev = pl.concat([ma.select(*by, pl.col("_s").alias("t"), pl.col("_w").alias("d")),
                    ma.select(*by, pl.col("_e").alias("t"), (-pl.col("_w")).alias("d")),
                    mb.select(*by, pl.col("_s").alias("t"), pl.col("_w").alias("d")),
                    mb.select(*by, pl.col("_e").alias("t"), (-pl.col("_w")).alias("d"))]).sort([*by, "t", "d"])
    ev = ev.with_columns(pl.col("d").cum_sum().over(by).alias("state"),
                         (pl.col("t").shift(-1).over(by) - pl.col("t")).alias("len"))
    return ev.filter(pl.col("state") == 3).group_by(by).agg(pl.col("len").sum().alias("overlap_us"))


def ms(us: float) -> str:
    """Microseconds as a short human duration."""
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def quote(rows: pl.DataFrame, text: pl.Expr) -> list[Evidence]:
    """Span rows as evidence (file, event index, a text built from the span, rank, step, time)."""
    out = []
    for r in rows.with_columns(text.alias("_text")).iter_rows(named=True):
        out.append(Evidence(file=r["file"], line=int(r["line"]), text=r["_text"], rank=r.get("rank"), step=r.get("step"),
                            ts=r.get("ts")))
    return out


def span_text() -> pl.Expr:
    """`name` (kind, thread) dur — how a span is quoted."""
    return pl.format("{} [{}] on {}: {} µs", pl.col("name"), pl.col("kind"), pl.col("thread").fill_null("?"),
                     pl.col("dur_us").round(1))


def step_onset(sp: pl.DataFrame, file: str, step: int | None = None) -> Onset | None:
    """Onset at the ProfilerStep span of `step` (default: the trace's first profiled step), so a
    step-scoped finding starts where its step starts (and can explain findings about that step)."""
    st = sp.filter((pl.col("file") == file) & pl.col("name").str.contains(STEP_NAME)
                   & ~pl.col("kind").is_in(["gpu_user_annotation"]).fill_null(False))
    if step is not None:
        st = st.filter(pl.col("step") == step)
    if st.height == 0:
        return None
    return onset(st.sort("ts_us").row(0, named=True))


def onset(row: dict) -> Onset:
    """Onset at one span row."""
    return Onset(step=row.get("step"), time=row.get("ts"), rank=row.get("rank"), file=row.get("file"), line=row.get("line"))
