"""torchtitan metric lines (formats.md §1.8), every era.

`step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%`
(`wps` before late 2024; no `grad_norm` before v0.2.0; `mfu: N/A` for quantized runs -> no row) and
`validate step: N  loss: ...` (-> `eval_` names). `memory` is max reserved GiB -> `mem_max_reserved_mib`
and `mem_max_reserved_pct`. Colours are already stripped by the line reader.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, groups, num, shape

MATCH = rf"^(?P<val>validate )?step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>{NUM})"
# Inside a line MATCH accepted, a plain number class is enough (the cast rejects anything odd), and it
# keeps the one-pass capture cheap.
F = r"(?:[-+]?[\d.]+(?:,\d{3})*(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf))"
FIELDS = (
    rf"^(?P<v>validate )?step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>{F})(?:\s+grad_norm:\s*(?P<gn>{F}))?"
    rf"(?:\s+memory:\s*(?P<mem>{F})GiB\((?P<mempct>{F})%\))?(?:\s+(?:tps|wps):\s*(?P<tps>{F}))?"
    rf"(?:\s+tflops:\s*(?P<tflops>{F}))?(?:\s+mfu:\s*(?:(?P<mfu>{F})%|N/A))?"
)


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """All fields in one capture pass; validation lines get `eval_` names."""
    g = groups(df, FIELDS)
    wide = g.select(
        "_i",
        pl.col("step").cast(pl.Int64, strict=False),
        pl.col("v").is_not_null().alias("_val"),
        num(pl.col("loss")).alias("loss"),
        num(pl.col("gn")).alias("grad_norm"),
        (num(pl.col("mem")) * 1024).alias("mem_max_reserved_mib"),
        num(pl.col("mempct")).alias("mem_max_reserved_pct"),
        num(pl.col("tps")).alias("tokens_per_s"),
        num(pl.col("tflops")).alias("tflops"),
        num(pl.col("mfu")).alias("mfu"),
    )
    long = wide.unpivot(index=["_i", "step", "_val"], variable_name="name", value_name="value").sort("_i", maintain_order=True)
    long = long.with_columns(pl.when(pl.col("_val")).then(pl.lit("eval_") + pl.col("name")).otherwise(pl.col("name")).alias("name"))
    return shape(long, "torchtitan")


GRAMMAR = Grammar("torchtitan", ("loss",), MATCH, extract)
