"""Caffe solver lines (glog): `Iteration N, loss = X`, `Iteration N, lr = X`, and the net outputs after them.

[OBS] wy1iu/sphereface#103, BVLC/caffe#5144, yjxiong/caffe#2, BVLC/caffe#6373, senlinuc/caffe_ocr#55:
`I0718 01:37:31.993999 23375 solver.cpp:218] Iteration 9800 (0.986216 iter/s, 101.398s/100 iters), loss = 9.61773`
(older Caffe: `Iteration 1660, loss = 2.19062`), `    Train net output #1: softmax_loss = 9.61773 (* 1 = 9.61773 loss)`,
`sgd_solver.cpp:105] Iteration 9800, lr = 0.001`, then every test interval `Iteration 3000, Testing net (#0)` and
`    Test net output #0: loss1/loss1 = 0.286547 (* 0.3 = 0.0859641 loss)`. The iteration line's loss is the
solver's (smoothed over `average_loss`) total: `loss`; the speed's `s/N iters` -> `step_time_ms` per iteration.
Train outputs keep their names, but one named `loss` is `net_output_loss` (the current batch's, which can differ
from the solver's smoothed `loss` of the same iteration, BVLC/caffe#2864); test outputs take `eval_`; an output's value is the unweighted one printed first. Outputs take the step of the
iteration line before them (a test block the step of its `Testing net` line), kept per rank across chunks.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, canonical_of, groups, num, shape

ITER = rf"(?:^|\s)Iteration (?P<it>\d+)(?: \((?P<ips>{NUM}) iter/s, (?P<sec>{NUM})s/(?P<per>\d+) iters?\))?, (?:(?P<key>loss|lr) = (?P<val>{NUM})|(?P<test>Testing net) \(#\d+\))"
OUTPUT = rf"(?:^|\s)(?P<phase>Train|Test) net output #\d+: (?P<oname>\S.*?) = (?P<oval>{NUM})(?: \(\* {NUM} = {NUM} loss\))?\s*$"
MATCH = f"{ITER}|{OUTPUT}"


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Loss, lr and speed at the iteration; net outputs at the step of the iteration (or test) line before them."""
    g = groups(groups(df, ITER), OUTPUT).with_columns(pl.col("rank").fill_null(-1).alias("_r"))
    it = pl.col("it").cast(pl.Int64, strict=False)
    # Outputs follow their iteration line; a chunk's first outputs take the last iteration of the rank before it.
    last: dict = state.setdefault("caffe_step", {})
    anchor = it.forward_fill().over("_r")
    if last:
        anchor = pl.coalesce(anchor, pl.col("_r").replace_strict(last, default=None, return_dtype=pl.Int64))
    g = g.with_columns(anchor.alias("_a"))
    for r, s in g.filter(it.is_not_null()).group_by("_r").agg(it.last()).iter_rows():
        last[r] = s
    key = pl.col("key")
    iters = g.filter(key.is_not_null()).select(
        "_i", it.alias("step"), pl.when(key == "lr").then(pl.lit("lr")).otherwise(pl.lit("loss")).alias("name"),
        num(pl.col("val")).alias("value"))
    speed = g.filter(pl.col("sec").is_not_null() & (key == "loss")).select(
        "_i", it.alias("step"), pl.lit("step_time_ms").alias("name"),
        (num(pl.col("sec")) * 1000.0 / num(pl.col("per"))).alias("value"))
    outs = g.filter(pl.col("phase").is_not_null())
    if outs.height:
        raw = outs.select("_i", "_a", "phase", pl.col("oname").str.replace_all(r"[^\w/.-]+", "_").str.strip_chars("_").alias("oname"), "oval")
        base = canonical_of(raw, "oname")
        outs = raw.with_columns(base.alias("_n")).select(
            "_i", pl.col("_a").alias("step"),
            pl.when(pl.col("phase") == "Test").then(pl.lit("eval_") + pl.col("_n"))
            .when(pl.col("_n") == "loss").then(pl.lit("net_output_loss")).otherwise(pl.col("_n")).alias("name"),
            num(pl.col("oval")).alias("value"))
        return shape(pl.concat([iters, speed, outs]).sort("_i", maintain_order=True), "caffe")
    return shape(pl.concat([iters, speed]).sort("_i", maintain_order=True), "caffe")


GRAMMAR = Grammar("caffe", (", loss = ", ", lr = ", "Testing net (#", " net output #"), MATCH, extract)
