"""The postmortem's questions to the metrics table as aggregations: each answer is small whatever the run's size."""

from __future__ import annotations

import polars as pl

from forensics.contracts.context import Context, plain

# The x of a plot (step, time in epoch seconds, line) from its raw column (filters on a raw column can skip Parquet
# row groups by their statistics).
RAW_X = {"step": "step", "time": "ts", "line": "line"}
X_OF = {"step": lambda c: c.cast(pl.Float64), "time": lambda c: c.dt.epoch("us").cast(pl.Float64) / 1e6,
        "line": lambda c: c.cast(pl.Float64)}
X_SOURCES = {kind: X_OF[kind](pl.col(raw)) for kind, raw in RAW_X.items()}
FINITE = pl.col("value").is_finite()
# Lines of one file stay below this; a file's categorical code times it orders every file's lines in one key.
SHIFT = 1 << 32


def extents(ctx: Context, names: list[str]) -> pl.DataFrame:
    """Per (name, rank) of some metric names, from one streaming aggregation over their rows only: rows, finite
    rows, nulls of step and ts, the first and last time stamp and the range of each x source."""

    def compute() -> pl.DataFrame:
        aggs = [pl.len().alias("n"), FINITE.sum().alias("n_finite"), pl.col("step").null_count().alias("step_nulls"),
                pl.col("ts").null_count().alias("ts_nulls")]
        for kind, raw in RAW_X.items():
            aggs += [pl.col(raw).min().alias(f"_{kind}_min"), pl.col(raw).max().alias(f"_{kind}_max")]
        got = ctx.metrics_lazy(names).group_by("name", "rank").agg(aggs).collect(engine="streaming")
        # An x source rises with its raw column: its range is the raw column's range, converted (not every row).
        return plain(got.select("name", "rank", "n", "n_finite", "step_nulls", "ts_nulls",
                                pl.col("_time_min").alias("ts_min"), pl.col("_time_max").alias("ts_max"),
                                *[X_OF[kind](pl.col(f"_{kind}_{end}")).alias(f"{kind}_{side}")
                                  for kind in RAW_X for end, side in (("min", "lo"), ("max", "hi"))]))

    return ctx.memo(("postmortem", "extents", tuple(names)), compute)


def rank_extents(ctx: Context) -> pl.DataFrame:
    """Per rank, from the metrics lines (every metric at once): the first and last time stamp, lines without one,
    and the last step."""

    def compute() -> pl.DataFrame:
        return (ctx.metric_lines().group_by("rank")
                .agg(pl.col("ts").min().alias("ts_min"), pl.col("ts").max().alias("ts_max"),
                     pl.col("ts").null_count().alias("ts_nulls"), pl.col("step").max().alias("step_hi"))
                .collect(engine="streaming"))

    return ctx.memo(("postmortem", "rank_extents"), compute)


def rows_at_times(ctx: Context, times: list) -> pl.DataFrame:
    """The metrics lines (rank, ts, step, file, line) stamped with one of a few times (a filter, nothing held)."""
    return plain(ctx.metric_lines().filter(pl.col("ts").is_in(times)).select("rank", "ts", "step", "file", "line")
                 .collect(engine="streaming"))


def _keyed(lf: pl.LazyFrame, files: list[str]) -> pl.LazyFrame:
    """A sortable key per row: the file's place in `files` in the high bits, the line below (one order for all files)."""
    code = pl.col("file").cast(pl.String).cast(pl.Enum(files)).to_physical().cast(pl.Int64)
    return lf.with_columns((code * SHIFT + pl.col("line")).alias("_key"))


def around(ctx: Context, col: str, targets: pl.DataFrame) -> pl.DataFrame:
    """For each target (file, line): the line and `col` of the metrics line with `col` set nearest at or before it
    (`back_line`, `back`) and at or after it (`fwd_line`, `fwd`) in the same file.

    One aggregation: each metrics row is placed between the sorted targets (a binary search) and only the
    extreme row between two targets is kept, so the answer has one row per target, however long the logs."""
    files = sorted(set(targets.get_column("file").drop_nulls().to_list()))
    t = _keyed(targets.select("file", "line").drop_nulls().unique().lazy(), files).sort("_key").collect().with_row_index("_j")
    empty = t.with_columns(pl.lit(None, pl.Int64).alias("back_line"), pl.lit(None, pl.Int64).alias("fwd_line"))
    if t.height == 0 or not ctx.has("metrics"):
        return empty.with_columns(pl.lit(None).alias("back"), pl.lit(None).alias("fwd")).drop("_key", "_j")
    keys = t.get_column("_key")
    rows = _keyed(ctx.metric_lines().filter(pl.col(col).is_not_null() & pl.col("file").is_in(files))
                  .select("file", "line", col), files)
    # Target j holds the rows in (key[j-1], key[j]] (side left) for looking back, [key[j-1], key[j]) (right) ahead.
    back = (rows.with_columns(pl.lit(keys).search_sorted(pl.col("_key"), side="left").alias("_j"))
            .group_by("_j").agg(pl.col("_key").max().alias("_bk"), pl.col(col).get(pl.col("_key").arg_max()).alias("back")))
    fwd = (rows.with_columns((pl.lit(keys).search_sorted(pl.col("_key"), side="right").cast(pl.Int64) - 1).alias("_j"))
           .group_by("_j").agg(pl.col("_key").min().alias("_fk"), pl.col(col).get(pl.col("_key").arg_min()).alias("fwd")))
    b, f = pl.collect_all([back, fwd], engine="streaming")
    out = (t.join(b.with_columns(pl.col("_j").cast(pl.UInt32)), on="_j", how="left")
           .join(f.filter(pl.col("_j") >= 0).with_columns(pl.col("_j").cast(pl.UInt32)), on="_j", how="left").sort("_j")
           # Nothing between two targets: the answer is that of the neighbour target.
           .with_columns(pl.col("_bk", "back").forward_fill(), pl.col("_fk", "fwd").backward_fill()))
    same_b, same_f = [(pl.col(k) // SHIFT) == (pl.col("_key") // SHIFT) for k in ("_bk", "_fk")]
    return out.select(
        "file", "line",
        pl.when(same_b).then(pl.col("_bk") % SHIFT).alias("back_line"), pl.when(same_b).then(pl.col("back")).alias("back"),
        pl.when(same_f).then(pl.col("_fk") % SHIFT).alias("fwd_line"), pl.when(same_f).then(pl.col("fwd")).alias("fwd"))
