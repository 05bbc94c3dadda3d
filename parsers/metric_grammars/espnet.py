"""ESPnet2 trainer lines: `{E}epoch:train:{a}-{b}batch: k=v, k=v, ...` and the per-epoch `results` line.

[OBS] espnet/espnet#2183, #2674, PR#1717: `[gpu01:0/2] 2020-07-19 08:49:04,080 (trainer:464) INFO:
1epoch:train:1-682batch: iter_time=2.878e-04, forward_time=0.134, loss=123.963, loss_att=77.448,
loss_ctc=232.499, acc=0.013, backward_time=0.111, optim_step_time=0.030, lr_0=3.460e-06, train_time=1.816`.
Each line holds the means over its batch range. Times are seconds: `train_time` (the whole iteration) ->
`step_time_ms`, `iter_time` (waiting for the data iterator) -> `data_time_ms`, other `*_time` ->
`*_time_ms`; `lr_0` (the first optimizer's lr) -> `lr`; `gpu_max_cached_mem_GB` -> `mem_max_reserved_mib`.
Step: the last batch of the range, made global across epochs (common.epoch_steps: ESPnet prints no
batches-per-epoch). `{E}epoch results: [train] .. [valid] loss=.., acc=..` is the epoch summary: its
`[train]` part repeats the means above and gives no row, its `[valid]` part gives `eval_*` rows (step
carried from the last training line).
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, empty_rows, epoch_steps, num, pairs, shape

TRAIN = r"(?:^|\s)(?P<e>\d+)epoch:train:(?P<a>\d+)-(?P<b>\d+)batch: "
RESULTS = r"(?:^|\s)\d+epoch results: \[train\]"
MATCH = f"{TRAIN}|{RESULTS}"
PAIR = rf"(?P<key>[A-Za-z][\w.]*)=(?P<val>{NUM})(?P<unit>[a-z]*)"
NAMES = {"train_time": "step_time_ms", "iter_time": "data_time_ms", "lr_0": "lr", "gpu_max_cached_mem_gb": "mem_max_reserved_mib"}
SKIP = ["time", "total_count"]


def _rows(kv: pl.DataFrame, prefix: str) -> pl.DataFrame:
    key = pl.col("key").str.to_lowercase()
    kv = kv.filter(~key.is_in(SKIP) & (pl.col("unit") == ""))
    if kv.height == 0:
        return empty_rows()
    key = pl.col("key").str.to_lowercase()
    value = num(pl.col("val"))
    is_time = key.str.ends_with("_time")
    name = key.replace(NAMES)
    name = pl.when(is_time & ~name.str.ends_with("_ms")).then(name + "_ms").otherwise(name)
    value = (
        pl.when(is_time).then(value * 1000.0)
        .when(key == "gpu_max_cached_mem_gb").then(value * 1024.0)
        .otherwise(value)
    )
    return kv.select("_i", "step", (pl.lit(prefix) + name).alias("name"), value.alias("value"))


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Training range lines (global step) and the `[valid]` part of epoch results lines."""
    train = df.filter(pl.col("msg").str.contains(TRAIN))
    parts = []
    if train.height:
        g = train.select(pl.col("msg").str.extract_groups(TRAIN).alias("_g")).unnest("_g")
        step = epoch_steps(g, pl.col("e"), pl.col("b"), state, "espnet_epochs")
        base = train.with_columns(step)
        parts.append(_rows(pairs(base, PAIR, pl.col("msg").str.replace(r"^.*?batch: ", "")), ""))
    results = df.filter(~pl.col("msg").str.contains(TRAIN))
    if results.height:
        valid = pl.col("msg").str.extract(r"\[valid\] (.*?)(?:, \[\w+\]|$)", 1)
        base = results.with_columns(pl.lit(None, pl.Int64).alias("step"))
        parts.append(_rows(pairs(base, PAIR, valid), "eval_"))
    parts = [p for p in parts if p.height]
    return shape(pl.concat(parts), "espnet") if parts else empty_rows()


GRAMMAR = Grammar("espnet", ("batch: ", "epoch results: "), MATCH, extract)
