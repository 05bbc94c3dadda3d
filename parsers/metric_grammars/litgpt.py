"""LitGPT / lit-gpt training lines: the optimizer step, not the micro-batch `iter`, is the step.

[OBS] Lightning-AI/litgpt#689 (lit-gpt 2023): `iter 77 step 39: loss 10.8259, iter time: 215.31ms (optimizer.step)`;
#1042 (2024): `iter 1770 | step 221: loss 1.5191, iter time: 89.96 ms`; #1607 (pretrain/finetune since
2024): `Epoch 34 | iter 3050700 step 610140 | loss train: 2.846, val: 2.861 | iter time: 112.20 ms (step)
remaining time: 0:01:54`. With gradient accumulation several iters share one step; each iter's loss is its
own row. `val:` repeats the last validation loss on every line (`n/a` before the first): an `eval_loss` row
is written only where the value changes. `Epoch N` is printed 1-based and kept as printed.
"""

from __future__ import annotations

import polars as pl

from parsers.metric_grammars.common import NUM, ROW_SCHEMA, Grammar, empty_rows, groups, num, shape, wide_to_rows

TRAIN = rf"^(?:Epoch \d+ \| )?iter \d+(?: \|)? step \d+(?::| \|) loss(?: train:)? {NUM}, "
# `iter 4800: val loss 1.7258, val time: 3778.02 ms`: `iter` is not the step; the row takes the step of the
# training line before it (textlog carries it), which LitGPT prints for the same iter just before.
VAL = rf"^iter \d+: val loss (?P<vl>{NUM}), val time: (?P<vt>{NUM}) ?ms"
MATCH = f"{TRAIN}|{VAL}"
FIELDS = (
    rf"^(?:Epoch (?P<ep>\d+) \| )?iter (?P<it>\d+)(?: \|)? step (?P<st>\d+)(?::| \|) loss(?: train:)? (?P<loss>{NUM}), "
    rf"(?:val: (?P<val>\S+) \| )?iter time: (?P<ms>{NUM}) ?ms"
)


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Training and validation lines."""
    is_val = df.get_column("msg").str.contains(VAL)
    parts = [_train(df.filter(~is_val), state)]
    if is_val.any():
        g = groups(df.filter(is_val), VAL)
        parts.append(wide_to_rows(g, {"eval_loss": num(pl.col("vl")), "eval_time_ms": num(pl.col("vt"))}, pl.lit(None, pl.Int64), "litgpt"))
    return pl.concat(parts)


def _train(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Loss, iter time, epoch and (changed) validation loss at the printed optimizer step."""
    if df.height == 0:
        return empty_rows()
    g = groups(df, FIELDS)
    wide = g.select(
        "_i", pl.col("rank").fill_null(-1).alias("rank"),
        pl.col("st").cast(pl.Int64, strict=False).alias("step"),
        num(pl.col("ep")).alias("epoch"),
        num(pl.col("loss")).alias("loss"),
        num(pl.col("ms")).alias("step_time_ms"),
        num(pl.col("val")).alias("eval_loss"),
    )
    # `val:` is the last validation loss, repeated: keep it where it differs from the line before (per rank,
    # across chunks through `state`).
    last: dict = state.setdefault("litgpt_val", {})
    prev = pl.col("eval_loss").shift(1).over("rank")
    if last:
        wide = wide.with_columns(pl.col("rank").replace_strict(last, default=None, return_dtype=pl.Float64).alias("_prev"))
        prev = pl.coalesce(prev, pl.col("_prev"))
    changed = pl.col("eval_loss").is_not_null() & (pl.col("eval_loss") != prev).fill_null(True)
    wide = wide.with_columns(pl.when(changed).then(pl.col("eval_loss")).alias("eval_loss"))
    for r, v in g.select(pl.col("rank").fill_null(-1), num(pl.col("val")).alias("v")).drop_nulls("v").group_by("rank").agg(pl.col("v").last()).iter_rows():
        last[r] = v
    long = wide.select("_i", "step", "epoch", "loss", "step_time_ms", "eval_loss").unpivot(
        index=["_i", "step"], variable_name="name", value_name="value").sort("_i", maintain_order=True)
    return shape(long, "litgpt").cast(ROW_SCHEMA)


GRAMMAR = Grammar("litgpt", ("iter time:", "val time:"), MATCH, extract)
