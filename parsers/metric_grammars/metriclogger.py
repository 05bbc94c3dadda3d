"""MetricLogger loops (DETR, DeiT, MAE, BEiT, ConvNeXt, DINO, torchvision references) and mmengine lines.

MetricLogger.log_every (formats.md §1.15): `Epoch: [115]  [1298/1299]  eta: 0:00:00  lr: 0.001435
loss: 6.5993 (6.5971)  ...  time: 0.4944  data: 0.0001  max mem: 19152` — meters print
`median (global_avg)`: the median (the window's current value) is read. `time`/`data` are seconds ->
`step_time_ms`/`data_time_ms` (so a playbook can compute the data-time share), `max mem` is MB
(`max_memory_allocated / 2**20`) -> `mem_max_mib`, `img/s` -> `samples_per_s`. Step: the iteration
count `epoch * iters_per_epoch + i` (the epoch from `Epoch: [e]` or `Epoch: [e/E]`); `Test:` headers
give `eval_` names and no step (carried from the training lines).
mmengine (OpenMMLab, §0.1 prefix table, [OBS] mmpretrain#1632): `Epoch(train) [147][300/351]  lr: ..
eta: ..  time: 1.0105  data_time: 0.0024  memory: 48596  loss: 0.4665`, `Iter(train) [ 100/1000] ...`. Forks of
mmcv's TextLoggerHook that print the unit after the number (MCG-NJU/SparseBEV utils.py MyTextLoggerHook: `time: 9.13s,
data: 5521ms, mem: 5714M`, [OBS] MCG-NJU/SparseBEV#15) are read in that unit.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import (
    NUM,
    Grammar,
    canonical_of,
    empty_rows,
    first_token,
    num,
    pairs,
    shape,
    split_pairs,
)

ML = r"^(?P<header>.*?)\s*\[\s*(?P<i>\d+)/(?P<n>\d+)\]\s+(?:eta: \S+|[A-Za-z_][\w/.-]*: )"
# Which lines are MetricLogger's: `[i/n]  eta: ..` (the reference loops), or `Epoch: [e]  [i/n]  name: ..` when a
# fork dropped the eta meter (LLaMA2-Accessory). ML above only splits a line these accepted into groups.
ML_ETA = r"^.*?\s*\[\s*\d+/\d+\]\s+eta: \S+"
ML_NO_ETA = r"Epoch: \[\d+(?:/\d+)?\]\s+\[\s*\d+/\d+\]  [A-Za-z_][\w/.-]*: "
ML_ANY = f"{ML_ETA}|{ML_NO_ETA}"
# mmengine `Epoch(train) [e][i/n]`, `Iter(val) [i/n]`; mmcv 1.x (TextLoggerHook) has no mode on training lines:
# `Epoch [e][i/n]\tlr: ..., eta: ..., time: ..., memory: ..., loss: ...`, `Iter [i/N]\tlr: ...`.
MM = r"(?:^|\s)(?P<kind>Epoch|Iter)(?:\((?P<mode>train|val|test)\)\s*| )\[\s*(?P<a>\d+)(?:/\d+)?\](?:\[\s*(?P<b>\d+)/(?P<bn>\d+)\])?"
MM_MODE = r"(?:^|\s)(?:Epoch|Iter)\((?:train|val|test)\)\s*\[\s*\d+(?:/\d+)?\]"
MM_V1 = r"(?:^|\s)(?:Epoch \[\d+(?:/\d+)?\]\[\d+/\d+\]|Iter \[\d+/\d+\])\s+[A-Za-z_][\w.]*: "
MATCH = f"{ML_ETA}|{ML_NO_ETA}|{MM_MODE}|{MM_V1}"

SECONDS = {"time", "data", "data_time", "iter_time", "batch_time"}
NAMES = {"time": "step_time_ms", "iter_time": "step_time_ms", "batch_time": "step_time_ms", "data": "data_time_ms",
         "data_time": "data_time_ms", "max_mem": "mem_max_mib", "memory": "mem_max_mib", "wd": "weight_decay"}


def _rows(base: pl.DataFrame, text: pl.Expr, source: str, two_spaces: bool) -> pl.DataFrame:
    if two_spaces:
        # MetricLogger joins `name: median (global_avg)` meters with two spaces.
        kv = split_pairs(base, text, "  ", ": ")
    else:
        kv = pairs(base, rf"(?P<key>[A-Za-z][\w/.-]*(?: [A-Za-z][\w/.-]*)?): (?P<val>{NUM})(?:(?P<unit>ms|s)\b)?(?: \((?P<avg>{NUM})\))?", text)
    kv = kv.filter(pl.col("key") != "eta")
    raw = num(first_token(pl.col("val")))
    key = pl.col("key").str.to_lowercase().str.replace_all(" ", "_")
    # A time printed with `ms` after it is already in milliseconds; bare or `s`, in seconds.
    ms = pl.col("unit").eq_missing("ms") if "unit" in kv.columns else pl.lit(False)
    value = pl.when(key.is_in(list(SECONDS)) & ~ms).then(raw * 1000.0).otherwise(raw)
    name = canonical_of(kv, "key", NAMES)
    rows = kv.select("_i", "step", (pl.col("_pre") + name).alias("name"), value.alias("value"))
    return shape(rows, source)


def _metriclogger(df: pl.DataFrame) -> pl.DataFrame:
    g = pl.col("msg").str.extract_groups(ML)
    header = g.struct.field("header")
    epoch = header.str.extract(r"\[\s*(\d+)(?:/\d+)?\s*\]", 1).cast(pl.Int64, strict=False)
    i = g.struct.field("i").cast(pl.Int64, strict=False)
    n = g.struct.field("n").cast(pl.Int64, strict=False)
    is_test = header.str.contains(r"(?i)^\s*(?:test|val|valid|validation|eval)\b")
    base = df.with_columns(
        pl.when(is_test).then(None).otherwise(pl.when(epoch.is_not_null()).then(epoch * n + i).otherwise(i)).alias("step"),
        pl.when(is_test).then(pl.lit("eval_")).otherwise(pl.lit("")).alias("_pre"),
    )
    text = pl.col("msg").str.replace(r"^.*?\[\s*\d+/\d+\]\s+(?:eta: \S+(?:\s+days?,\s+\S+)?)?", "")
    return _rows(base, text, "metriclogger", two_spaces=True)


def _mmengine(df: pl.DataFrame) -> pl.DataFrame:
    g = pl.col("msg").str.extract_groups(MM)
    a = g.struct.field("a").cast(pl.Int64, strict=False)
    b = g.struct.field("b").cast(pl.Int64, strict=False)
    bn = g.struct.field("bn").cast(pl.Int64, strict=False)
    # mmcv 1.x training lines carry no mode.
    train = g.struct.field("mode").fill_null("train") == "train"
    # Epoch-based runs count epochs from 1: iteration = (epoch - 1) * iters_per_epoch + i.
    step = pl.when(g.struct.field("kind") == "Iter").then(a).otherwise((a - 1) * bn + b)
    base = df.with_columns(
        pl.when(train).then(step).otherwise(None).alias("step"),
        pl.when(train).then(pl.lit("")).otherwise(pl.lit("eval_")).alias("_pre"),
    )
    text = pl.col("msg").str.replace(r"^.*?" + MM, "").str.replace(r"eta: \S+(?:\s+days?,\s+\S+)?", "")
    return _rows(base, text, "mmengine", two_spaces=False)


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """MetricLogger first, then mmengine, for the lines each matches."""
    parts = []
    # mmengine's validation lines (`Epoch(val)  [2][ 3100/21046]    eta: ..`) look like MetricLogger's
    # `[i/n]  eta:` ([OBS] jbwang1997/CrossKD#15): the `(mode)` marker makes them mmengine's.
    msg = df.get_column("msg")
    hit = msg.str.contains(ML_ANY) & ~msg.str.contains(MM_MODE)
    if hit.any():
        parts.append(_metriclogger(df.filter(hit)))
    rest = df.filter(~hit)
    if rest.height:
        parts.append(_mmengine(rest))
    return pl.concat(parts) if parts else empty_rows()


GRAMMAR = Grammar("metriclogger", ("eta: ", "(train)", "(val)", "(test)", "Epoch: ["), MATCH, extract)
