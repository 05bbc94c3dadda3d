"""Dassl.pytorch trainers (CoOp, KgCoOp, MaPLe and other prompt-learning repos): `epoch [e/E][i/n]\\ttime ..`.

[OBS] htyao89/KgCoOp#2: `epoch [1/100][1/1]\\ttime 1.927 (1.927)\\tdata 1.723 (1.723)\\teta 0:03:10\\tloss 2.7969
(2.7969)\\tacc 48.7500 (48.7500)\\tlr 2.000000e-03`. Meters print `current (average)`: the current value is read; `time`/`data` are seconds ->
`step_time_ms`/`data_time_ms`; `eta` is no measurement. Step: the global iteration `(e - 1) * n + i` (both
printed 1-based), as for mmcv's `Epoch [e][i/n]` and semseg's `Epoch: [e/E][i/n]`.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, epoch_iteration, num, pairs, shape

HEAD = r"(?:^|\s)epoch \[(?P<e>\d+)/\d+\]\[(?P<i>\d+)/(?P<n>\d+)\]"
MATCH = HEAD + r"\s+time "
PAIR = rf"(?P<key>[a-z_]+) (?P<val>{NUM})"
NAMES = {"time": "step_time_ms", "data": "data_time_ms"}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Meters after the `epoch [e/E][i/n]` header."""
    base = df.with_columns(epoch_iteration(pl.col("msg"), HEAD).alias("step"))
    body = pl.col("msg").str.replace(r"^.*?epoch \[\d+/\d+\]\[\d+/\d+\]", "").str.replace(r"\beta \S+", "")
    kv = pairs(base, PAIR, body)
    value = num(pl.col("val"))
    rows = kv.select(
        "_i", "step", pl.col("key").replace(NAMES).alias("name"),
        pl.when(pl.col("key").is_in(list(NAMES))).then(value * 1000.0).otherwise(value).alias("value"),
    )
    return shape(rows, "dassl")


GRAMMAR = Grammar("dassl", ("epoch [",), MATCH, extract)
