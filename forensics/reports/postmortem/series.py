"""The series the postmortem plots, read per metric and decimated in polars before anything is drawn."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from forensics.contracts.context import Context

# Pixel columns of a plot: a series longer than twice this keeps its min and max per column.
WIDTH = 600
# Ranks drawn per plot when ranks differ (the failing and finding ranks first).
MAX_RANKS = 6
# The metric plots: title, y label and the canonical names drawn (the first names present win).
METRIC_PLOTS = (
    ("loss", "Loss", ("loss", "eval_loss")),
    ("grad_norm", "Gradient norm", ("grad_norm",)),
    ("lr", "Learning rate", ("lr",)),
    ("loss_scale", "Loss scale", ("loss_scale",)),
    ("step_time", "Step time (ms)", ("step_time_ms",)),
    ("memory", "Memory (MiB)", None),  # every mem_*_mib metric
)
MEMORY = re.compile(r"^mem_\w+_mib$")
GPU_FIELDS = (
    ("utilization_gpu_pct", "GPU utilisation (%)"),
    ("memory_used_mib", "Memory used (MiB)"),
    ("temperature_c", "Temperature (C)"),
    ("sm_clock_mhz", "SM clock (MHz)"),
    ("power_w", "Power (W)"),
)
# Clock-event reasons that are not a slowdown (an idle GPU, clocks set by the application).
NOT_THROTTLE = ("gpu_idle", "applications_clocks_setting")


@dataclass
class Series:
    """One line of a plot: x and y (finite, decimated) plus the x of its NaN/Inf points."""

    label: str
    x: list[float]
    y: list[float]
    bad_x: list[float] = field(default_factory=list)


@dataclass
class PlotData:
    """What one plot draws; `x_kind` is 'step', 'time' (epoch seconds) or 'line'."""

    key: str
    title: str
    x_kind: str
    series: list[Series]
    points: int  # rows before decimation
    note: str = ""
    spans: list[tuple[float, float, str]] = field(default_factory=list)  # shaded intervals (x0, x1, label)


def decimate(df: pl.DataFrame, by: list[str], width: int = WIDTH) -> pl.DataFrame:
    """Per group, the rows holding the min and the max of `y` in each of `width` columns of `x`, so
    spikes survive; groups short enough are kept whole. Expects columns x, y (finite)."""
    if df.height == 0:
        return df
    keys = [*by, "_col"]
    lo, hi = pl.col("x").min().over(by), pl.col("x").max().over(by)
    span = pl.when(hi > lo).then(hi - lo).otherwise(1.0)
    d = df.with_columns(((pl.col("x") - lo) / span * (width - 1)).floor().cast(pl.Int64).alias("_col"),
                        pl.len().over(by).alias("_n"))
    extreme = (pl.col("y") == pl.col("y").min().over(keys)) | (pl.col("y") == pl.col("y").max().over(keys))
    d = d.filter((pl.col("_n") <= 2 * width) | extreme)
    # A flat column holds many rows at its min: one per (column, value) is enough.
    d = d.unique(subset=[*keys, "y"], keep="first", maintain_order=True)
    return d.drop("_col", "_n").sort([*by, "x"])


def _x_of(df: pl.DataFrame) -> tuple[pl.Expr, str]:
    if df.get_column("step").null_count() == 0:
        return pl.col("step").cast(pl.Float64), "step"
    if df.get_column("ts").null_count() == 0:
        return pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6, "time"
    return pl.col("line").cast(pl.Float64), "line"


def _rank_order(ranks: list, prefer: list[int]) -> list:
    first = [r for r in prefer if r in ranks]
    return first + [r for r in sorted(ranks, key=lambda r: (r is None, r or 0)) if r not in first]


def metric_plot(ctx: Context, key: str, title: str, names: list[str], prefer: list[int]) -> PlotData | None:
    """One metric plot: per (name, rank) series, decimated; ranks merged when they log the same values."""
    rows = ctx.metrics_select("name", "rank", "step", "ts", "line", "value", where=pl.col("name").is_in(names))
    if rows.height == 0:
        return None
    x, x_kind = _x_of(rows)
    rows = rows.with_columns(x.alias("x"), pl.col("value").alias("y"), pl.col("rank").fill_null(-1).alias("rank"))
    note = ""
    ranks = rows.get_column("rank").unique().to_list()
    if len(ranks) > 1:
        spread = rows.group_by("name", "x").agg(pl.col("y").n_unique().alias("k")).get_column("k").max()
        if spread == 1:
            # Every rank logs the same values (a synchronised loss): one line says it all.
            note = f"{len(ranks)} ranks log identical values; rank {min(ranks)} drawn"
            rows = rows.filter(pl.col("rank") == min(ranks))
        elif len(ranks) > MAX_RANKS:
            keep = _rank_order(ranks, prefer)[:MAX_RANKS]
            note = f"{len(ranks)} ranks; drawn: {', '.join(str(r) for r in keep)}"
            rows = rows.filter(pl.col("rank").is_in(keep))
    finite = decimate(rows.filter(pl.col("y").is_finite()), ["name", "rank"])
    bad = rows.filter(~pl.col("y").is_finite())
    if bad.height:
        # NaN/Inf points are markers, not gaps: keep one per pixel column.
        lo, hi = rows.get_column("x").min(), rows.get_column("x").max()
        span = (hi - lo) or 1.0
        bad = bad.with_columns(((pl.col("x") - lo) / span * (WIDTH - 1)).floor().alias("_c")).unique(
            subset=["name", "rank", "_c"], keep="first", maintain_order=True)
    series = []
    many_ranks = finite.get_column("rank").n_unique() > 1 or bad.get_column("rank").n_unique() > 1
    groups = sorted({(n, r) for n, r in finite.select("name", "rank").iter_rows()} | {(n, r) for n, r in bad.select("name", "rank").iter_rows()},
                    key=lambda nr: (names.index(nr[0]) if nr[0] in names else len(names), nr[0], nr[1]))
    for name, rank in groups:
        f = finite.filter((pl.col("name") == name) & (pl.col("rank") == rank))
        b = bad.filter((pl.col("name") == name) & (pl.col("rank") == rank))
        label = name + (f" rank {rank}" if many_ranks and rank != -1 else "")
        series.append(Series(label, f.get_column("x").to_list(), f.get_column("y").to_list(), b.get_column("x").to_list()))
    return PlotData(key, title, x_kind, series, rows.height, note)


def skipped_steps(ctx: Context) -> list[tuple[float, float, str]]:
    """Steps the optimizer skipped (the `skipped_steps` counter went up), as spans of one step."""
    if "skipped_steps" not in ctx.metric_names:
        return []
    s = ctx.metrics_select("step", "value", where=(pl.col("name") == "skipped_steps") & pl.col("step").is_not_null())
    s = s.group_by("step").agg(pl.col("value").max()).sort("step")
    hit = s.filter(pl.col("value").diff() > 0).get_column("step").head(500).to_list()
    return [(float(x) - 0.5, float(x) + 0.5, "skipped step") for x in hit]


def metric_plots(ctx: Context, prefer: list[int]) -> list[PlotData]:
    """Every metric plot that has data."""
    if not ctx.has("metrics"):
        return []
    present = ctx.metric_names
    skipped = skipped_steps(ctx)
    out = []
    for key, title, names in METRIC_PLOTS:
        wanted = sorted(n for n in present if MEMORY.match(n)) if names is None else [n for n in names if n in present]
        if not wanted:
            continue
        p = metric_plot(ctx, key, title, wanted, prefer)
        if p is not None:
            if p.x_kind == "step" and key in ("loss", "loss_scale"):
                p.spans = skipped
            out.append(p)
    return out


def gpu_plots(ctx: Context) -> list[PlotData]:
    """Per-GPU telemetry plots (one per field), with throttle intervals shaded."""
    g = ctx.table("gpu")
    if g.height == 0:
        return []
    g = g.filter(pl.col("gpu").is_not_null() & pl.col("mig_device").is_null() & pl.col("fault").is_null())
    if g.height == 0:
        return []
    timed = g.get_column("ts").null_count() == 0
    x = (pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6) if timed else pl.col("seq").cast(pl.Float64)
    # One printout per GPU: the stream with the most samples (two printouts of one GPU sample at different rates).
    best = g.group_by("gpu", "file", "source").len().sort("len", "file", "source", descending=[True, False, False]).unique("gpu", keep="first")
    g = g.join(best.select("gpu", "file", "source"), on=["gpu", "file", "source"], how="semi").with_columns(x.alias("x"))
    spans = throttle_spans(g)
    out = []
    for col, title in GPU_FIELDS:
        d = g.select("gpu", "x", pl.col(col).alias("y")).filter(pl.col("y").is_not_null() & pl.col("y").is_finite())
        if d.height == 0:
            continue
        d = decimate(d, ["gpu"])
        series = [Series(f"GPU {k}", part.get_column("x").to_list(), part.get_column("y").to_list())
                  for (k,), part in sorted(d.group_by("gpu"), key=lambda kv: kv[0][0])]
        out.append(PlotData(f"gpu_{col}", title, "time" if timed else "line", series, g.height, spans=spans))
    return out


def throttle_spans(g: pl.DataFrame) -> list[tuple[float, float, str]]:
    """Intervals where a GPU reported a slowdown reason, as (x0, x1, 'GPU n: reasons')."""
    reasons = pl.col("throttle_reasons").fill_null("")
    for r in NOT_THROTTLE:
        reasons = reasons.str.replace_all(r, "")
    d = g.sort("gpu", "x").with_columns(reasons.str.strip_chars(",").str.replace_all(",+", ",").alias("why"))
    step = d.select(pl.col("x").diff().over("gpu").median()).item() if d.height > 1 else None
    gap = 3 * (step or 1.0)
    # Samples that flip on and off a few samples apart are one slowdown: an interval starts after a gap.
    on = d.filter(pl.col("why") != "").with_columns((pl.col("x").diff().over("gpu") > gap).fill_null(True).cum_sum().over("gpu").alias("run"))
    runs = (on.group_by("gpu", "run")
            .agg(pl.col("x").min().alias("x0"), pl.col("x").max().alias("x1"), pl.col("why").mode().sort().first())
            .sort("gpu", "x0").head(200))
    return [(r["x0"], r["x1"], f"GPU {r['gpu']}: {r['why']}") for r in runs.iter_rows(named=True)]
