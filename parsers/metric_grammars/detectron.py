"""detectron2 `CommonMetricPrinter` and maskrcnn-benchmark (FCOS, AdelaiDet, ...) training lines.

detectron2 ([OBS] detectron2#214, #1134, d2go#524): `[11/01 19:16:15 d2.utils.events]:  eta: 4:52:26  iter: 19
total_loss: 1.75  loss_cls: 1.248  ...  time: 0.1960  last_time: 0.19  data_time: 0.0033  last_data_time: 0.003
lr: 0.0002  max_mem: 2996M` (the eta may read `2 days, 12:13:20`). maskrcnn-benchmark ([OBS] FCOS#6):
`eta: 8:00:58  iter: 60  loss: 5.9007 (5.6273)  loss_cls: ...  time: 0.2908 (0.2888)  data: 0.0025 (0.0134)
lr: 0.003333  max mem: 2082` (meters print `median (global_avg)`: the median is read).
The step is the printed iteration. `total_loss` (detectron2's sum of the loss terms) is the training
`loss`; `time`/`data_time` are seconds -> ms; `max_mem` is MB (`max_memory_allocated / 2**20`) -> `mem_max_mib`.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, canonical_of, num, pairs, shape

MATCH = r"(?:^|\s)eta: (?:\d+ days?, )?\d+:\d{2}:\d{2}\s+iter: \d+\s"
# `max mem` has a space; forks name per-group learning rates `lr (Visual Encoder): 2.50e-06`.
PAIR = rf"(?P<key>[A-Za-z][\w/.-]*(?: mem| \([\w .-]+\))?): (?P<val>{NUM})"
NAMES = {"total_loss": "loss", "time": "step_time_ms", "batch_time": "step_time_ms", "last_time": "last_step_time_ms", "data_time": "data_time_ms",
         "data": "data_time_ms", "last_data_time": "last_data_time_ms", "max_mem": "mem_max_mib"}
SECONDS = ["time", "last_time", "batch_time", "data_time", "data", "last_data_time"]


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Every `name: value` after the iteration; the eta and the record prefix before it are not read."""
    base = df.with_columns(pl.col("msg").str.extract(r"\biter: (\d+)", 1).cast(pl.Int64, strict=False).alias("step"))
    kv = pairs(base, PAIR, pl.col("msg").str.replace(r"^.*?\biter: \d+", ""))
    key = pl.col("key").str.to_lowercase().str.replace(" ", "_", literal=True)
    # `global_step: 8` beside `iter: 8` repeats the step.
    kv = kv.with_columns(key.alias("key")).filter(pl.col("key") != "global_step")
    value = num(pl.col("val"))
    rows = kv.select(
        "_i", "step",
        canonical_of(kv, "key", NAMES).alias("name"),
        pl.when(pl.col("key").is_in(SECONDS)).then(value * 1000.0).otherwise(value).alias("value"),
    )
    return shape(rows, "detectron")


GRAMMAR = Grammar("detectron", ("iter: ",), MATCH, extract)
