"""The series the postmortem plots, read per metric and decimated in polars before anything is drawn."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from forensics.contracts.context import Context
from forensics.reports.postmortem import digest

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


def _rank_order(ranks: list, prefer: list[int]) -> list:
    first = [r for r in dict.fromkeys(prefer) if r in ranks]
    return first + [r for r in sorted(ranks, key=lambda r: (r is None, r or 0)) if r not in first]


@dataclass
class _Spec:
    """One metric plot before its rows are read: names, x kind and the per-(name, rank) extents."""

    key: str
    title: str
    names: list[str]
    x_kind: str
    ext: pl.DataFrame


def skipped_steps(ctx: Context) -> list[tuple[float, float, str]]:
    """Steps the optimizer skipped (the `skipped_steps` counter went up), as spans of one step."""
    if "skipped_steps" not in ctx.metric_names:
        return []
    s = (ctx.metrics_lazy(["skipped_steps"]).filter(pl.col("step").is_not_null())
         .group_by("step").agg(pl.col("value").max()).collect().sort("step"))
    hit = s.filter(pl.col("value").diff() > 0).get_column("step").head(500).to_list()
    return [(float(x) - 0.5, float(x) + 0.5, "skipped step") for x in hit]


def _specs(ctx: Context) -> list[_Spec]:
    present = ctx.metric_names
    plots = [(key, title, sorted(n for n in present if MEMORY.match(n)) if names is None else [n for n in names if n in present])
             for key, title, names in METRIC_PLOTS]
    ext = digest.extents(ctx, [n for *_, wanted in plots for n in wanted]).with_columns(pl.col("rank").fill_null(-1))
    out = []
    for key, title, wanted in plots:
        e = ext.filter(pl.col("name").is_in(wanted))
        if e.height == 0:
            continue
        x_kind = "step" if e.get_column("step_nulls").sum() == 0 else "time" if e.get_column("ts_nulls").sum() == 0 else "line"
        out.append(_Spec(key, title, wanted, x_kind, e))
    return out


def _rows(ctx: Context, name: str, x_kind: str) -> pl.LazyFrame:
    """One metric's rows as (rank, x, y): read one name at a time, its rows need no reordering among other names'."""
    return ctx.metrics_lazy([name]).select(pl.col("rank").fill_null(-1), digest.X_SOURCES[x_kind].alias("x"), pl.col("value").alias("y"))


def _read(ctx: Context, specs: list[_Spec]) -> pl.DataFrame:
    """Every plot's decimated points, from one streaming aggregation per plotted name.

    Per (name, rank) and pixel column of its x range, the min and max of y with the x range they came from (so
    spikes survive); a series short enough keeps one row per (column, value); non-finite rows keep one per pixel
    column of the plot's x range (`_col` < 0)."""
    fin = pl.col("y").is_finite()
    col = pl.when(fin).then(((pl.col("x") - pl.col("_lo")) / pl.col("_span") * (WIDTH - 1)).floor()).otherwise(
        -1 - ((pl.col("x") - pl.col("_plo")) / pl.col("_pspan") * (WIDTH - 1)).floor()).cast(pl.Int64)
    queries = []
    for sp in specs:
        e = sp.ext
        plo, phi = e.get_column(f"{sp.x_kind}_lo").min(), e.get_column(f"{sp.x_kind}_hi").max()
        g = e.select("name", pl.col("rank").cast(pl.Int32), pl.col(f"{sp.x_kind}_lo").alias("_lo"),
                     _span(pl.col(f"{sp.x_kind}_lo"), pl.col(f"{sp.x_kind}_hi")).alias("_span"),
                     pl.lit(plo).alias("_plo"), _span(pl.lit(plo), pl.lit(phi)).alias("_pspan"),
                     (pl.col("n_finite") <= 2 * WIDTH).alias("_whole"))
        for name in sp.names:
            queries.append(
                _rows(ctx, name, sp.x_kind).join(g.filter(pl.col("name") == name).drop("name").lazy(), on="rank", how="left")
                .with_columns(col.alias("_col"), pl.when(fin & pl.col("_whole")).then(pl.col("y")).alias("_ykey"))
                .group_by("rank", "_col", "_ykey")
                # Streaming aggregations only (a row's x at the min would hold every row): within one pixel column the
                # min is drawn at its first x and the max at its last, one pixel apart at most.
                .agg(pl.col("y").min().alias("y_min"), pl.col("y").max().alias("y_max"),
                     pl.col("x").min().alias("x_min"), pl.col("x").max().alias("x_max"))
                .select(pl.lit(name).alias("name"), pl.all()))
    return pl.concat(pl.collect_all(queries, engine="streaming"))


def _disagreeing(ctx: Context, specs: list[_Spec]) -> set[str]:
    """The names logged by several ranks whose rows hold different values at one x (each rank is then drawn).

    Ranks that log different values usually differ at their first or last x already: those few rows are read
    first, and only the names that agree there have every row compared."""
    ends: dict[str, tuple[str, list]] = {}
    for sp in specs:
        # Each rank's first and last x in its raw column (the time's own stamps; steps and lines as integers).
        lo, hi = ("ts_min", "ts_max") if sp.x_kind == "time" else (f"{sp.x_kind}_lo", f"{sp.x_kind}_hi")
        for name in sp.names:
            e = sp.ext.filter(pl.col("name") == name)
            if e.get_column("rank").n_unique() > 1:
                vals = pl.concat([e.get_column(lo), e.get_column(hi)]).drop_nulls().unique().sort().to_list()
                ends[name] = (sp.x_kind, vals if sp.x_kind == "time" else [int(v) for v in vals])

    def most(name: str, where: pl.Expr | None) -> pl.LazyFrame:
        kind = ends[name][0]
        lf = ctx.metrics_lazy([name])
        lf = lf.filter(where) if where is not None else lf
        lf = lf.select(digest.X_SOURCES[kind].alias("x"), pl.col("value").alias("y"))
        return lf.group_by("x").agg(pl.col("y").n_unique().alias("k")).select(pl.col("k").max())

    def differ(names: list[str], probe: bool) -> set[str]:
        got = pl.collect_all([most(n, pl.col(digest.RAW_X[ends[n][0]]).is_in(ends[n][1]) if probe else None) for n in names], engine="streaming")
        return {n for n, k in zip(names, got, strict=True) if (k.item() or 1) > 1}

    names = list(ends)
    found = differ(names, True) if names else set()
    rest = [n for n in names if n not in found]
    return found | (differ(rest, False) if rest else set())


def _span(lo: pl.Expr, hi: pl.Expr) -> pl.Expr:
    return pl.when(hi > lo).then(hi - lo).otherwise(1.0)


def _plot(sp: _Spec, points: pl.DataFrame, differ: set[str], prefer: list[int]) -> PlotData:
    """One metric plot from the decimated points: ranks merged when they log the same values, at most MAX_RANKS."""
    ranks = sp.ext.get_column("rank").unique().to_list()
    keep = ranks
    note = ""
    if len(ranks) > 1:
        if not differ.intersection(sp.names):
            # Every rank logs the same values (a synchronised loss): one line says it all.
            note = f"{len(ranks)} ranks log identical values; rank {min(ranks)} drawn"
            keep = [min(ranks)]
        elif len(ranks) > MAX_RANKS:
            keep = _rank_order(ranks, prefer)[:MAX_RANKS]
            note = f"{len(ranks)} ranks; drawn: {', '.join(str(r) for r in keep)}"
    pts = points.filter(pl.col("name").is_in(sp.names) & pl.col("rank").is_in(keep))
    good = pts.filter(pl.col("_col") >= 0)
    finite = (pl.concat([good.select("name", "rank", pl.col("x_min").alias("x"), pl.col("y_min").alias("y")),
                         good.filter(pl.col("y_max") != pl.col("y_min")).select("name", "rank", pl.col("x_max").alias("x"), pl.col("y_max").alias("y"))])
              .sort("name", "rank", "x", "y"))
    bad = pts.filter(pl.col("_col") < 0).select("name", "rank", pl.col("x_min").alias("x")).sort("name", "rank", "x")
    many_ranks = finite.get_column("rank").n_unique() > 1 or bad.get_column("rank").n_unique() > 1
    groups = sorted({(n, r) for n, r in finite.select("name", "rank").iter_rows()} | {(n, r) for n, r in bad.select("name", "rank").iter_rows()},
                    key=lambda nr: (sp.names.index(nr[0]) if nr[0] in sp.names else len(sp.names), nr[0], nr[1]))
    series = []
    for name, rank in groups:
        f = finite.filter((pl.col("name") == name) & (pl.col("rank") == rank))
        b = bad.filter((pl.col("name") == name) & (pl.col("rank") == rank))
        label = name + (f" rank {rank}" if many_ranks and rank != -1 else "")
        series.append(Series(label, f.get_column("x").to_list(), f.get_column("y").to_list(), b.get_column("x").to_list()))
    rows = int(sp.ext.filter(pl.col("rank").is_in(keep)).get_column("n").sum())
    return PlotData(sp.key, sp.title, sp.x_kind, series, rows, note)


def metric_plots(ctx: Context, prefer: list[int]) -> list[PlotData]:
    """Every metric plot that has data (their rows read once, aggregated per pixel column as they are read)."""
    if not ctx.has("metrics"):
        return []
    specs = _specs(ctx)
    if not specs:
        return []
    points, differ = _read(ctx, specs), _disagreeing(ctx, specs)
    skipped = skipped_steps(ctx)
    out = []
    for sp in specs:
        p = _plot(sp, points, differ, prefer)
        if p.x_kind == "step" and sp.key in ("loss", "loss_scale"):
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
