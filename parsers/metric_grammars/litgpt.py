"""LitGPT / lit-gpt training lines: the optimizer step, not the micro-batch `iter`, is the step.

[OBS] Lightning-AI/litgpt#689 (lit-gpt 2023): `iter 77 step 39: loss 10.8259, iter time: 215.31ms (optimizer.step)`;
#1042 (2024): `iter 1770 | step 221: loss 1.5191, iter time: 89.96 ms`; #1607 (pretrain/finetune since
2024): `Epoch 34 | iter 3050700 step 610140 | loss train: 2.846, val: 2.861 | iter time: 112.20 ms (step)
remaining time: 0:01:54`; a fork prints `val_loss valid: 9.306` and seconds (awslabs/keys_values#97). With gradient accumulation several iters share one step; each iter's loss is its
own row. `val:` repeats the last validation loss on every line (`n/a` before the first): an `eval_loss` row
is written only where the value changes. `Epoch N` is printed 1-based and kept as printed.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, ROW_SCHEMA, Grammar, groups, num, shape

TRAIN = rf"^(?:Epoch \d+ \| )?iter \d+(?: \|)? step \d+(?::| \|) loss(?: train:)? {NUM}, "
# Validation: `iter 4800: val loss 1.7258, val time: 3778.02 ms` (#1042) or `Epoch 3 | iter 340          | val_loss:
# 8.068 | val_time: 79.794 s` (keys_values#97). `iter` is not the step: the row takes the step of the training line
# before it (textlog carries it), which LitGPT prints for the same iter just before.
VAL = (
    rf"^(?:Epoch \d+ \| )?iter \d+(?::| +\|) val[ _]loss:? (?P<vl>{NUM})(?:,| \|) val[ _]time: (?P<vt>{NUM}) ?(?P<vu>ms|s)\b"
)
MATCH = f"{TRAIN}|{VAL}"
FIELDS = (
    rf"^(?:Epoch (?P<ep>\d+) \| )?iter (?P<it>\d+)(?: \|)? step (?P<st>\d+)(?::| \|) loss(?: train:)? (?P<loss>{NUM}), "
    rf"(?:val(?:_loss \w+)?: (?P<val>\S+) \| )?iter time: (?P<ms>{NUM}) ?(?P<unit>ms|s)\b"
)


def _ms(value: pl.Expr, unit: pl.Expr) -> pl.Expr:
    return value * pl.when(unit == "s").then(1000.0).otherwise(1.0)


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Loss, iter time and epoch at the printed optimizer step; validation losses once each."""
    g = groups(groups(df, FIELDS), VAL)
    wide = g.select(
        "_i", pl.col("rank").fill_null(-1).alias("rank"),
        pl.col("st").cast(pl.Int64, strict=False).alias("step"),
        num(pl.col("ep")).alias("epoch"),
        num(pl.col("loss")).alias("loss"),
        _ms(num(pl.col("ms")), pl.col("unit")).alias("step_time_ms"),
        num(pl.col("val")).alias("_tv"),
        num(pl.col("vl")).alias("_vv"),
        _ms(num(pl.col("vt")), pl.col("vu")).alias("eval_time_ms"),
    )
    # A training line's `val:` repeats the last validation loss: it is read where it differs from the last one
    # seen on the rank (a validation line or the training line before; across chunks through `state`).
    last: dict = state.setdefault("litgpt_val", {})
    seen = pl.coalesce("_vv", "_tv")
    prev = seen.shift(1).over("rank")
    if last:
        prev = pl.coalesce(prev, pl.col("rank").replace_strict(last, default=None, return_dtype=pl.Float64))
    changed = pl.col("_tv").is_not_null() & (pl.col("_tv") != prev).fill_null(True)
    wide = wide.with_columns(pl.coalesce("_vv", pl.when(changed).then(pl.col("_tv"))).alias("eval_loss"))
    for r, v in wide.select("rank", seen.alias("v")).drop_nulls("v").group_by("rank").agg(pl.col("v").last()).iter_rows():
        last[r] = v
    long = wide.select("_i", "step", "epoch", "loss", "step_time_ms", "eval_loss", "eval_time_ms").unpivot(
        index=["_i", "step"], variable_name="name", value_name="value").sort("_i", maintain_order=True)
    return shape(long, "litgpt").cast(ROW_SCHEMA)


GRAMMAR = Grammar("litgpt", ("iter time:", "val time:", "val_time:"), MATCH, extract)
