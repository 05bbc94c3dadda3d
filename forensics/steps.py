"""Give events a training step from another file of the same rank, by timestamp.

A rank often writes its metric lines to one file and its errors to another (torchrun `--log-dir`
`stdout.log`/`stderr.log`, Slurm `%j.out`/`%j.err`, a logger's file beside the console capture).
Within one file the text-log parser already carries the step from the nearest preceding step
line; across files only the clock can order lines, so an event that still has no step takes the
step of the latest metric row of its rank stamped at or before it.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl
import pyarrow as pa

from forensics.contracts import tables as T

# Null ranks (single-process runs, launcher logs) are matched to null ranks under this key.
_NO_RANK = -1


def _anchors(metrics: pa.Table) -> pl.DataFrame:
    """(rank key, ts, step) of the metric rows that have both a stamp and a step, one per stamp."""
    return (
        pl.from_arrow(metrics.select(["ts", "rank", "step"]))
        .filter(pl.col("step").is_not_null() & pl.col("ts").is_not_null())
        .select(pl.col("ts"), pl.col("rank").fill_null(_NO_RANK).alias("_r"), pl.col("step").alias("_s"))
        # Several rows share one line's stamp: the highest step of a stamp is the one reached by then.
        .group_by("_r", "ts").agg(pl.col("_s").max())
    )


def carry_across_files(events: pa.Table, metrics: Iterable[pa.Table]) -> pa.Table:
    """`events` with a null `step` filled from the latest step of its rank at or before its `ts`.

    `metrics` is the metrics table in parts (it can be far bigger than memory should hold at once;
    each part is reduced to one anchor per stamp). Only events with a timestamp and no step are
    looked up, and only metric rows with both a timestamp and a step serve as anchors; everything
    else is returned unchanged.
    """
    if events.num_rows == 0:
        return events
    ev = pl.from_arrow(events.select(["ts", "rank", "step"]))
    need = ev.get_column("step").is_null() & ev.get_column("ts").is_not_null()
    if not need.any():
        return events
    pos = need.arg_true()
    sub = (
        ev.gather(pos)
        .select(pl.col("ts"), pl.col("rank").fill_null(_NO_RANK).alias("_r"))
        .with_row_index("_i")
        .sort("ts")
    )
    # Each part's anchors are matched to the events at once and only each event's best anchor so far is kept (the
    # latest stamp, the highest step of that stamp): memory follows the events, not the metrics rows.
    best: pl.DataFrame | None = None
    for m in metrics:
        anchors = _anchors(m) if m.num_rows else None
        if anchors is None or not anchors.height:
            continue
        got = (sub.join_asof(anchors.with_columns(pl.col("ts").alias("_at")).sort("ts"), on="ts", by="_r",
                             strategy="backward", check_sortedness=False)
               .filter(pl.col("_at").is_not_null()).select("_i", "_at", "_s"))
        best = got if best is None else pl.concat([best, got])
        best = best.sort("_i", "_at", "_s").group_by("_i", maintain_order=True).last()
    if best is None or not best.height:
        return events
    found = sub.select("_i").join(best, on="_i", how="left").sort("_i").get_column("_s")
    if found.null_count() == found.len():
        return events
    step = ev.get_column("step").scatter(pos, found.cast(pl.Int64))
    index = events.schema.get_field_index("step")
    return events.set_column(index, pa.field("step", T.EVENTS.field("step").type), step.to_arrow())
