"""hszhao/semseg-style loops (PSPNet/semseg, PointWeb, PAConv, their forks): `Epoch: [e/E][i/n] Data .. Batch ..`.

[OBS] CVMI-Lab/PAConv#29, liuzhengzhe/3D-to-2D-Distillation-for-Indoor-Scene-Parsing#4:
`Epoch: [1/100][2000/2976] Data 0.001 (0.004) Batch 0.911 (0.981) Remain 80:33:45 Loss nan Main Loss nan
Accuracy 0.2679.` — meters print `current (average)`: the current value is read; `Data`/`Batch` are seconds
-> `data_time_ms`/`step_time_ms`; `Remain` (time left) is not a measurement; CamelCase names become
snake_case (`MainLoss` -> `main_loss`, as `Main Loss`). Validation: `Test: [10/100] Data .. Batch .. Loss ..`
-> `eval_*` names, no step (carried from the training lines).

Step: the global iteration `(e - 1) * n + i`. The loop prints `epoch + 1` and `i + 1` (both 1-based) and
counts `current_iter = epoch * len(loader) + i + 1`, which is this; it is also how mmcv's `Epoch [e][i/n]`
lines are stepped (metriclogger.py), so one run's steps grow across epochs instead of restarting.
A record printed by two logging handlers (the file format and `INFO:main-logger:`, as PAConv#29) is one
record: a training row repeating the (step, name) of an earlier row of the chunk is dropped.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, epoch_iteration, num, pairs, shape

TRAIN = r"(?:^|[\s:])Epoch: \[(?P<e>\d+)/\d+\]\[(?P<i>\d+)/(?P<n>\d+)\] Data "
TEST = r"(?:^|[\s:])Test: \[\d+/\d+\] Data "
MATCH = f"{TRAIN}|{TEST}"
PAIR = rf"(?P<key>[A-Za-z][A-Za-z_]*(?: [A-Z][A-Za-z_]*)?) (?P<val>{NUM})"
NAMES = {"data": "data_time_ms", "batch": "step_time_ms"}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Meters after the `[e/E][i/n]` (or `Test: [i/n]`) header."""
    base = df.with_columns(epoch_iteration(pl.col("msg"), TRAIN).alias("step"))
    train = pl.col("step").is_not_null()
    body = pl.col("msg").str.replace(r"^.*?(?:Epoch|Test): \[[^ ]*\] ", "").str.replace(r"\bRemain \S+", "")
    kv = pairs(base, PAIR, body)
    key = (
        pl.col("key").str.replace_all(r"([a-z])([A-Z])", "${1}_${2}").str.to_lowercase().str.replace_all(" ", "_")
    )
    kv = kv.with_columns(key.alias("_k"))
    value = num(pl.col("val"))
    name = pl.col("_k").replace(NAMES)
    rows = kv.select(
        "_i", "step", "rank",
        pl.when(train).then(name).otherwise(pl.lit("eval_") + name).alias("name"),
        pl.when(pl.col("_k").is_in(list(NAMES))).then(value * 1000.0).otherwise(value).alias("value"),
    )
    # One record printed by two handlers: keep its first copy (training rows only: eval steps are null).
    dup = pl.col("step").is_not_null() & (pl.int_range(pl.len()).over("rank", "step", "name") > 0)
    return shape(rows.filter(~dup), "semseg")


GRAMMAR = Grammar("semseg", ("Epoch: [", "Test: ["), MATCH, extract)
