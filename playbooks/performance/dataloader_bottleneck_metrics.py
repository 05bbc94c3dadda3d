"""dataloader-bottleneck from logged data time vs step time (MetricLogger `data:`/`time:`, ImageNet `Data`/`Time`)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.performance.dataloader_bottleneck import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

DATA_TIME = ("data_time_ms",)


@PLAYBOOK.detector(("metrics",))
def detect_metrics(ctx: Context, th: dict) -> Detection | None:
    """Median share of step time spent waiting for data, per rank, after the first logged point."""
    d = M.series(ctx, DATA_TIME, finite=True)
    t = M.series(ctx, M.STEP_TIME, finite=True)
    if d.height == 0 or t.height == 0:
        return None
    j = d.join(t.select("rank", "step", pl.col("value").alias("step_ms"), pl.col("line").alias("t_line")), on=["rank", "step"],
               nulls_equal=True).sort("rank", "step")
    # The first logged point of a loader (workers starting) is left out.
    j = j.filter(pl.int_range(pl.len()).over("rank") >= 1).filter(pl.col("step_ms") > 0)
    if j.height < th["min_steps"]:
        return None
    j = j.with_columns((pl.col("value") / pl.col("step_ms")).alias("share"))
    per = j.group_by("rank").agg(pl.col("share").median().alias("share"), pl.col("value").median().alias("data"),
                                 pl.col("step_ms").median().alias("step"), pl.len().alias("n")).sort("share", descending=True)
    top = per.row(0, named=True)
    if top["share"] < th["data_share"]:
        return None
    rows = j.filter(pl.col("rank").eq_missing(top["rank"]) & (pl.col("share") >= th["data_share"]))
    first = rows.row(0, named=True)
    where = f" on rank {top['rank']}" if top["rank"] is not None else ""
    summary = (f"waiting for data takes {top['share']:.0%} of each step{where}: median data time {M.fmt(top['data'])} ms "
               f"of {M.fmt(top['step'])} ms per step over {top['n']} logged points")
    return Detection(
        summary=summary,
        onset=M.onset_at(first),
        evidence=M.quote(rows.head(2)),
        evidence_count=rows.height,
        causes={"too_few_workers": 0.7, "heavy_transforms": 0.6, "no_prefetch": 0.3},
        confidence=0.85,
        facts={"data_share": top["share"], "data_ms": top["data"], "step_ms": top["step"], "points": top["n"]},
    )
