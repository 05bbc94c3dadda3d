"""dataloader-bottleneck from logged data time vs step time (MetricLogger `data:`/`time:`, ImageNet `Data`/`Time`, mmcv, Paddle, lerobot)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.performance.dataloader_bottleneck import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

DATA_TIME = ("data_time_ms",)
DATA_AVG = ("data_time_avg_ms",)
STEP_AVG = ("step_time_avg_ms",)
CAUSES = {"too_few_workers": 0.7, "heavy_transforms": 0.6, "no_prefetch": 0.3}


@PLAYBOOK.detector(("metrics",))
def detect_metrics(ctx: Context, th: dict) -> Detection | None:
    """Share of step time spent waiting for data, per rank, warm-up points left out: the median share over
    enough points, else the share of the summed times over a few points when it is blatant, else the
    meters' running averages deep into an epoch."""
    j = _joined(ctx, DATA_TIME, M.STEP_TIME)
    if j.height == 0:
        return _from_running_averages(ctx, th) or _recurring_stalls(ctx, th)
    j = _without_warmup(ctx, j, th)
    if j.height >= th["min_steps"]:
        found = _median_share(j, th)
        if found is not None:
            return found
    # A few points decide only past the run's first iterations: before them the loader is still warming up and the
    # windowed meters (detectron2 / LiBai `data_time`: a 20-iteration average, while `time` leaves the warm-up out)
    # still carry the first batches ([OBS] Oneflow-Inc/libai#308: iterations 0-4 of a healthy 100-iteration test).
    # Only where the log prints the iteration: without it, the step is the line's ordinal in a paste of any moment.
    if ctx.metrics_select("step", where=pl.col("step").is_not_null(), names=DATA_TIME).height:
        j = j.filter(pl.col("step").is_null() | (pl.col("step") >= th["warmup_steps"]))
    if j.height >= th["short_min_points"]:
        found = _summed_share(j, th)
        if found is not None:
            return found
    return _from_running_averages(ctx, th)


def _joined(ctx: Context, data: tuple[str, ...], step: tuple[str, ...]) -> pl.DataFrame:
    d = M.series(ctx, data, finite=True)
    if d.height == 0:  # the step time (a long shared series) is read only when there is a data time to join it to
        return pl.DataFrame()
    t = M.series(ctx, step, finite=True)
    if t.height == 0:
        return pl.DataFrame()
    j = d.join(t.select("rank", "step", pl.col("value").alias("step_ms"), pl.col("line").alias("t_line")), on=["rank", "step"],
               nulls_equal=True).sort("rank", "step")
    # Most loops time the whole iteration, data wait included (`time` >= `data_time`); where the data time
    # exceeds the step time anywhere on a rank, that log times the compute alone: the step is the sum.
    excludes = (pl.col("value") > pl.col("step_ms")).any().over("rank")
    j = j.with_columns(pl.when(excludes).then(pl.col("step_ms") + pl.col("value")).otherwise(pl.col("step_ms")).alias("step_ms"))
    return j.filter(pl.col("step_ms") > 0).with_columns((pl.col("value") / pl.col("step_ms")).alias("share"))


def _without_warmup(ctx: Context, j: pl.DataFrame, th: dict) -> pl.DataFrame:
    """Leave out the loader's warm-up: the first logged point of each rank, the first of each epoch, and the first
    `warmup_batches` batches of an epoch where the log prints the batch index."""
    j = j.filter(pl.int_range(pl.len()).over("rank") >= 1)
    ep = M.series(ctx, ("epoch",), finite=True)
    if ep.height and j.height:
        j = j.join(ep.select("rank", "step", pl.col("value").alias("_ep")), on=["rank", "step"], how="left", nulls_equal=True)
        first = (pl.col("_ep") != pl.col("_ep").shift(1).over("rank")).fill_null(False)
        j = j.filter(~first).drop("_ep")
    b = M.series(ctx, ("epoch_batch",), finite=True)
    if b.height and j.height:
        j = j.join(b.select("rank", "step", pl.col("value").alias("_b")), on=["rank", "step"], how="left", nulls_equal=True)
        j = j.filter(pl.col("_b").is_null() | (pl.col("_b") >= th["warmup_batches"])).drop("_b")
    return j


def _median_share(j: pl.DataFrame, th: dict) -> Detection | None:
    per = j.group_by("rank").agg(pl.col("share").median().alias("share"), pl.col("value").median().alias("data"),
                                 pl.col("step_ms").median().alias("step"), pl.len().alias("n")).sort("share", descending=True)
    top = per.row(0, named=True)
    if top["share"] < th["data_share"]:
        return None
    rows = j.filter(pl.col("rank").eq_missing(top["rank"]) & (pl.col("share") >= th["data_share"]))
    where = f" on rank {top['rank']}" if top["rank"] is not None else ""
    summary = (f"waiting for data takes {top['share']:.0%} of each step{where}: median data time {M.fmt(top['data'])} ms "
               f"of {M.fmt(top['step'])} ms per step over {top['n']} logged points")
    found = _detection(summary, rows, {"data_share": top["share"], "data_ms": top["data"], "step_ms": top["step"], "points": top["n"]})
    # Under the blatant share the loader costs some throughput but does not dominate: worth a note, not an alarm.
    if top["share"] < th["blatant_share"]:
        found.severity = Severity.LOW
    return found


def _summed_share(j: pl.DataFrame, th: dict) -> Detection | None:
    """A few points: the share of all the logged step time that was data time, when at least `blatant_share`."""
    per = j.group_by("rank").agg((pl.col("value").sum() / pl.col("step_ms").sum()).alias("share"), pl.col("value").sum().alias("data"),
                                 pl.col("step_ms").sum().alias("step"), pl.len().alias("n")).sort("share", descending=True)
    top = per.row(0, named=True)
    if top["share"] < th["blatant_share"]:
        return None
    rows = j.filter(pl.col("rank").eq_missing(top["rank"])).sort("share", descending=True)
    where = f" on rank {top['rank']}" if top["rank"] is not None else ""
    summary = (f"waiting for data took {top['share']:.0%} of the logged step time{where}: {M.fmt(top['data'])} ms of data time "
               f"in {M.fmt(top['step'])} ms over {top['n']} logged steps (warm-up left out)")
    return _detection(summary, rows, {"data_share": top["share"], "data_ms": top["data"], "step_ms": top["step"], "points": top["n"]})


def _from_running_averages(ctx: Context, th: dict) -> Detection | None:
    """The meters' running averages (`Data 0.000 (2.393)`) at a batch deep into its epoch, the epoch's first
    logged batch taken out of the average where it is logged."""
    a = _joined(ctx, DATA_AVG, STEP_AVG)
    b = M.series(ctx, ("epoch_batch",), finite=True)
    if a.height == 0 or b.height == 0:
        return None
    a = a.join(b.select("rank", "step", pl.col("value").alias("_b")), on=["rank", "step"], nulls_equal=True)
    # The epoch's batch 0 (its value is its own average): taken out of the later averages of that epoch.
    a = a.with_columns((pl.col("step") - pl.col("_b")).alias("_e0"))
    zero = a.filter(pl.col("_b") == 0).select("rank", pl.col("_e0"), pl.col("value").alias("_d0"), pl.col("step_ms").alias("_t0"))
    a = a.join(zero, on=["rank", "_e0"], how="left", nulls_equal=True)
    m = pl.col("_b") + 1
    data = pl.when(pl.col("_d0").is_not_null()).then(pl.col("value") * m - pl.col("_d0")).otherwise(pl.col("value") * m)
    step = pl.when(pl.col("_t0").is_not_null()).then(pl.col("step_ms") * m - pl.col("_t0")).otherwise(pl.col("step_ms") * m)
    deep = (pl.col("_b") >= th["avg_min_batches"]) | (pl.col("_d0").is_not_null() & (pl.col("_b") >= th["warmup_batches"]))
    a = a.filter(deep).with_columns((data / step).alias("share")).filter(step > 0)
    if a.height == 0:
        return None
    last = a.sort("step").group_by("rank", maintain_order=True).last().sort("share", descending=True)
    top = last.row(0, named=True)
    if top["share"] < th["blatant_share"]:
        return None
    where = f" on rank {top['rank']}" if top["rank"] is not None else ""
    summary = (f"waiting for data takes {top['share']:.0%} of step time{where} by the meters' running averages: data "
               f"{M.fmt(top['value'])} ms of {M.fmt(top['step_ms'])} ms per step at batch {int(top['_b'])} of the epoch"
               + (" (its first batch left out)" if top["_d0"] is not None else ""))
    return _detection(summary, a.filter(pl.col("rank").eq_missing(top["rank"])).tail(2),
                      {"data_share": top["share"], "data_ms": top["value"], "step_ms": top["step_ms"], "points": a.height})


def _recurring_stalls(ctx: Context, th: dict) -> Detection | None:
    """Only the loader's wait is logged (no step time): the first batch's wait, the time one worker takes to build a
    batch while all start together, comes back after the warm-up. A later wait at least `stall_repeat` of the first
    and of `stall_ms` or more means the workers fell a whole batch-build behind: the steps between took next to
    nothing beside it, so the loop waits for data almost all the time ([OBS] mozilla/TTS#407: `LoaderTime` 124.64 s
    at step 1, 0.00 at steps 3-4, 120.21 s at step 5 with 4 workers: each needs ~2 min a batch). A slow first batch
    that never returns is warm-up, and stays quiet."""
    if M.present(ctx, M.STEP_TIME):  # a logged name always gives a series with rows: nothing read
        return None  # the share rules above decide where the step time is logged
    d = M.series(ctx, DATA_TIME, finite=True).sort("rank", "step")
    if d.height < 3:
        return None
    first = d.group_by("rank", maintain_order=True).first().select("rank", pl.col("value").alias("_first"), pl.col("line").alias("_fl"))
    later = _without_warmup(ctx, d, th).join(first, on="rank", nulls_equal=True)
    stalls = later.filter((pl.col("_first") >= th["stall_ms"]) & (pl.col("value") >= th["stall_ms"])
                          & (pl.col("value") >= th["stall_repeat"] * pl.col("_first")))
    if stalls.height == 0:
        return None
    top = stalls.row(0, named=True)
    quiet = later.filter(pl.col("rank").eq_missing(top["rank"]) & (pl.col("value") < th["stall_ms"])).height
    where = f" on rank {top['rank']}" if top["rank"] is not None else ""
    summary = (f"the data loader's wait of the first batch ({M.fmt(top['_first'] / 1000)} s) comes back at step {top['step']}{where} "
               f"({M.fmt(top['value'] / 1000)} s) after {quiet} near-free step(s): each batch takes the workers that long "
               "to build, and the steps between use up the prefetched ones at once")
    rows = pl.concat([d.filter(pl.col("rank").eq_missing(top["rank"])).head(1), stalls.head(1).select(d.columns)])
    return _detection(summary, rows, {"data_ms": top["value"], "first_ms": top["_first"], "stalls": stalls.height})


def _detection(summary: str, rows: pl.DataFrame, facts: dict) -> Detection:
    first = rows.row(0, named=True)
    return Detection(summary=summary, onset=M.onset_at(first), evidence=M.quote(rows.head(2)), evidence_count=rows.height,
                     causes=CAUSES, confidence=0.85, facts=facts)
